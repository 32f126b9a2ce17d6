//! `compare`'s metrics of the connection lifecycle (the report's `connections`, from the
//! TCP tracepoints of the continuous layer): who closed nginx's client connections per
//! second, the idle time before nginx's closes, the upstream connects per request and
//! the upstream peers' closes. A report without `connections` (`--no-lifecycle`, an
//! older recording) has none of these keys: nothing is invented as 0.

use crate::model::Report;

/// The lifecycle metrics as (key, label, unit), in table order after
/// `compare::METRICS` (which reads them as its own definitions).
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

/// The lifecycle metrics of `r` as (key, value): rates over `r.duration_s`, the idle
/// times in ms, the upstream connects over `requests` (nginx's request count, when
/// known). Empty without `connections` or a duration.
pub fn metrics(r: &Report, requests: Option<u64>) -> Vec<(&'static str, f64)> {
    let (Some(c), d) = (&r.connections, r.duration_s) else {
        return Vec::new();
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
        ("closed_by_worker_exit_per_s", rate(t.closed_by_worker_exit)),
        ("closed_while_draining_per_s", rate(t.closed_while_draining)),
        ("resets_sent_per_s", rate(t.resets_sent)),
        ("resets_received_per_s", rate(t.resets_received)),
    ];
    if let Some(i) = &t.idle_before_nginx_close {
        if let Some(p) = i.pinned_ms {
            out.push(("idle_before_nginx_close_pinned_ms", p));
        }
        out.push(("idle_before_nginx_close_p50_ms", i.p50_ms as f64));
    }
    let peers = &c.upstream_peers;
    if !peers.is_empty() {
        let connects: u64 = peers.iter().map(|p| p.connects).sum();
        if let Some(n) = requests.filter(|&n| n > 0) {
            out.push(("upstream_connects_per_request", connects as f64 / n as f64));
        }
        let by_peer: u64 = peers.iter().map(|p| p.closed_by_peer).sum();
        out.push(("upstream_closed_by_peer_per_s", rate(by_peer)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The golden report with the lifecycle sample (20 nginx closes... as built by
    /// `connections::sample_report`) over 10 s.
    fn report(with_connections: bool) -> Report {
        let mut r: Report = serde_json::from_str(include_str!(
            "../testdata/two_workers_300_connections.report.json"
        ))
        .expect("the golden report");
        r.duration_s = 10.0;
        r.connections = with_connections.then(crate::model::connections::sample_report);
        r
    }

    #[test]
    fn rates_idle_and_upstream_are_exact_and_absent_without_connections() {
        assert!(metrics(&report(false), Some(100)).is_empty());
        let r = report(true);
        let t = r.connections.as_ref().unwrap().total();
        let m: std::collections::BTreeMap<_, _> = metrics(&r, Some(100)).into_iter().collect();
        assert_eq!(m["closed_by_nginx_per_s"], t.closed_by_nginx as f64 / 10.0);
        assert_eq!(m["closed_by_client_per_s"], 0.3);
        assert_eq!(m["closed_by_reset_per_s"], 0.1);
        let i = t.idle_before_nginx_close.unwrap();
        assert_eq!(m["idle_before_nginx_close_pinned_ms"], i.pinned_ms.unwrap());
        // The sample's one peer: 10 connects, 10 closed by the peer.
        assert_eq!(m["upstream_connects_per_request"], 0.1);
        assert_eq!(m["upstream_closed_by_peer_per_s"], 1.0);
        let m: std::collections::BTreeMap<_, _> = metrics(&r, None).into_iter().collect();
        assert!(!m.contains_key("upstream_connects_per_request"));
        for d in METRICS
            .iter()
            .filter(|d| d.0 != "upstream_connects_per_request")
        {
            assert!(m.contains_key(d.0), "{}", d.0);
        }
    }
}
