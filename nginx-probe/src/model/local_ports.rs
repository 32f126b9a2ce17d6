//! The local (ephemeral) ports nginx's upstream connects draw from, in nginx's network
//! namespace: the range, TIME-WAIT reuse, and the sockets in TIME-WAIT. What a
//! connect failing with EADDRNOTAVAIL ran out of (case 18 of the shared cases).

use serde::{Deserialize, Serialize};

/// nginx's network namespace's local port range and TIME-WAIT, at the period's end.
/// Sources: `net.ipv4.ip_local_port_range` and `net.ipv4.tcp_tw_reuse` read in the
/// master's network namespace (`/proc/sys/net/ipv4/...` from a thread that entered
/// it); `/proc/<master>/net/sockstat` `TCP: ... tw N` (every process of the
/// namespace, not only nginx).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LocalPortsReport {
    /// First and last local port of the range; None when unreadable.
    pub range: Option<[u32; 2]>,
    /// `tcp_tw_reuse` (0 off, 1 on, 2 loopback only); None when unreadable.
    pub tcp_tw_reuse: Option<u32>,
    /// `net.ipv4.tcp_migrate_req` (1: a closing reuseport listener's queued
    /// connections move to another socket of its group; Linux 5.14+); None when
    /// unreadable (older kernels have none). Absent in older recordings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_migrate_req: Option<u32>,
    /// TCP sockets in TIME-WAIT in the namespace; None when unreadable.
    pub time_wait: Option<u64>,
}

impl LocalPortsReport {
    /// Ports in the range (both ends included).
    pub fn ports(&self) -> Option<u32> {
        self.range.map(|[lo, hi]| hi.saturating_sub(lo) + 1)
    }

    /// `local ports 40000-40499 (500, net.ipv4.ip_local_port_range in nginx's network
    /// namespace), 498 sockets in TIME-WAIT there (/proc/<pid>/net/sockstat, every
    /// process of the namespace), tcp_tw_reuse 0`: what is known, for advice.
    pub fn said(&self) -> String {
        let mut parts = Vec::new();
        if let (Some([lo, hi]), Some(n)) = (self.range, self.ports()) {
            parts.push(format!(
                "local ports {lo}-{hi} ({n}, net.ipv4.ip_local_port_range in nginx's network namespace)"
            ));
        }
        if let Some(tw) = self.time_wait {
            parts.push(format!(
                "{tw} sockets in TIME-WAIT there (/proc/<pid>/net/sockstat, every process of the namespace)"
            ));
        }
        if let Some(r) = self.tcp_tw_reuse {
            parts.push(format!("net.ipv4.tcp_tw_reuse {r}"));
        }
        parts.join(", ")
    }
}

/// `ip_local_port_range` text (`"32768\t60999\n"`) as its two ends.
pub fn parse_range(text: &str) -> Option<[u32; 2]> {
    let mut it = text.split_whitespace().map(|s| s.parse::<u32>().ok());
    let (lo, hi) = (it.next()??, it.next()??);
    (lo <= hi && hi <= 65535).then_some([lo, hi])
}

/// The `tw` field of `/proc/<pid>/net/sockstat`'s `TCP:` line.
pub fn parse_sockstat_tw(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("TCP: "))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let i = words.iter().position(|w| *w == "tw")?;
    words.get(i + 1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_range_and_time_wait_and_says_them() {
        assert_eq!(parse_range("40000\t40499\n"), Some([40000, 40499]));
        assert_eq!(parse_range("5 1"), None);
        assert_eq!(parse_range("1 70000"), None);
        assert_eq!(parse_range("x"), None);
        let sockstat =
            "sockets: used 180\nTCP: inuse 5 orphan 0 tw 498 alloc 7 mem 1\nUDP: inuse 2 mem 0\n";
        assert_eq!(parse_sockstat_tw(sockstat), Some(498));
        assert_eq!(parse_sockstat_tw("TCP: inuse 5\n"), None);
        let r = LocalPortsReport {
            tcp_migrate_req: None,
            range: Some([40000, 40499]),
            tcp_tw_reuse: Some(0),
            time_wait: Some(498),
        };
        assert_eq!(r.ports(), Some(500));
        assert_eq!(
            r.said(),
            "local ports 40000-40499 (500, net.ipv4.ip_local_port_range in nginx's network namespace), 498 sockets in TIME-WAIT there (/proc/<pid>/net/sockstat, every process of the namespace), net.ipv4.tcp_tw_reuse 0"
        );
        assert_eq!(LocalPortsReport::default().said(), "");
    }
}
