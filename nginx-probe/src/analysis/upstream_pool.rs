//! What `upstream_keepalive_off` advises from the configuration: a pool to add when no
//! `upstream` block has one, or, when one has, that it is configured but unused and
//! what defeats it where nginx proxies (`proxy_http_version`, `proxy_set_header
//! Connection`), with `file:line`; unknown when the configuration was not read.

use std::net::SocketAddr;

use crate::model::config::ConfigReport;

/// Who ended nginx's upstream connections, measured (tracepoint
/// `sock:inet_sock_set_state` on the sockets a worker's `connect()` opened).
#[derive(Clone, Debug, Default)]
pub struct UpstreamCloses {
    /// The upstream closed most of nginx's connections to it first.
    pub upstream_closed_most: bool,
    /// `(ended, closes)`: the connections closed (by either side) within one jiffy of
    /// the upstream's last data, of all the closes; None when no close was counted.
    pub ended_with_response: Option<(u64, u64)>,
    /// Of `ended`, those the upstream closed itself (`closed_by_peer_after_its_data`):
    /// none while nginx closed the others is no response ending its connection but
    /// nginx closing them (its pool full, or the response asking).
    pub peer_closed_after_its_data: u64,
    /// The peers whose connections a pool could have kept in the period (`connect()`'s
    /// sockaddr): nginx's workers established at least one connection to each, and
    /// nginx's error log does not hold, for half or more of them, a line where the peer
    /// failed an established connection (`PEER_FAILED_CLASSES` naming it; trial 16: a
    /// dead peer and one resetting every connection beside a live one were told to add
    /// a pool). None when not known whole (no upstream lifecycle counted, or peers
    /// beyond the table summed as `other peers`).
    pub connected: Option<Vec<SocketAddr>>,
}

impl UpstreamCloses {
    /// Most connections ended within a jiffy of the upstream's last data
    /// ([`ENDED_WITH_RESPONSE_SHARE`]): `(ended, closes)`.
    fn mostly_ended(&self) -> Option<(u64, u64)> {
        self.ended_with_response
            .filter(|&(e, n)| n > 0 && e as f64 >= ENDED_WITH_RESPONSE_SHARE * n as f64)
    }

    /// nginx closed them on the response, the upstream closing none itself: its pool
    /// may be full whenever a connection comes back.
    pub(super) fn nginx_alone_ended(&self) -> bool {
        self.mostly_ended().is_some() && self.peer_closed_after_its_data == 0
    }
}

/// Who ended the upstream connections, as the pool advice weighs it.
pub(super) fn closes_of(inp: &super::inputs::Inputs) -> UpstreamCloses {
    let peer_first = upstream_closes(inp).is_some_and(|(nginx, peer, reset)| peer > nginx + reset);
    let peer_after_data = inp.connections.as_ref().map_or(0, |c| {
        c.upstream_peers
            .iter()
            .map(|p| p.closed_by_peer_after_its_data)
            .sum()
    });
    UpstreamCloses {
        upstream_closed_most: peer_first,
        ended_with_response: ended_with_response(inp),
        peer_closed_after_its_data: peer_after_data,
        connected: inp.connections.as_ref().and_then(|c| {
            c.upstream_peers
                .iter()
                .filter(|p| p.established > 0 && !super::upstream_failures::failed_most(inp, p))
                .map(|p| p.peer.parse::<SocketAddr>().ok())
                .collect()
        }),
    }
}

/// Who closed nginx's upstream connections first, summed over the peers the upstream
/// connection lifecycle counted (tracepoint `sock:inet_sock_set_state`): `(nginx, the
/// upstream, resets)`, connections; `None` when it counted no close (off, or none
/// closed).
pub(super) fn upstream_closes(inp: &super::inputs::Inputs) -> Option<(u64, u64, u64)> {
    let peers = inp
        .connections
        .as_ref()
        .map(|c| c.upstream_peers.as_slice())
        .unwrap_or_default();
    let sum = |f: fn(&crate::model::upstream_lifecycle::PeerLifecycle) -> u64| {
        peers.iter().map(f).sum::<u64>()
    };
    let closes = (
        sum(|p| p.closed_by_nginx),
        sum(|p| p.closed_by_peer),
        sum(|p| p.closed_by_reset),
    );
    (closes.0 + closes.1 + closes.2 > 0).then_some(closes)
}

/// The upstream connections that ended with a response, summed over the peers the
/// upstream connection lifecycle counted: `(ended, closes)`, the closes within one
/// jiffy of the peer's last data (nginx's, not awaiting a response, and the peer's:
/// `closed_by_nginx_after_peer_data` + `closed_by_peer_after_its_data`) and every
/// close of an established connection; None when no close was counted.
pub(super) fn ended_with_response(inp: &super::inputs::Inputs) -> Option<(u64, u64)> {
    let (nginx, peer, reset) = upstream_closes(inp)?;
    let ended = inp
        .connections
        .as_ref()
        .map(|c| {
            c.upstream_peers
                .iter()
                .map(|p| p.closed_by_nginx_after_peer_data + p.closed_by_peer_after_its_data)
                .sum::<u64>()
        })
        .unwrap_or(0);
    Some((ended, nginx + peer + reset))
}

/// Share of the upstream connections closed within a jiffy of the upstream's last data
/// from which, with a pool configured and allowed, the responses end the connections.
pub const ENDED_WITH_RESPONSE_SHARE: f64 = 0.9;

/// The fix `upstream_keepalive_off` advises: [`pool_unused`] when a location proxies
/// or a pool is configured, else [`ADD_POOL`]; without the configuration, both, said
/// unknown.
pub fn pool_advice(cfg: Option<&ConfigReport>, closes: &UpstreamCloses) -> String {
    match cfg {
        Some(cfg) => pool_unused(cfg, closes).unwrap_or_else(|| ADD_POOL.to_string()),
        None => format!("the configuration was not read, so whether the upstream has a pool is unknown; if it has none: {ADD_POOL}; if it has one: {USE_POOL}"),
    }
}

/// The advice when no upstream block has a pool.
pub const ADD_POOL: &str = "reuse them: `keepalive 32;` in the `upstream` block of the peer (a proxy_pass to a bare address has no connection pool: give it one), with `proxy_http_version 1.1;` and `proxy_set_header Connection \"\";` where it is proxied; this saves connections only if the upstream server keeps them alive (an HTTP/1.0 server closes after every response whatever nginx asks), which cannot be seen while nginx asks it to close each one";
/// What a configured pool needs to be used.
pub const USE_POOL: &str = "nginx reuses its pool only with `proxy_http_version 1.1;` and `proxy_set_header Connection \"\";` where it is proxied";
/// What a pool added saves, and when.
const SAVES_IF: &str = "a pool saves connections only if the upstream server keeps them alive (an HTTP/1.0 server closes after every response whatever nginx asks), which cannot be seen while nginx asks it to close each one";

/// One location that proxies (`proxy_pass`), with what its upstream connections can
/// be reused by: its target's pool and its own proxy settings (effective values).
struct Pass<'a> {
    /// `server a location /`.
    scope: &'a str,
    /// The `upstream` block it names (`be`), or None for a target with a variable.
    target: Option<&'a str>,
    /// The block's pool (`upstream be: keepalive 16 (n.conf:3)`); None when the
    /// block keeps none or there is no block (a bare address).
    pool: Option<String>,
    /// Whether an `upstream` block of that name exists.
    block: bool,
    /// What defeats a pool there, each with its place and fix.
    defeats: Vec<String>,
}

/// Every location that proxies, from the configuration read; when some pass to a peer
/// nginx connected to in the period (`closes.connected`), those whose peers are all
/// written as addresses and got no connect are left out: they carried none of them.
fn passes<'a>(cfg: &'a ConfigReport, closes: &UpstreamCloses) -> Vec<Pass<'a>> {
    let all = all_passes(cfg);
    let Some(connected) = closes.connected.as_ref() else {
        return all.into_iter().map(|(p, _)| p).collect();
    };
    let carried = |v: &str| -> Option<bool> {
        let peers = pass_peers(cfg, v)?;
        Some(peers.iter().any(|a| connected.contains(a)))
    };
    let judged: Vec<Option<bool>> = all.iter().map(|(_, v)| carried(v)).collect();
    let some_carried = judged.contains(&Some(true));
    all.into_iter()
        .zip(judged)
        .filter(|(_, c)| !some_carried || *c != Some(false))
        .map(|((p, _), _)| p)
        .collect()
}

/// The peer addresses a `proxy_pass` value reaches: the `server` lines of the
/// `upstream` block it names, or the address itself (port 80, 443 for `https://`,
/// when none is written); `localhost` is 127.0.0.1 and ::1. None when any is
/// written as another host name, a unix socket or with a variable (which peers it
/// reaches is not known without resolving it as nginx did).
fn pass_peers(cfg: &ConfigReport, value: &str) -> Option<Vec<SocketAddr>> {
    let target = super::config_scope::pass_target(value)?;
    let port = if value.trim_start().starts_with("https://") {
        443
    } else {
        80
    };
    let written: Vec<&str> = match cfg.upstreams.iter().find(|u| u.name == target) {
        Some(u) => u.servers.iter().map(|s| s.address.as_str()).collect(),
        None => vec![target],
    };
    let mut out = Vec::new();
    for w in written {
        out.extend(socket_addrs(w, port)?);
    }
    (!out.is_empty()).then_some(out)
}

/// `127.0.0.1:8080`, `[::1]:8080`, `10.0.0.1` (port `default`), `localhost:8080` as
/// socket addresses; None for anything else.
pub(super) fn socket_addrs(written: &str, default: u16) -> Option<Vec<SocketAddr>> {
    if let Ok(a) = written.parse::<SocketAddr>() {
        return Some(vec![a]);
    }
    if let Ok(ip) = written.trim_matches(['[', ']']).parse::<std::net::IpAddr>() {
        return Some(vec![SocketAddr::new(ip, default)]);
    }
    let (host, port) = match written.rsplit_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().ok()?),
        None => (written, default),
    };
    host.eq_ignore_ascii_case("localhost").then(|| {
        vec![
            SocketAddr::from(([127, 0, 0, 1], port)),
            SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port)),
        ]
    })
}

/// Every location that proxies, from the configuration read, with its `proxy_pass`
/// value.
fn all_passes(cfg: &ConfigReport) -> Vec<(Pass<'_>, &str)> {
    cfg.proxied("proxy_pass")
        .map(|v| {
            let target = super::config_scope::pass_target(&v.value);
            let upstream = target.map(|t| format!("upstream {t}"));
            let in_block = |d: &str| {
                cfg.values
                    .iter()
                    .find(|k| k.directive == d && Some(&k.scope) == upstream.as_ref())
            };
            let pass = Pass {
                scope: &v.scope,
                target,
                pool: in_block("keepalive")
                    .filter(|k| !k.is_default())
                    .map(|k| format!("{}: keepalive {}", k.scope, k.quoted())),
                block: cfg
                    .upstreams
                    .iter()
                    .any(|u| Some(u.name.as_str()) == target)
                    || in_block("keepalive").is_some(),
                defeats: defeats_at(cfg, &v.scope),
            };
            (pass, v.value.as_str())
        })
        .collect()
}

/// When a location proxies or an `upstream` block has a pool (`keepalive N`): for each
/// proxying location whose connections cannot be reused, why, with `file:line` and the
/// fix: a pool configured but defeated there (`proxy_http_version` other than 1.1:
/// HTTP/1.0, each response ends the connection; `proxy_set_header Connection` not
/// cleared: `close` by default), or no pool for the upstream it passes to (a block
/// without `keepalive`, a bare address); only the locations whose peers got connects
/// in the period when that is known (`UpstreamCloses::connected` against the
/// addresses written in the configuration: [`passes`]); with more than one left, that
/// which one carried the connections is not measured. When every location can reuse its pool:
/// when most connections ended within a jiffy of the upstream's last data
/// ([`ENDED_WITH_RESPONSE_SHARE`], measured), that its responses end them; when the
/// upstream closed most connections first (measured), that the upstream ends them
/// itself; else that why is unknown. None with neither a proxying location nor a pool.
pub fn pool_unused(cfg: &ConfigReport, closes: &UpstreamCloses) -> Option<String> {
    let passes = passes(cfg, closes);
    let all_pools = pools(cfg);
    if passes.is_empty() {
        // No proxy_pass read (another module's pass, or none): the pools alone.
        return (!all_pools.is_empty()).then(|| allowed(&all_pools.join("; "), closes));
    }
    let (ok, bad): (Vec<&Pass>, Vec<&Pass>) = passes
        .iter()
        .partition(|p| p.pool.is_some() && p.defeats.is_empty());
    if bad.is_empty() {
        let mut pools: Vec<String> = ok.iter().filter_map(|p| p.pool.clone()).collect();
        pools.dedup();
        return Some(allowed(&pools.join("; "), closes));
    }
    let mut parts: Vec<String> = bad.iter().map(|p| why_not_reused(p)).collect();
    if bad.iter().any(|p| p.pool.is_none()) {
        parts.push(SAVES_IF.to_string());
    }
    let mut text = parts.join("; ");
    if passes.len() > 1 {
        let fine: Vec<String> = ok
            .iter()
            .map(|p| format!("{} reuses {}", p.scope, p.pool.as_deref().unwrap_or("")))
            .collect();
        text += &format!(
            " (which of the {} proxying locations carried these connections is not measured{})",
            passes.len(),
            if fine.is_empty() {
                String::new()
            } else {
                format!("; set up for reuse: {}", fine.join(", "))
            }
        );
        // Trial 17: a `keepalive 2` pool under 30 clients carried them all, and only
        // the other location was told what to do.
        let pools: Vec<String> = ok.iter().filter_map(|p| p.pool.clone()).collect();
        if !pools.is_empty() && closes.nginx_alone_ended() {
            let said = allowed(&pools.join("; "), closes);
            text += &format!("; where it is set up for reuse, {said}");
        }
    }
    Some(text)
}

/// Why one location's upstream connections are not reused, with the fix.
fn why_not_reused(p: &Pass) -> String {
    let defeats = p.defeats.join("; ");
    match (&p.pool, p.target) {
        (Some(pool), _) => format!("a pool is configured ({pool}) but unused: {defeats}"),
        (None, None) => format!(
            "{} names its upstream with a variable, so which pool it uses is unknown{}",
            p.scope,
            if defeats.is_empty() {
                String::new()
            } else {
                format!("; {defeats}")
            }
        ),
        (None, Some(t)) => {
            let what = if p.block {
                format!(
                    "upstream {t}, which keeps no pool (no `keepalive`): add `keepalive 32;` to it"
                )
            } else {
                format!("{t}, an address with no `upstream` block and so no pool: give it one with `keepalive 32;`")
            };
            if defeats.is_empty() {
                format!("{} passes to {what}", p.scope)
            } else {
                format!("{} passes to {what}; and {defeats}", p.scope)
            }
        }
    }
}

/// The advice when the pools `pools` are configured and nothing configured defeats
/// them, by what was measured of the closes.
fn allowed(pools: &str, closes: &UpstreamCloses) -> String {
    if let Some((e, n)) = closes.mostly_ended().filter(|_| closes.nginx_alone_ended()) {
        format!("a pool is configured ({pools}) and the proxy settings allow its reuse, yet nginx closed {e} of {n} upstream connections within a jiffy of the upstream's last data and the upstream closed none itself (tracepoint sock:inet_sock_set_state, icsk_ack.lrcvtime): either the pool is full whenever a connection comes back (more upstream connections busy at once in a worker than its `keepalive` keeps: nginx then closes the least recently used idle one; raise it) or the responses ask for the close (`Connection: close`, HTTP/1.0: check the upstream server's keepalive); which one is not measured")
    } else if let Some((e, n)) = closes.mostly_ended() {
        format!("a pool is configured ({pools}) and the proxy settings allow its reuse, yet {e} of {n} upstream connections closed within a jiffy of the upstream's last data (nginx on the response it had just read, or the upstream itself; tracepoint sock:inet_sock_set_state, icsk_ack.lrcvtime): the responses end the connections, and nginx keeps a connection after a whole response unless the response forbids it (HTTP/1.0, `Connection: close`, a body delimited by the close); check the upstream server's keepalive (an HTTP/1.0 server cannot keep one): until it keeps connections alive a pool cannot reuse them, and nginx's settings are not the cause")
    } else if closes.upstream_closed_most {
        format!("a pool is configured ({pools}) and the proxy settings allow its reuse, but the upstream closed most connections first (above): it ends them itself, so nginx has none to keep; what makes it close is not measured: its keepalive turned off, `Connection: close` in its responses, its idle timeout shorter than the gaps between requests on a connection, or a cap on requests per connection (check the upstream server's keepalive settings against these)")
    } else {
        format!("a pool is configured ({pools}) and the proxy settings allow its reuse, yet the connections are not reused: why is unknown (the upstream may close them: its own keepalive timeout or `Connection: close`)")
    }
}

/// Fewest upstream connects per request (exact requests) from which a pool that
/// overflows is said: below `upstream_keepalive_off`'s threshold, each still a TCP
/// handshake and a TIME-WAIT on nginx's side.
pub const POOL_OVERFLOW_MIN_PER_REQUEST: f64 = 0.05;
/// Fewest upstream connects in the period for it.
pub const POOL_OVERFLOW_MIN_CONNECTS: u64 = 100;

/// `upstream_pool_overflow` (warning): `upstream_keepalive_off` did not fire, yet at
/// least [`POOL_OVERFLOW_MIN_CONNECTS`] upstream connects and
/// [`POOL_OVERFLOW_MIN_PER_REQUEST`] per request (exact requests; with nginx's own
/// hops among them, per client request is higher, so the figure is said as a floor:
/// trial 12, a self-proxy's `keepalive 2` pool at 0.20 connects per counted request,
/// 0.40 per client request, had no verdict), every proxying location read passes to an `upstream` block with a pool and
/// nothing configured defeats it, and nginx alone closed its upstream connections on
/// the responses it had just read ([`UpstreamCloses::nginx_alone_ended`]): the pool
/// overflows, or the responses ask for the close; said as measured. Trial 11:
/// `keepalive 2` under 50 clients, 1265 connects for 8480 requests (0.15) and 1263
/// TIME-WAIT sockets, with no verdict.
pub fn upstream_pool_overflow(inp: &super::inputs::Inputs, out: &mut Vec<crate::model::Verdict>) {
    if out.iter().any(|v| v.id == "upstream_keepalive_off") {
        return;
    }
    let Some(requests) = inp.requests.filter(|r| *r > 0) else {
        return;
    };
    let closes = closes_of(inp);
    let (Some(cfg), Some(connected)) = (
        inp.served_config().filter(|_| closes.nginx_alone_ended()),
        closes.connected.as_ref(),
    ) else {
        return;
    };
    // Only the connects to the peers of the locations read that proxy: a
    // memcached_pass, a grpc_pass or another module's peer is not this pool's
    // (review); any peer outside them and nothing is said.
    let reached: Vec<SocketAddr> = all_passes(&cfg)
        .iter()
        .filter_map(|(_, v)| pass_peers(&cfg, v))
        .flatten()
        .collect();
    if connected.is_empty() || connected.iter().any(|a| !reached.contains(a)) {
        return;
    }
    let connects: u64 = inp
        .connections
        .as_ref()
        .map_or(0, |c| c.upstream_peers.iter().map(|p| p.connects).sum());
    let per_request = connects as f64 / requests as f64;
    if connects < POOL_OVERFLOW_MIN_CONNECTS || per_request < POOL_OVERFLOW_MIN_PER_REQUEST {
        return;
    }
    let passes = passes(&cfg, &closes);
    if passes.is_empty()
        || passes
            .iter()
            .any(|p| p.pool.is_none() || !p.defeats.is_empty())
    {
        return;
    }
    let mut pools: Vec<String> = passes.iter().filter_map(|p| p.pool.clone()).collect();
    pools.dedup();
    let mut evidence = std::collections::BTreeMap::new();
    evidence.insert("upstream_connects", serde_json::json!(connects));
    evidence.insert("requests", serde_json::json!(requests));
    evidence.insert(
        "connects_per_request",
        serde_json::json!((per_request * 1000.0).round() / 1000.0),
    );
    evidence.insert("pools", serde_json::json!(pools));
    if let Some((e, n)) = closes.ended_with_response {
        evidence.insert("closed_on_the_response", serde_json::json!(e));
        evidence.insert("upstream_closes", serde_json::json!(n));
    }
    // nginx's request count holds its own hops too (client requests are fewer): per
    // client request the connects are more, the figure a floor.
    let floor = match inp.own_hops() {
        Some(why) => {
            evidence.insert("requests_include_own_hops", serde_json::json!(why));
            format!(" counted by nginx, its own hops among them ({why}), so per client request more: a floor")
        }
        None => String::new(),
    };
    out.push(crate::model::Verdict::new(
        "upstream_pool_overflow",
        crate::model::Severity::Warning,
        evidence,
        &["keepalive (upstream block)"],
        format!(
            "{connects} upstream connections opened for {requests} requests ({per_request:.2} per request{floor}; tracepoint sock:inet_sock_set_state on the peers of the locations that proxy), each a TCP handshake, and a socket in TIME-WAIT on nginx's side for each one nginx closed first; {}",
            allowed(&pools.join("; "), &closes)
        ),
    ));
}

/// The directives `upstream_keepalive_off` names: of the pool (`keepalive` in the
/// `upstream` block), `proxy_http_version 1.1` and `proxy_set_header Connection ""`,
/// those a proxying location lacks (the pool: when one passes to an upstream without
/// one, or, with no proxying location read, when no block has one; or its size, when
/// nginx alone closed the connections on their responses,
/// [`UpstreamCloses::nginx_alone_ended`]); all three when the configuration was not
/// read. None left: nginx's own settings are not why
/// connections are not reused.
pub fn pool_directives(cfg: Option<&ConfigReport>, closes: &UpstreamCloses) -> Vec<&'static str> {
    let Some(c) = cfg else {
        return vec![KEEPALIVE, HTTP_1_1, CONNECTION];
    };
    let passes = passes(c, closes);
    let mut out = Vec::new();
    let no_pool = match passes.is_empty() {
        true => pools(c).is_empty(),
        false => passes
            .iter()
            .any(|p| p.pool.is_none() && p.target.is_some()),
    };
    // A pool full whenever a connection comes back is sized by `keepalive` too.
    if no_pool || closes.nginx_alone_ended() {
        out.push(KEEPALIVE);
    }
    // Where the locations that may have carried the connections set them (all
    // proxying ones when none is known).
    let scopes: Vec<&str> = passes.iter().map(|p| p.scope).collect();
    let at = |v: &crate::model::config::ConfigValue| {
        passes.is_empty() || scopes.contains(&v.scope.as_str())
    };
    if c.proxied("proxy_http_version")
        .any(|v| at(v) && v.value.trim() != "1.1")
    {
        out.push(HTTP_1_1);
    }
    if c.proxied("proxy_set_header Connection")
        .any(|v| at(v) && !v.value.is_empty())
    {
        out.push(CONNECTION);
    }
    out
}

/// The pool directive as verdicts name it.
const KEEPALIVE: &str = "keepalive (upstream block)";
/// HTTP/1.1 to the upstream.
const HTTP_1_1: &str = "proxy_http_version 1.1";
/// The Connection header cleared.
const CONNECTION: &str = "proxy_set_header Connection \"\"";

/// The pools configured: `upstream NAME: keepalive N`, each.
fn pools(cfg: &ConfigReport) -> Vec<String> {
    cfg.values
        .iter()
        .filter(|v| {
            v.directive == "keepalive" && v.scope.starts_with("upstream ") && !v.is_default()
        })
        .map(|v| format!("{}: keepalive {}", v.scope, v.quoted()))
        .collect()
}

/// What defeats a pool in the proxying location `scope`: `proxy_http_version` other
/// than 1.1, `proxy_set_header Connection` not cleared; each with its place and fix.
fn defeats_at(cfg: &ConfigReport, scope: &str) -> Vec<String> {
    let at = |d: &'static str| cfg.proxied(d).filter(move |v| v.scope == scope);
    let mut defeats: Vec<String> = at("proxy_http_version")
        .filter(|v| v.value.trim() != "1.1")
        .map(|v| format!("{}: proxy_http_version {} (nginx speaks HTTP/1.0 to the upstream, which ends the connection after each response; set `proxy_http_version 1.1;`)", v.scope, v.quoted()))
        .collect();
    defeats.extend(
        at("proxy_set_header Connection")
            .filter(|v| !v.value.is_empty())
            .map(|v| format!("{}: proxy_set_header Connection {} (not cleared: nginx asks the upstream to close unless the value is empty; set `proxy_set_header Connection \"\";`)", v.scope, v.quoted())),
    );
    defeats
}

#[cfg(test)]
mod tests {
    use crate::analysis::{
        fd_upstream::upstream_keepalive_off,
        inputs::{w, Inputs},
    };

    /// A configuration proxying `location /` of server a to `upstream be { keepalive
    /// 16; }` with `proxy_http_version` and `proxy_set_header Connection` as given
    /// (value, place).
    fn cfg(version: (&str, &str), conn: (&str, &str)) -> crate::model::config::ConfigReport {
        use crate::model::config::{ConfigReport, ConfigValue};
        let loc = "server a location /";
        ConfigReport {
            values: vec![
                ConfigValue::of("proxy_pass", loc, "http://be", "/e/n.conf:9"),
                ConfigValue::of("proxy_http_version", loc, version.0, version.1),
                ConfigValue::of("proxy_set_header Connection", loc, conn.0, conn.1),
                ConfigValue::of("keepalive", "upstream be", "16", "/e/n.conf:3"),
            ],
            ..Default::default()
        }
    }

    /// The trial on nginx 1.22: `upstream be { server ...; keepalive 16; }` proxied
    /// without `proxy_http_version` (1.0 by default) nor `Connection ""`: one connect
    /// per request. The advice says the pool is configured but unused and names both
    /// settings with their place, never "add keepalive", and says the side holding
    /// TIME-WAIT is not measured.
    #[test]
    fn a_configured_pool_unused_names_what_defeats_it_not_add_keepalive() {
        use crate::model::config::ConfigValue;
        let mut inp = Inputs {
            config: Some(cfg(("1.0", "default"), ("close", "default"))),
            ..fresh_each_request()
        };
        let advice = |inp: &Inputs| {
            let mut out = Vec::new();
            upstream_keepalive_off(inp, &mut out);
            assert_eq!(out.len(), 1, "{out:?}");
            out.remove(0).advice
        };
        let a = advice(&inp);
        assert!(!a.contains("`keepalive 32;`"), "{a}");
        assert!(a.contains("a pool is configured (upstream be: keepalive 16 (/e/n.conf:3)) but unused: server a location /: proxy_http_version 1.0 (default) (nginx speaks HTTP/1.0"), "{a}");
        assert!(
            a.contains(
                "server a location /: proxy_set_header Connection close (default) (not cleared"
            ),
            "{a}"
        );
        assert!(a.contains("which one is not measured"), "{a}");
        assert!(!a.contains("TIME_WAIT on nginx's side"), "{a}");
        // HTTP/1.1 and the header cleared: nothing configured defeats it: unknown.
        inp.config = Some(cfg(("1.1", "/e/n.conf:10"), ("", "/e/n.conf:11")));
        let a = advice(&inp);
        assert!(
            a.contains("yet the connections are not reused: why is unknown"),
            "{a}"
        );
        let directives = |inp: &Inputs| {
            let mut out = Vec::new();
            upstream_keepalive_off(inp, &mut out);
            out.remove(0).directives
        };
        assert!(
            directives(&inp).is_empty(),
            "the pool is set up: nothing to change"
        );
        use crate::analysis::upstream_pool::{pool_unused, UpstreamCloses};
        // The upstream closed most of them first (measured): it ends them itself.
        let most = UpstreamCloses {
            upstream_closed_most: true,
            ended_with_response: None,
            peer_closed_after_its_data: 0,
            connected: None,
        };
        let c = pool_unused(inp.config.as_ref().unwrap(), &most);
        assert!(c.unwrap().ends_with("but the upstream closed most connections first (above): it ends them itself, so nginx has none to keep; what makes it close is not measured: its keepalive turned off, `Connection: close` in its responses, its idle timeout shorter than the gaps between requests on a connection, or a cap on requests per connection (check the upstream server's keepalive settings against these)"));
        assert!(!a.contains("`keepalive 32;`"), "{a}");
        // No pool: add one.
        let mut c = cfg(("1.1", "/e/n.conf:10"), ("", "/e/n.conf:11"));
        c.values[3] = ConfigValue::of(
            "keepalive",
            "upstream be",
            "unset (no idle upstream connections kept)",
            "default",
        );
        inp.config = Some(c);
        assert!(advice(&inp).contains("server a location / passes to upstream be, which keeps no pool (no `keepalive`): add `keepalive 32;` to it"), "{}", advice(&inp));
        assert!(advice(&inp)
            .contains("a pool saves connections only if the upstream server keeps them alive"));
        assert_eq!(
            directives(&inp),
            ["keepalive (upstream block)"],
            "no pool, the proxy settings set: the pool alone is named (trial 7)"
        );
        // Not read: both, said unknown.
        inp.config = None;
        let a = advice(&inp);
        assert!(
            a.contains("whether the upstream has a pool is unknown"),
            "{a}"
        );
    }

    /// Trial 6's HTTP/1.0 peer (python's http.server) with the pool set up (HTTP/1.1,
    /// `Connection ""`): nginx closed 8131 connections on the response it had read,
    /// the peer 889 right after its data: the responses end them, said so; under 90%
    /// of the closes, why stays unknown; a setting that defeats the pool is named
    /// whatever the closes.
    #[test]
    fn an_upstream_whose_responses_end_its_connections_is_named_not_nginx() {
        use crate::analysis::upstream_pool::{pool_unused, UpstreamCloses};
        let allowed = cfg(("1.1", "/e/n.conf:10"), ("", "/e/n.conf:11"));
        // Trial 6's HTTP/1.0 peer (python's http.server) with the pool set up: nginx
        // closed 8144 connections on the response it had read, the peer 889 right after
        // its data: the responses end them.
        let ended = UpstreamCloses {
            upstream_closed_most: false,
            ended_with_response: Some((9020, 9033)),
            peer_closed_after_its_data: 889,
            connected: None,
        };
        let c = pool_unused(&allowed, &ended).unwrap();
        assert!(c.contains("yet 9020 of 9033 upstream connections closed within a jiffy of the upstream's last data"), "{c}");
        assert!(c.ends_with("until it keeps connections alive a pool cannot reuse them, and nginx's settings are not the cause"), "{c}");
        let fewer = UpstreamCloses {
            ended_with_response: Some((8000, 9033)),
            ..ended.clone()
        };
        let c = pool_unused(&allowed, &fewer).unwrap();
        assert!(c.contains("why is unknown"), "under 90%: {c}");
        // Trial 8: nginx alone closed them on the responses, the upstream none itself
        // (a pool of 16 under 20 connections busy at once): the pool may be full, or
        // the responses ask; `keepalive` named.
        let alone = UpstreamCloses {
            ended_with_response: Some((735, 738)),
            peer_closed_after_its_data: 0,
            ..ended.clone()
        };
        let c = pool_unused(&allowed, &alone).unwrap();
        assert!(c.contains("yet nginx closed 735 of 738 upstream connections within a jiffy of the upstream's last data and the upstream closed none itself"), "{c}");
        assert!(
            c.contains("either the pool is full whenever a connection comes back"),
            "{c}"
        );
        assert!(!c.contains("nginx's settings are not the cause"), "{c}");
        use crate::analysis::upstream_pool::pool_directives;
        assert_eq!(
            pool_directives(Some(&allowed), &alone),
            ["keepalive (upstream block)"]
        );
        assert!(pool_directives(Some(&allowed), &ended).is_empty());
        // Defeated by nginx's settings: named, whatever the closes.
        let c = pool_unused(&cfg(("1.0", "default"), ("", "/e/n.conf:11")), &ended).unwrap();
        assert!(
            c.contains("but unused: server a location /: proxy_http_version 1.0"),
            "{c}"
        );
    }

    /// Trial 8: two name-based servers on one port, c proxying to `upstream pool {
    /// keepalive 16; }` set up for reuse, d to `upstream nopool` (no keepalive) at the
    /// defaults; the load went to d. The advice names d's missing pool (never "c's pool
    /// is unused"), says c's is set up and that which location carried the connections
    /// is not measured; with d's proxy settings fixed and every connection ended with a
    /// response, the missing pool is still named, never "nginx's settings are not the
    /// cause".
    #[test]
    fn each_proxying_location_is_judged_with_its_own_upstream_s_pool() {
        use crate::analysis::upstream_pool::{pool_directives, pool_unused, UpstreamCloses};
        use crate::model::config::{ConfigReport, ConfigValue};
        let (c, d) = ("server c location /", "server d location /");
        let mut cfg = ConfigReport {
            values: vec![
                ConfigValue::of("proxy_pass", c, "http://pool", "/n.conf:11"),
                ConfigValue::of("proxy_http_version", c, "1.1", "/n.conf:11"),
                ConfigValue::of("proxy_set_header Connection", c, "", "/n.conf:11"),
                ConfigValue::of("proxy_pass", d, "http://nopool", "/n.conf:12"),
                ConfigValue::of("proxy_http_version", d, "1.0", "default"),
                ConfigValue::of("proxy_set_header Connection", d, "close", "default"),
                ConfigValue::of("keepalive", "upstream pool", "16", "/n.conf:7"),
                ConfigValue::of(
                    "keepalive",
                    "upstream nopool",
                    "unset (no idle upstream connections kept)",
                    "default",
                ),
            ],
            ..Default::default()
        };
        let ended = UpstreamCloses {
            upstream_closed_most: false,
            ended_with_response: Some((80648, 80648)),
            peer_closed_after_its_data: 0,
            connected: None,
        };
        let a = pool_unused(&cfg, &ended).unwrap();
        assert!(a.starts_with("server d location / passes to upstream nopool, which keeps no pool (no `keepalive`): add `keepalive 32;` to it; and server d location /: proxy_http_version 1.0 (default)"), "{a}");
        assert!(
            a.contains("server d location /: proxy_set_header Connection close (default)"),
            "{a}"
        );
        assert!(a.contains("(which of the 2 proxying locations carried these connections is not measured; set up for reuse: server c location / reuses upstream pool: keepalive 16 (/n.conf:7)); where it is set up for reuse, a pool is configured (upstream pool: keepalive 16 (/n.conf:7)) and the proxy settings allow its reuse, yet nginx closed 80648 of 80648"), "{a}");
        assert!(!a.contains("but unused"), "{a}");
        assert_eq!(
            pool_directives(Some(&cfg), &ended),
            [
                "keepalive (upstream block)",
                "proxy_http_version 1.1",
                "proxy_set_header Connection \"\""
            ]
        );
        // d's proxy settings fixed: its missing pool is still the cause.
        cfg.values[4] = ConfigValue::of("proxy_http_version", d, "1.1", "/n.conf:12");
        cfg.values[5] = ConfigValue::of("proxy_set_header Connection", d, "", "/n.conf:12");
        let a = pool_unused(&cfg, &ended).unwrap();
        assert!(
            a.starts_with("server d location / passes to upstream nopool, which keeps no pool"),
            "{a}"
        );
        assert!(!a.contains("nginx's settings are not the cause"), "{a}");
        assert_eq!(
            pool_directives(Some(&cfg), &ended),
            ["keepalive (upstream block)"]
        );
    }

    /// Trial 9: /a passes to `upstream poolA` (127.0.0.1:19501, keepalive 16, set up
    /// for reuse), /b to `upstream nopool` (127.0.0.1:19502), /c to the bare address
    /// 127.0.0.1:19503; only /b's peer got connects. The advice is /b's alone: no word
    /// of /c's missing pool nor of /a's reuse, and no "which location is not measured";
    /// with a peer written as a host name, which locations it reaches is unknown, so
    /// all are kept.
    #[test]
    fn only_the_locations_whose_peers_got_connects_are_advised() {
        use crate::analysis::upstream_pool::{pool_directives, pool_unused, UpstreamCloses};
        use crate::model::config::{ConfigReport, ConfigValue, UpstreamServer, UpstreamValue};
        let (a, b, c) = (
            "server s location /a",
            "server s location /b",
            "server s location /c",
        );
        let upstream = |name: &str, address: &str| UpstreamValue {
            name: name.into(),
            servers: vec![UpstreamServer {
                address: address.into(),
                ..Default::default()
            }],
            at: "/n.conf:1".into(),
        };
        let mut cfg = ConfigReport {
            values: vec![
                ConfigValue::of("proxy_pass", a, "http://poolA", "/n.conf:11"),
                ConfigValue::of("proxy_http_version", a, "1.1", "/n.conf:11"),
                ConfigValue::of("proxy_set_header Connection", a, "", "/n.conf:11"),
                ConfigValue::of("proxy_pass", b, "http://nopool", "/n.conf:12"),
                ConfigValue::of("proxy_http_version", b, "1.0", "default"),
                ConfigValue::of("proxy_set_header Connection", b, "close", "default"),
                ConfigValue::of("proxy_pass", c, "http://127.0.0.1:19503", "/n.conf:13"),
                ConfigValue::of("proxy_http_version", c, "1.1", "/n.conf:13"),
                ConfigValue::of("proxy_set_header Connection", c, "close", "default"),
                ConfigValue::of("keepalive", "upstream poolA", "16", "/n.conf:7"),
            ],
            upstreams: vec![
                upstream("poolA", "127.0.0.1:19501"),
                upstream("nopool", "127.0.0.1:19502"),
            ],
            ..Default::default()
        };
        let only_b = UpstreamCloses {
            connected: Some(vec!["127.0.0.1:19502".parse().unwrap()]),
            ..Default::default()
        };
        let advice = pool_unused(&cfg, &only_b).unwrap();
        assert!(
            advice
                .starts_with("server s location /b passes to upstream nopool, which keeps no pool"),
            "{advice}"
        );
        for not in ["location /c", "location /a", "which of the"] {
            assert!(!advice.contains(not), "{not}: {advice}");
        }
        // /c alone: its bare address, and /c's settings only (1.1 there).
        let only_c = UpstreamCloses {
            connected: Some(vec!["127.0.0.1:19503".parse().unwrap()]),
            ..Default::default()
        };
        let advice = pool_unused(&cfg, &only_c).unwrap();
        assert!(advice.starts_with("server s location /c passes to 127.0.0.1:19503, an address with no `upstream` block"), "{advice}");
        assert_eq!(
            pool_directives(Some(&cfg), &only_c),
            [
                "keepalive (upstream block)",
                "proxy_set_header Connection \"\""
            ]
        );
        // nopool's server written as a host name: /b may have carried them too.
        cfg.upstreams[1].servers[0].address = "backend.internal:8080".into();
        let advice = pool_unused(&cfg, &only_c).unwrap();
        assert!(advice.contains("location /b"), "{advice}");
        assert!(!advice.contains("location /a"), "{advice}");
        assert!(
            advice.contains("which of the 2 proxying locations"),
            "{advice}"
        );
    }

    /// 1000 requests over 1000 fresh upstream connections, all established.
    fn fresh_each_request() -> Inputs {
        let mut a = w(1, 1000, 1000);
        a.upstream_connects = 1000;
        a.upstream_established = 1000;
        Inputs {
            workers: vec![a],
            requests: Some(1000),
            ..Inputs::default()
        }
    }

    /// Trial 9: 1000 connects to a unix-socket upstream, none of them TCP per the
    /// lifecycle: said as such, with no word of TIME-WAIT nor local ports; with the
    /// TCP connects counted, the TIME-WAIT sentence as before.
    #[test]
    fn a_unix_socket_upstream_is_not_told_of_time_wait() {
        let mut inp = Inputs {
            connections: Some(crate::model::connections::ConnectionsReport::default()),
            ..fresh_each_request()
        };
        let mut out = Vec::new();
        upstream_keepalive_off(&inp, &mut out);
        let advice = &out[0].advice;
        assert!(
            advice.contains("most of them not TCP (0 of the 1000 connections established were TCP"),
            "{advice}"
        );
        assert!(!advice.contains("TIME-WAIT on the side"), "{advice}");
        if let Some(c) = inp.connections.as_mut() {
            c.upstream_peers = vec![crate::model::upstream_lifecycle::PeerLifecycle {
                peer: "127.0.0.1:8080".into(),
                connects: 1000,
                established: 1000,
                closed_by_nginx: 1000,
                ..Default::default()
            }];
        }
        let mut out = Vec::new();
        upstream_keepalive_off(&inp, &mut out);
        assert!(
            out[0]
                .advice
                .contains("TIME-WAIT on the side that closed first"),
            "{}",
            out[0].advice
        );
        assert!(!out[0].advice.contains("not TCP"), "{}", out[0].advice);
    }

    /// `upstream be` with a server at 127.0.0.1:19541 added to `k`.
    fn with_block(mut k: crate::model::config::ConfigReport) -> crate::model::config::ConfigReport {
        use crate::model::config::{UpstreamServer, UpstreamValue};
        k.upstreams.push(UpstreamValue {
            name: "be".into(),
            servers: vec![UpstreamServer {
                address: "127.0.0.1:19541".into(),
                ..Default::default()
            }],
            at: "/e/n.conf:2".into(),
        });
        k
    }

    /// Trial 11's counts: `keepalive 2` under 50 clients, set up for reuse: 1265
    /// connects for 8480 requests, nginx closing 1237 of 1261 on the response, the
    /// upstream none.
    fn trial11() -> Inputs {
        use crate::model::{connections::ConnectionsReport, upstream_lifecycle::PeerLifecycle};
        let mut a = w(1, 1000, 8480);
        a.upstream_connects = 1265;
        a.upstream_established = 1265;
        let mut c = ConnectionsReport::default();
        c.upstream_peers.push(PeerLifecycle {
            peer: "127.0.0.1:19541".into(),
            connects: 1265,
            established: 1265,
            closed_by_nginx: 1261,
            closed_by_nginx_after_peer_data: 1237,
            ..Default::default()
        });
        Inputs {
            workers: vec![a],
            requests: Some(8480),
            connections: Some(c),
            config: Some(with_block(cfg(
                ("1.1", "/e/n.conf:10"),
                ("", "/e/n.conf:11"),
            ))),
            ..Inputs::default()
        }
    }

    /// `upstream_keepalive_off` then `upstream_pool_overflow`, as `judge` runs them.
    fn run_pool(inp: &Inputs) -> Vec<crate::model::Verdict> {
        let mut out = Vec::new();
        upstream_keepalive_off(inp, &mut out);
        crate::analysis::upstream_pool::upstream_pool_overflow(inp, &mut out);
        out
    }

    /// Trial 12: the peer is nginx's own listener (a self-proxy): nginx's count holds
    /// both hops, per client request is more: still said, as a floor, once.
    #[test]
    fn a_self_proxy_s_pool_overflow_is_said_as_a_floor() {
        let mut hop = trial11();
        hop.config
            .as_mut()
            .unwrap()
            .listens
            .push(crate::model::config::ListenValue {
                scope: "server b".into(),
                address: "127.0.0.1:19541".into(),
                at: "/e/n.conf:20".into(),
                ..Default::default()
            });
        let mut out = run_pool(&hop);
        crate::analysis::own_hops::mark_own_hops(&hop, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(out[0].advice.starts_with("1265 upstream connections opened for 8480 requests (0.15 per request counted by nginx, its own hops among them (nginx proxies to its own listener 127.0.0.1:19541"), "{}", out[0].advice);
        assert!(
            out[0]
                .advice
                .contains("so per client request more: a floor; tracepoint"),
            "{}",
            out[0].advice
        );
        assert_eq!(
            out[0].advice.matches("own hops").count(),
            1,
            "{}",
            out[0].advice
        );
        assert!(out[0].evidence.contains_key("requests_include_own_hops"));
    }

    /// Trial 11: `keepalive 2` under 50 clients, set up for reuse: 1265 connects for
    /// 8480 requests, nginx closing 1237 of 1261 on the response, the upstream none.
    #[test]
    fn a_pool_that_overflows_below_one_connect_per_request_is_said() {
        use crate::model::upstream_lifecycle::PeerLifecycle;
        let mut inp = trial11();
        let run = run_pool;
        let v = run(&inp);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].id, "upstream_pool_overflow");
        assert!(v[0].advice.starts_with("1265 upstream connections opened for 8480 requests (0.15 per request; tracepoint sock:inet_sock_set_state on the peers of the locations that proxy), each a TCP handshake, and a socket in TIME-WAIT on nginx's side for each one nginx closed first; a pool is configured (upstream be: keepalive 16 (/e/n.conf:3)) and the proxy settings allow its reuse, yet nginx closed 1237 of 1261"), "{}", v[0].advice);
        // Connects to a peer no proxy_pass reaches (a memcached_pass): not this pool's.
        let other = inp.connections.as_ref().unwrap().upstream_peers[0].clone();
        inp.connections
            .as_mut()
            .unwrap()
            .upstream_peers
            .push(PeerLifecycle {
                peer: "127.0.0.1:11211".into(),
                ..other
            });
        assert!(run(&inp).is_empty());
        inp.connections.as_mut().unwrap().upstream_peers.pop();
        // The upstream closing some itself right after its data: its responses may end
        // them, nothing said here.
        inp.connections.as_mut().unwrap().upstream_peers[0].closed_by_peer_after_its_data = 5;
        assert!(run(&inp).is_empty());
        // A pool defeated by the settings is upstream_keepalive_off's to say, at 0.5.
        inp.connections.as_mut().unwrap().upstream_peers[0].closed_by_peer_after_its_data = 0;
        inp.config = Some(with_block(cfg(("1.0", "default"), ("", "/e/n.conf:11"))));
        assert!(run(&inp).is_empty());
    }
}
