//! Loopback HTTP clients with exact counts: our own (one request per connection, POST
//! bodies) and the external ones (hey, curl), plus report helpers.

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpStream},
    process::{Command, Stdio},
};

/// Sends one `GET /` on a new connection with `Connection: close` and reads the whole
/// response; `n` times, one after the other. Returns the number of 200 responses.
pub fn one_request_per_connection(addr: SocketAddr, n: usize) -> usize {
    let mut ok = 0;
    for _ in 0..n {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.write_all(b"GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
            .expect("send");
        let mut resp = Vec::new();
        s.read_to_end(&mut resp).expect("read response");
        if resp.starts_with(b"HTTP/1.1 200") {
            ok += 1;
        }
    }
    ok
}

/// Like [`one_request_per_connection`], but loops until `stop` is set; returns the
/// number of connections that completed a 200 response. Connections that fail are
/// not counted (and make the caller's exact totals wrong, so they panic).
pub fn one_request_per_connection_until(
    addr: SocketAddr,
    stop: &std::sync::atomic::AtomicBool,
) -> usize {
    let mut n = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        n += one_request_per_connection(addr, 1);
    }
    n
}

/// Runs `hey <args> <url>` (certificates are not checked) and returns the number of
/// responses with status 200 it reports. Panics when hey cannot run.
pub fn hey(args: &[&str], url: &str) -> usize {
    let out = Command::new("hey")
        .args(args)
        .arg(url)
        .output()
        .expect("run hey (run `cargo xtask setup`)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "hey failed: {text}");
    text.lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("[200]")
                .and_then(|r| r.split_whitespace().next())
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// Sends `n` `POST path` requests with a `body_len`-byte body, one connection each
/// (`Connection: close`), reading every response to its end. Returns the number of
/// 200 responses.
pub fn post_requests(addr: SocketAddr, path: &str, body_len: usize, n: usize) -> usize {
    let body = vec![b'x'; body_len];
    let mut ok = 0;
    for _ in 0..n {
        let mut s = TcpStream::connect(addr).expect("connect");
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: test\r\nContent-Length: {body_len}\r\nConnection: close\r\n\r\n"
        );
        s.write_all(head.as_bytes()).expect("send head");
        s.write_all(&body).expect("send body");
        let mut resp = Vec::new();
        s.read_to_end(&mut resp).expect("read response");
        if resp.starts_with(b"HTTP/1.1 200") {
            ok += 1;
        }
    }
    ok
}

/// Runs curl with `args` (HTTPS certificates not checked, bodies discarded) and returns
/// (HTTP status, HTTP version) of every transfer (`--write-out` on stderr).
pub fn curl_statuses(args: &[&str]) -> Vec<(u16, String)> {
    let out = Command::new("curl")
        .args(["-k", "-s", "--no-progress-meter"])
        .args(["--write-out", "%{stderr}%{http_code} %{http_version}\n"])
        .args(args)
        .stdout(Stdio::null())
        .output()
        .expect("run curl (run `cargo xtask setup`)");
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|l| {
            let (code, version) = l.trim().split_once(' ')?;
            Some((code.parse().ok()?, version.to_string()))
        })
        .collect()
}

/// Ids of the verdicts of a report document.
pub fn verdict_ids(doc: &serde_json::Value) -> Vec<String> {
    doc["verdicts"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v["id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Sum of `accepts` over the workers of a summary document, including old exited
/// workers merged into `exited_merged`.
pub fn total_accepts(summary: &serde_json::Value) -> u64 {
    workers(summary)
        .iter()
        .map(|w| w["accepts"].as_u64().expect("accepts"))
        .sum::<u64>()
        + summary["exited_merged"]["accepts"].as_u64().unwrap_or(0)
}

/// The `workers` array of a report document.
pub fn workers(doc: &serde_json::Value) -> Vec<serde_json::Value> {
    doc["workers"].as_array().expect("workers array").clone()
}

/// Sum over the workers of a report of the number at `path` (e.g.
/// `["upstream", "connects"]`); panics naming the worker that has no number there.
pub fn sum_workers(doc: &serde_json::Value, path: &[&str]) -> u64 {
    workers(doc)
        .iter()
        .map(|w| {
            path.iter()
                .fold(w, |v, k| &v[*k])
                .as_u64()
                .unwrap_or_else(|| panic!("{path:?} in {w}"))
        })
        .sum()
}

/// The verdict `id` of a report, if it fired.
pub fn verdict<'a>(doc: &'a serde_json::Value, id: &str) -> Option<&'a serde_json::Value> {
    doc["verdicts"]
        .as_array()
        .expect("verdicts")
        .iter()
        .find(|v| v["id"] == id)
}

/// Sum over workers of `accept_errors[errno]`.
pub fn total_accept_errors(summary: &serde_json::Value, errno: &str) -> u64 {
    workers(summary)
        .iter()
        .map(|w| {
            w["accept_errors"][errno]
                .as_u64()
                .expect("accept_errors entry")
        })
        .sum()
}

/// The pids of the report's events of `kind` (`worker_started`, `new_master_failed`...),
/// in order.
pub fn events(s: &serde_json::Value, kind: &str) -> Vec<u64> {
    s["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["event"] == kind)
        .map(|e| e["pid"].as_u64().unwrap())
        .collect()
}
