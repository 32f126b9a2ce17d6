//! Verdicts on the workers' lifecycle (the report's `lifecycle`, see
//! [`crate::model::worker_lifecycle`]): old generations piling up after reloads
//! (`worker_shutdown_timeout`), and workers dying on signals (`worker_crashes`). Both
//! stay silent when the lifecycle is unknown.

use std::collections::BTreeMap;

use serde_json::json;

use super::inputs::Inputs;
use crate::model::{
    connections::PortLifecycle, worker_lifecycle::is_crash_signal, Severity, Verdict,
};

/// `worker_shutdown_timeout` fires when at least this many reload generations have
/// workers still shutting down at the end of the period...
pub const DRAINING_GENERATIONS_MIN: usize = 2;

/// ...or when one worker has been shutting down longer than this, seconds (from the
/// refresh that first saw its title change, or from attach if it was draining then).
pub const DRAINING_SECONDS_MAX: f64 = 60.0;

/// `worker_crashes` fires at this many worker exits on a signal in the period.
pub const SIGNAL_EXITS_MIN: u64 = 1;

/// What `worker_crashes` says about nginx's stub_status gauges.
pub const GAUGES_NOTE: &str = "nginx's stub_status gauges (active, reading, writing, waiting) still count the connections a worker held when it died on a signal: nginx never decrements them for it, so after a crash they stay too high until nginx is restarted";

/// `worker_shutdown_timeout`: reloads leave old workers draining (long-lived
/// connections: streaming, WebSocket, long polls, slow downloads) and they pile up,
/// each holding its memory and connections.
pub fn worker_shutdown_timeout(inp: &Inputs, out: &mut Vec<Verdict>) {
    let Some(l) = &inp.lifecycle else {
        return;
    };
    let gens = l.draining.len();
    let longest = l.draining.iter().map(|d| d.draining_s).fold(0.0, f64::max);
    let configured = configured_shutdown_timeout(inp);
    // With a configured timeout, one generation is what was asked for, or past it:
    // `worker_shutdown_timeout_exceeded` says so.
    let long = configured.is_none() && longest > DRAINING_SECONDS_MAX;
    if gens == 0 || (gens < DRAINING_GENERATIONS_MIN && !long) {
        return;
    }
    let workers: usize = l.draining.iter().map(|d| d.workers.len()).sum();
    let sum = |f: fn(&crate::model::worker_lifecycle::DrainingGeneration) -> Option<u64>| {
        l.draining.iter().map(f).sum::<Option<u64>>()
    };
    let clients = sum(|d| d.client_connections);
    let rss = sum(|d| d.rss_bytes);
    let mut ev = BTreeMap::new();
    ev.insert("draining_generations", json!(gens));
    ev.insert("workers_shutting_down", json!(workers));
    ev.insert("longest_draining_s", json!(longest));
    ev.insert("client_connections_held", json!(clients));
    ev.insert(
        "upstream_connections_held",
        json!(sum(|d| d.upstream_connections)),
    );
    ev.insert("rss_bytes_held", json!(rss));
    ev.insert("generations", json!(l.draining));
    ev.insert("state_source", json!(l.state_source));
    ev.insert(
        "thresholds",
        json!(format!(
            "{DRAINING_GENERATIONS_MIN}+ generations shutting down, or one worker over {DRAINING_SECONDS_MAX} s"
        )),
    );
    let held = match (clients, rss) {
        (Some(c), Some(r)) => format!(
            ", holding {c} client connections and {:.1} MiB",
            r as f64 / (1 << 20) as f64
        ),
        _ => String::new(),
    };
    let advice = match &configured {
        None => "nginx lets an old worker run until its last connection ends; set worker_shutdown_timeout (e.g. 30s) so old workers close what they still hold and exit, or reload less often".to_string(),
        Some((_, q)) => format!("worker_shutdown_timeout is {q}, so reloads come faster than old workers finish: lower it, or reload less often (see worker_shutdown_timeout_exceeded for a worker past it)"),
    };
    out.push(Verdict::new(
        "worker_shutdown_timeout",
        Severity::Warning,
        ev,
        &["worker_shutdown_timeout"],
        format!(
            "{workers} old workers of {gens} reload generations are still shutting down (the longest for {longest:.0} s{held}): {advice}"
        ),
    ));
}

/// The configured `worker_shutdown_timeout`: (seconds, the value quoted with its
/// file:line); None when the configuration is not read or the directive is unset.
fn configured_shutdown_timeout(inp: &Inputs) -> Option<(f64, String)> {
    let v = inp.config.as_ref()?.value("worker_shutdown_timeout")?;
    let s = super::outcome_rules::value_seconds(v)?;
    (s > 0.0).then(|| (s, v.quoted()))
}

/// A draining worker is past the configured timeout when it has been seen shutting
/// down longer than this share of it...
pub const EXCEEDED_SHARE: f64 = 1.1;
/// ...plus this, seconds (the title is read every 500 ms; nginx's timer and its exit).
pub const EXCEEDED_SLACK_S: f64 = 1.0;

/// `worker_shutdown_timeout_exceeded`: a worker still shutting down longer than the
/// configured `worker_shutdown_timeout` (+10% + 1 s), measured from the refresh that
/// first saw its title change (`/proc/<pid>/cmdline`, every 500 ms) or from attach: a
/// lower bound of its drain. nginx closes a draining worker's connections at that
/// timeout, so what keeps it is not measured: connections its shutdown timer does not
/// close, or a worker started under a configuration without the value (the file is
/// read now; its modification time is given). Silent without the configuration or the
/// lifecycle.
pub fn worker_shutdown_timeout_exceeded(inp: &Inputs, out: &mut Vec<Verdict>) {
    let (Some(l), Some((t, q))) = (&inp.lifecycle, configured_shutdown_timeout(inp)) else {
        return;
    };
    let limit = t * EXCEEDED_SHARE + EXCEEDED_SLACK_S;
    let mut over = Vec::new();
    for g in &l.draining {
        let end = g.since_unix_s + g.draining_s;
        for w in &g.workers {
            let s = end - w.since_unix_s;
            if s > limit {
                over.push(json!({
                    "pid": w.pid,
                    "reload_generation": g.reload_generation,
                    "shutting_down_at_least_s": (s * 10.0).round() / 10.0,
                    "since_attach": g.since_attach,
                    "client_connections": w.client_connections,
                    "upstream_connections": w.upstream_connections,
                }));
            }
        }
    }
    if over.is_empty() {
        return;
    }
    let longest = over
        .iter()
        .filter_map(|w| w["shutting_down_at_least_s"].as_f64())
        .fold(0.0, f64::max);
    let clients: Option<u64> = over.iter().map(|w| w["client_connections"].as_u64()).sum();
    let files: Vec<_> = inp
        .config
        .iter()
        .flat_map(|c| &c.files)
        .map(|f| json!({"path": f.path, "mtime_unix_s": f.mtime_unix_s}))
        .collect();
    let mut ev = BTreeMap::new();
    ev.insert("workers_past_timeout", json!(over));
    ev.insert("worker_shutdown_timeout", json!(q));
    ev.insert("config_files", json!(files));
    ev.insert("state_source", json!(l.state_source));
    ev.insert(
        "threshold",
        json!(format!(
            "shutting down longer than {EXCEEDED_SHARE} x worker_shutdown_timeout + {EXCEEDED_SLACK_S} s, from the refresh that first saw the worker's title change (a lower bound)"
        )),
    );
    let held = clients.map_or(String::new(), |c| {
        format!(", still holding {c} client connections")
    });
    // Trial 9: HTTP/3 connections held 1.26's old workers 35 s past a 5 s timeout,
    // uncounted (UDP), while this said "unknown" with no word of them.
    let quic = inp
        .config
        .iter()
        .flat_map(|c| &c.listens)
        .find(|l| l.quic)
        .map(|l| format!("QUIC (HTTP/3) connections, which the configuration listens for (listen {} quic at {}) and which are not counted here (UDP: no TCP socket): nginx keeps a draining worker until they end, at their idle timeout (a `quic client timed out` line in nginx's error log, at info, as each ends); ", l.address, l.at))
        .unwrap_or_default();
    out.push(Verdict::new(
        "worker_shutdown_timeout_exceeded",
        Severity::Warning,
        ev,
        &["worker_shutdown_timeout"],
        format!(
            "{} been shutting down for at least {longest:.0} s{held}, past worker_shutdown_timeout {q}, at which nginx closes what a draining worker holds. What keeps them is unknown here: {quic}connections nginx's shutdown timer does not close, or workers started under a configuration without that value (it is read from the file now; see config_files' modification times against the worker's reload). Look at what they hold (ss -tnp, ls -l /proc/<pid>/fd)",
            match over.len() {
                1 => "1 old worker has".to_string(),
                n => format!("{n} old workers have"),
            }
        ),
    ));
}

/// `worker_crashes`: workers exited on a signal (a crash when SIGSEGV, SIGBUS,
/// SIGABRT, SIGFPE or SIGILL; SIGKILL is the OOM killer or an operator), and nginx
/// started replacements.
pub fn worker_crashes(inp: &Inputs, out: &mut Vec<Verdict>) {
    let Some(l) = &inp.lifecycle else {
        return;
    };
    if l.exits.signal < SIGNAL_EXITS_MIN {
        return;
    }
    let crashes: u64 = l
        .exits
        .by_signal
        .iter()
        .filter(|(s, _)| s.parse::<u8>().is_ok_and(is_crash_signal))
        .map(|(_, n)| n)
        .sum();
    let names = l.exits.signal_lines();
    let mut ev = BTreeMap::new();
    ev.insert("signal_exits", json!(l.exits.signal));
    ev.insert("crash_signal_exits", json!(crashes));
    ev.insert("exits_by_signal", json!(l.exits.by_signal));
    ev.insert("workers", json!(l.signal_exits));
    ev.insert("respawned", json!(l.respawned));
    ev.insert("exit_source", json!(l.exit_source));
    ev.insert("stub_status_gauges", json!(GAUGES_NOTE));
    let dropped = dropped_by_exits(inp);
    ev.insert(
        "client_connections_closed_by_worker_exit",
        dropped
            .as_ref()
            .map_or_else(|why| json!(format!("unknown: {why}")), |n| json!(n)),
    );
    let held = match &dropped {
        Ok(n) => format!(
            "each crash drops the connections that worker held: {n} client connections were closed as their worker exited (tracepoint sock:inet_sock_set_state in the exiting task)"
        ),
        Err(_) => "each crash drops the connections that worker held".to_string(),
    };
    let (severity, advice) = if crashes > 0 {
        (
            Severity::Critical,
            format!(
                "workers died: {}, and nginx started {} in their place; {held}. Let nginx write a core (worker_rlimit_core, working_directory) and look at the backtrace (third-party modules first); {GAUGES_NOTE}",
                names.join(", "),
                l.respawned
            ),
        )
    } else {
        (
            Severity::Warning,
            format!(
                "workers were killed: {}, and nginx started {} in their place (SIGKILL is the OOM killer or an operator: see the kernel log); {held}; {GAUGES_NOTE}",
                names.join(", "),
                l.respawned
            ),
        )
    };
    // A core only says something of a crash: a SIGKILL (the OOM killer, an operator)
    // leaves none, and its directives are not named (trial 13).
    let directives: &[&str] = if crashes > 0 {
        &["worker_rlimit_core", "working_directory"]
    } else {
        &[]
    };
    out.push(Verdict::new(
        "worker_crashes",
        severity,
        ev,
        directives,
        advice,
    ));
}

/// `worker_shutdown_timeout_cut`: draining workers closed connections after their
/// idle sweep at the configured `worker_shutdown_timeout` after the drain began
/// (every close of a kind within 10% + 12 ms, the time measured in the kernel from the
/// `ngx_close_idle_connections` uprobe; lifecycle tracepoints): the timeout cut what
/// was still open. Two kinds, judged apart: closes with nothing of nginx's sent just
/// before (`closed_while_draining_silent`: requests waiting for a response,
/// connections without a whole request) and closes right after nginx's data
/// (`closed_while_draining_after_data`: responses still being sent). Silent when the
/// configuration is not read or no kind's times all match it (the text then says
/// what was measured, without a cause).
pub fn worker_shutdown_timeout_cut(inp: &Inputs, out: &mut Vec<Verdict>) {
    use super::{conn_timeouts::matches_ms, outcome_rules::value_seconds};
    use crate::model::{connections::MsSpan, idle::ms_range};
    let Some(c) = &inp.connections else { return };
    let t = c.total();
    let Some(v) = inp
        .config
        .as_ref()
        .and_then(|c| c.value("worker_shutdown_timeout"))
    else {
        return;
    };
    let Some(ms) = value_seconds(v).map(|s| s * 1000.0) else {
        return;
    };
    // A kind's closes, when there are some and all came at the timeout.
    let at = |n: u64, span: Option<MsSpan>| {
        span.filter(|s| n > 0 && matches_ms(s.min_ms as f64, ms) && matches_ms(s.max_ms as f64, ms))
    };
    let (silent, data) = (
        t.closed_while_draining_silent,
        t.closed_while_draining_after_data,
    );
    let silent_at = at(silent, t.silent_close_after_drain_start);
    let data_at = at(data, t.after_data_close_after_drain_start);
    let Some(span) = MsSpan::union_opt(silent_at, data_at) else {
        return;
    };
    let n = silent_at.map_or(0, |_| silent) + data_at.map_or(0, |_| data);
    let mut ev = BTreeMap::new();
    ev.insert("connections_cut", json!(n));
    ev.insert("closed_while_draining_silent", json!(silent));
    ev.insert("closed_while_draining_after_data", json!(data));
    ev.insert(
        "closed_while_draining_idle",
        json!(t.closed_while_draining_idle),
    );
    ev.insert(
        "silent_ms_after_drain_start",
        json!(t.silent_close_after_drain_start),
    );
    ev.insert(
        "after_data_ms_after_drain_start",
        json!(t.after_data_close_after_drain_start),
    );
    ev.insert("worker_shutdown_timeout", json!(v.quoted()));
    ev.insert(
        "source",
        json!("nginx's closes (tracepoint sock:inet_sock_set_state) by workers after their sweep of idle connections (uprobe and uretprobe on ngx_close_idle_connections), split by whether nginx sent data in the close's last jiffy (tcp_sock.lsndtime); time since the drain began, kernel clock"),
    );
    ev.insert(
        "threshold",
        json!("every close of a kind (silent, after data) within 10% + 12 ms of the configured worker_shutdown_timeout"),
    );
    let h2_ports = inp.config.as_ref().and_then(|k| k.http2_ports());
    let h2_mid = c.mid_response_on(h2_ports.as_deref());
    let (cut, other) = cut_kinds(&t, h2_mid, silent_at.is_some(), data_at.is_some());
    out.push(Verdict::new(
        "worker_shutdown_timeout_cut",
        Severity::Warning,
        ev,
        &["worker_shutdown_timeout"],
        format!(
            "draining workers closed {n} connections {} after their shutdown began: worker_shutdown_timeout {} cut them. Of those, {}.{other}{} Raise worker_shutdown_timeout above your longest requests and streams, or shorten them",
            ms_range(span.min_ms, span.max_ms),
            v.quoted(),
            cut.join("; "),
            // Trial 9: 2 HTTP/3 requests cut beside the 5 TCP ones, unsaid.
            if inp.config.iter().flat_map(|c| &c.listens).any(|l| l.quic) {
                " QUIC (HTTP/3) connections cut then are not among them (UDP: no TCP socket; the configuration listens for them): nginx's access log has their requests (status 000 or 499)."
            } else {
                ""
            }
        ),
    ));
}

/// `worker_shutdown_timeout_cut`'s words for the kinds of draining closes in `t`:
/// those cut at the timeout (`silent_cut`, `data_cut`), then the rest, said apart.
/// `h2_mid`: see `PortLifecycle::silent_split`.
fn cut_kinds(
    t: &PortLifecycle,
    h2_mid: u64,
    silent_cut: bool,
    data_cut: bool,
) -> (Vec<String>, String) {
    use crate::model::{connections::MsSpan, idle::ms_range};
    let (silent, data) = (
        t.closed_while_draining_silent,
        t.closed_while_draining_after_data,
    );
    let (mut cut, mut other) = (Vec::new(), String::new());
    let rest = |n: u64, what: &str, span: Option<MsSpan>| {
        let when = span.map_or(String::new(), |s| {
            format!(" ({} after the drain began)", ms_range(s.min_ms, s.max_ms))
        });
        format!(
            " The other {n} closes {what}{when} are not all at the timeout: not counted as cut."
        )
    };
    if silent_cut {
        cut.push(format!(
            "{silent} with nothing sent by nginx just before: {}",
            t.silent_split(h2_mid)
        ));
    } else if silent > 0 {
        other += &rest(
            silent,
            "with nothing sent by nginx just before",
            t.silent_close_after_drain_start,
        );
    }
    if data_cut {
        cut.push(format!("{data} right after nginx's own data: responses still being sent (their clients got part of them), or a GOAWAY or close_notify nginx wrote as it closed, not told apart"));
    } else if data > 0 {
        other += &rest(
            data,
            "right after nginx's own data",
            t.after_data_close_after_drain_start,
        );
    }
    (cut, other)
}

/// `no_workers`: the master runs no worker process at the end of the period (the
/// tracker's live workers, `/proc`) while connections wait in an open listening
/// socket's accept queue (`queue_now`, sock_diag): nothing accepts them. A WINCH
/// without a binary upgrade, or workers that exited and were not started again.
/// Not when the run ended with the master's exit (`Inputs::master_exited`).
pub fn no_workers(inp: &Inputs, out: &mut Vec<Verdict>) {
    // A master that exited stopped its workers first (`nginx -s stop`, `quit`): its
    // last moments without workers are its shutdown (trial 13: a critical no_workers
    // for an ordinary stop).
    if inp.master_exited || inp.workers.iter().any(|w| w.alive) {
        return;
    }
    let waiting: Vec<(&str, u32)> = inp
        .listen
        .iter()
        .filter(|l| !l.closed && l.queue_now > 0)
        .map(|l| (l.addr.as_str(), l.queue_now))
        .collect();
    let queued: u64 = waiting.iter().map(|(_, q)| *q as u64).sum();
    if queued == 0 {
        return;
    }
    let mut ev = BTreeMap::new();
    ev.insert("workers_running", json!(0));
    ev.insert("accept_queue_now", json!(queued));
    ev.insert("listeners", json!(waiting));
    ev.insert(
        "source",
        json!("live workers of the master (/proc), accept queues (sock_diag, queue_now at the period's end)"),
    );
    out.push(Verdict::new(
        "no_workers",
        Severity::Critical,
        ev,
        &["worker_processes"],
        format!(
            "nginx's master runs no worker process and {queued} connections wait in its accept queues: nothing accepts them. A WINCH without a binary upgrade stops every worker (send HUP to start them again), or workers exited and were not started again (see the worker exits and the error log)"
        ),
    ));
}

/// Client connections closed as their worker exited in the period (the connection
/// lifecycle's `closed_by_worker_exit`), or why that is unknown.
fn dropped_by_exits(inp: &Inputs) -> Result<u64, String> {
    let c = inp.connections.as_ref().ok_or_else(|| {
        inp.connections_not_traced
            .clone()
            .unwrap_or_else(|| "no client connection was counted in the period".into())
    })?;
    if let Some(why) = &c.worker_exit_unknown {
        return Err(why.clone());
    }
    Ok(c.total().closed_by_worker_exit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::worker_lifecycle::{
        DrainingGeneration, DrainingWorker, ExitCounts, LifecycleReport, SignalExit,
    };

    /// A configuration read with `worker_shutdown_timeout value` at /e/n.conf:2.
    fn shutdown_config(value: &str) -> crate::model::config::ConfigReport {
        crate::model::config::ConfigReport {
            values: vec![crate::model::config::ConfigValue::of(
                "worker_shutdown_timeout",
                "main",
                value,
                "/e/n.conf:2",
            )],
            ..Default::default()
        }
    }

    fn generation(g: u32, draining_s: f64, clients: u64) -> DrainingGeneration {
        DrainingGeneration {
            reload_generation: g,
            workers: vec![DrainingWorker {
                pid: 100 + g,
                since_unix_s: 1000.0,
                client_connections: Some(clients),
                upstream_connections: Some(clients),
                rss_bytes: Some(4 << 20),
            }],
            since_unix_s: 1000.0,
            since_attach: false,
            draining_s,
            client_connections: Some(clients),
            upstream_connections: Some(clients),
            rss_bytes: Some(4 << 20),
        }
    }

    fn inputs(draining: Vec<DrainingGeneration>, exits: ExitCounts) -> Inputs {
        Inputs {
            lifecycle: Some(LifecycleReport {
                draining,
                exits,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn ids(inp: &Inputs) -> Vec<String> {
        let mut out = Vec::new();
        worker_shutdown_timeout(inp, &mut out);
        worker_crashes(inp, &mut out);
        out.into_iter().map(|v| v.id).collect()
    }

    #[test]
    fn draining_fires_at_two_generations_or_past_the_time_limit() {
        // One generation, short drain: silent.
        assert!(ids(&inputs(vec![generation(0, 5.0, 3)], ExitCounts::default())).is_empty());
        // One generation at the limit: silent; past it: fires.
        let at = DRAINING_SECONDS_MAX;
        assert!(ids(&inputs(vec![generation(0, at, 3)], ExitCounts::default())).is_empty());
        assert_eq!(
            ids(&inputs(
                vec![generation(0, at + 0.5, 3)],
                ExitCounts::default()
            )),
            ["worker_shutdown_timeout"]
        );
        // Two generations: fires, with the sums in the evidence.
        let inp = inputs(
            vec![generation(0, 5.0, 3), generation(1, 2.0, 4)],
            ExitCounts::default(),
        );
        let mut out = Vec::new();
        worker_shutdown_timeout(&inp, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].evidence["draining_generations"], 2);
        assert_eq!(out[0].evidence["client_connections_held"], 7);
        assert_eq!(out[0].evidence["rss_bytes_held"], 8 << 20);
        assert_eq!(out[0].directives, ["worker_shutdown_timeout"]);
        // Unknown lifecycle: silent.
        assert!(ids(&Inputs::default()).is_empty());
    }

    /// With `worker_shutdown_timeout` configured: a worker past it (+10% + 1 s) fires
    /// `worker_shutdown_timeout_exceeded`; one generation within it is silent; two
    /// generations fire the pile-up without advising to set what is set.
    #[test]
    fn a_configured_shutdown_timeout_is_not_advised_and_a_worker_past_it_is_named() {
        let with = |gens: Vec<DrainingGeneration>, value: &str| {
            let mut inp = inputs(gens, ExitCounts::default());
            inp.config = Some(shutdown_config(value));
            let mut out = Vec::new();
            worker_shutdown_timeout(&inp, &mut out);
            worker_shutdown_timeout_exceeded(&inp, &mut out);
            out
        };
        // 120 s within a 300 s timeout, one generation: what was asked for.
        assert!(with(vec![generation(0, 120.0, 3)], "300s").is_empty());
        // 12 s past a 10 s timeout (limit 12.0 s): named, with what it holds.
        assert!(with(vec![generation(0, 12.0, 3)], "10s").is_empty());
        let out = with(vec![generation(0, 12.5, 3)], "10s");
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].id, "worker_shutdown_timeout_exceeded");
        assert_eq!(out[0].evidence["workers_past_timeout"][0]["pid"], 100);
        assert!(
            out[0].advice.starts_with("1 old worker has been shutting down for at least 12 s, still holding 3 client connections, past worker_shutdown_timeout 10s (/e/n.conf:2)"),
            "{}",
            out[0].advice
        );
        assert!(
            out[0].advice.contains("is unknown here"),
            "{}",
            out[0].advice
        );
        assert!(!out[0].advice.contains("QUIC"), "{}", out[0].advice);
        // Trial 9: with a `listen ... quic`, its uncounted connections are named.
        let mut inp = inputs(vec![generation(0, 12.5, 0)], ExitCounts::default());
        let mut cfg = shutdown_config("10s");
        cfg.listens.push(crate::model::config::ListenValue {
            scope: "server a".into(),
            address: "127.0.0.1:443".into(),
            quic: true,
            at: "/e/n.conf:9".into(),
            ..Default::default()
        });
        inp.config = Some(cfg);
        let mut out = Vec::new();
        worker_shutdown_timeout_exceeded(&inp, &mut out);
        assert!(out[0].advice.contains("What keeps them is unknown here: QUIC (HTTP/3) connections, which the configuration listens for (listen 127.0.0.1:443 quic at /e/n.conf:9) and which are not counted here"), "{}", out[0].advice);
        // Two generations within it: the pile-up, with the value, not "set it".
        let out = with(vec![generation(0, 5.0, 3), generation(1, 2.0, 4)], "30s");
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(
            out[0]
                .advice
                .contains("worker_shutdown_timeout is 30s (/e/n.conf:2), so reloads come faster"),
            "{}",
            out[0].advice
        );
        assert!(
            !out[0].advice.contains("set worker_shutdown_timeout"),
            "{}",
            out[0].advice
        );
        // Unset: no exceeded verdict, the old advice.
        let out = with(
            vec![generation(0, 61.0, 3)],
            "unset (old workers wait for their connections)",
        );
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(
            out[0]
                .advice
                .contains("set worker_shutdown_timeout (e.g. 30s)"),
            "{}",
            out[0].advice
        );
    }

    #[test]
    fn signal_exits_fire_crashes_and_sigsegv_is_critical() {
        let mut exits = ExitCounts {
            graceful: 4,
            ..Default::default()
        };
        // Graceful exits only: silent.
        assert!(ids(&inputs(Vec::new(), exits.clone())).is_empty());
        exits.signal = 1;
        exits.by_signal.insert("11".into(), 1);
        let mut inp = inputs(Vec::new(), exits.clone());
        if let Some(l) = inp.lifecycle.as_mut() {
            l.signal_exits.push(SignalExit {
                pid: 42,
                signal: 11,
                core_dumped: false,
                seen_unix_s: 1.0,
                replaced_by: Some(43),
            });
            l.respawned = 1;
        }
        let mut out = Vec::new();
        worker_crashes(&inp, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].severity, Severity::Critical);
        assert_eq!(out[0].evidence["crash_signal_exits"], 1);
        assert_eq!(out[0].evidence["workers"][0]["pid"], 42);
        assert!(
            out[0].advice.contains("stub_status gauges"),
            "{}",
            out[0].advice
        );
        assert_eq!(
            out[0].evidence["client_connections_closed_by_worker_exit"],
            "unknown: no client connection was counted in the period"
        );
        // The lifecycle counted the dead worker's connections: quoted.
        inp.connections = Some(crate::model::connections::ConnectionsReport {
            ports: vec![crate::model::connections::PortLifecycle {
                port: 80,
                closed_by_worker_exit: 7,
                ..Default::default()
            }],
            ..Default::default()
        });
        let mut out = Vec::new();
        worker_crashes(&inp, &mut out);
        assert_eq!(
            out[0].evidence["client_connections_closed_by_worker_exit"],
            7
        );
        assert!(
            out[0]
                .advice
                .contains("7 client connections were closed as their worker exited"),
            "{}",
            out[0].advice
        );
        // SIGKILL: a warning.
        let mut killed = ExitCounts {
            signal: 1,
            ..Default::default()
        };
        killed.by_signal.insert("9".into(), 1);
        let mut out = Vec::new();
        worker_crashes(&inputs(Vec::new(), killed), &mut out);
        assert_eq!(out[0].severity, Severity::Warning);
        assert!(out[0].advice.contains("SIGKILL"), "{}", out[0].advice);
        assert!(out[0].directives.is_empty(), "{:?}", out[0].directives);
    }

    /// `worker_shutdown_timeout_cut` on 5 idle closes and 3 silent ones at `lo..hi` ms
    /// after the drain began, plus 2 after data at `data` ms, with `value` configured
    /// (or no configuration read).
    fn cut_verdicts(
        value: &str,
        (lo, hi): (u64, u64),
        config: bool,
        data: Option<(u64, u64)>,
    ) -> Vec<Verdict> {
        use crate::model::connections::{sample_report, MsSpan};
        let mut c = sample_report();
        c.ports[0].closed_while_draining = 8;
        c.ports[0].closed_while_draining_idle = 5;
        c.ports[0].closed_while_draining_silent = 3;
        c.ports[0].silent_close_after_drain_start = Some(MsSpan {
            min_ms: lo,
            max_ms: hi,
        });
        if let Some((min_ms, max_ms)) = data {
            c.ports[0].closed_while_draining += 2;
            c.ports[0].closed_while_draining_after_data = 2;
            c.ports[0].after_data_close_after_drain_start = Some(MsSpan { min_ms, max_ms });
        }
        let inp = Inputs {
            connections: Some(c),
            config: config.then(|| shutdown_config(value)),
            ..Default::default()
        };
        let mut out = Vec::new();
        worker_shutdown_timeout_cut(&inp, &mut out);
        out
    }

    /// Silent closes by draining workers at the configured worker_shutdown_timeout
    /// fire `worker_shutdown_timeout_cut`; at another time, without the config, or
    /// with the timeout unset: silent.
    #[test]
    fn draining_closes_at_worker_shutdown_timeout_name_it() {
        let run = |value: &str, lo: u64, hi: u64, config: bool| {
            cut_verdicts(value, (lo, hi), config, None)
        };
        let out = run("1s", 1000, 1008, true);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].directives, ["worker_shutdown_timeout"]);
        assert_eq!(out[0].evidence["closed_while_draining_silent"], 3);
        assert_eq!(
            out[0].evidence["worker_shutdown_timeout"],
            "1s (/e/n.conf:2)"
        );
        assert!(
            out[0].advice.starts_with("draining workers closed 3 connections 1.0 s after their shutdown began: worker_shutdown_timeout 1s (/e/n.conf:2) cut them. Of those, 3 with nothing sent by nginx just before"),
            "{}",
            out[0].advice
        );
        // 1.0-1.5 s: not every close at the timeout.
        assert!(run("1s", 1000, 1500, true).is_empty());
        assert!(run("5s", 1000, 1008, true).is_empty());
        assert!(run("1s", 1000, 1008, false).is_empty());
        assert!(run(
            "unset (old workers wait for their connections)",
            1000,
            1008,
            true
        )
        .is_empty());
    }

    /// Closes right after nginx's data at the timeout (streams cut) join the count;
    /// at other times they are said apart, not counted as cut.
    #[test]
    fn streams_cut_at_worker_shutdown_timeout_are_counted_with_them() {
        let out = cut_verdicts("1s", (1000, 1008), true, Some((996, 1010)));
        assert_eq!(out[0].evidence["connections_cut"], 5);
        let advice = &out[0].advice;
        assert!(
            advice.contains("closed 5 connections 996 ms to 1.0 s after"),
            "{advice}"
        );
        assert!(
            advice.contains("; 2 right after nginx's own data: responses still being sent"),
            "{advice}"
        );
        let out = cut_verdicts("1s", (1000, 1008), true, Some((40, 1003)));
        assert_eq!(out[0].evidence["connections_cut"], 3);
        assert!(out[0].advice.contains("The other 2 closes right after nginx's own data (40 ms to 1.0 s after the drain began) are not all at the timeout"), "{}", out[0].advice);
        // Streams alone at the timeout fire it; silent closes elsewhere are not cut.
        let out = cut_verdicts("1s", (10, 20), true, Some((1000, 1001)));
        assert_eq!(out[0].evidence["connections_cut"], 2);
        assert!(
            out[0]
                .advice
                .contains("The other 3 closes with nothing sent"),
            "{}",
            out[0].advice
        );
    }

    /// No live worker with connections queued: critical; a live worker, or an empty
    /// queue: silent.
    #[test]
    fn no_worker_with_a_queue_is_critical() {
        use crate::analysis::inputs::WorkerInput;
        let listen = |q: u32| crate::model::ListenReport {
            addr: "0.0.0.0:80".into(),
            backlog: 511,
            queue_now: q,
            queue_max: q,
            overflows: 0,
            drops: 0,
            socket_drops: None,
            closed: false,
        };
        let mut inp = Inputs {
            workers: vec![WorkerInput {
                pid: 7,
                alive: false,
                ..Default::default()
            }],
            listen: vec![listen(3)],
            ..Default::default()
        };
        let mut out = Vec::new();
        no_workers(&inp, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].severity, Severity::Critical);
        assert_eq!(out[0].evidence["accept_queue_now"], 3);
        inp.listen = vec![listen(0)];
        let mut out = Vec::new();
        no_workers(&inp, &mut out);
        assert!(out.is_empty());
        inp.listen = vec![listen(3)];
        // Trial 13: the run ended with the master's exit (`nginx -s stop`): its
        // workers went first, and that is its shutdown.
        inp.master_exited = true;
        assert!(crate::model::ended_by_master_exit(Some(
            &crate::model::master_exited_reason(23641)
        )));
        no_workers(&inp, &mut out);
        assert!(out.is_empty());
        inp.master_exited = false;
        inp.config = None;
        inp.workers[0].alive = true;
        no_workers(&inp, &mut out);
        assert!(out.is_empty());
    }
}
