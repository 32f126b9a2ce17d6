//! Unit tests of [`super`]: spreads, significance, sentences, runs per side.

use super::*;

#[test]
fn spread_is_median_and_half_iqr() {
    let s = spread(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
    assert_eq!(s.median, 3.0);
    assert_eq!(s.half_iqr, 1.0);
    assert_eq!(spread(&[7.0]).unwrap().half_iqr, 0.0);
    assert!(spread(&[]).is_none());
}

#[test]
fn significance_needs_intervals_and_a_margin_over_noise() {
    let sp = |m: f64, h: f64, n: usize| {
        Some(Spread {
            n,
            median: m,
            half_iqr: h,
        })
    };
    assert_eq!(
        judge(sp(1.0, 0.0, 5), sp(0.01, 0.0, 5), Some(-0.99)),
        Significance::BeyondNoise
    );
    assert_eq!(
        judge(sp(100.0, 20.0, 5), sp(130.0, 20.0, 5), Some(0.3)),
        Significance::WithinNoise
    );
    assert_eq!(
        judge(sp(100.0, 1.0, 5), sp(102.0, 1.0, 5), Some(0.02)),
        Significance::Unchanged
    );
    assert_eq!(
        judge(sp(1.0, 0.0, 2), sp(0.0, 0.0, 5), Some(-1.0)),
        Significance::NoiseUnknown
    );
}

#[test]
fn sentence_names_the_largest_changes_and_verdicts() {
    let m = |key: &str, b: f64, a: f64, sig| {
        let (label, unit) = metric_def(key);
        MetricChange {
            key: key.into(),
            label,
            unit,
            before: Some(b),
            after: Some(a),
            relative: Some((a - b) / b),
            before_intervals: None,
            after_intervals: None,
            significance: sig,
        }
    };
    let ms = vec![
        m("requests_per_s", 1000.0, 1100.0, Significance::WithinNoise),
        m(
            "access_log_writes_per_request",
            1.0,
            0.01,
            Significance::BeyondNoise,
        ),
        m("write_us_per_request", 12.0, 0.6, Significance::BeyondNoise),
    ];
    let v = VerdictChanges {
        went_away: vec!["access_log_unbuffered".into()],
        ..Default::default()
    };
    assert_eq!(
        sentence(&ms, &v),
        "Access-log writes per request fell from 1.00 to 0.01 (-99%); worker write time per request fell from 12.0 us to 0.60 us (-95%); verdict access_log_unbuffered went away."
    );
    assert!(sentence(&ms[..1], &VerdictChanges::default()).starts_with("No metric moved"));
}

/// Repeated runs per side: the noise is the runs' spread, whole-run values their
/// medians, and a verdict counts when most runs of a side have it.
#[test]
fn runs_per_side_use_the_runs_as_noise() {
    let real = include_str!("../testdata/two_workers_300_connections.jsonl");
    let rec = Recording::parse("real", real).expect("the real recording parses");
    let base = rec.summary.clone().expect("a summary");
    let with_accepts = |factor: u64, verdict: bool| {
        let mut r = rec.clone();
        let s = r.summary.as_mut().unwrap();
        for w in &mut s.workers {
            w.accepts *= factor;
        }
        if verdict {
            s.verdicts.push(crate::model::Verdict::new(
                "made_up_for_the_test",
                crate::model::Severity::Warning,
                Default::default(),
                &[],
                String::new(),
            ));
        }
        r
    };
    let before: Vec<Recording> = (0..3).map(|_| with_accepts(1, false)).collect();
    let after = [
        with_accepts(10, true),
        with_accepts(11, true),
        with_accepts(12, false),
    ];
    let side = |v: &[Recording], p: &str| -> Vec<(String, Recording)> {
        v.iter()
            .enumerate()
            .map(|(i, r)| (format!("{p}{i}"), r.clone()))
            .collect()
    };
    let (b, a) = (side(&before, "A"), side(&after, "B"));
    let bv: Vec<(&str, &Recording)> = b.iter().map(|(n, r)| (n.as_str(), r)).collect();
    let av: Vec<(&str, &Recording)> = a.iter().map(|(n, r)| (n.as_str(), r)).collect();
    let c = compare_runs(&bv, &av);
    assert_eq!(c.noise_from, NoiseSource::Runs);
    assert_eq!(c.before, "A0, A1, A2 (3 runs)");
    let accepts = c.metrics.iter().find(|m| m.key == "accepts_per_s").unwrap();
    let one = metrics(&base)["accepts_per_s"];
    assert!(
        (accepts.after.unwrap() - 11.0 * one).abs() < 1e-6 * one,
        "{accepts:?}"
    );
    assert_eq!(accepts.after_intervals.unwrap().n, 3);
    assert_eq!(accepts.significance, Significance::BeyondNoise);
    let requests = c
        .metrics
        .iter()
        .find(|m| m.key == "requests_per_s")
        .unwrap();
    assert_eq!(requests.significance, Significance::Unchanged);
    // Peak fds far below the limit on both sides: said so, never "unchanged" (which
    // means under 5%; trial 21: -10% said "unchanged").
    let fds = c.metrics.iter().find(|m| m.key == "fd_peak_share").unwrap();
    assert_eq!(fds.significance, Significance::FarFromLimit, "{fds:?}");
    assert_eq!(
        c.verdicts.appeared,
        vec!["made_up_for_the_test".to_string()]
    );
}

/// Trial 17: every request of a run in one of its intervals: "0±0 (n=5)" for a run
/// of 156/s. A side whose whole-run value lies outside its intervals' middle half had
/// no steady load: its change is said with the noise unknown, never beyond noise.
#[test]
fn a_burst_in_one_interval_leaves_the_noise_unknown() {
    let real = include_str!("../testdata/two_workers_300_connections.jsonl");
    let rec = Recording::parse("real", real).expect("the real recording parses");
    assert!(
        rec.intervals.len() >= MIN_INTERVALS,
        "{}",
        rec.intervals.len()
    );
    let mut burst = rec.clone();
    let (first, rest) = burst.intervals.split_first_mut().unwrap();
    for r in rest {
        for (w, w0) in r.workers.iter_mut().zip(first.workers.iter_mut()) {
            w0.accepts += w.accepts;
            w.accepts = 0;
        }
    }
    let mut after = rec.clone();
    for r in after.intervals.iter_mut().chain(after.summary.as_mut()) {
        for w in &mut r.workers {
            w.accepts *= 3;
        }
    }
    let c = compare("burst", &burst, "after", &after);
    let accepts = c.metrics.iter().find(|m| m.key == "accepts_per_s").unwrap();
    assert_eq!(accepts.before_intervals.unwrap().median, 0.0, "{accepts:?}");
    assert_eq!(accepts.significance, Significance::Unsteady, "{accepts:?}");
    // Trial 18: the burst's shape is said, not only "not steady".
    let mut shaped = burst.clone();
    let n = shaped.intervals.len() as u64;
    for (i, r) in shaped.intervals.iter_mut().enumerate() {
        r.requests.count = Some(if i == 0 { 3000 } else { 0 });
    }
    // An estimated count says nothing of the shape; nginx's counter does.
    let c = compare("burst", &shaped, "after", &after);
    assert!(
        !c.caveats.iter().any(|c| c.contains("not spread")),
        "{:?}",
        c.caveats
    );
    for r in shaped.intervals.iter_mut() {
        r.requests.source = crate::model::RequestSource::StubStatus;
    }
    let c = compare("burst", &shaped, "after", &after);
    let want = format!("burst's load was not spread over its run: its busiest interval held 3000 of its 3000 requests (100%, stub_status), and 1 of its {n} intervals had any");
    assert!(c.caveats.contains(&want), "{:?}", c.caveats);
    assert!(
        !c.caveats.iter().any(|c| c.starts_with("after's load")),
        "{:?}",
        c.caveats
    );
    assert!(
        !c.caveats.iter().any(|c| c.contains("interval(s)")),
        "{:?}",
        c.caveats
    );
    // Trial 19: a 2-interval burst: its shape, and why its noise is unknown.
    shaped.intervals.truncate(2);
    let c = compare("burst", &shaped, "after", &after);
    for want in [
        "burst's load was not spread over its run: its busiest interval held 3000 of its 3000 requests (100%, stub_status), and 1 of its 2 intervals had any",
        "burst has 2 interval(s), fewer than the 3 its noise is estimated from: every change against it is 'noise unknown' (a longer run, or a shorter --interval, records more)",
    ] {
        assert!(c.caveats.iter().any(|c| c == want), "{want} not in {:?}", c.caveats);
    }
    shaped.intervals[1].requests.count = Some(1);
    let c = compare("burst", &shaped, "after", &after);
    assert!(
        !c.caveats.iter().any(|c| c.contains("not spread")),
        "{:?}",
        c.caveats
    );
    // The recording as made against itself scaled: judged on its intervals' noise.
    let c = compare("real", &rec, "after", &after);
    let accepts = c.metrics.iter().find(|m| m.key == "accepts_per_s").unwrap();
    assert_eq!(
        accepts.significance,
        Significance::WithinNoise,
        "{accepts:?}"
    );
}

#[test]
fn accept_shares_are_among_live_workers_and_unknown_accepts_are_not_compared() {
    let real = include_str!("../testdata/two_workers_300_connections.jsonl");
    let rec = Recording::parse("real", real).expect("the real recording parses");
    let mut s = rec.summary.clone().expect("a summary");
    let accepts: Vec<u64> = s.workers.iter().map(|w| w.accepts).collect();
    let live_max = *accepts.iter().max().unwrap() as f64 / accepts.iter().sum::<u64>() as f64;
    assert!(metrics(&s).contains_key("accepts_per_request"));
    // A generation that exited in the period (a reload) took as many accepts again:
    // the live workers' shares are unchanged.
    let mut old = s.workers.clone();
    for w in &mut old {
        w.alive = false;
        w.pid += 100_000;
    }
    s.workers.extend(old);
    // As the tracker writes them: shares of every accept of the period.
    let all: u64 = s.workers.iter().map(|w| w.accepts).sum();
    for w in &mut s.workers {
        w.accept_share = w.accepts as f64 / all as f64;
    }
    let m = metrics(&s);
    assert!(
        (m["busiest_accept_share"] - live_max).abs() < 1e-9,
        "{} vs {live_max}",
        m["busiest_accept_share"]
    );
    // Accepts the uprobe counted that disagree with nginx's counter: no accept metric.
    let d = crate::model::sampling::DetailReport::new(
        &crate::model::sampling::Schedule::new(1.0, 20.0).unwrap(),
        &Default::default(),
        s.duration_s,
        None,
        (0, 0, 0),
    );
    s.detail = Some(
        d.with_accepts_from_uprobe(Some(crate::model::sampling::AcceptsCheck::new(600, 300, 2))),
    );
    let m = metrics(&s);
    for k in [
        "accepts_per_s",
        "accepts_per_request",
        "requests_per_connection",
        "busiest_accept_share",
    ] {
        assert!(!m.contains_key(k), "{k}: {m:?}");
    }
}

#[test]
fn what_the_clients_got_is_compared_from_the_access_log() {
    use crate::model::access_log::{AccessLogReport, TimeReport, UpstreamOutcomeReport};
    let real = include_str!("../testdata/two_workers_300_connections.jsonl");
    let rec = Recording::parse("real", real).expect("the real recording parses");
    let mut s = rec.summary.clone().expect("a summary");
    assert!(!metrics(&s).contains_key("logged_5xx_share"), "no log read");
    let time = |p50_s: f64, p99_s: f64| TimeReport {
        p50_s,
        p99_s,
        ..Default::default()
    };
    let peer = |p99: f64| UpstreamOutcomeReport {
        response_time: Some(time(0.1, p99)),
        ..Default::default()
    };
    s.access_log = Some(AccessLogReport {
        lines: 200,
        statuses: [("200".into(), 170), ("502".into(), 20), ("499".into(), 10)].into(),
        classes: [("2xx".into(), 170), ("5xx".into(), 20), ("499".into(), 10)].into(),
        request_time: Some(time(0.25, 2.0)),
        upstreams: vec![peer(1.5), peer(3.0)],
        retried: 10,
        ..Default::default()
    });
    let m = metrics(&s);
    assert_eq!(m["logged_5xx_share"], 0.1);
    assert_eq!(m["logged_4xx_share"], 0.0);
    assert_eq!(m["logged_499_share"], 0.05);
    assert_eq!(m["logged_request_p50_ms"], 250.0);
    assert_eq!(m["logged_request_p99_ms"], 2000.0);
    assert_eq!(m["upstream_response_p99_ms"], 3000.0);
    assert_eq!(m["retried_share"], 0.05);
    // A format without $status: no shares (unknown, not 0).
    s.access_log.as_mut().unwrap().statuses.clear();
    let m = metrics(&s);
    assert!(!m.contains_key("logged_5xx_share"), "{m:?}");
    assert!(m.contains_key("logged_request_p99_ms"));
}

/// A newcomer's compare said "worker CPU per request fell from 8.96 us to 0 us (-100%)"
/// where 0 was a run too short for a clock tick: below MIN_CPU_S_PER_WORKER a worker,
/// the figure is not compared.
#[test]
fn cpu_per_request_is_left_out_below_the_clock_ticks_resolution() {
    let real = include_str!("../testdata/two_workers_300_connections.jsonl");
    let rec = Recording::parse("real", real).expect("the real recording parses");
    let mut s = rec.summary.clone().expect("a summary");
    let n = s.workers.len() as f64;
    for w in &mut s.workers {
        w.cpu_s = Some(MIN_CPU_S_PER_WORKER);
    }
    let requests = s.requests.count.expect("requests") as f64;
    let m = metrics(&s);
    assert!(
        (m["cpu_us_per_request"] - MIN_CPU_S_PER_WORKER * n * 1e6 / requests).abs() < 1e-6,
        "{m:?}"
    );
    for w in &mut s.workers {
        w.cpu_s = Some(0.0);
    }
    assert!(!metrics(&s).contains_key("cpu_us_per_request"));
}

/// The setups' caveats, from what the recordings hold: another master, version,
/// configuration and number of workers said with both values; a fact a recording lacks
/// said unknown.
#[test]
fn caveats_name_what_differs_between_the_setups_and_what_is_unknown() {
    use crate::model::{
        config::{ConfigReport, ConfigValue},
        masters::MasterInfo,
    };
    let real = include_str!("../testdata/two_workers_300_connections.jsonl");
    let rec = Recording::parse("real", real).expect("the real recording parses");
    // This recording predates the configuration reader.
    let c = compare_runs(&[("a", &rec)], &[("b", &rec)]);
    assert_eq!(
        c.caveats,
        vec!["whether nginx's configuration differs is unknown: a: the recording holds no configuration"]
    );
    let cfg = |v: &str| ConfigReport {
        values: vec![ConfigValue {
            directive: "keepalive_timeout".into(),
            scope: "http".into(),
            value: v.into(),
            at: "/etc/nginx/nginx.conf:12".into(),
            not_loaded: false,
            unread_may_set: false,
        }],
        ..Default::default()
    };
    let mut a = rec.clone();
    a.summary.as_mut().unwrap().config = Some(cfg("65"));
    // An --all capture of another master: no header, the version in `master`.
    let mut b = rec.clone();
    b.header = None;
    let s = b.summary.as_mut().unwrap();
    s.config = Some(cfg("0"));
    s.master_pid = 5000;
    s.workers[1].alive = false;
    s.master = Some(MasterInfo {
        pid: 5000,
        nginx_version: Some("1.26.3".into()),
        ..Default::default()
    });
    let c = compare_runs(&[("before", &a)], &[("after", &b)]);
    assert_eq!(
        c.caveats,
        vec![
            "different nginx masters: pid 4841 in before, pid 5000 in after (a restart or another nginx: its start, binary and configuration may differ)",
            "different nginx versions: 1.22.1 in before, 1.26.3 in after",
            "different nginx configurations in before and after: 1 effective values differ: keepalive_timeout (http): 65 -> 0",
            "different numbers of workers: 2 alive at the end in before, 1 in after",
        ]
    );
    b.summary.as_mut().unwrap().master = None;
    let c = compare_runs(&[("before", &a)], &[("after", &b)]);
    assert_eq!(
        c.caveats[1],
        "nginx version unknown in after (the recording does not hold it): whether it is 1.22.1 on both sides is unknown"
    );
    // The same setup: no caveat.
    let c = compare_runs(&[("before", &a)], &[("after", &a.clone())]);
    assert!(c.caveats.is_empty(), "{:?}", c.caveats);
}

/// Listen overflows are the network namespace's (TcpExt), counted once: two listening
/// sockets do not double them (they were summed over the sockets' rows).
#[test]
fn listen_overflows_are_the_namespace_s_once() {
    let real = include_str!("../testdata/two_workers_300_connections.jsonl");
    let rec = Recording::parse("real", real).expect("the real recording parses");
    let mut s = rec.summary.clone().expect("a summary");
    let mut second = s.listen[0].clone();
    second.addr = "127.0.0.1:8443".into();
    s.listen.push(second);
    for l in s.listen.iter_mut() {
        (l.overflows, l.drops) = (40, 40);
    }
    s.listen_namespace = Some(crate::model::ListenNamespaceReport {
        overflows: 40,
        drops: 40,
        source: crate::model::listen::LISTEN_NAMESPACE_SOURCE.into(),
    });
    s.duration_s = 4.0;
    assert_eq!(metrics(&s)["listen_overflows_per_s"], 10.0);
    // Unreadable counters: no rate, not 0.
    s.listen_namespace = None;
    assert!(!metrics(&s).contains_key("listen_overflows_per_s"));
}

/// keepalive_timeout 75s -> 2s, end to end: the lifecycle keys follow [`METRICS`] in
/// their table's order (before the per-syscall ones), their labels are theirs, a quiet
/// interval of attached programs counts 0 in the noise, and the sentence names the
/// largest change.
#[test]
fn a_keepalive_timeout_change_shows_in_the_connection_lifecycle() {
    use crate::model::connections::{ConnectionsReport, IdleReport, PortLifecycle};
    let real = include_str!("../testdata/two_workers_300_connections.jsonl");
    let rec = Recording::parse("real", real).expect("the real recording parses");
    // Per second, in every report: before, clients close 10 (nginx none: 75 s is never
    // reached); after, nginx closes 2, idle for 2004 ms, and clients none.
    let with = |by_nginx: u64, by_client: u64, quiet_last: bool| {
        let mut r = rec.clone();
        let n = r.intervals.len();
        let reports = r.intervals.iter_mut().enumerate();
        for (i, s) in reports.chain(r.summary.iter_mut().map(|s| (n, s))) {
            let secs = if i == n { 5 } else { 1 };
            s.duration_s = secs as f64;
            for w in &mut s.workers {
                w.connections_closed = Some(Default::default());
            }
            let idle = (by_nginx > 0).then(|| IdleReport {
                count: by_nginx * secs,
                mean_ms: 2004.0,
                p50_ms: 2000,
                min_ms_since_attach: 2000,
                max_ms_since_attach: 2008,
                pinned_ms: Some(2004.0),
                hist: (0..20)
                    .map(|b| if b == 10 { by_nginx * secs } else { 0 })
                    .collect(),
                ..Default::default()
            });
            let port = PortLifecycle {
                port: 80,
                closed_by_nginx: by_nginx * secs,
                closed_by_client: by_client * secs,
                idle_before_nginx_close: idle,
                ..Default::default()
            };
            s.connections = (!(quiet_last && i == n - 1)).then(|| ConnectionsReport {
                ports: vec![port],
                ..Default::default()
            });
        }
        r
    };
    let (before, after) = (with(0, 10, false), with(2, 0, true));
    let c = compare("before", &before, "after", &after);
    let get = |k: &str| c.metrics.iter().find(|m| m.key == k).expect(k);
    let by_nginx = get("closed_by_nginx_per_s");
    assert_eq!((by_nginx.before, by_nginx.after), (Some(0.0), Some(2.0)));
    assert_eq!(
        by_nginx.label,
        "client connections closed first by nginx per second"
    );
    assert_eq!(by_nginx.unit, "/s");
    // 4 intervals at 2/s and the quiet one at 0: median 2, n 5.
    let ai = by_nginx.after_intervals.unwrap();
    assert_eq!((ai.n, ai.median, ai.half_iqr), (5, 2.0, 0.0));
    assert_eq!(by_nginx.significance, Significance::BeyondNoise);
    let pinned = get("idle_before_nginx_close_pinned_ms");
    assert_eq!((pinned.before, pinned.after), (None, Some(2004.0)));
    assert_eq!(pinned.after_intervals.unwrap().n, 4);
    // Table order: every whole-report key, then the lifecycle's, then per syscall.
    let at = |k: &str| c.metrics.iter().position(|m| m.key == k).expect(k);
    let core = c
        .metrics
        .iter()
        .rposition(|m| METRICS.iter().any(|d| d.key == m.key));
    assert!(core.unwrap() < at("closed_by_nginx_per_s"));
    assert!(at("closed_by_nginx_per_s") < at("closed_by_client_per_s"));
    assert!(at("upstream_closed_by_peer_per_s") < at("accept4_per_request"));
    assert_eq!(
        c.sentence,
        "Client connections closed first by the client per second fell from 10.0/s to 0/s (-100%)."
    );
}

/// Trial 19: a sampled period whose window held none of its 3900 requests has no busy
/// share to compare (its window's is an idle one's), nor one with no window; a window
/// that held some of them has.
#[test]
fn busy_share_is_left_out_of_windows_that_missed_the_load() {
    let real = include_str!("../testdata/two_workers_300_connections.jsonl");
    let rec = Recording::parse("real", real).expect("the real recording parses");
    let mut r = rec.summary.clone().expect("a summary");
    assert!(metrics(&r).contains_key("busy_share_mean"), "full detail");
    let window = |in_windows: u64, in_window_s: f64| {
        crate::model::sampled_detail(Some(in_windows), Some(3900), in_window_s)
    };
    r.detail = Some(window(0, 1.0));
    assert!(!metrics(&r).contains_key("busy_share_mean"));
    r.detail = Some(window(0, 0.0));
    assert!(!metrics(&r).contains_key("busy_share_mean"));
    r.detail = Some(window(390, 1.0));
    assert!(metrics(&r).contains_key("busy_share_mean"));
}

/// A run's last partial interval (it adds up to the summary) is no sample of the
/// noise when it is shorter than half the others: its rate over milliseconds is left
/// out of the series; a full-length last one stays.
#[test]
fn a_short_last_interval_is_left_out_of_the_noise() {
    let real = include_str!("../testdata/two_workers_300_connections.jsonl");
    let rec = Recording::parse("real", real).expect("the real recording parses");
    let n = rec.intervals.len();
    assert!(n >= 2, "{n}");
    let full = interval_series(&rec)["accepts_per_s"].len();
    let mut tail = rec.clone();
    let mut last = tail.intervals[n - 1].clone();
    last.duration_s = 0.004;
    tail.intervals.push(last);
    assert_eq!(interval_series(&tail)["accepts_per_s"].len(), full);
    let mut whole = rec.clone();
    whole.intervals.push(rec.intervals[n - 1].clone());
    assert_eq!(interval_series(&whole)["accepts_per_s"].len(), full + 1);
}

/// Trial 21: an access_log given buffer=32k flush=5s between two recordings, nothing
/// else changed, drew no caveat: the logs are compared with the other values.
#[test]
fn a_changed_access_log_is_a_different_configuration() {
    let real = include_str!("../testdata/two_workers_300_connections.jsonl");
    let mut a = Recording::parse("real", real).expect("the real recording parses");
    a.summary.as_mut().unwrap().config = Some(crate::model::config::ConfigReport::default());
    let log = |buffer: Option<&str>, flush: Option<&str>| crate::model::config::AccessLogValue {
        scope: "http".into(),
        path: "/var/log/nginx/access.log".into(),
        format: "combined".into(),
        buffer: buffer.map(Into::into),
        flush: flush.map(Into::into),
        at: "/etc/nginx/nginx.conf:20".into(),
        ..Default::default()
    };
    let mut b = a.clone();
    a.summary
        .as_mut()
        .unwrap()
        .config
        .as_mut()
        .unwrap()
        .access_logs = vec![log(None, None)];
    b.summary
        .as_mut()
        .unwrap()
        .config
        .as_mut()
        .unwrap()
        .access_logs = vec![log(Some("32k"), Some("5s"))];
    let c = compare_runs(&[("before", &a)], &[("after", &b)]);
    assert_eq!(
        c.caveats,
        vec!["different nginx configurations in before and after: 1 effective values differ: access_log (http /var/log/nginx/access.log): /var/log/nginx/access.log combined unbuffered -> /var/log/nginx/access.log combined buffer=32k flush=5s"]
    );
}
