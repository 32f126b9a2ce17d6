//! Worker lifecycle (shared case 19): old workers draining after reloads, with the
//! connections they still hold, and how workers exit (graceful code 0, a crash on
//! signal 11). Exact values: the clients this test opened on each generation.

use std::{
    collections::BTreeSet,
    io::{Read, Write},
    net::TcpStream,
    thread,
    time::{Duration, Instant},
};

use nginx_probe_tests::{stream_client, workers, Nginx, NginxConfig, Probe, StreamBackend};
use nix::{
    sys::signal::{kill, Signal},
    unistd::Pid,
};
use serde_json::Value;

/// nginx proxying `/stream` to `backend` unbuffered, 2 workers, no
/// worker_shutdown_timeout.
fn nginx(backend: &StreamBackend) -> Nginx {
    Nginx::start(&NginxConfig {
        server_extra: format!(
            "location /stream {{ proxy_pass http://{}; proxy_buffering off; }}",
            backend.addr()
        ),
        ..Default::default()
    })
}

fn title(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .trim_end_matches('\0')
        .to_string()
}

/// Sends SIGHUP to the master, waits for 2 workers none of which is in `old`, and for
/// every still-running `old` worker to be titled shutting down (its listening sockets
/// closed). Returns the new workers.
fn reload(ng: &Nginx, old: &[u32]) -> Vec<u32> {
    ng.reload();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = ng.worker_pids();
        let settled = old
            .iter()
            .all(|&p| title(p).is_empty() || title(p).ends_with("is shutting down"));
        let fresh: Vec<u32> = now
            .iter()
            .copied()
            .filter(|p| !old.contains(p) && title(*p) == "nginx: worker process")
            .collect();
        if fresh.len() == 2 && settled {
            // Let the old workers finish closing their listening sockets.
            thread::sleep(Duration::from_millis(200));
            return fresh;
        }
        assert!(Instant::now() < deadline, "reload did not settle: {now:?}");
        thread::sleep(Duration::from_millis(20));
    }
}

fn verdict<'a>(s: &'a Value, id: &str) -> Option<&'a Value> {
    s["verdicts"].as_array()?.iter().find(|v| v["id"] == id)
}

fn worker(s: &Value, pid: u32) -> &Value {
    s["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .find(|w| w["pid"] == pid)
        .unwrap_or_else(|| panic!("worker {pid} not in the report: {s}"))
}

#[test]
fn three_reloads_with_streams_held_leave_three_generations_draining() {
    let backend = StreamBackend::start(Duration::from_secs(2));
    let ng = nginx(&backend);
    let probe = Probe::on(&ng).json().duration(60).start();
    // Clients opened on each generation before the reload that retires it.
    let per_gen = [4usize, 3, 2];
    let mut gens: Vec<Vec<u32>> = vec![ng.worker_pids()];
    let mut held = Vec::new();
    for &k in &per_gen {
        for _ in 0..k {
            held.push(stream_client(ng.addr(), "/stream"));
        }
        thread::sleep(Duration::from_millis(300));
        let old: Vec<u32> = gens.iter().flatten().copied().collect();
        gens.push(reload(&ng, &old));
        thread::sleep(Duration::from_millis(1500));
    }
    // Which old workers still run (they hold a stream) and which exited at once.
    let old: Vec<u32> = gens[..3].iter().flatten().copied().collect();
    let draining: BTreeSet<u32> = old
        .iter()
        .copied()
        .filter(|&p| title(p).ends_with("is shutting down"))
        .collect();
    thread::sleep(Duration::from_millis(700));
    let out = probe.stop();
    let s = out.summary_json();
    // Every old generation holds its clients, so each has at least one worker left.
    let l = &s["lifecycle"];
    let gens_reported = l["draining"].as_array().expect("draining generations");
    assert_eq!(gens_reported.len(), 3, "{l}");
    for (i, g) in gens_reported.iter().enumerate() {
        assert_eq!(g["reload_generation"], i as u64, "{g}");
        assert_eq!(g["client_connections"], per_gen[i] as u64, "{g}");
        assert_eq!(g["upstream_connections"], per_gen[i] as u64, "{g}");
        let pids: BTreeSet<u32> = g["workers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["pid"].as_u64().unwrap() as u32)
            .collect();
        let want: BTreeSet<u32> = gens[i]
            .iter()
            .copied()
            .filter(|p| draining.contains(p))
            .collect();
        assert_eq!(pids, want, "generation {i}: {g}");
        assert!(g["rss_bytes"].as_u64().unwrap() > 0, "{g}");
    }
    // Per worker: state and generation; the new generation serves.
    for &pid in &draining {
        let w = worker(&s, pid);
        assert_eq!(w["state"], "shutting_down", "{w}");
        assert!(w["shutting_down_since_unix_s"].as_f64().is_some(), "{w}");
        assert!(w["rss_bytes"].as_u64().unwrap() > 0, "{w}");
    }
    for &pid in &gens[3] {
        let w = worker(&s, pid);
        assert_eq!(w["state"], "serving", "{w}");
        assert_eq!(w["reload_generation"], 3, "{w}");
    }
    // Old workers with no stream exited gracefully at once: code 0 from the kernel.
    let exited: Vec<u32> = old
        .iter()
        .copied()
        .filter(|p| !draining.contains(p))
        .collect();
    for &pid in &exited {
        let w = worker(&s, pid);
        assert_eq!(w["alive"], false, "{w}");
        assert_eq!(w["exit"]["code"], 0, "{w}");
        assert!(w["exit"].get("signal").is_none(), "{w}");
        // A reload's QUIT: it entered ngx_close_idle_connections before exiting.
        assert_eq!(w["exit"]["drained"], true, "{w}");
    }
    assert_eq!(l["exits"]["graceful"], exited.len() as u64, "{l}");
    assert_eq!(l["exits"]["signal"], 0, "{l}");
    let v = verdict(&s, "worker_shutdown_timeout").unwrap_or_else(|| panic!("{}", s["verdicts"]));
    assert_eq!(v["evidence"]["draining_generations"], 3, "{v}");
    assert_eq!(
        v["evidence"]["client_connections_held"],
        per_gen.iter().sum::<usize>() as u64,
        "{v}"
    );
    assert_eq!(v["directives"][0], "worker_shutdown_timeout", "{v}");
    assert_eq!(
        v["evidence"]["config_worker_shutdown_timeout"],
        "unset (old workers wait for their connections) (default)",
        "{v}"
    );
    assert!(verdict(&s, "worker_crashes").is_none(), "{}", s["verdicts"]);
    drop(held);
}

#[test]
fn one_reload_whose_old_workers_exit_promptly_has_no_verdict() {
    let backend = StreamBackend::start(Duration::from_secs(2));
    let ng = nginx(&backend);
    let probe = Probe::on(&ng).json().duration(60).start();
    let old = ng.worker_pids();
    // A short request, finished before the reload: nothing to drain.
    let mut c = TcpStream::connect(ng.addr()).unwrap();
    c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut body = Vec::new();
    c.read_to_end(&mut body).unwrap();
    // Generations are told apart by the workers' start times (BATCH_TICKS, 200 ms at
    // 100 ticks/s): a reload within that of nginx's start would be the same batch
    // (it failed once so in the full suite).
    thread::sleep(Duration::from_millis(500));
    let new = reload(&ng, &old);
    let deadline = Instant::now() + Duration::from_secs(10);
    while old.iter().any(|&p| !title(p).is_empty()) {
        assert!(Instant::now() < deadline, "old workers still run");
        thread::sleep(Duration::from_millis(20));
    }
    thread::sleep(Duration::from_millis(1200));
    let out = probe.stop();
    let s = out.summary_json();
    assert!(
        verdict(&s, "worker_shutdown_timeout").is_none(),
        "{}",
        s["verdicts"]
    );
    assert_eq!(
        s["lifecycle"]["draining"].as_array().unwrap().len(),
        0,
        "{s}"
    );
    assert_eq!(s["lifecycle"]["exits"]["graceful"], 2, "{}", s["lifecycle"]);
    for &pid in &old {
        assert_eq!(worker(&s, pid)["exit"]["code"], 0);
        assert_eq!(worker(&s, pid)["reload_generation"], 0);
    }
    for &pid in &new {
        assert_eq!(worker(&s, pid)["reload_generation"], 1);
        assert_eq!(worker(&s, pid)["state"], "serving");
    }
    assert_eq!(workers(&s).len(), 4, "{s}");
}

#[test]
fn a_worker_killed_by_sigsegv_is_reported_as_a_crash_and_its_respawn_followed() {
    let ng = Nginx::start(&NginxConfig::default());
    let probe = Probe::on(&ng).json().duration(60).start();
    let before = ng.worker_pids();
    let victim = before[0];
    kill(Pid::from_raw(victim as i32), Signal::SIGSEGV).expect("SIGSEGV");
    let deadline = Instant::now() + Duration::from_secs(10);
    let respawn = loop {
        let now = ng.worker_pids();
        if let Some(&p) = now.iter().find(|p| !before.contains(p)) {
            if now.len() == 2 {
                break p;
            }
        }
        assert!(Instant::now() < deadline, "no respawn: {now:?}");
        thread::sleep(Duration::from_millis(20));
    };
    // The tracker links the respawn at a refresh (every 500 ms); on a loaded machine
    // (the suite under CI) two refreshes in 1.2 s were once not enough.
    thread::sleep(Duration::from_millis(3000));
    let out = probe.stop();
    let s = out.summary_json();
    let w = worker(&s, victim);
    assert_eq!(w["alive"], false, "{w}");
    assert_eq!(w["exit"]["signal"], 11, "{w}");
    assert!(w["exit"].get("code").is_none(), "{w}");
    let l = &s["lifecycle"];
    assert_eq!(l["exits"]["signal"], 1, "{l}");
    assert_eq!(l["exits"]["by_signal"]["11"], 1, "{l}");
    assert_eq!(l["respawned"], 1, "{l}");
    assert_eq!(l["signal_exits"][0]["pid"], victim, "{l}");
    assert_eq!(l["signal_exits"][0]["replaced_by"], respawn, "{l}");
    // A respawn keeps the generation; no reload happened.
    assert_eq!(worker(&s, respawn)["reload_generation"], 0);
    assert_eq!(worker(&s, before[1])["reload_generation"], 0);
    let v = verdict(&s, "worker_crashes").unwrap_or_else(|| panic!("{}", s["verdicts"]));
    assert_eq!(v["severity"], "critical", "{v}");
    assert_eq!(v["evidence"]["crash_signal_exits"], 1, "{v}");
    assert_eq!(v["evidence"]["workers"][0]["pid"], victim, "{v}");
    assert!(
        v["evidence"]["stub_status_gauges"]
            .as_str()
            .unwrap()
            .contains("never decrements"),
        "{v}"
    );
    // nginx's own log says the same (alert level).
    assert!(
        ng.error_log()
            .contains(&format!("worker process {victim} exited on signal 11")),
        "{}",
        ng.error_log()
    );
    // Read from the log and matched against the kernel's exit of that worker: one
    // crash during the run, no line contradicted.
    let h = &s["nginx_errors"]["history"];
    assert_eq!(h["workers_crashed_since_attach"], 1, "{h}");
    assert!(h.get("crash_lines_contradicted").is_none(), "{h}");
}

/// A reload that adds `worker_shutdown_timeout 1s` while a stream is held: the old
/// worker was started without it, so it drains past 1 s; nginx-probe names it
/// (`worker_shutdown_timeout_exceeded`: its pid, generation 0, its 1 client
/// connection), and the pile-up verdict does not advise setting what is set.
#[test]
fn a_worker_started_without_the_shutdown_timeout_outlives_it_and_is_named() {
    let backend = StreamBackend::start(Duration::from_secs(2));
    let ng = nginx(&backend);
    let probe = Probe::on(&ng).json().duration(60).start();
    let old = ng.worker_pids();
    let held = stream_client(ng.addr(), "/stream");
    thread::sleep(Duration::from_millis(500));
    let conf = ng.prefix.join("nginx.conf");
    let text = std::fs::read_to_string(&conf).unwrap();
    let first = text.lines().next().unwrap().to_string();
    std::fs::write(
        &conf,
        text.replacen(&first, &format!("{first}\nworker_shutdown_timeout 1s;"), 1),
    )
    .unwrap();
    reload(&ng, &old);
    let deadline = Instant::now() + Duration::from_secs(10);
    let draining = loop {
        let d: Vec<u32> = old
            .iter()
            .copied()
            .filter(|&p| title(p).ends_with("is shutting down"))
            .collect();
        let gone = old.iter().filter(|&&p| title(p).is_empty()).count();
        if d.len() == 1 && gone == 1 {
            break d[0];
        }
        assert!(Instant::now() < deadline, "old workers: {d:?}, {gone} gone");
        thread::sleep(Duration::from_millis(20));
    };
    thread::sleep(Duration::from_millis(3500));
    let s = probe.stop().summary_json();
    let v = verdict(&s, "worker_shutdown_timeout_exceeded")
        .unwrap_or_else(|| panic!("{}", s["verdicts"]));
    let past = v["evidence"]["workers_past_timeout"].as_array().unwrap();
    assert_eq!(past.len(), 1, "{v}");
    assert_eq!(past[0]["pid"], draining, "{v}");
    assert_eq!(past[0]["reload_generation"], 0, "{v}");
    assert_eq!(past[0]["client_connections"], 1, "{v}");
    assert_eq!(
        v["evidence"]["worker_shutdown_timeout"],
        format!("1s ({})", ng.conf_at("worker_shutdown_timeout")),
        "{v}"
    );
    assert!(
        verdict(&s, "worker_shutdown_timeout").is_none(),
        "{}",
        s["verdicts"]
    );
    drop(held);
}

/// `n` keepalive connections to `ng`, each with one complete response read: idle in
/// their worker, ready for a next request.
fn idle_clients(ng: &Nginx, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|_| {
            let mut s = TcpStream::connect(ng.addr()).expect("connect");
            s.write_all(GET).expect("send");
            let mut got = Vec::new();
            let mut chunk = [0u8; 4096];
            while !got.ends_with(nginx_probe_tests::INDEX_BODY.as_bytes()) {
                let n = s.read(&mut chunk).expect("read the response");
                assert!(n > 0, "nginx closed before the response was complete");
                got.extend_from_slice(&chunk[..n]);
            }
            s
        })
        .collect()
}

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: test\r\n\r\n";

/// Cuts a request on each of `conns` (idle on `worker`) by a graceful shutdown: the
/// worker is stopped (SIGSTOP), each client sends its next request, `shutdown` runs
/// (a reload, a QUIT to the master, or nothing), then the worker gets SIGQUIT itself
/// (the master tells it by its channel, which it would read in the same batch as the
/// requests: the signal makes its drain come first) and SIGCONT: it drains before
/// reading anything. Returns the clients that got a reset.
fn cut_requests(worker: u32, conns: &mut [TcpStream], shutdown: impl FnOnce()) -> usize {
    let w = Pid::from_raw(worker as i32);
    kill(w, Signal::SIGSTOP).expect("SIGSTOP the worker");
    thread::sleep(Duration::from_millis(200));
    for c in conns.iter_mut() {
        c.write_all(GET).expect("send the next request");
    }
    thread::sleep(Duration::from_millis(200));
    shutdown();
    thread::sleep(Duration::from_millis(200));
    kill(w, Signal::SIGQUIT).expect("SIGQUIT the worker");
    kill(w, Signal::SIGCONT).expect("SIGCONT the worker");
    let mut reset = 0;
    for c in conns.iter_mut() {
        c.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut buf = [0u8; 4096];
        if matches!(c.read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset) {
            reset += 1;
        }
    }
    reset
}

/// Newcomer trial 12's F4: requests that reach a worker's idle keepalive connections
/// as it shuts down gracefully are cut: its sweep of idle connections
/// (`ngx_close_idle_connections`) closes them with the requests unread, and the kernel
/// resets them. Made exact here: 5 idle connections get their next request while
/// the worker is stopped (SIGSTOP), then a SIGQUIT to the worker alone and SIGCONT:
/// the signal ends its `epoll_wait`, and it drains before reading anything. The 5
/// clients get a reset; the probe counts 5 draining resets and says them in
/// `requests_after_close`, put on a signal to that worker (the master starts another
/// of its generation in its place), not on a reload nor a stop.
#[test]
fn requests_reaching_a_draining_worker_s_idle_connections_are_said_as_cut() {
    let ng = Nginx::start(&NginxConfig {
        workers: 1,
        ..Default::default()
    });
    let probe = Probe::on(&ng).json().start();
    let mut conns = idle_clients(&ng, 5);
    assert_eq!(
        cut_requests(ng.worker_pids()[0], &mut conns, || ()),
        5,
        "clients reset"
    );
    thread::sleep(Duration::from_millis(500));
    let s = probe.stop().summary_json();
    let port = &s["connections"]["ports"][0];
    assert_eq!(port["closed_while_draining_reset"], 5, "{port}");
    let v = verdict(&s, "requests_after_close").unwrap_or_else(|| panic!("{}", s["verdicts"]));
    assert_eq!(v["evidence"]["draining_resets"], 5, "{v}");
    assert!(
        v["advice"]
            .as_str()
            .unwrap_or_default()
            .starts_with("draining workers' close() found 5 requests unread"),
        "{v}"
    );
    assert_eq!(
        v["evidence"]["draining_resets_by_drain"],
        serde_json::json!({"a signal to the worker alone (generation 0, the newest, whose other workers still serve: not a reload nor a stop)": 5}),
        "{v}"
    );
    // The master loaded no configuration: its new worker is a respawn of generation
    // 0, not a reload's generation 1.
    assert_eq!(s["lifecycle"]["respawned"], 1, "{}", s["lifecycle"]);
    assert!(
        s["workers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|w| w["reload_generation"].is_null() || w["reload_generation"] == 0),
        "{}",
        s["workers"]
    );
}

/// Newcomer trial 18: the requests a reload's draining workers cut and those nginx's
/// stop cut were said together. One worker: 3 requests cut as a reload drains it
/// (generation 0), then 4 cut as `nginx -s quit` drains its successor (generation 1,
/// the newest, none serving after): said apart, 3 at the reload that started
/// generation 1 and 4 as nginx stopped, each exact.
#[test]
fn a_reload_s_cut_requests_and_a_stop_s_are_said_apart() {
    let ng = Nginx::start(&NginxConfig {
        workers: 1,
        ..Default::default()
    });
    let mut probe = Probe::pid(ng.master_pid()).json().start();
    thread::sleep(Duration::from_millis(500));
    let old = ng.worker_pids();
    let mut conns = idle_clients(&ng, 3);
    assert_eq!(
        cut_requests(old[0], &mut conns, || ng.reload()),
        3,
        "reset at the reload"
    );
    let new = wait_serving(&ng, &old);
    let mut conns = idle_clients(&ng, 4);
    let master = Pid::from_raw(ng.master_pid() as i32);
    let quit = || kill(master, Signal::SIGQUIT).expect("SIGQUIT the master");
    assert_eq!(cut_requests(new, &mut conns, quit), 4, "reset at the stop");
    let out = probe.wait();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let s = out.summary_json();
    let v = verdict(&s, "requests_after_close").unwrap_or_else(|| panic!("{}", s["verdicts"]));
    assert_eq!(v["evidence"]["draining_resets"], 7, "{v}");
    assert_eq!(
        v["evidence"]["draining_resets_by_drain"],
        serde_json::json!({
            "the reload that started generation 1 (generation 0's workers)": 3,
            "nginx stopped (generation 1's workers, the newest, none serving at the end: a QUIT or stop, or a binary upgrade's old master shutting its workers down)": 4
        }),
        "{v}"
    );
}

/// The one worker serving that is not in `old`, once it is titled so.
fn wait_serving(ng: &Nginx, old: &[u32]) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let fresh: Vec<u32> = ng
            .worker_pids()
            .into_iter()
            .filter(|p| !old.contains(p) && title(*p) == "nginx: worker process")
            .collect();
        if let [one] = fresh[..] {
            return one;
        }
        assert!(Instant::now() < deadline, "no new worker serving");
        thread::sleep(Duration::from_millis(20));
    }
}
