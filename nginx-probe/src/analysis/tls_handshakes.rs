//! `tls_handshake_cost`: TLS handshakes take a material share of the workers' busy time
//! while clients do keep their connections (keepalive_off has not fired), with the
//! count of completed handshakes that carried no request when the access log can tell
//! (trial 9: a Go HTTP/2 client dialed about 6,900 TLS connections it never used, a
//! third of the workers' busy time, and no verdict said so). Pure.

use std::collections::BTreeMap;

use super::inputs::Inputs;
use crate::model::{Severity, TlsReport, Verdict};

/// Share of the workers' busy time inside `SSL_do_handshake` at which the handshakes
/// are a finding (libssl's uprobes over the event loop's busy time, same clock).
pub const TLS_HANDSHAKE_SHARE_MIN: f64 = 0.20;
/// Completed handshakes below which nothing is judged.
pub const TLS_HANDSHAKE_MIN: u64 = 100;

/// The rule. Quiet when `keepalive_off` already fired (it says the same cost), when
/// libssl's figures are sampled (the share is then unknown), or below the thresholds.
pub fn tls_handshake_cost(inp: &Inputs, out: &mut Vec<Verdict>) {
    if out.iter().any(|v| v.id == "keepalive_off") {
        return;
    }
    let Some(t) = inp
        .tls
        .as_ref()
        .filter(|t| !t.libssl_sampled && t.handshakes >= TLS_HANDSHAKE_MIN)
    else {
        return;
    };
    let Some(share) = t
        .share_of_worker_busy
        .filter(|s| *s >= TLS_HANDSHAKE_SHARE_MIN)
    else {
        return;
    };
    let mut evidence = BTreeMap::new();
    evidence.insert("tls_handshakes", serde_json::json!(t.handshakes));
    evidence.insert("tls_handshakes_abandoned", serde_json::json!(t.abandoned));
    evidence.insert("tls_share_of_worker_busy", round3(share));
    evidence.insert("tls_share_threshold", round3(TLS_HANDSHAKE_SHARE_MIN));
    if let Some(ns) = t.call_ns_per_handshake {
        evidence.insert("tls_handshake_call_us", round3(ns as f64 / 1e3));
    }
    if let Some(r) = inp.requests.filter(|r| *r > 0) {
        evidence.insert("requests", serde_json::json!(r));
        evidence.insert(
            "tls_handshakes_per_request",
            round3(t.handshakes as f64 / r as f64),
        );
    }
    if let Some(w) = super::conn_verdicts::who_closed(inp) {
        evidence.insert("closed_by", w.0);
    }
    let unused = unused_said(inp, t, &mut evidence);
    let resume = super::config_evidence::tls_resumption_advice(inp.config.as_ref());
    let per_request = inp
        .requests
        .filter(|r| *r > 0)
        .map(|r| format!(", one per {:.1} requests", r as f64 / t.handshakes as f64))
        .unwrap_or_default();
    let call = t
        .call_ns_per_handshake
        .map(|ns| format!(", {:.0} us inside SSL_do_handshake each", ns as f64 / 1e3))
        .unwrap_or_default();
    let abandoned = match t.abandoned {
        0 => String::new(),
        n => format!("; {n} more were abandoned before completing (the client hung up or failed mid-handshake)"),
    };
    // keepalive_requests and keepalive_timeout are named in the text as candidates
    // only (not measured), so not among the directives the verdict is about.
    let unused_text = match unused {
        Unused::Counted { text, .. } => text,
        Unused::Unknown(why) => why,
    };
    let directives: &[&str] = &["ssl_session_cache", "ssl_session_tickets"];
    out.push(Verdict::new(
        "tls_handshake_cost",
        Severity::Warning,
        evidence,
        directives,
        format!(
            "TLS handshakes take {:.0}% of the workers' busy time (libssl's uprobes; {} completed{call}{per_request}){abandoned}; {unused_text}; {resume}",
            share * 100.0,
            t.handshakes
        ),
    ));
}

/// What the access log says of the completed handshakes that carried no request.
enum Unused {
    /// Counted (at least this many).
    Counted { text: String },
    /// Why it is unknown.
    Unknown(String),
}

/// The completed handshakes that carried no request
/// ([`crate::model::tls_unused::handshakes_without_request`]), with its figures put in
/// the evidence.
fn unused_said(
    inp: &Inputs,
    t: &TlsReport,
    evidence: &mut BTreeMap<&'static str, serde_json::Value>,
) -> Unused {
    let u = match crate::model::tls_unused::handshakes_without_request(
        t,
        inp.access_log.as_ref(),
        inp.own_hops(),
        inp.quic.is_some(),
        inp.connections_active,
    ) {
        Ok(u) => u,
        Err(why) => return Unused::Unknown(why),
    };
    evidence.insert("connections_open_at_end", serde_json::json!(u.open));
    evidence.insert("connections_with_requests", serde_json::json!(u.carried));
    evidence.insert(
        "connections_with_requests_source",
        serde_json::json!("access log lines with $connection_requests 1, all ports"),
    );
    evidence.insert(
        "tls_handshakes_without_request_min",
        serde_json::json!(u.min),
    );
    match u.said() {
        None => Unused::Unknown(format!(
            "every completed handshake may have carried a request ({} connections carried one: access log, $connection_requests 1)",
            u.carried
        )),
        Some(said) => Unused::Counted {
            text: format!(
                "{said}: clients open TLS connections they never use; some HTTP/2 clients dial spare connections each time nginx ends one (keepalive_requests, keepalive_timeout) — a candidate, not measured"
            ),
        },
    }
}

fn round3(v: f64) -> serde_json::Value {
    crate::model::round3_json(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::access_log::AccessLogReport;

    fn tls(handshakes: u64, share: f64) -> TlsReport {
        TlsReport {
            handshakes,
            handshakes_from: Some("ngx_ssl_ocsp_validate".into()),
            abandoned: 40,
            call_ns_per_handshake: Some(700_000),
            share_of_worker_busy: Some(share),
            ..Default::default()
        }
    }

    fn log(lines: u64, first: Option<u64>) -> AccessLogReport {
        AccessLogReport {
            lines,
            statuses: [("200".to_string(), lines)].into_iter().collect(),
            connections_with_requests: first,
            counts_every_request: true,
            ..Default::default()
        }
    }

    fn inputs(t: TlsReport, a: Option<AccessLogReport>) -> Inputs {
        Inputs {
            requests: Some(462_527),
            connections_active: Some(20),
            tls: Some(t),
            access_log: a,
            ..Inputs::default()
        }
    }

    fn run(inp: &Inputs) -> Vec<Verdict> {
        let mut out = Vec::new();
        tls_handshake_cost(inp, &mut out);
        out
    }

    #[test]
    fn handshakes_without_requests_are_counted_from_the_log() {
        let v = run(&inputs(tls(7609, 0.32), Some(log(462_527, Some(684)))));
        assert_eq!(v.len(), 1);
        assert_eq!(
            v[0].evidence["tls_handshakes_without_request_min"],
            serde_json::json!(7609 - 684 - 20)
        );
        assert!(
            v[0].advice.starts_with("TLS handshakes take 32% of the workers' busy time (libssl's uprobes; 7609 completed, 700 us inside SSL_do_handshake each, one per 60.8 requests); 40 more were abandoned"),
            "{}",
            v[0].advice
        );
        assert!(
            v[0].advice.contains("at least 6905 of the completed handshakes carried no request (684 connections carried one"),
            "{}",
            v[0].advice
        );
        // Named as a candidate in the text, not measured: not a directive it is about.
        assert_eq!(
            v[0].directives,
            ["ssl_session_cache", "ssl_session_tickets"]
        );
    }

    #[test]
    fn without_connection_requests_logged_the_unused_are_unknown() {
        let v = run(&inputs(tls(7609, 0.32), Some(log(462_527, None))));
        assert_eq!(v.len(), 1);
        assert!(v[0]
            .advice
            .contains("how many of them carried a request is unknown"));
        assert!(!v[0]
            .evidence
            .contains_key("tls_handshakes_without_request_min"));
        assert!(!v[0].directives.contains(&"keepalive_requests".to_string()));
        // An incomplete log counts nothing either.
        let mut a = log(462_527, Some(684));
        a.counts_every_request = false;
        a.share_logged = Some(0.9);
        let v = run(&inputs(tls(7609, 0.32), Some(a)));
        assert!(!v[0].evidence.contains_key("connections_with_requests"));
        // Handshakes counted at SSL_do_handshake include nginx's upstream connects.
        let mut t = tls(7609, 0.32);
        t.handshakes_from = Some("SSL_do_handshake".into());
        let v = run(&inputs(t, Some(log(462_527, Some(684)))));
        assert!(v[0].advice.contains("nginx's own TLS connects"));
    }

    #[test]
    fn below_the_share_sampled_or_after_keepalive_off_nothing_fires() {
        assert!(run(&inputs(tls(7609, 0.19), None)).is_empty());
        assert!(run(&inputs(tls(99, 0.9), None)).is_empty());
        let mut t = tls(7609, 0.5);
        t.libssl_sampled = true;
        assert!(run(&inputs(t, None)).is_empty());
        let mut out = vec![Verdict::new(
            "keepalive_off",
            Severity::Warning,
            BTreeMap::new(),
            &[],
            String::new(),
        )];
        tls_handshake_cost(&inputs(tls(7609, 0.5), None), &mut out);
        assert_eq!(out.len(), 1);
    }
}
