//! The rules a period could not judge, and why (rule one: unknown, said, never
//! guessed). Today: under `--detail sampled`, the rules that divide what the windows
//! counted (access-log and error-log writes, upstream connects without the connection
//! lifecycle) by the windows' requests stay silent when the windows held fewer
//! requests than they need, though the period had enough: newcomer trial 17, a
//! `--record` run whose windows held 0 of 3900 requests said nothing of it beside the
//! verdicts.

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
/// the report's detail sampling (`detail.requests_in_windows`, `requests_total`: the
/// exact counter's, stub_status or the uprobes) and whether the connection lifecycle
/// was traced (`connections`).
pub fn of_report(r: &Report) -> Vec<NotJudged> {
    let Some(d) = r.detail.as_ref() else {
        return Vec::new();
    };
    let Some(total) = d.requests_total else {
        return Vec::new();
    };
    let in_windows = d.requests_in_windows.unwrap_or(0);
    let lifecycle = r.connections.is_some();
    let rules: Vec<String> = ON_WINDOW_REQUESTS
        .iter()
        .filter(|(id, _)| !(lifecycle && *id == "upstream_keepalive_off"))
        .filter(|(_, min)| total >= *min && in_windows < *min)
        .map(|(id, _)| id.to_string())
        .collect();
    if rules.is_empty() {
        return Vec::new();
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
    vec![NotJudged {
        rules,
        why: format!("--detail sampled: its windows {windows}, and these rules divide what the windows counted (log writes, upstream connects) by the windows' requests, from {min} on; --detail full, or a run long enough for {min} requests in windows, judges them"),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampled(
        in_windows: Option<u64>,
        total: Option<u64>,
    ) -> crate::model::sampling::DetailReport {
        crate::model::sampling::DetailReport {
            mode: "sampled".into(),
            window_s: 2.0,
            period_s: 10.0,
            windows: 1,
            in_window_s: 2.0,
            coverage: 0.2,
            requests_in_windows: in_windows,
            requests_total: total,
            sampled: Vec::new(),
            exact: Vec::new(),
            accepts_from: String::new(),
            accepts_check: None,
            attach_us: 0,
            detach_us: 0,
            links: 0,
        }
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
        assert!(!of_report(&r)[0]
            .rules
            .contains(&"upstream_keepalive_off".to_string()));
        // Enough in the windows, too few in the period, or the total unknown: nothing.
        r.detail = Some(sampled(Some(200), Some(3900)));
        assert!(of_report(&r).is_empty());
        r.detail = Some(sampled(Some(10), Some(150)));
        assert!(of_report(&r).is_empty());
        r.detail = Some(sampled(None, None));
        assert!(of_report(&r).is_empty());
    }
}
