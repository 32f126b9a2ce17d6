//! The recent window the `/metrics` verdict gauges are judged on (exporter mode,
//! `--verdict-window`): snapshots of the cumulative counters taken every tenth of the
//! window, so that a report from the oldest kept one to now covers the last window
//! (up to a tenth more), not the whole time since attach.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::model::snapshot::Snapshot;

/// Snapshots of the last window, oldest first.
pub struct Window {
    length: Duration,
    step: Duration,
    kept: VecDeque<(Instant, Snapshot)>,
}

impl Window {
    /// A window of `length_s` seconds, empty (reports start at attach).
    pub fn new(length_s: f64) -> Window {
        let length = Duration::from_secs_f64(length_s);
        Window {
            length,
            step: length / 10,
            kept: VecDeque::new(),
        }
    }

    /// Whether a snapshot is due at `now` (a tenth of the window since the last one).
    pub fn due(&self, now: Instant) -> bool {
        self.kept
            .back()
            .map(|(t, _)| now.duration_since(*t) >= self.step)
            .unwrap_or(true)
    }

    /// Keeps `snap` taken at `now`, and forgets snapshots no longer needed: the oldest
    /// kept is the newest one at least a window old.
    pub fn push(&mut self, now: Instant, snap: Snapshot) {
        self.kept.push_back((now, snap));
        while self.kept.len() >= 2 && now.duration_since(self.kept[1].0) >= self.length {
            self.kept.pop_front();
        }
    }

    /// The snapshot the window starts at (None: attach, all zero) and the seconds from
    /// there to `now`. `attached` is when the session attached.
    pub fn base(&self, now: Instant, attached: Instant) -> (Option<&Snapshot>, f64) {
        // The newest snapshot at least a window old, else attach.
        let start = self
            .kept
            .iter()
            .rev()
            .find(|(t, _)| now.duration_since(*t) >= self.length);
        match start {
            Some((t, s)) => (Some(s), now.duration_since(*t).as_secs_f64()),
            None => (None, now.duration_since(attached).as_secs_f64()),
        }
    }
}
