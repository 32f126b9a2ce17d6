//! `cargo xtask`: orchestration only. `setup` installs what building and testing need,
//! `demo` shows nginx-probe on a real nginx, `test` runs unit and root integration tests,
//! `lint` runs clippy on the host crates and, on its own, on the eBPF crate; `claims`
//! checks the seeds' tuning claims with nginx-probe; `bench` measures it.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _, Result};

mod bench;
mod claims;
mod dist;
mod load;
mod overhead;
mod source_nginx;
mod trixie;
use clap::{Parser, Subcommand};

/// The nightly used for the eBPF crate; its LLVM (22) matches bpf-linker's.
const EBPF_TOOLCHAIN: &str = "nightly-2026-05-20";
const BPF_LINKER_VERSION: &str = "0.13.0";
/// Debian packages: LLVM 22 for bpf-linker, the nginx under test, load generators,
/// bpftool (tests check nothing stays loaded), peers for benchmarks, and chromium (the
/// HTML report test renders the page headless).
const DEBIAN_PACKAGES: &[&str] = &[
    "llvm-22-dev",
    "libpolly-22-dev",
    "libzstd-dev",
    "zlib1g-dev",
    "nginx",
    "wrk",
    "hey",
    "curl",
    "openssl",
    "bpftool",
    "bpftrace",
    "strace",
    "python3",
    "util-linux",
    "tmux",
    "chromium",
    // promtool checks the alert rules and a real scrape (tests/tests/integration/contrib.rs).
    "prometheus",
    // `man -l` renders the generated man page (cargo xtask dist --check).
    "man-db",
];

/// cargo-deb builds the .deb of `cargo xtask dist`.
const CARGO_DEB_VERSION: &str = "3.8.0";

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
        /// accept_mutex, tcp_nopush).
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
        /// program run (by default the bench turns it on for its runs and restores it:
        /// the kernel's own timing of each program run, tens of ns, adds to every BPF
        /// mode's cost).
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

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("failed to run {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
    }
    Ok(())
}

fn output_of(cmd: &mut Command) -> Option<String> {
    cmd.stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
}

fn is_root() -> bool {
    output_of(Command::new("id").arg("-u"))
        .map(|s| s.trim() == "0")
        .unwrap_or(false)
}

fn cargo_bin_dir() -> PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into())).join(".cargo")
        })
        .join("bin")
}

fn setup() -> Result<()> {
    // 1. Debian packages.
    let missing: Vec<&str> = DEBIAN_PACKAGES
        .iter()
        .copied()
        .filter(|p| {
            output_of(Command::new("dpkg-query").args(["-W", "-f=${Status}", p]))
                .map(|s| !s.contains("install ok installed"))
                .unwrap_or(true)
        })
        .collect();
    if missing.is_empty() {
        println!("setup: Debian packages present");
    } else {
        if !is_root() {
            bail!(
                "setup must run as root to install {}: run it with sudo",
                missing.join(" ")
            );
        }
        println!("setup: installing {}", missing.join(" "));
        run(Command::new("apt-get").arg("update").arg("-q"))?;
        run(Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"))?;
        // The package starts a system nginx on port 80; the tests start their own.
        // Likewise the prometheus package's server: only promtool is used.
        for unit in ["nginx", "prometheus"] {
            let _ = Command::new("systemctl")
                .args(["disable", "--now", unit])
                .stderr(Stdio::null())
                .status();
        }
    }

    // 2. The pinned nightly with rust-src (eBPF crates are built with -Z build-std=core)
    //    and clippy (`cargo xtask lint` checks the eBPF crate with it).
    let installed = output_of(Command::new("rustup").args([
        "component",
        "list",
        "--installed",
        "--toolchain",
        EBPF_TOOLCHAIN,
    ]))
    .unwrap_or_default();
    let want = ["rust-src", "clippy"];
    let lacking: Vec<&str> = want
        .iter()
        .copied()
        .filter(|c| !installed.lines().any(|l| l.starts_with(c)))
        .collect();
    if lacking.is_empty() {
        println!("setup: {EBPF_TOOLCHAIN} with rust-src and clippy present");
    } else {
        println!(
            "setup: installing {EBPF_TOOLCHAIN} with {}",
            lacking.join(", ")
        );
        let mut cmd = Command::new("rustup");
        cmd.args([
            "toolchain",
            "install",
            EBPF_TOOLCHAIN,
            "--profile",
            "minimal",
        ]);
        for c in &want {
            cmd.args(["--component", c]);
        }
        run(&mut cmd)?;
    }

    // 3. bpf-linker built against LLVM 22.
    let linker = cargo_bin_dir().join("bpf-linker");
    let version = output_of(Command::new(&linker).arg("--version")).unwrap_or_default();
    if version.contains(BPF_LINKER_VERSION) {
        println!("setup: bpf-linker {BPF_LINKER_VERSION} present");
    } else {
        println!(
            "setup: building bpf-linker {BPF_LINKER_VERSION} against LLVM 22 (about 3 minutes)"
        );
        let path = format!(
            "/usr/lib/llvm-22/bin:{}",
            std::env::var("PATH").unwrap_or_default()
        );
        run(Command::new("cargo")
            .args([
                "install",
                "bpf-linker",
                "--locked",
                "--version",
                BPF_LINKER_VERSION,
                "--no-default-features",
                "--features",
                "llvm-22",
            ])
            .env("PATH", path))?;
    }

    // 4. For `cargo xtask dist`: the static target and cargo-deb.
    dist::ensure_musl_target()?;
    let deb = output_of(Command::new(cargo_bin_dir().join("cargo-deb")).arg("--version"))
        .unwrap_or_default();
    if deb.contains(CARGO_DEB_VERSION) {
        println!("setup: cargo-deb {CARGO_DEB_VERSION} present");
    } else {
        println!("setup: installing cargo-deb {CARGO_DEB_VERSION}");
        run(Command::new("cargo").args([
            "install",
            "cargo-deb",
            "--locked",
            "--version",
            CARGO_DEB_VERSION,
        ]))?;
    }

    // 5. The Debian 13 root with nginx 1.26 for the nginx126 integration tests.
    trixie::ensure_root()?;

    // 6. nginx 1.26.3 built from source with configure's defaults (no stub_status).
    source_nginx::ensure()?;
    Ok(())
}

fn build_probe() -> Result<PathBuf> {
    run(Command::new("cargo").current_dir(workspace_root()).args([
        "build",
        "--release",
        "--package",
        "nginx-probe",
    ]))?;
    Ok(workspace_root().join("target/release/nginx-probe"))
}

fn demo(pid: Option<u32>, duration: u32) -> Result<()> {
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
    let secs = duration.to_string();
    if let Some(pid) = pid {
        println!(
            "demo: tracing nginx master {pid} for {duration} s (no load is generated: the numbers are its real traffic)"
        );
        let mut child = Command::new(&probe)
            .args([
                "--pid",
                &pid.to_string(),
                "--duration",
                &secs,
                "--hist",
                "accept4",
            ])
            .spawn()?;
        let status = wait_or_interrupt(&mut child, &interrupted)?;
        // Pass nginx-probe's exit code through (2 = bad --pid).
        if !status.success() {
            std::process::exit(status.code().unwrap_or(1));
        }
        return Ok(());
    }
    let nginx = nginx_probe_tests::Nginx::start(&nginx_probe_tests::NginxConfig::default());
    println!(
        "demo: throwaway nginx master {} (workers {:?}) on {} with prefix {}",
        nginx.master_pid(),
        nginx.worker_pids(),
        nginx.url(),
        nginx.prefix.display()
    );
    let mut probe_child = Command::new(&probe)
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
    println!("demo: wrk -t1 -c50 -d{duration}s {}", nginx.url());
    let mut wrk = Command::new("wrk")
        .args(["-t1", "-c50", &format!("-d{duration}s"), &nginx.url()])
        .stdout(Stdio::piped())
        .spawn()
        .context("start wrk (run `cargo xtask setup`)")?;
    let wrk_stdout = wrk.stdout.take();
    let wrk_reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut o) = wrk_stdout {
            let _ = std::io::Read::read_to_string(&mut o, &mut s);
        }
        s
    });
    let _ = wait_or_interrupt(&mut wrk, &interrupted)?;
    let status = wait_or_interrupt(&mut probe_child, &interrupted)?;
    let wrk_out = wrk_reader.join().unwrap_or_default();
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

/// Waits for `child`; once `interrupted` is set (Ctrl-C or SIGTERM to xtask), sends it
/// SIGINT (nginx-probe prints its summary, wrk its totals) and keeps waiting.
fn wait_or_interrupt(
    child: &mut std::process::Child,
    interrupted: &AtomicBool,
) -> Result<std::process::ExitStatus> {
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

fn test(args: &[String]) -> Result<()> {
    setup()?;
    let root = workspace_root();
    let probe = build_probe()?;
    println!("test: unit tests");
    run(Command::new("cargo").current_dir(&root).args([
        "test",
        "--release",
        "--package",
        "nginx-probe",
        "--package",
        "nginx-probe-common",
        "--package",
        "xtask",
    ]))?;
    if !is_root() {
        bail!("the integration tests load eBPF programs and start nginx: run them as root (sudo cargo xtask test)");
    }
    println!("test: integration tests against a real nginx (root)");
    run_with_deadline(
        Command::new("cargo")
            .current_dir(&root)
            .env("NGINX_PROBE_BIN", &probe)
            .args([
                "test",
                "--release",
                "--no-fail-fast",
                "--package",
                "nginx-probe-tests",
                "--",
                "--test-threads=1",
            ])
            .args(args),
        INTEGRATION_DEADLINE,
    )
}

/// Longest the integration suite may run (it takes about 11 minutes on an idle 2-core
/// machine): a test that hangs fails the suite instead of stalling CI.
const INTEGRATION_DEADLINE: Duration = Duration::from_secs(30 * 60);

/// Runs `cmd` in its own process group; past `deadline` the whole group (cargo, the
/// test binary, the nginx and probes it started) is killed and this fails.
fn run_with_deadline(cmd: &mut Command, deadline: Duration) -> Result<()> {
    use std::os::unix::process::CommandExt as _;
    let mut child = cmd
        .process_group(0)
        .spawn()
        .with_context(|| format!("failed to run {cmd:?}"))?;
    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            if !status.success() {
                bail!("{cmd:?} failed: {status}");
            }
            return Ok(());
        }
        if start.elapsed() > deadline {
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
            let _ = child.wait();
            bail!("{cmd:?} still ran after {} s: killed", deadline.as_secs());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn lint() -> Result<()> {
    let root = workspace_root();
    run(Command::new("cargo").current_dir(&root).args([
        "clippy",
        "--release",
        "--package",
        "nginx-probe",
        "--package",
        "nginx-probe-common",
        "--package",
        "nginx-probe-tests",
        "--package",
        "xtask",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
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
    let mut cmd = Command::new("cargo");
    cmd.current_dir(workspace_root()).args([
        "run",
        "--release",
        "--quiet",
        "--package",
        "nginx-probe",
        "--example",
        "metrics_doc",
    ]);
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
        Cmd::Demo { pid, duration } => demo(pid, duration),
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
