//! Exporter mode and finding the master without `--pid`: nginx restarted under a
//! running `--listen` probe, pid files, /proc, several masters. Run as root through
//! `cargo xtask test`.

use std::{process::Command, time::Duration};

use nginx_probe_tests::{
    free_port, metric_sum, metric_value, one_request_per_connection, probe_binary, scrape_text,
    Nginx, NginxConfig, Probe,
};
use nix::sys::signal::Signal;

/// Scrapes until `nginx_probe_master_pid` is `pid` and the probe is attached (up to
/// 20 s); returns that scrape.
fn scrape_when_attached_to(port: u16, pid: u32) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let text = scrape_text(port);
        if metric_value(&text, "nginx_probe_master_pid") == Some(pid as f64)
            && metric_value(&text, "nginx_probe_attached") == Some(1.0)
        {
            return text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not attached to {pid}: {text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn exporter_mode_follows_nginx_through_a_restart_and_counts_the_new_master_exactly() {
    let mut ng = Nginx::start(&NginxConfig::default());
    let port = free_port();
    let mut probe = Probe::pid_file(&ng.pid_file())
        .listen(port)
        .json()
        .summary_only()
        .start();
    let first_master = ng.master_pid();
    const N: usize = 120;
    assert_eq!(one_request_per_connection(ng.addr(), N), N);
    let before = scrape_when_attached_to(port, first_master);
    assert_eq!(metric_sum(&before, "nginx_probe_accepts_total"), N as f64);
    assert_eq!(
        metric_value(&before, "nginx_probe_restarts_total"),
        Some(0.0)
    );

    // `systemctl restart nginx`: the master exits, a new one starts.
    let new_master = ng.restart();
    assert_ne!(new_master, first_master);
    probe.wait_for_stderr(
        &format!("nginx master {first_master} exited; waiting for a new master"),
        Duration::from_secs(10),
    );
    probe.wait_for_stderr(
        &format!("new nginx master {new_master} found (restart 1)"),
        Duration::from_secs(20),
    );
    probe.wait_for_stderr("Hit Ctrl-C to end.", Duration::from_secs(30));
    assert!(probe.is_running(), "the probe exited with the old master");
    let attached = scrape_when_attached_to(port, new_master);
    assert_eq!(
        metric_value(&attached, "nginx_probe_restarts_total"),
        Some(1.0)
    );

    // The new master's connections, exactly: its counters start from zero.
    const M: usize = 77;
    assert_eq!(one_request_per_connection(ng.addr(), M), M);
    let after = scrape_text(port);
    assert_eq!(
        metric_sum(&after, "nginx_probe_accepts_total"),
        M as f64,
        "{after}"
    );
    assert_eq!(
        metric_value(&after, "nginx_probe_master_pid"),
        Some(new_master as f64)
    );

    // SIGTERM: the last session's summary (the new master's) and exit 0.
    let out = probe.stop_with(Signal::SIGTERM);
    assert!(out.status.success(), "{out:?}");
    let summaries: Vec<serde_json::Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    // One summary per master: the first ended when it exited, the second at SIGTERM.
    assert_eq!(summaries.len(), 2, "{}", out.stdout);
    assert_eq!(summaries[0]["master_pid"], first_master);
    assert_eq!(nginx_probe_tests::total_accepts(&summaries[0]), N as u64);
    assert_eq!(summaries[1]["master_pid"], new_master);
    assert_eq!(nginx_probe_tests::total_accepts(&summaries[1]), M as u64);
    let events = summaries[1]["events"].as_array().expect("events");
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "master_restart" && e["pid"] == new_master),
        "{events:?}"
    );
}

/// Exporter mode with `--pid A`: when A exits, the probe waits for A's nginx started
/// again (a master titled as A was), never another nginx of the host: with B running
/// alone meanwhile, nothing is attached; A started again is.
#[test]
fn exporter_mode_with_pid_waits_for_that_nginx_not_another() {
    let mut a = Nginx::start(&NginxConfig::default());
    let b = Nginx::start(&NginxConfig::default());
    let port = free_port();
    let first = a.master_pid();
    let mut probe = Probe::pid(first).listen(port).json().summary_only().start();
    scrape_when_attached_to(port, first);
    a.stop();
    probe.wait_for_stderr(
        &format!("nginx master {first} exited; waiting for a new master titled as it was"),
        Duration::from_secs(10),
    );
    // Three polls with B the only master in /proc: not B's.
    std::thread::sleep(Duration::from_millis(1600));
    assert!(
        !probe.stderr_so_far().contains("found (restart 1)"),
        "attached to another nginx (B is {}): {}",
        b.master_pid(),
        probe.stderr_so_far()
    );
    let again = a.restart();
    probe.wait_for_stderr(
        &format!("new nginx master {again} found (restart 1)"),
        Duration::from_secs(20),
    );
    probe.wait_for_stderr("Hit Ctrl-C to end.", Duration::from_secs(30));
    scrape_when_attached_to(port, again);
    const M: usize = 33;
    assert_eq!(one_request_per_connection(a.addr(), M), M);
    let out = probe.stop_with(Signal::SIGTERM);
    assert!(out.status.success(), "{out:?}");
    let last: serde_json::Value =
        serde_json::from_str(out.stdout.lines().last().expect("a summary")).unwrap();
    assert_eq!(last["master_pid"], again);
    assert_eq!(nginx_probe_tests::total_accepts(&last), M as u64);
}

#[test]
fn without_listen_the_probe_still_exits_when_the_master_exits() {
    let mut ng = Nginx::start(&NginxConfig::default());
    let mut probe = Probe::pid_file(&ng.pid_file())
        .json()
        .summary_only()
        .start();
    assert_eq!(one_request_per_connection(ng.addr(), 10), 10);
    ng.stop();
    let out = probe.wait();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(nginx_probe_tests::total_accepts(&out.summary_json()), 10);
}

#[test]
fn the_master_is_found_from_its_pid_file() {
    let ng = Nginx::start(&NginxConfig::default());
    let mut probe = Probe::pid_file(&ng.pid_file())
        .json()
        .summary_only()
        .duration("2s")
        .start();
    assert!(
        probe
            .stderr
            .iter()
            .any(|l| l.starts_with(&format!("Tracing nginx master {} ", ng.master_pid()))),
        "{:?}",
        probe.stderr
    );
    assert_eq!(one_request_per_connection(ng.addr(), 25), 25);
    let out = probe.wait();
    assert!(out.status.success(), "{out:?}");
    let s = out.summary_json();
    assert_eq!(s["master_pid"], ng.master_pid());
    assert_eq!(nginx_probe_tests::total_accepts(&s), 25);
}

#[test]
fn a_pid_file_that_names_no_master_exits_2_with_one_line() {
    let ng = Nginx::start(&NginxConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let worker_file = dir.path().join("worker.pid");
    let worker = ng.worker_pids()[0];
    std::fs::write(&worker_file, format!("{worker}\n")).unwrap();
    let missing = dir.path().join("none.pid");
    for (file, expect) in [
        (
            worker_file.display().to_string(),
            format!(
                "nginx-probe: --pid-file {}: pid {worker} is an nginx worker, not the master: run with --pid {}",
                worker_file.display(),
                ng.master_pid()
            ),
        ),
        (
            missing.display().to_string(),
            format!(
                "nginx-probe: --pid-file {}: cannot read a pid from it (No such file or directory (os error 2))",
                missing.display()
            ),
        ),
    ] {
        let out = Probe::new().arg("--pid-file").arg(&file).run();
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert_eq!(out.stderr.trim_end(), expect);
    }
}

/// nginx-probe with `args`, in a private mount namespace whose /run is an empty tmpfs,
/// so that the host's /run/nginx.pid (a system nginx) plays no part: discovery falls
/// to /proc, which is the host's.
fn run_probe_without_run_dir(args: &[&str]) -> std::process::Output {
    let script = format!(
        "mount -t tmpfs tmpfs /run && exec {} {}",
        probe_binary().display(),
        args.join(" ")
    );
    Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .expect("run unshare")
}

#[test]
fn several_masters_exit_2_and_are_listed_on_one_line() {
    let a = Nginx::start(&NginxConfig::default());
    let b = Nginx::start(&NginxConfig::default());
    let out = run_probe_without_run_dir(&["--duration", "1"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("nginx masters are running, choose one with --pid: "),
        "{err}"
    );
    for ng in [&a, &b] {
        let entry = format!(
            "{} `nginx: master process /usr/sbin/nginx -p {}",
            ng.master_pid(),
            ng.prefix.display()
        );
        assert!(err.contains(&entry), "{entry} not in {err}");
    }
    assert!(out.stdout.is_empty());
}

#[test]
fn the_only_master_in_proc_is_found() {
    let ng = Nginx::start(&NginxConfig::default());
    // Other nginx masters on this machine (another test run): then discovery must
    // refuse and list them all, ours among them.
    let masters = masters_in_proc();
    let out = run_probe_without_run_dir(&["--json", "--summary-only", "--duration", "2"]);
    let err = String::from_utf8_lossy(&out.stderr);
    if masters == vec![ng.master_pid()] {
        assert!(out.status.success(), "{out:?}");
        let s: serde_json::Value =
            serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).expect("JSON");
        assert_eq!(s["master_pid"], ng.master_pid());
    } else {
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(err.contains(&format!("{} `", ng.master_pid())), "{err}");
    }
}

/// Pids of the nginx masters running now.
fn masters_in_proc() -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if cmd.starts_with(b"nginx: master process") {
            out.push(pid);
        }
    }
    out.sort();
    out
}

/// `nginx_probe_verdict` samples (their `id` labels) in a scrape.
fn active_verdicts(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("nginx_probe_verdict{"))
        .filter_map(|l| l.split("id=\"").nth(1)?.split('"').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn verdict_gauges_fire_during_an_incident_and_clear_after_it() {
    let ng = Nginx::start(&NginxConfig::default());
    let port = free_port();
    let probe = Probe::on(&ng)
        .json()
        .summary_only()
        .listen(port)
        .arg("--verdict-window")
        .arg("3s")
        .start();
    // The incident: clients that never reuse connections (case 2).
    assert_eq!(one_request_per_connection(ng.addr(), 400), 400);
    let during = scrape_text(port);
    assert!(
        active_verdicts(&during).contains(&"keepalive_off".to_string()),
        "{during}"
    );
    // After it: keepalive clients only, for longer than the window.
    std::thread::sleep(Duration::from_millis(4500));
    assert_eq!(
        nginx_probe_tests::keepalive_requests(ng.addr(), 10, 200),
        2000
    );
    let after = scrape_text(port);
    assert!(
        !active_verdicts(&after).contains(&"keepalive_off".to_string()),
        "{after}"
    );
    // The window is the last 3 s, give or take a snapshot step (0.3 s) and a refresh.
    let w = metric_value(&after, "nginx_probe_verdict_window_seconds").expect("window gauge");
    assert!((3.0..4.5).contains(&w), "{w}");
    // The counters are still since attach.
    assert_eq!(
        metric_sum(&after, "nginx_probe_accepts_total"),
        410.0,
        "{after}"
    );
    drop(probe);
}

/// Debian's Prometheus server, scraping a probe's `--listen` port every second, with its
/// TSDB in a temporary directory; killed on drop.
struct Prometheus {
    child: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target: u16) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let cfg = dir.path().join("prometheus.yml");
        std::fs::write(
            &cfg,
            format!(
                "global: {{ scrape_interval: 1s, evaluation_interval: 1s }}\n\
                 scrape_configs:\n  - job_name: nginx-probe\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
            ),
        )
        .unwrap();
        let mut cmd = Command::new("prometheus");
        cmd.arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        nginx_probe_tests::no_inherited_fds(&mut cmd);
        let child = cmd
            .spawn()
            .expect("run prometheus (run `cargo xtask setup`)");
        let p = Prometheus {
            child,
            port,
            _dir: dir,
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while p.get("/-/ready", &[]).is_none_or(|b| !b.contains("Ready")) {
            assert!(std::time::Instant::now() < deadline, "prometheus not ready");
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    /// The body of GET `path` with `params` URL-encoded by curl; None on failure.
    fn get(&self, path: &str, params: &[(&str, &str)]) -> Option<String> {
        let mut c = Command::new("curl");
        c.args(["-sfG", "--max-time", "5"]);
        for (k, v) in params {
            c.arg("--data-urlencode").arg(format!("{k}={v}"));
        }
        let out = c
            .arg(format!("http://127.0.0.1:{}{path}", self.port))
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The value of an instant query returning one series; None when it returns none.
    fn value(&self, query: &str) -> Option<f64> {
        let body = self.get("/api/v1/query", &[("query", query)])?;
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    }

    /// Waits (up to 20 s) until `query`'s value stored by Prometheus is `want`; panics
    /// with the last value seen.
    fn wait_for(&self, query: &str, want: f64) {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let got = self.value(query);
            if got == Some(want) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "prometheus has {query} = {got:?}, not {want}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A real Prometheus (Debian's server) scraping the exporter: the accepts and requests
/// it stores are the load made, exactly, before and after `systemctl restart nginx`
/// (the new master's counters start from zero, `nginx_probe_restarts_total` 1), and
/// over the run `max_over_time` of the stored series holds the first master's total.
#[test]
fn a_real_prometheus_stores_the_exact_counts_through_a_master_restart() {
    let mut ng = Nginx::start(&NginxConfig::default());
    let port = free_port();
    let mut probe = Probe::pid_file(&ng.pid_file())
        .listen(port)
        .json()
        .summary_only()
        .start();
    let first = ng.master_pid();
    scrape_when_attached_to(port, first);
    let prom = Prometheus::start(port);
    const N: usize = 120;
    assert_eq!(one_request_per_connection(ng.addr(), N), N);
    prom.wait_for("sum(nginx_probe_accepts_total)", N as f64);
    prom.wait_for(
        "sum(nginx_probe_requests_total{source=\"stub_status\"})",
        N as f64,
    );
    let new_master = ng.restart();
    probe.wait_for_stderr(
        &format!("new nginx master {new_master} found (restart 1)"),
        Duration::from_secs(20),
    );
    scrape_when_attached_to(port, new_master);
    const M: usize = 77;
    assert_eq!(one_request_per_connection(ng.addr(), M), M);
    prom.wait_for("nginx_probe_restarts_total", 1.0);
    prom.wait_for("nginx_probe_master_pid", new_master as f64);
    prom.wait_for("sum(nginx_probe_accepts_total)", M as f64);
    prom.wait_for(
        "sum(nginx_probe_requests_total{source=\"stub_status\"})",
        M as f64,
    );
    // The first master's total is still in the TSDB.
    assert_eq!(
        prom.value("max_over_time(sum(nginx_probe_accepts_total)[10m:1s])"),
        Some(N as f64)
    );
    let out = probe.stop_with(Signal::SIGTERM);
    assert!(out.status.success(), "{out:?}");
}
