//! Exact accept counts against a real nginx and the real kernel. Run as root through
//! `cargo xtask test`.

use std::{
    net::TcpStream,
    process::{Child, Command, Stdio},
    time::Duration,
};

use nginx_probe_tests::{
    assert_released, keepalive_requests, one_request_per_connection, total_accept_errors,
    total_accepts, workers, Nginx, NginxConfig, Probe,
};
use nix::sys::signal::Signal;

/// A process blocked in accept() on its own port until it is connected to.
struct Blocker {
    child: Child,
    port: u16,
}

impl Blocker {
    /// Starts a python3 process that listens on a port of its choosing, prints it, and
    /// blocks in accept().
    fn start() -> Blocker {
        use std::io::BufRead;
        let mut child = Command::new("python3")
            .args([
                "-c",
                "import socket\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen(8)\nprint(s.getsockname()[1],flush=True)\nc,_=s.accept()\nc.close()\n",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.as_mut().expect("stdout"))
            .read_line(&mut line)
            .expect("blocker port");
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("blocker printed {line:?}"));
        Blocker { child, port }
    }
}

impl Drop for Blocker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn exactly_500_connections_give_exactly_500_accepts() {
    let ng = Nginx::start(&NginxConfig::default());
    // Case 7: 25 other processes blocked in accept() on their own ports.
    let mut blockers: Vec<Blocker> = (0..25).map(|_| Blocker::start()).collect();
    let probe = Probe::on(&ng).json().start();
    let ids = nginx_probe_tests::prog_ids_held_by(probe.pid());
    let (n, what) = nginx_probe_tests::DEFAULT_PROGRAMS;
    assert_eq!(ids.len(), n, "{what}: {ids:?}");
    assert_eq!(one_request_per_connection(ng.addr(), 500), 500);
    // The blockers accept now, while the probe runs: they must not be counted.
    for b in &blockers {
        let _c = TcpStream::connect(("127.0.0.1", b.port)).expect("connect blocker");
    }
    for b in blockers.iter_mut() {
        b.child.wait().expect("blocker accepted and exited");
    }
    std::thread::sleep(Duration::from_millis(200));
    let out = probe.stop();
    let s = out.summary_json();
    assert_eq!(total_accepts(&s), 500, "{s}");
    // Every reported worker is one of nginx's; the client (this process) and the
    // blockers never appear.
    let nginx_workers = ng.worker_pids();
    let me = std::process::id() as u64;
    for w in workers(&s) {
        let pid = w["pid"].as_u64().unwrap();
        assert!(
            nginx_workers.contains(&(pid as u32)),
            "pid {pid} is not an nginx worker"
        );
        assert_ne!(pid, me);
    }
    assert_eq!(workers(&s).len(), 2);
    assert_eq!(s["master_pid"].as_u64().unwrap(), ng.master_pid() as u64);
    assert_eq!(s["schema"].as_u64().unwrap(), 1);
    // Every tracepoint exists on the kernels we test on: a program the verifier
    // rejected would show up here.
    assert_eq!(s["missing_tracepoints"], serde_json::json!([]), "{s}");
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
    // Each of the 500 requests wrote one access-log line and sent one 30-byte body.
    let sendfiles: u64 = workers(&s)
        .iter()
        .map(|w| w["syscalls"]["sendfile"]["count"].as_u64().unwrap())
        .sum();
    assert_eq!(sendfiles, 500);
    let body_bytes: u64 = workers(&s)
        .iter()
        .map(|w| w["syscalls"]["sendfile"]["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(body_bytes, 500 * nginx_probe_tests::INDEX_BODY.len() as u64);
    assert_released(&ids, "after SIGINT");
}

#[test]
fn ten_keepalive_connections_carrying_2000_requests_give_10_accepts() {
    let ng = Nginx::start(&NginxConfig::default());
    let probe = Probe::on(&ng).json().start();
    assert_eq!(keepalive_requests(ng.addr(), 10, 200), 2000);
    let out = probe.stop_with(Signal::SIGTERM);
    assert!(out.status.success(), "{out:?}");
    let s = out.summary_json();
    assert_eq!(total_accepts(&s), 10, "{s}");
    let recv: u64 = workers(&s)
        .iter()
        .map(|w| w["syscalls"]["writev"]["count"].as_u64().unwrap())
        .sum();
    // One writev (headers) per response.
    assert_eq!(recv, 2000, "{s}");
    assert!(s["end_reason"].as_str().unwrap().contains("SIGTERM"));
    for w in workers(&s) {
        let a4 = &w["syscalls"]["accept4"];
        // p50 <= p99 <= max, and the histogram holds every timed call.
        assert!(a4["p50_ns"].as_u64() <= a4["p99_ns"].as_u64());
        assert!(a4["p99_ns"].as_u64() <= a4["max_ns"].as_u64());
        let hist_sum: u64 = a4["hist_log2_ns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(hist_sum, a4["timed"].as_u64().unwrap());
    }
}

#[test]
fn soft_nofile_64_gives_emfile_on_workers_and_normal_limit_gives_none() {
    // Soft limit 64 (hard 4096), 200 connections held open: workers hit EMFILE.
    let cfg = NginxConfig {
        nofile: Some((64, 4096)),
        ..NginxConfig::default()
    };
    let ng = Nginx::start(&cfg);
    let probe = Probe::on(&ng).json().start();
    let held = ng.hold_connections(200);
    // nginx backs off accept for accept_mutex_delay (500 ms) after EMFILE; give it
    // time to retry.
    std::thread::sleep(Duration::from_millis(1500));
    let out = probe.stop();
    drop(held);
    let s = out.summary_json();
    let emfile = total_accept_errors(&s, "EMFILE");
    assert!(emfile > 0, "no EMFILE with a soft limit of 64: {s}");
    assert!(
        ng.error_log().contains("accept4() failed (24"),
        "nginx itself did not log EMFILE"
    );
    // Fewer than 200 accepted: the rest wait in the backlog.
    assert!(total_accepts(&s) < 200, "{s}");
    drop(ng);

    // Same load with the normal limit: no EMFILE, all 200 accepted.
    let ng = Nginx::start(&NginxConfig::default());
    let probe = Probe::on(&ng).json().start();
    let held = ng.hold_connections(200);
    std::thread::sleep(Duration::from_millis(1500));
    let out = probe.stop();
    drop(held);
    let s = out.summary_json();
    assert_eq!(total_accept_errors(&s, "EMFILE"), 0, "{s}");
    assert_eq!(total_accepts(&s), 200, "{s}");
}

#[test]
fn an_nginx_started_through_a_renamed_symlink_is_traced() {
    // comm `nginx-prod`, title `nginx: master process ...`: nginx by its binary.
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("nginx-prod");
    let nginx = std::env::var("NGINX_BIN").unwrap_or_else(|_| "/usr/sbin/nginx".into());
    std::os::unix::fs::symlink(&nginx, &link).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let ng = Nginx::start(&NginxConfig {
        binary: Some(link),
        ..NginxConfig::default()
    });
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", ng.master_pid())).unwrap();
    assert_eq!(comm.trim(), "nginx-prod");
    let probe = Probe::on(&ng).json().start();
    assert_eq!(one_request_per_connection(ng.addr(), 50), 50);
    std::thread::sleep(Duration::from_millis(200));
    let out = probe.stop();
    assert!(out.status.success(), "{out:?}");
    let s = out.summary_json();
    assert_eq!(total_accepts(&s), 50, "{s}");
}
