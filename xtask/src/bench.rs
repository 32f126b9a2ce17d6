//! `cargo xtask bench soak`: nginx-probe's memory and exactness over a long run with
//! reloads. Prints measurements and ratios; fails when a total is not exact or RSS grows
//! more than 10% after the first minute.

use std::{
    io::{BufRead, BufReader},
    path::Path,
    process::{Child, Command, ExitStatus, Stdio},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _, Result};
use nginx_probe_tests::{one_request_per_connection_until, Nginx, NginxConfig};

use crate::command::read_in_background;

/// VmRSS of a process, KiB (`/proc/<pid>/status`).
pub(crate) fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Soak: `minutes` of one-request connections from `clients` threads (every connection
/// counted), a reload every `60 / reloads_per_minute` s, the probe's RSS sampled every
/// 10 s.
pub fn soak(probe: &Path, minutes: u64, reloads_per_minute: u64, clients: usize) -> Result<()> {
    let ng = Nginx::start(&NginxConfig {
        access_log: Some("off".into()),
        ..NginxConfig::default()
    });
    let master = ng.master_pid();
    println!(
        "soak: nginx master {master}, {minutes} min, {clients} client threads (Connection: close), {reloads_per_minute} reloads/min"
    );
    let traced = Traced::start(probe, master)?;
    let attached_at = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let addr = ng.addr();
    let handles: Vec<_> = (0..clients)
        .map(|_| {
            let stop = stop.clone();
            thread::spawn(move || one_request_per_connection_until(addr, &stop))
        })
        .collect();
    let (samples, reloads) = reload_and_sample(
        master,
        traced.child.id(),
        attached_at,
        Duration::from_secs(minutes * 60),
        reloads_per_minute,
    )?;
    stop.store(true, Ordering::Relaxed);
    let connections: usize = handles.into_iter().map(|h| h.join().expect("client")).sum();
    thread::sleep(Duration::from_millis(700));
    let (status, summary, stderr_lines) = traced.stop()?;
    let accepts = nginx_probe_tests::total_accepts(&summary);
    let workers_seen = summary["workers"].as_array().map(|a| a.len()).unwrap_or(0) as u64
        + summary["exited_merged"]["workers"].as_u64().unwrap_or(0);
    let rss = RssGrowth::of(&samples);
    println!(
        "\nsoak results ({minutes} min, {reloads} reloads, {workers_seen} worker processes seen)"
    );
    println!("  client connections completed : {connections}");
    println!(
        "  accepts counted by the probe  : {accepts}  (ratio {:.6})",
        accepts as f64 / connections.max(1) as f64
    );
    println!(
        "  probe RSS at 60 s / at end    : {} KiB / {} KiB  (growth {:+.1}%)",
        rss.at_60,
        rss.last,
        rss.growth * 100.0
    );
    println!("  drops                         : {}", summary["drops"]);
    println!("  probe exit                    : {}", status);
    let other: Vec<&String> = stderr_lines
        .iter()
        .filter(|l| !l.contains("worker") && !l.contains("Tracing"))
        .collect();
    if !other.is_empty() {
        println!("  probe stderr (besides worker events): {other:?}");
    }
    if !status.success() {
        bail!("nginx-probe failed: {}", stderr_lines.join("\n"));
    }
    if accepts != connections as u64 {
        bail!("accept total is not exact: {accepts} counted, {connections} made");
    }
    if rss.growth > 0.10 {
        bail!(
            "probe RSS grew {:.1}% after the first minute",
            rss.growth * 100.0
        );
    }
    Ok(())
}

/// nginx-probe `--json --interval 10` on a master, its stdout and stderr read as they
/// come (as a real consumer would).
struct Traced {
    child: Child,
    stdout: thread::JoinHandle<String>,
    stderr: thread::JoinHandle<Vec<String>>,
}

impl Traced {
    /// Starts nginx-probe on `master` and waits (30 s at most) until it attached.
    fn start(probe: &Path, master: u32) -> Result<Traced> {
        let mut child = Command::new(probe)
            .args(["--pid", &master.to_string(), "--json", "--interval", "10"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("start nginx-probe")?;
        // Read stdout as it comes, as a real consumer would.
        let stdout = read_in_background(child.stdout.take().expect("stdout"));
        let stderr_pipe = child.stderr.take().expect("stderr");
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let stderr = thread::spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(stderr_pipe).lines().map_while(Result::ok) {
                if line.contains("Hit Ctrl-C to end.") {
                    let _ = ready_tx.send(());
                }
                lines.push(line);
            }
            lines
        });
        ready_rx
            .recv_timeout(Duration::from_secs(30))
            .context("nginx-probe did not attach")?;
        Ok(Traced {
            child,
            stdout,
            stderr,
        })
    }

    /// SIGINT, then its exit status, its summary (the last stdout line) and its stderr
    /// lines.
    fn stop(mut self) -> Result<(ExitStatus, serde_json::Value, Vec<String>)> {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        )?;
        let status = self.child.wait()?;
        let stderr_lines = self.stderr.join().expect("stderr reader");
        let stdout = self.stdout.join().expect("stdout reader");
        let summary: serde_json::Value = serde_json::from_str(
            stdout
                .lines()
                .last()
                .context("no summary from nginx-probe")?,
        )?;
        Ok((status, summary, stderr_lines))
    }
}

/// Until `total` after `attached_at`: SIGHUP to `master` every `60 /
/// reloads_per_minute` s, the probe's RSS sampled every 10 s. Returns the samples (s
/// since attach, KiB) and the reloads sent.
fn reload_and_sample(
    master: u32,
    probe_pid: u32,
    attached_at: Instant,
    total: Duration,
    reloads_per_minute: u64,
) -> Result<(Vec<(f64, u64)>, u64)> {
    let reload_every = Duration::from_secs(60 / reloads_per_minute.max(1));
    let mut next_reload = reload_every;
    let mut next_sample = Duration::ZERO;
    let mut samples: Vec<(f64, u64)> = Vec::new();
    let mut reloads = 0;
    while attached_at.elapsed() < total {
        let t = attached_at.elapsed();
        if t >= next_sample {
            if let Some(kib) = rss_kib(probe_pid) {
                samples.push((t.as_secs_f64(), kib));
                println!("soak: t={:>5.0}s probe RSS {kib} KiB", t.as_secs_f64());
            }
            next_sample += Duration::from_secs(10);
        }
        if t >= next_reload {
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(master as i32),
                nix::sys::signal::Signal::SIGHUP,
            )?;
            reloads += 1;
            next_reload += reload_every;
        }
        thread::sleep(Duration::from_millis(100));
    }
    Ok((samples, reloads))
}

/// The probe's RSS after the first minute against its last sample.
struct RssGrowth {
    /// KiB at the first sample from 60 s on (the first sample when none is), 0 without.
    at_60: u64,
    /// KiB at the last sample, 0 without.
    last: u64,
    /// (last - at_60) / at_60; 0 when at_60 is 0.
    growth: f64,
}

impl RssGrowth {
    fn of(samples: &[(f64, u64)]) -> RssGrowth {
        let at_60 = samples
            .iter()
            .find(|(t, _)| *t >= 60.0)
            .or(samples.first())
            .map(|s| s.1)
            .unwrap_or(0);
        let last = samples.last().map(|s| s.1).unwrap_or(0);
        let growth = if at_60 > 0 {
            (last as f64 - at_60 as f64) / at_60 as f64
        } else {
            0.0
        };
        RssGrowth {
            at_60,
            last,
            growth,
        }
    }
}
