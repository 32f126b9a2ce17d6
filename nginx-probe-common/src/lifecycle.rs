//! Client connection lifecycle, counted in the kernel per nginx listening port (the
//! continuous layer: TCP state changes and resets, never per request).
//!
//! Sources: `sock:inet_sock_set_state` (who closed first, listeners closed),
//! `tcp:tcp_send_reset` / `tcp:tcp_receive_reset` (resets on nginx's sockets, with the
//! kernel's `sk_rst_reason` for sent ones), `tcp:tcp_destroy_sock` (end of a listener's
//! close). A socket is nginx's client connection when it is TCP and its local port is
//! one of nginx's listening ports (`LC_PORTS`, filled by user space from sock_diag):
//! attribution is by the socket, not the task, because most of these fire in softirq.
//! By default the programs are raw tracepoints on these events (their arguments, the
//! socket read with the BTF offsets of [`RAW_OFF_PATHS`]); perf-event tracepoint
//! programs reading the records are the fallback. One set is attached, never both.
//!
//! Layout of the per-CPU `LC_STATS` array: `port_index * LC_PER_PORT + counter`, all
//! `u64`, cumulative since attach (user space sums CPUs and differences snapshots),
//! except [`IDLE_MAX_MS`] and [`IDLE_INV_MIN_MS`] (maximum / bitwise-inverted minimum
//! since attach, combined over CPUs by max).

/// nginx listening ports counted (index 0..LC_MAX_PORTS in `LC_PORTS`); further ports
/// are not counted and user space says so.
pub const LC_MAX_PORTS: u32 = 16;

/// Entries of `LC_PORTS`: one per TCP port number.
pub const LC_PORT_SPACE: u32 = 65536;

/// Number of `sk_rst_reason` values kept apart (`NOT_SPECIFIED` = 0 ... `ERROR` = 24 on
/// 6.18); a larger value is counted in the last one.
pub const LC_REASONS: usize = 25;

/// Log2 buckets of the idle-before-close histogram, ms: bucket `i` holds
/// `2^i <= ms < 2^(i+1)` (bucket 0 also holds 0 ms; the last one everything longer).
pub const LC_IDLE_BUCKETS: usize = 32;

/// Connections established on the port (`SYN_RECV -> ESTABLISHED`).
pub const ESTABLISHED: usize = 0;
/// nginx closed first: `ESTABLISHED -> FIN_WAIT1` (its `close()`/`shutdown()`).
pub const CLOSED_BY_NGINX: usize = 1;
/// The client closed first: `ESTABLISHED -> CLOSE_WAIT` (its FIN arrived).
pub const CLOSED_BY_CLIENT: usize = 2;
/// Ended by a reset while established: `ESTABLISHED -> CLOSE` (sent or received).
pub const CLOSED_BY_RESET: usize = 3;
/// Resets received on the port's sockets (`tcp:tcp_receive_reset`).
pub const RST_RECEIVED: usize = 4;
/// Resets sent from the port (`tcp:tcp_send_reset`, local port), any socket or none.
pub const RST_SENT: usize = 5;
/// Listening sockets of the port closed (`LISTEN -> CLOSE`).
pub const LISTENERS_CLOSED: usize = 6;
/// Resets sent by the task closing a listener, for connections of that listener
/// (its accept queue), between `LISTEN -> CLOSE` and the listener's destruction.
pub const RST_CLOSED_LISTENER: usize = 7;
/// nginx closes whose idle time was measured (`CLOSED_BY_NGINX` with BTF offsets).
pub const IDLE_COUNT: usize = 8;
/// Sum of measured idle times, ms.
pub const IDLE_SUM_MS: usize = 9;
/// Longest idle time since attach, ms (per CPU; combined by max).
pub const IDLE_MAX_MS: usize = 10;
/// `!min` of idle times since attach, ms (per CPU; combined by max; 0 = none).
pub const IDLE_INV_MIN_MS: usize = 11;
/// Resets sent by reason: `RST_BY_REASON + reason`.
pub const RST_BY_REASON: usize = 12;
/// Idle-before-close histogram: `IDLE_HIST + bucket`.
pub const IDLE_HIST: usize = RST_BY_REASON + LC_REASONS;
/// Closed first on nginx's side by the kernel as a worker exited
/// (`ESTABLISHED -> FIN_WAIT1` in a task with `PF_EXITING`: a killed or crashed worker's
/// sockets; or `ESTABLISHED -> CLOSE` there, a reset for a socket with the client's
/// data unread, a request in flight), not counted in [`CLOSED_BY_NGINX`] nor
/// [`CLOSED_BY_RESET`].
pub const CLOSED_BY_WORKER_EXIT: usize = IDLE_HIST + LC_IDLE_BUCKETS;
/// Of [`IDLE_COUNT`], closes nginx sent data at most one jiffy before (a TLS
/// close_notify, an HTTP/2 GOAWAY, or a response closed at once): their idle time is
/// the time since the client's last data.
pub const IDLE_AFTER_NGINX_WROTE: usize = CLOSED_BY_WORKER_EXIT + 1;
/// Of [`CLOSED_BY_NGINX`], closes by a draining worker (one that has entered
/// `ngx_close_idle_connections`: a reload, a binary upgrade's WINCH, a graceful
/// QUIT). Not in the idle histogram, which stays the serving workers' (their
/// keepalive_timeout). Needs the `ngx_close_idle_connections` uprobe and uretprobe.
/// Split three ways: [`CLOSED_WHILE_DRAINING_IDLE`], [`CLOSED_WHILE_DRAINING_AFTER_DATA`]
/// and [`CLOSED_WHILE_DRAINING_SILENT`].
pub const CLOSED_WHILE_DRAINING: usize = IDLE_AFTER_NGINX_WROTE + 1;
/// Of [`CLOSED_WHILE_DRAINING`], closes made inside the worker's call of
/// `ngx_close_idle_connections` (between its uprobe and uretprobe): nginx's own sweep
/// of the connections it marks idle (`c->idle`: kept-alive, waiting for a next
/// request), closed under their clients, whatever nginx wrote as it closed (a TLS
/// close_notify, an HTTP/2 GOAWAY).
pub const CLOSED_WHILE_DRAINING_IDLE: usize = CLOSED_WHILE_DRAINING + 1;
/// First counter after the idle sweep's.
const LC_PER_PORT_BASE: usize = CLOSED_WHILE_DRAINING_IDLE + 1;
/// Of [`CLOSED_WHILE_DRAINING`], closes after the sweep, nginx having sent data at
/// most one jiffy before (`tcp_sock.lsndtime`): a response then the close (a draining
/// worker keeps no connection alive), or a TLS close_notify / HTTP/2 GOAWAY: not told
/// apart.
pub const CLOSED_WHILE_DRAINING_AFTER_DATA: usize = LC_PER_PORT_BASE;
/// Of [`CLOSED_WHILE_DRAINING`], closes after the sweep with nothing sent by nginx in
/// the close's last jiffy: a request whose response had not begun (cut at
/// `worker_shutdown_timeout`, say), a connection still waiting for its first request,
/// or a response that ended earlier; the time since the worker began draining is kept
/// in [`DRAIN_SILENT_MAX_MS`] / [`DRAIN_SILENT_INV_MIN_MS`].
pub const CLOSED_WHILE_DRAINING_SILENT: usize = LC_PER_PORT_BASE + 1;
/// Longest time from the worker's drain start to a [`CLOSED_WHILE_DRAINING_SILENT`]
/// close, ms (since attach; combined by max).
pub const DRAIN_SILENT_MAX_MS: usize = LC_PER_PORT_BASE + 2;
/// `!min` of those times, ms (since attach; combined by max; 0 = none).
pub const DRAIN_SILENT_INV_MIN_MS: usize = LC_PER_PORT_BASE + 3;
/// Longest time from the worker's drain start to a
/// [`CLOSED_WHILE_DRAINING_AFTER_DATA`] close, ms (since attach; combined by max): a
/// response still being sent when `worker_shutdown_timeout` cut it closes then.
pub const DRAIN_AFTER_DATA_MAX_MS: usize = LC_PER_PORT_BASE + 4;
/// `!min` of those times, ms (since attach; combined by max; 0 = none).
pub const DRAIN_AFTER_DATA_INV_MIN_MS: usize = LC_PER_PORT_BASE + 5;
/// The per-port counters combined over CPUs by max (extremes), not summed.
pub const COMBINED_BY_MAX: [usize; 12] = [
    IDLE_MAX_MS,
    IDLE_INV_MIN_MS,
    DRAIN_SILENT_MAX_MS,
    DRAIN_SILENT_INV_MIN_MS,
    DRAIN_AFTER_DATA_MAX_MS,
    DRAIN_AFTER_DATA_INV_MIN_MS,
    LIFETIME_MAX_MS,
    LIFETIME_INV_MIN_MS,
    CLIENT_CLOSE_IDLE_MAX_MS,
    CLIENT_CLOSE_IDLE_INV_MIN_MS,
    RESET_IDLE_MAX_MS,
    RESET_IDLE_INV_MIN_MS,
];
/// Of [`CLOSED_WHILE_DRAINING_SILENT`], closes with nginx's last data sent a jiffy or
/// more after the client's last data (`tcp_sock.lsndtime` newer than
/// `icsk_ack.lrcvtime`): a response under way, a stream or a download cut between two
/// of its writes; the others had the client's data last (a request waiting for its
/// response, or a connection without a whole request).
pub const CLOSED_WHILE_DRAINING_MID_RESPONSE: usize = LC_PER_PORT_BASE + 6;
/// Of [`CLOSED_BY_RESET`], nginx's own: `ESTABLISHED -> CLOSE` in a worker's
/// `close()` with no received reset being processed for the socket: a close with the
/// client's data unread (the kernel's `TCP_ABORT_ON_CLOSE`: a request that arrived as
/// nginx closed), or `SO_LINGER` 0 (`reset_timedout_connection on`, `lingering_close
/// off` with data pending).
pub const CLOSED_BY_NGINX_RESET: usize = LC_PER_PORT_BASE + 7;
/// Of [`CLOSED_BY_NGINX_RESET`], by draining workers (in their sweep of idle
/// connections or after it): connections a reload or QUIT cut with a reset.
pub const CLOSED_WHILE_DRAINING_RESET: usize = LC_PER_PORT_BASE + 8;
/// Of [`CLOSED_BY_NGINX`], TLS closes nginx began (its `ngx_ssl_shutdown` with the
/// client's EOF unread and the socket `ESTABLISHED`: a keepalive or idle timeout, a
/// response with `Connection: close`, a draining worker's sweep) whose client's FIN
/// arrived before nginx's own `close()`: the client answered nginx's close_notify in
/// the window between nginx's write of it and its `close()` (`ESTABLISHED ->
/// CLOSE_WAIT` on a socket the uprobe marked), or whose client answered with a reset
/// (it closed with the close_notify unread: `ESTABLISHED -> CLOSE` while the received
/// reset is processed). Counted as nginx's, with the idle time
/// and worker read at the uprobe; never in [`CLOSED_BY_CLIENT`]. Needs the
/// `ngx_ssl_shutdown` uprobe ([`TLS_SHUTDOWN_SYMBOL`]).
pub const CLOSED_BY_NGINX_CLIENT_FIN_FIRST: usize = LC_PER_PORT_BASE + 9;
/// TLS closes nginx began on a read timeout (`c->read->timedout`: an HTTP/2 idle
/// timeout, say) or in a draining worker's sweep, nginx's data (an HTTP/2 GOAWAY)
/// sent in the jiffy before, whose client's FIN arrived before nginx reached
/// `ngx_ssl_shutdown`: the state change counted them in [`CLOSED_BY_CLIENT`], the
/// uprobe in [`CLOSED_BY_NGINX`] (with [`CLOSED_BY_NGINX_CLIENT_FIN_FIRST`]); user
/// space takes them out of [`CLOSED_BY_CLIENT`].
pub const CLOSED_BY_CLIENT_ANSWERING_NGINX: usize = LC_PER_PORT_BASE + 10;
/// Of [`CLOSED_BY_NGINX`], closes nginx decided on its own whose client's FIN came
/// first: at the worker's `close()` (`CLOSE_WAIT -> LAST_ACK`, not an exiting task)
/// the client's FIN is unread (`tcp_sock.copied_seq` behind `rcv_nxt`: nginx never
/// read the client's EOF) and nginx sent data in the close's last jiffy (its
/// response, then the close: `Connection: close` on keepalive_requests reached,
/// keepalive_timeout 0, HTTP/1.0), a client that closes on reading the response
/// having got its FIN in while nginx wrote its access log. The state change counted
/// them in [`CLOSED_BY_CLIENT`]; user space takes them out. Counted only where the
/// `LC_FIN_RULE` flag is set (on TLS nginx's reading of the client's close_notify
/// leaves its FIN unread too: there only with the `ngx_ssl_shutdown` uprobe, which
/// marks those as the client's).
pub const CLOSED_BY_NGINX_CLIENT_FIN_UNREAD: usize = LC_PER_PORT_BASE + 11;
/// Of [`CLOSED_BY_NGINX`] (`ESTABLISHED -> FIN_WAIT1` in a task not exiting), the
/// connections that had received not one byte from the client
/// (`tcp_sock.bytes_received` 0): a connection opened and never used (a client's or a
/// browser's spare connection, a health check that only connects), closed at
/// `client_header_timeout`, by a draining worker, or by a worker at
/// `worker_connections` freeing connections it has not read from (nginx's
/// `ngx_drain_connections`, or its close of a new connection it has no room for).
/// Counted besides the closer's own
/// counter, not instead of it.
pub const CLOSED_WITHOUT_DATA_BY_NGINX: usize = LC_PER_PORT_BASE + 12;
/// The same closed first by the client (`ESTABLISHED -> CLOSE_WAIT` with
/// `tcp_sock.bytes_received` at most 1: the kernel counts the FIN's sequence number in
/// it): a connection opened and closed without a request.
pub const CLOSED_WITHOUT_DATA_BY_CLIENT: usize = LC_PER_PORT_BASE + 13;
/// The same ended by a reset (`ESTABLISHED -> CLOSE`, `tcp_sock.bytes_received` 0).
pub const CLOSED_WITHOUT_DATA_BY_RESET: usize = LC_PER_PORT_BASE + 14;
/// Of [`CLOSED_BY_NGINX_CLIENT_FIN_FIRST`], those whose client answered with a reset
/// (`ESTABLISHED -> CLOSE` while the received reset is processed), not a FIN.
pub const CLOSED_BY_NGINX_CLIENT_RST_FIRST: usize = LC_PER_PORT_BASE + 15;
/// Connections whose lifetime was measured at their first close (`ESTABLISHED ->`
/// anything, by whoever closed): those established since attach and still noted in
/// `LC_BORN` (an LRU of [`LC_MAX_BORN`]: the oldest are let go beyond it).
pub const LIFETIME_COUNT: usize = LC_PER_PORT_BASE + 16;
/// Sum of their lifetimes (`SYN_RECV -> ESTABLISHED` to the first close,
/// `bpf_ktime_get_ns()`), ms.
pub const LIFETIME_SUM_MS: usize = LC_PER_PORT_BASE + 17;
/// Longest lifetime since attach, ms (combined by max).
pub const LIFETIME_MAX_MS: usize = LC_PER_PORT_BASE + 18;
/// Shortest lifetime since attach, bitwise inverted (ms; combined by max; 0 = none).
pub const LIFETIME_INV_MIN_MS: usize = LC_PER_PORT_BASE + 19;
/// Lifetime log2 histogram, ms: `LIFETIME_HIST + `[`idle_bucket`]`(ms)`.
pub const LIFETIME_HIST: usize = LC_PER_PORT_BASE + 20;
/// The client's closes ([`CLOSED_BY_CLIENT`], its FIN first, not an answer to nginx's
/// close_notify) whose idle time was measured: at `ESTABLISHED -> CLOSE_WAIT`, the
/// time since the client's last data (`icsk_ack.lrcvtime`), or since nginx's
/// (`tcp_sock.lsndtime`) when the client sent data in the close's last jiffy or nginx
/// sent last (a response, then the client's close): how long the connection sat
/// idle before the client let it go.
pub const CLIENT_CLOSE_IDLE_COUNT: usize = LIFETIME_HIST + LC_IDLE_BUCKETS;
/// Sum of those idle times, ms.
pub const CLIENT_CLOSE_IDLE_SUM_MS: usize = CLIENT_CLOSE_IDLE_COUNT + 1;
/// Longest since attach, ms (combined by max).
pub const CLIENT_CLOSE_IDLE_MAX_MS: usize = CLIENT_CLOSE_IDLE_COUNT + 2;
/// Shortest since attach, bitwise inverted (ms; combined by max; 0 = none).
pub const CLIENT_CLOSE_IDLE_INV_MIN_MS: usize = CLIENT_CLOSE_IDLE_COUNT + 3;
/// Their log2 histogram, ms: `CLIENT_CLOSE_IDLE_HIST + `[`idle_bucket`]`(ms)`.
pub const CLIENT_CLOSE_IDLE_HIST: usize = CLIENT_CLOSE_IDLE_COUNT + 4;
/// Established connections ended by a reset received (`ESTABLISHED -> CLOSE` while
/// the received reset is processed, not one answering nginx's close_notify) whose idle
/// time was measured, as [`CLIENT_CLOSE_IDLE_COUNT`]: near 0 a reset mid-exchange (a
/// client aborting a response), long ones an idle connection dropped by its client or
/// a middlebox between.
pub const RESET_IDLE_COUNT: usize = CLIENT_CLOSE_IDLE_HIST + LC_IDLE_BUCKETS;
/// Sum of those idle times, ms.
pub const RESET_IDLE_SUM_MS: usize = RESET_IDLE_COUNT + 1;
/// Longest since attach, ms (combined by max).
pub const RESET_IDLE_MAX_MS: usize = RESET_IDLE_COUNT + 2;
/// Shortest since attach, bitwise inverted (ms; combined by max; 0 = none).
pub const RESET_IDLE_INV_MIN_MS: usize = RESET_IDLE_COUNT + 3;
/// Their log2 histogram, ms: `RESET_IDLE_HIST + `[`idle_bucket`]`(ms)`.
pub const RESET_IDLE_HIST: usize = RESET_IDLE_COUNT + 4;
/// Of the resets sent for a client's data after nginx closed (reasons
/// `TCP_ABORT_ON_DATA`, `TCP_TIMEWAIT_SOCKET`), those answering a segment of 1 to
/// [`ALERT_SIZED_MAX`] bytes of payload (`sk_buff.len` less the TCP header's
/// `doff`): the size of one TLS alert record, a client's close_notify answering
/// nginx's (24 bytes in TLS 1.3, 23 to 31 in TLS 1.2's AEAD suites), too short for a
/// request on a TLS port. Not counted when the offsets are unknown.
pub const RST_AFTER_CLOSE_ALERT_SIZED: usize = RESET_IDLE_HIST + LC_IDLE_BUCKETS;
/// Of nginx's closes ([`CLOSED_BY_NGINX`]), TLS closes nginx began (its
/// `ngx_ssl_shutdown` with the socket `ESTABLISHED`, the client's EOF unread) whose
/// `close()` found the client's data unread, so the kernel ended them with a reset
/// (`ESTABLISHED -> CLOSE`, `TCP_ABORT_ON_CLOSE`): the client's close_notify
/// answering nginx's, most often. Not in [`CLOSED_BY_RESET`].
pub const CLOSED_BY_NGINX_DATA_UNREAD: usize = RST_AFTER_CLOSE_ALERT_SIZED + 1;
/// Of nginx's closes (by its FIN, [`CLOSED_BY_NGINX`], or by its own reset,
/// [`CLOSED_BY_NGINX_RESET`], or [`CLOSED_BY_NGINX_DATA_UNREAD`]), those made inside
/// the worker's call of `ngx_get_connection` (the uprobe noted the call's stack slot
/// and return address, and the slot still held that address at the close): nginx at
/// `worker_connections`, with 1/16 or fewer of its connections free, closing the
/// reusable ones (kept-alive idle, or waiting for their first request) to reuse them
/// for a new connection (its `ngx_drain_connections`, which logs "worker_connections
/// are not enough, reusing connections" at warn). Counted only with the
/// `ngx_get_connection` uprobe attached.
pub const CLOSED_REUSING: usize = CLOSED_BY_NGINX_DATA_UNREAD + 1;
/// Of [`CLOSED_REUSING`], those ended by a reset because the client's data was
/// unread at the close (`TCP_ABORT_ON_CLOSE`): a request that had come in and that
/// nginx never read, failed for its client unless it retries.
pub const CLOSED_REUSING_RESET: usize = CLOSED_REUSING + 1;
/// Of the resets sent with the kernel's reason `NO_SOCKET` (no socket took the
/// segment), those answering a SYN (TCP flags SYN without ACK, the answered segment's
/// header byte 13): connection attempts refused because no listener had the port
/// (nginx stopped, or a reload dropped it), told from late segments of connections
/// already gone. Not counted when the offsets are unknown.
pub const RST_NO_SOCKET_SYN: usize = CLOSED_REUSING_RESET + 1;
/// Counters per port.
pub const LC_PER_PORT: usize = RST_NO_SOCKET_SYN + 1;

/// Largest payload (bytes) of a segment counted in [`RST_AFTER_CLOSE_ALERT_SIZED`].
pub const ALERT_SIZED_MAX: u32 = 31;

/// Entries of `LC_BORN` (`struct sock *` of a client connection -> when it was
/// established): the connections whose lifetime can be measured at once. An LRU
/// hash: beyond it, the longest-noted are let go and their lifetime is not measured.
pub const LC_MAX_BORN: u32 = 65536;

/// Entries of `LC_CLIENT_FIN` (`struct sock *` of a client connection whose FIN
/// arrived first -> its idle time then, until the worker's close tells whether the
/// close was the client's): the sockets in `CLOSE_WAIT` at once. An LRU hash: beyond
/// it, the oldest are let go and their idle time is not counted.
pub const LC_MAX_CLIENT_FIN: u32 = 16384;

/// The uprobe that tells who began a TLS close: nginx calls `ngx_int_t
/// ngx_ssl_shutdown(ngx_connection_t *c)` before it closes any TLS connection, before
/// its close_notify goes out, whoever closed first.
pub const TLS_SHUTDOWN_SYMBOL: &str = "ngx_ssl_shutdown";

/// Entries of `LC_TLS_CLOSING` (sockets between nginx's `ngx_ssl_shutdown` and the
/// state change that ends the close; an entry lives microseconds to milliseconds).
pub const LC_MAX_TLS_CLOSING: u32 = 8192;

/// Closes of client connections counted per worker slot, in the worker's own context
/// (per-CPU `LC_WORKER`: `slot * LC_PER_WORKER + counter`, u64, cumulative): the
/// state changes a worker's `close()` makes (a client's FIN or a reset arrives in
/// softirq, with no worker to name).
pub mod worker {
    /// `ESTABLISHED -> FIN_WAIT1` by the worker's `close()`/`shutdown()`: nginx closed
    /// first.
    pub const CLOSED_BY_NGINX: usize = 0;
    /// Of [`CLOSED_BY_NGINX`], while the worker was draining.
    pub const CLOSED_WHILE_DRAINING: usize = 1;
    /// `CLOSE_WAIT -> LAST_ACK` by the worker's `close()`: the client had closed
    /// first and the worker closed its end; or `CLOSE_WAIT -> CLOSE` in the worker's
    /// context, not a received reset's (its close with data unread, a TLS client's
    /// close_notify say, which the kernel answers with a reset).
    pub const CLOSED_AFTER_CLIENT: usize = 2;
    /// `ESTABLISHED -> FIN_WAIT1` as the worker exited (`PF_EXITING`).
    pub const CLOSED_BY_WORKER_EXIT: usize = 3;
    /// `ESTABLISHED -> CLOSE` by the worker's `close()` with no received reset being
    /// processed: nginx's own reset (`super::CLOSED_BY_NGINX_RESET`, per worker): a
    /// close with the client's data unread, or `SO_LINGER` 0.
    pub const RESET_BY_NGINX: usize = 4;
    /// Closes by the worker inside its `ngx_get_connection`, reusing connections at
    /// `worker_connections` (`super::CLOSED_REUSING`, per worker).
    pub const CLOSED_REUSING: usize = 5;
    /// Of [`RESET_BY_NGINX`], while the worker was draining
    /// (`super::CLOSED_WHILE_DRAINING_RESET`, per worker): a request its `close()`
    /// found unread as it shut down, told apart per worker so that a reload's cuts
    /// and a stop's are said apart (their workers' generations).
    pub const RESET_WHILE_DRAINING: usize = 6;
    /// Counters per worker slot.
    pub const LC_PER_WORKER: usize = 7;
    /// `LC_DRAINING` value of a worker already shutting down at attach (from its
    /// title): draining, since a time not known (no time since the drain is kept for
    /// its closes). A kernel time stamp is never this small.
    pub const DRAIN_START_UNKNOWN: u64 = 2;
    /// The uprobe marking a worker draining: nginx calls `ngx_close_idle_connections`
    /// once, in the worker, when it starts a graceful shutdown
    /// (`ngx_worker_process_cycle`, after retitling it "worker process is shutting
    /// down").
    pub const DRAIN_SYMBOL: &str = "ngx_close_idle_connections";
}

/// The connections nginx's workers open (upstream peers), counted per peer address in
/// `LC_UP_PEERS` (a hash map, not per CPU: atomic adds): a TCP socket is marked as
/// nginx's in `LC_UP_SOCKS` at its `CLOSE -> SYN_SENT` (the `connect()` of a tracked
/// worker, in that worker's context) and followed by its pointer from then on, so its
/// state changes in softirq are still nginx's. Counters of [`UpPeerStats::c`].
pub mod up {
    /// Peers counted apart; further ones are summed under the key of family 0 (`other
    /// peers`), one of these entries.
    pub const UP_MAX_PEERS: u32 = 64;
    /// Sockets followed at once (LRU: an entry whose close was missed is let go).
    pub const UP_MAX_SOCKS: u32 = 16384;
    /// `connect()`s of a worker to the peer (`CLOSE -> SYN_SENT`).
    pub const CONNECTS: usize = 0;
    /// Handshakes completed (`SYN_SENT -> ESTABLISHED`).
    pub const ESTABLISHED: usize = 1;
    /// Connects that never established (`SYN_SENT -> CLOSE`: refused, timed out,
    /// unreachable, or closed by nginx while connecting).
    pub const CONNECT_FAILED: usize = 2;
    /// nginx closed first (`ESTABLISHED -> FIN_WAIT1` by a worker: the TIME-WAIT stays
    /// on nginx's side).
    pub const CLOSED_BY_NGINX: usize = 3;
    /// The peer closed first (`ESTABLISHED -> CLOSE_WAIT`: its FIN arrived).
    pub const CLOSED_BY_PEER: usize = 4;
    /// Ended by a reset while established (`ESTABLISHED -> CLOSE`).
    pub const CLOSED_BY_RESET: usize = 5;
    /// Closed first on nginx's side by the kernel as the worker exited (`PF_EXITING`).
    pub const CLOSED_BY_WORKER_EXIT: usize = 6;
    /// Peer closes whose idle time was measured (the peer had sent nothing in its
    /// close's last jiffy).
    pub const PEER_IDLE_COUNT: usize = 7;
    /// Sum of those idle times, ms.
    pub const PEER_IDLE_SUM_MS: usize = 8;
    /// Longest, ms (since attach; combined by max).
    pub const PEER_IDLE_MAX_MS: usize = 9;
    /// `!min`, ms (since attach; combined by max; 0 = none).
    pub const PEER_IDLE_INV_MIN_MS: usize = 10;
    /// Resets whose time since the peer's last data was measured.
    pub const RESET_IDLE_COUNT: usize = 11;
    /// Sum of those times, ms.
    pub const RESET_IDLE_SUM_MS: usize = 12;
    /// Longest, ms (since attach).
    pub const RESET_IDLE_MAX_MS: usize = 13;
    /// nginx closes whose idle time was measured.
    pub const NGINX_IDLE_COUNT: usize = 14;
    /// Sum of those idle times, ms.
    pub const NGINX_IDLE_SUM_MS: usize = 15;
    /// Idle before the peer's close, log2 histogram, ms: `PEER_IDLE_HIST + bucket`.
    pub const PEER_IDLE_HIST: usize = 16;
    /// Time since the peer's last data at a reset, log2 histogram, ms.
    pub const RESET_IDLE_HIST: usize = PEER_IDLE_HIST + super::LC_IDLE_BUCKETS;
    /// `!min` of the times since the peer's last data at a reset, ms (since attach;
    /// 0 = none).
    pub const RESET_IDLE_INV_MIN_MS: usize = RESET_IDLE_HIST + super::LC_IDLE_BUCKETS;
    /// Peer closes that came at most one jiffy after the peer's own data (a response
    /// with `Connection: close`, or a TLS close_notify: not told apart): no idle time
    /// is measured for them, and they are not in the idle counters.
    pub const PEER_CLOSED_AFTER_ITS_DATA: usize = RESET_IDLE_INV_MIN_MS + 1;
    /// Of [`CLOSED_BY_NGINX`], closes while awaiting the peer's response: nginx's
    /// last data sent (`tcp_sock.lsndtime`) is later than the peer's last data
    /// (`icsk_ack.lrcvtime`) by a jiffy or more: a request sent, nothing back since
    /// (`proxy_read_timeout`, a client gone, a worker's shutdown). Not in the idle
    /// counters ([`NGINX_IDLE_COUNT`]), since such a connection is busy, not idle.
    pub const NGINX_CLOSED_AWAITING: usize = PEER_CLOSED_AFTER_ITS_DATA + 1;
    /// Sum of the times since nginx's last data at those closes, ms (how long the
    /// response was awaited).
    pub const NGINX_AWAITING_SUM_MS: usize = PEER_CLOSED_AFTER_ITS_DATA + 2;
    /// Of [`CLOSED_BY_NGINX`], closes not awaiting a response with the peer's last
    /// data (`icsk_ack.lrcvtime`) at most one jiffy before: nginx ending the connection
    /// on the response it just read (nginx asked the peer to close, HTTP/1.0 or
    /// `Connection: close`, or the response said it: an HTTP/1.0 peer, `Connection:
    /// close` from the peer), its FIN racing the peer's own. Also in the idle counters.
    pub const NGINX_CLOSED_AFTER_PEER_DATA: usize = PEER_CLOSED_AFTER_ITS_DATA + 3;
    /// Counters per peer.
    pub const UP_PER_PEER: usize = NGINX_CLOSED_AFTER_PEER_DATA + 1;

    /// An upstream peer: address family (2 AF_INET, 10 AF_INET6, 0 the other peers),
    /// port (host order), address (IPv4 in the first 4 bytes).
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub struct PeerKey {
        /// AF_INET (2), AF_INET6 (10), or 0 for the other peers.
        pub family: u16,
        /// Port, host order.
        pub port: u16,
        /// Address bytes, network order.
        pub addr: [u8; 16],
    }

    /// Counters of one peer (`LC_UP_PEERS` value), cumulative since attach.
    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub struct UpPeerStats {
        /// Indexed by the constants of this module.
        pub c: [u64; UP_PER_PEER],
    }

    impl Default for UpPeerStats {
        fn default() -> Self {
            UpPeerStats {
                c: [0; UP_PER_PEER],
            }
        }
    }

    #[cfg(feature = "user")]
    // SAFETY: plain old data, no padding (u16, u16, [u8; 16]; [u64; N]).
    unsafe impl aya::Pod for PeerKey {}
    #[cfg(feature = "user")]
    // SAFETY: as above.
    unsafe impl aya::Pod for UpPeerStats {}
}

/// Entries of `LC_CLOSING` (pid_tgid of a task closing a listener -> the listener).
pub const LC_MAX_CLOSING: u32 = 64;

indexed! {
    /// Kernel struct member offsets the raw-tracepoint programs read (their arguments
    /// are `struct sock *` and `struct sk_buff *`, not a record): bytes, from the
    /// kernel's BTF, patched into the `LC_RAW_OFF` global; `u64::MAX` = unknown, and
    /// then the perf-event tracepoint programs are attached instead. Each constant
    /// indexes `LC_RAW_OFF` and [`RAW_OFF_PATHS`].
    pub mod raw_off: usize;
    /// Number of offsets in [`raw_off`].
    pub const RAW_OFF_COUNT;
    /// (struct, member path) of each offset in [`raw_off`], in index order.
    pub const RAW_OFF_PATHS: [(&str, &str)];
    /// `inet_sock.inet_sport`: local port, big-endian (u16), what the tracepoints'
    /// records take (`skc_num` is already 0 when a closing socket's port was put back).
    INET_SPORT => ("inet_sock", "inet_sport"),
    /// `sock.__sk_common.skc_state`: TCP state (u8).
    SK_STATE => ("sock", "__sk_common.skc_state"),
    /// `sock.sk_protocol` (u16; a bitfield before Linux 5.6, then unknown).
    SK_PROTOCOL => ("sock", "sk_protocol"),
    /// `sk_buff.data`: the TCP header of the segment a reset answers.
    SKB_DATA => ("sk_buff", "data"),
    /// `sk_buff.len` (u32): the bytes of the segment a reset answers, from its TCP
    /// header on (`data` points there when the reset is sent).
    SKB_LEN => ("sk_buff", "len"),
    /// `sock.__sk_common.skc_family` (u16): AF_INET or AF_INET6, of an upstream peer.
    SKC_FAMILY => ("sock", "__sk_common.skc_family"),
    /// `sock.__sk_common.skc_dport` (u16, big-endian): an upstream peer's port.
    SKC_DPORT => ("sock", "__sk_common.skc_dport"),
    /// `sock.__sk_common.skc_daddr` (4 bytes): an IPv4 upstream peer's address.
    SKC_DADDR => ("sock", "__sk_common.skc_daddr"),
    /// `sock.__sk_common.skc_v6_daddr` (16 bytes): an IPv6 upstream peer's address.
    SKC_V6_DADDR => ("sock", "__sk_common.skc_v6_daddr"),
    /// `tcp_sock.copied_seq` (u32): the next byte the application reads (a FIN read
    /// as EOF counts one).
    TCP_COPIED_SEQ => ("tcp_sock", "copied_seq"),
    /// `tcp_sock.rcv_nxt` (u32): the next byte expected from the peer (past its FIN
    /// once received).
    TCP_RCV_NXT => ("tcp_sock", "rcv_nxt"),
}

/// Histogram bucket of `ms`.
#[inline(always)]
pub const fn idle_bucket(ms: u64) -> usize {
    let b = crate::log2_u64(ms) as usize;
    if b >= LC_IDLE_BUCKETS {
        LC_IDLE_BUCKETS - 1
    } else {
        b
    }
}

/// Names crossing the kernel boundary for this module (see `crate::names`).
pub mod names {
    names! {
        /// Maps, for the contract test.
        pub const MAPS;
        /// Local port (host order, the array index) -> 1 + index 0..`LC_MAX_PORTS` for
        /// nginx's listening ports, 0 for any other.
        LC_PORTS = "LC_PORTS",
        /// Per-CPU counters, see the module doc.
        LC_STATS = "LC_STATS",
        /// pid_tgid closing a listener -> the listener's `struct sock *`.
        LC_CLOSING = "LC_CLOSING",
        /// LRU hash, `struct sock *` of a connection a worker opened -> its peer
        /// (`up::PeerKey`).
        LC_UP_SOCKS = "LC_UP_SOCKS",
        /// Hash, `up::PeerKey` -> `up::UpPeerStats`.
        LC_UP_PEERS = "LC_UP_PEERS",
        /// Per-CPU array of one zeroed `up::UpPeerStats`: a new peer's first value
        /// (too large for the eBPF stack).
        LC_UP_ZERO = "LC_UP_ZERO",
        /// Per-CPU counters per worker slot, see [`super::worker`].
        LC_WORKER = "LC_WORKER",
        /// Array, worker slot -> `bpf_ktime_get_ns()` when the worker entered
        /// `ngx_close_idle_connections` (0: serving), with bit 0 set until it returns
        /// (the idle sweep). Zeroed with the slot.
        LC_DRAINING = "LC_DRAINING",
        /// Per-CPU, one entry: the socket whose received reset this CPU is processing
        /// (its `CLOSE_WAIT -> CLOSE` is then no worker's close).
        LC_RESET_SK = "LC_RESET_SK",
        /// LRU hash, `struct sock *` of a TLS connection whose close nginx began (its
        /// `ngx_ssl_shutdown` found it `ESTABLISHED`, the client's EOF unread) -> what
        /// the close is counted with (worker, drain state, idle time, as read then),
        /// until the state change that ends it.
        LC_TLS_CLOSING = "LC_TLS_CLOSING",
        /// Array, one u32: 1 once the `ngx_ssl_shutdown` uprobe marked a socket in
        /// `LC_TLS_CLOSING`; until then the state changes never look it up.
        LC_TLS_ON = "LC_TLS_ON",
        /// Array, one u32: 1 when closes with the client's FIN unread are counted as
        /// nginx's (see [`super::CLOSED_BY_NGINX_CLIENT_FIN_UNREAD`]), set by user
        /// space after the `ngx_ssl_shutdown` uprobe is attached (or nginx has no
        /// TLS).
        LC_FIN_RULE = "LC_FIN_RULE",
        /// LRU hash, `struct sock *` of a client connection -> `bpf_ktime_get_ns()`
        /// at its `SYN_RECV -> ESTABLISHED`, taken at its first close (lifetime).
        LC_BORN = "LC_BORN",
        /// LRU hash, `struct sock *` of a client connection whose client's FIN came
        /// first -> 1 + its idle time then, ms (`lc::CLIENT_CLOSE_IDLE_COUNT`), taken
        /// when the socket leaves `CLOSE_WAIT` and counted unless the close was
        /// nginx's after all.
        LC_CLIENT_FIN = "LC_CLIENT_FIN",
    }
    /// Uprobe on `ngx_ssl_shutdown` in nginx's binary.
    pub const PROG_TLS_SHUTDOWN: &str = "lc_ssl_shutdown";
    /// Uprobe on `ngx_close_idle_connections` in nginx's binary.
    pub const PROG_DRAIN: &str = "lc_worker_drains";
    /// Uretprobe on `ngx_close_idle_connections`: the worker's idle sweep ended.
    pub const PROG_DRAIN_SWEPT: &str = "lc_worker_swept";
    /// `sock:inet_sock_set_state`.
    pub const PROG_STATE: &str = "lc_set_state";
    /// `tcp:tcp_send_reset`.
    pub const PROG_SEND_RESET: &str = "lc_send_reset";
    /// `tcp:tcp_receive_reset`.
    pub const PROG_RECEIVE_RESET: &str = "lc_receive_reset";
    /// `tcp:tcp_destroy_sock`.
    pub const PROG_DESTROY: &str = "lc_destroy_sock";
    /// (program, tracepoint category, tracepoint), for the loader and the contract test:
    /// the perf-event tracepoint set, which reads the tracepoints' records (the
    /// fallback when [`super::RAW_OFF_PATHS`] are not all in the kernel's BTF).
    pub const PROGS: &[(&str, &str, &str)] = &[
        (PROG_STATE, "sock", "inet_sock_set_state"),
        (PROG_SEND_RESET, "tcp", "tcp_send_reset"),
        (PROG_RECEIVE_RESET, "tcp", "tcp_receive_reset"),
        (PROG_DESTROY, "tcp", "tcp_destroy_sock"),
    ];
    /// Raw tracepoint on `inet_sock_set_state(sk, oldstate, newstate)`.
    pub const RAW_STATE: &str = "lc_raw_set_state";
    /// Raw tracepoint on `tcp_send_reset(sk, skb, reason)`.
    pub const RAW_SEND_RESET: &str = "lc_raw_send_reset";
    /// Raw tracepoint on `tcp_receive_reset(sk)`.
    pub const RAW_RECEIVE_RESET: &str = "lc_raw_receive_reset";
    /// Raw tracepoint on `tcp_destroy_sock(sk)`.
    pub const RAW_DESTROY: &str = "lc_raw_destroy_sock";
    /// (program, raw tracepoint), for the loader and the contract test: the same
    /// counters as [`PROGS`] from the tracepoints' arguments, without the perf record
    /// the kernel builds per hit for a perf-event tracepoint (the default set).
    pub const RAW_PROGS: &[(&str, &str)] = &[
        (RAW_STATE, "inet_sock_set_state"),
        (RAW_SEND_RESET, "tcp_send_reset"),
        (RAW_RECEIVE_RESET, "tcp_receive_reset"),
        (RAW_DESTROY, "tcp_destroy_sock"),
    ];
    names! {
        /// Globals, for the contract test.
        pub const GLOBALS;
        /// u64: offset of `tcp_sock.lsndtime` (u32 jiffies of the last data sent), bytes,
        /// from the kernel's BTF; `u64::MAX` = unknown: idle time not measured.
        LC_LSNDTIME_OFF = "LC_LSNDTIME_OFF",
        /// u64: offset of `inet_connection_sock.icsk_ack.lrcvtime` (u32 jiffies of the
        /// last data received), bytes, from the kernel's BTF; `u64::MAX` = unknown.
        LC_LRCVTIME_OFF = "LC_LRCVTIME_OFF",
        /// u64: the kernel's HZ (jiffies per second: `/boot/config-<release>`,
        /// `/proc/config.gz`, or measured from `/proc/timer_list`); 0 = unknown: idle
        /// time not measured.
        LC_HZ = "LC_HZ",
        /// u64: offset of `task_struct.flags` (u32), bytes, from the kernel's BTF;
        /// `u64::MAX` = unknown: closes by exiting workers count as nginx's.
        LC_TASK_FLAGS_OFF = "LC_TASK_FLAGS_OFF",
        /// u64: offset of `tcp_sock.bytes_received` (u64), bytes, from the kernel's
        /// BTF; `u64::MAX` = unknown: an upstream connection whose request went out in
        /// the jiffy of its connect is not told awaiting, and client connections closed
        /// without data are not counted (`CLOSED_WITHOUT_DATA_*`).
        LC_BYTES_RECEIVED_OFF = "LC_BYTES_RECEIVED_OFF",
        /// `[u64; RAW_OFF_COUNT]`: the struct offsets the raw-tracepoint programs read,
        /// indexed by `raw_off` (from the kernel's BTF; `u64::MAX` = unknown).
        LC_RAW_OFF = "LC_RAW_OFF",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_fits_and_buckets() {
        assert_eq!(IDLE_HIST, 37);
        assert_eq!(CLOSED_BY_WORKER_EXIT, 69);
        assert_eq!(CLOSED_WHILE_DRAINING_IDLE, 72);
        assert_eq!(DRAIN_SILENT_INV_MIN_MS, 76);
        assert_eq!(DRAIN_AFTER_DATA_INV_MIN_MS, 78);
        assert_eq!(CLIENT_CLOSE_IDLE_COUNT, 125);
        assert_eq!(LC_PER_PORT, 202);
        assert_eq!(idle_bucket(0), 0);
        assert_eq!(idle_bucket(2000), 10);
        assert_eq!(idle_bucket(u64::MAX), LC_IDLE_BUCKETS - 1);
    }
}
