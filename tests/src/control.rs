//! Controlling a running nginx as an operator does: a reload (SIGHUP to the master),
//! `nginx -t` on its configuration file.

use std::process::Command;

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
