//! Worker exits, with their status from the kernel (`sched:sched_process_exit`).
//! Names in `nginx_probe_common::exits`.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_get_current_task, bpf_probe_read_kernel},
    macros::tracepoint,
    programs::TracePointContext,
};

use crate::{
    helpers::global,
    maps::{EXITS, EXIT_CODE_OFF},
    workers::slot_of,
};

/// `sched:sched_process_exit`: when a tracked worker's main thread (pid == tgid)
/// exits, stores its exit code. do_exit sets `exit_code` before this tracepoint; a
/// fatal signal or `exit_group` gives every thread the same code.
#[tracepoint]
pub fn sched_process_exit(_ctx: TracePointContext) -> u32 {
    let id = bpf_get_current_pid_tgid();
    let tgid = (id >> 32) as u32;
    if id as u32 != tgid || slot_of(tgid).is_none() {
        return 0;
    }
    let off = global(&EXIT_CODE_OFF);
    if off == u64::MAX {
        return 0;
    }
    // SAFETY: helper call without preconditions.
    let task = unsafe { bpf_get_current_task() };
    // SAFETY: bpf_probe_read_kernel copes with any address (faults return Err).
    let code = match unsafe { bpf_probe_read_kernel((task.wrapping_add(off)) as *const i32) } {
        Ok(c) => c as u32,
        Err(_) => return 0,
    };
    let _ = EXITS.insert(tgid, code, 0);
    0
}
