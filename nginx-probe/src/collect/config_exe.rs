//! What nginx's binary says of its build: the configure arguments compiled into it
//! (`--prefix=`, `--conf-path=`, `--error-log-path=`, `--http-log-path=`) and its
//! version (`nginx/X.Y.Z`), found by a bounded scan of the file. The binary is never
//! run: it is the master's, whoever wrote it.

use std::{io::Read, path::Path};

/// Bytes of the binary scanned at most.
pub const MAX_SCAN_BYTES: u64 = 64 << 20;
/// Longest value of one configure argument kept, bytes.
const MAX_ARG: usize = 4096;

/// Facts from the binary; None where not found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BinaryFacts {
    /// `--prefix=` of nginx's configure arguments.
    pub prefix: Option<String>,
    /// `--conf-path=`: the main configuration file when the master's title has no `-c`.
    pub conf_path: Option<String>,
    /// `--error-log-path=`: the compiled-in error log.
    pub error_log_path: Option<String>,
    /// `--http-log-path=`: the compiled-in access log.
    pub http_log_path: Option<String>,
    /// `1.22.1` from `nginx/1.22.1`.
    pub version: Option<String>,
}

/// The value after `key` in `hay` up to the next space or NUL.
fn arg_after(hay: &[u8], key: &[u8]) -> Option<String> {
    let i = hay.windows(key.len()).position(|w| w == key)? + key.len();
    let rest = &hay[i..];
    let end = rest
        .iter()
        .take(MAX_ARG)
        .position(|&b| b == b' ' || b == 0 || b == b'\'' || b == b'"')?;
    (end > 0).then(|| String::from_utf8_lossy(&rest[..end]).into_owned())
}

fn version_in(hay: &[u8]) -> Option<String> {
    let key = b"nginx/";
    let mut from = 0;
    while let Some(p) = hay[from..].windows(key.len()).position(|w| w == key) {
        let start = from + p + key.len();
        let v: Vec<u8> = hay[start..]
            .iter()
            .take(32)
            .take_while(|b| b.is_ascii_digit() || **b == b'.')
            .copied()
            .collect();
        if v.len() >= 3 && v.iter().filter(|&&b| b == b'.').count() == 2 && v[0].is_ascii_digit() {
            return Some(String::from_utf8_lossy(&v).into_owned());
        }
        from = start;
    }
    None
}

/// Scans `exe` (at most `MAX_SCAN_BYTES`, 1 MiB at a time with an overlap) for the
/// configure arguments and the version.
pub fn scan_binary(exe: &Path) -> BinaryFacts {
    let mut facts = BinaryFacts::default();
    let Ok(f) = std::fs::File::open(exe) else {
        return facts;
    };
    let mut f = f.take(MAX_SCAN_BYTES);
    const CHUNK: usize = 1 << 20;
    let overlap = MAX_ARG + 64;
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK + overlap);
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let n = match f.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let set = |slot: &mut Option<String>, key: &[u8]| {
            if slot.is_none() {
                *slot = arg_after(&buf, key);
            }
        };
        set(&mut facts.prefix, b"--prefix=");
        set(&mut facts.conf_path, b"--conf-path=");
        set(&mut facts.error_log_path, b"--error-log-path=");
        set(&mut facts.http_log_path, b"--http-log-path=");
        if facts.version.is_none() {
            facts.version = version_in(&buf);
        }
        if buf.len() > overlap {
            buf.drain(..buf.len() - overlap);
        }
    }
    facts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configure_arguments_and_version_are_found_in_bytes() {
        let mut bin = vec![0u8; 3 << 20];
        let args = b"\0nginx/1.22.1\0 --with-cc-opt='-g' --prefix=/usr/share/nginx --conf-path=/etc/nginx/nginx.conf --http-log-path=/var/log/nginx/access.log --error-log-path=stderr\0";
        // Across a chunk boundary.
        let at = (1 << 20) - 40;
        bin[at..at + args.len()].copy_from_slice(args);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("nginx");
        std::fs::write(&p, &bin).unwrap();
        let f = scan_binary(&p);
        assert_eq!(f.prefix.as_deref(), Some("/usr/share/nginx"));
        assert_eq!(f.conf_path.as_deref(), Some("/etc/nginx/nginx.conf"));
        assert_eq!(
            f.http_log_path.as_deref(),
            Some("/var/log/nginx/access.log")
        );
        assert_eq!(f.error_log_path.as_deref(), Some("stderr"));
        assert_eq!(f.version.as_deref(), Some("1.22.1"));
    }

    #[test]
    fn the_real_nginx_binary_names_its_conf_path() {
        // Debian's nginx (installed by `cargo xtask setup`); skipped without it.
        let p = Path::new("/usr/sbin/nginx");
        if !p.exists() {
            return;
        }
        let f = scan_binary(p);
        assert_eq!(f.conf_path.as_deref(), Some("/etc/nginx/nginx.conf"));
        assert_eq!(f.prefix.as_deref(), Some("/usr/share/nginx"));
    }
}
