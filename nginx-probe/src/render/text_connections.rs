//! The CONNECTIONS section of the text report: who closed nginx's client connections
//! first, the idle time before nginx's closes, resets, listeners closed (from the
//! report's `connections`, itself from TCP tracepoints).

use std::fmt::Write as _;

/// Pinned idle time below which nginx's closes are not an idle timeout (ms): a close
/// within it follows the response itself (`Connection: close`, keepalive off).
const IDLE_TIMEOUT_MIN_MS: f64 = 100.0;

use crate::model::{connections::fmt_ms, Report};

/// Appends the section; nothing when the report has no `connections`.
pub fn connections_section(out: &mut String, r: &Report) {
    let Some(c) = &r.connections else { return };
    let t = c.total();
    let ports: Vec<String> = c.ports.iter().map(|p| p.port.to_string()).collect();
    let _ = writeln!(
        out,
        "\nCONNECTIONS (port {}; tracepoints sock:inet_sock_set_state, tcp:tcp_*_reset)",
        ports.join(", ")
    );
    let _ = writeln!(
        out,
        "  established {}  closed first by nginx {}  by the client {}  by a reset {}",
        t.established, t.closed_by_nginx, t.closed_by_client, t.closed_by_reset
    );
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
    match &t.idle_before_nginx_close {
        Some(i) => {
            let _ = writeln!(
                out,
                "  idle before nginx's close (last data sent or received): p50 {} p99 {} mean {} over {} closes (log2 histogram, ms)",
                fmt_ms(i.p50_ms as f64),
                fmt_ms(i.p99_ms as f64),
                fmt_ms(i.mean_ms),
                i.count
            );
            // Closes right after a response (pinned near 0 ms) are no idle timeout:
            // said as such, not as "idle after 0 ms".
            if let Some(v) = i.pinned_ms.filter(|v| *v < IDLE_TIMEOUT_MIN_MS) {
                let _ = writeln!(
                    out,
                    "  nginx closes connections right after a response ({} after the last data: not an idle timeout)",
                    fmt_ms(v)
                );
            } else if let Some(v) = i.pinned_ms {
                let _ = writeln!(
                    out,
                    "  nginx closes idle connections after {} (every close since attach between {} and {})",
                    fmt_ms(v),
                    fmt_ms(i.min_ms_since_attach as f64),
                    fmt_ms(i.max_ms_since_attach as f64)
                );
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_says_who_closed_and_the_pinned_idle_time() {
        let mut r: Report = serde_json::from_value(serde_json::json!({
            "schema": 1, "verdicts": [], "type": "summary", "time_unix_s": 3600.0,
            "master_pid": 9, "master_nspid": [9], "duration_s": 2.0, "workers": [],
            "listen": [], "logs": {}, "drops": {}, "traced_syscalls": [],
            "missing_tracepoints": [], "events": []
        }))
        .expect("minimal report");
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
            out.contains("nginx closes idle connections after 2.0 s"),
            "{out}"
        );
        assert!(out.contains("listening sockets closed 1"), "{out}");
    }
}
