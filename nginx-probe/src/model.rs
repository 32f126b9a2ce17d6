//! Pure aggregation: per-CPU sums, per-interval deltas, log2-histogram quantiles, and the
//! report model that text and JSON are rendered from. No kernel access here; unit tests
//! feed these functions directly.

use std::collections::BTreeMap;

use nginx_probe_common::{
    sys, RetKind, SyscallStats, DROP_COUNTERS, DROP_NAMES, ERR_CLASSES, ERR_CLASS_NAMES,
    FD_KIND_COUNT, FD_KIND_NAMES, HIST_BUCKETS, SYSCALLS, SYSCALL_COUNT,
};
use serde::{Deserialize, Serialize};

/// Version of the JSON document; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// `v` rounded to 3 decimals, the precision reports carry (ms for seconds, 0.1% for
/// shares).
pub fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
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
pub const SLOT_STATS: usize = SYSCALL_COUNT + 2 + FD_KIND_COUNT + 1;

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
pub const ZERO_SLOT: SlotStats = [SyscallStats::ZERO; SLOT_STATS];

/// [`delta`] of every element of a worker's stats.
pub fn delta_slot(cur: &SlotStats, prev: &SlotStats) -> SlotStats {
    let mut d = ZERO_SLOT;
    for (d, (c, p)) in d.iter_mut().zip(cur.iter().zip(prev.iter())) {
        *d = delta(c, p);
    }
    d
}

/// Adds `x` into `acc`, element by element (counters add, max of `max_ns`).
pub fn add_slot(acc: &mut SlotStats, x: &SlotStats) {
    for (a, x) in acc.iter_mut().zip(x.iter()) {
        *a = sum_cpus([&*a, x]);
    }
}

/// How requests were counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestSource {
    /// Exact: uprobes on `ngx_http_create_request`/`ngx_http_free_request`.
    Uprobe,
    /// Estimated as the worker's successful `writev` calls (nginx writes each response's
    /// headers with one writev; large or slow responses can take more).
    WritevEstimate,
}

/// Requests of one worker over a period.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RequestsReport {
    /// Requests (see `source`).
    pub count: u64,
    /// Where `count` comes from.
    pub source: RequestSource,
    /// Requests per second over the period.
    pub per_s: f64,
    /// Requests per accepted connection (keepalive reuse), None without accepts.
    pub per_connection: Option<f64>,
    /// Request duration (create to free) estimates, ns; uprobes only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_ns: Option<u64>,
    /// Calls per request of every traced syscall that was called (the `strace -c` view).
    pub syscalls_per_request: BTreeMap<String, f64>,
}

/// Builds the requests view of one worker's (delta) stats over `duration_s` seconds.
pub fn requests_report(
    stats: &SlotStats,
    source: RequestSource,
    duration_s: f64,
) -> RequestsReport {
    let req = &stats[REQUESTS_IDX];
    let count = match source {
        RequestSource::Uprobe => req.count,
        RequestSource::WritevEstimate => {
            let w = &stats[sys::WRITEV as usize];
            w.count - w.errors.min(w.count)
        }
    };
    let accepts = accepts_of(stats);
    let mut per_request = BTreeMap::new();
    if count > 0 {
        for (i, def) in SYSCALLS.iter().enumerate() {
            if stats[i].count > 0 {
                let v = stats[i].count as f64 / count as f64;
                per_request.insert(def.name.to_string(), round3(v));
            }
        }
    }
    let timed = source == RequestSource::Uprobe && req.timed > 0;
    RequestsReport {
        count,
        source,
        per_s: if duration_s > 0.0 {
            count as f64 / duration_s
        } else {
            0.0
        },
        per_connection: (accepts > 0).then(|| count as f64 / accepts as f64),
        p50_ns: timed.then(|| quantile_ns(&req.hist, 0.50, req.max_ns)),
        p99_ns: timed.then(|| quantile_ns(&req.hist, 0.99, req.max_ns)),
        max_ns: timed.then_some(req.max_ns),
        syscalls_per_request: per_request,
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
    pub first: Option<u64>,
    pub interval: Option<u64>,
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
    /// busy_ns / period, 0..1.
    pub busy_share: f64,
    /// 99th percentile iteration length, ns (log2-histogram estimate).
    pub p99_iteration_ns: u64,
    /// Longest iteration, ns: while it ran, every other connection of the worker waited.
    pub max_iteration_ns: u64,
}

/// The event-loop view of one worker's (delta) stats over `duration_s` seconds.
pub fn loop_report(stats: &SlotStats, duration_s: f64) -> LoopReport {
    let l = &stats[LOOP_IDX];
    LoopReport {
        iterations: l.count,
        busy_ns: l.total_ns,
        busy_share: if duration_s > 0.0 {
            round3(l.total_ns as f64 / 1e9 / duration_s)
        } else {
            0.0
        },
        p99_iteration_ns: quantile_ns(&l.hist, 0.99, l.max_ns),
        max_iteration_ns: l.max_ns,
    }
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
    /// 99th percentile latency, ns (log2-histogram estimate).
    pub p99_ns: u64,
    /// Calls per request (None without requests).
    pub per_request: Option<f64>,
}

/// The per-destination write views of one worker's (delta) stats, by kind name.
pub fn writes_report(stats: &SlotStats, requests: u64) -> BTreeMap<String, WritesReport> {
    let mut out = BTreeMap::new();
    for (k, name) in FD_KIND_NAMES.iter().enumerate() {
        let w = &stats[WRITES_IDX + k];
        out.insert(
            name.to_string(),
            WritesReport {
                count: w.count,
                bytes: w.ret_sum,
                total_ns: w.total_ns,
                p99_ns: quantile_ns(&w.hist, 0.99, w.max_ns),
                per_request: (requests > 0).then(|| round3(w.count as f64 / requests as f64)),
            },
        );
    }
    out
}

/// A worker's file descriptors, sampled every 500 ms from /proc.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct FdReport {
    /// Open fds at the last sample (`/proc/<pid>/fd`).
    pub open: Option<u64>,
    /// Most open fds seen at any sample since attach.
    pub peak: Option<u64>,
    /// Soft `RLIMIT_NOFILE` in force (`/proc/<pid>/limits`), not what the config says.
    pub limit: Option<u64>,
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
    /// write/writev/pwrite64 by destination: `socket`, `access_log`, `error_log`,
    /// `file`, `other` (fds classified from /proc/<pid>/fd every 2 s).
    pub writes: BTreeMap<String, WritesReport>,
    /// Per traced syscall, by name; every traced syscall is present (see the report's
    /// `traced_syscalls`).
    pub syscalls: BTreeMap<String, SyscallReport>,
}

/// Something that happened to the master's processes during the run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Event {
    /// Seconds since attach.
    pub t_s: f64,
    /// `worker_started`, `worker_exited`, `new_master` (binary upgrade, USR2).
    pub event: String,
    /// Host pid of the process.
    pub pid: u32,
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

/// One of nginx's listening sockets over a period.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ListenReport {
    /// `addr:port`.
    pub addr: String,
    /// Backlog in force (sock_diag; `listen ... backlog=` capped by somaxconn).
    pub backlog: u32,
    /// Connections waiting in the accept queue at the last 500 ms sample.
    pub queue_now: u32,
    /// Most connections seen waiting at any sample in the period.
    pub queue_max: u32,
    /// Listen overflows in the master's network namespace during the period
    /// (`/proc/<pid>/net/netstat` TcpExt ListenOverflows; namespace-wide, not only nginx).
    pub overflows: u64,
    /// Listen drops, likewise (TcpExt ListenDrops).
    pub drops: u64,
    /// Connections this socket itself dropped in the period (a full accept queue, other
    /// listen drops): sock_diag `SK_MEMINFO_DROPS` of nginx's socket, sampled every
    /// 500 ms. Exact for nginx, unlike `overflows`/`drops`. None when the kernel gives
    /// no socket memory info.
    #[serde(default)]
    pub socket_drops: Option<u64>,
}

/// A whole report: an interval or the summary at exit.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// [`SCHEMA_VERSION`].
    pub schema: u32,
    /// Findings, most severe first (see `verdict`).
    pub verdicts: Vec<crate::verdict::Verdict>,
    /// `"interval"` or `"summary"`.
    #[serde(rename = "type")]
    pub kind: String,
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
    /// nginx's listening sockets: accept queue against backlog, overflows.
    pub listen: Vec<ListenReport>,
    /// Log files the workers hold: path -> `access_log` (a regular file open for
    /// appending) or `error_log` (the file on fd 2).
    pub logs: BTreeMap<String, String>,
    /// Exited workers merged into one aggregate (absent until more than 16 exited).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exited_merged: Option<MergedReport>,
    /// Events not fully accounted, by reason (see `nginx_probe_common::drop`).
    pub drops: BTreeMap<String, u64>,
    /// Syscalls traced (`--syscalls`).
    pub traced_syscalls: Vec<String>,
    /// Tracepoints that could not be attached (their syscalls read as zero).
    pub missing_tracepoints: Vec<String>,
    /// Workers started and exited, new masters: in the period (interval) or since attach
    /// (summary, the last 256).
    pub events: Vec<Event>,
    /// Why the run ended (summary only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_reason: Option<String>,
}

/// The verdict inputs of a report: every worker's numbers (exited ones flagged), and
/// the merged old exited workers when there are any.
pub fn verdict_inputs(workers: &[WorkerReport], close_traced: bool) -> crate::verdict::Inputs {
    let conn_calls = ["accept4", "accept", "close"];
    let waits = ["epoll_wait", "epoll_pwait", "epoll_pwait2"];
    crate::verdict::Inputs {
        workers: workers
            .iter()
            .map(|w| crate::verdict::WorkerInput {
                pid: w.pid,
                alive: w.alive,
                accepts: w.accepts,
                emfile: w.accept_errors.get("EMFILE").copied().unwrap_or(0),
                enfile: w.accept_errors.get("ENFILE").copied().unwrap_or(0),
                requests: w.requests.count,
                busy_ns: (w.event_loop.iterations > 0).then_some(w.event_loop.busy_ns),
                cpu_s: w.cpu_s,
                run_delay_ns: w.run_delay_s.map(|s| (s * 1e9) as u64),
                max_iteration_ns: w.event_loop.max_iteration_ns,
                accepted_then_closed: w.accepted_then_closed,
                access_log_writes: w.writes.get("access_log").map(|x| x.count).unwrap_or(0),
                access_log_ns: w.writes.get("access_log").map(|x| x.total_ns).unwrap_or(0),
                access_log_p99_ns: w.writes.get("access_log").map(|x| x.p99_ns).unwrap_or(0),
                p99_iteration_ns: w.event_loop.p99_iteration_ns,
                conn_syscall_ns: w
                    .syscalls
                    .iter()
                    .filter(|(k, _)| conn_calls.contains(&k.as_str()))
                    .map(|(_, s)| s.total_ns)
                    .sum(),
                all_syscall_ns: w
                    .syscalls
                    .iter()
                    .filter(|(k, _)| !waits.contains(&k.as_str()))
                    .map(|(_, s)| s.total_ns)
                    .sum(),
                fds_open: w.fds.open,
                fds_peak: w.fds.peak,
                fd_limit: w.fds.limit,
            })
            .collect(),
        close_traced,
        listen: Vec::new(),
        period_s: 0.0,
    }
}

/// Builds a worker's report from its (summed, possibly delta) slot stats.
/// `total_accepts` is the sum over all workers, for the share.
pub fn worker_report(
    info: &WorkerInfo,
    stats: &SlotStats,
    total_accepts: u64,
    source: RequestSource,
    duration_s: f64,
    traced: &[usize],
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
    let requests = requests_report(stats, source, duration_s);
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
        writes: writes_report(stats, requests.count),
        requests,
        fds: info.fds,
        event_loop: loop_report(stats, duration_s),
        cpu_s: None,
        run_delay_s: None,
        accepted_then_closed: stats[ACCEPT_CLOSE_IDX].count,
        syscalls,
    }
}

/// Successful accepts in a slot: `accept4` and `accept` exits that returned an fd.
pub fn accepts_of(stats: &SlotStats) -> u64 {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn stats_from(latencies: &[u64]) -> SyscallStats {
        let mut s = SyscallStats::ZERO;
        for &ns in latencies {
            s.count += 1;
            s.record_ns(ns);
        }
        s
    }

    #[test]
    fn quantiles_stay_inside_the_right_bucket() {
        // 99 calls of 1 us, 1 call of 1 ms.
        let mut lat = vec![1_000u64; 99];
        lat.push(1_000_000);
        let s = stats_from(&lat);
        let p50 = quantile_ns(&s.hist, 0.5, s.max_ns);
        let p99 = quantile_ns(&s.hist, 0.99, s.max_ns);
        let p100 = quantile_ns(&s.hist, 1.0, s.max_ns);
        // 1000 ns lives in [512, 1023].
        assert!((512..=1023).contains(&p50), "p50 {p50}");
        assert!((512..=1023).contains(&p99), "p99 {p99}");
        assert_eq!(p100, 1_000_000, "capped at max");
        assert_eq!(quantile_ns(&[0; HIST_BUCKETS], 0.5, 0), 0);
    }

    #[test]
    fn quantile_of_single_sample_is_capped_by_max() {
        let s = stats_from(&[700]);
        assert_eq!(quantile_ns(&s.hist, 0.5, s.max_ns), 700);
        assert_eq!(quantile_ns(&s.hist, 0.99, s.max_ns), 700);
    }

    #[test]
    fn sum_adds_counters_and_maxes_max() {
        let a = stats_from(&[100, 200]);
        let b = stats_from(&[5_000]);
        let s = sum_cpus([&a, &b]);
        assert_eq!(s.count, 3);
        assert_eq!(s.total_ns, 5_300);
        assert_eq!(s.max_ns, 5_000);
        assert_eq!(s.hist.iter().sum::<u64>(), 3);
    }

    #[test]
    fn delta_subtracts_and_bounds_interval_max() {
        let prev = stats_from(&[1_000_000, 100]);
        // Interval adds two calls of ~3 us; all-time max stays 1 ms.
        let cur = sum_cpus([&prev, &stats_from(&[3_000, 3_100])]);
        let d = delta(&cur, &prev);
        assert_eq!(d.count, 2);
        assert_eq!(d.total_ns, 6_100);
        // 3000 and 3100 are in bucket 11: [2048, 4095].
        assert_eq!(d.max_ns, 4_095);
        // A new all-time max is exact.
        let cur2 = sum_cpus([&cur, &stats_from(&[2_000_000])]);
        assert_eq!(delta(&cur2, &cur).max_ns, 2_000_000);
        // Nothing timed: no max.
        assert_eq!(delta(&cur, &cur).max_ns, 0);
    }

    #[test]
    fn accepts_exclude_errors_and_shares_sum_to_one() {
        let mut slot: SlotStats = [SyscallStats::ZERO; SLOT_STATS];
        slot[sys::ACCEPT4 as usize].count = 10;
        slot[sys::ACCEPT4 as usize].errors = 4;
        slot[sys::ACCEPT4 as usize].errs[nginx_probe_common::ErrClass::Eagain as usize] = 3;
        slot[sys::ACCEPT4 as usize].errs[nginx_probe_common::ErrClass::Emfile as usize] = 1;
        slot[sys::ACCEPT as usize].count = 2;
        assert_eq!(accepts_of(&slot), 8);
        let info = WorkerInfo {
            pid: 7,
            nspid: vec![7],
            slot: 0,
            generation: 0,
            alive: true,
            fds: FdReport::default(),
            cpu_ticks: Samples::default(),
            run_delay_ns: Samples::default(),
        };
        let all: Vec<usize> = (0..SYSCALL_COUNT).collect();
        let r = worker_report(&info, &slot, 16, RequestSource::WritevEstimate, 2.0, &all);
        assert_eq!(r.accepts, 8);
        assert_eq!(r.accept_share, 0.5);
        assert_eq!(r.accept_errors["EAGAIN"], 3);
        assert_eq!(r.accept_errors["EMFILE"], 1);
        assert_eq!(r.accept_errors["ENFILE"], 0);
        assert_eq!(r.syscalls.len(), SYSCALL_COUNT);
        assert_eq!(r.syscalls["accept4"].errnos.len(), 2);
        assert!(r.syscalls["sendfile"].bytes.is_some());
        assert!(r.syscalls["epoll_wait"].events.is_some());
        assert!(r.syscalls["accept4"].bytes.is_none());
        // No writev: no requests, and no per-request mix.
        assert_eq!(r.requests.count, 0);
        assert!(r.requests.syscalls_per_request.is_empty());
    }

    #[test]
    fn requests_estimate_and_uprobe_views() {
        let mut slot: SlotStats = [SyscallStats::ZERO; SLOT_STATS];
        slot[sys::ACCEPT4 as usize].count = 10;
        slot[sys::WRITEV as usize].count = 100;
        slot[sys::WRITE as usize].count = 100;
        slot[sys::CLOSE as usize].count = 10;
        slot[REQUESTS_IDX] = stats_from(&[1_000_000; 80]);
        slot[REQUESTS_IDX].count = 80;
        let est = requests_report(&slot, RequestSource::WritevEstimate, 10.0);
        assert_eq!(est.count, 100);
        assert_eq!(est.per_s, 10.0);
        assert_eq!(est.per_connection, Some(10.0));
        assert_eq!(est.syscalls_per_request["write"], 1.0);
        assert_eq!(est.syscalls_per_request["close"], 0.1);
        assert_eq!(est.p50_ns, None);
        let up = requests_report(&slot, RequestSource::Uprobe, 10.0);
        assert_eq!(up.count, 80);
        assert_eq!(up.per_connection, Some(8.0));
        assert_eq!(up.syscalls_per_request["writev"], 1.25);
        assert_eq!(up.max_ns, Some(1_000_000));
        assert!(up.p50_ns.unwrap() >= 524_288 && up.p50_ns.unwrap() <= 1_000_000);
    }
}
