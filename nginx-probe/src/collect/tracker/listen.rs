//! The tracker's listening sockets: sampled from sock_diag each refresh into
//! `model::listen::ListenState`s; `model::listen::listen_reports` reports them per
//! period.

use super::*;

/// Closed listening sockets kept in the reports (the newest ones).
pub const MAX_CLOSED_LISTENERS: usize = 32;

impl Tracker {
    /// Samples nginx's listening sockets; returns their ports.
    pub(super) fn sample_listen(&mut self) -> Vec<u16> {
        let mut ports = Vec::new();
        if self.listen_base_total.is_none() {
            let base = crate::collect::listen::listen_counters(self.master.pid);
            self.listen_base_total = base;
            self.listen_base_interval = base;
        }
        if self.listen_failed {
            return ports;
        }
        let inodes = crate::collect::listen::socket_inodes(self.master.pid);
        match crate::collect::listen::listen_sockets(self.master.pid, &inodes) {
            Ok(samples) => {
                let seen: BTreeSet<u32> = samples.iter().map(|s| s.inode).collect();
                self.mark_closed_listeners(&seen);
                for smp in samples {
                    ports.push(smp.port);
                    let st = self.listen.entry(smp.inode).or_default();
                    st.addr = smp.addr;
                    st.backlog = smp.backlog;
                    st.queue_now = smp.queue;
                    st.queue_max_total = st.queue_max_total.max(smp.queue);
                    st.queue_max_interval = st.queue_max_interval.max(smp.queue);
                    if st.drops_first.is_none() {
                        st.drops_first = smp.drops;
                        st.drops_interval = smp.drops;
                    }
                    st.drops_now = smp.drops;
                    st.closed_seq = None;
                }
            }
            // The master exited between two looks: the run is ending, nothing to say.
            Err(_) if matches!(target::alive(self.master.pid), Ok(false)) => {}
            // Out of file descriptors: no fact about sock_diag; looked at again next
            // refresh (the run names the limit where it matters).
            Err(e) if crate::collect::fd_limit::is_exhaustion(&e) => self.proc_errors += 1,
            Err(e) => {
                self.listen_failed = true;
                warn!("cannot read nginx's listen queues with sock_diag ({e}); reporting without them");
            }
        }
        ports
    }

    /// Marks the listening sockets absent from `seen` (the master no longer holds them)
    /// closed from now on, keeping at most [`MAX_CLOSED_LISTENERS`] of them (the
    /// newest): a reload that drops `reuseport` sockets closes some at every reload.
    fn mark_closed_listeners(&mut self, seen: &BTreeSet<u32>) {
        for (ino, st) in self.listen.iter_mut() {
            if st.closed_seq.is_none() && !seen.contains(ino) {
                self.listeners_closed_seen += 1;
                st.closed_seq = Some(self.listeners_closed_seen);
            }
        }
        let closed: Vec<(u64, u32)> = self
            .listen
            .iter()
            .filter_map(|(ino, st)| st.closed_seq.map(|s| (s, *ino)))
            .collect();
        if closed.len() > MAX_CLOSED_LISTENERS {
            let mut closed = closed;
            closed.sort_unstable();
            for (_, ino) in &closed[..closed.len() - MAX_CLOSED_LISTENERS] {
                self.listen.remove(ino);
            }
        }
    }
}
