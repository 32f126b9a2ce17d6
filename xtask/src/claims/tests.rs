//! Unit tests of the rules and the report, fed figures from real runs.

use super::*;

#[test]
fn worker_connections_collapse_to_a_few_requests_is_refuted() {
    // The lab's run: 106896 accepts, 55 requests with 64 worker_connections.
    let a = m(|m| {
        m.accepts = 301;
        m.requests = 191_654;
        m.accepts_per_request = 301.0 / 191_654.0;
    });
    let b = m(|m| {
        m.accepts = 106_896;
        m.requests = 55;
        m.accepts_per_request = 106_896.0 / 55.0;
    });
    let j = judge_worker_connections(&[a, b]);
    assert_eq!(j.outcome, Outcome::Refuted, "{}", j.reason);
    assert!(
        j.reason.contains("at least 106841 connections"),
        "{}",
        j.reason
    );
}

fn m(f: impl FnOnce(&mut Metrics)) -> Metrics {
    let mut m = Metrics {
        requests: 20_000,
        ..Metrics::default()
    };
    f(&mut m);
    m
}

fn with_per_req(pairs: &[(&str, f64)], f: impl FnOnce(&mut Metrics)) -> Metrics {
    m(|x| {
        x.per_request = pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        f(x)
    })
}

#[test]
fn summary_metrics_sum_workers_and_leave_epoll_out() {
    let s = json!({
        "schema": 1, "type": "summary",
        "workers": [
            {"accepts": 30, "accept_share": 0.75, "accept_errors": {"EMFILE": 2},
             "accepted_then_closed": 1, "fds": {"peak": 60, "limit": 64}, "cpu_s": 0.3,
             "requests": {"count": 3000}, "event_loop": {"busy_share": 0.6},
             "writes": {"access_log": {"count": 3000, "total_ns": 3_000_000}},
             "syscalls": {
                "accept4": {"count": 32, "total_ns": 1_000_000},
                "close": {"count": 3000, "total_ns": 1_000_000},
                "epoll_wait": {"count": 900, "total_ns": 900_000_000},
                "openat": {"count": 3000, "total_ns": 2_000_000},
                "write": {"count": 3000, "total_ns": 3_000_000},
                "writev": {"count": 3000, "total_ns": 3_000_000}}},
            {"accepts": 10, "accept_share": 0.25, "accept_errors": {"EMFILE": 1},
             "accepted_then_closed": 0, "fds": {"peak": 20, "limit": 64}, "cpu_s": 0.1,
             "requests": {"count": null}, "event_loop": {"busy_share": 0.2},
             "writes": {"access_log": {"count": 1000, "total_ns": 1_000_000}},
             "syscalls": {
                "accept4": {"count": 10, "total_ns": 0},
                "close": {"count": 1000, "total_ns": 0},
                "openat": {"count": 1000, "total_ns": 0},
                "write": {"count": 1000, "total_ns": 1_000_000},
                "writev": {"count": 1000, "total_ns": 0}}}],
        "listen": [{"backlog": 16, "queue_max": 17, "overflows": 5, "drops": 5}],
        "requests": {"count": 4000, "source": "stub_status"},
        "verdicts": [{"id": "fd_exhaustion"}, {"id": "keepalive_off"}]
    });
    let client = ClientRun {
        rps: 2000.0,
        errors: 3,
        ..ClientRun::default()
    };
    let x = Metrics::from_summary(&s, &client, (300, 100)).unwrap();
    assert_eq!(x.requests, 4000);
    assert_eq!(x.accepts, 40);
    assert_eq!(x.accepts_per_request, 0.01);
    assert_eq!(x.emfile, 3);
    assert_eq!(x.accepted_then_closed, 1);
    assert_eq!((x.fd_peak, x.fd_limit), (60, 64));
    // 11 ms of syscalls outside epoll: 2 ms accept4 + close, 2 ms openat, 4 ms log.
    assert_eq!(x.setup_share, 2.0 / 11.0);
    assert_eq!(x.file_share, 2.0 / 11.0);
    assert_eq!(x.access_log_share, 4.0 / 11.0);
    assert_eq!(x.access_log_writes_per_request, 1.0);
    assert_eq!(x.per_req("openat"), 1.0);
    assert_eq!(x.per_req("epoll_wait"), 0.0);
    assert_eq!(x.syscalls_per_request, 16042.0 / 4000.0);
    assert_eq!(x.syscall_us_per_request, 11_000.0 / 4000.0);
    assert!((x.cpu_us_per_request - 100.0).abs() < 1e-9);
    assert_eq!(x.accept_skew, 1.5);
    assert!((x.busy_skew - 1.5).abs() < 1e-9);
    assert!((x.busy_cores - 0.8).abs() < 1e-9);
    assert_eq!(
        (x.listen_backlog, x.listen_queue_max, x.listen_overflows),
        (16, 17, 10)
    );
    assert!(x.queue_overflowed());
    assert_eq!(x.switches_per_1k(), 100.0);
    assert_eq!(x.verdicts, vec!["fd_exhaustion", "keepalive_off"]);
    assert_eq!((x.rps, x.client_errors), (2000.0, 3));
    // An interval line or another document is refused.
    assert!(
        Metrics::from_summary(&json!({"schema": 1, "type": "interval"}), &client, (0, 0)).is_err()
    );
}

#[test]
fn keepalive_rule() {
    // From a --quick run: 0.00 vs 1.01 accepts/request, set-up 36.9%, CPU x2.06.
    let a = m(|x| {
        x.accepts_per_request = 0.002;
        x.setup_share = 0.048;
        x.cpu_us_per_request = 58.1;
    });
    let b = m(|x| {
        x.accepts_per_request = 1.01;
        x.setup_share = 0.369;
        x.cpu_us_per_request = 119.5;
    });
    let j = judge_keepalive(&[a.clone(), b.clone()]);
    assert_eq!(j.outcome, Outcome::Confirmed, "{j:?}");
    assert!(j.saw.contains("0.00 → 1.01"), "{}", j.saw);
    // A real but smaller cost: inconclusive; almost none: refuted.
    let smaller = Metrics {
        cpu_us_per_request: 90.0,
        ..b.clone()
    };
    assert_eq!(
        judge_keepalive(&[a.clone(), smaller]).outcome,
        Outcome::Inconclusive
    );
    let cheap = Metrics {
        cpu_us_per_request: 60.0,
        ..b.clone()
    };
    assert_eq!(
        judge_keepalive(&[a.clone(), cheap]).outcome,
        Outcome::Refuted
    );
    let minor = Metrics {
        setup_share: 0.05,
        ..b.clone()
    };
    assert_eq!(
        judge_keepalive(&[a.clone(), minor]).outcome,
        Outcome::Refuted
    );
    // The change did not take (B still reuses connections), or too few requests.
    let reused = Metrics {
        accepts_per_request: 0.01,
        ..b.clone()
    };
    assert_eq!(
        judge_keepalive(&[a.clone(), reused]).outcome,
        Outcome::Inconclusive
    );
    let few = Metrics { requests: 999, ..b };
    let j = judge_keepalive(&[a, few]);
    assert_eq!(j.outcome, Outcome::Inconclusive);
    assert!(j.reason.contains("999"), "{}", j.reason);
}

#[test]
fn access_log_rule() {
    // From a --quick run: 1.000 → 0.002 → 0 writes/request, 15.8% of syscall time.
    let a = m(|x| {
        x.access_log_writes_per_request = 1.0;
        x.access_log_share = 0.158;
    });
    let b = m(|x| {
        x.access_log_writes_per_request = 0.002;
        x.access_log_share = 0.012;
    });
    let c = m(|_| {});
    let j = judge_access_log(&[a.clone(), b.clone(), c.clone()]);
    assert_eq!(j.outcome, Outcome::Confirmed, "{j:?}");
    assert!(j.saw.contains("1.000 → 0.002 → 0.000"), "{}", j.saw);
    let still = Metrics {
        access_log_writes_per_request: 1.0,
        ..b.clone()
    };
    assert_eq!(
        judge_access_log(&[a.clone(), still, c.clone()]).outcome,
        Outcome::Refuted
    );
    let free = Metrics {
        access_log_share: 0.01,
        ..a.clone()
    };
    assert_eq!(
        judge_access_log(&[free, b.clone(), c.clone()]).outcome,
        Outcome::Refuted
    );
    let none = Metrics {
        access_log_writes_per_request: 0.0,
        ..a.clone()
    };
    assert_eq!(
        judge_access_log(&[none, b.clone(), c.clone()]).outcome,
        Outcome::Refuted
    );
    let small = Metrics {
        access_log_share: 0.03,
        ..a.clone()
    };
    assert_eq!(
        judge_access_log(&[small, b.clone(), c]).outcome,
        Outcome::Inconclusive
    );
    let off_writes = m(|x| x.access_log_writes_per_request = 0.5);
    assert_eq!(
        judge_access_log(&[a, b, off_writes]).outcome,
        Outcome::Inconclusive
    );
}

#[test]
fn multi_accept_rule() {
    // From a --quick run: accept skew 1.48 → 2.00, busy skew 1.15 → 2.00.
    let a = m(|x| {
        x.accepts = 61;
        x.accept_skew = 1.48;
        x.busy_skew = 1.15;
    });
    let b = m(|x| {
        x.accepts = 61;
        x.accept_skew = 2.0;
        x.busy_skew = 2.0;
    });
    assert_eq!(
        judge_multi_accept(&[a.clone(), b.clone()]).outcome,
        Outcome::Confirmed
    );
    let even = m(|x| {
        x.accepts = 61;
        x.accept_skew = 1.1;
        x.busy_skew = 1.2;
    });
    assert_eq!(
        judge_multi_accept(&[a.clone(), even]).outcome,
        Outcome::Refuted
    );
    let skewed_off = Metrics {
        busy_skew: 1.6,
        ..a.clone()
    };
    assert_eq!(
        judge_multi_accept(&[skewed_off, b.clone()]).outcome,
        Outcome::Inconclusive
    );
    let few = Metrics { accepts: 5, ..a };
    assert_eq!(judge_multi_accept(&[few, b]).outcome, Outcome::Inconclusive);
}

#[test]
fn nofile_rule() {
    // From a --quick run: EMFILE 10 → 0; fds 65/64 → 279/4096.
    let a = m(|x| {
        x.emfile = 10;
        x.fd_peak = 65;
        x.fd_limit = 64;
    });
    let b = m(|x| {
        x.fd_peak = 279;
        x.fd_limit = 4096;
    });
    assert_eq!(
        judge_nofile(&[a.clone(), b.clone()]).outcome,
        Outcome::Confirmed
    );
    let still = Metrics {
        emfile: 3,
        ..b.clone()
    };
    assert_eq!(judge_nofile(&[a.clone(), still]).outcome, Outcome::Refuted);
    let not_raised = Metrics {
        fd_limit: 64,
        ..b.clone()
    };
    assert_eq!(
        judge_nofile(&[a.clone(), not_raised]).outcome,
        Outcome::Refuted
    );
    let light = m(|x| {
        x.fd_peak = 20;
        x.fd_limit = 64;
    });
    assert_eq!(
        judge_nofile(&[light, b.clone()]).outcome,
        Outcome::Inconclusive
    );
    let at_limit_no_error = Metrics { emfile: 0, ..a };
    assert_eq!(
        judge_nofile(&[at_limit_no_error, b]).outcome,
        Outcome::Refuted
    );
}

#[test]
fn worker_connections_rule() {
    // From a --quick run: 13125 accepts for ~1966 requests with 64 worker_connections.
    let a = m(|x| {
        x.accepts = 301;
        x.requests = 14_800;
        x.accepts_per_request = 301.0 / 14_800.0;
    });
    let b = m(|x| {
        x.accepts = 13_125;
        x.requests = 1_966;
        x.accepts_per_request = 13_125.0 / 1_966.0;
    });
    let j = judge_worker_connections(&[a.clone(), b]);
    assert_eq!(j.outcome, Outcome::Refuted, "{j:?}");
    assert!(j.reason.contains("at least 11159"), "{}", j.reason);
    let refused = m(|x| {
        x.accepted_then_closed = 4;
        x.accepts = 600;
        x.accepts_per_request = 0.03;
    });
    assert_eq!(
        judge_worker_connections(&[a.clone(), refused]).outcome,
        Outcome::Refuted
    );
    let recycled = m(|x| {
        x.accepts = 1_500;
        x.accepts_per_request = 0.075;
    });
    assert_eq!(
        judge_worker_connections(&[a.clone(), recycled]).outcome,
        Outcome::Confirmed
    );
    let untouched = a.clone();
    assert_eq!(
        judge_worker_connections(&[a, untouched]).outcome,
        Outcome::Inconclusive
    );
}

#[test]
fn open_file_cache_rule() {
    // From a --quick run: openat 1.000 → 0.000, open+stat 20.4% of syscall time.
    let a = with_per_req(&[("openat", 1.0), ("newfstatat", 2.0)], |x| {
        x.file_share = 0.204
    });
    let b = with_per_req(&[("openat", 0.0), ("newfstatat", 0.0)], |_| {});
    assert_eq!(
        judge_open_file_cache(&[a.clone(), b.clone()]).outcome,
        Outcome::Confirmed
    );
    assert_eq!(
        judge_open_file_cache(&[a.clone(), a.clone()]).outcome,
        Outcome::Refuted
    );
    let cheap = Metrics {
        file_share: 0.01,
        ..a.clone()
    };
    assert_eq!(
        judge_open_file_cache(&[cheap, b.clone()]).outcome,
        Outcome::Refuted
    );
    let middling = Metrics {
        file_share: 0.03,
        ..a
    };
    assert_eq!(
        judge_open_file_cache(&[middling, b]).outcome,
        Outcome::Inconclusive
    );
}

#[test]
fn sendfile_rule() {
    let a = with_per_req(&[("sendfile", 0.0)], |x| x.cpu_us_per_request = 37.8);
    let b = with_per_req(&[("sendfile", 1.0)], |x| x.cpu_us_per_request = 59.9);
    assert_eq!(
        judge_sendfile(&[a.clone(), b.clone()]).outcome,
        Outcome::Refuted
    );
    let cheaper = Metrics {
        cpu_us_per_request: 34.0,
        ..b.clone()
    };
    assert_eq!(
        judge_sendfile(&[a.clone(), cheaper]).outcome,
        Outcome::Confirmed
    );
    let same = Metrics {
        cpu_us_per_request: 38.5,
        ..b.clone()
    };
    assert_eq!(
        judge_sendfile(&[a.clone(), same]).outcome,
        Outcome::Inconclusive
    );
    // sendfile off still sending with sendfile: the change did not take.
    assert_eq!(
        judge_sendfile(&[b.clone(), b]).outcome,
        Outcome::Inconclusive
    );
}

#[test]
fn worker_processes_rule() {
    let w = |requests: u64, switches: u64, cpu: f64| {
        m(|x| {
            x.requests = requests;
            x.context_switches = switches;
            x.cpu_us_per_request = cpu;
        })
    };
    // From a --quick run: 293 → 146 switches/1k requests, CPU x1.23: fewer switches,
    // dearer requests.
    let one = w(11_994, 10_051, 56.7);
    let two = w(18_481, 5_415, 40.6);
    let four = w(17_964, 2_623, 50.1);
    let j = judge_worker_processes(&[one.clone(), two.clone(), four]);
    assert_eq!(j.outcome, Outcome::Inconclusive, "{j:?}");
    let switching = w(18_000, 8_000, 42.0);
    assert_eq!(
        judge_worker_processes(&[one.clone(), two.clone(), switching]).outcome,
        Outcome::Confirmed
    );
    let cheaper = w(18_000, 8_000, 36.0);
    assert_eq!(
        judge_worker_processes(&[one.clone(), two.clone(), cheaper]).outcome,
        Outcome::Refuted
    );
    let free = w(18_000, 4_000, 41.0);
    assert_eq!(
        judge_worker_processes(&[one, two, free]).outcome,
        Outcome::Refuted
    );
}

#[test]
fn backlog_rule() {
    // From a --quick run: default backlog queue max 447 of 511, no overflows; backlog
    // 16 sampled empty but 1838 overflows+drops.
    let a = m(|x| {
        x.listen_backlog = 511;
        x.listen_queue_max = 447;
    });
    let b = m(|x| {
        x.listen_backlog = 16;
        x.listen_overflows = 1838;
    });
    assert_eq!(
        judge_backlog(&[a.clone(), b.clone()]).outcome,
        Outcome::Confirmed
    );
    let absorbed = m(|x| {
        x.listen_backlog = 16;
        x.listen_queue_max = 9;
    });
    assert_eq!(
        judge_backlog(&[a.clone(), absorbed]).outcome,
        Outcome::Refuted
    );
    let full = Metrics {
        listen_queue_max: 512,
        ..a.clone()
    };
    assert_eq!(
        judge_backlog(&[full, b.clone()]).outcome,
        Outcome::Inconclusive
    );
    let ignored = Metrics {
        listen_backlog: 511,
        ..b
    };
    assert_eq!(judge_backlog(&[a, ignored]).outcome, Outcome::Inconclusive);
}

#[test]
fn claim_filter() {
    assert_eq!(select(&[]).unwrap().len(), all_claims().len());
    let one = select(&["nofile".into()]).unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].id, "nofile");
    let err = select(&["nope".into()]).err().unwrap().to_string();
    assert!(
        err.starts_with("unknown claim `nope`: known claims are keepalive, "),
        "{err}"
    );
    assert!(!err.contains('\n'));
}

#[test]
fn every_claim_has_a_seed_source_and_distinct_configs() {
    let seeds = ["000_", "002_", "003_", "004_"];
    for c in all_claims() {
        assert!(seeds.iter().any(|s| c.source.contains(s)), "{}", c.id);
        assert!(c.variants.len() >= 2, "{}", c.id);
        let labels: Vec<&str> = c.variants.iter().map(|v| v.label).collect();
        assert_eq!(labels, ["A", "B", "C", "D"][..labels.len()], "{}", c.id);
    }
}

#[test]
fn summary_is_the_last_summary_line_of_a_recording() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("r.jsonl");
    std::fs::write(
        &f,
        "{\"type\":\"header\"}\n{\"type\":\"interval\",\"n\":1}\n{\"type\":\"summary\",\"n\":2}\n\n",
    )
    .unwrap();
    assert_eq!(read_summary(&f).unwrap()["n"], 2);
    std::fs::write(&f, "{\"type\":\"interval\"}\n").unwrap();
    assert!(read_summary(&f).is_err());
}
