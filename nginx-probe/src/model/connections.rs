//! Client connection lifecycle per nginx listening port: who closed first, the idle
//! time before nginx's closes, resets, listeners closed. Built from the cumulative
//! in-kernel counters of `nginx_probe_common::lifecycle` (sources: tracepoints
//! `sock:inet_sock_set_state`, `tcp:tcp_send_reset`, `tcp:tcp_receive_reset`,
//! `tcp:tcp_destroy_sock`; idle time from the socket's `tcp_sock.lsndtime` and
//! `icsk_ack.lrcvtime`, jiffies, at nginx's close). Pure.

use std::collections::BTreeMap;

use nginx_probe_common::lifecycle::{self as lc, LC_IDLE_BUCKETS, LC_PER_PORT, LC_REASONS};
use serde::{Deserialize, Serialize};

use crate::model::listener_closes::{ListenerClose, ListenerClosesMerged};

/// Idle times of nginx's closes "sit at one value" when the longest and the shortest
/// since attach differ by at most this share of their mean (or by [`PINNED_SLACK_MS`]).
pub const PINNED_SPREAD: f64 = 0.10;
/// Absolute slack for [`PINNED_SPREAD`], ms (a few jiffies at HZ 250).
pub const PINNED_SLACK_MS: u64 = 12;
/// Fewest measured nginx closes before a pinned value is claimed.
pub const PINNED_MIN_CLOSES: u64 = 3;

/// Cumulative counters of every counted port at one instant (summed over CPUs; the
/// max/min entries combined by max), as read from `LC_STATS`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LifecycleRaw {
    /// Local port (host order) -> its `LC_PER_PORT` counters.
    pub ports: BTreeMap<u16, Vec<u64>>,
}

/// What the collector knows about how the counters were made (constant for a run).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LifecycleMeta {
    /// The kernel's HZ and where it was read; None: idle time not measured.
    pub hz: Option<(u64, String)>,
    /// Why idle time is not measured (BTF offsets or HZ unknown), when it is not.
    pub idle_unknown: Option<String>,
    /// `sk_rst_reason` names by value, from the tracepoint's format file.
    pub reason_names: Vec<String>,
    /// nginx ports not counted (more than `LC_MAX_PORTS`).
    pub ports_not_counted: u64,
    /// The programs attached are the raw tracepoints ([`RAW_SOURCE`]), not the
    /// perf-event ones ([`SOURCE`]).
    pub raw: bool,
    /// Why the raw-tracepoint programs are not the source (struct offsets not in the
    /// kernel's BTF, or the kernel refused them), when they are not.
    pub raw_unavailable: Option<String>,
    /// Why closes by exiting workers are not told apart from nginx's
    /// (`task_struct.flags` not in the kernel's BTF), when they are not.
    pub worker_exit_unknown: Option<String>,
    /// Why no lifecycle program is attached at all when the user left them out
    /// (`--no-lifecycle`): nothing is counted and the report has no `connections`.
    pub not_traced: Option<String>,
}

/// Idle time before nginx closed connections that were established (kept-alive
/// connections waiting for their next request, or fresh ones), ms: the time since the
/// last data segment sent or received on the socket at nginx's `close()`/`shutdown()`
/// (`tcp_sock.lsndtime`, `icsk_ack.lrcvtime`); when nginx itself sent data at most one
/// jiffy before the close (a TLS close_notify, an HTTP/2 GOAWAY, a response closed at
/// once), the time since the client's last data ([`IdleReport::after_nginx_wrote`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct IdleReport {
    /// Closes measured in the period.
    pub count: u64,
    /// Of `count`, closes nginx had sent data at most one jiffy before (TLS
    /// close_notify, HTTP/2 GOAWAY, or a response closed at once): their idle time is
    /// the time since the client's last data, not since nginx's final words.
    #[serde(default)]
    pub after_nginx_wrote: u64,
    /// Mean idle time, ms.
    pub mean_ms: f64,
    /// p50 / p99 estimated from the log2 histogram, ms (within a factor of 2), kept
    /// between the shortest and longest idle time since attach.
    pub p50_ms: u64,
    /// p99, ms (log2-histogram estimate).
    pub p99_ms: u64,
    /// Shortest and longest idle time since attach, ms (not per period).
    pub min_ms_since_attach: u64,
    /// Longest idle time since attach, ms (not per period).
    pub max_ms_since_attach: u64,
    /// The value nginx's closes sit at, ms: set when every measured close since attach
    /// lies within [`PINNED_SPREAD`] of their mean (at least [`PINNED_MIN_CLOSES`]); the
    /// mean of the period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_ms: Option<f64>,
    /// log2 histogram, ms: bucket `i` counts `2^i <= ms < 2^(i+1)` (bucket 0 holds 0).
    pub hist: Vec<u64>,
}

/// One listening port's client connections in the period.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PortLifecycle {
    /// Local port.
    pub port: u16,
    /// Connections established (`SYN_RECV -> ESTABLISHED`).
    pub established: u64,
    /// nginx closed first (`ESTABLISHED -> FIN_WAIT1` in a worker's `close()` or
    /// `shutdown()`).
    pub closed_by_nginx: u64,
    /// Closed first on nginx's side by the kernel as the worker holding them exited
    /// (`ESTABLISHED -> FIN_WAIT1` in a task with `PF_EXITING`: a worker killed,
    /// crashed, or ending without closing them); not in `closed_by_nginx`.
    #[serde(default)]
    pub closed_by_worker_exit: u64,
    /// The client closed first (`ESTABLISHED -> CLOSE_WAIT`).
    pub closed_by_client: u64,
    /// Ended by a reset while established (`ESTABLISHED -> CLOSE`, either side).
    pub closed_by_reset: u64,
    /// Resets received (`tcp:tcp_receive_reset`).
    pub resets_received: u64,
    /// Resets sent from the port (`tcp:tcp_send_reset`), socket or not.
    pub resets_sent: u64,
    /// Resets sent by the kernel's reason (`sk_rst_reason`), non-zero ones.
    pub resets_sent_by_reason: BTreeMap<String, u64>,
    /// Listening sockets of the port closed (`LISTEN -> CLOSE`: a reload that dropped
    /// a `reuseport` socket, a port removed from the config).
    pub listeners_closed: u64,
    /// Resets sent to connections queued on a listener as it was closed.
    pub resets_of_closed_listener_queue: u64,
    /// Idle time before nginx's closes; absent when not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_before_nginx_close: Option<IdleReport>,
}

/// Client connections per listening port (JSON `connections`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ConnectionsReport {
    /// Where the numbers come from.
    pub source: String,
    /// Ports with anything in the period, in port order.
    pub ports: Vec<PortLifecycle>,
    /// The kernel's HZ used to turn jiffies into ms, and where it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hz: Option<u64>,
    /// Where HZ was read (the kernel's config, or measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hz_source: Option<String>,
    /// Why idle time before close is unknown, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_unknown: Option<String>,
    /// Why closes by exiting workers are counted as nginx's (`task_struct.flags`
    /// unknown), when they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_exit_unknown: Option<String>,
    /// nginx listening ports not counted (beyond the first 16).
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub ports_not_counted: u64,
    /// Why the counts come from the perf-event tracepoints and not from the raw
    /// tracepoints (the cheaper default), when they do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_unavailable: Option<String>,
    /// nginx's listening sockets closed, one event per port and refresh that saw any
    /// (the summary: since attach; an interval: the events its refreshes saw), with
    /// the reload each followed and the resets of their queued connections (see
    /// [`crate::model::listener_closes`]); at most
    /// [`crate::model::listener_closes::MAX_LISTENER_CLOSES`] since attach.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listener_closes: Vec<ListenerClose>,
    /// The period's listener-close events merged away to keep the list bounded (the
    /// oldest since attach), summed; absent when none were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listener_closes_merged: Option<ListenerClosesMerged>,
}

/// Source line of [`ConnectionsReport::source`] from the perf-event tracepoints (they
/// read the record the kernel builds per hit).
pub const SOURCE: &str = "tracepoints sock:inet_sock_set_state, tcp:tcp_send_reset, tcp:tcp_receive_reset on sockets whose local port is one of nginx's listening ports";

/// Source line of [`ConnectionsReport::source`] from the raw tracepoints (the socket
/// read with offsets from the kernel's BTF; no record built per hit).
pub const RAW_SOURCE: &str = "raw tracepoints inet_sock_set_state, tcp_send_reset, tcp_receive_reset on sockets whose local port is one of nginx's listening ports (struct sock read with offsets from the kernel's BTF)";

impl ConnectionsReport {
    /// Sum over ports (idle: counts and histogram added, pinned kept only when every
    /// port with closes has the same pinned value within [`PINNED_SPREAD`]).
    pub fn total(&self) -> PortLifecycle {
        let mut t = PortLifecycle::default();
        let mut idle: Option<IdleReport> = None;
        let mut pinned: Vec<f64> = Vec::new();
        let mut unpinned = false;
        for p in &self.ports {
            t.established += p.established;
            t.closed_by_nginx += p.closed_by_nginx;
            t.closed_by_worker_exit += p.closed_by_worker_exit;
            t.closed_by_client += p.closed_by_client;
            t.closed_by_reset += p.closed_by_reset;
            t.resets_received += p.resets_received;
            t.resets_sent += p.resets_sent;
            t.listeners_closed += p.listeners_closed;
            t.resets_of_closed_listener_queue += p.resets_of_closed_listener_queue;
            for (k, v) in &p.resets_sent_by_reason {
                *t.resets_sent_by_reason.entry(k.clone()).or_default() += v;
            }
            if let Some(i) = p.idle_before_nginx_close.as_ref().filter(|i| i.count > 0) {
                match i.pinned_ms {
                    Some(v) => pinned.push(v),
                    None => unpinned = true,
                }
                let acc = idle.get_or_insert_with(|| IdleReport {
                    hist: vec![0; LC_IDLE_BUCKETS],
                    min_ms_since_attach: u64::MAX,
                    ..Default::default()
                });
                let sum = acc.mean_ms * acc.count as f64 + i.mean_ms * i.count as f64;
                acc.count += i.count;
                acc.after_nginx_wrote += i.after_nginx_wrote;
                acc.mean_ms = sum / acc.count as f64;
                acc.min_ms_since_attach = acc.min_ms_since_attach.min(i.min_ms_since_attach);
                acc.max_ms_since_attach = acc.max_ms_since_attach.max(i.max_ms_since_attach);
                for (a, b) in acc.hist.iter_mut().zip(&i.hist) {
                    *a += b;
                }
            }
        }
        if let Some(acc) = idle.as_mut() {
            let (lo, hi) = (acc.min_ms_since_attach, acc.max_ms_since_attach);
            acc.p50_ms = quantile_ms(&acc.hist, 0.5, lo, hi);
            acc.p99_ms = quantile_ms(&acc.hist, 0.99, lo, hi);
            acc.mean_ms = (acc.mean_ms * 1000.0).round() / 1000.0;
            let lo = pinned.iter().cloned().fold(f64::MAX, f64::min);
            let hi = pinned.iter().cloned().fold(0.0, f64::max);
            if !unpinned && !pinned.is_empty() && hi - lo <= PINNED_SPREAD * hi {
                acc.pinned_ms = Some(acc.mean_ms);
            }
        }
        t.idle_before_nginx_close = idle;
        t
    }
}

/// Quantile `q` of an ms log2 histogram (see [`crate::model::quantile_ns`]), kept
/// inside [`min_ms`, `max_ms`]: the shortest and longest idle time since attach bound
/// every sample of any period, so its quantiles too.
fn quantile_ms(hist: &[u64], q: f64, min_ms: u64, max_ms: u64) -> u64 {
    let v = crate::model::quantile_ns(hist, q, max_ms);
    if min_ms <= max_ms {
        v.clamp(min_ms, max_ms)
    } else {
        v
    }
}

/// Whether idle times between `min` and `max` ms (mean `mean`) sit at one value.
pub fn pinned(min: u64, max: u64, mean: f64, count: u64) -> bool {
    count >= PINNED_MIN_CLOSES
        && max >= min
        && (max - min) as f64 <= (PINNED_SPREAD * mean).max(PINNED_SLACK_MS as f64)
}

/// The report of the period between `prev` (None = attach) and `cur`; None when no
/// port had anything in the period (the JSON then has no `connections`).
pub fn connections_report(
    cur: &LifecycleRaw,
    prev: Option<&LifecycleRaw>,
    meta: &LifecycleMeta,
) -> Option<ConnectionsReport> {
    let mut ports = Vec::new();
    for (&port, c) in &cur.ports {
        if c.len() != LC_PER_PORT {
            continue;
        }
        let p = prev.and_then(|p| p.ports.get(&port));
        let r = port_lifecycle(port, c, p.map(|p| p.as_slice()), meta);
        let any = r.established
            + r.closed_by_nginx
            + r.closed_by_worker_exit
            + r.closed_by_client
            + r.closed_by_reset
            + r.resets_received
            + r.resets_sent
            + r.listeners_closed
            > 0;
        if any {
            ports.push(r);
        }
    }
    if ports.is_empty() {
        return None;
    }
    Some(ConnectionsReport {
        ports,
        ..empty_report(meta)
    })
}

/// A report with no port counted in the period, how the counts are made from `meta`:
/// what a period whose only news is a listener close seen by a refresh (its counters
/// read by the period before) carries them in.
pub fn empty_report(meta: &LifecycleMeta) -> ConnectionsReport {
    ConnectionsReport {
        source: if meta.raw { RAW_SOURCE } else { SOURCE }.to_string(),
        ports: Vec::new(),
        hz: meta.hz.as_ref().map(|h| h.0),
        hz_source: meta.hz.as_ref().map(|h| h.1.clone()),
        idle_unknown: meta.idle_unknown.clone(),
        worker_exit_unknown: meta.worker_exit_unknown.clone(),
        ports_not_counted: meta.ports_not_counted,
        raw_unavailable: meta.raw_unavailable.clone(),
        listener_closes: Vec::new(),
        listener_closes_merged: None,
    }
}

/// One port's connection lifecycle over the period: the change of its counters `c`
/// since `prev` (None: attach), its resets by reason, its idle times before nginx closed.
fn port_lifecycle(
    port: u16,
    c: &[u64],
    prev: Option<&[u64]>,
    meta: &LifecycleMeta,
) -> PortLifecycle {
    let d = |i: usize| c[i].saturating_sub(prev.and_then(|p| p.get(i).copied()).unwrap_or(0));
    let mut by_reason = BTreeMap::new();
    for r in 0..LC_REASONS {
        let n = d(lc::RST_BY_REASON + r);
        if n > 0 {
            let name = meta
                .reason_names
                .get(r)
                .cloned()
                .unwrap_or_else(|| format!("reason_{r}"));
            *by_reason.entry(name).or_default() += n;
        }
    }
    let idle = (meta.hz.is_some() && meta.idle_unknown.is_none()).then(|| idle_report(c, &d));
    PortLifecycle {
        port,
        established: d(lc::ESTABLISHED),
        closed_by_nginx: d(lc::CLOSED_BY_NGINX),
        closed_by_worker_exit: d(lc::CLOSED_BY_WORKER_EXIT),
        closed_by_client: d(lc::CLOSED_BY_CLIENT),
        closed_by_reset: d(lc::CLOSED_BY_RESET),
        resets_received: d(lc::RST_RECEIVED),
        resets_sent: d(lc::RST_SENT),
        resets_sent_by_reason: by_reason,
        listeners_closed: d(lc::LISTENERS_CLOSED),
        resets_of_closed_listener_queue: d(lc::RST_CLOSED_LISTENER),
        idle_before_nginx_close: idle.filter(|i| i.count > 0),
    }
}

/// The idle times before nginx closed (counters `c`, their change over the period by
/// `d`): quantiles from the log2 histogram, min and max since attach, and whether they
/// sit at one value.
fn idle_report(c: &[u64], d: &dyn Fn(usize) -> u64) -> IdleReport {
    let count = d(lc::IDLE_COUNT);
    let hist: Vec<u64> = (0..LC_IDLE_BUCKETS).map(|b| d(lc::IDLE_HIST + b)).collect();
    let max = c[lc::IDLE_MAX_MS];
    let min = if c[lc::IDLE_INV_MIN_MS] == 0 {
        0
    } else {
        !c[lc::IDLE_INV_MIN_MS]
    };
    let mean = if count > 0 {
        d(lc::IDLE_SUM_MS) as f64 / count as f64
    } else {
        0.0
    };
    IdleReport {
        count,
        after_nginx_wrote: d(lc::IDLE_AFTER_NGINX_WROTE),
        mean_ms: (mean * 1000.0).round() / 1000.0,
        p50_ms: quantile_ms(&hist, 0.5, min, max),
        p99_ms: quantile_ms(&hist, 0.99, min, max),
        min_ms_since_attach: min,
        max_ms_since_attach: max,
        pinned_ms: (count > 0 && pinned(min, max, mean, c[lc::IDLE_COUNT]))
            .then_some((mean * 1000.0).round() / 1000.0),
        hist,
    }
}

/// "2.0 s" / "350 ms": an idle time for people.
pub fn fmt_ms(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else {
        format!("{ms:.0} ms")
    }
}

/// A report with every field set (port 80: 10 closes by nginx pinned at 2.0 s, 3 by
/// the client, 1 reset each way, a listener closed), for render tests.
#[cfg(test)]
pub(crate) fn sample_report() -> ConnectionsReport {
    let mut v = vec![0; LC_PER_PORT];
    for (i, n) in [
        (lc::ESTABLISHED, 14),
        (lc::CLOSED_BY_NGINX, 10),
        (lc::CLOSED_BY_CLIENT, 3),
        (lc::CLOSED_BY_RESET, 1),
        (lc::RST_RECEIVED, 1),
        (lc::RST_SENT, 1),
        (lc::RST_BY_REASON + 14, 1),
        (lc::LISTENERS_CLOSED, 1),
        (lc::RST_CLOSED_LISTENER, 1),
        (lc::IDLE_COUNT, 10),
        (lc::IDLE_SUM_MS, 20_000),
        (lc::IDLE_MAX_MS, 2000),
        (lc::IDLE_INV_MIN_MS, !2000u64),
        (lc::IDLE_HIST + 10, 10),
    ] {
        v[i] = n;
    }
    let raw = LifecycleRaw {
        ports: [(80, v)].into_iter().collect(),
    };
    let meta = LifecycleMeta {
        hz: Some((250, "test".into())),
        ..Default::default()
    };
    connections_report(&raw, None, &meta).expect("counted")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(port: u16, set: &[(usize, u64)]) -> LifecycleRaw {
        let mut v = vec![0; LC_PER_PORT];
        for &(i, n) in set {
            v[i] = n;
        }
        LifecycleRaw {
            ports: [(port, v)].into_iter().collect(),
        }
    }

    fn meta() -> LifecycleMeta {
        LifecycleMeta {
            hz: Some((250, "test".into())),
            ..Default::default()
        }
    }

    #[test]
    fn nothing_counted_is_no_report() {
        assert_eq!(connections_report(&raw(80, &[]), None, &meta()), None);
    }

    #[test]
    fn ten_closes_at_two_seconds_are_pinned() {
        let cur = raw(
            80,
            &[
                (lc::CLOSED_BY_NGINX, 10),
                (lc::IDLE_COUNT, 10),
                (lc::IDLE_SUM_MS, 20_040),
                (lc::IDLE_MAX_MS, 2008),
                (lc::IDLE_INV_MIN_MS, !2000u64),
                (lc::IDLE_HIST + 10, 10),
            ],
        );
        let r = connections_report(&cur, None, &meta()).unwrap();
        let t = r.total();
        assert_eq!(t.closed_by_nginx, 10);
        let i = t.idle_before_nginx_close.unwrap();
        assert_eq!(i.pinned_ms, Some(2004.0));
        assert_eq!(fmt_ms(i.pinned_ms.unwrap()), "2.0 s");
        assert!(i.p50_ms >= 2000 && i.p50_ms <= 2008, "{}", i.p50_ms);
    }

    #[test]
    fn closes_by_exiting_workers_and_after_nginx_wrote_are_their_own_counts() {
        let cur = raw(
            443,
            &[
                (lc::CLOSED_BY_NGINX, 4),
                (lc::CLOSED_BY_WORKER_EXIT, 6),
                (lc::IDLE_COUNT, 4),
                (lc::IDLE_AFTER_NGINX_WROTE, 4),
                (lc::IDLE_SUM_MS, 8_000),
                (lc::IDLE_MAX_MS, 2000),
                (lc::IDLE_INV_MIN_MS, !2000u64),
                (lc::IDLE_HIST + 10, 4),
            ],
        );
        let prev = raw(443, &[(lc::CLOSED_BY_WORKER_EXIT, 1)]);
        let t = connections_report(&cur, Some(&prev), &meta())
            .unwrap()
            .total();
        assert_eq!((t.closed_by_nginx, t.closed_by_worker_exit), (4, 5));
        let i = t.idle_before_nginx_close.unwrap();
        assert_eq!((i.count, i.after_nginx_wrote), (4, 4));
        assert_eq!(i.pinned_ms, Some(2000.0));
    }

    #[test]
    fn spread_idle_times_are_not_pinned() {
        assert!(!pinned(10, 2000, 1000.0, 10));
        assert!(pinned(2000, 2008, 2004.0, 10));
        assert!(!pinned(2000, 2008, 2004.0, 2));
    }

    #[test]
    fn deltas_and_reasons() {
        let prev = raw(80, &[(lc::RST_SENT, 2), (lc::RST_BY_REASON + 1, 2)]);
        let cur = raw(80, &[(lc::RST_SENT, 5), (lc::RST_BY_REASON + 1, 5)]);
        let m = LifecycleMeta {
            reason_names: vec!["NOT_SPECIFIED".into(), "NO_SOCKET".into()],
            ..meta()
        };
        let r = connections_report(&cur, Some(&prev), &m).unwrap();
        assert_eq!(r.ports[0].resets_sent, 3);
        assert_eq!(r.ports[0].resets_sent_by_reason["NO_SOCKET"], 3);
        assert_eq!(connections_report(&cur, Some(&cur), &m), None);
    }
}
