//! What the upstream rules say about failures of the peers themselves, from nginx's
//! error log: which peer failed how (its lines by class), how many established
//! connections a peer failed (reset, closed before answering, timed out), and whether
//! nginx kept a pool of idle upstream connections that a peer could have closed under
//! it (the configuration's `keepalive`, or reuse measured). Used by `upstream_errors`
//! ([`super::nginx_rules`]) and `upstream_keepalive_off` ([`super::fd_upstream`]).

use std::collections::BTreeMap;

use super::inputs::Inputs;

/// Error-log classes of a failure on a connection nginx had established: the peer reset
/// it, closed it before answering, did not read or answer in time, or answered what
/// nginx could not use. nginx closes such a connection; keepalive could not have kept
/// it, and a reset leaves no socket in TIME-WAIT. Failures keepalive causes or cures
/// (`upstream_addr_unavailable`: no local port left) and failed connects (refused,
/// timed out: never established) are not among them.
pub const PEER_FAILED_CLASSES: &[&str] = &[
    "upstream_reset",
    "upstream_prematurely_closed",
    "upstream_read_timeout",
    "upstream_send_timeout",
    "upstream_invalid_response",
    "upstream_cut_mid_response",
    "upstream_header_too_big",
    "upstream_ssl",
];

/// Error-log lines of [`PEER_FAILED_CLASSES`] in the period; None when the error log
/// is not read.
pub fn peer_failed_lines(inp: &Inputs) -> Option<u64> {
    let e = inp.nginx_errors.as_ref().filter(|e| e.readable)?;
    Some(PEER_FAILED_CLASSES.iter().map(|c| e.count(c)).sum())
}

/// Error-log lines of [`PEER_FAILED_CLASSES`] naming `peer` (`ip:port`, the error
/// log's `http://ip:port`); 0 when the log is not read or names it in none.
pub fn peer_failed_lines_of(inp: &Inputs, peer: &str) -> u64 {
    let Some(e) = inp.nginx_errors.as_ref().filter(|e| e.readable) else {
        return 0;
    };
    e.upstream_peers
        .iter()
        .filter(|p| authority(&p.peer) == peer)
        .flat_map(|p| {
            PEER_FAILED_CLASSES
                .iter()
                .filter_map(|c| p.by_class.get(*c))
        })
        .sum()
}

/// Whether nginx's error log names `p` in lines where it failed an established
/// connection ([`peer_failed_lines_of`]) for at least
/// [`UPSTREAM_PEER_FAILED_SHARE`](super::fd_upstream::UPSTREAM_PEER_FAILED_SHARE) of
/// the connections nginx established to it: a pool would have kept none of them.
pub fn failed_most(inp: &Inputs, p: &crate::model::upstream_lifecycle::PeerLifecycle) -> bool {
    peer_failed_lines_of(inp, &p.peer) as f64 >= PEER_FAILED_SHARE * p.established as f64
}

/// The share behind [`failed_most`] (`fd_upstream::UPSTREAM_PEER_FAILED_SHARE` is
/// this value).
pub const PEER_FAILED_SHARE: f64 = 0.5;

/// The peers whose error-log lines of `class` nginx wrote, most first, at most 3:
/// `http://127.0.0.1:18902 (300 lines)`; empty when the log names none (or was
/// recorded before lines were counted by class).
pub fn peers_of(inp: &Inputs, class: &str) -> Vec<String> {
    let Some(e) = inp.nginx_errors.as_ref().filter(|e| e.readable) else {
        return Vec::new();
    };
    let mut v: Vec<(&str, u64)> = e
        .upstream_peers
        .iter()
        .filter_map(|p| p.by_class.get(class).map(|n| (p.peer.as_str(), *n)))
        .filter(|(_, n)| *n > 0)
        .collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    v.iter()
        .take(3)
        .map(|(p, n)| format!("{p} ({n} lines)"))
        .collect()
}

/// Each named peer's upstream-class lines by class, for evidence: `{peer: {class:
/// lines}}`; None when no peer's lines were counted by class.
pub fn by_peer_evidence(inp: &Inputs) -> Option<serde_json::Value> {
    let e = inp.nginx_errors.as_ref().filter(|e| e.readable)?;
    let m: BTreeMap<&str, &BTreeMap<String, u64>> = e
        .upstream_peers
        .iter()
        .filter(|p| !p.by_class.is_empty())
        .map(|p| (p.peer.as_str(), &p.by_class))
        .collect();
    (!m.is_empty()).then(|| serde_json::json!(m))
}

/// Whether nginx may have handed a request an idle upstream connection a peer then
/// closed under it (the only case where a keepalive-timeout mismatch explains a reset).
#[derive(Clone, Debug, PartialEq)]
pub enum Pool {
    /// It may: the configuration keeps idle connections for the peer, or reuse was
    /// measured; the clause says which.
    Kept(String),
    /// It did not: the configuration was read and keeps none for the peer; the clause
    /// says where.
    None(String),
    /// Not known: the configuration was not read and reuse not measured.
    Unknown,
}

/// `scheme://host:port` -> `host:port`.
pub(super) fn authority(peer: &str) -> &str {
    peer.split_once("://").map_or(peer, |(_, a)| a)
}

/// The pool of idle upstream connections behind the `peers` (error-log names, e.g.
/// `http://127.0.0.1:18902`) as measured or configured: reuse measured (the access log
/// holds every request and its peers were tried more often than the workers
/// established upstream connections, `--detail full`), else the `keepalive` of the
/// upstream blocks listing those peers as servers (a peer no block lists, proxied to by
/// address, has no pool), else of any upstream block when no peer is placed.
pub fn pool(inp: &Inputs, peers: &[&str]) -> Pool {
    if let Some(measured) = reuse_measured(inp, peers) {
        return measured;
    }
    let Some(cfg) = inp.config.as_ref() else {
        return Pool::Unknown;
    };
    let kept = |block: &str| {
        cfg.values.iter().find(|v| {
            v.directive == "keepalive"
                && v.scope == format!("upstream {block}")
                && v.at != crate::model::config::DEFAULT
        })
    };
    // The blocks that list each peer; a peer in none is proxied to by address.
    let mut placed = false;
    let mut none = Vec::new();
    for p in peers {
        let a = authority(p);
        let blocks: Vec<&str> = cfg
            .upstreams
            .iter()
            .filter(|u| u.servers.iter().any(|s| s.address == a))
            .map(|u| u.name.as_str())
            .collect();
        if let Some(k) = blocks.iter().find_map(|b| kept(b)) {
            return Pool::Kept(format!("`keepalive {}` in {} ({})", k.value, k.scope, k.at));
        }
        if !blocks.is_empty() {
            placed = true;
            none.push(format!(
                "{a} is a server of upstream {}, which sets no keepalive",
                blocks.join(", ")
            ));
        } else if cfg
            .values
            .iter()
            .any(|v| v.directive == "proxy_pass" && authority(&v.value).starts_with(a))
        {
            placed = true;
            none.push(format!(
                "{a} is proxied to by address (no upstream block, no pool)"
            ));
        }
    }
    if !placed {
        if let Some(k) = cfg.values.iter().find(|v| {
            v.directive == "keepalive"
                && v.scope.starts_with("upstream ")
                && v.at != crate::model::config::DEFAULT
        }) {
            return Pool::Kept(format!("`keepalive {}` in {} ({})", k.value, k.scope, k.at));
        }
        none.push(if cfg.upstreams.is_empty() {
            "no upstream block (a proxy_pass to an address keeps no idle connections)".to_string()
        } else {
            "no upstream block sets keepalive".to_string()
        });
    }
    Pool::None(none.join("; "))
}

/// Reuse of the connections to `peers` (error-log names) as measured: per peer, its
/// tries in the access log (which holds every request and logs `$upstream_addr`)
/// against its connects (tracepoint sock:inet_sock_set_state, `CLOSE -> SYN_SENT` in
/// a worker): more tries than connects for one of them is reuse (`Pool::Kept`), as
/// many connects as tries for each is fresh connections only (`Pool::None`). With no
/// peer named, or a peer in neither table, the sums over all peers: more tries than
/// the workers' connect() calls is reuse (somewhere). None when not measured.
fn reuse_measured(inp: &Inputs, peers: &[&str]) -> Option<Pool> {
    let a = super::outcome_rules::complete_log(inp)?;
    let rows = inp.connections.as_ref().map(|c| &c.upstream_peers);
    let per_peer: Option<Vec<(&str, u64, u64)>> = (!peers.is_empty())
        .then(|| {
            peers
                .iter()
                .map(|p| {
                    let a_ = authority(p);
                    let tries = a.upstreams.iter().find(|u| u.peer == a_)?.tries;
                    let connects = rows?.iter().find(|r| r.peer == a_)?.connects;
                    Some((a_, tries, connects))
                })
                .collect()
        })
        .flatten();
    if let Some(per_peer) = per_peer {
        if let Some((p, tries, connects)) = per_peer.iter().find(|(_, t, c)| t > c) {
            return Some(Pool::Kept(format!(
                "nginx reused connections to {p}: {tries} tries of it in its access log, {connects} connects (tracepoint sock:inet_sock_set_state)"
            )));
        }
        let said: Vec<String> = per_peer
            .iter()
            .map(|(p, t, c)| format!("{p}: {t} tries, {c} connects"))
            .collect();
        return Some(Pool::None(format!(
            "every try was a fresh connection ({}; access log and tracepoint sock:inet_sock_set_state)",
            said.join("; ")
        )));
    }
    if inp.detail.is_some() {
        return None;
    }
    // Every try either calls connect() (a fresh connection, established or failed:
    // a refused peer is tried without ever connecting) or reuses a pooled one.
    let tries: u64 = a.upstreams.iter().map(|p| p.tries).sum();
    let connects: u64 = inp.workers.iter().map(|w| w.upstream_connects).sum();
    (tries > connects && peers.is_empty()).then(|| {
        Pool::Kept(format!(
            "nginx reused upstream connections: {tries} tries of peers in its access log, {connects} connect() calls (the kernel's)"
        ))
    })
}

/// `upstream_errors`' words for `upstream_reset`, with the peers that reset: a
/// keepalive-timeout mismatch only when nginx may have reused an idle connection
/// ([`pool`]), fresh connections reset by the peer when it kept none, both when unknown.
pub fn reset_said(inp: &Inputs) -> String {
    let peers: Vec<String> = peers_of(inp, "upstream_reset");
    let names: Vec<&str> = peers
        .iter()
        .map(|p| p.split(" (").next().unwrap_or(p))
        .collect();
    let named = if peers.is_empty() {
        String::new()
    } else {
        format!(" (peer: {})", peers.join(", "))
    };
    match pool(inp, &names) {
        Pool::None(why) => format!(
            "the upstream reset fresh connections (502){named}: nginx keeps no idle connections to it ({why}), so none was closed under it: the peer crashed or refused the request, or a proxy or firewall in between reset the connection"
        ),
        Pool::Kept(why) => format!(
            "the upstream reset the connection (502){named}: it closed a connection nginx was using: an idle one from the pool ({why}) when its keepalive timeout is shorter than nginx's upstream keepalive_timeout, or it crashed or refused the request"
        ),
        Pool::Unknown => format!(
            "the upstream reset the connection (502){named}: an idle pooled connection it had closed (its keepalive timeout shorter than nginx's upstream keepalive_timeout) if nginx keeps upstream keepalive connections, else fresh connections it reset (it crashed or refused the request, or a proxy or firewall in between reset them); the configuration was not read and reuse not measured, so which is unknown"
        ),
    }
}

/// `upstream be` with a server on 127.0.0.1 at each of `ports`, `keepalive` set to the
/// value given (unset when None), proxied to from `server a location /` (unit tests).
#[cfg(test)]
pub(crate) fn upstream_be(
    ports: &[u16],
    keepalive: Option<&str>,
) -> crate::model::config::ConfigReport {
    use crate::model::config::{ConfigReport, ConfigValue, UpstreamServer, UpstreamValue};
    let pool = match keepalive {
        Some(k) => ConfigValue::of("keepalive", "upstream be", k, "/e/a.conf:3"),
        None => ConfigValue::of(
            "keepalive",
            "upstream be",
            "unset (no idle upstream connections kept)",
            crate::model::config::DEFAULT,
        ),
    };
    let server = |port: &u16| UpstreamServer {
        address: format!("127.0.0.1:{port}"),
        max_fails: "1".into(),
        fail_timeout: "10s".into(),
        other: String::new(),
        at: "/e/a.conf:2".into(),
        as_written: format!("127.0.0.1:{port}"),
    };
    ConfigReport {
        values: vec![
            ConfigValue::of(
                "proxy_pass",
                "server a location /",
                "http://be",
                "/e/a.conf:9",
            ),
            pool,
        ],
        upstreams: vec![UpstreamValue {
            name: "be".into(),
            servers: ports.iter().map(server).collect(),
            at: "/e/a.conf:1".into(),
        }],
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::fd_upstream::upstream_keepalive_off;
    use crate::analysis::inputs::w;
    use crate::model::config::{ConfigReport, ConfigValue};
    use crate::model::{NginxErrorsReport, PeerErrorsReport};

    fn inputs(config: Option<ConfigReport>) -> Inputs {
        Inputs {
            nginx_errors: Some(NginxErrorsReport {
                readable: true,
                upstream_peers: vec![
                    PeerErrorsReport {
                        peer: "http://127.0.0.1:18902".into(),
                        lines: 300,
                        by_class: [("upstream_reset".to_string(), 300)].into(),
                    },
                    PeerErrorsReport {
                        peer: "http://127.0.0.1:18901".into(),
                        lines: 300,
                        by_class: [("upstream_connect_failed".to_string(), 300)].into(),
                    },
                ],
                ..Default::default()
            }),
            config,
            ..Inputs::default()
        }
    }

    fn upstream(keepalive: Option<&str>) -> ConfigReport {
        upstream_be(&[18902], keepalive)
    }

    #[test]
    fn names_each_peer_by_class() {
        let inp = inputs(None);
        assert_eq!(
            peers_of(&inp, "upstream_reset"),
            ["http://127.0.0.1:18902 (300 lines)"]
        );
        assert_eq!(
            peers_of(&inp, "upstream_connect_failed"),
            ["http://127.0.0.1:18901 (300 lines)"]
        );
        assert!(peers_of(&inp, "upstream_read_timeout").is_empty());
        assert_eq!(
            by_peer_evidence(&inp).unwrap()["http://127.0.0.1:18902"]["upstream_reset"],
            300
        );
    }

    /// No pool configured for the resetting peer: fresh connections, never a keepalive
    /// timeout; a pool: the mismatch may be it; no configuration: both, and unknown.
    #[test]
    fn a_reset_is_a_keepalive_mismatch_only_with_a_pool() {
        let fresh = reset_said(&inputs(Some(upstream(None))));
        assert!(
            fresh.starts_with("the upstream reset fresh connections (502) (peer: http://127.0.0.1:18902 (300 lines)): nginx keeps no idle connections to it (127.0.0.1:18902 is a server of upstream be, which sets no keepalive), so none was closed under it: the peer crashed"),
            "{fresh}"
        );
        assert!(!fresh.contains("shorter"), "{fresh}");
        // Proxied to by address: no upstream block.
        let bare = ConfigReport {
            values: vec![ConfigValue::of(
                "proxy_pass",
                "server a location /",
                "http://127.0.0.1:18902",
                "/e/a.conf:9",
            )],
            ..Default::default()
        };
        let said = reset_said(&inputs(Some(bare)));
        assert!(
            said.contains(
                "(127.0.0.1:18902 is proxied to by address (no upstream block, no pool))"
            ),
            "{said}"
        );
        let kept = reset_said(&inputs(Some(upstream(Some("32")))));
        assert!(
            kept.contains("an idle one from the pool (`keepalive 32` in upstream be (/e/a.conf:3)) when its keepalive timeout is shorter"),
            "{kept}"
        );
        let unknown = reset_said(&inputs(None));
        assert!(unknown.contains("so which is unknown"), "{unknown}");
    }

    /// Error-log lines of `class` in a readable log.
    fn log_of(class: &str, n: u64) -> crate::model::NginxErrorsReport {
        crate::model::NginxErrorsReport {
            readable: true,
            classes: [(
                class.to_string(),
                crate::model::ErrorClassReport {
                    count: n,
                    group: "upstream".into(),
                    ..Default::default()
                },
            )]
            .into(),
            ..Default::default()
        }
    }

    /// A peer that resets every connection (newcomer trial): 400 requests, 400
    /// connects all established, then reset. Keepalive cannot keep them and a reset
    /// leaves no TIME-WAIT: silent from [`UPSTREAM_PEER_FAILED_SHARE`](super::super::fd_upstream::UPSTREAM_PEER_FAILED_SHARE) of the
    /// established connections failed at the peer (200 of 400), firing below it (199),
    /// with the failed share said.
    #[test]
    fn connections_the_peer_fails_are_not_keepalive_off() {
        let mut a = w(1, 400, 400);
        a.upstream_connects = 400;
        a.upstream_established = 400;
        let inp = |reset: u64| Inputs {
            workers: vec![a.clone()],
            requests: Some(400),
            nginx_errors: Some(log_of("upstream_reset", reset)),
            ..Inputs::default()
        };
        for (reset, fires) in [(400, false), (200, false), (199, true), (0, true)] {
            let mut out = Vec::new();
            upstream_keepalive_off(&inp(reset), &mut out);
            assert_eq!(out.len(), fires as usize, "{reset} resets: {out:?}");
        }
        let mut out = Vec::new();
        upstream_keepalive_off(&inp(199), &mut out);
        assert_eq!(out[0].evidence["failed_at_peer"], serde_json::json!(199.0));
        assert!(
            out[0].advice.contains("; 50% of the established ones the peer failed (reset, closed or timed out: nginx's error log), which keepalive would not have kept):"),
            "{}",
            out[0].advice
        );
        // Closed before answering and read timeouts are the peer's too.
        for class in ["upstream_prematurely_closed", "upstream_read_timeout"] {
            let mut out = Vec::new();
            upstream_keepalive_off(
                &Inputs {
                    nginx_errors: Some(log_of(class, 400)),
                    ..inp(0)
                },
                &mut out,
            );
            assert!(out.is_empty(), "{class}: {out:?}");
        }
        // The log not read: the failures are unknown, the connects judged as before.
        let mut out = Vec::new();
        upstream_keepalive_off(
            &Inputs {
                nginx_errors: None,
                ..inp(0)
            },
            &mut out,
        );
        assert_eq!(
            out[0].evidence["failed_at_peer"],
            serde_json::json!("unknown: nginx's error log is not read")
        );
    }

    /// A dead peer beside a resetting one (300 requests each: 300 refused, 300
    /// established and reset; 0.50 established per request) is silent; ports run out
    /// (case 18) still fire: EADDRNOTAVAIL is keepalive's, not the peer's.
    #[test]
    fn a_dead_and_a_resetting_peer_are_not_keepalive_off_but_ports_out_is() {
        let mut b = w(1, 600, 600);
        b.upstream_connects = 600;
        b.upstream_established = 300;
        b.upstream_errors.insert("ECONNREFUSED".into(), 300);
        let mut out = Vec::new();
        upstream_keepalive_off(
            &Inputs {
                workers: vec![b],
                requests: Some(600),
                nginx_errors: Some(log_of("upstream_reset", 300)),
                ..Inputs::default()
            },
            &mut out,
        );
        assert!(out.is_empty(), "{out:?}");
        // Ports run out (case 18): the EADDRNOTAVAIL lines are keepalive's, it fires.
        let mut c = w(1, 1000, 1000);
        c.upstream_connects = 1000;
        c.upstream_established = 40;
        c.upstream_errors.insert("EADDRNOTAVAIL".into(), 960);
        let mut out = Vec::new();
        upstream_keepalive_off(
            &Inputs {
                workers: vec![c],
                requests: Some(1000),
                nginx_errors: Some(log_of("upstream_addr_unavailable", 960)),
                ..Inputs::default()
            },
            &mut out,
        );
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].evidence["failed_at_peer"], serde_json::json!(0.0));
    }
}

/// The newcomer trial's D2: a peer that resets every fresh connection (30 tries, 30
/// connects) beside a pooled peer (76 tries, 58 connects): the reset is said of fresh
/// connections, measured per peer, not a keepalive-timeout mismatch from the other
/// peer's reuse; the pooled peer itself is Kept.
#[cfg(test)]
mod per_peer_reuse {
    use super::*;
    use crate::model::{
        access_log::{AccessLogReport, UpstreamOutcomeReport},
        connections::ConnectionsReport,
        upstream_lifecycle::PeerLifecycle,
    };

    #[test]
    fn reuse_is_judged_for_the_peer_that_reset() {
        let up = |peer: &str, tries: u64| UpstreamOutcomeReport {
            peer: peer.into(),
            tries,
            ..Default::default()
        };
        let row = |peer: &str, connects: u64| PeerLifecycle {
            peer: peer.into(),
            connects,
            ..Default::default()
        };
        let inp = Inputs {
            access_log: Some(AccessLogReport {
                lines: 106,
                statuses: [("200".to_string(), 76), ("502".to_string(), 30)].into(),
                share_logged: Some(1.0),
                upstreams: vec![up("127.0.0.1:18401", 30), up("127.0.0.1:18402", 76)],
                ..Default::default()
            }),
            connections: Some(ConnectionsReport {
                upstream_peers: vec![row("127.0.0.1:18401", 30), row("127.0.0.1:18402", 58)],
                ..Default::default()
            }),
            ..Default::default()
        };
        match pool(&inp, &["http://127.0.0.1:18401"]) {
            Pool::None(why) => assert!(
                why.contains(
                    "every try was a fresh connection (127.0.0.1:18401: 30 tries, 30 connects"
                ),
                "{why}"
            ),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            pool(&inp, &["http://127.0.0.1:18402"]),
            Pool::Kept(_)
        ));
    }
}

/// `upstream_keepalive_off`'s advice on `inp`, which must fire once (tests).
#[cfg(test)]
fn keepalive_advice(inp: &Inputs) -> String {
    let mut out = Vec::new();
    super::fd_upstream::upstream_keepalive_off(inp, &mut out);
    assert_eq!(out.len(), 1, "{out:?}");
    out.remove(0).advice
}

/// Trial 16: one nginx with three proxying locations: /a/ to `upstream ua` (a live peer
/// and one that times out), /b/ to `upstream ub` (a peer that resets or closes every
/// connection before answering), /c/ to a bare address nothing listens on. 150 of the
/// 250 requests went to /a/, one connection each: `upstream_keepalive_off` is right for
/// /a/ and names only it; /b/'s peer (50 established, 50 failed by the peer) and /c/'s
/// (none established) carried nothing a pool could keep.
#[cfg(test)]
mod failing_peers_beside_a_live_one {
    use super::*;
    use crate::analysis::inputs::w;
    use crate::model::{
        config::{ConfigReport, ConfigValue, UpstreamServer, UpstreamValue},
        connections::ConnectionsReport,
        upstream_lifecycle::PeerLifecycle,
        NginxErrorsReport, PeerErrorsReport,
    };

    fn peer(port: u16, connects: u64, established: u64) -> PeerLifecycle {
        PeerLifecycle {
            peer: format!("127.0.0.1:{port}"),
            connects,
            established,
            connect_failed: connects - established,
            ..Default::default()
        }
    }

    fn block(name: &str, ports: &[u16]) -> UpstreamValue {
        UpstreamValue {
            name: name.into(),
            servers: ports
                .iter()
                .map(|p| UpstreamServer {
                    address: format!("127.0.0.1:{p}"),
                    at: "/t/n.conf:3".into(),
                    ..Default::default()
                })
                .collect(),
            at: "/t/n.conf:3".into(),
        }
    }

    fn log_peer(port: u16, class: &str, n: u64) -> PeerErrorsReport {
        PeerErrorsReport {
            peer: format!("http://127.0.0.1:{port}"),
            lines: n,
            by_class: [(class.to_string(), n)].into(),
        }
    }

    #[test]
    fn only_the_location_of_the_live_peer_is_told_to_keep_connections() {
        let mut a = w(1, 250, 250);
        a.upstream_connects = 252;
        a.upstream_established = 200;
        let pass = |loc: &str, to: &str, line: u32| {
            let scope = format!("server s location {loc}");
            [
                ConfigValue::of("proxy_pass", &scope, to, &format!("/t/n.conf:{line}")),
                ConfigValue::of("proxy_http_version", &scope, "1.0", "default"),
                ConfigValue::of("proxy_set_header Connection", &scope, "close", "default"),
            ]
        };
        let unset = |b: &str| {
            ConfigValue::of(
                "keepalive",
                &format!("upstream {b}"),
                "unset (no idle upstream connections kept)",
                crate::model::config::DEFAULT,
            )
        };
        let mut resetting = peer(19513, 50, 50);
        resetting.closed_by_reset = 34;
        resetting.closed_by_peer = 16;
        let inp = Inputs {
            workers: vec![a],
            requests: Some(250),
            connections: Some(ConnectionsReport {
                upstream_peers: vec![
                    peer(19512, 150, 150),
                    resetting,
                    peer(19514, 50, 0),
                    peer(19515, 2, 0),
                ],
                ..Default::default()
            }),
            nginx_errors: Some(NginxErrorsReport {
                readable: true,
                upstream_peers: vec![
                    log_peer(19513, "upstream_reset", 34),
                    PeerErrorsReport {
                        lines: 50,
                        by_class: [
                            ("upstream_reset".to_string(), 34),
                            ("upstream_prematurely_closed".to_string(), 16),
                        ]
                        .into(),
                        ..log_peer(19513, "", 0)
                    },
                    log_peer(19514, "upstream_connect_failed", 50),
                    log_peer(19515, "upstream_connect_timeout", 2),
                ]
                .split_off(1),
                ..Default::default()
            }),
            config: Some(ConfigReport {
                values: [
                    pass("/a/", "http://ua/", 10),
                    pass("/b/", "http://ub/", 11),
                    pass("/c/", "http://127.0.0.1:19514/", 12),
                ]
                .concat()
                .into_iter()
                .chain([unset("ua"), unset("ub")])
                .collect(),
                upstreams: vec![block("ua", &[19512, 19515]), block("ub", &[19513])],
                ..Default::default()
            }),
            ..Inputs::default()
        };
        let advice = &super::keepalive_advice(&inp);
        assert!(advice.contains("location /a/"), "{advice}");
        assert!(!advice.contains("location /b/"), "{advice}");
        assert!(!advice.contains("location /c/"), "{advice}");
        assert!(!advice.contains("which of the"), "{advice}");
    }
}

/// Trial 17: two locations to one live peer, /ka through `upstream ka` with `keepalive
/// 2` set up for reuse, /live straight to the peer; 30 clients, 3000 requests, 1706
/// connects, nginx closing almost all of them on the responses: beside the pool to add
/// for /live, the advice says /ka's pool may be full whenever a connection comes back.
#[cfg(test)]
mod a_small_pool_beside_none {
    use super::*;
    use crate::analysis::inputs::w;
    use crate::model::{
        config::{ConfigReport, ConfigValue, UpstreamServer, UpstreamValue},
        connections::ConnectionsReport,
        upstream_lifecycle::PeerLifecycle,
    };

    #[test]
    fn the_pool_set_up_right_is_said_to_overflow() {
        let mut a = w(1, 30, 3000);
        a.upstream_connects = 1706;
        a.upstream_established = 1706;
        let loc = |l: &str, to: &str, version: &str, conn: &str| {
            let scope = format!("server s location {l}");
            vec![
                ConfigValue::of("proxy_pass", &scope, to, "/t/n.conf:9"),
                ConfigValue::of("proxy_http_version", &scope, version, "/t/n.conf:10"),
                ConfigValue::of("proxy_set_header Connection", &scope, conn, "/t/n.conf:11"),
            ]
        };
        let mut values = loc("/ka", "http://ka", "1.1", "");
        values.extend(loc("/live", "http://127.0.0.1:19512", "1.0", "close"));
        values.push(ConfigValue::of(
            "keepalive",
            "upstream ka",
            "2",
            "/t/n.conf:3",
        ));
        let inp = Inputs {
            workers: vec![a],
            requests: Some(3000),
            connections: Some(ConnectionsReport {
                upstream_peers: vec![PeerLifecycle {
                    peer: "127.0.0.1:19512".into(),
                    connects: 1706,
                    established: 1706,
                    closed_by_nginx: 1700,
                    closed_by_nginx_after_peer_data: 1690,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            config: Some(ConfigReport {
                values,
                upstreams: vec![UpstreamValue {
                    name: "ka".into(),
                    servers: vec![UpstreamServer {
                        address: "127.0.0.1:19512".into(),
                        ..Default::default()
                    }],
                    at: "/t/n.conf:2".into(),
                }],
                ..Default::default()
            }),
            ..Inputs::default()
        };
        let advice = &super::keepalive_advice(&inp);
        assert!(advice.contains("location /live"), "{advice}");
        assert!(
            advice.contains("; where it is set up for reuse, a pool is configured (upstream ka: keepalive 2 (/t/n.conf:3)) and the proxy settings allow its reuse, yet nginx closed 1690 of 1700 upstream connections within a jiffy of the upstream's last data"),
            "{advice}"
        );
    }
}
