//! Everything the programs share with user space: every map (by family) and every
//! global the loader patches before loading. Names are those of
//! `nginx_probe_common::names` (and of its `exits` and `lifecycle` modules); the object
//! contract test in nginx-probe checks that the object has exactly these.

use aya_ebpf::{
    macros::map,
    maps::{Array, HashMap, LruHashMap, PerCpuArray, Stack},
};
use nginx_probe_common::{
    exits::MAX_EXITS, lifecycle as lc, InFlight, SyscallStats, UpstreamCall, DEFAULT_WORKER_SLOTS,
    DROP_COUNTERS, FD_KIND_COUNT, FILTER_SIZE, MAX_CLASSIFIED_FDS, MAX_ERROR_LOGS, MAX_IN_FLIGHT,
    MAX_LISTEN_PORTS, MAX_OPEN_HANDSHAKES, MAX_OPEN_REQUESTS, MAX_TRACKED_TGIDS, MAX_UPSTREAM_FDS,
    OFF_COUNT, SYSCALL_COUNT, TLS_STATS, UPSTREAM_STATS,
};

// ---- Patched globals (read with `helpers::global`) ----

/// Host tgid of the nginx master; its forks become tracked workers in the kernel, so
/// a worker started by a reload or respawn is counted from its first syscall.
#[no_mangle]
pub(crate) static MASTER_TGID: u32 = 0;

/// Offset of `parent_pid` in `sched:sched_process_fork` records (read by user space
/// from the tracepoint's `format` file).
#[no_mangle]
pub(crate) static FORK_PARENT_OFF: u64 = 12;

/// Offset of `child_pid` in `sched:sched_process_fork` records (as above).
#[no_mangle]
pub(crate) static FORK_CHILD_OFF: u64 = 20;

/// 1 when user space found every offset of `KOFF` in the kernel's BTF: writes are
/// classified by walking the worker's fd table at the write. 0: from `FD_KINDS`.
#[no_mangle]
pub(crate) static FD_WALK: u32 = 0;

/// Kernel struct member offsets (bytes), indexed by `nginx_probe_common::off`, read
/// by user space from `/sys/kernel/btf/vmlinux`. `u64::MAX` = absent.
#[no_mangle]
pub(crate) static KOFF: [u64; OFF_COUNT] = [u64::MAX; OFF_COUNT];

/// Byte offset of `task_struct.exit_code`, from the kernel's BTF; `u64::MAX`: unknown,
/// no exit is recorded.
#[no_mangle]
pub(crate) static EXIT_CODE_OFF: u64 = u64::MAX;

/// Offset of `tcp_sock.lsndtime` (u32 jiffies of the last data sent), bytes; from BTF.
#[no_mangle]
pub(crate) static LC_LSNDTIME_OFF: u64 = u64::MAX;

/// Offset of `inet_connection_sock.icsk_ack.lrcvtime` (u32 jiffies of the last data
/// received), bytes; from BTF.
#[no_mangle]
pub(crate) static LC_LRCVTIME_OFF: u64 = u64::MAX;

/// Offset of `tcp_sock.bytes_received` (u64), bytes; from BTF. `u64::MAX`: unknown.
#[no_mangle]
pub(crate) static LC_BYTES_RECEIVED_OFF: u64 = u64::MAX;

/// Offset of `task_struct.flags` (u32), bytes; from BTF. `u64::MAX`: unknown, closes
/// by exiting workers are not told apart.
#[no_mangle]
pub(crate) static LC_TASK_FLAGS_OFF: u64 = u64::MAX;

/// The kernel's HZ (jiffies per second), 0 = unknown: no idle time.
#[no_mangle]
pub(crate) static LC_HZ: u64 = 0;

/// Struct offsets the lifecycle's raw-tracepoint programs read (`struct sock`,
/// `struct sk_buff`), indexed by `nginx_probe_common::lifecycle::raw_off`; from BTF.
/// `u64::MAX` = absent (the perf-event tracepoint programs are attached instead).
#[no_mangle]
pub(crate) static LC_RAW_OFF: [u64; lc::RAW_OFF_COUNT] = [u64::MAX; lc::RAW_OFF_COUNT];

// ---- The worker filter (workers.rs) ----

/// Free worker slots, a stack: the slot freed last is given first, so through
/// reloads workers take turns on few slots (bounded metrics labels). User space
/// fills it with every slot at start (slot 0 on top), pops slots for the workers it
/// finds in /proc, and pushes back the slot of an exited worker once it has read and
/// zeroed it; the fork program pops one per child of the master.
#[map]
pub(crate) static FREE_SLOTS: Stack<u32> = Stack::with_max_entries(DEFAULT_WORKER_SLOTS, 0);

/// tgid of a worker -> its slot. User space fills it at start and removes exited
/// workers; `sched_process_fork` adds the master's new children.
#[map]
pub(crate) static WORKERS: HashMap<u32, u32> = HashMap::with_max_entries(MAX_TRACKED_TGIDS, 0);

/// Direct-mapped copy of `WORKERS`: index `tgid & (FILTER_SIZE - 1)` holds
/// `filter_entry(tgid, slot)` or 0. An array load is inlined by the verifier, where a
/// hash lookup is a helper call: this is the first check of every syscall of every
/// process. A tracked tgid whose index is taken lives only in `WORKERS`, and
/// `COLLIDED` says so.
#[map]
pub(crate) static FILTER: Array<u64> = Array::with_max_entries(FILTER_SIZE, 0);

/// Element 0 is 1 once any tracked tgid could not enter `FILTER` (its index was
/// taken): from then on, misses in `FILTER` also look in `WORKERS`. Only ever set to
/// 1 (by user space or the fork program), never cleared, so no update is lost.
#[map]
pub(crate) static COLLIDED: Array<u32> = Array::with_max_entries(1, 0);

/// Element 0 = 1 outside a `--detail sampled` window (user space sets it around each
/// window); 0 (the default, and always with `--detail full`): detail programs count.
/// Element 1 = 1 when libssl's programs belong to the detail layer (tls.rs).
#[map]
pub(crate) static DETAIL_GATE: Array<u32> = Array::with_max_entries(2, 0);

/// Counters of events that could not be fully accounted, see `nginx_probe_common::drop`.
#[map]
pub(crate) static DROPS: PerCpuArray<u64> = PerCpuArray::with_max_entries(DROP_COUNTERS as u32, 0);

// ---- Syscalls (syscalls.rs) ----

/// pid_tgid of a worker thread inside a traced syscall -> entry timestamp. LRU so a
/// thread that dies mid-syscall is evicted rather than leaking an entry.
#[map]
pub(crate) static IN_FLIGHT: LruHashMap<u64, InFlight> =
    LruHashMap::with_max_entries(MAX_IN_FLIGHT, 0);

/// Entry timestamp of each worker's main thread, indexed by slot (`start_ns == 0`:
/// none). User space sizes it to the slot count and zeroes an element on recycling.
#[map]
pub(crate) static MAIN_ENTRY: Array<InFlight> = Array::with_max_entries(DEFAULT_WORKER_SLOTS, 0);

/// Aggregates indexed by `slot * SYSCALL_COUNT + syscall`; user space sets
/// `max_entries` to `slots * SYSCALL_COUNT` at load time.
#[map]
pub(crate) static STATS: PerCpuArray<SyscallStats> =
    PerCpuArray::with_max_entries(DEFAULT_WORKER_SLOTS * SYSCALL_COUNT as u32, 0);

/// Per slot: the worker's event-loop iterations, from an epoll wait's return to the
/// next epoll wait call (`count`, `total_ns` = busy time, `max_ns`, `hist`). Main
/// thread only, so a plain array.
#[map]
pub(crate) static LOOP: Array<SyscallStats> = Array::with_max_entries(DEFAULT_WORKER_SLOTS, 0);

/// Per slot: when the worker's main thread last returned from an epoll wait, ns.
#[map]
pub(crate) static LAST_WAKE: Array<u64> = Array::with_max_entries(DEFAULT_WORKER_SLOTS, 0);

/// (tgid << 32 | fd) -> `fd_kind` of a worker's non-socket fds; user space keeps it
/// current from /proc.
#[map]
pub(crate) static FD_KINDS: HashMap<u64, u32> = HashMap::with_max_entries(MAX_CLASSIFIED_FDS, 0);

/// write/writev/pwrite64 by destination: index `slot * FD_KIND_COUNT + kind`.
#[map]
pub(crate) static WRITES: PerCpuArray<SyscallStats> =
    PerCpuArray::with_max_entries(DEFAULT_WORKER_SLOTS * FD_KIND_COUNT as u32, 0);

/// nginx's listening TCP ports (local port, host order) -> 1, from sock_diag.
#[map]
pub(crate) static LISTEN_PORTS: HashMap<u16, u8> = HashMap::with_max_entries(MAX_LISTEN_PORTS, 0);

/// Inode numbers of the error logs (the workers' fd 2) -> 1.
#[map]
pub(crate) static ERROR_LOGS: HashMap<u64, u8> = HashMap::with_max_entries(MAX_ERROR_LOGS, 0);

/// Per slot: successful openat calls (main thread or not) whose new fd is an
/// access log (classified like a write's fd): an access log reopened per request
/// when its path has variables and no `open_log_file_cache`.
#[map]
pub(crate) static LOG_OPENS: PerCpuArray<u64> =
    PerCpuArray::with_max_entries(DEFAULT_WORKER_SLOTS, 0);

// ---- Accepts (accept.rs) ----

/// Per slot: 1 + the fd the worker's main thread accepted last, until its next traced
/// syscall (0 = none pending).
#[map]
pub(crate) static LAST_ACCEPT: Array<u64> = Array::with_max_entries(DEFAULT_WORKER_SLOTS, 0);

/// Per slot: connections the worker closed right after accepting them, before any
/// other traced syscall: nginx's "worker_connections are not enough" path.
#[map]
pub(crate) static ACCEPT_CLOSE: Array<u64> = Array::with_max_entries(DEFAULT_WORKER_SLOTS, 0);

/// Per slot: the worker's last call of `ngx_get_connection`, `[sp, ret]`: the user
/// stack address of its return address at entry and that address. While the call runs
/// the slot holds it; once it returns, the caller's next call overwrites it (nginx's
/// callers all call on at once: `ngx_create_pool`, `close`, `setsockopt`), so a
/// close made while `*sp == ret` is made inside it (`lifecycle::in_get_connection`).
#[map]
pub(crate) static GET_CONN_FRAME: Array<[u64; 2]> =
    Array::with_max_entries(DEFAULT_WORKER_SLOTS, 0);

/// Per worker slot: connections accepted, counted by the `ngx_get_connection` uprobe.
#[map]
pub(crate) static ACCEPTED: PerCpuArray<u64> =
    PerCpuArray::with_max_entries(DEFAULT_WORKER_SLOTS, 0);

/// Element 0: `[lo, hi)`, the bytes of `ngx_event_accept` relative to the start of
/// `ngx_get_connection` in the same binary (wrapping u64s, from its symbol table, set by
/// user space before the uprobe is attached); `lo == hi` (as loaded): unknown, the fd
/// table is walked instead.
#[map]
pub(crate) static ACCEPT_CALLER: Array<[u64; 2]> = Array::with_max_entries(1, 0);

// ---- HTTP requests (requests.rs) ----

/// Per worker slot: HTTP requests started (`count`, uprobe on `ngx_http_create_request`)
/// and their durations until `ngx_http_free_request` (`timed`, `hist`, ns). Only with
/// `--uprobes`.
#[map]
pub(crate) static REQUESTS: PerCpuArray<SyscallStats> =
    PerCpuArray::with_max_entries(DEFAULT_WORKER_SLOTS, 0);

/// Connection pointer (`ngx_connection_t *`) -> start of its current request, ns.
/// Keyed by [worker tgid, connection]: workers forked from one master hold their
/// connection arrays at the same addresses.
#[map]
pub(crate) static REQ_START: LruHashMap<[u64; 2], u64> =
    LruHashMap::with_max_entries(MAX_OPEN_REQUESTS, 0);

// ---- Upstream connections (upstream.rs) ----

/// Upstream connections per slot: `UPSTREAM_STATS` elements at
/// `slot * UPSTREAM_STATS` (connect outcomes and latency, upstream fds); see
/// `nginx_probe_common::UPSTREAM_STATS`. Written by the main thread only.
#[map]
pub(crate) static UPSTREAM: Array<SyscallStats> =
    Array::with_max_entries(DEFAULT_WORKER_SLOTS * UPSTREAM_STATS, 0);

/// (tgid << 32 | fd) -> `connect()` entry ns while the result of a non-blocking
/// connect is not known yet, 0 once it is: the worker's upstream fds, until closed.
#[map]
pub(crate) static UPSTREAM_FD: HashMap<u64, u64> = HashMap::with_max_entries(MAX_UPSTREAM_FDS, 0);

/// Per slot: the connect or getsockopt(SO_ERROR) the main thread is in.
#[map]
pub(crate) static UP_CALL: Array<UpstreamCall> = Array::with_max_entries(DEFAULT_WORKER_SLOTS, 0);

// ---- TLS handshakes (tls.rs) ----

/// Per worker slot: TLS handshakes completed on nginx's client connections, counted by
/// the `ngx_ssl_ocsp_validate` uprobe.
#[map]
pub(crate) static TLS_DONE: PerCpuArray<u64> =
    PerCpuArray::with_max_entries(DEFAULT_WORKER_SLOTS, 0);

/// [worker tgid, `SSL*`] of the TLS connections a worker opened to its upstreams
/// (`SSL_set_connect_state`), which libssl's programs leave out: the report is about
/// nginx's client connections. Forgotten at `SSL_free`.
#[map]
pub(crate) static TLS_CLIENT: LruHashMap<[u64; 2], u8> =
    LruHashMap::with_max_entries(MAX_OPEN_HANDSHAKES, 0);

/// Per worker slot, `TLS_STATS` entries (`slot * TLS_STATS + i`): 0 = handshakes
/// (`count` started: first `SSL_do_handshake` on an `SSL*`; `timed`/`hist`/
/// `total_ns` completed ones, wall time from that first call to the return of 1;
/// `errors` abandoned: `SSL_free` before completion), 1 = `SSL_do_handshake` calls
/// (`count`, time inside each call in `hist`/`total_ns`: the handshake's CPU work,
/// nginx's sockets being non-blocking).
#[map]
pub(crate) static TLS: PerCpuArray<SyscallStats> =
    PerCpuArray::with_max_entries(DEFAULT_WORKER_SLOTS * TLS_STATS, 0);

/// [worker tgid, `SSL*`] -> first `SSL_do_handshake` call on it, ns. The tgid is in
/// the key because workers forked from one master allocate their `SSL` objects at
/// the same addresses.
#[map]
pub(crate) static HS_START: LruHashMap<[u64; 2], u64> =
    LruHashMap::with_max_entries(MAX_OPEN_HANDSHAKES, 0);

/// pid_tgid of a worker thread inside `SSL_do_handshake` -> [`SSL*`, entry ns]
/// (the argument is gone from the registers at the return).
#[map]
pub(crate) static HS_CALL: LruHashMap<u64, [u64; 2]> =
    LruHashMap::with_max_entries(MAX_IN_FLIGHT, 0);

// ---- Worker exits (exits.rs) ----

/// Worker tgid -> its main thread's `task_struct.exit_code` when it exited (the wait
/// status word: `code << 8`, or the signal number `| 0x80` with a core dump). User
/// space removes an entry once read; LRU, so unread ones never block new exits.
#[map]
pub(crate) static EXITS: LruHashMap<u32, u32> = LruHashMap::with_max_entries(MAX_EXITS, 0);

/// Tgid of a process running nginx's binary -> its configuration loads since attach
/// (`reloads`: the uretprobe on `ngx_init_cycle`). LRU: the oldest `nginx -t` runs go
/// first.
#[map]
pub(crate) static CONFIG_LOADS: LruHashMap<u32, nginx_probe_common::reloads::ConfigLoads> =
    LruHashMap::with_max_entries(nginx_probe_common::reloads::MAX_PROCESSES, 0);

// ---- Client connection lifecycle (lifecycle.rs) ----

/// Local port (host order, the index) -> 1 + its port index (1..=`LC_MAX_PORTS`) when
/// it is one of nginx's listening ports, 0 otherwise. An array, not a hash: every TCP
/// state change of every socket on the host looks here first, and a direct index is
/// the cheapest way to let the others go.
#[map]
pub(crate) static LC_PORTS: Array<u32> = Array::with_max_entries(lc::LC_PORT_SPACE, 0);

/// Counters: `port_index * LC_PER_PORT + counter`.
#[map]
pub(crate) static LC_STATS: PerCpuArray<u64> =
    PerCpuArray::with_max_entries(lc::LC_MAX_PORTS * lc::LC_PER_PORT as u32, 0);

/// pid_tgid of a task between a listener's `LISTEN -> CLOSE` and its destruction ->
/// that listener (`struct sock *`): resets it sends meanwhile are for the listener's
/// queued connections. LRU so an entry whose end was missed cannot stay forever.
#[map]
pub(crate) static LC_CLOSING: LruHashMap<u64, u64> =
    LruHashMap::with_max_entries(lc::LC_MAX_CLOSING, 0);

/// `struct sock *` of one of nginx's client connections -> `bpf_ktime_get_ns()` at its
/// `SYN_RECV -> ESTABLISHED`, taken at its first close (its lifetime). LRU: beyond
/// `LC_MAX_BORN` connections open at once, the longest-noted are let go.
#[map]
pub(crate) static LC_BORN: LruHashMap<u64, u64> = LruHashMap::with_max_entries(lc::LC_MAX_BORN, 0);

/// `struct sock *` of one of nginx's client connections whose client's FIN came first
/// -> 1 + its idle time then (ms), from `ESTABLISHED -> CLOSE_WAIT` until it leaves
/// `CLOSE_WAIT`, where it is counted unless the close was nginx's after all. LRU:
/// beyond `LC_MAX_CLIENT_FIN` sockets in `CLOSE_WAIT` at once, the oldest are let go.
#[map]
pub(crate) static LC_CLIENT_FIN: LruHashMap<u64, u64> =
    LruHashMap::with_max_entries(lc::LC_MAX_CLIENT_FIN, 0);

/// `struct sock *` of a TCP connection a tracked worker opened -> its peer, from the
/// `connect()` (`CLOSE -> SYN_SENT`) to its `CLOSE`. LRU: an entry whose close was
/// missed is let go.
#[map]
pub(crate) static LC_UP_SOCKS: LruHashMap<u64, lc::up::PeerKey> =
    LruHashMap::with_max_entries(lc::up::UP_MAX_SOCKS, 0);

/// Upstream peer -> its counters (see `nginx_probe_common::lifecycle::up`); at most
/// `UP_MAX_PEERS` peers, the last entry being the other peers (family 0).
#[map]
pub(crate) static LC_UP_PEERS: HashMap<lc::up::PeerKey, lc::up::UpPeerStats> =
    HashMap::with_max_entries(lc::up::UP_MAX_PEERS, 0);

/// One zeroed `UpPeerStats`, the value a new peer's entry is inserted with.
#[map]
pub(crate) static LC_UP_ZERO: PerCpuArray<lc::up::UpPeerStats> =
    PerCpuArray::with_max_entries(1, 0);

/// Client connection closes per worker slot: `slot * LC_PER_WORKER + counter` (see
/// `nginx_probe_common::lifecycle::worker`). Resized to the slots at load.
#[map]
pub(crate) static LC_WORKER: PerCpuArray<u64> =
    PerCpuArray::with_max_entries(DEFAULT_WORKER_SLOTS * lc::worker::LC_PER_WORKER as u32, 0);

/// Worker slot -> ns (`bpf_ktime_get_ns`) when the worker began draining (entered
/// `ngx_close_idle_connections`); 0 while it serves. Resized to the slots at load;
/// user space zeroes it with the slot.
#[map]
pub(crate) static LC_DRAINING: Array<u64> = Array::with_max_entries(DEFAULT_WORKER_SLOTS, 0);

/// The socket whose received reset this CPU is processing (`tcp_receive_reset` fires in
/// `tcp_reset()` before its `tcp_done()` sets the state to CLOSE): that state change is
/// the reset's, not a worker's `close()`.
#[map]
pub(crate) static LC_RESET_SK: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// `struct sock *` of a TLS client connection whose close nginx began -> the facts
/// its close is counted with (`lifecycle_tls`). LRU: an entry whose end was missed is
/// let go.
#[map]
pub(crate) static LC_TLS_CLOSING: LruHashMap<u64, crate::lifecycle_tls::TlsClose> =
    LruHashMap::with_max_entries(lc::LC_MAX_TLS_CLOSING, 0);

/// Element 0 is 1 once the `ngx_ssl_shutdown` uprobe marked a socket: until then (an
/// nginx serving no TLS) `LC_TLS_CLOSING` is never looked up.
#[map]
pub(crate) static LC_TLS_ON: Array<u32> = Array::with_max_entries(1, 0);

/// Element 0 is 1 when closes with the client's FIN unread count as nginx's (see
/// `nginx_probe_common::lifecycle::CLOSED_BY_NGINX_CLIENT_FIN_UNREAD`); set by user
/// space.
#[map]
pub(crate) static LC_FIN_RULE: Array<u32> = Array::with_max_entries(1, 0);

// ---- QUIC connections nginx ends (quic.rs) ----

/// (call, error code, reason address) -> calls since attach, of the traced master's
/// workers (see `nginx_probe_common::quic`); the last entry is `OVERFLOW_KEY`'s,
/// inserted by user space at load.
#[map]
pub(crate) static QUIC_ENDS: HashMap<nginx_probe_common::quic::QuicEndKey, u64> =
    HashMap::with_max_entries(nginx_probe_common::quic::MAX_ENDS, 0);
