//! `nginx-probe report FILE --html OUT`: a recording as one self-contained HTML page
//! (inline CSS and SVG, no script, nothing fetched), to attach to a ticket.
//!
//! [`render_html`] is pure (a recording in, the page out; unit tests feed it real
//! recordings); `cli` writes it with [`crate::io::files::write_atomic`].

use maud::{html, Markup, PreEscaped, DOCTYPE};

use crate::{
    model::recording::Recording,
    model::{bucket_bounds, Report, SyscallReport},
    render::figures::fmt_syscall_ns as sys_ns,
    render::html_workers::{cells, head, worker_name},
    render::text::{event_line, utc_datetime},
};

/// The page's style sheet: plain, light tables, numbers in a monospace face.
const CSS: &str = r#"
body{font:14px/1.45 "DejaVu Sans","Liberation Sans",system-ui,sans-serif;color:#1d2329;background:#fff;margin:20px auto;max-width:1180px;padding:0 16px}
h1{font-size:22px;margin:0 0 2px}
h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d6dbe0;padding-bottom:3px}
h3{font-size:14px;margin:16px 0 4px}
p.sub{margin:0 0 12px;color:#56606b}
table{border-collapse:collapse;margin:4px 0 12px}
th,td{padding:3px 10px;border-bottom:1px solid #e3e7eb;text-align:left;vertical-align:top}
thead th{background:#f3f5f7;font-weight:600;border-bottom:1px solid #cfd5db}
table.kv th{background:none;font-weight:600;color:#444d56;white-space:nowrap}
td.n,th.n{text-align:right}
td.n,.mono,code{font-family:"DejaVu Sans Mono","Liberation Mono",ui-monospace,monospace;font-size:12.5px}
.note{background:#fff8e1;border:1px solid #f0d98c;padding:6px 10px;margin:8px 0}
.muted{color:#6a737d}
.verdict{border-left:4px solid #c99a06;background:#fffbf0;padding:8px 12px;margin:10px 0}
.verdict.critical{border-left-color:#c62828;background:#fff5f5}
.verdict p{margin:4px 0}
.sev{display:inline-block;font-weight:700;text-transform:uppercase;font-size:11px;letter-spacing:.03em;padding:1px 6px;border-radius:3px;color:#fff;background:#a67c00;margin-right:6px}
.critical .sev{background:#c62828}
.verdict table{margin:4px 0}
.verdict td,.verdict th{padding:1px 10px 1px 0;border:none;background:none}
.none{color:#2e7d32;font-weight:600}
.bars{margin:6px 0 12px}
.bar-row{display:flex;align-items:center;margin:4px 0}
.bar-label{width:330px;flex:none}
.bar-track{flex:1;background:#eef1f4;height:18px;border-radius:2px}
.bar{display:block;height:18px;background:#4a78a8;border-radius:2px}
.exited .bar{background:#a3adb8}
figure.hist{display:inline-block;margin:4px 18px 14px 0;vertical-align:top;border:1px solid #e3e7eb;padding:6px 8px}
figure.hist figcaption{font-size:12.5px;margin-bottom:2px}
svg text{font-family:"DejaVu Sans Mono","Liberation Mono",monospace;font-size:10px;fill:#3b4550}
details{margin:6px 0}
footer{margin-top:32px;color:#6a737d;font-size:12px}
"#;

/// Renders a recording as one self-contained HTML page: header, verdicts, accept-share
/// bars, per-worker tables, latency histograms per worker and syscall, and the
/// per-interval timeline. Everything taken from the recording is escaped.
pub fn render_html(rec: &Recording) -> String {
    // HTML escaping covers markup, not control characters: a title or path with an
    // escape sequence would reach whoever `cat`s or greps the page. Shown escaped
    // (`\x1b`), as on a terminal.
    let rec = &Recording {
        header: rec.header.as_ref().map(crate::safe::sanitized),
        intervals: rec.intervals.iter().map(crate::safe::sanitized).collect(),
        summary: rec.summary.as_ref().map(crate::safe::sanitized),
        ..rec.clone()
    };
    let (whole, note) = rec.whole_run();
    let title = match &rec.header {
        Some(h) => format!(
            "nginx-probe report: {} {}",
            h.host,
            utc_datetime(h.started_unix_s)
        ),
        None => format!("nginx-probe report: master {}", whole.master_pid),
    };
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(CSS)) }
            }
            body {
                (header_section(rec, whole))
                @if let Some(n) = &note { p.note { (n) } }
                @if rec.truncated_tail {
                    p.note { "The recording's last line was cut off mid-write and was skipped." }
                }
                (verdicts_section(whole))
                (accepts_section(whole))
                (connections_section(whole))
                (lifecycle_section(whole))
                (timeline_section(&rec.intervals))
                (super::html_workers::workers_section(whole))
                (histograms_section(whole))
                (super::html_outcomes::access_log_section(whole))
                (super::html_outcomes::config_section(whole.config.as_ref()))
                (other_section(whole))
                footer {
                    "Written by nginx-probe " (env!("CARGO_PKG_VERSION"))
                    " from a recording. Self-contained: no script, nothing loaded from elsewhere."
                }
            }
        }
    };
    page.into_string()
}

fn header_section(rec: &Recording, whole: &Report) -> Markup {
    let intervals = rec.intervals.len();
    html! {
        h1 { "nginx-probe report" }
        @match &rec.header {
            Some(h) => {
                p.sub {
                    (h.host) " · nginx master " span.mono { (h.master_pid) } " · "
                    (utc_datetime(h.started_unix_s)) " · " (format!("{:.1}", whole.duration_s)) " s"
                }
                table.kv {
                    tr { th { "host" } td { (h.host) " (" (h.cpus) " CPUs)" } }
                    tr { th { "kernel" } td.mono { (h.kernel) } }
                    tr { th { "nginx" } td { (h.nginx_version.as_deref().unwrap_or("version unknown")) } }
                    tr { th { "master" } td { span.mono { (h.master_pid) } " " code { (h.master_title) } } }
                    tr { th { "workers at attach" } td.mono { (join(h.workers.iter())) } }
                    tr { th { "started (UTC)" } td.mono { (utc_datetime(h.started_unix_s)) } }
                    tr { th { "duration" } td.mono { (format!("{:.1} s", whole.duration_s)) } }
                    tr { th { "options" } td {
                        "interval " span.mono { (h.options.interval_s) " s" }
                        "; syscalls " span.mono { (h.options.syscalls.join(", ")) }
                        "; " (if h.options.uprobes { "request uprobes" } else { "no uprobes (requests from nginx's counters)" })
                    } }
                    tr { th { "command" } td { code { (h.options.argv.join(" ")) } } }
                    tr { th { "recorded" } td { (intervals) " intervals" (end_reason(whole)) " · " (h.tool) } }
                }
            }
            None => {
                p.sub { "nginx master " span.mono { (whole.master_pid) } " · ended "
                    (utc_datetime(whole.time_unix_s)) " · " (format!("{:.1}", whole.duration_s)) " s" }
                table.kv {
                    tr { th { "master" } td.mono { (whole.master_pid) } }
                    tr { th { "ended (UTC)" } td.mono { (utc_datetime(whole.time_unix_s)) } }
                    tr { th { "duration" } td.mono { (format!("{:.1} s", whole.duration_s)) } }
                    tr { th { "syscalls" } td.mono { (whole.traced_syscalls.join(", ")) } }
                    tr { th { "recorded" } td { (intervals) " intervals" (end_reason(whole))
                        " · no header (a captured --json stdout): host, kernel and options unknown" } }
                }
            }
        }
    }
}

fn end_reason(r: &Report) -> String {
    r.end_reason
        .as_ref()
        .map(|e| format!(", ended: {e}"))
        .unwrap_or_default()
}

fn verdicts_section(r: &Report) -> Markup {
    html! {
        h2 #verdicts { "Verdicts" }
        @if r.verdicts.is_empty() {
            p.none data-verdicts="0" { "No verdicts: none of the rules fired for this run." }
        }
        @for v in &r.verdicts {
            @let sev = super::sections::severity_name(v.severity);
            div class={ "verdict " (sev) } data-verdict=(v.id) {
                p { span.sev { (sev) } strong.mono { (v.id) } }
                p { (v.advice) }
                table {
                    @for (k, val) in &v.evidence {
                        tr { th.mono { (k) } td.mono { (val.to_string()) } }
                    }
                }
                p { "directives: "
                    @if v.directives.is_empty() { (super::text::NO_DIRECTIVE) }
                    @for (i, d) in v.directives.iter().enumerate() {
                        @if i > 0 { ", " }
                        code { (d) }
                    }
                }
            }
        }
        @for n in &r.not_judged {
            p.none data-not-judged=(n.rules.join(",")) { "Not judged: " span.mono { (n.rules.join(", ")) } ": " (n.why) }
        }
    }
}

/// nginx's client connections over the run: who closed first, idle time before
/// nginx's closes, resets, listening sockets closed per reload. The same lines as the
/// text report's CONNECTIONS section ([`super::text_connections::connections_lines`],
/// one source of the facts), each escaped; or why they were not traced. Nothing when
/// neither.
fn connections_section(r: &Report) -> Markup {
    html! {
        @match super::text_connections::connections_lines(r) {
            Some(Ok((source, lines))) => section id="connections" {
                h2 { "Connections" }
                p.muted { (source) }
                ul { @for l in &lines { li { (l) } } }
            },
            Some(Err(why)) => section id="connections" {
                h2 { "Connections" }
                p.muted { "Not counted: " (why) }
            },
            None => {},
        }
    }
}

/// nginx's workers draining after reloads and the exits of the run: the text report's
/// WORKER LIFECYCLE section ([`super::text_lifecycle::lifecycle_section`], one source of
/// the facts), its source line as a note and the rest as preformatted rows (the
/// worker table's columns stay aligned), escaped. Nothing when the report has no
/// lifecycle part (nothing drained or exited).
fn lifecycle_section(r: &Report) -> Markup {
    let text = super::text_lifecycle::lifecycle_section(r);
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let Some(title) = lines.next() else {
        return html! {};
    };
    let rows: Vec<&str> = lines.collect();
    html! {
        section id="lifecycle" {
            h2 { "Worker lifecycle" }
            p.muted { (title.trim_start_matches("WORKER LIFECYCLE").trim()) }
            pre { (rows.join("\n")) }
        }
    }
}

/// A bar width in percent of its track, from a share (0..=1): one decimal.
fn bar_width(share: f64) -> String {
    let s = if share.is_finite() {
        share.clamp(0.0, 1.0)
    } else {
        0.0
    };
    format!("{:.1}%", s * 100.0)
}

fn accepts_section(r: &Report) -> Markup {
    let total: u64 = r.workers.iter().map(|w| w.accepts).sum::<u64>()
        + r.exited_merged
            .as_ref()
            .map(|m| m.stats.accepts)
            .unwrap_or(0);
    let rate = if r.duration_s > 0.0 {
        total as f64 / r.duration_s
    } else {
        0.0
    };
    html! {
        h2 #accepts { "Accepts per worker" }
        p { span.mono data-total-accepts=(total) { (total) } " accepts in "
            (format!("{:.1}", r.duration_s)) " s (" span.mono { (format!("{rate:.1}")) } "/s)" }
        div.bars {
            @for w in &r.workers {
                div class={ "bar-row" @if !w.alive { " exited" } } data-pid=(w.pid) data-accepts=(w.accepts) {
                    span.bar-label {
                        "worker " span.mono { (worker_name(w)) } " — "
                        span.mono { (w.accepts) } " accepts ("
                        span.mono { (format!("{:.1}%", w.accept_share * 100.0)) } ")"
                        @if !w.alive { " · exited" }
                    }
                    span.bar-track { span.bar style={ "width:" (bar_width(w.accept_share)) } {} }
                }
            }
            @if let Some(m) = &r.exited_merged {
                div.bar-row.exited data-pid="0" data-accepts=(m.stats.accepts) {
                    span.bar-label {
                        (m.workers) " older exited workers — " span.mono { (m.stats.accepts) } " accepts ("
                        span.mono { (format!("{:.1}%", m.stats.accept_share * 100.0)) } ")"
                    }
                    span.bar-track { span.bar style={ "width:" (bar_width(m.stats.accept_share)) } {} }
                }
            }
        }
        @if r.workers.iter().any(|w| !w.alive) {
            p.muted { "Grey bars: workers that exited during the run (a reload or a crash); their numbers up to the exit stay." }
        }
    }
}

fn join<T: std::fmt::Display>(it: impl Iterator<Item = T>) -> String {
    it.map(|x| x.to_string()).collect::<Vec<_>>().join(" ")
}

/// Compact duration for histogram axes, three significant digits: `512ns`, `1.02us`,
/// `16.4us`, `131us`, `1.05ms`, `550s`.
pub fn short_ns(ns: u64) -> String {
    let three = |v: f64, unit: &str| {
        if v < 10.0 {
            format!("{v:.2}{unit}")
        } else if v < 100.0 {
            format!("{v:.1}{unit}")
        } else {
            format!("{v:.0}{unit}")
        }
    };
    if ns < 1_000 {
        format!("{ns}ns")
    } else if ns < 1_000_000 {
        three(ns as f64 / 1e3, "us")
    } else if ns < 1_000_000_000 {
        three(ns as f64 / 1e6, "ms")
    } else {
        three(ns as f64 / 1e9, "s")
    }
}

/// Axis label of log2 bucket `b` (of `buckets`): its lower bound, `≥` on the last,
/// open-ended bucket.
pub fn bucket_label(b: usize, buckets: usize) -> String {
    let lo = bucket_bounds(b).0;
    if b + 1 == buckets {
        format!("≥{}", short_ns(lo))
    } else {
        short_ns(lo)
    }
}

/// Width of one histogram bucket column, px, and the widest a histogram gets (more
/// buckets than fit get narrower columns, labelled every other one).
const HIST_SLOT: usize = 46;
const HIST_MAX_WIDTH: usize = 1080;
/// Height of the tallest histogram bar, px.
const HIST_BAR_MAX: f64 = 90.0;

/// One latency histogram as an SVG bar chart: the buckets from the first to the last
/// non-empty one (one more on each side for context), bar heights linear in the count,
/// the count above each bar and the bucket's lower bound below it.
fn histogram_svg(hist: &[u64]) -> Markup {
    let (Some(first), Some(last)) = (
        hist.iter().position(|&c| c > 0),
        hist.iter().rposition(|&c| c > 0),
    ) else {
        return html! { p.muted { "no calls timed" } };
    };
    let first = first.saturating_sub(1);
    let last = (last + 1).min(hist.len() - 1);
    let peak = hist.iter().copied().max().unwrap_or(1).max(1) as f64;
    let n = last - first + 1;
    let slot = HIST_SLOT.min(HIST_MAX_WIDTH / n);
    let label_every = if slot < 40 { 2 } else { 1 };
    let width = n * slot + 8;
    let top = 16.0;
    let base = top + HIST_BAR_MAX;
    let height = base as usize + 20;
    html! {
        svg width=(width) height=(height) viewBox={ "0 0 " (width) " " (height) } role="img" {
            line x1="4" y1=(base) x2=(width - 4) y2=(base) stroke="#8a949e" stroke-width="1" {}
            @for b in first..=last {
                @let c = hist[b];
                @let x = 4 + (b - first) * slot;
                @let h = if c == 0 { 0.0 } else { (c as f64 / peak * HIST_BAR_MAX).max(1.5) };
                @let (lo, hi) = bucket_bounds(b);
                g class="bucket" data-bucket=(b) data-count=(c) {
                    title { (format!("{} to {}: {c} calls", short_ns(lo), if b + 1 == hist.len() { "∞".to_string() } else { short_ns(hi + 1) })) }
                    @if c > 0 {
                        rect x=(x + slot / 10) y=(format!("{:.1}", base - h)) width=(slot - slot / 5) height=(format!("{h:.1}")) fill="#4a78a8" {}
                        text x=(x + slot / 2) y=(format!("{:.1}", base - h - 3.0)) text-anchor="middle" { (c) }
                    }
                    @if (b - first) % label_every == 0 {
                        text.label x=(x + slot / 2) y=(base + 13.0) text-anchor="middle" { (bucket_label(b, hist.len())) }
                    }
                }
            }
        }
    }
}

fn histograms_section(r: &Report) -> Markup {
    html! {
        h2 #histograms { "Latency histograms" }
        p.muted { "Per worker and traced syscall with calls: calls by latency, log2 buckets in ns (each label is its bucket's lower bound; a bucket runs to twice that)." }
        @for w in &r.workers {
            @let calls: Vec<(&String, &SyscallReport)> = w.syscalls.iter().filter(|(_, s)| s.count > 0).collect();
            @if !calls.is_empty() {
                h3 { "worker " span.mono { (worker_name(w)) } @if !w.alive { " (exited)" } }
                @for (name, s) in calls {
                    figure.hist data-pid=(w.pid) data-syscall=(name) data-calls=(s.count) {
                        figcaption {
                            strong.mono { (name) } " · " span.mono { (s.count) } " calls"
                            @if s.errors > 0 { " (" span.mono { (s.errors) } " errors)" }
                            " · p50 " span.mono { (sys_ns(r, name, s, s.p50_ns, false)) }
                            " · p99 " span.mono { (sys_ns(r, name, s, s.p99_ns, false)) }
                            " · max " span.mono { (sys_ns(r, name, s, s.max_ns, false)) }
                        }
                        (histogram_svg(&s.hist_log2_ns))
                    }
                }
            }
        }
    }
}

/// One interval's totals: (seconds since the start at its end, duration, accepts,
/// requests).
fn interval_totals(intervals: &[Report]) -> Vec<(f64, f64, u64, u64)> {
    let mut t = 0.0;
    intervals
        .iter()
        .map(|r| {
            t += r.duration_s;
            let merged = r.exited_merged.as_ref().map(|m| &m.stats);
            let accepts = r.workers.iter().chain(merged).map(|w| w.accepts).sum();
            // Unknown requests plot as 0 (the report says why).
            let requests = r.requests.count.unwrap_or(0);
            (t, r.duration_s, accepts, requests)
        })
        .collect()
}

/// A round upper bound for a chart's y axis: 1, 2 or 5 times a power of ten.
fn nice_max(v: f64) -> f64 {
    if v.is_nan() || v <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|&m| m >= v)
        .unwrap_or(10.0 * p)
}

fn timeline_section(intervals: &[Report]) -> Markup {
    let rows = interval_totals(intervals);
    let rate = |n: u64, d: f64| if d > 0.0 { n as f64 / d } else { 0.0 };
    let req: Vec<f64> = rows.iter().map(|&(_, d, _, q)| rate(q, d)).collect();
    let acc: Vec<f64> = rows.iter().map(|&(_, d, a, _)| rate(a, d)).collect();
    // Each line on its own scale (requests left, accepts right): with keepalive there
    // are thousands of requests per accept, and one scale would flatten accepts to 0.
    let ymax = nice_max(req.iter().copied().fold(0.0, f64::max));
    let amax = nice_max(acc.iter().copied().fold(0.0, f64::max));
    let tmax = rows.last().map(|r| r.0).unwrap_or(1.0).max(1e-9);
    let (w, h, left, right, top, bottom) = (900.0, 220.0, 64.0, 64.0, 12.0, 36.0);
    let x = |t: f64| left + (w - left - right) * t / tmax;
    let y = |v: f64| top + (h - top - bottom) * (1.0 - v / ymax);
    let ya = |v: f64| top + (h - top - bottom) * (1.0 - v / amax);
    let points = |vs: &[f64], y: &dyn Fn(f64) -> f64| {
        rows.iter()
            .zip(vs)
            .map(|(r, v)| format!("{:.1},{:.1}", x(r.0), y(*v)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let label_every = rows.len().div_ceil(15).max(1);
    html! {
        h2 #timeline { "Timeline" }
        @if rows.is_empty() {
            p.muted { "No intervals in this recording: only the summary." }
        } @else {
            p { span style="color:#4a78a8;font-weight:700" { "━ requests/s" } "   "
                span style="color:#d9822b;font-weight:700" { "╍ accepts/s" }
                span.muted { " per interval (requests on the left scale, accepts on the right), seconds since the start" } }
            svg width=(w) height=(h) viewBox={ "0 0 " (w) " " (h) } role="img" data-intervals=(rows.len()) {
                @for i in 0..=4 {
                    @let v = ymax * i as f64 / 4.0;
                    line x1=(left) x2=(w - right) y1=(format!("{:.1}", y(v))) y2=(format!("{:.1}", y(v))) stroke="#e3e7eb" {}
                    text x=(left - 6.0) y=(format!("{:.1}", y(v) + 3.5)) text-anchor="end" fill="#4a78a8" { (format!("{v}")) }
                    @let va = amax * i as f64 / 4.0;
                    text x=(w - right + 6.0) y=(format!("{:.1}", y(v) + 3.5)) text-anchor="start" fill="#d9822b" { (format!("{va}")) }
                }
                line x1=(left) x2=(w - right) y1=(y(0.0)) y2=(y(0.0)) stroke="#8a949e" {}
                @for (i, r) in rows.iter().enumerate() {
                    @if i % label_every == 0 || i + 1 == rows.len() {
                        text x=(format!("{:.1}", x(r.0))) y=(h - bottom + 16.0) text-anchor="middle" { (format!("{:.0}s", r.0)) }
                    }
                }
                polyline.requests points=(points(&req, &y)) fill="none" stroke="#4a78a8" stroke-width="3" {}
                polyline.accepts points=(points(&acc, &ya)) fill="none" stroke="#d9822b" stroke-width="2" stroke-dasharray="6 4" {}
                @for (r, (q, a)) in rows.iter().zip(req.iter().zip(&acc)) {
                    circle cx=(format!("{:.1}", x(r.0))) cy=(format!("{:.1}", y(*q))) r="3" fill="#4a78a8" {
                        title { (format!("{:.0}s: {q:.1} requests/s", r.0)) } }
                    circle cx=(format!("{:.1}", x(r.0))) cy=(format!("{:.1}", ya(*a))) r="3" fill="#d9822b" {
                        title { (format!("{:.0}s: {a:.1} accepts/s", r.0)) } }
                }
            }
            details {
                summary { "Per-interval numbers" }
                table {
                    thead { tr { th.n { "end, s" } th.n { "length, s" } th.n { "accepts" } th.n { "accepts/s" }
                        th.n { "requests" } th.n { "requests/s" } th { "verdicts" } th { "events" } } }
                    @for (r, (t, d, a, q)) in intervals.iter().zip(rows.iter().copied()) {
                        tr {
                            td.n { (format!("{t:.1}")) } td.n { (format!("{d:.2}")) }
                            td.n { (a) } td.n { (format!("{:.1}", rate(a, d))) }
                            td.n { (q) } td.n { (format!("{:.1}", rate(q, d))) }
                            td.mono { (r.verdicts.iter().map(|v| v.id.as_str()).collect::<Vec<_>>().join(" ")) }
                            td { (r.events.iter().map(|e| event_line(e, r.master_pid, r.master.is_some())).collect::<Vec<_>>().join("; ")) }
                        }
                    }
                }
            }
        }
    }
}

/// Listening sockets ([`super::sections::listen`]), log files, worker events, and what
/// was not accounted ([`super::sections::drops`]).
fn other_section(r: &Report) -> Markup {
    let drops = super::sections::drops(r);
    let listen = super::sections::listen(r);
    html! {
        @if !r.listen.is_empty() {
            h2 #listen { "Listening sockets" }
            table {
                thead { tr { @for c in &listen.columns { (head(c)) } } }
                @for row in &listen.rows { tr { (cells(&listen, row)) } }
            }
            @if let Some(n) = super::sections::listen_namespace(r) {
                p.muted { (n.text) }
            }
        }
        @if !r.logs.is_empty() {
            h2 #logs { "Log files" }
            table {
                @for (path, kind) in &r.logs { tr { td.mono { (path) } td { (kind) } } }
            }
        }
        @if !r.events.is_empty() {
            h2 #events { "Events" }
            ul { @for e in &r.events { li { (event_line(e, r.master_pid, r.master.is_some())) } } }
        }
        h2 #accounting { "Accounting" }
        @if drops.is_empty() {
            p { "Every traced event was accounted." }
        } @else {
            p { "Not fully accounted: " span.mono { (drops.join(" ")) } }
        }
        @if !r.missing_tracepoints.is_empty() {
            p { "Not attached (the kernel lacks them): " span.mono { (r.missing_tracepoints.join(" ")) } }
        }
    }
}

#[cfg(test)]
#[path = "html_tests.rs"]
mod tests;
