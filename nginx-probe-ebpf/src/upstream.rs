// Upstream connections (connect, getsockopt(SO_ERROR), close of upstream fds) and the
// exit-only counting of fd-creating syscalls. Part of `programs` in main.rs, pasted there
// with `include!` (the eBPF statics and helpers it uses are that module's), kept in its
// own file for size.

/// Exit of an fd-creating syscall that is not timed: counts the call and its errors
/// by class (EMFILE, ENFILE) in `STATS`; no entry timestamp is involved.
#[inline(always)]
fn count_exit(ctx: &TracePointContext, syscall: u32) {
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    let Some(slot) = slot_of(tgid) else { return };
    if !is_rare(syscall) && detail_closed() {
        return;
    }
    let ret = record_word(ctx) as i64;
    let Some(s) = STATS.get_ptr_mut(slot * SYSCALL_COUNT as u32 + syscall) else {
        count_drop(drop::SLOT_OUT_OF_RANGE);
        return;
    };
    // SAFETY: per-CPU slot; tracepoint programs do not nest on one CPU.
    let s = unsafe { &mut *s };
    s.count += 1;
    if ret < 0 {
        s.errors += 1;
        let c = ErrClass::from_ret(ret) as usize;
        if c < s.errs.len() {
            s.errs[c] += 1;
        }
    }
}

/// The main thread of a worker: its slot (None for other threads and processes).
#[inline(always)]
fn main_thread_slot() -> Option<(u32, u32)> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if pid_tgid as u32 != tgid {
        return None;
    }
    slot_of(tgid).map(|s| (tgid, s))
}

#[inline(always)]
fn upstream_stats(slot: u32, which: u32) -> Option<&'static mut SyscallStats> {
    let p = UPSTREAM.get_ptr_mut(slot * UPSTREAM_STATS + which)?;
    // SAFETY: written by the worker's main thread only.
    Some(unsafe { &mut *p })
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
    if let Some(p) = UP_CALL.get_ptr_mut(slot) {
        let fd = record_word(&ctx) & 0xffff_ffff;
        // SAFETY: this worker's main thread only.
        unsafe {
            *p = UpstreamCall {
                fd1: fd + 1,
                start_ns: bpf_ktime_get_ns(),
                optval: 0,
            }
        };
    }
    0
}

/// `connect()` exit: the fd becomes an upstream fd; a result at once (0 or an
/// error) is recorded now, `EINPROGRESS` waits for getsockopt(SO_ERROR).
#[tracepoint]
pub fn sys_exit_connect(ctx: TracePointContext) -> u32 {
    on_exit(&ctx, sys::CONNECT);
    if detail_closed() {
        return 0;
    }
    let Some((tgid, slot)) = main_thread_slot() else {
        return 0;
    };
    let Some(p) = UP_CALL.get_ptr_mut(slot) else {
        return 0;
    };
    // SAFETY: this worker's main thread only.
    let call = unsafe { *p };
    if call.fd1 == 0 || call.optval != 0 {
        return 0;
    }
    // SAFETY: as above.
    unsafe { (*p).fd1 = 0 };
    let ret = record_word(&ctx) as i64;
    // SAFETY: helper call without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let key = ((tgid as u64) << 32) | (call.fd1 - 1);
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
    let start = match unsafe { UPSTREAM_FD.get(((tgid as u64) << 32) | fd) } {
        Some(&s) if s != 0 => s,
        _ => return 0,
    };
    let optval = record_arg::<3>(&ctx);
    if optval == 0 {
        return 0;
    }
    if let Some(p) = UP_CALL.get_ptr_mut(slot) {
        // SAFETY: this worker's main thread only.
        unsafe {
            *p = UpstreamCall {
                fd1: fd + 1,
                start_ns: start,
                optval,
            }
        };
    }
    0
}

/// `getsockopt(SO_ERROR)` exit: the connect's result (0 or the errno nginx reads).
#[tracepoint]
pub fn sys_exit_getsockopt(ctx: TracePointContext) -> u32 {
    on_exit(&ctx, sys::GETSOCKOPT);
    if detail_closed() {
        return 0;
    }
    let Some((tgid, slot)) = main_thread_slot() else {
        return 0;
    };
    let Some(p) = UP_CALL.get_ptr_mut(slot) else {
        return 0;
    };
    // SAFETY: this worker's main thread only.
    let call = unsafe { *p };
    if call.fd1 == 0 || call.optval == 0 {
        return 0;
    }
    // SAFETY: as above.
    unsafe { (*p).fd1 = 0 };
    if (record_word(&ctx) as i64) < 0 {
        return 0;
    }
    // SAFETY: reads 4 bytes the syscall just wrote in the worker's memory.
    let Ok(err) = (unsafe { bpf_probe_read_user(call.optval as *const i32) }) else {
        return 0;
    };
    // SAFETY: helper call without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let key = ((tgid as u64) << 32) | (call.fd1 - 1);
    let _ = UPSTREAM_FD.insert(key, 0, 0);
    connect_result(slot, err as i64, now.saturating_sub(call.start_ns));
    0
}

/// `close(fd)` of an upstream fd by the main thread: counted as closed, and as
/// abandoned when its connect's result was never learned.
#[inline(always)]
fn upstream_close(tgid: u32, slot: u32, fd: u64) {
    let Some(f) = upstream_stats(slot, UPSTREAM_FDS) else {
        return;
    };
    if f.count <= f.errors {
        return; // no upstream fd open in this worker: no lookup
    }
    let key = ((tgid as u64) << 32) | (fd & 0xffff_ffff);
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
