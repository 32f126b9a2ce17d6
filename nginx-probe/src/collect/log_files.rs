//! The log files nginx's workers hold open and the files at the configured log paths,
//! sampled at each snapshot, so that a rotation nginx was not told about (renamed or
//! deleted while open) is seen. Bounded: the fds already classified as logs, at most
//! [`MAX_FILES`] files, [`MAX_CONFIGURED`] configured paths. Source: `/proc/<pid>/fd`
//! (readlink, stat through the link), the configuration, and openat2 in the master's
//! root (`/proc/<master>/root`, symlinks resolved inside it).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;

use nix::fcntl::OFlag;

use crate::model::{
    config::ConfigReport,
    log_files::{ConfiguredLog, LogFileSample, MAX_PIDS},
};

/// Distinct open log files sampled, at most.
pub const MAX_FILES: usize = 64;
/// Configured log paths looked at, at most.
pub const MAX_CONFIGURED: usize = 64;

/// The open log files of `workers` (pid -> fd -> `nginx_probe_common::fd_kind`), one
/// sample per file (device and inode) with the pids holding it.
pub fn sample<'a>(
    workers: impl Iterator<Item = (u32, &'a BTreeMap<u32, u32>)>,
) -> Vec<LogFileSample> {
    use nginx_probe_common::fd_kind;
    let mut out: Vec<LogFileSample> = Vec::new();
    for (pid, fds) in workers {
        for (&fd, &k) in fds {
            let kind = match k {
                fd_kind::ACCESS_LOG => "access_log",
                fd_kind::ERROR_LOG => "error_log",
                _ => continue,
            };
            let link = format!("/proc/{pid}/fd/{fd}");
            // Closed or replaced meanwhile: not sampled this time.
            let (Ok(meta), Ok(name)) = (std::fs::metadata(&link), std::fs::read_link(&link)) else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            let name = name.to_string_lossy();
            let path = name.strip_suffix(" (deleted)").unwrap_or(&name).to_string();
            let key = (meta.dev(), meta.ino());
            if let Some(s) = out.iter_mut().find(|s| (s.dev, s.ino) == key) {
                if !s.pids.contains(&pid) && s.pids.len() < MAX_PIDS {
                    s.pids.push(pid);
                }
            } else if out.len() < MAX_FILES {
                out.push(LogFileSample {
                    kind,
                    path,
                    dev: key.0,
                    ino: key.1,
                    nlink: meta.nlink(),
                    size: meta.size(),
                    pids: vec![pid],
                });
            }
        }
    }
    out
}

/// The configured log files with a fixed path (every `access_log` and `error_log` at
/// any level, not `off`, `stderr`, `syslog:`, `memory:` or with variables), each
/// looked up in the master's root now.
pub fn configured(master_pid: u32, cfg: &ConfigReport) -> Vec<ConfiguredLog> {
    let fixed = cfg.log_paths.iter().filter(|l| {
        let p = l.path.as_str();
        !(p == "off"
            || p == "stderr"
            || p.contains('$')
            || p.starts_with("syslog:")
            || p.starts_with("memory:"))
    });
    let root =
        super::config::open_root(std::path::Path::new(&format!("/proc/{master_pid}/root"))).ok();
    let mut out: Vec<ConfiguredLog> = Vec::new();
    for l in fixed {
        let (kind, path, at) = (l.kind, l.path.as_str(), l.at.as_str());
        if out.len() >= MAX_CONFIGURED {
            break;
        }
        let path = if path.starts_with('/') {
            path.to_string()
        } else {
            format!("{}{path}", cfg.prefix)
        };
        if out.iter().any(|c| c.kind == kind && c.path == path) {
            continue;
        }
        let found = root.as_ref().and_then(|r| {
            let fd = super::config::open_in_root(r, &path, OFlag::O_PATH).ok()?;
            let meta = std::fs::File::from(fd).metadata().ok()?;
            Some((meta.dev(), meta.ino()))
        });
        out.push(ConfiguredLog {
            kind,
            path,
            at: at.to_string(),
            found,
        });
    }
    out
}
