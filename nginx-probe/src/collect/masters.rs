//! Every nginx master on the host and in its containers, for `--all`: found in `/proc`
//! ([`scan`]), each described by [`info`] (nginx version from its binary, container id
//! from `/proc/<pid>/cgroup`, pid namespace from `/proc/<pid>/ns/pid`). Every read is
//! bounded and every string taken from another process is sanitized: a container may
//! name its cgroups anything.

use std::io::Read as _;

use crate::{
    collect::{discover, target},
    model::masters::MasterInfo,
};

/// Longest `/proc/<pid>/cgroup` read, bytes (a process is in one cgroup per hierarchy:
/// a few hundred bytes in practice).
const CGROUP_READ_MAX: u64 = 64 * 1024;

/// Longest container id or machine name kept, characters (a full container id is 64).
pub const CONTAINER_ID_MAX: usize = 64;

/// The nginx masters to follow: every live master in /proc ([`discover::nginx_masters`])
/// except a master whose parent is itself an nginx master (the new master of a binary
/// upgrade, `kill -USR2`: its workers are counted once it replaces the old one), sorted
/// by pid.
pub fn scan() -> Vec<u32> {
    let masters: Vec<u32> = discover::nginx_masters()
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    masters
        .iter()
        .copied()
        .filter(|&pid| !super::target::parent_of(pid).is_some_and(|pp| masters.contains(&pp)))
        .collect()
}

/// What a report says about master `pid`: its version, container and pid namespace;
/// each None when unreadable.
pub fn info(pid: u32) -> MasterInfo {
    let cgroup = read_bounded(&format!("/proc/{pid}/cgroup"), CGROUP_READ_MAX);
    MasterInfo {
        pid,
        nginx_version: target::nginx_version(pid)
            .map(|v| v.strip_prefix("nginx/").map(String::from).unwrap_or(v)),
        container_id: cgroup.as_deref().and_then(container_id),
        pid_namespace: namespace_inode(pid, "pid"),
    }
}

/// Master `pid`'s network namespace inode and its TCP listening ports (sock_diag in its
/// namespace, the sockets it holds); no ports when they cannot be read.
pub fn listeners(pid: u32) -> (Option<u64>, std::collections::BTreeSet<u16>) {
    let inodes = crate::collect::listen::socket_inodes(pid);
    let ports = crate::collect::listen::listen_sockets(pid, &inodes)
        .map(|s| s.iter().map(|l| l.port).collect())
        .unwrap_or_default();
    (namespace_inode(pid, "net"), ports)
}

/// The inode of `/proc/<pid>/ns/<kind>` (`pid`, `net`), from its link text `pid:[N]`.
pub fn namespace_inode(pid: u32, kind: &str) -> Option<u64> {
    let link = std::fs::read_link(format!("/proc/{pid}/ns/{kind}")).ok()?;
    parse_ns_link(&link.to_string_lossy())
}

/// `N` of a namespace link text `kind:[N]`.
pub fn parse_ns_link(text: &str) -> Option<u64> {
    let inner = text.split_once(":[")?.1.strip_suffix(']')?;
    inner.parse().ok()
}

/// At most `max` bytes of `path` as text (lossy), None when unreadable.
fn read_bounded(path: &str, max: u64) -> Option<String> {
    let mut buf = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(max).read_to_end(&mut buf))
        .ok()?;
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// The container a process runs in, from the text of its `/proc/<pid>/cgroup`: the
/// last 64-hex component of a cgroup path (`/docker/<id>`, `docker-<id>.scope`,
/// `cri-containerd-<id>.scope`, `crio-<id>.scope`, `libpod-<id>.scope`,
/// `/kubepods/.../<id>`), else a systemd-nspawn machine (`machine-<name>.scope`, its
/// `\x2d` escapes undone), kept only when it is made of `[A-Za-z0-9._-]` and at most
/// [`CONTAINER_ID_MAX`] characters. None on the host or under another layout. Pure.
pub fn container_id(cgroup: &str) -> Option<String> {
    let paths = cgroup.lines().filter_map(|l| l.splitn(3, ':').nth(2));
    let mut machine = None;
    for path in paths {
        for part in path.split('/').rev() {
            if let Some(id) = hex_id(part) {
                return Some(id);
            }
            if machine.is_none() {
                machine = machine_name(part);
            }
        }
    }
    machine
}

/// The 64-hex id inside one cgroup path component (`<id>`, `<prefix>-<id>.scope`,
/// `<prefix>-<id>`), lower-cased.
fn hex_id(part: &str) -> Option<String> {
    let part = part.strip_suffix(".scope").unwrap_or(part);
    let id = part.rsplit(['-', ':']).next().unwrap_or(part);
    (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| id.to_ascii_lowercase())
}

/// The machine name of a systemd-nspawn scope (`machine-<name>.scope`), unescaped and
/// sanitized (see [`container_id`]).
fn machine_name(part: &str) -> Option<String> {
    let name = part.strip_prefix("machine-")?.strip_suffix(".scope")?;
    let name = name.replace("\\x2d", "-");
    let ok = !name.is_empty()
        && name.len() <= CONTAINER_ID_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    ok.then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "4f3c2b1a00112233445566778899aabbccddeeff00112233445566778899aabb";

    #[test]
    fn container_ids_from_the_usual_layouts() {
        for text in [
            format!("0::/system.slice/docker-{ID}.scope\n"),
            format!("12:pids:/docker/{ID}\n1:name=systemd:/docker/{ID}\n"),
            format!("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-{ID}.scope\n"),
            format!("0::/kubepods/besteffort/pod1234/{ID}\n"),
            format!("0::/machine.slice/libpod-{ID}.scope/container\n"),
            format!("0::/system.slice/crio-{}.scope\n", ID.to_uppercase()),
        ] {
            assert_eq!(container_id(&text).as_deref(), Some(ID), "{text}");
        }
        assert_eq!(
            container_id("0::/machine.slice/machine-web\\x2d1.scope/payload\n").as_deref(),
            Some("web-1")
        );
    }

    #[test]
    fn the_host_and_hostile_names_give_none() {
        assert_eq!(container_id("0::/system.slice/nginx.service\n"), None);
        assert_eq!(container_id("0::/\n"), None);
        assert_eq!(container_id(""), None);
        assert_eq!(container_id("garbage without colons"), None);
        // Too short, not hex, control characters, too long: none is an id.
        assert_eq!(container_id("0::/docker/abc123\n"), None);
        assert_eq!(
            container_id(&format!("0::/docker/{}\n", "g".repeat(64))),
            None
        );
        assert_eq!(
            container_id("0::/machine.slice/machine-a\x1b[2Jb.scope\n"),
            None
        );
        let long = format!("0::/machine.slice/machine-{}.scope\n", "a".repeat(65));
        assert_eq!(container_id(&long), None);
    }

    #[test]
    fn namespace_links_parse() {
        assert_eq!(parse_ns_link("pid:[4026531836]"), Some(4026531836));
        assert_eq!(parse_ns_link("net:[1]"), Some(1));
        assert_eq!(parse_ns_link("pid:[x]"), None);
        assert_eq!(parse_ns_link("pid"), None);
        assert!(namespace_inode(std::process::id(), "pid").is_some());
    }
}
