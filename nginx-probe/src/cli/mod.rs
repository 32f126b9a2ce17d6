//! The command line: `nginx-probe`'s arguments, its subcommands (`report`, `compare`)
//! and the tracing session (attach, event loop, teardown). See docs/usage.md for options,
//! output and exit codes.

mod all;
mod attach;
pub mod compare;
mod master_tag;
mod plan;
mod session;

#[cfg(test)]
mod golden_tests;

use std::{io::Write as _, path::PathBuf};

use clap::{builder::PossibleValuesParser, error::ErrorKind, Parser};
use nginx_probe_common::{CORE_SYSCALLS, SYSCALLS};

use crate::{
    error::{ProbeError, EXIT_USAGE},
    io::{
        metrics_server,
        output::print_all,
        recording::{self, Recording},
    },
    model,
    render::{html, text},
    safe,
};

/// Longest accepted `--interval` or `--duration`: one week, seconds.
const MAX_SECONDS: f64 = 7.0 * 86_400.0;

/// A duration option (`--interval`, `--duration`, `--verdict-window`): plain seconds
/// (`2.5`) or a humantime duration (`30s`, `5m`, `1h 30m`); seconds, 0.1 s to a week.
fn parse_seconds(s: &str) -> Result<f64, String> {
    let v: f64 = match s.trim().parse::<f64>() {
        Ok(v) => v,
        Err(_) => humantime::parse_duration(s.trim())
            .map_err(|_| {
                format!("`{s}` is not a duration: give seconds (`30`) or a duration with its unit (`30s`, `5m`, `1h`)")
            })?
            .as_secs_f64(),
    };
    if !v.is_finite() || !(0.1..=MAX_SECONDS).contains(&v) {
        return Err(format!(
            "must be between 0.1 and {MAX_SECONDS} seconds (a week)"
        ));
    }
    Ok(v)
}

fn syscall_names() -> Vec<&'static str> {
    SYSCALLS.iter().map(|s| s.name).collect()
}

/// `--syscalls`'s long help, built from `SYSCALLS` and `CORE_SYSCALLS` so it names
/// exactly the sets the parser uses: core's timed syscalls, core's counted-only ones
/// (exit-only programs), and what `all` adds.
fn syscalls_long_help() -> String {
    let names = |f: &dyn Fn(usize) -> bool| -> String {
        (0..SYSCALLS.len())
            .filter(|&i| f(i))
            .map(|i| SYSCALLS[i].name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let core = |i: usize| CORE_SYSCALLS.contains(&(i as u32));
    let timed = |i: usize| SYSCALLS[i].entry == nginx_probe_common::Entry::Always;
    format!(
        "Syscalls to trace: `core` ({} in all: timed {}; counted at exit only, not timed: {}), \
         `all` (adds {}: the full per-request mix, about twice the tracepoint hits), or a \
         comma-separated list.",
        CORE_SYSCALLS.len(),
        names(&|i| core(i) && timed(i)),
        names(&|i| core(i) && !timed(i)),
        names(&|i| !core(i)),
    )
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
pub struct SyscallSet(pub Vec<usize>);

/// eBPF connection profiler for nginx: per-worker accepts, accept failures and syscall
/// latency, from syscall tracepoints aggregated in the kernel.
#[derive(Debug, Parser)]
#[command(
    name = "nginx-probe",
    version = VERSION,
    about,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    /// A subcommand (`report`, `compare`); None: trace nginx.
    #[command(subcommand)]
    pub cmd: Option<Cmd>,
    /// The tracing options (`--pid`, `--record`, ...), for the run without subcommand.
    #[command(flatten)]
    pub trace: TraceArgs,
}

/// `--version`: the crate version and, when built from a git checkout, its commit
/// (`0.1.0 (git 1a2b3c4d5e6f)`; set by build.rs).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), env!("NGINX_PROBE_GIT_SUFFIX"));

/// Commands that read recordings instead of tracing.
#[derive(Debug, clap::Subcommand)]
pub enum Cmd {
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
        /// Only the reports of this nginx master (its host pid, the reports'
        /// `master_pid`): needed for a file that holds several masters' reports (an
        /// `--all --json` stdout), which is refused without it, naming them.
        #[arg(long, value_name = "PID", value_parser = clap::value_parser!(u32).range(1..))]
        master: Option<u32>,
    },
    /// Compare two recordings: each metric's change with its noise across intervals,
    /// verdicts that appeared or went away, and a sentence for a ticket. With several
    /// runs a side (`compare A1 A2 A3 -- B1 B2 B3`, or `compare DIR_A DIR_B` with the
    /// runs as *.jsonl files in each directory), the noise is the spread of the runs.
    Compare {
        /// BEFORE then AFTER (a recording or a directory of runs each); or, with `--`,
        /// every run of BEFORE.
        #[arg(required = true, num_args = 1.., value_name = "BEFORE AFTER")]
        files: Vec<PathBuf>,
        /// With `--`: every run of AFTER.
        #[arg(last = true, value_name = "AFTER_RUNS")]
        after_runs: Vec<PathBuf>,
        /// Print the comparison as one JSON document.
        #[arg(long)]
        json: bool,
        /// Only the reports of this nginx master in every file (its host pid): needed
        /// for files that hold several masters' reports (`--all --json` stdouts), which
        /// are refused without it. `BEFORE_PID:AFTER_PID` when the master's pid changed
        /// between the two sides (a restart).
        #[arg(long, value_name = "PID[:PID]", value_parser = compare::parse_masters)]
        master: Option<(u32, u32)>,
    },
    /// Write the man page (`nginx-probe.8`) and the bash, zsh and fish completions
    /// into DIR (used by `cargo xtask dist`).
    #[command(hide = true)]
    GenerateAssets {
        /// Directory to write into (created if missing).
        dir: PathBuf,
    },
}

/// Options of a tracing run (no subcommand).
#[derive(Debug, clap::Args)]
pub struct TraceArgs {
    /// Pid of the nginx master process, as the host sees it. Without it, the master
    /// is the pid in --pid-file, else the only nginx master running (several: they are
    /// listed and nginx-probe exits with 2).
    #[arg(short = 'p', long, allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..))]
    pub pid: Option<u32>,

    /// nginx's pid file, read when --pid is not given [default: /run/nginx.pid, and
    /// when that names no master, the only nginx master in /proc].
    #[arg(long, value_name = "FILE", conflicts_with = "pid")]
    pub pid_file: Option<PathBuf>,

    /// Follow every nginx master on this host and in its containers (found in /proc
    /// every 2 s): new masters are attached, masters that exit get their summary and
    /// are let go. Every report, JSON document and metric names its master (pid, nginx
    /// version, container id, pid namespace). At most 16 masters at once.
    #[arg(long, conflicts_with_all = ["pid", "pid_file", "record"])]
    pub all: bool,

    /// Record the run to FILE: a header line, one JSON line per interval (every
    /// --interval seconds, 5 by default, whatever stdout shows) and the summary; read
    /// it back with `nginx-probe report FILE` or `nginx-probe compare A B`.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,

    /// Time between interval reports, in seconds or with a unit (`10s`, `1m`)
    /// [default: 5 s for text; with --json, interval lines are printed only when this is
    /// given].
    #[arg(long, allow_negative_numbers = true, value_parser = parse_seconds)]
    pub interval: Option<f64>,

    /// Stop after tracing this long (seconds, or `30s`, `5m`, `1h`), counted from
    /// attach (the banner), and print the summary (default: until Ctrl-C, SIGTERM or
    /// SIGHUP, or the master exiting, which --listen waits out).
    #[arg(long, allow_negative_numbers = true, value_parser = parse_seconds)]
    pub duration: Option<f64>,

    /// Print JSON: one document per line (intervals, then the summary).
    #[arg(long)]
    pub json: bool,

    /// Also print a bcc-style log2 latency histogram of this syscall, per worker.
    #[arg(long, value_name = "SYSCALL", value_parser = PossibleValuesParser::new(syscall_names()))]
    pub hist: Option<String>,

    /// Syscalls to trace: `core`, `all`, or a comma-separated list (--help lists them).
    #[arg(long, value_name = "SET", default_value = "core", value_parser = parse_syscalls,
          long_help = syscalls_long_help())]
    pub syscalls: SyscallSet,

    /// Count HTTP requests per worker, with uprobes on the master's binary
    /// (`ngx_http_create_request`, `ngx_http_free_request`): adds request durations.
    /// Costs more per request than the tracepoints (+35% worker CPU on HTTPS). Without
    /// it, requests are counted globally from nginx's own stub_status counters (free)
    /// and per-worker requests are unknown.
    #[arg(long)]
    pub uprobes: bool,

    /// Do not time TLS handshakes. By default uprobes on nginx's `ngx_ssl_ocsp_validate`
    /// and libssl's `SSL_do_handshake` (entry and return) and `SSL_free`, in the libssl
    /// nginx maps or in the nginx binary when OpenSSL is linked into it, count and time
    /// every handshake: they fire per new TLS connection, not per request.
    #[arg(long)]
    pub no_tls: bool,
    /// Classify write destinations from /proc fd snapshots every 2 s, as on a kernel
    /// without BTF, instead of walking the fd table at each write (for measuring the
    /// cost of either; fds that live for one request are misfiled this way).
    #[arg(long, hide = true)]
    pub writes_from_proc: bool,
    /// Count the connection lifecycle with the perf-event tracepoint programs (the
    /// fallback where the kernel's BTF lacks a `struct sock` offset) instead of the raw
    /// tracepoints (for measuring the cost of either, and testing the fallback).
    #[arg(long, hide = true)]
    pub lifecycle_from_perf_events: bool,
    /// Leave the connection lifecycle tracepoints out (`sock:inet_sock_set_state`,
    /// `tcp:tcp_*_reset`, `tcp:tcp_destroy_sock`): no who-closed, idle time, resets or
    /// closed listeners, and verdicts that need them say unknown. They fire about 13
    /// times per connection, on every TCP socket of the host (not per request): free
    /// under keepalive, about 1-2 us of CPU per connection where every request opens one
    /// (docs/detail.md).
    #[arg(long)]
    pub no_lifecycle: bool,

    /// Print only the summary at exit (no interval reports on stdout; with --record,
    /// intervals are still recorded every --interval seconds).
    #[arg(long)]
    pub summary_only: bool,

    /// Print plain text interval reports even when stdout is a terminal (the default
    /// there is a live top-like view of the workers, redrawn every --interval seconds,
    /// 2 by default; `q` quits).
    #[arg(long)]
    pub plain: bool,

    /// Serve Prometheus metrics (cumulative since attach) at http://ADDR/metrics;
    /// `--listen` alone listens on 127.0.0.1:9752. A non-loopback address is served
    /// without authentication (a warning says so). Exporter mode: when the nginx
    /// master exits, nginx-probe waits for a new one (--pid-file, else the only master
    /// in /proc) and attaches to it instead of exiting.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = metrics_server::DEFAULT_LISTEN, value_parser = metrics_server::parse_listen)]
    pub listen: Option<std::net::SocketAddr>,

    /// With --listen: the `nginx_probe_verdict` gauges judge this recent window (seconds
    /// or `5m`), so that alerts fire during an incident and clear after it.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_seconds, requires = "listen")]
    pub verdict_window: f64,

    /// With --listen: leave out the latency histogram series of syscalls a worker has
    /// not made (all buckets zero), to save series.
    #[arg(long, requires = "listen")]
    pub skip_zero_histograms: bool,

    /// The detail layer: the tracepoints of per-request syscalls (latency histograms,
    /// writes by destination, syscall mix, event-loop iterations, upstream connects),
    /// which cost the workers about 0.4-1 us per hit. `full` keeps them attached for
    /// the whole run; `sampled` attaches them in windows (--detail-window every
    /// --detail-every) and says so, with the coverage, next to every sampled figure.
    /// Accepts, refusals and EMFILE by errno on accept4/accept, requests (nginx's
    /// stub_status counters), TLS handshakes, the error log, /proc and sock_diag stay
    /// exact in both. [default: sampled with --listen, --record, --detail-window or
    /// --detail-every, full otherwise]
    #[arg(long, value_enum, value_name = "MODE")]
    pub detail: Option<DetailArg>,

    /// For --detail sampled: how long each detail window lasts (seconds or `1s`,
    /// `500ms`) [default: 1 s]. Without --detail it selects --detail sampled (the
    /// banner says so); with --detail full it is a usage error.
    #[arg(long, value_name = "DURATION", value_parser = parse_seconds)]
    pub detail_window: Option<f64>,

    /// For --detail sampled: time from one detail window's start to the next (seconds
    /// or `20s`, `1m`) [default: 20 s]. Without --detail it selects --detail sampled
    /// (the banner says so); with --detail full it is a usage error.
    #[arg(long, value_name = "DURATION", value_parser = parse_seconds)]
    pub detail_every: Option<f64>,
}

/// `--detail`: how the detail layer is attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DetailArg {
    /// Attached for the whole run: every call counted.
    Full,
    /// Attached in windows; continuous figures stay exact.
    Sampled,
}

/// Parses the arguments, runs the command and exits with its code (0 ok, 1 runtime
/// error, 2 usage error; see [`crate::error`]).
pub fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            e.exit()
        }
        Err(e) => {
            // clap's message is several lines; keep the one that says what is wrong.
            eprintln!(
                "nginx-probe: {} (see --help)",
                safe::line(&clap_error_line(&e))
            );
            std::process::exit(EXIT_USAGE);
        }
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .format(|buf, record| {
            writeln!(
                buf,
                "{}",
                log_line(record.level(), &record.args().to_string())
            )
        })
        .init();

    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("nginx-probe: cannot start the runtime: {e}");
            std::process::exit(crate::error::EXIT_RUNTIME);
        }
    };
    let result = match cli.cmd {
        None if cli.trace.all => runtime.block_on(all::run(cli.trace)),
        None => runtime.block_on(session::run(cli.trace)),
        Some(Cmd::Report {
            file,
            html: Some(out),
            master,
            ..
        }) => html_command(&file, &out, master),
        Some(Cmd::Report {
            file,
            json,
            intervals,
            hist,
            html: None,
            master,
        }) => report_command(&file, json, intervals, hist.as_deref(), master),
        Some(Cmd::Compare {
            files,
            after_runs,
            json,
            master,
        }) => compare::compare_command(&files, &after_runs, json, master),
        Some(Cmd::GenerateAssets { dir }) => generate_assets(&dir),
    };
    match result {
        Ok(()) => {}
        Err(e) => {
            let e = crate::collect::fd_limit::explain(e);
            // Errors quote paths, titles and serde's view of a recording's bytes.
            eprintln!("nginx-probe: {}", safe::line(&e.to_string()));
            std::process::exit(e.exit_code());
        }
    }
}

/// A log record as its stderr line: `nginx-probe: `, under `--all` the master whose
/// session logs it (`master <pid>: `, [`master_tag`]), the level (`warning: `, `error: `)
/// and the message on one line, escaped (warnings quote paths, titles and kernel
/// errors).
fn log_line(level: log::Level, message: &str) -> String {
    let level = match level {
        log::Level::Error => "error: ",
        log::Level::Warn => "warning: ",
        _ => "",
    };
    format!(
        "nginx-probe: {}{level}{}",
        master_tag::tag(),
        safe::line(message)
    )
}

/// clap's error on one line ([`one_line_clap_error`]). A stray word after tracing
/// options (`-p 382 extra`) reaches clap as a would-be subcommand, and with
/// `args_conflicts_with_subcommands` clap calls it "the subcommand 'extra' cannot be used
/// with ..." whether or not such a subcommand exists: clap 4 has no setting that tells
/// the two apart, so a name that is no subcommand is reported as what it is.
fn clap_error_line(e: &clap::Error) -> String {
    use clap::{
        error::{ContextKind, ContextValue},
        CommandFactory as _,
    };
    if e.kind() == ErrorKind::ArgumentConflict {
        if let Some(ContextValue::String(word)) = e.get(ContextKind::InvalidSubcommand) {
            let cmd = Cli::command();
            let known = cmd
                .get_subcommands()
                .any(|c| c.get_name() == word || c.get_all_aliases().any(|a| a == word));
            if !known {
                return format!(
                    "unexpected argument '{word}' found: nginx-probe takes no positional arguments (the subcommands report and compare come first)"
                );
            }
        }
    }
    one_line_clap_error(&e.render().to_string())
}

/// Folds clap's multi-line error (message, indented details, tips, usage) into the
/// message, its details and its tips ("did you mean") on one line.
fn one_line_clap_error(rendered: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    let mut first_block_done = false;
    for line in rendered.lines() {
        let t = line.trim();
        if t.is_empty() {
            first_block_done |= !parts.is_empty();
            continue;
        }
        if t.starts_with("Usage:") || t.starts_with("For more information") {
            break;
        }
        // After the message, only clap's "tip: a similar argument exists" lines.
        if !first_block_done || t.starts_with("tip:") {
            parts.push(t.trim_start_matches("error: "));
        }
    }
    if parts.is_empty() {
        "invalid arguments".into()
    } else {
        parts.join(" ")
    }
}

/// `nginx-probe report FILE --html OUT`: reads the recording, writes its page
/// atomically ([`crate::io::files::write_atomic`]), and says so on stderr (with the note
/// of a recording cut short).
fn html_command(
    file: &std::path::Path,
    out: &std::path::Path,
    master: Option<u32>,
) -> Result<(), ProbeError> {
    let rec = Recording::load_master(file, recording::Keep::All, master)?;
    if let (_, Some(note)) = rec.whole_run() {
        eprintln!("nginx-probe: {}", safe::line(&note));
    }
    crate::io::files::write_atomic(out, html::render_html(&rec).as_bytes(), "--html")?;
    eprintln!(
        "nginx-probe: wrote {}",
        safe::line(&out.display().to_string())
    );
    Ok(())
}

/// `nginx-probe report FILE`: the recorded run's report, as it was printed live.
fn report_command(
    file: &std::path::Path,
    json: bool,
    intervals: bool,
    hist: Option<&str>,
    master: Option<u32>,
) -> Result<(), ProbeError> {
    // Without --intervals only the last interval is needed: flat memory for any length.
    let keep = if intervals {
        recording::Keep::All
    } else {
        recording::Keep::Last
    };
    let rec = Recording::load_master(file, keep, master)?;
    let (whole, note) = rec.whole_run();
    let mut out = String::new();
    let render = |r: &model::Report| {
        if json {
            safe::json(r) + "\n"
        } else {
            text::render_text(r, hist, &text::clock(r.time_unix_s))
        }
    };
    if !json {
        // The header is the sender's: every string in it is shown escaped.
        if let Some(h) = rec.header.as_ref().map(safe::sanitized) {
            out += &format!(
                "Recorded on {} (kernel {}, {} CPUs) from {}: {} master {} `{}`, {} workers, interval {} s, syscalls {}{}.\n",
                h.host,
                h.kernel,
                h.cpus,
                text::utc_datetime(h.started_unix_s),
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
        eprintln!("nginx-probe: {}", safe::line(n));
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

/// `nginx-probe generate-assets DIR` (hidden): `nginx-probe.8` (roff, from this clap
/// definition through clap_mangen) and `completions/{nginx-probe.bash, _nginx-probe,
/// nginx-probe.fish}` (clap_complete).
pub fn generate_assets(dir: &std::path::Path) -> Result<(), ProbeError> {
    use clap::CommandFactory as _;
    let completions = dir.join("completions");
    std::fs::create_dir_all(&completions)?;
    let cmd = Cli::command();
    let mut man = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .section("8")
        .render(&mut man)?;
    std::fs::write(dir.join("nginx-probe.8"), man)?;
    for (shell, file) in [
        (clap_complete::Shell::Bash, "nginx-probe.bash"),
        (clap_complete::Shell::Zsh, "_nginx-probe"),
        (clap_complete::Shell::Fish, "nginx-probe.fish"),
    ] {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut cmd.clone(), "nginx-probe", &mut out);
        std::fs::write(completions.join(file), out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The command lines contrib/ ships (the systemd unit's ExecStart, the DaemonSet's
    /// args) parse, and both follow every master.
    #[test]
    fn contrib_command_lines_parse_and_use_all() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../contrib/");
        let unit = std::fs::read_to_string(format!("{dir}systemd/nginx-probe.service")).unwrap();
        let exec = unit
            .lines()
            .find_map(|l| l.strip_prefix("ExecStart="))
            .unwrap();
        let ds = std::fs::read_to_string(format!("{dir}kubernetes/daemonset.yaml")).unwrap();
        let args: Vec<&str> = ds
            .lines()
            .skip_while(|l| l.trim() != "args:")
            .skip(1)
            .map_while(|l| l.trim().strip_prefix("- "))
            .collect();
        let ds_line = std::iter::once("nginx-probe").chain(args);
        for cli in [
            Cli::try_parse_from(exec.split_whitespace()).unwrap(),
            Cli::try_parse_from(ds_line).unwrap(),
        ] {
            assert!(cli.trace.all && cli.trace.listen.is_some() && cli.trace.summary_only);
        }
    }

    use super::*;

    #[test]
    fn a_log_line_names_its_master_under_all_only_and_is_escaped() {
        assert_eq!(
            log_line(log::Level::Warn, "a\x1b]0;t\x07 b\nc"),
            "nginx-probe: warning: a\\x1b]0;t\\x07 b\\x0ac"
        );
        assert_eq!(
            master_tag::sync_scope(31, || log_line(log::Level::Warn, "no workers")),
            "nginx-probe: master 31: warning: no workers"
        );
        assert_eq!(
            master_tag::sync_scope(31, || log_line(log::Level::Error, "x")),
            "nginx-probe: master 31: error: x"
        );
    }

    #[test]
    fn listen_option_defaults_to_loopback() {
        use crate::io::metrics_server::parse_listen;
        use crate::io::metrics_server::DEFAULT_LISTEN;
        let cli = Cli::try_parse_from(["nginx-probe", "--pid", "7", "--listen"]).unwrap();
        assert_eq!(cli.trace.listen, Some(DEFAULT_LISTEN.parse().unwrap()));
        assert!(cli.trace.listen.unwrap().ip().is_loopback());
        let cli = Cli::try_parse_from(["nginx-probe", "--listen", "--pid", "7"]).unwrap();
        assert_eq!(cli.trace.listen, Some(DEFAULT_LISTEN.parse().unwrap()));
        let cli =
            Cli::try_parse_from(["nginx-probe", "--pid", "7", "--listen", "[::1]:9100"]).unwrap();
        assert_eq!(cli.trace.listen, Some("[::1]:9100".parse().unwrap()));
        let cli = Cli::try_parse_from(["nginx-probe", "--pid", "7"]).unwrap();
        assert_eq!(cli.trace.listen, None);
        assert!(parse_listen("localhost").unwrap_err().contains("IP:PORT"));
        assert!(parse_listen("127.0.0.1").is_err());
    }

    #[test]
    fn clap_errors_fold_to_one_line() {
        // --pid is optional now (discovery), and -p is its short form.
        let cli = Cli::try_parse_from(["nginx-probe"]).unwrap();
        assert_eq!(cli.trace.pid, None);
        assert_eq!(
            Cli::try_parse_from(["nginx-probe", "-p", "7"])
                .unwrap()
                .trace
                .pid,
            Some(7)
        );
        // clap's "did you mean" tip stays on the one line.
        let e = Cli::try_parse_from(["nginx-probe", "--pidd", "7"]).unwrap_err();
        assert_eq!(
            one_line_clap_error(&e.render().to_string()),
            "unexpected argument '--pidd' found tip: a similar argument exists: '--pid'"
        );
        // A stray word after tracing options is an unexpected argument, not a subcommand;
        // a real subcommand after them still conflicts.
        let e = Cli::try_parse_from(["nginx-probe", "-p", "382", "extra"]).unwrap_err();
        assert_eq!(
            clap_error_line(&e),
            "unexpected argument 'extra' found: nginx-probe takes no positional arguments (the subcommands report and compare come first)"
        );
        let e = Cli::try_parse_from(["nginx-probe", "-p", "382", "report", "/x"]).unwrap_err();
        assert!(
            clap_error_line(&e).starts_with("the subcommand 'report' cannot be used with"),
            "{}",
            clap_error_line(&e)
        );
        let e = Cli::try_parse_from(["nginx-probe", "--pid", "7", "--pid-file", "/x"]).unwrap_err();
        assert!(one_line_clap_error(&e.render().to_string())
            .starts_with("the argument '--pid <PID>' cannot be used with '--pid-file <FILE>'"));
        // --all follows every master: no pid, pid file or (one master's) recording.
        for (other, shown) in [
            (&["--pid", "7"][..], "'--pid <PID>'"),
            (&["--pid-file", "/x"][..], "'--pid-file <FILE>'"),
            (&["--record", "/x"][..], "'--record <FILE>'"),
        ] {
            let args = ["nginx-probe", "--all"].iter().chain(other);
            let e = Cli::try_parse_from(args).unwrap_err();
            let line = one_line_clap_error(&e.render().to_string());
            assert_eq!(
                line,
                format!("the argument '--all' cannot be used with {shown}"),
                "{line}"
            );
        }
        // Exporter-only switches need --listen.
        assert!(Cli::try_parse_from(["nginx-probe", "--skip-zero-histograms"]).is_err());
        assert!(Cli::try_parse_from(["nginx-probe", "--verdict-window", "1m"]).is_err());
        let cli =
            Cli::try_parse_from(["nginx-probe", "--listen", "--verdict-window", "90s"]).unwrap();
        assert_eq!(cli.trace.verdict_window, 90.0);
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
            vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24]
        );
        assert_eq!(parse_syscalls("all").unwrap().0.len(), SYSCALLS.len());
        // --help names every syscall of each set, as the parser reads them.
        let help = syscalls_long_help();
        assert!(
            help.contains("`core` (20 in all: timed accept4, accept, epoll_wait, "),
            "{help}"
        );
        assert!(
            help.contains(
                "not timed: socket, socketpair, pipe2, eventfd2, epoll_create1, dup, dup2, dup3)"
            ),
            "{help}"
        );
        assert!(
            help.contains("`all` (adds openat, close, recvfrom, read, newfstatat:"),
            "{help}"
        );
        for i in parse_syscalls("all").unwrap().0 {
            assert!(help.contains(SYSCALLS[i].name), "{help}");
        }
        assert_eq!(
            parse_syscalls("writev,accept4,writev").unwrap().0,
            vec![0, 7]
        );
        assert!(parse_syscalls("fork")
            .unwrap_err()
            .contains("unknown syscall `fork`"));
        assert!(parse_syscalls(",").is_err());
        assert_eq!(parse_syscalls("all,").unwrap().0.len(), SYSCALLS.len());
        assert_eq!(parse_syscalls("core,openat").unwrap().0.len(), 21);
    }

    #[test]
    fn seconds_are_bounded() {
        assert_eq!(parse_seconds("2.5"), Ok(2.5));
        assert_eq!(parse_seconds("30s"), Ok(30.0));
        assert_eq!(parse_seconds("5m"), Ok(300.0));
        assert_eq!(parse_seconds("1h 30m"), Ok(5400.0));
        assert_eq!(parse_seconds("250ms"), Ok(0.25));
        assert!(parse_seconds("10ms").is_err());
        assert!(parse_seconds("8days").is_err());
        assert!(parse_seconds("5x").unwrap_err().contains("not a duration"));
        assert!(parse_seconds("0").is_err());
        assert!(parse_seconds("nan").is_err());
        assert!(parse_seconds("inf").is_err());
        assert!(parse_seconds("-1").is_err());
        assert!(parse_seconds("soon").is_err());
    }
}
