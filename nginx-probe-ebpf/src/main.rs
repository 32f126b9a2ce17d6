//! nginx-probe's eBPF programs, filtered in the kernel to the target nginx's workers and
//! aggregated in per-CPU maps. Nothing is streamed to user space per event; user space
//! reads the maps. Rare events (a full map, no free worker slot) are counted in `DROPS`,
//! off every per-request path.
//!
//! One module per probe family: `syscalls` (the enter/exit tracepoints), `accept`,
//! `requests`, `upstream`, `tls`, `lifecycle` (client connections' TCP states),
//! `exits` (worker exits), `reloads` (configuration loads) and `workers` (the worker filter and the fork program); every
//! map and patched global in `maps`; `fds` classifies a worker's fds from the kernel's
//! structures; `helpers` holds what every family uses.
#![cfg_attr(target_arch = "bpf", no_std)]
#![cfg_attr(target_arch = "bpf", no_main)]
// The lifecycle's counters are added atomically (`lifecycle::lc_add`): the BPF target
// has no `AtomicU64::fetch_add`, its intrinsic compiles to the instruction.
#![cfg_attr(target_arch = "bpf", feature(core_intrinsics))]
#![cfg_attr(target_arch = "bpf", allow(internal_features))]

#[cfg(target_arch = "bpf")]
mod accept;
#[cfg(target_arch = "bpf")]
mod exits;
#[cfg(target_arch = "bpf")]
mod fds;
#[cfg(target_arch = "bpf")]
mod helpers;
#[cfg(target_arch = "bpf")]
mod lifecycle;
#[cfg(target_arch = "bpf")]
mod lifecycle_tls;
#[cfg(target_arch = "bpf")]
mod lifecycle_up;
#[cfg(target_arch = "bpf")]
mod maps;
#[cfg(target_arch = "bpf")]
mod quic;
#[cfg(target_arch = "bpf")]
mod reloads;
#[cfg(target_arch = "bpf")]
mod requests;
#[cfg(target_arch = "bpf")]
mod syscalls;
#[cfg(target_arch = "bpf")]
mod tls;
#[cfg(target_arch = "bpf")]
mod upstream;
#[cfg(target_arch = "bpf")]
mod workers;

#[cfg(target_arch = "bpf")]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // SAFETY: the verifier rejects any program whose panic path is reachable.
    unsafe { core::hint::unreachable_unchecked() }
}

#[cfg(not(target_arch = "bpf"))]
fn main() {}
