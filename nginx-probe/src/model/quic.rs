//! QUIC (HTTP/3) connections: nginx counts them in its `accepted` counter, but they
//! arrive on a UDP socket and no accept4 (nor the `ngx_get_connection` uprobe) returns
//! them. When nginx has UDP listening sockets, the difference between nginx's
//! `accepted` and the workers' TCP accepts is reported as QUIC connections, never as an
//! accepts disagreement. Pure.

use serde::{Deserialize, Serialize};

/// Where [`QuicReport::connections`] comes from.
pub const QUIC_SOURCE: &str =
    "stub_status accepted minus the workers' TCP accepts (UDP, no accept4)";

/// nginx's UDP listening sockets and the connections they took in the period (JSON
/// `quic`; absent when nginx has no UDP listening socket).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QuicReport {
    /// Ports of the master's UDP sockets bound and unconnected (`/proc/<master>/net/udp`
    /// and `udp6` rows whose inode is one of the master's fds): `listen ... quic`, or
    /// the stream module's `listen ... udp`, which nginx counts the same way.
    pub udp_ports: Vec<u16>,
    /// Connections in the period that no accept returned: nginx's `accepted` counter
    /// (stub_status) minus the workers' accepts (accept4 tracepoints or the
    /// `ngx_get_connection` uprobe). None when nginx's counters are unreadable.
    pub connections: Option<u64>,
    /// [`QUIC_SOURCE`].
    pub source: String,
}

impl QuicReport {
    /// The report for UDP listening ports `udp_ports` (None: nginx has none), with
    /// nginx's `accepted` over the period (None: unreadable) and the TCP accepts.
    pub fn new(
        udp_ports: Vec<u16>,
        nginx_accepted: Option<u64>,
        tcp_accepts: u64,
    ) -> Option<QuicReport> {
        if udp_ports.is_empty() {
            return None;
        }
        Some(QuicReport {
            udp_ports,
            connections: nginx_accepted.map(|a| a.saturating_sub(tcp_accepts)),
            source: QUIC_SOURCE.into(),
        })
    }

    /// Whether the period's requests may include HTTP/3 requests that no TCP
    /// connection carried: then accepts-per-request figures are unknown.
    pub fn makes_requests_per_accept_unknown(&self) -> bool {
        self.connections != Some(0)
    }

    /// One line for text reports.
    pub fn line(&self) -> String {
        let ports: Vec<String> = self.udp_ports.iter().map(|p| p.to_string()).collect();
        match self.connections {
            Some(n) => format!(
                "QUIC: {n} QUIC connections (UDP, no accept4) on UDP port(s) {}: nginx's accepted counter minus the TCP accepts; not an accepts disagreement{}",
                ports.join(", "),
                if n > 0 {
                    "; accepts per request unknown (requests include HTTP/3 ones)"
                } else {
                    ""
                }
            ),
            None => format!(
                "QUIC: nginx listens on UDP port(s) {} (QUIC or stream udp, no accept4); QUIC connections unknown (nginx's counters unreadable); accepts per request unknown",
                ports.join(", ")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quic_is_accepted_minus_tcp_and_absent_without_udp() {
        assert_eq!(QuicReport::new(vec![], Some(19), 7), None);
        let q = QuicReport::new(vec![8443], Some(19), 7).unwrap();
        assert_eq!(q.connections, Some(12));
        assert!(q.makes_requests_per_accept_unknown());
        assert!(q.line().contains("12 QUIC connections (UDP, no accept4)"));
        let q = QuicReport::new(vec![8443], Some(7), 7).unwrap();
        assert!(!q.makes_requests_per_accept_unknown());
        let q = QuicReport::new(vec![8443], None, 7).unwrap();
        assert!(q.makes_requests_per_accept_unknown());
    }
}
