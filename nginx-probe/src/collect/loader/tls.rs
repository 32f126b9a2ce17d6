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
//!
//! libssl's functions are found where nginx has them ([`find_libssl`]): in the libssl
//! the master maps, else in the nginx binary itself (OpenSSL linked statically, as
//! custom and quictls/BoringSSL builds have it), read from its symbol tables with
//! bounded reads. nginx's count attaches either way, and alone when neither has them.

use std::path::{Path, PathBuf};

use aya::programs::{
    uprobe::{UProbeLinkId, UProbeScope},
    ProgramError, UProbe,
};
use log::warn;
use nginx_probe_common::names::prog;

use super::{symbols::symbols_in, windows::Release, Probe};
use crate::{collect::target, model::LibsslSource};

/// libssl's programs and the symbols they attach to.
const LIBSSL: [(&str, &str); 4] = [
    (prog::SSL_SET_CONNECT_STATE, "SSL_set_connect_state"),
    (prog::SSL_DO_HANDSHAKE, "SSL_do_handshake"),
    (prog::SSL_DO_HANDSHAKE_RET, "SSL_do_handshake"),
    (prog::SSL_FREE, "SSL_free"),
];

/// nginx's own function that `ngx_ssl_handshake` is: present whenever nginx was built
/// with TLS, exported like every `ngx_*` function (nginx links with `-Wl,-E`).
const NGX_SSL_HANDSHAKE: &str = "ngx_ssl_handshake";

/// The file holding libssl's functions for one master, found by [`find_libssl`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LibsslFile {
    /// A path that opens it from here: the mapping's `/proc/<pid>/map_files` link (or
    /// the path under `/proc/<pid>/root`), or `/proc/<pid>/exe`.
    pub open: PathBuf,
    /// What the report says it is: [`LibsslSource::SharedLibrary`] or
    /// [`LibsslSource::NginxBinary`].
    pub source: LibsslSource,
}

/// Where master `pid` has libssl's functions: the libssl it maps
/// ([`target::libssl_path`]), else its own binary (`/proc/<pid>/exe`) when the binary's
/// symbol tables define every symbol of `LIBSSL` (OpenSSL linked statically).
///
/// Errors: one line saying why neither has them (the binary built without TLS, or
/// stripped of its symbol table, or unreadable).
pub fn find_libssl(pid: u32) -> Result<LibsslFile, String> {
    if let Some((open, shown)) = target::libssl_path(pid) {
        return Ok(LibsslFile {
            open,
            source: LibsslSource::SharedLibrary(shown),
        });
    }
    let exe = PathBuf::from(format!("/proc/{pid}/exe"));
    let shown = std::fs::read_link(&exe)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| exe.display().to_string());
    let why = |e: String| format!("nginx maps no libssl, and its binary {shown}: {e}");
    let mut names: Vec<&str> = LIBSSL.iter().map(|(_, sym)| *sym).collect();
    names.push(NGX_SSL_HANDSHAKE);
    let s = symbols_in(&exe, &names).map_err(why)?;
    let (libssl, ngx) = s.found.split_at(LIBSSL.len());
    if libssl.iter().all(Option::is_some) {
        return Ok(LibsslFile {
            open: exe,
            source: LibsslSource::NginxBinary(shown),
        });
    }
    Err(why(no_libssl_in_binary(
        &names,
        libssl,
        ngx[0].is_some(),
        s.has_symtab,
    )))
}

/// Why a binary without (all of) libssl's symbols has none to trace: the symbols
/// missing, and what that says of the build (`tls_built`: nginx's `ngx_ssl_handshake`
/// is there; `has_symtab`: the full symbol table is there, not stripped).
fn no_libssl_in_binary(
    names: &[&str],
    libssl: &[Option<(u64, u64)>],
    tls_built: bool,
    has_symtab: bool,
) -> String {
    let mut missing: Vec<&str> = names
        .iter()
        .zip(libssl)
        .filter(|(_, f)| f.is_none())
        .map(|(n, _)| *n)
        .collect();
    missing.dedup();
    let missing = missing.join(", ");
    match (tls_built, has_symtab) {
        (false, true) => format!("no {missing} and no {NGX_SSL_HANDSHAKE} in its symbol table: built without TLS"),
        (false, false) => format!("stripped (no symbol table) and exports no {missing} nor {NGX_SSL_HANDSHAKE}: built without TLS, or stripped of what would say"),
        (true, true) => format!("built with TLS ({NGX_SSL_HANDSHAKE} is there) but no {missing} in its symbol table (OpenSSL's symbols hidden or stripped)"),
        (true, false) => format!("built with TLS ({NGX_SSL_HANDSHAKE} is exported) but stripped (no symbol table) and exports no {missing}"),
    }
}

/// Where the report's TLS figures come from, as attached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSources {
    /// Completed handshakes are counted by the `ngx_ssl_ocsp_validate` uprobe (else by
    /// `SSL_do_handshake` returning 1).
    pub handshakes_from_nginx: bool,
    /// libssl's figures (handshakes started and abandoned, wall time, time inside
    /// `SSL_do_handshake`) come from the detail windows only.
    pub libssl_sampled: bool,
    /// Why nginx's count is not used, when it is not (symbol missing, uprobe refused).
    pub nginx_unavailable: Option<String>,
    /// Where libssl's programs are attached (a shared libssl, the nginx binary), or why
    /// they are not (then nginx's count is the only TLS figure).
    pub libssl: LibsslSource,
}

/// libssl's programs while they belong to the detail windows.
pub(super) struct TlsWindow {
    /// libssl's functions as seen from here (the libssl the master maps, or the nginx
    /// binary).
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
    /// master's `/proc/<pid>/exe`) whatever `libssl` is, then libssl's programs in
    /// `libssl` (found by [`find_libssl`]: the libssl the master maps, or the nginx
    /// binary), continuously, or, with `sampled` and nginx's count attached, loaded now
    /// and linked in each detail window. Every program counts only tracked workers.
    /// Returns where the figures come from.
    ///
    /// Errors: a one-line reason when nothing counts handshakes (no libssl's functions
    /// and no nginx count: the reason is libssl's), or when libssl's programs cannot be
    /// loaded or attached (symbol not exported, uprobes unsupported); what was attached
    /// before stays attached and counts nothing wrong.
    pub fn attach_tls(
        &mut self,
        libssl: Result<LibsslFile, String>,
        nginx: &Path,
        sampled: bool,
    ) -> Result<TlsSources, String> {
        let nginx_count = self.attach_uprobe(prog::OCSP_VALIDATE, prog::OCSP_VALIDATE, nginx);
        self.tls_from_nginx = nginx_count.is_ok();
        let libssl = match libssl {
            Ok(f) => f,
            Err(why) if self.tls_from_nginx => {
                return Ok(TlsSources {
                    handshakes_from_nginx: true,
                    libssl_sampled: false,
                    nginx_unavailable: None,
                    libssl: LibsslSource::Unavailable(why),
                })
            }
            Err(why) => return Err(why),
        };
        let mut src = TlsSources {
            handshakes_from_nginx: self.tls_from_nginx,
            libssl_sampled: false,
            nginx_unavailable: nginx_count.err(),
            libssl: libssl.source,
        };
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
                libssl: libssl.open,
                links: Vec::new(),
                failed: false,
            });
            src.libssl_sampled = true;
            return Ok(src);
        }
        for (name, sym) in LIBSSL {
            self.attach_uprobe(name, sym, &libssl.open)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: [&str; 4] = [
        "SSL_set_connect_state",
        "SSL_do_handshake",
        "SSL_do_handshake",
        "SSL_free",
    ];

    #[test]
    fn the_reason_says_what_the_build_is() {
        let none = [None; 4];
        assert_eq!(
            no_libssl_in_binary(&NAMES, &none, false, true),
            "no SSL_set_connect_state, SSL_do_handshake, SSL_free and no ngx_ssl_handshake in its symbol table: built without TLS"
        );
        assert!(no_libssl_in_binary(&NAMES, &none, false, false)
            .starts_with("stripped (no symbol table) and exports no SSL_set_connect_state"));
        let only_free = [None, None, None, Some((0x10, 4))];
        assert_eq!(
            no_libssl_in_binary(&NAMES, &only_free, true, true),
            "built with TLS (ngx_ssl_handshake is there) but no SSL_set_connect_state, SSL_do_handshake in its symbol table (OpenSSL's symbols hidden or stripped)"
        );
        assert!(no_libssl_in_binary(&NAMES, &none, true, false).contains("but stripped"));
    }

    #[test]
    fn the_names_looked_up_are_libssls_programs_symbols() {
        let syms: Vec<&str> = LIBSSL.iter().map(|(_, s)| *s).collect();
        assert_eq!(syms, NAMES);
    }

    #[test]
    fn a_master_that_is_gone_has_no_libssl_and_says_why() {
        // No process has pid 0 under /proc.
        let e = find_libssl(0).unwrap_err();
        assert!(
            e.starts_with("nginx maps no libssl, and its binary /proc/0/exe: cannot open"),
            "{e}"
        );
        assert!(!e.contains('\n'));
    }
}
