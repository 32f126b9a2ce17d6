//! The rules: one pure judgement per claim on nginx-probe's metrics, and the
//! thresholds they use.

use super::*;

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
/// keepalive_requests: a config "closes a connection every N requests" when its
/// reconnects (accepts beyond the load's own connections) lie within this factor of
/// those expected, either way ...
pub const RECYCLE_TOLERANCE: f64 = 1.3;
/// ... and "does not recycle" below this fraction of them.
pub const RECYCLE_ABSENT: f64 = 0.5;
/// keepalive_requests 100000: no recycling left at or below this many reconnects per
/// request (a tenth of the default's 1/1000).
pub const RECYCLE_GONE: f64 = 0.0001;
/// The load "reached" a worker's fd limit when its peak open fds came within this
/// fraction of it.
pub const NEAR_LIMIT: f64 = 0.9;
/// worker_processes_sweep: the workers' CPU cores used "flattens" from 4 to 8
/// workers when it grows less than this factor ...
pub const SWEEP_FLAT: f64 = 1.25;
/// ... and keeps growing at or above this factor.
pub const SWEEP_GROWS: f64 = 1.5;
/// tls_session_cache: sessions were resumed when libssl's time per handshake fell to at
/// most this fraction of that of full handshakes ...
pub const TLS_RESUMED_COST: f64 = 0.5;
/// ... and were not when it stayed at or above this fraction.
pub const TLS_FULL_COST: f64 = 0.9;
/// worker_processes_sweep: CPUs the machine needs for its largest worker count (8).
pub const SWEEP_CPUS: u64 = 8;

// ---------------------------------------------------------------------------------------
// Metrics: what one run measured, taken from nginx-probe's summary (and the client).

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

pub(super) fn verdict(outcome: Outcome, saw: String, reason: impl Into<String>) -> Judgement {
    Judgement {
        outcome,
        saw,
        reason: reason.into(),
    }
}

/// "a → b → c" of one figure over the configs.
pub(super) fn across(ms: &[Metrics], f: impl Fn(&Metrics) -> String) -> String {
    ms.iter().map(f).collect::<Vec<_>>().join(" → ")
}

pub(super) fn pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

pub(super) fn too_few_requests(ms: &[Metrics], saw: &str) -> Option<Judgement> {
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
