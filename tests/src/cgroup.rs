//! A throwaway cgroup with a CPU quota ([`CpuCgroup`]), for the CPU quota tests.

use std::{
    fs,
    path::PathBuf,
    time::{Duration, Instant},
};

/// A throwaway cgroup with a CPU quota: cgroup v2 (`cpu.max`) when the unified
/// hierarchy has the cpu controller, else v1's `cpu` controller
/// (`cpu.cfs_quota_us`/`cpu.cfs_period_us`). Dropping it removes the directory (stop
/// the processes in it first).
pub struct CpuCgroup {
    /// The cgroup's directory.
    pub dir: PathBuf,
    /// 1 or 2.
    pub version: u8,
}

impl CpuCgroup {
    /// Creates `name` with a quota of `quota_us` per `period_us`.
    pub fn create(name: &str, quota_us: u64, period_us: u64) -> CpuCgroup {
        let v2 = fs::read_to_string("/sys/fs/cgroup/cgroup.subtree_control")
            .map(|c| c.split_whitespace().any(|x| x == "cpu"))
            .unwrap_or(false);
        let (dir, version) = if v2 {
            (PathBuf::from("/sys/fs/cgroup").join(name), 2)
        } else {
            (PathBuf::from("/sys/fs/cgroup/cpu").join(name), 1)
        };
        let _ = fs::remove_dir(&dir);
        fs::create_dir(&dir).expect("mkdir cgroup (root, cgroup fs mounted?)");
        if v2 {
            fs::write(dir.join("cpu.max"), format!("{quota_us} {period_us}")).expect("cpu.max");
        } else {
            fs::write(dir.join("cpu.cfs_period_us"), period_us.to_string()).expect("period");
            fs::write(dir.join("cpu.cfs_quota_us"), quota_us.to_string()).expect("quota");
        }
        CpuCgroup { dir, version }
    }

    /// `nr_throttled` of the cgroup's `cpu.stat`.
    pub fn nr_throttled(&self) -> u64 {
        fs::read_to_string(self.dir.join("cpu.stat"))
            .expect("cpu.stat")
            .lines()
            .find_map(|l| l.strip_prefix("nr_throttled "))
            .and_then(|v| v.trim().parse().ok())
            .expect("nr_throttled")
    }
}

impl Drop for CpuCgroup {
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while fs::remove_dir(&self.dir).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A throwaway cgroup with a process limit: cgroup v2 (`pids.max`) when the unified
/// hierarchy at `/sys/fs/cgroup` has the pids controller, else v1's `pids` controller.
/// Dropping it removes the directory (stop the processes in it first).
pub struct PidsCgroup {
    /// The cgroup's directory.
    pub dir: PathBuf,
}

impl PidsCgroup {
    /// Creates `name` with `pids.max` `max`.
    pub fn create(name: &str, max: u64) -> PidsCgroup {
        let v2 = fs::read_to_string("/sys/fs/cgroup/cgroup.subtree_control")
            .map(|c| c.split_whitespace().any(|x| x == "pids"))
            .unwrap_or(false);
        let dir = if v2 {
            PathBuf::from("/sys/fs/cgroup").join(name)
        } else {
            PathBuf::from("/sys/fs/cgroup/pids").join(name)
        };
        let _ = fs::remove_dir(&dir);
        fs::create_dir(&dir).expect("mkdir cgroup (root, pids controller mounted?)");
        fs::write(dir.join("pids.max"), max.to_string()).expect("pids.max");
        PidsCgroup { dir }
    }

    /// The `max` count of the cgroup's `pids.events`: forks refused at its limit.
    pub fn refused(&self) -> u64 {
        fs::read_to_string(self.dir.join("pids.events"))
            .expect("pids.events")
            .lines()
            .find_map(|l| l.strip_prefix("max "))
            .and_then(|v| v.trim().parse().ok())
            .expect("max")
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while fs::remove_dir(&self.dir).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
