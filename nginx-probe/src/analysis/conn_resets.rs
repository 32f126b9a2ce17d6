//! `nginx_reset_connections`: nginx's serving workers ended client connections with a
//! reset of their own, and the kernel says why: `SO_LINGER` 0 (`tcp_close()` then
//! `tcp_disconnect()`, reason `TCP_STATE`: what `reset_timedout_connection on` sets on
//! a connection that timed out), with nginx's `client timed out` lines and the
//! configured timeouts beside it.

use std::collections::BTreeMap;

use crate::{
    analysis::inputs::{log_count, Inputs},
    model::{Severity, Verdict},
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
/// `tcp:tcp_send_reset`, reasons [`AFTER_CLOSE`]): a client sent a request on a
/// keepalive connection nginx had just closed, and got a reset instead of a response
/// (an error unless it retried: nginx never saw the request, so no access-log line and
/// no 5xx count it). Says what closed those connections as measured: the draining
/// workers' sweep of idle connections at a reload, or nginx's idle closes at a pinned
/// time (keepalive_timeout). Trial 11: 8 and 11 requests failed at reloads and 24 at
/// `keepalive_timeout 5s`, with the resets counted exactly and no verdict.
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
    let n: u64 = by.iter().map(|(_, n)| n).sum();
    if n < AFTER_CLOSE_MIN {
        return;
    }
    let mut evidence = BTreeMap::new();
    evidence.insert("resets_after_close", serde_json::json!(n));
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
        serde_json::json!("tracepoint tcp:tcp_send_reset on nginx's client sockets (the kernel's reason), sock:inet_sock_set_state for the closes"),
    );
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
    if let Some(v) = out.iter().find(|v| v.id == "keepalive_timeout_closes") {
        let at = v
            .evidence
            .get("idle_before_close_pinned_ms")
            .and_then(|v| v.as_f64());
        closes.push(match at {
            Some(ms) => format!("nginx closed idle connections at keepalive_timeout ({:.1} s: keepalive_timeout_closes)", ms / 1000.0),
            None => "nginx closed idle connections at keepalive_timeout (keepalive_timeout_closes)".to_string(),
        });
    }
    let why = if closes.is_empty() {
        "what closed those connections is not measured".to_string()
    } else {
        format!(
            "in the period {}; which close each reset followed is not measured",
            closes.join(", and ")
        )
    };
    let reasons: Vec<String> = by.iter().map(|(r, n)| format!("{r} {n}")).collect();
    out.push(Verdict::new(
        "requests_after_close",
        Severity::Warning,
        evidence,
        &[],
        format!(
            "nginx's sockets answered {n} times with a reset a client's data that came after nginx had closed the connection ({}; tracepoint tcp:tcp_send_reset): a request sent on a kept-alive connection as nginx closed it fails so for its client unless the client retries it, and nginx never reads it (no access-log line, no 5xx); so does the rest of a request body sent after nginx answered early (a 413, a redirect) and closed; {why}. Clients that reuse idle connections should retry an idempotent request that fails that way, and close idle connections before nginx does",
            reasons.join(", ")
        ),
    ));
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
    let serving = t
        .closed_by_nginx_reset
        .saturating_sub(t.closed_while_draining_reset);
    let reason = |r: &str| t.resets_sent_by_reason.get(r).copied().unwrap_or(0);
    let (linger, unread) = (reason(LINGER_ZERO), reason(ABORT_ON_CLOSE));
    if serving == 0 || linger == 0 {
        return;
    }
    let timed_out = log_count(inp, "client_timed_out");
    let log_read = inp.nginx_errors.as_ref().is_some_and(|e| e.readable);
    let cfg = inp.config.as_ref().filter(|k| k.is_read());
    let on: Vec<String> = cfg
        .map(|k| {
            k.everywhere("reset_timedout_connection")
                .filter(|v| v.value == "on")
                .map(|v| format!("{} ({})", v.scope, v.at))
                .collect()
        })
        .unwrap_or_default();
    let timeouts: Vec<String> = cfg
        .map(|k| {
            [
                "send_timeout",
                "client_body_timeout",
                "client_header_timeout",
            ]
            .iter()
            .flat_map(|d| k.everywhere(d))
            .map(|v| format!("{} {} in {}", v.directive, v.quoted(), v.scope))
            .collect()
        })
        .unwrap_or_default();
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
    use crate::model::connections::{ConnectionsReport, PortLifecycle};

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
