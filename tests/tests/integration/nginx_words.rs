//! nginx's words read back to the master's start (case 21 of ../shared/cases): a
//! master that could not spawn all its workers wrote why before the probe attached.

use std::time::Duration;

use nginx_probe_tests::{children_of, verdict, verdict_ids, Nginx, NginxConfig, Probe};

/// `n` requests with a 1 s timeout each: the workers themselves run out of fds here
/// (they hold the other workers' channels), so some may never be answered.
fn few_requests(addr: std::net::SocketAddr, n: usize) {
    use std::io::{Read, Write};
    for _ in 0..n {
        if let Ok(mut c) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            let _ = c.set_read_timeout(Some(Duration::from_secs(1)));
            let _ = c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            let mut buf = Vec::new();
            let _ = c.read_to_end(&mut buf);
        }
    }
}

#[test]
fn a_master_short_of_fds_reports_the_workers_it_failed_to_spawn() {
    // worker_processes 64 under a soft nofile of 64: the master runs out of fds for
    // the workers' channel socketpairs and logs each failure, before any probe runs.
    let ng = Nginx::start(&NginxConfig {
        workers: 64,
        nofile: Some((64, 4096)),
        workers_may_fail: true,
        ..NginxConfig::default()
    });
    // Counted here, from /proc and the file itself. A worker the master did spawn may
    // still fail its own init (epoll_create() under the same limit) and exit with
    // fatal code 2, after which the master does not respawn it: wait until every one
    // of the 64 is accounted for (running, failed to spawn, or exited fatally).
    let count = |ng: &Nginx| {
        let running = children_of(ng.master_pid())
            .into_iter()
            .filter(|&pid| {
                std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                    .map(|c| c.starts_with("nginx: worker process"))
                    .unwrap_or(false)
            })
            .count() as u64;
        let log = ng.error_log();
        let n = |needle: &str| log.lines().filter(|l| l.contains(needle)).count() as u64;
        let failed = n("socketpair() failed while spawning \"worker process\"");
        let fatal = n("exited with fatal code 2 and cannot be respawned");
        (running, failed, fatal, log)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let (running, failed, fatal, log) = loop {
        let c = count(&ng);
        if c.0 + c.1 + c.2 == 64 || std::time::Instant::now() > deadline {
            break c;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        running > 0 && failed > 0,
        "running {running}, failed {failed}: {log}"
    );
    assert_eq!(running + failed + fatal, 64, "{log}");

    let s = Probe::on(&ng)
        .json()
        .settle(Duration::from_millis(600))
        .summary_around(|| few_requests(ng.addr(), 5));
    let alive = s["workers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["alive"] == true)
        .count() as u64;
    assert_eq!(alive, running, "{s}");
    let h = &s["nginx_errors"]["history"];
    assert_eq!(h["workers_failed_to_spawn"], failed, "{h}");
    assert_eq!(h["spawn_failed_emfile_before_attach"], failed, "{h}");
    assert_eq!(h["classes"]["worker_spawn_failed"], failed, "{h}");
    assert_eq!(h["workers_exited_fatal"], fatal, "{h}");
    assert_eq!(h["reached_master_start"], true, "{h}");
    assert_eq!(h["master_nofile_soft"], 64, "{h}");
    assert_eq!(h["master_nofile_hard"], 4096, "{h}");
    assert_eq!(
        h["workers_failed_to_spawn"].as_u64().unwrap()
            + h["workers_exited_fatal"].as_u64().unwrap()
            + alive,
        64,
        "{h}"
    );
    let v = verdict(&s, "worker_spawn_failed")
        .unwrap_or_else(|| panic!("{}", verdict_ids(&s).join(",")));
    assert_eq!(v["severity"], "critical");
    assert_eq!(v["evidence"]["workers_running"], running);
    assert_eq!(
        v["evidence"]["config_worker_processes"],
        format!("64 ({})", ng.conf_at("worker_processes"))
    );
    let advice = v["advice"].as_str().unwrap();
    let fatal_said = if fatal > 0 {
        format!("; {fatal} more were spawned but exited with fatal code 2 during their own start")
    } else {
        String::new()
    };
    assert!(
        advice.starts_with(&format!(
            "nginx failed to spawn {failed} worker processes since the master started (error log){fatal_said}"
        )),
        "{advice}"
    );
    assert!(
        advice.contains(&format!("; {running} workers run of worker_processes 64 (")),
        "{advice}"
    );
    assert!(
        advice.contains(&format!("; {failed} of them failed with EMFILE")),
        "{advice}"
    );
    assert!(
        advice.contains("soft open-files limit of 64 (hard 4096)"),
        "{advice}"
    );
    // fd advice names only what it counted: no open_file_cache (not configured), no
    // client connections (the workers' sockets are the channels).
    if let Some(fd) = verdict(&s, "fd_exhaustion") {
        let a = fd["advice"].as_str().unwrap();
        // open_file_cache is not configured: never advised, at most ruled out.
        assert!(!a.contains("open_file_cache, where configured"), "{a}");
        assert!(
            !a.contains("open_file_cache") || a.contains("not open_file_cache's: it is off"),
            "{a}"
        );
        assert!(!a.contains("held by client connections"), "{a}");
        assert!(
            a.contains("nginx's channels to the other workers, not told apart"),
            "{a}"
        );
        let d: Vec<&str> = fd["directives"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_str().unwrap())
            .collect();
        assert!(!d.contains(&"open_file_cache max="), "{d:?}");
    }
}

/// A variant of case 21 in a container's way: the master in a cgroup of pids.max 3
/// with worker_processes 4 forks 2 workers, and its next 2 fork()s fail with EAGAIN
/// (written before attach, `pids.events` max 2). The verdict puts them on the
/// cgroup's process limit it read refusing them (TasksMax), never on the fd limit.
#[test]
fn a_master_in_a_cgroup_short_of_pids_reports_the_limit_that_refused_its_forks() {
    let cg = nginx_probe_tests::PidsCgroup::create("np-test-pids", 3);
    let ng = Nginx::start(&NginxConfig {
        workers: 4,
        cgroup: Some(cg.dir.clone()),
        workers_may_fail: true,
        ..NginxConfig::default()
    });
    let failed_lines = |ng: &Nginx| {
        ng.error_log()
            .lines()
            .filter(|l| {
                l.contains("fork() failed while spawning \"worker process\" (11: Resource temporarily unavailable)")
            })
            .count() as u64
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while failed_lines(&ng) < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(failed_lines(&ng), 2, "{}", ng.error_log());
    assert_eq!(cg.refused(), 2);
    let s = Probe::on(&ng)
        .json()
        .settle(Duration::from_millis(600))
        .summary_around(|| few_requests(ng.addr(), 3));
    let h = &s["nginx_errors"]["history"];
    assert_eq!(h["workers_failed_to_spawn"], 2, "{h}");
    assert_eq!(
        h["spawn_failed_by_before_attach"],
        serde_json::json!({"fork() EAGAIN": 2}),
        "{h}"
    );
    assert_eq!(h["master_pids_limit"]["max"], 3, "{h}");
    assert_eq!(h["master_pids_limit"]["refused"], 2, "{h}");
    assert_eq!(h["master_pids_limit"]["current"], 3, "{h}");
    let v = verdict(&s, "worker_spawn_failed")
        .unwrap_or_else(|| panic!("{}", verdict_ids(&s).join(",")));
    assert_eq!(v["evidence"]["workers_running"], 2, "{v}");
    assert_eq!(
        v["directives"],
        serde_json::json!([
            "worker_processes",
            "TasksMax (the master's cgroup pids.max)"
        ]),
        "{v}"
    );
    let advice = v["advice"].as_str().unwrap();
    assert!(
        advice.contains("; 2 of them failed with EAGAIN at fork(): the master could not create a process, and its cgroup /np-test-pids (v"),
        "{advice}"
    );
    assert!(
        advice.contains(") refused 2 forks at its pids.max of 3 (pids.events"),
        "{advice}"
    );
    assert!(!advice.contains("open-files"), "{advice}");
}
