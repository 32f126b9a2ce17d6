//! Keeps the worker set of one master current (reloads, respawns, binary upgrades) and
//! reads it into a [`Snapshot`] (`Tracker::snapshot`); what a report needs besides two
//! snapshots it hands over as plain data (`Tracker::period_inputs`), and the model
//! builds the report (`crate::model::build::report`).
//!
//! Slots come from one queue map (`FREE_SLOTS`): user space pops one for each worker it
//! finds in `/proc`, the kernel pops one for each child the master forks. When a worker
//! has exited, its final stats are read and kept here, and its slot is zeroed and
//! pushed back, so reloads never run out of slots.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

use log::warn;

use crate::{
    collect::loader::Probe,
    collect::nginx_counters::NginxCounters,
    collect::target::{self, Master, Role, WorkerProc},
    error::ProbeError,
    model::{
        self,
        build::{MergedInputs, PeriodInputs},
        listen::{ListenInputs, ListenState},
        snapshot::{Snapshot, MERGED_KEY},
        Event, EventKind, ReportKind, RequestSource, SlotStats, WorkerInfo,
    },
};

mod fds;
mod listen;
mod nginx_errors;
mod quota;
mod workers;

/// Seconds since the Unix epoch, now (ms precision): when a report's period ends.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| model::round3(d.as_secs_f64()))
        .unwrap_or(0.0)
}

/// A `bpf_ktime_get_ns()` value (CLOCK_MONOTONIC, ns) on the wall clock, seconds since
/// the Unix epoch, from both clocks read now (ms precision).
pub fn mono_to_unix(ns: u64) -> f64 {
    let mono = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as f64 + t.tv_nsec() as f64 / 1e9)
        .unwrap_or(0.0);
    model::round3(unix_now() - (mono - ns as f64 / 1e9))
}

/// Exited workers reported one by one; older ones are merged into one aggregate, so a
/// run through many reloads keeps bounded memory.
pub const MAX_EXITED_KEPT: usize = 16;

/// Worker events kept for the summary; older ones are dropped and counted.
pub const MAX_EVENTS: usize = 256;

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
    /// Children of the master running nginx's binary, not yet titled: a binary
    /// upgrade's new binary, loading its configuration. Said as a new master once
    /// titled one, as a failed upgrade once gone.
    upgrading: BTreeSet<u32>,
    /// The last binary upgrade's new master seen titled a master, until `/proc` says
    /// it is gone (`resolve_upgrades`).
    new_master_beside: Option<crate::model::NewMasterBeside>,
    /// Final stats of exited workers whose slots were recycled.
    finals: BTreeMap<u32, SlotStats>,
    /// Exited workers still reported one by one, oldest first.
    exited_order: VecDeque<u32>,
    /// Sum of the exited workers merged away (beyond [`MAX_EXITED_KEPT`]).
    merged: SlotStats,
    /// How many workers `merged` holds.
    pub merged_workers: u64,
    /// Their CPU time since attach (clock ticks) and time waiting for a CPU (ns).
    merged_cpu_ticks: u64,
    merged_run_delay_ns: u64,
    /// How per-worker requests are counted: `Uprobe` when the uprobes are attached,
    /// else `Unknown`.
    pub request_source: RequestSource,
    /// nginx's own counters (global requests, accepted/handled, gauges), when the
    /// master's binary exports them.
    pub counters: Option<NginxCounters>,
    /// Why `counters` is None.
    pub counters_error: Option<String>,
    /// Completed handshakes come from nginx's `ngx_ssl_ocsp_validate` (see
    /// `loader::TlsSources`).
    pub tls_from_nginx: bool,
    /// libssl's handshake figures come from the detail windows only.
    pub tls_libssl_sampled: bool,
    /// Where libssl's uprobes are attached (a shared libssl, the nginx binary, or
    /// nowhere and why); None when the TLS handshake uprobes are not attached (the
    /// report then has no `tls`).
    pub tls_libssl: Option<model::LibsslSource>,
    /// Whether accepts come from the `ngx_get_connection` uprobe
    /// (`Probe::accepts_from_uprobe`).
    pub accepts_from_uprobe: bool,
    /// How write destinations are classified (fd table walk with BTF, or /proc).
    pub write_source: model::WriteSource,
    /// Whether access-log opens are counted in the kernel.
    pub counts_log_opens: bool,
    /// Indexes into `SYSCALLS` of the traced syscalls.
    pub traced: Vec<usize>,
    /// Workers that could not be given a slot.
    pub untracked: u64,
    /// What happened, in order (the last [`MAX_EVENTS`]).
    pub events: Vec<Event>,
    /// Events dropped from `events` to bound memory.
    pub events_dropped: u64,
    /// Events since the last `refresh` returned.
    fresh: Vec<Event>,
    /// Events since the current interval started (at most [`MAX_EVENTS`]).
    interval_events: Vec<Event>,
    /// nginx's listening sockets by inode.
    listen: BTreeMap<u32, ListenState>,
    /// Listen (overflows, drops) of the master's netns at attach and at the last
    /// interval report.
    listen_base_total: Option<(u64, u64)>,
    listen_base_interval: Option<(u64, u64)>,
    /// Set once a sock_diag dump failed (warned once, then skipped).
    listen_failed: bool,
    /// Listening sockets seen closed since attach (orders `ListenState::closed_seq`).
    listeners_closed_seen: u64,
    /// nginx's listening sockets closed since attach, event by event, from the
    /// lifecycle counters read every refresh after the reload generations
    /// (`model::listener_closes`), and where it stood when the interval started.
    listener_closes: model::listener_closes::ListenerCloseHistory,
    listener_closes_mark: model::listener_closes::ListenerClosesMark,
    /// The configuration loads since attach (`model::reloads`).
    config_loads: model::reloads::ConfigLoadHistory,
    /// Classified non-socket fds per worker pid: fd -> kind.
    fd_kinds: BTreeMap<u32, BTreeMap<u32, u32>>,
    /// Inodes of the error logs given to the kernel.
    error_log_inodes: BTreeSet<u64>,
    /// Paths of the access logs and error logs seen (for the report).
    pub log_paths: BTreeMap<String, &'static str>,
    /// Workers that have held each slot so far (the next one's generation).
    slot_holders: BTreeMap<u32, u32>,
    /// nginx's error log, read from attach on and counted by message class.
    pub error_log: crate::collect::error_log::ErrorLogReader,
    /// The workers' tightest cgroup CPU quota (None: none or unreadable), and its
    /// `cpu.stat` counters: nr_periods, nr_throttled, throttled_usec.
    cpu_quota: Option<crate::collect::cgroup::Quota>,
    throttle: [model::Samples; 3],
    refreshes: u64,
    started: Instant,
    /// `/proc` reads that failed for another reason than a process being gone
    /// (EMFILE, EACCES, ...): nothing was concluded from them (reported in `drops` as
    /// `proc_read_errors`, the first one warned).
    pub proc_errors: u64,
    /// With `--detail sampled`: the windows (see `model::sampling`) and when the first
    /// opened (t = 0 of the schedule).
    pub sampling: Option<(model::sampling::Sampler, Instant)>,
    /// Reload generations, serving/shutting down, exits (see `worker_state`).
    pub lifecycle: crate::collect::worker_state::Lifecycle,
    /// nginx's configuration as read at attach or after the last reload
    /// (`collect::config`); set with [`Tracker::set_config`].
    pub config: Option<model::config::ConfigReport>,
    /// nginx's access logs, read from attach on (`collect::access_log`).
    pub access_logs: crate::collect::access_log::AccessLogs,
    /// The workers' open log files at the first refresh that knew them: the start of
    /// the summary's period (its `prev` is attach, all zero).
    log_files_at_attach: Option<Vec<model::log_files::LogFileSample>>,
    /// Live worker pid -> its access- and error-log fds -> kind, from the last /proc
    /// scan of its fd table.
    log_fds: BTreeMap<u32, BTreeMap<u32, u32>>,
    /// The master's network namespace's settings as last read (at attach and each
    /// snapshot): what a snapshot after the master's exit says
    /// (`collect::netns::local_ports_keeping`).
    netns_settings: model::local_ports::LocalPortsReport,
    /// nginx's QUIC end reasons read so far (`collect::quic_reasons`).
    quic_reasons: crate::collect::quic_reasons::QuicReasons,
}

impl Tracker {
    /// A tracker for `master` with no workers yet; see [`Tracker::add_workers`].
    pub fn new(master: Master) -> Tracker {
        let master_pid = master.pid;
        Tracker {
            master,
            workers: BTreeMap::new(),
            ignored: BTreeSet::new(),
            pending: BTreeSet::new(),
            upgrading: BTreeSet::new(),
            new_master_beside: None,
            finals: BTreeMap::new(),
            exited_order: VecDeque::new(),
            merged: model::ZERO_SLOT,
            merged_workers: 0,
            merged_cpu_ticks: 0,
            merged_run_delay_ns: 0,
            request_source: RequestSource::Unknown,
            counters: None,
            counters_error: Some("nginx's counters were not opened".into()),
            tls_from_nginx: false,
            tls_libssl_sampled: false,
            tls_libssl: None,
            accepts_from_uprobe: false,
            write_source: model::WriteSource::ProcSnapshot,
            counts_log_opens: false,
            traced: (0..nginx_probe_common::SYSCALL_COUNT).collect(),
            untracked: 0,
            events: Vec::new(),
            events_dropped: 0,
            fresh: Vec::new(),
            interval_events: Vec::new(),
            listen: BTreeMap::new(),
            listen_base_total: None,
            listen_base_interval: None,
            listen_failed: false,
            listeners_closed_seen: 0,
            listener_closes: Default::default(),
            listener_closes_mark: Default::default(),
            config_loads: Default::default(),
            fd_kinds: BTreeMap::new(),
            error_log_inodes: BTreeSet::new(),
            log_paths: BTreeMap::new(),
            slot_holders: BTreeMap::new(),
            error_log: crate::collect::error_log::ErrorLogReader::new(master_pid),
            cpu_quota: None,
            throttle: Default::default(),
            refreshes: 0,
            started: Instant::now(),
            proc_errors: 0,
            sampling: None,
            lifecycle: Default::default(),
            netns_settings: crate::collect::netns::local_ports(master_pid),
            quic_reasons: Default::default(),
            config: None,
            access_logs: Default::default(),
            log_files_at_attach: None,
            log_fds: BTreeMap::new(),
        }
    }

    /// Gives each of `found` (workers seen in /proc) a slot and puts it in the kernel
    /// filter; returns how many were new. `announce` records a `worker_started` event.
    pub fn add_workers(
        &mut self,
        probe: &mut Probe,
        found: &[WorkerProc],
        announce: bool,
    ) -> Result<usize, ProbeError> {
        let mut added = 0;
        for w in found {
            if self.workers.contains_key(&w.pid) || self.ignored.contains(&w.pid) {
                continue;
            }
            // The kernel may have given it a slot on fork after our look at the filter
            // map: adopt that slot rather than overwrite it.
            let slot = match probe.slot_of(w.pid) {
                Some(slot) => slot,
                None => {
                    let Some(slot) = probe.alloc_slot() else {
                        self.untracked += 1;
                        self.ignored.insert(w.pid);
                        warn!("worker {} not traced: all worker slots are in use", w.pid);
                        continue;
                    };
                    probe.track(w.pid, slot)?;
                    slot
                }
            };
            probe.link_tls(w.pid);
            let info = self.worker_info(w.pid, w.nspid.clone(), slot, true);
            self.workers.insert(w.pid, info);
            if announce {
                self.event(EventKind::WorkerStarted, w.pid);
            }
            added += 1;
        }
        Ok(added)
    }

    /// A newly seen worker's info, with the next generation of `slot`.
    fn worker_info(&mut self, pid: u32, nspid: Vec<i32>, slot: u32, alive: bool) -> WorkerInfo {
        let holders = self.slot_holders.entry(slot).or_insert(0);
        let generation = *holders;
        *holders += 1;
        WorkerInfo {
            pid,
            nspid,
            slot,
            generation,
            alive,
            fds: Default::default(),
            cpu_ticks: Default::default(),
            run_delay_ns: Default::default(),
        }
    }

    fn event(&mut self, event: EventKind, pid: u32) {
        if self.events.len() >= MAX_EVENTS {
            self.events.remove(0);
            self.events_dropped += 1;
        }
        let ev = Event {
            t_s: self.started.elapsed().as_secs_f64(),
            event,
            pid,
        };
        if event == EventKind::NewMaster {
            self.new_master_beside = Some(crate::model::NewMasterBeside {
                pid,
                since_s: ev.t_s,
            });
        }
        self.fresh.push(ev.clone());
        if self.interval_events.len() < MAX_EVENTS {
            self.interval_events.push(ev.clone());
        }
        self.events.push(ev);
    }

    /// Brings the worker set up to date: classifies the children the kernel started
    /// tracking on fork (workers stay; a new master or cache processes leave the
    /// filter), adds workers found only in `/proc`, and marks exited workers (their
    /// counts stay); then samples the listen queues, the error log, the CPU quota, the
    /// workers' fds and CPU time, the access logs, the workers' reload generations and
    /// nginx's listening sockets closed. Returns the events this call added.
    pub fn refresh(&mut self, probe: &mut Probe) -> Result<Vec<Event>, ProbeError> {
        // 1. Children the kernel added on fork; a binary upgrade's new binary said
        //    once it is a master or gone.
        self.adopt_forked(probe)?;
        self.resolve_upgrades();
        // 2. Workers only /proc knows: those forked between the first scan and fork
        //    following being attached (the first refresh runs right after attach), or
        //    all new ones when fork following could not be attached. Scanning all of
        //    /proc is the costly part of a refresh, so it is not repeated while the
        //    kernel follows forks.
        if self.refreshes == 0 || !probe.follows_forks {
            let live = target::find_workers(self.master.pid);
            self.add_workers(probe, &live, true)?;
        }
        // 3. Exits: keep the final stats, free the slot.
        self.retire_exited(probe)?;
        // 4. The listen queues (their ports tell client sockets from upstream ones),
        //    nginx's error log, the CPU quota.
        let ports = self.sample_listen();
        if !ports.is_empty() {
            probe.add_listen_ports(&ports)?;
        }
        self.error_log.poll();
        self.sample_quota();
        // nginx's counters every refresh, not only at reports: when the master exits,
        // its memory can no longer be read and a report keeps the last good read, at
        // most a refresh old (read only at reports, a --summary-only run whose master
        // quit showed 0 requests).
        if let Some(c) = self.counters.as_mut() {
            c.read();
        }
        // 5. What the workers' fds are (logs, files, pipes), every 2 s and for new
        //    workers at once; exited workers' entries are dropped.
        self.refreshes += 1;
        let full_scan = self.refreshes % 4 == 1;
        self.classify_worker_fds(probe, full_scan)?;
        self.mark_config_changed(full_scan);
        // 6. fd usage and CPU time of the live workers.
        self.sample_worker_usage();
        // 7. The access logs, through the fds just classified (looked up again every 2 s).
        //    After a worker started (a reload, a respawn) the configuration is read
        //    again first (bounded, once): the new workers' lines may be in formats or
        //    files only it names, and the report quotes what they run.
        self.follow_access_logs(full_scan);
        // Configuration loads, read once: the generations' and step 9's.
        let loads = probe.config_loads().map_err(str::to_string);
        self.refresh_lifecycle_with(probe, loads.as_deref().ok());
        // 8. Listening sockets closed since the last refresh, after the generation
        //    just brought up to date: a reload's old workers close theirs 100 ms or
        //    more after its new workers are forked.
        let closes = probe.lifecycle.read_listener_closes()?;
        self.listener_closes
            .observe(&closes.ports, unix_now(), self.lifecycle.reload_seen());
        // 9. Configuration loads (the master's reloads, nginx -t runs), and whether
        //    the master's binary file is still the one at its path.
        if crate::collect::target::exe_deleted(self.master.pid) {
            self.config_loads.binary_replaced();
        }
        // Processes gone since (not the master): their entries are dropped once read.
        let gone: Vec<u32> = loads
            .iter()
            .flatten()
            .map(|(tgid, _)| *tgid)
            .filter(|&t| {
                t != self.master.pid && matches!(crate::collect::target::alive(t), Ok(false))
            })
            .collect();
        self.config_loads.observe(
            self.master.pid,
            loads.as_deref().map_err(String::as_str),
            unix_now(),
            mono_to_unix,
        );
        probe.forget_config_loads(&gone);
        if self.log_files_at_attach.is_none() && !self.log_fds.is_empty() {
            self.log_files_at_attach = Some(self.log_files());
        }
        Ok(std::mem::take(&mut self.fresh))
    }

    /// On a `full_scan` refresh (every 2 s), marks the configuration files edited on
    /// disk since they were read (`collect::config::mark_changed_since_read`).
    fn mark_config_changed(&mut self, full_scan: bool) {
        if let Some(cfg) = self.config.as_mut().filter(|_| full_scan) {
            crate::collect::config::mark_changed_since_read(self.master.pid, cfg);
        }
    }

    /// Brings the workers' lifecycle up to date (`worker_state::Lifecycle::refresh`):
    /// every [`Tracker::refresh`], and once at attach on the workers found then
    /// (`cli::attach::load_probe`), so that the generations at attach are numbered
    /// before a worker forked since is looked at: a reload while the programs load is
    /// a reload after attach, not one before it.
    pub fn refresh_lifecycle(&mut self, probe: &mut Probe) {
        let loads = probe.config_loads().ok();
        self.refresh_lifecycle_with(probe, loads.as_deref());
    }

    /// [`Tracker::refresh_lifecycle`] with the configuration loads already read
    /// (`loads`: per process, None when not counted): the master's (its reloads) set
    /// before its workers are looked at, a reload loading before it forks them.
    fn refresh_lifecycle_with(
        &mut self,
        probe: &mut Probe,
        loads: Option<&[(u32, nginx_probe_common::reloads::ConfigLoads)]>,
    ) {
        let master = self.master.pid;
        self.lifecycle.set_master_loads(loads.map(|all| {
            all.iter()
                .find(|(tgid, _)| *tgid == master)
                .map_or(0, |(_, l)| u64::from(l.loaded))
        }));
        let addrs = self.listen.values().map(|l| l.addr.as_str());
        self.lifecycle
            .refresh(&self.workers, addrs, probe, unix_now());
    }

    /// Marks the workers already shutting down at attach (their title) as draining in
    /// the kernel, once the drain uprobe is attached: their closes are a draining
    /// worker's, not the serving workers' keepalive closes.
    pub fn mark_draining_at_attach(&self, probe: &mut Probe) {
        for pid in self.lifecycle.draining_pids() {
            if let Some(w) = self.workers.get(&pid) {
                probe.mark_draining_before_attach(w.slot);
            }
        }
    }

    /// Sets the configuration nginx runs (at attach; [`Tracker::refresh`] reads it
    /// again after a worker started), and with it the access logs to read.
    pub fn set_config(&mut self, cfg: model::config::ConfigReport) {
        self.access_logs.configure(self.master.pid, &cfg);
        self.config = Some(cfg);
    }

    /// Counts a `/proc` read that failed for another reason than the process being
    /// gone, and warns about the first one.
    pub fn proc_error(&mut self, e: &ProbeError) {
        self.proc_errors += 1;
        if self.proc_errors == 1 {
            warn!("{e}; counting goes on (further /proc errors are counted as proc_read_errors)");
        }
    }

    /// Gives the kernel what tells write destinations apart: nginx's listening ports
    /// (client sockets) and the live workers' error-log inodes (their fd 2). Called
    /// before the programs are attached, then on every refresh (ports) and every 2 s
    /// (error logs).
    pub fn register_destinations(&mut self, probe: &mut Probe) -> Result<(), ProbeError> {
        let ports = self.sample_listen();
        self.register_error_logs(probe)?;
        if !ports.is_empty() {
            probe.add_listen_ports(&ports)?;
        }
        Ok(())
    }

    fn register_error_logs(&mut self, probe: &mut Probe) -> Result<(), ProbeError> {
        let live: Vec<u32> = self
            .workers
            .values()
            .filter(|w| w.alive)
            .map(|w| w.pid)
            .collect();
        for pid in live {
            if let Some(ino) = target::fd_inode(pid, 2) {
                if self.error_log_inodes.insert(ino) && probe.fd_walk.is_ok() {
                    probe.add_error_log(ino)?;
                }
            }
        }
        Ok(())
    }

    /// Starts a new interval for the listen-queue maxima and counters.
    pub fn start_interval(&mut self) {
        self.interval_events.clear();
        self.listener_closes_mark = self.listener_closes.mark();
        self.error_log.start_interval();
        self.access_logs.start_interval();
        for t in &mut self.throttle {
            t.start_interval();
        }
        for w in self.workers.values_mut() {
            w.cpu_ticks.start_interval();
            w.run_delay_ns.start_interval();
        }
        for st in self.listen.values_mut() {
            st.queue_max_interval = st.queue_now;
            st.drops_interval = st.drops_now;
        }
        self.listen_base_interval = crate::collect::listen::listen_counters(self.master.pid);
    }

    /// Reads a dead worker's final stats, then zeroes and frees its slot.
    fn retire(&mut self, probe: &mut Probe, pid: u32, slot: u32) -> Result<(), ProbeError> {
        let last = probe.read_slot(slot)?;
        self.lifecycle.note_drained(pid, probe.drained(slot));
        probe.forget_upstream_fds(pid);
        self.finals.insert(pid, last);
        probe.recycle_slot(slot)?;
        self.exited_order.push_back(pid);
        while self.exited_order.len() > MAX_EXITED_KEPT {
            let Some(old) = self.exited_order.pop_front() else {
                break;
            };
            if let Some(f) = self.finals.remove(&old) {
                model::add_slot(&mut self.merged, &f);
                self.merged_workers += 1;
                if let Some(w) = self.workers.get(&old) {
                    self.merged_cpu_ticks += w.cpu_ticks.delta(true).unwrap_or(0);
                    self.merged_run_delay_ns += w.run_delay_ns.delta(true).unwrap_or(0);
                }
            }
            self.workers.remove(&old);
        }
        Ok(())
    }

    /// Opens nginx's stub_status counters in the master (see
    /// [`crate::collect::nginx_counters`]); on failure keeps the reason for the report.
    pub fn open_counters(&mut self) {
        match NginxCounters::open(self.master.pid) {
            Ok(c) => {
                self.counters = Some(c);
                self.counters_error = None;
            }
            Err(e) => {
                self.counters = None;
                self.counters_error = Some(e);
            }
        }
    }

    /// The live workers' open log files now (`collect::log_files`).
    fn log_files(&self) -> Vec<model::log_files::LogFileSample> {
        crate::collect::log_files::sample(
            self.log_fds
                .iter()
                .filter(|(pid, _)| self.workers.get(pid).is_some_and(|w| w.alive))
                .map(|(pid, fds)| (*pid, fds)),
        )
    }

    /// Reads every live worker's slot (exited workers: their final stats), the drop
    /// counters and nginx's own counters.
    pub fn snapshot(&mut self, probe: &Probe) -> Result<Snapshot, ProbeError> {
        // The access logs up to now, then nginx's counters: lines written since the
        // last refresh (up to 500 ms of them) count in this period, not the next
        // (the demo's first interval read 88% of nginx's requests, at 60,000 a
        // second, with no reason given). The fds are the last refresh's. The error
        // log first: nginx writes a request's error lines before its access line, and
        // a period read only at refreshes held 27248 `connect() failed` lines beside
        // 28323 502s of the access log (trial 20).
        self.error_log.poll();
        self.access_logs.poll(&self.log_fds, false);
        let stub = self.counters.as_mut().map(|c| c.read());
        let coverage = self.sampling.as_ref().map(|(s, t0)| {
            s.ledger
                .at(t0.elapsed().as_secs_f64(), stub.map(|c| c.requests))
        });
        let mut workers = BTreeMap::new();
        for w in self.workers.values() {
            let stats = match self.finals.get(&w.pid) {
                Some(f) => *f,
                None => probe.read_slot(w.slot)?,
            };
            workers.insert(w.pid, stats);
        }
        if self.merged_workers > 0 {
            workers.insert(MERGED_KEY, self.merged);
        }
        Ok(Snapshot {
            workers,
            drops: probe.read_drops()?,
            proc: self
                .workers
                .values()
                .map(|w| (w.pid, (w.cpu_ticks.last, w.run_delay_ns.last)))
                .collect(),
            listen_counters: crate::collect::listen::listen_counters(self.master.pid),
            socket_drops: self
                .listen
                .iter()
                .map(|(ino, st)| (*ino, st.drops_now))
                .collect(),
            stub,
            coverage,
            lifecycle: (probe.lifecycle.read()?, probe.lifecycle.meta.clone()),
            log_files: self.log_files(),
            local_ports: crate::collect::netns::local_ports_keeping(
                self.master.pid,
                &mut self.netns_settings,
            ),
            quic_ends: {
                let pids: Vec<u32> = std::iter::once(self.master.pid)
                    .chain(self.workers.values().filter(|w| w.alive).map(|w| w.pid))
                    .collect();
                self.quic_reasons.counts(probe.quic_ends(), &pids)
            },
            configured_logs: self
                .config
                .as_ref()
                .filter(|c| c.is_read())
                .map(|c| crate::collect::log_files::configured(self.master.pid, c)),
        })
    }

    /// What a report of a period reads besides the two snapshots
    /// ([`crate::model::build::report`]), as plain data: borrowed from the tracker, plus
    /// what is read now (the netns listen counters, nginx's UDP ports, the error log's
    /// and the master's fd limits for `nginx_errors`, the online CPUs, the clock).
    /// `kind` picks the error log's counts: since attach for a summary, else since the
    /// interval started.
    pub fn period_inputs(&self, kind: ReportKind) -> PeriodInputs<'_> {
        let summary = kind == ReportKind::Summary;
        PeriodInputs {
            master_pid: self.master.pid,
            master_nspid: &self.master.nspid,
            workers: &self.workers,
            merged: (self.merged_workers > 0).then_some(MergedInputs {
                workers: self.merged_workers,
                cpu_ticks: self.merged_cpu_ticks,
                run_delay_ns: self.merged_run_delay_ns,
            }),
            request_source: self.request_source,
            counters_error: self.counters_error.as_deref(),
            tls_from_nginx: self.tls_from_nginx,
            tls_libssl_sampled: self.tls_libssl_sampled,
            tls_libssl: self.tls_libssl.as_ref(),
            accepts_from_uprobe: self.accepts_from_uprobe,
            write_source: self.write_source,
            counts_log_opens: self.counts_log_opens,
            traced: &self.traced,
            untracked: self.untracked,
            events_dropped: self.events_dropped,
            proc_errors: self.proc_errors,
            events: &self.events,
            interval_events: &self.interval_events,
            new_master_beside: self.new_master_beside,
            sampling: self.sampling.as_ref().map(|(s, _)| s),
            worker_lifecycles: self
                .workers
                .keys()
                .map(|&pid| (pid, self.lifecycle.of(pid)))
                .collect(),
            exit_history: self.lifecycle.history(),
            config_loads: &self.config_loads,
            listener_closes: (&self.listener_closes, self.listener_closes_mark),
            listen: ListenInputs {
                sockets: &self.listen,
                counters_now: crate::collect::listen::listen_counters(self.master.pid),
                base_total: self.listen_base_total,
                base_interval: self.listen_base_interval,
            },
            udp_ports: crate::collect::udp_listen::udp_listen_ports(
                self.master.pid,
                &crate::collect::listen::socket_inodes(self.master.pid),
            ),
            own_addresses: crate::collect::netns::own_addresses(self.master.pid),
            nginx_errors: self.error_log_inputs(summary),
            access_log: self.access_logs.report(summary),
            cpu_quota: self.quota_inputs(),
            config: self.config.as_ref(),
            log_paths: &self.log_paths,
            log_files_at_attach: self.log_files_at_attach.as_deref(),
            ticks_per_s: procfs::ticks_per_second(),
            now_unix_s: unix_now(),
        }
    }
}
