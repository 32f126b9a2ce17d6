//! nginx-probe's own cost, for `/metrics`: its CPU time and resident memory from
//! `/proc/self`, and the run time of its BPF programs from the kernel's per-program
//! statistics (kept only while `kernel.bpf_stats_enabled` is 1).

use crate::collect::loader::Probe;
pub use crate::model::{OwnCost, ProgramCost};

/// Where the kernel says whether it keeps BPF run-time statistics.
pub const BPF_STATS_SYSCTL: &str = "/proc/sys/kernel/bpf_stats_enabled";

/// Whether the kernel keeps BPF run-time statistics now.
pub fn bpf_stats_enabled() -> bool {
    std::fs::read_to_string(BPF_STATS_SYSCTL)
        .map(|s| s.trim() == "1")
        .unwrap_or(false)
}

/// Reads the probe's own cost; `probe` is None between masters (exporter mode).
pub fn read(probe: Option<&Probe>) -> OwnCost {
    let me = procfs::process::Process::myself().ok();
    let stat = me.as_ref().and_then(|p| p.stat().ok());
    let tck = procfs::ticks_per_second() as f64;
    let page = procfs::page_size();
    OwnCost {
        cpu_s: stat
            .as_ref()
            .map(|s| crate::model::round3((s.utime + s.stime) as f64 / tck)),
        rss_bytes: stat.as_ref().map(|s| s.rss * page),
        programs: probe
            .filter(|_| bpf_stats_enabled())
            .map(|p| p.program_costs()),
    }
}
