//! `--detail sampled` against a real nginx: the continuous layer (accepts, requests)
//! stays exact while the per-request tracepoints are attached only in windows, and the
//! report says so with its coverage; `--detail full` is today's run. Run as root
//! through `cargo xtask test`.

use std::time::Duration;

use nginx_probe_tests::{
    keepalive_requests, linked_programs_of, metric_sum, metric_value, one_request_per_connection,
    perf_event_fds_held_by, perf_events_with_programs, scrape_text, sum_workers,
    total_accept_errors, total_accepts, verdict, workers, Nginx, NginxConfig, Probe,
};
use nix::sys::signal::Signal;

/// 500 connections of one request each, in 10 bursts of 50 spread over about 2 s, so
/// that detail windows open and close while they arrive.
fn spread_500(ng: &Nginx) -> usize {
    let mut ok = 0;
    for _ in 0..10 {
        ok += one_request_per_connection(ng.addr(), 50);
        std::thread::sleep(Duration::from_millis(200));
    }
    ok
}

fn sum(s: &serde_json::Value, syscall: &str) -> u64 {
    workers(s)
        .iter()
        .map(|w| w["syscalls"][syscall]["count"].as_u64().unwrap_or(0))
        .sum()
}

/// `rate` (rounded to 3 decimals, as the JSON carries it) times `seconds` is `count`:
/// the rate divides the count by exactly those seconds, within the rounding.
fn assert_rate_over(rate: f64, seconds: f64, count: f64, what: &str) {
    assert!(
        (rate * seconds - count).abs() <= 0.0005 * seconds + 1e-9,
        "{what}: {rate} * {seconds} s != {count}"
    );
}

/// Sampled: every worker's event-loop busy share and upstream connects per second
/// divide by the seconds the detail layer was attached (`detail.in_window_s`), not by
/// the period. Returns the in-window seconds.
fn assert_detail_rates_over_windows(s: &serde_json::Value) -> f64 {
    let in_window_s = s["detail"]["in_window_s"].as_f64().expect("in_window_s");
    assert!(in_window_s > 0.0, "{s}");
    for w in workers(s) {
        let l = &w["event_loop"];
        assert_rate_over(
            l["busy_share"].as_f64().unwrap(),
            in_window_s,
            l["busy_ns"].as_u64().unwrap() as f64 / 1e9,
            "busy_share",
        );
        let u = &w["upstream"];
        assert_rate_over(
            u["per_s"].as_f64().unwrap(),
            in_window_s,
            u["connects"].as_u64().unwrap() as f64,
            "upstream per_s",
        );
    }
    in_window_s
}

#[test]
fn sampled_detail_keeps_500_accepts_and_500_requests_exact() {
    let ng = Nginx::start(&NginxConfig::default());
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("run.jsonl");
    // --record without --detail: a continuous run, sampled by default.
    let probe = Probe::on(&ng)
        .json()
        .record(&rec)
        .detail_windows("300ms", "1s")
        .start();
    assert_eq!(spread_500(&ng), 500);
    std::thread::sleep(Duration::from_millis(200));
    let out = probe.stop_with(Signal::SIGINT);
    assert!(out.status.success(), "{out:?}");
    assert!(
        out.stderr.contains("Detail: sampled"),
        "banner: {}",
        out.stderr
    );
    let s = out.summary_json();
    // The continuous layer: exact.
    assert_eq!(total_accepts(&s), 500, "{s}");
    assert_eq!(s["requests"]["count"].as_u64(), Some(500), "{s}");
    assert_eq!(s["requests"]["source"], "stub_status", "{s}");
    // The detail layer: sampled, and said so.
    let d = &s["detail"];
    assert_eq!(d["mode"], "sampled", "{s}");
    let coverage = d["coverage"].as_f64().unwrap();
    assert!(
        coverage > 0.0 && coverage <= 1.0,
        "coverage {coverage}: {s}"
    );
    // 300 ms in every second over ~2.5 s: at most 0.5 of the time.
    assert!(coverage < 0.6, "coverage {coverage}: {s}");
    let windows = d["windows"].as_u64().unwrap();
    assert!(windows >= 2, "{s}");
    let in_windows = d["requests_in_windows"].as_u64().unwrap();
    assert!(in_windows < 500, "{s}");
    assert_eq!(d["requests_total"].as_u64(), Some(500), "{s}");
    // One sendfile per request: the sendfiles seen are the requests of the windows,
    // up to one request cut by each window edge (the client is sequential).
    let sendfiles = sum(&s, "sendfile");
    assert!(
        sendfiles.abs_diff(in_windows) <= 2 * windows,
        "sendfile {sendfiles} vs {in_windows} requests in {windows} windows: {s}"
    );
    // The event loop ran in the windows, and its busy share is of the windows' time.
    assert!(
        workers(&s)
            .iter()
            .any(|w| w["event_loop"]["busy_ns"].as_u64().unwrap_or(0) > 0),
        "{s}"
    );
    assert_detail_rates_over_windows(&s);
    // Accepts come from nginx's ngx_get_connection (exact, above); accept4 is traced
    // in the windows only: one accept per request of the windows, up to one connection
    // cut by each window edge.
    assert_eq!(d["accepts_from"], "uprobe ngx_get_connection", "{s}");
    // Checked against nginx's own accepted counter, which agrees.
    assert_eq!(d["accepts_check"]["probe"].as_u64(), Some(500), "{s}");
    assert_eq!(
        d["accepts_check"]["nginx_accepted"].as_u64(),
        Some(500),
        "{s}"
    );
    assert_eq!(d["accepts_check"]["agree"], true, "{s}");
    let accept4 = sum(&s, "accept4") - total_accept_errors(&s, "EAGAIN");
    assert!(
        accept4.abs_diff(in_windows) <= 2 * windows,
        "accept4 {accept4} vs {in_windows} requests in {windows} windows: {s}"
    );
    let a4 = s["requests"]["syscalls_per_request"]["accept4"]
        .as_f64()
        .unwrap();
    // Divided by the windows' requests (accept4 calls of the windows, EAGAIN
    // included: how many wake-ups lose the race varies with the machine's load).
    let want = sum(&s, "accept4") as f64 / in_windows as f64;
    assert!(
        (a4 - want).abs() <= 0.0005,
        "accept4 per request of the windows {a4}, want {want}: {s}"
    );
    // The recording's summary says the same.
    let text = std::fs::read_to_string(&rec).expect("recording");
    let last: serde_json::Value =
        serde_json::from_str(text.lines().last().expect("summary line")).expect("json");
    assert_eq!(last["detail"]["mode"], "sampled");
}

/// A proxy without upstream keepalive under sampled detail: the workers' upstream
/// connects per second (JSON) are per second of the windows, exactly connects /
/// `in_window_s`; the `upstream_keepalive_off` verdict reads the connection
/// lifecycle's connects over the whole period (trial 17: windows with none of the
/// requests left it silent), exactly the 1200 requests, per second of the period.
#[test]
fn sampled_upstream_rate_is_per_second_of_the_windows() {
    let be = Nginx::start(&NginxConfig {
        workers: 1,
        access_log: Some("off".into()),
        ..NginxConfig::default()
    });
    let ng = Nginx::start(&NginxConfig {
        access_log: Some("off".into()),
        http_extra: format!("upstream be {{ server {}; }}", be.addr()),
        server_extra: "location / { proxy_pass http://be; }".into(),
        ..NginxConfig::default()
    });
    let probe = Probe::on(&ng)
        .json()
        .summary_only()
        .detail_windows("500ms", "1s")
        .start();
    // 1200 requests spread over about 2 s: about half in windows.
    let mut ok = 0;
    for _ in 0..10 {
        ok += keepalive_requests(ng.addr(), 2, 60);
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(ok, 1200);
    let out = probe.stop();
    assert!(out.status.success(), "{out:?}");
    let s = out.summary_json();
    assert_eq!(s["detail"]["mode"], "sampled", "{s}");
    assert_eq!(s["requests"]["count"].as_u64(), Some(1200), "{s}");
    let connects = sum_workers(&s, &["upstream", "connects"]);
    assert!(connects > 0 && connects < 1200, "{connects} connects: {s}");
    assert_detail_rates_over_windows(&s);
    let v = verdict(&s, "upstream_keepalive_off").expect("upstream_keepalive_off fires");
    assert_eq!(
        v["evidence"]["upstream_connects"].as_u64(),
        Some(1200),
        "{v}"
    );
    assert_eq!(v["evidence"]["requests"].as_u64(), Some(1200), "{v}");
    assert!(v["evidence"].get("in_window_s").is_none(), "{v}");
    assert_rate_over(
        v["evidence"]["connects_per_s"].as_f64().unwrap(),
        s["duration_s"].as_f64().unwrap(),
        1200.0,
        "connects_per_s evidence",
    );
}

#[test]
fn a_short_full_run_is_unchanged() {
    let ng = Nginx::start(&NginxConfig::default());
    let mut probe = Probe::on(&ng).json().duration(3).start();
    assert_eq!(one_request_per_connection(ng.addr(), 200), 200);
    let out = probe.wait();
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.contains("Detail: full"), "{}", out.stderr);
    let s = out.summary_json();
    assert!(s.get("detail").is_none(), "{s}");
    assert_eq!(total_accepts(&s), 200, "{s}");
    assert_eq!(sum(&s, "sendfile"), 200, "{s}");
    assert_eq!(s["requests"]["count"].as_u64(), Some(200), "{s}");
}

#[test]
fn the_exporter_samples_by_default_and_says_so() {
    let ng = Nginx::start(&NginxConfig::default());
    let port = nginx_probe_tests::free_port();
    let probe = Probe::on(&ng).listen(port).summary_only().start();
    assert_eq!(spread_500(&ng), 500);
    let text = scrape_text(port);
    drop(probe);
    assert_eq!(metric_value(&text, "nginx_probe_detail_sampled"), Some(1.0));
    let cov = metric_value(&text, "nginx_probe_detail_coverage_ratio").unwrap();
    assert!(cov > 0.0 && cov <= 1.0, "{cov}");
    assert_eq!(
        metric_sum(&text, "nginx_probe_accepts_total"),
        500.0,
        "{text}"
    );
    // Which families are sampled is in their HELP (the same in every mode): writes
    // only inside windows, syscalls per syscall, accepts always.
    let help = |family: &str| -> String {
        let prefix = format!("# HELP {family} ");
        text.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("no HELP of {family}: {text}"))
            .to_string()
    };
    assert!(
        help("nginx_probe_writes_total")
            .ends_with("Under --detail sampled: counted inside detail windows only (nginx_probe_detail_coverage_ratio, nginx_probe_detail_window_requests_total)."),
        "{text}"
    );
    assert!(
        help("nginx_probe_syscalls_total").contains(
            "accept4, accept, socketpair, pipe2, eventfd2, epoll_create1, dup, dup2, dup3 all the time when nginx_probe_detail_accepts_uprobe is 0"
        ),
        "{text}"
    );
    // Here the uprobe counts accepts: no syscall tracepoint between windows.
    assert_eq!(
        metric_value(&text, "nginx_probe_detail_accepts_uprobe"),
        Some(1.0),
        "{text}"
    );
    assert!(
        !help("nginx_probe_accepts_total").contains("--detail"),
        "{text}"
    );
}

#[test]
fn emfile_outside_a_window_is_still_seen() {
    // Soft limit 64: accept4 fails with EMFILE once 200 connections are held. The
    // window (200 ms at attach) is long over by then, and accept4 is traced in windows
    // only: nginx's error log says it, and the held connections it did accept are
    // counted (ngx_get_connection).
    let cfg = NginxConfig {
        nofile: Some((64, 4096)),
        ..NginxConfig::default()
    };
    let ng = Nginx::start(&cfg);
    let probe = Probe::on(&ng)
        .json()
        .detail("sampled")
        .detail_windows("200ms", "1m")
        .start();
    std::thread::sleep(Duration::from_millis(500));
    let held = ng.hold_connections(200);
    std::thread::sleep(Duration::from_millis(1500));
    let out = probe.stop_with(Signal::SIGINT);
    drop(held);
    let s = out.summary_json();
    assert_eq!(s["detail"]["windows"].as_u64(), Some(1), "{s}");
    assert_eq!(
        s["detail"]["accepts_from"], "uprobe ngx_get_connection",
        "{s}"
    );
    // The error-log classes are read continuously.
    assert!(
        s["nginx_errors"]["classes"]["emfile"]["count"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "{s}"
    );
    // Every connection nginx took is an accept, as nginx's own counter says.
    assert_eq!(
        Some(total_accepts(&s)),
        s["stub_status"]["accepted"].as_u64(),
        "{s}"
    );
    assert!(total_accepts(&s) > 0, "{s}");
    let ids: Vec<&str> = s["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["id"].as_str())
        .collect();
    assert!(ids.contains(&"fd_exhaustion"), "{ids:?}: {s}");
}

/// Between windows nginx-probe holds no perf event on a per-request syscall: every perf
/// event fd it holds then carries a program, and none is on write, sendfile or
/// epoll_wait (the continuous layer is attached through BPF links, which hold their
/// events without an fd of this process). In the window those are there. An idle event left open would keep
/// the syscall in the kernel's perf bitmap, so every write of every process would
/// still enter the perf handler between windows.
#[test]
fn between_windows_no_perf_event_stays_on_a_per_request_syscall() {
    let ng = Nginx::start(&NginxConfig::default());
    let per_request = |tps: &[String]| -> Vec<String> {
        tps.iter()
            .filter(|t| {
                ["write", "writev", "sendfile64", "epoll_wait", "openat"]
                    .iter()
                    .any(|s| t.ends_with(&format!("_{s}")))
            })
            .cloned()
            .collect()
    };
    let probe = Probe::on(&ng)
        .json()
        .detail("sampled")
        .detail_windows("3s", "1m")
        .start();
    let pid = probe.pid();
    // The first window opens at attach, before the banner.
    let in_window = perf_events_with_programs(pid);
    let fds_in_window = perf_event_fds_held_by(pid);
    assert!(
        per_request(&in_window).len() >= 5,
        "in the window: {in_window:?}"
    );
    assert_eq!(
        fds_in_window,
        in_window.len(),
        "in the window: {in_window:?}"
    );
    // The window is over at 3 s, and its release runs on a thread: allow it 5 s more.
    let deadline = std::time::Instant::now() + Duration::from_secs(8);
    let (between, fds_between) = loop {
        std::thread::sleep(Duration::from_millis(250));
        let between = perf_events_with_programs(pid);
        let fds = perf_event_fds_held_by(pid);
        if (per_request(&between).is_empty() && fds == between.len())
            || std::time::Instant::now() > deadline
        {
            break (between, fds);
        }
    };
    assert_eq!(
        per_request(&between),
        Vec::<String>::new(),
        "between windows"
    );
    assert_eq!(
        fds_between,
        between.len(),
        "perf events held without a program between windows: {between:?}"
    );
    // No syscall tracepoint at all between windows (accepts come from a uprobe), so no
    // task takes the kernel's syscall-tracing path: only fork following and uprobes.
    let linked = linked_programs_of(pid);
    assert!(
        linked.contains(&"ngx_get_connection".to_string()),
        "{linked:?}"
    );
    let syscall_progs: Vec<&String> = linked
        .iter()
        .filter(|n| {
            n.starts_with("sys_") || n.starts_with("count_exit") || n.starts_with("close_after")
        })
        .collect();
    assert!(syscall_progs.is_empty(), "between windows: {linked:?}");
    // TLS: nginx's count stays linked, libssl's programs (a trap in every process using
    // libssl) only in windows.
    assert!(
        linked.contains(&"ngx_ssl_ocsp_validate".to_string()),
        "{linked:?}"
    );
    assert!(
        !linked.iter().any(|n| n.starts_with("ssl_")),
        "libssl's programs between windows: {linked:?}"
    );
    // And the counting goes on exactly.
    assert_eq!(one_request_per_connection(ng.addr(), 40), 40);
    std::thread::sleep(Duration::from_millis(200));
    let s = probe.stop().summary_json();
    assert_eq!(total_accepts(&s), 40, "{s}");
    assert_eq!(s["requests"]["count"].as_u64(), Some(40), "{s}");
}

/// Trial 17: a sampled run whose windows held none of the requests said nothing of
/// the rules it could not judge. One 100 ms window every 30 s, 300 requests after it
/// closed: the windows held fewer than the 200 requests the access-log and error-log
/// rules judge from, the period 300; the report lists those rules as not judged, with
/// the counts (JSON `not_judged`, the text's `not judged:` line), and leaves
/// upstream_keepalive_off out (it reads the connection lifecycle, whole period).
#[test]
fn rules_the_windows_could_not_judge_are_said_not_judged() {
    let ng = Nginx::start(&NginxConfig::default());
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("run.jsonl");
    let probe = Probe::on(&ng)
        .json()
        .record(&rec)
        .detail_windows("100ms", "30s")
        .start();
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(one_request_per_connection(ng.addr(), 300), 300);
    std::thread::sleep(Duration::from_millis(200));
    let out = probe.stop_with(Signal::SIGINT);
    assert!(out.status.success(), "{out:?}");
    let s = out.summary_json();
    assert_eq!(s["requests"]["count"].as_u64(), Some(300), "{s}");
    let in_windows = s["detail"]["requests_in_windows"].as_u64().unwrap();
    assert!(in_windows < 200, "{s}");
    let n = s["not_judged"].as_array().unwrap_or_else(|| panic!("{s}"));
    assert_eq!(n.len(), 1, "{s}");
    let rules: Vec<&str> = n[0]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(
        rules,
        [
            "access_log_unbuffered",
            "access_log_reopened",
            "error_log_verbose"
        ],
        "{s}"
    );
    let why = n[0]["why"].as_str().unwrap();
    assert!(
        why.contains(&format!("held {in_windows} of the period's 300 requests")),
        "{why}"
    );
    let text = Probe::report(&rec).run().stdout;
    assert!(
        text.contains("  not judged: access_log_unbuffered, access_log_reopened, error_log_verbose: --detail sampled: its windows held"),
        "{text}"
    );
}
