//! Upstream connections: `connect()` outcomes and latency (at the call, or learned by
//! nginx's `getsockopt(SO_ERROR)` for a non-blocking connect), and the upstream fds a
//! worker holds until their `close()`. Main thread only: nginx's event loop.

use aya_ebpf::{
    helpers::{bpf_ktime_get_ns, bpf_probe_read_user},
    macros::tracepoint,
    programs::TracePointContext,
};
use nginx_probe_common::{
    connect_err_class, drop, sys, SyscallStats, UpstreamCall, EINPROGRESS, UPSTREAM_CONNECT,
    UPSTREAM_FDS, UPSTREAM_STATS,
};

use crate::{
    helpers::{count_drop, detail_closed, record_arg, record_word},
    maps::{UPSTREAM, UPSTREAM_FD, UP_CALL},
    syscalls::{on_enter, on_exit},
    workers::main_thread_slot,
};

#[inline(always)]
fn upstream_stats(slot: u32, which: u32) -> Option<&'static mut SyscallStats> {
    let p = UPSTREAM.get_ptr_mut(slot * UPSTREAM_STATS + which)?;
    // SAFETY: written by the worker's main thread only.
    Some(unsafe { &mut *p })
}

/// The `UPSTREAM_FD` key of a worker's fd.
#[inline(always)]
fn fd_key(tgid: u32, fd: u64) -> u64 {
    ((tgid as u64) << 32) | (fd & 0xffff_ffff)
}

/// A connect's result is known (`err` = 0 or a positive errno) `ns` after it began.
#[inline(always)]
fn connect_result(slot: u32, err: i64, ns: u64) {
    if let Some(c) = upstream_stats(slot, UPSTREAM_CONNECT) {
        if err == 0 {
            c.ret_sum += 1;
        } else {
            c.errors += 1;
            let k = connect_err_class(err);
            if k < c.errs.len() {
                c.errs[k] += 1;
            }
        }
        c.record_ns(ns);
    }
}

/// The main thread enters a connect (`optval` 0) or a getsockopt(SO_ERROR): what its
/// exit needs, in `UP_CALL`.
#[inline(always)]
fn begin_up_call(slot: u32, call: UpstreamCall) {
    if let Some(p) = UP_CALL.get_ptr_mut(slot) {
        // SAFETY: this worker's main thread only.
        unsafe { *p = call };
    }
}

/// At the exit of a connect (`getsockopt` false) or a getsockopt(SO_ERROR) (true) by a
/// worker's main thread, inside a detail window: (tgid, slot, the call its entry
/// stored), which is cleared; None when its entry stored none.
#[inline(always)]
fn end_up_call(getsockopt: bool) -> Option<(u32, u32, UpstreamCall)> {
    if detail_closed() {
        return None;
    }
    let (tgid, slot) = main_thread_slot()?;
    let p = UP_CALL.get_ptr_mut(slot)?;
    // SAFETY: this worker's main thread only.
    let call = unsafe { *p };
    if call.fd1 == 0 || (call.optval != 0) != getsockopt {
        return None;
    }
    // SAFETY: as above.
    unsafe { (*p).fd1 = 0 };
    Some((tgid, slot, call))
}

/// `connect(fd, ...)` entry: remember the fd and the start.
#[tracepoint]
pub fn sys_enter_connect(ctx: TracePointContext) -> u32 {
    on_enter(&ctx, sys::CONNECT);
    if detail_closed() {
        return 0;
    }
    let Some((_, slot)) = main_thread_slot() else {
        return 0;
    };
    let call = UpstreamCall {
        fd1: (record_word(&ctx) & 0xffff_ffff) + 1,
        // SAFETY: helper call without preconditions.
        start_ns: unsafe { bpf_ktime_get_ns() },
        optval: 0,
    };
    begin_up_call(slot, call);
    0
}

/// `connect()` exit: the fd becomes an upstream fd; a result at once (0 or an
/// error) is recorded now, `EINPROGRESS` waits for getsockopt(SO_ERROR). A full
/// `UPSTREAM_FD` is counted in `DROPS` (`upstream_fd_full`).
#[tracepoint]
pub fn sys_exit_connect(ctx: TracePointContext) -> u32 {
    on_exit(&ctx, sys::CONNECT);
    let Some((tgid, slot, call)) = end_up_call(false) else {
        return 0;
    };
    let ret = record_word(&ctx) as i64;
    // SAFETY: helper call without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let key = fd_key(tgid, call.fd1 - 1);
    let pending = if ret == -EINPROGRESS {
        call.start_ns
    } else {
        0
    };
    let Some(c) = upstream_stats(slot, UPSTREAM_CONNECT) else {
        return 0;
    };
    c.count += 1;
    // SAFETY: the value is copied out at once.
    let known = unsafe { UPSTREAM_FD.get(key) }.is_some();
    if UPSTREAM_FD.insert(key, pending, 0).is_err() {
        count_drop(drop::UPSTREAM_FD_FULL);
    } else if !known {
        if let Some(f) = upstream_stats(slot, UPSTREAM_FDS) {
            f.count += 1;
        }
    }
    if ret == -EINPROGRESS {
        if let Some(f) = upstream_stats(slot, UPSTREAM_FDS) {
            f.timed += 1;
        }
    } else {
        connect_result(
            slot,
            if ret < 0 { -ret } else { 0 },
            now.saturating_sub(call.start_ns),
        );
    }
    0
}

/// `getsockopt(fd, SOL_SOCKET, SO_ERROR, optval, ...)` entry on an upstream fd whose
/// connect is in progress: nginx is about to learn the result.
#[tracepoint]
pub fn sys_enter_getsockopt(ctx: TracePointContext) -> u32 {
    on_enter(&ctx, sys::GETSOCKOPT);
    if detail_closed() {
        return 0;
    }
    let Some((tgid, slot)) = main_thread_slot() else {
        return 0;
    };
    // SOL_SOCKET = 1, SO_ERROR = 4.
    if record_arg::<1>(&ctx) != 1 || record_arg::<2>(&ctx) != 4 {
        return 0;
    }
    let fd = record_word(&ctx) & 0xffff_ffff;
    // SAFETY: copied out at once.
    let start = match unsafe { UPSTREAM_FD.get(fd_key(tgid, fd)) } {
        Some(&s) if s != 0 => s,
        _ => return 0,
    };
    let optval = record_arg::<3>(&ctx);
    if optval == 0 {
        return 0;
    }
    let call = UpstreamCall {
        fd1: fd + 1,
        start_ns: start,
        optval,
    };
    begin_up_call(slot, call);
    0
}

/// `getsockopt(SO_ERROR)` exit: the connect's result (0 or the errno nginx reads).
#[tracepoint]
pub fn sys_exit_getsockopt(ctx: TracePointContext) -> u32 {
    on_exit(&ctx, sys::GETSOCKOPT);
    let Some((tgid, slot, call)) = end_up_call(true) else {
        return 0;
    };
    if (record_word(&ctx) as i64) < 0 {
        return 0;
    }
    // SAFETY: reads 4 bytes the syscall just wrote in the worker's memory.
    let Ok(err) = (unsafe { bpf_probe_read_user(call.optval as *const i32) }) else {
        return 0;
    };
    // SAFETY: helper call without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let _ = UPSTREAM_FD.insert(fd_key(tgid, call.fd1 - 1), 0, 0);
    connect_result(slot, err as i64, now.saturating_sub(call.start_ns));
    0
}

/// `close(fd)` of an upstream fd by the main thread: counted as closed, and as
/// abandoned when its connect's result was never learned.
#[inline(always)]
pub(crate) fn upstream_close(tgid: u32, slot: u32, fd: u64) {
    let Some(f) = upstream_stats(slot, UPSTREAM_FDS) else {
        return;
    };
    if f.count <= f.errors {
        return; // no upstream fd open in this worker: no lookup
    }
    let key = fd_key(tgid, fd);
    // SAFETY: copied out at once.
    let Some(v) = (unsafe { UPSTREAM_FD.get(key) }).copied() else {
        return;
    };
    let _ = UPSTREAM_FD.remove(key);
    f.errors += 1;
    if v != 0 {
        f.ret_sum += 1;
    }
}
