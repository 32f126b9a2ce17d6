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

/// Connect latency quantile `q` over all workers' histograms, ns.
fn connect_quantile(inp: &Inputs, q: f64) -> u64 {
    let mut hist = vec![0u64; nginx_probe_common::HIST_BUCKETS];
    for w in &inp.workers {
        for (h, x) in hist.iter_mut().zip(&w.connect_hist) {
            *h += x;
        }
    }
    let max = inp
        .workers
        .iter()
        .map(|w| w.connect_max_ns)
        .max()
        .unwrap_or(0);
    crate::model::quantile_ns(&hist, q, max)
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
    /// connect() calls to upstreams (traced `connect`), failures included.
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
        UpstreamConnects {
            requests,
            connects: inp.workers.iter().map(|w| w.upstream_connects).sum(),
            established: inp.workers.iter().map(|w| w.upstream_established).sum(),
            ports_out: errors.get("EADDRNOTAVAIL").copied().unwrap_or(0),
            errors,
            peer_failed: super::upstream_failures::peer_failed_lines(inp)
                .zip(scale)
                .map(|(n, s)| n as f64 * s),
        }
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
    let c = UpstreamConnects::of(inp, requests);
    if c.attempts_per_request() < UPSTREAM_CONNECTS_PER_REQUEST {
        return;
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
    let p50 = connect_quantile(inp, 0.50);
    let p99 = connect_quantile(inp, 0.99);
    out.push(Verdict::new(
        "upstream_keepalive_off",
        if c.ports_out > 0 {
            Severity::Critical
        } else {
            Severity::Warning
        },
        keepalive_off_evidence(inp, &c, p50, p99),
        // Only what the servers that carried the traffic do not already set.
        &super::upstream_pool::pool_directives(
            inp.served_config().as_ref(),
            &super::upstream_pool::closes_of(inp),
        ),
        keepalive_off_advice(inp, &c, p50, p99),
    ));
}

/// upstream_keepalive_off's evidence: the counts per request and per second, the
/// connect latency (`p50`, `p99` in ns), the failures, the local ports and the peers.
fn keepalive_off_evidence(
    inp: &Inputs,
    c: &UpstreamConnects,
    p50: u64,
    p99: u64,
) -> BTreeMap<&'static str, serde_json::Value> {
    let mut evidence = BTreeMap::new();
    evidence.insert("upstream_connects", serde_json::json!(c.connects));
    evidence.insert("established", serde_json::json!(c.established));
    evidence.insert("requests", serde_json::json!(c.requests));
    evidence.insert("connects_per_request", round3(c.connects_per_request()));
    evidence.insert("established_per_request", round3(c.per_request()));
    evidence.insert("attempts_per_request", round3(c.attempts_per_request()));
    // Connects are detail: per second the detail layer counted (in windows if sampled).
    let detail_s = inp.detail_s();
    if detail_s > 0.0 {
        evidence.insert("connects_per_s", round3(c.connects as f64 / detail_s));
        if inp.detail.is_some() {
            evidence.insert(
                "connects_per_s_over",
                serde_json::json!("in-window seconds"),
            );
            evidence.insert("in_window_s", round3(detail_s));
        }
    }
    evidence.insert("connect_p50_us", round3(p50 as f64 / 1e3));
    evidence.insert("connect_p99_us", round3(p99 as f64 / 1e3));
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

/// upstream_keepalive_off's advice: the new connections per request, the connect latency (`p50`, `p99` in ns), the ports run out, and the fix:
/// what defeats a configured pool, else the pool to add
/// ([`super::upstream_pool::pool_advice`]).
fn keepalive_off_advice(inp: &Inputs, c: &UpstreamConnects, p50: u64, p99: u64) -> String {
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
    let how_often = match c.per_request() {
        r if r >= 0.995 => "for every proxied request".to_string(),
        r => format!("for {:.0} of every 100 requests nginx counted", r * 100.0),
    };
    let what = match tcp_established(inp).filter(|&t| t * 2 < c.established) {
        // Trial 9: a unix-socket upstream was told of TCP, TIME-WAIT and local ports.
        Some(t) => format!("nginx opens and closes a connection to the upstream {how_often}, most of them not TCP ({t} of the {} connections established were TCP, tracepoint sock:inet_sock_set_state; the others not TCP: a unix socket's, `server unix:...`, or another kind, which is not measured): those cost a connect() and an accept per request but hold no TIME-WAIT nor local port", c.established),
        None => format!("nginx opens and closes a TCP connection to the upstream {how_often}; {}", time_wait_side(inp)),
    };
    // Trial 10: nginx proxying to its own listener counts each proxied request twice.
    let own = match inp.own_hops() {
        Some(why) => format!(" (per request nginx counted, its own hops among them, so per proxied request up to twice this: {why})"),
        None => String::new(),
    };
    format!(
        "{:.2} new upstream connections per request{own} ({:.2} established, plus connects that found no local port; {:.2} connect() calls per request in all, failures included; connect p50 {:.0} us, p99 {:.0} us{failed}): {what}{ran_out}; {fix}",
        c.attempts_per_request(),
        c.per_request(),
        c.connects_per_request(),
        p50 as f64 / 1e3,
        p99 as f64 / 1e3,
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
mod tests {
    use super::super::verdict::judge;
    use super::*;

    use crate::analysis::inputs::w;

    #[test]
    fn sampled_connects_per_s_divide_by_the_in_window_seconds() {
        // 12 s judged, 3 s of windows: 6000 connects and 6000 requests in the windows.
        let mut a = w(1, 4, 6000);
        a.upstream_connects = 6000;
        a.upstream_established = 6000;
        let schedule = crate::model::sampling::Schedule::new(1.0, 4.0).unwrap();
        let cov = crate::model::sampling::Coverage {
            windows: 3,
            open_s: 3.0,
            requests: Some(6000),
            open_now: false,
        };
        let detail = crate::model::sampling::DetailReport::new(
            &schedule,
            &cov,
            12.0,
            Some(24_000),
            (0, 0, 0),
        );
        let v = judge(&Inputs {
            workers: vec![a],
            period_s: 12.0,
            requests: Some(24_000),
            detail: Some(detail),
            ..Inputs::default()
        });
        let u = v.iter().find(|v| v.id == "upstream_keepalive_off").unwrap();
        assert_eq!(u.evidence["connects_per_s"], serde_json::json!(2000.0));
        assert_eq!(u.evidence["in_window_s"], serde_json::json!(3.0));
        assert_eq!(
            u.evidence["connects_per_s_over"],
            serde_json::json!("in-window seconds")
        );
    }

    #[test]
    fn upstream_keepalive_rule_needs_exact_requests_and_a_connect_per_request() {
        let mut hist = vec![0u64; nginx_probe_common::HIST_BUCKETS];
        hist[15] = 400; // 32.8-65.5 us
        let mut a = w(1, 4, 400);
        a.upstream_connects = 400;
        a.upstream_established = 400;
        a.connect_hist = hist.clone();
        a.connect_max_ns = 60_000;
        let v = judge(&Inputs {
            workers: vec![a.clone()],
            period_s: 4.0,
            requests: Some(400),
            ..Inputs::default()
        });
        let ids: Vec<&str> = v.iter().map(|v| v.id.as_str()).collect();
        assert_eq!(ids, ["upstream_keepalive_off"]);
        assert_eq!(v[0].severity, Severity::Warning);
        assert_eq!(
            v[0].evidence["connects_per_request"],
            serde_json::json!(1.0)
        );
        assert_eq!(v[0].evidence["connects_per_s"], serde_json::json!(100.0));
        assert_eq!(v[0].evidence["connect_p99_us"], serde_json::json!(60.0));
        assert_eq!(v[0].directives[0], "keepalive (upstream block)");
        assert!(v[0]
            .advice
            .contains("to the upstream for every proxied request;"));
        // 0.6 per request is said as such, not as every request.
        let mut some = a.clone();
        some.upstream_established = 240;
        let v = judge(&Inputs {
            workers: vec![some],
            requests: Some(400),
            ..Inputs::default()
        });
        assert!(
            v[0].advice
                .contains("to the upstream for 60 of every 100 requests nginx counted;"),
            "{}",
            v[0].advice
        );
        // Estimated requests (writev counts the upstream request too): quiet.
        assert!(judge(&Inputs {
            workers: vec![a.clone()],
            requests: None,
            ..Inputs::default()
        })
        .is_empty());
        // Pooled upstream connections: quiet.
        let mut pooled = a.clone();
        pooled.upstream_connects = 2;
        pooled.upstream_established = 2;
        assert!(judge(&Inputs {
            workers: vec![pooled],
            requests: Some(400),
            ..Inputs::default()
        })
        .is_empty());
        // Out of local ports: critical.
        a.upstream_errors.insert("EADDRNOTAVAIL".into(), 9);
        let v = judge(&Inputs {
            workers: vec![a],
            requests: Some(400),
            ..Inputs::default()
        });
        assert_eq!(v[0].severity, Severity::Critical);
        assert!(
            v[0].advice
                .contains("(EADDRNOTAVAIL: 9 connects failed for lack of a local port);"),
            "{}",
            v[0].advice
        );
    }

    /// Case 18: local ports used up. Of 1000 connects only 40 were established, 960
    /// failed with EADDRNOTAVAIL: judged on attempts, critical, with the port range,
    /// TIME-WAIT and the peer the error log names.
    #[test]
    fn port_exhaustion_is_judged_on_attempts_with_the_port_range_and_peer() {
        let mut a = w(1, 1000, 1000);
        a.upstream_connects = 1000;
        a.upstream_established = 40;
        a.upstream_errors.insert("EADDRNOTAVAIL".into(), 960);
        let inp = Inputs {
            workers: vec![a],
            requests: Some(1000),
            local_ports: Some(crate::model::local_ports::LocalPortsReport {
                tcp_migrate_req: None,
                range: Some([40000, 40499]),
                tcp_tw_reuse: Some(0),
                time_wait: Some(500),
            }),
            nginx_errors: Some(crate::model::NginxErrorsReport {
                readable: true,
                upstream_peers: vec![crate::model::PeerErrorsReport {
                    peer: "http://127.0.0.1:8080".into(),
                    lines: 960,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Inputs::default()
        };
        let mut out = Vec::new();
        upstream_keepalive_off(&inp, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        let v = &out[0];
        assert_eq!(v.severity, Severity::Critical);
        assert_eq!(v.evidence["attempts_per_request"], serde_json::json!(1.0));
        assert_eq!(
            v.evidence["established_per_request"],
            serde_json::json!(0.04)
        );
        assert!(
            v.advice.starts_with(
                "1.00 new upstream connections per request (0.04 established, plus connects that found no local port; 1.00 connect() calls per request in all, failures included;"
            ),
            "{}",
            v.advice
        );
        assert!(v.advice.contains("(EADDRNOTAVAIL: 960 connects failed for lack of a local port; local ports 40000-40499 (500, net.ipv4.ip_local_port_range in nginx's network namespace), 500 sockets in TIME-WAIT there (/proc/<pid>/net/sockstat, every process of the namespace), net.ipv4.tcp_tw_reuse 0; peers in nginx's error log: http://127.0.0.1:8080 (960 lines))"), "{}", v.advice);
        assert_eq!(v.directives[0], "keepalive (upstream block)");
        // Sampled detail: the count is the windows', and the advice says so.
        let schedule = crate::model::sampling::Schedule::new(1.0, 20.0).unwrap();
        let cov = crate::model::sampling::Coverage {
            windows: 1,
            open_s: 1.0,
            requests: Some(1000),
            open_now: false,
        };
        let sampled = Inputs {
            detail: Some(crate::model::sampling::DetailReport::new(
                &schedule,
                &cov,
                20.0,
                Some(20_000),
                (0, 0, 0),
            )),
            ..inp
        };
        let mut out = Vec::new();
        upstream_keepalive_off(&sampled, &mut out);
        assert!(
            out[0]
                .advice
                .contains("(EADDRNOTAVAIL: 960 connects failed for lack of a local port in the detail windows; local ports"),
            "{}",
            out[0].advice
        );
    }

    /// A dead upstream (`proxy_pass` to a port nothing listens on): 300 requests, 300
    /// connects, all ECONNREFUSED. Nothing was established, so nothing could be kept
    /// alive: silent. Half refused, half established at 0.5 per request still fires.
    #[test]
    fn refused_upstream_connects_are_not_keepalive_off() {
        let mut a = w(1, 300, 300);
        a.upstream_connects = 300;
        a.upstream_errors.insert("ECONNREFUSED".into(), 300);
        let inp = |a: WorkerInput| Inputs {
            workers: vec![a],
            requests: Some(300),
            ..Inputs::default()
        };
        let mut out = Vec::new();
        upstream_keepalive_off(&inp(a.clone()), &mut out);
        assert!(out.is_empty(), "{out:?}");
        // Too few established to judge (149 of 300 requests): silent.
        a.upstream_errors.insert("ECONNREFUSED".into(), 151);
        a.upstream_established = 149;
        upstream_keepalive_off(&inp(a.clone()), &mut out);
        assert!(out.is_empty(), "{out:?}");
        a.upstream_errors.insert("ECONNREFUSED".into(), 150);
        a.upstream_established = 150;
        upstream_keepalive_off(&inp(a), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].evidence["established"], serde_json::json!(150));
        assert_eq!(
            out[0].evidence["established_per_request"],
            serde_json::json!(0.5)
        );
        assert_eq!(
            out[0].evidence["connects_per_request"],
            serde_json::json!(1.0)
        );
    }

    #[test]
    fn fd_rule_quotes_open_file_cache_as_configured() {
        use crate::model::config::{ConfigReport, ConfigValue, DEFAULT};
        let mut b = w(1, 1, 3000);
        b.fd_limit = Some(256);
        b.emfile = 2755;
        b.fd_errors.insert("openat".into(), (2755, 0));
        b.files_peak = Some(250);
        let value = |scope: &str, value: &str, at: &str| ConfigValue {
            directive: "open_file_cache".into(),
            scope: scope.into(),
            value: value.into(),
            at: at.into(),
            not_loaded: false,
            unread_may_set: false,
        };
        let judged = |values: Vec<ConfigValue>| {
            let v = judge(&Inputs {
                workers: vec![b.clone()],
                config: Some(ConfigReport {
                    values,
                    ..ConfigReport::default()
                }),
                ..Inputs::default()
            });
            v.into_iter()
                .find(|v| v.id == "fd_exhaustion")
                .expect("fires")
        };
        // Read and off everywhere: not the cache, and not advised.
        let f = judged(vec![value("http", "off", DEFAULT)]);
        assert!(
            f.advice.contains("250 open in a worker; open() failed with EMFILE; not open_file_cache's: it is off (default) everywhere)"),
            "{}",
            f.advice
        );
        assert!(!f.directives.iter().any(|d| d == "open_file_cache max="));
        // Set in one location: quoted with file:line, and advised.
        let f = judged(vec![
            value("http", "off", DEFAULT),
            value("server _ location /", "max=1000", "/e/n.conf:9"),
        ]);
        assert!(
            f.advice.contains(
                "; open_file_cache max=1000 (/e/n.conf:9) keeps them open up to its max)"
            ),
            "{}",
            f.advice
        );
        assert!(f.directives.iter().any(|d| d == "open_file_cache max="));
    }

    #[test]
    fn fd_rule_names_what_holds_the_fds() {
        // socket() failing while connecting to upstream: upstream connections first.
        let mut a = w(1, 300, 300);
        a.fd_limit = Some(256);
        a.emfile = 156;
        a.fd_errors.insert("socket".into(), (156, 0));
        a.upstream_connects = 244;
        let v = judge(&Inputs {
            workers: vec![a],
            ..Inputs::default()
        });
        let f = v.iter().find(|v| v.id == "fd_exhaustion").expect("fires");
        assert!(
            f.advice.contains("got EMFILE on socket() 156"),
            "{}",
            f.advice
        );
        assert!(
            f.advice.contains("held by upstream connections"),
            "{}",
            f.advice
        );
        assert!(!f.advice.contains("open_file_cache"), "{}", f.advice);
        assert_eq!(
            f.evidence["by_syscall"]["socket"]["EMFILE"],
            serde_json::json!(156)
        );
        // open() failing with the cache holding most of the limit: open_file_cache.
        let mut b = w(1, 1, 3000);
        b.fd_limit = Some(256);
        b.emfile = 2755;
        b.fd_errors.insert("openat".into(), (2755, 0));
        b.files_peak = Some(250);
        let v = judge(&Inputs {
            workers: vec![b],
            ..Inputs::default()
        });
        let f = v.iter().find(|v| v.id == "fd_exhaustion").expect("fires");
        assert!(
            f.advice
                .contains("held by regular files (up to 250 open in a worker; open() failed with EMFILE; open_file_cache, where configured"),
            "{}",
            f.advice
        );
        assert!(!f.advice.contains("upstream"), "{}", f.advice);
        assert!(f.directives.iter().any(|d| d == "open_file_cache max="));
        // accept4 only, sockets counted: sockets, never "client connections" (a
        // worker's sockets include nginx's channels to the other workers, case 21).
        let mut c = w(1, 10, 10);
        c.fd_limit = Some(64);
        c.emfile = 3;
        c.sockets_peak = Some(56);
        c.fd_errors.insert("accept4".into(), (3, 0));
        let v = judge(&Inputs {
            workers: vec![c.clone()],
            ..Inputs::default()
        });
        let f = v.iter().find(|v| v.id == "fd_exhaustion").expect("fires");
        assert!(
            f.advice.contains("held by sockets (up to 56 open in a worker: client connections, listeners and nginx's channels to the other workers, not told apart)"),
            "{}",
            f.advice
        );
        assert!(!f.advice.contains("open_file_cache"), "{}", f.advice);
        // Nothing classified: unknown.
        c.sockets_peak = None;
        let v = judge(&Inputs {
            workers: vec![c],
            ..Inputs::default()
        });
        let f = v.iter().find(|v| v.id == "fd_exhaustion").expect("fires");
        assert!(
            f.advice
                .contains("held by unknown (the workers' fds were not classified)"),
            "{}",
            f.advice
        );
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

    #[test]
    fn the_time_wait_side_is_said_as_measured_or_as_unknown() {
        let mut inp = Inputs::default();
        assert_eq!(time_wait_side(&inp), TIME_WAIT_SIDE);
        inp.connections = Some(crate::model::connections::ConnectionsReport {
            upstream_peers: vec![crate::model::upstream_lifecycle::PeerLifecycle {
                peer: "127.0.0.2:8080".into(),
                closed_by_nginx: 300,
                closed_by_peer: 2,
                ..Default::default()
            }],
            ..Default::default()
        });
        let s = time_wait_side(&inp);
        assert!(s.contains("nginx closed 300 first, the upstream 2"), "{s}");
        assert!(s.contains("mostly nginx's"), "{s}");
    }
}
