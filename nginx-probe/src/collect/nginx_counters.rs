//! nginx's own stub_status counters, read from the master's memory.
//!
//! nginx built with `http_stub_status_module` (Debian, Ubuntu, nginx.org packages, the
//! official image) keeps seven counters in shared memory whether or not a `stub_status`
//! location is configured, and exports a pointer to each as a dynamic data symbol:
//! `ngx_stat_accepted`, `ngx_stat_handled`, `ngx_stat_requests` (cumulative) and
//! `ngx_stat_active`, `ngx_stat_reading`, `ngx_stat_writing`, `ngx_stat_waiting`
//! (gauges). Each symbol is 8 bytes holding the address of an `ngx_atomic_t`.
//!
//! [`NginxCounters::open`] finds the symbols in `/proc/<master>/exe` (only the ELF
//! headers and dynamic symbol table are read, through `object::ReadCache`), the load
//! bias from `/proc/<master>/maps`; [`NginxCounters::read`] then preads 14 words from
//! `/proc/<master>/mem`: no per-request cost at all.
//!
//! The master's exit: its memory can no longer be read, and the last ~0.5 s of counts
//! would be lost (trial 13: 43,574 requests for 51,014 when `nginx -s stop` ended the
//! run). The counters live in one shared anonymous mapping (`/dev/zero (deleted)` in
//! `/proc/<pid>/maps`): [`NginxCounters::open`] also opens it through
//! `/proc/<pid>/map_files/<start>-<end>` and holds the file, which keeps the memory, so
//! a read after the exit takes the final counts from it ([`HeldShm`]).
//!
//! Reloads: on this machine (nginx 1.22.1) `nginx -s reload` keeps the pointers and the
//! counts. Should a counter's address change or a cumulative count go backwards (another
//! build, a binary upgrade), the reader rebases on the new value: the totals never go
//! back, at worst one read period's growth is missed, and `rebases` says so.

use std::{
    fs::File,
    io,
    os::unix::fs::{FileExt, MetadataExt},
};

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};

/// Names of the exported pointer symbols, in [`StubRaw`] field order.
pub const SYMBOLS: [&str; 7] = [
    "ngx_stat_accepted",
    "ngx_stat_handled",
    "ngx_stat_requests",
    "ngx_stat_active",
    "ngx_stat_reading",
    "ngx_stat_writing",
    "ngx_stat_waiting",
];

/// Largest dynamic symbol or string table read from the binary, bytes (Debian's nginx
/// has about 40 KB of each): a hostile binary cannot make the probe read gigabytes.
pub(crate) const MAX_DYN_TABLE: u64 = 16 << 20;

/// One read of the seven counters, as nginx holds them: cumulative since nginx started
/// (`accepted`, `handled`, `requests`) and gauges, in the model's shape
/// (`StubCounts::from_words`; `rebases` and `failed_reads` stay 0).
pub type StubRaw = StubCounts;

/// What [`NginxCounters::read`] returns (defined in the model, which snapshots and
/// reports are made of).
pub use crate::model::nginx::StubCounts;

/// nginx's shared memory holding the counters, held open through
/// `/proc/<pid>/map_files` so that it outlives the master: the mapping's `[start, end)`
/// in the master and its offset into the file.
#[derive(Debug)]
struct HeldShm {
    file: File,
    start: u64,
    end: u64,
    pgoff: u64,
}

impl HeldShm {
    /// The shared mapping of `pid` (`maps`) that holds every address of `ptrs`,
    /// opened. Errors: one line (no single shared mapping holds them, map_files
    /// unreadable: it needs CAP_SYS_ADMIN).
    fn open(
        pid: u32,
        maps: &procfs::process::MemoryMaps,
        ptrs: &[u64; 7],
    ) -> Result<HeldShm, String> {
        let m = maps
            .iter()
            .find(|m| ptrs.iter().all(|&p| within(p, m.address.0, m.address.1)))
            .filter(|m| m.perms.contains(procfs::process::MMPermissions::SHARED))
            .ok_or_else(|| "no shared mapping holds every counter".to_string())?;
        let (start, end) = m.address;
        let path = format!("/proc/{pid}/map_files/{start:x}-{end:x}");
        let file = File::open(&path).map_err(|e| format!("cannot open {path} ({e})"))?;
        Ok(HeldShm {
            file,
            start,
            end,
            pgoff: m.offset,
        })
    }

    /// The word at address `addr` of the master's mapping; an address outside it is an
    /// error (a pointer nginx changed since).
    fn read_word(&self, addr: u64) -> io::Result<u64> {
        if !within(addr, self.start, self.end) {
            return Err(io::Error::other("a counter outside the held mapping"));
        }
        read_word(&self.file, addr - self.start + self.pgoff)
    }
}

/// Whether the 8 bytes at `addr` lie in `[start, end)`; false when `addr + 8`
/// overflows (a pointer read from nginx's memory is not trusted).
fn within(addr: u64, start: u64, end: u64) -> bool {
    addr >= start && addr.checked_add(8).is_some_and(|e| e <= end)
}

/// A reader of one master's stub_status counters.
#[derive(Debug)]
pub struct NginxCounters {
    mem: File,
    /// The counters' shared memory, held past the master's exit; None when it could
    /// not be opened (then a read after the exit keeps the last good counts).
    shm: Option<HeldShm>,
    /// Run-time addresses of the seven pointer symbols.
    slots: [u64; 7],
    /// Counter addresses and raw values at the last good read.
    last_ptrs: [u64; 7],
    last: StubRaw,
    acc: StubCounts,
}

/// Addresses (link-time) of the seven symbols in the ELF file `exe`, and the virtual
/// address of the segment that starts at file offset 0. Errors: unreadable or non-ELF
/// file, oversized tables, a symbol missing (nginx built without stub_status).
fn find_symbols(exe: &File) -> Result<([u64; 7], u64), String> {
    let cache = object::ReadCache::new(exe);
    let obj = object::File::parse(&cache).map_err(|e| format!("not an ELF binary ({e})"))?;
    for name in [".dynsym", ".dynstr"] {
        if let Some(s) = obj.section_by_name(name) {
            if s.size() > MAX_DYN_TABLE {
                return Err(format!("{name} is {} bytes, too large to read", s.size()));
            }
        }
    }
    let mut addrs = [0u64; 7];
    for sym in obj.dynamic_symbols() {
        let Ok(name) = sym.name() else { continue };
        if let Some(i) = SYMBOLS.iter().position(|s| *s == name) {
            if sym.is_definition() {
                addrs[i] = sym.address();
            }
        }
    }
    let missing: Vec<&str> = SYMBOLS
        .iter()
        .zip(addrs)
        .filter(|(_, a)| *a == 0)
        .map(|(n, _)| *n)
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "the nginx binary does not export {} (built without http_stub_status_module?)",
            missing.join(", ")
        ));
    }
    let first_vaddr = obj
        .segments()
        .find(|s| s.file_range().0 == 0)
        .map(|s| s.address() & !0xfff)
        .ok_or_else(|| "the binary has no segment at file offset 0".to_string())?;
    Ok((addrs, first_vaddr))
}

/// `/proc/<pid>/maps`, read once for [`load_start`] and [`HeldShm::open`].
fn maps_of(pid: u32) -> Result<procfs::process::MemoryMaps, String> {
    procfs::process::Process::new(pid as i32)
        .and_then(|p| p.maps())
        .map_err(|e| format!("cannot read /proc/{pid}/maps ({e})"))
}

/// Start of the mapping of the binary (device `dev`, inode `ino`) at file offset 0 in
/// `pid`'s address space (`maps`).
fn load_start(
    pid: u32,
    maps: &procfs::process::MemoryMaps,
    dev: u64,
    ino: u64,
) -> Result<u64, String> {
    let (major, minor) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    maps.iter()
        .find(|m| {
            m.inode == ino && m.offset == 0 && m.dev.0 as u64 == major && m.dev.1 as u64 == minor
        })
        .map(|m| m.address.0)
        .ok_or_else(|| format!("the binary is not mapped in /proc/{pid}/maps"))
}

fn read_word(mem: &File, addr: u64) -> io::Result<u64> {
    let mut b = [0u8; 8];
    mem.read_exact_at(&mut b, addr)?;
    Ok(u64::from_ne_bytes(b))
}

impl NginxCounters {
    /// Opens the counters of master `pid` and takes the first read (the zero point of
    /// [`StubCounts`]). Errors: a one-line reason (symbols not exported, binary not
    /// mapped, memory unreadable).
    pub fn open(pid: u32) -> Result<NginxCounters, String> {
        let exe_path = format!("/proc/{pid}/exe");
        let exe = File::open(&exe_path).map_err(|e| format!("cannot open {exe_path} ({e})"))?;
        let meta = exe
            .metadata()
            .map_err(|e| format!("cannot stat {exe_path} ({e})"))?;
        let (addrs, first_vaddr) = find_symbols(&exe)?;
        let maps = maps_of(pid)?;
        let start = load_start(pid, &maps, meta.dev(), meta.ino())?;
        let bias = start.wrapping_sub(first_vaddr);
        let mem = File::open(format!("/proc/{pid}/mem"))
            .map_err(|e| format!("cannot open /proc/{pid}/mem ({e})"))?;
        let mut me = NginxCounters {
            mem,
            shm: None,
            slots: addrs.map(|a| a.wrapping_add(bias)),
            last_ptrs: [0; 7],
            last: StubRaw::default(),
            acc: StubCounts::default(),
        };
        let (ptrs, raw) = me
            .read_raw()
            .map_err(|e| format!("cannot read nginx's counters in /proc/{pid}/mem ({e})"))?;
        me.last_ptrs = ptrs;
        me.last = raw;
        me.acc.take_gauges(&raw);
        me.shm = HeldShm::open(pid, &maps, &ptrs)
            .map_err(|e| log::debug!("nginx's counters are not held past the master's exit: {e}"))
            .ok();
        Ok(me)
    }

    /// Reads the pointers, then the counters they point to.
    fn read_raw(&self) -> io::Result<([u64; 7], StubRaw)> {
        let mut ptrs = [0u64; 7];
        let mut vals = [0u64; 7];
        for i in 0..7 {
            ptrs[i] = read_word(&self.mem, self.slots[i])?;
            if ptrs[i] == 0 {
                return Err(io::Error::other("a counter pointer is NULL"));
            }
            vals[i] = read_word(&self.mem, ptrs[i])?;
        }
        Ok((ptrs, StubCounts::from_words(vals)))
    }

    /// The counters at the last good read's addresses, from the held shared memory:
    /// the final counts once the master has exited.
    fn read_held(&self) -> io::Result<([u64; 7], StubRaw)> {
        let shm = self
            .shm
            .as_ref()
            .ok_or_else(|| io::Error::other("not held"))?;
        let mut vals = [0u64; 7];
        for (v, &p) in vals.iter_mut().zip(&self.last_ptrs) {
            *v = shm.read_word(p)?;
        }
        Ok((self.last_ptrs, StubCounts::from_words(vals)))
    }

    /// Reads the counters now and returns the counts since [`NginxCounters::open`].
    /// When the master's memory cannot be read (it exited), from the held shared
    /// memory; a read that fails there too keeps the last good counts and is counted.
    pub fn read(&mut self) -> StubCounts {
        match self.read_raw().or_else(|_| self.read_held()) {
            Ok((ptrs, raw)) => self.advance(ptrs, raw),
            Err(_) => self.acc.failed_reads += 1,
        }
        self.acc
    }

    /// Adds the growth from the last read to `raw`; rebases when an address changed or
    /// a cumulative count went backwards.
    fn advance(&mut self, ptrs: [u64; 7], raw: StubRaw) {
        self.acc.advance(&self.last, &raw, ptrs != self.last_ptrs);
        self.last_ptrs = ptrs;
        self.last = raw;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader() -> NginxCounters {
        NginxCounters {
            mem: File::open("/dev/null").unwrap(),
            shm: None,
            slots: [0; 7],
            last_ptrs: [1, 2, 3, 4, 5, 6, 7],
            last: StubRaw {
                accepted: 10,
                handled: 10,
                requests: 20,
                ..StubRaw::default()
            },
            acc: StubCounts::default(),
        }
    }

    #[test]
    fn counts_grow_and_never_go_back() {
        let mut r = reader();
        let p = [1, 2, 3, 4, 5, 6, 7];
        r.advance(
            p,
            StubRaw {
                accepted: 15,
                handled: 14,
                requests: 40,
                active: 3,
                ..StubRaw::default()
            },
        );
        assert_eq!(
            (r.acc.accepted, r.acc.handled, r.acc.requests, r.acc.active),
            (5, 4, 20, 3)
        );
        // A reset (counts lower than before): rebased, nothing subtracted.
        r.advance(
            p,
            StubRaw {
                accepted: 2,
                handled: 2,
                requests: 2,
                ..StubRaw::default()
            },
        );
        assert_eq!((r.acc.requests, r.acc.rebases), (20, 1));
        r.advance(
            p,
            StubRaw {
                accepted: 3,
                handled: 3,
                requests: 9,
                ..StubRaw::default()
            },
        );
        assert_eq!((r.acc.accepted, r.acc.requests), (6, 27));
        // New addresses (new shared memory): rebased, even if the values look higher.
        let mut q = p;
        q[2] = 99;
        r.advance(
            q,
            StubRaw {
                accepted: 100,
                handled: 100,
                requests: 1000,
                ..StubRaw::default()
            },
        );
        assert_eq!((r.acc.requests, r.acc.rebases), (27, 2));
    }

    #[test]
    fn a_binary_without_the_symbols_is_refused_with_the_reason() {
        // The test binary itself is an ELF file without ngx_stat_* symbols.
        let me = File::open("/proc/self/exe").unwrap();
        let e = find_symbols(&me).unwrap_err();
        assert!(e.contains("ngx_stat_requests"), "{e}");
        assert!(e.contains("http_stub_status_module"), "{e}");
        let e = find_symbols(&File::open("/dev/null").unwrap()).unwrap_err();
        assert!(e.starts_with("not an ELF binary"), "{e}");
    }
}
