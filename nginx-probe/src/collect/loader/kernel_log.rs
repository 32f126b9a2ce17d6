//! The kernel programs' rare events, logged with aya-log: a full map (`WORKERS`,
//! `UPSTREAM_FD`), no free worker slot, a `FILTER` collision, the slot a worker forked by
//! the master takes. The programs write a record to the `AYA_LOGS` ring buffer only
//! when such an event happens and its level is enabled (`AYA_LOG_LEVEL`, patched from
//! the `log` crate's maximum level), never per request; a task on the session's
//! runtime relays the records to the `log` crate, so they appear beside user space's
//! own messages (`RUST_LOG=info` shows the full maps and exhausted slots,
//! `RUST_LOG=debug` also the slots and collisions).

use aya::{maps::MapType, Ebpf};
use log::debug;
use tokio::{
    io::{unix::AsyncFd, Interest},
    task::JoinHandle,
};

use crate::error::ProbeError;

/// The relay of the kernel's log records; dropping it stops the relay.
pub(super) struct KernelLog(Option<JoinHandle<()>>);

/// The value of the `AYA_LOG_LEVEL` global: the `log` crate's maximum level (0 off,
/// 1 error ... 5 trace, the numbering `aya_log_common::Level` shares), so a statement
/// whose record would be filtered out in user space does not run in the kernel.
pub(super) fn level() -> u8 {
    log::max_level() as usize as u8
}

/// Checks that this kernel has BPF ring buffers (Linux 5.8 or later), which the
/// object's `AYA_LOGS` map is: without them no map of the object can be created.
///
/// Errors: [`ProbeError::Kernel`] naming the missing feature. When the probe itself
/// fails, the load goes on and reports what the kernel says.
pub(super) fn require_ring_buffer() -> Result<(), ProbeError> {
    match aya::sys::is_map_supported(MapType::RingBuf) {
        Ok(false) => Err(ProbeError::Kernel(
            "this kernel has no BPF ring buffer (BPF_MAP_TYPE_RINGBUF, Linux 5.8 or later), which nginx-probe's eBPF object needs".into(),
        )),
        _ => Ok(()),
    }
}

impl KernelLog {
    /// Starts relaying the records of the loaded `ebpf`. Quietly nothing (a debug line)
    /// when the object has no log map or no tokio runtime is running: the events are
    /// also counted in `DROPS`, which the report shows.
    pub(super) fn start(ebpf: &mut Ebpf) -> KernelLog {
        let logger = match aya_log::EbpfLogger::init(ebpf) {
            Ok(l) => l,
            Err(e) => {
                debug!("kernel log records not relayed: {e}");
                return KernelLog(None);
            }
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            debug!("kernel log records not relayed: no runtime");
            return KernelLog(None);
        };
        let _entered = runtime.enter();
        // SAFETY: the logger's fd is its ring buffer map's, which the logger owns: open
        // and the same for as long as the logger (moved into the AsyncFd) lives.
        let registered = unsafe { AsyncFd::register_with_interest(logger, Interest::READABLE) };
        let mut fd = match registered {
            Ok(fd) => fd,
            Err(e) => {
                debug!("kernel log records not relayed: {e}");
                return KernelLog(None);
            }
        };
        KernelLog(Some(runtime.spawn(async move {
            while let Ok(mut ready) = fd.readable_mut().await {
                ready.get_inner_mut().flush();
                ready.clear_ready();
            }
        })))
    }
}

impl Drop for KernelLog {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}
