//! The lifecycle of nginx's client connections, continuous layer. TCP state changes and
//! resets fire once per connection (not per request), often in softirq: a socket is
//! nginx's when it is TCP and its local port is in `LC_PORTS` (nginx's listening ports,
//! from user space), whatever task runs. See `nginx_probe_common::lifecycle` for the
//! counters.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_jiffies64, bpf_probe_read_kernel},
    macros::tracepoint,
    programs::TracePointContext,
};
use nginx_probe_common::lifecycle as lc;

use crate::{
    helpers::{global, record_at},
    maps::{LC_CLOSING, LC_HZ, LC_LRCVTIME_OFF, LC_LSNDTIME_OFF, LC_PORTS, LC_STATS},
};

const TCP_ESTABLISHED: i32 = 1;
const TCP_SYN_RECV: i32 = 3;
const TCP_FIN_WAIT1: i32 = 4;
const TCP_CLOSE: i32 = 7;
const TCP_CLOSE_WAIT: i32 = 8;
const TCP_LISTEN: i32 = 10;
const IPPROTO_TCP: u16 = 6;

/// Base index in `LC_STATS` of local port `port`, if it is one of nginx's.
#[inline(always)]
fn lc_base(port: u16) -> Option<u32> {
    let idx = LC_PORTS.get(port as u32).copied()?.checked_sub(1)?;
    if idx >= lc::LC_MAX_PORTS {
        return None;
    }
    Some(idx * lc::LC_PER_PORT as u32)
}

#[inline(always)]
fn lc_add(base: u32, counter: usize, n: u64) {
    if let Some(p) = LC_STATS.get_ptr_mut(base + counter as u32) {
        // SAFETY: per-CPU element; tracepoint programs do not nest on one CPU.
        unsafe { *p += n };
    }
}

#[inline(always)]
fn lc_max(base: u32, counter: usize, v: u64) {
    if let Some(p) = LC_STATS.get_ptr_mut(base + counter as u32) {
        // SAFETY: as in lc_add.
        unsafe {
            if v > *p {
                *p = v;
            }
        }
    }
}

/// ms since the last data segment sent or received on `sk`, now; None when the
/// offsets or HZ are unknown or the socket cannot be read.
#[inline(always)]
fn lc_idle_ms(sk: u64) -> Option<u64> {
    let snd_off = global(&LC_LSNDTIME_OFF);
    let rcv_off = global(&LC_LRCVTIME_OFF);
    let hz = global(&LC_HZ);
    if sk == 0 || snd_off == u64::MAX || rcv_off == u64::MAX || hz == 0 {
        return None;
    }
    // SAFETY: bpf_probe_read_kernel copes with any address.
    let snd: u32 = unsafe { bpf_probe_read_kernel((sk + snd_off) as *const u32) }.ok()?;
    let rcv: u32 = unsafe { bpf_probe_read_kernel((sk + rcv_off) as *const u32) }.ok()?;
    // SAFETY: helper without preconditions.
    let now = unsafe { bpf_jiffies64() } as u32;
    let a = now.wrapping_sub(snd);
    let b = now.wrapping_sub(rcv);
    let j = if a < b { a } else { b } as u64;
    Some(j * 1000 / hz)
}

/// `sock:inet_sock_set_state`: who closed first, established connections, listeners
/// closed, idle time before nginx's close.
#[tracepoint]
pub fn lc_set_state(ctx: TracePointContext) -> u32 {
    if record_at::<u16>(&ctx, 30) != IPPROTO_TCP {
        return 0;
    }
    let Some(base) = lc_base(record_at::<u16>(&ctx, 24)) else {
        return 0;
    };
    let old = record_at::<i32>(&ctx, 16);
    let new = record_at::<i32>(&ctx, 20);
    match (old, new) {
        (TCP_SYN_RECV, TCP_ESTABLISHED) => lc_add(base, lc::ESTABLISHED, 1),
        (TCP_ESTABLISHED, TCP_FIN_WAIT1) => {
            lc_add(base, lc::CLOSED_BY_NGINX, 1);
            if let Some(ms) = lc_idle_ms(record_at::<u64>(&ctx, 8)) {
                lc_add(base, lc::IDLE_COUNT, 1);
                lc_add(base, lc::IDLE_SUM_MS, ms);
                lc_max(base, lc::IDLE_MAX_MS, ms);
                lc_max(base, lc::IDLE_INV_MIN_MS, !ms);
                lc_add(base, lc::IDLE_HIST + lc::idle_bucket(ms), 1);
            }
        }
        (TCP_ESTABLISHED, TCP_CLOSE_WAIT) => lc_add(base, lc::CLOSED_BY_CLIENT, 1),
        (TCP_ESTABLISHED, TCP_CLOSE) => lc_add(base, lc::CLOSED_BY_RESET, 1),
        (TCP_LISTEN, TCP_CLOSE) => {
            lc_add(base, lc::LISTENERS_CLOSED, 1);
            let _ = LC_CLOSING.insert(bpf_get_current_pid_tgid(), record_at::<u64>(&ctx, 8), 0);
        }
        _ => {}
    }
    0
}

/// `tcp:tcp_send_reset`: a reset sent from one of nginx's ports (local port from
/// `saddr`, a sockaddr: family at +0, big-endian port at +2), by `reason`.
#[tracepoint]
pub fn lc_send_reset(ctx: TracePointContext) -> u32 {
    let port = u16::from_be(record_at::<u16>(&ctx, 34));
    let Some(base) = lc_base(port) else { return 0 };
    lc_add(base, lc::RST_SENT, 1);
    let reason = record_at::<u32>(&ctx, 28) as usize;
    let r = if reason < lc::LC_REASONS {
        reason
    } else {
        lc::LC_REASONS - 1
    };
    lc_add(base, lc::RST_BY_REASON + r, 1);
    let sk = record_at::<u64>(&ctx, 16);
    // SAFETY: the value is copied out at once.
    if let Some(l) = unsafe { LC_CLOSING.get(bpf_get_current_pid_tgid()) }.copied() {
        if sk != 0 && sk != l && record_at::<i32>(&ctx, 24) != TCP_LISTEN {
            lc_add(base, lc::RST_CLOSED_LISTENER, 1);
        }
    }
    0
}

/// `tcp:tcp_receive_reset`: a reset arrived on one of nginx's sockets.
#[tracepoint]
pub fn lc_receive_reset(ctx: TracePointContext) -> u32 {
    if let Some(base) = lc_base(record_at::<u16>(&ctx, 16)) {
        lc_add(base, lc::RST_RECEIVED, 1);
    }
    0
}

/// `tcp:tcp_destroy_sock`: the listener a task was closing is gone; its later resets
/// are not the listener's queue.
#[tracepoint]
pub fn lc_destroy_sock(ctx: TracePointContext) -> u32 {
    if lc_base(record_at::<u16>(&ctx, 16)).is_none() {
        return 0;
    }
    let key = bpf_get_current_pid_tgid();
    // SAFETY: the value is copied out at once.
    if let Some(l) = unsafe { LC_CLOSING.get(key) }.copied() {
        if l == record_at::<u64>(&ctx, 8) {
            let _ = LC_CLOSING.remove(key);
        }
    }
    0
}
