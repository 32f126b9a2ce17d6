use super::*;

fn raw(port: u16, set: &[(usize, u64)]) -> LifecycleRaw {
    let mut v = vec![0; LC_PER_PORT];
    for &(i, n) in set {
        v[i] = n;
    }
    LifecycleRaw {
        ports: [(port, v)].into_iter().collect(),
        ..Default::default()
    }
}

fn meta() -> LifecycleMeta {
    LifecycleMeta {
        hz: Some((250, "test".into())),
        ..Default::default()
    }
}

#[test]
fn nothing_counted_is_no_report() {
    assert_eq!(connections_report(&raw(80, &[]), None, &meta()), None);
}

#[test]
fn closes_by_draining_workers_are_their_own_counts_since_the_last_period() {
    let prev = raw(
        80,
        &[(lc::CLOSED_BY_NGINX, 4), (lc::CLOSED_WHILE_DRAINING, 1)],
    );
    let cur = raw(
        80,
        &[
            (lc::CLOSED_BY_NGINX, 14),
            (lc::CLOSED_WHILE_DRAINING, 9),
            (lc::CLOSED_WHILE_DRAINING_IDLE, 6),
        ],
    );
    let m = LifecycleMeta {
        draining_unknown: Some("why".into()),
        ..meta()
    };
    let r = connections_report(&cur, Some(&prev), &m).unwrap();
    let t = r.total();
    assert_eq!(
        (
            t.closed_by_nginx,
            t.closed_while_draining,
            t.closed_while_draining_idle
        ),
        (10, 8, 6)
    );
    assert_eq!(r.draining_unknown.as_deref(), Some("why"));
    let mut slot = crate::model::ZERO_SLOT;
    slot[crate::model::CLOSES_IDX + lc::worker::CLOSED_AFTER_CLIENT].count = 3;
    slot[crate::model::CLOSES_IDX + lc::worker::CLOSED_BY_WORKER_EXIT].count = 2;
    slot[crate::model::CLOSES_IDX + lc::worker::RESET_BY_NGINX].count = 4;
    slot[crate::model::CLOSES_IDX + lc::worker::CLOSED_REUSING].count = 5;
    slot[crate::model::CLOSES_IDX + lc::worker::RESET_WHILE_DRAINING].count = 1;
    assert_eq!(
        WorkerCloses::of(&slot),
        WorkerCloses {
            by_nginx: 0,
            while_draining: 0,
            after_client: 3,
            by_worker_exit: 2,
            reset_by_nginx: 4,
            reusing: 5,
            reset_while_draining: 1,
        }
    );
}

#[test]
fn ten_closes_at_two_seconds_are_pinned() {
    let cur = raw(
        80,
        &[
            (lc::CLOSED_BY_NGINX, 10),
            (lc::IDLE_COUNT, 10),
            (lc::IDLE_SUM_MS, 20_040),
            (lc::IDLE_MAX_MS, 2008),
            (lc::IDLE_INV_MIN_MS, !2000u64),
            (lc::IDLE_HIST + 10, 10),
        ],
    );
    let r = connections_report(&cur, None, &meta()).unwrap();
    let t = r.total();
    assert_eq!(t.closed_by_nginx, 10);
    let i = t.idle_before_nginx_close.unwrap();
    assert_eq!(i.pinned_ms, Some(2004.0));
    assert_eq!(fmt_ms(i.pinned_ms.unwrap()), "2.0 s");
    assert!(i.p50_ms >= 2000 && i.p50_ms <= 2008, "{}", i.p50_ms);
}

#[test]
fn closes_by_exiting_workers_and_after_nginx_wrote_are_their_own_counts() {
    let cur = raw(
        443,
        &[
            (lc::CLOSED_BY_NGINX, 4),
            (lc::CLOSED_BY_WORKER_EXIT, 6),
            (lc::IDLE_COUNT, 4),
            (lc::IDLE_AFTER_NGINX_WROTE, 4),
            (lc::IDLE_SUM_MS, 8_000),
            (lc::IDLE_MAX_MS, 2000),
            (lc::IDLE_INV_MIN_MS, !2000u64),
            (lc::IDLE_HIST + 10, 4),
        ],
    );
    let prev = raw(443, &[(lc::CLOSED_BY_WORKER_EXIT, 1)]);
    let t = connections_report(&cur, Some(&prev), &meta())
        .unwrap()
        .total();
    assert_eq!((t.closed_by_nginx, t.closed_by_worker_exit), (4, 5));
    let i = t.idle_before_nginx_close.unwrap();
    assert_eq!((i.count, i.after_nginx_wrote), (4, 4));
    assert_eq!(i.pinned_ms, Some(2000.0));
}

/// On ports serving HTTP/2 (or of an unknown configuration) the silent draining
/// closes with nginx's data last are not told apart from waiting requests.
#[test]
fn http2_ports_do_not_tell_a_cut_response_from_a_waiting_request() {
    let port = |port, silent, mid| PortLifecycle {
        port,
        closed_while_draining_silent: silent,
        closed_while_draining_mid_response: mid,
        ..PortLifecycle::default()
    };
    let c = ConnectionsReport {
        ports: vec![port(80, 3, 1), port(443, 4, 2)],
        ..ConnectionsReport::default()
    };
    assert_eq!(c.mid_response_on(Some(&[443])), 2);
    assert_eq!(c.mid_response_on(Some(&[])), 0);
    assert_eq!(c.mid_response_on(None), 3);
    let t = c.total();
    let said = t.silent_split(c.mid_response_on(Some(&[443])));
    assert!(
        said.starts_with("1 in the middle of a response (nginx's data after the client's"),
        "{said}"
    );
    assert!(said.contains(", 2 with nginx's data after the client's on a port serving HTTP/2 (or whose configuration is unknown), where nginx's own frames follow a request: a response cut between two writes or a request still waiting, not told apart, 4 with the client's data last"), "{said}");
    assert!(
        !t.silent_split(3).contains("in the middle of a response ("),
        "all on HTTP/2"
    );
}

/// A TLS client's FIN that answered a close nginx began before nginx's
/// `ngx_ssl_shutdown` (an HTTP/2 GOAWAY's) is counted by the state change as the
/// client's and taken back here; those after it never were the client's.
#[test]
fn fins_answering_nginx_s_tls_close_are_not_the_client_s() {
    let cur = raw(
        443,
        &[
            (lc::CLOSED_BY_NGINX, 10),
            (lc::CLOSED_BY_CLIENT, 5),
            (lc::CLOSED_BY_NGINX_CLIENT_FIN_FIRST, 4),
            (lc::CLOSED_BY_CLIENT_ANSWERING_NGINX, 2),
        ],
    );
    let prev = raw(443, &[(lc::CLOSED_BY_CLIENT, 1)]);
    let t = connections_report(&cur, Some(&prev), &meta())
        .unwrap()
        .total();
    assert_eq!(
        (
            t.closed_by_nginx,
            t.closed_by_client,
            t.closed_by_nginx_client_fin_first
        ),
        (10, 2, 4)
    );
}

/// A client's FIN nginx never read before its own close: counted by the state
/// change as the client's, by the close as nginx's; the client's count drops it.
#[test]
fn fins_nginx_never_read_are_not_the_client_s() {
    let cur = raw(
        80,
        &[
            (lc::CLOSED_BY_NGINX, 300),
            (lc::CLOSED_BY_CLIENT, 56),
            (lc::CLOSED_BY_NGINX_CLIENT_FIN_UNREAD, 56),
        ],
    );
    let t = connections_report(&cur, None, &meta()).unwrap().total();
    assert_eq!(
        (
            t.closed_by_nginx,
            t.closed_by_client,
            t.closed_by_nginx_client_fin_unread
        ),
        (300, 0, 56)
    );
}

#[test]
fn connections_closed_without_a_byte_are_left_out_of_who_closed() {
    // Trial 6's hey run: 22767 closed by nginx, 3006 by the client, 2990 of those
    // without a byte.
    let cur = raw(
        80,
        &[
            (lc::ESTABLISHED, 25773),
            (lc::CLOSED_BY_NGINX, 22767),
            (lc::CLOSED_BY_CLIENT, 3006),
            (lc::CLOSED_WITHOUT_DATA_BY_CLIENT, 2990),
            (lc::CLOSED_WITHOUT_DATA_BY_NGINX, 2),
            (lc::CLOSED_BY_RESET, 1),
            (lc::CLOSED_WITHOUT_DATA_BY_RESET, 1),
        ],
    );
    let t = connections_report(&cur, None, &meta()).unwrap().total();
    assert_eq!(t.closed_without_data(), 2993);
    let d = t.with_data();
    assert_eq!(
        (d.closed_by_nginx, d.closed_by_client, d.closed_by_reset),
        (22765, 16, 0)
    );
    assert_eq!(d.closed_without_data(), 2993, "kept for the sentence");
}

#[test]
fn spread_idle_times_are_not_pinned() {
    assert!(!pinned(10, 2000, 1000.0, 10));
    assert!(pinned(2000, 2008, 2004.0, 10));
    assert!(!pinned(2000, 2008, 2004.0, 2));
}

#[test]
fn deltas_and_reasons() {
    let prev = raw(80, &[(lc::RST_SENT, 2), (lc::RST_BY_REASON + 1, 2)]);
    let cur = raw(80, &[(lc::RST_SENT, 5), (lc::RST_BY_REASON + 1, 5)]);
    let m = LifecycleMeta {
        reason_names: vec!["NOT_SPECIFIED".into(), "NO_SOCKET".into()],
        ..meta()
    };
    let r = connections_report(&cur, Some(&prev), &m).unwrap();
    assert_eq!(r.ports[0].resets_sent, 3);
    assert_eq!(r.ports[0].resets_sent_by_reason["NO_SOCKET"], 3);
    assert_eq!(connections_report(&cur, Some(&cur), &m), None);
}
