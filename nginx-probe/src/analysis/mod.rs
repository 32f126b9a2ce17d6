//! Analysis: judgement on reports. The [`verdict`] rules (each names the nginx
//! directive involved and the evidence behind it) over their [`inputs`], those on the
//! logs written per request in [`log_verdicts`], the [`nginx_rules`] on what nginx
//! decided itself (refusals and upstream errors from its error log, keepalive_requests,
//! the CPU quota), [`worker_connections`] (nginx out of connections, its reuse of
//! them counted), [`fd_upstream`] (upstream keepalive and fd-limit rules), [`conn_verdicts`] (who closed client connections; [`conn_timeouts`] which configured timeout a close time matches; [`conn_resets`] nginx's own resets at a timeout),
//! [`outcome_rules`] (what the clients got, from nginx's access log), [`own_hops`]
//! (the caveat on per-request figures when nginx's requests include its own hops),
//! [`upstream_failures`] (which peer failed how, and whether a pool was kept),
//! [`upstream_pool`] (the pool `upstream_keepalive_off` advises, or what defeats one configured),
//! [`process_history`] (workers the master failed to spawn or that crashed, from its
//! error log back to its start), [`quic_ends`] (the QUIC connections nginx ended itself, by
//! its reasons), and [`compare`] (what changed between two recordings, beyond the
//! noise; [`compare_setup`] its caveats on setups that differ).

pub mod compare;
pub mod compare_lifecycle;
pub mod compare_noise;
pub mod compare_setup;
pub mod config_evidence;
pub mod config_scope;
pub mod conn_resets;
pub mod conn_timeouts;
pub mod conn_verdicts;
pub mod fd_upstream;
pub mod inputs;
pub mod keepalive_requests_log;
pub mod log_rotation;
pub mod log_verdicts;
pub mod nginx_rules;
pub mod not_judged;
pub mod outcome_rules;
pub mod own_hops;
pub mod process_history;
pub mod quic_ends;
pub mod tls_handshakes;
pub mod upstream_down;
pub mod upstream_failures;
pub mod upstream_idle;
pub mod upstream_pool;
pub mod verdict;
pub mod worker_connections;
pub mod worker_rules;

#[cfg(test)]
mod nginx_rules_tests;
