//! `worker_connections`: nginx out of connections. [`worker_connections_exhausted`]
//! judges what was measured: the closes nginx made to reuse connections (the
//! `ngx_get_connection` uprobe and the lifecycle tracepoints, [`reusing_closes`]),
//! connections accepted and closed at once, connections unserved, nginx's error-log
//! lines. [`worker_connections_reached`] is the sentence other verdicts (keepalive_off,
//! requests_after_close) add when nginx's closes include that reuse.

use std::collections::BTreeMap;

use super::inputs::{log_count, Inputs};
use crate::model::{Severity, Verdict};

/// Accepts needed before unserved connections are judged.
pub const UNSERVED_MIN_ACCEPTS: u64 = 200;
/// Accepts per request at or above which connections are being closed unserved (each
/// connection carries at least one request unless closed before it).
pub const UNSERVED_ACCEPTS_PER_REQUEST: f64 = 1.5;

/// Total accepts and requests, and whether so many more connections were accepted than
/// requests served that many were closed before carrying one (abandoned TLS handshakes
/// and connections their client closed without a byte left out): far more accepts than
/// requests, and not because the connections are held open (the workers' peak open fds
/// stay under half the connections without a request; unknown fds: not judged).
pub fn unserved(inp: &Inputs) -> (u64, u64, bool) {
    let accepts: u64 = inp.workers.iter().map(|w| w.accepts).sum();
    // Unknown requests or accepts: not judged.
    let Some(requests) = inp.requests.filter(|_| inp.accepts_per_request_known()) else {
        return (accepts, 0, false);
    };
    // Connections that carried no request because their TLS handshake was abandoned
    // (counted exactly by libssl's programs) were not closed for want of anything;
    // counted in the detail windows only, they are unknown: not judged.
    let abandoned = match inp.tls.as_ref() {
        Some(t) if t.libssl_sampled && t.abandoned > 0 => return (accepts, requests, false),
        Some(t) if !t.libssl_sampled => t.abandoned,
        _ => 0,
    };
    // Nor were the connections their clients closed without sending a byte (health
    // checks that only connect): counted exactly at their close.
    let accepts_left = accepts.saturating_sub(abandoned + inp.closed_without_data_by_client());
    let without = accepts_left.saturating_sub(requests);
    let fds_peak: Option<u64> = inp.workers.iter().map(|w| w.fds_peak).sum();
    let many = accepts_left >= UNSERVED_MIN_ACCEPTS
        && accepts_left as f64 >= UNSERVED_ACCEPTS_PER_REQUEST * requests as f64
        && fds_peak.is_some_and(|p| p * 2 < without);
    (accepts, requests, many)
}

/// Whether nginx itself closed most of `carried` connections to reuse them
/// (worker_connections ran out): its error log says it reused connections, or the
/// closes inside `ngx_get_connection` ([`reusing_closes`]) are half of them or more.
/// Then the clients did keep their connections alive (trial 13 put them on clients
/// asking for `Connection: close`), and `keepalive_off` is not said.
/// Not when the configuration turns keepalive off itself (`keepalive_timeout 0`):
/// then the connections nginx reused had carried nothing yet (trial 14:
/// keepalive_timeout 0 with worker_connections 20, keepalive_off silent).
pub fn nginx_reused_them(inp: &Inputs, carried: u64) -> bool {
    let reused = log_count(inp, "worker_connections_reusing") > 0
        || reusing_closes(inp).is_some_and(|(n, _)| 2 * n >= carried);
    reused && super::config_evidence::keepalive_timeout_zero(inp.served_config().as_ref()).is_none()
}

/// Where [`reusing_closes`] comes from, as the evidence says it.
pub const REUSING_SOURCE: &str = "closes inside nginx's ngx_get_connection: its uprobe notes the call's return address, and the state change in the worker's close() finds it still on the stack (tracepoint sock:inet_sock_set_state); nginx reuses connections there when 1/16 or fewer of worker_connections are free";

/// nginx's closes of client connections made to reuse them at `worker_connections`
/// in the period, over every port: `(closes, of them ended by a reset with the
/// client's request unread)` (`PortLifecycle::closed_reusing_connections`, `_reset`);
/// None when not counted (no lifecycle programs, the `ngx_get_connection` uprobe not
/// attached, a recording made before they were).
pub fn reusing_closes(inp: &Inputs) -> Option<(u64, u64)> {
    let c = inp.connections.as_ref().filter(|c| c.reusing_counted)?;
    let t = c.total();
    Some((
        t.closed_reusing_connections,
        t.closed_reusing_connections_reset,
    ))
}

/// Why [`reusing_closes`] is None, for the evidence.
fn reusing_unknown(inp: &Inputs) -> String {
    match inp.connections.as_ref() {
        None => inp
            .connections_not_traced
            .clone()
            .unwrap_or_else(|| "the connection lifecycle is not traced".into()),
        Some(c) => c
            .reusing_unknown
            .clone()
            .unwrap_or_else(|| "not counted in this recording (made before it was)".into()),
    }
}

/// Share of `worker_connections` a worker's open sockets must reach for nginx to be
/// taken as possibly reusing connections (its listeners, channels and upstream
/// connections take slots too; the sockets are sampled every 2 s).
pub const WORKER_CONNECTIONS_REACHED_SHARE: f64 = 0.9;

/// The sentence other verdicts add when nginx's closes include its reuse of
/// connections at `worker_connections` (nginx closes idle keep-alive connections, and
/// connections whose request it has not read, to free one for a new connection), so
/// its closes right after a response are not the clients' doing (trial 13:
/// `worker_connections 20` under 50 clients was put on clients asking for
/// `Connection: close`). Measured where [`reusing_closes`] counts them: the count, or
/// None when there were none (not the cause). Where they are not counted, a candidate:
/// a worker's open sockets (`sockets_peak`, `/proc/<pid>/fd` every 2 s) at
/// [`WORKER_CONNECTIONS_REACHED_SHARE`] of the configured limit or more, said as not
/// counted; None when not reached or not known.
pub fn worker_connections_reached(inp: &Inputs) -> Option<String> {
    let setting = inp
        .config
        .as_ref()
        .and_then(|c| c.value("worker_connections"));
    if let Some((closes, resets)) = reusing_closes(inp) {
        let at = setting
            .map(|v| format!("worker_connections {} ({})", v.value, v.at))
            .unwrap_or_else(|| "worker_connections".into());
        return (closes > 0).then(|| {
            format!(
                "nginx closed {closes} client connections to reuse them for new ones at {at} (closes inside nginx's ngx_get_connection, uprobe), {resets} of them with a request in that it never read (ended by a reset)"
            )
        });
    }
    let v = setting?;
    let limit: u64 = v.value.parse().ok()?;
    let peak = inp.workers.iter().filter_map(|w| w.sockets_peak).max()?;
    (limit > 0 && peak as f64 >= WORKER_CONNECTIONS_REACHED_SHARE * limit as f64).then(|| {
        format!(
            "a worker's open sockets reached {peak} of worker_connections {} ({}; /proc/<pid>/fd, sampled every 2 s): at the limit nginx closes idle keep-alive connections, and connections whose request it has not read, to free one for a new client (`worker_connections are not enough, reusing connections`, logged at warn); whether it did here is not counted",
            v.value, v.at
        )
    })
}

/// `directives` with `worker_connections` added when [`worker_connections_reached`]:
/// nginx reusing connections closes them too (trial 13).
pub fn and_worker_connections<'a>(inp: &Inputs, directives: &[&'a str]) -> Vec<&'a str> {
    let mut d = directives.to_vec();
    if worker_connections_reached(inp).is_some() {
        d.push("worker_connections");
    }
    d
}

/// `worker_connections_exhausted`: nginx ran out of connections, from what was
/// measured: closes nginx made reusing connections ([`reusing_closes`]), connections
/// a worker accepted and closed at once (`close_after_accept`), far more accepts than
/// requests ([`unserved`]), nginx's error-log lines ("worker_connections
/// are not enough", at alert; "..., reusing connections", at warn).
pub fn worker_connections_exhausted(inp: &Inputs, out: &mut Vec<Verdict>) {
    let closed: u64 = inp.workers.iter().map(|w| w.accepted_then_closed).sum();
    let (accepts, requests, unserved) = unserved(inp);
    let reusing = log_count(inp, "worker_connections_reusing");
    let not_enough = log_count(inp, "worker_connections");
    let counted = reusing_closes(inp);
    let (reused, reused_reset) = counted.unwrap_or((0, 0));
    if closed == 0 && !unserved && reusing == 0 && not_enough == 0 && reused == 0 {
        return;
    }
    // Connections closed unserved, and nginx's readable error log has no line saying it
    // ran out ("worker_connections are not enough" is logged at alert, which every
    // error_log level but emerg keeps): the cause is not worker_connections, and
    // nothing measured names another.
    if closed == 0
        && reusing == 0
        && not_enough == 0
        && reused == 0
        && inp.nginx_errors.as_ref().is_some_and(|e| e.readable)
    {
        return;
    }
    // A client's connection refused for want of one is accepted then closed at once
    // (the kernel's accepted_then_closed) and counted by nginx as accepted, not handled
    // (stub_status): the log's lines alone, with neither, may be upstream connections
    // nginx could not open, or lines a client wrote into the log (docs/security.md).
    let dropped = inp.stub_dropped.unwrap_or(0);
    let corroborated = closed > 0 || dropped > 0;
    let c = ExhaustedCounts {
        closed,
        accepts,
        requests,
        unserved,
        reusing,
        not_enough,
        dropped,
        corroborated,
        reused,
        reused_reset,
    };
    let evidence = exhausted_evidence(inp, &c, counted.is_some());
    let advice = exhausted_advice(inp, &c);
    out.push(Verdict::new(
        "worker_connections_exhausted",
        // Trial 10: 99% unserved with "reusing" lines was only a warning.
        if closed > 0
            || reused_reset > 0
            || (unserved && (reusing > 0 || reused > 0))
            || (not_enough > 0 && corroborated)
        {
            Severity::Critical
        } else {
            Severity::Warning
        },
        evidence,
        &["worker_connections", "worker_rlimit_nofile"],
        advice,
    ));
}

/// `worker_connections_exhausted`'s evidence: the error log's lines, the kernel's
/// counts, nginx's reuse of connections (or why it is not counted: `counted` false),
/// nginx's own `accepted - handled`, the workers concerned.
fn exhausted_evidence(
    inp: &Inputs,
    c: &ExhaustedCounts,
    counted: bool,
) -> BTreeMap<&'static str, serde_json::Value> {
    let mut evidence = BTreeMap::new();
    if let Some(e) = inp.nginx_errors.as_ref().filter(|e| e.readable) {
        evidence.insert(
            "error_log_reusing_connections",
            serde_json::json!(c.reusing),
        );
        evidence.insert("error_log_not_enough", serde_json::json!(c.not_enough));
        evidence.insert("error_log", serde_json::json!(e.path));
    }
    evidence.insert("accepted_then_closed", serde_json::json!(c.closed));
    if counted {
        evidence.insert("closed_reusing_connections", serde_json::json!(c.reused));
        evidence.insert(
            "closed_reusing_connections_reset",
            serde_json::json!(c.reused_reset),
        );
        evidence.insert("reusing_source", serde_json::json!(REUSING_SOURCE));
    } else {
        evidence.insert("reusing_unknown", serde_json::json!(reusing_unknown(inp)));
    }
    evidence.insert("accepts", serde_json::json!(c.accepts));
    if c.unserved {
        evidence.insert("requests", serde_json::json!(c.requests));
        evidence.insert(
            "requests_source",
            serde_json::json!(inp.requests_source.name()),
        );
    }
    if let Some(d) = inp.stub_dropped {
        // nginx's own count (stub_status accepted - handled).
        evidence.insert("nginx_dropped", serde_json::json!(d));
    }
    evidence.insert("workers", closing_workers(inp));
    if c.not_enough > 0 && !c.corroborated {
        evidence.insert(
            "not_enough_uncorroborated",
            serde_json::json!("no accepted connection was closed at once (tracepoint close after accept) nor left unhandled (stub_status accepted - handled, when read)"),
        );
    }
    evidence
}

/// The workers that closed accepted connections at once or reused connections, with
/// their open fds.
fn closing_workers(inp: &Inputs) -> serde_json::Value {
    serde_json::json!(inp
        .workers
        .iter()
        .filter(|w| w.accepted_then_closed + w.closed_reusing > 0)
        .map(|w| serde_json::json!({"pid": w.pid, "accepted_then_closed": w.accepted_then_closed, "closed_reusing_connections": w.closed_reusing, "fds_open": w.fds_open}))
        .collect::<Vec<_>>())
}

/// What `worker_connections_exhausted` counted (see there).
struct ExhaustedCounts {
    closed: u64,
    accepts: u64,
    requests: u64,
    unserved: bool,
    reusing: u64,
    not_enough: u64,
    dropped: u64,
    corroborated: bool,
    reused: u64,
    reused_reset: u64,
}

/// The advice of `worker_connections_exhausted`, by what was measured.
fn exhausted_advice(inp: &Inputs, c: &ExhaustedCounts) -> String {
    let (closed, not_enough, reusing) = (c.closed, c.not_enough, c.reusing);
    if c.reused > 0 {
        return reused_advice(inp, c);
    }
    if closed == 0 && !c.unserved && reusing == 0 && !c.corroborated {
        format!(
            "nginx's error log says \"worker_connections are not enough\" {not_enough} times, but no client connection was seen refused: none accepted then closed at once (kernel), none accepted and unhandled (nginx's stub_status, {}). The lines may be for upstream connections nginx could not open (then their requests failed) or not nginx's own (a client can write lines into the error log); check the error log's upstream errors and the workers' open fds against worker_connections",
            if inp.stub_dropped.is_some() { "read" } else { "not read" }
        )
    } else if closed == 0 && !c.unserved && reusing == 0 {
        format!(
            "nginx ran out of worker_connections: its error log says \"worker_connections are not enough\" {not_enough} times: each time a new connection was accepted and closed at once, with no idle connection to reuse ({} accepted and unhandled, stub_status); raise worker_connections (and worker_rlimit_nofile with it)",
            c.dropped
        )
    } else if closed == 0 && !c.unserved {
        format!(
            "nginx ran out of worker_connections: its error log says \"worker_connections are not enough, reusing connections\" {reusing} times (nginx logs it at most once a second per worker, each time closing up to 32 idle connections){}: to accept new clients it closed idle keepalive connections (nginx closed them, not the clients, who must reconnect); raise worker_connections (and worker_rlimit_nofile with it)",
            if not_enough > 0 {
                format!(" and \"worker_connections are not enough\" {not_enough} times (connections refused outright)")
            } else {
                String::new()
            }
        )
    } else if closed > 0 {
        format!(
            "{closed} connections were accepted and closed at once: the workers had no free connection (nginx logs \"worker_connections are not enough\"); raise worker_connections (and worker_rlimit_nofile with it)"
        )
    } else {
        format!(
            "{} connections carried only {} requests: at least {} were closed before a request was served; when worker_connections runs out nginx closes idle and not-yet-read connections to reuse them (it logs \"worker_connections are not enough, reusing connections\"): raise worker_connections (and worker_rlimit_nofile with it); otherwise clients connect without sending (health checks, preconnects)",
            c.accepts,
            c.requests,
            c.accepts - c.requests
        )
    }
}

/// `worker_connections_exhausted`'s advice when nginx's reuse of connections was
/// counted: how many, how many cost a request, with the error log's lines and the
/// setting (value, file:line) when read.
fn reused_advice(inp: &Inputs, c: &ExhaustedCounts) -> String {
    let at = inp
        .config
        .as_ref()
        .and_then(|cf| cf.value("worker_connections"))
        .map(|v| format!(" ({} at {})", v.value, v.at))
        .unwrap_or_default();
    let log = match inp.nginx_errors.as_ref().filter(|e| e.readable) {
        Some(_) if c.reusing > 0 => format!(
            "; its error log says \"worker_connections are not enough, reusing connections\" {} times (at most once a second per worker)",
            c.reusing
        ),
        Some(_) => "; its error log has no line of it: nginx logs \"worker_connections are not enough, reusing connections\" at warn, which a higher error_log level leaves out".into(),
        None => String::new(),
    };
    let refused = if c.closed > 0 {
        format!(
            "; {} more were accepted and closed at once, with none left to reuse",
            c.closed
        )
    } else {
        String::new()
    };
    format!(
        "nginx ran out of worker_connections{at}: its workers closed {} client connections to reuse them for new ones (closes inside nginx's ngx_get_connection, its uprobe; see reusing_source): each one ended under its client, an error for a client that sends on it as it closes unless the client retries (a load generator that always has its next request under way counts every one); {} of them with a request in that nginx never read (ended by a reset), the rest kept-alive idle or waiting for their first request{refused}{log}; raise worker_connections (and worker_rlimit_nofile with it)",
        c.reused, c.reused_reset
    )
}

#[cfg(test)]
#[path = "worker_connections_tests.rs"]
mod tests;
