//! The HTML page's "Workers" section: the per-worker tables of [`super::sections`]
//! (accepts and fds, requests, event loop, writes by destination, syscalls) laid out as
//! HTML tables, every column of a section in its order, and what the page adds around
//! them (all of nginx's requests, nginx's counters, TLS handshakes, syscalls per
//! request). Pure; the recording was sanitized before it gets here (`render_html`), and
//! maud escapes markup.

use maud::{html, Markup};

use super::figures::{fmt_ns, fmt_quantile_ns};
use super::sections::{self, opt, Cell, Column, Kind, Row, Table, Who};
use crate::model::{Report, RequestSource, WorkerReport};

/// A worker as the page names it: its pid, and its pid in its own namespace when it
/// has one.
pub fn worker_name(w: &WorkerReport) -> String {
    let mut s = w.pid.to_string();
    if w.nspid.len() > 1 {
        s += &format!(" ({} in its namespace)", w.nspid[w.nspid.len() - 1]);
    }
    s
}

/// A column's heading: numbers right-aligned.
pub(super) fn head(c: &Column) -> Markup {
    html! {
        @if c.kind == Kind::Number { th.n { (c.label) } } @else { th { (c.label) } }
    }
}

/// A cell as its column reads: a number right-aligned, a name monospace.
fn cell(c: &Column, v: &Cell) -> Markup {
    html! {
        @match c.kind {
            Kind::Number => td.n { (v.text) },
            Kind::Code => td.mono { (v.text) },
            Kind::Words => td { (v.text) },
        }
    }
}

/// The cells of `row`, one per column of `t`.
pub(super) fn cells(t: &Table<'_>, row: &Row<'_>) -> Markup {
    html! { @for (c, v) in t.columns.iter().zip(&row.cells) { (cell(c, v)) } }
}

/// The heading row of a per-worker table: `worker`, then every column of `t`.
fn heads(t: &Table<'_>) -> Markup {
    html! { thead { tr { th { "worker" } @for c in &t.columns { (head(c)) } } } }
}

/// The worker of a row of a per-worker table; None for the merged exited workers,
/// which the page shows in the accepts bars only.
fn live<'a>(row: &Row<'a>) -> Option<&'a WorkerReport> {
    match row.who {
        Who::Worker(w) => Some(w),
        Who::Exited { .. } | Who::Nobody => None,
    }
}

/// "Workers": every per-worker table of the report.
pub fn workers_section(r: &Report) -> Markup {
    let accepts = sections::accepts(r);
    let event_loop = sections::event_loop(r);
    let syscalls = sections::syscalls(r);
    html! {
        h2 #workers { "Workers" }
        h3 { (accepts.title) }
        table {
            (heads(&accepts))
            @for (row, w) in accepts.rows.iter().filter_map(|row| Some((row, live(row)?))) {
                tr { td.mono { (worker_name(w)) @if !w.alive { " (exited)" } } (cells(&accepts, row)) }
            }
        }
        (requests_part(r))
        (per_request_table(r))
        h3 { (event_loop.title) }
        (plain_table(&event_loop))
        (writes_table(r))
        h3 { (syscalls.title) }
        (plain_table(&syscalls))
    }
}

/// A per-worker table whose rows are named by the worker alone.
fn plain_table(t: &Table<'_>) -> Markup {
    html! {
        table {
            (heads(t))
            @for (row, w) in t.rows.iter().filter_map(|row| Some((row, live(row)?))) {
                tr { td.mono { (worker_name(w)) } (cells(t, row)) }
            }
        }
    }
}

/// "Requests": all of nginx's, nginx's own counters, TLS handshakes, then the
/// per-worker requests table ([`sections::requests`]) when the workers' requests are
/// counted, else where per-worker requests would come from.
fn requests_part(r: &Report) -> Markup {
    let source = match r.workers.first().map(|w| w.requests.source) {
        Some(RequestSource::Uprobe) => "per worker: counted by uprobes",
        Some(RequestSource::Estimate) => {
            "per worker: estimated from writev calls (older recording)"
        }
        _ => "per worker: unknown without --uprobes",
    };
    let per_worker_known = r.workers.iter().any(|w| w.requests.count.is_some());
    let t = &r.requests;
    let requests = sections::requests(r);
    html! {
        h3 { (requests.title) }
        p {
            "All of nginx: " strong { (t.count.map(|c| c.to_string()).unwrap_or_else(|| "unknown".into())) }
            " requests (" (opt(t.per_s.map(|v| format!("{v:.1}")))) "/s, "
            (opt(t.per_connection.map(|v| format!("{v:.1}")))) " per connection), source "
            code { (t.source.name()) }
            @if let Some(why) = &t.reason { span.muted { " — " (why) } }
        }
        @if let Some(n) = &r.stub_status {
            p.muted { "nginx's own counters: accepted " (n.accepted) ", handled " (n.handled)
                ", dropped " (n.dropped) ", requests " (n.requests) "; at the end: active " (n.active)
                ", reading " (n.reading) ", writing " (n.writing) ", waiting " (n.waiting) }
        }
        @if let Some(q) = &r.quic {
            p.muted { (q.line()) }
            @if let Some(l) = q.ends_line() { p.muted { (l.trim_start()) } }
            @if let Some(l) = q.ends_settings(r.config.as_ref()) { p.muted { (l.trim_start()) } }
        }
        (tls_paragraph(r))
        p.muted { (source) }
        @if per_worker_known {
            (plain_table(&requests))
        }
    }
}

/// The TLS handshakes of the period, or that none were seen, and where libssl's
/// figures come from ([`sections::tls_libssl`]).
fn tls_paragraph(r: &Report) -> Markup {
    let libssl = r.tls.as_ref().and_then(sections::tls_libssl);
    html! {
        @if r.tls.as_ref().is_some_and(|h| h.started == 0 && h.handshakes == 0 && h.abandoned == 0) {
            p.muted { "TLS handshakes: none seen (libssl's uprobes attached: no TLS connection in the period, or no TLS listener)" }
        } @else if let Some(h) = r.tls.as_ref().filter(|h| h.libssl_from.as_deref() == Some("none")) {
            p { "TLS handshakes: " strong { (h.handshakes) } " completed (counted by nginx's ngx_ssl_ocsp_validate; not timed)" }
        } @else if let Some(h) = &r.tls {
            p { "TLS handshakes: " strong { (h.handshakes) } " completed ("
                @if h.libssl_sampled { "counted by nginx; in the detail windows: " }
                (h.started) " started, "
                (h.abandoned) " abandoned); wall time p50 " (fmt_quantile_ns(h.timed_handshakes(), h.p50_ns)) ", p99 " (fmt_quantile_ns(h.timed_handshakes(), h.p99_ns))
                "; inside SSL_do_handshake " (opt(h.call_ns_per_handshake.map(fmt_ns))) " per handshake"
                @if let Some(sh) = h.share_of_worker_busy { ", " (format!("{:.0}%", sh * 100.0)) " of the workers' busy time" } }
        }
        @if let Some(l) = r.tls.as_ref().and_then(|h| super::text::tls_unused_line(r, h)) {
            p { (l) }
        }
        @if let Some(l) = libssl {
            p.muted { "libssl's figures: " code { (l) } }
        }
    }
}

/// "Syscalls per request": all workers, then each worker counted; columns only for
/// the syscalls some worker called (in the traced order).
fn per_request_table(r: &Report) -> Markup {
    let t = &r.requests;
    let per_request: Vec<&String> = r
        .traced_syscalls
        .iter()
        .filter(|s| {
            t.syscalls_per_request.contains_key(*s)
                || r.workers
                    .iter()
                    .any(|w| w.requests.syscalls_per_request.contains_key(*s))
        })
        .collect();
    let two = |v: Option<&f64>| opt(v.map(|v| format!("{v:.2}")));
    html! {
        h3 { "Syscalls per request" }
        table {
            thead { tr { th { "worker" } @for s in &per_request { th.n { (s) } } } }
            @if !t.syscalls_per_request.is_empty() {
                tr {
                    td.mono { "all workers" }
                    @for s in &per_request { td.n { (two(t.syscalls_per_request.get(*s))) } }
                }
            }
            @for w in r.workers.iter().filter(|w| !w.requests.syscalls_per_request.is_empty()) {
                tr {
                    td.mono { (worker_name(w)) }
                    @for s in &per_request { td.n { (two(w.requests.syscalls_per_request.get(*s))) } }
                }
            }
        }
    }
}

/// "Writes by destination" ([`sections::writes`]), each worker's rows followed by its
/// access-log opens (openat) with opens per request.
fn writes_table(r: &Report) -> Markup {
    let t = sections::writes(r);
    let source = match r.write_destinations {
        crate::model::WriteSource::FdTable => "classified at each write from the worker's fd table",
        crate::model::WriteSource::ProcSnapshot => {
            "from /proc fd snapshots every 2 s: fds that live for one request may be misfiled"
        }
    };
    html! {
        h3 { (t.title) span.muted { " — write, writev, pwrite64, pwritev; " (source) } }
        table {
            (heads(&t))
            @for w in &r.workers {
                @for row in t.rows_of(w) {
                    tr { td.mono { (worker_name(w)) } (cells(&t, row)) }
                }
                @if let Some(opens) = w.access_log_opens.filter(|&n| n > 0) {
                    tr {
                        td.mono { (worker_name(w)) } td { "access-log opens (openat)" }
                        td.n { (opens) } td {} td {} td {} td {} td {}
                        td.n { (opt(w.requests.count.filter(|&c| c > 0).map(|c| format!("{:.2}", opens as f64 / c as f64)))) }
                    }
                }
            }
        }
    }
}
