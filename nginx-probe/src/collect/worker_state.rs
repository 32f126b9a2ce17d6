//! Worker lifecycle from `/proc` and the kernel's exit records, every refresh: each
//! worker's reload generation, its state from nginx's title (serving or shutting down,
//! and since which refresh), the memory and TCP connections a draining worker still
//! holds, and how each worker exited (see [`crate::model::worker_lifecycle`]).
//!
//! Generations: workers a reload starts are forked in one loop by the master, so their
//! start times (`/proc/<pid>/stat` starttime) lie within [`BATCH_TICKS`]; a worker
//! started later is a new generation unless it replaces a worker of the newest
//! generation that died (nginx respawns a worker that exited abnormally).
//!
//! Everything read here is bounded ([`TITLE_MAX`], [`TCP_TABLE_MAX`], [`FDS_MAX`]); a
//! read that fails leaves the value unknown.

use std::{
    collections::{BTreeMap, BTreeSet, VecDeque},
    io::Read,
};

use nginx_probe_common::exits::{decode, Exit};

use crate::{
    collect::loader::Probe,
    model::{
        listener_closes::ReloadSeen,
        worker_lifecycle::{
            ExitCounts, ExitHistory, SignalExit, WorkerExit, WorkerLifecycle, WorkerState,
            MAX_SIGNAL_EXITS_LISTED,
        },
        WorkerInfo,
    },
};

/// Bytes of `/proc/<pid>/cmdline` read for the title (nginx's longest worker title,
/// `nginx: worker process is shutting down`, is 38).
pub const TITLE_MAX: u64 = 256;

/// Bytes read of each of `/proc/<pid>/net/tcp` and `tcp6`; a larger table (about
/// 100,000 sockets) leaves connection counts unknown.
pub const TCP_TABLE_MAX: u64 = 16 << 20;

/// fds of one draining worker looked at; more leave its connection counts unknown.
pub const FDS_MAX: usize = 1 << 20;

/// Workers whose start times lie within this many clock ticks of the newest
/// generation's first worker belong to it (one reload forks its workers in one loop).
pub const BATCH_TICKS: u64 = 20;

/// Exits kept for the period counts of interval and window reports (older ones are
/// still in the totals since attach).
pub const MAX_EXIT_RECORDS: usize = 1024;

/// nginx's title of a worker told to stop.
const TITLE_SHUTTING_DOWN: &[u8] = b"nginx: worker process is shutting down";
const TITLE_WORKER: &[u8] = b"nginx: worker process";

/// What is known of one worker.
#[derive(Clone, Debug, Default)]
struct Life {
    generation: u32,
    state: Option<WorkerState>,
    since: Option<f64>,
    before_attach: bool,
    rss: Option<u64>,
    conns: Option<(u64, u64)>,
    exit: Option<WorkerExit>,
    exit_done: bool,
    /// Whether it had begun its graceful shutdown when its slot was retired
    /// ([`Lifecycle::note_drained`]); None: not known.
    drained: Option<bool>,
}

/// One exit, for period counts.
#[derive(Clone, Debug)]
struct ExitRecord {
    pid: u32,
    exit: Option<WorkerExit>,
    seen: f64,
    replaced_by: Option<u32>,
}

/// The lifecycle of one master's workers.
#[derive(Debug, Default)]
pub struct Lifecycle {
    lives: BTreeMap<u32, Life>,
    newest: u32,
    /// The newest generation at the first refresh (generations before it started
    /// before attach).
    newest_at_attach: u32,
    newest_start: Option<u64>,
    /// When a refresh first saw the newest generation's workers (Unix seconds); None
    /// for the generation found at attach.
    newest_seen_unix_s: Option<f64>,
    /// Workers of the newest generation that died abnormally, awaiting a respawn.
    credit: VecDeque<u32>,
    /// The master's configuration loads since attach (the `ngx_init_cycle`
    /// uretprobe's successful returns, [`Lifecycle::set_master_loads`]); None when not
    /// counted. A reload loads the configuration before it forks its workers.
    master_loads: Option<u64>,
    /// The master's loads the generations started since attach have accounted for:
    /// a worker started with none left over is no reload's (nginx respawns any worker
    /// of its configuration that exits unasked, a QUIT sent to that worker alone
    /// among them: its exit code is 0).
    loads_used: u64,
    records: VecDeque<ExitRecord>,
    totals: ExitCounts,
    respawns: VecDeque<f64>,
    respawns_total: u64,
    signal_exits_total: VecDeque<SignalExit>,
    refreshed: bool,
    attach_unix_s: f64,
    /// Why exit status is unknown (from the probe), for the report.
    pub exit_unknown: Option<String>,
}

/// `/proc/<pid>/stat` starttime, clock ticks since boot.
fn start_ticks(pid: u32) -> Option<u64> {
    procfs::process::Process::new(pid as i32)
        .and_then(|p| p.stat())
        .ok()
        .map(|s| s.starttime)
}

/// The state nginx's title gives, from at most [`TITLE_MAX`] bytes of the cmdline;
/// None when unreadable or not a worker title.
pub fn state_of_title(title: &[u8]) -> Option<WorkerState> {
    let end = title.iter().position(|&b| b == 0).unwrap_or(title.len());
    let t = title[..end].trim_ascii_end();
    if t.starts_with(TITLE_SHUTTING_DOWN) {
        Some(WorkerState::ShuttingDown)
    } else if t == TITLE_WORKER {
        Some(WorkerState::Serving)
    } else {
        None
    }
}

fn read_state(pid: u32) -> Option<WorkerState> {
    let mut buf = Vec::new();
    std::fs::File::open(format!("/proc/{pid}/cmdline"))
        .ok()?
        .take(TITLE_MAX)
        .read_to_end(&mut buf)
        .ok()?;
    state_of_title(&buf)
}

/// `VmRSS` of `/proc/<pid>/status`, bytes.
fn rss_bytes(pid: u32) -> Option<u64> {
    let status = procfs::process::Process::new(pid as i32)
        .and_then(|p| p.status())
        .ok()?;
    status.vmrss.map(|kb| kb * 1024)
}

/// Socket inode -> local port of the non-listening TCP sockets in one of
/// `/proc/<pid>/net/tcp{,6}`'s text; None when the table is over the bound or
/// malformed.
pub fn parse_tcp_table(text: &str, out: &mut BTreeMap<u64, u16>) -> Option<()> {
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 10 {
            return None;
        }
        let port = u16::from_str_radix(f[1].rsplit_once(':')?.1, 16).ok()?;
        let state = u8::from_str_radix(f[3], 16).ok()?;
        let inode: u64 = f[9].parse().ok()?;
        // 0x0A: TCP_LISTEN.
        if state != 0x0a && inode != 0 {
            out.insert(inode, port);
        }
    }
    Some(())
}

fn tcp_table(pid: u32) -> Option<BTreeMap<u64, u16>> {
    let mut out = BTreeMap::new();
    for name in ["tcp", "tcp6"] {
        let mut text = String::new();
        let f = match std::fs::File::open(format!("/proc/{pid}/net/{name}")) {
            Ok(f) => f,
            // No IPv6 in this kernel: no tcp6 table.
            Err(e) if name == "tcp6" && e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(_) => return None,
        };
        let n = f.take(TCP_TABLE_MAX + 1).read_to_string(&mut text).ok()?;
        if n as u64 > TCP_TABLE_MAX {
            return None;
        }
        parse_tcp_table(&text, &mut out)?;
    }
    Some(out)
}

/// (client, upstream) TCP connections of `pid`: its socket fds found in `table`,
/// clients being those whose local port is one of `listen_ports`.
fn connections(
    pid: u32,
    table: &BTreeMap<u64, u16>,
    listen_ports: &BTreeSet<u16>,
) -> Option<(u64, u64)> {
    let (mut clients, mut upstreams) = (0, 0);
    for (i, e) in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()?
        .enumerate()
    {
        if i >= FDS_MAX {
            return None;
        }
        let Ok(link) = std::fs::read_link(e.ok()?.path()) else {
            continue; // closed meanwhile
        };
        let link = link.to_string_lossy();
        let Some(ino) = link
            .strip_prefix("socket:[")
            .and_then(|r| r.strip_suffix(']'))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        match table.get(&ino) {
            Some(port) if listen_ports.contains(port) => clients += 1,
            Some(_) => upstreams += 1,
            None => {}
        }
    }
    Some((clients, upstreams))
}

/// The port of a listen address `host:port` (`[::]:80` too).
fn port_of(addr: &str) -> Option<u16> {
    addr.rsplit_once(':')?.1.parse().ok()
}

impl Lifecycle {
    /// Brings every worker's lifecycle up to date at `now` (seconds since the Unix
    /// epoch): exits first (so a respawn is known as one), then new workers'
    /// generations, then states, memory and what draining workers hold.
    pub fn refresh<'a>(
        &mut self,
        workers: &BTreeMap<u32, WorkerInfo>,
        listen_addrs: impl Iterator<Item = &'a str>,
        probe: &mut Probe,
        now: f64,
    ) {
        self.exit_unknown = probe.exit_status.clone().err();
        let first = !self.refreshed;
        if first {
            self.attach_unix_s = now;
            self.refreshed = true;
        }
        // 1. Exits of known workers.
        for w in workers.values().filter(|w| !w.alive) {
            if self.lives.get(&w.pid).is_some_and(|l| !l.exit_done) {
                self.exited(w.pid, probe, now);
            }
        }
        // 2. New workers, oldest first.
        self.add_new(workers, probe, now, first);
        // 3. States and memory of live workers; connections of draining ones.
        let ports: BTreeSet<u16> = listen_addrs.filter_map(port_of).collect();
        let mut table: Option<Option<BTreeMap<u64, u16>>> = None;
        for w in workers.values().filter(|w| w.alive) {
            let Some(life) = self.lives.get_mut(&w.pid) else {
                continue;
            };
            let state = read_state(w.pid);
            if state == Some(WorkerState::ShuttingDown)
                && life.state != Some(WorkerState::ShuttingDown)
            {
                life.since = Some(now);
                life.before_attach = first;
            }
            if state.is_some() {
                life.state = state;
            }
            life.rss = rss_bytes(w.pid);
            life.conns = None;
            if life.state == Some(WorkerState::ShuttingDown) {
                let t = table.get_or_insert_with(|| tcp_table(w.pid));
                life.conns = t.as_ref().and_then(|t| connections(w.pid, t, &ports));
            }
        }
        // 4. Workers the tracker no longer lists (merged away).
        self.lives.retain(|pid, _| workers.contains_key(pid));
    }

    /// Workers not seen before, oldest first: their generations (a first refresh
    /// numbers those found at attach), when a new generation was first seen, and the
    /// exits of those already gone.
    fn add_new(
        &mut self,
        workers: &BTreeMap<u32, WorkerInfo>,
        probe: &mut Probe,
        now: f64,
        first: bool,
    ) {
        let mut new: Vec<(Option<u64>, u32, bool)> = workers
            .values()
            .filter(|w| !self.lives.contains_key(&w.pid))
            .map(|w| {
                (
                    w.alive.then(|| start_ticks(w.pid)).flatten(),
                    w.pid,
                    w.alive,
                )
            })
            .collect();
        new.sort();
        let newest_before = self.newest;
        if first {
            self.first_generations(&new);
        } else {
            for &(start, pid, _) in &new {
                let generation = self.generation_of(start, pid);
                self.lives.insert(
                    pid,
                    Life {
                        generation,
                        ..Default::default()
                    },
                );
            }
        }
        if !first && self.newest != newest_before {
            self.newest_seen_unix_s = Some(now);
        }
        for &(_, pid, alive) in &new {
            if !alive {
                self.exited(pid, probe, now);
            }
        }
    }

    /// The workers whose title said they were shutting down at the latest look.
    pub fn draining_pids(&self) -> impl Iterator<Item = u32> + '_ {
        self.lives
            .iter()
            .filter(|(_, l)| l.state == Some(WorkerState::ShuttingDown))
            .map(|(&pid, _)| pid)
    }

    /// At attach: workers already shutting down are older generations (numbered by
    /// start-time batches), serving ones the newest.
    fn first_generations(&mut self, new: &[(Option<u64>, u32, bool)]) {
        let mut draining_batches = 0u32;
        let mut last: Option<u64> = None;
        let mut gens = BTreeMap::new();
        for &(start, pid, alive) in new {
            if alive && read_state(pid) == Some(WorkerState::ShuttingDown) {
                let same = matches!((last, start), (Some(l), Some(s)) if s.saturating_sub(l) <= BATCH_TICKS);
                if !same || draining_batches == 0 {
                    draining_batches += 1;
                }
                if start.is_some() {
                    last = start;
                }
                gens.insert(pid, draining_batches - 1);
            }
        }
        self.newest = draining_batches;
        self.newest_at_attach = draining_batches;
        // Loads before the first refresh made the workers found then.
        self.loads_used = self.master_loads.unwrap_or(0);
        for &(start, pid, _) in new {
            let generation = gens.get(&pid).copied().unwrap_or_else(|| {
                if self.newest_start.is_none() {
                    self.newest_start = start;
                }
                draining_batches
            });
            self.lives.insert(
                pid,
                Life {
                    generation,
                    ..Default::default()
                },
            );
        }
    }

    /// The generation of a worker first seen after attach, started at `start`.
    fn generation_of(&mut self, start: Option<u64>, pid: u32) -> u32 {
        let in_batch = matches!((self.newest_start, start), (Some(b), Some(s)) if s.saturating_sub(b) <= BATCH_TICKS);
        // A worker of the newest generation died abnormally and is not replaced yet:
        // this is its respawn, even within BATCH_TICKS of the generation's start (a
        // worker that crashes at start is respawned at once; the batch test came first
        // and took such respawns for the batch, seen once in the test suite).
        if let Some(dead) = self.credit.pop_front() {
            self.respawns_total += 1;
            if let Some(i) = self.records.iter().rposition(|r| r.pid == dead) {
                self.replaced(i, pid);
            }
            for s in self.signal_exits_total.iter_mut().filter(|s| s.pid == dead) {
                s.replaced_by = Some(pid);
            }
            return self.newest;
        }
        if in_batch {
            return self.newest;
        }
        // No configuration loaded by the master since the newest generation started,
        // and a worker of it exited: no reload, its respawn (a worker that exited with
        // code 0 unasked). Without such an exit it stays a reload's (one whose load
        // came before the uretprobe was attached).
        if self.master_loads.is_some_and(|n| n <= self.loads_used) && self.respawned_unasked(pid) {
            return self.newest;
        }
        if let Some(n) = self.master_loads {
            self.loads_used = (self.loads_used + 1).min(n);
        }
        self.newest += 1;
        self.newest_start = start;
        self.credit.clear();
        self.newest
    }

    /// Counts `pid` as the respawn of the newest generation's latest exited worker
    /// not replaced yet (its exit record then names `pid`); false when there is none.
    fn respawned_unasked(&mut self, pid: u32) -> bool {
        let newest = self.newest;
        let lives = &self.lives;
        let Some(i) = self.records.iter().rposition(|r| {
            r.replaced_by.is_none() && lives.get(&r.pid).is_some_and(|l| l.generation == newest)
        }) else {
            return false;
        };
        self.respawns_total += 1;
        self.replaced(i, pid);
        true
    }

    /// Notes that exit record `i` was replaced by worker `pid`, a respawn, with the
    /// exit's time among the period's respawns (bounded).
    fn replaced(&mut self, i: usize, pid: u32) {
        let r = &mut self.records[i];
        r.replaced_by = Some(pid);
        self.respawns.push_back(r.seen);
        if self.respawns.len() > MAX_EXIT_RECORDS {
            self.respawns.pop_front();
        }
    }

    /// Sets the master's configuration loads since attach, read before each refresh
    /// (`collect::tracker`, the `ngx_init_cycle` uretprobe): None when not counted,
    /// then a worker started apart from its generation's batch is a reload's unless it
    /// replaces one that died abnormally.
    pub fn set_master_loads(&mut self, loads: Option<u64>) {
        self.master_loads = loads;
    }

    /// Notes whether worker `pid` had begun its graceful shutdown (the drain uprobe's
    /// mark, `Probe::drained`), read as its slot is retired, before the mark is zeroed:
    /// its exit says it. Nothing for a worker not seen yet.
    pub fn note_drained(&mut self, pid: u32, drained: Option<bool>) {
        if let Some(l) = self.lives.get_mut(&pid) {
            l.drained = drained;
        }
    }

    /// Records the exit of `pid` from the kernel's record.
    fn exited(&mut self, pid: u32, probe: &mut Probe, now: f64) {
        let drained = self.lives.get(&pid).and_then(|l| l.drained);
        let exit = probe.take_exit(pid).map(|code| match decode(code) {
            Exit::Code(c) => WorkerExit {
                code: Some(c),
                seen_unix_s: now,
                drained,
                ..Default::default()
            },
            Exit::Signal {
                signal,
                core_dumped,
            } => WorkerExit {
                signal: Some(signal),
                core_dumped,
                seen_unix_s: now,
                ..Default::default()
            },
        });
        let Some(life) = self.lives.get_mut(&pid) else {
            return;
        };
        life.exit_done = true;
        life.exit = exit.clone();
        life.state = None;
        life.conns = None;
        life.rss = None;
        self.totals.add(exit.as_ref());
        let abnormal = exit
            .as_ref()
            .is_some_and(|e| e.signal.is_some() || e.code != Some(0));
        // nginx respawns a worker of the current configuration that died; a draining
        // one is not replaced.
        if abnormal && life.generation == self.newest && life.since.is_none() {
            self.credit.push_back(pid);
        }
        if let Some(WorkerExit {
            signal: Some(signal),
            core_dumped,
            ..
        }) = exit
        {
            self.signal_exits_total.push_back(SignalExit {
                pid,
                signal,
                core_dumped,
                seen_unix_s: now,
                replaced_by: None,
            });
            if self.signal_exits_total.len() > MAX_SIGNAL_EXITS_LISTED {
                self.signal_exits_total.pop_front();
            }
        }
        self.records.push_back(ExitRecord {
            pid,
            exit,
            seen: now,
            replaced_by: None,
        });
        if self.records.len() > MAX_EXIT_RECORDS {
            self.records.pop_front();
        }
    }

    /// The newest reload generation now (None: generation 0, no reload seen) and the
    /// generations started since attach, for `model::listener_closes`.
    pub fn reload_seen(&self) -> ReloadSeen {
        ReloadSeen {
            generation: (self.newest > 0).then_some(self.newest),
            since_attach: self.newest.saturating_sub(self.newest_at_attach),
            seen_unix_s: self.newest_seen_unix_s,
            stopped: self.newest_stopped(),
        }
    }

    /// Whether nginx is stopping: the newest generation had workers, and every one has
    /// begun its shutdown (its title) or exited, none awaiting a respawn (a crash's).
    fn newest_stopped(&self) -> bool {
        let mut newest = self
            .lives
            .values()
            .filter(|l| l.generation == self.newest)
            .peekable();
        newest.peek().is_some()
            && self.credit.is_empty()
            && newest.all(|l| l.exit_done || l.state == Some(WorkerState::ShuttingDown))
    }

    /// One worker's lifecycle for its report.
    pub fn of(&self, pid: u32) -> WorkerLifecycle {
        let Some(l) = self.lives.get(&pid) else {
            return WorkerLifecycle::default();
        };
        let draining = l.state == Some(WorkerState::ShuttingDown);
        WorkerLifecycle {
            reload_generation: Some(l.generation),
            state: l.state,
            shutting_down_since_unix_s: l.since.filter(|_| draining),
            shutting_down_before_attach: draining && l.before_attach,
            rss_bytes: l.rss,
            client_connections: l.conns.map(|c| c.0),
            upstream_connections: l.conns.map(|c| c.1),
            exit: l.exit.clone(),
        }
    }

    /// What is known of exits and respawns, for a period's lifecycle part
    /// ([`crate::model::worker_lifecycle::lifecycle_report`]).
    pub fn history(&self) -> ExitHistory<'_> {
        ExitHistory {
            recent: self
                .records
                .iter()
                .map(|r| (r.seen, r.exit.as_ref()))
                .collect(),
            totals: &self.totals,
            respawns: &self.respawns,
            respawns_total: self.respawns_total,
            signal_exits: &self.signal_exits_total,
            exit_unknown: self.exit_unknown.as_deref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_give_states() {
        assert_eq!(
            state_of_title(b"nginx: worker process is shutting down\0\0\0"),
            Some(WorkerState::ShuttingDown)
        );
        assert_eq!(
            state_of_title(b"nginx: worker process\0"),
            Some(WorkerState::Serving)
        );
        assert_eq!(
            state_of_title(b"nginx: master process /usr/sbin/nginx"),
            None
        );
        assert_eq!(state_of_title(b""), None);
    }

    #[test]
    fn tcp_table_keeps_non_listening_sockets_by_inode() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1 0 100 0 0 10 0\n   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 1002 1 0 20 4 30 10 -1\n   2: 0100007F:C350 0100007F:46B3 01 00000000:00000000 00:00000000 00000000     0        0 1003 1 0 20 4 30 10 -1\n";
        let mut t = BTreeMap::new();
        assert_eq!(parse_tcp_table(text, &mut t), Some(()));
        // 1001 listens on 8080: left out.
        assert_eq!(t, BTreeMap::from([(1002, 8080), (1003, 0xC350)]));
        assert_eq!(parse_tcp_table("h\nbad line\n", &mut t), None);
    }

    /// A worker that dies right after its generation started is respawned within
    /// BATCH_TICKS of that start: the respawn, not a member of the batch.
    #[test]
    fn a_respawn_inside_the_batch_window_is_a_respawn() {
        let mut l = Lifecycle {
            newest_start: Some(1000),
            ..Default::default()
        };
        l.credit.push_back(42);
        assert_eq!(l.generation_of(Some(1005), 43), 0);
        assert_eq!(l.respawns_total, 1);
        // Without a death to replace, a worker in the window is the batch's.
        assert_eq!(l.generation_of(Some(1010), 44), 0);
        assert_eq!(l.respawns_total, 1);
        // Later, with none to replace: a reload's new generation.
        assert_eq!(l.reload_seen(), ReloadSeen::default());
        assert_eq!(l.generation_of(Some(2000), 45), 1);
        assert_eq!(
            l.reload_seen(),
            ReloadSeen {
                generation: Some(1),
                since_attach: 1,
                seen_unix_s: None,
                stopped: false,
            }
        );
    }

    /// A worker told to quit alone (a QUIT sent to it: exit code 0, not the master's
    /// doing) is respawned by nginx; with the master's loads counted, no load since
    /// the generation started means no reload: the new worker is the respawn, in the
    /// same generation (draining.rs: it was taken for a reload's generation 1). A load
    /// makes the next one a reload's.
    #[test]
    fn a_worker_started_with_no_configuration_load_is_a_respawn() {
        let mut l = Lifecycle {
            newest_start: Some(1000),
            ..Default::default()
        };
        l.set_master_loads(Some(0));
        l.lives.insert(42, Life::default());
        l.records.push_back(ExitRecord {
            pid: 42,
            exit: None,
            seen: 5.0,
            replaced_by: None,
        });
        assert_eq!(l.generation_of(Some(2000), 43), 0);
        assert_eq!(l.respawns_total, 1);
        assert_eq!(l.records[0].replaced_by, Some(43));
        // No load and no exit left to replace: a reload whose load was not counted.
        assert_eq!(l.generation_of(Some(2500), 46), 1);
        assert_eq!(l.respawns_total, 1);
        l.newest = 0;
        l.set_master_loads(Some(1));
        assert_eq!(l.generation_of(Some(3000), 44), 1);
        assert_eq!(l.respawns_total, 1);
        // Loads not counted: the batch rule alone, as before.
        l.set_master_loads(None);
        assert_eq!(l.generation_of(Some(4000), 45), 2);
    }

    /// Workers draining at attach make the serving ones a later generation: a reload
    /// before attach, none since.
    #[test]
    fn a_reload_before_attach_is_a_generation_with_none_since() {
        let l = Lifecycle {
            newest: 2,
            newest_at_attach: 2,
            ..Default::default()
        };
        assert_eq!(
            l.reload_seen(),
            ReloadSeen {
                generation: Some(2),
                since_attach: 0,
                seen_unix_s: None,
                stopped: false,
            }
        );
    }

    /// nginx stopping: the newest generation's workers all shutting down or exited,
    /// none awaiting a respawn; a reload's old workers draining are not a stop.
    #[test]
    fn a_stop_is_the_newest_generation_all_stopped() {
        let life = |generation, state, exit_done| Life {
            generation,
            state: Some(state),
            exit_done,
            ..Default::default()
        };
        let mut l = Lifecycle {
            newest: 1,
            ..Default::default()
        };
        assert!(!l.reload_seen().stopped, "no worker seen: not a stop");
        l.lives
            .insert(10, life(0, WorkerState::ShuttingDown, false));
        l.lives.insert(11, life(1, WorkerState::Serving, false));
        l.lives
            .insert(12, life(1, WorkerState::ShuttingDown, false));
        assert!(!l.reload_seen().stopped);
        l.lives.insert(11, life(1, WorkerState::Serving, true));
        assert!(l.reload_seen().stopped);
        // A crashed worker of the newest generation awaiting its respawn.
        l.credit.push_back(11);
        assert!(!l.reload_seen().stopped);
    }

    #[test]
    fn listen_ports_parse() {
        assert_eq!(port_of("127.0.0.1:8080"), Some(8080));
        assert_eq!(port_of("[::]:80"), Some(80));
        assert_eq!(port_of("nonsense"), None);
    }
}
