//! Quick versions of three claims of `cargo xtask claims` (seed 000): the direction of
//! each effect on nginx-probe's metrics, on the same A/B configs the lab runs. Never
//! throughput: only what the probe counts.

use std::time::Duration;

use nginx_probe_tests::{
    keepalive_requests, requests_reusing_connections, total_accept_errors, total_accepts,
    verdict_ids, workers, Nginx, NginxConfig, Probe,
};
use serde_json::Value;

/// All requests (nginx's own counter).
fn requests(s: &Value) -> u64 {
    s["requests"]["count"].as_u64().unwrap()
}

/// Sum over workers of `syscalls.<name>.total_ns` for the names `pick` selects, and of
/// all syscalls outside epoll waits.
fn syscall_ns(s: &Value, pick: impl Fn(&str) -> bool) -> (u64, u64) {
    let mut picked = 0;
    let mut all = 0;
    for w in workers(s) {
        for (name, st) in w["syscalls"].as_object().unwrap() {
            if name.starts_with("epoll") {
                continue;
            }
            let ns = st["total_ns"].as_u64().unwrap();
            all += ns;
            if pick(name) {
                picked += ns;
            }
        }
    }
    (picked, all)
}

#[test]
fn claim_keepalive_timeout_0_makes_every_request_pay_a_connection() {
    // The same client against both: it reuses its connection until nginx says close.
    let run = |timeout: &str| {
        let ng = Nginx::start(&NginxConfig {
            http_extra: format!("keepalive_timeout {timeout};"),
            ..NginxConfig::default()
        });
        let mut opened = 0;
        let s = Probe::on(&ng)
            .json()
            .interval(1)
            .syscalls_all()
            .summary_around(|| {
                let (ok, n) = requests_reusing_connections(ng.addr(), 600);
                assert_eq!(ok, 600);
                opened = n;
            });
        (s, opened)
    };
    let (a, opened_a) = run("65");
    let (b, opened_b) = run("0");
    assert_eq!(opened_a, 1);
    assert_eq!(opened_b, 600);
    assert_eq!(requests(&a), 600, "{a}");
    assert_eq!(requests(&b), 600, "{b}");
    // Accepts per request: ~0 with keepalive, 1 without.
    let per_a = total_accepts(&a) as f64 / requests(&a) as f64;
    let per_b = total_accepts(&b) as f64 / requests(&b) as f64;
    assert!(
        per_a <= 0.01,
        "keepalive_timeout 65: {per_a} accepts/request: {a}"
    );
    assert!(
        per_b >= 0.99,
        "keepalive_timeout 0: {per_b} accepts/request: {b}"
    );
    // Connection set-up and tear-down (accept4 + close) take a larger share of the
    // workers' syscall time without keepalive.
    let setup = |n: &str| matches!(n, "accept4" | "accept" | "close");
    let (sa, all_a) = syscall_ns(&a, setup);
    let (sb, all_b) = syscall_ns(&b, setup);
    let (share_a, share_b) = (sa as f64 / all_a as f64, sb as f64 / all_b as f64);
    assert!(
        share_b > share_a,
        "set-up share {share_a:.3} with keepalive, {share_b:.3} without"
    );
    assert!(
        verdict_ids(&b).contains(&"keepalive_off".to_string()),
        "{b}"
    );
    assert!(
        !verdict_ids(&a).contains(&"keepalive_off".to_string()),
        "{a}"
    );
}

#[test]
fn claim_access_log_unbuffered_writes_once_per_request_buffered_and_off_do_not() {
    let run = |access_log: Option<&str>| {
        let ng = Nginx::start(&NginxConfig {
            access_log: access_log.map(String::from),
            ..NginxConfig::default()
        });
        Probe::on(&ng)
            .json()
            .interval(1)
            .summary_around(|| assert_eq!(keepalive_requests(ng.addr(), 10, 60), 600))
    };
    let per_request = |s: &Value| {
        let writes: u64 = workers(s)
            .iter()
            .map(|w| w["writes"]["access_log"]["count"].as_u64().unwrap())
            .sum();
        let log_ns: u64 = workers(s)
            .iter()
            .map(|w| w["writes"]["access_log"]["total_ns"].as_u64().unwrap())
            .sum();
        let (_, all) = syscall_ns(s, |_| false);
        assert_eq!(requests(s), 600, "{s}");
        (writes as f64 / 600.0, log_ns as f64 / all as f64)
    };
    let (a, share_a) = per_request(&run(None));
    let (b, share_b) = per_request(&run(Some("combined buffer=32k")));
    let (c, share_c) = per_request(&run(Some("off")));
    assert!((0.95..=1.05).contains(&a), "unbuffered: {a} writes/request");
    assert!(b < 0.1, "buffer=32k: {b} writes/request");
    assert_eq!(c, 0.0, "off: {c} writes/request");
    // And so the log's share of the workers' syscall time falls.
    assert!(
        share_a > share_b,
        "{share_a} unbuffered vs {share_b} buffered"
    );
    assert_eq!(share_c, 0.0);
}

#[test]
fn claim_low_soft_nofile_gives_emfile_and_worker_rlimit_nofile_clears_it() {
    // ../shared/cases case 1: soft nofile 64 (hard 4096), 300 held connections.
    let run = |main_extra: &str| {
        let ng = Nginx::start(&NginxConfig {
            nofile: Some((64, 4096)),
            main_extra: main_extra.into(),
            ..NginxConfig::default()
        });
        Probe::on(&ng)
            .json()
            .interval(1)
            .summary_around(|| ng.hold_for(300, Duration::from_millis(1500)))
    };
    let a = run("");
    let b = run("worker_rlimit_nofile 4096;");
    assert!(total_accept_errors(&a, "EMFILE") > 0, "soft limit 64: {a}");
    assert_eq!(total_accept_errors(&b, "EMFILE"), 0, "raised: {b}");
    // The workers sat at their soft limit; raised, they hold every connection open.
    for w in workers(&a) {
        assert_eq!(w["fds"]["limit"], 64, "{w}");
        assert!(w["fds"]["peak"].as_u64().unwrap() >= 58, "{w}");
    }
    for w in workers(&b) {
        assert_eq!(w["fds"]["limit"], 4096, "{w}");
    }
    assert_eq!(total_accepts(&b), 300, "{b}");
    let peak_b: u64 = workers(&b)
        .iter()
        .map(|w| w["fds"]["peak"].as_u64().unwrap())
        .sum();
    assert!(peak_b >= 300, "300 connections held at once: {b}");
}
