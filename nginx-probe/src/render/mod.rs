//! Render: a report as text ([`text`]), one self-contained HTML page ([`html`]), the
//! live terminal view ([`tui`]) and Prometheus text ([`prometheus`]). Pure functions of
//! a report, host-tested.

pub mod html;
pub mod prometheus;
pub mod prometheus_doc;
pub mod prometheus_families;
pub mod prometheus_series;
mod prometheus_tls;
pub mod safe;
pub mod text;
pub mod text_history;
pub mod tui;
