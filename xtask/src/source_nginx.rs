//! `cargo xtask setup`'s step for the source-built nginx the `source_build` integration
//! tests run: nginx 1.26.3 from its upstream tarball (Debian 13's `.orig.tar.gz`,
//! fetched with apt's source index, hash-checked by apt), built with `./configure`'s
//! defaults (no stub_status module: nginx's `ngx_stat_*` counters are absent) minus the
//! rewrite and gzip modules (no PCRE or zlib headers needed), into
//! [`SOURCE_NGINX_DIR`]. About 25 s of build; skipped when the binary is there and says
//! 1.26.3. Built in `DIR.tmp`, renamed only when complete.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{bail, Context as _, Result};
use nginx_probe_tests::container::{source_nginx_dir, SOURCE_NGINX_VERSION};

use crate::{
    command::{capture, run},
    is_root,
};

/// The source index apt reads (one line, Debian 13's main).
const SOURCES: &str = "deb-src http://deb.debian.org/debian trixie main\n";

/// What `<bin> -v` says (on stderr), trimmed; empty when it does not run.
fn version(bin: &Path) -> String {
    capture(Command::new(bin).arg("-v"))
        .map(|o| o.stderr.trim().to_string())
        .unwrap_or_default()
}

/// Builds the source nginx unless it is already there.
pub fn ensure() -> Result<()> {
    let dir = source_nginx_dir();
    let bin = dir.join("sbin/nginx");
    if version(&bin).contains(SOURCE_NGINX_VERSION) {
        println!("setup: source-built nginx {} present", bin.display());
        return Ok(());
    }
    if !is_root() {
        bail!(
            "setup must run as root to build nginx from source into {}",
            dir.display()
        );
    }
    let tmp = dir.with_extension("tmp");
    let _ = fs::remove_dir_all(&tmp);
    let _ = fs::remove_dir_all(&dir);
    let work = tmp.join("work");
    let src = fetch_source(&work)?;
    build(&src, &dir)?;
    let _ = fs::remove_dir_all(&tmp);
    if !version(&bin).contains(SOURCE_NGINX_VERSION) {
        bail!("the source build left no working {}", bin.display());
    }
    println!("setup: source-built nginx {} made", bin.display());
    Ok(())
}

/// `apt-get <args>` reading only [`SOURCES`], with its lists and cache under `work`.
fn apt(work: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("apt-get");
    c.current_dir(work)
        .arg("-q")
        .arg(format!(
            "-oDir::Etc::SourceList={}",
            work.join("src.list").display()
        ))
        .arg("-oDir::Etc::SourceParts=/dev/null")
        .arg(format!(
            "-oDir::State::Lists={}",
            work.join("lists").display()
        ))
        .arg(format!("-oDir::Cache={}", work.join("cache").display()))
        .args(args);
    c
}

/// Fetches nginx 1.26.3's upstream tarball into `work` with apt and unpacks it there;
/// returns the source directory.
fn fetch_source(work: &Path) -> Result<PathBuf> {
    fs::create_dir_all(work.join("lists/partial"))
        .and_then(|()| fs::create_dir_all(work.join("cache/archives/partial")))
        .with_context(|| format!("mkdir {}", work.display()))?;
    fs::write(work.join("src.list"), SOURCES)?;
    println!("setup: fetching nginx 1.26.3's source (Debian 13's orig tarball, 1.3 MB)");
    run(&mut apt(work, &["update"]))?;
    // The Debian packaging part may 404 (a newer revision on the mirror); the upstream
    // tarball is all that is needed, and its presence is checked below.
    let _ = apt(work, &["source", "--download-only", "nginx"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let tarball = work.join("nginx_1.26.3.orig.tar.gz");
    if !tarball.exists() {
        bail!("apt-get source did not fetch {}", tarball.display());
    }
    run(Command::new("tar")
        .current_dir(work)
        .arg("xzf")
        .arg(&tarball))?;
    Ok(work.join("nginx-1.26.3"))
}

/// `./configure` with its defaults minus rewrite and gzip, `make -j2`, `make install`
/// into `dir`.
fn build(src: &Path, dir: &Path) -> Result<()> {
    println!(
        "setup: building nginx 1.26.3 from source into {} (about 30 s)",
        dir.display()
    );
    run(Command::new("./configure")
        .current_dir(src)
        .arg(format!("--prefix={}", dir.display()))
        .args([
            "--without-http_rewrite_module",
            "--without-http_gzip_module",
        ])
        .stdout(Stdio::null()))?;
    run(Command::new("make")
        .current_dir(src)
        .args(["-j2"])
        .stdout(Stdio::null()))?;
    run(Command::new("make")
        .current_dir(src)
        .arg("install")
        .stdout(Stdio::null()))
}
