//! nginx's listening sockets: accept queue depth against the backlog (sock_diag over
//! netlink, what `ss -ltn` shows as Recv-Q/Send-Q), and the listen overflow and drop
//! counters of the master's network namespace (`/proc/<pid>/net/netstat`, TcpExt).
//!
//! When nginx stops accepting (EMFILE back-off, every worker busy), clients wait or are
//! dropped here, where no syscall of the workers shows them.

use std::{collections::BTreeSet, io, net::IpAddr};

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_sock_diag::{
    constants::{AF_INET, AF_INET6, IPPROTO_TCP},
    inet::{nlas::Nla, ExtensionFlags, InetRequest, SocketId, StateFlags},
    SockDiagMessage,
};
use netlink_sys::{protocols::NETLINK_SOCK_DIAG, Socket, SocketAddr};

/// One listening TCP socket at one instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenSample {
    /// `addr:port` it listens on.
    pub addr: String,
    /// The local port (host order).
    pub port: u16,
    /// Socket inode (to match nginx's fds).
    pub inode: u32,
    /// Connections waiting in the accept queue now (sock_diag `idiag_rqueue`).
    pub queue: u32,
    /// The backlog in force (`idiag_wqueue`: `listen ... backlog=`, capped by
    /// `net.core.somaxconn`).
    pub backlog: u32,
    /// Packets this socket dropped since it was created (`SK_MEMINFO_DROPS`, the
    /// socket's `sk_drops`): for a listener, connections lost to a full accept queue
    /// (each ListenOverflows of this socket) and other listen drops. Wraps at 2^32.
    /// None when the kernel sent no memory info.
    pub drops: Option<u32>,
}

/// Inodes of the sockets process `pid` holds (`/proc/<pid>/fd` -> `socket:[N]`).
pub fn socket_inodes(pid: u32) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return out;
    };
    for e in rd.flatten() {
        if let Ok(t) = std::fs::read_link(e.path()) {
            if let Some(n) = parse_socket_link(&t.to_string_lossy()) {
                out.insert(n);
            }
        }
    }
    out
}

/// `socket:[12345]` -> 12345.
pub fn parse_socket_link(link: &str) -> Option<u32> {
    link.strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

fn dump_family(family: u8) -> io::Result<Vec<ListenSample>> {
    let mut socket = Socket::new(NETLINK_SOCK_DIAG)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    let mut hdr = NetlinkHeader::default();
    hdr.flags = NLM_F_REQUEST | NLM_F_DUMP;
    let mut packet = NetlinkMessage::new(
        hdr,
        SockDiagMessage::InetRequest(InetRequest {
            family,
            protocol: IPPROTO_TCP,
            extensions: ExtensionFlags::SKMEMINFO,
            states: StateFlags::LISTEN,
            socket_id: if family == AF_INET {
                SocketId::new_v4()
            } else {
                SocketId::new_v6()
            },
        })
        .into(),
    );
    packet.finalize();
    let mut buf = vec![0; packet.header.length as usize];
    packet.serialize(&mut buf[..]);
    socket.send(&buf[..], 0)?;
    let mut out = Vec::new();
    let mut rx = vec![0u8; 1 << 16];
    loop {
        let size = socket.recv(&mut &mut rx[..], 0)?;
        let mut offset = 0;
        while offset < size {
            let msg = <NetlinkMessage<SockDiagMessage>>::deserialize(&rx[offset..size])
                .map_err(|e| io::Error::other(e.to_string()))?;
            let len = msg.header.length as usize;
            match msg.payload {
                NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => {
                    let h = &r.header;
                    out.push(ListenSample {
                        addr: match h.socket_id.source_address {
                            IpAddr::V6(a) => format!("[{a}]:{}", h.socket_id.source_port),
                            IpAddr::V4(a) => format!("{a}:{}", h.socket_id.source_port),
                        },
                        port: h.socket_id.source_port,
                        inode: h.inode,
                        queue: h.recv_queue,
                        backlog: h.send_queue,
                        drops: r.nlas.iter().find_map(|n| match n {
                            Nla::MemInfo(m) => Some(m.drops),
                            _ => None,
                        }),
                    });
                }
                NetlinkPayload::Done(_) => return Ok(out),
                NetlinkPayload::Error(e) => return Err(io::Error::other(format!("{e:?}"))),
                _ => {}
            }
            if len == 0 {
                break;
            }
            offset += len;
        }
    }
}

/// The listening TCP sockets among `inodes`, dumped in the network namespace of
/// `netns_pid` (the master's: a container's nginx listens in its own namespace).
///
/// Errors: netlink or setns failures.
pub fn listen_sockets(netns_pid: u32, inodes: &BTreeSet<u32>) -> io::Result<Vec<ListenSample>> {
    super::netns::in_netns_of(netns_pid, || {
        let mut all = dump_family(AF_INET)?;
        all.extend(dump_family(AF_INET6)?);
        all.retain(|s| inodes.contains(&s.inode));
        all.sort_by(|a, b| a.addr.cmp(&b.addr));
        Ok(all)
    })
}

/// `TcpExt` `ListenOverflows` and `ListenDrops` from `/proc/<pid>/net/netstat` text
/// (a header line of names, then a line of values). Pure, for unit tests.
pub fn parse_netstat(text: &str) -> Option<(u64, u64)> {
    let mut lines = text.lines();
    while let Some(names) = lines.next() {
        let values = lines.next()?;
        if !names.starts_with("TcpExt:") {
            continue;
        }
        let names: Vec<&str> = names.split_whitespace().collect();
        let values: Vec<&str> = values.split_whitespace().collect();
        let get = |k: &str| -> Option<u64> {
            let i = names.iter().position(|n| *n == k)?;
            values.get(i)?.parse().ok()
        };
        return Some((get("ListenOverflows")?, get("ListenDrops")?));
    }
    None
}

/// Listen overflows and drops counted in `pid`'s network namespace since boot.
pub fn listen_counters(pid: u32) -> Option<(u64, u64)> {
    parse_netstat(&std::fs::read_to_string(format!("/proc/{pid}/net/netstat")).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tcpext_listen_counters() {
        let text =
            "TcpExt: SyncookiesSent SyncookiesRecv ListenOverflows ListenDrops TCPTimeouts\n\
                    TcpExt: 0 0 17 21 4\n\
                    IpExt: InNoRoutes InTruncatedPkts\n\
                    IpExt: 0 0\n";
        assert_eq!(parse_netstat(text), Some((17, 21)));
        assert_eq!(parse_netstat("IpExt: A\nIpExt: 1\n"), None);
        assert_eq!(parse_netstat(""), None);
    }

    #[test]
    fn parses_socket_links() {
        assert_eq!(parse_socket_link("socket:[4242]"), Some(4242));
        assert_eq!(parse_socket_link("pipe:[4242]"), None);
        assert_eq!(parse_socket_link("/var/log/nginx/access.log"), None);
    }

    #[test]
    fn our_own_listener_is_found_with_its_backlog() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let me = std::process::id();
        let inodes = socket_inodes(me);
        let found = listen_sockets(me, &inodes).expect("sock_diag dump");
        let s = found
            .iter()
            .find(|s| s.addr == format!("127.0.0.1:{port}"))
            .unwrap_or_else(|| panic!("{found:?}"));
        // std's TcpListener listens with a backlog of 128.
        assert_eq!(s.backlog, 128);
        assert_eq!(s.queue, 0);
        assert_eq!(s.drops, Some(0));
    }
}
