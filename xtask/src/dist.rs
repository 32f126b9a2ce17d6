//! `cargo xtask dist`: the release artifacts in `target/dist/`.
//!
//! - `nginx-probe`: a static x86_64 musl binary (the eBPF object embedded as in every
//!   build), stripped: it runs on any x86_64 Linux with the kernel features nginx-probe
//!   needs, whatever its libc (Debian 11, Ubuntu 20.04, RHEL 8, Alpine).
//! - `nginx-probe.8.gz` (man page from the clap definition) and `completions/` (bash,
//!   zsh, fish), written by the binary's hidden `generate-assets` command.
//! - `nginx-probe_<version>-1_amd64.deb` (cargo-deb, metadata in nginx-probe/Cargo.toml):
//!   the binary, the man page, the completions, the systemd unit, the Grafana dashboard
//!   and the alert rules under /usr/share/nginx-probe, the licenses.
//!
//! With `--check`: the dist tests (`tests/tests/integration/dist.rs`: static binary, `dpkg-deb -c`,
//! `man -l`) and the integration suite's basic accept test run with the static binary.

use std::{path::Path, process::Command, time::Instant};

use anyhow::{bail, Context as _, Result};

use crate::{
    cargo_release,
    command::{capture, output_of, run},
    workspace_root,
};

/// The static target.
pub const MUSL_TARGET: &str = "x86_64-unknown-linux-musl";

/// Adds the musl target to the stable toolchain when missing (`cargo xtask setup`).
pub fn ensure_musl_target() -> Result<()> {
    let installed = output_of(Command::new("rustup").args(["target", "list", "--installed"]))
        .unwrap_or_default();
    if installed.lines().any(|l| l.trim() == MUSL_TARGET) {
        println!("setup: rust target {MUSL_TARGET} present");
        return Ok(());
    }
    println!("setup: adding rust target {MUSL_TARGET}");
    run(Command::new("rustup").args(["target", "add", MUSL_TARGET]))
}

/// Builds everything into `target/dist`; with `check`, verifies it.
pub fn dist(check: bool) -> Result<()> {
    let root = workspace_root();
    let out = root.join("target/dist");
    std::fs::create_dir_all(&out)?;
    let started = Instant::now();

    // 1. The static binary.
    run(cargo_release("build", &["nginx-probe"]).args(["--target", MUSL_TARGET]))?;
    let built = root.join(format!("target/{MUSL_TARGET}/release/nginx-probe"));
    let bin = out.join("nginx-probe");
    std::fs::copy(&built, &bin).with_context(|| format!("copy {}", built.display()))?;
    run(Command::new("strip").arg(&bin))?;
    let built_s = started.elapsed().as_secs_f64();
    assert_static(&bin)?;

    // 2. Man page and completions, from the binary's own clap definition.
    run(Command::new(&bin).arg("generate-assets").arg(&out))?;
    let man = out.join("nginx-probe.8");
    let _ = std::fs::remove_file(out.join("nginx-probe.8.gz"));
    run(Command::new("gzip").args(["-9", "-n", "-f"]).arg(&man))?;

    // 3. The .deb.
    let cargo_deb = crate::cargo_bin_dir().join("cargo-deb");
    if !cargo_deb.exists() {
        bail!("cargo-deb is missing: run `cargo xtask setup`");
    }
    for old in std::fs::read_dir(&out)?.flatten() {
        if old.path().extension().is_some_and(|e| e == "deb") {
            std::fs::remove_file(old.path())?;
        }
    }
    run(Command::new("cargo")
        .current_dir(&root)
        .args([
            "deb",
            "--package",
            "nginx-probe",
            "--no-build",
            "--no-strip",
            "--target",
            MUSL_TARGET,
            "--output",
        ])
        .arg(&out))?;
    let deb = find_deb(&out)?;
    println!(
        "dist: {} ({} KiB, static, stripped), {} ({} KiB) in {:.0} s (binary built in {:.0} s)",
        bin.display(),
        std::fs::metadata(&bin)?.len() / 1024,
        deb.display(),
        std::fs::metadata(&deb)?.len() / 1024,
        started.elapsed().as_secs_f64(),
        built_s,
    );
    if check {
        dist_check(&bin)?;
    }
    Ok(())
}

/// The one .deb in `dir`.
pub fn find_deb(dir: &Path) -> Result<std::path::PathBuf> {
    let debs: Vec<_> = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .collect();
    match debs.as_slice() {
        [one] => Ok(one.clone()),
        _ => bail!("expected one .deb in {}, found {debs:?}", dir.display()),
    }
}

/// Fails unless `ldd` calls `bin` static.
fn assert_static(bin: &Path) -> Result<()> {
    let out = capture(Command::new("ldd").arg(bin))?;
    let text = out.stdout + &out.stderr;
    if !(text.contains("not a dynamic executable") || text.contains("statically linked")) {
        bail!("{} is not static: ldd says {text}", bin.display());
    }
    Ok(())
}

/// `cargo test --release -p nginx-probe-tests --test integration -- <harness>`.
fn integration_tests(harness: &[&str]) -> Command {
    let mut cmd = cargo_release("test", &["nginx-probe-tests"]);
    cmd.args(["--test", "integration", "--"]).args(harness);
    cmd
}

/// The dist tests and the basic accept test with the static binary (root).
fn dist_check(bin: &Path) -> Result<()> {
    run(&mut integration_tests(&[
        "--ignored",
        "--test-threads=1",
        "dist::",
    ]))?;
    run(integration_tests(&[
        "--test-threads=1",
        "--exact",
        "accepts::exactly_500_connections_give_exactly_500_accepts",
    ])
    .env("NGINX_PROBE_BIN", bin))
}
