//! Collect: what the kernel and /proc say about one nginx. Loading and attaching the
//! eBPF programs and reading their maps ([`loader`]), tracefs ([`tracefs`]), the master
//! and its workers in /proc ([`target`]), every master on the host for `--all`
//! ([`masters`]), finding the master without `--pid`
//! ([`discover`]), the kernel features the programs need ([`kernel`]), nginx's
//! listening sockets over sock_diag ([`listen`]), nginx's error log counted by message
//! class ([`error_log`], nginx's wording read by [`error_log_classes`]), the workers'
//! cgroup CPU quota ([`cgroup`]), the probe's own
//! cost ([`selfcost`]), the recent window of snapshots for exporter verdicts
//! ([`window`]), nginx's own stub_status counters ([`nginx_counters`]), and the
//! [`tracker`] that keeps the worker set current and ends at a snapshot and the plain
//! data a report needs (the model builds the report).

pub mod access_log;
pub mod btf;
pub mod cgroup;
pub mod config;
pub mod discover;
pub mod error_log;
pub mod error_log_classes;
pub mod error_log_entries;
pub mod error_log_history;
pub mod error_log_peers;
pub mod fd_limit;
pub mod kernel;
pub mod lifecycle;
pub mod listen;
pub mod loader;
pub mod log_files;
pub mod masters;
pub mod netns;
pub mod nginx_counters;
pub mod quic_reasons;
pub mod selfcost;
pub mod tail;
pub mod target;
pub mod tracefs;
pub mod tracker;
pub mod udp_listen;
pub mod window;
pub mod worker_state;
