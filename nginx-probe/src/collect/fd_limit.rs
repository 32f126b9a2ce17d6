//! nginx-probe's own open-file limit (RLIMIT_NOFILE): raised at start, and named when
//! it runs out. Every map, program and tracepoint link is a file descriptor, and so is
//! each `/metrics` connection, each `/proc` file being read and the sock_diag socket.

use crate::error::ProbeError;
use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// File descriptors a run may hold at once: maps, programs, links, the runtime and the
/// outputs (94 measured with `--syscalls all --uprobes --listen`), `/proc` reads in flight,
/// and [`crate::io::metrics_server::MAX_CONNECTIONS`] `/metrics` connections, with
/// room to spare.
pub const FDS_NEEDED: u64 = 256;

/// The soft and hard RLIMIT_NOFILE of this process, when readable.
pub fn limits() -> Option<(u64, u64)> {
    getrlimit(Resource::RLIMIT_NOFILE).ok()
}

/// Raises the soft RLIMIT_NOFILE to the hard one (as many tools do). Returns a warning
/// to print when even the hard limit is below [`FDS_NEEDED`] (then a run may end with
/// [`crate::error::ProbeError::FdLimit`]).
pub fn raise() -> Option<String> {
    let (soft, hard) = limits()?;
    if soft < hard {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
    (hard < FDS_NEEDED).then(|| {
        format!(
            "the open-file limit (RLIMIT_NOFILE) is {hard} and cannot be raised (hard limit); nginx-probe needs about {FDS_NEEDED}: run it under `ulimit -n {FDS_NEEDED}` or more"
        )
    })
}

/// True when `e`, or an error it wraps, is EMFILE or ENFILE (out of file descriptors,
/// for this process or the whole system), as the raw OS error or its text (aya
/// flattens some errors into strings).
pub fn is_exhaustion(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if matches!(io.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                return true;
            }
        }
        if let Some(procfs::ProcError::Io(io, _)) = err.downcast_ref::<procfs::ProcError>() {
            if matches!(io.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                return true;
            }
        }
        cur = err.source();
    }
    let text = e.to_string();
    text.contains("os error 24") || text.contains("os error 23")
}

/// Errors: [`ProbeError::FdLimit`] when this process cannot open `n` more files now
/// (each opened, /dev/null, and closed again). Checked before the first tracepoint is
/// attached: aya looks for tracefs once per process and keeps "tracefs not found"
/// when that look itself ran out of file descriptors, which would then be taken for
/// a kernel without tracefs.
pub fn headroom(n: usize, what: &str) -> Result<(), ProbeError> {
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        match std::fs::File::open("/dev/null") {
            Ok(f) => held.push(f),
            Err(e) if is_exhaustion(&e) => return Err(ProbeError::FdLimit(exhausted(what))),
            // /dev/null missing or refused: no fact about the limit.
            Err(_) => break,
        }
    }
    Ok(())
}

/// The error of a program that could not be loaded or attached for want of file
/// descriptors.
pub fn loading_programs() -> ProbeError {
    ProbeError::FdLimit(exhausted("loading the eBPF programs"))
}

/// One line naming the limit that ran out and what to do.
pub fn exhausted(what: &str) -> String {
    let limit = match limits() {
        Some((soft, hard)) => format!("RLIMIT_NOFILE is {soft} (hard {hard})"),
        None => "RLIMIT_NOFILE is unknown".into(),
    };
    format!(
        "nginx-probe ran out of file descriptors ({what}): its {limit}, it needs about {FDS_NEEDED}: raise it with `ulimit -n {FDS_NEEDED}` (or LimitNOFILE= in a service unit), or check the system-wide fs.file-max"
    )
}

/// This error, or [`ProbeError::FdLimit`] naming the limit when it was caused by
/// running out of file descriptors (a map that could not be created, a program that
/// could not be loaded: the verifier's log says nothing useful then).
pub fn explain(e: ProbeError) -> ProbeError {
    if matches!(e, ProbeError::FdLimit(_)) || !is_exhaustion(&e) {
        return e;
    }
    let what = match &e {
        ProbeError::Ebpf(_) | ProbeError::Map(_) => "creating the eBPF maps",
        ProbeError::Program(_) | ProbeError::NothingAttached(_) => "loading the eBPF programs",
        ProbeError::Proc { .. } => "reading /proc",
        _ => "opening a file",
    };
    ProbeError::FdLimit(exhausted(what))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fd_exhaustion_is_recognised_through_wrapping_errors() {
        let emfile = std::io::Error::from_raw_os_error(libc::EMFILE);
        assert!(is_exhaustion(&emfile));
        let map = aya::maps::MapError::CreateError {
            name: "STATS".into(),
            io_error: std::io::Error::from_raw_os_error(libc::EMFILE),
        };
        assert!(is_exhaustion(&map));
        let other = std::io::Error::from_raw_os_error(libc::EPERM);
        assert!(!is_exhaustion(&other));
        assert!(exhausted("creating map STATS").contains("RLIMIT_NOFILE is "));
    }
}
