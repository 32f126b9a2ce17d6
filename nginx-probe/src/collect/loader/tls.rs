//! TLS handshakes of nginx's client connections.
//!
//! Two sources, both uprobes:
//! - nginx's `ngx_ssl_ocsp_validate`, which `ngx_ssl_handshake` calls once when a
//!   handshake completes (nginx 1.19+): one entry probe per handshake, counting the
//!   completed handshakes of the connections nginx accepted (`TLS_DONE`);
//! - libssl's `SSL_do_handshake` (entry and return) and `SSL_free`: when a handshake
//!   starts, its wall time, the time inside the calls and the abandoned ones, at about
//!   3.8 probe hits per handshake (1.4 calls each with its return, and the free).
//!
//! A uprobe hit costs the worker a trap into the kernel (several us on a VM), so with
//! `--detail sampled` and nginx's count attached, libssl's programs are linked only in
//! the detail windows (like the per-request syscall tracepoints) and check the detail
//! gate (`DETAIL_GATE` element 1); the completed-handshake count stays exact all the
//! time. With `--detail full`, or when nginx does not export the symbol, libssl's
//! programs stay attached and their returns of 1 are the completed handshakes.

use std::path::{Path, PathBuf};

use aya::programs::{
    uprobe::{UProbeLinkId, UProbeScope},
    ProgramError, UProbe,
};
use log::warn;
use nginx_probe_common::names::prog;

use super::{windows::Release, Probe};

/// libssl's programs and the symbols they attach to.
const LIBSSL: [(&str, &str); 4] = [
    (prog::SSL_SET_CONNECT_STATE, "SSL_set_connect_state"),
    (prog::SSL_DO_HANDSHAKE, "SSL_do_handshake"),
    (prog::SSL_DO_HANDSHAKE_RET, "SSL_do_handshake"),
    (prog::SSL_FREE, "SSL_free"),
];

/// Where the report's TLS figures come from, as attached.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsSources {
    /// Completed handshakes are counted by the `ngx_ssl_ocsp_validate` uprobe (else by
    /// `SSL_do_handshake` returning 1).
    pub handshakes_from_nginx: bool,
    /// libssl's figures (handshakes started and abandoned, wall time, time inside
    /// `SSL_do_handshake`) come from the detail windows only.
    pub libssl_sampled: bool,
    /// Why nginx's count is not used, when it is not (symbol missing, uprobe refused).
    pub nginx_unavailable: Option<String>,
}

/// libssl's programs while they belong to the detail windows.
pub(super) struct TlsWindow {
    /// libssl as seen from here (the path the master maps).
    libssl: PathBuf,
    /// Links of the open window, by program.
    links: Vec<(&'static str, UProbeLinkId)>,
    /// Set once attaching failed (warned once, never tried again).
    failed: bool,
}

impl Probe {
    fn uprobe(&mut self, name: &str) -> Result<&mut UProbe, String> {
        self.ebpf
            .program_mut(name)
            .ok_or_else(|| format!("the eBPF object has no program {name}"))?
            .try_into()
            .map_err(|e: ProgramError| e.to_string())
    }

    /// Attaches the TLS handshake probes: `ngx_ssl_ocsp_validate` in `nginx` (the
    /// master's `/proc/<pid>/exe`), then libssl's programs in `libssl` (the path the
    /// master maps, as seen from here), continuously, or, with `sampled` and nginx's
    /// count attached, loaded now and linked in each detail window. Every program
    /// counts only tracked workers. Returns where the figures come from.
    ///
    /// Errors: a one-line reason when libssl's programs cannot be loaded or attached
    /// (symbol not exported, uprobes unsupported); what was attached before stays
    /// attached and counts nothing wrong.
    pub fn attach_tls(
        &mut self,
        libssl: &Path,
        nginx: &Path,
        sampled: bool,
    ) -> Result<TlsSources, String> {
        let mut src = TlsSources::default();
        match self.attach_uprobe(prog::OCSP_VALIDATE, prog::OCSP_VALIDATE, nginx) {
            Ok(()) => src.handshakes_from_nginx = true,
            Err(e) => src.nginx_unavailable = Some(e),
        }
        self.tls_from_nginx = src.handshakes_from_nginx;
        if sampled && src.handshakes_from_nginx {
            for (name, _) in LIBSSL {
                self.uprobe(name)?
                    .load()
                    .map_err(|e| format!("{name}: {e}"))?;
            }
            self.gate
                .set(1, 1u32, 0)
                .map_err(|e| format!("the detail gate: {e}"))?;
            self.tls_window = Some(TlsWindow {
                libssl: libssl.to_path_buf(),
                links: Vec::new(),
                failed: false,
            });
            src.libssl_sampled = true;
            return Ok(src);
        }
        for (name, sym) in LIBSSL {
            self.attach_uprobe(name, sym, libssl)?;
        }
        Ok(src)
    }

    /// Links libssl's programs for a window that opens (nothing when they are not in
    /// the detail layer). Returns how many were linked; a failure is warned about once
    /// and the windows go on without them.
    pub(super) fn attach_tls_window(&mut self) -> usize {
        let Some(mut w) = self.tls_window.take() else {
            return 0;
        };
        if !w.failed && w.links.is_empty() {
            for (name, sym) in LIBSSL {
                let res = self.uprobe(name).and_then(|p| {
                    p.attach(sym, &w.libssl, UProbeScope::AllProcesses)
                        .map_err(|e| e.to_string())
                });
                match res {
                    Ok(id) => w.links.push((name, id)),
                    Err(e) => {
                        warn!("could not attach the uprobe on {sym} for a detail window ({e}); windows go on without libssl's figures");
                        w.failed = true;
                        break;
                    }
                }
            }
        }
        let n = w.links.len();
        self.tls_window = Some(w);
        n
    }

    /// Unlinks libssl's programs at a window's end: their links go into `out`, to be
    /// released off the main loop (unregistering a uprobe waits for the kernel).
    /// Returns how many.
    pub(super) fn detach_tls_window(&mut self, out: &mut Vec<Release>) -> usize {
        let Some(mut w) = self.tls_window.take() else {
            return 0;
        };
        let links = std::mem::take(&mut w.links);
        let n = links.len();
        for (name, id) in links {
            match self
                .uprobe(name)
                .and_then(|p| p.take_link(id).map_err(|e| e.to_string()))
            {
                Ok(link) => out.push(Box::new(link)),
                Err(e) => warn!("could not detach {name} at a window's end ({e})"),
            }
        }
        self.tls_window = Some(w);
        n
    }

    /// Forgets the handshakes libssl's programs saw start and the calls in progress
    /// (`HS_START`, `HS_CALL`), at a window's start when they are in the detail layer:
    /// a handshake begun before the gap would otherwise be timed across it, or its
    /// `SSL*`, freed and reused unseen, taken for another.
    pub(super) fn reset_tls_state(&mut self) {
        if self.tls_window.is_none() {
            return;
        }
        let keys: Vec<[u64; 2]> = self.hs_start.keys().filter_map(Result::ok).collect();
        for k in keys {
            let _ = self.hs_start.remove(&k);
        }
        let keys: Vec<u64> = self.hs_call.keys().filter_map(Result::ok).collect();
        for k in keys {
            let _ = self.hs_call.remove(&k);
        }
        let keys: Vec<[u64; 2]> = self.tls_client.keys().filter_map(Result::ok).collect();
        for k in keys {
            let _ = self.tls_client.remove(&k);
        }
    }
}
