//! nginx 1.26.3 built from source with `./configure`'s defaults (issue 24): no
//! stub_status module, so nginx's own request counter is absent. The request total then
//! comes from nginx's access log when the configuration proves every request is logged
//! (unbuffered, no `access_log off`, `if=` or `log_subrequest on`), exactly; otherwise
//! it stays unknown with the reason.

use std::time::Duration;

use nginx_probe_tests::{container::source_nginx, *};

fn source_built(server_extra: &str) -> Nginx {
    Nginx::start(&NginxConfig {
        binary: Some(source_nginx()),
        server_extra: server_extra.into(),
        ..NginxConfig::default()
    })
}

/// 3 keepalive connections of 50 requests and 20 one-request connections: exactly 170
/// requests, counted from the access log (source `access_log`), over 23 accepts.
#[test]
fn without_stub_status_the_request_total_is_the_access_log_when_it_logs_every_request() {
    let ng = source_built("");
    let probe = Probe::on(&ng).json().summary_only().start();
    assert_eq!(keepalive_requests(ng.addr(), 3, 50), 150);
    assert_eq!(one_request_per_connection(ng.addr(), 20), 20);
    // The reader polls every 500 ms.
    std::thread::sleep(Duration::from_millis(1200));
    let out = probe.stop();
    let s = out.summary_json();
    // Built without TLS: no libssl mapped, none in the binary, said with the reason.
    let no_tls = format!(
        "TLS handshakes are neither counted nor timed: nginx maps no libssl, and its binary {}: no SSL_set_connect_state, SSL_do_handshake, SSL_free and no ngx_ssl_handshake in its symbol table: built without TLS",
        source_nginx().display()
    );
    assert!(out.stderr.contains(&no_tls), "{}", out.stderr);
    assert!(s.get("tls").is_none_or(|v| v.is_null()), "{s}");
    let r = &s["requests"];
    assert_eq!(r["source"], "access_log", "{r}");
    assert_eq!(r["count"], 170, "{r}");
    assert_eq!(total_accepts(&s), 23);
    assert_eq!(r["per_connection"], 7.391, "{r}");
    let reason = r["reason"].as_str().unwrap_or("");
    assert!(reason.contains("counted from nginx's access log"), "{r}");
    assert!(s.get("stub_status").is_none_or(|v| v.is_null()), "{s}");
    let a = &s["access_log"];
    assert_eq!(a["counts_every_request"], true, "{a}");
    assert_eq!(a["statuses"], serde_json::json!({"200": 170}), "{a}");
    assert_eq!(ng.access_log_lines(), 170);
}

/// The same nginx with `access_log off` in one location: requests there are not logged,
/// so the log is no request count: unknown, and the reason names the directive's line.
#[test]
fn with_access_log_off_somewhere_the_request_total_stays_unknown_and_says_where() {
    let ng = source_built("location /quiet { access_log off; }");
    let probe = Probe::on(&ng).json().summary_only().start();
    assert_eq!(keepalive_requests(ng.addr(), 2, 10), 20);
    std::thread::sleep(Duration::from_millis(1200));
    let s = probe.stop().summary_json();
    let r = &s["requests"];
    assert_eq!(r["source"], "unknown", "{r}");
    assert!(r["count"].is_null(), "{r}");
    let want = format!(
        "the access log is no count either: access_log off ({}) leaves requests unlogged",
        ng.conf_at("access_log off")
    );
    assert!(r["reason"].as_str().unwrap_or("").contains(&want), "{r}");
    let a = &s["access_log"];
    assert_eq!(a["counts_every_request"], false, "{a}");
    assert_eq!(a["lines"], 20, "{a}");
}
