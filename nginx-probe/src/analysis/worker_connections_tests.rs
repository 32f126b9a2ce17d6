//! Unit tests of [`super`]: nginx's reuse of connections at `worker_connections`,
//! counted and not.

use super::*;
use crate::analysis::inputs::w;
use crate::model::{
    config::{ConfigReport, ConfigValue},
    connections::{ConnectionsReport, PortLifecycle},
};

fn config(limit: &str) -> Option<ConfigReport> {
    Some(ConfigReport {
        values: vec![ConfigValue::of(
            "worker_connections",
            "events",
            limit,
            "n.conf:2",
        )],
        ..Default::default()
    })
}

/// Measured on real nginx (worker_connections 20, 2 workers, wrk -c50 for 5 s): 53061
/// connections, 53026 closed inside ngx_get_connection, 12555 of them by a reset; wrk
/// saw 53010 read errors. Scaled down here, with a request count that would fire
/// keepalive_off (0.67 accepts per request) and no error-log line (level error).
fn reusing(reused: u64, reset: u64, counted: bool) -> Inputs {
    let mut a = w(1, 1_000, 1_500);
    a.closed_reusing = reused / 2;
    let mut b = w(2, 1_000, 1_500);
    b.closed_reusing = reused - reused / 2;
    Inputs {
        workers: vec![a, b],
        requests: Some(3_000),
        requests_source: crate::model::RequestSource::Uprobe,
        config: config("20"),
        connections: Some(ConnectionsReport {
            ports: vec![PortLifecycle {
                port: 80,
                established: 2_000,
                closed_by_nginx: 2_000 - reset,
                closed_by_reset: reset,
                closed_by_nginx_reset: reset,
                closed_reusing_connections: reused,
                closed_reusing_connections_reset: reset,
                ..PortLifecycle::default()
            }],
            reusing_counted: counted,
            reusing_unknown: (!counted)
                .then(|| "the uprobe on ngx_get_connection is not attached: no symbol".into()),
            ..ConnectionsReport::default()
        }),
        ..Inputs::default()
    }
}

/// Trial 13: `worker_connections 20` under 50 clients, error_log at its default
/// level: nginx's reuse of connections was put on clients asking for `Connection:
/// close`. Counted, it fires `worker_connections_exhausted` (critical: requests lost
/// to resets) and `keepalive_off` stays silent.
#[test]
fn counted_reuse_is_worker_connections_exhausted_and_no_keepalive_off() {
    let inp = reusing(1_500, 400, true);
    let v = crate::analysis::verdict::judge(&inp);
    let ids: Vec<&str> = v.iter().map(|v| v.id.as_str()).collect();
    assert!(!ids.contains(&"keepalive_off"), "{ids:?}");
    let x = v
        .iter()
        .find(|v| v.id == "worker_connections_exhausted")
        .unwrap_or_else(|| panic!("{ids:?}"));
    assert_eq!(x.severity, Severity::Critical);
    assert_eq!(x.evidence["closed_reusing_connections"], 1_500);
    assert_eq!(x.evidence["closed_reusing_connections_reset"], 400);
    assert_eq!(x.evidence["workers"][1]["closed_reusing_connections"], 750);
    assert!(
        x.advice.starts_with("nginx ran out of worker_connections (20 at n.conf:2): its workers closed 1500 client connections to reuse them for new ones (closes inside nginx's ngx_get_connection"),
        "{}",
        x.advice
    );
    assert!(
        x.advice
            .contains("; 400 of them with a request in that nginx never read"),
        "{}",
        x.advice
    );
    // Trial 14: keepalive_timeout 0 configured: nginx's own setting, keepalive_off
    // still says it beside the reuse.
    let mut k = reusing(1_500, 400, true);
    if let Some(c) = k.config.as_mut() {
        c.values.push(ConfigValue::of(
            "keepalive_timeout",
            "http",
            "0",
            "n.conf:5",
        ));
    }
    let ids: Vec<String> = crate::analysis::verdict::judge(&k)
        .into_iter()
        .map(|v| v.id)
        .collect();
    assert!(ids.iter().any(|i| i == "keepalive_off"), "{ids:?}");
    // No reset: nobody lost a request, a warning.
    let v = crate::analysis::verdict::judge(&reusing(1_500, 0, true));
    let x = v
        .iter()
        .find(|v| v.id == "worker_connections_exhausted")
        .unwrap();
    assert_eq!(x.severity, Severity::Warning);
}

/// Counted and none: worker_connections is ruled out, even with a worker's sampled
/// sockets at the limit; not counted: the sampled peak is a candidate, said as such,
/// and no verdict fires from it.
#[test]
fn no_reuse_counted_rules_worker_connections_out_and_the_peak_is_only_a_candidate() {
    let mut inp = reusing(0, 0, true);
    inp.workers[0].sockets_peak = Some(20);
    assert_eq!(worker_connections_reached(&inp), None);
    assert_eq!(
        and_worker_connections(&inp, &["keepalive_timeout"]),
        ["keepalive_timeout"]
    );
    let v = crate::analysis::verdict::judge(&inp);
    assert!(
        v.iter().all(|v| v.id != "worker_connections_exhausted"),
        "{v:?}"
    );
    inp.connections.as_mut().unwrap().reusing_counted = false;
    assert!(worker_connections_reached(&inp)
        .is_some_and(|s| s.ends_with("whether it did here is not counted")));
    let v = crate::analysis::verdict::judge(&inp);
    assert!(
        v.iter().all(|v| v.id != "worker_connections_exhausted"),
        "{v:?}"
    );
    let mut inp = reusing(30, 2, true);
    assert_eq!(
        worker_connections_reached(&inp).as_deref(),
        Some("nginx closed 30 client connections to reuse them for new ones at worker_connections 20 (n.conf:2) (closes inside nginx's ngx_get_connection, uprobe), 2 of them with a request in that it never read (ended by a reset)")
    );
    inp.connections.as_mut().unwrap().reusing_counted = false;
    inp.connections.as_mut().unwrap().ports[0].closed_reusing_connections = 0;
    let v = crate::analysis::verdict::judge(&inp);
    assert!(
        v.iter().all(|v| v.id != "worker_connections_exhausted"),
        "{v:?}"
    );
}

/// The sampled sockets' candidate (no count): at 90% of the limit or more.
#[test]
fn the_sampled_peak_stands_in_only_when_reuse_is_not_counted() {
    let mut inp = Inputs {
        workers: vec![w(1, 10, 10)],
        ..Inputs::default()
    };
    // Trial 13: worker_connections 20, a worker's sockets peaking at 20: reached.
    inp.config = config("20");
    inp.workers[0].sockets_peak = Some(20);
    assert!(worker_connections_reached(&inp).is_some_and(
        |s| s.starts_with("a worker's open sockets reached 20 of worker_connections 20 (n.conf:2;")
    ));
    inp.workers[0].sockets_peak = Some(17);
    assert!(
        worker_connections_reached(&inp).is_none(),
        "17 is under 90%"
    );
}
