//! Where a worker's writes went (access log, error log, client and upstream sockets,
//! files, pipes), as classified in the kernel or from /proc snapshots.

use std::collections::BTreeMap;

use nginx_probe_common::{sys, FD_KIND_NAMES, SYSCALL_COUNT};
use serde::{Deserialize, Serialize};

use crate::model::{quantile_ns, round3, SlotStats, WRITES_IDX};

/// How write destinations were classified.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteSource {
    /// At the moment of each write, in the kernel: the write's entry tracepoint walks
    /// the worker's fd table with struct offsets from the kernel's BTF. Exact whatever
    /// the fd's lifetime. Kinds: `client`, `upstream`, `access_log`, `error_log`,
    /// `temp_file`, `other_file`, `other`, `unknown`.
    FdTable,
    /// From `/proc/<pid>/fd` snapshots every 2 s (no BTF): an fd that lives for less
    /// than a snapshot (a temp file, a log with a variable in its path) counts as
    /// `socket`. Kinds: `socket`, `access_log`, `error_log`, `file`, `other`. Also
    /// what recordings made before the kernel classification carry.
    #[default]
    ProcSnapshot,
}

/// Writes (write, writev, pwrite64) of one worker to one kind of destination.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct WritesReport {
    /// Calls (timed from their entry).
    pub count: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Time in these calls, ns.
    pub total_ns: u64,
    /// Median latency, ns (log2-histogram estimate); None without calls, and in
    /// recordings made before it was kept (unknown, never 0).
    #[serde(default)]
    pub p50_ns: Option<u64>,
    /// 99th percentile latency, ns (log2-histogram estimate; 0 without calls).
    pub p99_ns: u64,
    /// `total_ns` over the worker's time in traced syscalls other than epoll waits,
    /// 0..=1 (None when that time is 0).
    #[serde(default)]
    pub share_of_syscall_time: Option<f64>,
    /// Calls per request (None without requests).
    pub per_request: Option<f64>,
}

/// The worker's time in traced syscalls except epoll waits (waiting for events is
/// not work), ns.
pub fn syscall_busy_ns(stats: &SlotStats) -> u64 {
    (0..SYSCALL_COUNT as u32)
        .filter(|&i| i != sys::EPOLL_WAIT && i != sys::EPOLL_PWAIT && i != sys::EPOLL_PWAIT2)
        .map(|i| stats[i as usize].total_ns)
        .sum()
}

/// The per-destination write views of one worker's (delta) stats, by kind name: the
/// kinds of `source` (see [`WriteSource`]), all listed even at 0.
pub fn writes_report(
    stats: &SlotStats,
    requests: u64,
    source: WriteSource,
) -> BTreeMap<String, WritesReport> {
    let busy = syscall_busy_ns(stats);
    let kinds: &[u32] = match source {
        WriteSource::FdTable => &nginx_probe_common::FD_KINDS_KERNEL,
        WriteSource::ProcSnapshot => &nginx_probe_common::FD_KINDS_PROC,
    };
    let mut out = BTreeMap::new();
    for &k in kinds {
        let w = &stats[WRITES_IDX + k as usize];
        out.insert(
            FD_KIND_NAMES[k as usize].to_string(),
            WritesReport {
                count: w.count,
                bytes: w.ret_sum,
                total_ns: w.total_ns,
                p50_ns: (w.count > 0).then(|| quantile_ns(&w.hist, 0.50, w.max_ns)),
                p99_ns: quantile_ns(&w.hist, 0.99, w.max_ns),
                share_of_syscall_time: (busy > 0).then(|| round3(w.total_ns as f64 / busy as f64)),
                per_request: (requests > 0).then(|| round3(w.count as f64 / requests as f64)),
            },
        );
    }
    out
}

/// Human names of the write destinations, for renderers; unknown keys (from a newer
/// recording) are shown as they are.
pub fn write_destination_label(key: &str) -> &str {
    match key {
        "client" => "client socket",
        "upstream" => "upstream socket",
        "socket" => "socket (snapshot)",
        "access_log" => "access log",
        "error_log" => "error log",
        "temp_file" => "temp file",
        "other_file" => "other file",
        "file" => "file (snapshot)",
        "other" => "pipe/other",
        "unknown" => "unknown",
        k => k,
    }
}
