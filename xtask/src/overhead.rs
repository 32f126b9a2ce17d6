//! `cargo xtask bench overhead`: what tracing costs nginx, side by side with what users
//! run today. Interleaved rounds of: no tracer, nginx-probe (default probes),
//! nginx-probe --uprobes, a bpftrace script with the same tracepoints and in-kernel
//! histograms, bpftrace with empty programs on nginx-probe's tracepoints (the floor of
//! ns per program run on the machine), and `strace -c -f`. Prints medians and ratios against the no-tracer runs
//! of the same invocation; never fails on speed.

use std::{
    io::{BufRead, BufReader},
    path::Path,
    process::{Child, Command, Stdio},
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _, Result};
use nginx_probe_tests::{prog_ids_held_by, Nginx, NginxConfig};

use crate::load::{cpu_seconds, wrk};

#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    None,
    Probe,
    ProbeAll,
    ProbeUprobes,
    Bpftrace,
    /// bpftrace with empty actions on nginx-probe's default tracepoints: the cost of
    /// running any program there (the floor for ns per program run on this machine).
    EmptyBpf,
    Strace,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::None => "no tracer",
            Mode::Probe => "nginx-probe",
            Mode::ProbeAll => "nginx-probe --syscalls all",
            Mode::ProbeUprobes => "nginx-probe --uprobes",
            Mode::Bpftrace => "bpftrace (same tracepoints)",
            Mode::EmptyBpf => "empty programs (floor)",
            Mode::Strace => "strace -c -f",
        }
    }
}

/// One measured run.
#[derive(Default, Clone, Debug)]
struct Run {
    rps: f64,
    p99_ms: f64,
    /// Tracer's own CPU over the load, % of one core.
    cpu_pct: Option<f64>,
    rss_mib: Option<f64>,
    /// From spawn to "attached", ms.
    attach_ms: Option<f64>,
    /// Mean ns per BPF program run (kernel.bpf_stats_enabled).
    ns_per_event: Option<f64>,
    events: Option<u64>,
    /// nginx workers' CPU time (user + system, /proc/<pid>/stat) per request, us: what
    /// tracing adds to each request, less sensitive to scheduling noise than req/s.
    worker_us_per_req: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn rss_mib(pid: u32) -> Option<f64> {
    crate::bench::rss_kib(pid).map(|kib| kib as f64 / 1024.0)
}

/// Spawns `cmd` and waits until a stderr line contains `ready` (or `timeout`).
fn spawn_until(mut cmd: Command, ready: &str, timeout: Duration) -> Result<(Child, f64)> {
    let start = Instant::now();
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("spawn {cmd:?}"))?;
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    let ready = ready.to_string();
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains(&ready) {
                let _ = tx.send(());
            }
        }
    });
    if rx.recv_timeout(timeout).is_err() {
        let _ = child.kill();
        bail!("{cmd:?} did not get ready");
    }
    Ok((child, start.elapsed().as_secs_f64() * 1000.0))
}

fn bpftrace_script(workers: &[u32]) -> String {
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
    let enters: Vec<String> = calls
        .iter()
        .map(|c| format!("tracepoint:syscalls:sys_enter_{c}"))
        .collect();
    let exits: Vec<String> = calls
        .iter()
        .map(|c| format!("tracepoint:syscalls:sys_exit_{c}"))
        .collect();
    format!(
        "{} /{filter}/ {{ @start[tid] = nsecs; }}\n{} /@start[tid]/ {{ @lat[probe] = hist(nsecs - @start[tid]); @n[probe, pid] = count(); delete(@start[tid]); }}\n",
        enters.join(",\n"),
        exits.join(",\n")
    )
}

/// bpftrace with empty actions on the tracepoints nginx-probe attaches by default.
fn empty_script() -> String {
    let calls = [
        "accept4",
        "accept",
        "epoll_wait",
        "epoll_pwait",
        "epoll_pwait2",
        "sendfile64",
        "write",
        "writev",
        "pwrite64",
    ];
    let mut probes: Vec<String> = calls
        .iter()
        .flat_map(|c| {
            [
                format!("tracepoint:syscalls:sys_enter_{c}"),
                format!("tracepoint:syscalls:sys_exit_{c}"),
            ]
        })
        .collect();
    probes.push("tracepoint:syscalls:sys_enter_close".into());
    probes.push("tracepoint:sched:sched_process_fork".into());
    format!("{} {{ }}\n", probes.join(",\n"))
}

/// Starts bpftrace with `script` and waits until its probes are attached; returns it
/// and the ms that took.
fn spawn_bpftrace(script: &str) -> Result<(Child, f64)> {
    let start = Instant::now();
    let mut c = Command::new("bpftrace")
        .args(["-e", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("spawn bpftrace")?;
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
    rx.recv_timeout(Duration::from_secs(60))
        .context("bpftrace did not attach")?;
    // "Attaching" is printed before the attach completes.
    thread::sleep(Duration::from_millis(1500));
    Ok((c, start.elapsed().as_secs_f64() * 1000.0))
}

fn stop(mut child: Child) {
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

/// run_time_ns and run_cnt summed over program ids, from bpftool.
fn prog_stats(ids: &[u64]) -> (u64, u64) {
    let Ok(out) = Command::new("bpftool")
        .args(["prog", "show", "--json"])
        .output()
    else {
        return (0, 0);
    };
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let mut ns = 0;
    let mut cnt = 0;
    for p in v.as_array().into_iter().flatten() {
        if ids.contains(&p["id"].as_u64().unwrap_or(0)) {
            ns += p["run_time_ns"].as_u64().unwrap_or(0);
            cnt += p["run_cnt"].as_u64().unwrap_or(0);
        }
    }
    (ns, cnt)
}

fn one_run(mode: Mode, probe: &Path, ng: &Nginx, secs: u64) -> Result<Run> {
    let url = ng.url();
    let master = ng.master_pid().to_string();
    let workers = ng.worker_pids();
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(ng.prefix.join("logs/access.log"));
    let (child, attach_ms) = match mode {
        Mode::None => (None, None),
        Mode::Probe | Mode::ProbeAll | Mode::ProbeUprobes => {
            let mut cmd = Command::new(probe);
            cmd.args(["--pid", &master, "--summary-only"]);
            if mode == Mode::ProbeUprobes {
                cmd.arg("--uprobes");
            }
            if mode == Mode::ProbeAll {
                cmd.args(["--syscalls", "all"]);
            }
            let (c, ms) = spawn_until(cmd, "Hit Ctrl-C to end.", Duration::from_secs(30))?;
            (Some(c), Some(ms))
        }
        Mode::Bpftrace | Mode::EmptyBpf => {
            let script = if mode == Mode::Bpftrace {
                bpftrace_script(&workers)
            } else {
                empty_script()
            };
            let (c, ms) = spawn_bpftrace(&script)?;
            (Some(c), Some(ms))
        }
        Mode::Strace => {
            let mut cmd = Command::new("strace");
            cmd.args(["-c", "-f"]);
            for w in &workers {
                cmd.args(["-p", &w.to_string()]);
            }
            let (c, ms) = spawn_until(cmd, "attached", Duration::from_secs(10))?;
            thread::sleep(Duration::from_millis(300));
            (Some(c), Some(ms))
        }
    };
    let pid = child.as_ref().map(|c| c.id());
    // Every BPF tracer's programs, for ns per program run.
    let ids = match (mode, pid) {
        (Mode::Strace, _) | (_, None) => Vec::new(),
        (_, Some(p)) => prog_ids_held_by(p),
    };
    let before = prog_stats(&ids);
    let cpu0 = pid.and_then(cpu_seconds);
    let workers_cpu = || -> f64 { workers.iter().filter_map(|&w| cpu_seconds(w)).sum() };
    let w0 = workers_cpu();
    let t0 = Instant::now();
    let client = wrk(&url, 50, secs)?;
    let (rps, p99_ms) = (client.rps, client.p99_ms);
    let wall = t0.elapsed().as_secs_f64();
    let w1 = workers_cpu();
    let cpu1 = pid.and_then(cpu_seconds);
    let rss = pid.and_then(rss_mib);
    let after = prog_stats(&ids);
    if let Some(c) = child {
        stop(c);
    }
    let events = after.1.saturating_sub(before.1);
    Ok(Run {
        rps,
        p99_ms,
        cpu_pct: match (cpu0, cpu1) {
            (Some(a), Some(b)) => Some((b - a) / wall * 100.0),
            _ => None,
        },
        rss_mib: rss,
        attach_ms,
        ns_per_event: (events > 0).then(|| after.0.saturating_sub(before.0) as f64 / events as f64),
        events: (!ids.is_empty()).then_some(events),
        worker_us_per_req: (w1 - w0) * 1e6 / (rps * secs as f64),
    })
}

/// Interleaved overhead benchmark; see the module docs.
pub fn overhead(probe: &Path, rounds: usize, secs: u64) -> Result<()> {
    let ng = Nginx::start(&NginxConfig::default());
    let modes = [
        Mode::None,
        Mode::Probe,
        Mode::ProbeAll,
        Mode::ProbeUprobes,
        Mode::Bpftrace,
        Mode::EmptyBpf,
        Mode::Strace,
    ];
    let stats_before = std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").ok();
    let _ = std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "1");
    println!(
        "overhead: nginx master {} (2 workers, 30-byte file, access log on), wrk -t1 -c50 -d{secs}s, {rounds} interleaved rounds",
        ng.master_pid()
    );
    // Warm-up, not measured.
    let _ = wrk(&ng.url(), 50, 2)?;
    let mut results: Vec<(Mode, Run)> = Vec::new();
    for round in 1..=rounds {
        for &mode in &modes {
            let run = one_run(mode, probe, &ng, secs)?;
            println!(
                "  round {round} {:<28} {:>9.0} req/s  p99 {:>7.2} ms  workers {:>6.2} us CPU/request",
                mode.name(),
                run.rps,
                run.p99_ms,
                run.worker_us_per_req
            );
            results.push((mode, run));
        }
    }
    if let Some(v) = stats_before {
        let _ = std::fs::write("/proc/sys/kernel/bpf_stats_enabled", v.trim());
    }
    let of = |m: Mode, f: &dyn Fn(&Run) -> Option<f64>| -> Option<f64> {
        let v: Vec<f64> = results
            .iter()
            .filter(|(mm, _)| *mm == m)
            .filter_map(|(_, r)| f(r))
            .collect();
        (!v.is_empty()).then(|| median(v))
    };
    let base_rps = of(Mode::None, &|r| Some(r.rps)).unwrap_or(f64::NAN);
    let base_p99 = of(Mode::None, &|r| Some(r.p99_ms)).unwrap_or(f64::NAN);
    let base_cpu = of(Mode::None, &|r| Some(r.worker_us_per_req)).unwrap_or(f64::NAN);
    println!(
        "\n{:<28} {:>10} {:>8} {:>9} {:>13} {:>8} {:>8} {:>10} {:>9}",
        "tracer (median of rounds)",
        "req/s",
        "ratio",
        "p99 ratio",
        "us CPU/req",
        "CPU %",
        "RSS MiB",
        "attach ms",
        "ns/event"
    );
    let opt = |v: Option<f64>, prec: usize| {
        v.map(|x| format!("{x:.prec$}"))
            .unwrap_or_else(|| "-".into())
    };
    for &mode in &modes {
        let rps = of(mode, &|r| Some(r.rps)).unwrap_or(f64::NAN);
        let p99 = of(mode, &|r| Some(r.p99_ms)).unwrap_or(f64::NAN);
        let cpu_req = of(mode, &|r| Some(r.worker_us_per_req)).unwrap_or(f64::NAN);
        println!(
            "{:<28} {:>10.0} {:>8.3} {:>9.2} {:>6.2} x{:<5.2} {:>8} {:>8} {:>10} {:>9}",
            mode.name(),
            rps,
            rps / base_rps,
            p99 / base_p99,
            cpu_req,
            cpu_req / base_cpu,
            opt(of(mode, &|r| r.cpu_pct), 2),
            opt(of(mode, &|r| r.rss_mib), 1),
            opt(of(mode, &|r| r.attach_ms), 0),
            opt(of(mode, &|r| r.ns_per_event), 0),
        );
    }
    let loss = |m: Mode| 1.0 - of(m, &|r| Some(r.rps)).unwrap_or(f64::NAN) / base_rps;
    let probe_loss = loss(Mode::Probe);
    let bpftrace_loss = loss(Mode::Bpftrace);
    let probe_cpu = of(Mode::Probe, &|r| Some(r.worker_us_per_req)).unwrap_or(f64::NAN);
    let bpftrace_cpu = of(Mode::Bpftrace, &|r| Some(r.worker_us_per_req)).unwrap_or(f64::NAN);
    println!("\ntargets (default probes):");
    println!(
        "  nginx worker CPU per request +{:.1}% (bpftrace: +{:.1}%)",
        (probe_cpu / base_cpu - 1.0) * 100.0,
        (bpftrace_cpu / base_cpu - 1.0) * 100.0
    );
    println!(
        "  throughput loss {:.1}% (target <= 2%)",
        probe_loss * 100.0
    );
    println!(
        "  loss vs bpftrace's {:.1}%: {:.2} of it (target <= 0.33)",
        bpftrace_loss * 100.0,
        probe_loss / bpftrace_loss
    );
    let rps = of(Mode::Probe, &|r| Some(r.rps)).unwrap_or(f64::NAN);
    if let Some(cpu) = of(Mode::Probe, &|r| r.cpu_pct) {
        println!(
            "  own CPU {cpu:.2}% of one core at {rps:.0} req/s = {:.2}% per 20k req/s (target <= 2%)",
            cpu * 20_000.0 / rps
        );
    }
    if let Some(rss) = of(Mode::Probe, &|r| r.rss_mib) {
        println!("  RSS {rss:.1} MiB (target <= 30)");
    }
    if let Some(ms) = of(Mode::Probe, &|r| r.attach_ms) {
        println!("  start to attached {ms:.0} ms (target <= 300)");
    }
    if let Some(ns) = of(Mode::Probe, &|r| r.ns_per_event) {
        println!("  {ns:.0} ns per program run (target <= 100)");
        if let Some(floor) = of(Mode::EmptyBpf, &|r| r.ns_per_event) {
            println!(
                "    an empty program on the same tracepoints costs {floor:.0} ns here (bpf_stats timing included): nginx-probe's own work is {:.0} ns per run",
                ns - floor
            );
        }
        if let Some(bt) = of(Mode::Bpftrace, &|r| r.ns_per_event) {
            println!("    bpftrace's script: {bt:.0} ns per run");
        }
    }
    if let Some(ev) = of(Mode::Probe, &|r| r.events.map(|e| e as f64)) {
        println!(
            "  {:.1} program runs per request ({ev:.0} runs in {secs} s)",
            ev / (rps * secs as f64)
        );
    }
    Ok(())
}
