//! QUIC (HTTP/3) connections: nginx counts them in its `accepted` counter, but they
//! arrive on a UDP socket and no accept4 (nor the `ngx_get_connection` uprobe) returns
//! them. When nginx has UDP listening sockets, the difference between nginx's
//! `accepted` and the workers' TCP accepts is reported as QUIC connections, never as an
//! accepts disagreement. Beside them, the QUIC connections nginx ended itself, by its
//! call and its own reason (`nginx_probe_common::quic`). Pure.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where [`QuicReport::ends`] comes from.
pub const QUIC_ENDS_SOURCE: &str = "uprobes ngx_quic_shutdown_connection (shutdown: a graceful end begun, HTTP/3's GOAWAY sent) and ngx_quic_finalize_connection (close: CONNECTION_CLOSE posted), their reason string read from nginx's memory; ngx_quic_close_connection with NGX_DONE and c->read->timedout (idle_timeout: closed silently at the QUIC idle timeout)";

/// Which of nginx's calls ended a QUIC connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuicEndCall {
    /// `ngx_quic_shutdown_connection`: a graceful end begun (streams under way finish).
    Shutdown,
    /// `ngx_quic_finalize_connection`: closed at once.
    Close,
    /// `ngx_quic_close_connection` with `NGX_DONE` and its read timer expired: closed
    /// silently at the QUIC idle timeout (keepalive_timeout, or the client's shorter
    /// max_idle_timeout; nginx logs "quic client timed out" at info).
    IdleTimeout,
    /// `ngx_http_v3_init`: a connection whose handshake completed, started (not an
    /// end: taken into [`QuicReport::connections`], never listed in its ends).
    Started,
    /// Calls counted after the map of kinds was full (64 kinds): call and reason unknown.
    Other,
}

/// One kind of QUIC end: the call, nginx's error code and its reason (None: nginx gave
/// none; `unread (0x...)` when its memory could not be read).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct QuicEndId {
    /// Which call.
    pub call: QuicEndCall,
    /// The QUIC or HTTP/3 error code nginx passed (0x100: HTTP/3's H3_NO_ERROR).
    pub code: u64,
    /// nginx's reason string, printable ASCII only (at most 96 bytes).
    pub reason: Option<String>,
}

/// Calls since attach by kind, as a snapshot holds them; Err: why not counted.
pub type QuicEndCounts = Result<BTreeMap<QuicEndId, u64>, String>;

/// The QUIC connections nginx ended in a period with one call and reason.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuicEnd {
    /// `shutdown`, `close` or `other` ([`QuicEndCall`]).
    pub call: QuicEndCall,
    /// nginx's error code.
    pub code: u64,
    /// nginx's reason; None when it gave none.
    pub reason: Option<String>,
    /// Calls in the period.
    pub count: u64,
}

/// nginx's reason for a graceful end at keepalive_requests or keepalive_time (HTTP/3's
/// `ngx_http_v3_init_request_stream`; the same words for both).
pub const REACHED_MAX_REQUESTS: &str = "reached maximum number of requests";

/// nginx's reason for closing an idle HTTP/3 connection at keepalive_timeout
/// (`ngx_http_v3_keepalive_handler`).
pub const KEEPALIVE_TIMEOUT: &str = "keepalive timeout";

/// Where [`QuicReport::connections`] comes from without the uprobes.
pub const QUIC_SOURCE: &str =
    "stub_status accepted minus the workers' TCP accepts (UDP, no accept4)";

/// Where [`QuicReport::connections`] comes from with the uprobes attached.
pub const QUIC_STARTED_SOURCE: &str =
    "uprobe ngx_http_v3_init (once per QUIC connection whose handshake completed)";

/// nginx's UDP listening sockets and the connections they took in the period (JSON
/// `quic`; absent when nginx has no UDP listening socket).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct QuicReport {
    /// Ports of the master's UDP sockets bound and unconnected (`/proc/<master>/net/udp`
    /// and `udp6` rows whose inode is one of the master's fds): `listen ... quic`, or
    /// the stream module's `listen ... udp`, which nginx counts the same way.
    pub udp_ports: Vec<u16>,
    /// QUIC connections in the period: those whose handshake completed
    /// ([`QUIC_STARTED_SOURCE`]) when the QUIC uprobes are attached; else nginx's
    /// `accepted` counter (stub_status) minus the workers' TCP accepts (accept4
    /// tracepoints or the `ngx_get_connection` uprobe), which also counts the datagrams
    /// nginx took for a new connection and dropped. None when that is unreadable.
    pub connections: Option<u64>,
    /// With the uprobes: nginx's `accepted` less the TCP accepts and the QUIC
    /// connections started: datagrams nginx took for a new connection that no QUIC
    /// handshake completed (packets for a connection it had closed, handshakes never
    /// completed, or the stream module's UDP sessions: not told apart); None
    /// when nginx's counters are unreadable or the uprobes are not attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_not_connections: Option<u64>,
    /// [`QUIC_SOURCE`].
    pub source: String,
    /// The QUIC connections nginx ended in the period, by call and reason, most first
    /// ([`QUIC_ENDS_SOURCE`]); empty when none or not counted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ends: Vec<QuicEnd>,
    /// [`QUIC_ENDS_SOURCE`] when `ends` is counted; absent in recordings made before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_source: Option<String>,
    /// Why `ends` is not counted (nginx built without QUIC, the uprobes refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_unknown: Option<String>,
}

/// The period's QUIC ends: `cur` less `prev` (None: since attach) per kind, those
/// with calls, most first; Err: why not counted.
pub fn quic_ends_between(
    cur: &QuicEndCounts,
    prev: Option<&QuicEndCounts>,
) -> Result<Vec<QuicEnd>, String> {
    let cur = cur.as_ref().map_err(Clone::clone)?;
    let base = prev.and_then(|p| p.as_ref().ok());
    let mut ends: Vec<QuicEnd> = cur
        .iter()
        .filter_map(|(id, &n)| {
            let was = base.and_then(|b| b.get(id)).copied().unwrap_or(0);
            let count = n.saturating_sub(was);
            (count > 0).then(|| QuicEnd {
                call: id.call,
                code: id.code,
                reason: id.reason.clone(),
                count,
            })
        })
        .collect();
    ends.sort_by(|a, b| b.count.cmp(&a.count).then(a.call.cmp(&b.call)));
    Ok(ends)
}

impl QuicReport {
    /// The report for UDP listening ports `udp_ports` (None: nginx has none), with
    /// nginx's `accepted` over the period (None: unreadable) and the TCP accepts.
    pub fn new(
        udp_ports: Vec<u16>,
        nginx_accepted: Option<u64>,
        tcp_accepts: u64,
    ) -> Option<QuicReport> {
        if udp_ports.is_empty() {
            return None;
        }
        Some(QuicReport {
            udp_ports,
            connections: nginx_accepted.map(|a| a.saturating_sub(tcp_accepts)),
            source: QUIC_SOURCE.into(),
            ..Default::default()
        })
    }

    /// Sets the period's ends ([`quic_ends_between`]), and the connections to those
    /// started when the uprobes counted them (the rest of nginx's `accepted` in
    /// [`QuicReport::accepted_not_connections`]).
    pub fn with_ends(mut self, ends: Result<Vec<QuicEnd>, String>) -> QuicReport {
        match ends {
            Ok(e) => {
                let (started, ends): (Vec<QuicEnd>, Vec<QuicEnd>) =
                    e.into_iter().partition(|e| e.call == QuicEndCall::Started);
                let started: u64 = started.iter().map(|e| e.count).sum();
                self.accepted_not_connections = self.connections.map(|a| a.saturating_sub(started));
                self.connections = Some(started);
                self.source = QUIC_STARTED_SOURCE.into();
                self.ends = ends;
                self.ends_source = Some(QUIC_ENDS_SOURCE.into());
            }
            Err(why) => self.ends_unknown = Some(why),
        }
        self
    }

    /// Calls of `call` with nginx's reason `reason` in the period.
    pub fn ends_of(&self, call: QuicEndCall, reason: &str) -> u64 {
        self.ends
            .iter()
            .filter(|e| e.call == call && e.reason.as_deref() == Some(reason))
            .map(|e| e.count)
            .sum()
    }

    /// The settings behind the ends counted, as the configuration `cfg` sets them
    /// (value and `file:line` or `default`, with overrides): keepalive_requests and
    /// keepalive_time for "reached maximum number of requests", keepalive_timeout for
    /// "keepalive timeout" and the idle-timeout closes; None when no such end was
    /// counted, "unknown (the configuration was not read)" without it.
    pub fn ends_settings(
        &self,
        cfg: Option<&crate::model::config::ConfigReport>,
    ) -> Option<String> {
        let max = self
            .ends
            .iter()
            .any(|e| e.reason.as_deref() == Some(REACHED_MAX_REQUESTS));
        let idle = self.ends.iter().any(|e| {
            e.call == QuicEndCall::IdleTimeout || e.reason.as_deref() == Some(KEEPALIVE_TIMEOUT)
        });
        let mut directives = Vec::new();
        if max {
            directives.extend(["keepalive_requests", "keepalive_time"]);
        }
        if idle {
            directives.push("keepalive_timeout");
        }
        if directives.is_empty() {
            return None;
        }
        let said: Vec<String> = directives
            .iter()
            .map(|d| {
                let v = cfg.and_then(|c| c.with_overrides(d));
                format!(
                    "{d} {}",
                    v.unwrap_or_else(|| "unknown (the configuration was not read)".into())
                )
            })
            .collect();
        Some(format!(
            "  nginx's settings behind these ends: {}",
            said.join(", ")
        ))
    }

    /// The text report's line of nginx's ends: `QUIC connections nginx ended (...): began
    /// 24 graceful ends, GOAWAY sent ("reached maximum number of requests" 24); called an
    /// immediate close 19 times ("reached maximum number of requests" 17, "keepalive
    /// timeout" 2)`; None when none.
    pub fn ends_line(&self) -> Option<String> {
        if let Some(why) = &self.ends_unknown {
            return Some(format!("  QUIC connections nginx ended: unknown ({why})"));
        }
        if self.ends.is_empty() {
            return None;
        }
        let part = |call: QuicEndCall| -> Option<(u64, String)> {
            let of: Vec<&QuicEnd> = self.ends.iter().filter(|e| e.call == call).collect();
            let n: u64 = of.iter().map(|e| e.count).sum();
            (n > 0).then(|| {
                let kinds: Vec<String> = of
                    .iter()
                    .map(|e| match &e.reason {
                        Some(r) => format!("\"{r}\" {}", e.count),
                        None => format!("no reason (code {:#x}) {}", e.code, e.count),
                    })
                    .collect();
                (n, kinds.join(", "))
            })
        };
        let mut parts = Vec::new();
        if let Some((n, k)) = part(QuicEndCall::Shutdown) {
            parts.push(format!("began {n} graceful ends, GOAWAY sent ({k})"));
        }
        if let Some((n, k)) = part(QuicEndCall::Close) {
            parts.push(format!("called an immediate close {n} times ({k})"));
        }
        if let Some((n, _)) = part(QuicEndCall::IdleTimeout) {
            parts.push(format!("closed {n} silently at the QUIC idle timeout (keepalive_timeout, or the client's shorter max_idle_timeout)"));
        }
        if let Some((n, _)) = part(QuicEndCall::Other) {
            parts.push(format!("{n} more calls of other kinds (beyond 64 kinds)"));
        }
        Some(format!(
            "  QUIC connections nginx ended (calls; uprobes ngx_quic_shutdown_connection, ngx_quic_finalize_connection with nginx's reasons, ngx_quic_close_connection): {}; the clients' own closes are not counted",
            parts.join("; ")
        ))
    }

    /// Whether the period's requests may include HTTP/3 requests that no TCP
    /// connection carried: then accepts-per-request figures are unknown.
    pub fn makes_requests_per_accept_unknown(&self) -> bool {
        self.connections != Some(0)
    }

    /// One line for text reports.
    pub fn line(&self) -> String {
        let ports: Vec<String> = self.udp_ports.iter().map(|p| p.to_string()).collect();
        match self.connections {
            Some(n) => format!(
                "QUIC: {n} QUIC connections (UDP, no accept4) on UDP port(s) {}: {}; not an accepts disagreement{}",
                ports.join(", "),
                match self.accepted_not_connections {
                    _ if self.source != QUIC_STARTED_SOURCE => "nginx's accepted counter minus the TCP accepts".to_string(),
                    Some(d) if d > 0 => format!("handshakes completed (uprobe ngx_http_v3_init); nginx's accepted counter has {d} more, datagrams it took for a new connection that no QUIC handshake completed (packets for connections it had closed, handshakes never completed; the stream module's `listen ... udp` sessions count there too: which is not told apart)"),
                    _ => "handshakes completed (uprobe ngx_http_v3_init)".to_string(),
                },
                if n > 0 {
                    "; accepts per request unknown (requests include HTTP/3 ones)"
                } else {
                    ""
                }
            ),
            None => format!(
                "QUIC: nginx listens on UDP port(s) {} (QUIC or stream udp, no accept4); QUIC connections unknown (nginx's counters unreadable); accepts per request unknown",
                ports.join(", ")
            ),
        }
    }
}

/// `count` QUIC connections started, as the uprobe on `ngx_http_v3_init` counts them
/// (tests' fixture).
#[cfg(test)]
pub fn started(count: u64) -> QuicEnd {
    QuicEnd {
        call: QuicEndCall::Started,
        code: 0,
        reason: None,
        count,
    }
}

/// A report of 12 QUIC connections (their handshakes counted by the uprobe) that nginx
/// began ending at keepalive_requests, for the renderers' tests.
#[cfg(test)]
pub fn sample_report() -> QuicReport {
    QuicReport::new(vec![8443], Some(12), 0)
        .unwrap()
        .with_ends(Ok(vec![
            started(12),
            QuicEnd {
                call: QuicEndCall::Shutdown,
                code: 0x100,
                reason: Some(REACHED_MAX_REQUESTS.into()),
                count: 12,
            },
        ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quic_is_accepted_minus_tcp_and_absent_without_udp() {
        assert_eq!(QuicReport::new(vec![], Some(19), 7), None);
        let q = QuicReport::new(vec![8443], Some(19), 7).unwrap();
        assert_eq!(q.connections, Some(12));
        assert!(q.makes_requests_per_accept_unknown());
        assert!(q.line().contains("12 QUIC connections (UDP, no accept4)"));
        let q = QuicReport::new(vec![8443], Some(7), 7).unwrap();
        assert!(!q.makes_requests_per_accept_unknown());
        let q = QuicReport::new(vec![8443], None, 7).unwrap();
        assert!(q.makes_requests_per_accept_unknown());
    }

    #[test]
    fn ends_are_the_period_s_calls_by_reason_and_said_in_one_line() {
        let id = |call, reason: Option<&str>| QuicEndId {
            call,
            code: 0x100,
            reason: reason.map(str::to_string),
        };
        let max = Some(REACHED_MAX_REQUESTS);
        let prev: QuicEndCounts = Ok([(id(QuicEndCall::Shutdown, max), 4)].into());
        let cur: QuicEndCounts = Ok([
            (id(QuicEndCall::Shutdown, max), 28),
            (id(QuicEndCall::Close, max), 17),
            (id(QuicEndCall::Close, Some("keepalive timeout")), 2),
            (id(QuicEndCall::Close, None), 0),
            (
                QuicEndId {
                    call: QuicEndCall::IdleTimeout,
                    code: 0,
                    reason: None,
                },
                5,
            ),
        ]
        .into());
        let q = QuicReport::new(vec![8443], Some(30), 0)
            .unwrap()
            .with_ends(quic_ends_between(&cur, Some(&prev)));
        assert_eq!(q.ends_of(QuicEndCall::Shutdown, REACHED_MAX_REQUESTS), 24);
        assert_eq!(q.ends.len(), 4, "no entry without calls: {:?}", q.ends);
        assert_eq!(
            q.ends_line().unwrap(),
            "  QUIC connections nginx ended (calls; uprobes ngx_quic_shutdown_connection, ngx_quic_finalize_connection with nginx's reasons, ngx_quic_close_connection): began 24 graceful ends, GOAWAY sent (\"reached maximum number of requests\" 24); called an immediate close 19 times (\"reached maximum number of requests\" 17, \"keepalive timeout\" 2); closed 5 silently at the QUIC idle timeout (keepalive_timeout, or the client's shorter max_idle_timeout); the clients' own closes are not counted"
        );
        let q = QuicReport::new(vec![8443], Some(30), 0)
            .unwrap()
            .with_ends(quic_ends_between(&Err("built without QUIC".into()), None));
        assert_eq!(
            q.ends_line().unwrap(),
            "  QUIC connections nginx ended: unknown (built without QUIC)"
        );
        let q = QuicReport::new(vec![8443], Some(30), 0)
            .unwrap()
            .with_ends(Ok(vec![]));
        assert_eq!(q.ends_line(), None);
    }

    /// The directives behind the ends, as configured; nothing without such ends.
    #[test]
    fn the_settings_behind_the_ends_are_quoted() {
        use crate::model::config::{ConfigReport, ConfigValue};
        let cfg = ConfigReport {
            values: vec![
                ConfigValue::of("keepalive_requests", "http", "3", "/t/nginx.conf:8"),
                ConfigValue::of("keepalive_time", "http", "1h", "default"),
                ConfigValue::of("keepalive_timeout", "http", "2s", "/t/nginx.conf:9"),
            ],
            ..Default::default()
        };
        let mut q = sample_report();
        assert_eq!(
            q.ends_settings(Some(&cfg)).unwrap(),
            "  nginx's settings behind these ends: keepalive_requests 3 (/t/nginx.conf:8), keepalive_time 1h (default)"
        );
        q.ends.push(QuicEnd {
            call: QuicEndCall::IdleTimeout,
            code: 0,
            reason: None,
            count: 6,
        });
        assert!(q
            .ends_settings(Some(&cfg))
            .unwrap()
            .ends_with(", keepalive_timeout 2s (/t/nginx.conf:9)"));
        assert!(q
            .ends_settings(None)
            .unwrap()
            .contains("keepalive_requests unknown (the configuration was not read)"));
        q.ends.clear();
        assert_eq!(q.ends_settings(Some(&cfg)), None);
    }

    /// The Prometheus family: one series per call and reason, nginx's words as the label.
    #[test]
    fn ends_are_a_prometheus_counter_by_call_and_reason() {
        let mut r = crate::render::prometheus::tests::report();
        r.quic = Some(sample_report());
        let text = crate::render::prometheus::render(&r);
        assert!(
            text.contains("\nnginx_probe_quic_ends_total{call=\"shutdown\",reason=\"reached maximum number of requests\"} 12\n"),
            "{text}"
        );
        r.quic = None;
        let text = crate::render::prometheus::render(&r);
        assert!(!text.contains("nginx_probe_quic_ends_total"), "{text}");
    }
}
