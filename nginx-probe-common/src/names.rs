//! Names that cross the kernel boundary: the eBPF object's maps, programs and patched
//! globals. The eBPF crate declares its statics and functions under exactly these
//! names (a Rust identifier cannot be taken from a const); user space asks for them only
//! through these consts, and a host test in nginx-probe (`collect::loader`) parses the
//! embedded object and checks both sides: every name here exists there and the object
//! has nothing that is not named here. Each list is one declaration: the consts and
//! their `ALL` come from it.

/// Maps of the eBPF object (all in the eBPF crate's `maps.rs`).
pub mod map {
    names! {
        /// Every map, for the contract test.
        pub const ALL;
        /// Hash, worker tgid -> its slot: the tracked workers.
        WORKERS = "WORKERS",
        /// Array, the direct-mapped copy of `WORKERS` every program checks first.
        FILTER = "FILTER",
        /// Array, element 0 = 1 once a tracked tgid could not enter `FILTER`.
        COLLIDED = "COLLIDED",
        /// Stack of free worker slots (the fork program pops one per new worker).
        FREE_SLOTS = "FREE_SLOTS",
        /// Per-CPU `SyscallStats` per (slot, syscall).
        STATS = "STATS",
        /// Per-CPU `SyscallStats` per slot: HTTP requests (`--uprobes`).
        REQUESTS = "REQUESTS",
        /// LRU, [tgid, connection] -> start of its current request, ns.
        REQ_START = "REQ_START",
        /// Array per slot: the main thread's syscall entry (`InFlight`).
        MAIN_ENTRY = "MAIN_ENTRY",
        /// LRU, pid_tgid -> other threads' syscall entry (`InFlight`).
        IN_FLIGHT = "IN_FLIGHT",
        /// Array per slot: event-loop iterations (`SyscallStats`).
        LOOP = "LOOP",
        /// Array per slot: 1 + the fd the main thread accepted last.
        LAST_ACCEPT = "LAST_ACCEPT",
        /// Array per slot: connections closed right after their accept.
        ACCEPT_CLOSE = "ACCEPT_CLOSE",
        /// Array per slot: the worker's last `ngx_get_connection` call, [stack slot of
        /// its return address, that address] (closes inside it reuse connections).
        GET_CONN_FRAME = "GET_CONN_FRAME",
        /// Per-CPU `SyscallStats` per (slot, fd kind): writes by destination.
        WRITES = "WRITES",
        /// Hash, (tgid << 32 | fd) -> fd kind, from /proc (fallback classification).
        FD_KINDS = "FD_KINDS",
        /// Array per slot: when the main thread last returned from an epoll wait, ns.
        LAST_WAKE = "LAST_WAKE",
        /// Per-CPU counters of events not fully accounted (`crate::drop`).
        DROPS = "DROPS",
        /// Per-CPU `SyscallStats` per (slot, `TLS_STATS` entry): libssl's handshakes.
        TLS = "TLS",
        /// LRU, [tgid, `SSL*`] -> first `SSL_do_handshake` call, ns.
        HS_START = "HS_START",
        /// LRU, pid_tgid -> [`SSL*`, entry ns] inside `SSL_do_handshake`.
        HS_CALL = "HS_CALL",
        /// Hash, nginx's listening TCP ports (from sock_diag).
        LISTEN_PORTS = "LISTEN_PORTS",
        /// Hash, inode numbers of the error logs.
        ERROR_LOGS = "ERROR_LOGS",
        /// Per-CPU per slot: opens that returned an access-log fd.
        LOG_OPENS = "LOG_OPENS",
        /// Array of `SyscallStats` per (slot, `UPSTREAM_STATS` entry).
        UPSTREAM = "UPSTREAM",
        /// Hash, (tgid << 32 | fd) -> connect start ns: the workers' upstream fds.
        UPSTREAM_FD = "UPSTREAM_FD",
        /// Array per slot: the connect or getsockopt the main thread is in.
        UP_CALL = "UP_CALL",
        /// Per worker slot: connections accepted, counted by the `ngx_get_connection`
        /// uprobe (see [`super::prog::GET_CONNECTION`]).
        ACCEPTED = "ACCEPTED",
        /// Element 0: where `ngx_event_accept` lies relative to `ngx_get_connection`, so
        /// the accept uprobe tells its caller by the return address.
        ACCEPT_CALLER = "ACCEPT_CALLER",
        /// Per worker slot: TLS handshakes completed on client connections, counted by the
        /// `ngx_ssl_ocsp_validate` uprobe (see [`super::prog::OCSP_VALIDATE`]).
        TLS_DONE = "TLS_DONE",
        /// [tgid, `SSL*`] of a worker's TLS connections to upstreams, left out of the
        /// handshake figures (see [`super::prog::SSL_SET_CONNECT_STATE`]).
        TLS_CLIENT = "TLS_CLIENT",
        /// Element 0 = 1: outside a `--detail sampled` window, detail programs count nothing.
        DETAIL_GATE = "DETAIL_GATE",
    }
}

/// Programs of the eBPF object other than the syscall enter/exit pairs, whose names
/// are `sys_enter_<tracepoint>` / `sys_exit_<tracepoint>` for every entry of
/// [`crate::SYSCALLS`] (see [`syscall_program`]).
pub mod prog {
    names! {
        /// Every such program, for the contract test.
        pub const ALL;
        /// `sched:sched_process_fork`: follows the master's forks.
        FORK = "sched_process_fork",
        /// `syscalls:sys_enter_close`: the accept-then-close detector.
        CLOSE_AFTER_ACCEPT = "close_after_accept",
        /// uprobe on `ngx_http_create_request` (the program is named after the symbol).
        CREATE_REQUEST = "ngx_http_create_request",
        /// uprobe on `ngx_http_free_request` (the program is named after the symbol).
        FREE_REQUEST = "ngx_http_free_request",
        /// uprobe on libssl's `SSL_do_handshake`: a TLS handshake call starts.
        SSL_DO_HANDSHAKE = "ssl_do_handshake",
        /// uretprobe on `SSL_do_handshake`: the call returns (1: handshake complete).
        SSL_DO_HANDSHAKE_RET = "ssl_do_handshake_ret",
        /// uprobe on libssl's `SSL_free`: a handshake still open is abandoned.
        SSL_FREE = "ssl_free",
        /// uprobe on libssl's `SSL_set_connect_state`: the `SSL*` is an upstream's.
        SSL_SET_CONNECT_STATE = "ssl_set_connect_state",
        /// `syscalls:sys_exit_openat`: counts opens that return an access-log fd.
        ACCESS_LOG_OPEN = "access_log_open",
        /// uprobe on nginx's `ngx_get_connection`: counts the calls on accepted sockets
        /// (one per fd accept4/accept returned to `ngx_event_accept`).
        GET_CONNECTION = "ngx_get_connection",
        /// uprobe on nginx's `ngx_ssl_ocsp_validate`: one TLS handshake completed (counted
        /// on connections nginx accepted, not on its upstream ones).
        OCSP_VALIDATE = "ngx_ssl_ocsp_validate",
    }
}

/// Read-only globals the loader patches before loading.
pub mod global {
    names! {
        /// Every patched global, for the contract test.
        pub const ALL;
        /// u32: host tgid of the nginx master, whose forks the fork program follows.
        MASTER_TGID = "MASTER_TGID",
        /// u64: offset of `parent_pid` in `sched:sched_process_fork` records, from the
        /// tracepoint's `format` file.
        FORK_PARENT_OFF = "FORK_PARENT_OFF",
        /// u64: offset of `child_pid` in `sched:sched_process_fork` records, from the
        /// tracepoint's `format` file.
        FORK_CHILD_OFF = "FORK_CHILD_OFF",
        /// 1: classify writes by walking the fd table (see `crate::off`).
        FD_WALK = "FD_WALK",
        /// Kernel struct offsets, indexed by `crate::off`.
        KOFF = "KOFF",
    }
}

/// Name of the program on `syscalls:sys_<dir>_<tracepoint>`, `dir` being `enter` or
/// `exit`: the program and the tracepoint share the name.
#[cfg(not(target_arch = "bpf"))]
pub fn syscall_program(dir: &str, tracepoint: &str) -> std::string::String {
    std::format!("sys_{dir}_{tracepoint}")
}

/// Name of the exit-only program on `syscalls:sys_exit_<tracepoint>` of an
/// fd-creating syscall ([`crate::FD_CREATING`]): counts the call and its errors.
#[cfg(not(target_arch = "bpf"))]
pub fn count_exit_program(tracepoint: &str) -> std::string::String {
    std::format!("count_exit_{tracepoint}")
}
