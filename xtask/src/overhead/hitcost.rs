//! The cost of one probe hit, measured in isolation: below this machine's noise
//! (about +-10% between rounds) a whole-workload ratio cannot tell a 1% cost, but hits
//! per connection (counted by the kernel) times the cost of one hit can.
//!
//! A hit's cost is its dispatch (the uprobe trap, the tracepoint's perf-event path)
//! plus the program's own time (kernel `run_time_ns`, in the hits table). The dispatch
//! is measured here with empty bpftrace programs on loops in this process: an uprobe on
//! [`nginx_probe_hit_target`], whose first instruction is `push %r15` like
//! `ngx_get_connection`'s in Debian's nginx (the kernel emulates a push, no
//! single-step), and `task:task_rename` fired by `prctl(PR_SET_NAME)`, a tracepoint
//! reached through the same perf-event path as the lifecycle's fallback programs; and
//! the same tracepoint as a raw tracepoint (an empty program loaded and attached with
//! bpf(2): `BPF_PROG_TYPE_RAW_TRACEPOINT`, `BPF_RAW_TRACEPOINT_OPEN`; bpftrace here
//! attaches no raw tracepoint), the dispatch of nginx-probe's lifecycle programs. Each
//! repeat times the loop without and with the program (thread CPU time); the figure is
//! the median difference.

use std::{
    os::fd::{FromRawFd, OwnedFd},
    process::Child,
    time::Duration,
};

use anyhow::{Context, Result};

use super::{
    stats::median_or_nan,
    tracers::{spawn_bpftrace, stop},
};

#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    ".globl nginx_probe_hit_target",
    ".type nginx_probe_hit_target,@function",
    "nginx_probe_hit_target:",
    "push r15",
    "pop r15",
    "ret",
    ".size nginx_probe_hit_target, .-nginx_probe_hit_target",
);

#[cfg(target_arch = "x86_64")]
extern "C" {
    /// Does nothing; the uprobe's target.
    fn nginx_probe_hit_target();
}

/// Dispatch cost of one hit, ns (median over repeats).
#[derive(Clone, Copy, Debug)]
pub struct HitCost {
    /// An entry uprobe with an empty program, on a `push` first instruction.
    pub uprobe_ns: f64,
    /// A perf-event tracepoint with an empty program.
    pub tracepoint_ns: f64,
    /// The same tracepoint as a raw tracepoint, empty program.
    pub raw_tracepoint_ns: f64,
    /// What `kernel.bpf_stats_enabled` adds to one program run (the raw tracepoint's
    /// dispatch with it on, minus with it off); None when not measured.
    pub bpf_stats_ns: Option<f64>,
}

/// What keeps a probe attached while it lives: a bpftrace process, or bpf(2) fds (the
/// program and its raw-tracepoint link, closed on drop).
enum Attached {
    Bpftrace(Child),
    Fds(#[allow(dead_code)] [OwnedFd; 2]),
}

/// bpf(2) with `attr` (zero-padded `union bpf_attr`); the new fd.
fn bpf(cmd: libc::c_long, attr: &[u64; 16]) -> Result<OwnedFd> {
    // SAFETY: attr is 128 readable bytes; the kernel reads at most that many.
    let fd = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_ptr(), 128usize) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    // SAFETY: a new fd the kernel just returned, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// An empty raw-tracepoint program (`r0 = 0; exit`) attached to `tp`.
fn raw_tracepoint(tp: &std::ffi::CStr) -> Result<Attached> {
    const BPF_PROG_LOAD: libc::c_long = 5;
    const BPF_RAW_TRACEPOINT_OPEN: libc::c_long = 17;
    const BPF_PROG_TYPE_RAW_TRACEPOINT: u64 = 17;
    // mov64 r0, 0 (opcode 0xb7); exit (0x95).
    let insns: [u64; 2] = [0xb7, 0x95];
    let license = c"GPL";
    let mut load = [0u64; 16];
    load[0] = BPF_PROG_TYPE_RAW_TRACEPOINT | (insns.len() as u64) << 32;
    load[1] = insns.as_ptr() as u64;
    load[2] = license.as_ptr() as u64;
    let prog = bpf(BPF_PROG_LOAD, &load).context("load an empty raw tracepoint program")?;
    let mut open = [0u64; 16];
    open[0] = tp.as_ptr() as u64;
    open[1] = std::os::fd::AsRawFd::as_raw_fd(&prog) as u64;
    let link = bpf(BPF_RAW_TRACEPOINT_OPEN, &open).context("attach a raw tracepoint")?;
    Ok(Attached::Fds([prog, link]))
}

/// This thread's CPU time, ns.
fn thread_cpu_ns() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 * 1e9 + t.tv_nsec as f64
}

/// ns per iteration of `f` over `n` iterations, thread CPU time.
fn per_iter(n: u64, f: &dyn Fn()) -> f64 {
    let t0 = thread_cpu_ns();
    for _ in 0..n {
        f();
    }
    (thread_cpu_ns() - t0) / n as f64
}

/// Median over `repeats` of (loop with the probe `attach` makes attached) - (loop
/// without), ns.
fn dispatch(
    attach: &dyn Fn() -> Result<Attached>,
    repeats: usize,
    n: u64,
    f: &dyn Fn(),
) -> Result<f64> {
    let mut d = Vec::new();
    for _ in 0..repeats {
        let plain = per_iter(n, f);
        let probe = attach()?;
        std::thread::sleep(Duration::from_millis(200));
        let traced = per_iter(n, f);
        if let Attached::Bpftrace(bt) = probe {
            stop(bt);
        }
        d.push(traced - plain);
    }
    Ok(median_or_nan(&d))
}

/// [`dispatch`] of a bpftrace `script`.
fn bpftrace_dispatch(script: &str, repeats: usize, n: u64, f: &dyn Fn()) -> Result<f64> {
    let attach = || Ok(Attached::Bpftrace(spawn_bpftrace(script)?.0));
    dispatch(&attach, repeats, n, f)
}

/// Measures [`HitCost`] (about 10 s: `repeats` bpftrace starts per kind).
///
/// Errors: bpftrace missing or refusing a probe; not x86-64.
pub fn measure(repeats: usize) -> Result<HitCost> {
    #[cfg(not(target_arch = "x86_64"))]
    anyhow::bail!("the hit-cost loop is written for x86-64");
    #[cfg(target_arch = "x86_64")]
    {
        let exe = std::env::current_exe()?;
        let uprobe = format!("uprobe:{}:nginx_probe_hit_target {{ }}", exe.display());
        // SAFETY: the target touches no memory but its own stack slot.
        let call = || unsafe { nginx_probe_hit_target() };
        let uprobe_ns = bpftrace_dispatch(&uprobe, repeats, 1_000_000, &call)?;
        let tracepoint_ns =
            bpftrace_dispatch("tracepoint:task:task_rename { }", repeats, 500_000, &rename)?;
        Ok(HitCost {
            uprobe_ns,
            tracepoint_ns,
            raw_tracepoint_ns: raw_tracepoint_ns(repeats)?,
            bpf_stats_ns: None,
        })
    }
}

/// The dispatch of an empty raw tracepoint on `task_rename`, ns (median over
/// `repeats`), with `kernel.bpf_stats_enabled` as it is now.
///
/// Errors: the kernel refusing the program or the attach.
pub fn raw_tracepoint_ns(repeats: usize) -> Result<f64> {
    let raw = || raw_tracepoint(c"task_rename");
    dispatch(&raw, repeats, 500_000, &rename)
}

/// Renames this thread (`prctl(PR_SET_NAME)`): one `task:task_rename` hit.
fn rename() {
    // SAFETY: PR_SET_NAME with a NUL-terminated name; this thread only.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"xtask-hit".as_ptr(), 0, 0, 0) };
}
