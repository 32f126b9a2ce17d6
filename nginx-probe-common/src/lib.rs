//! Types and pure logic shared by nginx-probe's eBPF programs and its user space.
//!
//! Everything here is `#[repr(C)]` plain data or `const fn` arithmetic, so that the
//! same definitions are compiled for `bpfel-unknown-none` (no_std) and for the host,
//! where the pure logic gets ordinary unit tests. Each indexed table (the syscalls, the
//! fd kinds, the kernel offsets, the drop counters, the connect and error classes)
//! comes from one declaration that gives its index constants, its count and its
//! entries together (`table.rs`).
//!
//! Data flow: syscall tracepoint -> [`SyscallStats`] in a per-CPU array indexed by
//! `slot * SYSCALL_COUNT + syscall` -> user-space snapshot (summed over CPUs) ->
//! per-interval delta -> report.
//!
//! Modules by concept, their items also re-exported here: [`syscalls`] (the syscall
//! table, the error classes), [`histogram`] ([`SyscallStats`] and its log2 histogram),
//! [`fd_kinds`] (write destinations and the kernel offsets of the fd table walk),
//! [`workers`] (slots, the worker filter, the drop counters), [`upstream`],
//! [`uprobes`]; [`names`], [`exits`], [`reloads`], [`quic`] and [`lifecycle`] keep their own paths.
#![cfg_attr(target_arch = "bpf", no_std)]
#![deny(missing_docs)]

#[macro_use]
mod table;

pub mod exits;
pub mod fd_kinds;
pub mod histogram;
pub mod lifecycle;
pub mod names;
pub mod quic;
pub mod reloads;
pub mod syscalls;
pub mod uprobes;
pub mod upstream;
pub mod workers;

pub use fd_kinds::*;
pub use histogram::*;
pub use syscalls::*;
pub use uprobes::*;
pub use upstream::*;
pub use workers::*;

#[cfg(feature = "user")]
mod pod {
    // SAFETY: both are #[repr(C)] structs of integers with no padding holes that
    // could carry uninitialised bytes (u64 fields, then two u32).
    unsafe impl aya::Pod for super::SyscallStats {}
    unsafe impl aya::Pod for super::InFlight {}
    // SAFETY: three u64.
    unsafe impl aya::Pod for super::UpstreamCall {}
}
