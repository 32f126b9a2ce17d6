//! Configuration loads since attach, measured in nginx's own code: the uretprobe on
//! `ngx_init_cycle` (see `nginx_probe_common::reloads`) counts, per process running
//! nginx's binary, the loads that returned a cycle and those that returned NULL.
//! The master's are its reloads (SIGHUP); a child of the master's are a binary
//! upgrade's new master starting (USR2: nginx forks and execs its binary, which loads
//! the configuration first; workers never load one; the parent is read in the
//! uretprobe, `task_struct.real_parent`); any other process's are an `nginx -t`, an
//! `nginx -s <signal>` (both load the configuration before anything else), or another
//! master of the same binary file. Read by
//! `collect::tracker` every refresh (500 ms). Pure: [`ConfigLoadHistory::observe`]
//! turns one reading into events, [`ConfigLoadHistory::report`] picks a period's.
//! Bounded: at most [`MAX_LOAD_EVENTS`] events kept one by one, the totals exact.

use std::collections::{BTreeMap, VecDeque};

use nginx_probe_common::reloads::{ConfigLoads, PARENT_UNKNOWN};
use serde::{Deserialize, Serialize};

/// Load events kept one by one (for interval reports); the totals since attach are
/// kept apart and never lose one.
pub const MAX_LOAD_EVENTS: usize = 256;

/// Where the figures come from, for the report.
pub const SOURCE: &str = "uretprobe on ngx_init_cycle in nginx's binary (NULL: the configuration did not load), per process: the master's are its reloads";

/// One process's loads seen by one refresh.
#[derive(Clone, Copy, Debug, PartialEq)]
struct LoadEvent {
    /// The loading process (host pid).
    tgid: u32,
    /// The refresh that saw them (seconds since the Unix epoch): what puts them in a
    /// period, so that a load just before a report's end falls in the next one, never
    /// in neither.
    seen_unix_s: f64,
    by: Loader,
    loaded: u64,
    failed: u64,
    /// The last failed and the last successful return's own times (`bpf_ktime_get_ns()`
    /// on the wall clock), when there were such returns.
    failed_at: Option<f64>,
    loaded_at: Option<f64>,
}

/// Who loaded a configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Loader {
    /// The followed master: a reload.
    Master,
    /// A child of the master: a binary upgrade's new master.
    Upgrade,
    /// Any other process running the master's binary file.
    Other,
}

/// Which load left the configuration on disk not in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailedLoad {
    /// The master's reload (SIGHUP).
    Reload,
    /// A binary upgrade's new master (USR2), which exited.
    Upgrade,
}

/// Configuration loads, by whom, in a period.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ConfigLoadsReport {
    /// Where the figures come from.
    pub source: String,
    /// Why configuration loads are not measured (the symbol not in nginx's binary,
    /// uprobes refused), when they are not: then every count here is unknown, not 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
    /// The master's reloads that loaded the configuration on disk.
    pub reloads_loaded: u64,
    /// The master's reloads that did not load it (`ngx_init_cycle` returned NULL):
    /// nginx kept serving with the configuration it had.
    pub reloads_failed: u64,
    /// When the last failed reload returned, seconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reload_failed_unix_s: Option<f64>,
    /// When the last reload that loaded returned, seconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reload_loaded_unix_s: Option<f64>,
    /// Binary upgrades (USR2) whose new master (a child of the master running its
    /// binary file) loaded the configuration.
    #[serde(default)]
    pub upgrades_loaded: u64,
    /// Binary upgrades whose new master did not load it (`ngx_init_cycle` returned
    /// NULL): the new master exits and the old master serves on with the binary and
    /// configuration it had. An upgrade to another binary file is not seen here.
    #[serde(default)]
    pub upgrades_failed: u64,
    /// When the last such failed load returned, seconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_upgrade_failed_unix_s: Option<f64>,
    /// When the last such load that succeeded returned, seconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_upgrade_loaded_unix_s: Option<f64>,
    /// The process (host pid) of the period's last failed load by the master or an
    /// upgrade's new master.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failed_pid: Option<u32>,
    /// nginx's reason for that failure as its error log gives it: the period's last
    /// `[emerg]` message written by that process (matched by the pid nginx writes: the
    /// host pid, or the master's in its own pid namespace; an upgrade's new master in a
    /// container is not matched), raw, at most 300 bytes. Not proven nginx's: a client
    /// can write lines into the error log. Absent when no such line was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failed_emerg: Option<String>,
    /// The pid nginx wrote on that line when it is not `last_failed_pid`: the
    /// master's pid in its own pid namespace (a container's nginx writes `1#1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failed_emerg_nspid: Option<u32>,
    /// Why a binary upgrade's new master is not told from other processes, when it is
    /// not (a load's parent could not be read): its loads are then among the others'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrades_unknown: Option<String>,
    /// Loads by other processes running the master's binary file (`nginx -t`,
    /// `nginx -s`, another master) that succeeded.
    /// Which configuration file each loaded is not known; runs of another binary file
    /// (one installed since the master started) are not seen.
    pub others_loaded: u64,
    /// Loads by such other processes that failed (of a configuration file not known:
    /// a candidate tested with `nginx -t -c`, another master's, a run without root).
    pub others_failed: u64,
    /// Why other processes' loads are not all seen, when they are not: the master's
    /// binary file was replaced or deleted since it started (`/proc/<master>/exe` ends
    /// ` (deleted)`, as after a package upgrade without a restart), so `nginx -t` and
    /// `nginx -s` runs of the file now at that path are not counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub others_unknown: Option<String>,
}

/// The later of two optional times (either when only one is known).
fn later(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// [`ConfigLoadsReport::upgrades_unknown`] when a load's parent was not read.
pub const PARENT_NOT_READ: &str = "a loading process's parent was not read (task_struct.real_parent or tgid not in the kernel's BTF): a binary upgrade's new master is counted among the other processes";

/// [`ConfigLoadsReport::others_unknown`] when the master's binary file was replaced.
pub const BINARY_REPLACED: &str = "the master's binary file was replaced or deleted since it started (/proc/<master>/exe is `(deleted)`): nginx -t and nginx -s runs of the file now at its path are not seen";

impl ConfigLoadsReport {
    /// Counts one event in.
    fn add(&mut self, e: &LoadEvent) {
        let last_failed = later(
            self.last_reload_failed_unix_s,
            self.last_upgrade_failed_unix_s,
        );
        if e.by != Loader::Other && e.failed_at.is_some() && e.failed_at > last_failed {
            self.last_failed_pid = Some(e.tgid);
        }
        match e.by {
            Loader::Master => {
                self.reloads_loaded += e.loaded;
                self.reloads_failed += e.failed;
                self.last_reload_failed_unix_s = later(self.last_reload_failed_unix_s, e.failed_at);
                self.last_reload_loaded_unix_s = later(self.last_reload_loaded_unix_s, e.loaded_at);
            }
            Loader::Upgrade => {
                self.upgrades_loaded += e.loaded;
                self.upgrades_failed += e.failed;
                self.last_upgrade_failed_unix_s =
                    later(self.last_upgrade_failed_unix_s, e.failed_at);
                self.last_upgrade_loaded_unix_s =
                    later(self.last_upgrade_loaded_unix_s, e.loaded_at);
            }
            Loader::Other => {
                self.others_loaded += e.loaded;
                self.others_failed += e.failed;
            }
        }
    }

    /// The period's last load by the master or an upgrade's new master, when it failed
    /// and none of theirs loaded after it (a later one that loaded put a configuration
    /// in force): which it was. Other processes' loads count for nothing here.
    pub fn last_load_failed(&self) -> Option<FailedLoad> {
        let loaded = later(
            self.last_reload_loaded_unix_s,
            self.last_upgrade_loaded_unix_s,
        );
        let (which, failed) = match (
            self.last_reload_failed_unix_s,
            self.last_upgrade_failed_unix_s,
        ) {
            (Some(r), Some(u)) if u > r => (FailedLoad::Upgrade, u),
            (Some(r), _) => (FailedLoad::Reload, r),
            (None, Some(u)) => (FailedLoad::Upgrade, u),
            (None, None) => return None,
        };
        loaded.is_none_or(|l| failed > l).then_some(which)
    }

    /// Sets [`ConfigLoadsReport::last_failed_emerg`] from `lines` (the period's last
    /// `[emerg]` lines, oldest first): the last one whose pid is the failed load's
    /// process, or, when that process is the master (`master`, host pid), its pid in
    /// its own namespace (`master_nspid`, `NSpid`'s last).
    pub fn quote_emerg(
        &mut self,
        lines: &[crate::model::nginx_errors::EmergLine],
        master: u32,
        master_nspid: Option<u32>,
    ) {
        let Some(pid) = self.last_failed_pid else {
            return;
        };
        let ns = master_nspid.filter(|_| pid == master);
        let line = lines
            .iter()
            .rev()
            .find(|l| l.pid == pid || Some(l.pid) == ns);
        self.last_failed_emerg = line.map(|l| l.message.clone());
        self.last_failed_emerg_nspid = line.map(|l| l.pid).filter(|&p| p != pid);
    }

    /// Whether any load was seen (or loads are unknown): the report then says so.
    pub fn worth_saying(&self) -> bool {
        self.unknown.is_some()
            || self.reloads_loaded
                + self.reloads_failed
                + self.upgrades_loaded
                + self.upgrades_failed
                + self.others_loaded
                + self.others_failed
                > 0
    }
}

/// Every process's loads since attach, and the events of the last ones.
#[derive(Clone, Debug, Default)]
pub struct ConfigLoadHistory {
    /// Each process's counts at the last reading (bounded by the map's size).
    last: BTreeMap<u32, ConfigLoads>,
    events: VecDeque<LoadEvent>,
    totals: ConfigLoadsReport,
}

impl ConfigLoadHistory {
    /// Takes one reading of the map (`loads`: (tgid, counts) of every process, or why
    /// loads are not measured) at `now_unix_s`; `master` is the followed master's pid;
    /// `mono_to_unix` turns a `bpf_ktime_get_ns()` value into seconds since the Unix
    /// epoch. A process whose counts went down (its pid reused, its entry let go by the
    /// LRU map and made again) is counted from its new counts.
    pub fn observe(
        &mut self,
        master: u32,
        loads: Result<&[(u32, ConfigLoads)], &str>,
        now_unix_s: f64,
        mono_to_unix: impl Fn(u64) -> f64,
    ) {
        let loads = match loads {
            Ok(l) => l,
            Err(why) => {
                self.totals.unknown = Some(why.to_string());
                return;
            }
        };
        self.totals.unknown = None;
        let seen: std::collections::BTreeSet<u32> = loads.iter().map(|(t, _)| *t).collect();
        for &(tgid, now) in loads {
            let before = self.last.get(&tgid).copied().unwrap_or_default();
            let (before_loaded, before_failed) =
                if now.loaded < before.loaded || now.failed < before.failed {
                    (0, 0)
                } else {
                    (before.loaded, before.failed)
                };
            let loaded = u64::from(now.loaded - before_loaded);
            let failed = u64::from(now.failed - before_failed);
            self.last.insert(tgid, now);
            if loaded + failed == 0 {
                continue;
            }
            let by = if tgid == master {
                Loader::Master
            } else if now.parent_tgid == master {
                Loader::Upgrade
            } else {
                if now.parent_tgid == PARENT_UNKNOWN {
                    self.totals.upgrades_unknown = Some(PARENT_NOT_READ.to_string());
                }
                Loader::Other
            };
            let e = LoadEvent {
                tgid,
                seen_unix_s: now_unix_s,
                by,
                loaded,
                failed,
                failed_at: (failed > 0).then(|| mono_to_unix(now.last_failed_ns)),
                loaded_at: (loaded > 0).then(|| mono_to_unix(now.last_loaded_ns)),
            };
            self.totals.add(&e);
            if self.events.len() == MAX_LOAD_EVENTS {
                self.events.pop_front();
            }
            self.events.push_back(e);
        }
        // Entries the map let go of (LRU) are forgotten too: one made again starts
        // from 0.
        self.last.retain(|tgid, _| seen.contains(tgid));
    }

    /// Notes that the master's binary file was replaced (see
    /// [`ConfigLoadsReport::others_unknown`]); it stays so for the run.
    pub fn binary_replaced(&mut self) {
        self.totals.others_unknown = Some(BINARY_REPLACED.to_string());
    }

    /// The loads of the period starting at `start_unix_s` (`summary`: since attach,
    /// exact; else from the last [`MAX_LOAD_EVENTS`] events).
    pub fn report(&self, start_unix_s: f64, summary: bool) -> ConfigLoadsReport {
        let mut r = ConfigLoadsReport {
            source: SOURCE.to_string(),
            unknown: self.totals.unknown.clone(),
            others_unknown: self.totals.others_unknown.clone(),
            upgrades_unknown: self.totals.upgrades_unknown.clone(),
            ..Default::default()
        };
        if summary {
            return ConfigLoadsReport {
                source: r.source,
                ..self.totals.clone()
            };
        }
        for e in self.events.iter().filter(|e| e.seen_unix_s > start_unix_s) {
            r.add(e);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loads(loaded: u32, failed: u32, last_failed_ns: u64) -> ConfigLoads {
        ConfigLoads {
            loaded,
            failed,
            last_failed_ns,
            last_loaded_ns: if loaded > 0 { 1_500_000_000 } else { 0 },
            ..Default::default()
        }
    }

    /// Monotonic ns 1e9 is Unix second 1000.
    fn wall(ns: u64) -> f64 {
        999.0 + ns as f64 / 1e9
    }

    #[test]
    fn the_master_s_failed_reloads_are_told_from_nginx_t_runs() {
        let mut h = ConfigLoadHistory::default();
        h.observe(10, Ok(&[]), 1000.0, wall);
        // A reload that loaded, then `nginx -t` (pid 77) failing at 1001.5.
        h.observe(
            10,
            Ok(&[(10, loads(1, 0, 0)), (77, loads(0, 1, 2_500_000_000))]),
            1002.0,
            wall,
        );
        // The master's reload fails at 1003.25; its entry keeps the load before.
        h.observe(
            10,
            Ok(&[
                (10, loads(1, 1, 4_250_000_000)),
                (77, loads(0, 1, 2_500_000_000)),
            ]),
            1004.0,
            wall,
        );
        let s = h.report(0.0, true);
        assert_eq!((s.reloads_loaded, s.reloads_failed), (1, 1));
        assert_eq!((s.others_loaded, s.others_failed), (0, 1));
        assert_eq!(s.last_reload_failed_unix_s, Some(1003.25));
        assert_eq!(s.source, SOURCE);
        // The interval from 1003.0 holds the failed reload only.
        let i = h.report(1003.0, false);
        assert_eq!(
            (i.reloads_loaded, i.reloads_failed, i.others_failed),
            (0, 1, 0)
        );
        assert_eq!(i.last_reload_failed_unix_s, Some(1003.25));
        assert!(s.worth_saying());
        assert_eq!(s.last_load_failed(), Some(FailedLoad::Reload));
        assert_eq!(i.last_load_failed(), Some(FailedLoad::Reload));
        // An interval ending at 1003.9 missed the refresh at 1004.0: the failure is
        // in the next one (seen at 1004.0), never in neither.
        assert_eq!(h.report(1003.9, false).reloads_failed, 1);
        // A reload that loads at 1004.5 puts a configuration in force again.
        let fixed = ConfigLoads {
            loaded: 2,
            failed: 1,
            last_failed_ns: 4_250_000_000,
            last_loaded_ns: 5_500_000_000,
            ..Default::default()
        };
        h.observe(
            10,
            Ok(&[(10, fixed), (77, loads(0, 1, 2_500_000_000))]),
            1005.0,
            wall,
        );
        let s = h.report(0.0, true);
        assert_eq!((s.reloads_loaded, s.reloads_failed), (2, 1));
        assert_eq!(s.last_reload_loaded_unix_s, Some(1004.5));
        assert_eq!(s.last_load_failed(), None);
        assert_eq!(s.others_unknown, None);
        // The master's binary file replaced on disk: other processes' loads are not
        // all seen from then on, in every report.
        h.binary_replaced();
        assert_eq!(
            h.report(0.0, true).others_unknown.as_deref(),
            Some(BINARY_REPLACED)
        );
        assert_eq!(
            h.report(1004.0, false).others_unknown.as_deref(),
            Some(BINARY_REPLACED)
        );
    }

    #[test]
    fn a_child_of_the_master_is_a_binary_upgrade_and_an_unread_parent_is_said() {
        let mut h = ConfigLoadHistory::default();
        let child = |loaded, failed, parent_tgid| ConfigLoads {
            parent_tgid,
            ..loads(loaded, failed, 3_000_000_000)
        };
        // The master (10) reloads at 1000.5; its child 20 (USR2) fails at 1002.0; an
        // `nginx -t` from a shell (parent 5) fails too.
        h.observe(
            10,
            Ok(&[
                (10, child(1, 0, 1)),
                (20, child(0, 1, 10)),
                (30, child(0, 1, 5)),
            ]),
            1003.0,
            wall,
        );
        let s = h.report(0.0, true);
        assert_eq!((s.upgrades_loaded, s.upgrades_failed), (0, 1));
        assert_eq!((s.others_loaded, s.others_failed), (0, 1));
        assert_eq!(s.reloads_loaded, 1);
        assert_eq!(s.last_upgrade_failed_unix_s, Some(1002.0));
        assert_eq!(s.last_load_failed(), Some(FailedLoad::Upgrade));
        assert_eq!(s.upgrades_unknown, None);
        assert!(s.worth_saying());
        // A second upgrade (child 21) loads at 1004.5: in force again.
        let ok = ConfigLoads {
            last_loaded_ns: 5_500_000_000,
            ..child(1, 0, 10)
        };
        h.observe(10, Ok(&[(10, child(1, 0, 1)), (21, ok)]), 1005.0, wall);
        let s = h.report(0.0, true);
        assert_eq!((s.upgrades_loaded, s.upgrades_failed), (1, 1));
        assert_eq!(s.last_load_failed(), None);
        assert_eq!(h.report(1004.0, false).upgrades_loaded, 1);
        // A parent not read: among the others, and said.
        h.observe(10, Ok(&[(40, child(0, 1, PARENT_UNKNOWN))]), 1006.0, wall);
        let s = h.report(0.0, true);
        assert_eq!(s.others_failed, 2);
        assert_eq!(s.upgrades_unknown.as_deref(), Some(PARENT_NOT_READ));
        assert_eq!(
            h.report(1005.5, false).upgrades_unknown.as_deref(),
            Some(PARENT_NOT_READ)
        );
    }

    #[test]
    fn the_failed_load_s_emerg_line_is_quoted_by_its_pid() {
        use crate::model::nginx_errors::EmergLine;
        let line = |pid: u32, m: &str| EmergLine {
            pid,
            message: m.into(),
        };
        let mut h = ConfigLoadHistory::default();
        // The master (host pid 10, pid 1 in its namespace) fails at 1001.5, its child
        // 20 at 1002.0; a shell's nginx -t (30) later.
        let l = |failed_ns, parent_tgid| ConfigLoads {
            parent_tgid,
            ..loads(0, 1, failed_ns)
        };
        h.observe(
            10,
            Ok(&[
                (10, l(2_500_000_000, 1)),
                (20, l(3_000_000_000, 10)),
                (30, l(4_000_000_000, 5)),
            ]),
            1004.0,
            wall,
        );
        let lines = [
            line(1, "master's reason"),
            line(20, "child's reason"),
            line(30, "nginx -t's reason"),
        ];
        let mut r = h.report(0.0, true);
        assert_eq!(r.last_failed_pid, Some(20));
        r.quote_emerg(&lines, 10, Some(1));
        assert_eq!(r.last_failed_emerg.as_deref(), Some("child's reason"));
        assert_eq!(r.last_failed_emerg_nspid, None, "written with its host pid");
        // Only the master fails: its line is found by its pid in its namespace.
        let mut h = ConfigLoadHistory::default();
        h.observe(10, Ok(&[(10, l(2_500_000_000, 1))]), 1004.0, wall);
        let mut r = h.report(0.0, true);
        r.quote_emerg(&lines, 10, Some(1));
        assert_eq!(r.last_failed_emerg.as_deref(), Some("master's reason"));
        assert_eq!(r.last_failed_emerg_nspid, Some(1));
        // No line of that process: nothing quoted.
        r.quote_emerg(&lines[1..], 10, Some(1));
        assert_eq!(r.last_failed_emerg, None);
    }

    #[test]
    fn unknown_loads_say_why_and_a_reused_pid_counts_afresh() {
        let mut h = ConfigLoadHistory::default();
        h.observe(
            10,
            Err("uprobe on ngx_init_cycle: symbol not found"),
            1.0,
            wall,
        );
        let r = h.report(0.0, true);
        assert_eq!(
            r.unknown.as_deref(),
            Some("uprobe on ngx_init_cycle: symbol not found")
        );
        assert!(r.worth_saying());
        let mut h = ConfigLoadHistory::default();
        h.observe(10, Ok(&[(50, loads(0, 3, 1))]), 1.0, wall);
        // pid 50 reused by a new `nginx -t` whose entry starts again.
        h.observe(10, Ok(&[(50, loads(1, 0, 0))]), 2.0, wall);
        let r = h.report(0.0, true);
        assert_eq!((r.others_loaded, r.others_failed), (1, 3));
        assert!(!ConfigLoadsReport::default().worth_saying());
    }
}
