//! Who closed nginx's TLS connections when nginx closes them on its own after a
//! response (`keepalive_requests`), whichever way the client's answer raced nginx's
//! close; and that a client's close_notify reaching a socket nginx closed is no
//! request. Run as root through `cargo xtask test`.

use std::{process::Command, thread, time::Duration};

use nginx_probe_tests::{port_entry, verdict, Nginx, NginxConfig, Probe, SyscallDelay};

/// HTTPS/1.1 clients, one thread each: 10 requests on one connection, each response
/// read whole; after the 10th (nginx's `Connection: close`), the client waits
/// `argv[3]` ms, then closes: even-numbered clients with a close_notify, their FIN
/// 200 ms after it (`SSLSocket.unwrap()` on a non-blocking socket), odd ones with a
/// FIN only (Python's `close()` sends no close_notify). Prints the 200 responses and the connections nginx announced closing.
const CLIENTS: &str = r#"
import socket, ssl, sys, threading, time
host, port, wait_ms, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ok = [0] * n
closed = [0] * n
def client(i):
    s = ctx.wrap_socket(socket.create_connection((host, port)), server_hostname="test")
    f = s.makefile("rb")
    for _ in range(10):
        s.sendall(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
        status = f.readline()
        length, close = 0, False
        while True:
            h = f.readline()
            if h in (b"\r\n", b""):
                break
            k, _, v = h.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v)
            if k.strip().lower() == b"connection" and v.strip().lower() == b"close":
                close = True
        f.read(length)
        ok[i] += b" 200 " in status
    closed[i] = close
    f.close()
    time.sleep(wait_ms / 1000)
    if i % 2 == 0:
        # The close_notify alone: unwrap() on a non-blocking socket sends it and
        # stops waiting for nginx's; the FIN comes 200 ms later.
        s.setblocking(False)
        try:
            s.unwrap()
        except (ssl.SSLWantReadError, OSError):
            pass
        time.sleep(0.2)
    s.close()
ts = [threading.Thread(target=client, args=(i,)) for i in range(n)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(sum(ok), sum(closed))
"#;

/// Clients per phase.
const N: usize = 10;

/// Runs [`CLIENTS`] against `ng` (N clients, closing `wait_ms` after their 10th
/// response); asserts N*10 responses of 200 and N closes announced by nginx.
fn clients(ng: &Nginx, wait_ms: u64) {
    let out = Command::new("python3")
        .args(["-c", CLIENTS, "127.0.0.1"])
        .arg(ng.addr().port().to_string())
        .arg(wait_ms.to_string())
        .arg(N.to_string())
        .output()
        .expect("run python3 (run `cargo xtask setup`)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(text.trim(), format!("{} {N}", N * 10), "responses, closes");
}

/// Trial 11's F5 (HTTPS at keepalive_requests, 10-30% of nginx's closes counted as
/// the client's, and with wrk's close_notify a reset of nginx's and 2055 "requests
/// after close"): nginx closes each connection after its 10th response.
/// Phase 1: every write of the worker's held back 10 ms after it is made, so each
/// client closes before nginx's `ngx_ssl_shutdown`: the 5 close_notify clients' alert
/// is unread at nginx's `close()` (the kernel resets, `TCP_ABORT_ON_CLOSE`: still
/// nginx's close), the 5 FIN clients' FIN is in first, unread (nginx's close, the
/// client's FIN first).
/// Phase 2: the clients close 300 ms after nginx did: the 5 close_notify alerts reach
/// sockets nginx closed and draw a reset each (`TCP_ABORT_ON_DATA` in `FIN_WAIT1`,
/// `TCP_TIMEWAIT_SOCKET` once nginx's FIN was acknowledged), alert-sized, no request.
/// All 20 are nginx's closes; none is the client's or a reset.
#[test]
fn nginx_s_closes_at_keepalive_requests_over_tls_stay_nginx_s_whoever_answers_first() {
    keepalive_requests_closes(&[]);
}

/// The same, counted by the perf-event tracepoint programs (the fallback set: the
/// reset's segment read from the record's `skbaddr`).
#[test]
fn tls_closes_at_keepalive_requests_are_told_by_the_perf_event_fallback_too() {
    keepalive_requests_closes(&["--lifecycle-from-perf-events"]);
}

fn keepalive_requests_closes(flags: &[&str]) {
    let ng = Nginx::start(&NginxConfig {
        workers: 1,
        tls: true,
        http_extra: "keepalive_requests 10;".into(),
        ..NginxConfig::default()
    });
    let probe = Probe::on(&ng).json().args(flags).start();
    let text = Probe::on(&ng).plain().args(flags).start();
    {
        // Each response is on the wire when write() returns; the access-log write,
        // the close_notify and the close() come 10 ms later each.
        let _slow = SyscallDelay::on(ng.worker_pids()[0], "write", "exit", 10, 500);
        clients(&ng, 0);
        thread::sleep(Duration::from_millis(300));
    }
    clients(&ng, 300);
    thread::sleep(Duration::from_millis(500));
    let summary = probe.stop().summary_json();
    let text = text.stop().stdout;
    let p = port_entry(&summary, &ng);
    assert_eq!(p["established"], 2 * N as u64, "{p}");
    assert_eq!(p["closed_by_nginx"], 2 * N as u64, "{p}");
    assert_eq!(p["closed_by_client"], 0, "{p}");
    assert_eq!(p["closed_by_reset"], 0, "{p}");
    assert_eq!(p["closed_by_nginx_data_unread"], N as u64 / 2, "{p}");
    assert_eq!(p["closed_by_nginx_client_fin_first"], N as u64 / 2, "{p}");
    assert_eq!(p["resets_after_close_alert_sized"], N as u64 / 2, "{p}");
    let r = &p["resets_sent_by_reason"];
    let count = |k: &str| r[k].as_u64().unwrap_or(0);
    assert_eq!(count("TCP_ABORT_ON_CLOSE"), N as u64 / 2, "{p}");
    assert_eq!(
        count("TCP_ABORT_ON_DATA") + count("TCP_TIMEWAIT_SOCKET"),
        N as u64 / 2,
        "{p}"
    );
    assert!(
        verdict(&summary, "requests_after_close").is_none(),
        "{summary}"
    );
    let w = &summary["workers"][0]["connections_closed"];
    assert_eq!(w["by_nginx"], 2 * N as u64, "{w}");
    assert!(
        text.contains(&format!("closed first by nginx {}  by the client 0", 2 * N)),
        "{text}"
    );
}
