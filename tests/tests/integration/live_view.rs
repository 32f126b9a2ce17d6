//! The live view: on a terminal (a tmux pane here) a top-like table of workers, `q`
//! quits and the summary lands on the normal screen; piped, plain text without escape
//! sequences.

use std::{
    process::Command,
    thread,
    time::{Duration, Instant},
};

use nginx_probe_tests::{one_request_per_connection, probe_binary, Nginx, NginxConfig, Probe};

/// A detached tmux session running one command, killed on drop.
struct Tmux {
    name: String,
}

impl Tmux {
    fn start(cmd: &str) -> Tmux {
        let name = format!("np-test-{}", std::process::id());
        let ok = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                &name,
                "-x",
                "160",
                "-y",
                "40",
                cmd,
            ])
            .status()
            .expect("run tmux (run `cargo xtask setup`)")
            .success();
        assert!(ok, "tmux new-session failed");
        Tmux { name }
    }

    /// The pane's text, with its scrollback.
    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-S", "-200", "-t", &self.name])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &str) {
        let ok = Command::new("tmux")
            .args(["send-keys", "-t", &self.name, keys])
            .status()
            .unwrap()
            .success();
        assert!(ok, "tmux send-keys");
    }

    /// Waits until the pane shows `text` (up to `secs`), returning the screen.
    fn wait_for(&self, text: &str, secs: u64) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let s = self.screen();
            if s.contains(text) {
                return s;
            }
            assert!(Instant::now() < deadline, "`{text}` never showed:\n{s}");
            thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.name])
            .status();
    }
}

#[test]
fn on_a_terminal_the_workers_table_refreshes_and_q_prints_the_summary() {
    let ng = Nginx::start(&NginxConfig::default());
    let cmd = format!(
        "{} --pid {} --interval 1; echo EXIT=$?; sleep 60",
        probe_binary().display(),
        ng.master_pid()
    );
    let tmux = Tmux::start(&cmd);
    let s = tmux.wait_for("waiting for the first interval (1 s)", 30);
    assert!(s.contains("WORKER") && s.contains("SLOT/GEN"), "{s}");
    assert_eq!(one_request_per_connection(ng.addr(), 120), 120);
    // The next redraw shows each worker in a row of the table.
    let s = tmux.wait_for(" UTC  1.0s interval  workers 2", 10);
    for pid in ng.worker_pids() {
        assert!(
            s.lines().any(|l| l.starts_with(&pid.to_string())),
            "no row for worker {pid}:\n{s}"
        );
    }
    assert!(s.contains(&format!("127.0.0.1:{}", ng.port)), "{s}");
    tmux.keys("q");
    let s = tmux.wait_for("EXIT=", 10);
    assert!(s.contains("EXIT=0"), "{s}");
    // Back on the normal screen: the summary, with every connection.
    assert!(s.contains("SUMMARY"), "{s}");
    assert!(s.contains(" accepts 120 ("), "{s}");
    assert!(
        !s.contains("waiting for the first interval"),
        "alternate screen left: {s}"
    );
}

#[test]
fn piped_output_is_plain_text() {
    let ng = Nginx::start(&NginxConfig::default());
    // Ended by SIGINT 1.2 s after the banner, not by --duration: a --duration runs from
    // the start, and attaching on a loaded machine can take most of it (a 0.3 s run
    // printed no interval).
    let probe = Probe::on(&ng).interval(0.5).start();
    thread::sleep(Duration::from_millis(1200));
    let out = probe.stop();
    assert!(out.stdout.contains("INTERVAL"), "{}", out.stdout);
    assert!(out.stdout.contains("SUMMARY"), "{}", out.stdout);
    assert!(
        !out.stdout.contains('\x1b'),
        "escape sequences in piped output"
    );
}
