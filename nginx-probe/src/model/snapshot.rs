//! One reading of everything collect samples, where the collect layer ends: the kernel
//! maps' cumulative counters, the last `/proc` samples, the netns counters, nginx's
//! stub_status counters, the sampled-detail coverage, the client connection lifecycle,
//! the workers' log files and the local ports. Two of them make a period
//! (see [`crate::model::build::report`]).

use std::collections::BTreeMap;

use nginx_probe_common::DROP_COUNTERS;

use crate::model::{
    connections::{LifecycleMeta, LifecycleRaw},
    local_ports::LocalPortsReport,
    log_files::{ConfiguredLog, LogFileSample},
    nginx::StubCounts,
    sampling::Coverage,
    SlotStats,
};

/// Key in [`Snapshot::workers`] of the merged aggregate of old exited workers (no
/// worker has pid 0).
pub const MERGED_KEY: u32 = 0;

/// Cumulative state of every worker at one instant, as `collect::tracker::Tracker::snapshot`
/// reads it. Every counter is cumulative since attach (the kernel never clears them);
/// [`crate::model::build::report`] differences two snapshots.
#[derive(Clone)]
pub struct Snapshot {
    /// Worker pid -> cumulative stats (the per-CPU `STATS` map summed over CPUs; an
    /// exited worker's final stats; [`MERGED_KEY`]: the merged aggregate).
    pub workers: BTreeMap<u32, SlotStats>,
    /// Cumulative drop counters (the `DROPS` map, in `DROP_NAMES` order).
    pub drops: [u64; DROP_COUNTERS],
    /// Worker pid -> (CPU clock ticks from `/proc/<pid>/stat`, run delay ns from
    /// `/proc/<pid>/schedstat`) at the last /proc sample, for reports between two
    /// snapshots (`window`).
    pub proc: BTreeMap<u32, (Option<u64>, Option<u64>)>,
    /// The netns (ListenOverflows, ListenDrops) of `/proc/<pid>/net/netstat` and each
    /// listening socket's drop counter (sock_diag `SK_MEMINFO_DROPS`, by inode) at the
    /// last sample.
    pub listen_counters: Option<(u64, u64)>,
    /// Each listening socket's drop counter (sock_diag `SK_MEMINFO_DROPS`) at the last sample, by inode.
    pub socket_drops: BTreeMap<u32, Option<u32>>,
    /// nginx's stub_status counters since attach; None when unreadable.
    pub stub: Option<StubCounts>,
    /// With `--detail sampled`: the windows' coverage since attach.
    pub coverage: Option<Coverage>,
    /// Client connection lifecycle counters since attach, and how they were made.
    pub lifecycle: (LifecycleRaw, LifecycleMeta),
    /// The workers' open log files, and the configured log paths with the file found
    /// at each (None: the configuration was not read).
    pub log_files: Vec<LogFileSample>,
    /// The configured log paths with the file found at each; None: the configuration was not read.
    pub configured_logs: Option<Vec<ConfiguredLog>>,
    /// nginx's network namespace's local ports and TIME-WAIT.
    pub local_ports: LocalPortsReport,
    /// The QUIC connections nginx ended since attach, by call and reason
    /// (`collect::quic_reasons`); Err: why not counted.
    pub quic_ends: crate::model::quic::QuicEndCounts,
}
