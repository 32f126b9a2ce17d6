//! Finding and validating the nginx to attach to, from `/proc` (through the `procfs` crate).
//!
//! Sources: `/proc/<pid>/stat` (comm, ppid), `/proc/<pid>/cmdline` (nginx rewrites it to
//! `nginx: master process ...` / `nginx: worker process`), `/proc/<pid>/status` (`NSpid`).

use procfs::process::{all_processes, Process};

use crate::error::ProbeError;

/// What the process at a pid is, judged from its comm and its (nginx-rewritten) cmdline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// `nginx: master process ...`.
    Master,
    /// `nginx: worker process` (also `... is shutting down` during a reload).
    Worker,
    /// Another nginx helper process (cache manager, cache loader).
    Helper(String),
    /// nginx run with `master_process off`, or an nginx whose title we do not know.
    OtherNginx,
    /// Not nginx at all.
    NotNginx,
}

/// Classifies a process from its `comm` and its first cmdline argument.
/// Pure: unit tests feed it odd inputs.
pub fn classify(comm: &str, cmdline: &[String]) -> Role {
    let title = cmdline.join(" ");
    if title.starts_with("nginx: master process") {
        return Role::Master;
    }
    if title.starts_with("nginx: worker process") {
        return Role::Worker;
    }
    if let Some(rest) = title.strip_prefix("nginx: ") {
        return Role::Helper(rest.trim().to_string());
    }
    let argv0_is_nginx = cmdline
        .first()
        .map(|a| a.rsplit('/').next().unwrap_or(a) == "nginx")
        .unwrap_or(false);
    if comm == "nginx" || argv0_is_nginx {
        Role::OtherNginx
    } else {
        Role::NotNginx
    }
}

/// A validated nginx master.
#[derive(Clone, Debug)]
pub struct Master {
    /// Host (init-namespace) pid, as given with `--pid`.
    pub pid: u32,
    /// The master's pids in each nested pid namespace, outermost first (`NSpid`).
    pub nspid: Vec<i32>,
    /// The master's cmdline as nginx titled it.
    pub title: String,
}

/// One worker process of the master.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerProc {
    /// Host pid (tgid), the key of the in-kernel filter.
    pub pid: u32,
    /// `NSpid` from `/proc/<pid>/status`: host pid first, innermost last.
    pub nspid: Vec<i32>,
}

fn cmdline_of(p: &Process) -> Vec<String> {
    p.cmdline().unwrap_or_default()
}

/// Checks that `pid` is a live nginx master.
///
/// Errors: [`ProbeError::NoSuchProcess`] for a dead or never-used pid;
/// [`ProbeError::IsWorker`] naming the worker's master; [`ProbeError::NotMaster`]
/// for anything else.
pub fn validate_master(pid: u32) -> Result<Master, ProbeError> {
    let proc = Process::new(pid as i32).map_err(|_| ProbeError::NoSuchProcess(pid))?;
    let stat = proc.stat().map_err(|_| ProbeError::NoSuchProcess(pid))?;
    if stat.state == 'Z' || stat.state == 'X' {
        return Err(ProbeError::Zombie(pid));
    }
    let cmdline = cmdline_of(&proc);
    let title = if cmdline.is_empty() {
        format!("[{}]", stat.comm)
    } else {
        cmdline.join(" ")
    };
    match classify(&stat.comm, &cmdline) {
        // A process can title itself anything (`exec -a`); an nginx master also runs as
        // comm `nginx` (nginx, OpenResty, Tengine builds alike).
        Role::Master if stat.comm != "nginx" => Err(ProbeError::NotMaster {
            pid,
            what: format!("`{}` titled `{title}`, not nginx", stat.comm),
        }),
        Role::Master => {
            let nspid = proc
                .status()
                .ok()
                .and_then(|s| s.nspid)
                .unwrap_or_else(|| vec![pid as i32]);
            Ok(Master { pid, nspid, title })
        }
        Role::Worker => Err(ProbeError::IsWorker {
            pid,
            master: stat.ppid as u32,
        }),
        Role::Helper(what) => Err(ProbeError::NotMaster {
            pid,
            what: format!("an nginx {what} of master {}", stat.ppid),
        }),
        Role::OtherNginx => Err(ProbeError::NoMasterProcess { pid, title }),
        Role::NotNginx => Err(ProbeError::NotMaster {
            pid,
            what: format!("`{}` (`{title}`), not nginx", stat.comm),
        }),
    }
}

/// The master's live worker processes, sorted by pid. Scans `/proc/*/stat` for children
/// of `master` whose title is `nginx: worker process`. Processes that vanish during the
/// scan are skipped.
pub fn find_workers(master: u32) -> Vec<WorkerProc> {
    let mut out = Vec::new();
    let Ok(procs) = all_processes() else {
        return out;
    };
    for p in procs.flatten() {
        let Ok(stat) = p.stat() else { continue };
        if stat.ppid as u32 != master {
            continue;
        }
        if classify(&stat.comm, &cmdline_of(&p)) != Role::Worker {
            continue;
        }
        let nspid = p
            .status()
            .ok()
            .and_then(|s| s.nspid)
            .unwrap_or_else(|| vec![p.pid]);
        out.push(WorkerProc {
            pid: p.pid as u32,
            nspid,
        });
    }
    out.sort_by_key(|w| w.pid);
    out
}

/// The role of a live process, None when it is gone (or a zombie).
pub fn role_of(pid: u32) -> Option<Role> {
    let p = Process::new(pid as i32).ok()?;
    let stat = p.stat().ok()?;
    if stat.state == 'Z' || stat.state == 'X' {
        return None;
    }
    Some(classify(&stat.comm, &cmdline_of(&p)))
}

/// `NSpid` of a process (host pid first), or just the host pid when unreadable.
pub fn nspid_of(pid: u32) -> Vec<i32> {
    Process::new(pid as i32)
        .and_then(|p| p.status())
        .ok()
        .and_then(|s| s.nspid)
        .unwrap_or_else(|| vec![pid as i32])
}

/// Open fds of a process (`/proc/<pid>/fd` entries) and its soft `RLIMIT_NOFILE` in
/// force (`/proc/<pid>/limits`, "Max open files"); None for what cannot be read.
pub fn fd_usage(pid: u32) -> (Option<u64>, Option<u64>) {
    let Ok(p) = Process::new(pid as i32) else {
        return (None, None);
    };
    let open = p.fd_count().ok().map(|n| n as u64);
    let limit = p
        .limits()
        .ok()
        .and_then(|l| match l.max_open_files.soft_limit {
            procfs::process::LimitValue::Value(v) => Some(v),
            procfs::process::LimitValue::Unlimited => None,
        });
    (open, limit)
}

/// Classifies what an fd points at, from its `/proc/<pid>/fd/<n>` link, its open flags
/// (`flags:` of `/proc/<pid>/fdinfo/<n>`, octal) and the error log's path (fd 2's link).
/// Pure, for unit tests. Returns a `nginx_probe_common::fd_kind` value.
pub fn classify_fd(link: &str, flags_octal: Option<u32>, error_log: Option<&str>) -> u32 {
    use nginx_probe_common::fd_kind;
    if link.starts_with("socket:") {
        return fd_kind::SOCKET;
    }
    if !link.starts_with('/') {
        return fd_kind::OTHER; // pipe:[..], anon_inode:[eventfd], ...
    }
    if Some(link) == error_log {
        return fd_kind::ERROR_LOG;
    }
    const O_APPEND: u32 = 0o2000;
    match flags_octal {
        Some(f) if f & O_APPEND != 0 => fd_kind::ACCESS_LOG,
        _ => fd_kind::FILE,
    }
}

/// The non-socket fds of `pid` with their kinds and targets: (fd, kind, path). The
/// error log is what fd 2 points at (nginx keeps its error log there).
pub fn classify_fds(pid: u32) -> Vec<(u32, u32, String)> {
    let mut out = Vec::new();
    let base = format!("/proc/{pid}");
    let error_log = std::fs::read_link(format!("{base}/fd/2"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned());
    let Ok(rd) = std::fs::read_dir(format!("{base}/fd")) else {
        return out;
    };
    for e in rd.flatten() {
        let Some(fd) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(link) = std::fs::read_link(e.path()) else {
            continue;
        };
        let link = link.to_string_lossy().into_owned();
        if link.starts_with("socket:") {
            continue;
        }
        let flags = std::fs::read_to_string(format!("{base}/fdinfo/{fd}"))
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("flags:"))
                    .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
            });
        out.push((fd, classify_fd(&link, flags, error_log.as_deref()), link));
    }
    out.sort();
    out
}

/// utime + stime of a process in clock ticks (`/proc/<pid>/stat`).
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let st = Process::new(pid as i32).ok()?.stat().ok()?;
    Some(st.utime + st.stime)
}

/// Time `pid` spent runnable but waiting for a CPU since it started, ns
/// (`/proc/<pid>/schedstat` run_delay; needs CONFIG_SCHED_INFO).
pub fn run_delay_ns(pid: u32) -> Option<u64> {
    Some(Process::new(pid as i32).ok()?.schedstat().ok()?.run_delay)
}

/// The nginx version compiled into a binary: the first `nginx/<digits>.<digits>...`
/// (nginx's `NGINX_VER`), e.g. `nginx/1.22.1`. Pure, for tests.
pub fn find_nginx_version(binary: &[u8]) -> Option<String> {
    let pat = b"nginx/";
    let mut from = 0;
    while let Some(at) = binary[from..]
        .windows(pat.len())
        .position(|w| w == pat)
        .map(|p| p + from)
    {
        let rest = &binary[at + pat.len()..];
        let n = rest
            .iter()
            .take_while(|b| b.is_ascii_digit() || **b == b'.')
            .count();
        let v = &rest[..n];
        if v.first().is_some_and(u8::is_ascii_digit)
            && v.iter().filter(|b| **b == b'.').count() >= 1
        {
            let v = std::str::from_utf8(v).ok()?.trim_end_matches('.');
            return Some(format!("nginx/{v}"));
        }
        from = at + 1;
    }
    None
}

/// The version of the nginx binary a process runs, read from `/proc/<pid>/exe` (read
/// only: the binary is not executed); None when unreadable or not found.
pub fn nginx_version(pid: u32) -> Option<String> {
    let bin = std::fs::read(format!("/proc/{pid}/exe")).ok()?;
    find_nginx_version(&bin)
}

/// True while `/proc/<pid>` exists and is not a zombie.
pub fn is_alive(pid: u32) -> bool {
    match Process::new(pid as i32).and_then(|p| p.stat()) {
        Ok(stat) => stat.state != 'Z' && stat.state != 'X',
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_version_is_found_in_binary_bytes() {
        let bin = b"\0\0nginx/ path\0Server: nginx/\0nginx/1.22.1\0nginx/2.0\0";
        assert_eq!(find_nginx_version(bin).as_deref(), Some("nginx/1.22.1"));
        assert_eq!(find_nginx_version(b"no version here nginx/x"), None);
    }

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn classifies_nginx_titles() {
        assert_eq!(
            classify(
                "nginx",
                &v(&["nginx: master process /usr/sbin/nginx -c /tmp/x.conf"])
            ),
            Role::Master
        );
        // nginx writes its title over argv, separated by spaces, so cmdline may be one
        // string or several.
        assert_eq!(
            classify("nginx", &v(&["nginx:", "master", "process", "nginx"])),
            Role::Master
        );
        assert_eq!(
            classify("nginx", &v(&["nginx: worker process"])),
            Role::Worker
        );
        assert_eq!(
            classify("nginx", &v(&["nginx: worker process is shutting down"])),
            Role::Worker
        );
        assert_eq!(
            classify("nginx", &v(&["nginx: cache manager process"])),
            Role::Helper("cache manager process".into())
        );
        assert_eq!(
            classify(
                "nginx",
                &v(&["/usr/sbin/nginx", "-g", "master_process off;"])
            ),
            Role::OtherNginx
        );
        assert_eq!(classify("bash", &v(&["-bash"])), Role::NotNginx);
        // Kernel threads have an empty cmdline.
        assert_eq!(classify("kthreadd", &[]), Role::NotNginx);
        // A comm with spaces and parentheses is still just a comm.
        assert_eq!(classify("a (b) c", &v(&["a (b) c"])), Role::NotNginx);
        // A program that merely mentions nginx is not nginx.
        assert_eq!(
            classify("python3", &v(&["python3", "nginx: master process"])),
            Role::NotNginx
        );
    }

    #[test]
    fn classifies_fds_by_link_and_flags() {
        use nginx_probe_common::fd_kind;
        let err = Some("/var/log/nginx/error.log");
        assert_eq!(classify_fd("socket:[123]", None, err), fd_kind::SOCKET);
        assert_eq!(classify_fd("pipe:[9]", Some(1), err), fd_kind::OTHER);
        assert_eq!(
            classify_fd("anon_inode:[eventfd]", Some(2), err),
            fd_kind::OTHER
        );
        assert_eq!(
            classify_fd("/var/log/nginx/error.log", Some(0o102001), err),
            fd_kind::ERROR_LOG
        );
        // O_WRONLY|O_APPEND|O_CREAT|O_LARGEFILE: an access log.
        assert_eq!(
            classify_fd("/var/log/nginx/access.log", Some(0o102101), err),
            fd_kind::ACCESS_LOG
        );
        // A client body temp file: O_RDWR, no O_APPEND.
        assert_eq!(
            classify_fd("/var/lib/nginx/body/0000000001", Some(0o100002), err),
            fd_kind::FILE
        );
        assert_eq!(classify_fd("/srv/www/index.html", None, err), fd_kind::FILE);
    }

    #[test]
    fn dead_pid_is_no_such_process() {
        // pid_max is at most 2^22; this pid cannot exist.
        let err = validate_master(4_194_305).unwrap_err();
        assert!(matches!(err, ProbeError::NoSuchProcess(4_194_305)), "{err}");
    }

    #[test]
    fn own_pid_is_not_a_master() {
        let me = std::process::id();
        let err = validate_master(me).unwrap_err();
        assert!(
            matches!(err, ProbeError::NotMaster { pid, .. } if pid == me),
            "{err}"
        );
        assert!(find_workers(me).is_empty());
    }
}
