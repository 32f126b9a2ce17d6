//! Sizes and layouts of the uprobe families' maps: HTTP requests
//! (`ngx_http_create_request`/`ngx_http_free_request`) and TLS handshakes (libssl's
//! `SSL_do_handshake`/`SSL_free`, nginx's `ngx_ssl_ocsp_validate`).

/// Entries of the LRU map from connection pointer to request start (uprobes only):
/// bounds concurrently open HTTP requests tracked for duration.
pub const MAX_OPEN_REQUESTS: u32 = 65536;

/// Entries of the LRU map from `SSL*` to the start of its TLS handshake: bounds
/// handshakes in progress at once.
pub const MAX_OPEN_HANDSHAKES: u32 = 65536;

/// [`SyscallStats`](crate::SyscallStats) per worker slot in the `TLS` map: 0 =
/// handshakes (started in `count`, completed ones timed, abandoned in `errors`), 1 =
/// `SSL_do_handshake` calls (time inside each).
pub const TLS_STATS: u32 = 2;
