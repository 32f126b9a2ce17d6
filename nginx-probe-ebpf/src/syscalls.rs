//! The syscall tracepoints: a timed enter/exit pair per traced syscall
//! (`sys_enter_<tracepoint>`/`sys_exit_<tracepoint>`), exit-only counting of the
//! fd-creating ones (`count_exit_<tracepoint>`), and the access-log open counter on
//! `openat`'s exit. Per event cost for a process that is not a worker: one array load
//! (`FILTER`), then return. For a worker: entry stores a timestamp (the main thread in
//! an array, other threads in an LRU map); exit takes it and updates one per-CPU
//! `SyscallStats` element.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::tracepoint,
    programs::TracePointContext,
};
use nginx_probe_common::{
    drop, fd_kind, is_rare, off, sys, InFlight, SyscallStats, EINPROGRESS, FD_KIND_COUNT,
    SYSCALL_COUNT,
};

use crate::{
    fds::{classify_fd, classify_file, fd_file, fd_walk, kread, O_ACCMODE, O_APPEND},
    helpers::{count_drop, count_error, detail_closed, record_word},
    maps::{
        FD_KINDS, IN_FLIGHT, LAST_ACCEPT, LAST_WAKE, LOG_OPENS, LOOP, MAIN_ENTRY, STATS, WRITES,
    },
    workers::{slot_of, worker_slot},
};

#[inline(always)]
fn is_epoll(syscall: u32) -> bool {
    syscall == sys::EPOLL_WAIT || syscall == sys::EPOLL_PWAIT || syscall == sys::EPOLL_PWAIT2
}

#[inline(always)]
fn is_write(syscall: u32) -> bool {
    syscall == sys::WRITE
        || syscall == sys::WRITEV
        || syscall == sys::PWRITE64
        || syscall == sys::PWRITEV
}

#[inline(always)]
fn is_accept(syscall: u32) -> bool {
    syscall == sys::ACCEPT4 || syscall == sys::ACCEPT
}

/// The worker's main thread calls epoll_wait again at `now`: the loop iteration
/// that started at its last wake-up ends; account its busy time.
#[inline(always)]
fn loop_iteration_ends(slot: u32, now: u64) {
    let Some(last) = LAST_WAKE.get_ptr_mut(slot) else {
        return;
    };
    // SAFETY: only this worker's main thread reads and writes it.
    let woke = unsafe { *last };
    if woke == 0 {
        return;
    }
    let Some(s) = LOOP.get_ptr_mut(slot) else {
        return;
    };
    // SAFETY: as above.
    let s = unsafe { &mut *s };
    s.count += 1;
    s.record_ns(now.saturating_sub(woke));
}

/// The `fd_kind` of the fd a write goes to (its first argument): from the fd table
/// walk, else from `FD_KINDS`; `SOCKET` for syscalls that are not writes.
#[inline(always)]
fn write_destination(ctx: &TracePointContext, tgid: u32, syscall: u32) -> u32 {
    if !is_write(syscall) {
        return fd_kind::SOCKET;
    }
    // `fd` is the first argument of write/writev/pwrite64/pwritev.
    let fd = record_word(ctx) & 0xffff_ffff;
    if fd_walk() {
        return classify_fd(fd);
    }
    let key = ((tgid as u64) << 32) | fd;
    // SAFETY: copied out immediately.
    match unsafe { FD_KINDS.get(key) } {
        Some(k) => *k,
        None => fd_kind::SOCKET,
    }
}

/// Entry of a traced syscall in a worker: stores the timestamp (and for writes, the
/// destination's kind).
#[inline(always)]
pub(crate) fn on_enter(ctx: &TracePointContext, syscall: u32) {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    let Some(slot) = slot_of(tgid) else { return };
    if !is_rare(syscall) && detail_closed() {
        return;
    }
    let kind = write_destination(ctx, tgid, syscall);
    let v = InFlight {
        // SAFETY: helper call without preconditions.
        start_ns: unsafe { bpf_ktime_get_ns() },
        syscall,
        fd_kind: kind,
    };
    // nginx workers are single-threaded: their main thread (tid == tgid) keeps its
    // entry in a plain array indexed by slot, far cheaper than an LRU hash update.
    // Other threads (aio thread pools) use the LRU hash.
    if pid_tgid as u32 != tgid {
        if IN_FLIGHT.insert(pid_tgid, v, 0).is_err() {
            count_drop(drop::ENTRY_STORE_FAILED);
        }
        return;
    }
    if is_epoll(syscall) {
        loop_iteration_ends(slot, v.start_ns);
    }
    // Another traced syscall between accept and close means a normal path; the
    // error-log line nginx writes on its way to refusing ("worker_connections
    // are not enough") does not.
    if !is_accept(syscall) && !(is_write(syscall) && kind == fd_kind::ERROR_LOG) {
        if let Some(p) = LAST_ACCEPT.get_ptr_mut(slot) {
            // SAFETY: only this worker's main thread writes this element.
            unsafe { *p = 0 };
        }
    }
    match MAIN_ENTRY.get_ptr_mut(slot) {
        // SAFETY: only this worker's main thread writes this element.
        Some(p) => unsafe { *p = v },
        None => {
            count_drop(drop::ENTRY_STORE_FAILED);
        }
    }
}

/// The entry the current thread stored for its syscall, removed; `start_ns` 0 when
/// there is none.
#[inline(always)]
fn take_entry(pid_tgid: u64, slot: u32, main_thread: bool) -> InFlight {
    // Fully initialised up front (start_ns 0 = no entry): the verifier rejects code
    // that reads a register on a path where it was never written, which an
    // Option's payload can compile to.
    let mut entry = InFlight {
        start_ns: 0,
        syscall: u32::MAX,
        fd_kind: fd_kind::SOCKET,
    };
    if main_thread {
        if let Some(p) = MAIN_ENTRY.get_ptr_mut(slot) {
            // SAFETY: only this worker's main thread reads and writes it.
            unsafe {
                entry = *p;
                (*p).start_ns = 0;
            }
        }
    } else {
        // SAFETY: the entry is copied out before removal.
        if let Some(e) = unsafe { IN_FLIGHT.get(pid_tgid) } {
            entry = *e;
            let _ = IN_FLIGHT.remove(pid_tgid);
        }
    }
    entry
}

/// What a main thread's return tells the accept-then-close detector (`LAST_ACCEPT`:
/// the fd just accepted) and the event loop (`LAST_WAKE`: an iteration starts).
#[inline(always)]
fn main_thread_returns(slot: u32, syscall: u32, ret: i64, now: u64) {
    if is_accept(syscall) && ret >= 0 {
        if let Some(p) = LAST_ACCEPT.get_ptr_mut(slot) {
            // SAFETY: only this worker's main thread writes this element.
            unsafe { *p = ret as u64 + 1 };
        }
    }
    if is_epoll(syscall) {
        // The event loop wakes up: an iteration starts.
        if let Some(p) = LAST_WAKE.get_ptr_mut(slot) {
            // SAFETY: only this worker's main thread writes this element.
            unsafe { *p = now };
        }
    }
}

/// The `STATS` element of (`slot`, `syscall`); None (counted as `SLOT_OUT_OF_RANGE`)
/// when the slot is outside the map.
#[inline(always)]
fn syscall_stats(slot: u32, syscall: u32) -> Option<&'static mut SyscallStats> {
    match STATS.get_ptr_mut(slot * SYSCALL_COUNT as u32 + syscall) {
        // SAFETY: per-CPU slot; tracepoint programs do not nest on one CPU.
        Some(p) => Some(unsafe { &mut *p }),
        None => {
            count_drop(drop::SLOT_OUT_OF_RANGE);
            None
        }
    }
}

/// Counts a return in `s`: the call, its error class, or its return value summed
/// (bytes, events) where that means something.
#[inline(always)]
fn count_return(s: &mut SyscallStats, syscall: u32, ret: i64) {
    s.count += 1;
    if ret < 0 && !(syscall == sys::CONNECT && ret == -EINPROGRESS) {
        count_error(s, ret);
    } else if ret >= 0 && !is_accept(syscall) && syscall != sys::OPENAT {
        s.ret_sum += ret as u64;
    }
}

/// A timed write also counts by destination (the kind was looked up at entry).
#[inline(always)]
fn count_write(slot: u32, kind: u32, ret: i64, latency: u64) {
    if kind >= FD_KIND_COUNT as u32 {
        return;
    }
    if let Some(w) = WRITES.get_ptr_mut(slot * FD_KIND_COUNT as u32 + kind) {
        // SAFETY: per-CPU slot.
        let w = unsafe { &mut *w };
        w.count += 1;
        if ret < 0 {
            w.errors += 1;
        } else {
            w.ret_sum += ret as u64;
        }
        w.record_ns(latency);
    }
}

/// Exit of a traced syscall in a worker: counts it, times it against its entry, and
/// keeps the main thread's accept and event-loop marks.
#[inline(always)]
pub(crate) fn on_exit(ctx: &TracePointContext, syscall: u32) {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    let Some(slot) = slot_of(tgid) else { return };
    if !is_rare(syscall) && detail_closed() {
        return;
    }
    let ret = record_word(ctx) as i64;
    let main_thread = pid_tgid as u32 == tgid;
    let entry = take_entry(pid_tgid, slot, main_thread);
    // SAFETY: helper call without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    if main_thread {
        main_thread_returns(slot, syscall, ret, now);
    }
    let mut latency: u64 = 0;
    let mut timed = false;
    if entry.start_ns == 0 {
        count_drop(drop::EXIT_WITHOUT_ENTRY);
    } else if entry.syscall != syscall {
        count_drop(drop::ENTRY_MISMATCH);
    } else {
        latency = now.saturating_sub(entry.start_ns);
        timed = true;
    }
    let Some(s) = syscall_stats(slot, syscall) else {
        return;
    };
    count_return(s, syscall, ret);
    if timed {
        s.record_ns(latency);
        if is_write(syscall) {
            count_write(slot, entry.fd_kind, ret, latency);
        }
    }
}

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
    let Some(s) = syscall_stats(slot, syscall) else {
        return;
    };
    s.count += 1;
    if ret < 0 {
        count_error(s, ret);
    }
}

/// `openat` returns in a worker: if the new fd is an access log, count an open.
#[tracepoint]
pub fn access_log_open(ctx: TracePointContext) -> u32 {
    let Some(slot) = worker_slot() else { return 0 };
    if detail_closed() {
        return 0;
    }
    let ret = record_word(&ctx) as i64;
    if ret < 0 || !fd_walk() {
        return 0;
    }
    let Some(file) = fd_file(ret as u64) else {
        return 0;
    };
    // Most opens are of files to serve (read-only): rejected on their flags, before
    // the rest of the classification.
    let flags = kread::<u32>(file, off::FILE_FLAGS).unwrap_or(0);
    if flags & O_APPEND == 0 || flags & O_ACCMODE == 0 {
        return 0;
    }
    if classify_file(file) == fd_kind::ACCESS_LOG {
        if let Some(n) = LOG_OPENS.get_ptr_mut(slot) {
            // SAFETY: per-CPU slot.
            unsafe { *n += 1 };
        }
    }
    0
}

/// A timed syscall's two programs, `sys_enter_<tracepoint>` and
/// `sys_exit_<tracepoint>`.
macro_rules! syscall_pair {
    ($enter:ident, $exit:ident, $sys:expr) => {
        #[tracepoint]
        pub fn $enter(ctx: TracePointContext) -> u32 {
            on_enter(&ctx, $sys);
            0
        }

        #[tracepoint]
        pub fn $exit(ctx: TracePointContext) -> u32 {
            on_exit(&ctx, $sys);
            0
        }
    };
}

syscall_pair!(sys_enter_accept4, sys_exit_accept4, sys::ACCEPT4);
syscall_pair!(sys_enter_accept, sys_exit_accept, sys::ACCEPT);
syscall_pair!(sys_enter_epoll_wait, sys_exit_epoll_wait, sys::EPOLL_WAIT);
syscall_pair!(
    sys_enter_epoll_pwait,
    sys_exit_epoll_pwait,
    sys::EPOLL_PWAIT
);
syscall_pair!(
    sys_enter_epoll_pwait2,
    sys_exit_epoll_pwait2,
    sys::EPOLL_PWAIT2
);
syscall_pair!(sys_enter_sendfile64, sys_exit_sendfile64, sys::SENDFILE);
syscall_pair!(sys_enter_write, sys_exit_write, sys::WRITE);
syscall_pair!(sys_enter_writev, sys_exit_writev, sys::WRITEV);
syscall_pair!(sys_enter_pwrite64, sys_exit_pwrite64, sys::PWRITE64);
syscall_pair!(sys_enter_openat, sys_exit_openat, sys::OPENAT);
syscall_pair!(sys_enter_close, sys_exit_close, sys::CLOSE);
syscall_pair!(sys_enter_recvfrom, sys_exit_recvfrom, sys::RECVFROM);
syscall_pair!(sys_enter_read, sys_exit_read, sys::READ);
syscall_pair!(sys_enter_newfstatat, sys_exit_newfstatat, sys::NEWFSTATAT);
syscall_pair!(sys_enter_pwritev, sys_exit_pwritev, sys::PWRITEV);

/// Exit-only programs, one per (name, syscall index).
macro_rules! count_exits {
    ($($prog:ident => $sys:expr),* $(,)?) => {
        $(
            #[tracepoint]
            pub fn $prog(ctx: TracePointContext) -> u32 {
                count_exit(&ctx, $sys);
                0
            }
        )*
    };
}

// Exit-only programs of the fd-creating syscalls (`nginx_probe_common::FD_CREATING`),
// named `count_exit_<tracepoint>`.
count_exits!(
    count_exit_accept4 => sys::ACCEPT4,
    count_exit_accept => sys::ACCEPT,
    count_exit_openat => sys::OPENAT,
    count_exit_socket => sys::SOCKET,
    count_exit_socketpair => sys::SOCKETPAIR,
    count_exit_pipe2 => sys::PIPE2,
    count_exit_eventfd2 => sys::EVENTFD2,
    count_exit_epoll_create1 => sys::EPOLL_CREATE1,
    count_exit_dup => sys::DUP,
    count_exit_dup2 => sys::DUP2,
    count_exit_dup3 => sys::DUP3,
);
