//! Types and pure logic shared by nginx-probe's eBPF programs and its user space.
//!
//! Everything here is `#[repr(C)]` plain data or `const fn` arithmetic, so that the
//! same definitions are compiled for `bpfel-unknown-none` (no_std) and for the host,
//! where the pure logic gets ordinary unit tests.
//!
//! Data flow: syscall tracepoint -> [`SyscallStats`] in a per-CPU array indexed by
//! `slot * SYSCALL_COUNT + syscall` -> user-space snapshot (summed over CPUs) ->
//! per-interval delta -> report.
#![cfg_attr(target_arch = "bpf", no_std)]

/// Number of log2 latency buckets per (worker, syscall). Bucket `i` counts calls whose
/// latency in ns satisfies `2^i <= ns < 2^(i+1)` (bucket 0 also holds 0 ns); the last
/// bucket also holds everything longer (2^39 ns is about 9 minutes).
pub const HIST_BUCKETS: usize = 40;

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

/// Entries of the LRU map from connection pointer to request start (uprobes only):
/// bounds concurrently open HTTP requests tracked for duration.
pub const MAX_OPEN_REQUESTS: u32 = 65536;

/// Error classes counted per (worker, syscall). `EAGAIN` is kept apart: for a
/// non-blocking `accept4` it means "queue empty", not a refusal.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrClass {
    /// `EAGAIN`/`EWOULDBLOCK` (11): nothing to do right now.
    Eagain = 0,
    /// `EMFILE` (24): the process hit its soft `RLIMIT_NOFILE`.
    Emfile = 1,
    /// `ENFILE` (23): the system-wide file table (`fs.file-max`) is full.
    Enfile = 2,
    /// `ECONNABORTED` (103): the client reset the connection before it was accepted.
    Econnaborted = 3,
    /// `EINTR` (4): interrupted by a signal.
    Eintr = 4,
    /// Any other negative return.
    Other = 5,
}

/// Number of [`ErrClass`] values.
pub const ERR_CLASSES: usize = 6;

/// Names of the error classes, indexed by `ErrClass as usize`.
pub const ERR_CLASS_NAMES: [&str; ERR_CLASSES] = [
    "EAGAIN",
    "EMFILE",
    "ENFILE",
    "ECONNABORTED",
    "EINTR",
    "OTHER",
];

impl ErrClass {
    /// Classifies a syscall return value that is negative (`-errno`).
    #[inline(always)]
    pub const fn from_ret(ret: i64) -> ErrClass {
        match -ret {
            11 => ErrClass::Eagain,
            24 => ErrClass::Emfile,
            23 => ErrClass::Enfile,
            103 => ErrClass::Econnaborted,
            4 => ErrClass::Eintr,
            _ => ErrClass::Other,
        }
    }
}

/// How user space interprets [`SyscallStats::ret_sum`] for a syscall.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetKind {
    /// The return value is a file descriptor (not summed).
    Fd,
    /// The return value is a byte count.
    Bytes,
    /// The return value is a number of ready events (epoll).
    Events,
    /// The return value carries nothing worth summing.
    Status,
}

/// One traced syscall: its index in the stats map, its tracepoint name under
/// `syscalls:sys_{enter,exit}_<tracepoint>`, the name reports use, and what its
/// return value means.
#[derive(Clone, Copy, Debug)]
pub struct SyscallDef {
    /// Tracepoint suffix, e.g. `sendfile64` for `syscalls:sys_enter_sendfile64`.
    pub tracepoint: &'static str,
    /// Name used in reports and JSON, e.g. `sendfile`.
    pub name: &'static str,
    /// What a non-negative return means.
    pub ret: RetKind,
}

/// Index of each traced syscall in [`SYSCALLS`] and in the stats map.
pub mod sys {
    pub const ACCEPT4: u32 = 0;
    pub const ACCEPT: u32 = 1;
    pub const EPOLL_WAIT: u32 = 2;
    pub const EPOLL_PWAIT: u32 = 3;
    pub const EPOLL_PWAIT2: u32 = 4;
    pub const SENDFILE: u32 = 5;
    pub const WRITE: u32 = 6;
    pub const WRITEV: u32 = 7;
    pub const PWRITE64: u32 = 8;
    pub const OPENAT: u32 = 9;
    pub const CLOSE: u32 = 10;
    pub const RECVFROM: u32 = 11;
    pub const READ: u32 = 12;
    pub const NEWFSTATAT: u32 = 13;
}

/// Number of traced syscalls.
pub const SYSCALL_COUNT: usize = 14;

/// The traced syscalls, indexed by the constants in [`sys`].
pub const SYSCALLS: [SyscallDef; SYSCALL_COUNT] = [
    SyscallDef {
        tracepoint: "accept4",
        name: "accept4",
        ret: RetKind::Fd,
    },
    SyscallDef {
        tracepoint: "accept",
        name: "accept",
        ret: RetKind::Fd,
    },
    SyscallDef {
        tracepoint: "epoll_wait",
        name: "epoll_wait",
        ret: RetKind::Events,
    },
    SyscallDef {
        tracepoint: "epoll_pwait",
        name: "epoll_pwait",
        ret: RetKind::Events,
    },
    SyscallDef {
        tracepoint: "epoll_pwait2",
        name: "epoll_pwait2",
        ret: RetKind::Events,
    },
    SyscallDef {
        tracepoint: "sendfile64",
        name: "sendfile",
        ret: RetKind::Bytes,
    },
    SyscallDef {
        tracepoint: "write",
        name: "write",
        ret: RetKind::Bytes,
    },
    SyscallDef {
        tracepoint: "writev",
        name: "writev",
        ret: RetKind::Bytes,
    },
    SyscallDef {
        tracepoint: "pwrite64",
        name: "pwrite64",
        ret: RetKind::Bytes,
    },
    SyscallDef {
        tracepoint: "openat",
        name: "openat",
        ret: RetKind::Fd,
    },
    SyscallDef {
        tracepoint: "close",
        name: "close",
        ret: RetKind::Status,
    },
    SyscallDef {
        tracepoint: "recvfrom",
        name: "recvfrom",
        ret: RetKind::Bytes,
    },
    SyscallDef {
        tracepoint: "read",
        name: "read",
        ret: RetKind::Bytes,
    },
    SyscallDef {
        tracepoint: "newfstatat",
        name: "newfstatat",
        ret: RetKind::Status,
    },
];

/// The default traced set: accepts, the event loop, and response writes. The rest of
/// [`SYSCALLS`] (`openat`, `close`, `recvfrom`, `read`, `newfstatat`) doubles the
/// tracepoint hits per request and is traced with `--syscalls all`.
pub const CORE_SYSCALLS: [u32; 9] = [
    sys::ACCEPT4,
    sys::ACCEPT,
    sys::EPOLL_WAIT,
    sys::EPOLL_PWAIT,
    sys::EPOLL_PWAIT2,
    sys::SENDFILE,
    sys::WRITE,
    sys::WRITEV,
    sys::PWRITE64,
];

/// Per-(worker slot, syscall) aggregate, one per CPU in the `STATS` per-CPU array.
///
/// All counters are cumulative since attach; user space sums them over CPUs (max for
/// `max_ns`) and takes per-interval deltas, so the kernel never clears anything.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyscallStats {
    /// Syscall exits seen in the worker (successes and errors).
    pub count: u64,
    /// Exits whose return was negative (all error classes, EAGAIN included).
    pub errors: u64,
    /// Exits with a matching entry timestamp, i.e. those in `total_ns` and `hist`.
    pub timed: u64,
    /// Sum of latencies of timed exits, ns (entry to exit tracepoint).
    pub total_ns: u64,
    /// Longest timed latency on this CPU, ns.
    pub max_ns: u64,
    /// Sum of non-negative return values (bytes for I/O, events for epoll, 0 otherwise).
    pub ret_sum: u64,
    /// Errors by [`ErrClass`].
    pub errs: [u64; ERR_CLASSES],
    /// log2 latency histogram of timed exits, ns; see [`HIST_BUCKETS`].
    pub hist: [u64; HIST_BUCKETS],
}

impl SyscallStats {
    /// Records one timed latency: `timed`, `total_ns`, `max_ns` and the log2 histogram.
    /// (`count` is the caller's: not every counted event is timed.)
    #[inline(always)]
    pub fn record_ns(&mut self, ns: u64) {
        self.timed += 1;
        self.total_ns += ns;
        if ns > self.max_ns {
            self.max_ns = ns;
        }
        let b = hist_bucket(ns);
        if b < self.hist.len() {
            self.hist[b] += 1;
        }
    }

    /// All-zero stats.
    pub const ZERO: SyscallStats = SyscallStats {
        count: 0,
        errors: 0,
        timed: 0,
        total_ns: 0,
        max_ns: 0,
        ret_sum: 0,
        errs: [0; ERR_CLASSES],
        hist: [0; HIST_BUCKETS],
    };
}

/// Value of the entry-timestamp LRU map, keyed by `bpf_get_current_pid_tgid()`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InFlight {
    /// `bpf_ktime_get_ns()` at the entry tracepoint.
    pub start_ns: u64,
    /// Index of the syscall in [`SYSCALLS`].
    pub syscall: u32,
    /// For write, writev and pwrite64: the [`fd_kind`] of the fd written to.
    pub fd_kind: u32,
}

/// What a worker writes to, for splitting write/writev/pwrite64 by destination. User
/// space classifies each worker's fds from `/proc/<pid>/fd` into the `FD_KINDS` map;
/// an fd not in the map (the many client sockets) counts as [`fd_kind::SOCKET`].
pub mod fd_kind {
    /// A socket, or an fd not classified yet.
    pub const SOCKET: u32 = 0;
    /// A regular file opened for appending that is not the error log: an access log.
    pub const ACCESS_LOG: u32 = 1;
    /// The error log (the file nginx keeps on fd 2).
    pub const ERROR_LOG: u32 = 2;
    /// Another regular file (temp files, cache).
    pub const FILE: u32 = 3;
    /// A pipe, eventfd or anything else.
    pub const OTHER: u32 = 4;
}

/// Number of fd kinds.
pub const FD_KIND_COUNT: usize = 5;

/// Names of the fd kinds, indexed by the constants in [`fd_kind`].
pub const FD_KIND_NAMES: [&str; FD_KIND_COUNT] =
    ["socket", "access_log", "error_log", "file", "other"];

/// Entries of the `FD_KINDS` map: non-socket fds of all workers.
pub const MAX_CLASSIFIED_FDS: u32 = 8192;

/// Indexes of the `DROPS` per-CPU counter array: events that could not be fully
/// accounted. User space prints every non-zero one.
pub mod drop {
    /// A worker's syscall exit had no entry timestamp (in flight at attach, or evicted
    /// from the LRU map): counted, but not timed.
    pub const EXIT_WITHOUT_ENTRY: u32 = 0;
    /// The entry timestamp could not be stored (map update failed).
    pub const ENTRY_STORE_FAILED: u32 = 1;
    /// The worker slot was outside the stats map: the event was lost.
    pub const SLOT_OUT_OF_RANGE: u32 = 2;
    /// The entry timestamp belonged to another syscall (a missed exit): not timed.
    pub const ENTRY_MISMATCH: u32 = 3;
    /// A child of the master was not traced: every stats slot was used.
    pub const SLOTS_EXHAUSTED: u32 = 4;
    /// A child of the master was not traced: the `WORKERS` filter map was full.
    pub const FILTER_FULL: u32 = 5;
}

/// Number of counters in the `DROPS` map.
pub const DROP_COUNTERS: usize = 6;

/// Human names of the `DROPS` counters, indexed by the constants in [`drop`].
pub const DROP_NAMES: [&str; DROP_COUNTERS] = [
    "exit_without_entry",
    "entry_store_failed",
    "slot_out_of_range",
    "entry_mismatch",
    "slots_exhausted",
    "filter_full",
];

/// `floor(log2(v))` for `v >= 1`, 0 for `v == 0`; branch-light and loop-free so the
/// BPF verifier accepts it.
#[inline(always)]
pub const fn log2_u64(mut v: u64) -> u32 {
    let mut r: u32 = 0;
    if v >= 1 << 32 {
        v >>= 32;
        r += 32;
    }
    if v >= 1 << 16 {
        v >>= 16;
        r += 16;
    }
    if v >= 1 << 8 {
        v >>= 8;
        r += 8;
    }
    if v >= 1 << 4 {
        v >>= 4;
        r += 4;
    }
    if v >= 1 << 2 {
        v >>= 2;
        r += 2;
    }
    if v >= 1 << 1 {
        r += 1;
    }
    r
}

/// Histogram bucket for a latency in ns, clamped to the last bucket.
#[inline(always)]
pub const fn hist_bucket(ns: u64) -> usize {
    let b = log2_u64(ns) as usize;
    if b >= HIST_BUCKETS {
        HIST_BUCKETS - 1
    } else {
        b
    }
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: both are #[repr(C)] structs of integers with no padding holes that
    // could carry uninitialised bytes (u64 fields, then two u32).
    unsafe impl aya::Pod for super::SyscallStats {}
    unsafe impl aya::Pod for super::InFlight {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_matches_leading_zeros() {
        assert_eq!(log2_u64(0), 0);
        assert_eq!(log2_u64(1), 0);
        assert_eq!(log2_u64(2), 1);
        assert_eq!(log2_u64(3), 1);
        assert_eq!(log2_u64(1023), 9);
        assert_eq!(log2_u64(1024), 10);
        assert_eq!(log2_u64(u64::MAX), 63);
        for shift in 0..64 {
            let v = 1u64 << shift;
            assert_eq!(log2_u64(v), shift, "2^{shift}");
            assert_eq!(log2_u64(v | (v >> 1)), shift, "2^{shift} + half");
            if shift > 0 {
                assert_eq!(log2_u64(v - 1), shift - 1, "2^{shift} - 1");
            }
        }
    }

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
    fn hist_bucket_clamps_to_last() {
        assert_eq!(hist_bucket(0), 0);
        assert_eq!(hist_bucket(1500), 10);
        assert_eq!(hist_bucket(1 << 39), 39);
        assert_eq!(hist_bucket(1 << 45), HIST_BUCKETS - 1);
        assert_eq!(hist_bucket(u64::MAX), HIST_BUCKETS - 1);
    }

    #[test]
    fn err_class_from_negative_errno() {
        assert_eq!(ErrClass::from_ret(-11), ErrClass::Eagain);
        assert_eq!(ErrClass::from_ret(-24), ErrClass::Emfile);
        assert_eq!(ErrClass::from_ret(-23), ErrClass::Enfile);
        assert_eq!(ErrClass::from_ret(-103), ErrClass::Econnaborted);
        assert_eq!(ErrClass::from_ret(-4), ErrClass::Eintr);
        assert_eq!(ErrClass::from_ret(-9), ErrClass::Other);
        assert_eq!(ERR_CLASS_NAMES[ErrClass::Emfile as usize], "EMFILE");
    }

    #[test]
    fn syscall_table_matches_indexes() {
        assert_eq!(SYSCALLS[sys::ACCEPT4 as usize].name, "accept4");
        assert_eq!(SYSCALLS[sys::SENDFILE as usize].tracepoint, "sendfile64");
        assert_eq!(SYSCALLS[sys::NEWFSTATAT as usize].name, "newfstatat");
        assert_eq!(SYSCALLS.len(), SYSCALL_COUNT);
    }

    #[test]
    fn stats_layout_has_no_padding() {
        assert_eq!(
            core::mem::size_of::<SyscallStats>(),
            8 * (6 + ERR_CLASSES + HIST_BUCKETS)
        );
        assert_eq!(core::mem::size_of::<InFlight>(), 16);
    }
}
