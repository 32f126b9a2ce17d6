//! `nginx-probe compare BEFORE AFTER`: the change of each metric between two recordings,
//! with a noise estimate from their per-interval values, the verdicts that appeared or
//! went away, and one sentence a person can paste into a ticket. Pure judgement of
//! recordings already read: unit tests feed it reports; reading the files, the text of
//! a comparison and printing it are `cli::compare`'s.

use std::collections::BTreeMap;

use serde::Serialize;

pub use super::compare_noise::{
    judge, spread, steady, Significance, Spread, MIN_INTERVALS, MIN_RELATIVE_CHANGE, NOISE_FACTOR,
};
use crate::{
    model::recording::Recording,
    model::{quantile_ns, Report, WorkerReport},
};

/// Syscalls that wait for events rather than do work (left out of time per request).
const WAITS: [&str; 3] = ["epoll_wait", "epoll_pwait", "epoll_pwait2"];
/// Syscalls that write (write time per request).
const WRITES: [&str; 4] = ["write", "writev", "pwrite64", "pwritev"];
/// Peak fds over the limit below which changes in it are reported as unchanged.
pub const FD_SHARE_THAT_MATTERS: f64 = 0.5;

/// What a metric means, for tables and sentences.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct MetricDef {
    /// Stable key, e.g. `access_log_writes_per_request`.
    pub key: &'static str,
    /// Words for a sentence, e.g. `access-log writes per request`.
    pub label: &'static str,
    /// Unit shown after values (empty for ratios and counts).
    pub unit: &'static str,
}

const fn def(key: &'static str, label: &'static str, unit: &'static str) -> MetricDef {
    MetricDef { key, label, unit }
}

/// The whole-report metrics, in table order (per-syscall ones follow them).
pub const METRICS: &[MetricDef] = &[
    def("requests_per_s", "requests per second", "/s"),
    def("accepts_per_s", "accepts per second", "/s"),
    def("accepts_per_request", "accepts per request", ""),
    def("requests_per_connection", "requests per connection", ""),
    def("syscalls_per_request", "traced syscalls per request", ""),
    def(
        "syscall_us_per_request",
        "worker syscall time per request",
        "us",
    ),
    def(
        "write_us_per_request",
        "worker write time per request",
        "us",
    ),
    def(
        "access_log_writes_per_request",
        "access-log writes per request",
        "",
    ),
    def(
        "access_log_write_us_per_request",
        "access-log write time per request",
        "us",
    ),
    def(
        "error_log_writes_per_request",
        "error-log writes per request",
        "",
    ),
    def(
        "access_log_opens_per_request",
        "access-log opens per request",
        "",
    ),
    def("cpu_us_per_request", "worker CPU per request", "us"),
    def("busy_share_mean", "mean worker busy share", ""),
    def("busiest_accept_share", "busiest worker's accept share", ""),
    def("emfile_per_s", "EMFILE accept failures per second", "/s"),
    def("enfile_per_s", "ENFILE accept failures per second", "/s"),
    def(
        "accepted_then_closed_per_s",
        "connections closed right after accept per second",
        "/s",
    ),
    def(
        "listen_overflows_per_s",
        "listen overflows per second in nginx's network namespace (TcpExt, namespace-wide)",
        "/s",
    ),
    def("request_p99_us", "request p99", "us"),
    def("fd_peak_share", "peak fds over the fd limit", ""),
    def(
        "logged_5xx_share",
        "share of logged requests answered 5xx",
        "",
    ),
    def(
        "logged_4xx_share",
        "share of logged requests answered 4xx (499 apart)",
        "",
    ),
    def(
        "logged_499_share",
        "share of logged requests the client closed first (499)",
        "",
    ),
    def(
        "logged_request_p50_ms",
        "request time p50 ($request_time)",
        "ms",
    ),
    def(
        "logged_request_p99_ms",
        "request time p99 ($request_time)",
        "ms",
    ),
    def(
        "upstream_response_p99_ms",
        "slowest upstream peer's p99 ($upstream_response_time)",
        "ms",
    ),
    def(
        "retried_share",
        "share of logged requests retried on another peer",
        "",
    ),
];

/// Every worker of a report, exited ones and the merged old exited ones included.
fn all_workers(r: &Report) -> impl Iterator<Item = &WorkerReport> {
    r.workers
        .iter()
        .chain(r.exited_merged.as_ref().map(|m| &m.stats))
}

/// The metrics of one report as they are computed: kept only when finite.
#[derive(Default)]
struct MetricMap(BTreeMap<String, f64>);

impl MetricMap {
    fn put(&mut self, k: &str, v: f64) {
        if v.is_finite() {
            self.0.insert(k.to_string(), v);
        }
    }
}

/// What the metrics of one report are computed from.
struct Counts<'a> {
    r: &'a Report,
    /// Every worker ([`all_workers`]).
    ws: Vec<&'a WorkerReport>,
    /// All of nginx's requests (report-level, with their source); None: unknown, and
    /// every per-request metric is absent.
    known: Option<u64>,
    /// `known`, 0 when unknown.
    requests: u64,
    /// The workers' accepts.
    accepts: u64,
    /// False when the accepts the uprobe counted disagree with nginx's own counter:
    /// every metric on them is absent.
    accepts_known: bool,
    /// With --detail sampled, detail figures were counted in the windows only: per
    /// request of the windows' requests (unknown there: 0, absent).
    detail_requests: u64,
}

impl<'a> Counts<'a> {
    fn of(r: &'a Report) -> Counts<'a> {
        let ws: Vec<&WorkerReport> = all_workers(r).collect();
        let known = r.requests.count;
        let requests = known.unwrap_or(0);
        let detail_requests = match &r.detail {
            Some(d) => d.requests_in_windows.unwrap_or(0),
            None => requests,
        };
        Counts {
            accepts: ws.iter().map(|w| w.accepts).sum(),
            accepts_known: crate::model::sampling::accepts_known(r.detail.as_ref()),
            r,
            ws,
            known,
            requests,
            detail_requests,
        }
    }

    /// `f` summed over the workers.
    fn sum(&self, f: impl Fn(&WorkerReport) -> u64) -> u64 {
        self.ws.iter().map(|w| f(w)).sum()
    }

    /// ns in the syscalls `names` selects, over the workers.
    fn syscall_ns(&self, names: impl Fn(&str) -> bool) -> u64 {
        self.sum(|w| {
            w.syscalls
                .iter()
                .filter(|(k, _)| names(k))
                .map(|(_, s)| s.total_ns)
                .sum()
        })
    }
}

/// The metrics of one report (an interval or the summary), by key. Metrics that are
/// undefined for the report (per request with no requests, CPU when unreadable) are
/// absent. Per-syscall metrics are `<syscall>_per_request` and `<syscall>_p99_us`.
pub fn metrics(r: &Report) -> BTreeMap<String, f64> {
    let c = Counts::of(r);
    let mut m = MetricMap::default();
    if r.duration_s > 0.0 {
        rates(&c, &mut m);
    }
    if c.accepts > 0 && c.known.is_some() && c.accepts_known {
        m.put(
            "requests_per_connection",
            c.requests as f64 / c.accepts as f64,
        );
    }
    per_request(&c, &mut m);
    live_worker_shares(&c, &mut m);
    let lifecycle = super::compare_lifecycle::metrics(r, c.known);
    for (k, v) in lifecycle
        .into_iter()
        .chain(super::compare_lifecycle::quic_metrics(r))
    {
        m.put(k, v);
    }
    // What the clients got, from nginx's access log.
    for (k, v) in r.access_log.iter().flat_map(|a| a.compare_metrics()) {
        m.put(k, v);
    }
    let p99s: Vec<u64> = c.ws.iter().filter_map(|w| w.requests.p99_ns).collect();
    if !p99s.is_empty() {
        m.put(
            "request_p99_us",
            *p99s.iter().max().unwrap_or(&0) as f64 / 1e3,
        );
    }
    per_syscall(&c, &mut m);
    m.0
}

/// Per second: requests, accepts, accept errors, connections closed right after
/// accept, accept-queue overflows.
fn rates(c: &Counts, m: &mut MetricMap) {
    let (r, dur) = (c.r, c.r.duration_s);
    if c.known.is_some() {
        m.put("requests_per_s", c.requests as f64 / dur);
    }
    if c.accepts_known {
        m.put("accepts_per_s", c.accepts as f64 / dur);
    }
    // Detail (close_after_accept, and accept errors unless accept4 is traced all
    // the time): per second the detail layer counted.
    let detail_s = crate::model::detail_seconds(dur, r.detail.as_ref());
    let accept4 = nginx_probe_common::sys::ACCEPT4 as usize;
    let errors_s = if crate::model::sampling::counted_all_the_time(accept4, r.detail.as_ref()) {
        dur
    } else {
        detail_s
    };
    let err = |name: &str| c.sum(|w| w.accept_errors.get(name).copied().unwrap_or(0));
    if errors_s > 0.0 {
        m.put("emfile_per_s", err("EMFILE") as f64 / errors_s);
        m.put("enfile_per_s", err("ENFILE") as f64 / errors_s);
    }
    if detail_s > 0.0 {
        m.put(
            "accepted_then_closed_per_s",
            c.sum(|w| w.accepted_then_closed) as f64 / detail_s,
        );
    }
    // Namespace-wide (TcpExt), once: never summed over the listening sockets.
    if let Some(n) = &r.listen_namespace {
        m.put("listen_overflows_per_s", n.overflows as f64 / dur);
    }
}

/// Workers' CPU time per worker (seconds, from `/proc/<pid>/stat`'s clock ticks of
/// 10 ms) below which `cpu_us_per_request` is left out: each worker's figure may be a
/// tick off at either end, so at 0.2 s a worker it is within 10%.
pub const MIN_CPU_S_PER_WORKER: f64 = 0.2;

/// Per request: accepts and CPU (of all requests), traced syscalls, their time, write
/// time and the logs' writes and opens (of the detail layer's requests).
fn per_request(c: &Counts, m: &mut MetricMap) {
    if c.requests > 0 {
        if c.accepts_known {
            m.put("accepts_per_request", c.accepts as f64 / c.requests as f64);
        }
        if c.ws.iter().all(|w| w.cpu_s.is_some()) {
            let cpu: f64 = c.ws.iter().filter_map(|w| w.cpu_s).sum();
            // CPU time comes in clock ticks (10 ms): below MIN_CPU_S_PER_WORKER a
            // worker the figure is mostly rounding (a run that used 0 ticks is not a
            // run that cost nothing), so it is not compared.
            if cpu >= MIN_CPU_S_PER_WORKER * c.ws.len() as f64 {
                m.put("cpu_us_per_request", cpu * 1e6 / c.requests as f64);
            }
        }
    }
    if c.detail_requests == 0 {
        return;
    }
    let per_req = |v: u64| v as f64 / c.detail_requests as f64;
    m.put(
        "syscalls_per_request",
        per_req(c.sum(|w| w.syscalls.values().map(|s| s.count).sum())),
    );
    m.put(
        "syscall_us_per_request",
        per_req(c.syscall_ns(|k| !WAITS.contains(&k))) / 1e3,
    );
    m.put(
        "write_us_per_request",
        per_req(c.syscall_ns(|k| WRITES.contains(&k))) / 1e3,
    );
    let log = |f: &dyn Fn(&crate::model::WritesReport) -> u64| {
        c.sum(|w| w.writes.get("access_log").map(f).unwrap_or(0))
    };
    m.put("access_log_writes_per_request", per_req(log(&|x| x.count)));
    m.put(
        "access_log_write_us_per_request",
        per_req(log(&|x| x.total_ns)) / 1e3,
    );
    m.put(
        "error_log_writes_per_request",
        per_req(c.sum(|w| w.writes.get("error_log").map(|x| x.count).unwrap_or(0))),
    );
    // Counted only where writes are classified in the kernel (not in old
    // recordings): compared only when every worker has it.
    if c.ws.iter().all(|w| w.access_log_opens.is_some()) {
        m.put(
            "access_log_opens_per_request",
            per_req(c.sum(|w| w.access_log_opens.unwrap_or(0))),
        );
    }
}

/// Among the live workers: mean busy share, the busiest worker's accept share, the
/// highest peak of fds over the fd limit.
fn live_worker_shares(c: &Counts, m: &mut MetricMap) {
    let live: Vec<&&WorkerReport> = c.ws.iter().filter(|w| w.alive).collect();
    if live.is_empty() {
        return;
    }
    // Measured only where the detail layer counted: a sampled interval with no
    // window has none, not 0 (trial 18: "0±0 (n=10)" for busy workers); nor is it
    // the period's when its windows held none of the period's requests (trial 19: idle
    // windows beside a loaded period).
    let windows_missed_the_load = c.r.detail.as_ref().is_some_and(|d| {
        d.requests_in_windows == Some(0) && d.requests_total.is_some_and(|t| t > 0)
    });
    if crate::model::detail_seconds(c.r.duration_s, c.r.detail.as_ref()) > 0.0
        && !windows_missed_the_load
    {
        m.put(
            "busy_share_mean",
            live.iter().map(|w| w.event_loop.busy_share).sum::<f64>() / live.len() as f64,
        );
    }
    // Shares among the live workers: workers that exited in the period (a reload)
    // took accepts too, and would halve every share of a period with one reload.
    let live_accepts: u64 = live.iter().map(|w| w.accepts).sum();
    if live_accepts > 0 && c.accepts_known {
        m.put(
            "busiest_accept_share",
            live.iter().map(|w| w.accepts).max().unwrap_or(0) as f64 / live_accepts as f64,
        );
    }
    let shares: Vec<f64> = live
        .iter()
        .filter_map(|w| match (w.fds.peak, w.fds.limit) {
            (Some(p), Some(l)) if l > 0 => Some(p as f64 / l as f64),
            _ => None,
        })
        .collect();
    if !shares.is_empty() {
        m.put("fd_peak_share", shares.iter().copied().fold(0.0, f64::max));
    }
}

/// Per syscall: calls per request and p99 over all workers (summed histograms).
fn per_syscall(c: &Counts, m: &mut MetricMap) {
    let mut names: Vec<&String> = c.ws.iter().flat_map(|w| w.syscalls.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        let calls: u64 = c.sum(|w| w.syscalls.get(name).map(|s| s.count).unwrap_or(0));
        if calls == 0 {
            continue;
        }
        // Rare syscalls (accepts) may count all the time, the rest in detail windows
        // only.
        let rare = nginx_probe_common::SYSCALLS
            .iter()
            .position(|d| d.name == name)
            .is_some_and(|i| crate::model::sampling::counted_all_the_time(i, c.r.detail.as_ref()));
        let denominator = if rare { c.requests } else { c.detail_requests };
        if denominator > 0 {
            m.put(
                &format!("{name}_per_request"),
                calls as f64 / denominator as f64,
            );
        }
        let (hist, max_ns) = summed_histogram(c, name);
        if hist.iter().any(|&c| c > 0) {
            m.put(
                &format!("{name}_p99_us"),
                quantile_ns(&hist, 0.99, max_ns) as f64 / 1e3,
            );
        }
    }
}

/// Syscall `name`'s log2 latency histogram (ns) summed over the workers, and its max.
fn summed_histogram(c: &Counts, name: &str) -> (Vec<u64>, u64) {
    let mut hist: Vec<u64> = Vec::new();
    let mut max_ns = 0;
    for s in c.ws.iter().filter_map(|w| w.syscalls.get(name)) {
        if hist.len() < s.hist_log2_ns.len() {
            hist.resize(s.hist_log2_ns.len(), 0);
        }
        for (a, b) in hist.iter_mut().zip(&s.hist_log2_ns) {
            *a += b;
        }
        max_ns = max_ns.max(s.max_ns);
    }
    (hist, max_ns)
}

/// The definition of a metric key (per-syscall keys get a generated one).
pub fn metric_def(key: &str) -> (String, String) {
    if let Some(d) = all_defs().find(|d| d.key == key) {
        return (d.label.to_string(), d.unit.to_string());
    }
    if let Some(sc) = key.strip_suffix("_per_request") {
        return (format!("{sc} calls per request"), String::new());
    }
    if let Some(sc) = key.strip_suffix("_p99_us") {
        return (format!("{sc} p99"), "us".into());
    }
    (key.to_string(), String::new())
}

/// One metric's change.
#[derive(Clone, Debug, Serialize)]
pub struct MetricChange {
    /// Stable key ([`METRICS`], or `<syscall>_per_request` / `<syscall>_p99_us`).
    pub key: String,
    /// Words for a sentence ([`metric_def`]).
    pub label: String,
    /// Unit shown after values (`/s`, `us`, `ms`; empty for ratios and counts).
    pub unit: String,
    /// BEFORE's whole-run value: its summary's, the median of its intervals for a
    /// cut-short recording, the median of its runs' with several; None when undefined
    /// there (see [`metrics`]).
    pub before: Option<f64>,
    /// AFTER's whole-run value, likewise.
    pub after: Option<f64>,
    /// (after - before) / before; None when before is 0 or either is missing.
    pub relative: Option<f64>,
    /// BEFORE's median and spread over its intervals (or runs: [`NoiseSource`]).
    pub before_intervals: Option<Spread>,
    /// AFTER's likewise.
    pub after_intervals: Option<Spread>,
    /// Whether the change is beyond the noise ([`judge`]'s verdict).
    pub significance: Significance,
}

/// The verdicts of two runs side by side.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct VerdictChanges {
    /// In AFTER only.
    pub appeared: Vec<String>,
    /// In BEFORE only.
    pub went_away: Vec<String>,
    /// In both.
    pub remained: Vec<String>,
}

/// The comparison of two recordings.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// The JSON schema version ([`crate::model::SCHEMA_VERSION`]).
    pub schema: u32,
    /// Always `comparison` (JSON `type`).
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// BEFORE's file, or its files and how many runs.
    pub before: String,
    /// AFTER's likewise.
    pub after: String,
    /// Whether the noise (the `*_intervals` spreads) comes from intervals or runs.
    pub noise_from: NoiseSource,
    /// Every metric either side has: [`METRICS`] in table order, then per-syscall ones.
    pub metrics: Vec<MetricChange>,
    /// Verdict ids that appeared, went away or remained.
    pub verdicts: VerdictChanges,
    /// Things that make the two runs less comparable (different hosts, syscalls, a cut
    /// short recording).
    pub caveats: Vec<String>,
    /// The ticket sentence.
    pub sentence: String,
}

/// Formats a value for a sentence or table: 3 significant digits, at most 2 decimals
/// for small numbers.
pub fn fmt_value(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 0.01 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

/// Compares two recordings. `before_name`/`after_name` label them (file names).
pub fn compare(
    before_name: &str,
    before: &Recording,
    after_name: &str,
    after: &Recording,
) -> Comparison {
    compare_runs(&[(before_name, before)], &[(after_name, after)])
}

/// Where the noise estimate of a comparison comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NoiseSource {
    /// One recording a side: the spread of its interval values.
    Intervals,
    /// Several recordings (runs) a side: the spread of the runs' whole-run values.
    Runs,
}

/// One side of a comparison: its whole-run values, the values its noise is estimated
/// from (intervals of one recording, or whole-run values of several), and its verdicts.
struct Side {
    /// Whether `whole` holds the medians of one cut-short recording's intervals.
    cut_short: bool,
    whole: BTreeMap<String, f64>,
    series: BTreeMap<String, Vec<f64>>,
    verdicts: Vec<String>,
}

/// A recording's whole-run values: the summary's, or for a cut-short recording the
/// medians of its intervals (its last interval alone is one second of the run).
fn whole_of(rec: &Recording) -> BTreeMap<String, f64> {
    match &rec.summary {
        Some(s) => metrics(s),
        None => interval_series(rec)
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), spread(v)?.median)))
            .collect(),
    }
}

/// Each metric's values over a recording's intervals, its last partial interval left
/// out when shorter than half the intervals' median length (a run's tail, which adds
/// up to the summary but whose rates over milliseconds are no sample of the noise).
fn interval_series(rec: &Recording) -> BTreeMap<String, Vec<f64>> {
    let mut s: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let lengths: Vec<f64> = rec.intervals.iter().map(|r| r.duration_s).collect();
    let typical = spread(&lengths).map_or(0.0, |l| l.median);
    let keep = match rec.intervals.last() {
        Some(last) if rec.intervals.len() > 1 && last.duration_s < 0.5 * typical => {
            rec.intervals.len() - 1
        }
        _ => rec.intervals.len(),
    };
    for r in &rec.intervals[..keep] {
        for (k, v) in metrics(r) {
            s.entry(k).or_default().push(v);
        }
    }
    s
}

/// The summary's verdicts, or those of any interval of a cut-short recording.
fn verdict_ids(rec: &Recording) -> Vec<String> {
    let reports: Vec<&Report> = match &rec.summary {
        Some(s) => vec![s],
        None => rec.intervals.iter().collect(),
    };
    let mut v: Vec<String> = reports
        .iter()
        .flat_map(|r| r.verdicts.iter().map(|v| v.id.clone()))
        .collect();
    v.sort();
    v.dedup();
    v
}

fn side(recs: &[(&str, &Recording)]) -> Side {
    if let [(_, rec)] = recs {
        return Side {
            cut_short: rec.summary.is_none(),
            whole: whole_of(rec),
            series: interval_series(rec),
            verdicts: verdict_ids(rec),
        };
    }
    // Several runs: each run is one value; a verdict counts when more than half the
    // runs have it.
    let mut series: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (_, rec) in recs {
        for (k, v) in whole_of(rec) {
            series.entry(k).or_default().push(v);
        }
    }
    let whole = series
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), spread(v)?.median)))
        .collect();
    let all: Vec<Vec<String>> = recs.iter().map(|(_, r)| verdict_ids(r)).collect();
    let mut verdicts: Vec<String> = all
        .iter()
        .flatten()
        .filter(|id| all.iter().filter(|v| v.contains(id)).count() * 2 > recs.len())
        .cloned()
        .collect();
    verdicts.sort();
    verdicts.dedup();
    Side {
        cut_short: false,
        whole,
        series,
        verdicts,
    }
}

/// A side's label: its file, or its files and how many runs.
fn side_name(recs: &[(&str, &Recording)]) -> String {
    match recs {
        [(name, _)] => name.to_string(),
        _ => format!(
            "{} ({} runs)",
            recs.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "),
            recs.len()
        ),
    }
}

/// Compares the runs of one setup with the runs of another. With one recording a side
/// the noise comes from their intervals; with several (repeated runs of each config)
/// from the spread of the runs' whole-run values, the honest noise of an A/B test, and
/// a verdict counts on a side when more than half its runs have it.
pub fn compare_runs(before: &[(&str, &Recording)], after: &[(&str, &Recording)]) -> Comparison {
    let before_name = side_name(before);
    let after_name = side_name(after);
    let noise_from = if before.len() > 1 || after.len() > 1 {
        NoiseSource::Runs
    } else {
        NoiseSource::Intervals
    };
    // One file is itself on both sides unless --master chose another master in it.
    let pid = |r: &&Recording| r.whole_run().0.master_pid;
    let same = before_name == after_name
        && before
            .iter()
            .zip(after)
            .all(|((_, b), (_, a))| pid(b) == pid(a));
    let caveats = caveats(before, after, same);
    let (b, a) = (side(before), side(after));
    let metrics: Vec<MetricChange> = metric_keys(&b.whole, &a.whole)
        .into_iter()
        .map(|key| metric_change(key, &b, &a))
        .collect();
    let (vb, va) = (&b.verdicts, &a.verdicts);
    let verdicts = VerdictChanges {
        appeared: va.iter().filter(|v| !vb.contains(v)).cloned().collect(),
        went_away: vb.iter().filter(|v| !va.contains(v)).cloned().collect(),
        remained: vb.iter().filter(|v| va.contains(v)).cloned().collect(),
    };
    let sentence = sentence(&metrics, &verdicts);
    Comparison {
        schema: crate::model::SCHEMA_VERSION,
        kind: "comparison",
        before: before_name,
        after: after_name,
        noise_from,
        metrics,
        verdicts,
        caveats,
        sentence,
    }
}

/// What makes the runs less comparable: a side compared with itself (`same`), a run cut
/// short, different hosts, kernels, nginx versions or traced syscalls.
fn caveats(before: &[(&str, &Recording)], after: &[(&str, &Recording)], same: bool) -> Vec<String> {
    let mut caveats: Vec<String> = Vec::new();
    if same {
        caveats.push(format!(
            "{} is compared with itself: nothing can have changed",
            side_name(before)
        ));
    }
    let mut seen_cut = Vec::new();
    for (name, rec) in before.iter().chain(after) {
        if rec.summary.is_none() && !seen_cut.contains(name) {
            seen_cut.push(*name);
            caveats.push(format!(
                "{name} has no summary (the run was cut short): its whole-run values are the medians of its {} intervals, its verdicts those of any interval",
                rec.intervals.len()
            ));
        }
    }
    let headers: Vec<_> = before
        .iter()
        .chain(after)
        .filter_map(|(_, r)| r.header.as_ref())
        .collect();
    if let Some(h0) = headers.first() {
        if let Some(h) = headers
            .iter()
            .find(|h| h.host != h0.host || h.kernel != h0.kernel)
        {
            caveats.push(format!(
                "recorded on different machines: {} ({}) and {} ({})",
                h0.host, h0.kernel, h.host, h.kernel
            ));
        }
    }
    let runs: Vec<(&str, &Recording)> = before.iter().chain(after).copied().collect();
    caveats.extend(super::compare_setup::setup_caveats(&runs));
    // With one recording a side the noise is its intervals'.
    if before.len() == 1 && after.len() == 1 && !same {
        for (name, rec) in &runs {
            caveats.extend(super::compare_setup::few_intervals(name, rec));
        }
    }
    let traced: Vec<Vec<String>> = before
        .iter()
        .chain(after)
        .map(|(_, r)| r.whole_run().0.traced_syscalls.clone())
        .collect();
    if let Some(t) = traced.iter().find(|t| **t != traced[0]) {
        caveats.push(format!(
            "different syscalls traced ({} and {}): per-request totals cover different sets",
            traced[0].join(","),
            t.join(",")
        ));
    }
    caveats
}

/// The keys either side has: [`METRICS`] in table order, then the per-syscall ones
/// sorted.
fn metric_keys(mb: &BTreeMap<String, f64>, ma: &BTreeMap<String, f64>) -> Vec<String> {
    let mut keys: Vec<String> = all_defs()
        .map(|d| d.key.to_string())
        .filter(|k| mb.contains_key(k) || ma.contains_key(k))
        .collect();
    let mut extra: Vec<String> = mb
        .keys()
        .chain(ma.keys())
        .filter(|k| !all_defs().any(|d| d.key == k.as_str()))
        .cloned()
        .collect();
    extra.sort();
    extra.dedup();
    keys.extend(extra);
    keys
}

/// How metric `key` moved from side `b` to side `a`, and whether beyond their noise.
fn metric_change(key: String, b: &Side, a: &Side) -> MetricChange {
    let before = b.whole.get(&key).copied();
    let after = a.whole.get(&key).copied();
    let relative = match (before, after) {
        (Some(b), Some(a)) if b != 0.0 => Some((a - b) / b),
        (Some(b), Some(a)) if b == 0.0 && a == 0.0 => Some(0.0),
        _ => None,
    };
    let bi = b.series.get(&key).and_then(|v| spread(v));
    let ai = a.series.get(&key).and_then(|v| spread(v));
    let (label, unit) = metric_def(&key);
    // fd headroom only matters near the limit: 28 vs 30 fds of 20000 is no change.
    let far_from_limit = key == "fd_peak_share"
        && before.unwrap_or(0.0).max(after.unwrap_or(0.0)) < FD_SHARE_THAT_MATTERS;
    // A side whose run value lies outside its intervals' middle half had no steady
    // load: its intervals say nothing of the noise (trial 17: "0±0 (n=5)" for a run
    // of 156/s, every request in one interval).
    // A cut-short recording's whole-run value is its intervals' median, steady by
    // construction: their mean is tried instead (its "requests per second 0" hid 3900
    // requests).
    let unsteady = |side: &Side, whole: Option<f64>| match (whole, side.series.get(&key)) {
        (Some(_), Some(xs)) if side.cut_short && !xs.is_empty() => {
            !steady(xs.iter().sum::<f64>() / xs.len() as f64, xs)
        }
        (Some(w), Some(xs)) => !steady(w, xs),
        _ => false,
    };
    let significance = match judge(bi, ai, relative) {
        _ if far_from_limit => Significance::FarFromLimit,
        Significance::BeyondNoise | Significance::WithinNoise
            if unsteady(b, before) || unsteady(a, after) =>
        {
            Significance::Unsteady
        }
        j => j,
    };
    MetricChange {
        significance,
        key,
        label,
        unit,
        before,
        after,
        relative,
        before_intervals: bi,
        after_intervals: ai,
    }
}

/// Most report-level changes named in the sentence.
const SENTENCE_CHANGES: usize = 3;
/// Most single-syscall calls-per-request changes named after them.
const SENTENCE_SYSCALL_CHANGES: usize = 2;

/// Whether `m` is a whole-report metric (one of [`METRICS`]), not a per-syscall one.
fn is_core(m: &MetricChange) -> bool {
    all_defs().any(|d| d.key == m.key)
}

/// [`METRICS`], then the connection lifecycle's (`compare_lifecycle::METRICS`, then
/// its `QUIC_METRICS`).
fn all_defs() -> impl Iterator<Item = MetricDef> {
    let lifecycle = super::compare_lifecycle::METRICS
        .iter()
        .chain(super::compare_lifecycle::QUIC_METRICS);
    METRICS
        .iter()
        .copied()
        .chain(lifecycle.map(|&(k, l, u)| def(k, l, u)))
}

/// The changes the sentence names: the largest report-level changes (what a ticket is
/// about), then the largest changes in calls per request of single syscalls (a syscall
/// that appeared or went away explains them).
fn sentence_movers(metrics: &[MetricChange]) -> Vec<&MetricChange> {
    let mut movers: Vec<&MetricChange> = metrics
        .iter()
        .filter(|m| {
            matches!(
                m.significance,
                Significance::BeyondNoise | Significance::NoiseUnknown | Significance::Unsteady
            ) && m.relative.is_some_and(|r| r.abs() >= MIN_RELATIVE_CHANGE)
        })
        .collect();
    // Sizes compared as factors (|ln(after/before)|: 1.00 -> 0.01 is a bigger move than
    // 38 -> 169).
    let factor = |m: &MetricChange| {
        let (b, a) = (m.before.unwrap_or(0.0).abs(), m.after.unwrap_or(0.0).abs());
        if b == 0.0 || a == 0.0 {
            f64::INFINITY
        } else {
            (a / b).ln().abs()
        }
    };
    // Throughput leads when it moved; then the largest other changes.
    movers.sort_by(|a, b| {
        (b.key == "requests_per_s")
            .cmp(&(a.key == "requests_per_s"))
            .then(factor(b).total_cmp(&factor(a)))
    });
    // (requests per connection is accepts per request upside down: the table has it.)
    let chosen_core: Vec<&MetricChange> = movers
        .iter()
        .filter(|m| is_core(m) && m.key != "requests_per_connection")
        .take(SENTENCE_CHANGES)
        .copied()
        .collect();
    // A syscall's calls per request that restate a chosen metric add nothing.
    let restates = |m: &MetricChange| {
        let said = |k: &str| chosen_core.iter().any(|c| c.key == k);
        match m.key.as_str() {
            "accept4_per_request" | "accept_per_request" => said("accepts_per_request"),
            "write_per_request" | "writev_per_request" | "pwrite64_per_request" => {
                said("access_log_writes_per_request")
            }
            _ => false,
        }
    };
    chosen_core
        .iter()
        .copied()
        .chain(
            movers
                .iter()
                .filter(|m| !is_core(m) && m.key.ends_with("_per_request") && !restates(m))
                .take(SENTENCE_SYSCALL_CHANGES)
                .copied(),
        )
        .collect()
}

/// One change in words: `accepts per request fell from 1.00 to 0.01 (-99%)`.
fn change_words(m: &MetricChange) -> String {
    let (b, a, r) = (
        m.before.unwrap_or(0.0),
        m.after.unwrap_or(0.0),
        m.relative.unwrap_or(0.0),
    );
    let dir = if r < 0.0 { "fell" } else { "rose" };
    let unit = if m.unit.is_empty() || m.unit == "/s" {
        m.unit.clone()
    } else {
        format!(" {}", m.unit)
    };
    let noise = match m.significance {
        Significance::NoiseUnknown => ", noise unknown",
        Significance::Unsteady => ", load not steady: noise unknown",
        _ => "",
    };
    // Past tenfold, a factor reads better than a percentage.
    let change = if r >= 9.0 {
        format!("x{}", fmt_value(r + 1.0))
    } else {
        format!("{:+.0}%", r * 100.0)
    };
    format!(
        "{} {dir} from {}{unit} to {}{unit} ({change}{noise})",
        m.label,
        fmt_value(b),
        fmt_value(a),
    )
}

/// The ticket sentence: the largest changes beyond noise (or, without interval data,
/// the largest changes, flagged as such), then the verdicts that went away or
/// appeared.
pub fn sentence(metrics: &[MetricChange], verdicts: &VerdictChanges) -> String {
    let mut parts: Vec<String> = sentence_movers(metrics)
        .into_iter()
        .map(change_words)
        .collect();
    for v in &verdicts.went_away {
        parts.push(format!("verdict {v} went away"));
    }
    for v in &verdicts.appeared {
        parts.push(format!("verdict {v} appeared"));
    }
    if parts.is_empty() {
        return "No metric moved beyond the noise of the intervals, and the verdicts are the same."
            .into();
    }
    let mut s = parts.join("; ");
    if let Some(c) = s.get(0..1) {
        s = c.to_uppercase() + &s[1..];
    }
    s + "."
}

#[cfg(test)]
#[path = "compare_tests.rs"]
mod tests;
