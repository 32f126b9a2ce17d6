//! The Debian 13 (trixie) root with nginx 1.26 that `cargo xtask setup` makes with
//! debootstrap, and the check that it is complete. Tests run nginx 1.26 in it "like a
//! container" ([`crate::NginxConfig::root`]).

use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// Where `cargo xtask setup` puts the trixie root (outside any checkout's `target/`, so
/// that `cargo clean` keeps it and every worktree shares it); `$NGINX_PROBE_TRIXIE_ROOT`
/// overrides it.
pub const TRIXIE_ROOT: &str = "/var/lib/nginx-probe-tests/trixie";

/// The nginx version the trixie root must hold (`nginx -v` in it).
pub const TRIXIE_NGINX_VERSION: &str = "nginx/1.26";

/// The trixie root's directory: `$NGINX_PROBE_TRIXIE_ROOT` or [`TRIXIE_ROOT`].
pub fn trixie_root_dir() -> PathBuf {
    dir_from_env("NGINX_PROBE_TRIXIE_ROOT", TRIXIE_ROOT)
}

/// Whether `dir` is a complete root: `chroot DIR /usr/sbin/nginx -v` prints
/// [`TRIXIE_NGINX_VERSION`], and curl, the workers' user and libssl are there. The error
/// is one line naming what is missing.
pub fn check_root(dir: &Path) -> Result<String, String> {
    let out = Command::new("chroot")
        .arg(dir)
        .args(["/usr/sbin/nginx", "-v"])
        .output()
        .map_err(|e| format!("cannot run chroot {}: {e}", dir.display()))?;
    let version = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if !out.status.success() || !version.contains(TRIXIE_NGINX_VERSION) {
        return Err(format!(
            "{} has no {TRIXIE_NGINX_VERSION} (chroot nginx -v: {version:?})",
            dir.display()
        ));
    }
    for f in ["usr/bin/curl", "etc/passwd"] {
        if !dir.join(f).exists() {
            return Err(format!("{} has no /{f}", dir.display()));
        }
    }
    let passwd = std::fs::read_to_string(dir.join("etc/passwd")).unwrap_or_default();
    if !passwd.lines().any(|l| l.starts_with("nobody:")) {
        return Err(format!("{} has no user nobody", dir.display()));
    }
    Ok(version)
}

/// The trixie root, complete; otherwise a panic with one line naming `cargo xtask
/// setup` (tests on nginx 1.26 fail, they do not skip).
pub fn trixie_root() -> PathBuf {
    require_root(&trixie_root_dir())
}

/// `dir` when it is a complete root ([`check_root`]); otherwise a panic with one line
/// naming `cargo xtask setup`.
pub fn require_root(dir: &Path) -> PathBuf {
    if let Err(e) = check_root(dir) {
        panic!("nginx 1.26 root missing: {e}; run `cargo xtask setup` (as root) to make it");
    }
    dir.to_path_buf()
}

/// Runs `chroot ROOT /usr/bin/curl -sk -o /dev/null -w %{http_code} <args> URL` (the
/// root's curl: 8.14 in trixie, with HTTP/3) and returns the HTTP status it printed
/// (0 when none). One URL per call: two URLs in one HTTP/3 call hung here.
pub fn curl_in_root(root: &Path, args: &[&str], url: &str) -> u16 {
    let out = Command::new("timeout")
        .arg("20")
        .arg("chroot")
        .arg(root)
        .args([
            "/usr/bin/curl",
            "-skS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
        ])
        .args(args)
        .arg(url)
        .output()
        .expect("run chroot curl");
    let code = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    if code == 0 {
        // Why curl got no response, for the failing test's output.
        eprintln!(
            "curl {args:?} {url} in {}: {} {}",
            root.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    code
}

/// Where `cargo xtask setup` installs nginx 1.26.3 built from source with configure's
/// defaults (no stub_status module); `$NGINX_PROBE_SOURCE_NGINX` overrides it.
pub const SOURCE_NGINX: &str = "/var/lib/nginx-probe-tests/nginx-1.26.3-src";

/// The version the source build's `nginx -v` prints.
pub const SOURCE_NGINX_VERSION: &str = "nginx/1.26.3";

/// The source build's install prefix: `$NGINX_PROBE_SOURCE_NGINX` or [`SOURCE_NGINX`].
pub fn source_nginx_dir() -> PathBuf {
    dir_from_env("NGINX_PROBE_SOURCE_NGINX", SOURCE_NGINX)
}

/// The directory `$var` names, else `default`.
fn dir_from_env(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(default))
}

/// The source-built nginx binary; a panic naming `cargo xtask setup` when it is
/// missing (tests on it fail, they do not skip).
pub fn source_nginx() -> PathBuf {
    built_nginx(&source_nginx_dir())
}

/// Where `cargo xtask setup` installs the same nginx 1.26.3 source built with the SSL,
/// HTTP/2 and stub_status modules and linked with Debian's static `libssl.a` and
/// `libcrypto.a` (OpenSSL inside the binary, no libssl mapped);
/// `$NGINX_PROBE_STATIC_SSL_NGINX` overrides it.
pub const STATIC_SSL_NGINX: &str = "/var/lib/nginx-probe-tests/nginx-1.26.3-static-ssl";

/// The static-OpenSSL build's install prefix: `$NGINX_PROBE_STATIC_SSL_NGINX` or
/// [`STATIC_SSL_NGINX`].
pub fn static_ssl_nginx_dir() -> PathBuf {
    dir_from_env("NGINX_PROBE_STATIC_SSL_NGINX", STATIC_SSL_NGINX)
}

/// The nginx binary linked with OpenSSL statically; a panic naming `cargo xtask setup`
/// when it is missing.
pub fn static_ssl_nginx() -> PathBuf {
    built_nginx(&static_ssl_nginx_dir())
}

/// `DIR/sbin/nginx` when its `-v` says [`SOURCE_NGINX_VERSION`]; else a panic naming
/// `cargo xtask setup`.
fn built_nginx(dir: &Path) -> PathBuf {
    let bin = dir.join("sbin/nginx");
    let v = Command::new(&bin)
        .arg("-v")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
        .unwrap_or_default();
    if !v.contains(SOURCE_NGINX_VERSION) {
        panic!(
            "source-built nginx missing ({} -v: {v:?}); run `cargo xtask setup` (as root) to build it",
            bin.display()
        );
    }
    bin
}
