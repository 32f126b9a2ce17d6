//! `keepalive_requests_low` from the access log, and the connections that carried a
//! request for `keepalive_off` ([`accepts_that_carried`]): where `$connection_requests` is
//! logged on every line of a complete log, the request count at which most
//! connections ended is read, not inferred from a mean (newcomer trial 10: 2265 of
//! 2285 connections ended at exactly 50 under `keepalive_requests 50`, and the mean's
//! tolerance, 20 connections open at the end over 3399, held the verdict back). Pure.

use std::collections::BTreeMap;

use super::inputs::Inputs;
use crate::model::{Severity, Verdict};

/// Share of the connections that carried a request that must have ended at the same
/// count N for N to be where connections end.
pub const ENDED_AT_MIN_SHARE: f64 = 0.5;

/// Fewest connections that carried a request for the log to fire
/// `keepalive_requests_low` when the configuration read sets keepalive_requests to the
/// N they ended at (else [`super::nginx_rules::KEEPALIVE_REQUESTS_MIN_ACCEPTS`]).
pub const LOG_MIN_CONNECTIONS_CONFIGURED: u64 = 20;

/// `keepalive_requests_low`: exact first, from the access log's `$connection_requests`
/// ([`keepalive_requests_ended`]), else from the mean
/// ([`super::nginx_rules::keepalive_requests_low`]).
pub fn keepalive_requests_low(inp: &Inputs, out: &mut Vec<Verdict>) {
    if !keepalive_requests_ended(inp, out) {
        super::nginx_rules::keepalive_requests_low(inp, out);
    }
}

/// Fires `keepalive_requests_low` from the log and returns true, or returns false
/// (the mean-based rule then judges): a complete log with `$connection_requests`, at
/// least [`super::nginx_rules::KEEPALIVE_REQUESTS_MIN_ACCEPTS`] connections that
/// carried a request ([`LOG_MIN_CONNECTIONS_CONFIGURED`] when the configuration sets
/// keepalive_requests N), most of them ([`ENDED_AT_MIN_SHARE`]) ending at the same N from
/// 2 to [`super::nginx_rules::KEEPALIVE_REQUESTS_LOW_MAX`]. Silent (true, nothing
/// pushed) when the configuration read sets keepalive_requests N nowhere: the clients
/// themselves send N and close.
pub fn keepalive_requests_ended(inp: &Inputs, out: &mut Vec<Verdict>) -> bool {
    let Some(a) = super::outcome_rules::complete_log(inp) else {
        return false;
    };
    let (Some((carried, missing)), Some(e)) = (a.connections_carried(), a.ended_most_at.as_ref())
    else {
        return false;
    };
    // A connection's last line in the period is its end, or it is still open: the
    // connections open at the end (nginx's gauge) are taken off, as if all had stopped
    // at N (review: 300 clients at their 40th request when the probe stopped).
    let Some(open) = inp.connections_active else {
        return false;
    };
    let n = e.requests;
    if !(2..=super::nginx_rules::KEEPALIVE_REQUESTS_LOW_MAX).contains(&n) {
        return false;
    }
    let configured = super::nginx_rules::keepalive_requests_at(inp, n);
    // With keepalive_requests N read, a connection whose last line is the Nth is
    // closing (nginx ends it right after that response, or sends HTTP/2's GOAWAY): the
    // open ones are taken off the connections judged instead (trial 13: HTTP/2 at
    // keepalive_requests 10, 30 of 60 ended at 10 and the 30 others open, silent).
    let (ended, judged) = match &configured {
        Some(Some(_)) => (e.connections, (carried + missing).saturating_sub(open)),
        _ => (e.connections.saturating_sub(open), carried + missing),
    };
    // The requests the log may miss may each be another connection's first.
    if (ended as f64) < ENDED_AT_MIN_SHARE * judged as f64 {
        return false;
    }
    // Each connection's end is read, not inferred: with the configuration setting
    // keepalive_requests N, fewer connections say it (trial 12: 55 of 60 ended at
    // keepalive_requests 10, below 200, and no verdict).
    let min = match &configured {
        Some(Some(_)) => LOG_MIN_CONNECTIONS_CONFIGURED,
        _ => super::nginx_rules::KEEPALIVE_REQUESTS_MIN_ACCEPTS,
    };
    if carried < min {
        return false;
    }
    let Some(configured) = configured else {
        return true;
    };
    // Without the configuration, clients measured closing most connections first sent
    // their N and left (the mean-based rule's guard).
    if configured.is_none() && super::conn_verdicts::clients_closed_most(inp) {
        return true;
    }
    let ends = [carried, missing, ended, judged, open, n];
    push_ended(inp, out, ends, configured);
    true
}

/// Pushes `keepalive_requests_low` from the log's ends: `[carried, missing, ended,
/// judged, open, n]` (the connections that carried a request and the first requests
/// the log may miss, those that ended at the `n`th, those judged: less the ones open
/// at the end when N is configured, and those open at the end, nginx's gauge), with
/// where the configuration sets N (`configured`: the places, or None when not read).
fn push_ended(
    inp: &Inputs,
    out: &mut Vec<Verdict>,
    ends: [u64; 6],
    configured: Option<Vec<String>>,
) {
    let [carried, missing, ended, judged, open, n] = ends;
    let mut evidence = BTreeMap::new();
    evidence.insert("connections_with_requests", serde_json::json!(carried));
    evidence.insert("connections_ended_at_n", serde_json::json!(ended));
    evidence.insert("connections_open_at_end", serde_json::json!(open));
    evidence.insert("pinned_at", serde_json::json!(n));
    evidence.insert(
        "source",
        serde_json::json!("access log: $connection_requests (lines with N less lines with N + 1: connections whose last request was the Nth)"),
    );
    if let Some(w) = super::conn_verdicts::who_closed(inp) {
        evidence.insert("closed_by", w.0);
    }
    let head = if judged == carried + missing {
        format!(
            "at least {ended} of the {carried} connections that carried a request ended after exactly {n} requests (nginx's access log, $connection_requests; the {open} open at the end left out)"
        )
    } else {
        format!(
            "{ended} of the {judged} connections that ended in the period ended after exactly {n} requests (nginx's access log, $connection_requests: {carried} carried a request, {open} were still open at the end)"
        )
    };
    let advice = match configured {
        Some(at) => format!(
            "{head}, and the configuration sets keepalive_requests {}: nginx closes a keepalive connection after that many requests, so every {n} requests a client reconnects (a TCP handshake, and TLS if any); raise keepalive_requests",
            at.join(", ")
        ),
        None => format!(
            "{head}: nginx closes a keepalive connection after keepalive_requests requests, so every {n} requests a client reconnects; check keepalive_requests in the configuration (not read), unless the clients themselves send {n} requests per connection"
        ),
    };
    out.push(Verdict::new(
        "keepalive_requests_low",
        Severity::Warning,
        evidence,
        &["keepalive_requests"],
        advice,
    ));
}

/// Of `accepts`, those that may have carried a request: less the TLS handshakes the
/// client abandoned (counted by libssl's programs) and the connections nginx dropped
/// (stub_status) or closed before their client sent a byte (`tcp_sock.bytes_received`),
/// which say nothing of keepalive, and at most what the access log's
/// `$connection_requests` allows ([`carried_ceiling`]).
/// None when the abandoned handshakes are counted in the detail windows only.
pub fn accepts_that_carried(inp: &Inputs, accepts: u64) -> Option<u64> {
    let unused = crate::model::connections::accepts_without_request(
        inp.connections.as_ref(),
        inp.tls.as_ref(),
    )?;
    let carried = accepts.saturating_sub(unused + inp.stub_dropped.unwrap_or(0));
    Some(carried_ceiling(inp).map_or(carried, |c| c.min(carried)))
}

/// At most how many connections carried a request, from a complete access log that
/// logs `$connection_requests`: those whose first request it holds, the requests it
/// may miss (each could be another connection's first), and the connections open at
/// the end (nginx's gauge: a first request still running has no line yet). None when
/// the log does not say (not complete, the field not on every line) or the gauge is
/// unknown. Trial 11: 400 TLS handshakes with no request beside 8 connections of 45
/// requests were taken for connections "not reused: one request each".
pub fn carried_ceiling(inp: &Inputs) -> Option<u64> {
    let (n, missing) = super::outcome_rules::complete_log(inp)?.connections_carried()?;
    Some(n + missing + inp.connections_active?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::access_log::{AccessLogReport, EndedAt};
    use crate::model::config::{ConfigReport, ConfigValue};

    fn inputs(ended: u64, cfg: Option<ConfigReport>) -> Inputs {
        Inputs {
            requests: Some(113_250),
            connections_active: Some(20),
            access_log: Some(AccessLogReport {
                lines: 113_250,
                statuses: [("200".to_string(), 113_250)].into_iter().collect(),
                counts_every_request: true,
                connections_with_requests: Some(2285),
                ended_most_at: Some(EndedAt {
                    requests: 50,
                    connections: ended,
                }),
                ..Default::default()
            }),
            config: cfg,
            ..Inputs::default()
        }
    }

    fn run(inp: &Inputs) -> (bool, Vec<Verdict>) {
        let mut out = Vec::new();
        (keepalive_requests_ended(inp, &mut out), out)
    }

    fn config(value: &str) -> ConfigReport {
        let mut c = ConfigReport::default();
        c.values.push(ConfigValue::of(
            "keepalive_requests",
            "http",
            value,
            "/x/nginx.conf:7",
        ));
        c
    }

    #[test]
    fn connections_ending_at_keepalive_requests_fire_from_the_log() {
        let (done, v) = run(&inputs(2265, Some(config("50"))));
        assert!(done);
        assert_eq!(v.len(), 1);
        assert_eq!(
            v[0].evidence["connections_ended_at_n"],
            serde_json::json!(2265)
        );
        assert!(
            v[0].advice.starts_with("2265 of the 2265 connections that ended in the period ended after exactly 50 requests (nginx's access log, $connection_requests: 2285 carried a request, 20 were still open at the end), and the configuration sets keepalive_requests 50"),
            "{}",
            v[0].advice
        );
        // Set to another value: the clients send 50 themselves; nothing, and no
        // mean-based guess after it.
        let (done, v) = run(&inputs(2265, Some(config("1000"))));
        assert!(done && v.is_empty(), "{v:?}");
        // Fewer than half ended there: the log does not say, the mean-based rule judges.
        let (done, v) = run(&inputs(1000, Some(config("50"))));
        assert!(!done && v.is_empty());
    }

    /// Trial 12: 55 of 60 connections ended at `keepalive_requests 10`, below the 200
    /// the mean needs: with the configuration setting 10, the log's exact ends fire it
    /// from 20; with it not read, the log leaves it to the mean-based rule.
    #[test]
    fn few_connections_ending_at_the_configured_value_fire_it() {
        let mut inp = inputs(55, Some(config("10")));
        inp.requests = Some(560);
        inp.connections_active = Some(0);
        let a = inp.access_log.as_mut().unwrap();
        a.lines = 560;
        a.statuses = [("200".to_string(), 560)].into_iter().collect();
        a.connections_with_requests = Some(60);
        a.ended_most_at = Some(EndedAt {
            requests: 10,
            connections: 55,
        });
        let (done, v) = run(&inp);
        assert!(done && v.len() == 1, "{v:?}");
        assert!(
            v[0].advice.starts_with("at least 55 of the 60 connections that carried a request ended after exactly 10 requests"),
            "{}",
            v[0].advice
        );
        // Trial 13, HTTP/2: 30 of 60 ended at 10, the 30 others still open at the end
        // (their last line is below 10: nginx closes right after the 10th).
        inp.connections_active = Some(30);
        inp.access_log.as_mut().unwrap().ended_most_at = Some(EndedAt {
            requests: 10,
            connections: 30,
        });
        let (done, v) = run(&inp);
        assert!(done && v.len() == 1, "{v:?}");
        assert!(
            v[0].advice.starts_with("30 of the 30 connections that ended in the period ended after exactly 10 requests (nginx's access log, $connection_requests: 60 carried a request, 30 were still open at the end)"),
            "{}",
            v[0].advice
        );
        // Not configured: the open ones may have stopped at 10 themselves.
        inp.config = None;
        let (done, v) = run(&inp);
        assert!(!done && v.is_empty(), "{v:?}");
        inp.config = Some(config("10"));
        inp.connections_active = Some(0);
        inp.access_log.as_mut().unwrap().ended_most_at = Some(EndedAt {
            requests: 10,
            connections: 55,
        });
        inp.config = None;
        let (done, v) = run(&inp);
        assert!(!done && v.is_empty(), "{v:?}");
        inp.config = Some(config("10"));
        inp.access_log.as_mut().unwrap().connections_with_requests = Some(19);
        inp.access_log.as_mut().unwrap().ended_most_at = Some(EndedAt {
            requests: 10,
            connections: 19,
        });
        let (done, _) = run(&inp);
        assert!(!done, "19 connections are too few");
    }

    #[test]
    fn the_default_of_the_nginx_that_runs_is_the_configured_value() {
        // nginx 1.18 (Debian 11) sets no keepalive_requests: its default is 100, and
        // connections ending at 100 are nginx's doing.
        let mut inp = inputs(2265, None);
        inp.access_log.as_mut().unwrap().ended_most_at = Some(EndedAt {
            requests: 100,
            connections: 2265,
        });
        let mut values = vec![ConfigValue::of(
            "keepalive_requests",
            "http",
            "1000",
            crate::model::config::DEFAULT,
        )];
        crate::model::config_version::for_version(&mut values, Some("1.18.0"));
        let mut c = ConfigReport {
            values,
            ..Default::default()
        };
        inp.config = Some(c.clone());
        let (done, v) = run(&inp);
        assert!(done);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].advice
                .contains("the configuration sets keepalive_requests 100 (default)"),
            "{}",
            v[0].advice
        );
        // The same default on nginx 1.22 is 1000: the clients sent their 100 and left.
        c.values[0].value = "1000".into();
        inp.config = Some(c.clone());
        let (done, v) = run(&inp);
        assert!(done && v.is_empty(), "{v:?}");
        // The version unknown: the default is only maybe 100, never a cause.
        c.values[0].value = crate::model::config_version::UNKNOWN_VERSION_KEEPALIVE_REQUESTS.into();
        inp.config = Some(c);
        let (done, v) = run(&inp);
        assert!(done && v.is_empty(), "{v:?}");
    }

    /// Trial 11: 8 connections of 45 requests beside 400 TLS handshakes that carried
    /// none: keepalive_off judges 8 (+ the 2 open at the end), not 408.
    #[test]
    fn the_log_bounds_the_connections_that_carried_a_request() {
        let mut inp = inputs(0, None);
        inp.requests = Some(360);
        inp.connections_active = Some(2);
        let a = inp.access_log.as_mut().unwrap();
        a.lines = 360;
        a.statuses = [("200".to_string(), 360)].into_iter().collect();
        a.connections_with_requests = Some(8);
        assert_eq!(carried_ceiling(&inp), Some(10));
        assert_eq!(accepts_that_carried(&inp, 408), Some(10));
        inp.connections_active = None;
        assert_eq!(accepts_that_carried(&inp, 408), Some(408));
    }
}
