//! The worker-lifecycle rows of [`super::prometheus_families::FAMILIES`]: workers
//! shutting down (nginx's title in `/proc/<pid>/cmdline`), what the draining ones hold,
//! and worker exits by status (the kernel's `sched:sched_process_exit`). No worker
//! label: a reload's old workers come and go, so they are summed; at most one series
//! per status and per signal number (below 65), so the families stay bounded.

use super::prometheus_format::{
    Family,
    Kind::{Counter, Gauge},
    Scrape, Sink,
};
use crate::model::worker_lifecycle::{DrainingGeneration, ExitCounts, WorkerState};

/// Whether any live worker's state is known (the families are absent otherwise).
fn known(s: &Scrape) -> bool {
    s.report
        .workers
        .iter()
        .any(|w| w.alive && w.lifecycle.state.is_some())
}

fn draining<'a>(s: &Scrape<'a>) -> &'a [DrainingGeneration] {
    s.report
        .lifecycle
        .as_ref()
        .map(|l| l.draining.as_slice())
        .unwrap_or(&[])
}

/// Sum over draining generations of `f` (None: unknown for one of them).
fn held(s: &Scrape, o: &mut Sink, f: fn(&DrainingGeneration) -> Option<u64>) {
    if known(s) {
        o.some(&[], draining(s).iter().map(f).sum::<Option<u64>>());
    }
}

/// Workers shutting down now.
pub(super) const SHUTTING_DOWN: Family = Family::report(
    "nginx_probe_workers_shutting_down",
    Gauge,
    &[],
    "Workers shutting down at the last refresh (nginx's title 'nginx: worker process is shutting down' in /proc/<pid>/cmdline): old workers draining after a reload or quit. Absent when no worker's state is known.",
    |s, o| {
        if known(s) {
            let n = s
                .report
                .workers
                .iter()
                .filter(|w| w.alive && w.lifecycle.state == Some(WorkerState::ShuttingDown))
                .count();
            o.sample(&[], n as u64);
        }
    },
)
.omit_if_empty();

/// Reload generations with workers shutting down.
pub(super) const GENERATIONS: Family = Family::report(
    "nginx_probe_draining_generations",
    Gauge,
    &[],
    "Reload generations with workers still shutting down (2 or more: old workers pile up; see the worker_shutdown_timeout verdict).",
    |s, o| {
        if known(s) {
            o.sample(&[], draining(s).len() as u64);
        }
    },
)
.omit_if_empty();

/// The longest drain.
pub(super) const LONGEST: Family = Family::report(
    "nginx_probe_draining_longest_seconds",
    Gauge,
    &[],
    "Seconds the longest-draining worker has been shutting down (from the refresh that first saw its title change, within 500 ms; from attach if it was draining then); 0 when none drains.",
    |s, o| {
        if known(s) {
            let d = draining(s).iter().map(|d| d.draining_s).fold(0.0, f64::max);
            o.sample(&[], d);
        }
    },
)
.omit_if_empty();

/// Client connections held by draining workers.
pub(super) const CLIENTS: Family = Family::report(
    "nginx_probe_draining_client_connections",
    Gauge,
    &[],
    "TCP connections to nginx's listening ports still held by workers shutting down (their socket fds matched to /proc/<pid>/net/tcp{,6}); absent when unreadable.",
    |s, o| held(s, o, |d| d.client_connections),
)
.omit_if_empty();

/// Resident memory of draining workers.
pub(super) const RSS: Family = Family::report(
    "nginx_probe_draining_rss_bytes",
    Gauge,
    &[],
    "Resident memory of the workers shutting down, bytes (VmRSS of /proc/<pid>/status); absent when unreadable.",
    |s, o| held(s, o, |d| d.rss_bytes),
)
.omit_if_empty();

/// Worker exits by status.
pub(super) const EXITS: Family = Family::report(
    "nginx_probe_worker_exits_total",
    Counter,
    &["status"],
    "Worker exits since attach by status (kernel: sched:sched_process_exit, task_struct.exit_code): graceful (code 0: nginx exits 0 after a graceful QUIT and after a fast stop, TERM/INT, alike; a fast stop shows as nginx_probe_worker_connections_closed_total{by=\"worker_exit\"} rising with it), exit_code (non-zero), signal (killed: 11 SIGSEGV is a crash), unknown (not recorded).",
    |s, o| {
        if known(s) || s.report.lifecycle.is_some() {
            let zero = ExitCounts::default();
            let e = s.report.lifecycle.as_ref().map(|l| &l.exits).unwrap_or(&zero);
            for (status, n) in [
                ("graceful", e.graceful),
                ("exit_code", e.exit_code),
                ("signal", e.signal),
                ("unknown", e.unknown),
            ] {
                o.sample(&[status], n);
            }
        }
    },
)
.omit_if_empty();

/// Signal exits by signal number.
pub(super) const SIGNALS: Family = Family::report(
    "nginx_probe_worker_signal_exits_total",
    Counter,
    &["signal"],
    "Worker exits on a signal since attach, by signal number (11 SIGSEGV, 6 SIGABRT, 7 SIGBUS: crashes; 9 SIGKILL: the OOM killer or an operator); only signals seen.",
    |s, o| {
        if let Some(l) = &s.report.lifecycle {
            for (sig, n) in &l.exits.by_signal {
                o.sample(&[sig], *n);
            }
        }
    },
)
.omit_if_empty();

/// QUIC connections nginx ended, by call and reason.
pub(super) const QUIC_ENDS: Family = Family::report(
    "nginx_probe_quic_ends_total",
    Counter,
    &["call", "reason"],
    "QUIC connections nginx ended itself since attach, counted as calls (uprobes on ngx_quic_shutdown_connection: call=\"shutdown\", a graceful end begun, HTTP/3's GOAWAY sent; ngx_quic_finalize_connection: call=\"close\", closed at once; ngx_quic_close_connection with NGX_DONE and its read timer expired: call=\"idle_timeout\", closed silently at the QUIC idle timeout, keepalive_timeout or the client's shorter max_idle_timeout; call=\"other\": beyond 64 kinds), by nginx's own reason string (\"reached maximum number of requests\": keepalive_requests or keepalive_time; \"keepalive timeout\"; errors; \"none\" when nginx gave none, and for idle_timeout). Clients' own closes are not counted. Absent when nginx has no UDP listening socket or the uprobes are not attached.",
    |s, o| {
        if let Some(q) = &s.report.quic {
            for e in &q.ends {
                let call = match e.call {
                    crate::model::quic::QuicEndCall::Shutdown => "shutdown",
                    crate::model::quic::QuicEndCall::Close => "close",
                    crate::model::quic::QuicEndCall::IdleTimeout => "idle_timeout",
                    crate::model::quic::QuicEndCall::Other => "other",
                    crate::model::quic::QuicEndCall::Started => continue,
                };
                o.sample(&[call, e.reason.as_deref().unwrap_or("none")], e.count);
            }
        }
    },
)
.omit_if_empty();

/// Configuration loads by process and result.
pub(super) const CONFIG_LOADS: Family = Family::report(
    "nginx_probe_config_loads_total",
    Counter,
    &["process", "result"],
    "Configuration loads since attach (uretprobe on ngx_init_cycle in nginx's binary; NULL: the configuration did not load), by process: master (its reloads; a failed one leaves nginx serving the configuration it had), upgrade (a binary upgrade's new master, USR2: a child of the master; a failed one exits and the old master serves on) or other (nginx -t, nginx -s, another master of the binary); absent when not measured.",
    |s, o| {
        if let Some(c) = s.report.config_loads.as_ref().filter(|c| c.unknown.is_none()) {
            for (process, result, n) in [
                ("master", "loaded", c.reloads_loaded),
                ("master", "failed", c.reloads_failed),
                ("upgrade", "loaded", c.upgrades_loaded),
                ("upgrade", "failed", c.upgrades_failed),
                ("other", "loaded", c.others_loaded),
                ("other", "failed", c.others_failed),
            ] {
                o.sample(&[process, result], n);
            }
        }
    },
)
.omit_if_empty();
