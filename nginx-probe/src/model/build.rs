//! The report of a period, built from two snapshots and the tracker's state as plain
//! data: where the model layer starts. Start reading at [`report`].
//!
//! collect ends at a [`Snapshot`] (cumulative counters at one instant) and a
//! [`PeriodInputs`] (what the tracker knows besides the counters: its worker list,
//! the merged old workers, the listening sockets, how things are counted, the error
//! log's and the cgroup's figures); [`report`] differences the two snapshots and puts
//! the [`Report`] together. Nothing here reads the system.

use std::collections::BTreeMap;

use crate::model::{
    self,
    config::ConfigReport,
    connections::connections_report,
    listen::{listen_reports, ListenInputs},
    listener_closes::{ListenerCloseHistory, ListenerClosesMark},
    log_files::{stale_logs, LogFileSample},
    nginx::{cpu_quota_report, QuotaInputs},
    nginx_errors::{nginx_errors_report, ErrorLogInputs},
    quic::QuicReport,
    sampling::{AcceptsCheck, Coverage, DetailReport, Sampler},
    snapshot::{Snapshot, MERGED_KEY},
    worker_lifecycle::{lifecycle_report, ExitHistory, WorkerLifecycle},
    Event, MergedReport, Report, ReportKind, RequestSource, SlotStats, StubStatusReport,
    WorkerInfo, WorkerReport, WriteSource, SCHEMA_VERSION, ZERO_SLOT,
};

/// The exited workers merged into one aggregate (beyond `collect::tracker`'s
/// `MAX_EXITED_KEPT`); their counters are in the snapshots under [`MERGED_KEY`].
#[derive(Clone, Copy, Debug)]
pub struct MergedInputs {
    /// How many workers the aggregate holds.
    pub workers: u64,
    /// Their CPU time since attach, clock ticks (`/proc/<pid>/stat` utime + stime),
    /// and time waiting for a CPU, ns (`/proc/<pid>/schedstat` run_delay).
    pub cpu_ticks: u64,
    /// Their time waiting for a CPU since attach, ns (`/proc/<pid>/schedstat` run_delay).
    pub run_delay_ns: u64,
}

/// Everything besides the two snapshots that a report reads, as
/// `collect::tracker::Tracker::period_inputs` hands it over (borrowed from the tracker,
/// plus the few values read from the system when the report is built).
#[derive(Clone, Debug)]
pub struct PeriodInputs<'a> {
    /// The traced master's host pid and its `NSpid` (`/proc/<pid>/status`).
    pub master_pid: u32,
    /// The master's `NSpid` (`/proc/<pid>/status`): its pid in each pid namespace.
    pub master_nspid: &'a [i32],
    /// Every worker the tracker lists, by pid (exited ones until merged away).
    pub workers: &'a BTreeMap<u32, WorkerInfo>,
    /// The merged old exited workers; None when none were merged.
    pub merged: Option<MergedInputs>,
    /// How per-worker requests are counted (`Uprobe` when the uprobes are attached).
    pub request_source: RequestSource,
    /// Why nginx's stub_status counters are unreadable; None when read.
    pub counters_error: Option<&'a str>,
    /// Completed handshakes come from nginx's `ngx_ssl_ocsp_validate` uprobe.
    pub tls_from_nginx: bool,
    /// libssl's handshake figures come from the detail windows only.
    pub tls_libssl_sampled: bool,
    /// Where libssl's uprobes are attached (a shared libssl, the nginx binary, or
    /// nowhere and why); None when the TLS handshake uprobes are not attached (the
    /// report then has no `tls`).
    pub tls_libssl: Option<&'a model::LibsslSource>,
    /// Whether accepts come from the `ngx_get_connection` uprobe.
    pub accepts_from_uprobe: bool,
    /// How write destinations are classified (fd table walk with BTF, or /proc).
    pub write_source: WriteSource,
    /// Whether access-log opens are counted in the kernel.
    pub counts_log_opens: bool,
    /// Indexes into `SYSCALLS` of the traced syscalls.
    pub traced: &'a [usize],
    /// Workers that could not be given a slot, events dropped to bound memory, and
    /// `/proc` reads that failed for another reason than a process being gone: counts
    /// since attach.
    pub untracked: u64,
    /// Events dropped from the tracker's list to bound memory, since attach.
    pub events_dropped: u64,
    /// `/proc` reads that failed for another reason than a process being gone, since attach.
    pub proc_errors: u64,
    /// Worker events kept since attach (the summary's), and those since the current
    /// interval started (the others').
    pub events: &'a [Event],
    /// Worker events since the current interval started (the interval reports').
    pub interval_events: &'a [Event],
    /// A binary upgrade's new master running beside this one now (the tracker's,
    /// from `/proc`).
    pub new_master_beside: Option<super::NewMasterBeside>,
    /// With `--detail sampled`: the windows' schedule and cost.
    pub sampling: Option<&'a Sampler>,
    /// Each listed worker's lifecycle (reload generation, state, exit; from
    /// `collect::worker_state`), by pid.
    pub worker_lifecycles: BTreeMap<u32, WorkerLifecycle>,
    /// The workers' exits and respawns since attach (`collect::worker_state`).
    pub exit_history: ExitHistory<'a>,
    /// The configuration loads since attach (`collect::tracker`'s, from the
    /// `ngx_init_cycle` uretprobe's map read every refresh).
    pub config_loads: &'a model::reloads::ConfigLoadHistory,
    /// nginx's listening sockets and the netns listen counters.
    pub listen: ListenInputs<'a>,
    /// nginx's listening sockets closed since attach, event by event
    /// (`collect::tracker`'s, from the lifecycle counters read every refresh), and
    /// where the list stood when the current interval started.
    pub listener_closes: (&'a ListenerCloseHistory, ListenerClosesMark),
    /// nginx's UDP listening ports (`/proc/<pid>/net/udp{,6}` matched to the master's
    /// socket fds), read when the report is built.
    pub udp_ports: Vec<u16>,
    /// The addresses of nginx's network namespace's interfaces (getifaddrs in it), read
    /// when the report is built: upstream peers among them are nginx's own addresses.
    pub own_addresses: Vec<std::net::IpAddr>,
    /// The error log as the reader knows it for this period (`collect::error_log`'s
    /// counts by class since attach or in the interval), built into `nginx_errors`.
    pub nginx_errors: ErrorLogInputs<'a>,
    /// The workers' CPU quota; None: none or unreadable.
    pub cpu_quota: Option<QuotaInputs<'a>>,
    /// nginx's configuration as read at attach or after the last reload.
    pub config: Option<&'a ConfigReport>,
    /// Paths of the access and error logs seen in the workers' fds -> `access_log` or
    /// `error_log`.
    pub log_paths: &'a BTreeMap<String, &'static str>,
    /// The workers' open log files at the first refresh that knew them (the summary's
    /// start).
    pub log_files_at_attach: Option<&'a [LogFileSample]>,
    /// What nginx's access logs say of the period (`collect::access_log`'s counts since
    /// attach or in the interval); None when no access log is read.
    pub access_log: Option<model::access_log::AccessLogReport>,
    /// Clock ticks per second (`sysconf(_SC_CLK_TCK)`), for the `/proc` CPU times.
    pub ticks_per_s: u64,
    /// The wall clock when the report is built, seconds since the Unix epoch (ms
    /// precision): the end of the period (`time_unix_s`).
    pub now_unix_s: f64,
}

/// One period's shape: which report, between which snapshots, how long.
struct Period<'a> {
    inputs: &'a PeriodInputs<'a>,
    cur: &'a Snapshot,
    prev: Option<&'a Snapshot>,
    kind: ReportKind,
    duration_s: f64,
    summary: bool,
    window: bool,
}

impl Period<'_> {
    /// One worker's row over the period (`model::worker_report` with how things are
    /// counted); access-log opens are unknown where the kernel does not count them.
    fn worker_row(
        &self,
        w: &WorkerInfo,
        s: &SlotStats,
        total_accepts: u64,
        detail_s: f64,
    ) -> WorkerReport {
        let inputs = self.inputs;
        let mut r = model::worker_report(
            w,
            s,
            total_accepts,
            inputs.request_source,
            self.duration_s,
            detail_s,
            inputs.traced,
            inputs.write_source,
        );
        if !inputs.counts_log_opens {
            r.access_log_opens = None;
        }
        if self.cur.lifecycle.1.attached {
            r.connections_closed = Some(model::connections::WorkerCloses::of(s));
        }
        r
    }
}

/// Builds the report for the period between `prev` (None = attach, all zero; a live
/// session passes the snapshot taken when every program was attached) and `cur`,
/// `duration_s` seconds long, stamped with `inputs.now_unix_s` (`time_unix_s`, the end
/// of the period). `missing`: tracepoints that could not be attached; `end_reason`:
/// why the run ended (the final summary). Verdicts are left empty: analysis judges the
/// built report.
///
/// `kind`: `summary` (since attach: `prev` is None or the snapshot at attach; every
/// worker seen is listed), `interval` (since the tracker's
/// last `start_interval`, which is when `prev` was taken), or `window` (any `prev`: CPU
/// time, run delay and listen drops are taken from the two snapshots; the accept queue
/// maximum is not known per window, so `queue_max` is the last sample).
pub fn report(
    inputs: &PeriodInputs,
    kind: ReportKind,
    cur: &Snapshot,
    prev: Option<&Snapshot>,
    duration_s: f64,
    missing: &[String],
    end_reason: Option<String>,
) -> Report {
    let p = Period {
        inputs,
        cur,
        prev,
        kind,
        duration_s,
        summary: kind == ReportKind::Summary,
        window: kind == ReportKind::Window,
    };
    let (per_worker, merged) = deltas(&p);
    let total_accepts: u64 = per_worker
        .iter()
        .map(|(_, s)| model::accepts_of(s))
        .chain(merged.iter().map(model::accepts_of))
        .sum();
    let quic = QuicReport::new(
        inputs.udp_ports.clone(),
        stub_growth(&p, |c| c.accepted),
        total_accepts,
    )
    .map(|q| {
        q.with_ends(model::quic::quic_ends_between(
            &cur.quic_ends,
            prev.map(|p| &p.quic_ends),
        ))
    });
    let detail = detail(&p, total_accepts, per_worker.len(), quic.is_some());
    // Rates and busy shares of detail figures divide by the seconds it counted.
    let detail_s = model::detail_seconds(duration_s, detail.as_ref());
    let workers = worker_rows(&p, &per_worker, total_accepts, detail_s);
    let exited_merged = merged_row(&p, merged.as_ref(), total_accepts, detail_s);
    let stub_status = stub_status(&p);
    let all_stats = sum_slots(&per_worker, merged.as_ref());
    let requests = model::request_totals(
        stub_status.as_ref(),
        inputs.request_source,
        inputs.counters_error,
        inputs.access_log.as_ref(),
        &all_stats,
        duration_s,
    );
    let mut tls = tls(inputs, &all_stats, detail.is_some());
    let mut requests = requests;
    traced_only(&mut requests.syscalls_per_request, inputs.traced);
    if let Some(q) = &quic {
        per_connection_with_quic(q, total_accepts, &mut requests, tls.as_mut());
    }
    let lifecycle = lifecycle_report(
        &inputs.exit_history,
        &workers,
        inputs.now_unix_s,
        duration_s,
        p.summary,
    );
    let (requests, workers) = match &detail {
        Some(d) => model::sampling::sampled_ratios(requests, workers, &all_stats, d),
        None => (requests, workers),
    };
    let parts = Parts {
        workers,
        requests,
        stub_status,
        tls,
        exited_merged,
        detail,
        lifecycle,
        config_loads: Some(config_loads(inputs, duration_s, p.summary)),
        quic,
    };
    assemble(&p, parts, missing, end_reason)
}

/// The period's configuration loads, with nginx's reason for a failed one from its
/// error log (the failed load's process's last `[emerg]` line, matched by pid).
fn config_loads(
    inputs: &PeriodInputs,
    duration_s: f64,
    summary: bool,
) -> model::reloads::ConfigLoadsReport {
    let mut c = inputs
        .config_loads
        .report(inputs.now_unix_s - duration_s, summary);
    c.quote_emerg(
        &inputs.nginx_errors.emerg_lines,
        inputs.master_pid,
        inputs.master_nspid.last().map(|&p| p as u32),
    );
    c
}

/// The counters of every worker of the period, the merged aggregate's included.
fn sum_slots(per_worker: &[(&WorkerInfo, SlotStats)], merged: Option<&SlotStats>) -> SlotStats {
    let mut all = ZERO_SLOT;
    for (_, s) in per_worker {
        model::add_slot(&mut all, s);
    }
    if let Some(m) = merged {
        model::add_slot(&mut all, m);
    }
    all
}

/// nginx's UDP listeners (QUIC): requests and handshakes include connections no accept
/// returned, so per connection is over both (nginx's accepted counter), or unknown when
/// that counter is.
fn per_connection_with_quic(
    q: &QuicReport,
    total_accepts: u64,
    requests: &mut model::RequestTotals,
    tls: Option<&mut model::TlsReport>,
) {
    let all = q.connections.map(|n| n + total_accepts).filter(|n| *n > 0);
    let per = |x: u64| all.map(|n| model::round3(x as f64 / n as f64));
    requests.per_connection = requests.count.and_then(per);
    if let Some(t) = tls {
        t.per_connection = per(t.handshakes);
    }
}

/// Each listed worker's change between the snapshots, and the merged aggregate's.
///
/// An interval report leaves out workers that were gone for all of it. Workers merged
/// since `prev` were counted there under their own pids: they are added to the
/// previous aggregate, or the interval would count their whole lives again.
fn deltas<'a>(p: &Period<'a>) -> (Vec<(&'a WorkerInfo, SlotStats)>, Option<SlotStats>) {
    let (cur, prev) = (p.cur, p.prev);
    let zero = ZERO_SLOT;
    let mut per_worker: Vec<(&WorkerInfo, SlotStats)> = Vec::new();
    for w in p.inputs.workers.values() {
        let c = cur.workers.get(&w.pid).unwrap_or(&zero);
        let pw = prev.and_then(|p| p.workers.get(&w.pid)).unwrap_or(&zero);
        let d = model::delta_slot(c, pw);
        if !p.summary && prev.is_some() && !w.alive && d.iter().all(|s| s.count == 0) {
            continue;
        }
        per_worker.push((w, d));
    }
    let merged = p.inputs.merged.map(|_| {
        let c = cur.workers.get(&MERGED_KEY).unwrap_or(&zero);
        let mut base = *prev
            .and_then(|p| p.workers.get(&MERGED_KEY))
            .unwrap_or(&zero);
        if let Some(prev) = prev {
            for (pid, stats) in &prev.workers {
                if *pid != MERGED_KEY && !cur.workers.contains_key(pid) {
                    model::add_slot(&mut base, stats);
                }
            }
        }
        model::delta_slot(c, &base)
    });
    (per_worker, merged)
}

/// Growth of one stub_status counter over the period (None: unreadable now).
fn stub_growth(p: &Period, which: impl Fn(&model::nginx::StubCounts) -> u64) -> Option<u64> {
    p.cur.stub.map(|c| {
        let base = p.prev.and_then(|p| p.stub).unwrap_or_default();
        which(&c).saturating_sub(which(&base))
    })
}

/// With `--detail sampled`: the windows' part of the period, with the check of the
/// uprobe's accepts against nginx's `accepted` when accepts come from the uprobe.
fn detail(p: &Period, total_accepts: u64, workers: usize, quic_udp: bool) -> Option<DetailReport> {
    let (cur, prev) = (p.cur, p.prev);
    // nginx's requests in the period (stub_status), for the detail report.
    let stub_requests = stub_growth(p, |c| c.requests);
    p.inputs.sampling.zip(cur.coverage).map(|(s, c)| {
        let base = prev.and_then(|p| p.coverage).unwrap_or(Coverage {
            requests: Some(0),
            ..Default::default()
        });
        let d = DetailReport::new(
            &s.schedule,
            &c.since(&base),
            p.duration_s,
            stub_requests,
            s.cost,
        );
        if p.inputs.accepts_from_uprobe {
            let check = stub_growth(p, |c| c.accepted).map(|accepted| {
                let check = AcceptsCheck::new(total_accepts, accepted, workers);
                if quic_udp {
                    check.with_quic_udp(workers)
                } else {
                    check
                }
            });
            d.with_accepts_from_uprobe(check)
        } else {
            d
        }
    })
}

/// One report row per worker with changes in the period: its figures
/// ([`model::worker_report`]), lifecycle, CPU time and run delay (window: between the
/// two snapshots' `/proc` samples; otherwise the tracker's samples since attach or the
/// interval's start), and its open upstream fds.
fn worker_rows(
    p: &Period,
    per_worker: &[(&WorkerInfo, SlotStats)],
    total_accepts: u64,
    detail_s: f64,
) -> Vec<WorkerReport> {
    let (cur, inputs) = (p.cur, p.inputs);
    let (summary, window) = (p.summary, p.window);
    let tck = inputs.ticks_per_s as f64;
    // Growth of a /proc counter between two snapshots (None: unknown at either end).
    let between = |prev: &Snapshot, pid: u32, which: usize| -> Option<u64> {
        let pick = |s: &Snapshot| {
            s.proc
                .get(&pid)
                .and_then(|v| if which == 0 { v.0 } else { v.1 })
        };
        Some(pick(cur)?.saturating_sub(pick(prev)?))
    };
    per_worker
        .iter()
        .map(|(w, s)| {
            let (cpu_ticks, run_delay_ns) = match (window, p.prev) {
                (true, Some(prev)) => (between(prev, w.pid, 0), between(prev, w.pid, 1)),
                // A window that starts at attach is the summary's.
                _ => (
                    w.cpu_ticks.delta(summary || window),
                    w.run_delay_ns.delta(summary || window),
                ),
            };
            let cpu_s = cpu_ticks.map(|t| t as f64 / tck);
            let run_delay_s = run_delay_ns.map(|ns| ns as f64 / 1e9);
            let mut r = p.worker_row(w, s, total_accepts, detail_s);
            r.lifecycle = inputs
                .worker_lifecycles
                .get(&w.pid)
                .cloned()
                .unwrap_or_default();
            r.cpu_s = cpu_s.map(model::round3);
            r.run_delay_s = run_delay_s.map(model::round3);
            // A gauge: from the cumulative counters, and none held by the dead.
            // Sampled: closes between windows are not seen, so unknown.
            r.upstream.fds_open = inputs.sampling.is_none().then_some(if w.alive {
                cur.workers
                    .get(&w.pid)
                    .map(model::upstream_fds_open)
                    .unwrap_or(0)
            } else {
                0
            });
            r
        })
        .collect()
}

/// The merged old workers' row (`pid` 0), CPU time and run delay known since attach
/// only (an interval's share is not kept).
fn merged_row(
    p: &Period,
    merged: Option<&SlotStats>,
    total_accepts: u64,
    detail_s: f64,
) -> Option<MergedReport> {
    let inputs = p.inputs;
    let m = inputs.merged?;
    let d = merged?;
    let tck = inputs.ticks_per_s as f64;
    let info = WorkerInfo {
        pid: 0,
        nspid: Vec::new(),
        slot: 0,
        generation: 0,
        alive: false,
        fds: Default::default(),
        cpu_ticks: Default::default(),
        run_delay_ns: Default::default(),
    };
    let mut stats = p.worker_row(&info, d, total_accepts, detail_s);
    if p.summary {
        stats.cpu_s = Some(model::round3(m.cpu_ticks as f64 / tck));
        stats.run_delay_s = Some(model::round3(m.run_delay_ns as f64 / 1e9));
    }
    Some(MergedReport {
        workers: m.workers,
        stats,
    })
}

/// nginx's stub_status counters over the period (gauges: the last read).
fn stub_status(p: &Period) -> Option<StubStatusReport> {
    p.cur.stub.map(|c| {
        let b = p.prev.and_then(|p| p.stub).unwrap_or_default();
        let accepted = c.accepted.saturating_sub(b.accepted);
        let handled = c.handled.saturating_sub(b.handled);
        StubStatusReport {
            accepted,
            handled,
            dropped: accepted.saturating_sub(handled),
            requests: c.requests.saturating_sub(b.requests),
            active: c.active,
            reading: c.reading,
            writing: c.writing,
            waiting: c.waiting,
            rebases: c.rebases.saturating_sub(b.rebases),
        }
    })
}

/// The TLS handshakes of all workers together, when the TLS uprobes are attached.
/// Sampled: handshake time is continuous, busy time only in windows; their ratio would
/// be inflated by 1/coverage, so it is unknown.
fn tls(inputs: &PeriodInputs, all_stats: &SlotStats, sampled: bool) -> Option<model::TlsReport> {
    inputs.tls_libssl.is_some().then(|| {
        let mut t = model::tls_report(all_stats, inputs.tls_from_nginx, inputs.tls_libssl_sampled);
        t.set_libssl(inputs.tls_libssl);
        if sampled {
            t.share_of_worker_busy = None;
        }
        t
    })
}

/// The drop counters over the period, with the tracker's counts since attach.
fn drops(p: &Period) -> BTreeMap<String, u64> {
    let mut drops_now = p.cur.drops;
    if let Some(prev) = p.prev {
        for (d, before) in drops_now.iter_mut().zip(prev.drops.iter()) {
            *d = d.saturating_sub(*before);
        }
    }
    let mut drops = model::drops_map(&drops_now);
    drops.insert("untracked_workers".into(), p.inputs.untracked);
    drops.insert("events_dropped".into(), p.inputs.events_dropped);
    if p.inputs.proc_errors > 0 {
        drops.insert("proc_read_errors".into(), p.inputs.proc_errors);
    }
    drops
}

/// The namespace-wide listen counters over the period (a window's from its two
/// snapshots); None when unreadable at either end.
fn listen_namespace(p: &Period) -> Option<model::ListenNamespaceReport> {
    match (p.window, p.prev) {
        (true, Some(prev)) => {
            model::ListenNamespaceReport::between(p.cur.listen_counters, prev.listen_counters)
        }
        _ => super::listen::listen_namespace(&p.inputs.listen, p.summary || p.window),
    }
}

/// The listening sockets over the period; a window takes the netns counters and each
/// socket's drops from the two snapshots, and its last queue sample as `queue_max`.
fn listen(p: &Period) -> Vec<model::ListenReport> {
    let l = &p.inputs.listen;
    let mut listen = listen_reports(l, p.summary || p.window);
    if p.window {
        if let Some(prev) = p.prev {
            let (overflows, drops) = match (p.cur.listen_counters, prev.listen_counters) {
                (Some((o, d)), Some((po, pd))) => (o.saturating_sub(po), d.saturating_sub(pd)),
                _ => (0, 0),
            };
            for (r, (ino, st)) in listen.iter_mut().zip(l.sockets.iter()) {
                r.overflows = overflows;
                r.drops = drops;
                r.socket_drops = match (prev.socket_drops.get(ino).copied().flatten(), st.drops_now)
                {
                    (Some(b), Some(n)) => Some(n.wrapping_sub(b) as u64),
                    _ => None,
                };
                r.queue_max = st.queue_now;
            }
        }
    }
    listen
}

/// The connections part with the period's listener-close events: since attach for the
/// summary, since the interval's start for an interval, those seen within the window
/// for a window. A period with events and no counter change (the period before read
/// the close's counters, a refresh saw it after) gets a part without ports for them.
fn with_listener_closes(
    p: &Period,
    c: Option<model::connections::ConnectionsReport>,
    meta: &model::connections::LifecycleMeta,
) -> Option<model::connections::ConnectionsReport> {
    let (history, mark) = &p.inputs.listener_closes;
    let (events, merged) = match p.kind {
        ReportKind::Summary => history.of_period(None),
        ReportKind::Interval => history.of_period(Some(mark)),
        ReportKind::Window => (history.seen_since(p.inputs.now_unix_s - p.duration_s), None),
    };
    if c.is_none() && events.is_empty() && merged.is_none() {
        return None;
    }
    let mut c = c.unwrap_or_else(|| model::connections::empty_report(meta));
    c.listener_closes = events;
    c.listener_closes_merged = merged;
    Some(c)
}

/// `c` with each upstream peer whose IP is one of `own` (nginx's network namespace's
/// addresses) marked [`model::upstream_lifecycle::PeerLifecycle::own_address`].
fn with_own_addresses(
    mut c: model::connections::ConnectionsReport,
    own: &[std::net::IpAddr],
) -> model::connections::ConnectionsReport {
    for p in &mut c.upstream_peers {
        p.own_address = p
            .peer
            .parse::<std::net::SocketAddr>()
            .is_ok_and(|a| own.contains(&a.ip()));
    }
    c
}

/// The parts of a report built from the deltas, for [`assemble`].
struct Parts {
    workers: Vec<WorkerReport>,
    requests: model::RequestTotals,
    stub_status: Option<StubStatusReport>,
    tls: Option<model::TlsReport>,
    exited_merged: Option<MergedReport>,
    detail: Option<DetailReport>,
    lifecycle: Option<model::worker_lifecycle::LifecycleReport>,
    config_loads: Option<model::reloads::ConfigLoadsReport>,
    quic: Option<QuicReport>,
}

/// nginx's listening sockets ([`listen`]), and its own hops among its accepts and
/// requests (a `listen unix:`, a proxy to its own listener, [`model::own_hops`]): per
/// connection then says nothing of its clients, and is unknown with the reason.
fn listen_and_own_hops(
    requests: &mut model::RequestTotals,
    p: &Period,
    connections: Option<&model::connections::ConnectionsReport>,
) -> Vec<model::ListenReport> {
    let listen = listen(p);
    if let Some(why) = model::own_hops(p.inputs.config, connections, &listen) {
        requests.per_connection = None;
        requests.per_connection_unknown = Some(why);
    }
    listen
}

/// The access log's section with its lines over nginx's own count of the same period
/// (stub_status; never over an estimate).
fn with_share_logged(
    a: Option<model::access_log::AccessLogReport>,
    requests: &model::RequestTotals,
) -> Option<model::access_log::AccessLogReport> {
    a.map(|mut a| {
        (a.share_logged, a.nginx_requests) = match (requests.source, requests.count) {
            (model::RequestSource::StubStatus, Some(n)) if n > 0 => (
                Some((a.lines as f64 / n as f64 * 1000.0).round() / 1000.0),
                Some(n),
            ),
            _ => (None, None),
        };
        a
    })
}

/// The report from its parts and what the inputs and snapshots give directly.
fn assemble(
    p: &Period,
    mut parts: Parts,
    missing: &[String],
    end_reason: Option<String>,
) -> Report {
    let (cur, prev, inputs) = (p.cur, p.prev, p.inputs);
    let (lc, lc_meta) = &cur.lifecycle;
    let connections = with_listener_closes(
        p,
        connections_report(lc, prev.map(|p| &p.lifecycle.0), lc_meta),
        lc_meta,
    )
    .map(|c| with_own_addresses(c, &inputs.own_addresses));
    let listen = listen_and_own_hops(&mut parts.requests, p, connections.as_ref());
    let access_log = with_share_logged(inputs.access_log.clone(), &parts.requests);
    Report {
        schema: SCHEMA_VERSION,
        // Judged by analysis once the report is built (cli's session does it).
        verdicts: Vec::new(),
        not_judged: Vec::new(),
        kind: p.kind,
        time_unix_s: inputs.now_unix_s,
        master_pid: inputs.master_pid,
        master_nspid: inputs.master_nspid.to_vec(),
        duration_s: p.duration_s,
        workers: parts.workers,
        requests: parts.requests,
        stub_status: parts.stub_status,
        tls: parts.tls,
        listen,
        listen_namespace: listen_namespace(p),
        write_destinations: inputs.write_source,
        logs: inputs
            .log_paths
            .iter()
            .map(|(p, k)| (p.clone(), k.to_string()))
            .collect(),
        drops: drops(p),
        exited_merged: parts.exited_merged,
        nginx_errors: Some(nginx_errors_report(&inputs.nginx_errors)),
        config_loads: parts.config_loads,
        cpu_quota: inputs.cpu_quota.map(|q| cpu_quota_report(&q, p.summary)),
        traced_syscalls: inputs
            .traced
            .iter()
            .map(|&i| nginx_probe_common::SYSCALLS[i].name.to_string())
            .collect(),
        missing_tracepoints: missing.to_vec(),
        events: if p.summary {
            inputs.events.to_vec()
        } else {
            inputs.interval_events.to_vec()
        },
        new_master_beside: inputs.new_master_beside,
        end_reason,
        detail: parts.detail,
        lifecycle: parts.lifecycle,
        config: inputs.config.cloned(),
        connections,
        connections_not_traced: lc_meta
            .not_traced
            .as_ref()
            .map(|why| format!("the connection lifecycle tracepoints are not attached ({why})")),
        quic: parts.quic,
        local_ports: Some(cur.local_ports.clone()),
        access_log,
        master: None,
        stale_logs: stale_logs(
            &cur.log_files,
            prev.map(|p| p.log_files.as_slice())
                .or(inputs.log_files_at_attach),
            cur.configured_logs.as_deref(),
            inputs
                .config
                .is_some_and(model::config::variable_access_paths),
        ),
    }
}

#[cfg(test)]
#[path = "build_tests.rs"]
mod tests;

/// Keeps in `per_request` (syscall name -> calls per request) the `traced` syscalls
/// (indexes into `SYSCALLS`) only, those the syscall table shows: a program attached
/// for another count (the access-log opens' on sys_exit_openat) also counts its calls
/// (trial 20: "openat 1.00" per request with no openat row).
pub(crate) fn traced_only(
    per_request: &mut std::collections::BTreeMap<String, f64>,
    traced: &[usize],
) {
    per_request.retain(|name, _| {
        traced
            .iter()
            .any(|&i| nginx_probe_common::SYSCALLS[i].name == name)
    });
}
