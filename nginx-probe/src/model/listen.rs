//! nginx's listening sockets in the report.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One of nginx's listening sockets over a period.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ListenReport {
    /// `addr:port`.
    pub addr: String,
    /// Backlog in force (sock_diag; `listen ... backlog=` capped by somaxconn).
    pub backlog: u32,
    /// Connections waiting in the accept queue at the last 500 ms sample.
    pub queue_now: u32,
    /// Most connections seen waiting at any sample in the period.
    pub queue_max: u32,
    /// Kept for schema-1 readers only: the namespace-wide TcpExt ListenOverflows of
    /// [`ListenNamespaceReport::overflows`], the same number on every row (0 when
    /// unknown), not this socket's. Never shown per socket nor summed over rows: read
    /// the report's `listen_namespace`.
    pub overflows: u64,
    /// Kept for schema-1 readers only, likewise: the namespace-wide TcpExt ListenDrops.
    pub drops: u64,
    /// Connections this socket itself dropped in the period (a full accept queue, other
    /// listen drops): sock_diag `SK_MEMINFO_DROPS` of nginx's socket, sampled every
    /// 500 ms. Exact for nginx, unlike `overflows`/`drops`. None when the kernel gives
    /// no socket memory info.
    #[serde(default)]
    pub socket_drops: Option<u64>,
    /// nginx closed it (the master no longer holds it: a reload that dropped a
    /// `reuseport` socket or a `listen`); `queue_now` is then its last sample while
    /// open, not a live queue. Resets sent to the connections queued on it are in
    /// `connections.ports[].resets_of_closed_listener_queue`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub closed: bool,
}

impl ListenReport {
    /// `queue_now` as shown: the number while open, `closed` once nginx closed it.
    pub fn queue_now_shown(&self) -> String {
        if self.closed {
            "closed".into()
        } else {
            self.queue_now.to_string()
        }
    }
}

/// Where the namespace-wide listen counters come from, as said in reports.
pub const LISTEN_NAMESPACE_SOURCE: &str = "/proc/<master>/net/netstat TcpExt ListenOverflows, ListenDrops: the kernel's counters of the whole network namespace, every listening socket in it, nginx's or not";

/// The listen overflows and drops of nginx's network namespace over a period, once per
/// report: the kernel counts them per network namespace (TcpExt), not per socket, so
/// they belong to no row of `listen`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ListenNamespaceReport {
    /// Growth of TcpExt ListenOverflows in the period (connections that found an accept
    /// queue full, on any listening socket of the namespace).
    pub overflows: u64,
    /// Growth of TcpExt ListenDrops in the period (overflows and other listen drops,
    /// likewise namespace-wide).
    pub drops: u64,
    /// Where they come from ([`LISTEN_NAMESPACE_SOURCE`]).
    pub source: String,
}

impl ListenNamespaceReport {
    /// The growth from `base` to `now` of (ListenOverflows, ListenDrops); None when
    /// either reading is unknown.
    pub fn between(now: Option<(u64, u64)>, base: Option<(u64, u64)>) -> Option<Self> {
        let ((o, d), (bo, bd)) = (now?, base?);
        Some(ListenNamespaceReport {
            overflows: o.saturating_sub(bo),
            drops: d.saturating_sub(bd),
            source: LISTEN_NAMESPACE_SOURCE.into(),
        })
    }
}

impl super::Report {
    /// A report recorded before `listen_namespace` existed: its figures from the first
    /// listening socket's row (where they were repeated), the source saying so (0
    /// there was also what an unreadable counter gave). Leaves other reports alone.
    pub fn fill_legacy_listen_namespace(&mut self) {
        if self.listen_namespace.is_some() {
            return;
        }
        self.listen_namespace = self.listen.first().map(|l| ListenNamespaceReport {
            overflows: l.overflows,
            drops: l.drops,
            source: format!("{LISTEN_NAMESPACE_SOURCE}; recorded before listen_namespace: read from the sockets' rows, where an unreadable counter also gave 0"),
        });
    }
}

/// The namespace's counters over a period since attach (`summary`) or since the
/// interval started; None when unreadable at either end.
pub fn listen_namespace(l: &ListenInputs, summary: bool) -> Option<ListenNamespaceReport> {
    let base = if summary {
        l.base_total
    } else {
        l.base_interval
    };
    ListenNamespaceReport::between(l.counters_now, base)
}

/// What the tracker knows of one listening socket, sampled from sock_diag every refresh
/// (500 ms) by `collect::tracker`.
#[derive(Clone, Debug, Default)]
pub struct ListenState {
    /// `addr:port` (sock_diag).
    pub addr: String,
    /// Backlog in force (sock_diag).
    pub backlog: u32,
    /// Connections in the accept queue at the last sample, and the most seen at any
    /// sample since attach and since the interval started.
    pub queue_now: u32,
    /// The most connections in the accept queue at any sample since attach.
    pub queue_max_total: u32,
    /// The most connections in the accept queue at any sample since the interval started.
    pub queue_max_interval: u32,
    /// The socket's drop counter (sock_diag `SK_MEMINFO_DROPS`) when first seen, at
    /// the start of the interval, and at the last sample.
    pub drops_first: Option<u32>,
    /// The drop counter at the start of the interval.
    pub drops_interval: Option<u32>,
    /// The drop counter at the last sample.
    pub drops_now: Option<u32>,
    /// Order in which nginx closed it (absent from the master's fds at a sample that
    /// read them; a reload that dropped it), None while open.
    pub closed_seq: Option<u64>,
}

/// The listening sockets' part of the tracker's state a report needs, as plain data.
#[derive(Clone, Copy, Debug)]
pub struct ListenInputs<'a> {
    /// nginx's listening sockets by inode.
    pub sockets: &'a BTreeMap<u32, ListenState>,
    /// The master's netns (ListenOverflows, ListenDrops) read when the report is
    /// built (`/proc/<pid>/net/netstat` TcpExt), and at attach and at the start of the
    /// interval; None when unreadable.
    pub counters_now: Option<(u64, u64)>,
    /// (overflows, drops) at attach.
    pub base_total: Option<(u64, u64)>,
    /// (overflows, drops) at the start of the interval.
    pub base_interval: Option<(u64, u64)>,
}

/// The listening sockets over a period since attach (`summary`) or since the interval
/// started: one row per socket in inode order, overflows and drops being the netns's
/// growth since the base (0 when unknown at either end).
pub fn listen_reports(l: &ListenInputs, summary: bool) -> Vec<ListenReport> {
    let base = if summary {
        l.base_total
    } else {
        l.base_interval
    };
    // The schema-1 row fields repeat the namespace's figures (0 when unknown).
    let (overflows, drops) = ListenNamespaceReport::between(l.counters_now, base)
        .map_or((0, 0), |n| (n.overflows, n.drops));
    l.sockets
        .values()
        .map(|st| ListenReport {
            addr: st.addr.clone(),
            backlog: st.backlog,
            queue_now: st.queue_now,
            queue_max: if summary {
                st.queue_max_total
            } else {
                st.queue_max_interval
            },
            overflows,
            drops,
            socket_drops: match (
                if summary {
                    st.drops_first
                } else {
                    st.drops_interval
                },
                st.drops_now,
            ) {
                (Some(b), Some(n)) => Some(n.wrapping_sub(b) as u64),
                _ => None,
            },
            closed: st.closed_seq.is_some(),
        })
        .collect()
}

/// The port of a `listen` address (`127.0.0.1:8080`, `8080`, `[::]:80`, `*:80`, a
/// bare host name: 80); None for `unix:` sockets.
pub fn listen_port(address: &str) -> Option<u16> {
    if address.starts_with("unix:") {
        return None;
    }
    if let Ok(p) = address.parse::<u16>() {
        return Some(p);
    }
    let tail = address.rsplit(']').next().unwrap_or(address);
    match tail.rsplit_once(':') {
        Some((_, p)) => p.parse().ok(),
        None => Some(80),
    }
}
