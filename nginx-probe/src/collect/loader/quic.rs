//! QUIC connections nginx ends, from its own calls: the uprobes on
//! `ngx_quic_shutdown_connection` and `ngx_quic_finalize_connection` (see
//! `nginx_probe_common::quic`) count them by (call, error code, reason address), the one
//! on `ngx_quic_close_connection` its silent closes at the QUIC idle timeout, the one
//! on `ngx_http_v3_init` the connections started; the tracker reads the map at each
//! snapshot.

use std::path::Path;

use aya::maps::HashMap;
use nginx_probe_common::quic::{self, QuicEndKey, OVERFLOW_KEY};

use super::{symbols, Probe};

impl Probe {
    /// Attaches the four uprobes in `binary` (the master's `/proc/<pid>/exe`) when it
    /// has their symbols (nginx 1.25+ built with QUIC), and inserts the map's overflow
    /// entry. Otherwise QUIC ends stay unknown: [`Probe::quic_ends`] gives the reason
    /// (nginx without QUIC: no QUIC connection to end either).
    pub fn attach_quic_ends(&mut self, binary: &Path) {
        let symbols = [
            quic::SHUTDOWN_SYMBOL,
            quic::FINALIZE_SYMBOL,
            quic::CLOSE_SYMBOL,
            quic::STARTED_SYMBOL,
        ];
        let attached = match symbols::symbols_in(binary, &symbols) {
            Err(e) => Err(e),
            Ok(s) if s.found.iter().any(Option::is_none) => Err(format!(
                "nginx's binary has no {} (built without QUIC)",
                symbols.join(", ")
            )),
            Ok(_) => self
                .attach_uprobe(quic::PROG_SHUTDOWN, quic::SHUTDOWN_SYMBOL, binary)
                .and_then(|()| {
                    self.attach_uprobe(quic::PROG_FINALIZE, quic::FINALIZE_SYMBOL, binary)
                })
                .and_then(|()| self.attach_uprobe(quic::PROG_CLOSE, quic::CLOSE_SYMBOL, binary))
                .and_then(|()| self.attach_uprobe(quic::PROG_STARTED, quic::STARTED_SYMBOL, binary))
                .and_then(|()| {
                    let map = self
                        .ebpf
                        .take_map(quic::MAP)
                        .ok_or_else(|| format!("the eBPF object has no map {}", quic::MAP))?;
                    let mut m: HashMap<_, QuicEndKey, u64> =
                        HashMap::try_from(map).map_err(|e| e.to_string())?;
                    m.insert(OVERFLOW_KEY, 0, 0).map_err(|e| e.to_string())?;
                    Ok(m)
                }),
        };
        if let Err(e) = &attached {
            log::info!("QUIC connections nginx ends are not counted ({e})");
        }
        self.quic_ends = attached;
    }

    /// Every (call, error code, reason address) counted since attach, at most
    /// [`quic::MAX_ENDS`]; Err: why they are not counted. An entry that fails to read
    /// is left out (read again at the next snapshot).
    pub fn quic_ends(&self) -> Result<Vec<(QuicEndKey, u64)>, &str> {
        let map = self.quic_ends.as_ref().map_err(String::as_str)?;
        Ok(map
            .iter()
            .filter_map(Result::ok)
            .take(quic::MAX_ENDS as usize)
            .collect())
    }
}
