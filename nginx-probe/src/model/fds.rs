//! A worker's file descriptors: how many it holds (sampled from /proc) and the errors
//! of the syscalls that create them (EMFILE, ENFILE, ...).

use std::collections::BTreeMap;

use nginx_probe_common::{FD_CREATING, SYSCALLS};
use serde::{Deserialize, Serialize};

use crate::model::SlotStats;

/// A worker's file descriptors, sampled every 500 ms from /proc.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct FdReport {
    /// Open fds at the last sample (`/proc/<pid>/fd`).
    pub open: Option<u64>,
    /// Most open fds seen at any sample since attach.
    pub peak: Option<u64>,
    /// Soft `RLIMIT_NOFILE` in force (`/proc/<pid>/limits`), not what the config says.
    pub limit: Option<u64>,
    /// Regular files open (logs, cached static files, temp files) at the last fd
    /// classification (`/proc/<pid>/fd` links, every 2 s); most seen since attach in
    /// `files_peak`. What `open_file_cache` holds shows here.
    #[serde(default)]
    pub files: Option<u64>,
    /// Most regular files open at any classification since attach.
    #[serde(default)]
    pub files_peak: Option<u64>,
    /// Sockets open (client and upstream connections, listeners) at that classification.
    #[serde(default)]
    pub sockets: Option<u64>,
    /// Most sockets open at any classification since attach.
    #[serde(default)]
    pub sockets_peak: Option<u64>,
}

/// EMFILE and ENFILE returned by one fd-creating syscall of one worker.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct FdErrors {
    /// `EMFILE` (24): the worker's soft `RLIMIT_NOFILE` was reached.
    #[serde(rename = "EMFILE")]
    pub emfile: u64,
    /// `ENFILE` (23): the system-wide file table (`fs.file-max`) was full.
    #[serde(rename = "ENFILE")]
    pub enfile: u64,
}

/// EMFILE/ENFILE of every fd-creating syscall (`nginx_probe_common::FD_CREATING`), by
/// syscall name, from the syscall exit tracepoints (timed pair or exit-only program).
pub fn fd_errors_report(stats: &SlotStats) -> BTreeMap<String, FdErrors> {
    FD_CREATING
        .iter()
        .map(|&i| {
            let s = &stats[i as usize];
            (
                SYSCALLS[i as usize].name.to_string(),
                FdErrors {
                    emfile: s.errs[nginx_probe_common::ErrClass::Emfile as usize],
                    enfile: s.errs[nginx_probe_common::ErrClass::Enfile as usize],
                },
            )
        })
        .collect()
}
