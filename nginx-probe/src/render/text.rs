//! Rendering a [`Report`] as text (per-worker tables, bcc-style log2 histograms) or JSON.

pub use super::clock::{clock, utc_datetime};
pub use super::figures::{fmt_ns, fmt_quantile_ns, fmt_syscall_ns};
use std::fmt::Write as _;

use super::sections;
use super::text_tables::{self, worker_label};
use crate::model::{bucket_bounds, Event, EventKind, Report, ReportKind};
use crate::safe;

/// What a verdict with no nginx directive to change shows on its directives line (a
/// stop's resets, clients that close their own connections): the advice says what
/// does.
pub const NO_DIRECTIVE: &str = "none of nginx's changes this (the advice says what does)";

/// One line describing a worker-set event of master `master`'s run, for stderr and the
/// summary; `all`: the run follows every master (`--all`, the report's `master` is set),
/// which changes what a binary upgrade's new master gets.
pub fn event_line(ev: &Event, master: u32, all: bool) -> String {
    match ev.event {
        EventKind::WorkerStarted => format!("+{:.1}s worker {} started (forked by master {master}); tracing it", ev.t_s, ev.pid),
        EventKind::WorkerExited => format!("+{:.1}s worker {} exited", ev.t_s, ev.pid),
        EventKind::NewMaster if all => format!(
            "+{:.1}s new nginx master {} started under master {master} (binary upgrade, USR2); --all follows it as a master of its own, with its own summary, from the first /proc scan after master {master} exits; until then its workers are not traced",
            ev.t_s, ev.pid
        ),
        EventKind::NewMaster => format!(
            "+{:.1}s new nginx master {} started under master {master} (binary upgrade, USR2); this run keeps following master {master}: trace the new one with --pid {}",
            ev.t_s, ev.pid, ev.pid
        ),
        EventKind::NewMasterFailed => format!(
            "+{:.1}s a binary upgrade failed: master {master}'s child {} exited before it became a master or a worker (execve() of the new binary failed, or its configuration did not load: the configuration loads line and nginx's error log say which)",
            ev.t_s, ev.pid
        ),
        EventKind::MasterRestart => format!(
            "+{:.1}s attached to nginx master {} after the previous master exited (exporter mode)",
            ev.t_s, ev.pid
        ),
        EventKind::Unknown => format!("+{:.1}s unknown event, pid {}", ev.t_s, ev.pid),
    }
}

/// The TLS handshakes line: counts with wall-time percentiles, or that none were seen
/// (the uprobes attach whenever nginx has libssl's functions or its own count, TLS
/// listener or not: nginx-probe does not read the config to know), then where libssl's
/// figures come from (a shared libssl, OpenSSL linked into nginx, or none and why).
pub fn tls_line(h: &crate::model::TlsReport) -> String {
    let libssl = sections::tls_libssl(h);
    let from = libssl
        .as_deref()
        .map(|l| format!("; libssl's figures: {l}"))
        .unwrap_or_default();
    if h.started == 0 && h.handshakes == 0 && h.abandoned == 0 {
        // Which uprobes watched: libssl's, or nginx's count alone (trial 21: "libssl's
        // uprobes attached" was said with them left out).
        let which = if h.libssl_from.as_deref() == Some("none") {
            "nginx's ngx_ssl_ocsp_validate uprobe attached"
        } else {
            "libssl's uprobes attached"
        };
        return format!("TLS handshakes: none seen ({which}: no TLS connection in the period, or no TLS listener){from}");
    }
    if h.libssl_from.as_deref() == Some("none") {
        return format!(
            "TLS handshakes {} (counted by nginx's ngx_ssl_ocsp_validate; not timed){from}",
            h.handshakes
        );
    }
    let timed = h.timed_handshakes();
    format!(
        "TLS handshakes {} ({}started {}, abandoned {})  wall p50 {}  p99 {}  inside SSL_do_handshake {} each{}{from}",
        h.handshakes,
        if h.libssl_sampled {
            "counted by nginx; in the detail windows: "
        } else {
            ""
        },
        h.started,
        h.abandoned,
        fmt_quantile_ns(timed, h.p50_ns),
        fmt_quantile_ns(timed, h.p99_ns),
        h.call_ns_per_handshake
            .map(fmt_ns)
            .unwrap_or_else(|| "-".into()),
        h.share_of_worker_busy
            .map(|s| format!(", {:.0}% of the workers' busy time", s * 100.0))
            .unwrap_or_default(),
    )
}

/// The completed handshakes that carried no request, when the access log counts the
/// connections that carried one and the floor is above 0
/// ([`crate::model::tls_unused::handshakes_without_request`]); None otherwise.
pub fn tls_unused_line(r: &Report, h: &crate::model::TlsReport) -> Option<String> {
    crate::model::tls_unused::handshakes_without_request(
        h,
        r.access_log.as_ref(),
        crate::model::own_hops(r.config.as_ref(), r.connections.as_ref(), &r.listen),
        r.quic.is_some(),
        r.stub_status.as_ref().map(|s| s.active),
    )
    .ok()?
    .said()
}

/// bcc-style log2 histogram (`nsecs : count | **** |`), from the first to the last
/// non-empty bucket. Empty string when the histogram is empty.
pub fn log2_hist(hist: &[u64], unit: &str) -> String {
    let first = hist.iter().position(|&c| c > 0);
    let last = hist.iter().rposition(|&c| c > 0);
    let (Some(first), Some(last)) = (first, last) else {
        return String::new();
    };
    let peak = *hist.iter().max().unwrap_or(&1);
    let mut out = String::new();
    let _ = writeln!(out, "{:>28}: {:<9} distribution", unit, "count");
    for (b, &count) in hist.iter().enumerate().take(last + 1).skip(first) {
        let (lo, hi) = bucket_bounds(b);
        let hi = if b == hist.len() - 1 {
            "inf".to_string()
        } else {
            hi.to_string()
        };
        let stars = if peak == 0 {
            0
        } else {
            (count as u128 * 40).div_ceil(peak as u128) as usize
        };
        let _ = writeln!(
            out,
            "{:>12} -> {:<12}: {:<9} |{:<40}|",
            lo,
            hi,
            count,
            "*".repeat(stars.min(40))
        );
    }
    out
}

/// Renders a report as the text tables printed every interval and at exit.
/// `hist` names a syscall whose per-worker histogram is appended.
///
/// The sections in order: the header and verdicts, the per-worker tables of
/// [`super::sections`] laid out by [`super::text_tables`], nginx's side (lifecycle,
/// listen queues, connections, error log, access log, configuration), requests, the
/// upstream section, syscalls, then what was not accounted and the worker events.
///
/// Every string of the report (it may come from a recording someone sent) is shown with
/// its control characters escaped ([`safe`]), and so is the whole text.
pub fn render_text(r: &Report, hist: Option<&str>, clock: &str) -> String {
    let r = &safe::sanitized(r);
    let hist = hist.map(safe::line);
    let mut out = String::new();
    // Under --all, each master's report opens with the line naming it.
    if let Some(m) = &r.master {
        out.push_str(&m.header());
        out.push('\n');
    }
    header_lines(&mut out, r, clock);
    verdict_lines(&mut out, r);
    text_tables::accepts_table(&mut out, r);
    out.push_str(&super::text_lifecycle::lifecycle_section(r));
    text_tables::listen_table(&mut out, r);
    super::text_connections::connections_section(&mut out, r);
    nginx_section(&mut out, r);
    super::text_outcomes::access_log_section(&mut out, r);
    super::text_config::config_section(&mut out, r);
    requests_lines(&mut out, r);
    text_tables::requests_table(&mut out, r);
    text_tables::event_loop_lines(&mut out, r);
    text_tables::writes_table(&mut out, r);
    out.push_str(&super::text_upstream::upstream_section(r));
    text_tables::syscalls_table(&mut out, r);
    if let Some(name) = hist.as_deref() {
        histograms(&mut out, r, name);
    }
    footer_lines(&mut out, r);
    safe::block(&out).into_owned()
}

/// The first line (clock, INTERVAL or SUMMARY, length, master, live workers, accepts of
/// all workers with the merged exited ones, per second) and the detail sampling line.
fn header_lines(out: &mut String, r: &Report, clock: &str) {
    let total_accepts: u64 = r
        .workers
        .iter()
        .map(|w| w.accepts)
        .chain(r.exited_merged.as_ref().map(|m| m.stats.accepts))
        .fold(0u64, u64::saturating_add);
    let title = if r.kind == ReportKind::Summary {
        "SUMMARY"
    } else {
        "INTERVAL"
    };
    let accepts_unknown = !crate::model::sampling::accepts_known(r.detail.as_ref());
    let _ = writeln!(
        out,
        "\n{clock} {title} {:.1}s  master {}  workers {}  accepts {}{} ({:.1}/s)",
        r.duration_s,
        r.master_pid,
        r.workers.iter().filter(|w| w.alive).count(),
        total_accepts,
        if accepts_unknown {
            " UNKNOWN (disagrees with nginx's accepted counter)"
        } else {
            ""
        },
        if r.duration_s > 0.0 {
            total_accepts as f64 / r.duration_s
        } else {
            0.0
        },
    );
    if let Some(d) = &r.detail {
        let _ = writeln!(out, "{}", d.line());
    }
}

/// `verdicts: none`, or each verdict with its severity, advice, evidence and the
/// directives to look at.
fn verdict_lines(out: &mut String, r: &Report) {
    if r.verdicts.is_empty() {
        let _ = writeln!(out, "verdicts: none");
        not_judged_lines(out, r);
        return;
    }
    let _ = writeln!(out, "VERDICTS");
    for v in &r.verdicts {
        let sev = sections::severity_name(v.severity);
        let _ = writeln!(out, "  [{sev}] {}: {}", v.id, v.advice);
        let ev: Vec<String> = v
            .evidence
            .iter()
            // A string as it is (the report is sanitized before rendering: its
            // control characters are already shown as escapes), not JSON-escaped a
            // second time (`\x1b` printed as `\\x1b`, `"` as `\"`).
            .map(|(k, val)| match val {
                serde_json::Value::String(s) => format!("{k}=\"{s}\""),
                other => format!("{k}={other}"),
            })
            .collect();
        let _ = writeln!(out, "      evidence: {}", ev.join(" "));
        // Trial 17: an empty line read as a directive left out.
        let directives = if v.directives.is_empty() {
            NO_DIRECTIVE.to_string()
        } else {
            v.directives.join(", ")
        };
        let _ = writeln!(out, "      directives: {directives}");
    }
    not_judged_lines(out, r);
}

/// `  not judged: a, b: why` for each group of rules the period could not judge.
fn not_judged_lines(out: &mut String, r: &Report) {
    for n in &r.not_judged {
        let _ = writeln!(
            out,
            "  not judged: {}: {}",
            safe::line(&n.rules.join(", ")),
            safe::line(&n.why)
        );
    }
}

/// Requests per connection over the connections that carried data, when some were
/// closed before their client sent a byte (counted at the close: see the
/// CONNECTIONS section); nothing with QUIC connections (no accept carried them).
fn with_data_line(out: &mut String, r: &Report) {
    let Some((per, carried, unused)) = super::text_connections::per_carried(r) else {
        return;
    };
    let _ = writeln!(
        out,
        "  per connection that carried data {per:.2} ({carried} of {} accepts; {unused} carried no request: closed before their client sent a byte, tcp_sock.bytes_received, or their TLS handshake abandoned{})",
        carried + unused,
        super::text_connections::tls_carried_caveat(r)
    );
}

/// Requests per connection over the connections that carried a request, counted in a
/// complete access log that logs `$connection_requests` (lines with 1: a connection's
/// first request); nothing otherwise, with QUIC connections, or `listen unix:`.
fn with_request_line(out: &mut String, r: &Report) {
    let Some((count, carried, missing)) = super::text_connections::logged_carried(r) else {
        return;
    };
    let missing = match missing {
        0 => String::new(),
        m => format!("; the log may miss {m} of nginx's requests, so up to {m} more"),
    };
    let _ = writeln!(
        out,
        "  per connection that carried a request {:.2} ({} requests over {carried} connections: access-log lines with $connection_requests 1{missing}; connections open before the period add their requests and not themselves)",
        count as f64 / carried as f64,
        r.requests.source.name()
    );
}

/// All of nginx's requests (count, per second, per connection, source), nginx's own
/// counters, QUIC, TLS handshakes and the syscalls per request of all workers.
fn requests_lines(out: &mut String, r: &Report) {
    let t = &r.requests;
    let opt = |v: Option<f64>| v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into());
    let _ = writeln!(
        out,
        "\nREQUESTS {} ({:.1}/s)  per connection {}  source: {}{}",
        t.count
            .map(|c| c.to_string())
            .unwrap_or_else(|| "unknown".into()),
        t.per_s.unwrap_or(0.0),
        opt(t.per_connection),
        t.source.name(),
        t.reason
            .as_deref()
            .map(|why| format!(" ({})", text_tables::printable(why)))
            .unwrap_or_default(),
    );
    with_data_line(out, r);
    with_request_line(out, r);
    // Whole (trial 10: cut at 32 characters, "nginx also accepts on a unix soc…"),
    // escaped: it quotes the configuration's addresses and paths.
    if let Some(why) = crate::model::own_hops(r.config.as_ref(), r.connections.as_ref(), &r.listen)
    {
        let _ = writeln!(out, "  {}", crate::safe::bounded(&why, 1024));
    }
    if let Some(n) = &r.stub_status {
        let _ = writeln!(
            out,
            "nginx's counters: accepted {}  handled {}  dropped {}  requests {}  active {}  reading {}  writing {}  waiting {}",
            n.accepted, n.handled, n.dropped, n.requests, n.active, n.reading, n.writing, n.waiting
        );
    }
    if let Some(q) = &r.quic {
        let _ = writeln!(out, "{}", crate::safe::line(&q.line()));
        if let Some(l) = q.ends_line() {
            let _ = writeln!(out, "{}", crate::safe::line(&l));
        }
        if let Some(l) = q.ends_settings(r.config.as_ref()) {
            let _ = writeln!(out, "{}", crate::safe::line(&l));
        }
    }
    if let Some(h) = &r.tls {
        let _ = writeln!(out, "{}", tls_line(h));
        if let Some(l) = tls_unused_line(r, h) {
            let _ = writeln!(out, "  {l}");
        }
    }
    if !t.syscalls_per_request.is_empty() {
        let _ = writeln!(
            out,
            "syscalls per request: {}{}",
            text_tables::per_request_mix(&t.syscalls_per_request),
            match &r.detail {
                Some(d) => format!(
                    "  [SAMPLED: detail syscalls per request of the {} requests in windows]",
                    d.requests_in_windows
                        .map(|n| n.to_string())
                        .unwrap_or_else(|| "unknown".into())
                ),
                None => String::new(),
            }
        );
    }
}

/// Each worker's log2 latency histogram of syscall `name` (`--hist`).
fn histograms(out: &mut String, r: &Report, name: &str) {
    for w in &r.workers {
        if let Some(s) = w.syscalls.get(name) {
            let h = log2_hist(&s.hist_log2_ns, "nsecs");
            let _ = writeln!(out, "\nworker {} {name} latency:", worker_label(w));
            if h.is_empty() {
                let _ = writeln!(out, "  no {name} calls timed in this period");
            } else {
                out.push_str(&h);
            }
        }
    }
}

/// What was not accounted ([`sections::drops`]), tracepoints the kernel lacks, the
/// worker events, the legend of the `+` and `~` marks, and why the run ended.
fn footer_lines(out: &mut String, r: &Report) {
    let drops = sections::drops(r);
    if !drops.is_empty() {
        let _ = writeln!(out, "\nnot fully accounted: {}", drops.join(" "));
    }
    if !r.missing_tracepoints.is_empty() {
        let _ = writeln!(
            out,
            "not attached (kernel lacks them): {}",
            r.missing_tracepoints.join(" ")
        );
    }
    if !r.events.is_empty() {
        let _ = writeln!(out, "\nevents:");
        for ev in &r.events {
            let _ = writeln!(
                out,
                "  {}",
                event_line(ev, r.master_pid, r.master.is_some())
            );
        }
    }
    if r.workers.iter().any(|w| !w.alive) {
        let _ = writeln!(out, "+ = worker exited during the run");
    }
    if r.lifecycle.as_ref().is_some_and(|l| !l.draining.is_empty()) {
        let _ = writeln!(out, "~ = worker shutting down (an old generation draining)");
    }
    if let Some(reason) = &r.end_reason {
        let _ = writeln!(out, "ended: {reason}");
    }
}

/// nginx's error log by class and the CPU quota: a few lines, omitted when there is
/// nothing to say (a readable log with no lines, no quota).
fn nginx_section(out: &mut String, r: &Report) {
    super::text_history::history_lines(out, r);
    super::text_history::peer_line(out, r);
    if let Some(e) = &r.nginx_errors {
        if !e.readable {
            let _ = writeln!(
                out,
                "\nnginx error log: unknown ({})",
                e.unknown_reason.as_deref().unwrap_or("not read")
            );
        } else if !e.classes.is_empty() || e.bytes_skipped > 0 || e.truncations > 0 {
            let _ = writeln!(
                out,
                "\n{:<28} {:>9}  {:<16} DIRECTIVE   error log: {}{}",
                "NGINX ERROR LOG CLASS",
                "LINES",
                "LEVELS",
                e.path.as_deref().unwrap_or("-"),
                match (e.bytes_skipped, e.truncations) {
                    (0, 0) => String::new(),
                    (b, 0) => format!(" ({b} bytes not read: counts are a lower bound)"),
                    (0, t) => format!(
                        " (truncated {t} times while read (copytruncate): lines written just before were not read; counts are a lower bound)"
                    ),
                    (b, t) => format!(
                        " ({b} bytes not read, truncated {t} times while read: counts are a lower bound)"
                    ),
                }
            );
            if e.refusals_visible.is_none() {
                let _ = writeln!(
                    out,
                    "(no line at `error` or below seen: limit_req/limit_conn refusals, logged at `error` by default, are unknown if error_log's level is crit or higher)"
                );
            }
            for (class, c) in &e.classes {
                let levels: Vec<String> =
                    c.levels.iter().map(|(l, n)| format!("{l}:{n}")).collect();
                let _ = writeln!(
                    out,
                    "{:<28} {:>9}  {:<16} {}",
                    class,
                    c.count,
                    levels.join(","),
                    c.directive
                );
            }
        }
    }
    if let Some(q) = &r.cpu_quota {
        let throttled = match (q.nr_throttled, q.nr_periods) {
            (Some(t), Some(p)) => format!(
                "throttled in {t} of {p} periods{}",
                q.throttled_s
                    .map(|s| format!(", stopped {s:.2} s"))
                    .unwrap_or_default()
            ),
            _ => "throttling unknown (cpu.stat unreadable)".to_string(),
        };
        let _ = writeln!(
            out,
            "\ncpu quota: {} CPUs ({} us per {} us, cgroup v{} {}) on {} online CPUs: {throttled}",
            q.quota_cpus,
            q.quota_us,
            q.period_us,
            q.cgroup_version,
            q.cgroup,
            q.online_cpus
                .map(|n| n.to_string())
                .unwrap_or_else(|| "?".into()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binary_upgrade_says_what_this_run_does_with_the_new_master() {
        let ev = Event {
            t_s: 1.25,
            event: EventKind::NewMaster,
            pid: 202,
        };
        assert_eq!(
            event_line(&ev, 101, false),
            "+1.2s new nginx master 202 started under master 101 (binary upgrade, USR2); this run keeps following master 101: trace the new one with --pid 202"
        );
        let all = event_line(&ev, 101, true);
        assert_eq!(
            all,
            "+1.2s new nginx master 202 started under master 101 (binary upgrade, USR2); --all follows it as a master of its own, with its own summary, from the first /proc scan after master 101 exits; until then its workers are not traced"
        );
        assert!(!all.contains("--pid"), "{all}");
    }

    #[test]
    fn evidence_strings_are_escaped_once_and_shown_as_read() {
        let mut r = real_summary();
        r.verdicts.truncate(1);
        r.verdicts[0].evidence.insert(
            "emerg_line".into(),
            serde_json::json!("unknown directive \"x\" in /a\u{1b}[2J.conf:3"),
        );
        let text = render_text(&r, None, "");
        assert!(
            text.contains(" emerg_line=\"unknown directive \"x\" in /a\\x1b[2J.conf:3\" "),
            "{text}"
        );
        assert!(!text.contains('\u{1b}'));
    }

    #[test]
    fn times_out_of_range_do_not_panic() {
        assert_eq!(utc_datetime(0.0), "1970-01-01 00:00:00 UTC");
        assert_eq!(
            utc_datetime(crate::model::MAX_UNIX_S),
            "9999-12-31 23:59:59 UTC"
        );
        for t in [253_402_300_800.0, f64::MAX, f64::INFINITY, f64::NAN, -1.0] {
            assert_eq!(utc_datetime(t), "????-??-?? ??:??:?? UTC");
            assert_eq!(clock(t), "??:??:??");
        }
    }

    /// The summary of a real recording (2 workers, `--syscalls all`, 300 connections).
    fn real_summary() -> Report {
        let jsonl = include_str!("../testdata/two_workers_300_connections.jsonl");
        serde_json::from_str(jsonl.lines().last().unwrap()).unwrap()
    }

    #[test]
    fn empty_histograms_have_no_percentiles() {
        let mut r = real_summary();
        // No TLS connection although libssl's uprobes are attached.
        r.tls = Some(crate::model::TlsReport::default());
        // A worker that never came back from epoll_wait, and a syscall seen but not timed.
        let w = &mut r.workers[0];
        w.event_loop.iterations = 0;
        w.event_loop.p99_iteration_ns = 0;
        w.event_loop.max_iteration_ns = 0;
        let s = w.syscalls.get_mut("accept4").unwrap();
        assert!(s.count > 0);
        (s.timed, s.p50_ns, s.p99_ns, s.max_ns) = (0, 0, 0, 0);
        let text = render_text(&r, None, "00:00:00");
        assert!(
            text.contains("TLS handshakes: none seen (libssl's uprobes attached: no TLS connection in the period, or no TLS listener)"),
            "{text}"
        );
        assert!(!text.contains("TLS handshakes 0"), "{text}");
        assert!(
            !text.split_whitespace().any(|t| t == "0ns"),
            "an empty histogram's percentile shown as 0ns:\n{text}"
        );
        assert!(text.contains("p99 iteration none  longest none"), "{text}");
        // This recording predates the writes' p50: unknown, not 0.
        let log = text.lines().find(|l| l.contains("access log")).unwrap();
        assert!(log.contains(" unknown "), "{log}");
        // Handshakes started but none completed: counts, no percentile.
        r.tls = Some(crate::model::TlsReport {
            started: 3,
            abandoned: 3,
            ..Default::default()
        });
        let line = tls_line(r.tls.as_ref().unwrap());
        assert!(
            line.starts_with("TLS handshakes 0 (started 3, abandoned 3)  wall p50 none  p99 none"),
            "{line}"
        );
    }

    /// The TLS line says where libssl's figures come from: a shared libssl, OpenSSL
    /// linked into nginx, or none (counted by nginx alone, with the reason).
    #[test]
    fn the_tls_line_names_libssls_source() {
        use crate::model::{LibsslSource, TlsReport};
        let mut t = TlsReport {
            handshakes: 40,
            timed: 40,
            started: 40,
            ..Default::default()
        };
        t.set_libssl(Some(&LibsslSource::NginxBinary(
            "/opt/nginx/sbin/nginx".into(),
        )));
        let line = tls_line(&t);
        assert!(
            line.starts_with("TLS handshakes 40 (started 40, abandoned 0)"),
            "{line}"
        );
        assert!(
            line.ends_with("; libssl's figures: OpenSSL linked into nginx /opt/nginx/sbin/nginx"),
            "{line}"
        );
        t.set_libssl(Some(&LibsslSource::SharedLibrary(
            "/usr/lib/x86_64-linux-gnu/libssl.so.3".into(),
        )));
        assert!(tls_line(&t)
            .ends_with("; libssl's figures: libssl /usr/lib/x86_64-linux-gnu/libssl.so.3"));
        let mut nginx_only = TlsReport {
            handshakes: 7,
            ..Default::default()
        };
        nginx_only.set_libssl(Some(&LibsslSource::Unavailable("stripped".into())));
        assert_eq!(
            tls_line(&nginx_only),
            "TLS handshakes 7 (counted by nginx's ngx_ssl_ocsp_validate; not timed); libssl's figures: none (stripped)"
        );
        let json = serde_json::to_value(&nginx_only).unwrap();
        assert_eq!(json["libssl_from"], "none");
        assert!(json.get("libssl_path").is_none(), "{json}");
        assert_eq!(json["libssl_unavailable"], "stripped");
    }

    /// Newcomer trial 12: 320 handshakes counted by nginx, 170 connections whose
    /// first request the complete access log holds, none open at the end: the text
    /// says at least 150 carried no request under the TLS line, verdict or not; QUIC
    /// beside them: nothing (its handshakes are among nginx's count).
    #[test]
    fn handshakes_without_a_request_are_said_under_the_tls_line() {
        let mut r = real_summary();
        r.tls = Some(crate::model::TlsReport {
            handshakes: 320,
            handshakes_from: Some("ngx_ssl_ocsp_validate".into()),
            ..Default::default()
        });
        r.access_log = Some(crate::model::access_log::AccessLogReport {
            lines: 1200,
            statuses: [("200".to_string(), 1200)].into(),
            connections_with_requests: Some(170),
            counts_every_request: true,
            ..Default::default()
        });
        r.stub_status = Some(crate::model::StubStatusReport::default());
        let text = render_text(&r, None, "utc");
        assert!(
            text.contains("\n  at least 150 of the completed handshakes carried no request (170 connections carried one: access log, $connection_requests 1, all ports, less the 0 connections open at the end"),
            "{text}"
        );
        r.quic = Some(crate::model::quic::QuicReport::default());
        let text = render_text(&r, None, "utc");
        assert!(!text.contains("carried no request (170"), "{text}");
    }

    /// Accepts from the uprobe: accept errors and the syscall table say they are
    /// sampled; accepts that disagree with nginx's counter say UNKNOWN.
    #[test]
    fn uprobe_accepts_are_marked_and_unknown_ones_said() {
        use crate::model::sampling::{AcceptsCheck, DetailReport, Schedule};
        let mut r = real_summary();
        let d = DetailReport::new(
            &Schedule::new(1.0, 20.0).unwrap(),
            &Default::default(),
            5.0,
            None,
            (0, 0, 0),
        );
        r.detail = Some(
            d.clone()
                .with_accepts_from_uprobe(Some(AcceptsCheck::new(300, 300, 2))),
        );
        let text = render_text(&r, None, "00:00:00");
        assert!(text.contains("[accept errors SAMPLED"), "{text}");
        assert!(
            text.contains("[SAMPLED (every syscall, accept4 included)"),
            "{text}"
        );
        assert!(!text.contains("UNKNOWN"), "{text}");
        r.detail = Some(d.with_accepts_from_uprobe(Some(AcceptsCheck::new(600, 300, 2))));
        let text = render_text(&r, None, "00:00:00");
        assert!(
            text.contains("accepts 300 UNKNOWN (disagrees with nginx's accepted counter)"),
            "{text}"
        );
        assert!(text.contains("[ACCEPTS UNKNOWN"), "{text}");
    }

    /// Counted-only syscalls (exit-only programs: eventfd2; openat without `--syscalls
    /// all`) show `-` for latency; a timed syscall with no timed call shows `none`.
    #[test]
    fn counted_only_syscalls_show_a_dash_timed_ones_none() {
        let mut r = real_summary();
        r.traced_syscalls = vec!["accept4".into(), "eventfd2".into()];
        let w = &mut r.workers[0];
        let mut counted = w.syscalls["accept4"].clone();
        (counted.count, counted.errors, counted.timed) = (2, 0, 0);
        (
            counted.p50_ns,
            counted.p99_ns,
            counted.max_ns,
            counted.total_ns,
        ) = (0, 0, 0, 0);
        (counted.bytes, counted.events) = (None, None);
        w.syscalls.insert("eventfd2".into(), counted.clone());
        w.syscalls.insert("openat".into(), counted.clone());
        w.syscalls.insert("accept4".into(), counted);
        let text = render_text(&r, None, "00:00:00");
        let row = |name: &str| -> Vec<String> {
            let l = text
                .lines()
                .find(|l| {
                    let c: Vec<&str> = l.split_whitespace().collect();
                    c.len() == 9 && c[1] == name
                })
                .unwrap_or_else(|| panic!("no {name} row:\n{text}"));
            l.split_whitespace()
                .skip(4)
                .take(4)
                .map(String::from)
                .collect()
        };
        assert_eq!(row("eventfd2"), ["-", "-", "-", "-"]);
        assert_eq!(row("openat"), ["-", "-", "-", "-"]);
        assert_eq!(row("accept4"), ["none", "none", "none", "0ns"]);
        assert!(r.syscall_timed("accept4"));
        assert!(!r.syscall_timed("eventfd2") && !r.syscall_timed("openat"));
    }

    #[test]
    fn formats_durations() {
        assert_eq!(fmt_ns(850), "850ns");
        assert_eq!(fmt_ns(12_345), "12.3us");
        assert_eq!(fmt_ns(4_500_000), "4.50ms");
        assert_eq!(fmt_ns(1_230_000_000), "1.23s");
    }

    #[test]
    fn histogram_trims_and_scales() {
        let mut h = vec![0u64; 40];
        h[10] = 4;
        h[12] = 1;
        let text = log2_hist(&h, "nsecs");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].contains("nsecs") && lines[0].contains("distribution"));
        assert!(lines[1].contains("1024 -> 2047"));
        assert!(lines[1].contains(&format!("|{}|", "*".repeat(40))));
        assert!(
            lines[2].contains("2048 -> 4095")
                && lines[2].contains(&format!("|{}|", " ".repeat(40)))
        );
        assert!(lines[3].contains(&format!("|{}{}|", "*".repeat(10), " ".repeat(30))));
        assert_eq!(log2_hist(&[0; 40], "nsecs"), "");
    }
}
