//! Names that cross the kernel boundary: the eBPF object's maps, programs and patched
//! globals. The eBPF crate declares its statics and functions under exactly these
//! names (a Rust identifier cannot be taken from a const); user space asks for them only
//! through these consts, and a host test in nginx-probe (`collect::loader`) parses the
//! embedded object and checks both sides: every name here exists there and the object
//! has nothing that is not named here.

/// Maps of the eBPF object.
pub mod map {
    pub const WORKERS: &str = "WORKERS";
    pub const FILTER: &str = "FILTER";
    pub const COLLIDED: &str = "COLLIDED";
    pub const FREE_SLOTS: &str = "FREE_SLOTS";
    pub const STATS: &str = "STATS";
    pub const REQUESTS: &str = "REQUESTS";
    pub const REQ_START: &str = "REQ_START";
    pub const MAIN_ENTRY: &str = "MAIN_ENTRY";
    pub const IN_FLIGHT: &str = "IN_FLIGHT";
    pub const LOOP: &str = "LOOP";
    pub const LAST_ACCEPT: &str = "LAST_ACCEPT";
    pub const ACCEPT_CLOSE: &str = "ACCEPT_CLOSE";
    pub const WRITES: &str = "WRITES";
    pub const FD_KINDS: &str = "FD_KINDS";
    pub const LAST_WAKE: &str = "LAST_WAKE";
    pub const DROPS: &str = "DROPS";
    pub const TLS: &str = "TLS";
    pub const HS_START: &str = "HS_START";
    pub const HS_CALL: &str = "HS_CALL";
    pub const LISTEN_PORTS: &str = "LISTEN_PORTS";
    pub const ERROR_LOGS: &str = "ERROR_LOGS";
    pub const LOG_OPENS: &str = "LOG_OPENS";
    pub const UPSTREAM: &str = "UPSTREAM";
    pub const UPSTREAM_FD: &str = "UPSTREAM_FD";
    pub const UP_CALL: &str = "UP_CALL";
    /// Per worker slot: connections accepted, counted by the `ngx_get_connection`
    /// uprobe (see [`super::prog::GET_CONNECTION`]).
    pub const ACCEPTED: &str = "ACCEPTED";
    /// Element 0: where `ngx_event_accept` lies relative to `ngx_get_connection`, so
    /// the accept uprobe tells its caller by the return address.
    pub const ACCEPT_CALLER: &str = "ACCEPT_CALLER";
    /// Per worker slot: TLS handshakes completed on client connections, counted by the
    /// `ngx_ssl_ocsp_validate` uprobe (see [`super::prog::OCSP_VALIDATE`]).
    pub const TLS_DONE: &str = "TLS_DONE";
    /// [tgid, `SSL*`] of a worker's TLS connections to upstreams, left out of the
    /// handshake figures (see [`super::prog::SSL_SET_CONNECT_STATE`]).
    pub const TLS_CLIENT: &str = "TLS_CLIENT";
    /// Element 0 = 1: outside a `--detail sampled` window, detail programs count nothing.
    pub const DETAIL_GATE: &str = "DETAIL_GATE";
    /// Every map, for the contract test.
    pub const ALL: &[&str] = &[
        WORKERS,
        FILTER,
        COLLIDED,
        FREE_SLOTS,
        STATS,
        REQUESTS,
        REQ_START,
        MAIN_ENTRY,
        IN_FLIGHT,
        LOOP,
        LAST_ACCEPT,
        ACCEPT_CLOSE,
        WRITES,
        FD_KINDS,
        LAST_WAKE,
        DROPS,
        TLS,
        HS_START,
        HS_CALL,
        LISTEN_PORTS,
        ERROR_LOGS,
        LOG_OPENS,
        UPSTREAM,
        UPSTREAM_FD,
        UP_CALL,
        ACCEPTED,
        ACCEPT_CALLER,
        TLS_DONE,
        TLS_CLIENT,
        DETAIL_GATE,
    ];
}

/// Programs of the eBPF object other than the syscall enter/exit pairs, whose names
/// are `sys_enter_<tracepoint>` / `sys_exit_<tracepoint>` for every entry of
/// [`crate::SYSCALLS`] (see [`syscall_program`]).
pub mod prog {
    /// `sched:sched_process_fork`: follows the master's forks.
    pub const FORK: &str = "sched_process_fork";
    /// `syscalls:sys_enter_close`: the accept-then-close detector.
    pub const CLOSE_AFTER_ACCEPT: &str = "close_after_accept";
    /// uprobe on `ngx_http_create_request` (the program is named after the symbol).
    pub const CREATE_REQUEST: &str = "ngx_http_create_request";
    /// uprobe on `ngx_http_free_request` (the program is named after the symbol).
    pub const FREE_REQUEST: &str = "ngx_http_free_request";
    /// uprobe on libssl's `SSL_do_handshake`: a TLS handshake call starts.
    pub const SSL_DO_HANDSHAKE: &str = "ssl_do_handshake";
    /// uretprobe on `SSL_do_handshake`: the call returns (1: handshake complete).
    pub const SSL_DO_HANDSHAKE_RET: &str = "ssl_do_handshake_ret";
    /// uprobe on libssl's `SSL_free`: a handshake still open is abandoned.
    pub const SSL_FREE: &str = "ssl_free";
    /// uprobe on libssl's `SSL_set_connect_state`: the `SSL*` is an upstream's.
    pub const SSL_SET_CONNECT_STATE: &str = "ssl_set_connect_state";
    /// `syscalls:sys_exit_openat`: counts opens that return an access-log fd.
    pub const ACCESS_LOG_OPEN: &str = "access_log_open";
    /// uprobe on nginx's `ngx_get_connection`: counts the calls on accepted sockets
    /// (one per fd accept4/accept returned to `ngx_event_accept`).
    pub const GET_CONNECTION: &str = "ngx_get_connection";
    /// uprobe on nginx's `ngx_ssl_ocsp_validate`: one TLS handshake completed (counted
    /// on connections nginx accepted, not on its upstream ones).
    pub const OCSP_VALIDATE: &str = "ngx_ssl_ocsp_validate";
    /// Every such program, for the contract test.
    pub const ALL: &[&str] = &[
        FORK,
        CLOSE_AFTER_ACCEPT,
        CREATE_REQUEST,
        FREE_REQUEST,
        SSL_DO_HANDSHAKE,
        SSL_DO_HANDSHAKE_RET,
        SSL_FREE,
        SSL_SET_CONNECT_STATE,
        ACCESS_LOG_OPEN,
        GET_CONNECTION,
        OCSP_VALIDATE,
    ];
}

/// Read-only globals the loader patches before loading.
pub mod global {
    pub const MASTER_TGID: &str = "MASTER_TGID";
    pub const FORK_PARENT_OFF: &str = "FORK_PARENT_OFF";
    pub const FORK_CHILD_OFF: &str = "FORK_CHILD_OFF";
    /// 1: classify writes by walking the fd table (see `crate::off`).
    pub const FD_WALK: &str = "FD_WALK";
    /// Kernel struct offsets, indexed by `crate::off`.
    pub const KOFF: &str = "KOFF";
    /// Every patched global, for the contract test.
    pub const ALL: &[&str] = &[MASTER_TGID, FORK_PARENT_OFF, FORK_CHILD_OFF, FD_WALK, KOFF];
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
