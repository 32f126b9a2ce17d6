//! Finding and validating the nginx to attach to, from `/proc` (through the `procfs` crate).
//!
//! Sources: `/proc/<pid>/stat` (comm, ppid), `/proc/<pid>/cmdline` (nginx rewrites it to
//! `nginx: master process ...` / `nginx: worker process`), `/proc/<pid>/status` (`NSpid`).

use procfs::{
    process::{all_processes, Process},
    ProcError,
};

use crate::{error::ProbeError, safe::bounded};

/// Longest command line (and comm) of another process shown in an error, characters
/// after escaping control characters: a pid that is not nginx can be any program.
pub const TITLE_SHOWN_MAX: usize = 80;

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

/// Whether a process titled `nginx: master process ...` runs nginx: its comm is
/// `nginx` (nginx, OpenResty, Tengine builds alike), or, for an nginx started through a
/// differently named symlink, copy or wrapper (comm `nginx-prod`), its executable holds
/// nginx's version string (`version`: a bounded scan of `/proc/<pid>/exe`, only run
/// then). A program that merely titles itself like a master has neither.
pub fn master_is_nginx(comm: &str, version: impl FnOnce() -> Option<String>) -> bool {
    comm == "nginx" || version().is_some()
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
/// for anything else; [`ProbeError::Proc`] when `/proc` could not be read for another
/// reason than the process being gone.
pub fn validate_master(pid: u32) -> Result<Master, ProbeError> {
    let gone_or = |e: ProcError| {
        if is_gone(&e) {
            ProbeError::NoSuchProcess(pid)
        } else {
            proc_error(pid, e)
        }
    };
    let proc = Process::new(pid as i32).map_err(gone_or)?;
    let stat = proc.stat().map_err(gone_or)?;
    if stat.state == 'Z' || stat.state == 'X' {
        return Err(ProbeError::Zombie(pid));
    }
    let cmdline = cmdline_of(&proc);
    let title = if cmdline.is_empty() {
        format!("[{}]", stat.comm)
    } else {
        cmdline.join(" ")
    };
    // Shown in errors only: another process's command line can be any length.
    let shown = bounded(&title, TITLE_SHOWN_MAX);
    let comm = bounded(&stat.comm, TITLE_SHOWN_MAX);
    match classify(&stat.comm, &cmdline) {
        // A process can title itself anything (`exec -a`): the title alone is not
        // enough, the program must be nginx too (see [`master_is_nginx`]).
        Role::Master if !master_is_nginx(&stat.comm, || nginx_version(pid)) => {
            Err(ProbeError::NotMaster {
                pid,
                what: format!("`{comm}` titled `{shown}`, not nginx"),
            })
        }
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
        Role::OtherNginx => Err(ProbeError::NoMasterProcess { pid, title: shown }),
        Role::NotNginx => Err(ProbeError::NotMaster {
            pid,
            what: format!("`{comm}` (`{shown}`), not nginx"),
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

/// The role of a live process and its parent pid, read from one `/proc/<pid>/stat`
/// (comm, ppid) and its cmdline; None when it is gone (or a zombie).
///
/// Errors: a `/proc` read that failed for another reason (see [`alive`]).
pub fn role_of(pid: u32) -> Result<Option<(Role, u32)>, ProbeError> {
    let stat = match Process::new(pid as i32).and_then(|p| p.stat().map(|s| (p, s))) {
        Ok(ps) => ps,
        Err(e) if is_gone(&e) => return Ok(None),
        Err(e) => return Err(proc_error(pid, e)),
    };
    let (p, stat) = stat;
    if stat.state == 'Z' || stat.state == 'X' {
        return Ok(None);
    }
    Ok(Some((
        classify(&stat.comm, &cmdline_of(&p)),
        stat.ppid as u32,
    )))
}

/// The parent pid of a process (`/proc/<pid>/stat` ppid); None when gone or unreadable.
pub fn parent_of(pid: u32) -> Option<u32> {
    Process::new(pid as i32)
        .and_then(|p| p.stat())
        .ok()
        .map(|s| s.ppid as u32)
}

/// Whether `pid`'s binary file was replaced or deleted since it started: the kernel
/// then shows `/proc/<pid>/exe` as the old path followed by ` (deleted)`. False when
/// unreadable (the process gone).
pub fn exe_deleted(pid: u32) -> bool {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .is_ok_and(|p| p.as_os_str().as_encoded_bytes().ends_with(b" (deleted)"))
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
    // Not the null device: `/dev/null` is no log file (see `fd_inode`).
    let error_log = std::fs::read_link(format!("{base}/fd/2"))
        .ok()
        .filter(|_| fd_inode(pid, 2).is_some())
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

/// The inode number of `pid`'s fd `fd` (`stat` through `/proc/<pid>/fd/<fd>`: the
/// file, pipe or tty it points at); None when unreadable.
///
/// None too for the null device (`error_log /dev/null`): its inode is every
/// `/dev/null` fd's, access logs' included, and what goes there is discarded: no
/// error log's writes.
pub fn fd_inode(pid: u32, fd: u32) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(format!("/proc/{pid}/fd/{fd}")).ok()?;
    (!super::tail::is_null_device(&meta)).then(|| meta.ino())
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
    find_version_end(binary).map(|(_, v)| v)
}

/// [`find_nginx_version`] and the index just past the version's last digit.
fn find_version_end(binary: &[u8]) -> Option<(usize, String)> {
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
            return Some((at + pat.len() + n, format!("nginx/{v}")));
        }
        from = at + 1;
    }
    None
}

/// Most bytes of a binary read to find its version: nginx's `NGINX_VER` is in
/// `.rodata`, within the first few MB of any nginx build (1.3 MB into Debian's 1.3 MB
/// binary at most).
pub const VERSION_SCAN_BYTES: u64 = 64 << 20;

/// Bytes read at a time while scanning for the version.
const VERSION_SCAN_CHUNK: usize = 1 << 20;

/// Scans `r` for the nginx version ([`find_nginx_version`]) a chunk at a time, reading
/// at most `max` bytes and holding one chunk (plus a short overlap) in memory: a 3 GB
/// (or endless) file costs no more than a small one.
pub fn scan_nginx_version(mut r: impl std::io::Read, max: u64) -> Option<String> {
    // Bytes carried into the next chunk: a version cut at a chunk's end is found whole.
    const OVERLAP: usize = 64;
    let mut buf = vec![0u8; VERSION_SCAN_CHUNK + OVERLAP];
    let mut kept = 0usize;
    let mut total = 0u64;
    loop {
        let want = (VERSION_SCAN_CHUNK as u64).min(max - total) as usize;
        let n = if want == 0 {
            0
        } else {
            match r.read(&mut buf[kept..kept + want]) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => 0,
            }
        };
        total += n as u64;
        let end = kept + n;
        let last = n == 0;
        if let Some((stop, v)) = find_version_end(&buf[..end]) {
            // A version running into the chunk's end may go on in the next one.
            if stop < end || last {
                return Some(v);
            }
        }
        if last {
            return None;
        }
        let settled = end.saturating_sub(OVERLAP);
        buf.copy_within(settled..end, 0);
        kept = end - settled;
    }
}

/// The libssl `pid` has mapped (`libssl.so*` in `/proc/<pid>/maps`), as (a path that
/// opens that very file, the path as the maps file shows it). The first is
/// `/proc/<pid>/map_files/<start>-<end>` of the mapping (the kernel's link to the mapped
/// file itself): it holds whatever the process's root, where a path from the maps file
/// does not (a chroot shows the host's path, `<root>/usr/lib/...`, which
/// `/proc/<pid>/root` would prefix with the root a second time; a container with its
/// own mount root shows its own path). When map_files cannot be read (an old kernel
/// without it: 3.3+ has it), the path through `/proc/<pid>/root`. None when nginx maps
/// no libssl (built without TLS, or OpenSSL linked statically).
pub fn libssl_path(pid: u32) -> Option<(std::path::PathBuf, String)> {
    let maps = Process::new(pid as i32).and_then(|p| p.maps()).ok()?;
    maps.iter().find_map(|m| match &m.pathname {
        procfs::process::MMapPath::Path(p)
            if p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libssl.so")) =>
        {
            let shown = p.display().to_string();
            let (start, end) = m.address;
            let direct =
                std::path::PathBuf::from(format!("/proc/{pid}/map_files/{start:x}-{end:x}"));
            if std::fs::metadata(&direct).is_ok_and(|md| md.is_file()) {
                return Some((direct, shown));
            }
            let rel = p.strip_prefix("/").unwrap_or(p);
            Some((
                std::path::PathBuf::from(format!("/proc/{pid}/root")).join(rel),
                shown,
            ))
        }
        _ => None,
    })
}

/// The version of the nginx binary a process runs, read from `/proc/<pid>/exe` (read
/// only: the binary is not executed) with bounded reads: at most
/// [`VERSION_SCAN_BYTES`], 1 MB in memory; the binary is never read whole. None when
/// unreadable, not a regular file, or not found in that prefix.
pub fn nginx_version(pid: u32) -> Option<String> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(format!("/proc/{pid}/exe"))
        .ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    scan_nginx_version(f, VERSION_SCAN_BYTES)
}

/// True when a `/proc` error means the process is gone: ENOENT (no `/proc/<pid>`) or
/// ESRCH (it exited while being read). Every other error (EMFILE, ENFILE, EACCES,
/// ENOMEM) says nothing about the process.
pub fn is_gone(e: &ProcError) -> bool {
    match e {
        ProcError::NotFound(_) => true,
        ProcError::Io(io, _) => matches!(io.raw_os_error(), Some(libc::ENOENT | libc::ESRCH)),
        _ => false,
    }
}

/// [`ProbeError::Proc`] for a failed read of `/proc/<pid>`.
pub fn proc_error(pid: u32, e: ProcError) -> ProbeError {
    let (path, source) = match e {
        ProcError::Io(io, p) => (p, io),
        ProcError::PermissionDenied(p) => (p, std::io::Error::from_raw_os_error(libc::EACCES)),
        ProcError::NotFound(p) => (p, std::io::Error::from_raw_os_error(libc::ENOENT)),
        ProcError::Incomplete(p) => (p, std::io::Error::other("incomplete contents")),
        other => (None, std::io::Error::other(other.to_string())),
    };
    let path = path
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| format!("/proc/{pid}"));
    crate::collect::fd_limit::explain(ProbeError::Proc { path, source })
}

/// Whether `pid` is alive, as the kernel says: `Ok(false)` only when `/proc/<pid>` is
/// gone (ENOENT, ESRCH) or the process is a zombie.
///
/// Errors: any other failure to read `/proc/<pid>/stat` ([`ProbeError::Proc`], or
/// [`ProbeError::FdLimit`] for EMFILE/ENFILE): the process may be alive.
pub fn alive(pid: u32) -> Result<bool, ProbeError> {
    match Process::new(pid as i32).and_then(|p| p.stat()) {
        Ok(stat) => Ok(stat.state != 'Z' && stat.state != 'X'),
        Err(e) if is_gone(&e) => Ok(false),
        Err(e) => Err(proc_error(pid, e)),
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

    /// A reader that counts what is read from it.
    struct Counted<R>(R, u64);
    impl<R: std::io::Read> std::io::Read for Counted<R> {
        fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.read(b)?;
            self.1 += n as u64;
            Ok(n)
        }
    }

    #[test]
    fn version_scan_reads_a_bounded_prefix_in_chunks() {
        // Endless zeros (a huge sparse binary): stops after the cap, finds nothing.
        let mut endless = Counted(std::io::repeat(0), 0);
        assert_eq!(scan_nginx_version(&mut endless, 3 << 20), None);
        assert_eq!(endless.1, 3 << 20);
        // A version cut across the 1 MB chunk boundary is still found.
        for at in [0usize, (1 << 20) - 8, (1 << 20) - 3, (2 << 20) + 5] {
            let mut bin = vec![0u8; 3 << 20];
            bin[at..at + 13].copy_from_slice(b"nginx/1.22.1\0");
            assert_eq!(
                scan_nginx_version(&bin[..], 64 << 20).as_deref(),
                Some("nginx/1.22.1"),
                "at {at}"
            );
        }
        // Beyond the cap: not read, not found.
        let mut bin = vec![0u8; 3 << 20];
        bin[(2 << 20)..(2 << 20) + 12].copy_from_slice(b"nginx/1.22.1");
        assert_eq!(scan_nginx_version(&bin[..], 1 << 20), None);
        // The real binary, when installed.
        if let Ok(f) = std::fs::File::open("/usr/sbin/nginx") {
            assert!(scan_nginx_version(f, VERSION_SCAN_BYTES)
                .is_some_and(|v| v.starts_with("nginx/1.")));
        }
    }

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    /// Spawns `cmd`, waits (at most 5 s) until `execed` sees the child run its own
    /// program (until the exec it is still this test binary), and returns
    /// `validate_master`'s refusal of it with the `what` it names; the child is killed.
    fn refusal_of(
        mut cmd: std::process::Command,
        execed: impl Fn(&Process) -> bool,
    ) -> (ProbeError, String) {
        let mut child = cmd.spawn().unwrap();
        let pid = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !Process::new(pid as i32).is_ok_and(|p| execed(&p))
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let e = validate_master(pid).unwrap_err();
        let _ = child.kill();
        let _ = child.wait();
        let ProbeError::NotMaster { what, .. } = &e else {
            panic!("{e}")
        };
        let what = what.clone();
        (e, what)
    }

    #[test]
    fn another_process_command_line_is_escaped_and_bounded() {
        let long = format!("\x1b[2J{}", "--auth-required ".repeat(20));
        let mut sh = std::process::Command::new("sh");
        sh.args(["-c", "sleep 30", &long]);
        let (e, what) = refusal_of(sh, |p| p.cmdline().is_ok_and(|c| c.len() >= 3));
        assert!(
            what.starts_with("`sh` (`sh -c sleep 30 \\x1b[2J--auth-required"),
            "{what}"
        );
        assert!(what.ends_with("…`), not nginx"), "{what}");
        let shown = what
            .trim_start_matches("`sh` (`")
            .trim_end_matches("`), not nginx");
        assert_eq!(shown.chars().count(), TITLE_SHOWN_MAX + 1, "{shown}");
        assert!(!e.to_string().chars().any(|c| c.is_control()), "{e}");
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
    fn a_master_title_needs_an_nginx_program() {
        let never = || -> Option<String> { panic!("no scan needed for comm nginx") };
        assert!(master_is_nginx("nginx", never));
        // Started through a symlink named otherwise: the binary says it is nginx.
        assert!(master_is_nginx("nginx-prod", || Some(
            "nginx/1.22.1".into()
        )));
        // Only the title mimics a master.
        assert!(!master_is_nginx("sleep", || None));
        assert!(!master_is_nginx("nginx-prod", || None));
    }

    #[test]
    fn a_renamed_program_titled_like_a_master_is_still_refused() {
        // A sleep run through a symlink named `nginx-prod`, titled like a master: comm
        // `nginx-prod`, but its executable is not nginx.
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("nginx-prod");
        std::os::unix::fs::symlink("/bin/sleep", &link).unwrap();
        let mut bash = std::process::Command::new("bash");
        bash.arg("-c").arg(format!(
            "exec -a 'nginx: master process x' {} 30",
            link.display()
        ));
        // The kernel sets comm before the new image's argument pages (an empty cmdline
        // in between, seen once in CI): wait for both.
        let (_, what) = refusal_of(bash, |p| {
            p.stat().is_ok_and(|s| s.comm == "nginx-prod")
                && p.cmdline().is_ok_and(|c| !c.is_empty())
        });
        assert_eq!(
            what,
            "`nginx-prod` titled `nginx: master process x 30`, not nginx"
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
