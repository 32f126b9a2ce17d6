//! nginx 1.26.3 linked with OpenSSL statically (issue 24): Debian's `libssl.a` and
//! `libcrypto.a` inside the binary, no libssl mapped, as custom and quictls/BoringSSL
//! builds have it. libssl's uprobes attach to `SSL_do_handshake`, `SSL_free` and
//! `SSL_set_connect_state` in the nginx binary itself, found in its symbol table;
//! nginx's own `ngx_ssl_ocsp_validate` counts the completed handshakes as with a
//! shared libssl.

use nginx_probe_tests::{container::static_ssl_nginx, *};

/// The one-request TLS connections each run makes.
const N: u64 = 40;

/// The static-OpenSSL nginx with an HTTPS listener (self-signed certificate).
fn static_ssl() -> Nginx {
    Nginx::start(&NginxConfig {
        binary: Some(static_ssl_nginx()),
        tls: true,
        ..NginxConfig::default()
    })
}

/// Runs nginx-probe (`--json`, summary only, `args` such as `--detail sampled`,
/// bounded by `--duration`, stopped by SIGINT once the load is done) around [`N`]
/// one-request HTTPS connections (hey, no keepalive); returns the summary and the
/// probe's stderr.
fn n_connections(ng: &Nginx, args: &[&str]) -> (serde_json::Value, String) {
    let run = Probe::on(ng)
        .json()
        .summary_only()
        .args(args)
        .duration(120)
        .start();
    let n = N.to_string();
    assert_eq!(
        hey(
            &["-n", &n, "-c", "2", "-disable-keepalive"],
            &ng.https_url()
        ),
        N as usize
    );
    std::thread::sleep(std::time::Duration::from_millis(600));
    let out = run.stop();
    (out.summary_json(), out.stderr)
}

/// The nginx binary's own path, as the report names where libssl's figures come from.
fn binary_path() -> String {
    static_ssl_nginx().display().to_string()
}

/// The default mode (`--detail full` without a recording or `--listen`): exactly N
/// handshakes counted by nginx's ngx_ssl_ocsp_validate, and libssl's programs in the
/// nginx binary all the time: N started, N timed, none abandoned; JSON and the banner
/// say libssl's figures come from the binary; N accepts and N requests.
#[test]
fn handshakes_of_nginx_linked_with_openssl_are_exact_and_libssl_is_the_binary() {
    let ng = static_ssl();
    let (s, stderr) = n_connections(&ng, &[]);
    let tls = &s["tls"];
    assert_eq!(tls["handshakes"], N, "{tls}");
    assert_eq!(tls["handshakes_from"], "ngx_ssl_ocsp_validate", "{tls}");
    assert_eq!(tls["started"], N, "{tls}");
    assert_eq!(tls["timed"], N, "{tls}");
    assert_eq!(tls["abandoned"], 0, "{tls}");
    assert!(tls["call_ns"].as_u64().unwrap() > 0, "{tls}");
    assert_eq!(tls["libssl_from"], "nginx_binary", "{tls}");
    assert_eq!(tls["libssl_path"], binary_path().as_str(), "{tls}");
    assert!(tls.get("libssl_unavailable").is_none(), "{tls}");
    assert!(tls.get("libssl_sampled").is_none(), "{tls}");
    assert_eq!(total_accepts(&s), N, "{s}");
    assert_eq!(s["requests"]["source"], "stub_status", "{s}");
    assert_eq!(s["requests"]["count"], N, "{s}");
    let want = format!("timed by OpenSSL linked into nginx {})", binary_path());
    assert!(stderr.contains(&want), "{stderr}");
    assert!(!stderr.contains("not timed"), "{stderr}");
}

/// `--detail sampled`: nginx still counts exactly N handshakes; libssl's programs in
/// the binary are linked in the detail windows only (`libssl_sampled`), and the text
/// report's TLS line names the binary.
#[test]
fn sampled_handshakes_are_exact_and_the_text_line_names_the_binary() {
    let ng = static_ssl();
    let (s, stderr) = n_connections(&ng, &["--detail", "sampled"]);
    let tls = &s["tls"];
    assert_eq!(tls["handshakes"], N, "{tls}");
    assert_eq!(tls["handshakes_from"], "ngx_ssl_ocsp_validate", "{tls}");
    assert_eq!(tls["libssl_sampled"], true, "{tls}");
    assert_eq!(tls["libssl_from"], "nginx_binary", "{tls}");
    assert_eq!(tls["libssl_path"], binary_path().as_str(), "{tls}");
    assert_eq!(total_accepts(&s), N, "{s}");
    let want = format!(
        "timed by OpenSSL linked into nginx {} in detail windows",
        binary_path()
    );
    assert!(stderr.contains(&want), "{stderr}");

    let run = Probe::on(&ng).summary_only().duration(120).start();
    assert_eq!(
        hey(
            &["-n", "3", "-c", "1", "-disable-keepalive"],
            &ng.https_url()
        ),
        3
    );
    std::thread::sleep(std::time::Duration::from_millis(600));
    let text = run.stop().stdout;
    let line = text
        .lines()
        .find(|l| l.contains("TLS handshakes"))
        .unwrap_or_else(|| panic!("no TLS line: {text}"));
    assert!(
        line.starts_with("TLS handshakes 3 (started 3, abandoned 0)"),
        "{line}"
    );
    let want = format!(
        "; libssl's figures: OpenSSL linked into nginx {}",
        binary_path()
    );
    assert!(line.ends_with(&want), "{line}");
}
