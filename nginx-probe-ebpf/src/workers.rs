//! The worker filter every program starts with (`FILTER`, `COLLIDED`, `WORKERS`) and
//! the fork program that adds the master's new children to it.

use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid, macros::tracepoint, programs::TracePointContext,
};
use nginx_probe_common::{drop, filter_entry, filter_slot, FILTER_SIZE};

use crate::{
    helpers::{count_drop, global},
    maps::{COLLIDED, FILTER, FORK_CHILD_OFF, FORK_PARENT_OFF, FREE_SLOTS, MASTER_TGID, WORKERS},
};

/// The slot of worker `tgid`, or None for any other process: one array load
/// (`FILTER`), and a hash lookup in `WORKERS` only once a collision happened.
#[inline(always)]
pub(crate) fn slot_of(tgid: u32) -> Option<u32> {
    if let Some(e) = FILTER.get(tgid & (FILTER_SIZE - 1)) {
        if let Some(slot) = filter_slot(*e, tgid) {
            return Some(slot);
        }
    }
    match COLLIDED.get(0) {
        // SAFETY: the value is copied out immediately.
        Some(&1) => unsafe { WORKERS.get(tgid) }.copied(),
        _ => None,
    }
}

/// The slot of the current task's process, if it is a worker.
#[inline(always)]
pub(crate) fn worker_slot() -> Option<u32> {
    slot_of((bpf_get_current_pid_tgid() >> 32) as u32)
}

/// The main thread of a worker: (tgid, slot); None for other threads and processes.
#[inline(always)]
pub(crate) fn main_thread_slot() -> Option<(u32, u32)> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if pid_tgid as u32 != tgid {
        return None;
    }
    slot_of(tgid).map(|s| (tgid, s))
}

/// Follows the master's forks (reload, worker respawn, cache processes): the child
/// enters `WORKERS` with a free slot before it runs. User space later classifies
/// it from /proc and removes what is not a worker. No free slot and a full `WORKERS`
/// are counted in `DROPS` (`slots_exhausted`, `filter_full`); a taken `FILTER` index
/// sets `COLLIDED`: once per fork of the master, never per request.
#[tracepoint]
pub fn sched_process_fork(ctx: TracePointContext) -> u32 {
    // SAFETY: bpf_probe_read of the tracepoint record at an offset from its format.
    let parent: i32 = match unsafe { ctx.read_at::<i32>(global(&FORK_PARENT_OFF) as usize) } {
        Ok(p) => p,
        Err(_) => return 0,
    };
    if parent as u32 != global(&MASTER_TGID) {
        return 0;
    }
    // SAFETY: as above.
    let child = match unsafe { ctx.read_at::<i32>(global(&FORK_CHILD_OFF) as usize) } {
        Ok(c) => c as u32,
        Err(_) => return 0,
    };
    let slot = match FREE_SLOTS.pop() {
        Ok(Some(s)) => s,
        _ => {
            count_drop(drop::SLOTS_EXHAUSTED);
            return 0;
        }
    };
    if WORKERS.insert(child, slot, 0).is_err() {
        let _ = FREE_SLOTS.push(slot, 0);
        count_drop(drop::FILTER_FULL);
        return 0;
    }
    place_in_filter(child, slot);
    0
}

/// Puts `child` in its `FILTER` element if that is free; else marks `COLLIDED` (from
/// then on, misses in `FILTER` also look in `WORKERS`) and returns false.
#[inline(always)]
fn place_in_filter(child: u32, slot: u32) -> bool {
    // The master forks one child at a time, and user space only clears entries of
    // tgids it untracks: nobody else writes this element now.
    let placed = match FILTER.get_ptr_mut(child & (FILTER_SIZE - 1)) {
        // SAFETY: see above.
        Some(e) if unsafe { *e } == 0 => {
            unsafe { *e = filter_entry(child, slot) };
            true
        }
        _ => false,
    };
    if !placed {
        if let Some(c) = COLLIDED.get_ptr_mut(0) {
            // SAFETY: only ever set to 1.
            unsafe { *c = 1 };
        }
    }
    placed
}
