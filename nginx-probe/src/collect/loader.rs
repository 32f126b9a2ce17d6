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
    filter_entry, filter_slot,
    lifecycle::{names as lc_names, worker::LC_PER_WORKER},
    names::{self, global, map, prog},
    Entry, InFlight, SyscallStats, UpstreamCall, DROP_COUNTERS, FD_CREATING, FD_KIND_COUNT,
    FILTER_SIZE, MAX_TRACKED_TGIDS, OFF_COUNT, SYSCALLS, SYSCALL_COUNT, TLS_STATS, UPSTREAM_STATS,
};

use crate::{
    collect::{fd_limit, tracefs},
    error::ProbeError,
    model::{
        self, SlotStats, ACCEPTED_IDX, ACCEPT_CLOSE_IDX, CLOSES_IDX, LOG_OPENS_IDX, LOOP_IDX,
        REQUESTS_IDX, SLOT_STATS, TLS_DONE_IDX, TLS_IDX, UPSTREAM_IDX, WRITES_IDX,
    },
};

/// The eBPF object built by `build.rs` (aya-build) from `nginx-probe-ebpf`.
static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/nginx-probe"));

/// Loaded and attached programs plus handles on their maps.
pub struct Probe {
    // Owns the programs and their links; dropping it detaches everything.
    ebpf: Ebpf,
    /// A uprobe failed to load or attach for want of file descriptors (see
    /// [`Probe::check_fds`]).
    fds_ran_out: bool,
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
    tls: PerCpuArray<MapData, SyscallStats>,
    fd_kinds: HashMap<MapData, u64, u32>,
    listen_ports: HashMap<MapData, u16, u8>,
    error_logs: HashMap<MapData, u64, u8>,
    log_opens: PerCpuArray<MapData, u64>,
    accepted: PerCpuArray<MapData, u64>,
    /// Per slot: handshakes completed, counted by the `ngx_ssl_ocsp_validate` uprobe.
    tls_done: PerCpuArray<MapData, u64>,
    /// libssl's handshakes in progress and calls in flight (cleared at a window's start
    /// when libssl's programs are in the detail layer).
    hs_start: HashMap<MapData, [u64; 2], u64>,
    hs_call: HashMap<MapData, u64, [u64; 2]>,
    /// libssl's upstream-side `SSL*`s (`TLS_CLIENT`), cleared with them.
    tls_client: HashMap<MapData, [u64; 2], u8>,
    upstream: Array<MapData, SyscallStats>,
    upstream_fd: HashMap<MapData, u64, u64>,
    up_call: Array<MapData, UpstreamCall>,
    drops: PerCpuArray<MapData, u64>,
    /// Per slot: client connection closes in the worker's context
    /// (`lifecycle::worker`), and when the worker began draining (ns, 0 = serving).
    lc_worker: PerCpuArray<MapData, u64>,
    lc_draining: Array<MapData, u64>,
    /// How write destinations are classified: `Ok(())` when every kernel offset was
    /// found in BTF (the fd table is walked at each write), else why not (then from
    /// /proc snapshots every 2 s).
    pub fd_walk: Result<(), String>,
    /// Tracepoints that this kernel lacks or refused (`sys_enter_*`, `sys_exit_*`,
    /// `sched_process_fork`).
    pub missing: Vec<String>,
    /// Syscall tracepoints attached.
    pub attached: usize,
    /// Whether `sched:sched_process_fork` is attached (new workers tracked in-kernel).
    pub follows_forks: bool,
    /// Whether access-log opens are counted (`access_log_open` on `sys_exit_openat`).
    pub counts_log_opens: bool,
    /// Where accepts come from: `true` once [`Probe::attach_accept_uprobe`] attached
    /// the `ngx_get_connection` uprobe (then accept4/accept tracepoints are detail
    /// like every other syscall tracepoint); `false`: the accept4/accept exits.
    pub accepts_from_uprobe: bool,
    /// Where completed TLS handshakes come from: `true` once [`Probe::attach_tls`]
    /// attached the `ngx_ssl_ocsp_validate` uprobe; `false`: `SSL_do_handshake` returns.
    pub tls_from_nginx: bool,
    /// libssl's programs and their links per worker (see [`tls::TlsLinks`]).
    tls_links: Option<tls::TlsLinks>,
    /// The detail layer with `--detail sampled`: programs loaded once, attached only
    /// in windows (see [`windows`]); empty with `--detail full`.
    detail: Vec<windows::DetailProg>,
    /// Threads' entry timestamps (the LRU hash `IN_FLIGHT`), cleared at window start.
    in_flight: HashMap<MapData, u64, InFlight>,
    /// `DETAIL_GATE`: element 0 = 1 between windows.
    gate: Array<MapData, u32>,
    /// Where tracefs is (the detail windows open tracepoint perf events there).
    tracefs_root: std::path::PathBuf,
    /// Releases closed windows' links and perf events off the main loop.
    closer: windows::Closer,
    /// Worker exit codes from `sched_process_exit` (see [`exits`]).
    exits: HashMap<MapData, u32, u32>,
    /// Whether worker exit codes are known: Err says why not (`task_struct.exit_code`
    /// not in the kernel's BTF, the program not attached).
    pub exit_status: Result<(), String>,
    /// Configuration loads per process (see [`reloads`]): the map once the uretprobe
    /// is attached, else why not.
    config_loads: Result<HashMap<MapData, u32, nginx_probe_common::reloads::ConfigLoads>, String>,
    /// QUIC connections nginx ended, by call and reason (see [`quic`]): the map once the
    /// uprobes are attached, else why not.
    quic_ends: Result<HashMap<MapData, nginx_probe_common::quic::QuicEndKey, u64>, String>,
    /// Client connection lifecycle programs and maps (see [`crate::collect::lifecycle`]).
    pub lifecycle: crate::collect::lifecycle::Lifecycle,
}

/// Detaching is releasing each link and perf event, and each waits for the kernel
/// (an RCU grace period under the global `event_mutex`, see [`windows::Closer`]):
/// about 80 ms each here, so the ~35 programs released one by one held the exit
/// (Ctrl-C, `--duration`) for about 3 s. Every program is unloaded (its links first)
/// on a thread of its own, with an open detail window's links and perf events, so the
/// waits overlap: the exit takes about one of them.
impl Drop for Probe {
    fn drop(&mut self) {
        let mut fds: Vec<windows::Release> = Vec::new();
        let _ = self.detach_detail_fds(&mut fds);
        std::thread::scope(|s| {
            for (_, prog) in self.ebpf.programs_mut() {
                let spawned = std::thread::Builder::new()
                    .stack_size(64 * 1024)
                    .spawn_scoped(s, || unload(prog));
                // No thread: the program is released with the object, in turn.
                drop(spawned);
            }
            for fd in fds {
                let _ = std::thread::Builder::new()
                    .stack_size(64 * 1024)
                    .spawn_scoped(s, move || drop(fd));
            }
        });
    }
}

/// Unloads one program, its links first (what dropping it does); kinds this probe
/// does not load are left to the object's drop.
fn unload(prog: &mut aya::programs::Program) {
    use aya::programs::Program;
    let _ = match prog {
        Program::TracePoint(p) => p.unload(),
        Program::RawTracePoint(p) => p.unload(),
        Program::UProbe(p) => p.unload(),
        _ => Ok(()),
    };
}

mod accept;
mod exits;
mod lifecycle_uprobes;
mod perf_link;
mod quic;
mod reloads;
mod symbols;
mod tls;
mod windows;
pub use tls::{find_libssl, LibsslFile, TlsSources};
pub use windows::{is_rare_tracepoint, WindowCost};

/// Raises RLIMIT_MEMLOCK for kernels that still charge BPF maps to it (before 5.11);
/// harmless where memcg accounting is used.
fn raise_memlock() {
    use nix::sys::resource::{setrlimit, Resource, RLIM_INFINITY};
    if let Err(e) = setrlimit(Resource::RLIMIT_MEMLOCK, RLIM_INFINITY, RLIM_INFINITY) {
        debug!("setrlimit(RLIMIT_MEMLOCK) failed: {e}");
    }
}

/// The object as loaded, with what was learnt on the way.
struct Loaded {
    ebpf: Ebpf,
    /// Whether write destinations are classified in the kernel (the kernel's BTF has
    /// every offset of the fd-table walk), or why not.
    fd_walk: Result<(), String>,
    /// Whether the exit-code offset was found in the kernel's BTF, or why not.
    exit_status: Result<(), String>,
    /// The lifecycle programs' globals as patched (`collect::lifecycle`).
    lifecycle_meta: crate::model::connections::LifecycleMeta,
}

/// Loads the embedded object with its globals patched (the tracefs fork record's
/// offsets, the kernel's BTF offsets, the master) and its per-worker maps sized for
/// `slots` workers; attaches nothing.
fn load_object(
    tracefs_root: &Path,
    master_tgid: u32,
    slots: u32,
    fd_walk: bool,
) -> Result<Loaded, ProbeError> {
    let fork_format =
        std::fs::read_to_string(tracefs_root.join("events/sched/sched_process_fork/format"))
            .unwrap_or_default();
    let parent_off = tracefs::field_offset(&fork_format, "parent_pid").unwrap_or(12);
    let child_off = tracefs::field_offset(&fork_format, "child_pid").unwrap_or(20);
    let btf = crate::collect::btf::Btf::from_kernel();
    let (exit_off, exit_status) = exits::exit_code_offset(btf.as_ref());
    let lc = crate::collect::lifecycle::globals(btf.as_ref());
    let load_parent_off = reloads::parent_offsets(btf.as_ref());
    let offsets = if fd_walk {
        btf.and_then(|b| crate::collect::btf::kernel_offsets(&b))
    } else {
        Err("--writes-from-proc".to_string())
    };
    let (koff, fd_walk) = match offsets {
        Ok(o) => (o, Ok(())),
        Err(e) => {
            warn!("write destinations come from /proc snapshots every 2 s ({e}); fds that live for one request may be misfiled");
            ([u64::MAX; OFF_COUNT], Err(e))
        }
    };
    let walk: u32 = fd_walk.is_ok() as u32;
    let ebpf = EbpfLoader::new()
        .override_global(global::FD_WALK, &walk, true)
        .override_global(global::KOFF, &koff, true)
        .override_global(global::MASTER_TGID, &master_tgid, true)
        .override_global(global::FORK_PARENT_OFF, &parent_off, true)
        .override_global(global::FORK_CHILD_OFF, &child_off, true)
        .override_global(nginx_probe_common::exits::GLOBAL_OFF, &exit_off, true)
        .override_global(lc_names::LC_LSNDTIME_OFF, &lc.lsndtime, true)
        .override_global(lc_names::LC_LRCVTIME_OFF, &lc.lrcvtime, true)
        .override_global(lc_names::LC_HZ, &lc.hz, true)
        .override_global(lc_names::LC_TASK_FLAGS_OFF, &lc.task_flags, true)
        .override_global(lc_names::LC_BYTES_RECEIVED_OFF, &lc.bytes_received, true)
        .override_global(lc_names::LC_RAW_OFF, &lc.raw_off, true)
        .override_global(
            nginx_probe_common::reloads::GLOBAL_PARENT_OFF,
            &load_parent_off,
            true,
        )
        .map_max_entries(map::STATS, slots * SYSCALL_COUNT as u32)
        .map_max_entries(map::FREE_SLOTS, slots)
        .map_max_entries(map::REQUESTS, slots)
        .map_max_entries(map::MAIN_ENTRY, slots)
        .map_max_entries(map::LOOP, slots)
        .map_max_entries(map::LAST_ACCEPT, slots)
        .map_max_entries(map::ACCEPT_CLOSE, slots)
        .map_max_entries(map::GET_CONN_FRAME, slots)
        .map_max_entries(
            map::WRITES,
            slots * nginx_probe_common::FD_KIND_COUNT as u32,
        )
        .map_max_entries(map::LAST_WAKE, slots)
        .map_max_entries(map::TLS, slots * TLS_STATS)
        .map_max_entries(map::LOG_OPENS, slots)
        .map_max_entries(map::ACCEPTED, slots)
        .map_max_entries(map::TLS_DONE, slots)
        .map_max_entries(map::UPSTREAM, slots * UPSTREAM_STATS)
        .map_max_entries(map::UP_CALL, slots)
        .map_max_entries(lc_names::LC_WORKER, slots * LC_PER_WORKER as u32)
        .map_max_entries(lc_names::LC_DRAINING, slots)
        .load(EBPF_OBJECT)?;
    Ok(Loaded {
        ebpf,
        fd_walk,
        exit_status,
        lifecycle_meta: lc.meta,
    })
}

impl Probe {
    /// Each loaded program's run time and run count as the kernel counts them (only
    /// while `kernel.bpf_stats_enabled` is 1; see [`crate::collect::selfcost`]).
    /// Programs not loaded (the uprobes without `--uprobes`) are left out.
    pub fn program_costs(&self) -> Vec<crate::model::ProgramCost> {
        self.ebpf
            .programs()
            .filter_map(|(name, p)| {
                let info = p.info().ok()?;
                Some(crate::model::ProgramCost {
                    name: name.to_string(),
                    run_time_ns: info.run_time().as_nanos() as u64,
                    run_count: info.run_count(),
                })
            })
            .collect()
    }

    /// Loads the programs (attaching nothing) with `slots` worker slots, all free.
    /// `master_tgid` is the master whose forks the fork program follows. With
    /// `fd_walk`, write destinations are classified in the kernel when the kernel's BTF
    /// has every offset; otherwise from /proc snapshots.
    ///
    /// Errors: load failures and map errors.
    pub fn load(
        tracefs_root: &Path,
        master_tgid: u32,
        slots: u32,
        fd_walk: bool,
    ) -> Result<Probe, ProbeError> {
        raise_memlock();
        tracefs::check_record_layout(tracefs_root)?;
        let loaded = load_object(tracefs_root, master_tgid, slots, fd_walk)?;
        Probe::from_object(loaded, tracefs_root, slots)
    }

    /// The probe over a loaded object: its maps taken out, every slot free (slot 0 on
    /// top).
    fn from_object(loaded: Loaded, tracefs_root: &Path, slots: u32) -> Result<Probe, ProbeError> {
        let mut ebpf = loaded.ebpf;
        let mut take = |name: &str| {
            ebpf.take_map(name)
                .ok_or_else(|| ProbeError::Missing(format!("map {name}")))
        };
        let mut probe = Probe {
            workers: HashMap::try_from(take(map::WORKERS)?)?,
            filter: Array::try_from(take(map::FILTER)?)?,
            collided: Array::try_from(take(map::COLLIDED)?)?,
            free_slots: Stack::try_from(take(map::FREE_SLOTS)?)?,
            stats: PerCpuArray::try_from(take(map::STATS)?)?,
            requests: PerCpuArray::try_from(take(map::REQUESTS)?)?,
            main_entry: Array::try_from(take(map::MAIN_ENTRY)?)?,
            loop_stats: Array::try_from(take(map::LOOP)?)?,
            last_wake: Array::try_from(take(map::LAST_WAKE)?)?,
            last_accept: Array::try_from(take(map::LAST_ACCEPT)?)?,
            accept_close: Array::try_from(take(map::ACCEPT_CLOSE)?)?,
            writes: PerCpuArray::try_from(take(map::WRITES)?)?,
            tls: PerCpuArray::try_from(take(map::TLS)?)?,
            fd_kinds: HashMap::try_from(take(map::FD_KINDS)?)?,
            listen_ports: HashMap::try_from(take(map::LISTEN_PORTS)?)?,
            error_logs: HashMap::try_from(take(map::ERROR_LOGS)?)?,
            log_opens: PerCpuArray::try_from(take(map::LOG_OPENS)?)?,
            accepted: PerCpuArray::try_from(take(map::ACCEPTED)?)?,
            tls_done: PerCpuArray::try_from(take(map::TLS_DONE)?)?,
            hs_start: HashMap::try_from(take(map::HS_START)?)?,
            hs_call: HashMap::try_from(take(map::HS_CALL)?)?,
            tls_client: HashMap::try_from(take(map::TLS_CLIENT)?)?,
            upstream: Array::try_from(take(map::UPSTREAM)?)?,
            upstream_fd: HashMap::try_from(take(map::UPSTREAM_FD)?)?,
            up_call: Array::try_from(take(map::UP_CALL)?)?,
            drops: PerCpuArray::try_from(take(map::DROPS)?)?,
            lc_worker: PerCpuArray::try_from(take(lc_names::LC_WORKER)?)?,
            lc_draining: Array::try_from(take(lc_names::LC_DRAINING)?)?,
            fd_walk: loaded.fd_walk,
            fds_ran_out: false,
            missing: Vec::new(),
            attached: 0,
            follows_forks: false,
            counts_log_opens: false,
            accepts_from_uprobe: false,
            tls_from_nginx: false,
            tls_links: None,
            detail: Vec::new(),
            in_flight: HashMap::try_from(take(map::IN_FLIGHT)?)?,
            gate: Array::try_from(take(map::DETAIL_GATE)?)?,
            tracefs_root: tracefs_root.to_path_buf(),
            closer: windows::Closer::new(),
            exits: HashMap::try_from(take(nginx_probe_common::exits::MAP)?)?,
            exit_status: loaded.exit_status,
            config_loads: Err("not attached yet".into()),
            quic_ends: Err("not attached yet".into()),
            lifecycle: crate::collect::lifecycle::Lifecycle::take(
                &mut ebpf,
                loaded.lifecycle_meta,
            )?,
            ebpf,
        };
        // Slot 0 on top: workers found at attach get 0, 1, 2...
        for slot in (0..slots).rev() {
            probe.free_slots.push(slot, 0)?;
        }
        Ok(probe)
    }

    /// Attaches `sched:sched_process_fork` (children the master forks from now on are
    /// tracked in the kernel), then the enter/exit tracepoints of the `selected`
    /// syscalls (indexes into `SYSCALLS`) that exist. Missing ones
    /// are recorded in `missing` and skipped. With `sampled`, the detail layer
    /// (tracepoints of per-request syscalls, the accept-then-close detector, the
    /// access-log open counter) is loaded but left detached, for
    /// [`Probe::attach_detail`]; only the continuous layer is attached here: fork
    /// following, and the tracepoints of `nginx_probe_common::is_rare` syscalls unless
    /// accepts come from the uprobe ([`Probe::accepts_from_uprobe`]: then no syscall
    /// tracepoint at all, so no task takes the kernel's syscall-tracing slow path
    /// between windows).
    ///
    /// Errors: [`ProbeError::NothingAttached`] when no syscall tracepoint could be
    /// attached (or, sampled, none could even be loaded).
    pub fn attach(
        &mut self,
        tracefs_root: &Path,
        selected: &[usize],
        sampled: bool,
    ) -> Result<(), ProbeError> {
        if sampled {
            // Closed until the first window opens.
            self.set_detail_gate(false)?;
        }
        // Room for aya's one look for tracefs at the first attach (see `headroom`).
        fd_limit::headroom(8, "loading the eBPF programs")?;
        // Exit status before fork following, so no worker it tracks exits unseen.
        self.attach_exits(tracefs_root)?;
        let lc_missing = self.lifecycle.attach(&mut self.ebpf, tracefs_root)?;
        self.missing.extend(lc_missing);
        // Fork following first, so no worker forked from here on is missed.
        self.attach_fork(tracefs_root)?;
        // Accept-then-close detection on close entry (one cheap run per close).
        if tracefs::has_event(tracefs_root, "syscalls", "sys_enter_close") {
            let res = self.load_or_attach(prog::CLOSE_AFTER_ACCEPT, "sys_enter_close", sampled)?;
            if let Err(e) = res {
                if fd_limit::is_exhaustion(&e) {
                    return Err(fd_exhausted());
                }
                warn!("could not attach the accept-then-close detector ({e}); worker_connections exhaustion goes undetected");
                self.missing.push(prog::CLOSE_AFTER_ACCEPT.to_string());
            }
        } else {
            self.missing.push(prog::CLOSE_AFTER_ACCEPT.to_string());
        }
        // Access-log opens (openat exits): only where writes are classified in the
        // kernel, since it classifies the new fd the same way.
        if self.fd_walk.is_ok() {
            let attached = tracefs::has_event(tracefs_root, "syscalls", "sys_exit_openat")
                && match self.load_or_attach(prog::ACCESS_LOG_OPEN, "sys_exit_openat", sampled)? {
                    Ok(()) => true,
                    Err(e) if fd_limit::is_exhaustion(&e) => return Err(fd_exhausted()),
                    Err(e) => {
                        warn!("could not attach the access-log open counter ({e}); access logs reopened per request go undetected");
                        false
                    }
                };
            self.counts_log_opens = attached;
            if !attached {
                self.missing.push("access_log_open".to_string());
            }
        }
        self.attach_syscalls(tracefs_root, selected, sampled)
    }

    /// Attaches `sched:sched_process_fork` when tracefs has it; without it new workers
    /// are found by scanning /proc (and the program is listed missing).
    fn attach_fork(&mut self, tracefs_root: &Path) -> Result<(), ProbeError> {
        if tracefs::has_event(tracefs_root, "sched", "sched_process_fork") {
            let prog: &mut TracePoint = self
                .ebpf
                .program_mut(prog::FORK)
                .ok_or_else(|| ProbeError::Missing(format!("program {}", prog::FORK)))?
                .try_into()?;
            match prog
                .load()
                .and_then(|_| prog.attach("sched", "sched_process_fork"))
            {
                Ok(_) => self.follows_forks = true,
                Err(e) if fd_limit::is_exhaustion(&e) => return Err(fd_exhausted()),
                Err(e) => warn!(
                    "could not attach sched:sched_process_fork ({e}); new workers are found by scanning /proc every 500 ms"
                ),
            }
        }
        if !self.follows_forks {
            self.missing.push(prog::FORK.to_string());
        }
        Ok(())
    }

    /// Loads the tracepoint program `prog_name` and, unless `sampled`, attaches it to
    /// `syscalls:<tracepoint>`; `sampled`, it is kept for the detail windows. The outer
    /// error: the object lacks the program; the inner one: the kernel refused it.
    fn load_or_attach(
        &mut self,
        prog_name: &str,
        tracepoint: &str,
        sampled: bool,
    ) -> Result<Result<(), aya::programs::ProgramError>, ProbeError> {
        let prog: &mut TracePoint = self
            .ebpf
            .program_mut(prog_name)
            .ok_or_else(|| ProbeError::Missing(format!("program {prog_name}")))?
            .try_into()?;
        Ok(if sampled {
            prog.load().map(|_| {
                self.detail
                    .push(windows::DetailProg::new(prog_name, tracepoint))
            })
        } else {
            prog.load()
                .and_then(|_| prog.attach("syscalls", tracepoint))
                .map(|_| ())
        })
    }

    /// Loads the enter/exit tracepoints of the `selected` syscalls that tracefs has, and
    /// attaches those of the continuous layer (all, unless `sampled`; see
    /// [`Probe::attach`]); the others are kept for the detail windows.
    ///
    /// Errors: [`ProbeError::NothingAttached`] when none could be attached or kept.
    fn attach_syscalls(
        &mut self,
        tracefs_root: &Path,
        selected: &[usize],
        sampled: bool,
    ) -> Result<(), ProbeError> {
        let detail = &mut self.detail;
        let ebpf = &mut self.ebpf;
        let mut last_err = String::new();
        let (present, absent) = plan_syscall_tracepoints(selected, |name| {
            tracefs::has_event(tracefs_root, "syscalls", name)
        });
        self.missing.extend(absent);
        for (prog_name, name) in present {
            let prog: &mut TracePoint = ebpf
                .program_mut(&prog_name)
                .ok_or_else(|| ProbeError::Missing(format!("program {prog_name}")))?
                .try_into()?;
            if sampled && (self.accepts_from_uprobe || !windows::is_rare_tracepoint(&name)) {
                match prog.load() {
                    Ok(()) => detail.push(windows::DetailProg::new(&prog_name, &name)),
                    Err(e) if fd_limit::is_exhaustion(&e) => return Err(fd_exhausted()),
                    Err(e) => {
                        warn!("could not load the program of syscalls:{name}: {e}; continuing without it");
                        last_err = format!("syscalls:{name}: {e}");
                        self.missing.push(name);
                    }
                }
                continue;
            }
            match prog.load().and_then(|_| prog.attach("syscalls", &name)) {
                Ok(_) => self.attached += 1,
                // No verifier log and no guess about the kernel: the limit is named.
                Err(e) if fd_limit::is_exhaustion(&e) => return Err(fd_exhausted()),
                Err(e) => {
                    warn!("could not attach syscalls:{name}: {e}; continuing without it");
                    last_err = format!("syscalls:{name}: {e}");
                    self.missing.push(name);
                }
            }
        }
        if self.attached == 0 && self.detail.is_empty() {
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
        for sym in [prog::CREATE_REQUEST, prog::FREE_REQUEST] {
            self.attach_uprobe(sym, sym, binary)?;
        }
        Ok(())
    }

    /// Loads program `prog_name` and attaches it (uprobe or uretprobe, as the object
    /// says) to symbol `sym` of `target` for every process mapping it.
    ///
    /// Errors: a one-line reason naming the program or the symbol and file.
    fn attach_uprobe(&mut self, prog_name: &str, sym: &str, target: &Path) -> Result<(), String> {
        let prog: &mut UProbe = self
            .ebpf
            .program_mut(prog_name)
            .ok_or_else(|| format!("the eBPF object has no program {prog_name}"))?
            .try_into()
            .map_err(|e: ProgramError| e.to_string())?;
        let fds = &mut self.fds_ran_out;
        let mut ran_out = |e: &(dyn std::error::Error + 'static)| {
            *fds |= fd_limit::is_exhaustion(e);
        };
        prog.load().map_err(|e| {
            ran_out(&e);
            format!("{prog_name}: {e}")
        })?;
        prog.attach(sym, target, UProbeScope::AllProcesses)
            .map_err(|e| {
                ran_out(&e);
                format!("uprobe on {sym} in {}: {e}", target.display())
            })?;
        Ok(())
    }

    /// Errors: [`ProbeError::FdLimit`] when a uprobe could not be loaded or attached
    /// because this process ran out of file descriptors (its warning then named no
    /// fact about nginx or the kernel).
    pub fn check_fds(&self) -> Result<(), ProbeError> {
        if self.fds_ran_out {
            return Err(fd_exhausted());
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

    /// Makes `ports` (nginx's listening TCP ports) the ports whose sockets are clients;
    /// any other TCP socket a worker writes to is an upstream. Adds only: a port nginx
    /// stopped listening on stays (its sockets may still be open).
    pub fn add_listen_ports(&mut self, ports: &[u16]) -> Result<(), ProbeError> {
        for &p in ports {
            self.listen_ports.insert(p, 1u8, 0)?;
        }
        self.lifecycle.add_ports(ports)?;
        Ok(())
    }

    /// Marks inode number `ino` as an error log's.
    pub fn add_error_log(&mut self, key: u64) -> Result<(), ProbeError> {
        self.error_logs.insert(key, 1u8, 0)?;
        Ok(())
    }

    /// Forgets the upstream fds of an exited worker (`UPSTREAM_FD` entries keyed by its
    /// tgid), so the map does not fill up through reloads.
    pub fn forget_upstream_fds(&mut self, tgid: u32) {
        let keys: Vec<u64> = self
            .upstream_fd
            .keys()
            .filter_map(Result::ok)
            .filter(|k| (k >> 32) as u32 == tgid)
            .collect();
        for k in keys {
            let _ = self.upstream_fd.remove(&k);
        }
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
        for i in 0..TLS_STATS {
            self.tls.set(slot * TLS_STATS + i, zero()?, 0)?;
        }
        self.log_opens
            .set(slot, PerCpuValues::try_from(vec![0u64; ncpus])?, 0)?;
        self.accepted
            .set(slot, PerCpuValues::try_from(vec![0u64; ncpus])?, 0)?;
        self.tls_done
            .set(slot, PerCpuValues::try_from(vec![0u64; ncpus])?, 0)?;
        for i in 0..UPSTREAM_STATS {
            self.upstream
                .set(slot * UPSTREAM_STATS + i, SyscallStats::ZERO, 0)?;
        }
        self.last_accept.set(slot, 0u64, 0)?;
        self.accept_close.set(slot, 0u64, 0)?;
        for i in 0..LC_PER_WORKER as u32 {
            self.lc_worker.set(
                slot * LC_PER_WORKER as u32 + i,
                PerCpuValues::try_from(vec![0u64; ncpus])?,
                0,
            )?;
        }
        self.lc_draining.set(slot, 0u64, 0)?;
        self.clear_calls_in_progress(slot)?;
        self.free_slots.push(slot, 0)?;
        Ok(())
    }

    /// Zeroes what slot `slot`'s programs carry from one call to the next: the main
    /// syscall's entry stamp, the last wake-up and the upstream connect in progress.
    fn clear_calls_in_progress(&mut self, slot: u32) -> Result<(), ProbeError> {
        let none = InFlight {
            start_ns: 0,
            syscall: 0,
            fd_kind: 0,
        };
        self.main_entry.set(slot, none, 0)?;
        self.last_wake.set(slot, 0u64, 0)?;
        let no_call = UpstreamCall {
            fd1: 0,
            start_ns: 0,
            optval: 0,
        };
        self.up_call.set(slot, no_call, 0)?;
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
        let mut links = Vec::new();
        if self.unlink_tls_worker(tgid, &mut links) > 0 {
            self.closer.close(links);
        }
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
        out[LOG_OPENS_IDX].count = self.log_opens.get(&slot, 0)?.iter().sum();
        out[ACCEPTED_IDX].count = if self.accepts_from_uprobe {
            self.accepted.get(&slot, 0)?.iter().sum()
        } else {
            model::tracepoint_accepts(&out)
        };
        for i in 0..UPSTREAM_STATS {
            out[UPSTREAM_IDX + i as usize] = self.upstream.get(&(slot * UPSTREAM_STATS + i), 0)?;
        }
        for k in 0..FD_KIND_COUNT {
            let idx = slot * FD_KIND_COUNT as u32 + k as u32;
            out[WRITES_IDX + k] = model::sum_cpus(self.writes.get(&idx, 0)?.iter());
        }
        for i in 0..TLS_STATS {
            out[TLS_IDX + i as usize] =
                model::sum_cpus(self.tls.get(&(slot * TLS_STATS + i), 0)?.iter());
        }
        out[TLS_DONE_IDX].count = if self.tls_from_nginx {
            self.tls_done.get(&slot, 0)?.iter().sum()
        } else {
            out[TLS_IDX].timed
        };
        for i in 0..LC_PER_WORKER {
            let idx = slot * LC_PER_WORKER as u32 + i as u32;
            out[CLOSES_IDX + i].count = self.lc_worker.get(&idx, 0)?.iter().sum();
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

/// Plans the programs for the `selected` syscalls (indexes into `SYSCALLS`): the
/// enter/exit pair of each timed one ([`Entry::Always`]), the `count_exit_<tp>` program
/// of each exit-only one, and `count_exit_<tp>` for every fd-creating syscall
/// ([`FD_CREATING`]) not selected, so EMFILE/ENFILE are counted on all of them. Returns
/// (program, tracepoint) pairs this kernel has, entries first so that exits find their
/// timestamps from the start, and the tracepoints it lacks, per `exists` (tracepoint
/// name -> present in tracefs).
pub fn plan_syscall_tracepoints(
    selected: &[usize],
    exists: impl Fn(&str) -> bool,
) -> (Vec<(String, String)>, Vec<String>) {
    let mut present = Vec::new();
    let mut absent = Vec::new();
    let mut plan = |prog: String, tp: String| {
        if exists(&tp) {
            present.push((prog, tp));
        } else {
            absent.push(tp);
        }
    };
    let defs = || selected.iter().filter_map(|&i| SYSCALLS.get(i));
    for def in defs().filter(|d| d.entry == Entry::Always) {
        let tp = names::syscall_program("enter", def.tracepoint);
        plan(tp.clone(), tp);
    }
    for def in defs() {
        let tp = names::syscall_program("exit", def.tracepoint);
        match def.entry {
            Entry::Always => plan(tp.clone(), tp),
            Entry::Never => plan(names::count_exit_program(def.tracepoint), tp),
        }
    }
    for &i in FD_CREATING.iter() {
        if !selected.contains(&(i as usize)) {
            let def = &SYSCALLS[i as usize];
            plan(
                names::count_exit_program(def.tracepoint),
                names::syscall_program("exit", def.tracepoint),
            );
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

/// The error of a program that could not be loaded or attached for want of file
/// descriptors (see [`fd_limit::loading_programs`]).
fn fd_exhausted() -> ProbeError {
    fd_limit::loading_programs()
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
        // 12 timed syscalls (2 tracepoints each, pwait2 missing: 22), 8 exit-only ones of
        // the core set, and openat's exit-only program (not in the core set).
        assert_eq!(present.len(), 22 + 8 + 1);
        assert_eq!(present[0].0, "sys_enter_accept4");
        assert!(present.iter().all(|(p, _)| !p.contains("pwait2")));
        assert!(present
            .iter()
            .any(|(p, t)| p == "count_exit_socket" && t == "sys_exit_socket"));
        assert!(present
            .iter()
            .any(|(p, t)| p == "count_exit_openat" && t == "sys_exit_openat"));
        let enters = present
            .iter()
            .take_while(|(p, _)| p.starts_with("sys_enter_"))
            .count();
        assert!(present[enters..]
            .iter()
            .all(|(p, _)| !p.starts_with("sys_enter_")));
        // openat named: timed, no exit-only program for it.
        let (present, _) =
            plan_syscall_tracepoints(&[nginx_probe_common::sys::OPENAT as usize], |_| true);
        assert!(present.contains(&("sys_enter_openat".into(), "sys_enter_openat".into())));
        assert!(!present.iter().any(|(p, _)| p == "count_exit_openat"));
        assert!(present.iter().any(|(p, _)| p == "count_exit_accept4"));
        let (present, absent) = plan_syscall_tracepoints(&[usize::MAX], |_| false);
        assert!(present.is_empty());
        assert_eq!(absent.len(), nginx_probe_common::FD_CREATING.len());
    }

    #[test]
    fn slots_cover_reloads_within_bounds() {
        assert_eq!(slots_for(0, 2), 64);
        assert_eq!(slots_for(2, 2), 64);
        assert_eq!(slots_for(16, 2), 128);
        assert_eq!(slots_for(1000, 2), MAX_TRACKED_TGIDS);
        // 128 CPUs: 64 MiB / (128 * SLOT_STATS * 416 B) slots, or one more than the workers.
        assert_eq!(
            slots_for(2, 128) as usize,
            (64usize << 20) / (128 * SLOT_STATS * 416)
        );
        assert_eq!(slots_for(64, 128), 65);
        // Never fewer slots than workers.
        assert_eq!(slots_for(200, 128), 201);
    }

    /// The kernel-user contract, checked without root: the embedded eBPF object has
    /// every map, program and patched global user space asks for by name, and nothing
    /// that is not named in `nginx_probe_common::names` (a map or program added to the
    /// eBPF crate must be named there too).
    #[test]
    fn the_embedded_object_has_exactly_the_named_maps_programs_and_globals() {
        use std::collections::BTreeSet;
        let obj = aya_obj::Object::parse(EBPF_OBJECT).expect("parse the embedded eBPF object");
        let maps: BTreeSet<&str> = obj
            .maps
            .keys()
            .map(String::as_str)
            .filter(|m| !m.starts_with('.'))
            .collect();
        let lc = &nginx_probe_common::lifecycle::names::MAPS;
        let mut want: BTreeSet<&str> = map::ALL.iter().chain(lc.iter()).copied().collect();
        want.insert(nginx_probe_common::exits::MAP);
        want.insert(nginx_probe_common::reloads::MAP);
        want.insert(nginx_probe_common::quic::MAP);
        assert_eq!(maps, want, "maps: object vs nginx_probe_common::names::map");
        let programs: BTreeSet<String> = obj.programs.keys().cloned().collect();
        let mut want: BTreeSet<String> = prog::ALL.iter().map(|p| p.to_string()).collect();
        want.insert(nginx_probe_common::exits::PROGRAM.to_string());
        want.insert(nginx_probe_common::reloads::PROGRAM.to_string());
        want.insert(nginx_probe_common::quic::PROG_SHUTDOWN.to_string());
        want.insert(nginx_probe_common::quic::PROG_FINALIZE.to_string());
        want.insert(nginx_probe_common::quic::PROG_CLOSE.to_string());
        want.insert(nginx_probe_common::quic::PROG_STARTED.to_string());
        for def in &SYSCALLS {
            match def.entry {
                Entry::Always => {
                    for dir in ["enter", "exit"] {
                        want.insert(names::syscall_program(dir, def.tracepoint));
                    }
                }
                Entry::Never => {}
            }
        }
        for &i in FD_CREATING.iter() {
            want.insert(names::count_exit_program(SYSCALLS[i as usize].tracepoint));
        }
        for (p, _, _) in nginx_probe_common::lifecycle::names::PROGS {
            want.insert(p.to_string());
        }
        for (p, _) in nginx_probe_common::lifecycle::names::RAW_PROGS {
            want.insert(p.to_string());
        }
        want.insert(nginx_probe_common::lifecycle::names::PROG_DRAIN.to_string());
        want.insert(nginx_probe_common::lifecycle::names::PROG_DRAIN_SWEPT.to_string());
        want.insert(nginx_probe_common::lifecycle::names::PROG_TLS_SHUTDOWN.to_string());
        assert_eq!(
            programs, want,
            "programs: object vs names::prog + SYSCALLS + FD_CREATING"
        );
        use object::{Object as _, ObjectSymbol as _};
        let elf = object::File::parse(EBPF_OBJECT).expect("parse the embedded ELF");
        let symbols: BTreeSet<&str> = elf.symbols().filter_map(|s| s.name().ok()).collect();
        for g in global::ALL
            .iter()
            .chain([
                &nginx_probe_common::exits::GLOBAL_OFF,
                &nginx_probe_common::reloads::GLOBAL_PARENT_OFF,
            ])
            .chain(nginx_probe_common::lifecycle::names::GLOBALS)
        {
            assert!(symbols.contains(g), "global {g} missing from the object");
        }
    }
}
