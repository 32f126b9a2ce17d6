//! Bad input: a clear one-line error, exit code 2, and nothing attached.

use std::process::Command;

use nginx_probe_tests::{assert_released, prog_ids_held_by, Nginx, NginxConfig, Probe};
use nix::sys::signal::Signal;

/// `nginx-probe <args>` exits 2 with one line of stderr containing `expect`, prints
/// nothing on stdout and loads no BPF program.
fn assert_usage_error(args: &[&str], expect: &str) {
    let out = Probe::with_args(args).run_loading_nothing();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    assert!(
        out.stdout.is_empty(),
        "{args:?} printed to stdout: {}",
        out.stdout
    );
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: not one line: {:?}", out.stderr);
    assert!(
        lines[0].starts_with("nginx-probe: "),
        "{args:?}: {}",
        lines[0]
    );
    assert!(
        lines[0].contains(expect),
        "{args:?}: {} lacks {expect:?}",
        lines[0]
    );
}

#[test]
fn bad_pids_exit_2_with_one_line_and_attach_nothing() {
    let ng = Nginx::start(&NginxConfig::default());
    let worker = ng.worker_pids()[0].to_string();
    let master = ng.master_pid().to_string();
    assert_usage_error(&["--pid", &worker], &format!("run with --pid {master}"));
    let me = std::process::id().to_string();
    assert_usage_error(&["--pid", &me], "not nginx");
    assert_usage_error(&["--pid", "1"], "pass the pid of an nginx master");
    assert_usage_error(&["--pid", "4194305"], "no process with pid 4194305");
    assert_usage_error(&["--pid", "0"], "--pid");
    assert_usage_error(&["--pid", "-5"], "");
    assert_usage_error(&["--pid", "nginx"], "--pid");
    assert_usage_error(
        &["--pid-file", "/nonexistent/nginx.pid"],
        "--pid-file /nonexistent/nginx.pid",
    );
    assert_usage_error(&["--pid", &master, "--interval", "0"], "--interval");
    assert_usage_error(&["--pid", &master, "--duration", "soon"], "--duration");
    assert_usage_error(&["--pid", &master, "--hist", "fork"], "--hist");
    assert_usage_error(
        &["--pid", &master, "--syscalls", "fork"],
        "unknown syscall `fork`",
    );
    assert_usage_error(&["--pid", &master, "--syscalls", ""], "--syscalls");
    assert_usage_error(&["--pid", "99999999999"], "--pid");
    assert_usage_error(&["--pid", &master, "--interval", "nan"], "--interval");
    assert_usage_error(&["--pid", &master, "--interval", "1e12"], "--interval");
    assert_usage_error(&["--pid", &master, "--bogus"], "--bogus");
    assert_usage_error(&["--pid", "-3"], "invalid value '-3'");
    assert_usage_error(&["--pid", &master, "--interval", "-1"], "between 0.1 and");
    assert_usage_error(
        &["--pid", &master, "--hist", "openat"],
        "openat is not traced; add it with --syscalls all",
    );
}

#[test]
fn a_dead_master_is_reported_as_dead() {
    let mut ng = Nginx::start(&NginxConfig::default());
    let master = ng.master_pid().to_string();
    ng.stop();
    assert_usage_error(
        &["--pid", &master],
        &format!("no process with pid {master}"),
    );
}

#[test]
fn without_root_it_says_so_and_exits_2() {
    let ng = Nginx::start(&NginxConfig::default());
    // A copy that `nobody` can execute wherever the checkout lives.
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = dir.path().join("nginx-probe");
    std::fs::copy(nginx_probe_tests::probe_binary(), &bin).expect("copy binary");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&bin)
        .args(["--pid", &ng.master_pid().to_string()])
        .output()
        .expect("setpriv");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("must run as root"), "{stderr}");
}

#[test]
fn nothing_stays_attached_after_sigkill() {
    let ng = Nginx::start(&NginxConfig::default());
    let probe = Probe::on(&ng).start();
    let ids = prog_ids_held_by(probe.pid());
    let (n, what) = nginx_probe_tests::DEFAULT_PROGRAMS;
    assert_eq!(ids.len(), n, "{what}: {ids:?}");
    let out = probe.stop_with(Signal::SIGKILL);
    assert_eq!(out.status.code(), None);
    assert_released(&ids, "after SIGKILL");
}

#[test]
fn a_process_titled_like_a_master_is_not_taken_for_one() {
    let mut fake = Command::new("bash")
        .args([
            "-c",
            "exec -a 'nginx: master process /usr/sbin/nginx' sleep 30",
        ])
        .spawn()
        .expect("bash");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let pid = fake.id().to_string();
    assert_usage_error(&["--pid", &pid], "`sleep` titled `nginx: master process");
    let _ = fake.kill();
    let _ = fake.wait();
}

#[test]
fn a_failed_summary_write_is_an_error_not_silence() {
    let ng = Nginx::start(&NginxConfig::default());
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let out = Command::new(nginx_probe_tests::probe_binary())
        .args([
            "--pid",
            &ng.master_pid().to_string(),
            "--duration",
            "0.5",
            "--summary-only",
        ])
        .stdout(full)
        .output()
        .expect("run nginx-probe");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or("");
    assert!(
        last.starts_with("nginx-probe: writing the report failed"),
        "{stderr}"
    );
    assert!(last.contains("No space left on device"), "{stderr}");
}
