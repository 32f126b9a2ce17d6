//! `cargo xtask setup`'s steps for the source-built nginx the `source_build` and
//! `static_ssl` integration tests run: nginx 1.26.3 from its upstream tarball (Debian
//! 13's `.orig.tar.gz`, fetched with apt's source index, hash-checked by apt), built
//! twice, without the rewrite and gzip modules (no PCRE or zlib headers needed):
//! - with `./configure`'s defaults (no stub_status module: nginx's `ngx_stat_*`
//!   counters are absent) into [`source_nginx_dir`], about 25 s of build;
//! - with the SSL, HTTP/2 and stub_status modules, linked with Debian's static
//!   `libssl.a` and `libcrypto.a` (package libssl-dev: OpenSSL inside the binary, no
//!   libssl mapped, as custom and quictls/BoringSSL builds have it) into
//!   [`static_ssl_nginx_dir`], about 20 s; checked after the build: `ldd` lists no
//!   libssl and `nm` finds `SSL_do_handshake` in the binary.
//!
//! Each is skipped when its binary is there and passes its check; built in `DIR.tmp`,
//! renamed only when complete.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{bail, Context as _, Result};
use nginx_probe_tests::container::{source_nginx_dir, static_ssl_nginx_dir, SOURCE_NGINX_VERSION};

use crate::{
    command::{capture, output_of, run},
    is_root,
};

/// The source index apt reads (one line, Debian 13's main).
const SOURCES: &str = "deb-src http://deb.debian.org/debian trixie main\n";

/// One build of the tarball: what it is called, where it goes, what `./configure`
/// gets beyond `--prefix`, and what the installed binary must pass.
struct Build {
    /// How setup's lines name it.
    what: &'static str,
    /// The install prefix.
    dir: PathBuf,
    /// Builds the link directory under the work directory when it needs one (the
    /// static OpenSSL archives) and returns the configure arguments.
    configure: fn(&Path) -> Result<Vec<String>>,
    /// The check of the installed binary: None when it passes, else one line.
    check: fn(&Path) -> Option<String>,
    /// The build's duration as setup announces it.
    takes: &'static str,
}

/// What `<bin> -v` says (on stderr), trimmed; empty when it does not run.
fn version(bin: &Path) -> String {
    capture(Command::new(bin).arg("-v"))
        .map(|o| o.stderr.trim().to_string())
        .unwrap_or_default()
}

/// Builds the default-configure nginx unless it is already there.
pub fn ensure() -> Result<()> {
    ensure_build(&Build {
        what: "source-built nginx",
        dir: source_nginx_dir(),
        configure: |_| Ok(Vec::new()),
        check: |_| None,
        takes: "about 30 s",
    })
}

/// Builds the nginx linked with OpenSSL statically unless it is already there.
pub fn ensure_static_ssl() -> Result<()> {
    ensure_build(&Build {
        what: "static-OpenSSL nginx",
        dir: static_ssl_nginx_dir(),
        configure: static_ssl_configure,
        check: static_ssl_check,
        takes: "about 20 s",
    })
}

/// Whether `bin` says 1.26.3 and passes the build's check (None), else why not.
fn checked(build: &Build, bin: &Path) -> Option<String> {
    let v = version(bin);
    if !v.contains(SOURCE_NGINX_VERSION) {
        return Some(format!("{} -v says {v:?}", bin.display()));
    }
    (build.check)(bin)
}

/// Fetches, configures, builds and installs `build` unless its binary is there and
/// passes its check; fails with one line when the new binary does not.
fn ensure_build(build: &Build) -> Result<()> {
    let bin = build.dir.join("sbin/nginx");
    if checked(build, &bin).is_none() {
        println!("setup: {} {} present", build.what, bin.display());
        return Ok(());
    }
    if !is_root() {
        bail!(
            "setup must run as root to build nginx from source into {}",
            build.dir.display()
        );
    }
    // `DIR.tmp`, appended: `with_extension` would cut `nginx-1.26.3-src` at its last dot.
    let mut tmp = build.dir.clone().into_os_string();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let _ = fs::remove_dir_all(&tmp);
    let _ = fs::remove_dir_all(&build.dir);
    let work = tmp.join("work");
    let src = fetch_source(&work)?;
    let args = (build.configure)(&work)?;
    println!(
        "setup: building nginx 1.26.3 from source into {} ({})",
        build.dir.display(),
        build.takes
    );
    make(&src, &build.dir, &args)?;
    let _ = fs::remove_dir_all(&tmp);
    if let Some(why) = checked(build, &bin) {
        bail!("the {} build is not what the tests need: {why}", build.what);
    }
    println!("setup: {} {} made", build.what, bin.display());
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

/// `./configure` with its defaults minus rewrite and gzip plus `args`, `make -j2`,
/// `make install` into `dir`.
fn make(src: &Path, dir: &Path, args: &[String]) -> Result<()> {
    run(Command::new("./configure")
        .current_dir(src)
        .arg(format!("--prefix={}", dir.display()))
        .args([
            "--without-http_rewrite_module",
            "--without-http_gzip_module",
        ])
        .args(args)
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

/// The configure arguments of the static-OpenSSL build: the modules, and `-L` to a
/// directory under `work` holding only links to Debian's `libssl.a` and `libcrypto.a`
/// (found with `cc -print-file-name`), so nginx's `-lssl -lcrypto` resolve to the
/// archives, not to the shared libraries beside them.
fn static_ssl_configure(work: &Path) -> Result<Vec<String>> {
    let lib = work.join("static-openssl");
    fs::create_dir_all(&lib).with_context(|| format!("mkdir {}", lib.display()))?;
    for a in ["libssl.a", "libcrypto.a"] {
        let found = output_of(Command::new("cc").arg(format!("-print-file-name={a}")))
            .map(|s| PathBuf::from(s.trim()))
            .filter(|p| p.is_absolute() && p.is_file());
        let Some(path) = found else {
            bail!("cc finds no {a}: install libssl-dev (cargo xtask setup does)");
        };
        std::os::unix::fs::symlink(&path, lib.join(a))
            .with_context(|| format!("link {} to {}", lib.join(a).display(), path.display()))?;
    }
    Ok(vec![
        "--with-http_ssl_module".into(),
        "--with-http_v2_module".into(),
        "--with-http_stub_status_module".into(),
        format!("--with-ld-opt=-L{} -ldl -lpthread", lib.display()),
    ])
}

/// The static-OpenSSL binary's check: `ldd` lists no libssl, and `nm` finds
/// `SSL_do_handshake` defined in it.
fn static_ssl_check(bin: &Path) -> Option<String> {
    let ldd = output_of(Command::new("ldd").arg(bin)).unwrap_or_default();
    if let Some(l) = ldd.lines().find(|l| l.contains("libssl")) {
        return Some(format!("{} maps libssl ({})", bin.display(), l.trim()));
    }
    let nm = output_of(Command::new("nm").arg(bin)).unwrap_or_default();
    let defined = nm.lines().any(|l| {
        let mut f = l.split_whitespace();
        matches!(
            (f.next(), f.next(), f.next()),
            (Some(_), Some("T" | "t"), Some("SSL_do_handshake"))
        )
    });
    if !defined {
        return Some(format!("nm finds no SSL_do_handshake in {}", bin.display()));
    }
    None
}
