//! Unit tests of [`super`]: who closed, and what nginx's closes and resets say.

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
                    ..Default::default()
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
    v.iter()
        .any(|v| v.id == "keepalive_timeout_closes" || v.id == "nginx_timeout_closes")
}

/// A reload whose draining workers closed 40 idle connections, beside 12 closes
/// pinned at 2.0 s by the serving ones: who closed says the draining closes and
/// gives no keepalive advice when they are most of nginx's; the timeout verdict
/// counts the serving workers' 12 only.
#[test]
fn closes_by_draining_workers_are_no_timeout_and_no_keepalive_advice() {
    let mut i = inp(52, 2, Some(2004.0), 2008);
    if let Some(c) = i.connections.as_mut() {
        c.ports[0].closed_while_draining = 40;
        c.ports[0].closed_while_draining_idle = 40;
        c.ports[0].idle_before_nginx_close.as_mut().unwrap().count = 12;
    }
    let (ev, sentence) = who_closed(&i).expect("closes");
    assert_eq!(ev["nginx_draining"], 40);
    assert!(
        sentence.contains("nginx closed 52 (40 of them by draining workers) first")
            && sentence.contains("most of nginx's closes were by draining workers")
            && !sentence.contains("keepalive_timeout"),
        "{sentence}"
    );
    let v = judged(&i);
    assert_eq!(v.evidence["closed_by_draining_workers"], 40);
    assert!(
        v.advice
            .starts_with("nginx closed 12 of 54 connections itself"),
        "{}",
        v.advice
    );
    if let Some(c) = i.connections.as_mut() {
        c.ports[0].closed_while_draining = 45;
    }
    assert!(
        !fired(&i),
        "7 serving closes are under the 10 the rule needs"
    );
}

/// The one verdict on nginx's timed closes.
fn judged(i: &Inputs) -> Verdict {
    let mut v = Vec::new();
    keepalive_timeout_closes(i, &mut v);
    assert_eq!(v.len(), 1, "{v:?}");
    v.remove(0)
}

/// The trial's nginx 1.22: `listen 80`, keepalive_timeout not set (75s default),
/// `client_header_timeout` at n.conf:12 set to `header`.
fn trial_config(header: &str, keepalive: Option<&str>) -> crate::model::config::ConfigReport {
    use crate::model::config::{ConfigReport, ConfigValue, ListenValue};
    let ka = match keepalive {
        Some(k) => ConfigValue::of("keepalive_timeout", "http", k, "/e/n.conf:11"),
        None => ConfigValue::of("keepalive_timeout", "http", "75s", "default"),
    };
    ConfigReport {
        values: vec![
            ka,
            ConfigValue::of("client_header_timeout", "http", header, "/e/n.conf:12"),
            ConfigValue::of("client_body_timeout", "http", "60s", "default"),
            ConfigValue::of("send_timeout", "http", "60s", "default"),
            ConfigValue::of("lingering_timeout", "http", "5s", "default"),
        ],
        listens: vec![ListenValue {
            scope: "server t".into(),
            address: "127.0.0.1:80".into(),
            at: "/e/n.conf:20".into(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn timed_out_logs(i: &mut Inputs, n: u64) {
    let mut classes = BTreeMap::new();
    classes.insert(
        "client_timed_out".to_string(),
        crate::model::ErrorClassReport {
            count: n,
            levels: [("info".to_string(), n)].into(),
            directive: "client_header_timeout".into(),
            group: "other".into(),
        },
    );
    i.nginx_errors = Some(crate::model::NginxErrorsReport {
        readable: true,
        classes,
        ..Default::default()
    });
    i.access_log = Some(crate::model::access_log::AccessLogReport {
        lines: n,
        statuses: [("408".to_string(), n)].into(),
        ..Default::default()
    });
}

/// The trial: 12 clients send half a request line, `client_header_timeout 2s`,
/// keepalive_timeout 75s by default: closes at 2.0 s name client_header_timeout
/// with its line, the error log's and access log's counts, never keepalive_timeout
/// nor "idle".
#[test]
fn closes_at_client_header_timeout_name_it_not_keepalive_timeout() {
    let mut i = inp(12, 3, Some(2004.0), 2004);
    i.config = Some(trial_config("2s", None));
    timed_out_logs(&mut i, 12);
    let v = judged(&i);
    assert_eq!(v.id, "nginx_timeout_closes");
    assert_eq!(v.directives, ["client_header_timeout"]);
    assert!(
        v.advice
            .contains("that is client_header_timeout http: 2s (/e/n.conf:12)"),
        "{}",
        v.advice
    );
    assert!(
        v.advice.contains("12 `client timed out` lines"),
        "{}",
        v.advice
    );
    assert!(
        v.advice.contains("the access log 12 responses 408"),
        "{}",
        v.advice
    );
    assert!(!v.advice.contains("idle"), "{}", v.advice);
    assert!(!v.advice.contains("keepalive_timeout"), "{}", v.advice);
    let (_, s) = who_closed(&i).unwrap();
    assert!(s.contains("the value of client_header_timeout"), "{s}");
    assert!(!s.contains("idle 2.0"), "{s}");
}

#[test]
fn closes_at_keepalive_timeout_name_it_with_its_line() {
    let mut i = inp(12, 3, Some(2004.0), 2004);
    i.config = Some(trial_config("60s", Some("2s")));
    let v = judged(&i);
    assert_eq!(v.id, "keepalive_timeout_closes");
    assert!(
        v.advice
            .contains("that is keepalive_timeout http: 2s (/e/n.conf:11)"),
        "{}",
        v.advice
    );
    let (_, s) = who_closed(&i).unwrap();
    assert!(
        s.contains("sat idle 2.0 s, the value of keepalive_timeout"),
        "{s}"
    );
}

/// Trial 11: idle keepalive closes at 60 s, client_body_timeout and send_timeout
/// at their 60s defaults. The error log at info with no `client timed out` rules
/// the request timeouts out; without it they stay candidates.
#[test]
fn request_timeouts_the_logs_rule_out_leave_keepalive_timeout() {
    let mut i = inp(12, 0, Some(60_004.0), 60_004);
    let mut cfg = trial_config("60s", Some("60s"));
    i.config = Some(cfg.clone());
    assert_eq!(judged(&i).id, "nginx_timeout_closes");
    cfg.error_logs = vec![crate::model::config::ConfigValue::of(
        "error_log",
        "main",
        "/l/e.log info",
        "/e/n.conf:2",
    )];
    i.config = Some(cfg.clone());
    i.nginx_errors = Some(crate::model::NginxErrorsReport {
        readable: true,
        ..Default::default()
    });
    let v = judged(&i);
    assert_eq!(v.id, "keepalive_timeout_closes", "{}", v.advice);
    let ruled = v.evidence["timeout_match"]["ruled_out"].to_string();
    assert!(
        ruled.contains(
            "client_header_timeout, client_body_timeout, send_timeout: no `client timed out` line"
        ),
        "{ruled}"
    );
    // At error level the lines would not be there: nothing ruled out.
    cfg.error_logs[0].value = "/l/e.log error".into();
    i.config = Some(cfg);
    assert_eq!(judged(&i).id, "nginx_timeout_closes");
    // keepalive_timeout 5s beside lingering_timeout's 5s default: keepalive alone.
    let mut i = inp(12, 0, Some(5_004.0), 5_004);
    i.config = Some(trial_config("60s", Some("5s")));
    assert_eq!(judged(&i).id, "keepalive_timeout_closes");
}

#[test]
fn closes_matching_no_timeout_or_without_the_config_are_unknown() {
    let mut i = inp(12, 3, Some(2004.0), 2004);
    i.config = Some(trial_config("60s", None));
    let v = judged(&i);
    assert_eq!(v.id, "nginx_timeout_closes");
    assert!(
        v.advice.contains(
            "no configured timeout of nginx matches that (keepalive_timeout http: 75s (default)"
        ),
        "{}",
        v.advice
    );
    assert!(
        v.advice.contains("why nginx closed them is unknown"),
        "{}",
        v.advice
    );
    // Trial 9: part of the configuration not read (keepalive_timeout 2s was in
    // it): which timeout is unknown, the default not taken as nginx's.
    let mut cfg = trial_config("60s", None);
    cfg.errors = vec!["/n/big.conf: not read: 5050022 bytes, over the 4194304 byte limit".into()];
    for v in &mut cfg.values {
        v.unread_may_set = true;
    }
    i.config = Some(cfg);
    let v = judged(&i);
    assert!(
        v.advice.contains("which of nginx's timeouts closed them is unknown: part of nginx's configuration was not read (/n/big.conf: not read: 5050022 bytes, over the 4194304 byte limit), and it may set the timeout; read: keepalive_timeout http: 75s (default; a config file not read may set it)"),
        "{}",
        v.advice
    );
    assert!(!v.advice.contains("no configured timeout"), "{}", v.advice);
    i.config = None;
    let v = judged(&i);
    assert_eq!(v.id, "nginx_timeout_closes");
    assert!(
        v.advice
            .contains("unknown: nginx's configuration was not read"),
        "{}",
        v.advice
    );
    let (_, s) = who_closed(&i).unwrap();
    assert!(s.contains("which timeout is unknown"), "{s}");
}

/// A server listening elsewhere with its own keepalive_timeout does not count.
#[test]
fn only_the_servers_on_the_closing_port_are_matched() {
    let mut i = inp(12, 3, Some(2004.0), 2004);
    let mut cfg = trial_config("60s", None);
    cfg.values.push(crate::model::config::ConfigValue::of(
        "keepalive_timeout",
        "server other",
        "2s",
        "/e/o.conf:3",
    ));
    cfg.listens.push(crate::model::config::ListenValue {
        scope: "server other".into(),
        address: "8081".into(),
        ..Default::default()
    });
    i.config = Some(cfg.clone());
    assert_eq!(judged(&i).id, "nginx_timeout_closes");
    cfg.listens[1].address = "80".into();
    i.config = Some(cfg);
    assert_eq!(judged(&i).id, "keepalive_timeout_closes");
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
    assert!(
        s.contains("closed them 2.0 s after the last data; which timeout is unknown"),
        "{s}"
    );
    // Trial 9: `return 444` for every request: said as such, no keepalive cause.
    let mut dropped = inp(300, 0, Some(1.0), 1);
    dropped.access_log = Some(crate::model::access_log::AccessLogReport {
        lines: 300,
        statuses: [("444".to_string(), 300)].into(),
        ..Default::default()
    });
    let (_, s) = who_closed(&dropped).unwrap();
    assert!(s.contains("nginx's access log has 300 requests answered 444 (`return 444`: nginx closes the connection without a response, as configured; on HTTP/2 only the stream), against 300 closes by nginx"), "{s}");
    assert!(!s.contains("keepalive"), "{s}");
    let (_, s) = who_closed(&inp(0, 50, None, 0)).unwrap();
    assert!(
        s.contains("the clients close their connections: a load"),
        "{s}"
    );
    // With the idle time before the clients' closes measured: right after the
    // exchange, or after a time idle.
    for (ms, says) in [
        (3, "the clients close their connections, right after an exchange (idle before their close p50 3 ms, p99 3 ms: they close once their response is in)"),
        (5000, "the clients close their connections after they sat idle p50 5.0 s, p99 5.0 s (since the last data, read at their FIN)"),
    ] {
        let mut i = inp(0, 50, None, 0);
        if let Some(c) = i.connections.as_mut() {
            let mut hist = vec![0; 32];
            hist[nginx_probe_common::lifecycle::idle_bucket(ms)] = 50;
            c.ports[0].idle_before_client_close = Some(IdleReport {
                count: 50,
                p50_ms: ms,
                p99_ms: ms,
                min_ms_since_attach: ms,
                max_ms_since_attach: ms,
                hist,
                ..Default::default()
            });
        }
        let (e, s) = who_closed(&i).unwrap();
        assert!(s.contains(says), "{s}");
        assert_eq!(e["idle_before_client_close_p99_ms"], ms);
    }
    // Trial 8: 876 health checks closed at once beside 20 clients closed at
    // keepalive_timeout 3s: most right after a response, said so (not "0 ms to
    // 3.0 s idle" alone).
    let mut mixed = inp(896, 0, None, 3004);
    if let Some(i) = mixed
        .connections
        .as_mut()
        .and_then(|c| c.ports[0].idle_before_nginx_close.as_mut())
    {
        i.p50_ms = 0;
        i.min_ms_since_attach = 0;
        i.hist[0] = 876;
        i.hist[11] = 20;
    }
    let (_, s) = who_closed(&mixed).unwrap();
    assert!(s.contains("nginx closed most of them right after a response (idle p50 0 ms; the others after up to 3.0 s idle)"), "{s}");
}

#[test]
fn closes_by_an_exiting_worker_are_not_nginx_closing_idle_connections() {
    let mut i = inp(0, 2, None, 0);
    let p = &mut i.connections.as_mut().unwrap().ports[0];
    p.closed_by_worker_exit = 8;
    let (e, s) = who_closed(&i).unwrap();
    assert_eq!(e["worker_exit"], 8);
    assert_eq!(e["nginx"], 0);
    assert!(
        s.contains("of 10 connections closed, nginx closed 0 first"),
        "{s}"
    );
    assert!(
        s.contains("8 were closed as the worker holding them exited"),
        "{s}"
    );
    assert!(
        s.contains("most were closed by the kernel as their worker exited"),
        "{s}"
    );
    assert!(!s.contains("keepalive"), "{s}");
    assert!(!fired(&i));
}

#[test]
fn resets_of_a_closed_listener_queue_fire_and_name_the_sysctl_read() {
    let (mut i, mut v) = (Inputs::default(), Vec::new());
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
            ..Default::default()
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
    // Trial 14: `nginx -s stop` under wrk, 50 queued connections reset as the master
    // closed its listeners: its shutdown, a warning with no reuseport advice.
    if let Some(c) = i.connections.as_mut() {
        c.ports[0].resets_of_closed_listener_queue = 50;
    }
    i.master_exited = true;
    v.clear();
    listener_closed_resets(&i, &mut v);
    assert_eq!(v[0].severity, Severity::Warning);
    assert!(v[0].directives.is_empty(), "{:?}", v[0].directives);
    assert!(
        v[0].advice.contains("the 50 connection(s) queued on them")
            && v[0].advice.contains("The run ended with the master's exit"),
        "{}",
        v[0].advice
    );
    assert!(!v[0].advice.contains("tcp_migrate_req"), "{}", v[0].advice);
}
