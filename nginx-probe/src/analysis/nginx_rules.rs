//! Rules on what nginx decided itself: requests it refused (limit_req, limit_conn) or
//! failed on the upstream side, from its error log; connections it closed after
//! keepalive_requests; and workers throttled by their cgroup's CPU quota.

use std::collections::BTreeMap;

use crate::analysis::inputs::{log_count, Inputs};
use crate::model::{NginxErrorsReport, Severity, Verdict};

/// Lines needed before refusals or upstream errors are judged.
pub const REFUSED_MIN: u64 = 10;
/// Share of requests refused (or failed upstream) at or above which the rule fires.
pub const REFUSED_MIN_SHARE: f64 = 0.01;
/// Share at or above which it is critical.
pub const REFUSED_CRITICAL_SHARE: f64 = 0.10;

/// Accepts and requests needed before keepalive_requests is judged.
pub const KEEPALIVE_REQUESTS_MIN_ACCEPTS: u64 = 200;
/// Requests per connection at or under which a pinned value is "low".
pub const KEEPALIVE_REQUESTS_LOW_MAX: u64 = 100;
/// The largest distance from N (requests per connection) that connections open at the
/// period's edges may explain for the mean to count as pinned at N: beyond it the mean
/// cannot tell N from its neighbours.
pub const KEEPALIVE_REQUESTS_MAX_SLACK: f64 = 0.25;

/// Share of enforcement periods throttled at or above which the quota binds.
pub const THROTTLED_MIN_SHARE: f64 = 0.05;
/// Throttled periods needed before the quota is judged.
pub const THROTTLED_MIN_PERIODS: u64 = 5;

use crate::model::round3_json as r3;

/// worker_processes for a quota of `cpus` CPUs: the quota rounded up, at least 1.
pub fn workers_for_quota(cpus: f64) -> u64 {
    (cpus.ceil() as u64).max(1)
}

/// An error-log class with its lines and directive: (class, lines, directive).
type Cause<'a> = (&'a str, u64, &'a str);

/// Lines of each class of `group` in the period, non-zero only.
fn group_counts<'a>(e: &'a NginxErrorsReport, group: &str) -> Vec<Cause<'a>> {
    e.classes
        .iter()
        .filter(|(_, c)| c.group == group && c.count > 0)
        .map(|(n, c)| (n.as_str(), c.count, c.directive.as_str()))
        .collect()
}

/// Shared by requests_refused and upstream_errors: fires when nginx's error log holds
/// at least [`REFUSED_MIN`] lines of `group` and they are at least
/// [`REFUSED_MIN_SHARE`] of the exact request count.
fn error_share_rule(
    inp: &Inputs,
    group: &str,
    id: &str,
    advice: impl Fn(f64, u64, u64, &Top) -> String,
    out: &mut Vec<Verdict>,
) {
    error_share_rule_with(inp, group, id, advice, |_| None, out)
}

/// The lines of `group` that may stand as nginx's, and what was set aside (see
/// [`sift`]).
struct Sifted<'a> {
    /// The classes the configuration allows.
    causes: Vec<Cause<'a>>,
    /// The most lines that can be refusals: the complete access log's statuses a limit
    /// module answers with; None: no such bound (not `refused`, or no complete log).
    cap: Option<u64>,
    /// What was set aside and why.
    evidence: BTreeMap<&'static str, serde_json::Value>,
}

/// Whether `cfg` is known to pass no request to an upstream: read whole and
/// unmodified (see [`crate::model::config::ConfigReport::lacks`]), no `stream` block
/// (its `proxy_pass` is not counted), and no `*_pass` directive in the http block.
fn passes_nothing(cfg: &crate::model::config::ConfigReport) -> bool {
    cfg.lacks("proxy_pass", true) && cfg.upstream_passes == Some(0)
}

/// Sifts the `refused` group's `causes` (class, lines, directive) against what nginx
/// runs and what its clients got, since a client can put such lines in the error log
/// (a decoded `%0A` in a path nginx logs, cut at 2 KiB before its request field:
/// docs/security.md):
/// - a `limiting requests` line with no `limit_req` anywhere in a configuration read
///   whole (or `limiting connections` with no `limit_conn` and no `stream` block) was
///   not written by nginx's limit modules: its class is left out;
/// - with an access log that counts every request and logs `$status`, no more lines
///   stand than the requests answered 503, 429 or a configured `limit_req_status` /
///   `limit_conn_status`.
///
/// - an `upstream` line from an nginx whose configuration, read whole, passes no
///   request to an upstream (no `proxy_pass`, `fastcgi_pass`... anywhere, no `stream`
///   block) was not written by nginx's upstream code: every class is left out.
///
/// Other groups pass whole.
fn sift<'a>(inp: &Inputs, group: &str, causes: Vec<Cause<'a>>) -> Sifted<'a> {
    let mut out = Sifted {
        causes: Vec::new(),
        cap: None,
        evidence: BTreeMap::new(),
    };
    if group == "upstream" && inp.config.as_ref().is_some_and(passes_nothing) {
        // No *_pass anywhere in a configuration read whole: no upstream wrote them.
        let refuted: BTreeMap<String, u64> =
            causes.iter().map(|(c, n, _)| (c.to_string(), *n)).collect();
        if !refuted.is_empty() {
            out.evidence
                .insert("lines_contradicted_by_config", serde_json::json!(refuted));
        }
        return out;
    }
    if group != "refused" {
        out.causes = causes;
        return out;
    }
    let mut refuted = BTreeMap::new();
    for c @ (class, lines, directive) in causes {
        let lacks = inp.config.as_ref().is_some_and(|cfg| match directive {
            "limit_req" => cfg.lacks("limit_req", false),
            "limit_conn" => cfg.lacks("limit_conn", true),
            _ => false,
        });
        if lacks {
            refuted.insert(class.to_string(), lines);
        } else {
            out.causes.push(c);
        }
    }
    if !refuted.is_empty() {
        out.evidence
            .insert("lines_contradicted_by_config", serde_json::json!(refuted));
    }
    if let Some((answered, codes)) = limit_statuses(inp) {
        out.cap = Some(answered);
        out.evidence.insert(
            "access_log_limit_statuses",
            serde_json::json!({"codes": codes, "requests": answered}),
        );
    }
    out
}

/// With an access log that counts every request nginx served in the period and logs
/// `$status`: the requests answered with a status a limit module uses (503, 429, and
/// every configured `limit_req_status` / `limit_conn_status`), and those codes.
fn limit_statuses(inp: &Inputs) -> Option<(u64, Vec<String>)> {
    let a = inp
        .access_log
        .as_ref()
        .filter(|a| a.counts_every_request && !a.lacks.iter().any(|v| v == "$status"))?;
    let mut codes: Vec<String> = vec!["429".into(), "503".into()];
    if let Some(cfg) = &inp.config {
        for v in cfg
            .values
            .iter()
            .filter(|v| v.directive == "limit_req_status" || v.directive == "limit_conn_status")
        {
            if !codes.contains(&v.value) {
                codes.push(v.value.clone());
            }
        }
    }
    let n = codes.iter().filter_map(|c| a.statuses.get(c)).sum();
    Some((n, codes))
}

/// The causes with the most lines: one, or several tied.
pub(crate) struct Top<'a> {
    /// The classes with the most lines, by name; empty when no line.
    pub classes: Vec<&'a str>,
    /// Lines of each.
    pub lines: u64,
}

impl<'a> Top<'a> {
    /// The causes of `causes` (class, lines, directive) with the most lines.
    fn of(causes: &[(&'a str, u64, &str)]) -> Top<'a> {
        let lines = causes.iter().map(|c| c.1).max().unwrap_or(0);
        Top {
            classes: causes
                .iter()
                .filter(|c| lines > 0 && c.1 == lines)
                .map(|c| c.0)
                .collect(),
            lines,
        }
    }

    /// `most: {how}` for one cause, `most, tied at N lines each: {how}; and {how}` for
    /// several (a tie said as a tie), `{none}` without any.
    pub fn said(&self, how: impl Fn(&str) -> String, none: &str) -> String {
        match self.classes.as_slice() {
            [] => none.to_string(),
            [one] => format!("most: {}", how(one)),
            many => format!(
                "most, tied at {} lines each: {}",
                self.lines,
                many.iter()
                    .map(|c| how(c))
                    .collect::<Vec<_>>()
                    .join("; and ")
            ),
        }
    }
}

/// [`error_share_rule`], with `retried`: given the top causes, Some(evidence) when the
/// requests behind the lines were measured to have reached a peer anyway (nginx
/// retried them elsewhere): the verdict is then a warning, never critical.
fn error_share_rule_with(
    inp: &Inputs,
    group: &str,
    id: &str,
    advice: impl Fn(f64, u64, u64, &Top) -> String,
    retried: impl Fn(&Top) -> Option<serde_json::Value>,
    out: &mut Vec<Verdict>,
) {
    let Some(e) = inp.nginx_errors.as_ref().filter(|e| e.readable) else {
        return;
    };
    let sifted = sift(inp, group, group_counts(e, group));
    let causes = sifted.causes;
    let n: u64 = causes
        .iter()
        .map(|c| c.1)
        .sum::<u64>()
        .min(sifted.cap.unwrap_or(u64::MAX));
    // A share needs an exact request count (rule one: no advice from an estimate).
    // The global exact count (stub_status or uprobes); None: unknown, no share.
    let Some(requests) = inp.requests else {
        return;
    };
    if n < REFUSED_MIN || requests == 0 {
        return;
    }
    let share = (n as f64 / requests as f64).min(1.0);
    if share < REFUSED_MIN_SHARE {
        return;
    }
    let top = Top::of(&causes);
    let mut evidence = BTreeMap::new();
    evidence.insert(
        if group == "refused" {
            "refused"
        } else {
            "failed"
        },
        serde_json::json!(n),
    );
    evidence.insert("requests", serde_json::json!(requests));
    evidence.insert(
        "requests_source",
        serde_json::json!(inp.requests_source.name()),
    );
    evidence.insert("share", r3(share));
    evidence.insert(
        "by_cause",
        serde_json::json!(causes
            .iter()
            .map(|(c, k, _)| (c.to_string(), *k))
            .collect::<BTreeMap<_, _>>()),
    );
    evidence.insert("error_log", serde_json::json!(e.path));
    evidence.extend(sifted.evidence);
    let mut directives: Vec<&str> = Vec::new();
    for d in causes.iter().map(|c| c.2) {
        if !directives.contains(&d) {
            directives.push(d);
        }
    }
    let retried = retried(&top);
    let critical = share >= REFUSED_CRITICAL_SHARE && retried.is_none();
    if let Some(r) = retried {
        evidence.insert("retried", r);
    }
    out.push(Verdict::new(
        id,
        if critical {
            Severity::Critical
        } else {
            Severity::Warning
        },
        evidence,
        &directives,
        advice(share, n, requests, &top),
    ));
}

/// `requests_refused`: nginx refused requests itself (limit_req, limit_conn; 503 by
/// default), counted from its error log against the exact request count.
pub fn requests_refused(inp: &Inputs, out: &mut Vec<Verdict>) {
    error_share_rule(
        inp,
        "refused",
        "requests_refused",
        |share, n, requests, top| {
            // Trial 9: `burst=10 nodelay` set, and the advice said to allow bursts;
            // trial 10: one location with burst=5, one without, and "no burst allowed".
            let limit_req = limit_req_advice(inp);
            let how = |c: &str| {
                match c {
                "limit_req" => limit_req.clone(),
                "limit_conn" => "by limit_conn (\"limiting connections\" in nginx's error log; answered with limit_conn_status, 503 by default): raise the limit_conn number or the zone's key granularity".to_string(),
                _ => "by nginx's own limits".to_string(),
            }
            };
            // "most by limit_req", as before; a tie says so.
            let most = top
                .said(how, "most by nginx's own limits")
                .replacen("most: ", "most ", 1);
            format!(
                "{:.0}% of the {requests} requests ({n}) were refused by nginx itself, {most}",
                share * 100.0
            )
        },
        out,
    );
}

/// `requests_refused`'s words on limit_req, by what the configuration read sets: no
/// `burst=` anywhere (refused at once: allow bursts), `burst=` everywhere (refused past
/// the burst: raise it or the rate), both (each said with its places: which location
/// refused is not in the error log's line), or not read (both, hedged).
fn limit_req_advice(inp: &Inputs) -> String {
    const HEAD: &str = "by limit_req (\"limiting requests\" in nginx's error log; answered with limit_req_status, 503 by default)";
    const AT_ONCE: &str = "allow bursts with `limit_req zone=... burst=N` (nodelay serves them at once instead of delaying them), or raise the zone's rate";
    const PAST: &str = "raise burst=N or the zone's rate (nodelay changes when a burst is served, not how many are refused)";
    let Some(cfg) = inp.config.as_ref() else {
        return format!("{HEAD}: a client over the zone's rate is refused at once where no burst is set, past its burst where one is (the configuration was not read); {AT_ONCE}");
    };
    let places = |burst: bool| -> Vec<String> {
        cfg.values
            .iter()
            .filter(|v| v.directive == "limit_req" && v.value.contains("burst=") == burst)
            .take(4)
            .map(|v| format!("{}: limit_req {}", v.scope, v.quoted()))
            .collect()
    };
    let (with, without) = (places(true), places(false));
    match (with.is_empty(), without.is_empty()) {
        (false, true) => format!("{HEAD}: a burst is allowed where it is set ({}), and a client past its burst over the zone's rate is refused; {PAST}", with.join("; ")),
        (false, false) => format!("{HEAD}: where a burst is set ({}) a client past it is refused: {PAST}; where none is ({}) a client over the rate is refused at once: {AT_ONCE}; which location refused is not in nginx's line", with.join("; "), without.join("; ")),
        (true, false) => format!("{HEAD}: a client over the zone's rate, or bursty under it, with no burst allowed is refused at once; {AT_ONCE}"),
        (true, true) => format!("{HEAD}: no limit_req was found in the configuration read; a client over the zone's rate is refused at once where no burst is set, past its burst where one is; {AT_ONCE}"),
    }
}

/// `upstream_errors`: requests that failed on the upstream side inside nginx (timeouts,
/// refused connections, no live upstreams; 502/504), from its error log.
pub fn upstream_errors(inp: &Inputs, out: &mut Vec<Verdict>) {
    // Measured first from what the clients got (the access log), else from the
    // connects the kernel counted.
    // Not from the connects when the configuration retries nothing.
    let no_retry = next_upstream_off(inp);
    let retried = |top: &Top| {
        super::outcome_rules::clients_unharmed(inp)
            .or_else(|| connects_retried(inp, top).filter(|_| no_retry.is_none()))
    };
    error_share_rule_with(
        inp,
        "upstream",
        "upstream_errors",
        |share, n, requests, top| {
            upstream_errors_advice(inp, no_retry.as_deref(), share, n, requests, top)
        },
        retried,
        out,
    );
    let Some(v) = out.last_mut().filter(|v| v.id == "upstream_errors") else {
        return;
    };
    if let Some(by_peer) = super::upstream_failures::by_peer_evidence(inp) {
        v.evidence.insert("by_peer".into(), by_peer);
    }
    reset_directive(inp, &mut v.directives);
    // Trial 17: a failing peer's `max_fails=3 fail_timeout=5s` was only in the
    // evidence; what they do to it belongs in the advice and the directives.
    if let Some((servers, applies)) = super::upstream_down::failing_servers(inp) {
        v.advice.push_str(&servers);
        if applies {
            v.directives
                .extend(["max_fails".to_string(), "fail_timeout".to_string()]);
        }
    }
}

/// The reset class's directive (the peer's `upstream server`) with `keepalive_timeout`
/// added only when nginx may have reused an idle pooled connection (the same evidence
/// as the advice: [`super::upstream_failures::pool`] kept or unknown): a reset with no
/// pool kept is the peer's doing. A directive recorded with keepalive_timeout in it
/// (recordings made before the class row dropped it) is said the same way.
fn reset_directive(inp: &Inputs, directives: &mut [String]) {
    let Some(class) = inp
        .nginx_errors
        .as_ref()
        .and_then(|e| e.classes.get("upstream_reset"))
        .filter(|c| c.count > 0)
    else {
        return;
    };
    let peers = super::upstream_failures::peers_of(inp, "upstream_reset");
    let names: Vec<&str> = peers
        .iter()
        .map(|p| p.split(" (").next().unwrap_or(p))
        .collect();
    let bare = class.directive.replace(" / keepalive_timeout", "");
    let said = match super::upstream_failures::pool(inp, &names) {
        super::upstream_failures::Pool::None(_) => bare,
        _ => format!("{bare} / keepalive_timeout"),
    };
    for d in directives.iter_mut() {
        if *d == class.directive {
            *d = said.clone();
        }
    }
}

/// What one upstream error class means (502/504), with the peers nginx's error log
/// names for it.
fn upstream_how(inp: &Inputs, class: &str) -> String {
    let how = match class {
        "upstream_read_timeout" => "upstream timed out reading the response (504): the upstream is slow; proxy_read_timeout bounds the wait",
        "upstream_connect_timeout" => "upstream timed out while connecting (a 504 unless another peer answered): proxy_connect_timeout; the upstream is not accepting",
        "upstream_send_timeout" => "upstream timed out while sending the request (504): proxy_send_timeout",
        "upstream_connect_failed" => "connect() to the upstream failed (a 502 unless another peer answered): refused (down), a unix socket missing or not permitted: the errno in nginx's error-log line says which",
        "no_live_upstreams" => "no live upstreams (502): every server of the upstream block is marked failed (max_fails/fail_timeout)",
        "upstream_prematurely_closed" => "upstream closed the connection before answering (502)",
        "upstream_header_too_big" => "upstream sent a header larger than proxy_buffer_size (502)",
        "resolver" => "the upstream's name could not be resolved (502): check resolver and resolver_timeout",
        "upstream_addr_unavailable" => "connect() to the upstream failed with EADDRNOTAVAIL (502): the local ports for it are used up by connections in TIME-WAIT; keep upstream connections alive (`keepalive` in the upstream block, proxy_http_version 1.1, proxy_set_header Connection \"\") or widen net.ipv4.ip_local_port_range",
        // Names its peers itself.
        "upstream_reset" => return super::upstream_failures::reset_said(inp),
        "upstream_invalid_response" => "the upstream sent an invalid response (502)",
        "upstream_cut_mid_response" => "the upstream cut responses in their body (nginx: 'while reading upstream': a reset, a close before the length it announced, or proxy_read_timeout between two reads), after their status and header had gone to the client: each client got a truncated response under the upstream's status (a 200 in the access log, no 5xx), an error for it only if it checks the length; the peer crashed or aborted mid-response, or a proxy or firewall between cut the connection",
        "upstream_ssl" => "the upstream's TLS certificate failed verification (502)",
        _ => "errors talking to the upstream (502/504)",
    };
    let peers = super::upstream_failures::peers_of(inp, class);
    // nginx writes the block's name there when no server of it is live.
    let what = if class == "no_live_upstreams" {
        "upstream block"
    } else {
        "peer"
    };
    if peers.is_empty() {
        how.to_string()
    } else {
        format!("{how} ({what}: {})", peers.join(", "))
    }
}

/// upstream_errors' advice: the lines against the requests, the top cause (or the tied
/// ones) with their peers, the EADDRNOTAVAIL chain, what the clients got.
/// `no_retry`: [`next_upstream_off`].
fn upstream_errors_advice(
    inp: &Inputs,
    no_retry: Option<&str>,
    share: f64,
    n: u64,
    requests: u64,
    top: &Top,
) -> String {
    let most = top.said(
        |c| upstream_how(inp, c),
        "most: errors talking to the upstream (502/504)",
    );
    // Connects that found no local port are counted against the peers too
    // (max_fails): disabled servers and "no live upstreams" can follow from
    // them while the peers are healthy. Said whenever they are there.
    let ports_out = log_count(inp, "upstream_addr_unavailable");
    let chain = if ports_out > 0 && !top.classes.contains(&"upstream_addr_unavailable") {
        format!(
            "; {ports_out} of them were connects that failed with EADDRNOTAVAIL (no local port left): nginx counts those failures against the peers (max_fails), so disabled servers and `no live upstreams` can follow while the peers are healthy; keep upstream connections alive (`keepalive` in the upstream block, proxy_http_version 1.1, proxy_set_header Connection \"\") or widen net.ipv4.ip_local_port_range"
        )
    } else {
        String::new()
    };
    let outcome = match super::outcome_rules::clients_saw(inp) {
        Some(saw) => saw,
        None => match connects_retried(inp, top).filter(|_| no_retry.is_none()) {
            Some(_) => format!(
                "; yet the workers established at least as many upstream connections as there were requests ({}, connect() and SO_ERROR in the kernel): consistent with nginx having retried the failed connects on another peer (proxy_next_upstream), which makes these lines retried requests, not failed ones (not proven per request: subrequests such as auth_request also connect); the failing peer costs each retried request a connect attempt",
                established(inp)
            ),
            None => match no_retry {
                Some(off) => format!(
                    "; proxy_next_upstream is off in every location that proxies ({off}): nginx tries no other peer after a failed try, so each line is a request answered 502/504 (a subrequest's, such as auth_request's, fails its parent)"
                ),
                None => super::outcome_rules::clients_saw_at_least(inp).unwrap_or_else(|| "; how many clients got an error response is not measured (nginx logs the same line when proxy_next_upstream retries the request on another peer; an access log with $status holding every request would tell)".to_string()),
            },
        },
    };
    let hops = if inp.own_hops().is_some() {
        " nginx counted, its own hops to its own listener among them"
    } else {
        ""
    };
    format!(
        "nginx logged {n} upstream errors for {requests} requests{hops} ({:.0}%), {most}{chain}{outcome}{}",
        share * 100.0,
        super::fd_upstream::ports_and_peers(inp, ports_out > 0)
    )
}

/// `proxy_next_upstream off` in every location that proxies, from the configuration
/// read (each location's effective value, inherited or set; none modified since the
/// load): the places said (at most 4), else None (not read, a location that retries,
/// or none that proxies).
fn next_upstream_off(inp: &Inputs) -> Option<String> {
    let cfg = inp
        .config
        .as_ref()
        .filter(|k| k.is_read() && !k.changed_since_load())?;
    let values: Vec<_> = cfg.proxied("proxy_next_upstream").collect();
    if values.is_empty() || values.iter().any(|v| v.value != "off") {
        return None;
    }
    let mut at: Vec<String> = values.iter().map(|v| v.at.clone()).collect();
    at.dedup();
    at.truncate(4);
    Some(format!("proxy_next_upstream off: {}", at.join(", ")))
}

/// Upstream connections the workers established in the period (kernel-counted).
fn established(inp: &Inputs) -> u64 {
    inp.workers.iter().map(|w| w.upstream_established).sum()
}

/// Whether the connect failures behind `top` were measured to have been retried: the
/// top causes are connect failures, connects are counted all the time (`--detail full`),
/// and the workers established at least as many upstream connections as there were
/// requests (each request reached a peer; reuse from a keepalive pool only makes the
/// established count smaller, so it cannot fake this). Some(evidence) then.
fn connects_retried(inp: &Inputs, top: &Top) -> Option<serde_json::Value> {
    let connect_failures = !top.classes.is_empty()
        && top
            .classes
            .iter()
            .all(|c| matches!(*c, "upstream_connect_failed" | "upstream_connect_timeout"));
    if !connect_failures || inp.detail.is_some() {
        return None;
    }
    let requests = inp.requests?;
    let est = established(inp);
    (requests > 0 && est >= requests).then(|| {
        serde_json::json!({
            "upstream_established": est,
            "requests": requests,
            "source": "connect()/getsockopt(SO_ERROR) tracepoints: established upstream connections >= requests",
        })
    })
}

/// `keepalive_requests_low`: requests per connection pinned at a small integer under
/// connection churn: nginx's keepalive_requests closing each connection after N
/// requests. Needs exact requests and nginx's connection gauge.
///
/// A mean near an integer proves nothing by itself (any mean from 24.5 up is within
/// 2% of some integer), so the rule only fires when the mean can be off N by no more
/// than what connections open at the period's edges explain: with `active`
/// connections open at the end (stub_status, and about as many carried in from before
/// the period), the mean is within `2 N active / accepts` (+0.01) of N, and that slack
/// must be under [`KEEPALIVE_REQUESTS_MAX_SLACK`]. Connections that carried no request
/// at all (abandoned TLS handshakes, nginx's own `accepted - handled` drops) pull the
/// mean below any N: more than 1% of them and the mean says nothing (no verdict). When
/// abandoned handshakes are counted only in the detail windows, their count over the
/// windows' coverage stands in for the period's (it only ever holds the verdict back).
/// Connections closed before their client sent a byte (`tcp_sock.bytes_received` at
/// the close: spare connections, health checks that only connect) are counted
/// exactly: the mean is over the accepts less those.
/// Ruled out by what is measured: the clients closing most connections first, or a
/// configuration (read) whose keepalive_requests is nowhere N.
pub fn keepalive_requests_low(inp: &Inputs, out: &mut Vec<Verdict>) {
    let Some(requests) = inp.requests.filter(|_| inp.accepts_known()) else {
        return;
    };
    let Some(active) = inp.connections_active else {
        return;
    };
    let accepts: u64 = inp.workers.iter().map(|w| w.accepts).sum();
    if accepts < KEEPALIVE_REQUESTS_MIN_ACCEPTS {
        return;
    }
    let Some((carried, unused)) = carried_requests(inp, accepts) else {
        return;
    };
    let per_conn = requests as f64 / carried as f64;
    let n = per_conn.round() as u64;
    if !(2..=KEEPALIVE_REQUESTS_LOW_MAX).contains(&n) {
        return;
    }
    let Some((slack, below, ended_by_client)) = pinned_at(inp, per_conn, n, active, carried) else {
        return;
    };
    let Some(configured) = keepalive_requests_at(inp, n) else {
        return;
    };
    // Without the configuration read, clients that closed most connections first
    // (measured) sent their N requests and left. With keepalive_requests N read, who
    // closed first does not rule it out: nginx announces the close in the response
    // (`Connection: close`) and writes its access log before close(), and a client
    // that closes on reading the response often sends its FIN first.
    if configured.is_none() && super::conn_verdicts::clients_closed_most(inp) {
        return;
    }
    let mut evidence = BTreeMap::new();
    evidence.insert("accepts", serde_json::json!(accepts));
    evidence.insert("requests", serde_json::json!(requests));
    evidence.insert("requests_per_connection", r3(per_conn));
    let over = if unused > 0 {
        evidence.insert("closed_without_data", serde_json::json!(unused));
        format!("{carried} connections that carried data; {unused} more closed before their client sent a byte (tcp_sock.bytes_received)")
    } else {
        format!("{accepts} connections")
    };
    evidence.insert("pinned_at", serde_json::json!(n));
    evidence.insert("connections_open_at_end", serde_json::json!(active));
    if ended_by_client > 0 {
        evidence.insert(
            "connections_ended_by_client_or_reset",
            serde_json::json!(ended_by_client),
        );
        evidence.insert("tolerance_below", r3(below));
    }
    evidence.insert("tolerance", r3(slack));
    if inp.period_s > 0.0 {
        evidence.insert("accepts_per_s", r3(accepts as f64 / inp.period_s));
    }
    out.push(Verdict::new(
        "keepalive_requests_low",
        Severity::Warning,
        evidence,
        &["keepalive_requests"],
        match configured {
            Some(at) => format!(
                "requests per connection sit at {n} ({per_conn:.2} over {over}) and the configuration sets keepalive_requests {}: nginx closes a keepalive connection after that many requests, so every {n} requests a client reconnects (a TCP handshake, and TLS if any); raise keepalive_requests",
                at.join(", ")
            ),
            None => format!(
                "requests per connection sit at {n} ({per_conn:.2} over {over}): nginx closes a keepalive connection after keepalive_requests requests (default 1000), so every {n} requests a client reconnects (a TCP handshake, and TLS if any); raise keepalive_requests. (The mean alone cannot tell it from clients that themselves send exactly {n} requests per connection, and the configuration is not read: check keepalive_requests in it.)"
            ),
        },
    ));
}

/// Whether a mean of `per_conn` requests over `carried` connections sits at `n`, with
/// `active` connections open at the end (nginx's gauge): the tolerance either side
/// (`slack`), below (`below`, with the connections their clients ended early) and
/// those connections; None when it does not, or the edges leave N ambiguous.
fn pinned_at(
    inp: &Inputs,
    per_conn: f64,
    n: u64,
    active: u64,
    carried: u64,
) -> Option<(f64, f64, u64)> {
    // Connections open at the period's edges: those open at its end hold fewer than
    // N requests in it, those open at its start (as many, by nginx's gauge) more.
    let slack = n as f64 * 2.0 * active as f64 / carried as f64 + 0.01;
    if slack > KEEPALIVE_REQUESTS_MAX_SLACK {
        return None;
    }
    // Below N, also the connections their clients ended (a FIN or a reset) before
    // their Nth request: a load generator's at its end (this machine: wrk's 10 resets
    // and 1 FIN left a mean of 49.92 at keepalive_requests 50, with none open, and no
    // verdict). Counted only where a client's FIN racing nginx's `Connection: close`
    // is nginx's (`fin_unread_told_apart`), and never so far that N + 1 could
    // explain the mean.
    let ended_by_client = inp
        .connections
        .as_ref()
        .filter(|c| c.fin_unread_told_apart)
        .map_or(0, |c| {
            let t = c.total().with_data();
            t.closed_by_client + t.closed_by_reset
        });
    let below = slack + n as f64 * ended_by_client as f64 / carried as f64;
    let pinned = (per_conn - n as f64).abs() <= slack
        || (per_conn < n as f64
            && n as f64 - per_conn <= below
            && per_conn < (n + 1) as f64 - below);
    pinned.then_some((slack, below, ended_by_client))
}

/// Of `accepts`, the connections that carried requests, and those closed before their
/// client sent a byte (counted exactly at the close, `tcp_sock.bytes_received`: left
/// out of the mean). None when too few carried any, or when more than 1% may have
/// carried none uncounted (abandoned TLS handshakes, nginx's `accepted - handled`
/// drops): those counted only in the detail windows (libssl sampled) are scaled by
/// the windows' coverage, an estimate used only to hold the verdict back, never to
/// fire it; with no coverage known there is no verdict.
fn carried_requests(inp: &Inputs, accepts: u64) -> Option<(u64, u64)> {
    let abandoned = match inp.tls.as_ref() {
        None => 0,
        Some(t) if !t.libssl_sampled => t.abandoned,
        Some(t) => {
            let c = inp
                .detail
                .as_ref()
                .map(|d| d.coverage)
                .filter(|c| *c > 0.0)?;
            (t.abandoned as f64 / c).ceil() as u64
        }
    };
    let zero_request = abandoned + inp.stub_dropped.unwrap_or(0);
    if zero_request.saturating_mul(100) > accepts {
        return None;
    }
    let unused = inp.closed_without_data();
    let carried = accepts.saturating_sub(unused);
    (carried >= KEEPALIVE_REQUESTS_MIN_ACCEPTS).then_some((carried, unused))
}

/// The places the configuration read sets keepalive_requests to `n` (`value (at)`,
/// a value on disk possibly not loaded counted as one): Some(None) when the
/// configuration is not read (or names no value), None when it is read and sets `n`
/// nowhere (nginx does not close after `n` requests).
pub(crate) fn keepalive_requests_at(inp: &Inputs, n: u64) -> Option<Option<Vec<String>>> {
    // The servers that carried the traffic: an idle server's value is no cause.
    let Some(cfg) = inp.served_config() else {
        return Some(None);
    };
    let values: Vec<_> = cfg.everywhere("keepalive_requests").collect();
    if values.is_empty() {
        return Some(None);
    }
    let at: Vec<String> = values
        .iter()
        .filter(|v| {
            v.not_loaded
                || if v.is_default() {
                    crate::model::config_version::keepalive_requests_default_may_be(&v.value, n)
                } else {
                    v.value.trim().parse::<u64>() == Ok(n)
                }
        })
        .map(|v| v.quoted())
        .collect();
    (!at.is_empty()).then_some(Some(at))
}

/// `cpu_throttled`: the workers' cgroup CPU quota ran out in at least
/// [`THROTTLED_MIN_SHARE`] of its periods (`cpu.stat`).
pub fn cpu_throttled(inp: &Inputs, out: &mut Vec<Verdict>) {
    let Some(q) = &inp.cpu_quota else { return };
    let (Some(periods), Some(throttled)) = (q.nr_periods, q.nr_throttled) else {
        return;
    };
    if periods == 0 || throttled < THROTTLED_MIN_PERIODS {
        return;
    }
    let share = throttled as f64 / periods as f64;
    if share < THROTTLED_MIN_SHARE {
        return;
    }
    let workers = inp.workers.iter().filter(|w| w.alive).count();
    let want = workers_for_quota(q.quota_cpus);
    let mut evidence = BTreeMap::new();
    evidence.insert("cgroup", serde_json::json!(q.cgroup));
    evidence.insert("quota_cpus", r3(q.quota_cpus));
    evidence.insert("quota_us", serde_json::json!(q.quota_us));
    evidence.insert("period_us", serde_json::json!(q.period_us));
    evidence.insert("nr_periods", serde_json::json!(periods));
    evidence.insert("nr_throttled", serde_json::json!(throttled));
    evidence.insert("throttled_periods_share", r3(share));
    if let Some(s) = q.throttled_s {
        evidence.insert("throttled_s", r3(s));
        if inp.period_s > 0.0 {
            evidence.insert("throttled_time_share", r3((s / inp.period_s).min(1.0)));
        }
    }
    evidence.insert("workers", serde_json::json!(workers));
    evidence.insert("online_cpus", serde_json::json!(q.online_cpus));
    let sizing = if workers as u64 > want {
        format!(
            "; {workers} workers share {} CPUs: set worker_processes {want} (the quota rounded up), not auto, which counts the machine's {} CPUs and not the quota",
            q.quota_cpus,
            q.online_cpus.map(|n| n.to_string()).unwrap_or_else(|| "online".into()),
        )
    } else {
        format!("; worker_processes ({workers}) already fits the quota: raise the quota or lower the load")
    };
    out.push(Verdict::new(
        "cpu_throttled",
        if share >= 0.5 {
            Severity::Critical
        } else {
            Severity::Warning
        },
        evidence,
        &["worker_processes"],
        format!(
            "the workers' cgroup {} has a CPU quota of {} CPUs ({} us per {} us) and ran out of it in {:.0}% of its periods ({throttled} of {periods}{}): while throttled, no worker runs and every connection waits{sizing}",
            q.cgroup,
            q.quota_cpus,
            q.quota_us,
            q.period_us,
            share * 100.0,
            q.throttled_s
                .map(|s| format!(", stopped {s:.2} s"))
                .unwrap_or_default(),
        ),
    ));
}

/// Median request duration (uprobes) at or above which requests are slow, ns.
pub const SLOW_REQUEST_P50_NS: u64 = 100_000_000;
/// Busy share (outside epoll waits) under which every worker is idle.
pub const IDLE_BUSY_SHARE: f64 = 0.20;
/// Requests needed before request latency is judged.
pub const SLOW_MIN_REQUESTS: u64 = 20;

/// `slow_requests_idle_workers`: requests take long (median from the uprobes) while
/// every worker is idle most of the period: the time goes outside the workers (an
/// upstream, a slow client, the disk), not to nginx's CPU.
pub fn slow_requests_idle_workers(inp: &Inputs, out: &mut Vec<Verdict>) {
    if inp.period_s <= 0.0 {
        return;
    }
    let live: Vec<_> = inp.workers.iter().filter(|w| w.alive).collect();
    // Request latency is per worker, and so are the weights: every live worker's own
    // request count must be known (the uprobes); nginx's global total is not enough.
    let Some(counts) = live
        .iter()
        .map(|w| w.requests)
        .collect::<Option<Vec<u64>>>()
    else {
        return;
    };
    let requests: u64 = counts.iter().sum();
    if requests < SLOW_MIN_REQUESTS {
        return;
    }
    // The request-weighted median of the workers' medians (each a log2-histogram
    // estimate, within a factor of 2).
    let p50 = live
        .iter()
        .filter_map(|w| w.request_p50_ns.map(|p| (p, w.requests.unwrap_or(0))))
        .map(|(p, n)| p as f64 * n as f64)
        .sum::<f64>()
        / requests as f64;
    let p99 = live
        .iter()
        .filter_map(|w| w.request_p99_ns)
        .max()
        .unwrap_or(0);
    // A worker without a measured loop is idle if it served nothing; one that served
    // requests without a measured loop leaves the rule unjudged.
    let detail_s = inp.detail_s();
    let busy: Vec<Option<f64>> = live
        .iter()
        .map(|w| match w.busy_ns {
            // Busy time is detail: a share of the seconds it was counted (in windows if sampled).
            Some(b) if detail_s > 0.0 => Some(b as f64 / 1e9 / detail_s),
            Some(_) => None,
            None if w.requests.unwrap_or(0) == 0 => Some(0.0),
            None => None,
        })
        .collect();
    let Some(busy) = busy.into_iter().collect::<Option<Vec<f64>>>() else {
        return;
    };
    let max_busy = busy.iter().cloned().fold(0.0, f64::max);
    if (p50 as u64) < SLOW_REQUEST_P50_NS || max_busy >= IDLE_BUSY_SHARE {
        return;
    }
    let mut evidence = BTreeMap::new();
    evidence.insert("requests", serde_json::json!(requests));
    evidence.insert("request_p50_ms", r3(p50 / 1e6));
    evidence.insert("request_p99_ms", r3(p99 as f64 / 1e6));
    evidence.insert("max_worker_busy_share", r3(max_busy));
    if inp.detail.is_some() {
        evidence.insert("busy_share_of", serde_json::json!("in-window seconds"));
        evidence.insert("in_window_s", r3(detail_s));
    }
    let upstream: u64 = inp
        .nginx_errors
        .as_ref()
        .map(|e| group_counts(e, "upstream").iter().map(|c| c.1).sum())
        .unwrap_or(0);
    evidence.insert("upstream_error_lines", serde_json::json!(upstream));
    out.push(Verdict::new(
        "slow_requests_idle_workers",
        Severity::Warning,
        evidence,
        &["proxy_pass / upstream", "proxy_read_timeout", "aio threads"],
        format!(
            "requests take {:.0} ms at the median (p99 {:.0} ms) while no worker was busy more than {:.0}% of the time: the time is spent waiting outside the workers, on an upstream (look at its latency; proxy_read_timeout bounds the wait), on slow clients, or on blocking disk reads (aio threads), not on nginx's CPU",
            p50 / 1e6,
            p99 as f64 / 1e6,
            max_busy * 100.0
        ),
    ));
}
