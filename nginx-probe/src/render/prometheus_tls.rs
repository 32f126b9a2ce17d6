//! The TLS rows of [`super::prometheus_families::FAMILIES`]: the report's `tls`.
//! Completed handshakes are continuous in every `--detail` mode (nginx's
//! `ngx_ssl_ocsp_validate`, or libssl's `SSL_do_handshake` returning 1); libssl's
//! other figures (uprobe + uretprobe on `SSL_do_handshake`, uprobe on `SSL_free`) are
//! detail-layer figures when nginx counts the handshakes under `--detail sampled`, and
//! left out when libssl's uprobes are not attached (nginx's count alone: no libssl
//! mapped and none in the binary). All left out when no TLS uprobe is attached (nginx
//! without TLS, or `--no-tls`).
//!
//! The report sums the handshakes of all workers (no worker label), and carries their
//! wall time as p50/p99/max estimates, not log2 buckets: no histogram family.

use super::prometheus_format::{
    secs, Family,
    Kind::{Counter, Gauge},
    Layer::Detail,
    Scrape, Sink,
};
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

/// One unlabelled sample of `value` when libssl's uprobes are attached (a shared
/// libssl, or OpenSSL in the nginx binary); absent when nginx's count is alone
/// (`libssl_from` `none`: those figures were not measured).
fn libssl_one<T: Into<super::prometheus_format::Value>>(
    s: &Scrape,
    o: &mut Sink,
    value: fn(&TlsReport) -> T,
) {
    let measured = tls(s).filter(|t| t.libssl_from.as_deref() != Some("none"));
    o.some(&[], measured.map(value));
}

/// Handshakes completed.
pub(super) const HANDSHAKES: Family = Family::report(
    "nginx_probe_tls_handshakes_total",
    Counter,
    &[],
    "TLS handshakes completed on the workers' client connections since attach: nginx's ngx_ssl_ocsp_validate calls (uprobe; connections nginx accepted, TCP and QUIC) where nginx exports it, else SSL_do_handshake returning 1 (uprobes on libssl). Absent when no TLS uprobe is attached (nginx without TLS, or --no-tls).",
    |s, o| one(s, o, |t| t.handshakes),
)
.omit_if_empty();

/// Whether nginx counts the handshakes.
pub(super) const FROM_NGINX: Family = Family::report(
    "nginx_probe_tls_handshakes_from_nginx",
    Gauge,
    &[],
    "1: completed TLS handshakes are counted by the uprobe on nginx's ngx_ssl_ocsp_validate (one hit per handshake), and libssl's figures (started, abandoned, calls, call time) are detail-layer figures; 0: libssl's uprobes count everything, all the time.",
    |s, o| {
        one(s, o, |t| {
            u64::from(t.handshakes_from.as_deref() == Some("ngx_ssl_ocsp_validate"))
        })
    },
)
.omit_if_empty();

/// Handshakes started.
pub(super) const STARTED: Family = Family::report(
    "nginx_probe_tls_handshakes_started_total",
    Counter,
    &[],
    "TLS handshakes started by all workers since attach (first SSL_do_handshake call on an SSL object of a client connection). All the time when nginx_probe_tls_handshakes_from_nginx is 0.",
    |s, o| libssl_one(s, o, |t| t.started),
)
.layer(Detail)
.omit_if_empty();

/// Handshakes abandoned.
pub(super) const ABANDONED: Family = Family::report(
    "nginx_probe_tls_handshakes_abandoned_total",
    Counter,
    &[],
    "TLS handshakes abandoned since attach: the SSL object was freed (SSL_free) before the handshake completed (client gone, protocol error, timeout). All the time when nginx_probe_tls_handshakes_from_nginx is 0.",
    |s, o| libssl_one(s, o, |t| t.abandoned),
)
.layer(Detail)
.omit_if_empty();

/// `SSL_do_handshake` calls.
pub(super) const CALLS: Family = Family::report(
    "nginx_probe_tls_handshake_calls_total",
    Counter,
    &[],
    "SSL_do_handshake calls of all workers since attach (several per handshake: WANT_READ/WANT_WRITE retries). All the time when nginx_probe_tls_handshakes_from_nginx is 0.",
    |s, o| libssl_one(s, o, |t| t.calls),
)
.layer(Detail)
.omit_if_empty();

/// Time inside `SSL_do_handshake` calls.
pub(super) const CALL_SECONDS: Family = Family::report(
    "nginx_probe_tls_handshake_call_seconds_total",
    Counter,
    &[],
    "Time inside SSL_do_handshake calls since attach, seconds (uprobe to uretprobe): the handshakes' CPU work, since nginx's sockets are non-blocking, plus any wait for a CPU during the calls. All the time when nginx_probe_tls_handshakes_from_nginx is 0.",
    |s, o| libssl_one(s, o, |t| secs(t.call_ns)),
)
.layer(Detail)
.omit_if_empty();
