//! The lifecycle layer's uprobes in nginx's binary: the drain marker on
//! `ngx_close_idle_connections`, the TLS close marker on `ngx_ssl_shutdown`, and the
//! rule that counts nginx's closes met by a client's FIN it never read.

use std::path::Path;

use aya::maps::{Array, MapData};
use log::warn;
use nginx_probe_common::lifecycle::names as lc_names;

use super::{symbols, Probe};

impl Probe {
    /// Attaches the drain marker, a uprobe on `ngx_close_idle_connections` in `binary`
    /// (the master's `/proc/<pid>/exe`), and its uretprobe: a worker entering it (its
    /// graceful shutdown) has its later closes counted as a draining worker's, those
    /// before the return as its sweep of idle connections. The uretprobe goes first, so
    /// a sweep is never left open. Only with the lifecycle programs attached; sets
    /// `lifecycle.meta.draining_unknown` to why not otherwise.
    pub fn attach_drain_uprobe(&mut self, binary: &Path) {
        use nginx_probe_common::lifecycle::{
            names::{PROG_DRAIN, PROG_DRAIN_SWEPT},
            worker::DRAIN_SYMBOL,
        };
        if !self.lifecycle.meta.attached {
            return;
        }
        let attached = self
            .attach_uprobe(PROG_DRAIN_SWEPT, DRAIN_SYMBOL, binary)
            .and_then(|()| self.attach_uprobe(PROG_DRAIN, DRAIN_SYMBOL, binary));
        self.lifecycle.meta.draining_unknown = match attached {
            Ok(()) => None,
            Err(e) => {
                // Out of fds: no fact about nginx; `check_fds` names the limit.
                if !self.fds_ran_out {
                    warn!("closes by draining workers are counted as the serving workers' ({e})");
                }
                Some(e)
            }
        };
    }

    /// Attaches the uprobe on `ngx_ssl_shutdown` in `binary` (the master's
    /// `/proc/<pid>/exe`) that tells who began a TLS close (see
    /// `nginx_probe_common::lifecycle::CLOSED_BY_NGINX_CLIENT_FIN_FIRST`). Needs the
    /// lifecycle programs, the fd-table walk's offsets and the raw tracepoints' socket
    /// offsets (it reads the socket of `c->fd`); sets `lifecycle.meta.tls_close_unknown`
    /// to why not otherwise (nginx built without TLS has no such symbol).
    pub fn attach_tls_close_uprobe(&mut self, binary: &Path) {
        use nginx_probe_common::lifecycle::{names::PROG_TLS_SHUTDOWN, TLS_SHUTDOWN_SYMBOL};
        if !self.lifecycle.meta.attached {
            return;
        }
        let raw_known = self.lifecycle.raw_off_known;
        let attached = match (&self.fd_walk, raw_known) {
            (Err(e), _) => Err(format!("the fd-table walk's offsets are unknown: {e}")),
            (Ok(()), false) => Err("struct sock's offsets are not in the kernel's BTF".into()),
            (Ok(()), true) => self.attach_uprobe(PROG_TLS_SHUTDOWN, TLS_SHUTDOWN_SYMBOL, binary),
        };
        let fin_rule = match (raw_known, &attached) {
            (false, _) => Err("struct sock's offsets are not in the kernel's BTF".to_string()),
            (true, Ok(())) => Ok(()),
            (true, Err(e)) => match symbols::symbols_in(binary, &[TLS_SHUTDOWN_SYMBOL]) {
                Ok(s) if s.found[0].is_none() => Ok(()),
                _ => Err(format!(
                    "nginx has TLS and the uprobe on {TLS_SHUTDOWN_SYMBOL} is not attached: {e}"
                )),
            },
        };
        self.lifecycle.meta.fin_unread_unknown = match fin_rule {
            Ok(()) => self.set_fin_rule().err(),
            Err(e) => Some(e),
        };
        self.lifecycle.meta.tls_close_unknown = match attached {
            Ok(()) => None,
            Err(e) => {
                log::info!("TLS closes nginx began may count as the client's ({e})");
                Some(e)
            }
        };
    }

    /// Turns on the count of nginx's closes met by a client's FIN never read
    /// (`LC_FIN_RULE`, see `nginx_probe_common::lifecycle::CLOSED_BY_NGINX_CLIENT_FIN_UNREAD`).
    ///
    /// Errors: the map is missing or refused the write (one line).
    fn set_fin_rule(&mut self) -> Result<(), String> {
        let map = self
            .ebpf
            .map_mut(lc_names::LC_FIN_RULE)
            .ok_or_else(|| format!("the eBPF object has no map {}", lc_names::LC_FIN_RULE))?;
        let mut rule: Array<&mut MapData, u32> = Array::try_from(map).map_err(|e| e.to_string())?;
        rule.set(0, 1, 0).map_err(|e| e.to_string())
    }

    /// Whether worker `slot` has begun its graceful shutdown (the drain uprobe marked
    /// it, or [`Probe::mark_draining_before_attach`] did); None when the drain uprobe
    /// is not attached or the mark cannot be read.
    pub fn drained(&self, slot: u32) -> Option<bool> {
        let m = &self.lifecycle.meta;
        if !m.attached || m.draining_unknown.is_some() {
            return None;
        }
        self.lc_draining.get(&slot, 0).ok().map(|ns| ns != 0)
    }

    /// Marks worker `slot` draining since before attach (its title said so at the
    /// first look): its closes count as a draining worker's, with no time since the
    /// drain. Nothing when the drain uprobe is not attached or the uprobe already
    /// marked it.
    pub fn mark_draining_before_attach(&mut self, slot: u32) {
        use nginx_probe_common::lifecycle::worker::DRAIN_START_UNKNOWN;
        let m = &self.lifecycle.meta;
        if !m.attached || m.draining_unknown.is_some() {
            return;
        }
        if self.lc_draining.get(&slot, 0).ok() == Some(0) {
            let _ = self.lc_draining.set(slot, DRAIN_START_UNKNOWN, 0);
        }
    }
}
