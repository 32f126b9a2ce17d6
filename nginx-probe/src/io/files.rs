//! What kind of file a path names, so that nginx-probe (running as root) reads and
//! writes regular files only: a FIFO would block a read forever, `/dev/zero` never
//! ends, and renaming a report over a device node would replace the device.

use std::{fs::FileType, os::unix::fs::FileTypeExt as _, path::Path};

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
