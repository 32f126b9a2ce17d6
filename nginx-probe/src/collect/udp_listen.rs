//! nginx's UDP listening sockets (`listen ... quic`, stream `listen ... udp`): the
//! master's fds matched against `/proc/<master>/net/udp` and `udp6` (bounded reads).

use std::{collections::BTreeSet, io::Read};

/// Longest part of each `/proc/<pid>/net/udp{,6}` file read, bytes.
const MAX_READ: u64 = 4 << 20;
/// Most ports reported.
const MAX_PORTS: usize = 256;

/// Local ports of the UDP sockets among `inodes` (the master's socket fds, from
/// [`super::listen::socket_inodes`]) in the master's network namespace, sorted and
/// deduplicated; empty when unreadable.
pub fn udp_listen_ports(pid: u32, inodes: &BTreeSet<u32>) -> Vec<u16> {
    let mut ports = BTreeSet::new();
    for f in ["udp", "udp6"] {
        let Ok(file) = std::fs::File::open(format!("/proc/{pid}/net/{f}")) else {
            continue;
        };
        let mut text = String::new();
        if file.take(MAX_READ).read_to_string(&mut text).is_err() {
            continue;
        }
        for (port, inode) in text.lines().skip(1).filter_map(parse_row) {
            if inodes.contains(&inode) && ports.len() < MAX_PORTS {
                ports.insert(port);
            }
        }
    }
    ports.into_iter().collect()
}

/// One row of `/proc/net/udp`: (local port, inode). The local address is field 1
/// (`0100007F:20FB`, port in hex), the inode field 9.
fn parse_row(line: &str) -> Option<(u16, u32)> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let port = u16::from_str_radix(f.get(1)?.rsplit(':').next()?, 16).ok()?;
    let inode = f.get(9)?.parse().ok()?;
    Some((port, inode))
}

#[test]
fn rows_of_proc_net_udp_parse() {
    let row = "  773: 0100007F:20FB 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 123456 2 0000000000000000 0";
    assert_eq!(parse_row(row), Some((8443, 123456)));
    assert_eq!(parse_row("garbage"), None);
}
