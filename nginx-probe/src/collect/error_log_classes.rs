//! nginx's words: every message class the error-log reader counts, the directive(s) it
//! points at, and the pure classifier [`message_class`].
//!
//! The wording is nginx's own: every message nginx 1.22.1 and 1.26.3 write at `warn`
//! or above in the core, event, http (upstream, proxy, fastcgi, uwsgi, scgi, grpc,
//! ssl, v2, v3, limit_req, limit_conn), stream and master/worker-cycle code falls into
//! a class other than `other` (`testdata/nginx_error_formats.tsv` holds those formats
//! with the class each must get; a unit test feeds every one through the classifier).
//! `other` is left for wording nginx does not have (a third-party module's, a line
//! another writer put in the file).
//!
//! Class names are labels in Prometheus and JSON: classes are added, never renamed.

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

/// Longest line kept for classification, bytes; the rest of a longer line is skipped.
pub const MAX_LINE: usize = 2048;
/// nginx's log levels, most severe first (`ngx_log_levels`).
pub const LEVELS: [&str; 8] = [
    "emerg", "alert", "crit", "error", "warn", "notice", "info", "debug",
];

/// Level and class of one error-log line (`YYYY/MM/DD HH:MM:SS [level] PID#TID:
/// [*CID ]message...`), or None when it is not such a line (a continuation, garbage).
/// Pure. Only fixed wording is looked at; nothing of the line is returned.
pub fn classify(line: &[u8]) -> Option<(usize, &'static str)> {
    let line = std::str::from_utf8(line)
        .ok()
        .or_else(|| std::str::from_utf8(&line[..utf8_prefix(line)]).ok())?;
    // "2026/11/30 16:52:42 [error] 1234#1234: *5 limiting requests, ..."
    let open = line.get(19..21)?;
    if open != " [" {
        return None;
    }
    let rest = &line[21..];
    let close = rest.find("] ")?;
    let level = LEVELS.iter().position(|l| *l == &rest[..close])?;
    let rest = &rest[close + 2..];
    let colon = rest.find(": ")?;
    let pidtid = &rest[..colon];
    if !pidtid.bytes().all(|b| b.is_ascii_digit() || b == b'#') {
        return None;
    }
    let mut msg = &rest[colon + 2..];
    if let Some(after) = msg.strip_prefix('*') {
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        msg = after[digits..].trim_start();
    }
    Some((level, message_class(msg)))
}

/// The longest prefix of `b` that is valid UTF-8 (a line cut at [`MAX_LINE`] may end
/// inside a character).
fn utf8_prefix(b: &[u8]) -> usize {
    match std::str::from_utf8(b) {
        Ok(_) => b.len(),
        Err(e) => e.valid_up_to(),
    }
}

/// Every class counted, in reporting order; see [`message_class`] for the wording of
/// each.
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
    c("upstream_reset", "upstream server / keepalive_timeout", U),
    // Once per peer marked failed, not per request: not in the upstream group, whose
    // lines are judged as a share of the requests.
    c(
        "upstream_server_disabled",
        "upstream server max_fails/fail_timeout",
        O,
    ),
    c("upstream_invalid_response", "upstream server (its response)", U),
    c(
        "upstream_ssl",
        "proxy_ssl_verify / proxy_ssl_trusted_certificate / proxy_ssl_name",
        U,
    ),
    c("upstream_stderr", "fastcgi_pass (the application's stderr)", O),
    c("upstream_response_buffered", "proxy_buffers / proxy_max_temp_file_size", O),
    c("client_body_buffered", "client_body_buffer_size", O),
    c("client_invalid_request", "large_client_header_buffers / http2", O),
    c("proxy_protocol", "listen ... proxy_protocol", O),
    c("rewrite_cycle", "rewrite / try_files / error_page", O),
    c("permission_denied", "user / file permissions", O),
    c("worker_crashed", "- (a crash: core dump, third-party module)", P),
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
    c("process_other", "- (master: signals, binary upgrade, respawn)", P),
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
    c("config", "nginx.conf (nginx -t)", O),
    c("event_method", "events { use ... } / worker_connections", O),
    c("internal_alert", "- (nginx or a module's bug: report it)", O),
    c("syscall_failed", "- (the errno in the line names it)", O),
];

/// The class entry named `name`.
pub fn class(name: &str) -> Option<&'static Class> {
    CLASSES.iter().find(|c| c.name == name)
}

/// Whether `s` starts with a C identifier followed by `(` (nginx names a failed call
/// `name()` or `name(args)`).
fn starts_with_call(s: &str) -> bool {
    let n = s
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count();
    n > 0 && s.as_bytes().get(n) == Some(&b'(')
}

/// The class of a message (the text after `PID#TID: [*CID ]`).
///
/// Only nginx's own wording is matched: prefixes, and phrases in the part before
/// `, client: ` (after it come the client address, request line and host, which the
/// client chose and which are never looked at). A path in an `open()` message is
/// derived from the URI; a class matched inside it is counted as the client wished,
/// one line per request of that client's.
pub fn message_class(msg: &str) -> &'static str {
    let head = msg.split(", client: ").next().unwrap_or(msg);
    let has = |s: &str| head.contains(s);
    let starts = |s: &str| msg.starts_with(s);
    // "limiting requests%s, excess: %ui.%03ui by zone \"%V\"" (%s = ", dry run")
    if let Some(r) = msg.strip_prefix("limiting requests") {
        return if r.starts_with(", dry run") {
            "limit_req_dry_run"
        } else {
            "limit_req"
        };
    }
    // "delaying request, excess: ..." (limit_req with burst, one level below)
    if starts("delaying request") {
        return "limit_req_delayed";
    }
    // "limiting connections%s by zone \"%V\""
    if let Some(r) = msg.strip_prefix("limiting connections") {
        return if r.starts_with(", dry run") {
            "limit_conn_dry_run"
        } else {
            "limit_conn"
        };
    }
    // "%ui worker_connections are not enough, reusing connections" (warn,
    // ngx_drain_connections), "%ui worker_connections are not enough" (alert,
    // ngx_get_connection: the connection is closed at once), "... not enough for %ui
    // listening sockets" (emerg, start), "%ui worker_connections exceed open file
    // resource limit: %i" (warn, start).
    let digits = msg.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 {
        let r = &msg[digits..];
        if r.starts_with(" worker_connections are not enough, reusing connections") {
            return "worker_connections_reusing";
        }
        if r.starts_with(" worker_connections are not enough") {
            return "worker_connections";
        }
        if r.starts_with(" worker_connections exceed open file resource limit") {
            return "worker_connections_over_nofile";
        }
        // "%ui items still left in open file cache" (exit)
        if r.starts_with(" items still left") {
            return "internal_alert";
        }
    }
    // The master: "%s %P exited on signal %d%s" (alert; 1.22: without "%s"), "%s %P
    // exited with code %d" (notice), "... exited with fatal code %d and cannot be
    // respawned" (alert), "socketpair() failed while spawning \"%s\"" (and fork(),
    // fcntl(), ioctl()), "could not respawn %s". Before the errno classes: a
    // socketpair() failing with EMFILE is the master's shortfall, not a worker's.
    if let Some(r) = process_exit(msg) {
        return r;
    }
    if spawn_failed(msg) {
        return "worker_spawn_failed";
    }
    // A configuration error at start or reload ends with the file and line.
    if is_config_file_line(head) {
        return "config";
    }
    if starts("could not respawn ")
        || starts("no more than ")
        || has("new binary process")
        || starts("execve() failed while executing")
        || starts("the changing binary signal is ignored")
        || starts("kill(")
        || starts("waitpid()")
    {
        return "process_other";
    }
    // "shared memory zone \"%V\" was locked by %P": a worker died holding it (its
    // crash is counted by its own exit line).
    if starts("shared memory zone ") && has(" was locked by ") {
        return "process_other";
    }
    // Shared-memory zones out of room: "could not allocate node%s" (limit_req,
    // limit_conn), "... new session%s" (ssl_session_cache), "... new entry%s",
    // "ngx_slab_alloc() failed: no memory%s".
    if starts("could not allocate ") || starts("ngx_slab_alloc() failed: no memory") {
        return "shm_zone_full";
    }
    // EADDRNOTAVAIL on an upstream connect: the local ports for that destination are
    // used up (TIME-WAIT of connections not kept alive).
    if has("(99: Cannot assign requested address)") && has(" upstream") {
        return "upstream_addr_unavailable";
    }
    // Any syscall failing with EMFILE/ENFILE: "accept4() failed (24: Too many open
    // files)", "socket() failed (24: ...) while connecting to upstream", "open() ...".
    if has("(24: Too many open files)") {
        return "emfile";
    }
    if has("(23: Too many open files in system)") {
        return "enfile";
    }
    // "upstream timed out (110: Connection timed out) while connecting to upstream"
    if starts("upstream timed out") {
        return if has("while connecting to upstream") {
            "upstream_connect_timeout"
        } else if has("while sending") {
            "upstream_send_timeout"
        } else {
            "upstream_read_timeout"
        };
    }
    if starts("no live upstreams") {
        return "no_live_upstreams";
    }
    if starts("upstream server temporarily disabled") {
        return "upstream_server_disabled";
    }
    if starts("upstream prematurely closed") {
        return "upstream_prematurely_closed";
    }
    if starts("upstream sent too big header") {
        return "upstream_header_too_big";
    }
    if starts("upstream SSL certificate") {
        return "upstream_ssl";
    }
    // "upstream sent invalid header", "upstream sent duplicate ...", "upstream
    // rejected request with error %ui" (grpc), "upstream violated ... flow control",
    // "FastCGI: ..." record errors, "kevent() reported that upstream closed".
    if starts("upstream sent ")
        || starts("upstream rejected ")
        || starts("upstream violated ")
        || starts("invalid header after joining FastCGI")
        || starts("buffered data on next upstream")
        || starts("kevent() reported that upstream closed")
    {
        return "upstream_invalid_response";
    }
    if starts("FastCGI sent in stderr") {
        return "upstream_stderr";
    }
    // "connect() to %V failed (111: ...) while connecting to upstream" (1.22 and 1.26
    // write "connect() to", never "connect() failed", for an upstream).
    if starts("connect() ") && has(" failed") && has("while connecting to upstream") {
        return "upstream_connect_failed";
    }
    // ECONNRESET from the upstream: "recv() failed (104: Connection reset by peer)
    // while reading response header from upstream", writev(), readv(), send().
    if has("(104: Connection reset by peer)") && has(" upstream") {
        return "upstream_reset";
    }
    // "%V could not be resolved (%i: %s)", "no resolver defined to resolve %V",
    // "send() failed (111: ...) while resolving, resolver: ..." and the DNS response
    // checks of ngx_resolver.c.
    if has(" could not be resolved")
        || starts("no resolver defined")
        || has("while resolving")
        || has("DNS response")
        || starts("DNS error")
        || starts("could not cancel ")
    {
        return "resolver";
    }
    // OCSP stapling and ssl_ocsp (before the upstream phrases: the OCSP responder is
    // connected to "while requesting certificate status").
    if has("OCSP") || has("certificate status") || has("\"ssl_stapling\"") {
        return "ocsp";
    }
    if starts("upstream ") || has(" to upstream") || has(" from upstream") {
        return "upstream_other";
    }
    // "an upstream response is buffered to a temporary file %V" and "a client request
    // body is buffered to a temporary file %V" (warn).
    if starts("an upstream response is buffered") {
        return "upstream_response_buffered";
    }
    if starts("a client request body is buffered") {
        return "client_body_buffered";
    }
    if starts("client intended to send too large") {
        return "client_body_too_large";
    }
    if starts("client timed out") {
        return "client_timed_out";
    }
    if starts("client prematurely closed") || starts("client closed") {
        return "client_closed";
    }
    if starts("client sent ") || starts("header is too large") || starts("unsafe URI") {
        return "client_invalid_request";
    }
    if has("PROXY protocol") || starts("broken header: ") {
        return "proxy_protocol";
    }
    if has("(2: No such file or directory)") {
        return "file_not_found";
    }
    if has("(13: Permission denied)") {
        return "permission_denied";
    }
    if starts("access forbidden by rule") || has(" is forbidden") {
        return "forbidden";
    }
    if starts("cannot load certificate") || has("ssl_certificate") {
        return "ssl_certificate";
    }
    if starts("SSL_")
        || has(" SSL ")
        || starts("X509_")
        || starts("PEM_")
        || starts("EVP_")
        || starts("BIO_")
        || starts("HMAC_")
        || starts("RAND_")
        || starts("OPENSSL_")
        || starts("ENGINE_")
        || starts("EC_KEY_")
        || starts("OBJ_sn2nid")
        || starts("d2i_")
        || starts("i2d_")
        || starts("ngx_ssl_")
        || starts("ignoring stale global SSL error")
        || has("tlsext support")
        || has("requires SSL support")
        || starts("password is truncated")
    {
        return "ssl";
    }
    if has("rewrite or internal redirection cycle")
        || starts("subrequests cycle")
        || starts("cycle while evaluating variable")
        || starts("could not find named location")
        || starts("empty URI in redirect")
        || starts("the rewritten URI has a zero length")
        || starts("zero length URI to proxy")
        || starts("nested in-memory subrequest")
        || starts("too big subrequest response")
        || starts("connection upgrade in subrequest")
        || starts("\"alias\" cannot be used")
        || starts("request reference counter overflow")
    {
        return "rewrite_cycle";
    }
    if starts("thread pool ")
        || starts("task #")
        || starts("thread operation took too long")
        || starts("aio operation took too long")
    {
        return "thread_pool";
    }
    if starts("cache file ")
        || starts("ignore long locked inactive cache entry")
        || starts("stalled cache updating")
        || (starts("cache \"") && has(" not found"))
    {
        return "cache";
    }
    if starts("setrlimit(") || starts("getrlimit(") {
        return "rlimit";
    }
    if starts("http2 ")
        || has(" http2 ")
        || starts("no connection data found for keepalive http2")
        || starts("output on closed stream")
        || starts("requested control frame is too large")
    {
        return "http2";
    }
    if starts("quic ")
        || has("QUIC")
        || starts("ngx_quic_")
        || has("http3")
        || starts("failed to send ")
        || starts("failed to create ")
        || starts("failed to load BPF")
        || starts("unexpected secret len")
    {
        return "http3";
    }
    if starts("stream pass cycle")
        || starts("cannot pass connection with preread")
        || starts("preread buffer full")
        || starts("the stream output chain is empty")
        || starts("no port in pass")
        || starts("no addresses in pass")
        || has(" in pass \"")
        || starts("port not found for")
    {
        return "stream";
    }
    if has(" to syslog ") {
        return "syslog";
    }
    // Listening sockets: "bind() to %V failed", "listen() to %V, backlog %d failed",
    // "setsockopt(SO_REUSEPORT) %V failed", the inherited sockets of a binary upgrade.
    if starts("bind(")
        || starts("listen() to ")
        || starts("still could not bind()")
        || has("listening socket")
        || has("inherited socket")
        || starts("deleting socket ")
        || starts("invalid socket number")
        || starts("could not change the accept filter")
        || starts("could not enable transparent proxying")
    {
        return "listen_socket";
    }
    // Configuration read at start or reload (its file:line, or its directives):
    // "duplicate location \"%V\" in %s:%ui", "could not build %s, you should increase
    // %s_bucket_size: %i", "conflicting server name ... ignored", "unknown \"%V\"
    // variable", "... is not supported on this platform".
    if is_config_file_line(head)
        || starts("could not build ")
        || starts("could not build optimal ")
        || starts("conflicting server name")
        || starts("unknown \"")
        || starts("unknown thread pool")
        || starts("invalid server name")
        || starts("invalid URL prefix in \"")
        || starts("invalid local address")
        || starts("invalid size \"")
        || starts("invalid $limit_rate")
        || starts("invalid PID number")
        || has("is not supported on this platform")
        || has(" not supported")
        || has("is not available on this platform")
        || has("\" is incompatible with ")
        || (starts("no \"") && has(" is defined"))
        || starts("no \"events\" section")
        || starts("no events module found")
        || starts("no handler for server")
        || starts("no servers in upstream")
        || starts("no port in upstream")
        || starts("no upstream configuration")
        || has(" in upstream \"")
        || starts("no ssl_client_certificate")
        || (starts("no ") && has("_trusted_certificate for "))
        || starts("zero size shared memory zone")
        || starts("shared zone ")
        || (starts("cache \"") && (has(" had previously") || has(" uses the ")))
        || (starts("limit_req \"") || starts("limit_conn_zone \"")) && has("previously")
        || starts("the default path name")
        || starts("the path name ")
        || starts("the number of \"worker_processes\"")
        || starts("the \"timer_resolution\" directive")
        || starts("\"lock_file\" could not be changed")
        || starts("\"ssl_")
        || has("_buffer_size %uz is not enough")
        || (digits == 0 && has("_buffer_size ") && has(" is not enough for cache key"))
        || starts("variables in \"")
        || starts("the value of the \"")
        || starts("the configured event method cannot be used with thread pools")
        || starts("non-absolute path")
        || starts("could not create ngx_temp_pool")
        || starts("pcre_study()")
        || starts("grpcs protocol requires")
        || starts("suwsgi protocol requires")
        || starts("unknown variable index")
        || starts("no handler found")
        || starts("invalid OpenSSL QUIC")
        || starts("too big OpenSSL QUIC")
    {
        return "config";
    }
    // The event method's own checks (epoll, kqueue, select, poll, /dev/poll, eventport,
    // iocp): "epoll_wait() returned no events without timeout", "strange epoll_wait()
    // events fd:%d ev:%04XD", "phantom event %04Xd for closed and removed socket %d".
    if has("returned no events without timeout")
        || starts("strange ")
        || starts("phantom event")
        || starts("unexpected event")
        || starts("unexpected kevent")
        || starts("unexpected eventport")
        || starts("unexpected last event")
        || starts("invalid descriptor")
        || starts("invalid select ")
        || starts("select ready != events")
        || starts("select event fd:")
        || starts("poll ")
        || starts("poll() error")
        || has(" close() failed")
        || starts("iocp ")
        || has("eventfd")
        || starts("kqueue change list is filled up")
        || starts("/dev/pool change list is filled up")
        || starts("previous event on #")
        || starts("maximum number of descriptors supported by select()")
        || starts("the maximum number of files supported by select()")
        || starts("the new socket has number")
        || has("returned unexpected ")
        || has(" timed out") && starts("epoll_wait()")
        || starts("GetQueuedCompletionStatus() returned")
        || starts("kevent() error on")
        || starts("WSAPoll() returned")
        || starts("ioctl(DP_")
        || starts("port_getn() returned")
    {
        return "event_method";
    }
    // nginx's internal consistency checks (a bug in nginx or a module): "zero size buf
    // in output", "http request count is zero", "the http output chain is empty", ...
    if has("zero size buf in ")
        || has("negative size buf in ")
        || starts("http request count is zero")
        || starts("http request already closed")
        || starts("http finalize non-active request")
        || starts("http postpone filter NULL")
        || starts("the http output chain is empty")
        || starts("header already sent")
        || starts("body already in file")
        || starts("busy buffers after request body flush")
        || starts("negative request body rest")
        || starts("duplicate last buf in save filter")
        || starts("recycled buffer in pipe out chain")
        || starts("subrequest: \"")
        || starts("rbtree still is not empty")
        || starts("connection already closed")
        || starts("shared connection is busy")
        || starts("too large header to copy")
        || starts("too large pipelined header after reading body")
        || starts("too small buffer for PROXY protocol")
        || starts("state buffer overflow")
        || starts("buffer overflow")
        || starts("receive buffer overrun")
        || starts("memcpy ")
        || starts("aborting")
        || starts("built-in log failed")
        || starts("fastcgi request record is too big")
        || starts("uwsgi request is too ")
        || starts("too long response ")
        || starts("SSL_sendfile() reported")
        || starts("the inherited")
        || has("open socket #")
        || has(" was incomplete: ")
        || has(" has read only ")
        || has(" has written only ")
        || has("read only ")
        || starts("recvmsg() returned")
        || starts("recvmsg() truncated")
    {
        return "internal_alert";
    }
    // Any other failed call, named nginx's way: "epoll_ctl(%d, %d) failed", "fork()
    // failed", "sendmsg() failed (9: Bad file descriptor)", "close() channel failed".
    if starts_with_call(msg) && (has(" failed") || has(") failed") || has(" incomplete")) {
        return "syscall_failed";
    }
    "other"
}

/// The names nginx gives its processes in exit lines (`ngx_processes[].name`, and
/// "unknown process" for a pid it did not spawn).
const PROCESS_NAMES: [&str; 5] = [
    "worker process ",
    "cache manager process ",
    "cache loader process ",
    "new binary process ",
    "unknown process ",
];

/// The class of the master's exit line for a child: `<name> <pid> exited on signal
/// <n>[ (core dumped)]` (alert) -> `worker_crashed`; `... exited with code 0`
/// (notice) -> `worker_exited_ok`; `... exited with code <n>` -> `worker_exited`;
/// `... exited with fatal code <n> and cannot be respawned` (alert: the worker's
/// init failed, exit(2), and the master will not start it again) ->
/// `worker_exited_fatal`. Only at the message's start (a URI elsewhere in a line
/// cannot fake one).
pub fn process_exit(msg: &str) -> Option<&'static str> {
    let rest = PROCESS_NAMES.iter().find_map(|n| msg.strip_prefix(n))?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let rest = rest[digits..].strip_prefix(" exited ")?;
    if digits == 0 {
        return None;
    }
    if rest.starts_with("on signal ") {
        return Some("worker_crashed");
    }
    if let Some(code) = rest.strip_prefix("with code ") {
        let n = code.bytes().take_while(u8::is_ascii_digit).count();
        return Some(if n > 0 && code[..n].bytes().all(|b| b == b'0') {
            "worker_exited_ok"
        } else {
            "worker_exited"
        });
    }
    rest.starts_with("with fatal code ")
        .then_some("worker_exited_fatal")
}

/// Whether `msg` is the master's `<call>() failed while spawning "<name>"` (alert,
/// `ngx_spawn_process`: socketpair, ioctl, fcntl, fork), the errno appended after it.
/// Only at the message's start.
pub fn spawn_failed(msg: &str) -> bool {
    if !starts_with_call(msg) {
        return false;
    }
    let Some(close) = msg.find(") ") else {
        return false;
    };
    msg[close + 2..].starts_with("failed while spawning \"") && !msg[..close].contains('"')
}

/// Whether `head` ends like nginx's configuration errors: `... in /path/file.conf:12`
/// (ngx_conf_log_error and the config checks at start and reload).
fn is_config_file_line(head: &str) -> bool {
    let Some(i) = head.rfind(" in ") else {
        return false;
    };
    let tail = &head[i + 4..];
    let Some((file, line)) = tail.rsplit_once(':') else {
        return false;
    };
    !file.is_empty()
        && !file.contains(' ')
        && !line.is_empty()
        && line.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
#[path = "error_log_classes_tests.rs"]
mod tests;
