//! I/O: where reports go and come from. Non-blocking output sinks ([`output`]),
//! recordings written with `--record` and read by `report`/`compare` ([`recording`]),
//! and the `/metrics` HTTP server ([`metrics_server`]).

pub mod files;
pub mod metrics_server;
pub mod output;
pub mod recording;
