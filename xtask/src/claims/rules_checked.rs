//! The rules of the claims whose config change is first checked to have taken effect (keepalive_requests, upstream keepalive,
//! worker_connections over the fd limit, accept_mutex, tcp_nopush): pure judgements on
//! nginx-probe's metrics, with their thresholds at the top of [`super::rules`]. Each
//! first checks, from the configuration nginx-probe read (`config.values`) and from the
//! counters, that the config change took effect.

use super::*;

/// The `keepalive_requests` of the three configs of [`judge_keepalive_requests`].
pub const KEEPALIVE_REQUESTS: [u64; 3] = [100, 1000, 100_000];

/// "inconclusive: the change did not take effect" with what was found instead.
fn not_in_effect(saw: &str, what: impl fmt::Display) -> Judgement {
    verdict(
        Outcome::Inconclusive,
        saw.to_string(),
        format!("the change did not take effect: {what}"),
    )
}

/// Inconclusive when a run's configuration was not read by nginx-probe (no
/// `config.values`): whether the change took effect is then unknown.
fn config_unread(ms: &[Metrics], saw: &str) -> Option<Judgement> {
    ms.iter().any(|m| m.config.is_empty()).then(|| {
        verdict(
            Outcome::Inconclusive,
            saw.to_string(),
            "nginx-probe did not report nginx's configuration (no `config.values`): whether the change took effect is unknown",
        )
    })
}

fn shown<T: fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "?".to_string(), |v| v.to_string())
}

/// Reconnects a run of `m.requests` requests over `m.load_connections` keepalive
/// connections makes when nginx closes each after `n` requests: every connection slot
/// carries requests / connections of them, recycled every `n`.
pub fn expected_reconnects(m: &Metrics, n: u64) -> u64 {
    let c = m.load_connections.max(1);
    c * (m.requests / c / n.max(1))
}

/// Accepts beyond the load's own connections.
fn reconnects(m: &Metrics) -> u64 {
    m.accepts.saturating_sub(m.load_connections)
}

/// keepalive_requests (A: 100, B: 1000, nginx's default, C: 100000; wrk keepalive
/// clients). The claim: nginx closes a connection after keepalive_requests requests, so
/// the default recycles every 1000 and raising it stops that. Measured as reconnects
/// (accepts beyond the load's own connections) against those expected
/// ([`expected_reconnects`]), with the connections nginx closed first beside them.
/// Inconclusive unless each config's keepalive_requests in force (nginx-probe's
/// `config`) is the one asked, or when the run was too short for a connection of A or
/// B to reach its keepalive_requests. Refuted when A or B made fewer than 0.5x the
/// expected reconnects (no recycling) or C made at least 0.5/1000 per request (still
/// recycling like the default). Confirmed when A and B lie within x1.3 of the expected
/// and C made at most 0.0001 per request. Inconclusive otherwise.
pub fn judge_keepalive_requests(ms: &[Metrics]) -> Judgement {
    let [a, b, c] = ms else {
        panic!("keepalive_requests takes 3 configs")
    };
    let n = KEEPALIVE_REQUESTS;
    let saw = format!(
        "keepalive_requests {}; reconnects {} (expected {}); nginx closed first {}; requests per connection {}",
        across(ms, |m| shown(m.config_value("http", "keepalive_requests"))),
        across(ms, |m| reconnects(m).to_string()),
        ms.iter()
            .zip(n)
            .map(|(m, n)| expected_reconnects(m, n).to_string())
            .collect::<Vec<_>>()
            .join(" → "),
        across(ms, |m| shown(m.closed_by_nginx)),
        across(ms, |m| (m.requests / m.load_connections.max(1)).to_string()),
    );
    if let Some(j) = keepalive_requests_unjudgeable(ms, [a, b], &saw) {
        return j;
    }
    let share = |m: &Metrics, n: u64| ratio(reconnects(m) as f64, expected_reconnects(m, n) as f64);
    let (sa, sb) = (share(a, n[0]), share(b, n[1]));
    let rc = ratio(reconnects(c) as f64, c.requests as f64);
    if sa < RECYCLE_ABSENT || sb < RECYCLE_ABSENT {
        let (which, m, v) = if sa < RECYCLE_ABSENT {
            (n[0], a, sa)
        } else {
            (n[1], b, sb)
        };
        return verdict(
            Outcome::Refuted,
            saw,
            format!(
                "keepalive_requests {which} recycled {} connections, x{v:.2} the {} expected: nginx does not close every {which} requests",
                reconnects(m),
                expected_reconnects(m, which)
            ),
        );
    }
    if rc >= RECYCLE_ABSENT / n[1] as f64 {
        return verdict(
            Outcome::Refuted,
            saw,
            format!(
                "keepalive_requests 100000 still recycled {rc:.5} connections per request, as the default does"
            ),
        );
    }
    let within = |v: f64| (1.0 / RECYCLE_TOLERANCE..=RECYCLE_TOLERANCE).contains(&v);
    if within(sa) && within(sb) && rc <= RECYCLE_GONE {
        return verdict(
            Outcome::Confirmed,
            saw,
            format!(
                "a reconnect every {:.0} requests with 100 (x{sa:.2} the expected), every {:.0} with the default 1000 (x{sb:.2}), {} beyond the clients' own connections with 100000",
                ratio(a.requests as f64, reconnects(a) as f64),
                ratio(b.requests as f64, reconnects(b) as f64),
                reconnects(c),
            ),
        );
    }
    verdict(
        Outcome::Inconclusive,
        saw,
        format!("x{sa:.2} and x{sb:.2} the expected reconnects: between the thresholds (within x{RECYCLE_TOLERANCE} confirms, below x{RECYCLE_ABSENT} refutes)"),
    )
}

/// Why the keepalive_requests runs cannot be judged, if they cannot: too few requests,
/// the configuration unread, a config's keepalive_requests in force not the one asked,
/// or a run of `a` or `b` too short for a connection to reach its keepalive_requests.
fn keepalive_requests_unjudgeable(
    ms: &[Metrics],
    [a, b]: [&Metrics; 2],
    saw: &str,
) -> Option<Judgement> {
    let n = KEEPALIVE_REQUESTS;
    if let Some(j) = too_few_requests(ms, saw) {
        return Some(j);
    }
    if let Some(j) = config_unread(ms, saw) {
        return Some(j);
    }
    for (m, n) in ms.iter().zip(n) {
        let v = m.config_value("http", "keepalive_requests");
        if v != Some(n.to_string().as_str()) {
            return Some(not_in_effect(
                saw,
                format!("keepalive_requests in force {} (asked {n})", shown(v)),
            ));
        }
    }
    for (m, n) in [(a, n[0]), (b, n[1])] {
        if expected_reconnects(m, n) < m.load_connections.max(1) {
            return Some(verdict(
                Outcome::Inconclusive,
                saw.to_string(),
                format!(
                    "the run was too short: {} requests per connection, fewer than keepalive_requests {n}",
                    m.requests / m.load_connections.max(1)
                ),
            ));
        }
    }
    None
}

/// upstream_keepalive (A: `proxy_pass` to an upstream without `keepalive`, B: the
/// upstream with `keepalive 64`, `proxy_http_version 1.1` and `proxy_set_header
/// Connection ""`; the backend a second, untraced nginx). The claim: every proxied
/// request costs an upstream connect, and upstream keepalive removes it. Inconclusive
/// unless B's upstream keepalive, HTTP/1.1 and cleared Connection header are in force
/// and A has no upstream keepalive, or when A shows no upstream connect at all.
/// Confirmed when A makes ≥ 0.9 upstream connects per request and B ≤ 0.1; refuted
/// when A makes < 0.5 or B ≥ 0.5; inconclusive between.
pub fn judge_upstream_keepalive(ms: &[Metrics]) -> Judgement {
    let [a, b] = ms else {
        panic!("upstream_keepalive takes 2 configs")
    };
    let saw = format!(
        "upstream keepalive {}; proxy_http_version {}; upstream connects/req {}; CPU us/req {}",
        across(ms, |m| shown(m.config_value("upstream ", "keepalive"))),
        across(ms, |m| shown(
            m.config_value("server ", "proxy_http_version")
        )),
        across(ms, |m| format!("{:.3}", m.upstream_connects_per_request())),
        across(ms, |m| format!("{:.1}", m.cpu_us_per_request)),
    );
    if let Some(j) = too_few_requests(ms, &saw) {
        return j;
    }
    if let Some(j) = config_unread(ms, &saw) {
        return j;
    }
    let keepalive = |m: &Metrics| {
        m.config_value("upstream ", "keepalive")
            .and_then(|v| v.parse::<u64>().ok())
    };
    let cleared = b
        .config_value("server ", "proxy_set_header Connection")
        .is_some_and(|v| v.trim_matches('"').is_empty());
    if keepalive(b).is_none()
        || b.config_value("server ", "proxy_http_version") != Some("1.1")
        || !cleared
    {
        return not_in_effect(
            &saw,
            format!(
                "B's upstream keepalive {}, proxy_http_version {}, Connection header {}",
                shown(b.config_value("upstream ", "keepalive")),
                shown(b.config_value("server ", "proxy_http_version")),
                shown(b.config_value("server ", "proxy_set_header Connection"))
            ),
        );
    }
    if keepalive(a).is_some() {
        return not_in_effect(&saw, "A already keeps upstream connections alive");
    }
    if a.upstream_connects == 0 {
        return verdict(
            Outcome::Inconclusive,
            saw,
            "no upstream connect seen without keepalive: the proxy did not run, or nginx-probe did not trace connect",
        );
    }
    let (ua, ub) = (
        a.upstream_connects_per_request(),
        b.upstream_connects_per_request(),
    );
    if ua >= PER_REQUEST_ALWAYS && ub <= PER_REQUEST_GONE {
        verdict(
            Outcome::Confirmed,
            saw,
            format!("{ua:.2} upstream connects per request without keepalive, {ub:.3} with it"),
        )
    } else if ua < 0.5 || ub >= 0.5 {
        verdict(
            Outcome::Refuted,
            saw,
            format!("{ua:.2} upstream connects per request without keepalive, {ub:.3} with it: not one per request removed"),
        )
    } else {
        verdict(
            Outcome::Inconclusive,
            saw,
            format!("{ua:.2} → {ub:.3} upstream connects per request: between the thresholds"),
        )
    }
}

/// worker_connections_nofile (A: `worker_connections 8192` at soft nofile 64, B: the
/// same plus `worker_rlimit_nofile 16384` within a hard limit of 16384; 300 keepalive
/// clients). The claim (000): with worker_connections above the fd limit nginx warns at
/// start ("worker_connections exceed open file resource limit") and fails under load
/// with EMFILE. Inconclusive unless both run worker_connections 8192 and B's limit in
/// force is raised, or when the summary has no error-log history (the warning is
/// written before attach). Refuted when A did not warn, or its workers reached the
/// limit without EMFILE. Confirmed when A warned and got EMFILE and B neither;
/// inconclusive when A's load never came near its limit or B warned or got EMFILE too.
pub fn judge_worker_connections_nofile(ms: &[Metrics]) -> Judgement {
    let [a, b] = ms else {
        panic!("worker_connections_nofile takes 2 configs")
    };
    let saw = format!(
        "worker_connections {}; start-up warnings {}; EMFILE (accept4) {}; EMFILE log lines {}; fds peak/limit {}",
        across(ms, |m| shown(m.config_value("events", "worker_connections"))),
        across(ms, |m| shown(m.over_nofile_warnings)),
        across(ms, |m| m.emfile.to_string()),
        across(ms, |m| m.emfile_log_lines.to_string()),
        across(ms, |m| format!("{}/{}", m.fd_peak, m.fd_limit)),
    );
    if let Some(j) = config_unread(ms, &saw) {
        return j;
    }
    for m in ms {
        let wc = m.config_value("events", "worker_connections");
        if wc != Some("8192") {
            return not_in_effect(&saw, format!("worker_connections in force {}", shown(wc)));
        }
    }
    if b.fd_limit <= a.fd_limit || b.fd_limit < 8192 {
        return not_in_effect(
            &saw,
            format!(
                "worker_rlimit_nofile did not raise the limit in force ({} → {})",
                a.fd_limit, b.fd_limit
            ),
        );
    }
    let (Some(wa), Some(wb)) = (a.over_nofile_warnings, b.over_nofile_warnings) else {
        return verdict(
            Outcome::Inconclusive,
            saw,
            "nginx-probe's summary has no error-log history (`nginx_errors.history`): the start-up warning cannot be read",
        );
    };
    if wa == 0 {
        return verdict(
            Outcome::Refuted,
            saw,
            format!(
                "no start-up warning with 8192 worker_connections over a soft limit of {}",
                a.fd_limit
            ),
        );
    }
    if wb > 0 || b.emfile > 0 {
        return verdict(
            Outcome::Inconclusive,
            saw,
            format!(
                "the control warned ({wb}) or got EMFILE ({}) with worker_rlimit_nofile 16384",
                b.emfile
            ),
        );
    }
    if a.emfile == 0 {
        if (a.fd_peak as f64) < NEAR_LIMIT * a.fd_limit as f64 {
            return verdict(
                Outcome::Inconclusive,
                saw,
                format!("nginx warned ({wa}), but the load never brought a worker near its limit"),
            );
        }
        return verdict(
            Outcome::Refuted,
            saw,
            "nginx warned, but the workers reached the limit without an EMFILE",
        );
    }
    verdict(
        Outcome::Confirmed,
        saw,
        format!(
            "nginx warned at start ({wa} line(s)) and {} accepts failed with EMFILE under load at soft limit {}; with worker_rlimit_nofile {} neither",
            a.emfile, a.fd_limit, b.fd_limit
        ),
    )
}

/// accept_mutex (4 workers, a burst of new connections: A: the defaults, B:
/// `accept_mutex_delay 100ms` as 004 set it, C: `accept_mutex on` with that delay).
/// The claim (004: +9% req/s) is about throughput, which is not judged: the rule judges
/// nginx's CPU per request and prints wasted wake-ups (accept4 EAGAIN per accept) and
/// the accept skew beside it. Inconclusive unless B and C run `accept_mutex_delay
/// 100ms` and C `accept_mutex on`. When B's accept mutex is off (nginx's default since
/// 1.11.3) the delay cannot act: refuted when B's CPU per request is within ±5% of A's,
/// inconclusive when it moved more (noise, the directive being inert). When B's mutex
/// is on (an older nginx): confirmed when B's CPU per request is ≥ 5% lower, refuted
/// otherwise.
pub fn judge_accept_mutex(ms: &[Metrics]) -> Judgement {
    let [a, b, c] = ms else {
        panic!("accept_mutex takes 3 configs")
    };
    let saw = format!(
        "accept_mutex {}; accept_mutex_delay {}; wasted wake-ups/accept {}; accept skew {}; CPU us/req {}",
        across(ms, |m| shown(m.config_value("events", "accept_mutex"))),
        across(ms, |m| shown(m.config_value("events", "accept_mutex_delay"))),
        across(ms, |m| format!("{:.2}", m.wasted_wakeups_per_accept())),
        across(ms, |m| format!("{:.2}", m.accept_skew)),
        across(ms, |m| format!("{:.1}", m.cpu_us_per_request)),
    );
    if let Some(j) = too_few_requests(ms, &saw) {
        return j;
    }
    if let Some(j) = config_unread(ms, &saw) {
        return j;
    }
    fn delay(m: &Metrics) -> Option<&str> {
        m.config_value("events", "accept_mutex_delay")
    }
    if delay(b) != Some("100ms") || delay(c) != Some("100ms") {
        return not_in_effect(
            &saw,
            format!(
                "accept_mutex_delay in force {} / {}",
                shown(delay(b)),
                shown(delay(c))
            ),
        );
    }
    if c.config_value("events", "accept_mutex") != Some("on") {
        return not_in_effect(&saw, "C's accept_mutex is not on");
    }
    let cpu = ratio(b.cpu_us_per_request, a.cpu_us_per_request);
    let with_mutex = format!(
        "with accept_mutex on (C): wasted wake-ups per accept {:.2} → {:.2}, accept skew {:.2} → {:.2}, CPU per request x{:.2}",
        a.wasted_wakeups_per_accept(),
        c.wasted_wakeups_per_accept(),
        a.accept_skew,
        c.accept_skew,
        ratio(c.cpu_us_per_request, a.cpu_us_per_request)
    );
    if b.config_value("events", "accept_mutex") != Some("on") {
        if (cpu - 1.0).abs() < CPU_NOISE {
            verdict(
                Outcome::Refuted,
                saw,
                format!("accept_mutex_delay is inert with accept_mutex off (nginx's default since 1.11.3): CPU per request x{cpu:.2}; {with_mutex}"),
            )
        } else {
            verdict(
                Outcome::Inconclusive,
                saw,
                format!("CPU per request moved x{cpu:.2} though accept_mutex_delay is inert with accept_mutex off: the machine's noise; {with_mutex}"),
            )
        }
    } else if cpu <= 1.0 - CPU_NOISE {
        verdict(
            Outcome::Confirmed,
            saw,
            format!("accept_mutex_delay 100ms: CPU per request x{cpu:.2}; {with_mutex}"),
        )
    } else {
        verdict(
            Outcome::Refuted,
            saw,
            format!(
                "accept_mutex_delay 100ms: CPU per request x{cpu:.2}, not 5% lower; {with_mutex}"
            ),
        )
    }
}

/// tcp_nopush (A: `sendfile on`, B: plus `tcp_nopush on`; wrk keepalive, the 30-byte
/// file). The claim (004: +9% req/s; 000: "batch headers+body into full segments") is
/// about throughput, not judged: the rule judges the calls per response (writev +
/// sendfile) and nginx's CPU per request. Inconclusive unless B's tcp_nopush is on and
/// A's off, and both send the file with sendfile (≥ 0.9 per request). Confirmed when
/// B's CPU per request is ≥ 5% lower; refuted when it is not and B makes no fewer calls
/// per response (at most 0.1 fewer); inconclusive otherwise.
pub fn judge_tcp_nopush(ms: &[Metrics]) -> Judgement {
    let [a, b] = ms else {
        panic!("tcp_nopush takes 2 configs")
    };
    let calls = |m: &Metrics| m.per_req("writev") + m.per_req("sendfile");
    let saw = format!(
        "tcp_nopush {}; writev+sendfile/req {}; traced syscalls/req {}; CPU us/req {}",
        across(ms, |m| shown(m.config_value("http", "tcp_nopush"))),
        across(ms, |m| format!("{:.2}", calls(m))),
        across(ms, |m| format!("{:.2}", m.syscalls_per_request)),
        across(ms, |m| format!("{:.1}", m.cpu_us_per_request)),
    );
    if let Some(j) = too_few_requests(ms, &saw) {
        return j;
    }
    if let Some(j) = config_unread(ms, &saw) {
        return j;
    }
    if b.config_value("http", "tcp_nopush") != Some("on")
        || a.config_value("http", "tcp_nopush") != Some("off")
    {
        return not_in_effect(
            &saw,
            format!(
                "tcp_nopush in force {} / {}",
                shown(a.config_value("http", "tcp_nopush")),
                shown(b.config_value("http", "tcp_nopush"))
            ),
        );
    }
    if ms
        .iter()
        .any(|m| m.per_req("sendfile") < PER_REQUEST_ALWAYS)
    {
        return not_in_effect(
            &saw,
            "the file did not go out with sendfile (tcp_nopush acts only with sendfile)",
        );
    }
    let cpu = ratio(b.cpu_us_per_request, a.cpu_us_per_request);
    let fewer = calls(a) - calls(b);
    let why = format!(
        "calls per response {:.2} → {:.2}, CPU per request x{cpu:.2}",
        calls(a),
        calls(b)
    );
    if cpu <= 1.0 - CPU_NOISE {
        verdict(Outcome::Confirmed, saw, why)
    } else if fewer <= PER_REQUEST_GONE {
        verdict(
            Outcome::Refuted,
            saw,
            format!("{why}: tcp_nopush saves no call and no CPU on this response"),
        )
    } else {
        verdict(
            Outcome::Inconclusive,
            saw,
            format!("{why}: fewer calls, no cheaper requests"),
        )
    }
}

/// worker_processes_sweep (A: 2, B: 4, C: 8 workers; wrk keepalive). The claim (002:
/// 1..8 workers, gains flatten after ~4) is about throughput, not judged; the rule
/// reads the cores' worth of CPU the workers used ([`Metrics::cpu_cores`]), with CPU
/// per request, context switches and run delay per request beside it. Inconclusive on
/// a machine with fewer than 8 online CPUs: beyond its cores the claim is untestable
/// there. On 8 or more: confirmed when CPU cores used grow less than x1.25 from 4 to 8 workers,
/// refuted when they grow x1.5 or more, inconclusive between.
pub fn judge_worker_processes_sweep(ms: &[Metrics]) -> Judgement {
    let [_, b, c] = ms else {
        panic!("worker_processes_sweep takes 3 configs")
    };
    let saw = format!(
        "CPU cores used {}; CPU us/req {}; ctx switches/1k req {}; run delay us/req {}",
        across(ms, |m| format!("{:.2}", m.cpu_cores)),
        across(ms, |m| format!("{:.1}", m.cpu_us_per_request)),
        across(ms, |m| format!("{:.0}", m.switches_per_1k())),
        across(ms, |m| format!("{:.1}", m.run_delay_us_per_request)),
    );
    let cpus = ms.iter().map(|m| m.online_cpus).min().unwrap_or(0);
    if cpus < SWEEP_CPUS {
        return verdict(
            Outcome::Inconclusive,
            saw,
            format!("this machine has {cpus} online CPUs: the claim is about 4 to 8 workers on as many cores, so beyond {cpus} workers it is untestable here"),
        );
    }
    if let Some(j) = too_few_requests(ms, &saw) {
        return j;
    }
    let grow = ratio(c.cpu_cores, b.cpu_cores);
    let why = format!("CPU cores used x{grow:.2} from 4 to 8 workers");
    if grow < SWEEP_FLAT {
        verdict(Outcome::Confirmed, saw, format!("{why}: the gain flattens"))
    } else if grow >= SWEEP_GROWS {
        verdict(Outcome::Refuted, saw, format!("{why}: still growing"))
    } else {
        verdict(
            Outcome::Inconclusive,
            saw,
            format!("{why}: between the thresholds"),
        )
    }
}

/// tls_session_cache (HTTPS, `keepalive_timeout 0` so that every request is a new
/// connection and a handshake; wrk, which resumes sessions when the server lets it. A:
/// no session cache, tickets off; B: 003's `ssl_session_cache shared:TLSSL:30m`,
/// tickets off; C: tickets on, nginx's default). nginx-probe does not tell resumed
/// handshakes from full ones: the rule reads libssl's time per handshake
/// (`tls.call_ns / tls.handshakes`), which a resumption cuts (no certificate signature),
/// with CPU per connection (`keepalive_timeout 0`: per request) beside it. wrk resumes:
/// nginx's `$ssl_session_reused` logged `r` on all but the first connection of each of
/// wrk's (checked once by hand; the lab does not read it).
/// Inconclusive unless B's session cache is `shared:...` and A's none, with tickets off
/// in both, or when A's connections do not each handshake (≥ 0.9 handshakes per
/// accept). Confirmed when B's time per handshake is at most 0.5x A's; refuted when at
/// least 0.9x; inconclusive between. C's is shown beside it.
pub fn judge_tls_session_cache(ms: &[Metrics]) -> Judgement {
    let [a, b, c] = ms else {
        panic!("tls_session_cache takes 3 configs")
    };
    let saw = format!(
        "ssl_session_cache {}; ssl_session_tickets {}; handshakes/connection {}; libssl us/handshake {}; CPU us/req {}",
        across(ms, |m| shown(m.config_value("http", "ssl_session_cache"))),
        across(ms, |m| shown(m.config_value("http", "ssl_session_tickets"))),
        across(ms, |m| format!("{:.2}", ratio(m.tls_handshakes as f64, m.accepts as f64))),
        across(ms, |m| format!("{:.0}", m.tls_us_per_handshake())),
        across(ms, |m| format!("{:.1}", m.cpu_us_per_request)),
    );
    if let Some(j) = too_few_requests(ms, &saw) {
        return j;
    }
    if let Some(j) = config_unread(ms, &saw) {
        return j;
    }
    fn cache(m: &Metrics) -> &str {
        m.config_value("http", "ssl_session_cache").unwrap_or("?")
    }
    fn tickets(m: &Metrics) -> Option<&str> {
        m.config_value("http", "ssl_session_tickets")
    }
    if !cache(b).starts_with("shared:")
        || cache(a).starts_with("shared:")
        || tickets(a) != Some("off")
        || tickets(b) != Some("off")
    {
        return not_in_effect(
            &saw,
            format!(
                "session cache {} / {}, tickets {} / {}",
                cache(a),
                cache(b),
                shown(tickets(a)),
                shown(tickets(b))
            ),
        );
    }
    if ms.iter().any(|m| m.tls_handshakes == 0) {
        return verdict(
            Outcome::Inconclusive,
            saw,
            "nginx-probe counted no TLS handshake in a config (libssl's uprobes not attached?)",
        );
    }
    if ratio(a.tls_handshakes as f64, a.accepts as f64) < PER_REQUEST_ALWAYS {
        return not_in_effect(&saw, "A's connections do not each make a handshake");
    }
    let cost = ratio(b.tls_us_per_handshake(), a.tls_us_per_handshake());
    let why = format!(
        "libssl time per handshake {:.0} us without a cache, {:.0} us with it (x{cost:.2}), CPU per connection x{:.2}; with tickets (C) {:.0} us (nginx-probe does not tell resumed handshakes from full ones: judged on their cost)",
        a.tls_us_per_handshake(),
        b.tls_us_per_handshake(),
        ratio(b.cpu_us_per_request, a.cpu_us_per_request),
        c.tls_us_per_handshake()
    );
    if cost <= TLS_RESUMED_COST {
        verdict(
            Outcome::Confirmed,
            saw,
            format!("{why}: the clients resumed their sessions"),
        )
    } else if cost >= TLS_FULL_COST {
        verdict(
            Outcome::Refuted,
            saw,
            format!("{why}: no handshake was made cheaper"),
        )
    } else {
        verdict(
            Outcome::Inconclusive,
            saw,
            format!("{why}: between the thresholds (x{TLS_RESUMED_COST} confirms, x{TLS_FULL_COST} refutes)"),
        )
    }
}

/// aio_threads (wrk keepalive, sendfile on; A: the 30-byte file, B: plus `aio threads`;
/// C: a file of [`AIO_FILE_BYTES`] read with `directio 4k`, D: plus `aio threads`). The
/// claim (004: 6107 → 5223 req/s with aio threads) is about throughput on a small cached
/// file, which is not judged: the rule judges nginx's CPU per request from A to B
/// (`cpu_s` is the whole process's, so the thread pool's threads are in it), and shows
/// beside it the event loop's stalls (the longest worker p99 iteration) and CPU per
/// request from C to D, where every read goes to the disk. `directio` stands in for a
/// file larger than the page cache: such a file (more than the machine's RAM) is too big
/// for the lab's runs and disks, and nginx-probe does not trace `pread64`, so whether
/// a read waited for the disk is not measured. Inconclusive unless B and D run `aio
/// threads` and A and C do not, the thread pool took the work (B and D write ≥ 0.9
/// eventfd notices per request, A and C ≤ 0.1: [`Metrics::other_writes`]) and directio
/// kept the big file off sendfile (C and D ≤ 0.1 sendfile per request). Confirmed when
/// B's CPU per request is ≥ 5% above A's; refuted when ≥ 5% below; inconclusive
/// between.
pub fn judge_aio_threads(ms: &[Metrics]) -> Judgement {
    let [a, b, c, d] = ms else {
        panic!("aio_threads takes 4 configs")
    };
    let saw = format!(
        "aio {}; thread-pool notices/req {}; sendfile/req {}; event-loop p99 us {}; CPU us/req {}",
        across(ms, |m| shown(m.config_value("http", "aio"))),
        across(ms, |m| format!("{:.2}", m.other_writes_per_request())),
        across(ms, |m| format!("{:.2}", m.per_req("sendfile"))),
        across(ms, |m| format!("{:.0}", m.loop_p99_us)),
        across(ms, |m| format!("{:.1}", m.cpu_us_per_request)),
    );
    if let Some(j) = aio_threads_unjudgeable(ms, &saw) {
        return j;
    }
    let cpu = ratio(b.cpu_us_per_request, a.cpu_us_per_request);
    let why = format!(
        "CPU per request with aio threads x{cpu:.2} on the cached file; on the directio file CPU per request x{:.2}, event-loop p99 iteration {:.0} → {:.0} us (directio stands in for a file larger than the page cache)",
        ratio(d.cpu_us_per_request, c.cpu_us_per_request),
        c.loop_p99_us,
        d.loop_p99_us,
    );
    if cpu >= 1.0 + CPU_NOISE {
        verdict(Outcome::Confirmed, saw, why)
    } else if cpu <= 1.0 - CPU_NOISE {
        verdict(
            Outcome::Refuted,
            saw,
            format!("{why}: aio threads made the cached file cheaper"),
        )
    } else {
        verdict(
            Outcome::Inconclusive,
            saw,
            format!("{why}: within the noise (±{}%)", CPU_NOISE * 100.0),
        )
    }
}

/// Why the aio_threads runs cannot be judged, if they cannot: too few requests, the
/// configuration unread, `aio threads` not in force where asked (or in force where
/// not), no thread-pool notices where it is on (or some where it is off), or the
/// directio file sent with sendfile.
fn aio_threads_unjudgeable(ms: &[Metrics], saw: &str) -> Option<Judgement> {
    if let Some(j) = too_few_requests(ms, saw).or_else(|| config_unread(ms, saw)) {
        return Some(j);
    }
    let asked = [("A", false), ("B", true), ("C", false), ("D", true)];
    for (m, (label, on)) in ms.iter().zip(asked) {
        let aio = m.config_value("http", "aio");
        if (aio == Some("threads")) != on {
            return Some(not_in_effect(
                saw,
                format!(
                    "{label}'s aio in force {} (asked {})",
                    shown(aio),
                    if on { "threads" } else { "off" }
                ),
            ));
        }
        let notices = m.other_writes_per_request();
        if (on && notices < PER_REQUEST_ALWAYS) || (!on && notices > PER_REQUEST_GONE) {
            return Some(not_in_effect(
                saw,
                format!(
                    "{label} wrote {notices:.2} thread-pool notices per request (eventfd writes)"
                ),
            ));
        }
    }
    ms[2..].iter().find(|m| m.per_req("sendfile") > PER_REQUEST_GONE).map(|m| {
        not_in_effect(
            saw,
            format!("the directio file went out with sendfile ({:.2} per request): directio not in force", m.per_req("sendfile")),
        )
    })
}
