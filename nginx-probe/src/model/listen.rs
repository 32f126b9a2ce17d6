//! nginx's listening sockets in the report.

use serde::{Deserialize, Serialize};

/// One of nginx's listening sockets over a period.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ListenReport {
    /// `addr:port`.
    pub addr: String,
    /// Backlog in force (sock_diag; `listen ... backlog=` capped by somaxconn).
    pub backlog: u32,
    /// Connections waiting in the accept queue at the last 500 ms sample.
    pub queue_now: u32,
    /// Most connections seen waiting at any sample in the period.
    pub queue_max: u32,
    /// Listen overflows in the master's network namespace during the period
    /// (`/proc/<pid>/net/netstat` TcpExt ListenOverflows; namespace-wide, not only nginx).
    pub overflows: u64,
    /// Listen drops, likewise (TcpExt ListenDrops).
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
