//! The tracker's worker set: children the kernel started tracking on fork sorted into
//! workers, a new master and cache processes, and exited workers retired (their final
//! stats kept, their slots recycled).

use super::*;

impl Tracker {
    /// Sorts the children the kernel added to the filter on fork: workers stay, a new
    /// master (a binary upgrade, decided on a second look) and cache processes leave
    /// the filter, a child already gone is kept as an exited worker.
    pub(super) fn adopt_forked(&mut self, probe: &mut Probe) -> Result<(), ProbeError> {
        for (tgid, slot) in probe.filter_entries() {
            if self.workers.contains_key(&tgid) || self.ignored.contains(&tgid) {
                continue;
            }
            let (role, parent) = match target::role_of(tgid) {
                Ok(Some((r, ppid))) => (Some(r), Some(ppid)),
                Ok(None) => (None, None),
                Err(e) => {
                    // Unknown for now: it stays tracked and is looked at again.
                    self.proc_error(&e);
                    continue;
                }
            };
            match role {
                Some(Role::Worker | Role::Master)
                    if parent.is_some_and(|p| p != self.master.pid) =>
                {
                    // Forked by a child we followed before letting it go: the workers
                    // of a new master (USR2) forked before it was looked at twice.
                    // Not this master's.
                    self.let_go(probe, tgid, slot)?;
                }
                Some(Role::Worker) => {
                    self.pending.remove(&tgid);
                    let info = self.worker_info(tgid, target::nspid_of(tgid), slot, true);
                    self.workers.insert(tgid, info);
                    // libssl's programs follow the workers (a reload's new ones too).
                    probe.link_tls(tgid);
                    self.event(EventKind::WorkerStarted, tgid);
                }
                Some(Role::Master) => {
                    // Just forked and not yet retitled, or a new master (USR2 binary
                    // upgrade execs a new nginx in the child). Decide on a second look.
                    if !self.pending.insert(tgid) {
                        self.let_go(probe, tgid, slot)?;
                        self.event(EventKind::NewMaster, tgid);
                    }
                }
                Some(Role::OtherNginx) if parent == Some(self.master.pid) => {
                    // The master's child running nginx but not yet titled: the new
                    // binary of a USR2 upgrade between its execve() and its title
                    // (ngx_execute_proc; workers and cache processes are forked, never
                    // exec'd, and keep the master's title until they retitle). It
                    // titles itself master once its configuration loaded, and exits
                    // when it did not: said then (`resolve_upgrades`).
                    self.let_go(probe, tgid, slot)?;
                    self.upgrading.insert(tgid);
                }
                Some(_) => {
                    // Cache manager/loader: not a worker.
                    self.let_go(probe, tgid, slot)?;
                }
                None if probe.exit_of(tgid).map(nginx_probe_common::exits::decode)
                    == Some(nginx_probe_common::exits::Exit::Code(1)) =>
                {
                    // Gone with exit code 1: no worker exits so (a worker that fails to
                    // start exits 2), the child of a binary upgrade whose execve() or
                    // new binary failed does (ngx_execute_proc). Not a worker.
                    self.let_go(probe, tgid, slot)?;
                    let _ = probe.take_exit(tgid);
                    self.event(EventKind::NewMasterFailed, tgid);
                }
                None => {
                    // Gone before we could look: a child of the master that lived less
                    // than a rescan. Keep what it did, as an exited worker.
                    let info = self.worker_info(tgid, vec![tgid as i32], slot, false);
                    self.workers.insert(tgid, info);
                    probe.untrack(tgid);
                    self.retire(probe, tgid, slot)?;
                    self.event(EventKind::WorkerStarted, tgid);
                    self.event(EventKind::WorkerExited, tgid);
                }
            }
        }
        Ok(())
    }

    /// Says what became of each binary upgrade's new binary seen before its title: a
    /// new master once `/proc` titles it one (nginx does after its configuration
    /// loaded), a failed upgrade once it is gone or a zombie (it exits when its
    /// configuration did not load: `ngx_init_cycle` returned NULL); still loading, it
    /// is looked at again next refresh. An unreadable `/proc` entry is no fact: looked
    /// at again too.
    pub(super) fn resolve_upgrades(&mut self) {
        // The new master beside, once gone (or a zombie), is no longer beside.
        if let Some(b) = self.new_master_beside {
            match target::role_of(b.pid) {
                Ok(None) => self.new_master_beside = None,
                Ok(Some(_)) => {}
                Err(e) => self.proc_error(&e),
            }
        }
        let upgrading: Vec<u32> = self.upgrading.iter().copied().collect();
        for tgid in upgrading {
            let kind = match target::role_of(tgid) {
                Ok(Some((Role::Master, _))) => EventKind::NewMaster,
                Ok(None) => EventKind::NewMasterFailed,
                Ok(Some(_)) => continue,
                Err(e) => {
                    self.proc_error(&e);
                    continue;
                }
            };
            self.upgrading.remove(&tgid);
            self.event(kind, tgid);
        }
    }

    /// Stops following a child that is no worker (a new master, a cache process): out
    /// of the fork filter for good, its slot recycled.
    fn let_go(&mut self, probe: &mut Probe, tgid: u32, slot: u32) -> Result<(), ProbeError> {
        self.pending.remove(&tgid);
        self.ignored.insert(tgid);
        probe.untrack(tgid);
        probe.recycle_slot(slot)
    }

    /// Marks the workers `/proc` says are gone as exited: their final stats are kept,
    /// their slots zeroed and recycled.
    pub(super) fn retire_exited(&mut self, probe: &mut Probe) -> Result<(), ProbeError> {
        let mut exited = Vec::new();
        let mut errors = Vec::new();
        for info in self.workers.values_mut().filter(|w| w.alive) {
            match target::alive(info.pid) {
                Ok(true) => {}
                Ok(false) => {
                    info.alive = false;
                    probe.untrack(info.pid);
                    exited.push((info.pid, info.slot));
                }
                // Not a fact about the worker: it stays alive and is looked at again.
                Err(e) => errors.push(e),
            }
        }
        for e in errors {
            self.proc_error(&e);
        }
        for (pid, slot) in exited {
            self.retire(probe, pid, slot)?;
            self.event(EventKind::WorkerExited, pid);
        }
        Ok(())
    }
}
