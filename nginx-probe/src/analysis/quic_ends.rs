//! Verdicts on the QUIC connections nginx ended itself (`model::quic::QuicReport::ends`,
//! counted by the uprobes on `ngx_quic_shutdown_connection` and
//! `ngx_quic_finalize_connection` with nginx's own reasons).

use std::collections::BTreeMap;

use serde_json::json;

use crate::{
    analysis::inputs::Inputs,
    model::{
        quic::{QuicEndCall, REACHED_MAX_REQUESTS},
        Severity, Verdict,
    },
};

/// Graceful ends at keepalive_requests or keepalive_time needed in the period before
/// `quic_keepalive_ended` is judged.
pub const QUIC_ENDED_MIN: u64 = 10;

/// Share of the period's QUIC connections (`QuicReport::connections`: their
/// handshakes, uprobe `ngx_http_v3_init`, where attached) that nginx must have begun
/// ending at keepalive_requests or keepalive_time.
pub const QUIC_ENDED_MIN_SHARE: f64 = 0.5;

/// The configuration's settings that make nginx end QUIC connections early, quoted
/// with their places: keepalive_requests set at or under
/// [`super::nginx_rules::KEEPALIVE_REQUESTS_LOW_MAX`], keepalive_time set at all
/// (its default is 1h); None when it sets neither, or was not read (nginx's default of
/// 1000 requests is no limit worth advice).
fn early_end_settings(inp: &Inputs) -> Option<String> {
    let cfg = inp.config.as_ref()?;
    let low: Vec<String> = cfg
        .everywhere("keepalive_requests")
        .filter(|v| !v.is_default())
        .filter(|v| {
            v.value
                .trim()
                .parse::<u64>()
                .is_ok_and(|n| n <= super::nginx_rules::KEEPALIVE_REQUESTS_LOW_MAX)
        })
        .map(|v| format!("keepalive_requests {}", v.quoted()))
        .chain(
            cfg.everywhere("keepalive_time")
                .filter(|v| !v.is_default())
                .map(|v| format!("keepalive_time {}", v.quoted())),
        )
        .collect();
    (!low.is_empty()).then(|| low.join(", "))
}

/// `quic_keepalive_ended`: nginx began ending at least [`QUIC_ENDED_MIN`] QUIC
/// connections, and [`QUIC_ENDED_MIN_SHARE`] of the period's, with its reason "reached
/// maximum number of requests" (HTTP/3's GOAWAY once a connection reached
/// keepalive_requests or keepalive_time: nginx gives the same words for both), and the
/// configuration read sets one of them low ([`early_end_settings`]). Counted calls,
/// once per connection (nginx guards that shutdown with its GOAWAY flag); silent when
/// the period's QUIC connections are unknown.
pub fn quic_keepalive_ended(inp: &Inputs, out: &mut Vec<Verdict>) {
    let Some(q) = &inp.quic else { return };
    let Some(settings) = early_end_settings(inp) else {
        return;
    };
    let Some(connections) = q.connections else {
        return;
    };
    let began = q.ends_of(QuicEndCall::Shutdown, REACHED_MAX_REQUESTS);
    if began < QUIC_ENDED_MIN || (began as f64) < QUIC_ENDED_MIN_SHARE * connections as f64 {
        return;
    }
    let closed = q.ends_of(QuicEndCall::Close, REACHED_MAX_REQUESTS);
    let mut ev = BTreeMap::new();
    ev.insert("quic_connections", json!(connections));
    ev.insert("quic_graceful_ends_at_max_requests", json!(began));
    ev.insert("quic_closes_at_max_requests", json!(closed));
    ev.insert(
        "source",
        json!(format!(
            "{}; QUIC connections: {}",
            crate::model::quic::QUIC_ENDS_SOURCE,
            q.source
        )),
    );
    out.push(Verdict::new(
        "quic_keepalive_ended",
        Severity::Warning,
        ev,
        &["keepalive_requests", "keepalive_time"],
        format!(
            "nginx itself began ending {began} of the period's {connections} QUIC connections at keepalive_requests or keepalive_time (its reason \"{REACHED_MAX_REQUESTS}\", uprobe ngx_quic_shutdown_connection: HTTP/3's GOAWAY after a connection's last allowed request), and called its immediate close with that reason {closed} times in the period (ngx_quic_finalize_connection: once a connection's streams are done, unless it is closing already); a client with more requests to send opens a new QUIC connection, with a new handshake, for them. nginx applies both to HTTP/3 connections, and this configuration sets {settings}: raise it (keepalive_requests 1000 and keepalive_time 1h are nginx's defaults), unless a limit per connection is meant"
        ),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::quic::{QuicEnd, QuicReport};

    fn quic(connections: u64, began: u64, closed: u64) -> QuicReport {
        let end = |call, count| QuicEnd {
            call,
            code: 0x100,
            reason: Some(REACHED_MAX_REQUESTS.into()),
            count,
        };
        QuicReport::new(vec![8443], Some(connections + 7), 7)
            .unwrap()
            .with_ends(Ok(vec![
                crate::model::quic::started(connections),
                end(QuicEndCall::Shutdown, began),
                end(QuicEndCall::Close, closed),
                QuicEnd {
                    call: QuicEndCall::Close,
                    code: 0x100,
                    reason: Some("keepalive timeout".into()),
                    count: 40,
                },
            ]))
    }

    fn config(requests: &str, at: &str) -> crate::model::config::ConfigReport {
        use crate::model::config::ConfigValue;
        crate::model::config::ConfigReport {
            values: vec![
                ConfigValue::of("keepalive_requests", "http", requests, at),
                ConfigValue::of("keepalive_time", "http", "1h", "default"),
            ],
            ..Default::default()
        }
    }

    /// Trial 14's shape: HTTP/3 at keepalive_requests 10, 24 connections ended by nginx
    /// of 30, 17 of them closed in the period: the verdict says the counts and the
    /// setting; 9 (below the minimum) or 24 of 60 (below half) say nothing; neither do
    /// the keepalive timeout's closes, nor nginx's default of 1000 requests, nor an
    /// unread configuration.
    #[test]
    fn quic_ends_at_max_requests_fire_with_their_counts() {
        let mut inp = Inputs {
            quic: Some(quic(30, 24, 17)),
            config: Some(config("10", "/e/n.conf:9")),
            ..Default::default()
        };
        let mut out = Vec::new();
        quic_keepalive_ended(&inp, &mut out);
        assert_eq!(out.len(), 1);
        let v = &out[0];
        assert_eq!(v.evidence["quic_graceful_ends_at_max_requests"], 24);
        assert_eq!(v.evidence["quic_closes_at_max_requests"], 17);
        assert!(
            v.evidence["source"].as_str().unwrap().ends_with(&format!(
                "; QUIC connections: {}",
                crate::model::quic::QUIC_STARTED_SOURCE
            )),
            "{}",
            v.evidence["source"]
        );
        assert!(v.advice.starts_with("nginx itself began ending 24 of the period's 30 QUIC connections at keepalive_requests or keepalive_time"), "{}", v.advice);
        assert!(
            v.advice
                .contains("called its immediate close with that reason 17 times"),
            "{}",
            v.advice
        );
        assert!(
            v.advice
                .contains("this configuration sets keepalive_requests 10 (/e/n.conf:9): raise it"),
            "{}",
            v.advice
        );
        for cfg in [
            Some(config("1000", "default")),
            Some(config("1000", "/e/n.conf:9")),
            None,
        ] {
            inp.config = cfg;
            let mut out = Vec::new();
            quic_keepalive_ended(&inp, &mut out);
            assert!(out.is_empty(), "{out:?}");
        }
        inp.config = Some(config("10", "/e/n.conf:9"));
        for (c, b) in [(30, 9), (60, 24)] {
            inp.quic = Some(quic(c, b, 0));
            let mut out = Vec::new();
            quic_keepalive_ended(&inp, &mut out);
            assert!(out.is_empty(), "{c} {b}: {out:?}");
        }
        inp.quic = Some(QuicReport::new(vec![8443], None, 7).unwrap());
        let mut out = Vec::new();
        quic_keepalive_ended(&inp, &mut out);
        assert!(out.is_empty());
    }
}
