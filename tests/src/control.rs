//! Controlling a running nginx as an operator does: a reload (SIGHUP to the master),
//! a binary upgrade (USR2), `nginx -t` on its configuration file.

use std::{
    process::Command,
    time::{Duration, Instant},
};

use crate::Nginx;

impl Nginx {
    /// Sends the master SIGHUP: nginx reloads its configuration. Returns at once.
    pub fn reload(&self) {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.master_pid() as i32),
            nix::sys::signal::Signal::SIGHUP,
        )
        .expect("SIGHUP the master");
    }

    /// Sends the master USR2, a binary upgrade (nginx refuses it unless daemonized:
    /// [`crate::NginxConfig::daemon`]): nginx forks and execs its binary, whose new
    /// master loads the configuration and starts workers beside the old ones. Waits up
    /// to 10 s for the outcome: the new master's pid once the pid file names it, or
    /// None once it failed (an `[emerg]` line written since, and the old master's pid
    /// file back in place: nginx renames `nginx.pid.oldbin` back when its new binary
    /// exits). Stopping a new master is the caller's (it is not the fixture's child).
    pub fn upgrade(&self) -> Option<u32> {
        let old = self.master_pid();
        let emerg_before = self.error_log().matches("[emerg]").count();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(old as i32),
            nix::sys::signal::Signal::SIGUSR2,
        )
        .expect("USR2 the master");
        let oldbin = self.prefix.join("logs/nginx.pid.oldbin");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let named = std::fs::read_to_string(self.pid_file())
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok());
            if let Some(new) = named.filter(|&p| p != old) {
                return Some(new);
            }
            if self.error_log().matches("[emerg]").count() > emerg_before
                && named == Some(old)
                && !oldbin.exists()
            {
                return None;
            }
            assert!(Instant::now() < deadline, "no outcome 10 s after USR2");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs `nginx -t` on this nginx's configuration file with the binary the master
    /// runs; returns whether nginx found it good.
    pub fn test_config(&self) -> bool {
        let (p, c) = (self.prefix.display(), self.prefix.join("nginx.conf"));
        Command::new(format!("/proc/{}/exe", self.master_pid()))
            .args([
                "-t",
                "-q",
                "-p",
                &p.to_string(),
                "-c",
                &c.display().to_string(),
            ])
            .stderr(std::process::Stdio::null())
            .status()
            .expect("run nginx -t")
            .success()
    }
}

/// Holds back every call of one syscall by process `pid` (strace injecting a delay)
/// until dropped: at the call's entry (`delay_enter`: the call itself waits) or its
/// exit (`delay_exit`: what it did is done, the process's next step waits).
pub struct SyscallDelay(std::process::Child);

impl SyscallDelay {
    /// Delays `syscall` of `pid` by `ms`, at `at` (`"enter"` or `"exit"`); waits
    /// `settle_ms` for strace to attach.
    pub fn on(pid: u32, syscall: &str, at: &str, ms: u64, settle_ms: u64) -> SyscallDelay {
        let child = Command::new("strace")
            .args(["-qq", "-o", "/dev/null", "-e"])
            .arg(format!("trace={syscall}"))
            .arg("-e")
            .arg(format!("inject={syscall}:delay_{at}={}", ms * 1000))
            .arg("-p")
            .arg(pid.to_string())
            .spawn()
            .expect("run strace (run `cargo xtask setup`)");
        std::thread::sleep(Duration::from_millis(settle_ms));
        SyscallDelay(child)
    }
}

impl Drop for SyscallDelay {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The summary's entry in `connections.ports` of `ng`'s port. Panics when absent.
pub fn port_entry(summary: &serde_json::Value, ng: &Nginx) -> serde_json::Value {
    let port = ng.addr().port() as u64;
    summary["connections"]["ports"]
        .as_array()
        .unwrap_or_else(|| panic!("no connections in {summary}"))
        .iter()
        .find(|p| p["port"] == port)
        .cloned()
        .unwrap_or_else(|| panic!("no port {port} in {}", summary["connections"]))
}
