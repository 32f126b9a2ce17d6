//! The tracker's view of the workers' cgroup: its CPU quota, looked up every 2 s, and
//! its throttling counters, sampled every refresh (`collect::cgroup`), handed to the
//! model as [`model::nginx::QuotaInputs`].

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
}
