//! nginx's own hops among its requests: a proxy to one of its own listeners (or a
//! `listen unix:` it reaches itself) makes nginx's request count hold each proxied
//! client request once per hop, so a figure divided by it is off by that factor
//! (newcomer trial 12: 0.50 access-log writes and 0.20 upstream connects per request
//! for 1.0 and 0.40 per client request, the backend a server of the same nginx).

use crate::{analysis::inputs::Inputs, model::Verdict};

/// Adds to every verdict whose evidence divides by nginx's request count (an evidence
/// `requests`) and does not already say so the caveat that nginx's own hops are among
/// those requests (`Inputs::own_hops`, with why): evidence
/// `requests_include_own_hops`, and a sentence after the advice. Nothing without own
/// hops.
pub fn mark_own_hops(inp: &Inputs, out: &mut [Verdict]) {
    let Some(why) = inp.own_hops() else { return };
    for v in out
        .iter_mut()
        .filter(|v| v.evidence.contains_key("requests") && !v.advice.contains("own hops"))
    {
        v.evidence
            .insert("requests_include_own_hops".into(), serde_json::json!(why));
        v.advice.push_str(&format!(
            ". The request count includes nginx's own hops ({why}): each client request proxied to nginx itself is counted once per hop, so a figure per request is per hop here, not per client request"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        config::{ConfigReport, ListenValue},
        connections::ConnectionsReport,
        upstream_lifecycle::PeerLifecycle,
        Severity,
    };
    use std::collections::BTreeMap;

    /// An upstream peer that is nginx's own `listen 127.0.0.1:19541`: a verdict
    /// dividing by the requests gets the caveat, once; one that does not is left alone.
    #[test]
    fn per_request_verdicts_say_the_hops_are_counted() {
        let inp = Inputs {
            config: Some(ConfigReport {
                listens: vec![ListenValue {
                    scope: "server b".into(),
                    address: "127.0.0.1:19541".into(),
                    at: "n.conf:9".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            connections: Some(ConnectionsReport {
                upstream_peers: vec![PeerLifecycle {
                    peer: "127.0.0.1:19541".into(),
                    connects: 88_569,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Inputs::default()
        };
        let per = |id: &str, key: &str| {
            let mut e = BTreeMap::new();
            e.insert(key, serde_json::json!(438_060));
            Verdict::new(id, Severity::Warning, e, &[], "0.50 per request".into())
        };
        let mut out = vec![
            per("access_log_unbuffered", "requests"),
            per("other", "accepts"),
        ];
        mark_own_hops(&inp, &mut out);
        assert!(
            out[0].advice.contains(". The request count includes nginx's own hops (nginx proxies to its own listener 127.0.0.1:19541 (88569 connects"),
            "{}",
            out[0].advice
        );
        assert!(out[0].evidence.contains_key("requests_include_own_hops"));
        assert_eq!(out[1].advice, "0.50 per request");
        let said = out[0].advice.clone();
        mark_own_hops(&inp, &mut out);
        assert_eq!(out[0].advice, said, "said once");
    }
}
