//! Upstream connections as the kernel counts them: the outcome classes of a worker's
//! `connect()` ([`connect_err`]), the layout of the `UPSTREAM` array
//! ([`UPSTREAM_STATS`]), the `UPSTREAM_FD` map's size and the `UP_CALL` record.

use crate::ERR_CLASSES;

indexed! {
    /// Outcome classes of a worker's `connect()` (at the call, or learned later with
    /// `getsockopt(SO_ERROR)`), indexing the `errs` of the connect stats in `UPSTREAM`.
    /// `EINPROGRESS` is not among them: it is not an error.
    pub mod connect_err: usize;
    /// Number of [`connect_err`] classes: as many as [`ErrClass`](crate::ErrClass)es,
    /// since they share `SyscallStats::errs`.
    pub const CONNECT_ERR_CLASSES;
    /// Names of the [`connect_err`] classes, in index order.
    pub const CONNECT_ERR_NAMES: [&str];
    /// `ECONNREFUSED` (111): nothing listens at the upstream address (RST).
    ECONNREFUSED => "ECONNREFUSED",
    /// `ETIMEDOUT` (110): the kernel gave up on the SYN retries.
    ETIMEDOUT => "ETIMEDOUT",
    /// `EADDRNOTAVAIL` (99): no free local port (ephemeral ports in TIME_WAIT).
    EADDRNOTAVAIL => "EADDRNOTAVAIL",
    /// `ENETUNREACH` (101).
    ENETUNREACH => "ENETUNREACH",
    /// `EHOSTUNREACH` (113).
    EHOSTUNREACH => "EHOSTUNREACH",
    /// Any other errno.
    OTHER => "OTHER",
}

// The connect classes are counted in `SyscallStats::errs`, sized for `ErrClass`.
const _: () = assert!(CONNECT_ERR_CLASSES == ERR_CLASSES);

/// The [`connect_err`] class of a positive errno.
#[inline(always)]
pub const fn connect_err_class(errno: i64) -> usize {
    match errno {
        111 => connect_err::ECONNREFUSED,
        110 => connect_err::ETIMEDOUT,
        99 => connect_err::EADDRNOTAVAIL,
        101 => connect_err::ENETUNREACH,
        113 => connect_err::EHOSTUNREACH,
        _ => connect_err::OTHER,
    }
}

/// Elements of the `UPSTREAM` array per worker slot (index `slot * UPSTREAM_STATS + i`),
/// both [`SyscallStats`](crate::SyscallStats) so that user space sums, deltas and merges
/// them like the rest:
///
/// - [`UPSTREAM_CONNECT`]: `count` = `connect()` calls; `errors` = connects that
///   failed, at the call or learned later; `errs` by [`connect_err`] class; `ret_sum` =
///   connections established; `timed`/`total_ns`/`max_ns`/`hist` = connect latency as
///   the worker sees it, ns: from `connect()` entry to its return when it completes at
///   once, else to the exit of the `getsockopt(SO_ERROR)` by which nginx learns the
///   result (`ngx_http_upstream_test_connect`).
/// - [`UPSTREAM_FDS`]: `count` = fds that became upstream (first `connect()` on them);
///   `errors` = those closed; `ret_sum` = those closed before the result was learned
///   (nginx's `proxy_connect_timeout`, or the client left); `timed` = connects that
///   returned `EINPROGRESS`.
pub const UPSTREAM_STATS: u32 = 2;
/// See [`UPSTREAM_STATS`].
pub const UPSTREAM_CONNECT: u32 = 0;
/// See [`UPSTREAM_STATS`].
pub const UPSTREAM_FDS: u32 = 1;

/// Entries of the `UPSTREAM_FD` hash ((tgid << 32 | fd) -> connect start ns, 0 once
/// the result is known): upstream fds open in all workers at once.
pub const MAX_UPSTREAM_FDS: u32 = 65536;

/// A worker's main thread inside `connect()` or `getsockopt()` on an upstream fd: what
/// the exit needs from the entry (per slot in `UP_CALL`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpstreamCall {
    /// fd + 1 (0: none pending).
    pub fd1: u64,
    /// `connect()` entry, ns (for getsockopt: the connect's, from `UPSTREAM_FD`).
    pub start_ns: u64,
    /// getsockopt: user address of `optval` (read at exit); connect: 0.
    pub optval: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_classes_of_errnos() {
        assert_eq!(connect_err_class(111), connect_err::ECONNREFUSED);
        assert_eq!(connect_err_class(99), connect_err::EADDRNOTAVAIL);
        assert_eq!(connect_err_class(115), connect_err::OTHER);
        assert_eq!(CONNECT_ERR_NAMES[connect_err::ETIMEDOUT], "ETIMEDOUT");
    }
}
