//! nginx's listening sockets closed, one event per port and refresh that saw any, since
//! attach: when, after which reload, how many sockets and how many resets of their
//! queued connections (JSON `connections.listener_closes`). Built from the cumulative
//! in-kernel counters `LISTENERS_CLOSED` (tracepoint `sock:inet_sock_set_state`
//! LISTEN -> CLOSE) and `RST_CLOSED_LISTENER` (`tcp:tcp_send_reset` sent by the task
//! closing a listener, before it was destroyed) of `nginx_probe_common::lifecycle`,
//! read by `collect::tracker` every refresh (500 ms) after the workers' reload
//! generations are brought up to date. Pure: [`ListenerCloseHistory::observe`] turns
//! one reading's change into events, [`ListenerCloseHistory::of_period`] picks a
//! report's. Bounded: at most [`MAX_LISTENER_CLOSES`] events, older ones merged.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use nginx_probe_common::lifecycle as lc;
use serde::{Deserialize, Serialize};

/// Cumulative counters per local port, as `connections::LifecycleRaw::ports` holds
/// them (the `LC_STATS` layout of `nginx_probe_common::lifecycle`).
pub type PortCounters = BTreeMap<u16, Vec<u64>>;

/// Events kept one by one since attach; older ones are merged into
/// [`ListenerClosesMerged`] (counted, not listed).
pub const MAX_LISTENER_CLOSES: usize = 32;

/// nginx closed listening sockets of one port, seen by one refresh.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ListenerClose {
    /// When it was seen: the wall clock of the refresh (every 500 ms) whose reading of
    /// the kernel's counters first showed it, seconds since the Unix epoch; the close
    /// happened within the refresh period before.
    pub seen_unix_s: f64,
    /// The listening port (local port of the sockets, from the tracepoint).
    pub port: u16,
    /// The newest reload generation of the workers when it was seen (the reload it
    /// follows; `collect::worker_state`: workers forked in one batch by the master);
    /// absent when no reload was seen (generation 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reload_generation: Option<u32>,
    /// Reloads seen since attach when it was seen (generations started after attach);
    /// 0 with a `reload_generation`: that reload came before attach (its old workers
    /// were still draining).
    #[serde(default)]
    pub reloads_since_attach: u32,
    /// Listening sockets of the port closed (LISTEN -> CLOSE) in the refresh period.
    pub listeners_closed: u64,
    /// Resets sent to the connections queued on them as they were closed (resets the
    /// closing task sent before the listener was destroyed) in the refresh period.
    /// Resets read in the period after their listener's close (the reading fell
    /// between the two) are added to that close's event.
    pub resets_of_queued_connections: u64,
    /// When the refreshes first saw the workers of `reload_generation` (the reload's
    /// new workers, `/proc`), seconds since the Unix epoch; absent for a reload before
    /// attach, none seen, and in recordings made before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reload_seen_unix_s: Option<f64>,
    /// Set when nginx stopped as it closed them: within [`STOP_WINDOW_S`] of the close
    /// the newest generation's workers had all begun their shutdown or exited (their
    /// titles, the kernel's exit records), none awaiting a respawn and no newer
    /// generation started (`nginx -s quit` or `stop`, a binary upgrade's old master
    /// told to quit).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub at_stop: bool,
}

/// A close seen within this many seconds of the newest generation's workers all
/// stopping is nginx's stop's (the master closes its listeners as it signals them:
/// `ngx_master_process_cycle`), and one seen within it before a new generation's first
/// sighting is that reload's (the master closes the listeners its new configuration
/// drops before it forks the new workers: `ngx_init_cycle`). Three refreshes.
pub const STOP_WINDOW_S: f64 = 1.5;

impl ListenerClose {
    /// The reload the close followed, or nginx's stop, as the text report, the HTML
    /// page, the live view and the `listener_closed_resets` verdict say it: "as nginx
    /// stopped (...)" ([`ListenerClose::at_stop`]), "after reload 2 (generation 2)"
    /// (the second reload seen since attach: its old workers' listeners close as they
    /// stop, or exit), "after a reload before attach (generation 3)", or "with no
    /// reload seen (nginx stopping closes them too)".
    pub fn after_reload(&self) -> String {
        if self.at_stop {
            return "as nginx stopped (its newest workers all began their shutdown or exited, none started in their place)".into();
        }
        match self.reload_generation {
            None => "with no reload seen (nginx stopping closes them too)".into(),
            Some(g) if self.reloads_since_attach == 0 => {
                format!("after a reload before attach (generation {g})")
            }
            Some(g) => format!(
                "after reload {} (generation {g})",
                self.reloads_since_attach
            ),
        }
    }
}

/// The events merged away to keep the list bounded, summed.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ListenerClosesMerged {
    /// Events merged (not listed).
    pub events: u64,
    /// Their listening sockets closed.
    pub listeners_closed: u64,
    /// Their resets of queued connections.
    pub resets_of_queued_connections: u64,
}

impl ListenerClosesMerged {
    fn add(&mut self, e: &ListenerClose) {
        self.events = self.events.saturating_add(1);
        self.listeners_closed = self.listeners_closed.saturating_add(e.listeners_closed);
        self.resets_of_queued_connections = self
            .resets_of_queued_connections
            .saturating_add(e.resets_of_queued_connections);
    }

    /// These sums less `base`'s (saturating).
    fn since(&self, base: &ListenerClosesMerged) -> ListenerClosesMerged {
        ListenerClosesMerged {
            events: self.events.saturating_sub(base.events),
            listeners_closed: self.listeners_closed.saturating_sub(base.listeners_closed),
            resets_of_queued_connections: self
                .resets_of_queued_connections
                .saturating_sub(base.resets_of_queued_connections),
        }
    }
}

/// The reload the workers are at when a reading is made (`collect::worker_state`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReloadSeen {
    /// The newest reload generation; None: no reload seen (generation 0).
    pub generation: Option<u32>,
    /// Generations started since attach.
    pub since_attach: u32,
    /// When a refresh first saw the newest generation's workers, seconds since the
    /// Unix epoch; None for the generation found at attach.
    pub seen_unix_s: Option<f64>,
    /// Whether the newest generation's workers have all begun their shutdown or
    /// exited, none awaiting a respawn: nginx stopping.
    pub stopped: bool,
}

/// Where the history stood when an interval started: the events recorded until then
/// and their sums.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ListenerClosesMark {
    recorded: u64,
    all: ListenerClosesMerged,
}

/// The since-attach list of listener closes and the counters' last reading.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListenerCloseHistory {
    /// Per port: (listeners closed, resets of their queues) at the last reading.
    last: BTreeMap<u16, (u64, u64)>,
    /// The newest [`MAX_LISTENER_CLOSES`] events, oldest first.
    events: VecDeque<ListenerClose>,
    /// Events recorded since attach (the listed and the merged).
    recorded: u64,
    /// The events merged away.
    merged: ListenerClosesMerged,
    /// Every event recorded, summed (late resets included).
    all: ListenerClosesMerged,
    /// Ports with an event merged away (at most the ports read: `LC_MAX_PORTS`).
    merged_ports: BTreeSet<u16>,
}

/// The events of one reading: per port, the change of its two counters since `last`
/// (None: attach, all zero), seen at `seen_unix_s` after `reload`. A port whose
/// counters did not change gives none; one with resets and no close gives an event
/// with `listeners_closed` 0 (its close was read in the period before: see
/// [`ListenerCloseHistory::observe`]).
pub fn period_events(
    cur: &PortCounters,
    last: &BTreeMap<u16, (u64, u64)>,
    seen_unix_s: f64,
    reload: ReloadSeen,
) -> Vec<ListenerClose> {
    cur.iter()
        .filter_map(|(&port, c)| {
            let (closed, resets) = counters(c)?;
            let (pc, pr) = last.get(&port).copied().unwrap_or((0, 0));
            let closed = closed.saturating_sub(pc);
            let resets = resets.saturating_sub(pr);
            (closed > 0 || resets > 0).then_some(ListenerClose {
                seen_unix_s,
                port,
                reload_generation: reload.generation,
                reloads_since_attach: reload.since_attach,
                listeners_closed: closed,
                resets_of_queued_connections: resets,
                reload_seen_unix_s: reload.seen_unix_s,
                at_stop: false,
            })
        })
        .collect()
}

/// A port's (listeners closed, resets of their queues); None when the counters are
/// not the kernel's layout.
fn counters(c: &[u64]) -> Option<(u64, u64)> {
    Some((
        *c.get(lc::LISTENERS_CLOSED)?,
        *c.get(lc::RST_CLOSED_LISTENER)?,
    ))
}

impl ListenerCloseHistory {
    /// Takes one reading of the cumulative counters `cur` (only `LISTENERS_CLOSED` and
    /// `RST_CLOSED_LISTENER` are read), seen at `seen_unix_s` after `reload`: its
    /// change since the last reading becomes events ([`period_events`]). Resets with no
    /// close in the period are added to the port's newest event (the reading fell
    /// between a listener's close and the resets of its queue), or to the merged
    /// counts when it was merged away. Keeps at most [`MAX_LISTENER_CLOSES`] events.
    pub fn observe(&mut self, cur: &PortCounters, seen_unix_s: f64, reload: ReloadSeen) {
        for e in period_events(cur, &self.last, seen_unix_s, reload) {
            if e.listeners_closed == 0 {
                let n = e.resets_of_queued_connections;
                match self.events.iter_mut().rev().find(|p| p.port == e.port) {
                    Some(p) => {
                        p.resets_of_queued_connections =
                            p.resets_of_queued_connections.saturating_add(n);
                        self.all.resets_of_queued_connections =
                            self.all.resets_of_queued_connections.saturating_add(n);
                        continue;
                    }
                    None if self.merged_ports.contains(&e.port) => {
                        self.merged.resets_of_queued_connections =
                            self.merged.resets_of_queued_connections.saturating_add(n);
                        self.all.resets_of_queued_connections =
                            self.all.resets_of_queued_connections.saturating_add(n);
                        continue;
                    }
                    None => {}
                }
            }
            self.push(e);
        }
        for (&port, c) in cur {
            if let Some(v) = counters(c) {
                self.last.insert(port, v);
            }
        }
        self.place_recent(seen_unix_s, reload);
    }

    /// Places the events seen in the last [`STOP_WINDOW_S`] by what the refreshes saw
    /// after them: a close read a refresh before its reload's new workers were seen is
    /// that reload's (the master closes a dropped listener before it forks them), and
    /// one read as nginx's newest workers all stopped is the stop's (its titles are read
    /// before the listeners' counters, so a stop is seen one refresh late).
    fn place_recent(&mut self, now: f64, reload: ReloadSeen) {
        for e in self.events.iter_mut().rev() {
            if now - e.seen_unix_s > STOP_WINDOW_S {
                break;
            }
            let older = match (e.reload_generation, reload.generation) {
                (None, Some(_)) => true,
                (Some(a), Some(b)) => a < b,
                _ => false,
            };
            if older
                && reload
                    .seen_unix_s
                    .is_some_and(|r| r - e.seen_unix_s <= STOP_WINDOW_S)
            {
                e.reload_generation = reload.generation;
                e.reloads_since_attach = reload.since_attach;
                e.reload_seen_unix_s = reload.seen_unix_s;
            }
            if reload.stopped && e.reload_generation == reload.generation {
                e.at_stop = true;
            }
        }
    }

    /// Appends one event, merging the oldest beyond [`MAX_LISTENER_CLOSES`].
    fn push(&mut self, e: ListenerClose) {
        self.all.add(&e);
        self.events.push_back(e);
        self.recorded = self.recorded.saturating_add(1);
        while self.events.len() > MAX_LISTENER_CLOSES {
            if let Some(old) = self.events.pop_front() {
                self.merged.add(&old);
                self.merged_ports.insert(old.port);
            }
        }
    }

    /// Where the history stands now (the start of an interval).
    pub fn mark(&self) -> ListenerClosesMark {
        ListenerClosesMark {
            recorded: self.recorded,
            all: self.all,
        }
    }

    /// The events of a period and those of it merged away (None when none were):
    /// since attach with `from` None, else the events recorded after `from` was taken.
    /// Merged events are the oldest, so a period's are merged only when every event
    /// before it is: their sums are then the merged ones less everything before it.
    pub fn of_period(
        &self,
        from: Option<&ListenerClosesMark>,
    ) -> (Vec<ListenerClose>, Option<ListenerClosesMerged>) {
        let base = from.copied().unwrap_or_default();
        // The first listed event's number since attach.
        let first = self.recorded.saturating_sub(self.events.len() as u64);
        let skip = base.recorded.saturating_sub(first);
        let events = self
            .events
            .iter()
            .skip(usize::try_from(skip).unwrap_or(usize::MAX))
            .cloned()
            .collect();
        let merged = (first > base.recorded).then(|| self.merged.since(&base.all));
        (events, merged)
    }

    /// The events seen at or after `since_unix_s` (a window report's), none merged.
    pub fn seen_since(&self, since_unix_s: f64) -> Vec<ListenerClose> {
        self.events
            .iter()
            .filter(|e| e.seen_unix_s >= since_unix_s)
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nginx_probe_common::lifecycle::LC_PER_PORT;

    fn raw(ports: &[(u16, u64, u64)]) -> PortCounters {
        ports
            .iter()
            .map(|&(port, closed, resets)| {
                let mut v = vec![0; LC_PER_PORT];
                v[lc::LISTENERS_CLOSED] = closed;
                v[lc::RST_CLOSED_LISTENER] = resets;
                v[lc::RST_SENT] = resets.saturating_add(7);
                (port, v)
            })
            .collect()
    }

    fn gen(g: u32) -> ReloadSeen {
        ReloadSeen {
            generation: Some(g),
            since_attach: g,
            ..Default::default()
        }
    }

    #[test]
    fn a_period_with_a_close_gives_one_event_per_port_with_its_deltas() {
        let last = [(80, (1, 5))].into_iter().collect();
        let e = period_events(&raw(&[(80, 2, 17), (81, 0, 0)]), &last, 100.5, gen(2));
        assert_eq!(
            e,
            vec![ListenerClose {
                seen_unix_s: 100.5,
                port: 80,
                reload_generation: Some(2),
                reloads_since_attach: 2,
                listeners_closed: 1,
                resets_of_queued_connections: 12,
                ..Default::default()
            }]
        );
        // Nothing changed: no event; counters that went down (untrusted): none either.
        let last = [(80, (2, 17))].into_iter().collect();
        assert!(period_events(&raw(&[(80, 2, 17)]), &last, 1.0, gen(2)).is_empty());
        assert!(period_events(&raw(&[(80, 1, 3)]), &last, 1.0, gen(2)).is_empty());
        // A port whose counters are not the kernel's layout is passed over.
        let short: PortCounters = [(80, vec![9])].into_iter().collect();
        assert!(period_events(&short, &BTreeMap::new(), 1.0, gen(2)).is_empty());
    }

    #[test]
    fn two_reloads_give_two_events_with_their_generations() {
        let mut h = ListenerCloseHistory::default();
        h.observe(&raw(&[(80, 0, 0)]), 1.0, ReloadSeen::default());
        h.observe(&raw(&[(80, 1, 4)]), 2.0, gen(1));
        h.observe(&raw(&[(80, 1, 4)]), 2.5, gen(1));
        let mark = h.mark();
        h.observe(&raw(&[(80, 2, 10)]), 5.0, gen(2));
        let (all, merged) = h.of_period(None);
        assert_eq!(merged, None);
        let got: Vec<(f64, Option<u32>, u64, u64)> = all
            .iter()
            .map(|e| {
                (
                    e.seen_unix_s,
                    e.reload_generation,
                    e.listeners_closed,
                    e.resets_of_queued_connections,
                )
            })
            .collect();
        assert_eq!(got, vec![(2.0, Some(1), 1, 4), (5.0, Some(2), 1, 6)]);
        // The interval started at the mark holds the second only.
        let (interval, _) = h.of_period(Some(&mark));
        assert_eq!(interval.len(), 1);
        assert_eq!(interval[0].reload_generation, Some(2));
        assert_eq!(h.seen_since(3.0), interval);
    }

    #[test]
    fn resets_read_after_their_close_join_its_event() {
        let mut h = ListenerCloseHistory::default();
        h.observe(&raw(&[(80, 1, 2)]), 2.0, gen(1));
        h.observe(&raw(&[(80, 1, 9)]), 2.5, gen(1));
        let (all, _) = h.of_period(None);
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].resets_of_queued_connections, 9);
        // Resets with no close ever seen on the port: an event of their own.
        h.observe(&raw(&[(80, 1, 9), (81, 0, 3)]), 3.0, gen(1));
        let (all, _) = h.of_period(None);
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].port, 81);
        assert_eq!(all[1].listeners_closed, 0);
    }

    #[test]
    fn beyond_the_bound_the_oldest_are_merged_and_counted() {
        let mut h = ListenerCloseHistory::default();
        let n = MAX_LISTENER_CLOSES as u64 + 3;
        let mut mark = None;
        for i in 1..=n {
            if i == n - 1 {
                mark = Some(h.mark());
            }
            h.observe(&raw(&[(80, i, 2 * i)]), i as f64, gen(i as u32));
        }
        let (all, merged) = h.of_period(None);
        assert_eq!(all.len(), MAX_LISTENER_CLOSES);
        assert_eq!(all[0].reload_generation, Some(4));
        assert_eq!(
            merged,
            Some(ListenerClosesMerged {
                events: 3,
                listeners_closed: 3,
                resets_of_queued_connections: 6,
            })
        );
        // An interval whose events are all listed has nothing merged, though older
        // ones were merged during it.
        let (interval, merged) = h.of_period(mark.as_ref());
        assert_eq!(interval.len(), 2);
        assert_eq!(merged, None);
        // One that started after the first event has the next two merged.
        let mut h = ListenerCloseHistory::default();
        h.observe(&raw(&[(80, 1, 2)]), 1.0, gen(1));
        let mark = h.mark();
        for i in 2..=n {
            h.observe(&raw(&[(80, i, 2 * i + 1)]), i as f64, gen(i as u32));
        }
        let (interval, merged) = h.of_period(Some(&mark));
        assert_eq!(interval.len(), MAX_LISTENER_CLOSES);
        assert_eq!(
            merged,
            Some(ListenerClosesMerged {
                events: 2,
                listeners_closed: 2,
                resets_of_queued_connections: 5,
            })
        );
        // Late resets of a merged port's close go to the merged counts.
        let mut h = ListenerCloseHistory::default();
        for i in 1..=n {
            h.observe(&raw(&[(i as u16, 1, 0)]), i as f64, gen(1));
        }
        h.observe(&raw(&[(1, 1, 5)]), 99.0, gen(1));
        let (_, merged) = h.of_period(None);
        assert_eq!(merged.map(|m| m.resets_of_queued_connections), Some(5));
    }

    fn at(g: Option<u32>, seen: Option<f64>, stopped: bool) -> ReloadSeen {
        ReloadSeen {
            generation: g,
            since_attach: g.unwrap_or(0),
            seen_unix_s: seen,
            stopped,
        }
    }

    /// Trial 17: `nginx -s quit` 8 s after a reload closed port 19520's listener; it
    /// was said "after reload 1". The refresh that reads the close may come before
    /// the workers' titles change: the next one places it.
    #[test]
    fn a_close_as_the_newest_workers_stop_is_the_stop_s_not_the_reload_s() {
        let mut h = ListenerCloseHistory::default();
        let reload = at(Some(1), Some(32.0), false);
        h.observe(&raw(&[(80, 0, 0)]), 30.0, ReloadSeen::default());
        h.observe(&raw(&[(80, 0, 0)]), 32.0, reload);
        h.observe(&raw(&[(80, 1, 0)]), 40.0, reload);
        h.observe(&raw(&[(80, 1, 0)]), 40.5, at(Some(1), Some(32.0), true));
        let (all, _) = h.of_period(None);
        assert_eq!(all.len(), 1);
        assert!(all[0].at_stop);
        assert!(
            all[0].after_reload().starts_with("as nginx stopped"),
            "{}",
            all[0].after_reload()
        );
        // Without the stop seen (the newest workers serve): the reload's (its old
        // workers' sockets close as they stop or exit, however late).
        let mut h = ListenerCloseHistory::default();
        h.observe(&raw(&[(80, 0, 0)]), 30.0, ReloadSeen::default());
        h.observe(&raw(&[(80, 1, 0)]), 40.0, reload);
        h.observe(&raw(&[(80, 1, 0)]), 40.5, reload);
        let (all, _) = h.of_period(None);
        assert!(!all[0].at_stop);
        assert_eq!(all[0].after_reload(), "after reload 1 (generation 1)");
    }

    /// A reload's close read a refresh before its new workers are seen (the master
    /// closes a dropped listener before it forks them) is that reload's; one read at
    /// the reload stays its own when nginx stops long after.
    #[test]
    fn a_close_read_before_its_reload_s_workers_is_that_reload_s() {
        let mut h = ListenerCloseHistory::default();
        h.observe(&raw(&[(80, 0, 0)]), 1.0, ReloadSeen::default());
        h.observe(&raw(&[(80, 1, 3)]), 5.0, ReloadSeen::default());
        h.observe(&raw(&[(80, 1, 3)]), 5.5, at(Some(1), Some(5.5), false));
        h.observe(&raw(&[(80, 1, 3)]), 30.0, at(Some(1), Some(5.5), true));
        let (all, _) = h.of_period(None);
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].reload_generation, Some(1));
        assert!(!all[0].at_stop);
        assert_eq!(all[0].after_reload(), "after reload 1 (generation 1)");
        // Read long before the new workers: not moved.
        let mut h = ListenerCloseHistory::default();
        h.observe(&raw(&[(80, 1, 0)]), 1.0, ReloadSeen::default());
        h.observe(&raw(&[(80, 1, 0)]), 9.0, at(Some(1), Some(9.0), false));
        let (all, _) = h.of_period(None);
        assert_eq!(all[0].reload_generation, None);
    }

    #[test]
    fn huge_counters_saturate() {
        let mut h = ListenerCloseHistory::default();
        h.observe(&raw(&[(80, u64::MAX, u64::MAX)]), 1.0, gen(1));
        for i in 0..MAX_LISTENER_CLOSES as u16 + 2 {
            h.observe(&raw(&[(1000 + i, u64::MAX, u64::MAX)]), 2.0, gen(1));
        }
        let (_, merged) = h.of_period(None);
        let m = merged.unwrap();
        assert_eq!(m.listeners_closed, u64::MAX);
        assert_eq!(m.resets_of_queued_connections, u64::MAX);
    }
}
