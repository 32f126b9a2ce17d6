//! The HTML report's sections on nginx's side: what the clients got, per nginx's own
//! access log (`access_log` of the report), and the configuration nginx runs
//! (`config`: each effective value with its file:line). Pure; the recording was
//! sanitized before it gets here (`render_html`), and maud escapes markup.

use maud::{html, Markup};

use crate::model::access_log::{AccessLogReport, TimeReport};
use crate::model::config::ConfigReport;
use crate::model::{Report, RequestSource};

use super::text_outcomes::{codes, secs};

/// Rows of a table shown, at most (the JSON has them all).
const MAX_ROWS: usize = 64;

fn time_cells(t: Option<&TimeReport>) -> Markup {
    html! {
        @match t {
            Some(t) => {
                td.n { (secs(t.p50_s)) } td.n { (secs(t.p99_s)) } td.n { (secs(t.max_s)) }
            }
            None => { td.n.muted { "not logged" } td.n { } td.n { } }
        }
    }
}

/// "Lines 107 = 100% of nginx's 107 requests (stub_status)", or why the share is not
/// known.
fn share_line(r: &Report, a: &AccessLogReport) -> String {
    match (a.share_logged, r.requests.source, r.requests.count) {
        (Some(s), RequestSource::StubStatus, Some(n)) => format!(
            "{} lines read = {:.0}% of nginx's {n} requests (stub_status).",
            a.lines,
            s * 100.0
        ),
        (_, RequestSource::AccessLog, _) => format!(
            "{} lines read: nginx's request count itself (no stub_status counter here; every request is logged, at once, to a file read).",
            a.lines
        ),
        _ => format!(
            "{} lines read; nginx's request count is unknown, so the share logged is not known.",
            a.lines
        ),
    }
}

/// "What the clients got": nothing when no access log was looked at.
pub fn access_log_section(r: &Report) -> Markup {
    let Some(a) = &r.access_log else {
        return html! {};
    };
    if a.files.is_empty() && a.not_read.is_empty() {
        return html! {};
    }
    html! {
        h2 #access-log { "What the clients got (nginx's access log)" }
        @if !a.files.is_empty() {
            p { (share_line(r, a)) }
            table {
                thead { tr { th { "file" } th { "formats" } th.n { "lines" } th.n { "not in the format" }
                    th.n { "ambiguous" } th.n { "cut" } th.n { "bytes skipped" } th { "buffered" } } }
                @for f in a.files.iter().take(MAX_ROWS) {
                    tr { td.mono { (f.path) } td.mono { (f.formats.join(", ")) } td.n { (f.lines) }
                        td.n { (f.unparsed) } td.n { (f.ambiguous) } td.n { (f.lines_cut) }
                        td.n { (f.bytes_skipped) }
                        td { @if let Some(b) = &f.buffered { (b) " (its last lines reach the file late)" } } }
                }
            }
            p { "Status: " span.mono { (codes(&a.classes)) } " (" span.mono { (codes(&a.statuses)) } ")" }
            @match &a.request_time {
                Some(t) => p { "Request time ($request_time): p50 " (secs(t.p50_s)) ", p90 " (secs(t.p90_s))
                    ", p99 " (secs(t.p99_s)) ", max " (secs(t.max_s)) " over " (t.count) " requests." }
                None => p.muted { "Request time: not logged (no format read has $request_time)." }
            }
            @if !a.servers.is_empty() {
                table {
                    thead { tr { th { "server" } th.n { "requests" } th { "status classes" } } }
                    @for s in a.servers.iter().take(MAX_ROWS) {
                        tr { td.mono { (s.shown()) } td.n { (s.requests) } td.mono { (codes(&s.classes)) } }
                    }
                }
            }
            @if !a.upstreams.is_empty() {
                table {
                    thead { tr { th { "upstream peer" } th.n { "tries" } th { "status" }
                        th.n { "response p50" } th.n { "p99" } th.n { "max" }
                        th.n { "connect p50" } th.n { "p99" } th.n { "max" } } }
                    @for p in a.upstreams.iter().take(MAX_ROWS) {
                        tr { td.mono { (p.peer) } td.n { (p.tries) } td.mono { (codes(&p.statuses)) }
                            (time_cells(p.response_time.as_ref())) (time_cells(p.connect_time.as_ref())) }
                    }
                }
            }
            @if let Some(r) = a.retried_said() {
                p { "Retried: " (r) "." }
            }
            @if !a.lacks.is_empty() {
                p.muted { "Not logged by the format: " (a.lacks.join(", ")) " (unknown, not zero)." }
            }
        }
        @if !a.not_read.is_empty() {
            p { "Not read:" }
            ul { @for n in &a.not_read { li.mono { (n) } } }
        }
    }
}

/// "Configuration": the effective values nginx-probe read, with where each is set.
pub fn config_section(cfg: Option<&ConfigReport>) -> Markup {
    let Some(c) = cfg else {
        return html! {};
    };
    let stale = c.files.iter().filter(|f| f.changed_since_load).count();
    html! {
        h2 #config { "Configuration" }
        p { "Read from " span.mono { (c.main_file) } " (found by " (c.found_by) ") in "
            span.mono { (c.root) } ", " (c.files.len()) " files"
            @if let Some(v) = &c.nginx_version { ", nginx " (v) } "." }
        @if stale > 0 {
            p.note { (stale) " of the files changed after nginx last loaded them: their values are on disk, possibly not loaded." }
        }
        @if !c.errors.is_empty() {
            ul { @for e in &c.errors { li.mono { (e) } } }
        }
        @if let Some(why) = &c.unknown {
            p.note { "Every setting is UNKNOWN (nginx's defaults are not assumed): " span.mono { (why) } }
        }
        table {
            thead { tr { th { "directive" } th { "scope" } th { "value" } th { "set at" } } }
            @for v in c.values.iter().take(MAX_ROWS * 4) {
                tr { td.mono { (v.directive) } td.mono { (v.scope) } td.mono { (v.value) }
                    td.mono { (v.at) @if v.not_loaded { " (on disk, possibly not loaded)" } } }
            }
            @for a in c.access_logs.iter().take(MAX_ROWS) {
                tr { td.mono { "access_log" } td.mono { (a.scope) } td.mono { (a.spec(" unbuffered")) }
                    td.mono { (a.at) @if a.not_loaded { " (on disk, possibly not loaded)" } } }
            }
        }
        @if c.values.len() > MAX_ROWS * 4 {
            p.muted { (c.values.len() - MAX_ROWS * 4) " more values in the JSON." }
        }
    }
}
