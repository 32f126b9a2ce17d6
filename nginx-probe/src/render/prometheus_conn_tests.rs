//! Unit tests of the TLS and connection-lifecycle families: exact values from a fixture
//! report, and absent when nothing was traced.

use super::*;

#[test]
fn tls_handshakes_render_exact_values_and_are_absent_when_not_traced() {
    let mut r = report();
    let text = render(&r);
    has(
        &text,
        &[
            "nginx_probe_tls_handshakes_total 3",
            "nginx_probe_tls_handshakes_started_total 4",
            "nginx_probe_tls_handshakes_abandoned_total 1",
            "nginx_probe_tls_handshake_calls_total 7",
            "nginx_probe_tls_handshake_call_seconds_total 0.0015",
            "# TYPE nginx_probe_tls_handshakes_total counter",
        ],
    );
    // The uprobes are continuous: the HELP says nothing of detail windows.
    let help = helps(&text)
        .into_iter()
        .find(|l| l.starts_with("# HELP nginx_probe_tls_handshakes_total "))
        .unwrap();
    assert!(!help.contains("detail"), "{help}");
    // Traced but idle: zeros, not absence.
    r.tls = Some(model::TlsReport::default());
    has(
        &render(&r),
        &[
            "nginx_probe_tls_handshakes_total 0",
            "nginx_probe_tls_handshakes_abandoned_total 0",
        ],
    );
    // No libssl, or --no-tls: every TLS family left out, HELP and TYPE included.
    r.tls = None;
    let text = render(&r);
    assert!(!text.contains("nginx_probe_tls_"), "{text}");
}

/// One worker of `r` shutting down with 3 client connections and 4 MiB, and a worker
/// exit on SIGSEGV beside 2 graceful ones.
pub(super) fn with_lifecycle(r: &mut Report) {
    use crate::model::worker_lifecycle::*;
    let w = r
        .workers
        .iter_mut()
        .find(|w| w.alive)
        .expect("a live worker");
    w.lifecycle.state = Some(WorkerState::ShuttingDown);
    let mut exits = ExitCounts::default();
    exits.add(Some(&WorkerExit {
        signal: Some(11),
        ..Default::default()
    }));
    for _ in 0..2 {
        exits.add(Some(&WorkerExit {
            code: Some(0),
            ..Default::default()
        }));
    }
    r.lifecycle = Some(LifecycleReport {
        draining: vec![DrainingGeneration {
            reload_generation: 0,
            workers: vec![DrainingWorker {
                pid: w.pid,
                since_unix_s: 100.0,
                client_connections: Some(3),
                upstream_connections: Some(3),
                rss_bytes: Some(4 << 20),
            }],
            since_unix_s: 100.0,
            since_attach: false,
            draining_s: 7.5,
            client_connections: Some(3),
            upstream_connections: Some(3),
            rss_bytes: Some(4 << 20),
        }],
        exits,
        ..Default::default()
    });
}

#[test]
fn lifecycle_families_have_exact_values_and_are_absent_without_states() {
    let mut r = report();
    let text = render_with(&r, &full_extras(&r.verdicts));
    assert!(
        !text.contains("nginx_probe_workers_shutting_down"),
        "{text}"
    );
    assert!(!text.contains("nginx_probe_worker_exits_total{"), "{text}");
    with_lifecycle(&mut r);
    let text = render_with(&r, &full_extras(&r.verdicts));
    for line in [
        "nginx_probe_workers_shutting_down 1",
        "nginx_probe_draining_generations 1",
        "nginx_probe_draining_longest_seconds 7.5",
        "nginx_probe_draining_client_connections 3",
        "nginx_probe_draining_rss_bytes 4194304",
        "nginx_probe_worker_exits_total{status=\"graceful\"} 2",
        "nginx_probe_worker_exits_total{status=\"signal\"} 1",
        "nginx_probe_worker_signal_exits_total{signal=\"11\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
    }
}
