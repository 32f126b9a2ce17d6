//! `upstream_peer_down`: an upstream peer that established none of the connections
//! nginx's workers tried in the period, named with its `server` line (`max_fails`,
//! `fail_timeout`) and what the clients got, however few requests reached it.
//! A peer nginx marks failed gets a try only once per `fail_timeout` per worker, so its
//! error lines stay under every share threshold (`upstream_errors` fires from 10 lines
//! and 1% of the requests): newcomer trial 15, a peer refusing 3 of 3 connects at 400
//! requests, had no verdict.

use std::{collections::BTreeMap, net::SocketAddr};

use crate::{
    analysis::inputs::Inputs,
    model::{config::ConfigReport, upstream_lifecycle::PeerLifecycle, Severity, Verdict},
};

/// Failed connects (and none established) from which a peer is called down: one
/// failure is a peer restarting as often as a dead one.
pub const PEER_DOWN_MIN_FAILED: u64 = 2;

/// Dead peers named in the advice, at most (the evidence holds them all).
const NAMED: usize = 3;

/// The rule: one warning over every TCP peer (`connections.upstream_peers[]`, tracepoint
/// `sock:inet_sock_set_state`) with at least [`PEER_DOWN_MIN_FAILED`] connects that
/// failed before the handshake completed (`SYN_SENT -> CLOSE`: refused, timed out,
/// unreachable, or given up by nginx at `proxy_connect_timeout`) and none established.
/// A peer the `upstream_errors` verdict already names is left to it. Silent without the
/// upstream lifecycle (unix-socket peers are not traced), and for `other peers`.
pub fn upstream_peer_down(inp: &Inputs, out: &mut Vec<Verdict>) {
    let Some(c) = inp.connections.as_ref() else {
        return;
    };
    // upstream_errors names a peer as nginx's error log does: `http://ip:port (N lines)`.
    let named_elsewhere = |p: &str| {
        let named = format!("://{p} (");
        out.iter()
            .any(|v| v.id == "upstream_errors" && v.advice.contains(&named))
    };
    let down: Vec<&PeerLifecycle> = c
        .upstream_peers
        .iter()
        .filter(|p| p.peer.parse::<SocketAddr>().is_ok())
        .filter(|p| p.established == 0 && p.connect_failed >= PEER_DOWN_MIN_FAILED)
        .filter(|p| !named_elsewhere(&p.peer))
        .collect();
    if down.is_empty() {
        return;
    }
    // The workers' errnos are all peers': said of the dead peer only when no other
    // peer failed a connect and they add up to its own failures.
    let others_failed = c
        .upstream_peers
        .iter()
        .any(|p| p.connect_failed > 0 && !down.iter().any(|d| d.peer == p.peer));
    let errnos = match down.as_slice() {
        [p] if !others_failed => errnos_of(inp, p.connect_failed),
        _ => None,
    };
    let said: Vec<String> = down
        .iter()
        .take(NAMED)
        .map(|p| peer_said(inp, p, errnos.as_deref()))
        .collect();
    let more = match down.len().saturating_sub(NAMED) {
        0 => String::new(),
        n => format!("; and {n} more peers the same (evidence `peers`)"),
    };
    let mut evidence = BTreeMap::new();
    evidence.insert(
        "peers",
        serde_json::json!(down
            .iter()
            .map(|p| peer_evidence(inp, p))
            .collect::<Vec<_>>()),
    );
    evidence.insert(
        "source",
        serde_json::json!("tracepoint sock:inet_sock_set_state on the sockets of the workers' connect(): CLOSE -> SYN_SENT a connect, SYN_SENT -> ESTABLISHED established, SYN_SENT -> CLOSE failed"),
    );
    if let Some(e) = &errnos {
        evidence.insert("connect_errors", serde_json::json!(e));
    }
    if let Some(a) = super::outcome_rules::clients_unharmed(inp) {
        evidence.insert("retried", a);
    }
    let clients = super::outcome_rules::clients_saw(inp).unwrap_or_else(|| {
        "; what the clients got is not measured (an access log with $status and $upstream_addr holding every request would tell: nginx retries a failed connect on the next peer unless proxy_next_upstream says otherwise)".into()
    });
    let advice = format!(
        "{}{more}{clients}. Bring the peer back, or take it out of its upstream block (or mark it `down`): while it is listed nginx keeps trying it",
        said.join("; ")
    );
    out.push(Verdict::new(
        "upstream_peer_down",
        Severity::Warning,
        evidence,
        &["upstream server", "max_fails", "fail_timeout"],
        advice,
    ));
}

/// The workers' connect errors by errno (`connect()` and `getsockopt(SO_ERROR)`, all
/// peers), said as the one dead peer's only when they add up to exactly its `failed`
/// connects (no EADDRNOTAVAIL, nor a resolver's connect, among them) and were counted over
/// the whole period (not `--detail sampled`); None otherwise.
fn errnos_of(inp: &Inputs, failed: u64) -> Option<String> {
    if inp.detail.is_some() {
        return None;
    }
    let by = inp.upstream_connect_errors();
    (by.values().sum::<u64>() == failed).then(|| {
        by.iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// One dead peer in words: its counts, nginx's error-log lines naming it, its `server`
/// line and what `max_fails`/`fail_timeout` do, and its tries in the access log.
fn peer_said(inp: &Inputs, p: &PeerLifecycle, errnos: Option<&str>) -> String {
    let errnos = errnos
        .map(|e| format!(", connect() errors {e}"))
        .unwrap_or_default();
    let lines = match log_lines(inp, &p.peer) {
        Some((n, by)) if n > 0 => format!(
            "; nginx's error log names it in {n} lines ({})",
            by.iter()
                .map(|(c, k)| format!("{c} {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Some(_) => "; nginx's error log names it in no line of the period".into(),
        None => String::new(),
    };
    let server = match server_of(inp.config.as_ref(), &p.peer) {
        Some(s) => format!("; it is {}", s.said()),
        None if inp.config.is_some() => "; no `server` line of the configuration read writes this address (a host name, or a proxy_pass by address)".into(),
        None => "; the configuration was not read, so its max_fails and fail_timeout are unknown".into(),
    };
    let tries = tries_of(inp, &p.peer)
        .map(|t| format!("; the access log read has {t}"))
        .unwrap_or_default();
    format!(
        "upstream peer {} established none of the {} connections nginx's workers tried in the period ({} failed before the handshake completed{errnos}, none established; tracepoint sock:inet_sock_set_state): it refused them, did not answer, or nginx gave up on them first (proxy_connect_timeout, a client gone), not told apart by the tracepoint{lines}{server}{tries}",
        p.peer, p.connects, p.connect_failed
    )
}

/// One dead peer for the evidence.
fn peer_evidence(inp: &Inputs, p: &PeerLifecycle) -> serde_json::Value {
    let mut e = serde_json::json!({
        "peer": p.peer,
        "connects": p.connects,
        "established": p.established,
        "connect_failed": p.connect_failed,
    });
    if let Some((n, by)) = log_lines(inp, &p.peer) {
        e["error_log_lines"] = serde_json::json!(n);
        e["error_log_by_class"] = serde_json::json!(by);
    }
    if let Some(s) = server_of(inp.config.as_ref(), &p.peer) {
        e["server"] = serde_json::json!(format!(
            "upstream {}: {} ({}; {})",
            s.upstream, s.line.0, s.at, s.line.1
        ));
    }
    if let Some(t) = tries_of(inp, &p.peer) {
        e["access_log"] = serde_json::json!(t);
    }
    e
}

/// nginx's error-log lines naming `peer` (`upstream: "http://127.0.0.1:8080/"`):
/// (lines, lines by class); None when the log is not read.
fn log_lines<'a>(inp: &'a Inputs, peer: &str) -> Option<(u64, BTreeMap<&'a str, u64>)> {
    let e = inp.nginx_errors.as_ref().filter(|e| e.readable)?;
    let mut n = 0;
    let mut by: BTreeMap<&str, u64> = BTreeMap::new();
    for r in e
        .upstream_peers
        .iter()
        .filter(|r| super::upstream_failures::authority(&r.peer) == peer)
    {
        n += r.lines;
        for (c, k) in &r.by_class {
            *by.entry(c.as_str()).or_default() += k;
        }
    }
    Some((n, by))
}

/// A `server` line of an `upstream` block, as the configuration read writes it.
struct ServerLine<'a> {
    /// The upstream block's name.
    upstream: &'a str,
    /// The line as written, and the max_fails and fail_timeout in force
    /// ([`crate::model::config::UpstreamServer::quoted`]).
    line: (String, String),
    /// `file:line`.
    at: &'a str,
    max_fails: &'a str,
    fail_timeout: &'a str,
    /// The block's only address (one `server` line of one IP address): nginx's
    /// round-robin never marks a single peer failed (`peers->single` in
    /// ngx_http_upstream_round_robin.c), so max_fails and fail_timeout do not apply.
    single: bool,
}

impl ServerLine<'_> {
    /// "`server ADDR` of upstream NAME (file:line; max_fails N, fail_timeout T): what
    /// max_fails and fail_timeout do to it".
    fn said(&self) -> String {
        let ((line, limits), upstream, at) = (&self.line, self.upstream, self.at);
        if self.single {
            format!("{line}, the only server of upstream {upstream} ({at}; {limits}): nginx never marks a block's only server failed (max_fails and fail_timeout do not apply to it), so every request tries it")
        } else if self.max_fails == "0" {
            format!("{line} of upstream {upstream} ({at}; {limits}): with max_fails 0 nginx never marks it failed and every request the balancer sends to it tries it first")
        } else {
            format!(
                "{line} of upstream {upstream} ({at}; {limits}): nginx stops sending requests to a server for fail_timeout ({}) once max_fails ({}) tries failed within it, so a failing server costs max_fails failed tries, then about one per fail_timeout, in each worker (in all of them together when the block has a `zone`), not one per request",
                self.fail_timeout, self.max_fails
            )
        }
    }
}

/// For `upstream_errors`: the `server` lines of the peers nginx's error log names
/// failing (at most [`NAMED`]), each with what max_fails and fail_timeout do to it, as
/// "; the failing peers' server lines: ..."; and whether max_fails applies to one of
/// them (not a block's only server, max_fails not 0). None when the configuration was
/// not read or writes none of them (a proxy_pass by address has no max_fails).
pub(super) fn failing_servers(inp: &Inputs) -> Option<(String, bool)> {
    let e = inp.nginx_errors.as_ref().filter(|e| e.readable)?;
    let mut said = Vec::new();
    let mut applies = false;
    let mut seen = std::collections::BTreeSet::new();
    for p in e.upstream_peers.iter().filter(|p| !p.by_class.is_empty()) {
        let peer = super::upstream_failures::authority(&p.peer);
        let Some(s) = server_of(inp.config.as_ref(), peer) else {
            continue;
        };
        if !seen.insert((s.upstream, s.at)) {
            continue;
        }
        applies |= !s.single && s.max_fails != "0";
        if said.len() < NAMED {
            said.push(s.said());
        }
    }
    (!said.is_empty()).then(|| {
        (
            format!("; the failing peers' server lines: {}", said.join("; ")),
            applies,
        )
    })
}

/// The `server` line writing `peer`: the first of the configuration's `upstream`
/// blocks whose server address is the peer (as an IP, or `localhost`).
fn server_of<'a>(cfg: Option<&'a ConfigReport>, peer: &str) -> Option<ServerLine<'a>> {
    let addr: SocketAddr = peer.parse().ok()?;
    cfg?.upstreams.iter().find_map(|u| {
        let single = matches!(u.servers.as_slice(), [s] if s.address.parse::<SocketAddr>().is_ok() || s.address.trim_matches(['[', ']']).parse::<std::net::IpAddr>().is_ok());
        u.servers
            .iter()
            .find(|s| {
                super::upstream_pool::socket_addrs(&s.address, 80)
                    .is_some_and(|v| v.contains(&addr))
            })
            .map(|s| ServerLine {
                upstream: &u.name,
                line: s.quoted(),
                at: &s.at,
                max_fails: &s.max_fails,
                fail_timeout: &s.fail_timeout,
                single,
            })
    })
}

/// The access log's tries of `peer` (`$upstream_addr`): `3 tries of it, upstream status
/// 502 3`; None when the log does not name it.
fn tries_of(inp: &Inputs, peer: &str) -> Option<String> {
    let a = inp.access_log.as_ref()?;
    let u = a.upstreams.iter().find(|u| u.peer == peer)?;
    let st: Vec<String> = u.statuses.iter().map(|(s, n)| format!("{s} {n}")).collect();
    Some(format!(
        "{} tries of it ($upstream_addr), upstream status {}",
        u.tries,
        if st.is_empty() {
            "not logged".into()
        } else {
            st.join(", ")
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{inputs::w, upstream_failures::upstream_be};
    use crate::model::{
        access_log::{AccessLogReport, UpstreamOutcomeReport},
        connections::ConnectionsReport,
        NginxErrorsReport, PeerErrorsReport,
    };

    fn peer(peer: &str, connects: u64, established: u64) -> PeerLifecycle {
        PeerLifecycle {
            peer: peer.into(),
            connects,
            established,
            connect_failed: connects - established,
            ..Default::default()
        }
    }

    /// Newcomer trial 15: `server 127.0.0.1:19702` refused 3 of 3 connects beside a
    /// live peer that took 400, nginx logged 3 `connect() failed` for it, the access
    /// log 3 tries answered 502 and retried.
    fn trial15() -> Inputs {
        let mut wk = w(1, 400, 400);
        wk.upstream_errors.insert("ECONNREFUSED".into(), 3);
        Inputs {
            workers: vec![wk],
            connections: Some(ConnectionsReport {
                upstream_peers: vec![
                    peer("127.0.0.1:19701", 400, 400),
                    peer("127.0.0.1:19702", 3, 0),
                ],
                ..Default::default()
            }),
            nginx_errors: Some(NginxErrorsReport {
                readable: true,
                upstream_peers: vec![PeerErrorsReport {
                    peer: "http://127.0.0.1:19702".into(),
                    lines: 3,
                    by_class: [("upstream_connect_failed".to_string(), 3)].into(),
                }],
                ..Default::default()
            }),
            access_log: Some(AccessLogReport {
                upstreams: vec![UpstreamOutcomeReport {
                    peer: "127.0.0.1:19702".into(),
                    tries: 3,
                    statuses: [("502".to_string(), 3)].into(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            config: Some(upstream_be(&[19701, 19702], None)),
            ..Inputs::default()
        }
    }

    #[test]
    fn a_peer_that_established_nothing_is_named_with_its_server_line() {
        let mut out = Vec::new();
        upstream_peer_down(&trial15(), &mut out);
        assert_eq!(out.len(), 1);
        let v = &out[0];
        assert_eq!(v.id, "upstream_peer_down");
        assert_eq!(v.severity, Severity::Warning);
        assert_eq!(
            v.advice,
            "upstream peer 127.0.0.1:19702 established none of the 3 connections nginx's workers tried in the period (3 failed before the handshake completed, connect() errors ECONNREFUSED 3, none established; tracepoint sock:inet_sock_set_state): it refused them, did not answer, or nginx gave up on them first (proxy_connect_timeout, a client gone), not told apart by the tracepoint; nginx's error log names it in 3 lines (upstream_connect_failed 3); it is `server 127.0.0.1:19702` of upstream be (/e/a.conf:2; max_fails 1 (default), fail_timeout 10s (default)): nginx stops sending requests to a server for fail_timeout (10s) once max_fails (1) tries failed within it, so a failing server costs max_fails failed tries, then about one per fail_timeout, in each worker (in all of them together when the block has a `zone`), not one per request; the access log read has 3 tries of it ($upstream_addr), upstream status 502 3; what the clients got is not measured (an access log with $status and $upstream_addr holding every request would tell: nginx retries a failed connect on the next peer unless proxy_next_upstream says otherwise). Bring the peer back, or take it out of its upstream block (or mark it `down`): while it is listed nginx keeps trying it"
        );
        let p = &v.evidence["peers"][0];
        assert_eq!(p["connect_failed"], 3);
        assert_eq!(p["established"], 0);
        assert_eq!(p["error_log_lines"], 3);
        assert_eq!(
            p["server"],
            "upstream be: `server 127.0.0.1:19702` (/e/a.conf:2; max_fails 1 (default), fail_timeout 10s (default))"
        );
        assert_eq!(v.evidence["connect_errors"], "ECONNREFUSED 3");
        assert_eq!(v.evidence["peers"].as_array().unwrap().len(), 1);
    }

    /// Trial 17: `upstream_errors` named max_fails and fail_timeout only in its
    /// evidence. The failing peers' server lines, with what they do; a block's only
    /// server is never marked failed (nginx's `peers->single`), so they do not apply.
    #[test]
    fn the_failing_peers_server_lines_say_what_max_fails_does() {
        let inp = trial15();
        let (said, applies) = failing_servers(&inp).expect("a server line");
        assert_eq!(said, "; the failing peers' server lines: `server 127.0.0.1:19702` of upstream be (/e/a.conf:2; max_fails 1 (default), fail_timeout 10s (default)): nginx stops sending requests to a server for fail_timeout (10s) once max_fails (1) tries failed within it, so a failing server costs max_fails failed tries, then about one per fail_timeout, in each worker (in all of them together when the block has a `zone`), not one per request");
        assert!(applies);
        let single = Inputs {
            config: Some(upstream_be(&[19702], None)),
            ..trial15()
        };
        let (said, applies) = failing_servers(&single).expect("a server line");
        assert!(said.contains("the only server of upstream be"), "{said}");
        assert!(!applies);
        // Not read, or no server line for the peer: nothing said.
        let unread = Inputs {
            config: None,
            ..trial15()
        };
        assert_eq!(failing_servers(&unread), None);
        let other = Inputs {
            config: Some(upstream_be(&[19701], None)),
            ..trial15()
        };
        assert_eq!(failing_servers(&other), None);
    }

    /// One failure (a restart as likely as a dead peer), a peer that established one
    /// connection, and a peer `upstream_errors` already names: silent. Two peers
    /// failing: the errnos (all peers') are not said as either one's.
    #[test]
    fn one_failure_a_live_peer_or_one_named_already_is_not_down() {
        let mut inp = trial15();
        let c = inp.connections.as_mut().unwrap();
        c.upstream_peers[1] = peer("127.0.0.1:19702", 1, 0);
        let mut out = Vec::new();
        upstream_peer_down(&inp, &mut out);
        assert!(out.is_empty());
        let c = inp.connections.as_mut().unwrap();
        c.upstream_peers[1] = PeerLifecycle {
            connect_failed: 5,
            ..peer("127.0.0.1:19702", 6, 1)
        };
        upstream_peer_down(&inp, &mut out);
        assert!(out.is_empty());
        let mut out = vec![Verdict::new(
            "upstream_errors",
            Severity::Warning,
            BTreeMap::new(),
            &[],
            "... http://127.0.0.1:19702 (3 lines)".into(),
        )];
        upstream_peer_down(&trial15(), &mut out);
        assert_eq!(out.len(), 1);
        let mut inp = trial15();
        let c = inp.connections.as_mut().unwrap();
        c.upstream_peers[0] = PeerLifecycle {
            connect_failed: 1,
            ..peer("127.0.0.1:19701", 401, 400)
        };
        let mut out = Vec::new();
        upstream_peer_down(&inp, &mut out);
        assert!(!out[0].advice.contains("ECONNREFUSED"), "{}", out[0].advice);
        assert!(!out[0].evidence.contains_key("connect_errors"));
    }

    /// Without the configuration the limits are unknown and said so; an address no
    /// `server` line writes is said so.
    #[test]
    fn the_server_line_unknown_is_said() {
        let mut inp = trial15();
        inp.config = None;
        let mut out = Vec::new();
        upstream_peer_down(&inp, &mut out);
        assert!(out[0].advice.contains(
            "; the configuration was not read, so its max_fails and fail_timeout are unknown"
        ));
        let mut inp = trial15();
        inp.config = Some(upstream_be(&[19701], None));
        let mut out = Vec::new();
        upstream_peer_down(&inp, &mut out);
        assert!(out[0]
            .advice
            .contains("; no `server` line of the configuration read writes this address"));
    }
}
