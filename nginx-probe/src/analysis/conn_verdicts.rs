//! Verdicts on who closed nginx's client connections (from the report's
//! `connections`: tracepoint `sock:inet_sock_set_state` on nginx's listening ports):
//! the `closed_by` evidence and sentence of `keepalive_off`, and
//! `keepalive_timeout_closes` (nginx closes idle keepalive connections at its timeout)
//! and `nginx_timeout_closes` (at another configured timeout, or one unknown),
//! and `listener_closed_resets` (a reload closed listening sockets with connections
//! queued on them: the kernel reset those).

use std::collections::BTreeMap;

use crate::{
    analysis::{
        conn_timeouts::{match_timeout, TimeoutMatch, CLOSE_TIMEOUTS, REQUEST_TIMEOUTS},
        inputs::Inputs,
    },
    model::{
        connections::{fmt_ms, PortLifecycle},
        listener_closes::ListenerClose,
        Severity, Verdict,
    },
};

/// nginx closes needed before `keepalive_timeout_closes` is judged.
pub const KA_TIMEOUT_MIN_CLOSES: u64 = 10;
/// Share of the first closes nginx must have made for `keepalive_timeout_closes`.
pub const KA_TIMEOUT_NGINX_SHARE: f64 = 0.5;
/// Pinned idle time at or above which nginx's closes are keepalive timeouts, ms (closes
/// right after a response sit near 0).
pub const KA_TIMEOUT_MIN_IDLE_MS: f64 = 500.0;
/// Resets of a closed listener's queue from which `listener_closed_resets` is critical
/// (below: a warning; each one is a client that got `connection reset`).
pub const CLOSED_LISTENER_RESETS_CRITICAL: u64 = 10;
/// Idle p99 under which closes (nginx's, or the clients') came right after a response, ms.
pub const CLOSE_AFTER_RESPONSE_MS: u64 = 100;

/// The period's totals over nginx's ports, when any connection that carried data was
/// closed; connections closed before the client sent a byte are left out of who
/// closed first (see [`PortLifecycle::with_data`]).
fn closes(inp: &Inputs) -> Option<PortLifecycle> {
    let t = inp.connections.as_ref()?.total().with_data();
    (all_closes(&t) > 0).then_some(t)
}

/// Every first close of `t`: by nginx, by an exiting worker, by the client, by a reset.
fn all_closes(t: &PortLifecycle) -> u64 {
    t.closed_by_nginx + t.closed_by_worker_exit + t.closed_by_client + t.closed_by_reset
}

/// Whether the clients closed most connections of the period first (tracepoint
/// `sock:inet_sock_set_state`): then nginx's keepalive settings did not close them.
/// False when no close was counted, or when a client's FIN that raced nginx's own
/// close after a `Connection: close` response can be among the clients' closes
/// (`ConnectionsReport::fin_unread_why`: the rule that tells them apart was off, or
/// the report was recorded before it).
pub fn clients_closed_most(inp: &Inputs) -> bool {
    let told_apart = inp
        .connections
        .as_ref()
        .is_some_and(|c| c.fin_unread_why().is_none());
    told_apart && closes(inp).is_some_and(|t| t.closed_by_client * 2 > all_closes(&t))
}

/// Who closed first, measured: (`closed_by` evidence, the sentence for the advice);
/// None when no close was counted (then who closes is unknown).
pub fn who_closed(inp: &Inputs) -> Option<(serde_json::Value, String)> {
    let t = closes(inp)?;
    let all = all_closes(&t);
    let idle = t.idle_before_nginx_close.as_ref();
    let evidence = serde_json::json!({
        "nginx": t.closed_by_nginx,
        "worker_exit": t.closed_by_worker_exit,
        "client": t.closed_by_client,
        "reset": t.closed_by_reset,
        "nginx_draining": t.closed_while_draining,
        "without_data_left_out": t.closed_without_data(),
        "source": "tracepoint sock:inet_sock_set_state (ESTABLISHED -> FIN_WAIT1: nginx, or a worker's exit when the closing task is exiting; -> CLOSE_WAIT: the client; -> CLOSE: a reset); nginx_draining: of nginx's, by workers that had entered ngx_close_idle_connections (uprobe); without_data_left_out: closed before the client sent a byte (tcp_sock.bytes_received), not in the counts",
        "idle_before_nginx_close_p99_ms": idle.map(|i| i.p99_ms),
        "idle_before_nginx_close_pinned_ms": idle.and_then(|i| i.pinned_ms),
        "idle_before_client_close_p50_ms": t.idle_before_client_close.as_ref().map(|i| i.p50_ms),
        "idle_before_client_close_p99_ms": t.idle_before_client_close.as_ref().map(|i| i.p99_ms),
    });
    let exits = if t.closed_by_worker_exit > 0 {
        format!(
            ", {} were closed as the worker holding them exited",
            t.closed_by_worker_exit
        )
    } else {
        String::new()
    };
    let draining = match t.closed_while_draining {
        0 => String::new(),
        d => format!(" ({d} of them by draining workers)"),
    };
    let unused = match t.closed_without_data() {
        0 => String::new(),
        n => format!(" that carried data ({n} more closed before their client sent a byte)"),
    };
    let head = format!(
        "of {all} connections closed{unused}, nginx closed {}{draining} first, the clients {}, resets ended {}{exits} (tracepoint sock:inet_sock_set_state)",
        t.closed_by_nginx, t.closed_by_client, t.closed_by_reset
    );
    let sentence = if t.closed_by_nginx * 2 > all
        && t.closed_while_draining * 2 >= t.closed_by_nginx
    {
        format!(
            "{head}: most of nginx's closes were by draining workers (a reload, a QUIT, a binary upgrade's WINCH): {} idle ones in nginx's sweep of idle connections, {} right after nginx's own data, {} with nothing sent by nginx just before; not a timeout nor keepalive turned off",
            t.closed_while_draining_idle,
            t.closed_while_draining_after_data,
            t.closed_while_draining_silent
        )
    } else if t.closed_by_nginx * 2 > all {
        let why = nginx_closed_why(inp, idle);
        format!("{head}: {why}")
    } else if t.closed_by_worker_exit * 2 > all {
        format!("{head}: most were closed by the kernel as their worker exited (killed, crashed, or ended without closing them), not closed by nginx as idle; see the worker exits")
    } else if t.closed_by_client * 2 > all {
        clients_closed(inp, &head)
    } else {
        format!("{head}: no side closed most of them")
    };
    Some((evidence, sentence))
}

/// who_closed's reason when nginx closed most connections first: the timeout its
/// pinned idle time matches, a close right after the response (and what the
/// configuration says of it), or the idle range.
fn nginx_closed_why(inp: &Inputs, idle: Option<&crate::model::connections::IdleReport>) -> String {
    let served = inp.served_config();
    let i = match idle {
        Some(i) if i.pinned_ms.is_some_and(|v| v >= KA_TIMEOUT_MIN_IDLE_MS) => {
            return closed_at(inp, i.pinned_ms.unwrap_or(0.0))
        }
        Some(i) => i,
        None => return "check keepalive_timeout and keepalive_requests, and whether the clients send `Connection: close`".to_string(),
    };
    // Right after a response: all of them, or most (a health checker's one-request
    // connections beside clients that go idle until keepalive_timeout: trial 8).
    let after = if i.p99_ms < CLOSE_AFTER_RESPONSE_MS {
        "nginx closed them right after a response (idle p99 under 100 ms)".to_string()
    } else if i.p50_ms < CLOSE_AFTER_RESPONSE_MS {
        format!(
            "nginx closed most of them right after a response (idle p50 {}; the others after up to {} idle)",
            fmt_ms(i.p50_ms as f64),
            fmt_ms(i.max_ms_since_attach as f64)
        )
    } else {
        return format!(
            "nginx closed them after {} to {} idle (p50 {})",
            fmt_ms(i.min_ms_since_attach as f64),
            fmt_ms(i.max_ms_since_attach as f64),
            fmt_ms(i.p50_ms as f64)
        );
    };
    use super::config_evidence::{
        keepalive_settings, keepalive_timeout_zero, keepalive_timeout_zero_everywhere,
    };
    // Trial 9: `return 444` closes without a response, as configured; no keepalive
    // setting nor client is the cause of those.
    let by_nginx = closes(inp).map_or(0, |t| t.closed_by_nginx);
    let dropped = inp
        .access_log
        .as_ref()
        .and_then(|a| a.answered_444_closing(by_nginx));
    if let Some(n) = dropped {
        // Trial 10: "right after a response" when none was sent.
        let at_once = after.replacen("right after a response", "at once", 1);
        return format!(
            "{at_once}: {}",
            crate::model::access_log::said_444(n, by_nginx)
        );
    }
    if let Some(zero) = keepalive_timeout_zero(served.as_ref()) {
        return if keepalive_timeout_zero_everywhere(served.as_ref()) {
            format!("{after}: keepalive_timeout 0 is configured ({zero}), which turns client keepalive off there")
        } else {
            format!(
                "{after}: keepalive_timeout 0 is configured in some of the servers or locations that may have served them ({zero}) while the others keep keepalive on ({}); which of them these connections reached is not measured (connections are counted by port, and name-based servers share one), and nginx closes the same way when the clients ask for `Connection: close` or speak HTTP/1.0",
                keepalive_settings(served.as_ref()).unwrap_or_default()
            )
        };
    }
    if let Some(reached) = super::worker_connections::worker_connections_reached(inp) {
        return format!("{after}: {reached}; raise worker_connections (and worker_rlimit_nofile with it), or the clients asked for `Connection: close`: which one is not measured");
    }
    match keepalive_settings_ruled_out(inp) {
        Some(why) => format!(
            "{after}, yet {why}: the clients asked for `Connection: close` or spoke HTTP/1.0 (a load balancer's health checks do)"
        ),
        None => format!(
            "{after}: its keepalive is off for these requests: keepalive_timeout 0, keepalive_requests reached, or the clients asked for `Connection: close` or spoke HTTP/1.0 ({})",
            match keepalive_settings(served.as_ref()) {
                Some(k) => format!("configured: {k}"),
                None => "nginx's config is not read; check them".into(),
            }
        ),
    }
}

/// Why nginx's own keepalive settings (`keepalive_timeout`, `keepalive_requests`) did
/// not close these connections, when the measurements say so: the clients closed most
/// of them first (tracepoint `sock:inet_sock_set_state`), or the configuration keeps
/// keepalive on (no `keepalive_timeout 0`) with `keepalive_requests` above the 1
/// request per connection seen (accepts per request near 1: the workers' accepts over
/// the exact request count). None when they may be the cause (or the configuration is
/// not read, or the requests are not counted).
pub fn keepalive_settings_ruled_out(inp: &Inputs) -> Option<String> {
    use super::{config_evidence::keepalive_timeout_zero, outcome_rules::value_seconds};
    if let Some(t) = closes(inp).filter(|_| clients_closed_most(inp)) {
        return Some(format!(
            "the clients closed {} of {} connections first",
            t.closed_by_client,
            all_closes(&t)
        ));
    }
    let served = inp.requests.filter(|&n| n > 0)?;
    let per_request = inp.workers.iter().map(|w| w.accepts).sum::<u64>() as f64 / served as f64;
    let cfg = &inp.served_config()?;
    // Not vouched for when part of the configuration was not read.
    let requests = cfg
        .value("keepalive_requests")
        .filter(|v| !v.unread_may_set)?;
    let timeout = cfg
        .value("keepalive_timeout")
        .filter(|v| !v.unread_may_set)?;
    let on = keepalive_timeout_zero(Some(cfg)).is_none()
        && value_seconds(timeout).is_some_and(|s| s > 0.0);
    let many = requests.value.parse::<u64>().is_ok_and(|n| n > 1);
    (on && many && per_request >= 0.9).then(|| {
        format!(
            "keepalive_timeout {} keeps keepalive on and keepalive_requests {} is above the 1 request per connection seen",
            timeout.quoted(),
            requests.quoted()
        )
    })
}

/// who_closed's sentence when the clients closed most connections first, with the
/// idle time before their closes where measured.
fn clients_closed(inp: &Inputs, head: &str) -> String {
    let tls = if inp.tls.as_ref().is_some_and(|t| t.handshakes > 0) {
        " (on TLS, a client that answered nginx's close_notify before nginx's own close() also counts as closing first: who started the close is then not told apart)"
    } else {
        ""
    };
    let closes = closes(inp);
    let idle = match closes.as_ref().and_then(|t| t.idle_before_client_close.as_ref()) {
        Some(i) if i.p99_ms < CLOSE_AFTER_RESPONSE_MS => format!(
            ", right after an exchange (idle before their close p50 {}, p99 {}: they close once their response is in)",
            fmt_ms(i.p50_ms as f64),
            fmt_ms(i.p99_ms as f64)
        ),
        Some(i) => format!(
            " after they sat idle p50 {}, p99 {} (since the last data, read at their FIN)",
            fmt_ms(i.p50_ms as f64),
            fmt_ms(i.p99_ms as f64)
        ),
        None => String::new(),
    };
    format!("{head}: the clients close their connections{idle}{tls}: a load balancer or proxy in front without keepalive to nginx, or clients that close after one request; check the load balancer's keepalive to nginx and the clients' Connection header")
}

/// The ports where nginx closed connections first in the period.
fn nginx_close_ports(inp: &Inputs) -> Vec<u16> {
    inp.connections
        .as_ref()
        .map(|c| {
            c.ports
                .iter()
                .filter(|p| p.closed_by_nginx > 0)
                .map(|p| p.port)
                .collect()
        })
        .unwrap_or_default()
}

/// Why nginx closed connections pinned at `pinned` ms, for `who_closed`: the timeout
/// whose configured value matches ([`match_timeout`]), or unknown and why. "Idle" only
/// for `keepalive_timeout` (a connection between requests).
fn closed_at(inp: &Inputs, pinned: f64) -> String {
    let m = match_timeout(inp, &nginx_close_ports(inp), pinned);
    let at = fmt_ms(pinned);
    if m.keepalive_only() && !m.request_timed_out() {
        return format!(
            "nginx closed them after they sat idle {at}, the value of {}: clients that come back later must reconnect",
            m.named()
        );
    }
    let logs = m.logs_say();
    match &m.unknown {
        Some(why) => format!("nginx closed them {at} after the last data; which timeout is unknown: {why}{logs}"),
        None if m.matched.is_empty() => format!(
            "nginx closed them {at} after the last data, and no configured timeout of nginx matches that ({}): why is unknown{logs}",
            m.considered.join("; ")
        ),
        None => format!("nginx closed them {at} after the last data, the value of {}{logs}", m.named()),
    }
}

/// `keepalive_timeout_closes` and `nginx_timeout_closes`: at least
/// [`KA_TIMEOUT_MIN_CLOSES`] closes by nginx's serving workers, at least
/// [`KA_TIMEOUT_NGINX_SHARE`] of all first closes but the draining workers' (a
/// reload's closes, not in the idle times), their idle time pinned (every close since attach within 10% of
/// one value) at [`KA_TIMEOUT_MIN_IDLE_MS`] or more, and new connections in the period
/// (the clients come back). The pinned time is matched against the configured
/// timeouts in force on the ports ([`match_timeout`]): `keepalive_timeout_closes` when
/// `keepalive_timeout` alone matches; else `nginx_timeout_closes`, naming the
/// timeout(s) that match, or saying none matches or the configuration was not read
/// (unknown). Warning.
pub fn keepalive_timeout_closes(inp: &Inputs, out: &mut Vec<Verdict>) {
    // Every close, those of connections that carried no byte included: nginx closes
    // those at client_header_timeout, a timeout like any other here (trial 7).
    let Some(t) = inp
        .connections
        .as_ref()
        .map(|c| c.total())
        .filter(|t| all_closes(t) > 0)
    else {
        return;
    };
    let all = all_closes(&t);
    let Some(idle) = t.idle_before_nginx_close.as_ref() else {
        return;
    };
    let Some(pinned) = idle.pinned_ms.filter(|&v| v >= KA_TIMEOUT_MIN_IDLE_MS) else {
        return;
    };
    // The serving workers' closes: a draining worker's are not in the idle times.
    let serving = t.closed_by_nginx.saturating_sub(t.closed_while_draining);
    if serving < KA_TIMEOUT_MIN_CLOSES
        || (serving as f64) < KA_TIMEOUT_NGINX_SHARE * (all - t.closed_while_draining) as f64
        || t.established == 0
    {
        return;
    }
    let m = match_timeout(inp, &nginx_close_ports(inp), pinned);
    let mut evidence = BTreeMap::new();
    evidence.insert("closed_by_nginx", serde_json::json!(t.closed_by_nginx));
    evidence.insert(
        "closed_by_draining_workers",
        serde_json::json!(t.closed_while_draining),
    );
    evidence.insert("closed_by_client", serde_json::json!(t.closed_by_client));
    evidence.insert("closed_by_reset", serde_json::json!(t.closed_by_reset));
    evidence.insert(
        "closed_by_worker_exit",
        serde_json::json!(t.closed_by_worker_exit),
    );
    evidence.insert(
        "idle_after_nginx_wrote",
        serde_json::json!(idle.after_nginx_wrote),
    );
    evidence.insert("connections_established", serde_json::json!(t.established));
    evidence.insert("idle_before_close_pinned_ms", serde_json::json!(pinned));
    evidence.insert(
        "idle_before_close_min_ms_since_attach",
        serde_json::json!(idle.min_ms_since_attach),
    );
    evidence.insert(
        "idle_before_close_max_ms_since_attach",
        serde_json::json!(idle.max_ms_since_attach),
    );
    evidence.insert("timeout_match", m.evidence());
    evidence.insert(
        "source",
        serde_json::json!("tracepoint sock:inet_sock_set_state ESTABLISHED -> FIN_WAIT1 on nginx's ports (a TLS close nginx began: read at its uprobe ngx_ssl_shutdown, before the close_notify, and counted as nginx's even when the client's FIN came first); idle = now - last data sent or received (tcp_sock.lsndtime, icsk_ack.lrcvtime), or now - the client's last data when nginx sent data in the close's last jiffy (an HTTP/2 GOAWAY; a TLS close_notify where the uprobe is not attached)"),
    );
    let head = |when: String| {
        format!(
            "nginx closed {serving} of {all} connections itself {when}, and {} new connections came in the period",
            t.established
        )
    };
    let heads = [
        head(format!("after they sat idle {}", fmt_ms(pinned))),
        head(format!(
            "{} after the last data sent or received",
            fmt_ms(pinned)
        )),
    ];
    out.push(timeout_verdict(&m, &heads, evidence));
}

/// The verdict of nginx's closes at a pinned time, by what the time matches; `idle`
/// and `head` open the advice, said as idle (keepalive) or after the last data.
fn timeout_verdict(
    m: &TimeoutMatch,
    [idle, head]: &[String; 2],
    evidence: BTreeMap<&str, serde_json::Value>,
) -> Verdict {
    let logs = m.logs_say();
    if m.keepalive_only() && !m.request_timed_out() {
        let advice = format!(
            "{idle}: that is {}, the time nginx keeps an idle connection between requests: clients or a load balancer in front that keep idle connections longer than that find them closed and must reconnect (or fail a request sent as nginx closed); set keepalive_timeout above the idle timeout of what is in front of nginx",
            m.named()
        );
        return Verdict::new(
            "keepalive_timeout_closes",
            Severity::Warning,
            evidence,
            &["keepalive_timeout"],
            advice,
        );
    }
    let (directives, advice): (Vec<&str>, String) = match &m.unknown {
        Some(why) => (
            CLOSE_TIMEOUTS.to_vec(),
            format!("{head}; which of nginx's timeouts closed them is unknown: {why}{logs}"),
        ),
        None if m.matched.is_empty() => (
            CLOSE_TIMEOUTS.to_vec(),
            format!(
                "{head}; no configured timeout of nginx matches that ({}; {}): why nginx closed them is unknown{logs}",
                m.considered.join("; "),
                m.tolerance
            ),
        ),
        None => (
            m.matched.iter().map(|(d, _)| *d).collect(),
            format!(
                "{head}: that is {}{logs}; {}",
                m.named(),
                remedy(m)
            ),
        ),
    };
    Verdict::new(
        "nginx_timeout_closes",
        Severity::Warning,
        evidence,
        &directives,
        advice,
    )
}

/// What to check for the timeouts matched.
fn remedy(m: &TimeoutMatch) -> &'static str {
    if m.matched.iter().any(|(d, _)| REQUEST_TIMEOUTS.contains(d)) {
        "clients that send their request or read the response slower than that (slow or stalled clients, a probe that connects and sends nothing, a slow-request attack) are cut off there; raise the timeout only if those clients are legitimate"
    } else {
        "check which clients wait that long on nginx"
    }
}

/// `listener_closed_resets`: nginx closed listening sockets in the period (LISTEN ->
/// CLOSE on its ports: a reload that dropped `reuseport` sockets, fewer workers, a
/// removed `listen`) and the kernel reset connections still queued on them (resets the
/// closing task sent before the listener was destroyed: tracepoint `tcp:tcp_send_reset`).
/// Fires on one such reset; critical from [`CLOSED_LISTENER_RESETS_CRITICAL`]. Names
/// `net.ipv4.tcp_migrate_req` as read in nginx's network namespace.
pub fn listener_closed_resets(inp: &Inputs, out: &mut Vec<Verdict>) {
    let Some(c) = inp.connections.as_ref() else {
        return;
    };
    let t = c.total();
    if t.resets_of_closed_listener_queue == 0 {
        return;
    }
    let n = t.resets_of_closed_listener_queue;
    let ports: BTreeMap<String, serde_json::Value> = c
        .ports
        .iter()
        .filter(|p| p.listeners_closed > 0 || p.resets_of_closed_listener_queue > 0)
        .map(|p| {
            (
                p.port.to_string(),
                serde_json::json!({
                    "listeners_closed": p.listeners_closed,
                    "resets_of_closed_listener_queue": p.resets_of_closed_listener_queue,
                }),
            )
        })
        .collect();
    let migrate = inp.local_ports.as_ref().and_then(|l| l.tcp_migrate_req);
    let mut evidence = BTreeMap::new();
    evidence.insert("resets_of_closed_listener_queue", serde_json::json!(n));
    evidence.insert("listeners_closed", serde_json::json!(t.listeners_closed));
    evidence.insert("ports", serde_json::json!(ports));
    evidence.insert("tcp_migrate_req", serde_json::json!(migrate));
    // Each close with the reload it followed (`model::listener_closes`), bounded.
    evidence.insert("events", serde_json::json!(c.listener_closes));
    if let Some(m) = &c.listener_closes_merged {
        evidence.insert("events_merged", serde_json::json!(m));
    }
    evidence.insert(
        "source",
        serde_json::json!("tracepoints sock:inet_sock_set_state (LISTEN -> CLOSE on nginx's ports) and tcp:tcp_send_reset (sent by the task closing the listener, before it was destroyed); net.ipv4.tcp_migrate_req read in nginx's network namespace"),
    );
    let remedy = match migrate {
        Some(0) => "net.ipv4.tcp_migrate_req is 0 in nginx's network namespace (the default): set it to 1 so the kernel moves a closing reuseport socket's queued connections to another socket of its group, or keep worker_processes (and each reuseport listen) the same across reloads".to_string(),
        Some(m) => format!("net.ipv4.tcp_migrate_req is {m} in nginx's network namespace, yet connections were reset: migration needs another open socket in the reuseport group (a listen removed or changed has none); keep each reuseport listen the same across reloads"),
        None => format!("net.ipv4.tcp_migrate_req could not be read in nginx's network namespace ({}): with it at 1 the kernel moves a closing reuseport socket's queued connections to another socket of its group; or keep worker_processes (and each reuseport listen) the same across reloads", if inp.master_exited { "the master had exited, and its namespace with it" } else { "Linux 5.14+ has it" }),
    };
    let head = format!(
        "nginx closed {} listening socket(s) in the period and the kernel reset the {n} connection(s) queued on them{}: those clients got `connection reset` without a response",
        t.listeners_closed,
        per_reload(&c.listener_closes)
    );
    // Trial 14: `nginx -s stop` and `quit` close every listener, and the kernel resets
    // what is queued on them: nginx's shutdown, not a reload's reuseport sockets.
    let (severity, directives, advice): (_, &[&str], _) = if inp.master_exited {
        (
            Severity::Warning,
            &[],
            format!("{head}. The run ended with the master's exit (nginx -s stop or quit, a binary upgrade's old master, a crash): it closes every listener as it goes, so these include its shutdown's; closes before it (a reload) are in the events with the reload they followed"),
        )
    } else {
        (
            if n >= CLOSED_LISTENER_RESETS_CRITICAL {
                Severity::Critical
            } else {
                Severity::Warning
            },
            &["listen ... reuseport", "worker_processes"],
            format!("{head} (with `reuseport` each worker has its own socket, and a reload to fewer workers or changed listens closes the old ones with their accept queues); {remedy}"),
        )
    };
    out.push(Verdict::new(
        "listener_closed_resets",
        severity,
        evidence,
        directives,
        advice,
    ));
}

/// " (after reload 1 (generation 1), port 80: 4 reset; ...)": the resets of each listed
/// close with the reload it followed ([`ListenerClose::after_reload`]); empty without
/// events.
fn per_reload(events: &[ListenerClose]) -> String {
    if events.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = events
        .iter()
        .map(|e| {
            format!(
                "{}, port {}: {} reset",
                e.after_reload(),
                e.port,
                e.resets_of_queued_connections
            )
        })
        .collect();
    format!(" ({})", parts.join("; "))
}

#[cfg(test)]
#[path = "conn_verdicts_tests.rs"]
mod tests;
