//! The tracker's view of what nginx says outside the syscalls: its cgroup's CPU quota
//! and its error log's message classes (a second `impl Tracker`, kept apart for size).

use super::*;

impl Tracker {
    /// Looks up the workers' CPU quota every 2 s (a worker's cgroup, else the
    /// master's) and samples its throttling counters every refresh.
    pub(super) fn sample_quota(&mut self) {
        if self.refreshes.is_multiple_of(4) {
            let pid = self
                .workers
                .values()
                .find(|w| w.alive)
                .map(|w| w.pid)
                .unwrap_or(self.master.pid);
            let q = crate::collect::cgroup::quota_of(pid);
            if q.as_ref().map(|q| &q.cgroup) != self.cpu_quota.as_ref().map(|q| &q.cgroup) {
                // Another cgroup: its counters are not comparable with the old ones.
                self.throttle = Default::default();
            }
            self.cpu_quota = q;
        }
        if let Some(t) = self.cpu_quota.as_ref().and_then(|q| q.throttling()) {
            self.throttle[0].sample(Some(t.nr_periods));
            self.throttle[1].sample(Some(t.nr_throttled));
            self.throttle[2].sample(Some(t.throttled_us));
        }
    }

    /// The workers' CPU quota and its throttling samples, for a report's
    /// `cpu_quota` (None: no quota, or unreadable); the online CPUs are read now.
    pub(super) fn quota_inputs(&self) -> Option<model::nginx::QuotaInputs<'_>> {
        let q = self.cpu_quota.as_ref()?;
        Some(model::nginx::QuotaInputs {
            cgroup: &q.cgroup,
            version: q.version,
            quota_us: q.quota_us,
            period_us: q.period_us,
            cpus: q.cpus(),
            // What nginx's `auto` counts (sysconf(_SC_NPROCESSORS_ONLN)), not
            // available_parallelism, which already divides by the quota.
            online_cpus: aya::util::online_cpus().ok().map(|c| c.len() as u64),
            throttle: &self.throttle,
        })
    }

    /// The error-log part of a report (since attach or in the interval), for
    /// [`PeriodInputs::nginx_errors`](crate::model::build::PeriodInputs::nginx_errors):
    /// built here, as the message classes and levels are `collect::error_log`'s; the
    /// history reads the master's `nofile` limits (`/proc/<pid>/limits`) now.
    pub(super) fn errors_report(&self, summary: bool) -> model::NginxErrorsReport {
        use crate::collect::error_log::{self as el, Group, Status};
        let (path, readable, unknown_reason) = match &self.error_log.status {
            Status::Reading(p) => (Some(p.clone()), true, None),
            Status::Unknown(why) => (None, false, Some(why.clone())),
        };
        let mut classes = BTreeMap::new();
        for (name, levels) in self.error_log.counts(summary) {
            let def = el::class(name);
            classes.insert(
                name.to_string(),
                model::ErrorClassReport {
                    count: levels.iter().sum(),
                    levels: el::LEVELS
                        .iter()
                        .zip(levels.iter())
                        .filter(|(_, &n)| n > 0)
                        .map(|(l, &n)| (l.to_string(), n))
                        .collect(),
                    directive: def.map(|d| d.directive).unwrap_or("-").to_string(),
                    group: def
                        .map(|d| d.group)
                        .unwrap_or(Group::Other)
                        .name()
                        .to_string(),
                },
            );
        }
        // The most verbose level written since attach (not only in this interval).
        let seen = self
            .error_log
            .counts(true)
            .values()
            .fold([0u64; 8], |mut a, l| {
                for i in 0..8 {
                    a[i] += l[i];
                }
                a
            });
        let peers = self.error_log.peer_counts(summary);
        let (top, rest) = peers.top();
        model::NginxErrorsReport {
            path,
            readable,
            unknown_reason,
            classes,
            most_verbose_level_seen: seen
                .iter()
                .rposition(|&n| n > 0)
                .map(|i| el::LEVELS[i].to_string()),
            // LEVELS[3] is `error`: a line there or more verbose shows the level
            // lets refusals through.
            refusals_visible: seen[3..].iter().any(|&n| n > 0).then_some(true),
            lines_cut: self.error_log.tail.lines_cut,
            bytes_skipped: self.error_log.skipped(summary),
            truncations: self.error_log.truncated(summary),
            history: self.history_report(),
            upstream_peers: top
                .into_iter()
                .map(|(peer, lines)| model::PeerErrorsReport { peer, lines })
                .collect(),
            upstream_peers_rest: (rest + peers.unattributed + peers.ambiguous > 0).then_some(
                model::PeerRestReport {
                    other_peers: rest,
                    unattributed: peers.unattributed,
                    ambiguous: peers.ambiguous,
                },
            ),
        }
    }

    /// The master's history since it started: the lines read back at attach plus the
    /// same classes counted since attach.
    fn history_report(&self) -> Option<model::ProcessHistoryReport> {
        use crate::collect::error_log_history::{HISTORY_CLASSES, MAX_HISTORY_BYTES};
        let h = self.error_log.history.as_ref()?;
        let since_attach = self.error_log.counts(true);
        let mut classes = BTreeMap::new();
        for c in HISTORY_CLASSES {
            let n = h.classes.get(c).copied().unwrap_or(0)
                + since_attach.get(c).map(|l| l.iter().sum()).unwrap_or(0);
            if n > 0 {
                classes.insert(c.to_string(), n);
            }
        }
        let (soft, hard) = procfs::process::Process::new(self.master.pid as i32)
            .and_then(|p| p.limits())
            .map(|l| {
                let v = |x: procfs::process::LimitValue| match x {
                    procfs::process::LimitValue::Value(v) => Some(v),
                    procfs::process::LimitValue::Unlimited => None,
                };
                (
                    v(l.max_open_files.soft_limit),
                    v(l.max_open_files.hard_limit),
                )
            })
            .unwrap_or((None, None));
        Some(model::ProcessHistoryReport {
            master_started_unix_s: h.master_started_unix_s,
            bytes_read_back: h.bytes_read,
            bytes_read_back_limit: MAX_HISTORY_BYTES,
            reached_master_start: h.reached_master_start,
            workers_failed_to_spawn: classes.get("worker_spawn_failed").copied().unwrap_or(0),
            workers_exited_fatal: classes.get("worker_exited_fatal").copied().unwrap_or(0),
            spawn_failed_emfile_before_attach: h.spawn_failed_emfile,
            workers_crashed: classes.get("worker_crashed").copied().unwrap_or(0),
            classes,
            master_nofile_soft: soft,
            master_nofile_hard: hard,
        })
    }
}
