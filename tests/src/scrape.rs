//! Scraping nginx-probe's `/metrics` (`--listen`) over plain HTTP/1.1, and reading
//! values out of the Prometheus text.

use std::{
    io::{Read, Write},
    net::TcpStream,
    time::Duration,
};

/// `GET /metrics` from nginx-probe's `--listen` port on 127.0.0.1, asking for gzip
/// when `gzip`. Returns the response head (status line and headers, lowercase) and
/// the body as received (still compressed if the server compressed it).
pub fn scrape(port: u16, gzip: bool) -> (String, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to /metrics");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let enc = if gzip {
        "Accept-Encoding: gzip\r\n"
    } else {
        ""
    };
    s.write_all(
        format!("GET /metrics HTTP/1.1\r\nHost: probe\r\n{enc}Connection: close\r\n\r\n")
            .as_bytes(),
    )
    .expect("send scrape");
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).expect("read scrape");
    let end = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP header end: {}", String::from_utf8_lossy(&resp)));
    let head = String::from_utf8_lossy(&resp[..end]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    let mut body = resp[end + 4..].to_vec();
    if head.contains("transfer-encoding: chunked") {
        body = dechunk(&body);
    }
    (head, body)
}

/// The payload of an HTTP/1.1 chunked body.
fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let nl = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size line");
        let size = usize::from_str_radix(
            String::from_utf8_lossy(&b[..nl])
                .split(';')
                .next()
                .unwrap()
                .trim(),
            16,
        )
        .expect("chunk size");
        b = &b[nl + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

/// `GET /metrics` as text (no compression asked).
pub fn scrape_text(port: u16) -> String {
    let (_, body) = scrape(port, false);
    String::from_utf8(body).expect("UTF-8 metrics")
}

/// The value of the first sample of `name` (with no labels or any labels) in
/// Prometheus text, None when absent.
pub fn metric_value(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.split([' ', '{']).next() == Some(name))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Sum of every sample of `name` in Prometheus text.
pub fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.split([' ', '{']).next() == Some(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
