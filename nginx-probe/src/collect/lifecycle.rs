//! The client connection lifecycle programs (see `nginx_probe_common::lifecycle`):
//! what they need patched in (BTF offsets of `tcp_sock.lsndtime`,
//! `inet_connection_sock.icsk_ack.lrcvtime` and `task_struct.flags`, the kernel's HZ, the `struct sock` and
//! `sk_buff` offsets of the raw tracepoints), attaching one of the two program sets
//! (the raw tracepoints, or else the perf-event tracepoints after checking their record
//! layouts against tracefs), the port index map, and reading their per-CPU counters
//! into a [`LifecycleRaw`].

use std::{collections::BTreeMap, io::Read, path::Path};

use aya::{
    maps::{Array, HashMap as BpfHashMap, MapData, PerCpuArray},
    programs::{RawTracePoint, TracePoint},
    Ebpf,
};
use log::warn;
use nginx_probe_common::lifecycle::{
    self as lc, names,
    up::{PeerKey, UpPeerStats, UP_MAX_PEERS},
    LC_MAX_PORTS, LC_PER_PORT, RAW_OFF_COUNT, RAW_OFF_PATHS,
};

use crate::{
    collect::{btf::Btf, tracefs},
    error::ProbeError,
    model::connections::{LifecycleMeta, LifecycleRaw},
};

/// Values patched into the lifecycle programs' globals.
#[derive(Clone, Debug)]
pub struct Globals {
    /// Offset of `tcp_sock.lsndtime`, bytes (`u64::MAX`: unknown).
    pub lsndtime: u64,
    /// Offset of `inet_connection_sock.icsk_ack.lrcvtime`, bytes.
    pub lrcvtime: u64,
    /// HZ (0: unknown).
    pub hz: u64,
    /// Offset of `tcp_sock.bytes_received`, bytes (`u64::MAX`: unknown).
    pub bytes_received: u64,
    /// Offset of `task_struct.flags`, bytes (`u64::MAX`: unknown, and then closes by
    /// exiting workers count as nginx's; `meta.worker_exit_unknown` says so).
    pub task_flags: u64,
    /// The raw tracepoints' struct offsets (`lc::raw_off`; all `u64::MAX` when one is
    /// unknown, and `meta.raw_unavailable` says why).
    pub raw_off: [u64; RAW_OFF_COUNT],
    /// HZ and its source; why idle time is not measured.
    pub meta: LifecycleMeta,
}

/// Reads the offsets from `btf` (the kernel's, or why it could not be read) and HZ.
pub fn globals(btf: Result<&Btf, &String>) -> Globals {
    let (offs, why) = match btf {
        Ok(b) => {
            let s = b.member_offset("tcp_sock", "lsndtime");
            let r = b.member_offset("inet_connection_sock", "icsk_ack.lrcvtime");
            match (s, r) {
                (Some(s), Some(r)) => (Some((s, r)), None),
                _ => (
                    None,
                    Some("tcp_sock.lsndtime or icsk_ack.lrcvtime not in the kernel's BTF".into()),
                ),
            }
        }
        Err(e) => (None, Some(format!("no kernel BTF ({e})"))),
    };
    let hz = kernel_hz();
    let why = why.or_else(|| {
        hz.is_none()
            .then(|| "the kernel's HZ is unknown (no CONFIG_HZ, jiffies not readable)".into())
    });
    let (lsndtime, lrcvtime) = offs.unwrap_or((u64::MAX, u64::MAX));
    let task_flags = match btf {
        Ok(b) => b.member_offset("task_struct", "flags").ok_or_else(|| {
            "task_struct.flags not in the kernel's BTF: closes by exiting workers count as nginx's".to_string()
        }),
        Err(e) => Err(format!(
            "no kernel BTF ({e}): closes by exiting workers count as nginx's"
        )),
    };
    let raw = match btf {
        Ok(b) => crate::collect::btf::offsets_of(b, &RAW_OFF_PATHS),
        Err(e) => Err(format!("no kernel BTF ({e})")),
    };
    let bytes_received = match btf {
        Ok(b) => b
            .member_offset("tcp_sock", "bytes_received")
            .ok_or_else(|| "tcp_sock.bytes_received not in the kernel's BTF".to_string()),
        Err(e) => Err(format!("no kernel BTF ({e})")),
    };
    Globals {
        lsndtime,
        lrcvtime,
        bytes_received: *bytes_received.as_ref().unwrap_or(&u64::MAX),
        hz: hz.as_ref().map(|h| h.0).unwrap_or(0),
        task_flags: *task_flags.as_ref().unwrap_or(&u64::MAX),
        raw_off: *raw.as_ref().unwrap_or(&[u64::MAX; RAW_OFF_COUNT]),
        meta: LifecycleMeta {
            hz,
            idle_unknown: why,
            raw_unavailable: raw.err(),
            worker_exit_unknown: task_flags.err(),
            draining_unknown: Some(format!(
                "the uprobe on {} was not attached",
                nginx_probe_common::lifecycle::worker::DRAIN_SYMBOL
            )),
            tls_close_unknown: Some(format!(
                "the uprobe on {} was not attached",
                nginx_probe_common::lifecycle::TLS_SHUTDOWN_SYMBOL
            )),
            fin_unread_unknown: Some("the rule was not turned on".into()),
            without_data_unknown: bytes_received.err(),
            ..Default::default()
        },
    }
}

/// `CONFIG_HZ=N` in a kernel config text.
pub fn parse_config_hz(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ="))
        .and_then(|v| v.trim().parse().ok())
        .filter(|&hz| (24..=10_000).contains(&hz))
}

/// The kernel's HZ and where it was read: `/boot/config-<release>`, then
/// `/proc/config.gz`, then measured from `/proc/timer_list`'s `jiffies:` over 200 ms
/// (snapped to 100, 250, 300 or 1000 when within 5%).
pub fn kernel_hz() -> Option<(u64, String)> {
    const MAX: u64 = 4 << 20;
    let release = nix::sys::utsname::uname()
        .ok()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default();
    let boot = format!("/boot/config-{release}");
    if let Ok(f) = std::fs::File::open(&boot) {
        let mut s = String::new();
        if f.take(MAX).read_to_string(&mut s).is_ok() {
            if let Some(hz) = parse_config_hz(&s) {
                return Some((hz, format!("{boot}: CONFIG_HZ")));
            }
        }
    }
    if let Ok(f) = std::fs::File::open("/proc/config.gz") {
        let mut s = String::new();
        if flate2::read::GzDecoder::new(f)
            .take(MAX)
            .read_to_string(&mut s)
            .is_ok()
        {
            if let Some(hz) = parse_config_hz(&s) {
                return Some((hz, "/proc/config.gz: CONFIG_HZ".into()));
            }
        }
    }
    let jiffies = || -> Option<u64> {
        let f = std::fs::File::open("/proc/timer_list").ok()?;
        let mut s = String::new();
        f.take(1 << 20).read_to_string(&mut s).ok()?;
        s.lines()
            .find_map(|l| l.strip_prefix("jiffies: "))
            .and_then(|v| v.trim().parse().ok())
    };
    let t0 = std::time::Instant::now();
    let j0 = jiffies()?;
    std::thread::sleep(std::time::Duration::from_millis(200));
    let j1 = jiffies()?;
    let rate = j1.saturating_sub(j0) as f64 / t0.elapsed().as_secs_f64();
    [100u64, 250, 300, 1000]
        .into_iter()
        .find(|&hz| (rate - hz as f64).abs() <= 0.05 * hz as f64)
        .map(|hz| (hz, "measured: /proc/timer_list jiffies over 200 ms".into()))
}

/// `sk_rst_reason` names by value from `tcp:tcp_send_reset`'s format (its
/// `__print_symbolic(REC->reason, { 0, "NOT_SPECIFIED" }, ...)`); names are kept to
/// `[A-Z0-9_]`, at most 40 characters, and [`lc::LC_REASONS`] values.
pub fn parse_reason_names(format: &str) -> Vec<String> {
    let mut out = vec![String::new(); lc::LC_REASONS];
    let Some(at) = format.find("REC->reason,") else {
        return Vec::new();
    };
    let mut rest = &format[at..];
    while let Some(open) = rest.find('{') {
        rest = &rest[open + 1..];
        let Some(close) = rest.find('}') else { break };
        let item = &rest[..close];
        rest = &rest[close + 1..];
        let mut parts = item.splitn(2, ',');
        let (Some(n), Some(name)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Ok(n) = n.trim().parse::<usize>() else {
            continue;
        };
        let name: String = name
            .trim()
            .trim_matches('"')
            .chars()
            .filter(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .take(40)
            .collect();
        if n < out.len() && !name.is_empty() {
            out[n] = name;
        }
        if rest.trim_start().starts_with(')') {
            break;
        }
    }
    out.into_iter()
        .enumerate()
        .map(|(i, n)| {
            if n.is_empty() {
                format!("reason_{i}")
            } else {
                n
            }
        })
        .collect()
}

/// Record offsets the programs read, per tracepoint: (field, offset).
const LAYOUT: &[(&str, &[(&str, u64)])] = &[
    (
        "inet_sock_set_state",
        &[
            ("skaddr", 8),
            ("oldstate", 16),
            ("newstate", 20),
            ("sport", 24),
            ("dport", 26),
            ("family", 28),
            ("protocol", 30),
            ("daddr[4]", 36),
            ("daddr_v6[16]", 56),
        ],
    ),
    (
        "tcp_send_reset",
        &[
            ("skaddr", 16),
            ("state", 24),
            ("reason", 28),
            ("saddr[28]", 32),
        ],
    ),
    ("tcp_receive_reset", &[("sport", 16)]),
    ("tcp_destroy_sock", &[("skaddr", 8), ("sport", 16)]),
];

/// Loads and attaches every raw-tracepoint program of [`names::RAW_PROGS`], or none:
/// on the first refusal the ones attached are unloaded (detached) again.
///
/// Errors: the program or the raw tracepoint missing, or the kernel refusing it (a
/// tracepoint with fewer arguments than the program reads), as one line; Err(Err)
/// when this process ran out of file descriptors (no fact about the kernel).
fn attach_raw(ebpf: &mut Ebpf) -> Result<(), Result<String, ProbeError>> {
    let mut done: Vec<&str> = Vec::new();
    for &(prog, tp) in names::RAW_PROGS {
        let res = ebpf
            .program_mut(prog)
            .ok_or_else(|| ProbeError::Missing(format!("program {prog}")))
            .and_then(|p| {
                let p: &mut RawTracePoint = p.try_into()?;
                p.load()?;
                p.attach(tp)?;
                Ok(())
            });
        if let Err(e) = res {
            for &d in done.iter().chain([&prog]) {
                let p: Option<&mut RawTracePoint> =
                    ebpf.program_mut(d).and_then(|p| p.try_into().ok());
                if let Some(p) = p {
                    let _ = p.unload();
                }
            }
            if crate::collect::fd_limit::is_exhaustion(&e) {
                return Err(Err(crate::collect::fd_limit::loading_programs()));
            }
            return Err(Ok(format!("raw tracepoint {tp} refused: {e}")));
        }
        done.push(prog);
    }
    Ok(())
}

/// The lifecycle maps and what was attached.
pub struct Lifecycle {
    ports: Array<MapData, u32>,
    stats: PerCpuArray<MapData, u64>,
    /// Upstream peer -> counters (`LC_UP_PEERS`).
    peers: BpfHashMap<MapData, PeerKey, UpPeerStats>,
    /// Port -> index given in `LC_PORTS`.
    index: BTreeMap<u16, u32>,
    /// HZ, idle-time availability, reset reason names, ports not counted.
    pub meta: LifecycleMeta,
    /// Programs attached.
    pub attached: Vec<&'static str>,
    /// Whether the kernel's BTF has every `struct sock` offset of `lc::raw_off` (they
    /// are patched in whichever tracepoint set is attached; the `ngx_ssl_shutdown`
    /// uprobe reads the socket with them).
    pub raw_off_known: bool,
}

impl Lifecycle {
    /// Takes the lifecycle maps out of the loaded object.
    pub fn take(ebpf: &mut Ebpf, meta: LifecycleMeta) -> Result<Lifecycle, ProbeError> {
        let mut take = |name: &str| {
            ebpf.take_map(name)
                .ok_or_else(|| ProbeError::Missing(format!("map {name}")))
        };
        let mut peers: BpfHashMap<MapData, PeerKey, UpPeerStats> =
            BpfHashMap::try_from(take(names::LC_UP_PEERS)?)?;
        // The other peers' entry (family 0), there before any peer fills the map.
        peers.insert(PeerKey::default(), UpPeerStats::default(), 0)?;
        Ok(Lifecycle {
            ports: Array::try_from(take(names::LC_PORTS)?)?,
            stats: PerCpuArray::try_from(take(names::LC_STATS)?)?,
            peers,
            index: BTreeMap::new(),
            raw_off_known: meta.raw_unavailable.is_none(),
            meta,
            attached: Vec::new(),
        })
    }

    /// Attaches one set of lifecycle programs: the raw tracepoints when their struct
    /// offsets are known and the kernel takes all four, else every perf-event
    /// tracepoint program whose tracepoint exists with the record layout it reads;
    /// nothing when the user left them out (`meta.not_traced`). Returns the ones left
    /// out (as "category:event (why)").
    ///
    /// Errors: [`ProbeError::FdLimit`] when this process ran out of file descriptors
    /// (then nothing is taken for the kernel refusing a program).
    pub fn attach(&mut self, ebpf: &mut Ebpf, root: &Path) -> Result<Vec<String>, ProbeError> {
        if self.meta.not_traced.is_some() {
            return Ok(Vec::new());
        }
        if self.meta.raw_unavailable.is_none() {
            match attach_raw(ebpf) {
                Ok(()) => {
                    self.meta.raw = true;
                    self.meta.attached = true;
                    self.attached = names::RAW_PROGS.iter().map(|p| p.0).collect();
                    let format = root.join("events/tcp/tcp_send_reset/format");
                    if let Ok(format) = std::fs::read_to_string(format) {
                        self.meta.reason_names = parse_reason_names(&format);
                    }
                    return Ok(Vec::new());
                }
                Err(Err(e)) => return Err(e),
                Err(Ok(e)) => {
                    warn!("connection lifecycle from the perf-event tracepoints ({e})");
                    self.meta.raw_unavailable = Some(e);
                }
            }
        }
        self.attach_perf(ebpf, root)
    }

    /// Attaches the perf-event tracepoint set (see [`Lifecycle::attach`]).
    fn attach_perf(&mut self, ebpf: &mut Ebpf, root: &Path) -> Result<Vec<String>, ProbeError> {
        let mut missing = Vec::new();
        for &(prog, cat, event) in names::PROGS {
            let format =
                std::fs::read_to_string(root.join("events").join(cat).join(event).join("format"));
            let Ok(format) = format else {
                missing.push(format!("{cat}:{event}"));
                continue;
            };
            let want = LAYOUT.iter().find(|(e, _)| *e == event).map(|(_, f)| *f);
            let bad = want
                .unwrap_or(&[])
                .iter()
                .find(|(f, off)| tracefs::field_offset(&format, f) != Some(*off));
            if let Some((f, off)) = bad {
                warn!("{cat}:{event}: field {f} is not at offset {off} on this kernel; connection lifecycle counts leave it out");
                missing.push(format!("{cat}:{event} (record layout)"));
                continue;
            }
            if event == "tcp_send_reset" {
                self.meta.reason_names = parse_reason_names(&format);
            }
            let res = ebpf
                .program_mut(prog)
                .ok_or_else(|| ProbeError::Missing(format!("program {prog}")))
                .and_then(|p| {
                    let p: &mut TracePoint = p.try_into()?;
                    p.load()?;
                    p.attach(cat, event)?;
                    Ok(())
                });
            match res {
                Ok(()) => {
                    self.attached.push(prog);
                    self.meta.attached = true;
                }
                Err(e) if crate::collect::fd_limit::is_exhaustion(&e) => {
                    return Err(crate::collect::fd_limit::loading_programs())
                }
                Err(e) => {
                    warn!("could not attach {cat}:{event} ({e}); connection lifecycle counts leave it out");
                    missing.push(format!("{cat}:{event}"));
                }
            }
        }
        Ok(missing)
    }

    /// Counts the client connections of `ports` (nginx's listening ports) from now on;
    /// ports beyond [`LC_MAX_PORTS`] are counted in `meta.ports_not_counted`.
    pub fn add_ports(&mut self, ports: &[u16]) -> Result<(), ProbeError> {
        for &p in ports {
            if self.index.contains_key(&p) {
                continue;
            }
            let idx = self.index.len() as u32;
            if idx >= LC_MAX_PORTS {
                self.meta.ports_not_counted += 1;
                self.index.insert(p, u32::MAX);
                continue;
            }
            self.ports.set(p as u32, idx + 1, 0)?;
            self.index.insert(p, idx);
        }
        Ok(())
    }

    /// Cumulative counters of every counted port, summed over CPUs (the idle maximum
    /// and inverted minimum combined by max). Empty when nothing is attached.
    pub fn read(&self) -> Result<LifecycleRaw, ProbeError> {
        let mut raw = self.read_some(|_| true)?;
        if !self.attached.is_empty() {
            raw.peers = self.read_peers();
        }
        Ok(raw)
    }

    /// The upstream peers' cumulative counters (at most `UP_MAX_PEERS` entries; the
    /// other peers' one only when it counted anything). An entry that cannot be read
    /// (removed meanwhile: never, the kernel only adds) is left out.
    fn read_peers(&self) -> BTreeMap<PeerKey, Vec<u64>> {
        self.peers
            .iter()
            .take(UP_MAX_PEERS as usize)
            .filter_map(Result::ok)
            .filter(|(k, v)| k.family != 0 || v.c.iter().any(|&n| n > 0))
            .map(|(k, v)| (k, v.c.to_vec()))
            .collect()
    }

    /// [`Lifecycle::read`] of the two counters of nginx's listener closes only
    /// (`LISTENERS_CLOSED`, `RST_CLOSED_LISTENER`; the others left 0): what the
    /// tracker reads every refresh for `model::listener_closes`.
    pub fn read_listener_closes(&self) -> Result<LifecycleRaw, ProbeError> {
        self.read_some(|i| i == lc::LISTENERS_CLOSED || i == lc::RST_CLOSED_LISTENER)
    }

    /// The counters `which` picks of every counted port (the others 0).
    fn read_some(&self, which: impl Fn(usize) -> bool) -> Result<LifecycleRaw, ProbeError> {
        let mut out = LifecycleRaw::default();
        if self.attached.is_empty() {
            return Ok(out);
        }
        for (&port, &idx) in &self.index {
            if idx >= LC_MAX_PORTS {
                continue;
            }
            let mut v = vec![0u64; LC_PER_PORT];
            for (i, o) in v.iter_mut().enumerate().filter(|(i, _)| which(*i)) {
                let cpus = self.stats.get(&(idx * LC_PER_PORT as u32 + i as u32), 0)?;
                *o = if lc::COMBINED_BY_MAX.contains(&i) {
                    cpus.iter().copied().max().unwrap_or(0)
                } else {
                    cpus.iter().sum()
                };
            }
            out.ports.insert(port, v);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_hz() {
        assert_eq!(
            parse_config_hz("# CONFIG_HZ_100 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n"),
            Some(250)
        );
        assert_eq!(parse_config_hz("CONFIG_HZ=0\n"), None);
        assert_eq!(parse_config_hz(""), None);
    }

    #[test]
    fn reason_names_from_the_format() {
        let f = r#"print fmt: "reason=%s", __print_symbolic(REC->reason, { 0, "NOT_SPECIFIED" }, { 1, "NO_SOCKET" }, { 2, "\x1b[2J" }, { 99, "BIG" })"#;
        let n = parse_reason_names(f);
        assert_eq!(n.len(), lc::LC_REASONS);
        assert_eq!(n[0], "NOT_SPECIFIED");
        assert_eq!(n[1], "NO_SOCKET");
        assert_eq!(n[2], "12J");
        assert_eq!(n[3], "reason_3");
        assert!(parse_reason_names("no reasons").is_empty());
    }
}
