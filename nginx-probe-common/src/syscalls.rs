//! The traced syscalls: one declaration gives each its index ([`sys`]), their number
//! ([`SYSCALL_COUNT`]) and their table ([`SYSCALLS`]: tracepoint, report name, what the
//! return value means, which programs trace it); the sets built on it (the default
//! set, the fd-creating ones, the rare ones); the error classes counted per syscall;
//! and the entry record a syscall's exit is timed against.

/// How user space interprets [`SyscallStats::ret_sum`](crate::SyscallStats::ret_sum)
/// for a syscall.
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

/// One traced syscall: its tracepoint name under `syscalls:sys_{enter,exit}_<tracepoint>`,
/// the name reports use, and what its return value means. Its index in the stats map is
/// its place in [`SYSCALLS`] (the constants of [`sys`]).
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

impl SyscallDef {
    /// A syscall traced by an entry/exit pair, reported under its tracepoint's name.
    const fn timed(tracepoint: &'static str, ret: RetKind) -> SyscallDef {
        SyscallDef {
            tracepoint,
            name: tracepoint,
            ret,
            entry: Entry::Always,
        }
    }

    /// A syscall traced by its exit only (counted, never timed).
    const fn exit_only(tracepoint: &'static str, ret: RetKind) -> SyscallDef {
        SyscallDef {
            entry: Entry::Never,
            ..SyscallDef::timed(tracepoint, ret)
        }
    }
}

indexed! {
    /// Index of each traced syscall in [`SYSCALLS`](crate::SYSCALLS) and in the stats
    /// map (`slot * SYSCALL_COUNT + index`).
    pub mod sys: u32;
    /// Number of traced syscalls.
    pub const SYSCALL_COUNT;
    /// The traced syscalls, indexed by the constants in [`sys`].
    pub const SYSCALLS: [SyscallDef];
    /// `accept4()`: nginx's accept on Linux; returns the connection's fd.
    ACCEPT4 => SyscallDef::timed("accept4", RetKind::Fd),
    /// `accept()`: nginx built without `accept4`.
    ACCEPT => SyscallDef::timed("accept", RetKind::Fd),
    /// `epoll_wait()`: the event loop waits (returns the ready events).
    EPOLL_WAIT => SyscallDef::timed("epoll_wait", RetKind::Events),
    /// `epoll_pwait()`: the event loop's wait on some libcs.
    EPOLL_PWAIT => SyscallDef::timed("epoll_pwait", RetKind::Events),
    /// `epoll_pwait2()`: the event loop's wait on newer libcs (absent on old kernels).
    EPOLL_PWAIT2 => SyscallDef::timed("epoll_pwait2", RetKind::Events),
    /// `sendfile()` (tracepoint `sendfile64`): a static file's body, bytes.
    SENDFILE => SyscallDef {
        name: "sendfile",
        ..SyscallDef::timed("sendfile64", RetKind::Bytes)
    },
    /// `write()`: responses, log lines, temp files, by destination in `WRITES`.
    WRITE => SyscallDef::timed("write", RetKind::Bytes),
    /// `writev()`: response headers and bodies from buffers.
    WRITEV => SyscallDef::timed("writev", RetKind::Bytes),
    /// `pwrite64()`: temp and cache files.
    PWRITE64 => SyscallDef::timed("pwrite64", RetKind::Bytes),
    /// `openat()`: files served, logs reopened per request; an fd-creating syscall.
    OPENAT => SyscallDef::timed("openat", RetKind::Fd),
    /// `close()`: connections and files closed.
    CLOSE => SyscallDef::timed("close", RetKind::Status),
    /// `recvfrom()`: request bytes read from clients.
    RECVFROM => SyscallDef::timed("recvfrom", RetKind::Bytes),
    /// `read()`: files, pipes and sockets read.
    READ => SyscallDef::timed("read", RetKind::Bytes),
    /// `newfstatat()`: a file's metadata (the static-file path stats each file twice).
    NEWFSTATAT => SyscallDef::timed("newfstatat", RetKind::Status),
    /// `pwritev()`: nginx writes a chain of buffers to a temp file with it (the last
    /// part of a buffered request body, for one).
    PWRITEV => SyscallDef::timed("pwritev", RetKind::Bytes),
    /// `socket()`: an upstream connection (or resolver/syslog socket) starts here.
    SOCKET => SyscallDef::exit_only("socket", RetKind::Fd),
    /// `connect()`: EINPROGRESS is not an error (see `UPSTREAM_CONNECT`).
    CONNECT => SyscallDef::timed("connect", RetKind::Status),
    /// `getsockopt()`: nginx reads `SO_ERROR` to learn a non-blocking connect's result.
    GETSOCKOPT => SyscallDef::timed("getsockopt", RetKind::Status),
    /// `socketpair()`: the channels between the master and its workers.
    SOCKETPAIR => SyscallDef::exit_only("socketpair", RetKind::Status),
    /// `pipe2()`: pipes.
    PIPE2 => SyscallDef::exit_only("pipe2", RetKind::Status),
    /// `eventfd2()`: the event loop's notification fd (thread pools, aio).
    EVENTFD2 => SyscallDef::exit_only("eventfd2", RetKind::Fd),
    /// `epoll_create1()`: a worker's epoll instance, at start.
    EPOLL_CREATE1 => SyscallDef::exit_only("epoll_create1", RetKind::Fd),
    /// `dup()`.
    DUP => SyscallDef::exit_only("dup", RetKind::Fd),
    /// `dup2()`: the error log put on fd 2.
    DUP2 => SyscallDef::exit_only("dup2", RetKind::Fd),
    /// `dup3()`.
    DUP3 => SyscallDef::exit_only("dup3", RetKind::Fd),
}

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

/// `-EINPROGRESS` (115): a non-blocking `connect()` has started; not an error.
pub const EINPROGRESS: i64 = 115;

named_enum! {
    /// Error classes counted per (worker, syscall). `EAGAIN` is kept apart: for a
    /// non-blocking `accept4` it means "queue empty", not a refusal.
    pub enum ErrClass;
    /// Number of [`ErrClass`] values.
    pub const ERR_CLASSES;
    /// Names of the error classes, indexed by `ErrClass as usize`.
    pub const ERR_CLASS_NAMES;
    /// `EAGAIN`/`EWOULDBLOCK` (11): nothing to do right now.
    Eagain => "EAGAIN",
    /// `EMFILE` (24): the process hit its soft `RLIMIT_NOFILE`.
    Emfile => "EMFILE",
    /// `ENFILE` (23): the system-wide file table (`fs.file-max`) is full.
    Enfile => "ENFILE",
    /// `ECONNABORTED` (103): the client reset the connection before it was accepted.
    Econnaborted => "ECONNABORTED",
    /// `EINTR` (4): interrupted by a signal.
    Eintr => "EINTR",
    /// Any other negative return.
    Other => "OTHER",
}

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

/// A syscall's entry, kept until its exit: the main thread's in the `MAIN_ENTRY` array
/// (per slot), other threads' in the `IN_FLIGHT` LRU map keyed by
/// `bpf_get_current_pid_tgid()`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InFlight {
    /// `bpf_ktime_get_ns()` at the entry tracepoint, ns; 0: no entry.
    pub start_ns: u64,
    /// Index of the syscall in [`SYSCALLS`].
    pub syscall: u32,
    /// For write, writev, pwrite64 and pwritev: the [`fd_kind`](crate::fd_kind) of the
    /// fd written to.
    pub fd_kind: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn err_class_from_negative_errno() {
        assert_eq!(ErrClass::from_ret(-11), ErrClass::Eagain);
        assert_eq!(ErrClass::from_ret(-24), ErrClass::Emfile);
        assert_eq!(ErrClass::from_ret(-23), ErrClass::Enfile);
        assert_eq!(ErrClass::from_ret(-103), ErrClass::Econnaborted);
        assert_eq!(ErrClass::from_ret(-4), ErrClass::Eintr);
        assert_eq!(ErrClass::from_ret(-9), ErrClass::Other);
        assert_eq!(ERR_CLASS_NAMES[ErrClass::Emfile as usize], "EMFILE");
        assert_eq!(ErrClass::Other as usize, ERR_CLASSES - 1);
    }

    #[test]
    fn syscall_table_matches_indexes() {
        assert_eq!(SYSCALLS[sys::ACCEPT4 as usize].name, "accept4");
        assert_eq!(SYSCALLS[sys::SENDFILE as usize].tracepoint, "sendfile64");
        assert_eq!(SYSCALLS[sys::SENDFILE as usize].name, "sendfile");
        assert_eq!(SYSCALLS[sys::NEWFSTATAT as usize].name, "newfstatat");
        assert_eq!(SYSCALLS.len(), SYSCALL_COUNT);
        assert_eq!(SYSCALL_COUNT, 25);
        assert_eq!(sys::DUP3, 24);
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
    }
}
