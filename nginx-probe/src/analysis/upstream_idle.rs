//! `upstream_peer_idle_closes`: an upstream peer that closes nginx's idle connections
//! after a fixed time (measured: the peer's FIN on connections idle that long, from the
//! upstream connection lifecycle), against how long nginx keeps them in its pool (the
//! `keepalive_timeout` of the `upstream` blocks that list the peer);
//! `upstream_peer_idle_resets`: the same with resets received at one time after the
//! peer's last data (a peer, NAT, firewall or load balancer dropping idle flows).

use std::collections::BTreeMap;

use serde_json::json;

use super::{
    conn_verdicts::{KA_TIMEOUT_MIN_CLOSES, KA_TIMEOUT_MIN_IDLE_MS},
    inputs::Inputs,
    outcome_rules::nginx_seconds,
};
use crate::model::{connections::fmt_ms, upstream_lifecycle::PeerLifecycle, Severity, Verdict};

/// How long nginx keeps idle connections to `peer` in a pool, from the configuration:
/// `(keepalive_timeout in ms, "keepalive_timeout V (at) in upstream B")` for each
/// `upstream` block listing `peer` (its address as written, `ip:port`) with a
/// `keepalive` pool; Err says why it is unknown or that nginx keeps no pool for it.
fn pool_timeouts(inp: &Inputs, peer: &str) -> Result<Vec<(f64, String)>, String> {
    let cfg = inp
        .config
        .as_ref()
        .ok_or("the configuration was not read")?;
    if let Some(why) = &cfg.unknown {
        return Err(format!("the configuration was not read ({why})"));
    }
    let blocks: Vec<&str> = cfg
        .upstreams
        .iter()
        .filter(|u| u.servers.iter().any(|s| s.address == peer))
        .map(|u| u.name.as_str())
        .collect();
    if blocks.is_empty() {
        return Err(format!(
            "no upstream block lists {peer} by this address, so which pool holds its connections is unknown"
        ));
    }
    let value = |d: &str, b: &str| {
        cfg.values
            .iter()
            .find(|v| v.directive == d && v.scope == format!("upstream {b}"))
    };
    let out: Vec<(f64, String)> = blocks
        .iter()
        .filter(|b| value("keepalive", b).is_some_and(|v| !v.is_default()))
        .filter_map(|b| {
            let t = value("keepalive_timeout", b)?;
            let s = nginx_seconds(&t.value)?;
            Some((
                s * 1000.0,
                format!("keepalive_timeout {} in upstream {b}", t.quoted()),
            ))
        })
        .collect();
    if out.is_empty() {
        return Err(format!(
            "upstream {} keeps no pool (no `keepalive`), or its keepalive_timeout could not be read",
            blocks.join(", ")
        ));
    }
    Ok(out)
}

/// `upstream_peer_idle_closes` and `upstream_peer_idle_resets` (warnings): a peer closed first at least
/// [`KA_TIMEOUT_MIN_CLOSES`] of the connections nginx's workers opened to it, every one
/// after the same idle time (pinned, [`KA_TIMEOUT_MIN_IDLE_MS`] or more): it drops idle
/// connections after that time. When an `upstream` block listing it keeps a pool whose
/// `keepalive_timeout` is longer, nginx can send a request on a connection the peer is
/// closing (a 502: `upstream prematurely closed connection` or a reset): the advice is
/// to set that `keepalive_timeout` below the peer's time. When the pool's timeout is
/// unknown, it says so and why. `upstream_peer_idle_resets` when instead at least as
/// many of its connections ended in a reset received at one time after the peer's last
/// data (a FIN pinned takes precedence).
pub fn upstream_peer_idle_closes(inp: &Inputs, out: &mut Vec<Verdict>) {
    let Some(c) = inp.connections.as_ref() else {
        return;
    };
    let pinned = |i: Option<&crate::model::connections::IdleReport>, n: u64| {
        i?.pinned_ms
            .filter(|&v| v >= KA_TIMEOUT_MIN_IDLE_MS && n >= KA_TIMEOUT_MIN_CLOSES)
    };
    for p in &c.upstream_peers {
        if let Some(at) = pinned(p.idle_before_peer_close.as_ref(), p.closed_by_peer) {
            out.push(verdict(inp, p, at, false));
        } else if let Some(at) = pinned(p.since_peer_data_at_reset.as_ref(), p.closed_by_reset) {
            out.push(verdict(inp, p, at, true));
        }
    }
}

/// What the peer did: `by_reset`, reset (else closed first) its connections at `at`.
fn head(p: &PeerLifecycle, at: &str, by_reset: bool) -> String {
    if by_reset {
        format!(
            "the upstream peer {} reset {} of nginx's connections to it, every one {at} after its last data (tracepoints tcp:tcp_receive_reset, sock:inet_sock_set_state ESTABLISHED -> CLOSE; whether nginx sent on them since is not measured): it, or a NAT, firewall or load balancer between (not told apart), drops connections silent that long with a reset",
            p.peer, p.closed_by_reset
        )
    } else {
        format!(
            "the upstream peer {} closed {} of nginx's idle connections to it first, every one after {at} idle (tracepoint sock:inet_sock_set_state)",
            p.peer, p.closed_by_peer
        )
    }
}

/// The verdict of `p`, whose closes (`by_reset`: its resets, counted from its last data)
/// sit at `pinned` ms.
fn verdict(inp: &Inputs, p: &PeerLifecycle, pinned: f64, by_reset: bool) -> Verdict {
    let i = p.idle_before_peer_close.as_ref();
    let mut ev = BTreeMap::new();
    ev.insert("peer", json!(p.peer));
    ev.insert("closed_by_peer", json!(p.closed_by_peer));
    ev.insert("closed_by_nginx", json!(p.closed_by_nginx));
    ev.insert("closed_by_reset", json!(p.closed_by_reset));
    ev.insert("idle_before_peer_close_pinned_ms", json!(pinned));
    ev.insert(
        "idle_before_peer_close_min_max_ms_since_attach",
        json!(i.map(|i| [i.min_ms_since_attach, i.max_ms_since_attach])),
    );
    ev.insert(
        "resets_after_peer_data_p50_ms",
        json!(p.since_peer_data_at_reset.as_ref().map(|r| r.p50_ms)),
    );
    ev.insert("source", json!(crate::model::upstream_lifecycle::SOURCE));
    let at = fmt_ms(pinned);
    let head = head(p, &at, by_reset);
    let resets = if p.closed_by_reset > 0 && !by_reset {
        format!(
            "; {} connections to it ended in a reset, p50 {} after its last data",
            p.closed_by_reset,
            p.since_peer_data_at_reset
                .as_ref()
                .map_or("unknown".into(), |r| fmt_ms(r.p50_ms as f64))
        )
    } else {
        String::new()
    };
    let advice = match pool_timeouts(inp, &p.peer) {
        Ok(t) => {
            ev.insert(
                "pool_keepalive_timeouts",
                json!(t.iter().map(|x| &x.1).collect::<Vec<_>>()),
            );
            let longer: Vec<&String> = t
                .iter()
                .filter(|(ms, _)| *ms >= pinned)
                .map(|x| &x.1)
                .collect();
            if longer.is_empty() {
                format!("{head}{resets}; nginx's pool lets them go sooner ({}), so the peer's closes come from elsewhere (connections kept by another pool, or closed before they sat in one): why is unknown", t.iter().map(|x| x.1.as_str()).collect::<Vec<_>>().join("; "))
            } else {
                format!(
                    "{head}{resets}: nginx keeps idle connections to it longer ({}), so it can send a request on a connection the peer is closing (`upstream prematurely closed connection` or a reset): nginx retries such a request on another connection when it may (an idempotent method under proxy_next_upstream's default error), else the client gets a 502; set keepalive_timeout in the upstream block below {at}, or raise the peer's idle timeout above nginx's",
                    longer.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("; ")
                )
            }
        }
        Err(why) => {
            ev.insert("pool_keepalive_timeouts", json!(format!("unknown: {why}")));
            format!("{head}{resets}; how long nginx keeps idle connections to it is unknown: {why}; if its pool's keepalive_timeout is longer than {at}, set it below that")
        }
    };
    ev.insert(
        "since_peer_data_at_reset_pinned_ms",
        json!(p
            .since_peer_data_at_reset
            .as_ref()
            .and_then(|r| r.pinned_ms)),
    );
    Verdict::new(
        if by_reset {
            "upstream_peer_idle_resets"
        } else {
            "upstream_peer_idle_closes"
        },
        Severity::Warning,
        ev,
        &["keepalive_timeout", "keepalive"],
        advice,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        config::{ConfigReport, ConfigValue, UpstreamServer, UpstreamValue},
        connections::{ConnectionsReport, IdleReport},
    };

    fn inputs(closes: u64, pinned: Option<f64>, cfg: Option<ConfigReport>) -> Inputs {
        Inputs {
            connections: Some(ConnectionsReport {
                upstream_peers: vec![PeerLifecycle {
                    peer: "127.0.0.2:8080".into(),
                    connects: closes,
                    established: closes,
                    closed_by_peer: closes,
                    idle_before_peer_close: Some(IdleReport {
                        count: closes,
                        mean_ms: 1004.0,
                        min_ms_since_attach: 1000,
                        max_ms_since_attach: 1008,
                        pinned_ms: pinned,
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            config: cfg,
            ..Default::default()
        }
    }

    fn pooled(timeout: &str, at: &str) -> ConfigReport {
        ConfigReport {
            upstreams: vec![UpstreamValue {
                name: "be".into(),
                servers: vec![UpstreamServer {
                    address: "127.0.0.2:8080".into(),
                    ..Default::default()
                }],
                at: "/e/n.conf:3".into(),
            }],
            values: vec![
                ConfigValue::of("keepalive", "upstream be", "16", "/e/n.conf:5"),
                ConfigValue::of("keepalive_timeout", "upstream be", timeout, at),
            ],
            ..Default::default()
        }
    }

    fn run(i: &Inputs) -> Vec<Verdict> {
        let mut v = Vec::new();
        upstream_peer_idle_closes(i, &mut v);
        v
    }

    #[test]
    fn a_peer_closing_before_the_pool_timeout_names_it_with_its_line() {
        let v = run(&inputs(10, Some(1004.0), Some(pooled("60s", "default"))));
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].id, "upstream_peer_idle_closes");
        assert!(
            v[0].advice.contains("127.0.0.2:8080 closed 10"),
            "{}",
            v[0].advice
        );
        assert!(v[0].advice.contains("after 1.0 s idle"), "{}", v[0].advice);
        assert!(
            v[0].advice
                .contains("keepalive_timeout 60s (default) in upstream be"),
            "{}",
            v[0].advice
        );
        assert!(v[0].advice.contains("below 1.0 s"), "{}", v[0].advice);
    }

    #[test]
    fn a_shorter_pool_timeout_or_no_config_is_not_blamed() {
        let v = run(&inputs(
            10,
            Some(1004.0),
            Some(pooled("500ms", "/e/n.conf:6")),
        ));
        assert!(v[0].advice.contains("why is unknown"), "{}", v[0].advice);
        let v = run(&inputs(10, Some(1004.0), None));
        assert!(
            v[0].advice
                .contains("unknown: the configuration was not read"),
            "{}",
            v[0].advice
        );
    }

    #[test]
    fn few_or_spread_closes_are_silent() {
        assert!(run(&inputs(9, Some(1004.0), None)).is_empty());
        assert!(run(&inputs(10, None, None)).is_empty());
        assert!(run(&inputs(10, Some(100.0), None)).is_empty());
    }

    #[test]
    fn a_peer_resetting_idle_connections_at_one_time_is_named_apart() {
        // The same peer's closes turned into resets: no FIN, 10 resets 1.0 s after its
        // last data.
        let mut i = inputs(10, Some(1004.0), Some(pooled("60s", "default")));
        let p = &mut i.connections.as_mut().unwrap().upstream_peers[0];
        p.closed_by_reset = p.closed_by_peer;
        p.closed_by_peer = 0;
        p.since_peer_data_at_reset = p.idle_before_peer_close.take();
        let v = run(&i);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].id, "upstream_peer_idle_resets");
        assert!(v[0].advice.starts_with("the upstream peer 127.0.0.2:8080 reset 10 of nginx's connections to it, every one 1.0 s after its last data"), "{}", v[0].advice);
        assert!(
            v[0].advice
                .contains("keepalive_timeout 60s (default) in upstream be"),
            "{}",
            v[0].advice
        );
        assert_eq!(v[0].evidence["since_peer_data_at_reset_pinned_ms"], 1004.0);
        // 9 resets, or resets spread in time, say nothing.
        let p = &mut i.connections.as_mut().unwrap().upstream_peers[0];
        p.closed_by_reset = 9;
        assert!(run(&i).is_empty());
        let p = &mut i.connections.as_mut().unwrap().upstream_peers[0];
        p.closed_by_reset = 10;
        p.since_peer_data_at_reset.as_mut().unwrap().pinned_ms = None;
        assert!(run(&i).is_empty());
    }
}
