//! `cargo xtask`: orchestration only. `setup` installs what building and testing need,
//! `demo` shows nginx-probe on a real nginx, `test` runs unit and root integration tests,
//! `lint` runs clippy on the host crates and, on its own, on the eBPF crate; `claims`
//! checks the seeds' tuning claims with nginx-probe; `bench` measures it.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use anyhow::{bail, Result};

mod bench;
mod claims;
mod command;
mod demo;
mod dist;
mod load;
mod overhead;
mod setup;
mod source_nginx;
mod stats;
mod trixie;
use clap::{Parser, Subcommand};
use command::{output_of, run, run_with_deadline};
use setup::{setup, EBPF_TOOLCHAIN};

#[derive(Parser)]
#[command(name = "xtask")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install Debian packages, the pinned nightly with rust-src, and bpf-linker.
    /// Idempotent: a second run checks and changes nothing.
    Setup,
    /// Run nginx-probe on a throwaway nginx under wrk load (or on --pid).
    Demo {
        /// Attach to this running nginx master instead of starting one.
        #[arg(long)]
        pid: Option<u32>,
        /// Seconds of load and tracing (1..=3600).
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=3600))]
        duration: u32,
    },
    /// Unit tests, then the root integration tests against real nginx.
    Test {
        /// Extra arguments for the test harness (e.g. a test name filter).
        #[arg(trailing_var_arg = true)]
        args: Vec<String>,
    },
    /// clippy on the host crates, then on the eBPF crate on its own.
    Lint,
    /// Print the metrics table of the docs, made from the Prometheus families table in
    /// the code (nginx-probe/src/render/prometheus_families.rs).
    MetricsDoc {
        /// Rewrite the table in docs/metrics.md instead of printing it.
        #[arg(long)]
        write: bool,
    },
    /// Claims lab (root): tuning claims from ../shared/seeds as A/B nginx configs under
    /// the same load, each recorded with nginx-probe and judged by explicit rules on its
    /// metrics; prints a markdown table, writes claims.md, claims.json and the runs.
    Claims {
        /// Short runs: 2 s of load per config instead of 8, one run per config.
        #[arg(long)]
        quick: bool,
        /// Runs per config, interleaved (A B A B ...); each claim is judged on the
        /// medians and decided only when resampling the runs agrees.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=50))]
        repeat: u32,
        /// Do not pin the load generator and the nginx workers to separate CPUs.
        #[arg(long)]
        no_pin: bool,
        /// Output directory (default: target/claims).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Only these claims (keepalive, access_log, multi_accept, nofile,
        /// worker_connections, open_file_cache, sendfile, worker_processes, backlog,
        /// keepalive_requests, upstream_keepalive, worker_connections_nofile,
        /// accept_mutex, tcp_nopush, worker_processes_sweep, aio_threads,
        /// tls_session_cache).
        claims: Vec<String>,
    },
    /// Release artifacts in target/dist: a static musl binary, the man page, shell
    /// completions and a .deb (with the systemd unit, dashboard and alert rules).
    Dist {
        /// Then check them (root): static binary, `dpkg-deb -c`, `man -l`, and the basic
        /// accept test run with the static binary.
        #[arg(long)]
        check: bool,
    },
    /// Benchmarks (root): measurements and ratios, never pass/fail on speed.
    Bench {
        #[command(subcommand)]
        which: BenchCmd,
    },
}

#[derive(Subcommand)]
enum BenchCmd {
    /// What tracing costs nginx's workers per request, per workload (static 30-byte
    /// file, HTTPS 4 KB, reverse proxy): interleaved rounds of no tracer, nginx-probe's
    /// modes and empty-program floors; medians and ratios with 95% intervals.
    Overhead {
        /// Workload: `static` (30-byte file, HTTP), `https` (4 KB page over TLS),
        /// `proxy` (proxy_pass to a second nginx, upstream keepalive) or `all`.
        #[arg(long, value_enum, default_value = "all")]
        workload: overhead::Workload,
        /// Interleaved rounds (each runs every mode once).
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// Seconds of wrk load per run: a multiple of nginx-probe's detail period (20 s)
        /// whenever a `--detail sampled` mode runs, so each run holds whole windows.
        #[arg(long, default_value_t = 20)]
        secs: u64,
        /// Run only the modes whose name contains one of these (comma-separated, e.g.
        /// `sampled,floor`), extra modes included; the baseline (no tracer) always runs.
        #[arg(long, value_delimiter = ',')]
        modes: Vec<String>,
        /// Do not pin wrk and the nginx workers to separate CPUs.
        #[arg(long)]
        no_pin: bool,
        /// Also run bpftrace with histograms, `strace -c -f`, `--syscalls all` and
        /// `--writes-from-proc` (static workload only).
        #[arg(long)]
        extra_modes: bool,
        /// Leave kernel.bpf_stats_enabled alone: no probe hits per request, no ns per
        /// program run, no hit cost (by default the measured rounds run with it off, then
        /// one extra run per BPF mode with it on counts the hits, out of the ratios: the
        /// kernel's own timing of each program run, tens of ns, would add to every BPF
        /// mode's cost; it is restored after).
        #[arg(long)]
        no_bpf_stats: bool,
        /// Write the results as markdown to this file (default docs/benchmarks.md; a
        /// relative path is under the workspace root).
        #[arg(long, num_args = 0..=1, default_missing_value = "docs/benchmarks.md")]
        write_doc: Option<PathBuf>,
    },
    /// Long run with reloads: exact accept totals and flat probe RSS.
    Soak {
        /// Minutes of load.
        #[arg(long, default_value_t = 10)]
        minutes: u64,
        /// Reloads (SIGHUP) per minute.
        #[arg(long, default_value_t = 3)]
        reloads_per_minute: u64,
        /// Client threads, each opening one connection per request.
        #[arg(long, default_value_t = 4)]
        clients: usize,
    },
}

/// The workspace root (xtask's parent directory).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Whether xtask runs as root (`id -u` says 0).
fn is_root() -> bool {
    output_of(Command::new("id").arg("-u"))
        .map(|s| s.trim() == "0")
        .unwrap_or(false)
}

/// Where `cargo install` puts binaries: `$CARGO_HOME/bin`, else `~/.cargo/bin`.
fn cargo_bin_dir() -> PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into())).join(".cargo")
        })
        .join("bin")
}

/// `cargo <subcommand> --release --package <p>...` in the workspace root.
pub(crate) fn cargo_release(subcommand: &str, packages: &[&str]) -> Command {
    let mut cmd = Command::new("cargo");
    cmd.current_dir(workspace_root())
        .args([subcommand, "--release"]);
    for p in packages {
        cmd.args(["--package", p]);
    }
    cmd
}

/// The crates of the unit tests (the library and binary, the common crate, xtask).
const UNIT_TESTED: &[&str] = &["nginx-probe", "nginx-probe-common", "xtask"];

/// The host crates clippy checks together (the eBPF crate is checked on its own).
const HOST_CRATES: &[&str] = &[
    "nginx-probe",
    "nginx-probe-common",
    "nginx-probe-tests",
    "xtask",
];

/// Builds nginx-probe in release (the eBPF object by its build.rs); returns the binary.
fn build_probe() -> Result<PathBuf> {
    run(&mut cargo_release("build", &["nginx-probe"]))?;
    Ok(workspace_root().join("target/release/nginx-probe"))
}

fn test(args: &[String]) -> Result<()> {
    setup()?;
    let probe = build_probe()?;
    println!("test: unit tests");
    run(&mut cargo_release("test", UNIT_TESTED))?;
    if !is_root() {
        bail!("the integration tests load eBPF programs and start nginx: run them as root (sudo cargo xtask test)");
    }
    println!("test: integration tests against a real nginx (root)");
    run_with_deadline(
        cargo_release("test", &["nginx-probe-tests"])
            .env("NGINX_PROBE_BIN", &probe)
            .args(["--no-fail-fast", "--", "--test-threads=1"])
            .args(args),
        INTEGRATION_DEADLINE,
    )
}

/// Longest the integration suite may run (it takes about 11 minutes on an idle 2-core
/// machine): a test that hangs fails the suite instead of stalling CI.
const INTEGRATION_DEADLINE: Duration = Duration::from_secs(30 * 60);

fn lint() -> Result<()> {
    let root = workspace_root();
    run(cargo_release("clippy", HOST_CRATES).args(["--all-targets", "--", "-D", "warnings"]))?;
    // The eBPF crate on its own: feature unification with the host crates breaks a
    // workspace-wide run.
    run(Command::new("rustup")
        .current_dir(root.join("nginx-probe-ebpf"))
        .args([
            "run",
            EBPF_TOOLCHAIN,
            "cargo",
            "clippy",
            "--release",
            "--target",
            "bpfel-unknown-none",
            "-Z",
            "build-std=core",
            "--",
            "-D",
            "warnings",
        ]))?;
    Ok(())
}

/// Runs nginx-probe's `metrics_doc` example: the docs' metrics table from the code.
fn metrics_doc(write: bool) -> Result<()> {
    let mut cmd = cargo_release("run", &["nginx-probe"]);
    cmd.args(["--quiet", "--example", "metrics_doc"]);
    if write {
        cmd.args(["--", "--write"]);
    }
    run(&mut cmd)
}

fn run_claims(
    quick: bool,
    repeat: u32,
    pin: bool,
    out: Option<PathBuf>,
    filter: Vec<String>,
) -> Result<()> {
    // Bad input first, before minutes of setup and build.
    claims::select(&filter)?;
    setup()?;
    let probe = build_probe()?;
    if !is_root() {
        bail!("the claims lab loads eBPF programs and starts nginx: run it as root (sudo cargo xtask claims)");
    }
    let out = out.unwrap_or_else(|| workspace_root().join("target/claims"));
    let repeat = if quick { 1 } else { repeat as usize };
    claims::claims(
        &probe,
        &claims::Options {
            quick,
            out,
            filter,
            repeat,
            pin,
        },
    )
}

fn main() {
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Setup => setup(),
        Cmd::Demo { pid, duration } => demo::demo(pid, duration),
        Cmd::Test { args } => test(&args),
        Cmd::Lint => lint(),
        Cmd::MetricsDoc { write } => metrics_doc(write),
        Cmd::Claims {
            quick,
            repeat,
            no_pin,
            out,
            claims,
        } => run_claims(quick, repeat, !no_pin, out, claims),
        Cmd::Dist { check } => setup().and_then(|_| dist::dist(check)),
        Cmd::Bench { which } => match which {
            BenchCmd::Overhead {
                workload,
                rounds,
                secs,
                modes,
                no_pin,
                extra_modes,
                no_bpf_stats,
                write_doc,
            } => {
                let opts = overhead::Options {
                    workload,
                    rounds,
                    secs,
                    modes,
                    pin: !no_pin,
                    extra_modes,
                    bpf_stats: !no_bpf_stats,
                    write_doc,
                };
                let abs = opts.write_doc.as_ref().map(|p| workspace_root().join(p));
                setup()
                    .and_then(|_| build_probe())
                    .and_then(|p| overhead::overhead(&p, &opts, abs.as_deref()))
            }
            BenchCmd::Soak {
                minutes,
                reloads_per_minute,
                clients,
            } => setup()
                .and_then(|_| build_probe())
                .and_then(|p| bench::soak(&p, minutes, reloads_per_minute, clients)),
        },
    };
    if let Err(e) = res {
        eprintln!("xtask: {e:#}");
        std::process::exit(1);
    }
}
