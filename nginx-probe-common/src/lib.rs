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
#![warn(missing_docs)]
pub mod exits;
pub mod lifecycle;
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

/// Entries of the LRU map from `SSL*` to the start of its TLS handshake: bounds
/// handshakes in progress at once.
pub const MAX_OPEN_HANDSHAKES: u32 = 65536;

/// [`SyscallStats`] per worker slot in the `TLS` map: 0 = handshakes (started in
/// `count`, completed ones timed, abandoned in `errors`), 1 = `SSL_do_handshake` calls
/// (time inside each).
pub const TLS_STATS: u32 = 2;

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

/// Which programs a traced syscall has: an entry/exit pair (timed), or an exit program
/// only (counted with its errors, never timed: no entry timestamp is stored). Every
/// syscall of [`FD_CREATING`] also has a `count_exit_<tp>` program, attached whenever
/// its pair is not, so EMFILE/ENFILE are counted whatever `--syscalls` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// `sys_enter_<tp>` + `sys_exit_<tp>`: counted and timed.
    Always,
    /// `count_exit_<tp>` only: counted (count, errors by class), `timed` stays 0.
    Never,
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
    /// Which programs trace it.
    pub entry: Entry,
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
    pub const PWRITEV: u32 = 14;
    /// `socket()`: an upstream connection (or resolver/syslog socket) starts here.
    pub const SOCKET: u32 = 15;
    /// `connect()`: EINPROGRESS is not an error (see `UPSTREAM_CONNECT`).
    pub const CONNECT: u32 = 16;
    /// `getsockopt()`: nginx reads `SO_ERROR` to learn a non-blocking connect's result.
    pub const GETSOCKOPT: u32 = 17;
    pub const SOCKETPAIR: u32 = 18;
    pub const PIPE2: u32 = 19;
    pub const EVENTFD2: u32 = 20;
    pub const EPOLL_CREATE1: u32 = 21;
    pub const DUP: u32 = 22;
    pub const DUP2: u32 = 23;
    pub const DUP3: u32 = 24;
}

/// Number of traced syscalls.
pub const SYSCALL_COUNT: usize = 25;

/// The syscalls that create file descriptors: EMFILE (soft `RLIMIT_NOFILE`) and ENFILE
/// (`fs.file-max`) are counted on each, per worker (`count_exit_*` programs where the
/// syscall is not timed).
pub const FD_CREATING: [u32; 11] = [
    sys::ACCEPT4,
    sys::ACCEPT,
    sys::OPENAT,
    sys::SOCKET,
    sys::SOCKETPAIR,
    sys::PIPE2,
    sys::EVENTFD2,
    sys::EPOLL_CREATE1,
    sys::DUP,
    sys::DUP2,
    sys::DUP3,
];

/// Whether `syscall` is called once per connection (accepts) or at start-up (pipes,
/// eventfds, epoll instances, dups): such tracepoints stay attached and counting in
/// every `--detail` mode; other syscalls' programs count only while `DETAIL_GATE` is open.
pub const fn is_rare(syscall: u32) -> bool {
    use sys::*;
    matches!(
        syscall,
        ACCEPT4 | ACCEPT | SOCKETPAIR | PIPE2 | EVENTFD2 | EPOLL_CREATE1 | DUP | DUP2 | DUP3
    )
}

/// `-EINPROGRESS` (115): a non-blocking `connect()` has started; not an error.
pub const EINPROGRESS: i64 = 115;

/// The traced syscalls, indexed by the constants in [`sys`].
pub const SYSCALLS: [SyscallDef; SYSCALL_COUNT] = [
    SyscallDef {
        tracepoint: "accept4",
        name: "accept4",
        ret: RetKind::Fd,
        entry: Entry::Always,
    },
    SyscallDef {
        tracepoint: "accept",
        name: "accept",
        ret: RetKind::Fd,
        entry: Entry::Always,
    },
    SyscallDef {
        tracepoint: "epoll_wait",
        name: "epoll_wait",
        ret: RetKind::Events,
        entry: Entry::Always,
    },
    SyscallDef {
        tracepoint: "epoll_pwait",
        name: "epoll_pwait",
        ret: RetKind::Events,
        entry: Entry::Always,
    },
    SyscallDef {
        tracepoint: "epoll_pwait2",
        name: "epoll_pwait2",
        ret: RetKind::Events,
        entry: Entry::Always,
    },
    SyscallDef {
        tracepoint: "sendfile64",
        name: "sendfile",
        ret: RetKind::Bytes,
        entry: Entry::Always,
    },
    SyscallDef {
        tracepoint: "write",
        name: "write",
        ret: RetKind::Bytes,
        entry: Entry::Always,
    },
    SyscallDef {
        tracepoint: "writev",
        name: "writev",
        ret: RetKind::Bytes,
        entry: Entry::Always,
    },
    SyscallDef {
        tracepoint: "pwrite64",
        name: "pwrite64",
        ret: RetKind::Bytes,
        entry: Entry::Always,
    },
    SyscallDef {
        tracepoint: "openat",
        name: "openat",
        ret: RetKind::Fd,
        entry: Entry::Always,
    },
    SyscallDef {
        tracepoint: "close",
        name: "close",
        ret: RetKind::Status,
        entry: Entry::Always,
    },
    SyscallDef {
        tracepoint: "recvfrom",
        name: "recvfrom",
        ret: RetKind::Bytes,
        entry: Entry::Always,
    },
    SyscallDef {
        tracepoint: "read",
        name: "read",
        ret: RetKind::Bytes,
        entry: Entry::Always,
    },
    SyscallDef {
        tracepoint: "newfstatat",
        name: "newfstatat",
        ret: RetKind::Status,
        entry: Entry::Always,
    },
    // nginx writes a chain of buffers to a temp file with pwritev (the last part of a
    // buffered request body, for one).
    SyscallDef {
        tracepoint: "pwritev",
        name: "pwritev",
        ret: RetKind::Bytes,
        entry: Entry::Always,
    },
    SyscallDef {
        tracepoint: "socket",
        name: "socket",
        ret: RetKind::Fd,
        entry: Entry::Never,
    },
    SyscallDef {
        tracepoint: "connect",
        name: "connect",
        ret: RetKind::Status,
        entry: Entry::Always,
    },
    SyscallDef {
        tracepoint: "getsockopt",
        name: "getsockopt",
        ret: RetKind::Status,
        entry: Entry::Always,
    },
    SyscallDef {
        tracepoint: "socketpair",
        name: "socketpair",
        ret: RetKind::Status,
        entry: Entry::Never,
    },
    SyscallDef {
        tracepoint: "pipe2",
        name: "pipe2",
        ret: RetKind::Status,
        entry: Entry::Never,
    },
    SyscallDef {
        tracepoint: "eventfd2",
        name: "eventfd2",
        ret: RetKind::Fd,
        entry: Entry::Never,
    },
    SyscallDef {
        tracepoint: "epoll_create1",
        name: "epoll_create1",
        ret: RetKind::Fd,
        entry: Entry::Never,
    },
    SyscallDef {
        tracepoint: "dup",
        name: "dup",
        ret: RetKind::Fd,
        entry: Entry::Never,
    },
    SyscallDef {
        tracepoint: "dup2",
        name: "dup2",
        ret: RetKind::Fd,
        entry: Entry::Never,
    },
    SyscallDef {
        tracepoint: "dup3",
        name: "dup3",
        ret: RetKind::Fd,
        entry: Entry::Never,
    },
];

/// The default traced set: accepts, the event loop, response writes (pwritev too), upstream
/// connections (socket, connect, getsockopt: once per upstream connection, plus one
/// getsockopt per proxied request with upstream keepalive), and the rarely called
/// fd-creating syscalls (exit-only). `openat` is not in it, but its exits are counted
/// for EMFILE/ENFILE anyway (see [`FD_CREATING`]). The rest of [`SYSCALLS`] (`openat`
/// timed, `close`, `recvfrom`, `read`, `newfstatat`) doubles the tracepoint hits per
/// request and is traced with `--syscalls all`.
pub const CORE_SYSCALLS: [u32; 20] = [
    sys::ACCEPT4,
    sys::ACCEPT,
    sys::EPOLL_WAIT,
    sys::EPOLL_PWAIT,
    sys::EPOLL_PWAIT2,
    sys::SENDFILE,
    sys::WRITE,
    sys::WRITEV,
    sys::PWRITE64,
    sys::PWRITEV,
    sys::SOCKET,
    sys::CONNECT,
    sys::GETSOCKOPT,
    sys::SOCKETPAIR,
    sys::PIPE2,
    sys::EVENTFD2,
    sys::EPOLL_CREATE1,
    sys::DUP,
    sys::DUP2,
    sys::DUP3,
];

/// Outcome classes of a worker's `connect()` (at the call, or learned later with
/// `getsockopt(SO_ERROR)`), indexing the `errs` of the connect stats in `UPSTREAM`.
/// `EINPROGRESS` is not among them: it is not an error.
pub mod connect_err {
    /// `ECONNREFUSED` (111): nothing listens at the upstream address (RST).
    pub const ECONNREFUSED: usize = 0;
    /// `ETIMEDOUT` (110): the kernel gave up on the SYN retries.
    pub const ETIMEDOUT: usize = 1;
    /// `EADDRNOTAVAIL` (99): no free local port (ephemeral ports in TIME_WAIT).
    pub const EADDRNOTAVAIL: usize = 2;
    /// `ENETUNREACH` (101).
    pub const ENETUNREACH: usize = 3;
    /// `EHOSTUNREACH` (113).
    pub const EHOSTUNREACH: usize = 4;
    /// Any other errno.
    pub const OTHER: usize = 5;
}

/// Names of the [`connect_err`] classes, in index order.
pub const CONNECT_ERR_NAMES: [&str; ERR_CLASSES] = [
    "ECONNREFUSED",
    "ETIMEDOUT",
    "EADDRNOTAVAIL",
    "ENETUNREACH",
    "EHOSTUNREACH",
    "OTHER",
];

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
/// both [`SyscallStats`] so that user space sums, deltas and merges them like the rest:
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

pub mod names;

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

/// What a worker writes to, for splitting write/writev/pwrite64/pwritev by destination.
///
/// With the kernel's BTF, the write's entry tracepoint classifies the fd at the moment
/// of the write by walking the worker's fd table (`task_struct->files->fdt->fd[fd]`):
/// [`CLIENT`](fd_kind::CLIENT), [`UPSTREAM`](fd_kind::UPSTREAM),
/// [`ACCESS_LOG`](fd_kind::ACCESS_LOG), [`ERROR_LOG`](fd_kind::ERROR_LOG),
/// [`TEMP_FILE`](fd_kind::TEMP_FILE), [`OTHER_FILE`](fd_kind::OTHER_FILE),
/// [`OTHER`](fd_kind::OTHER). Without BTF (fallback), user space classifies each
/// worker's fds from `/proc/<pid>/fd` every 2 s into the `FD_KINDS` map, and an fd not
/// in it counts as [`SOCKET`](fd_kind::SOCKET); regular files that are not logs count
/// as [`FILE`](fd_kind::FILE).
pub mod fd_kind {
    /// Fallback only: a socket, or an fd the last /proc snapshot did not have.
    pub const SOCKET: u32 = 0;
    /// A regular file opened with `O_APPEND` that is not an error log: an access log.
    pub const ACCESS_LOG: u32 = 1;
    /// An error log: the file on the workers' fd 2 (any file type), by inode.
    pub const ERROR_LOG: u32 = 2;
    /// Fallback only: another regular file (temp files, cache).
    pub const FILE: u32 = 3;
    /// A pipe, eventfd, epoll or other anonymous inode, or a socket that is neither
    /// TCP nor unix.
    pub const OTHER: u32 = 4;
    /// A TCP socket whose local port is one of nginx's listening ports, or a unix
    /// socket with a bound address (accepted from a unix listener): a client.
    pub const CLIENT: u32 = 5;
    /// Any other TCP or unix socket: an upstream (proxy_pass, fastcgi_pass, ...).
    pub const UPSTREAM: u32 = 6;
    /// A regular file opened for writing without `O_APPEND`: nginx's client_body,
    /// proxy, fastcgi, uwsgi and scgi temp files (which become cache files).
    pub const TEMP_FILE: u32 = 7;
    /// Any other file: read-only regular files, character and block devices.
    pub const OTHER_FILE: u32 = 8;
    /// The fd table could not be read (fd closed meanwhile, or out of range).
    pub const UNKNOWN: u32 = 9;
}

/// Number of fd kinds.
pub const FD_KIND_COUNT: usize = 10;

/// Names of the fd kinds, indexed by the constants in [`fd_kind`] (the keys of a
/// report's `writes`).
pub const FD_KIND_NAMES: [&str; FD_KIND_COUNT] = [
    "socket",
    "access_log",
    "error_log",
    "file",
    "other",
    "client",
    "upstream",
    "temp_file",
    "other_file",
    "unknown",
];

/// The kinds a report lists when writes are classified in the kernel (fd table walk).
pub const FD_KINDS_KERNEL: [u32; 8] = [
    fd_kind::CLIENT,
    fd_kind::UPSTREAM,
    fd_kind::ACCESS_LOG,
    fd_kind::ERROR_LOG,
    fd_kind::TEMP_FILE,
    fd_kind::OTHER_FILE,
    fd_kind::OTHER,
    fd_kind::UNKNOWN,
];

/// The kinds a report lists when writes are classified from /proc snapshots.
pub const FD_KINDS_PROC: [u32; 5] = [
    fd_kind::SOCKET,
    fd_kind::ACCESS_LOG,
    fd_kind::ERROR_LOG,
    fd_kind::FILE,
    fd_kind::OTHER,
];

/// Kernel struct member offsets, bytes, read from the kernel's BTF by user space and
/// patched into the eBPF object as globals; the eBPF programs walk the fd table with
/// them. Index with the constants of [`off`].
pub mod off {
    /// `task_struct.files`
    pub const TASK_FILES: usize = 0;
    /// `files_struct.fdt`
    pub const FILES_FDT: usize = 1;
    /// `fdtable.max_fds`
    pub const FDT_MAX_FDS: usize = 2;
    /// `fdtable.fd`
    pub const FDT_FD: usize = 3;
    /// `file.f_flags`
    pub const FILE_FLAGS: usize = 4;
    /// `file.f_inode`
    pub const FILE_INODE: usize = 5;
    /// `file.private_data`
    pub const FILE_PRIVATE: usize = 6;
    /// `inode.i_mode`
    pub const INODE_MODE: usize = 7;
    /// `inode.i_ino`
    pub const INODE_INO: usize = 8;
    /// `inode.i_sb`
    pub const INODE_SB: usize = 9;
    /// `super_block.s_magic`
    pub const SB_MAGIC: usize = 10;
    /// `socket.sk`
    pub const SOCKET_SK: usize = 11;
    /// `sock.__sk_common.skc_family`
    pub const SK_FAMILY: usize = 12;
    /// `sock.__sk_common.skc_num` (local port, host order)
    pub const SK_NUM: usize = 13;
    /// `unix_sock.addr` (non-null once bound, and on sockets accepted from a listener)
    pub const UNIX_ADDR: usize = 14;
    /// `socket.state` (`SS_CONNECTED` once accepted; not on listening or new sockets)
    pub const SOCKET_STATE: usize = 15;
}

/// Number of kernel offsets in [`off`].
pub const OFF_COUNT: usize = 16;

/// (struct, member path) of each offset in [`off`], in index order: what user space
/// looks up in BTF. A path descends through named and anonymous members.
pub const OFF_PATHS: [(&str, &str); OFF_COUNT] = [
    ("task_struct", "files"),
    ("files_struct", "fdt"),
    ("fdtable", "max_fds"),
    ("fdtable", "fd"),
    ("file", "f_flags"),
    ("file", "f_inode"),
    ("file", "private_data"),
    ("inode", "i_mode"),
    ("inode", "i_ino"),
    ("inode", "i_sb"),
    ("super_block", "s_magic"),
    ("socket", "sk"),
    ("sock", "__sk_common.skc_family"),
    ("sock", "__sk_common.skc_num"),
    ("unix_sock", "addr"),
    ("socket", "state"),
];

/// Entries of the `ERROR_LOGS` map: inode numbers (`i_ino`) of the error logs. Matched by inode
/// number alone: a `stat`'s device differs from the kernel's `s_dev` on overlayfs and btrfs.
pub const MAX_ERROR_LOGS: u32 = 64;

/// Entries of the `LISTEN_PORTS` map (nginx's listening TCP ports).
pub const MAX_LISTEN_PORTS: u32 = 1024;

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
    /// An upstream fd could not enter `UPSTREAM_FD` (full): its connect latency and
    /// close are not counted.
    pub const UPSTREAM_FD_FULL: u32 = 6;
}

/// Number of counters in the `DROPS` map.
pub const DROP_COUNTERS: usize = 7;

/// Human names of the `DROPS` counters, indexed by the constants in [`drop`].
pub const DROP_NAMES: [&str; DROP_COUNTERS] = [
    "exit_without_entry",
    "entry_store_failed",
    "slot_out_of_range",
    "entry_mismatch",
    "slots_exhausted",
    "filter_full",
    "upstream_fd_full",
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
    // SAFETY: three u64.
    unsafe impl aya::Pod for super::UpstreamCall {}
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
        assert_eq!(SYSCALLS[sys::SOCKET as usize].name, "socket");
        assert_eq!(SYSCALLS[sys::CONNECT as usize].entry, Entry::Always);
        assert_eq!(SYSCALLS[sys::DUP3 as usize].name, "dup3");
        assert_eq!(SYSCALLS[sys::PIPE2 as usize].entry, Entry::Never);
        for i in FD_CREATING {
            assert!(matches!(
                SYSCALLS[i as usize].ret,
                RetKind::Fd | RetKind::Status
            ));
        }
        assert_eq!(connect_err_class(111), connect_err::ECONNREFUSED);
        assert_eq!(connect_err_class(99), connect_err::EADDRNOTAVAIL);
        assert_eq!(connect_err_class(115), connect_err::OTHER);
        assert_eq!(CONNECT_ERR_NAMES[connect_err::ETIMEDOUT], "ETIMEDOUT");
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
