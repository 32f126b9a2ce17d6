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

/// The local port range, TIME-WAIT reuse, reuseport request migration and TIME-WAIT sockets of `master_pid`'s
/// network namespace (see [`LocalPortsReport`]); each None when unreadable.
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
