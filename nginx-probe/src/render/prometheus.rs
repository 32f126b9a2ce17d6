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

use std::fmt::Write as _;

use crate::model::{bucket_bounds, OwnCost, Report, WorkerReport};

use super::prometheus_families::{with_note, IfEmpty, Scrape, Values};
pub use super::prometheus_families::{Family, Kind, Layer, Series, Workers, FAMILIES};
pub use super::prometheus_series::{series_for, series_per_worker};

/// A worker's labels and report: (`worker`, `generation`, report).
pub(crate) type Labelled<'a> = (String, String, &'a WorkerReport);

/// Address `--listen` uses when given without a value: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9752";

/// `Content-Type` of the Prometheus text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// First kernel log2 bucket given its own `le`: bucket 9 holds [512, 1023] ns, so the
/// first bound is 1023 ns (about 1 us); faster calls are all counted there.
pub const FIRST_LE_BUCKET: usize = 9;
/// Last kernel log2 bucket given its own `le`: bucket 34 ends at 2^35 - 1 ns (34.4 s);
/// slower calls are counted in `+Inf` only.
pub const LAST_LE_BUCKET: usize = 34;
/// Finite `le` bounds of every latency histogram (26).
pub const LE_BOUNDS: usize = LAST_LE_BUCKET - FIRST_LE_BUCKET + 1;
/// Series of one latency histogram: [`LE_BOUNDS`] buckets, `+Inf`, `_sum` and `_count`.
pub const HISTOGRAM_SERIES: usize = LE_BOUNDS + 3;

/// What `/metrics` shows besides the report: exporter-mode state and the probe's own
/// cost.
#[derive(Clone, Debug, Default)]
pub struct Extras<'a> {
    /// Masters attached after the first one exited (`nginx_probe_restarts_total`).
    pub restarts: u64,
    /// nginx-probe's own CPU, memory and BPF program run time.
    pub own: OwnCost,
    /// The recent window the verdict gauges judge: (seconds it covers, its verdicts).
    /// None: the verdicts are the report's (since attach).
    pub window: Option<(f64, &'a [crate::model::Verdict])>,
    /// Leave out latency histograms whose buckets are all zero (`--skip-zero-histograms`).
    pub skip_zero_histograms: bool,
}

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

/// ns as seconds.
pub(crate) fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// A sample value: integers print exactly, floats in Rust's shortest round-trip form.
#[derive(Clone, Copy)]
pub(crate) enum Value {
    U(u64),
    F(f64),
}

impl From<u64> for Value {
    fn from(v: u64) -> Value {
        Value::U(v)
    }
}
impl From<u32> for Value {
    fn from(v: u32) -> Value {
        Value::U(v.into())
    }
}
impl From<i32> for Value {
    fn from(v: i32) -> Value {
        Value::U(v.max(0) as u64)
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::F(v)
    }
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Value::U(v) => write!(f, "{v}"),
            Value::F(v) if v.is_nan() => f.write_str("NaN"),
            Value::F(v) if v.is_infinite() => f.write_str(if v > 0.0 { "+Inf" } else { "-Inf" }),
            Value::F(v) => write!(f, "{v}"),
        }
    }
}

/// Text being built.
pub(crate) struct Exposition {
    text: String,
}

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.text, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: Value) {
        self.text += name;
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                let _ = write!(self.text, "{k}=\"{}\"", escape_label(v));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }
}

/// The samples of one family: `# HELP`/`# TYPE` once (before the first sample, or
/// alone when the family has none and is [`IfEmpty::Header`]), then each sample with
/// the family's label names given their values in order.
pub(crate) struct Sink<'a> {
    out: &'a mut Exposition,
    family: &'a Family,
    help: &'a str,
    /// Values of `worker` and `generation`, put first, for per-worker families.
    worker: Option<(&'a str, &'a str)>,
    headed: bool,
}

impl<'a> Sink<'a> {
    fn new(
        out: &'a mut Exposition,
        family: &'a Family,
        worker: Option<(&'a str, &'a str)>,
    ) -> Self {
        Sink {
            out,
            family,
            help: family.help,
            worker,
            headed: false,
        }
    }

    /// This scrape's HELP text instead of the table's (call before any sample).
    pub(crate) fn help(&mut self, help: &'a str) {
        self.help = help;
    }

    /// Writes the family's HELP and TYPE now if not yet written.
    pub(crate) fn header(&mut self) {
        if !self.headed {
            self.headed = true;
            let help = with_note(self.help, self.family.layer);
            self.out
                .family(self.family.name, self.family.kind.name(), &help);
        }
    }

    fn finish(&mut self) {
        if self.family.if_empty == IfEmpty::Header {
            self.header();
        }
    }

    /// The family's labels paired with `worker`/`generation` (per-worker families),
    /// then `values`, then `extra`.
    fn line(&mut self, suffix: &str, values: &[&str], extra: Option<(&str, &str)>, v: Value) {
        self.header();
        let given = self.worker.iter().flat_map(|(w, g)| [*w, *g]);
        let values: Vec<&str> = given.chain(values.iter().copied()).collect();
        debug_assert_eq!(
            values.len(),
            self.family.labels.len(),
            "{}",
            self.family.name
        );
        let mut labels: Vec<(&str, &str)> =
            self.family.labels.iter().copied().zip(values).collect();
        labels.extend(extra);
        if suffix.is_empty() {
            self.out.sample(self.family.name, &labels, v);
        } else {
            let name = format!("{}{suffix}", self.family.name);
            self.out.sample(&name, &labels, v);
        }
    }

    /// One sample whose labels (after `worker`, `generation`) have `values`.
    pub(crate) fn sample(&mut self, values: &[&str], v: impl Into<Value>) {
        self.line("", values, None, v.into());
    }

    /// One sample if `v` is known; none if it is not.
    pub(crate) fn some(&mut self, values: &[&str], v: Option<impl Into<Value>>) {
        if let Some(v) = v {
            self.sample(values, v);
        }
    }

    /// One latency histogram from an in-kernel log2 ns histogram and its total, ns.
    pub(crate) fn histogram(&mut self, values: &[&str], log2_ns: &[u64], total_ns: u64) {
        // Kernel bucket b holds [2^b, 2^(b+1) - 1] ns (b = 0: [0, 1]): the count at
        // or below its upper bound is the sum of buckets 0..=b, exactly.
        for b in FIRST_LE_BUCKET..=LAST_LE_BUCKET {
            let at_or_below: u64 = log2_ns.iter().take(b + 1).sum();
            let le = secs(bucket_bounds(b).1).to_string();
            self.line("_bucket", values, Some(("le", &le)), Value::U(at_or_below));
        }
        let cumulative: u64 = log2_ns.iter().sum();
        self.line(
            "_bucket",
            values,
            Some(("le", "+Inf")),
            Value::U(cumulative),
        );
        self.line("_sum", values, None, Value::F(secs(total_ns)));
        self.line("_count", values, None, Value::U(cumulative));
    }
}

/// Escapes a label value: backslash, double quote and newline.
fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
#[path = "prometheus_tests.rs"]
mod tests;
