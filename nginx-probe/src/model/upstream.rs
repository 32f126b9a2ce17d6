//! A worker's upstream connections over a period: connects, their errors and latency,
//! the fds held, from syscall tracepoints on the worker's main thread.

use std::collections::BTreeMap;

use nginx_probe_common::{sys, CONNECT_ERR_NAMES, UPSTREAM_CONNECT, UPSTREAM_FDS};
use serde::{Deserialize, Serialize};

use crate::model::{quantile_ns, round3, SlotStats, UPSTREAM_IDX};

/// Upstream connections of one worker over a period: connections the worker opened
/// itself (`socket()` + `connect()`, where client connections come from `accept4`),
/// from syscall tracepoints on the worker's main thread (`connect`, `getsockopt`,
/// `close`, `socket`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct UpstreamReport {
    /// `connect()` calls: upstream connections opened (also resolver/syslog sockets,
    /// which nginx connects too).
    pub connects: u64,
    /// Connects per second the detail layer was attached: over the period with
    /// `--detail full`, over the in-window seconds with `--detail sampled` (see
    /// [`detail_seconds`](crate::model::detail_seconds)).
    pub per_s: f64,
    /// Connects per request (None without requests); about 1.0 when upstream
    /// keepalive is off. Uses the report's request count, whose `source` says how exact.
    pub connects_per_request: Option<f64>,
    /// Connects that returned `EINPROGRESS` (the non-blocking connect started; the
    /// result comes later through `getsockopt(SO_ERROR)`).
    pub in_progress: u64,
    /// Connections established (connect returned 0, or SO_ERROR read 0).
    pub established: u64,
    /// Failed connects by errno (at the call or from SO_ERROR), every class present:
    /// ECONNREFUSED, ETIMEDOUT, EADDRNOTAVAIL, ENETUNREACH, EHOSTUNREACH, OTHER.
    pub errors: BTreeMap<String, u64>,
    /// Upstream fds closed before nginx learned the connect's result (its
    /// `proxy_connect_timeout` fired, or the client left).
    pub abandoned: u64,
    /// Connect latency as the worker sees it: from `connect()` to the return that
    /// completed it, or to the `getsockopt(SO_ERROR)` exit by which nginx learned the
    /// result. `latency_count` connects were timed; p50/p99 are log2-histogram
    /// estimates, ns.
    pub latency_count: u64,
    /// Sum of the timed connect latencies, ns.
    #[serde(default)]
    pub latency_total_ns: u64,
    /// p50 connect latency, ns (log2-histogram estimate).
    pub latency_p50_ns: u64,
    /// p99 connect latency, ns (log2-histogram estimate).
    pub latency_p99_ns: u64,
    /// The longest connect, ns.
    pub latency_max_ns: u64,
    /// log2 histogram of the connect latency, ns (entry `i`: `[2^i, 2^(i+1))`).
    pub latency_hist_log2_ns: Vec<u64>,
    /// Upstream fds closed in the period.
    pub closed: u64,
    /// Upstream fds open at the end of the period: connected since attach and not yet
    /// closed (pooled keepalive connections opened before attach are not seen). None
    /// for merged exited workers.
    pub fds_open: Option<u64>,
    /// `socket()` failures with EMFILE / ENFILE: "socket() failed (24: Too many open
    /// files) while connecting to upstream".
    pub socket_emfile: u64,
    /// `socket()` failures with ENFILE: "socket() failed (23: Too many open files in system)".
    pub socket_enfile: u64,
}

/// The upstream view of one worker's (delta) stats; `requests` is the report's
/// request count for the same period. `fds_open` is left None (it needs cumulative
/// counters: see [`upstream_fds_open`]). `detail_s`: the seconds the connects were
/// counted over ([`detail_seconds`](crate::model::detail_seconds)).
pub fn upstream_report(stats: &SlotStats, requests: u64, detail_s: f64) -> UpstreamReport {
    let c = &stats[UPSTREAM_IDX + UPSTREAM_CONNECT as usize];
    let f = &stats[UPSTREAM_IDX + UPSTREAM_FDS as usize];
    let sock = &stats[sys::SOCKET as usize];
    UpstreamReport {
        connects: c.count,
        per_s: if detail_s > 0.0 {
            round3(c.count as f64 / detail_s)
        } else {
            0.0
        },
        connects_per_request: (requests > 0).then(|| round3(c.count as f64 / requests as f64)),
        in_progress: f.timed,
        established: c.ret_sum,
        errors: CONNECT_ERR_NAMES
            .iter()
            .zip(c.errs.iter())
            .map(|(n, v)| (n.to_string(), *v))
            .collect(),
        abandoned: f.ret_sum,
        latency_count: c.timed,
        latency_total_ns: c.total_ns,
        latency_p50_ns: quantile_ns(&c.hist, 0.50, c.max_ns),
        latency_p99_ns: quantile_ns(&c.hist, 0.99, c.max_ns),
        latency_max_ns: c.max_ns,
        latency_hist_log2_ns: c.hist.to_vec(),
        closed: f.errors,
        fds_open: None,
        socket_emfile: sock.errs[nginx_probe_common::ErrClass::Emfile as usize],
        socket_enfile: sock.errs[nginx_probe_common::ErrClass::Enfile as usize],
    }
}

/// Upstream fds a worker holds, from its cumulative (not delta) stats: fds connected
/// since attach minus those closed.
pub fn upstream_fds_open(cumulative: &SlotStats) -> u64 {
    let f = &cumulative[UPSTREAM_IDX + UPSTREAM_FDS as usize];
    f.count.saturating_sub(f.errors)
}
