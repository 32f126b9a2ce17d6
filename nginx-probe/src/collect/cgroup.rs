//! The CPU quota of the workers' cgroup and how often it throttled them, and the
//! process limit of the master's (`pids.max`, [`pids_limit_of`]).
//!
//! cgroup v2: `/proc/<pid>/cgroup` (`0::/path`) -> `/sys/fs/cgroup/<path>/cpu.max`
//! (`$MAX $PERIOD`, `max` = no quota), walking up to the root for the tightest quota,
//! whose `cpu.stat` (`nr_periods`, `nr_throttled`, `throttled_usec`) says how often
//! that quota stopped the cgroup's tasks. cgroup v1: the `cpu` controller's
//! `cpu.cfs_quota_us` (-1 = none), `cpu.cfs_period_us`, and `cpu.stat`
//! (`throttled_time`, ns). Every file is read with a 4 KiB cap.

use std::{
    io::Read,
    path::{Path, PathBuf},
};

use crate::model::PidsLimitReport;

/// Where cgroup file systems are mounted.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// A CPU quota in force.
#[derive(Clone, Debug, PartialEq)]
pub struct Quota {
    /// The cgroup holding it, relative to the hierarchy's root (`/` for the root).
    pub cgroup: String,
    /// 1 or 2.
    pub version: u8,
    /// Runtime allowed per period, us.
    pub quota_us: u64,
    /// Period, us.
    pub period_us: u64,
    /// Its `cpu.stat` file.
    stat: PathBuf,
}

/// Cumulative throttling counters of a quota's cgroup (`cpu.stat`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Throttling {
    /// Enforcement periods that had runnable tasks.
    pub nr_periods: u64,
    /// Of those, periods in which the quota ran out.
    pub nr_throttled: u64,
    /// Time the cgroup's tasks were stopped by the quota, us.
    pub throttled_us: u64,
}

impl Quota {
    /// The quota in CPUs (quota / period).
    pub fn cpus(&self) -> f64 {
        self.quota_us as f64 / self.period_us.max(1) as f64
    }

    /// Reads the quota cgroup's `cpu.stat` now; None when unreadable.
    pub fn throttling(&self) -> Option<Throttling> {
        parse_cpu_stat(&read_small(&self.stat)?, self.version)
    }
}

fn read_small(p: &Path) -> Option<String> {
    let f = std::fs::File::open(p).ok()?;
    let mut s = String::new();
    f.take(4096).read_to_string(&mut s).ok()?;
    Some(s)
}

/// Parses `cpu.stat`: v2 `nr_periods`, `nr_throttled`, `throttled_usec`; v1
/// `nr_periods`, `nr_throttled`, `throttled_time` (ns). Pure.
pub fn parse_cpu_stat(text: &str, version: u8) -> Option<Throttling> {
    let mut t = Throttling::default();
    let mut seen = 0;
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(k), Some(v)) = (it.next(), it.next()) else {
            continue;
        };
        let Ok(v) = v.parse::<u64>() else { continue };
        match (k, version) {
            ("nr_periods", _) => {
                t.nr_periods = v;
                seen += 1;
            }
            ("nr_throttled", _) => {
                t.nr_throttled = v;
                seen += 1;
            }
            ("throttled_usec", 2) => {
                t.throttled_us = v;
                seen += 1;
            }
            ("throttled_time", 1) => {
                t.throttled_us = v / 1000;
                seen += 1;
            }
            _ => {}
        }
    }
    (seen == 3).then_some(t)
}

/// Parses a v2 `cpu.max` (`10000 100000`, `max 100000`): Some((quota, period)) when a
/// quota is set. Pure.
pub fn parse_cpu_max(text: &str) -> Option<(u64, u64)> {
    let mut it = text.split_whitespace();
    let quota = it.next()?.parse::<u64>().ok()?;
    let period = it
        .next()
        .map(|p| p.parse::<u64>().ok())
        .unwrap_or(Some(100_000))?;
    (quota > 0 && period > 0).then_some((quota, period))
}

/// The v2 path and the v1 `cpu` controller path of a process, from the text of
/// `/proc/<pid>/cgroup`. Pure.
pub fn parse_proc_cgroup(text: &str) -> (Option<String>, Option<(String, String)>) {
    parse_proc_cgroup_for(text, "cpu")
}

/// The v2 path and the v1 path of controller `ctrl` (`cpu`, `pids`) of a process,
/// from the text of `/proc/<pid>/cgroup`. Pure.
pub fn parse_proc_cgroup_for(text: &str, want: &str) -> (Option<String>, Option<(String, String)>) {
    let mut v2 = None;
    let mut v1 = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_id), Some(ctrl), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if ctrl.is_empty() {
            v2 = Some(path.to_string());
        } else if ctrl.split(',').any(|c| c == want) {
            v1 = Some((ctrl.to_string(), path.to_string()));
        }
    }
    (v2, v1)
}

/// The tightest CPU quota over `pid`'s cgroup and its ancestors (a quota on a parent
/// binds its children too), or None when there is none or nothing is readable.
pub fn quota_of(pid: u32) -> Option<Quota> {
    let text = read_small(Path::new(&format!("/proc/{pid}/cgroup")))?;
    let (v2, v1) = parse_proc_cgroup(&text);
    if let Some(path) = v2 {
        if let Some(q) = tightest(Path::new(CGROUP_ROOT), &path, 2) {
            return Some(q);
        }
    }
    let (ctrl, path) = v1?;
    tightest(&Path::new(CGROUP_ROOT).join(ctrl), &path, 1)
}

/// `path` relative to its hierarchy's root; None for anything but a plain relative
/// path (a `..` or `.` component).
fn plain_relative(path: &str) -> Option<&str> {
    let rel = path.trim_start_matches('/');
    (!rel.split('/').any(|c| c == ".." || c == ".")).then_some(rel)
}

/// The process limit binding `pid` (its master's forks): of its cgroup and its
/// ancestors with a `pids.max` set (cgroup v2, else v1's `pids` controller), the
/// nearest whose `pids.events` counts refused forks (`max N`, N > 0), else the
/// tightest; with its `pids.current`. None when no level sets one or nothing is
/// readable. Every file is read with a 4 KiB cap.
pub fn pids_limit_of(pid: u32) -> Option<PidsLimitReport> {
    let text = read_small(Path::new(&format!("/proc/{pid}/cgroup")))?;
    let (v2, v1) = parse_proc_cgroup_for(&text, "pids");
    let v2 = v2
        .filter(|_| Path::new(CGROUP_ROOT).join("cgroup.controllers").exists())
        .and_then(|p| pids_levels(Path::new(CGROUP_ROOT), &p, 2));
    v2.or_else(|| {
        let (ctrl, path) = v1?;
        pids_levels(&Path::new(CGROUP_ROOT).join(ctrl), &path, 1)
    })
}

fn pids_levels(root: &Path, path: &str, version: u8) -> Option<PidsLimitReport> {
    let mut cur = PathBuf::from(plain_relative(path)?);
    let mut levels = Vec::new();
    loop {
        let dir = root.join(&cur);
        let num = |f: &str| read_small(&dir.join(f)).and_then(|t| t.trim().parse::<u64>().ok());
        if let Some(max) = num("pids.max") {
            levels.push(PidsLimitReport {
                cgroup: format!("/{}", cur.display()),
                cgroup_version: version,
                max,
                current: num("pids.current"),
                refused: read_small(&dir.join("pids.events")).and_then(|t| parse_pids_events(&t)),
            });
        }
        if !cur.pop() {
            break;
        }
    }
    let refused = levels.iter().position(|l| l.refused.is_some_and(|n| n > 0));
    match refused {
        Some(i) => Some(levels.swap_remove(i)),
        None => levels.into_iter().min_by_key(|l| l.max),
    }
}

/// The `max` count of a `pids.events` file (`max 2`): forks the limit refused. Pure.
pub fn parse_pids_events(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("max ")?.trim().parse().ok())
}

fn tightest(root: &Path, path: &str, version: u8) -> Option<Quota> {
    // Refuse anything but a plain relative path under the root.
    let rel = plain_relative(path)?;
    let mut best: Option<Quota> = None;
    let mut cur = PathBuf::from(rel);
    loop {
        let dir = root.join(&cur);
        let q = if version == 2 {
            read_small(&dir.join("cpu.max")).and_then(|t| parse_cpu_max(&t))
        } else {
            let quota = read_small(&dir.join("cpu.cfs_quota_us"))
                .and_then(|t| t.trim().parse::<i64>().ok())
                .filter(|&q| q > 0);
            let period = read_small(&dir.join("cpu.cfs_period_us"))
                .and_then(|t| t.trim().parse::<u64>().ok());
            quota.zip(period).map(|(q, p)| (q as u64, p))
        };
        if let Some((quota_us, period_us)) = q {
            let cand = Quota {
                cgroup: format!("/{}", cur.display()),
                version,
                quota_us,
                period_us,
                stat: dir.join("cpu.stat"),
            };
            if best.as_ref().is_none_or(|b| cand.cpus() < b.cpus()) {
                best = Some(cand);
            }
        }
        if !cur.pop() {
            break;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pids_files() {
        assert_eq!(parse_pids_events("max 2\n"), Some(2));
        assert_eq!(parse_pids_events("max 0\n"), Some(0));
        assert_eq!(parse_pids_events("maxx 2\n"), None);
        let (_, v1) = parse_proc_cgroup_for("8:pids:/np-pids\n4:memory:/x\n", "pids");
        assert_eq!(v1, Some(("pids".into(), "/np-pids".into())));
        assert_eq!(plain_relative("/a/../b"), None);
    }

    #[test]
    fn parses_cgroup_files() {
        assert_eq!(parse_cpu_max("10000 100000\n"), Some((10_000, 100_000)));
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        let (v2, v1) = parse_proc_cgroup("0::/np-case16\n");
        assert_eq!(v2.as_deref(), Some("/np-case16"));
        assert_eq!(v1, None);
        let (_, v1) = parse_proc_cgroup("4:cpu,cpuacct:/docker/abc\n3:memory:/docker/abc\n");
        assert_eq!(v1, Some(("cpu,cpuacct".into(), "/docker/abc".into())));
        let t = parse_cpu_stat(
            "usage_usec 5\nnr_periods 120\nnr_throttled 30\nthrottled_usec 2500000\n",
            2,
        );
        assert_eq!(
            t,
            Some(Throttling {
                nr_periods: 120,
                nr_throttled: 30,
                throttled_us: 2_500_000
            })
        );
        let t1 = parse_cpu_stat("nr_periods 4\nnr_throttled 2\nthrottled_time 3000000\n", 1);
        assert_eq!(t1.map(|t| t.throttled_us), Some(3000));
        assert_eq!(parse_cpu_stat("nr_periods 4\n", 2), None);
    }
}
