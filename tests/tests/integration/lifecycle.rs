//! Reloads, crashes, binary upgrades, pid namespaces, concurrent probes: counts stay
//! exact and the report says what happened.

use std::{
    io::{Read, Write},
    net::TcpStream,
    thread,
    time::Duration,
};

use nginx_probe_tests::{
    events, one_request_per_connection, total_accepts, workers, Nginx, NginxConfig, Probe,
};
use nix::{
    sys::signal::{kill, Signal},
    unistd::Pid,
};
use serde_json::Value;

fn signal(pid: u32, sig: Signal) {
    kill(Pid::from_raw(pid as i32), sig).unwrap_or_else(|e| panic!("kill {pid} {sig}: {e}"));
}

/// Waits until the master's worker set is `n` processes none of which is in `old`.
fn wait_new_workers(ng: &Nginx, old: &[u32], n: usize) -> Vec<u32> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let now = ng.worker_pids();
        if now.len() == n && now.iter().all(|p| !old.contains(p)) {
            return now;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "workers did not change: {now:?}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn connections_spread_over_three_reloads_sum_exactly() {
    three_reloads_sum_exactly("full");
}

/// The same under `--detail sampled`, where accepts come from the ngx_get_connection
/// uprobe's per-slot counter: the slots of exited workers are recycled by later
/// generations, so a counter not zeroed on recycling would count twice.
#[test]
fn sampled_accepts_over_three_reloads_sum_exactly() {
    let s = three_reloads_sum_exactly("sampled");
    assert_eq!(
        s["detail"]["accepts_from"], "uprobe ngx_get_connection",
        "{s}"
    );
    assert_eq!(s["detail"]["accepts_check"]["agree"], true, "{s}");
}

/// 3000 one-request connections while nginx reloads three times, traced with
/// `--detail <detail>`: exactly 3000 accepts and requests. Returns the summary.
fn three_reloads_sum_exactly(detail: &str) -> Value {
    let ng = Nginx::start(&NginxConfig::default());
    let probe = Probe::on(&ng).json().detail(detail).start();
    let addr = ng.addr();
    const N: usize = 3000;
    let client = thread::spawn(move || one_request_per_connection(addr, N));
    let mut generations = vec![ng.worker_pids()];
    for _ in 0..3 {
        thread::sleep(Duration::from_millis(300));
        ng.reload();
        let old: Vec<u32> = generations.iter().flatten().copied().collect();
        generations.push(wait_new_workers(&ng, &old, 2));
    }
    assert_eq!(client.join().unwrap(), N);
    thread::sleep(Duration::from_millis(700));
    let out = probe.stop();
    let s = out.summary_json();
    assert_eq!(total_accepts(&s), N as u64, "{s}");
    // nginx's own counters live on through reloads (same shared memory, same counts):
    // exactly N requests, nothing rebased.
    assert_eq!(s["requests"]["source"], "stub_status", "{s}");
    assert_eq!(s["requests"]["count"], N as u64, "{s}");
    assert_eq!(s["stub_status"]["accepted"], N as u64, "{s}");
    assert_eq!(s["stub_status"]["rebases"], 0, "{s}");
    // Every generation's workers are in the report.
    let reported: Vec<u64> = workers(&s)
        .iter()
        .map(|w| w["pid"].as_u64().unwrap())
        .collect();
    for pid in generations.iter().flatten() {
        assert!(
            reported.contains(&(*pid as u64)),
            "worker {pid} missing from {reported:?}"
        );
    }
    // Three reloads of 2 workers: 6 started; the first two generations exited.
    assert_eq!(events(&s, "worker_started").len(), 6, "{}", s["events"]);
    for pid in generations[..2].iter().flatten() {
        assert!(
            events(&s, "worker_exited").contains(&(*pid as u64)),
            "{}",
            s["events"]
        );
    }
    assert_eq!(s["drops"]["slots_exhausted"], 0);
    s
}

#[test]
fn a_killed_worker_is_reported_and_its_replacement_followed() {
    let ng = Nginx::start(&NginxConfig::default());
    let probe = Probe::on(&ng).json().start();
    let before = ng.worker_pids();
    assert_eq!(one_request_per_connection(ng.addr(), 100), 100);
    signal(before[0], Signal::SIGKILL);
    let after = wait_new_workers(&ng, &[before[0]], 2);
    let replacement = *after.iter().find(|p| !before.contains(p)).unwrap();
    assert_eq!(one_request_per_connection(ng.addr(), 100), 100);
    thread::sleep(Duration::from_millis(700));
    let out = probe.stop();
    let s = out.summary_json();
    assert_eq!(total_accepts(&s), 200, "{s}");
    assert_eq!(
        events(&s, "worker_exited"),
        vec![before[0] as u64],
        "{}",
        s["events"]
    );
    assert_eq!(
        events(&s, "worker_started"),
        vec![replacement as u64],
        "{}",
        s["events"]
    );
    let killed = workers(&s)
        .into_iter()
        .find(|w| w["pid"] == before[0])
        .expect("killed worker in report");
    assert_eq!(killed["alive"], false);
    assert!(
        out.stderr.contains(&format!("worker {} exited", before[0])),
        "{}",
        out.stderr
    );
}

#[test]
fn binary_upgrade_then_old_master_exit_gives_final_report_and_exit_0() {
    // nginx refuses USR2 unless daemonized.
    let ng = Nginx::start(&NginxConfig {
        daemon: true,
        ..NginxConfig::default()
    });
    let old_master = ng.master_pid();
    let probe = Probe::pid(old_master).json().start();
    assert_eq!(one_request_per_connection(ng.addr(), 50), 50);
    // The new master writes logs/nginx.pid; the old one's moves to nginx.pid.oldbin.
    let new_master = ng.upgrade().expect("a new master after USR2");
    // Let the probe classify the new master, then retire the old one gracefully.
    thread::sleep(Duration::from_millis(1200));
    signal(old_master, Signal::SIGQUIT);
    let mut probe = probe;
    let out = probe.wait();
    // Stop the new master (it is not the fixture's child).
    let _ = kill(Pid::from_raw(new_master as i32), Signal::SIGTERM);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let s = out.summary_json();
    assert_eq!(
        events(&s, "new_master"),
        vec![new_master as u64],
        "{}",
        s["events"]
    );
    // Still running when the old master exited: beside it in the summary.
    assert_eq!(s["new_master_beside"]["pid"], new_master, "{s}");
    assert!(
        s["end_reason"]
            .as_str()
            .unwrap()
            .contains(&format!("master {old_master} exited")),
        "{}",
        s["end_reason"]
    );
    assert_eq!(total_accepts(&s), 50, "{s}");
    assert!(out.stderr.contains("binary upgrade"), "{}", out.stderr);
}

/// A binary upgrade whose exec fails (the binary nginx was started from is gone, as
/// after a package upgrade that moved it): nginx's child exits with code 1 before it is
/// a master or a worker. Said as a failed upgrade, never as a worker of a new
/// generation that exited (a newcomer saw "worker started ... GEN 1 exited code 1").
#[test]
fn a_binary_upgrade_whose_exec_fails_is_no_worker_exit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let binary = dir.path().join("nginx");
    std::fs::copy("/usr/sbin/nginx", &binary).expect("copy nginx");
    let ng = Nginx::start(&NginxConfig {
        daemon: true,
        binary: Some(binary.clone()),
        ..NginxConfig::default()
    });
    let master = ng.master_pid();
    let probe = Probe::pid(master).json().start();
    assert_eq!(one_request_per_connection(ng.addr(), 30), 30);
    std::fs::remove_file(&binary).expect("remove the binary");
    signal(master, Signal::SIGUSR2);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !ng.error_log().contains("execve() failed") {
        assert!(std::time::Instant::now() < deadline, "no execve() failure");
        thread::sleep(Duration::from_millis(20));
    }
    // A refresh or two after the child's exit.
    thread::sleep(Duration::from_millis(1200));
    let s = probe.stop().summary_json();
    let failed = events(&s, "new_master_failed");
    assert_eq!(failed.len(), 1, "{}", s["events"]);
    assert!(events(&s, "worker_exited").is_empty(), "{}", s["events"]);
    assert!(events(&s, "worker_started").is_empty(), "{}", s["events"]);
    assert!(
        workers(&s)
            .iter()
            .all(|w| w["pid"].as_u64() != Some(failed[0])),
        "{s}"
    );
    assert_eq!(workers(&s).len(), 2, "{s}");
    assert_eq!(total_accepts(&s), 30, "{s}");
    // nginx's own line for it, `execve() failed while executing new binary process
    // "..." (2: No such file or directory)`, is the failed upgrade's class, not
    // process_other nor a worker's exit.
    let classes = &s["nginx_errors"]["classes"];
    assert_eq!(classes["binary_upgrade_failed"]["count"], 1, "{classes}");
    assert_eq!(
        classes["binary_upgrade_failed"]["group"], "process",
        "{classes}"
    );
    for not in ["process_other", "worker_exited"] {
        assert!(classes.get(not).is_none(), "{not}: {classes}");
    }
}

#[test]
fn nginx_in_its_own_pid_namespace_is_traced_by_host_pid() {
    let ng = Nginx::start(&NginxConfig {
        pid_namespace: true,
        ..NginxConfig::default()
    });
    let master = ng.master_pid();
    let status = std::fs::read_to_string(format!("/proc/{master}/status")).unwrap();
    assert!(status.contains(&format!("NSpid:\t{master}\t1")), "{status}");
    let probe = Probe::pid(master).json().start();
    assert!(
        probe
            .stderr
            .iter()
            .any(|l| l.contains("(pid 1 in its namespace)")),
        "{:?}",
        probe.stderr
    );
    assert_eq!(one_request_per_connection(ng.addr(), 200), 200);
    let out = probe.stop();
    let s = out.summary_json();
    assert_eq!(total_accepts(&s), 200, "{s}");
    assert_eq!(s["master_nspid"], serde_json::json!([master, 1]));
    for w in workers(&s) {
        let nspid = w["nspid"].as_array().unwrap();
        assert_eq!(nspid.len(), 2, "{w}");
        assert_eq!(nspid[0], w["pid"]);
        assert!(nspid[1].as_u64().unwrap() < 100, "in-namespace pid {w}");
    }
}

#[test]
fn two_probes_on_one_nginx_both_count_exactly() {
    let ng = Nginx::start(&NginxConfig::default());
    let a = Probe::on(&ng).json().start();
    let b = Probe::on(&ng).json().start();
    assert_eq!(one_request_per_connection(ng.addr(), 300), 300);
    let out_a = a.stop();
    assert_eq!(one_request_per_connection(ng.addr(), 100), 100);
    let out_b = b.stop_with(Signal::SIGTERM);
    assert_eq!(total_accepts(&out_a.summary_json()), 300);
    assert_eq!(total_accepts(&out_b.summary_json()), 400);
}

#[test]
fn interval_reports_add_up_to_the_summary_through_many_reloads() {
    // More than 16 workers exit, so old ones are merged into `exited_merged`: interval
    // deltas must still add up exactly.
    let ng = Nginx::start(&NginxConfig::default());
    let mut probe = Probe::on(&ng).json().interval(0.5).duration(9).start();
    let addr = ng.addr();
    const N: usize = 2000;
    let client = thread::spawn(move || one_request_per_connection(addr, N));
    for _ in 0..12 {
        thread::sleep(Duration::from_millis(300));
        ng.reload();
    }
    assert_eq!(client.join().unwrap(), N);
    let out = probe.wait();
    assert!(out.status.success(), "{out:?}");
    let docs: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let summary = docs.last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(total_accepts(summary), N as u64, "{summary}");
    assert!(
        summary["exited_merged"]["workers"].as_u64().unwrap() > 0,
        "{summary}"
    );
    // Their CPU time is kept (a number, not null), so a CPU counter never goes down.
    assert!(
        summary["exited_merged"]["cpu_s"].as_f64().is_some(),
        "{summary}"
    );
    let intervals: u64 = docs[..docs.len() - 1]
        .iter()
        .inspect(|d| assert_eq!(d["type"], "interval"))
        .map(total_accepts)
        .sum();
    assert_eq!(intervals, N as u64, "intervals add up to the summary");
    // Every worker start is reported in the interval it happened in, once.
    let started_in_intervals: usize = docs[..docs.len() - 1]
        .iter()
        .map(|d| events(d, "worker_started").len())
        .sum();
    assert_eq!(
        started_in_intervals,
        events(summary, "worker_started").len(),
        "{} intervals; drops {}",
        docs.len() - 1,
        summary["drops"]
    );
    assert!(started_in_intervals >= 12, "{started_in_intervals}");
}

#[test]
fn a_reader_that_goes_away_ends_the_run_with_exit_0() {
    use std::io::BufRead;
    let ng = Nginx::start(&NginxConfig::default());
    let mut child = std::process::Command::new(nginx_probe_tests::probe_binary())
        .args([
            "--pid",
            &ng.master_pid().to_string(),
            "--interval",
            "0.2",
            "--duration",
            "30",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Like `| head -3`: read three lines, then close the pipe.
    {
        let mut r = std::io::BufReader::new(child.stdout.take().unwrap());
        for _ in 0..3 {
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("failed"), "{stderr}");
}

/// Sets a sysctl under /proc/sys and restores it on drop.
struct Sysctl {
    path: &'static str,
    old: String,
}

impl Sysctl {
    fn set(path: &'static str, value: &str) -> Sysctl {
        let old = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
        std::fs::write(path, value).unwrap_or_else(|e| panic!("write {path}: {e}"));
        Sysctl { path, old }
    }
}

impl Drop for Sysctl {
    fn drop(&mut self) {
        let _ = std::fs::write(self.path, self.old.trim());
    }
}

#[test]
fn a_worker_whose_pid_collides_in_the_fast_filter_is_still_counted_exactly() {
    // The kernel's first check of every syscall is a direct-mapped array indexed by
    // tgid mod 65536. Make a reload fork workers whose pids have the same index as live,
    // tracked workers: they must be found through the hash map behind the array.
    let _pid_max = Sysctl::set("/proc/sys/kernel/pid_max", "4194304");
    let ng = Nginx::start(&NginxConfig {
        workers: 4,
        ..NginxConfig::default()
    });
    let old = ng.worker_pids();
    let probe = Probe::on(&ng).json().start();
    // The next pid the kernel hands out is ns_last_pid + 1 (a cursor, not a setting:
    // nothing to restore). Other processes forking meanwhile shift the new workers by
    // a pid or two; with 4 old workers in a row, one still lands on a taken index.
    let first = *old.iter().min().unwrap() + 65_536;
    std::fs::write("/proc/sys/kernel/ns_last_pid", (first - 1).to_string())
        .expect("write ns_last_pid");
    ng.reload();
    let new = wait_new_workers(&ng, &old, 4);
    let colliding: Vec<u32> = new
        .iter()
        .copied()
        .filter(|n| old.contains(&(n - 65_536)))
        .collect();
    assert!(
        !colliding.is_empty(),
        "no new worker {new:?} collides with an old one {old:?} (other processes took the pids): rerun"
    );
    assert_eq!(one_request_per_connection(ng.addr(), 400), 400);
    thread::sleep(Duration::from_millis(700));
    let out = probe.stop();
    let s = out.summary_json();
    assert_eq!(total_accepts(&s), 400, "{s}");
    // The colliding workers did their share: every new worker is in the report with
    // its syscalls, and the new ones took all 400 connections.
    let by_pid = |pid: u32| {
        workers(&s)
            .into_iter()
            .find(|w| w["pid"] == pid)
            .unwrap_or_else(|| panic!("worker {pid} missing: {s}"))
    };
    let new_accepts: u64 = new
        .iter()
        .map(|&p| by_pid(p)["accepts"].as_u64().unwrap())
        .sum();
    assert_eq!(new_accepts, 400, "{s}");
    for pid in colliding {
        let w = by_pid(pid);
        assert!(
            w["syscalls"]["epoll_wait"]["count"].as_u64().unwrap() > 0,
            "colliding worker {pid} not traced: {w}"
        );
    }
}

#[test]
fn after_a_reload_has_drained_the_next_one_reuses_the_first_workers_slots() {
    // Free slots are a stack, freed last given first: the metrics labels (slot,
    // generation) take about 2N values for N workers, however many reloads.
    let ng = Nginx::start(&NginxConfig::default());
    let probe = Probe::on(&ng).json().start();
    let first = ng.worker_pids();
    let mut seen = first.clone();
    for _ in 0..2 {
        ng.reload();
        let now = wait_new_workers(&ng, &seen, 2);
        seen.extend(&now);
        // The old workers exit at once (no connections); the probe recycles their
        // slots at its next 500 ms look.
        thread::sleep(Duration::from_millis(1200));
    }
    let out = probe.stop();
    let s = out.summary_json();
    let by_pid = |pid: u32| {
        workers(&s)
            .into_iter()
            .find(|w| w["pid"] == pid)
            .unwrap_or_else(|| panic!("worker {pid} missing: {s}"))
    };
    let slot_gen = |pid: u32| {
        let w = by_pid(pid);
        (
            w["slot"].as_u64().unwrap(),
            w["generation"].as_u64().unwrap(),
        )
    };
    let mut gen0: Vec<(u64, u64)> = first.iter().map(|&p| slot_gen(p)).collect();
    gen0.sort();
    assert_eq!(gen0, [(0, 0), (1, 0)], "{s}");
    let mut gen1: Vec<(u64, u64)> = seen[2..4].iter().map(|&p| slot_gen(p)).collect();
    gen1.sort();
    assert_eq!(
        gen1,
        [(2, 0), (3, 0)],
        "new workers start while the old ones hold 0 and 1"
    );
    let mut gen2: Vec<(u64, u64)> = seen[4..6].iter().map(|&p| slot_gen(p)).collect();
    gen2.sort();
    assert_eq!(
        gen2,
        [(0, 1), (1, 1)],
        "the first workers' slots, next generation"
    );
}

/// Trial 13: `nginx -s stop` (SIGTERM to the master) right after the last requests.
/// nginx's counters are read every refresh (500 ms) from the master's memory, gone once
/// it exits: the requests since the last read were lost (43,574 requests for 51,014).
/// The shared memory that holds them is kept open through /proc/<pid>/map_files, so the
/// final read after the exit counts every one. Burst and stop come within a few ms, so
/// without it a refresh lands between them only now and then.
#[test]
fn requests_right_before_the_master_stops_are_counted() {
    for _ in 0..3 {
        let mut ng = Nginx::start(&NginxConfig::default());
        let mut probe = Probe::pid(ng.master_pid()).json().start();
        assert_eq!(one_request_per_connection(ng.addr(), 100), 100);
        ng.stop();
        let out = probe.wait();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let s = out.summary_json();
        assert_eq!(s["requests"]["source"], "stub_status", "{s}");
        assert_eq!(s["requests"]["count"], 100, "{}", s["requests"]);
        assert_eq!(total_accepts(&s), 100);
        // A stop is no incident (trial 13: a critical no_workers at `nginx -s stop`).
        let critical: Vec<&Value> = s["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["severity"] == "critical")
            .collect();
        assert!(critical.is_empty(), "{critical:?}");
    }
}

/// Trial 14: a stop (TERM, as `nginx -s stop` sends) with 7 connections open. nginx's
/// workers exit with code 0 as after a graceful QUIT, and the kernel closes the 7
/// connections as they exit: a fast stop, never said "graceful". The master's network
/// namespace is gone at the final snapshot: net.ipv4.tcp_migrate_req is the value read
/// while it lived, not "could not be read".
#[test]
fn a_stop_with_connections_open_is_a_fast_stop_not_graceful() {
    let mut ng = Nginx::start(&NginxConfig::default());
    let workers = ng.worker_pids();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("stop.rec");
    let mut probe = Probe::pid(ng.master_pid()).json().record(&rec).start();
    let held = ng.hold_connections(7);
    // One request on another connection: each held one is accepted before it.
    assert_eq!(one_request_per_connection(ng.addr(), 1), 1);
    std::thread::sleep(Duration::from_millis(300));
    ng.stop();
    let out = probe.wait();
    drop(held);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let s = out.summary_json();
    let exited: Vec<&Value> = s["workers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| workers.contains(&(w["pid"].as_u64().unwrap() as u32)))
        .collect();
    assert_eq!(exited.len(), workers.len(), "{}", s["workers"]);
    let mut cut = 0;
    for w in &exited {
        assert_eq!(w["exit"]["code"], 0, "{w}");
        // A TERM: the worker never entered ngx_close_idle_connections.
        assert_eq!(w["exit"]["drained"], false, "{w}");
        cut += w["connections_closed"]["by_worker_exit"].as_u64().unwrap();
    }
    assert_eq!(cut, 7, "{}", s["workers"]);
    let migrate = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_migrate_req")
        .map(|t| t.trim().parse::<u64>().unwrap());
    if let Ok(m) = migrate {
        assert_eq!(
            s["local_ports"]["tcp_migrate_req"], m,
            "{}",
            s["local_ports"]
        );
    }
    let text = Probe::report(&rec).run().stdout;
    assert!(
        text.contains(&format!(
            "  exits: {n} with code 0 (0 after a graceful QUIT, they drained; {n} a fast stop, TERM/INT as `nginx -s stop` sends, they never drained: ngx_close_idle_connections uprobe; 7 client connections cut as they exited)",
            n = workers.len(),
        )),
        "{text}"
    );
    assert!(
        !text.contains("graceful (code 0)") && !text.contains("(graceful)"),
        "{text}"
    );
}

/// Trial 17: the listening sockets `nginx -s quit` closed 8 s after a reload were said
/// "after reload 1". A reload, 3 s, then QUIT to the master: the reload closes no
/// listener (the same configuration), the QUIT closes the port's one, and its event is
/// nginx's stop's (`at_stop`), said "as nginx stopped", never after the reload.
#[test]
fn listeners_closed_by_a_quit_after_a_reload_are_the_stop_s() {
    let ng = Nginx::start(&NginxConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("quit.rec");
    let mut probe = Probe::pid(ng.master_pid()).json().record(&rec).start();
    thread::sleep(Duration::from_millis(1000));
    let old = ng.worker_pids();
    ng.reload();
    wait_new_workers(&ng, &old, old.len());
    assert_eq!(one_request_per_connection(ng.addr(), 5), 5);
    thread::sleep(Duration::from_millis(3000));
    signal(ng.master_pid(), Signal::SIGQUIT);
    let out = probe.wait();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let s = out.summary_json();
    let events = s["connections"]["listener_closes"]
        .as_array()
        .unwrap_or_else(|| panic!("no listener close in {}", s["connections"]))
        .clone();
    let closed: u64 = events
        .iter()
        .map(|e| e["listeners_closed"].as_u64().unwrap())
        .sum();
    assert_eq!(closed, 1, "{events:?}");
    for e in &events {
        assert_eq!(e["port"], ng.port as u64, "{e}");
        assert_eq!(e["at_stop"], true, "{e}");
        assert_eq!(e["reload_generation"], 1, "{e}");
    }
    let text = Probe::report(&rec).run().stdout;
    assert!(
        text.contains("    as nginx stopped (its newest workers all began their shutdown or exited, none started in their place) at "),
        "{text}"
    );
    assert!(!text.contains("after reload 1 (generation 1) at"), "{text}");
}

/// Trial 18: 3389 connection attempts refused after `nginx -s quit` closed the last
/// listener were only a reset reason (NO_SOCKET). A request half sent keeps the worker
/// (and the master) up after QUIT; 5 connects after the listener closed are refused
/// (ECONNREFUSED on the client): exactly 5 SYNs refused, said with the stop's close.
#[test]
fn connection_attempts_after_a_quit_closed_the_listener_are_counted_as_refused() {
    let ng = Nginx::start(&NginxConfig {
        workers: 1,
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("quit.rec");
    let mut probe = Probe::pid(ng.master_pid()).json().record(&rec).start();
    thread::sleep(Duration::from_millis(1000));
    let mut held = TcpStream::connect(ng.addr()).expect("connect");
    held.write_all(b"GET / HTTP/1.1\r\n")
        .expect("half a request");
    thread::sleep(Duration::from_millis(300));
    signal(ng.master_pid(), Signal::SIGQUIT);
    thread::sleep(Duration::from_millis(700));
    let refused = (0..5)
        .filter(|_| {
            matches!(TcpStream::connect(ng.addr()), Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused)
        })
        .count();
    assert_eq!(refused, 5, "the clients' connects refused");
    thread::sleep(Duration::from_millis(700));
    held.write_all(b"Host: test\r\nConnection: close\r\n\r\n")
        .expect("the rest of the request");
    let mut body = Vec::new();
    let _ = held.read_to_end(&mut body);
    assert!(
        body.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    let out = probe.wait();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let s = out.summary_json();
    let port = &s["connections"]["ports"][0];
    assert_eq!(port["syns_refused"], 5, "{port}");
    let text = Probe::report(&rec).run().stdout;
    assert!(
        text.contains("  5 connection attempts refused: their SYN found no listener and was answered with a reset (NO_SOCKET, tracepoint tcp:tcp_send_reset): clients kept connecting after nginx's listening socket closed as nginx stopped"),
        "{text}"
    );
}
