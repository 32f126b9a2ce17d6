// Included in `programs` (main.rs): worker exits, with their status from the kernel.
// Names in `nginx_probe_common::exits`.

/// Byte offset of `task_struct.exit_code`, from the kernel's BTF (patched by the
/// loader); `u64::MAX`: unknown, nothing is recorded.
#[no_mangle]
static EXIT_CODE_OFF: u64 = u64::MAX;

/// Worker tgid -> its main thread's `task_struct.exit_code` when it exited (the wait
/// status word: `code << 8`, or the signal number `| 0x80` with a core dump). User
/// space removes an entry once read; LRU, so unread ones never block new exits.
#[map]
static EXITS: LruHashMap<u32, u32> =
    LruHashMap::with_max_entries(nginx_probe_common::exits::MAX_EXITS, 0);

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
    // SAFETY: read-only global patched by the loader.
    let off = unsafe { core::ptr::read_volatile(&EXIT_CODE_OFF) };
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
