//! Loading the eBPF object, attaching its syscall tracepoints, keeping the in-kernel
//! worker filter current, and reading the per-CPU maps.
//!
//! Everything attached here is owned by file descriptors of this process: when it exits
//! for any reason (Ctrl-C, SIGTERM, a crash, SIGKILL) the kernel closes them and detaches
//! the programs. Nothing is pinned.

use std::path::Path;

use aya::{
    maps::{Array, HashMap, MapData, PerCpuArray, PerCpuValues, Stack},
    programs::{uprobe::UProbeScope, ProgramError, TracePoint, UProbe},
    Ebpf, EbpfLoader,
};
use log::{debug, warn};
use nginx_probe_common::{
    filter_entry, filter_slot, InFlight, SyscallStats, DROP_COUNTERS, FD_KIND_COUNT, FILTER_SIZE,
    MAX_TRACKED_TGIDS, SYSCALLS, SYSCALL_COUNT,
};

use crate::{
    error::ProbeError,
    model::{self, SlotStats, ACCEPT_CLOSE_IDX, LOOP_IDX, REQUESTS_IDX, SLOT_STATS, WRITES_IDX},
    tracefs,
};

/// The eBPF object built by `build.rs` (aya-build) from `nginx-probe-ebpf`.
static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/nginx-probe"));

/// Loaded and attached programs plus handles on their maps.
pub struct Probe {
    // Owns the programs and their links; dropping it detaches everything.
    ebpf: Ebpf,
    workers: HashMap<MapData, u32, u32>,
    /// Direct-mapped copy of `workers` (see the eBPF `FILTER` map).
    filter: Array<MapData, u64>,
    /// Element 0 set to 1 once a tracked tgid could not enter `filter`.
    collided: Array<MapData, u32>,
    free_slots: Stack<MapData, u32>,
    stats: PerCpuArray<MapData, SyscallStats>,
    requests: PerCpuArray<MapData, SyscallStats>,
    main_entry: Array<MapData, InFlight>,
    loop_stats: Array<MapData, SyscallStats>,
    last_wake: Array<MapData, u64>,
    last_accept: Array<MapData, u64>,
    accept_close: Array<MapData, u64>,
    writes: PerCpuArray<MapData, SyscallStats>,
    fd_kinds: HashMap<MapData, u64, u32>,
    drops: PerCpuArray<MapData, u64>,
    /// Tracepoints that this kernel lacks or refused (`sys_enter_*`, `sys_exit_*`,
    /// `sched_process_fork`).
    pub missing: Vec<String>,
    /// Syscall tracepoints attached.
    pub attached: usize,
    /// Whether `sched:sched_process_fork` is attached (new workers tracked in-kernel).
    pub follows_forks: bool,
}

/// Raises RLIMIT_MEMLOCK for kernels that still charge BPF maps to it (before 5.11);
/// harmless where memcg accounting is used.
fn raise_memlock() {
    use nix::sys::resource::{setrlimit, Resource, RLIM_INFINITY};
    if let Err(e) = setrlimit(Resource::RLIMIT_MEMLOCK, RLIM_INFINITY, RLIM_INFINITY) {
        debug!("setrlimit(RLIMIT_MEMLOCK) failed: {e}");
    }
}

impl Probe {
    /// Loads the programs (attaching nothing) with `slots` worker slots, all free.
    /// `master_tgid` is the master whose forks the fork program follows.
    ///
    /// Errors: load failures and map errors.
    pub fn load(tracefs_root: &Path, master_tgid: u32, slots: u32) -> Result<Probe, ProbeError> {
        raise_memlock();
        tracefs::check_record_layout(tracefs_root)?;
        let fork_format =
            std::fs::read_to_string(tracefs_root.join("events/sched/sched_process_fork/format"))
                .unwrap_or_default();
        let parent_off = tracefs::field_offset(&fork_format, "parent_pid").unwrap_or(12);
        let child_off = tracefs::field_offset(&fork_format, "child_pid").unwrap_or(20);
        let mut ebpf = EbpfLoader::new()
            .override_global("MASTER_TGID", &master_tgid, true)
            .override_global("FORK_PARENT_OFF", &parent_off, true)
            .override_global("FORK_CHILD_OFF", &child_off, true)
            .map_max_entries("STATS", slots * SYSCALL_COUNT as u32)
            .map_max_entries("FREE_SLOTS", slots)
            .map_max_entries("REQUESTS", slots)
            .map_max_entries("MAIN_ENTRY", slots)
            .map_max_entries("LOOP", slots)
            .map_max_entries("LAST_ACCEPT", slots)
            .map_max_entries("ACCEPT_CLOSE", slots)
            .map_max_entries("WRITES", slots * nginx_probe_common::FD_KIND_COUNT as u32)
            .map_max_entries("LAST_WAKE", slots)
            .load(EBPF_OBJECT)?;
        let mut take = |name: &str| {
            ebpf.take_map(name)
                .ok_or_else(|| ProbeError::Missing(format!("map {name}")))
        };
        let workers = HashMap::try_from(take("WORKERS")?)?;
        let filter = Array::try_from(take("FILTER")?)?;
        let collided = Array::try_from(take("COLLIDED")?)?;
        let mut free_slots: Stack<MapData, u32> = Stack::try_from(take("FREE_SLOTS")?)?;
        let stats = PerCpuArray::try_from(take("STATS")?)?;
        let requests = PerCpuArray::try_from(take("REQUESTS")?)?;
        let main_entry = Array::try_from(take("MAIN_ENTRY")?)?;
        let loop_stats = Array::try_from(take("LOOP")?)?;
        let last_accept = Array::try_from(take("LAST_ACCEPT")?)?;
        let accept_close = Array::try_from(take("ACCEPT_CLOSE")?)?;
        let writes = PerCpuArray::try_from(take("WRITES")?)?;
        let fd_kinds = HashMap::try_from(take("FD_KINDS")?)?;
        let last_wake = Array::try_from(take("LAST_WAKE")?)?;
        let drops = PerCpuArray::try_from(take("DROPS")?)?;
        // Slot 0 on top: workers found at attach get 0, 1, 2...
        for slot in (0..slots).rev() {
            free_slots.push(slot, 0)?;
        }
        Ok(Probe {
            ebpf,
            workers,
            filter,
            collided,
            free_slots,
            stats,
            requests,
            main_entry,
            loop_stats,
            last_wake,
            last_accept,
            accept_close,
            writes,
            fd_kinds,
            drops,
            missing: Vec::new(),
            attached: 0,
            follows_forks: false,
        })
    }

    /// Attaches `sched:sched_process_fork` (children the master forks from now on are
    /// tracked in the kernel), then the enter/exit tracepoints of the `selected`
    /// syscalls (indexes into `SYSCALLS`) that exist. Missing ones
    /// are recorded in `missing` and skipped.
    ///
    /// Errors: [`ProbeError::NothingAttached`] when no syscall tracepoint could be
    /// attached.
    pub fn attach(&mut self, tracefs_root: &Path, selected: &[usize]) -> Result<(), ProbeError> {
        let ebpf = &mut self.ebpf;
        // Fork following first, so no worker forked from here on is missed.
        if tracefs::has_event(tracefs_root, "sched", "sched_process_fork") {
            let prog: &mut TracePoint = ebpf
                .program_mut("sched_process_fork")
                .ok_or_else(|| ProbeError::Missing("program sched_process_fork".into()))?
                .try_into()?;
            match prog
                .load()
                .and_then(|_| prog.attach("sched", "sched_process_fork"))
            {
                Ok(_) => self.follows_forks = true,
                Err(e) => warn!(
                    "could not attach sched:sched_process_fork ({e}); new workers are found by scanning /proc every 500 ms"
                ),
            }
        }
        if !self.follows_forks {
            self.missing.push("sched_process_fork".to_string());
        }
        // Accept-then-close detection on close entry (one cheap run per close).
        if tracefs::has_event(tracefs_root, "syscalls", "sys_enter_close") {
            let prog: &mut TracePoint = ebpf
                .program_mut("close_after_accept")
                .ok_or_else(|| ProbeError::Missing("program close_after_accept".into()))?
                .try_into()?;
            if let Err(e) = prog
                .load()
                .and_then(|_| prog.attach("syscalls", "sys_enter_close"))
            {
                warn!("could not attach the accept-then-close detector ({e}); worker_connections exhaustion goes undetected");
                self.missing.push("close_after_accept".to_string());
            }
        } else {
            self.missing.push("close_after_accept".to_string());
        }
        let mut last_err = String::new();
        let (present, absent) = plan_syscall_tracepoints(selected, |name| {
            tracefs::has_event(tracefs_root, "syscalls", name)
        });
        self.missing.extend(absent);
        for name in present {
            let prog: &mut TracePoint = ebpf
                .program_mut(&name)
                .ok_or_else(|| ProbeError::Missing(format!("program {name}")))?
                .try_into()?;
            match prog.load().and_then(|_| prog.attach("syscalls", &name)) {
                Ok(_) => self.attached += 1,
                Err(e) => {
                    warn!("could not attach syscalls:{name}: {e}; continuing without it");
                    last_err = format!("syscalls:{name}: {e}");
                    self.missing.push(name);
                }
            }
        }
        if self.attached == 0 {
            return Err(ProbeError::NothingAttached(last_err));
        }
        Ok(())
    }

    /// Attaches the request uprobes (`ngx_http_create_request`, `ngx_http_free_request`)
    /// to `binary` (the master's `/proc/<pid>/exe`), for every process running it; the
    /// programs count only tracked workers.
    ///
    /// Errors: a one-line reason (symbol not exported, uprobes unsupported) when either
    /// cannot be attached; then neither is.
    pub fn attach_uprobes(&mut self, binary: &Path) -> Result<(), String> {
        for sym in ["ngx_http_create_request", "ngx_http_free_request"] {
            let prog: &mut UProbe = self
                .ebpf
                .program_mut(sym)
                .ok_or_else(|| format!("the eBPF object has no program {sym}"))?
                .try_into()
                .map_err(|e: ProgramError| e.to_string())?;
            prog.load().map_err(|e| format!("{sym}: {e}"))?;
            prog.attach(sym, binary, UProbeScope::AllProcesses)
                .map_err(|e| format!("uprobe on {sym} in {}: {e}", binary.display()))?;
        }
        Ok(())
    }

    /// Sets the kind of fd `fd` of worker `tgid` (see `nginx_probe_common::fd_kind`).
    pub fn set_fd_kind(&mut self, tgid: u32, fd: u32, kind: u32) -> Result<(), ProbeError> {
        self.fd_kinds
            .insert(((tgid as u64) << 32) | fd as u64, kind, 0)?;
        Ok(())
    }

    /// Forgets a classified fd (closed, or its worker exited).
    pub fn clear_fd_kind(&mut self, tgid: u32, fd: u32) {
        let _ = self.fd_kinds.remove(&(((tgid as u64) << 32) | fd as u64));
    }

    /// Takes a free slot, None when all are in use.
    pub fn alloc_slot(&mut self) -> Option<u32> {
        self.free_slots.pop(0).ok()
    }

    /// Zeroes a slot whose worker is gone (after its final stats were read) and returns
    /// it to the free queue for the next worker.
    pub fn recycle_slot(&mut self, slot: u32) -> Result<(), ProbeError> {
        let ncpus = aya::util::nr_cpus().map_err(|(_, e)| ProbeError::Io(e))?;
        let zero = || PerCpuValues::try_from(vec![SyscallStats::ZERO; ncpus]);
        for i in 0..SYSCALL_COUNT as u32 {
            self.stats
                .set(slot * SYSCALL_COUNT as u32 + i, zero()?, 0)?;
        }
        self.requests.set(slot, zero()?, 0)?;
        self.loop_stats.set(slot, SyscallStats::ZERO, 0)?;
        for k in 0..FD_KIND_COUNT as u32 {
            self.writes
                .set(slot * FD_KIND_COUNT as u32 + k, zero()?, 0)?;
        }
        self.last_wake.set(slot, 0u64, 0)?;
        self.last_accept.set(slot, 0u64, 0)?;
        self.accept_close.set(slot, 0u64, 0)?;
        self.main_entry.set(
            slot,
            InFlight {
                start_ns: 0,
                syscall: 0,
                fd_kind: 0,
            },
            0,
        )?;
        self.free_slots.push(slot, 0)?;
        Ok(())
    }

    /// (tgid, slot) pairs in the kernel's worker filter, including children the kernel
    /// added on fork.
    pub fn filter_entries(&self) -> Vec<(u32, u32)> {
        self.workers.iter().filter_map(Result::ok).collect()
    }

    /// Starts counting the syscalls of `tgid` into `slot`: `WORKERS` (the truth) and
    /// its direct-mapped copy `FILTER`, or `COLLIDED` when `tgid`'s index is taken.
    pub fn track(&mut self, tgid: u32, slot: u32) -> Result<(), ProbeError> {
        self.workers.insert(tgid, slot, 0)?;
        let idx = tgid & (FILTER_SIZE - 1);
        let e = self.filter.get(&idx, 0)?;
        if e == 0 || filter_slot(e, tgid).is_some() {
            self.filter.set(idx, filter_entry(tgid, slot), 0)?;
        } else {
            self.collided.set(0, 1, 0)?;
        }
        Ok(())
    }

    /// The slot the kernel filter gives `tgid`, if any (set by user space or on fork).
    pub fn slot_of(&self, tgid: u32) -> Option<u32> {
        self.workers.get(&tgid, 0).ok()
    }

    /// Stops counting `tgid`. Its counts stay in its slot.
    pub fn untrack(&mut self, tgid: u32) {
        let _ = self.workers.remove(&tgid);
        let idx = tgid & (FILTER_SIZE - 1);
        if let Ok(e) = self.filter.get(&idx, 0) {
            if filter_slot(e, tgid).is_some() {
                let _ = self.filter.set(idx, 0u64, 0);
            }
        }
    }

    /// Cumulative stats of one slot, summed over CPUs.
    pub fn read_slot(&self, slot: u32) -> Result<SlotStats, ProbeError> {
        let mut out = model::ZERO_SLOT;
        for (i, o) in out.iter_mut().enumerate().take(SYSCALL_COUNT) {
            let idx = slot * SYSCALL_COUNT as u32 + i as u32;
            let per_cpu = self.stats.get(&idx, 0)?;
            *o = model::sum_cpus(per_cpu.iter());
        }
        out[REQUESTS_IDX] = model::sum_cpus(self.requests.get(&slot, 0)?.iter());
        out[LOOP_IDX] = self.loop_stats.get(&slot, 0)?;
        out[ACCEPT_CLOSE_IDX].count = self.accept_close.get(&slot, 0)?;
        for k in 0..FD_KIND_COUNT {
            let idx = slot * FD_KIND_COUNT as u32 + k as u32;
            out[WRITES_IDX + k] = model::sum_cpus(self.writes.get(&idx, 0)?.iter());
        }
        Ok(out)
    }

    /// Cumulative drop counters, summed over CPUs.
    pub fn read_drops(&self) -> Result<[u64; DROP_COUNTERS], ProbeError> {
        let mut out = [0u64; DROP_COUNTERS];
        for (i, o) in out.iter_mut().enumerate() {
            *o = self.drops.get(&(i as u32), 0)?.iter().sum();
        }
        Ok(out)
    }
}

/// Splits the enter/exit tracepoints of the `selected` syscalls (indexes into
/// `SYSCALLS`) into those this kernel has and those it lacks, per `exists`
/// (tracepoint name -> present in tracefs). Entries come first, so that exits find
/// their timestamps from the start.
pub fn plan_syscall_tracepoints(
    selected: &[usize],
    exists: impl Fn(&str) -> bool,
) -> (Vec<String>, Vec<String>) {
    let mut present = Vec::new();
    let mut absent = Vec::new();
    for dir in ["enter", "exit"] {
        for def in selected.iter().filter_map(|&i| SYSCALLS.get(i)) {
            let name = format!("sys_{dir}_{}", def.tracepoint);
            if exists(&name) {
                present.push(name);
            } else {
                absent.push(name);
            }
        }
    }
    (present, absent)
}

/// Memory the per-CPU stats map may take, bytes (all CPUs together).
pub const STATS_BUDGET_BYTES: u64 = 64 << 20;

/// Worker slots to size the stats map for: room for the current workers to be replaced
/// several times over (reloads, respawns), at least the default, at most the filter size,
/// and within [`STATS_BUDGET_BYTES`] given `ncpus` copies of every slot.
pub fn slots_for(workers: usize, ncpus: usize) -> u32 {
    let want = (workers as u32)
        .saturating_mul(8)
        .max(nginx_probe_common::DEFAULT_WORKER_SLOTS);
    let per_slot = (ncpus.max(1) * SLOT_STATS * std::mem::size_of::<SyscallStats>()) as u64;
    let budget = (STATS_BUDGET_BYTES / per_slot).max(workers as u64 + 1) as u32;
    want.min(MAX_TRACKED_TGIDS).min(budget)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_without_epoll_pwait2_gets_the_rest() {
        // Kernels before 5.11 have no epoll_pwait2: its two tracepoints are reported
        // missing, every other one is attached, entries before exits.
        let core: Vec<usize> = nginx_probe_common::CORE_SYSCALLS
            .iter()
            .map(|&i| i as usize)
            .collect();
        let (present, absent) = plan_syscall_tracepoints(&core, |n| !n.ends_with("epoll_pwait2"));
        assert_eq!(
            absent,
            vec!["sys_enter_epoll_pwait2", "sys_exit_epoll_pwait2"]
        );
        assert_eq!(present.len(), 16);
        assert_eq!(present[0], "sys_enter_accept4");
        assert_eq!(present[8], "sys_exit_accept4");
        assert!(present.iter().all(|n| !n.contains("pwait2")));
        let (present, absent) = plan_syscall_tracepoints(&[usize::MAX], |_| true);
        assert!(present.is_empty() && absent.is_empty());
    }

    #[test]
    fn slots_cover_reloads_within_bounds() {
        assert_eq!(slots_for(0, 2), 64);
        assert_eq!(slots_for(2, 2), 64);
        assert_eq!(slots_for(16, 2), 128);
        assert_eq!(slots_for(1000, 2), MAX_TRACKED_TGIDS);
        // 128 CPUs: 64 MiB / (128 * 22 * 416 B) = 57 slots, or one more than the workers.
        assert_eq!(slots_for(2, 128), 57);
        assert_eq!(slots_for(64, 128), 65);
        // Never fewer slots than workers.
        assert_eq!(slots_for(200, 128), 201);
    }
}
