//! Rules on what the clients got, from nginx's own access log
//! (`model::access_log`): `upstream_slow`, and the clients' side of `upstream_errors`
//! (how many requests the clients got as 5xx, how many were retried on another peer
//! and answered). Pure.

use std::collections::BTreeMap;

use super::inputs::Inputs;
use crate::model::access_log::{AccessLogReport, UpstreamOutcomeReport};
use crate::model::config::{ConfigReport, ConfigValue};
use crate::model::{round3_json as round3, Severity, Verdict};

/// A peer whose p99 `$upstream_response_time` is at least this is slow, seconds.
pub const SLOW_UPSTREAM_S: f64 = 1.0;
/// ... or at least this share of the `proxy_read_timeout` that bounds it (when every
/// proxying location has the same one).
pub const SLOW_SHARE_OF_TIMEOUT: f64 = 0.5;
/// Critical at this share of the timeout (the next slowdown times out), or on 504s.
pub const CRITICAL_SHARE_OF_TIMEOUT: f64 = 0.9;
/// Requests to a peer below which it is not judged.
pub const SLOW_MIN_TRIES: u64 = 20;

/// An nginx time (`60s`, `500ms`, `1m`, `90`: seconds) in seconds.
pub fn nginx_seconds(v: &str) -> Option<f64> {
    let v = v.trim();
    if let Ok(n) = v.parse::<f64>() {
        return Some(n);
    }
    humantime::parse_duration(v).ok().map(|d| d.as_secs_f64())
}

/// A configured time's first argument (`keepalive_timeout 75s 60s` -> 75), seconds;
/// None when it is no time (`unset`, a default's description).
pub fn value_seconds(v: &crate::model::config::ConfigValue) -> Option<f64> {
    nginx_seconds(v.value.split_whitespace().next()?)
}

/// The `proxy_read_timeout` values in force where nginx proxies: those of the locations
/// with `proxy_pass` (the configuration's effective proxy settings), else the http
/// level's. (seconds, quoted value), distinct, at most 4.
fn read_timeouts(cfg: &ConfigReport) -> Vec<(f64, String)> {
    let located: Vec<_> = cfg.proxied("proxy_read_timeout").collect();
    if located.is_empty() {
        distinct_timeouts(cfg.value("proxy_read_timeout"))
    } else {
        distinct_timeouts(located)
    }
}

/// `proxy_read_timeout` values as (seconds, quoted value): distinct, at most 4, those
/// that do not read as a time left out.
fn distinct_timeouts<'a>(values: impl IntoIterator<Item = &'a ConfigValue>) -> Vec<(f64, String)> {
    let mut out: Vec<(f64, String)> = Vec::new();
    for v in values {
        let Some(s) = nginx_seconds(&v.value) else {
            continue;
        };
        if out.len() < 4 && !out.iter().any(|(x, _)| *x == s) {
            out.push((s, format!("proxy_read_timeout {}", v.quoted())));
        }
    }
    out
}

/// Whether the `proxy_pass` target `target` (`http://be/x`, `127.0.0.1:8080`) reaches
/// `peer` (`$upstream_addr`'s `ip:port` or `unix:/path`): directly, or through one of
/// the `upstreams` (names of the blocks with a `server` that is the peer).
fn passes_to(target: &str, peer: &str, upstreams: &[&str]) -> bool {
    let (scheme_port, rest) = match target.split_once("://") {
        Some(("https", r)) => (":443", r),
        Some((_, r)) => (":80", r),
        None => (":80", target),
    };
    let host = if rest.starts_with("unix:") {
        rest
    } else {
        rest.split('/').next().unwrap_or(rest)
    };
    host == peer
        || format!("{host}{scheme_port}") == peer
        || upstreams.contains(&host)
        || (rest.starts_with("unix:") && peer.starts_with("unix:") && rest.starts_with(peer))
}

/// The `proxy_read_timeout` in force where nginx proxies to `peer`: the locations whose
/// `proxy_pass` reaches it (directly or through an `upstream` block with it as a
/// `server`); when none can be told (a variable in `proxy_pass`, a name resolved at
/// run time), every proxying location's ([`read_timeouts`]) and `false`.
fn read_timeouts_for(cfg: &ConfigReport, peer: &str) -> (Vec<(f64, String)>, bool) {
    let blocks: Vec<&str> = cfg
        .upstreams
        .iter()
        .filter(|u| {
            u.servers
                .iter()
                .any(|s| s.address == peer || format!("{}:80", s.address) == peer)
        })
        .map(|u| u.name.as_str())
        .collect();
    let scopes: Vec<&str> = cfg
        .proxied("proxy_pass")
        .filter(|v| passes_to(&v.value, peer, &blocks))
        .map(|v| v.scope.as_str())
        .collect();
    let out = distinct_timeouts(
        cfg.proxied("proxy_read_timeout")
            .filter(|v| scopes.contains(&v.scope.as_str())),
    );
    if out.is_empty() {
        (read_timeouts(cfg), false)
    } else {
        (out, true)
    }
}

/// The access log, when it holds the clients' statuses for (almost) every request
/// nginx counted.
pub(crate) fn complete_log(inp: &Inputs) -> Option<&AccessLogReport> {
    // Against nginx's own count, or proven from the configuration when the log is the
    // request count itself.
    inp.access_log.as_ref().filter(|a| a.is_complete())
}

/// The `proxy_read_timeout`s of the locations that proxy to `p`, and whether those could
/// be told apart from the others; none without a configuration.
fn timeouts_of(inp: &Inputs, p: &UpstreamOutcomeReport) -> (Vec<(f64, String)>, bool) {
    inp.config
        .as_ref()
        .map(|c| read_timeouts_for(c, &p.peer))
        .unwrap_or_default()
}

/// One bound only when every location proxying to the peer has the same timeout, s.
fn bound_of(ts: &[(f64, String)]) -> Option<f64> {
    match ts {
        [(s, _)] => Some(*s),
        _ => None,
    }
}

/// The connects to `peer` that failed in the period: the larger of the upstream
/// lifecycle's `connect_failed` (`SYN_SENT -> CLOSE`: refused, timed out) and nginx's
/// error-log lines naming the peer that say so (`upstream_connect_timeout`,
/// `upstream_connect_failed`); 0 when neither was counted.
fn connects_failed(inp: &Inputs, peer: &str) -> u64 {
    let traced = inp.connections.as_ref().map_or(0, |c| {
        c.upstream_peers
            .iter()
            .filter(|p| p.peer == peer)
            .map(|p| p.connect_failed)
            .sum()
    });
    // The error log's peers are `scheme://host:port`, the access log's `host:port`.
    let authority = |p: &str| p.split_once("://").map_or(p, |(_, a)| a).to_string();
    let logged = inp.nginx_errors.as_ref().map_or(0, |e| {
        e.upstream_peers
            .iter()
            .filter(|p| authority(&p.peer) == peer)
            .flat_map(|p| p.by_class.iter())
            .filter(|(c, _)| {
                matches!(
                    c.as_str(),
                    "upstream_connect_timeout" | "upstream_connect_failed"
                )
            })
            .map(|(_, n)| n)
            .sum()
    });
    traced.max(logged)
}

/// The peers `upstream_slow` judges slow, with their p99 `$upstream_response_time` in
/// seconds, the slowest first. A peer most of whose tries failed to connect is left
/// out: its time is the connect's (`proxy_connect_timeout`), not an answer's, and
/// `upstream_errors` judges it (trial 9: a peer that accepted nothing was called slow,
/// its 504s put on `proxy_read_timeout`).
fn slow_peers<'a>(inp: &Inputs, a: &'a AccessLogReport) -> Vec<(&'a UpstreamOutcomeReport, f64)> {
    let slow = |p: &UpstreamOutcomeReport| {
        if connects_failed(inp, &p.peer) * 2 >= p.tries {
            return None;
        }
        let bound = bound_of(&timeouts_of(inp, p).0);
        let t = p.response_time.as_ref()?;
        let over = t.p99_s >= SLOW_UPSTREAM_S
            || bound.is_some_and(|b| b > 0.0 && t.p99_s >= b * SLOW_SHARE_OF_TIMEOUT);
        (p.tries >= SLOW_MIN_TRIES && over).then_some(t.p99_s)
    };
    let mut peers: Vec<(&UpstreamOutcomeReport, f64)> = a
        .upstreams
        .iter()
        .filter_map(|p| slow(p).map(|s| (p, s)))
        .collect();
    peers.sort_by(|x, y| y.1.total_cmp(&x.1));
    peers
}

/// `upstream_slow`: an upstream peer's response time, as nginx logged it
/// (`$upstream_response_time`), at or over [`SLOW_UPSTREAM_S`] at p99 or half the
/// `proxy_read_timeout` that bounds it; critical when it answered 504s or its p99 is at
/// [`CRITICAL_SHARE_OF_TIMEOUT`] of the timeout. The slowest peer is the verdict; the
/// other slow ones are listed in its evidence.
pub fn upstream_slow(inp: &Inputs, out: &mut Vec<Verdict>) {
    let Some(a) = inp.access_log.as_ref().filter(|a| !a.over_counted()) else {
        return;
    };
    let peers = slow_peers(inp, a);
    let Some((p, _)) = peers.first() else { return };
    let (timeouts, located) = timeouts_of(inp, p);
    let bound = bound_of(&timeouts);
    let t = p.response_time.as_ref().expect("slow peers have a time");
    let timed_out = p.statuses.get("504").copied().unwrap_or(0);
    let share = bound.filter(|b| *b > 0.0).map(|b| t.p99_s / b);
    let critical = timed_out > 0 || share.is_some_and(|s| s >= CRITICAL_SHARE_OF_TIMEOUT);
    let mut ev = slow_evidence(&peers);
    let against = against_timeout(&mut ev, share, &timeouts, located);
    let failed = connects_failed(inp, &p.peer);
    ev.insert("connects_failed", serde_json::json!(failed));
    let unanswered = p.tries.saturating_sub(p.statuses.values().sum());
    ev.insert("unanswered_tries", serde_json::json!(unanswered));
    ev.insert("cut_at_timeout", serde_json::json!(timed_out));
    // See `head` below.
    let not_answered = unanswered + timed_out;
    let floor = not_answered * 2 >= p.tries;
    let timeouts_clause = match (timed_out, failed) {
        (0, _) => String::new(),
        // Said in the head as tries cut by nginx's timeout (trial 13: "20 of its
        // responses were 504" beside "had not answered 20 of its 20 tries").
        (_, 0) if floor => {
            "; nginx answered those 504 itself (proxy_read_timeout)".to_string()
        }
        (n, 0) => format!("; {n} of its responses were 504 (nginx gave up waiting: proxy_read_timeout)"),
        (n, f) => format!("; {n} of its responses were 504 (nginx gave up: proxy_read_timeout while waiting for an answer, or proxy_connect_timeout on the {f} connects that failed, whose time is the connect's)"),
    };
    // Tries with no $upstream_status: no answer came before they ended (the client
    // gave up, 499, or the connection was cut); tries nginx ended at its timeout
    // ($upstream_status 504): their time is the timeout's. Either is a floor on the
    // peer's response time, not an answer's (trial 11: a peer cut at
    // proxy_read_timeout 1s was said to answer in p50 1.000 s).
    let head = if floor {
        let parts: Vec<String> = [
            (timed_out > 0).then(|| format!("{timed_out} cut by nginx's timeout, $upstream_status 504")),
            (unanswered > 0).then(|| format!("{unanswered} with no $upstream_status: the client gave up, 499, or the connection was cut")),
        ]
        .into_iter()
        .flatten()
        .collect();
        format!(
            "upstream {} had not answered {not_answered} of its {} tries when they ended ({}): they ended after p50 {:.3} s, p99 {:.3} s, a floor on its response time set by their end, not by an answer (nginx's access log, $upstream_response_time)",
            p.peer, p.tries, parts.join("; "), t.p50_s, t.p99_s
        )
    } else {
        format!(
            "upstream {} answers slowly: p50 {:.3} s, p99 {:.3} s over {} requests (nginx's access log, $upstream_response_time)",
            p.peer, t.p50_s, t.p99_s, p.tries
        )
    };
    out.push(Verdict::new(
        "upstream_slow",
        if critical {
            Severity::Critical
        } else {
            Severity::Warning
        },
        ev,
        &["proxy_pass / upstream", "proxy_read_timeout"],
        format!(
            "{head}{against}{timeouts_clause}. The time is spent in the upstream, not in nginx: look at the upstream itself; raising proxy_read_timeout only lets clients wait longer"
        ),
    ));
}

/// upstream_slow's evidence on the slowest of `peers` (its tries, response times in
/// seconds, 504s), and the other slow peers, at most 5.
fn slow_evidence(
    peers: &[(&UpstreamOutcomeReport, f64)],
) -> BTreeMap<&'static str, serde_json::Value> {
    let p = peers[0].0;
    let t = p.response_time.as_ref().expect("slow peers have a time");
    let mut ev = BTreeMap::new();
    ev.insert("peer", serde_json::json!(p.peer));
    ev.insert("tries", serde_json::json!(p.tries));
    ev.insert("p50_s", round3(t.p50_s));
    ev.insert("p99_s", round3(t.p99_s));
    ev.insert("max_s", round3(t.max_s));
    ev.insert(
        "upstream_504",
        serde_json::json!(p.statuses.get("504").copied().unwrap_or(0)),
    );
    ev.insert(
        "source",
        serde_json::json!("nginx's access log ($upstream_response_time, $upstream_status)"),
    );
    if peers.len() > 1 {
        let others: Vec<String> = peers[1..]
            .iter()
            .take(5)
            .map(|(q, s)| format!("{} p99 {s:.3} s", q.peer))
            .collect();
        ev.insert("other_slow_peers", serde_json::json!(others));
    }
    ev
}

/// The clause of upstream_slow's advice on the `proxy_read_timeout` its p99 is judged
/// against (`share` of it when there is one bound), quoted into `ev` too.
fn against_timeout(
    ev: &mut BTreeMap<&'static str, serde_json::Value>,
    share: Option<f64>,
    timeouts: &[(f64, String)],
    located: bool,
) -> String {
    match (&share, timeouts) {
        (Some(s), [(_, q)]) => {
            ev.insert("proxy_read_timeout", serde_json::json!(q));
            ev.insert("p99_share_of_timeout", round3(*s));
            format!(", {:.0}% of {q}", s * 100.0)
        }
        (_, []) => ", against a proxy_read_timeout not known (configuration not read)".into(),
        (_, ts) => {
            let q: Vec<&str> = ts.iter().map(|(_, q)| q.as_str()).collect();
            ev.insert("proxy_read_timeout", serde_json::json!(q.join("; ")));
            format!(
                ", against proxy_read_timeout set differently per location {} ({})",
                if located {
                    "proxying to it"
                } else {
                    "(which location proxies to this peer could not be told)"
                },
                q.join("; ")
            )
        }
    }
}

/// `clients_5xx` fires from this many 5xx lines and this share of the logged requests.
pub const CLIENTS_5XX_MIN: u64 = 10;
/// ... and this share of the lines that carry a status.
pub const CLIENTS_5XX_MIN_SHARE: f64 = 0.01;
/// Critical from this share.
pub const CLIENTS_5XX_CRITICAL_SHARE: f64 = 0.05;

/// The 5xx the clients got, from nginx's access log, as `clients_5xx` quotes them.
struct ClientFives<'a> {
    /// Lines answered 5xx (`$status`).
    n: u64,
    /// Lines that carry a `$status`.
    logged: u64,
    /// `n` over `logged`.
    share: f64,
    /// 5xx lines by status code.
    statuses: BTreeMap<&'a str, u64>,
    /// Tries the upstream peers answered 5xx (`$upstream_status`).
    from_peers: u64,
    /// The server names with the most 5xx, at most 5.
    servers: Vec<(&'a str, u64)>,
}

impl<'a> ClientFives<'a> {
    fn of(a: &'a AccessLogReport, n: u64, logged: u64) -> ClientFives<'a> {
        let from_peers: u64 = a
            .upstreams
            .iter()
            .flat_map(|p| p.statuses.iter())
            .filter(|(c, _)| c.starts_with('5'))
            .map(|(_, n)| n)
            .sum();
        let mut servers: Vec<(&str, u64)> = a
            .servers
            .iter()
            .map(|s| {
                (
                    s.server.as_str(),
                    s.classes.get("5xx").copied().unwrap_or(0),
                )
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        servers.sort_by_key(|y| std::cmp::Reverse(y.1));
        servers.truncate(5);
        ClientFives {
            n,
            logged,
            share: n as f64 / logged as f64,
            statuses: a.statuses_5xx().collect(),
            from_peers,
            servers,
        }
    }

    fn evidence(&self, a: &AccessLogReport) -> BTreeMap<&'static str, serde_json::Value> {
        let mut ev = BTreeMap::new();
        ev.insert("clients_5xx", serde_json::json!(self.n));
        ev.insert("logged", serde_json::json!(self.logged));
        if self.logged < a.lines {
            ev.insert(
                "lines_without_status",
                serde_json::json!(a.lines - self.logged),
            );
        }
        ev.insert("share", round3(self.share));
        ev.insert("statuses", serde_json::json!(self.statuses));
        ev.insert("share_logged", serde_json::json!(a.share_logged));
        ev.insert(
            "source",
            serde_json::json!("nginx's access log ($status, $upstream_status)"),
        );
        if !a.upstreams.is_empty() {
            ev.insert("upstream_5xx_tries", serde_json::json!(self.from_peers));
        }
        if !self.servers.is_empty() {
            ev.insert("servers", serde_json::json!(self.servers));
        }
        ev
    }

    fn advice(&self, a: &AccessLogReport) -> String {
        let (n, logged, from_peers) = (self.n, self.logged, self.from_peers);
        let statuses: Vec<String> = self
            .statuses
            .iter()
            .map(|(c, n)| format!("{c} {n}"))
            .collect();
        let peers = if a.upstreams.is_empty() {
            String::new()
        } else if from_peers > 0 {
            format!("; upstream peers answered {from_peers} tries with a 5xx ($upstream_status), so at least part of them came from upstreams")
        } else {
            "; no upstream peer answered a 5xx ($upstream_status): nginx made them itself".into()
        };
        let by_server = if self.servers.is_empty() {
            String::new()
        } else {
            let s: Vec<String> = self
                .servers
                .iter()
                .map(|(s, n)| format!("{s} {n}"))
                .collect();
            format!("; by server: {}", s.join(", "))
        };
        format!(
            "{n} of the {logged} requests nginx logged ({:.1}%) were answered 5xx ({}){peers}{by_server}. nginx-probe did not measure why: nginx's error log at the same times has the cause",
            self.share * 100.0,
            statuses.join(", ")
        )
    }
}

/// `clients_5xx`: the access log shows clients answered 5xx (at least
/// [`CLIENTS_5XX_MIN`] and [`CLIENTS_5XX_MIN_SHARE`] of the lines read) that no other
/// rule explained (silent when `requests_refused`, `upstream_errors` or `upstream_slow`
/// fired: they say what the clients got themselves). It names no cause: the statuses,
/// the server names with the most 5xx (when the format logs one), and the 5xx the
/// upstream peers answered (`$upstream_status`, per try) are the evidence; the cause is
/// in nginx's error log or the upstream.
pub fn clients_5xx(inp: &Inputs, out: &mut Vec<Verdict>) {
    let Some(a) = inp.access_log.as_ref().filter(|a| !a.over_counted()) else {
        return;
    };
    // Shares of the lines that carry a status (a format without it logs none).
    let logged = a.with_status();
    if logged == 0 {
        return;
    }
    if out.iter().any(|v| v.id == "requests_refused") {
        return;
    }
    // The upstream's 5xx are explained by its verdict; nginx's own beside them (no
    // upstream tried) are not (trial 9: 100 `return 503` folded into 50 502s of a
    // dead upstream).
    let upstream = ["upstream_errors", "upstream_slow"];
    let explained = out.iter().find(|v| upstream.contains(&v.id.as_str()));
    let n = match (explained, a.no_upstream_5xx) {
        (None, _) => a.status_5xx(),
        (Some(_), Some(k)) => k,
        (Some(_), None) => return,
    };
    let share = n as f64 / logged as f64;
    if n < CLIENTS_5XX_MIN || share < CLIENTS_5XX_MIN_SHARE {
        return;
    }
    let fives = ClientFives::of(a, n, logged);
    let (directives, advice, mut evidence): (&[&str], String, _) = match explained {
        Some(v) => (
            &["error_log"],
            format!("{n} of the {logged} requests nginx logged ({:.1}%) were answered 5xx with no upstream tried ($upstream_addr `-`: nginx's own answers, a `return`, an error page), beside the upstream's 5xx that {} judges. nginx-probe did not measure why: nginx's error log at the same times has the cause", fives.share * 100.0, v.id),
            fives.evidence(a),
        ),
        None if fives.from_peers > 0 => (&["error_log", "proxy_pass / upstream"], fives.advice(a), fives.evidence(a)),
        None => (&["error_log"], fives.advice(a), fives.evidence(a)),
    };
    if let Some(k) = a.no_upstream_5xx {
        evidence.insert("no_upstream_5xx", serde_json::json!(k));
    }
    out.push(Verdict::new(
        "clients_5xx",
        if share >= CLIENTS_5XX_CRITICAL_SHARE {
            Severity::Critical
        } else {
            Severity::Warning
        },
        evidence,
        directives,
        advice,
    ));
}

/// For `upstream_errors`: Some(evidence) when the access log holds every request and
/// none was answered 5xx: the upstream errors nginx logged were retried on another
/// peer and answered (retried requests, not failed ones).
pub fn clients_unharmed(inp: &Inputs) -> Option<serde_json::Value> {
    let a = complete_log(inp)?;
    (a.status_5xx() == 0).then(|| {
        serde_json::json!({
            "clients_5xx": 0,
            "logged": a.lines,
            "share_logged": a.share_logged,
            "retried": a.retried,
            "retried_answered": a.retried_ok,
            "source": "nginx's access log ($status, $upstream_addr)",
        })
    })
}

/// For `upstream_errors`' advice: what the clients got per the access log (`; ...`),
/// None when it is not read or does not hold every request.
pub fn clients_saw(inp: &Inputs) -> Option<String> {
    let a = complete_log(inp)?;
    let fives: Vec<String> = a.statuses_5xx().map(|(c, n)| format!("{c} {n}")).collect();
    let own = match a.no_upstream_5xx {
        Some(k) if k > 0 => format!(
            ", {k} of them with no upstream tried ($upstream_addr `-`: nginx's own, not these errors)"
        ),
        _ => String::new(),
    };
    let got = if fives.is_empty() {
        "none was answered with a 5xx".to_string()
    } else {
        format!(
            "{} were answered 5xx ({}){own}",
            a.status_5xx(),
            fives.join(", ")
        )
    };
    let retried = a
        .retried_said()
        .map(|r| format!("; {r}"))
        .unwrap_or_default();
    Some(format!(
        "; nginx's access log shows what the clients got: of its {} requests, {got}{retried}",
        a.lines
    ))
}

/// What a partial access log shows the clients got, as a floor: its 5xx lines when
/// every line read carries `$status` but the log is not known to hold every request
/// (buffered and not flushed yet, `access_log off` somewhere, nginx's count unknown);
/// None when no line read was a 5xx, a line lacks `$status`, or the log counts more
/// lines than requests.
pub fn clients_saw_at_least(inp: &Inputs) -> Option<String> {
    let a = inp
        .access_log
        .as_ref()
        .filter(|a| a.lines > 0 && a.with_status() == a.lines && !a.over_counted())?;
    let n = a.status_5xx();
    if n == 0 {
        return None;
    }
    let fives: Vec<String> = a.statuses_5xx().map(|(c, n)| format!("{c} {n}")).collect();
    let of = match (a.share_logged, inp.requests) {
        (Some(s), Some(r)) => format!(
            "{} lines, {:.0}% of nginx's {r} requests",
            a.lines,
            s * 100.0
        ),
        _ => format!("{} lines, nginx's request count unknown", a.lines),
    };
    // Trial 11: a proxy to its own server block (access_log off there) made nginx's
    // count hold the hops, and the log's share of it looked like lines missing.
    let hops = if inp.own_hops().is_some() {
        ", or nginx's own hops to its own listener, which its count holds and a server with access_log off does not log"
    } else {
        ""
    };
    Some(format!(
        "; at least {n} were answered 5xx ({}): the access log read holds {of}, so how many more clients got an error is not measured (lines still buffered, or requests not logged there{hops})",
        fives.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::access_log::TimeReport;
    use crate::model::config::ConfigValue;

    fn time(p50: f64, p99: f64) -> TimeReport {
        TimeReport {
            source: "$upstream_response_time".into(),
            count: 100,
            p50_s: p50,
            p90_s: p99,
            p99_s: p99,
            max_s: p99,
            log2_ms: vec![],
        }
    }

    fn inputs(p99: f64, statuses: &[(&str, u64)], timeout: Option<&str>) -> Inputs {
        let peer = UpstreamOutcomeReport {
            peer: "10.0.0.1:80".into(),
            tries: 100,
            statuses: statuses.iter().map(|(c, n)| (c.to_string(), *n)).collect(),
            response_time: Some(time(p99 * 0.9, p99)),
            connect_time: None,
        };
        let config = timeout.map(|t| ConfigReport {
            values: vec![
                ConfigValue {
                    directive: "proxy_read_timeout".into(),
                    scope: "server a location /".into(),
                    value: t.into(),
                    at: "site.conf:7".into(),
                    not_loaded: false,
                    unread_may_set: false,
                },
                // The marker the evaluator writes for each location that proxies.
                ConfigValue {
                    directive: "proxy_set_header Connection".into(),
                    scope: "server a location /".into(),
                    value: "close".into(),
                    at: "default".into(),
                    not_loaded: false,
                    unread_may_set: false,
                },
            ],
            ..Default::default()
        });
        Inputs {
            access_log: Some(AccessLogReport {
                lines: 100,
                upstreams: vec![peer],
                ..Default::default()
            }),
            config,
            ..Default::default()
        }
    }

    #[test]
    fn a_slow_peer_is_named_against_its_timeout() {
        let mut out = Vec::new();
        upstream_slow(&inputs(1.5, &[("200", 100)], Some("60s")), &mut out);
        let v = &out[0];
        assert_eq!(v.id, "upstream_slow");
        assert_eq!(v.severity, Severity::Warning);
        assert_eq!(v.evidence["p99_s"], 1.5);
        assert_eq!(v.evidence["p99_share_of_timeout"], 0.025);
        assert_eq!(
            v.evidence["proxy_read_timeout"],
            "proxy_read_timeout 60s (site.conf:7)"
        );
        assert!(
            v.advice
                .contains("2% of proxy_read_timeout 60s (site.conf:7)"),
            "{}",
            v.advice
        );
        // Near the timeout, or with 504s: critical.
        let mut out = Vec::new();
        upstream_slow(&inputs(4.6, &[("200", 100)], Some("5s")), &mut out);
        assert_eq!(out[0].severity, Severity::Critical);
        let mut out = Vec::new();
        upstream_slow(&inputs(1.2, &[("200", 90), ("504", 10)], None), &mut out);
        assert_eq!(out[0].severity, Severity::Critical);
        assert!(out[0].advice.contains("not known"), "{}", out[0].advice);
        // Fast, or too few requests: nothing.
        let mut out = Vec::new();
        upstream_slow(&inputs(0.2, &[("200", 100)], Some("60s")), &mut out);
        assert!(out.is_empty());
        let mut i = inputs(3.0, &[("200", 10)], Some("60s"));
        i.access_log.as_mut().unwrap().upstreams[0].tries = 10;
        upstream_slow(&i, &mut out);
        assert!(out.is_empty());
    }

    /// Trial 11's F3: a peer cut at `proxy_read_timeout 1s` on 80 of its 100 tries
    /// ($upstream_status 504 at 1.0 s) does not "answer slowly" in 1.0 s: the 80 are
    /// said as not answered, their time a floor set by the timeout.
    #[test]
    fn tries_cut_at_the_read_timeout_are_no_answer_time() {
        let mut out = Vec::new();
        upstream_slow(
            &inputs(1.001, &[("200", 20), ("504", 80)], Some("1s")),
            &mut out,
        );
        let v = &out[0];
        assert!(
            v.advice.starts_with("upstream 10.0.0.1:80 had not answered 80 of its 100 tries when they ended (80 cut by nginx's timeout, $upstream_status 504): they ended after p50 0.901 s, p99 1.001 s, a floor on its response time set by their end, not by an answer"),
            "{}",
            v.advice
        );
        assert!(!v.advice.contains("answers slowly"), "{}", v.advice);
    }

    /// Trial 9: a peer that accepts nothing, its 100 tries 504 at proxy_connect_timeout
    /// 1s (lifecycle: 100 connects failed; or the error log's 100 `timed out ... while
    /// connecting`): not slow, whatever its $upstream_response_time; with 10 of 100
    /// failed, the 504s are put on either timeout. 40 tries the clients gave up on at 1 s
    /// (no $upstream_status): said as unanswered, a floor.
    #[test]
    fn connect_failures_and_unanswered_tries_are_not_called_slow_answers() {
        use crate::model::{
            connections::ConnectionsReport, upstream_lifecycle::PeerLifecycle, NginxErrorsReport,
            PeerErrorsReport,
        };
        let traced = |failed: u64| {
            let mut i = inputs(1.003, &[("504", 100)], Some("60s"));
            i.connections = Some(ConnectionsReport {
                upstream_peers: vec![PeerLifecycle {
                    peer: "10.0.0.1:80".into(),
                    connects: 100,
                    established: 100 - failed,
                    connect_failed: failed,
                    ..Default::default()
                }],
                ..Default::default()
            });
            i
        };
        let mut out = Vec::new();
        upstream_slow(&traced(100), &mut out);
        assert!(out.is_empty(), "{out:?}");
        let mut logged = inputs(1.003, &[("504", 100)], Some("60s"));
        logged.nginx_errors = Some(NginxErrorsReport {
            upstream_peers: vec![PeerErrorsReport {
                peer: "http://10.0.0.1:80".into(),
                lines: 100,
                by_class: [("upstream_connect_timeout".to_string(), 100)].into(),
            }],
            ..Default::default()
        });
        upstream_slow(&logged, &mut out);
        assert!(out.is_empty(), "{out:?}");
        upstream_slow(&traced(10), &mut out);
        assert!(out[0].advice.contains("100 of its responses were 504 (nginx gave up: proxy_read_timeout while waiting for an answer, or proxy_connect_timeout on the 10 connects that failed"), "{}", out[0].advice);
        assert_eq!(out[0].evidence["connects_failed"], 10);
        let mut out = Vec::new();
        upstream_slow(&inputs(1.003, &[], Some("60s")), &mut out);
        assert!(out[0].advice.starts_with("upstream 10.0.0.1:80 had not answered 100 of its 100 tries when they ended (100 with no $upstream_status: the client gave up, 499, or the connection was cut): they ended after p50 0.903 s, p99 1.003 s, a floor"), "{}", out[0].advice);
        assert!(
            !out[0].advice.contains("answers slowly"),
            "{}",
            out[0].advice
        );
    }

    #[test]
    fn clients_outcome_needs_every_request_logged() {
        let mut i = inputs(0.1, &[("200", 100)], None);
        let a = i.access_log.as_mut().unwrap();
        a.statuses = [("200".to_string(), 100)].into();
        a.classes = [("2xx".to_string(), 100)].into();
        a.retried = 30;
        a.retried_ok = 30;
        assert!(clients_unharmed(&i).is_none(), "share logged unknown");
        i.access_log.as_mut().unwrap().share_logged = Some(1.0);
        assert_eq!(clients_unharmed(&i).unwrap()["retried_answered"], 30);
        assert!(clients_saw(&i)
            .unwrap()
            .contains("none was answered with a 5xx; 30 requests retried on another peer (more than one peer in $upstream_addr), 30 of them answered below 500"));
        // Answered within a millisecond: said as measured, never "slow".
        i.access_log.as_mut().unwrap().retried_time = Some(TimeReport {
            source: "$request_time".into(),
            count: 30,
            log2_ms: vec![],
            ..Default::default()
        });
        let saw = clients_saw(&i).unwrap();
        assert!(
            saw.ends_with("30 of them answered below 500; they took under 1 ms at the median, p99 under 1 ms ($request_time, the failed tries included)"),
            "{saw}"
        );
        assert!(!saw.contains("slow"), "{saw}");
        i.access_log
            .as_mut()
            .unwrap()
            .retried_time
            .as_mut()
            .unwrap()
            .p99_s = 1.5;
        assert!(clients_saw(&i).unwrap().contains("p99 1.50 s ("));
        let a = i.access_log.as_mut().unwrap();
        a.lines = 104;
        a.statuses.insert("502".into(), 4);
        a.classes.insert("5xx".into(), 4);
        assert!(clients_unharmed(&i).is_none());
        assert!(clients_saw(&i)
            .unwrap()
            .contains("4 were answered 5xx (502 4)"));
    }

    #[test]
    fn nginx_times_are_seconds() {
        assert_eq!(nginx_seconds("60s"), Some(60.0));
        assert_eq!(nginx_seconds("90"), Some(90.0));
        assert_eq!(nginx_seconds("500ms"), Some(0.5));
        assert_eq!(nginx_seconds("1m"), Some(60.0));
        assert_eq!(nginx_seconds("x"), None);
    }

    #[test]
    fn clients_5xx_gives_the_statuses_and_names_no_cause() {
        let mut i = inputs(0.1, &[("200", 100)], None);
        let a = i.access_log.as_mut().unwrap();
        a.lines = 400;
        a.statuses = [("200".into(), 380), ("500".into(), 20)].into();
        a.classes = [("2xx".into(), 380), ("5xx".into(), 20)].into();
        let mut out = Vec::new();
        clients_5xx(&i, &mut out);
        let v = &out[0];
        assert_eq!(v.id, "clients_5xx");
        assert_eq!(v.severity, Severity::Critical, "5% of the logged");
        assert_eq!(v.evidence["clients_5xx"], 20);
        assert_eq!(v.evidence["upstream_5xx_tries"], 0);
        assert_eq!(v.directives, ["error_log"]);
        assert!(
            v.advice.contains("20 of the 400 requests nginx logged (5.0%) were answered 5xx (500 20); no upstream peer answered a 5xx"),
            "{}",
            v.advice
        );
        // Under 1%, or explained by another rule, or no $status: silent.
        let a = i.access_log.as_mut().unwrap();
        a.lines = 4000;
        a.statuses.insert("200".into(), 3980);
        let mut out = Vec::new();
        clients_5xx(&i, &mut out);
        assert!(out.is_empty());
        let a = i.access_log.as_mut().unwrap();
        a.lines = 400;
        a.statuses.insert("200".into(), 380);
        let mut out = vec![Verdict::new(
            "upstream_errors",
            Severity::Warning,
            BTreeMap::new(),
            &[],
            String::new(),
        )];
        clients_5xx(&i, &mut out);
        assert_eq!(out.len(), 1);
        // Trial 9: beside the upstream's, 20 with no upstream tried ($upstream_addr
        // `-`, a `return 503`): those are not explained, and are the verdict.
        i.access_log.as_mut().unwrap().no_upstream_5xx = Some(20);
        clients_5xx(&i, &mut out);
        assert_eq!(out.len(), 2);
        assert!(out[1].advice.starts_with("20 of the 400 requests nginx logged (5.0%) were answered 5xx with no upstream tried ($upstream_addr `-`: nginx's own answers, a `return`, an error page), beside the upstream's 5xx that upstream_errors judges"), "{}", out[1].advice);
        assert_eq!(out[1].evidence["no_upstream_5xx"], 20);
        i.access_log.as_mut().unwrap().no_upstream_5xx = Some(0);
        out.truncate(1);
        clients_5xx(&i, &mut out);
        assert_eq!(out.len(), 1);
        i.access_log.as_mut().unwrap().no_upstream_5xx = None;
        // No line with a $status: silent.
        i.access_log.as_mut().unwrap().statuses.clear();
        let mut out = Vec::new();
        clients_5xx(&i, &mut out);
        assert!(out.is_empty());
        // Half the lines from a format without $status: shares of the other half.
        let a = i.access_log.as_mut().unwrap();
        a.lines = 800;
        a.statuses = [("200".into(), 380), ("500".into(), 20)].into();
        let mut out = Vec::new();
        clients_5xx(&i, &mut out);
        assert_eq!(out[0].evidence["logged"], 400);
        assert_eq!(out[0].evidence["lines_without_status"], 400);
    }

    #[test]
    fn a_log_with_more_lines_than_requests_feeds_no_rule() {
        // Every request in two files read, or buffered lines from before attach.
        let mut i = inputs(4.6, &[("504", 100)], Some("5s"));
        let a = i.access_log.as_mut().unwrap();
        a.statuses = [("504".into(), 100)].into();
        a.classes = [("5xx".into(), 100)].into();
        a.share_logged = Some(2.0);
        let mut out = Vec::new();
        upstream_slow(&i, &mut out);
        clients_5xx(&i, &mut out);
        assert!(out.is_empty(), "{out:?}");
        assert!(clients_saw(&i).is_none());
        assert!(clients_saw_at_least(&i).is_none());
        i.access_log.as_mut().unwrap().share_logged = Some(1.0);
        upstream_slow(&i, &mut out);
        assert_eq!(out.len(), 1);
    }

    /// The trial's F9: a buffered log (`buffer=32k flush=1s`) holding 280 of 320
    /// requests, all 504: a floor of what the clients got, said as one.
    #[test]
    fn a_partial_log_gives_a_floor_of_the_5xx() {
        let mut i = inputs(1.0, &[("504", 280)], Some("1s"));
        i.requests = Some(320);
        let a = i.access_log.as_mut().unwrap();
        a.lines = 280;
        a.statuses = [("504".into(), 280)].into();
        a.classes = [("5xx".into(), 280)].into();
        a.share_logged = Some(0.875);
        assert!(clients_saw(&i).is_none(), "not every request logged");
        assert_eq!(
            clients_saw_at_least(&i).unwrap(),
            "; at least 280 were answered 5xx (504 280): the access log read holds 280 lines, 88% of nginx's 320 requests, so how many more clients got an error is not measured (lines still buffered, or requests not logged there)"
        );
        let a = i.access_log.as_mut().unwrap();
        a.statuses = [("200".into(), 280)].into();
        a.classes = [("2xx".into(), 280)].into();
        assert!(clients_saw_at_least(&i).is_none(), "no 5xx read");
    }

    /// The newcomer's case: four locations with four timeouts, one peer reached only
    /// through `upstream slowpool` from the location with 1s: judged against 1s alone
    /// (p99 0.6 s is 60% of it), and a peer no location names gets every timeout, said.
    #[test]
    fn a_peer_is_judged_against_the_timeout_of_the_locations_that_proxy_to_it() {
        use crate::model::config::{UpstreamServer, UpstreamValue};
        let cv = |d: &str, scope: &str, v: &str, at: &str| ConfigValue {
            directive: d.into(),
            scope: scope.into(),
            value: v.into(),
            at: at.into(),
            not_loaded: false,
            unread_may_set: false,
        };
        let mut values = Vec::new();
        for (loc, pass, t, at) in [
            ("server a location /", "http://fast", "7s", "a.conf:6"),
            (
                "server b location /slow/",
                "http://slowpool/x",
                "1s",
                "b.conf:8",
            ),
            (
                "server b location /d",
                "http://10.0.0.9:81",
                "45s",
                "n.conf:11",
            ),
        ] {
            values.push(cv("proxy_pass", loc, pass, at));
            values.push(cv("proxy_read_timeout", loc, t, at));
            values.push(cv("proxy_set_header Connection", loc, "close", "default"));
        }
        let cfg = ConfigReport {
            values,
            upstreams: vec![UpstreamValue {
                name: "slowpool".into(),
                servers: vec![UpstreamServer {
                    address: "127.0.0.1:18103".into(),
                    ..Default::default()
                }],
                at: "u.conf:1".into(),
            }],
            ..Default::default()
        };
        let (t, located) = read_timeouts_for(&cfg, "127.0.0.1:18103");
        assert!(located);
        assert_eq!(t, [(1.0, "proxy_read_timeout 1s (b.conf:8)".to_string())]);
        let (t, located) = read_timeouts_for(&cfg, "10.0.0.9:81");
        assert!(located);
        assert_eq!(t[0].0, 45.0);
        let (t, located) = read_timeouts_for(&cfg, "10.9.9.9:80");
        assert!(!located);
        assert_eq!(t.len(), 3);
        let mut i = inputs(0.6, &[("200", 100)], None);
        i.config = Some(cfg);
        if let Some(a) = i.access_log.as_mut() {
            a.upstreams[0].peer = "127.0.0.1:18103".into();
        }
        let mut out = Vec::new();
        upstream_slow(&i, &mut out);
        assert_eq!(out.len(), 1, "fires at 60% of the 1s that applies");
        assert_eq!(
            out[0].evidence["proxy_read_timeout"],
            "proxy_read_timeout 1s (b.conf:8)"
        );
    }
}
