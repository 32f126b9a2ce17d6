//! The text report's UPSTREAM PEERS lines: per upstream peer address, the connections
//! nginx's workers opened, who closed them first and after how long idle (the report's
//! `connections.upstream_peers`, from `sock:inet_sock_set_state`). The report was
//! sanitized before it gets here.

use std::fmt::Write as _;

use crate::model::{
    connections::fmt_ms,
    upstream_lifecycle::{PeerLifecycle, SOURCE},
    Report,
};

/// Appends the peers' lines; nothing when no connection to a peer was counted in the
/// period.
pub fn peers_section(out: &mut String, r: &Report) {
    let Some(c) = &r.connections else { return };
    if c.upstream_peers.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nUPSTREAM PEERS (connections nginx's workers opened; {SOURCE})"
    );
    for p in &c.upstream_peers {
        peer_lines(out, p);
    }
}

/// One peer: its counts, then the idle time before its closes and the time since its
/// last data at resets, when measured.
fn peer_lines(out: &mut String, p: &PeerLifecycle) {
    let exits = if p.closed_by_worker_exit > 0 {
        format!("  as their worker exited {}", p.closed_by_worker_exit)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "  {}  connects {}  established {}  failed {}  closed first by nginx {}  by the peer {}  by a reset {}{exits}",
        p.peer,
        p.connects,
        p.established,
        p.connect_failed,
        p.closed_by_nginx,
        p.closed_by_peer,
        p.closed_by_reset
    );
    if let Some(i) = &p.idle_before_peer_close {
        let pinned = match i.pinned_ms {
            Some(v) => format!(
                ": the peer closes idle connections after {} (every close since attach between {} and {})",
                fmt_ms(v),
                fmt_ms(i.min_ms_since_attach as f64),
                fmt_ms(i.max_ms_since_attach as f64)
            ),
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "    idle before the peer's close: p50 {} p99 {} over {} closes{pinned}",
            fmt_ms(i.p50_ms as f64),
            fmt_ms(i.p99_ms as f64),
            i.count
        );
    }
    if p.closed_by_peer_after_its_data > 0 {
        let _ = writeln!(
            out,
            "    {} of the peer's closes came right after its own data (a response with Connection: close, or a TLS close_notify: not told apart): no idle time measured for them",
            p.closed_by_peer_after_its_data
        );
    }
    if p.closed_by_nginx_after_peer_data > 0 {
        let _ = writeln!(
            out,
            "    {} of nginx's closes came right after the peer's data (nginx ending the connection on the response it had just read: its request or the response asked for the close, or its pool was full when the connection came back, more connections busy at once than `keepalive` keeps: not told apart), its FIN racing the peer's own",
            p.closed_by_nginx_after_peer_data
        );
    }
    if let Some(i) = &p.since_peer_data_at_reset {
        let _ = writeln!(
            out,
            // Trial 17: "(0 ms to 4 ms since attach)" read as when the resets came.
            "    resets came p50 {} after the peer's last data (shortest to longest since attach: {}), over {} resets",
            fmt_ms(i.p50_ms as f64),
            crate::model::idle::ms_range(i.min_ms_since_attach, i.max_ms_since_attach),
            i.count
        );
    }
    if let Some(m) = p.idle_before_nginx_close_mean_ms {
        let _ = writeln!(out, "    idle before nginx's close: mean {}", fmt_ms(m));
    }
    if p.closed_by_nginx_awaiting_response > 0 {
        let after = p
            .awaited_before_nginx_close_mean_ms
            .map(|m| format!(", after awaiting it a mean {}", fmt_ms(m)))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "    {} closed by nginx while awaiting the peer's response (its request sent, nothing back since{after}: proxy_read_timeout, a client gone, or a worker's shutdown; not idle, not in the idle time)",
            p.closed_by_nginx_awaiting_response
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::connections::{ConnectionsReport, IdleReport};

    #[test]
    fn a_peer_closing_idle_connections_is_said_with_its_time() {
        let mut r = crate::model::minimal_report();
        let mut out = String::new();
        peers_section(&mut out, &r);
        assert_eq!(out, "");
        r.connections = Some(ConnectionsReport {
            upstream_peers: vec![PeerLifecycle {
                peer: "127.0.0.2:8080".into(),
                connects: 10,
                established: 10,
                closed_by_peer: 10,
                idle_before_peer_close: Some(IdleReport {
                    count: 10,
                    mean_ms: 1004.0,
                    p50_ms: 1000,
                    p99_ms: 1008,
                    min_ms_since_attach: 1000,
                    max_ms_since_attach: 1008,
                    pinned_ms: Some(1004.0),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        });
        peers_section(&mut out, &r);
        assert!(out.contains("UPSTREAM PEERS"), "{out}");
        assert!(
            out.contains("127.0.0.2:8080  connects 10  established 10  failed 0  closed first by nginx 0  by the peer 10  by a reset 0"),
            "{out}"
        );
        assert!(
            out.contains("the peer closes idle connections after 1.0 s"),
            "{out}"
        );
        assert!(!out.contains("right after the peer's data"), "{out}");
        if let Some(c) = r.connections.as_mut() {
            c.upstream_peers[0].closed_by_nginx_after_peer_data = 7;
        }
        out.clear();
        peers_section(&mut out, &r);
        assert!(out.contains("\n    7 of nginx's closes came right after the peer's data (nginx ending the connection on the response it had just read"), "{out}");
        // Trial 17: the since-attach span was read as when the resets came.
        if let Some(c) = r.connections.as_mut() {
            c.upstream_peers[0].since_peer_data_at_reset = Some(IdleReport {
                count: 300,
                p50_ms: 4,
                min_ms_since_attach: 0,
                max_ms_since_attach: 4,
                ..Default::default()
            });
        }
        out.clear();
        peers_section(&mut out, &r);
        assert!(out.contains("\n    resets came p50 4 ms after the peer's last data (shortest to longest since attach: 0 ms to 4 ms), over 300 resets\n"), "{out}");
    }
}
