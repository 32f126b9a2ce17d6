//! The ACCESS LOG section of the text report: what the clients got, per nginx's own
//! access log (status classes, request time, per upstream peer), with what the
//! formats lack and which logs were not read. The report was sanitized before it gets
//! here (`render_text`).

use std::fmt::Write;

use crate::model::access_log::{AccessLogReport, TimeReport};
use crate::model::{Report, RequestSource};

/// Upstream peers printed (the JSON has them all).
const MAX_PEERS_SHOWN: usize = 8;

/// Seconds as `250 ms` under 1 s, else `1.50 s`.
pub(super) fn secs(s: f64) -> String {
    if s < 1.0 {
        format!("{:.0} ms", s * 1000.0)
    } else {
        format!("{s:.2} s")
    }
}

/// `p50 1.50 s  p99 1.51 s  max 1.51 s (n 100)`.
pub fn time_line(t: &TimeReport) -> String {
    format!(
        "p50 {}  p90 {}  p99 {}  max {}  (n {})",
        secs(t.p50_s),
        secs(t.p90_s),
        secs(t.p99_s),
        secs(t.max_s),
        t.count
    )
}

/// The log2 histogram as `<=1024ms 3  <=2048ms 97`.
fn log2_line(t: &TimeReport) -> String {
    t.log2_ms
        .iter()
        .map(|(le, n)| format!("<={le}ms {n}"))
        .collect::<Vec<_>>()
        .join("  ")
}

/// `2xx 100, 4xx 7`.
pub(super) fn codes(m: &std::collections::BTreeMap<String, u64>) -> String {
    m.iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The section; nothing when no access log was looked at.
pub fn access_log_section(out: &mut String, r: &Report) {
    let Some(a) = &r.access_log else { return };
    if a.files.is_empty() && a.not_read.is_empty() {
        return;
    }
    files_lines(out, a);
    if a.files.is_empty() {
        return;
    }
    lines_line(out, r, a);
    // No line read in the period: no status to show, not an empty one.
    if !a.statuses.is_empty() {
        let _ = writeln!(
            out,
            "  status: {}  ({})",
            codes(&a.classes),
            codes(&a.statuses)
        );
    }
    request_time_lines(out, a);
    server_lines(out, a);
    peer_lines(out, a);
    if let Some(r) = a.retried_said() {
        let _ = writeln!(out, "  retried: {r}");
    }
    if a.no_live_server > 0 {
        let _ = writeln!(
            out,
            "  no live server: {} times $upstream_addr names the upstream block instead of a peer (nginx found no server of it to try, each marked failed by max_fails/fail_timeout or at its max_conns, and tried none: `no live upstreams`, 502)",
            a.no_live_server
        );
    }
    if !a.lacks.is_empty() {
        let _ = writeln!(out, "  not logged by the format: {}", a.lacks.join(", "));
    }
}

/// The section's title with the files read (their formats, retired ones marked), and
/// the logs not read with why.
fn files_lines(out: &mut String, a: &AccessLogReport) {
    let files: Vec<String> = a
        .files
        .iter()
        .map(|f| {
            format!(
                "{} (format {}{})",
                f.path,
                f.formats.join(", "),
                if f.retired {
                    "; no longer in the configuration: read while old workers write it"
                } else {
                    ""
                }
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "\nACCESS LOG (what the clients got, per nginx's access log{}{})",
        if files.is_empty() { "" } else { ": " },
        files.join("; ")
    );
    for n in &a.not_read {
        let _ = writeln!(out, "  not read: {n}");
    }
}

/// `$request_time`'s percentiles and log2 histogram, or that no format logs it.
fn request_time_lines(out: &mut String, a: &AccessLogReport) {
    match &a.request_time {
        Some(t) => {
            let _ = writeln!(out, "  request time ($request_time): {}", time_line(t));
            let _ = writeln!(out, "    log2 histogram: {}", log2_line(t));
        }
        None if a.lacks.iter().any(|l| l == "$request_time") => {
            let _ = writeln!(
                out,
                "  request time: not logged (the format has no $request_time)"
            );
        }
        None => {
            let _ = writeln!(
                out,
                "  request time: none read (no line with $request_time in the period)"
            );
        }
    }
}

/// Status classes per server (`$server_name` or `$host`), saying how many lines they
/// cover when some format lacks the server.
fn server_lines(out: &mut String, a: &AccessLogReport) {
    let by_server: u64 = a.servers.iter().map(|s| s.requests).sum();
    if !a.servers.is_empty() && by_server < a.lines {
        let _ = writeln!(
            out,
            "  per server: {by_server} of the {} lines (the others are in a format without $server_name or $host, or without $status)",
            a.lines
        );
    }
    for s in a.servers.iter().take(MAX_PEERS_SHOWN) {
        let _ = writeln!(
            out,
            "  server {}: {} requests, {}",
            s.shown(),
            s.requests,
            codes(&s.classes)
        );
    }
}

/// Per upstream peer (`$upstream_addr`): tries, statuses, response and connect times;
/// at most [`MAX_PEERS_SHOWN`].
fn peer_lines(out: &mut String, a: &AccessLogReport) {
    for p in a.upstreams.iter().take(MAX_PEERS_SHOWN) {
        let statuses = match codes(&p.statuses) {
            c if c.is_empty() => "no status logged".to_string(),
            c => format!("status {c}"),
        };
        let mut l = format!("  upstream {}: {} tries, {statuses}", p.peer, p.tries);
        if let Some(t) = &p.response_time {
            let _ = write!(l, "; response {}", time_line(t));
        }
        if let Some(t) = &p.connect_time {
            let _ = write!(l, "; connect p50 {} p99 {}", secs(t.p50_s), secs(t.p99_s));
        }
        let _ = writeln!(out, "{l}");
    }
    if a.upstreams.len() > MAX_PEERS_SHOWN {
        let _ = writeln!(
            out,
            "  ... {} more peers (JSON)",
            a.upstreams.len() - MAX_PEERS_SHOWN
        );
    }
}

/// The lines read against nginx's request count, what was not counted, and the notes
/// on lines without a status, over-counting and buffered logs.
fn lines_line(out: &mut String, r: &Report, a: &AccessLogReport) {
    let unparsed: u64 = a.files.iter().map(|f| f.unparsed).sum();
    let ambiguous: u64 = a.files.iter().map(|f| f.ambiguous).sum();
    let cut: u64 = a.files.iter().map(|f| f.lines_cut).sum();
    let skipped: u64 = a.files.iter().map(|f| f.bytes_skipped).sum();
    let share = match (a.share_logged, r.requests.source, r.requests.count) {
        (Some(s), RequestSource::StubStatus, Some(n)) => {
            format!(" = {:.0}% of nginx's {n} requests (stub_status)", s * 100.0)
        }
        (_, RequestSource::StubStatus, Some(0)) => {
            " (nginx's stub_status counted no request in the period)".to_string()
        }
        (_, RequestSource::AccessLog, _) => {
            " = nginx's request count (every request is logged: no stub_status counter here)"
                .to_string()
        }
        _ => " (nginx's request count unknown: share logged not known)".to_string(),
    };
    let mut l = format!("  lines {}{share}", a.lines);
    for (what, n) in [
        ("not in the format", unparsed),
        ("ambiguous", ambiguous),
        ("cut", cut),
    ] {
        if n > 0 {
            let _ = write!(l, ", {n} {what} (not counted)");
        }
    }
    if skipped > 0 {
        let _ = write!(
            l,
            ", {skipped} bytes skipped (reader behind or file truncated)"
        );
    }
    let _ = writeln!(out, "{l}");
    // Fewer lines than requests: why, when the configuration or the reader knows.
    if let (Some(why), Some(s)) = (&a.not_every_request, a.share_logged) {
        if s < 1.0 {
            let _ = writeln!(out, "  not every request is read: {why}");
        }
    }
    if a.with_status() < a.lines {
        let _ = writeln!(
            out,
            "  {} lines carry no $status (a file in a format without it): the status counts cover {} lines",
            a.lines - a.with_status(),
            a.with_status()
        );
    }
    let behind_at_start: u64 = a.files.iter().map(|f| f.unread_bytes_at_start).sum();
    let behind_at_end: u64 = a.files.iter().map(|f| f.unread_bytes_at_end).sum();
    over_count_line(out, r, a, behind_at_start);
    if behind_at_end > 0 {
        let _ = writeln!(
            out,
            "  the reader is {behind_at_end} bytes behind nginx's writes at the period's end: lines written last in it are counted in the next period"
        );
    }
    for f in a.files.iter().filter(|f| f.buffered.is_some()) {
        let _ = writeln!(
            out,
            "  {} is buffered ({}): its last lines reach the file late, until the buffer fills or the flush time",
            f.path,
            f.buffered.as_deref().unwrap_or_default()
        );
    }
}

/// Why the access log holds more lines than nginx's requests, when it does: the reader
/// behind at the period's start (`behind_at_start` bytes), a binary upgrade's new
/// master writing the same log, or lines read twice or flushed late.
fn over_count_line(out: &mut String, r: &Report, a: &AccessLogReport, behind_at_start: u64) {
    if a.over_counted() && behind_at_start > 0 {
        let _ = writeln!(
            out,
            "  more lines than nginx's requests: the reader was {behind_at_start} bytes behind nginx's writes when the period started and caught up in it (lines of earlier periods); these are counts of lines, not requests, and no verdict uses them"
        );
    } else if let Some((pid, t_s)) = super::sections::upgrade_beside(r).filter(|_| a.over_counted())
    {
        let _ = writeln!(
            out,
            "  more lines than nginx's requests: a binary upgrade's new master {pid} runs beside this one since +{t_s:.1}s and writes the same log, its requests not in this master's count; these are counts of lines, not requests, and no verdict uses them"
        );
    } else if a.over_counted() {
        let _ = writeln!(
            out,
            "  more lines than nginx's requests: {}; these are counts of lines, not requests, and no verdict uses them",
            over_count_reasons(r, a).join("; or ")
        );
    } else if let Some(more) = a
        .nginx_requests
        .filter(|&n| n > 0 && a.lines > n && r.requests.source == RequestSource::StubStatus)
        .map(|n| a.lines - n)
    {
        // Under the over-count threshold, still said (trial 20: "lines 151174 = 100%
        // of nginx's 151157 requests" with no word on the 17).
        let _ = writeln!(
            out,
            "  {more} more lines than nginx's requests: {}",
            over_count_reasons(r, a).join("; or ")
        );
    }
}

/// The reasons an access log may hold more lines than nginx's requests in a period,
/// those that apply to `a` only (trial 19: a 5 s interval's 119% of an unbuffered log
/// was put on "a buffered log"): nginx's counter (stub_status) counts a request as it
/// starts and the log line is written as it ends, so requests in flight at the
/// period's start are lines here and not requests; a request logged in more than one
/// of the files read; lines written before the period and flushed in it (a buffered
/// log, named); nginx's counters last read before its master exited (`r`'s end).
fn over_count_reasons(r: &Report, a: &AccessLogReport) -> Vec<String> {
    let mut why = vec!["nginx counts a request as it starts (stub_status) and logs it as it ends: requests in flight when the period started are lines here and requests of the period before (slow upstreams, long downloads or uploads)".to_string()];
    if crate::model::ended_by_master_exit(r.end_reason.as_deref()) {
        why.push("nginx's counters were last read up to a refresh (500 ms) before its master exited, and its workers' last lines after".to_string());
    }
    if a.files.len() > 1 {
        why.push(format!(
            "a request logged in more than one of the {} files read",
            a.files.len()
        ));
    }
    let buffered: Vec<&str> = a
        .files
        .iter()
        .filter(|f| f.buffered.is_some())
        .map(|f| f.path.as_str())
        .collect();
    if !buffered.is_empty() {
        why.push(format!(
            "lines written before the period and flushed in it ({} buffered)",
            buffered.join(", ")
        ));
    }
    why
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::access_log::{AccessLogReport, ServerOutcomeReport};

    /// The newcomer's case: two formats, one without `$host`: the per-server rows cover
    /// only the lines of the other, and the section says how many.
    #[test]
    fn per_server_rows_say_how_many_lines_they_cover() {
        let rec = crate::io::recording::Recording::parse(
            "real",
            include_str!("../testdata/two_workers_300_connections.jsonl"),
        )
        .expect("the recording parses");
        let mut r = rec.whole_run().0.clone();
        let server = |name: &str, n: u64| ServerOutcomeReport {
            server: name.into(),
            requests: n,
            classes: [("2xx".to_string(), n)].into_iter().collect(),
        };
        r.access_log = Some(AccessLogReport {
            lines: 220,
            statuses: [("200".to_string(), 220)].into_iter().collect(),
            servers: vec![server("a.test", 100), server("", 48)],
            files: vec![crate::model::access_log::AccessLogFileReport {
                path: "/l/a.log".into(),
                formats: vec!["main".into(), "short".into()],
                lines: 220,
                ..Default::default()
            }],
            ..Default::default()
        });
        let mut out = String::new();
        access_log_section(&mut out, &r);
        assert!(
            out.contains("  per server: 148 of the 220 lines (the others are in a format without $server_name or $host, or without $status)\n"),
            "{out}"
        );
        assert!(out.contains("  server (empty): 48 requests"), "{out}");
        // Every line covered: no such line.
        if let Some(a) = r.access_log.as_mut() {
            a.lines = 148;
        }
        let mut out = String::new();
        access_log_section(&mut out, &r);
        assert!(!out.contains("per server:"), "{out}");
    }

    /// The newcomer's heavy-load case: an interval that read lines an earlier one left
    /// unread says the reader caught up, not that requests were logged twice; one that
    /// ends behind says so; one with no request shows no empty status line.
    #[test]
    fn a_reader_behind_or_catching_up_is_said_as_such() {
        let rec = crate::io::recording::Recording::parse(
            "real",
            include_str!("../testdata/two_workers_300_connections.jsonl"),
        )
        .expect("the recording parses");
        let mut r = rec.whole_run().0.clone();
        r.requests.source = RequestSource::StubStatus;
        r.requests.count = Some(331_244);
        let file =
            |lines: u64, start: u64, end: u64| crate::model::access_log::AccessLogFileReport {
                path: "/l/a.log".into(),
                lines,
                unread_bytes_at_start: start,
                unread_bytes_at_end: end,
                ..Default::default()
            };
        r.access_log = Some(AccessLogReport {
            lines: 446_233,
            statuses: [("200".to_string(), 446_233)].into_iter().collect(),
            share_logged: Some(446_233.0 / 331_244.0),
            files: vec![file(446_233, 9_000_000, 0)],
            ..Default::default()
        });
        let mut out = String::new();
        access_log_section(&mut out, &r);
        assert!(out.contains("the reader was 9000000 bytes behind nginx's writes when the period started and caught up in it"), "{out}");
        assert!(!out.contains("more than one of the"), "{out}");
        assert!(
            !out.contains("bytes behind nginx's writes at the period's end"),
            "{out}"
        );
        if let Some(a) = r.access_log.as_mut() {
            a.files = vec![file(446_233, 0, 4096)];
        }
        let mut out = String::new();
        access_log_section(&mut out, &r);
        // One unbuffered file: the edge's requests in flight, neither a second file
        // nor a buffered one (trial 19).
        assert!(out.contains("more lines than nginx's requests: nginx counts a request as it starts (stub_status) and logs it as it ends"), "{out}");
        assert!(!out.contains("more than one of the"), "{out}");
        assert!(!out.contains("flushed in it"), "{out}");
        assert!(
            out.contains("the reader is 4096 bytes behind nginx's writes at the period's end"),
            "{out}"
        );
        // No request in the period: said, and no empty status line.
        r.requests.count = Some(0);
        r.access_log = Some(AccessLogReport {
            files: vec![file(0, 0, 0)],
            ..Default::default()
        });
        let mut out = String::new();
        access_log_section(&mut out, &r);
        assert!(
            out.contains("lines 0 (nginx's stub_status counted no request in the period)"),
            "{out}"
        );
        assert!(!out.contains("status:"), "{out}");
    }

    /// Trial 19: an unbuffered log's over-count was put on "a buffered log". Only the
    /// reasons that apply are said: the edge's requests in flight always, more files
    /// and a buffered file (named) where they are so.
    #[test]
    fn over_count_reasons_are_those_that_apply() {
        use crate::model::access_log::AccessLogFileReport;
        let file = |path: &str, buffered: Option<&str>| AccessLogFileReport {
            path: path.into(),
            buffered: buffered.map(String::from),
            ..Default::default()
        };
        let mut a = AccessLogReport {
            files: vec![file("/var/log/a.log", None)],
            ..Default::default()
        };
        let r = crate::model::minimal_report();
        let one = over_count_reasons(&r, &a);
        assert_eq!(one.len(), 1, "{one:?}");
        assert!(
            one[0].starts_with("nginx counts a request as it starts"),
            "{one:?}"
        );
        assert!(!one.join(" ").contains("buffered"), "{one:?}");
        a.files.push(file("/var/log/b.log", Some("buffer=32k")));
        assert_eq!(
            over_count_reasons(&r, &a)[1..],
            [
                "a request logged in more than one of the 2 files read".to_string(),
                "lines written before the period and flushed in it (/var/log/b.log buffered)"
                    .to_string()
            ]
        );
    }
}
