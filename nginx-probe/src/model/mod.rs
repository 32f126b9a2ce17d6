//! Pure aggregation: per-CPU sums, per-interval deltas, log2-histogram quantiles, and the
//! report model that text and JSON are rendered from; no kernel access, unit-tested.

use std::collections::BTreeMap;

use nginx_probe_common::{
    sys, RetKind, SyscallStats, DROP_COUNTERS, DROP_NAMES, ERR_CLASSES, ERR_CLASS_NAMES,
    FD_KIND_COUNT, HIST_BUCKETS, SYSCALLS, SYSCALL_COUNT, TLS_STATS, UPSTREAM_STATS,
};
use serde::{Deserialize, Serialize};

pub mod access_log;
pub mod access_log_format;
pub mod build;
pub mod clock;
pub mod config;
pub mod config_defaults;
mod config_quote;
pub mod config_tree;
pub mod config_version;
pub mod connections;
pub mod error_classes;
pub mod idle;
pub mod listen;
pub mod listener_closes;
pub use listen::{ListenNamespaceReport, ListenReport};
pub mod local_ports;
pub mod log_files;
pub mod masters;
pub mod nginx;
pub mod nginx_errors;
pub mod recording;
pub mod reloads;
pub mod upstream_lifecycle;
pub mod worker_lifecycle;
pub use nginx::{
    CpuQuotaReport, ErrorClassReport, NginxErrorsReport, PeerErrorsReport, PeerRestReport,
    PidsLimitReport, ProcessHistoryReport,
};
mod fds;
pub use fds::*;
mod requests;
pub use requests::*;
mod upstream;
pub use upstream::*;
mod writes;
pub use writes::*;
pub mod quic;
pub mod sampling;
pub mod snapshot;
pub mod tls_unused;

/// Version of the JSON document; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// Latest wall-clock time a report or recording may carry: 9999-12-31 23:59:59 UTC,
/// seconds since the Unix epoch (RFC 3339 has four-digit years). Recordings beyond it
/// are refused when read.
pub const MAX_UNIX_S: f64 = 253_402_300_799.0;

/// `v` rounded to 3 decimals, the precision reports carry (ms for seconds, 0.1% for
/// shares).
pub fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// [`round3`] as a JSON number, for verdict evidence.
pub fn round3_json(v: f64) -> serde_json::Value {
    serde_json::json!(round3(v))
}

/// Sums one map slot's per-CPU values: counters add, `max_ns` takes the maximum.
pub fn sum_cpus<'a>(values: impl IntoIterator<Item = &'a SyscallStats>) -> SyscallStats {
    let mut acc = SyscallStats::ZERO;
    for v in values {
        acc.count += v.count;
        acc.errors += v.errors;
        acc.timed += v.timed;
        acc.total_ns += v.total_ns;
        acc.ret_sum += v.ret_sum;
        acc.max_ns = acc.max_ns.max(v.max_ns);
        for i in 0..ERR_CLASSES {
            acc.errs[i] += v.errs[i];
        }
        for i in 0..HIST_BUCKETS {
            acc.hist[i] += v.hist[i];
        }
    }
    acc
}

/// Lower and upper bound (inclusive) of log2 bucket `b`, ns.
pub fn bucket_bounds(b: usize) -> (u64, u64) {
    let lo = if b == 0 { 0 } else { 1u64 << b };
    let hi = (1u64 << (b + 1)) - 1;
    (lo, hi)
}

/// The change between two cumulative snapshots of one slot (`cur` taken after `prev`).
///
/// Counters subtract. The kernel keeps an all-time `max_ns`, so the interval's max is
/// exact when it set a new all-time max; otherwise it is the upper bound of the highest
/// non-empty bucket of the interval's histogram, capped by the all-time max.
pub fn delta(cur: &SyscallStats, prev: &SyscallStats) -> SyscallStats {
    let mut d = SyscallStats::ZERO;
    d.count = cur.count.saturating_sub(prev.count);
    d.errors = cur.errors.saturating_sub(prev.errors);
    d.timed = cur.timed.saturating_sub(prev.timed);
    d.total_ns = cur.total_ns.saturating_sub(prev.total_ns);
    d.ret_sum = cur.ret_sum.saturating_sub(prev.ret_sum);
    for i in 0..ERR_CLASSES {
        d.errs[i] = cur.errs[i].saturating_sub(prev.errs[i]);
    }
    for i in 0..HIST_BUCKETS {
        d.hist[i] = cur.hist[i].saturating_sub(prev.hist[i]);
    }
    d.max_ns = if d.timed == 0 {
        0
    } else if cur.max_ns > prev.max_ns {
        cur.max_ns
    } else {
        match d.hist.iter().rposition(|&c| c > 0) {
            Some(b) => bucket_bounds(b).1.min(cur.max_ns),
            None => 0,
        }
    };
    d
}

/// Estimates quantile `q` (0..=1) of a log2 histogram, ns: finds the bucket holding the
/// q-th sample and interpolates linearly inside it, capped at `max_ns` when known (> 0).
/// The estimate is within the bucket, so within a factor of 2. Returns 0 when empty.
pub fn quantile_ns(hist: &[u64], q: f64, max_ns: u64) -> u64 {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return 0;
    }
    let target = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut before = 0u64;
    for (b, &c) in hist.iter().enumerate() {
        if c == 0 {
            continue;
        }
        if before + c >= target {
            let (lo, mut hi) = bucket_bounds(b);
            if b == hist.len() - 1 && max_ns > hi {
                hi = max_ns;
            }
            let frac = (target - before) as f64 / c as f64;
            let v = lo + ((hi - lo) as f64 * frac) as u64;
            return if max_ns > 0 { v.min(max_ns) } else { v };
        }
        before += c;
    }
    max_ns
}

/// Number of [`SyscallStats`] per worker: one per traced syscall, then the HTTP
/// requests (uprobes) at [`REQUESTS_IDX`], then the event-loop iterations at
/// [`LOOP_IDX`].
pub const SLOT_STATS: usize = SYSCALL_COUNT
    + 2
    + FD_KIND_COUNT
    + 2
    + TLS_STATS as usize
    + UPSTREAM_STATS as usize
    + 2
    + nginx_probe_common::lifecycle::worker::LC_PER_WORKER;

/// Index in [`SlotStats`] whose `count` is the worker's accepts, from the source the
/// run uses: the `ngx_get_connection` uprobe (every fd accept4/accept returned to nginx,
/// continuous with no syscall tracepoint; `--detail sampled`), or the accept4/accept
/// exit tracepoints' successes ([`tracepoint_accepts`]).
pub const ACCEPTED_IDX: usize = UPSTREAM_IDX + UPSTREAM_STATS as usize;

/// Index in [`SlotStats`] whose `count` is the worker's completed TLS handshakes on
/// client connections, from the source the run uses: the `ngx_ssl_ocsp_validate`
/// uprobe (continuous in every detail mode), or `SSL_do_handshake` returning 1 (the
/// `timed` of [`TLS_IDX`]).
pub const TLS_DONE_IDX: usize = ACCEPTED_IDX + 1;

/// Index of the worker's client connection closes in [`SlotStats`]: the `count` of
/// `CLOSES_IDX + c` is counter `c` of `nginx_probe_common::lifecycle::worker` (closes
/// the worker's own `close()` made, counted by the lifecycle's
/// `sock:inet_sock_set_state` program in the worker's context; 0 without it).
pub const CLOSES_IDX: usize = TLS_DONE_IDX + 1;

/// Index in [`SlotStats`] whose `count` is openat calls that returned an access-log fd
/// (`access_log_open` program on `syscalls:sys_exit_openat`, classified like a write's
/// fd).
pub const LOG_OPENS_IDX: usize = SYSCALL_COUNT + 2 + FD_KIND_COUNT + 1;

/// Index of the TLS handshake stats in [`SlotStats`] (uprobes on libssl's
/// `SSL_do_handshake`/`SSL_free`): handshakes at `TLS_IDX` (`count` started, `timed`
/// and `hist` completed ones' wall time, ns, `errors` abandoned), `SSL_do_handshake`
/// calls at `TLS_IDX + 1` (`count`, time inside them, ns).
pub const TLS_IDX: usize = SYSCALL_COUNT + 2 + FD_KIND_COUNT + 2;

/// Index of the upstream connection stats in [`SlotStats`]: `UPSTREAM_STATS` elements
/// laid out as `nginx_probe_common::UPSTREAM_STATS` says (connect outcomes and latency,
/// then upstream fds).
pub const UPSTREAM_IDX: usize = TLS_IDX + TLS_STATS as usize;

/// Index in [`SlotStats`] whose `count` is connections closed right after accept
/// (`close_after_accept` program on `syscalls:sys_enter_close`).
pub const ACCEPT_CLOSE_IDX: usize = SYSCALL_COUNT + 2 + FD_KIND_COUNT;

/// Index of the first per-destination write stats in [`SlotStats`] (one per `fd_kind`).
pub const WRITES_IDX: usize = SYSCALL_COUNT + 2;

/// Index of the event-loop iteration stats in [`SlotStats`]: `count` iterations,
/// `total_ns` busy time outside epoll waits, `max_ns`/`hist` iteration lengths.
pub const LOOP_IDX: usize = SYSCALL_COUNT + 1;

/// Index of the HTTP request stats in [`SlotStats`].
pub const REQUESTS_IDX: usize = SYSCALL_COUNT;

/// Cumulative in-kernel state of one worker, summed over CPUs: one [`SyscallStats`]
/// per traced syscall, then the HTTP requests (`count` = requests started, `timed` and
/// `hist` = request durations, ns; zero without `--uprobes`).
pub type SlotStats = [SyscallStats; SLOT_STATS];

/// All-zero [`SlotStats`].
// A const (not a static) so that it can seed arrays and be copied in const contexts;
// 18 KB, copied only when a slot is zeroed.
#[allow(clippy::large_const_arrays)]
pub const ZERO_SLOT: SlotStats = [SyscallStats::ZERO; SLOT_STATS];

/// [`delta`] of every element of a worker's stats.
pub fn delta_slot(cur: &SlotStats, prev: &SlotStats) -> SlotStats {
    let mut d = ZERO_SLOT;
    for (d, (c, p)) in d.iter_mut().zip(cur.iter().zip(prev.iter())) {
        *d = delta(c, p);
    }
    d
}

/// For `skip_serializing_if`: a zero count is left out.
pub fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Adds `x` into `acc`, element by element (counters add, max of `max_ns`).
pub fn add_slot(acc: &mut SlotStats, x: &SlotStats) {
    for (a, x) in acc.iter_mut().zip(x.iter()) {
        *a = sum_cpus([&*a, x]);
    }
}

/// A worker as the tracker knows it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkerInfo {
    /// Host pid (tgid).
    pub pid: u32,
    /// `NSpid` from `/proc/<pid>/status`, host pid first.
    pub nspid: Vec<i32>,
    /// Slot in the stats map (slots are reused after a worker exits).
    pub slot: u32,
    /// How many workers held `slot` before this one: (slot, generation) names a worker
    /// without its pid, for metrics labels.
    pub generation: u32,
    /// False once the worker has exited.
    pub alive: bool,
    /// Last fd sample.
    #[serde(skip)]
    pub fds: FdReport,
    /// CPU time (utime + stime, `/proc/<pid>/stat`), clock ticks.
    #[serde(skip)]
    pub cpu_ticks: Samples,
    /// Time spent runnable but waiting for a CPU (`/proc/<pid>/schedstat` run_delay), ns.
    #[serde(skip)]
    pub run_delay_ns: Samples,
}

/// A cumulative per-process counter sampled from /proc every 500 ms: its value at the
/// first sample, at the start of the current interval, and at the last sample.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Samples {
    /// The first sample (at attach or when first readable).
    pub first: Option<u64>,
    /// The sample when the current interval started.
    pub interval: Option<u64>,
    /// The last sample.
    pub last: Option<u64>,
}

impl Samples {
    /// Records a sample (None: unreadable, keeps what was known).
    pub fn sample(&mut self, v: Option<u64>) {
        if let Some(v) = v {
            self.first = self.first.or(Some(v));
            self.interval = self.interval.or(Some(v));
            self.last = Some(v);
        }
    }

    /// The current interval starts at the last sample.
    pub fn start_interval(&mut self) {
        self.interval = self.last;
    }

    /// Growth since attach (`summary`) or since the interval started.
    pub fn delta(&self, summary: bool) -> Option<u64> {
        let base = if summary { self.first } else { self.interval };
        Some(self.last?.saturating_sub(base?))
    }
}

/// One syscall's numbers for one worker over a period, as reported.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SyscallReport {
    /// Exits seen (successes and errors).
    pub count: u64,
    /// Exits with a negative return (EAGAIN included).
    pub errors: u64,
    /// Errors by errno class, only the non-zero ones.
    pub errnos: BTreeMap<String, u64>,
    /// Exits timed from their entry (the rest were in flight at attach).
    pub timed: u64,
    /// Sum of timed latencies, ns.
    pub total_ns: u64,
    /// Median latency estimate from the log2 histogram, ns.
    pub p50_ns: u64,
    /// 99th percentile latency estimate from the log2 histogram, ns.
    pub p99_ns: u64,
    /// Longest latency, ns (see [`delta`] for interval precision).
    pub max_ns: u64,
    /// Bytes returned (I/O syscalls only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Ready events returned (epoll only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<u64>,
    /// log2 latency histogram, ns: entry `i` counts latencies in `[2^i, 2^(i+1))`.
    pub hist_log2_ns: Vec<u64>,
}

impl SyscallReport {
    /// Builds the report of one syscall from its (summed, possibly delta) stats.
    pub fn from_stats(syscall: usize, s: &SyscallStats) -> SyscallReport {
        let mut errnos = BTreeMap::new();
        for (i, &n) in s.errs.iter().enumerate() {
            if n > 0 {
                errnos.insert(ERR_CLASS_NAMES[i].to_string(), n);
            }
        }
        let kind = SYSCALLS[syscall].ret;
        SyscallReport {
            count: s.count,
            errors: s.errors,
            errnos,
            timed: s.timed,
            total_ns: s.total_ns,
            p50_ns: quantile_ns(&s.hist, 0.50, s.max_ns),
            p99_ns: quantile_ns(&s.hist, 0.99, s.max_ns),
            max_ns: s.max_ns,
            bytes: (kind == RetKind::Bytes).then_some(s.ret_sum),
            events: (kind == RetKind::Events).then_some(s.ret_sum),
            hist_log2_ns: s.hist.to_vec(),
        }
    }
}

/// A worker's event loop over a period: iterations from an epoll wait's return to the
/// next epoll wait call (syscall tracepoints, main thread).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LoopReport {
    /// Iterations completed.
    pub iterations: u64,
    /// Time outside epoll waits (busy), ns.
    pub busy_ns: u64,
    /// busy_ns / the seconds the detail layer was attached, 0..1: the period with
    /// `--detail full`, the in-window seconds (`detail.in_window_s`) with `--detail
    /// sampled` (see [`detail_seconds`]).
    pub busy_share: f64,
    /// 99th percentile iteration length, ns (log2-histogram estimate).
    pub p99_iteration_ns: u64,
    /// Longest iteration, ns: while it ran, every other connection of the worker waited.
    pub max_iteration_ns: u64,
}

/// The seconds over which the detail layer counted in a period of `duration_s`
/// seconds: the whole period with `--detail full` (`detail` None), the windows'
/// attached seconds (`DetailReport::in_window_s`, as the JSON carries it) with
/// `--detail sampled`. Every per-second rate and busy share of a detail figure
/// (event loop, upstream connects, writes, detail syscalls) divides by this.
pub fn detail_seconds(duration_s: f64, detail: Option<&sampling::DetailReport>) -> f64 {
    match detail {
        Some(d) => d.in_window_s,
        None => duration_s,
    }
}

/// The event-loop view of one worker's (delta) stats, counted over `detail_s` seconds
/// (see [`detail_seconds`]).
pub fn loop_report(stats: &SlotStats, detail_s: f64) -> LoopReport {
    let l = &stats[LOOP_IDX];
    LoopReport {
        iterations: l.count,
        busy_ns: l.total_ns,
        busy_share: if detail_s > 0.0 {
            round3(l.total_ns as f64 / 1e9 / detail_s)
        } else {
            0.0
        },
        p99_iteration_ns: quantile_ns(&l.hist, 0.99, l.max_ns),
        max_iteration_ns: l.max_ns,
    }
}

/// One worker over a period.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkerReport {
    /// Host pid (tgid).
    pub pid: u32,
    /// Worker slot in the kernel maps (0-based; reused after a worker exits).
    #[serde(default)]
    pub slot: u32,
    /// How many workers held `slot` before this one.
    #[serde(default)]
    pub generation: u32,
    /// `NSpid`: host pid first, pid inside nginx's own namespace last.
    pub nspid: Vec<i32>,
    /// False when the worker exited during the run.
    pub alive: bool,
    /// Successful `accept4` + `accept` returns in this worker (syscall exit tracepoints).
    pub accepts: u64,
    /// Share of all workers' accepts, 0..=1 (0 when nobody accepted).
    pub accept_share: f64,
    /// Failed accepts by errno class, all classes present (EAGAIN = queue empty).
    pub accept_errors: BTreeMap<String, u64>,
    /// HTTP requests: count, rate, per connection, syscalls per request.
    pub requests: RequestsReport,
    /// File descriptors: open, peak, limit.
    pub fds: FdReport,
    /// Event-loop iterations and busy time.
    pub event_loop: LoopReport,
    /// CPU time used in the period, seconds (`/proc/<pid>/stat` utime + stime, sampled
    /// every 500 ms); None when unreadable.
    pub cpu_s: Option<f64>,
    /// Time the worker was runnable but waiting for a CPU in the period, seconds
    /// (`/proc/<pid>/schedstat` run_delay, sampled every 500 ms): other load on the
    /// machine, or more workers than cores. None when unreadable.
    #[serde(default)]
    pub run_delay_s: Option<f64>,
    /// Connections closed right after accept, before any other traced syscall: nginx's
    /// "worker_connections are not enough" path.
    pub accepted_then_closed: u64,
    /// write/writev/pwrite64 by destination (the report's `write_destinations` says
    /// how they were classified and which kinds there are).
    pub writes: BTreeMap<String, WritesReport>,
    /// openat calls that returned an access-log fd (an access log reopened per request
    /// has a variable in its path and no `open_log_file_cache`): `access_log_open` on
    /// `sys_exit_openat`. None when not counted (no BTF, or an old recording).
    #[serde(default)]
    pub access_log_opens: Option<u64>,
    /// Per traced syscall, by name; every traced syscall is present (see the report's
    /// `traced_syscalls`).
    pub syscalls: BTreeMap<String, SyscallReport>,
    /// Upstream connections the worker opened (socket + connect).
    #[serde(default)]
    pub upstream: UpstreamReport,
    /// EMFILE/ENFILE by fd-creating syscall (`openat`, `socket`, `accept4`, `pipe2`,
    /// ...), every one present.
    #[serde(default)]
    pub fd_errors: BTreeMap<String, FdErrors>,
    /// Client connections the worker's own `close()` ended (see
    /// [`connections::WorkerCloses`]); None without the connection lifecycle programs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections_closed: Option<connections::WorkerCloses>,
    /// Reload generation, serving or shutting down, memory, exit (see [`worker_lifecycle`]).
    #[serde(flatten)]
    pub lifecycle: worker_lifecycle::WorkerLifecycle,
}

/// Which period a report covers (JSON: `"interval"` or `"summary"`).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ReportKind {
    /// One interval (`--interval` seconds, or the last partial one).
    Interval,
    /// The whole run since attach.
    Summary,
    /// The recent window the exporter's verdict gauges judge (`--verdict-window`; never
    /// printed or recorded).
    Window,
}

/// What happened to one of the master's processes (JSON: its snake_case name).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A worker appeared (forked by a reload or a respawn, or found in /proc).
    WorkerStarted,
    /// A worker exited; its counts stay in the report.
    WorkerExited,
    /// A new master was forked under ours (binary upgrade, USR2): the master's child
    /// running nginx's binary, once `/proc` titles it a master (nginx does after its
    /// configuration loaded).
    NewMaster,
    /// A binary upgrade that failed: a child of the master exited before it was titled
    /// a worker or a master (nginx exits 1 when `execve()` of the new binary fails, and
    /// the new binary exits 1 when its configuration does not load; a worker that fails
    /// to start exits 2). Neither a worker nor a master: not counted as one.
    NewMasterFailed,
    /// Exporter mode attached to this master after the previous one exited.
    MasterRestart,
    /// An event this version does not know (from a newer recording): never shown
    /// verbatim, since recordings are input from others.
    #[serde(other)]
    Unknown,
}

/// Something that happened to the master's processes during the run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Event {
    /// Seconds since attach.
    pub t_s: f64,
    /// What happened.
    pub event: EventKind,
    /// Host pid of the process.
    pub pid: u32,
}

/// A binary upgrade's new master running beside the traced one (see
/// `Report::new_master_beside`).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct NewMasterBeside {
    /// Its host pid.
    pub pid: u32,
    /// Seconds since attach it was first seen a master (`/proc/<pid>/cmdline`).
    pub since_s: f64,
}

/// Old exited workers merged into one aggregate (beyond the most recent 16 exited, `tracker::MAX_EXITED_KEPT`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MergedReport {
    /// How many exited workers are merged here.
    pub workers: u64,
    /// Their summed numbers (`pid` is 0).
    #[serde(flatten)]
    pub stats: WorkerReport,
}

/// A whole report: an interval or the summary at exit.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// [`SCHEMA_VERSION`].
    pub schema: u32,
    /// Findings, most severe first (see `verdict`).
    pub verdicts: Vec<Verdict>,
    /// Rules the period could not judge, with why (`analysis::not_judged`); absent
    /// when every rule could be, and in recordings made before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_judged: Vec<NotJudged>,
    /// An interval's report or the summary since attach (JSON `"type"`).
    #[serde(rename = "type")]
    pub kind: ReportKind,
    /// Wall-clock end of the period, seconds since the Unix epoch.
    pub time_unix_s: f64,
    /// Host pid of the nginx master.
    pub master_pid: u32,
    /// `NSpid` of the master.
    pub master_nspid: Vec<i32>,
    /// Length of the period covered, seconds.
    pub duration_s: f64,
    /// Workers in pid order.
    pub workers: Vec<WorkerReport>,
    /// All of nginx's requests in the period, with their source (`stub_status` when
    /// the binary exports nginx's counters).
    #[serde(default)]
    pub requests: RequestTotals,
    /// nginx's own counters (accepted, handled, requests, gauges); absent when the
    /// binary does not export them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stub_status: Option<StubStatusReport>,
    /// TLS handshakes (count, wall and CPU time); absent when libssl's uprobes are not
    /// attached (nginx without TLS, or `--no-tls`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsReport>,
    /// nginx's listening sockets: accept queue against backlog, the socket's own drops.
    pub listen: Vec<ListenReport>,
    /// Listen overflows and drops of nginx's network namespace in the period, once
    /// (TcpExt: namespace-wide, not per socket); absent when unreadable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen_namespace: Option<listen::ListenNamespaceReport>,
    /// How `writes` destinations were classified (absent in old recordings:
    /// `proc_snapshot`).
    #[serde(default)]
    pub write_destinations: WriteSource,
    /// Log files the workers hold: path -> `access_log` (a regular file open for
    /// appending) or `error_log` (the file on fd 2).
    pub logs: BTreeMap<String, String>,
    /// Exited workers merged into one aggregate (absent until more than 16 exited).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exited_merged: Option<MergedReport>,
    /// nginx's error log in the period: lines by message class (limit_req refusals,
    /// upstream timeouts, worker_connections...). Absent in recordings made before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nginx_errors: Option<NginxErrorsReport>,
    /// The workers' cgroup CPU quota and its throttling in the period; absent without
    /// a quota.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_quota: Option<CpuQuotaReport>,
    /// Events not fully accounted, by reason (see `nginx_probe_common::drop`).
    pub drops: BTreeMap<String, u64>,
    /// Syscalls traced (`--syscalls`).
    pub traced_syscalls: Vec<String>,
    /// Tracepoints that could not be attached (their syscalls read as zero).
    pub missing_tracepoints: Vec<String>,
    /// Workers started and exited, new masters: in the period (interval) or since attach
    /// (summary, the last 256).
    pub events: Vec<Event>,
    /// A binary upgrade's new master running beside this one at the period's end
    /// (seen titled a master after its configuration loaded, not yet gone from
    /// `/proc`): its workers serve the same listening sockets and write the same logs,
    /// so the per-port connection counts and the access log's lines include theirs.
    /// Absent when none (and in recordings made before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_master_beside: Option<NewMasterBeside>,
    /// Why the run ended (summary only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_reason: Option<String>,
    /// With `--detail sampled`: the detail figures (syscalls but accepts, writes, event
    /// loop, upstream connects) were counted only in windows; their coverage and the
    /// requests inside them. Absent with `--detail full` (every call counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<sampling::DetailReport>,
    /// Draining generations and worker exits (see [`worker_lifecycle`]); absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<worker_lifecycle::LifecycleReport>,
    /// The configuration loads in the period: the master's reloads that loaded and
    /// failed, other `nginx -t`/`-s` runs (see [`reloads`]); absent in recordings made
    /// before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_loads: Option<reloads::ConfigLoadsReport>,
    /// nginx's configuration: effective values with file:line (`collect::config`);
    /// absent when not read (old recordings, `report` of one without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<config::ConfigReport>,
    /// nginx's client connections per listening port: who closed first, idle time
    /// before nginx's closes, resets, listeners closed. Absent when nothing happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<connections::ConnectionsReport>,
    /// Why nginx's client connections are not counted at all, when they are not (the
    /// lifecycle tracepoints left out with `--no-lifecycle`): who closed, resets and idle
    /// times are then unknown, not zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections_not_traced: Option<String>,
    /// QUIC (HTTP/3) connections: nginx's UDP listening sockets and the connections no
    /// accept returned (stub_status accepted minus TCP accepts); absent without UDP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<quic::QuicReport>,
    /// Log files the workers write that a rotation renamed or deleted without nginx
    /// reopening them (see [`log_files`]); absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stale_logs: Vec<log_files::StaleLogReport>,
    /// The local port range and TIME-WAIT of nginx's network namespace at the period's
    /// end (see [`local_ports`]); absent in recordings made before it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_ports: Option<local_ports::LocalPortsReport>,
    /// What the clients got, per nginx's access log ([`access_log`]); absent: not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_log: Option<access_log::AccessLogReport>,
    /// The master this report is about, under `--all` only (see [`masters`]); absent
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master: Option<masters::MasterInfo>,
}

impl Report {
    /// Whether `name`'s latency was measured in this run: it has an entry/exit pair
    /// (`Entry::Always` in [`SYSCALLS`]) and was traced (`traced_syscalls`; an empty
    /// list, from an old recording, counts as traced). False for syscalls only counted
    /// by an exit-only program (socket, eventfd2, ...; openat without `--syscalls all`):
    /// their latency is not unknown-because-unseen but never measured.
    pub fn syscall_timed(&self, name: &str) -> bool {
        let paired = SYSCALLS
            .iter()
            .find(|d| d.name == name)
            .is_none_or(|d| d.entry == nginx_probe_common::Entry::Always);
        paired
            && (self.traced_syscalls.is_empty() || self.traced_syscalls.iter().any(|t| t == name))
    }
}

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Costs throughput or latency.
    Warning,
    /// Clients are being refused or dropped.
    Critical,
}

/// Rules a period could not judge, silent for want of a measurement, and why.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct NotJudged {
    /// The rules' ids (those of [`Verdict::id`]).
    pub rules: Vec<String>,
    /// Why, and what would judge them.
    pub why: String,
}

/// One finding.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Verdict {
    /// Stable identifier, e.g. `fd_exhaustion`.
    pub id: String,
    /// How bad.
    pub severity: Severity,
    /// The numbers behind it.
    pub evidence: BTreeMap<String, serde_json::Value>,
    /// nginx directives (and sysctls) involved.
    pub directives: Vec<String>,
    /// One sentence of advice.
    pub advice: String,
}

impl Verdict {
    /// A verdict from a rule's static names and its evidence.
    pub fn new(
        id: &str,
        severity: Severity,
        evidence: BTreeMap<&str, serde_json::Value>,
        directives: &[&str],
        advice: String,
    ) -> Verdict {
        Verdict {
            id: id.to_string(),
            severity,
            evidence: evidence
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            directives: directives.iter().map(|d| d.to_string()).collect(),
            advice,
        }
    }
}

/// Builds a worker's report from its (summed, possibly delta) slot stats.
/// `total_accepts` is the sum over all workers, for the share. `duration_s` is the
/// period's length (rates of continuous figures), `detail_s` the seconds the detail
/// layer counted in it ([`detail_seconds`]: rates and busy shares of detail figures).
#[allow(clippy::too_many_arguments)]
pub fn worker_report(
    info: &WorkerInfo,
    stats: &SlotStats,
    total_accepts: u64,
    source: RequestSource,
    duration_s: f64,
    detail_s: f64,
    traced: &[usize],
    writes_from: WriteSource,
) -> WorkerReport {
    let acc4 = &stats[sys::ACCEPT4 as usize];
    let acc = &stats[sys::ACCEPT as usize];
    let accepts = accepts_of(stats);
    let mut accept_errors = BTreeMap::new();
    for (i, name) in ERR_CLASS_NAMES.iter().enumerate() {
        accept_errors.insert(name.to_string(), acc4.errs[i] + acc.errs[i]);
    }
    let mut syscalls = BTreeMap::new();
    for &i in traced {
        syscalls.insert(
            SYSCALLS[i].name.to_string(),
            SyscallReport::from_stats(i, &stats[i]),
        );
    }
    let mut requests = requests_report(stats, source, duration_s);
    build::traced_only(&mut requests.syscalls_per_request, traced);
    let requests_count = requests.count;
    WorkerReport {
        pid: info.pid,
        slot: info.slot,
        generation: info.generation,
        nspid: info.nspid.clone(),
        alive: info.alive,
        accepts,
        accept_share: if total_accepts == 0 {
            0.0
        } else {
            accepts as f64 / total_accepts as f64
        },
        accept_errors,
        writes: writes_report(stats, requests.count.unwrap_or(0), writes_from),
        access_log_opens: (writes_from == WriteSource::FdTable)
            .then_some(stats[LOG_OPENS_IDX].count),
        requests,
        fds: info.fds,
        event_loop: loop_report(stats, detail_s),
        cpu_s: None,
        run_delay_s: None,
        accepted_then_closed: stats[ACCEPT_CLOSE_IDX].count,
        syscalls,
        upstream: upstream_report(stats, requests_count.unwrap_or(0), detail_s),
        fd_errors: fd_errors_report(stats),
        connections_closed: None,
        lifecycle: Default::default(),
    }
}

/// Accepts in a slot ([`ACCEPTED_IDX`], filled by the collector from its source).
pub fn accepts_of(stats: &SlotStats) -> u64 {
    stats[ACCEPTED_IDX].count
}

/// Successful accepts in a slot's syscall rows: `accept4` and `accept` exits that
/// returned an fd.
pub fn tracepoint_accepts(stats: &SlotStats) -> u64 {
    let a4 = &stats[sys::ACCEPT4 as usize];
    let a = &stats[sys::ACCEPT as usize];
    (a4.count - a4.errors.min(a4.count)) + (a.count - a.errors.min(a.count))
}

/// Names and values of the drop counters.
pub fn drops_map(drops: &[u64; DROP_COUNTERS]) -> BTreeMap<String, u64> {
    DROP_NAMES
        .iter()
        .map(|n| n.to_string())
        .zip(drops.iter().copied())
        .collect()
}

/// One BPF program's statistics (`bpf_prog_info.run_time_ns`, `run_cnt`).
#[derive(Clone, Debug, PartialEq)]
pub struct ProgramCost {
    /// The program's name in the eBPF object (`sys_exit_accept4`, ...).
    pub name: String,
    /// Time spent running it since it was loaded, ns (counted only while
    /// `kernel.bpf_stats_enabled` is 1).
    pub run_time_ns: u64,
    /// Times it ran over the same period.
    pub run_count: u64,
}

/// The probe's own cost at one instant.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OwnCost {
    /// User + system CPU time of this process since it started, seconds
    /// (`/proc/self/stat` utime + stime).
    pub cpu_s: Option<f64>,
    /// Resident set size, bytes (`/proc/self/stat` rss times the page size).
    pub rss_bytes: Option<u64>,
    /// Per-program statistics; None when `kernel.bpf_stats_enabled` is not 1 (the
    /// kernel then counts nothing) or nothing is loaded.
    pub programs: Option<Vec<ProgramCost>>,
}

#[cfg(test)]
mod tests;

/// The summary's `end_reason` when the master exited: `nginx master <pid> exited`.
pub fn master_exited_reason(pid: u32) -> String {
    format!("nginx master {pid} exited")
}

/// Whether `end_reason` says the master exited ([`master_exited_reason`]).
pub fn ended_by_master_exit(end_reason: Option<&str>) -> bool {
    end_reason.is_some_and(|r| r.starts_with("nginx master ") && r.ends_with(" exited"))
}

/// A summary with nothing in it (one hour after the epoch, master 9, 2 s), for tests.
#[cfg(test)]
pub(crate) fn minimal_report() -> Report {
    serde_json::from_value(serde_json::json!({
        "schema": 1, "verdicts": [], "type": "summary", "time_unix_s": 3600.0,
        "master_pid": 9, "master_nspid": [9], "duration_s": 2.0, "workers": [],
        "listen": [], "logs": {}, "drops": {}, "traced_syscalls": [],
        "missing_tracepoints": [], "events": []
    }))
    .expect("minimal report")
}

/// A `--detail sampled` report of one window of `in_window_s` seconds in a 10 s
/// period, holding `in_windows` of the period's `total` requests, for tests.
#[cfg(test)]
pub(crate) fn sampled_detail(
    in_windows: Option<u64>,
    total: Option<u64>,
    in_window_s: f64,
) -> sampling::DetailReport {
    sampling::DetailReport {
        mode: "sampled".into(),
        window_s: in_window_s,
        period_s: 10.0,
        windows: 1,
        in_window_s,
        coverage: in_window_s / 10.0,
        requests_in_windows: in_windows,
        requests_total: total,
        sampled: Vec::new(),
        exact: Vec::new(),
        accepts_from: String::new(),
        accepts_check: None,
        attach_us: 0,
        detach_us: 0,
        links: 0,
    }
}
