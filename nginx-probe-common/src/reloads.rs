//! Configuration loads as nginx's own code reports them: nginx reads its configuration
//! in `ngx_cycle_t *ngx_init_cycle(ngx_cycle_t *old_cycle)`, which returns NULL when
//! it could not load it (a syntax error, a file it could not open, a port it could not
//! bind: the `[emerg]` line it writes names which). The master calls it on every reload
//! (SIGHUP) and keeps serving with the old configuration when it fails; `nginx -t` and
//! `nginx -s <signal>` call it too, in processes of their own, before anything else. A
//! uretprobe on it in nginx's binary stores, per process (tgid), how many loads
//! succeeded and failed and when the last one failed. User space tells the master's
//! from the others' by pid. The names here are checked by the object contract test
//! beside [`crate::names`].

/// The function nginx loads its configuration with (exported by nginx's binary, which
/// is linked with `-rdynamic` for dynamic modules).
pub const SYMBOL: &str = "ngx_init_cycle";

/// The uretprobe on [`SYMBOL`].
pub const PROGRAM: &str = "init_cycle_ret";

/// LRU hash map, tgid -> [`ConfigLoads`] of the processes running nginx's binary that
/// returned from [`SYMBOL`].
pub const MAP: &str = "CONFIG_LOADS";

/// Entries of [`MAP`]: the master, and the `nginx -t` / `nginx -s` runs since attach
/// (LRU: the oldest of those are let go first; the master loads at every reload, so it
/// is never the oldest for long).
pub const MAX_PROCESSES: u32 = 256;

/// The configuration loads of one process since attach.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConfigLoads {
    /// Returns of [`SYMBOL`] with a cycle: the configuration loaded.
    pub loaded: u32,
    /// Returns of [`SYMBOL`] with NULL: the configuration did not load.
    pub failed: u32,
    /// `bpf_ktime_get_ns()` (CLOCK_MONOTONIC) at the last failed return; 0: none.
    pub last_failed_ns: u64,
    /// `bpf_ktime_get_ns()` at the last return with a cycle; 0: none.
    pub last_loaded_ns: u64,
    /// The tgid of the process's parent (`task_struct.real_parent->tgid`) at its last
    /// return; [`PARENT_UNKNOWN`] when the offsets are not known. A child of the
    /// master that loads a configuration is a binary upgrade's new master (USR2:
    /// nginx forks and execs its binary; workers never load one).
    pub parent_tgid: u32,
    /// Padding, 0.
    pub _pad: u32,
}

/// [`ConfigLoads::parent_tgid`] when the parent could not be read.
pub const PARENT_UNKNOWN: u32 = u32::MAX;

/// Global `[u64; 2]`: the byte offsets of [`PARENT_PATHS`], from the kernel's BTF
/// (`u64::MAX`: unknown, the parent is [`PARENT_UNKNOWN`]).
pub const GLOBAL_PARENT_OFF: &str = "CONFIG_PARENT_OFF";

/// (struct, member) of the offsets in [`GLOBAL_PARENT_OFF`]: the parent task pointer,
/// then a task's tgid.
pub const PARENT_PATHS: [(&str, &str); 2] =
    [("task_struct", "real_parent"), ("task_struct", "tgid")];

#[cfg(feature = "user")]
// SAFETY: #[repr(C)], two u32, two u64, two u32: no padding.
unsafe impl aya::Pod for ConfigLoads {}
