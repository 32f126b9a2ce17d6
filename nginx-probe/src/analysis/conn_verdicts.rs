//! Verdicts on who closed nginx's client connections (from the report's
//! `connections`: tracepoint `sock:inet_sock_set_state` on nginx's listening ports):
//! the `closed_by` evidence and sentence of `keepalive_off`, and
//! `keepalive_timeout_closes` (nginx closes idle keepalive connections at its timeout),
//! and `listener_closed_resets` (a reload closed listening sockets with connections
//! queued on them: the kernel reset those).

use std::collections::BTreeMap;

use crate::{
    analysis::inputs::Inputs,
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
/// Idle p99 under which nginx's closes came right after a response, ms.
pub const CLOSE_AFTER_RESPONSE_MS: u64 = 100;

/// The period's totals over nginx's ports, when any connection was closed.
fn closes(inp: &Inputs) -> Option<PortLifecycle> {
    let t = inp.connections.as_ref()?.total();
    (t.closed_by_nginx + t.closed_by_client + t.closed_by_reset > 0).then_some(t)
}

/// Who closed first, measured: (`closed_by` evidence, the sentence for the advice);
/// None when no close was counted (then who closes is unknown).
pub fn who_closed(inp: &Inputs) -> Option<(serde_json::Value, String)> {
    let t = closes(inp)?;
    let all = t.closed_by_nginx + t.closed_by_client + t.closed_by_reset;
    let idle = t.idle_before_nginx_close.as_ref();
    let evidence = serde_json::json!({
        "nginx": t.closed_by_nginx,
        "client": t.closed_by_client,
        "reset": t.closed_by_reset,
        "source": "tracepoint sock:inet_sock_set_state (ESTABLISHED -> FIN_WAIT1: nginx, -> CLOSE_WAIT: the client, -> CLOSE: a reset)",
        "idle_before_nginx_close_p99_ms": idle.map(|i| i.p99_ms),
        "idle_before_nginx_close_pinned_ms": idle.and_then(|i| i.pinned_ms),
    });
    let head = format!(
        "of {all} connections closed, nginx closed {} first, the clients {}, resets ended {} (tracepoint sock:inet_sock_set_state)",
        t.closed_by_nginx, t.closed_by_client, t.closed_by_reset
    );
    let sentence = if t.closed_by_nginx * 2 > all {
        let why = match idle {
            Some(i) if i.pinned_ms.is_some_and(|v| v >= KA_TIMEOUT_MIN_IDLE_MS) => format!(
                "nginx closed them after they sat idle {} (its keepalive_timeout): clients that come back later must reconnect",
                fmt_ms(i.pinned_ms.unwrap_or(0.0))
            ),
            Some(i) if i.p99_ms < CLOSE_AFTER_RESPONSE_MS
                && super::config_evidence::keepalive_timeout_zero(inp.config.as_ref()).is_some() =>
            {
                format!(
                    "nginx closed them right after a response (idle p99 under 100 ms): keepalive_timeout 0 is configured ({}), which turns client keepalive off there",
                    super::config_evidence::keepalive_timeout_zero(inp.config.as_ref()).unwrap_or_default()
                )
            }
            Some(i) if i.p99_ms < CLOSE_AFTER_RESPONSE_MS => format!(
                "nginx closed them right after a response (idle p99 under 100 ms): its keepalive is off for these requests: keepalive_timeout 0, keepalive_requests reached, or the clients asked for `Connection: close` or spoke HTTP/1.0 ({})",
                match super::config_evidence::keepalive_settings(inp.config.as_ref()) {
                    Some(k) => format!("configured: {k}"),
                    None => "nginx's config is not read; check them".into(),
                }
            ),
            Some(i) => format!(
                "nginx closed them after {} to {} idle (p50 {})",
                fmt_ms(i.min_ms_since_attach as f64),
                fmt_ms(i.max_ms_since_attach as f64),
                fmt_ms(i.p50_ms as f64)
            ),
            None => "check keepalive_timeout and keepalive_requests, and whether the clients send `Connection: close`".to_string(),
        };
        format!("{head}: {why}")
    } else if t.closed_by_client * 2 > all {
        format!("{head}: the clients close their connections: a load balancer or proxy in front without keepalive to nginx, or clients that close after one request; check the load balancer's keepalive to nginx and the clients' Connection header")
    } else {
        format!("{head}: no side closed most of them")
    };
    Some((evidence, sentence))
}

/// `keepalive_timeout_closes`: at least [`KA_TIMEOUT_MIN_CLOSES`] closes by nginx, at
/// least [`KA_TIMEOUT_NGINX_SHARE`] of all first closes, their idle time pinned (every
/// close since attach within 10% of one value) at [`KA_TIMEOUT_MIN_IDLE_MS`] or more,
/// and new connections in the period (the clients come back). Warning naming
/// `keepalive_timeout`.
pub fn keepalive_timeout_closes(inp: &Inputs, out: &mut Vec<Verdict>) {
    let Some(t) = closes(inp) else { return };
    let all = t.closed_by_nginx + t.closed_by_client + t.closed_by_reset;
    let Some(idle) = t.idle_before_nginx_close.as_ref() else {
        return;
    };
    let Some(pinned) = idle.pinned_ms.filter(|&v| v >= KA_TIMEOUT_MIN_IDLE_MS) else {
        return;
    };
    if t.closed_by_nginx < KA_TIMEOUT_MIN_CLOSES
        || (t.closed_by_nginx as f64) < KA_TIMEOUT_NGINX_SHARE * all as f64
        || t.established == 0
    {
        return;
    }
    let mut evidence = BTreeMap::new();
    evidence.insert("closed_by_nginx", serde_json::json!(t.closed_by_nginx));
    evidence.insert("closed_by_client", serde_json::json!(t.closed_by_client));
    evidence.insert("closed_by_reset", serde_json::json!(t.closed_by_reset));
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
    evidence.insert(
        "source",
        serde_json::json!("tracepoint sock:inet_sock_set_state ESTABLISHED -> FIN_WAIT1 on nginx's ports; idle = now - last data sent or received (tcp_sock.lsndtime, icsk_ack.lrcvtime)"),
    );
    let advice = format!(
        "nginx closed {} of {all} connections itself after they sat idle {} (keepalive_timeout), and {} new connections came in the period: clients or a load balancer in front that keep idle connections longer than that find them closed and must reconnect (or fail a request sent as nginx closed); set keepalive_timeout above the idle timeout of what is in front of nginx",
        t.closed_by_nginx,
        fmt_ms(pinned),
        t.established
    );
    out.push(Verdict::new(
        "keepalive_timeout_closes",
        Severity::Warning,
        evidence,
        &["keepalive_timeout"],
        advice,
    ));
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
        None => "net.ipv4.tcp_migrate_req could not be read in nginx's network namespace (Linux 5.14+ has it): with it at 1 the kernel moves a closing reuseport socket's queued connections to another socket of its group; or keep worker_processes (and each reuseport listen) the same across reloads".to_string(),
    };
    out.push(Verdict::new(
        "listener_closed_resets",
        if n >= CLOSED_LISTENER_RESETS_CRITICAL {
            Severity::Critical
        } else {
            Severity::Warning
        },
        evidence,
        &["listen ... reuseport", "worker_processes"],
        format!(
            "nginx closed {} listening socket(s) in the period and the kernel reset the {n} connection(s) queued on them{}: those clients got `connection reset` without a response (with `reuseport` each worker has its own socket, and a reload to fewer workers or changed listens closes the old ones with their accept queues); {remedy}",
            t.listeners_closed,
            per_reload(&c.listener_closes)
        ),
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
mod tests {
    use super::*;
    use crate::model::connections::{ConnectionsReport, IdleReport};

    fn inp(nginx: u64, client: u64, pinned: Option<f64>, p99: u64) -> Inputs {
        Inputs {
            connections: Some(ConnectionsReport {
                ports: vec![PortLifecycle {
                    port: 80,
                    established: nginx + client,
                    closed_by_nginx: nginx,
                    closed_by_client: client,
                    idle_before_nginx_close: (nginx > 0).then(|| IdleReport {
                        count: nginx,
                        mean_ms: pinned.unwrap_or(p99 as f64),
                        p50_ms: p99,
                        p99_ms: p99,
                        min_ms_since_attach: p99,
                        max_ms_since_attach: p99,
                        pinned_ms: pinned,
                        hist: vec![0; 32],
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn fired(i: &Inputs) -> bool {
        let mut v = Vec::new();
        keepalive_timeout_closes(i, &mut v);
        v.iter().any(|v| v.id == "keepalive_timeout_closes")
    }

    #[test]
    fn timeout_closes_fire_at_the_threshold_and_not_below() {
        assert!(fired(&inp(10, 0, Some(2000.0), 2000)));
        assert!(!fired(&inp(9, 0, Some(2000.0), 2000)));
        // Clients closed most: silent.
        assert!(!fired(&inp(10, 11, Some(2000.0), 2000)));
        // Closes right after responses, or spread: not a timeout.
        assert!(!fired(&inp(10, 0, Some(3.0), 3)));
        assert!(!fired(&inp(10, 0, None, 2000)));
        assert!(!fired(&Inputs::default()));
    }

    #[test]
    fn who_closed_names_the_side_measured() {
        assert!(who_closed(&Inputs::default()).is_none());
        let (e, s) = who_closed(&inp(200, 0, Some(1.0), 1)).unwrap();
        assert_eq!(e["nginx"], 200);
        assert!(s.contains("nginx closed 200 first"), "{s}");
        assert!(s.contains("right after a response"), "{s}");
        let (_, s) = who_closed(&inp(10, 0, Some(2000.0), 2000)).unwrap();
        assert!(s.contains("idle 2.0 s (its keepalive_timeout)"), "{s}");
        let (_, s) = who_closed(&inp(0, 50, None, 0)).unwrap();
        assert!(s.contains("the clients close their connections"), "{s}");
    }

    #[test]
    fn resets_of_a_closed_listener_queue_fire_and_name_the_sysctl_read() {
        let mut i = Inputs::default();
        let mut v = Vec::new();
        listener_closed_resets(&i, &mut v);
        assert!(v.is_empty());
        i.connections = Some(ConnectionsReport {
            ports: vec![PortLifecycle {
                port: 8080,
                listeners_closed: 2,
                resets_of_closed_listener_queue: 12,
                ..Default::default()
            }],
            ..Default::default()
        });
        i.local_ports = Some(crate::model::local_ports::LocalPortsReport {
            tcp_migrate_req: Some(0),
            ..Default::default()
        });
        if let Some(c) = i.connections.as_mut() {
            c.listener_closes = vec![ListenerClose {
                seen_unix_s: 100.0,
                port: 8080,
                reload_generation: Some(2),
                reloads_since_attach: 2,
                listeners_closed: 2,
                resets_of_queued_connections: 12,
            }];
        }
        listener_closed_resets(&i, &mut v);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].evidence["events"][0]["reload_generation"], 2);
        assert_eq!(
            v[0].evidence["events"][0]["resets_of_queued_connections"],
            12
        );
        assert!(
            v[0].advice
                .contains("(after reload 2 (generation 2), port 8080: 12 reset)"),
            "{}",
            v[0].advice
        );
        assert_eq!(v[0].severity, Severity::Critical);
        assert_eq!(v[0].evidence["resets_of_closed_listener_queue"], 12);
        assert_eq!(v[0].evidence["ports"]["8080"]["listeners_closed"], 2);
        assert!(
            v[0].advice.contains("the 12 connection(s) queued"),
            "{}",
            v[0].advice
        );
        assert!(
            v[0].advice.contains("tcp_migrate_req is 0"),
            "{}",
            v[0].advice
        );
        if let Some(c) = i.connections.as_mut() {
            c.ports[0].resets_of_closed_listener_queue = 3;
        }
        i.local_ports = None;
        v.clear();
        listener_closed_resets(&i, &mut v);
        assert_eq!(v[0].severity, Severity::Warning);
        assert!(v[0].advice.contains("could not be read"), "{}", v[0].advice);
    }
}
