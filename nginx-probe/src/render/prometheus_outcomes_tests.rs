//! Access-log families (`super::super::prometheus_outcomes`): exact values, escaped
//! peers, absent when no access log is read or the format lacks the variable.

use super::{render, report};
use crate::model::access_log::{
    AccessLogFileReport, AccessLogReport, TimeReport, UpstreamOutcomeReport,
};

fn time(p50: f64, max: f64) -> TimeReport {
    TimeReport {
        source: "$request_time".into(),
        count: 3,
        p50_s: p50,
        p90_s: p50,
        p99_s: max,
        max_s: max,
        log2_ms: vec![],
    }
}

/// A read access log: 55 lines (2 unparsed, 1 cut), one peer with a hostile name.
pub(super) fn sample() -> AccessLogReport {
    AccessLogReport {
        files: vec![AccessLogFileReport {
            path: "/var/log/nginx/access.log".into(),
            lines: 55,
            unparsed: 2,
            lines_cut: 1,
            ..Default::default()
        }],
        lines: 55,
        classes: [("2xx".to_string(), 50), ("4xx".to_string(), 5)].into(),
        request_time: Some(time(0.25, 1.5)),
        upstreams: vec![UpstreamOutcomeReport {
            peer: "10.0.0.1:80\"\n".into(),
            tries: 7,
            response_time: Some(time(0.2, 1.0)),
            ..Default::default()
        }],
        retried: 3,
        retried_ok: 2,
        share_logged: Some(1.0),
        connections_with_requests: Some(9),
        ..Default::default()
    }
}

fn lines_of(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| l.starts_with("nginx_probe_access_log"))
        .collect()
}

#[test]
fn access_log_families_render_exact_values_and_are_absent_when_no_log_is_read() {
    let mut r = report();
    r.access_log = None;
    assert!(lines_of(&render(&r)).is_empty());
    r.access_log = Some(AccessLogReport::default());
    assert!(
        lines_of(&render(&r)).is_empty(),
        "configured but no file read: absent"
    );
    r.access_log = Some(sample());
    let text = render(&r);
    assert_eq!(
        lines_of(&text),
        [
            "nginx_probe_access_log_lines_total{state=\"parsed\"} 55",
            "nginx_probe_access_log_lines_total{state=\"unparsed\"} 2",
            "nginx_probe_access_log_lines_total{state=\"ambiguous\"} 0",
            "nginx_probe_access_log_lines_total{state=\"cut\"} 1",
            "nginx_probe_access_log_bytes_skipped_total 0",
            "nginx_probe_access_log_responses_total{class=\"2xx\"} 50",
            "nginx_probe_access_log_responses_total{class=\"3xx\"} 0",
            "nginx_probe_access_log_responses_total{class=\"4xx\"} 5",
            "nginx_probe_access_log_responses_total{class=\"499\"} 0",
            "nginx_probe_access_log_responses_total{class=\"5xx\"} 0",
            "nginx_probe_access_log_share_logged 1",
            "nginx_probe_access_log_connections_with_requests_total 9",
            "nginx_probe_access_log_request_time_seconds{quantile=\"0.5\"} 0.25",
            "nginx_probe_access_log_request_time_seconds{quantile=\"0.9\"} 0.25",
            "nginx_probe_access_log_request_time_seconds{quantile=\"0.99\"} 1.5",
            "nginx_probe_access_log_request_time_seconds{quantile=\"1\"} 1.5",
            "nginx_probe_access_log_upstream_tries_total{peer=\"10.0.0.1:80\\\"\\\\x0a\"} 7",
            "nginx_probe_access_log_upstream_response_time_seconds{peer=\"10.0.0.1:80\\\"\\\\x0a\",quantile=\"0.5\"} 0.2",
            "nginx_probe_access_log_upstream_response_time_seconds{peer=\"10.0.0.1:80\\\"\\\\x0a\",quantile=\"0.9\"} 0.2",
            "nginx_probe_access_log_upstream_response_time_seconds{peer=\"10.0.0.1:80\\\"\\\\x0a\",quantile=\"0.99\"} 1",
            "nginx_probe_access_log_upstream_response_time_seconds{peer=\"10.0.0.1:80\\\"\\\\x0a\",quantile=\"1\"} 1",
            "nginx_probe_access_log_retried_total{answered=\"ok\"} 2",
            "nginx_probe_access_log_retried_total{answered=\"5xx\"} 1",
        ]
    );
    // A format without $status or $upstream_addr: no classes, no retries.
    let a = r.access_log.as_mut().unwrap();
    a.lacks = vec!["$status".into(), "$upstream_addr".into()];
    let text = render(&r);
    assert!(!text.contains("nginx_probe_access_log_responses_total{"));
    assert!(!text.contains("nginx_probe_access_log_retried_total{"));
}
