//! Configuration loads: the uretprobe on `ngx_init_cycle` in nginx's binary counts, per
//! process, the loads that returned a cycle and those that returned NULL. Names in
//! `nginx_probe_common::reloads`.

use crate::maps::CONFIG_LOADS;
use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::uretprobe,
    programs::RetProbeContext,
};

/// The return of `ngx_init_cycle(old_cycle)` in any process running nginx's binary
/// (the master at a reload, `nginx -t`, `nginx -s`): NULL is a configuration that did
/// not load. One thread per process loads, so the entry is not raced.
#[uretprobe]
pub fn init_cycle_ret(ctx: RetProbeContext) -> u32 {
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    let cycle: u64 = ctx.ret();
    // SAFETY: the value is copied out at once.
    let mut c = unsafe { CONFIG_LOADS.get(tgid) }
        .copied()
        .unwrap_or_default();
    // SAFETY: helper call without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    if cycle == 0 {
        c.failed = c.failed.wrapping_add(1);
        c.last_failed_ns = now;
    } else {
        c.loaded = c.loaded.wrapping_add(1);
        c.last_loaded_ns = now;
    }
    let _ = CONFIG_LOADS.insert(tgid, c, 0);
    0
}
