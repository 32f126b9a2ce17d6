//! Unit tests of the verdict rules ([`super`]): [`Inputs`] in, verdicts out.

use super::*;

/// [`super::judge`] with the global request count the uprobes would give: the
/// workers' counts summed (unless the test set one).
fn judge(inp: &Inputs) -> Vec<Verdict> {
    let mut inp = inp.clone();
    if inp.requests.is_none() {
        inp.requests = Some(inp.workers.iter().filter_map(|w| w.requests).sum());
        inp.requests_source = crate::model::RequestSource::Uprobe;
    }
    super::judge(&inp)
}

/// Trial 6: hey over HTTPS against keepalive_requests 5: 2230 connections carried 5
/// requests each, 8750 more carried none (7479 TLS handshakes abandoned, counted by
/// libssl's programs): 0.98 accepts per request, yet no connection carried one request.
#[test]
fn connections_without_a_request_are_no_keepalive_off() {
    let tls = |abandoned, sampled| crate::model::TlsReport {
        handshakes: 3_501,
        started: 3_501 + abandoned,
        abandoned,
        libssl_sampled: sampled,
        ..Default::default()
    };
    let mut inp = Inputs {
        workers: vec![w(1, 5_490, 5_575), w(2, 5_490, 5_575)],
        tls: Some(tls(7_479, false)),
        ..Inputs::default()
    };
    assert!(judge(&inp).iter().all(|v| v.id != "keepalive_off"));
    // Counted in the detail windows only: unknown, not judged.
    inp.tls = Some(tls(700, true));
    assert!(judge(&inp).iter().all(|v| v.id != "keepalive_off"));
    // None abandoned: one request per connection, as before.
    inp.tls = Some(tls(0, false));
    assert!(judge(&inp).iter().any(|v| v.id == "keepalive_off"));
}

/// Trial 9: nginx proxying to itself over `listen unix:`: its accepts and requests
/// count the unix hop's (118k) beside the TCP clients' (124 connections), so accepts
/// per request say nothing of the clients' keepalive: keepalive_off is not judged.
#[test]
fn a_unix_listener_makes_accepts_per_request_unknown() {
    use crate::model::config::{ConfigReport, ListenValue};
    let mut inp = Inputs {
        workers: vec![w(1, 59_000, 59_000), w(2, 59_000, 59_000)],
        ..Inputs::default()
    };
    assert!(judge(&inp).iter().any(|v| v.id == "keepalive_off"));
    inp.config = Some(ConfigReport {
        listens: vec![ListenValue {
            scope: "server peer".into(),
            address: "unix:/run/peer.sock".into(),
            at: "/n.conf:4".into(),
            ..Default::default()
        }],
        ..Default::default()
    });
    assert!(!inp.accepts_per_request_known());
    assert!(judge(&inp).iter().all(|v| v.id != "keepalive_off"));
    assert_eq!(
        crate::model::unix_mix(inp.config.as_ref()).as_deref(),
        Some("nginx also accepts on a unix socket (listen unix:/run/peer.sock in server peer at /n.conf:4): its accepts and requests count those connections beside the TCP clients', so per connection is unknown")
    );
}

/// Trial 7: keepalive_timeout 0 and hey's 400 requests beside a TCP health checker
/// (2840 connections opened and closed without a byte): the health checks are no
/// connections closed unserved; keepalive_off fires on the 400 that carried data,
/// with nginx's 400 closes as who closed. Their closes not counted (the offset
/// unknown): held back, as before.
#[test]
fn a_tcp_health_checker_does_not_silence_keepalive_off() {
    let mut a = w(1, 1_620, 200);
    let mut b = w(2, 1_620, 200);
    a.fds_peak = Some(20);
    b.fds_peak = Some(20);
    let mut inp = Inputs {
        workers: vec![a, b],
        connections: Some(crate::model::connections::ConnectionsReport {
            ports: vec![crate::model::connections::PortLifecycle {
                port: 80,
                established: 3_240,
                closed_by_nginx: 400,
                closed_by_client: 2_840,
                closed_without_data_by_client: 2_840,
                ..Default::default()
            }],
            fin_unread_told_apart: true,
            ..Default::default()
        }),
        ..Inputs::default()
    };
    let v = judge(&inp);
    let k = v
        .iter()
        .find(|v| v.id == "keepalive_off")
        .unwrap_or_else(|| panic!("{v:?}"));
    assert_eq!(k.evidence["accepts_that_may_have_carried_a_request"], 400);
    assert_eq!(k.evidence["those_per_request"], 1.0);
    assert_eq!(k.evidence["closed_by"]["nginx"], 400);
    assert_eq!(k.evidence["closed_by"]["without_data_left_out"], 2_840);
    assert!(v.iter().all(|v| v.id != "worker_connections_exhausted"));
    if let Some(c) = inp.connections.as_mut() {
        c.without_data_unknown = Some("tcp_sock.bytes_received not in the kernel's BTF".into());
    }
    assert!(judge(&inp).iter().all(|v| v.id != "keepalive_off"));
}

#[test]
fn keepalive_off_on_tls_carries_the_handshake_cost() {
    let a = w(1, 400, 400);
    let tls = crate::model::TlsReport {
        handshakes: 400,
        started: 400,
        call_ns: 400 * 1_500_000,
        call_ns_per_handshake: Some(1_500_000),
        p50_ns: 2_000_000,
        mean_ns: 2_100_000,
        share_of_worker_busy: Some(0.3),
        ..Default::default()
    };
    let v = judge(&Inputs {
        workers: vec![a],
        tls: Some(tls),
        ..Inputs::default()
    });
    assert_eq!(v[0].id, "keepalive_off");
    assert_eq!(v[0].evidence["tls_handshakes"], serde_json::json!(400));
    assert_eq!(
        v[0].evidence["tls_handshake_call_us"],
        serde_json::json!(1500.0)
    );
    assert_eq!(
        v[0].evidence["tls_share_of_worker_busy"],
        serde_json::json!(0.3)
    );
    assert!(v[0].advice.contains("TLS handshake"), "{}", v[0].advice);
    assert!(v[0].advice.contains("1500 us"), "{}", v[0].advice);
    // The whole TLS clause, in order (a misplaced argument once read "eachfor clients").
    assert!(
        v[0].advice.contains("(400 TLS handshakes, 1500 us inside SSL_do_handshake each, 30% of the workers' busy time); "),
        "{}",
        v[0].advice
    );
    assert!(
        v[0].advice.ends_with("; for clients that must reconnect, resume TLS sessions (ssl_session_cache shared:SSL:10m; ssl_session_tickets on; the configuration was not read)"),
        "{}",
        v[0].advice
    );
    assert!(!v[0].advice.contains("enable keepalive"), "{}", v[0].advice);
    // Who closed was not measured here: neither side is named as the one.
    assert!(
        v[0].advice.contains("who closes them is not measured"),
        "{}",
        v[0].advice
    );
    assert!(
        !v[0].advice.contains("the clients close their connections"),
        "{}",
        v[0].advice
    );
    assert!(v[0].directives.iter().any(|d| d == "ssl_session_cache"));
    assert!(v[0].directives.iter().any(|d| d == "ssl_session_tickets"));
}

#[test]
fn unknown_requests_fire_no_request_rule() {
    // HTTPS without nginx's counters or uprobes: 400 accepts, requests unknown, 400
    // access-log writes. Nothing about keepalive, the log or worker_connections.
    let mut a = w(1, 400, 0);
    a.requests = None;
    a.access_log_writes = 400;
    a.fds_peak = Some(10);
    let v = super::judge(&Inputs {
        workers: vec![a.clone()],
        ..Inputs::default()
    });
    assert!(v.is_empty(), "{v:?}");
    // The same with nginx's counter: 400 requests, one per connection.
    let v = super::judge(&Inputs {
        workers: vec![a],
        requests: Some(400),
        requests_source: crate::model::RequestSource::StubStatus,
        ..Inputs::default()
    });
    let ids: Vec<&str> = v.iter().map(|v| v.id.as_str()).collect();
    // (The log writes' share of the time and their rate are unknown here: no
    // access_log_unbuffered.)
    assert_eq!(ids, ["keepalive_off"]);
    assert_eq!(v[0].evidence["requests_source"], "stub_status");
}

use crate::analysis::inputs::w;

/// The newcomer's case: 270 accepts, 130 requests, 90 TLS handshakes abandoned (counted
/// by libssl all the time), nginx's error log readable with no "worker_connections are
/// not enough": no worker_connections verdict. With the same counts and no log read, the
/// abandoned handshakes still do not count as connections closed unserved.
#[test]
fn abandoned_handshakes_and_a_silent_error_log_are_not_worker_connections() {
    let mut a = w(1, 300, 100);
    a.fds_peak = Some(11);
    let tls = |abandoned, sampled| crate::model::TlsReport {
        handshakes: 120,
        started: 120 + abandoned,
        abandoned,
        libssl_sampled: sampled,
        ..Default::default()
    };
    let fired = |inp: Inputs| {
        judge(&inp)
            .iter()
            .any(|v| v.id == "worker_connections_exhausted")
    };
    // Without the handshakes known, 300 accepts for 100 requests fire it.
    assert!(fired(Inputs {
        workers: vec![a.clone()],
        ..Inputs::default()
    }));
    // 150 of them abandoned their TLS handshake: 150 accepts left, under the minimum.
    assert!(!fired(Inputs {
        workers: vec![a.clone()],
        tls: Some(tls(150, false)),
        ..Inputs::default()
    }));
    // Counted in the windows only: not judged.
    assert!(!fired(Inputs {
        workers: vec![a.clone()],
        tls: Some(tls(3, true)),
        ..Inputs::default()
    }));
    // nginx's error log read, with no line saying it ran out: not worker_connections.
    assert!(!fired(Inputs {
        workers: vec![a],
        nginx_errors: Some(crate::model::NginxErrorsReport {
            readable: true,
            ..Default::default()
        }),
        ..Inputs::default()
    }));
}

#[test]
fn connections_closed_unserved_are_worker_connections_not_keepalive() {
    // The claims lab's worker_connections 64 under 300 keepalive clients: 33438
    // accepts for 9756 requests, none closed right after accept.
    let mut a = w(1, 16_000, 5_000);
    let mut b = w(2, 17_438, 4_756);
    a.fds_peak = Some(70);
    b.fds_peak = Some(70);
    let v = judge(&Inputs {
        workers: vec![a.clone(), b.clone()],
        ..Inputs::default()
    });
    let ids: Vec<&str> = v.iter().map(|v| v.id.as_str()).collect();
    assert_eq!(ids, ["worker_connections_exhausted"]);
    assert_eq!(v[0].severity, Severity::Warning);
    assert_eq!(v[0].evidence["accepts"], serde_json::json!(33_438));
    // Trial 10: the same with nginx's "reusing connections" lines: critical.
    let mut errors = crate::model::NginxErrorsReport {
        readable: true,
        ..Default::default()
    };
    errors
        .classes
        .insert("worker_connections_reusing".into(), Default::default());
    errors
        .classes
        .get_mut("worker_connections_reusing")
        .unwrap()
        .count = 22;
    let v = judge(&Inputs {
        workers: vec![a.clone(), b.clone()],
        nginx_errors: Some(errors),
        ..Inputs::default()
    });
    let ex = v
        .iter()
        .find(|v| v.id == "worker_connections_exhausted")
        .unwrap();
    assert_eq!(ex.severity, Severity::Critical, "{ex:?}");
    assert!(
        v[0].advice.contains("at least 23682 were closed"),
        "{}",
        v[0].advice
    );
    // The same counts with the connections held open (idle clients): not this.
    a.fds_peak = Some(16_000);
    b.fds_peak = Some(17_000);
    assert!(judge(&Inputs {
        workers: vec![a, b],
        ..Inputs::default()
    })
    .iter()
    .all(|v| v.id != "worker_connections_exhausted"));
    // One request per connection is keepalive off, not this.
    let v = judge(&Inputs {
        workers: vec![w(1, 400, 400)],
        ..Inputs::default()
    });
    let ids: Vec<&str> = v.iter().map(|v| v.id.as_str()).collect();
    assert_eq!(ids, ["keepalive_off"]);
}

#[test]
fn waiting_for_a_cpu_is_starvation_not_a_stall() {
    // A 105 ms iteration in a 5 s period in which the worker waited 1.2 s for a CPU
    // (a loaded 2-core machine): cpu_starved, no event_loop_stall.
    let mut a = w(1, 0, 0);
    a.max_iteration_ns = 105_000_000;
    a.run_delay_ns = Some(1_200_000_000);
    a.cpu_s = Some(0.8);
    let v = judge(&Inputs {
        workers: vec![a.clone()],
        period_s: 5.0,
        ..Inputs::default()
    });
    let ids: Vec<&str> = v.iter().map(|v| v.id.as_str()).collect();
    assert_eq!(ids, ["cpu_starved"]);
    assert_eq!(
        v[0].evidence["workers"][0]["share"],
        serde_json::json!(0.24)
    );
    assert!(v[0].advice.contains("waited for a CPU 24% of the time"));
    // The same iteration with little waiting: a stall of nginx's own making.
    a.run_delay_ns = Some(20_000_000);
    let v = judge(&Inputs {
        workers: vec![a],
        period_s: 5.0,
        ..Inputs::default()
    });
    let ids: Vec<&str> = v.iter().map(|v| v.id.as_str()).collect();
    assert_eq!(ids, ["event_loop_stall"]);
}

#[test]
fn stall_rule_fires_at_100_ms() {
    let mut a = w(1, 0, 0);
    a.max_iteration_ns = 99_000_000;
    assert!(judge(&Inputs {
        workers: vec![a.clone()],
        ..Inputs::default()
    })
    .is_empty());
    let mut b = w(2, 0, 0);
    b.max_iteration_ns = 2_500_000_000;
    b.p99_iteration_ns = 50_000;
    let v = judge(&Inputs {
        workers: vec![a, b],
        ..Inputs::default()
    });
    assert_eq!(v[0].id, "event_loop_stall");
    assert_eq!(v[0].evidence["worker"], serde_json::json!(2));
    assert_eq!(v[0].evidence["max_iteration_ms"], serde_json::json!(2500.0));
    assert_eq!(v[0].evidence["stalled_workers"], serde_json::json!([2]));
    assert!(v[0].directives.iter().any(|d| d == "gzip"));
}

/// The namespace's listen counters (TcpExt), as the report carries them once.
fn ns(overflows: u64, drops: u64) -> Option<crate::model::ListenNamespaceReport> {
    Some(crate::model::ListenNamespaceReport {
        overflows,
        drops,
        source: crate::model::listen::LISTEN_NAMESPACE_SOURCE.into(),
    })
}

#[test]
fn queue_rule_needs_nginx_queue_to_have_held_connections() {
    let l = |queue_max, backlog, overflows| crate::model::ListenReport {
        addr: "127.0.0.1:80".into(),
        backlog,
        queue_now: 0,
        queue_max,
        overflows,
        drops: 0,
        socket_drops: None,
        closed: false,
    };
    // Someone else's overflows, nginx's queue always empty: no verdict.
    let other = Inputs {
        listen: vec![l(0, 511, 40)],
        listen_namespace: ns(40, 0),
        ..Inputs::default()
    };
    assert!(judge(&other).is_empty());
    let dropped = Inputs {
        listen: vec![l(16, 16, 40)],
        listen_namespace: ns(40, 0),
        ..Inputs::default()
    };
    let v = judge(&dropped);
    assert_eq!(v[0].id, "accept_queue_overflow");
    assert_eq!(v[0].severity, Severity::Critical);
    assert_eq!(v[0].evidence["listen_overflows"], serde_json::json!(40));
    assert_eq!(
        v[0].evidence["listen_counters"],
        serde_json::json!(crate::model::listen::LISTEN_NAMESPACE_SOURCE)
    );
    assert!(
        v[0].advice.contains("in this network namespace"),
        "{}",
        v[0].advice
    );
    // Two sockets, one namespace: the counters are said once, not per socket.
    let two = Inputs {
        listen: vec![l(16, 16, 40), l(16, 16, 40)],
        listen_namespace: ns(40, 0),
        ..Inputs::default()
    };
    let v = judge(&two);
    assert_eq!(v[0].evidence["listen_overflows"], serde_json::json!(40));
    assert!(
        v[0].advice.contains("dropped 40 in this network namespace"),
        "{}",
        v[0].advice
    );
    let full = Inputs {
        listen: vec![l(511, 511, 0)],
        listen_namespace: ns(0, 0),
        ..Inputs::default()
    };
    assert_eq!(judge(&full)[0].severity, Severity::Warning);
    let waiting = Inputs {
        listen: vec![l(100, 511, 0)],
        listen_namespace: ns(0, 0),
        ..Inputs::default()
    };
    assert!(judge(&waiting).is_empty());
}

#[test]
fn queue_rule_trusts_nginx_socket_drops_over_the_namespace_counters() {
    let l = |queue_max, overflows, socket_drops| crate::model::ListenReport {
        addr: "127.0.0.1:80".into(),
        backlog: 16,
        queue_now: 0,
        queue_max,
        overflows,
        drops: overflows,
        socket_drops: Some(socket_drops),
        closed: false,
    };
    // A small queue that filled and drained between two samples: nginx's socket
    // dropped 1838, though no sample saw a connection waiting.
    let v = judge(&Inputs {
        listen: vec![l(0, 1838, 1838)],
        listen_namespace: ns(1838, 1838),
        ..Inputs::default()
    });
    assert_eq!(v[0].id, "accept_queue_overflow");
    assert_eq!(v[0].severity, Severity::Critical);
    assert_eq!(v[0].evidence["socket_drops"], serde_json::json!(1838));
    assert!(v[0]
        .advice
        .contains("dropped 1838 at nginx's listening sockets"));
    // Overflows elsewhere in the namespace, none at nginx's socket: no verdict,
    // even though nginx's queue held connections.
    assert!(judge(&Inputs {
        listen: vec![l(5, 40, 0)],
        listen_namespace: ns(40, 40),
        ..Inputs::default()
    })
    .is_empty());
    // nginx's socket counted drops while ListenOverflows/ListenDrops stayed 0 (a
    // TLS load with Connection: close): no connection was lost at the queue.
    assert!(judge(&Inputs {
        listen: vec![l(1, 0, 37)],
        listen_namespace: ns(0, 0),
        ..Inputs::default()
    })
    .is_empty());
}

/// A worker writing the access log once per request for 300 requests: 10% of its
/// syscall time, p99 8 us.
fn unbuffered_writer() -> WorkerInput {
    let mut a = w(1, 1, 300);
    a.access_log_writes = 300;
    a.access_log_ns = 300_000;
    a.all_syscall_ns = 3_000_000;
    a.access_log_p99_ns = 8_000;
    a
}

#[test]
fn access_log_rule_counts_writes_per_request() {
    let a = unbuffered_writer();
    let v = judge(&Inputs {
        workers: vec![a.clone()],
        period_s: 1.0,
        ..Inputs::default()
    });
    assert_eq!(v[0].id, "access_log_unbuffered");
    assert_eq!(v[0].evidence["writes_per_request"], serde_json::json!(1.0));
    assert_eq!(
        v[0].evidence["share_of_syscall_time"],
        serde_json::json!(0.1)
    );
    assert_eq!(v[0].evidence["p99_write_us"], serde_json::json!(8.0));
    let mut buffered = a;
    buffered.access_log_writes = 3;
    assert!(judge(&Inputs {
        workers: vec![buffered],
        ..Inputs::default()
    })
    .is_empty());
}

#[test]
fn access_log_rule_fires_at_the_share_or_the_rate_threshold() {
    // At the share threshold (3% of the syscall time) and 100 writes/s: fires; just
    // below the share: silent.
    let mut at = unbuffered_writer();
    at.access_log_ns = 90_000;
    let period = |w: WorkerInput, secs: f64| Inputs {
        workers: vec![w],
        period_s: secs,
        ..Inputs::default()
    };
    let v = judge(&period(at.clone(), 3.0));
    assert_eq!(v[0].id, "access_log_unbuffered", "{v:?}");
    assert_eq!(
        v[0].evidence["share_of_syscall_time"],
        serde_json::json!(0.03)
    );
    assert_eq!(v[0].evidence["writes_per_s"], serde_json::json!(100.0));
    assert!(v[0].evidence["material_by"]
        .as_str()
        .unwrap()
        .contains("at 100 writes/s or more"));
    at.access_log_ns = 89_999;
    assert!(judge(&period(at.clone(), 3.0)).is_empty());
    // Below the share but at 1000 writes/s: fires on the rate.
    let v = judge(&period(at.clone(), 0.3));
    assert_eq!(v[0].id, "access_log_unbuffered", "{v:?}");
    assert_eq!(v[0].evidence["writes_per_s"], serde_json::json!(1000.0));
    assert!(judge(&period(at, 0.300_001)).is_empty());
    // The share far over 3%, but under 100 writes/s: silent; rate unknown: silent.
    let big_share = unbuffered_writer();
    assert!(judge(&period(big_share.clone(), 3.000_1)).is_empty());
    assert!(judge(&period(big_share, 0.0)).is_empty());
}

/// The trial: an incident at about 20 requests a second, each written to an
/// unbuffered log that is 10% of the workers' syscall time (they do little else):
/// never `access_log_unbuffered` (it fired on the share before).
#[test]
fn access_log_rule_stays_silent_at_twenty_requests_a_second() {
    let a = unbuffered_writer();
    let v = judge(&Inputs {
        workers: vec![a],
        period_s: 15.0,
        ..Inputs::default()
    });
    assert!(v.iter().all(|v| v.id != "access_log_unbuffered"), "{v:?}");
}

#[test]
fn access_log_rule_gives_no_buffer_advice_where_nginx_cannot_buffer() {
    // A log nginx cannot buffer (a path with variables, syslog): no buffer= advice,
    // whether the opens per request show it or the configuration does.
    let a = unbuffered_writer();
    let mut reopened = a.clone();
    reopened.access_log_opens = Some(300);
    let ids: Vec<String> = judge(&Inputs {
        workers: vec![reopened],
        ..Inputs::default()
    })
    .into_iter()
    .map(|v| v.id)
    .collect();
    assert_eq!(ids, ["access_log_reopened"]);
    let log = |path: &str| crate::model::config::AccessLogValue {
        scope: "http".into(),
        path: path.into(),
        format: "combined".into(),
        at: "nginx.conf:9".into(),
        ..Default::default()
    };
    let with_logs = |paths: &[&str]| Inputs {
        workers: vec![a.clone()],
        period_s: 1.0,
        config: Some(crate::model::config::ConfigReport {
            access_logs: paths.iter().map(|p| log(p)).collect(),
            ..Default::default()
        }),
        ..Inputs::default()
    };
    let v = judge(&with_logs(&["/l/a-$host.log", "syslog:server=127.0.0.1"]));
    assert_eq!(v[0].id, "access_log_unbuffered");
    assert!(
        v[0].advice.ends_with(". nginx refuses buffer= on a path with variables or a syslog: target: /l/a-$host.log (nginx.conf:9), syslog:server=127.0.0.1 (nginx.conf:9); give such a log a fixed path to buffer it"),
        "{}",
        v[0].advice
    );
    let v = judge(&with_logs(&["off", "/l/fixed.log"]));
    assert!(!v[0].advice.contains("refuses"), "{}", v[0].advice);
}

#[test]
fn exited_workers_count_in_totals_but_not_in_balance() {
    // A reload mid-run: the old workers served most of the close-per-request load.
    let mut old = w(1, 900, 900);
    old.alive = false;
    let new = w(2, 100, 100);
    let v = judge(&Inputs {
        workers: vec![old, new],
        ..Inputs::default()
    });
    let ids: Vec<&str> = v.iter().map(|v| v.id.as_str()).collect();
    assert_eq!(ids, vec!["keepalive_off"], "{v:?}");
    assert_eq!(v[0].evidence["accepts"], serde_json::json!(1000));
}

#[test]
fn worker_connections_rule_fires_on_any_accept_then_close() {
    assert!(judge(&Inputs {
        workers: vec![w(1, 10, 0)],
        ..Inputs::default()
    })
    .is_empty());
    let mut a = w(1, 10, 0);
    a.accepted_then_closed = 7;
    let v = judge(&Inputs {
        workers: vec![a],
        ..Inputs::default()
    });
    assert_eq!(v[0].id, "worker_connections_exhausted");
    assert_eq!(v[0].severity, Severity::Critical);
    assert_eq!(v[0].evidence["accepted_then_closed"], serde_json::json!(7));
    assert_eq!(v[0].directives[0], "worker_connections");
}

#[test]
fn even_accepts_with_uneven_work_are_not_balanced() {
    let mut a = w(1, 500, 0);
    let mut b = w(2, 500, 0);
    a.busy_ns = Some(900_000_000);
    b.busy_ns = Some(100_000_000);
    a.cpu_s = Some(0.9);
    b.cpu_s = Some(0.1);
    let v = judge(&Inputs {
        workers: vec![a.clone(), b.clone()],
        ..Inputs::default()
    });
    assert_eq!(v[0].id, "accept_imbalance");
    assert_eq!(v[0].evidence["max_over_mean"], serde_json::json!(1.0));
    assert_eq!(v[0].evidence["busy_max_over_mean"], serde_json::json!(1.8));
    assert_eq!(v[0].evidence["busiest_worker"], serde_json::json!(1));
    assert!(v[0].advice.contains("busy time"), "{}", v[0].advice);
    // Too little work to judge: no verdict.
    a.busy_ns = Some(9_000_000);
    b.busy_ns = Some(1_000_000);
    a.cpu_s = Some(0.01);
    b.cpu_s = Some(0.0);
    assert!(judge(&Inputs {
        workers: vec![a, b],
        ..Inputs::default()
    })
    .is_empty());
}

#[test]
fn imbalance_is_judged_from_a_count_that_measures_the_share() {
    // The binomial count: the share known to 10% of the mean share at 95%.
    assert_eq!(imbalance_min_accepts(2), 385);
    assert_eq!(imbalance_min_accepts(3), 769);
    assert_eq!(imbalance_min_accepts(4), 1153);
    // A short run: 300 accepts, all on one of 2 workers: too few to judge (fired before).
    let short = Inputs {
        workers: vec![w(1, 300, 0), w(2, 0, 0)],
        ..Inputs::default()
    };
    assert!(judge(&short).is_empty(), "{:?}", judge(&short));
    // One accept short of the count: silent; at it: judged, the count in the evidence.
    let below = Inputs {
        workers: vec![w(1, 384, 0), w(2, 0, 0)],
        ..Inputs::default()
    };
    assert!(judge(&below).is_empty());
    let at = Inputs {
        workers: vec![w(1, 385, 0), w(2, 0, 0)],
        ..Inputs::default()
    };
    let v = judge(&at);
    assert_eq!(v[0].id, "accept_imbalance");
    assert_eq!(v[0].evidence["min_accepts"], serde_json::json!(385));
    assert_eq!(v[0].evidence["accepts"], serde_json::json!(385));
    // 3 workers need more: 700 accepts on one of them is not judged.
    let three = Inputs {
        workers: vec![w(1, 700, 0), w(2, 0, 0), w(3, 0, 0)],
        ..Inputs::default()
    };
    assert!(judge(&three).is_empty());
    // Uneven busy time below the count is not judged either.
    let (mut a, mut b) = (w(1, 150, 0), w(2, 150, 0));
    a.busy_ns = Some(900_000_000);
    b.busy_ns = Some(100_000_000);
    assert!(judge(&Inputs {
        workers: vec![a, b],
        ..Inputs::default()
    })
    .is_empty());
}

#[test]
fn jain_index_bounds() {
    assert_eq!(jain_index(&[1.0, 1.0, 1.0]), 1.0);
    assert!((jain_index(&[1.0, 0.0]) - 0.5).abs() < 1e-12);
    assert!((jain_index(&[0.75, 0.25]) - 0.8).abs() < 1e-12);
    assert_eq!(jain_index(&[]), 1.0);
}

#[test]
fn imbalance_needs_enough_accepts_and_real_skew() {
    let few = Inputs {
        workers: vec![w(1, 150, 0), w(2, 0, 0)],
        ..Inputs::default()
    };
    assert!(judge(&few).is_empty(), "150 accepts are too few to judge");
    let even = Inputs {
        workers: vec![w(1, 520, 0), w(2, 480, 0)],
        ..Inputs::default()
    };
    assert!(judge(&even).is_empty());
    let skewed = Inputs {
        workers: vec![w(1, 900, 0), w(2, 100, 0)],
        ..Inputs::default()
    };
    let v = judge(&skewed);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].id, "accept_imbalance");
    assert_eq!(v[0].evidence["max_over_mean"], serde_json::json!(1.8));
    assert_eq!(v[0].evidence["busiest_worker"], serde_json::json!(1));
    assert!(v[0].directives.iter().any(|d| d == "listen ... reuseport"));
    // Exactly at the threshold (75% of 2) fires.
    let edge = Inputs {
        workers: vec![w(1, 750, 0), w(2, 250, 0)],
        ..Inputs::default()
    };
    assert_eq!(
        judge(&edge)[0].evidence["jain_index"],
        serde_json::json!(0.8)
    );
}

/// Two workers, 500 accepts for 500 requests each (one request per connection), with
/// `close` traced: accept and close take 20% of their syscall time.
fn one_request_per_connection() -> Inputs {
    let mut close = Inputs {
        workers: vec![w(1, 500, 500), w(2, 500, 500)],
        close_traced: true,
        ..Inputs::default()
    };
    close.workers[0].conn_syscall_ns = 300;
    close.workers[0].all_syscall_ns = 1000;
    close.workers[1].conn_syscall_ns = 100;
    close.workers[1].all_syscall_ns = 1000;
    close
}

/// The `keepalive_off` verdict of `inp`; panics when it does not fire.
fn keepalive_verdict(inp: &Inputs) -> Verdict {
    judge(inp)
        .into_iter()
        .find(|v| v.id == "keepalive_off")
        .expect("fires")
}

#[test]
fn keepalive_rule_uses_accepts_per_request() {
    let reuse = Inputs {
        workers: vec![w(1, 5, 1000), w(2, 5, 1000)],
        ..Inputs::default()
    };
    assert!(judge(&reuse).iter().all(|v| v.id != "keepalive_off"));
    let k = keepalive_verdict(&one_request_per_connection());
    assert_eq!(k.evidence["accepts_per_request"], serde_json::json!(1.0));
    assert_eq!(
        k.evidence["accept_close_share_of_syscall_time"],
        serde_json::json!(0.2)
    );
    assert_eq!(
        k.directives,
        vec!["keepalive_timeout", "keepalive_requests"]
    );
    // Too few requests: no verdict.
    let few = Inputs {
        workers: vec![w(1, 50, 50), w(2, 50, 50)],
        ..Inputs::default()
    };
    assert!(judge(&few).is_empty());
}

#[test]
fn keepalive_rule_names_the_clients_side_and_the_requests_per_connection() {
    let close = one_request_per_connection();
    let k = keepalive_verdict(&close);
    // No close was counted and nginx's settings are not known: neither side is said
    // to be the one that closes; both are named as what to check, with why unknown.
    assert_eq!(
        k.evidence["closed_by"],
        "unknown: no connection close was counted in the period by the tracepoint sock:inet_sock_set_state"
    );
    assert!(!k.advice.contains("enable keepalive"), "{}", k.advice);
    assert!(
        !k.advice.contains("the clients close their connections"),
        "{}",
        k.advice
    );
    for needle in [
        "who closes them is not measured (no connection close was counted",
        "load balancer or proxy in front without keepalive to nginx",
        "`Connection: close`",
        "keepalive_timeout 0 or keepalive_requests 1; nginx's config is not read",
        "check both",
    ] {
        assert!(k.advice.contains(needle), "{needle}: {}", k.advice);
    }
    // The lifecycle tracepoints left out (`--no-lifecycle`): that is the reason given.
    let mut off = one_request_per_connection();
    off.connections_not_traced =
        Some("the connection lifecycle tracepoints are not attached (--no-lifecycle)".into());
    let k_off = keepalive_verdict(&off);
    assert_eq!(
        k_off.evidence["closed_by"],
        "unknown: the connection lifecycle tracepoints are not attached (--no-lifecycle)"
    );
    assert!(
        k_off
            .advice
            .contains("(--no-lifecycle)): either nginx does"),
        "{}",
        k_off.advice
    );
    assert!(k.advice.contains("one request each"), "{}", k.advice);
    // Two requests per connection: said as such, not "one request each".
    let mut two = close;
    for w in &mut two.workers {
        w.requests = Some(1000);
    }
    let k = keepalive_verdict(&two);
    assert!(
        k.advice
            .contains("connections carry 2.0 requests on average"),
        "{}",
        k.advice
    );
}

#[test]
fn keepalive_rule_under_sampled_detail_quotes_no_share_and_checks_accepts() {
    // Under --detail sampled accept4 is timed all the time, the rest in windows: no
    // share of syscall time is quoted.
    let mut sampled = one_request_per_connection();
    sampled.detail = Some(crate::model::sampling::DetailReport::new(
        &crate::model::sampling::Schedule::new(1.0, 20.0).unwrap(),
        &crate::model::sampling::Coverage {
            requests: Some(0),
            ..Default::default()
        },
        20.0,
        Some(1000),
        (0, 0, 24),
    ));
    let k = keepalive_verdict(&sampled);
    assert!(
        !k.evidence
            .keys()
            .any(|e| e.contains("share_of_syscall_time")),
        "{:?}",
        k.evidence
    );
    // Accepts from the uprobe that agree with nginx's counter: judged the same; that
    // disagree: unknown, so no verdict on them.
    let checked = |nginx_accepted: u64| {
        let mut i = sampled.clone();
        let d = i.detail.take().unwrap();
        i.detail = Some(d.with_accepts_from_uprobe(Some(
            crate::model::sampling::AcceptsCheck::new(2000, nginx_accepted, 2),
        )));
        judge(&i)
    };
    assert!(checked(2010).iter().any(|v| v.id == "keepalive_off"));
    assert!(checked(4000).is_empty(), "{:?}", checked(4000));
}

#[test]
fn quic_connections_keep_the_accepts_per_request_rules_silent() {
    let mut close = Inputs {
        workers: vec![w(1, 500, 500), w(2, 500, 500)],
        close_traced: true,
        ..Inputs::default()
    };
    let fires = |inp: &Inputs| judge(inp).iter().any(|v| v.id == "keepalive_off");
    assert!(fires(&close));
    // UDP listening, no QUIC connection in the period: still judged.
    close.quic = crate::model::quic::QuicReport::new(vec![8443], Some(1000), 1000);
    assert!(fires(&close));
    // QUIC connections (or unknown ones): requests include HTTP/3 ones, silent.
    close.quic = crate::model::quic::QuicReport::new(vec![8443], Some(1200), 1000);
    assert!(!fires(&close));
    close.quic = crate::model::quic::QuicReport::new(vec![8443], None, 1000);
    assert!(!fires(&close));
}
