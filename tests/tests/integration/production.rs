//! Production nginx setups (issue 11, cases 9 and 10): exact request counts on HTTPS,
//! HTTP/2, reverse proxies, gzip and proxied POST bodies, from nginx's own stub_status
//! counters; TLS handshakes counted and timed; no verdict the setup does not deserve.

use nginx_probe_tests::{
    curl_statuses, hey, keepalive_requests, post_requests, total_accepts, verdict_ids, workers,
    Nginx, NginxConfig, Probe,
};

/// Verdicts none of these setups deserves: nothing is exhausted, no queue overflows.
const UNDESERVED: [&str; 3] = [
    "worker_connections_exhausted",
    "accept_queue_overflow",
    "fd_exhaustion",
];

fn assert_deserved_only(s: &serde_json::Value) {
    let ids = verdict_ids(s);
    for bad in UNDESERVED {
        assert!(!ids.iter().any(|i| i == bad), "{bad} fired: {s}");
    }
}

/// The report-level request count, asserting it comes from nginx's own counter.
fn stub_requests(s: &serde_json::Value) -> u64 {
    assert_eq!(s["requests"]["source"], "stub_status", "{s}");
    s["requests"]["count"].as_u64().expect("requests.count")
}

#[test]
fn https_one_connection_per_request_is_200_requests_and_200_tls_handshakes() {
    let ng = Nginx::start(&NginxConfig {
        tls: true,
        ..NginxConfig::default()
    });
    let run = Probe::on(&ng).json().summary_only().start();
    assert!(
        run.stderr
            .iter()
            .any(|l| l.contains("TLS handshake uprobes")),
        "{:?}",
        run.stderr
    );
    assert_eq!(
        hey(
            &["-n", "200", "-c", "4", "-disable-keepalive"],
            &ng.https_url()
        ),
        200
    );
    let s = run.stop().summary_json();
    assert_eq!(stub_requests(&s), 200, "{s}");
    assert_eq!(s["stub_status"]["accepted"], 200, "{s}");
    assert_eq!(s["stub_status"]["handled"], 200, "{s}");
    assert_eq!(s["stub_status"]["dropped"], 0, "{s}");
    assert_eq!(total_accepts(&s), 200, "{s}");
    // Who closed: every connection once.
    let ports = s["connections"]["ports"].as_array().expect("connections");
    let sum = |k: &str| {
        ports
            .iter()
            .map(|p| p[k].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    assert_eq!(
        sum("closed_by_nginx") + sum("closed_by_client") + sum("closed_by_reset"),
        200,
        "{ports:?}"
    );
    let after_client: u64 = workers(&s)
        .iter()
        .map(|w| {
            w["connections_closed"]["after_client"]
                .as_u64()
                .unwrap_or(0)
        })
        .sum();
    // A client-first connection ends by its worker's close (LAST_ACK, or CLOSE with
    // data unread) or by a reset the client sends after its FIN (Go's client, with
    // nginx's close_notify unread): never more worker closes than client-first
    // connections, never fewer than those less the resets received.
    let client_first = sum("closed_by_client");
    assert!(after_client <= client_first, "{after_client} {ports:?}");
    assert!(
        after_client + sum("resets_received") >= client_first,
        "{after_client} {ports:?}"
    );
    // Per worker: unknown without --uprobes, never a writev estimate.
    for w in workers(&s) {
        assert!(w["requests"]["count"].is_null(), "{w}");
        assert_eq!(w["requests"]["source"], "unknown");
    }
    // One handshake per connection, all completed.
    let tls = &s["tls"];
    assert_eq!(tls["handshakes"], 200, "{tls}");
    assert_eq!(tls["started"], 200, "{tls}");
    assert_eq!(tls["abandoned"], 0, "{tls}");
    assert!(tls["call_ns"].as_u64().unwrap() > 0, "{tls}");
    assert_deserved_only(&s);
    // keepalive_off, with the TLS handshake's cost in its evidence.
    let v = s["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["id"] == "keepalive_off")
        .unwrap_or_else(|| panic!("no keepalive_off: {s}"));
    assert_eq!(v["evidence"]["requests"], 200);
    assert_eq!(v["evidence"]["requests_source"], "stub_status");
    assert_eq!(v["evidence"]["tls_handshakes"], 200);
    assert!(v["evidence"]["tls_handshake_call_us"].as_f64().unwrap() > 0.0);
    assert!(
        v["advice"].as_str().unwrap().contains("TLS handshake"),
        "{v}"
    );
    let directives: Vec<&str> = v["directives"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d.as_str())
        .collect();
    assert!(directives.contains(&"ssl_session_cache"), "{v}");
    assert!(directives.contains(&"ssl_session_tickets"), "{v}");
}

#[test]
fn plain_http_says_no_tls_handshake_was_seen_and_shows_no_percentile_of_nothing() {
    // Debian's nginx maps libssl: the handshake uprobes attach (nginx-probe does not read
    // the config to know the listener is plain), and the report says none fired.
    let ng = Nginx::start(&NginxConfig::default());
    let run = Probe::on(&ng).plain().summary_only().start();
    assert!(
        run.stderr.iter().any(|l| l.contains(
            "TLS handshake uprobes (idle without TLS connections: handshakes counted by nginx's ngx_ssl_ocsp_validate (called at every completed handshake, OCSP or not), timed by libssl /"
        ) && l.contains("libssl.so")
            && l.contains("; libssl's uprobes are placed in nginx's workers only, not in other processes using that libssl)")),
        "{:?}",
        run.stderr
    );
    assert_eq!(keepalive_requests(ng.addr(), 2, 50), 100);
    let out = run.stop();
    let text = &out.stdout;
    assert!(
        text.contains("TLS handshakes: none seen (libssl's uprobes attached: no TLS connection in the period, or no TLS listener)"),
        "{text}"
    );
    for empty in ["TLS handshakes 0", "p50 0ns", "p99 0ns"] {
        assert!(!text.contains(empty), "{empty}: {text}");
    }
}

#[test]
fn https_with_keepalive_has_one_handshake_per_connection_and_no_keepalive_verdict() {
    let ng = Nginx::start(&NginxConfig {
        tls: true,
        ..NginxConfig::default()
    });
    let run = Probe::on(&ng).json().summary_only().start();
    assert_eq!(hey(&["-n", "400", "-c", "4"], &ng.https_url()), 400);
    let s = run.stop().summary_json();
    assert_eq!(stub_requests(&s), 400, "{s}");
    let accepts = total_accepts(&s);
    assert_eq!(s["stub_status"]["accepted"].as_u64(), Some(accepts), "{s}");
    assert!(accepts < 400, "hey reused no connection: {s}");
    // One handshake started per connection; each completed or was abandoned (hey's
    // HTTP/2 client may dial a spare connection and close it mid-handshake: seen here
    // as 5 accepts, 4 handshakes, 1 abandoned).
    // A spare connection closed before its ClientHello starts no handshake at all.
    let tls = &s["tls"];
    let started = tls["started"].as_u64().unwrap();
    assert!(started <= accepts && started + 2 >= accepts, "{tls}");
    assert_eq!(
        tls["handshakes"].as_u64().unwrap() + tls["abandoned"].as_u64().unwrap(),
        started,
        "{tls}"
    );
    assert!(tls["handshakes"].as_u64().unwrap() >= 1, "{tls}");
    let ids = verdict_ids(&s);
    assert!(!ids.iter().any(|i| i == "keepalive_off"), "{s}");
    assert_deserved_only(&s);
}

#[test]
fn http2_parallel_streams_are_the_access_log_lines() {
    let ng = Nginx::start(&NginxConfig {
        tls: true,
        http2: true,
        ..NginxConfig::default()
    });
    let run = Probe::on(&ng).json().summary_only().start();
    let url = format!("{}?[1-300]", ng.https_url());
    let got = curl_statuses(&["--http2", "--parallel", "--parallel-max", "100", &url]);
    assert_eq!(got.len(), 300, "{got:?}");
    assert!(got.iter().all(|(c, v)| *c == 200 && v == "2"), "{got:?}");
    let s = run.stop().summary_json();
    assert_eq!(ng.access_log_lines(), 300);
    assert_eq!(stub_requests(&s), ng.access_log_lines() as u64, "{s}");
    // Many streams on few connections: far from one request per connection.
    assert!(total_accepts(&s) < 30, "{s}");
    assert_eq!(
        s["tls"]["handshakes"].as_u64(),
        Some(total_accepts(&s)),
        "{s}"
    );
    assert!(!verdict_ids(&s).iter().any(|i| i == "keepalive_off"), "{s}");
    assert_deserved_only(&s);
}

#[test]
fn http2_streams_pass_the_request_uprobe_on_this_nginx() {
    // nginx 1.22: an HTTP/2 stream goes through ngx_http_create_request, so the
    // per-worker uprobe counts add up to nginx's own total.
    let ng = Nginx::start(&NginxConfig {
        tls: true,
        http2: true,
        ..NginxConfig::default()
    });
    let run = Probe::on(&ng).json().summary_only().uprobes().start();
    let url = format!("{}?[1-200]", ng.https_url());
    let got = curl_statuses(&["--http2", "--parallel", "--parallel-max", "50", &url]);
    assert_eq!(got.len(), 200, "{got:?}");
    let s = run.stop().summary_json();
    assert_eq!(stub_requests(&s), 200, "{s}");
    let per_worker: u64 = workers(&s)
        .iter()
        .map(|w| {
            assert_eq!(w["requests"]["source"], "uprobe", "{w}");
            w["requests"]["count"].as_u64().unwrap()
        })
        .sum();
    assert_eq!(per_worker, 200, "{s}");
}

/// A front nginx whose `/` is proxied to a second nginx (its own fixture).
fn front_of(backend: &Nginx, extra: &str) -> Nginx {
    Nginx::start(&NginxConfig {
        server_extra: format!(
            "location / {{ proxy_pass http://127.0.0.1:{}; }}\n{extra}",
            backend.port
        ),
        ..NginxConfig::default()
    })
}

#[test]
fn proxy_pass_300_requests_are_300_on_the_front() {
    let backend = Nginx::start(&NginxConfig::default());
    let front = front_of(&backend, "");
    let run = Probe::on(&front).json().summary_only().start();
    // 3 keepalive client connections x 100 requests.
    assert_eq!(keepalive_requests(front.addr(), 3, 100), 300);
    let s = run.stop().summary_json();
    // Not 600: the request to the upstream is not a request nginx served.
    assert_eq!(stub_requests(&s), 300, "{s}");
    assert_eq!(total_accepts(&s), 3, "{s}");
    assert_eq!(backend.access_log_lines(), 300);
    assert!(!verdict_ids(&s).iter().any(|i| i == "keepalive_off"), "{s}");
    assert_deserved_only(&s);
}

#[test]
fn gzip_of_a_500_kb_file_100_requests_are_100() {
    let text: Vec<u8> = (0..500 * 1024)
        .map(|i| b"nginx-probe gzip test line\n"[i % 27])
        .collect();
    let ng = Nginx::start(&NginxConfig {
        http_extra: "gzip on; gzip_types text/plain;".into(),
        files: vec![("big.txt".into(), text)],
        ..NginxConfig::default()
    });
    let run = Probe::on(&ng).json().summary_only().start();
    let url = format!("{}big.txt", ng.url());
    assert_eq!(
        hey(
            &["-n", "100", "-c", "2", "-H", "Accept-Encoding: gzip"],
            &url
        ),
        100
    );
    let s = run.stop().summary_json();
    assert_eq!(stub_requests(&s), 100, "{s}");
    assert!(!verdict_ids(&s).iter().any(|i| i == "keepalive_off"), "{s}");
    assert_deserved_only(&s);
}

#[test]
fn one_mb_post_bodies_through_proxy_pass_are_the_clients_count() {
    let backend = Nginx::start(&NginxConfig {
        server_extra: "location /upload { return 200 \"stored\\n\"; }".into(),
        ..NginxConfig::default()
    });
    let front = Nginx::start(&NginxConfig {
        server_extra: format!(
            "client_max_body_size 2m; client_body_buffer_size 8k;\nlocation /upload {{ proxy_pass http://127.0.0.1:{}; }}",
            backend.port
        ),
        ..NginxConfig::default()
    });
    let run = Probe::on(&front).json().summary_only().start();
    assert_eq!(post_requests(front.addr(), "/upload", 1 << 20, 25), 25);
    let s = run.stop().summary_json();
    assert_eq!(stub_requests(&s), 25, "{s}");
    assert_eq!(total_accepts(&s), 25, "{s}");
    assert_deserved_only(&s);
}

#[test]
fn nginx_in_a_chroot_has_its_tls_handshakes_counted() {
    // A chroot with its own pid and mount namespace: /proc/<pid>/maps shows the host's
    // path of libssl (<root>/usr/lib/...), /proc/<pid>/root is <root>; the uprobe must
    // find the mapped file itself (it was looked up as <root>/<root>/usr/lib/...).
    let ng = Nginx::start(&NginxConfig {
        tls: true,
        chroot: true,
        ..NginxConfig::default()
    });
    let master = ng.master_pid();
    let root = std::fs::read_link(format!("/proc/{master}/root")).unwrap();
    assert_ne!(root, std::path::Path::new("/"), "nginx runs in a chroot");
    let maps = std::fs::read_to_string(format!("/proc/{master}/maps")).unwrap();
    assert!(
        maps.lines()
            .any(|l| l.contains("libssl.so") && l.contains(&*root.to_string_lossy())),
        "maps shows the host's path of libssl under {}",
        root.display()
    );
    let run = Probe::pid(master).json().summary_only().start();
    assert!(
        run.stderr
            .iter()
            .any(|l| l.contains("TLS handshake uprobes")),
        "{:?}",
        run.stderr
    );
    assert_eq!(
        hey(
            &["-n", "50", "-c", "2", "-disable-keepalive"],
            &ng.https_url()
        ),
        50
    );
    let s = run.stop().summary_json();
    assert_eq!(total_accepts(&s), 50, "{s}");
    assert_eq!(stub_requests(&s), 50, "{s}");
    assert_eq!(s["tls"]["handshakes"], 50, "{s}");
    assert_eq!(s["tls"]["abandoned"], 0, "{s}");
}

/// An HTTPS front proxying to an HTTPS backend (its own nginx, not traced): 40
/// one-request client connections, each request opening a TLS connection to the
/// backend. The handshakes reported are the front's client connections only: nginx's
/// `ngx_ssl_ocsp_validate` skips connections without a listening socket, libssl's
/// programs skip the `SSL*` that `SSL_set_connect_state` made an upstream's (before,
/// `started` was 80 here). With `--detail sampled` and the load after the first
/// window, the completed handshakes are still exact, and libssl counted none: its
/// programs are not linked between windows.
#[test]
fn tls_handshakes_are_the_client_connections_not_the_proxys_own_and_exact_between_windows() {
    let backend = Nginx::start(&NginxConfig {
        tls: true,
        ..NginxConfig::default()
    });
    let front = Nginx::start(&NginxConfig {
        tls: true,
        server_extra: format!(
            "location /up/ {{ proxy_pass https://127.0.0.1:{}/; proxy_ssl_verify off; }}",
            backend.port
        ),
        ..NginxConfig::default()
    });
    let url = format!("{}up/", front.https_url());
    const N: usize = 40;
    let n = N.to_string();
    for detail in ["full", "sampled"] {
        let run = Probe::on(&front)
            .json()
            .summary_only()
            .detail(detail)
            .start();
        if detail == "sampled" {
            // The first window is the first second after attach; the next opens at 20 s.
            std::thread::sleep(std::time::Duration::from_millis(1500));
        }
        assert_eq!(hey(&["-n", &n, "-c", "2", "-disable-keepalive"], &url), N);
        let s = run.stop().summary_json();
        let tls = &s["tls"];
        assert_eq!(stub_requests(&s), N as u64, "{s}");
        assert_eq!(tls["handshakes"], N, "{detail}: {tls}");
        assert_eq!(tls["handshakes_from"], "ngx_ssl_ocsp_validate", "{tls}");
        assert_eq!(tls["per_connection"], 1.0, "{tls}");
        if detail == "full" {
            assert!(tls["libssl_sampled"].is_null(), "{tls}");
            assert_eq!(tls["started"], N, "{tls}");
            assert_eq!(tls["timed"], N, "{tls}");
            assert_eq!(tls["abandoned"], 0, "{tls}");
        } else {
            assert_eq!(tls["libssl_sampled"], true, "{tls}");
            assert_eq!(tls["started"], 0, "{tls}");
            assert_eq!(tls["calls"], 0, "{tls}");
        }
    }
    assert_eq!(backend.access_log_lines(), 2 * N);
}

/// Case of trial 9 (a Go HTTP/2 client dialing TLS connections it never used): 300
/// connections complete a TLS handshake and close without a request, beside 5 curl
/// runs of 20 HTTP/2 requests each on one connection, with `$connection_requests` in
/// the access log. The connections that carried a request are 5 (lines with 1), so
/// 20.00 requests per connection that carried one, and `tls_handshake_cost` says at
/// least the completed handshakes less 5 carried none.
#[test]
fn tls_connections_that_carry_no_request_are_counted_from_the_access_log() {
    let ng = Nginx::start(&NginxConfig {
        tls: true,
        http2: true,
        http_extra: "log_format withconn '$remote_addr [$time_local] \"$request\" $status $connection_requests';".into(),
        access_log: Some("off".into()),
        server_extra: "access_log logs/c.log withconn;".into(),
        ..NginxConfig::default()
    });
    let json = Probe::on(&ng).json().start();
    let text = Probe::on(&ng).plain().start();
    let script = format!(
        "import socket, ssl\nctx = ssl.create_default_context()\nctx.check_hostname = False\nctx.verify_mode = ssl.CERT_NONE\nfor _ in range(300):\n    s = ctx.wrap_socket(socket.create_connection(('127.0.0.1', {})))\n    s.close()\n",
        ng.port
    );
    let out = std::process::Command::new("python3")
        .args(["-c", &script])
        .output()
        .expect("python3");
    assert!(out.status.success(), "{out:?}");
    let url = format!("{}?[1-20]", ng.https_url());
    for _ in 0..5 {
        let got = curl_statuses(&["--http2", &url]);
        assert_eq!(got.len(), 20, "{got:?}");
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let s = json.stop().summary_json();
    let text = text.stop().stdout;
    assert_eq!(stub_requests(&s), 100, "{s}");
    assert_eq!(s["access_log"]["connections_with_requests"], 5, "{s}");
    let t = &s["tls"];
    let done = t["handshakes"].as_u64().unwrap();
    assert_eq!(done + t["abandoned"].as_u64().unwrap(), 305, "{t}");
    assert!(
        text.contains("per connection that carried a request 20.00 (stub_status requests over 5 connections: access-log lines with $connection_requests 1"),
        "{text}"
    );
    let v = nginx_probe_tests::verdict(&s, "tls_handshake_cost")
        .unwrap_or_else(|| panic!("no tls_handshake_cost: {s}"));
    assert_eq!(v["evidence"]["connections_with_requests"], 5, "{v}");
    // Less the connections open at the end (nginx's gauge: none after the clients
    // closed), each of which might have a first request still running.
    assert_eq!(v["evidence"]["connections_open_at_end"], 0, "{v}");
    assert_eq!(
        v["evidence"]["tls_handshakes_without_request_min"],
        done - 5,
        "{v}"
    );
    assert!(!verdict_ids(&s).iter().any(|i| i == "keepalive_off"), "{s}");
}

/// libssl's uprobes are linked per worker process (trial 21: in every process they
/// made a curl on the host stall): a reload's new workers are linked as they are
/// adopted, so their handshakes are timed too. 50 one-request HTTPS connections before
/// a reload and 50 after: 100 handshakes, 100 started, 100 timed (the first build of
/// the per-worker links timed only the 50 before).
#[test]
fn a_reload_s_new_workers_get_libssl_s_uprobes_too() {
    let ng = Nginx::start(&NginxConfig {
        tls: true,
        ..NginxConfig::default()
    });
    let run = Probe::on(&ng).json().summary_only().start();
    let one_each = ["-n", "50", "-c", "2", "-disable-keepalive"];
    assert_eq!(hey(&one_each, &ng.https_url()), 50);
    ng.reload();
    // The new workers start at once; the probe adopts them within a refresh (500 ms).
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(hey(&one_each, &ng.https_url()), 50);
    let s = run.stop().summary_json();
    let tls = &s["tls"];
    assert_eq!(tls["handshakes"], 100, "{tls}");
    assert_eq!(tls["started"], 100, "{tls}");
    assert_eq!(tls["timed"], 100, "{tls}");
    assert_eq!(tls["libssl_from"], "shared_library", "{tls}");
}
