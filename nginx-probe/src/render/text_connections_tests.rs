//! Unit tests of [`super`]: the CONNECTIONS section's lines.

use super::*;
use crate::model::connections::MsSpan;

use crate::model::minimal_report;

#[test]
fn the_section_says_who_closed_and_the_pinned_idle_time() {
    let mut r = minimal_report();
    let mut out = String::new();
    connections_section(&mut out, &r);
    assert_eq!(out, "", "nothing without connections");
    r.connections = Some(crate::model::connections::sample_report());
    connections_section(&mut out, &r);
    assert!(
        out.contains("closed first by nginx 10  by the client 3  by a reset 1"),
        "{out}"
    );
    assert!(
        out.contains("resets received 1  sent 1 (reason_14 1)"),
        "{out}"
    );
    assert!(
        out.contains("nginx closes connections 2.0 s after their last data"),
        "{out}"
    );
    assert!(out.contains("listening sockets closed 1"), "{out}");
    assert!(!out.contains("after reload"), "{out}");
}

/// Trial 7: 400 requests, 3240 accepts, 2840 of them a health checker's that never
/// sent a byte: per connection that carried data 1.0, not 0.1; with 10 abandoned
/// TLS handshakes too, 390 carried one.
#[test]
fn requests_per_connection_leave_out_those_that_carried_none() {
    let mut r = minimal_report();
    r.requests.count = Some(400);
    let mut w = r.workers.first().cloned().unwrap_or_else(|| {
        serde_json::from_str::<Report>(include_str!(
            "../testdata/two_workers_300_connections.report.json"
        ))
        .expect("golden")
        .workers[0]
            .clone()
    });
    w.accepts = 3240;
    r.workers = vec![w];
    let mut c = crate::model::connections::sample_report();
    c.ports[0].closed_without_data_by_client = 2840;
    r.connections = Some(c);
    assert_eq!(per_carried(&r), Some((1.0, 400, 2840)));
    r.tls = Some(crate::model::TlsReport {
        abandoned: 10,
        ..Default::default()
    });
    assert_eq!(per_carried(&r), Some((400.0 / 390.0, 390, 2850)));
    if let Some(t) = r.tls.as_mut() {
        t.libssl_sampled = true;
    }
    assert_eq!(per_carried(&r), None, "abandoned counted in windows only");
    // Over TLS, a completed handshake is data whether a request followed or not.
    assert_eq!(tls_carried_caveat(&r), "");
    if let Some(t) = r.tls.as_mut() {
        t.handshakes = 7392;
    }
    assert!(tls_carried_caveat(&r).contains("so this is a floor"));
}

#[test]
fn connections_closed_without_a_byte_are_said_with_who_closed_them() {
    let mut r = minimal_report();
    let mut c = crate::model::connections::sample_report();
    c.ports[0].closed_without_data_by_client = 2;
    c.ports[0].closed_without_data_by_nginx = 1;
    r.connections = Some(c);
    let mut out = String::new();
    connections_section(&mut out, &r);
    assert!(out.contains("\n  3 closed without a byte from the client (by the client 2, by nginx 1, by a reset 0), so they carried no request"), "{out}");
    r.connections = Some(crate::model::connections::sample_report());
    out.clear();
    connections_section(&mut out, &r);
    assert!(!out.contains("without a byte"), "{out}");
}

#[test]
fn a_binary_upgrade_s_new_master_beside_is_said_in_the_counts() {
    let mut r = minimal_report();
    r.connections = Some(crate::model::connections::sample_report());
    r.events.push(crate::model::Event {
        t_s: 6.04,
        event: crate::model::EventKind::NewMaster,
        pid: 13614,
    });
    let mut out = String::new();
    connections_section(&mut out, &r);
    assert!(out.contains("\n  a binary upgrade's new master 13614 runs beside this one since +6.0s: its workers serve the same listening sockets, so these counts include their connections from then (the per-worker figures are this master's alone)\n"), "{out}");
    // An interval after the event's: the tracker's new master still beside.
    r.events.clear();
    r.new_master_beside = Some(crate::model::NewMasterBeside {
        pid: 13614,
        since_s: 6.04,
    });
    let mut out = String::new();
    connections_section(&mut out, &r);
    assert!(
        out.contains("\n  a binary upgrade's new master 13614 runs beside this one since +6.0s"),
        "{out}"
    );
    r.new_master_beside = None;
    let mut out = String::new();
    connections_section(&mut out, &r);
    assert!(!out.contains("new master"), "{out}");
}

#[test]
fn closes_by_a_workers_exit_and_after_nginx_wrote_are_said() {
    let mut r = minimal_report();
    let mut c = crate::model::connections::sample_report();
    c.ports[0].closed_by_worker_exit = 4;
    if let Some(i) = c.ports[0].idle_before_nginx_close.as_mut() {
        i.after_nginx_wrote = 10;
    }
    r.connections = Some(c);
    let mut out = String::new();
    connections_section(&mut out, &r);
    assert!(
        out.contains("by the client 3  by a reset 1  as their worker exited 4"),
        "{out}"
    );
    assert!(
        out.contains("10 of them came right after nginx's own last data"),
        "{out}"
    );
    assert!(
        out.contains("nginx closes connections 2.0 s after their last data"),
        "{out}"
    );
}

#[test]
fn closes_by_draining_workers_and_by_each_worker_are_said_or_why_not() {
    use crate::model::connections::WorkerCloses;
    let mut r = minimal_report();
    let mut c = crate::model::connections::sample_report();
    c.draining_unknown = Some("the uprobe on ngx_close_idle_connections was not attached".into());
    r.connections = Some(c.clone());
    let mut out = String::new();
    connections_section(&mut out, &r);
    assert!(
        out.contains("  closes by draining workers: not told apart from the serving workers' (the uprobe on ngx_close_idle_connections was not attached)\n"),
        "{out}"
    );
    c.draining_unknown = None;
    c.ports[0].closed_while_draining = 8;
    c.ports[0].closed_while_draining_idle = 5;
    c.ports[0].closed_while_draining_after_data = 2;
    c.ports[0].closed_while_draining_silent = 1;
    c.ports[0].silent_close_after_drain_start = Some(MsSpan {
        min_ms: 1004,
        max_ms: 1004,
    });
    r.connections = Some(c);
    let golden: Report = serde_json::from_str(include_str!(
        "../testdata/two_workers_300_connections.report.json"
    ))
    .expect("the golden report");
    let mut w = golden.workers[0].clone();
    w.pid = 101;
    let closes = |by_nginx, while_draining, after_client| WorkerCloses {
        by_nginx,
        while_draining,
        after_client,
        by_worker_exit: 0,
        reset_by_nginx: 0,
        reusing: 0,
        reset_while_draining: 0,
    };
    let mut a = w.clone();
    a.connections_closed = Some(closes(6, 5, 2));
    let mut b = w.clone();
    b.pid = 102;
    b.connections_closed = Some(closes(4, 2, 1));
    r.workers = vec![a.clone()];
    let mut out = String::new();
    connections_section(&mut out, &r);
    assert!(
        out.contains("  of nginx's closes, 8 by draining workers (graceful shutdown: a reload, a QUIT, a binary upgrade's WINCH; uprobe ngx_close_idle_connections and its return): 5 idle keepalive connections closed under their clients (in nginx's sweep of idle connections; a request a client sent on one at that moment fails: nginx closed the connection it came on), 2 right after nginx's own last data (a response's end, a response still streaming when cut, or an HTTP/2 GOAWAY: not told apart), 1 with nothing sent by nginx just before, 1.0 s after the drain began: 1 with the client's data last (a request waiting for its response, its client got none, or a connection without a whole request); not in the idle times below\n"),
        "{out}"
    );
    assert!(
        !out.contains("each worker"),
        "one worker: no per-worker line: {out}"
    );
    if let Some(c) = b.connections_closed.as_mut() {
        c.reset_by_nginx = 3;
    }
    r.workers = vec![a, b];
    let mut out = String::new();
    connections_section(&mut out, &r);
    assert!(
        out.contains("  closed by each worker's close() (pid): 101: nginx first 6 (draining 5), after the client 2; 102: nginx first 4 (draining 2), after the client 1, with its own reset 3\n"),
        "{out}"
    );
}

#[test]
fn each_listener_close_is_a_line_naming_its_reload() {
    use crate::model::listener_closes::{ListenerClose, ListenerClosesMerged};
    let mut c = crate::model::connections::sample_report();
    let at = |g: Option<u32>, since: u32, closed: u64, resets: u64| ListenerClose {
        seen_unix_s: 3603.0,
        port: 8080,
        reload_generation: g,
        reloads_since_attach: since,
        listeners_closed: closed,
        resets_of_queued_connections: resets,
        ..Default::default()
    };
    c.listener_closes = vec![
        at(Some(1), 1, 1, 12),
        at(Some(3), 0, 2, 1),
        at(None, 0, 1, 0),
    ];
    c.listener_closes_merged = Some(ListenerClosesMerged {
        events: 3,
        listeners_closed: 3,
        resets_of_queued_connections: 7,
    });
    let mut out = String::new();
    listener_close_lines(&mut out, &c);
    assert_eq!(
        out,
        "    after reload 1 (generation 1) at 01:00:03: port 8080, 1 listening socket closed, 12 queued connections reset\n\
         \x20   after a reload before attach (generation 3) at 01:00:03: port 8080, 2 listening sockets closed, 1 queued connection reset\n\
         \x20   with no reload seen (nginx stopping closes them too) at 01:00:03: port 8080, 1 listening socket closed, 0 queued connections reset\n\
         \x20   3 older listener closes merged (not listed): 3 listening sockets closed, 7 queued connections reset\n"
    );
}

/// On TLS, without the ngx_ssl_shutdown uprobe, the clients' closes carry their
/// caveat with why and the aborts counted; with it, the closes whose client's FIN
/// came first are said as nginx's when there are any; on plain HTTP neither.
#[test]
fn tls_client_first_closes_carry_their_caveat_or_their_count() {
    let mut r = minimal_report();
    let mut c = crate::model::connections::sample_report();
    c.ports[0]
        .resets_sent_by_reason
        .insert("TCP_ABORT_ON_CLOSE".into(), 2);
    c.tls_close_unknown = Some("the uprobe on ngx_ssl_shutdown was not attached".into());
    r.connections = Some(c.clone());
    let mut out = String::new();
    connections_section(&mut out, &r);
    assert!(!out.contains("on TLS"), "{out}");
    r.tls = Some(crate::model::TlsReport {
        handshakes: 14,
        ..Default::default()
    });
    let mut out = String::new();
    connections_section(&mut out, &r);
    assert!(
        out.contains("  on TLS, \"by the client\" may include clients that answered nginx's close_notify before nginx's own close() (who began the close is not told apart: the uprobe on ngx_ssl_shutdown was not attached); nginx's close() finding the client's data unread shows as TCP_ABORT_ON_CLOSE resets sent: 2\n"),
        "{out}"
    );
    c.tls_close_unknown = None;
    r.connections = Some(c.clone());
    let mut out = String::new();
    connections_section(&mut out, &r);
    assert!(!out.contains("on TLS"), "{out}");
    c.ports[0].closed_by_nginx_client_fin_first = 3;
    c.ports[0].closed_by_nginx_client_reset_first = 1;
    c.ports[0].closed_by_nginx_data_unread = 5;
    r.connections = Some(c);
    let mut out = String::new();
    connections_section(&mut out, &r);
    assert!(
        out.contains("  on TLS, 5 of nginx's closes found the client's data unread at nginx's close() (its close_notify answering nginx's, most often), which the kernel ends with a reset (TCP_ABORT_ON_CLOSE): nginx began them (uprobe ngx_ssl_shutdown), so they are counted as nginx's, not as resets\n"),
        "{out}"
    );
    assert!(
        out.contains("  on TLS, 3 of nginx's closes met the client's answer before nginx's own close() (2 a FIN, 1 a reset): the client answered nginx's close_notify, HTTP/2 GOAWAY or `Connection: close` response; nginx began them (uprobe ngx_ssl_shutdown), so they are counted as nginx's\n"),
        "{out}"
    );
}

/// Two ports whose nginx closes sit at different idle times (keepalive_timeout set
/// per server): the total is not pinned, each port's time is said.
#[test]
fn ports_pinned_at_different_times_are_said_each() {
    let mut r = minimal_report();
    let mut c = crate::model::connections::sample_report();
    let mut other = c.ports[0].clone();
    other.port = 8443;
    if let Some(i) = other.idle_before_nginx_close.as_mut() {
        i.pinned_ms = Some(10_000.0);
        i.min_ms_since_attach = 9_990;
        i.max_ms_since_attach = 10_020;
        i.mean_ms = 10_000.0;
        i.p50_ms = 8_192;
        i.p99_ms = 8_192;
    }
    c.ports.push(other);
    r.connections = Some(c);
    let mut out = String::new();
    connections_section(&mut out, &r);
    assert!(!out.contains("  nginx closes connections"), "{out}");
    assert!(
        out.contains("  port 80: nginx closes connections 2.0 s after their last data (10 closes"),
        "{out}"
    );
    assert!(out.contains("  port 8443: nginx closes connections 10.0 s after their last data (10 closes, every one since attach between 10.0 s and 10.0 s; the ports differ, so no verdict judged which timeout)"), "{out}");
}

/// Closes nginx made whose client's FIN came first, unread, are said with their
/// count; when not told apart, the clients' closes carry the caveat and why.
#[test]
fn closes_met_by_an_unread_fin_are_said_as_nginx_s_or_caveated() {
    let mut r = minimal_report();
    let mut c = crate::model::connections::sample_report();
    c.ports[0].closed_by_nginx_client_fin_unread = 7;
    r.connections = Some(c.clone());
    let mut out = String::new();
    connections_section(&mut out, &r);
    assert!(
        out.contains("  7 of nginx's closes met the client's FIN first, unread: nginx sent its response and closed without reading the client's EOF"),
        "{out}"
    );
    c.ports[0].closed_by_nginx_client_fin_unread = 0;
    c.ports[0].closed_by_client = 4;
    c.fin_unread_unknown = Some("struct sock's offsets are not in the kernel's BTF".into());
    c.fin_unread_told_apart = false;
    r.connections = Some(c.clone());
    let mut out = String::new();
    connections_section(&mut out, &r);
    assert!(
        out.contains("  \"by the client\" may include responses with `Connection: close` whose client closed on reading them before nginx's own close() (struct sock's offsets are not in the kernel's BTF)\n"),
        "{out}"
    );
    // A recording made before the rule: no reason recorded, not told apart.
    c.fin_unread_unknown = None;
    r.connections = Some(c);
    let mut out = String::new();
    connections_section(&mut out, &r);
    assert!(
        out.contains(
            "before nginx's own close() (recorded by a version that did not tell them apart)\n"
        ),
        "{out}"
    );
}

/// Closes right after a response name what makes nginx do so, with the values in
/// force and the requests per connection, none as the one measured.
#[test]
fn closes_right_after_a_response_list_their_possible_causes() {
    use crate::model::config::ConfigValue;
    let mut r = closing_at_4_ms();
    let mut out = String::new();
    connections_section(&mut out, &r);
    assert!(
        out.contains("  nginx closes connections right after a response (4 ms after the last data: not an idle timeout); nginx does so at keepalive_requests, keepalive_time, keepalive_timeout 0, or when the client asks (the configuration was not read)\n"),
        "{out}"
    );
    r.config = Some(keepalive_config());
    let mut out = String::new();
    connections_section(&mut out, &r);
    assert!(
        out.contains("; nginx does so at keepalive_requests 1000 (default) (953.8 requests per connection here: stub_status requests over the accepts the kernel saw), at keepalive_time 3s (/x/nginx.conf:9), with keepalive_timeout 75s (default), or when the client asks (Connection: close, HTTP/1.0): which one is not measured\n"),
        "{out}"
    );
    // Trial 15: a run that ended with the master's exit lists the stop among them.
    r.end_reason = Some(crate::model::master_exited_reason(7));
    let mut out = String::new();
    connections_section(&mut out, &r);
    assert!(
        out.contains(", with keepalive_timeout 75s (default), when it is stopping (once a worker is told to stop, a QUIT or a fast stop's TERM/INT, nginx keeps no connection alive after a response; this run ended with the master's exit), or when the client asks"),
        "{out}"
    );
    r.end_reason = None;
    // Trial 13: keepalive_requests_low fired; the line no longer says none is measured.
    r.verdicts.push(crate::model::Verdict::new(
        "keepalive_requests_low",
        crate::model::Severity::Warning,
        std::collections::BTreeMap::new(),
        &["keepalive_requests"],
        String::new(),
    ));
    let mut out = String::new();
    connections_section(&mut out, &r);
    assert!(
        out.contains(", or when the client asks (Connection: close, HTTP/1.0): keepalive_requests is measured as one (see keepalive_requests_low); the others are not\n"),
        "{out}"
    );
    r.verdicts.clear();
    // Trial 8: a server's own value is quoted beside the http level's.
    if let Some(c) = r.config.as_mut() {
        c.values.push(ConfigValue::of(
            "keepalive_requests",
            "server b.test",
            "3",
            "/x/nginx.conf:10",
        ));
    }
    let mut out = String::new();
    connections_section(&mut out, &r);
    assert!(
        out.contains("; nginx does so at keepalive_requests 1000 (default); server b.test: 3 (/x/nginx.conf:10) (953.8 requests"),
        "{out}"
    );
}

/// Trial 21: keepalive_timeout 0 wherever it is set is the cause of closes right after
/// a response, alone (keepalive_requests was listed beside it); a server keeping
/// connections alive brings the list back.
#[test]
fn keepalive_timeout_0_everywhere_is_the_cause_alone() {
    use crate::model::config::ConfigValue;
    let mut r = closing_at_4_ms();
    r.config = Some(keepalive_config());
    let mut zero = r.clone();
    if let Some(c) = zero.config.as_mut() {
        c.values[2] = ConfigValue::of("keepalive_timeout", "http", "0", "/x/nginx.conf:11");
    }
    let mut out = String::new();
    connections_section(&mut out, &zero);
    assert!(
        out.contains("; keepalive_timeout 0 (/x/nginx.conf:11): nginx keeps no connection alive, each closed after its response (953.8 requests per connection here"),
        "{out}"
    );
    assert!(!out.contains("keepalive_requests 1000"), "{out}");
    // A server keeping connections alive: the list again.
    if let Some(c) = zero.config.as_mut() {
        c.values.push(ConfigValue::of(
            "keepalive_timeout",
            "server b.test",
            "65",
            "/x/nginx.conf:12",
        ));
    }
    let mut out = String::new();
    connections_section(&mut out, &zero);
    assert!(
        out.contains("; nginx does so at keepalive_requests 1000"),
        "{out}"
    );
}

/// A report whose nginx closes sit at 4 ms after the last data, 953.8 requests per
/// connection (stub_status).
fn closing_at_4_ms() -> Report {
    let mut r = minimal_report();
    let mut c = crate::model::connections::sample_report();
    if let Some(i) = c.ports[0].idle_before_nginx_close.as_mut() {
        (i.p50_ms, i.p99_ms, i.mean_ms, i.pinned_ms) = (4, 4, 4.0, Some(4.0));
        (i.min_ms_since_attach, i.max_ms_since_attach) = (4, 4);
    }
    r.connections = Some(c);
    r.requests.per_connection = Some(953.8);
    r.requests.source = crate::model::RequestSource::StubStatus;
    r
}

/// keepalive_requests 1000 and keepalive_timeout 75s (defaults), keepalive_time 3s.
fn keepalive_config() -> crate::model::config::ConfigReport {
    use crate::model::config::ConfigValue;
    crate::model::config::ConfigReport {
        values: vec![
            ConfigValue::of("keepalive_requests", "http", "1000", "default"),
            ConfigValue::of("keepalive_time", "http", "3s", "/x/nginx.conf:9"),
            ConfigValue::of("keepalive_timeout", "http", "75s", "default"),
        ],
        ..Default::default()
    }
}
