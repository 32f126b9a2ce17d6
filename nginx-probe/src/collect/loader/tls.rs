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

/// libssl's programs, linked per worker process (`UProbeScope::OneProcess`): the
/// kernel puts their breakpoints in the tracked workers' memory only, never in another
/// process mapping the same libssl (newcomer trial 21: with them in every process, a
/// curl on the host doing HTTP/3 trapped at each `SSL_do_handshake` and 3 s timeouts
/// rose from 0 in 96 runs of 12 requests to 3-31 per run; the same uprobes in nginx
/// alone left curl's runs as without them, within their noise). A worker is linked
/// when it is tracked ([`Probe::track`]: at attach, and as the tracker adopts one
/// forked since, within a refresh) and unlinked when untracked, so a new worker's
/// first handshakes before that are not in libssl's figures (nginx's count is exact).
pub(super) struct TlsLinks {
    /// libssl's functions as seen from here (the libssl the master maps, or the nginx
    /// binary).
    libssl: PathBuf,
    /// Linked only in the detail windows (`--detail sampled` with nginx's count).
    windowed: bool,
    /// Whether workers are linked now: always unless windowed, else in a window.
    open: bool,
    /// Links by worker (host tgid), by program.
    links: std::collections::HashMap<u32, Vec<(&'static str, UProbeLinkId)>>,
    /// Set once linking failed (warned once, never tried again).
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
        for (name, _) in LIBSSL {
            self.uprobe(name)?
                .load()
                .map_err(|e| format!("{name}: {e}"))?;
        }
        let windowed = sampled && src.handshakes_from_nginx;
        if windowed {
            self.gate
                .set(1, 1u32, 0)
                .map_err(|e| format!("the detail gate: {e}"))?;
        }
        self.tls_links = Some(TlsLinks {
            libssl: libssl.open,
            windowed,
            open: !windowed,
            links: std::collections::HashMap::new(),
            failed: false,
        });
        src.libssl_sampled = windowed;
        if !windowed {
            for tgid in self.tracked_tgids() {
                self.link_tls_worker(tgid)?;
            }
        }
        Ok(src)
    }

    /// Links libssl's programs to worker `tgid` (they follow the workers: see
    /// [`TlsLinks`]), as the tracker adopts it; a failure is warned about once
    /// and no worker is linked after it.
    pub fn link_tls(&mut self, tgid: u32) {
        if let Err(e) = self.link_tls_worker(tgid) {
            warn!("could not attach libssl's uprobes to worker {tgid} ({e}); libssl's figures leave out the workers not linked");
        }
    }

    /// The tgids the kernel's worker filter holds.
    fn tracked_tgids(&self) -> Vec<u32> {
        self.filter_entries().into_iter().map(|(t, _)| t).collect()
    }

    /// Links libssl's programs for worker `tgid` when they are wanted now and it has
    /// none ([`TlsLinks`]); nothing otherwise.
    ///
    /// Errors: a one-line reason when a program does not attach (then no worker is
    /// linked again: [`TlsLinks::failed`]); the worker's links made before it stay.
    pub(super) fn link_tls_worker(&mut self, tgid: u32) -> Result<(), String> {
        let Some(mut t) = self.tls_links.take() else {
            return Ok(());
        };
        let res = match std::num::NonZeroU32::new(tgid) {
            Some(pid) if t.open && !t.failed && !t.links.contains_key(&tgid) => {
                let mut made = Vec::new();
                let mut res = Ok(());
                for (name, sym) in LIBSSL {
                    match self.uprobe(name).and_then(|p| {
                        p.attach(sym, &t.libssl, UProbeScope::OneProcess(pid))
                            .map_err(|e| format!("uprobe on {sym} in {}: {e}", t.libssl.display()))
                    }) {
                        Ok(id) => made.push((name, id)),
                        Err(e) => {
                            t.failed = true;
                            res = Err(e);
                            break;
                        }
                    }
                }
                t.links.insert(tgid, made);
                res
            }
            _ => Ok(()),
        };
        self.tls_links = Some(t);
        res
    }

    /// Takes worker `tgid`'s libssl links into `out`, to be released off the main loop
    /// (unregistering a uprobe waits for the kernel). Returns how many.
    pub(super) fn unlink_tls_worker(&mut self, tgid: u32, out: &mut Vec<Release>) -> usize {
        let Some(links) = self.tls_links.as_mut().and_then(|t| t.links.remove(&tgid)) else {
            return 0;
        };
        let n = links.len();
        for (name, id) in links {
            match self
                .uprobe(name)
                .and_then(|p| p.take_link(id).map_err(|e| e.to_string()))
            {
                Ok(link) => out.push(Box::new(link)),
                Err(e) => warn!("could not detach {name} from worker {tgid} ({e})"),
            }
        }
        n
    }

    /// Links libssl's programs to every tracked worker for a window that opens
    /// (nothing when they are not in the detail layer). Returns how many links; a
    /// failure is warned about once and the windows go on without them.
    pub(super) fn attach_tls_window(&mut self) -> usize {
        match self.tls_links.as_mut() {
            Some(t) if t.windowed => t.open = true,
            _ => return 0,
        }
        for tgid in self.tracked_tgids() {
            if let Err(e) = self.link_tls_worker(tgid) {
                warn!("could not attach libssl's uprobes for a detail window ({e}); windows go on without libssl's figures");
                break;
            }
        }
        self.tls_links
            .as_ref()
            .map_or(0, |t| t.links.values().map(Vec::len).sum())
    }

    /// Unlinks libssl's programs at a window's end: their links go into `out`, to be
    /// released off the main loop (unregistering a uprobe waits for the kernel).
    /// Returns how many.
    pub(super) fn detach_tls_window(&mut self, out: &mut Vec<Release>) -> usize {
        let tgids: Vec<u32> = match self.tls_links.as_mut() {
            Some(t) if t.windowed => {
                t.open = false;
                t.links.keys().copied().collect()
            }
            _ => return 0,
        };
        tgids
            .into_iter()
            .map(|tgid| self.unlink_tls_worker(tgid, out))
            .sum()
    }

    /// Forgets the handshakes libssl's programs saw start and the calls in progress
    /// (`HS_START`, `HS_CALL`), at a window's start when they are in the detail layer:
    /// a handshake begun before the gap would otherwise be timed across it, or its
    /// `SSL*`, freed and reused unseen, taken for another.
    pub(super) fn reset_tls_state(&mut self) {
        if !self.tls_links.as_ref().is_some_and(|t| t.windowed) {
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
