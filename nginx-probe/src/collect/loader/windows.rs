//! The detail layer's windows (`--detail sampled`): its programs stay loaded for the
//! whole run; each window opens their tracepoints' perf events and links the programs,
//! and the end of the window closes both, so between windows the kernel has no perf
//! event on any per-request syscall and a hit of one costs only the syscall-tracing
//! flag's slow path (set by the continuous accept4 tracepoints).
//!
//! State a program keeps between calls (entry timestamps, the event loop's last
//! wake-up, the accept-then-close marker, a connect in flight) is cleared around each
//! window, so nothing measured before a gap is matched with an event after it.

use std::{
    os::fd::{AsFd as _, OwnedFd},
    sync::{
        atomic::{AtomicU64, Ordering},
        mpsc, Arc,
    },
    time::Instant,
};

use aya::programs::TracePoint;
use log::warn;
use nginx_probe_common::SYSCALLS;

use super::{perf_link, Probe};
use crate::error::ProbeError;

/// Whether syscall tracepoint `tp` (`sys_enter_<x>` or `sys_exit_<x>`) is one of a
/// `nginx_probe_common::is_rare` syscall (the continuous layer: exact accepts, refusals and
/// EMFILE/ENFILE by errno). Unknown names are not rare.
pub fn is_rare_tracepoint(tp: &str) -> bool {
    let base = tp
        .strip_prefix("sys_enter_")
        .or_else(|| tp.strip_prefix("sys_exit_"))
        .unwrap_or(tp);
    SYSCALLS
        .iter()
        .enumerate()
        .any(|(i, d)| d.tracepoint == base && nginx_probe_common::is_rare(i as u32))
}

/// One detail-layer program: loaded at attach, linked to its tracepoint in windows.
pub(super) struct DetailProg {
    /// Program name in the eBPF object.
    prog: String,
    /// Tracepoint under `syscalls:`.
    tracepoint: String,
    /// The tracepoint's perf event while a window is open (opened disabled at the
    /// window's start, closed at its end).
    event: Option<OwnedFd>,
    /// The BPF link while a window is open (closing it detaches the program).
    link: Option<OwnedFd>,
    /// Set once attaching failed (warned once, never tried again).
    failed: bool,
}

impl DetailProg {
    pub(super) fn new(prog: &str, tracepoint: &str) -> DetailProg {
        DetailProg {
            prog: prog.to_string(),
            tracepoint: tracepoint.to_string(),
            event: None,
            link: None,
            failed: false,
        }
    }
}

/// What opening or closing one window cost this process, measured around the
/// attach/detach calls (wall clock, `Instant`).
#[derive(Clone, Copy, Debug, Default)]
pub struct WindowCost {
    /// Links attached (or detached).
    pub links: usize,
    /// Wall time of all of them, including the state reset, µs. For a detach, the
    /// time to hand the fds to the closer thread; `Closer::last_close_us` has how
    /// long the kernel then took to release them.
    pub us: u64,
}

/// One thing a closed window releases: a link or perf event fd, or an aya uprobe link
/// (libssl's programs in windows, see `tls.rs`); dropping it releases it.
pub(super) type Release = Box<dyn Send>;

/// Releases a closed window's links and perf events on a thread of its own.
///
/// Releasing a tracepoint's perf event waits for the kernel (`perf_trace_event_unreg`
/// takes the global `event_mutex` and waits for an RCU grace period): tens of ms per
/// event idle, up to about 1.3 s for 24 of them under load on this machine. The gate is
/// already closed then, so nothing is counted meanwhile; the main loop only hands the
/// fds over and goes on serving reports and scrapes.
pub(super) struct Closer {
    tx: Option<mpsc::Sender<Vec<Release>>>,
    /// Wall time of the last batch's release, µs.
    last_us: Arc<AtomicU64>,
}

impl Closer {
    pub(super) fn new() -> Closer {
        Closer {
            tx: None,
            last_us: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Hands `fds` to the closer thread (started at the first call), which closes them
    /// in parallel. If the thread cannot be started, closes them here.
    pub(super) fn close(&mut self, fds: Vec<Release>) {
        if self.tx.is_none() {
            let (tx, rx) = mpsc::channel::<Vec<Release>>();
            let last = Arc::clone(&self.last_us);
            let started = std::thread::Builder::new()
                .name("detail-closer".into())
                .spawn(move || {
                    for batch in rx {
                        let t0 = Instant::now();
                        std::thread::scope(|s| {
                            for fd in batch {
                                s.spawn(move || drop(fd));
                            }
                        });
                        last.store(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
                    }
                });
            if started.is_ok() {
                self.tx = Some(tx);
            }
        }
        let fds = match &self.tx {
            Some(tx) => match tx.send(fds) {
                Ok(()) => return,
                Err(mpsc::SendError(fds)) => fds,
            },
            None => fds,
        };
        let t0 = Instant::now();
        drop(fds);
        self.last_us
            .store(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
    }

    /// How long the kernel took to release the last closed window's links and perf
    /// events, µs (0 before the first).
    pub(super) fn last_close_us(&self) -> u64 {
        self.last_us.load(Ordering::Relaxed)
    }
}

impl Probe {
    /// Programs of the detail layer (0 with `--detail full`: everything is attached
    /// continuously).
    pub fn detail_programs(&self) -> usize {
        self.detail.iter().filter(|d| !d.failed).count()
    }

    /// Opens a window: clears the state left over from before it (entry timestamps,
    /// the last event-loop wake-up, a connect in flight), then opens each detail
    /// tracepoint's perf event and links its program, entries before exits (the
    /// planned order), and last forgets accepts that precede the window (so a close
    /// inside it is not taken for a refusal).
    /// A tracepoint that cannot be attached is warned about once and left out.
    ///
    /// Errors: map updates that fail.
    pub fn attach_detail(&mut self) -> Result<WindowCost, ProbeError> {
        let t0 = Instant::now();
        self.reset_detail_state()?;
        let mut links = 0;
        let root = self.tracefs_root.clone();
        for d in self
            .detail
            .iter_mut()
            .filter(|d| !d.failed && d.link.is_none())
        {
            let Some(prog) = self.ebpf.program(&d.prog) else {
                d.failed = true;
                continue;
            };
            let res = <&TracePoint>::try_from(prog)
                .and_then(|tp| tp.fd())
                .map_err(|e| std::io::Error::other(e.to_string()))
                .and_then(|fd| {
                    if d.event.is_none() {
                        d.event = Some(perf_link::open_tracepoint(&root, &d.tracepoint)?);
                    }
                    match &d.event {
                        Some(event) => perf_link::link(fd.as_fd(), event.as_fd()),
                        None => Err(std::io::Error::other("no perf event")),
                    }
                });
            match res {
                Ok(link) => {
                    d.link = Some(link);
                    links += 1;
                }
                Err(e) => {
                    warn!(
                        "could not attach syscalls:{} for a detail window ({e}); windows go on without it",
                        d.tracepoint
                    );
                    d.failed = true;
                }
            }
        }
        for slot in 0..self.last_accept.len() {
            self.last_accept.set(slot, 0u64, 0)?;
        }
        links += self.attach_tls_window();
        Ok(WindowCost {
            links,
            us: t0.elapsed().as_micros() as u64,
        })
    }

    /// Opens (`true`) or closes the gate every detail program checks first
    /// (`DETAIL_GATE`): while it is closed they count nothing, so a window's figures
    /// cover exactly the time between the two flips, whatever attaching and detaching
    /// take. The continuous layer ignores it.
    ///
    /// Errors: the map update.
    pub fn set_detail_gate(&mut self, open: bool) -> Result<(), ProbeError> {
        self.gate.set(0, u32::from(!open), 0)?;
        Ok(())
    }

    /// Closes a window (the gate is closed first by the caller): its links and perf
    /// events go to the closer thread, which releases them (closing a BPF link
    /// detaches its program; closing the perf event unregisters the tracepoint, so
    /// between windows a per-request syscall no longer reaches the perf handler).
    pub fn detach_detail(&mut self) -> WindowCost {
        let t0 = Instant::now();
        let mut fds: Vec<Release> = Vec::with_capacity(2 * self.detail.len());
        let n = self.detach_detail_fds(&mut fds);
        self.closer.close(fds);
        WindowCost {
            links: n,
            us: t0.elapsed().as_micros() as u64,
        }
    }

    /// Takes an open window's links and perf events into `fds` (released when
    /// dropped); returns the links taken.
    pub(super) fn detach_detail_fds(&mut self, fds: &mut Vec<Release>) -> usize {
        let mut n = 0;
        for d in &mut self.detail {
            if let Some(link) = d.link.take() {
                fds.push(Box::new(link));
                n += 1;
            }
            if let Some(event) = d.event.take() {
                fds.push(Box::new(event));
            }
        }
        n + self.detach_tls_window(fds)
    }

    /// How long the kernel took to release the last closed window's links and perf
    /// events, µs, measured on the closer thread (0 before the first window closed).
    pub fn last_detach_us(&self) -> u64 {
        self.closer.last_close_us()
    }

    /// Zeroes the per-worker state the detail programs carry from one call to the
    /// next: an entry or a wake-up stamped before a gap would otherwise be matched
    /// with an exit after it (a latency as long as the gap).
    fn reset_detail_state(&mut self) -> Result<(), ProbeError> {
        for slot in 0..self.main_entry.len() {
            self.clear_calls_in_progress(slot)?;
        }
        let keys: Vec<u64> = self.in_flight.keys().filter_map(Result::ok).collect();
        for k in keys {
            let _ = self.in_flight.remove(&k);
        }
        self.reset_tls_state();
        // Connects in progress when the last window closed: their result would come
        // with the gap's length. (Open upstream fds are not counted when sampled.)
        let keys: Vec<u64> = self.upstream_fd.keys().filter_map(Result::ok).collect();
        for k in keys {
            let _ = self.upstream_fd.remove(&k);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::is_rare_tracepoint;

    #[test]
    fn only_per_connection_and_startup_syscalls_are_rare() {
        for tp in [
            "sys_enter_accept4",
            "sys_exit_accept4",
            "sys_exit_accept",
            "sys_exit_pipe2",
            "sys_exit_dup3",
        ] {
            assert!(is_rare_tracepoint(tp), "{tp}");
        }
        for tp in [
            "sys_enter_write",
            "sys_exit_writev",
            "sys_exit_sendfile64",
            "sys_enter_epoll_wait",
            "sys_exit_openat",
            "sys_enter_close",
            "sys_exit_socket",
            "sys_enter_connect",
            "sys_exit_getsockopt",
            "nonsense",
        ] {
            assert!(!is_rare_tracepoint(tp), "{tp}");
        }
    }
}
