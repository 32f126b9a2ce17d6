//! `cargo xtask demo`: nginx-probe on a running nginx master (`--pid`, its real
//! traffic), or on a throwaway nginx under `wrk -t1 -c50`, cleaned up also on Ctrl-C.

use std::{
    path::Path,
    process::{Child, Command, ExitStatus, Stdio},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use anyhow::{bail, Context as _, Result};
use nginx_probe_tests::{Nginx, NginxConfig};

use crate::{build_probe, command::read_in_background, is_root, setup::setup};

/// Sets up, builds, and traces `pid` or a throwaway nginx for `duration` seconds.
pub fn demo(pid: Option<u32>, duration: u32) -> Result<()> {
    setup()?;
    let probe = build_probe()?;
    if !is_root() {
        bail!("the demo loads eBPF programs and must run as root: run it with sudo");
    }
    // Ctrl-C reaches the probe (same process group) which prints its summary; we only
    // note it and clean up after it.
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let flag = interrupted.clone();
        ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst)).context("signal handler")?;
    }
    match pid {
        Some(pid) => on_running_master(&probe, pid, duration, &interrupted),
        None => on_throwaway_nginx(&probe, duration, &interrupted),
    }
}

/// nginx-probe on the running master `pid`; its exit code passed through.
fn on_running_master(
    probe: &Path,
    pid: u32,
    duration: u32,
    interrupted: &AtomicBool,
) -> Result<()> {
    println!(
        "demo: tracing nginx master {pid} for {duration} s (no load is generated: the numbers are its real traffic)"
    );
    let mut child = Command::new(probe)
        .args([
            "--pid",
            &pid.to_string(),
            "--duration",
            &duration.to_string(),
            "--hist",
            "accept4",
        ])
        .spawn()?;
    let status = wait_or_interrupt(&mut child, interrupted)?;
    // Pass nginx-probe's exit code through (2 = bad --pid).
    if !status.success() {
        std::process::exit(status.code().unwrap_or(1));
    }
    Ok(())
}

/// A throwaway nginx under wrk, traced by nginx-probe one second longer than the load;
/// wrk's own view printed after nginx-probe's.
fn on_throwaway_nginx(probe: &Path, duration: u32, interrupted: &AtomicBool) -> Result<()> {
    let nginx = Nginx::start(&NginxConfig::default());
    println!(
        "demo: throwaway nginx master {} (workers {:?}) on {} with prefix {}",
        nginx.master_pid(),
        nginx.worker_pids(),
        nginx.url(),
        nginx.prefix.display()
    );
    let mut probe_child = Command::new(probe)
        .args([
            "--pid",
            &nginx.master_pid().to_string(),
            "--duration",
            &(duration + 1).to_string(),
            "--interval",
            "5",
            "--hist",
            "accept4",
        ])
        .spawn()
        .context("start nginx-probe")?;
    // Let it attach before the load starts.
    std::thread::sleep(Duration::from_millis(800));
    let wrk_out = wrk_until_done(&nginx.url(), duration, interrupted)?;
    let status = wait_or_interrupt(&mut probe_child, interrupted)?;
    let wrk_out = wrk_out.join().unwrap_or_default();
    println!("\ndemo: wrk's own view of the same load:");
    for line in wrk_out.lines() {
        println!("  {line}");
    }
    drop(nginx);
    if interrupted.load(Ordering::SeqCst) {
        println!("demo: interrupted; throwaway nginx stopped and removed");
        return Ok(());
    }
    if !status.success() {
        bail!("nginx-probe failed: {status}");
    }
    Ok(())
}

/// Runs `wrk -t1 -c50 -d<duration>s url` to its end; the thread holds its stdout.
fn wrk_until_done(
    url: &str,
    duration: u32,
    interrupted: &AtomicBool,
) -> Result<std::thread::JoinHandle<String>> {
    println!("demo: wrk -t1 -c50 -d{duration}s {url}");
    let mut wrk = Command::new("wrk")
        .args(["-t1", "-c50", &format!("-d{duration}s"), url])
        .stdout(Stdio::piped())
        .spawn()
        .context("start wrk (run `cargo xtask setup`)")?;
    let wrk_reader = read_in_background(wrk.stdout.take().expect("wrk's stdout"));
    let _ = wait_or_interrupt(&mut wrk, interrupted)?;
    Ok(wrk_reader)
}

/// Waits for `child`; once `interrupted` is set (Ctrl-C or SIGTERM to xtask), sends it
/// SIGINT (nginx-probe prints its summary, wrk its totals) and keeps waiting.
fn wait_or_interrupt(child: &mut Child, interrupted: &AtomicBool) -> Result<ExitStatus> {
    let mut signalled = false;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if interrupted.load(Ordering::SeqCst) && !signalled {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGINT,
            );
            signalled = true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
