//! Requests per worker: exact with uprobes, estimated without; the syscall mix per
//! request for a static file.

use nginx_probe_tests::{keepalive_requests, workers, Nginx, NginxConfig, ProbeRun};
use nix::sys::signal::Signal;

fn sum(s: &serde_json::Value, f: impl Fn(&serde_json::Value) -> u64) -> u64 {
    workers(s).iter().map(f).sum()
}

#[test]
fn uprobes_count_2000_requests_on_10_keepalive_connections() {
    let ng = Nginx::start(&NginxConfig::default());
    let probe = ProbeRun::start(&[
        "--pid",
        &ng.master_pid().to_string(),
        "--json",
        "--uprobes",
        "--syscalls",
        "all",
    ]);
    assert!(
        probe.stderr.iter().any(|l| l.contains("request uprobes")),
        "{:?}",
        probe.stderr
    );
    assert_eq!(keepalive_requests(ng.addr(), 10, 200), 2000);
    let s = probe.stop_with(Signal::SIGINT).summary_json();
    assert_eq!(
        sum(&s, |w| w["requests"]["count"].as_u64().unwrap()),
        2000,
        "{s}"
    );
    for w in workers(&s) {
        let r = &w["requests"];
        assert_eq!(r["source"], "uprobe");
        if r["count"].as_u64().unwrap() > 0 {
            // Every connection carried exactly 200 requests.
            assert_eq!(r["per_connection"].as_f64().unwrap(), 200.0, "{w}");
            let p50 = r["p50_ns"].as_u64().unwrap();
            let p99 = r["p99_ns"].as_u64().unwrap();
            assert!(
                p50 > 0 && p50 <= p99 && p99 <= r["max_ns"].as_u64().unwrap(),
                "{r}"
            );
            // Stock static-file path: one open, two stats, one writev (headers), one
            // sendfile (body), one access-log write per request.
            let mix = &r["syscalls_per_request"];
            for (call, per) in [
                ("openat", 1.0),
                ("newfstatat", 2.0),
                ("writev", 1.0),
                ("sendfile", 1.0),
                ("write", 1.0),
            ] {
                assert_eq!(mix[call].as_f64().unwrap(), per, "{call}: {mix}");
            }
        }
    }
}

#[test]
fn without_uprobes_requests_are_estimated_from_writev() {
    let ng = Nginx::start(&NginxConfig::default());
    let probe = ProbeRun::start(&["--pid", &ng.master_pid().to_string(), "--json"]);
    assert_eq!(keepalive_requests(ng.addr(), 4, 250), 1000);
    let s = probe.stop_with(Signal::SIGINT).summary_json();
    assert_eq!(
        sum(&s, |w| w["requests"]["count"].as_u64().unwrap()),
        1000,
        "{s}"
    );
    for w in workers(&s) {
        assert_eq!(w["requests"]["source"], "writev_estimate");
        assert!(w["requests"].get("p50_ns").is_none());
        // The default (core) set: no openat/close/... keys at all, not zeros.
        assert!(w["syscalls"].get("openat").is_none(), "{w}");
        assert!(w["syscalls"].get("accept4").is_some(), "{w}");
    }
    assert_eq!(s["traced_syscalls"].as_array().unwrap().len(), 9, "{s}");
}
