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
