//! The metadata of nginx's error-log message classes: every class the error-log reader
//! (`collect::error_log`) counts, the directive(s) it points at, its group, and nginx's
//! log levels. The classifier that assigns lines to them reads nginx's wording in
//! `collect::error_log_classes`; a report's `nginx_errors` section is built from these
//! names ([`crate::model::nginx_errors`]).
//!
//! Class names are labels in Prometheus and JSON: classes are added, never renamed.

use std::collections::BTreeMap;

/// What a class of nginx error-log message is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// nginx refused the request itself (limit_req, limit_conn: 503 by default).
    Refused,
    /// The request failed on the upstream side (502, 504).
    Upstream,
    /// nginx ran out of connections or fds.
    Resources,
    /// Anything else (client errors, missing files, TLS).
    Other,
    /// The master's processes: a worker that crashed, exited, or could not be spawned
    /// (JSON group `process`).
    Process,
}

impl Group {
    /// The group's name in JSON (`refused`, `upstream`, `resources`, `other`,
    /// `process`).
    pub fn name(self) -> &'static str {
        match self {
            Group::Refused => "refused",
            Group::Upstream => "upstream",
            Group::Resources => "resources",
            Group::Other => "other",
            Group::Process => "process",
        }
    }
}

/// One message class: its name, the directive it points at, and its group.
pub struct Class {
    /// Stable name, used as the `class` label.
    pub name: &'static str,
    /// The directive(s) that govern it.
    pub directive: &'static str,
    /// Refusal, upstream failure, resource exhaustion, process, or other.
    pub group: Group,
}

const fn c(name: &'static str, directive: &'static str, group: Group) -> Class {
    Class {
        name,
        directive,
        group,
    }
}

use Group::{Other as O, Process as P, Refused as R, Resources as S, Upstream as U};

/// nginx's log levels, most severe first (`ngx_log_levels`).
pub const LEVELS: [&str; 8] = [
    "emerg", "alert", "crit", "error", "warn", "notice", "info", "debug",
];

/// Every class counted, in reporting order; see `collect::error_log_classes::message_class`
/// for the wording of each.
pub const CLASSES: &[Class] = &[
    c("limit_req", "limit_req", R),
    c("limit_req_dry_run", "limit_req_dry_run", O),
    c("limit_req_delayed", "limit_req ... burst delay", O),
    c("limit_conn", "limit_conn", R),
    c("limit_conn_dry_run", "limit_conn_dry_run", O),
    c("upstream_connect_timeout", "proxy_connect_timeout", U),
    c("upstream_read_timeout", "proxy_read_timeout", U),
    c("upstream_send_timeout", "proxy_send_timeout", U),
    c("upstream_connect_failed", "upstream server / proxy_pass", U),
    c("no_live_upstreams", "upstream server max_fails/fail_timeout", U),
    c(
        "upstream_prematurely_closed",
        "upstream server / proxy_read_timeout",
        U,
    ),
    c("upstream_header_too_big", "proxy_buffer_size", U),
    c("upstream_other", "upstream / proxy_pass", U),
    c("resolver", "resolver / resolver_timeout", U),
    c("emfile", "worker_rlimit_nofile", S),
    c("enfile", "fs.file-max", S),
    c("worker_connections_reusing", "worker_connections", S),
    c("worker_connections", "worker_connections", S),
    c("client_body_too_large", "client_max_body_size", O),
    c(
        "client_timed_out",
        "client_header_timeout / client_body_timeout / send_timeout",
        O,
    ),
    c("client_closed", "-", O),
    c("file_not_found", "root / try_files", O),
    c("forbidden", "allow / deny / autoindex", O),
    c("ssl", "ssl_protocols / ssl_ciphers", O),
    c("other", "-", O),
    // Added with nginx 1.26's words (issue 22).
    c(
        "upstream_addr_unavailable",
        "upstream keepalive / net.ipv4.ip_local_port_range",
        U,
    ),
    // The peer only: a keepalive-timeout mismatch needs a pool of idle upstream
    // connections, which the error log cannot tell; `upstream_errors` names
    // keepalive_timeout when the configuration keeps one or reuse was measured.
    c("upstream_reset", "upstream server", U),
    // Once per peer marked failed, not per request: not in the upstream group, whose
    // lines are judged as a share of the requests.
    c(
        "upstream_server_disabled",
        "upstream server max_fails/fail_timeout",
        O,
    ),
    c("upstream_invalid_response", "upstream server (its response)", U),
    // A response's body cut by the upstream (reset, early close, proxy_read_timeout
    // between two reads): the client had the status already (trial 21).
    c(
        "upstream_cut_mid_response",
        "upstream server / proxy_read_timeout",
        U,
    ),
    c(
        "upstream_ssl",
        "proxy_ssl_verify / proxy_ssl_trusted_certificate / proxy_ssl_name",
        U,
    ),
    c("upstream_stderr", "fastcgi_pass (the application's stderr)", O),
    c("upstream_response_buffered", "proxy_buffers / proxy_max_temp_file_size", O),
    c("client_body_buffered", "client_body_buffer_size", O),
    // Most of these are the client's malformed bytes (control characters, a bad
    // chunk): no directive; only "too long"/"too large" ones are the buffers'.
    c(
        "client_invalid_request",
        "- (the client's malformed request) / large_client_header_buffers (too long)",
        O,
    ),
    c(
        "ssl_client_closed",
        "- (the client hung up mid-handshake: not a protocol or cipher mismatch)",
        O,
    ),
    c("proxy_protocol", "listen ... proxy_protocol", O),
    c("rewrite_cycle", "rewrite / try_files / error_page", O),
    c("permission_denied", "user / file permissions", O),
    c("worker_crashed", "- (a crash: core dump, third-party module)", P),
    c(
        "worker_killed",
        "- (killed from outside: SIGKILL is the OOM killer or an operator)",
        P,
    ),
    c("worker_exited", "- (worker exit code)", P),
    c(
        "worker_exited_fatal",
        "- (exit code 2 at start: the worker's own init failed; see the line before it)",
        P,
    ),
    c("worker_exited_ok", "- (worker exit code 0: reload, shutdown)", P),
    c(
        "worker_spawn_failed",
        "worker_processes / the master's nofile limit (LimitNOFILE)",
        P,
    ),
    c("process_other", "- (master: signals, respawn)", P),
    // A binary upgrade (USR2) that did not take place: the new binary's execve()
    // failed, the pid file's rename around it failed, the new binary's master exited
    // with an error, or the signal was ignored (an upgrade already under way).
    c(
        "binary_upgrade_failed",
        "- (binary upgrade, USR2: the new binary did not take over and the old master keeps serving; the line's path and errno say why)",
        P,
    ),
    c(
        "worker_connections_over_nofile",
        "worker_connections / worker_rlimit_nofile",
        S,
    ),
    c("rlimit", "worker_rlimit_nofile / worker_rlimit_core", S),
    c(
        "shm_zone_full",
        "the zone's size (limit_req_zone, limit_conn_zone, ssl_session_cache, proxy_cache_path keys_zone)",
        S,
    ),
    c("thread_pool", "thread_pool ... max_queue", S),
    c("cache", "proxy_cache_path / proxy_cache_lock", O),
    c("ocsp", "ssl_stapling / ssl_ocsp / resolver", O),
    c("ssl_certificate", "ssl_certificate / ssl_certificate_key", O),
    c("listen_socket", "listen", O),
    c("http2", "http2 / http2_* limits", O),
    c("http3", "http3 / quic / listen ... quic", O),
    c("stream", "stream proxy_pass / server", O),
    c("syslog", "error_log / access_log syslog:", O),
    c("config", "nginx.conf (the file and line nginx names; check with nginx -t)", O),
    c("event_method", "events { use ... } / worker_connections", O),
    c("internal_alert", "- (nginx or a module's bug: report it)", O),
    c("syscall_failed", "- (the errno in the line names it)", O),
    // nginx's info and notice lines (1.22 and 1.26 wordings).
    c(
        "client_closed_keepalive",
        // Trial 10: the client's own idle timeout (or nginx's upstream pool closing
        // connections to itself) was said as nginx's keepalive_timeout.
        "- (the client closed its idle keepalive connection first: its idle timeout, not nginx's; see the CONNECTIONS section)",
        O,
    ),
    c(
        "master_start",
        "worker_processes / events { use } / worker_rlimit_nofile (processes started)",
        P,
    ),
    c(
        "master_signal",
        "- (a signal to the master: nginx -s, kill, a child's exit)",
        P,
    ),
    c("master_reload", "nginx.conf (a reload re-reads it)", P),
    c(
        "binary_upgrade",
        "- (USR2: a binary upgrade begun; its outcome is binary_upgrade_failed or the new master's workers)",
        P,
    ),
    c("log_reopen", "access_log / error_log (USR1: log rotation)", P),
    c(
        "process_exiting",
        "worker_shutdown_timeout (a process exiting: reload, quit, stop)",
        P,
    ),
    // Lines a request wrote into the log (issue 22's trial): not nginx's own words.
    c(
        "written_by_request",
        "- (lines a request's URI wrote: a %0A nginx decoded into a path it logged; not nginx's words, not counted as its)",
        O,
    ),
];

/// The class entry named `name`.
pub fn class(name: &str) -> Option<&'static Class> {
    CLASSES.iter().find(|c| c.name == name)
}

/// The classes counted back to the master's start (`collect::error_log_history`): the
/// master's own history, reported in `nginx_errors.history`.
pub const HISTORY_CLASSES: &[&str] = &[
    "worker_spawn_failed",
    "worker_crashed",
    "worker_killed",
    "worker_exited",
    "worker_exited_fatal",
    "process_other",
    "binary_upgrade_failed",
    "rlimit",
    "worker_connections_over_nofile",
    "emfile",
];

/// Error-log lines by class name, then by level index ([`LEVELS`]).
pub type Counts = BTreeMap<&'static str, [u64; 8]>;
