//! nginx's own refusals and closes, from its error log, and the CPU quota (cases 14,
//! 15 and 16 of ../shared/cases): every count asserted against what the client saw or
//! what nginx wrote.

use std::{
    io::{BufReader, Read, Write},
    net::TcpStream,
    thread,
    time::Duration,
};

use nginx_probe_tests::{
    events, free_port, paced_requests, read_status, requests_reusing_connections, sum_workers,
    verdict, CpuCgroup, Nginx, NginxConfig, Probe,
};
use serde_json::Value;

/// Runs the probe (exact requests: uprobes) around `load`; returns the summary and the
/// error-log text nginx appended while the probe ran.
fn run(ng: &Nginx, load: impl FnOnce()) -> (Value, String) {
    let before = ng.error_log().len();
    let s = Probe::on(ng)
        .json()
        .uprobes()
        .settle(Duration::from_millis(1200))
        .summary_around(load);
    let log = ng.error_log();
    (s, log[before.min(log.len())..].to_string())
}

const OURS: [&str; 6] = [
    "slow_requests_idle_workers",
    "requests_refused",
    "upstream_errors",
    "keepalive_requests_low",
    "worker_connections_exhausted",
    "cpu_throttled",
];

#[test]
fn limit_req_refusals_are_counted_from_nginx_error_log() {
    // Case 14: limit_req without burst, 10 clients at 8 req/s each (80 req/s, under
    // the rate, but all 10 send at once): most are refused with 503.
    let ng = Nginx::start(&NginxConfig {
        http_extra: "limit_req_zone $binary_remote_addr zone=z:1m rate=100r/s; limit_req zone=z;"
            .into(),
        ..NginxConfig::default()
    });
    let mut statuses = Default::default();
    let (s, log) = run(&ng, || statuses = paced_requests(ng.addr(), 10, 24, 8.0).0);
    let refused_seen = statuses.get(&503).copied().unwrap_or(0) as u64;
    let total: usize = statuses.values().sum();
    assert_eq!(total, 240);
    let lines = log.matches("limiting requests, excess").count() as u64;
    assert_eq!(refused_seen, lines, "503s vs nginx's lines: {statuses:?}");
    assert!(refused_seen >= 120, "most requests refused: {statuses:?}");
    let e = &s["nginx_errors"];
    assert_eq!(e["readable"], true, "{e}");
    assert!(
        e["path"].as_str().unwrap().ends_with("/logs/error.log"),
        "{e}"
    );
    assert_eq!(e["classes"]["limit_req"]["count"], refused_seen, "{e}");
    assert_eq!(
        e["classes"]["limit_req"]["levels"]["error"], refused_seen,
        "{e}"
    );
    assert_eq!(e["classes"]["limit_req"]["directive"], "limit_req");
    // No request data leaves the error log.
    let text = e.to_string();
    assert!(
        !text.contains("127.0.0.1") && !text.contains("GET /"),
        "{text}"
    );
    assert_eq!(
        sum_workers(&s, &["requests", "count"]),
        240,
        "exact requests (uprobes)"
    );
    let v = verdict(&s, "requests_refused").unwrap_or_else(|| panic!("no verdict: {s}"));
    assert_eq!(v["evidence"]["refused"], refused_seen);
    assert_eq!(v["evidence"]["requests"], 240);
    assert_eq!(v["evidence"]["by_cause"]["limit_req"], refused_seen);
    assert_eq!(
        v["evidence"]["share"],
        (refused_seen as f64 / 240.0 * 1000.0).round() / 1000.0
    );
    assert_eq!(v["directives"][0], "limit_req");
    assert_eq!(v["severity"], "critical");
    assert!(v["advice"].as_str().unwrap().contains("burst="), "{v}");

    // Without uprobes the request total is still exact (nginx's own stub_status
    // counter): the verdict stands on it and names its source.
    let probe = Probe::on(&ng).json().start();
    let (st, _) = paced_requests(ng.addr(), 10, 8, 8.0);
    thread::sleep(Duration::from_millis(1200));
    let out = probe.stop();
    let s = out.summary_json();
    let refused = st.get(&503).copied().unwrap_or(0) as u64;
    assert_eq!(s["nginx_errors"]["classes"]["limit_req"]["count"], refused);
    assert_eq!(s["requests"]["source"], "stub_status", "{s}");
    assert_eq!(s["requests"]["count"], 80, "{s}");
    let v = verdict(&s, "requests_refused").expect("fires on stub_status's exact count");
    assert_eq!(v["evidence"]["requests_source"], "stub_status");
    assert_eq!(v["evidence"]["requests"], 80);
    assert_eq!(v["evidence"]["refused"], refused);
}

/// `n` clients, one after the other, each sending one request and keeping its
/// connection idle after the response; returns how many got their 200 and, once the
/// probe ended, how many of the held connections nginx had closed (EOF) or reset.
fn clients_held_idle(
    ng: &Nginx,
    n: usize,
) -> impl FnOnce() -> (usize, Vec<BufReader<TcpStream>>) + '_ {
    move || {
        let mut ok = 0;
        let mut held = Vec::new();
        for _ in 0..n {
            let mut c = BufReader::new(TcpStream::connect(ng.addr()).expect("connect"));
            c.get_mut()
                .write_all(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
                .expect("send");
            if read_status(&mut c).map(|(code, _)| code) == Some(200) {
                ok += 1;
            }
            held.push(c);
        }
        thread::sleep(Duration::from_millis(600));
        (ok, held)
    }
}

/// Of `held`, the connections nginx ended: EOF or a reset at a read (an open idle
/// connection times out).
fn ended_by_nginx(held: &mut [BufReader<TcpStream>]) -> u64 {
    let mut ended = 0;
    for c in held.iter_mut() {
        let s = c.get_mut();
        s.set_read_timeout(Some(Duration::from_millis(50)))
            .expect("timeout");
        let mut b = [0u8; 1];
        ended += match s.read(&mut b) {
            Ok(0) => 1,
            Ok(_) => panic!("data on an idle connection"),
            Err(e) => (e.kind() == std::io::ErrorKind::ConnectionReset) as u64,
        };
    }
    ended
}

/// Case 15 A, then trial 13: `worker_connections` too small for the clients. nginx
/// closes idle keepalive connections to accept more ("worker_connections are not
/// enough, reusing connections", logged at warn): each such close is counted inside
/// ngx_get_connection, exactly as many as the clients saw ended, and named as
/// worker_connections_exhausted, not keepalive_off, with or without the warn line.
fn reuse_is_counted_and_named(level: &str) {
    let ng = Nginx::start(&NginxConfig {
        worker_connections: 64,
        error_log_level: level.into(),
        ..NginxConfig::default()
    });
    let mut out = None;
    let load = clients_held_idle(&ng, 300);
    let (s, log) = run(&ng, || out = Some(load()));
    let (ok, mut held) = out.expect("load ran");
    assert_eq!(ok, 300);
    assert_eq!(sum_workers(&s, &["requests", "count"]), 300);
    assert_eq!(sum_workers(&s, &["accepts"]), 300);
    let ended = ended_by_nginx(&mut held);
    assert!(ended > 0, "nginx did not reuse connections");
    let port = &s["connections"]["ports"][0];
    assert_eq!(port["closed_reusing_connections"], ended, "{port}");
    assert_eq!(
        port["closed_reusing_connections_reset"],
        Value::Null,
        "{port}"
    );
    assert_eq!(sum_workers(&s, &["connections_closed", "reusing"]), ended);
    let lines = log
        .matches("worker_connections are not enough, reusing connections")
        .count() as u64;
    assert_eq!(lines > 0, level == "warn", "{log}");
    assert_eq!(
        s["nginx_errors"]["classes"]["worker_connections_reusing"]["count"]
            .as_u64()
            .unwrap_or(0),
        lines
    );
    let v = verdict(&s, "worker_connections_exhausted").unwrap_or_else(|| panic!("{s}"));
    assert_eq!(v["evidence"]["closed_reusing_connections"], ended);
    assert_eq!(v["evidence"]["error_log_reusing_connections"], lines);
    assert_eq!(v["directives"][0], "worker_connections");
    let advice = v["advice"].as_str().unwrap();
    assert!(
        advice.contains(&format!(
            "its workers closed {ended} client connections to reuse them for new ones"
        )),
        "{v}"
    );
    assert!(
        advice.contains("; 0 of them with a request in that nginx never read"),
        "{v}"
    );
    assert!(verdict(&s, "keepalive_off").is_none(), "{s}");
}

#[test]
fn worker_connections_reuse_is_named_and_keepalive_off_is_not() {
    reuse_is_counted_and_named("warn");
}

#[test]
fn worker_connections_reuse_is_counted_at_error_level_where_nginx_logs_no_line() {
    reuse_is_counted_and_named("error");
}

#[test]
fn keepalive_requests_pinned_at_ten_is_named() {
    // Case 15 B: keepalive_requests 10; clients that keep their connections for as long
    // as nginx does (reconnecting after nginx's `Connection: close`).
    let ng = Nginx::start(&NginxConfig {
        http_extra: "keepalive_requests 10;".into(),
        ..NginxConfig::default()
    });
    let mut opened = 0;
    let (s, _) = run(&ng, || {
        let hs: Vec<_> = (0..10)
            .map(|_| {
                let addr = ng.addr();
                thread::spawn(move || requests_reusing_connections(addr, 300))
            })
            .collect();
        // And 100 connections opened and closed without a byte (a client's spare
        // connections: hey's, a browser's): they carry no request, and once pulled
        // the mean to 7.5, silencing the verdict (trial 6).
        for _ in 0..100 {
            drop(std::net::TcpStream::connect(ng.addr()).expect("connect"));
        }
        for h in hs {
            let (ok, o) = h.join().unwrap();
            assert_eq!(ok, 300);
            opened += o;
        }
    });
    assert_eq!(opened, 300, "nginx closed every 10 requests");
    assert_eq!(sum_workers(&s, &["requests", "count"]), 3000);
    assert_eq!(sum_workers(&s, &["accepts"]), 400);
    // nginx closed each connection after its 10th response; a client closing on
    // reading `Connection: close` often gets its FIN in first (CI's run: most), never
    // read by nginx: still nginx's close.
    let port = &s["connections"]["ports"][0];
    assert_eq!(port["closed_by_nginx"], 300, "{port}");
    assert_eq!(port["closed_by_client"], 100, "{port}");
    assert_eq!(port["closed_without_data_by_client"], 100, "{port}");
    assert!(port.get("closed_without_data_by_nginx").is_none(), "{port}");
    let v = verdict(&s, "keepalive_requests_low").unwrap_or_else(|| panic!("{s}"));
    assert_eq!(v["evidence"]["pinned_at"], 10);
    assert_eq!(v["evidence"]["requests_per_connection"], 10.0);
    assert_eq!(v["evidence"]["closed_without_data"], 100);
    assert_eq!(v["directives"][0], "keepalive_requests");
    assert!(verdict(&s, "keepalive_off").is_none(), "{s}");
}

#[test]
fn cpu_quota_throttling_is_named_with_worker_processes_to_the_quota() {
    // Case 16: nginx born in a cgroup of 0.1 CPU, worker_processes auto; a light but
    // CPU-heavy load (gzip level 9 of a 400 KB text file, one request at a time).
    let cg = CpuCgroup::create("nginx-probe-case16", 10_000, 100_000);
    let mut ng = Nginx::start(&NginxConfig {
        workers_auto: true,
        cgroup: Some(cg.dir.clone()),
        http_extra: "gzip on; gzip_types text/plain; gzip_comp_level 9;".into(),
        ..NginxConfig::default()
    });
    let mut text = String::new();
    let mut seed = 12345u64;
    while text.len() < 400_000 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        text.push_str(&format!("{:016x}\n", seed));
    }
    std::fs::write(ng.prefix.join("html/big.txt"), &text).unwrap();
    let online = workers_online();
    assert_eq!(ng.worker_pids().len(), online);
    let before = cg.nr_throttled();
    let (s, _) = run(&ng, || {
        for _ in 0..30 {
            let mut c = TcpStream::connect(ng.addr()).unwrap();
            c.write_all(
                b"GET /big.txt HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n",
            )
            .unwrap();
            let mut out = Vec::new();
            std::io::Read::read_to_end(&mut c, &mut out).unwrap();
            assert!(out.starts_with(b"HTTP/1.1 200"));
        }
    });
    let throttled = cg.nr_throttled() - before;
    let q = &s["cpu_quota"];
    assert_eq!(q["quota_cpus"], 0.1, "{q}");
    assert_eq!(q["quota_us"], 10_000);
    assert_eq!(q["period_us"], 100_000);
    assert_eq!(q["cgroup_version"], cg.version);
    assert_eq!(q["online_cpus"], online as u64);
    // The probe samples cpu.stat every 500 ms and the test reads it once more after the
    // probe stopped: at most 5 periods of 100 ms lie between the two readings.
    let seen = q["nr_throttled"].as_u64().unwrap();
    assert!(
        seen <= throttled && throttled - seen <= 5,
        "{q}: {throttled}"
    );
    assert!(throttled >= 5, "{q}");
    let v = verdict(&s, "cpu_throttled").unwrap_or_else(|| panic!("{s}"));
    assert_eq!(v["evidence"]["quota_cpus"], 0.1);
    // The verdict's evidence is the probe's own reading (the test's, later, may hold
    // one more throttled period).
    assert_eq!(v["evidence"]["nr_throttled"], seen);
    assert_eq!(v["directives"][0], "worker_processes");
    for v in s["verdicts"].as_array().unwrap() {
        let advice = v["advice"].as_str().unwrap();
        assert!(!advice.contains("(auto)"), "{advice}");
        assert!(!advice.contains("worker_processes auto"), "{advice}");
    }
    let advice = v["advice"].as_str().unwrap();
    if online > 1 {
        assert!(advice.contains("set worker_processes 1 "), "{advice}");
    }
    ng.stop();
    drop(cg);
}

fn workers_online() -> usize {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }) as usize
}

#[test]
fn a_clean_run_has_none_of_these_verdicts() {
    let ng = Nginx::start(&NginxConfig::default());
    let (s, _) = run(&ng, || {
        let (ok, opened) = requests_reusing_connections(ng.addr(), 2000);
        assert_eq!((ok, opened), (2000, 2));
    });
    assert_eq!(sum_workers(&s, &["requests", "count"]), 2000);
    let e = &s["nginx_errors"];
    assert_eq!(e["readable"], true, "{e}");
    assert_eq!(e["classes"], serde_json::json!({}), "{e}");
    for id in OURS {
        assert!(verdict(&s, id).is_none(), "{id}: {s}");
    }
}

#[test]
fn an_error_log_that_is_not_a_file_is_unknown() {
    // `error_log stderr`: nginx leaves fd 2 on its inherited stderr (a pipe here).
    let ng = Nginx::start(&NginxConfig {
        main_extra: "error_log stderr warn;".into(),
        ..NginxConfig::default()
    });
    let (s, _) = run(&ng, || {
        requests_reusing_connections(ng.addr(), 10);
    });
    let e = &s["nginx_errors"];
    assert_eq!(e["readable"], false, "{e}");
    assert!(e["path"].is_null(), "{e}");
    assert!(
        e["unknown_reason"]
            .as_str()
            .unwrap()
            .contains("not a regular file"),
        "{e}"
    );
}

#[test]
fn slow_upstream_with_idle_workers_is_named() {
    // A backend that answers after 200 ms behind proxy_pass: requests are slow, the
    // workers idle.
    let backend = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let b = backend.local_addr().unwrap().port();
    thread::spawn(move || {
        for c in backend.incoming().flatten() {
            thread::spawn(move || {
                let mut c = BufReader::new(c);
                let mut line = String::new();
                while std::io::BufRead::read_line(&mut c, &mut line).unwrap_or(0) > 2 {
                    line.clear();
                }
                thread::sleep(Duration::from_millis(200));
                let _ = c.get_mut().write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
            });
        }
    });
    let front = free_port();
    let ng = Nginx::start(&NginxConfig {
        http_extra: format!(
            "server {{ listen 127.0.0.1:{front}; location / {{ proxy_pass http://127.0.0.1:{b}; }} }}"
        ),
        ..NginxConfig::default()
    });
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], front).into();
    let (s, _) = run(&ng, || {
        let hs: Vec<_> = (0..4)
            .map(|_| thread::spawn(move || requests_reusing_connections(addr, 6).0))
            .collect();
        let ok: usize = hs.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(ok, 24);
    });
    assert_eq!(sum_workers(&s, &["requests", "count"]), 24);
    let v = verdict(&s, "slow_requests_idle_workers").unwrap_or_else(|| panic!("{s}"));
    assert_eq!(v["evidence"]["requests"], 24);
    assert!(
        v["evidence"]["request_p50_ms"].as_f64().unwrap() >= 100.0,
        "{v}"
    );
    assert!(
        v["evidence"]["max_worker_busy_share"].as_f64().unwrap() < 0.2,
        "{v}"
    );
}

/// The local time as nginx writes it in its error log (`2026/12/05 19:00:01`), with
/// its space as `%20` for a request path.
fn log_time_encoded() -> String {
    let out = std::process::Command::new("date")
        .arg("+%Y/%m/%d %H:%M:%S")
        .output()
        .expect("date");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .replace(' ', "%20")
}

/// nginx's crash line for `worker`, written by `master` at `now`, encoded for a path.
fn forged_crash(now: &str, master: u32, worker: u32) -> String {
    format!(
        "{now}%20[alert]%20{master}%23{master}:%20worker%20process%20{worker}%20exited%20on%20signal%2011%20(core%20dumped)"
    )
}

/// nginx's limit_req refusal line for `worker` at `now`, encoded for a path.
fn forged_refusal(now: &str, worker: u32) -> String {
    format!(
        "{now}%20[error]%20{worker}%23{worker}:%20*1%20limiting%20requests,%20excess:%2010.5%20by%20zone%20%22one%22"
    )
}

/// A 404 whose path carries `line` (encoded) on a line of its own, padded past nginx's
/// 2 KB entry so nginx cuts the entry before its `request:` field.
fn get_404_padded(ng: &Nginx, line: &str) {
    get_404(ng, &format!("/x%0A{line}%0A{}", "a".repeat(2500)));
}

/// A 404 (one request) and `line` appended to the error log beside it.
fn forge_beside_a_404(ng: &Nginx, line: &str) {
    get_404(ng, "/x");
    append_to_error_log(ng, line);
}

/// Appends `line` (encoded as for a path) to nginx's error log as a line of its own,
/// as another writer of the file would (a shared log, a hand with write access): a
/// line nginx did not write, that no request's path explains.
fn append_to_error_log(ng: &Nginx, line: &str) {
    let line = line
        .replace("%20", " ")
        .replace("%23", "#")
        .replace("%22", "\"");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(ng.prefix.join("logs/error.log"))
        .expect("error log");
    writeln!(f, "{line}").expect("append");
}

/// GETs `path` (sent as is) on a connection of its own and asserts nginx's 404.
fn get_404(ng: &Nginx, path: &str) {
    use std::io::Read;
    let mut c = TcpStream::connect(ng.addr()).expect("connect");
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut got = String::new();
    let _ = c.read_to_string(&mut got);
    assert!(got.starts_with("HTTP/1.1 404"), "{got}");
}

/// 3 requests for a missing file whose URI carries `%0A`s: nginx decodes them into the
/// file name it logs, so each 404 writes 3 lines of the client's choosing into the
/// error log: a worker crash and a limit_req refusal, with nginx's own date and pids,
/// and the rest of nginx's entry. They are counted as `written_by_request` (9), never
/// as nginx's words: no crash, no refusal, no verdict.
#[test]
fn lines_a_request_writes_into_the_error_log_are_not_taken_for_nginx_s() {
    let ng = Nginx::start(&NginxConfig::default());
    let (master, worker) = (ng.master_pid(), ng.worker_pids()[0]);
    let forge = || {
        let now = log_time_encoded();
        let crash = forged_crash(&now, master, worker);
        let refusal = forged_refusal(&now, worker);
        get_404(&ng, &format!("/x%0A{crash}%0A{refusal}%0Ay"));
    };
    let (s, log) = run(&ng, || {
        for _ in 0..3 {
            forge();
        }
    });
    // nginx did write them as lines of their own.
    let needle = format!("worker process {worker} exited on signal 11");
    assert_eq!(
        log.lines().filter(|l| l.contains(&needle)).count(),
        3,
        "{log}"
    );
    let e = &s["nginx_errors"];
    assert_eq!(e["classes"]["written_by_request"]["count"], 9, "{e}");
    for class in ["worker_crashed", "limit_req"] {
        assert!(e["classes"].get(class).is_none(), "{class}: {e}");
    }
    for id in ["worker_crashed", "requests_refused", "worker_crashes"] {
        assert!(verdict(&s, id).is_none(), "{id}: {}", s["verdicts"]);
    }
}

/// The same forgery hidden from the request line: URIs padded past nginx's 2 KB
/// entry, so nginx cuts each entry before its `request:` field. nginx's header line
/// opens the path and the entry's lines add up to exactly 2048 bytes: 70 forged
/// crashes of a live worker and 12 limit_req refusals are counted as
/// `written_by_request` (each with its padding line: 164), nginx's own 82 lines as
/// `file_not_found` (their errno, written at the cut's end, given back), and nothing
/// as nginx's crash or refusal.
#[test]
fn lines_a_request_hides_past_2_kb_are_counted_as_the_request_s() {
    let ng = Nginx::start(&NginxConfig::default());
    let (master, worker) = (ng.master_pid(), ng.worker_pids()[0]);
    let (s, log) = run(&ng, || {
        for _ in 0..70 {
            get_404_padded(&ng, &forged_crash(&log_time_encoded(), master, worker));
        }
        for _ in 0..12 {
            get_404_padded(&ng, &forged_refusal(&log_time_encoded(), worker));
        }
    });
    let needle = format!("worker process {worker} exited on signal 11");
    assert_eq!(
        log.lines().filter(|l| l.contains(&needle)).count(),
        70,
        "{log}"
    );
    assert!(
        !log.contains("request: \"GET /x%0A"),
        "nginx kept the request field: {log}"
    );
    let e = &s["nginx_errors"];
    assert_eq!(e["classes"]["written_by_request"]["count"], 164, "{e}");
    assert_eq!(e["classes"]["file_not_found"]["count"], 82, "{e}");
    for class in ["worker_crashed", "limit_req", "other"] {
        assert!(e["classes"].get(class).is_none(), "{class}: {e}");
    }
    assert_eq!(e["history"]["workers_crashed"], 0, "{e}");
    for id in ["worker_crashed", "worker_crashes", "requests_refused"] {
        assert!(verdict(&s, id).is_none(), "{id}: {}", s["verdicts"]);
    }
}

/// Crash lines nginx did not write, appended to its error log by another writer:
/// 70 name a live worker's crash, and 70 more name 70 pids of no worker (more than
/// the 64 pids checked: a trial's 80 gave a critical "16 workers crashed"); the
/// kernel saw no such exit, so nginx-probe counts the 140 lines as contradicted, no
/// crash, no verdict.
#[test]
fn a_crash_line_nginx_did_not_write_is_contradicted_by_the_kernel() {
    let ng = Nginx::start(&NginxConfig::default());
    let (master, worker) = (ng.master_pid(), ng.worker_pids()[0]);
    let (s, log) = run(&ng, || {
        for i in 0..70 {
            append_to_error_log(&ng, &forged_crash(&log_time_encoded(), master, worker));
            append_to_error_log(
                &ng,
                &forged_crash(&log_time_encoded(), master, 4_000_000 + i),
            );
        }
    });
    let needle = format!("worker process {worker} exited on signal 11");
    assert_eq!(
        log.lines().filter(|l| l.contains(&needle)).count(),
        70,
        "{log}"
    );
    let h = &s["nginx_errors"]["history"];
    assert_eq!(h["crash_lines_contradicted"], 140, "{h}");
    assert_eq!(h["workers_crashed"], 0, "{h}");
    assert_eq!(h["workers_crashed_since_attach"], 0, "{h}");
    for id in ["worker_crashed", "worker_crashes"] {
        assert!(verdict(&s, id).is_none(), "{id}: {}", s["verdicts"]);
    }
}

/// Other lines nginx did not write, each appended to its error log beside a 404
/// (so the lines are as many as the requests): 12 `limiting requests` lines (nginx runs no
/// limit_req: its configuration, read whole, rules them out) and 2 `worker_connections
/// are not enough` (no connection was accepted then closed, none unhandled). The 12
/// were 100% of the requests and once fired a critical `requests_refused`; now the
/// configuration rules them out of it and there is no verdict; the other two give a
/// warning that says nothing measured shows a connection refused.
#[test]
fn refusals_and_exhaustion_nginx_did_not_write_are_not_taken_for_facts() {
    let ng = Nginx::start(&NginxConfig::default());
    let worker = ng.worker_pids()[0];
    let (s, log) = run(&ng, || {
        for _ in 0..12 {
            forge_beside_a_404(&ng, &forged_refusal(&log_time_encoded(), worker));
        }
        for _ in 0..2 {
            let now = log_time_encoded();
            forge_beside_a_404(
                &ng,
                &format!("{now}%20[alert]%20{worker}%23{worker}:%201024%20worker_connections%20are%20not%20enough"),
            );
        }
        // An nginx that proxies nothing: no upstream wrote these.
        for _ in 0..20 {
            let now = log_time_encoded();
            forge_beside_a_404(
                &ng,
                &format!("{now}%20[error]%20{worker}%23{worker}:%20*9%20upstream%20timed%20out%20(110:%20Connection%20timed%20out)%20while%20reading%20response%20header%20from%20upstream"),
            );
        }
    });
    let own_line = |l: &&str| l.contains(" [error] ") && l.contains("limiting requests");
    assert_eq!(log.lines().filter(own_line).count(), 12, "{log}");
    let e = &s["nginx_errors"];
    assert_eq!(e["classes"]["limit_req"]["count"], 12, "{e}");
    assert_eq!(e["classes"]["worker_connections"]["count"], 2, "{e}");
    assert_eq!(e["classes"]["upstream_read_timeout"]["count"], 20, "{e}");
    assert_eq!(s["config"]["upstream_passes"], 0, "{}", s["config"]);
    for id in ["requests_refused", "upstream_errors"] {
        assert!(verdict(&s, id).is_none(), "{id}: {}", s["verdicts"]);
    }
    let v = verdict(&s, "worker_connections_exhausted")
        .unwrap_or_else(|| panic!("said: {}", s["verdicts"]));
    assert_eq!(v["severity"], "warning", "{v}");
    assert_eq!(v["evidence"]["accepted_then_closed"], 0, "{v}");
    assert!(
        v["advice"]
            .as_str()
            .is_some_and(|a| a.contains("but no client connection was seen refused")),
        "{v}"
    );
}

/// The trial's two forgeries that still fired critical verdicts (made here by
/// appending to the log beside 13 404s): 12 `limiting requests` lines where nginx runs limit_req (it refused nothing: its access log, which
/// counts every request, has no 503 nor 429), and a crash line naming the worker a
/// reload had just retired (the kernel saw it exit with code 0). Neither is taken:
/// no `requests_refused`, the crash line contradicted, no `worker_crashed`.
#[test]
fn forged_refusals_and_a_retired_worker_s_crash_are_not_taken() {
    let ng = Nginx::start(&NginxConfig {
        http_extra: "limit_req_zone $binary_remote_addr zone=one:1m rate=10000r/s;".into(),
        server_extra: "limit_req zone=one burst=1000 nodelay;".into(),
        ..NginxConfig::default()
    });
    let (master, old) = (ng.master_pid(), ng.worker_pids()[0]);
    let (s, log) = run(&ng, || {
        ng.reload();
        for _ in 0..40 {
            if !ng.worker_pids().contains(&old) {
                break;
            }
            thread::sleep(Duration::from_millis(100));
        }
        // The tracker sees the exit within its 500 ms refresh.
        thread::sleep(Duration::from_millis(800));
        let worker = ng.worker_pids()[0];
        for _ in 0..12 {
            forge_beside_a_404(&ng, &forged_refusal(&log_time_encoded(), worker));
        }
        forge_beside_a_404(&ng, &forged_crash(&log_time_encoded(), master, old));
    });
    let crash = format!("worker process {old} exited on signal 11");
    assert_eq!(
        log.lines().filter(|l| l.contains(&crash)).count(),
        1,
        "{log}"
    );
    let e = &s["nginx_errors"];
    assert_eq!(e["classes"]["limit_req"]["count"], 12, "{e}");
    assert_eq!(e["history"]["crash_lines_contradicted"], 1, "{e}");
    assert_eq!(e["history"]["workers_crashed"], 0, "{e}");
    for id in ["requests_refused", "worker_crashed"] {
        assert!(verdict(&s, id).is_none(), "{id}: {}", s["verdicts"]);
    }
    assert_eq!(
        s["access_log"]["statuses"]["404"], 13,
        "{}",
        s["access_log"]
    );
}

/// A reload that loads, then a reload of a configuration with an unknown directive:
/// nginx's master writes one `[emerg] unknown directive ... in <file>:<line>` and keeps
/// its workers. nginx-probe measures both loads in nginx's code (uretprobe
/// `ngx_init_cycle`: 1 loaded, 1 NULL) and says the configuration on disk was not
/// loaded (`config_not_loaded`), with nginx's emerg line and the workers running.
#[test]
fn a_failed_reload_is_said_with_nginx_serving_on() {
    let ng = Nginx::start(&NginxConfig::default());
    let mut before = Vec::new();
    let (s, log) = run(&ng, || {
        let old = ng.worker_pids();
        ng.reload();
        for _ in 0..40 {
            if ng.worker_pids().iter().all(|p| !old.contains(p)) {
                break;
            }
            thread::sleep(Duration::from_millis(100));
        }
        before = ng.worker_pids();
        let conf = ng.prefix.join("nginx.conf");
        let text = std::fs::read_to_string(&conf).unwrap();
        std::fs::write(&conf, format!("{text}\nno_such_directive on;\n")).unwrap();
        ng.reload();
        thread::sleep(Duration::from_millis(800));
    });
    assert_eq!(
        log.lines()
            .filter(|l| l.contains("[emerg]") && l.contains("no_such_directive"))
            .count(),
        1,
        "{log}"
    );
    assert_eq!(ng.worker_pids(), before, "the old workers serve on");
    let loads = &s["config_loads"];
    assert_eq!(loads["reloads_loaded"], 1, "{loads}");
    assert_eq!(loads["reloads_failed"], 1, "{loads}");
    assert_eq!(loads["others_failed"], 0, "{loads}");
    let v = verdict(&s, "config_not_loaded").unwrap_or_else(|| panic!("{}", s["verdicts"]));
    assert_eq!(v["evidence"]["emerg_lines"], 1, "{v}");
    assert_eq!(v["evidence"]["reloads_failed"], 1, "{v}");
    assert_eq!(v["evidence"]["workers_running"], before.len() as u64, "{v}");
    assert_quotes_the_unknown_directive(&ng, v);
    let advice = v["advice"].as_str().unwrap();
    assert!(
        advice.starts_with("1 of the master's 2 reloads in this period did not load the configuration on disk (uretprobe ngx_init_cycle returned NULL, the last at "),
        "{advice}"
    );
}

/// `nginx -t` on a broken configuration file (measured as another process's failed
/// load: which file it tested is not known, so nothing fires), then a reload of the
/// broken file and one of the fixed file: the failure is counted, and since a reload
/// loaded after it, nginx runs the new configuration and nothing fires. Then a forged
/// `[emerg]` configuration line, padded past nginx's 2 KB entry (not told from
/// nginx's own), with no load measured after it: nothing fires either.
#[test]
fn a_failed_nginx_t_or_a_fixed_reload_fire_nothing_nor_does_a_forged_emerg_line() {
    let ng = Nginx::start(&NginxConfig::default());
    let (s, _) = run(&ng, || {
        let conf = ng.prefix.join("nginx.conf");
        let text = std::fs::read_to_string(&conf).unwrap();
        std::fs::write(&conf, format!("{text}\nno_such_directive on;\n")).unwrap();
        assert!(!ng.test_config(), "nginx -t finds the unknown directive");
        ng.reload();
        thread::sleep(Duration::from_millis(700));
        std::fs::write(&conf, text).unwrap();
        ng.reload();
        thread::sleep(Duration::from_millis(700));
    });
    let loads = &s["config_loads"];
    assert_eq!(loads["others_failed"], 1, "{loads}");
    assert_eq!(loads["reloads_failed"], 1, "{loads}");
    assert_eq!(loads["reloads_loaded"], 1, "{loads}");
    let (f, l) = (
        loads["last_reload_failed_unix_s"].as_f64(),
        loads["last_reload_loaded_unix_s"].as_f64(),
    );
    assert!(f.unwrap() < l.unwrap(), "{loads}");
    assert!(
        verdict(&s, "config_not_loaded").is_none(),
        "{}",
        s["verdicts"]
    );
    let (s, log) = run(&ng, || {
        let line = format!(
            "{}%20[emerg]%20{m}%23{m}:%20unknown%20directive%20%22x%22%20in%20/etc/nginx/nginx.conf:3",
            log_time_encoded(),
            m = ng.master_pid()
        );
        // One hidden in a 404's path past nginx's 2 KB entry, one appended by
        // another writer.
        get_404_padded(&ng, &line);
        append_to_error_log(&ng, &line);
    });
    assert_eq!(
        log.lines()
            .filter(|l| l.contains("[emerg]") && l.contains("unknown directive \"x\""))
            .count(),
        2,
        "{log}"
    );
    // The request's line is told apart (with its padding line); the appended one is
    // read as nginx's: only the measured loads keep it from firing a verdict.
    let e = &s["nginx_errors"];
    assert_eq!(e["classes"]["written_by_request"]["count"], 2, "{e}");
    assert_eq!(e["classes"]["config"]["count"], 1, "{e}");
    assert!(
        verdict(&s, "config_not_loaded").is_none(),
        "{}",
        s["verdicts"]
    );
}

/// A binary upgrade (USR2) to a configuration with an unknown directive: the new
/// master, a child of the master running its binary file, writes its `[emerg]` line
/// and exits, and the old master serves on. Measured as the upgrade's failed load
/// (uretprobe `ngx_init_cycle` returning NULL in a child of the master), never as
/// another process's: `config_not_loaded` says the upgrade failed. With the
/// configuration fixed, a second USR2 starts a new master that loads it: counted as
/// the upgrade's, and nothing fires.
#[test]
fn a_binary_upgrade_that_cannot_load_its_configuration_is_said_as_such() {
    let ng = Nginx::start(&NginxConfig {
        daemon: true,
        ..NginxConfig::default()
    });
    let conf = ng.prefix.join("nginx.conf");
    let text = std::fs::read_to_string(&conf).unwrap();
    let before = ng.worker_pids();
    let (s, log) = run(&ng, || {
        std::fs::write(&conf, format!("{text}\nno_such_directive on;\n")).unwrap();
        assert_eq!(ng.upgrade(), None, "the new master cannot load it");
    });
    assert_eq!(
        log.lines()
            // nginx's own entry; the new master also writes `nginx: [emerg] ...` to
            // its stderr, the error log it inherited (not an entry: not counted).
            .filter(|l| l.contains(" [emerg] ") && l.contains("no_such_directive"))
            .filter(|l| !l.starts_with("nginx: "))
            .count(),
        1,
        "{log}"
    );
    assert_eq!(ng.worker_pids(), before, "the old workers serve on");
    let loads = &s["config_loads"];
    assert_eq!(loads["upgrades_failed"], 1, "{loads}");
    assert_eq!(loads["upgrades_loaded"], 0, "{loads}");
    assert_eq!(loads["others_failed"], 0, "{loads}");
    assert_eq!(loads["reloads_failed"], 0, "{loads}");
    assert_eq!(events(&s, "new_master_failed").len(), 1, "{}", s["events"]);
    assert!(events(&s, "new_master").is_empty(), "{}", s["events"]);
    assert!(s["new_master_beside"].is_null(), "{s}");
    let v = verdict(&s, "config_not_loaded").unwrap_or_else(|| panic!("{}", s["verdicts"]));
    assert_eq!(v["evidence"]["upgrades_failed"], 1, "{v}");
    assert_eq!(v["evidence"]["emerg_lines"], 1, "{v}");
    assert_eq!(v["evidence"]["workers_running"], before.len() as u64, "{v}");
    assert_quotes_the_unknown_directive(&ng, v);
    let advice = v["advice"].as_str().unwrap();
    assert!(
        advice.starts_with("1 of 1 binary upgrades in this period (USR2) failed: the new master, a child of the master running its binary file, did not load the configuration (uretprobe ngx_init_cycle returned NULL, the last at "),
        "{advice}"
    );
    let mut new_master = None;
    let (s, _) = run(&ng, || {
        std::fs::write(&conf, &text).unwrap();
        new_master = ng.upgrade();
    });
    let new_master = new_master.expect("the fixed configuration's new master");
    // Not the fixture's child: stopped here.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(new_master as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    assert_eq!(
        events(&s, "new_master"),
        vec![u64::from(new_master)],
        "{}",
        s["events"]
    );
    assert_eq!(s["new_master_beside"]["pid"], new_master, "{s}");
    let loads = &s["config_loads"];
    assert_eq!(loads["upgrades_loaded"], 1, "{loads}");
    assert_eq!(loads["upgrades_failed"], 0, "{loads}");
    assert_eq!(loads["others_loaded"], 0, "{loads}");
    assert!(
        verdict(&s, "config_not_loaded").is_none(),
        "{}",
        s["verdicts"]
    );
}

/// `config_not_loaded` quotes nginx's own line for the failed load: the unknown
/// directive appended to the configuration file, with the file and line nginx names.
fn assert_quotes_the_unknown_directive(ng: &Nginx, v: &Value) {
    let conf = ng.prefix.join("nginx.conf");
    let n = std::fs::read_to_string(&conf)
        .unwrap()
        .lines()
        .position(|l| l == "no_such_directive on;")
        .expect("the directive in the file")
        + 1;
    let want = format!(
        "unknown directive \"no_such_directive\" in {}:{n}",
        conf.display()
    );
    assert_eq!(v["evidence"]["emerg_line"], want.as_str(), "{v}");
    assert!(
        v["advice"]
            .as_str()
            .unwrap()
            .contains(&format!(" reads \"{want}\" (as read from the error log, not proven nginx's). Fix what they name")),
        "{v}"
    );
}

/// A flood of `nginx -t` runs (1500 processes in a few seconds, each loading the
/// configuration once): every load is counted, none lost to the kernel's LRU map
/// evicting entries not yet read (3-7% were, before the entries of exited processes
/// were dropped once read).
#[test]
fn a_flood_of_nginx_t_runs_loses_no_load() {
    let ng = Nginx::start(&NginxConfig::default());
    let (s, _) = run(&ng, || {
        for _ in 0..1500 {
            assert!(ng.test_config());
        }
    });
    let loads = &s["config_loads"];
    assert_eq!(loads["others_loaded"], 1500, "{loads}");
    assert_eq!(loads["others_failed"], 0, "{loads}");
    assert_eq!(loads["reloads_loaded"], 0, "{loads}");
}
