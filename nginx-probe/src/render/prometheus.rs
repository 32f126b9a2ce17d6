//! Prometheus metrics in the text exposition format (version 0.0.4), served on
//! `/metrics` by [`crate::io::metrics_server`] with `--listen ADDR`.
//!
//! The text is [`render`]ed by a pure function from a "since attach" [`Report`] (the
//! same one the summary is made of), so every number on `/metrics` is a number of the
//! JSON summary.
//!
//! Every family is one row of [`FAMILIES`] (name, type, help, labels, which workers
//! have it and how many series each, which layer counts it under `--detail sampled`
//! ([`Layer`]), and how its samples are read from the report):
//! the rendered text, the per-worker series bound ([`series_per_worker`]) and the
//! metrics table of the documentation ([`super::prometheus_doc`]) all come from it.
//!
//! Labels: workers are named by `worker` (their slot in the kernel maps) and
//! `generation` (how many workers held that slot before), never by pid: pids churn with
//! every reload and would grow the series without bound. Pids are only in
//! `nginx_probe_worker_info`. Exited workers merged into the report's `exited_merged`
//! are `worker="exited",generation="merged"`. See [`series_per_worker`] for the bound.

use crate::model::Report;

pub use super::prometheus_families::FAMILIES;
use super::prometheus_format::{Exposition, Labelled, Scrape, Sink, Values};
pub use super::prometheus_format::{
    Extras, Family, Kind, Layer, Series, Workers, FIRST_LE_BUCKET, HISTOGRAM_SERIES,
    LAST_LE_BUCKET, LE_BOUNDS,
};
pub use super::prometheus_series::{series_for, series_per_worker};

/// Renders `report` (cumulative since attach: the run's summary so far) as Prometheus
/// text. Pure: the same report gives the same text.
pub fn render(report: &Report) -> String {
    render_with(report, &Extras::default())
}

/// The metrics served between two masters in exporter mode: the families of
/// [`FAMILIES`] that need no report (build info, `nginx_probe_attached 0`, the restarts
/// and the probe's own cost).
pub fn render_waiting(extras: &Extras) -> String {
    let mut out = Exposition {
        text: String::with_capacity(2048),
    };
    for f in FAMILIES {
        if let Values::Probe(values) = f.values {
            let mut sink = Sink::new(&mut out, f, None);
            values(extras, false, &mut sink);
            sink.finish();
        }
    }
    out.text
}

/// [`render`] with the exporter's [`Extras`].
pub fn render_with(report: &Report, extras: &Extras) -> String {
    // About 100 bytes a line.
    let lines = (report.workers.len() + 1) * series_for(&report.traced_syscalls);
    let mut out = Exposition {
        text: String::with_capacity(lines * 100 + 8192),
    };
    let mut workers: Vec<Labelled> = report
        .workers
        .iter()
        .map(|w| (w.slot.to_string(), w.generation.to_string(), w))
        .collect();
    workers.sort_by_key(|(_, _, w)| (w.slot, w.generation));
    if let Some(m) = &report.exited_merged {
        workers.push(("exited".into(), "merged".into(), &m.stats));
    }
    let scrape = Scrape { report, extras };
    for f in FAMILIES {
        match f.values {
            Values::Probe(values) => {
                let mut sink = Sink::new(&mut out, f, None);
                values(extras, true, &mut sink);
                sink.finish();
            }
            Values::Report(values) => {
                let mut sink = Sink::new(&mut out, f, None);
                values(&scrape, &mut sink);
                sink.finish();
            }
            Values::PerWorker(values) => {
                let mut sink = Sink::new(&mut out, f, None);
                for (wk, gen, w) in workers.iter().filter(|(wk, _, w)| f.workers.has(wk, w)) {
                    sink.worker = Some((wk, gen));
                    values(&scrape, w, &mut sink);
                }
                sink.finish();
            }
        }
    }
    out.text
}

#[cfg(test)]
#[path = "prometheus_tests.rs"]
pub(crate) mod tests;
