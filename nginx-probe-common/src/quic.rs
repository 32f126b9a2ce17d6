//! QUIC connections nginx ends itself, in nginx's own words. QUIC is UDP: no TCP
//! state change marks its connections' ends, so the lifecycle tracepoints see none.
//! nginx (1.25+, built with QUIC) ends one in two public functions, both exported by its
//! binary:
//! - `void ngx_quic_shutdown_connection(ngx_connection_t *c, ngx_uint_t err, const char
//!   *reason)`: a graceful end begun (HTTP/3 sends its GOAWAY first, then waits for the
//!   streams under way): "reached maximum number of requests" (keepalive_requests or
//!   keepalive_time reached; nginx guards it with `h3c->goaway`, once per connection),
//!   "connection shutdown" (a worker's graceful shutdown);
//! - `void ngx_quic_finalize_connection(ngx_connection_t *c, ngx_uint_t err, const char
//!   *reason)`: the connection closed at once (a CONNECTION_CLOSE posted): "keepalive
//!   timeout" (its timer, once per connection), the end of a shutdown begun above (its
//!   reason again, once the streams are done), and errors ("too many requests per
//!   connection", "stream error", "HTTP/3 flood detected", ...; a connection in error can
//!   be finalized more than once before its close runs).
//!
//! A uprobe on each counts the calls of the traced master's workers by (call, `err`,
//! `reason` pointer); user space reads the reason, a string literal in nginx's binary,
//! from the master's memory. A third, on `void ngx_quic_close_connection(ngx_connection_t
//! *c, ngx_int_t rc)`, counts nginx's silent closes at the QUIC idle timeout: `rc`
//! `NGX_DONE` with `c->read->timedout` set, which only its input handler's timer makes
//! ("quic client timed out" at info; the timeout is keepalive_timeout, or the client's
//! shorter max_idle_timeout); nginx's later calls for the same connection pass `NGX_OK`.
//! Not counted: a client's own CONNECTION_CLOSE.

/// The graceful end's function.
pub const SHUTDOWN_SYMBOL: &str = "ngx_quic_shutdown_connection";
/// The immediate close's function.
pub const FINALIZE_SYMBOL: &str = "ngx_quic_finalize_connection";
/// The uprobe on [`SHUTDOWN_SYMBOL`].
pub const PROG_SHUTDOWN: &str = "quic_shutdown";
/// The uprobe on [`FINALIZE_SYMBOL`].
pub const PROG_FINALIZE: &str = "quic_finalize";
/// QUIC's close, every way (its idle timeout among them).
pub const CLOSE_SYMBOL: &str = "ngx_quic_close_connection";
/// The uprobe on [`CLOSE_SYMBOL`].
pub const PROG_CLOSE: &str = "quic_close";
/// HTTP/3's start of a QUIC connection: `ngx_int_t ngx_http_v3_init(ngx_connection_t
/// *c)`, called once per connection whose TLS handshake completed (QUIC's
/// `ngx_quic_init_streams`, guarded by `qc->streams.initialized`). nginx's `accepted`
/// counter also counts every datagram it took for a new connection and dropped
/// (packets for a connection it had closed, handshakes never completed).
pub const STARTED_SYMBOL: &str = "ngx_http_v3_init";
/// The uprobe on [`STARTED_SYMBOL`].
pub const PROG_STARTED: &str = "quic_started";
/// nginx's `NGX_DONE` (`rc` of a silent close).
pub const NGX_DONE: i64 = -4;

/// Hash map [`QuicEndKey`] -> calls since attach.
pub const MAP: &str = "QUIC_ENDS";
/// Entries of [`MAP`], the last one being [`OVERFLOW_KEY`]'s (nginx 1.26 has about 30
/// reasons).
pub const MAX_ENDS: u32 = 64;

/// [`QuicEndKey::call`] of [`SHUTDOWN_SYMBOL`].
pub const CALL_SHUTDOWN: u32 = 0;
/// [`QuicEndKey::call`] of [`FINALIZE_SYMBOL`].
pub const CALL_FINALIZE: u32 = 1;
/// [`QuicEndKey::call`] of a silent close at the QUIC idle timeout ([`CLOSE_SYMBOL`]
/// with `NGX_DONE` and `c->read->timedout`; reason and code 0).
pub const CALL_IDLE_TIMEOUT: u32 = 2;
/// [`QuicEndKey::call`] of a QUIC connection started ([`STARTED_SYMBOL`]; reason and
/// code 0).
pub const CALL_STARTED: u32 = 3;
/// [`QuicEndKey::call`] of [`OVERFLOW_KEY`]: calls counted when the map was full.
pub const CALL_OVERFLOW: u32 = u32::MAX;

/// One kind of QUIC end nginx made: which call, its QUIC or HTTP/3 error code, and the
/// address of its reason string in the worker's memory (0: NULL).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QuicEndKey {
    /// The reason's address (`const char *`, nginx's string literal; 0: none).
    pub reason: u64,
    /// The error code (`err`: 0x100 is HTTP/3's H3_NO_ERROR).
    pub code: u64,
    /// [`CALL_SHUTDOWN`], [`CALL_FINALIZE`] or [`CALL_OVERFLOW`].
    pub call: u32,
    /// Padding, 0.
    pub _pad: u32,
}

/// The key user space inserts at load, which the uprobes count into when the map is full.
pub const OVERFLOW_KEY: QuicEndKey = QuicEndKey {
    reason: 0,
    code: 0,
    call: CALL_OVERFLOW,
    _pad: 0,
};

#[cfg(feature = "user")]
// SAFETY: #[repr(C)], two u64 and two u32: no padding.
unsafe impl aya::Pod for QuicEndKey {}
