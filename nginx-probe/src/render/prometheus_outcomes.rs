//! The access-log rows of [`super::prometheus_families::FAMILIES`]: what the clients
//! got, per nginx's own access logs (the report's `access_log`, read by
//! `collect::access_log` from attach on, each line matched against its `log_format`).
//! No worker label (a line does not say which worker wrote it); the peer label is
//! bounded like the report (16 peers, then `other`); absent when no access log is read.
//!
//! Times are HDR-histogram estimates (2 significant digits) of logged values with
//! millisecond resolution, so they are gauges by quantile, not histogram buckets.

use super::prometheus_format::{
    Family,
    Kind::{Counter, Gauge},
    Scrape, Sink,
};
use crate::model::access_log::{AccessLogReport, TimeReport};

/// The status classes, always all five (a zero is a known zero).
pub const CLASSES: [&str; 5] = ["2xx", "3xx", "4xx", "499", "5xx"];

/// The report's access log section when at least one access log is read.
fn read<'a>(s: &Scrape<'a>) -> Option<&'a AccessLogReport> {
    s.report.access_log.as_ref().filter(|a| !a.files.is_empty())
}

/// p50, p90, p99 and the maximum of `t`, labelled by `quantile` after `labels`.
fn quantiles(o: &mut Sink, labels: &[&str], t: &TimeReport) {
    for (q, v) in [
        ("0.5", t.p50_s),
        ("0.9", t.p90_s),
        ("0.99", t.p99_s),
        ("1", t.max_s),
    ] {
        let mut l = labels.to_vec();
        l.push(q);
        o.sample(&l, v);
    }
}

/// Lines read, by whether they were understood.
pub(super) const LINES: Family = Family::report(
    "nginx_probe_access_log_lines_total",
    Counter,
    &["state"],
    "Access log lines read since attach, summed over the files read (at most 8): parsed (matched their log_format), unparsed (matched none of the file's formats), ambiguous (matched more than one way: not counted), cut (longer than 16 KB). Absent when no access log is read.",
    |s, o| {
        if let Some(a) = read(s) {
            let sum = |f: fn(&crate::model::access_log::AccessLogFileReport) -> u64| {
                a.files.iter().map(f).sum::<u64>()
            };
            o.sample(&["parsed"], sum(|f| f.lines));
            o.sample(&["unparsed"], sum(|f| f.unparsed));
            o.sample(&["ambiguous"], sum(|f| f.ambiguous));
            o.sample(&["cut"], sum(|f| f.lines_cut));
        }
    },
)
.omit_if_empty();

/// Bytes of the access logs skipped.
pub(super) const SKIPPED: Family = Family::report(
    "nginx_probe_access_log_bytes_skipped_total",
    Counter,
    &[],
    "Access log bytes not read since attach (the reader fell too far behind, or a file was truncated): the counts below miss those lines. Absent when no access log is read.",
    |s, o| {
        if let Some(a) = read(s) {
            o.sample(&[], a.files.iter().map(|f| f.bytes_skipped).sum::<u64>());
        }
    },
)
.omit_if_empty();

/// Responses by status class.
pub(super) const RESPONSES: Family = Family::report(
    "nginx_probe_access_log_responses_total",
    Counter,
    &["class"],
    "Responses since attach by the class of the logged $status: 2xx, 3xx, 4xx (without 499), 499 (the client closed before nginx answered), 5xx. Absent when no format read logs $status.",
    |s, o| {
        if let Some(a) = read(s).filter(|a| !a.lacks.iter().any(|v| v == "$status")) {
            for c in CLASSES {
                o.sample(&[c], a.classes.get(c).copied().unwrap_or(0));
            }
        }
    },
)
.omit_if_empty();

/// Share of nginx's requests that the log shows.
pub(super) const SHARE: Family = Family::report(
    "nginx_probe_access_log_share_logged",
    Gauge,
    &[],
    "Access log lines read over nginx's requests since attach (stub_status): below 1, the counts miss requests (access_log off somewhere, another log, a buffered log not flushed yet, lines not understood). Absent when nginx's request count is unknown.",
    |s, o| o.some(&[], read(s).and_then(|a| a.share_logged)),
)
.omit_if_empty();

/// Client connections that carried a request, per the access log.
pub(super) const CONNECTIONS_WITH_REQUESTS: Family = Family::report(
    "nginx_probe_access_log_connections_with_requests_total",
    Counter,
    &[],
    "Client connections whose first request the access log holds since attach (lines with $connection_requests 1, HTTP/1 and HTTP/2 alike): the connections that carried a request, when the log holds every request. Absent unless every line read logs $connection_requests.",
    |s, o| o.some(&[], read(s).and_then(|a| a.connections_with_requests)),
)
.omit_if_empty();

/// `$request_time` quantiles.
pub(super) const REQUEST_TIME: Family = Family::report(
    "nginx_probe_access_log_request_time_seconds",
    Gauge,
    &["quantile"],
    "The logged $request_time of the requests since attach, seconds, by quantile (0.5, 0.9, 0.99; 1 is the maximum): estimates from an HDR histogram of 2 significant digits of millisecond values. Absent when no format read logs $request_time or no line was read.",
    |s, o| {
        if let Some(t) = read(s).and_then(|a| a.request_time.as_ref()) {
            quantiles(o, &[], t);
        }
    },
)
.omit_if_empty();

/// Tries per upstream peer.
pub(super) const UPSTREAM_TRIES: Family = Family::report(
    "nginx_probe_access_log_upstream_tries_total",
    Counter,
    &["peer"],
    "Requests sent to an upstream peer since attach, per the logged $upstream_addr (a request retried on another peer counts once for each peer tried); 16 peers, the rest as peer=\"other\". Absent when no format read logs $upstream_addr.",
    |s, o| {
        if let Some(a) = read(s) {
            for u in &a.upstreams {
                o.sample(&[&u.peer], u.tries);
            }
        }
    },
)
.omit_if_empty();

/// `$upstream_response_time` quantiles per peer.
pub(super) const UPSTREAM_TIME: Family = Family::report(
    "nginx_probe_access_log_upstream_response_time_seconds",
    Gauge,
    &["peer", "quantile"],
    "The logged $upstream_response_time of a peer's tries since attach, seconds, by quantile (0.5, 0.9, 0.99; 1 is the maximum): HDR-histogram estimates (2 significant digits, millisecond values). Absent when no format read logs $upstream_response_time.",
    |s, o| {
        if let Some(a) = read(s) {
            for u in &a.upstreams {
                if let Some(t) = &u.response_time {
                    quantiles(o, &[&u.peer], t);
                }
            }
        }
    },
)
.omit_if_empty();

/// Requests retried on another peer.
pub(super) const RETRIED: Family = Family::report(
    "nginx_probe_access_log_retried_total",
    Counter,
    &["answered"],
    "Requests logged with more than one upstream peer tried since attach, by what the client got: ok (a status below 500: the retry worked, at the cost of time) or 5xx. Absent when no format read logs $upstream_addr.",
    |s, o| {
        if let Some(a) = read(s).filter(|a| !a.lacks.iter().any(|v| v == "$upstream_addr")) {
            o.sample(&["ok"], a.retried_ok);
            o.sample(&["5xx"], a.retried.saturating_sub(a.retried_ok));
        }
    },
)
.omit_if_empty();
