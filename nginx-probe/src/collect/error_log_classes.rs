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
//! Class names are labels in Prometheus and JSON: classes are added, never renamed. The
//! classes themselves (name, directive, group) and nginx's levels are the model's
//! ([`crate::model::error_classes`]): a report is built from them.

pub use crate::model::error_classes::{class, Class, Group, CLASSES, LEVELS};

/// Longest line kept for classification, bytes; the rest of a longer line is skipped.
pub const MAX_LINE: usize = 2048;

/// Level and class of one error-log line (`YYYY/MM/DD HH:MM:SS [level] PID#TID:
/// [*CID ]message...`), or None when it is not such a line (a continuation, garbage).
/// Pure. Only fixed wording is looked at; nothing of the line is returned.
pub fn classify(line: &[u8]) -> Option<(usize, &'static str)> {
    let (level, msg) = level_and_message(line)?;
    Some((level, message_class(msg)))
}

/// The worker pid a `worker process N exited on signal S` line names (the master's
/// words for a child it reaped); None for any other line. Pure.
pub fn exited_worker_pid(line: &[u8]) -> Option<u32> {
    let (_, msg) = level_and_message(line)?;
    let rest = msg.strip_prefix("worker process ")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    rest[..digits].parse().ok()
}

/// The level index and the message (after `PID#TID: ` and `*CID `) of an error-log
/// line; None when it is no such line.
pub(super) fn level_and_message(line: &[u8]) -> Option<(usize, &str)> {
    pid_level_message(line).map(|(_, level, msg)| (level, msg))
}

/// An `[emerg]` line's writer pid (nginx's `PID#TID` field, the pid in nginx's own pid
/// namespace) and message, the message cut at [`MAX_EMERG_MESSAGE`] bytes (on a
/// character boundary); None for any other line. nginx writes why a configuration did
/// not load at this level. Pure.
pub fn emerg_line(line: &[u8]) -> Option<crate::model::nginx_errors::EmergLine> {
    let (pid, level, msg) = pid_level_message(line)?;
    if level != 0 {
        return None;
    }
    let mut end = msg.len().min(MAX_EMERG_MESSAGE);
    while !msg.is_char_boundary(end) {
        end -= 1;
    }
    Some(crate::model::nginx_errors::EmergLine {
        pid,
        message: msg[..end].to_string(),
    })
}

/// Bytes of an `[emerg]` message kept by [`emerg_line`].
pub const MAX_EMERG_MESSAGE: usize = 300;

/// The writer's pid, the level index and the message (after `PID#TID: ` and `*CID `)
/// of an error-log line; None when it is no such line.
fn pid_level_message(line: &[u8]) -> Option<(u32, usize, &str)> {
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
    // 0 when unreadable (never a process's): the line is classified all the same.
    let pid = pidtid
        .split('#')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let mut msg = &rest[colon + 2..];
    if let Some(after) = msg.strip_prefix('*') {
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        msg = after[digits..].trim_start();
    }
    Some((pid, level, msg))
}

/// The longest prefix of `b` that is valid UTF-8 (a line cut at [`MAX_LINE`] may end
/// inside a character).
fn utf8_prefix(b: &[u8]) -> usize {
    match std::str::from_utf8(b) {
        Ok(_) => b.len(),
        Err(e) => e.valid_up_to(),
    }
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

/// One test of a message's wording (see [`message_class`]).
#[derive(Clone, Copy, Debug)]
enum Wording {
    /// The message starts with these words.
    Starts(&'static str),
    /// The head (the message before `, client: `) is these words, whole.
    Is(&'static str),
    /// The head (the message before `, client: `) holds these words.
    Has(&'static str),
    /// The message starts with a number (a count nginx prints) and then these words.
    AfterCount(&'static str),
    /// The message does not start with a digit.
    NoCount,
    /// The head ends like a configuration error: `... in /path/file.conf:12`.
    ConfigFileLine,
    /// The message starts with a failed call: `<call>() failed while spawning "<name>"`.
    SpawnFailed,
    /// The message starts with a C identifier followed by `(` (a call, named nginx's way).
    StartsWithCall,
    /// Every one of the tests passes.
    All(&'static [Wording]),
    /// One of the tests passes.
    Any(&'static [Wording]),
}

use Wording::{
    AfterCount, All, Any, ConfigFileLine, Has, Is, NoCount, SpawnFailed, Starts, StartsWithCall,
};

impl Wording {
    /// Whether `msg` (with its `head`, the part before `, client: `) passes this test.
    fn passes(self, msg: &str, head: &str) -> bool {
        match self {
            Starts(s) => msg.starts_with(s),
            Is(s) => head == s,
            Has(s) => head.contains(s),
            AfterCount(s) => {
                let digits = msg.bytes().take_while(u8::is_ascii_digit).count();
                digits > 0 && msg[digits..].starts_with(s)
            }
            NoCount => !msg.starts_with(|c: char| c.is_ascii_digit()),
            ConfigFileLine => is_config_file_line(head),
            SpawnFailed => spawn_failed(msg),
            StartsWithCall => starts_with_call(msg),
            All(tests) => tests.iter().all(|t| t.passes(msg, head)),
            Any(tests) => tests.iter().any(|t| t.passes(msg, head)),
        }
    }
}

/// The class of a message (the text after `PID#TID: [*CID ]`): the first row of
/// `BEFORE_EXITS`, then the master's exit lines ([`process_exit`]), then the first
/// row of `WORDING` whose test passes; `other` when none does.
///
/// Only nginx's own wording is matched: prefixes, and phrases in the part before
/// `, client: ` (after it come the client address, request line and host, which the
/// client chose and which are never looked at). A path in an `open()` message is
/// derived from the URI; a class matched inside it is counted as the client wished,
/// one line per request of that client's.
pub fn message_class(msg: &str) -> &'static str {
    let head = msg.split(", client: ").next().unwrap_or(msg);
    let first = |rows: &[(Wording, &'static str)]| {
        rows.iter()
            .find(|(test, _)| test.passes(msg, head))
            .map(|(_, class)| *class)
    };
    first(BEFORE_EXITS)
        .or_else(|| process_exit(msg))
        .or_else(|| first(WORDING))
        .unwrap_or("other")
}

/// The rows tried before the master's exit lines, in order: nginx's refusals and its
/// connection counts.
const BEFORE_EXITS: &[(Wording, &str)] = &[
    // "limiting requests%s, excess: %ui.%03ui by zone \"%V\"" (%s = ", dry run")
    (Starts("limiting requests, dry run"), "limit_req_dry_run"),
    (Starts("limiting requests"), "limit_req"),
    // "delaying request, excess: ..." (limit_req with burst, one level below)
    (Starts("delaying request"), "limit_req_delayed"),
    // "limiting connections%s by zone \"%V\""
    (
        Starts("limiting connections, dry run"),
        "limit_conn_dry_run",
    ),
    (Starts("limiting connections"), "limit_conn"),
    // "%ui worker_connections are not enough, reusing connections" (warn,
    // ngx_drain_connections), "%ui worker_connections are not enough" (alert,
    // ngx_get_connection: the connection is closed at once), "... not enough for %ui
    // listening sockets" (emerg, start), "%ui worker_connections exceed open file
    // resource limit: %i" (warn, start).
    (
        AfterCount(" worker_connections are not enough, reusing connections"),
        "worker_connections_reusing",
    ),
    (
        AfterCount(" worker_connections are not enough"),
        "worker_connections",
    ),
    (
        AfterCount(" worker_connections exceed open file resource limit"),
        "worker_connections_over_nofile",
    ),
    // "%ui items still left in open file cache" (exit)
    (AfterCount(" items still left"), "internal_alert"),
];

/// The rows tried after the master's exit lines, in order: the first whose test passes
/// gives the class.
const WORDING: &[(Wording, &str)] = &[
    // The master: "%s %P exited on signal %d%s" (alert; 1.22: without "%s"), "%s %P
    // exited with code %d" (notice), "... exited with fatal code %d and cannot be
    // respawned" (alert) are read by `process_exit` just before these rows;
    // "socketpair() failed while spawning \"%s\"" (and fork(), fcntl(), ioctl()),
    // "could not respawn %s". Before the errno classes: a socketpair() failing with
    // EMFILE is the master's shortfall, not a worker's.
    (SpawnFailed, "worker_spawn_failed"),
    // A configuration error at start or reload ends with the file and line.
    (ConfigFileLine, "config"),
    // A binary upgrade (USR2) that did not take place, worded alike by 1.22.1 and
    // 1.26.3: "execve() failed while executing %s \"%s\"" (alert, ngx_execute_proc;
    // its only caller names the process "new binary process"), "rename() %s to %s
    // failed before executing new binary process \"%s\"", "rename() %s back to %s
    // failed after an attempt to execute new binary process \"%s\"" / "... after the
    // new binary process \"%s\" exited" (alert), "the changing binary signal is
    // ignored: ..." (crit: an upgrade already under way). The new binary's own exit
    // line is read by `process_exit`.
    (
        Any(&[
            Starts("execve() failed while executing "),
            All(&[Starts("rename() "), Has(" new binary process ")]),
            Starts("the changing binary signal is ignored"),
        ]),
        "binary_upgrade_failed",
    ),
    (
        Any(&[
            Starts("could not respawn "),
            Starts("no more than "),
            Starts("kill("),
            Starts("waitpid()"),
        ]),
        "process_other",
    ),
    // "shared memory zone \"%V\" was locked by %P": a worker died holding it (its
    // crash is counted by its own exit line).
    (
        All(&[Starts("shared memory zone "), Has(" was locked by ")]),
        "process_other",
    ),
    // The master's and workers' notice lines (nginx 1.22 and 1.26): start, signals,
    // reloads, log reopens, exits. Whole messages or fixed prefixes only.
    (
        Any(&[
            Is("start worker processes"),
            Starts("start worker process "),
            Starts("start cache manager process "),
            Starts("start cache loader process "),
            Starts("start privileged agent process "),
            All(&[Starts("using the \""), Has("\" event method")]),
            Starts("using inherited sockets from "),
            Starts("nginx/"),
            Starts("built by "),
            Starts("built with "),
            Starts("OS: "),
            Starts("getrlimit(RLIMIT_NOFILE): "),
        ]),
        "master_start",
    ),
    (
        Any(&[
            All(&[Starts("signal "), Has(") received")]),
            Is("signal process started"),
        ]),
        "master_signal",
    ),
    (Is("reconfiguring"), "master_reload"),
    // A binary upgrade (USR2) begun: "changing binary" (the master's notice on the
    // signal), "start new binary process %P" (notice); its outcome is read by
    // `binary_upgrade_failed` above and `process_exit`.
    (
        Any(&[Is("changing binary"), Starts("start new binary process ")]),
        "binary_upgrade",
    ),
    (Is("reopening logs"), "log_reopen"),
    (
        Any(&[Is("exit"), Is("exiting"), Is("gracefully shutting down")]),
        "process_exiting",
    ),
    // "client %V closed keepalive connection" (info; %V the client's address, the
    // errno appended), "kevent() reported that client %V closed keepalive connection".
    (
        All(&[
            Any(&[Starts("client "), Starts("kevent() reported that client ")]),
            Has(" closed keepalive connection"),
        ]),
        "client_closed_keepalive",
    ),
    // Shared-memory zones out of room: "could not allocate node%s" (limit_req,
    // limit_conn), "... new session%s" (ssl_session_cache), "... new entry%s",
    // "ngx_slab_alloc() failed: no memory%s".
    (
        Any(&[
            Starts("could not allocate "),
            Starts("ngx_slab_alloc() failed: no memory"),
        ]),
        "shm_zone_full",
    ),
    // EADDRNOTAVAIL on an upstream connect: the local ports for that destination are
    // used up (TIME-WAIT of connections not kept alive).
    (
        All(&[
            Has("(99: Cannot assign requested address)"),
            Has(" upstream"),
        ]),
        "upstream_addr_unavailable",
    ),
    // Any syscall failing with EMFILE/ENFILE: "accept4() failed (24: Too many open
    // files)", "socket() failed (24: ...) while connecting to upstream", "open() ...".
    (Has("(24: Too many open files)"), "emfile"),
    (Has("(23: Too many open files in system)"), "enfile"),
    // "upstream timed out (110: Connection timed out) while connecting to upstream"
    (
        All(&[
            Starts("upstream timed out"),
            Has("while connecting to upstream"),
        ]),
        "upstream_connect_timeout",
    ),
    (
        All(&[Starts("upstream timed out"), Has("while sending")]),
        "upstream_send_timeout",
    ),
    // The response cut after its header went to the client: "readv() failed (104:
    // Connection reset by peer) while reading upstream", "upstream prematurely closed
    // connection while reading upstream", "upstream timed out (110: ...) while reading
    // upstream" (the body's read; the header's is "while reading response header from
    // upstream"). The client has the status (a 200) and a truncated body, no 5xx
    // (trial 21: 100 such were said "reset fresh connections (502)").
    (
        All(&[
            Has(" while reading upstream"),
            Any(&[
                Has("(104: Connection reset by peer)"),
                Starts("upstream prematurely closed"),
                Starts("upstream timed out"),
            ]),
        ]),
        "upstream_cut_mid_response",
    ),
    (Starts("upstream timed out"), "upstream_read_timeout"),
    (Starts("no live upstreams"), "no_live_upstreams"),
    (
        Starts("upstream server temporarily disabled"),
        "upstream_server_disabled",
    ),
    (
        Starts("upstream prematurely closed"),
        "upstream_prematurely_closed",
    ),
    (
        Starts("upstream sent too big header"),
        "upstream_header_too_big",
    ),
    (Starts("upstream SSL certificate"), "upstream_ssl"),
    // "upstream sent invalid header", "upstream sent duplicate ...", "upstream
    // rejected request with error %ui" (grpc), "upstream violated ... flow control",
    // "FastCGI: ..." record errors, "kevent() reported that upstream closed".
    (
        Any(&[
            Starts("upstream sent "),
            Starts("upstream rejected "),
            Starts("upstream violated "),
            Starts("invalid header after joining FastCGI"),
            Starts("buffered data on next upstream"),
            Starts("kevent() reported that upstream closed"),
        ]),
        "upstream_invalid_response",
    ),
    (Starts("FastCGI sent in stderr"), "upstream_stderr"),
    // "connect() to %V failed (111: ...) while connecting to upstream" (1.22 and 1.26
    // write "connect() to", never "connect() failed", for an upstream).
    (
        All(&[
            Starts("connect() "),
            Has(" failed"),
            Has("while connecting to upstream"),
        ]),
        "upstream_connect_failed",
    ),
    // ECONNRESET from the upstream: "recv() failed (104: Connection reset by peer)
    // while reading response header from upstream", writev(), readv(), send().
    (
        All(&[Has("(104: Connection reset by peer)"), Has(" upstream")]),
        "upstream_reset",
    ),
    // "%V could not be resolved (%i: %s)", "no resolver defined to resolve %V",
    // "send() failed (111: ...) while resolving, resolver: ..." and the DNS response
    // checks of ngx_resolver.c.
    (
        Any(&[
            Has(" could not be resolved"),
            Starts("no resolver defined"),
            Has("while resolving"),
            Has("DNS response"),
            Starts("DNS error"),
            Starts("could not cancel "),
        ]),
        "resolver",
    ),
    // OCSP stapling and ssl_ocsp (before the upstream phrases: the OCSP responder is
    // connected to "while requesting certificate status").
    (
        Any(&[
            Has("OCSP"),
            Has("certificate status"),
            Has("\"ssl_stapling\""),
        ]),
        "ocsp",
    ),
    (
        Any(&[
            Starts("upstream "),
            Has(" to upstream"),
            Has(" from upstream"),
        ]),
        "upstream_other",
    ),
    // "an upstream response is buffered to a temporary file %V" and "a client request
    // body is buffered to a temporary file %V" (warn).
    (
        Starts("an upstream response is buffered"),
        "upstream_response_buffered",
    ),
    (
        Starts("a client request body is buffered"),
        "client_body_buffered",
    ),
    (
        Starts("client intended to send too large"),
        "client_body_too_large",
    ),
    (Starts("client timed out"), "client_timed_out"),
    (
        Any(&[Starts("client prematurely closed"), Starts("client closed")]),
        "client_closed",
    ),
    (
        Any(&[
            Starts("client sent "),
            Starts("header is too large"),
            Starts("unsafe URI"),
        ]),
        "client_invalid_request",
    ),
    (
        Any(&[Has("PROXY protocol"), Starts("broken header: ")]),
        "proxy_protocol",
    ),
    (Has("(2: No such file or directory)"), "file_not_found"),
    (Has("(13: Permission denied)"), "permission_denied"),
    (
        Any(&[Starts("access forbidden by rule"), Has(" is forbidden")]),
        "forbidden",
    ),
    (
        Any(&[Starts("cannot load certificate"), Has("ssl_certificate")]),
        "ssl_certificate",
    ),
    // A client hanging up mid-handshake (trial 9: Go's spare connections) is not a
    // protocol or cipher mismatch: its own class, before `ssl`.
    (
        Starts("peer closed connection in SSL handshake"),
        "ssl_client_closed",
    ),
    (
        Any(&[
            Starts("SSL_"),
            Has(" SSL "),
            Starts("X509_"),
            Starts("PEM_"),
            Starts("EVP_"),
            Starts("BIO_"),
            Starts("HMAC_"),
            Starts("RAND_"),
            Starts("OPENSSL_"),
            Starts("ENGINE_"),
            Starts("EC_KEY_"),
            Starts("OBJ_sn2nid"),
            Starts("d2i_"),
            Starts("i2d_"),
            Starts("ngx_ssl_"),
            Starts("ignoring stale global SSL error"),
            Has("tlsext support"),
            Has("requires SSL support"),
            Starts("password is truncated"),
        ]),
        "ssl",
    ),
    (
        Any(&[
            Has("rewrite or internal redirection cycle"),
            Starts("subrequests cycle"),
            Starts("cycle while evaluating variable"),
            Starts("could not find named location"),
            Starts("empty URI in redirect"),
            Starts("the rewritten URI has a zero length"),
            Starts("zero length URI to proxy"),
            Starts("nested in-memory subrequest"),
            Starts("too big subrequest response"),
            Starts("connection upgrade in subrequest"),
            Starts("\"alias\" cannot be used"),
            Starts("request reference counter overflow"),
        ]),
        "rewrite_cycle",
    ),
    (
        Any(&[
            Starts("thread pool "),
            Starts("task #"),
            Starts("thread operation took too long"),
            Starts("aio operation took too long"),
        ]),
        "thread_pool",
    ),
    (
        Any(&[
            Starts("cache file "),
            Starts("ignore long locked inactive cache entry"),
            Starts("stalled cache updating"),
            All(&[Starts("cache \""), Has(" not found")]),
        ]),
        "cache",
    ),
    (Any(&[Starts("setrlimit("), Starts("getrlimit(")]), "rlimit"),
    (
        Any(&[
            Starts("http2 "),
            Has(" http2 "),
            Starts("no connection data found for keepalive http2"),
            Starts("output on closed stream"),
            Starts("requested control frame is too large"),
        ]),
        "http2",
    ),
    (
        Any(&[
            Starts("quic "),
            Has("QUIC"),
            Starts("ngx_quic_"),
            Has("http3"),
            Starts("failed to send "),
            Starts("failed to create "),
            Starts("failed to load BPF"),
            Starts("unexpected secret len"),
        ]),
        "http3",
    ),
    (
        Any(&[
            Starts("stream pass cycle"),
            Starts("cannot pass connection with preread"),
            Starts("preread buffer full"),
            Starts("the stream output chain is empty"),
            Starts("no port in pass"),
            Starts("no addresses in pass"),
            Has(" in pass \""),
            Starts("port not found for"),
        ]),
        "stream",
    ),
    (Has(" to syslog "), "syslog"),
    // Listening sockets: "bind() to %V failed", "listen() to %V, backlog %d failed",
    // "setsockopt(SO_REUSEPORT) %V failed", the inherited sockets of a binary upgrade.
    (
        Any(&[
            Starts("bind("),
            Starts("listen() to "),
            Starts("still could not bind()"),
            // "try again to bind() after 500ms" (notice, between bind() attempts).
            Starts("try again to bind() after "),
            Has("listening socket"),
            Has("inherited socket"),
            Starts("deleting socket "),
            Starts("invalid socket number"),
            Starts("could not change the accept filter"),
            Starts("could not enable transparent proxying"),
        ]),
        "listen_socket",
    ),
    // Configuration read at start or reload (its file:line, or its directives):
    // "duplicate location \"%V\" in %s:%ui", "could not build %s, you should increase
    // %s_bucket_size: %i", "conflicting server name ... ignored", "unknown \"%V\"
    // variable", "... is not supported on this platform".
    (
        Any(&[
            ConfigFileLine,
            Starts("could not build "),
            Starts("could not build optimal "),
            Starts("conflicting server name"),
            Starts("unknown \""),
            Starts("unknown thread pool"),
            Starts("invalid server name"),
            Starts("invalid URL prefix in \""),
            Starts("invalid local address"),
            Starts("invalid size \""),
            Starts("invalid $limit_rate"),
            Starts("invalid PID number"),
            Has("is not supported on this platform"),
            Has(" not supported"),
            Has("is not available on this platform"),
            Has("\" is incompatible with "),
            All(&[Starts("no \""), Has(" is defined")]),
            Starts("no \"events\" section"),
            Starts("no events module found"),
            Starts("no handler for server"),
            Starts("no servers in upstream"),
            Starts("no port in upstream"),
            Starts("no upstream configuration"),
            Has(" in upstream \""),
            Starts("no ssl_client_certificate"),
            All(&[Starts("no "), Has("_trusted_certificate for ")]),
            Starts("zero size shared memory zone"),
            Starts("shared zone "),
            All(&[
                Starts("cache \""),
                Any(&[Has(" had previously"), Has(" uses the ")]),
            ]),
            All(&[
                Any(&[Starts("limit_req \""), Starts("limit_conn_zone \"")]),
                Has("previously"),
            ]),
            Starts("the default path name"),
            Starts("the path name "),
            Starts("the number of \"worker_processes\""),
            Starts("the \"timer_resolution\" directive"),
            Starts("\"lock_file\" could not be changed"),
            Starts("\"ssl_"),
            Has("_buffer_size %uz is not enough"),
            All(&[
                NoCount,
                Has("_buffer_size "),
                Has(" is not enough for cache key"),
            ]),
            Starts("variables in \""),
            Starts("the value of the \""),
            Starts("the configured event method cannot be used with thread pools"),
            Starts("non-absolute path"),
            Starts("could not create ngx_temp_pool"),
            Starts("pcre_study()"),
            Starts("grpcs protocol requires"),
            Starts("suwsgi protocol requires"),
            Starts("unknown variable index"),
            Starts("no handler found"),
            Starts("invalid OpenSSL QUIC"),
            Starts("too big OpenSSL QUIC"),
        ]),
        "config",
    ),
    // The event method's own checks (epoll, kqueue, select, poll, /dev/poll, eventport,
    // iocp): "epoll_wait() returned no events without timeout", "strange epoll_wait()
    // events fd:%d ev:%04XD", "phantom event %04Xd for closed and removed socket %d".
    (
        Any(&[
            Has("returned no events without timeout"),
            Starts("strange "),
            Starts("phantom event"),
            Starts("unexpected event"),
            Starts("unexpected kevent"),
            Starts("unexpected eventport"),
            Starts("unexpected last event"),
            Starts("invalid descriptor"),
            Starts("invalid select "),
            Starts("select ready != events"),
            Starts("select event fd:"),
            Starts("poll "),
            Starts("poll() error"),
            Has(" close() failed"),
            Starts("iocp "),
            Has("eventfd"),
            Starts("kqueue change list is filled up"),
            Starts("/dev/pool change list is filled up"),
            Starts("previous event on #"),
            Starts("maximum number of descriptors supported by select()"),
            Starts("the maximum number of files supported by select()"),
            Starts("the new socket has number"),
            Has("returned unexpected "),
            All(&[Has(" timed out"), Starts("epoll_wait()")]),
            Starts("GetQueuedCompletionStatus() returned"),
            Starts("kevent() error on"),
            Starts("WSAPoll() returned"),
            Starts("ioctl(DP_"),
            Starts("port_getn() returned"),
        ]),
        "event_method",
    ),
    // nginx's internal consistency checks (a bug in nginx or a module): "zero size buf
    // in output", "http request count is zero", "the http output chain is empty", ...
    (
        Any(&[
            Has("zero size buf in "),
            Has("negative size buf in "),
            Starts("http request count is zero"),
            Starts("http request already closed"),
            Starts("http finalize non-active request"),
            Starts("http postpone filter NULL"),
            Starts("the http output chain is empty"),
            Starts("header already sent"),
            Starts("body already in file"),
            Starts("busy buffers after request body flush"),
            Starts("negative request body rest"),
            Starts("duplicate last buf in save filter"),
            Starts("recycled buffer in pipe out chain"),
            Starts("subrequest: \""),
            Starts("rbtree still is not empty"),
            Starts("connection already closed"),
            Starts("shared connection is busy"),
            Starts("too large header to copy"),
            Starts("too large pipelined header after reading body"),
            Starts("too small buffer for PROXY protocol"),
            Starts("state buffer overflow"),
            Starts("buffer overflow"),
            Starts("receive buffer overrun"),
            Starts("memcpy "),
            Starts("aborting"),
            Starts("built-in log failed"),
            Starts("fastcgi request record is too big"),
            Starts("uwsgi request is too "),
            Starts("too long response "),
            Starts("SSL_sendfile() reported"),
            Starts("the inherited"),
            Has("open socket #"),
            Has(" was incomplete: "),
            Has(" has read only "),
            Has(" has written only "),
            Has("read only "),
            Starts("recvmsg() returned"),
            Starts("recvmsg() truncated"),
        ]),
        "internal_alert",
    ),
    // Any other failed call, named nginx's way: "epoll_ctl(%d, %d) failed", "fork()
    // failed", "sendmsg() failed (9: Bad file descriptor)", "close() channel failed".
    (
        All(&[
            StartsWithCall,
            Any(&[Has(" failed"), Has(") failed"), Has(" incomplete")]),
        ]),
        "syscall_failed",
    ),
];

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
/// <n>[ (core dumped)]` (alert) -> `worker_crashed` when `n` is a crash of the worker
/// itself (SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL), else `worker_killed` (SIGKILL:
/// the OOM killer or an operator; SIGTERM...); `... exited with code 0`
/// (notice) -> `worker_exited_ok`; `... exited with code <n>` -> `worker_exited`;
/// `... exited with fatal code <n> and cannot be respawned` (alert: the worker's
/// init failed, exit(2), and the master will not start it again) ->
/// `worker_exited_fatal`. Only at the message's start (a URI elsewhere in a line
/// cannot fake one).
pub fn process_exit(msg: &str) -> Option<&'static str> {
    let name = PROCESS_NAMES.iter().find(|n| msg.starts_with(*n))?;
    let rest = &msg[name.len()..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let rest = rest[digits..].strip_prefix(" exited ")?;
    if digits == 0 {
        return None;
    }
    if *name == "new binary process " {
        return Some(new_binary_exit(rest));
    }
    if let Some(sig) = rest.strip_prefix("on signal ") {
        let n = sig.bytes().take_while(u8::is_ascii_digit).count();
        let crash = sig[..n]
            .parse::<u8>()
            .is_ok_and(crate::model::worker_lifecycle::is_crash_signal);
        return Some(if crash {
            "worker_crashed"
        } else {
            "worker_killed"
        });
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

/// The class of the old master's line for its new binary's exit (`new binary process
/// <pid> exited ...`, after `exited `): code 0 is the new master quitting cleanly (a
/// rollback's QUIT: `process_other`); any other code or a signal is an upgrade that
/// did not take over (`binary_upgrade_failed`: a failed execve() exits 1), never a
/// worker's exit.
fn new_binary_exit(rest: &str) -> &'static str {
    let code = rest.strip_prefix("with code ").unwrap_or("");
    let n = code.bytes().take_while(u8::is_ascii_digit).count();
    if n > 0 && code[..n].bytes().all(|b| b == b'0') {
        "process_other"
    } else {
        "binary_upgrade_failed"
    }
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
