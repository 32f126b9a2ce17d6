//! The text report's tables of [`super::sections`]: each section's facts laid out in
//! fixed-width columns (per-worker accepts, listening sockets, requests, event loop,
//! writes by destination, syscalls), with the workers named as the text report names
//! them ([`worker_label`]). The report was sanitized before it gets here
//! (`render_text`).

use std::fmt::Write as _;

use super::sections::{self, Who};
use crate::model::{Report, WorkerReport};
use crate::safe;

/// A worker as the text tables name it: its pid, its pid in its own namespace in
/// parentheses when it has one, `+` when it exited during the run, `~` when it is
/// shutting down (an old generation draining).
pub fn worker_label(w: &WorkerReport) -> String {
    let mut s = w.pid.to_string();
    if w.nspid.len() > 1 {
        let _ = write!(s, "({})", w.nspid[w.nspid.len() - 1]);
    }
    if !w.alive {
        s.push('+');
    } else if w.lifecycle.state == Some(crate::model::worker_lifecycle::WorkerState::ShuttingDown) {
        s.push('~');
    }
    s
}

/// Whom a row is about, as the text tables name it: [`worker_label`], or
/// `exited(N)` for the merged exited workers.
pub fn who_label(who: Who<'_>) -> String {
    match who {
        Who::Worker(w) => worker_label(w),
        Who::Exited { workers, .. } => format!("exited({workers})"),
        Who::Nobody => String::new(),
    }
}

/// `s` with control characters (escape sequences from a crafted recording) escaped as
/// everywhere else ([`safe::bounded`]), at most 32 characters.
pub fn printable(s: &str) -> String {
    safe::bounded(s, 32)
}

/// With `--detail sampled`: "`what` the N s in windows", naming the denominator of a
/// table's per-second rates and busy shares (the in-window seconds); empty otherwise.
pub fn in_window_what(r: &Report, what: &str) -> String {
    r.detail
        .as_ref()
        .map(|d| format!("{what} the {:.3} s in windows", d.in_window_s))
        .unwrap_or_default()
}

/// The marker after a sampled table's header: `[SAMPLED <coverage>%...]` with
/// `--detail sampled`, nothing with `--detail full`.
pub fn sampled_tag(r: &Report, what: &str) -> String {
    match &r.detail {
        Some(d) => format!(
            "  [SAMPLED{}: {:.1}% of the period in detail windows]",
            if what.is_empty() {
                String::new()
            } else {
                format!(" ({what})")
            },
            d.coverage * 100.0
        ),
        None => String::new(),
    }
}

/// The per-worker accepts table ([`sections::accepts`]): the text report puts the fds
/// open, peak and limit in one cell and leaves `accepted then closed` to the JSON and
/// the HTML page, to stay within a terminal's width.
pub fn accepts_table(out: &mut String, r: &Report) {
    let accepts_unknown = !crate::model::sampling::accepts_known(r.detail.as_ref());
    let uprobe_accepts = r.detail.as_ref().is_some_and(|d| d.accepts_from_uprobe());
    // The errno columns are headed by their labels, in the section's order.
    let errnos = sections::ACCEPT_ERRNOS;
    let _ = writeln!(
        out,
        "\n{:<12} {:>9} {:>6} {:>7} {:>7} {:>13} {:>6} {:>6} {:>9} {:>18}{}",
        "WORKER",
        "ACCEPTS",
        "SHARE",
        errnos[0],
        errnos[1],
        errnos[2],
        errnos[3],
        errnos[4],
        errnos[5],
        "FDS OPEN/PEAK/LIM",
        match (accepts_unknown, uprobe_accepts) {
            (true, _) => "  [ACCEPTS UNKNOWN: the uprobe disagrees with nginx's accepted counter]",
            (false, true) => "  [accept errors SAMPLED: accept4 is traced in detail windows only; nginx's error log classes count every failure it logs]",
            (false, false) => "",
        }
    );
    let t = sections::accepts(r);
    for row in &t.rows {
        let c = |label: &str| row.text(&t, label);
        let _ = writeln!(
            out,
            "{:<12} {:>9} {:>6} {:>7} {:>7} {:>13} {:>6} {:>6} {:>9} {:>18}",
            who_label(row.who),
            c("accepts"),
            c("share"),
            c(errnos[0]),
            c(errnos[1]),
            c(errnos[2]),
            c(errnos[3]),
            c(errnos[4]),
            c(errnos[5]),
            format!("{}/{}/{}", c("fds open"), c("fds peak"), c("fd limit")),
        );
    }
    fds_over_limit(out, r);
}

/// A line per worker whose fds peak (`/proc/<pid>/fd`, since attach) is above its soft
/// limit now (`/proc/<pid>/limits`): the kernel gives a new fd only a number below the
/// soft limit but never closes those already open, so the limit was lowered after
/// they opened (nginx's `worker_rlimit_nofile` applied in the worker after the fds it
/// inherited from the master, a `prlimit` from outside), or it changed between the
/// samples. Which of these is not measured.
fn fds_over_limit(out: &mut String, r: &Report) {
    for w in &r.workers {
        if let (Some(peak), Some(limit)) = (w.fds.peak, w.fds.limit) {
            if peak > limit {
                let _ = writeln!(
                    out,
                    "  worker {}: fds peak {peak} is over its soft limit {limit} (/proc/<pid>/limits now): fds opened before the limit was lowered stay open (worker_rlimit_nofile applied after the fds inherited from the master, or a prlimit from outside; not told apart); a new fd gets only a number below the limit, so opening one fails with EMFILE while all {limit} of those are in use",
                    w.pid
                );
            }
        }
    }
}

/// The listening sockets table ([`sections::listen`]), when nginx listens on any.
pub fn listen_table(out: &mut String, r: &Report) {
    if r.listen.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n{:<28} {:>8} {:>10} {:>10}",
        "LISTEN", "BACKLOG", "QUEUE NOW", "QUEUE MAX"
    );
    let t = sections::listen(r);
    for row in &t.rows {
        let c = |label: &str| row.text(&t, label);
        let _ = writeln!(
            out,
            "{:<28} {:>8} {:>10} {:>10}",
            c("address"),
            c("backlog"),
            c("queue now"),
            c("queue max"),
        );
    }
    if let Some(n) = sections::listen_namespace(r) {
        let _ = writeln!(out, "{}", n.text);
    }
}

/// The per-worker requests table ([`sections::requests`]; the text report leaves the
/// max to the JSON and the HTML page) and each worker's syscalls per request; only
/// when the workers' requests are counted (`--uprobes`).
pub fn requests_table(out: &mut String, r: &Report) {
    if !r.workers.iter().any(|w| w.requests.count.is_some()) {
        return;
    }
    let _ = writeln!(
        out,
        "\n{:<12} {:>9} {:>9} {:>9} {:>9} {:>9}   per worker: uprobes",
        "WORKER", "REQUESTS", "REQ/S", "REQ/CONN", "P50", "P99"
    );
    let t = sections::requests(r);
    for row in &t.rows {
        let c = |label: &str| row.text(&t, label);
        let _ = writeln!(
            out,
            "{:<12} {:>9} {:>9} {:>9} {:>9} {:>9}",
            who_label(row.who),
            c("requests"),
            c("req/s"),
            c("req/conn"),
            c("p50"),
            c("p99"),
        );
    }
    let _ = writeln!(out, "\nsyscalls per request:");
    for w in &r.workers {
        if w.requests.syscalls_per_request.is_empty() {
            continue;
        }
        let mix = per_request_mix(&w.requests.syscalls_per_request);
        let _ = writeln!(out, "{:<12} {}", worker_label(w), mix);
    }
}

/// `writev 1.00  epoll_wait 2.00`: syscalls per request, two decimals.
pub fn per_request_mix(m: &std::collections::BTreeMap<String, f64>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k} {v:.2}"))
        .collect::<Vec<_>>()
        .join("  ")
}

/// One line per worker of [`sections::event_loop`]: iterations, busy time and share,
/// p99 and longest iteration (the CPU seconds are in the JSON and the HTML page).
pub fn event_loop_lines(out: &mut String, r: &Report) {
    if r.workers.iter().all(|w| w.event_loop.iterations == 0) {
        return;
    }
    let _ = writeln!(
        out,
        "\nevent loop (epoll wait return to the next wait, main thread):{}",
        sampled_tag(r, &in_window_what(r, "busy % of"))
    );
    let t = sections::event_loop(r);
    let share = sections::busy_share_label(r);
    for row in &t.rows {
        let c = |label: &str| row.text(&t, label);
        let _ = writeln!(
            out,
            "{:<12} {} iterations  busy {} ({})  p99 iteration {}  longest {}",
            who_label(row.who),
            c("iterations"),
            c("busy"),
            c(share),
            c("p99 iteration"),
            c("max iteration"),
        );
    }
}

/// The writes-by-destination table ([`sections::writes`]; the text report leaves the
/// total time to the JSON and the HTML page) and each worker's access-log opens.
pub fn writes_table(out: &mut String, r: &Report) {
    let t = sections::writes(r);
    if t.rows.is_empty() {
        return;
    }
    let source = match r.write_destinations {
        crate::model::WriteSource::FdTable => "classified at each write from the worker's fd table",
        crate::model::WriteSource::ProcSnapshot => {
            "from /proc fd snapshots every 2 s: fds that live for one request may be misfiled"
        }
    };
    let _ = writeln!(
        out,
        "\n{:<12} {:<18} {:>9} {:>12} {:>9} {:>9} {:>8} {:>8}   writes: {source}{}",
        "WORKER",
        "DESTINATION",
        "CALLS",
        "BYTES",
        "P50",
        "P99",
        "SYSCALL%",
        "PER REQ",
        sampled_tag(r, "")
    );
    for w in &r.workers {
        for row in t.rows_of(w) {
            let c = |label: &str| row.text(&t, label);
            let _ = writeln!(
                out,
                "{:<12} {:<18} {:>9} {:>12} {:>9} {:>9} {:>8} {:>8}",
                worker_label(w),
                printable(c("destination")),
                c("calls"),
                c("bytes"),
                c("p50"),
                c("p99"),
                c("share of syscall time"),
                c("per request"),
            );
        }
        access_log_opens_line(out, r, w);
    }
}

/// A worker's opens of its access log (openat), with opens per request unless sampled:
/// opens in windows over requests of the whole period would mislead.
fn access_log_opens_line(out: &mut String, r: &Report, w: &WorkerReport) {
    let Some(opens) = w.access_log_opens.filter(|&n| n > 0) else {
        return;
    };
    let count = w.requests.count.filter(|_| r.detail.is_none());
    let per = match count.filter(|&c| c > 0) {
        Some(c) => format!(" ({:.2} per request)", opens as f64 / c as f64),
        None => String::new(),
    };
    let _ = writeln!(out, "{:<12} access-log opens {opens}{per}", worker_label(w));
}

/// The syscalls table ([`sections::syscalls`]), one row per worker and syscall called.
pub fn syscalls_table(out: &mut String, r: &Report) {
    let uprobe_accepts = r.detail.as_ref().is_some_and(|d| d.accepts_from_uprobe());
    let _ = writeln!(
        out,
        "\n{:<12} {:<12} {:>9} {:>8} {:>9} {:>9} {:>9} {:>10} {:>12}{}",
        "WORKER",
        "SYSCALL",
        "COUNT",
        "ERRORS",
        "P50",
        "P99",
        "MAX",
        "TOTAL",
        "BYTES/EVENTS",
        sampled_tag(
            r,
            if uprobe_accepts {
                "every syscall, accept4 included"
            } else {
                "all but accept4/accept and rare fd-creating calls"
            }
        )
    );
    let t = sections::syscalls(r);
    for row in &t.rows {
        let c = |label: &str| row.text(&t, label);
        let _ = writeln!(
            out,
            "{:<12} {:<12} {:>9} {:>8} {:>9} {:>9} {:>9} {:>10} {:>12}",
            who_label(row.who),
            c("syscall"),
            c("calls"),
            c("errors"),
            c("p50"),
            c("p99"),
            c("max"),
            c("total"),
            c("bytes / events")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker whose limit was lowered under the fds it holds: 120 peak over a soft
    /// limit of 64 gets its line; one within its limit gets none.
    #[test]
    fn a_peak_over_the_soft_limit_is_said_with_what_it_means() {
        let mut r = crate::render::prometheus::tests::report();
        r.workers.truncate(2);
        r.workers[0].fds.peak = Some(120);
        r.workers[0].fds.limit = Some(64);
        r.workers[1].fds.peak = Some(64);
        r.workers[1].fds.limit = Some(64);
        let mut out = String::new();
        fds_over_limit(&mut out, &r);
        assert_eq!(
            out,
            format!("  worker {}: fds peak 120 is over its soft limit 64 (/proc/<pid>/limits now): fds opened before the limit was lowered stay open (worker_rlimit_nofile applied after the fds inherited from the master, or a prlimit from outside; not told apart); a new fd gets only a number below the limit, so opening one fails with EMFILE while all 64 of those are in use\n", r.workers[0].pid)
        );
    }
}
