//! `compare`'s metrics of the connection lifecycle (the report's `connections`, from the
//! TCP tracepoints of the continuous layer): who closed nginx's client connections per
//! second, the idle time before nginx's closes, the upstream connects per request and
//! the upstream peers' closes. A report without `connections` (`--no-lifecycle`, an
//! older recording) has none of these keys: nothing is invented as 0; but a period of
//! attached programs in which nothing happened (no `connections` either) counts 0.

use crate::model::{connections::ConnectionsReport, Report};

/// The lifecycle metrics as (key, label, unit), in table order after
/// `compare::METRICS` (which reads them as its own definitions). Sources: the report's
/// `connections.ports[]` summed (`ConnectionsReport::total`) and
/// `connections.upstream_peers[]` summed; rates per second of `duration_s`.
pub const METRICS: &[(&str, &str, &str)] = &[
    (
        "closed_by_nginx_per_s",
        "client connections closed first by nginx per second",
        "/s",
    ),
    (
        "closed_by_client_per_s",
        "client connections closed first by the client per second",
        "/s",
    ),
    (
        "closed_by_reset_per_s",
        "client connections ended by a reset per second",
        "/s",
    ),
    (
        "closed_by_worker_exit_per_s",
        "client connections closed as their worker exited per second",
        "/s",
    ),
    (
        "closed_while_draining_per_s",
        "client connections closed by draining workers per second",
        "/s",
    ),
    (
        "closed_without_data_per_s",
        "client connections closed before their client sent a byte per second",
        "/s",
    ),
    (
        "resets_sent_per_s",
        "TCP resets sent from nginx's ports per second",
        "/s",
    ),
    (
        "resets_received_per_s",
        "TCP resets received on nginx's ports per second",
        "/s",
    ),
    (
        "idle_before_nginx_close_pinned_ms",
        "idle time at which nginx closes (pinned)",
        "ms",
    ),
    (
        "idle_before_nginx_close_p50_ms",
        "idle time before nginx's closes, p50",
        "ms",
    ),
    (
        "connection_lifetime_p50_ms",
        "client connection lifetime, p50",
        "ms",
    ),
    (
        "idle_before_client_close_p50_ms",
        "idle time before the client's closes, p50",
        "ms",
    ),
    (
        "upstream_connects_per_request",
        "upstream connects per request (all peers)",
        "",
    ),
    (
        "upstream_closed_by_peer_per_s",
        "upstream connections closed first by the peer per second",
        "/s",
    ),
];

/// The QUIC metrics ([`quic_metrics`]) as (key, label, unit), after [`METRICS`].
pub const QUIC_METRICS: &[(&str, &str, &str)] = &[
    (
        "quic_connections_per_s",
        "QUIC connections per second",
        "/s",
    ),
    (
        "quic_ended_at_max_requests_per_s",
        "QUIC connections nginx ended at keepalive_requests/keepalive_time per second",
        "/s",
    ),
    (
        "quic_idle_closes_per_s",
        "QUIC connections nginx closed at the idle timeout per second",
        "/s",
    ),
];

/// Whether the lifecycle programs were attached for `r`'s period: a worker carries its
/// own closes (`workers[].connections_closed`, written only then; recordings made
/// before it have none). Such a report without `connections` is a period in which
/// nothing happened (the report leaves it out then): its counts are 0, counted.
fn attached(r: &Report) -> bool {
    r.workers
        .iter()
        .chain(r.exited_merged.as_ref().map(|m| &m.stats))
        .any(|w| w.connections_closed.is_some())
}

/// The lifecycle metrics of `r` as (key, value): rates over `r.duration_s` (s; the
/// lifecycle counts all the time), the idle times in ms, the upstream connects over
/// `requests` (nginx's request count, when known). Empty without a duration, and
/// without `connections` unless the programs were attached ([`attached`]: a quiet
/// period's counts are 0). Closes by draining workers and by a worker's exit only
/// when told apart (not in recordings made before `connections_closed`, nor with the
/// report's `draining_unknown`/`worker_exit_unknown`); the upstream keys only when a
/// peer was counted or the programs were attached (older recordings: unknown).
pub fn metrics(r: &Report, requests: Option<u64>) -> Vec<(&'static str, f64)> {
    let (attached, d) = (attached(r), r.duration_s);
    let quiet = ConnectionsReport::default();
    let c = match &r.connections {
        Some(c) => c,
        None if attached => &quiet,
        None => return Vec::new(),
    };
    if d <= 0.0 {
        return Vec::new();
    }
    let t = c.total();
    let rate = |n: u64| n as f64 / d;
    let mut out = vec![
        ("closed_by_nginx_per_s", rate(t.closed_by_nginx)),
        ("closed_by_client_per_s", rate(t.closed_by_client)),
        ("closed_by_reset_per_s", rate(t.closed_by_reset)),
    ];
    if attached && c.worker_exit_unknown.is_none() {
        out.push(("closed_by_worker_exit_per_s", rate(t.closed_by_worker_exit)));
    }
    if attached && c.draining_unknown.is_none() {
        out.push(("closed_while_draining_per_s", rate(t.closed_while_draining)));
    }
    // Only where counted (recordings made before it have no count, not a 0), or in a
    // quiet period of attached programs: no close at all, so none without data.
    if c.without_data_counted || r.connections.is_none() {
        out.push(("closed_without_data_per_s", rate(t.closed_without_data())));
    }
    out.push(("resets_sent_per_s", rate(t.resets_sent)));
    out.push(("resets_received_per_s", rate(t.resets_received)));
    if let Some(i) = &t.idle_before_nginx_close {
        if let Some(p) = i.pinned_ms {
            out.push(("idle_before_nginx_close_pinned_ms", p));
        }
        out.push(("idle_before_nginx_close_p50_ms", i.p50_ms as f64));
    }
    if let Some(l) = &t.lifetime {
        out.push(("connection_lifetime_p50_ms", l.p50_ms as f64));
    }
    if let Some(i) = &t.idle_before_client_close {
        out.push(("idle_before_client_close_p50_ms", i.p50_ms as f64));
    }
    let peers = &c.upstream_peers;
    if attached || !peers.is_empty() {
        let connects: u64 = peers.iter().map(|p| p.connects).sum();
        if let Some(n) = requests.filter(|&n| n > 0) {
            out.push(("upstream_connects_per_request", connects as f64 / n as f64));
        }
        let by_peer: u64 = peers.iter().map(|p| p.closed_by_peer).sum();
        out.push(("upstream_closed_by_peer_per_s", rate(by_peer)));
    }
    out
}

/// The QUIC metrics of `r` (its `quic` section) as (key, value) per second of
/// `r.duration_s`: connections when known (`quic.connections`: handshakes completed,
/// or nginx's accepted less the TCP accepts, as its `source` says), and nginx's ends
/// when counted (`quic.ends_source`, the QUIC uprobes): graceful ends with "reached
/// maximum number of requests" (keepalive_requests or keepalive_time) and silent closes
/// at the idle timeout. Empty without `quic` or a duration; no end key in recordings
/// made before the ends were counted.
pub fn quic_metrics(r: &Report) -> Vec<(&'static str, f64)> {
    use crate::model::quic::{QuicEndCall, REACHED_MAX_REQUESTS};
    let (Some(q), d) = (&r.quic, r.duration_s) else {
        return Vec::new();
    };
    if d <= 0.0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    if let Some(n) = q.connections {
        out.push(("quic_connections_per_s", n as f64 / d));
    }
    if q.ends_source.is_some() {
        let max = q.ends_of(QuicEndCall::Shutdown, REACHED_MAX_REQUESTS);
        let idle: u64 = q
            .ends
            .iter()
            .filter(|e| e.call == QuicEndCall::IdleTimeout)
            .map(|e| e.count)
            .sum();
        out.push(("quic_ended_at_max_requests_per_s", max as f64 / d));
        out.push(("quic_idle_closes_per_s", idle as f64 / d));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::model::{
        connections::{IdleReport, PortLifecycle, WorkerCloses},
        upstream_lifecycle::PeerLifecycle,
    };

    /// The golden report (2 workers, recorded before the lifecycle) over 10 s, with
    /// `connections`, its workers' own closes counted when `attached`.
    fn report(connections: Option<ConnectionsReport>, attached: bool) -> Report {
        let mut r: Report = serde_json::from_str(include_str!(
            "../testdata/two_workers_300_connections.report.json"
        ))
        .expect("the golden report");
        r.duration_s = 10.0;
        r.connections = connections;
        for w in &mut r.workers {
            w.connections_closed = attached.then(WorkerCloses::default);
        }
        r
    }

    fn by_key(r: &Report, requests: Option<u64>) -> BTreeMap<&'static str, f64> {
        metrics(r, requests).into_iter().collect()
    }

    /// Two ports: 20 closes by nginx (2 of them by draining workers), 5 by clients, 3
    /// resets, 4 at a worker's exit, 7 resets sent, 9 received; port 80's 12 idle
    /// closes pinned at 2004 ms (between 2000 and 2008, log2 bucket 1024..2047).
    fn two_ports() -> ConnectionsReport {
        let idle = IdleReport {
            count: 12,
            mean_ms: 2004.0,
            min_ms_since_attach: 2000,
            max_ms_since_attach: 2008,
            pinned_ms: Some(2004.0),
            hist: (0..20).map(|b| if b == 10 { 12 } else { 0 }).collect(),
            ..Default::default()
        };
        let port = |port, closed_by_nginx, closed_by_client, resets_sent| PortLifecycle {
            port,
            closed_by_nginx,
            closed_by_client,
            resets_sent,
            ..Default::default()
        };
        let p80 = PortLifecycle {
            closed_while_draining: 2,
            closed_by_worker_exit: 4,
            closed_by_reset: 3,
            resets_received: 9,
            closed_without_data_by_client: 3,
            idle_before_nginx_close: Some(idle.clone()),
            // 12 lifetimes of 1.5 s: the idle time's histogram, kept within 1500 ms.
            lifetime: Some(IdleReport {
                mean_ms: 1500.0,
                min_ms_since_attach: 1500,
                max_ms_since_attach: 1500,
                pinned_ms: None,
                ..idle.clone()
            }),
            // The 5 clients closed after 300 ms idle.
            idle_before_client_close: Some(IdleReport {
                count: 5,
                mean_ms: 300.0,
                min_ms_since_attach: 300,
                max_ms_since_attach: 300,
                pinned_ms: Some(300.0),
                hist: (0..20).map(|b| if b == 8 { 5 } else { 0 }).collect(),
                ..idle
            }),
            ..port(80, 12, 5, 7)
        };
        ConnectionsReport {
            ports: vec![p80, port(443, 8, 0, 0)],
            without_data_counted: true,
            ..Default::default()
        }
    }

    fn peer(connects: u64, closed_by_peer: u64) -> PeerLifecycle {
        PeerLifecycle {
            peer: "127.0.0.2:8080".into(),
            connects,
            closed_by_peer,
            ..Default::default()
        }
    }

    #[test]
    fn closes_and_resets_are_per_second_and_the_pinned_idle_time_is_kept() {
        let m = by_key(&report(Some(two_ports()), true), Some(300));
        assert_eq!(m["closed_by_nginx_per_s"], 2.0);
        assert_eq!(m["closed_by_client_per_s"], 0.5);
        assert_eq!(m["closed_by_reset_per_s"], 0.3);
        assert_eq!(m["closed_by_worker_exit_per_s"], 0.4);
        assert_eq!(m["closed_while_draining_per_s"], 0.2);
        assert_eq!(m["resets_sent_per_s"], 0.7);
        assert_eq!(m["resets_received_per_s"], 0.9);
        assert_eq!(m["closed_without_data_per_s"], 0.3);
        assert_eq!(m["idle_before_nginx_close_pinned_ms"], 2004.0);
        // p50 of 12 closes in 1024..2047 ms (1535), kept within 2000..2008.
        assert_eq!(m["idle_before_nginx_close_p50_ms"], 2000.0);
        assert_eq!(m["connection_lifetime_p50_ms"], 1500.0);
        assert_eq!(m["idle_before_client_close_p50_ms"], 300.0);
        // Attached, no peer counted: no upstream connect in the period.
        assert_eq!(m["upstream_connects_per_request"], 0.0);
        assert_eq!(m["upstream_closed_by_peer_per_s"], 0.0);
        assert_eq!(m.len(), METRICS.len(), "{m:?}");
        // A recording made before they were counted: no such metric, not a 0.
        let mut old = two_ports();
        old.without_data_counted = false;
        let m = by_key(&report(Some(old), true), Some(300));
        assert!(!m.contains_key("closed_without_data_per_s"), "{m:?}");
    }

    #[test]
    fn idle_times_not_pinned_give_the_p50_alone() {
        let mut c = two_ports();
        let idle = c.ports[0].idle_before_nginx_close.as_mut().unwrap();
        // 2 closes at 75 s (keepalive_timeout 75s): too few to be pinned.
        (idle.count, idle.pinned_ms, idle.mean_ms) = (2, None, 75_002.0);
        (idle.min_ms_since_attach, idle.max_ms_since_attach) = (75_000, 75_004);
        idle.hist = (0..20).map(|b| if b == 16 { 2 } else { 0 }).collect();
        let m = by_key(&report(Some(c), true), None);
        assert!(
            !m.contains_key("idle_before_nginx_close_pinned_ms"),
            "{m:?}"
        );
        assert_eq!(m["idle_before_nginx_close_p50_ms"], 75_004.0);
    }

    #[test]
    fn upstream_connects_are_per_request_and_the_peers_closes_per_second() {
        let mut c = two_ports();
        c.upstream_peers = vec![peer(30, 10), peer(10, 5)];
        let r = report(Some(c), true);
        let m = by_key(&r, Some(200));
        assert_eq!(m["upstream_connects_per_request"], 0.2);
        assert_eq!(m["upstream_closed_by_peer_per_s"], 1.5);
        // Requests unknown (or none): no connects per request.
        for requests in [None, Some(0)] {
            let m = by_key(&r, requests);
            assert!(!m.contains_key("upstream_connects_per_request"));
            assert_eq!(m["upstream_closed_by_peer_per_s"], 1.5);
        }
    }

    /// Nothing happened in the period (the report then has no `connections`) while
    /// the programs were attached: counted 0, not unknown; no idle time, no lifetime.
    #[test]
    fn a_quiet_period_of_attached_programs_counts_zero() {
        let m = by_key(&report(None, true), Some(300));
        let timed = |k: &str| k.starts_with("idle_") || k.starts_with("connection_lifetime_");
        for d in METRICS.iter().filter(|d| !timed(d.0)) {
            assert_eq!(m.get(d.0), Some(&0.0), "{}", d.0);
        }
        assert_eq!(m.len(), METRICS.len() - 4, "{m:?}");
    }

    #[test]
    fn without_connections_or_what_tells_closes_apart_the_keys_are_absent() {
        // --no-lifecycle, or a recording made before the lifecycle.
        let mut r = report(None, false);
        r.connections_not_traced =
            Some("the connection lifecycle tracepoints are not attached (--no-lifecycle)".into());
        assert!(metrics(&r, Some(300)).is_empty());
        let all = crate::analysis::compare::metrics(&r);
        assert!(METRICS.iter().all(|d| !all.contains_key(d.0)), "{all:?}");
        // Draining workers' and exiting workers' closes not told apart.
        let mut c = two_ports();
        c.draining_unknown = Some("the uprobe is not attached".into());
        c.worker_exit_unknown = Some("task_struct.flags not in BTF".into());
        let m = by_key(&report(Some(c), true), Some(300));
        assert!(!m.contains_key("closed_while_draining_per_s"));
        assert!(!m.contains_key("closed_by_worker_exit_per_s"));
        assert_eq!(m["closed_by_nginx_per_s"], 2.0);
        // A recording from before the workers' own closes: neither is known, nor are
        // the upstream connects when no peer was counted.
        let m = by_key(&report(Some(two_ports()), false), Some(300));
        for k in [
            "closed_while_draining_per_s",
            "closed_by_worker_exit_per_s",
            "upstream_connects_per_request",
            "upstream_closed_by_peer_per_s",
        ] {
            assert!(!m.contains_key(k), "{k}: {m:?}");
        }
        assert_eq!(m["resets_received_per_s"], 0.9);
    }

    /// 12 QUIC connections in 10 s, 7 ended at keepalive_requests and 3 closed at the
    /// idle timeout: per second in `compare`'s metrics; without the ends counted (an
    /// older recording), only the connections.
    #[test]
    fn quic_connections_and_nginx_s_ends_are_compared_per_second() {
        use crate::model::quic::{QuicEnd, QuicEndCall, QuicReport, REACHED_MAX_REQUESTS};
        let end = |call, reason: Option<&str>, count| QuicEnd {
            call,
            code: 0x100,
            reason: reason.map(str::to_string),
            count,
        };
        let mut r = report(None, true);
        r.quic = Some(QuicReport {
            udp_ports: vec![8443],
            connections: Some(12),
            ends: vec![
                end(QuicEndCall::Shutdown, Some(REACHED_MAX_REQUESTS), 7),
                end(QuicEndCall::Close, Some(REACHED_MAX_REQUESTS), 6),
                end(QuicEndCall::IdleTimeout, None, 3),
            ],
            ends_source: Some("uprobes".into()),
            ..Default::default()
        });
        let all = crate::analysis::compare::metrics(&r);
        assert_eq!(all["quic_connections_per_s"], 1.2);
        assert_eq!(all["quic_ended_at_max_requests_per_s"], 0.7);
        assert_eq!(all["quic_idle_closes_per_s"], 0.3);
        r.quic.as_mut().unwrap().ends_source = None;
        let m: BTreeMap<_, _> = quic_metrics(&r).into_iter().collect();
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(
            crate::analysis::compare::metric_def("quic_idle_closes_per_s").0,
            "QUIC connections nginx closed at the idle timeout per second"
        );
    }
}
