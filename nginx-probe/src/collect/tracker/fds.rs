//! The tracker's view of the workers' fds and CPU time: what each fd is (access log,
//! error log, file, pipe; `target::classify_fds` over `/proc/<pid>/fd`), given to the
//! kernel when it cannot walk fd tables itself, and the fd counts, peaks and CPU time
//! sampled each refresh.

use super::*;

impl Tracker {
    /// Classifies the live workers' fds (all of them on a `full_scan`, every 2 s, else
    /// only new workers'); exited workers' entries are dropped.
    pub(super) fn classify_worker_fds(
        &mut self,
        probe: &mut Probe,
        full_scan: bool,
    ) -> Result<(), ProbeError> {
        let live_pids: Vec<u32> = self
            .workers
            .values()
            .filter(|w| w.alive)
            .map(|w| w.pid)
            .collect();
        let gone: Vec<u32> = self
            .fd_kinds
            .keys()
            .copied()
            .filter(|p| !live_pids.contains(p))
            .collect();
        for pid in gone {
            for fd in self.fd_kinds.remove(&pid).unwrap_or_default().into_keys() {
                probe.clear_fd_kind(pid, fd);
            }
        }
        self.log_fds.retain(|p, _| live_pids.contains(p));
        if full_scan {
            // The error log's inode: writes to it are error-log writes, whatever fd
            // they go through (classified in the kernel).
            self.register_error_logs(probe)?;
        }
        for pid in live_pids {
            if !full_scan && self.fd_kinds.contains_key(&pid) {
                continue;
            }
            self.classify_fds_of(probe, pid)?;
        }
        Ok(())
    }

    /// Classifies worker `pid`'s fds now: its log fds, its files and sockets counts and
    /// peaks, the kinds given to the kernel (when it cannot walk fd tables itself), and
    /// the log paths seen.
    fn classify_fds_of(&mut self, probe: &mut Probe, pid: u32) -> Result<(), ProbeError> {
        let now: BTreeMap<u32, (u32, String)> = target::classify_fds(pid)
            .into_iter()
            .map(|(fd, k, path)| (fd, (k, path)))
            .collect();
        self.log_fds.insert(
            pid,
            now.iter()
                .filter(|(_, (k, _))| {
                    use nginx_probe_common::fd_kind;
                    matches!(*k, fd_kind::ACCESS_LOG | fd_kind::ERROR_LOG)
                })
                .map(|(fd, (k, _))| (*fd, *k))
                .collect(),
        );
        let files = now
            .values()
            .filter(|(k, _)| {
                use nginx_probe_common::fd_kind;
                matches!(*k, fd_kind::ACCESS_LOG | fd_kind::ERROR_LOG | fd_kind::FILE)
            })
            .count() as u64;
        let non_sockets = now.len() as u64;
        if let Some(info) = self.workers.get_mut(&pid) {
            info.fds.files = Some(files);
            info.fds.files_peak = Some(info.fds.files_peak.unwrap_or(0).max(files));
            if let (Some(open), _) = target::fd_usage(pid) {
                let sockets = open.saturating_sub(non_sockets);
                info.fds.sockets = Some(sockets);
                info.fds.sockets_peak = Some(info.fds.sockets_peak.unwrap_or(0).max(sockets));
            }
        }
        let known = self.fd_kinds.entry(pid).or_default();
        for fd in known.keys().copied().collect::<Vec<_>>() {
            if !now.contains_key(&fd) {
                known.remove(&fd);
                probe.clear_fd_kind(pid, fd);
            }
        }
        for (fd, (kind, path)) in now {
            if probe.fd_walk.is_err() && known.get(&fd) != Some(&kind) {
                probe.set_fd_kind(pid, fd, kind)?;
                known.insert(fd, kind);
            }
            match kind {
                nginx_probe_common::fd_kind::ACCESS_LOG => {
                    self.log_paths.insert(path, "access_log");
                }
                nginx_probe_common::fd_kind::ERROR_LOG => {
                    self.log_paths.insert(path, "error_log");
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Samples the live workers' CPU time, run delay and fd usage (`/proc/<pid>/stat`,
    /// `schedstat`, `fd`, `limits`).
    pub(super) fn sample_worker_usage(&mut self) {
        for info in self.workers.values_mut().filter(|w| w.alive) {
            info.cpu_ticks.sample(target::cpu_ticks(info.pid));
            info.run_delay_ns.sample(target::run_delay_ns(info.pid));
            let (open, limit) = target::fd_usage(info.pid);
            info.fds.open = open.or(info.fds.open);
            info.fds.limit = limit.or(info.fds.limit);
            info.fds.peak = match (info.fds.peak, open) {
                (Some(p), Some(o)) => Some(p.max(o)),
                (p, o) => p.or(o),
            };
        }
    }

    /// Reads the access logs through the fds just classified; after a worker started,
    /// reads nginx's configuration again first.
    pub(super) fn follow_access_logs(&mut self, full_scan: bool) {
        let started = self
            .fresh
            .iter()
            .any(|e| matches!(e.event, EventKind::WorkerStarted));
        if started {
            let pids: Vec<u32> = self
                .workers
                .iter()
                .filter(|(_, w)| w.alive)
                .map(|(&p, _)| p)
                .collect();
            let cfg = crate::collect::config::read_for_master(self.master.pid, &pids);
            self.set_config(cfg);
        }
        self.access_logs.poll(&self.log_fds, full_scan || started);
    }
}
