//! The upstream and fd-limit verdicts: `upstream_keepalive_off` (one new upstream
//! connection per proxied request) and `fd_exhaustion` (EMFILE/ENFILE on any fd-creating
//! syscall, or thin fd headroom), with what holds the fds. Pure, like the other rules in
//! [`super::verdict`], which calls them.

use std::collections::BTreeMap;

use super::inputs::{Inputs, WorkerInput};
use crate::model::{round3_json as round3, Severity, Verdict};

/// Requests needed before upstream keepalive is judged.
pub const UPSTREAM_MIN_REQUESTS: u64 = 200;
/// Established upstream connections (connects that succeeded; a refused one cannot be
/// kept alive) per request at or above which upstream connections are not reused (1.0 when every proxied request opens one; mixed static/proxied traffic
/// at half proxied still reaches 0.5).
pub const UPSTREAM_CONNECTS_PER_REQUEST: f64 = 0.5;
/// Share of the established upstream connections that failed at the peer (error-log
/// lines of [`super::upstream_failures::PEER_FAILED_CLASSES`]: reset, closed before
/// answering, timed out, an unusable answer) at or above which `upstream_keepalive_off`
/// stays silent: keepalive cannot keep a connection the peer fails (nginx closes it),
/// and a reset leaves no TIME-WAIT; the outage is `upstream_errors`'. Failures keepalive
/// causes or cures (EADDRNOTAVAIL: ports held in TIME-WAIT) are not counted here.
pub const UPSTREAM_PEER_FAILED_SHARE: f64 = super::upstream_failures::PEER_FAILED_SHARE;
/// fd headroom (free / limit) under which the fd limit is about to bind.
pub const FD_HEADROOM_MIN: f64 = 0.10;
/// Regular files open, as a share of the fd limit, from which open files (e.g.
/// `open_file_cache`) are named as holding the fds.
pub const FILES_SHARE_OF_LIMIT: f64 = 0.25;

/// What the evidence and advice say of the connect latency when no connect() was
/// timed (trial 19: the lifecycle counted the connects, the `--detail` windows timed
/// none, and the advice said "connect p50 0 us").
const LATENCY_UNKNOWN: &str = "unknown: no connect() was timed (syscalls:sys_enter/exit_connect, counted in the --detail windows only)";

/// Connect latency p50 and p99 over all workers' log2 histograms (tracepoints
/// `syscalls:sys_enter/exit_connect`), ns; None when no connect() was timed.
fn connect_latency(inp: &Inputs) -> Option<(u64, u64)> {
    let mut hist = vec![0u64; nginx_probe_common::HIST_BUCKETS];
    for w in &inp.workers {
        for (h, x) in hist.iter_mut().zip(&w.connect_hist) {
            *h += x;
        }
    }
    if hist.iter().all(|&n| n == 0) {
        return None;
    }
    let max = inp
        .workers
        .iter()
        .map(|w| w.connect_max_ns)
        .max()
        .unwrap_or(0);
    let q = |q| crate::model::quantile_ns(&hist, q, max);
    Some((q(0.50), q(0.99)))
}

/// Peers of nginx's upstream-class error-log lines (its `upstream:` field), the
/// largest first, at most 3: `http://127.0.0.1:8080 (812 lines)`.
pub(crate) fn error_log_peers(inp: &Inputs) -> Vec<String> {
    inp.nginx_errors
        .as_ref()
        .filter(|e| e.readable)
        .map(|e| {
            e.upstream_peers
                .iter()
                .take(3)
                .map(|p| format!("{} ({} lines)", p.peer, p.lines))
                .collect()
        })
        .unwrap_or_default()
}

/// `; local ports 40000-40499 (...), ...; peers in nginx's error log: ...` for advice
/// on upstream connects: the local ports when `ports` (an EADDRNOTAVAIL), then the
/// peers; empty when neither is known.
pub(crate) fn ports_and_peers(inp: &Inputs, ports: bool) -> String {
    let mut said = String::new();
    if let Some(l) = inp.local_ports.as_ref().filter(|_| ports) {
        let p = l.said();
        if !p.is_empty() {
            said.push_str(&format!("; {p}"));
        }
    }
    let peers = error_log_peers(inp);
    if !peers.is_empty() {
        said.push_str(&format!(
            "; peers in nginx's error log: {}",
            peers.join(", ")
        ));
    }
    said
}

/// The upstream connects of a period, summed over the workers, against its requests:
/// what `upstream_keepalive_off` judges.
struct UpstreamConnects {
    /// The period's requests (an exact total: stub_status or the uprobes).
    requests: u64,
    /// connect() calls to upstreams (traced `connect`), failures included; under
    /// sampled detail the TCP connects of the whole period when
    /// [`counts_from_lifecycle`].
    connects: u64,
    /// Connects that succeeded (a refused one cannot be kept alive).
    established: u64,
    /// Connects that failed with EADDRNOTAVAIL: no local port was left.
    ports_out: u64,
    /// Failed connects by errno name.
    errors: BTreeMap<String, u64>,
    /// Established connections the peer failed (error-log lines of
    /// [`super::upstream_failures::PEER_FAILED_CLASSES`]), scaled to the requests the
    /// connects were counted over; None when the error log is not read.
    peer_failed: Option<f64>,
    /// Whether `connects` and `established` are the connection lifecycle's
    /// ([`counts_from_lifecycle`]).
    from_lifecycle: bool,
    /// The peers whose tries `requests` counts instead of nginx's requests, with their
    /// tries ([`UpstreamConnects::over_tries`]); empty: nginx's requests.
    tries_of: BTreeMap<String, u64>,
}

/// Whether `upstream_keepalive_off` counts the whole period's upstream connects from
/// the connection lifecycle (tracepoint `sock:inet_sock_set_state`, continuous under
/// any `--detail`: `connections.upstream_peers`) against the period's exact requests:
/// under `--detail sampled` when it counted some. Trial 17: the sampled windows of a
/// `--record` run held 0 of 3900 requests, and the rule was silent on 300 requests
/// proxied with one new connection each. Unix-socket peers are not in the lifecycle:
/// a floor then.
pub(crate) fn counts_from_lifecycle(inp: &Inputs) -> bool {
    inp.detail.is_some()
        && inp
            .connections
            .as_ref()
            .is_some_and(|c| c.upstream_peers.iter().any(|p| p.connects > 0))
}

impl UpstreamConnects {
    fn of(inp: &Inputs, requests: u64) -> UpstreamConnects {
        let errors = inp.upstream_connect_errors();
        // The error log counts the whole period; under sampled detail the connects are
        // the windows': the lines are scaled by the windows' requests over the period's.
        let scale = match inp.detail.as_ref().map(|d| d.requests_total) {
            None => Some(1.0),
            Some(Some(total)) if total > 0 => Some(requests as f64 / total as f64),
            Some(_) => None,
        };
        let from_lifecycle = counts_from_lifecycle(inp);
        let (connects, established) = match inp.connections.as_ref() {
            Some(c) if from_lifecycle => (
                c.upstream_peers.iter().map(|p| p.connects).sum(),
                c.upstream_peers.iter().map(|p| p.established).sum(),
            ),
            _ => (
                inp.workers.iter().map(|w| w.upstream_connects).sum(),
                inp.workers.iter().map(|w| w.upstream_established).sum(),
            ),
        };
        UpstreamConnects {
            requests,
            connects,
            established,
            from_lifecycle,
            ports_out: errors.get("EADDRNOTAVAIL").copied().unwrap_or(0),
            errors,
            peer_failed: super::upstream_failures::peer_failed_lines(inp)
                .zip(scale)
                .map(|(n, s)| n as f64 * s),
            tries_of: BTreeMap::new(),
        }
    }

    /// The connects of the TCP peers that established connections (the connection
    /// lifecycle, whole period) against those peers' tries in an access log holding
    /// every request (`$upstream_addr`), when they tried at least
    /// [`UPSTREAM_MIN_REQUESTS`]: nginx's requests also count the ones proxied to no
    /// such peer (static files, a dead peer's refused connects). Trial 18: a dead
    /// single-server block's 85934 refused requests beside 24914 proxied to a live peer
    /// with one connect each made 0.22 per request, and no verdict. None otherwise.
    fn over_tries(inp: &Inputs) -> Option<UpstreamConnects> {
        let log = super::outcome_rules::complete_log(inp)?;
        let c = inp.connections.as_ref()?;
        // The counts start at 0 and add up the peers' below; the connect errors are
        // `of`'s; connects that found no local port belong to no peer: not counted.
        let mut out = UpstreamConnects {
            connects: 0,
            established: 0,
            ports_out: 0,
            peer_failed: inp
                .nginx_errors
                .as_ref()
                .filter(|e| e.readable)
                .map(|_| 0.0),
            from_lifecycle: true,
            ..Self::of(inp, 0)
        };
        for p in c.upstream_peers.iter().filter(|p| p.established > 0) {
            let Some(u) = log.upstreams.iter().find(|u| u.peer == p.peer) else {
                continue;
            };
            out.requests += u.tries;
            out.connects += p.connects;
            out.established += p.established;
            out.peer_failed = out
                .peer_failed
                .map(|f| f + super::upstream_failures::peer_failed_lines_of(inp, &p.peer) as f64);
            out.tries_of.insert(p.peer.clone(), u.tries);
        }
        (out.requests >= UPSTREAM_MIN_REQUESTS).then_some(out)
    }

    /// Share of the established connections the peer failed (capped at 1); None when
    /// unknown (error log not read) or nothing was established.
    fn peer_failed_share(&self) -> Option<f64> {
        self.peer_failed
            .filter(|_| self.established > 0)
            .map(|f| (f / self.established as f64).min(1.0))
    }

    /// Established connections per request.
    fn per_request(&self) -> f64 {
        self.established as f64 / self.requests as f64
    }

    /// New connections per request a pool could save: the established ones and
    /// those that found no local port.
    fn attempts_per_request(&self) -> f64 {
        (self.established + self.ports_out) as f64 / self.requests as f64
    }

    /// connect() calls per request, failures included.
    fn connects_per_request(&self) -> f64 {
        self.connects as f64 / self.requests as f64
    }
}

/// Verdict `upstream_keepalive_off`: [`UPSTREAM_CONNECTS_PER_REQUEST`] or more new
/// upstream connections per request over at least [`UPSTREAM_MIN_REQUESTS`] exact
/// requests; critical when connects ran out of local ports.
pub(crate) fn upstream_keepalive_off(inp: &Inputs, out: &mut Vec<Verdict>) {
    // Rule one: only an exact request total (nginx's stub_status counter or the
    // uprobes) fires this; unknown requests: silent.
    let Some(requests) = inp.requests else {
        return;
    };
    if requests < UPSTREAM_MIN_REQUESTS {
        return;
    }
    // Established connections could have been kept alive, and so could the connects
    // that failed with EADDRNOTAVAIL: no local port was left, because the connections
    // before them were not kept (case 18: almost every connect fails that way, so a
    // rule on established connects alone cannot see it). Other failures (ECONNREFUSED
    // to a dead upstream, timeouts) say nothing about keepalive.
    let mut c = UpstreamConnects::of(inp, requests);
    if c.attempts_per_request() < UPSTREAM_CONNECTS_PER_REQUEST {
        // Over the tries of the peers that took connections, when the log counts
        // them: the requests also hold others.
        match UpstreamConnects::over_tries(inp) {
            Some(t) if t.attempts_per_request() >= UPSTREAM_CONNECTS_PER_REQUEST => c = t,
            _ => return,
        }
    }
    // Connections the peer failed (reset, closed before answering, timed out) could not
    // have been kept alive either: when they are most of those established, the
    // problem is the peer (upstream_errors says so), not keepalive. EADDRNOTAVAIL is
    // not among them: keepalive cures it (case 18).
    if c.peer_failed_share()
        .is_some_and(|s| s >= UPSTREAM_PEER_FAILED_SHARE)
    {
        return;
    }
    let latency = connect_latency(inp);
    out.push(Verdict::new(
        "upstream_keepalive_off",
        if c.ports_out > 0 {
            Severity::Critical
        } else {
            Severity::Warning
        },
        keepalive_off_evidence(inp, &c, latency),
        // Only what the servers that carried the traffic do not already set.
        &super::upstream_pool::pool_directives(
            inp.served_config().as_ref(),
            &super::upstream_pool::closes_of(inp),
        ),
        keepalive_off_advice(inp, &c, latency),
    ));
}

/// upstream_keepalive_off's evidence: the counts per request and per second, the
/// connect latency (p50, p99 in ns; None: none timed), the failures, the local ports
/// and the peers.
fn keepalive_off_evidence(
    inp: &Inputs,
    c: &UpstreamConnects,
    latency: Option<(u64, u64)>,
) -> BTreeMap<&'static str, serde_json::Value> {
    let mut evidence = BTreeMap::new();
    evidence.insert("upstream_connects", serde_json::json!(c.connects));
    evidence.insert("established", serde_json::json!(c.established));
    if c.tries_of.is_empty() {
        evidence.insert("requests", serde_json::json!(c.requests));
    } else {
        // Per try of the peers that took connections (access log), not per request.
        evidence.insert("requests", serde_json::json!(inp.requests));
        evidence.insert("tries", serde_json::json!(c.requests));
        evidence.insert("tries_of_peers", serde_json::json!(c.tries_of));
    }
    evidence.insert("connects_per_request", round3(c.connects_per_request()));
    evidence.insert("established_per_request", round3(c.per_request()));
    evidence.insert("attempts_per_request", round3(c.attempts_per_request()));
    // Connects are detail: per second the detail layer counted (in windows if sampled);
    // the lifecycle's over the period.
    if c.from_lifecycle {
        evidence.insert(
            "connects_from",
            serde_json::json!("the connection lifecycle (tracepoint sock:inet_sock_set_state, TCP peers, whole period) against the period's requests; connect errors and latency counted in the --detail windows only"),
        );
        if inp.period_s > 0.0 {
            evidence.insert("connects_per_s", round3(c.connects as f64 / inp.period_s));
        }
    }
    let detail_s = inp.detail_s();
    if detail_s > 0.0 && !c.from_lifecycle {
        evidence.insert("connects_per_s", round3(c.connects as f64 / detail_s));
        if inp.detail.is_some() {
            evidence.insert(
                "connects_per_s_over",
                serde_json::json!("in-window seconds"),
            );
            evidence.insert("in_window_s", round3(detail_s));
        }
    }
    latency_evidence(&mut evidence, latency);
    evidence.insert("connect_errors", serde_json::json!(c.errors));
    evidence.insert(
        "failed_at_peer",
        match c.peer_failed {
            Some(f) => round3(f),
            None => serde_json::json!("unknown: nginx's error log is not read"),
        },
    );
    let ports = inp
        .local_ports
        .as_ref()
        .map(|l| l.said())
        .unwrap_or_default();
    if !ports.is_empty() {
        evidence.insert("local_ports", serde_json::json!(ports));
    }
    if let Some((nginx, upstream, reset)) = super::upstream_pool::upstream_closes(inp) {
        evidence.insert(
            "upstream_closed_first_by",
            serde_json::json!({"nginx": nginx, "upstream": upstream, "reset": reset}),
        );
    }
    if let Some((ended, _)) = super::upstream_pool::ended_with_response(inp) {
        let e = serde_json::json!(ended);
        evidence.insert("upstream_closed_within_a_jiffy_of_its_data", e);
    }
    let peers = error_log_peers(inp);
    if !peers.is_empty() {
        evidence.insert("peers_in_error_log", serde_json::json!(peers));
    }
    evidence
}

/// The connect latency in `evidence`: `connect_p50_us`, `connect_p99_us` (from the
/// p50 and p99 in ns), or `connect_latency` [`LATENCY_UNKNOWN`] when none was timed.
fn latency_evidence(
    evidence: &mut BTreeMap<&'static str, serde_json::Value>,
    latency: Option<(u64, u64)>,
) {
    match latency {
        Some((p50, p99)) => {
            evidence.insert("connect_p50_us", round3(p50 as f64 / 1e3));
            evidence.insert("connect_p99_us", round3(p99 as f64 / 1e3));
        }
        None => {
            evidence.insert("connect_latency", serde_json::json!(LATENCY_UNKNOWN));
        }
    }
}

/// What the advice says of TIME-WAIT: which side holds it is not measured (the count
/// of `/proc/<pid>/net/sockstat` is every process of nginx's network namespace, an
/// upstream on the same host included; under HTTP/1.0 the upstream usually closes
/// first and holds it).
const TIME_WAIT_SIDE: &str = "each close leaves a socket in TIME-WAIT on the side that closed first (nginx's or the upstream's: which one is not measured), and where that is nginx's side they hold its local ports until, under load, they run out";

/// What the advice says of TIME-WAIT: who closed nginx's upstream connections first,
/// measured per peer by the upstream connection lifecycle when it counted closes
/// (nginx first: the TIME-WAIT is on nginx's side and holds its local ports), else
/// [`TIME_WAIT_SIDE`].
fn time_wait_side(inp: &Inputs) -> String {
    let Some((nginx, peer, reset)) = super::upstream_pool::upstream_closes(inp) else {
        return TIME_WAIT_SIDE.to_string();
    };
    format!(
        "of the upstream connections closed, nginx closed {nginx} first, the upstream {peer}, resets ended {reset} (tracepoint sock:inet_sock_set_state): each close leaves a socket in TIME-WAIT on the side that closed first, {}",
        if nginx >= peer {
            "mostly nginx's, where they hold its local ports until, under load, they run out"
        } else {
            "mostly the upstream's (nginx's local ports are not held by them)"
        }
    )
}

/// upstream_keepalive_off's advice: the new connections per request (or per try),
/// the connect latency (p50, p99 in ns; None: none timed), the ports run out, and the
/// fix: what defeats a configured pool, else the pool to add
/// ([`super::upstream_pool::pool_advice`]).
fn keepalive_off_advice(inp: &Inputs, c: &UpstreamConnects, latency: Option<(u64, u64)>) -> String {
    let ports_out = c.ports_out;
    // Below the threshold, the connections the peer failed are said apart.
    let failed = match c.peer_failed_share() {
        Some(s) if s > 0.0 => format!(
            "; {:.0}% of the established ones the peer failed (reset, closed or timed out: nginx's error log), which keepalive would not have kept",
            s * 100.0
        ),
        _ => String::new(),
    };
    let ran_out = if ports_out > 0 {
        format!(
            " (EADDRNOTAVAIL: {ports_out} connects failed for lack of a local port{}{})",
            // Under sampled detail the kernel's count is of the windows only.
            if inp.detail.is_some() {
                " in the detail windows"
            } else {
                ""
            },
            ports_and_peers(inp, true)
        )
    } else {
        String::new()
    };
    let closes = super::upstream_pool::closes_of(inp);
    // The pools and locations of the servers that carried the traffic only.
    let fix = super::upstream_pool::pool_advice(inp.served_config().as_ref(), &closes);
    // Established, not attempted: a connect that found no local port (EADDRNOTAVAIL,
    // case 18) never reaches SYN_SENT, yet it was TCP.
    // "every" only where it is so: at 0.59 per request it was said of every one.
    // The unit the ratios are over, chosen once: nginx's requests, or the tries of
    // the peers that took connections.
    let unit = if c.tries_of.is_empty() {
        "request"
    } else {
        "try"
    };
    let (per, how_often) = match (c.tries_of.is_empty(), c.per_request()) {
        (true, r) if r >= 0.995 => (unit.to_string(), "for every proxied request".to_string()),
        (true, r) => (unit.to_string(), format!("for {:.0} of every 100 requests nginx counted", r * 100.0)),
        (false, r) => (
            format!(
                "try of {} (their {} tries in the access log's $upstream_addr; nginx's {} requests also hold others, proxied to no peer that took a connection or not proxied)",
                c.tries_of.keys().cloned().collect::<Vec<_>>().join(", "),
                c.requests,
                inp.requests.unwrap_or(0)
            ),
            if r >= 0.995 {
                "for every try of them".to_string()
            } else {
                format!("for {:.0} of every 100 tries of them", r * 100.0)
            },
        ),
    };
    let what = match tcp_established(inp).filter(|&t| t * 2 < c.established) {
        // Trial 9: a unix-socket upstream was told of TCP, TIME-WAIT and local ports.
        Some(t) => format!("nginx opens and closes a connection to the upstream {how_often}, most of them not TCP ({t} of the {} connections established were TCP, tracepoint sock:inet_sock_set_state; the others not TCP: a unix socket's, `server unix:...`, or another kind, which is not measured): those cost a connect() and an accept per request but hold no TIME-WAIT nor local port", c.established),
        None => format!("nginx opens and closes a TCP connection to the upstream {how_often}; {}", time_wait_side(inp)),
    };
    // Trial 10: nginx proxying to its own listener counts each proxied request twice.
    // Tries are the access log's, one per try: nginx's count is not their unit.
    let own = match inp.own_hops().filter(|_| c.tries_of.is_empty()) {
        Some(why) => format!(" (per request nginx counted, its own hops among them, so per proxied request up to twice this: {why})"),
        None => String::new(),
    };
    let latency = match latency {
        Some((p50, p99)) => format!(
            "connect p50 {:.0} us, p99 {:.0} us",
            p50 as f64 / 1e3,
            p99 as f64 / 1e3
        ),
        None => format!("connect latency {LATENCY_UNKNOWN}"),
    };
    format!(
        "{:.2} new upstream connections per {per}{own} ({:.2} established, plus connects that found no local port; {:.2} connect() calls per {unit} in all, failures included; {latency}{failed}): {what}{ran_out}; {fix}",
        c.attempts_per_request(),
        c.per_request(),
        c.connects_per_request(),
    )
}

/// The TCP connections nginx's workers established to upstreams in the period (the
/// upstream lifecycle's `SYN_SENT -> ESTABLISHED`, every peer); None when it did not
/// count.
fn tcp_established(inp: &Inputs) -> Option<u64> {
    let c = inp.connections.as_ref()?;
    Some(c.upstream_peers.iter().map(|p| p.established).sum())
}

/// What fd_exhaustion says of `open_file_cache` beside the regular files it counted.
struct FileCacheWord {
    /// The clause, quoting the configuration where it was read.
    said: String,
    /// Whether the cache may be what holds them: set somewhere, or the configuration
    /// unknown.
    may_hold: bool,
}

/// `open_file_cache` as the configuration sets it (its http value and every server or
/// location override that is not `off`); unknown without a configuration.
fn open_file_cache(config: Option<&crate::model::config::ConfigReport>) -> FileCacheWord {
    let Some(cfg) = config else {
        return FileCacheWord {
            said: "open_file_cache, where configured, keeps them open up to its max; the configuration was not read".into(),
            may_hold: true,
        };
    };
    let set: Vec<String> = cfg
        .everywhere("open_file_cache")
        .filter(|v| v.value.trim() != "off")
        .map(|v| format!("open_file_cache {}", v.quoted()))
        .collect();
    if set.is_empty() {
        let at = cfg
            .value("open_file_cache")
            .map(|v| v.quoted())
            .unwrap_or_else(|| "off (default)".into());
        FileCacheWord {
            said: format!("not open_file_cache's: it is {at} everywhere"),
            may_hold: false,
        }
    } else {
        FileCacheWord {
            said: format!("{} keeps them open up to its max", set.join(", ")),
            may_hold: true,
        }
    }
}

/// Live workers whose peak fds leave less than [`FD_HEADROOM_MIN`] of their limit free.
fn thin_headroom(inp: &Inputs) -> Vec<&WorkerInput> {
    inp.workers
        .iter()
        .filter(|w| w.alive)
        .filter(|w| match (w.fds_peak, w.fd_limit) {
            (Some(peak), Some(limit)) if limit > 0 => {
                (limit.saturating_sub(peak)) as f64 / (limit as f64) < FD_HEADROOM_MIN
            }
            _ => false,
        })
        .collect()
}

/// Verdict `fd_exhaustion`: EMFILE/ENFILE on any fd-creating syscall (critical), or a
/// live worker under [`FD_HEADROOM_MIN`] of its fd limit free (warning).
pub(crate) fn fd_exhaustion(inp: &Inputs, out: &mut Vec<Verdict>) {
    let emfile: u64 = inp.workers.iter().map(|w| w.emfile).sum();
    let enfile: u64 = inp.workers.iter().map(|w| w.enfile).sum();
    if emfile == 0 && enfile == 0 && thin_headroom(inp).is_empty() {
        return;
    }
    let by_syscall = fd_errors_by_syscall(inp);
    let severity = if emfile + enfile > 0 {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let (holders, directives) = fd_holders(inp, &by_syscall);
    out.push(Verdict::new(
        "fd_exhaustion",
        severity,
        fd_exhaustion_evidence(inp, emfile, enfile, &by_syscall),
        &directives,
        fd_exhaustion_advice(inp, enfile, &by_syscall, &holders),
    ));
}

/// EMFILE and ENFILE counts by fd-creating syscall, summed over the workers.
fn fd_errors_by_syscall(inp: &Inputs) -> BTreeMap<String, (u64, u64)> {
    let mut by_syscall: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for w in &inp.workers {
        for (k, (m, n)) in &w.fd_errors {
            let e = by_syscall.entry(k.clone()).or_default();
            e.0 += m;
            e.1 += n;
        }
    }
    by_syscall
}

/// fd_exhaustion's evidence: the failures in all and by syscall, and each live
/// worker's fds.
fn fd_exhaustion_evidence(
    inp: &Inputs,
    emfile: u64,
    enfile: u64,
    by_syscall: &BTreeMap<String, (u64, u64)>,
) -> BTreeMap<&'static str, serde_json::Value> {
    let mut evidence = BTreeMap::new();
    evidence.insert("emfile", serde_json::json!(emfile));
    evidence.insert("enfile", serde_json::json!(enfile));
    evidence.insert(
        "by_syscall",
        serde_json::json!(by_syscall
            .iter()
            .map(|(k, (m, n))| (k.clone(), serde_json::json!({"EMFILE": m, "ENFILE": n})))
            .collect::<BTreeMap<_, _>>()),
    );
    evidence.insert(
        "workers",
        serde_json::json!(inp
            .workers
            .iter()
            .filter(|w| w.alive)
            .map(|w| serde_json::json!({
                "pid": w.pid, "emfile": w.emfile, "fds_open": w.fds_open,
                "fds_peak": w.fds_peak, "limit": w.fd_limit,
                "files_peak": w.files_peak, "sockets_peak": w.sockets_peak,
                "upstream_fds_open": w.upstream_fds_open,
            }))
            .collect::<Vec<_>>()),
    );
    evidence
}

/// What holds the fds, the likeliest first, and the directives that bound them: the
/// syscalls that failed say what nginx was opening, the fd classification what it had
/// open.
fn fd_holders(
    inp: &Inputs,
    by_syscall: &BTreeMap<String, (u64, u64)>,
) -> (Vec<String>, Vec<&'static str>) {
    let failed = |name: &str| by_syscall.get(name).is_some_and(|(m, n)| m + n > 0);
    let limit = inp.workers.iter().filter_map(|w| w.fd_limit).min();
    let connects: u64 = inp.workers.iter().map(|w| w.upstream_connects).sum();
    let files_peak = inp.workers.iter().filter_map(|w| w.files_peak).max();
    let sockets_peak = inp.workers.iter().filter_map(|w| w.sockets_peak).max();
    let files_share = matches!((files_peak, limit), (Some(f), Some(l)) if l > 0 && f as f64 >= FILES_SHARE_OF_LIMIT * l as f64);
    // Only holders that were counted are named: sockets are not told apart (client
    // connections, listeners and nginx's channel socketpairs to the other workers all
    // read `socket:[..]` in /proc), so they are named as sockets, not as clients.
    let mut holders = Vec::new();
    if let Some(s) = sockets_peak {
        holders.push(format!(
            "sockets (up to {s} open in a worker: client connections, listeners and nginx's channels to the other workers, not told apart)"
        ));
    }
    let mut directives = vec!["worker_rlimit_nofile", "worker_connections"];
    if failed("socket") || connects > 0 {
        holders.insert(
            usize::from(!failed("socket")).min(holders.len()),
            format!(
                "upstream connections (one per proxied request in progress, {connects} connects in the period{})",
                if failed("socket") { "; socket() failed with EMFILE while connecting to upstream" } else { "" }
            ),
        );
        directives.push("keepalive (upstream block)");
    }
    if failed("openat") || files_share {
        let cache = open_file_cache(inp.config.as_ref());
        holders.insert(
            usize::from(!failed("openat")).min(holders.len()),
            format!(
                "regular files (up to {} open in a worker{}; {})",
                files_peak
                    .map(|f| f.to_string())
                    .unwrap_or_else(|| "unknown".into()),
                if failed("openat") {
                    "; open() failed with EMFILE"
                } else {
                    ""
                },
                cache.said,
            ),
        );
        // The directive only when the files were counted holding a share of the limit,
        // and open_file_cache is set (or the configuration was not read).
        if cache.may_hold && files_share {
            directives.push("open_file_cache max=");
        }
    }
    if holders.is_empty() {
        holders.push("unknown (the workers' fds were not classified)".into());
    }
    (holders, directives)
}

/// fd_exhaustion's advice: the system-wide table full (ENFILE), or the workers' soft
/// limit with the syscalls that failed and what holds the fds.
fn fd_exhaustion_advice(
    inp: &Inputs,
    enfile: u64,
    by_syscall: &BTreeMap<String, (u64, u64)>,
    holders: &[String],
) -> String {
    let limit = inp.workers.iter().filter_map(|w| w.fd_limit).min();
    let failing: Vec<String> = by_syscall
        .iter()
        .filter(|(_, (m, n))| m + n > 0)
        .map(|(k, (m, n))| format!("{k}() {}", m + n))
        .collect();
    if enfile > 0 {
        format!(
            "the system-wide file table is full (ENFILE on {}): raise fs.file-max",
            failing.join(", ")
        )
    } else {
        format!(
            "workers run into their soft open-files limit ({}){}; the fds are held by {}: raise worker_rlimit_nofile (within the hard limit) above what these need together, or lower them",
            limit.map(|l| l.to_string()).unwrap_or_else(|| "unknown".into()),
            if failing.is_empty() {
                String::new()
            } else {
                format!(" and got EMFILE on {}", failing.join(", "))
            },
            holders.join(", ")
        )
    }
}

#[cfg(test)]
#[path = "fd_upstream_tests.rs"]
mod tests;
