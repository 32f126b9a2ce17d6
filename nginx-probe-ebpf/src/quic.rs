//! QUIC connections nginx ends, in its own words: uprobes on
//! `ngx_quic_shutdown_connection` and `ngx_quic_finalize_connection` (see
//! `nginx_probe_common::quic`) count each call of the traced master's workers by
//! (call, error code, reason address); the one on `ngx_quic_close_connection` counts
//! its silent closes at the QUIC idle timeout.

use aya_ebpf::{macros::uprobe, programs::ProbeContext};
use nginx_probe_common::quic::{
    QuicEndKey, CALL_FINALIZE, CALL_IDLE_TIMEOUT, CALL_SHUTDOWN, CALL_STARTED, NGX_DONE,
    OVERFLOW_KEY,
};

use crate::{
    lifecycle_tls::{user, CONN_READ, EV_FLAGS},
    maps::QUIC_ENDS,
    workers::worker_slot,
};

/// `bpf_map_update_elem` flag: insert only if absent.
const BPF_NOEXIST: u64 = 1;

/// Adds 1 to `p`'s count, atomically (workers on other CPUs count the same key).
#[inline(always)]
fn bump(p: *mut u64) {
    use core::intrinsics::{atomic_xadd, AtomicOrdering};
    // SAFETY: `p` is a valid map value.
    unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(p, 1) };
}

/// `ngx_event_t.timedout`: bit 10 after `write`, `accept`, `instance`, `active`,
/// `disabled`, `ready`, `oneshot`, `complete`, `eof`, `error` (the same in every nginx
/// from 1.14 to 1.29, as `lifecycle_tls::EV_EOF`).
const EV_TIMEDOUT: u32 = 1 << 10;

/// Counts one call of the current worker's `call(c, err, reason)`: into its key,
/// inserted if new; into [`OVERFLOW_KEY`] when the map is full.
#[inline(always)]
fn count(ctx: &ProbeContext, call: u32) -> u32 {
    if worker_slot().is_none() {
        return 0;
    }
    let key = QuicEndKey {
        reason: ctx.arg::<u64>(2).unwrap_or(0),
        code: ctx.arg::<u64>(1).unwrap_or(0),
        call,
        _pad: 0,
    };
    count_key(key);
    0
}

/// Adds one call of `call` without error code or reason (the idle-timeout close, a
/// connection started).
#[inline(always)]
fn count_call(call: u32) {
    count_key(QuicEndKey {
        reason: 0,
        code: 0,
        call,
        _pad: 0,
    });
}

/// Adds one call to `key`, inserted if new; to [`OVERFLOW_KEY`] when the map is full.
#[inline(always)]
fn count_key(key: QuicEndKey) {
    if let Some(p) = QUIC_ENDS.get_ptr_mut(key) {
        bump(p);
        return;
    }
    if QUIC_ENDS.insert(key, 1, BPF_NOEXIST).is_ok() {
        return;
    }
    // Another CPU inserted it meanwhile, or the map is full.
    if let Some(p) = QUIC_ENDS
        .get_ptr_mut(key)
        .or_else(|| QUIC_ENDS.get_ptr_mut(OVERFLOW_KEY))
    {
        bump(p);
    }
}

/// `ngx_quic_shutdown_connection(c, err, reason)`: a graceful end begun.
#[uprobe]
pub fn quic_shutdown(ctx: ProbeContext) -> u32 {
    count(&ctx, CALL_SHUTDOWN)
}

/// `ngx_quic_finalize_connection(c, err, reason)`: an immediate close posted.
#[uprobe]
pub fn quic_finalize(ctx: ProbeContext) -> u32 {
    count(&ctx, CALL_FINALIZE)
}

/// `ngx_quic_close_connection(c, rc)`: counted only as a silent close at the QUIC idle
/// timeout (`rc` `NGX_DONE` and `c->read->timedout`).
#[uprobe]
pub fn quic_close(ctx: ProbeContext) -> u32 {
    if ctx.arg::<i64>(1) != Some(NGX_DONE) || worker_slot().is_none() {
        return 0;
    }
    let Some(c) = ctx.arg::<u64>(0) else { return 0 };
    let flags = user::<u64>(c.wrapping_add(CONN_READ))
        .and_then(|rev| user::<u32>(rev.wrapping_add(EV_FLAGS)));
    if flags.is_some_and(|f| f & EV_TIMEDOUT != 0) {
        count_call(CALL_IDLE_TIMEOUT);
    }
    0
}

/// `ngx_http_v3_init(c)`: a QUIC connection whose handshake completed, started.
#[uprobe]
pub fn quic_started(_ctx: ProbeContext) -> u32 {
    if worker_slot().is_some() {
        count_call(CALL_STARTED);
    }
    0
}
