//! Verdicts: rules that turn a report's numbers into findings a user can act on. Each
//! names the nginx directives involved and carries the numbers behind it. Pure: unit
//! tests feed [`Inputs`] directly. Thresholds are constants here and in the README.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Accepts needed before accept balance is judged (fewer is noise).
pub const IMBALANCE_MIN_ACCEPTS: u64 = 200;
/// Busiest worker's share over the mean share at which accepts are "imbalanced" (with 2
/// workers: 75% / 25%).
pub const IMBALANCE_MAX_OVER_MEAN: f64 = 1.5;
/// Requests needed before the keepalive rule is judged.
pub const KEEPALIVE_MIN_REQUESTS: u64 = 200;
/// Accepts per request at or above which clients do not reuse connections.
pub const KEEPALIVE_ACCEPTS_PER_REQUEST: f64 = 0.5;
/// fd headroom (free / limit) under which the fd limit is about to bind.
pub const FD_HEADROOM_MIN: f64 = 0.10;
/// Access-log writes per request at or above which the log is written unbuffered.
pub const ACCESS_LOG_WRITES_PER_REQUEST: f64 = 0.5;
/// Requests needed before the access-log rule is judged.
pub const ACCESS_LOG_MIN_REQUESTS: u64 = 200;

/// Accepts needed before unserved connections are judged.
pub const UNSERVED_MIN_ACCEPTS: u64 = 200;
/// Accepts per request at or above which connections are being closed unserved (each
/// connection carries at least one request unless closed before it).
pub const UNSERVED_ACCEPTS_PER_REQUEST: f64 = 1.5;

/// Total accepts and requests, and whether so many more connections were accepted than
/// requests served that many were closed before carrying one: far more accepts than
/// requests, and not because the connections are held open (the workers' peak open fds
/// stay under half the connections without a request; unknown fds: not judged).
fn unserved(inp: &Inputs) -> (u64, u64, bool) {
    let accepts: u64 = inp.workers.iter().map(|w| w.accepts).sum();
    let requests: u64 = inp.workers.iter().map(|w| w.requests).sum();
    let without = accepts.saturating_sub(requests);
    let fds_peak: Option<u64> = inp.workers.iter().map(|w| w.fds_peak).sum();
    let many = accepts >= UNSERVED_MIN_ACCEPTS
        && accepts as f64 >= UNSERVED_ACCEPTS_PER_REQUEST * requests as f64
        && fds_peak.is_some_and(|p| p * 2 < without);
    (accepts, requests, many)
}

/// Longest event-loop iteration (epoll wait return to next call) that counts as a
/// stall, ns.
pub const STALL_MIN_NS: u64 = 100_000_000;

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Costs throughput or latency.
    Warning,
    /// Clients are being refused or dropped.
    Critical,
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

/// One worker's numbers for the period judged.
#[derive(Clone, Debug, Default)]
pub struct WorkerInput {
    /// Host pid (0 for the merged old exited workers).
    pub pid: u32,
    /// False for workers that exited during the period: they count in totals
    /// (requests, accepts per request, log writes) but not in balance or fd rules.
    pub alive: bool,
    /// Successful accepts.
    pub accepts: u64,
    /// accept4/accept failures with EMFILE.
    pub emfile: u64,
    /// accept4/accept failures with ENFILE.
    pub enfile: u64,
    /// Requests (uprobe count or estimate).
    pub requests: u64,
    /// Time outside epoll_wait (busy), ns; None when not measured.
    pub busy_ns: Option<u64>,
    /// CPU time in the period (`/proc/<pid>/stat`), seconds; None when unreadable.
    pub cpu_s: Option<f64>,
    /// Time runnable but waiting for a CPU in the period (`/proc/<pid>/schedstat`),
    /// ns; None when unreadable.
    pub run_delay_ns: Option<u64>,
    /// Connections closed right after accept (no free connection).
    pub accepted_then_closed: u64,
    /// Writes to access logs, their total and p99 time, ns.
    pub access_log_writes: u64,
    pub access_log_ns: u64,
    pub access_log_p99_ns: u64,
    /// Longest and p99 event-loop iteration, ns.
    pub max_iteration_ns: u64,
    pub p99_iteration_ns: u64,
    /// ns spent in accept4/accept and close (connection set-up and tear-down).
    pub conn_syscall_ns: u64,
    /// ns spent in all traced syscalls.
    pub all_syscall_ns: u64,
    /// Open fds now and at peak (/proc/<pid>/fd), and the soft RLIMIT_NOFILE in force
    /// (/proc/<pid>/limits); None when unreadable.
    pub fds_open: Option<u64>,
    pub fds_peak: Option<u64>,
    pub fd_limit: Option<u64>,
}

/// Everything the rules look at.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// Live workers (exited ones are left out of balance rules).
    pub workers: Vec<WorkerInput>,
    /// Whether `close` was traced (`--syscalls all`), for the keepalive evidence.
    pub close_traced: bool,
    /// nginx's listening sockets over the period.
    pub listen: Vec<crate::model::ListenReport>,
    /// Length of the period judged, seconds.
    pub period_s: f64,
}

/// Jain's fairness index of `xs`: 1.0 when all equal, 1/n when one has everything.
/// Returns 1.0 for an empty or all-zero input.
pub fn jain_index(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    if xs.is_empty() || sq == 0.0 {
        return 1.0;
    }
    sum * sum / (xs.len() as f64 * sq)
}

fn round3(v: f64) -> serde_json::Value {
    serde_json::json!(crate::model::round3(v))
}

/// Applies every rule; returns the verdicts, most severe first.
pub fn judge(inp: &Inputs) -> Vec<Verdict> {
    let mut out = Vec::new();
    accept_imbalance(inp, &mut out);
    keepalive_off(inp, &mut out);
    fd_exhaustion(inp, &mut out);
    event_loop_stall(inp, &mut out);
    accept_queue_overflow(inp, &mut out);
    cpu_starved(inp, &mut out);
    access_log_unbuffered(inp, &mut out);
    worker_connections_exhausted(inp, &mut out);
    out.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.id.cmp(&b.id)));
    out
}

/// Shares of `xs` in their total, when every value is known and the total is at least
/// `min_total`.
fn shares(xs: &[Option<f64>], min_total: f64) -> Option<Vec<f64>> {
    let vals: Option<Vec<f64>> = xs.iter().copied().collect();
    let vals = vals?;
    let total: f64 = vals.iter().sum();
    (total >= min_total && total > 0.0).then(|| vals.iter().map(|v| v / total).collect())
}

fn share_map(pids: &[u32], shares: &[f64]) -> serde_json::Value {
    serde_json::json!(pids
        .iter()
        .zip(shares)
        .map(|(p, s)| (p.to_string(), crate::model::round3(*s)))
        .collect::<BTreeMap<_, _>>())
}

/// Busy time judged only from 50 ms of it on; CPU time (10 ms ticks) from 1 s.
const IMBALANCE_MIN_BUSY_NS: f64 = 50e6;
const IMBALANCE_MIN_CPU_S: f64 = 1.0;

fn accept_imbalance(inp: &Inputs, out: &mut Vec<Verdict>) {
    let live: Vec<&WorkerInput> = inp.workers.iter().filter(|w| w.alive).collect();
    let n = live.len();
    let total: u64 = live.iter().map(|w| w.accepts).sum();
    if n < 2 || total < IMBALANCE_MIN_ACCEPTS {
        return;
    }
    let pids: Vec<u32> = live.iter().map(|w| w.pid).collect();
    let mean = 1.0 / n as f64;
    let max_over_mean = |s: &[f64]| s.iter().cloned().fold(0.0, f64::max) / mean;
    let accept_shares: Vec<f64> = live
        .iter()
        .map(|w| w.accepts as f64 / total as f64)
        .collect();
    let busy_shares = shares(
        &live
            .iter()
            .map(|w| w.busy_ns.map(|b| b as f64))
            .collect::<Vec<_>>(),
        IMBALANCE_MIN_BUSY_NS,
    );
    let cpu_shares = shares(
        &live.iter().map(|w| w.cpu_s).collect::<Vec<_>>(),
        IMBALANCE_MIN_CPU_S,
    );
    let accept_skew = max_over_mean(&accept_shares);
    let busy_skew = busy_shares.as_deref().map(max_over_mean).unwrap_or(0.0);
    let cpu_skew = cpu_shares.as_deref().map(max_over_mean).unwrap_or(0.0);
    // Even accept shares with uneven work are not balanced either.
    let work_skew = busy_skew.max(cpu_skew);
    if accept_skew < IMBALANCE_MAX_OVER_MEAN && work_skew < IMBALANCE_MAX_OVER_MEAN {
        return;
    }
    let mut evidence = BTreeMap::new();
    evidence.insert("accepts", serde_json::json!(total));
    evidence.insert("accept_shares", share_map(&pids, &accept_shares));
    evidence.insert("max_over_mean", round3(accept_skew));
    evidence.insert("jain_index", round3(jain_index(&accept_shares)));
    if let Some(b) = &busy_shares {
        evidence.insert("busy_shares", share_map(&pids, b));
        evidence.insert("busy_max_over_mean", round3(busy_skew));
        evidence.insert("busy_jain_index", round3(jain_index(b)));
    }
    if let Some(c) = &cpu_shares {
        evidence.insert("cpu_shares", share_map(&pids, c));
        evidence.insert("cpu_jain_index", round3(jain_index(c)));
    }
    let (what, shares_used) = if accept_skew >= IMBALANCE_MAX_OVER_MEAN {
        ("accepts", accept_shares.clone())
    } else if busy_skew >= cpu_skew {
        ("busy time", busy_shares.clone().unwrap_or_default())
    } else {
        ("CPU time", cpu_shares.clone().unwrap_or_default())
    };
    let top = shares_used
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.partial_cmp(b.1).unwrap_or(std::cmp::Ordering::Equal))
        .map(|(i, s)| (pids[i], *s))
        .unwrap_or((0, 0.0));
    evidence.insert("busiest_worker", serde_json::json!(top.0));
    out.push(Verdict::new(
        "accept_imbalance",
        Severity::Warning,
        evidence,
        &["multi_accept", "accept_mutex", "listen ... reuseport"],
        format!(
            "worker {} has {:.0}% of the {what}: one worker carries the load while others idle; with a shared listen socket `listen ... reuseport` spreads new connections (multi_accept on makes it worse); with even accepts but uneven work, long-lived busy connections pile on one worker",
            top.0,
            top.1 * 100.0
        ),
    ));
}

fn keepalive_off(inp: &Inputs, out: &mut Vec<Verdict>) {
    let requests: u64 = inp.workers.iter().map(|w| w.requests).sum();
    let accepts: u64 = inp.workers.iter().map(|w| w.accepts).sum();
    if requests < KEEPALIVE_MIN_REQUESTS {
        return;
    }
    let per_request = accepts as f64 / requests as f64;
    // Far more connections than requests is not clients declining keepalive but
    // connections closed unserved (see worker_connections_exhausted).
    if per_request < KEEPALIVE_ACCEPTS_PER_REQUEST || unserved(inp).2 {
        return;
    }
    let conn_ns: u64 = inp.workers.iter().map(|w| w.conn_syscall_ns).sum();
    let all_ns: u64 = inp.workers.iter().map(|w| w.all_syscall_ns).sum();
    let mut evidence = BTreeMap::new();
    evidence.insert("accepts", serde_json::json!(accepts));
    evidence.insert("requests", serde_json::json!(requests));
    evidence.insert("accepts_per_request", round3(per_request));
    if all_ns > 0 {
        evidence.insert(
            if inp.close_traced {
                "accept_close_share_of_syscall_time"
            } else {
                "accept_share_of_syscall_time"
            },
            round3(conn_ns as f64 / all_ns as f64),
        );
    }
    out.push(Verdict::new(
        "keepalive_off",
        Severity::Warning,
        evidence,
        &["keepalive_timeout", "keepalive_requests"],
        format!(
            "{per_request:.2} accepts per request: connections are not reused, so every request pays a TCP handshake and teardown; enable keepalive (keepalive_timeout > 0) and have clients send Connection: keep-alive"
        ),
    ));
}

fn fd_exhaustion(inp: &Inputs, out: &mut Vec<Verdict>) {
    let emfile: u64 = inp.workers.iter().map(|w| w.emfile).sum();
    let enfile: u64 = inp.workers.iter().map(|w| w.enfile).sum();
    let tight: Vec<&WorkerInput> = inp
        .workers
        .iter()
        .filter(|w| w.alive)
        .filter(|w| match (w.fds_peak, w.fd_limit) {
            (Some(peak), Some(limit)) if limit > 0 => {
                (limit.saturating_sub(peak)) as f64 / (limit as f64) < FD_HEADROOM_MIN
            }
            _ => false,
        })
        .collect();
    if emfile == 0 && enfile == 0 && tight.is_empty() {
        return;
    }
    let mut evidence = BTreeMap::new();
    evidence.insert("emfile", serde_json::json!(emfile));
    evidence.insert("enfile", serde_json::json!(enfile));
    evidence.insert(
        "workers",
        serde_json::json!(inp
            .workers
            .iter()
            .filter(|w| w.alive)
            .map(|w| serde_json::json!({
                "pid": w.pid, "emfile": w.emfile, "fds_open": w.fds_open,
                "fds_peak": w.fds_peak, "limit": w.fd_limit,
            }))
            .collect::<Vec<_>>()),
    );
    let limit = inp.workers.iter().filter_map(|w| w.fd_limit).min();
    let severity = if emfile + enfile > 0 {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let advice = if enfile > 0 {
        "the system-wide file table is full (ENFILE): raise fs.file-max".to_string()
    } else {
        format!(
            "workers run into their soft open-files limit ({}): raise it with worker_rlimit_nofile (within the hard limit) above worker_connections plus log and upstream fds; while refused, clients wait in the listen backlog",
            limit.map(|l| l.to_string()).unwrap_or_else(|| "unknown".into())
        )
    };
    out.push(Verdict::new(
        "fd_exhaustion",
        severity,
        evidence,
        &["worker_rlimit_nofile", "worker_connections"],
        advice,
    ));
}

fn worker_connections_exhausted(inp: &Inputs, out: &mut Vec<Verdict>) {
    let closed: u64 = inp.workers.iter().map(|w| w.accepted_then_closed).sum();
    let (accepts, requests, unserved) = unserved(inp);
    if closed == 0 && !unserved {
        return;
    }
    let mut evidence = BTreeMap::new();
    evidence.insert("accepted_then_closed", serde_json::json!(closed));
    evidence.insert("accepts", serde_json::json!(accepts));
    evidence.insert("requests", serde_json::json!(requests));
    evidence.insert(
        "workers",
        serde_json::json!(inp
            .workers
            .iter()
            .filter(|w| w.accepted_then_closed > 0)
            .map(|w| serde_json::json!({"pid": w.pid, "accepted_then_closed": w.accepted_then_closed, "fds_open": w.fds_open}))
            .collect::<Vec<_>>()),
    );
    let advice = if closed > 0 {
        format!(
            "{closed} connections were accepted and closed at once: the workers had no free connection (nginx logs \"worker_connections are not enough\"); raise worker_connections (and worker_rlimit_nofile with it)"
        )
    } else {
        format!(
            "{accepts} connections carried only {requests} requests: at least {} were closed before a request was served; when worker_connections runs out nginx closes idle and not-yet-read connections to reuse them (it logs \"worker_connections are not enough, reusing connections\"): raise worker_connections (and worker_rlimit_nofile with it); otherwise clients connect without sending (health checks, preconnects)",
            accepts - requests
        )
    };
    out.push(Verdict::new(
        "worker_connections_exhausted",
        if closed > 0 {
            Severity::Critical
        } else {
            Severity::Warning
        },
        evidence,
        &["worker_connections", "worker_rlimit_nofile"],
        advice,
    ));
}

fn access_log_unbuffered(inp: &Inputs, out: &mut Vec<Verdict>) {
    let requests: u64 = inp.workers.iter().map(|w| w.requests).sum();
    let writes: u64 = inp.workers.iter().map(|w| w.access_log_writes).sum();
    if requests < ACCESS_LOG_MIN_REQUESTS {
        return;
    }
    let per_request = writes as f64 / requests as f64;
    if per_request < ACCESS_LOG_WRITES_PER_REQUEST {
        return;
    }
    let log_ns: u64 = inp.workers.iter().map(|w| w.access_log_ns).sum();
    let all_ns: u64 = inp.workers.iter().map(|w| w.all_syscall_ns).sum();
    let p99 = inp
        .workers
        .iter()
        .map(|w| w.access_log_p99_ns)
        .max()
        .unwrap_or(0);
    let mut evidence = BTreeMap::new();
    evidence.insert("access_log_writes", serde_json::json!(writes));
    evidence.insert("requests", serde_json::json!(requests));
    evidence.insert("writes_per_request", round3(per_request));
    evidence.insert("p99_write_us", round3(p99 as f64 / 1e3));
    if all_ns > 0 {
        evidence.insert(
            "share_of_syscall_time",
            round3(log_ns as f64 / all_ns as f64),
        );
    }
    out.push(Verdict::new(
        "access_log_unbuffered",
        Severity::Warning,
        evidence,
        &["access_log ... buffer=", "access_log ... flush=", "access_log off"],
        format!(
            "{per_request:.2} access-log write() calls per request: every request pays a write to the log file; buffer it (`access_log <path> buffer=32k flush=5s;`) or turn it off where it is not needed"
        ),
    ));
}

fn accept_queue_overflow(inp: &Inputs, out: &mut Vec<Verdict>) {
    let Some(first) = inp.listen.first() else {
        return;
    };
    // nginx's own sockets' drop counters are exact; the TcpExt counters are
    // namespace-wide, so without the former, blame nginx only when its own queue was
    // seen holding connections (a 500 ms sample can miss a small queue filling up).
    let own: Option<u64> = inp
        .listen
        .iter()
        .map(|l| l.socket_drops)
        .sum::<Option<u64>>();
    let waited = inp.listen.iter().any(|l| l.queue_max > 0);
    let full = inp
        .listen
        .iter()
        .any(|l| l.backlog > 0 && l.queue_max >= l.backlog);
    let lost = match own {
        Some(n) => n,
        None if waited => first.overflows + first.drops,
        None => 0,
    };
    if !(full || lost > 0) {
        return;
    }
    let mut evidence = BTreeMap::new();
    evidence.insert(
        "sockets",
        serde_json::json!(inp
            .listen
            .iter()
            .map(|l| serde_json::json!({"addr": l.addr, "backlog": l.backlog, "queue_max": l.queue_max}))
            .collect::<Vec<_>>()),
    );
    evidence.insert("listen_overflows", serde_json::json!(first.overflows));
    evidence.insert("listen_drops", serde_json::json!(first.drops));
    if let Some(n) = own {
        evidence.insert("socket_drops", serde_json::json!(n));
    }
    let worst = inp
        .listen
        .iter()
        .max_by_key(|l| l.queue_max)
        .unwrap_or(first);
    out.push(Verdict::new(
        "accept_queue_overflow",
        if lost > 0 { Severity::Critical } else { Severity::Warning },
        evidence,
        &["listen ... backlog=", "net.core.somaxconn"],
        format!(
            "up to {} connections waited in the accept queue of {} (backlog {}) and the kernel dropped {lost} {}: nginx is not accepting fast enough (fd limit, busy workers) or the backlog is too small: raise `listen ... backlog=` together with net.core.somaxconn",
            worst.queue_max,
            worst.addr,
            worst.backlog,
            if own.is_some() { "at nginx's listening sockets" } else { "in this network namespace" }
        ),
    ));
}

/// Share of the period a worker waited for a CPU at or above which it is starved.
pub const CPU_STARVED_SHARE: f64 = 0.20;

fn cpu_starved(inp: &Inputs, out: &mut Vec<Verdict>) {
    if inp.period_s <= 0.0 {
        return;
    }
    let share = |w: &WorkerInput| w.run_delay_ns.unwrap_or(0) as f64 / 1e9 / inp.period_s;
    let starved: Vec<&WorkerInput> = inp
        .workers
        .iter()
        .filter(|w| w.alive && share(w) >= CPU_STARVED_SHARE)
        .collect();
    let Some(worst) = starved.iter().max_by(|a, b| share(a).total_cmp(&share(b))) else {
        return;
    };
    let mut evidence = BTreeMap::new();
    evidence.insert(
        "workers",
        serde_json::json!(starved
            .iter()
            .map(|w| serde_json::json!({
                "pid": w.pid,
                "run_delay_ms": (w.run_delay_ns.unwrap_or(0) as f64 / 1e6).round(),
                "share": crate::model::round3(share(w)),
                "cpu_s": w.cpu_s,
            }))
            .collect::<Vec<_>>()),
    );
    evidence.insert("period_s", round3(inp.period_s));
    out.push(Verdict::new(
        "cpu_starved",
        Severity::Warning,
        evidence,
        &["worker_processes", "worker_cpu_affinity", "worker_priority"],
        format!(
            "worker {} waited for a CPU {:.0}% of the time (runnable, not running): other processes compete for the cores, or there are more workers than cores; every connection of a waiting worker waits too: keep worker_processes at the core count (auto), pin with worker_cpu_affinity, or move the other load",
            worst.pid,
            share(worst) * 100.0
        ),
    ));
}

fn event_loop_stall(inp: &Inputs, out: &mut Vec<Verdict>) {
    // A long iteration of a worker that waited for a CPU about as long in the period
    // may be the scheduler's doing, not nginx's (cpu_starved says so): not a stall.
    let stalled: Vec<&WorkerInput> = inp
        .workers
        .iter()
        .filter(|w| w.max_iteration_ns >= STALL_MIN_NS)
        .filter(|w| w.run_delay_ns.is_none_or(|d| d < w.max_iteration_ns / 2))
        .collect();
    let Some(worst) = stalled.iter().max_by_key(|w| w.max_iteration_ns) else {
        return;
    };
    let mut evidence = BTreeMap::new();
    evidence.insert("worker", serde_json::json!(worst.pid));
    evidence.insert(
        "max_iteration_ms",
        round3(worst.max_iteration_ns as f64 / 1e6),
    );
    evidence.insert(
        "p99_iteration_ms",
        round3(worst.p99_iteration_ns as f64 / 1e6),
    );
    evidence.insert(
        "stalled_workers",
        serde_json::json!(stalled.iter().map(|w| w.pid).collect::<Vec<_>>()),
    );
    out.push(Verdict::new(
        "event_loop_stall",
        Severity::Warning,
        evidence,
        &["gzip", "sendfile_max_chunk", "aio threads", "output_buffers"],
        format!(
            "worker {} spent {:.0} ms in one event-loop iteration without returning to epoll_wait, and every other connection it holds waited that long: look for CPU-heavy or blocking work per request (gzip of large responses, sendfile without sendfile_max_chunk, blocking disk reads: aio threads)",
            worst.pid,
            worst.max_iteration_ns as f64 / 1e6
        ),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(pid: u32, accepts: u64, requests: u64) -> WorkerInput {
        WorkerInput {
            pid,
            alive: true,
            accepts,
            requests,
            ..WorkerInput::default()
        }
    }

    #[test]
    fn connections_closed_unserved_are_worker_connections_not_keepalive() {
        // The claims lab's worker_connections 64 under 300 keepalive clients: 33438
        // accepts for 9756 requests, none closed right after accept.
        let mut a = w(1, 16_000, 5_000);
        let mut b = w(2, 17_438, 4_756);
        a.fds_peak = Some(70);
        b.fds_peak = Some(70);
        let v = judge(&Inputs {
            workers: vec![a.clone(), b.clone()],
            ..Inputs::default()
        });
        let ids: Vec<&str> = v.iter().map(|v| v.id.as_str()).collect();
        assert_eq!(ids, ["worker_connections_exhausted"]);
        assert_eq!(v[0].severity, Severity::Warning);
        assert_eq!(v[0].evidence["accepts"], serde_json::json!(33_438));
        assert!(
            v[0].advice.contains("at least 23682 were closed"),
            "{}",
            v[0].advice
        );
        // The same counts with the connections held open (idle clients): not this.
        a.fds_peak = Some(16_000);
        b.fds_peak = Some(17_000);
        assert!(judge(&Inputs {
            workers: vec![a, b],
            ..Inputs::default()
        })
        .iter()
        .all(|v| v.id != "worker_connections_exhausted"));
        // One request per connection is keepalive off, not this.
        let v = judge(&Inputs {
            workers: vec![w(1, 400, 400)],
            ..Inputs::default()
        });
        let ids: Vec<&str> = v.iter().map(|v| v.id.as_str()).collect();
        assert_eq!(ids, ["keepalive_off"]);
    }

    #[test]
    fn waiting_for_a_cpu_is_starvation_not_a_stall() {
        // A 105 ms iteration in a 5 s period in which the worker waited 1.2 s for a CPU
        // (a loaded 2-core machine): cpu_starved, no event_loop_stall.
        let mut a = w(1, 0, 0);
        a.max_iteration_ns = 105_000_000;
        a.run_delay_ns = Some(1_200_000_000);
        a.cpu_s = Some(0.8);
        let v = judge(&Inputs {
            workers: vec![a.clone()],
            period_s: 5.0,
            ..Inputs::default()
        });
        let ids: Vec<&str> = v.iter().map(|v| v.id.as_str()).collect();
        assert_eq!(ids, ["cpu_starved"]);
        assert_eq!(
            v[0].evidence["workers"][0]["share"],
            serde_json::json!(0.24)
        );
        assert!(v[0].advice.contains("waited for a CPU 24% of the time"));
        // The same iteration with little waiting: a stall of nginx's own making.
        a.run_delay_ns = Some(20_000_000);
        let v = judge(&Inputs {
            workers: vec![a],
            period_s: 5.0,
            ..Inputs::default()
        });
        let ids: Vec<&str> = v.iter().map(|v| v.id.as_str()).collect();
        assert_eq!(ids, ["event_loop_stall"]);
    }

    #[test]
    fn stall_rule_fires_at_100_ms() {
        let mut a = w(1, 0, 0);
        a.max_iteration_ns = 99_000_000;
        assert!(judge(&Inputs {
            workers: vec![a.clone()],
            ..Inputs::default()
        })
        .is_empty());
        let mut b = w(2, 0, 0);
        b.max_iteration_ns = 2_500_000_000;
        b.p99_iteration_ns = 50_000;
        let v = judge(&Inputs {
            workers: vec![a, b],
            ..Inputs::default()
        });
        assert_eq!(v[0].id, "event_loop_stall");
        assert_eq!(v[0].evidence["worker"], serde_json::json!(2));
        assert_eq!(v[0].evidence["max_iteration_ms"], serde_json::json!(2500.0));
        assert_eq!(v[0].evidence["stalled_workers"], serde_json::json!([2]));
        assert!(v[0].directives.iter().any(|d| d == "gzip"));
    }

    #[test]
    fn queue_rule_needs_nginx_queue_to_have_held_connections() {
        let l = |queue_max, backlog, overflows| crate::model::ListenReport {
            addr: "127.0.0.1:80".into(),
            backlog,
            queue_now: 0,
            queue_max,
            overflows,
            drops: 0,
            socket_drops: None,
        };
        // Someone else's overflows, nginx's queue always empty: no verdict.
        let other = Inputs {
            listen: vec![l(0, 511, 40)],
            ..Inputs::default()
        };
        assert!(judge(&other).is_empty());
        let dropped = Inputs {
            listen: vec![l(16, 16, 40)],
            ..Inputs::default()
        };
        let v = judge(&dropped);
        assert_eq!(v[0].id, "accept_queue_overflow");
        assert_eq!(v[0].severity, Severity::Critical);
        assert_eq!(v[0].evidence["listen_overflows"], serde_json::json!(40));
        let full = Inputs {
            listen: vec![l(511, 511, 0)],
            ..Inputs::default()
        };
        assert_eq!(judge(&full)[0].severity, Severity::Warning);
        let waiting = Inputs {
            listen: vec![l(100, 511, 0)],
            ..Inputs::default()
        };
        assert!(judge(&waiting).is_empty());
    }

    #[test]
    fn queue_rule_trusts_nginx_socket_drops_over_the_namespace_counters() {
        let l = |queue_max, overflows, socket_drops| crate::model::ListenReport {
            addr: "127.0.0.1:80".into(),
            backlog: 16,
            queue_now: 0,
            queue_max,
            overflows,
            drops: overflows,
            socket_drops: Some(socket_drops),
        };
        // A small queue that filled and drained between two samples: nginx's socket
        // dropped 1838, though no sample saw a connection waiting.
        let v = judge(&Inputs {
            listen: vec![l(0, 1838, 1838)],
            ..Inputs::default()
        });
        assert_eq!(v[0].id, "accept_queue_overflow");
        assert_eq!(v[0].severity, Severity::Critical);
        assert_eq!(v[0].evidence["socket_drops"], serde_json::json!(1838));
        assert!(v[0]
            .advice
            .contains("dropped 1838 at nginx's listening sockets"));
        // Overflows elsewhere in the namespace, none at nginx's socket: no verdict,
        // even though nginx's queue held connections.
        assert!(judge(&Inputs {
            listen: vec![l(5, 40, 0)],
            ..Inputs::default()
        })
        .is_empty());
    }

    #[test]
    fn access_log_rule_counts_writes_per_request() {
        let mut a = w(1, 1, 300);
        a.access_log_writes = 300;
        a.access_log_ns = 300_000;
        a.all_syscall_ns = 3_000_000;
        a.access_log_p99_ns = 8_000;
        let v = judge(&Inputs {
            workers: vec![a.clone()],
            ..Inputs::default()
        });
        assert_eq!(v[0].id, "access_log_unbuffered");
        assert_eq!(v[0].evidence["writes_per_request"], serde_json::json!(1.0));
        assert_eq!(
            v[0].evidence["share_of_syscall_time"],
            serde_json::json!(0.1)
        );
        assert_eq!(v[0].evidence["p99_write_us"], serde_json::json!(8.0));
        let mut buffered = a;
        buffered.access_log_writes = 3;
        assert!(judge(&Inputs {
            workers: vec![buffered],
            ..Inputs::default()
        })
        .is_empty());
    }

    #[test]
    fn exited_workers_count_in_totals_but_not_in_balance() {
        // A reload mid-run: the old workers served most of the close-per-request load.
        let mut old = w(1, 900, 900);
        old.alive = false;
        let new = w(2, 100, 100);
        let v = judge(&Inputs {
            workers: vec![old, new],
            ..Inputs::default()
        });
        let ids: Vec<&str> = v.iter().map(|v| v.id.as_str()).collect();
        assert_eq!(ids, vec!["keepalive_off"], "{v:?}");
        assert_eq!(v[0].evidence["accepts"], serde_json::json!(1000));
    }

    #[test]
    fn worker_connections_rule_fires_on_any_accept_then_close() {
        assert!(judge(&Inputs {
            workers: vec![w(1, 10, 0)],
            ..Inputs::default()
        })
        .is_empty());
        let mut a = w(1, 10, 0);
        a.accepted_then_closed = 7;
        let v = judge(&Inputs {
            workers: vec![a],
            ..Inputs::default()
        });
        assert_eq!(v[0].id, "worker_connections_exhausted");
        assert_eq!(v[0].severity, Severity::Critical);
        assert_eq!(v[0].evidence["accepted_then_closed"], serde_json::json!(7));
        assert_eq!(v[0].directives[0], "worker_connections");
    }

    #[test]
    fn even_accepts_with_uneven_work_are_not_balanced() {
        let mut a = w(1, 500, 0);
        let mut b = w(2, 500, 0);
        a.busy_ns = Some(900_000_000);
        b.busy_ns = Some(100_000_000);
        a.cpu_s = Some(0.9);
        b.cpu_s = Some(0.1);
        let v = judge(&Inputs {
            workers: vec![a.clone(), b.clone()],
            ..Inputs::default()
        });
        assert_eq!(v[0].id, "accept_imbalance");
        assert_eq!(v[0].evidence["max_over_mean"], serde_json::json!(1.0));
        assert_eq!(v[0].evidence["busy_max_over_mean"], serde_json::json!(1.8));
        assert_eq!(v[0].evidence["busiest_worker"], serde_json::json!(1));
        assert!(v[0].advice.contains("busy time"), "{}", v[0].advice);
        // Too little work to judge: no verdict.
        a.busy_ns = Some(9_000_000);
        b.busy_ns = Some(1_000_000);
        a.cpu_s = Some(0.01);
        b.cpu_s = Some(0.0);
        assert!(judge(&Inputs {
            workers: vec![a, b],
            ..Inputs::default()
        })
        .is_empty());
    }

    #[test]
    fn jain_index_bounds() {
        assert_eq!(jain_index(&[1.0, 1.0, 1.0]), 1.0);
        assert!((jain_index(&[1.0, 0.0]) - 0.5).abs() < 1e-12);
        assert!((jain_index(&[0.75, 0.25]) - 0.8).abs() < 1e-12);
        assert_eq!(jain_index(&[]), 1.0);
    }

    #[test]
    fn imbalance_needs_enough_accepts_and_real_skew() {
        let few = Inputs {
            workers: vec![w(1, 150, 0), w(2, 0, 0)],
            ..Inputs::default()
        };
        assert!(judge(&few).is_empty(), "150 accepts are too few to judge");
        let even = Inputs {
            workers: vec![w(1, 520, 0), w(2, 480, 0)],
            ..Inputs::default()
        };
        assert!(judge(&even).is_empty());
        let skewed = Inputs {
            workers: vec![w(1, 900, 0), w(2, 100, 0)],
            ..Inputs::default()
        };
        let v = judge(&skewed);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].id, "accept_imbalance");
        assert_eq!(v[0].evidence["max_over_mean"], serde_json::json!(1.8));
        assert_eq!(v[0].evidence["busiest_worker"], serde_json::json!(1));
        assert!(v[0].directives.iter().any(|d| d == "listen ... reuseport"));
        // Exactly at the threshold (75% of 2) fires.
        let edge = Inputs {
            workers: vec![w(1, 750, 0), w(2, 250, 0)],
            ..Inputs::default()
        };
        assert_eq!(
            judge(&edge)[0].evidence["jain_index"],
            serde_json::json!(0.8)
        );
    }

    #[test]
    fn keepalive_rule_uses_accepts_per_request() {
        let reuse = Inputs {
            workers: vec![w(1, 5, 1000), w(2, 5, 1000)],
            ..Inputs::default()
        };
        assert!(judge(&reuse).iter().all(|v| v.id != "keepalive_off"));
        let mut close = Inputs {
            workers: vec![w(1, 500, 500), w(2, 500, 500)],
            close_traced: true,
            ..Inputs::default()
        };
        close.workers[0].conn_syscall_ns = 300;
        close.workers[0].all_syscall_ns = 1000;
        close.workers[1].conn_syscall_ns = 100;
        close.workers[1].all_syscall_ns = 1000;
        let v = judge(&close);
        let k = v.iter().find(|v| v.id == "keepalive_off").expect("fires");
        assert_eq!(k.evidence["accepts_per_request"], serde_json::json!(1.0));
        assert_eq!(
            k.evidence["accept_close_share_of_syscall_time"],
            serde_json::json!(0.2)
        );
        assert_eq!(
            k.directives,
            vec!["keepalive_timeout", "keepalive_requests"]
        );
        // Too few requests: no verdict.
        let few = Inputs {
            workers: vec![w(1, 50, 50), w(2, 50, 50)],
            ..Inputs::default()
        };
        assert!(judge(&few).is_empty());
    }

    #[test]
    fn fd_rule_fires_on_emfile_or_thin_headroom() {
        let mut a = w(1, 10, 10);
        a.fds_peak = Some(100);
        a.fd_limit = Some(1024);
        let ok = Inputs {
            workers: vec![a.clone()],
            ..Inputs::default()
        };
        assert!(judge(&ok).is_empty());
        let mut thin = a.clone();
        thin.fds_peak = Some(960);
        let v = judge(&Inputs {
            workers: vec![thin],
            ..Inputs::default()
        });
        assert_eq!(v[0].id, "fd_exhaustion");
        assert_eq!(v[0].severity, Severity::Warning);
        let mut refused = a;
        refused.emfile = 3;
        refused.fd_limit = Some(64);
        let v = judge(&Inputs {
            workers: vec![refused],
            ..Inputs::default()
        });
        assert_eq!(v[0].severity, Severity::Critical);
        assert!(v[0].advice.contains("(64)"), "{}", v[0].advice);
        assert!(v[0].directives.iter().any(|d| d == "worker_rlimit_nofile"));
    }
}
