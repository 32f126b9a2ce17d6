//! `--all`: every nginx master on the host followed by one nginx-probe. Two throwaway
//! masters at once, exact accepts for each in its own JSON summary and in `/metrics`
//! under its `master` label; one stopped (its summary printed when it exits) and a
//! third started during the run (attached by the rescan). The machine may run other
//! nginx (other tests', CI's): `--all` follows them too, and only our masters, by pid,
//! are asserted on. A master in a container (the trixie root's nginx 1.26, in a cgroup
//! named like docker's) is named by its container id and pid namespace.

use std::{collections::BTreeMap, time::Duration};

use nginx_probe_tests::{
    container, free_port, one_request_per_connection, scrape_text, total_accepts, CpuCgroup, NetNs,
    Nginx, NginxConfig, Probe, ProbeRun,
};

/// The last summary of each master in `--all --json` output, by master pid.
fn summaries(stdout: &str) -> BTreeMap<u64, serde_json::Value> {
    let mut out = BTreeMap::new();
    for line in stdout.lines().filter(|l| l.starts_with('{')) {
        let doc: serde_json::Value = serde_json::from_str(line).expect("JSON line");
        if doc["type"] == "summary" {
            let pid = doc["master"]["pid"].as_u64().expect("master.pid");
            assert_eq!(doc["master_pid"].as_u64(), Some(pid), "{doc}");
            out.insert(pid, doc);
        }
    }
    out
}

/// Sum of the samples of `name` labelled `master="<pid>"` in Prometheus text.
fn master_sum(text: &str, name: &str, pid: u32) -> f64 {
    let prefix = format!("{name}{{master=\"{pid}\"");
    text.lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `promtool check metrics` passes on `text`.
fn promtool_check(text: &str) {
    use std::io::Write as _;
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool (run `cargo xtask setup`)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits until the probe says it attached to master `pid`.
fn attached(probe: &mut ProbeRun, pid: u32) {
    probe.wait_for_stderr(
        &format!("Tracing nginx master {pid} "),
        Duration::from_secs(20),
    );
}

#[test]
fn two_masters_at_once_then_one_stopped_and_one_started() {
    let mut a = Nginx::start(&NginxConfig::default());
    let b = Nginx::start(&NginxConfig::default());
    let metrics_port = free_port();
    // --duration bounds the run if the test fails before stopping it.
    let mut probe = Probe::with_args(["--all", "--json", "--summary-only", "--duration", "120"])
        .listen(metrics_port)
        .start();
    attached(&mut probe, a.master_pid());
    attached(&mut probe, b.master_pid());
    assert_eq!(one_request_per_connection(a.addr(), 30), 30);
    assert_eq!(one_request_per_connection(b.addr(), 50), 50);
    std::thread::sleep(Duration::from_millis(800));
    let text = scrape_text(metrics_port);
    assert_eq!(
        master_sum(&text, "nginx_probe_accepts_total", a.master_pid()),
        30.0,
        "{text}"
    );
    assert_eq!(
        master_sum(&text, "nginx_probe_accepts_total", b.master_pid()),
        50.0,
        "{text}"
    );
    for m in [&a, &b] {
        let info = format!(
            "nginx_probe_master_info{{master=\"{}\",nginx_version=\"",
            m.master_pid()
        );
        assert!(text.contains(&info), "{info}: {text}");
    }
    assert_eq!(
        text.matches("# TYPE nginx_probe_accepts_total ").count(),
        1,
        "{text}"
    );
    promtool_check(&text);
    let a_pid = a.master_pid();
    a.stop();
    probe.wait_for_stderr(
        &format!("nginx master {a_pid} exited"),
        Duration::from_secs(10),
    );
    let c = Nginx::start(&NginxConfig::default());
    attached(&mut probe, c.master_pid());
    assert_eq!(one_request_per_connection(c.addr(), 40), 40);
    assert_eq!(one_request_per_connection(b.addr(), 5), 5);
    std::thread::sleep(Duration::from_millis(800));
    let text = scrape_text(metrics_port);
    assert_eq!(
        master_sum(&text, "nginx_probe_accepts_total", c.master_pid()),
        40.0,
        "{text}"
    );
    assert_eq!(
        master_sum(&text, "nginx_probe_accepts_total", a_pid),
        0.0,
        "a master let go has no series: {text}"
    );
    let out = probe.stop();
    let s = summaries(&out.stdout);
    let host_ns = std::fs::read_link("/proc/self/ns/pid").unwrap();
    for (pid, n) in [(a_pid, 30), (b.master_pid(), 55), (c.master_pid(), 40)] {
        let doc = s.get(&u64::from(pid)).unwrap_or_else(|| {
            panic!("no summary of master {pid}: {}\n{}", out.stdout, out.stderr)
        });
        assert_eq!(total_accepts(doc), n, "master {pid}: {doc}");
        let m = &doc["master"];
        assert!(
            m["nginx_version"]
                .as_str()
                .is_some_and(|v| v.starts_with("1.")),
            "{m}"
        );
        assert!(m["container_id"].is_null(), "{m}");
        assert_eq!(
            format!("pid:[{}]", m["pid_namespace"]),
            host_ns.to_string_lossy(),
            "{m}"
        );
    }
    let a_doc = &s[&u64::from(a_pid)];
    assert!(
        a_doc["end_reason"].as_str().unwrap().contains("exited"),
        "{a_doc}"
    );
    assert!(s[&u64::from(c.master_pid())]["end_reason"]
        .as_str()
        .unwrap()
        .contains("SIGINT"));
}

/// The end of an `--all` run reaches every master at once. Four masters under
/// `--duration 6`: each summary's final snapshot is taken at the deadline (the ends of
/// their periods within 0.25 s of one another, no period longer than the 6 s), and 7
/// connections made to each master a second after the deadline, while the programs are
/// being detached, are counted by none (they were, by every master after the first,
/// when each session detached before the next took its snapshot: 2 s apiece). Every
/// line a master's session prints on stderr starts with that master.
#[test]
fn every_master_ends_at_the_deadline_together() {
    let ngs: Vec<Nginx> = (0..4)
        .map(|_| Nginx::start(&NginxConfig::default()))
        .collect();
    let mut probe =
        Probe::with_args(["--all", "--json", "--summary-only", "--duration", "6"]).start();
    for ng in &ngs {
        attached(&mut probe, ng.master_pid());
    }
    // Printed after the first scan: the deadline was set before it, so it is at most
    // 6 s after this line.
    probe.wait_for_stderr("Following every nginx master", Duration::from_secs(20));
    let followed = std::time::Instant::now();
    for (i, ng) in ngs.iter().enumerate() {
        assert_eq!(one_request_per_connection(ng.addr(), 10 + i), 10 + i);
    }
    let late = followed + Duration::from_secs(7);
    std::thread::sleep(late.saturating_duration_since(std::time::Instant::now()));
    for ng in &ngs {
        assert_eq!(one_request_per_connection(ng.addr(), 7), 7);
    }
    let out = probe.wait();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let s = summaries(&out.stdout);
    let mut ends = Vec::new();
    for (i, ng) in ngs.iter().enumerate() {
        let pid = ng.master_pid();
        let doc = s.get(&u64::from(pid)).unwrap_or_else(|| {
            panic!("no summary of master {pid}: {}\n{}", out.stdout, out.stderr)
        });
        assert_eq!(total_accepts(doc), 10 + i as u64, "master {pid}: {doc}");
        assert_eq!(doc["end_reason"], "--duration 6 s elapsed", "{doc}");
        let period = doc["duration_s"].as_f64().unwrap();
        assert!(period <= 6.0, "master {pid}: a {period} s period: {doc}");
        ends.push((doc["time_unix_s"].as_f64().unwrap(), pid));
    }
    ends.sort_by(|a, b| a.0.total_cmp(&b.0));
    let spread = ends[ends.len() - 1].0 - ends[0].0;
    assert!(spread <= 0.25, "the periods end {spread} s apart: {ends:?}");
    session_lines_name_their_master(&out.stderr, &ngs);
    report_and_compare_choose_one_master(&out.stdout, &ngs);
}

/// `report` and `compare` on that real `--all --json` stdout: refused without
/// `--master` (exit 2, one line naming the masters), one master's summary with it.
fn report_and_compare_choose_one_master(stdout: &str, ngs: &[Nginx]) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("all.json");
    std::fs::write(&file, stdout).unwrap();
    for args in [vec!["report"], vec!["compare", file.to_str().unwrap()]] {
        let out = Probe::with_args(&args).arg(&file).run();
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert_eq!(out.stderr.trim().lines().count(), 1, "{}", out.stderr);
        assert!(out.stderr.contains("nginx masters ("), "{}", out.stderr);
        assert!(out
            .stderr
            .trim_end()
            .ends_with("choose one with --master <PID>"));
        for ng in ngs {
            assert!(
                out.stderr.contains(&ng.master_pid().to_string()),
                "{}",
                out.stderr
            );
        }
        assert!(out.stdout.is_empty(), "{}", out.stdout);
    }
    let (a, b) = (ngs[1].master_pid(), ngs[3].master_pid());
    let out = Probe::report(&file)
        .args(["--json", "--master", &a.to_string()])
        .run();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let doc = out.summary_json();
    assert_eq!(
        (doc["master_pid"].as_u64(), total_accepts(&doc)),
        (Some(a.into()), 11)
    );
    let pair = format!("{a}:{b}");
    let out = Probe::compare(&file, &file)
        .args(["--json", "--master", &pair])
        .run();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let c: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    let f = file.display();
    let want = format!("different nginx masters: pid {a} in {f}, pid {b} in {f} (a restart or another nginx: its start, binary and configuration may differ)");
    assert_eq!(c["caveats"][0], want.as_str(), "{c}");
}

/// Every stderr line of our masters' sessions under `--all` starts with its master:
/// the banner's two lines, and no warning or event line of a session without one.
fn session_lines_name_their_master(stderr: &str, ngs: &[Nginx]) {
    for ng in ngs {
        let pid = ng.master_pid();
        let tag = format!("nginx-probe: master {pid}: ");
        let banner = format!("{tag}Tracing nginx master {pid} ");
        assert_eq!(stderr.matches(&banner).count(), 1, "{stderr}");
        let detail = format!("{tag}Detail: ");
        assert_eq!(stderr.matches(&detail).count(), 1, "{stderr}");
    }
    for line in stderr.lines() {
        let untagged = line.starts_with("Tracing")
            || line.starts_with("Detail")
            || (line.starts_with("nginx-probe: warning")
                && !line.contains("--all follows at most"))
            || line.starts_with("nginx-probe: +");
        assert!(!untagged, "a session's line without its master: {line}");
    }
}

#[test]
fn a_master_in_a_container_is_named_by_its_cgroup_and_pid_namespace() {
    let id = "5e".repeat(32);
    let cg = CpuCgroup::create(&format!("docker-{id}.scope"), 200_000, 100_000);
    // nginx 1.26 of the trixie root as a container (own pid and mount namespace,
    // chrooted) beside the host's 1.22: two binaries, each with its own programs.
    let inside = Nginx::start(&NginxConfig {
        root: Some(container::trixie_root()),
        cgroup: Some(cg.dir.clone()),
        ..Default::default()
    });
    let host = Nginx::start(&NginxConfig::default());
    let mut probe =
        Probe::with_args(["--all", "--json", "--summary-only", "--duration", "120"]).start();
    attached(&mut probe, inside.master_pid());
    attached(&mut probe, host.master_pid());
    assert_eq!(one_request_per_connection(inside.addr(), 20), 20);
    assert_eq!(one_request_per_connection(host.addr(), 10), 10);
    std::thread::sleep(Duration::from_millis(800));
    let out = probe.stop();
    let s = summaries(&out.stdout);
    let ns = std::fs::read_link(format!("/proc/{}/ns/pid", inside.master_pid())).unwrap();
    let doc = &s[&u64::from(inside.master_pid())];
    assert_eq!(total_accepts(doc), 20, "{doc}");
    let m = &doc["master"];
    assert_eq!(m["container_id"].as_str(), Some(id.as_str()), "{m}");
    assert_eq!(m["nginx_version"].as_str(), Some("1.26.3"), "{m}");
    assert_eq!(
        format!("pid:[{}]", m["pid_namespace"]),
        ns.to_string_lossy(),
        "{m}"
    );
    assert_ne!(doc["master_nspid"].as_array().unwrap().len(), 1, "{doc}");
    let doc = &s[&u64::from(host.master_pid())];
    assert_eq!(total_accepts(doc), 10, "{doc}");
    assert!(doc["master"]["container_id"].is_null(), "{doc}");
    assert_eq!(
        doc["master"]["nginx_version"].as_str(),
        Some("1.22.1"),
        "{doc}"
    );
    drop(inside);
}

#[test]
fn one_port_in_two_network_namespaces_makes_connections_unknown_not_mixed() {
    let tag = std::process::id();
    let (ns1, ns2) = (
        NetNs::new(&format!("np-all1-{tag}"), &[]),
        NetNs::new(&format!("np-all2-{tag}"), &[]),
    );
    // Both also listen on one fixed port, each in its own namespace.
    let shared = "listen 127.0.0.1:18555;".to_string();
    let in_ns = |ns: &NetNs| NginxConfig {
        netns: Some(ns.name.clone()),
        server_extra: shared.clone(),
        ..Default::default()
    };
    let (one, two) = (Nginx::start(&in_ns(&ns1)), Nginx::start(&in_ns(&ns2)));
    let host = Nginx::start(&NginxConfig::default());
    let mut probe =
        Probe::with_args(["--all", "--json", "--summary-only", "--duration", "120"]).start();
    for ng in [&one, &two, &host] {
        attached(&mut probe, ng.master_pid());
    }
    let (a1, a2) = (one.addr(), two.addr());
    assert_eq!(
        NetNs::run_in(&ns1.name, || one_request_per_connection(a1, 12)),
        12
    );
    assert_eq!(
        NetNs::run_in(&ns2.name, || one_request_per_connection(a2, 7)),
        7
    );
    assert_eq!(one_request_per_connection(host.addr(), 9), 9);
    std::thread::sleep(Duration::from_millis(800));
    let out = probe.stop();
    let s = summaries(&out.stdout);
    for (ng, other, n) in [(&one, &two, 12), (&two, &one, 7)] {
        let doc = &s[&u64::from(ng.master_pid())];
        assert_eq!(total_accepts(doc), n, "{doc}");
        assert!(doc.get("connections").is_none(), "{doc}");
        let why = doc["connections_not_traced"].as_str().unwrap_or_default();
        let want = format!("unknown: nginx master {}, also followed (--all), listens on port 18555 in another network namespace", other.master_pid());
        assert!(why.starts_with(&want), "{why}");
    }
    let doc = &s[&u64::from(host.master_pid())];
    assert_eq!(total_accepts(doc), 9, "{doc}");
    assert!(doc["connections_not_traced"].is_null(), "{doc}");
    assert!(doc["connections"].is_object(), "{doc}");
}

#[test]
fn all_with_one_masters_options_exits_2_with_one_line() {
    for other in [
        ["--pid", "1"],
        ["--pid-file", "/run/nginx.pid"],
        ["--record", "/tmp/x.jsonl"],
    ] {
        let out = Probe::with_args(["--all", "--duration", "5"])
            .args(other)
            .run();
        assert_eq!(out.status.code(), Some(2), "{other:?}: {out:?}");
        assert_eq!(out.stderr.trim().lines().count(), 1, "{}", out.stderr);
        assert!(
            out.stderr
                .starts_with("nginx-probe: the argument '--all' cannot be used with"),
            "{}",
            out.stderr
        );
        assert!(out.stdout.is_empty(), "{}", out.stdout);
    }
}

/// A binary upgrade (USR2) under `--all`: the event line says what `--all` does (the new
/// master followed on its own once the old one exits, its workers untraced until then),
/// not "trace it with --pid"; and that is what happens. With the old master's workers
/// gone (WINCH), 9 connections reach only the new master's workers: counted by no
/// summary; once the old master quits, the new one is attached and its 6 are counted.
#[test]
fn a_binary_upgrade_under_all_is_followed_once_the_old_master_exits() {
    use nix::{
        sys::signal::{kill, Signal},
        unistd::Pid,
    };
    let signal = |pid: u32, sig| kill(Pid::from_raw(pid as i32), sig).unwrap();
    // nginx refuses USR2 unless daemonized.
    let ng = Nginx::start(&NginxConfig {
        daemon: true,
        ..NginxConfig::default()
    });
    let old = ng.master_pid();
    let mut probe =
        Probe::with_args(["--all", "--json", "--summary-only", "--duration", "120"]).start();
    attached(&mut probe, old);
    assert_eq!(one_request_per_connection(ng.addr(), 5), 5);
    signal(old, Signal::SIGUSR2);
    // The old workers leave gracefully (WINCH); the new master's workers accept alone.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let new = loop {
        let kids = nginx_probe_tests::children_of(old);
        let masters: Vec<u32> = kids
            .iter()
            .copied()
            .filter(|&c| !nginx_probe_tests::children_of(c).is_empty())
            .collect();
        match (masters.as_slice(), kids.len()) {
            ([m], 1) => break *m,
            ([_], _) => signal(old, Signal::SIGWINCH),
            _ => {}
        }
        assert!(std::time::Instant::now() < deadline, "{kids:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(one_request_per_connection(ng.addr(), 9), 9);
    std::thread::sleep(Duration::from_millis(800));
    signal(old, Signal::SIGQUIT);
    // The event comes once a refresh has told the forked child is a master; 10 s
    // was once not enough in a full suite (session 56: passed alone in 7 s, 3 of 3).
    let line = probe.wait_for_stderr("binary upgrade, USR2", Duration::from_secs(30));
    assert!(
        line.starts_with(&format!("nginx-probe: master {old}: +")),
        "{line}"
    );
    assert!(line.ends_with(&format!("new nginx master {new} started under master {old} (binary upgrade, USR2); --all follows it as a master of its own, with its own summary, from the first /proc scan after master {old} exits; until then its workers are not traced")), "{line}");
    attached(&mut probe, new);
    assert_eq!(one_request_per_connection(ng.addr(), 6), 6);
    std::thread::sleep(Duration::from_millis(800));
    let out = probe.stop();
    let _ = kill(Pid::from_raw(new as i32), Signal::SIGQUIT);
    let s = summaries(&out.stdout);
    assert_eq!(total_accepts(&s[&u64::from(old)]), 5, "{}", out.stdout);
    assert_eq!(total_accepts(&s[&u64::from(new)]), 6, "{}", out.stdout);
}
