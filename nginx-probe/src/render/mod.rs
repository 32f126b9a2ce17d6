//! Render: a report as text ([`text`]), one self-contained HTML page ([`html`]), the
//! live terminal view ([`tui`]) and Prometheus text ([`prometheus`]). Pure functions of
//! a report, host-tested. The text report, the HTML page and the live view lay out the
//! same per-section facts, computed once from the report ([`sections`]).

pub use crate::model::clock;
pub mod figures;
pub mod html;
mod html_outcomes;
mod html_workers;
pub mod prometheus;
mod prometheus_conn;
pub mod prometheus_doc;
pub mod prometheus_families;
pub mod prometheus_format;
mod prometheus_lifecycle;
pub mod prometheus_masters;
mod prometheus_outcomes;
pub mod prometheus_series;
mod prometheus_tls;
pub mod sections;
pub mod text;
mod text_config;
mod text_conn_idle;
mod text_connections;
pub mod text_history;
mod text_lifecycle;
pub mod text_outcomes;
pub mod text_tables;
mod text_upstream;
mod text_upstream_peers;
pub mod tui;
