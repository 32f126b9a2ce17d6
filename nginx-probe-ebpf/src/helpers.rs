//! Helpers every probe family uses: reading a tracepoint record or a patched global,
//! the detail gate, and the drop counters.

use aya_ebpf::{maps::PerCpuArray, programs::TracePointContext, EbpfContext as _};
use nginx_probe_common::{drop, SyscallStats};

use crate::maps::{DETAIL_GATE, DROPS};

/// Offset of `long ret` in `syscalls:sys_exit_*` records and of the first argument
/// in `syscalls:sys_enter_*` records (after the 8-byte common header and the 4-byte
/// `__syscall_nr` with its padding). User space checks it against the tracepoints'
/// `format` files before loading.
const RECORD_WORD_OFFSET: usize = 16;

/// A `T` at byte `off` of the tracepoint record: a direct context load at a constant
/// offset (checked by the verifier against the record's bounds), far cheaper than a
/// `bpf_probe_read` helper call. User space checks the offsets against the format
/// files before attaching.
#[inline(always)]
pub(crate) fn record_at<T: Copy>(ctx: &TracePointContext, off: usize) -> T {
    // SAFETY: tracepoint programs may read their record directly; the verifier
    // checks the constant offset against the record's bounds.
    unsafe { core::ptr::read_volatile((ctx.as_ptr() as *const u8).add(off) as *const T) }
}

/// The 8-byte word at [`RECORD_WORD_OFFSET`] of a syscall tracepoint record: `ret`
/// on exit, the first argument on entry.
#[inline(always)]
pub(crate) fn record_word(ctx: &TracePointContext) -> u64 {
    record_at(ctx, RECORD_WORD_OFFSET)
}

/// Argument `I` (0-based) of a `syscalls:sys_enter_*` record: 8-byte words from
/// [`RECORD_WORD_OFFSET`] on (user space checks getsockopt's layout).
#[inline(always)]
pub(crate) fn record_arg<const I: usize>(ctx: &TracePointContext) -> u64 {
    record_at(ctx, RECORD_WORD_OFFSET + 8 * I)
}

/// The value of a global the loader patched (`maps.rs`): a volatile read, so that the
/// compiler does not fold the value it had at build time.
#[inline(always)]
pub(crate) fn global<T: Copy>(g: &T) -> T {
    // SAFETY: a read-only global of the object, patched before loading.
    unsafe { core::ptr::read_volatile(g) }
}

/// Whether detail programs must count nothing now (between `--detail sampled`
/// windows; `DETAIL_GATE` element 0).
#[inline(always)]
pub(crate) fn detail_closed() -> bool {
    matches!(DETAIL_GATE.get(0), Some(&1))
}

/// Counts one event of `which` (a `nginx_probe_common::drop` index) that could not be
/// fully accounted.
#[inline(always)]
pub(crate) fn count_drop(which: u32) {
    if let Some(p) = DROPS.get_ptr_mut(which) {
        // SAFETY: per-CPU element; programs do not nest on one CPU for tracepoints.
        unsafe { *p += 1 };
    }
}

/// Adds one to the per-CPU per-slot counter `map[slot]`; a slot outside the map is
/// counted as `SLOT_OUT_OF_RANGE`.
#[inline(always)]
pub(crate) fn count_in_slot(map: &PerCpuArray<u64>, slot: u32) {
    match map.get_ptr_mut(slot) {
        // SAFETY: per-CPU element; uprobe programs do not nest on one CPU.
        Some(n) => unsafe { *n += 1 },
        None => {
            count_drop(drop::SLOT_OUT_OF_RANGE);
        }
    }
}

/// Counts a failed call (`ret` negative) in `s`: `errors` and the class of its errno.
#[inline(always)]
pub(crate) fn count_error(s: &mut SyscallStats, ret: i64) {
    s.errors += 1;
    let c = nginx_probe_common::ErrClass::from_ret(ret) as usize;
    if c < s.errs.len() {
        s.errs[c] += 1;
    }
}
