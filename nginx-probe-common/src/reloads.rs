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
}

#[cfg(feature = "user")]
// SAFETY: #[repr(C)], two u32 then two u64: no padding.
unsafe impl aya::Pod for ConfigLoads {}
