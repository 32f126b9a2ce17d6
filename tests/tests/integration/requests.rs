//! Requests per worker: exact with uprobes, unknown without (nginx's own counter gives
//! the exact total); the syscall mix per request for a static file.

use nginx_probe_tests::{
    keepalive_requests, sum_workers, verdict_ids, workers, Nginx, NginxConfig, Probe,
};
use std::time::Duration;

#[test]
fn uprobes_count_2000_requests_on_10_keepalive_connections() {
    let ng = Nginx::start(&NginxConfig::default());
    let probe = Probe::on(&ng).json().uprobes().syscalls_all().start();
    assert!(
        probe.stderr.iter().any(|l| l.contains("request uprobes")),
        "{:?}",
        probe.stderr
    );
    assert_eq!(keepalive_requests(ng.addr(), 10, 200), 2000);
    let s = probe.stop().summary_json();
    assert_eq!(sum_workers(&s, &["requests", "count"]), 2000, "{s}");
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
fn without_uprobes_requests_are_nginx_own_total_and_unknown_per_worker() {
    let ng = Nginx::start(&NginxConfig::default());
    let probe = Probe::on(&ng).json().start();
    assert!(
        probe
            .stderr
            .iter()
            .any(|l| l.contains("requests from nginx's counters")),
        "{:?}",
        probe.stderr
    );
    assert_eq!(keepalive_requests(ng.addr(), 4, 250), 1000);
    // nginx logs a request after its response has gone: the clients can have the
    // last response before its access-log write() is made. Stop once all 1000 are
    // written, or the summary can end between the two.
    let logged = std::time::Instant::now();
    while ng.access_log_lines() < 1000 && logged.elapsed() < std::time::Duration::from_secs(5) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(ng.access_log_lines(), 1000);
    let s = probe.stop().summary_json();
    assert_eq!(s["requests"]["source"], "stub_status", "{s}");
    assert_eq!(s["requests"]["count"], 1000, "{s}");
    assert_eq!(s["requests"]["per_connection"], 250.0, "{s}");
    // Stock static-file path, all workers: one writev (headers), one sendfile (body),
    // one access-log write per request.
    let mix = &s["requests"]["syscalls_per_request"];
    for call in ["writev", "sendfile", "write"] {
        assert_eq!(mix[call].as_f64(), Some(1.0), "{call}: {mix}");
    }
    // Trial 20: openat is not traced in the core set (no table row), though the
    // access-log opens' program counts its calls: not in the per-request mix.
    assert!(mix.get("openat").is_none(), "{mix}");
    assert_eq!(s["stub_status"]["accepted"], 4, "{s}");
    for w in workers(&s) {
        assert_eq!(w["requests"]["source"], "unknown");
        assert!(w["requests"]["count"].is_null(), "{w}");
        assert!(w["requests"]["unknown_reason"]
            .as_str()
            .unwrap()
            .contains("--uprobes"));
        assert!(w["requests"].get("p50_ns").is_none());
        // The default (core) set: no openat/close/... keys at all, not zeros.
        assert!(w["syscalls"].get("openat").is_none(), "{w}");
        assert!(w["syscalls"].get("accept4").is_some(), "{w}");
    }
    assert_eq!(s["traced_syscalls"].as_array().unwrap().len(), 20, "{s}");
}

/// nginx proxying to its own second server block, `listen LISTEN(port)`, through
/// `http://PEER_HOST:port`: 4 curl runs of 50 requests each on one connection. Returns
/// the backend's port, the JSON summary and the text report of the run.
fn proxied_to_itself(
    listen: impl Fn(u16) -> String,
    peer_host: &str,
) -> (u16, serde_json::Value, String) {
    let back = nginx_probe_tests::free_port();
    let ng = Nginx::start(&NginxConfig {
        http_extra: format!(
            "server {{ listen {}; location / {{ return 200 back; }} }}",
            listen(back)
        ),
        server_extra: format!("location / {{ proxy_pass http://{peer_host}:{back}; }}"),
        ..NginxConfig::default()
    });
    let url = format!("http://127.0.0.1:{}/?[1-50]", ng.port);
    let run = Probe::on(&ng).json().start();
    let text = Probe::on(&ng).plain().start();
    for _ in 0..4 {
        let got = nginx_probe_tests::curl_statuses(&[&url]);
        assert_eq!(got.len(), 50, "{got:?}");
    }
    std::thread::sleep(Duration::from_millis(500));
    let s = run.stop().summary_json();
    (back, s, text.stop().stdout)
}

/// Trial 10: nginx proxying to its own second server block (TCP, no upstream
/// keepalive). 4 curl runs of 50 requests each on one connection: nginx's counter says
/// 400 requests (each proxied request counted at both hops) over 204 accepts, "2.0 per
/// connection" though the clients sent 50 each. Per connection is unknown, said why
/// (the peer, its connects, the listen line), and no accepts-per-request rule fires.
#[test]
fn nginx_proxying_to_its_own_listener_makes_requests_per_connection_unknown() {
    let (back, s, text) = proxied_to_itself(|back| format!("127.0.0.1:{back}"), "127.0.0.1");
    let r = &s["requests"];
    assert_eq!(r["count"], 400, "{r}");
    assert!(r["per_connection"].is_null(), "{r}");
    let why = r["per_connection_unknown"].as_str().unwrap_or_default();
    assert!(
        why.starts_with(&format!(
            "nginx proxies to its own listener 127.0.0.1:{back} (200 connects in the period"
        )),
        "{r}"
    );
    assert!(
        text.contains(&format!(
            "  nginx proxies to its own listener 127.0.0.1:{back} (200 connects"
        )),
        "{text}"
    );
    let ids = verdict_ids(&s);
    assert!(!ids.iter().any(|i| i == "keepalive_off"), "{ids:?}");
    let up = nginx_probe_tests::verdict(&s, "upstream_keepalive_off")
        .unwrap_or_else(|| panic!("no upstream_keepalive_off: {ids:?}"));
    assert!(
        up["advice"]
            .as_str()
            .unwrap()
            .contains("so per proxied request up to twice this"),
        "{up}"
    );
}

/// The same through one of the host's own non-loopback addresses: the backend server
/// listens on every address (`listen PORT`), nginx proxies to the host's address
/// (192.0.2.2 here, read from the interfaces), which reaches that wildcard listener as
/// loopback does. Its hops are found as nginx's own (they were taken for a remote peer:
/// the host's addresses were not read).
#[test]
fn nginx_proxying_to_its_own_host_address_is_an_own_hop() {
    let Some(host) = nix::ifaddrs::getifaddrs()
        .unwrap()
        .filter_map(|a| a.address?.as_sockaddr_in().map(|v4| v4.ip()))
        .find(|ip| !ip.is_loopback())
    else {
        panic!("this test needs a non-loopback IPv4 address on the host");
    };
    let (back, s, _) = proxied_to_itself(|back| back.to_string(), &host.to_string());
    let r = &s["requests"];
    assert_eq!(r["count"], 400, "{r}");
    assert!(r["per_connection"].is_null(), "{r}");
    let why = r["per_connection_unknown"].as_str().unwrap_or_default();
    assert!(
        why.starts_with(&format!(
            "nginx proxies to its own listener {host}:{back} (200 connects in the period, lifecycle tracepoints; listen {back} in "
        )),
        "{r}"
    );
    let peer = s["connections"]["upstream_peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["peer"] == format!("{host}:{back}"))
        .unwrap_or_else(|| panic!("{}", s["connections"]));
    assert_eq!(peer["own_address"], true, "{peer}");
}

/// Trial 12 F3: nginx proxying to its own second server through `upstream be` with a
/// `keepalive 2` pool set up for reuse (HTTP/1.1, `Connection ""`), 30 clients at once:
/// the pool overflows, nginx closing the connections it cannot keep on their
/// responses. nginx's count holds both hops (exactly twice hey's requests), so the
/// connects per counted request are a floor of those per client request:
/// `upstream_pool_overflow` fires and says so (it was silent with own hops).
#[test]
fn a_self_proxy_s_pool_overflow_is_said_as_a_floor() {
    let back = nginx_probe_tests::free_port();
    let ng = Nginx::start(&NginxConfig {
        workers: 1,
        http_extra: format!(
            "upstream be {{ server 127.0.0.1:{back}; keepalive 2; }} \
             server {{ listen 127.0.0.1:{back}; access_log off; location / {{ return 200 back; }} }}"
        ),
        server_extra: "location / { proxy_pass http://be; proxy_http_version 1.1; \
                       proxy_set_header Connection \"\"; }"
            .into(),
        ..NginxConfig::default()
    });
    let run = Probe::on(&ng).json().start();
    let url = format!("http://127.0.0.1:{}/", ng.port);
    assert_eq!(
        nginx_probe_tests::hey(&["-n", "3000", "-c", "30"], &url),
        3000
    );
    std::thread::sleep(Duration::from_millis(500));
    let s = run.stop().summary_json();
    assert_eq!(s["requests"]["count"], 6000, "both hops: {}", s["requests"]);
    let peer = s["connections"]["upstream_peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["peer"] == format!("127.0.0.1:{back}"))
        .unwrap_or_else(|| panic!("{}", s["connections"]))
        .clone();
    let v = nginx_probe_tests::verdict(&s, "upstream_pool_overflow")
        .unwrap_or_else(|| panic!("{peer} {:?}", verdict_ids(&s)));
    assert_eq!(v["evidence"]["upstream_connects"], peer["connects"], "{v}");
    assert_eq!(v["evidence"]["requests"], 6000);
    assert!(v["evidence"]["requests_include_own_hops"]
        .as_str()
        .unwrap()
        .starts_with(&format!(
            "nginx proxies to its own listener 127.0.0.1:{back}"
        )));
    let advice = v["advice"].as_str().unwrap();
    assert!(
        advice.contains("per request counted by nginx, its own hops among them (")
            && advice.contains("so per client request more: a floor"),
        "{advice}"
    );
    assert!(verdict_ids(&s)
        .iter()
        .all(|i| i != "upstream_keepalive_off"));
}
