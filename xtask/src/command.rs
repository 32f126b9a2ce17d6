//! Running the commands xtask drives: to completion with a status check ([`run`]), with
//! a deadline ([`run_with_deadline`]), or for what they print ([`capture`] and the two
//! readings of it every caller uses: [`output_of`], [`text_of`]).

use std::{
    io::Read as _,
    process::{Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _, Result};

/// Runs `cmd` with the terminal's stdout and stderr; fails unless it exits 0.
pub fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("failed to run {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
    }
    Ok(())
}

/// Runs `cmd` in its own process group; past `deadline` the whole group (cargo, the
/// test binary, the nginx and probes it started) is killed and this fails.
pub fn run_with_deadline(cmd: &mut Command, deadline: Duration) -> Result<()> {
    use std::os::unix::process::CommandExt as _;
    let mut child = cmd
        .process_group(0)
        .spawn()
        .with_context(|| format!("failed to run {cmd:?}"))?;
    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            if !status.success() {
                bail!("{cmd:?} failed: {status}");
            }
            return Ok(());
        }
        if start.elapsed() > deadline {
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
            let _ = child.wait();
            bail!("{cmd:?} still ran after {} s: killed", deadline.as_secs());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// What a finished command printed, decoded as UTF-8 (invalid bytes replaced).
pub struct Captured {
    /// How it exited.
    pub status: ExitStatus,
    /// Everything it wrote to stdout.
    pub stdout: String,
    /// Everything it wrote to stderr (empty when the caller sent it elsewhere).
    pub stderr: String,
}

impl Captured {
    /// stdout trimmed, or stderr trimmed when stdout is empty (`nginx -v` answers on
    /// stderr).
    pub fn text(&self) -> String {
        match self.stdout.trim() {
            "" => self.stderr.trim().to_string(),
            out => out.to_string(),
        }
    }

    /// Itself when the command exited 0; else the error `<what> failed (<status>):
    /// <stderr>`.
    pub fn checked(self, what: &str) -> Result<Captured> {
        if !self.status.success() {
            bail!("{what} failed ({}): {}", self.status, self.stderr.trim());
        }
        Ok(self)
    }
}

/// Reads all of `pipe` (a running child's stdout) on a thread of its own, so that the
/// child never blocks on a full pipe; the thread returns the text once the pipe closes.
pub fn read_in_background(
    pipe: impl std::io::Read + Send + 'static,
) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::BufReader::new(pipe).read_to_string(&mut s);
        s
    })
}

/// Runs `cmd` to completion and keeps what it printed (stdout and stderr are captured
/// unless `cmd` already sends them elsewhere). Fails only when it cannot be started.
pub fn capture(cmd: &mut Command) -> std::io::Result<Captured> {
    let out = cmd.output()?;
    Ok(Captured {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// The stdout of `cmd` when it runs and exits 0 (its stderr discarded); None otherwise.
/// For questions to the system: is a package installed, which version is there.
pub fn output_of(cmd: &mut Command) -> Option<String> {
    capture(cmd.stderr(Stdio::null()))
        .ok()
        .filter(|o| o.status.success())
        .map(|o| o.stdout)
}

/// [`Captured::text`] of `cmd`, whatever its exit status; None when it cannot be
/// started. For the machine facts reports print (`uname -r`, `nginx -v`).
pub fn text_of(cmd: &mut Command) -> Option<String> {
    capture(cmd).ok().map(|o| o.text())
}
