//! Upstream connections and fd exhaustion away from accept4 (cases 10 and 11 of
//! `shared/cases/README.md`): a reverse proxy without and with upstream keepalive,
//! `socket()` failing with EMFILE while connecting to upstream, and `open()` failing
//! with EMFILE under an `open_file_cache` larger than the fd limit.

use std::time::Duration;

use nginx_probe_tests::*;

/// A front nginx proxying `/` to `backend` through `upstream be`, with `upstream_extra`
/// in the upstream block and `location_extra` in the location.
fn proxy(backend: std::net::SocketAddr, upstream_extra: &str, location_extra: &str) -> Nginx {
    Nginx::start(&NginxConfig {
        access_log: Some("off".into()),
        http_extra: format!("upstream be {{ server {backend}; {upstream_extra} }}"),
        server_extra: format!("location / {{ proxy_pass http://be; {location_extra} }}"),
        ..NginxConfig::default()
    })
}

fn backend_nginx() -> Nginx {
    Nginx::start(&NginxConfig {
        workers: 1,
        access_log: Some("off".into()),
        ..NginxConfig::default()
    })
}

/// Case 10: every proxied request opens (and closes) one upstream connection; the
/// client keeps its own connections alive. 400 requests over 4 client connections:
/// exactly 400 connects, all established through EINPROGRESS + getsockopt(SO_ERROR),
/// and the verdict names the upstream keepalive directives.
#[test]
fn proxy_without_upstream_keepalive_connects_once_per_request() {
    let be = backend_nginx();
    let ng = proxy(be.addr(), "", "");
    let probe = Probe::on(&ng).json().summary_only().uprobes().start();
    assert_eq!(keepalive_requests(ng.addr(), 4, 100), 400);
    let out = probe.stop();
    let s = out.summary_json();
    assert_eq!(
        sum_workers(&s, &["requests", "count"]),
        400,
        "{}",
        out.stdout
    );
    assert_eq!(sum_workers(&s, &["upstream", "connects"]), 400);
    assert_eq!(sum_workers(&s, &["upstream", "established"]), 400);
    // Loopback connects still return EINPROGRESS: every result is learned later.
    assert_eq!(sum_workers(&s, &["upstream", "in_progress"]), 400);
    assert_eq!(sum_workers(&s, &["upstream", "latency_count"]), 400);
    assert_eq!(sum_workers(&s, &["upstream", "closed"]), 400);
    assert_eq!(sum_workers(&s, &["upstream", "fds_open"]), 0);
    assert_eq!(sum_workers(&s, &["upstream", "errors", "ECONNREFUSED"]), 0);
    assert_eq!(sum_workers(&s, &["syscalls", "socket", "count"]), 400);
    let v = verdict(&s, "upstream_keepalive_off").expect("upstream_keepalive_off fires");
    assert_eq!(v["evidence"]["upstream_connects"], 400);
    assert_eq!(v["evidence"]["requests"], 400);
    assert_eq!(v["evidence"]["connects_per_request"], 1.0);
    assert!(v["evidence"]["connect_p99_us"].as_f64().unwrap() > 0.0);
    let directives: Vec<&str> = v["directives"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    assert_eq!(
        directives,
        [
            "keepalive (upstream block)",
            "proxy_http_version 1.1",
            "proxy_set_header Connection \"\""
        ]
    );
    // What the configuration says, where: the pool is not set, the location proxies
    // with HTTP/1.0 and `Connection: close` (nginx's defaults).
    let loc = format!("server 127.0.0.1:{} location /", ng.port);
    assert_eq!(
        v["evidence"]["config_upstream_keepalive"],
        "upstream be: unset (no idle upstream connections kept) (default)"
    );
    assert_eq!(
        v["evidence"]["config_proxy_pass"],
        format!("{loc}: http://be ({})", ng.conf_at("proxy_pass"))
    );
    assert_eq!(
        v["evidence"]["config_proxy_http_version"],
        format!("{loc}: 1.0 (default)")
    );
    assert_eq!(
        v["evidence"]["config_proxy_set_header_connection"],
        format!("{loc}: close (default)")
    );
    // The client reused its connections: this is not the client-side keepalive_off.
    assert!(verdict(&s, "keepalive_off").is_none(), "{}", s["verdicts"]);
    // Trial 19: `access_log off`: the upstreams' response time is not in any log, and
    // upstream_slow is said not judged, with the 400 connects that proxied.
    assert_eq!(
        s["not_judged"],
        serde_json::json!([{"rules": ["upstream_slow"], "why": "nginx made 400 upstream connects in the period (tracepoint sock:inet_sock_set_state), and no access log line was read: upstream_slow reads each peer's $upstream_response_time there"}]),
        "{s}"
    );
}

/// Trial 17: under `--detail sampled` (the default of `--record`) whose windows held
/// none of the requests, the rule was silent. It reads the connection lifecycle's
/// upstream connects (continuous) over the whole period: 400 requests proxied without
/// a pool make exactly 400 connects however few the windows caught.
#[test]
fn sampled_detail_judges_upstream_keepalive_on_the_whole_period() {
    let be = backend_nginx();
    let ng = proxy(be.addr(), "", "");
    let probe = Probe::on(&ng)
        .json()
        .summary_only()
        .detail("sampled")
        .start();
    assert_eq!(keepalive_requests(ng.addr(), 4, 100), 400);
    let s = probe.stop().summary_json();
    assert_eq!(s["requests"]["count"], 400, "{}", s["requests"]);
    let v = verdict(&s, "upstream_keepalive_off")
        .unwrap_or_else(|| panic!("no upstream_keepalive_off in {}", s["verdicts"]));
    assert_eq!(v["evidence"]["upstream_connects"], 400, "{v}");
    assert_eq!(v["evidence"]["established"], 400, "{v}");
    assert_eq!(v["evidence"]["requests"], 400, "{v}");
    assert!(v["evidence"]["connects_from"].is_string(), "{v}");
    assert_eq!(v["evidence"]["detail"]["sampled"], true, "{v}");
}

/// Trial 18: a live peer proxied without a pool beside an upstream block whose only
/// server is dead. 300 requests to /direct make 300 connects; 700 to /lonely are
/// refused. Per request that is 0.30, under the rule's 0.5; over the live peer's tries
/// in the access log ($upstream_addr) it is 1.00, and the verdict fires, said per try.
#[test]
fn a_dead_single_server_block_does_not_hide_a_live_peer_without_a_pool() {
    let be = backend_nginx();
    let dead = free_port();
    let ng = Nginx::start(&NginxConfig {
        http_extra: format!(
            "log_format up '$status $upstream_addr $upstream_status'; \
             upstream live {{ server {}; }} upstream lonely {{ server 127.0.0.1:{dead}; }}",
            be.addr()
        ),
        access_log: Some("off".into()),
        server_extra: "access_log logs/up.log up; \
             location /direct { proxy_pass http://live/; } \
             location /lonely { proxy_pass http://lonely; }"
            .into(),
        ..NginxConfig::default()
    });
    let probe = Probe::on(&ng).json().summary_only().start();
    let mut codes = Vec::new();
    for _ in 0..3 {
        codes.extend(concurrent_requests(ng.addr(), 100, "/direct"));
    }
    for _ in 0..7 {
        codes.extend(concurrent_requests(ng.addr(), 100, "/lonely"));
    }
    // The access-log reader polls every 500 ms.
    std::thread::sleep(Duration::from_millis(1200));
    let s = probe.stop().summary_json();
    assert_eq!(codes.iter().filter(|&&c| c == 200).count(), 300);
    assert_eq!(codes.iter().filter(|&&c| c == 502).count(), 700);
    assert_eq!(s["requests"]["count"], 1000, "{}", s["requests"]);
    let v = verdict(&s, "upstream_keepalive_off")
        .unwrap_or_else(|| panic!("no upstream_keepalive_off in {}", s["verdicts"]));
    assert_eq!(v["evidence"]["tries"], 300, "{v}");
    assert_eq!(v["evidence"]["requests"], 1000, "{v}");
    assert_eq!(v["evidence"]["established"], 300, "{v}");
    assert_eq!(
        v["evidence"]["tries_of_peers"][be.addr().to_string()],
        300,
        "{v}"
    );
    let a = v["advice"].as_str().unwrap();
    assert!(
        a.starts_with(&format!(
            "1.00 new upstream connections per try of {} (their 300 tries",
            be.addr()
        )),
        "{a}"
    );
}

/// The trial on nginx 1.22: `upstream be { server ...; keepalive 16; }` proxied without
/// `proxy_http_version` (1.0) nor `Connection ""`: the pool is never used, 400 requests
/// over 4 client connections make exactly 400 upstream connects. The advice says the
/// pool is configured but unused and names both settings with their place, never
/// "add keepalive", and says who closed each connection first (the TIME-WAIT's side).
#[test]
fn a_configured_pool_unused_is_said_so_with_what_defeats_it() {
    let be = backend_nginx();
    let ng = proxy(be.addr(), "keepalive 16;", "");
    let probe = Probe::on(&ng).json().summary_only().uprobes().start();
    assert_eq!(keepalive_requests(ng.addr(), 4, 100), 400);
    let s = probe.stop().summary_json();
    assert_eq!(sum_workers(&s, &["upstream", "connects"]), 400);
    assert_eq!(sum_workers(&s, &["upstream", "established"]), 400);
    let v = verdict(&s, "upstream_keepalive_off").expect("upstream_keepalive_off fires");
    assert_eq!(v["evidence"]["upstream_connects"], 400);
    assert_eq!(v["evidence"]["requests"], 400);
    let loc = format!("server 127.0.0.1:{} location /", ng.port);
    let pool = format!("upstream be: 16 ({})", ng.conf_at("keepalive 16"));
    assert_eq!(v["evidence"]["config_upstream_keepalive"], pool);
    let a = v["advice"].as_str().unwrap();
    assert!(
        a.contains(&format!(
            "a pool is configured (upstream be: keepalive 16 ({})) but unused: {loc}: proxy_http_version 1.0 (default) (nginx speaks HTTP/1.0",
            ng.conf_at("keepalive 16")
        )),
        "{a}"
    );
    assert!(
        a.contains(&format!(
            "{loc}: proxy_set_header Connection close (default) (not cleared"
        )),
        "{a}"
    );
    assert!(!a.contains("`keepalive 32;`"), "{a}");
    // Who closed first is measured: every one of the 400 closes, by nginx or the
    // upstream (HTTP/1.0: mostly the upstream, but nginx may finish first), no reset.
    let by = &v["evidence"]["upstream_closed_first_by"];
    let (n, u) = (
        by["nginx"].as_u64().unwrap(),
        by["upstream"].as_u64().unwrap(),
    );
    assert_eq!((n + u, by["reset"].as_u64()), (400, Some(0)), "{by}");
    assert!(
        a.contains(&format!(
            "of the upstream connections closed, nginx closed {n} first, the upstream {u}, resets ended 0"
        )),
        "{a}"
    );
}

/// A pool set up right (`keepalive 16`, HTTP/1.1, `Connection ""`) in front of a peer
/// whose every response says `Connection: close` (as an HTTP/1.0 server's does):
/// 400 requests, 400 connects, 400 closes, nearly all within a jiffy of the peer's
/// response. The verdict says the responses end the connections and names none of
/// nginx's directives (trial 6 was told to set the three it had set).
#[test]
fn a_peer_whose_responses_end_its_connections_is_named_not_nginx_settings() {
    let be = SlowBackend::start(Duration::ZERO);
    // Beside it, a server that gets no request, proxying to the same peer without a
    // pool nor the settings: its settings are no cause (trial 7 was sent to fix them).
    let idle = free_port();
    let ng = Nginx::start(&NginxConfig {
        access_log: Some("off".into()),
        http_extra: format!(
            "upstream be {{ server {0}; keepalive 16; }} upstream plain {{ server {0}; }} \
             server {{ listen 127.0.0.1:{idle}; location / {{ proxy_pass http://plain; }} }}",
            be.addr()
        ),
        server_extra: "location / { proxy_pass http://be; proxy_http_version 1.1; \
                       proxy_set_header Connection \"\"; }"
            .into(),
        ..NginxConfig::default()
    });
    let probe = Probe::on(&ng).json().summary_only().uprobes().start();
    assert_eq!(keepalive_requests(ng.addr(), 4, 100), 400);
    let s = probe.stop().summary_json();
    assert_eq!(sum_workers(&s, &["upstream", "connects"]), 400);
    let v = verdict(&s, "upstream_keepalive_off").expect("upstream_keepalive_off fires");
    let by = &v["evidence"]["upstream_closed_first_by"];
    let closes: u64 = ["nginx", "upstream", "reset"]
        .iter()
        .map(|k| by[k].as_u64().unwrap())
        .sum();
    assert_eq!(closes, 400, "{by}");
    let ended = v["evidence"]["upstream_closed_within_a_jiffy_of_its_data"]
        .as_u64()
        .unwrap();
    assert!(ended >= 360, "{v}");
    let a = v["advice"].as_str().unwrap();
    assert!(
        a.contains(&format!("and the proxy settings allow its reuse, yet {ended} of 400 upstream connections closed within a jiffy of the upstream's last data")),
        "{a}"
    );
    assert!(a.contains("nginx's settings are not the cause"), "{a}");
    assert_eq!(v["directives"], serde_json::json!([]), "{v}");
}

/// Case 10 with `keepalive 32; proxy_http_version 1.1; proxy_set_header Connection "";`:
/// at most one upstream connection per client connection in flight, within the pool,
/// and no verdict.
#[test]
fn proxy_with_upstream_keepalive_reuses_connections() {
    let be = backend_nginx();
    let ng = proxy(
        be.addr(),
        "keepalive 32;",
        "proxy_http_version 1.1; proxy_set_header Connection \"\";",
    );
    let probe = Probe::on(&ng).json().summary_only().uprobes().start();
    assert_eq!(keepalive_requests(ng.addr(), 4, 100), 400);
    let out = probe.stop();
    let s = out.summary_json();
    assert_eq!(
        sum_workers(&s, &["requests", "count"]),
        400,
        "{}",
        out.stdout
    );
    let connects = sum_workers(&s, &["upstream", "connects"]);
    // The client sends one request at a time: each worker needs one upstream
    // connection, kept in its pool.
    assert!((1..=2).contains(&connects), "{connects} connects");
    assert_eq!(sum_workers(&s, &["upstream", "established"]), connects);
    assert_eq!(
        sum_workers(&s, &["upstream", "fds_open"]),
        connects,
        "pooled, open"
    );
    assert!(
        verdict(&s, "upstream_keepalive_off").is_none(),
        "{}",
        s["verdicts"]
    );
}

/// Without uprobes the request total is nginx's own stub_status counter: exact (the
/// request sent upstream is not counted again), so the verdict stands on it.
#[test]
fn upstream_verdict_stands_on_nginx_own_request_count() {
    let be = backend_nginx();
    let ng = proxy(be.addr(), "", "");
    let probe = Probe::on(&ng).json().summary_only().start();
    assert_eq!(keepalive_requests(ng.addr(), 4, 100), 400);
    let s = probe.stop().summary_json();
    assert_eq!(sum_workers(&s, &["upstream", "connects"]), 400);
    assert_eq!(s["requests"]["source"], "stub_status", "{s}");
    assert_eq!(s["requests"]["count"], 400, "{s}");
    let v = verdict(&s, "upstream_keepalive_off").expect("fires on the exact total");
    assert_eq!(v["evidence"]["connects_per_request"], 1.0, "{v}");
}

/// A refused upstream: the errno comes from getsockopt(SO_ERROR), not connect().
#[test]
fn refused_upstream_connects_are_counted_by_errno() {
    let closed_port = free_port();
    let ng = Nginx::start(&NginxConfig {
        access_log: Some("off".into()),
        server_extra: format!("location / {{ proxy_pass http://127.0.0.1:{closed_port}; }}"),
        ..NginxConfig::default()
    });
    let probe = Probe::on(&ng).json().summary_only().start();
    assert_eq!(one_request_per_connection(ng.addr(), 7), 0, "all 502");
    let s = probe.stop().summary_json();
    assert_eq!(sum_workers(&s, &["upstream", "connects"]), 7);
    assert_eq!(sum_workers(&s, &["upstream", "errors", "ECONNREFUSED"]), 7);
    assert_eq!(sum_workers(&s, &["upstream", "established"]), 0);
}

/// Newcomer trial: a peer that resets every connection after reading the request,
/// behind `upstream be` without keepalive (nginx's defaults: HTTP/1.0, `Connection:
/// close`). 300 requests (`UPSTREAM_MIN_REQUESTS` is 200: with fewer the keepalive rule
/// would be silent anyway), 100 clients at a time: every client gets a 502, nginx
/// established 300 upstream connections and logged 300 resets naming the peer.
/// `upstream_errors` says the peer reset fresh connections (nginx kept none idle: no
/// keepalive timeout mismatch) and names it; `upstream_keepalive_off` stays silent
/// (keepalive cannot keep connections the peer resets, and a reset leaves no
/// TIME-WAIT).
#[test]
fn a_peer_resetting_every_connection_is_the_peer_not_keepalive() {
    let peer = ResetBackend::start();
    let ng = proxy(peer.addr(), "", "");
    let probe = Probe::on(&ng).json().summary_only().start();
    let mut codes = Vec::new();
    for _ in 0..3 {
        codes.extend(concurrent_requests(ng.addr(), 100, "/"));
    }
    let out = probe.stop();
    let s = out.summary_json();
    assert_eq!(codes.len(), 300);
    assert!(codes.iter().all(|&c| c == 502), "{codes:?}");
    assert_eq!(s["requests"]["count"], 300, "{s}");
    assert_eq!(
        peer.reset.load(std::sync::atomic::Ordering::Relaxed),
        300,
        "one connection per request, each reset"
    );
    assert_eq!(sum_workers(&s, &["upstream", "established"]), 300);
    let e = &s["nginx_errors"];
    assert_eq!(e["classes"]["upstream_reset"]["count"], 300, "{e}");
    // The class row names the peer, not keepalive_timeout: the verdict refuses it too.
    assert_eq!(
        e["classes"]["upstream_reset"]["directive"], "upstream server",
        "{e}"
    );
    let name = format!("http://{}", peer.addr());
    assert_eq!(e["upstream_peers"][0]["peer"], name.as_str(), "{e}");
    assert_eq!(
        e["upstream_peers"][0]["by_class"]["upstream_reset"], 300,
        "{e}"
    );
    let v = verdict(&s, "upstream_errors").expect("upstream_errors fires");
    assert_eq!(v["severity"], "critical", "{v}");
    let advice = v["advice"].as_str().unwrap();
    assert!(
        advice.contains(&format!(
            "most: the upstream reset fresh connections (502) (peer: {name} (300 lines)): nginx keeps no idle connections to it ({} is a server of upstream be, which sets no keepalive)",
            peer.addr()
        )),
        "{advice}"
    );
    assert!(
        !advice.contains("keepalive timeout") && !advice.contains("shorter"),
        "no keepalive mismatch without a pool: {advice}"
    );
    assert_eq!(
        v["evidence"]["by_peer"][&name]["upstream_reset"], 300,
        "{v}"
    );
    assert!(
        !v["directives"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d.as_str().unwrap().contains("keepalive_timeout")),
        "{v}"
    );
    assert!(
        verdict(&s, "upstream_keepalive_off").is_none(),
        "{}",
        s["verdicts"]
    );
}

/// Newcomer trial: a dead peer and a resetting one in one `upstream` without
/// keepalive, `max_fails=0` so neither is ever marked down: every request tries both
/// (one refused connect, one connection reset after the request), and every client gets
/// a 502. 300 requests: 600 tries in the access log, 600 `connect()` calls (300
/// ECONNREFUSED, 300 established and reset). Tries equal connect() calls, so nothing
/// was reused: `upstream_errors` names the peers and gives no keepalive-timeout advice,
/// and `upstream_keepalive_off` stays silent. The old measure (tries against
/// established connects: 600 > 300) took the refused tries for reuse and advised a
/// keepalive timeout for a pool nginx never had.
#[test]
fn a_dead_and_a_resetting_peer_get_no_pool_advice() {
    let peer = ResetBackend::start();
    let dead = free_port();
    let ng = Nginx::start(&NginxConfig {
        http_extra: format!(
            "log_format up '$status $upstream_addr $upstream_status'; \
             upstream be {{ server 127.0.0.1:{dead} max_fails=0; server {} max_fails=0; }}",
            peer.addr()
        ),
        access_log: Some("off".into()),
        server_extra: "access_log logs/up.log up; location / { proxy_pass http://be; }".into(),
        ..NginxConfig::default()
    });
    let probe = Probe::on(&ng).json().summary_only().start();
    let mut codes = Vec::new();
    for _ in 0..3 {
        codes.extend(concurrent_requests(ng.addr(), 100, "/"));
    }
    // The access-log reader polls every 500 ms.
    std::thread::sleep(Duration::from_millis(1200));
    let s = probe.stop().summary_json();
    assert_eq!(codes, vec![502; 300]);
    assert_eq!(peer.reset.load(std::sync::atomic::Ordering::Relaxed), 300);
    assert_eq!(sum_workers(&s, &["upstream", "connects"]), 600, "{s}");
    assert_eq!(
        sum_workers(&s, &["upstream", "errors", "ECONNREFUSED"]),
        300
    );
    assert_eq!(sum_workers(&s, &["upstream", "established"]), 300);
    let tries: u64 = s["access_log"]["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["tries"].as_u64().unwrap())
        .sum();
    assert_eq!(tries, 600, "{}", s["access_log"]);
    let classes = &s["nginx_errors"]["classes"];
    assert_eq!(classes["upstream_reset"]["count"], 300, "{classes}");
    assert_eq!(
        classes["upstream_connect_failed"]["count"], 300,
        "{classes}"
    );
    let v = verdict(&s, "upstream_errors").expect("upstream_errors fires");
    let advice = v["advice"].as_str().unwrap();
    assert!(
        !advice.contains("keepalive timeout") && !advice.contains("shorter"),
        "tries = connect() calls: nothing reused, no pool to blame: {advice}"
    );
    assert!(
        advice.contains(&format!("http://{}", peer.addr())),
        "{advice}"
    );
    assert!(
        advice.contains(&format!("http://127.0.0.1:{dead}")),
        "{advice}"
    );
    assert!(
        verdict(&s, "upstream_keepalive_off").is_none(),
        "{}",
        s["verdicts"]
    );
}

/// Newcomer trial 15: an upstream of a live peer and a dead one (nothing listens) with
/// `max_fails=1 fail_timeout=1s`, 40 requests paced over 4 s on one worker: nginx takes
/// the dead peer out after each failed try and tries it again a second later, so it
/// sees a few connects, far below `upstream_errors`' 10 lines and 1%. Every client gets
/// a 200; `upstream_peer_down` names the peer with exactly the failed connects nginx
/// logged (`connect() failed` lines naming it = the access log's retried requests),
/// none established, and its `server` line with max_fails and fail_timeout.
#[test]
fn a_dead_peer_taken_out_by_max_fails_is_named_however_few_its_tries() {
    let live = backend_nginx();
    let dead = free_port();
    let ng = Nginx::start(&NginxConfig {
        workers: 1,
        http_extra: format!(
            "log_format up '$status $upstream_addr $upstream_status'; \
             upstream be {{ server 127.0.0.1:{dead} max_fails=1 fail_timeout=1s; server {}; }}",
            live.addr()
        ),
        access_log: Some("off".into()),
        server_extra: "access_log logs/up.log up; location / { proxy_pass http://be; }".into(),
        ..NginxConfig::default()
    });
    let probe = Probe::on(&ng).json().summary_only().start();
    let (statuses, _) = paced_requests(ng.addr(), 1, 40, 10.0);
    assert_eq!(statuses, [(200, 40)].into(), "every client got a 200");
    std::thread::sleep(Duration::from_millis(1200));
    let s = probe.stop().summary_json();
    let failed = log_lines(
        &ng,
        "connect() failed (111: Connection refused) while connecting to upstream",
    );
    assert!(failed >= 2, "a try about every second: {failed}");
    assert_eq!(s["access_log"]["retried"], failed, "{}", s["access_log"]);
    let v = verdict(&s, "upstream_peer_down").unwrap_or_else(|| panic!("{}", s["verdicts"]));
    assert_eq!(v["severity"], "warning");
    let p = &v["evidence"]["peers"][0];
    let peer = format!("127.0.0.1:{dead}");
    assert_eq!(p["peer"], peer.as_str(), "{v}");
    assert_eq!(p["connects"], failed, "{v}");
    assert_eq!(p["connect_failed"], failed, "{v}");
    assert_eq!(p["established"], 0);
    assert_eq!(
        p["error_log_by_class"],
        serde_json::json!({"upstream_connect_failed": failed})
    );
    assert!(
        p["server"].as_str().unwrap().starts_with(&format!(
            "upstream be: `server {peer} max_fails=1 fail_timeout=1s` ("
        )) && p["server"]
            .as_str()
            .unwrap()
            .ends_with("; max_fails 1, fail_timeout 1s)"),
        "{v}"
    );
    assert_eq!(
        v["evidence"]["connect_errors"],
        format!("ECONNREFUSED {failed}")
    );
    let advice = v["advice"].as_str().unwrap();
    assert!(advice.contains("none was answered with a 5xx"), "{advice}");
    assert!(
        advice.contains(&format!("{failed} requests retried on another peer")),
        "{advice}"
    );
    assert!(
        verdict(&s, "upstream_errors").is_none(),
        "{}",
        s["verdicts"]
    );
}

/// Count of error-log lines containing `needle`.
fn log_lines(ng: &Nginx, needle: &str) -> u64 {
    ng.error_log()
        .lines()
        .filter(|l| l.contains(needle))
        .count() as u64
}

/// Case 11 A: `worker_rlimit_nofile 256`, a backend that answers after 1 s, 400
/// clients at once: socket() fails with EMFILE while connecting to upstream, once per
/// `socket() failed (24: Too many open files)` line of nginx's error log.
#[test]
fn socket_emfile_while_connecting_to_upstream() {
    let be = SlowBackend::start(Duration::from_secs(1));
    let ng = Nginx::start(&NginxConfig {
        main_extra: "worker_rlimit_nofile 256;".into(),
        access_log: Some("off".into()),
        server_extra: format!("location / {{ proxy_pass http://{}; }}", be.addr()),
        ..NginxConfig::default()
    });
    let probe = Probe::on(&ng).json().summary_only().start();
    let codes = concurrent_requests(ng.addr(), 400, "/");
    let out = probe.stop();
    let s = out.summary_json();
    let logged = log_lines(&ng, "socket() failed (24: Too many open files)");
    let emfile = sum_workers(&s, &["fd_errors", "socket", "EMFILE"]);
    eprintln!(
        "case 11 A: socket() EMFILE {emfile}, log lines {logged}, accept4 EMFILE {}, 500s {}",
        sum_workers(&s, &["fd_errors", "accept4", "EMFILE"]),
        codes.iter().filter(|&&c| c == 500).count()
    );
    assert!(logged > 0, "the setup must exhaust fds: {codes:?}");
    assert_eq!(emfile, logged, "{}", ng.error_log());
    assert_eq!(sum_workers(&s, &["upstream", "socket_emfile"]), logged);
    assert_eq!(
        codes.iter().filter(|&&c| c == 500).count() as u64,
        logged,
        "one 500 per failed socket()"
    );
    let v = verdict(&s, "fd_exhaustion").expect("fd_exhaustion");
    assert_eq!(v["severity"], "critical");
    assert_eq!(v["evidence"]["by_syscall"]["socket"]["EMFILE"], logged);
    let advice = v["advice"].as_str().unwrap();
    assert!(advice.contains("(256)"), "{advice}");
    assert!(
        advice.contains("held by upstream connections"),
        "upstream first: {advice}"
    );
    assert!(v["directives"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d == "keepalive (upstream block)"));
}

/// Case 11 B: `worker_rlimit_nofile 256; open_file_cache max=10000;` and `try_files
/// $uri @fallback` over 3000 distinct files: open() fails with EMFILE (nginx logs each
/// at crit) and the fallback answers, with no accept4 error at all.
#[test]
fn openat_emfile_under_open_file_cache() {
    let ng = Nginx::start(&NginxConfig {
        workers: 1,
        main_extra: "worker_rlimit_nofile 256;".into(),
        access_log: Some("off".into()),
        http_extra: "open_file_cache max=10000;".into(),
        server_extra: "location / { try_files $uri @fallback; } location @fallback { return 200 \"fallback\\n\"; }".into(),
        ..NginxConfig::default()
    });
    let html = ng.prefix.join("html");
    let paths: Vec<String> = (0..3000)
        .map(|i| {
            std::fs::write(html.join(format!("f{i}")), "file\n").expect("write file");
            format!("/f{i}")
        })
        .collect();
    let probe = Probe::on(&ng).json().summary_only().start();
    let bodies = get_paths(ng.addr(), &paths);
    // Let the 2 s fd classification see the cached files.
    std::thread::sleep(Duration::from_millis(2500));
    let out = probe.stop();
    let s = out.summary_json();
    let fallbacks = bodies.iter().filter(|b| b.as_str() == "fallback\n").count() as u64;
    let logged = log_lines(&ng, "failed (24: Too many open files)");
    let emfile = sum_workers(&s, &["fd_errors", "openat", "EMFILE"]);
    eprintln!("case 11 B: openat EMFILE {emfile}, log lines {logged}, fallbacks {fallbacks}");
    assert!(fallbacks > 2000, "{fallbacks} fallbacks");
    assert_eq!(emfile, logged, "{}", out.stdout);
    assert_eq!(emfile, fallbacks, "one failed open() per fallback");
    assert_eq!(sum_workers(&s, &["fd_errors", "accept4", "EMFILE"]), 0);
    assert_eq!(total_accept_errors(&s, "EMFILE"), 0);
    let v = verdict(&s, "fd_exhaustion").expect("fd_exhaustion");
    assert_eq!(v["evidence"]["by_syscall"]["openat"]["EMFILE"], emfile);
    let advice = v["advice"].as_str().unwrap();
    assert!(
        advice.contains("held by regular files") && advice.contains("open_file_cache"),
        "{advice}"
    );
    assert!(!advice.contains("upstream"), "{advice}");
    assert!(v["directives"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d == "open_file_cache max="));
}

/// The accept uprobe counts only `ngx_get_connection`'s calls from `ngx_event_accept`
/// (told by the return address): a proxy calls it for every upstream connection too,
/// and those are not accepts. Without the fd-table walk (`--writes-from-proc`) the
/// uprobe is still the accept source: 300 one-request client connections, each with
/// its own upstream connection, are 300 accepts and 300 upstream connects' worth of
/// calls left out.
#[test]
fn accepts_from_the_uprobe_leave_out_upstream_connections_without_the_fd_walk() {
    let be = backend_nginx();
    let ng = proxy(be.addr(), "", "");
    let s = Probe::on(&ng)
        .json()
        .arg("--writes-from-proc")
        .detail_windows("100ms", "1h")
        .summary_around(|| assert_eq!(one_request_per_connection(ng.addr(), 300), 300));
    assert_eq!(
        s["detail"]["accepts_from"], "uprobe ngx_get_connection",
        "{s}"
    );
    assert_eq!(total_accepts(&s), 300, "{s}");
    assert_eq!(s["detail"]["accepts_check"]["nginx_accepted"], 300, "{s}");
    assert_eq!(s["detail"]["accepts_check"]["agree"], true, "{s}");
}
