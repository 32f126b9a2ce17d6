//! `cargo xtask bench overhead`: what tracing costs nginx's workers, per workload.
//!
//! Workloads ([`Workload`]): the 30-byte static file over plain HTTP (the worst case
//! per request), HTTPS with a 4 KB page, and a reverse proxy to a second nginx with
//! upstream keepalive; all with client keepalive (`wrk -t1 -c50`). For each, interleaved
//! rounds run every mode of [`MODES`] once (no tracer, nginx-probe's modes, empty BPF
//! programs as floors). The main figure is the nginx workers' CPU time per request
//! (`/proc/<pid>/stat` utime + stime over wrk's completed requests) and its ratio to the
//! no-tracer run of the same round, with a 95% bootstrap interval over the rounds.
//! Prints tables and, with `--write-doc`, a markdown page; never fails on speed.

mod bed;
mod doc;
mod hitcost;
mod run;
pub mod stats;
mod tracers;

use std::{
    path::{Path, PathBuf},
    time::Instant,
};

use anyhow::{bail, Context as _, Result};
use bed::start_bed;
#[cfg(test)]
use bed::stub_accepts;
pub use bed::Workload;
use nginx_probe_common::{Entry, CORE_SYSCALLS, FD_CREATING, SYSCALLS};
use nginx_probe_tests::Nginx;

use crate::load::{pin_plan, wrk_with, Pinning};
use run::one_run;
#[cfg(test)]
use tracers::empty_script;

/// Concurrent keepalive connections of wrk (`-c`), one thread.
pub const CONNECTIONS: u32 = 50;

/// `keepalive` of the proxy workload's `upstream` block: idle upstream connections each
/// worker keeps. Above the requests a worker can have in flight (all of wrk's
/// connections), so that upstream connections are reused: with `keepalive 16`, 20 to 50%
/// of requests opened a new upstream connection, varying from run to run (measured with
/// the upstream's stub_status accepts), which made the workload itself noisy.
pub const UPSTREAM_KEEPALIVE: u32 = 64;

/// Size of the page of the HTTPS and proxy workloads, bytes.
pub const PAGE_BYTES: usize = 4096;

/// How a mode's tracer is started.
#[derive(Clone, Copy, Debug)]
pub enum Tracer {
    /// Nothing attached: the baseline of each round.
    None,
    /// nginx-probe `--pid <master> --summary-only` plus these arguments.
    Probe(&'static [&'static str]),
    /// bpftrace with empty programs on exactly the tracepoints nginx-probe attaches by
    /// default ([`default_tracepoints`]).
    EmptyOnProbeTracepoints,
    /// bpftrace with empty programs on these probes.
    Empty(&'static [&'static str]),
    /// bpftrace timing the per-request syscalls into in-kernel histograms.
    BpftraceHist,
    /// `strace -c -f` on the workers.
    Strace,
}

/// One row of the benchmark.
#[derive(Clone, Copy, Debug)]
pub struct ModeDef {
    /// Name in the tables.
    pub name: &'static str,
    /// What runs.
    pub tracer: Tracer,
    /// Only with `--extra-modes`, and only on the static workload.
    pub extra: bool,
}

/// The modes, in table order. The first must be the baseline. To measure another
/// nginx-probe mode add one line, e.g.
/// `ModeDef { name: "nginx-probe --detail full", tracer: Tracer::Probe(&["--detail", "full"]), extra: false },`.
pub const MODES: &[ModeDef] = &[
    ModeDef {
        name: "no tracer",
        tracer: Tracer::None,
        extra: false,
    },
    ModeDef {
        name: "nginx-probe (default)",
        tracer: Tracer::Probe(&[]),
        extra: false,
    },
    ModeDef {
        name: "nginx-probe --detail sampled",
        tracer: Tracer::Probe(&["--detail", "sampled"]),
        extra: false,
    },
    ModeDef {
        name: "nginx-probe --detail sampled --detail-every 10s",
        tracer: Tracer::Probe(&["--detail", "sampled", "--detail-every", "10s"]),
        extra: true,
    },
    ModeDef {
        name: "nginx-probe --detail sampled, one window at attach (continuous layer)",
        tracer: Tracer::Probe(&[
            "--detail",
            "sampled",
            "--detail-window",
            "100ms",
            "--detail-every",
            "1h",
        ]),
        extra: true,
    },
    ModeDef {
        name: "nginx-probe --no-lifecycle, one window at attach (continuous layer without the lifecycle tracepoints)",
        tracer: Tracer::Probe(&[
            "--detail",
            "sampled",
            "--detail-window",
            "100ms",
            "--no-lifecycle",
            "--detail-every",
            "1h",
        ]),
        extra: true,
    },
    ModeDef {
        name: "nginx-probe one window at attach, lifecycle from perf-event tracepoints (fallback)",
        tracer: Tracer::Probe(&[
            "--lifecycle-from-perf-events",
            "--detail",
            "sampled",
            "--detail-every",
            "1h",
            "--detail-window",
            "100ms",
        ]),
        extra: true,
    },
    ModeDef {
        name: "nginx-probe --uprobes",
        tracer: Tracer::Probe(&["--uprobes"]),
        extra: false,
    },
    ModeDef {
        name: "empty programs, nginx-probe's tracepoints (floor)",
        tracer: Tracer::EmptyOnProbeTracepoints,
        extra: false,
    },
    ModeDef {
        name: "one empty program on sys_exit_accept4",
        tracer: Tracer::Empty(&["tracepoint:syscalls:sys_exit_accept4"]),
        extra: false,
    },
    ModeDef {
        name: "nginx-probe --syscalls all",
        tracer: Tracer::Probe(&["--syscalls", "all"]),
        extra: true,
    },
    ModeDef {
        name: "nginx-probe --writes-from-proc",
        tracer: Tracer::Probe(&["--writes-from-proc"]),
        extra: true,
    },
    ModeDef {
        name: "bpftrace (same syscalls, histograms)",
        tracer: Tracer::BpftraceHist,
        extra: true,
    },
    ModeDef {
        name: "strace -c -f",
        tracer: Tracer::Strace,
        extra: true,
    },
];

/// Options of one invocation.
#[derive(Clone, Debug)]
pub struct Options {
    /// Workloads to run.
    pub workload: Workload,
    /// Interleaved rounds per workload.
    pub rounds: usize,
    /// Seconds of wrk load per run.
    pub secs: u64,
    /// Name filters (`--modes`): empty runs the default set.
    pub modes: Vec<String>,
    /// Pin wrk and the workers to separate CPUs (when there are at least 2).
    pub pin: bool,
    /// Add the `extra` modes on the static workload.
    pub extra_modes: bool,
    /// Count probe hits and ns per program run: one extra run per BPF mode with
    /// `kernel.bpf_stats_enabled` on, after the rounds (its own timing adds to a mode's
    /// cost, so the measured rounds run without it).
    pub bpf_stats: bool,
    /// Where to write the markdown page, as given (relative: under the workspace root).
    pub write_doc: Option<PathBuf>,
}

impl Options {
    /// The command line that reproduces this invocation.
    pub fn command(&self) -> String {
        let mut c = format!(
            "cargo xtask bench overhead --workload {} --rounds {} --secs {}",
            self.workload.name(),
            self.rounds,
            self.secs
        );
        if !self.pin {
            c.push_str(" --no-pin");
        }
        if !self.modes.is_empty() {
            c.push_str(&format!(" --modes {}", self.modes.join(",")));
        }
        if self.extra_modes {
            c.push_str(" --extra-modes");
        }
        if !self.bpf_stats {
            c.push_str(" --no-bpf-stats");
        }
        if let Some(p) = &self.write_doc {
            c.push_str(&format!(" --write-doc {}", p.display()));
        }
        c
    }
}

/// Probe hits of one kind over a run, counted by the kernel (`run_cnt` of the tracer's
/// programs, `kernel.bpf_stats_enabled`).
#[derive(Default, Clone, Copy, Debug)]
pub struct Hits {
    /// Program runs per request wrk completed.
    pub per_req: f64,
    /// The programs' own time per run, ns (`run_time_ns`; the uprobe trap and the
    /// tracepoint's dispatch are not in it). None without runs.
    pub ns_per_hit: Option<f64>,
}

/// One measured run.
#[derive(Default, Clone, Debug)]
pub struct Run {
    /// Lines in the front's access log after the run (truncated before it): what nginx
    /// wrote.
    pub log_lines_written: Option<u64>,
    /// Access-log lines nginx-probe read (`access_log.lines` of its JSON summary).
    pub log_lines_read: Option<u64>,
    /// Tracer's own CPU time over the load, seconds (`/proc/<pid>/stat`).
    pub tracer_cpu_s: Option<f64>,
    /// Tracepoint program runs (None unless the tracer is nginx-probe or bpftrace and
    /// `--bpf-stats` is on).
    pub tracepoint_hits: Option<Hits>,
    /// Raw tracepoint program runs, likewise.
    pub raw_tracepoint_hits: Option<Hits>,
    /// uprobe program runs, likewise.
    pub uprobe_hits: Option<Hits>,
    /// Requests per connection of the client: 1 with `Connection: close`, else wrk's
    /// requests over its connections (`CONNECTIONS`, kept open through the run).
    pub requests_per_connection: f64,
    /// wrk's requests per second.
    pub rps: f64,
    /// wrk's 99th percentile latency, ms.
    pub p99_ms: f64,
    /// wrk's socket errors and non-2xx/3xx responses.
    pub errors: u64,
    /// Tracer's own CPU over the load, % of one core (`/proc/<pid>/stat`).
    pub cpu_pct: Option<f64>,
    /// Tracer's VmRSS at the end of the load, MiB.
    pub rss_mib: Option<f64>,
    /// From spawn to attached, ms.
    pub attach_ms: Option<f64>,
    /// Mean ns per BPF program run (`kernel.bpf_stats_enabled`, with `--bpf-stats`).
    pub ns_per_event: Option<f64>,
    /// nginx workers' CPU time (user + system, `/proc/<pid>/stat`) per completed
    /// request, us.
    pub worker_us_per_req: f64,
    /// Proxy workload: connections the upstream accepted (its `stub_status` accepts)
    /// per request wrk completed: the share of requests that opened a new upstream
    /// connection.
    pub upstream_conns_per_req: Option<f64>,
    /// CPU time of everything but the workers on the workers' CPUs (all CPUs when not
    /// pinned), % of those CPUs' time over the run (`/proc/stat` user + nice + system +
    /// steal minus the workers' CPU time): how much the machine competed with the
    /// measured workers.
    pub others_pct: Option<f64>,
}

/// Every run of one workload: `runs[mode][round]`, modes as in `modes`.
pub struct WorkloadResult {
    /// The workload.
    pub workload: Workload,
    /// The modes run, in table order (the baseline first).
    pub modes: Vec<ModeDef>,
    /// Per mode, per round: the measured rounds, run with `kernel.bpf_stats_enabled`
    /// as the machine had it (off by default), so that its timing is not in the ratios.
    pub runs: Vec<Vec<Run>>,
    /// Per mode, the one extra run with `kernel.bpf_stats_enabled` on that counts its
    /// probe hits and ns per program run (None: no BPF tracer, or hits not counted).
    /// Never in the ratios.
    pub counting: Vec<Option<Run>>,
}

/// The tracepoints nginx-probe attaches by default, as `category:name` (duplicates
/// kept: two programs on one tracepoint are two runs per hit), derived from the
/// shared syscall table as nginx-probe's loader plans them: `sched_process_fork`,
/// `sys_enter_close`, `sys_exit_openat` (access-log opens), the enter/exit pair of each
/// timed core syscall, the exit of each counted-only one, and the exit of every
/// fd-creating syscall outside the core set. The second value is how many of them are
/// syscall tracepoints of the core plan (nginx-probe's banner prints that number).
pub fn default_tracepoints() -> (Vec<String>, usize) {
    let mut plan: Vec<String> = Vec::new();
    let core = || CORE_SYSCALLS.iter().map(|&i| &SYSCALLS[i as usize]);
    for d in core().filter(|d| d.entry == Entry::Always) {
        plan.push(format!("syscalls:sys_enter_{}", d.tracepoint));
    }
    for d in core() {
        plan.push(format!("syscalls:sys_exit_{}", d.tracepoint));
    }
    for &i in FD_CREATING.iter() {
        if !CORE_SYSCALLS.contains(&i) {
            plan.push(format!(
                "syscalls:sys_exit_{}",
                SYSCALLS[i as usize].tracepoint
            ));
        }
    }
    let planned = plan.len();
    let mut all = vec![
        "sched:sched_process_fork".to_string(),
        "syscalls:sys_enter_close".to_string(),
        "syscalls:sys_exit_openat".to_string(),
    ];
    all.extend(plan);
    // As the loader does: skip what this kernel lacks (e.g. epoll_pwait2 before 5.11).
    let tracefs = Path::new("/sys/kernel/tracing/events");
    let present: Vec<String> = all
        .into_iter()
        .filter(|tp| {
            let (cat, name) = tp.split_once(':').expect("category:name");
            !tracefs.exists() || tracefs.join(cat).join(name).exists()
        })
        .collect();
    (present, planned)
}

/// What the floor attaches, and the cross-check against nginx-probe's banner.
struct Floor {
    tracepoints: Vec<String>,
    planned_syscall_tps: usize,
    /// The CPUs the workers run on (all when not pinned).
    worker_cpus: Vec<usize>,
}

impl Floor {
    /// nginx-probe's default tracepoints ([`default_tracepoints`]); the workers on every
    /// CPU, or when `pinned` on every CPU but the last (the load generator's).
    fn plan(pinned: bool) -> Floor {
        let (tracepoints, planned_syscall_tps) = default_tracepoints();
        let ncpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        Floor {
            tracepoints,
            planned_syscall_tps,
            worker_cpus: (0..if pinned { ncpus - 1 } else { ncpus }).collect(),
        }
    }
}

/// Which CPUs the workers may run on (`Cpus_allowed_list` of `/proc/<pid>/status`).
fn allowed_cpus(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_else(|| "?".into())
}

fn run_workload(
    w: Workload,
    probe: &Path,
    opts: &Options,
    pin: Option<&Pinning>,
    floor: &Floor,
) -> Result<WorkloadResult> {
    let modes = select_modes(&opts.modes, opts.extra_modes && w == Workload::Static);
    let bed = start_bed(w, pin);
    let on_cpus = |ng: &Nginx| -> String {
        ng.worker_pids()
            .iter()
            .map(|&p| format!("{p} on CPUs {}", allowed_cpus(p)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut cpus = on_cpus(&bed.front);
    if let Some(up) = &bed.upstream {
        cpus.push_str(&format!("; upstream worker {}", on_cpus(up)));
    }
    println!(
        "\n== {} ({}): {}\n   workers: {}; wrk -d{}s on {}, {} interleaved rounds of {} modes",
        w.name(),
        bed.url,
        w.describe(),
        cpus,
        opts.secs,
        pin.map(|p| format!("CPU {}", p.client_cpus))
            .unwrap_or_else(|| "any CPU".into()),
        opts.rounds,
        modes.len()
    );
    // Warm-up, not measured (TLS sessions, upstream keepalive connections, caches).
    let _ = wrk_with(&bed.url, CONNECTIONS, 2, bed.wrk_extra)?;
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); modes.len()];
    for round in 0..opts.rounds {
        // Rotate the order each round so that no mode always follows the same one.
        for k in 0..modes.len() {
            let i = (k + round) % modes.len();
            let mode = &modes[i];
            let run = one_run(mode, probe, &bed, floor, opts.secs, false)
                .with_context(|| format!("{} workload, mode {}", w.name(), mode.name))?;
            println!(
                "  round {} {:<50} {:>8.0} req/s  p99 {:>7.2} ms  workers {:>6.2} us CPU/request{}{}{}",
                round + 1,
                mode.name,
                run.rps,
                run.p99_ms,
                run.worker_us_per_req,
                run.others_pct
                    .map(|c| format!("  others {c:>3.0}%"))
                    .unwrap_or_default(),
                run.upstream_conns_per_req
                    .map(|c| format!("  {c:.3} new upstream connections/request"))
                    .unwrap_or_default(),
                if run.errors > 0 {
                    format!("  ({} wrk errors)", run.errors)
                } else {
                    String::new()
                }
            );
            runs[i].push(run);
        }
    }
    let counting = if opts.bpf_stats {
        counting_runs(w, &modes, probe, &bed, floor, opts.secs)?
    } else {
        vec![None; modes.len()]
    };
    Ok(WorkloadResult {
        workload: w,
        modes,
        runs,
        counting,
    })
}

/// One run per BPF mode of `modes` with `kernel.bpf_stats_enabled` on, after the
/// measured rounds: the kernel's run counts and run times of the tracer's programs
/// (probe hits per request, ns per hit). Its own timing (two clock reads per program
/// run) would add to the mode's CPU, so these runs are kept out of the ratios.
fn counting_runs(
    w: Workload,
    modes: &[ModeDef],
    probe: &Path,
    bed: &bed::Bed,
    floor: &Floor,
    secs: u64,
) -> Result<Vec<Option<Run>>> {
    with_bpf_stats(true, || {
        modes
            .iter()
            .map(|mode| {
                if matches!(mode.tracer, Tracer::None | Tracer::Strace) {
                    return Ok(None);
                }
                let run = one_run(mode, probe, bed, floor, secs, true).with_context(|| {
                    format!("{} workload, counting run of {}", w.name(), mode.name)
                })?;
                println!(
                    "  counting run (kernel.bpf_stats_enabled on, not in the ratios) {:<50} {:>6.2} us CPU/request",
                    mode.name, run.worker_us_per_req
                );
                Ok(Some(run))
            })
            .collect()
    })
}

/// nginx-probe's default detail period (`--detail-every`), seconds: a sampled mode's
/// run must hold whole periods, or the windows cover more (or less) of the measured
/// time than they do in a long run. Checked against nginx-probe's own constant.
pub const DETAIL_PERIOD_S: u64 = 20;

/// The modes to run: the baseline, then those whose name contains one of `filters`
/// (extra modes included), or without filters the default set plus the extra modes
/// when `extra`.
pub fn select_modes(filters: &[String], extra: bool) -> Vec<ModeDef> {
    MODES
        .iter()
        .enumerate()
        .filter(|(i, m)| {
            *i == 0
                || if filters.is_empty() {
                    !m.extra || extra
                } else {
                    filters.iter().any(|f| {
                        // A filter that is a mode's whole name selects that mode only.
                        let exact = MODES.iter().any(|x| x.name == f.as_str());
                        m.name == f.as_str() || (!exact && m.name.contains(f.as_str()))
                    })
                }
        })
        .map(|(_, m)| *m)
        .collect()
}

/// Why `secs` does not suit the sampled modes among `modes`: each run must hold
/// whole detail periods.
pub fn check_secs(modes: &[ModeDef], secs: u64) -> Result<()> {
    for m in modes {
        let Tracer::Probe(args) = m.tracer else {
            continue;
        };
        if !args.contains(&"sampled") {
            continue;
        }
        let period = args
            .iter()
            .position(|a| *a == "--detail-every")
            .and_then(|i| args.get(i + 1))
            .map(|p| match p.strip_suffix('h') {
                Some(h) => h.parse::<u64>().map(|h| h * 3600),
                None => p.trim_end_matches('s').parse::<u64>(),
            })
            .transpose()?
            .unwrap_or(DETAIL_PERIOD_S);
        // An hour's period: its only window is the one at attach, and the mode measures
        // what stays attached between windows.
        if period >= 3600 {
            continue;
        }
        if !secs.is_multiple_of(period) {
            bail!(
                "--secs {secs}: `{}` runs must last a multiple of its detail period ({period} s), or its windows cover {:.0}% of the run instead of {:.0}%",
                m.name,
                100.0 * secs.div_ceil(period) as f64 / secs as f64,
                100.0 / period as f64
            );
        }
    }
    Ok(())
}

/// Load average (1, 5, 15 min) from `/proc/loadavg`.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Runs the benchmark; see the module docs.
pub fn overhead(probe: &Path, opts: &Options, doc_path: Option<&Path>) -> Result<()> {
    if opts.rounds == 0 || opts.secs == 0 {
        bail!("--rounds and --secs must be at least 1");
    }
    let chosen = select_modes(&opts.modes, opts.extra_modes);
    if chosen.len() < 2 {
        bail!("--modes {}: no mode matches", opts.modes.join(","));
    }
    check_secs(&chosen, opts.secs)?;
    let machine = doc::Machine::read();
    let load_before = loadavg();
    let pin = pin_plan(opts.pin);
    pin_clients(pin.as_ref(), opts.pin);
    let floor = Floor::plan(pin.is_some());
    println!(
        "overhead: the floor attaches {} empty programs: {}",
        floor.tracepoints.len(),
        floor.tracepoints.join(" ")
    );
    if bpf_stats_on() {
        println!(
            "overhead: kernel.bpf_stats_enabled is already on (set outside the bench): every BPF mode's rounds carry its timing"
        );
    }
    let hit_cost = opts.bpf_stats.then(measure_hit_cost).flatten();
    let started = Instant::now();
    let results = opts
        .workload
        .expand()
        .into_iter()
        .map(|w| run_workload(w, probe, opts, pin.as_ref(), &floor))
        .collect::<Result<Vec<_>>>()?;
    let load_after = loadavg();
    for r in &results {
        print!(
            "{}",
            doc::console_table(r, opts.bpf_stats, hit_cost.as_ref())
        );
    }
    println!(
        "\nload average before {load_before}, after {load_after}; {:.0} s",
        started.elapsed().as_secs_f64()
    );
    let Some(path) = doc_path else {
        return Ok(());
    };
    let page = doc::markdown(&doc::Page {
        machine: &machine,
        command: opts.command(),
        pinning: pin.as_ref().map(|p| p.describe()),
        load_before: &load_before,
        load_after: &load_after,
        rounds: opts.rounds,
        secs: opts.secs,
        floor: &floor.tracepoints,
        results: &results,
        hit_cost,
    });
    write_doc(path, &page)
}

/// Pins the load generator per `pin`, or says why nothing is pinned (`asked`: pinning
/// was asked for, and there were fewer than 2 CPUs).
fn pin_clients(pin: Option<&Pinning>, asked: bool) {
    match pin {
        Some(p) => {
            println!("overhead: {}", p.describe());
            crate::load::pin_clients(&p.client_cpus);
        }
        None => println!(
            "overhead: not pinned ({}): wrk and the workers share the CPUs",
            if asked {
                "fewer than 2 CPUs"
            } else {
                "--no-pin"
            }
        ),
    }
}

/// `kernel.bpf_stats_enabled`: the kernel times every BPF program run (two clock reads)
/// and counts it while it is 1.
const BPF_STATS_KNOB: &str = "/proc/sys/kernel/bpf_stats_enabled";

/// Whether `kernel.bpf_stats_enabled` is on now.
fn bpf_stats_on() -> bool {
    std::fs::read_to_string(BPF_STATS_KNOB).is_ok_and(|v| v.trim() == "1")
}

/// Runs `f` with `kernel.bpf_stats_enabled` set to `on`, and restores what it was
/// after, whatever `f` returns.
fn with_bpf_stats<T>(on: bool, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let before = std::fs::read_to_string(BPF_STATS_KNOB).ok();
    let _ = std::fs::write(BPF_STATS_KNOB, if on { "1" } else { "0" });
    let out = f();
    if let Some(v) = before {
        let _ = std::fs::write(BPF_STATS_KNOB, v.trim());
    }
    out
}

/// One hit's dispatch measured alone ([`hitcost::measure`], 5 repeats); None, said
/// so, when it cannot be.
fn measure_hit_cost() -> Option<hitcost::HitCost> {
    let measured = with_bpf_stats(false, || hitcost::measure(5)).and_then(|mut c| {
        // The same empty raw tracepoint with the kernel's per-run timing on: what
        // `kernel.bpf_stats_enabled` adds to one program run.
        let with = with_bpf_stats(true, || hitcost::raw_tracepoint_ns(5))?;
        c.bpf_stats_ns = Some(with - c.raw_tracepoint_ns);
        Ok(c)
    });
    match measured {
        Ok(c) => {
            println!(
                "overhead: one hit's dispatch, measured alone: uprobe {:.0} ns, tracepoint {:.0} ns, raw tracepoint {:.0} ns; kernel.bpf_stats_enabled adds {:.0} ns per program run",
                c.uprobe_ns,
                c.tracepoint_ns,
                c.raw_tracepoint_ns,
                c.bpf_stats_ns.unwrap_or(f64::NAN)
            );
            Some(c)
        }
        Err(e) => {
            println!("overhead: one hit's dispatch not measured ({e:#})");
            None
        }
    }
}

/// Writes `page` to `path` above the hand-written part the file already has.
fn write_doc(path: &Path, page: &str) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    let old = std::fs::read_to_string(path).ok();
    let page = doc::keep_hand_written(page, old.as_deref());
    std::fs::write(path, page).with_context(|| format!("write {}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_filters_keep_the_baseline_and_match_names() {
        let f = |s: &[&str]| {
            select_modes(&s.iter().map(|x| x.to_string()).collect::<Vec<_>>(), false)
                .iter()
                .map(|m| m.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            f(&["sampled"]),
            [
                "no tracer",
                "nginx-probe --detail sampled",
                "nginx-probe --detail sampled --detail-every 10s",
                "nginx-probe --detail sampled, one window at attach (continuous layer)"
            ]
        );
        assert!(f(&[]).iter().all(|n| !n.contains("strace")));
        assert!(f(&["strace"]).contains(&"strace -c -f"));
        assert_eq!(f(&["no such mode"]), ["no tracer"]);
        // A whole name selects that mode alone.
        assert_eq!(
            f(&["nginx-probe --detail sampled", "continuous"]),
            [
                "no tracer",
                "nginx-probe --detail sampled",
                "nginx-probe --detail sampled, one window at attach (continuous layer)",
                "nginx-probe --no-lifecycle, one window at attach (continuous layer without the lifecycle tracepoints)"
            ]
        );
    }

    #[test]
    fn sampled_runs_hold_whole_periods() {
        let sampled = select_modes(&["sampled".to_string()], false);
        assert!(check_secs(&sampled, 20).is_ok());
        let e = check_secs(&sampled, 8).unwrap_err().to_string();
        assert!(e.contains("12") && e.contains("5%"), "{e}");
        assert!(check_secs(&sampled, 30).is_err());
        assert!(check_secs(&sampled, 40).is_ok());
        let every10 = select_modes(&["every 10s".to_string()], false);
        assert_eq!(every10.len(), 2);
        assert!(check_secs(&every10, 30).is_ok());
        let floor = select_modes(&["floor".to_string()], false);
        assert!(check_secs(&floor, 8).is_ok());
        let continuous = select_modes(&["continuous layer".to_string()], false);
        assert_eq!(continuous.len(), 3);
        assert!(check_secs(&continuous, 8).is_ok());
    }

    #[test]
    fn the_detail_period_is_nginx_probe_s() {
        let plan = include_str!("../../../nginx-probe/src/cli/plan.rs");
        assert!(
            plan.contains(&format!(
                "pub const DETAIL_EVERY_S: f64 = {DETAIL_PERIOD_S}.0;"
            )),
            "nginx-probe's DETAIL_EVERY_S is not {DETAIL_PERIOD_S} s"
        );
    }

    #[test]
    fn the_baseline_comes_first_and_names_are_unique() {
        assert!(matches!(MODES[0].tracer, Tracer::None));
        for (i, m) in MODES.iter().enumerate() {
            assert!(
                MODES[i + 1..].iter().all(|o| o.name != m.name),
                "{}",
                m.name
            );
        }
    }

    #[test]
    fn the_floor_follows_nginx_probe_plan() {
        let (tps, planned) = default_tracepoints();
        // 12 timed core syscalls (enter + exit), 8 counted-only exits, openat's exit
        // (fd-creating, outside the core set): nginx-probe's banner says 33.
        assert_eq!(planned, 33);
        assert!(tps.contains(&"syscalls:sys_enter_writev".to_string()));
        assert!(tps.contains(&"syscalls:sys_exit_accept4".to_string()));
        assert!(!tps.contains(&"syscalls:sys_enter_openat".to_string()));
        // openat's exit twice: the access-log-open counter and the EMFILE counter.
        let openat = tps
            .iter()
            .filter(|t| *t == "syscalls:sys_exit_openat")
            .count();
        assert!(openat == 2 || !Path::new("/sys/kernel/tracing/events").exists());
    }

    #[test]
    fn the_command_line_round_trips_the_options() {
        let o = Options {
            workload: Workload::All,
            rounds: 5,
            secs: 5,
            modes: vec!["sampled".into(), "floor".into()],
            pin: false,
            extra_modes: false,
            bpf_stats: true,
            write_doc: Some("docs/benchmarks.md".into()),
        };
        assert_eq!(
            o.command(),
            "cargo xtask bench overhead --workload all --rounds 5 --secs 5 --no-pin --modes sampled,floor --write-doc docs/benchmarks.md"
        );
        assert_eq!(Workload::All.expand().len(), 5);
    }

    #[test]
    fn stub_status_accepts_are_read() {
        let page = "Active connections: 3 \nserver accepts handled requests\n 151 151 302 \nReading: 0 Writing: 1 Waiting: 2 \n";
        assert_eq!(stub_accepts(page), Some(151));
        assert_eq!(stub_accepts("<html>404</html>"), None);
    }

    #[test]
    fn empty_scripts_have_one_block_per_probe() {
        let s = empty_script(&[
            "syscalls:sys_exit_openat".into(),
            "syscalls:sys_exit_openat".into(),
            "tracepoint:syscalls:sys_exit_accept4".into(),
        ]);
        assert_eq!(
            s,
            "tracepoint:syscalls:sys_exit_openat { }\ntracepoint:syscalls:sys_exit_openat { }\ntracepoint:syscalls:sys_exit_accept4 { }\n"
        );
    }
}
