//! The text report's upstream section: the upstream connections table (per worker,
//! the merged exited workers last), connects per request, and the EMFILE/ENFILE of
//! fd-creating syscalls. Only the text report shows these (the JSON and Prometheus
//! carry the figures). The report was sanitized before it gets here (`render_text`).

use std::fmt::Write as _;

use super::figures::fmt_ns;
use super::text_tables::{in_window_what, sampled_tag, who_label};
use crate::model::{Report, WorkerReport};

/// The workers' rows as the text report names them: live workers, then the merged
/// exited ones as `exited(N)`.
fn worker_rows(r: &Report) -> Vec<(String, &WorkerReport)> {
    super::sections::workers(r)
        .filter_map(|who| Some((who_label(who), who.worker()?)))
        .collect()
}

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
            "per request, all workers: {connects} connects / {n} requests = {:.2} (requests: {}, exact total{})",
            connects as f64 / n as f64,
            r.requests.source.name(),
            // A client request proxied to nginx itself counts once per hop (trial 12).
            match crate::model::own_hops(r.config.as_ref(), r.connections.as_ref(), &r.listen) {
                Some(_) => "; nginx's own hops among them: per hop, not per client request",
                None => "",
            }
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
        upstream_table(&mut out, r, &rows);
    }
    super::text_upstream_peers::peers_section(&mut out, r);
    for (label, w) in &rows {
        fd_limit_line(&mut out, label, w);
    }
    out
}

/// The upstream connections table: connects, per request and per second, connect
/// latency, upstream fds open, abandoned connects and connect errors.
fn upstream_table(out: &mut String, r: &Report, rows: &[(String, &WorkerReport)]) {
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
    for (label, w) in rows {
        let u = &w.upstream;
        let dash = || "-".to_string();
        let latency = |ns| {
            if u.latency_count > 0 {
                fmt_ns(ns)
            } else {
                dash()
            }
        };
        let _ = writeln!(
            out,
            "{:<12} {:>9} {:>9} {:>9.1} {:>9} {:>9} {:>9} {:>9} {:>8}  {}",
            label,
            u.connects,
            u.connects_per_request
                .map(|v| format!("{v:.2}"))
                .unwrap_or_else(dash),
            u.per_s,
            latency(u.latency_p50_ns),
            latency(u.latency_p99_ns),
            latency(u.latency_max_ns),
            u.fds_open.map(|v| v.to_string()).unwrap_or_else(dash),
            u.abandoned,
            connect_errors(w),
        );
    }
    let _ = writeln!(
        out,
        "  (connect latency: connect() to the return or getsockopt(SO_ERROR) by which nginx learns the result)"
    );
    let _ = writeln!(out, "  {}", upstream_per_request_line(r, rows));
}

/// A worker's upstream connect errors by errno and its `socket()` EMFILE/ENFILE, or
/// `none`.
fn connect_errors(w: &WorkerReport) -> String {
    let u = &w.upstream;
    let errs: Vec<String> = u
        .errors
        .iter()
        .filter(|(_, &v)| v > 0)
        .map(|(k, v)| format!("{k} {v}"))
        .chain((u.socket_emfile > 0).then(|| format!("socket() EMFILE {}", u.socket_emfile)))
        .chain((u.socket_enfile > 0).then(|| format!("socket() ENFILE {}", u.socket_enfile)))
        .collect();
    if errs.is_empty() {
        "none".to_string()
    } else {
        errs.join(", ")
    }
}

/// `fd limit hit: worker W: accept4() EMFILE 3, ...`: the fd-creating syscalls that
/// failed on the fd limit (EMFILE: the worker's, ENFILE: the system's); nothing when
/// none did.
fn fd_limit_line(out: &mut String, label: &str, w: &WorkerReport) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_connects_per_request_is_global_without_uprobes() {
        // The summary of a real recording (2 workers, `--syscalls all`, 300 connections).
        let jsonl = include_str!("../testdata/two_workers_300_connections.jsonl");
        let mut r: Report = serde_json::from_str(jsonl.lines().last().unwrap()).unwrap();
        // 300 proxied requests, each opening an upstream connection; nginx's own
        // request counter, per-worker requests unknown (no --uprobes).
        r.requests.count = Some(300);
        r.requests.source = crate::model::RequestSource::StubStatus;
        for (w, c) in r.workers.iter_mut().zip([140, 160]) {
            w.upstream.connects = c;
            w.upstream.connects_per_request = None;
            w.requests.count = None;
            w.requests.unknown_reason = Some(crate::model::PER_WORKER_UNKNOWN.into());
        }
        let text = upstream_section(&r);
        assert!(
            text.contains("per request, all workers: 300 connects / 300 requests = 1.00 (requests: stub_status, exact total); per worker: unknown (per-worker requests need --uprobes"),
            "{text}"
        );
        // Requests unknown: the global figure is unknown too, with the reason.
        r.requests.count = None;
        r.requests.reason = Some("nginx's counters are not exported".into());
        let text = upstream_section(&r);
        assert!(
            text.contains("per request: unknown (nginx's counters are not exported)"),
            "{text}"
        );
    }
}
