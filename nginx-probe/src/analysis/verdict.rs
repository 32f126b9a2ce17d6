//! Verdicts: rules that turn a report's numbers into findings a user can act on. Each
//! names the nginx directives involved and carries the numbers behind it. Pure: unit
//! tests feed [`Inputs`] directly. Thresholds are constants here and in docs/verdicts.md.

use std::collections::BTreeMap;

use crate::{
    analysis::log_verdicts::{self, access_log_unbuffered},
    model::{Severity, Verdict, WorkerReport},
};

/// Relative precision at which a worker's accept share is known before accept balance is
/// judged: the 95% binomial interval of a fair split's share (`1.96 * sqrt(p (1 - p) /
/// N)` at `p = 1 / workers`) within this fraction of the mean share. See
/// [`imbalance_min_accepts`].
pub const IMBALANCE_SHARE_PRECISION: f64 = 0.1;

/// Accepts needed before accept balance is judged with `workers` live workers: the
/// smallest count at which a fair split's share of one worker is known to within
/// [`IMBALANCE_SHARE_PRECISION`] of the mean share at 95% (binomial: `N` at least
/// `1.96^2 (n - 1) / 0.1^2` with `n` workers): 385 with 2 workers, 769 with 3, 1153
/// with 4. Fewer accepts measure a share too loosely to judge (newcomer trial: 300
/// accepts on 2 workers fired on a short run). From that count a 1.5x share is beyond a
/// fair split's chance by more than 9 standard deviations, whatever the number of
/// workers.
pub fn imbalance_min_accepts(workers: usize) -> u64 {
    let n = workers.max(2) as f64;
    let z = 1.96_f64;
    (z * z * (n - 1.0) / (IMBALANCE_SHARE_PRECISION * IMBALANCE_SHARE_PRECISION)).ceil() as u64
}

/// Busiest worker's share over the mean share at which accepts are "imbalanced" (with 2
/// workers: 75% / 25%).
pub const IMBALANCE_MAX_OVER_MEAN: f64 = 1.5;
/// Requests needed before the keepalive rule is judged.
pub const KEEPALIVE_MIN_REQUESTS: u64 = 200;
/// Accepts per request at or above which clients do not reuse connections.
pub const KEEPALIVE_ACCEPTS_PER_REQUEST: f64 = 0.5;
pub use super::log_verdicts::{
    ACCESS_LOG_MIN_REQUESTS, ACCESS_LOG_MIN_SYSCALL_SHARE, ACCESS_LOG_MIN_WRITES_PER_S,
    ACCESS_LOG_SHARE_MIN_WRITES_PER_S, ACCESS_LOG_WRITES_PER_REQUEST,
};

use super::worker_connections::{nginx_reused_them, unserved};
pub use super::worker_connections::{UNSERVED_ACCEPTS_PER_REQUEST, UNSERVED_MIN_ACCEPTS};

/// Longest event-loop iteration (epoll wait return to next call) that counts as a
/// stall, ns.
pub const STALL_MIN_NS: u64 = 100_000_000;

pub use crate::analysis::inputs::{log_count, Inputs, WorkerInput};
// The fd-limit and upstream thresholds live with their rules; named here as well.
pub use crate::analysis::fd_upstream::{
    FD_HEADROOM_MIN, FILES_SHARE_OF_LIMIT, UPSTREAM_CONNECTS_PER_REQUEST, UPSTREAM_MIN_REQUESTS,
    UPSTREAM_PEER_FAILED_SHARE,
};

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

use crate::model::round3_json as round3;

/// Applies every rule; returns the verdicts, most severe first.
pub fn judge(inp: &Inputs) -> Vec<Verdict> {
    let mut out = Vec::new();
    // With --detail sampled, a rule that divides a detail figure (counted in windows
    // only) by requests divides by the exact requests of the same windows; unknown
    // there: unknown, and the rule stays quiet.
    let windowed;
    let per_request: &Inputs = match &inp.detail {
        Some(d) => {
            windowed = Inputs {
                requests: d.requests_in_windows,
                ..inp.clone()
            };
            &windowed
        }
        None => inp,
    };
    accept_imbalance(inp, &mut out);
    keepalive_off(inp, &mut out);
    super::tls_handshakes::tls_handshake_cost(inp, &mut out);
    super::conn_verdicts::keepalive_timeout_closes(inp, &mut out);
    super::conn_verdicts::listener_closed_resets(inp, &mut out);
    super::conn_resets::nginx_reset_connections(inp, &mut out);
    super::conn_resets::requests_after_close(inp, &mut out);
    super::upstream_idle::upstream_peer_idle_closes(inp, &mut out);
    // Under sampled detail the connection lifecycle's upstream connects are the whole
    // period's (continuous): judged against the period's requests, not the windows'.
    let upstream = if super::fd_upstream::counts_from_lifecycle(inp) {
        inp
    } else {
        per_request
    };
    super::fd_upstream::upstream_keepalive_off(upstream, &mut out);
    // Its connects are the lifecycle's, the whole period's, under any --detail.
    super::upstream_pool::upstream_pool_overflow(inp, &mut out);
    super::fd_upstream::fd_exhaustion(inp, &mut out);
    event_loop_stall(inp, &mut out);
    accept_queue_overflow(inp, &mut out);
    cpu_starved(inp, &mut out);
    access_log_unbuffered(per_request, &mut out);
    let logs = log_verdicts::LogTotals {
        // The exact total (stub_status or uprobes); unknown: 0, and the rules stay quiet.
        requests: per_request.requests.unwrap_or(0),
        access_log_opens: inp.workers.iter().map(|w| w.access_log_opens).sum(),
        error_log_writes: inp.workers.iter().map(|w| w.error_log_writes).sum(),
        error_log_ns: inp.workers.iter().map(|w| w.error_log_ns).sum(),
        all_syscall_ns: inp.workers.iter().map(|w| w.all_syscall_ns).sum(),
    };
    log_verdicts::access_log_reopened(&logs, &mut out);
    log_verdicts::error_log_verbose(&logs, &mut out);
    super::log_rotation::log_not_reopened(&inp.stale_logs, &mut out);
    super::worker_connections::worker_connections_exhausted(inp, &mut out);
    crate::analysis::nginx_rules::requests_refused(inp, &mut out);
    crate::analysis::nginx_rules::upstream_errors(inp, &mut out);
    crate::analysis::upstream_down::upstream_peer_down(inp, &mut out);
    crate::analysis::keepalive_requests_log::keepalive_requests_low(inp, &mut out);
    crate::analysis::quic_ends::quic_keepalive_ended(inp, &mut out);
    crate::analysis::nginx_rules::cpu_throttled(inp, &mut out);
    crate::analysis::nginx_rules::slow_requests_idle_workers(inp, &mut out);
    crate::analysis::outcome_rules::upstream_slow(inp, &mut out);
    crate::analysis::outcome_rules::clients_5xx(inp, &mut out);
    crate::analysis::worker_rules::worker_shutdown_timeout(inp, &mut out);
    crate::analysis::worker_rules::worker_shutdown_timeout_cut(inp, &mut out);
    crate::analysis::worker_rules::worker_shutdown_timeout_exceeded(inp, &mut out);
    crate::analysis::worker_rules::no_workers(inp, &mut out);
    crate::analysis::worker_rules::worker_crashes(inp, &mut out);
    crate::analysis::process_history::worker_spawn_failed(inp, &mut out);
    crate::analysis::process_history::worker_crashed(inp, &mut out);
    crate::analysis::process_history::config_not_loaded(inp, &mut out);
    one_crash_verdict(&mut out);
    if let Some(d) = &inp.detail {
        mark_sampled(&mut out, d);
    }
    super::own_hops::mark_own_hops(inp, &mut out);
    super::config_evidence::annotate(inp, &mut out);
    out.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.id.cmp(&b.id)));
    out
}

/// Verdicts whose evidence includes a detail figure (counted only inside windows with
/// `--detail sampled`): latency histograms, busy time, writes, upstream connects, EMFILE
/// on per-request syscalls, accept-then-close.
pub const DETAIL_RULES: &[&str] = &[
    "accept_imbalance",
    "upstream_keepalive_off",
    "fd_exhaustion",
    "event_loop_stall",
    "access_log_unbuffered",
    "access_log_reopened",
    "error_log_verbose",
    "worker_connections_exhausted",
    "slow_requests_idle_workers",
];

/// Adds to every verdict of [`DETAIL_RULES`] the evidence that its detail figures are
/// sampled: the coverage, the windows and the requests inside them.
pub fn mark_sampled(out: &mut [Verdict], d: &crate::model::sampling::DetailReport) {
    for v in out
        .iter_mut()
        .filter(|v| DETAIL_RULES.contains(&v.id.as_str()))
    {
        // upstream_keepalive_off on the connection lifecycle's connects: the whole
        // period's, only its errors and latency in windows.
        let note = if v.evidence.contains_key("connects_from") {
            "connect errors and latency were counted only inside --detail windows; connects and established are the connection lifecycle's over the whole period, divided by its requests (stub_status)"
        } else {
            "detail figures (histograms, writes, busy time, connects, EMFILE on per-request syscalls) were counted only inside --detail windows; per-request ratios divide by the requests of the same windows (stub_status)"
        };
        v.evidence.insert(
            "detail".into(),
            serde_json::json!({
                "sampled": true,
                "coverage": d.coverage,
                "windows": d.windows,
                "in_window_s": d.in_window_s,
                "requests_in_windows": d.requests_in_windows,
                "note": note,
            }),
        );
    }
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
    let min_accepts = imbalance_min_accepts(n);
    if n < 2 || total < min_accepts || !inp.accepts_known() {
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
    evidence.insert("min_accepts", serde_json::json!(min_accepts));
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

/// Who ends the connections after one request when no close was measured (the
/// lifecycle tracepoints not attached, or no close counted in the period): both sides
/// are named, neither is said to be the one; `{why}` is why it is unknown and
/// `{settings}` nginx's keepalive settings as configured (or that they are not read).
const WHO_CLOSES: &str = "who closes them is not measured ({why}): either nginx does (keepalive_timeout 0 or keepalive_requests 1; {settings}) or the clients do (a load balancer or proxy in front without keepalive to nginx, or clients sending `Connection: close`); check both";

/// Why who closed is unknown, for the evidence and the advice.
fn closed_by_unknown(inp: &Inputs) -> String {
    match &inp.connections_not_traced {
        Some(why) => why.clone(),
        None => "no connection close was counted in the period by the tracepoint sock:inet_sock_set_state".into(),
    }
}

/// How many requests a connection carries at `accepts_per_request`, in words.
fn reuse(accepts_per_request: f64) -> String {
    if accepts_per_request >= 0.95 {
        "connections are not reused: one request each".to_string()
    } else {
        format!(
            "connections carry {:.1} requests on average",
            1.0 / accepts_per_request
        )
    }
}

/// Verdict `keepalive_off`: [`KEEPALIVE_ACCEPTS_PER_REQUEST`] or more accepts per
/// request over at least [`KEEPALIVE_MIN_REQUESTS`] exact requests, unless connections
/// were closed unserved or nginx itself reused idle ones.
fn keepalive_off(inp: &Inputs, out: &mut Vec<Verdict>) {
    let Some(requests) = inp.requests.filter(|_| inp.accepts_per_request_known()) else {
        return;
    };
    let accepts: u64 = inp.workers.iter().map(|w| w.accepts).sum();
    if requests < KEEPALIVE_MIN_REQUESTS {
        return;
    }
    let Some(carried) = super::keepalive_requests_log::accepts_that_carried(inp, accepts) else {
        return;
    };
    let per_request = carried as f64 / requests as f64;
    // Far more connections than requests is not clients declining keepalive but
    // connections closed unserved (see worker_connections_exhausted).
    if per_request < KEEPALIVE_ACCEPTS_PER_REQUEST || unserved(inp).2 {
        return;
    }
    if nginx_reused_them(inp, carried) {
        return;
    }
    let mut evidence = keepalive_evidence(inp, accepts, carried, requests);
    let who = super::conn_verdicts::who_closed(inp);
    let closed_by = who.as_ref().map(|w| w.0.clone());
    let why = closed_by_unknown(inp);
    evidence.insert(
        "closed_by",
        closed_by.unwrap_or_else(|| format!("unknown: {why}").into()),
    );
    let who_closes = who.map(|w| w.1).unwrap_or_else(|| {
        let settings =
            match super::config_evidence::keepalive_settings(inp.served_config().as_ref()) {
                Some(k) => format!("configured: {k}"),
                None => "nginx's config is not read, check them".into(),
            };
        WHO_CLOSES
            .replace("{why}", &why)
            .replace("{settings}", &settings)
    });
    // On a TLS listener every new connection also pays a TLS handshake: its count and
    // cost are the evidence that matters most.
    let tls = inp.tls.as_ref().filter(|t| t.handshakes > 0);
    if let Some(t) = tls {
        tls_handshake_evidence(&mut evidence, t, requests);
    }
    let advice = match tls {
        Some(t) => keepalive_off_tls_advice(inp, t, per_request, &who_closes),
        None => format!(
            "{per_request:.2} accepts per request ({}): every connection pays a TCP handshake and teardown; {who_closes}",
            reuse(per_request)
        ),
    };
    // nginx's keepalive directives are named only where the evidence leaves them as
    // a cause.
    let ruled_out = super::conn_verdicts::keepalive_settings_ruled_out(inp);
    if let Some(why) = &ruled_out {
        evidence.insert("keepalive_settings_ruled_out", serde_json::json!(why));
    }
    let directives: &[&str] = match (tls.is_some(), ruled_out.is_some()) {
        (true, false) => &[
            "keepalive_timeout",
            "keepalive_requests",
            "ssl_session_cache",
            "ssl_session_tickets",
        ],
        (true, true) => &["ssl_session_cache", "ssl_session_tickets"],
        (false, false) => &["keepalive_timeout", "keepalive_requests"],
        (false, true) => &[],
    };
    let directives = &super::worker_connections::and_worker_connections(inp, directives)[..];
    out.push(Verdict::new(
        "keepalive_off",
        Severity::Warning,
        evidence,
        directives,
        advice,
    ));
}

/// keepalive_off's evidence on the connections: accepts and requests (with the
/// requests' source), their ratio, the accepts that may have carried a request and
/// theirs (when `carried` differs: the ratio judged), and the share of syscall time
/// accepting (and closing) took.
fn keepalive_evidence(
    inp: &Inputs,
    accepts: u64,
    carried: u64,
    requests: u64,
) -> BTreeMap<&'static str, serde_json::Value> {
    let conn_ns: u64 = inp.workers.iter().map(|w| w.conn_syscall_ns).sum();
    let all_ns: u64 = inp.workers.iter().map(|w| w.all_syscall_ns).sum();
    let mut evidence = BTreeMap::new();
    evidence.insert("accepts", serde_json::json!(accepts));
    if carried != accepts {
        // The ratio judged: the accepts less those that carried no request.
        let c = serde_json::json!(carried);
        evidence.insert("accepts_that_may_have_carried_a_request", c);
        evidence.insert(
            "those_per_request",
            round3(carried as f64 / requests as f64),
        );
    }
    evidence.insert("requests", serde_json::json!(requests));
    evidence.insert(
        "requests_source",
        serde_json::json!(inp.requests_source.name()),
    );
    evidence.insert(
        "accepts_per_request",
        round3(accepts as f64 / requests as f64),
    );
    // Under --detail sampled accept4 is timed all the time and the other syscalls only
    // in windows: their ratio is no share of anything.
    if all_ns > 0 && inp.detail.is_none() {
        evidence.insert(
            if inp.close_traced {
                "accept_close_share_of_syscall_time"
            } else {
                "accept_share_of_syscall_time"
            },
            round3(conn_ns as f64 / all_ns as f64),
        );
    }
    evidence
}

/// The TLS handshakes' evidence of keepalive_off (libssl's uprobes): how many, per
/// request, the time inside SSL_do_handshake per handshake (us), their wall time and
/// share of the workers' busy time.
fn tls_handshake_evidence(
    evidence: &mut BTreeMap<&'static str, serde_json::Value>,
    t: &crate::model::TlsReport,
    requests: u64,
) {
    evidence.insert("tls_handshakes", serde_json::json!(t.handshakes));
    evidence.insert(
        "tls_handshakes_per_request",
        round3(t.handshakes as f64 / requests as f64),
    );
    if let Some(ns) = t.call_ns_per_handshake {
        evidence.insert("tls_handshake_call_us", round3(ns as f64 / 1e3));
    }
    // No wall time without a timed handshake (sampled: none in the windows).
    if t.timed_handshakes() > 0 {
        evidence.insert("tls_handshake_p50_us", round3(t.p50_ns as f64 / 1e3));
        evidence.insert("tls_handshake_mean_us", round3(t.mean_ns as f64 / 1e3));
    }
    if let Some(share) = t.share_of_worker_busy {
        evidence.insert("tls_share_of_worker_busy", round3(share));
    }
    if t.libssl_sampled {
        evidence.insert(
            "tls_timing_from",
            serde_json::json!("detail windows (libssl's uprobes are linked only there)"),
        );
    }
}

/// keepalive_off's advice on a TLS listener: every new connection pays a TLS handshake
/// too, with its cost and the session resumption settings.
fn keepalive_off_tls_advice(
    inp: &Inputs,
    t: &crate::model::TlsReport,
    per_request: f64,
    who_closes: &str,
) -> String {
    let call = t
        .call_ns_per_handshake
        .map(|ns| format!("{:.0} us", ns as f64 / 1e3))
        .unwrap_or_else(|| "unknown".into());
    let windows = if t.libssl_sampled && t.call_ns_per_handshake.is_some() {
        " in the detail windows"
    } else {
        ""
    };
    let share = t
        .share_of_worker_busy
        .map(|s| format!(", {:.0}% of the workers' busy time", s * 100.0))
        .unwrap_or_default();
    let resume = super::config_evidence::tls_resumption_advice(inp.config.as_ref());
    format!(
        "{per_request:.2} accepts per request ({reuse}): every connection pays a TCP and a TLS handshake ({n} TLS handshakes, {call} inside SSL_do_handshake each{windows}{share}); {who_closes}; {resume}",
        reuse = reuse(per_request),
        n = t.handshakes,
    )
}

fn accept_queue_overflow(inp: &Inputs, out: &mut Vec<Verdict>) {
    let Some(first) = inp.listen.first() else {
        return;
    };
    // Connections lost at a full accept queue show in the namespace's TcpExt
    // ListenOverflows/ListenDrops. Those are namespace-wide, and nginx's own sockets'
    // drop counters (sock_diag SK_MEMINFO_DROPS) count other drops too (a TLS load
    // with Connection: close moves them while ListenOverflows stays 0): a loss is
    // blamed on nginx only when both moved (or, without socket drop counters, when
    // nginx's queue was seen holding connections), or when a queue was seen at its
    // backlog.
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
    // Namespace-wide, once (unknown: 0, nothing lost is claimed from it).
    let (overflows, drops) = inp
        .listen_namespace
        .as_ref()
        .map_or((0, 0), |n| (n.overflows, n.drops));
    let netns = overflows + drops;
    let lost = match own {
        Some(n) => n.min(netns),
        None if waited => netns,
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
    evidence.insert("listen_overflows", serde_json::json!(overflows));
    evidence.insert("listen_drops", serde_json::json!(drops));
    evidence.insert(
        "listen_counters",
        serde_json::json!(match &inp.listen_namespace {
            Some(n) => n.source.clone(),
            None => "unknown: the network namespace's TcpExt counters were not readable".into(),
        }),
    );
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
    // Under a CPU quota smaller than the machine, `auto` (one worker per online CPU)
    // is the cause, not the cure.
    if let Some(q) = inp
        .cpu_quota
        .as_ref()
        .filter(|q| q.online_cpus.is_none_or(|n| q.quota_cpus < n as f64))
    {
        evidence.insert("quota_cpus", round3(q.quota_cpus));
        let workers = inp.workers.iter().filter(|w| w.alive).count();
        out.push(Verdict::new(
            "cpu_starved",
            Severity::Warning,
            evidence,
            &["worker_processes"],
            format!(
                "worker {} waited for a CPU {:.0}% of the time (runnable, not running) and the workers' cgroup {} allows {} CPUs: {workers} workers share that quota; set worker_processes {} (the quota rounded up), not auto, which counts the machine's {} CPUs",
                worst.pid,
                share(worst) * 100.0,
                q.cgroup,
                q.quota_cpus,
                crate::analysis::nginx_rules::workers_for_quota(q.quota_cpus),
                q.online_cpus.map(|n| n.to_string()).unwrap_or_else(|| "unknown".into()),
            ),
        ));
        return;
    }
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

/// A worker's EMFILE (or ENFILE) over every fd-creating syscall; a report without
/// `fd_errors` (older recordings) falls back to its accept errors.
fn fd_error_total(w: &WorkerReport, f: impl Fn(&crate::model::FdErrors) -> u64) -> u64 {
    if w.fd_errors.is_empty() {
        let e = crate::model::FdErrors {
            emfile: w.accept_errors.get("EMFILE").copied().unwrap_or(0),
            enfile: w.accept_errors.get("ENFILE").copied().unwrap_or(0),
        };
        return f(&e);
    }
    w.fd_errors.values().map(f).sum()
}

/// One verdict per crash: when the kernel counted worker exits on a signal in the
/// period (`worker_crashes`), the error log's count since the master started
/// (`worker_crashed`) joins its evidence instead of standing as a second verdict.
fn one_crash_verdict(out: &mut Vec<Verdict>) {
    let Some(log) = out.iter().position(|v| v.id == "worker_crashed") else {
        return;
    };
    let Some(kernel) = out.iter().position(|v| v.id == "worker_crashes") else {
        return;
    };
    let since_start = out[log].evidence.get("workers_crashed").cloned();
    if let Some(n) = since_start {
        out[kernel]
            .evidence
            .insert("crashes_since_master_start_error_log".into(), n);
    }
    out.remove(log);
}

/// Judges a built report: its verdicts, from the [`Inputs`] its workers (the merged
/// exited ones included), listening sockets, requests, stub_status, TLS, detail
/// sampling, error log and CPU quota give. `close_traced` is whether `close` is among
/// the report's traced syscalls. Pure.
pub fn judge_report(r: &crate::model::Report) -> Vec<Verdict> {
    let mut all = r.workers.clone();
    if let Some(m) = &r.exited_merged {
        all.push(m.stats.clone());
    }
    let close_traced = r.traced_syscalls.iter().any(|s| s == "close");
    let mut inputs = verdict_inputs(&all, close_traced);
    inputs.listen = r.listen.clone();
    inputs.listen_namespace = r.listen_namespace.clone();
    inputs.requests = r.requests.count.filter(|_| r.requests.source.exact());
    inputs.requests_source = r.requests.source;
    inputs.stub_dropped = r.stub_status.as_ref().map(|s| s.dropped);
    inputs.connections_active = r.stub_status.as_ref().map(|s| s.active);
    inputs.tls = r.tls.clone();
    inputs.period_s = r.duration_s;
    inputs.detail = r.detail.clone();
    inputs.nginx_errors = r.nginx_errors.clone();
    inputs.access_log = r.access_log.clone();
    inputs.cpu_quota = r.cpu_quota.clone();
    inputs.lifecycle = r.lifecycle.clone();
    inputs.config_loads = r.config_loads.clone();
    // A configuration whose main file was not read says nothing of the settings in
    // force: the verdicts see none and use their "not read" wording.
    inputs.config = r.config.clone().filter(|c| c.is_read());
    inputs.connections = r.connections.clone();
    inputs.connections_not_traced = r.connections_not_traced.clone();
    inputs.quic = r.quic.clone();
    inputs.stale_logs = r.stale_logs.clone();
    inputs.local_ports = r.local_ports.clone();
    inputs.master_exited = crate::model::ended_by_master_exit(r.end_reason.as_deref());
    judge(&inputs)
}

/// The verdict inputs of a report: every worker's numbers (exited ones flagged), and
/// the merged old exited workers when there are any.
pub fn verdict_inputs(workers: &[WorkerReport], close_traced: bool) -> Inputs {
    Inputs {
        workers: workers.iter().map(worker_input).collect(),
        close_traced,
        ..Inputs::default()
    }
}

/// Syscalls of connection set-up and tear-down (`WorkerInput::conn_syscall_ns`).
const CONN_CALLS: [&str; 3] = ["accept4", "accept", "close"];
/// Syscalls that wait for events, left out of `WorkerInput::all_syscall_ns`.
const WAITS: [&str; 3] = ["epoll_wait", "epoll_pwait", "epoll_pwait2"];

/// ns `w` spent in the traced syscalls `pick` selects.
fn syscall_ns(w: &WorkerReport, pick: impl Fn(&str) -> bool) -> u64 {
    w.syscalls
        .iter()
        .filter(|(k, _)| pick(k))
        .map(|(_, s)| s.total_ns)
        .sum()
}

/// One worker's numbers as the rules read them.
fn worker_input(w: &WorkerReport) -> WorkerInput {
    let access_log = w.writes.get("access_log");
    let error_log = w.writes.get("error_log");
    WorkerInput {
        pid: w.pid,
        alive: w.alive,
        accepts: w.accepts,
        emfile: fd_error_total(w, |e| e.emfile),
        enfile: fd_error_total(w, |e| e.enfile),
        fd_errors: w
            .fd_errors
            .iter()
            .filter(|(_, e)| e.emfile + e.enfile > 0)
            .map(|(k, e)| (k.clone(), (e.emfile, e.enfile)))
            .collect(),
        requests: w.requests.count.filter(|_| w.requests.source.exact()),
        upstream_connects: w.upstream.connects,
        upstream_established: w.upstream.established,
        upstream_errors: w
            .upstream
            .errors
            .iter()
            .filter(|(_, &v)| v > 0)
            .map(|(k, &v)| (k.clone(), v))
            .collect(),
        connect_hist: w.upstream.latency_hist_log2_ns.clone(),
        connect_max_ns: w.upstream.latency_max_ns,
        upstream_fds_open: w.upstream.fds_open,
        files_open: w.fds.files,
        files_peak: w.fds.files_peak,
        sockets_peak: w.fds.sockets_peak,
        busy_ns: (w.event_loop.iterations > 0).then_some(w.event_loop.busy_ns),
        cpu_s: w.cpu_s,
        run_delay_ns: w.run_delay_s.map(|s| (s * 1e9) as u64),
        max_iteration_ns: w.event_loop.max_iteration_ns,
        accepted_then_closed: w.accepted_then_closed,
        closed_reusing: w.connections_closed.map(|c| c.reusing).unwrap_or(0),
        reset_while_draining: w
            .connections_closed
            .map(|c| c.reset_while_draining)
            .unwrap_or(0),
        reload_generation: w.lifecycle.reload_generation,
        draining_at_attach: w.lifecycle.shutting_down_before_attach,
        serving: match (w.alive, w.lifecycle.state) {
            (false, _) => Some(false),
            (true, Some(crate::model::worker_lifecycle::WorkerState::Serving)) => Some(true),
            (true, Some(crate::model::worker_lifecycle::WorkerState::ShuttingDown)) => Some(false),
            _ => None,
        },
        access_log_writes: access_log.map(|x| x.count).unwrap_or(0),
        access_log_ns: access_log.map(|x| x.total_ns).unwrap_or(0),
        access_log_p99_ns: access_log.map(|x| x.p99_ns).unwrap_or(0),
        access_log_opens: w.access_log_opens,
        error_log_writes: error_log.map(|x| x.count).unwrap_or(0),
        error_log_ns: error_log.map(|x| x.total_ns).unwrap_or(0),
        p99_iteration_ns: w.event_loop.p99_iteration_ns,
        request_p50_ns: w.requests.p50_ns,
        request_p99_ns: w.requests.p99_ns,
        conn_syscall_ns: syscall_ns(w, |k| CONN_CALLS.contains(&k)),
        all_syscall_ns: syscall_ns(w, |k| !WAITS.contains(&k)),
        fds_open: w.fds.open,
        fds_peak: w.fds.peak,
        fd_limit: w.fds.limit,
    }
}

#[cfg(test)]
#[path = "verdict_tests.rs"]
mod tests;
