//! The client connection lifecycle rows of [`super::prometheus_families::FAMILIES`]
//! (the report's `connections`: TCP tracepoints on nginx's listening ports, continuous
//! in every `--detail` mode). Labelled by `port` (at most 16 ports are counted);
//! only the closes a worker's own `close()` made are per worker. Absent while nothing
//! was counted.

use super::prometheus_format::{
    fixed, Family,
    Kind::{Counter, Gauge},
    Scrape, Sink,
};
use crate::model::{
    connections::{IdleReport, PortLifecycle},
    upstream_lifecycle::PeerLifecycle,
};

/// One sample per port of `value`, labelled by the port and `extra` label values.
fn per_port(s: &Scrape, o: &mut Sink, f: impl Fn(&PortLifecycle, &mut Sink, &str)) {
    if let Some(c) = &s.report.connections {
        for p in &c.ports {
            f(p, o, &p.port.to_string());
        }
    }
}

/// Who closed first.
pub(super) const CLOSED: Family = Family::report(
    "nginx_probe_connections_closed_total",
    Counter,
    &["port", "by"],
    "Client connections of an nginx listening port closed since attach, by who closed first: nginx (ESTABLISHED -> FIN_WAIT1), worker_exit (the same, by the kernel as the worker holding it exited: task_struct.flags PF_EXITING), client (-> CLOSE_WAIT), reset (-> CLOSE); tracepoint sock:inet_sock_set_state.",
    |s, o| {
        per_port(s, o, |p, o, port| {
            o.sample(&[port, "nginx"], p.closed_by_nginx);
            o.sample(&[port, "worker_exit"], p.closed_by_worker_exit);
            o.sample(&[port, "client"], p.closed_by_client);
            o.sample(&[port, "reset"], p.closed_by_reset);
        })
    },
)
.omit_if_empty();

/// Closes of connections that carried not one byte.
pub(super) const CLOSED_WITHOUT_DATA: Family = Family::report(
    "nginx_probe_connections_closed_without_data_total",
    Counter,
    &["port", "by"],
    "Of nginx_probe_connections_closed_total, the connections that had received not one byte from the client when first closed (tcp_sock.bytes_received: 0, or 1 for the client's FIN): they carried no request (the client's: opened and never used, spare connections, health checks that only connect; nginx's: closed before the first byte came, client_header_timeout or a worker at worker_connections); by who closed first: nginx, client, reset; since attach. 0 when tcp_sock.bytes_received is not in the kernel's BTF.",
    |s, o| {
        per_port(s, o, |p, o, port| {
            o.sample(&[port, "nginx"], p.closed_without_data_by_nginx);
            o.sample(&[port, "client"], p.closed_without_data_by_client);
            o.sample(&[port, "reset"], p.closed_without_data_by_reset);
        })
    },
)
.omit_if_empty();

/// nginx's closes reusing connections at worker_connections.
pub(super) const CLOSED_REUSING: Family = Family::report(
    "nginx_probe_connections_closed_reusing_total",
    Counter,
    &["port", "ended"],
    "Of nginx's closes (nginx_probe_connections_closed_total{by=\"nginx\"} and nginx's own resets), those made inside the worker's ngx_get_connection (uprobe: the call's return address still on the stack at the close): nginx at worker_connections, 1/16 or fewer of its connections free, closing kept-alive idle connections and ones waiting for their first request to reuse them for new ones; by how the connection ended: fin, or reset (the client's request in and unread: failed for its client unless it retries); since attach. 0 when the ngx_get_connection uprobe is not attached.",
    |s, o| {
        per_port(s, o, |p, o, port| {
            let reset = p.closed_reusing_connections_reset;
            o.sample(&[port, "fin"], p.closed_reusing_connections.saturating_sub(reset));
            o.sample(&[port, "reset"], reset);
        })
    },
)
.omit_if_empty();

/// nginx's closes by draining workers.
pub(super) const CLOSED_WHILE_DRAINING: Family = Family::report(
    "nginx_probe_connections_closed_while_draining_total",
    Counter,
    &["port", "state"],
    "Of nginx_probe_connections_closed_total{by=\"nginx\"}, the closes by draining workers (after they entered ngx_close_idle_connections, uprobe: a reload, a QUIT, a binary upgrade's WINCH), by the connection's state at the close: idle (closed in nginx's sweep of idle connections, between that uprobe and its uretprobe: a kept-alive connection closed under its client), after_data (after the sweep, nginx having sent data in the close's last jiffy: a response's end, a response still streaming when cut, or a TLS close_notify / HTTP/2 GOAWAY, not told apart), silent (after the sweep, nothing sent by nginx in the close's last jiffy: a request whose response had not begun, cut at worker_shutdown_timeout say, or a connection waiting for its first request); since attach.",
    |s, o| {
        per_port(s, o, |p, o, port| {
            o.sample(&[port, "idle"], p.closed_while_draining_idle);
            o.sample(&[port, "after_data"], p.closed_while_draining_after_data);
            o.sample(&[port, "silent"], p.closed_while_draining_silent);
        })
    },
)
.omit_if_empty();

/// Each worker's own closes.
pub(super) const WORKER_CLOSED: Family = Family::worker(
    "nginx_probe_worker_connections_closed_total",
    Counter,
    &["worker", "generation", "by"],
    "Client connections the worker's own close() ended since attach, by who closed first: nginx (ESTABLISHED -> FIN_WAIT1), nginx_draining (of those, while the worker was draining), client (CLOSE_WAIT -> LAST_ACK, or -> CLOSE with data unread: the worker closed its end after the client's FIN), worker_exit (the kernel, as the worker exited), nginx_reset (ended by the worker's own reset: ESTABLISHED -> CLOSE in its close(), the client's data unread or SO_LINGER 0), nginx_reusing (of nginx and nginx_reset, the closes inside its ngx_get_connection, uprobe: reusing connections at worker_connections); tracepoint sock:inet_sock_set_state in the worker's context. Resets received and sent are per port.",
    fixed(6),
    |_, w, o| {
        if let Some(c) = &w.connections_closed {
            o.sample(&["nginx"], c.by_nginx);
            o.sample(&["nginx_draining"], c.while_draining);
            o.sample(&["client"], c.after_client);
            o.sample(&["worker_exit"], c.by_worker_exit);
            o.sample(&["nginx_reset"], c.reset_by_nginx);
            o.sample(&["nginx_reusing"], c.reusing);
        }
    },
);

/// Established.
pub(super) const ESTABLISHED: Family = Family::report(
    "nginx_probe_connections_established_total",
    Counter,
    &["port"],
    "Client connections established on an nginx listening port since attach (SYN_RECV -> ESTABLISHED; tracepoint sock:inet_sock_set_state).",
    |s, o| per_port(s, o, |p, o, port| o.sample(&[port], p.established)),
)
.omit_if_empty();

/// Resets.
pub(super) const RESETS: Family = Family::report(
    "nginx_probe_connection_resets_total",
    Counter,
    &["port", "direction"],
    "TCP resets on an nginx listening port's sockets since attach: sent (tracepoint tcp:tcp_send_reset, local port) or received (tcp:tcp_receive_reset).",
    |s, o| {
        per_port(s, o, |p, o, port| {
            o.sample(&[port, "sent"], p.resets_sent);
            o.sample(&[port, "received"], p.resets_received);
        })
    },
)
.omit_if_empty();

/// Connection attempts refused for want of a listener.
pub(super) const SYNS_REFUSED: Family = Family::report(
    "nginx_probe_connection_attempts_refused_total",
    Counter,
    &["port"],
    "Connection attempts to an nginx listening port refused since attach because no listener had it: SYNs answered with a reset of reason NO_SOCKET (tracepoint tcp:tcp_send_reset, the answered segment's TCP flags): after nginx stopped, or a reload dropped the port.",
    |s, o| per_port(s, o, |p, o, port| o.sample(&[port], p.syns_refused)),
)
.omit_if_empty();

/// Listening sockets closed and resets of their queues.
pub(super) const LISTENERS_CLOSED: Family = Family::report(
    "nginx_probe_listeners_closed_total",
    Counter,
    &["port"],
    "nginx listening sockets of a port closed since attach (LISTEN -> CLOSE: a reload dropping a reuseport socket, a removed listen).",
    |s, o| per_port(s, o, |p, o, port| o.sample(&[port], p.listeners_closed)),
)
.omit_if_empty();

/// Idle time before nginx's closes: sum.
pub(super) const IDLE_SECONDS: Family = Family::report(
    "nginx_probe_connection_idle_before_nginx_close_seconds_total",
    Counter,
    &["port"],
    "Sum of the idle times (since the last data sent or received: tcp_sock.lsndtime, icsk_ack.lrcvtime) of the connections nginx closed first, seconds, since attach; with _count below, the mean.",
    |s, o| {
        per_port(s, o, |p, o, port| {
            if let Some(i) = &p.idle_before_nginx_close {
                o.sample(&[port], i.mean_ms * i.count as f64 / 1e3);
            }
        })
    },
)
.omit_if_empty();

/// Idle time before nginx's closes: count.
pub(super) const IDLE_COUNT: Family = Family::report(
    "nginx_probe_connection_idle_measured_total",
    Counter,
    &["port"],
    "Connections nginx closed first whose idle time was measured, since attach.",
    |s, o| {
        per_port(s, o, |p, o, port| {
            o.some(&[port], p.idle_before_nginx_close.as_ref().map(|i| i.count))
        })
    },
)
.omit_if_empty();

/// Connection lifetime: sum.
pub(super) const LIFETIME_SECONDS: Family = Family::report(
    "nginx_probe_connection_lifetime_seconds_total",
    Counter,
    &["port"],
    "Sum of the lifetimes (SYN_RECV -> ESTABLISHED to the first close by any side, bpf_ktime_get_ns) of nginx's client connections established since attach, seconds; with nginx_probe_connection_lifetime_measured_total, the mean.",
    |s, o| {
        per_port(s, o, |p, o, port| {
            if let Some(l) = &p.lifetime {
                o.sample(&[port], l.mean_ms * l.count as f64 / 1e3);
            }
        })
    },
)
.omit_if_empty();

/// Connection lifetime: count.
pub(super) const LIFETIME_COUNT: Family = Family::report(
    "nginx_probe_connection_lifetime_measured_total",
    Counter,
    &["port"],
    "Client connections established since attach whose lifetime was measured at their first close.",
    |s, o| {
        per_port(s, o, |p, o, port| {
            o.some(&[port], p.lifetime.as_ref().map(|l| l.count))
        })
    },
)
.omit_if_empty();

/// The client's side of the idle times: before its closes (`fin`) and before resets
/// received (`reset`), each with `f` of the report.
fn client_side(s: &Scrape, o: &mut Sink, f: impl Fn(&IdleReport) -> f64) {
    per_port(s, o, |p, o, port| {
        for (how, i) in [
            ("fin", &p.idle_before_client_close),
            ("reset", &p.idle_before_reset_received),
        ] {
            if let Some(i) = i {
                o.sample(&[port, how], f(i));
            }
        }
    })
}

/// Idle time before the client's closes and resets received: sum.
pub(super) const CLIENT_IDLE_SECONDS: Family = Family::report(
    "nginx_probe_connection_idle_before_client_close_seconds_total",
    Counter,
    &["port", "how"],
    "Sum of the idle times (since the last data sent or received: icsk_ack.lrcvtime, tcp_sock.lsndtime) of the connections their client ended first, by a FIN (how=fin, read at ESTABLISHED -> CLOSE_WAIT) or a reset received (how=reset), seconds, since attach; with _measured_total, the mean.",
    |s, o| client_side(s, o, |i| i.mean_ms * i.count as f64 / 1e3),
)
.omit_if_empty();

/// Idle time before the client's closes and resets received: count.
pub(super) const CLIENT_IDLE_COUNT: Family = Family::report(
    "nginx_probe_connection_idle_before_client_close_measured_total",
    Counter,
    &["port", "how"],
    "Connections their client ended first (how=fin: its FIN; how=reset: a reset received) whose idle time was measured, since attach.",
    |s, o| client_side(s, o, |i| i.count as f64),
)
.omit_if_empty();

/// The pinned idle time.
pub(super) const IDLE_PINNED: Family = Family::report(
    "nginx_probe_connection_idle_before_nginx_close_pinned_seconds",
    Gauge,
    &["port"],
    "The idle time nginx's closes sit at, seconds: present when every measured close since attach lies within 10% of one value (a keepalive_timeout).",
    |s, o| {
        per_port(s, o, |p, o, port| {
            let v = p.idle_before_nginx_close.as_ref().and_then(|i| i.pinned_ms);
            o.some(&[port], v.map(|ms| ms / 1e3));
        })
    },
)
.omit_if_empty();

/// One sample per upstream peer of `f`, labelled by the peer (at most
/// `UP_MAX_PEERS` peers, the rest as `other peers`).
fn per_peer(s: &Scrape, o: &mut Sink, f: impl Fn(&PeerLifecycle, &mut Sink, &str)) {
    if let Some(c) = &s.report.connections {
        for p in &c.upstream_peers {
            f(p, o, &p.peer);
        }
    }
}

/// The connections nginx's workers opened per upstream peer: connects, handshakes,
/// failures and who closed first.
pub(super) const PEER_CONNECTIONS: Family = Family::report(
    "nginx_probe_upstream_peer_connections_total",
    Counter,
    &["peer", "event"],
    "TCP connections nginx's workers opened to an upstream peer since attach, by event: connect (CLOSE -> SYN_SENT in a worker's connect()), established, connect_failed (SYN_SENT -> CLOSE), closed_by_nginx (ESTABLISHED -> FIN_WAIT1), closed_by_peer (-> CLOSE_WAIT), closed_by_reset (-> CLOSE), closed_by_worker_exit; tracepoint sock:inet_sock_set_state. At most 64 peers, the rest as peer=\"other peers\".",
    |s, o| {
        per_peer(s, o, |p, o, peer| {
            for (event, n) in p.events() {
                o.sample(&[peer, event], n);
            }
        })
    },
)
.omit_if_empty();

/// The idle time an upstream peer's closes sit at.
pub(super) const PEER_IDLE_PINNED: Family = Family::report(
    "nginx_probe_upstream_peer_idle_before_peer_close_pinned_seconds",
    Gauge,
    &["peer"],
    "The idle time after which an upstream peer closes nginx's connections, seconds: present when every one of its closes since attach lies within 10% of one value (the peer's idle timeout).",
    |s, o| {
        per_peer(s, o, |p, o, peer| {
            let v = p.idle_before_peer_close.as_ref().and_then(|i| i.pinned_ms);
            o.some(&[peer], v.map(|ms| ms / 1e3));
        })
    },
)
.omit_if_empty();
