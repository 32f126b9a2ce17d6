//! `cargo xtask claims`: the claims lab. Each tuning claim from `../shared/seeds` becomes
//! two or three nginx configs (a throwaway nginx each: temp prefix, 127.0.0.1, free port,
//! 30-byte static file, 2 workers unless the claim is about workers) run under the same
//! load, each recorded with nginx-probe. A pure rule per claim ([`Claim::judge`]) reads
//! nginx-probe's metrics ([`Metrics`]) and says whether the claim is confirmed, refuted
//! or inconclusive on this machine. Throughput is measured and printed, never judged.
//!
//! Recording: every run is recorded with `nginx-probe --record
//! <out>/runs/<claim>-<variant>.jsonl --interval 1` (header, intervals, summary); see
//! [`recording_args`]. Each later config is then compared with the first by
//! `nginx-probe compare`, whose ticket sentence goes in the report.

use std::{
    collections::BTreeMap,
    fmt,
    path::{Path, PathBuf},
    process::Command,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    thread,
    time::Duration,
};

use anyhow::{bail, Context as _, Result};
use nginx_probe_tests::{Nginx, NginxConfig, ProbeRun};
use nix::sys::signal::Signal;
use serde_json::{json, Value};

use crate::load::{ctxt_switches, hey_new_connections, wrk, ClientRun};

// ---------------------------------------------------------------------------------------
// Rule thresholds. Every rule below uses only these and nginx-probe's metrics.

/// Fewest requests (nginx-probe's count, summed over workers) a run needs before its
/// per-request figures are judged.
pub const MIN_REQUESTS: u64 = 1000;
/// Relative difference in nginx's CPU time per request within which two configs count as
/// equally expensive (run-to-run noise on a shared 2-core machine).
pub const CPU_NOISE: f64 = 0.05;
/// A per-request event "happens on every request" at or above this rate (events per
/// request), and "was removed" at or below [`PER_REQUEST_GONE`].
pub const PER_REQUEST_ALWAYS: f64 = 0.9;
/// See [`PER_REQUEST_ALWAYS`].
pub const PER_REQUEST_GONE: f64 = 0.1;
/// A cost is material when it takes at least this share (0..1) of the workers' syscall
/// time outside epoll waits ...
pub const MATERIAL_SHARE: f64 = 0.05;
/// ... and negligible below this share.
pub const NEGLIGIBLE_SHARE: f64 = 0.02;
/// Busiest worker's share over the mean share (of accepts or of busy time) at which the
/// work sits on one worker: nginx-probe's `accept_imbalance` threshold (75% with 2
/// workers).
pub const SKEW: f64 = 1.5;
/// keepalive: connection set-up and tear-down (accept4 + close) "is the cost" when it takes
/// at least this share of the workers' syscall time with `keepalive_timeout 0`.
pub const SETUP_SHARE_MAJOR: f64 = 0.25;
/// keepalive: ... and is minor below this share.
pub const SETUP_SHARE_MINOR: f64 = 0.10;
/// keepalive: the seed claims a 3x collapse; nginx's CPU per request must rise at least
/// this much to confirm it ...
pub const KEEPALIVE_CPU_CONFIRM: f64 = 2.0;
/// ... and a rise below this refutes it.
pub const KEEPALIVE_CPU_REFUTE: f64 = 1.25;
/// worker_processes: more workers than cores "add context switches" when switches per
/// request rise at least this much from 2 to 4 workers.
pub const SWITCH_RISE: f64 = 1.25;

// ---------------------------------------------------------------------------------------
// Metrics: what one run measured, taken from nginx-probe's summary (and the client).

/// The figures the rules read, for one config under load. Shares are 0..1 of the nginx
/// workers' syscall time outside epoll waits (`syscalls.*.total_ns`, all workers
/// summed); per-request figures divide by nginx-probe's `requests.count`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metrics {
    /// Client-side throughput, req/s (wrk or hey): printed, never judged.
    pub rps: f64,
    /// Client-side failures (socket errors, non-2xx): printed, never judged.
    pub client_errors: u64,
    /// Requests nginx-probe counted (writev estimate).
    pub requests: u64,
    /// Successful accepts, all workers.
    pub accepts: u64,
    /// accepts / requests.
    pub accepts_per_request: f64,
    /// (accept4 + accept + close) share of syscall time: connection set-up and tear-down
    /// (close also closes the served file, so it is never 0 when close is traced).
    pub setup_share: f64,
    /// `writes.access_log.count` / requests.
    pub access_log_writes_per_request: f64,
    /// `writes.access_log.total_ns` share of syscall time.
    pub access_log_share: f64,
    /// (openat + newfstatat) share of syscall time: opening the served file.
    pub file_share: f64,
    /// Each traced syscall's count per request, all workers.
    pub per_request: BTreeMap<String, f64>,
    /// Traced syscalls outside epoll waits per request.
    pub syscalls_per_request: f64,
    /// Traced syscall time outside epoll waits per request, us.
    pub syscall_us_per_request: f64,
    /// nginx workers' CPU time (user + system, `cpu_s`) per request, us.
    pub cpu_us_per_request: f64,
    /// Busiest worker's accept share / mean share (1.0 = even; 0 without accepts).
    pub accept_skew: f64,
    /// Busiest worker's `event_loop.busy_share` / mean busy share (0 when idle).
    pub busy_skew: f64,
    /// Sum of the workers' busy shares: cores' worth of time outside epoll waits.
    pub busy_cores: f64,
    /// accept4 failures with EMFILE, all workers.
    pub emfile: u64,
    /// Highest `fds.peak` of any worker.
    pub fd_peak: u64,
    /// Lowest `fds.limit` (soft nofile in force) of any worker.
    pub fd_limit: u64,
    /// Connections closed right after their accept (`accepted_then_closed`), all workers.
    pub accepted_then_closed: u64,
    /// Backlog in force of nginx's listening socket (`listen[0].backlog`).
    pub listen_backlog: u64,
    /// Most connections seen waiting in its accept queue (`listen[0].queue_max`).
    pub listen_queue_max: u64,
    /// ListenOverflows + ListenDrops of the namespace during the run.
    pub listen_overflows: u64,
    /// Workers' context switches during the load (voluntary + nonvoluntary), from
    /// `/proc/<pid>/status`; per 1000 requests in [`Metrics::switches_per_1k`].
    pub context_switches: u64,
    /// Of those, nonvoluntary (preempted).
    pub nonvoluntary_switches: u64,
    /// Verdict ids nginx-probe printed, most severe first.
    pub verdicts: Vec<String>,
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

fn skew(shares: &[f64]) -> f64 {
    let sum: f64 = shares.iter().sum();
    if shares.is_empty() || sum <= 0.0 {
        return 0.0;
    }
    let max = shares.iter().copied().fold(0.0, f64::max);
    max / (sum / shares.len() as f64)
}

impl Metrics {
    /// Builds the metrics from an nginx-probe summary document (schema 1), the client's
    /// report, and the workers' (voluntary, nonvoluntary) context switches during the
    /// load.
    pub fn from_summary(s: &Value, client: &ClientRun, switches: (u64, u64)) -> Result<Metrics> {
        if s["type"] != "summary" || s["schema"] != 1 {
            bail!("not an nginx-probe schema 1 summary");
        }
        let workers = s["workers"].as_array().context("summary without workers")?;
        let u = |v: &Value| v.as_u64().unwrap_or(0);
        let mut m = Metrics {
            rps: client.rps,
            client_errors: client.errors,
            context_switches: switches.0 + switches.1,
            nonvoluntary_switches: switches.1,
            fd_limit: u64::MAX,
            ..Metrics::default()
        };
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        let (mut all_ns, mut setup_ns, mut file_ns, mut log_ns, mut log_writes) = (0, 0, 0, 0, 0);
        let mut cpu_s = 0.0;
        let mut accept_shares = Vec::new();
        let mut busy_shares = Vec::new();
        for w in workers {
            m.requests += u(&w["requests"]["count"]);
            m.accepts += u(&w["accepts"]);
            m.emfile += u(&w["accept_errors"]["EMFILE"]);
            m.accepted_then_closed += u(&w["accepted_then_closed"]);
            m.fd_peak = m.fd_peak.max(u(&w["fds"]["peak"]));
            if let Some(l) = w["fds"]["limit"].as_u64() {
                m.fd_limit = m.fd_limit.min(l);
            }
            cpu_s += w["cpu_s"].as_f64().unwrap_or(0.0);
            accept_shares.push(w["accept_share"].as_f64().unwrap_or(0.0));
            busy_shares.push(w["event_loop"]["busy_share"].as_f64().unwrap_or(0.0));
            log_writes += u(&w["writes"]["access_log"]["count"]);
            log_ns += u(&w["writes"]["access_log"]["total_ns"]);
            for (name, st) in w["syscalls"].as_object().into_iter().flatten() {
                if name.starts_with("epoll") {
                    continue;
                }
                let ns = u(&st["total_ns"]);
                all_ns += ns;
                *counts.entry(name.clone()).or_default() += u(&st["count"]);
                match name.as_str() {
                    "accept4" | "accept" | "close" => setup_ns += ns,
                    "openat" | "newfstatat" => file_ns += ns,
                    _ => {}
                }
            }
        }
        if m.fd_limit == u64::MAX {
            m.fd_limit = 0;
        }
        let req = m.requests as f64;
        m.accepts_per_request = ratio(m.accepts as f64, req);
        m.access_log_writes_per_request = ratio(log_writes as f64, req);
        m.setup_share = ratio(setup_ns as f64, all_ns as f64);
        m.access_log_share = ratio(log_ns as f64, all_ns as f64);
        m.file_share = ratio(file_ns as f64, all_ns as f64);
        m.syscalls_per_request = ratio(counts.values().sum::<u64>() as f64, req);
        m.syscall_us_per_request = ratio(all_ns as f64 / 1e3, req);
        m.cpu_us_per_request = ratio(cpu_s * 1e6, req);
        m.per_request = counts
            .into_iter()
            .map(|(k, v)| (k, ratio(v as f64, req)))
            .collect();
        m.accept_skew = skew(&accept_shares);
        m.busy_skew = skew(&busy_shares);
        m.busy_cores = busy_shares.iter().sum();
        if let Some(l) = s["listen"].as_array().and_then(|a| a.first()) {
            m.listen_backlog = u(&l["backlog"]);
            m.listen_queue_max = u(&l["queue_max"]);
            m.listen_overflows = u(&l["overflows"]) + u(&l["drops"]);
        }
        m.verdicts = s["verdicts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v["id"].as_str().map(String::from))
            .collect();
        Ok(m)
    }

    /// Count per request of one traced syscall (0 when not traced or not seen).
    pub fn per_req(&self, syscall: &str) -> f64 {
        self.per_request.get(syscall).copied().unwrap_or(0.0)
    }

    /// Workers' context switches per 1000 requests.
    pub fn switches_per_1k(&self) -> f64 {
        ratio(self.context_switches as f64 * 1000.0, self.requests as f64)
    }

    /// The listen queue overflowed: seen at its backlog, or the namespace's
    /// ListenOverflows/ListenDrops rose during the run. Unlike nginx-probe's
    /// `accept_queue_overflow` rule this does not also require the sampled queue to be
    /// non-empty: a 16-slot queue fills and drains between two 500 ms samples. The
    /// counters are the namespace's, so the lab compares them with the other config's
    /// run of the same minute (quiet there = nothing else overflowing).
    pub fn queue_overflowed(&self) -> bool {
        (self.listen_backlog > 0 && self.listen_queue_max >= self.listen_backlog)
            || self.listen_overflows > 0
    }

    fn json(&self) -> Value {
        json!({
            "rps": round(self.rps, 1), "client_errors": self.client_errors,
            "requests": self.requests, "accepts": self.accepts,
            "accepts_per_request": round(self.accepts_per_request, 4),
            "setup_share": round(self.setup_share, 4),
            "access_log_writes_per_request": round(self.access_log_writes_per_request, 4),
            "access_log_share": round(self.access_log_share, 4),
            "file_share": round(self.file_share, 4),
            "syscalls_per_request": round(self.syscalls_per_request, 3),
            "per_request": self.per_request.iter().map(|(k, v)| (k.clone(), json!(round(*v, 4)))).collect::<serde_json::Map<_, _>>(),
            "syscall_us_per_request": round(self.syscall_us_per_request, 2),
            "cpu_us_per_request": round(self.cpu_us_per_request, 2),
            "accept_skew": round(self.accept_skew, 3), "busy_skew": round(self.busy_skew, 3),
            "busy_cores": round(self.busy_cores, 3),
            "emfile": self.emfile, "fd_peak": self.fd_peak, "fd_limit": self.fd_limit,
            "accepted_then_closed": self.accepted_then_closed,
            "listen": {"backlog": self.listen_backlog, "queue_max": self.listen_queue_max,
                       "overflows_and_drops": self.listen_overflows},
            "context_switches": self.context_switches,
            "nonvoluntary_switches": self.nonvoluntary_switches,
            "switches_per_1k_requests": round(self.switches_per_1k(), 2),
            "verdicts": self.verdicts,
        })
    }
}

fn round(v: f64, digits: i32) -> f64 {
    let p = 10f64.powi(digits);
    (v * p).round() / p
}

// ---------------------------------------------------------------------------------------
// Outcomes and rules.

/// What the lab concluded about a claim on this machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The metric the claim is about moved as claimed, by at least the rule's amount.
    Confirmed,
    /// It did not move, or moved the other way.
    Refuted,
    /// The run could not decide (too few requests, the change did not take, or a result
    /// between the confirm and refute thresholds).
    Inconclusive,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Outcome::Confirmed => "confirmed",
            Outcome::Refuted => "refuted",
            Outcome::Inconclusive => "inconclusive",
        })
    }
}

/// A rule's decision with the figures it was made on.
#[derive(Clone, Debug, PartialEq)]
pub struct Judgement {
    /// The decision.
    pub outcome: Outcome,
    /// The key figures per config (A → B → C), short.
    pub saw: String,
    /// Why, in one sentence with the deciding numbers.
    pub reason: String,
}

fn verdict(outcome: Outcome, saw: String, reason: impl Into<String>) -> Judgement {
    Judgement {
        outcome,
        saw,
        reason: reason.into(),
    }
}

/// "a → b → c" of one figure over the configs.
fn across(ms: &[Metrics], f: impl Fn(&Metrics) -> String) -> String {
    ms.iter().map(f).collect::<Vec<_>>().join(" → ")
}

fn pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

fn too_few_requests(ms: &[Metrics], saw: &str) -> Option<Judgement> {
    ms.iter().find(|m| m.requests < MIN_REQUESTS).map(|m| {
        verdict(
            Outcome::Inconclusive,
            saw.to_string(),
            format!(
                "a run had {} requests (fewer than {MIN_REQUESTS})",
                m.requests
            ),
        )
    })
}

/// keepalive (A: `keepalive_timeout 65`, B: `0`). Inconclusive unless B makes
/// connections one-shot (accepts per request ≥ 0.9) and A reuses them (≤ 0.1).
/// Confirmed when set-up + tear-down take ≥ 25% of B's syscall time and nginx's CPU per
/// request at least doubles (the claim: ~3x); refuted when set-up takes < 10% or CPU per
/// request rises less than 1.25x.
pub fn judge_keepalive(ms: &[Metrics]) -> Judgement {
    let [a, b] = ms else {
        panic!("keepalive takes 2 configs")
    };
    let saw = format!(
        "accepts/req {}; set-up share of syscall time {}; CPU us/req {}",
        across(ms, |m| format!("{:.2}", m.accepts_per_request)),
        across(ms, |m| pct(m.setup_share)),
        across(ms, |m| format!("{:.1}", m.cpu_us_per_request)),
    );
    if let Some(j) = too_few_requests(ms, &saw) {
        return j;
    }
    if b.accepts_per_request < PER_REQUEST_ALWAYS || a.accepts_per_request > PER_REQUEST_GONE {
        return verdict(
            Outcome::Inconclusive,
            saw,
            "the change did not take: B does not accept once per request or A does not reuse connections",
        );
    }
    let cpu = ratio(b.cpu_us_per_request, a.cpu_us_per_request);
    let why = format!(
        "B accepts once per request; set-up/tear-down is {} of its syscall time; CPU per request x{cpu:.2}",
        pct(b.setup_share)
    );
    if b.setup_share >= SETUP_SHARE_MAJOR && cpu >= KEEPALIVE_CPU_CONFIRM {
        verdict(Outcome::Confirmed, saw, why)
    } else if b.setup_share < SETUP_SHARE_MINOR || cpu < KEEPALIVE_CPU_REFUTE {
        verdict(
            Outcome::Refuted,
            saw,
            format!("{why}: no collapse (refute below {SETUP_SHARE_MINOR} share or x{KEEPALIVE_CPU_REFUTE})"),
        )
    } else {
        verdict(
            Outcome::Inconclusive,
            saw,
            format!("{why}: a real cost, smaller than the claimed 3x (confirm from x{KEEPALIVE_CPU_CONFIRM})"),
        )
    }
}

/// access_log (A: unbuffered, B: `buffer=32k`, C: `off`). Refuted when A does not write
/// the log on (nearly) every request (< 0.5 per request), when B still does (≥ 0.5), or
/// when A's log writes take < 2% of syscall time. Confirmed when A writes ≥ 0.9 per
/// request, B ≤ 0.1, C none, and A's writes take ≥ 5% of syscall time.
pub fn judge_access_log(ms: &[Metrics]) -> Judgement {
    let [a, b, c] = ms else {
        panic!("access_log takes 3 configs")
    };
    let saw = format!(
        "log writes/req {}; log write share of syscall time {}; CPU us/req {}",
        across(ms, |m| format!("{:.3}", m.access_log_writes_per_request)),
        across(ms, |m| pct(m.access_log_share)),
        across(ms, |m| format!("{:.1}", m.cpu_us_per_request)),
    );
    if let Some(j) = too_few_requests(ms, &saw) {
        return j;
    }
    if c.access_log_writes_per_request > 0.0 {
        return verdict(
            Outcome::Inconclusive,
            saw,
            "the change did not take: `access_log off` still wrote the log",
        );
    }
    if a.access_log_writes_per_request < 0.5 {
        return verdict(
            Outcome::Refuted,
            saw,
            "an unbuffered log does not write on every request",
        );
    }
    if b.access_log_writes_per_request >= 0.5 {
        return verdict(
            Outcome::Refuted,
            saw,
            "buffer=32k still writes on (nearly) every request",
        );
    }
    if a.access_log_share < NEGLIGIBLE_SHARE {
        return verdict(
            Outcome::Refuted,
            saw,
            format!(
                "one write per request, but only {} of syscall time: not a mover",
                pct(a.access_log_share)
            ),
        );
    }
    if a.access_log_writes_per_request >= PER_REQUEST_ALWAYS
        && b.access_log_writes_per_request <= PER_REQUEST_GONE
        && a.access_log_share >= MATERIAL_SHARE
    {
        return verdict(
            Outcome::Confirmed,
            saw,
            format!(
                "one write per request unbuffered ({} of syscall time), {:.3} with buffer=32k, none off",
                pct(a.access_log_share),
                b.access_log_writes_per_request
            ),
        );
    }
    verdict(
        Outcome::Inconclusive,
        saw,
        "between the thresholds (writes/request 0.5..0.9 or 0.1..0.5, or a 2-5% share)",
    )
}

/// multi_accept (A: off, B: on). With the skew of a run = max(accept skew, busy skew):
/// confirmed when B's is ≥ 1.5 (75% of the accepts or busy time on one of 2 workers) and
/// A's is not; refuted when B's is below 1.5; inconclusive when both are skewed or a run
/// saw fewer than 20 accepts.
pub fn judge_multi_accept(ms: &[Metrics]) -> Judgement {
    let [a, b] = ms else {
        panic!("multi_accept takes 2 configs")
    };
    let saw = format!(
        "accepts {}; accept skew {}; busy-time skew {}; busy cores {}",
        across(ms, |m| m.accepts.to_string()),
        across(ms, |m| format!("{:.2}", m.accept_skew)),
        across(ms, |m| format!("{:.2}", m.busy_skew)),
        across(ms, |m| format!("{:.2}", m.busy_cores)),
    );
    if ms.iter().any(|m| m.accepts < 20) {
        return verdict(Outcome::Inconclusive, saw, "fewer than 20 accepts in a run");
    }
    let sk = |m: &Metrics| m.accept_skew.max(m.busy_skew);
    if sk(b) >= SKEW && sk(a) < SKEW {
        verdict(
            Outcome::Confirmed,
            saw,
            format!(
                "multi_accept on piled the work on one worker (skew {:.2}), off did not ({:.2})",
                sk(b),
                sk(a)
            ),
        )
    } else if sk(b) < SKEW {
        verdict(
            Outcome::Refuted,
            saw,
            format!(
                "with multi_accept on the busiest worker stayed under {SKEW}x the mean (skew {:.2})",
                sk(b)
            ),
        )
    } else {
        verdict(
            Outcome::Inconclusive,
            saw,
            format!(
                "both configs skewed ({:.2} off, {:.2} on): not multi_accept's doing",
                sk(a),
                sk(b)
            ),
        )
    }
}

/// nofile (A: soft nofile 64, B: plus `worker_rlimit_nofile 4096`). Refuted when B's
/// limit in force is not raised or B still gets EMFILE, or A reached its limit without
/// EMFILE; inconclusive when A never came within 90% of its limit; confirmed when A got
/// EMFILE and B none.
pub fn judge_nofile(ms: &[Metrics]) -> Judgement {
    let [a, b] = ms else {
        panic!("nofile takes 2 configs")
    };
    let saw = format!(
        "EMFILE {}; fds peak/limit {}; accepts {}",
        across(ms, |m| m.emfile.to_string()),
        across(ms, |m| format!("{}/{}", m.fd_peak, m.fd_limit)),
        across(ms, |m| m.accepts.to_string()),
    );
    if b.fd_limit <= a.fd_limit {
        return verdict(
            Outcome::Refuted,
            saw,
            "worker_rlimit_nofile did not raise the limit in force",
        );
    }
    if b.emfile > 0 {
        return verdict(
            Outcome::Refuted,
            saw,
            format!("EMFILE {} with the raised limit", b.emfile),
        );
    }
    if a.emfile == 0 {
        if (a.fd_peak as f64) < 0.9 * a.fd_limit as f64 {
            return verdict(
                Outcome::Inconclusive,
                saw,
                "the load never brought a worker near its limit",
            );
        }
        return verdict(
            Outcome::Refuted,
            saw,
            "workers reached the low limit without an EMFILE",
        );
    }
    verdict(
        Outcome::Confirmed,
        saw,
        format!(
            "{} accepts failed with EMFILE at soft limit {}; none at {}",
            a.emfile, a.fd_limit, b.fd_limit
        ),
    )
}

/// worker_connections (A: 1024, B: 64; 300 keepalive clients). The claim: nginx degrades
/// gracefully by closing idle keepalive connections ("reusing connections") and answers
/// every request. Refuted when B closed connections unanswered: any closed right after
/// their accept (`accepted_then_closed` > 0), or more accepts than requests (every
/// served connection carries at least one request, so at least accepts − requests were
/// closed before answering). Confirmed when neither happened and B's accepts per
/// request are at least twice A's (idle connections recycled); inconclusive otherwise
/// (the limit never bit).
pub fn judge_worker_connections(ms: &[Metrics]) -> Judgement {
    let [a, b] = ms else {
        panic!("worker_connections takes 2 configs")
    };
    let saw = format!(
        "accepted_then_closed {}; accepts {}; requests {}; client errors {}",
        across(ms, |m| m.accepted_then_closed.to_string()),
        across(ms, |m| m.accepts.to_string()),
        across(ms, |m| m.requests.to_string()),
        across(ms, |m| m.client_errors.to_string()),
    );
    // Connections closed unanswered refute "gracefully" however few requests got
    // through (a collapse to a handful of requests is the strongest refutation).
    let unanswered = b.accepts > b.requests && b.accepts >= MIN_REQUESTS;
    if !unanswered && b.accepted_then_closed == 0 {
        if let Some(j) = too_few_requests(ms, &saw) {
            return j;
        }
    }
    if b.accepted_then_closed > 0 {
        return verdict(
            Outcome::Refuted,
            saw,
            format!(
                "{} connections were accepted and closed unanswered with 64 worker_connections: not every client was served",
                b.accepted_then_closed
            ),
        );
    }
    if b.accepts > b.requests {
        return verdict(
            Outcome::Refuted,
            saw,
            format!(
                "{} accepts for {} requests with 64 worker_connections: at least {} connections were closed before any answer",
                b.accepts,
                b.requests,
                b.accepts - b.requests
            ),
        );
    }
    if b.accepts_per_request >= 2.0 * a.accepts_per_request && b.accepts > a.accepts {
        return verdict(
            Outcome::Confirmed,
            saw,
            format!(
                "no connection refused; idle ones recycled ({} accepts vs {})",
                b.accepts, a.accepts
            ),
        );
    }
    verdict(
        Outcome::Inconclusive,
        saw,
        "no refusals and no recycling: the limit did not bite",
    )
}

/// open_file_cache (A: none, B: `open_file_cache max=1000 inactive=20s`). Refuted when A
/// does not open the file per request (< 0.5 openat per request), when B still does
/// (≥ 0.5), or when opening (openat + newfstatat) takes < 2% of A's syscall time.
/// Confirmed when A opens ≥ 0.9 per request, B ≤ 0.1, and opening takes ≥ 5% of A's
/// syscall time.
pub fn judge_open_file_cache(ms: &[Metrics]) -> Judgement {
    let [a, b] = ms else {
        panic!("open_file_cache takes 2 configs")
    };
    let saw = format!(
        "openat/req {}; newfstatat/req {}; open+stat share {}; CPU us/req {}",
        across(ms, |m| format!("{:.3}", m.per_req("openat"))),
        across(ms, |m| format!("{:.3}", m.per_req("newfstatat"))),
        across(ms, |m| pct(m.file_share)),
        across(ms, |m| format!("{:.1}", m.cpu_us_per_request)),
    );
    if let Some(j) = too_few_requests(ms, &saw) {
        return j;
    }
    let (oa, ob) = (a.per_req("openat"), b.per_req("openat"));
    if oa < 0.5 {
        return verdict(Outcome::Refuted, saw, "no open per request to save");
    }
    if ob >= 0.5 {
        return verdict(Outcome::Refuted, saw, "the cache did not remove the open");
    }
    if a.file_share < NEGLIGIBLE_SHARE {
        return verdict(
            Outcome::Refuted,
            saw,
            format!(
                "opening the file costs only {} of syscall time",
                pct(a.file_share)
            ),
        );
    }
    if oa >= PER_REQUEST_ALWAYS && ob <= PER_REQUEST_GONE && a.file_share >= MATERIAL_SHARE {
        return verdict(
            Outcome::Confirmed,
            saw,
            format!(
                "the cache removed {oa:.2} openat per request ({} of syscall time)",
                pct(a.file_share)
            ),
        );
    }
    verdict(Outcome::Inconclusive, saw, "between the thresholds")
}

/// sendfile (A: off, B: on). Inconclusive unless B sends the body with sendfile (≥ 0.9
/// per request) and A never does (≤ 0.1). Then by nginx's CPU per request: confirmed
/// when B's is ≥ 5% lower, refuted when ≥ 5% higher, inconclusive within ±5%.
pub fn judge_sendfile(ms: &[Metrics]) -> Judgement {
    let [a, b] = ms else {
        panic!("sendfile takes 2 configs")
    };
    let saw = format!(
        "sendfile/req {}; writev/req {}; traced syscalls/req {}; syscall us/req {}; CPU us/req {}",
        across(ms, |m| format!("{:.2}", m.per_req("sendfile"))),
        across(ms, |m| format!("{:.2}", m.per_req("writev"))),
        across(ms, |m| format!("{:.2}", m.syscalls_per_request)),
        across(ms, |m| format!("{:.1}", m.syscall_us_per_request)),
        across(ms, |m| format!("{:.1}", m.cpu_us_per_request)),
    );
    if let Some(j) = too_few_requests(ms, &saw) {
        return j;
    }
    if b.per_req("sendfile") < PER_REQUEST_ALWAYS || a.per_req("sendfile") > PER_REQUEST_GONE {
        return verdict(Outcome::Inconclusive, saw, "the change did not take");
    }
    let r = ratio(b.cpu_us_per_request, a.cpu_us_per_request);
    if r <= 1.0 - CPU_NOISE {
        verdict(
            Outcome::Confirmed,
            saw,
            format!("sendfile on costs x{r:.2} the CPU per request"),
        )
    } else if r >= 1.0 + CPU_NOISE {
        verdict(
            Outcome::Refuted,
            saw,
            format!("sendfile on costs more CPU per request (x{r:.2})"),
        )
    } else {
        verdict(
            Outcome::Inconclusive,
            saw,
            format!("CPU per request x{r:.2}: no difference beyond ±{CPU_NOISE}"),
        )
    }
}

/// worker_processes (A: 1, B: 2, C: 4, on 2 cores). The claim: workers beyond the cores
/// add context switches, not capacity. Confirmed when C's context switches per request
/// are ≥ 1.25x B's and C's CPU per request is not 5% lower than B's. Refuted when C's
/// CPU per request is ≥ 5% lower (4 workers made requests cheaper), or when C switches
/// less per request than B at the same CPU per request (±5%: no cost at all).
/// Inconclusive otherwise (e.g. fewer switches but dearer requests: the advice holds,
/// not its stated mechanism).
pub fn judge_worker_processes(ms: &[Metrics]) -> Judgement {
    let [_, b, c] = ms else {
        panic!("worker_processes takes 3 configs")
    };
    let saw = format!(
        "ctx switches/1k req {} (nonvoluntary {}); busy cores {}; CPU us/req {}",
        across(ms, |m| format!("{:.0}", m.switches_per_1k())),
        across(ms, |m| format!(
            "{:.0}",
            ratio(m.nonvoluntary_switches as f64 * 1000.0, m.requests as f64)
        )),
        across(ms, |m| format!("{:.2}", m.busy_cores)),
        across(ms, |m| format!("{:.1}", m.cpu_us_per_request)),
    );
    if let Some(j) = too_few_requests(ms, &saw) {
        return j;
    }
    let sw = ratio(c.switches_per_1k(), b.switches_per_1k());
    let cpu = ratio(c.cpu_us_per_request, b.cpu_us_per_request);
    let why =
        format!("4 vs 2 workers: context switches per request x{sw:.2}, CPU per request x{cpu:.2}");
    if sw >= SWITCH_RISE && cpu > 1.0 - CPU_NOISE {
        verdict(Outcome::Confirmed, saw, why)
    } else if cpu <= 1.0 - CPU_NOISE || (sw < 1.0 && cpu < 1.0 + CPU_NOISE) {
        verdict(Outcome::Refuted, saw, why)
    } else {
        verdict(
            Outcome::Inconclusive,
            saw,
            format!("{why}: between the thresholds"),
        )
    }
}

/// backlog (A: default 511, B: `backlog=16`; a burst of new connections). Inconclusive
/// unless B's backlog in force is 16. Confirmed when B's queue overflowed
/// ([`Metrics::queue_overflowed`]) and A's did not; refuted when B's did not (the small
/// backlog absorbed the burst); inconclusive when both did.
pub fn judge_backlog(ms: &[Metrics]) -> Judgement {
    let [a, b] = ms else {
        panic!("backlog takes 2 configs")
    };
    let saw = format!(
        "backlog {}; queue max {}; overflows+drops {}; accepts {}",
        across(ms, |m| m.listen_backlog.to_string()),
        across(ms, |m| m.listen_queue_max.to_string()),
        across(ms, |m| m.listen_overflows.to_string()),
        across(ms, |m| m.accepts.to_string()),
    );
    if b.listen_backlog != 16 {
        return verdict(
            Outcome::Inconclusive,
            saw,
            format!(
                "the change did not take: backlog in force {}",
                b.listen_backlog
            ),
        );
    }
    match (a.queue_overflowed(), b.queue_overflowed()) {
        (false, true) => verdict(
            Outcome::Confirmed,
            saw,
            "the burst overflowed backlog 16 and not the default",
        ),
        (_, false) => verdict(
            Outcome::Refuted,
            saw,
            format!(
                "backlog 16 absorbed the burst (queue peaked at {})",
                b.listen_queue_max
            ),
        ),
        (true, true) => verdict(
            Outcome::Inconclusive,
            saw,
            "both backlogs overflowed: the burst was too big for either",
        ),
    }
}

// ---------------------------------------------------------------------------------------
// The claims.

/// The load every config of a claim runs under.
#[derive(Clone, Copy, Debug)]
pub enum Load {
    /// `wrk -t1 -c<connections>`: keepalive clients.
    Wrk {
        /// Concurrent connections.
        connections: u32,
    },
    /// `hey -c <connections> -disable-keepalive`: a new connection per request.
    HeyNewConnections {
        /// Concurrent clients.
        connections: u32,
    },
}

impl Load {
    fn describe(&self) -> String {
        match self {
            Load::Wrk { connections } => format!("wrk -t1 -c{connections}"),
            Load::HeyNewConnections { connections } => {
                format!("hey -c {connections} -disable-keepalive")
            }
        }
    }

    fn run(&self, url: &str, secs: u64) -> Result<ClientRun> {
        match *self {
            Load::Wrk { connections } => wrk(url, connections, secs),
            Load::HeyNewConnections { connections } => hey_new_connections(url, connections, secs),
        }
    }
}

/// One config of a claim.
pub struct Variant {
    /// "A", "B", "C".
    pub label: &'static str,
    /// The config change, as shown in the table.
    pub change: &'static str,
    /// The throwaway nginx to start.
    pub cfg: NginxConfig,
}

/// A tuning claim from a seed, as configs, a load and a rule.
pub struct Claim {
    /// Short id, used by the filter and for file names.
    pub id: &'static str,
    /// Seed file name(s) the claim comes from.
    pub source: &'static str,
    /// The claim, restated.
    pub claim: &'static str,
    /// The configs, A first.
    pub variants: Vec<Variant>,
    /// The same load for every config.
    pub load: Load,
    /// Extra nginx-probe options (`--syscalls all` where the rule needs openat/close).
    pub probe_args: &'static [&'static str],
    /// The rule, deciding on nginx-probe's metrics, one per variant in order.
    pub judge: fn(&[Metrics]) -> Judgement,
}

const SEED_000: &str = "000_ea5cb12955f3aae2.txt";
const SEED_003: &str = "003_44fba3f37d0f850d.txt";

fn base() -> NginxConfig {
    NginxConfig::default()
}

fn with_http(extra: &str) -> NginxConfig {
    NginxConfig {
        http_extra: extra.into(),
        ..base()
    }
}

fn with_events(extra: &str) -> NginxConfig {
    NginxConfig {
        events_extra: extra.into(),
        ..base()
    }
}

/// Every claim the lab checks, in table order.
pub fn all_claims() -> Vec<Claim> {
    let v = |label, change, cfg| Variant { label, change, cfg };
    vec![
        Claim {
            id: "keepalive",
            source: SEED_000,
            claim: "keepalive_timeout 0 collapses throughput ~3x, all of it spent on connection set-up",
            variants: vec![
                v("A", "keepalive_timeout 65", with_http("keepalive_timeout 65;")),
                v("B", "keepalive_timeout 0", with_http("keepalive_timeout 0;")),
            ],
            load: Load::Wrk { connections: 50 },
            probe_args: &["--syscalls", "all"],
            judge: judge_keepalive,
        },
        Claim {
            id: "access_log",
            source: "000_ea5cb12955f3aae2.txt, 004_baff9fcc93a0d565.txt",
            claim: "an unbuffered access log costs a write() per request, the biggest single mover (off: +38%); buffer=32k removes it",
            variants: vec![
                v("A", "access_log <file>", base()),
                v("B", "access_log <file> buffer=32k", NginxConfig {
                    access_log: Some("combined buffer=32k".into()),
                    ..base()
                }),
                v("C", "access_log off", NginxConfig {
                    access_log: Some("off".into()),
                    ..base()
                }),
            ],
            load: Load::Wrk { connections: 50 },
            probe_args: &[],
            judge: judge_access_log,
        },
        Claim {
            id: "multi_accept",
            source: SEED_000,
            claim: "multi_accept on skews accepts and CPU onto one worker with 60 keepalive clients; off spreads them",
            variants: vec![
                v("A", "multi_accept off", with_events("multi_accept off;")),
                v("B", "multi_accept on", with_events("multi_accept on;")),
            ],
            load: Load::Wrk { connections: 60 },
            probe_args: &[],
            judge: judge_multi_accept,
        },
        Claim {
            id: "nofile",
            source: SEED_000,
            claim: "a soft nofile limit below the load makes accept4 fail with EMFILE; worker_rlimit_nofile (within the hard limit) clears it",
            variants: vec![
                v("A", "soft nofile 64 (hard 4096)", NginxConfig {
                    nofile: Some((64, 4096)),
                    ..base()
                }),
                v("B", "same + worker_rlimit_nofile 4096", NginxConfig {
                    nofile: Some((64, 4096)),
                    main_extra: "worker_rlimit_nofile 4096;".into(),
                    ..base()
                }),
            ],
            load: Load::Wrk { connections: 300 },
            probe_args: &[],
            judge: judge_nofile,
        },
        Claim {
            id: "worker_connections",
            source: SEED_000,
            claim: "worker_connections 64 under 300 connections degrades gracefully: idle keepalive connections are reused, every request answered",
            variants: vec![
                v("A", "worker_connections 1024", base()),
                v("B", "worker_connections 64", NginxConfig {
                    worker_connections: 64,
                    ..base()
                }),
            ],
            load: Load::Wrk { connections: 300 },
            probe_args: &[],
            judge: judge_worker_connections,
        },
        Claim {
            id: "open_file_cache",
            source: "000_ea5cb12955f3aae2.txt, 003_44fba3f37d0f850d.txt, 004_baff9fcc93a0d565.txt",
            claim: "open_file_cache saves opening the file on every request (004: +4%)",
            variants: vec![
                v("A", "no open_file_cache", base()),
                v("B", "open_file_cache max=1000 inactive=20s", with_http("open_file_cache max=1000 inactive=20s;")),
            ],
            load: Load::Wrk { connections: 50 },
            probe_args: &["--syscalls", "all"],
            judge: judge_open_file_cache,
        },
        Claim {
            id: "sendfile",
            source: SEED_000,
            claim: "sendfile on is a cheap kernel win: the file goes out without a copy through user space",
            variants: vec![
                v("A", "sendfile off", NginxConfig {
                    sendfile: false,
                    ..base()
                }),
                v("B", "sendfile on", base()),
            ],
            load: Load::Wrk { connections: 50 },
            probe_args: &["--syscalls", "all"],
            judge: judge_sendfile,
        },
        Claim {
            id: "worker_processes",
            source: "000_ea5cb12955f3aae2.txt, 002_59c1c54667e60002.txt",
            claim: "one worker per core: workers beyond the cores add context switches, not capacity (002: gains flatten after ~4)",
            variants: vec![
                v("A", "worker_processes 1", NginxConfig { workers: 1, ..base() }),
                v("B", "worker_processes 2", base()),
                v("C", "worker_processes 4", NginxConfig { workers: 4, ..base() }),
            ],
            load: Load::Wrk { connections: 50 },
            probe_args: &[],
            judge: judge_worker_processes,
        },
        Claim {
            id: "backlog",
            source: SEED_003,
            claim: "a large listen backlog (backlog=20000, somaxconn) is needed to absorb bursts of new connections",
            variants: vec![
                v("A", "listen ... (default backlog 511)", base()),
                v("B", "listen ... backlog=16", NginxConfig {
                    listen_extra: "backlog=16".into(),
                    ..base()
                }),
            ],
            load: Load::HeyNewConnections { connections: 500 },
            probe_args: &[],
            judge: judge_backlog,
        },
    ]
}

/// Checks a claim filter against [`all_claims`]; an unknown id is a one-line error
/// naming the known ones.
pub fn select(filter: &[String]) -> Result<Vec<Claim>> {
    let all = all_claims();
    for f in filter {
        if !all.iter().any(|c| c.id == f) {
            let ids: Vec<&str> = all.iter().map(|c| c.id).collect();
            bail!("unknown claim `{f}`: known claims are {}", ids.join(", "));
        }
    }
    Ok(all
        .into_iter()
        .filter(|c| filter.is_empty() || filter.iter().any(|f| f == c.id))
        .collect())
}

// ---------------------------------------------------------------------------------------
// Running.

/// nginx-probe options that record a run into `file`: 1 s intervals (the noise estimate
/// of `compare`), only the summary on stdout.
fn recording_args(file: &Path) -> Vec<String> {
    vec![
        "--record".into(),
        file.display().to_string(),
        "--interval".into(),
        "1".into(),
        "--summary-only".into(),
    ]
}

/// `nginx-probe compare before after --json`: the comparison document.
fn compare(probe: &Path, before: &Path, after: &Path) -> Result<Value> {
    let out = Command::new(probe)
        .arg("compare")
        .args([before, after])
        .arg("--json")
        .output()
        .context("run nginx-probe compare")?;
    if !out.status.success() {
        bail!(
            "nginx-probe compare failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    serde_json::from_slice(&out.stdout).context("nginx-probe compare printed no JSON")
}

/// The `"type":"summary"` line of a recording (the last one; a `--record` file's header
/// and interval lines are skipped the same way).
pub fn read_summary(file: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(file).with_context(|| format!("read {}", file.display()))?;
    text.lines()
        .rev()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .with_context(|| format!("no summary line in {}", file.display()))
}

fn workers_switches(pids: &[u32]) -> (u64, u64) {
    pids.iter()
        .filter_map(|&p| ctxt_switches(p))
        .fold((0, 0), |acc, (v, n)| (acc.0 + v, acc.1 + n))
}

/// Starts the variant's nginx, records it with nginx-probe under the claim's load for
/// `secs`, and returns its metrics.
fn record(probe: &Path, claim: &Claim, v: &Variant, secs: u64, runs: &Path) -> Result<Metrics> {
    let ng = Nginx::start(&v.cfg);
    let file = runs.join(format!("{}-{}.jsonl", claim.id, v.label));
    // nginx-probe never records over a file: this run replaces the previous lab run's.
    let _ = std::fs::remove_file(&file);
    let master = ng.master_pid().to_string();
    let mut args: Vec<String> = vec!["--pid".into(), master];
    args.extend(recording_args(&file));
    args.extend(claim.probe_args.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = ProbeRun::start_with_binary(probe, &args);
    let workers = ng.worker_pids();
    let before = workers_switches(&workers);
    let client = claim.load.run(&ng.url(), secs);
    let after = workers_switches(&workers);
    // Let the last interval close before the summary.
    thread::sleep(Duration::from_millis(600));
    let out = run.stop_with(Signal::SIGINT);
    let client = client?;
    if !out.status.success() {
        bail!("nginx-probe failed ({}): {}", out.status, out.stderr);
    }
    let summary = read_summary(&file)?;
    Metrics::from_summary(
        &summary,
        &client,
        (
            after.0.saturating_sub(before.0),
            after.1.saturating_sub(before.1),
        ),
    )
    .with_context(|| format!("{}", file.display()))
}

/// A claim's runs and decision.
pub struct ClaimResult<'a> {
    /// The claim.
    pub claim: &'a Claim,
    /// One per variant, in order.
    pub metrics: Vec<Metrics>,
    /// The rule's decision.
    pub judgement: Judgement,
    /// `nginx-probe compare` of the first config with each later one: (label of the
    /// later config, its ticket sentence).
    pub sentences: Vec<(String, String)>,
}

/// Machine and run facts for the report header.
struct Machine {
    nproc: String,
    cpu: String,
    kernel: String,
    date: String,
    nginx: String,
    /// `/proc/loadavg`'s 1, 5 and 15 minute figures when the lab started.
    loadavg: String,
}

fn machine() -> Machine {
    let cmd = |c: &str, args: &[&str]| {
        Command::new(c)
            .args(args)
            .output()
            .ok()
            .map(|o| {
                let mut s = String::from_utf8_lossy(&o.stdout).trim().to_string();
                if s.is_empty() {
                    s = String::from_utf8_lossy(&o.stderr).trim().to_string();
                }
                s
            })
            .unwrap_or_default()
    };
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    Machine {
        nproc: cmd("nproc", &[]),
        cpu,
        kernel: cmd("uname", &["-r"]),
        date: cmd("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        nginx: cmd("/usr/sbin/nginx", &["-v"])
            .trim_start_matches("nginx version: ")
            .to_string(),
        loadavg: std::fs::read_to_string("/proc/loadavg")
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_default(),
    }
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|")
}

fn markdown_table(results: &[ClaimResult]) -> String {
    let mut md = String::from(
        "| claim | source | config change | req/s | nginx-probe saw | result |\n| --- | --- | --- | ---: | --- | --- |\n",
    );
    for r in results {
        let c = r.claim;
        let change: Vec<String> = c
            .variants
            .iter()
            .map(|v| format!("{}: `{}`", v.label, v.change))
            .collect();
        let rps: Vec<String> = c
            .variants
            .iter()
            .zip(&r.metrics)
            .map(|(v, m)| format!("{} {:.0}", v.label, m.rps))
            .collect();
        let verdicts: Vec<String> = c
            .variants
            .iter()
            .zip(&r.metrics)
            .map(|(v, m)| {
                let ids = if m.verdicts.is_empty() {
                    "-".to_string()
                } else {
                    m.verdicts.join(", ")
                };
                format!("{} {ids}", v.label)
            })
            .collect();
        md.push_str(&format!(
            "| {} ({}) | {} | {} | {} | {}; verdicts: {} | **{}**: {} |\n",
            md_cell(c.id),
            md_cell(c.claim),
            md_cell(c.source),
            md_cell(&change.join("; ")),
            rps.join(" / "),
            md_cell(&r.judgement.saw),
            md_cell(&verdicts.join("; ")),
            r.judgement.outcome,
            md_cell(&r.judgement.reason),
        ));
    }
    md
}

/// Options of `cargo xtask claims`.
pub struct Options {
    /// Short runs (2 s of load per config instead of 8).
    pub quick: bool,
    /// Where claims.md, claims.json and runs/ go.
    pub out: PathBuf,
    /// Claim ids to run; empty: all.
    pub filter: Vec<String>,
}

/// Runs the lab: every selected claim's configs, recorded, judged; prints the markdown
/// table on stdout and writes `claims.md`, `claims.json` and `runs/*.jsonl` under
/// `opts.out`.
pub fn claims(probe: &Path, opts: &Options) -> Result<()> {
    let selected = select(&opts.filter)?;
    let secs = if opts.quick { 2 } else { 8 };
    // The machine as the runs start (the load average says how shared it was).
    let m = machine();
    // Ctrl-C reaches wrk/hey and nginx-probe (our process group), which finish their
    // run; then we stop, and the throwaway nginx (its own group) is dropped.
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let flag = interrupted.clone();
        ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst)).context("signal handler")?;
    }
    let runs = opts.out.join("runs");
    std::fs::create_dir_all(&runs).with_context(|| format!("create {}", runs.display()))?;
    let mut results = Vec::new();
    for claim in &selected {
        let mut metrics = Vec::new();
        for v in &claim.variants {
            eprintln!(
                "claims: {} {} `{}` under {} for {secs} s",
                claim.id,
                v.label,
                v.change,
                claim.load.describe()
            );
            let m = record(probe, claim, v, secs, &runs)
                .with_context(|| format!("claim {} config {}", claim.id, v.label))?;
            if interrupted.load(Ordering::SeqCst) {
                bail!("interrupted: throwaway nginx stopped, nothing written");
            }
            eprintln!(
                "claims:   {:.0} req/s, {} requests, verdicts {:?}",
                m.rps, m.requests, m.verdicts
            );
            metrics.push(m);
        }
        let judgement = (claim.judge)(&metrics);
        let rec = |v: &Variant| runs.join(format!("{}-{}.jsonl", claim.id, v.label));
        let mut sentences = Vec::new();
        for v in claim.variants.iter().skip(1) {
            let c = compare(probe, &rec(&claim.variants[0]), &rec(v))?;
            let sentence = c["sentence"].as_str().unwrap_or_default().to_string();
            eprintln!(
                "claims:   compare {} -> {}: {sentence}",
                claim.variants[0].label, v.label
            );
            sentences.push((v.label.to_string(), sentence));
        }
        eprintln!(
            "claims: {} {}: {}",
            claim.id, judgement.outcome, judgement.reason
        );
        results.push(ClaimResult {
            claim,
            metrics,
            judgement,
            sentences,
        });
    }
    let command = format!(
        "cargo xtask claims{}{}",
        if opts.quick { " --quick" } else { "" },
        if opts.filter.is_empty() {
            String::new()
        } else {
            format!(" {}", opts.filter.join(" "))
        }
    );
    let table = markdown_table(&results);
    println!("{table}");
    let mut md = format!(
        "# nginx-probe claims lab\n\n`{command}`: {} cores ({}), kernel {}, nginx {}, {}, load average {} at the start; {secs} s of load per config, 2 nginx workers unless the claim says otherwise, a 30-byte file, access log on and unbuffered unless the claim changes it.\n\n",
        m.nproc, m.cpu, m.kernel, m.nginx, m.date, m.loadavg
    );
    md.push_str(&table);
    md.push_str("\n## What `nginx-probe compare` says\n\n");
    for r in &results {
        for (label, sentence) in &r.sentences {
            md.push_str(&format!(
                "- **{}**, {} -> {label}: {sentence}\n",
                r.claim.id, r.claim.variants[0].label
            ));
        }
    }
    md.push_str("\n## Rules\n\n");
    for r in &results {
        md.push_str(&format!(
            "- **{}** under `{}`{}: {} ({})\n",
            r.claim.id,
            r.claim.load.describe(),
            if r.claim.probe_args.is_empty() {
                String::new()
            } else {
                format!(", nginx-probe {}", r.claim.probe_args.join(" "))
            },
            r.judgement.outcome,
            r.judgement.reason
        ));
    }
    let doc = json!({
        "command": command,
        "machine": {"nproc": m.nproc, "cpu": m.cpu, "kernel": m.kernel, "nginx": m.nginx, "date": m.date, "loadavg": m.loadavg},
        "load_secs": secs,
        "claims": results.iter().map(|r| json!({
            "id": r.claim.id,
            "source": r.claim.source,
            "claim": r.claim.claim,
            "load": r.claim.load.describe(),
            "probe_args": r.claim.probe_args,
            "result": r.judgement.outcome.to_string(),
            "saw": r.judgement.saw,
            "reason": r.judgement.reason,
            "compare": r.sentences.iter().map(|(label, s)| json!({"before": r.claim.variants[0].label, "after": label, "sentence": s})).collect::<Vec<_>>(),
            "configs": r.claim.variants.iter().zip(&r.metrics).map(|(v, m)| json!({
                "label": v.label,
                "change": v.change,
                "record": format!("runs/{}-{}.jsonl", r.claim.id, v.label),
                "metrics": m.json(),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    });
    std::fs::write(opts.out.join("claims.md"), md)?;
    std::fs::write(
        opts.out.join("claims.json"),
        serde_json::to_string_pretty(&doc)? + "\n",
    )?;
    eprintln!(
        "claims: wrote {} and {} (runs in {})",
        opts.out.join("claims.md").display(),
        opts.out.join("claims.json").display(),
        runs.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_connections_collapse_to_a_few_requests_is_refuted() {
        // The lab's run: 106896 accepts, 55 requests with 64 worker_connections.
        let a = m(|m| {
            m.accepts = 301;
            m.requests = 191_654;
            m.accepts_per_request = 301.0 / 191_654.0;
        });
        let b = m(|m| {
            m.accepts = 106_896;
            m.requests = 55;
            m.accepts_per_request = 106_896.0 / 55.0;
        });
        let j = judge_worker_connections(&[a, b]);
        assert_eq!(j.outcome, Outcome::Refuted, "{}", j.reason);
        assert!(
            j.reason.contains("at least 106841 connections"),
            "{}",
            j.reason
        );
    }

    fn m(f: impl FnOnce(&mut Metrics)) -> Metrics {
        let mut m = Metrics {
            requests: 20_000,
            ..Metrics::default()
        };
        f(&mut m);
        m
    }

    fn with_per_req(pairs: &[(&str, f64)], f: impl FnOnce(&mut Metrics)) -> Metrics {
        m(|x| {
            x.per_request = pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect();
            f(x)
        })
    }

    #[test]
    fn summary_metrics_sum_workers_and_leave_epoll_out() {
        let s = json!({
            "schema": 1, "type": "summary",
            "workers": [
                {"accepts": 30, "accept_share": 0.75, "accept_errors": {"EMFILE": 2},
                 "accepted_then_closed": 1, "fds": {"peak": 60, "limit": 64}, "cpu_s": 0.3,
                 "requests": {"count": 3000}, "event_loop": {"busy_share": 0.6},
                 "writes": {"access_log": {"count": 3000, "total_ns": 3_000_000}},
                 "syscalls": {
                    "accept4": {"count": 32, "total_ns": 1_000_000},
                    "close": {"count": 3000, "total_ns": 1_000_000},
                    "epoll_wait": {"count": 900, "total_ns": 900_000_000},
                    "openat": {"count": 3000, "total_ns": 2_000_000},
                    "write": {"count": 3000, "total_ns": 3_000_000},
                    "writev": {"count": 3000, "total_ns": 3_000_000}}},
                {"accepts": 10, "accept_share": 0.25, "accept_errors": {"EMFILE": 1},
                 "accepted_then_closed": 0, "fds": {"peak": 20, "limit": 64}, "cpu_s": 0.1,
                 "requests": {"count": 1000}, "event_loop": {"busy_share": 0.2},
                 "writes": {"access_log": {"count": 1000, "total_ns": 1_000_000}},
                 "syscalls": {
                    "accept4": {"count": 10, "total_ns": 0},
                    "close": {"count": 1000, "total_ns": 0},
                    "openat": {"count": 1000, "total_ns": 0},
                    "write": {"count": 1000, "total_ns": 1_000_000},
                    "writev": {"count": 1000, "total_ns": 0}}}],
            "listen": [{"backlog": 16, "queue_max": 17, "overflows": 5, "drops": 5}],
            "verdicts": [{"id": "fd_exhaustion"}, {"id": "keepalive_off"}]
        });
        let client = ClientRun {
            rps: 2000.0,
            errors: 3,
            ..ClientRun::default()
        };
        let x = Metrics::from_summary(&s, &client, (300, 100)).unwrap();
        assert_eq!(x.requests, 4000);
        assert_eq!(x.accepts, 40);
        assert_eq!(x.accepts_per_request, 0.01);
        assert_eq!(x.emfile, 3);
        assert_eq!(x.accepted_then_closed, 1);
        assert_eq!((x.fd_peak, x.fd_limit), (60, 64));
        // 11 ms of syscalls outside epoll: 2 ms accept4 + close, 2 ms openat, 4 ms log.
        assert_eq!(x.setup_share, 2.0 / 11.0);
        assert_eq!(x.file_share, 2.0 / 11.0);
        assert_eq!(x.access_log_share, 4.0 / 11.0);
        assert_eq!(x.access_log_writes_per_request, 1.0);
        assert_eq!(x.per_req("openat"), 1.0);
        assert_eq!(x.per_req("epoll_wait"), 0.0);
        assert_eq!(x.syscalls_per_request, 16042.0 / 4000.0);
        assert_eq!(x.syscall_us_per_request, 11_000.0 / 4000.0);
        assert!((x.cpu_us_per_request - 100.0).abs() < 1e-9);
        assert_eq!(x.accept_skew, 1.5);
        assert!((x.busy_skew - 1.5).abs() < 1e-9);
        assert!((x.busy_cores - 0.8).abs() < 1e-9);
        assert_eq!(
            (x.listen_backlog, x.listen_queue_max, x.listen_overflows),
            (16, 17, 10)
        );
        assert!(x.queue_overflowed());
        assert_eq!(x.switches_per_1k(), 100.0);
        assert_eq!(x.verdicts, vec!["fd_exhaustion", "keepalive_off"]);
        assert_eq!((x.rps, x.client_errors), (2000.0, 3));
        // An interval line or another document is refused.
        assert!(
            Metrics::from_summary(&json!({"schema": 1, "type": "interval"}), &client, (0, 0))
                .is_err()
        );
    }

    #[test]
    fn keepalive_rule() {
        // From a --quick run: 0.00 vs 1.01 accepts/request, set-up 36.9%, CPU x2.06.
        let a = m(|x| {
            x.accepts_per_request = 0.002;
            x.setup_share = 0.048;
            x.cpu_us_per_request = 58.1;
        });
        let b = m(|x| {
            x.accepts_per_request = 1.01;
            x.setup_share = 0.369;
            x.cpu_us_per_request = 119.5;
        });
        let j = judge_keepalive(&[a.clone(), b.clone()]);
        assert_eq!(j.outcome, Outcome::Confirmed, "{j:?}");
        assert!(j.saw.contains("0.00 → 1.01"), "{}", j.saw);
        // A real but smaller cost: inconclusive; almost none: refuted.
        let smaller = Metrics {
            cpu_us_per_request: 90.0,
            ..b.clone()
        };
        assert_eq!(
            judge_keepalive(&[a.clone(), smaller]).outcome,
            Outcome::Inconclusive
        );
        let cheap = Metrics {
            cpu_us_per_request: 60.0,
            ..b.clone()
        };
        assert_eq!(
            judge_keepalive(&[a.clone(), cheap]).outcome,
            Outcome::Refuted
        );
        let minor = Metrics {
            setup_share: 0.05,
            ..b.clone()
        };
        assert_eq!(
            judge_keepalive(&[a.clone(), minor]).outcome,
            Outcome::Refuted
        );
        // The change did not take (B still reuses connections), or too few requests.
        let reused = Metrics {
            accepts_per_request: 0.01,
            ..b.clone()
        };
        assert_eq!(
            judge_keepalive(&[a.clone(), reused]).outcome,
            Outcome::Inconclusive
        );
        let few = Metrics { requests: 999, ..b };
        let j = judge_keepalive(&[a, few]);
        assert_eq!(j.outcome, Outcome::Inconclusive);
        assert!(j.reason.contains("999"), "{}", j.reason);
    }

    #[test]
    fn access_log_rule() {
        // From a --quick run: 1.000 → 0.002 → 0 writes/request, 15.8% of syscall time.
        let a = m(|x| {
            x.access_log_writes_per_request = 1.0;
            x.access_log_share = 0.158;
        });
        let b = m(|x| {
            x.access_log_writes_per_request = 0.002;
            x.access_log_share = 0.012;
        });
        let c = m(|_| {});
        let j = judge_access_log(&[a.clone(), b.clone(), c.clone()]);
        assert_eq!(j.outcome, Outcome::Confirmed, "{j:?}");
        assert!(j.saw.contains("1.000 → 0.002 → 0.000"), "{}", j.saw);
        let still = Metrics {
            access_log_writes_per_request: 1.0,
            ..b.clone()
        };
        assert_eq!(
            judge_access_log(&[a.clone(), still, c.clone()]).outcome,
            Outcome::Refuted
        );
        let free = Metrics {
            access_log_share: 0.01,
            ..a.clone()
        };
        assert_eq!(
            judge_access_log(&[free, b.clone(), c.clone()]).outcome,
            Outcome::Refuted
        );
        let none = Metrics {
            access_log_writes_per_request: 0.0,
            ..a.clone()
        };
        assert_eq!(
            judge_access_log(&[none, b.clone(), c.clone()]).outcome,
            Outcome::Refuted
        );
        let small = Metrics {
            access_log_share: 0.03,
            ..a.clone()
        };
        assert_eq!(
            judge_access_log(&[small, b.clone(), c]).outcome,
            Outcome::Inconclusive
        );
        let off_writes = m(|x| x.access_log_writes_per_request = 0.5);
        assert_eq!(
            judge_access_log(&[a, b, off_writes]).outcome,
            Outcome::Inconclusive
        );
    }

    #[test]
    fn multi_accept_rule() {
        // From a --quick run: accept skew 1.48 → 2.00, busy skew 1.15 → 2.00.
        let a = m(|x| {
            x.accepts = 61;
            x.accept_skew = 1.48;
            x.busy_skew = 1.15;
        });
        let b = m(|x| {
            x.accepts = 61;
            x.accept_skew = 2.0;
            x.busy_skew = 2.0;
        });
        assert_eq!(
            judge_multi_accept(&[a.clone(), b.clone()]).outcome,
            Outcome::Confirmed
        );
        let even = m(|x| {
            x.accepts = 61;
            x.accept_skew = 1.1;
            x.busy_skew = 1.2;
        });
        assert_eq!(
            judge_multi_accept(&[a.clone(), even]).outcome,
            Outcome::Refuted
        );
        let skewed_off = Metrics {
            busy_skew: 1.6,
            ..a.clone()
        };
        assert_eq!(
            judge_multi_accept(&[skewed_off, b.clone()]).outcome,
            Outcome::Inconclusive
        );
        let few = Metrics { accepts: 5, ..a };
        assert_eq!(judge_multi_accept(&[few, b]).outcome, Outcome::Inconclusive);
    }

    #[test]
    fn nofile_rule() {
        // From a --quick run: EMFILE 10 → 0; fds 65/64 → 279/4096.
        let a = m(|x| {
            x.emfile = 10;
            x.fd_peak = 65;
            x.fd_limit = 64;
        });
        let b = m(|x| {
            x.fd_peak = 279;
            x.fd_limit = 4096;
        });
        assert_eq!(
            judge_nofile(&[a.clone(), b.clone()]).outcome,
            Outcome::Confirmed
        );
        let still = Metrics {
            emfile: 3,
            ..b.clone()
        };
        assert_eq!(judge_nofile(&[a.clone(), still]).outcome, Outcome::Refuted);
        let not_raised = Metrics {
            fd_limit: 64,
            ..b.clone()
        };
        assert_eq!(
            judge_nofile(&[a.clone(), not_raised]).outcome,
            Outcome::Refuted
        );
        let light = m(|x| {
            x.fd_peak = 20;
            x.fd_limit = 64;
        });
        assert_eq!(
            judge_nofile(&[light, b.clone()]).outcome,
            Outcome::Inconclusive
        );
        let at_limit_no_error = Metrics { emfile: 0, ..a };
        assert_eq!(
            judge_nofile(&[at_limit_no_error, b]).outcome,
            Outcome::Refuted
        );
    }

    #[test]
    fn worker_connections_rule() {
        // From a --quick run: 13125 accepts for ~1966 requests with 64 worker_connections.
        let a = m(|x| {
            x.accepts = 301;
            x.requests = 14_800;
            x.accepts_per_request = 301.0 / 14_800.0;
        });
        let b = m(|x| {
            x.accepts = 13_125;
            x.requests = 1_966;
            x.accepts_per_request = 13_125.0 / 1_966.0;
        });
        let j = judge_worker_connections(&[a.clone(), b]);
        assert_eq!(j.outcome, Outcome::Refuted, "{j:?}");
        assert!(j.reason.contains("at least 11159"), "{}", j.reason);
        let refused = m(|x| {
            x.accepted_then_closed = 4;
            x.accepts = 600;
            x.accepts_per_request = 0.03;
        });
        assert_eq!(
            judge_worker_connections(&[a.clone(), refused]).outcome,
            Outcome::Refuted
        );
        let recycled = m(|x| {
            x.accepts = 1_500;
            x.accepts_per_request = 0.075;
        });
        assert_eq!(
            judge_worker_connections(&[a.clone(), recycled]).outcome,
            Outcome::Confirmed
        );
        let untouched = a.clone();
        assert_eq!(
            judge_worker_connections(&[a, untouched]).outcome,
            Outcome::Inconclusive
        );
    }

    #[test]
    fn open_file_cache_rule() {
        // From a --quick run: openat 1.000 → 0.000, open+stat 20.4% of syscall time.
        let a = with_per_req(&[("openat", 1.0), ("newfstatat", 2.0)], |x| {
            x.file_share = 0.204
        });
        let b = with_per_req(&[("openat", 0.0), ("newfstatat", 0.0)], |_| {});
        assert_eq!(
            judge_open_file_cache(&[a.clone(), b.clone()]).outcome,
            Outcome::Confirmed
        );
        assert_eq!(
            judge_open_file_cache(&[a.clone(), a.clone()]).outcome,
            Outcome::Refuted
        );
        let cheap = Metrics {
            file_share: 0.01,
            ..a.clone()
        };
        assert_eq!(
            judge_open_file_cache(&[cheap, b.clone()]).outcome,
            Outcome::Refuted
        );
        let middling = Metrics {
            file_share: 0.03,
            ..a
        };
        assert_eq!(
            judge_open_file_cache(&[middling, b]).outcome,
            Outcome::Inconclusive
        );
    }

    #[test]
    fn sendfile_rule() {
        let a = with_per_req(&[("sendfile", 0.0)], |x| x.cpu_us_per_request = 37.8);
        let b = with_per_req(&[("sendfile", 1.0)], |x| x.cpu_us_per_request = 59.9);
        assert_eq!(
            judge_sendfile(&[a.clone(), b.clone()]).outcome,
            Outcome::Refuted
        );
        let cheaper = Metrics {
            cpu_us_per_request: 34.0,
            ..b.clone()
        };
        assert_eq!(
            judge_sendfile(&[a.clone(), cheaper]).outcome,
            Outcome::Confirmed
        );
        let same = Metrics {
            cpu_us_per_request: 38.5,
            ..b.clone()
        };
        assert_eq!(
            judge_sendfile(&[a.clone(), same]).outcome,
            Outcome::Inconclusive
        );
        // sendfile off still sending with sendfile: the change did not take.
        assert_eq!(
            judge_sendfile(&[b.clone(), b]).outcome,
            Outcome::Inconclusive
        );
    }

    #[test]
    fn worker_processes_rule() {
        let w = |requests: u64, switches: u64, cpu: f64| {
            m(|x| {
                x.requests = requests;
                x.context_switches = switches;
                x.cpu_us_per_request = cpu;
            })
        };
        // From a --quick run: 293 → 146 switches/1k requests, CPU x1.23: fewer switches,
        // dearer requests.
        let one = w(11_994, 10_051, 56.7);
        let two = w(18_481, 5_415, 40.6);
        let four = w(17_964, 2_623, 50.1);
        let j = judge_worker_processes(&[one.clone(), two.clone(), four]);
        assert_eq!(j.outcome, Outcome::Inconclusive, "{j:?}");
        let switching = w(18_000, 8_000, 42.0);
        assert_eq!(
            judge_worker_processes(&[one.clone(), two.clone(), switching]).outcome,
            Outcome::Confirmed
        );
        let cheaper = w(18_000, 8_000, 36.0);
        assert_eq!(
            judge_worker_processes(&[one.clone(), two.clone(), cheaper]).outcome,
            Outcome::Refuted
        );
        let free = w(18_000, 4_000, 41.0);
        assert_eq!(
            judge_worker_processes(&[one, two, free]).outcome,
            Outcome::Refuted
        );
    }

    #[test]
    fn backlog_rule() {
        // From a --quick run: default backlog queue max 447 of 511, no overflows; backlog
        // 16 sampled empty but 1838 overflows+drops.
        let a = m(|x| {
            x.listen_backlog = 511;
            x.listen_queue_max = 447;
        });
        let b = m(|x| {
            x.listen_backlog = 16;
            x.listen_overflows = 1838;
        });
        assert_eq!(
            judge_backlog(&[a.clone(), b.clone()]).outcome,
            Outcome::Confirmed
        );
        let absorbed = m(|x| {
            x.listen_backlog = 16;
            x.listen_queue_max = 9;
        });
        assert_eq!(
            judge_backlog(&[a.clone(), absorbed]).outcome,
            Outcome::Refuted
        );
        let full = Metrics {
            listen_queue_max: 512,
            ..a.clone()
        };
        assert_eq!(
            judge_backlog(&[full, b.clone()]).outcome,
            Outcome::Inconclusive
        );
        let ignored = Metrics {
            listen_backlog: 511,
            ..b
        };
        assert_eq!(judge_backlog(&[a, ignored]).outcome, Outcome::Inconclusive);
    }

    #[test]
    fn claim_filter() {
        assert_eq!(select(&[]).unwrap().len(), all_claims().len());
        let one = select(&["nofile".into()]).unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].id, "nofile");
        let err = select(&["nope".into()]).err().unwrap().to_string();
        assert!(
            err.starts_with("unknown claim `nope`: known claims are keepalive, "),
            "{err}"
        );
        assert!(!err.contains('\n'));
    }

    #[test]
    fn every_claim_has_a_seed_source_and_distinct_configs() {
        let seeds = ["000_", "002_", "003_", "004_"];
        for c in all_claims() {
            assert!(seeds.iter().any(|s| c.source.contains(s)), "{}", c.id);
            assert!(c.variants.len() >= 2, "{}", c.id);
            let labels: Vec<&str> = c.variants.iter().map(|v| v.label).collect();
            assert_eq!(labels, ["A", "B", "C"][..labels.len()], "{}", c.id);
        }
    }

    #[test]
    fn summary_is_the_last_summary_line_of_a_recording() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("r.jsonl");
        std::fs::write(
            &f,
            "{\"type\":\"header\"}\n{\"type\":\"interval\",\"n\":1}\n{\"type\":\"summary\",\"n\":2}\n\n",
        )
        .unwrap();
        assert_eq!(read_summary(&f).unwrap()["n"], 2);
        std::fs::write(&f, "{\"type\":\"interval\"}\n").unwrap();
        assert!(read_summary(&f).is_err());
    }
}
