//! nginx's documented defaults for the directives the configuration report reads
//! (`model::config`): what a value is when no file sets it.

/// Main-level directives and nginx's documented defaults.
pub(super) const MAIN: &[(&str, &str)] = &[
    ("worker_processes", "1"),
    (
        "worker_rlimit_nofile",
        "unset (the limit nginx was started with)",
    ),
    (
        "worker_shutdown_timeout",
        "unset (old workers wait for their connections)",
    ),
];
/// `events { }` directives and defaults.
pub(super) const EVENTS: &[(&str, &str)] = &[
    ("worker_connections", "512"),
    ("multi_accept", "off"),
    ("accept_mutex", "off"),
    ("accept_mutex_delay", "500ms"),
];
/// http-level directives that servers and locations may override, and defaults.
pub const HTTP: &[(&str, &str)] = &[
    ("keepalive_timeout", "75s"),
    ("keepalive_requests", "1000"),
    ("keepalive_time", "1h"),
    ("client_header_timeout", "60s"),
    ("client_body_timeout", "60s"),
    ("send_timeout", "60s"),
    ("lingering_timeout", "5s"),
    ("reset_timedout_connection", "off"),
    ("sendfile", "off"),
    ("tcp_nopush", "off"),
    ("tcp_nodelay", "on"),
    ("gzip", "off"),
    ("aio", "off"),
    ("open_file_cache", "off"),
    ("open_log_file_cache", "off"),
    ("ssl_session_cache", "none"),
    ("ssl_session_tickets", "on"),
    ("client_body_buffer_size", "8k|16k (two memory pages)"),
    ("resolver", "unset"),
    ("proxy_connect_timeout", "60s"),
    ("proxy_read_timeout", "60s"),
    ("proxy_send_timeout", "60s"),
    ("proxy_http_version", "1.0"),
    ("proxy_buffering", "on"),
    ("proxy_next_upstream", "error timeout"),
    ("proxy_next_upstream_tries", "0"),
    ("log_subrequest", "off"),
];
/// Upstream-block directives and defaults.
pub(super) const UPSTREAM: &[(&str, &str)] = &[
    ("keepalive", "unset (no idle upstream connections kept)"),
    ("keepalive_timeout", "60s"),
    ("keepalive_requests", "1000"),
];
