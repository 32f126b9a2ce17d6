//! The figures the rules read, taken from one recorded run's summary.

use super::*;

/// The figures the rules read, for one config under load. Shares are 0..1 of the nginx
/// workers' syscall time outside epoll waits (`syscalls.*.total_ns`, all workers
/// summed); per-request figures divide by nginx-probe's report-level `requests.count`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metrics {
    /// Client-side throughput, req/s (wrk or hey): printed, never judged.
    pub rps: f64,
    /// Client-side failures (socket errors, non-2xx): printed, never judged.
    pub client_errors: u64,
    /// Requests nginx-probe counted (report-level `requests.count`: nginx's own counter).
    pub requests: u64,
    /// Successful accepts, all workers.
    pub accepts: u64,
    /// accepts / requests.
    pub accepts_per_request: f64,
    /// (accept4 + accept + close) share of syscall time: connection set-up and tear-down
    /// (close also closes the served file, so it is never 0 when close is traced).
    pub setup_share: f64,
    /// `writes.access_log.count` / requests.
    pub access_log_writes_per_request: f64,
    /// `writes.access_log.total_ns` share of syscall time.
    pub access_log_share: f64,
    /// (openat + newfstatat) share of syscall time: opening the served file.
    pub file_share: f64,
    /// Each traced syscall's count per request, all workers.
    pub per_request: BTreeMap<String, f64>,
    /// Traced syscalls outside epoll waits per request.
    pub syscalls_per_request: f64,
    /// Traced syscall time outside epoll waits per request, us.
    pub syscall_us_per_request: f64,
    /// nginx workers' CPU time (user + system, `cpu_s`) per request, us.
    pub cpu_us_per_request: f64,
    /// Busiest worker's accept share / mean share (1.0 = even; 0 without accepts).
    pub accept_skew: f64,
    /// Busiest worker's `event_loop.busy_share` / mean busy share (0 when idle).
    pub busy_skew: f64,
    /// Sum of the workers' busy shares: cores' worth of time outside epoll waits.
    pub busy_cores: f64,
    /// accept4 failures with EMFILE, all workers.
    pub emfile: u64,
    /// Highest `fds.peak` of any worker.
    pub fd_peak: u64,
    /// Lowest `fds.limit` (soft nofile in force) of any worker.
    pub fd_limit: u64,
    /// Connections closed right after their accept (`accepted_then_closed`), all workers.
    pub accepted_then_closed: u64,
    /// Backlog in force of nginx's listening socket (`listen[0].backlog`).
    pub listen_backlog: u64,
    /// Most connections seen waiting in its accept queue (`listen[0].queue_max`).
    pub listen_queue_max: u64,
    /// ListenOverflows + ListenDrops of the namespace during the run.
    pub listen_overflows: u64,
    /// Workers' context switches during the load (voluntary + nonvoluntary), from
    /// `/proc/<pid>/status`; per 1000 requests in [`Metrics::switches_per_1k`].
    pub context_switches: u64,
    /// Of those, nonvoluntary (preempted).
    pub nonvoluntary_switches: u64,
    /// Verdict ids nginx-probe printed, most severe first.
    pub verdicts: Vec<String>,
    /// nginx's effective configuration as nginx-probe read it (`config.values`):
    /// (scope, directive, value), in nginx-probe's order; empty when it was not read.
    pub config: Vec<(String, String, String)>,
    /// Connections nginx closed first (`connections.ports[].closed_by_nginx`, summed);
    /// None when the summary has no `connections` section.
    pub closed_by_nginx: Option<u64>,
    /// Connections the workers opened to upstreams (`upstream.connects`, summed).
    pub upstream_connects: u64,
    /// accept4 returns with EAGAIN (a worker woke to an empty accept queue), all
    /// workers: wasted wake-ups.
    pub accept_eagain: u64,
    /// `worker_connections exceed open file resource limit` lines since the master's
    /// start (`nginx_errors.history.classes.worker_connections_over_nofile`); None
    /// when the summary has no error-log history.
    pub over_nofile_warnings: Option<u64>,
    /// Lines nginx logged since attach for a call failing with EMFILE (`accept4()
    /// failed (24: ...)`, `open() ... failed (24: ...)`: `nginx_errors.classes.emfile`).
    pub emfile_log_lines: u64,
    /// Connections the load opened at its start (wrk's or hey's `-c`), set by the lab
    /// from the claim's load: accepts beyond them are reconnects.
    pub load_connections: u64,
    /// TLS handshakes nginx completed (`tls.handshakes`; 0 without the `tls` section).
    pub tls_handshakes: u64,
    /// Time inside libssl's `SSL_do_handshake` (`tls.call_ns`): the handshakes' CPU work.
    pub tls_call_ns: u64,
    /// Online CPUs of the machine the run was on, set by the lab.
    pub online_cpus: u64,
    /// The workers' CPU time (`cpu_s`, summed) over the run's `duration_s`: cores' worth
    /// of CPU they used (unlike [`Metrics::busy_cores`], time waiting for a CPU is not in
    /// it).
    pub cpu_cores: f64,
    /// The workers' `run_delay_s` (runnable, waiting for a CPU) summed, per request, us.
    pub run_delay_us_per_request: f64,
    /// Writes to pipes, eventfds and other anonymous inodes (`writes.other.count`), all
    /// workers: with `aio threads`, a thread-pool thread's completion notice to its
    /// worker's event loop (an eventfd write per finished task).
    pub other_writes: u64,
    /// Longest p99 event-loop iteration of any worker (`event_loop.p99_iteration_ns`,
    /// the main thread: from one epoll wait's return to the next wait), us: how long
    /// the loop stalls, its other connections waiting.
    pub loop_p99_us: f64,
    /// Longest event-loop iteration of any worker (`event_loop.max_iteration_ns`), us.
    pub loop_max_us: f64,
}

pub(super) fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

pub(super) fn skew(shares: &[f64]) -> f64 {
    let sum: f64 = shares.iter().sum();
    if shares.is_empty() || sum <= 0.0 {
        return 0.0;
    }
    let max = shares.iter().copied().fold(0.0, f64::max);
    max / (sum / shares.len() as f64)
}

/// A summary's count; 0 when absent.
fn count(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// The workers' figures summed over a summary's `workers[]`.
#[derive(Default)]
struct WorkerSums {
    /// Each syscall's count (epoll waits left out).
    counts: BTreeMap<String, u64>,
    /// Syscall time outside epoll waits, ns.
    all_ns: u64,
    /// accept4, accept and close, ns.
    setup_ns: u64,
    /// openat and newfstatat, ns.
    file_ns: u64,
    /// Access-log writes, ns.
    log_ns: u64,
    /// Access-log writes.
    log_writes: u64,
    /// CPU time, s.
    cpu_s: f64,
    /// Time runnable waiting for a CPU, s.
    run_delay_s: f64,
    /// Each worker's share of the accepts.
    accept_shares: Vec<f64>,
    /// Each worker's `event_loop.busy_share`.
    busy_shares: Vec<f64>,
}

impl WorkerSums {
    /// Adds one worker of the summary.
    fn add(&mut self, w: &Value) {
        self.cpu_s += w["cpu_s"].as_f64().unwrap_or(0.0);
        self.run_delay_s += w["run_delay_s"].as_f64().unwrap_or(0.0);
        self.accept_shares
            .push(w["accept_share"].as_f64().unwrap_or(0.0));
        self.busy_shares
            .push(w["event_loop"]["busy_share"].as_f64().unwrap_or(0.0));
        self.log_writes += count(&w["writes"]["access_log"]["count"]);
        self.log_ns += count(&w["writes"]["access_log"]["total_ns"]);
        for (name, st) in w["syscalls"].as_object().into_iter().flatten() {
            if name.starts_with("epoll") {
                continue;
            }
            let ns = count(&st["total_ns"]);
            self.all_ns += ns;
            *self.counts.entry(name.clone()).or_default() += count(&st["count"]);
            match name.as_str() {
                "accept4" | "accept" | "close" => self.setup_ns += ns,
                "openat" | "newfstatat" => self.file_ns += ns,
                _ => {}
            }
        }
    }
}

impl Metrics {
    /// Builds the metrics from an nginx-probe summary document (schema 1), the client's
    /// report, and the workers' (voluntary, nonvoluntary) context switches during the
    /// load.
    pub fn from_summary(s: &Value, client: &ClientRun, switches: (u64, u64)) -> Result<Metrics> {
        if s["type"] != "summary" || s["schema"] != 1 {
            bail!("not an nginx-probe schema 1 summary");
        }
        let workers = s["workers"].as_array().context("summary without workers")?;
        let mut m = Metrics {
            rps: client.rps,
            client_errors: client.errors,
            context_switches: switches.0 + switches.1,
            nonvoluntary_switches: switches.1,
            fd_limit: u64::MAX,
            ..Metrics::default()
        };
        // All of nginx's requests: the report-level count (nginx's stub_status counter);
        // recordings without it: the workers' counts summed.
        let total = s["requests"]["count"].as_u64();
        m.requests = total.unwrap_or(0);
        let mut sums = WorkerSums::default();
        for w in workers {
            if total.is_none() {
                m.requests += count(&w["requests"]["count"]);
            }
            m.add_worker_counts(w);
            sums.add(w);
        }
        if m.fd_limit == u64::MAX {
            m.fd_limit = 0;
        }
        m.set_per_request_and_shares(sums, s["duration_s"].as_f64().unwrap_or(0.0));
        m.set_report_sections(s);
        Ok(m)
    }

    /// Adds one worker's accepts, accept errors, upstream connects, closes after accept
    /// and writes to anonymous inodes; keeps the highest fd peak, event-loop p99 and
    /// longest iteration, and the lowest fd limit.
    fn add_worker_counts(&mut self, w: &Value) {
        self.accepts += count(&w["accepts"]);
        self.emfile += count(&w["accept_errors"]["EMFILE"]);
        self.accept_eagain += count(&w["accept_errors"]["EAGAIN"]);
        self.upstream_connects += count(&w["upstream"]["connects"]);
        self.accepted_then_closed += count(&w["accepted_then_closed"]);
        self.fd_peak = self.fd_peak.max(count(&w["fds"]["peak"]));
        self.other_writes += count(&w["writes"]["other"]["count"]);
        let loop_us = |k: &str| count(&w["event_loop"][k]) as f64 / 1e3;
        self.loop_p99_us = self.loop_p99_us.max(loop_us("p99_iteration_ns"));
        self.loop_max_us = self.loop_max_us.max(loop_us("max_iteration_ns"));
        if let Some(l) = w["fds"]["limit"].as_u64() {
            self.fd_limit = self.fd_limit.min(l);
        }
    }

    /// The per-request figures, shares of syscall time and skews from the workers'
    /// sums; `duration_s` is the summary's.
    fn set_per_request_and_shares(&mut self, sums: WorkerSums, duration_s: f64) {
        let req = self.requests as f64;
        let all_ns = sums.all_ns as f64;
        self.accepts_per_request = ratio(self.accepts as f64, req);
        self.access_log_writes_per_request = ratio(sums.log_writes as f64, req);
        self.setup_share = ratio(sums.setup_ns as f64, all_ns);
        self.access_log_share = ratio(sums.log_ns as f64, all_ns);
        self.file_share = ratio(sums.file_ns as f64, all_ns);
        self.syscalls_per_request = ratio(sums.counts.values().sum::<u64>() as f64, req);
        self.syscall_us_per_request = ratio(all_ns / 1e3, req);
        self.cpu_us_per_request = ratio(sums.cpu_s * 1e6, req);
        self.run_delay_us_per_request = ratio(sums.run_delay_s * 1e6, req);
        self.cpu_cores = ratio(sums.cpu_s, duration_s);
        self.per_request = sums
            .counts
            .into_iter()
            .map(|(k, v)| (k, ratio(v as f64, req)))
            .collect();
        self.accept_skew = skew(&sums.accept_shares);
        self.busy_skew = skew(&sums.busy_shares);
        self.busy_cores = sums.busy_shares.iter().sum();
    }

    /// What the summary says beside the workers: the listening socket, the
    /// configuration, connections, nginx's error log, TLS and the verdicts.
    fn set_report_sections(&mut self, s: &Value) {
        if let Some(l) = s["listen"].as_array().and_then(|a| a.first()) {
            self.listen_backlog = count(&l["backlog"]);
            self.listen_queue_max = count(&l["queue_max"]);
            self.listen_overflows = count(&l["overflows"]) + count(&l["drops"]);
        }
        self.config = s["config"]["values"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| {
                let t = |k: &str| v[k].as_str().unwrap_or_default().to_string();
                (t("scope"), t("directive"), t("value"))
            })
            .collect();
        self.closed_by_nginx = s["connections"]["ports"]
            .as_array()
            .map(|ps| ps.iter().map(|p| count(&p["closed_by_nginx"])).sum());
        let history = &s["nginx_errors"]["history"];
        self.over_nofile_warnings = history
            .is_object()
            .then(|| count(&history["classes"]["worker_connections_over_nofile"]));
        self.emfile_log_lines = count(&s["nginx_errors"]["classes"]["emfile"]["count"]);
        self.tls_handshakes = count(&s["tls"]["handshakes"]);
        self.tls_call_ns = count(&s["tls"]["call_ns"]);
        self.verdicts = s["verdicts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v["id"].as_str().map(String::from))
            .collect();
    }

    /// Count per request of one traced syscall (0 when not traced or not seen).
    pub fn per_req(&self, syscall: &str) -> f64 {
        self.per_request.get(syscall).copied().unwrap_or(0.0)
    }

    /// The effective value of `directive` in the first scope starting with `scope`
    /// (`"http"`, `"events"`, `"upstream "`, `"server "`), as nginx-probe read it from
    /// nginx's configuration; None when not listed (or the configuration was not read).
    pub fn config_value(&self, scope: &str, directive: &str) -> Option<&str> {
        self.config
            .iter()
            .find(|(s, d, _)| s.starts_with(scope) && d == directive)
            .map(|(_, _, v)| v.as_str())
    }

    /// Accepts beyond the load's own connections, per request: connections the server
    /// made the clients open again.
    pub fn reconnects_per_request(&self) -> f64 {
        ratio(
            self.accepts.saturating_sub(self.load_connections) as f64,
            self.requests as f64,
        )
    }

    /// Upstream connects per request.
    pub fn upstream_connects_per_request(&self) -> f64 {
        ratio(self.upstream_connects as f64, self.requests as f64)
    }

    /// accept4 EAGAIN returns per successful accept: wake-ups that found no connection.
    pub fn wasted_wakeups_per_accept(&self) -> f64 {
        ratio(self.accept_eagain as f64, self.accepts as f64)
    }

    /// Writes to anonymous inodes (eventfd notices of `aio threads`) per request.
    pub fn other_writes_per_request(&self) -> f64 {
        ratio(self.other_writes as f64, self.requests as f64)
    }

    /// libssl time per completed TLS handshake, us (0 without handshakes).
    pub fn tls_us_per_handshake(&self) -> f64 {
        ratio(self.tls_call_ns as f64 / 1e3, self.tls_handshakes as f64)
    }

    /// Workers' context switches per 1000 requests.
    pub fn switches_per_1k(&self) -> f64 {
        ratio(self.context_switches as f64 * 1000.0, self.requests as f64)
    }

    /// The listen queue overflowed: seen at its backlog, or the namespace's
    /// ListenOverflows/ListenDrops rose during the run. Unlike nginx-probe's
    /// `accept_queue_overflow` rule this does not also require the sampled queue to be
    /// non-empty: a 16-slot queue fills and drains between two 500 ms samples. The
    /// counters are the namespace's, so the lab compares them with the other config's
    /// run of the same minute (quiet there = nothing else overflowing).
    pub fn queue_overflowed(&self) -> bool {
        (self.listen_backlog > 0 && self.listen_queue_max >= self.listen_backlog)
            || self.listen_overflows > 0
    }

    pub(super) fn json(&self) -> Value {
        let mut doc = json!({
            "rps": round(self.rps, 1), "client_errors": self.client_errors,
            "requests": self.requests, "accepts": self.accepts,
            "accepts_per_request": round(self.accepts_per_request, 4),
            "setup_share": round(self.setup_share, 4),
            "access_log_writes_per_request": round(self.access_log_writes_per_request, 4),
            "access_log_share": round(self.access_log_share, 4),
            "file_share": round(self.file_share, 4),
            "syscalls_per_request": round(self.syscalls_per_request, 3),
            "per_request": self.per_request.iter().map(|(k, v)| (k.clone(), json!(round(*v, 4)))).collect::<serde_json::Map<_, _>>(),
            "syscall_us_per_request": round(self.syscall_us_per_request, 2),
            "cpu_us_per_request": round(self.cpu_us_per_request, 2),
            "accept_skew": round(self.accept_skew, 3), "busy_skew": round(self.busy_skew, 3),
            "busy_cores": round(self.busy_cores, 3),
            "emfile": self.emfile, "fd_peak": self.fd_peak, "fd_limit": self.fd_limit,
            "accepted_then_closed": self.accepted_then_closed,
            "listen": {"backlog": self.listen_backlog, "queue_max": self.listen_queue_max,
                       "overflows_and_drops": self.listen_overflows},
            "context_switches": self.context_switches,
            "nonvoluntary_switches": self.nonvoluntary_switches,
            "switches_per_1k_requests": round(self.switches_per_1k(), 2),
            "closed_by_nginx": self.closed_by_nginx,
            "upstream_connects": self.upstream_connects,
            "upstream_connects_per_request": round(self.upstream_connects_per_request(), 4),
            "accept_eagain": self.accept_eagain,
            "wasted_wakeups_per_accept": round(self.wasted_wakeups_per_accept(), 4),
            "reconnects_per_request": round(self.reconnects_per_request(), 6),
            "over_nofile_warnings": self.over_nofile_warnings,
            "emfile_log_lines": self.emfile_log_lines,
            "load_connections": self.load_connections,
            "online_cpus": self.online_cpus,
            "tls_handshakes": self.tls_handshakes,
            "tls_us_per_handshake": round(self.tls_us_per_handshake(), 2),
            "cpu_cores": round(self.cpu_cores, 3),
            "run_delay_us_per_request": round(self.run_delay_us_per_request, 2),
            "verdicts": self.verdicts,
        });
        // Added apart: one json! of every field passes serde_json's macro recursion limit.
        let more = json!({
            "other_writes": self.other_writes,
            "other_writes_per_request": round(self.other_writes_per_request(), 4),
            "loop_p99_us": round(self.loop_p99_us, 1),
            "loop_max_us": round(self.loop_max_us, 1),
        });
        if let (Value::Object(d), Value::Object(m)) = (&mut doc, more) {
            d.extend(m);
        }
        doc
    }
}

pub(super) fn round(v: f64, digits: i32) -> f64 {
    let p = 10f64.powi(digits);
    (v * p).round() / p
}

// ---------------------------------------------------------------------------------------
// Outcomes and rules.
