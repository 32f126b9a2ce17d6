//! The vocabulary of the Prometheus text exposition (version 0.0.4) that every
//! family row is written in: what a family is ([`Family`]: its [`Kind`], which
//! [`Workers`] and how many [`Series`] each, its [`Layer`]), how its samples are read
//! ([`Values`] over a [`Scrape`] and the exporter's [`Extras`]), and the [`Sink`] that
//! writes them with escaped labels. The table itself is
//! [`FAMILIES`](super::prometheus_families::FAMILIES); the exposition is put together
//! by [`super::prometheus::render`].

use std::fmt::Write as _;

use nginx_probe_common::{is_rare, Entry, SYSCALLS};

use crate::model::{bucket_bounds, OwnCost, Report, WorkerReport};

/// A worker's labels and report: (`worker`, `generation`, report).
pub(crate) type Labelled<'a> = (String, String, &'a WorkerReport);

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

/// A family's Prometheus type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up while a master is traced (its name ends in `_total`).
    Counter,
    /// A value that goes up and down.
    Gauge,
    /// A latency histogram: cumulative `_bucket{le}`, `_sum` (seconds) and `_count`.
    Histogram,
}

impl Kind {
    /// The name in `# TYPE`.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// Which workers a family has series for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workers {
    /// Not labelled by worker.
    None,
    /// Every worker, the merged exited ones (`worker="exited"`) included.
    All,
    /// Every worker but the merged exited ones.
    Listed,
    /// Live workers only (gauges of a worker's current state).
    Live,
    /// The workers whose requests uprobes counted (`--uprobes`); not in the bound of
    /// [`super::prometheus_series::series_per_worker`].
    Uprobes,
}

impl Workers {
    /// Whether the worker labelled `worker` (its report `w`) has this family's series.
    pub(crate) fn has(self, worker: &str, w: &WorkerReport) -> bool {
        match self {
            Workers::None => false,
            Workers::All | Workers::Uprobes => true,
            Workers::Listed => worker != "exited",
            Workers::Live => worker != "exited" && w.alive,
        }
    }
}

/// Series a worker that has the family has: `fixed` + `per_traced` for each traced
/// syscall + `per_timed` for each timed one (with an entry program). An upper bound:
/// a sample whose value is unknown is left out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Series {
    /// Series whatever the syscalls.
    pub fixed: usize,
    /// Series per traced syscall.
    pub per_traced: usize,
    /// Series per timed traced syscall.
    pub per_timed: usize,
}

/// [`Series`] of a family not labelled by worker.
pub(crate) const NONE: Series = fixed(0);

/// `n` series a worker.
pub(crate) const fn fixed(n: usize) -> Series {
    Series {
        fixed: n,
        per_traced: 0,
        per_timed: 0,
    }
}

/// Which of the probe's layers counts a family's figures (docs/detail.md): what
/// `--detail sampled` does to them. The `# HELP` text says it in every mode alike
/// ([`Family::help_text`]), so metadata does not change with a flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layer {
    /// Counted all the time whatever `--detail` says: /proc, stub_status, sock_diag,
    /// the error log, uprobes (accepts among them).
    Continuous,
    /// Counted by the detail layer's programs (per-request syscall tracepoints, the
    /// accept-then-close detector, connect/getsockopt): under `--detail sampled`,
    /// inside detail windows only.
    Detail,
    /// Per syscall: [`Detail`](Layer::Detail), but the `is_rare` ones are
    /// [`Continuous`](Layer::Continuous) when accepts come from their tracepoints
    /// (`nginx_probe_detail_accepts_uprobe` 0).
    Mixed,
    /// Needs the detail layer attached all the time: absent under `--detail sampled`.
    FullOnly,
}

impl Layer {
    /// The docs table's name of the layer.
    pub const fn name(self) -> &'static str {
        match self {
            Layer::Continuous => "continuous",
            Layer::Detail => "detail (sampled)",
            Layer::Mixed => "mixed (per syscall)",
            Layer::FullOnly => "full only",
        }
    }

    /// What the layer appends to a family's `# HELP` text ("" when continuous).
    pub fn note(self) -> String {
        const SEE: &str =
            "(nginx_probe_detail_coverage_ratio, nginx_probe_detail_window_requests_total)";
        match self {
            Layer::Continuous => String::new(),
            Layer::Detail => {
                format!(" Under --detail sampled: counted inside detail windows only {SEE}.")
            }
            Layer::Mixed => format!(
                " Under --detail sampled: counted inside detail windows only {SEE}; {} all the time when nginx_probe_detail_accepts_uprobe is 0 (accepts from their tracepoints).",
                rare_syscalls().join(", ")
            ),
            Layer::FullOnly => {
                " Absent under --detail sampled (closes between detail windows are not seen)."
                    .to_string()
            }
        }
    }
}

/// Names of the syscalls counted all the time in every `--detail` mode
/// (`nginx_probe_common::is_rare`), in the order of `SYSCALLS`.
pub fn rare_syscalls() -> Vec<&'static str> {
    SYSCALLS
        .iter()
        .enumerate()
        .filter(|(i, _)| is_rare(*i as u32))
        .map(|(_, d)| d.name)
        .collect()
}

/// Whether a family with no sample still gets its `# HELP`/`# TYPE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IfEmpty {
    /// Written anyway: the family is known, it has no sample now.
    Header,
    /// Left out: the source is absent (no stub_status, no cgroup quota, ...).
    Omit,
}

/// What a scrape of a traced master renders from.
pub(crate) struct Scrape<'a> {
    pub report: &'a Report,
    pub extras: &'a Extras<'a>,
}

/// How a family's samples are read.
#[derive(Clone, Copy)]
pub(crate) enum Values {
    /// From the exporter's state alone (also rendered while waiting for a master):
    /// extras, whether a master is attached, where to write.
    Probe(fn(&Extras, bool, &mut Sink)),
    /// From the report.
    Report(fn(&Scrape, &mut Sink)),
    /// Once for each worker the family's [`Workers`] has, `worker` and `generation`
    /// labels given.
    PerWorker(fn(&Scrape, &WorkerReport, &mut Sink)),
}

/// One Prometheus family.
pub struct Family {
    /// Metric name (`nginx_probe_...`).
    pub name: &'static str,
    /// Prometheus type.
    pub kind: Kind,
    /// Label names in the order they are written (`le` of histograms not included).
    pub labels: &'static [&'static str],
    /// `# HELP` text: what the value is, its unit and its source.
    pub help: &'static str,
    /// Which workers have series.
    pub workers: Workers,
    /// Series of each worker that has them.
    pub series: Series,
    /// Which layer counts the figures (sampled or not under `--detail sampled`).
    pub layer: Layer,
    pub(crate) if_empty: IfEmpty,
    pub(crate) values: Values,
}

impl Family {
    pub(crate) const fn new(
        name: &'static str,
        kind: Kind,
        labels: &'static [&'static str],
        help: &'static str,
        values: Values,
    ) -> Family {
        Family {
            name,
            kind,
            labels,
            help,
            workers: Workers::None,
            series: NONE,
            layer: Layer::Continuous,
            if_empty: IfEmpty::Header,
            values,
        }
    }

    /// A family of the exporter's own state.
    pub(crate) const fn probe(
        name: &'static str,
        kind: Kind,
        labels: &'static [&'static str],
        help: &'static str,
        values: fn(&Extras, bool, &mut Sink),
    ) -> Family {
        Family::new(name, kind, labels, help, Values::Probe(values))
    }

    /// A family read from the report.
    pub(crate) const fn report(
        name: &'static str,
        kind: Kind,
        labels: &'static [&'static str],
        help: &'static str,
        values: fn(&Scrape, &mut Sink),
    ) -> Family {
        Family::new(name, kind, labels, help, Values::Report(values))
    }

    /// A per-worker family of every worker ([`Workers::All`]), `series` each.
    pub(crate) const fn worker(
        name: &'static str,
        kind: Kind,
        labels: &'static [&'static str],
        help: &'static str,
        series: Series,
        values: fn(&Scrape, &WorkerReport, &mut Sink),
    ) -> Family {
        let mut f = Family::new(name, kind, labels, help, Values::PerWorker(values));
        f.workers = Workers::All;
        f.series = series;
        f
    }

    /// The same family for `workers` only.
    pub(crate) const fn of(mut self, workers: Workers) -> Family {
        self.workers = workers;
        self
    }

    /// The same family, counted by `layer`.
    pub(crate) const fn layer(mut self, layer: Layer) -> Family {
        self.layer = layer;
        self
    }

    /// The full `# HELP` text: [`Family::help`] and its [`Layer::note`].
    pub fn help_text(&self) -> String {
        with_note(self.help, self.layer)
    }

    /// The same family, left out when it has no sample.
    pub(crate) const fn omit_if_empty(mut self) -> Family {
        self.if_empty = IfEmpty::Omit;
        self
    }
}

/// `help` and the note of `layer`.
pub(crate) fn with_note(help: &str, layer: Layer) -> String {
    format!("{help}{}", layer.note())
}

/// Whether the syscall named `name` is timed (has an entry program).
pub(crate) fn is_timed(name: &str) -> bool {
    SYSCALLS
        .iter()
        .find(|d| d.name == name)
        .is_none_or(|d| d.entry == Entry::Always)
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
    pub(crate) text: String,
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
    pub(crate) worker: Option<(&'a str, &'a str)>,
    headed: bool,
}

impl<'a> Sink<'a> {
    pub(crate) fn new(
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

    pub(crate) fn finish(&mut self) {
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

/// Escapes a label value for the exposition: control characters first as the
/// terminal text does (`\x1b`: a label holds paths and names others control, and
/// `curl /metrics` prints to a terminal), then backslash and double quote as the
/// format wants.
pub(crate) fn escape_label(v: &str) -> String {
    crate::safe::line(v)
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
}
