//! The per-(worker, syscall) aggregate every counting map holds ([`SyscallStats`]) and
//! its log2 latency histogram ([`HIST_BUCKETS`], [`hist_bucket`]).

use crate::ERR_CLASSES;

/// Number of log2 latency buckets per (worker, syscall). Bucket `i` counts calls whose
/// latency in ns satisfies `2^i <= ns < 2^(i+1)` (bucket 0 also holds 0 ns); the last
/// bucket also holds everything longer (2^39 ns is about 9 minutes).
pub const HIST_BUCKETS: usize = 40;

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

/// Per-(worker slot, syscall) aggregate, one per CPU in the `STATS` per-CPU array (and
/// the same shape in `REQUESTS`, `LOOP`, `WRITES`, `TLS` and `UPSTREAM`).
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
    /// Errors by [`ErrClass`](crate::ErrClass).
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
    fn hist_bucket_clamps_to_last() {
        assert_eq!(hist_bucket(0), 0);
        assert_eq!(hist_bucket(1500), 10);
        assert_eq!(hist_bucket(1 << 39), 39);
        assert_eq!(hist_bucket(1 << 45), HIST_BUCKETS - 1);
        assert_eq!(hist_bucket(u64::MAX), HIST_BUCKETS - 1);
    }

    #[test]
    fn stats_layout_has_no_padding() {
        assert_eq!(
            core::mem::size_of::<SyscallStats>(),
            8 * (6 + ERR_CLASSES + HIST_BUCKETS)
        );
        assert_eq!(core::mem::size_of::<crate::InFlight>(), 16);
    }
}
