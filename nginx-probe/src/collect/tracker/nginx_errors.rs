//! The tracker's view of nginx's error log: what the reader (`collect::error_log`)
//! counted, handed to the model as plain data ([`ErrorLogInputs`]); the model builds
//! the report's `nginx_errors` (`model::nginx_errors::nginx_errors_report`).

use super::*;
use crate::collect::error_log::Status;
use crate::collect::error_log_history::MAX_HISTORY_BYTES;
use crate::model::nginx_errors::ErrorLogInputs;

impl Tracker {
    /// The error log's counts since attach (`summary`) or in the interval, the peers
    /// they name and the history back to the master's start; the master's `nofile`
    /// limits (`/proc/<pid>/limits`) are read now, when there is a history.
    pub(super) fn error_log_inputs(&self, summary: bool) -> ErrorLogInputs<'_> {
        let log = &self.error_log;
        let (path, unknown_reason) = match &log.status {
            Status::Reading(p) => (Some(p.clone()), None),
            Status::Unknown(why) => (None, Some(why.clone())),
        };
        let peers = log.peer_counts(summary);
        let (upstream_peers, other_peers) = peers.top();
        ErrorLogInputs {
            path,
            unknown_reason,
            counts: log.counts(summary),
            counts_since_attach: log.counts(true),
            lines_cut: log.tail.lines_cut,
            bytes_skipped: log.skipped(summary),
            truncations: log.truncated(summary),
            upstream_peers,
            other_peers,
            unattributed: peers.unattributed,
            ambiguous: peers.ambiguous,
            history: log.history.as_ref(),
            history_bytes_limit: MAX_HISTORY_BYTES,
            master_nofile: match log.history {
                Some(_) => master_nofile(self.master.pid),
                None => (None, None),
            },
            // The master's process limits, where spawn failures are what they explain.
            master_nproc: spawn_failed(log)
                .then(|| master_nproc(self.master.pid))
                .flatten(),
            master_pids_limit: spawn_failed(log)
                .then(|| crate::collect::cgroup::pids_limit_of(self.master.pid))
                .flatten(),
            crash_lines_contradicted: self.crash_lines_contradicted(),
            emerg_lines: log.emerg_lines(summary),
        }
    }

    /// Crash lines read since attach (`worker process N exited on signal S`) that are
    /// not a confirmed crash: every line but one per distinct N that is a worker the
    /// tracker saw since attach (by host pid or the pid in nginx's own namespace,
    /// `NSpid`), no longer running (`/proc/<pid>`), and not seen by the kernel to exit
    /// with a code and no signal (`sched_process_exit`: a graceful exit after a
    /// reload, say). nginx's master writes the line once, after reaping a worker a
    /// signal killed; a client can write lines into the error log, so a line naming
    /// no such worker, repeating a pid already counted, or beyond the
    /// [`crate::collect::error_log::MAX_CRASH_PIDS`] pids checked is not nginx's crash.
    fn crash_lines_contradicted(&self) -> u64 {
        let lines: u64 = self
            .error_log
            .counts(true)
            .get("worker_crashed")
            .map(|l| l.iter().sum())
            .unwrap_or(0);
        let confirmed = self
            .error_log
            .crash_pids
            .iter()
            .filter(|&&p| {
                let w = self
                    .workers
                    .values()
                    .find(|w| w.pid == p || w.nspid.last().is_some_and(|&n| n as u32 == p));
                match w {
                    None => false,
                    Some(w) if w.alive => {
                        !std::path::Path::new(&format!("/proc/{}", w.pid)).exists()
                    }
                    // The kernel's exit record (sched_process_exit): an exit with a
                    // code, no signal, is no crash.
                    Some(w) => !self
                        .lifecycle
                        .of(w.pid)
                        .exit
                        .is_some_and(|e| e.signal.is_none() && e.code.is_some()),
                }
            })
            .count() as u64;
        lines.saturating_sub(confirmed)
    }
}

/// The soft and hard open-files limits of process `pid` (`/proc/<pid>/limits`, Max
/// open files); None when unlimited or unreadable.
/// Whether the error log counted a spawn failure since the master's start (read back
/// before attach, or since).
fn spawn_failed(log: &crate::collect::error_log::ErrorLogReader) -> bool {
    let back = log
        .history
        .as_ref()
        .is_some_and(|h| h.classes.contains_key("worker_spawn_failed"));
    back || log.counts(true).contains_key("worker_spawn_failed")
}

/// The master's soft process limit (`/proc/<pid>/limits`, Max processes); None when
/// unlimited or unreadable.
fn master_nproc(pid: u32) -> Option<u64> {
    use procfs::process::LimitValue;
    procfs::process::Process::new(pid as i32)
        .and_then(|p| p.limits())
        .ok()
        .and_then(|l| match l.max_processes.soft_limit {
            LimitValue::Value(v) => Some(v),
            LimitValue::Unlimited => None,
        })
}

fn master_nofile(pid: u32) -> (Option<u64>, Option<u64>) {
    use procfs::process::LimitValue;
    let v = |x: LimitValue| match x {
        LimitValue::Value(v) => Some(v),
        LimitValue::Unlimited => None,
    };
    procfs::process::Process::new(pid as i32)
        .and_then(|p| p.limits())
        .map(|l| {
            (
                v(l.max_open_files.soft_limit),
                v(l.max_open_files.hard_limit),
            )
        })
        .unwrap_or((None, None))
}
