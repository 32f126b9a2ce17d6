//! The worker filter and the per-slot bookkeeping: how many slots, the direct-mapped
//! `FILTER` entry every program checks first, the sizes of the per-thread maps, and the
//! `DROPS` counters of events that could not be fully accounted.

/// Default number of worker slots. User space resizes the stats map at load time
/// (`max_entries = slots * SYSCALL_COUNT`) to fit the nginx it attaches to.
pub const DEFAULT_WORKER_SLOTS: u32 = 64;

/// Entries of the direct-mapped worker filter (`FILTER`), indexed by
/// `tgid & (FILTER_SIZE - 1)`: 512 KiB that let every process's syscall be judged with
/// one array load instead of a hash lookup.
pub const FILTER_SIZE: u32 = 1 << 16;

/// A `FILTER` entry: `tgid << 32 | (slot + 1)`; 0 is empty.
pub const fn filter_entry(tgid: u32, slot: u32) -> u64 {
    ((tgid as u64) << 32) | (slot as u64 + 1)
}

/// The slot of `tgid` in a `FILTER` entry, if the entry is `tgid`'s.
pub const fn filter_slot(entry: u64, tgid: u32) -> Option<u32> {
    if entry != 0 && (entry >> 32) as u32 == tgid {
        Some((entry as u32).wrapping_sub(1))
    } else {
        None
    }
}

/// Maximum number of tracked worker tgids in the `WORKERS` filter map.
pub const MAX_TRACKED_TGIDS: u32 = 1024;

/// Entries of the LRU map that holds syscall-entry timestamps, keyed by pid_tgid.
/// A worker thread is in at most one syscall at a time, so this bounds threads, not calls.
pub const MAX_IN_FLIGHT: u32 = 16384;

indexed! {
    /// Indexes of the `DROPS` per-CPU counter array: events that could not be fully
    /// accounted. User space prints every non-zero one.
    pub mod drop: u32;
    /// Number of counters in the `DROPS` map.
    pub const DROP_COUNTERS;
    /// Human names of the `DROPS` counters, indexed by the constants in [`drop`].
    pub const DROP_NAMES: [&str];
    /// A worker's syscall exit had no entry timestamp (in flight at attach, or evicted
    /// from the LRU map): counted, but not timed.
    EXIT_WITHOUT_ENTRY => "exit_without_entry",
    /// The entry timestamp could not be stored (map update failed).
    ENTRY_STORE_FAILED => "entry_store_failed",
    /// The worker slot was outside the stats map: the event was lost.
    SLOT_OUT_OF_RANGE => "slot_out_of_range",
    /// The entry timestamp belonged to another syscall (a missed exit): not timed.
    ENTRY_MISMATCH => "entry_mismatch",
    /// A child of the master was not traced: every stats slot was used.
    SLOTS_EXHAUSTED => "slots_exhausted",
    /// A child of the master was not traced: the `WORKERS` filter map was full.
    FILTER_FULL => "filter_full",
    /// An upstream fd could not enter `UPSTREAM_FD` (full): its connect latency and
    /// close are not counted.
    UPSTREAM_FD_FULL => "upstream_fd_full",
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_entries_name_their_tgid_and_slot() {
        let e = filter_entry(4321, 0);
        assert_eq!(filter_slot(e, 4321), Some(0));
        assert_eq!(
            filter_slot(e, 4321 + FILTER_SIZE),
            None,
            "same index, other tgid"
        );
        assert_eq!(filter_slot(0, 0), None, "empty");
        assert_eq!(filter_slot(filter_entry(u32::MAX, 63), u32::MAX), Some(63));
    }

    #[test]
    fn drop_names_follow_their_indexes() {
        assert_eq!(DROP_COUNTERS, 7);
        assert_eq!(DROP_NAMES[drop::FILTER_FULL as usize], "filter_full");
        assert_eq!(drop::UPSTREAM_FD_FULL, 6);
    }
}
