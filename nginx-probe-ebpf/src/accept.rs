//! Accepts: counted in nginx's own code by the `ngx_get_connection` uprobe, so
//! `--detail sampled` keeps them exact with no syscall tracepoint between windows; and
//! the accept-then-close detector on `close` (nginx refusing a connection it had no
//! free `ngx_connection_t` for).

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_probe_read_user},
    macros::{tracepoint, uprobe},
    programs::{ProbeContext, TracePointContext},
};
use nginx_probe_common::off;

use crate::{
    fds::{fd_file, kread, AF_INET, AF_INET6, AF_UNIX, S_IFMT, S_IFSOCK},
    helpers::{count_in_slot, detail_closed, record_word},
    maps::{ACCEPTED, ACCEPT_CALLER, ACCEPT_CLOSE, GET_CONN_FRAME, LAST_ACCEPT},
    upstream::upstream_close,
    workers::worker_slot,
};

/// Whether this call of `ngx_get_connection` (entered at `ip`) returns into
/// `ngx_event_accept`: its return address `ret` minus the probed function's address
/// falls in [`ACCEPT_CALLER`]'s range. One read of the worker's stack instead of the
/// five kernel reads of [`is_accepted_socket`]. None when the range is unknown or the
/// stack could not be read (then the fd table decides).
#[inline(always)]
fn called_from_accept(ret: Option<u64>, ip: u64) -> Option<bool> {
    let [lo, hi] = *ACCEPT_CALLER.get(0)?;
    if lo == hi {
        return None;
    }
    let ret = ret?;
    Some(ret.wrapping_sub(ip).wrapping_sub(lo) < hi.wrapping_sub(lo))
}

/// `socket_state` of a socket `accept` returned (`SS_CONNECTED`).
const SS_CONNECTED: u32 = 3;

/// Whether the current task's `fd` is an accepted connection: a socket in state
/// `SS_CONNECTED` that is IPv4/IPv6, or Unix with an address (a socketpair, such as
/// nginx's channel to its master, has none). Listening sockets and sockets not yet
/// connected are `SS_UNCONNECTED`.
#[inline(always)]
fn is_accepted_socket(fd: u64) -> bool {
    let Some(file) = fd_file(fd) else {
        return false;
    };
    let Some(inode) = kread::<u64>(file, off::FILE_INODE) else {
        return false;
    };
    if kread::<u16>(inode, off::INODE_MODE).map(|m| m & S_IFMT) != Some(S_IFSOCK) {
        return false;
    }
    let Some(sock) = kread::<u64>(file, off::FILE_PRIVATE) else {
        return false;
    };
    if kread::<u32>(sock, off::SOCKET_STATE) != Some(SS_CONNECTED) {
        return false;
    }
    let Some(sk) = kread::<u64>(sock, off::SOCKET_SK) else {
        return false;
    };
    match kread::<u16>(sk, off::SK_FAMILY) {
        Some(AF_INET) | Some(AF_INET6) => true,
        Some(AF_UNIX) => matches!(kread::<u64>(sk, off::UNIX_ADDR), Some(a) if a != 0),
        _ => false,
    }
}

/// `ngx_connection_t *ngx_get_connection(ngx_socket_t s, ngx_log_t *log)`, in
/// nginx's binary. `ngx_event_accept` calls it once for every fd `accept4`/`accept`
/// returned, before it knows whether a free connection is left, so counting the
/// calls made from `ngx_event_accept` counts accepts exactly, per worker, for every
/// TCP and unix-socket protocol (http, stream, mail; stream UDP sessions and QUIC come
/// from `ngx_event_recvmsg`, unconnected, and are not accepts). Other callers
/// (upstream, resolver, the listening sockets and the channel at worker start) are not
/// counted. The caller is told by the return address ([`called_from_accept`]); where
/// that range is unknown, by the fd: an accepted socket ([`is_accepted_socket`]) is
/// counted, sockets not connected yet and socketpairs are not.
///
/// Every call also notes its frame in [`GET_CONN_FRAME`] (the stack slot of its return
/// address, the 8 bytes at the stack pointer on entry, and that address): closes made
/// while the slot still holds it are made inside the call, where nginx closes reusable
/// connections at `worker_connections` (`lifecycle::in_get_connection`).
#[uprobe]
pub fn ngx_get_connection(ctx: ProbeContext) -> u32 {
    let Some(slot) = worker_slot() else { return 0 };
    // SAFETY: a uprobe's context is the task's user registers.
    let (sp, ip) = unsafe { ((*ctx.regs).rsp, (*ctx.regs).rip) };
    // SAFETY: reads 8 bytes of the worker's stack; failure is handled.
    let ret: Option<u64> = unsafe { bpf_probe_read_user(sp as *const u64) }.ok();
    if let (Some(r), Some(p)) = (ret, GET_CONN_FRAME.get_ptr_mut(slot)) {
        // SAFETY: only this worker's main thread writes its element.
        unsafe { *p = [sp, r] };
    }
    let accepted = match called_from_accept(ret, ip) {
        Some(a) => a,
        None => match ctx.arg::<u64>(0) {
            Some(s) => is_accepted_socket(s & 0xffff_ffff),
            None => false,
        },
    };
    if accepted {
        count_in_slot(&ACCEPTED, slot);
    }
    0
}

/// `close(fd)` by a worker's main thread: if `fd` is the connection it just accepted,
/// with no traced syscall in between, nginx had no free connection for it. Also
/// closes the books on upstream fds.
#[tracepoint]
pub fn close_after_accept(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if pid_tgid as u32 != tgid {
        return 0;
    }
    let Some(slot) = worker_slot() else { return 0 };
    if detail_closed() {
        return 0;
    }
    upstream_close(tgid, slot, record_word(&ctx));
    let Some(last) = LAST_ACCEPT.get_ptr_mut(slot) else {
        return 0;
    };
    // SAFETY: only this worker's main thread reads and writes it.
    let pending = unsafe { *last };
    if pending == 0 {
        return 0;
    }
    // SAFETY: as above.
    unsafe { *last = 0 };
    let fd = record_word(&ctx);
    if (fd & 0xffff_ffff) + 1 == pending {
        if let Some(n) = ACCEPT_CLOSE.get_ptr_mut(slot) {
            // SAFETY: only this worker's main thread writes this element.
            unsafe { *n += 1 };
        }
    }
    0
}
