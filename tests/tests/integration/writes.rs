//! Writes by destination, classified in the kernel at the moment of the write
//! (../shared/cases 12 and 13): logs with a variable in their path, request bodies
//! buffered to temp files behind proxy_pass, an error log at `debug`. Counts are checked
//! against the log files' lines and against strace on the same run.

use std::{
    collections::BTreeMap,
    fs,
    io::{BufRead, BufReader},
    os::unix::fs::PermissionsExt,
    process::{Child, Command, Stdio},
    thread,
    time::Duration,
};

use nginx_probe_tests::{
    keepalive_requests, post_requests, sum_workers, verdict, workers, Nginx, NginxConfig, Probe,
};
use nix::{
    sys::signal::{kill, Signal},
    unistd::Pid,
};
use serde_json::Value;

/// `$logdate`, as in the logrotate-free configs people copy: the date of the request.
const LOGDATE_MAP: &str = r"map $time_iso8601 $logdate {
    '~^(?<ymd>\d{4}-\d{2}-\d{2})' $ymd;
    default 'nodate';
}";

/// Sum over workers of `writes.<dest>.<field>`.
fn writes(s: &Value, dest: &str, field: &str) -> u64 {
    sum_workers(s, &["writes", dest, field])
}

/// Lines in every file of `dir`.
fn lines_in(dir: &std::path::Path) -> usize {
    fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| fs::read_to_string(e.path()).unwrap().lines().count())
        .sum()
}

/// Entries in an error log: lines that start with nginx's `YYYY/MM/DD ` timestamp (a
/// debug entry can span lines: the response header it logs has its own).
fn log_entries(path: &std::path::Path) -> usize {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| {
            let b = l.as_bytes();
            b.len() > 11
                && b[4] == b'/'
                && b[7] == b'/'
                && b[10] == b' '
                && b[..4].iter().all(u8::is_ascii_digit)
        })
        .count()
}

#[test]
fn access_log_with_a_variable_in_its_path_is_an_access_log_reopened_per_request() {
    // Case 12 A: nginx opens, writes and closes the log for every request.
    let logs = tempfile::tempdir().unwrap();
    fs::set_permissions(logs.path(), fs::Permissions::from_mode(0o777)).unwrap();
    let access_log = format!("access_log {}/access-$logdate.log;", logs.path().display());
    let ng = Nginx::start(&NginxConfig {
        http_extra: LOGDATE_MAP.into(),
        server_extra: access_log.clone(),
        ..NginxConfig::default()
    });
    let s = Probe::on(&ng)
        .json()
        .summary_around(|| assert_eq!(keepalive_requests(ng.addr(), 10, 50), 500));
    assert_eq!(s["write_destinations"], "fd_table", "{s}");
    assert_eq!(lines_in(logs.path()), 500);
    // nginx's own counter: exact whatever the protocol (per worker: unknown without
    // --uprobes).
    let requests = s["requests"]["count"].as_u64().unwrap();
    assert_eq!(requests, 500, "{s}");
    assert_eq!(writes(&s, "access_log", "count"), 500, "{s}");
    let opens = sum_workers(&s, &["access_log_opens"]);
    assert_eq!(opens, 500, "{s}");
    for w in workers(&s) {
        if w["requests"]["count"].as_u64().is_some_and(|n| n > 0) {
            assert_eq!(w["writes"]["access_log"]["per_request"], 1.0, "{w}");
        }
        // The responses' headers (writev) went to clients, the log lines (write) to
        // the access log; nothing else was written.
        assert_eq!(
            w["writes"]["client"]["count"], w["syscalls"]["writev"]["count"],
            "{w}"
        );
        assert_eq!(
            w["writes"]["access_log"]["count"], w["syscalls"]["write"]["count"],
            "{w}"
        );
        for other in [
            "upstream",
            "temp_file",
            "error_log",
            "other_file",
            "unknown",
        ] {
            assert_eq!(w["writes"][other]["count"], 0, "{other}: {w}");
        }
    }
    let v = verdict(&s, "access_log_reopened").unwrap_or_else(|| panic!("no verdict: {s}"));
    assert_eq!(v["evidence"]["opens_per_request"], 1.0, "{v}");
    assert_eq!(v["evidence"]["access_log_opens"], 500, "{v}");
    assert!(v["advice"]
        .as_str()
        .unwrap()
        .contains("open_log_file_cache max="));
    // One write per request, but buffer= is refused by nginx on a path with
    // variables ("buffered logs cannot have variables in name"): not advised.
    assert!(
        verdict(&s, "access_log_unbuffered").is_none(),
        "buffer= advised for a log nginx cannot buffer: {s}"
    );
    drop(ng);

    // The same with open_log_file_cache: each worker opens the file once.
    let logs = tempfile::tempdir().unwrap();
    fs::set_permissions(logs.path(), fs::Permissions::from_mode(0o777)).unwrap();
    let ng = Nginx::start(&NginxConfig {
        http_extra: LOGDATE_MAP.into(),
        server_extra: format!(
            "access_log {}/access-$logdate.log; open_log_file_cache max=10 valid=1m;",
            logs.path().display()
        ),
        ..NginxConfig::default()
    });
    let s = Probe::on(&ng)
        .json()
        // 6000 writes: material for access_log_unbuffered by rate (below), by design.
        .summary_around(|| assert_eq!(keepalive_requests(ng.addr(), 20, 300), 6000));
    assert_eq!(lines_in(logs.path()), 6000);
    assert_eq!(writes(&s, "access_log", "count"), 6000, "{s}");
    let logging_workers = workers(&s)
        .iter()
        .filter(|w| w["writes"]["access_log"]["count"].as_u64().unwrap() > 0)
        .count() as u64;
    let opens = sum_workers(&s, &["access_log_opens"]);
    assert_eq!(opens, logging_workers, "{s}");
    assert!(verdict(&s, "access_log_reopened").is_none(), "{s}");
    // Still one write per request, to a path with variables (the configuration says
    // so, with the variable kept in the path): the advice says nginx cannot buffer it.
    let v = verdict(&s, "access_log_unbuffered").unwrap_or_else(|| panic!("{s}"));
    let a = v["advice"].as_str().unwrap();
    assert!(
        a.contains(&format!(
            "nginx refuses buffer= on a path with variables or a syslog: target: {}/access-$logdate.log (",
            logs.path().display()
        )),
        "{a}"
    );
}

/// strace's count of write/writev/pwrite64/pwritev calls by what their fd is (`-yy`):
/// `temp_file` (a path under the prefix's `tmp/`), `client` (a TCP socket on
/// `client_port`), `upstream` (another TCP socket), `access_log`, `error_log`.
fn strace_writes(trace: &str, client_port: u16) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in trace.lines() {
        // "PID syscall(FD<what>, ..." (an "<unfinished ...>" line names the call; its
        // "<... resumed>" line does not start with a syscall name).
        let Some(rest) = line.split_once(' ').map(|(_, r)| r.trim_start()) else {
            continue;
        };
        let Some((name, args)) = rest.split_once('(') else {
            continue;
        };
        if !["write", "writev", "pwrite64", "pwritev"].contains(&name) {
            continue;
        }
        // `<path>` or `<TCP:[local->peer]>` (whose `->` holds a `>`).
        let what = args
            .split_once('<')
            .and_then(|(_, r)| {
                let end = if r.starts_with("TCP:[") { "]>" } else { ">" };
                r.split_once(end)
            })
            .map(|(w, _)| w)
            .unwrap_or("");
        let kind = if what.contains("/tmp/body/") {
            "temp_file"
        } else if what.starts_with("TCP:[") {
            if what.contains(&format!(":{client_port}->")) {
                "client"
            } else {
                "upstream"
            }
        } else if what.ends_with("access.log") {
            "access_log"
        } else if what.ends_with("error.log") {
            "error_log"
        } else {
            "other"
        };
        *out.entry(kind.to_string()).or_default() += 1;
    }
    out
}

/// strace attached to `pids` with `-f -yy`, writing to `out`; returns once every
/// process is attached.
fn strace(pids: &[u32], out: &std::path::Path) -> Child {
    let mut cmd = Command::new("strace");
    cmd.args([
        "-f",
        "-yy",
        "-e",
        "trace=write,writev,pwrite64,pwritev",
        "-o",
    ])
    .arg(out);
    for p in pids {
        cmd.args(["-p", &p.to_string()]);
    }
    let mut child = cmd
        .stderr(Stdio::piped())
        .spawn()
        .expect("strace (run `cargo xtask setup`)");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut attached = 0;
    while attached < pids.len() {
        let mut line = String::new();
        assert!(err.read_line(&mut line).unwrap() > 0, "strace exited");
        if line.contains("attached") {
            attached += 1;
        }
    }
    // Keep draining stderr so strace never blocks on it.
    thread::spawn(move || for _ in err.lines() {});
    child
}

#[test]
fn request_bodies_buffered_to_temp_files_are_temp_file_writes_as_strace_sees_them() {
    // Case 12 B: 1 MB POST bodies, client_body_buffer_size 8k, proxy_pass to a second
    // nginx: each body goes to a temp file that lives for one request.
    let back = Nginx::start(&NginxConfig {
        workers: 1,
        access_log: Some("off".into()),
        server_extra: "location /up { return 200 \"ok\\n\"; }".into(),
        ..NginxConfig::default()
    });
    let front = Nginx::start(&NginxConfig {
        server_extra: format!(
            "client_body_buffer_size 8k; client_max_body_size 2m; \
             location /up {{ proxy_pass http://127.0.0.1:{}; }}",
            back.port
        ),
        ..NginxConfig::default()
    });
    let trace = tempfile::NamedTempFile::new().unwrap();
    let probe = Probe::on(&front).json().start();
    let mut st = strace(&front.worker_pids(), trace.path());
    assert_eq!(post_requests(front.addr(), "/up", 1 << 20, 20), 20);
    thread::sleep(Duration::from_millis(300));
    kill(Pid::from_raw(st.id() as i32), Signal::SIGINT).unwrap();
    st.wait().unwrap();
    thread::sleep(Duration::from_millis(300));
    let out = probe.stop();
    let s = out.summary_json();
    let text = fs::read_to_string(trace.path()).unwrap();
    let seen = strace_writes(&text, front.port);
    let strace_of = |k: &str| seen.get(k).copied().unwrap_or(0);
    // Every body went to a temp file: 20 MiB in at least 20 * 128 calls of 8 KiB.
    assert_eq!(writes(&s, "temp_file", "bytes"), 20 << 20, "{s}");
    assert!(strace_of("temp_file") >= 20 * 128, "{seen:?}");
    for kind in ["temp_file", "client", "upstream", "access_log", "error_log"] {
        assert_eq!(
            writes(&s, kind, "count"),
            strace_of(kind),
            "{kind}: strace {seen:?}, probe {s}"
        );
    }
    assert_eq!(strace_of("other"), 0, "{seen:?}");
    assert_eq!(writes(&s, "unknown", "count"), 0, "{s}");
    assert_eq!(writes(&s, "other_file", "count"), 0, "{s}");
    // The request sent to the upstream is an upstream write, the response a client
    // write: one each per request.
    assert_eq!(writes(&s, "client", "count"), 20, "{s}");
    assert_eq!(writes(&s, "upstream", "count"), 20, "{s}");
}

#[test]
fn error_log_at_debug_is_verbose_and_at_warn_is_not() {
    // Case 13: `error_log ... debug` writes dozens of lines per request.
    let ng = Nginx::start(&NginxConfig {
        error_log_level: "debug".into(),
        access_log: Some("off".into()),
        ..NginxConfig::default()
    });
    let log = ng.prefix.join("logs/error.log");
    let probe = Probe::on(&ng).json().start();
    let before = log_entries(&log);
    assert_eq!(keepalive_requests(ng.addr(), 10, 50), 500);
    thread::sleep(Duration::from_millis(600));
    let after = log_entries(&log);
    let out = probe.stop();
    let s = out.summary_json();
    // One write per log entry, all of them from the workers.
    assert_eq!(
        writes(&s, "error_log", "count"),
        (after - before) as u64,
        "{s}"
    );
    let v = verdict(&s, "error_log_verbose").unwrap_or_else(|| panic!("no verdict: {s}"));
    let per = v["evidence"]["writes_per_request"].as_f64().unwrap();
    assert!(per > 5.0, "{v}");
    assert_eq!(
        v["evidence"]["error_log_writes"],
        writes(&s, "error_log", "count")
    );
    assert!(v["advice"].as_str().unwrap().contains("`debug`"), "{v}");
    assert_eq!(v["directives"], serde_json::json!(["error_log"]));
    drop(ng);

    let ng = Nginx::start(&NginxConfig {
        access_log: Some("off".into()),
        ..NginxConfig::default()
    });
    let s = Probe::on(&ng)
        .json()
        .summary_around(|| assert_eq!(keepalive_requests(ng.addr(), 10, 50), 500));
    assert_eq!(writes(&s, "error_log", "count"), 0, "{s}");
    assert!(verdict(&s, "error_log_verbose").is_none(), "{s}");
}

#[test]
fn text_report_shows_writes_by_destination_and_the_event_loop() {
    let ng = Nginx::start(&NginxConfig::default());
    // Per-worker requests (the PER REQ column) need the uprobes; without them it is "-".
    let probe = Probe::on(&ng).uprobes().start();
    assert_eq!(keepalive_requests(ng.addr(), 10, 30), 300);
    thread::sleep(Duration::from_millis(600));
    let out = probe.stop();
    let text = &out.stdout;
    let summary = &text[text.rfind("SUMMARY").expect("a summary")..];
    assert!(
        summary.contains("writes: classified at each write from the worker's fd table"),
        "{summary}"
    );
    assert!(
        summary.contains("event loop (epoll wait return"),
        "{summary}"
    );
    // One row per worker that served: 300 log lines in all, one per request.
    let log_rows: Vec<&str> = summary
        .lines()
        .filter(|l| l.contains(" access log "))
        .collect();
    let calls: u64 = log_rows
        .iter()
        .map(|l| l.split_whitespace().nth(3).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(calls, 300, "{summary}");
    assert!(
        log_rows.iter().all(|l| l.trim_end().ends_with("1.00")),
        "{summary}"
    );
    assert!(
        summary.lines().any(|l| l.contains(" client socket ")),
        "{summary}"
    );
}

#[test]
fn without_the_fd_walk_destinations_come_from_proc_snapshots_and_say_so() {
    // The fallback of a kernel without BTF, forced: the old kinds, no open counts,
    // and the variable-path log's writes misfiled as socket writes (why the fd walk
    // exists).
    let logs = tempfile::tempdir().unwrap();
    fs::set_permissions(logs.path(), fs::Permissions::from_mode(0o777)).unwrap();
    let ng = Nginx::start(&NginxConfig {
        http_extra: LOGDATE_MAP.into(),
        server_extra: format!("access_log {}/access-$logdate.log;", logs.path().display()),
        ..NginxConfig::default()
    });
    let probe = Probe::on(&ng).json().arg("--writes-from-proc").start();
    assert_eq!(keepalive_requests(ng.addr(), 10, 50), 500);
    thread::sleep(Duration::from_millis(600));
    let out = probe.stop();
    let s = out.summary_json();
    assert_eq!(s["write_destinations"], "proc_snapshot", "{s}");
    for w in workers(&s) {
        let keys: Vec<&String> = w["writes"].as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["access_log", "error_log", "file", "other", "socket"],
            "{w}"
        );
        assert_eq!(w["access_log_opens"], Value::Null, "{w}");
    }
    assert_eq!(lines_in(logs.path()), 500);
    let all_writes = sum_workers(&s, &["syscalls", "write", "count"])
        + sum_workers(&s, &["syscalls", "writev", "count"]);
    assert_eq!(
        writes(&s, "socket", "count") + writes(&s, "access_log", "count"),
        all_writes,
        "{s}"
    );
    assert!(writes(&s, "access_log", "count") < 500, "{s}");
    assert!(verdict(&s, "access_log_reopened").is_none(), "{s}");
}
