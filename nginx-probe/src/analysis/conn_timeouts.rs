//! Which of nginx's configured timeouts a pinned close time matches: the idle time
//! before nginx's closes of client connections (`model::connections::IdleReport`,
//! tracepoint `sock:inet_sock_set_state`) against the effective values of
//! `keepalive_timeout`, `client_header_timeout`, `client_body_timeout`, `send_timeout`
//! and `lingering_timeout` in the servers listening on the ports that saw the closes
//! (`model::config`, with `file:line`). A timeout is named only when its value
//! matches; otherwise the cause is said to be unknown, and why.

use crate::{
    analysis::{
        inputs::{log_count, Inputs},
        outcome_rules::value_seconds,
    },
    model::{
        config::{ConfigReport, ConfigValue},
        connections::{PINNED_SLACK_MS, PINNED_SPREAD},
    },
};

/// nginx's timeouts that close a client connection after a wait without data, in the
/// order they are named. `http2_idle_timeout` (nginx before 1.19.7; later versions
/// use `keepalive_timeout` for HTTP/2) is not read: a close at it stays unknown.
/// `lingering_timeout` is not one: a lingering close shuts the write side down first
/// (`ngx_http_set_lingering_close`: nginx's FIN goes out right after the response),
/// and the idle time measured is the one before that first close, never the
/// lingering wait after it (trial 11: `keepalive_timeout 5s` closes were said to be
/// lingering_timeout's too, its default being 5s).
pub const CLOSE_TIMEOUTS: &[&str] = &[
    "keepalive_timeout",
    "client_header_timeout",
    "client_body_timeout",
    "send_timeout",
];

/// The timeouts nginx logs as `client timed out` (error-log class
/// `client_timed_out`, at `info`), with a 408 in the access log for the first two.
pub const REQUEST_TIMEOUTS: &[&str] = &[
    "client_header_timeout",
    "client_body_timeout",
    "send_timeout",
];

/// Most configured values quoted in the evidence.
const MAX_CONSIDERED: usize = 12;

/// What the pinned close time matches.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TimeoutMatch {
    /// The directives whose value in force matches, with `scope: value (file:line)`.
    pub matched: Vec<(&'static str, String)>,
    /// Every value in force considered (`directive scope: value (at)`), at most 12.
    pub considered: Vec<String>,
    /// Why no directive can be named (configuration not read), when so.
    pub unknown: Option<String>,
    /// The match's tolerance for a value of `v` ms: `10% of v + 12 ms` (the spread a
    /// pinned idle time may have, `model::connections::PINNED_SPREAD` and
    /// `PINNED_SLACK_MS`), said in words for the evidence.
    pub tolerance: String,
    /// `client timed out` lines of nginx's error log in the period (class
    /// `client_timed_out`; 0 when not logged at that level or not read).
    pub client_timed_out: u64,
    /// 408 responses in the access log in the period (None: no access log read).
    pub status_408: Option<u64>,
    /// nginx's closes whose idle time was measured in the period (the pinned ones);
    /// 0: unknown.
    pub closes: u64,
    /// Request timeouts whose value matched and that the logs rule out, with why
    /// ([`rule_out_request_timeouts`]).
    pub ruled_out: Vec<String>,
}

impl TimeoutMatch {
    /// Whether `keepalive_timeout` alone matches.
    pub fn keepalive_only(&self) -> bool {
        !self.matched.is_empty() && self.matched.iter().all(|(d, _)| *d == "keepalive_timeout")
    }

    /// Whether the logs say requests timed out (error log `client timed out`, or 408s)
    /// for at least half of the closes (each such timeout writes one line and one
    /// 408): a line or two beside many closes at one time do not make them request
    /// timeouts (and a client can write lines into the error log: docs/security.md).
    pub fn request_timed_out(&self) -> bool {
        let said = self.client_timed_out.max(self.status_408.unwrap_or(0));
        said > 0 && (self.closes == 0 || 2 * said >= self.closes)
    }

    /// `keepalive_timeout http: 75s (nginx.conf:9) and client_header_timeout ...`.
    pub fn named(&self) -> String {
        let parts: Vec<String> = self
            .matched
            .iter()
            .map(|(d, q)| format!("{d} {q}"))
            .collect();
        parts.join(" and ")
    }

    /// The logs' word on request timeouts: `; nginx's error log counted 12 `client
    /// timed out` lines and the access log 12 responses 408`, empty when neither.
    pub fn logs_say(&self) -> String {
        if !self.request_timed_out() {
            return String::new();
        }
        let s408 = match self.status_408 {
            Some(n) => format!(" and the access log {n} responses 408"),
            None => String::new(),
        };
        format!(
            "; nginx's error log counted {} `client timed out` lines (client_timed_out){s408}: requests timed out while nginx read or sent them, not between requests",
            self.client_timed_out
        )
    }

    /// The evidence of the match, as JSON.
    pub fn evidence(&self) -> serde_json::Value {
        serde_json::json!({
            "matched": self.matched.iter().map(|(d, q)| format!("{d} {q}")).collect::<Vec<_>>(),
            "considered": self.considered,
            "unknown": self.unknown,
            "tolerance": self.tolerance,
            "client_timed_out_lines": self.client_timed_out,
            "closes_timed": self.closes,
            "access_log_408": self.status_408,
            "ruled_out": self.ruled_out,
            "source": "the configuration's effective values in the servers listening on the ports with the closes (file:line); nginx's error log (class client_timed_out); the access log's $status",
        })
    }
}

/// Whether a value applies in one of `servers` (its scope is the level or inside one).
fn applies(v: &ConfigValue, servers: &[&str]) -> bool {
    matches!(v.scope.as_str(), "main" | "events" | "http")
        || servers
            .iter()
            .any(|s| v.scope == *s || v.scope.starts_with(&format!("{s} location ")))
}

/// The values of `directive` in force on `ports`: the level value and the overrides in
/// the servers listening there (every override when no `listen` names the ports).
fn in_force<'a>(cfg: &'a ConfigReport, directive: &'a str, ports: &[u16]) -> Vec<&'a ConfigValue> {
    let servers: Vec<&str> = cfg
        .listens
        .iter()
        .filter(|l| {
            crate::model::listen::listen_port(&l.address).is_some_and(|p| ports.contains(&p))
        })
        .map(|l| l.scope.as_str())
        .collect();
    cfg.everywhere(directive)
        .filter(|v| servers.is_empty() || applies(v, &servers))
        .collect()
}

/// Whether `pinned_ms` matches a configured `ms`: within 10% of it plus 12 ms.
pub fn matches_ms(pinned_ms: f64, ms: f64) -> bool {
    ms > 0.0 && (pinned_ms - ms).abs() <= PINNED_SPREAD * ms + PINNED_SLACK_MS as f64
}

/// What nginx's closes pinned at `pinned_ms` on `ports` match in the configuration,
/// with the logs' counts of request timeouts.
pub fn match_timeout(inp: &Inputs, ports: &[u16], pinned_ms: f64) -> TimeoutMatch {
    let mut m = TimeoutMatch {
        tolerance: format!(
            "a configured value v matches when the pinned idle time is within {}% of v + {PINNED_SLACK_MS} ms (the spread allowed in a pinned idle time)",
            (PINNED_SPREAD * 100.0) as u32
        ),
        client_timed_out: log_count(inp, "client_timed_out"),
        status_408: inp
            .access_log
            .as_ref()
            .map(|a| a.statuses.get("408").copied().unwrap_or(0)),
        closes: inp
            .connections
            .as_ref()
            .and_then(|c| c.total().idle_before_nginx_close)
            .map_or(0, |i| i.count),
        ..Default::default()
    };
    let Some(cfg) = inp.config.as_ref() else {
        m.unknown = Some("nginx's configuration was not read, so its timeouts are unknown".into());
        return m;
    };
    for d in CLOSE_TIMEOUTS {
        for v in in_force(cfg, d, ports) {
            let quoted = format!("{}: {}", v.scope, v.quoted());
            if m.considered.len() < MAX_CONSIDERED {
                m.considered.push(format!("{d} {quoted}"));
            }
            let hit = value_seconds(v).is_some_and(|s| matches_ms(pinned_ms, s * 1000.0));
            if hit && !m.matched.iter().any(|(x, q)| x == d && *q == quoted) {
                m.matched.push((d, quoted));
            }
        }
    }
    rule_out_request_timeouts(inp, cfg, &mut m);
    // Trial 9: keepalive_timeout 2s in a file past an include glob's limit, the
    // default 75s quoted as if in force and "no configured timeout matches".
    let unread = cfg.values.iter().any(|v| v.unread_may_set);
    if m.matched.is_empty() && unread {
        m.unknown = Some(format!(
            "part of nginx's configuration was not read ({}), and it may set the timeout; read: {}",
            cfg.errors.first().map_or("a limit reached", |e| e.as_str()),
            m.considered.join("; ")
        ));
    }
    m
}

/// Whether every request timeout would have written a `client timed out` line to the
/// error log read: it is readable, every main-level `error_log` logs at `info` or
/// `debug`, and no `error_log` is set elsewhere (http, server, location).
fn request_timeouts_logged(inp: &Inputs, cfg: &ConfigReport) -> Option<String> {
    if !inp.nginx_errors.as_ref().is_some_and(|e| e.readable) || cfg.error_logs.is_empty() {
        return None;
    }
    let verbose = cfg.error_logs.iter().all(|v| {
        let level = v.value.split_whitespace().nth(1).unwrap_or("error");
        matches!(level, "info" | "debug") && !v.unread_may_set && !v.not_loaded
    });
    // Any error_log set in http, a server or a location may write at another level
    // (Debian's stock `error_log /var/log/nginx/error.log;` in http is at `error`):
    // nothing is ruled out then (review).
    let elsewhere = cfg
        .log_paths
        .iter()
        .any(|l| l.kind == "error_log" && !cfg.error_logs.iter().any(|v| v.at == l.at));
    (verbose && !elsewhere).then(|| {
        cfg.error_logs
            .iter()
            .map(|v| format!("error_log {}", v.quoted()))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// Takes out of `m.matched` the request timeouts (`client_header_timeout`,
/// `client_body_timeout`, `send_timeout`) that the logs rule out, saying why in
/// `m.ruled_out`: each request that times out writes `client timed out` at `info`,
/// so none in an error log written at `info` rules all three out; each header or
/// body timeout of a request answers 408 in the access log, so none in a complete
/// log, with no connection nginx closed before its client sent a byte (a wait for
/// the first request logs no line), rules those two out. Trial 11: idle keepalive
/// connections closed at `keepalive_timeout 60s` were told of slow clients cut off
/// mid-request because client_body_timeout and send_timeout default to 60s.
fn rule_out_request_timeouts(inp: &Inputs, cfg: &ConfigReport, m: &mut TimeoutMatch) {
    if !m.matched.iter().any(|(d, _)| REQUEST_TIMEOUTS.contains(d)) || m.client_timed_out > 0 {
        return;
    }
    let (out, why): (&[&str], String) = if let Some(logs) = request_timeouts_logged(inp, cfg) {
        (
            REQUEST_TIMEOUTS,
            format!("no `client timed out` line in nginx's error log, written at info ({logs}), where each request that times out writes one"),
        )
    } else {
        let no_data_by_nginx = inp
            .connections
            .as_ref()
            .filter(|c| c.without_data_unknown.is_none())
            .map(|_| {
                inp.closed_without_data()
                    - inp
                        .closed_without_data_by_client()
                        .min(inp.closed_without_data())
            });
        let complete = super::outcome_rules::complete_log(inp).is_some();
        if !(complete && m.status_408 == Some(0) && no_data_by_nginx == Some(0)) {
            return;
        }
        (
            &["client_header_timeout", "client_body_timeout"],
            "no response 408 in the access log, complete, where each request that times out while nginx reads it is logged 408, and no connection closed by nginx before its client sent a byte (a wait for a first request logs no line)".to_string(),
        )
    };
    let before = m.matched.len();
    m.matched.retain(|(d, _)| !out.contains(d));
    if m.matched.len() < before {
        m.ruled_out.push(format!("{}: {why}", out.join(", ")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `client timed out` line or a 408 names request timeouts only when they account
    /// for at least half of the closes: one line beside 12 closes (the trial's forged
    /// line) does not.
    #[test]
    fn a_few_timeout_lines_beside_many_closes_are_no_request_timeouts() {
        let m = |lines, s408, closes| TimeoutMatch {
            client_timed_out: lines,
            status_408: s408,
            closes,
            ..TimeoutMatch::default()
        };
        assert!(!m(1, None, 12).request_timed_out());
        assert!(!m(0, Some(5), 12).request_timed_out());
        assert!(m(6, None, 12).request_timed_out());
        assert!(m(2, Some(12), 12).request_timed_out());
        assert!(m(1, None, 0).request_timed_out());
        assert!(!m(0, Some(0), 0).request_timed_out());
    }

    #[test]
    fn listen_addresses_give_their_port() {
        assert_eq!(
            crate::model::listen::listen_port("127.0.0.1:8080"),
            Some(8080)
        );
        assert_eq!(crate::model::listen::listen_port("8080"), Some(8080));
        assert_eq!(crate::model::listen::listen_port("[::]:443"), Some(443));
        assert_eq!(crate::model::listen::listen_port("*:80"), Some(80));
        assert_eq!(crate::model::listen::listen_port("example.org"), Some(80));
        assert_eq!(crate::model::listen::listen_port("unix:/run/n.sock"), None);
    }

    #[test]
    fn a_match_is_within_ten_percent_and_twelve_ms() {
        assert!(matches_ms(2004.0, 2000.0));
        assert!(matches_ms(2210.0, 2000.0));
        assert!(!matches_ms(2300.0, 2000.0));
        assert!(!matches_ms(2000.0, 75_000.0));
        assert!(!matches_ms(0.0, 0.0));
    }
}
