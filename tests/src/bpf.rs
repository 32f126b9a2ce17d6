//! The BPF programs loaded on this machine (through bpftool), to check that nothing of
//! nginx-probe's stays loaded.

use std::{
    fs,
    process::Command,
    time::{Duration, Instant},
};

/// `bpftool <args> --json`, parsed; panics with bpftool's stderr when it fails.
fn bpftool_json(args: &[&str]) -> serde_json::Value {
    let out = Command::new("bpftool")
        .args(args)
        .arg("--json")
        .output()
        .expect("run bpftool (run `cargo xtask setup`)");
    assert!(
        out.status.success(),
        "bpftool {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("bpftool JSON")
}

/// Ids and names of all loaded BPF programs, from `bpftool prog show --json`.
pub fn loaded_programs() -> Vec<(u64, String)> {
    bpftool_json(&["prog", "show"])
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| {
                    Some((
                        p.get("id")?.as_u64()?,
                        p.get("name")
                            .and_then(|n| n.as_str())
                            .unwrap_or("")
                            .to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Programs a default run (`--detail full`, lifecycle on, TLS uprobes) holds on
/// Debian's nginx, and what they are: [`prog_ids_held_by`] must find exactly these.
pub const DEFAULT_PROGRAMS: (usize, &str) = (
    51,
    "24 programs on the 12 timed core syscalls, 9 exit-only counters of fd-creating syscalls (openat included), sched_process_fork, sched_process_exit (worker exit status), close_after_accept, access_log_open, the 4 connection-lifecycle tracepoints (inet_sock_set_state, tcp_send_reset, tcp_receive_reset, tcp_destroy_sock), the draining-worker uprobe and its uretprobe (ngx_close_idle_connections: the drain's start and the end of its idle sweep), the reuse marker uprobe (ngx_get_connection: closes made inside it reuse connections at worker_connections), the TLS-close uprobe (ngx_ssl_shutdown: who began a TLS close), the configuration-load uretprobe (ngx_init_cycle) and the 5 TLS handshake uprobes (Debian's nginx maps libssl: ngx_ssl_ocsp_validate in nginx; SSL_set_connect_state, SSL_do_handshake and its return, SSL_free in libssl); Debian 12's nginx 1.22 has no QUIC, so the four QUIC uprobes (ngx_quic_shutdown_connection, ngx_quic_finalize_connection, ngx_quic_close_connection, ngx_http_v3_init) are not attached",
);

/// Ids of the BPF programs a process holds open, from `/proc/<pid>/fdinfo/*` (`prog_id:`
/// of `anon_inode:bpf-prog` fds).
pub fn prog_ids_held_by(pid: u32) -> Vec<u64> {
    let mut ids = Vec::new();
    let Ok(rd) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return ids;
    };
    for e in rd.flatten() {
        let Ok(target) = fs::read_link(e.path()) else {
            continue;
        };
        if target.to_string_lossy() != "anon_inode:bpf-prog" {
            continue;
        }
        let fdinfo = format!("/proc/{pid}/fdinfo/{}", e.file_name().to_string_lossy());
        if let Ok(info) = fs::read_to_string(fdinfo) {
            for line in info.lines() {
                if let Some(v) = line.strip_prefix("prog_id:") {
                    if let Ok(id) = v.trim().parse() {
                        ids.push(id);
                    }
                }
            }
        }
    }
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Waits up to 5 s for every program in `ids` to be unloaded (the kernel frees a
/// program shortly after its last fd closes); panics naming those still loaded.
pub fn assert_released(ids: &[u64], context: &str) {
    assert!(!ids.is_empty(), "{context}: no program ids to check");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let loaded: Vec<u64> = loaded_programs().into_iter().map(|(id, _)| id).collect();
        let left: Vec<u64> = ids
            .iter()
            .copied()
            .filter(|id| loaded.contains(id))
            .collect();
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{context}: programs still loaded: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Perf event fds a process holds (`anon_inode:[perf_event]` in `/proc/<pid>/fd`).
pub fn perf_event_fds_held_by(pid: u32) -> usize {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|rd| {
            rd.flatten()
                .filter(|e| {
                    fs::read_link(e.path())
                        .is_ok_and(|t| t.to_string_lossy() == "anon_inode:[perf_event]")
                })
                .count()
        })
        .unwrap_or(0)
}

/// The tracepoints (`sys_enter_write`...) or uprobe symbols of the perf events of
/// process `pid` that carry a BPF program, from `bpftool perf list --json` (the kernel's
/// `BPF_TASK_FD_QUERY` on each fd); raw tracepoints, which have no perf event, left out.
pub fn perf_events_with_programs(pid: u32) -> Vec<String> {
    bpftool_json(&["perf", "list"])
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|e| e.get("pid").and_then(|p| p.as_u64()) == Some(u64::from(pid)))
                // A raw tracepoint has no perf event (and sets no syscall's perf bit).
                .filter(|e| e.get("fd_type").and_then(|t| t.as_str()) != Some("raw_tracepoint"))
                .map(|e| {
                    e.get("tracepoint")
                        .or_else(|| e.get("func"))
                        .or_else(|| e.get("filename"))
                        .and_then(|t| t.as_str())
                        .unwrap_or("?")
                        .to_string()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Names of the programs behind the BPF links process `pid` holds (its
/// `anon_inode:bpf_link` fds; `prog_id` from `/proc/<pid>/fdinfo/<fd>`), sorted: what it
/// has attached through links (tracepoints, uprobes), whichever way the kernel lists
/// them.
pub fn linked_programs_of(pid: u32) -> Vec<String> {
    let names = loaded_programs();
    let mut out: Vec<String> = fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|rd| {
            rd.flatten()
                .filter(|e| {
                    fs::read_link(e.path())
                        .is_ok_and(|t| t.to_string_lossy() == "anon_inode:bpf_link")
                })
                .filter_map(|e| {
                    let info = fs::read_to_string(format!(
                        "/proc/{pid}/fdinfo/{}",
                        e.file_name().to_string_lossy()
                    ))
                    .ok()?;
                    let id: u64 = info
                        .lines()
                        .find_map(|l| l.strip_prefix("prog_id:"))?
                        .trim()
                        .parse()
                        .ok()?;
                    names.iter().find(|(i, _)| *i == id).map(|(_, n)| n.clone())
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}
