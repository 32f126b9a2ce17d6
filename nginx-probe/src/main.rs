//! `nginx-probe`: attach to a running nginx master and report, per worker, accepts,
//! accept failures by errno, and syscall latency as in-kernel log2 histograms.
//!
//! Flow: syscall tracepoint -> per-CPU map -> snapshot -> per-interval delta -> report
//! (text or JSON). See the README for options, output and exit codes.

mod compare;
mod error;
mod html;
mod listen;
mod loader;
mod metrics;
mod model;
mod output;
mod recording;
mod report;
mod target;
mod tracefs;
mod tracker;
mod tui;
mod verdict;

use std::{
    io::Write as _,
    path::PathBuf,
    time::{Duration, Instant},
};

use clap::{builder::PossibleValuesParser, error::ErrorKind, Parser};
use log::warn;
use nginx_probe_common::{CORE_SYSCALLS, SYSCALLS};
use tokio::signal::unix::{signal, SignalKind};

use crate::{
    error::{ProbeError, EXIT_USAGE},
    loader::Probe,
    output::{Sent, Sink},
    recording::Recording,
    tracker::{Snapshot, Tracker},
};

/// Longest accepted `--interval` or `--duration`: one week, seconds.
const MAX_SECONDS: f64 = 7.0 * 86_400.0;

fn parse_seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !v.is_finite() || !(0.1..=MAX_SECONDS).contains(&v) {
        return Err(format!("must be between 0.1 and {MAX_SECONDS} seconds"));
    }
    Ok(v)
}

fn syscall_names() -> Vec<&'static str> {
    SYSCALLS.iter().map(|s| s.name).collect()
}

/// `--syscalls`: `core`, `all`, or a comma-separated list of names; returns indexes
/// into `SYSCALLS`, in table order.
fn parse_syscalls(s: &str) -> Result<SyscallSet, String> {
    match s {
        "core" => {
            return Ok(SyscallSet(
                CORE_SYSCALLS.iter().map(|&i| i as usize).collect(),
            ))
        }
        "all" => return Ok(SyscallSet((0..SYSCALLS.len()).collect())),
        _ => {}
    }
    let mut out = Vec::new();
    for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if name == "core" || name == "all" {
            out.extend(parse_syscalls(name)?.0);
            continue;
        }
        let i = SYSCALLS
            .iter()
            .position(|d| d.name == name)
            .ok_or_else(|| {
                format!(
                    "unknown syscall `{name}` (known: core, all, {})",
                    syscall_names().join(", ")
                )
            })?;
        out.push(i);
    }
    out.sort_unstable();
    out.dedup();
    if out.is_empty() {
        return Err("no syscall given".into());
    }
    out.sort_unstable();
    Ok(SyscallSet(out))
}

/// Indexes into `SYSCALLS` of the syscalls to trace.
#[derive(Clone, Debug)]
struct SyscallSet(Vec<usize>);

/// eBPF connection profiler for nginx: per-worker accepts, accept failures and syscall
/// latency, from syscall tracepoints aggregated in the kernel.
#[derive(Debug, Parser)]
#[command(
    name = "nginx-probe",
    version,
    about,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    #[command(flatten)]
    trace: TraceArgs,
}

/// Commands that read recordings instead of tracing.
#[derive(Debug, clap::Subcommand)]
enum Cmd {
    /// Print the report of a recording (`--record FILE`, or a captured `--json` stdout).
    Report {
        /// The recording.
        file: PathBuf,
        /// Print JSON (the whole-run report, one line) instead of text.
        #[arg(long)]
        json: bool,
        /// Also print every recorded interval before the summary.
        #[arg(long)]
        intervals: bool,
        /// Also print a bcc-style log2 latency histogram of this syscall, per worker.
        #[arg(long, value_name = "SYSCALL", value_parser = PossibleValuesParser::new(syscall_names()))]
        hist: Option<String>,
        /// Write the report as one self-contained HTML page to OUT instead (verdicts,
        /// accept shares, latency histograms, per-worker tables, the interval timeline).
        #[arg(long, value_name = "OUT", conflicts_with_all = ["json", "intervals", "hist"])]
        html: Option<PathBuf>,
    },
    /// Compare two recordings: each metric's change with its noise across intervals,
    /// verdicts that appeared or went away, and a sentence for a ticket.
    Compare {
        /// The recording before the change.
        before: PathBuf,
        /// The recording after the change.
        after: PathBuf,
        /// Print the comparison as one JSON document.
        #[arg(long)]
        json: bool,
    },
}

/// Options of a tracing run (no subcommand).
#[derive(Debug, clap::Args)]
struct TraceArgs {
    /// Pid of the nginx master process, as the host sees it (nginx's pid file, or
    /// `pgrep -f 'nginx: master'`).
    #[arg(long, required = true, allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..))]
    pid: Option<u32>,

    /// Record the run to FILE: a header line, one JSON line per interval (every
    /// --interval seconds, 5 by default, whatever stdout shows) and the summary; read
    /// it back with `nginx-probe report FILE` or `nginx-probe compare A B`.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,

    /// Seconds between interval reports [default: 5 for text; with --json, interval
    /// lines are printed only when this is given].
    #[arg(long, allow_negative_numbers = true, value_parser = parse_seconds)]
    interval: Option<f64>,

    /// Stop after this many seconds and print the summary (default: until Ctrl-C or
    /// SIGTERM).
    #[arg(long, allow_negative_numbers = true, value_parser = parse_seconds)]
    duration: Option<f64>,

    /// Print JSON: one document per line (intervals, then the summary).
    #[arg(long)]
    json: bool,

    /// Also print a bcc-style log2 latency histogram of this syscall, per worker.
    #[arg(long, value_name = "SYSCALL", value_parser = PossibleValuesParser::new(syscall_names()))]
    hist: Option<String>,

    /// Syscalls to trace: `core` (accept4, accept, epoll_wait/pwait/pwait2, sendfile,
    /// write, writev, pwrite64), `all` (adds openat, close, recvfrom, read, newfstatat:
    /// the full per-request mix, about twice the tracepoint hits), or a comma-separated
    /// list.
    #[arg(long, value_name = "SET", default_value = "core", value_parser = parse_syscalls)]
    syscalls: SyscallSet,

    /// Count HTTP requests exactly, with uprobes on the master's binary
    /// (`ngx_http_create_request`, `ngx_http_free_request`): adds request durations.
    /// Costs more per request than the tracepoints; without it, requests are estimated
    /// from writev calls.
    #[arg(long)]
    uprobes: bool,

    /// Print only the summary at exit (no interval reports on stdout; with --record,
    /// intervals are still recorded every --interval seconds).
    #[arg(long)]
    summary_only: bool,

    /// Print plain text interval reports even when stdout is a terminal (the default
    /// there is a live top-like view of the workers, redrawn every --interval seconds,
    /// 2 by default; `q` quits).
    #[arg(long)]
    plain: bool,

    /// Serve Prometheus metrics (cumulative since attach) at http://ADDR/metrics;
    /// `--listen` alone listens on 127.0.0.1:9752. A non-loopback address is served
    /// without authentication (a warning says so).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = metrics::DEFAULT_LISTEN, value_parser = metrics::parse_listen)]
    listen: Option<std::net::SocketAddr>,
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            e.exit()
        }
        Err(e) => {
            // clap's message is several lines; keep the one that says what is wrong.
            eprintln!(
                "nginx-probe: {} (see --help)",
                one_line_clap_error(&e.render().to_string())
            );
            std::process::exit(EXIT_USAGE);
        }
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .format(|buf, record| {
            let level = match record.level() {
                log::Level::Error => "error: ",
                log::Level::Warn => "warning: ",
                _ => "",
            };
            writeln!(buf, "nginx-probe: {level}{}", record.args())
        })
        .init();

    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("nginx-probe: cannot start the runtime: {e}");
            std::process::exit(error::EXIT_RUNTIME);
        }
    };
    let result = match cli.cmd {
        None => runtime.block_on(run(cli.trace)),
        Some(Cmd::Report {
            file,
            html: Some(out),
            ..
        }) => html::html_command(&file, &out),
        Some(Cmd::Report {
            file,
            json,
            intervals,
            hist,
            html: None,
        }) => report_command(&file, json, intervals, hist.as_deref()),
        Some(Cmd::Compare {
            before,
            after,
            json,
        }) => compare_command(&before, &after, json),
    };
    match result {
        Ok(()) => {}
        Err(e) => {
            eprintln!("nginx-probe: {e}");
            std::process::exit(e.exit_code());
        }
    }
}

/// Folds clap's multi-line error (message, indented details, usage, tip) into the
/// message and its details on one line.
fn one_line_clap_error(rendered: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for line in rendered.lines() {
        let t = line.trim();
        if t.is_empty() {
            if !parts.is_empty() {
                break;
            }
            continue;
        }
        parts.push(t.trim_start_matches("error: "));
    }
    if parts.is_empty() {
        "invalid arguments".into()
    } else {
        parts.join(" ")
    }
}

/// Interval reports waiting to be written to stdout before new ones are dropped (and
/// counted).
const OUTPUT_QUEUE: usize = 4;
/// Interval lines waiting to be written to the record file before new ones are dropped
/// (and counted): a minute of 1 s intervals on a stalled disk.
const RECORD_QUEUE: usize = 64;

/// Seconds between live view redraws when --interval is not given.
const LIVE_INTERVAL: f64 = 2.0;

/// The live view's next input; never ready without a live view.
async fn next_input(live: &mut Option<tui::LiveView>) -> tui::Input {
    match live {
        Some(v) => v.next_input().await,
        None => std::future::pending().await,
    }
}

/// Wall clock HH:MM:SS (UTC) of `unix_s` seconds since the epoch, for report headers.
fn clock(unix_s: f64) -> String {
    // "YYYY-MM-DD HH:MM:SS UTC"
    html::utc_datetime(unix_s)[11..19].to_string()
}

/// `nginx-probe report FILE`: the recorded run's report, as it was printed live.
fn report_command(
    file: &std::path::Path,
    json: bool,
    intervals: bool,
    hist: Option<&str>,
) -> Result<(), ProbeError> {
    // Without --intervals only the last interval is needed: flat memory for any length.
    let keep = if intervals {
        recording::Keep::All
    } else {
        recording::Keep::Last
    };
    let rec = Recording::load(file, keep)?;
    let (whole, note) = rec.whole_run();
    let mut out = String::new();
    let render = |r: &model::Report| {
        if json {
            serde_json::to_string(r)
                .map(|s| s + "\n")
                .unwrap_or_default()
        } else {
            report::render_text(r, hist, &clock(r.time_unix_s))
        }
    };
    if !json {
        if let Some(h) = &rec.header {
            out += &format!(
                "Recorded on {} (kernel {}, {} CPUs) from {}: {} master {} `{}`, {} workers, interval {} s, syscalls {}{}.\n",
                h.host,
                h.kernel,
                h.cpus,
                html::utc_datetime(h.started_unix_s),
                h.nginx_version.as_deref().unwrap_or("nginx (version unknown)"),
                h.master_pid,
                h.master_title,
                h.workers.len(),
                h.options.interval_s,
                h.options.syscalls.join(","),
                if h.options.uprobes { ", request uprobes" } else { "" },
            );
        }
        out += &format!(
            "{} intervals recorded{}.\n",
            rec.interval_count,
            if rec.truncated_tail {
                "; the last line was cut off mid-write and skipped"
            } else {
                ""
            }
        );
    }
    if let Some(n) = &note {
        eprintln!("nginx-probe: {n}");
    }
    if intervals {
        for r in &rec.intervals {
            out += &render(r);
        }
    }
    if !(intervals && rec.summary.is_none()) {
        out += &render(whole);
    }
    print_all(&out)
}

/// `nginx-probe compare BEFORE AFTER`.
fn compare_command(
    before: &std::path::Path,
    after: &std::path::Path,
    json: bool,
) -> Result<(), ProbeError> {
    let b = Recording::load(before, recording::Keep::All)?;
    let a = Recording::load(after, recording::Keep::All)?;
    let c = compare::compare(
        &before.display().to_string(),
        &b,
        &after.display().to_string(),
        &a,
    );
    let out = if json {
        serde_json::to_string(&c)
            .map(|s| s + "\n")
            .unwrap_or_default()
    } else {
        compare::render_text(&c)
    };
    print_all(&out)
}

/// Writes `text` to stdout; a reader that went away (`| head`) is not an error.
fn print_all(text: &str) -> Result<(), ProbeError> {
    let mut o = std::io::stdout().lock();
    match o.write_all(text.as_bytes()).and_then(|_| o.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// Opens `--record FILE` and writes its header line, so that an unwritable path or a
/// full disk is reported before anything is attached.
fn open_record(path: &std::path::Path, header: &recording::Header) -> Result<Sink, ProbeError> {
    let shown = path.display().to_string();
    let fail = |e: std::io::Error| {
        ProbeError::Usage(format!(
            "--record {shown}: cannot write it ({e}): choose a writable path with free space"
        ))
    };
    if path.is_dir() {
        return Err(ProbeError::Usage(format!(
            "--record {shown}: it is a directory: give the path of a new file in it"
        )));
    }
    // Never over an earlier recording: a reused "before" name would destroy a baseline.
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                ProbeError::Usage(format!(
                    "--record {shown}: it exists, and a recording is never overwritten: choose a new name or remove it"
                ))
            } else {
                fail(e)
            }
        })?;
    let line = serde_json::to_string(header).unwrap_or_default() + "\n";
    f.write_all(line.as_bytes())
        .and_then(|_| f.sync_data())
        .map_err(fail)?;
    Ok(Sink::spawn(Box::new(f), &shown, RECORD_QUEUE))
}

async fn run(cli: TraceArgs) -> Result<(), ProbeError> {
    let pid = cli.pid.unwrap_or(0);
    // Validate everything before touching the kernel.
    if cli.summary_only && cli.interval.is_some() && cli.record.is_none() {
        return Err(ProbeError::Usage(
            "--interval has no effect with --summary-only (add --record FILE to record intervals)"
                .into(),
        ));
    }
    if let Some(h) = &cli.hist {
        let i = SYSCALLS
            .iter()
            .position(|d| d.name == h)
            .unwrap_or(usize::MAX);
        if !cli.syscalls.0.contains(&i) {
            return Err(ProbeError::Usage(format!(
                "--hist {h}: {h} is not traced; add it with --syscalls all (or a list naming it)"
            )));
        }
    }
    let master = target::validate_master(pid)?;
    if !nix::unistd::geteuid().is_root() {
        return Err(ProbeError::NotRoot);
    }
    let metrics_listener = metrics::bind(cli.listen)?;
    let (tracefs_root, mounted) = tracefs::ensure_mounted()?;
    if mounted {
        eprintln!(
            "nginx-probe: mounted tracefs at {} (it was not mounted)",
            tracefs_root.display()
        );
    }

    let workers = target::find_workers(master.pid);
    // A terminal gets the live view unless plain text, JSON or only the summary is asked.
    let live_view = !(cli.json || cli.summary_only || cli.plain)
        && std::io::IsTerminal::is_terminal(&std::io::stdout());
    let record_every = cli
        .interval
        .unwrap_or(if live_view { LIVE_INTERVAL } else { 5.0 });
    let mut record = match &cli.record {
        Some(path) => {
            let (host, kernel) = recording::host_and_kernel();
            let header = recording::Header {
                kind: "header".into(),
                schema: model::SCHEMA_VERSION,
                tool: format!("nginx-probe {}", env!("CARGO_PKG_VERSION")),
                host,
                kernel,
                cpus: aya::util::online_cpus().map(|c| c.len()).unwrap_or(0),
                nginx_version: target::nginx_version(master.pid),
                master_title: master.title.clone(),
                master_pid: master.pid,
                workers: workers.iter().map(|w| w.pid).collect(),
                started_unix_s: tracker::unix_now(),
                options: recording::Options {
                    interval_s: record_every,
                    syscalls: cli
                        .syscalls
                        .0
                        .iter()
                        .map(|&i| SYSCALLS[i].name.to_string())
                        .collect(),
                    uprobes: cli.uprobes,
                    argv: std::env::args().collect(),
                },
            };
            Some(open_record(path, &header)?)
        }
        None => None,
    };
    // Why the recording stopped early, when it did.
    let mut record_error: Option<String> = None;
    if workers.is_empty() {
        warn!(
            "master {} has no workers right now; waiting for them",
            master.pid
        );
    }
    let ncpus = aya::util::nr_cpus().unwrap_or(1);
    let slots = loader::slots_for(workers.len(), ncpus);
    let mut probe = Probe::load(&tracefs_root, master.pid, slots)?;
    let mut tracker = Tracker::new(master.clone());
    tracker.add_workers(&mut probe, &workers, false)?;
    probe.attach(&tracefs_root, &cli.syscalls.0)?;
    tracker.traced = cli.syscalls.0.clone();
    if cli.uprobes {
        let exe = std::path::PathBuf::from(format!("/proc/{}/exe", master.pid));
        match probe.attach_uprobes(&exe) {
            Ok(()) => tracker.request_source = model::RequestSource::Uprobe,
            Err(e) => warn!(
                "exact request counts unavailable ({e}); requests are estimated from writev calls"
            ),
        }
    }
    // Workers forked between the first scan and fork following being attached.
    tracker.refresh(&mut probe)?;
    for m in &probe.missing {
        warn!("tracepoint {m} is not available; it reads as zero");
    }
    let mut metrics = metrics::Endpoint::start(metrics_listener)?;
    let started = Instant::now();

    let nspid_note = if master.nspid.len() > 1 {
        format!(
            " (pid {} in its namespace)",
            master.nspid[master.nspid.len() - 1]
        )
    } else {
        String::new()
    };
    let pids: Vec<String> = workers.iter().map(|w| w.pid.to_string()).collect();
    eprintln!(
        "Tracing nginx master {}{nspid_note} `{}`: {} workers [{}], {} syscall tracepoints{}{}. Hit Ctrl-C to end.",
        master.pid,
        master.title,
        workers.len(),
        pids.join(" "),
        probe.attached,
        if probe.follows_forks { ", following forks" } else { "" },
        if tracker.request_source == model::RequestSource::Uprobe { ", request uprobes" } else { "" },
    );

    let interval = if cli.summary_only {
        None
    } else if cli.json {
        cli.interval
    } else {
        Some(record_every)
    };
    let mut live = if live_view {
        let title = tui::Title {
            master_pid: master.pid,
            master_title: master.title.clone(),
            interval_s: record_every,
        };
        match tui::LiveView::start(title) {
            Ok(v) => Some(v),
            Err(e) => {
                warn!("no live view ({e}): printing text reports");
                None
            }
        }
    } else {
        None
    };

    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sighup = signal(SignalKind::hangup())?;
    let mut refresh = tokio::time::interval(Duration::from_millis(500));
    refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Interval reports are made for stdout, the recording, or both (same period).
    let tick_every = interval.or(record.as_ref().map(|_| record_every));
    let mut report_tick =
        tokio::time::interval(Duration::from_secs_f64(tick_every.unwrap_or(MAX_SECONDS)));
    report_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    report_tick.tick().await; // the first tick is immediate
    let deadline = cli
        .duration
        .map(|d| tokio::time::Instant::now() + Duration::from_secs_f64(d));
    let sleep_until_deadline = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(sleep_until_deadline);

    // One report as the user asked for it: a JSON line, or the text tables.
    let render = |r: &model::Report| -> String {
        if cli.json {
            serde_json::to_string(r)
                .map(|s| s + "\n")
                .unwrap_or_default()
        } else {
            report::render_text(r, cli.hist.as_deref(), &clock(r.time_unix_s))
        }
    };
    let json_line = |r: &model::Report| {
        serde_json::to_string(r)
            .map(|s| s + "\n")
            .unwrap_or_default()
    };
    let mut output = Sink::spawn(Box::new(std::io::stdout()), "stdout", OUTPUT_QUEUE);
    let mut prev: Option<Snapshot> = None;
    let mut prev_at = started;
    let end_reason: String = loop {
        tokio::select! {
            _ = sigint.recv() => break "interrupted (SIGINT)".into(),
            _ = sigterm.recv() => break "terminated (SIGTERM)".into(),
            _ = sighup.recv() => break "hangup (SIGHUP)".into(),
            _ = &mut sleep_until_deadline => break format!("--duration {} s elapsed", cli.duration.unwrap_or(0.0)),
            _ = refresh.tick() => {
                if !target::is_alive(master.pid) {
                    break format!("nginx master {} exited", master.pid);
                }
                for ev in tracker.refresh(&mut probe)? {
                    // The live view shows them in its events pane.
                    if live.is_none() {
                        eprintln!("nginx-probe: {}", report::event_line(&ev, master.pid));
                    }
                }
            }
            input = next_input(&mut live) => match input {
                tui::Input::Quit => break "quit from the live view".into(),
                tui::Input::Redraw => {
                    if let Some(v) = live.as_mut() {
                        v.redraw()?;
                    }
                }
                tui::Input::Ignore => {}
            },
            Some(reply) = metrics.next_scrape() => {
                // Each scrape: the summary so far, from fresh kernel counters.
                let snap = tracker.snapshot(&probe)?;
                let mut r = tracker.report("summary", &snap, None, started.elapsed().as_secs_f64(), &probe.missing, None);
                r.drops.insert("interval_reports_dropped".into(), output.dropped);
                let _ = reply.send(metrics::render(&r));
            }
            _ = report_tick.tick(), if tick_every.is_some() => {
                let snap = tracker.snapshot(&probe)?;
                let now = Instant::now();
                let r = tracker.report("interval", &snap, prev.as_ref(), (now - prev_at).as_secs_f64(), &probe.missing, None);
                if let Some(sink) = record.as_mut() {
                    if sink.interval(json_line(&r)) == Sent::Closed {
                        let e = record.take().map(|s| s.close());
                        let why = match e {
                            Some(Err(e)) => e.to_string(),
                            _ => "its writer stopped".into(),
                        };
                        log::warn!("recording to {} stopped: {why}; the live report goes on", cli.record.as_ref().map(|p| p.display().to_string()).unwrap_or_default());
                        record_error = Some(why);
                    }
                }
                if let Some(v) = live.as_mut() {
                    v.show(&r)?;
                } else if interval.is_some() && output.interval(render(&r)) == Sent::Closed {
                    break "stdout closed".into();
                }
                tracker.start_interval();
                prev = Some(snap);
                prev_at = now;
            }
        }
    };
    metrics.shutdown().await;

    // Back to the normal screen for the summary.
    if let Some(v) = live.take() {
        v.stop();
    }
    // Final refresh so that workers that exited are marked, then the summary since attach.
    if let Ok(events) = tracker.refresh(&mut probe) {
        for ev in events {
            eprintln!("nginx-probe: {}", report::event_line(&ev, master.pid));
        }
    }
    let snap = tracker.snapshot(&probe)?;
    // The last, partial interval, so that the recorded intervals (and the JSON ones)
    // cover the whole run and add up to the summary.
    let tail_s = prev_at.elapsed().as_secs_f64();
    if tick_every.is_some() && tail_s >= 0.05 {
        let r = tracker.report(
            "interval",
            &snap,
            prev.as_ref(),
            tail_s,
            &probe.missing,
            None,
        );
        if let Some(sink) = record.as_mut() {
            let _ = sink.interval(json_line(&r));
        }
        if cli.json && interval.is_some() {
            let _ = output.interval(render(&r));
        }
    }
    let mut r = tracker.report(
        "summary",
        &snap,
        None,
        started.elapsed().as_secs_f64(),
        &probe.missing,
        Some(end_reason),
    );
    r.drops
        .insert("interval_reports_dropped".into(), output.dropped);
    if cli.record.is_some() {
        r.drops.insert(
            "record_lines_dropped".into(),
            record.as_ref().map(|s| s.dropped).unwrap_or(0),
        );
    }
    if let Some(sink) = record.take() {
        if let Err(e) = sink.finish(json_line(&r)) {
            record_error = Some(e.to_string());
        }
    }
    output.finish(render(&r))?;
    drop(probe);
    match (record_error, &cli.record) {
        (Some(why), Some(path)) => Err(ProbeError::RecordIncomplete(format!(
            "{}: {why}",
            path.display()
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_errors_fold_to_one_line() {
        let e = Cli::try_parse_from(["nginx-probe"]).unwrap_err();
        let line = one_line_clap_error(&e.render().to_string());
        assert_eq!(
            line,
            "the following required arguments were not provided: --pid <PID>"
        );
        let e = Cli::try_parse_from(["nginx-probe", "--pid", "abc"]).unwrap_err();
        let line = one_line_clap_error(&e.render().to_string());
        assert!(
            line.starts_with("invalid value 'abc' for '--pid <PID>'"),
            "{line}"
        );
        assert!(!line.contains('\n'));
        let e = Cli::try_parse_from(["nginx-probe", "--pid", "0"]).unwrap_err();
        assert!(one_line_clap_error(&e.render().to_string()).contains("--pid"));
    }

    #[test]
    fn syscall_sets_parse() {
        assert_eq!(
            parse_syscalls("core").unwrap().0,
            vec![0, 1, 2, 3, 4, 5, 6, 7, 8]
        );
        assert_eq!(parse_syscalls("all").unwrap().0.len(), SYSCALLS.len());
        assert_eq!(
            parse_syscalls("writev,accept4,writev").unwrap().0,
            vec![0, 7]
        );
        assert!(parse_syscalls("fork")
            .unwrap_err()
            .contains("unknown syscall `fork`"));
        assert!(parse_syscalls(",").is_err());
        assert_eq!(parse_syscalls("all,").unwrap().0.len(), SYSCALLS.len());
        assert_eq!(parse_syscalls("core,openat").unwrap().0.len(), 10);
    }

    #[test]
    fn seconds_are_bounded() {
        assert_eq!(parse_seconds("2.5"), Ok(2.5));
        assert!(parse_seconds("0").is_err());
        assert!(parse_seconds("nan").is_err());
        assert!(parse_seconds("inf").is_err());
        assert!(parse_seconds("-1").is_err());
        assert!(parse_seconds("soon").is_err());
    }
}
