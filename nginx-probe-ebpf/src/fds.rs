//! What a worker's fd is, read from the kernel's own structures at the moment of the
//! call: the fd table walk (`task->files->fdt->fd[fd]`) with the struct offsets user
//! space found in the kernel's BTF (`KOFF`), and the classification of a `struct file`
//! into a `nginx_probe_common::fd_kind`.

use aya_ebpf::helpers::{bpf_get_current_task, bpf_probe_read_kernel};
use nginx_probe_common::{fd_kind, off, OFF_COUNT};

use crate::{
    helpers::global,
    maps::{ERROR_LOGS, FD_WALK, KOFF, LISTEN_PORTS},
};

/// `S_IFMT`: the file type bits of `i_mode`.
pub(crate) const S_IFMT: u16 = 0o170000;
/// `S_IFSOCK`: a socket.
pub(crate) const S_IFSOCK: u16 = 0o140000;
const S_IFREG: u16 = 0o100000;
const S_IFCHR: u16 = 0o020000;
const S_IFBLK: u16 = 0o060000;
/// `O_ACCMODE`: the access mode bits of `f_flags` (0 = read-only).
pub(crate) const O_ACCMODE: u32 = 0o3;
/// `O_APPEND`.
pub(crate) const O_APPEND: u32 = 0o2000;
/// `AF_UNIX`.
pub(crate) const AF_UNIX: u16 = 1;
/// `AF_INET`.
pub(crate) const AF_INET: u16 = 2;
/// `AF_INET6`.
pub(crate) const AF_INET6: u16 = 10;
/// `ANON_INODE_FS_MAGIC`: eventfd, epoll, signalfd... (S_IFREG on recent kernels).
const ANON_INODE_FS_MAGIC: u64 = 0x0904_1934;

/// Kernel offset `i` of `nginx_probe_common::off`, bytes; `u64::MAX` when absent.
#[inline(always)]
pub(crate) fn koff(i: usize) -> u64 {
    if i < OFF_COUNT {
        global(&KOFF[i])
    } else {
        u64::MAX
    }
}

/// Reads a `T` at kernel address `base + koff(field)`.
#[inline(always)]
pub(crate) fn kread<T>(base: u64, field: usize) -> Option<T> {
    if base == 0 {
        return None;
    }
    // SAFETY: bpf_probe_read_kernel copes with any address (faults return Err).
    unsafe { bpf_probe_read_kernel((base.wrapping_add(koff(field))) as *const T) }.ok()
}

/// Whether writes are classified by the fd table walk (`FD_WALK`), else from the
/// `FD_KINDS` map user space fills from /proc.
#[inline(always)]
pub(crate) fn fd_walk() -> bool {
    global(&FD_WALK) == 1
}

/// The current task's `struct file *` of `fd`, now: `task->files->fdt->fd[fd]`
/// read with the BTF offsets; None when the table cannot be read or the fd is not
/// open.
#[inline(always)]
pub(crate) fn fd_file(fd: u64) -> Option<u64> {
    // SAFETY: helper call without preconditions.
    let task = unsafe { bpf_get_current_task() };
    let files = kread::<u64>(task, off::TASK_FILES)?;
    let fdt = kread::<u64>(files, off::FILES_FDT)?;
    let max = kread::<u32>(fdt, off::FDT_MAX_FDS)?;
    if fd >= max as u64 {
        return None;
    }
    let arr = kread::<u64>(fdt, off::FDT_FD)?;
    // SAFETY: as in kread.
    match unsafe { bpf_probe_read_kernel((arr + fd * 8) as *const u64) } {
        Ok(f) if f != 0 => Some(f),
        _ => None,
    }
}

/// What the current task's `fd` is, now (see `classify_file`).
#[inline(always)]
pub(crate) fn classify_fd(fd: u64) -> u32 {
    match fd_file(fd) {
        Some(file) => classify_file(file),
        None => fd_kind::UNKNOWN,
    }
}

/// What `struct file` `file` is: a `fd_kind` value; UNKNOWN when it cannot be read.
#[inline(always)]
pub(crate) fn classify_file(file: u64) -> u32 {
    let Some(inode) = kread::<u64>(file, off::FILE_INODE) else {
        return fd_kind::UNKNOWN;
    };
    let Some(mode) = kread::<u16>(inode, off::INODE_MODE) else {
        return fd_kind::UNKNOWN;
    };
    let fmt = mode & S_IFMT;
    if fmt == S_IFSOCK {
        return classify_socket(file);
    }
    // Files, pipes, devices: an error log is known by its inode number, whatever
    // its type (a file, or the pipe or tty of `error_log stderr`).
    if fmt == S_IFREG {
        return classify_regular(file, inode);
    }
    if is_error_log(inode) {
        return fd_kind::ERROR_LOG;
    }
    if fmt == S_IFCHR || fmt == S_IFBLK {
        return fd_kind::OTHER_FILE;
    }
    fd_kind::OTHER
}

/// A socket's kind: TCP by its local port (one of nginx's listening ports: a client),
/// unix by its address (bound: a client accepted from a unix listener).
#[inline(always)]
fn classify_socket(file: u64) -> u32 {
    let Some(sock) = kread::<u64>(file, off::FILE_PRIVATE) else {
        return fd_kind::UNKNOWN;
    };
    let Some(sk) = kread::<u64>(sock, off::SOCKET_SK) else {
        return fd_kind::UNKNOWN;
    };
    let Some(family) = kread::<u16>(sk, off::SK_FAMILY) else {
        return fd_kind::UNKNOWN;
    };
    if family == AF_INET || family == AF_INET6 {
        let Some(port) = kread::<u16>(sk, off::SK_NUM) else {
            return fd_kind::UNKNOWN;
        };
        // SAFETY: presence only.
        return if unsafe { LISTEN_PORTS.get(port) }.is_some() {
            fd_kind::CLIENT
        } else {
            fd_kind::UPSTREAM
        };
    }
    if family == AF_UNIX {
        if koff(off::UNIX_ADDR) == u64::MAX {
            return fd_kind::UNKNOWN;
        }
        return match kread::<u64>(sk, off::UNIX_ADDR) {
            Some(0) => fd_kind::UPSTREAM,
            Some(_) => fd_kind::CLIENT,
            None => fd_kind::UNKNOWN,
        };
    }
    fd_kind::OTHER
}

/// A regular file's kind: read-only (a file served), an error log (by inode), an
/// anonymous inode, an access log (`O_APPEND`) or a temp file.
#[inline(always)]
fn classify_regular(file: u64, inode: u64) -> u32 {
    let flags = kread::<u32>(file, off::FILE_FLAGS).unwrap_or(0);
    if flags & O_ACCMODE == 0 {
        // Read-only: a file served, not a write destination (and not an
        // access-log open).
        return fd_kind::OTHER_FILE;
    }
    if is_error_log(inode) {
        return fd_kind::ERROR_LOG;
    }
    let Some(sb) = kread::<u64>(inode, off::INODE_SB) else {
        return fd_kind::UNKNOWN;
    };
    if kread::<u64>(sb, off::SB_MAGIC) == Some(ANON_INODE_FS_MAGIC) {
        return fd_kind::OTHER;
    }
    if flags & O_APPEND != 0 {
        fd_kind::ACCESS_LOG
    } else {
        fd_kind::TEMP_FILE
    }
}

/// Whether `inode`'s number is one of the error logs' (`ERROR_LOGS`).
// The key's address is what the helper takes; the borrow stays explicit.
#[allow(clippy::needless_borrows_for_generic_args)]
#[inline(always)]
fn is_error_log(inode: u64) -> bool {
    let ino = kread::<u64>(inode, off::INODE_INO).unwrap_or(0);
    // SAFETY: presence only.
    unsafe { ERROR_LOGS.get(&ino) }.is_some()
}
