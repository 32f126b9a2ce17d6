//! The HTML report from real and hostile recordings.

use super::*;

/// A real recording: 2 workers, `--syscalls all --interval 1 --duration 5`, 300
/// one-request connections sent in the 2nd to 4th second.
const REAL: &str = include_str!("../testdata/two_workers_300_connections.jsonl");

fn real() -> Recording {
    Recording::parse("real", REAL).unwrap()
}

/// The text of the first element that starts with `open` (up to its closing `close`).
fn element<'a>(page: &'a str, open: &str, close: &str) -> &'a str {
    let a = page.find(open).unwrap_or_else(|| panic!("no {open}"));
    let b = a + page[a..].find(close).expect("closed");
    &page[a..b]
}

#[test]
fn everything_from_the_recording_is_escaped() {
    let mut rec = real();
    let h = rec.header.as_mut().unwrap();
    h.master_title = "nginx: master <script>alert(1)</script> & \"x\"".into();
    h.host = "<b>host</b>".into();
    let s = rec.summary.as_mut().unwrap();
    s.logs.insert(
        "/var/log/\"><img src=x onerror=alert(2)>.log".into(),
        "access_log".into(),
    );
    s.verdicts[0].advice = "</p><script>bad()</script>".into();
    let page = render_html(&rec);
    assert!(!page.contains("<script"), "a script tag got through");
    assert!(!page.contains("<img"), "an img tag got through");
    assert!(!page.contains("<b>host"));
    assert!(
        page.contains("nginx: master &lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;x&quot;")
    );
    assert!(page.contains("/var/log/&quot;&gt;&lt;img src=x onerror=alert(2)&gt;.log"));
    assert!(page.contains("&lt;/p&gt;&lt;script&gt;bad()&lt;/script&gt;"));
    assert!(page.contains(
        "<title>nginx-probe report: &lt;b&gt;host&lt;/b&gt; 2026-11-30 05:49:22 UTC</title>"
    ));
}

#[test]
fn control_characters_from_the_recording_are_shown_escaped() {
    let mut rec = real();
    let h = rec.header.as_mut().unwrap();
    h.master_title = "nginx: master process /tmp/p\u{1b}[31mRED\nNL\u{7}/nginx".into();
    rec.summary.as_mut().unwrap().verdicts[0].advice = "bad\u{1b}]0;title\u{7}".into();
    let page = render_html(&rec);
    assert!(
        !page.contains('\u{1b}') && !page.contains('\u{7}'),
        "raw control characters"
    );
    assert!(
        page.contains("/tmp/p\\x1b[31mRED\\x0aNL\\x07/nginx"),
        "{page}"
    );
}

#[test]
fn empty_histograms_have_no_percentiles() {
    let mut rec = real();
    let s = rec.summary.as_mut().unwrap();
    s.tls = Some(crate::model::TlsReport::default());
    let w = &mut s.workers[0];
    w.event_loop.iterations = 0;
    w.event_loop.p99_iteration_ns = 0;
    w.event_loop.max_iteration_ns = 0;
    let c = w.syscalls.get_mut("accept4").unwrap();
    (c.timed, c.p50_ns, c.p99_ns, c.max_ns) = (0, 0, 0, 0);
    let page = render_html(&rec);
    assert!(page.contains("TLS handshakes: none seen"), "no TLS line");
    assert!(
        !page.contains("wall time p50"),
        "percentiles of no handshake"
    );
    assert!(
        !page.contains(">0ns<"),
        "an empty histogram's percentile as 0ns"
    );
    assert!(
        !page.contains("p50 <span class=\"mono\">0ns"),
        "0ns in a caption"
    );
}

#[test]
fn the_page_is_self_contained() {
    let page = render_html(&real());
    assert!(page.starts_with("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"));
    for bad in [
        "http://", "https://", "<script", "<link", "<img", "src=", "@import", "url(",
    ] {
        assert!(!page.contains(bad), "{bad} in the page");
    }
}

#[test]
fn accept_bars_are_as_wide_as_the_shares() {
    let page = render_html(&real());
    // 145 and 155 of 300 accepts.
    let w1 = element(
        &page,
        "<div class=\"bar-row\" data-pid=\"4843\"",
        "</span></span></div>",
    );
    assert!(w1.contains("data-accepts=\"145\""), "{w1}");
    assert!(
        w1.contains("<span class=\"mono\">145</span> accepts (<span class=\"mono\">48.3%</span>)"),
        "{w1}"
    );
    assert!(
        w1.ends_with("<span class=\"bar\" style=\"width:48.3%\">"),
        "{w1}"
    );
    let w2 = element(
        &page,
        "<div class=\"bar-row\" data-pid=\"4844\"",
        "</span></span></div>",
    );
    assert!(w2.contains("data-accepts=\"155\""), "{w2}");
    assert!(
        w2.ends_with("<span class=\"bar\" style=\"width:51.7%\">"),
        "{w2}"
    );
    assert!(page
        .contains("<span class=\"mono\" data-total-accepts=\"300\">300</span> accepts in 5.0 s"));
    assert_eq!(page.matches("class=\"bar-row").count(), 2);
    assert_eq!(bar_width(1.0), "100.0%");
    assert_eq!(bar_width(1.7), "100.0%");
    assert_eq!(bar_width(f64::NAN), "0.0%");

    // An exited worker is marked, its bar kept.
    let mut rec = real();
    rec.summary.as_mut().unwrap().workers[1].alive = false;
    let page = render_html(&rec);
    let w2 = element(
        &page,
        "<div class=\"bar-row exited\" data-pid=\"4844\"",
        "</span></span></div>",
    );
    assert!(w2.contains(" · exited"), "{w2}");
    assert!(w2.ends_with("style=\"width:51.7%\">"), "{w2}");
}

#[test]
fn histogram_buckets_are_labelled_in_ns_us_ms_s() {
    assert_eq!(bucket_label(0, 40), "0ns");
    assert_eq!(bucket_label(9, 40), "512ns");
    assert_eq!(bucket_label(10, 40), "1.02us");
    assert_eq!(bucket_label(14, 40), "16.4us");
    assert_eq!(bucket_label(17, 40), "131us");
    assert_eq!(bucket_label(20, 40), "1.05ms");
    assert_eq!(bucket_label(30, 40), "1.07s");
    assert_eq!(bucket_label(39, 40), "≥550s");

    let page = render_html(&real());
    // Worker 4843's accept4: 145 calls in buckets 11..=15 (2 us .. 64 us).
    let fig = element(
        &page,
        "<figure class=\"hist\" data-pid=\"4843\" data-syscall=\"accept4\" data-calls=\"145\">",
        "</figure>",
    );
    let counts: Vec<&str> = fig
        .split("data-count=\"")
        .skip(1)
        .map(|s| &s[..s.find('"').unwrap()])
        .collect();
    assert_eq!(counts, ["0", "14", "119", "10", "1", "1", "0"], "{fig}");
    let labels: Vec<&str> = fig
        .split("<text class=\"label\"")
        .skip(1)
        .map(|s| &s[s.find('>').unwrap() + 1..s.find("</text>").unwrap()])
        .collect();
    assert_eq!(
        labels,
        ["1.02us", "2.05us", "4.10us", "8.19us", "16.4us", "32.8us", "65.5us"]
    );
    assert!(
        fig.contains("<title>4.10us to 8.19us: 119 calls</title>"),
        "{fig}"
    );
    assert_eq!(fig.matches("<rect").count(), 5);
    // One histogram per worker and syscall with calls: 9 syscalls called by each.
    assert_eq!(page.matches("<figure class=\"hist\"").count(), 18);
}

#[test]
fn a_wide_histogram_gets_narrower_columns() {
    let mut h = vec![0u64; 40];
    h[2] = 1;
    h[38] = 3;
    h[39] = 1;
    let svg = histogram_svg(&h).into_string();
    // Buckets 1..=39: 39 columns of 27 px, every other one labelled.
    assert!(svg.starts_with("<svg width=\"1061\""), "{svg}");
    assert_eq!(svg.matches("class=\"bucket\"").count(), 39);
    assert_eq!(svg.matches("<text class=\"label\"").count(), 20);
    assert!(svg.contains(">≥550s</text>"));
    assert!(svg.contains("<title>550s to ∞: 1 calls</title>"));
    assert_eq!(
        histogram_svg(&[0; 40]).into_string(),
        "<p class=\"muted\">no calls timed</p>"
    );
}

#[test]
fn verdicts_header_tables_and_timeline() {
    let page = render_html(&real());
    for id in ["access_log_unbuffered", "keepalive_off"] {
        assert!(
            page.contains(&format!(
                "<div class=\"verdict warning\" data-verdict=\"{id}\">"
            )),
            "{id}"
        );
    }
    assert!(page.contains("<th class=\"mono\">accepts_per_request</th><td class=\"mono\">1.0</td>"));
    assert!(page.contains("<code>keepalive_timeout</code>, <code>keepalive_requests</code>"));
    assert!(!page.contains("No verdicts"));
    // Header.
    assert!(page.contains("<td class=\"mono\">2026-11-30 05:49:22 UTC</td>"));
    assert!(page.contains("<td>nginx/1.22.1</td>"));
    assert!(page.contains("<td class=\"mono\">6.18.44-fc-v782</td>"));
    assert!(page.contains("5 intervals, ended: --duration 5 s elapsed"));
    // Requests table: writev estimate, 145 requests at 1.0 per connection.
    assert!(page.contains("<td class=\"mono\">4843</td><td class=\"n\">145</td><td class=\"n\">29.0</td><td class=\"n\">1.0</td>"));
    // Timeline: 5 intervals; the 2nd had 49 + 51 accepts.
    assert!(page.contains("data-intervals=\"5\""));
    assert!(page.contains("<td class=\"n\">2.0</td><td class=\"n\">1.00</td><td class=\"n\">100</td><td class=\"n\">100.4</td>"), "{}", element(&page, "<details>", "</details>"));
}

#[test]
fn a_cut_short_recording_says_so_and_no_verdicts_is_said_plainly() {
    let mut rec = real();
    rec.summary = None;
    rec.intervals.truncate(1);
    rec.interval_count = 1;
    let page = render_html(&rec);
    assert!(page.contains("the recording has no summary (the run was cut short): showing its last interval, the 1st recorded"));
    assert!(page.contains("No verdicts: none of the rules fired for this run."));
    assert!(page.contains("<span class=\"mono\" data-total-accepts=\"0\">0</span> accepts"));
    // Without a header (a captured --json stdout): the master from the report.
    rec.header = None;
    let page = render_html(&rec);
    assert!(page.contains("<title>nginx-probe report: master 4841</title>"));
    assert!(page.contains("no header (a captured --json stdout)"));
}

#[test]
fn utc_dates() {
    assert_eq!(utc_datetime(0.0), "1970-01-01 00:00:00 UTC");
    assert_eq!(utc_datetime(1796017762.408), "2026-11-30 05:49:22 UTC");
    assert_eq!(utc_datetime(951_782_400.0), "2000-02-29 00:00:00 UTC");
    assert_eq!(utc_datetime(4_107_542_399.0), "2100-02-28 23:59:59 UTC");
}

#[test]
fn the_page_is_written_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.html");
    crate::io::files::write_atomic(&out, render_html(&real()).as_bytes(), "--html").unwrap();
    assert_eq!(std::fs::read_to_string(&out).unwrap(), render_html(&real()));
    let e = crate::io::files::write_atomic(
        &dir.path().join("no/such/dir/r.html"),
        render_html(&real()).as_bytes(),
        "--html",
    )
    .unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().starts_with("--html "), "{e}");
    assert_eq!(
        e.to_string(),
        format!(
            "--html {}: cannot write it (No such file or directory (os error 2)): choose a writable file path",
            dir.path().join("no/such/dir/r.html").display()
        )
    );
    let e = crate::io::files::write_atomic(dir.path(), render_html(&real()).as_bytes(), "--html")
        .unwrap_err();
    assert!(e.to_string().contains("it is a directory"), "{e}");
    // Nothing but the page was left behind.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["r.html"]);
}

#[test]
fn the_access_log_and_the_configuration_have_sections_escaped() {
    use crate::model::access_log::{AccessLogFileReport, AccessLogReport, UpstreamOutcomeReport};
    let mut rec = real();
    let page = render_html(&rec);
    assert!(!page.contains("id=\"access-log\"") && !page.contains("id=\"config\""));
    let s = rec.summary.as_mut().unwrap();
    s.access_log = Some(AccessLogReport {
        files: vec![AccessLogFileReport {
            path: "/var/log/<x>.log".into(),
            formats: vec!["timed".into()],
            lines: 107,
            ..Default::default()
        }],
        lines: 107,
        classes: [("2xx".into(), 100), ("4xx".into(), 7)].into(),
        upstreams: vec![UpstreamOutcomeReport {
            peer: "10.0.0.1:80\u{1b}[2J".into(),
            tries: 100,
            ..Default::default()
        }],
        lacks: vec!["$request_time".into()],
        ..Default::default()
    });
    s.config = Some(crate::model::config::ConfigReport {
        main_file: "/etc/nginx/nginx.conf".into(),
        values: vec![crate::model::config::ConfigValue {
            directive: "keepalive_timeout".into(),
            scope: "http".into(),
            value: "2s".into(),
            at: "/etc/nginx/nginx.conf:14".into(),
            not_loaded: true,
            unread_may_set: false,
        }],
        ..Default::default()
    });
    let page = render_html(&rec);
    let a = element(&page, "id=\"access-log\"", "id=\"config\"");
    assert!(a.contains("/var/log/&lt;x&gt;.log"), "{a}");
    assert!(a.contains("2xx 100, 4xx 7"), "{a}");
    assert!(a.contains("10.0.0.1:80\\x1b[2J"), "{a}");
    assert!(a.contains("Request time: not logged"), "{a}");
    assert!(a.contains("Not logged by the format: $request_time"), "{a}");
    let c = element(&page, "id=\"config\"", "</table>");
    assert!(
        c.contains("keepalive_timeout")
            && c.contains("/etc/nginx/nginx.conf:14 (on disk, possibly not loaded)"),
        "{c}"
    );
}

#[test]
fn connections_are_shown_as_the_text_report_says_them_or_why_not() {
    use crate::model::connections::{ConnectionsReport, PortLifecycle};
    let mut rec = real();
    assert!(!render_html(&rec).contains("id=\"connections\""));
    let s = rec.summary.as_mut().unwrap();
    s.connections = Some(ConnectionsReport {
        source: "raw tracepoints <sock>".into(),
        ports: vec![PortLifecycle {
            port: 8080,
            established: 300,
            closed_by_nginx: 290,
            closed_by_client: 7,
            closed_by_reset: 3,
            resets_received: 3,
            ..Default::default()
        }],
        ..Default::default()
    });
    let page = render_html(&rec);
    let c = element(&page, "id=\"connections\"", "</section>");
    assert!(
        c.contains(
            "<li>established 300  closed first by nginx 290  by the client 7  by a reset 3</li>"
        ),
        "{c}"
    );
    assert!(c.contains("resets received 3  sent 0"), "{c}");
    // Not traced: said, with why, instead of zeros.
    let s = rec.summary.as_mut().unwrap();
    s.connections = None;
    s.connections_not_traced =
        Some("the connection lifecycle tracepoints are not attached (--no-lifecycle)".into());
    let page = render_html(&rec);
    let c = element(&page, "id=\"connections\"", "</section>");
    assert!(
        c.contains(
            "Not counted: the connection lifecycle tracepoints are not attached (--no-lifecycle)"
        ),
        "{c}"
    );
}

#[test]
fn draining_generations_and_exits_are_shown_as_the_text_report_says_them() {
    use crate::model::worker_lifecycle::{DrainingGeneration, DrainingWorker, LifecycleReport};
    let mut rec = real();
    assert!(!render_html(&rec).contains("id=\"lifecycle\""));
    let s = rec.summary.as_mut().unwrap();
    s.lifecycle = Some(LifecycleReport {
        state_source: "title".into(),
        draining: vec![DrainingGeneration {
            reload_generation: 0,
            workers: vec![DrainingWorker {
                pid: 7237,
                since_unix_s: 3600.0,
                client_connections: Some(2),
                ..Default::default()
            }],
            since_unix_s: 3600.0,
            draining_s: 22.9,
            client_connections: Some(2),
            upstream_connections: Some(0),
            ..Default::default()
        }],
        ..Default::default()
    });
    let page = render_html(&rec);
    let c = element(&page, "id=\"lifecycle\"", "</section>");
    assert!(
        c.contains("generation 0: 1 worker shutting down since 01:00:00 (22.9 s), holding 2 client + 0 upstream connections"),
        "{c}"
    );
    assert!(c.contains("kernel sched:sched_process_exit"), "{c}");
}

/// The QUIC connections and those nginx ended show on the page as in the text report,
/// nginx's reasons escaped like everything from a recording.
#[test]
fn quic_connections_and_their_ends_are_on_the_page() {
    let mut rec = real();
    let mut q = crate::model::quic::sample_report();
    q.ends[0].reason = Some("<i>reached</i>".into());
    assert_eq!(
        q.ends.len(),
        1,
        "the connections started are no end: {:?}",
        q.ends
    );
    rec.summary.as_mut().unwrap().quic = Some(q);
    let page = render_html(&rec);
    assert!(
        page.contains("QUIC: 12 QUIC connections (UDP, no accept4)"),
        "{page}"
    );
    assert!(
        page.contains(
            "began 12 graceful ends, GOAWAY sent (&quot;&lt;i&gt;reached&lt;/i&gt;&quot; 12)"
        ),
        "{page}"
    );
}
