//! Worker lifecycle beside the counters: which reload created each worker, whether it
//! serves or is shutting down (draining) and since when, what a draining worker still
//! holds (client and upstream connections, memory), and how each worker exited.
//!
//! Sources (filled by `collect::worker_state`): the state from nginx's own title in
//! `/proc/<pid>/cmdline` (`nginx: worker process is shutting down` once a reload or
//! `nginx -s quit` told it to stop), read every refresh; memory from `VmRSS` of
//! `/proc/<pid>/status`; connections from the worker's socket fds matched to the TCP
//! table of its network namespace (`/proc/<pid>/net/tcp{,6}`); exit status from the
//! kernel (`sched:sched_process_exit`, `task_struct.exit_code`).

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::model::{round3, WorkerReport};

/// What nginx's title says a worker is doing.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum WorkerState {
    /// `nginx: worker process`: accepting and serving.
    Serving,
    /// `nginx: worker process is shutting down`: its listening sockets are closed and
    /// it exits once its last connection ends (or at `worker_shutdown_timeout`).
    ShuttingDown,
    /// A state this version does not know (from a newer recording).
    #[serde(other)]
    Unknown,
}

/// How a worker exited, from the kernel's `task_struct.exit_code` at
/// `sched:sched_process_exit`: exactly one of `code` and `signal` is set.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct WorkerExit {
    /// Exit code (`exit()`); 0 is nginx's graceful exit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<u8>,
    /// The signal that killed it (11 SIGSEGV: a crash; 9 SIGKILL: the OOM killer or
    /// an operator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<u8>,
    /// Whether the kernel dumped a core (`exit_code & 0x80`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub core_dumped: bool,
    /// When the tracker saw it gone (the refresh after the exit; within 500 ms),
    /// seconds since the Unix epoch.
    pub seen_unix_s: f64,
    /// Whether the worker began its graceful shutdown before it exited: it entered
    /// `ngx_close_idle_connections` (uprobe), as a worker does on QUIT (`nginx -s
    /// quit`, a reload's old workers) and never on TERM/INT (`nginx -s stop`), or its
    /// title said it was shutting down at attach. None when not known (the drain
    /// uprobe not attached, or the worker born and gone between two refreshes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drained: Option<bool>,
}

/// Per worker (flattened into the JSON of a `WorkerReport`); every field is absent
/// when unknown.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct WorkerLifecycle {
    /// Which start or reload created the worker: 0 for the oldest workers seen at
    /// attach, +1 for each reload seen since (a worker nginx respawned after a crash
    /// keeps its generation). Workers draining at attach are numbered by start time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reload_generation: Option<u32>,
    /// Serving or shutting down, from `/proc/<pid>/cmdline` at the last refresh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<WorkerState>,
    /// The refresh that first saw the worker shutting down (every 500 ms, so within
    /// 500 ms after nginx retitled it), seconds since the Unix epoch; at attach, the
    /// attach time (it may have drained longer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutting_down_since_unix_s: Option<f64>,
    /// Whether `shutting_down_since_unix_s` is the attach time (it was already
    /// shutting down then).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shutting_down_before_attach: bool,
    /// Resident memory, bytes (`VmRSS` of `/proc/<pid>/status`, last refresh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    /// Draining workers: TCP connections still held whose local port is one of
    /// nginx's listening ports (clients), from its socket fds and the netns's TCP
    /// table at the last refresh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_connections: Option<u64>,
    /// Draining workers: its other TCP connections (upstreams), same source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_connections: Option<u64>,
    /// How it exited (absent while alive, or when the kernel's record is missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<WorkerExit>,
}

/// One reload generation with workers still shutting down.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct DrainingGeneration {
    /// [`WorkerLifecycle::reload_generation`].
    pub reload_generation: u32,
    /// Its workers still shutting down, by pid.
    pub workers: Vec<DrainingWorker>,
    /// The earliest `shutting_down_since_unix_s` among them.
    pub since_unix_s: f64,
    /// Whether that is the attach time (already draining then).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub since_attach: bool,
    /// Seconds from `since_unix_s` to the end of the period.
    pub draining_s: f64,
    /// Sum of the workers' client connections; None when any was unreadable.
    pub client_connections: Option<u64>,
    /// Sum of their upstream connections; None when any was unreadable.
    pub upstream_connections: Option<u64>,
    /// Sum of their RSS, bytes; None when any was unreadable.
    pub rss_bytes: Option<u64>,
}

/// One worker still shutting down (its [`WorkerLifecycle`] figures).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct DrainingWorker {
    /// The worker's host pid.
    pub pid: u32,
    /// [`WorkerLifecycle::shutting_down_since_unix_s`].
    pub since_unix_s: f64,
    /// [`WorkerLifecycle::client_connections`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_connections: Option<u64>,
    /// [`WorkerLifecycle::upstream_connections`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_connections: Option<u64>,
    /// [`WorkerLifecycle::rss_bytes`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
}

/// Worker exits in a period, by how they ended.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ExitCounts {
    /// Exit code 0 (nginx's graceful exit).
    pub graceful: u64,
    /// Non-zero exit codes.
    pub exit_code: u64,
    /// Killed by a signal.
    pub signal: u64,
    /// Signal exits by signal number (decimal string keys).
    pub by_signal: BTreeMap<String, u64>,
    /// Exits whose status the kernel did not record (see `exit_status_unknown`).
    pub unknown: u64,
}

impl ExitCounts {
    /// `N on signal S (NAME)`, one entry per signal in [`ExitCounts::by_signal`].
    pub fn signal_lines(&self) -> Vec<String> {
        self.by_signal
            .iter()
            .map(|(s, n)| {
                let name = s.parse::<u8>().map(signal_name).unwrap_or("signal");
                format!("{n} on signal {s} ({name})")
            })
            .collect()
    }

    /// Counts one exit (`None`: status unknown).
    pub fn add(&mut self, exit: Option<&WorkerExit>) {
        match exit {
            None => self.unknown += 1,
            Some(WorkerExit {
                signal: Some(s), ..
            }) => {
                self.signal += 1;
                *self.by_signal.entry(s.to_string()).or_insert(0) += 1;
            }
            Some(WorkerExit { code: Some(0), .. }) => self.graceful += 1,
            Some(_) => self.exit_code += 1,
        }
    }

    /// All exits counted.
    pub fn total(&self) -> u64 {
        self.graceful + self.exit_code + self.signal + self.unknown
    }
}

/// One worker that exited on a signal in the period.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SignalExit {
    /// The worker's host pid.
    pub pid: u32,
    /// The signal that ended it (`sched:sched_process_exit` exit code).
    pub signal: u8,
    /// Whether it dumped core.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub core_dumped: bool,
    /// When the tracker saw it gone, seconds since the Unix epoch.
    pub seen_unix_s: f64,
    /// The worker nginx started in its place (same generation), when seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced_by: Option<u32>,
}

/// The report's lifecycle part; absent when no worker drains and none exited.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LifecycleReport {
    /// Where the state comes from and how precise its times are.
    pub state_source: String,
    /// Where exit status comes from.
    pub exit_source: String,
    /// Why exit status is unknown (no BTF offset, tracepoint not attached); absent when
    /// known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status_unknown: Option<String>,
    /// Reload generations with workers still shutting down at the end of the period,
    /// oldest first.
    pub draining: Vec<DrainingGeneration>,
    /// Worker exits in the period.
    pub exits: ExitCounts,
    /// Workers that exited on a signal in the period (the last
    /// [`MAX_SIGNAL_EXITS_LISTED`]).
    pub signal_exits: Vec<SignalExit>,
    /// Workers nginx started to replace one that died in the period (respawns).
    pub respawned: u64,
}

/// Signal exits listed one by one in a report.
pub const MAX_SIGNAL_EXITS_LISTED: usize = 32;

/// Conventional name of a signal number (Linux x86-64/arm64), for advice text.
pub fn signal_name(sig: u8) -> &'static str {
    match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => "signal",
    }
}

/// Whether a signal is a crash of the worker itself (a fault or an abort), not a kill
/// from outside.
pub fn is_crash_signal(sig: u8) -> bool {
    matches!(sig, 4 | 6 | 7 | 8 | 11)
}

/// How the state and its time are known (the report's `state_source`).
pub const STATE_SOURCE: &str = "nginx's title in /proc/<pid>/cmdline ('nginx: worker process is shutting down' once told to stop), read every refresh (500 ms): shutting_down_since_unix_s is the refresh that first saw it, within 500 ms after the change";

/// Where exit status comes from (the report's `exit_source`).
pub const EXIT_SOURCE: &str =
    "kernel: sched:sched_process_exit, task_struct.exit_code (offset from BTF)";

/// What `collect::worker_state` knows of the workers' exits and respawns since
/// attach, borrowed as plain data for a period's lifecycle part ([`lifecycle_report`]).
#[derive(Clone, Debug)]
pub struct ExitHistory<'a> {
    /// The last exits seen (at most `collect::worker_state::MAX_EXIT_RECORDS`), oldest
    /// first: when the tracker saw each worker gone (seconds since the Unix epoch, at
    /// a 500 ms refresh) and its status from the kernel's exit record
    /// (`sched:sched_process_exit`; None: not recorded).
    pub recent: Vec<(f64, Option<&'a WorkerExit>)>,
    /// Every exit since attach, by how it ended.
    pub totals: &'a ExitCounts,
    /// When each of the last respawned workers' predecessors was seen gone (seconds
    /// since the Unix epoch), and how many workers nginx respawned since attach.
    pub respawns: &'a VecDeque<f64>,
    /// Workers nginx respawned since attach.
    pub respawns_total: u64,
    /// The last [`MAX_SIGNAL_EXITS_LISTED`] signal exits since attach, oldest first.
    pub signal_exits: &'a VecDeque<SignalExit>,
    /// Why exit status is unknown (from the probe: no BTF offset, tracepoint not
    /// attached); None when known.
    pub exit_unknown: Option<&'a str>,
}

/// Reload generations with live workers shutting down at `end` (seconds since the Unix
/// epoch), oldest first, from the workers' lifecycles already in `workers`: each with
/// its workers, the earliest time one was seen draining, and the sums of their
/// connections and memory (unknown if any worker's is).
fn draining(workers: &[WorkerReport], end: f64) -> Vec<DrainingGeneration> {
    let mut gens: BTreeMap<u32, DrainingGeneration> = BTreeMap::new();
    for w in workers.iter().filter(|w| w.alive) {
        let l = &w.lifecycle;
        let (Some(g), Some(WorkerState::ShuttingDown)) = (l.reload_generation, l.state) else {
            continue;
        };
        let since = l.shutting_down_since_unix_s.unwrap_or(end);
        let d = gens.entry(g).or_insert_with(|| DrainingGeneration {
            reload_generation: g,
            since_unix_s: since,
            client_connections: Some(0),
            upstream_connections: Some(0),
            rss_bytes: Some(0),
            ..Default::default()
        });
        d.workers.push(DrainingWorker {
            pid: w.pid,
            since_unix_s: since,
            client_connections: l.client_connections,
            upstream_connections: l.upstream_connections,
            rss_bytes: l.rss_bytes,
        });
        if since <= d.since_unix_s {
            d.since_unix_s = since;
            d.since_attach = l.shutting_down_before_attach;
        }
        let add = |a: Option<u64>, b: Option<u64>| Some(a? + b?);
        d.client_connections = add(d.client_connections, l.client_connections);
        d.upstream_connections = add(d.upstream_connections, l.upstream_connections);
        d.rss_bytes = add(d.rss_bytes, l.rss_bytes);
    }
    gens.into_values()
        .map(|mut d| {
            d.draining_s = round3((end - d.since_unix_s).max(0.0));
            d
        })
        .collect()
}

/// The report's lifecycle part for the period ending at `end` (seconds since the Unix
/// epoch) of `duration_s` (`summary`: since attach), from the workers' lifecycles
/// already in `workers` and the exits and respawns in `h`; None when nothing drains and
/// nothing exited.
pub fn lifecycle_report(
    h: &ExitHistory,
    workers: &[WorkerReport],
    end: f64,
    duration_s: f64,
    summary: bool,
) -> Option<LifecycleReport> {
    let draining = draining(workers, end);
    let start = end - duration_s;
    let in_period = |t: f64| summary || t >= start;
    let (exits, respawned) = if summary {
        (h.totals.clone(), h.respawns_total)
    } else {
        let mut c = ExitCounts::default();
        for (_, exit) in h.recent.iter().filter(|(seen, _)| in_period(*seen)) {
            c.add(*exit);
        }
        let n = h.respawns.iter().filter(|&&t| in_period(t)).count() as u64;
        (c, n)
    };
    let signal_exits: Vec<SignalExit> = h
        .signal_exits
        .iter()
        .filter(|s| in_period(s.seen_unix_s))
        .cloned()
        .collect();
    if draining.is_empty() && exits.total() == 0 {
        return None;
    }
    Some(LifecycleReport {
        state_source: STATE_SOURCE.to_string(),
        exit_source: EXIT_SOURCE.to_string(),
        exit_status_unknown: h.exit_unknown.map(str::to_string),
        draining,
        exits,
        signal_exits,
        respawned,
    })
}
