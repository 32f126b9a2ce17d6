//! Starting and stopping the tracers of the overhead benchmark: nginx-probe (through
//! [`spawn_until`]), bpftrace scripts and strace; bpftool's per-program run statistics.

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _, Result};

use crate::command::capture;

/// Spawns `cmd` with its stdout to `stdout` and waits until a stderr line contains
/// `ready` (or `timeout`); returns the child, the ms that took, and the ready line.
pub fn spawn_until(
    mut cmd: Command,
    stdout: Stdio,
    ready: &str,
    timeout: Duration,
) -> Result<(Child, f64, String)> {
    let start = Instant::now();
    let mut child = cmd
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("spawn {cmd:?}"))?;
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    let ready = ready.to_string();
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains(&ready) {
                let _ = tx.send(line);
            }
        }
    });
    match rx.recv_timeout(timeout) {
        Ok(line) => Ok((child, start.elapsed().as_secs_f64() * 1000.0, line)),
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{cmd:?} did not get ready in {timeout:?}")
        }
    }
}

/// A bpftrace script timing the per-request syscalls of `workers` into in-kernel
/// log2 histograms, with a count per probe and worker (what users run today).
pub fn bpftrace_hist_script(workers: &[u32]) -> String {
    let filter: Vec<String> = workers.iter().map(|p| format!("pid == {p}")).collect();
    let filter = filter.join(" || ");
    let calls = [
        "accept4",
        "accept",
        "epoll_wait",
        "epoll_pwait",
        "sendfile64",
        "write",
        "writev",
        "pwrite64",
        "openat",
        "close",
        "recvfrom",
        "read",
        "newfstatat",
    ];
    let list = |kind: &str| -> String {
        calls
            .iter()
            .map(|c| format!("tracepoint:syscalls:sys_{kind}_{c}"))
            .collect::<Vec<_>>()
            .join(",\n")
    };
    format!(
        "{} /{filter}/ {{ @start[tid] = nsecs; }}\n{} /@start[tid]/ {{ @lat[probe] = hist(nsecs - @start[tid]); @n[probe, pid] = count(); delete(@start[tid]); }}\n",
        list("enter"),
        list("exit")
    )
}

/// A bpftrace script with one empty program per probe (`category:name` or a full
/// bpftrace probe).
pub fn empty_script(probes: &[String]) -> String {
    probes
        .iter()
        .map(|p| {
            if p.starts_with("tracepoint:") {
                format!("{p} {{ }}\n")
            } else {
                format!("tracepoint:{p} {{ }}\n")
            }
        })
        .collect()
}

/// Starts bpftrace with `script` and waits until its probes are attached; returns it
/// and the ms that took.
pub fn spawn_bpftrace(script: &str) -> Result<(Child, f64)> {
    let start = Instant::now();
    let mut c = Command::new("bpftrace")
        .args(["-e", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("spawn bpftrace (install it with `cargo xtask setup`)")?;
    // bpftrace prints "Attaching N probes..." on stdout.
    let stdout = c.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with("Attaching") {
                let _ = tx.send(());
            }
        }
    });
    if rx.recv_timeout(Duration::from_secs(60)).is_err() {
        let _ = c.kill();
        let _ = c.wait();
        bail!("bpftrace did not attach");
    }
    // "Attaching" is printed before the attach completes.
    thread::sleep(Duration::from_millis(1500));
    Ok((c, start.elapsed().as_secs_f64() * 1000.0))
}

/// SIGINT to `child`, then SIGKILL if it has not exited within 10 s.
pub fn stop(mut child: Child) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// run_time_ns and run_cnt of program ids, from bpftool, by kind.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProgStats {
    /// Perf-event tracepoint programs: ns, runs.
    pub tracepoint: (u64, u64),
    /// Raw tracepoint programs: ns, runs.
    pub raw_tracepoint: (u64, u64),
    /// uprobe programs (the kprobe type; this project attaches no kprobe): ns, runs.
    pub uprobe: (u64, u64),
}

/// [`ProgStats`] of program ids, from bpftool (zero without it, and zero runs unless
/// `kernel.bpf_stats_enabled` is 1).
pub fn prog_stats_by_kind(ids: &[u64]) -> ProgStats {
    let mut s = ProgStats::default();
    for p in programs(ids) {
        let slot = match p["type"].as_str() {
            Some("kprobe") => &mut s.uprobe,
            Some("tracepoint") => &mut s.tracepoint,
            Some("raw_tracepoint") => &mut s.raw_tracepoint,
            _ => continue,
        };
        slot.0 += p["run_time_ns"].as_u64().unwrap_or(0);
        slot.1 += p["run_cnt"].as_u64().unwrap_or(0);
    }
    s
}

/// run_time_ns and run_cnt summed over program ids, from bpftool.
pub fn prog_stats(ids: &[u64]) -> (u64, u64) {
    let mut ns = 0;
    let mut cnt = 0;
    for p in programs(ids) {
        ns += p["run_time_ns"].as_u64().unwrap_or(0);
        cnt += p["run_cnt"].as_u64().unwrap_or(0);
    }
    (ns, cnt)
}

/// bpftool's JSON of the loaded programs among `ids` (none without bpftool).
fn programs(ids: &[u64]) -> Vec<serde_json::Value> {
    let Ok(out) = capture(Command::new("bpftool").args(["prog", "show", "--json"])) else {
        return Vec::new();
    };
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_default();
    let serde_json::Value::Array(progs) = v else {
        return Vec::new();
    };
    progs
        .into_iter()
        .filter(|p| ids.contains(&p["id"].as_u64().unwrap_or(0)))
        .collect()
}
