//! What the kernel must offer, checked at start so that a missing feature is one line
//! naming it instead of a verifier log.
//!
//! The programs need (first kernel that has each):
//!
//! - syscall tracepoints that BPF can attach to (`syscalls:sys_enter_*`/`sys_exit_*`,
//!   CONFIG_FTRACE_SYSCALLS; 4.7) and tracefs, mounted or mountable;
//! - BPF per-CPU arrays (4.6), LRU hashes (4.10) and a stack map (`FREE_SLOTS`, 4.20);
//! - read-only global data (`.rodata`, set at load with `override_global`; 5.2);
//! - with `--uprobes` only: `bpf_probe_read_user` (5.5).
//!
//! So the minimum is Linux 5.2, or 5.5 with `--uprobes` ([`MIN_KERNEL`],
//! [`MIN_KERNEL_UPROBES`]). The features are probed directly (a tiny map of each type is
//! created and closed, the tracepoint directories are looked up), and the version is
//! only consulted for `bpf_probe_read_user`, which cannot be probed without loading a
//! program.

use std::{os::fd::FromRawFd as _, path::Path};

use crate::error::{KernelError, ProbeError};

/// Oldest kernel the tracepoint programs load on: (major, minor).
pub const MIN_KERNEL: (u32, u32) = (5, 2);
/// Oldest kernel the request uprobes (`--uprobes`) load on: (major, minor).
pub const MIN_KERNEL_UPROBES: (u32, u32) = (5, 5);

// From include/uapi/linux/bpf.h.
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
const BPF_MAP_TYPE_LRU_HASH: u32 = 9;
const BPF_MAP_TYPE_STACK: u32 = 23;
const BPF_F_RDONLY_PROG: u32 = 1 << 7;
const BPF_MAP_TYPE_ARRAY: u32 = 2;

/// The first fields of `union bpf_attr` for BPF_MAP_CREATE.
#[repr(C)]
#[derive(Default)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    _rest: [u32; 27],
}

/// Creates and closes one map; the errno on failure.
fn try_map(map_type: u32, key_size: u32, flags: u32) -> Result<(), std::io::Error> {
    let attr = MapCreate {
        map_type,
        key_size,
        value_size: 8,
        max_entries: 4,
        map_flags: flags,
        ..Default::default()
    };
    // SAFETY: bpf(2) reads `size_of::<MapCreate>()` bytes of a live, zero-padded struct.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_CREATE,
            &attr as *const MapCreate,
            std::mem::size_of::<MapCreate>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this fd to us; dropping it closes it.
    drop(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) });
    Ok(())
}

/// `(major, minor)` of the running kernel (`/proc/sys/kernel/osrelease`, as `uname -r`),
/// None when unreadable or unparseable.
pub fn kernel_version() -> Option<(u32, u32)> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    parse_release(release.get(..release.len().min(64))?)
}

/// `(major, minor)` from a release string such as `6.1.0-18-amd64`.
pub fn parse_release(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

/// Checks every kernel feature the programs need, given the tracefs root (see
/// [`crate::collect::tracefs::ensure_mounted`]).
///
/// Errors: [`ProbeError::Kernel`] ([`KernelError`]) naming the first missing feature.
pub fn check(tracefs_root: &Path) -> Result<(), ProbeError> {
    let events = tracefs_root.join("events/syscalls");
    if !events.join("sys_enter_accept4").is_dir() || !events.join("sys_exit_accept4").is_dir() {
        return Err(KernelError::NoSyscallTracepoints {
            events: events.display().to_string(),
        }
        .into());
    }
    for (feature, map_type, key_size, flags) in [
        ("BPF array maps", BPF_MAP_TYPE_ARRAY, 4, 0),
        (
            "BPF per-CPU array maps (Linux 4.6)",
            BPF_MAP_TYPE_PERCPU_ARRAY,
            4,
            0,
        ),
        (
            "BPF LRU hash maps (Linux 4.10)",
            BPF_MAP_TYPE_LRU_HASH,
            8,
            0,
        ),
        ("BPF stack maps (Linux 4.20)", BPF_MAP_TYPE_STACK, 0, 0),
        (
            "read-only BPF global data (Linux 5.2)",
            BPF_MAP_TYPE_ARRAY,
            4,
            BPF_F_RDONLY_PROG,
        ),
    ] {
        if let Err(source) = try_map(map_type, key_size, flags) {
            let min_kernel = MIN_KERNEL;
            return Err(match source.raw_os_error() {
                Some(libc::EPERM) => KernelError::BpfNotPermitted { min_kernel },
                Some(libc::ENOSYS) => KernelError::NoBpfSyscall { min_kernel },
                _ => KernelError::MissingFeature {
                    feature,
                    source,
                    min_kernel,
                },
            }
            .into());
        }
    }
    Ok(())
}

/// Whether the request uprobes can load here (`bpf_probe_read_user`, Linux 5.5); None
/// when the version is unknown.
pub fn uprobes_supported() -> Option<bool> {
    kernel_version().map(|v| v >= MIN_KERNEL_UPROBES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_parse() {
        assert_eq!(parse_release("6.1.0-18-amd64"), Some((6, 1)));
        assert_eq!(parse_release("5.15.0"), Some((5, 15)));
        assert_eq!(parse_release("4.19.0+"), Some((4, 19)));
        assert_eq!(parse_release("garbage"), None);
        assert!(parse_release("5.4.0").unwrap() < MIN_KERNEL_UPROBES);
        assert!(parse_release("5.10.0").unwrap() >= MIN_KERNEL_UPROBES);
    }
}
