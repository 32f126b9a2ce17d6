//! How the outputs write a duration: a number of ns with a unit a person reads at a
//! glance, a histogram's percentile that may not exist, a syscall's latency that may
//! not be timed. Shared by every medium ([`super::sections`], the text report, the
//! HTML page, the live view).

use crate::model::{Report, SyscallReport};

/// Formats a duration in ns with a unit a person reads at a glance: `850ns`, `12.3us`,
/// `4.50ms`, `1.23s`.
pub fn fmt_ns(ns: u64) -> String {
    if ns < 1_000 {
        format!("{ns}ns")
    } else if ns < 1_000_000 {
        format!("{:.1}us", ns as f64 / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2}ms", ns as f64 / 1e6)
    } else {
        format!("{:.2}s", ns as f64 / 1e9)
    }
}

/// A percentile (or the max) of a histogram holding `samples` values, as [`fmt_ns`];
/// `none` for an empty histogram, which has no percentile (never shown as `0ns`).
pub fn fmt_quantile_ns(samples: u64, ns: u64) -> String {
    if samples == 0 {
        "none".into()
    } else {
        fmt_ns(ns)
    }
}

/// A syscall's latency figure (`ns`: its p50, p99, max or total) for the tables: `-`
/// when the syscall is counted, not timed ([`Report::syscall_timed`]), else
/// [`fmt_quantile_ns`] over its timed calls (`none` when none was timed; the total as
/// [`fmt_ns`]).
pub fn fmt_syscall_ns(r: &Report, name: &str, s: &SyscallReport, ns: u64, total: bool) -> String {
    match (r.syscall_timed(name), total) {
        (false, _) => "-".into(),
        (true, true) => fmt_ns(ns),
        (true, false) => fmt_quantile_ns(s.timed, ns),
    }
}
