//! `cargo xtask setup`: what building and testing need, installed when missing and
//! checked otherwise (idempotent): Debian packages, the pinned nightly for the eBPF
//! crate, bpf-linker, the musl target and cargo-deb, the Debian 13 root
//! ([`crate::trixie`]) and the two source-built nginx ([`crate::source_nginx`]: configure's
//! defaults, and OpenSSL linked statically).

use std::process::{Command, Stdio};

use anyhow::{bail, Result};

use crate::{
    cargo_bin_dir,
    command::{output_of, run},
    dist, is_root, source_nginx, trixie,
};

/// The nightly used for the eBPF crate; its LLVM (22) matches bpf-linker's.
pub const EBPF_TOOLCHAIN: &str = "nightly-2026-05-20";
const BPF_LINKER_VERSION: &str = "0.13.0";
/// Debian packages: LLVM 22 for bpf-linker, the nginx under test, load generators,
/// bpftool (tests check nothing stays loaded), peers for benchmarks, and chromium (the
/// HTML report test renders the page headless).
const DEBIAN_PACKAGES: &[&str] = &[
    "llvm-22-dev",
    "libpolly-22-dev",
    "libzstd-dev",
    "zlib1g-dev",
    // libssl.a and libcrypto.a for the nginx linked with OpenSSL statically.
    "libssl-dev",
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

/// Every step, in order; each says what it found or did.
pub fn setup() -> Result<()> {
    debian_packages()?;
    ebpf_toolchain()?;
    bpf_linker()?;
    // For `cargo xtask dist`: the static target and cargo-deb.
    dist::ensure_musl_target()?;
    cargo_deb()?;
    // The Debian 13 root with nginx 1.26 for the nginx126 integration tests.
    trixie::ensure_root()?;
    // nginx 1.26.3 built from source with configure's defaults (no stub_status).
    source_nginx::ensure()?;
    // The same source linked with OpenSSL statically (no libssl mapped).
    source_nginx::ensure_static_ssl()
}

/// Whether dpkg has the Debian package `name` installed.
pub fn deb_installed(name: &str) -> bool {
    output_of(Command::new("dpkg-query").args(["-W", "-f=${Status}", name]))
        .is_some_and(|s| s.contains("install ok installed"))
}

/// [`DEBIAN_PACKAGES`], installed with apt-get when one is missing (root).
fn debian_packages() -> Result<()> {
    let missing: Vec<&str> = DEBIAN_PACKAGES
        .iter()
        .copied()
        .filter(|p| !deb_installed(p))
        .collect();
    if missing.is_empty() {
        println!("setup: Debian packages present");
        return Ok(());
    }
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
    Ok(())
}

/// The pinned nightly with rust-src (eBPF crates are built with -Z build-std=core) and
/// clippy (`cargo xtask lint` checks the eBPF crate with it).
fn ebpf_toolchain() -> Result<()> {
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
        return Ok(());
    }
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
    run(&mut cmd)
}

/// bpf-linker built against LLVM 22.
fn bpf_linker() -> Result<()> {
    let linker = cargo_bin_dir().join("bpf-linker");
    let version = output_of(Command::new(&linker).arg("--version")).unwrap_or_default();
    if version.contains(BPF_LINKER_VERSION) {
        println!("setup: bpf-linker {BPF_LINKER_VERSION} present");
        return Ok(());
    }
    println!("setup: building bpf-linker {BPF_LINKER_VERSION} against LLVM 22 (about 3 minutes)");
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
        .env("PATH", path))
}

/// cargo-deb at [`CARGO_DEB_VERSION`].
fn cargo_deb() -> Result<()> {
    let deb = output_of(Command::new(cargo_bin_dir().join("cargo-deb")).arg("--version"))
        .unwrap_or_default();
    if deb.contains(CARGO_DEB_VERSION) {
        println!("setup: cargo-deb {CARGO_DEB_VERSION} present");
        return Ok(());
    }
    println!("setup: installing cargo-deb {CARGO_DEB_VERSION}");
    run(Command::new("cargo").args([
        "install",
        "cargo-deb",
        "--locked",
        "--version",
        CARGO_DEB_VERSION,
    ]))
}
