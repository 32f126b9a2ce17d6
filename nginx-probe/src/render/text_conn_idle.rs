//! The CONNECTIONS section's other times: the idle time before the client's closes
//! and before resets received, the connections' lifetimes, each port's own pinned idle
//! time before nginx's closes (from the report's `connections`, itself from TCP
//! tracepoints and the sockets' time stamps). The idle time before nginx's closes
//! itself is [`super::text_connections`]'.

use std::fmt::Write as _;

use crate::model::connections::{fmt_ms, ConnectionsReport, PortLifecycle};

/// Pinned idle time below which nginx's closes are not an idle timeout (ms): a close
/// within it follows the response itself (`Connection: close`, keepalive off).
pub(super) const IDLE_TIMEOUT_MIN_MS: f64 = 100.0;

/// `p50 X p99 Y mean Z over N` of a log2 histogram of ms (idle times, lifetimes).
pub(super) fn summary(i: &crate::model::idle::IdleReport) -> String {
    format!(
        "p50 {} p99 {} mean {} over {}",
        fmt_ms(i.p50_ms as f64),
        fmt_ms(i.p99_ms as f64),
        fmt_ms(i.mean_ms),
        i.count
    )
}

/// How long the connections closed in the period lived, established to first close
/// (those established since attach: `PortLifecycle::lifetime`).
pub(super) fn lifetime_line(out: &mut String, t: &PortLifecycle) {
    let Some(l) = &t.lifetime else { return };
    let _ = writeln!(
        out,
        "  lifetime, established to first close: {} connections established since attach (log2 histogram, ms)",
        summary(l)
    );
}

/// Each port's own pinned idle time before nginx's closes, when the ports' times
/// differ (the total's is then not pinned: a keepalive_timeout set per server, say).
pub(super) fn port_pinned_lines(out: &mut String, c: &ConnectionsReport) {
    if c.ports.len() < 2 {
        return;
    }
    for p in &c.ports {
        let Some(i) = p.idle_before_nginx_close.as_ref() else {
            continue;
        };
        if let Some(v) = i.pinned_ms.filter(|v| *v >= IDLE_TIMEOUT_MIN_MS) {
            let _ = writeln!(
                out,
                "  port {}: nginx closes connections {} after their last data ({} closes, every one since attach between {} and {}; the ports differ, so no verdict judged which timeout)",
                p.port,
                fmt_ms(v),
                i.count,
                fmt_ms(i.min_ms_since_attach as f64),
                fmt_ms(i.max_ms_since_attach as f64)
            );
        }
    }
}

/// The idle time before the client's closes and before resets received
/// (`PortLifecycle::idle_before_client_close`, `idle_before_reset_received`), with the
/// value they sit at when every one since attach lies within 10% of it: a timer on
/// the client's side (its idle timeout, or a proxy's or a NAT's between), not nginx's;
/// or, under 100 ms, right after an exchange (a client closing once its response is
/// in).
pub(super) fn client_idle_lines(out: &mut String, t: &PortLifecycle) {
    for (what, i) in [
        ("the client's close", &t.idle_before_client_close),
        ("a reset received", &t.idle_before_reset_received),
    ] {
        let Some(i) = i else { continue };
        let pinned = match i.pinned_ms {
            Some(v) if v < IDLE_TIMEOUT_MIN_MS => format!(
                "; every one since attach within {} of the last data: right after an exchange (a client closing once its response is in), no idle timeout",
                fmt_ms(i.max_ms_since_attach as f64)
            ),
            Some(v) => format!(
                "; every one since attach between {} and {}: a timer on the client's side (its idle timeout, or a proxy's or NAT's between) at {}, not nginx's",
                fmt_ms(i.min_ms_since_attach as f64),
                fmt_ms(i.max_ms_since_attach as f64),
                fmt_ms(v)
            ),
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "  idle before {what} (last data sent or received): {} (log2 histogram, ms){pinned}",
            summary(i)
        );
    }
}
