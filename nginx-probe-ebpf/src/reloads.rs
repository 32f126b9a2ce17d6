//! Configuration loads: the uretprobe on `ngx_init_cycle` in nginx's binary counts, per
//! process, the loads that returned a cycle and those that returned NULL. Names in
//! `nginx_probe_common::reloads`.

use crate::{helpers::global, maps::CONFIG_LOADS};
use aya_ebpf::{
    helpers::{
        bpf_get_current_pid_tgid, bpf_get_current_task, bpf_ktime_get_ns, bpf_probe_read_kernel,
    },
    macros::uretprobe,
    programs::RetProbeContext,
};
use nginx_probe_common::reloads::PARENT_UNKNOWN;

/// Byte offsets of `task_struct.real_parent` and `task_struct.tgid`, from the
/// kernel's BTF (`nginx_probe_common::reloads::GLOBAL_PARENT_OFF`); `u64::MAX`: unknown.
#[no_mangle]
static CONFIG_PARENT_OFF: [u64; 2] = [u64::MAX; 2];

/// The current process's parent's tgid (`current->real_parent->tgid`), or
/// [`PARENT_UNKNOWN`] when the offsets are unknown or a read faults.
#[inline(always)]
fn parent_tgid() -> u32 {
    let [parent_off, tgid_off] = global(&CONFIG_PARENT_OFF);
    if parent_off == u64::MAX || tgid_off == u64::MAX {
        return PARENT_UNKNOWN;
    }
    // SAFETY: helper call without preconditions.
    let task = unsafe { bpf_get_current_task() };
    // SAFETY: bpf_probe_read_kernel copes with any address (faults return Err).
    let Ok(parent) =
        (unsafe { bpf_probe_read_kernel(task.wrapping_add(parent_off) as *const u64) })
    else {
        return PARENT_UNKNOWN;
    };
    // SAFETY: as above.
    match unsafe { bpf_probe_read_kernel(parent.wrapping_add(tgid_off) as *const i32) } {
        Ok(t) => t as u32,
        Err(_) => PARENT_UNKNOWN,
    }
}

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
    c.parent_tgid = parent_tgid();
    let _ = CONFIG_LOADS.insert(tgid, c, 0);
    0
}
