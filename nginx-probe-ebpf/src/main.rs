//! nginx-probe's eBPF programs: one pair of syscall tracepoints (enter/exit) per traced
//! syscall, filtered in the kernel to the target nginx's workers and aggregated in
//! per-CPU maps. Nothing is streamed to user space; user space reads the maps.
//!
//! Per event cost for a process that is not a worker: one array load (`FILTER`, a
//! direct-mapped copy of `WORKERS`), then return. For a worker: entry stores a timestamp in an LRU map; exit looks it up,
//! removes it and updates one per-CPU `SyscallStats` slot.
#![cfg_attr(target_arch = "bpf", no_std)]
#![cfg_attr(target_arch = "bpf", no_main)]

#[cfg(target_arch = "bpf")]
mod programs {
    use aya_ebpf::{
        helpers::{
            bpf_get_current_pid_tgid, bpf_get_current_task, bpf_ktime_get_ns,
            bpf_probe_read_kernel, bpf_probe_read_user,
        },
        macros::{map, tracepoint, uprobe, uretprobe},
        maps::{Array, HashMap, LruHashMap, PerCpuArray, Stack},
        programs::{ProbeContext, RetProbeContext, TracePointContext},
        EbpfContext as _,
    };
    use nginx_probe_common::{
        connect_err_class, drop, fd_kind, filter_entry, filter_slot, is_rare, off, sys, ErrClass,
        InFlight, SyscallStats, UpstreamCall, DEFAULT_WORKER_SLOTS, DROP_COUNTERS, EINPROGRESS,
        FD_KIND_COUNT, FILTER_SIZE, MAX_CLASSIFIED_FDS, MAX_ERROR_LOGS, MAX_IN_FLIGHT,
        MAX_LISTEN_PORTS, MAX_OPEN_HANDSHAKES, MAX_OPEN_REQUESTS, MAX_TRACKED_TGIDS,
        MAX_UPSTREAM_FDS, OFF_COUNT, SYSCALL_COUNT, TLS_STATS, UPSTREAM_CONNECT, UPSTREAM_FDS,
        UPSTREAM_STATS,
    };

    /// Offset of `long ret` in `syscalls:sys_exit_*` records and of the first argument
    /// in `syscalls:sys_enter_*` records (after the 8-byte common header and the 4-byte
    /// `__syscall_nr` with its padding). User space checks it against the tracepoints'
    /// `format` files before loading.
    const RECORD_WORD_OFFSET: usize = 16;

    /// The 8-byte word at [`RECORD_WORD_OFFSET`] of a syscall tracepoint record: `ret`
    /// on exit, the first argument on entry. A direct context load at a constant
    /// offset (checked by the verifier), far cheaper than a `bpf_probe_read` helper call.
    #[inline(always)]
    fn record_word(ctx: &TracePointContext) -> u64 {
        // SAFETY: tracepoint programs may read their record directly; the verifier
        // checks the constant offset against the record's bounds.
        unsafe {
            core::ptr::read_volatile(
                (ctx.as_ptr() as *const u8).add(RECORD_WORD_OFFSET) as *const u64
            )
        }
    }

    /// Argument `i` (0-based) of a `syscalls:sys_enter_*` record: 8-byte words from
    /// [`RECORD_WORD_OFFSET`] on (user space checks getsockopt's layout).
    #[inline(always)]
    fn record_arg<const I: usize>(ctx: &TracePointContext) -> u64 {
        // SAFETY: as in `record_word`; the offset is a constant.
        unsafe {
            core::ptr::read_volatile(
                (ctx.as_ptr() as *const u8).add(RECORD_WORD_OFFSET + 8 * I) as *const u64
            )
        }
    }

    /// Host tgid of the nginx master; its forks become tracked workers in the kernel, so
    /// a worker started by a reload or respawn is counted from its first syscall.
    #[no_mangle]
    static MASTER_TGID: u32 = 0;

    /// Offsets of `parent_pid` and `child_pid` in `sched:sched_process_fork` records
    /// (read by user space from the tracepoint's `format` file).
    #[no_mangle]
    static FORK_PARENT_OFF: u64 = 12;
    #[no_mangle]
    static FORK_CHILD_OFF: u64 = 20;

    /// 1 when user space found every offset of `KOFF` in the kernel's BTF: writes are
    /// classified by walking the worker's fd table at the write. 0: from `FD_KINDS`.
    #[no_mangle]
    static FD_WALK: u32 = 0;

    /// Kernel struct member offsets (bytes), indexed by `nginx_probe_common::off`, read
    /// by user space from `/sys/kernel/btf/vmlinux`. `u64::MAX` = absent.
    #[no_mangle]
    static KOFF: [u64; OFF_COUNT] = [u64::MAX; OFF_COUNT];

    /// nginx's listening TCP ports (local port, host order) -> 1, from sock_diag.
    #[map]
    static LISTEN_PORTS: HashMap<u16, u8> = HashMap::with_max_entries(MAX_LISTEN_PORTS, 0);

    /// Inode numbers of the error logs (the workers' fd 2) -> 1.
    #[map]
    static ERROR_LOGS: HashMap<u64, u8> = HashMap::with_max_entries(MAX_ERROR_LOGS, 0);

    /// Per slot: successful openat calls (main thread or not) whose new fd is an
    /// access log (classified like a write's fd): an access log reopened per request
    /// when its path has variables and no `open_log_file_cache`.
    #[map]
    static LOG_OPENS: PerCpuArray<u64> = PerCpuArray::with_max_entries(DEFAULT_WORKER_SLOTS, 0);

    #[inline(always)]
    fn koff(i: usize) -> u64 {
        if i < OFF_COUNT {
            // SAFETY: read-only global patched by the loader.
            unsafe { core::ptr::read_volatile(&KOFF[i]) }
        } else {
            u64::MAX
        }
    }

    /// Reads a `T` at kernel address `base + koff(field)`.
    #[inline(always)]
    fn kread<T>(base: u64, field: usize) -> Option<T> {
        if base == 0 {
            return None;
        }
        // SAFETY: bpf_probe_read_kernel copes with any address (faults return Err).
        unsafe { bpf_probe_read_kernel((base.wrapping_add(koff(field))) as *const T) }.ok()
    }

    const S_IFMT: u16 = 0o170000;
    const S_IFSOCK: u16 = 0o140000;
    const S_IFREG: u16 = 0o100000;
    const S_IFCHR: u16 = 0o020000;
    const S_IFBLK: u16 = 0o060000;
    const O_ACCMODE: u32 = 0o3;
    const O_APPEND: u32 = 0o2000;
    const AF_UNIX: u16 = 1;
    const AF_INET: u16 = 2;
    const AF_INET6: u16 = 10;
    /// `ANON_INODE_FS_MAGIC`: eventfd, epoll, signalfd... (S_IFREG on recent kernels).
    const ANON_INODE_FS_MAGIC: u64 = 0x0904_1934;

    /// The current task's `struct file *` of `fd`, now: `task->files->fdt->fd[fd]`
    /// read with the BTF offsets; None when the table cannot be read or the fd is not
    /// open.
    #[inline(always)]
    fn fd_file(fd: u64) -> Option<u64> {
        // SAFETY: helper call without preconditions.
        let task = unsafe { bpf_get_current_task() };
        let files = kread::<u64>(task, off::TASK_FILES)?;
        let fdt = kread::<u64>(files, off::FILES_FDT)?;
        let max = kread::<u32>(fdt, off::FDT_MAX_FDS)?;
        if fd >= max as u64 {
            return None;
        }
        let arr = kread::<u64>(fdt, off::FDT_FD)?;
        // SAFETY: as in kread.
        match unsafe { bpf_probe_read_kernel((arr + fd * 8) as *const u64) } {
            Ok(f) if f != 0 => Some(f),
            _ => None,
        }
    }

    /// What the current task's `fd` is, now (see `classify_file`).
    #[inline(always)]
    fn classify_fd(fd: u64) -> u32 {
        match fd_file(fd) {
            Some(file) => classify_file(file),
            None => fd_kind::UNKNOWN,
        }
    }

    /// What `struct file` `file` is: a `fd_kind` value; UNKNOWN when it cannot be read.
    #[inline(always)]
    fn classify_file(file: u64) -> u32 {
        let Some(inode) = kread::<u64>(file, off::FILE_INODE) else {
            return fd_kind::UNKNOWN;
        };
        let Some(mode) = kread::<u16>(inode, off::INODE_MODE) else {
            return fd_kind::UNKNOWN;
        };
        let fmt = mode & S_IFMT;
        if fmt == S_IFSOCK {
            let Some(sock) = kread::<u64>(file, off::FILE_PRIVATE) else {
                return fd_kind::UNKNOWN;
            };
            let Some(sk) = kread::<u64>(sock, off::SOCKET_SK) else {
                return fd_kind::UNKNOWN;
            };
            let Some(family) = kread::<u16>(sk, off::SK_FAMILY) else {
                return fd_kind::UNKNOWN;
            };
            if family == AF_INET || family == AF_INET6 {
                let Some(port) = kread::<u16>(sk, off::SK_NUM) else {
                    return fd_kind::UNKNOWN;
                };
                // SAFETY: presence only.
                return if unsafe { LISTEN_PORTS.get(port) }.is_some() {
                    fd_kind::CLIENT
                } else {
                    fd_kind::UPSTREAM
                };
            }
            if family == AF_UNIX {
                if koff(off::UNIX_ADDR) == u64::MAX {
                    return fd_kind::UNKNOWN;
                }
                return match kread::<u64>(sk, off::UNIX_ADDR) {
                    Some(0) => fd_kind::UPSTREAM,
                    Some(_) => fd_kind::CLIENT,
                    None => fd_kind::UNKNOWN,
                };
            }
            return fd_kind::OTHER;
        }
        // Files, pipes, devices: an error log is known by its inode number, whatever
        // its type (a file, or the pipe or tty of `error_log stderr`).
        if fmt == S_IFREG {
            let flags = kread::<u32>(file, off::FILE_FLAGS).unwrap_or(0);
            if flags & O_ACCMODE == 0 {
                // Read-only: a file served, not a write destination (and not an
                // access-log open).
                return fd_kind::OTHER_FILE;
            }
            if is_error_log(inode) {
                return fd_kind::ERROR_LOG;
            }
            let Some(sb) = kread::<u64>(inode, off::INODE_SB) else {
                return fd_kind::UNKNOWN;
            };
            if kread::<u64>(sb, off::SB_MAGIC) == Some(ANON_INODE_FS_MAGIC) {
                return fd_kind::OTHER;
            }
            return if flags & O_APPEND != 0 {
                fd_kind::ACCESS_LOG
            } else {
                fd_kind::TEMP_FILE
            };
        }
        if is_error_log(inode) {
            return fd_kind::ERROR_LOG;
        }
        if fmt == S_IFCHR || fmt == S_IFBLK {
            return fd_kind::OTHER_FILE;
        }
        fd_kind::OTHER
    }

    /// Whether `inode`'s number is one of the error logs' (`ERROR_LOGS`).
    // The key's address is what the helper takes; the borrow stays explicit.
    #[allow(clippy::needless_borrows_for_generic_args)]
    #[inline(always)]
    fn is_error_log(inode: u64) -> bool {
        let ino = kread::<u64>(inode, off::INODE_INO).unwrap_or(0);
        // SAFETY: presence only.
        unsafe { ERROR_LOGS.get(&ino) }.is_some()
    }

    #[inline(always)]
    fn fd_walk() -> bool {
        // SAFETY: read-only global patched by the loader.
        unsafe { core::ptr::read_volatile(&FD_WALK) == 1 }
    }

    /// `openat` returns in a worker: if the new fd is an access log, count an open.
    #[tracepoint]
    pub fn access_log_open(ctx: TracePointContext) -> u32 {
        let Some(slot) = worker_slot() else { return 0 };
        if detail_closed() {
            return 0;
        }
        let ret = record_word(&ctx) as i64;
        if ret < 0 || !fd_walk() {
            return 0;
        }
        let Some(file) = fd_file(ret as u64) else {
            return 0;
        };
        // Most opens are of files to serve (read-only): rejected on their flags, before
        // the rest of the classification.
        let flags = kread::<u32>(file, off::FILE_FLAGS).unwrap_or(0);
        if flags & O_APPEND == 0 || flags & O_ACCMODE == 0 {
            return 0;
        }
        if classify_file(file) == fd_kind::ACCESS_LOG {
            if let Some(n) = LOG_OPENS.get_ptr_mut(slot) {
                // SAFETY: per-CPU slot.
                unsafe { *n += 1 };
            }
        }
        0
    }

    /// Free worker slots, a stack: the slot freed last is given first, so through
    /// reloads workers take turns on few slots (bounded metrics labels). User space
    /// fills it with every slot at start (slot 0 on top), pops slots for the workers it
    /// finds in /proc, and pushes back the slot of an exited worker once it has read and
    /// zeroed it; the fork program pops one per child of the master.
    #[map]
    static FREE_SLOTS: Stack<u32> = Stack::with_max_entries(DEFAULT_WORKER_SLOTS, 0);

    /// tgid of a worker -> its slot. User space fills it at start and removes exited
    /// workers; `sched_process_fork` adds the master's new children.
    #[map]
    static WORKERS: HashMap<u32, u32> = HashMap::with_max_entries(MAX_TRACKED_TGIDS, 0);

    /// Direct-mapped copy of `WORKERS`: index `tgid & (FILTER_SIZE - 1)` holds
    /// `filter_entry(tgid, slot)` or 0. An array load is inlined by the verifier, where a
    /// hash lookup is a helper call: this is the first check of every syscall of every
    /// process. A tracked tgid whose index is taken lives only in `WORKERS`, and
    /// `COLLIDED` says so.
    #[map]
    static FILTER: Array<u64> = Array::with_max_entries(FILTER_SIZE, 0);

    /// Element 0 is 1 once any tracked tgid could not enter `FILTER` (its index was
    /// taken): from then on, misses in `FILTER` also look in `WORKERS`. Only ever set to
    /// 1 (by user space or the fork program), never cleared, so no update is lost.
    #[map]
    static COLLIDED: Array<u32> = Array::with_max_entries(1, 0);

    /// Element 0 = 1 outside a `--detail sampled` window (user space sets it around each
    /// window); 0 (the default, and always with `--detail full`): detail programs count.
    /// Element 1 = 1 when libssl's programs belong to the detail layer (tls.rs).
    #[map]
    static DETAIL_GATE: Array<u32> = Array::with_max_entries(2, 0);

    /// Whether detail programs must count nothing now (between windows).
    #[inline(always)]
    fn detail_closed() -> bool {
        matches!(DETAIL_GATE.get(0), Some(&1))
    }

    /// The slot of worker `tgid`, or None for any other process.
    #[inline(always)]
    fn slot_of(tgid: u32) -> Option<u32> {
        if let Some(e) = FILTER.get(tgid & (FILTER_SIZE - 1)) {
            if let Some(slot) = filter_slot(*e, tgid) {
                return Some(slot);
            }
        }
        match COLLIDED.get(0) {
            // SAFETY: the value is copied out immediately.
            Some(&1) => unsafe { WORKERS.get(tgid) }.copied(),
            _ => None,
        }
    }

    /// pid_tgid of a worker thread inside a traced syscall -> entry timestamp. LRU so a
    /// thread that dies mid-syscall is evicted rather than leaking an entry.
    #[map]
    static IN_FLIGHT: LruHashMap<u64, InFlight> = LruHashMap::with_max_entries(MAX_IN_FLIGHT, 0);

    /// Entry timestamp of each worker's main thread, indexed by slot (`start_ns == 0`:
    /// none). User space sizes it to the slot count and zeroes an element on recycling.
    #[map]
    static MAIN_ENTRY: Array<InFlight> = Array::with_max_entries(DEFAULT_WORKER_SLOTS, 0);

    /// Per slot: the worker's event-loop iterations, from an epoll wait's return to the
    /// next epoll wait call (`count`, `total_ns` = busy time, `max_ns`, `hist`). Main
    /// thread only, so a plain array.
    #[map]
    static LOOP: Array<SyscallStats> = Array::with_max_entries(DEFAULT_WORKER_SLOTS, 0);

    /// (tgid << 32 | fd) -> `fd_kind` of a worker's non-socket fds; user space keeps it
    /// current from /proc.
    #[map]
    static FD_KINDS: HashMap<u64, u32> = HashMap::with_max_entries(MAX_CLASSIFIED_FDS, 0);

    /// write/writev/pwrite64 by destination: index `slot * FD_KIND_COUNT + kind`.
    #[map]
    static WRITES: PerCpuArray<SyscallStats> =
        PerCpuArray::with_max_entries(DEFAULT_WORKER_SLOTS * FD_KIND_COUNT as u32, 0);

    /// Per slot: 1 + the fd the worker's main thread accepted last, until its next traced
    /// syscall (0 = none pending).
    #[map]
    static LAST_ACCEPT: Array<u64> = Array::with_max_entries(DEFAULT_WORKER_SLOTS, 0);

    /// Per slot: connections the worker closed right after accepting them, before any
    /// other traced syscall: nginx's "worker_connections are not enough" path.
    #[map]
    static ACCEPT_CLOSE: Array<u64> = Array::with_max_entries(DEFAULT_WORKER_SLOTS, 0);

    /// Per slot: when the worker's main thread last returned from an epoll wait, ns.
    #[map]
    static LAST_WAKE: Array<u64> = Array::with_max_entries(DEFAULT_WORKER_SLOTS, 0);

    /// Aggregates indexed by `slot * SYSCALL_COUNT + syscall`; user space sets
    /// `max_entries` to `slots * SYSCALL_COUNT` at load time.
    #[map]
    static STATS: PerCpuArray<SyscallStats> =
        PerCpuArray::with_max_entries(DEFAULT_WORKER_SLOTS * SYSCALL_COUNT as u32, 0);

    /// Per worker slot: HTTP requests started (`count`, uprobe on `ngx_http_create_request`)
    /// and their durations until `ngx_http_free_request` (`timed`, `hist`, ns). Only with
    /// `--uprobes`.
    #[map]
    static REQUESTS: PerCpuArray<SyscallStats> =
        PerCpuArray::with_max_entries(DEFAULT_WORKER_SLOTS, 0);

    /// Connection pointer (`ngx_connection_t *`) -> start of its current request, ns.
    /// Keyed by [worker tgid, connection]: workers forked from one master hold their
    /// connection arrays at the same addresses.
    #[map]
    static REQ_START: LruHashMap<[u64; 2], u64> =
        LruHashMap::with_max_entries(MAX_OPEN_REQUESTS, 0);

    /// Upstream connections per slot: `UPSTREAM_STATS` elements at
    /// `slot * UPSTREAM_STATS` (connect outcomes and latency, upstream fds); see
    /// `nginx_probe_common::UPSTREAM_STATS`. Written by the main thread only.
    #[map]
    static UPSTREAM: Array<SyscallStats> =
        Array::with_max_entries(DEFAULT_WORKER_SLOTS * UPSTREAM_STATS, 0);

    /// (tgid << 32 | fd) -> `connect()` entry ns while the result of a non-blocking
    /// connect is not known yet, 0 once it is: the worker's upstream fds, until closed.
    #[map]
    static UPSTREAM_FD: HashMap<u64, u64> = HashMap::with_max_entries(MAX_UPSTREAM_FDS, 0);

    /// Per slot: the connect or getsockopt(SO_ERROR) the main thread is in.
    #[map]
    static UP_CALL: Array<UpstreamCall> = Array::with_max_entries(DEFAULT_WORKER_SLOTS, 0);

    /// Counters of events that could not be fully accounted, see `nginx_probe_common::drop`.
    #[map]
    static DROPS: PerCpuArray<u64> = PerCpuArray::with_max_entries(DROP_COUNTERS as u32, 0);

    #[inline(always)]
    fn count_drop(which: u32) {
        if let Some(p) = DROPS.get_ptr_mut(which) {
            // SAFETY: per-CPU slot, programs do not nest on one CPU for tracepoints.
            unsafe { *p += 1 };
        }
    }

    #[inline(always)]
    fn is_epoll(syscall: u32) -> bool {
        syscall == sys::EPOLL_WAIT || syscall == sys::EPOLL_PWAIT || syscall == sys::EPOLL_PWAIT2
    }

    /// The worker's main thread calls epoll_wait again at `now`: the loop iteration
    /// that started at its last wake-up ends; account its busy time.
    #[inline(always)]
    fn loop_iteration_ends(slot: u32, now: u64) {
        let Some(last) = LAST_WAKE.get_ptr_mut(slot) else {
            return;
        };
        // SAFETY: only this worker's main thread reads and writes it.
        let woke = unsafe { *last };
        if woke == 0 {
            return;
        }
        let Some(s) = LOOP.get_ptr_mut(slot) else {
            return;
        };
        // SAFETY: as above.
        let s = unsafe { &mut *s };
        s.count += 1;
        s.record_ns(now.saturating_sub(woke));
    }

    #[inline(always)]
    fn is_write(syscall: u32) -> bool {
        syscall == sys::WRITE
            || syscall == sys::WRITEV
            || syscall == sys::PWRITE64
            || syscall == sys::PWRITEV
    }

    #[inline(always)]
    fn on_enter(ctx: &TracePointContext, syscall: u32) {
        let pid_tgid = bpf_get_current_pid_tgid();
        let tgid = (pid_tgid >> 32) as u32;
        let Some(slot) = slot_of(tgid) else { return };
        if !is_rare(syscall) && detail_closed() {
            return;
        }
        let mut kind = fd_kind::SOCKET;
        if is_write(syscall) {
            // `fd` is the first argument of write/writev/pwrite64/pwritev.
            let fd = record_word(ctx) & 0xffff_ffff;
            if fd_walk() {
                kind = classify_fd(fd);
            } else {
                let key = ((tgid as u64) << 32) | fd;
                // SAFETY: copied out immediately.
                if let Some(k) = unsafe { FD_KINDS.get(key) } {
                    kind = *k;
                }
            }
        }
        let v = InFlight {
            // SAFETY: helper call without preconditions.
            start_ns: unsafe { bpf_ktime_get_ns() },
            syscall,
            fd_kind: kind,
        };
        // nginx workers are single-threaded: their main thread (tid == tgid) keeps its
        // entry in a plain array indexed by slot, far cheaper than an LRU hash update.
        // Other threads (aio thread pools) use the LRU hash.
        if pid_tgid as u32 == tgid {
            if is_epoll(syscall) {
                loop_iteration_ends(slot, v.start_ns);
            }
            // Another traced syscall between accept and close means a normal path; the
            // error-log line nginx writes on its way to refusing ("worker_connections
            // are not enough") does not.
            if syscall != sys::ACCEPT4
                && syscall != sys::ACCEPT
                && !(is_write(syscall) && kind == fd_kind::ERROR_LOG)
            {
                if let Some(p) = LAST_ACCEPT.get_ptr_mut(slot) {
                    // SAFETY: only this worker's main thread writes this element.
                    unsafe { *p = 0 };
                }
            }
            match MAIN_ENTRY.get_ptr_mut(slot) {
                // SAFETY: only this worker's main thread writes this element.
                Some(p) => unsafe { *p = v },
                None => count_drop(drop::ENTRY_STORE_FAILED),
            }
        } else if IN_FLIGHT.insert(pid_tgid, v, 0).is_err() {
            count_drop(drop::ENTRY_STORE_FAILED);
        }
    }

    #[inline(always)]
    fn on_exit(ctx: &TracePointContext, syscall: u32) {
        let pid_tgid = bpf_get_current_pid_tgid();
        let tgid = (pid_tgid >> 32) as u32;
        let Some(slot) = slot_of(tgid) else { return };
        if !is_rare(syscall) && detail_closed() {
            return;
        }
        let ret = record_word(ctx) as i64;
        // Fully initialised up front (start_ns 0 = no entry): the verifier rejects code
        // that reads a register on a path where it was never written, which an
        // Option's payload can compile to.
        let mut entry = InFlight {
            start_ns: 0,
            syscall: u32::MAX,
            fd_kind: fd_kind::SOCKET,
        };
        let main_thread = pid_tgid as u32 == tgid;
        if main_thread {
            if let Some(p) = MAIN_ENTRY.get_ptr_mut(slot) {
                // SAFETY: only this worker's main thread reads and writes it.
                unsafe {
                    entry = *p;
                    (*p).start_ns = 0;
                }
            }
        } else {
            // SAFETY: the entry is copied out before removal.
            if let Some(e) = unsafe { IN_FLIGHT.get(pid_tgid) } {
                entry = *e;
                let _ = IN_FLIGHT.remove(pid_tgid);
            }
        }
        // SAFETY: helper call without preconditions.
        let now = unsafe { bpf_ktime_get_ns() };
        if main_thread && (syscall == sys::ACCEPT4 || syscall == sys::ACCEPT) && ret >= 0 {
            if let Some(p) = LAST_ACCEPT.get_ptr_mut(slot) {
                // SAFETY: only this worker's main thread writes this element.
                unsafe { *p = ret as u64 + 1 };
            }
        }
        if main_thread && is_epoll(syscall) {
            // The event loop wakes up: an iteration starts.
            if let Some(p) = LAST_WAKE.get_ptr_mut(slot) {
                // SAFETY: only this worker's main thread writes this element.
                unsafe { *p = now };
            }
        }
        let mut latency: u64 = 0;
        let mut timed = false;
        if entry.start_ns == 0 {
            count_drop(drop::EXIT_WITHOUT_ENTRY);
        } else if entry.syscall != syscall {
            count_drop(drop::ENTRY_MISMATCH);
        } else {
            latency = now.saturating_sub(entry.start_ns);
            timed = true;
        }
        let idx = slot * SYSCALL_COUNT as u32 + syscall;
        let s = match STATS.get_ptr_mut(idx) {
            Some(p) => p,
            None => {
                count_drop(drop::SLOT_OUT_OF_RANGE);
                return;
            }
        };
        // SAFETY: per-CPU slot; tracepoint programs do not nest on one CPU.
        let s = unsafe { &mut *s };
        s.count += 1;
        if ret < 0 && !(syscall == sys::CONNECT && ret == -EINPROGRESS) {
            s.errors += 1;
            let c = ErrClass::from_ret(ret) as usize;
            if c < s.errs.len() {
                s.errs[c] += 1;
            }
        } else if ret >= 0
            && syscall != sys::ACCEPT4
            && syscall != sys::ACCEPT
            && syscall != sys::OPENAT
        {
            s.ret_sum += ret as u64;
        }
        if timed {
            s.record_ns(latency);
            // Writes also by destination (the kind was looked up at entry).
            if is_write(syscall) && entry.fd_kind < FD_KIND_COUNT as u32 {
                if let Some(w) = WRITES.get_ptr_mut(slot * FD_KIND_COUNT as u32 + entry.fd_kind) {
                    // SAFETY: per-CPU slot.
                    let w = unsafe { &mut *w };
                    w.count += 1;
                    if ret < 0 {
                        w.errors += 1;
                    } else {
                        w.ret_sum += ret as u64;
                    }
                    w.record_ns(latency);
                }
            }
        }
    }

    /// Follows the master's forks (reload, worker respawn, cache processes): the child
    /// enters `WORKERS` with a free slot before it runs. User space later classifies
    /// it from /proc and removes what is not a worker.
    #[tracepoint]
    pub fn sched_process_fork(ctx: TracePointContext) -> u32 {
        // SAFETY: read-only globals patched by the loader.
        let (master, parent_off, child_off) = unsafe {
            (
                core::ptr::read_volatile(&MASTER_TGID),
                core::ptr::read_volatile(&FORK_PARENT_OFF) as usize,
                core::ptr::read_volatile(&FORK_CHILD_OFF) as usize,
            )
        };
        // SAFETY: bpf_probe_read of the tracepoint record at offsets from its format.
        let parent: i32 = match unsafe { ctx.read_at::<i32>(parent_off) } {
            Ok(p) => p,
            Err(_) => return 0,
        };
        if parent as u32 != master {
            return 0;
        }
        // SAFETY: as above.
        let child: i32 = match unsafe { ctx.read_at::<i32>(child_off) } {
            Ok(c) => c,
            Err(_) => return 0,
        };
        let slot = match FREE_SLOTS.pop() {
            Ok(Some(s)) => s,
            _ => {
                count_drop(drop::SLOTS_EXHAUSTED);
                return 0;
            }
        };
        let child = child as u32;
        if WORKERS.insert(child, slot, 0).is_err() {
            let _ = FREE_SLOTS.push(slot, 0);
            count_drop(drop::FILTER_FULL);
            return 0;
        }
        // The master forks one child at a time, and user space only clears entries of
        // tgids it untracks: nobody else writes this element now.
        let placed = match FILTER.get_ptr_mut(child & (FILTER_SIZE - 1)) {
            // SAFETY: see above.
            Some(e) if unsafe { *e } == 0 => {
                unsafe { *e = filter_entry(child, slot) };
                true
            }
            _ => false,
        };
        if !placed {
            if let Some(c) = COLLIDED.get_ptr_mut(0) {
                // SAFETY: only ever set to 1.
                unsafe { *c = 1 };
            }
        }
        0
    }

    #[inline(always)]
    fn worker_slot() -> Option<u32> {
        slot_of((bpf_get_current_pid_tgid() >> 32) as u32)
    }

    /// `ngx_http_request_t *ngx_http_create_request(ngx_connection_t *c)`: one HTTP/1.x
    /// request starts on connection `c`.
    #[uprobe]
    pub fn ngx_http_create_request(ctx: ProbeContext) -> u32 {
        let Some(slot) = worker_slot() else { return 0 };
        let Some(conn) = ctx.arg::<u64>(0) else {
            return 0;
        };
        // SAFETY: helper call without preconditions.
        let now = unsafe { bpf_ktime_get_ns() };
        let tgid = bpf_get_current_pid_tgid() >> 32;
        let _ = REQ_START.insert([tgid, conn], now, 0);
        if let Some(s) = REQUESTS.get_ptr_mut(slot) {
            // SAFETY: per-CPU slot.
            unsafe { (*s).count += 1 };
        } else {
            count_drop(drop::SLOT_OUT_OF_RANGE);
        }
        0
    }

    /// `void ngx_http_free_request(ngx_http_request_t *r, ngx_int_t rc)`: the request
    /// ends. `r->connection` is the second field of `ngx_http_request_t` (offset 8 on
    /// 64-bit, after `uint32_t signature`), stable across nginx versions.
    #[uprobe]
    pub fn ngx_http_free_request(ctx: ProbeContext) -> u32 {
        let Some(slot) = worker_slot() else { return 0 };
        let Some(r) = ctx.arg::<u64>(0) else { return 0 };
        // SAFETY: reads 8 bytes of the worker's memory; failure is handled.
        let conn = match unsafe { bpf_probe_read_user((r + 8) as *const u64) } {
            Ok(c) => c,
            Err(_) => return 0,
        };
        // SAFETY: copied out before removal.
        let key = [bpf_get_current_pid_tgid() >> 32, conn];
        let Some(start) = (unsafe { REQ_START.get(key) }).copied() else {
            return 0;
        };
        let _ = REQ_START.remove(key);
        // SAFETY: helper call without preconditions.
        let ns = unsafe { bpf_ktime_get_ns() }.saturating_sub(start);
        if let Some(s) = REQUESTS.get_ptr_mut(slot) {
            // SAFETY: per-CPU slot.
            unsafe { (*s).record_ns(ns) };
        }
        0
    }

    // TLS handshakes (nginx's `ngx_ssl_ocsp_validate`, libssl's `SSL_do_handshake` and
    // `SSL_free`): see tls.rs.
    include!("tls.rs");

    // Accepts counted in nginx (the `ngx_get_connection` uprobe): see accept.rs.
    include!("accept.rs");

    // Upstream connections and exit-only fd-creating syscalls: see upstream.rs.
    include!("upstream.rs");

    // Worker exits and their status (sched_process_exit): see exits.rs.
    include!("exits.rs");
    // Client connection lifecycle (state changes, resets): see lifecycle.rs.
    include!("lifecycle.rs");

    /// `close(fd)` by a worker's main thread: if `fd` is the connection it just accepted,
    /// with no traced syscall in between, nginx had no free connection for it. Also
    /// closes the books on upstream fds.
    #[tracepoint]
    pub fn close_after_accept(ctx: TracePointContext) -> u32 {
        let pid_tgid = bpf_get_current_pid_tgid();
        let tgid = (pid_tgid >> 32) as u32;
        if pid_tgid as u32 != tgid {
            return 0;
        }
        let Some(slot) = worker_slot() else { return 0 };
        if detail_closed() {
            return 0;
        }
        upstream_close(tgid, slot, record_word(&ctx));
        let Some(last) = LAST_ACCEPT.get_ptr_mut(slot) else {
            return 0;
        };
        // SAFETY: only this worker's main thread reads and writes it.
        let pending = unsafe { *last };
        if pending == 0 {
            return 0;
        }
        // SAFETY: as above.
        unsafe { *last = 0 };
        let fd = record_word(&ctx);
        if (fd & 0xffff_ffff) + 1 == pending {
            if let Some(n) = ACCEPT_CLOSE.get_ptr_mut(slot) {
                // SAFETY: only this worker's main thread writes this element.
                unsafe { *n += 1 };
            }
        }
        0
    }

    macro_rules! syscall_pair {
        ($enter:ident, $exit:ident, $sys:expr) => {
            #[tracepoint]
            pub fn $enter(ctx: TracePointContext) -> u32 {
                on_enter(&ctx, $sys);
                0
            }

            #[tracepoint]
            pub fn $exit(ctx: TracePointContext) -> u32 {
                on_exit(&ctx, $sys);
                0
            }
        };
    }

    syscall_pair!(sys_enter_accept4, sys_exit_accept4, sys::ACCEPT4);
    syscall_pair!(sys_enter_accept, sys_exit_accept, sys::ACCEPT);
    syscall_pair!(sys_enter_epoll_wait, sys_exit_epoll_wait, sys::EPOLL_WAIT);
    syscall_pair!(
        sys_enter_epoll_pwait,
        sys_exit_epoll_pwait,
        sys::EPOLL_PWAIT
    );
    syscall_pair!(
        sys_enter_epoll_pwait2,
        sys_exit_epoll_pwait2,
        sys::EPOLL_PWAIT2
    );
    syscall_pair!(sys_enter_sendfile64, sys_exit_sendfile64, sys::SENDFILE);
    syscall_pair!(sys_enter_write, sys_exit_write, sys::WRITE);
    syscall_pair!(sys_enter_writev, sys_exit_writev, sys::WRITEV);
    syscall_pair!(sys_enter_pwrite64, sys_exit_pwrite64, sys::PWRITE64);
    syscall_pair!(sys_enter_openat, sys_exit_openat, sys::OPENAT);
    syscall_pair!(sys_enter_close, sys_exit_close, sys::CLOSE);
    syscall_pair!(sys_enter_recvfrom, sys_exit_recvfrom, sys::RECVFROM);
    syscall_pair!(sys_enter_read, sys_exit_read, sys::READ);
    syscall_pair!(sys_enter_newfstatat, sys_exit_newfstatat, sys::NEWFSTATAT);
    syscall_pair!(sys_enter_pwritev, sys_exit_pwritev, sys::PWRITEV);

    macro_rules! count_exits {
        ($($prog:ident => $sys:expr),* $(,)?) => {
            $(
                #[tracepoint]
                pub fn $prog(ctx: TracePointContext) -> u32 {
                    count_exit(&ctx, $sys);
                    0
                }
            )*
        };
    }

    // Exit-only programs of the fd-creating syscalls (`nginx_probe_common::FD_CREATING`),
    // named `count_exit_<tracepoint>`.
    count_exits!(
        count_exit_accept4 => sys::ACCEPT4,
        count_exit_accept => sys::ACCEPT,
        count_exit_openat => sys::OPENAT,
        count_exit_socket => sys::SOCKET,
        count_exit_socketpair => sys::SOCKETPAIR,
        count_exit_pipe2 => sys::PIPE2,
        count_exit_eventfd2 => sys::EVENTFD2,
        count_exit_epoll_create1 => sys::EPOLL_CREATE1,
        count_exit_dup => sys::DUP,
        count_exit_dup2 => sys::DUP2,
        count_exit_dup3 => sys::DUP3,
    );

    #[panic_handler]
    fn panic(_info: &core::panic::PanicInfo) -> ! {
        // SAFETY: the verifier rejects any program whose panic path is reachable.
        unsafe { core::hint::unreachable_unchecked() }
    }
}

#[cfg(not(target_arch = "bpf"))]
fn main() {}
