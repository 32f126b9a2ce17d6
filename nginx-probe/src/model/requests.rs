//! Requests and TLS handshakes in the report: where a request figure comes from
//! ([`RequestSource`]), a worker's requests (uprobes or unknown), the report's totals
//! (nginx's stub_status counters first), nginx's own counters and the TLS handshakes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    accepts_of, quantile_ns, round3, Report, SlotStats, LOOP_IDX, REQUESTS_IDX, SYSCALLS,
    TLS_DONE_IDX, TLS_IDX,
};

/// Where a request figure comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestSource {
    /// Exact, global: nginx's own stub_status counter `ngx_stat_requests`, read from the
    /// master's memory (HTTP/1.x requests and HTTP/2 streams alike; no per-request cost).
    StubStatus,
    /// Exact per worker: uprobes on `ngx_http_create_request` /
    /// `ngx_http_free_request` (`--uprobes`). On nginx 1.22 HTTP/2 streams pass through
    /// `ngx_http_create_request` too (300 curl --http2 --parallel streams: 300 calls).
    Uprobe,
    /// Exact, global, when nginx's counters are unavailable: the lines of its access
    /// logs, when the configuration and the reader prove every request is written at
    /// once to one file read (`access_log.counts_every_request`; no per-request cost).
    AccessLog,
    /// Estimated (older recordings: successful writev calls). Never feeds a verdict.
    #[serde(alias = "writev_estimate")]
    Estimate,
    /// Not known; the report says why.
    #[default]
    Unknown,
}

impl RequestSource {
    /// Whether figures from this source are exact enough to feed a verdict.
    pub fn exact(self) -> bool {
        matches!(
            self,
            RequestSource::StubStatus | RequestSource::Uprobe | RequestSource::AccessLog
        )
    }

    /// The name used in JSON and metrics labels.
    pub fn name(self) -> &'static str {
        match self {
            RequestSource::StubStatus => "stub_status",
            RequestSource::Uprobe => "uprobe",
            RequestSource::AccessLog => "access_log",
            RequestSource::Estimate => "estimate",
            RequestSource::Unknown => "unknown",
        }
    }
}

/// Why per-worker requests are unknown without `--uprobes`.
pub const PER_WORKER_UNKNOWN: &str =
    "per-worker requests need --uprobes; nginx's own counters are global (see the report's requests)";

/// Requests of one worker over a period.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RequestsReport {
    /// Requests (see `source`); None when unknown (see `unknown_reason`).
    pub count: Option<u64>,
    /// Where `count` comes from: `uprobe`, or `unknown` without `--uprobes`.
    pub source: RequestSource,
    /// Why `count` is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown_reason: Option<String>,
    /// Requests per second over the period; None when unknown.
    pub per_s: Option<f64>,
    /// Requests per accepted connection (keepalive reuse), None without accepts or
    /// when unknown.
    pub per_connection: Option<f64>,
    /// Request duration (create to free) estimates, ns; uprobes only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_ns: Option<u64>,
    /// p99 request duration, ns (log2-histogram estimate); uprobes only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_ns: Option<u64>,
    /// The longest request, ns; uprobes only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_ns: Option<u64>,
    /// Calls per request of every traced syscall that was called (the `strace -c` view);
    /// empty when the count is unknown.
    pub syscalls_per_request: BTreeMap<String, f64>,
}

/// Calls per request of every traced syscall that was called in `stats`.
pub fn syscalls_per_request(stats: &SlotStats, requests: u64) -> BTreeMap<String, f64> {
    let mut per_request = BTreeMap::new();
    if requests > 0 {
        for (i, def) in SYSCALLS.iter().enumerate() {
            if stats[i].count > 0 {
                let v = stats[i].count as f64 / requests as f64;
                per_request.insert(def.name.to_string(), round3(v));
            }
        }
    }
    per_request
}

/// Builds the requests view of one worker's (delta) stats over `duration_s` seconds.
/// Only `Uprobe` gives a per-worker count; any other source reads as unknown.
pub fn requests_report(
    stats: &SlotStats,
    source: RequestSource,
    duration_s: f64,
) -> RequestsReport {
    let req = &stats[REQUESTS_IDX];
    if source != RequestSource::Uprobe {
        return RequestsReport {
            count: None,
            source: RequestSource::Unknown,
            unknown_reason: Some(PER_WORKER_UNKNOWN.to_string()),
            per_s: None,
            per_connection: None,
            p50_ns: None,
            p99_ns: None,
            max_ns: None,
            syscalls_per_request: BTreeMap::new(),
        };
    }
    let count = req.count;
    let accepts = accepts_of(stats);
    let timed = req.timed > 0;
    RequestsReport {
        count: Some(count),
        source,
        unknown_reason: None,
        per_s: Some(if duration_s > 0.0 {
            count as f64 / duration_s
        } else {
            0.0
        }),
        per_connection: (accepts > 0).then(|| count as f64 / accepts as f64),
        p50_ns: timed.then(|| quantile_ns(&req.hist, 0.50, req.max_ns)),
        p99_ns: timed.then(|| quantile_ns(&req.hist, 0.99, req.max_ns)),
        max_ns: timed.then_some(req.max_ns),
        syscalls_per_request: syscalls_per_request(stats, count),
    }
}

/// All of nginx's requests over a period, with their source.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct RequestTotals {
    /// `stub_status` (nginx's own counter: preferred), `uprobe` (sum over workers; misses
    /// requests of exited workers merged in), or `unknown`.
    pub source: RequestSource,
    /// Requests in the period; None when unknown (see `reason`).
    pub count: Option<u64>,
    /// Requests per second.
    pub per_s: Option<f64>,
    /// Requests per connection the workers accepted (accept4/accept tracepoints); None
    /// without accepts, or when nginx's own hops are among them (see
    /// `per_connection_unknown`).
    pub per_connection: Option<f64>,
    /// Why `per_connection` is unknown though requests and accepts are known: nginx's
    /// own hops are counted beside its clients' ([`own_hops`]: `listen unix:`, a proxy
    /// to its own listener).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_connection_unknown: Option<String>,
    /// Why the count is unknown, or what it leaves out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Calls per request of every traced syscall, all workers together.
    #[serde(default)]
    pub syscalls_per_request: BTreeMap<String, f64>,
}

/// The report's request totals. Source, best first: nginx's own counter (`stub`),
/// the uprobes' per-worker counts summed (`per_worker == Uprobe`), the access log's
/// lines when it proves every request is logged (`access_log`), else unknown with
/// `stub_error` (why nginx's counters could not be read) as the reason. `all` is every
/// worker's (delta) stats summed, for accepts and the syscall mix.
pub fn request_totals(
    stub: Option<&StubStatusReport>,
    per_worker: RequestSource,
    stub_error: Option<&str>,
    access_log: Option<&super::access_log::AccessLogReport>,
    all: &SlotStats,
    duration_s: f64,
) -> RequestTotals {
    let (source, count, reason) = match (stub, per_worker) {
        (Some(s), _) => (RequestSource::StubStatus, Some(s.requests), None),
        (None, RequestSource::Uprobe) => (
            RequestSource::Uprobe,
            Some(all[REQUESTS_IDX].count),
            Some(format!(
                "nginx's counters unavailable ({}); the workers' uprobe counts summed",
                stub_error.unwrap_or("unknown reason")
            )),
        ),
        (None, _) => {
            let why = format!(
                "nginx's counters unavailable ({}); --uprobes counts them per worker",
                stub_error.unwrap_or("unknown reason")
            );
            match access_log.map(|a| (a.request_count(), a)) {
                Some((Some(n), _)) => (
                    RequestSource::AccessLog,
                    Some(n),
                    Some(format!("{why}; counted from nginx's access log: every request is written at once to one file read (no access_log off, if=, buffer= or log_subrequest on)")),
                ),
                Some((None, a)) => (
                    RequestSource::Unknown,
                    None,
                    Some(format!(
                        "{why}; the access log is no count either: {}",
                        a.not_every_request.as_deref().unwrap_or("not proven")
                    )),
                ),
                None => (RequestSource::Unknown, None, Some(why)),
            }
        }
    };
    let accepts = accepts_of(all);
    RequestTotals {
        source,
        count,
        per_s: count.map(|c| {
            if duration_s > 0.0 {
                round3(c as f64 / duration_s)
            } else {
                0.0
            }
        }),
        per_connection: count
            .filter(|_| accepts > 0)
            .map(|c| round3(c as f64 / accepts as f64)),
        per_connection_unknown: None,
        reason,
        syscalls_per_request: count
            .map(|c| syscalls_per_request(all, c))
            .unwrap_or_default(),
    }
}

/// TLS handshakes of all workers' client connections over a period: completed ones
/// counted by nginx's `ngx_ssl_ocsp_validate` (one uprobe hit per handshake, all the
/// time) where nginx exports it, else by libssl's `SSL_do_handshake` returning 1; the
/// rest from libssl's programs (uprobe + uretprobe on `SSL_do_handshake`, uprobe on
/// `SSL_free`), which with `--detail sampled` run only in the detail windows
/// ([`TlsReport::libssl_sampled`]). Per connection, not per request.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TlsReport {
    /// Handshakes completed on client connections (source: [`TlsReport::handshakes_from`]).
    pub handshakes: u64,
    /// Where `handshakes` were counted: `ngx_ssl_ocsp_validate` (nginx calls it once
    /// per completed handshake; connections nginx accepted only, TCP and QUIC) or
    /// `SSL_do_handshake` (libssl returned 1; a proxy's handshakes with its TLS
    /// upstreams included). Absent in recordings made before it was reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handshakes_from: Option<String>,
    /// Whether the libssl figures (`started`, `abandoned`, `timed` and the wall times,
    /// `calls`, `call_ns`) come from the detail windows only (`--detail sampled` with
    /// nginx's count): then they are a sample of the period, not its totals.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub libssl_sampled: bool,
    /// Where libssl's figures (`started`, `abandoned`, `timed` and the wall times,
    /// `calls`, `call_ns`) come from, i.e. where libssl's uprobes are attached:
    /// `shared_library` (the libssl the master maps, `libssl_path`), `nginx_binary`
    /// (OpenSSL linked into nginx: `SSL_do_handshake` found in the nginx binary's
    /// symbol table, `libssl_path` the binary), or `none` (nginx's count only; why in
    /// `libssl_unavailable`: the libssl figures are then 0, not measured). Absent in
    /// recordings made before it was reported (then a mapped libssl).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub libssl_from: Option<String>,
    /// The file libssl's uprobes are attached to: the libssl path as
    /// `/proc/<master>/maps` shows it, or the nginx binary's path
    /// (`/proc/<master>/exe`'s link). Absent with `libssl_from` `none`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub libssl_path: Option<String>,
    /// Why libssl's uprobes are not attached (`libssl_from` `none`): nginx maps no
    /// libssl and its binary has no `SSL_do_handshake` (stripped, or built without TLS),
    /// or the master has UDP listening sockets (HTTP/3 over QUIC: libssl's uprobes in
    /// its workers made HTTP/3 handshakes stall, newcomer trial 21).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub libssl_unavailable: Option<String>,
    /// Completed handshakes that libssl's programs timed (the wall-time figures are
    /// over these): all of them when libssl is traced all the time, those inside the
    /// windows when sampled.
    #[serde(default)]
    pub timed: u64,
    /// Handshakes started (first `SSL_do_handshake` call on an `SSL*`).
    pub started: u64,
    /// Handshakes abandoned: the `SSL*` was freed before completing (client gone,
    /// protocol error, timeout).
    pub abandoned: u64,
    /// Completed handshakes per accepted connection; None without accepts.
    pub per_connection: Option<f64>,
    /// Wall time of a handshake, first call to completion (client round trips
    /// included), ns: mean, p50, p99 (log2-histogram estimates), max.
    pub mean_ns: u64,
    /// p50, ns (log2-histogram estimate).
    pub p50_ns: u64,
    /// p99, ns (log2-histogram estimate).
    pub p99_ns: u64,
    /// The longest handshake, ns.
    pub max_ns: u64,
    /// `SSL_do_handshake` calls (several per handshake: WANT_READ retries).
    pub calls: u64,
    /// Time inside `SSL_do_handshake` calls, ns: the handshakes' CPU work (nginx's
    /// sockets are non-blocking, so the calls do not wait for the network), plus any
    /// time the worker waited for a CPU during them (see the workers' `run_delay_s`).
    pub call_ns: u64,
    /// `call_ns` per completed handshake, ns.
    pub call_ns_per_handshake: Option<u64>,
    /// `call_ns` over the workers' busy time (event loop outside epoll waits, same
    /// clock): the share of nginx's work that TLS set-up takes. None when idle, and
    /// with `--detail sampled` (handshakes are counted all the time, busy time only in
    /// the windows).
    pub share_of_worker_busy: Option<f64>,
}

/// Where libssl's uprobes are attached for one master: the origin of the libssl
/// figures of [`TlsReport`] (see [`TlsReport::libssl_from`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LibsslSource {
    /// The shared libssl the master maps (`libssl.so*` in `/proc/<pid>/maps`), by the
    /// path shown there.
    SharedLibrary(String),
    /// OpenSSL linked statically into nginx: `SSL_do_handshake` is in the symbol table
    /// of the nginx binary, by its path (`/proc/<pid>/exe`'s link).
    NginxBinary(String),
    /// Not attached (nginx's `ngx_ssl_ocsp_validate` counts the handshakes alone): why.
    Unavailable(String),
}

impl TlsReport {
    /// Sets `libssl_from`, `libssl_path` and `libssl_unavailable` from where libssl's
    /// uprobes are attached; None leaves them absent.
    pub fn set_libssl(&mut self, src: Option<&LibsslSource>) {
        let (from, path, why) = match src {
            None => return,
            Some(LibsslSource::SharedLibrary(p)) => ("shared_library", Some(p), None),
            Some(LibsslSource::NginxBinary(p)) => ("nginx_binary", Some(p), None),
            Some(LibsslSource::Unavailable(w)) => ("none", None, Some(w)),
        };
        self.libssl_from = Some(from.into());
        self.libssl_path = path.cloned();
        self.libssl_unavailable = why.cloned();
    }

    /// Completed handshakes the wall-time figures are over: [`TlsReport::timed`], or
    /// `handshakes` in a recording made before `timed` was reported (then libssl
    /// counted and timed every handshake).
    pub fn timed_handshakes(&self) -> u64 {
        if self.handshakes_from.is_none() {
            self.handshakes
        } else {
            self.timed
        }
    }
}

/// The TLS view of all workers' (delta) stats. `from_nginx`: completed handshakes
/// (`TLS_DONE_IDX`) were counted by `ngx_ssl_ocsp_validate`; `libssl_sampled`: libssl's
/// programs ran only in the detail windows.
pub fn tls_report(all: &SlotStats, from_nginx: bool, libssl_sampled: bool) -> TlsReport {
    let h = &all[TLS_IDX];
    let c = &all[TLS_IDX + 1];
    let done = all[TLS_DONE_IDX].count;
    let accepts = accepts_of(all);
    let busy = all[LOOP_IDX].total_ns;
    TlsReport {
        handshakes: done,
        handshakes_from: Some(
            if from_nginx {
                "ngx_ssl_ocsp_validate"
            } else {
                "SSL_do_handshake"
            }
            .into(),
        ),
        libssl_sampled,
        libssl_from: None,
        libssl_path: None,
        libssl_unavailable: None,
        timed: h.timed,
        started: h.count,
        abandoned: h.errors,
        per_connection: (accepts > 0).then(|| round3(done as f64 / accepts as f64)),
        mean_ns: h.total_ns.checked_div(h.timed).unwrap_or(0),
        p50_ns: quantile_ns(&h.hist, 0.50, h.max_ns),
        p99_ns: quantile_ns(&h.hist, 0.99, h.max_ns),
        max_ns: h.max_ns,
        calls: c.count,
        call_ns: c.total_ns,
        call_ns_per_handshake: c.total_ns.checked_div(h.timed),
        share_of_worker_busy: (busy > 0).then(|| round3(c.total_ns as f64 / busy as f64)),
    }
}

/// nginx's stub_status counters over a period (`collect::nginx_counters`: the
/// `ngx_stat_*` counters in nginx's shared memory, read from the master).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct StubStatusReport {
    /// Connections nginx accepted in the period.
    pub accepted: u64,
    /// Connections nginx handled in the period.
    pub handled: u64,
    /// `accepted - handled`: connections nginx closed at once for lack of
    /// worker_connections.
    pub dropped: u64,
    /// Requests in the period.
    pub requests: u64,
    /// Gauges at the end of the period: open client connections, those reading a
    /// request header, writing a response, idle in keepalive.
    pub active: u64,
    /// Connections reading a request header at the end of the period.
    pub reading: u64,
    /// Connections writing a response at the end of the period.
    pub writing: u64,
    /// Connections idle in keepalive at the end of the period.
    pub waiting: u64,
    /// Counter resets or moves seen (the growth of one read period may be missing).
    #[serde(default)]
    pub rebases: u64,
}

impl Report {
    /// A report recorded before the report-level `requests` existed: totals the
    /// workers' own counts under their source (`uprobe`, or `estimate` for the old
    /// writev estimate). Leaves a report that has totals alone.
    pub fn fill_legacy_requests(&mut self) {
        if self.requests.count.is_some() || self.requests.reason.is_some() {
            return;
        }
        let mut all = self.workers.iter().collect::<Vec<_>>();
        if let Some(m) = &self.exited_merged {
            all.push(&m.stats);
        }
        let Some(first) = all.first() else { return };
        let source = first.requests.source;
        let counts: Option<u64> = all.iter().map(|w| w.requests.count).sum();
        let Some(count) = counts else { return };
        let accepts: u64 = all.iter().map(|w| w.accepts).sum();
        self.requests = RequestTotals {
            source,
            count: Some(count),
            per_s: (self.duration_s > 0.0).then(|| round3(count as f64 / self.duration_s)),
            per_connection: (accepts > 0).then(|| round3(count as f64 / accepts as f64)),
            per_connection_unknown: None,
            reason: Some(
                "recorded before nginx's counters were read: the workers' counts summed".into(),
            ),
            syscalls_per_request: BTreeMap::new(),
        };
    }
}

/// The `listen unix:...` of the configuration's servers: connections on them are
/// accepted by the same `accept4()`s and their requests counted in nginx's same
/// counters as TCP clients' (nginx proxying to itself, a sidecar), so accepts and
/// requests per connection mix both (trial 9: 118k accepts of nginx's own unix hop
/// beside 124 TCP clients gave "2.0 requests per connection").
pub fn unix_listens(
    cfg: &crate::model::config::ConfigReport,
) -> impl Iterator<Item = &crate::model::config::ListenValue> {
    cfg.listens
        .iter()
        .filter(|l| l.address.starts_with("unix:"))
}

/// Why requests per connection are unknown when nginx listens on a unix socket
/// ([`unix_listens`]): the first one named; None without any.
pub fn unix_mix(cfg: Option<&crate::model::config::ConfigReport>) -> Option<String> {
    let l = unix_listens(cfg?).next()?;
    Some(format!(
        "nginx also accepts on a unix socket (listen {} in {} at {}): its accepts and requests count those connections beside the TCP clients', so per connection is unknown",
        l.address, l.scope, l.at
    ))
}

/// `(host, port)` of an nginx `listen` address or an `ip:port` peer: `127.0.0.1:80`,
/// `[::1]:80`, `80` and `*:80` (host `*`), `localhost` (port 80); None for `unix:`
/// or a port that is not a number.
fn host_port(a: &str) -> Option<(&str, u16)> {
    if a.starts_with("unix:") {
        return None;
    }
    if let Some(rest) = a.strip_prefix('[') {
        let (h, p) = rest.split_once("]:")?;
        return Some((h, p.parse().ok()?));
    }
    if let Ok(p) = a.parse::<u16>() {
        return Some(("*", p));
    }
    match a.rsplit_once(':') {
        Some((h, p)) => Some((h, p.parse().ok()?)),
        None => Some((a, 80)),
    }
}

/// Whether `peer` (`ip:port`) is nginx's own listener `listen`: same port, and the same
/// host, or a loopback peer on a wildcard or `localhost` listener (a wildcard listener's
/// other local addresses are not known here, and a remote peer on the same port is not
/// nginx).
fn is_own_listener(listen: &str, peer: &str, own_address: bool) -> bool {
    let (Some((lh, lp)), Some((ph, pp))) = (host_port(listen), host_port(peer)) else {
        return false;
    };
    let ip = ph.parse::<std::net::IpAddr>().ok();
    let loopback = own_address || ip.is_some_and(|ip| ip.is_loopback());
    let v6 = ip.is_some_and(|ip| ip.is_ipv6());
    // A wildcard listener takes its own family only (nginx's `[::]` is ipv6only by
    // default); `localhost` may be either.
    let wildcard = match lh {
        "*" | "0.0.0.0" => !v6,
        "::" => v6,
        "localhost" => true,
        _ => false,
    };
    lp == pp && (lh == ph || (loopback && wildcard))
}

/// Whether `peer` (an upstream peer's `ip:port`) reaches the listening socket bound
/// to `socket` (sock_diag's `ip:port`, canonical): the same address, or a wildcard
/// socket of the peer's family on the same port reached over loopback or one of the
/// namespace's own addresses (`own_address`).
fn reaches_socket(socket: &str, peer: &str, own_address: bool) -> bool {
    use std::net::SocketAddr;
    let (Ok(l), Ok(p)) = (socket.parse::<SocketAddr>(), peer.parse::<SocketAddr>()) else {
        return false;
    };
    l == p
        || (l.port() == p.port()
            && l.ip().is_unspecified()
            && l.is_ipv6() == p.is_ipv6()
            && (own_address || p.ip().is_loopback()))
}

/// Why nginx's own accepts and requests include its own hops, so that requests per
/// connection (and accepts per request) say nothing of its clients: a `listen unix:`
/// ([`unix_mix`]), or an upstream peer nginx connected to in the period
/// (`connections.upstream_peers`, lifecycle tracepoints) that is one of its own TCP
/// listeners: a loaded `listen` of the configuration (quoted with its `file:line`),
/// else one of the listening sockets nginx holds (`listen`, sock_diag: canonical
/// addresses, so a listen written as a host name or a non-canonical IPv6 address is
/// matched too, and without the configuration). nginx proxying to its own server
/// block counts each proxied request twice (trial 10: 2.0 per connection for clients
/// that sent 9,090 each); a peer at one of the namespace's own addresses
/// (`PeerLifecycle::own_address`) reaches a wildcard listener as loopback does. None
/// otherwise.
pub fn own_hops(
    cfg: Option<&crate::model::config::ConfigReport>,
    connections: Option<&crate::model::connections::ConnectionsReport>,
    listen: &[crate::model::ListenReport],
) -> Option<String> {
    if let Some(why) = unix_mix(cfg) {
        return Some(why);
    }
    let peers = &connections?.upstream_peers;
    peers.iter().filter(|p| p.connects > 0).find_map(|p| {
        let said = |l: String| {
            format!(
                "nginx proxies to its own listener {} ({} connects in the period, lifecycle tracepoints; {l}): its accepts and requests count each such hop beside the clients', so per connection is unknown",
                p.peer, p.connects
            )
        };
        let configured = cfg.and_then(|cfg| {
            cfg.listens
                .iter()
                .find(|l| !l.not_loaded && is_own_listener(&l.address, &p.peer, p.own_address))
        });
        if let Some(l) = configured {
            return Some(said(format!("listen {} in {} at {}", l.address, l.scope, l.at)));
        }
        let socket = listen
            .iter()
            .find(|l| reaches_socket(&l.addr, &p.peer, p.own_address))?;
        Some(said(format!(
            "nginx's listening socket {}, sock_diag",
            socket.addr
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests::stats_from;
    use crate::model::SLOT_STATS;
    use nginx_probe_common::{sys, SyscallStats};

    /// A worker's counters: 10 accepts and closes, 100 writev and 100 write, 80
    /// requests of 1 ms from the uprobes.
    fn slot() -> SlotStats {
        let mut slot: SlotStats = [SyscallStats::ZERO; SLOT_STATS];
        slot[sys::ACCEPT4 as usize].count = 10;
        slot[crate::model::ACCEPTED_IDX].count = 10;
        slot[sys::WRITEV as usize].count = 100;
        slot[sys::WRITE as usize].count = 100;
        slot[sys::CLOSE as usize].count = 10;
        slot[REQUESTS_IDX] = stats_from(&[1_000_000; 80]);
        slot[REQUESTS_IDX].count = 80;
        slot
    }

    #[test]
    fn requests_per_worker_are_uprobes_or_unknown() {
        let slot = slot();
        // Without uprobes, a worker's requests are unknown, not a writev count.
        let unk = requests_report(&slot, RequestSource::StubStatus, 10.0);
        assert_eq!(unk.count, None);
        assert_eq!(unk.source, RequestSource::Unknown);
        assert_eq!(unk.unknown_reason.as_deref(), Some(PER_WORKER_UNKNOWN));
        assert!(unk.syscalls_per_request.is_empty());
        let up = requests_report(&slot, RequestSource::Uprobe, 10.0);
        assert_eq!(up.count, Some(80));
        assert_eq!(up.per_s, Some(8.0));
        assert_eq!(up.per_connection, Some(8.0));
        assert_eq!(up.syscalls_per_request["writev"], 1.25);
        assert_eq!(up.max_ns, Some(1_000_000));
        assert!(up.p50_ns.unwrap() >= 524_288 && up.p50_ns.unwrap() <= 1_000_000);
    }

    #[test]
    fn totals_name_their_source() {
        let slot = slot();
        // Totals: nginx's counter first, then the uprobes, else unknown with the reason.
        let stub = StubStatusReport {
            accepted: 10,
            handled: 10,
            requests: 100,
            ..Default::default()
        };
        let t = request_totals(Some(&stub), RequestSource::Uprobe, None, None, &slot, 10.0);
        assert_eq!(
            (t.source, t.count, t.per_s),
            (RequestSource::StubStatus, Some(100), Some(10.0))
        );
        assert_eq!(t.per_connection, Some(10.0));
        assert_eq!(t.syscalls_per_request["write"], 1.0);
        let t = request_totals(
            None,
            RequestSource::Uprobe,
            Some("no symbols"),
            None,
            &slot,
            10.0,
        );
        assert_eq!((t.source, t.count), (RequestSource::Uprobe, Some(80)));
        let t = request_totals(
            None,
            RequestSource::Unknown,
            Some("no symbols"),
            None,
            &slot,
            10.0,
        );
        assert_eq!(
            (t.source, t.count, t.per_s),
            (RequestSource::Unknown, None, None)
        );
        assert!(t.reason.unwrap().contains("no symbols"));
        // Older recordings said writev_estimate: read as an estimate.
        let old: RequestSource = serde_json::from_str("\"writev_estimate\"").unwrap();
        assert_eq!(old, RequestSource::Estimate);
        assert!(!old.exact());
    }

    #[test]
    fn without_the_counters_an_access_log_of_every_request_is_the_count() {
        let slot = slot();
        // Without the counters, an access log that logs every request is the count
        // (and the per-request syscall mix is over it); one that does not says why.
        let mut log = super::super::access_log::AccessLogReport {
            lines: 40,
            counts_every_request: true,
            ..Default::default()
        };
        let from_log = |log: &super::super::access_log::AccessLogReport| {
            request_totals(
                None,
                RequestSource::Unknown,
                Some("no symbols"),
                Some(log),
                &slot,
                10.0,
            )
        };
        let t = from_log(&log);
        assert_eq!(
            (t.source, t.count, t.per_s),
            (RequestSource::AccessLog, Some(40), Some(4.0))
        );
        assert!(!t.syscalls_per_request.is_empty());
        log.counts_every_request = false;
        log.not_every_request = Some("access_log off (n.conf:9) leaves requests unlogged".into());
        let t = from_log(&log);
        assert_eq!((t.source, t.count), (RequestSource::Unknown, None));
        assert!(t
            .reason
            .unwrap()
            .ends_with("; the access log is no count either: access_log off (n.conf:9) leaves requests unlogged"));
    }

    #[test]
    fn nginx_proxying_to_its_own_listener_is_an_own_hop() {
        assert!(is_own_listener("127.0.0.1:19591", "127.0.0.1:19591", false));
        assert!(is_own_listener("19591", "127.0.0.1:19591", false));
        assert!(is_own_listener("*:19591", "127.0.0.1:19591", false));
        assert!(is_own_listener("[::]:19591", "[::1]:19591", false));
        assert!(
            !is_own_listener("[::]:19591", "127.0.0.1:19591", false),
            "ipv6only"
        );
        assert!(!is_own_listener("*:19591", "[::1]:19591", false));
        assert!(is_own_listener("localhost:19591", "127.0.0.1:19591", false));
        assert!(
            !is_own_listener("*:80", "10.0.0.5:80", false),
            "a remote peer"
        );
        assert!(!is_own_listener(
            "127.0.0.1:19590",
            "127.0.0.1:19591",
            false
        ));
        assert!(!is_own_listener("unix:/x.sock", "127.0.0.1:80", false));
        let mut cfg = crate::model::config::ConfigReport::default();
        cfg.listens.push(crate::model::config::ListenValue {
            scope: "server b".into(),
            address: "127.0.0.1:19591".into(),
            at: "/x/nginx.conf:9".into(),
            ..Default::default()
        });
        let mut c = crate::model::connections::ConnectionsReport::default();
        c.upstream_peers
            .push(crate::model::upstream_lifecycle::PeerLifecycle {
                peer: "127.0.0.1:19591".into(),
                connects: 91_002,
                ..Default::default()
            });
        let why = own_hops(Some(&cfg), Some(&c), &[]).expect("an own hop");
        assert!(
            why.starts_with("nginx proxies to its own listener 127.0.0.1:19591 (91002 connects"),
            "{why}"
        );
        c.upstream_peers[0].peer = "127.0.0.2:19591".into();
        assert_eq!(own_hops(Some(&cfg), Some(&c), &[]), None);
        assert_eq!(own_hops(None, Some(&c), &[]), None);
        // nginx's listening sockets (sock_diag, canonical) find what the configuration
        // does not: a listen written as a host name, or no configuration read.
        let socket = |addr: &str| crate::model::ListenReport {
            addr: addr.into(),
            ..Default::default()
        };
        c.upstream_peers[0].peer = "[::1]:19592".into();
        let why = own_hops(None, Some(&c), &[socket("[::]:19592")]).expect("an own hop");
        assert!(
            why.contains("(91002 connects in the period, lifecycle tracepoints; nginx's listening socket [::]:19592, sock_diag)"),
            "{why}"
        );
        assert!(
            own_hops(None, Some(&c), &[socket("0.0.0.0:19592")]).is_none(),
            "ipv6only"
        );
        assert!(own_hops(None, Some(&c), &[socket("[::1]:19592")]).is_some());
        assert!(own_hops(None, Some(&c), &[socket("[::1]:19593")]).is_none());
        c.upstream_peers[0].peer = "10.0.0.5:19592".into();
        assert!(
            own_hops(None, Some(&c), &[socket("0.0.0.0:19592")]).is_none(),
            "a remote peer"
        );
        assert!(own_hops(None, Some(&c), &[socket("10.0.0.5:19592")]).is_some());
        // The peer is one of the host's (the namespace's) own addresses: nginx's
        // wildcard listener takes it as it takes loopback; the configured `*:19592`
        // as well.
        c.upstream_peers[0].own_address = true;
        let why = own_hops(None, Some(&c), &[socket("0.0.0.0:19592")]).expect("an own hop");
        assert!(
            why.contains("nginx's listening socket 0.0.0.0:19592"),
            "{why}"
        );
        assert!(is_own_listener("*:19592", "10.0.0.5:19592", true));
        assert!(!is_own_listener("127.0.0.1:19592", "10.0.0.5:19592", true));
    }
}
