//! Running nginx-probe: [`Probe`], a command line built up option by option
//! (`Probe::on(&ng).json().uprobes()`), started as a [`ProbeRun`] that stops when told
//! (or dropped), or run to its end; [`ProbeOutput`] is what a run printed.

use std::{
    ffi::OsString,
    io::{BufRead, BufReader, Read},
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use nix::{
    sys::signal::{kill, Signal},
    unistd::Pid,
};

use crate::Nginx;

/// An nginx-probe command line, built up option by option; [`Probe::start`] runs it in
/// the background, [`Probe::run`] to its end, [`Probe::around`] around a load.
#[derive(Clone, Debug)]
pub struct Probe {
    args: Vec<OsString>,
    binary: Option<PathBuf>,
    nofile: Option<(u64, u64)>,
    settle: Duration,
    /// Run under `strace -f -e trace=bpf -o <this file>`.
    bpf_trace: Option<PathBuf>,
}

impl Default for Probe {
    fn default() -> Self {
        Probe {
            args: Vec::new(),
            binary: None,
            nofile: None,
            settle: Duration::from_millis(600),
            bpf_trace: None,
        }
    }
}

impl Probe {
    /// No arguments yet (for `report`, `compare`, `--pid-file`, bad input).
    pub fn new() -> Probe {
        Probe::default()
    }

    /// `--pid <master of ng>`.
    pub fn on(ng: &Nginx) -> Probe {
        Probe::pid(ng.master_pid())
    }

    /// `--pid <pid>`.
    pub fn pid(pid: u32) -> Probe {
        Probe::new().arg("--pid").arg(pid.to_string())
    }

    /// `--pid-file <path>`.
    pub fn pid_file(path: &Path) -> Probe {
        Probe::new().arg("--pid-file").arg(path)
    }

    /// `report <recording>`.
    pub fn report(recording: &Path) -> Probe {
        Probe::new().arg("report").arg(recording)
    }

    /// `compare <before> <after>`.
    pub fn compare(before: &Path, after: &Path) -> Probe {
        Probe::new().arg("compare").arg(before).arg(after)
    }

    /// Exactly these arguments, in this order.
    pub fn with_args<S: AsRef<std::ffi::OsStr>>(args: impl IntoIterator<Item = S>) -> Probe {
        Probe::new().args(args)
    }

    /// One more argument.
    pub fn arg(mut self, arg: impl AsRef<std::ffi::OsStr>) -> Probe {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// More arguments.
    pub fn args<S: AsRef<std::ffi::OsStr>>(mut self, args: impl IntoIterator<Item = S>) -> Probe {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// `--json`: JSON lines on stdout ([`ProbeOutput::summary_json`]).
    pub fn json(self) -> Probe {
        self.arg("--json")
    }

    /// `--summary-only`.
    pub fn summary_only(self) -> Probe {
        self.arg("--summary-only")
    }

    /// `--plain`.
    pub fn plain(self) -> Probe {
        self.arg("--plain")
    }

    /// `--uprobes`: exact requests per worker.
    pub fn uprobes(self) -> Probe {
        self.arg("--uprobes")
    }

    /// `--syscalls all`.
    pub fn syscalls_all(self) -> Probe {
        self.args(["--syscalls", "all"])
    }

    /// `--interval <seconds>` (`1`, `0.5`).
    pub fn interval(self, seconds: impl std::fmt::Display) -> Probe {
        self.arg("--interval").arg(seconds.to_string())
    }

    /// `--duration <d>` (`2`, `0.5`, `"2s"`).
    pub fn duration(self, d: impl std::fmt::Display) -> Probe {
        self.arg("--duration").arg(d.to_string())
    }

    /// `--record <path>`.
    pub fn record(self, path: &Path) -> Probe {
        self.arg("--record").arg(path)
    }

    /// `--listen 127.0.0.1:<port>`.
    pub fn listen(self, port: u16) -> Probe {
        self.arg("--listen").arg(format!("127.0.0.1:{port}"))
    }

    /// `--detail <mode>` (`full`, `sampled`).
    pub fn detail(self, mode: &str) -> Probe {
        self.arg("--detail").arg(mode)
    }

    /// `--detail-window <window> --detail-every <every>` (`"300ms"`, `"1s"`, `"1m"`).
    pub fn detail_windows(self, window: &str, every: &str) -> Probe {
        self.args(["--detail-window", window, "--detail-every", every])
    }

    /// Another nginx-probe binary than [`probe_binary`] (for `cargo xtask`, which builds
    /// it).
    pub fn binary(mut self, binary: &Path) -> Probe {
        self.binary = Some(binary.to_path_buf());
        self
    }

    /// The probe's soft and hard `RLIMIT_NOFILE` (as `ulimit -n` would set them).
    pub fn nofile(mut self, nofile: (u64, u64)) -> Probe {
        self.nofile = Some(nofile);
        self
    }

    /// How long [`Probe::around`] waits after the load before stopping the probe, so
    /// that it has read the load's last events (600 ms unless set).
    pub fn settle(mut self, settle: Duration) -> Probe {
        self.settle = settle;
        self
    }

    fn command(&self) -> Command {
        let binary = self.binary.clone().unwrap_or_else(probe_binary);
        let mut cmd = match &self.bpf_trace {
            None => Command::new(binary),
            Some(trace) => {
                let mut c = Command::new("strace");
                c.args(["-f", "-qq", "-e", "trace=bpf", "-o"])
                    .arg(trace)
                    .arg(binary);
                c
            }
        };
        // It starts with fds 0-2 only, as under a service manager, whatever the test
        // runner inherited.
        crate::no_inherited_fds(&mut cmd);
        if let Some(nofile) = self.nofile {
            set_nofile(&mut cmd, nofile);
        }
        cmd.args(&self.args);
        cmd
    }

    /// Starts it and waits (up to 30 s) until it prints its "Hit Ctrl-C to end." banner,
    /// i.e. until its tracepoints are attached.
    pub fn start(self) -> ProbeRun {
        ProbeRun::spawn_cmd(self.command())
    }

    /// Starts it, runs `load`, waits [`Probe::settle`], stops it with SIGINT and
    /// asserts that it exited 0.
    pub fn around(self, load: impl FnOnce()) -> ProbeOutput {
        let settle = self.settle;
        let probe = self.start();
        load();
        std::thread::sleep(settle);
        probe.stop()
    }

    /// [`Probe::around`] `load`, and the summary it printed last (with `--json`).
    pub fn summary_around(self, load: impl FnOnce()) -> serde_json::Value {
        self.around(load).summary_json()
    }

    /// Runs it to its end (for `--duration`, `report`, `compare` and bad input). A run
    /// that has not exited after [`RUN_PROBE_TIMEOUT_S`] is killed and fails the test:
    /// a usage error that attaches and traces instead must not hang the suite.
    pub fn run(self) -> ProbeOutput {
        let mut child = self
            .command()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run nginx-probe");
        // Drained on their own threads so a large output cannot block the child on a pipe.
        let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                if let Some(mut p) = pipe {
                    let _ = p.read_to_end(&mut buf);
                }
                String::from_utf8_lossy(&buf).into_owned()
            })
        };
        let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
        let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
        let Some(status) = wait_bounded(&mut child) else {
            panic!(
                "nginx-probe {:?} still ran after {RUN_PROBE_TIMEOUT_S} s: {}",
                self.args,
                stderr.join().unwrap_or_default()
            );
        };
        ProbeOutput {
            status,
            stdout: stdout.join().expect("stdout reader"),
            stderr: stderr.join().expect("stderr reader"),
        }
    }
}

/// Path of the nginx-probe binary under test: `$NGINX_PROBE_BIN`, else the workspace's
/// `target/release/nginx-probe` (what `cargo xtask test` builds).
pub fn probe_binary() -> PathBuf {
    if let Ok(p) = std::env::var("NGINX_PROBE_BIN") {
        return PathBuf::from(p);
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/release/nginx-probe");
    assert!(
        p.exists(),
        "{} not found: run the tests with `cargo xtask test`",
        p.display()
    );
    p
}

/// A running nginx-probe, started with [`ProbeRun::start`] and ready (its banner seen).
/// Dropping it kills it.
pub struct ProbeRun {
    child: Option<Child>,
    /// Everything the probe writes to stdout, read from the start (a reader that waited
    /// until the end would fill the pipe and block the probe's reports).
    stdout: Option<std::thread::JoinHandle<String>>,
    stderr_lines: mpsc::Receiver<String>,
    /// stderr lines read so far.
    pub stderr: Vec<String>,
}

/// What a finished probe run produced.
#[derive(Debug)]
pub struct ProbeOutput {
    /// Exit status.
    pub status: ExitStatus,
    /// Everything written to stdout.
    pub stdout: String,
    /// Everything written to stderr.
    pub stderr: String,
}

impl ProbeOutput {
    /// The last stdout line parsed as JSON (the summary with `--json`).
    pub fn summary_json(&self) -> serde_json::Value {
        let line = self
            .stdout
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_else(|| panic!("no JSON on stdout; stderr: {}", self.stderr));
        serde_json::from_str(line).unwrap_or_else(|e| panic!("bad JSON ({e}): {line}"))
    }
}

impl Probe {
    /// Runs it to its end as [`Probe::run`] does, under strace, and asserts that it
    /// loaded no BPF program (no `bpf(BPF_PROG_LOAD, ...)` of its own or of a child):
    /// so nothing was attached, whatever other probes or tracers on this machine
    /// load meanwhile.
    pub fn run_loading_nothing(mut self) -> ProbeOutput {
        let dir = tempfile::tempdir().expect("temp dir");
        let trace = dir.path().join("bpf.strace");
        self.bpf_trace = Some(trace.clone());
        let args = self.args.clone();
        let out = self.run();
        let calls = std::fs::read_to_string(&trace)
            .unwrap_or_else(|e| panic!("strace wrote no {} ({e}): {out:?}", trace.display()));
        let loads: Vec<&str> = calls
            .lines()
            .filter(|l| l.contains("BPF_PROG_LOAD"))
            .collect();
        assert!(
            loads.is_empty(),
            "nginx-probe {args:?} loaded BPF programs: {loads:?}"
        );
        out
    }
}

impl ProbeRun {
    /// `nginx-probe <args>`, started as [`Probe::start`] does.
    pub fn start(args: &[&str]) -> ProbeRun {
        Probe::with_args(args).start()
    }

    /// Like [`ProbeRun::start`] with an explicit nginx-probe binary (for `cargo xtask`,
    /// which builds it).
    pub fn start_with_binary(binary: &Path, args: &[&str]) -> ProbeRun {
        Probe::with_args(args).binary(binary).start()
    }

    fn spawn_cmd(mut cmd: Command) -> ProbeRun {
        let mut child = cmd
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nginx-probe");
        let stdout = child.stdout.take().map(|mut o| {
            std::thread::spawn(move || {
                let mut s = String::new();
                o.read_to_string(&mut s).expect("read stdout");
                s
            })
        });
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut run = ProbeRun {
            child: Some(child),
            stdout,
            stderr_lines: rx,
            stderr: Vec::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match run.stderr_lines.recv_timeout(Duration::from_millis(100)) {
                Ok(line) => {
                    let ready = line.contains("Hit Ctrl-C to end.");
                    run.stderr.push(line);
                    if ready {
                        return run;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let out = run.wait();
                    panic!("nginx-probe exited before attaching: {out:?}");
                }
            }
            assert!(
                Instant::now() < deadline,
                "nginx-probe did not attach in 30 s: {:?}",
                run.stderr
            );
        }
    }

    /// Reads stderr until a line containing `needle` (returned), for up to `timeout`;
    /// panics with the lines seen otherwise. Lines read are kept in `stderr`.
    pub fn wait_for_stderr(&mut self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        if let Some(l) = self.stderr.iter().find(|l| l.contains(needle)) {
            return l.clone();
        }
        while Instant::now() < deadline {
            match self.stderr_lines.recv_timeout(Duration::from_millis(100)) {
                Ok(line) => {
                    self.stderr.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        panic!(
            "no stderr line with {needle:?} in {timeout:?}: {:?}",
            self.stderr
        );
    }

    /// Every stderr line the probe wrote so far (read without waiting), joined by
    /// newlines; kept in `stderr` too.
    pub fn stderr_so_far(&mut self) -> String {
        while let Ok(line) = self.stderr_lines.try_recv() {
            self.stderr.push(line);
        }
        self.stderr.join("\n")
    }

    /// Whether the probe is still running.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// The probe's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Sends `sig` (SIGINT for Ctrl-C, SIGTERM) and waits for the probe to exit.
    pub fn stop_with(mut self, sig: Signal) -> ProbeOutput {
        let _ = kill(Pid::from_raw(self.pid() as i32), sig);
        self.wait()
    }

    /// Stops the probe with SIGINT (Ctrl-C) and asserts that it exited 0.
    pub fn stop(self) -> ProbeOutput {
        let out = self.stop_with(Signal::SIGINT);
        assert!(out.status.success(), "{out:?}");
        out
    }

    /// Waits for the probe to exit (for runs with `--duration`, or after a signal), for
    /// up to [`RUN_PROBE_TIMEOUT_S`]: a probe still running then is killed and fails the
    /// test instead of hanging the suite.
    pub fn wait(&mut self) -> ProbeOutput {
        let mut child = self.child.take().expect("running");
        let Some(status) = wait_bounded(&mut child) else {
            while let Ok(line) = self.stderr_lines.try_recv() {
                self.stderr.push(line);
            }
            panic!(
                "nginx-probe still ran {RUN_PROBE_TIMEOUT_S} s later (killed): {:?}",
                self.stderr
            );
        };
        let stdout = self
            .stdout
            .take()
            .map(|r| r.join().expect("stdout reader"))
            .unwrap_or_default();
        while let Ok(line) = self.stderr_lines.recv_timeout(Duration::from_secs(2)) {
            self.stderr.push(line);
        }
        ProbeOutput {
            status,
            stdout,
            stderr: self.stderr.join("\n"),
        }
    }
}

impl Drop for ProbeRun {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Waits up to [`RUN_PROBE_TIMEOUT_S`] for `child` to exit; past that, kills it and
/// returns None.
fn wait_bounded(child: &mut Child) -> Option<ExitStatus> {
    let deadline = Instant::now() + Duration::from_secs(RUN_PROBE_TIMEOUT_S);
    loop {
        if let Some(status) = child.try_wait().expect("wait nginx-probe") {
            return Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Makes `cmd` start with soft and hard `RLIMIT_NOFILE` `nofile` (as `ulimit -n`).
pub fn set_nofile(cmd: &mut Command, nofile: (u64, u64)) {
    let (soft, hard) = nofile;
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, soft, hard)
                .map_err(std::io::Error::from)
        });
    }
}

/// Longest a run to its end ([`Probe::run`]) or a wait for a probe to exit
/// ([`ProbeRun::wait`]) may take before it is killed and the test fails, s.
pub const RUN_PROBE_TIMEOUT_S: u64 = 60;

/// Runs `nginx-probe <args>` to its end, as [`Probe::run`] does.
pub fn run_probe(args: &[&str]) -> ProbeOutput {
    Probe::with_args(args).run()
}
