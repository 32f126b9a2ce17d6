//! Worker exit status from the kernel: `sched:sched_process_exit` records a tracked
//! worker's `task_struct.exit_code` (its offset from the kernel's BTF) in the `EXITS`
//! map; the tracker takes it when it sees the worker gone. The master is nginx's
//! only `wait`er (a worker is not our child), so the kernel is the exact source.

use std::path::Path;

use aya::programs::TracePoint;
use log::warn;
use nginx_probe_common::exits;

use super::{fd_exhausted, Probe};
use crate::{
    collect::{btf::Btf, fd_limit, tracefs},
    error::ProbeError,
};

/// `task_struct.exit_code`'s byte offset in `btf` for the `EXIT_CODE_OFF` global
/// (`u64::MAX` when unknown), and why exits are unknown if they are.
pub(super) fn exit_code_offset(btf: Result<&Btf, &String>) -> (u64, Result<(), String>) {
    let (s, m) = exits::EXIT_CODE_PATH;
    match btf.map(|b| b.member_offset(s, m)) {
        Ok(Some(off)) => (off, Ok(())),
        Ok(None) => (u64::MAX, Err(format!("{s}.{m} not in the kernel's BTF"))),
        Err(e) => (u64::MAX, Err(e.clone())),
    }
}

impl Probe {
    /// Attaches `sched:sched_process_exit` when the exit code's offset is known; on
    /// failure the exits stay unknown (`exit_status` says why) and the run goes on.
    ///
    /// Errors: only fd exhaustion (nothing else could be attached either).
    pub(super) fn attach_exits(&mut self, tracefs_root: &Path) -> Result<(), ProbeError> {
        if self.exit_status.is_err() {
            return Ok(());
        }
        if !tracefs::has_event(tracefs_root, "sched", "sched_process_exit") {
            self.exit_status = Err("no sched:sched_process_exit tracepoint".into());
            return Ok(());
        }
        let prog: &mut TracePoint = self
            .ebpf
            .program_mut(exits::PROGRAM)
            .ok_or_else(|| ProbeError::Missing(format!("program {}", exits::PROGRAM)))?
            .try_into()?;
        match prog
            .load()
            .and_then(|_| prog.attach("sched", "sched_process_exit"))
        {
            Ok(_) => {}
            Err(e) if fd_limit::is_exhaustion(&e) => return Err(fd_exhausted()),
            Err(e) => {
                warn!(
                    "could not attach sched:sched_process_exit ({e}); worker exit status unknown"
                );
                self.exit_status = Err(format!("sched:sched_process_exit not attached: {e}"));
            }
        }
        Ok(())
    }

    /// The kernel's `exit_code` of `pid` if its exit was recorded, leaving it for
    /// [`Probe::take_exit`].
    pub fn exit_of(&self, pid: u32) -> Option<u32> {
        self.exits.get(&pid, 0).ok()
    }

    /// The kernel's `exit_code` of worker `pid` if its exit was recorded, removing the
    /// entry (see [`exits::decode`]). None: not recorded (exits unknown, or the worker
    /// exited before the program was attached).
    pub fn take_exit(&mut self, pid: u32) -> Option<u32> {
        let code = self.exits.get(&pid, 0).ok()?;
        let _ = self.exits.remove(&pid);
        Some(code)
    }
}
