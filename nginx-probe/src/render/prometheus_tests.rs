//! Unit tests of the Prometheus exposition ([`super`]): exact values, well-formedness,
//! the series bound, label escaping.

use std::collections::{BTreeMap, BTreeSet};

use nginx_probe_common::{sys, ErrClass, SyscallStats, CORE_SYSCALLS};

use super::*;
use crate::model::{self, FdReport, ListenReport, MergedReport, OwnCost, RequestSource};
use crate::model::{Severity, Verdict, WorkerInfo};
use crate::render::prometheus_format::escape_label;

/// One worker of a fixture report, built from kernel counters as the tracker builds it.
struct Worker {
    info: WorkerInfo,
    stats: model::SlotStats,
    source: RequestSource,
    cpu_s: Option<f64>,
}

impl Worker {
    /// A live worker whose 500 ms sample saw 12 open fds (peak 48, limit 1024), every
    /// counter 0, requests unknown.
    fn new(pid: u32, slot: u32, generation: u32) -> Worker {
        Worker {
            info: WorkerInfo {
                pid,
                nspid: vec![pid as i32],
                slot,
                generation,
                alive: true,
                fds: FdReport {
                    open: Some(12),
                    peak: Some(48),
                    limit: Some(1024),
                    ..FdReport::default()
                },
                cpu_ticks: Default::default(),
                run_delay_ns: Default::default(),
            },
            stats: model::ZERO_SLOT,
            source: RequestSource::Unknown,
            cpu_s: None,
        }
    }

    /// The same worker, exited.
    fn exited(mut self) -> Worker {
        self.info.alive = false;
        self
    }

    /// The same worker with no fd sample.
    fn no_fds(mut self) -> Worker {
        self.info.fds = FdReport::default();
        self
    }

    /// The same worker with its kernel counters set by `set`.
    /// Accepts are filled from the accept rows, as the collector does without the
    /// accept uprobe.
    fn counters(mut self, set: impl FnOnce(&mut model::SlotStats)) -> Worker {
        set(&mut self.stats);
        self.stats[model::ACCEPTED_IDX].count = model::tracepoint_accepts(&self.stats);
        self
    }

    /// The same worker with requests counted by uprobes.
    fn uprobes(mut self) -> Worker {
        self.source = RequestSource::Uprobe;
        self
    }

    /// The same worker with `cpu_s` CPU seconds since attach.
    fn cpu(mut self, cpu_s: f64) -> Worker {
        self.cpu_s = Some(cpu_s);
        self
    }

    /// Its report in a 10 s run of the core syscalls whose workers accepted
    /// `total_accepts` in all; a live worker holds no upstream fd.
    fn build(&self, total_accepts: u64) -> model::WorkerReport {
        let mut w = model::worker_report(
            &self.info,
            &self.stats,
            total_accepts,
            self.source,
            10.0,
            10.0,
            &core(),
            model::WriteSource::FdTable,
        );
        w.cpu_s = self.cpu_s;
        // The connection lifecycle attached (model::build sets it then).
        w.connections_closed = Some(model::connections::WorkerCloses::of(&self.stats));
        // Set by the tracker from the cumulative counters.
        w.upstream.fds_open = self.info.alive.then_some(0);
        w
    }
}

/// The report's one listening socket: 2 queued of 511, 3 overflows, 4 drops.
fn one_listener() -> ListenReport {
    ListenReport {
        addr: "127.0.0.1:8080".into(),
        backlog: 511,
        queue_now: 2,
        queue_max: 7,
        overflows: 3,
        drops: 4,
        socket_drops: Some(2),
        closed: false,
    }
}

/// A 10 s report of `workers` (in pid order, as the tracker makes it) and of
/// `merged` exited workers summed as one: nginx's counters, one listening socket, the
/// error log, the CPU quota, drops and a verdict.
fn report_of(workers: &[Worker], merged: Option<(u64, Worker)>) -> Report {
    // Long because: one struct literal naming every field of a Report.
    let total: u64 = workers
        .iter()
        .chain(merged.iter().map(|(_, w)| w))
        .map(|w| model::accepts_of(&w.stats))
        .sum();
    let drops = BTreeMap::from([
        ("exit_without_entry".to_string(), 2),
        ("slots_exhausted".to_string(), 0),
    ]);
    Report {
        write_destinations: model::WriteSource::FdTable,
        schema: model::SCHEMA_VERSION,
        not_judged: Vec::new(),
        verdicts: vec![Verdict::new(
            "keepalive_off",
            Severity::Warning,
            BTreeMap::new(),
            &["keepalive_timeout"],
            "reuse connections".into(),
        )],
        kind: model::ReportKind::Summary,
        time_unix_s: 1_796_007_610.5,
        master_pid: 1200,
        master_nspid: vec![1200],
        duration_s: 10.0,
        workers: workers.iter().map(|w| w.build(total)).collect(),
        requests: model::RequestTotals {
            source: RequestSource::StubStatus,
            count: Some(6),
            ..Default::default()
        },
        stub_status: Some(model::StubStatusReport {
            accepted: 5,
            handled: 4,
            dropped: 1,
            requests: 6,
            active: 3,
            reading: 1,
            writing: 1,
            waiting: 1,
            rebases: 0,
        }),
        // As the tracker makes it: from all workers' summed kernel counters.
        tls: Some(model::tls_report(&all_slots(workers, merged.as_ref()), false, false)),
        listen: vec![one_listener()],
        listen_namespace: Some(model::ListenNamespaceReport {
            overflows: 3,
            drops: 4,
            source: model::listen::LISTEN_NAMESPACE_SOURCE.into(),
        }),
        logs: BTreeMap::new(),
        exited_merged: merged.map(|(n, w)| MergedReport {
            workers: n,
            stats: w.build(total),
        }),
        drops,
        nginx_errors: serde_json::from_value(serde_json::json!({"path": "/var/log/nginx/error.log", "readable": true, "lines_cut": 0, "bytes_skipped": 0,
            "classes": {"limit_req": {"count": 215, "levels": {"error": 215}, "directive": "limit_req", "group": "refused"}}})).unwrap(),
        cpu_quota: serde_json::from_value(serde_json::json!({"cgroup": "/case16", "cgroup_version": 2, "quota_cpus": 0.1, "quota_us": 10000,
            "period_us": 100000, "nr_periods": 50, "nr_throttled": 45, "throttled_s": 4.0})).unwrap(),
        traced_syscalls: core()
            .iter()
            .map(|&i| nginx_probe_common::SYSCALLS[i].name.to_string())
            .collect(),
        missing_tracepoints: Vec::new(),
        events: Vec::new(),
        new_master_beside: None,
        end_reason: None,
        detail: None,
        lifecycle: None,
        // The master's configuration loads: 2 reloads loaded, 1 failed.
        config_loads: serde_json::from_str(r#"{"source": "", "reloads_loaded": 2, "reloads_failed": 1, "others_loaded": 0, "others_failed": 0}"#).ok(),
        config: None,
        connections: None,
        connections_not_traced: None,
        quic: None,
        stale_logs: Vec::new(),
        local_ports: None,
        access_log: None,
        master: None,
    }
}

/// The kernel counters of `workers` and the merged ones, summed.
fn all_slots(workers: &[Worker], merged: Option<&(u64, Worker)>) -> model::SlotStats {
    let mut all = model::ZERO_SLOT;
    for w in workers.iter().chain(merged.map(|(_, w)| w)) {
        model::add_slot(&mut all, &w.stats);
    }
    all
}

fn core() -> Vec<usize> {
    CORE_SYSCALLS.iter().map(|&i| i as usize).collect()
}

/// Worker (slot 0, generation 1), pid 1234: 5 accept4 exits (2 EAGAIN) timed at
/// 700 ns, 1.5 us, 3 us twice and 2 ms; 4 writev; 3 access-log writes of 100 bytes;
/// 4 requests counted by uprobes; 1.5 s of CPU.
fn busy_worker() -> Worker {
    Worker::new(1234, 0, 1).uprobes().cpu(1.5).counters(|s| {
        let a = &mut s[sys::ACCEPT4 as usize];
        a.count = 5;
        a.errors = 2;
        a.errs[ErrClass::Eagain as usize] = 2;
        for ns in [700, 1_500, 3_000, 3_000, 2_000_000] {
            a.record_ns(ns);
        }
        s[sys::WRITEV as usize].count = 4;
        s[model::REQUESTS_IDX].count = 4;
        let log = &mut s[model::WRITES_IDX + 1];
        log.count = 3;
        log.ret_sum = 300;
        log.total_ns = 4_500;
        s[model::LOOP_IDX].count = 9;
        s[model::LOOP_IDX].total_ns = 250_000_000;
        s[model::ACCEPT_CLOSE_IDX].count = 1;
        tls_handshakes(s);
    })
}

/// TLS (uprobes on libssl): 4 handshakes started, 3 completed in 2 ms, 3 ms and
/// 5 ms of wall time, 1 abandoned; 7 SSL_do_handshake calls, 1.5 ms inside them.
fn tls_handshakes(s: &mut model::SlotStats) {
    let h = &mut s[model::TLS_IDX];
    h.count = 4;
    h.errors = 1;
    for ns in [2_000_000, 3_000_000, 5_000_000] {
        h.record_ns(ns);
    }
    let c = &mut s[model::TLS_IDX + 1];
    c.count = 7;
    c.total_ns = 1_500_000;
    // As the collector fills it when libssl counts the completed handshakes.
    s[model::TLS_DONE_IDX].count = 3;
}

/// The busy worker, an exited one (slot 1, pid 1100, 0.25 s of CPU), and 20 exited
/// workers merged (40 accepts, 12.5 s of CPU kept by the tracker).
pub(crate) fn report() -> Report {
    report_of(
        &[Worker::new(1100, 1, 0).exited().cpu(0.25), busy_worker()],
        Some((
            20,
            Worker::new(0, 0, 0)
                .exited()
                .no_fds()
                .cpu(12.5)
                .counters(|s| s[sys::ACCEPT4 as usize].count = 40),
        )),
    )
}

/// Asserts `text` has each of `lines`, whole.
pub(super) fn has(text: &str, lines: &[&str]) {
    for line in lines {
        assert!(
            text.lines().any(|l| l == *line),
            "missing `{line}` in:\n{text}"
        );
    }
}

#[test]
fn renders_exact_values_of_the_exporter_nginx_accepts_and_syscall_counts() {
    let text = render(&report());
    let v = env!("CARGO_PKG_VERSION");
    has(
        &text,
        &[
            &format!("nginx_probe_build_info{{version=\"{v}\"}} 1"),
            "nginx_probe_master_pid 1200",
            r#"nginx_probe_error_log_readable{path="/var/log/nginx/error.log"} 1"#,
            r#"nginx_probe_nginx_errors_total{class="limit_req"} 215"#,
            "nginx_probe_cpu_quota_cpus 0.1",
            "nginx_probe_cpu_quota_throttled_periods_total 45",
            "nginx_probe_cpu_quota_throttled_seconds_total 4",
            "nginx_probe_start_time_seconds 1796007600.5",
            "nginx_probe_exited_workers_merged 20",
            r#"nginx_probe_worker_info{worker="0",generation="1",pid="1234",alive="true"} 1"#,
            r#"nginx_probe_worker_info{worker="1",generation="0",pid="1100",alive="false"} 1"#,
            r#"nginx_probe_accepts_total{worker="0",generation="1"} 3"#,
            r#"nginx_probe_accepts_total{worker="1",generation="0"} 0"#,
            r#"nginx_probe_accepts_total{worker="exited",generation="merged"} 40"#,
            r#"nginx_probe_accept_eagain_total{worker="0",generation="1"} 2"#,
        ],
    );
    assert!(!text.contains(r#"errno="EAGAIN""#), "{text}");
    has(
        &text,
        &[
            r#"nginx_probe_accept_errors_total{worker="0",generation="1",errno="EMFILE"} 0"#,
            r#"nginx_probe_worker_requests_total{worker="0",generation="1",source="uprobe"} 4"#,
            r#"nginx_probe_requests_total{source="stub_status"} 6"#,
            "nginx_probe_nginx_connections_accepted_total 5",
            "nginx_probe_nginx_connections_handled_total 4",
            r#"nginx_probe_nginx_connections{state="waiting"} 1"#,
            r#"nginx_probe_syscalls_total{worker="0",generation="1",syscall="accept4"} 5"#,
            r#"nginx_probe_syscall_errors_total{worker="0",generation="1",syscall="accept4"} 0"#,
            r#"nginx_probe_syscall_eagain_total{worker="0",generation="1",syscall="accept4"} 2"#,
        ],
    );
}

#[test]
fn renders_the_syscall_histogram_cumulative_with_its_sum_and_count() {
    let text = render(&report());
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
        &[
            r#"nginx_probe_syscall_duration_seconds_sum{worker="0",generation="1",syscall="accept4"} 0.0020082"#,
            r#"nginx_probe_syscall_duration_seconds_count{worker="0",generation="1",syscall="accept4"} 5"#,
        ],
    );
}

#[test]
fn renders_exact_writes_event_loop_cpu_and_fd_values() {
    let text = render(&report());
    has(
        &text,
        &[
            r#"nginx_probe_writes_total{worker="0",generation="1",destination="access_log"} 3"#,
            r#"nginx_probe_write_bytes_total{worker="0",generation="1",destination="access_log"} 300"#,
            r#"nginx_probe_write_seconds_total{worker="0",generation="1",destination="access_log"} 0.0000045"#,
            r#"nginx_probe_event_loop_iterations_total{worker="0",generation="1"} 9"#,
            r#"nginx_probe_event_loop_busy_seconds_total{worker="0",generation="1"} 0.25"#,
            r#"nginx_probe_cpu_seconds_total{worker="0",generation="1"} 1.5"#,
            r#"nginx_probe_accepted_then_closed_total{worker="0",generation="1"} 1"#,
            r#"nginx_probe_open_fds{worker="0",generation="1"} 12"#,
            r#"nginx_probe_open_fds_peak{worker="0",generation="1"} 48"#,
            r#"nginx_probe_fd_limit{worker="0",generation="1"} 1024"#,
        ],
    );
    // An exited worker's last fd sample is not a current gauge.
    assert!(
        !text.contains(r#"nginx_probe_open_fds{worker="1""#),
        "{text}"
    );
}

#[test]
fn renders_exact_listen_drops_and_verdict_values_workers_by_slot() {
    let text = render(&report());
    has(
        &text,
        &[
            r#"nginx_probe_listen_backlog{addr="127.0.0.1:8080"} 511"#,
            r#"nginx_probe_listen_queue{addr="127.0.0.1:8080"} 2"#,
            r#"nginx_probe_listen_queue_peak{addr="127.0.0.1:8080"} 7"#,
            "nginx_probe_listen_overflows_total 3",
            "nginx_probe_listen_drops_total 4",
            "nginx_probe_listen_socket_drops_total{addr=\"127.0.0.1:8080\"} 2",
            r#"nginx_probe_drops_total{reason="exit_without_entry"} 2"#,
            r#"nginx_probe_drops_total{reason="slots_exhausted"} 0"#,
            r#"nginx_probe_verdict{id="keepalive_off",severity="warning"} 1"#,
            "# TYPE nginx_probe_syscall_duration_seconds histogram",
            "# TYPE nginx_probe_accepts_total counter",
            "# TYPE nginx_probe_open_fds gauge",
        ],
    );
    // Workers by slot: slot 0 before slot 1, the merged ones last.
    let order: Vec<usize> = [r#"{worker="0""#, r#"{worker="1""#, r#"{worker="exited""#]
        .iter()
        .map(|w| text.find(&format!("nginx_probe_accepts_total{w}")).unwrap())
        .collect();
    assert!(order[0] < order[1] && order[1] < order[2], "{order:?}");
    assert_eq!(render(&report()), text, "pure");
}

#[test]
fn labels_are_escaped() {
    assert_eq!(escape_label(r#"a"b\c"#), r#"a\"b\\c"#);
    // Control characters as the terminal text shows them, the backslash of the
    // escape escaped for the format: the value reads back as `x\x0ay`.
    assert_eq!(escape_label("x\ny"), r"x\\x0ay");
    assert_eq!(escape_label("a\u{1b}[2J\u{7}"), r"a\\x1b[2J\\x07");
    let mut r = report();
    // Two sockets in one namespace: its counters once, not per socket nor doubled.
    let mut two = report();
    two.listen.push(ListenReport {
        addr: "127.0.0.1:8443".into(),
        ..one_listener()
    });
    let text = render(&two);
    has(
        &text,
        &[
            "nginx_probe_listen_overflows_total 3",
            "nginx_probe_listen_drops_total 4",
        ],
    );
    assert_eq!(
        text.matches("nginx_probe_listen_overflows_total").count(),
        3,
        "{text}"
    );
    r.listen[0].addr = "[::1]:80".into();
    has(
        &render(&r),
        &[r#"nginx_probe_listen_queue{addr="[::1]:80"} 2"#],
    );
    r.listen.clear();
    r.listen_namespace = None;
    let text = render(&r);
    assert!(
        !text.contains("nginx_probe_listen_overflows_total"),
        "{text}"
    );
    assert!(text.contains("# TYPE nginx_probe_listen_backlog gauge"));
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
        &[
            r#"nginx_probe_syscall_duration_seconds_bucket{worker="0",generation="1",syscall="accept4",le="+Inf"} 0"#,
            r#"nginx_probe_syscall_duration_seconds_sum{worker="0",generation="1",syscall="accept4"} 0"#,
        ],
    );
}

/// (name, label names) of each sample line of `text`, `le` included.
fn sample_labels(text: &str) -> Vec<(String, Vec<String>)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let series = l.rsplit_once(' ').unwrap().0;
            let (name, labels) = series.split_once('{').unwrap_or((series, "}"));
            let labels = labels
                .strip_suffix('}')
                .unwrap()
                .split("\",")
                .filter(|kv| !kv.is_empty())
                .map(|kv| kv.split_once('=').unwrap().0.to_string())
                .collect();
            (name.to_string(), labels)
        })
        .collect()
}

/// `# TYPE` lines of `text`: (family, type).
fn types(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| {
            let (n, k) = l.split_once(' ').unwrap();
            (n.to_string(), k.to_string())
        })
        .collect()
}

/// Extras with every source present: the probe's own cost with BPF stats, a 60 s
/// verdict window, 2 restarts.
fn full_extras(verdicts: &[Verdict]) -> Extras<'_> {
    Extras {
        restarts: 2,
        own: OwnCost {
            cpu_s: Some(0.75),
            rss_bytes: Some(4096),
            programs: Some(vec![model::ProgramCost {
                name: "sys_exit_accept4".into(),
                run_time_ns: 1_500,
                run_count: 3,
            }]),
        },
        window: Some((60.0, verdicts)),
        skip_zero_histograms: false,
    }
}

#[test]
fn families_table_is_consistent() {
    let mut names = BTreeSet::new();
    let mut report_seen = false;
    for f in FAMILIES {
        assert!(names.insert(f.name), "{} twice", f.name);
        assert!(f.name.starts_with("nginx_probe_"), "{}", f.name);
        assert_eq!(
            f.kind == Kind::Counter,
            f.name.ends_with("_total"),
            "{}",
            f.name
        );
        assert!(!f.help.is_empty() && !f.help.contains('\n'), "{}", f.name);
        let by_worker = matches!(
            f.values,
            super::super::prometheus_format::Values::PerWorker(_)
        );
        assert_eq!(by_worker, f.workers != Workers::None, "{}", f.name);
        assert_eq!(
            f.labels.starts_with(&["worker", "generation"]),
            by_worker,
            "{}: worker labels first exactly when per worker",
            f.name
        );
        assert!(!f.labels.contains(&"le"), "{}", f.name);
        if by_worker {
            let s = f.series;
            assert!(s.fixed + s.per_traced + s.per_timed > 0, "{}", f.name);
        } else {
            assert_eq!(
                f.series,
                Series {
                    fixed: 0,
                    per_traced: 0,
                    per_timed: 0
                }
            );
        }
        // The exporter-state families first: they are what a waiting exporter serves.
        let probe = matches!(f.values, super::super::prometheus_format::Values::Probe(_));
        assert!(!(probe && report_seen), "{} after a report family", f.name);
        report_seen |= !probe;
    }
}

#[test]
fn every_family_renders_in_table_order_with_its_labels() {
    let mut r = report();
    r.detail = Some(sampled());
    with_lifecycle(&mut r);
    r.connections = Some(crate::model::connections::sample_report());
    r.access_log = Some(outcomes::sample());
    r.quic = Some(crate::model::quic::sample_report());
    // The error log's per-peer lines and the master's history back to its start.
    let e = r.nginx_errors.get_or_insert_with(Default::default);
    e.upstream_peers = vec![model::PeerErrorsReport {
        peer: "http://127.0.0.2:8602".into(),
        lines: 3,
        ..Default::default()
    }];
    e.history = Some(model::ProcessHistoryReport {
        workers_failed_to_spawn: 38,
        workers_exited_fatal: 1,
        ..Default::default()
    });
    r.stale_logs = vec![crate::model::log_files::StaleLogReport {
        kind: "access_log".into(),
        state: "deleted".into(),
        path_now: "/var/log/nginx/access.log".into(),
        size_bytes: 7575,
        ..Default::default()
    }];
    let text = render_with(&r, &full_extras(&r.verdicts));
    let want: Vec<(String, String)> = FAMILIES
        .iter()
        .map(|f| (f.name.to_string(), f.kind.name().to_string()))
        .collect();
    assert_eq!(types(&text), want, "every family, in order, once");
    for (name, labels) in sample_labels(&text) {
        let (family, le) = FAMILIES
            .iter()
            .find_map(|f| {
                let suffix = name.strip_prefix(f.name)?;
                match (f.kind, suffix) {
                    (_, "") => Some((f, false)),
                    (Kind::Histogram, "_bucket") => Some((f, true)),
                    (Kind::Histogram, "_sum" | "_count") => Some((f, false)),
                    _ => None,
                }
            })
            .unwrap_or_else(|| panic!("{name}: no family"));
        let mut want: Vec<&str> = family.labels.to_vec();
        if le {
            want.push("le");
        }
        assert_eq!(labels, want, "{name}");
    }
    has(
        &text,
        &[
            "nginx_probe_verdict_window_seconds 60",
            r#"nginx_probe_bpf_program_runs_total{program="sys_exit_accept4"} 3"#,
            r#"nginx_probe_bpf_program_run_seconds_total{program="sys_exit_accept4"} 0.0000015"#,
            "nginx_probe_self_resident_memory_bytes 4096",
            "nginx_probe_restarts_total 2",
            "nginx_probe_attached 1",
            "nginx_probe_workers_exited_fatal 1",
            r#"nginx_probe_stale_log_file_bytes{kind="access_log",state="deleted"} 7575"#,
            "# HELP nginx_probe_verdict 1 for each finding active over the recent window (nginx_probe_verdict_window_seconds; see docs/verdicts.md).",
        ],
    );
}

#[test]
fn a_waiting_exporter_serves_the_exporter_families_only() {
    let r = report();
    let text = render_waiting(&full_extras(&r.verdicts));
    let names: Vec<String> = types(&text).into_iter().map(|(n, _)| n).collect();
    let want: Vec<&str> = FAMILIES
        .iter()
        .filter(|f| matches!(f.values, super::super::prometheus_format::Values::Probe(_)))
        .map(|f| f.name)
        .collect();
    assert_eq!(names, want);
    has(
        &text,
        &[
            "nginx_probe_attached 0",
            "nginx_probe_self_cpu_seconds_total 0.75",
        ],
    );
    // Without the probe's own numbers their families are left out, not zero.
    let text = render_waiting(&Extras::default());
    has(&text, &["nginx_probe_bpf_stats_enabled 0"]);
    for absent in [
        "self_cpu_seconds_total",
        "self_resident_memory_bytes",
        "bpf_program_runs_total",
    ] {
        assert!(!text.contains(absent), "{absent}: {text}");
    }
}

#[test]
fn absent_sources_leave_their_families_out() {
    let mut r = report();
    r.listen.clear();
    // The namespace's counters unreadable: no overflow series, not 0.
    r.listen_namespace = None;
    r.stub_status = None;
    r.requests.count = None;
    r.nginx_errors.as_mut().unwrap().readable = false;
    let q = r.cpu_quota.as_mut().unwrap();
    q.nr_periods = None;
    q.throttled_s = None;
    let text = render(&r);
    let names: BTreeSet<String> = types(&text).into_iter().map(|(n, _)| n).collect();
    for absent in [
        "nginx_probe_nginx_connections",
        "nginx_probe_nginx_connections_accepted_total",
        "nginx_probe_listen_overflows_total",
        "nginx_probe_listen_socket_drops_total",
        "nginx_probe_nginx_errors_total",
        "nginx_probe_cpu_quota_periods_total",
        "nginx_probe_cpu_quota_throttled_seconds_total",
        "nginx_probe_verdict_window_seconds",
    ] {
        assert!(!names.contains(absent), "{absent}");
    }
    // Known families with nothing to show now keep their HELP and TYPE.
    for present in [
        "nginx_probe_requests_total",
        "nginx_probe_listen_backlog",
        "nginx_probe_verdict",
    ] {
        assert!(names.contains(present), "{present}");
    }
    assert!(!text.contains("nginx_probe_requests_total{"), "{text}");
    has(
        &text,
        &[
            r#"nginx_probe_error_log_readable{path="/var/log/nginx/error.log"} 0"#,
            "nginx_probe_cpu_quota_throttled_periods_total 45",
            "# HELP nginx_probe_verdict 1 for each finding active over the run so far (see docs/verdicts.md).",
        ],
    );
    r.nginx_errors = None;
    r.cpu_quota = None;
    let text = render(&r);
    assert!(
        !text.contains("error_log_readable") && !text.contains("cpu_quota"),
        "{text}"
    );
}

#[test]
fn skip_zero_histograms_and_proc_write_destinations() {
    let mut r = report();
    r.write_destinations = model::WriteSource::ProcSnapshot;
    let extras = Extras {
        skip_zero_histograms: true,
        ..Extras::default()
    };
    let text = render_with(&r, &extras);
    // Worker 0's accept4 has calls; worker 1 made none: its histograms are left out.
    has(
        &text,
        &[
            r#"nginx_probe_syscall_duration_seconds_count{worker="0",generation="1",syscall="accept4"} 5"#,
        ],
    );
    assert!(
        !text.contains(r#"nginx_probe_syscall_duration_seconds_count{worker="1""#),
        "{text}"
    );
    let dests: BTreeSet<&str> = text
        .lines()
        .filter(|l| l.starts_with(r#"nginx_probe_writes_total{worker="0",generation="1""#))
        .map(|l| {
            l.split("destination=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
        })
        .collect();
    assert_eq!(
        dests,
        BTreeSet::from(["socket", "access_log", "error_log", "file", "other"])
    );
}

/// A `--detail sampled` run's detail report: 3 windows of 0.3 s, 0.9 s attached of
/// 2.5 s (coverage 0.36), 120 requests in windows of 500, attach 1.25 ms.
fn sampled() -> model::sampling::DetailReport {
    // 3 windows of 0.3 s every 1 s, 0.9 s of them in a 2.5 s period.
    model::sampling::DetailReport::new(
        &model::sampling::Schedule::new(0.3, 1.0).unwrap(),
        &model::sampling::Coverage {
            windows: 3,
            open_now: false,
            open_s: 0.9,
            requests: Some(120),
        },
        2.5,
        Some(500),
        (1250, 300, 24),
    )
    .with_accepts_from_uprobe(Some(model::sampling::AcceptsCheck::new(500, 500, 2)))
}

/// The `# HELP` lines of `text`.
fn helps(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.starts_with("# HELP ")).collect()
}

#[test]
fn detail_families_only_when_sampled_with_the_same_help_in_both_modes() {
    let full = report();
    let full_text = render(&full);
    // (HELP texts name them; no family, no sample.)
    assert!(
        !full_text
            .lines()
            .any(|l| l.starts_with("nginx_probe_detail_")
                || l.starts_with("# TYPE nginx_probe_detail_")),
        "{full_text}"
    );
    let mut r = report();
    r.detail = Some(sampled());
    let text = render(&r);
    has(
        &text,
        &[
            "nginx_probe_detail_sampled 1",
            "nginx_probe_detail_coverage_ratio 0.36",
            "nginx_probe_detail_window_seconds_total 0.9",
            "nginx_probe_detail_windows_total 3",
            "nginx_probe_detail_window_attach_seconds 0.00125",
            "nginx_probe_detail_window_requests_total 120",
            "nginx_probe_detail_accepts_uprobe 1",
            "nginx_probe_detail_accepts_agree 1",
        ],
    );
    // Accepts that disagree with nginx's counter: said.
    let mut bad = r.clone();
    bad.detail.as_mut().unwrap().accepts_check =
        Some(model::sampling::AcceptsCheck::new(600, 300, 2));
    has(&render(&bad), &["nginx_probe_detail_accepts_agree 0"]);
    // Metadata does not change with the flag: the sampled exposition is the full one's
    // HELP lines plus the detail families'.
    let sampled_helps: Vec<&str> = helps(&text)
        .into_iter()
        .filter(|l| !l.starts_with("# HELP nginx_probe_detail_"))
        .collect();
    assert_eq!(sampled_helps, helps(&full_text));
    // Unreadable stub_status: no window requests, the rest stays.
    r.detail.as_mut().unwrap().requests_in_windows = None;
    let text = render(&r);
    assert!(
        !types(&text)
            .iter()
            .any(|(n, _)| n == "nginx_probe_detail_window_requests_total"),
        "{text}"
    );
    has(&text, &["nginx_probe_detail_windows_total 3"]);
}

#[test]
fn the_help_of_each_family_says_its_layer() {
    let rare = "accept4, accept, socketpair, pipe2, eventfd2, epoll_create1, dup, dup2, dup3";
    assert_eq!(
        super::super::prometheus_format::rare_syscalls().join(", "),
        rare
    );
    let text = render(&report());
    for f in FAMILIES {
        let help = f.help_text();
        assert!(help.starts_with(f.help), "{}", f.name);
        let said = |s: &str| help.contains(s);
        match f.layer {
            Layer::Continuous => assert_eq!(help, f.help, "{}", f.name),
            Layer::Detail => assert!(said("Under --detail sampled: counted inside detail windows only"), "{help}"),
            Layer::Mixed => assert!(said(&format!("Under --detail sampled: counted inside detail windows only (nginx_probe_detail_coverage_ratio, nginx_probe_detail_window_requests_total); {rare} all the time when nginx_probe_detail_accepts_uprobe is 0")), "{help}"),
            Layer::FullOnly => assert!(said("Absent under --detail sampled"), "{help}"),
        }
        if text.contains(&format!("# TYPE {} ", f.name)) && f.name != "nginx_probe_verdict" {
            has(
                &text,
                &[&format!("# HELP {} {}", f.name, help.replace('\\', "\\\\"))],
            );
        }
    }
    // Every family whose samples are per syscall mixes the layers, and so do accept
    // errors; the accepts are continuous, writes and the event loop detail.
    let layer = |n: &str| FAMILIES.iter().find(|f| f.name == n).unwrap().layer;
    for n in [
        "syscalls_total",
        "syscall_errors_total",
        "syscall_eagain_total",
        "syscall_duration_seconds",
        "fd_errors_total",
        "accept_errors_total",
        "accept_eagain_total",
    ] {
        assert_eq!(layer(&format!("nginx_probe_{n}")), Layer::Mixed, "{n}");
    }
    for n in ["accepts_total", "requests_total", "worker_requests_total"] {
        assert_eq!(layer(&format!("nginx_probe_{n}")), Layer::Continuous, "{n}");
    }
    for n in [
        "writes_total",
        "event_loop_iterations_total",
        "accepted_then_closed_total",
        "upstream_connects_total",
    ] {
        assert_eq!(layer(&format!("nginx_probe_{n}")), Layer::Detail, "{n}");
    }
}

#[test]
fn tls_handshakes_render_exact_values_and_are_absent_when_not_traced() {
    let mut r = report();
    let text = render(&r);
    has(
        &text,
        &[
            "nginx_probe_tls_handshakes_total 3",
            "nginx_probe_tls_handshakes_started_total 4",
            "nginx_probe_tls_handshakes_abandoned_total 1",
            "nginx_probe_tls_handshake_calls_total 7",
            "nginx_probe_tls_handshake_call_seconds_total 0.0015",
            "# TYPE nginx_probe_tls_handshakes_total counter",
        ],
    );
    // The uprobes are continuous: the HELP says nothing of detail windows.
    let help = helps(&text)
        .into_iter()
        .find(|l| l.starts_with("# HELP nginx_probe_tls_handshakes_total "))
        .unwrap();
    assert!(!help.contains("detail"), "{help}");
    // Traced but idle: zeros, not absence.
    r.tls = Some(model::TlsReport::default());
    has(
        &render(&r),
        &[
            "nginx_probe_tls_handshakes_total 0",
            "nginx_probe_tls_handshakes_abandoned_total 0",
        ],
    );
    // nginx's count alone (no libssl mapped, none in the binary): libssl's families
    // left out, not zeros.
    let mut alone = model::TlsReport {
        handshakes: 5,
        ..Default::default()
    };
    alone.set_libssl(Some(&model::LibsslSource::Unavailable("stripped".into())));
    r.tls = Some(alone);
    let text = render(&r);
    has(&text, &["nginx_probe_tls_handshakes_total 5"]);
    for gone in ["started", "abandoned", "handshake_calls", "call_seconds"] {
        assert!(
            !text
                .lines()
                .any(|l| l.starts_with("nginx_probe_tls_") && l.contains(gone)),
            "{gone}: {text}"
        );
    }
    // Without TLS, or --no-tls: every TLS family left out, HELP and TYPE included.
    r.tls = None;
    let text = render(&r);
    assert!(!text.contains("nginx_probe_tls_"), "{text}");
}

/// One worker of `r` shutting down with 3 client connections and 4 MiB, and a worker
/// exit on SIGSEGV beside 2 graceful ones.
fn with_lifecycle(r: &mut Report) {
    use crate::model::worker_lifecycle::*;
    let w = r
        .workers
        .iter_mut()
        .find(|w| w.alive)
        .expect("a live worker");
    w.lifecycle.state = Some(WorkerState::ShuttingDown);
    let mut exits = ExitCounts::default();
    exits.add(Some(&WorkerExit {
        signal: Some(11),
        ..Default::default()
    }));
    for _ in 0..2 {
        exits.add(Some(&WorkerExit {
            code: Some(0),
            ..Default::default()
        }));
    }
    r.lifecycle = Some(LifecycleReport {
        draining: vec![DrainingGeneration {
            reload_generation: 0,
            workers: vec![DrainingWorker {
                pid: w.pid,
                since_unix_s: 100.0,
                client_connections: Some(3),
                upstream_connections: Some(3),
                rss_bytes: Some(4 << 20),
            }],
            since_unix_s: 100.0,
            since_attach: false,
            draining_s: 7.5,
            client_connections: Some(3),
            upstream_connections: Some(3),
            rss_bytes: Some(4 << 20),
        }],
        exits,
        ..Default::default()
    });
}

#[test]
fn lifecycle_families_have_exact_values_and_are_absent_without_states() {
    let mut r = report();
    let text = render_with(&r, &full_extras(&r.verdicts));
    assert!(
        !text.contains("nginx_probe_workers_shutting_down"),
        "{text}"
    );
    assert!(!text.contains("nginx_probe_worker_exits_total{"), "{text}");
    with_lifecycle(&mut r);
    let text = render_with(&r, &full_extras(&r.verdicts));
    for line in [
        "nginx_probe_workers_shutting_down 1",
        "nginx_probe_draining_generations 1",
        "nginx_probe_draining_longest_seconds 7.5",
        "nginx_probe_draining_client_connections 3",
        "nginx_probe_draining_rss_bytes 4194304",
        "nginx_probe_worker_exits_total{status=\"graceful\"} 2",
        "nginx_probe_worker_exits_total{status=\"signal\"} 1",
        "nginx_probe_worker_signal_exits_total{signal=\"11\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
    }
}

#[path = "prometheus_exposition_tests.rs"]
mod exposition;
#[path = "prometheus_listen_tests.rs"]
mod listen;
#[path = "prometheus_outcomes_tests.rs"]
mod outcomes;
