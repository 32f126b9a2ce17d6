//! Report parts that come from nginx's own words and the workers' cgroup: error-log
//! lines counted by class since attach, and the CPU quota with its throttling.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One class of error-log message over a period.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ErrorClassReport {
    /// Lines of this class nginx wrote in the period.
    pub count: u64,
    /// The same lines by nginx log level (`error`, `warn`, ...), non-zero only.
    pub levels: BTreeMap<String, u64>,
    /// The directive(s) that govern it (`limit_req`, `proxy_read_timeout`, ...).
    pub directive: String,
    /// `refused` (nginx refused the request itself), `upstream` (502/504 side),
    /// `resources` (worker_connections, fds) or `other`.
    pub group: String,
}

/// nginx's error log over a period: lines it appended, counted by message class. Source:
/// the file behind the master's fd 2 (nginx's main `error_log`), read from its size at
/// attach; no request data (client, URI, host) is kept.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct NginxErrorsReport {
    /// The file read, as the kernel names it (raw: text output escapes control
    /// characters, JSON escapes them as JSON); None when it could not be read.
    pub path: Option<String>,
    /// Whether it is being read; when false, `unknown_reason` says why and every count
    /// is unknown (not zero).
    pub readable: bool,
    /// Why the error log could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown_reason: Option<String>,
    /// Counts by class name (see docs/verdicts.md, nginx's own words); classes with no line
    /// are absent.
    pub classes: BTreeMap<String, ErrorClassReport>,
    /// The most verbose level among the lines seen since attach (`warn` means levels
    /// down to warn reach the file); None before any line. Messages below the
    /// error_log level are never written, so their classes read 0 whatever happened.
    pub most_verbose_level_seen: Option<String>,
    /// Whether limit_req/limit_conn refusals reach the file: true once a line at
    /// `error` or a more verbose level was seen since attach; None (unknown) before, as
    /// an error_log level of crit, alert or emerg hides them (they log at
    /// limit_req_log_level / limit_conn_log_level, `error` by default), and then
    /// their 0 means unknown.
    #[serde(default)]
    pub refusals_visible: Option<bool>,
    /// Lines longer than the reader keeps (classified from their start).
    pub lines_cut: u64,
    /// Bytes not read: a backlog too large to chase, or lost to truncation/rotation
    /// before being read. Non-zero: counts are a lower bound.
    pub bytes_skipped: u64,
    /// Truncations of the file seen while reading it (copytruncate): lines written
    /// after the last read and before each were not read, in an unknown number, so
    /// counts are a lower bound. 0: none seen.
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub truncations: u64,
    /// The master's history back to its start (lines written before attach too);
    /// absent when the master's start or the log could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<ProcessHistoryReport>,
    /// Upstream-class lines by upstream peer (nginx's `upstream: "..."` field,
    /// `scheme://host:port`): the 10 largest; absent when no such line was seen.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upstream_peers: Vec<PeerErrorsReport>,
    /// Upstream-class lines of every other peer (beyond the 10, or past the 256
    /// tracked), plus those with no or an ambiguous (a client's fake) field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_peers_rest: Option<PeerRestReport>,
}

/// Upstream-class error-log lines of one peer.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PeerErrorsReport {
    /// `scheme://host:port` from nginx's `upstream:` field (sanitized, at most 96 bytes).
    pub peer: String,
    /// Lines of upstream classes naming it in the period.
    pub lines: u64,
    /// The same lines by message class (`upstream_reset`, `upstream_connect_failed`,
    /// ...), non-zero only; empty in recordings made before it was counted.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_class: BTreeMap<String, u64>,
}

/// Upstream-class lines not in [`NginxErrorsReport::upstream_peers`].
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PeerRestReport {
    /// Lines of the other peers.
    pub other_peers: u64,
    /// Lines with no readable `upstream:` field.
    pub unattributed: u64,
    /// Lines with two or more `upstream:` fields (a client's fake): not attributed.
    pub ambiguous: u64,
}

/// What nginx's error log says about the master's processes since the master started:
/// the lines before attach (read back from the attach offset, bounded) plus those
/// since. Source: the error log and `/proc/<master>/stat`, `/proc/<master>/limits`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ProcessHistoryReport {
    /// The master's start, Unix seconds (`/proc/<master>/stat` starttime + btime).
    pub master_started_unix_s: u64,
    /// Bytes of the log read back before attach, and the bound on them.
    pub bytes_read_back: u64,
    /// The bound on the bytes read back, bytes.
    pub bytes_read_back_limit: u64,
    /// False when the bound cut the read before the master's start: counts are then
    /// a lower bound.
    pub reached_master_start: bool,
    /// Lines by class since the master's start (worker_spawn_failed, worker_crashed,
    /// worker_exited, process_other, binary_upgrade_failed, rlimit, worker_connections_over_nofile, emfile),
    /// non-zero only.
    pub classes: BTreeMap<String, u64>,
    /// `<call>() failed while spawning "worker process"` lines since the master's
    /// start: workers the master failed to start.
    pub workers_failed_to_spawn: u64,
    /// `worker process N exited with fatal code 2 and cannot be respawned` lines since
    /// the master's start: workers that were spawned but failed their own init (their
    /// reason is the line they wrote before) and that the master does not start again.
    #[serde(default)]
    pub workers_exited_fatal: u64,
    /// Of the spawn failures written before attach, those with EMFILE (`(24: Too many
    /// open files)`): the master ran out of fds (2 per worker channel).
    pub spawn_failed_emfile_before_attach: u64,
    /// `worker process N exited on signal S` lines since the master's start, S a crash
    /// of the worker itself (SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL).
    pub workers_crashed: u64,
    /// Of `workers_crashed`, the lines written since attach (the rest came before this
    /// run).
    #[serde(default)]
    pub workers_crashed_since_attach: u64,
    /// Crash lines written since attach that are no confirmed crash: naming no worker
    /// the kernel saw exit (no such worker since attach, one still running, one that
    /// exited with a code), repeating a pid already counted, or beyond the 64 distinct
    /// pids checked: not nginx's (a client can write lines into the error log); left
    /// out of the two counts above.
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub crash_lines_contradicted: u64,
    /// `worker process N exited on signal S` lines since the master's start, S any
    /// other signal (SIGKILL: the OOM killer or an operator; SIGTERM): killed from
    /// outside, not a crash.
    #[serde(default)]
    pub workers_killed: u64,
    /// The master's soft and hard open-files limits (`/proc/<master>/limits`, Max open
    /// files); None when unlimited or unreadable.
    pub master_nofile_soft: Option<u64>,
    /// The master's hard open-files limit; None when unlimited or unreadable.
    pub master_nofile_hard: Option<u64>,
    /// Of the spawn failures written before attach, the lines by failed call and
    /// errno (`fork() EAGAIN`: a process limit; `socketpair() EMFILE`: the master's
    /// fds), at most 8 keys then `other`; absent when none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub spawn_failed_by_before_attach: BTreeMap<String, u64>,
    /// The master's soft process limit (`/proc/<master>/limits`, Max processes:
    /// RLIMIT_NPROC, counted per user and not applied to a process with
    /// CAP_SYS_RESOURCE or CAP_SYS_ADMIN in the host, root's); None when unlimited or
    /// unreadable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_nproc_soft: Option<u64>,
    /// The process limit of the master's cgroup (`collect::cgroup::pids_limit_of`);
    /// absent when none is set or it is unreadable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_pids_limit: Option<PidsLimitReport>,
}

/// A cgroup's process limit, read when the report is built. Source: the cgroup's
/// `pids.max`, `pids.current`, `pids.events` (v2, or v1's `pids` controller).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PidsLimitReport {
    /// The cgroup, relative to its hierarchy's root (`/` for the root).
    pub cgroup: String,
    /// 1 or 2.
    pub cgroup_version: u8,
    /// `pids.max`: the most tasks (processes and threads) the cgroup and its
    /// descendants may hold.
    pub max: u64,
    /// `pids.current`: the tasks in it now; None when unreadable.
    pub current: Option<u64>,
    /// `pids.events` `max`: forks refused at this limit since the cgroup was made
    /// (each an EAGAIN from fork() or clone()); None when unreadable.
    pub refused: Option<u64>,
}

impl NginxErrorsReport {
    /// Lines of class `name` in the period (0 when absent).
    pub fn count(&self, name: &str) -> u64 {
        self.classes.get(name).map(|c| c.count).unwrap_or(0)
    }
}

/// The workers' CPU quota over a period. Source: their cgroup's `cpu.max` (v2) or
/// `cpu.cfs_quota_us`/`cpu.cfs_period_us` (v1), the tightest on the path to the root,
/// and that cgroup's `cpu.stat`, sampled every 500 ms.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CpuQuotaReport {
    /// The cgroup holding the quota, relative to the hierarchy root (raw, like
    /// [`NginxErrorsReport::path`]).
    pub cgroup: String,
    /// cgroup version, 1 or 2.
    pub cgroup_version: u8,
    /// Quota in CPUs (quota / period): 0.1 = a tenth of one CPU.
    pub quota_cpus: f64,
    /// Runtime per period and period, us.
    pub quota_us: u64,
    /// The quota's period, us.
    pub period_us: u64,
    /// CPUs online on the machine (what `worker_processes auto` counts).
    pub online_cpus: Option<u64>,
    /// Enforcement periods with runnable tasks in the period judged (`nr_periods`).
    pub nr_periods: Option<u64>,
    /// Periods in which the quota ran out (`nr_throttled`).
    pub nr_throttled: Option<u64>,
    /// nr_throttled / nr_periods, 0..=1.
    pub throttled_periods_share: Option<f64>,
    /// Time the cgroup's tasks were stopped by the quota, seconds (`throttled_usec`).
    pub throttled_s: Option<f64>,
}

/// nginx's stub_status counters as `collect::nginx_counters` reads them from the
/// master's memory: accumulated since the reader opened, so cumulative counts grow from
/// 0 at attach; gauges are the last value read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StubCounts {
    /// Connections accepted since attach.
    pub accepted: u64,
    /// Connections handled since attach.
    pub handled: u64,
    /// Requests since attach.
    pub requests: u64,
    /// Gauges at the last read.
    pub active: u64,
    /// Connections whose request header nginx is reading, at the last read.
    pub reading: u64,
    /// Connections nginx is writing a response to, at the last read.
    pub writing: u64,
    /// Idle keepalive connections, at the last read.
    pub waiting: u64,
    /// Times a counter's address changed or a count went backwards since attach.
    pub rebases: u64,
    /// Reads that failed since attach (the counts hold the last good read).
    pub failed_reads: u64,
}

impl StubCounts {
    /// One read of nginx's seven counters as `collect::nginx_counters` reads them from
    /// the master's memory, in its `SYMBOLS` order (`ngx_stat_accepted`, `_handled`,
    /// `_requests`, `_active`, `_reading`, `_writing`, `_waiting`): raw values, counted
    /// since nginx started, not since attach.
    pub fn from_words(w: [u64; 7]) -> StubCounts {
        StubCounts {
            accepted: w[0],
            handled: w[1],
            requests: w[2],
            active: w[3],
            reading: w[4],
            writing: w[5],
            waiting: w[6],
            ..StubCounts::default()
        }
    }

    /// Adds the growth of the cumulative counters from the raw read `last` to the raw
    /// read `raw` and takes `raw`'s gauges. When a counter's address `moved` or a
    /// cumulative count went backwards (another build, a binary upgrade), nothing is
    /// added and `rebases` counts it: the totals never go back.
    pub fn advance(&mut self, last: &StubCounts, raw: &StubCounts, moved: bool) {
        let back = raw.accepted < last.accepted
            || raw.handled < last.handled
            || raw.requests < last.requests;
        if moved || back {
            self.rebases += 1;
        } else {
            self.accepted += raw.accepted - last.accepted;
            self.handled += raw.handled - last.handled;
            self.requests += raw.requests - last.requests;
        }
        self.take_gauges(raw);
    }

    /// Takes the gauges (active, reading, writing, waiting) of the raw read `raw`.
    pub fn take_gauges(&mut self, raw: &StubCounts) {
        self.active = raw.active;
        self.reading = raw.reading;
        self.writing = raw.writing;
        self.waiting = raw.waiting;
    }
}

/// The workers' CPU quota as the tracker knows it (`collect::cgroup`), as plain data for
/// a report's [`CpuQuotaReport`].
#[derive(Clone, Copy, Debug)]
pub struct QuotaInputs<'a> {
    /// The cgroup holding the quota, relative to the hierarchy root, and its version
    /// (1 or 2).
    pub cgroup: &'a str,
    /// The cgroup version, 1 or 2.
    pub version: u8,
    /// Runtime allowed per period and the period, us (`cpu.max`, or `cpu.cfs_quota_us`
    /// and `cpu.cfs_period_us`).
    pub quota_us: u64,
    /// The quota's period, us.
    pub period_us: u64,
    /// The quota in CPUs (quota / period, `collect::cgroup::Quota::cpus`).
    pub cpus: f64,
    /// CPUs online, read when the report is built (what nginx's `auto` counts:
    /// sysconf(_SC_NPROCESSORS_ONLN), not available_parallelism); None: unreadable.
    pub online_cpus: Option<u64>,
    /// The quota cgroup's `cpu.stat` nr_periods, nr_throttled and throttled_usec,
    /// sampled every refresh (500 ms).
    pub throttle: &'a [crate::model::Samples; 3],
}

/// The CPU quota part of a report, since attach (`summary`) or in the interval.
pub fn cpu_quota_report(q: &QuotaInputs, summary: bool) -> CpuQuotaReport {
    let periods = q.throttle[0].delta(summary);
    let throttled = q.throttle[1].delta(summary);
    CpuQuotaReport {
        cgroup: q.cgroup.to_string(),
        cgroup_version: q.version,
        quota_cpus: crate::model::round3(q.cpus),
        quota_us: q.quota_us,
        period_us: q.period_us,
        online_cpus: q.online_cpus,
        nr_periods: periods,
        nr_throttled: throttled,
        throttled_periods_share: match (periods, throttled) {
            (Some(p), Some(t)) if p > 0 => Some(crate::model::round3(t as f64 / p as f64)),
            _ => None,
        },
        throttled_s: q.throttle[2]
            .delta(summary)
            .map(|us| crate::model::round3(us as f64 / 1e6)),
    }
}
