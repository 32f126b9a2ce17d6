//! nginx-probe: an eBPF connection profiler for nginx.
//!
//! One direction of flow, one folder per stage:
//!
//! - [`collect`]: the kernel side as user space sees it (loading and attaching the eBPF
//!   programs, tracefs, finding the master and its workers in /proc, listen sockets
//!   over sock_diag) and the tracker that turns map snapshots into per-interval deltas.
//! - [`model`]: the report schema and its pure aggregation (deltas, quantiles, per-worker
//!   figures); depends on nothing else of the crate.
//! - [`analysis`]: judgement on a report: verdicts and the comparison of two runs.
//! - [`render`]: text, JSON, HTML, the live view and Prometheus text, from a report.
//! - [`io`]: where reports go and come from: output sinks, recordings, the /metrics
//!   server.
//! - [`cli`]: the arguments and the tracing session; `main.rs` only calls
//!   [`cli::main`].
//!
//! Pure stages (model, analysis, render) are host-tested without root.

#![deny(missing_docs)]

pub mod analysis;
pub mod cli;
pub mod collect;
pub mod error;
pub mod io;
pub mod model;
pub mod render;
pub mod safe;
