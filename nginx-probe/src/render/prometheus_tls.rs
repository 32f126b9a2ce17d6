//! The TLS rows of [`super::prometheus_families::FAMILIES`]: libssl's handshakes
//! (uprobe + uretprobe on `SSL_do_handshake`, uprobe on `SSL_free`; the report's
//! `tls`). Continuous in every `--detail` mode, left out when the uprobes are not
//! attached (nginx without libssl, or `--no-tls`).
//!
//! The report sums the handshakes of all workers (no worker label), and carries their
//! wall time as p50/p99/max estimates, not log2 buckets: no histogram family.

use super::prometheus_format::{secs, Family, Kind::Counter, Scrape, Sink};
use crate::model::TlsReport;

/// The report's TLS handshakes; None when libssl is not traced.
fn tls<'a>(s: &Scrape<'a>) -> Option<&'a TlsReport> {
    s.report.tls.as_ref()
}

/// One unlabelled sample of `value` when TLS is traced.
fn one<T: Into<super::prometheus_format::Value>>(
    s: &Scrape,
    o: &mut Sink,
    value: fn(&TlsReport) -> T,
) {
    o.some(&[], tls(s).map(value));
}

/// Handshakes completed.
pub(super) const HANDSHAKES: Family = Family::report(
    "nginx_probe_tls_handshakes_total",
    Counter,
    &[],
    "TLS handshakes completed by all workers since attach (SSL_do_handshake returned 1; uprobes on libssl). Absent when libssl is not traced (no TLS, or --no-tls).",
    |s, o| one(s, o, |t| t.handshakes),
)
.omit_if_empty();

/// Handshakes started.
pub(super) const STARTED: Family = Family::report(
    "nginx_probe_tls_handshakes_started_total",
    Counter,
    &[],
    "TLS handshakes started by all workers since attach (first SSL_do_handshake call on an SSL object).",
    |s, o| one(s, o, |t| t.started),
)
.omit_if_empty();

/// Handshakes abandoned.
pub(super) const ABANDONED: Family = Family::report(
    "nginx_probe_tls_handshakes_abandoned_total",
    Counter,
    &[],
    "TLS handshakes abandoned since attach: the SSL object was freed (SSL_free) before the handshake completed (client gone, protocol error, timeout).",
    |s, o| one(s, o, |t| t.abandoned),
)
.omit_if_empty();

/// `SSL_do_handshake` calls.
pub(super) const CALLS: Family = Family::report(
    "nginx_probe_tls_handshake_calls_total",
    Counter,
    &[],
    "SSL_do_handshake calls of all workers since attach (several per handshake: WANT_READ/WANT_WRITE retries).",
    |s, o| one(s, o, |t| t.calls),
)
.omit_if_empty();

/// Time inside `SSL_do_handshake` calls.
pub(super) const CALL_SECONDS: Family = Family::report(
    "nginx_probe_tls_handshake_call_seconds_total",
    Counter,
    &[],
    "Time inside SSL_do_handshake calls since attach, seconds (uprobe to uretprobe): the handshakes' CPU work, since nginx's sockets are non-blocking, plus any wait for a CPU during the calls.",
    |s, o| one(s, o, |t| secs(t.call_ns)),
)
.omit_if_empty();
