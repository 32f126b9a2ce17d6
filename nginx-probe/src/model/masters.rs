//! Which nginx master a report is about, under `--all` (every master on the host): its
//! host pid, nginx version, container and pid namespace, as read from `/proc` by
//! `collect::masters`. Absent from every document without `--all`.

use serde::{Deserialize, Serialize};

/// The master a report, JSON document or metric series belongs to (`--all`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MasterInfo {
    /// Host (init-namespace) pid of the master.
    pub pid: u32,
    /// nginx's version (`1.22.1`), from the `nginx/` string in its binary; None when
    /// the binary does not hold one.
    pub nginx_version: Option<String>,
    /// The container the master runs in, from its `/proc/<pid>/cgroup` path: a 64-hex
    /// container id (docker, containerd, cri-o, podman) or a systemd-nspawn machine
    /// name; None on the host or under an unrecognised cgroup layout.
    pub container_id: Option<String>,
    /// Inode of the master's pid namespace (`/proc/<pid>/ns/pid`); None when unreadable.
    pub pid_namespace: Option<u64>,
}

impl MasterInfo {
    /// The header line of a master's section of the text report, e.g. `== nginx master
    /// 1234: nginx 1.22.1, on the host, pid namespace 4026531836 ==`.
    pub fn header(&self) -> String {
        let version = self.nginx_version.as_deref().unwrap_or("version unknown");
        let place = match &self.container_id {
            Some(c) => format!("container {c}"),
            None => "no container found in its cgroup".to_string(),
        };
        let ns = match self.pid_namespace {
            Some(n) => format!("pid namespace {n}"),
            None => "pid namespace unknown".to_string(),
        };
        format!(
            "== nginx master {}: nginx {version}, {place}, {ns} ==",
            self.pid
        )
    }
}

/// What each followed master listens on, by host pid: its network namespace inode
/// (None: unreadable) and its TCP listening ports.
pub type Listeners =
    std::collections::BTreeMap<u32, (Option<u64>, std::collections::BTreeSet<u16>)>;

/// Why master `me`'s client-connection figures (who closed, resets, idle times) are
/// unknown under `--all`, when they are: another followed master listens on one of its
/// ports in another network namespace (or one that could not be read), and the
/// connection lifecycle counters are keyed by local port alone, so both masters'
/// connections would be counted in each. None when no port is shared that way.
pub fn shared_port(me: u32, all: &Listeners) -> Option<String> {
    let (my_ns, my_ports) = all.get(&me)?;
    for (pid, (ns, ports)) in all {
        if *pid == me || (my_ns.is_some() && ns == my_ns) {
            continue;
        }
        if let Some(port) = my_ports.intersection(ports).next() {
            return Some(format!(
                "unknown: nginx master {pid}, also followed (--all), listens on port {port} in another network namespace, and the connection lifecycle counters are keyed by local port alone: they would mix both masters' connections"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_shared_across_namespaces_makes_connections_unknown() {
        let ports = |p: &[u16]| {
            p.iter()
                .copied()
                .collect::<std::collections::BTreeSet<u16>>()
        };
        let mut all = Listeners::new();
        all.insert(10, (Some(1), ports(&[80, 443])));
        all.insert(20, (Some(2), ports(&[8080])));
        assert_eq!(shared_port(10, &all), None);
        all.insert(30, (Some(3), ports(&[443])));
        let why = shared_port(10, &all).unwrap();
        assert!(why.starts_with("unknown: nginx master 30"), "{why}");
        assert!(why.contains("port 443"), "{why}");
        assert!(shared_port(30, &all).unwrap().contains("master 10"));
        assert_eq!(shared_port(20, &all), None);
        // The same namespace cannot hold two listeners on one port: not a mix.
        all.insert(30, (Some(1), ports(&[443])));
        assert_eq!(shared_port(10, &all), None);
        // An unreadable namespace may be another one.
        all.insert(30, (None, ports(&[443])));
        assert!(shared_port(10, &all).is_some());
        assert_eq!(shared_port(99, &all), None);
    }

    #[test]
    fn the_header_names_the_master() {
        let m = MasterInfo {
            pid: 7,
            nginx_version: Some("1.26.3".into()),
            container_id: Some("web-1".into()),
            pid_namespace: Some(4026532000),
        };
        assert_eq!(
            m.header(),
            "== nginx master 7: nginx 1.26.3, container web-1, pid namespace 4026532000 =="
        );
        let host = MasterInfo {
            pid: 8,
            ..Default::default()
        };
        assert_eq!(
            host.header(),
            "== nginx master 8: nginx version unknown, no container found in its cgroup, pid namespace unknown =="
        );
    }
}
