//! The part of nginx's configuration that carried the period's traffic: advice quotes
//! only the settings of the servers whose listening ports had client connections in
//! the period (the report's `connections`, tracepoint `sock:inet_sock_set_state`) and
//! of the upstream blocks their locations pass to. One nginx serves many servers;
//! a setting of a server that got no connection is not a cause of what was measured
//! (newcomer trial 7: `keepalive_timeout 0` of an idle server was blamed for another
//! server's closes, and an idle location's proxy settings for a pool it never used).

use std::collections::BTreeSet;

use crate::model::{config::ConfigReport, config_tree::PASSES, connections::ConnectionsReport};

/// `cfg` with the values of the servers that had no client connection in the period
/// left out (their locations' too), and those of the upstream blocks only such
/// locations pass to. Everything is kept where that is not known: no `connections`
/// (the lifecycle not traced) or no port with connections, a server whose listening
/// ports are not all plain TCP ports (a unix socket, QUIC: their traffic is not in
/// the per-port counts), ports not counted (beyond 16), an upstream no location names (a `proxy_pass` with a
/// variable). `http`, `main`, `events` values are always kept.
pub fn served(cfg: &ConfigReport, conns: Option<&ConnectionsReport>) -> ConfigReport {
    let ports: BTreeSet<u16> = conns
        .map(|c| {
            c.ports
                .iter()
                .filter(|p| {
                    p.established + p.closed_by_nginx + p.closed_by_client + p.closed_by_reset > 0
                })
                .map(|p| p.port)
                .collect()
        })
        .unwrap_or_default();
    // Ports beyond the first 16 are not counted: their servers' traffic is unknown.
    if ports.is_empty() || conns.is_some_and(|c| c.ports_not_counted > 0) {
        return cfg.clone();
    }
    let server_served = |scope: &str| server_served(cfg, &ports, server_of(scope));
    // Upstreams named by a pass in a served location, and by any location at all.
    let mut named_served = BTreeSet::new();
    let mut named = BTreeSet::new();
    for v in cfg
        .values
        .iter()
        .filter(|v| PASSES.contains(&v.directive.as_str()))
    {
        let Some(target) = pass_target(&v.value) else {
            continue;
        };
        if server_served(&v.scope) {
            named_served.insert(target.to_string());
        }
        named.insert(target.to_string());
    }
    let keep = |scope: &str| match scope.strip_prefix("upstream ") {
        Some(name) => named_served.contains(name) || !named.contains(name),
        None if scope.starts_with("server ") => server_served(scope),
        None => true,
    };
    let mut out = cfg.clone();
    out.values.retain(|v| keep(&v.scope));
    out.listens.retain(|l| keep(&l.scope));
    out.upstreams
        .retain(|u| keep(&format!("upstream {}", u.name)));
    out
}

/// The server scope (`server NAME`) of a server or location scope.
fn server_of(scope: &str) -> &str {
    scope.split(" location ").next().unwrap_or(scope)
}

/// Whether the server `scope` had client connections in the period: one of its
/// listening ports is among `ports`, or its ports are not all known plain TCP ports
/// (then kept: unknown).
fn server_served(cfg: &ConfigReport, ports: &BTreeSet<u16>, scope: &str) -> bool {
    if !scope.starts_with("server ") {
        return true;
    }
    let listens: Vec<_> = cfg.listens.iter().filter(|l| l.scope == scope).collect();
    let known: Vec<u16> = listens
        .iter()
        .filter(|l| !l.quic)
        .filter_map(|l| crate::model::listen::listen_port(&l.address))
        .collect();
    known.len() < listens.len() || listens.is_empty() || known.iter().any(|p| ports.contains(p))
}

/// The upstream name a pass's target names (`http://be/x` -> `be`, `be:9000` for
/// fastcgi -> `be:9000`); None for a target with a variable.
pub(super) fn pass_target(value: &str) -> Option<&str> {
    let v = value.split_whitespace().next()?;
    if v.contains('$') {
        return None;
    }
    let rest = v.split_once("://").map_or(v, |(_, r)| r);
    rest.split('/').next().filter(|h| !h.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        config::{ConfigValue, ListenValue},
        connections::PortLifecycle,
    };

    /// Trial 7: two servers, 19540 with `keepalive_timeout 0` and no traffic, 19541
    /// with the clients; two upstreams, each passed to by one of them.
    #[test]
    fn settings_of_servers_without_connections_are_left_out() {
        let listen = |scope: &str, address: &str| ListenValue {
            scope: scope.into(),
            address: address.into(),
            ..Default::default()
        };
        let cfg = ConfigReport {
            values: vec![
                ConfigValue::of("keepalive_timeout", "http", "75s", "default"),
                ConfigValue::of("keepalive_timeout", "server a", "0", "/n.conf:5"),
                ConfigValue::of(
                    "proxy_pass",
                    "server a location /",
                    "http://idle/",
                    "/n.conf:6",
                ),
                ConfigValue::of(
                    "proxy_pass",
                    "server b location /",
                    "http://busy",
                    "/n.conf:9",
                ),
                ConfigValue::of("keepalive", "upstream idle", "16", "/n.conf:1"),
                ConfigValue::of("keepalive", "upstream busy", "16", "/n.conf:2"),
                ConfigValue::of("keepalive", "upstream dynamic", "16", "/n.conf:3"),
            ],
            listens: vec![
                listen("server a", "127.0.0.1:19540"),
                listen("server b", "19541"),
            ],
            ..Default::default()
        };
        let conns = |port: u16| ConnectionsReport {
            ports: vec![PortLifecycle {
                port,
                established: 400,
                closed_by_client: 400,
                ..Default::default()
            }],
            ..Default::default()
        };
        let s = served(&cfg, Some(&conns(19541)));
        let scopes: Vec<&str> = s.values.iter().map(|v| v.scope.as_str()).collect();
        assert_eq!(
            scopes,
            [
                "http",
                "server b location /",
                "upstream busy",
                "upstream dynamic"
            ]
        );
        assert_eq!(s.listens.len(), 1);
        // Traffic on both, or not counted: everything kept.
        assert_eq!(served(&cfg, None), cfg);
        assert_eq!(served(&cfg, Some(&ConnectionsReport::default())), cfg);
        let s = served(&cfg, Some(&conns(19540)));
        assert_eq!(s.values.len(), 5, "{:?}", s.values);
    }

    #[test]
    fn pass_targets_are_upstream_names() {
        assert_eq!(pass_target("http://be/x"), Some("be"));
        assert_eq!(pass_target("https://be"), Some("be"));
        assert_eq!(pass_target("be:9000"), Some("be:9000"));
        assert_eq!(pass_target("http://$backend"), None);
        assert_eq!(pass_target(""), None);
    }
}
