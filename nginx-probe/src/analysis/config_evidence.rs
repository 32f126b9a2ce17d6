//! Quotes nginx's configuration in the evidence of the verdicts whose directives it
//! sets: the effective value of each directive with its `file:line` (or `default`),
//! and `on disk, possibly not loaded` when its file changed after the last load. The
//! configuration never fires or silences a verdict: it only says what is set.

use crate::{
    analysis::inputs::Inputs,
    model::{config::ConfigReport, Verdict},
};

/// Values quoted in a list, at most.
pub const MAX_QUOTED: usize = crate::model::config::MAX_OVERRIDES_QUOTED;

/// nginx's keepalive settings as configured, for advice: `keepalive_timeout 75s
/// (default), keepalive_requests 1000 (default)` with overrides; None when the
/// configuration was not read.
pub fn keepalive_settings(cfg: Option<&ConfigReport>) -> Option<String> {
    let cfg = cfg?;
    Some(format!(
        "keepalive_timeout {}, keepalive_requests {}",
        cfg.with_overrides("keepalive_timeout")?,
        cfg.with_overrides("keepalive_requests")?
    ))
}

/// Where the configuration turns client keepalive off (`keepalive_timeout 0`):
/// `http: 0 (n.conf:9); server a: 0s (a.conf:3)`; None when nowhere, or not read.
pub fn keepalive_timeout_zero(cfg: Option<&ConfigReport>) -> Option<String> {
    let cfg = cfg?;
    let zero: Vec<String> = cfg
        .everywhere("keepalive_timeout")
        .filter(|v| !v.scope.starts_with("upstream"))
        .filter(|v| {
            let first = v.value.split_whitespace().next().unwrap_or("");
            first == "0" || first == "0s" || first == "0ms"
        })
        .map(|v| format!("{}: {}", v.scope, v.quoted()))
        .collect();
    (!zero.is_empty()).then(|| zero.join("; "))
}

/// Whether `keepalive_timeout 0` is in force everywhere the configuration `cfg` sets
/// keepalive_timeout for clients (its http level and every server or location
/// override): then every connection of these servers is closed after its response.
/// False when some server or location keeps keepalive on (a name-based server beside
/// one that turns it off: which one a connection reached is not measured by port),
/// or the configuration was not read.
///
/// The http-level value counts only where a server inherits it: when every server of
/// `cfg` (its `listen` lines' scopes) sets its own, it is in force nowhere (trial 17:
/// the only server, `keepalive_timeout 0`, was said to stand beside "the others" at
/// the http level's 75s default).
pub fn keepalive_timeout_zero_everywhere(cfg: Option<&ConfigReport>) -> bool {
    let Some(cfg) = cfg else { return false };
    let servers: std::collections::BTreeSet<&str> =
        cfg.listens.iter().map(|l| l.scope.as_str()).collect();
    let sets_own = |s: &str| cfg.overrides("keepalive_timeout").any(|v| v.scope == s);
    let http_in_force = servers.is_empty() || servers.iter().any(|s| !sets_own(s));
    let mut places = cfg
        .everywhere("keepalive_timeout")
        .filter(|v| !v.scope.starts_with("upstream"))
        .filter(|v| http_in_force || v.scope != "http")
        .peekable();
    places.peek().is_some()
        && places.all(|v| {
            let first = v.value.split_whitespace().next().unwrap_or("");
            first == "0" || first == "0s" || first == "0ms"
        })
}

/// Advice on TLS session resumption from the configuration: what to set when neither
/// a session cache nor tickets are on (tickets are on by default), else that
/// resumption is configured (the clients do not resume, or come for the first time).
/// Without the configuration: the usual settings, said to be unchecked.
pub fn tls_resumption_advice(cfg: Option<&ConfigReport>) -> String {
    const USUAL: &str = "ssl_session_cache shared:SSL:10m; ssl_session_tickets on";
    let Some(cfg) = cfg else {
        return format!("for clients that must reconnect, resume TLS sessions ({USUAL}; the configuration was not read)");
    };
    let (Some(cache), Some(tickets)) = (
        cfg.with_overrides("ssl_session_cache"),
        cfg.with_overrides("ssl_session_tickets"),
    ) else {
        return format!("for clients that must reconnect, resume TLS sessions ({USUAL})");
    };
    let any =
        |d: &str, pred: &dyn Fn(&str) -> bool| cfg.everywhere(d).any(|v| pred(v.value.trim()));
    // Either one lets a client resume: tickets (on by default) or a session cache.
    let cache_on = any("ssl_session_cache", &|v| v != "none" && v != "off");
    let tickets_off = any("ssl_session_tickets", &|v| v == "off");
    if !cache_on && tickets_off {
        format!("for clients that must reconnect, let them resume TLS sessions: ssl_session_tickets on, or ssl_session_cache shared:SSL:10m (now ssl_session_cache {cache}; ssl_session_tickets {tickets})")
    } else {
        format!("TLS session resumption is configured (ssl_session_cache {cache}; ssl_session_tickets {tickets}): these handshakes are clients that do not resume or connect for the first time (a resumed handshake is still one, shorter)")
    }
}

fn stale(not_loaded: bool) -> &'static str {
    if not_loaded {
        ", on disk, possibly not loaded"
    } else {
        ""
    }
}

/// `access_log` lines: `/var/log/a.log main buffer=32k (nginx.conf:20)`.
fn access_logs(cfg: &ConfigReport) -> Option<String> {
    bounded(
        cfg.access_logs
            .iter()
            .map(|a| {
                format!(
                    "{}: {} ({}{})",
                    a.scope,
                    a.spec(" no buffer="),
                    a.at,
                    stale(a.not_loaded)
                )
            })
            .collect(),
    )
}

/// `listen` lines with their reuseport: `127.0.0.1:8080 reuseport (a.conf:2)`.
fn listens_reuseport(cfg: &ConfigReport) -> Option<String> {
    bounded(
        cfg.listens
            .iter()
            .map(|l| {
                let r = if l.reuseport {
                    "reuseport"
                } else {
                    "no reuseport"
                };
                format!("{} {r} ({}{})", l.address, l.at, stale(l.not_loaded))
            })
            .collect(),
    )
}

/// Where a quoted value is read from the configuration.
#[derive(Clone, Copy, Debug)]
enum Quote {
    /// The main/events/http value and its server/location overrides.
    Directive(&'static str),
    /// The directive in every `upstream` block: `be: 32 (u.conf:3)`.
    Upstream(&'static str),
    /// The effective value in each location that proxies, else the http value.
    Proxied(&'static str),
    /// Each `upstream` block's `server` lines with max_fails/fail_timeout.
    UpstreamServers,
    AccessLogs,
    ErrorLogs,
    ListenReuseport,
    ListenBacklog,
}

use Quote::*;

/// The evidence keys each verdict gets from the configuration: the directives its
/// advice names, as nginx runs them. Keys are `config_<directive>`.
const QUOTES: &[(&str, &[(&str, Quote)])] = &[
    (
        "keepalive_off",
        &[
            ("config_keepalive_timeout", Directive("keepalive_timeout")),
            ("config_keepalive_requests", Directive("keepalive_requests")),
        ],
    ),
    (
        "keepalive_timeout_closes",
        &[("config_keepalive_timeout", Directive("keepalive_timeout"))],
    ),
    (
        "nginx_timeout_closes",
        &[
            ("config_keepalive_timeout", Directive("keepalive_timeout")),
            (
                "config_client_header_timeout",
                Directive("client_header_timeout"),
            ),
            (
                "config_client_body_timeout",
                Directive("client_body_timeout"),
            ),
            ("config_send_timeout", Directive("send_timeout")),
            ("config_lingering_timeout", Directive("lingering_timeout")),
        ],
    ),
    (
        "keepalive_requests_low",
        &[("config_keepalive_requests", Directive("keepalive_requests"))],
    ),
    (
        "quic_keepalive_ended",
        &[
            ("config_keepalive_requests", Directive("keepalive_requests")),
            ("config_keepalive_time", Directive("keepalive_time")),
        ],
    ),
    (
        "access_log_unbuffered",
        &[("config_access_log", AccessLogs)],
    ),
    (
        "access_log_reopened",
        &[
            ("config_access_log", AccessLogs),
            (
                "config_open_log_file_cache",
                Directive("open_log_file_cache"),
            ),
        ],
    ),
    (
        "log_not_reopened",
        &[
            ("config_access_log", AccessLogs),
            ("config_error_log", ErrorLogs),
        ],
    ),
    ("error_log_verbose", &[("config_error_log", ErrorLogs)]),
    ("clients_5xx", &[("config_error_log", ErrorLogs)]),
    (
        "fd_exhaustion",
        &[
            ("config_worker_connections", Directive("worker_connections")),
            (
                "config_worker_rlimit_nofile",
                Directive("worker_rlimit_nofile"),
            ),
            ("config_open_file_cache", Directive("open_file_cache")),
        ],
    ),
    (
        "worker_connections_exhausted",
        &[
            ("config_worker_connections", Directive("worker_connections")),
            (
                "config_worker_rlimit_nofile",
                Directive("worker_rlimit_nofile"),
            ),
        ],
    ),
    (
        "accept_imbalance",
        &[
            ("config_multi_accept", Directive("multi_accept")),
            ("config_accept_mutex", Directive("accept_mutex")),
            ("config_listen_reuseport", ListenReuseport),
        ],
    ),
    (
        "accept_queue_overflow",
        &[("config_listen_backlog", ListenBacklog)],
    ),
    (
        "listener_closed_resets",
        &[
            ("config_listen_reuseport", ListenReuseport),
            ("config_worker_processes", Directive("worker_processes")),
        ],
    ),
    (
        "upstream_keepalive_off",
        &[
            ("config_upstream_keepalive", Upstream("keepalive")),
            ("config_proxy_pass", Proxied("proxy_pass")),
            ("config_proxy_http_version", Proxied("proxy_http_version")),
            (
                "config_proxy_set_header_connection",
                Proxied("proxy_set_header Connection"),
            ),
        ],
    ),
    (
        "upstream_errors",
        &[
            ("config_upstream_keepalive", Upstream("keepalive")),
            ("config_upstream_servers", UpstreamServers),
            (
                "config_proxy_connect_timeout",
                Proxied("proxy_connect_timeout"),
            ),
            ("config_proxy_read_timeout", Proxied("proxy_read_timeout")),
            ("config_proxy_next_upstream", Proxied("proxy_next_upstream")),
        ],
    ),
    (
        "slow_requests_idle_workers",
        &[("config_proxy_read_timeout", Proxied("proxy_read_timeout"))],
    ),
    (
        "requests_refused",
        &[
            ("config_limit_req", Directive("limit_req")),
            ("config_limit_req_zone", Directive("limit_req_zone")),
            ("config_limit_conn", Directive("limit_conn")),
            ("config_limit_conn_zone", Directive("limit_conn_zone")),
        ],
    ),
    (
        "event_loop_stall",
        &[
            ("config_gzip", Directive("gzip")),
            ("config_aio", Directive("aio")),
        ],
    ),
    (
        "cpu_starved",
        &[("config_worker_processes", Directive("worker_processes"))],
    ),
    (
        "cpu_throttled",
        &[("config_worker_processes", Directive("worker_processes"))],
    ),
    (
        "worker_shutdown_timeout",
        &[(
            "config_worker_shutdown_timeout",
            Directive("worker_shutdown_timeout"),
        )],
    ),
    (
        "worker_spawn_failed",
        &[
            ("config_worker_processes", Directive("worker_processes")),
            (
                "config_worker_rlimit_nofile",
                Directive("worker_rlimit_nofile"),
            ),
        ],
    ),
];

/// Up to [`MAX_QUOTED`] parts joined with `; `, then `N more`
/// ([`crate::model::config::bounded_list`]).
fn bounded(parts: Vec<String>) -> Option<String> {
    crate::model::config::bounded_list(parts)
}

/// Values of `directive` listed wherever they appear (no level value: `limit_req`,
/// zones), each with its scope.
fn listed(cfg: &ConfigReport, directive: &str) -> Option<String> {
    bounded(
        cfg.values
            .iter()
            .filter(|v| v.directive == directive)
            .map(|v| format!("{}: {}", v.scope, v.quoted()))
            .collect(),
    )
}

fn quote(cfg: &ConfigReport, q: Quote) -> Option<String> {
    match q {
        Directive(d) => cfg.with_overrides(d).or_else(|| listed(cfg, d)),
        Upstream(_) if cfg.upstreams.is_empty() && cfg.proxied("proxy_pass").next().is_some() => {
            Some(
                "no upstream block (a proxy_pass to an address has no pool of idle connections)"
                    .to_string(),
            )
        }
        Upstream(d) => bounded(
            cfg.values
                .iter()
                .filter(|v| v.directive == d && v.scope.starts_with("upstream "))
                .map(|v| format!("{}: {}", v.scope, v.quoted()))
                .collect(),
        ),
        Proxied(d) => {
            let located: Vec<String> = cfg
                .proxied(d)
                .map(|v| format!("{}: {}", v.scope, v.quoted()))
                .collect();
            bounded(located).or_else(|| cfg.value(d).map(|v| v.quoted()))
        }
        UpstreamServers => bounded(
            cfg.upstreams
                .iter()
                .flat_map(|u| {
                    u.servers.iter().map(move |s| {
                        format!(
                            "upstream {}: {} max_fails={} fail_timeout={} ({})",
                            u.name, s.address, s.max_fails, s.fail_timeout, s.at
                        )
                    })
                })
                .collect(),
        ),
        AccessLogs => access_logs(cfg),
        ErrorLogs => bounded(
            cfg.error_logs
                .iter()
                .map(|v| format!("{}: {}", v.scope, v.quoted()))
                .collect(),
        ),
        ListenReuseport => listens_reuseport(cfg),
        ListenBacklog => bounded(
            cfg.listens
                .iter()
                .filter(|l| !l.quic)
                .map(|l| {
                    format!(
                        "{} backlog={} ({}{})",
                        l.address,
                        l.backlog.as_deref().unwrap_or("511 (default)"),
                        l.at,
                        stale(l.not_loaded)
                    )
                })
                .collect(),
        ),
    }
}

/// Adds the configuration's values to the evidence of each verdict in [`QUOTES`]:
/// `config_<directive>` keys, each `value (file:line)` or `value (default)`, with
/// overrides by scope. fd_exhaustion also gets worker_connections against the lowest
/// soft nofile limit of the live workers (`/proc/<pid>/limits`).
pub fn annotate(inp: &Inputs, out: &mut [Verdict]) {
    let Some(cfg) = &inp.config else { return };
    for v in out.iter_mut() {
        let Some((_, quotes)) = QUOTES.iter().find(|(id, _)| *id == v.id) else {
            continue;
        };
        for (key, q) in quotes.iter() {
            if let Some(s) = quote(cfg, *q) {
                v.evidence.insert(key.to_string(), serde_json::json!(s));
            }
        }
        if v.id == "fd_exhaustion" {
            // The lowest soft RLIMIT_NOFILE among live workers (/proc/<pid>/limits).
            let limit = inp
                .workers
                .iter()
                .filter(|w| w.alive)
                .filter_map(|w| w.fd_limit)
                .min();
            let conns = cfg
                .value("worker_connections")
                .and_then(|w| w.value.parse::<u64>().ok());
            if let (Some(c), Some(l)) = (conns, limit) {
                let cmp = if c >= l { "at or over" } else { "under" };
                v.evidence.insert(
                    "config_worker_connections_vs_limit".to_string(),
                    serde_json::json!(format!(
                        "worker_connections {c} is {cmp} the soft nofile limit in force {l} (/proc/<pid>/limits); each connection needs at least one fd, a proxied one two"
                    )),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trial 17: the only server sets `keepalive_timeout 0`; the http level's 75s
    /// default is in force nowhere. A second server without its own value inherits it.
    #[test]
    fn an_http_value_every_server_overrides_is_in_force_nowhere() {
        use crate::model::config::{ConfigValue, ListenValue};
        let listen = |scope: &str| ListenValue {
            scope: scope.into(),
            address: "127.0.0.1:19500".into(),
            at: "/t/n.conf:5".into(),
            ..Default::default()
        };
        let mut cfg = ConfigReport {
            values: vec![
                ConfigValue::of(
                    "keepalive_timeout",
                    "http",
                    "75s",
                    crate::model::config::DEFAULT,
                ),
                ConfigValue::of("keepalive_timeout", "server a", "0", "/t/n.conf:6"),
            ],
            listens: vec![listen("server a")],
            ..Default::default()
        };
        assert!(keepalive_timeout_zero_everywhere(Some(&cfg)));
        cfg.listens.push(listen("server b"));
        assert!(!keepalive_timeout_zero_everywhere(Some(&cfg)));
    }
    use crate::{
        analysis::inputs::WorkerInput,
        model::{
            config::{ConfigValue, ListenValue},
            Severity,
        },
    };

    fn v(directive: &str, scope: &str, value: &str, at: &str) -> ConfigValue {
        ConfigValue::of(directive, scope, value, at)
    }

    fn verdict(id: &str) -> Verdict {
        Verdict::new(
            id,
            Severity::Warning,
            Default::default(),
            &[],
            String::new(),
        )
    }

    /// The newcomer's case: ssl_session_tickets is on by default, so it is never
    /// advised when the configuration says so; a cache that is off is; both set says
    /// resumption is configured; unread configuration says so.
    #[test]
    fn tls_resumption_advice_quotes_what_is_set_and_advises_only_what_is_off() {
        let cfg = |cache: &str, tickets: &str| ConfigReport {
            values: vec![
                v("ssl_session_cache", "http", cache, "default"),
                v("ssl_session_tickets", "http", tickets, "default"),
                v("keepalive_timeout", "http", "0", "/e/n.conf:9"),
                v("keepalive_requests", "http", "1000", "default"),
            ],
            ..Default::default()
        };
        assert_eq!(
            tls_resumption_advice(Some(&cfg("none", "on"))),
            "TLS session resumption is configured (ssl_session_cache none (default); ssl_session_tickets on (default)): these handshakes are clients that do not resume or connect for the first time (a resumed handshake is still one, shorter)"
        );
        assert!(tls_resumption_advice(Some(&cfg("shared:SSL:10m", "off")))
            .starts_with("TLS session resumption is configured"));
        assert_eq!(
            tls_resumption_advice(Some(&cfg("none", "off"))),
            "for clients that must reconnect, let them resume TLS sessions: ssl_session_tickets on, or ssl_session_cache shared:SSL:10m (now ssl_session_cache none (default); ssl_session_tickets off (default))"
        );
        assert!(tls_resumption_advice(None).ends_with("(ssl_session_cache shared:SSL:10m; ssl_session_tickets on; the configuration was not read)"));
        assert_eq!(
            keepalive_settings(Some(&cfg("none", "on"))).as_deref(),
            Some("keepalive_timeout 0 (/e/n.conf:9), keepalive_requests 1000 (default)")
        );
        assert_eq!(keepalive_settings(None), None);
        assert_eq!(
            keepalive_timeout_zero(Some(&cfg("none", "on"))).as_deref(),
            Some("http: 0 (/e/n.conf:9)")
        );
        assert_eq!(keepalive_timeout_zero(None), None);
    }

    #[test]
    fn the_four_verdicts_quote_values_overrides_and_the_fd_limit() {
        let cfg = ConfigReport {
            values: vec![
                v("worker_rlimit_nofile", "main", "unset", "default"),
                v("worker_connections", "events", "4096", "/e/n.conf:7"),
                v("multi_accept", "events", "off", "default"),
                v("accept_mutex", "events", "on", "/e/n.conf:8"),
                v("keepalive_timeout", "http", "65", "/e/n.conf:12"),
                v("keepalive_requests", "http", "1000", "default"),
                v("keepalive_timeout", "server a", "0", "/e/a.conf:3"),
                ConfigValue {
                    not_loaded: true,
                    ..v("keepalive_timeout", "upstream u", "60s", "/e/u.conf:2")
                },
            ],
            listens: vec![ListenValue {
                address: "80".into(),
                reuseport: true,
                at: "/e/a.conf:2".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let inp = Inputs {
            config: Some(cfg),
            workers: vec![WorkerInput {
                alive: true,
                fd_limit: Some(1024),
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut out: Vec<Verdict> = [
            "keepalive_off",
            "fd_exhaustion",
            "accept_imbalance",
            "access_log_unbuffered",
            "other",
        ]
        .iter()
        .map(|id| verdict(id))
        .collect();
        annotate(&inp, &mut out);
        let e = |i: usize, k: &str| out[i].evidence.get(k).cloned().unwrap_or_default();
        assert_eq!(
            e(0, "config_keepalive_timeout"),
            "65 (/e/n.conf:12); server a: 0 (/e/a.conf:3)"
        );
        assert_eq!(e(0, "config_keepalive_requests"), "1000 (default)");
        assert_eq!(e(1, "config_worker_connections"), "4096 (/e/n.conf:7)");
        assert_eq!(e(1, "config_worker_rlimit_nofile"), "unset (default)");
        assert_eq!(
            e(1, "config_worker_connections_vs_limit"),
            "worker_connections 4096 is at or over the soft nofile limit in force 1024 (/proc/<pid>/limits); each connection needs at least one fd, a proxied one two"
        );
        assert_eq!(e(2, "config_accept_mutex"), "on (/e/n.conf:8)");
        assert_eq!(e(2, "config_multi_accept"), "off (default)");
        assert_eq!(
            e(2, "config_listen_reuseport"),
            "80 reuseport (/e/a.conf:2)"
        );
        assert!(!out[3].evidence.contains_key("config_access_log"));
        assert!(out[4].evidence.is_empty());
        // No configuration: nothing added.
        let mut out = vec![verdict("keepalive_off")];
        annotate(&Inputs::default(), &mut out);
        assert!(out[0].evidence.is_empty());
    }

    /// A configuration proxying `/api` to upstream `be` (keepalive 16), with a
    /// location that sets proxy_read_timeout without proxying.
    fn proxying_config() -> ConfigReport {
        let loc = "server a location /api";
        ConfigReport {
            values: vec![
                v("proxy_http_version", "http", "1.0", "default"),
                v("proxy_read_timeout", "http", "60s", "default"),
                // Set in a location that does not proxy: not in force for a proxy.
                v(
                    "proxy_read_timeout",
                    "server a location /x",
                    "5s",
                    "/e/a.conf:4",
                ),
                v("proxy_pass", loc, "http://be", "/e/a.conf:9"),
                v("proxy_http_version", loc, "1.1", "/e/a.conf:10"),
                v("proxy_read_timeout", loc, "60s", "default"),
                v("proxy_set_header Connection", loc, "close", "default"),
                v("keepalive", "upstream be", "16", "/e/u.conf:3"),
                v("worker_shutdown_timeout", "main", "10s", "/e/n.conf:2"),
            ],
            upstreams: vec![crate::model::config::UpstreamValue {
                name: "be".into(),
                servers: vec![crate::model::config::UpstreamServer {
                    address: "10.0.0.1:80".into(),
                    max_fails: "1".into(),
                    fail_timeout: "10s".into(),
                    other: String::new(),
                    at: "/e/u.conf:2".into(),
                    as_written: "10.0.0.1:80".into(),
                }],
                at: "/e/u.conf:1".into(),
            }],
            listens: vec![ListenValue {
                address: "80".into(),
                backlog: Some("4096".into()),
                at: "/e/a.conf:2".into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// upstream_keepalive_off, upstream_errors, worker_shutdown_timeout and
    /// accept_queue_overflow annotated with `cfg`, in that order.
    fn annotated_upstream_verdicts(cfg: &ConfigReport) -> Vec<Verdict> {
        let ids = [
            "upstream_keepalive_off",
            "upstream_errors",
            "worker_shutdown_timeout",
            "accept_queue_overflow",
        ];
        let inp = Inputs {
            config: Some(cfg.clone()),
            ..Default::default()
        };
        let mut out: Vec<Verdict> = ids.iter().map(|id| verdict(id)).collect();
        annotate(&inp, &mut out);
        out
    }

    /// The upstream rules quote each proxying location's effective settings (not a
    /// location that only sets a proxy_ directive), the upstream blocks' keepalive, and
    /// say when there is no upstream block at all.
    #[test]
    fn upstream_verdicts_quote_the_proxying_locations_and_the_pool() {
        let mut cfg = proxying_config();
        let out = annotated_upstream_verdicts(&cfg);
        let e = |i: usize, k: &str| out[i].evidence.get(k).cloned().unwrap_or_default();
        assert_eq!(
            e(0, "config_upstream_keepalive"),
            "upstream be: 16 (/e/u.conf:3)"
        );
        assert_eq!(
            e(0, "config_proxy_pass"),
            "server a location /api: http://be (/e/a.conf:9)"
        );
        assert_eq!(
            e(0, "config_proxy_http_version"),
            "server a location /api: 1.1 (/e/a.conf:10)"
        );
        assert_eq!(
            e(0, "config_proxy_set_header_connection"),
            "server a location /api: close (default)"
        );
        assert_eq!(
            e(1, "config_proxy_read_timeout"),
            "server a location /api: 60s (default)"
        );
        assert_eq!(
            e(1, "config_upstream_servers"),
            "upstream be: 10.0.0.1:80 max_fails=1 fail_timeout=10s (/e/u.conf:2)"
        );
        assert_eq!(e(2, "config_worker_shutdown_timeout"), "10s (/e/n.conf:2)");
        assert_eq!(
            e(3, "config_listen_backlog"),
            "80 backlog=4096 (/e/a.conf:2)"
        );
        // A bare-address proxy_pass: no pool to configure, said so.
        cfg.upstreams.clear();
        cfg.values.retain(|v| !v.scope.starts_with("upstream "));
        let out = annotated_upstream_verdicts(&cfg);
        assert_eq!(
            out[0].evidence["config_upstream_keepalive"],
            "no upstream block (a proxy_pass to an address has no pool of idle connections)"
        );
        assert!(!out[1].evidence.contains_key("config_upstream_servers"));
    }
}
