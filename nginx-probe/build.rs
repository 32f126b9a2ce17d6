//! Builds `nginx-probe-ebpf` for the BPF target with the pinned nightly toolchain
//! (see `cargo xtask setup`), and places the object in OUT_DIR, where `loader.rs`
//! embeds it with `include_bytes_aligned!`.
use anyhow::{anyhow, Context as _};
use aya_build::{Package, Toolchain};

/// The nightly whose LLVM (22) matches bpf-linker's.
const EBPF_TOOLCHAIN: &str = "nightly-2026-05-20";

/// Sets `NGINX_PROBE_GIT_SUFFIX` for `--version`: ` (git <12 hex>)`, the commit built,
/// or empty outside a git checkout (a source tarball, `cargo install` from a registry,
/// git missing). Uncommitted changes are not flagged: the build script does not rerun
/// on every edit, so such a flag could be stale.
fn git_version(manifest_dir: &std::path::Path) {
    let git = |args: &[&str]| -> Option<String> {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(manifest_dir)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let suffix = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(commit) if !commit.is_empty() => {
            // A new commit or checkout moves HEAD (or its reflog): build again.
            if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
                println!("cargo:rerun-if-changed={dir}/HEAD");
                println!("cargo:rerun-if-changed={dir}/logs/HEAD");
            }
            format!(" (git {commit})")
        }
        _ => String::new(),
    };
    println!("cargo:rustc-env=NGINX_PROBE_GIT_SUFFIX={suffix}");
}

fn main() -> anyhow::Result<()> {
    let manifest_dir = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let ebpf_dir = manifest_dir
        .parent()
        .ok_or_else(|| anyhow!("no workspace root"))?
        .join("nginx-probe-ebpf");
    let root_dir = ebpf_dir.to_str().ok_or_else(|| anyhow!("non-UTF-8 path"))?;
    git_version(&manifest_dir);
    println!("cargo:rerun-if-changed=../nginx-probe-common/src");
    // aya-build relays every line the inner cargo prints as a cargo warning; keep the
    // inner build quiet so only real diagnostics surface.
    // SAFETY: build scripts are single-threaded here; nothing else reads the env.
    unsafe { std::env::set_var("CARGO_TERM_QUIET", "true") };
    aya_build::build_ebpf(
        [Package {
            name: "nginx-probe-ebpf",
            root_dir,
            ..Default::default()
        }],
        Toolchain::Custom(EBPF_TOOLCHAIN),
    )
    .context("building the eBPF programs failed: run `cargo xtask setup` first (it installs the pinned nightly, rust-src and bpf-linker)")
}
