//! nginx's reasons for the QUIC connections it ends: the uprobes count by the address
//! of a string literal in nginx's binary (`nginx_probe_common::quic`); this reads each
//! address once from the memory of the master (or a worker: forks of it, the same
//! literals at the same addresses) and keeps it. What is read is nginx's memory: only
//! printable ASCII is kept, at most [`MAX_REASON`] bytes.

use std::{collections::BTreeMap, fs::File, os::unix::fs::FileExt};

use nginx_probe_common::quic::{
    QuicEndKey, CALL_FINALIZE, CALL_IDLE_TIMEOUT, CALL_OVERFLOW, CALL_SHUTDOWN, CALL_STARTED,
};

use crate::model::quic::{QuicEndCall, QuicEndCounts, QuicEndId};

/// Bytes of a reason read at most.
pub const MAX_REASON: usize = 96;
/// Reasons kept at most (the map holds 64 kinds).
const MAX_KEPT: usize = 64;

/// The reason's text from the bytes at its address: up to the NUL, printable ASCII
/// kept and anything else as `?`; `…` when no NUL came within [`MAX_REASON`].
pub fn reason_text(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0);
    let s: String = bytes[..end.unwrap_or(bytes.len())]
        .iter()
        .map(|&b| {
            if (0x20..0x7f).contains(&b) {
                b as char
            } else {
                '?'
            }
        })
        .collect();
    if end.is_none() {
        format!("{s}…")
    } else {
        s
    }
}

/// Reason addresses read so far -> their text.
#[derive(Default)]
pub struct QuicReasons {
    known: BTreeMap<u64, String>,
}

impl QuicReasons {
    /// The text at `addr` in one of `pids`' memory (`/proc/<pid>/mem`), read once and
    /// kept; `unread (0x...)` when none could be read (tried again next time).
    fn text(&mut self, addr: u64, pids: &[u32]) -> String {
        if let Some(t) = self.known.get(&addr) {
            return t.clone();
        }
        let mut buf = [0u8; MAX_REASON];
        for pid in pids {
            let Ok(f) = File::open(format!("/proc/{pid}/mem")) else {
                continue;
            };
            // A literal near the end of a mapping reads short: take what came.
            let n = match f.read_at(&mut buf, addr) {
                Ok(n) if n > 0 => n,
                _ => match f.read_at(&mut buf[..16], addr) {
                    Ok(n) if n > 0 => n,
                    _ => continue,
                },
            };
            let t = reason_text(&buf[..n]);
            if self.known.len() < MAX_KEPT {
                self.known.insert(addr, t.clone());
            }
            return t;
        }
        format!("unread ({addr:#x})")
    }

    /// The uprobes' counts (`Probe::quic_ends`) by kind, reasons read from `pids`'
    /// memory (the master first); Err: why not counted.
    pub fn counts(
        &mut self,
        read: Result<Vec<(QuicEndKey, u64)>, &str>,
        pids: &[u32],
    ) -> QuicEndCounts {
        let mut out = BTreeMap::new();
        for (k, n) in read.map_err(str::to_string)? {
            let call = match k.call {
                CALL_SHUTDOWN => QuicEndCall::Shutdown,
                CALL_FINALIZE => QuicEndCall::Close,
                CALL_IDLE_TIMEOUT => QuicEndCall::IdleTimeout,
                CALL_STARTED => QuicEndCall::Started,
                CALL_OVERFLOW => QuicEndCall::Other,
                _ => continue,
            };
            let reason =
                (k.reason != 0 && call != QuicEndCall::Other).then(|| self.text(k.reason, pids));
            let id = QuicEndId {
                call,
                code: k.code,
                reason,
            };
            *out.entry(id).or_insert(0) += n;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_printable_ascii_up_to_its_nul() {
        assert_eq!(
            reason_text(b"reached maximum number of requests\0junk"),
            "reached maximum number of requests"
        );
        assert_eq!(reason_text(b"a\x1b[31mb\0"), "a?[31mb");
        assert_eq!(reason_text(b"no end"), "no end…");
    }

    /// This process's own literal, read through /proc/self/mem as nginx's would be;
    /// an address nothing maps reads as unread, and is not kept.
    #[test]
    fn reasons_are_read_from_memory_once() {
        static LIT: &[u8] = b"keepalive timeout\0";
        let me = std::process::id();
        let mut r = QuicReasons::default();
        let key = |reason, call| QuicEndKey {
            reason,
            code: 0x100,
            call,
            _pad: 0,
        };
        let c = r
            .counts(
                Ok(vec![
                    (key(LIT.as_ptr() as u64, CALL_FINALIZE), 3),
                    (key(8, CALL_SHUTDOWN), 2),
                    (key(0, CALL_OVERFLOW), 0),
                ]),
                &[me],
            )
            .unwrap();
        let id = |call, reason: &str| QuicEndId {
            call,
            code: 0x100,
            reason: Some(reason.into()),
        };
        assert_eq!(
            c.get(&id(QuicEndCall::Close, "keepalive timeout")),
            Some(&3)
        );
        assert_eq!(c.get(&id(QuicEndCall::Shutdown, "unread (0x8)")), Some(&2));
        assert_eq!(r.known.len(), 1);
        assert_eq!(r.counts(Err("no QUIC"), &[me]), Err("no QUIC".to_string()));
    }
}
