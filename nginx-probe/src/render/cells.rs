//! The cells every text-like output shares: durations and quantiles in ns, a worker's
//! label and the rows of a per-worker table, the sampled-table markers. The text report,
//! the HTML report and the live view format their sections from these, so a figure is
//! written one way everywhere.

use std::fmt::Write as _;

use crate::model::{FdReport, Report, SyscallReport, WorkerReport};

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

/// `open/peak/limit` of a worker's fds, `-` for what is unknown.
pub(super) fn fds_cell(f: &FdReport) -> String {
    let o = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_else(|| "-".into());
    format!("{}/{}/{}", o(f.open), o(f.peak), o(f.limit))
}

/// A worker's label in the tables: its pid, its pid inside nginx's pid namespace in
/// parentheses where that differs, `+` once exited, `~` while shutting down.
pub(super) fn worker_label(w: &WorkerReport) -> String {
    let mut s = w.pid.to_string();
    if w.nspid.len() > 1 {
        let _ = write!(s, "({})", w.nspid[w.nspid.len() - 1]);
    }
    if !w.alive {
        s.push('+');
    } else if w.lifecycle.state == Some(crate::model::worker_lifecycle::WorkerState::ShuttingDown) {
        s.push('~');
    }
    s
}

/// The rows of a per-worker table: every worker with its label (`+`/`~` marks), then
/// the exited workers merged as `exited(N)` when there are any.
pub(super) fn worker_rows(r: &Report) -> Vec<(String, &WorkerReport)> {
    let merged = r
        .exited_merged
        .as_ref()
        .map(|m| (format!("exited({})", m.workers), &m.stats));
    r.workers
        .iter()
        .map(|w| (worker_label(w), w))
        .chain(merged)
        .collect()
}

/// With `--detail sampled`: "`what` the N s in windows", naming the denominator of a
/// table's per-second rates and busy shares (the in-window seconds); empty otherwise.
pub(super) fn in_window_what(r: &Report, what: &str) -> String {
    r.detail
        .as_ref()
        .map(|d| format!("{what} the {:.3} s in windows", d.in_window_s))
        .unwrap_or_default()
}

/// The marker after a sampled table's header: `[SAMPLED <coverage>%...]` with
/// `--detail sampled`, nothing with `--detail full`.
pub(super) fn sampled_tag(r: &Report, what: &str) -> String {
    match &r.detail {
        Some(d) => format!(
            "  [SAMPLED{}: {:.1}% of the period in detail windows]",
            if what.is_empty() {
                String::new()
            } else {
                format!(" ({what})")
            },
            d.coverage * 100.0
        ),
        None => String::new(),
    }
}
