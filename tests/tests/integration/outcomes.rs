//! What the clients got, from nginx's own access log (issue 23): status counts exact
//! against the requests made, `$request_time` and `$upstream_response_time` quantiles
//! against an upstream that takes a known time, the share of nginx's requests logged,
//! and the default `combined` format saying what it lacks.

use std::time::Duration;

use nginx_probe_tests::*;

/// 100 requests at once to an upstream that answers after 1.5 s, and 7 to a location
/// that returns 404, with `$status $request_time $upstream_*` in the format: exactly
/// 100 200s and 7 404s, p50 of the request time and of the peer's response time within
/// [1.4, 1.7] s, every line read and 100% of nginx's requests logged.
#[test]
fn a_timed_format_gives_exact_statuses_and_the_upstream_time() {
    let be = SlowBackend::start(Duration::from_millis(1500));
    let ng = Nginx::start(&NginxConfig {
        http_extra: "log_format timed '$remote_addr [$time_local] \"$request\" $status \
                     $request_time $upstream_addr $upstream_status $upstream_response_time \
                     $upstream_connect_time';"
            .into(),
        // The server's own log, relative to the prefix (nginx -p), in its own format.
        access_log: Some("off".into()),
        server_extra: format!(
            "access_log logs/timed.log timed; \
             location /slow {{ proxy_pass http://{}; }} location = /missing {{ return 404; }}",
            be.addr()
        ),
        ..NginxConfig::default()
    });
    let probe = Probe::on(&ng).json().summary_only().start();
    let codes = concurrent_requests(ng.addr(), 100, "/slow");
    assert!(codes.iter().all(|&c| c == 200), "{codes:?}");
    let codes = concurrent_requests(ng.addr(), 7, "/missing");
    assert!(codes.iter().all(|&c| c == 404), "{codes:?}");
    // The reader polls every 500 ms.
    std::thread::sleep(Duration::from_millis(1200));
    let out = probe.stop();
    let s = out.summary_json();
    let a = &s["access_log"];
    assert_eq!(a["lines"], 107, "{a}");
    assert_eq!(a["statuses"], serde_json::json!({"200": 100, "404": 7}));
    assert_eq!(a["classes"], serde_json::json!({"2xx": 100, "4xx": 7}));
    assert_eq!(a["files"][0]["formats"], serde_json::json!(["timed"]));
    assert_eq!(a["files"][0]["unparsed"], 0);
    assert_eq!(a["files"][0]["ambiguous"], 0);
    assert_eq!(a["share_logged"], 1.0, "{a}");
    let t = &a["request_time"];
    assert_eq!(t["count"], 107);
    let p50 = t["p50_s"].as_f64().unwrap();
    assert!((1.4..=1.7).contains(&p50), "request time p50 {p50}");
    let peer = &a["upstreams"][0];
    assert_eq!(peer["peer"], be.addr().to_string());
    assert_eq!(peer["tries"], 100);
    assert_eq!(peer["statuses"], serde_json::json!({"200": 100}));
    let p50 = peer["response_time"]["p50_s"].as_f64().unwrap();
    assert!((1.4..=1.7).contains(&p50), "upstream response p50 {p50}");
    assert_eq!(peer["connect_time"]["count"], 100);
    assert_eq!(a["retried"], 0);
    assert_eq!(a["lacks"], serde_json::json!(["$server_name or $host"]));
    // p99 1.5 s: the peer is named slow, against the timeout of the location.
    let v = verdict(&s, "upstream_slow").expect("upstream_slow fires");
    assert_eq!(v["severity"], "warning");
    assert_eq!(v["evidence"]["peer"], be.addr().to_string());
    assert_eq!(v["evidence"]["tries"], 100);
    assert_eq!(v["evidence"]["upstream_504"], 0);
    assert_eq!(
        v["evidence"]["proxy_read_timeout"], "proxy_read_timeout 60s (default)",
        "{v}"
    );
}

/// 30 requests at once to an upstream that answers after 2.5 s behind
/// `proxy_read_timeout 1s`: nginx gives up on every one, so the clients get exactly 30
/// 504s, the peer's logged status is 504 30 times, and `upstream_slow` is critical
/// against that timeout (p99 at about 100% of it); nginx closed each of the 30 upstream
/// connections awaiting its response, 1 s after its request, none as idle.
#[test]
fn an_upstream_slower_than_proxy_read_timeout_gives_504s_and_a_critical_upstream_slow() {
    let be = SlowBackend::start(Duration::from_millis(2500));
    let ng = Nginx::start(&NginxConfig {
        http_extra: "log_format up '$status $request_time $upstream_addr $upstream_status \
                     $upstream_response_time';"
            .into(),
        access_log: Some("off".into()),
        server_extra: format!(
            "access_log logs/up.log up; \
             location / {{ proxy_pass http://{}; proxy_read_timeout 1s; }}",
            be.addr()
        ),
        ..NginxConfig::default()
    });
    let probe = Probe::on(&ng).json().summary_only().start();
    let codes = concurrent_requests(ng.addr(), 30, "/");
    assert!(codes.iter().all(|&c| c == 504), "{codes:?}");
    std::thread::sleep(Duration::from_millis(1200));
    let out = probe.stop();
    let s = out.summary_json();
    let a = &s["access_log"];
    assert_eq!(a["lines"], 30, "{a}");
    assert_eq!(a["statuses"], serde_json::json!({"504": 30}));
    assert_eq!(a["classes"], serde_json::json!({"5xx": 30}));
    let peer = &a["upstreams"][0];
    assert_eq!(peer["tries"], 30);
    assert_eq!(peer["statuses"], serde_json::json!({"504": 30}));
    let v = verdict(&s, "upstream_slow").expect("upstream_slow fires");
    assert_eq!(v["severity"], "critical", "{v}");
    assert_eq!(v["evidence"]["upstream_504"], 30);
    // Named with the file:line that sets it.
    let t = v["evidence"]["proxy_read_timeout"].as_str().unwrap();
    assert!(
        t.starts_with("proxy_read_timeout 1s (") && t.contains("nginx.conf:"),
        "{t}"
    );
    let share = v["evidence"]["p99_share_of_timeout"].as_f64().unwrap();
    assert!(
        (0.99..=1.2).contains(&share),
        "p99 over the timeout {share}"
    );
    // nginx closed each upstream connection awaiting its response, 1 s after sending
    // the request: not idle (lifecycle tracepoints, lsndtime against lrcvtime).
    let peers = s["connections"]["upstream_peers"]
        .as_array()
        .expect("peers");
    let row = peers
        .iter()
        .find(|p| p["peer"] == be.addr().to_string())
        .unwrap_or_else(|| panic!("{} not in {peers:?}", be.addr()));
    assert_eq!(row["closed_by_nginx"], 30, "{row}");
    assert_eq!(row["closed_by_nginx_awaiting_response"], 30, "{row}");
    let awaited = row["awaited_before_nginx_close_mean_ms"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(
        (900.0..=1112.0).contains(&awaited),
        "awaited {awaited} ms, not 1 s: {row}"
    );
    assert!(
        row.get("idle_before_nginx_close_mean_ms").is_none(),
        "{row}"
    );
}

/// 90 requests answered 200 and 10 answered 500 by nginx itself (`return 500`), no
/// upstream: `clients_5xx` fires with exactly 10 of 100, critical at 10%, and names no
/// cause but the error log.
#[test]
fn clients_answered_5xx_by_nginx_itself_are_counted_and_no_cause_is_named() {
    let ng = Nginx::start(&NginxConfig {
        http_extra: "log_format st '$status $request_time';".into(),
        access_log: Some("off".into()),
        server_extra: "access_log logs/st.log st; \
                       location = /ok { return 200 ok; } location = /boom { return 500; }"
            .into(),
        ..NginxConfig::default()
    });
    let probe = Probe::on(&ng).json().summary_only().start();
    assert!(concurrent_requests(ng.addr(), 90, "/ok")
        .iter()
        .all(|&c| c == 200));
    assert!(concurrent_requests(ng.addr(), 10, "/boom")
        .iter()
        .all(|&c| c == 500));
    std::thread::sleep(Duration::from_millis(1200));
    let s = probe.stop().summary_json();
    assert_eq!(
        s["access_log"]["classes"],
        serde_json::json!({"2xx": 90, "5xx": 10})
    );
    let v = verdict(&s, "clients_5xx").expect("clients_5xx fires");
    assert_eq!(v["severity"], "critical", "{v}");
    assert_eq!(v["evidence"]["clients_5xx"], 10);
    assert_eq!(v["evidence"]["logged"], 100);
    assert_eq!(v["directives"], serde_json::json!(["error_log"]));
    let advice = v["advice"].as_str().unwrap();
    assert!(
        advice.contains("10 of the 100 requests nginx logged (10.0%) were answered 5xx (500 10)"),
        "{advice}"
    );
}

/// An upstream of a dead peer (nothing listens: ECONNREFUSED, `max_fails=0` so it is
/// never marked failed) and a live one: nginx retries every connect that failed on the
/// live peer and every client gets a 200. The access log's retried requests equal the
/// connect failures nginx logged, exactly, and `upstream_errors` says the clients got
/// no 5xx: a warning, never "failed"; the retries are said as retried and answered,
/// with what they took as logged (a refused connect on loopback is retried within a
/// millisecond: never called slow).
#[test]
fn connects_retried_on_another_peer_are_retried_and_answered_not_failed() {
    let live = Nginx::start(&NginxConfig {
        workers: 1,
        access_log: Some("off".into()),
        ..NginxConfig::default()
    });
    let dead = free_port();
    let ng = Nginx::start(&NginxConfig {
        http_extra: format!(
            "log_format up '$status $request_time $upstream_addr $upstream_status'; \
             upstream be {{ server 127.0.0.1:{dead} max_fails=0; server {} max_fails=0; }}",
            live.addr()
        ),
        access_log: Some("off".into()),
        server_extra: "access_log logs/up.log up; location / { proxy_pass http://be; }".into(),
        ..NginxConfig::default()
    });
    let probe = Probe::on(&ng).json().summary_only().start();
    let codes = concurrent_requests(ng.addr(), 60, "/");
    assert!(codes.iter().all(|&c| c == 200), "{codes:?}");
    std::thread::sleep(Duration::from_millis(1200));
    let out = probe.stop();
    let s = out.summary_json();
    let a = &s["access_log"];
    assert_eq!(a["lines"], 60, "{a}");
    assert_eq!(a["statuses"], serde_json::json!({"200": 60}));
    let failed = s["nginx_errors"]["classes"]["upstream_connect_failed"]["count"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        failed > 0,
        "round robin sent some requests to the dead peer first"
    );
    assert_eq!(a["retried"], failed, "{a}");
    assert_eq!(a["retried_ok"], failed);
    let v = verdict(&s, "upstream_errors").expect("upstream_errors fires");
    assert_eq!(v["severity"], "warning", "{v}");
    assert_eq!(v["evidence"]["retried"]["clients_5xx"], 0);
    let advice = v["advice"].as_str().unwrap();
    assert!(
        advice.contains("of its 60 requests, none was answered with a 5xx"),
        "{advice}"
    );
    assert!(
        advice.contains(&format!(
            "; {failed} requests retried on another peer (more than one peer in $upstream_addr), {failed} of them answered below 500; they took "
        )),
        "{advice}"
    );
    assert!(!advice.contains("slow"), "{advice}");
}

/// The default `combined` format: 50 200s over keepalive connections and 5 404s, exact,
/// and the text says that the request time is not logged.
#[test]
fn the_combined_format_gives_exact_statuses_and_says_request_time_is_not_logged() {
    let ng = Nginx::start(&NginxConfig::default());
    let probe = Probe::on(&ng).summary_only().start();
    assert_eq!(keepalive_requests(ng.addr(), 5, 10), 50);
    let paths: Vec<String> = (0..5).map(|i| format!("/nope{i}")).collect();
    assert_eq!(get_paths(ng.addr(), &paths).len(), 5);
    std::thread::sleep(Duration::from_millis(1200));
    let out = probe.stop();
    let text = &out.stdout;
    assert!(
        text.contains("  status: 2xx 50, 4xx 5  (200 50, 404 5)\n"),
        "{text}"
    );
    assert!(
        text.contains("  lines 55 = 100% of nginx's 55 requests (stub_status)\n"),
        "{text}"
    );
    assert!(
        text.contains("  request time: not logged (the format has no $request_time)\n"),
        "{text}"
    );
    assert!(text.contains("(format combined)"), "{text}");
}

/// Two reloads under load (the newcomer's trial): the first changes the format of the
/// log, the second moves it to a new file. Clients make one request per connection
/// all through: every 200 they got is one line read, none "not in the format" (old
/// workers' lines in the old format, new workers' in the new one, each file's lines
/// from the first the new workers wrote to the last the old ones did), and the
/// per-file counts add up to the total, the old file marked retired.
#[test]
fn reloads_that_change_the_format_and_the_path_under_load_lose_no_line() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let ng = Nginx::start(&NginxConfig {
        http_extra: "log_format m '$status $request_time';".into(),
        access_log: Some("off".into()),
        server_extra: "access_log logs/a.log m;".into(),
        ..NginxConfig::default()
    });
    let conf = ng.prefix.join("nginx.conf");
    let probe = Probe::on(&ng).json().summary_only().start();
    let stop = AtomicBool::new(false);
    let reload = |from: &str, to: &str| {
        let text = std::fs::read_to_string(&conf).unwrap();
        assert!(text.contains(from), "{text}");
        std::fs::write(&conf, text.replace(from, to)).unwrap();
        let old = ng.worker_pids();
        ng.reload();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !ng.worker_pids().iter().any(|p| !old.contains(p)) {
            assert!(std::time::Instant::now() < deadline, "no new worker");
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(1500));
    };
    let ok: usize = std::thread::scope(|s| {
        let clients: Vec<_> = (0..2)
            .map(|_| s.spawn(|| one_request_per_connection_until(ng.addr(), &stop)))
            .collect();
        std::thread::sleep(Duration::from_millis(1000));
        reload("'$status $request_time'", "'[$status] $request_time'");
        reload("access_log logs/a.log m;", "access_log logs/b.log m;");
        stop.store(true, Ordering::Relaxed);
        clients.into_iter().map(|c| c.join().unwrap()).sum()
    });
    // The old workers exit once their last connection is done; the reader polls every
    // 500 ms.
    std::thread::sleep(Duration::from_millis(1500));
    let s = probe.stop().summary_json();
    let a = &s["access_log"];
    let ok = ok as u64;
    assert!(ok > 300, "only {ok} requests");
    let on_disk = |f: &str| {
        std::fs::read_to_string(ng.prefix.join("logs").join(f))
            .unwrap()
            .lines()
            .count() as u64
    };
    let disk = (on_disk("a.log"), on_disk("b.log"));
    assert_eq!(disk.0 + disk.1, ok);
    assert_eq!(a["lines"], ok, "a.log, b.log on disk {disk:?}: {a}");
    assert_eq!(a["statuses"], serde_json::json!({ "200": ok }), "{a}");
    let files = a["files"].as_array().unwrap();
    let path = |f: &serde_json::Value| f["path"].as_str().unwrap().to_string();
    let p = ng.prefix.display();
    assert_eq!(
        files.iter().map(path).collect::<Vec<_>>(),
        [format!("{p}/logs/b.log"), format!("{p}/logs/a.log")],
        "{a}"
    );
    assert_eq!(files[1]["retired"], true, "{a}");
    let sum: u64 = files.iter().map(|f| f["lines"].as_u64().unwrap()).sum();
    assert_eq!(sum, ok, "{a}");
    for f in files {
        assert_eq!(f["unparsed"], 0, "{a}");
        assert!(f["lines"].as_u64().unwrap() > 0, "{a}");
    }
    assert_eq!(a["share_logged"], 1.0, "{a}");
}

/// `nginx -s reopen` under load with two access logs (the newcomer's trial: the fd
/// number one log was read through named the other after the reopen, and 8460 lines
/// were counted twice): each file's lines are exactly the lines nginx wrote to it, none
/// "not in the format", the total every 200 the clients got.
#[test]
fn a_reopen_under_load_counts_each_log_line_once_in_its_own_file() {
    use nix::{
        sys::signal::{kill, Signal},
        unistd::Pid,
    };
    use std::sync::atomic::{AtomicBool, Ordering};
    let other = free_port();
    let ng = Nginx::start(&NginxConfig {
        http_extra: format!(
            "log_format one '1 $status'; log_format two '2 $status $request_time'; \
             server {{ listen 127.0.0.1:{other}; access_log logs/two.log two; }}"
        ),
        access_log: Some("off".into()),
        server_extra: "access_log logs/one.log one;".into(),
        ..NginxConfig::default()
    });
    let probe = Probe::on(&ng).json().summary_only().start();
    let stop = AtomicBool::new(false);
    let b = std::net::SocketAddr::from(([127, 0, 0, 1], other));
    let ok: usize = std::thread::scope(|s| {
        let clients = [
            s.spawn(|| one_request_per_connection_until(ng.addr(), &stop)),
            s.spawn(|| one_request_per_connection_until(b, &stop)),
        ];
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(1200));
            kill(Pid::from_raw(ng.master_pid() as i32), Signal::SIGUSR1).unwrap();
        }
        std::thread::sleep(Duration::from_millis(1200));
        stop.store(true, Ordering::Relaxed);
        clients.into_iter().map(|c| c.join().unwrap()).sum()
    });
    std::thread::sleep(Duration::from_millis(1200));
    let s = probe.stop().summary_json();
    let a = &s["access_log"];
    let on_disk = |f: &str| {
        std::fs::read_to_string(ng.prefix.join("logs").join(f))
            .unwrap()
            .lines()
            .count() as u64
    };
    let (one, two) = (on_disk("one.log"), on_disk("two.log"));
    assert_eq!(one + two, ok as u64);
    assert!(one > 100 && two > 100, "{one} {two}");
    let file = |name: &str| {
        a["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"].as_str().unwrap().ends_with(name))
            .unwrap_or_else(|| panic!("no {name}: {a}"))
            .clone()
    };
    for (name, n) in [("one.log", one), ("two.log", two)] {
        let f = file(name);
        assert_eq!(f["lines"], n, "{name} on disk {n}: {a}");
        assert_eq!(f["unparsed"], 0, "{a}");
    }
    assert_eq!(a["lines"], ok as u64, "{a}");
}

/// Trial 10: `keepalive_requests 5` and one client sending 1000 requests on a
/// keepalive connection it reopens each time nginx closes it (python's http.client):
/// 200 connections of exactly 5 requests. With `$connection_requests` in a complete
/// access log, `keepalive_requests_low` fires from the log, not from the mean: 200 of
/// the 200 connections that carried a request ended after exactly 5, keepalive_requests
/// 5 quoted with its line.
#[test]
fn connections_ending_at_keepalive_requests_are_read_from_the_access_log() {
    let ng = Nginx::start(&NginxConfig {
        http_extra: "log_format cr '$status $connection_requests'; keepalive_requests 5;".into(),
        access_log: Some("off".into()),
        server_extra: "access_log logs/cr.log cr;".into(),
        ..NginxConfig::default()
    });
    let script = format!(
        "import http.client\nc = http.client.HTTPConnection('127.0.0.1', {})\nfor _ in range(1000):\n    c.request('GET', '/')\n    r = c.getresponse()\n    assert r.status == 200\n    r.read()\nc.close()\n",
        ng.port
    );
    let s = Probe::on(&ng).json().summary_around(|| {
        let out = std::process::Command::new("python3")
            .args(["-c", &script])
            .output()
            .expect("python3");
        assert!(out.status.success(), "{out:?}");
        std::thread::sleep(Duration::from_millis(600));
    });
    let a = &s["access_log"];
    assert_eq!(a["lines"], 1000, "{a}");
    assert_eq!(a["connections_with_requests"], 200, "{a}");
    assert_eq!(
        a["ended_most_at"],
        serde_json::json!({"requests": 5, "connections": 200}),
        "{a}"
    );
    let v = verdict(&s, "keepalive_requests_low")
        .unwrap_or_else(|| panic!("no keepalive_requests_low: {:?}", verdict_ids(&s)));
    assert_eq!(v["evidence"]["connections_ended_at_n"], 200, "{v}");
    assert!(
        v["advice"].as_str().unwrap().contains(
            "at least 200 of the 200 connections that carried a request ended after exactly 5 requests (nginx's access log, $connection_requests; the 0 open at the end left out)"
        ),
        "{v}"
    );
}
