//! Keeps the worker set of one master current in the kernel filter, and turns map
//! snapshots into interval and summary reports.

use std::collections::BTreeMap;

use log::warn;
use nginx_probe_common::{SyscallStats, DROP_COUNTERS, SYSCALL_COUNT};

use crate::{
    error::ProbeError,
    loader::Probe,
    model::{self, Report, SlotStats, WorkerInfo, SCHEMA_VERSION},
    target::{self, Master, WorkerProc},
};

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
    next_slot: u32,
    /// Workers that could not be given a slot (stats map full).
    pub untracked: u64,
}

impl Tracker {
    /// A tracker for `master` whose first workers get slots 0, 1, ...
    pub fn new(master: Master, initial: &[WorkerProc]) -> Tracker {
        let mut t = Tracker {
            master,
            workers: BTreeMap::new(),
            next_slot: 0,
            untracked: 0,
        };
        for w in initial {
            t.workers.insert(
                w.pid,
                WorkerInfo {
                    pid: w.pid,
                    nspid: w.nspid.clone(),
                    slot: t.next_slot,
                    alive: true,
                },
            );
            t.next_slot += 1;
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

    /// Rescans the master's children: new workers get a slot and enter the filter,
    /// exited ones leave it (their counts stay). Returns (started, exited) pids.
    pub fn refresh(&mut self, probe: &mut Probe) -> Result<(Vec<u32>, Vec<u32>), ProbeError> {
        let live = target::find_workers(self.master.pid);
        let mut started = Vec::new();
        for w in &live {
            if self.workers.get(&w.pid).map(|i| i.alive).unwrap_or(false) {
                continue;
            }
            if self.next_slot >= probe.slots {
                self.untracked += 1;
                warn!(
                    "worker {} not traced: all {} worker slots are used",
                    w.pid, probe.slots
                );
                continue;
            }
            let info = WorkerInfo {
                pid: w.pid,
                nspid: w.nspid.clone(),
                slot: self.next_slot,
                alive: true,
            };
            self.next_slot += 1;
            probe.track(info.pid, info.slot)?;
            self.workers.insert(w.pid, info);
            started.push(w.pid);
        }
        let mut exited = Vec::new();
        for info in self.workers.values_mut() {
            if info.alive && !live.iter().any(|w| w.pid == info.pid) && !target::is_alive(info.pid)
            {
                info.alive = false;
                probe.untrack(info.pid);
                exited.push(info.pid);
            }
        }
        Ok((started, exited))
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
            end_reason,
        }
    }
}
