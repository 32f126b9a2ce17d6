//! tracefs: making sure it is mounted, and reading tracepoint record layouts from
//! `events/<category>/<name>/format`.

use std::path::{Path, PathBuf};

use crate::error::{KernelError, ProbeError};

/// Where tracefs lives on current kernels.
pub const TRACEFS: &str = "/sys/kernel/tracing";
/// Where older systems reach it, through debugfs.
pub const DEBUGFS_TRACING: &str = "/sys/kernel/debug/tracing";

/// Returns the tracefs root, mounting tracefs at [`TRACEFS`] when neither location has
/// it. The bool says whether this call mounted it (the caller tells the user).
///
/// Errors: [`KernelError::TracefsMount`] when the mount fails.
pub fn ensure_mounted() -> Result<(PathBuf, bool), ProbeError> {
    for root in [TRACEFS, DEBUGFS_TRACING] {
        if Path::new(root).join("events").is_dir() {
            return Ok((PathBuf::from(root), false));
        }
    }
    nix::mount::mount(
        Some("tracefs"),
        TRACEFS,
        Some("tracefs"),
        nix::mount::MsFlags::MS_NOSUID
            | nix::mount::MsFlags::MS_NODEV
            | nix::mount::MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| KernelError::TracefsMount(e.desc().to_string()))?;
    if Path::new(TRACEFS).join("events").is_dir() {
        Ok((PathBuf::from(TRACEFS), true))
    } else {
        Err(KernelError::TracefsMount("mounted, but events/ is missing".into()).into())
    }
}

/// Byte offset of field `field` in a tracepoint `format` file's text, or None when the
/// field is absent. The format lines look like
/// `\tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;`.
pub fn field_offset(format: &str, field: &str) -> Option<u64> {
    for line in format.lines() {
        let mut name_ok = false;
        let mut offset = None;
        for part in line.split(';') {
            let part = part.trim();
            if let Some(decl) = part.strip_prefix("field:") {
                let ident = decl
                    .split_whitespace()
                    .last()
                    .map(|s| s.trim_start_matches('*'));
                name_ok = ident == Some(field);
            } else if let Some(off) = part.strip_prefix("offset:") {
                offset = off.trim().parse().ok();
            }
        }
        if name_ok {
            return offset;
        }
    }
    None
}

/// Offset of `field` in `syscalls:<event>` records (e.g. `ret` of `sys_exit_accept4`,
/// `fd` of `sys_enter_write`), read from tracefs.
pub fn syscall_field_offset(root: &Path, event: &str, field: &str) -> Option<u64> {
    let path = root.join("events/syscalls").join(event).join("format");
    std::fs::read_to_string(path)
        .ok()
        .and_then(|f| field_offset(&f, field))
}

/// Where the eBPF programs read `ret` (exit records) and the first argument (entry
/// records): they load that word directly at a constant offset.
pub const RECORD_WORD_OFFSET: u64 = 16;

/// Checks that this kernel's syscall tracepoint records put `ret` and the first
/// argument where the eBPF programs read them ([`RECORD_WORD_OFFSET`]).
///
/// Errors: the offsets read from tracefs, when they differ (a kernel with another
/// record layout: nothing would be counted right, so nothing is attached).
pub fn check_record_layout(root: &Path) -> Result<(), ProbeError> {
    for (event, field) in [
        ("sys_exit_accept4", "ret"),
        ("sys_enter_write", "fd"),
        ("sys_enter_close", "fd"),
    ] {
        match syscall_field_offset(root, event, field) {
            Some(off) if off != RECORD_WORD_OFFSET => {
                return Err(ProbeError::Missing(format!(
                    "support for this kernel's syscall record layout (`{field}` of {event} at offset {off}, expected {RECORD_WORD_OFFSET})"
                )))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Whether `syscalls:<event>` exists on this kernel.
pub fn has_event(root: &Path, category: &str, event: &str) -> bool {
    root.join("events").join(category).join(event).is_dir()
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXIT_FORMAT: &str = "name: sys_exit_accept4\nID: 1234\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\
\n\
\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\
\tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;\n\
\n\
print fmt: \"0x%lx\", REC->ret\n";

    #[test]
    fn reads_ret_offset_from_format() {
        assert_eq!(field_offset(EXIT_FORMAT, "ret"), Some(16));
        assert_eq!(field_offset(EXIT_FORMAT, "__syscall_nr"), Some(8));
        assert_eq!(field_offset(EXIT_FORMAT, "common_pid"), Some(4));
        assert_eq!(field_offset(EXIT_FORMAT, "missing"), None);
        // Not fooled by a field whose name merely ends in "ret".
        assert_eq!(
            field_offset("\tfield:long xret;\toffset:24;\n", "ret"),
            None
        );
    }

    #[test]
    fn reads_pointer_fields() {
        let f = "\tfield:struct sockaddr * upeer_sockaddr;\toffset:24;\tsize:8;\tsigned:0;\n\
                 \tfield:char *buf;\toffset:32;\tsize:8;\tsigned:0;\n";
        assert_eq!(field_offset(f, "upeer_sockaddr"), Some(24));
        assert_eq!(field_offset(f, "buf"), Some(32));
    }
}
