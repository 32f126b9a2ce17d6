//! A syscall tracepoint program linked and unlinked for the detail windows.
//!
//! A window opens a perf event on each detail tracepoint (disabled: the kernel's
//! per-CPU perf list stays empty, only the BPF program runs) and creates a BPF link
//! (`BPF_LINK_CREATE` with `BPF_PERF_EVENT`) from the program to it; the end of the
//! window closes both. Keeping the events open between windows was tried first: it
//! keeps each syscall's bit in the kernel's `enabled_perf_enter/exit_syscalls`, so
//! every write, writev, sendfile and epoll_wait still entered `perf_syscall_enter/exit`
//! between windows. Releasing a perf event waits for the kernel (an RCU grace period
//! under the global `event_mutex`), which is why the closes happen on a thread of their
//! own ([`super::windows`]). aya 0.14 exposes neither call.

use std::{
    io::{self, Read as _},
    os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd},
    path::Path,
};

/// `PERF_TYPE_TRACEPOINT`.
const PERF_TYPE_TRACEPOINT: u32 = 2;
/// `PERF_FLAG_FD_CLOEXEC`.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
/// `BPF_LINK_CREATE` (bpf(2) command).
const BPF_LINK_CREATE: libc::c_long = 28;
/// `BPF_PERF_EVENT` (attach type).
const BPF_PERF_EVENT: u32 = 41;

/// The first fields of `struct perf_event_attr` (`PERF_ATTR_SIZE_VER0`, 64 bytes).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    /// Bit 0: `disabled`.
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

/// The `link_create` member of `union bpf_attr`, zero-padded.
#[repr(C)]
#[derive(Default)]
struct LinkCreate {
    prog_fd: u32,
    target_fd: u32,
    attach_type: u32,
    flags: u32,
    pad: [u64; 6],
}

/// Opens a disabled perf event on tracepoint `syscalls:<tp>` (all processes, CPU 0:
/// a tracepoint's BPF programs run on every CPU whatever the event's CPU).
///
/// Errors: the tracepoint's id unreadable (`<tracefs>/events/syscalls/<tp>/id`), or
/// perf_event_open failing.
pub fn open_tracepoint(tracefs_root: &Path, tp: &str) -> io::Result<OwnedFd> {
    let path = tracefs_root.join("events/syscalls").join(tp).join("id");
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::fs::File::open(&path)?.take(32), &mut text)?;
    let id: u64 = text
        .trim()
        .parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("{}", path.display())))?;
    let attr = PerfEventAttr {
        kind: PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: id,
        flags: 1,
        ..Default::default()
    };
    // SAFETY: `attr` is a valid perf_event_attr of the size it declares; the returned fd
    // is owned by nobody else.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            -1 as libc::pid_t,
            0 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd from the kernel, owned here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Links program `prog` to perf event `event`: the program runs on the tracepoint until
/// the returned link fd is closed (which detaches it without releasing the event).
///
/// Errors: bpf(BPF_LINK_CREATE) failing.
pub fn link(prog: BorrowedFd<'_>, event: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let attr = LinkCreate {
        prog_fd: prog.as_raw_fd() as u32,
        target_fd: event.as_raw_fd() as u32,
        attach_type: BPF_PERF_EVENT,
        ..Default::default()
    };
    // SAFETY: `attr` is a zero-padded bpf_attr prefix of the size passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_LINK_CREATE,
            &attr as *const LinkCreate,
            std::mem::size_of::<LinkCreate>() as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd from the kernel, owned here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
