//! Unit tests of the report builder: which workers a period keeps, the merged
//! aggregate's delta, a window's `/proc` times between snapshots, and the counters the
//! snapshots difference.

use std::collections::{BTreeMap, VecDeque};

use super::*;
use crate::model::{
    local_ports::LocalPortsReport, worker_lifecycle::ExitCounts, Samples, ACCEPTED_IDX,
};

fn slot(accepts: u64) -> SlotStats {
    let mut s = ZERO_SLOT;
    s[ACCEPTED_IDX].count = accepts;
    s
}

fn info(pid: u32, alive: bool, cpu_ticks: Samples) -> WorkerInfo {
    WorkerInfo {
        pid,
        nspid: vec![pid as i32],
        slot: pid,
        generation: 0,
        alive,
        fds: Default::default(),
        cpu_ticks,
        run_delay_ns: Default::default(),
    }
}

fn snap(workers: &[(u32, u64)], proc: &[(u32, u64)], drops0: u64) -> Snapshot {
    let mut drops = [0; nginx_probe_common::DROP_COUNTERS];
    drops[0] = drops0;
    Snapshot {
        workers: workers.iter().map(|&(p, a)| (p, slot(a))).collect(),
        drops,
        proc: proc.iter().map(|&(p, t)| (p, (Some(t), None))).collect(),
        listen_counters: None,
        socket_drops: BTreeMap::new(),
        stub: None,
        coverage: None,
        lifecycle: Default::default(),
        log_files: Vec::new(),
        configured_logs: None,
        local_ports: LocalPortsReport::default(),
        quic_ends: Err("not attached".into()),
    }
}

/// Builds a report of `kind` from `cur`/`prev` with the given tracker workers and
/// merged aggregate.
fn build(
    workers: &BTreeMap<u32, WorkerInfo>,
    merged: Option<MergedInputs>,
    kind: ReportKind,
    cur: &Snapshot,
    prev: Option<&Snapshot>,
) -> Report {
    let closes = ListenerCloseHistory::default();
    build_with(workers, merged, kind, (cur, prev), (&closes, closes.mark()))
}

/// [`build`] with the tracker's listener-close history and its interval mark.
fn build_with(
    workers: &BTreeMap<u32, WorkerInfo>,
    merged: Option<MergedInputs>,
    kind: ReportKind,
    (cur, prev): (&Snapshot, Option<&Snapshot>),
    listener_closes: (&ListenerCloseHistory, ListenerClosesMark),
) -> Report {
    let (totals, respawns, signals) = (ExitCounts::default(), VecDeque::new(), VecDeque::new());
    let (sockets, log_paths) = (BTreeMap::new(), BTreeMap::new());
    let inputs = PeriodInputs {
        master_pid: 1,
        master_nspid: &[1],
        workers,
        merged,
        request_source: RequestSource::Unknown,
        counters_error: Some("not opened"),
        tls_from_nginx: false,
        tls_libssl_sampled: false,
        tls_libssl: None,
        accepts_from_uprobe: false,
        write_source: WriteSource::ProcSnapshot,
        counts_log_opens: false,
        traced: &[],
        untracked: 2,
        events_dropped: 0,
        proc_errors: 0,
        events: &[],
        interval_events: &[],
        new_master_beside: None,
        sampling: None,
        worker_lifecycles: BTreeMap::new(),
        exit_history: ExitHistory {
            recent: Vec::new(),
            totals: &totals,
            respawns: &respawns,
            respawns_total: 0,
            signal_exits: &signals,
            exit_unknown: None,
        },
        config_loads: &Default::default(),
        listen: ListenInputs {
            sockets: &sockets,
            counters_now: None,
            base_total: None,
            base_interval: None,
        },
        listener_closes,
        udp_ports: Vec::new(),
        own_addresses: Vec::new(),
        nginx_errors: Default::default(),
        cpu_quota: None,
        config: None,
        log_paths: &log_paths,
        log_files_at_attach: None,
        access_log: None,
        ticks_per_s: 100,
        now_unix_s: 1_000.0,
    };
    report(&inputs, kind, cur, prev, 10.0, &[], None)
}

#[test]
fn an_interval_leaves_out_workers_gone_for_all_of_it_and_counts_merged_ones_once() {
    let workers = BTreeMap::from([
        (10, info(10, true, Samples::default())),
        (11, info(11, false, Samples::default())),
    ]);
    let merged = Some(MergedInputs {
        workers: 2,
        cpu_ticks: 300,
        run_delay_ns: 0,
    });
    // Worker 12 was merged after `prev`: its 4 accepts were counted under its pid then,
    // and it made 2 more before it exited (the aggregate grew from 1 to 1 + 6).
    let prev = snap(&[(10, 5), (11, 3), (12, 4), (MERGED_KEY, 1)], &[], 7);
    let cur = snap(&[(10, 8), (11, 3), (MERGED_KEY, 7)], &[], 9);
    let r = build(&workers, merged, ReportKind::Interval, &cur, Some(&prev));
    let pids: Vec<u32> = r.workers.iter().map(|w| w.pid).collect();
    assert_eq!(pids, vec![10]);
    assert_eq!(r.workers[0].accepts, 3);
    let m = r.exited_merged.as_ref().expect("merged");
    assert_eq!((m.workers, m.stats.accepts), (2, 2));
    // CPU time of merged workers is known since attach only.
    assert_eq!(m.stats.cpu_s, None);
    assert_eq!(r.drops["exit_without_entry"], 2);
    assert_eq!(r.drops["untracked_workers"], 2);
    assert_eq!(r.time_unix_s, 1_000.0);
    assert!(r.verdicts.is_empty());
}

#[test]
fn a_summary_keeps_every_worker_and_the_merged_cpu_time_since_attach() {
    let workers = BTreeMap::from([
        (10, info(10, true, Samples::default())),
        (11, info(11, false, Samples::default())),
    ]);
    let merged = Some(MergedInputs {
        workers: 1,
        cpu_ticks: 250,
        run_delay_ns: 1_500_000_000,
    });
    let cur = snap(&[(10, 8), (11, 0), (MERGED_KEY, 2)], &[], 0);
    let r = build(&workers, merged, ReportKind::Summary, &cur, None);
    let pids: Vec<u32> = r.workers.iter().map(|w| w.pid).collect();
    assert_eq!(pids, vec![10, 11]);
    assert_eq!(r.workers[0].accept_share, 0.8);
    let m = r.exited_merged.as_ref().expect("merged");
    assert_eq!((m.stats.cpu_s, m.stats.run_delay_s), (Some(2.5), Some(1.5)));
}

#[test]
fn a_window_takes_cpu_time_from_the_two_snapshots() {
    let ticks = Samples {
        first: Some(0),
        interval: Some(0),
        last: Some(900),
    };
    let workers = BTreeMap::from([(10, info(10, true, ticks))]);
    let prev = snap(&[(10, 1)], &[(10, 400)], 0);
    let cur = snap(&[(10, 2)], &[(10, 650)], 0);
    let r = build(&workers, None, ReportKind::Window, &cur, Some(&prev));
    // 250 ticks at 100 per second, not the 900 since attach.
    assert_eq!(r.workers[0].cpu_s, Some(2.5));
    assert!(r.exited_merged.is_none());
    let r = build(&workers, None, ReportKind::Summary, &cur, None);
    assert_eq!(r.workers[0].cpu_s, Some(9.0));
}

/// Lifecycle counters of port 80 with `closed` listeners closed and `resets` resets of
/// their queues.
fn closes_on_80(closed: u64, resets: u64) -> model::connections::LifecycleRaw {
    use nginx_probe_common::lifecycle as lc;
    let mut v = vec![0; lc::LC_PER_PORT];
    v[lc::LISTENERS_CLOSED] = closed;
    v[lc::RST_CLOSED_LISTENER] = resets;
    v[lc::RST_SENT] = resets;
    model::connections::LifecycleRaw {
        ports: BTreeMap::from([(80, v)]),
        ..Default::default()
    }
}

#[test]
fn the_summary_lists_every_listener_close_and_an_interval_its_own() {
    use crate::model::listener_closes::ReloadSeen;
    let workers = BTreeMap::new();
    let mut h = ListenerCloseHistory::default();
    let after = |g| ReloadSeen {
        generation: Some(g),
        since_attach: g,
        ..Default::default()
    };
    h.observe(&closes_on_80(1, 4).ports, 990.0, after(1));
    let mark = h.mark();
    h.observe(&closes_on_80(2, 10).ports, 995.0, after(2));
    let (mut prev, mut cur) = (snap(&[], &[], 0), snap(&[], &[], 0));
    prev.lifecycle.0 = closes_on_80(1, 4);
    cur.lifecycle.0 = closes_on_80(2, 10);
    let r = build_with(
        &workers,
        None,
        ReportKind::Summary,
        (&cur, None),
        (&h, mark),
    );
    let c = r.connections.expect("connections");
    let got: Vec<(Option<u32>, u64, u64)> = c
        .listener_closes
        .iter()
        .map(|e| {
            (
                e.reload_generation,
                e.listeners_closed,
                e.resets_of_queued_connections,
            )
        })
        .collect();
    assert_eq!(got, vec![(Some(1), 1, 4), (Some(2), 1, 6)]);
    assert_eq!(c.listener_closes_merged, None);
    let kind = ReportKind::Interval;
    let r = build_with(&workers, None, kind, (&cur, Some(&prev)), (&h, mark));
    let c = r.connections.expect("connections");
    assert_eq!(c.listener_closes.len(), 1);
    assert_eq!(c.listener_closes[0].seen_unix_s, 995.0);
    // A window of the last 10 s (now 1000) holds both; none without the counters.
    let kind = ReportKind::Window;
    let r = build_with(&workers, None, kind, (&cur, Some(&prev)), (&h, mark));
    assert_eq!(r.connections.expect("connections").listener_closes.len(), 2);
    // The counters read by the period before, the close seen by a refresh after: the
    // interval carries the event without ports.
    let kind = ReportKind::Interval;
    let r = build_with(&workers, None, kind, (&cur, Some(&cur)), (&h, mark));
    let c = r.connections.expect("connections");
    assert!(c.ports.is_empty());
    assert_eq!(c.listener_closes.len(), 1);
    // Nothing counted and no event: no connections.
    let r = build_with(&workers, None, kind, (&cur, Some(&cur)), (&h, h.mark()));
    assert_eq!(r.connections, None);
}
