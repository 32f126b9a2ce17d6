//! How many series the Prometheus text has per worker (the documented bound), summed
//! from the rows of [`FAMILIES`], and which syscalls get a latency histogram there
//! (the timed ones).

use super::prometheus_families::FAMILIES;
use super::prometheus_format::{is_timed, Workers};

/// Series of one live worker with `timed` traced syscalls that have entry programs
/// and `untimed` exit-only ones (`--syscalls core`: 12 and 8; `all`: 17 and 8): the sum
/// of [`Family::series`](super::prometheus_format::Family::series) over the families
/// a live worker has. One more with `--uprobes` (`worker_requests_total`,
/// [`Workers::Uprobes`]); an exited worker has the [`Workers::Live`] ones fewer (its fd
/// gauges and `upstream_fds_open`), the merged exited workers also no
/// [`Workers::Listed`] ones (`worker_info`).
pub const fn series_per_worker(timed: usize, untimed: usize) -> usize {
    series_of(timed, untimed, Workers::Live)
}

/// Series of a worker with `timed` and `untimed` syscalls that has the families of
/// every kind of [`Workers`] up to `who`: [`Workers::All`] (the merged exited workers),
/// [`Workers::Listed`] (an exited worker) or [`Workers::Live`].
pub(crate) const fn series_of(timed: usize, untimed: usize, who: Workers) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < FAMILIES.len() {
        let f = &FAMILIES[i];
        let counted = match f.workers {
            Workers::None | Workers::Uprobes => false,
            Workers::All => true,
            Workers::Listed => !matches!(who, Workers::All),
            Workers::Live => matches!(who, Workers::Live),
        };
        if counted {
            let s = f.series;
            n += s.fixed + s.per_traced * (timed + untimed) + s.per_timed * timed;
        }
        i += 1;
    }
    n
}

/// [`series_per_worker`] for a list of traced syscall names.
pub fn series_for(traced: &[String]) -> usize {
    let timed = traced.iter().filter(|n| is_timed(n)).count();
    series_per_worker(timed, traced.len() - timed)
}
