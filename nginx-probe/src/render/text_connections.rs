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
    reusing_line(out, c, &t);
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
    refused_line(out, r, &t);
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

/// nginx's closes reusing connections at `worker_connections` (closes inside its
/// `ngx_get_connection`), with those that cut a request; or why they are not counted,
/// when nginx closed any.
fn reusing_line(out: &mut String, c: &ConnectionsReport, t: &PortLifecycle) {
    if t.closed_reusing_connections > 0 {
        let _ = writeln!(
            out,
            "  {} of nginx's closes reused the connection for a new one at worker_connections ({} by a reset, a request in that nginx never read): closes inside its ngx_get_connection (uprobe), where nginx reuses kept-alive idle connections and ones waiting for their first request when 1/16 or fewer of its connections are free",
            t.closed_reusing_connections, t.closed_reusing_connections_reset
        );
    } else if let Some(why) = c.reusing_unknown.as_ref().filter(|_| t.closed_by_nginx > 0) {
        let _ = writeln!(
            out,
            "  closes reusing connections at worker_connections: not counted ({why})"
        );
    }
}

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
            if c.reusing > 0 {
                let _ = write!(s, ", reusing connections {}", c.reusing);
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
    let reused = r
        .connections
        .as_ref()
        .filter(|c| c.reusing_counted)
        .map_or(0, |c| c.total().closed_reusing_connections);
    match reused {
        0 => after_response_candidates(r),
        n => format!(
            "; {n} of nginx's closes reused connections at worker_connections (counted above; see worker_connections_exhausted){}",
            after_response_candidates(r)
        ),
    }
}

/// [`after_response_causes`] without nginx's reuse of connections.
fn after_response_candidates(r: &Report) -> String {
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
    // Trial 20: "1128.7 requests per connection" under keepalive_requests 1000, in a
    // 5 s interval whose connections were opened before it.
    let interval = if r.kind == crate::model::ReportKind::Interval {
        ", this interval's: connections opened before it carry requests into it"
    } else {
        ""
    };
    let per = match (logged_carried(r), per_carried(r)) {
        (Some((count, carried, missing)), _) => format!(
            " ({:.1} requests per connection that carried one here: {} requests over the {carried} connections whose first request the access log holds, $connection_requests 1{})",
            count as f64 / carried as f64,
            r.requests.source.name(),
            if missing > 0 { ", a ceiling: the log may miss some first requests" } else { "" }
        ),
        (None, Some((p, _, unused))) => format!(
            " ({p:.1} requests per connection here: {} requests over the accepts the kernel saw, less the {unused} that carried no request: closed before their client sent a byte, or their TLS handshake abandoned{}{interval})",
            r.requests.source.name(),
            tls_carried_caveat(r)
        ),
        (None, None) => r
            .requests
            .per_connection
            .map(|p| {
                format!(
                    " ({p:.1} requests per connection here: {} requests over the accepts the kernel saw{interval})",
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
    let which = which_measured(r);
    // Trial 15: at `nginx -s stop`, responses in the stopping workers' last loop
    // closed their connections (nginx keeps none alive once told to stop).
    let stop = if crate::model::ended_by_master_exit(r.end_reason.as_deref()) {
        ", when it is stopping (once a worker is told to stop, a QUIT or a fast stop's TERM/INT, nginx keeps no connection alive after a response; this run ended with the master's exit)"
    } else {
        ""
    };
    // Trial 21: keepalive_timeout 0 everywhere still listed keepalive_requests among
    // the causes: with it nginx keeps no connection alive, whatever the others say.
    if let Some(at) = keepalive_off_everywhere(cfg) {
        return format!("; keepalive_timeout {at}: nginx keeps no connection alive, each closed after its response{per}{no_response}{stop}");
    }
    format!(
        "; nginx does so at {}{per}, at {}, with {}{no_response}{stop}, or when the client asks (Connection: close, HTTP/1.0): {which}",
        v("keepalive_requests"),
        v("keepalive_time"),
        v("keepalive_timeout")
    )
}

/// Which of the causes is measured: keepalive_requests when keepalive_requests_low
/// judged it (the access log's ends, or the mean), else none.
fn which_measured(r: &Report) -> &'static str {
    if r.verdicts.iter().any(|v| v.id == "keepalive_requests_low") {
        "keepalive_requests is measured as one (see keepalive_requests_low); the others are not"
    } else {
        "which one is not measured"
    }
}

/// `keepalive_timeout` quoted with its places (`0 (nginx.conf:11)`) when it is 0
/// wherever the configuration read sets it (and no unread file may set it); None
/// otherwise.
fn keepalive_off_everywhere(cfg: &crate::model::config::ConfigReport) -> Option<String> {
    let timeouts: Vec<&crate::model::config::ConfigValue> =
        cfg.everywhere("keepalive_timeout").collect();
    let zero = |v: &str| {
        let first = v.split_whitespace().next().unwrap_or("");
        first.trim_end_matches(|c: char| c.is_ascii_alphabetic()) == "0"
    };
    let off = !timeouts.is_empty() && timeouts.iter().all(|t| zero(&t.value) && !t.unread_may_set);
    off.then(|| cfg.with_overrides("keepalive_timeout"))
        .flatten()
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
#[path = "text_connections_tests.rs"]
mod tests;

/// Connection attempts refused for want of a listener (SYNs answered with a reset,
/// reason NO_SOCKET), said with the listener closes of the period (trial 18: 3389
/// after `nginx -s quit` closed the last listener were only a reset reason).
fn refused_line(out: &mut String, r: &Report, t: &PortLifecycle) {
    if t.syns_refused == 0 {
        return;
    }
    let closes = r
        .connections
        .as_ref()
        .map_or(&[][..], |c| c.listener_closes.as_slice());
    let when = match closes.iter().rev().find(|e| e.listeners_closed > 0) {
        Some(e) => format!(
            "nginx's listening socket closed {} ({} closed in the period)",
            e.after_reload(),
            closes.iter().map(|e| e.listeners_closed).sum::<u64>()
        ),
        None => "no listener close was seen in the period (a port nginx does not listen on for that address, or a close before it)".to_string(),
    };
    let _ = writeln!(
        out,
        "  {} connection attempts refused: their SYN found no listener and was answered with a reset (NO_SOCKET, tracepoint tcp:tcp_send_reset): clients kept connecting after {when}; each is a connect() failing with ECONNREFUSED on the client",
        t.syns_refused
    );
}
