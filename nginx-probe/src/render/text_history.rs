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
    if h.workers_failed_to_spawn == 0 && h.workers_crashed == 0 {
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
            "\nnginx failed to spawn {} worker processes since the master started at {} (Unix s; error log){bound}; {running} workers run; the master's open-files limit: soft {}, hard {} (/proc/{}/limits)",
            h.workers_failed_to_spawn,
            h.master_started_unix_s,
            lim(h.master_nofile_soft),
            lim(h.master_nofile_hard),
            r.master_pid
        );
    }
    if h.workers_crashed > 0 {
        let _ = writeln!(
            out,
            "nginx workers crashed {} times since the master started at {} (Unix s; error log: exited on a signal){bound}; nginx's gauges after a crash are its own leaked counts",
            h.workers_crashed, h.master_started_unix_s
        );
    }
}

/// "upstream errors by peer: http://127.0.0.2:8602 37, ..., others 3" (error log).
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
        .map(|p| format!("{} {}", crate::safe::line(&p.peer), p.lines))
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
