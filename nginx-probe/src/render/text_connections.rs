//! The CONNECTIONS section of the text report: who closed nginx's client connections
//! first, the idle time before nginx's closes, resets, listeners closed (from the
//! report's `connections`, itself from TCP tracepoints).

use std::fmt::Write as _;

use crate::model::{
    connections::{fmt_ms, ConnectionsReport, PortLifecycle},
    Report,
};

use super::{
    clock::clock,
    text_conn_idle::{
        client_idle_lines, lifetime_line, port_pinned_lines, summary, IDLE_TIMEOUT_MIN_MS,
    },
};

/// Appends the section; nothing when the report has no `connections`.
pub fn connections_section(out: &mut String, r: &Report) {
    let Some(c) = &r.connections else { return };
    let t = c.total();
    title(out, c);
    let _ = writeln!(
        out,
        "  established {}  closed first by nginx {}  by the client {}  by a reset {}{}",
        t.established,
        t.closed_by_nginx,
        t.closed_by_client,
        t.closed_by_reset,
        if t.closed_by_worker_exit > 0 {
            format!("  as their worker exited {}", t.closed_by_worker_exit)
        } else {
            String::new()
        }
    );
    if let Some((pid, t_s)) = super::sections::upgrade_beside(r) {
        let _ = writeln!(
            out,
            "  a binary upgrade's new master {pid} runs beside this one since +{t_s:.1}s: its workers serve the same listening sockets, so these counts include their connections from then (the per-worker figures are this master's alone)"
        );
    }
    if let Some(why) = c
        .worker_exit_unknown
        .as_ref()
        .filter(|_| t.closed_by_nginx > 0)
    {
        let _ = writeln!(out, "  closes as a worker exited: not told apart ({why})");
    }
    tls_client_first_line(out, r, c, &t);
    fin_unread_line(out, c, &t);
    without_data_line(out, &t);
    let h2_ports = r.config.as_ref().and_then(|k| k.http2_ports());
    draining_lines(out, c, &t, c.mid_response_on(h2_ports.as_deref()));
    nginx_resets_line(out, &t);
    worker_closes_line(out, r);
    if t.resets_sent + t.resets_received > 0 {
        let reasons: Vec<String> = t
            .resets_sent_by_reason
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(
            out,
            "  resets received {}  sent {}{}",
            t.resets_received,
            t.resets_sent,
            if reasons.is_empty() {
                String::new()
            } else {
                format!(" ({})", reasons.join(", "))
            }
        );
    }
    if t.listeners_closed > 0 {
        let _ = writeln!(
            out,
            "  listening sockets closed {}  resets sent to connections queued on them {}",
            t.listeners_closed, t.resets_of_closed_listener_queue
        );
    }
    listener_close_lines(out, c);
    let which = r
        .verdicts
        .iter()
        .find(|v| v.id == "keepalive_timeout_closes" || v.id == "nginx_timeout_closes")
        .map(|v| v.id.as_str());
    idle_lines(out, r, c, &t, which);
    client_idle_lines(out, &t);
    lifetime_line(out, &t);
}

/// On TLS, a client answering nginx's close_notify (or HTTP/2 GOAWAY) before nginx's
/// own `close()` closes first at the TCP level: counted as nginx's when the
/// `ngx_ssl_shutdown` uprobe saw nginx begin the close (said with its count), else a
/// caveat on "by the client" with why it is not told apart.
fn tls_client_first_line(out: &mut String, r: &Report, c: &ConnectionsReport, t: &PortLifecycle) {
    let tls = r.tls.as_ref().is_some_and(|x| x.handshakes > 0);
    let Some(why) = &c.tls_close_unknown else {
        if t.closed_by_nginx_client_fin_first > 0 {
            let resets = t.closed_by_nginx_client_reset_first;
            let fins = t.closed_by_nginx_client_fin_first.saturating_sub(resets);
            let _ = writeln!(
                out,
                "  on TLS, {} of nginx's closes met the client's answer before nginx's own close() ({fins} a FIN, {resets} a reset): the client answered nginx's close_notify, HTTP/2 GOAWAY or `Connection: close` response; nginx began them (uprobe ngx_ssl_shutdown), so they are counted as nginx's",
                t.closed_by_nginx_client_fin_first
            );
        }
        if t.closed_by_nginx_data_unread > 0 {
            let _ = writeln!(
                out,
                "  on TLS, {} of nginx's closes found the client's data unread at nginx's close() (its close_notify answering nginx's, most often), which the kernel ends with a reset (TCP_ABORT_ON_CLOSE): nginx began them (uprobe ngx_ssl_shutdown), so they are counted as nginx's, not as resets",
                t.closed_by_nginx_data_unread
            );
        }
        return;
    };
    if !tls || t.closed_by_client == 0 {
        return;
    }
    let aborts = t
        .resets_sent_by_reason
        .get("TCP_ABORT_ON_CLOSE")
        .copied()
        .unwrap_or(0);
    let _ = writeln!(
        out,
        "  on TLS, \"by the client\" may include clients that answered nginx's close_notify before nginx's own close() (who began the close is not told apart: {why}); nginx's close() finding the client's data unread shows as TCP_ABORT_ON_CLOSE resets sent: {aborts}"
    );
}

/// Connections closed before the client sent a byte, said with who closed them; they
/// carried no request (nothing when there were none, or they are not counted).
fn without_data_line(out: &mut String, t: &PortLifecycle) {
    let n = t.closed_without_data();
    if n == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "  {n} closed without a byte from the client (by the client {}, by nginx {}, by a reset {}), so they carried no request (tcp_sock.bytes_received at the close): the client's are connections opened and never used (spare connections, health checks that only connect); nginx's were closed before their first byte came (client_header_timeout, or a worker at worker_connections freeing connections it has not read from)",
        t.closed_without_data_by_client, t.closed_without_data_by_nginx, t.closed_without_data_by_reset
    );
}

/// nginx's closes met by a client's FIN it never read (a response with
/// `Connection: close` racing a client that closes on reading it), said with their
/// count; or, when they are not told apart, a caveat on "by the client" with why.
fn fin_unread_line(out: &mut String, c: &ConnectionsReport, t: &PortLifecycle) {
    match &c.fin_unread_why() {
        None if t.closed_by_nginx_client_fin_unread > 0 => {
            let _ = writeln!(
                out,
                "  {} of nginx's closes met the client's FIN first, unread: nginx sent its response and closed without reading the client's EOF (`Connection: close`: keepalive_requests reached, keepalive_timeout 0, HTTP/1.0), so they are counted as nginx's (tcp_sock.copied_seq behind rcv_nxt at the worker's close())",
                t.closed_by_nginx_client_fin_unread
            );
        }
        Some(why) if t.closed_by_client > 0 => {
            let _ = writeln!(
                out,
                "  \"by the client\" may include responses with `Connection: close` whose client closed on reading them before nginx's own close() ({why})"
            );
        }
        _ => {}
    }
}

/// nginx's closes by draining workers (or why they are not told apart).
/// `h2_mid`: of the silent closes with nginx's data last, those on ports serving
/// HTTP/2 (see `PortLifecycle::silent_split`).
fn draining_lines(out: &mut String, c: &ConnectionsReport, t: &PortLifecycle, h2_mid: u64) {
    if t.closed_while_draining > 0 {
        let mut parts = vec![format!(
            "{} idle keepalive connections closed under their clients (in nginx's sweep of idle connections; a request a client sent on one at that moment fails: nginx closed the connection it came on)",
            t.closed_while_draining_idle
        )];
        let when = |span: Option<crate::model::connections::MsSpan>| {
            span.map(|s| {
                format!(
                    ", {} after the drain began",
                    crate::model::idle::ms_range(s.min_ms, s.max_ms)
                )
            })
            .unwrap_or_default()
        };
        if t.closed_while_draining_after_data > 0 {
            parts.push(format!(
                "{} right after nginx's own last data{} (a response's end, a response still streaming when cut, or {}: not told apart)",
                t.closed_while_draining_after_data,
                when(t.after_data_close_after_drain_start),
                if c.tls_close_unknown.is_some() {
                    "a TLS close_notify / HTTP/2 GOAWAY"
                } else {
                    "an HTTP/2 GOAWAY"
                }
            ));
        }
        if t.closed_while_draining_silent > 0 {
            parts.push(format!(
                "{} with nothing sent by nginx just before{}: {}",
                t.closed_while_draining_silent,
                when(t.silent_close_after_drain_start),
                t.silent_split(h2_mid)
            ));
        }
        let rest = t.closed_while_draining.saturating_sub(
            t.closed_while_draining_idle
                + t.closed_while_draining_after_data
                + t.closed_while_draining_silent,
        );
        if rest > 0 {
            parts.push(format!("{rest} not measured (socket unreadable)"));
        }
        let _ = writeln!(
            out,
            "  of nginx's closes, {} by draining workers (graceful shutdown: a reload, a QUIT, a binary upgrade's WINCH; uprobe ngx_close_idle_connections and its return): {}; not in the idle times below",
            t.closed_while_draining,
            parts.join(", ")
        );
    } else if let Some(why) = c
        .draining_unknown
        .as_ref()
        .filter(|_| t.closed_by_nginx > 0)
    {
        let _ = writeln!(
            out,
            "  closes by draining workers: not told apart from the serving workers' ({why})"
        );
    }
}

/// The resets that were nginx's own close (`closed_by_nginx_reset`), and how many of
/// them draining workers made; nothing when none.
fn nginx_resets_line(out: &mut String, t: &PortLifecycle) {
    if t.closed_by_nginx_reset == 0 {
        return;
    }
    let draining = if t.closed_while_draining_reset > 0 {
        format!(
            ", {} of them by draining workers (connections a reload or QUIT cut: a request had arrived as the worker closed them)",
            t.closed_while_draining_reset
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "  of the closes by a reset, {} were nginx's own (a worker's close() with the client's data unread, TCP_ABORT_ON_CLOSE, or SO_LINGER 0 as reset_timedout_connection sets){draining}",
        t.closed_by_nginx_reset
    );
}

/// Workers listed with closes, at most.
const MAX_WORKER_CLOSES: usize = 16;

/// Which worker closed: each listed worker's own closes (`connections_closed`), when
/// more than one worker closed any; at most [`MAX_WORKER_CLOSES`], the rest counted.
fn worker_closes_line(out: &mut String, r: &Report) {
    let rows: Vec<String> = r
        .workers
        .iter()
        .filter_map(|w| w.connections_closed.map(|c| (w.pid, c)))
        .filter(|(_, c)| c.by_nginx + c.after_client + c.by_worker_exit + c.reset_by_nginx > 0)
        .map(|(pid, c)| {
            let mut s = format!("{pid}: nginx first {}", c.by_nginx);
            if c.while_draining > 0 {
                let _ = write!(s, " (draining {})", c.while_draining);
            }
            let _ = write!(s, ", after the client {}", c.after_client);
            if c.by_worker_exit > 0 {
                let _ = write!(s, ", at its exit {}", c.by_worker_exit);
            }
            if c.reset_by_nginx > 0 {
                let _ = write!(s, ", with its own reset {}", c.reset_by_nginx);
            }
            s
        })
        .collect();
    if rows.len() < 2 {
        return;
    }
    let more = rows.len().saturating_sub(MAX_WORKER_CLOSES);
    let _ = writeln!(
        out,
        "  closed by each worker's close() (pid): {}{}",
        rows[..rows.len().min(MAX_WORKER_CLOSES)].join("; "),
        if more > 0 {
            format!("; {more} more workers")
        } else {
            String::new()
        }
    );
}

/// The idle time before nginx's closes (or why it is unknown); `which` is the verdict
/// that names the timeout, when one does.
fn idle_lines(
    out: &mut String,
    r: &Report,
    c: &ConnectionsReport,
    t: &PortLifecycle,
    which: Option<&str>,
) {
    match &t.idle_before_nginx_close {
        Some(i) => {
            let _ = writeln!(
                out,
                "  idle before nginx's close (last data sent or received): {} closes (log2 histogram, ms)",
                summary(i)
            );
            if i.after_nginx_wrote > 0 {
                let what = if c.tls_close_unknown.is_some() {
                    "a TLS close_notify, an HTTP/2 GOAWAY, or a response closed at once"
                } else {
                    "an HTTP/2 GOAWAY, or a response closed at once; a TLS close_notify is not in it, the time being read before it"
                };
                let _ = writeln!(
                    out,
                    "    {} of them came right after nginx's own last data ({what}): their idle time is since the client's last data",
                    i.after_nginx_wrote
                );
            }
            // Closes right after a response (pinned near 0 ms) are no idle timeout:
            // said as such, not as "idle after 0 ms".
            if let Some(v) = i.pinned_ms.filter(|v| *v < IDLE_TIMEOUT_MIN_MS) {
                let _ = writeln!(
                    out,
                    "  nginx closes connections right after a response ({} after the last data: not an idle timeout){}",
                    fmt_ms(v),
                    after_response_causes(r)
                );
            } else if let Some(v) = i.pinned_ms {
                let _ = writeln!(
                    out,
                    "  nginx closes connections {} after their last data (every close since attach between {} and {}; {})",
                    fmt_ms(v),
                    fmt_ms(i.min_ms_since_attach as f64),
                    fmt_ms(i.max_ms_since_attach as f64),
                    match which {
                        Some(id) => format!("which timeout: see the verdict {id}"),
                        None => "no verdict judged which timeout: too few closes, or too small a share of them".into(),
                    }
                );
            } else {
                port_pinned_lines(out, c);
            }
        }
        None if t.closed_by_nginx > 0 => {
            if let Some(why) = &c.idle_unknown {
                let _ = writeln!(out, "  idle before nginx's close: unknown ({why})");
            }
        }
        None => {}
    }
}

/// What makes nginx close a connection right after its response, as candidates with
/// their values (the configuration's http level, `file:line`) and the period's requests
/// per connection: none is measured as the one (the verdicts `keepalive_off` and
/// `keepalive_requests_low` judge two of them).
fn after_response_causes(r: &Report) -> String {
    // Trial 10: 300 `return 444` against 300 closes by nginx still listed the
    // keepalive settings as candidates: the 444s are nginx's closes, as configured.
    let by_nginx = r
        .connections
        .as_ref()
        .map_or(0, |c| c.total().with_data().closed_by_nginx);
    if let Some(n) = r
        .access_log
        .as_ref()
        .and_then(|a| a.answered_444_closing(by_nginx))
    {
        return format!("; {}", crate::model::access_log::said_444(n, by_nginx));
    }
    let Some(cfg) = r.config.as_ref().filter(|c| c.is_read()) else {
        return "; nginx does so at keepalive_requests, keepalive_time, keepalive_timeout 0, or when the client asks (the configuration was not read)".into();
    };
    // Every place it is set: the value in force where the traffic went is among them
    // (which server a connection reached is not measured by port).
    let v = |d: &str| match cfg.with_overrides(d) {
        Some(v) => format!("{d} {v}"),
        None => format!("{d} unknown"),
    };
    let per = match (logged_carried(r), per_carried(r)) {
        (Some((count, carried, missing)), _) => format!(
            " ({:.1} requests per connection that carried one here: {} requests over the {carried} connections whose first request the access log holds, $connection_requests 1{})",
            count as f64 / carried as f64,
            r.requests.source.name(),
            if missing > 0 { ", a ceiling: the log may miss some first requests" } else { "" }
        ),
        (None, Some((p, _, unused))) => format!(
            " ({p:.1} requests per connection here: {} requests over the accepts the kernel saw, less the {unused} that carried no request: closed before their client sent a byte, or their TLS handshake abandoned{})",
            r.requests.source.name(),
            tls_carried_caveat(r)
        ),
        (None, None) => r
            .requests
            .per_connection
            .map(|p| {
                format!(
                    " ({p:.1} requests per connection here: {} requests over the accepts the kernel saw)",
                    r.requests.source.name()
                )
            })
            .unwrap_or_default(),
    };
    // Trial 9: `return 444` closes without a response; its access-log lines say so.
    let no_response = match r.access_log.as_ref().and_then(|a| a.statuses.get("444")) {
        Some(n) => format!(", with `return 444` (nginx's access log: {n} requests closed without a response, status 444)"),
        None => String::new(),
    };
    format!(
        "; nginx does so at {}{per}, at {}, with {}{no_response}, or when the client asks (Connection: close, HTTP/1.0): which one is not measured",
        v("keepalive_requests"),
        v("keepalive_time"),
        v("keepalive_timeout")
    )
}

/// nginx's request count when it can be set against the accepts: no QUIC connection
/// carried some (no accept did) and no own hop of nginx's is among them
/// ([`crate::model::own_hops`]); None otherwise, or when the requests are unknown.
fn client_requests(r: &Report) -> Option<u64> {
    r.requests.count.filter(|_| {
        r.quic.is_none()
            && crate::model::own_hops(r.config.as_ref(), r.connections.as_ref(), &r.listen)
                .is_none()
    })
}

/// `(requests, connections that carried one, requests the log may miss)`: nginx's
/// count ([`client_requests`]) over the connections whose first request the access log
/// holds (`AccessLogReport::connections_carried`); None when either is unknown or no
/// connection carried one.
pub(super) fn logged_carried(r: &Report) -> Option<(u64, u64, u64)> {
    let count = client_requests(r)?;
    let (carried, missing) = r.access_log.as_ref()?.connections_carried()?;
    (carried > 0).then_some((count, carried, missing))
}

/// The caveat on [`per_carried`] over TLS: a connection whose handshake completed
/// carried data whether or not a request followed (trial 8: `hey -h2` completed
/// thousands of handshakes it never sent a request on, so 2.3 per connection stood
/// for nginx's 20); empty without TLS handshakes.
pub(super) fn tls_carried_caveat(r: &Report) -> &'static str {
    match r.tls.as_ref().filter(|t| t.handshakes > 0) {
        Some(_) => "; over TLS a connection counts as carrying data once its handshake completed, a request or not, so this is a floor",
        None => "",
    }
}

/// Requests per connection over the connections that carried data, when some were
/// closed before their client sent a byte (counted at the close) or abandoned their
/// TLS handshake (libssl's programs): `(per connection, carried, those left out)`;
/// None when none were, they are not counted, the requests are unknown, the abandoned
/// handshakes are counted in the detail windows only, or QUIC connections carried
/// some (no accept did).
pub(super) fn per_carried(r: &Report) -> Option<(f64, u64, u64)> {
    let count = client_requests(r)?;
    let c = r
        .connections
        .as_ref()
        .filter(|c| c.without_data_unknown.is_none())?;
    let unused = crate::model::connections::accepts_without_request(Some(c), r.tls.as_ref())?;
    let accepts: u64 = r.workers.iter().map(|w| w.accepts).sum();
    let carried = accepts.saturating_sub(unused);
    (unused > 0 && carried > 0).then(|| (count as f64 / carried as f64, carried, unused))
}

/// The section as the HTML page and the live view show it, one source of the facts
/// (with the upstream peers' lines of [`super::text_upstream_peers`] after it):
/// `Ok((source, lines))` with the title's source (ports, tracepoints) and the lines
/// trimmed, `Err(why)` when the connections were not traced
/// (`connections_not_traced`), None when the report has neither.
pub fn connections_lines(r: &Report) -> Option<Result<(String, Vec<String>), String>> {
    let mut text = String::new();
    connections_section(&mut text, r);
    super::text_upstream_peers::peers_section(&mut text, r);
    let mut lines = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string);
    match lines.next() {
        Some(title) => Some(Ok((
            title.trim_start_matches("CONNECTIONS").trim().to_string(),
            lines.collect(),
        ))),
        None => r.connections_not_traced.clone().map(Err),
    }
}

/// The section's title: the ports counted, and those of listener closes seen in the
/// period only.
fn title(out: &mut String, c: &ConnectionsReport) {
    let ports: std::collections::BTreeSet<u16> = c
        .ports
        .iter()
        .map(|p| p.port)
        .chain(c.listener_closes.iter().map(|e| e.port))
        .collect();
    let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
    let _ = writeln!(
        out,
        "\nCONNECTIONS (port {}; tracepoints sock:inet_sock_set_state, tcp:tcp_*_reset)",
        ports.join(", ")
    );
}

/// One line per listener-close event of the period (after which reload, when, the
/// port, sockets closed and queued connections reset), then the merged ones' sums.
fn listener_close_lines(out: &mut String, c: &ConnectionsReport) {
    for e in &c.listener_closes {
        let _ = writeln!(
            out,
            "    {} at {}: port {}, {}, {}",
            e.after_reload(),
            clock(e.seen_unix_s),
            e.port,
            count(
                e.listeners_closed,
                "listening socket",
                "listening sockets",
                "closed"
            ),
            count(
                e.resets_of_queued_connections,
                "queued connection",
                "queued connections",
                "reset"
            )
        );
    }
    if let Some(m) = &c.listener_closes_merged {
        let _ = writeln!(
            out,
            "    {} (not listed): {}, {}",
            count(
                m.events,
                "older listener close",
                "older listener closes",
                "merged"
            ),
            count(
                m.listeners_closed,
                "listening socket",
                "listening sockets",
                "closed"
            ),
            count(
                m.resets_of_queued_connections,
                "queued connection",
                "queued connections",
                "reset"
            )
        );
    }
}

/// "1 listening socket closed", "12 queued connections reset".
fn count(n: u64, one: &str, many: &str, what: &str) -> String {
    format!("{n} {} {what}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::connections::MsSpan;

    /// A summary with nothing in it.
    fn minimal_report() -> Report {
        serde_json::from_value(serde_json::json!({
            "schema": 1, "verdicts": [], "type": "summary", "time_unix_s": 3600.0,
            "master_pid": 9, "master_nspid": [9], "duration_s": 2.0, "workers": [],
            "listen": [], "logs": {}, "drops": {}, "traced_syscalls": [],
            "missing_tracepoints": [], "events": []
        }))
        .expect("minimal report")
    }

    #[test]
    fn the_section_says_who_closed_and_the_pinned_idle_time() {
        let mut r = minimal_report();
        let mut out = String::new();
        connections_section(&mut out, &r);
        assert_eq!(out, "", "nothing without connections");
        r.connections = Some(crate::model::connections::sample_report());
        connections_section(&mut out, &r);
        assert!(
            out.contains("closed first by nginx 10  by the client 3  by a reset 1"),
            "{out}"
        );
        assert!(
            out.contains("resets received 1  sent 1 (reason_14 1)"),
            "{out}"
        );
        assert!(
            out.contains("nginx closes connections 2.0 s after their last data"),
            "{out}"
        );
        assert!(out.contains("listening sockets closed 1"), "{out}");
        assert!(!out.contains("after reload"), "{out}");
    }

    /// Trial 7: 400 requests, 3240 accepts, 2840 of them a health checker's that never
    /// sent a byte: per connection that carried data 1.0, not 0.1; with 10 abandoned
    /// TLS handshakes too, 390 carried one.
    #[test]
    fn requests_per_connection_leave_out_those_that_carried_none() {
        let mut r = minimal_report();
        r.requests.count = Some(400);
        let mut w = r.workers.first().cloned().unwrap_or_else(|| {
            serde_json::from_str::<Report>(include_str!(
                "../testdata/two_workers_300_connections.report.json"
            ))
            .expect("golden")
            .workers[0]
                .clone()
        });
        w.accepts = 3240;
        r.workers = vec![w];
        let mut c = crate::model::connections::sample_report();
        c.ports[0].closed_without_data_by_client = 2840;
        r.connections = Some(c);
        assert_eq!(per_carried(&r), Some((1.0, 400, 2840)));
        r.tls = Some(crate::model::TlsReport {
            abandoned: 10,
            ..Default::default()
        });
        assert_eq!(per_carried(&r), Some((400.0 / 390.0, 390, 2850)));
        if let Some(t) = r.tls.as_mut() {
            t.libssl_sampled = true;
        }
        assert_eq!(per_carried(&r), None, "abandoned counted in windows only");
        // Over TLS, a completed handshake is data whether a request followed or not.
        assert_eq!(tls_carried_caveat(&r), "");
        if let Some(t) = r.tls.as_mut() {
            t.handshakes = 7392;
        }
        assert!(tls_carried_caveat(&r).contains("so this is a floor"));
    }

    #[test]
    fn connections_closed_without_a_byte_are_said_with_who_closed_them() {
        let mut r = minimal_report();
        let mut c = crate::model::connections::sample_report();
        c.ports[0].closed_without_data_by_client = 2;
        c.ports[0].closed_without_data_by_nginx = 1;
        r.connections = Some(c);
        let mut out = String::new();
        connections_section(&mut out, &r);
        assert!(out.contains("\n  3 closed without a byte from the client (by the client 2, by nginx 1, by a reset 0), so they carried no request"), "{out}");
        r.connections = Some(crate::model::connections::sample_report());
        out.clear();
        connections_section(&mut out, &r);
        assert!(!out.contains("without a byte"), "{out}");
    }

    #[test]
    fn a_binary_upgrade_s_new_master_beside_is_said_in_the_counts() {
        let mut r = minimal_report();
        r.connections = Some(crate::model::connections::sample_report());
        r.events.push(crate::model::Event {
            t_s: 6.04,
            event: crate::model::EventKind::NewMaster,
            pid: 13614,
        });
        let mut out = String::new();
        connections_section(&mut out, &r);
        assert!(out.contains("\n  a binary upgrade's new master 13614 runs beside this one since +6.0s: its workers serve the same listening sockets, so these counts include their connections from then (the per-worker figures are this master's alone)\n"), "{out}");
        // An interval after the event's: the tracker's new master still beside.
        r.events.clear();
        r.new_master_beside = Some(crate::model::NewMasterBeside {
            pid: 13614,
            since_s: 6.04,
        });
        let mut out = String::new();
        connections_section(&mut out, &r);
        assert!(
            out.contains(
                "\n  a binary upgrade's new master 13614 runs beside this one since +6.0s"
            ),
            "{out}"
        );
        r.new_master_beside = None;
        let mut out = String::new();
        connections_section(&mut out, &r);
        assert!(!out.contains("new master"), "{out}");
    }

    #[test]
    fn closes_by_a_workers_exit_and_after_nginx_wrote_are_said() {
        let mut r = minimal_report();
        let mut c = crate::model::connections::sample_report();
        c.ports[0].closed_by_worker_exit = 4;
        if let Some(i) = c.ports[0].idle_before_nginx_close.as_mut() {
            i.after_nginx_wrote = 10;
        }
        r.connections = Some(c);
        let mut out = String::new();
        connections_section(&mut out, &r);
        assert!(
            out.contains("by the client 3  by a reset 1  as their worker exited 4"),
            "{out}"
        );
        assert!(
            out.contains("10 of them came right after nginx's own last data"),
            "{out}"
        );
        assert!(
            out.contains("nginx closes connections 2.0 s after their last data"),
            "{out}"
        );
    }

    #[test]
    fn closes_by_draining_workers_and_by_each_worker_are_said_or_why_not() {
        use crate::model::connections::WorkerCloses;
        let mut r = minimal_report();
        let mut c = crate::model::connections::sample_report();
        c.draining_unknown =
            Some("the uprobe on ngx_close_idle_connections was not attached".into());
        r.connections = Some(c.clone());
        let mut out = String::new();
        connections_section(&mut out, &r);
        assert!(
            out.contains("  closes by draining workers: not told apart from the serving workers' (the uprobe on ngx_close_idle_connections was not attached)\n"),
            "{out}"
        );
        c.draining_unknown = None;
        c.ports[0].closed_while_draining = 8;
        c.ports[0].closed_while_draining_idle = 5;
        c.ports[0].closed_while_draining_after_data = 2;
        c.ports[0].closed_while_draining_silent = 1;
        c.ports[0].silent_close_after_drain_start = Some(MsSpan {
            min_ms: 1004,
            max_ms: 1004,
        });
        r.connections = Some(c);
        let golden: Report = serde_json::from_str(include_str!(
            "../testdata/two_workers_300_connections.report.json"
        ))
        .expect("the golden report");
        let mut w = golden.workers[0].clone();
        w.pid = 101;
        let closes = |by_nginx, while_draining, after_client| WorkerCloses {
            by_nginx,
            while_draining,
            after_client,
            by_worker_exit: 0,
            reset_by_nginx: 0,
        };
        let mut a = w.clone();
        a.connections_closed = Some(closes(6, 5, 2));
        let mut b = w.clone();
        b.pid = 102;
        b.connections_closed = Some(closes(4, 2, 1));
        r.workers = vec![a.clone()];
        let mut out = String::new();
        connections_section(&mut out, &r);
        assert!(
            out.contains("  of nginx's closes, 8 by draining workers (graceful shutdown: a reload, a QUIT, a binary upgrade's WINCH; uprobe ngx_close_idle_connections and its return): 5 idle keepalive connections closed under their clients (in nginx's sweep of idle connections; a request a client sent on one at that moment fails: nginx closed the connection it came on), 2 right after nginx's own last data (a response's end, a response still streaming when cut, or an HTTP/2 GOAWAY: not told apart), 1 with nothing sent by nginx just before, 1.0 s after the drain began: 1 with the client's data last (a request waiting for its response, its client got none, or a connection without a whole request); not in the idle times below\n"),
            "{out}"
        );
        assert!(
            !out.contains("each worker"),
            "one worker: no per-worker line: {out}"
        );
        if let Some(c) = b.connections_closed.as_mut() {
            c.reset_by_nginx = 3;
        }
        r.workers = vec![a, b];
        let mut out = String::new();
        connections_section(&mut out, &r);
        assert!(
            out.contains("  closed by each worker's close() (pid): 101: nginx first 6 (draining 5), after the client 2; 102: nginx first 4 (draining 2), after the client 1, with its own reset 3\n"),
            "{out}"
        );
    }

    #[test]
    fn each_listener_close_is_a_line_naming_its_reload() {
        use crate::model::listener_closes::{ListenerClose, ListenerClosesMerged};
        let mut c = crate::model::connections::sample_report();
        let at = |g: Option<u32>, since: u32, closed: u64, resets: u64| ListenerClose {
            seen_unix_s: 3603.0,
            port: 8080,
            reload_generation: g,
            reloads_since_attach: since,
            listeners_closed: closed,
            resets_of_queued_connections: resets,
        };
        c.listener_closes = vec![
            at(Some(1), 1, 1, 12),
            at(Some(3), 0, 2, 1),
            at(None, 0, 1, 0),
        ];
        c.listener_closes_merged = Some(ListenerClosesMerged {
            events: 3,
            listeners_closed: 3,
            resets_of_queued_connections: 7,
        });
        let mut out = String::new();
        listener_close_lines(&mut out, &c);
        assert_eq!(
            out,
            "    after reload 1 (generation 1) at 01:00:03: port 8080, 1 listening socket closed, 12 queued connections reset\n\
             \x20   after a reload before attach (generation 3) at 01:00:03: port 8080, 2 listening sockets closed, 1 queued connection reset\n\
             \x20   with no reload seen (nginx stopping closes them too) at 01:00:03: port 8080, 1 listening socket closed, 0 queued connections reset\n\
             \x20   3 older listener closes merged (not listed): 3 listening sockets closed, 7 queued connections reset\n"
        );
    }

    /// On TLS, without the ngx_ssl_shutdown uprobe, the clients' closes carry their
    /// caveat with why and the aborts counted; with it, the closes whose client's FIN
    /// came first are said as nginx's when there are any; on plain HTTP neither.
    #[test]
    fn tls_client_first_closes_carry_their_caveat_or_their_count() {
        let mut r = minimal_report();
        let mut c = crate::model::connections::sample_report();
        c.ports[0]
            .resets_sent_by_reason
            .insert("TCP_ABORT_ON_CLOSE".into(), 2);
        c.tls_close_unknown = Some("the uprobe on ngx_ssl_shutdown was not attached".into());
        r.connections = Some(c.clone());
        let mut out = String::new();
        connections_section(&mut out, &r);
        assert!(!out.contains("on TLS"), "{out}");
        r.tls = Some(crate::model::TlsReport {
            handshakes: 14,
            ..Default::default()
        });
        let mut out = String::new();
        connections_section(&mut out, &r);
        assert!(
            out.contains("  on TLS, \"by the client\" may include clients that answered nginx's close_notify before nginx's own close() (who began the close is not told apart: the uprobe on ngx_ssl_shutdown was not attached); nginx's close() finding the client's data unread shows as TCP_ABORT_ON_CLOSE resets sent: 2\n"),
            "{out}"
        );
        c.tls_close_unknown = None;
        r.connections = Some(c.clone());
        let mut out = String::new();
        connections_section(&mut out, &r);
        assert!(!out.contains("on TLS"), "{out}");
        c.ports[0].closed_by_nginx_client_fin_first = 3;
        c.ports[0].closed_by_nginx_client_reset_first = 1;
        c.ports[0].closed_by_nginx_data_unread = 5;
        r.connections = Some(c);
        let mut out = String::new();
        connections_section(&mut out, &r);
        assert!(
            out.contains("  on TLS, 5 of nginx's closes found the client's data unread at nginx's close() (its close_notify answering nginx's, most often), which the kernel ends with a reset (TCP_ABORT_ON_CLOSE): nginx began them (uprobe ngx_ssl_shutdown), so they are counted as nginx's, not as resets\n"),
            "{out}"
        );
        assert!(
            out.contains("  on TLS, 3 of nginx's closes met the client's answer before nginx's own close() (2 a FIN, 1 a reset): the client answered nginx's close_notify, HTTP/2 GOAWAY or `Connection: close` response; nginx began them (uprobe ngx_ssl_shutdown), so they are counted as nginx's\n"),
            "{out}"
        );
    }

    /// Two ports whose nginx closes sit at different idle times (keepalive_timeout set
    /// per server): the total is not pinned, each port's time is said.
    #[test]
    fn ports_pinned_at_different_times_are_said_each() {
        let mut r = minimal_report();
        let mut c = crate::model::connections::sample_report();
        let mut other = c.ports[0].clone();
        other.port = 8443;
        if let Some(i) = other.idle_before_nginx_close.as_mut() {
            i.pinned_ms = Some(10_000.0);
            i.min_ms_since_attach = 9_990;
            i.max_ms_since_attach = 10_020;
            i.mean_ms = 10_000.0;
            i.p50_ms = 8_192;
            i.p99_ms = 8_192;
        }
        c.ports.push(other);
        r.connections = Some(c);
        let mut out = String::new();
        connections_section(&mut out, &r);
        assert!(!out.contains("  nginx closes connections"), "{out}");
        assert!(
            out.contains(
                "  port 80: nginx closes connections 2.0 s after their last data (10 closes"
            ),
            "{out}"
        );
        assert!(out.contains("  port 8443: nginx closes connections 10.0 s after their last data (10 closes, every one since attach between 10.0 s and 10.0 s; the ports differ, so no verdict judged which timeout)"), "{out}");
    }

    /// Closes nginx made whose client's FIN came first, unread, are said with their
    /// count; when not told apart, the clients' closes carry the caveat and why.
    #[test]
    fn closes_met_by_an_unread_fin_are_said_as_nginx_s_or_caveated() {
        let mut r = minimal_report();
        let mut c = crate::model::connections::sample_report();
        c.ports[0].closed_by_nginx_client_fin_unread = 7;
        r.connections = Some(c.clone());
        let mut out = String::new();
        connections_section(&mut out, &r);
        assert!(
            out.contains("  7 of nginx's closes met the client's FIN first, unread: nginx sent its response and closed without reading the client's EOF"),
            "{out}"
        );
        c.ports[0].closed_by_nginx_client_fin_unread = 0;
        c.ports[0].closed_by_client = 4;
        c.fin_unread_unknown = Some("struct sock's offsets are not in the kernel's BTF".into());
        c.fin_unread_told_apart = false;
        r.connections = Some(c.clone());
        let mut out = String::new();
        connections_section(&mut out, &r);
        assert!(
            out.contains("  \"by the client\" may include responses with `Connection: close` whose client closed on reading them before nginx's own close() (struct sock's offsets are not in the kernel's BTF)\n"),
            "{out}"
        );
        // A recording made before the rule: no reason recorded, not told apart.
        c.fin_unread_unknown = None;
        r.connections = Some(c);
        let mut out = String::new();
        connections_section(&mut out, &r);
        assert!(
            out.contains(
                "before nginx's own close() (recorded by a version that did not tell them apart)\n"
            ),
            "{out}"
        );
    }

    /// Closes right after a response name what makes nginx do so, with the values in
    /// force and the requests per connection, none as the one measured.
    #[test]
    fn closes_right_after_a_response_list_their_possible_causes() {
        use crate::model::config::{ConfigReport, ConfigValue};
        let mut r = minimal_report();
        let mut c = crate::model::connections::sample_report();
        if let Some(i) = c.ports[0].idle_before_nginx_close.as_mut() {
            (i.p50_ms, i.p99_ms, i.mean_ms, i.pinned_ms) = (4, 4, 4.0, Some(4.0));
            (i.min_ms_since_attach, i.max_ms_since_attach) = (4, 4);
        }
        r.connections = Some(c);
        r.requests.per_connection = Some(953.8);
        r.requests.source = crate::model::RequestSource::StubStatus;
        let mut out = String::new();
        connections_section(&mut out, &r);
        assert!(
            out.contains("  nginx closes connections right after a response (4 ms after the last data: not an idle timeout); nginx does so at keepalive_requests, keepalive_time, keepalive_timeout 0, or when the client asks (the configuration was not read)\n"),
            "{out}"
        );
        r.config = Some(ConfigReport {
            values: vec![
                ConfigValue::of("keepalive_requests", "http", "1000", "default"),
                ConfigValue::of("keepalive_time", "http", "3s", "/x/nginx.conf:9"),
                ConfigValue::of("keepalive_timeout", "http", "75s", "default"),
            ],
            ..ConfigReport::default()
        });
        let mut out = String::new();
        connections_section(&mut out, &r);
        assert!(
            out.contains("; nginx does so at keepalive_requests 1000 (default) (953.8 requests per connection here: stub_status requests over the accepts the kernel saw), at keepalive_time 3s (/x/nginx.conf:9), with keepalive_timeout 75s (default), or when the client asks (Connection: close, HTTP/1.0): which one is not measured\n"),
            "{out}"
        );
        // Trial 8: a server's own value is quoted beside the http level's.
        if let Some(c) = r.config.as_mut() {
            c.values.push(ConfigValue::of(
                "keepalive_requests",
                "server b.test",
                "3",
                "/x/nginx.conf:10",
            ));
        }
        let mut out = String::new();
        connections_section(&mut out, &r);
        assert!(
            out.contains("; nginx does so at keepalive_requests 1000 (default); server b.test: 3 (/x/nginx.conf:10) (953.8 requests"),
            "{out}"
        );
    }
}
