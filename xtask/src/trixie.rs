//! `cargo xtask setup`'s last step: the Debian 13 (trixie) root with nginx 1.26.3
//! (nginx-light: stub_status, HTTP/2, HTTP/3) and curl 8.14 (HTTP/3) that the
//! `nginx126` integration tests run nginx in, as a container. Made once with
//! debootstrap (about 2 minutes, ~250 MB) into `DIR.tmp`, renamed to `DIR` only when
//! complete, so a failed download leaves nothing half-made; skipped when `DIR` is
//! complete (`chroot DIR /usr/sbin/nginx -v` says 1.26).

use std::{fs, process::Command};

use anyhow::{bail, Context as _, Result};
use nginx_probe_tests::container::{check_root, trixie_root_dir};

use crate::{command::run, is_root};

/// The mirror debootstrap downloads trixie from.
const MIRROR: &str = "http://deb.debian.org/debian";

/// Makes the trixie root unless it is already complete.
pub fn ensure_root() -> Result<()> {
    let dir = trixie_root_dir();
    if let Ok(version) = check_root(&dir) {
        println!("setup: trixie root {} present ({version})", dir.display());
        return Ok(());
    }
    if !is_root() {
        bail!(
            "setup must run as root to make the nginx 1.26 root {} with debootstrap: run it with sudo",
            dir.display()
        );
    }
    if !crate::setup::deb_installed("debootstrap") {
        run(Command::new("apt-get")
            .args(["install", "-y", "-q", "debootstrap"])
            .env("DEBIAN_FRONTEND", "noninteractive"))?;
    }
    let tmp = dir.with_extension("tmp");
    if tmp.exists() {
        fs::remove_dir_all(&tmp).with_context(|| format!("remove {}", tmp.display()))?;
    }
    if dir.exists() {
        // Incomplete (checked above): made again from scratch.
        fs::remove_dir_all(&dir).with_context(|| format!("remove {}", dir.display()))?;
    }
    if let Some(parent) = dir.parent() {
        fs::create_dir_all(parent).with_context(|| format!("mkdir {}", parent.display()))?;
    }
    println!(
        "setup: debootstrap trixie with nginx-light and curl into {} (about 2 minutes)",
        dir.display()
    );
    let made = run(Command::new("debootstrap")
        .args([
            "--variant=minbase",
            "--include=nginx-light,curl,ca-certificates",
            "trixie",
        ])
        .arg(&tmp)
        .arg(MIRROR))
    .and_then(|()| check_root(&tmp).map_err(anyhow::Error::msg));
    if let Err(e) = made {
        let _ = fs::remove_dir_all(&tmp);
        return Err(e.context("debootstrap of the nginx 1.26 root failed (removed)"));
    }
    fs::rename(&tmp, &dir).with_context(|| format!("rename to {}", dir.display()))?;
    println!("setup: trixie root {} made", dir.display());
    Ok(())
}
