//! What the clients got, from nginx's own access log: status classes, request time,
//! and per upstream peer the status, response time and connect time nginx logged.
//! Pure: [`Outcomes`] counts the [`Fields`] `collect::access_log` read from each line
//! (nothing else of a line is kept: no client address, URI or header), and
//! [`Outcomes::report`] makes the report's `access_log` section.
//!
//! Times are nginx's (`$request_time`, `$upstream_*_time`: seconds with millisecond
//! resolution), kept in HDR histograms (the `hdrhistogram` crate, 2 significant
//! digits: quantiles within 1%) and shown as log2 histograms of milliseconds.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::access_log_format::{list_items, seconds_ms, Field, Fields};

/// Server names and upstream peers kept apart, at most; the rest are one row.
pub const MAX_NAMES: usize = 16;
/// Distinct status codes kept, at most (a hostile upstream can send any 3 digits).
pub const MAX_STATUSES: usize = 64;
/// Longest name kept (a `$host` is the client's), bytes.
pub const MAX_NAME_BYTES: usize = 96;
/// Longest time kept in a histogram, ms (1 hour); longer ones count as this.
const MAX_MS: u64 = 3_600_000;

/// Requests by status, with the status classes the report shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatusCounts {
    /// Status code -> count (at most [`MAX_STATUSES`] codes; others in `other_codes`).
    pub codes: BTreeMap<u16, u64>,
    /// Lines of the codes past the bound.
    pub other_codes: u64,
}

impl StatusCounts {
    fn add(&mut self, code: u16) {
        if let Some(n) = self.codes.get_mut(&code) {
            *n += 1;
        } else if self.codes.len() < MAX_STATUSES {
            self.codes.insert(code, 1);
        } else {
            self.other_codes += 1;
        }
    }

    /// `2xx`, `3xx`, `4xx` (499 apart), `499` (the client closed first), `5xx`, and
    /// `1xx`/`other` when present.
    pub fn classes(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for (&c, &n) in &self.codes {
            let k = match c {
                499 => "499".to_string(),
                100..=599 => format!("{}xx", c / 100),
                _ => "other".to_string(),
            };
            *out.entry(k).or_insert(0) += n;
        }
        if self.other_codes > 0 {
            *out.entry("other".to_string()).or_insert(0) += self.other_codes;
        }
        out
    }
}

/// A time distribution (ms), as read from the log: an HDR histogram (2 significant
/// digits: a bucket is at most 1% wide) and the exact longest value.
#[derive(Clone, Debug)]
pub struct Times(Histogram<u64>, u64);

impl Default for Times {
    fn default() -> Self {
        Times(
            Histogram::new_with_bounds(1, MAX_MS, 2).expect("static bounds"),
            0,
        )
    }
}

impl Times {
    fn add(&mut self, ms: u64) {
        let ms = ms.min(MAX_MS);
        self.0.saturating_record(ms);
        self.1 = self.1.max(ms);
    }

    /// The report's figures; None when nothing was recorded.
    pub fn report(&self, source: &str) -> Option<TimeReport> {
        let h = &self.0;
        if h.is_empty() {
            return None;
        }
        // A quantile's bucket middle, never above the longest value logged (trial
        // 21: 60 values of 1.200 to 1.203 s said "p50 1.207 s, max 1.207 s", the
        // bucket's top).
        let q = |x: f64| h.median_equivalent(h.value_at_quantile(x)).min(self.1) as f64 / 1000.0;
        let mut log2_ms: BTreeMap<u64, u64> = BTreeMap::new();
        for v in h.iter_recorded() {
            let ms = h.lowest_equivalent(v.value_iterated_to());
            // Bucket upper bound: the power of two at or above the value (0 -> 1).
            let le = ms.max(1).next_power_of_two();
            *log2_ms.entry(le).or_insert(0) += v.count_at_value();
        }
        Some(TimeReport {
            source: source.to_string(),
            count: h.len(),
            p50_s: q(0.5),
            p90_s: q(0.9),
            p99_s: q(0.99),
            max_s: self.1 as f64 / 1000.0,
            log2_ms: log2_ms.into_iter().collect(),
        })
    }
}

/// A `$request_time` (millisecond resolution) as said: `under 1 ms`, `12 ms`, `1.50 s`.
pub fn request_time_said(s: f64) -> String {
    if s < 0.001 {
        "under 1 ms".to_string()
    } else if s < 1.0 {
        format!("{:.0} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

/// A time distribution in the report.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TimeReport {
    /// The log variable it comes from (`$request_time`).
    pub source: String,
    /// Values recorded.
    pub count: u64,
    /// Quantiles, seconds (HDR histogram: the middle of a bucket at most 1% wide, never
    /// above `max_s`).
    pub p50_s: f64,
    /// p90, seconds.
    pub p90_s: f64,
    /// p99, seconds.
    pub p99_s: f64,
    /// The longest value logged, seconds (exact).
    pub max_s: f64,
    /// log2 histogram: (upper bound ms, a power of two; values in (bound/2, bound]).
    pub log2_ms: Vec<(u64, u64)>,
}

/// One upstream peer as the access log names it.
#[derive(Clone, Debug, Default)]
struct Peer {
    /// Attempts (one per item of `$upstream_addr`).
    tries: u64,
    statuses: StatusCounts,
    response: Times,
    connect: Times,
}

/// The counts of one period (since attach, or an interval).
#[derive(Clone, Debug, Default)]
pub struct Outcomes {
    /// Lines read in a known format.
    pub lines: u64,
    /// Lines by `$status`.
    pub statuses: StatusCounts,
    /// `$request_time` of the lines that log it.
    pub request_time: Times,
    /// Server name -> (lines, statuses); at most [`MAX_NAMES`], the rest in `other`.
    servers: BTreeMap<String, StatusCounts>,
    servers_other: StatusCounts,
    peers: BTreeMap<String, Peer>,
    peers_other: Peer,
    /// Requests that tried more than one upstream peer (`$upstream_addr` with more
    /// than one item), and those among them whose client status was below 500.
    pub retried: u64,
    /// Of `retried`, those the client got with a status below 500.
    pub retried_ok: u64,
    /// `$request_time` of the retried requests.
    pub retried_time: Times,
    /// Items of `$upstream_addr` that name an upstream block, not a peer
    /// ([`is_peer_address`]): nginx found no live server in it and tried none.
    pub no_live_server: u64,
    /// Lines whose format logs `$upstream_addr`.
    pub upstream_addr_logged: u64,
    /// Of those, lines answered 5xx with no upstream tried (`$upstream_addr` `-` or
    /// empty): nginx's own 5xx (`return 503`, a limit), not an upstream's.
    pub no_upstream_5xx: u64,
    /// Lines whose format logs `$connection_requests`.
    pub connection_requests_logged: u64,
    /// Of those, lines with `$connection_requests` 1: a connection's first request.
    pub first_requests: u64,
    /// Lines by `$connection_requests` value, up to [`MAX_CONNECTION_REQUESTS`]: the
    /// connections that reached each count of requests.
    reached: BTreeMap<u64, u64>,
}

/// The largest `$connection_requests` value counted one by one (nginx's default
/// keepalive_requests is 1000); the lines above it only make the counts at the top
/// unknown.
pub const MAX_CONNECTION_REQUESTS: u64 = 1000;

/// The number of requests at which most connections ended, from `$connection_requests`:
/// a connection whose last line in the period says N ended there (or is still open).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct EndedAt {
    /// Requests on the connection, N (2 or more).
    pub requests: u64,
    /// Connections whose last logged request was the Nth (lines with N less lines with
    /// N + 1).
    pub connections: u64,
}

fn bounded(name: &str) -> String {
    let mut end = name.len().min(MAX_NAME_BYTES);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name[..end].to_string()
}

impl Outcomes {
    /// Counts one line.
    pub fn add(&mut self, f: &Fields<'_>) {
        self.lines += 1;
        if let Some(s) = f.status {
            self.statuses.add(s);
        }
        if let Some(ms) = f.request_time_ms {
            self.request_time.add(ms);
        }
        if let (Some(name), Some(s)) = (f.server, f.status) {
            let slot = if self.servers.contains_key(name) || self.servers.len() < MAX_NAMES {
                self.servers.entry(bounded(name)).or_default()
            } else {
                &mut self.servers_other
            };
            slot.add(s);
        }
        if let Some(n) = f.connection_requests {
            self.connection_requests_logged += 1;
            if n == 1 {
                self.first_requests += 1;
            }
            if (1..=MAX_CONNECTION_REQUESTS).contains(&n) {
                *self.reached.entry(n).or_insert(0) += 1;
            }
        }
        if let Some(a) = f.upstream_addr {
            self.upstream_addr_logged += 1;
            if (a == "-" || a.is_empty()) && f.status.is_some_and(|s| (500..600).contains(&s)) {
                self.no_upstream_5xx += 1;
            }
        }
        let Some(addrs) = f.upstream_addr.filter(|a| *a != "-" && !a.is_empty()) else {
            return;
        };
        let items = |v: Option<&str>| -> Vec<String> {
            v.map(|v| list_items(v).map(str::to_string).collect())
                .unwrap_or_default()
        };
        let (st, rt, ct) = (
            items(f.upstream_status),
            items(f.upstream_response_time),
            items(f.upstream_connect_time),
        );
        let addrs: Vec<&str> = list_items(addrs).collect();
        // Trial 11: `127.0.0.1:19512, dead` was one request retried once, and `dead`
        // (the block's name) a peer of 299 tries.
        if addrs.iter().filter(|a| is_peer_address(a)).count() > 1 {
            self.retried += 1;
            if f.status.is_some_and(|s| s < 500) {
                self.retried_ok += 1;
            }
            if let Some(ms) = f.request_time_ms {
                self.retried_time.add(ms);
            }
        }
        for (i, a) in addrs.iter().enumerate() {
            if !is_peer_address(a) {
                self.no_live_server += 1;
                continue;
            }
            let peer = if self.peers.contains_key(*a) || self.peers.len() < MAX_NAMES {
                self.peers.entry(bounded(a)).or_default()
            } else {
                &mut self.peers_other
            };
            peer.tries += 1;
            if let Some(s) = st.get(i).and_then(|s| s.parse().ok()) {
                peer.statuses.add(s);
            }
            if let Some(ms) = rt.get(i).and_then(|v| seconds_ms(v)) {
                peer.response.add(ms);
            }
            if let Some(ms) = ct.get(i).and_then(|v| seconds_ms(v)) {
                peer.connect.add(ms);
            }
        }
    }

    /// The request count (2 or more, below [`MAX_CONNECTION_REQUESTS`]) at which the
    /// most connections ended: lines with N less lines with N + 1; None when none did.
    fn ended_most_at(&self) -> Option<EndedAt> {
        self.reached
            .iter()
            .filter(|(n, _)| **n >= 2 && **n < MAX_CONNECTION_REQUESTS)
            .map(|(n, c)| EndedAt {
                requests: *n,
                connections: c.saturating_sub(self.reached.get(&(n + 1)).copied().unwrap_or(0)),
            })
            .filter(|e| e.connections > 0)
            .max_by_key(|e| (e.connections, std::cmp::Reverse(e.requests)))
    }

    /// The report's section; `fields` are those the formats read carry, `files` the
    /// files read, `not_read` why other access logs were not.
    pub fn report(
        &self,
        fields: &[Field],
        files: Vec<AccessLogFileReport>,
        not_read: Vec<String>,
    ) -> AccessLogReport {
        // Three digits, as nginx logs them: `000` (no status: nothing was sent) stays
        // `000`, not `0`.
        let codes = |s: &StatusCounts| {
            s.codes
                .iter()
                .map(|(c, n)| (format!("{c:03}"), *n))
                .collect()
        };
        let peer = |name: &str, p: &Peer| UpstreamOutcomeReport {
            peer: name.to_string(),
            tries: p.tries,
            statuses: codes(&p.statuses),
            response_time: p.response.report("$upstream_response_time"),
            connect_time: p.connect.report("$upstream_connect_time"),
        };
        let mut upstreams: Vec<UpstreamOutcomeReport> =
            self.peers.iter().map(|(n, p)| peer(n, p)).collect();
        if self.peers_other.tries > 0 {
            upstreams.push(peer("other", &self.peers_other));
        }
        let mut servers: Vec<ServerOutcomeReport> = self
            .servers
            .iter()
            .map(|(n, s)| ServerOutcomeReport {
                server: n.clone(),
                requests: s.codes.values().sum::<u64>() + s.other_codes,
                classes: s.classes(),
            })
            .collect();
        if !self.servers_other.codes.is_empty() {
            servers.push(ServerOutcomeReport {
                server: "other".into(),
                requests: self.servers_other.codes.values().sum(),
                classes: self.servers_other.classes(),
            });
        }
        let lacks = Field::ALL
            .iter()
            .filter(|f| f.reported_missing() && !fields.contains(f))
            .map(|f| f.variable().to_string())
            .collect();
        AccessLogReport {
            files,
            not_read,
            lines: self.lines,
            statuses: codes(&self.statuses),
            classes: self.statuses.classes(),
            request_time: self.request_time.report("$request_time"),
            servers,
            upstreams,
            retried: self.retried,
            retried_ok: self.retried_ok,
            retried_time: self.retried_time.report("$request_time"),
            no_upstream_5xx: (self.lines > 0 && self.upstream_addr_logged == self.lines)
                .then_some(self.no_upstream_5xx),
            no_live_server: self.no_live_server,
            connections_with_requests: (self.lines > 0
                && self.connection_requests_logged == self.lines)
                .then_some(self.first_requests),
            ended_most_at: (self.lines > 0 && self.connection_requests_logged == self.lines)
                .then(|| self.ended_most_at())
                .flatten(),
            lacks,
            share_logged: None,
            nginx_requests: None,
            counts_every_request: false,
            not_every_request: None,
        }
    }
}

/// One access log file read.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct AccessLogFileReport {
    /// The path nginx writes (raw: renderers escape it).
    pub path: String,
    /// The `log_format` names its `access_log` directives use.
    pub formats: Vec<String>,
    /// `buffer=`/`flush=` of its directive: lines reach the file late by up to the
    /// flush time (or until the buffer fills), so recent requests may be missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffered: Option<String>,
    /// Lines read in a known format, and the others: not in any of its formats,
    /// ambiguous (see `model::access_log_format`), cut at the line limit.
    pub lines: u64,
    /// Lines in none of its formats.
    pub unparsed: u64,
    /// Lines more than one of its formats read differently (not counted).
    pub ambiguous: u64,
    /// Lines cut at the line limit (classified from their start).
    pub lines_cut: u64,
    /// Bytes not read (the reader fell too far behind, or the file was truncated).
    pub bytes_skipped: u64,
    /// Bytes the file held past the reader at the period's end (its size less the
    /// reader's offset, at the last read): lines written in the period that a later
    /// period counts (the reader reads at most 4 MiB per 500 ms). Absent when 0.
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub unread_bytes_at_end: u64,
    /// The same at the period's start: lines written before the period that it counts.
    /// Absent when 0 (and in a summary, which starts at attach).
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub unread_bytes_at_start: u64,
    /// Present and true when the configuration nginx runs no longer names this file
    /// (a reload changed the path): read on while a worker (old ones draining) holds it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retired: bool,
}

impl ServerOutcomeReport {
    /// The name for a reader: as logged, or `(empty)` (an empty `$host`: an HTTP/1.0
    /// request without Host to a server with `server_name ""`).
    pub fn shown(&self) -> &str {
        if self.server.is_empty() {
            "(empty)"
        } else {
            &self.server
        }
    }
}

/// One server name's outcomes.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ServerOutcomeReport {
    /// `$server_name`/`$host` as logged (raw; `other` for the rest).
    pub server: String,
    /// Lines logged for it in the period.
    pub requests: u64,
    /// Those lines by status class (`2xx`, `3xx`, `4xx`, `499`, `5xx`).
    pub classes: BTreeMap<String, u64>,
}

/// One upstream peer's outcomes, as nginx logged them.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct UpstreamOutcomeReport {
    /// The `$upstream_addr` item (raw; `other` for the rest).
    pub peer: String,
    /// Requests sent to it (a request retried on another peer counts for each).
    pub tries: u64,
    /// `$upstream_status` -> count.
    pub statuses: BTreeMap<String, u64>,
    /// `$upstream_response_time` of its tries, seconds; None when not logged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_time: Option<TimeReport>,
    /// `$upstream_connect_time` of its tries, seconds; None when not logged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_time: Option<TimeReport>,
}

/// The report's `access_log` section: what the clients got, per nginx's access log.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct AccessLogReport {
    /// Each access log file read, with its formats and the reader's bounds.
    pub files: Vec<AccessLogFileReport>,
    /// Access logs not read, one line each with why (`off`, `syslog:`, a variable in
    /// the path, a format that cannot be read exactly).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_read: Vec<String>,
    /// Lines read in the period.
    pub lines: u64,
    /// `$status` -> count, and the classes (`2xx`, `3xx`, `4xx` without 499, `499`,
    /// `5xx`).
    pub statuses: BTreeMap<String, u64>,
    /// Lines by status class (`2xx`, `3xx`, `4xx` without 499, `499`, `5xx`).
    pub classes: BTreeMap<String, u64>,
    /// `$request_time`; None when no format read logs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_time: Option<TimeReport>,
    /// Outcomes by server name (`$server_name`/`$host`); empty when no format logs it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<ServerOutcomeReport>,
    /// Outcomes by upstream peer (`$upstream_addr`); empty when no format logs it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upstreams: Vec<UpstreamOutcomeReport>,
    /// Requests logged with more than one upstream peer tried (retried on another peer:
    /// not failed when answered below 500).
    pub retried: u64,
    /// Of `retried`, those the client got with a status below 500.
    pub retried_ok: u64,
    /// Their `$request_time` (what the retries cost the clients); None when not logged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retried_time: Option<TimeReport>,
    /// Items of `$upstream_addr` naming an upstream block instead of a peer: nginx
    /// found no live server in it (`no live upstreams`) and connected to none (502).
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub no_live_server: u64,
    /// Lines answered 5xx with no upstream tried (`$upstream_addr` `-`): nginx's own
    /// (`return 503`, a limit, an error page), not an upstream's; None unless every
    /// line read logs `$upstream_addr`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_upstream_5xx: Option<u64>,
    /// Client connections whose first request was logged in the period (lines with
    /// `$connection_requests` 1): the connections that carried a request, when the log
    /// is complete; None unless every line read logs `$connection_requests`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections_with_requests: Option<u64>,
    /// The request count at which the most connections ended (`$connection_requests`:
    /// a connection's last line in the period), with how many; None unless every line
    /// read logs `$connection_requests`, or when none ended at 2 or more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_most_at: Option<EndedAt>,
    /// The variables no format read carries (`$request_time`, ...).
    pub lacks: Vec<String>,
    /// Lines read over nginx's requests in the period (stub_status); None when nginx's
    /// count is unknown or zero. Below 1: `access_log off` somewhere, another log, a
    /// buffered log not flushed yet, or lines not understood.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_logged: Option<f64>,
    /// nginx's own request count of the period that `share_logged` divides by
    /// (stub_status); None when unknown, and in recordings made before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nginx_requests: Option<u64>,
    /// Whether the lines are a count of nginx's requests: every request nginx serves
    /// is written at once to one file read here, from attach on (proven from the
    /// configuration and the reader: see `not_every_request`). False in older
    /// recordings.
    #[serde(default)]
    pub counts_every_request: bool,
    /// Why the lines are not a count of nginx's requests (`access_log off` at
    /// file:line, `if=`, `buffer=`, `log_subrequest on`, a log not read, the reader
    /// fell behind); None when they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_every_request: Option<String>,
}

/// Lines over nginx's requests above which the log's counts are not requests: a
/// request written to two files read, or lines from before attach (a buffered log
/// flushed after it). Rules do not use such a log.
pub const MAX_SHARE_LOGGED: f64 = 1.01;

/// Share of nginx's requests the access log must hold for "the clients got" figures
/// to stand for all requests.
pub const MIN_SHARE_LOGGED: f64 = 0.99;

/// Whether an item of `$upstream_addr` is a peer nginx tried: `ip:port`,
/// `[ip6]:port` or `unix:path`. nginx writes the upstream block's name instead when it
/// found no live server there (`ngx_http_upstream_next`, `no live upstreams`).
pub fn is_peer_address(item: &str) -> bool {
    item.starts_with("unix:") || item.parse::<std::net::SocketAddr>().is_ok()
}

/// How requests answered 444 are said against nginx's closes, in the text and in
/// verdicts alike ([`AccessLogReport::answered_444_closing`]).
pub fn said_444(n: u64, by_nginx: u64) -> String {
    format!("nginx's access log has {n} requests answered 444 (`return 444`: nginx closes the connection without a response, as configured; on HTTP/2 only the stream), against {by_nginx} closes by nginx")
}

impl AccessLogReport {
    /// The requests the log has answered 444 (`return 444`), when they are at least
    /// half of `closed_by_nginx` (nginx's first closes of connections that carried
    /// data, tracepoint `sock:inet_sock_set_state`): then they, not a keepalive setting
    /// or the clients, explain nginx's closes (trials 9 and 10). None otherwise, and
    /// when nginx closed none.
    pub fn answered_444_closing(&self, closed_by_nginx: u64) -> Option<u64> {
        self.statuses
            .get("444")
            .copied()
            .filter(|&n| closed_by_nginx > 0 && n * 2 >= closed_by_nginx)
    }

    /// Lines in any state (read in a format or not, ambiguous, cut): one per request
    /// nginx logged.
    pub fn lines_all(&self) -> u64 {
        self.lines
            + self
                .files
                .iter()
                .map(|f| f.unparsed + f.ambiguous + f.lines_cut)
                .sum::<u64>()
    }

    /// nginx's requests in the period, counted from its access log, when every request
    /// is logged (`counts_every_request`); None otherwise.
    pub fn request_count(&self) -> Option<u64> {
        self.counts_every_request.then(|| self.lines_all())
    }

    /// Lines that carried a `$status` (a file in a format without it logs none).
    pub fn with_status(&self) -> u64 {
        self.statuses.values().sum()
    }

    /// The retried requests as measured: `30 requests retried on another peer (more
    /// than one peer in $upstream_addr), 30 of them answered below 500; they took under
    /// 1 ms at the median, p99 2 ms ($request_time, the failed tries included)`; None
    /// when none was. A retry answered fast is not called slow: the time is what was
    /// logged, and without `$request_time` none is said.
    pub fn retried_said(&self) -> Option<String> {
        (self.retried > 0).then(|| {
            let took = self
                .retried_time
                .as_ref()
                .map(|t| {
                    format!(
                        "; they took {} at the median, p99 {} ($request_time, the failed tries included)",
                        request_time_said(t.p50_s),
                        request_time_said(t.p99_s)
                    )
                })
                .unwrap_or_default();
            format!(
                "{} requests retried on another peer (more than one peer in $upstream_addr), {} of them answered below 500{took}",
                self.retried, self.retried_ok
            )
        })
    }

    /// Whether the lines hold the clients' statuses for (almost) every request nginx
    /// counted: every line read logs `$status`, and the lines are nginx's request count
    /// itself (`counts_every_request`) or at least [`MIN_SHARE_LOGGED`] of it, never
    /// over it.
    pub fn is_complete(&self) -> bool {
        self.lines > 0
            && self.with_status() == self.lines
            && (self.share_logged.is_some_and(|s| s >= MIN_SHARE_LOGGED)
                || self.counts_every_request)
            && !self.over_counted()
    }

    /// Client connections that carried a request in the period, from the access log:
    /// `(connections, requests that may be missing from the lines)`: lines with
    /// `$connection_requests` 1 (a connection's first request), when the log is
    /// complete ([`Self::is_complete`]) and every line logs it; the second figure is 0
    /// when the lines are nginx's request count itself, else the lines short of
    /// nginx's count (each could be another connection's first request). None
    /// otherwise.
    pub fn connections_carried(&self) -> Option<(u64, u64)> {
        let n = self
            .connections_with_requests
            .filter(|_| self.is_complete())?;
        // Lines not read (unparsed, ambiguous, cut) may each be a first request; the
        // requests nginx counted and the log does not hold yet (buffered, not flushed)
        // may be too: from nginx's count where kept, else from the share, rounded to 3
        // decimals, so nginx's count taken at its largest (trial 16: a buffered log
        // holding 123121 of nginx's 123121 requests was said to miss 61).
        let unread = self.lines_all().saturating_sub(self.lines);
        let short = match (self.counts_every_request, self.share_logged) {
            (false, Some(_)) if self.nginx_requests.is_some() => {
                self.nginx_requests.unwrap_or(0).saturating_sub(self.lines)
            }
            // nginx's count is a whole number: the largest one the rounded share
            // allows.
            (false, Some(s)) if s > 0.0005 => {
                ((self.lines as f64 / (s - 0.0005)).floor() as u64).saturating_sub(self.lines)
            }
            _ => 0,
        };
        Some((n, unread + short))
    }

    /// More lines than nginx counted requests (see [`MAX_SHARE_LOGGED`]).
    pub fn over_counted(&self) -> bool {
        self.share_logged.is_some_and(|s| s > MAX_SHARE_LOGGED)
    }

    /// The figures `compare` sets side by side, `(key, value)`: shares of the logged
    /// requests by class (`logged_5xx_share`, `logged_4xx_share`, `logged_499_share`,
    /// only when the log carries `$status`), `logged_request_p50_ms`/`_p99_ms`
    /// (`$request_time`), `upstream_response_p99_ms` (the slowest peer's p99
    /// `$upstream_response_time`), `retried_share`. None of them without logged lines.
    pub fn compare_metrics(&self) -> Vec<(&'static str, f64)> {
        let mut m = Vec::new();
        if self.lines == 0 {
            return m;
        }
        let n = self.lines as f64;
        let with_status = self.with_status();
        if with_status > 0 {
            let n = with_status as f64;
            for (key, class) in [
                ("logged_5xx_share", "5xx"),
                ("logged_4xx_share", "4xx"),
                ("logged_499_share", "499"),
            ] {
                m.push((
                    key,
                    self.classes.get(class).copied().unwrap_or(0) as f64 / n,
                ));
            }
        }
        if let Some(t) = &self.request_time {
            m.push(("logged_request_p50_ms", t.p50_s * 1000.0));
            m.push(("logged_request_p99_ms", t.p99_s * 1000.0));
        }
        let peers = self
            .upstreams
            .iter()
            .filter_map(|p| p.response_time.as_ref());
        if let Some(p99) = peers.map(|t| t.p99_s).reduce(f64::max) {
            m.push(("upstream_response_p99_ms", p99 * 1000.0));
        }
        if !self.upstreams.is_empty() {
            m.push(("retried_share", self.retried as f64 / n));
        }
        m
    }

    /// Requests the clients got with a 5xx status, per the log.
    pub fn status_5xx(&self) -> u64 {
        self.classes.get("5xx").copied().unwrap_or(0)
    }

    /// The 5xx codes logged with their counts (`$status`), in code order.
    pub fn statuses_5xx(&self) -> impl Iterator<Item = (&str, u64)> {
        self.statuses
            .iter()
            .filter(|(c, _)| c.starts_with('5'))
            .map(|(c, n)| (c.as_str(), *n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::access_log_format::{LogFormat, Parsed};

    fn count(o: &mut Outcomes, f: &LogFormat, line: &str) {
        match f.parse(line) {
            Parsed::Line(x) => o.add(&x),
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn connections_and_where_they_ended_are_read_from_connection_requests() {
        let f = LogFormat::compile("c", "$status $connection_requests", "default").unwrap();
        let mut o = Outcomes::default();
        // 3 connections of 50 requests, 1 of 20, 2 of 1.
        for len in [50, 50, 50, 20, 1, 1] {
            for i in 1..=len {
                count(&mut o, &f, &format!("200 {i}"));
            }
        }
        let r = o.report(&f.fields, vec![], vec![]);
        assert_eq!(r.connections_with_requests, Some(6));
        assert_eq!(
            r.ended_most_at,
            Some(EndedAt {
                requests: 50,
                connections: 3
            })
        );
        assert!(!r.lacks.contains(&"$connection_requests".to_string()));
        // A format without it: neither.
        let g = LogFormat::compile("s", "$status", "default").unwrap();
        count(&mut o, &g, "200");
        let r = o.report(&f.fields, vec![], vec![]);
        assert_eq!((r.connections_with_requests, r.ended_most_at), (None, None));
    }

    #[test]
    fn statuses_times_and_peers_are_counted_exactly() {
        let f = LogFormat::compile(
            "t",
            "$status $request_time $upstream_addr $upstream_status $upstream_response_time $upstream_connect_time",
            "default",
        )
        .unwrap();
        let mut o = Outcomes::default();
        for _ in 0..98 {
            count(&mut o, &f, "200 1.502 127.0.0.1:81 200 1.500 0.000");
        }
        count(&mut o, &f, "504 60.001 127.0.0.1:81 504 60.000 0.001");
        count(
            &mut o,
            &f,
            "200 3.010 127.0.0.2:81, 127.0.0.1:81 502, 200 -, 1.500 3.000, 0.000",
        );
        count(&mut o, &f, "499 0.200 - - - -");
        let r = o.report(&f.fields, vec![], vec![]);
        assert_eq!(r.no_upstream_5xx, Some(0));
        count(&mut o, &f, "503 0.000 - - - -");
        assert_eq!(o.report(&f.fields, vec![], vec![]).no_upstream_5xx, Some(1));
        assert_eq!(r.lines, 101);
        assert_eq!(r.statuses["200"], 99);
        assert_eq!(r.classes["2xx"], 99);
        assert_eq!(r.classes["5xx"], 1);
        assert_eq!(r.classes["499"], 1);
        assert!(!r.classes.contains_key("4xx"));
        let t = r.request_time.unwrap();
        assert_eq!(t.count, 101);
        assert!((1.49..=1.52).contains(&t.p50_s), "{}", t.p50_s);
        assert!(t.max_s >= 59.9);
        assert_eq!(r.retried, 1);
        assert_eq!(r.retried_ok, 1);
        let p1 = r
            .upstreams
            .iter()
            .find(|p| p.peer == "127.0.0.1:81")
            .unwrap();
        assert_eq!(p1.tries, 100);
        assert_eq!(p1.statuses["200"], 99);
        assert_eq!(p1.statuses["504"], 1);
        let p2 = r
            .upstreams
            .iter()
            .find(|p| p.peer == "127.0.0.2:81")
            .unwrap();
        assert_eq!(p2.tries, 1);
        assert_eq!(p2.statuses["502"], 1);
        assert!(p2.response_time.is_none(), "`-` is no time");
        assert_eq!(p2.connect_time.as_ref().unwrap().count, 1);
        assert_eq!(r.lacks, vec!["$server_name or $host".to_string()]);
        // 1.502 s is in the (1024, 2048] ms bucket, 3.010 s in (2048, 4096].
        assert_eq!(t.log2_ms.iter().find(|(le, _)| *le == 2048).unwrap().1, 98);
        assert_eq!(t.log2_ms.iter().find(|(le, _)| *le == 4096).unwrap().1, 1);
    }

    /// nginx's `000` (no status sent) stays three digits, and a peer with no status
    /// logged has none rather than an empty one.
    /// Trial 21: `$upstream_response_time` 8 x 1.200, 38 x 1.201, 13 x 1.202, 1 x
    /// 1.203 s were said "p50 1.207 s, max 1.207 s" (the bucket's top). The max is
    /// exact, no quantile above it.
    #[test]
    fn the_longest_time_is_exact_and_no_quantile_exceeds_it() {
        let mut t = Times::default();
        for (ms, n) in [(1200, 8), (1201, 38), (1202, 13), (1203, 1)] {
            for _ in 0..n {
                t.add(ms);
            }
        }
        let r = t.report("$upstream_response_time").unwrap();
        assert_eq!(r.count, 60);
        assert_eq!(r.max_s, 1.203);
        assert!(r.p50_s >= 1.196 && r.p50_s <= 1.203, "{r:?}");
        assert!(r.p99_s <= 1.203, "{r:?}");
    }

    #[test]
    fn status_000_stays_000() {
        let f =
            LogFormat::compile("t", "$status $upstream_addr $upstream_status", "default").unwrap();
        let mut o = Outcomes::default();
        count(&mut o, &f, "000 127.0.0.1:81 -");
        let r = o.report(&f.fields, vec![], vec![]);
        assert_eq!(r.statuses["000"], 1);
        assert_eq!(r.classes["other"], 1);
        assert!(r.upstreams[0].statuses.is_empty());
    }

    /// Trial 11: nginx writes the upstream block's name where it found no live
    /// server: no peer, no try, and `peer, block` is no retry on another peer.
    #[test]
    fn an_upstream_block_name_is_no_peer_and_no_retry() {
        let f = LogFormat::compile(
            "t",
            "$status \"$upstream_addr\" \"$upstream_status\"",
            "default",
        )
        .unwrap();
        let mut o = Outcomes::default();
        count(
            &mut o,
            &f,
            "502 \"127.0.0.1:19511, 127.0.0.1:19512\" \"502, 502\"",
        );
        count(&mut o, &f, "502 \"127.0.0.1:19512, dead\" \"502, 502\"");
        count(&mut o, &f, "502 \"dead\" \"502\"");
        count(&mut o, &f, "200 \"unix:/run/a.sock\" \"200\"");
        let r = o.report(&f.fields, vec![], vec![]);
        assert_eq!((r.retried, r.no_live_server), (1, 2));
        let peers: Vec<(&str, u64)> = r
            .upstreams
            .iter()
            .map(|p| (p.peer.as_str(), p.tries))
            .collect();
        assert_eq!(
            peers,
            [
                ("127.0.0.1:19511", 1),
                ("127.0.0.1:19512", 2),
                ("unix:/run/a.sock", 1)
            ]
        );
    }

    #[test]
    fn names_and_codes_are_bounded() {
        let f = LogFormat::compile("s", "$host $status", "default").unwrap();
        let mut o = Outcomes::default();
        for i in 0..40 {
            count(&mut o, &f, &format!("h{i}.example {}", 100 + i * 10));
        }
        let r = o.report(&f.fields, vec![], vec![]);
        assert_eq!(r.servers.len(), MAX_NAMES + 1);
        assert_eq!(r.servers.last().unwrap().server, "other");
        assert_eq!(r.servers.iter().map(|s| s.requests).sum::<u64>(), 40);
        assert_eq!(r.classes.values().sum::<u64>(), 40);
    }
}
