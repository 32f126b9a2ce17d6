//! The rules a period could not judge, and why (rule one: unknown, said, never
//! guessed):
//! - under `--detail sampled`, the rules that divide what the windows counted
//!   (access-log and error-log writes, upstream connects without the connection
//!   lifecycle) by the windows' requests stay silent when the windows held fewer
//!   requests than they need, though the period had enough: newcomer trial 17, a
//!   `--record` run whose windows held 0 of 3900 requests said nothing of it beside
//!   the verdicts;
//! - `upstream_slow` reads each peer's `$upstream_response_time` in nginx's access log:
//!   with proxied traffic and no such log line it is silent (trial 19: not said).

use crate::{
    analysis::{
        fd_upstream::UPSTREAM_MIN_REQUESTS,
        log_verdicts::{
            ACCESS_LOG_MIN_REQUESTS, ACCESS_LOG_REOPEN_MIN_REQUESTS, ERROR_LOG_MIN_REQUESTS,
        },
    },
    model::{NotJudged, Report},
};

/// The rules judged on the windows' requests, each with the fewest requests it judges
/// from. `upstream_keepalive_off` is judged on the whole period when the connection
/// lifecycle counted upstream connects (`fd_upstream::counts_from_lifecycle`).
const ON_WINDOW_REQUESTS: &[(&str, u64)] = &[
    ("access_log_unbuffered", ACCESS_LOG_MIN_REQUESTS),
    ("access_log_reopened", ACCESS_LOG_REOPEN_MIN_REQUESTS),
    ("error_log_verbose", ERROR_LOG_MIN_REQUESTS),
    ("upstream_keepalive_off", UPSTREAM_MIN_REQUESTS),
];

/// The rules `r` could not judge, with why; empty when every rule could be. Pure: from
/// the report's detail sampling, its connection lifecycle, its upstream connects and
/// its access log ([`on_windows`], [`upstream_slow`]).
pub fn of_report(r: &Report) -> Vec<NotJudged> {
    on_windows(r).into_iter().chain(upstream_slow(r)).collect()
}

/// The window rules `r`'s `--detail sampled` windows held too few requests for, from
/// `detail.requests_in_windows` against `requests_total` (the exact counter's,
/// stub_status or the uprobes); `upstream_keepalive_off` not when the connection
/// lifecycle was traced (`connections`). None under `--detail full`.
fn on_windows(r: &Report) -> Option<NotJudged> {
    let d = r.detail.as_ref()?;
    let total = d.requests_total?;
    let in_windows = d.requests_in_windows.unwrap_or(0);
    let lifecycle = r.connections.is_some();
    let rules: Vec<String> = ON_WINDOW_REQUESTS
        .iter()
        .filter(|(id, _)| !(lifecycle && *id == "upstream_keepalive_off"))
        .filter(|(_, min)| total >= *min && in_windows < *min)
        .map(|(id, _)| id.to_string())
        .collect();
    if rules.is_empty() {
        return None;
    }
    let min = ON_WINDOW_REQUESTS
        .iter()
        .map(|(_, m)| *m)
        .min()
        .unwrap_or(0);
    let windows = match d.requests_in_windows {
        Some(n) => format!("held {n} of the period's {total} requests"),
        None => format!("held an unknown share of the period's {total} requests"),
    };
    // Upstream connects are named only when their rule is among those left.
    let counted = if rules.iter().any(|id| id == "upstream_keepalive_off") {
        "log writes, upstream connects"
    } else {
        "log writes"
    };
    Some(NotJudged {
        rules,
        why: format!("--detail sampled: its windows {windows}, and these rules divide what the windows counted ({counted}) by the windows' requests, from {min} on; --detail full, or a run long enough for {min} requests in windows, judges them"),
    })
}

/// The access-log variables `upstream_slow` reads, per peer.
const SLOW_NEEDS: [&str; 2] = ["$upstream_addr", "$upstream_response_time"];

/// `upstream_slow` when nginx proxied in the period (upstream connects counted by the
/// workers' connect() tracepoints or the connection lifecycle, or peers in the access
/// log) and the access log could not give each peer's `$upstream_response_time`: no
/// log line read, a format without [`SLOW_NEEDS`], or more lines than requests.
fn upstream_slow(r: &Report) -> Option<NotJudged> {
    let traced: u64 = r.workers.iter().map(|w| w.upstream.connects).sum();
    let lifecycle: u64 = r
        .connections
        .as_ref()
        .map_or(0, |c| c.upstream_peers.iter().map(|p| p.connects).sum());
    let logged = r
        .access_log
        .as_ref()
        .is_some_and(|a| !a.upstreams.is_empty());
    if traced == 0 && lifecycle == 0 && !logged {
        return None;
    }
    let proxied = format!(
        "nginx made {} upstream connects in the period ({})",
        traced.max(lifecycle),
        if lifecycle >= traced {
            "tracepoint sock:inet_sock_set_state"
        } else {
            "tracepoint syscalls:sys_enter_connect"
        }
    );
    let why = match r.access_log.as_ref().filter(|a| a.lines > 0) {
        None => format!("{proxied}, and no access log line was read: upstream_slow reads each peer's $upstream_response_time there"),
        Some(a) if a.over_counted() => format!("{proxied}, and the access logs read hold more lines than nginx counted requests (another writer, or a log shared with another nginx): their times are not this nginx's alone"),
        Some(a) => {
            let lacks: Vec<&str> = SLOW_NEEDS
                .into_iter()
                .filter(|v| a.lacks.iter().any(|l| l == v))
                .collect();
            if lacks.is_empty() {
                return None;
            }
            let proxied = if logged {
                format!("nginx's access log names {} upstream peers", a.upstreams.len())
            } else {
                proxied
            };
            format!("{proxied}, and no log_format read carries {}: upstream_slow reads each peer's response time there; add $upstream_addr and $upstream_response_time to the log_format to judge it", lacks.join(" nor "))
        }
    };
    Some(NotJudged {
        rules: vec!["upstream_slow".to_string()],
        why,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampled(
        in_windows: Option<u64>,
        total: Option<u64>,
    ) -> crate::model::sampling::DetailReport {
        crate::model::sampled_detail(in_windows, total, 2.0)
    }

    /// Trial 17: windows with 0 of 3900 requests: the window rules are said not
    /// judged, upstream_keepalive_off among them only without the lifecycle.
    #[test]
    fn windows_without_enough_requests_leave_their_rules_unjudged() {
        let mut r = crate::model::minimal_report();
        assert!(of_report(&r).is_empty(), "full detail judges every rule");
        r.detail = Some(sampled(Some(0), Some(3900)));
        let n = of_report(&r);
        assert_eq!(n.len(), 1);
        assert_eq!(
            n[0].rules,
            [
                "access_log_unbuffered",
                "access_log_reopened",
                "error_log_verbose",
                "upstream_keepalive_off"
            ]
        );
        assert_eq!(n[0].why, "--detail sampled: its windows held 0 of the period's 3900 requests, and these rules divide what the windows counted (log writes, upstream connects) by the windows' requests, from 200 on; --detail full, or a run long enough for 200 requests in windows, judges them");
        r.connections = Some(Default::default());
        let n = of_report(&r);
        assert!(!n[0].rules.contains(&"upstream_keepalive_off".to_string()));
        assert!(n[0].why.contains("counted (log writes) by"), "{}", n[0].why);
        // Enough in the windows, too few in the period, or the total unknown: nothing.
        r.detail = Some(sampled(Some(200), Some(3900)));
        assert!(of_report(&r).is_empty());
        r.detail = Some(sampled(Some(10), Some(150)));
        assert!(of_report(&r).is_empty());
        r.detail = Some(sampled(None, None));
        assert!(of_report(&r).is_empty());
    }

    /// Trial 19: 300 requests proxied, a log_format without $upstream_response_time:
    /// upstream_slow is said not judged, with what the log lacks; a log that carries
    /// both variables, or no proxied traffic, says nothing.
    #[test]
    fn upstream_slow_without_the_upstream_time_is_not_judged() {
        let mut r = crate::model::minimal_report();
        let mut a = crate::model::access_log::AccessLogReport {
            lines: 300,
            lacks: vec!["$upstream_response_time".into()],
            ..Default::default()
        };
        r.access_log = Some(a.clone());
        assert!(of_report(&r).is_empty(), "nothing proxied");
        let mut c = crate::model::connections::ConnectionsReport::default();
        c.upstream_peers
            .push(crate::model::upstream_lifecycle::PeerLifecycle {
                peer: "127.0.0.1:8081".into(),
                connects: 300,
                established: 300,
                ..Default::default()
            });
        r.connections = Some(c);
        let n = of_report(&r);
        assert_eq!(n.len(), 1);
        assert_eq!(n[0].rules, ["upstream_slow"]);
        assert_eq!(n[0].why, "nginx made 300 upstream connects in the period (tracepoint sock:inet_sock_set_state), and no log_format read carries $upstream_response_time: upstream_slow reads each peer's response time there; add $upstream_addr and $upstream_response_time to the log_format to judge it");
        a.lacks.clear();
        r.access_log = Some(a.clone());
        assert!(of_report(&r).is_empty(), "the log carries both");
        a.lines = 0;
        r.access_log = Some(a);
        assert_eq!(of_report(&r)[0].why, "nginx made 300 upstream connects in the period (tracepoint sock:inet_sock_set_state), and no access log line was read: upstream_slow reads each peer's $upstream_response_time there");
    }
}
