//! Who closed nginx's client connections, after how long idle, and resets: the
//! `connections` part of the report (TCP tracepoints, continuous layer), against a real
//! nginx with known clients. Run as root through `cargo xtask test`.

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpStream},
    time::Duration,
};

use nginx_probe_tests::{port_entry, reset_on_close, Nginx, NginxConfig, Probe, INDEX_BODY};
use serde_json::Value;

const N: usize = 10;

/// Opens a connection, sends one keepalive request and reads its whole response
/// (headers and the 30-byte body), leaving the connection open.
fn one_request(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
        .expect("send");
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).expect("read response");
        assert!(n > 0, "nginx closed before the response was complete");
        buf.extend_from_slice(&chunk[..n]);
        if let Some(h) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            if buf.len() >= h + 4 + INDEX_BODY.len() {
                break;
            }
        }
    }
    assert!(buf.starts_with(b"HTTP/1.1 200"));
    s
}

/// The summary's port entry of `ng` in `connections`.
fn port_of(summary: &Value, ng: &Nginx) -> Value {
    port_counted_by(summary, ng, false)
}

/// The probe's flags that make the perf-event tracepoint programs count the lifecycle
/// (`perf`) or leave the default, the raw tracepoints.
fn lifecycle_set(perf: bool) -> Option<&'static str> {
    perf.then_some("--lifecycle-from-perf-events")
}

/// [`port_of`], checking which program set counted: the perf-event tracepoints when
/// `perf`, else (where the kernel has BTF) the raw tracepoints.
fn port_counted_by(summary: &Value, ng: &Nginx, perf: bool) -> Value {
    let source = summary["connections"]["source"].as_str().unwrap_or("");
    if perf {
        assert!(source.starts_with("tracepoints "), "{source}");
        assert_eq!(
            summary["connections"]["raw_unavailable"],
            "--lifecycle-from-perf-events"
        );
    } else if std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        assert!(source.starts_with("raw tracepoints "), "{source}");
    }
    port_entry(summary, ng)
}

fn keepalive_2s() -> Nginx {
    Nginx::start(&NginxConfig {
        http_extra: "keepalive_timeout 2s;".into(),
        ..NginxConfig::default()
    })
}

/// Case 17: N clients send one request each and then stay idle past nginx's
/// `keepalive_timeout 2s`: nginx closes all N, after 2.0 s idle, and says so.
#[test]
fn nginx_closes_idle_keepalive_connections_at_its_timeout() {
    let ng = keepalive_2s();
    let json = Probe::on(&ng).json().start();
    let text = Probe::on(&ng).plain().start();
    let conns: Vec<TcpStream> = (0..N).map(|_| one_request(ng.addr())).collect();
    // nginx closes them at 2 s; the clients only read the FIN afterwards.
    std::thread::sleep(Duration::from_millis(3000));
    for mut c in conns {
        let mut b = [0u8; 1];
        assert_eq!(c.read(&mut b).expect("read after nginx's close"), 0);
    }
    std::thread::sleep(Duration::from_millis(600));
    let summary = json.stop().summary_json();
    let text = text.stop().stdout;
    let p = port_of(&summary, &ng);
    assert_eq!(p["established"], N as u64, "{p}");
    assert_eq!(p["closed_by_nginx"], N as u64, "{p}");
    assert_eq!(p["closed_by_client"], 0, "{p}");
    assert_eq!(p["closed_by_reset"], 0, "{p}");
    let idle = &p["idle_before_nginx_close"];
    assert_eq!(idle["count"], N as u64, "{idle}");
    for k in ["p50_ms", "mean_ms", "pinned_ms"] {
        let v = idle[k].as_f64().unwrap_or_else(|| panic!("{k} in {idle}"));
        assert!((1800.0..=2200.0).contains(&v), "{k} {v} not 2.0 s +-10%");
    }
    assert!(
        text.contains("nginx closes connections 2.0 s after their last data"),
        "{text}"
    );
    // Each lived its request and 2.0 s idle.
    let l = &p["lifetime"];
    assert_eq!(l["count"], N as u64, "{l}");
    for k in ["p50_ms", "mean_ms"] {
        let v = l[k].as_f64().unwrap_or_else(|| panic!("{k} in {l}"));
        assert!(
            (1800.0..=2200.0).contains(&v),
            "lifetime {k} {v} not 2.0 s +-10%"
        );
    }
    assert!(
        text.contains("lifetime, established to first close: p50 2.0 s"),
        "{text}"
    );
    let v = verdict(&summary, "keepalive_timeout_closes")
        .unwrap_or_else(|| panic!("no keepalive_timeout_closes in {}", summary["verdicts"]));
    assert_eq!(v["evidence"]["closed_by_nginx"], N as u64);
    assert_eq!(v["directives"][0], "keepalive_timeout");
    assert_eq!(
        v["evidence"]["config_keepalive_timeout"],
        format!("2s ({})", ng.conf_at("keepalive_timeout 2s"))
    );
    assert!(
        v["advice"].as_str().unwrap_or("").contains("idle 2.0 s"),
        "{v}"
    );
    assert!(
        text.contains(&format!("closed first by nginx {N}  by the client 0")),
        "{text}"
    );
}

/// The trial on nginx 1.22: `client_header_timeout 2s` (keepalive_timeout left at its
/// 75s default), 12 clients send half a request line and wait. nginx closes each after
/// 2.0 s, logs `client timed out ... while reading client request line` at info and a
/// 408 in the access log: the verdict names client_header_timeout with its line and
/// those counts, never keepalive_timeout nor "idle".
#[test]
fn closes_at_client_header_timeout_name_it_not_keepalive_timeout() {
    const HALF: usize = 12;
    let ng = Nginx::start(&NginxConfig {
        http_extra: "client_header_timeout 2s;".into(),
        error_log_level: "info".into(),
        ..NginxConfig::default()
    });
    let json = Probe::on(&ng).json().start();
    let conns: Vec<TcpStream> = (0..HALF)
        .map(|_| {
            let mut s = TcpStream::connect(ng.addr()).expect("connect");
            s.write_all(b"GET / HT").expect("send half a request line");
            s
        })
        .collect();
    await_nginx_closes(conns);
    let summary = json.stop().summary_json();
    let p = port_of(&summary, &ng);
    assert_eq!(p["closed_by_nginx"], HALF as u64, "{p}");
    assert!(verdict(&summary, "keepalive_timeout_closes").is_none());
    let v = verdict(&summary, "nginx_timeout_closes")
        .unwrap_or_else(|| panic!("no nginx_timeout_closes in {}", summary["verdicts"]));
    assert_eq!(v["evidence"]["closed_by_nginx"], HALF as u64, "{v}");
    assert_eq!(
        v["directives"],
        serde_json::json!(["client_header_timeout"])
    );
    let m = &v["evidence"]["timeout_match"];
    assert_eq!(m["client_timed_out_lines"], HALF as u64, "{m}");
    assert_eq!(m["access_log_408"], HALF as u64, "{m}");
    let advice = v["advice"].as_str().unwrap_or("");
    let at = ng.conf_at("client_header_timeout 2s");
    assert!(
        advice.contains(&format!("that is client_header_timeout http: 2s ({at})")),
        "{advice}"
    );
    assert!(
        advice.contains(&format!("{HALF} `client timed out` lines")),
        "{advice}"
    );
    assert!(!advice.contains("idle"), "{advice}");
    assert!(!advice.contains("keepalive_timeout"), "{advice}");
    assert_eq!(
        v["evidence"]["config_keepalive_timeout"], "75s (default)",
        "{v}"
    );
}

/// 12 clients that connect and send nothing, closed by nginx at `client_header_timeout
/// 2s`: 12 closes without a byte, and the timeout is still named (trial 7: left out of
/// the closes judged, they were said as "too few closes").
#[test]
fn silent_clients_closed_at_client_header_timeout_name_it() {
    const SILENT: usize = 12;
    let ng = Nginx::start(&NginxConfig {
        http_extra: "client_header_timeout 2s;".into(),
        ..NginxConfig::default()
    });
    let json = Probe::on(&ng).json().start();
    let conns: Vec<TcpStream> = (0..SILENT)
        .map(|_| TcpStream::connect(ng.addr()).expect("connect"))
        .collect();
    await_nginx_closes(conns);
    let summary = json.stop().summary_json();
    let p = port_of(&summary, &ng);
    assert_eq!(p["closed_by_nginx"], SILENT as u64, "{p}");
    assert_eq!(p["closed_without_data_by_nginx"], SILENT as u64, "{p}");
    let v = verdict(&summary, "nginx_timeout_closes")
        .unwrap_or_else(|| panic!("no nginx_timeout_closes in {}", summary["verdicts"]));
    assert_eq!(v["evidence"]["closed_by_nginx"], SILENT as u64, "{v}");
    assert_eq!(
        v["directives"],
        serde_json::json!(["client_header_timeout"])
    );
}

/// Waits 3 s (past a 2 s `client_header_timeout`), reads each of `conns` to the EOF
/// nginx's close gives, asserting nginx sent nothing, then 600 ms for the probe.
fn await_nginx_closes(conns: Vec<TcpStream>) {
    std::thread::sleep(Duration::from_millis(3000));
    for mut c in conns {
        let mut b = Vec::new();
        c.read_to_end(&mut b).expect("read after nginx's close");
        assert!(b.is_empty(), "nginx sent {:?}", String::from_utf8_lossy(&b));
    }
    std::thread::sleep(Duration::from_millis(600));
}

/// The control: N clients that close their connection themselves 1.0 s after the
/// response, before nginx's 2 s: counted as the client's, each having lived 1.0 s.
#[test]
fn clients_that_close_first_are_counted_as_the_client() {
    let ng = keepalive_2s();
    let summary = Probe::on(&ng).json().summary_around(|| {
        let conns: Vec<TcpStream> = (0..N).map(|_| one_request(ng.addr())).collect();
        std::thread::sleep(Duration::from_millis(1000));
        drop(conns);
    });
    let p = port_of(&summary, &ng);
    let l = &p["lifetime"];
    assert_eq!(l["count"], N as u64, "{l}");
    for k in [
        "p50_ms",
        "mean_ms",
        "min_ms_since_attach",
        "max_ms_since_attach",
    ] {
        let v = l[k].as_f64().unwrap_or_else(|| panic!("{k} in {l}"));
        assert!((900.0..=1100.0).contains(&v), "{k} {v} not 1.0 s +-10%");
    }
    assert_eq!(p["established"], N as u64, "{p}");
    assert_eq!(p["closed_by_client"], N as u64, "{p}");
    assert_eq!(p["closed_by_nginx"], 0, "{p}");
    assert_eq!(p["closed_by_reset"], 0, "{p}");
    assert!(p.get("idle_before_nginx_close").is_none(), "{p}");
    assert!(verdict(&summary, "keepalive_timeout_closes").is_none());
}

/// The same on TLS: 20 curl runs over HTTPS/1.1, 5 requests each on one connection,
/// then curl sends its close_notify and closes. nginx, having read it, answers at once
/// and its FIN can leave before the client's; the close is still the client's (a trial
/// counted 20 of 20 as nginx's, and `keepalive_requests_low` then advised raising
/// keepalive_requests from 1000).
#[test]
fn tls_clients_that_close_first_are_counted_as_the_client() {
    let ng = Nginx::start(&NginxConfig {
        tls: true,
        http_extra: "keepalive_timeout 30s;".into(),
        ..NginxConfig::default()
    });
    let url = format!("{}?[1-5]", ng.https_url());
    let summary = Probe::on(&ng).json().summary_around(|| {
        for _ in 0..20 {
            let got = nginx_probe_tests::curl_statuses(&["--http1.1", &url]);
            assert_eq!(got.len(), 5, "{got:?}");
        }
    });
    let p = port_of(&summary, &ng);
    assert_eq!(p["established"], 20, "{p}");
    assert_eq!(p["closed_by_client"], 20, "{p}");
    assert_eq!(p["closed_by_nginx"], 0, "{p}");
    assert_eq!(p["closed_by_reset"], 0, "{p}");
    // curl closes once its 5th response is in (its close_notify, then its FIN): no
    // idle time before the client's close, every one measured.
    let i = &p["idle_before_client_close"];
    assert_eq!(i["count"], 20, "{p}");
    let max = i["max_ms_since_attach"].as_f64().unwrap_or(f64::MAX);
    assert!(max < 100.0, "idle before curl's close up to {max} ms: {i}");
    assert!(verdict(&summary, "keepalive_requests_low").is_none());
}

/// Connections that carry not one byte, closed every way: 7 the client closes at once,
/// 4 nginx closes at `client_header_timeout 1s`, 3 the client resets; beside them 5
/// that carry a request and are closed by the client. Each no-data close is counted
/// with who closed it (`tcp_sock.bytes_received`), the 5 are not.
#[test]
fn connections_closed_without_a_byte_are_counted_by_who_closed() {
    without_a_byte(false);
}

/// 4 clients send one request each and close after 600 ms idle, 3 others reset after
/// the same 600 ms (SO_LINGER 0), beside nginx's 2 s keepalive_timeout: the idle time
/// before the client's closes and before the resets received is 600 ms each (+-10%),
/// every one of them, on both program sets.
#[test]
fn the_idle_time_before_a_client_s_close_or_reset_is_measured() {
    for perf in [false, true] {
        idle_before_client_close(perf);
    }
}

fn idle_before_client_close(perf: bool) {
    let ng = keepalive_2s();
    let json = Probe::on(&ng).json().args(lifecycle_set(perf)).start();
    let text = (!perf).then(|| Probe::on(&ng).plain().start());
    let conns: Vec<TcpStream> = (0..7).map(|_| one_request(ng.addr())).collect();
    std::thread::sleep(Duration::from_millis(600));
    for (i, c) in conns.into_iter().enumerate() {
        if i >= 4 {
            reset_on_close(&c);
        }
        drop(c);
    }
    std::thread::sleep(Duration::from_millis(600));
    let summary = json.stop().summary_json();
    let p = port_counted_by(&summary, &ng, perf);
    assert_eq!(p["closed_by_client"], 4, "{p}");
    assert_eq!(p["closed_by_reset"], 3, "{p}");
    assert_eq!(p["resets_received"], 3, "{p}");
    for (key, n) in [
        ("idle_before_client_close", 4),
        ("idle_before_reset_received", 3),
    ] {
        let i = &p[key];
        assert_eq!(i["count"], n, "{key}: {p}");
        for k in ["mean_ms", "min_ms_since_attach", "max_ms_since_attach"] {
            let v = i[k].as_f64().unwrap_or_else(|| panic!("{key}.{k} in {i}"));
            assert!(
                (540.0..=660.0).contains(&v),
                "{key}.{k} {v} not 600 ms +-10%"
            );
        }
    }
    assert!(p.get("idle_before_nginx_close").is_none(), "{p}");
    if let Some(text) = text.map(|t| t.stop().stdout) {
        assert!(
            text.contains("idle before the client's close (last data sent or received): p50"),
            "{text}"
        );
    }
}

/// The same counted by the perf-event tracepoint programs (the fallback set).
#[test]
fn connections_closed_without_a_byte_are_counted_by_the_perf_event_fallback_too() {
    without_a_byte(true);
}

fn without_a_byte(perf: bool) {
    let ng = Nginx::start(&NginxConfig {
        http_extra: "client_header_timeout 1s;".into(),
        ..NginxConfig::default()
    });
    let probe = Probe::on(&ng).json().args(lifecycle_set(perf));
    let summary = probe.summary_around(|| {
        let waiting: Vec<TcpStream> = (0..4)
            .map(|_| TcpStream::connect(ng.addr()).expect("connect"))
            .collect();
        for _ in 0..7 {
            drop(TcpStream::connect(ng.addr()).expect("connect"));
        }
        for _ in 0..3 {
            let s = TcpStream::connect(ng.addr()).expect("connect");
            reset_on_close(&s);
            drop(s);
        }
        for _ in 0..5 {
            drop(one_request(ng.addr()));
        }
        std::thread::sleep(Duration::from_millis(1800));
        for mut c in waiting {
            let mut b = Vec::new();
            c.read_to_end(&mut b).expect("read after nginx's close");
            assert!(b.is_empty(), "nginx sent {:?}", String::from_utf8_lossy(&b));
        }
    });
    let p = port_counted_by(&summary, &ng, perf);
    assert_eq!(p["established"], 19, "{p}");
    assert_eq!(p["closed_by_client"], 12, "{p}");
    assert_eq!(p["closed_by_nginx"], 4, "{p}");
    assert_eq!(p["closed_by_reset"], 3, "{p}");
    assert_eq!(p["closed_without_data_by_client"], 7, "{p}");
    assert_eq!(p["closed_without_data_by_nginx"], 4, "{p}");
    assert_eq!(p["closed_without_data_by_reset"], 3, "{p}");
    // Every one was established since attach: 19 lifetimes, the longest the 4 silent
    // ones nginx closed at client_header_timeout 1s.
    let l = &p["lifetime"];
    assert_eq!(l["count"], 19, "{l}");
    let max = l["max_ms_since_attach"].as_f64().unwrap_or(0.0);
    assert!(
        (900.0..=1100.0).contains(&max),
        "longest {max} ms, not 1.0 s +-10%: {l}"
    );
}

/// The verdict `id` of a summary, if it fired.
fn verdict(summary: &Value, id: &str) -> Option<Value> {
    summary["verdicts"]
        .as_array()?
        .iter()
        .find(|v| v["id"] == id)
        .cloned()
}

/// 200 one-request connections with `Connection: close`: nginx closes every one
/// right after its response, and `keepalive_off` now says nginx closed them (it used to
/// say the clients do).
#[test]
fn keepalive_off_says_nginx_closed_when_it_did() {
    let ng = keepalive_2s();
    let summary = Probe::on(&ng).json().summary_around(|| {
        assert_eq!(
            nginx_probe_tests::one_request_per_connection(ng.addr(), 200),
            200
        );
    });
    let p = port_of(&summary, &ng);
    assert_eq!(p["closed_by_nginx"], 200, "{p}");
    assert_eq!(p["closed_by_client"], 0, "{p}");
    let v = verdict(&summary, "keepalive_off")
        .unwrap_or_else(|| panic!("no keepalive_off in {}", summary["verdicts"]));
    assert_eq!(v["evidence"]["closed_by"]["nginx"], 200, "{v}");
    assert_eq!(v["evidence"]["closed_by"]["client"], 0, "{v}");
    let advice = v["advice"].as_str().unwrap_or("");
    assert!(advice.contains("nginx closed 200 first"), "{advice}");
    assert!(advice.contains("right after a response"), "{advice}");
    assert!(
        !advice.contains("the clients close their connections"),
        "{advice}"
    );
    assert!(verdict(&summary, "keepalive_timeout_closes").is_none());
}

/// The same 200 `Connection: close` requests with a second server beside, idle, that
/// sets `keepalive_timeout 0`: the advice never blames it (trial 7 was told so), and
/// says the clients asked for the close.
#[test]
fn an_idle_server_s_keepalive_timeout_0_is_not_blamed() {
    let idle = nginx_probe_tests::free_port();
    let ng = Nginx::start(&NginxConfig {
        http_extra: format!(
            "server {{ listen 127.0.0.1:{idle}; keepalive_timeout 0; location / {{ return 200; }} }}"
        ),
        ..NginxConfig::default()
    });
    let summary = Probe::on(&ng).json().summary_around(|| {
        assert_eq!(
            nginx_probe_tests::one_request_per_connection(ng.addr(), 200),
            200
        );
    });
    let v = verdict(&summary, "keepalive_off")
        .unwrap_or_else(|| panic!("no keepalive_off in {}", summary["verdicts"]));
    let advice = v["advice"].as_str().unwrap_or("");
    assert!(!advice.contains("keepalive_timeout 0"), "{advice}");
    assert!(advice.contains("nginx closed 200 first"), "{advice}");
    assert!(
        advice.contains("the clients asked for `Connection: close` or spoke HTTP/1.0"),
        "{advice}"
    );
}

/// Trial 8: a name-based server `a.test` that sets `keepalive_timeout 0` shares the
/// port with the default server, which gets the 200 `Connection: close` requests. By
/// port the connections may have reached either, so the advice names a.test's
/// setting as one possible cause among the clients' own close, never as the cause.
#[test]
fn a_name_based_server_s_keepalive_timeout_0_is_a_candidate_not_the_cause() {
    let ng = Nginx::start(&NginxConfig {
        http_extra: "server { listen 127.0.0.1:@port@; server_name a.test; keepalive_timeout 0; location / { return 200; } }".into(),
        listen_extra: "default_server".into(),
        ..NginxConfig::default()
    });
    let summary = Probe::on(&ng).json().summary_around(|| {
        assert_eq!(
            nginx_probe_tests::one_request_per_connection(ng.addr(), 200),
            200
        );
    });
    let v = verdict(&summary, "keepalive_off")
        .unwrap_or_else(|| panic!("no keepalive_off in {}", summary["verdicts"]));
    let advice = v["advice"].as_str().unwrap_or("");
    assert!(advice.contains("nginx closed 200 first"), "{advice}");
    assert!(
        !advice.contains("which turns client keepalive off there"),
        "{advice}"
    );
    assert!(
        advice.contains(&format!("keepalive_timeout 0 is configured in some of the servers or locations that may have served them (server a.test: 0 ({}))", ng.conf_at("keepalive_timeout 0"))),
        "{advice}"
    );
    assert!(
        advice.contains("which of them these connections reached is not measured"),
        "{advice}"
    );
    assert!(
        advice.contains("when the clients ask for `Connection: close`"),
        "{advice}"
    );
}

/// `--no-lifecycle`: the same 200 one-request connections leave no `connections`
/// section, the banner says the lifecycle is not traced and why, no verdict names who
/// closed (it was not measured), and accepts stay exact (200 from the accept uprobe).
#[test]
fn without_the_lifecycle_tracepoints_no_verdict_names_who_closed() {
    let ng = keepalive_2s();
    let out = Probe::on(&ng)
        .json()
        .detail("sampled")
        .arg("--no-lifecycle")
        .around(|| {
            assert_eq!(
                nginx_probe_tests::one_request_per_connection(ng.addr(), 200),
                200
            );
        });
    let summary = out.summary_json();
    assert!(
        out.stderr
            .contains("connection lifecycle not traced (--no-lifecycle)"),
        "{}",
        out.stderr
    );
    assert!(
        summary["connections"].is_null(),
        "{}",
        summary["connections"]
    );
    assert_eq!(
        nginx_probe_tests::total_accepts(&summary),
        200,
        "{}",
        summary["workers"]
    );
    assert_eq!(
        summary["connections_not_traced"],
        "the connection lifecycle tracepoints are not attached (--no-lifecycle)"
    );
    for v in summary["verdicts"].as_array().into_iter().flatten() {
        let advice = v["advice"].as_str().unwrap_or("");
        assert!(!advice.contains("nginx closed 200"), "{advice}");
        assert!(
            !advice.contains("the clients close their connections"),
            "{advice}"
        );
    }
    // keepalive_off fires (an accept per request) and says who closed is unknown, why.
    let v = verdict(&summary, "keepalive_off")
        .unwrap_or_else(|| panic!("no keepalive_off in {}", summary["verdicts"]));
    assert_eq!(
        v["evidence"]["closed_by"],
        "unknown: the connection lifecycle tracepoints are not attached (--no-lifecycle)",
        "{v}"
    );
    let advice = v["advice"].as_str().unwrap_or("");
    assert!(
        advice.contains("who closes them is not measured"),
        "{advice}"
    );
}

/// N clients send a request, read the response and close with SO_LINGER 0 (a RST):
/// exactly N resets received on nginx's port, N connections ended by a reset.
#[test]
fn client_resets_are_counted_on_nginx_port() {
    client_resets(false);
}

/// The same counted by the perf-event tracepoint programs (the fallback set).
#[test]
fn client_resets_are_counted_by_the_perf_event_fallback_too() {
    client_resets(true);
}

fn client_resets(perf: bool) {
    let ng = keepalive_2s();
    let probe = Probe::on(&ng).json().args(lifecycle_set(perf));
    let summary = probe.summary_around(|| {
        for _ in 0..N {
            let s = one_request(ng.addr());
            reset_on_close(&s);
            drop(s);
        }
    });
    let p = port_counted_by(&summary, &ng, perf);
    assert_eq!(p["resets_received"], N as u64, "{p}");
    assert_eq!(p["closed_by_reset"], N as u64, "{p}");
    assert_eq!(p["closed_by_client"], 0, "{p}");
    assert_eq!(p["closed_by_nginx"], 0, "{p}");
    assert_eq!(p["resets_sent"], 0, "{p}");
    // The clients' resets, not nginx's.
    assert!(p.get("closed_by_nginx_reset").is_none(), "{p}");
}

/// `send_timeout 1s; reset_timedout_connection on;` and 4 clients that request a
/// 16 MB file and read nothing: nginx gives up on each after 1 s without progress and
/// closes it with SO_LINGER 0. nginx-probe counts 4 connections ended by a reset, all
/// 4 nginx's own, none received, 4 for SO_LINGER 0 (where the kernel names reset
/// reasons), and says `nginx_reset_connections` with the directive's line and nginx's
/// 4 `client timed out` lines (error_log at info).
#[test]
fn resets_at_send_timeout_are_nginx_s_own() {
    let ng = Nginx::start(&NginxConfig {
        server_extra: "send_timeout 1s; reset_timedout_connection on;".into(),
        error_log_level: "info".into(),
        ..NginxConfig::default()
    });
    std::fs::write(ng.prefix.join("html/big"), vec![b'x'; 16 << 20]).expect("write big");
    let probe = Probe::on(&ng).json();
    let summary = probe.summary_around(|| {
        let held: Vec<TcpStream> = (0..4)
            .map(|_| {
                let mut c = TcpStream::connect(ng.addr()).expect("connect");
                c.write_all(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
                    .expect("send");
                c
            })
            .collect();
        std::thread::sleep(Duration::from_millis(3000));
        drop(held);
    });
    let p = port_of(&summary, &ng);
    assert_eq!(p["closed_by_reset"], 4, "{p}");
    assert_eq!(p["closed_by_nginx_reset"], 4, "{p}");
    assert_eq!(p["resets_received"], 0, "{p}");
    // And per worker: each worker's own resets, 4 in all.
    let per_worker: u64 = summary["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            w["connections_closed"]["reset_by_nginx"]
                .as_u64()
                .unwrap_or(0)
        })
        .sum();
    assert_eq!(per_worker, 4, "{}", summary["workers"]);
    // Reset reasons are named by kernels from 6.10 on: a close() with SO_LINGER 0 is
    // TCP_STATE (tcp_disconnect()).
    let named = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .any(|t| {
            std::fs::read_to_string(format!("{t}/events/tcp/tcp_send_reset/format"))
                .is_ok_and(|f| f.contains("TCP_STATE"))
        });
    if !named {
        assert!(verdict(&summary, "nginx_reset_connections").is_none());
        return;
    }
    assert_eq!(p["resets_sent_by_reason"]["TCP_STATE"], 4, "{p}");
    let v = verdict(&summary, "nginx_reset_connections")
        .unwrap_or_else(|| panic!("no nginx_reset_connections in {}", summary["verdicts"]));
    assert_eq!(v["evidence"]["nginx_resets_serving"], 4, "{v}");
    assert_eq!(v["evidence"]["client_timed_out_lines"], 4, "{v}");
    let at = ng.conf_at("reset_timedout_connection on");
    assert!(
        v["advice"].as_str().is_some_and(|a| a.contains(&at)
            && a.contains("reset 4 client connections themselves")
            && a.contains("send_timeout 1s")),
        "{v}"
    );
}

/// Case 20: a reload that drops a `reuseport` listening socket (worker_processes from
/// 2 to 1) resets the connections still queued on it when its last holder lets go. The
/// old workers are stopped while M clients connect and send a request, so the connections
/// wait in the two sockets' accept queues; the reload keeps worker 0's socket (the new
/// worker serves its queue) and the master closes worker 1's; the old workers, killed
/// while stopped (as a worker_shutdown_timeout or an OOM kill would), were its last
/// holders, having accepted nothing. (Left to drain gracefully, an old worker accepts
/// its socket's queue before it closes it, so the number reset would be the race's.)
/// Every client ends with a 200 or a reset, and the resets nginx-probe counts for the
/// closed listener's queue are exactly the clients that were reset.
#[test]
fn a_reload_that_closes_a_reuseport_socket_resets_its_queue_exactly() {
    reuseport_reload(false);
}

/// The same counted by the perf-event tracepoint programs (the fallback set).
#[test]
fn a_reuseport_reload_is_counted_by_the_perf_event_fallback_too() {
    reuseport_reload(true);
}

/// nginx with `listen ... reuseport`; this file's reload tests need
/// net.ipv4.tcp_migrate_req 0 (Linux 5.14, the default): with 1, a closed listener's
/// queued requests go to another socket of the group.
fn reuseport_config() -> NginxConfig {
    let migrate = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_migrate_req")
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|_| "0".into());
    assert_eq!(migrate, "0", "this test needs net.ipv4.tcp_migrate_req = 0");
    NginxConfig {
        listen_extra: "reuseport".into(),
        ..NginxConfig::default()
    }
}

/// After 1 s, stops `ng`'s workers (`from` of them), queues `m` clients that each send a request,
/// reloads to `to` workers, waits for the new ones and 1.5 s more (so the probe's
/// 500 ms refreshes see the new generation before the old one goes), kills the old
/// workers while stopped (as a worker_shutdown_timeout or an OOM kill would: they were
/// the closed reuseport socket's last holders, having accepted nothing), and reads
/// every client. Returns (clients served a 200, clients reset).
fn reload_with_queued_clients(ng: &Nginx, from: usize, to: usize, m: usize) -> (u64, u64) {
    use nix::{
        sys::signal::{kill, Signal},
        unistd::Pid,
    };
    // The probe's refreshes (every 500 ms) see the workers as they are first: its
    // first one numbers those it finds as generation 0, and a reload before it would
    // leave old and new workers alike serving, one generation.
    std::thread::sleep(Duration::from_millis(1000));
    let old = ng.worker_pids();
    assert_eq!(old.len(), from);
    let signal = |pids: &[u32], s: Signal| {
        for &p in pids {
            kill(Pid::from_raw(p as i32), s).expect("signal a worker");
        }
    };
    signal(&old, Signal::SIGSTOP);
    let mut clients: Vec<TcpStream> = (0..m)
        .map(|_| {
            let mut s = TcpStream::connect(ng.addr()).expect("connect (queued)");
            s.write_all(b"GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
                .expect("send");
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            s
        })
        .collect();
    let conf = ng.prefix.join("nginx.conf");
    let text = std::fs::read_to_string(&conf).unwrap();
    let (was, now) = (
        format!("worker_processes {from};"),
        format!("worker_processes {to};"),
    );
    assert!(text.contains(&was), "{text}");
    std::fs::write(&conf, text.replace(&was, &now)).unwrap();
    ng.reload();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while ng.worker_pids().iter().filter(|p| !old.contains(p)).count() < to {
        assert!(std::time::Instant::now() < deadline, "no new workers");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1500));
    signal(&old, Signal::SIGKILL);
    let (mut ok, mut reset) = (0u64, 0u64);
    for c in clients.iter_mut() {
        let mut buf = Vec::new();
        match c.read_to_end(&mut buf) {
            Ok(_) if buf.starts_with(b"HTTP/1.1 200") => ok += 1,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => reset += 1,
            other => panic!("neither a 200 nor a reset: {other:?} {buf:?}"),
        }
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while ng.worker_pids().iter().any(|p| old.contains(p)) {
        assert!(
            std::time::Instant::now() < deadline,
            "old workers still run"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (ok, reset)
}

// Long because: one scenario (a probe around a reload), then its assertions on the
// port, the verdict and the LISTEN table.
fn reuseport_reload(perf: bool) {
    const M: usize = 60;
    let ng = Nginx::start(&reuseport_config());
    let run = Probe::on(&ng)
        .json()
        .summary_only()
        .duration("60s")
        .args(lifecycle_set(perf))
        .start();
    let (ok, reset) = reload_with_queued_clients(&ng, 2, 1, M);
    let s = run.stop().summary_json();
    let p = port_counted_by(&s, &ng, perf);
    assert_eq!(ok + reset, M as u64);
    assert!(
        reset > 0,
        "no queued connection was reset ({ok} served): {p}"
    );
    assert_eq!(p["listeners_closed"], 1, "{p}");
    assert_eq!(p["resets_of_closed_listener_queue"], reset, "{p}");
    let closes = &s["connections"]["listener_closes"];
    assert_eq!(closes.as_array().map(Vec::len), Some(1), "{closes}");
    assert_eq!(closes[0]["reload_generation"], 1, "{closes}");
    assert_eq!(closes[0]["resets_of_queued_connections"], reset, "{closes}");
    // The verdict: exactly the clients reset, the sysctl as read in nginx's namespace
    // (this test's host: 0), the reuseport listen and the worker_processes the reload
    // loaded, each with its line.
    let v = verdict(&s, "listener_closed_resets")
        .unwrap_or_else(|| panic!("no listener_closed_resets in {}", s["verdicts"]));
    assert_eq!(
        v["evidence"]["resets_of_closed_listener_queue"], reset,
        "{v}"
    );
    assert_eq!(v["evidence"]["listeners_closed"], 1, "{v}");
    assert_eq!(v["evidence"]["tcp_migrate_req"], 0, "{v}");
    assert_eq!(
        v["evidence"]["config_listen_reuseport"],
        format!(
            "127.0.0.1:{} reuseport ({})",
            ng.port,
            ng.conf_at("listen ")
        )
    );
    assert_eq!(
        v["evidence"]["config_worker_processes"],
        format!("1 ({})", ng.conf_at("worker_processes")),
        "{} {}",
        s["config"]["loaded_unix_s"],
        s["events"]
    );
    assert!(
        v["advice"]
            .as_str()
            .unwrap()
            .contains(&format!("the {reset} connection(s) queued on them")),
        "{v}"
    );
    assert_eq!(p["resets_sent"], reset, "{p}");
    assert_eq!(p["established"], M as u64, "{p}");
    // The LISTEN table: worker 1's socket marked closed, worker 0's open.
    let addr = format!("127.0.0.1:{}", ng.port);
    let socks: Vec<&Value> = s["listen"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["addr"] == addr.as_str())
        .collect();
    assert_eq!(socks.len(), 2, "{}", s["listen"]);
    assert_eq!(
        socks.iter().filter(|l| l["closed"] == true).count(),
        1,
        "{}",
        s["listen"]
    );
}

/// Case 20, counted around each reload: `reuseport`, 3 workers, then two reloads a few
/// seconds apart, 3 -> 2 -> 1 workers, each with clients queued on the stopped old
/// workers' sockets. The summary lists exactly two listener-close events, one per
/// reload, each with one socket closed, the generation it followed (1, then 2) and
/// exactly the clients that reload reset; the interval reports list the same two.
#[test]
fn listener_closes_are_counted_per_reload() {
    const M: usize = 60;
    let ng = Nginx::start(&NginxConfig {
        workers: 3,
        ..reuseport_config()
    });
    let rec = ng.prefix.join("closes.jsonl");
    let run = Probe::on(&ng)
        .json()
        .interval("1s")
        .duration("60s")
        .record(&rec)
        .start();
    let mut per_reload = Vec::new();
    for (from, to) in [(3, 2), (2, 1)] {
        let (ok, reset) = reload_with_queued_clients(&ng, from, to, M);
        assert_eq!(ok + reset, M as u64);
        assert!(reset > 0, "no queued connection reset ({ok} served)");
        per_reload.push(reset);
        std::thread::sleep(Duration::from_millis(2000));
    }
    let out = run.stop();
    let s = out.summary_json();
    let events = |r: &Value| -> Vec<(u64, u64, u64, u64, f64)> {
        r["connections"]["listener_closes"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|e| {
                        assert_eq!(e["port"], ng.port as u64, "{e}");
                        (
                            e["reload_generation"].as_u64().unwrap_or(0),
                            e["reloads_since_attach"].as_u64().unwrap_or(0),
                            e["listeners_closed"].as_u64().unwrap_or(0),
                            e["resets_of_queued_connections"].as_u64().unwrap_or(0),
                            e["seen_unix_s"].as_f64().unwrap_or(0.0),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let all = events(&s);
    let want = vec![(1, 1, 1, per_reload[0]), (2, 2, 1, per_reload[1])];
    let got: Vec<(u64, u64, u64, u64)> = all.iter().map(|e| (e.0, e.1, e.2, e.3)).collect();
    assert_eq!(got, want, "{}", s["connections"]);
    assert!(all[0].4 < all[1].4, "{}", s["connections"]);
    assert!(s["connections"].get("listener_closes_merged").is_none());
    let p = port_of(&s, &ng);
    assert_eq!(p["listeners_closed"], 2, "{p}");
    assert_eq!(
        p["resets_of_closed_listener_queue"],
        per_reload[0] + per_reload[1],
        "{p}"
    );
    // The interval reports (every line but the summary) list the same two, once each.
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let in_intervals: Vec<(u64, u64, u64, u64, f64)> =
        lines[..lines.len() - 1].iter().flat_map(&events).collect();
    assert_eq!(in_intervals, all);
    let v = verdict(&s, "listener_closed_resets")
        .unwrap_or_else(|| panic!("no listener_closed_resets in {}", s["verdicts"]));
    assert_eq!(v["evidence"]["events"], s["connections"]["listener_closes"]);
    // The text report of the recording: one line per reload.
    let text = Probe::report(&rec).run().stdout;
    for (i, reset) in per_reload.iter().enumerate() {
        let line = format!(
            "after reload {n} (generation {n}) at {}: port {}, 1 listening socket closed, {reset} queued connection{} reset",
            clock(all[i].4),
            ng.port,
            if *reset == 1 { "" } else { "s" },
            n = i + 1,
        );
        assert!(text.contains(&line), "{line} not in {text}");
    }
}

/// HH:MM:SS (UTC) of `unix_s`, as the text report shows times.
fn clock(unix_s: f64) -> String {
    let day = unix_s as u64 % 86_400;
    format!("{:02}:{:02}:{:02}", day / 3600, day / 60 % 60, day % 60)
}
