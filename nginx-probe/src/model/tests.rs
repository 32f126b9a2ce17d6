//! Unit tests of the model: deltas, quantiles, per-worker figures, writes, upstream.

use super::*;
use nginx_probe_common::{FD_CREATING, UPSTREAM_CONNECT, UPSTREAM_FDS};

/// A live worker `pid` of generation 0 in slot 0, with nothing sampled yet.
fn live_worker(pid: u32) -> WorkerInfo {
    WorkerInfo {
        pid,
        nspid: vec![pid as i32],
        slot: 0,
        generation: 0,
        alive: true,
        fds: FdReport::default(),
        cpu_ticks: Samples::default(),
        run_delay_ns: Samples::default(),
    }
}

/// One syscall's stats with one timed call of each latency, ns.
pub(crate) fn stats_from(latencies: &[u64]) -> SyscallStats {
    let mut s = SyscallStats::ZERO;
    for &ns in latencies {
        s.count += 1;
        s.record_ns(ns);
    }
    s
}

#[test]
fn quantiles_stay_inside_the_right_bucket() {
    // 99 calls of 1 us, 1 call of 1 ms.
    let mut lat = vec![1_000u64; 99];
    lat.push(1_000_000);
    let s = stats_from(&lat);
    let p50 = quantile_ns(&s.hist, 0.5, s.max_ns);
    let p99 = quantile_ns(&s.hist, 0.99, s.max_ns);
    let p100 = quantile_ns(&s.hist, 1.0, s.max_ns);
    // 1000 ns lives in [512, 1023].
    assert!((512..=1023).contains(&p50), "p50 {p50}");
    assert!((512..=1023).contains(&p99), "p99 {p99}");
    assert_eq!(p100, 1_000_000, "capped at max");
    assert_eq!(quantile_ns(&[0; HIST_BUCKETS], 0.5, 0), 0);
}

#[test]
fn quantile_of_single_sample_is_capped_by_max() {
    let s = stats_from(&[700]);
    assert_eq!(quantile_ns(&s.hist, 0.5, s.max_ns), 700);
    assert_eq!(quantile_ns(&s.hist, 0.99, s.max_ns), 700);
}

#[test]
fn sum_adds_counters_and_maxes_max() {
    let a = stats_from(&[100, 200]);
    let b = stats_from(&[5_000]);
    let s = sum_cpus([&a, &b]);
    assert_eq!(s.count, 3);
    assert_eq!(s.total_ns, 5_300);
    assert_eq!(s.max_ns, 5_000);
    assert_eq!(s.hist.iter().sum::<u64>(), 3);
}

#[test]
fn delta_subtracts_and_bounds_interval_max() {
    let prev = stats_from(&[1_000_000, 100]);
    // Interval adds two calls of ~3 us; all-time max stays 1 ms.
    let cur = sum_cpus([&prev, &stats_from(&[3_000, 3_100])]);
    let d = delta(&cur, &prev);
    assert_eq!(d.count, 2);
    assert_eq!(d.total_ns, 6_100);
    // 3000 and 3100 are in bucket 11: [2048, 4095].
    assert_eq!(d.max_ns, 4_095);
    // A new all-time max is exact.
    let cur2 = sum_cpus([&cur, &stats_from(&[2_000_000])]);
    assert_eq!(delta(&cur2, &cur).max_ns, 2_000_000);
    // Nothing timed: no max.
    assert_eq!(delta(&cur, &cur).max_ns, 0);
}

#[test]
fn accepts_exclude_errors_and_shares_sum_to_one() {
    let mut slot: SlotStats = [SyscallStats::ZERO; SLOT_STATS];
    slot[sys::ACCEPT4 as usize].count = 10;
    slot[sys::ACCEPT4 as usize].errors = 4;
    slot[sys::ACCEPT4 as usize].errs[nginx_probe_common::ErrClass::Eagain as usize] = 3;
    slot[sys::ACCEPT4 as usize].errs[nginx_probe_common::ErrClass::Emfile as usize] = 1;
    slot[sys::ACCEPT as usize].count = 2;
    assert_eq!(tracepoint_accepts(&slot), 8);
    slot[ACCEPTED_IDX].count = tracepoint_accepts(&slot);
    assert_eq!(accepts_of(&slot), 8);
    let info = live_worker(7);
    let all: Vec<usize> = (0..SYSCALL_COUNT).collect();
    let r = worker_report(
        &info,
        &slot,
        16,
        RequestSource::Uprobe,
        2.0,
        2.0,
        &all,
        WriteSource::FdTable,
    );
    assert_eq!(r.accepts, 8);
    assert_eq!(r.accept_share, 0.5);
    assert_eq!(r.accept_errors["EAGAIN"], 3);
    assert_eq!(r.accept_errors["EMFILE"], 1);
    assert_eq!(r.accept_errors["ENFILE"], 0);
    assert_eq!(r.syscalls.len(), SYSCALL_COUNT);
    assert_eq!(r.syscalls["accept4"].errnos.len(), 2);
    assert!(r.syscalls["sendfile"].bytes.is_some());
    assert!(r.syscalls["epoll_wait"].events.is_some());
    assert!(r.syscalls["accept4"].bytes.is_none());
    // No requests: no per-request mix.
    assert_eq!(r.requests.count, Some(0));
    assert!(r.requests.syscalls_per_request.is_empty());
}

#[test]
fn upstream_view_of_connects_and_fd_errors() {
    use nginx_probe_common::{connect_err, ErrClass};
    let mut slot: SlotStats = [SyscallStats::ZERO; SLOT_STATS];
    let c = &mut slot[UPSTREAM_IDX + UPSTREAM_CONNECT as usize];
    for ns in [100_000u64, 120_000, 5_000_000] {
        c.count += 1;
        c.record_ns(ns);
    }
    c.ret_sum = 2;
    c.errors = 1;
    c.errs[connect_err::ECONNREFUSED] = 1;
    let f = &mut slot[UPSTREAM_IDX + UPSTREAM_FDS as usize];
    f.count = 3;
    f.errors = 2;
    f.timed = 3;
    slot[sys::SOCKET as usize].count = 5;
    slot[sys::SOCKET as usize].errs[ErrClass::Emfile as usize] = 2;
    slot[sys::OPENAT as usize].errs[ErrClass::Enfile as usize] = 4;
    let u = upstream_report(&slot, 3, 2.0);
    assert_eq!(u.connects, 3);
    assert_eq!(u.per_s, 1.5);
    assert_eq!(u.connects_per_request, Some(1.0));
    assert_eq!(u.established, 2);
    assert_eq!(u.errors["ECONNREFUSED"], 1);
    assert_eq!(u.errors.len(), 6);
    assert_eq!(u.in_progress, 3);
    assert_eq!(u.closed, 2);
    assert_eq!(u.latency_count, 3);
    assert_eq!(u.latency_max_ns, 5_000_000);
    assert!(
        (65_536..=131_071).contains(&u.latency_p50_ns),
        "{}",
        u.latency_p50_ns
    );
    assert_eq!(u.socket_emfile, 2);
    assert_eq!(upstream_fds_open(&slot), 1);
    assert_eq!(upstream_report(&slot, 0, 2.0).connects_per_request, None);
    let e = fd_errors_report(&slot);
    assert_eq!(e.len(), FD_CREATING.len());
    assert_eq!(
        e["socket"],
        FdErrors {
            emfile: 2,
            enfile: 0
        }
    );
    assert_eq!(e["openat"].enfile, 4);
    assert_eq!(e["accept4"], FdErrors::default());
}

#[test]
fn writes_by_destination_per_request_and_share() {
    use nginx_probe_common::fd_kind;
    let mut slot: SlotStats = [SyscallStats::ZERO; SLOT_STATS];
    // 100 requests: 100 header writev to clients (1 us each), 100 access-log writes
    // (3 us), 50 pwrite64 to temp files (10 us); epoll time does not count.
    slot[sys::WRITEV as usize] = stats_from(&[1_000; 100]);
    slot[sys::WRITE as usize] = stats_from(&[3_000; 100]);
    slot[sys::PWRITE64 as usize] = stats_from(&[10_000; 50]);
    slot[sys::EPOLL_WAIT as usize] = stats_from(&[1_000_000; 100]);
    slot[WRITES_IDX + fd_kind::CLIENT as usize] = stats_from(&[1_000; 100]);
    slot[WRITES_IDX + fd_kind::ACCESS_LOG as usize] = stats_from(&[3_000; 100]);
    slot[WRITES_IDX + fd_kind::ACCESS_LOG as usize].ret_sum = 9_000;
    slot[WRITES_IDX + fd_kind::TEMP_FILE as usize] = stats_from(&[10_000; 50]);
    let w = writes_report(&slot, 100, WriteSource::FdTable);
    assert_eq!(w.len(), nginx_probe_common::FD_KINDS_KERNEL.len());
    assert!(!w.contains_key("socket") && !w.contains_key("file"));
    assert_eq!(w["access_log"].count, 100);
    assert_eq!(w["access_log"].bytes, 9_000);
    assert_eq!(w["access_log"].per_request, Some(1.0));
    assert_eq!(w["access_log"].p50_ns, Some(3_000));
    assert_eq!(w["upstream"].p50_ns, None);
    // busy = 100 us + 300 us + 500 us = 900 us.
    assert_eq!(w["access_log"].share_of_syscall_time, Some(0.333));
    assert_eq!(w["temp_file"].share_of_syscall_time, Some(0.556));
    assert_eq!(w["temp_file"].per_request, Some(0.5));
    assert_eq!(w["upstream"].count, 0);
    assert_eq!(w["upstream"].per_request, Some(0.0));
    let old = writes_report(&slot, 0, WriteSource::ProcSnapshot);
    assert_eq!(
        old.keys().collect::<Vec<_>>(),
        ["access_log", "error_log", "file", "other", "socket"]
    );
    assert_eq!(old["access_log"].per_request, None);
}

#[test]
fn sampled_rates_and_busy_share_divide_by_the_in_window_seconds() {
    // 12 s period, windows of 1 s every 4 s: 3 s attached. 6000 connects and 1.5 s of
    // busy event loop counted in those 3 s.
    let schedule = sampling::Schedule::new(1.0, 4.0).unwrap();
    let cov = sampling::Coverage {
        windows: 3,
        open_s: 3.0,
        requests: Some(6000),
        open_now: false,
    };
    let d = sampling::DetailReport::new(&schedule, &cov, 12.0, Some(24_000), (0, 0, 0));
    assert_eq!(d.in_window_s, 3.0);
    assert_eq!(d.coverage, 0.25);
    assert_eq!(detail_seconds(12.0, Some(&d)), 3.0);
    assert_eq!(detail_seconds(12.0, None), 12.0);
    let mut slot: SlotStats = [SyscallStats::ZERO; SLOT_STATS];
    slot[UPSTREAM_IDX + UPSTREAM_CONNECT as usize].count = 6000;
    slot[LOOP_IDX].count = 100;
    slot[LOOP_IDX].total_ns = 1_500_000_000;
    let info = live_worker(7);
    let report = |detail_s: f64| {
        worker_report(
            &info,
            &slot,
            0,
            RequestSource::StubStatus,
            12.0,
            detail_s,
            &[],
            WriteSource::FdTable,
        )
    };
    let sampled = report(detail_seconds(12.0, Some(&d)));
    assert_eq!(sampled.upstream.per_s, 2000.0);
    assert_eq!(sampled.event_loop.busy_share, 0.5);
    // Full mode: the whole period, as before.
    let full = report(detail_seconds(12.0, None));
    assert_eq!(full.upstream.per_s, 500.0);
    assert_eq!(full.event_loop.busy_share, 0.125);
}
