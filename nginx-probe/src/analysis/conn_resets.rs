//! `nginx_reset_connections`: nginx's serving workers ended client connections with a
//! reset of their own, and the kernel says why: `SO_LINGER` 0 (`tcp_close()` then
//! `tcp_disconnect()`, reason `TCP_STATE`: what `reset_timedout_connection on` sets on
//! a connection that timed out), with nginx's `client timed out` lines and the
//! configured timeouts beside it.

use std::collections::BTreeMap;

use crate::{
    analysis::inputs::{log_count, Inputs},
    model::{connections::PortLifecycle, Severity, Verdict},
};

/// The kernel's reason for a reset sent by a `close()` with `SO_LINGER` 0 and no data
/// unread: `tcp_close()` calls `tcp_disconnect()`, which resets with
/// `SK_RST_REASON_TCP_STATE` (`sk_rst_reason`, Linux 6.10+; named from the tracepoint's
/// format file; 6.18 checked). Not `TCP_ABORT_ON_LINGER`, which is a `FIN_WAIT2`
/// socket's with a negative `SO_LINGER2`.
pub const LINGER_ZERO: &str = "TCP_STATE";
/// The kernel's reason for a reset sent by a `close()` with data unread.
pub const ABORT_ON_CLOSE: &str = "TCP_ABORT_ON_CLOSE";

/// The kernel's reasons for a reset answering a client's data that came after nginx
/// closed: on a closed (orphaned) socket with data arriving (`TCP_ABORT_ON_DATA`), or
/// at a socket in TIME-WAIT (`TCP_TIMEWAIT_SOCKET`): each is a request (or the rest
/// of one) its client sent on a connection nginx had already closed.
pub const AFTER_CLOSE: &[&str] = &["TCP_ABORT_ON_DATA", "TCP_TIMEWAIT_SOCKET"];

/// Fewest such resets that make `requests_after_close` fire.
pub const AFTER_CLOSE_MIN: u64 = 3;

/// `requests_after_close` (warning): nginx's sockets sent at least [`AFTER_CLOSE_MIN`]
/// resets for data that came after nginx closed the connection (tracepoint
/// `tcp:tcp_send_reset`, reasons [`AFTER_CLOSE`]), less those answering a TLS alert's
/// size on a TLS port (`PortLifecycle::resets_after_close_alert_sized`: a client's
/// close_notify answering nginx's; wrk over HTTPS at `keepalive_requests 10` made
/// 2055 of 2067, none a request): a client sent a request on a
/// keepalive connection nginx had just closed, and got a reset instead of a response
/// (an error unless it retried: nginx never saw the request, so no access-log line and
/// no 5xx count it). Says what closed those connections as measured: the draining
/// workers' sweep of idle connections at a reload, or nginx's idle closes at a pinned
/// time (keepalive_timeout). Trial 11: 8 and 11 requests failed at reloads and 24 at
/// `keepalive_timeout 5s`, with the resets counted exactly and no verdict. Counts with
/// them, said apart, the requests a draining worker's `close()` found unread
/// (`PortLifecycle::closed_while_draining_reset`: the kernel's reset,
/// `TCP_ABORT_ON_CLOSE`; trial 12: 19 cut by a reload under wrk, no verdict).
pub fn requests_after_close(inp: &Inputs, out: &mut Vec<Verdict>) {
    let Some(c) = inp.connections.as_ref() else {
        return;
    };
    let t = c.total();
    let by: Vec<(&str, u64)> = AFTER_CLOSE
        .iter()
        .map(|r| (*r, t.resets_sent_by_reason.get(*r).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect();
    let all: u64 = by.iter().map(|(_, n)| n).sum();
    let (alerts, tls_known) = alert_sized_on_tls(inp, &c.ports);
    let after = all.saturating_sub(alerts);
    // Requests a draining worker's close() found unread: the kernel resets them
    // (trial 12: a reload under wrk cut 19, wrk's 19 read errors, no verdict).
    let cut = t.closed_while_draining_reset;
    let n = after + cut;
    if n < AFTER_CLOSE_MIN {
        return;
    }
    let by_drain = drain_cuts(inp, cut);
    let evidence = after_close_evidence([after, cut, alerts], &by, &t, &by_drain);
    let reasons: Vec<String> = by.iter().map(|(r, n)| format!("{r} {n}")).collect();
    let left_out = match (alerts, tls_known) {
        (0, _) => String::new(),
        (a, true) => format!(", less {a} answering a segment of 31 bytes or fewer on a TLS port: a TLS alert's size, a client's close_notify answering nginx's, no request"),
        (a, false) => format!(", less {a} answering a segment of 31 bytes or fewer: a TLS alert's size, and whether their port serves TLS is unknown (the configuration was not read)"),
    };
    // Trial 20: one ~300-word sentence. Now the head (what the clients got), one
    // sentence per kind with its source and cause, then the remedy.
    let idle = t.closed_while_draining_idle;
    let mut said = Vec::new();
    // A head (what ended under the clients) when there is more than one kind; each
    // kind is then labelled.
    let head = match (after, cut) {
        // Trial 14: a reload under wrk, 74 idle connections closed by the draining
        // workers and 23 requests cut, wrk's 97 errors: what ended under the clients
        // first.
        (_, c) if idle > 0 && c > 0 => Some(format!("draining workers (a reload, a QUIT, a binary upgrade) ended {} client connections under their clients: {idle} idle ones closed in their sweep (an error for a client that sends on one as it closes, unless it retries) and {c} with a request unread", idle + c)),
        // Trial 13: a reload under wrk, 2 + 5 said apart, wrk's 7 errors: the total
        // first.
        (a, c) if a > 0 && c > 0 => Some(format!("{n} requests reached connections nginx had closed or was closing")),
        _ => None,
    };
    let label = |l: &str| {
        if head.is_some() {
            l.to_string()
        } else {
            String::new()
        }
    };
    said.extend(head.clone());
    if after > 0 {
        said.push(format!(
            "{}nginx's sockets answered {after} times with a reset a client's data that came after nginx had closed the connection ({}{left_out}; tracepoint tcp:tcp_send_reset); {}",
            label("After close: "),
            reasons.join(", "),
            closes_in_period(inp, &t, out)
        ));
    }
    if cut > 0 {
        said.push(format!(
            "{}draining workers' close() found {cut} requests unread, which the kernel answers with a reset (TCP_ABORT_ON_CLOSE; closed_while_draining_reset): {}",
            label("While draining: "),
            said_drains(&by_drain)
        ));
    }
    said.push("Each such request fails for its client unless the client retries it, and nginx never reads it (no access-log line, no 5xx); so does the rest of a request body sent after nginx answered early (a 413, a redirect) and closed".to_string());
    said.push("Remedy: clients that reuse idle connections should retry an idempotent request that fails that way (no nginx directive avoids a reload's or a stop's closes), and close idle connections before nginx's keepalive_timeout does".to_string());
    out.push(Verdict::new(
        "requests_after_close",
        Severity::Warning,
        evidence,
        // Trial 17: the directives line was empty; the remedy's timer is nginx's
        // keepalive_timeout (a reload's sweep has no directive: clients retry).
        &super::worker_connections::and_worker_connections(inp, &["keepalive_timeout"])[..],
        said.join(". "),
    ));
}

/// requests_after_close's evidence: `[after, cut, alerts]` (the resets after close
/// counted, the requests draining workers cut, the alert-sized resets left out), the
/// resets by reason, the ports' total `t`, and the cuts by drain ([`drain_cuts`]).
fn after_close_evidence(
    [after, cut, alerts]: [u64; 3],
    by: &[(&str, u64)],
    t: &PortLifecycle,
    by_drain: &[(Drain, u64)],
) -> BTreeMap<&'static str, serde_json::Value> {
    let mut evidence = BTreeMap::new();
    evidence.insert("resets_after_close", serde_json::json!(after));
    evidence.insert("draining_resets", serde_json::json!(cut));
    evidence.insert("alert_sized_left_out", serde_json::json!(alerts));
    evidence.insert(
        "by_reason",
        serde_json::json!(by
            .iter()
            .map(|(r, n)| (r.to_string(), *n))
            .collect::<BTreeMap<_, _>>()),
    );
    evidence.insert(
        "draining_idle_closes",
        serde_json::json!(t.closed_while_draining_idle),
    );
    evidence.insert(
        "source",
        serde_json::json!("tracepoint tcp:tcp_send_reset on nginx's client sockets (the kernel's reason; alert_sized_left_out: the answered segment's payload, sk_buff.len less the TCP header, 1 to 31 bytes, on a port the configuration serves TLS on or any when it was not read), sock:inet_sock_set_state for the closes (draining_resets: ESTABLISHED -> CLOSE in the close() of a worker past its ngx_close_idle_connections uprobe)"),
    );
    if !by_drain.is_empty() {
        evidence.insert(
            "draining_resets_by_drain",
            serde_json::json!(by_drain
                .iter()
                .map(|(d, n)| (d.label(), *n))
                .collect::<BTreeMap<_, _>>()),
        );
    }
    evidence
}

/// What drained a worker that cut requests, from its generation and state at the end
/// (see [`drain_cuts`]); each variant's generation is the worker's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Drain {
    /// Already shutting down at attach: a reload before attach.
    BeforeAttach(u32),
    /// Older than the newest generation: the reload that started the next one.
    Reload(u32),
    /// The newest generation, none of it serving at the end: nginx stopped.
    Stop(u32),
    /// The newest generation, others of it still serving: a signal to that worker.
    Alone(u32),
    /// No worker holds the count, or the state is unknown.
    Unknown,
}

impl Drain {
    /// The generation to order by (unknown last).
    fn generation(self) -> u32 {
        match self {
            Drain::BeforeAttach(g) | Drain::Reload(g) | Drain::Stop(g) | Drain::Alone(g) => g,
            Drain::Unknown => u32::MAX,
        }
    }

    /// The evidence key (`draining_resets_by_drain`).
    fn label(self) -> String {
        match self {
            Drain::BeforeAttach(g) => format!("a reload before attach (generation {g}'s workers, draining at attach)"),
            Drain::Reload(g) => format!("the reload that started generation {} (generation {g}'s workers)", g + 1),
            Drain::Stop(g) => format!("nginx stopped (generation {g}'s workers, the newest, none serving at the end: a QUIT or stop, or a binary upgrade's old master shutting its workers down)"),
            Drain::Alone(g) => format!("a signal to the worker alone (generation {g}, the newest, whose other workers still serve: not a reload nor a stop)"),
            Drain::Unknown => "workers of no known generation".to_string(),
        }
    }

    /// `n` put on this drain in words: "19 at the reload ...", "4 as nginx stopped
    /// ...", "5 by a signal ...".
    fn said(self, n: u64) -> String {
        let by = match self {
            Drain::BeforeAttach(_) | Drain::Reload(_) => "at",
            Drain::Stop(_) => "as",
            Drain::Alone(_) | Drain::Unknown => "by",
        };
        format!("{n} {by} {}", self.label())
    }
}

/// The requests draining workers cut (`cut` in all, the ports' count), by what drained
/// their workers, from each worker's `reset_while_draining`, reload generation and
/// state: a worker older than the newest generation drained at the reload that
/// started the next one; one of the newest generation drained as nginx stopped (a
/// QUIT or stop, or a binary upgrade's old master shutting its workers down) when
/// none of that generation serves at the end, else it was told to shut down alone
/// (a signal to that worker: the master starts another in its place); one already
/// shutting down at attach, at a reload before attach. What no worker holds (merged
/// exited workers), or a newest worker beside others of unknown state, is
/// [`Drain::Unknown`]'s. Ordered by generation. Empty when no worker counted any
/// (recordings made before the per-worker count). Newcomer trial 18: a reload's cuts
/// and a stop's were said together.
fn drain_cuts(inp: &Inputs, cut: u64) -> Vec<(Drain, u64)> {
    let newest = inp.workers.iter().filter_map(|w| w.reload_generation).max();
    // Whether a worker of the newest generation serves at the end (None: unknown).
    let newest_serving = newest.and_then(|n| {
        let of_newest = inp
            .workers
            .iter()
            .filter(|w| w.reload_generation == Some(n));
        let states: Option<Vec<bool>> = of_newest.map(|w| w.serving).collect();
        states.map(|s| s.contains(&true))
    });
    let mut by: BTreeMap<(u32, Drain), u64> = BTreeMap::new();
    for w in inp.workers.iter().filter(|w| w.reset_while_draining > 0) {
        let drain = match (w.reload_generation, newest) {
            (Some(g), _) if w.draining_at_attach => Drain::BeforeAttach(g),
            (Some(g), Some(n)) if g < n => Drain::Reload(g),
            (Some(g), _) if newest_serving == Some(false) => Drain::Stop(g),
            (Some(g), _) if newest_serving == Some(true) => Drain::Alone(g),
            _ => Drain::Unknown,
        };
        *by.entry((drain.generation(), drain)).or_default() += w.reset_while_draining;
    }
    let attributed: u64 = by.values().sum();
    if attributed == 0 {
        return Vec::new();
    }
    if cut > attributed {
        *by.entry((u32::MAX, Drain::Unknown)).or_default() += cut - attributed;
    }
    by.into_iter().map(|((_, d), n)| (d, n)).collect()
}

/// What drained the workers that cut requests, for the verdict's words: the counts
/// of [`drain_cuts`] ("by what shut their workers down: 19 at the reload that started
/// generation 1 (...), 4 as nginx stopped (...)"), or the candidates when not
/// counted per worker.
fn said_drains(by: &[(Drain, u64)]) -> String {
    if by.is_empty() {
        return "what shut their workers down (a reload, a QUIT or a binary upgrade) is not counted per worker here".to_string();
    }
    let parts: Vec<String> = by.iter().map(|(d, n)| d.said(*n)).collect();
    format!(
        "by what shut their workers down: {} (per worker, tracepoint sock:inet_sock_set_state in a draining worker's close())",
        parts.join(", ")
    )
}

/// What closed connections in the period, as measured, for `requests_after_close`:
/// the draining workers' idle sweep, nginx's closes at a pinned keepalive_timeout
/// (`keepalive_timeout_closes` in `out`); which close each reset followed is not
/// measured.
fn closes_in_period(inp: &Inputs, t: &PortLifecycle, out: &[Verdict]) -> String {
    // What closed connections in the period, as measured; which close each reset
    // followed is not (review: a 413 answered before its body, a keepalive_requests
    // close, another timeout's close draw the same resets).
    let mut closes = Vec::new();
    if t.closed_while_draining_idle > 0 {
        closes.push(format!(
            "draining workers closed {} idle keepalive connections under their clients (a reload, a QUIT or a binary upgrade: nginx closes its idle connections as it shuts a worker down)",
            t.closed_while_draining_idle
        ));
    }
    if let Some(reached) = super::worker_connections::worker_connections_reached(inp) {
        closes.push(reached);
    }
    if out.iter().any(|v| v.id == "keepalive_timeout_closes") {
        // The pinned idle time from the model, not from another verdict's evidence.
        let at = t.idle_before_nginx_close.as_ref().and_then(|i| i.pinned_ms);
        closes.push(match at {
            Some(ms) => format!("nginx closed idle connections at keepalive_timeout ({:.1} s: keepalive_timeout_closes)", ms / 1000.0),
            None => "nginx closed idle connections at keepalive_timeout (keepalive_timeout_closes)".to_string(),
        });
    }
    if closes.is_empty() {
        "what closed those connections is not measured".to_string()
    } else {
        format!(
            "in the period {}; which close each reset followed is not measured",
            closes.join(", and ")
        )
    }
}

/// The resets after close that answered a segment of a TLS alert's size (at most 31
/// bytes) on the ports serving TLS (`listen ... ssl`), or on every port when the
/// configuration was not read (a client's close_notify cannot be told from a short
/// request there: left out rather than taken for a request); and whether the ports'
/// TLS was known.
fn alert_sized_on_tls(inp: &Inputs, ports: &[PortLifecycle]) -> (u64, bool) {
    let tls = inp.config.as_ref().and_then(|k| k.tls_ports());
    let n = ports
        .iter()
        .filter(|p| tls.as_ref().is_none_or(|t| t.contains(&p.port)))
        .map(|p| p.resets_after_close_alert_sized)
        .sum();
    (n, tls.is_some())
}

/// Where the configuration read sets `reset_timedout_connection on` (`scope (file:line)`)
/// and the request timeouts it sets (`directive value in scope`); empty when not read.
fn reset_settings(cfg: Option<&crate::model::config::ConfigReport>) -> (Vec<String>, Vec<String>) {
    let Some(k) = cfg else {
        return (Vec::new(), Vec::new());
    };
    let on = k
        .everywhere("reset_timedout_connection")
        .filter(|v| v.value == "on")
        .map(|v| format!("{} ({})", v.scope, v.at))
        .collect();
    let timeouts = [
        "send_timeout",
        "client_body_timeout",
        "client_header_timeout",
    ]
    .iter()
    .flat_map(|d| k.everywhere(d))
    .map(|v| format!("{} {} in {}", v.directive, v.quoted(), v.scope))
    .collect();
    (on, timeouts)
}

/// `nginx_reset_connections` (warning): nginx's serving workers reset client
/// connections themselves (`closed_by_nginx_reset` less the draining workers': a
/// worker's `close()` taking `ESTABLISHED -> CLOSE` with no reset received) and the
/// kernel sent resets for `SO_LINGER` 0 on the same ports (`tcp:tcp_send_reset` reason
/// [`LINGER_ZERO`]). Names `reset_timedout_connection` (its `file:line` when
/// the configuration sets it on) and the timeouts it acts on, with nginx's
/// `client timed out` lines (logged at `info`). Silent without [`LINGER_ZERO`] resets:
/// a reset for data unread is not a timeout's.
pub fn nginx_reset_connections(inp: &Inputs, out: &mut Vec<Verdict>) {
    let Some(c) = inp.connections.as_ref() else {
        return;
    };
    let t = c.total();
    // The connections queued on a listener nginx closed are reset in its close() too,
    // with the same reason as SO_LINGER 0 (TCP_STATE): listener_closed_resets says
    // them (trial 14: 22 at `nginx -s quit`, taken for SO_LINGER 0).
    let queued = t.resets_of_closed_listener_queue;
    let serving = t
        .closed_by_nginx_reset
        .saturating_sub(t.closed_while_draining_reset)
        .saturating_sub(queued);
    let reason = |r: &str| t.resets_sent_by_reason.get(r).copied().unwrap_or(0);
    let (linger, unread) = (
        reason(LINGER_ZERO).saturating_sub(queued),
        reason(ABORT_ON_CLOSE),
    );
    if serving == 0 || linger == 0 {
        return;
    }
    let timed_out = log_count(inp, "client_timed_out");
    let log_read = inp.nginx_errors.as_ref().is_some_and(|e| e.readable);
    let cfg = inp.config.as_ref().filter(|k| k.is_read());
    let (on, timeouts) = reset_settings(cfg);
    let mut evidence = BTreeMap::new();
    evidence.insert("nginx_resets_serving", serde_json::json!(serving));
    evidence.insert("resets_sent_linger_zero", serde_json::json!(linger));
    evidence.insert("resets_sent_abort_on_close", serde_json::json!(unread));
    evidence.insert("client_timed_out_lines", serde_json::json!(timed_out));
    evidence.insert("reset_timedout_connection_on", serde_json::json!(on));
    evidence.insert(
        "source",
        serde_json::json!("tracepoints sock:inet_sock_set_state (ESTABLISHED -> CLOSE in a worker's close(), no reset received) and tcp:tcp_send_reset (its reason, per port: TCP_STATE for a close() with SO_LINGER 0; draining workers' resets included); nginx's error log (class client_timed_out, logged at info); the configuration (file:line)"),
    );
    let why = if on.is_empty() {
        match cfg {
            Some(_) => "the configuration read does not set reset_timedout_connection on: what set SO_LINGER 0 is unknown".to_string(),
            None => "the configuration was not read: reset_timedout_connection is unknown".to_string(),
        }
    } else {
        format!(
            "that is reset_timedout_connection on ({}), which resets a connection that timed out instead of closing it",
            on.join(", ")
        )
    };
    let lines = if !log_read {
        "nginx's error log was not read".to_string()
    } else if timed_out == 0 {
        "nginx's error log has no `client timed out` line (logged at info: an error_log level above info drops them)".to_string()
    } else {
        format!("nginx's error log has {timed_out} `client timed out` lines (the request or response phase each names)")
    };
    out.push(Verdict::new(
        "nginx_reset_connections",
        Severity::Warning,
        evidence,
        &["reset_timedout_connection", "send_timeout"],
        format!(
            "nginx's serving workers reset {serving} client connections themselves, and the kernel sent {linger} resets for SO_LINGER 0 (reason TCP_STATE: a close() with SO_LINGER 0) on the same ports: {why}; {lines}. At send_timeout the client had stopped reading a response: it got part of it, then a reset, while the access log keeps the status nginx meant to send; timeouts in force: {}",
            if timeouts.is_empty() { "unknown".to_string() } else { timeouts.join(", ") }
        ),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{analysis::inputs::WorkerInput, model::connections::ConnectionsReport};

    fn inputs(nginx_resets: u64, reasons: &[(&str, u64)]) -> Inputs {
        Inputs {
            connections: Some(ConnectionsReport {
                ports: vec![PortLifecycle {
                    port: 80,
                    closed_by_reset: nginx_resets,
                    closed_by_nginx_reset: nginx_resets,
                    resets_sent_by_reason: reasons
                        .iter()
                        .map(|(k, v)| (k.to_string(), *v))
                        .collect(),
                    ..PortLifecycle::default()
                }],
                ..ConnectionsReport::default()
            }),
            ..Inputs::default()
        }
    }

    /// The kernel's reason for a SO_LINGER 0 close fires it (checked on 6.18: a
    /// reset_timedout_connection close is reason TCP_STATE); resets for data unread
    /// alone do not.
    #[test]
    fn linger_zero_resets_fire_it_and_unread_data_alone_does_not() {
        let mut out = Vec::new();
        nginx_reset_connections(&inputs(4, &[("TCP_STATE", 4)]), &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].evidence["resets_sent_linger_zero"], 4);
        assert!(
            out[0].advice.starts_with("nginx's serving workers reset 4 client connections themselves, and the kernel sent 4 resets for SO_LINGER 0"),
            "{}",
            out[0].advice
        );
        let mut out = Vec::new();
        nginx_reset_connections(&inputs(4, &[("TCP_ABORT_ON_CLOSE", 4)]), &mut out);
        assert!(out.is_empty(), "{out:?}");
        // Trial 14: `nginx -s quit` reset the 22 connections queued on its listeners,
        // with the reason TCP_STATE: those are listener_closed_resets', not SO_LINGER 0.
        let mut inp = inputs(22, &[("TCP_STATE", 22)]);
        inp.connections.as_mut().unwrap().ports[0].resets_of_closed_listener_queue = 22;
        let mut out = Vec::new();
        nginx_reset_connections(&inp, &mut out);
        assert!(out.is_empty(), "{out:?}");
    }

    /// Trial 12: a reload under wrk cut 19 requests, reset by the draining workers'
    /// close() (wrk's 19 read errors), with no verdict: now said, alone or beside
    /// resets after close.
    #[test]
    fn requests_a_draining_worker_cut_are_said() {
        let mut inp = inputs(19, &[("TCP_ABORT_ON_CLOSE", 19)]);
        inp.connections.as_mut().unwrap().ports[0].closed_while_draining_reset = 19;
        let mut out = Vec::new();
        requests_after_close(&inp, &mut out);
        assert_eq!(out[0].evidence["draining_resets"], 19);
        assert_eq!(out[0].evidence["resets_after_close"], 0);
        assert!(
            out[0].advice.starts_with("draining workers' close() found 19 requests unread, which the kernel answers with a reset (TCP_ABORT_ON_CLOSE; closed_while_draining_reset): what shut their workers down (a reload, a QUIT or a binary upgrade) is not counted per worker here. Each such request fails for its client unless the client retries it"),
            "{}",
            out[0].advice
        );
        assert!(!out[0].advice.contains("not measured"), "{}", out[0].advice);
        let mut inp = inputs(2, &[("TCP_ABORT_ON_DATA", 4)]);
        inp.connections.as_mut().unwrap().ports[0].closed_while_draining_reset = 2;
        let mut out = Vec::new();
        requests_after_close(&inp, &mut out);
        assert!(
            out[0].advice.contains("(TCP_ABORT_ON_DATA 4; tracepoint tcp:tcp_send_reset); what closed those connections is not measured. While draining: draining workers' close() found 2 requests unread"),
            "{}",
            out[0].advice
        );
        assert!(
            out[0].advice.starts_with("6 requests reached connections nginx had closed or was closing. After close: nginx's sockets answered 4 times"),
            "{}",
            out[0].advice
        );
        // Trial 14: a reload under wrk, 74 idle connections closed in the sweep and 23
        // requests cut: wrk's 97 errors said first.
        inp.connections.as_mut().unwrap().ports[0].closed_while_draining_idle = 74;
        inp.connections.as_mut().unwrap().ports[0].closed_while_draining_reset = 23;
        let mut out = Vec::new();
        requests_after_close(&inp, &mut out);
        assert!(
            out[0].advice.starts_with("draining workers (a reload, a QUIT, a binary upgrade) ended 97 client connections under their clients: 74 idle ones closed in their sweep (an error for a client that sends on one as it closes, unless it retries) and 23 with a request unread. After close: "),
            "{}",
            out[0].advice
        );
        let mut inp = inputs(2, &[]);
        inp.connections.as_mut().unwrap().ports[0].closed_while_draining_reset = 2;
        let mut out = Vec::new();
        requests_after_close(&inp, &mut out);
        assert!(out.is_empty(), "2 are below the floor: {out:?}");
    }

    /// Newcomer trial 18: a reload's cuts and a stop's were said together. Per worker:
    /// 19 by generation 0's workers (drained at the reload that started generation 1),
    /// 4 by generation 1's (the newest: nginx stopped), 2 no worker holds.
    #[test]
    fn a_reload_s_cuts_and_a_stop_s_are_said_apart() {
        let mut inp = inputs(25, &[("TCP_ABORT_ON_CLOSE", 25)]);
        inp.connections.as_mut().unwrap().ports[0].closed_while_draining_reset = 25;
        let worker = |pid, generation, cut| WorkerInput {
            pid,
            reload_generation: Some(generation),
            reset_while_draining: cut,
            serving: Some(false),
            ..WorkerInput::default()
        };
        inp.workers = vec![worker(1, 0, 19), worker(2, 1, 4), worker(3, 1, 0)];
        let mut out = Vec::new();
        requests_after_close(&inp, &mut out);
        assert_eq!(
            out[0].evidence["draining_resets_by_drain"],
            serde_json::json!({
                "the reload that started generation 1 (generation 0's workers)": 19,
                "nginx stopped (generation 1's workers, the newest, none serving at the end: a QUIT or stop, or a binary upgrade's old master shutting its workers down)": 4,
                "workers of no known generation": 2
            })
        );
        assert!(
            out[0].advice.starts_with("draining workers' close() found 25 requests unread, which the kernel answers with a reset (TCP_ABORT_ON_CLOSE; closed_while_draining_reset): by what shut their workers down: 19 at the reload that started generation 1 (generation 0's workers), 4 as nginx stopped (generation 1's workers, the newest, none serving at the end: a QUIT or stop, or a binary upgrade's old master shutting its workers down), 2 by workers of no known generation (per worker, tracepoint sock:inet_sock_set_state in a draining worker's close()). Each such request"),
            "{}",
            out[0].advice
        );
        // A worker told to quit alone (the master respawned it: its generation
        // serves on): not nginx's stop.
        let mut respawned = worker(3, 1, 0);
        respawned.serving = Some(true);
        inp.workers = vec![worker(2, 1, 25), respawned.clone()];
        let mut out = Vec::new();
        requests_after_close(&inp, &mut out);
        assert!(
            out[0].advice.contains("by what shut their workers down: 25 by a signal to the worker alone (generation 1, the newest, whose other workers still serve: not a reload nor a stop)"),
            "{}",
            out[0].advice
        );
        // Its state unknown: said unknown, never a stop.
        respawned.serving = None;
        inp.workers = vec![worker(2, 1, 25), respawned];
        let mut out = Vec::new();
        requests_after_close(&inp, &mut out);
        assert!(
            out[0]
                .advice
                .contains("25 by workers of no known generation"),
            "{}",
            out[0].advice
        );
        // A reload alone: no stop named.
        inp.workers = vec![worker(1, 0, 25), worker(2, 1, 0)];
        let mut out = Vec::new();
        requests_after_close(&inp, &mut out);
        assert!(
            !out[0].advice.contains("nginx stopped"),
            "{}",
            out[0].advice
        );
        assert!(
            out[0].advice.contains(
                "by what shut their workers down: 25 at the reload that started generation 1"
            ),
            "{}",
            out[0].advice
        );
    }

    /// wrk over HTTPS at keepalive_requests 10 (this machine): 2067 resets after close,
    /// 2055 for 31-byte segments (the clients' close_notify). On a port the
    /// configuration serves TLS on, or when it was not read, those are left out (12
    /// left: fires, saying so); on a plain port they count.
    #[test]
    fn tls_alert_sized_resets_are_no_requests_on_tls_ports() {
        let mut inp = inputs(
            0,
            &[("TCP_ABORT_ON_DATA", 2055), ("TCP_TIMEWAIT_SOCKET", 12)],
        );
        inp.connections.as_mut().unwrap().ports[0].resets_after_close_alert_sized = 2055;
        let listen = |ssl| crate::model::config::ListenValue {
            address: "80".into(),
            ssl,
            ..Default::default()
        };
        for (cfg, counted) in [
            (None, 12),
            (Some(listen(true)), 12),
            (Some(listen(false)), 2067),
        ] {
            inp.config = cfg.map(|l| crate::model::config::ConfigReport {
                listens: vec![l],
                ..Default::default()
            });
            let mut out = Vec::new();
            requests_after_close(&inp, &mut out);
            assert_eq!(out[0].evidence["resets_after_close"], counted, "{out:?}");
        }
        let mut out = Vec::new();
        inp.config = None;
        requests_after_close(&inp, &mut out);
        assert!(
            out[0].advice.contains("(TCP_ABORT_ON_DATA 2055, TCP_TIMEWAIT_SOCKET 12, less 2055 answering a segment of 31 bytes or fewer: a TLS alert's size, and whether their port serves TLS is unknown (the configuration was not read);"),
            "{}",
            out[0].advice
        );
        inp.connections.as_mut().unwrap().ports[0].resets_sent_by_reason =
            [("TCP_ABORT_ON_DATA".to_string(), 2057)].into();
        let mut out = Vec::new();
        requests_after_close(&inp, &mut out);
        assert!(out.is_empty(), "2 left: {out:?}");
    }

    /// Data after nginx's close, at a reload's sweep: fires from 3, says the sweep;
    /// 2 are below it; another reason is not one.
    #[test]
    fn resets_for_data_after_close_fire_and_name_the_draining_sweep() {
        let mut inp = inputs(0, &[("TCP_ABORT_ON_DATA", 8), ("TCP_TIMEWAIT_SOCKET", 1)]);
        inp.connections.as_mut().unwrap().ports[0].closed_while_draining_idle = 13;
        let mut out = Vec::new();
        requests_after_close(&inp, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].evidence["resets_after_close"], 9);
        assert!(
            out[0]
                .advice
                .contains("(TCP_ABORT_ON_DATA 8, TCP_TIMEWAIT_SOCKET 1;")
                && out[0].advice.contains(
                    "draining workers closed 13 idle keepalive connections under their clients"
                ),
            "{}",
            out[0].advice
        );
        let mut out = Vec::new();
        requests_after_close(
            &inputs(0, &[("TCP_ABORT_ON_DATA", 2), ("TCP_STATE", 9)]),
            &mut out,
        );
        assert!(out.is_empty(), "{out:?}");
    }
}
