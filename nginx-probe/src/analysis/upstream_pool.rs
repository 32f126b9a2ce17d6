//! What `upstream_keepalive_off` advises from the configuration: a pool to add when no
//! `upstream` block has one, or, when one has, that it is configured but unused and
//! what defeats it where nginx proxies (`proxy_http_version`, `proxy_set_header
//! Connection`), with `file:line`; unknown when the configuration was not read.

use crate::model::config::ConfigReport;

/// The fix `upstream_keepalive_off` advises: [`pool_unused`] when a pool is configured,
/// else [`ADD_POOL`]; without the configuration, both, said unknown.
/// `upstream_closed_most`: the upstream closed most of nginx's connections to it first
/// (measured, tracepoint `sock:inet_sock_set_state`).
pub fn pool_advice(cfg: Option<&ConfigReport>, upstream_closed_most: bool) -> String {
    match cfg {
        Some(cfg) => {
            pool_unused(cfg, upstream_closed_most).unwrap_or_else(|| ADD_POOL.to_string())
        }
        None => format!("the configuration was not read, so whether the upstream has a pool is unknown; if it has none: {ADD_POOL}; if it has one: {USE_POOL}"),
    }
}

/// The advice when no upstream block has a pool.
pub const ADD_POOL: &str = "reuse them: `keepalive 32;` in the `upstream` block of the peer (a proxy_pass to a bare address has no connection pool: give it one), with `proxy_http_version 1.1;` and `proxy_set_header Connection \"\";` where it is proxied";
/// What a configured pool needs to be used.
pub const USE_POOL: &str = "nginx reuses its pool only with `proxy_http_version 1.1;` and `proxy_set_header Connection \"\";` where it is proxied";

/// When an `upstream` block has a pool (`keepalive N`): the advice that the pool is
/// configured but unused, naming what defeats it where nginx proxies, with `file:line`
/// (`proxy_http_version` other than 1.1: HTTP/1.0, each response ends the connection;
/// `proxy_set_header Connection` not cleared: `close` by default), or that nothing
/// configured defeats it: then, when the upstream closed most connections first
/// (`upstream_closed_most`, measured), that the upstream ends them itself, else that
/// why it is unused is unknown. None without a pool.
pub fn pool_unused(cfg: &ConfigReport, upstream_closed_most: bool) -> Option<String> {
    let pools: Vec<String> = cfg
        .values
        .iter()
        .filter(|v| {
            v.directive == "keepalive" && v.scope.starts_with("upstream ") && !v.is_default()
        })
        .map(|v| format!("{}: keepalive {}", v.scope, v.quoted()))
        .collect();
    if pools.is_empty() {
        return None;
    }
    let mut defeats: Vec<String> = cfg
        .proxied("proxy_http_version")
        .filter(|v| v.value.trim() != "1.1")
        .map(|v| format!("{}: proxy_http_version {} (nginx speaks HTTP/1.0 to the upstream, which ends the connection after each response; set `proxy_http_version 1.1;`)", v.scope, v.quoted()))
        .collect();
    defeats.extend(
        cfg.proxied("proxy_set_header Connection")
            .filter(|v| !v.value.is_empty())
            .map(|v| format!("{}: proxy_set_header Connection {} (not cleared: nginx asks the upstream to close unless the value is empty; set `proxy_set_header Connection \"\";`)", v.scope, v.quoted())),
    );
    let pools = pools.join("; ");
    Some(if defeats.is_empty() && upstream_closed_most {
        format!("a pool is configured ({pools}) and the proxy settings allow its reuse, but the upstream closed most connections first (above): it ends them itself, so nginx has none to keep; what makes it close is not measured: its keepalive turned off, `Connection: close` in its responses, its idle timeout shorter than the gaps between requests on a connection, or a cap on requests per connection (check the upstream server's keepalive settings against these)")
    } else if defeats.is_empty() {
        format!("a pool is configured ({pools}) and the proxy settings allow its reuse, yet the connections are not reused: why is unknown (the upstream may close them: its own keepalive timeout or `Connection: close`)")
    } else {
        format!(
            "a pool is configured ({pools}) but unused: {}",
            defeats.join("; ")
        )
    })
}

#[cfg(test)]
mod tests {
    use crate::analysis::{
        fd_upstream::upstream_keepalive_off,
        inputs::{w, Inputs},
    };

    /// The trial on nginx 1.22: `upstream be { server ...; keepalive 16; }` proxied
    /// without `proxy_http_version` (1.0 by default) nor `Connection ""`: one connect
    /// per request. The advice says the pool is configured but unused and names both
    /// settings with their place, never "add keepalive", and says the side holding
    /// TIME-WAIT is not measured.
    #[test]
    fn a_configured_pool_unused_names_what_defeats_it_not_add_keepalive() {
        use crate::model::config::{ConfigReport, ConfigValue};
        let loc = "server a location /";
        let cfg = |version: (&str, &str), conn: (&str, &str)| ConfigReport {
            values: vec![
                ConfigValue::of("proxy_pass", loc, "http://be", "/e/n.conf:9"),
                ConfigValue::of("proxy_http_version", loc, version.0, version.1),
                ConfigValue::of("proxy_set_header Connection", loc, conn.0, conn.1),
                ConfigValue::of("keepalive", "upstream be", "16", "/e/n.conf:3"),
            ],
            ..Default::default()
        };
        let mut a = w(1, 1000, 1000);
        a.upstream_connects = 1000;
        a.upstream_established = 1000;
        let mut inp = Inputs {
            workers: vec![a],
            requests: Some(1000),
            config: Some(cfg(("1.0", "default"), ("close", "default"))),
            ..Inputs::default()
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
        // The upstream closed most of them first (measured): it ends them itself.
        let c = crate::analysis::upstream_pool::pool_unused(inp.config.as_ref().unwrap(), true);
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
        assert!(advice(&inp).contains("`keepalive 32;` in the `upstream` block"));
        // Not read: both, said unknown.
        inp.config = None;
        let a = advice(&inp);
        assert!(
            a.contains("whether the upstream has a pool is unknown"),
            "{a}"
        );
    }
}
