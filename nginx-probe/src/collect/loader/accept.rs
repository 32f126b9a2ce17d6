//! The accept counter: a uprobe on nginx's `ngx_get_connection`, counting the calls
//! `ngx_event_accept` makes (one per fd `accept4`/`accept` returned). The program tells
//! that caller by the return address on the stack, against the range of
//! `ngx_event_accept` relative to `ngx_get_connection` read here from the binary's
//! symbol table; without that range (a stripped symbol, a size of 0) it walks the fd
//! table as before and needs the kernel's BTF offsets.

use std::path::Path;

use aya::maps::Array;
use log::debug;
use nginx_probe_common::names::{map, prog};

use super::{symbols::symbols_in, Probe};

/// The function whose calls are the accepts.
pub const CALLEE: &str = "ngx_get_connection";
/// The function that calls it once per accepted fd.
pub const CALLER: &str = "ngx_event_accept";

/// `[lo, hi)`: the bytes of the caller (`caller` = address, size) relative to the
/// callee's start (`callee` address), as wrapping u64s, for `ACCEPT_CALLER`.
///
/// Errors: a caller of size 0 (no range to test), or a range over 1 MiB (no function
/// of nginx is that large: a hostile or corrupt symbol table).
pub fn caller_range(callee: u64, caller: (u64, u64)) -> Result<[u64; 2], String> {
    let (addr, size) = caller;
    if size == 0 {
        return Err(format!("{CALLER} has no size in the symbol table"));
    }
    if size > 1 << 20 {
        return Err(format!("{CALLER} is {size} bytes in the symbol table"));
    }
    let lo = addr.wrapping_sub(callee);
    Ok([lo, lo.wrapping_add(size)])
}

/// [`caller_range`] from the ELF file at `exe`, read by [`symbols_in`] (bounded).
///
/// Errors: one line (unreadable, not ELF, a symbol missing or without size).
pub fn caller_range_in(exe: &Path) -> Result<[u64; 2], String> {
    let s = symbols_in(exe, &[CALLEE, CALLER])?;
    let callee = s.found[0].ok_or_else(|| format!("no symbol {CALLEE}"))?;
    let caller = s.found[1].ok_or_else(|| format!("no symbol {CALLER}"))?;
    caller_range(callee.0, caller)
}

impl Probe {
    /// Attaches the accept counter, a uprobe on `ngx_get_connection` in `binary` (the
    /// master's `/proc/<pid>/exe`), for every process running it; the program counts
    /// only tracked workers, and only calls from `ngx_event_accept` (told by the return
    /// address when the binary's symbols give that function's range, else by the fd:
    /// an accepted socket, read through the fd table, which needs every kernel offset:
    /// [`Probe::fd_walk`]). Call it before [`Probe::attach`], which then leaves the
    /// accept tracepoints to the detail layer. Sets [`Probe::accepts_from_uprobe`].
    ///
    /// Errors: a one-line reason (neither the caller's range nor the fd table, symbol
    /// not exported, uprobes unsupported); nothing is attached then.
    pub fn attach_accept_uprobe(&mut self, binary: &Path) -> Result<(), String> {
        match self.set_caller_range(binary) {
            Ok(()) => debug!("accepts: calls of {CALLEE} from {CALLER} (return address)"),
            Err(why) => {
                if let Err(e) = &self.fd_walk {
                    return Err(format!("{why}, and the fd table cannot be walked ({e})"));
                }
                debug!("accepts: {CALLEE} calls on accepted sockets (fd table; {why})");
            }
        }
        self.attach_uprobe(prog::GET_CONNECTION, prog::GET_CONNECTION, binary)?;
        self.accepts_from_uprobe = true;
        Ok(())
    }

    /// `ACCEPT_CALLER` from `binary`'s symbols ([`caller_range_in`]).
    ///
    /// Errors: one line (a symbol missing, the map missing).
    fn set_caller_range(&mut self, binary: &Path) -> Result<(), String> {
        let range = caller_range_in(binary)?;
        let m = self
            .ebpf
            .map_mut(map::ACCEPT_CALLER)
            .ok_or_else(|| format!("the eBPF object has no map {}", map::ACCEPT_CALLER))?;
        let mut a: Array<_, [u64; 2]> = Array::try_from(m).map_err(|e| e.to_string())?;
        a.set(0, range, 0).map_err(|e| e.to_string())
    }

    /// The `ngx_get_connection` uprobe for the lifecycle layer: each call notes its
    /// frame, so that nginx's closes made inside it (reusing connections at
    /// `worker_connections`, `nginx_probe_common::lifecycle::CLOSED_REUSING`) are told
    /// apart. Attached by [`Probe::attach_accept_uprobe`] already with `--detail
    /// sampled`; attached here otherwise (accepts still come from the tracepoints).
    /// Only with the lifecycle programs attached; sets `lifecycle.meta.reusing_unknown`
    /// to why not otherwise.
    pub fn attach_reuse_marker(&mut self, binary: &Path) {
        if !self.lifecycle.meta.attached || self.accepts_from_uprobe {
            return;
        }
        // Without the caller's range the program reads the fd table at each call.
        let _ = self.set_caller_range(binary);
        if let Err(e) = self.attach_uprobe(prog::GET_CONNECTION, prog::GET_CONNECTION, binary) {
            self.lifecycle.meta.reusing_unknown =
                Some(format!("the uprobe on {CALLEE} is not attached: {e}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_is_relative_to_the_callee_either_way() {
        // Debian 12's nginx 1.22.1: ngx_get_connection 0x372d0, ngx_event_accept
        // 0x48db0 + 2327.
        let [lo, hi] = caller_range(0x372d0, (0x48db0, 2327)).unwrap();
        assert_eq!((lo, hi), (0x48db0 - 0x372d0, 0x48db0 - 0x372d0 + 2327));
        // nginx 1.26.3 built from source: the caller lies above as well; one where it
        // lies below wraps, and a return address inside still falls in.
        let [lo, hi] = caller_range(0x9000, (0x1000, 0x100)).unwrap();
        let ret_minus_ip = 0x1050u64.wrapping_sub(0x9000);
        assert!(ret_minus_ip.wrapping_sub(lo) < hi.wrapping_sub(lo));
        let outside = 0x1100u64.wrapping_sub(0x9000);
        assert!(outside.wrapping_sub(lo) >= hi.wrapping_sub(lo));
    }

    #[test]
    fn a_caller_without_size_or_too_large_is_refused() {
        assert_eq!(
            caller_range(0x1000, (0x2000, 0)).unwrap_err(),
            "ngx_event_accept has no size in the symbol table"
        );
        assert!(caller_range(0x1000, (0x2000, 2 << 20)).is_err());
    }
}
