//! The text lines on the master's history (from its error log back to its start) and
//! the error-log peers: kept apart from `text.rs` for size.

use std::fmt::Write;

use crate::model::Report;

/// "nginx failed to spawn K worker processes since the master started at T (error
/// log); N workers run; the master's nofile soft/hard" and crashes; nothing when the
/// history holds neither.
pub fn history_lines(out: &mut String, r: &Report) {
    let Some(h) = r.nginx_errors.as_ref().and_then(|e| e.history.as_ref()) else {
        return;
    };
    if h.workers_failed_to_spawn + h.workers_crashed + h.workers_killed == 0 {
        return;
    }
    let running = r.workers.iter().filter(|w| w.alive).count();
    let lim = |v: Option<u64>| {
        v.map(|v| v.to_string())
            .unwrap_or_else(|| "unlimited".into())
    };
    let bound = if h.reached_master_start {
        String::new()
    } else {
        format!(
            " (at least: {} bytes read back did not reach the master's start)",
            h.bytes_read_back
        )
    };
    if h.workers_failed_to_spawn > 0 {
        let _ = writeln!(
            out,
            "\nnginx failed to spawn {} worker processes since the master started at {} (error log){bound}; {running} workers run; the master's open-files limit: soft {}, hard {} (/proc/{}/limits)",
            h.workers_failed_to_spawn,
            super::clock::utc_datetime(h.master_started_unix_s as f64),
            lim(h.master_nofile_soft),
            lim(h.master_nofile_hard),
            r.master_pid
        );
        if !h.spawn_failed_by_before_attach.is_empty() {
            let by: Vec<String> = h
                .spawn_failed_by_before_attach
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            let _ = writeln!(
                out,
                "  before attach, by failed call and errno: {}",
                by.join(", ")
            );
        }
        if let Some(p) = &h.master_pids_limit {
            let _ = writeln!(
                out,
                "  the master's cgroup {} (v{}): pids.max {}, pids.current {}, forks refused at the limit {} (pids.events, since the cgroup was made)",
                crate::safe::line(&p.cgroup),
                p.cgroup_version,
                p.max,
                p.current.map_or("unknown".to_string(), |c| c.to_string()),
                p.refused.map_or("unknown".to_string(), |c| c.to_string())
            );
        }
    }
    if h.workers_crashed + h.workers_killed > 0 {
        let _ = writeln!(
            out,
            "nginx workers since the master started at {} (error log){bound}: {} died on a crash signal (SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL; {} during this run), {} were killed by another signal (SIGKILL: the OOM killer or an operator); nginx's gauges after such an exit are its own leaked counts",
            super::clock::utc_datetime(h.master_started_unix_s as f64),
            h.workers_crashed,
            h.workers_crashed_since_attach,
            h.workers_killed
        );
    }
    if h.crash_lines_contradicted > 0 {
        let _ = writeln!(
            out,
            "{} worker crash lines written during this run name no worker the kernel saw exit (none of that pid since attach, or one still running): not nginx's (a client can write lines into the error log), not counted",
            h.crash_lines_contradicted
        );
    }
}

/// "upstream error lines by peer (error log): http://127.0.0.2:8602 37
/// (upstream_reset 37), ..., other peers 3, ..." (error log): each peer's lines, by
/// class where they were counted so (which peer refused, which reset).
pub fn peer_line(out: &mut String, r: &Report) {
    let Some(e) = r.nginx_errors.as_ref() else {
        return;
    };
    if e.upstream_peers.is_empty() {
        return;
    }
    let mut parts: Vec<String> = e
        .upstream_peers
        .iter()
        .map(|p| {
            let classes: Vec<String> = p
                .by_class
                .iter()
                .map(|(c, n)| format!("{} {n}", crate::safe::line(c)))
                .collect();
            if classes.is_empty() {
                format!("{} {}", crate::safe::line(&p.peer), p.lines)
            } else {
                format!(
                    "{} {} ({})",
                    crate::safe::line(&p.peer),
                    p.lines,
                    classes.join(", ")
                )
            }
        })
        .collect();
    if let Some(rest) = &e.upstream_peers_rest {
        parts.push(format!(
            "other peers {}, no peer {}, ambiguous {}",
            rest.other_peers, rest.unattributed, rest.ambiguous
        ));
    }
    let _ = writeln!(
        out,
        "upstream error lines by peer (error log): {}",
        parts.join(", ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which peer refused and which reset: each peer's lines by class.
    #[test]
    fn the_peer_line_gives_each_peer_by_class() {
        let mut r = crate::render::prometheus::tests::report();
        let peer = |p: &str, class: &str| crate::model::PeerErrorsReport {
            peer: p.into(),
            lines: 300,
            by_class: [(class.to_string(), 300)].into(),
        };
        r.nginx_errors = Some(crate::model::NginxErrorsReport {
            readable: true,
            upstream_peers: vec![
                peer("http://127.0.0.1:18901", "upstream_connect_failed"),
                peer("http://127.0.0.1:18902", "upstream_reset"),
            ],
            ..Default::default()
        });
        let mut out = String::new();
        peer_line(&mut out, &r);
        assert_eq!(
            out,
            "upstream error lines by peer (error log): http://127.0.0.1:18901 300 (upstream_connect_failed 300), http://127.0.0.1:18902 300 (upstream_reset 300)\n"
        );
    }
}
