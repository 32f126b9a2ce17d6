//! The text report's upstream section: per worker, connects to upstream peers with
//! their latency and errors, connects per request, and the fd-creating syscalls that hit
//! the fd limit.

use std::fmt::Write as _;

use super::cells::{fmt_ns, in_window_what, sampled_tag, worker_rows};
use crate::model::{Report, WorkerReport};

/// Upstream connects per request: all workers' connects over the report's exact request
/// total (nginx's stub_status counter, or the uprobes), with its source; per worker only
/// when the workers' own request counts are known (`--uprobes`), else why not.
fn upstream_per_request_line(r: &Report, rows: &[(String, &WorkerReport)]) -> String {
    let connects: u64 = rows.iter().map(|(_, w)| w.upstream.connects).sum();
    if let Some(d) = &r.detail {
        // Connects are counted in the detail windows only: over the windows' requests.
        return match d.requests_in_windows {
            Some(0) => "per request: no request in the detail windows".to_string(),
            Some(n) => format!(
                "per request, all workers: {connects} connects / {n} requests in the detail windows = {:.2} (SAMPLED; requests: stub_status, exact in the windows)",
                connects as f64 / n as f64
            ),
            None => "per request: unknown (nginx's counters unreadable in the detail windows)".to_string(),
        };
    }
    let all = match r.requests.count {
        Some(0) => "per request: no request in the period".to_string(),
        Some(n) => format!(
            "per request, all workers: {connects} connects / {n} requests = {:.2} (requests: {}, exact total)",
            connects as f64 / n as f64,
            r.requests.source.name()
        ),
        None => format!(
            "per request: unknown ({})",
            r.requests
                .reason
                .as_deref()
                .unwrap_or("no exact request count")
        ),
    };
    let per_worker = if rows
        .iter()
        .any(|(_, w)| w.upstream.connects_per_request.is_some())
    {
        "per worker: the workers' own request counts (uprobe)".to_string()
    } else {
        format!(
            "per worker: unknown ({})",
            rows.iter()
                .find_map(|(_, w)| w.requests.unknown_reason.as_deref())
                .unwrap_or("no per-worker request count")
        )
    };
    format!("{all}; {per_worker}")
}

/// The upstream connections table (only when a worker connected or failed to open a
/// socket) and the EMFILE/ENFILE of fd-creating syscalls (only the non-zero ones).
pub fn upstream_section(r: &Report) -> String {
    let mut out = String::new();
    let rows = worker_rows(r);
    if rows.iter().any(|(_, w)| {
        w.upstream.connects > 0 || w.upstream.socket_emfile + w.upstream.socket_enfile > 0
    }) {
        let _ = writeln!(
            out,
            "\n{:<12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}  CONNECT ERRORS{}",
            "UPSTREAM",
            "CONNECTS",
            "PER REQ",
            "CONN/S",
            "P50",
            "P99",
            "MAX",
            "FDS OPEN",
            "ABANDON",
            sampled_tag(r, &in_window_what(r, "CONN/S per second of"))
        );
        for (label, w) in &rows {
            upstream_row(&mut out, label, &w.upstream);
        }
        let _ = writeln!(
            out,
            "  (connect latency: connect() to the return or getsockopt(SO_ERROR) by which nginx learns the result)"
        );
        let _ = writeln!(out, "  {}", upstream_per_request_line(r, &rows));
    }
    fd_limit_lines(&mut out, &rows);
    out
}

/// One worker's row of the upstream table: connects, per request, per second, connect
/// latency p50/p99/max, upstream fds open, abandoned connects, errors by errno.
fn upstream_row(out: &mut String, label: &str, u: &crate::model::UpstreamReport) {
    let errs: Vec<String> = u
        .errors
        .iter()
        .filter(|(_, &v)| v > 0)
        .map(|(k, v)| format!("{k} {v}"))
        .chain((u.socket_emfile > 0).then(|| format!("socket() EMFILE {}", u.socket_emfile)))
        .chain((u.socket_enfile > 0).then(|| format!("socket() ENFILE {}", u.socket_enfile)))
        .collect();
    let dash = || "-".to_string();
    let _ = writeln!(
        out,
        "{:<12} {:>9} {:>9} {:>9.1} {:>9} {:>9} {:>9} {:>9} {:>8}  {}",
        label,
        u.connects,
        u.connects_per_request
            .map(|v| format!("{v:.2}"))
            .unwrap_or_else(dash),
        u.per_s,
        if u.latency_count > 0 {
            fmt_ns(u.latency_p50_ns)
        } else {
            dash()
        },
        if u.latency_count > 0 {
            fmt_ns(u.latency_p99_ns)
        } else {
            dash()
        },
        if u.latency_count > 0 {
            fmt_ns(u.latency_max_ns)
        } else {
            dash()
        },
        u.fds_open.map(|v| v.to_string()).unwrap_or_else(dash),
        u.abandoned,
        if errs.is_empty() {
            "none".to_string()
        } else {
            errs.join(", ")
        }
    );
}

/// `fd limit hit: worker W: socket() EMFILE n, ...` for each row whose fd-creating
/// syscalls failed with EMFILE or ENFILE.
fn fd_limit_lines(out: &mut String, rows: &[(String, &WorkerReport)]) {
    for (label, w) in rows {
        let failed: Vec<String> = w
            .fd_errors
            .iter()
            .filter(|(_, e)| e.emfile + e.enfile > 0)
            .map(|(k, e)| {
                let mut s = format!("{k}()");
                if e.emfile > 0 {
                    let _ = write!(s, " EMFILE {}", e.emfile);
                }
                if e.enfile > 0 {
                    let _ = write!(s, " ENFILE {}", e.enfile);
                }
                s
            })
            .collect();
        if !failed.is_empty() {
            let _ = writeln!(out, "fd limit hit: worker {label}: {}", failed.join(", "));
        }
    }
}
