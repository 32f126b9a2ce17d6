//! QUIC connections nginx ends, in its own words: uprobes on
//! `ngx_quic_shutdown_connection` and `ngx_quic_finalize_connection` (see
//! `nginx_probe_common::quic`) count each call of the traced master's workers by
//! (call, error code, reason address).

use aya_ebpf::{macros::uprobe, programs::ProbeContext};
use nginx_probe_common::quic::{QuicEndKey, CALL_FINALIZE, CALL_SHUTDOWN, OVERFLOW_KEY};

use crate::{maps::QUIC_ENDS, workers::worker_slot};

/// `bpf_map_update_elem` flag: insert only if absent.
const BPF_NOEXIST: u64 = 1;

/// Adds 1 to `p`'s count, atomically (workers on other CPUs count the same key).
#[inline(always)]
fn bump(p: *mut u64) {
    use core::intrinsics::{atomic_xadd, AtomicOrdering};
    // SAFETY: `p` is a valid map value.
    unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(p, 1) };
}

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
    if let Some(p) = QUIC_ENDS.get_ptr_mut(key) {
        bump(p);
        return 0;
    }
    if QUIC_ENDS.insert(key, 1, BPF_NOEXIST).is_ok() {
        return 0;
    }
    // Another CPU inserted it meanwhile, or the map is full.
    if let Some(p) = QUIC_ENDS
        .get_ptr_mut(key)
        .or_else(|| QUIC_ENDS.get_ptr_mut(OVERFLOW_KEY))
    {
        bump(p);
    }
    0
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
