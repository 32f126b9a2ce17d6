//! Prometheus metrics: `--listen ADDR` serves `/metrics` in the Prometheus text
//! exposition format (version 0.0.4).
//!
//! The text is [`render`]ed by a pure function from a "since attach" [`Report`] (the
//! same one the summary is made of), so every number on `/metrics` is a number of the
//! JSON summary. The HTTP side ([`Endpoint`]) never touches the tracker: each scrape
//! sends a [`Scrape`] (a oneshot for the reply) over a channel that the main loop serves
//! between its other work, so each scrape reads fresh kernel counters and the tracker
//! stays on one thread.
//!
//! Labels: workers are named by `worker` (their slot in the kernel maps) and
//! `generation` (how many workers held that slot before), never by pid: pids churn with
//! every reload and would grow the series without bound. Pids are only in
//! `nginx_probe_worker_info`. Exited workers merged into the report's `exited_merged`
//! are `worker="exited",generation="merged"`. See [`series_per_worker`] for the bound.

use std::{fmt::Write as _, net::SocketAddr, time::Duration};

use axum::{
    extract::State,
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    routing::get,
    Router,
};
use log::warn;
use nginx_probe_common::{ERR_CLASS_NAMES, FD_KIND_NAMES};
use tokio::sync::{mpsc, oneshot};

use crate::{
    error::ProbeError,
    model::{bucket_bounds, Report, WorkerReport},
};

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
/// Finite `le` bounds of every `nginx_probe_syscall_duration_seconds` histogram (26).
pub const LE_BOUNDS: usize = LAST_LE_BUCKET - FIRST_LE_BUCKET + 1;

/// Series of one live worker with `syscalls` traced syscalls (9 with the default
/// `--syscalls core`, 14 with `all`): 31 + 31 per syscall, so 310 and 465.
///
/// Per worker: `worker_info` 1, `accepts_total` 1, `accept_errors_total` 6 (errno
/// classes), `requests_total` 1, `writes_total`/`write_bytes_total`/
/// `write_seconds_total` 5 destinations each, `event_loop_iterations_total` 1,
/// `event_loop_busy_seconds_total` 1, `cpu_seconds_total` 1,
/// `accepted_then_closed_total` 1, `open_fds`/`open_fds_peak`/`fd_limit` 3; per traced
/// syscall: `syscalls_total` 1, `syscall_errors_total` 1, and the latency histogram
/// [`LE_BOUNDS`] + 1 (`+Inf`) buckets, `_sum` and `_count`. An exited worker loses the
/// 3 fd gauges; the merged exited workers also have no `worker_info`.
pub const fn series_per_worker(syscalls: usize) -> usize {
    1 + 1
        + ERR_CLASS_NAMES.len()
        + 1
        + 3 * FD_KIND_NAMES.len()
        + 2
        + 1
        + 1
        + 3
        + syscalls * (2 + LE_BOUNDS + 1 + 2)
}

/// Renders `report` (cumulative since attach: the run's summary so far) as Prometheus
/// text. Pure: the same report gives the same text.
pub fn render(report: &Report) -> String {
    // About 100 bytes a line.
    let lines = (report.workers.len() + 1) * series_per_worker(report.traced_syscalls.len());
    let mut out = Exposition {
        text: String::with_capacity(lines * 100 + 8192),
    };
    let mut workers: Vec<(String, String, &WorkerReport)> = report
        .workers
        .iter()
        .map(|w| (w.slot.to_string(), w.generation.to_string(), w))
        .collect();
    workers.sort_by_key(|(_, _, w)| (w.slot, w.generation));
    if let Some(m) = &report.exited_merged {
        workers.push(("exited".into(), "merged".into(), &m.stats));
    }
    let is_merged = |wk: &str| wk == "exited";

    // Scrape metadata.
    out.family(
        "nginx_probe_build_info",
        "gauge",
        "nginx-probe build: always 1, the version in a label.",
    );
    out.sample(
        "nginx_probe_build_info",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1,
    );
    out.family(
        "nginx_probe_master_pid",
        "gauge",
        "Host pid of the nginx master being traced.",
    );
    out.sample("nginx_probe_master_pid", &[], report.master_pid);
    out.family(
        "nginx_probe_start_time_seconds",
        "gauge",
        "When nginx-probe attached, seconds since the Unix epoch: every counter counts from there.",
    );
    out.sample(
        "nginx_probe_start_time_seconds",
        &[],
        crate::model::round3(report.time_unix_s - report.duration_s),
    );
    out.family(
        "nginx_probe_exited_workers_merged",
        "gauge",
        "Exited workers whose numbers are summed under worker=\"exited\" (the oldest beyond the 16 most recent exits).",
    );
    out.sample(
        "nginx_probe_exited_workers_merged",
        &[],
        report
            .exited_merged
            .as_ref()
            .map(|m| m.workers)
            .unwrap_or(0),
    );

    // Workers.
    out.family(
        "nginx_probe_worker_info",
        "gauge",
        "Always 1: the host pid of worker (slot, generation), and whether it is alive.",
    );
    for (wk, gen, w) in workers.iter().filter(|(wk, _, _)| !is_merged(wk)) {
        let pid = w.pid.to_string();
        let alive = w.alive.to_string();
        out.sample(
            "nginx_probe_worker_info",
            &[
                ("worker", wk),
                ("generation", gen),
                ("pid", &pid),
                ("alive", &alive),
            ],
            1,
        );
    }
    let per_worker = |out: &mut Exposition,
                      name: &str,
                      kind: &str,
                      help: &str,
                      value: &dyn Fn(&WorkerReport) -> Option<Value>| {
        out.family(name, kind, help);
        for (wk, gen, w) in &workers {
            if let Some(v) = value(w) {
                out.sample(name, &[("worker", wk), ("generation", gen)], v);
            }
        }
    };
    per_worker(
        &mut out,
        "nginx_probe_accepts_total",
        "counter",
        "Successful accept4/accept returns in the worker (syscalls:sys_exit_accept4, sys_exit_accept).",
        &|w| Some(Value::U(w.accepts)),
    );
    out.family(
        "nginx_probe_accept_errors_total",
        "counter",
        "Failed accept4/accept calls by errno class (EAGAIN: accept queue empty, not a failure).",
    );
    for (wk, gen, w) in &workers {
        for errno in ERR_CLASS_NAMES {
            let n = w.accept_errors.get(errno).copied().unwrap_or(0);
            out.sample(
                "nginx_probe_accept_errors_total",
                &[("worker", wk), ("generation", gen), ("errno", errno)],
                n,
            );
        }
    }
    out.family(
        "nginx_probe_requests_total",
        "counter",
        "HTTP requests: exact with --uprobes (source=\"uprobe\"), else successful writev calls (source=\"writev_estimate\").",
    );
    for (wk, gen, w) in &workers {
        let source = match w.requests.source {
            crate::model::RequestSource::Uprobe => "uprobe",
            crate::model::RequestSource::WritevEstimate => "writev_estimate",
        };
        out.sample(
            "nginx_probe_requests_total",
            &[("worker", wk), ("generation", gen), ("source", source)],
            w.requests.count,
        );
    }
    out.family(
        "nginx_probe_syscalls_total",
        "counter",
        "Syscall exits of the worker (successes and errors), per traced syscall (syscalls:sys_exit_*).",
    );
    for (wk, gen, w) in &workers {
        for (name, s) in &w.syscalls {
            out.sample(
                "nginx_probe_syscalls_total",
                &[("worker", wk), ("generation", gen), ("syscall", name)],
                s.count,
            );
        }
    }
    out.family(
        "nginx_probe_syscall_errors_total",
        "counter",
        "Syscall exits with a negative return (EAGAIN included), per traced syscall.",
    );
    for (wk, gen, w) in &workers {
        for (name, s) in &w.syscalls {
            out.sample(
                "nginx_probe_syscall_errors_total",
                &[("worker", wk), ("generation", gen), ("syscall", name)],
                s.errors,
            );
        }
    }
    let hist = "nginx_probe_syscall_duration_seconds";
    out.family(
        hist,
        "histogram",
        "Syscall latency from sys_enter to sys_exit, seconds, from the in-kernel log2 ns histogram (calls in flight at attach are counted in syscalls_total, not here).",
    );
    for (wk, gen, w) in &workers {
        for (name, s) in &w.syscalls {
            let labels = [
                ("worker", wk.as_str()),
                ("generation", gen),
                ("syscall", name),
            ];
            // Kernel bucket b holds [2^b, 2^(b+1) - 1] ns (b = 0: [0, 1]): the count at
            // or below its upper bound is the sum of buckets 0..=b, exactly.
            for b in FIRST_LE_BUCKET..=LAST_LE_BUCKET {
                let at_or_below: u64 = s.hist_log2_ns.iter().take(b + 1).sum();
                let le = secs(bucket_bounds(b).1).to_string();
                out.bucket(hist, &labels, &le, at_or_below);
            }
            let cumulative: u64 = s.hist_log2_ns.iter().sum();
            out.bucket(hist, &labels, "+Inf", cumulative);
            out.sample(&format!("{hist}_sum"), &labels, Value::F(secs(s.total_ns)));
            out.sample(&format!("{hist}_count"), &labels, cumulative);
        }
    }
    for (name, help) in [
        (
            "nginx_probe_writes_total",
            "write/writev/pwrite64 calls by destination (access_log, error_log, file, socket, other; fds classified from /proc every 2 s).",
        ),
        (
            "nginx_probe_write_bytes_total",
            "Bytes written by write/writev/pwrite64, by destination.",
        ),
        (
            "nginx_probe_write_seconds_total",
            "Time spent in write/writev/pwrite64, seconds, by destination.",
        ),
    ] {
        out.family(name, "counter", help);
        for (wk, gen, w) in &workers {
            for dest in FD_KIND_NAMES {
                let d = w.writes.get(dest).cloned().unwrap_or_default();
                let v = match name {
                    "nginx_probe_writes_total" => Value::U(d.count),
                    "nginx_probe_write_bytes_total" => Value::U(d.bytes),
                    _ => Value::F(secs(d.total_ns)),
                };
                out.sample(
                    name,
                    &[("worker", wk), ("generation", gen), ("destination", dest)],
                    v,
                );
            }
        }
    }
    per_worker(
        &mut out,
        "nginx_probe_event_loop_iterations_total",
        "counter",
        "Event-loop iterations of the worker's main thread: from an epoll wait's return to the next epoll wait call.",
        &|w| Some(Value::U(w.event_loop.iterations)),
    );
    per_worker(
        &mut out,
        "nginx_probe_event_loop_busy_seconds_total",
        "counter",
        "Time the worker's main thread spent outside epoll waits, seconds.",
        &|w| Some(Value::F(secs(w.event_loop.busy_ns))),
    );
    per_worker(
        &mut out,
        "nginx_probe_cpu_seconds_total",
        "counter",
        "CPU time (user + system) of the worker since attach, seconds (/proc/<pid>/stat, sampled every 500 ms).",
        &|w| w.cpu_s.map(Value::F),
    );
    per_worker(
        &mut out,
        "nginx_probe_accepted_then_closed_total",
        "counter",
        "Connections the worker closed right after accepting them (nginx's worker_connections-are-not-enough path).",
        &|w| Some(Value::U(w.accepted_then_closed)),
    );
    per_worker(
        &mut out,
        "nginx_probe_open_fds",
        "gauge",
        "Open file descriptors of a live worker at the last 500 ms sample (/proc/<pid>/fd).",
        &|w| w.fds.open.filter(|_| w.alive).map(Value::U),
    );
    per_worker(
        &mut out,
        "nginx_probe_open_fds_peak",
        "gauge",
        "Most open file descriptors seen at any 500 ms sample since attach, live workers.",
        &|w| w.fds.peak.filter(|_| w.alive).map(Value::U),
    );
    per_worker(
        &mut out,
        "nginx_probe_fd_limit",
        "gauge",
        "Soft open-files limit in force for a live worker (/proc/<pid>/limits).",
        &|w| w.fds.limit.filter(|_| w.alive).map(Value::U),
    );

    // Listening sockets.
    for (name, help) in [
        (
            "nginx_probe_listen_backlog",
            "Backlog in force of an nginx listening socket (sock_diag).",
        ),
        (
            "nginx_probe_listen_queue",
            "Connections waiting in the accept queue at the last 500 ms sample.",
        ),
        (
            "nginx_probe_listen_queue_peak",
            "Most connections seen waiting in the accept queue at any 500 ms sample since attach.",
        ),
    ] {
        out.family(name, "gauge", help);
        for l in &report.listen {
            let v = match name {
                "nginx_probe_listen_backlog" => l.backlog,
                "nginx_probe_listen_queue" => l.queue_now,
                _ => l.queue_max,
            };
            out.sample(name, &[("addr", &l.addr)], v);
        }
    }
    // Overflows and drops are counted per network namespace by the kernel, not per
    // socket: one series each, without an addr label that would suggest otherwise (and
    // multiply the value when summed over sockets).
    if let Some(l) = report.listen.first() {
        out.family(
            "nginx_probe_listen_overflows_total",
            "counter",
            "Listen queue overflows in nginx's network namespace since attach (TcpExt ListenOverflows: namespace-wide, not only nginx).",
        );
        out.sample("nginx_probe_listen_overflows_total", &[], l.overflows);
        out.family(
            "nginx_probe_listen_drops_total",
            "counter",
            "Listen drops in nginx's network namespace since attach (TcpExt ListenDrops: namespace-wide).",
        );
        out.sample("nginx_probe_listen_drops_total", &[], l.drops);
    }
    // What each of nginx's own sockets dropped is known exactly (sk_drops).
    if report.listen.iter().any(|l| l.socket_drops.is_some()) {
        out.family(
            "nginx_probe_listen_socket_drops_total",
            "counter",
            "Connections an nginx listening socket dropped since attach, a full accept queue among them (sock_diag SK_MEMINFO_DROPS of the socket).",
        );
        for l in &report.listen {
            if let Some(n) = l.socket_drops {
                out.sample(
                    "nginx_probe_listen_socket_drops_total",
                    &[("addr", &l.addr)],
                    n,
                );
            }
        }
    }

    // Accounting and findings.
    out.family(
        "nginx_probe_drops_total",
        "counter",
        "Events nginx-probe could not fully account, by reason (see the README's drops).",
    );
    for (reason, n) in &report.drops {
        out.sample("nginx_probe_drops_total", &[("reason", reason)], *n);
    }
    out.family(
        "nginx_probe_verdict",
        "gauge",
        "1 for each finding active over the run so far (see the README's Verdicts).",
    );
    for v in &report.verdicts {
        let severity = match v.severity {
            crate::verdict::Severity::Warning => "warning",
            crate::verdict::Severity::Critical => "critical",
        };
        out.sample(
            "nginx_probe_verdict",
            &[("id", &v.id), ("severity", severity)],
            1,
        );
    }
    out.text
}

/// ns as seconds.
fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// A sample value: integers print exactly, floats in Rust's shortest round-trip form.
#[derive(Clone, Copy)]
enum Value {
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

/// Text being built: `# HELP`/`# TYPE` once per family, then its samples.
struct Exposition {
    text: String,
}

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.text, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Into<Value>) {
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
        let _ = writeln!(self.text, " {}", value.into());
    }

    fn bucket(&mut self, hist: &str, labels: &[(&str, &str)], le: &str, cumulative: u64) {
        let mut l = labels.to_vec();
        l.push(("le", le));
        self.sample(&format!("{hist}_bucket"), &l, cumulative);
    }
}

/// Escapes a label value: backslash, double quote and newline.
fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `--listen` value: `IP:PORT` (IPv6 as `[::1]:9752`).
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    s.parse().map_err(|_| {
        format!("`{s}` is not an address to listen on: give IP:PORT, e.g. {DEFAULT_LISTEN}")
    })
}

/// Binds the `--listen` address, if any, before anything is attached: a bad or busy
/// address is a usage error. Warns when the address is not loopback (`/metrics` has no
/// authentication).
pub fn bind(addr: Option<SocketAddr>) -> Result<Option<std::net::TcpListener>, ProbeError> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    let listener =
        std::net::TcpListener::bind(addr).map_err(|source| ProbeError::Listen { addr, source })?;
    listener
        .set_nonblocking(true)
        .map_err(|source| ProbeError::Listen { addr, source })?;
    if !addr.ip().is_loopback() {
        warn!(
            "--listen {addr} is not a loopback address: anyone who can reach it can read /metrics (there is no authentication)"
        );
    }
    Ok(Some(listener))
}

/// A scrape waiting for the main loop: send it the rendered text.
pub type Scrape = oneshot::Sender<String>;

/// Scrapes that may wait for the main loop at once; more wait in the HTTP handler.
const SCRAPE_QUEUE: usize = 8;

/// How long the server gets at exit to finish the responses it is writing.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// The `/metrics` HTTP server of one run (or nothing without `--listen`).
pub struct Endpoint {
    running: Option<Running>,
}

struct Running {
    scrapes: mpsc::Receiver<Scrape>,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Endpoint {
    /// Starts serving on `listener` (from [`bind`]); must be called inside the tokio
    /// runtime. Says where on stderr.
    pub fn start(listener: Option<std::net::TcpListener>) -> Result<Endpoint, ProbeError> {
        let Some(listener) = listener else {
            return Ok(Endpoint { running: None });
        };
        let addr = listener.local_addr()?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let (tx, scrapes) = mpsc::channel::<Scrape>(SCRAPE_QUEUE);
        let (stop, stopped) = oneshot::channel::<()>();
        let app = Router::new()
            .route("/metrics", get(metrics_handler))
            .route(
                "/",
                get(|| async { "nginx-probe: Prometheus metrics at /metrics\n" }),
            )
            .with_state(tx);
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
                let _ = stopped.await;
            });
            if let Err(e) = serve.await {
                warn!("the /metrics server stopped: {e}");
            }
        });
        eprintln!("nginx-probe: serving Prometheus metrics at http://{addr}/metrics");
        Ok(Endpoint {
            running: Some(Running {
                scrapes,
                stop,
                task,
            }),
        })
    }

    /// The next scrape to answer; never resolves without a server.
    pub async fn next_scrape(&mut self) -> Option<Scrape> {
        match &mut self.running {
            Some(r) => r.scrapes.recv().await,
            None => std::future::pending().await,
        }
    }

    /// Stops the server: scrapes still waiting get 503, responses being written get
    /// [`SHUTDOWN_GRACE`], and the port is closed when this returns.
    pub async fn shutdown(self) {
        let Some(r) = self.running else {
            return;
        };
        drop(r.scrapes);
        let _ = r.stop.send(());
        let mut task = r.task;
        if tokio::time::timeout(SHUTDOWN_GRACE, &mut task)
            .await
            .is_err()
        {
            task.abort();
            let _ = task.await;
        }
    }
}

/// `GET /metrics`: asks the main loop for a fresh rendering and waits for it.
async fn metrics_handler(State(tx): State<mpsc::Sender<Scrape>>) -> Response {
    let (reply, text) = oneshot::channel();
    if tx.send(reply).await.is_ok() {
        if let Ok(text) = text.await {
            return ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response();
        }
    }
    (StatusCode::SERVICE_UNAVAILABLE, "nginx-probe is stopping\n").into_response()
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use nginx_probe_common::{sys, ErrClass, SyscallStats, CORE_SYSCALLS};

    use super::*;
    use crate::{
        model::{self, FdReport, ListenReport, MergedReport, RequestSource, WorkerInfo},
        verdict::{Severity, Verdict},
    };

    fn info(pid: u32, slot: u32, generation: u32, alive: bool) -> WorkerInfo {
        WorkerInfo {
            pid,
            nspid: vec![pid as i32],
            slot,
            generation,
            alive,
            fds: FdReport {
                open: Some(12),
                peak: Some(48),
                limit: Some(1024),
            },
            cpu_ticks: Default::default(),
            run_delay_ns: Default::default(),
        }
    }

    fn core() -> Vec<usize> {
        CORE_SYSCALLS.iter().map(|&i| i as usize).collect()
    }

    /// Worker (slot 0, generation 1), pid 1234: 5 accept4 exits (2 EAGAIN) timed at
    /// 700 ns, 1.5 us, 3 us twice and 2 ms; 4 writev; 3 access-log writes of 100 bytes.
    fn busy_worker() -> model::WorkerReport {
        let mut s = model::ZERO_SLOT;
        let a = &mut s[sys::ACCEPT4 as usize];
        a.count = 5;
        a.errors = 2;
        a.errs[ErrClass::Eagain as usize] = 2;
        for ns in [700, 1_500, 3_000, 3_000, 2_000_000] {
            a.record_ns(ns);
        }
        s[sys::WRITEV as usize].count = 4;
        let log = &mut s[model::WRITES_IDX + 1];
        log.count = 3;
        log.ret_sum = 300;
        log.total_ns = 4_500;
        s[model::LOOP_IDX].count = 9;
        s[model::LOOP_IDX].total_ns = 250_000_000;
        s[model::ACCEPT_CLOSE_IDX].count = 1;
        let mut w = model::worker_report(
            &info(1234, 0, 1, true),
            &s,
            3,
            RequestSource::WritevEstimate,
            10.0,
            &core(),
        );
        w.cpu_s = Some(1.5);
        w
    }

    fn report() -> Report {
        let mut exited = model::worker_report(
            &info(1100, 1, 0, false),
            &model::ZERO_SLOT,
            3,
            RequestSource::WritevEstimate,
            10.0,
            &core(),
        );
        exited.cpu_s = Some(0.25);
        let mut merged_slot = model::ZERO_SLOT;
        merged_slot[sys::ACCEPT4 as usize].count = 40;
        let mut merged_info = info(0, 0, 0, false);
        merged_info.fds = FdReport::default();
        let mut merged = model::worker_report(
            &merged_info,
            &merged_slot,
            43,
            RequestSource::WritevEstimate,
            10.0,
            &core(),
        );
        // The tracker keeps the merged workers' CPU time since attach.
        merged.cpu_s = Some(12.5);
        let mut drops = BTreeMap::new();
        drops.insert("exit_without_entry".to_string(), 2);
        drops.insert("slots_exhausted".to_string(), 0);
        Report {
            schema: model::SCHEMA_VERSION,
            verdicts: vec![Verdict::new(
                "keepalive_off",
                Severity::Warning,
                BTreeMap::new(),
                &["keepalive_timeout"],
                "reuse connections".into(),
            )],
            kind: "summary".into(),
            time_unix_s: 1_796_007_610.5,
            master_pid: 1200,
            master_nspid: vec![1200],
            duration_s: 10.0,
            // Pid order, as the tracker makes it: the renderer orders by slot.
            workers: vec![exited, busy_worker()],
            listen: vec![ListenReport {
                addr: "127.0.0.1:8080".into(),
                backlog: 511,
                queue_now: 2,
                queue_max: 7,
                overflows: 3,
                drops: 4,
                socket_drops: Some(2),
            }],
            logs: BTreeMap::new(),
            exited_merged: Some(MergedReport {
                workers: 20,
                stats: merged,
            }),
            drops,
            traced_syscalls: core()
                .iter()
                .map(|&i| nginx_probe_common::SYSCALLS[i].name.to_string())
                .collect(),
            missing_tracepoints: Vec::new(),
            events: Vec::new(),
            end_reason: None,
        }
    }

    fn has(text: &str, line: &str) {
        assert!(
            text.lines().any(|l| l == line),
            "missing `{line}` in:\n{text}"
        );
    }

    #[test]
    fn renders_exact_values() {
        let text = render(&report());
        let v = env!("CARGO_PKG_VERSION");
        has(
            &text,
            &format!("nginx_probe_build_info{{version=\"{v}\"}} 1"),
        );
        has(&text, "nginx_probe_master_pid 1200");
        has(&text, "nginx_probe_start_time_seconds 1796007600.5");
        has(&text, "nginx_probe_exited_workers_merged 20");
        has(
            &text,
            r#"nginx_probe_worker_info{worker="0",generation="1",pid="1234",alive="true"} 1"#,
        );
        has(
            &text,
            r#"nginx_probe_worker_info{worker="1",generation="0",pid="1100",alive="false"} 1"#,
        );
        has(
            &text,
            r#"nginx_probe_accepts_total{worker="0",generation="1"} 3"#,
        );
        has(
            &text,
            r#"nginx_probe_accepts_total{worker="1",generation="0"} 0"#,
        );
        has(
            &text,
            r#"nginx_probe_accepts_total{worker="exited",generation="merged"} 40"#,
        );
        has(
            &text,
            r#"nginx_probe_accept_errors_total{worker="0",generation="1",errno="EAGAIN"} 2"#,
        );
        has(
            &text,
            r#"nginx_probe_accept_errors_total{worker="0",generation="1",errno="EMFILE"} 0"#,
        );
        has(
            &text,
            r#"nginx_probe_requests_total{worker="0",generation="1",source="writev_estimate"} 4"#,
        );
        has(
            &text,
            r#"nginx_probe_syscalls_total{worker="0",generation="1",syscall="accept4"} 5"#,
        );
        has(
            &text,
            r#"nginx_probe_syscall_errors_total{worker="0",generation="1",syscall="accept4"} 2"#,
        );
        // The histogram: 700 ns in bucket 9 (le 1023 ns), 1.5 us in 10, 3 us twice in
        // 11, 2 ms in 20 ([2^20, 2^21 - 1] ns); cumulative, +Inf last.
        let h = r#"nginx_probe_syscall_duration_seconds_bucket{worker="0",generation="1",syscall="accept4",le="#;
        let buckets: Vec<&str> = text.lines().filter(|l| l.starts_with(h)).collect();
        assert_eq!(buckets.len(), LE_BOUNDS + 1);
        assert_eq!(buckets[0], format!("{h}\"0.000001023\"}} 1"));
        assert_eq!(buckets[1], format!("{h}\"0.000002047\"}} 2"));
        assert_eq!(buckets[2], format!("{h}\"0.000004095\"}} 4"));
        assert_eq!(buckets[10], format!("{h}\"0.001048575\"}} 4"));
        assert_eq!(buckets[11], format!("{h}\"0.002097151\"}} 5"));
        assert_eq!(buckets[LE_BOUNDS - 1], format!("{h}\"34.359738367\"}} 5"));
        assert_eq!(buckets[LE_BOUNDS], format!("{h}\"+Inf\"}} 5"));
        has(
            &text,
            r#"nginx_probe_syscall_duration_seconds_sum{worker="0",generation="1",syscall="accept4"} 0.0020082"#,
        );
        has(
            &text,
            r#"nginx_probe_syscall_duration_seconds_count{worker="0",generation="1",syscall="accept4"} 5"#,
        );
        has(
            &text,
            r#"nginx_probe_writes_total{worker="0",generation="1",destination="access_log"} 3"#,
        );
        has(
            &text,
            r#"nginx_probe_write_bytes_total{worker="0",generation="1",destination="access_log"} 300"#,
        );
        has(
            &text,
            r#"nginx_probe_write_seconds_total{worker="0",generation="1",destination="access_log"} 0.0000045"#,
        );
        has(
            &text,
            r#"nginx_probe_event_loop_iterations_total{worker="0",generation="1"} 9"#,
        );
        has(
            &text,
            r#"nginx_probe_event_loop_busy_seconds_total{worker="0",generation="1"} 0.25"#,
        );
        has(
            &text,
            r#"nginx_probe_cpu_seconds_total{worker="0",generation="1"} 1.5"#,
        );
        has(
            &text,
            r#"nginx_probe_accepted_then_closed_total{worker="0",generation="1"} 1"#,
        );
        has(
            &text,
            r#"nginx_probe_open_fds{worker="0",generation="1"} 12"#,
        );
        has(
            &text,
            r#"nginx_probe_open_fds_peak{worker="0",generation="1"} 48"#,
        );
        has(
            &text,
            r#"nginx_probe_fd_limit{worker="0",generation="1"} 1024"#,
        );
        // An exited worker's last fd sample is not a current gauge.
        assert!(
            !text.contains(r#"nginx_probe_open_fds{worker="1""#),
            "{text}"
        );
        has(
            &text,
            r#"nginx_probe_listen_backlog{addr="127.0.0.1:8080"} 511"#,
        );
        has(
            &text,
            r#"nginx_probe_listen_queue{addr="127.0.0.1:8080"} 2"#,
        );
        has(
            &text,
            r#"nginx_probe_listen_queue_peak{addr="127.0.0.1:8080"} 7"#,
        );
        has(&text, "nginx_probe_listen_overflows_total 3");
        has(&text, "nginx_probe_listen_drops_total 4");
        has(
            &text,
            "nginx_probe_listen_socket_drops_total{addr=\"127.0.0.1:8080\"} 2",
        );
        has(
            &text,
            r#"nginx_probe_drops_total{reason="exit_without_entry"} 2"#,
        );
        has(
            &text,
            r#"nginx_probe_drops_total{reason="slots_exhausted"} 0"#,
        );
        has(
            &text,
            r#"nginx_probe_verdict{id="keepalive_off",severity="warning"} 1"#,
        );
        has(
            &text,
            "# TYPE nginx_probe_syscall_duration_seconds histogram",
        );
        has(&text, "# TYPE nginx_probe_accepts_total counter");
        has(&text, "# TYPE nginx_probe_open_fds gauge");
        // Workers by slot: slot 0 before slot 1, the merged ones last.
        let order: Vec<usize> = [r#"{worker="0""#, r#"{worker="1""#, r#"{worker="exited""#]
            .iter()
            .map(|w| text.find(&format!("nginx_probe_accepts_total{w}")).unwrap())
            .collect();
        assert!(order[0] < order[1] && order[1] < order[2], "{order:?}");
        assert_eq!(render(&report()), text, "pure");
    }

    #[test]
    fn exposition_is_well_formed_and_bounded() {
        let text = render(&report());
        let mut typed: BTreeMap<String, String> = BTreeMap::new();
        let mut helped = BTreeSet::new();
        let mut seen = BTreeSet::new();
        let mut finished: BTreeSet<String> = BTreeSet::new();
        let mut current = String::new();
        let mut per_worker: BTreeMap<String, usize> = BTreeMap::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let name = rest.split(' ').next().unwrap();
                assert!(helped.insert(name.to_string()), "HELP twice: {name}");
                continue;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let mut it = rest.split(' ');
                let (name, kind) = (it.next().unwrap(), it.next().unwrap());
                assert!(helped.contains(name), "TYPE before HELP: {name}");
                assert!(
                    typed.insert(name.into(), kind.into()).is_none(),
                    "TYPE twice: {name}"
                );
                if !current.is_empty() {
                    finished.insert(std::mem::take(&mut current));
                }
                current = name.to_string();
                assert!(name.starts_with("nginx_probe_"), "{name}");
                match kind {
                    "counter" => assert!(name.ends_with("_total"), "{name}"),
                    "gauge" | "histogram" => assert!(!name.ends_with("_total"), "{name}"),
                    _ => panic!("unexpected type {kind}"),
                }
                continue;
            }
            let (series, value) = line.rsplit_once(' ').unwrap();
            assert!(value.parse::<f64>().is_ok() || value == "+Inf", "{line}");
            assert!(seen.insert(series.to_string()), "series twice: {series}");
            let name = series.split('{').next().unwrap();
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| {
                    name.strip_suffix(s)
                        .filter(|f| typed.get(*f).map(String::as_str) == Some("histogram"))
                })
                .unwrap_or(name);
            assert_eq!(family, current, "{line} outside its family");
            assert!(!finished.contains(family), "{family} split");
            if name != "nginx_probe_worker_info" {
                assert!(!series.contains("pid="), "pid label: {line}");
            }
            if let Some(i) = series.find("worker=") {
                assert!(series.contains("generation="), "{line}");
                let w = series[i..].split(',').take(2).collect::<Vec<_>>().join(",");
                *per_worker
                    .entry(w.trim_end_matches('}').to_string())
                    .or_default() += 1;
            }
        }
        let n = series_per_worker(CORE_SYSCALLS.len());
        assert_eq!(n, 310);
        assert_eq!(series_per_worker(nginx_probe_common::SYSCALL_COUNT), 465);
        assert_eq!(per_worker[r#"worker="0",generation="1""#], n);
        assert_eq!(
            per_worker[r#"worker="1",generation="0""#],
            n - 3,
            "no fd gauges"
        );
        assert_eq!(
            per_worker[r#"worker="exited",generation="merged""#],
            n - 4,
            "no fd gauges, no info"
        );
        assert_eq!(per_worker.len(), 3);
    }

    #[test]
    fn labels_are_escaped() {
        assert_eq!(escape_label(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape_label("x\ny"), r"x\ny");
        let mut r = report();
        r.listen[0].addr = "[::1]:80".into();
        has(
            &render(&r),
            r#"nginx_probe_listen_queue{addr="[::1]:80"} 2"#,
        );
        r.listen.clear();
        let text = render(&r);
        assert!(
            !text.contains("nginx_probe_listen_overflows_total"),
            "{text}"
        );
        assert!(text.contains("# TYPE nginx_probe_listen_backlog gauge"));
    }

    #[test]
    fn listen_option_defaults_to_loopback() {
        use clap::Parser;
        let cli = crate::Cli::try_parse_from(["nginx-probe", "--pid", "7", "--listen"]).unwrap();
        assert_eq!(cli.trace.listen, Some(DEFAULT_LISTEN.parse().unwrap()));
        assert!(cli.trace.listen.unwrap().ip().is_loopback());
        let cli = crate::Cli::try_parse_from(["nginx-probe", "--listen", "--pid", "7"]).unwrap();
        assert_eq!(cli.trace.listen, Some(DEFAULT_LISTEN.parse().unwrap()));
        let cli =
            crate::Cli::try_parse_from(["nginx-probe", "--pid", "7", "--listen", "[::1]:9100"])
                .unwrap();
        assert_eq!(cli.trace.listen, Some("[::1]:9100".parse().unwrap()));
        let cli = crate::Cli::try_parse_from(["nginx-probe", "--pid", "7"]).unwrap();
        assert_eq!(cli.trace.listen, None);
        assert!(parse_listen("localhost").unwrap_err().contains("IP:PORT"));
        assert!(parse_listen("127.0.0.1").is_err());
    }

    #[test]
    fn zero_stats_render_zero_histograms() {
        let s = SyscallStats::ZERO;
        let r = model::SyscallReport::from_stats(sys::ACCEPT4 as usize, &s);
        assert_eq!(r.hist_log2_ns.len(), 40);
        let mut rep = report();
        rep.workers[1].syscalls.insert("accept4".into(), r);
        let text = render(&rep);
        has(
            &text,
            r#"nginx_probe_syscall_duration_seconds_bucket{worker="0",generation="1",syscall="accept4",le="+Inf"} 0"#,
        );
        has(
            &text,
            r#"nginx_probe_syscall_duration_seconds_sum{worker="0",generation="1",syscall="accept4"} 0"#,
        );
    }
}
