//! The lifecycle of nginx's client connections, continuous layer. TCP state changes and
//! resets fire once per connection (not per request), often in softirq: a socket is
//! nginx's when it is TCP and its local port is in `LC_PORTS` (nginx's listening ports,
//! from user space), whatever task runs. See `nginx_probe_common::lifecycle` for the
//! counters.
//!
//! Two sets of programs count the same: raw tracepoints (`lc_raw_*`, the default), which
//! get the tracepoints' arguments (`struct sock *`...) and read the socket with offsets
//! from the kernel's BTF (`LC_RAW_OFF`), and perf-event tracepoints (`lc_*`), which read
//! the record the kernel builds for them per hit (the fallback when an offset is
//! unknown). User space attaches one set, never both.

use aya_ebpf::{
    helpers::{
        bpf_get_current_pid_tgid, bpf_get_current_task, bpf_jiffies64, bpf_ktime_get_ns,
        bpf_probe_read_kernel, bpf_probe_read_user,
    },
    macros::{raw_tracepoint, tracepoint, uprobe, uretprobe},
    maps::PerCpuArray,
    programs::{ProbeContext, RawTracePointContext, RetProbeContext, TracePointContext},
};
use nginx_probe_common::lifecycle::{self as lc, raw_off};

use crate::{
    helpers::{global, record_at},
    lifecycle_tls::{tls_close_fin_first, tls_close_take, tls_closes_on},
    lifecycle_up::{raw_peer, record_peer, up_set_state},
    maps::{
        GET_CONN_FRAME, LC_BORN, LC_BYTES_RECEIVED_OFF, LC_CLIENT_FIN, LC_CLOSING, LC_DRAINING,
        LC_FIN_RULE, LC_HZ, LC_LRCVTIME_OFF, LC_LSNDTIME_OFF, LC_PORTS, LC_RAW_OFF, LC_RESET_SK,
        LC_STATS, LC_TASK_FLAGS_OFF, LC_TLS_CLOSING, LC_WORKER,
    },
    workers::worker_slot,
};

pub(crate) const TCP_ESTABLISHED: i32 = 1;
pub(crate) const TCP_SYN_SENT: i32 = 2;
const TCP_SYN_RECV: i32 = 3;
pub(crate) const TCP_FIN_WAIT1: i32 = 4;
pub(crate) const TCP_CLOSE: i32 = 7;
pub(crate) const TCP_CLOSE_WAIT: i32 = 8;
const TCP_LAST_ACK: i32 = 9;
const TCP_LISTEN: i32 = 10;
pub(crate) const IPPROTO_TCP: u16 = 6;
/// `task_struct.flags`: the task is exiting (`do_exit` sets it before closing the
/// task's files).
const PF_EXITING: u32 = 0x4;

/// Base index in `LC_STATS` of local port `port`, if it is one of nginx's.
#[inline(always)]
fn lc_base(port: u16) -> Option<u32> {
    let idx = LC_PORTS.get(port as u32).copied()?.checked_sub(1)?;
    if idx >= lc::LC_MAX_PORTS {
        return None;
    }
    Some(idx * lc::LC_PER_PORT as u32)
}

/// Adds `n` to a counter, atomically: a raw-tracepoint program may be interrupted on its
/// CPU by another one (a softirq's state change inside a task's), unlike perf-event
/// tracepoint programs, which the kernel never nests.
#[inline(always)]
pub(crate) fn lc_add(base: u32, counter: usize, n: u64) {
    atomic_add(&LC_STATS, base + counter as u32, n);
}

/// Adds `n` to element `idx` of a per-CPU counter array, atomically (see [`lc_add`]).
#[inline(always)]
fn atomic_add(map: &PerCpuArray<u64>, idx: u32, n: u64) {
    if let Some(p) = map.get_ptr_mut(idx) {
        use core::intrinsics::{atomic_xadd, AtomicOrdering};
        // SAFETY: a valid, aligned per-CPU u64 of the map. The old value is unused, so
        // this is the BPF atomic add without fetch (any kernel).
        unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(p, n) };
    }
}

/// Raises a maximum (not atomically: a nested program can lose one idle extreme, never
/// a count).
#[inline(always)]
fn lc_max(base: u32, counter: usize, v: u64) {
    if let Some(p) = LC_STATS.get_ptr_mut(base + counter as u32) {
        // SAFETY: a valid per-CPU u64 of the map.
        unsafe {
            if v > *p {
                *p = v;
            }
        }
    }
}

/// Jiffies since the time stamp at `off` bytes into `sk` (`tcp_sock.lsndtime` or
/// `icsk_ack.lrcvtime`, both u32 jiffies); None when the socket cannot be read.
#[inline(always)]
fn jiffies_since(sk: u64, off: u64) -> Option<u32> {
    if sk == 0 || off == u64::MAX {
        return None;
    }
    // SAFETY: bpf_probe_read_kernel copes with any address.
    let t: u32 = unsafe { bpf_probe_read_kernel((sk + off) as *const u32) }.ok()?;
    // SAFETY: helper without preconditions.
    let now = unsafe { bpf_jiffies64() } as u32;
    Some(now.wrapping_sub(t))
}

/// HZ, when it and the two time stamp offsets are known.
#[inline(always)]
fn lc_hz() -> Option<u64> {
    let hz = global(&LC_HZ);
    let known = global(&LC_LSNDTIME_OFF) != u64::MAX && global(&LC_LRCVTIME_OFF) != u64::MAX;
    (hz != 0 && known).then_some(hz)
}

/// The idle time of `sk` at a close, ms, and whether the closing side had sent data in
/// the close's last jiffy; None when the offsets or HZ are unknown or the socket
/// cannot be read. `local` closes: nginx's side (its data: `tcp_sock.lsndtime`), else
/// the remote side's (its data: `icsk_ack.lrcvtime`).
///
/// Idle is the time since the last data segment sent or received. When the closing
/// side sent data at most one jiffy before its close (a TLS close_notify, an HTTP/2
/// GOAWAY, or a response closed at once), the time since its own last data says
/// nothing: then it is the time since the other side's last data, which a close right
/// after a response keeps short and an idle timeout keeps at the timeout.
#[inline(always)]
pub(crate) fn idle_ms(sk: u64, local: bool) -> Option<(u64, bool)> {
    idle_of(sk, local).map(|(ms, wrote, _)| (ms, wrote))
}

/// [`idle_ms`], with whether the closing side's last data went out a jiffy or more
/// after the other side's (for nginx's closes: `tcp_sock.lsndtime` newer than
/// `icsk_ack.lrcvtime`, nginx sent last), from the same two reads.
#[inline(always)]
fn idle_of(sk: u64, local: bool) -> Option<(u64, bool, bool)> {
    let hz = lc_hz()?;
    let (snd, rcv) = (global(&LC_LSNDTIME_OFF), global(&LC_LRCVTIME_OFF));
    let (mine, theirs) = if local { (snd, rcv) } else { (rcv, snd) };
    let a = jiffies_since(sk, mine)?;
    let b = jiffies_since(sk, theirs)?;
    let (j, wrote) = if a <= 1 {
        (b, true)
    } else if a < b {
        (a, false)
    } else {
        (b, false)
    };
    Some((j as u64 * 1000 / hz, wrote, a < b))
}

/// Whether nginx closes `sk` awaiting the peer's response, and the ms since nginx's
/// last data sent: its last data (`tcp_sock.lsndtime`) is a jiffy or more later than
/// the peer's (`icsk_ack.lrcvtime`), or in the same jiffy with nothing ever received
/// (`tcp_sock.bytes_received` 0: a request sent in its connect's jiffy, no answer).
/// None when the offsets or HZ are unknown or the socket cannot be read.
#[inline(always)]
pub(crate) fn awaiting_response(sk: u64) -> Option<(bool, u64)> {
    let hz = lc_hz()?;
    let a = jiffies_since(sk, global(&LC_LSNDTIME_OFF))?;
    let b = jiffies_since(sk, global(&LC_LRCVTIME_OFF))?;
    let off = global(&LC_BYTES_RECEIVED_OFF);
    let nothing_received = a == b
        && off != u64::MAX
        // SAFETY: bpf_probe_read_kernel copes with any address.
        && unsafe { bpf_probe_read_kernel((sk + off) as *const u64) }.is_ok_and(|n| n == 0);
    Some((a < b || nothing_received, a as u64 * 1000 / hz))
}

/// Whether the remote side's last data on `sk` (`icsk_ack.lrcvtime`) came at most one
/// jiffy ago; false when unknown.
#[inline(always)]
pub(crate) fn remote_data_within_a_jiffy(sk: u64) -> bool {
    lc_hz().is_some() && jiffies_since(sk, global(&LC_LRCVTIME_OFF)).is_some_and(|j| j <= 1)
}

/// ms since the remote side's last data on `sk` (`icsk_ack.lrcvtime`).
#[inline(always)]
pub(crate) fn ms_since_remote_data(sk: u64) -> Option<u64> {
    let hz = lc_hz()?;
    Some(jiffies_since(sk, global(&LC_LRCVTIME_OFF))? as u64 * 1000 / hz)
}

/// Whether the current task is exiting (`task_struct.flags & PF_EXITING`): the
/// kernel closing a dying worker's sockets, not nginx's `close()`. False when the
/// offset is unknown.
#[inline(always)]
pub(crate) fn task_exiting() -> bool {
    let off = global(&LC_TASK_FLAGS_OFF);
    if off == u64::MAX {
        return false;
    }
    // SAFETY: helper call without preconditions.
    let task = unsafe { bpf_get_current_task() };
    // SAFETY: bpf_probe_read_kernel copes with any address.
    match unsafe { bpf_probe_read_kernel(task.wrapping_add(off) as *const u32) } {
        Ok(f) => f & PF_EXITING != 0,
        Err(_) => false,
    }
}

/// What nginx's close of a socket is counted with, read in the closing worker's
/// context: at its `close()` (`ESTABLISHED -> FIN_WAIT1`), or earlier at its
/// `ngx_ssl_shutdown`, before its close_notify goes out (`lifecycle_tls`), when the
/// close is counted later in softirq.
#[derive(Clone, Copy)]
#[repr(C)]
pub(crate) struct CloseFacts {
    /// The closing worker's slot; `u32::MAX`: no tracked worker.
    slot: u32,
    /// `F_*` bits.
    flags: u32,
    /// The worker's `LC_DRAINING` entry then (0: serving).
    pub(crate) drain: u64,
    /// Idle time, ms (with `F_IDLE_KNOWN`): see [`idle_ms`].
    idle_ms: u64,
    /// ms since the worker began draining (draining, its start known).
    drain_ms: u64,
}

/// [`CloseFacts::flags`]: the task was exiting (the kernel closing a dying worker's
/// sockets).
const F_EXITING: u32 = 1;
/// The idle time was measured.
const F_IDLE_KNOWN: u32 = 2;
/// nginx had sent data in the close's last jiffy (see [`idle_ms`]).
const F_WROTE: u32 = 4;
/// nginx's last data went out a jiffy or more after the client's (`tcp_sock.lsndtime`
/// newer than `icsk_ack.lrcvtime`; see [`idle_of`]).
const F_SENT_LAST: u32 = 8;
/// Made inside the worker's `ngx_get_connection` (see [`in_get_connection`]): nginx
/// reusing connections at `worker_connections`.
const F_REUSING: u32 = 16;

/// Whether worker `slot`'s current task is inside its call of `ngx_get_connection`:
/// the stack slot its uprobe noted (`GET_CONN_FRAME`) still holds the call's return
/// address. Its callers make another call as soon as it returns, which overwrites the
/// slot, so a match means the call has not returned (or a new call's uprobe noted the
/// same frame again). nginx closes connections there only when it reuses them
/// (`ngx_drain_connections`: 1/16 or fewer of `worker_connections` free). False
/// without the uprobe, or in another task's context.
#[inline(always)]
pub(crate) fn in_get_connection(slot: Option<u32>) -> bool {
    let Some(&[sp, ret]) = slot.and_then(|s| GET_CONN_FRAME.get(s)) else {
        return false;
    };
    // SAFETY: reads 8 bytes of the current task's stack; failure is handled.
    sp != 0 && unsafe { bpf_probe_read_user(sp as *const u64) } == Ok(ret)
}

impl CloseFacts {
    /// The idle time measured, ms.
    #[inline(always)]
    pub(crate) fn idle(&self) -> Option<u64> {
        (self.flags & F_IDLE_KNOWN != 0).then_some(self.idle_ms)
    }

    /// Whether nginx had sent data in the close's last jiffy.
    #[inline(always)]
    pub(crate) fn wrote(&self) -> bool {
        self.flags & F_WROTE != 0
    }

    /// Whether the close was made inside `ngx_get_connection` (reusing connections).
    #[inline(always)]
    pub(crate) fn reusing(&self) -> bool {
        self.flags & F_REUSING != 0
    }
}

/// The facts of nginx's close of `sk`, now, in the closing task's context.
#[inline(always)]
pub(crate) fn close_facts(sk: u64) -> CloseFacts {
    let slot = worker_slot();
    let mut f = CloseFacts {
        slot: slot.unwrap_or(u32::MAX),
        flags: 0,
        drain: 0,
        idle_ms: 0,
        drain_ms: 0,
    };
    if task_exiting() {
        f.flags = F_EXITING;
        return f;
    }
    f.drain = drain_state(slot);
    if in_get_connection(slot) {
        f.flags |= F_REUSING;
    }
    if let Some((ms, wrote, sent_last)) = idle_of(sk, true) {
        f.flags |= F_IDLE_KNOWN | if wrote { F_WROTE } else { 0 };
        f.flags |= if sent_last { F_SENT_LAST } else { 0 };
        f.idle_ms = ms;
    }
    if f.drain != 0 && f.drain != lc::worker::DRAIN_START_UNKNOWN {
        // SAFETY: helper without preconditions.
        f.drain_ms = unsafe { bpf_ktime_get_ns() }.saturating_sub(f.drain) / 1_000_000;
    }
    f
}

/// The counters of one log2 histogram of ms in a port's `LC_STATS`: count, sum,
/// maximum, bitwise-inverted minimum, first bucket.
type HistAt = [usize; 5];
/// Idle time before a serving worker's close.
const IDLE_BEFORE_NGINX_CLOSE: HistAt = [
    lc::IDLE_COUNT,
    lc::IDLE_SUM_MS,
    lc::IDLE_MAX_MS,
    lc::IDLE_INV_MIN_MS,
    lc::IDLE_HIST,
];
/// Lifetime, established to first close.
const LIFETIME: HistAt = [
    lc::LIFETIME_COUNT,
    lc::LIFETIME_SUM_MS,
    lc::LIFETIME_MAX_MS,
    lc::LIFETIME_INV_MIN_MS,
    lc::LIFETIME_HIST,
];
/// Idle time before the client's close.
const IDLE_BEFORE_CLIENT_CLOSE: HistAt = [
    lc::CLIENT_CLOSE_IDLE_COUNT,
    lc::CLIENT_CLOSE_IDLE_SUM_MS,
    lc::CLIENT_CLOSE_IDLE_MAX_MS,
    lc::CLIENT_CLOSE_IDLE_INV_MIN_MS,
    lc::CLIENT_CLOSE_IDLE_HIST,
];
/// Idle time before a reset received.
const IDLE_BEFORE_RESET: HistAt = [
    lc::RESET_IDLE_COUNT,
    lc::RESET_IDLE_SUM_MS,
    lc::RESET_IDLE_MAX_MS,
    lc::RESET_IDLE_INV_MIN_MS,
    lc::RESET_IDLE_HIST,
];

/// One value `ms` into the histogram `at` of port `base`.
#[inline(always)]
fn lc_idle(base: u32, ms: u64, [count, sum, max, inv_min, hist]: HistAt) {
    lc_add(base, count, 1);
    lc_add(base, sum, ms);
    lc_max(base, max, ms);
    lc_max(base, inv_min, !ms);
    lc_add(base, hist + lc::idle_bucket(ms), 1);
}

/// The client's FIN came first on `sk`: its idle time now (the time since the client's
/// last data, or since nginx's when the client's came in the last jiffy or before
/// nginx's: see [`idle_ms`]) noted for [`client_fin_settled`].
#[inline(always)]
fn note_client_fin(sk: u64) {
    if let Some((ms, _)) = idle_ms(sk, false) {
        let answered = jiffies_since(sk, global(&LC_LSNDTIME_OFF)).is_some_and(|j| j <= 1);
        let flag = if answered { FIN_AFTER_NGINX_DATA } else { 0 };
        let _ = LC_CLIENT_FIN.insert(sk, (ms & !FIN_AFTER_NGINX_DATA).saturating_add(1) | flag, 0);
    }
}

/// [`LC_CLIENT_FIN`] bit: nginx's last data (`tcp_sock.lsndtime`) went out at most a
/// jiffy before the client's FIN came: the FIN answered it (a client closing on
/// reading a response with `Connection: close`), even when nginx's own close comes
/// later than a jiffy after its data (a worker preempted between its write and its
/// close on a loaded machine).
const FIN_AFTER_NGINX_DATA: u64 = 1 << 63;

/// Whether the client's FIN on `sk` came at most a jiffy after nginx's last data
/// (noted at the FIN, see [`FIN_AFTER_NGINX_DATA`]); false when not noted.
#[inline(always)]
pub(crate) fn fin_after_nginx_data(sk: u64) -> bool {
    // SAFETY: the value is copied out at once.
    unsafe { LC_CLIENT_FIN.get(sk) }.is_some_and(|v| v & FIN_AFTER_NGINX_DATA != 0)
}

/// `sk` leaves `CLOSE_WAIT`: the idle time noted at its client's FIN let go, and
/// counted on port `base` when the close was the client's (`clients`).
#[inline(always)]
fn client_fin_settled(base: u32, sk: u64, clients: bool) {
    // SAFETY: the value is copied out before the entry is removed.
    let Some(v) = (unsafe { LC_CLIENT_FIN.get(sk) }).copied() else {
        return;
    };
    let _ = LC_CLIENT_FIN.remove(sk);
    let v = v & !FIN_AFTER_NGINX_DATA;
    if clients && v > 0 {
        lc_idle(base, v - 1, IDLE_BEFORE_CLIENT_CLOSE);
    }
}

/// The facts of a TLS close the client began (nginx read its close_notify), in the
/// worker's `ngx_ssl_shutdown`, before nginx's own close_notify goes out: the worker
/// and the idle time before the client's close, its side's (see [`idle_ms`]: the
/// client's data came last, so the time since nginx's last data).
#[inline(always)]
pub(crate) fn client_close_facts(sk: u64) -> CloseFacts {
    let mut f = CloseFacts {
        slot: worker_slot().unwrap_or(u32::MAX),
        flags: 0,
        drain: 0,
        idle_ms: 0,
        drain_ms: 0,
    };
    if let Some((ms, _)) = idle_ms(sk, false) {
        f.flags = F_IDLE_KNOWN;
        f.idle_ms = ms;
    }
    f
}

/// An idle time measured at a serving worker's close.
#[inline(always)]
fn on_nginx_close(base: u32, f: &CloseFacts) {
    if f.flags & F_IDLE_KNOWN == 0 {
        return;
    }
    lc_idle(base, f.idle_ms, IDLE_BEFORE_NGINX_CLOSE);
    if f.wrote() {
        lc_add(base, lc::IDLE_AFTER_NGINX_WROTE, 1);
    }
}

/// Adds one to the current worker's close counter `counter` (`lc::worker`), atomically
/// like [`lc_add`]; nothing when the task is no tracked worker.
#[inline(always)]
fn worker_add(slot: Option<u32>, counter: usize) {
    let Some(slot) = slot else { return };
    atomic_add(
        &LC_WORKER,
        slot * lc::worker::LC_PER_WORKER as u32 + counter as u32,
        1,
    );
}

/// Worker `slot`'s `LC_DRAINING` entry: 0 while it serves, else the ns it began
/// draining with bit 0 set during its idle sweep.
#[inline(always)]
fn drain_state(slot: Option<u32>) -> u64 {
    slot.and_then(|s| LC_DRAINING.get(s)).copied().unwrap_or(0)
}

/// A draining worker's close, split by when: inside its sweep of idle connections
/// (`drain` with bit 0), right after nginx's own data, or with nothing sent just
/// before; for the last two, the time since the drain began is kept (when the drain's
/// start is known).
#[inline(always)]
fn on_draining_close(base: u32, f: &CloseFacts, slot: Option<u32>) {
    lc_add(base, lc::CLOSED_WHILE_DRAINING, 1);
    worker_add(slot, lc::worker::CLOSED_WHILE_DRAINING);
    if f.drain & 1 != 0 {
        lc_add(base, lc::CLOSED_WHILE_DRAINING_IDLE, 1);
        return;
    }
    if f.flags & F_IDLE_KNOWN == 0 {
        return;
    }
    let (max, inv_min) = if f.wrote() {
        lc_add(base, lc::CLOSED_WHILE_DRAINING_AFTER_DATA, 1);
        (lc::DRAIN_AFTER_DATA_MAX_MS, lc::DRAIN_AFTER_DATA_INV_MIN_MS)
    } else {
        lc_add(base, lc::CLOSED_WHILE_DRAINING_SILENT, 1);
        if f.flags & F_SENT_LAST != 0 {
            lc_add(base, lc::CLOSED_WHILE_DRAINING_MID_RESPONSE, 1);
        }
        (lc::DRAIN_SILENT_MAX_MS, lc::DRAIN_SILENT_INV_MIN_MS)
    };
    if f.drain == lc::worker::DRAIN_START_UNKNOWN {
        return;
    }
    lc_max(base, max, f.drain_ms);
    lc_max(base, inv_min, !f.drain_ms);
}

/// A close nginx made inside `ngx_get_connection`, reusing a connection.
#[inline(always)]
fn count_reusing(base: u32, slot: Option<u32>) {
    lc_add(base, lc::CLOSED_REUSING, 1);
    worker_add(slot, lc::worker::CLOSED_REUSING);
}

/// nginx's close of a socket of port `base`, with the facts read in the closing
/// worker: an exiting worker's, a draining worker's (idle or after its request), or a
/// serving worker's with its idle time.
#[inline(always)]
pub(crate) fn count_nginx_close(base: u32, f: &CloseFacts) {
    let slot = (f.slot != u32::MAX).then_some(f.slot);
    if f.flags & F_EXITING != 0 {
        lc_add(base, lc::CLOSED_BY_WORKER_EXIT, 1);
        worker_add(slot, lc::worker::CLOSED_BY_WORKER_EXIT);
        return;
    }
    lc_add(base, lc::CLOSED_BY_NGINX, 1);
    worker_add(slot, lc::worker::CLOSED_BY_NGINX);
    if f.reusing() {
        count_reusing(base, slot);
    }
    if f.drain != 0 {
        on_draining_close(base, f, slot);
        return;
    }
    on_nginx_close(base, f);
}

/// The worker's `close()` of `sk` (port `base`) after the client's FIN: nginx's own
/// close when the FIN is unread and nginx sent data in the close's last jiffy or in
/// the jiffy before the FIN came (see `lc::CLOSED_BY_NGINX_CLIENT_FIN_UNREAD`), else
/// the close of a connection the client closed; true for the client's.
#[inline(always)]
fn on_close_after_fin(base: u32, sk: u64) -> bool {
    let slot = worker_slot();
    if slot.is_some() && fin_rule_on() && !task_exiting() && fin_unread(sk) {
        let f = close_facts(sk);
        if f.wrote() || fin_after_nginx_data(sk) {
            count_nginx_close(base, &f);
            lc_add(base, lc::CLOSED_BY_NGINX_CLIENT_FIN_UNREAD, 1);
            return false;
        }
    }
    worker_add(slot, lc::worker::CLOSED_AFTER_CLIENT);
    true
}

/// Whether user space set `LC_FIN_RULE`.
#[inline(always)]
fn fin_rule_on() -> bool {
    LC_FIN_RULE.get(0) == Some(&1)
}

/// Whether the peer's FIN on `sk` is received but unread (`tcp_sock.copied_seq`
/// behind `rcv_nxt`: a read of the EOF moves `copied_seq` past the FIN); false when
/// the offsets are unknown.
#[inline(always)]
fn fin_unread(sk: u64) -> bool {
    match (
        raw_read::<u32>(sk, raw_off::TCP_COPIED_SEQ),
        raw_read::<u32>(sk, raw_off::TCP_RCV_NXT),
    ) {
        (Some(copied), Some(next)) => copied != next,
        _ => false,
    }
}

/// A first close (`ESTABLISHED -> new`) of `sk` on port `base` with not one byte
/// received from the client (`tcp_sock.bytes_received` 0, or 1 at `CLOSE_WAIT`: the
/// kernel counts the FIN's sequence number), counted by who closed first (see
/// `lc::CLOSED_WITHOUT_DATA_BY_NGINX`); nothing when the offset is unknown.
#[inline(always)]
fn count_without_data(base: u32, new: i32, sk: u64) {
    let (counter, fin) = match new {
        // An exiting worker's closes are apart (`lc::CLOSED_BY_WORKER_EXIT`).
        TCP_FIN_WAIT1 if task_exiting() => return,
        TCP_FIN_WAIT1 => (lc::CLOSED_WITHOUT_DATA_BY_NGINX, 0),
        TCP_CLOSE_WAIT => (lc::CLOSED_WITHOUT_DATA_BY_CLIENT, 1),
        TCP_CLOSE => (lc::CLOSED_WITHOUT_DATA_BY_RESET, 0),
        _ => return,
    };
    let off = global(&LC_BYTES_RECEIVED_OFF);
    if sk == 0 || off == u64::MAX {
        return;
    }
    // SAFETY: bpf_probe_read_kernel copes with any address.
    if unsafe { bpf_probe_read_kernel((sk + off) as *const u64) }.is_ok_and(|n| n <= fin) {
        lc_add(base, counter, 1);
    }
}

/// Notes when `sk` was established, for its lifetime at its first close.
#[inline(always)]
fn note_born(sk: u64) {
    // SAFETY: helper without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let _ = LC_BORN.insert(sk, now, 0);
}

/// The lifetime of `sk` at its first close (`ESTABLISHED -> new`), counted on port
/// `base` when its establishment was noted (`LC_BORN`), and the note let go.
#[inline(always)]
fn count_lifetime(base: u32, sk: u64) {
    // SAFETY: the value is copied out before the entry is removed.
    let Some(born) = (unsafe { LC_BORN.get(sk) }).copied() else {
        return;
    };
    let _ = LC_BORN.remove(sk);
    // SAFETY: helper without preconditions.
    let ms = unsafe { bpf_ktime_get_ns() }.saturating_sub(born) / 1_000_000;
    lc_idle(base, ms, LIFETIME);
}

/// A reset ended an established connection on port `base` (`ESTABLISHED -> CLOSE`):
/// a client answering nginx's close_notify with a reset (nginx's close), an exiting
/// worker's socket closed with data unread (its exit), a reset received (`by_reset`:
/// with its idle time), or nginx's own in a worker's `close()`.
#[inline(always)]
fn on_established_reset(base: u32, sk: u64, by_reset: bool) {
    // A client answering nginx's close_notify with a reset (it closed with
    // the alert unread) before nginx's close(): nginx began the close.
    if let Some(t) = tls_close_take(sk).filter(|t| t.nginx_began_uncounted()) {
        count_nginx_close(base, &t.facts);
        if by_reset {
            lc_add(base, lc::CLOSED_BY_NGINX_CLIENT_FIN_FIRST, 1);
            lc_add(base, lc::CLOSED_BY_NGINX_CLIENT_RST_FIRST, 1);
        } else {
            // nginx's close() with the client's data unread (its close_notify
            // answering nginx's): the kernel's reset ends nginx's own close.
            lc_add(base, lc::CLOSED_BY_NGINX_DATA_UNREAD, 1);
            if t.facts.reusing() {
                lc_add(base, lc::CLOSED_REUSING_RESET, 1);
            }
        }
        return;
    }
    // An exiting worker's files closed by the kernel, the client's data unread (a
    // request in flight when it crashed): the worker's exit, not a reset by either.
    if !by_reset && task_exiting() {
        lc_add(base, lc::CLOSED_BY_WORKER_EXIT, 1);
        worker_add(worker_slot(), lc::worker::CLOSED_BY_WORKER_EXIT);
        return;
    }
    lc_add(base, lc::CLOSED_BY_RESET, 1);
    if by_reset {
        if let Some((ms, _)) = idle_ms(sk, false) {
            lc_idle(base, ms, IDLE_BEFORE_RESET);
        }
    }
    // In a worker's close(), no received reset: nginx's own reset.
    let slot = worker_slot();
    if !by_reset && slot.is_some() && !task_exiting() {
        lc_add(base, lc::CLOSED_BY_NGINX_RESET, 1);
        worker_add(slot, lc::worker::RESET_BY_NGINX);
        if drain_state(slot) != 0 {
            lc_add(base, lc::CLOSED_WHILE_DRAINING_RESET, 1);
            worker_add(slot, lc::worker::RESET_WHILE_DRAINING);
        }
        if in_get_connection(slot) {
            count_reusing(base, slot);
            lc_add(base, lc::CLOSED_REUSING_RESET, 1);
        }
    }
}

/// A state change of a socket on one of nginx's ports (`base`): who closed first
/// (nginx, an exiting worker, the client, a reset), established connections,
/// listeners closed, idle time before nginx's close, the client's and a reset received.
#[inline(always)]
fn on_set_state(base: u32, old: i32, new: i32, sk: u64) {
    // Read (and forgotten) at every CLOSE, so no stale socket stays noted.
    let by_reset = new == TCP_CLOSE && reset_in_progress(sk);
    if old == TCP_ESTABLISHED {
        count_without_data(base, new, sk);
        count_lifetime(base, sk);
    }
    match (old, new) {
        (TCP_SYN_RECV, TCP_ESTABLISHED) => {
            lc_add(base, lc::ESTABLISHED, 1);
            note_born(sk);
        }
        // FIN_WAIT1 is entered in the closing task's context (close(), shutdown(), or
        // the kernel closing an exiting task's files), never in softirq. A TLS close
        // nginx began is counted with the facts of its ngx_ssl_shutdown.
        (TCP_ESTABLISHED, TCP_FIN_WAIT1) => match tls_close_take(sk) {
            // nginx answering the client's close_notify: the client's close.
            Some(t) if t.client_began() => {
                lc_add(base, lc::CLOSED_BY_CLIENT, 1);
                worker_add(worker_slot(), lc::worker::CLOSED_AFTER_CLIENT);
                if let Some(ms) = t.facts.idle() {
                    lc_idle(base, ms, IDLE_BEFORE_CLIENT_CLOSE);
                }
            }
            Some(t) => count_nginx_close(base, &t.facts),
            None => count_nginx_close(base, &close_facts(sk)),
        },
        // The client's FIN: its own close, or its answer to nginx's close_notify
        // (a socket whose TLS close nginx began).
        (TCP_ESTABLISHED, TCP_CLOSE_WAIT) => {
            if !tls_close_fin_first(base, sk) {
                lc_add(base, lc::CLOSED_BY_CLIENT, 1);
                note_client_fin(sk);
            }
        }
        // LAST_ACK too: the worker's close() of a connection the client closed (not
        // one whose close nginx began), or nginx's own close met by a client's FIN it
        // never read.
        (TCP_CLOSE_WAIT, TCP_LAST_ACK) => {
            let clients = match tls_close_take(sk) {
                Some(t) if !t.client_began() => false,
                Some(_) => {
                    worker_add(worker_slot(), lc::worker::CLOSED_AFTER_CLIENT);
                    true
                }
                None => on_close_after_fin(base, sk),
            };
            client_fin_settled(base, sk, clients);
        }
        // CLOSE directly: the worker's close() with data unread (a TLS client's
        // close_notify, say: the kernel sends a reset), unless a received reset is
        // being processed for this socket on this CPU (a client's reset after its FIN).
        (TCP_CLOSE_WAIT, TCP_CLOSE) => {
            let clients = tls_close_take(sk).is_none_or(|t| t.client_began());
            if clients && !by_reset {
                worker_add(worker_slot(), lc::worker::CLOSED_AFTER_CLIENT)
            }
            client_fin_settled(base, sk, clients);
        }
        (TCP_ESTABLISHED, TCP_CLOSE) => on_established_reset(base, sk, by_reset),
        (TCP_LISTEN, TCP_CLOSE) => {
            lc_add(base, lc::LISTENERS_CLOSED, 1);
            let _ = LC_CLOSING.insert(bpf_get_current_pid_tgid(), sk, 0);
        }
        _ => {}
    }
}

/// A reset arrived on `sk` of one of nginx's ports (`base`): counted, and `sk` noted
/// as the one whose reset this CPU is processing (see [`reset_in_progress`]).
#[inline(always)]
fn on_receive_reset(base: u32, sk: u64) {
    lc_add(base, lc::RST_RECEIVED, 1);
    if let Some(p) = LC_RESET_SK.get_ptr_mut(0) {
        // SAFETY: a valid per-CPU u64 of the map.
        unsafe { *p = sk };
    }
}

/// Whether `sk`'s state change on this CPU is a received reset's (`tcp_reset()` fires
/// `tcp_receive_reset` before its `tcp_done()`); forgets it then.
#[inline(always)]
fn reset_in_progress(sk: u64) -> bool {
    let Some(p) = LC_RESET_SK.get_ptr_mut(0) else {
        return false;
    };
    // SAFETY: a valid per-CPU u64 of the map.
    unsafe {
        if sk != 0 && *p == sk {
            *p = 0;
            return true;
        }
    }
    false
}

/// `void ngx_close_idle_connections(ngx_cycle_t *cycle)`, in nginx's binary: a
/// worker starting its graceful shutdown (reload, QUIT, a binary upgrade's WINCH)
/// calls it once, right after retitling itself "worker process is shutting down", and
/// closes in it every connection it marks idle. Its slot is marked draining from then
/// on (the first call's time kept, even), with bit 0 set: in the sweep, until
/// [`lc_worker_swept`].
#[uprobe]
pub fn lc_worker_drains(_ctx: ProbeContext) -> u32 {
    let Some(slot) = worker_slot() else { return 0 };
    if let Some(p) = LC_DRAINING.get_ptr_mut(slot) {
        // SAFETY: a valid u64 of the array; only this worker writes its slot.
        unsafe {
            *p = if *p == 0 {
                bpf_ktime_get_ns() | 1
            } else {
                *p | 1
            };
        }
    }
    0
}

/// The return of `ngx_close_idle_connections`: the worker's idle sweep is over; its
/// later closes are of connections that were busy at the drain.
#[uretprobe]
pub fn lc_worker_swept(_ctx: RetProbeContext) -> u32 {
    let Some(slot) = worker_slot() else { return 0 };
    if let Some(p) = LC_DRAINING.get_ptr_mut(slot) {
        // SAFETY: as above.
        unsafe { *p &= !1 };
    }
    0
}

/// A reset sent from one of nginx's ports (`base`), by the kernel's `reason`, for the
/// socket `sk` (0: none) in `state` (0: none).
#[inline(always)]
fn on_send_reset(base: u32, reason: usize, sk: u64, state: i32, skb: u64) {
    lc_add(base, lc::RST_SENT, 1);
    let r = if reason < lc::LC_REASONS {
        reason
    } else {
        lc::LC_REASONS - 1
    };
    lc_add(base, lc::RST_BY_REASON + r, 1);
    if (r == RST_ABORT_ON_DATA || r == RST_TIMEWAIT_SOCKET)
        && payload_of(skb).is_some_and(|n| n > 0 && n <= lc::ALERT_SIZED_MAX)
    {
        lc_add(base, lc::RST_AFTER_CLOSE_ALERT_SIZED, 1);
    }
    if r == RST_NO_SOCKET && tcp_flags_of(skb).is_some_and(|f| f & TCP_SYN_ACK == TCP_SYN) {
        lc_add(base, lc::RST_NO_SOCKET_SYN, 1);
    }
    // SAFETY: the value is copied out at once.
    if let Some(l) = unsafe { LC_CLOSING.get(bpf_get_current_pid_tgid()) }.copied() {
        if sk != 0 && sk != l && state != TCP_LISTEN {
            lc_add(base, lc::RST_CLOSED_LISTENER, 1);
        }
    }
}

/// `sk_rst_reason` `NO_SOCKET`: no socket took the segment.
const RST_NO_SOCKET: usize = 1;
/// TCP header flags: SYN, and SYN with ACK.
const TCP_SYN: u8 = 0x02;
const TCP_SYN_ACK: u8 = 0x12;

/// The TCP flags (header byte 13) of the segment `skb` a reset answers; `data` points
/// at the TCP header when the reset is sent. None when the offsets are unknown or a
/// read fails.
#[inline(always)]
fn tcp_flags_of(skb: u64) -> Option<u8> {
    let th = raw_read::<u64>(skb, raw_off::SKB_DATA)?;
    // SAFETY: bpf_probe_read_kernel copes with any address.
    unsafe { bpf_probe_read_kernel((th + 13) as *const u8) }.ok()
}

/// `sk_rst_reason` `TCP_ABORT_ON_DATA`: data came to a socket nginx had closed.
const RST_ABORT_ON_DATA: usize = 8;
/// `sk_rst_reason` `TCP_TIMEWAIT_SOCKET`: a segment came to a socket in TIME-WAIT.
const RST_TIMEWAIT_SOCKET: usize = 9;

/// The payload bytes of the segment `skb` a reset answers: `sk_buff.len` less the TCP
/// header (`doff`, 4-byte words, at `data + 12`); `data` points at the TCP header when
/// the reset is sent. None when the offsets are unknown or a read fails.
#[inline(always)]
fn payload_of(skb: u64) -> Option<u32> {
    let len = raw_read::<u32>(skb, raw_off::SKB_LEN)?;
    let th = raw_read::<u64>(skb, raw_off::SKB_DATA)?;
    // SAFETY: bpf_probe_read_kernel copes with any address.
    let doff = unsafe { bpf_probe_read_kernel((th + 12) as *const u8) }.ok()?;
    len.checked_sub(u32::from(doff >> 4) * 4)
}

/// `sk` of one of nginx's ports is destroyed: when it is the listener this task was
/// closing, its later resets are not the listener's queue.
#[inline(always)]
fn on_destroy(sk: u64) {
    if tls_closes_on() {
        let _ = LC_TLS_CLOSING.remove(sk);
    }
    let key = bpf_get_current_pid_tgid();
    // SAFETY: the value is copied out at once.
    if let Some(l) = unsafe { LC_CLOSING.get(key) }.copied() {
        if l == sk {
            let _ = LC_CLOSING.remove(key);
        }
    }
}

// ---- Perf-event tracepoints: fields from the record (offsets checked by user space
// against the format files) ----

/// `sock:inet_sock_set_state`: see [`on_set_state`].
#[tracepoint]
pub fn lc_set_state(ctx: TracePointContext) -> u32 {
    if record_at::<u16>(&ctx, 30) != IPPROTO_TCP {
        return 0;
    }
    let (old, new) = (record_at::<i32>(&ctx, 16), record_at::<i32>(&ctx, 20));
    let sk = record_at::<u64>(&ctx, 8);
    match lc_base(record_at::<u16>(&ctx, 24)) {
        Some(base) => on_set_state(base, old, new, sk),
        None => up_set_state(sk, old, new, || record_peer(&ctx)),
    }
    0
}

/// `tcp:tcp_send_reset`: a reset sent from one of nginx's ports (local port from
/// `saddr`, a sockaddr: family at +0, big-endian port at +2), by `reason`.
#[tracepoint]
pub fn lc_send_reset(ctx: TracePointContext) -> u32 {
    let port = u16::from_be(record_at::<u16>(&ctx, 34));
    let Some(base) = lc_base(port) else { return 0 };
    let reason = record_at::<u32>(&ctx, 28) as usize;
    on_send_reset(
        base,
        reason,
        record_at::<u64>(&ctx, 16),
        record_at::<i32>(&ctx, 24),
        record_at::<u64>(&ctx, 8),
    );
    0
}

/// `tcp:tcp_receive_reset`: a reset arrived on one of nginx's sockets.
#[tracepoint]
pub fn lc_receive_reset(ctx: TracePointContext) -> u32 {
    if let Some(base) = lc_base(record_at::<u16>(&ctx, 16)) {
        on_receive_reset(base, record_at::<u64>(&ctx, 8));
    }
    0
}

/// `tcp:tcp_destroy_sock`: see [`on_destroy`].
#[tracepoint]
pub fn lc_destroy_sock(ctx: TracePointContext) -> u32 {
    if lc_base(record_at::<u16>(&ctx, 16)).is_some() {
        on_destroy(record_at::<u64>(&ctx, 8));
    }
    0
}

// ---- Raw tracepoints: the TP_PROTO arguments, the socket read with BTF offsets ----

/// A `T` at `LC_RAW_OFF[which]` bytes into the kernel object at `at`; None when the
/// offset is unknown or the read fails.
#[inline(always)]
pub(crate) fn raw_read<T: Copy>(at: u64, which: usize) -> Option<T> {
    let off = global(&LC_RAW_OFF[which]);
    if at == 0 || off == u64::MAX {
        return None;
    }
    // SAFETY: bpf_probe_read_kernel copes with any address.
    unsafe { bpf_probe_read_kernel((at + off) as *const T) }.ok()
}

/// The local port of the full socket `sk`, host order, as the records take it.
#[inline(always)]
fn raw_port(sk: u64) -> Option<u16> {
    raw_read::<u16>(sk, raw_off::INET_SPORT).map(u16::from_be)
}

/// The `LC_STATS` base of `sk` when its local port is one of nginx's (the cheap test,
/// first) and it is TCP.
#[inline(always)]
pub(crate) fn raw_base(sk: u64) -> Option<u32> {
    let base = lc_base(raw_port(sk)?)?;
    (raw_read::<u16>(sk, raw_off::SK_PROTOCOL)? == IPPROTO_TCP).then_some(base)
}

/// Raw `inet_sock_set_state(const struct sock *sk, int oldstate, int newstate)`.
#[raw_tracepoint(tracepoint = "inet_sock_set_state")]
pub fn lc_raw_set_state(ctx: RawTracePointContext) -> u32 {
    let sk: u64 = ctx.arg(0);
    let (old, new): (u64, u64) = (ctx.arg(1), ctx.arg(2));
    match raw_base(sk) {
        Some(base) => on_set_state(base, old as i32, new as i32, sk),
        None => up_set_state(sk, old as i32, new as i32, || raw_peer(sk)),
    }
    0
}

/// Raw `tcp_send_reset(const struct sock *sk, const struct sk_buff *skb, enum
/// sk_rst_reason reason)`: the local port as the tracepoint's record takes it, from a
/// full socket, else from the answered segment's TCP destination port (`skb->data`).
#[raw_tracepoint(tracepoint = "tcp_send_reset")]
pub fn lc_raw_send_reset(ctx: RawTracePointContext) -> u32 {
    let sk: u64 = ctx.arg(0);
    let state = raw_read::<u8>(sk, raw_off::SK_STATE).map_or(0, i32::from);
    // Not a full socket: TCP_TIME_WAIT (6) or TCP_NEW_SYN_RECV (12).
    let full = sk != 0 && state != 6 && state != 12;
    let port = if full {
        raw_port(sk)
    } else {
        let skb: u64 = ctx.arg(1);
        raw_read::<u64>(skb, raw_off::SKB_DATA)
            // SAFETY: bpf_probe_read_kernel copes with any address.
            .and_then(|th| unsafe { bpf_probe_read_kernel((th + 2) as *const u16) }.ok())
            .map(u16::from_be)
    };
    let Some(base) = port.and_then(lc_base) else {
        return 0;
    };
    let reason: u64 = ctx.arg(2);
    on_send_reset(base, reason as usize, sk, state, ctx.arg(1));
    0
}

/// Raw `tcp_receive_reset(struct sock *sk)`.
#[raw_tracepoint(tracepoint = "tcp_receive_reset")]
pub fn lc_raw_receive_reset(ctx: RawTracePointContext) -> u32 {
    let sk: u64 = ctx.arg(0);
    if let Some(base) = raw_port(sk).and_then(lc_base) {
        on_receive_reset(base, sk);
    }
    0
}

/// Raw `tcp_destroy_sock(struct sock *sk)`.
#[raw_tracepoint(tracepoint = "tcp_destroy_sock")]
pub fn lc_raw_destroy_sock(ctx: RawTracePointContext) -> u32 {
    let sk: u64 = ctx.arg(0);
    if raw_port(sk).and_then(lc_base).is_some() {
        on_destroy(sk);
    }
    0
}
