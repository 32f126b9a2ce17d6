//! The nginx rules (refusals, keepalive_requests, worker_connections reuse, CPU quota)
//! through `judge`, with the rules they must not trip.

use crate::analysis::inputs::Inputs;
use crate::analysis::verdict::judge;
use crate::model::{CpuQuotaReport, ErrorClassReport};
use crate::model::{NginxErrorsReport, Severity};

use crate::analysis::inputs::w;

fn errors(classes: &[(&str, u64, &str, &str)]) -> NginxErrorsReport {
    NginxErrorsReport {
        path: Some("/x/error.log".into()),
        readable: true,
        classes: classes
            .iter()
            .map(|(n, c, d, g)| {
                (
                    n.to_string(),
                    ErrorClassReport {
                        count: *c,
                        levels: [("error".to_string(), *c)].into(),
                        directive: d.to_string(),
                        group: g.to_string(),
                    },
                )
            })
            .collect(),
        ..Default::default()
    }
}

/// Upstream lines from an nginx whose configuration, read whole, passes nothing to an
/// upstream (a trial's forged `upstream timed out` lines, past 2 KiB, on a static
/// server): no `upstream_errors`; with one `proxy_pass`, or a `stream` block, they
/// stand.
#[test]
fn upstream_lines_from_an_nginx_that_proxies_nothing_are_not_counted() {
    use crate::model::config::ConfigReport;
    let mut cfg = ConfigReport {
        main_file: "/x/nginx.conf".into(),
        stream_block: Some(false),
        upstream_passes: Some(0),
        ..ConfigReport::default()
    };
    let fired = |cfg: &ConfigReport| {
        let inp = Inputs {
            workers: vec![w(1, 10, 30), w(2, 10, 25)],
            requests: Some(55),
            nginx_errors: Some(errors(&[(
                "upstream_read_timeout",
                40,
                "proxy_read_timeout",
                "upstream",
            )])),
            config: Some(cfg.clone()),
            ..Inputs::default()
        };
        judge(&inp).into_iter().any(|v| v.id == "upstream_errors")
    };
    assert!(!fired(&cfg), "no *_pass anywhere");
    cfg.upstream_passes = Some(1);
    assert!(fired(&cfg), "one proxy_pass");
    cfg.upstream_passes = Some(0);
    cfg.stream_block = Some(true);
    assert!(fired(&cfg), "a stream block (its proxy_pass not counted)");
    cfg.stream_block = Some(false);
    cfg.upstream_passes = None;
    assert!(fired(&cfg), "an older recording: unknown");
}

/// Lines of a limit module the configuration nginx runs does not have (read whole,
/// unmodified) are no refusals: a client can put them in the log. A configuration not
/// read whole, modified since the load, or with a `stream` block (for limit_conn, not
/// read) rules out nothing.
#[test]
fn refusals_by_a_limit_the_configuration_lacks_are_not_counted() {
    use crate::model::config::{ConfigReport, ConfigValue};
    let mut cfg = ConfigReport {
        main_file: "/x/nginx.conf".into(),
        stream_block: Some(false),
        ..ConfigReport::default()
    };
    let inp = |cfg: &ConfigReport| Inputs {
        workers: vec![w(1, 10, 500), w(2, 10, 500)],
        requests: Some(1000),
        nginx_errors: Some(errors(&[
            ("limit_req", 300, "limit_req", "refused"),
            ("limit_conn", 20, "limit_conn", "refused"),
        ])),
        config: Some(cfg.clone()),
        ..Inputs::default()
    };
    let refused = |cfg: &ConfigReport| {
        judge(&inp(cfg))
            .into_iter()
            .find(|v| v.id == "requests_refused")
    };
    cfg.stream_block = None;
    let v = refused(&cfg).expect("limit_conn: a stream block not known absent");
    assert_eq!(v.evidence["refused"], serde_json::json!(20));
    assert_eq!(
        v.evidence["lines_contradicted_by_config"],
        serde_json::json!({"limit_req": 300})
    );
    assert_eq!(v.severity, Severity::Warning);
    cfg.stream_block = Some(false);
    let v = refused(&cfg);
    assert!(v.is_none(), "both ruled out: {v:?}");
    cfg.values.push(ConfigValue {
        directive: "limit_req".into(),
        ..ConfigValue::default()
    });
    let v = refused(&cfg).expect("limit_req configured");
    assert_eq!(v.evidence["refused"], serde_json::json!(300));
    assert!(v.advice.contains("allow bursts with"), "{}", v.advice);
    // Trial 9: burst=10 nodelay already set: never told to allow bursts.
    cfg.values[0] = ConfigValue::of(
        "limit_req",
        "server a location /rl",
        "zone=rl burst=10 nodelay",
        "/x/nginx.conf:11",
    );
    let v = refused(&cfg).expect("limit_req configured");
    assert!(!v.advice.contains("allow bursts with"), "{}", v.advice);
    assert!(v.advice.contains("a burst is allowed where it is set (server a location /rl: limit_req zone=rl burst=10 nodelay (/x/nginx.conf:11)), and a client past its burst over the zone's rate is refused; raise burst=N or the zone's rate"), "{}", v.advice);
    // Trial 10: one location with burst=5, one without; the refusals' location is not
    // in nginx's line: both said, with their places, never "no burst allowed" alone.
    cfg.values.push(ConfigValue::of(
        "limit_req",
        "server a location /rate",
        "zone=rl",
        "/x/nginx.conf:13",
    ));
    let v = refused(&cfg).expect("limit_req configured");
    assert!(v.advice.contains("where a burst is set (server a location /rl: limit_req zone=rl burst=10 nodelay (/x/nginx.conf:11)) a client past it is refused: raise burst=N or the zone's rate"), "{}", v.advice);
    assert!(v.advice.contains("where none is (server a location /rate: limit_req zone=rl (/x/nginx.conf:13)) a client over the rate is refused at once"), "{}", v.advice);
    assert!(!v.advice.contains("with no burst allowed"), "{}", v.advice);
    cfg.values.clear();
    cfg.errors.push("/x/inc.conf: unreadable".into());
    let v = refused(&cfg).expect("a configuration not read whole rules out nothing");
    assert_eq!(v.evidence["refused"], serde_json::json!(320));
    assert!(!v.evidence.contains_key("lines_contradicted_by_config"));
}

/// With an access log that counts every request and logs `$status`, no more lines stand
/// as refusals than the requests answered 503, 429 or a configured limit status: 12
/// forged lines beside no such status give no verdict; 12 beside 12 503s fire.
#[test]
fn refusals_stand_only_as_far_as_the_access_log_s_statuses() {
    use crate::model::access_log::AccessLogReport;
    let mut inp = Inputs {
        workers: vec![w(1, 12, 12)],
        requests: Some(12),
        nginx_errors: Some(errors(&[("limit_req", 12, "limit_req", "refused")])),
        access_log: Some(AccessLogReport {
            lines: 12,
            counts_every_request: true,
            statuses: [("404".to_string(), 12)].into(),
            ..AccessLogReport::default()
        }),
        ..Inputs::default()
    };
    assert!(judge(&inp).iter().all(|v| v.id != "requests_refused"));
    if let Some(a) = inp.access_log.as_mut() {
        a.statuses = [("503".to_string(), 12)].into();
    }
    let v = judge(&inp);
    let r = v
        .iter()
        .find(|v| v.id == "requests_refused")
        .expect("fires");
    assert_eq!(r.evidence["refused"], serde_json::json!(12));
    assert_eq!(
        r.evidence["access_log_limit_statuses"],
        serde_json::json!({"codes": ["429", "503"], "requests": 12})
    );
}

#[test]
fn refusals_need_exact_requests_and_name_limit_req() {
    let mut inp = Inputs {
        workers: vec![w(1, 10, 500), w(2, 10, 500)],
        nginx_errors: Some(errors(&[("limit_req", 900, "limit_req", "refused")])),
        ..Inputs::default()
    };
    // Estimated requests: no verdict.
    assert!(judge(&inp).iter().all(|v| v.id != "requests_refused"));
    inp.requests = Some(inp.workers.iter().map(|w| w.requests.unwrap_or(0)).sum());
    let v = judge(&inp);
    let r = v
        .iter()
        .find(|v| v.id == "requests_refused")
        .expect("fires");
    assert_eq!(r.severity, Severity::Critical);
    assert_eq!(r.evidence["refused"], serde_json::json!(900));
    assert_eq!(r.evidence["share"], serde_json::json!(0.9));
    assert_eq!(r.directives, vec!["limit_req"]);
    assert!(
        r.advice.starts_with("90% of the 1000 requests (900)"),
        "{}",
        r.advice
    );
    assert!(r.advice.contains("burst="), "{}", r.advice);
    // An unreadable log says nothing.
    inp.nginx_errors.as_mut().unwrap().readable = false;
    assert!(judge(&inp).iter().all(|v| v.id != "requests_refused"));
}

#[test]
fn upstream_timeouts_name_proxy_read_timeout() {
    let mut inp = Inputs {
        workers: vec![w(1, 100, 200)],
        nginx_errors: Some(errors(&[(
            "upstream_read_timeout",
            40,
            "proxy_read_timeout",
            "upstream",
        )])),
        ..Inputs::default()
    };
    inp.requests = Some(inp.workers.iter().map(|w| w.requests.unwrap_or(0)).sum());
    let v = judge(&inp);
    let u = v.iter().find(|v| v.id == "upstream_errors").expect("fires");
    assert_eq!(u.evidence["share"], serde_json::json!(0.2));
    assert_eq!(u.directives, vec!["proxy_read_timeout"]);
}

/// Case 18 with two peers: a few connects failed with EADDRNOTAVAIL, nginx marked
/// both peers failed, and "no live upstreams" followed for the rest. The advice says
/// the chain, with the port range, instead of sending the SRE to healthy backends.
#[test]
fn no_live_upstreams_after_eaddrnotavail_says_the_ports_ran_out() {
    let mut inp = Inputs {
        workers: vec![w(1, 100, 1000)],
        nginx_errors: Some(errors(&[
            (
                "no_live_upstreams",
                980,
                "upstream server max_fails",
                "upstream",
            ),
            ("upstream_addr_unavailable", 8, "keepalive", "upstream"),
        ])),
        local_ports: Some(crate::model::local_ports::LocalPortsReport {
            tcp_migrate_req: None,
            range: Some([40000, 40499]),
            tcp_tw_reuse: Some(0),
            time_wait: None,
        }),
        ..Inputs::default()
    };
    inp.requests = Some(1000);
    let v = judge(&inp);
    let u = v.iter().find(|v| v.id == "upstream_errors").expect("fires");
    assert!(
        u.advice.contains("most: no live upstreams (502)"),
        "{}",
        u.advice
    );
    assert!(
        u.advice.contains("; 8 of them were connects that failed with EADDRNOTAVAIL (no local port left): nginx counts those failures against the peers (max_fails)"),
        "{}",
        u.advice
    );
    assert!(
        u.advice.contains("; local ports 40000-40499 (500, net.ipv4.ip_local_port_range in nginx's network namespace), net.ipv4.tcp_tw_reuse 0"),
        "{}",
        u.advice
    );
    // Without EADDRNOTAVAIL lines: no port talk.
    inp.nginx_errors = Some(errors(&[(
        "no_live_upstreams",
        980,
        "upstream server max_fails",
        "upstream",
    )]));
    let v = judge(&inp);
    let u = v.iter().find(|v| v.id == "upstream_errors").expect("fires");
    assert!(
        !u.advice.contains("EADDRNOTAVAIL") && !u.advice.contains("local ports"),
        "{}",
        u.advice
    );
}

#[test]
fn reusing_connections_is_worker_connections_not_keepalive_off() {
    // Case 15 A: 300 clients, one request each, connections kept open by them and
    // closed by nginx to reuse: one accept per request.
    let mut inp = Inputs {
        workers: vec![w(1, 150, 150), w(2, 150, 150)],
        nginx_errors: Some(errors(&[(
            "worker_connections_reusing",
            12,
            "worker_connections",
            "resources",
        )])),
        ..Inputs::default()
    };
    inp.requests = Some(inp.workers.iter().map(|w| w.requests.unwrap_or(0)).sum());
    let v = judge(&inp);
    let ids: Vec<&str> = v.iter().map(|v| v.id.as_str()).collect();
    assert_eq!(ids, ["worker_connections_exhausted"]);
    assert_eq!(v[0].severity, Severity::Warning);
    assert_eq!(
        v[0].evidence["error_log_reusing_connections"],
        serde_json::json!(12)
    );
    assert!(v[0].advice.contains("closed idle keepalive connections"));
    // Only "worker_connections are not enough" (new connections refused, nothing
    // reused): said as such, not as idle connections closed.
    inp.nginx_errors = Some(errors(&[(
        "worker_connections",
        72,
        "worker_connections",
        "resources",
    )]));
    // With nginx's own count of connections accepted and not handled.
    inp.stub_dropped = Some(72);
    let v = judge(&inp);
    assert_eq!(v[0].id, "worker_connections_exhausted");
    assert_eq!(v[0].severity, Severity::Critical);
    assert!(
        v[0].advice
            .contains("\"worker_connections are not enough\" 72 times")
            && !v[0].advice.contains("closed idle"),
        "{}",
        v[0].advice
    );
    // The lines alone (no connection accepted then closed, none unhandled): upstream
    // connections nginx could not open, or lines a client wrote; a warning that says so.
    inp.stub_dropped = Some(0);
    let v = judge(&inp);
    let x = v
        .iter()
        .find(|v| v.id == "worker_connections_exhausted")
        .expect("still said");
    assert_eq!(x.severity, Severity::Warning);
    assert!(
        x.advice
            .contains("but no client connection was seen refused")
            && x.evidence.contains_key("not_enough_uncorroborated"),
        "{x:?}"
    );
}

#[test]
fn keepalive_requests_pinned_at_ten() {
    let mut inp = Inputs {
        workers: vec![w(1, 2_000, 19_990), w(2, 2_100, 20_990)],
        period_s: 5.0,
        connections_active: Some(10),
        ..Inputs::default()
    };
    inp.requests = Some(inp.workers.iter().map(|w| w.requests.unwrap_or(0)).sum());
    let v = judge(&inp);
    let k = v
        .iter()
        .find(|v| v.id == "keepalive_requests_low")
        .expect("fires");
    assert_eq!(k.evidence["pinned_at"], serde_json::json!(10));
    assert_eq!(k.evidence["accepts_per_s"], serde_json::json!(820.0));
    // 10 * 2 * 10 / 4100 + 0.01
    assert_eq!(k.evidence["tolerance"], serde_json::json!(0.059));
    // Without nginx's connection gauge the edges are unknown: no verdict.
    let mut blind = inp.clone();
    blind.connections_active = None;
    assert!(judge(&blind)
        .iter()
        .all(|v| v.id != "keepalive_requests_low"));
    // Many connections open at the end: the mean could be any N near it.
    let mut open = inp.clone();
    open.connections_active = Some(60);
    assert!(judge(&open)
        .iter()
        .all(|v| v.id != "keepalive_requests_low"));
    // 10.5 requests per connection is not pinned.
    inp.workers[0].requests = Some(22_000);
    inp.requests = Some(22_000 + 20_990);
    assert!(judge(&inp).iter().all(|v| v.id != "keepalive_requests_low"));
    // Long-lived connections (1000 per connection) are not low.
    let mut long = Inputs {
        workers: vec![w(1, 300, 300_000)],
        connections_active: Some(0),
        ..Inputs::default()
    };
    long.requests = Some(long.workers.iter().map(|w| w.requests.unwrap_or(0)).sum());
    assert!(judge(&long)
        .iter()
        .all(|v| v.id != "keepalive_requests_low"));
}

/// The trial's clients that send 10 requests and close (measured), or a configuration
/// whose keepalive_requests is 1000 (the default): no verdict; one that sets 10 names
/// it.
#[test]
fn keepalive_requests_low_is_ruled_out_by_who_closed_and_the_configuration() {
    keepalive_requests_cases();
}

/// This machine: wrk -c10 at keepalive_requests 50, the summary after wrk ended: 206758
/// requests over 4142 connections (49.918), none open at the end, wrk's 10 connections
/// ended by its resets and 1 by its FIN before their 50th request: the edge is those
/// 11, and the mean sits at 50 (no verdict before: a tolerance of 0.01).
#[test]
fn connections_their_clients_ended_early_widen_the_edge() {
    let mut inp = Inputs {
        workers: vec![w(1, 2_071, 103_379), w(2, 2_071, 103_379)],
        period_s: 6.0,
        connections_active: Some(0),
        requests: Some(206_758),
        ..Inputs::default()
    };
    let fires = |i: &Inputs| {
        judge(i)
            .into_iter()
            .any(|v| v.id == "keepalive_requests_low")
    };
    assert!(!fires(&inp), "0.082 from 50 with nothing open");
    inp.connections = Some(crate::model::connections::ConnectionsReport {
        ports: vec![crate::model::connections::PortLifecycle {
            port: 80,
            established: 4142,
            closed_by_nginx: 4131,
            closed_by_client: 1,
            closed_by_reset: 10,
            ..Default::default()
        }],
        fin_unread_told_apart: true,
        ..Default::default()
    });
    let v = judge(&inp)
        .into_iter()
        .find(|v| v.id == "keepalive_requests_low")
        .expect("fires");
    assert_eq!(v.evidence["connections_ended_by_client_or_reset"], 11);
    assert_eq!(v.evidence["tolerance"], 0.01);
    assert_eq!(v.evidence["tolerance_below"], 0.143);
}

fn keepalive_requests_cases() {
    let mut clients = Inputs {
        workers: vec![w(1, 2_000, 19_990), w(2, 2_100, 20_990)],
        period_s: 5.0,
        connections_active: Some(10),
        ..Inputs::default()
    };
    clients.requests = Some(19_990 + 20_990);
    let fires = |i: &Inputs| {
        judge(i)
            .into_iter()
            .find(|v| v.id == "keepalive_requests_low")
    };
    assert!(fires(&clients).is_some());
    let mut closed = clients.clone();
    closed.connections = Some(crate::model::connections::ConnectionsReport {
        ports: vec![crate::model::connections::PortLifecycle {
            port: 80,
            established: 4100,
            closed_by_client: 4000,
            closed_by_nginx: 100,
            ..Default::default()
        }],
        fin_unread_told_apart: true,
        ..Default::default()
    });
    assert!(fires(&closed).is_none(), "the clients closed them");
    // A recording made before the FIN rule: the clients' count rules nothing out.
    let mut old = closed.clone();
    if let Some(c) = old.connections.as_mut() {
        c.fin_unread_told_apart = false;
    }
    assert!(fires(&old).is_some(), "not told apart in an old recording");
    // Where a client's FIN racing nginx's `Connection: close` is not told apart, the
    // clients' count rules nothing out.
    let mut racing = closed.clone();
    if let Some(c) = racing.connections.as_mut() {
        c.fin_unread_unknown = Some("struct sock's offsets are not in the kernel's BTF".into());
        c.fin_unread_told_apart = false;
    }
    assert!(fires(&racing).is_some(), "the clients' FINs may be races");
    assert!(crate::analysis::conn_verdicts::keepalive_settings_ruled_out(&racing).is_none());
    assert!(crate::analysis::conn_verdicts::keepalive_settings_ruled_out(&closed).is_some());
    let value = |v: &str, at: &str| crate::model::config::ConfigValue {
        directive: "keepalive_requests".into(),
        scope: "http".into(),
        value: v.into(),
        at: at.into(),
        not_loaded: false,
        unread_may_set: false,
    };
    let mut cfg = crate::model::config::ConfigReport {
        values: vec![value("1000", "default")],
        ..Default::default()
    };
    clients.config = Some(cfg.clone());
    assert!(fires(&clients).is_none(), "keepalive_requests is 1000");
    cfg.values = vec![value("10", "/e/nginx.conf:7")];
    clients.config = Some(cfg.clone());
    let v = fires(&clients).expect("keepalive_requests 10");
    assert!(v.advice.starts_with("requests per connection sit at 10 (10.00 over 4100 connections) and the configuration sets keepalive_requests 10 (/e/nginx.conf:7): nginx closes"), "{}", v.advice);
    // A client that closes on reading nginx's `Connection: close` races nginx's own
    // close (CI's run: the clients' FIN first on most): the configuration read decides.
    closed.config = Some(cfg);
    assert!(fires(&closed).is_some(), "keepalive_requests 10 read");
}

/// A new user's HTTP/2 run: 904 connections reached keepalive_requests (1000) and
/// 16774 carried no request (hey abandoning TLS handshakes): a mean of 51.08 is no
/// value of keepalive_requests.
#[test]
fn a_mean_near_an_integer_is_not_keepalive_requests() {
    let mut inp = Inputs {
        workers: vec![w(1, 8_900, 450_000), w(2, 8_778, 453_020)],
        period_s: 60.0,
        connections_active: Some(0),
        tls: Some(crate::model::TlsReport {
            handshakes: 13_187,
            started: 17_599,
            abandoned: 4_412,
            ..Default::default()
        }),
        ..Inputs::default()
    };
    inp.requests = Some(903_020);
    assert!(judge(&inp).iter().all(|v| v.id != "keepalive_requests_low"));
    // Without the abandoned handshakes, 51.08 is still 0.08 from 51 with nothing open
    // at the end to explain it.
    inp.tls = None;
    assert!(judge(&inp).iter().all(|v| v.id != "keepalive_requests_low"));
    // Exactly 51 per connection (the tail open at the end) does fire.
    inp.requests = Some(17_678 * 51 - 20);
    inp.connections_active = Some(2);
    assert!(judge(&inp).iter().any(|v| v.id == "keepalive_requests_low"));
}

#[test]
fn throttled_quota_advises_the_quota_not_auto() {
    let mut a = w(1, 0, 0);
    a.run_delay_ns = Some(3_000_000_000);
    let inp = Inputs {
        workers: vec![a, w(2, 0, 0)],
        period_s: 5.0,
        cpu_quota: Some(CpuQuotaReport {
            cgroup: "/case16".into(),
            cgroup_version: 2,
            quota_cpus: 0.1,
            quota_us: 10_000,
            period_us: 100_000,
            online_cpus: Some(2),
            nr_periods: Some(50),
            nr_throttled: Some(45),
            throttled_periods_share: Some(0.9),
            throttled_s: Some(4.0),
        }),
        ..Inputs::default()
    };
    let v = judge(&inp);
    let t = v.iter().find(|v| v.id == "cpu_throttled").expect("fires");
    assert_eq!(t.severity, Severity::Critical);
    assert_eq!(t.evidence["quota_cpus"], serde_json::json!(0.1));
    assert_eq!(
        t.evidence["throttled_periods_share"],
        serde_json::json!(0.9)
    );
    assert_eq!(t.evidence["throttled_time_share"], serde_json::json!(0.8));
    assert!(t.advice.contains("worker_processes 1"), "{}", t.advice);
    let s = v
        .iter()
        .find(|v| v.id == "cpu_starved")
        .expect("starved too");
    assert!(s.advice.contains("worker_processes 1"), "{}", s.advice);
    for v in &v {
        assert!(!v.advice.contains("(auto)"), "{}", v.advice);
        assert!(!v.advice.contains("at the core count"), "{}", v.advice);
    }
}

#[test]
fn slow_requests_with_idle_workers_wait_outside_them() {
    let mut a = w(1, 10, 40);
    a.request_p50_ns = Some(300_000_000);
    a.request_p99_ns = Some(520_000_000);
    a.busy_ns = Some(50_000_000);
    let mut inp = Inputs {
        workers: vec![a],
        period_s: 5.0,
        ..Inputs::default()
    };
    inp.requests = Some(inp.workers.iter().map(|w| w.requests.unwrap_or(0)).sum());
    let v = judge(&inp);
    let s = v
        .iter()
        .find(|v| v.id == "slow_requests_idle_workers")
        .expect("fires");
    assert_eq!(s.evidence["request_p50_ms"], serde_json::json!(300.0));
    assert_eq!(s.evidence["max_worker_busy_share"], serde_json::json!(0.01));
    // A busy worker: the time may be nginx's own.
    inp.workers[0].busy_ns = Some(2_000_000_000);
    assert!(judge(&inp)
        .iter()
        .all(|v| v.id != "slow_requests_idle_workers"));
    // Fast requests: nothing to say.
    inp.workers[0].busy_ns = Some(50_000_000);
    inp.workers[0].request_p50_ns = Some(2_000_000);
    assert!(judge(&inp)
        .iter()
        .all(|v| v.id != "slow_requests_idle_workers"));
}

#[test]
fn slow_requests_are_judged_from_the_workers_own_counts_only() {
    // The uprobes' per-worker counts and latencies, nothing else set: judged.
    let mut a = w(1, 10, 40);
    a.request_p50_ns = Some(300_000_000);
    a.request_p99_ns = Some(520_000_000);
    a.busy_ns = Some(50_000_000);
    let mut b = a.clone();
    b.pid = 2;
    let mut inp = Inputs {
        workers: vec![a, b],
        period_s: 5.0,
        ..Inputs::default()
    };
    let fired = |inp: &Inputs| {
        judge(inp)
            .iter()
            .any(|v| v.id == "slow_requests_idle_workers")
    };
    assert!(fired(&inp));
    // One live worker's count unknown (no uprobes): not judged, whatever nginx's
    // global total says.
    inp.workers[1].requests = None;
    inp.requests = Some(80);
    assert!(!fired(&inp));
    // An exited worker's unknown count does not stop it.
    inp.workers[1].alive = false;
    assert!(fired(&inp));
}

/// Newcomer trial: a dead peer with max_fails=0 beside a live one. nginx logs a
/// connect() failure for every other request and retries it on the live peer: every
/// client gets a 200. With the established upstream connections counted (>= the
/// requests), the verdict says retried, as a warning; without them it says the
/// outcome is not measured.
#[test]
fn connect_failures_retried_on_another_peer_are_not_failed_requests() {
    let mut a = w(1, 100, 200);
    a.upstream_connects = 300;
    a.upstream_established = 200;
    a.upstream_errors.insert("ECONNREFUSED".into(), 100);
    let mut inp = Inputs {
        workers: vec![a],
        nginx_errors: Some(errors(&[(
            "upstream_connect_failed",
            100,
            "proxy_next_upstream",
            "upstream",
        )])),
        ..Inputs::default()
    };
    inp.requests = Some(200);
    let v = judge(&inp);
    let u = v.iter().find(|v| v.id == "upstream_errors").expect("fires");
    assert_eq!(u.severity, Severity::Warning);
    assert!(
        u.advice.contains("consistent with nginx having retried the failed connects on another peer (proxy_next_upstream), which makes these lines retried requests, not failed ones (not proven per request"),
        "{}",
        u.advice
    );
    assert_eq!(u.evidence["retried"]["upstream_established"], 200);
    // Trial 11's F2: with proxy_next_upstream off in every proxying location (the
    // configuration read), no retry is claimed: each line is a failed request.
    let off = |value: &str, at: &str| crate::model::config::ConfigValue {
        directive: "proxy_next_upstream".into(),
        scope: "server a location /".into(),
        value: value.into(),
        at: at.into(),
        not_loaded: false,
        unread_may_set: false,
    };
    let marker = crate::model::config::ConfigValue {
        directive: "proxy_set_header Connection".into(),
        value: "close".into(),
        ..off("close", "default")
    };
    inp.config = Some(crate::model::config::ConfigReport {
        values: vec![off("off", "n.conf:9"), marker.clone()],
        ..Default::default()
    });
    let v = judge(&inp);
    let u = v.iter().find(|v| v.id == "upstream_errors").expect("fires");
    assert!(
        u.advice.contains("; proxy_next_upstream is off in every location that proxies (proxy_next_upstream off: n.conf:9): nginx tries no other peer after a failed try, so each line is a request answered 502/504"),
        "{}",
        u.advice
    );
    assert!(!u.evidence.contains_key("retried"), "{:?}", u.evidence);
    assert!(
        u.evidence["config_proxy_next_upstream"]
            .to_string()
            .contains("server a location /: off"),
        "{:?}",
        u.evidence
    );
    // Its default (error timeout) retries: as before.
    inp.config = Some(crate::model::config::ConfigReport {
        values: vec![off("error timeout", "default"), marker],
        ..Default::default()
    });
    let v = judge(&inp);
    let u = v.iter().find(|v| v.id == "upstream_errors").expect("fires");
    assert_eq!(u.evidence["retried"]["upstream_established"], 200);
    inp.config = None;
    // Fewer established connections than requests: the outcome is not claimed.
    inp.workers[0].upstream_established = 150;
    let v = judge(&inp);
    let u = v.iter().find(|v| v.id == "upstream_errors").expect("fires");
    assert!(
        u.advice
            .contains("how many clients got an error response is not measured"),
        "{}",
        u.advice
    );
    assert!(!u.evidence.contains_key("retried"));
}

/// Newcomer trial: a dead peer (refused) and a peer that resets every connection, 300
/// requests each, behind `upstream be` without keepalive. The lines tie: said as a
/// tie, each cause with the peer the error log names for it; the reset is fresh
/// connections (no pool: no keepalive timeout named, nor its directive), and the
/// evidence holds each peer's lines by class.
#[test]
fn a_tie_is_said_as_a_tie_with_each_peer() {
    let mut e = errors(&[
        (
            "upstream_connect_failed",
            300,
            "upstream server / proxy_next_upstream",
            "upstream",
        ),
        (
            "upstream_reset",
            300,
            crate::model::error_classes::class("upstream_reset")
                .unwrap()
                .directive,
            "upstream",
        ),
    ]);
    e.upstream_peers = [
        ("http://127.0.0.1:18901", "upstream_connect_failed"),
        ("http://127.0.0.1:18902", "upstream_reset"),
    ]
    .iter()
    .map(|(p, c)| crate::model::PeerErrorsReport {
        peer: p.to_string(),
        lines: 300,
        by_class: [(c.to_string(), 300)].into(),
    })
    .collect();
    let inp = Inputs {
        workers: vec![w(1, 600, 600)],
        nginx_errors: Some(e),
        requests: Some(600),
        config: Some(crate::analysis::upstream_failures::upstream_be(
            &[18901, 18902],
            None,
        )),
        ..Inputs::default()
    };
    let v = judge(&inp);
    let u = v.iter().find(|v| v.id == "upstream_errors").expect("fires");
    assert!(
        u.advice.starts_with("nginx logged 600 upstream errors for 600 requests (100%), most, tied at 300 lines each: connect() to the upstream failed (a 502 unless another peer answered): refused (down), a unix socket missing or not permitted: the errno in nginx's error-log line says which (peer: http://127.0.0.1:18901 (300 lines)); and the upstream reset fresh connections (502) (peer: http://127.0.0.1:18902 (300 lines)): nginx keeps no idle connections to it (127.0.0.1:18902 is a server of upstream be, which sets no keepalive), so none was closed under it: the peer crashed or refused the request, or a proxy or firewall in between reset the connection"),
        "{}",
        u.advice
    );
    assert!(!u.advice.contains("shorter"), "{}", u.advice);
    // Trial 17: the failing peers' server lines, with what max_fails does to them.
    assert_eq!(
        u.directives,
        [
            "upstream server / proxy_next_upstream",
            "upstream server",
            "max_fails",
            "fail_timeout"
        ]
    );
    assert!(
        u.advice.contains(
            "; the failing peers' server lines: `server 127.0.0.1:18901` of upstream be ("
        ),
        "{}",
        u.advice
    );
    assert_eq!(
        u.evidence["by_peer"]["http://127.0.0.1:18902"]["upstream_reset"],
        300
    );
    // One cause ahead: "most:", no tie.
    let mut one = inp.clone();
    let e = one.nginx_errors.as_mut().unwrap();
    e.classes.get_mut("upstream_reset").unwrap().count = 301;
    let v = judge(&one);
    let u = v.iter().find(|v| v.id == "upstream_errors").expect("fires");
    assert!(
        u.advice
            .contains("(100%), most: the upstream reset fresh connections (502) (peer: http://127.0.0.1:18902 (300 lines))"),
        "{}",
        u.advice
    );
}

/// The reset class's row names the peer only (`upstream server`): keepalive_timeout is
/// named by `upstream_errors` alone, on the evidence its advice uses (a pool configured
/// or reuse measured; unknown: both), never by the class row (newcomer trial: the row
/// named keepalive_timeout for a peer that reset fresh connections).
#[test]
fn keepalive_timeout_is_named_only_where_a_pool_may_be() {
    let row = crate::model::error_classes::class("upstream_reset").unwrap();
    assert_eq!(row.directive, "upstream server");
    let mut e = errors(&[("upstream_reset", 300, row.directive, "upstream")]);
    e.upstream_peers = vec![crate::model::PeerErrorsReport {
        peer: "http://127.0.0.1:18902".into(),
        lines: 300,
        by_class: [("upstream_reset".to_string(), 300)].into(),
    }];
    let directives = |e: &NginxErrorsReport, keepalive: Option<Option<&str>>| {
        let inp = Inputs {
            workers: vec![w(1, 300, 300)],
            nginx_errors: Some(e.clone()),
            requests: Some(300),
            config: keepalive.map(|k| crate::analysis::upstream_failures::upstream_be(&[18902], k)),
            ..Inputs::default()
        };
        let v = judge(&inp);
        let u = v.iter().find(|v| v.id == "upstream_errors").expect("fires");
        u.directives.clone()
    };
    // No pool for the peer: the peer only.
    assert_eq!(directives(&e, Some(None)), ["upstream server"]);
    // `keepalive 32` in its upstream block: a pooled connection may have been closed.
    assert_eq!(
        directives(&e, Some(Some("32"))),
        ["upstream server / keepalive_timeout"]
    );
    // Configuration not read, reuse not measured: both, as the advice says.
    assert_eq!(
        directives(&e, None),
        ["upstream server / keepalive_timeout"]
    );
    // A recording made when the row named keepalive_timeout: said the same way.
    e.classes.get_mut("upstream_reset").unwrap().directive =
        "upstream server / keepalive_timeout".into();
    assert_eq!(directives(&e, Some(None)), ["upstream server"]);
}

/// Trial 6: hey against `keepalive_requests 5` opens spare connections that carry no
/// request (2990 of 25773); counted at their close, they leave the mean at 5.00 and the
/// verdict fires; not counted (the offset unknown), the mean is 4.42 and it stays silent.
#[test]
fn keepalive_requests_low_leaves_out_connections_without_a_byte() {
    let mut inp = Inputs {
        workers: vec![w(1, 12_900, 57_000), w(2, 12_873, 56_866)],
        period_s: 5.0,
        connections_active: Some(20),
        ..Inputs::default()
    };
    inp.requests = Some(113_866);
    inp.connections = Some(crate::model::connections::ConnectionsReport {
        ports: vec![crate::model::connections::PortLifecycle {
            port: 80,
            established: 25_773,
            closed_by_nginx: 22_767,
            closed_by_client: 3_006,
            closed_without_data_by_client: 2_990,
            ..Default::default()
        }],
        ..Default::default()
    });
    inp.config = Some(crate::model::config::ConfigReport {
        values: vec![crate::model::config::ConfigValue {
            directive: "keepalive_requests".into(),
            scope: "http".into(),
            value: "5".into(),
            at: "/t/nginx.conf:8".into(),
            not_loaded: false,
            unread_may_set: false,
        }],
        ..Default::default()
    });
    let fired = |i: &Inputs| {
        judge(i)
            .into_iter()
            .find(|v| v.id == "keepalive_requests_low")
    };
    let v = fired(&inp).expect("mean 5.00 over the connections that carried data");
    assert_eq!(v.evidence["closed_without_data"], 2990);
    assert_eq!(v.evidence["requests_per_connection"], 4.998);
    assert!(
        v.advice.starts_with("requests per connection sit at 5 (5.00 over 22783 connections that carried data; 2990 more closed before their client sent a byte (tcp_sock.bytes_received)) and the configuration sets keepalive_requests 5 (/t/nginx.conf:8)"),
        "{}",
        v.advice
    );
    if let Some(c) = inp.connections.as_mut() {
        c.without_data_unknown = Some("tcp_sock.bytes_received not in the kernel's BTF".into());
    }
    assert!(fired(&inp).is_none(), "4.42 per connection");
}
