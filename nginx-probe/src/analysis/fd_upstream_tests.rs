//! Unit tests of [`super`]: upstream_keepalive_off and fd_exhaustion.

use super::super::verdict::judge;
use super::*;

use crate::analysis::inputs::w;

#[test]
fn sampled_connects_per_s_divide_by_the_in_window_seconds() {
    // 12 s judged, 3 s of windows: 6000 connects and 6000 requests in the windows.
    let mut a = w(1, 4, 6000);
    a.upstream_connects = 6000;
    a.upstream_established = 6000;
    let schedule = crate::model::sampling::Schedule::new(1.0, 4.0).unwrap();
    let cov = crate::model::sampling::Coverage {
        windows: 3,
        open_s: 3.0,
        requests: Some(6000),
        open_now: false,
    };
    let detail =
        crate::model::sampling::DetailReport::new(&schedule, &cov, 12.0, Some(24_000), (0, 0, 0));
    let v = judge(&Inputs {
        workers: vec![a],
        period_s: 12.0,
        requests: Some(24_000),
        detail: Some(detail),
        ..Inputs::default()
    });
    let u = v.iter().find(|v| v.id == "upstream_keepalive_off").unwrap();
    assert_eq!(u.evidence["connects_per_s"], serde_json::json!(2000.0));
    assert_eq!(u.evidence["in_window_s"], serde_json::json!(3.0));
    assert_eq!(
        u.evidence["connects_per_s_over"],
        serde_json::json!("in-window seconds")
    );
}

#[test]
fn upstream_keepalive_rule_needs_exact_requests_and_a_connect_per_request() {
    let mut hist = vec![0u64; nginx_probe_common::HIST_BUCKETS];
    hist[15] = 400; // 32.8-65.5 us
    let mut a = w(1, 4, 400);
    a.upstream_connects = 400;
    a.upstream_established = 400;
    a.connect_hist = hist.clone();
    a.connect_max_ns = 60_000;
    let v = judge(&Inputs {
        workers: vec![a.clone()],
        period_s: 4.0,
        requests: Some(400),
        ..Inputs::default()
    });
    let ids: Vec<&str> = v.iter().map(|v| v.id.as_str()).collect();
    assert_eq!(ids, ["upstream_keepalive_off"]);
    assert_eq!(v[0].severity, Severity::Warning);
    assert_eq!(
        v[0].evidence["connects_per_request"],
        serde_json::json!(1.0)
    );
    assert_eq!(v[0].evidence["connects_per_s"], serde_json::json!(100.0));
    assert_eq!(v[0].evidence["connect_p99_us"], serde_json::json!(60.0));
    assert_eq!(v[0].directives[0], "keepalive (upstream block)");
    assert!(v[0]
        .advice
        .contains("to the upstream for every proxied request;"));
    // 0.6 per request is said as such, not as every request.
    let mut some = a.clone();
    some.upstream_established = 240;
    let v = judge(&Inputs {
        workers: vec![some],
        requests: Some(400),
        ..Inputs::default()
    });
    assert!(
        v[0].advice
            .contains("to the upstream for 60 of every 100 requests nginx counted;"),
        "{}",
        v[0].advice
    );
    // Estimated requests (writev counts the upstream request too): quiet.
    assert!(judge(&Inputs {
        workers: vec![a.clone()],
        requests: None,
        ..Inputs::default()
    })
    .is_empty());
    // Pooled upstream connections: quiet.
    let mut pooled = a.clone();
    pooled.upstream_connects = 2;
    pooled.upstream_established = 2;
    assert!(judge(&Inputs {
        workers: vec![pooled],
        requests: Some(400),
        ..Inputs::default()
    })
    .is_empty());
    // Out of local ports: critical.
    a.upstream_errors.insert("EADDRNOTAVAIL".into(), 9);
    let v = judge(&Inputs {
        workers: vec![a],
        requests: Some(400),
        ..Inputs::default()
    });
    assert_eq!(v[0].severity, Severity::Critical);
    assert!(
        v[0].advice
            .contains("(EADDRNOTAVAIL: 9 connects failed for lack of a local port);"),
        "{}",
        v[0].advice
    );
}

/// Case 18: local ports used up. Of 1000 connects only 40 were established, 960
/// failed with EADDRNOTAVAIL: judged on attempts, critical, with the port range,
/// TIME-WAIT and the peer the error log names.
#[test]
fn port_exhaustion_is_judged_on_attempts_with_the_port_range_and_peer() {
    let mut a = w(1, 1000, 1000);
    a.upstream_connects = 1000;
    a.upstream_established = 40;
    a.upstream_errors.insert("EADDRNOTAVAIL".into(), 960);
    let inp = Inputs {
        workers: vec![a],
        requests: Some(1000),
        local_ports: Some(crate::model::local_ports::LocalPortsReport {
            tcp_migrate_req: None,
            range: Some([40000, 40499]),
            tcp_tw_reuse: Some(0),
            time_wait: Some(500),
        }),
        nginx_errors: Some(crate::model::NginxErrorsReport {
            readable: true,
            upstream_peers: vec![crate::model::PeerErrorsReport {
                peer: "http://127.0.0.1:8080".into(),
                lines: 960,
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Inputs::default()
    };
    let mut out = Vec::new();
    upstream_keepalive_off(&inp, &mut out);
    assert_eq!(out.len(), 1, "{out:?}");
    let v = &out[0];
    assert_eq!(v.severity, Severity::Critical);
    assert_eq!(v.evidence["attempts_per_request"], serde_json::json!(1.0));
    assert_eq!(
        v.evidence["established_per_request"],
        serde_json::json!(0.04)
    );
    assert!(
        v.advice.starts_with(
            "1.00 new upstream connections per request (0.04 established, plus connects that found no local port; 1.00 connect() calls per request in all, failures included;"
        ),
        "{}",
        v.advice
    );
    assert!(v.advice.contains("(EADDRNOTAVAIL: 960 connects failed for lack of a local port; local ports 40000-40499 (500, net.ipv4.ip_local_port_range in nginx's network namespace), 500 sockets in TIME-WAIT there (/proc/<pid>/net/sockstat, every process of the namespace), net.ipv4.tcp_tw_reuse 0; peers in nginx's error log: http://127.0.0.1:8080 (960 lines))"), "{}", v.advice);
    assert_eq!(v.directives[0], "keepalive (upstream block)");
    // Sampled detail: the count is the windows', and the advice says so.
    let schedule = crate::model::sampling::Schedule::new(1.0, 20.0).unwrap();
    let cov = crate::model::sampling::Coverage {
        windows: 1,
        open_s: 1.0,
        requests: Some(1000),
        open_now: false,
    };
    let sampled = Inputs {
        detail: Some(crate::model::sampling::DetailReport::new(
            &schedule,
            &cov,
            20.0,
            Some(20_000),
            (0, 0, 0),
        )),
        ..inp
    };
    let mut out = Vec::new();
    upstream_keepalive_off(&sampled, &mut out);
    assert!(
        out[0]
            .advice
            .contains("(EADDRNOTAVAIL: 960 connects failed for lack of a local port in the detail windows; local ports"),
        "{}",
        out[0].advice
    );
}

/// A dead upstream (`proxy_pass` to a port nothing listens on): 300 requests, 300
/// connects, all ECONNREFUSED. Nothing was established, so nothing could be kept
/// alive: silent. Half refused, half established at 0.5 per request still fires.
#[test]
fn refused_upstream_connects_are_not_keepalive_off() {
    let mut a = w(1, 300, 300);
    a.upstream_connects = 300;
    a.upstream_errors.insert("ECONNREFUSED".into(), 300);
    let inp = |a: WorkerInput| Inputs {
        workers: vec![a],
        requests: Some(300),
        ..Inputs::default()
    };
    let mut out = Vec::new();
    upstream_keepalive_off(&inp(a.clone()), &mut out);
    assert!(out.is_empty(), "{out:?}");
    // Too few established to judge (149 of 300 requests): silent.
    a.upstream_errors.insert("ECONNREFUSED".into(), 151);
    a.upstream_established = 149;
    upstream_keepalive_off(&inp(a.clone()), &mut out);
    assert!(out.is_empty(), "{out:?}");
    a.upstream_errors.insert("ECONNREFUSED".into(), 150);
    a.upstream_established = 150;
    upstream_keepalive_off(&inp(a), &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].evidence["established"], serde_json::json!(150));
    assert_eq!(
        out[0].evidence["established_per_request"],
        serde_json::json!(0.5)
    );
    assert_eq!(
        out[0].evidence["connects_per_request"],
        serde_json::json!(1.0)
    );
}

/// Trial 18: a dead single-server block's 85934 refused requests beside 24914
/// proxied to a live peer with one connect each: 0.22 established per request, and
/// no verdict. Over the tries of the peers that took connections (an access log
/// holding every request, `$upstream_addr`): 1.00 per try, and it fires, said per try.
#[test]
fn a_dead_peer_s_requests_do_not_hide_a_live_peer_without_a_pool() {
    use crate::model::access_log::{AccessLogReport, UpstreamOutcomeReport};
    use crate::model::connections::ConnectionsReport;
    use crate::model::upstream_lifecycle::PeerLifecycle;
    let peer = |p: &str, connects: u64, established: u64| PeerLifecycle {
        peer: p.into(),
        connects,
        established,
        connect_failed: connects - established,
        ..Default::default()
    };
    let tries = |p: &str, tries: u64| UpstreamOutcomeReport {
        peer: p.into(),
        tries,
        ..Default::default()
    };
    let mut wk = w(1, 110_848, 110_848);
    wk.upstream_connects = 110_858;
    wk.upstream_established = 24_919;
    let mut inp = Inputs {
        workers: vec![wk],
        requests: Some(110_848),
        connections: Some(ConnectionsReport {
            upstream_peers: vec![
                peer("127.0.0.1:19511", 24_914, 24_914),
                peer("127.0.0.1:19512", 5, 0),
                peer("127.0.0.1:19513", 5, 5),
                peer("127.0.0.1:19514", 85_934, 0),
            ],
            ..Default::default()
        }),
        ..Inputs::default()
    };
    let mut out = Vec::new();
    upstream_keepalive_off(&inp, &mut out);
    assert!(out.is_empty(), "no access log: per request only, {out:?}");
    inp.access_log = Some(AccessLogReport {
        lines: 110_848,
        statuses: [("200".to_string(), 24_914), ("502".to_string(), 85_934)].into(),
        counts_every_request: true,
        upstreams: vec![
            tries("127.0.0.1:19511", 24_914),
            tries("127.0.0.1:19512", 5),
            tries("127.0.0.1:19513", 5),
            tries("127.0.0.1:19514", 85_934),
        ],
        ..Default::default()
    });
    upstream_keepalive_off(&inp, &mut out);
    assert_eq!(out.len(), 1, "{out:?}");
    let v = &out[0];
    assert_eq!(v.evidence["tries"], serde_json::json!(24_919));
    assert_eq!(v.evidence["requests"], serde_json::json!(110_848));
    assert_eq!(
        v.evidence["established_per_request"],
        serde_json::json!(1.0)
    );
    assert!(
        v.advice.starts_with("1.00 new upstream connections per try of 127.0.0.1:19511, 127.0.0.1:19513 (their 24919 tries in the access log's $upstream_addr; nginx's 110848 requests also hold others"),
        "{}",
        v.advice
    );
}

#[test]
fn fd_rule_quotes_open_file_cache_as_configured() {
    use crate::model::config::{ConfigReport, ConfigValue, DEFAULT};
    let mut b = w(1, 1, 3000);
    b.fd_limit = Some(256);
    b.emfile = 2755;
    b.fd_errors.insert("openat".into(), (2755, 0));
    b.files_peak = Some(250);
    let value = |scope: &str, value: &str, at: &str| ConfigValue {
        directive: "open_file_cache".into(),
        scope: scope.into(),
        value: value.into(),
        at: at.into(),
        not_loaded: false,
        unread_may_set: false,
    };
    let judged = |values: Vec<ConfigValue>| {
        let v = judge(&Inputs {
            workers: vec![b.clone()],
            config: Some(ConfigReport {
                values,
                ..ConfigReport::default()
            }),
            ..Inputs::default()
        });
        v.into_iter()
            .find(|v| v.id == "fd_exhaustion")
            .expect("fires")
    };
    // Read and off everywhere: not the cache, and not advised.
    let f = judged(vec![value("http", "off", DEFAULT)]);
    assert!(
        f.advice.contains("250 open in a worker; open() failed with EMFILE; not open_file_cache's: it is off (default) everywhere)"),
        "{}",
        f.advice
    );
    assert!(!f.directives.iter().any(|d| d == "open_file_cache max="));
    // Set in one location: quoted with file:line, and advised.
    let f = judged(vec![
        value("http", "off", DEFAULT),
        value("server _ location /", "max=1000", "/e/n.conf:9"),
    ]);
    assert!(
        f.advice
            .contains("; open_file_cache max=1000 (/e/n.conf:9) keeps them open up to its max)"),
        "{}",
        f.advice
    );
    assert!(f.directives.iter().any(|d| d == "open_file_cache max="));
}

#[test]
fn fd_rule_names_what_holds_the_fds() {
    // socket() failing while connecting to upstream: upstream connections first.
    let mut a = w(1, 300, 300);
    a.fd_limit = Some(256);
    a.emfile = 156;
    a.fd_errors.insert("socket".into(), (156, 0));
    a.upstream_connects = 244;
    let v = judge(&Inputs {
        workers: vec![a],
        ..Inputs::default()
    });
    let f = v.iter().find(|v| v.id == "fd_exhaustion").expect("fires");
    assert!(
        f.advice.contains("got EMFILE on socket() 156"),
        "{}",
        f.advice
    );
    assert!(
        f.advice.contains("held by upstream connections"),
        "{}",
        f.advice
    );
    assert!(!f.advice.contains("open_file_cache"), "{}", f.advice);
    assert_eq!(
        f.evidence["by_syscall"]["socket"]["EMFILE"],
        serde_json::json!(156)
    );
    // open() failing with the cache holding most of the limit: open_file_cache.
    let mut b = w(1, 1, 3000);
    b.fd_limit = Some(256);
    b.emfile = 2755;
    b.fd_errors.insert("openat".into(), (2755, 0));
    b.files_peak = Some(250);
    let v = judge(&Inputs {
        workers: vec![b],
        ..Inputs::default()
    });
    let f = v.iter().find(|v| v.id == "fd_exhaustion").expect("fires");
    assert!(
        f.advice
            .contains("held by regular files (up to 250 open in a worker; open() failed with EMFILE; open_file_cache, where configured"),
        "{}",
        f.advice
    );
    assert!(!f.advice.contains("upstream"), "{}", f.advice);
    assert!(f.directives.iter().any(|d| d == "open_file_cache max="));
    // accept4 only, sockets counted: sockets, never "client connections" (a
    // worker's sockets include nginx's channels to the other workers, case 21).
    let mut c = w(1, 10, 10);
    c.fd_limit = Some(64);
    c.emfile = 3;
    c.sockets_peak = Some(56);
    c.fd_errors.insert("accept4".into(), (3, 0));
    let v = judge(&Inputs {
        workers: vec![c.clone()],
        ..Inputs::default()
    });
    let f = v.iter().find(|v| v.id == "fd_exhaustion").expect("fires");
    assert!(
        f.advice.contains("held by sockets (up to 56 open in a worker: client connections, listeners and nginx's channels to the other workers, not told apart)"),
        "{}",
        f.advice
    );
    assert!(!f.advice.contains("open_file_cache"), "{}", f.advice);
    // Nothing classified: unknown.
    c.sockets_peak = None;
    let v = judge(&Inputs {
        workers: vec![c],
        ..Inputs::default()
    });
    let f = v.iter().find(|v| v.id == "fd_exhaustion").expect("fires");
    assert!(
        f.advice
            .contains("held by unknown (the workers' fds were not classified)"),
        "{}",
        f.advice
    );
}

#[test]
fn fd_rule_fires_on_emfile_or_thin_headroom() {
    let mut a = w(1, 10, 10);
    a.fds_peak = Some(100);
    a.fd_limit = Some(1024);
    let ok = Inputs {
        workers: vec![a.clone()],
        ..Inputs::default()
    };
    assert!(judge(&ok).is_empty());
    let mut thin = a.clone();
    thin.fds_peak = Some(960);
    let v = judge(&Inputs {
        workers: vec![thin],
        ..Inputs::default()
    });
    assert_eq!(v[0].id, "fd_exhaustion");
    assert_eq!(v[0].severity, Severity::Warning);
    let mut refused = a;
    refused.emfile = 3;
    refused.fd_limit = Some(64);
    let v = judge(&Inputs {
        workers: vec![refused],
        ..Inputs::default()
    });
    assert_eq!(v[0].severity, Severity::Critical);
    assert!(v[0].advice.contains("(64)"), "{}", v[0].advice);
    assert!(v[0].directives.iter().any(|d| d == "worker_rlimit_nofile"));
}

#[test]
fn the_time_wait_side_is_said_as_measured_or_as_unknown() {
    let mut inp = Inputs::default();
    assert_eq!(time_wait_side(&inp), TIME_WAIT_SIDE);
    inp.connections = Some(crate::model::connections::ConnectionsReport {
        upstream_peers: vec![crate::model::upstream_lifecycle::PeerLifecycle {
            peer: "127.0.0.2:8080".into(),
            closed_by_nginx: 300,
            closed_by_peer: 2,
            ..Default::default()
        }],
        ..Default::default()
    });
    let s = time_wait_side(&inp);
    assert!(s.contains("nginx closed 300 first, the upstream 2"), "{s}");
    assert!(s.contains("mostly nginx's"), "{s}");
}
