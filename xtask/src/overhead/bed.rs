//! The bench's workloads: what nginx runs ([`Workload`]) and the running bed the
//! workers' CPU is measured on ([`Bed`]).

use nginx_probe_tests::{get_paths, Nginx, NginxConfig};

use super::{CONNECTIONS, PAGE_BYTES, UPSTREAM_KEEPALIVE};
use crate::load::Pinning;

/// A workload: an nginx setup and the URL wrk loads.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum Workload {
    /// Plain HTTP, the 30-byte index file, access log on: the worst case per request.
    Static,
    /// HTTPS (self-signed RSA 2048 certificate made with openssl at start), a 4 KB page.
    Https,
    /// `Static` with one request per connection (`Connection: close`): the worst case
    /// for per-connection probes (accepts, connection lifecycle).
    StaticClose,
    /// `Https` with one request per connection: a full TLS handshake per request, the
    /// worst case for the TLS uprobes.
    HttpsClose,
    /// proxy_pass to a second nginx on loopback serving the 4 KB page, upstream
    /// upstream keepalive sized so that connections are reused, HTTP/1.1 to the upstream.
    Proxy,
    /// All of the above, in that order.
    All,
}

impl Workload {
    /// The concrete workloads this selection runs.
    pub fn expand(self) -> Vec<Workload> {
        match self {
            Workload::All => vec![
                Workload::Static,
                Workload::Https,
                Workload::StaticClose,
                Workload::HttpsClose,
                Workload::Proxy,
            ],
            w => vec![w],
        }
    }

    /// Short name (as on the command line).
    pub fn name(self) -> &'static str {
        match self {
            Workload::Static => "static",
            Workload::Https => "https",
            Workload::StaticClose => "static-close",
            Workload::HttpsClose => "https-close",
            Workload::Proxy => "proxy",
            Workload::All => "all",
        }
    }

    /// One sentence saying what runs.
    pub fn describe(self) -> String {
        let client = format!("`wrk -t1 -c{CONNECTIONS} --latency` (keepalive)");
        let close = format!("`wrk -t1 -c{CONNECTIONS} --latency -H \"Connection: close\"`");
        match self {
            Workload::Static => format!(
                "plain HTTP, a 30-byte file, sendfile on, access log on (unbuffered), 2 workers; {client}"
            ),
            Workload::Https => format!(
                "HTTPS (TLS, self-signed RSA 2048 certificate made with openssl at start), a {PAGE_BYTES}-byte page, access log on, 2 workers; {client} over https"
            ),
            Workload::Proxy => format!(
                "plain HTTP to 2 workers that `proxy_pass` to a second nginx on loopback (1 worker, access log off) serving a {PAGE_BYTES}-byte page; `upstream {{ keepalive {UPSTREAM_KEEPALIVE}; }}`, `proxy_http_version 1.1`, `proxy_set_header Connection \"\"`; access log on; {client}; the front's workers are measured, the upstream's worker runs on the load generator's CPU when pinned"
            ),
            Workload::StaticClose => format!(
                "as static, but one request per connection: {close}"
            ),
            Workload::HttpsClose => format!(
                "as https, but one request per connection (a full TLS handshake each, no session resumption): {close}"
            ),
            Workload::All => "static, https, static-close, https-close and proxy".into(),
        }
    }
}

/// A running workload: the nginx the workers' CPU is measured on, the upstream behind
/// it (proxy), and wrk's URL.
pub struct Bed {
    pub front: Nginx,
    pub upstream: Option<Nginx>,
    pub url: String,
    /// wrk's arguments beside the defaults (`-H "Connection: close"`).
    pub wrk_extra: &'static [&'static str],
}

/// wrk's arguments for one request per connection.
pub const CLOSE: &[&str] = &["-H", "Connection: close"];

/// Path of the upstream's `stub_status` page.
pub const STATUS_PATH: &str = "/nginx_status";

/// nginx's `accepts` counter from a `stub_status` page
/// (`server accepts handled requests` then `A H R`).
pub fn stub_accepts(body: &str) -> Option<u64> {
    let mut lines = body.lines();
    lines.find(|l| l.trim() == "server accepts handled requests")?;
    lines.next()?.split_whitespace().next()?.parse().ok()
}

/// The upstream's accepted connections so far (reading them costs one connection).
pub fn upstream_accepts(bed: &Bed) -> Option<u64> {
    let up = bed.upstream.as_ref()?;
    let body = get_paths(up.addr(), &[STATUS_PATH.to_string()]);
    stub_accepts(body.first()?)
}

fn page() -> Vec<u8> {
    let line = b"nginx-probe benchmark page, 4096 bytes of text in 64-byte lines.\n";
    line.iter().copied().cycle().take(PAGE_BYTES).collect()
}

/// Starts the nginx(es) of `w`, the front workers on the pinned CPUs (the upstream on
/// the client's).
pub fn start_bed(w: Workload, pin: Option<&Pinning>) -> Bed {
    let pin_front = pin.map(|p| p.nginx_directive.clone()).unwrap_or_default();
    let files = vec![("page.html".to_string(), page())];
    match w {
        Workload::Static | Workload::StaticClose | Workload::All => {
            let front = Nginx::start(&NginxConfig {
                main_extra: pin_front,
                ..NginxConfig::default()
            });
            let url = front.url();
            Bed {
                front,
                upstream: None,
                url,
                wrk_extra: if w == Workload::StaticClose {
                    CLOSE
                } else {
                    &[]
                },
            }
        }
        Workload::Https | Workload::HttpsClose => {
            let front = Nginx::start(&NginxConfig {
                main_extra: pin_front,
                tls: true,
                files,
                ..NginxConfig::default()
            });
            let url = format!("{}page.html", front.https_url());
            Bed {
                front,
                upstream: None,
                url,
                wrk_extra: if w == Workload::HttpsClose {
                    CLOSE
                } else {
                    &[]
                },
            }
        }
        Workload::Proxy => {
            let upstream = Nginx::start(&NginxConfig {
                workers: 1,
                access_log: Some("off".into()),
                main_extra: pin.map(|p| p.client_nginx_directive()).unwrap_or_default(),
                files,
                server_extra: format!("location = {STATUS_PATH} {{ stub_status; }}"),
                ..NginxConfig::default()
            });
            let front = Nginx::start(&NginxConfig {
                main_extra: pin_front,
                http_extra: format!(
                    "upstream backend {{ server 127.0.0.1:{}; keepalive {UPSTREAM_KEEPALIVE}; }}",
                    upstream.port
                ),
                server_extra: "location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection \"\"; }".into(),
                ..NginxConfig::default()
            });
            let url = format!("{}page.html", front.url());
            Bed {
                front,
                upstream: Some(upstream),
                url,
                wrk_extra: &[],
            }
        }
    }
}
