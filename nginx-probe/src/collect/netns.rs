//! Work done inside another process's network namespace, on a thread of our own so the
//! rest of nginx-probe stays where it is; and what is read there.

use std::io::{self, Read};

use crate::model::local_ports::{self, LocalPortsReport};

/// Runs `f` in the network namespace of `pid`: directly when it is ours, else on a
/// scoped thread that entered it with setns(CLONE_NEWNET).
///
/// Errors: reading `/proc/<pid>/ns/net`, setns, or `f`'s own.
pub fn in_netns_of<T: Send>(pid: u32, f: impl FnOnce() -> io::Result<T> + Send) -> io::Result<T> {
    let ours = std::fs::read_link("/proc/self/ns/net")?;
    let path = format!("/proc/{pid}/ns/net");
    if std::fs::read_link(&path)? == ours {
        return f();
    }
    std::thread::scope(|s| {
        s.spawn(|| -> io::Result<T> {
            let ns = std::fs::File::open(&path)?;
            nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).map_err(io::Error::from)?;
            f()
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("netns thread panicked")))
    })
}

/// At most 4 KiB of a small /proc file.
fn small(path: &str) -> Option<String> {
    let mut s = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(4096)
        .read_to_string(&mut s)
        .ok()?;
    Some(s)
}

/// The local port range, TIME-WAIT reuse, reuseport request migration and TIME-WAIT
/// sockets of `master_pid`'s network namespace (see [`LocalPortsReport`]); each None
/// when unreadable.
pub fn local_ports(master_pid: u32) -> LocalPortsReport {
    let (range, tcp_tw_reuse, tcp_migrate_req) = in_netns_of(master_pid, || {
        Ok((
            small("/proc/sys/net/ipv4/ip_local_port_range")
                .and_then(|t| local_ports::parse_range(&t)),
            small("/proc/sys/net/ipv4/tcp_tw_reuse").and_then(|t| t.trim().parse().ok()),
            small("/proc/sys/net/ipv4/tcp_migrate_req").and_then(|t| t.trim().parse().ok()),
        ))
    })
    .unwrap_or((None, None, None));
    LocalPortsReport {
        range,
        tcp_tw_reuse,
        tcp_migrate_req,
        time_wait: small(&format!("/proc/{master_pid}/net/sockstat"))
            .and_then(|t| local_ports::parse_sockstat_tw(&t)),
    }
}

/// The addresses of the interfaces of `master_pid`'s network namespace (getifaddrs in
/// it): a connect from nginx to one of them reaches nginx's own wildcard listeners like
/// loopback does. At most 256; empty when unreadable.
pub fn own_addresses(master_pid: u32) -> Vec<std::net::IpAddr> {
    in_netns_of(master_pid, || {
        let addrs = nix::ifaddrs::getifaddrs().map_err(io::Error::from)?;
        Ok(addrs
            .filter_map(|a| {
                let s = a.address?;
                s.as_sockaddr_in()
                    .map(|v4| std::net::IpAddr::V4(v4.ip()))
                    .or_else(|| s.as_sockaddr_in6().map(|v6| std::net::IpAddr::V6(v6.ip())))
            })
            .take(256)
            .collect())
    })
    .unwrap_or_default()
}

/// [`local_ports`] now, its three settings (`ip_local_port_range`, `tcp_tw_reuse`,
/// `tcp_migrate_req`) each taken from `last_good` when unreadable now (the master
/// exited and its namespace with it, at `nginx -s stop` before the final snapshot),
/// and `last_good` updated with what was read. The TIME-WAIT count is a gauge of now:
/// never carried over.
pub fn local_ports_keeping(master_pid: u32, last_good: &mut LocalPortsReport) -> LocalPortsReport {
    keep_settings(local_ports(master_pid), last_good)
}

/// The settings of `now`, those unread taken from `last_good`, which takes the read ones.
pub fn keep_settings(
    mut now: LocalPortsReport,
    last_good: &mut LocalPortsReport,
) -> LocalPortsReport {
    fn keep<T: Copy>(now: &mut Option<T>, last: &mut Option<T>) {
        match now {
            Some(v) => *last = Some(*v),
            None => *now = *last,
        }
    }
    keep(&mut now.range, &mut last_good.range);
    keep(&mut now.tcp_tw_reuse, &mut last_good.tcp_tw_reuse);
    keep(&mut now.tcp_migrate_req, &mut last_good.tcp_migrate_req);
    now
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read at attach, unread at the end: the settings are the last read, TIME-WAIT
    /// stays unknown; a later read replaces them.
    #[test]
    fn settings_unread_at_the_end_are_the_last_read() {
        let mut last = LocalPortsReport::default();
        let first = keep_settings(
            LocalPortsReport {
                range: Some([32768, 60999]),
                tcp_tw_reuse: Some(2),
                tcp_migrate_req: Some(0),
                time_wait: Some(12),
            },
            &mut last,
        );
        assert_eq!(first.tcp_migrate_req, Some(0));
        let gone = keep_settings(LocalPortsReport::default(), &mut last);
        assert_eq!(
            gone,
            LocalPortsReport {
                range: Some([32768, 60999]),
                tcp_tw_reuse: Some(2),
                tcp_migrate_req: Some(0),
                time_wait: None,
            }
        );
        let changed = keep_settings(
            LocalPortsReport {
                tcp_migrate_req: Some(1),
                ..Default::default()
            },
            &mut last,
        );
        assert_eq!(changed.tcp_migrate_req, Some(1));
        assert_eq!(last.tcp_migrate_req, Some(1));
    }
}
