//! One measured run of the overhead benchmark: a mode's tracer started on the front
//! nginx, wrk's load, the counters read on both sides of it, the tracer stopped, and
//! the run's figures ([`Run`]).

use std::{
    path::Path,
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _, Result};
use nginx_probe_tests::{prog_ids_held_by, Nginx};

use super::{
    bed::{upstream_accepts, Bed, CLOSE},
    tracers::{
        bpftrace_hist_script, empty_script, prog_stats, prog_stats_by_kind, spawn_bpftrace,
        spawn_until, stop, ProgStats,
    },
    Floor, Hits, ModeDef, Run, Tracer, CONNECTIONS,
};
use crate::load::{cpu_seconds, cpus_busy_seconds, wrk_with, ClientRun};

/// Runs `mode` once under `secs` of wrk on `bed`; fails when the tracer died, the
/// workers changed or wrk's load broke (a run never fails for being slow).
pub(super) fn one_run(
    mode: &ModeDef,
    probe: &Path,
    bed: &Bed,
    floor: &Floor,
    secs: u64,
    bpf_stats: bool,
) -> Result<Run> {
    let ng = &bed.front;
    let workers = ng.worker_pids();
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(ng.prefix.join("logs/access.log"));
    // nginx-probe's JSON summary: the access-log lines it read.
    let summary = ng.prefix.join("probe-summary.json");
    let _ = std::fs::remove_file(&summary);
    let (child, attach_ms) = start_tracer(mode, probe, ng, &workers, floor, &summary)?;
    let pid = child.as_ref().map(|c| c.id());
    let ids = match (mode.tracer, pid, bpf_stats) {
        (Tracer::Strace, _, _) | (_, None, _) | (_, _, false) => Vec::new(),
        (_, Some(p), true) => prog_ids_held_by(p),
    };
    let sides = Sides {
        ids: &ids,
        tracer: pid,
        bed,
        floor,
        workers: &workers,
    };
    let before = sides.before();
    let t0 = Instant::now();
    let client = wrk_with(&bed.url, CONNECTIONS, secs, bed.wrk_extra);
    let wall = t0.elapsed().as_secs_f64();
    let (after, rss_mib) = sides.after();
    end_tracer(child, mode, ng, &workers)?;
    let client = checked_client(client, mode, bed)?;
    let log_lines_read = match mode.tracer {
        Tracer::Probe(_) => summary_log_lines(&summary),
        _ => None,
    };
    Ok(figures(&Measured {
        before,
        after,
        client,
        wall,
        rss_mib,
        attach_ms,
        counted: bpf_stats && !ids.is_empty(),
        log_lines_written: count_lines(&ng.prefix.join("logs/access.log")),
        log_lines_read,
        close: bed.wrk_extra == CLOSE,
        worker_cpus: floor.worker_cpus.len(),
    }))
}

/// Starts `mode`'s tracer on `ng` and its `workers` (nginx-probe writes its summary to `summary`);
/// returns it and the ms it took to attach, None for no tracer.
fn start_tracer(
    mode: &ModeDef,
    probe: &Path,
    ng: &Nginx,
    workers: &[u32],
    floor: &Floor,
    summary: &Path,
) -> Result<(Option<Child>, Option<f64>)> {
    let (c, ms) = match mode.tracer {
        Tracer::None => return Ok((None, None)),
        Tracer::Probe(args) => {
            let mut cmd = Command::new(probe);
            cmd.args([
                "--pid",
                &ng.master_pid().to_string(),
                "--summary-only",
                "--json",
            ])
            .args(args);
            let out = std::fs::File::create(summary).context("summary file")?;
            let (c, ms, banner) = spawn_until(
                cmd,
                out.into(),
                "Hit Ctrl-C to end.",
                Duration::from_secs(30),
            )?;
            if args.is_empty() {
                check_banner(&banner, floor.planned_syscall_tps);
            }
            (c, ms)
        }
        Tracer::EmptyOnProbeTracepoints => spawn_bpftrace(&empty_script(&floor.tracepoints))?,
        Tracer::Empty(probes) => {
            let probes: Vec<String> = probes.iter().map(|p| p.to_string()).collect();
            spawn_bpftrace(&empty_script(&probes))?
        }
        Tracer::BpftraceHist => spawn_bpftrace(&bpftrace_hist_script(workers))?,
        Tracer::Strace => {
            let mut cmd = Command::new("strace");
            cmd.args(["-c", "-f"]);
            for w in workers {
                cmd.args(["-p", &w.to_string()]);
            }
            let (c, ms, _) = spawn_until(cmd, Stdio::null(), "attached", Duration::from_secs(10))?;
            thread::sleep(Duration::from_millis(300));
            (c, ms)
        }
    };
    Ok((Some(c), Some(ms)))
}

/// What the counters are read on, on both sides of the load.
struct Sides<'a> {
    /// The tracer's BPF program ids (none unless counted).
    ids: &'a [u64],
    /// The tracer's pid.
    tracer: Option<u32>,
    bed: &'a Bed,
    floor: &'a Floor,
    /// The front's workers.
    workers: &'a [u32],
}

/// The counters read on one side of the load.
struct Counters {
    /// run_time_ns and run_cnt of all the tracer's programs.
    progs: (u64, u64),
    /// The same by kind of program.
    kinds: ProgStats,
    /// The tracer's CPU time, s.
    tracer_cpu: Option<f64>,
    /// The upstream's stub_status accepts (proxy workload).
    upstream: Option<u64>,
    /// Busy time of the workers' CPUs, s (`/proc/stat`).
    busy: Option<f64>,
    /// The workers' CPU time, s.
    workers_cpu: f64,
}

impl Sides<'_> {
    fn workers_cpu(&self) -> f64 {
        self.workers.iter().filter_map(|&w| cpu_seconds(w)).sum()
    }

    /// Read just before the load, the workers' CPU last ([`Sides::after`] reads them in
    /// the reverse order, so that the workers' figures bracket wrk most tightly).
    fn before(&self) -> Counters {
        let progs = prog_stats(self.ids);
        let kinds = prog_stats_by_kind(self.ids);
        let tracer_cpu = self.tracer.and_then(cpu_seconds);
        let upstream = upstream_accepts(self.bed);
        let busy = cpus_busy_seconds(&self.floor.worker_cpus);
        Counters {
            progs,
            kinds,
            tracer_cpu,
            upstream,
            busy,
            workers_cpu: self.workers_cpu(),
        }
    }

    /// Read just after the load, with the tracer's VmRSS, MiB.
    fn after(&self) -> (Counters, Option<f64>) {
        let workers_cpu = self.workers_cpu();
        let busy = cpus_busy_seconds(&self.floor.worker_cpus);
        let upstream = upstream_accepts(self.bed);
        let tracer_cpu = self.tracer.and_then(cpu_seconds);
        let rss = self.tracer.and_then(rss_mib);
        let c = Counters {
            progs: prog_stats(self.ids),
            kinds: prog_stats_by_kind(self.ids),
            tracer_cpu,
            upstream,
            busy,
            workers_cpu,
        };
        (c, rss)
    }
}

/// Stops the tracer. A tracer that died during the load, or a worker that was
/// replaced, makes the run meaningless: say so rather than average it in.
fn end_tracer(child: Option<Child>, mode: &ModeDef, ng: &Nginx, workers: &[u32]) -> Result<()> {
    let tracer_exit = match child {
        Some(mut c) => {
            let exited = c.try_wait().ok().flatten();
            stop(c);
            exited
        }
        None => None,
    };
    if let Some(status) = tracer_exit {
        bail!(
            "{}: the tracer exited during the load ({status})",
            mode.name
        );
    }
    if ng.worker_pids() != workers {
        bail!("{}: nginx's workers changed during the load", mode.name);
    }
    Ok(())
}

/// wrk's report, unless it completed nothing or more than 10% errors (a broken
/// workload, not a slow one).
fn checked_client(client: Result<ClientRun>, mode: &ModeDef, bed: &Bed) -> Result<ClientRun> {
    let client = client?;
    if client.requests == 0 || client.errors * 10 > client.requests {
        bail!(
            "{}: wrk completed {} requests with {} errors against {}: the workload is broken, not slow",
            mode.name,
            client.requests,
            client.errors,
            bed.url
        );
    }
    Ok(client)
}

/// Everything a run's figures are made of.
struct Measured {
    before: Counters,
    after: Counters,
    client: ClientRun,
    /// Seconds of load, wall clock.
    wall: f64,
    rss_mib: Option<f64>,
    attach_ms: Option<f64>,
    /// Whether the tracer's program runs were counted.
    counted: bool,
    log_lines_written: Option<u64>,
    log_lines_read: Option<u64>,
    /// wrk sent `Connection: close`: one request per connection.
    close: bool,
    /// How many CPUs the workers ran on.
    worker_cpus: usize,
}

/// The run's figures, from the counters on both sides of the load.
fn figures(m: &Measured) -> Run {
    let (b, a, requests) = (&m.before, &m.after, m.client.requests as f64);
    let per_req = |x: (u64, u64), y: (u64, u64)| {
        let n = y.1.saturating_sub(x.1);
        Hits {
            per_req: n as f64 / requests,
            ns_per_hit: (n > 0).then(|| y.0.saturating_sub(x.0) as f64 / n as f64),
        }
    };
    let runs = a.progs.1.saturating_sub(b.progs.1);
    let workers_s = a.workers_cpu - b.workers_cpu;
    Run {
        log_lines_written: m.log_lines_written,
        log_lines_read: m.log_lines_read,
        tracer_cpu_s: b.tracer_cpu.zip(a.tracer_cpu).map(|(x, y)| y - x),
        tracepoint_hits: m
            .counted
            .then(|| per_req(b.kinds.tracepoint, a.kinds.tracepoint)),
        raw_tracepoint_hits: m
            .counted
            .then(|| per_req(b.kinds.raw_tracepoint, a.kinds.raw_tracepoint)),
        uprobe_hits: m.counted.then(|| per_req(b.kinds.uprobe, a.kinds.uprobe)),
        requests_per_connection: if m.close {
            1.0
        } else {
            requests / CONNECTIONS as f64
        },
        rps: m.client.rps,
        p99_ms: m.client.p99_ms,
        errors: m.client.errors,
        cpu_pct: match (b.tracer_cpu, a.tracer_cpu) {
            (Some(x), Some(y)) => Some((y - x) / m.wall * 100.0),
            _ => None,
        },
        rss_mib: m.rss_mib,
        attach_ms: m.attach_ms,
        ns_per_event: (runs > 0).then(|| a.progs.0.saturating_sub(b.progs.0) as f64 / runs as f64),
        worker_us_per_req: workers_s * 1e6 / requests,
        others_pct: match (b.busy, a.busy) {
            (Some(x), Some(y)) => {
                Some(((y - x - workers_s) / (m.wall * m.worker_cpus as f64) * 100.0).max(0.0))
            }
            _ => None,
        },
        // The second read's own connection is in `a.upstream`.
        upstream_conns_per_req: match (b.upstream, a.upstream) {
            (Some(x), Some(y)) => Some(y.saturating_sub(x + 1) as f64 / requests),
            _ => None,
        },
    }
}

/// Newlines in `path`, read in 1 MiB blocks (the file is the bench's own access log).
fn count_lines(path: &Path) -> Option<u64> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Some(n),
            Ok(k) => n += buf[..k].iter().filter(|&&b| b == b'\n').count() as u64,
            Err(_) => return None,
        }
    }
}

/// `access_log.lines` of the last JSON document nginx-probe printed (its summary).
fn summary_log_lines(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let last = text.lines().rev().find(|l| !l.trim().is_empty())?;
    let v: serde_json::Value = serde_json::from_str(last).ok()?;
    v["access_log"]["lines"].as_u64()
}

fn rss_mib(pid: u32) -> Option<f64> {
    crate::bench::rss_kib(pid).map(|kib| kib as f64 / 1024.0)
}

/// The "N syscall tracepoints" count of nginx-probe's banner.
fn banner_tracepoints(banner: &str) -> Option<usize> {
    banner
        .split(" syscall tracepoints")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|s| s.parse::<usize>().ok())
}

/// Warns when nginx-probe's banner disagrees with the floor's plan: the floor would
/// then not be nginx-probe's tracepoints.
fn check_banner(banner: &str, planned: usize) {
    if let Some(n) = banner_tracepoints(banner).filter(|&n| n != planned) {
        eprintln!(
            "overhead: WARNING nginx-probe attached {n} syscall tracepoints, the floor's plan has {planned}: the floor is not exactly nginx-probe's tracepoints"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_banner_count_is_read() {
        assert_eq!(
            banner_tracepoints("Tracing nginx master 1 `nginx`: 2 workers [2 3], 33 syscall tracepoints attached all the time, following forks. Hit Ctrl-C to end."),
            Some(33)
        );
        assert_eq!(banner_tracepoints("Hit Ctrl-C to end."), None);
    }
}
