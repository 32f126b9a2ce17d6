//! What kind of file a path names, so that nginx-probe (running as root) reads and
//! writes regular files only: a FIFO would block a read forever, `/dev/zero` never
//! ends, and renaming a report over a device node would replace the device.

use std::{fs::FileType, io::Write as _, os::unix::fs::FileTypeExt as _, path::Path};

use crate::error::{ProbeError, UsageError};

/// Words for a file type in an error line: `a FIFO`, `a character device`, ...
pub fn kind_of(ft: &FileType) -> &'static str {
    if ft.is_file() {
        "a regular file"
    } else if ft.is_dir() {
        "a directory"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Checks that an output path is free to create, or names a regular file or a
/// symbolic link (whose directory entry an atomic rename replaces; what it points at is
/// left alone). Errors: what the path is instead (`it is a FIFO`), one line.
pub fn check_output(path: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() || m.file_type().is_symlink() => Ok(()),
        Ok(m) => Err(format!(
            "it is {}, not a regular file",
            kind_of(&m.file_type())
        )),
        Err(_) => Ok(()),
    }
}

/// Writes `bytes` to `out` atomically: to a temporary file in `out`'s directory (mode
/// 0644, umask applies), synced, then renamed over `out`, so that a failed write (no
/// such directory, no permission, a full disk) leaves `out` as it was. `flag` names the
/// option that gave the path in the one-line error (`--html`). Errors:
/// [`ProbeError::Usage`] ([`UsageError::OutputUnwritable`], exit code 2): `out` is a directory, a device node, FIFO or
/// socket (never replaced), or the write failed.
pub fn write_atomic(out: &Path, bytes: &[u8], flag: &str) -> Result<(), ProbeError> {
    let shown = out.display().to_string();
    let fail = |e: &dyn std::fmt::Display| -> ProbeError {
        UsageError::OutputUnwritable {
            flag: flag.to_string(),
            path: shown.clone(),
            reason: e.to_string(),
        }
        .into()
    };
    if out.is_dir() {
        return Err(fail(&"it is a directory"));
    }
    // A device node, FIFO or socket is never replaced by the rename below.
    check_output(out).map_err(|e| fail(&e))?;
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report.html".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = dir.join(format!(".{name}.{}.{nanos}.tmp", std::process::id()));
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        // A report to share: readable like any file the user writes (umask applies).
        .mode(0o644)
        .open(&tmp)
        .map_err(|e| fail(&e))?;
    let written = f
        .write_all(bytes)
        .and_then(|_| f.sync_data())
        .and_then(|_| std::fs::rename(&tmp, out));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(&e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_that_are_devices_or_fifos_are_refused() {
        assert_eq!(
            check_output(Path::new("/dev/null")).unwrap_err(),
            "it is a character device, not a regular file"
        );
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert_eq!(
            check_output(&fifo).unwrap_err(),
            "it is a FIFO, not a regular file"
        );
        assert!(check_output(&dir.path().join("new.html")).is_ok());
        let file = dir.path().join("old.html");
        std::fs::write(&file, "x").unwrap();
        assert!(check_output(&file).is_ok());
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        assert!(check_output(&link).is_ok());
    }
}
