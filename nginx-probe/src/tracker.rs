//! Keeps the worker set of one master current (reloads, respawns, binary upgrades) and
//! turns map snapshots into interval and summary reports.
//!
//! Slots: user space gives slots `[0, kernel_first_slot)` to the workers it finds in
//! `/proc`; the kernel gives slots from `kernel_first_slot` upward to children the master
//! forks (`sched_process_fork`). The two ranges never overlap.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use log::warn;
use nginx_probe_common::{SyscallStats, DROP_COUNTERS, SYSCALL_COUNT};

use crate::{
    error::ProbeError,
    loader::Probe,
    model::{self, Event, Report, SlotStats, WorkerInfo, SCHEMA_VERSION},
    target::{self, Master, Role, WorkerProc},
};

/// Slots user space keeps for workers it finds by scanning `/proc` after start (those
/// forked before fork following was attached).
pub const USER_SLOT_RESERVE: u32 = 16;

/// Cumulative state of every slot at one instant.
#[derive(Clone)]
pub struct Snapshot {
    /// Slot -> cumulative stats.
    pub slots: BTreeMap<u32, SlotStats>,
    /// Cumulative drop counters.
    pub drops: [u64; DROP_COUNTERS],
}

/// Worker bookkeeping for one master.
pub struct Tracker {
    /// The master being traced.
    pub master: Master,
    /// Every worker seen since attach, by pid.
    pub workers: BTreeMap<u32, WorkerInfo>,
    /// Children of the master that are not workers (cache processes, a new master).
    ignored: BTreeSet<u32>,
    /// Children the kernel tracked whose title was still the master's at the last look.
    pending: BTreeSet<u32>,
    next_user_slot: u32,
    /// First slot the kernel hands out; the end of the user-space range.
    pub kernel_first_slot: u32,
    /// Workers that could not be given a slot.
    pub untracked: u64,
    /// What happened, in order.
    pub events: Vec<Event>,
    started: Instant,
}

impl Tracker {
    /// A tracker for `master` whose first workers get slots 0, 1, ...
    pub fn new(master: Master, initial: &[WorkerProc]) -> Tracker {
        let mut t = Tracker {
            master,
            workers: BTreeMap::new(),
            ignored: BTreeSet::new(),
            pending: BTreeSet::new(),
            next_user_slot: 0,
            kernel_first_slot: initial.len() as u32 + USER_SLOT_RESERVE,
            untracked: 0,
            events: Vec::new(),
            started: Instant::now(),
        };
        for w in initial {
            t.workers.insert(
                w.pid,
                WorkerInfo {
                    pid: w.pid,
                    nspid: w.nspid.clone(),
                    slot: t.next_user_slot,
                    alive: true,
                },
            );
            t.next_user_slot += 1;
        }
        t
    }

    /// (tgid, slot) pairs of the live workers, for the in-kernel filter.
    pub fn filter_entries(&self) -> Vec<(u32, u32)> {
        self.workers
            .values()
            .filter(|w| w.alive)
            .map(|w| (w.pid, w.slot))
            .collect()
    }

    fn event(&mut self, event: &'static str, pid: u32) {
        self.events.push(Event {
            t_s: self.started.elapsed().as_secs_f64(),
            event,
            pid,
        });
    }

    /// Brings the worker set up to date: classifies the children the kernel started
    /// tracking on fork (workers stay; a new master or cache processes leave the
    /// filter), adds workers found only in `/proc`, and marks exited workers (their
    /// counts stay). Returns the events this call added.
    pub fn refresh(&mut self, probe: &mut Probe) -> Result<Vec<Event>, ProbeError> {
        let first_new_event = self.events.len();
        // 1. Children the kernel added on fork.
        for (tgid, slot) in probe.filter_entries() {
            if self.workers.contains_key(&tgid) || self.ignored.contains(&tgid) {
                continue;
            }
            match target::role_of(tgid) {
                Some(Role::Worker) => {
                    self.pending.remove(&tgid);
                    self.workers.insert(
                        tgid,
                        WorkerInfo {
                            pid: tgid,
                            nspid: target::nspid_of(tgid),
                            slot,
                            alive: true,
                        },
                    );
                    self.event("worker_started", tgid);
                }
                Some(Role::Master) => {
                    // Just forked and not yet retitled, or a new master (USR2 binary
                    // upgrade execs a new nginx in the child). Decide on a second look.
                    if !self.pending.insert(tgid) {
                        self.pending.remove(&tgid);
                        self.ignored.insert(tgid);
                        probe.untrack(tgid);
                        self.event("new_master", tgid);
                    }
                }
                Some(_) => {
                    self.ignored.insert(tgid);
                    probe.untrack(tgid);
                }
                None => {
                    // Gone before we could look: a child of the master that lived less
                    // than a rescan. Keep what it did, as an exited worker.
                    self.workers.insert(
                        tgid,
                        WorkerInfo {
                            pid: tgid,
                            nspid: vec![tgid as i32],
                            slot,
                            alive: false,
                        },
                    );
                    probe.untrack(tgid);
                    self.event("worker_started", tgid);
                    self.event("worker_exited", tgid);
                }
            }
        }
        // 2. Workers only /proc knows (forked before fork following was attached).
        let live = target::find_workers(self.master.pid);
        for w in &live {
            if self.workers.contains_key(&w.pid) {
                continue;
            }
            if self.next_user_slot >= self.kernel_first_slot {
                self.untracked += 1;
                warn!("worker {} not traced: all worker slots are used", w.pid);
                self.ignored.insert(w.pid);
                continue;
            }
            let info = WorkerInfo {
                pid: w.pid,
                nspid: w.nspid.clone(),
                slot: self.next_user_slot,
                alive: true,
            };
            self.next_user_slot += 1;
            probe.track(info.pid, info.slot)?;
            self.workers.insert(w.pid, info);
            self.event("worker_started", w.pid);
        }
        // 3. Exits.
        let mut exited = Vec::new();
        for info in self.workers.values_mut() {
            if info.alive && !live.iter().any(|w| w.pid == info.pid) && !target::is_alive(info.pid)
            {
                info.alive = false;
                probe.untrack(info.pid);
                exited.push(info.pid);
            }
        }
        for pid in exited {
            self.event("worker_exited", pid);
        }
        Ok(self.events[first_new_event..].to_vec())
    }

    /// Reads every used slot and the drop counters.
    pub fn snapshot(&self, probe: &Probe) -> Result<Snapshot, ProbeError> {
        let mut slots = BTreeMap::new();
        for w in self.workers.values() {
            slots.insert(w.slot, probe.read_slot(w.slot)?);
        }
        Ok(Snapshot {
            slots,
            drops: probe.read_drops()?,
        })
    }

    /// Builds a report for the period between `prev` (None = attach, all zero) and `cur`.
    pub fn report(
        &self,
        kind: &'static str,
        cur: &Snapshot,
        prev: Option<&Snapshot>,
        duration_s: f64,
        missing: &[String],
        end_reason: Option<String>,
    ) -> Report {
        let zero: SlotStats = [SyscallStats::ZERO; SYSCALL_COUNT];
        let mut per_worker: Vec<(&WorkerInfo, SlotStats)> = Vec::new();
        for w in self.workers.values() {
            let c = cur.slots.get(&w.slot).unwrap_or(&zero);
            let p = prev.and_then(|p| p.slots.get(&w.slot)).unwrap_or(&zero);
            let mut d = zero;
            for i in 0..SYSCALL_COUNT {
                d[i] = model::delta(&c[i], &p[i]);
            }
            // An interval report leaves out workers that were gone for all of it.
            if prev.is_some() && !w.alive && d.iter().all(|s| s.count == 0) {
                continue;
            }
            per_worker.push((w, d));
        }
        let total_accepts: u64 = per_worker.iter().map(|(_, s)| model::accepts_of(s)).sum();
        let workers = per_worker
            .iter()
            .map(|(w, s)| model::worker_report(w, s, total_accepts))
            .collect();
        let mut drops_now = cur.drops;
        if let Some(p) = prev {
            for (d, before) in drops_now.iter_mut().zip(p.drops.iter()) {
                *d = d.saturating_sub(*before);
            }
        }
        let mut drops = model::drops_map(&drops_now);
        drops.insert("untracked_workers", self.untracked);
        Report {
            schema: SCHEMA_VERSION,
            kind,
            master_pid: self.master.pid,
            master_nspid: self.master.nspid.clone(),
            duration_s,
            workers,
            drops,
            missing_tracepoints: missing.to_vec(),
            events: if kind == "summary" {
                self.events.clone()
            } else {
                Vec::new()
            },
            end_reason,
        }
    }
}
