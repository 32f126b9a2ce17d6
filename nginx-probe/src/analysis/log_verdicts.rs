//! Verdicts on the logs nginx writes per request, from writes classified at the moment
//! of the write (see `nginx_probe_common::fd_kind`): an access log reopened per request
//! and an error log left at a verbose level. `verdict::judge` sums the workers' numbers
//! into [`LogTotals`] and runs these rules; thresholds here and in docs/verdicts.md.

use std::collections::BTreeMap;

use crate::model::{Severity, Verdict};

use super::inputs::Inputs;

/// Access-log writes per request at or above which the log is written unbuffered.
pub const ACCESS_LOG_WRITES_PER_REQUEST: f64 = 0.5;
/// Requests needed before the access-log rules are judged.
pub const ACCESS_LOG_MIN_REQUESTS: u64 = 200;
/// Share of the workers' traced syscall time (outside epoll waits; tracepoints) spent
/// in access-log writes at or above which unbuffered logging is material: below it
/// (a proxy or TLS load where a log write is under 1% of the time) buffering saves
/// nothing worth a finding.
pub const ACCESS_LOG_MIN_SYSCALL_SHARE: f64 = 0.03;
/// Access-log writes per second (all workers, over the detail seconds) at or above
/// which unbuffered logging is material whatever its share of the time.
pub const ACCESS_LOG_MIN_WRITES_PER_S: f64 = 1000.0;
/// Access-log writes per second (all workers, over the detail seconds) below which
/// unbuffered logging is never material, whatever its share of the syscall time: 100
/// writes a second at a p99 of 10-20 us cost 1-2 ms of CPU a second, which buffering
/// cannot turn into anything a client notices, while at such rates the workers do so
/// little else that a log write is easily 3% of their syscall time (a trial at 13-22
/// requests a second during an incident fired on the share alone). The share then
/// needs this rate; a rate unknown keeps the rule silent.
pub const ACCESS_LOG_SHARE_MIN_WRITES_PER_S: f64 = 100.0;

/// Access-log opens per request at or above which the log is reopened per request (a
/// variable in its path without `open_log_file_cache`: exactly 1.0; with the cache, a
/// few opens per `valid=` period).
pub const ACCESS_LOG_OPENS_PER_REQUEST: f64 = 0.5;
/// Error-log writes per request above which the error log is too verbose. At `warn`
/// or `error` nginx logs problems only: at most about one line per request even when
/// every request fails (a 404's `open() failed`, a request body buffered to a temp
/// file). `info` adds lines per connection; `debug` writes dozens per request (89 on
/// Debian's nginx 1.22, keepalive, static file).
pub const ERROR_LOG_WRITES_PER_REQUEST: f64 = 5.0;
/// Requests needed before the error-log rule is judged.
pub const ERROR_LOG_MIN_REQUESTS: u64 = 200;

/// Requests needed before the access-log reopen rule is judged.
pub const ACCESS_LOG_REOPEN_MIN_REQUESTS: u64 = 200;

/// All workers' numbers over the period judged.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogTotals {
    /// Requests (the report's `requests`).
    pub requests: u64,
    /// openat calls that returned an access-log fd; None when a worker's were not
    /// counted.
    pub access_log_opens: Option<u64>,
    /// Error-log writes (classified by fd at the moment of the write).
    pub error_log_writes: u64,
    /// Their total time, ns.
    pub error_log_ns: u64,
    /// Time in traced syscalls outside epoll waits, ns.
    pub all_syscall_ns: u64,
}

use crate::model::round3_json as round3;

/// An access log opened (and closed) for every request: openat calls returning an
/// access-log fd, counted in the kernel, per request.
pub fn access_log_reopened(t: &LogTotals, out: &mut Vec<Verdict>) {
    let requests = t.requests;
    let Some(opens) = t.access_log_opens else {
        return;
    };
    if requests < ACCESS_LOG_REOPEN_MIN_REQUESTS {
        return;
    }
    let per_request = opens as f64 / requests as f64;
    if per_request < ACCESS_LOG_OPENS_PER_REQUEST {
        return;
    }
    let mut evidence = BTreeMap::new();
    evidence.insert("access_log_opens", serde_json::json!(opens));
    evidence.insert("requests", serde_json::json!(requests));
    evidence.insert("opens_per_request", round3(per_request));
    out.push(Verdict::new(
        "access_log_reopened",
        Severity::Warning,
        evidence,
        &["open_log_file_cache", "access_log"],
        format!(
            "{per_request:.2} opens of an access-log file per request: its path has variables, so nginx opens, writes and closes the log for every request; keep the files open with `open_log_file_cache max=1000 inactive=20s valid=1m;` or use a fixed path"
        ),
    ));
}

/// Error-log writes per request far above what problems alone produce: the
/// `error_log` level is `debug` or `info`.
pub fn error_log_verbose(t: &LogTotals, out: &mut Vec<Verdict>) {
    let requests = t.requests;
    let writes = t.error_log_writes;
    if requests < ERROR_LOG_MIN_REQUESTS {
        return;
    }
    let per_request = writes as f64 / requests as f64;
    if per_request <= ERROR_LOG_WRITES_PER_REQUEST {
        return;
    }
    let (log_ns, all_ns) = (t.error_log_ns, t.all_syscall_ns);
    let mut evidence = BTreeMap::new();
    evidence.insert("error_log_writes", serde_json::json!(writes));
    evidence.insert("requests", serde_json::json!(requests));
    evidence.insert("writes_per_request", round3(per_request));
    if all_ns > 0 {
        evidence.insert(
            "share_of_syscall_time",
            round3(log_ns as f64 / all_ns as f64),
        );
    }
    out.push(Verdict::new(
        "error_log_verbose",
        Severity::Warning,
        evidence,
        &["error_log"],
        format!(
            "{per_request:.1} error-log writes per request: at `warn` or `error` nginx logs problems only (at most about one line per request), so the `error_log` level is `debug` (dozens of lines per request) or `info`; set it to `warn` (`error_log <path> warn;`) and use `debug_connection` to debug a single client"
        ),
    ));
}

/// Whether `writes` access-log writes taking `log_ns` of the workers' `all_ns` syscall
/// time are material: at [`ACCESS_LOG_MIN_WRITES_PER_S`], or at
/// [`ACCESS_LOG_MIN_SYSCALL_SHARE`] with [`ACCESS_LOG_SHARE_MIN_WRITES_PER_S`] (a few
/// writes a second are a large share of an idle worker's syscalls and cost nothing);
/// (writes/s, share) when so; None also when the rate is unknown.
fn access_log_material(
    inp: &Inputs,
    writes: u64,
    log_ns: u64,
    all_ns: u64,
) -> Option<(f64, Option<f64>)> {
    let share = (all_ns > 0).then(|| log_ns as f64 / all_ns as f64);
    let secs = inp.detail_s();
    let rate = (secs > 0.0).then(|| writes as f64 / secs)?;
    (rate >= ACCESS_LOG_MIN_WRITES_PER_S
        || (rate >= ACCESS_LOG_SHARE_MIN_WRITES_PER_S
            && share.is_some_and(|s| s >= ACCESS_LOG_MIN_SYSCALL_SHARE)))
    .then_some((rate, share))
}

/// `access_log_unbuffered`: the access log written once per request, unbuffered, at a
/// material rate or share ([`access_log_material`]); thresholds in `verdict`.
pub fn access_log_unbuffered(inp: &Inputs, out: &mut Vec<Verdict>) {
    let Some(requests) = inp.requests else { return };
    let writes: u64 = inp.workers.iter().map(|w| w.access_log_writes).sum();
    if requests < ACCESS_LOG_MIN_REQUESTS {
        return;
    }
    let per_request = writes as f64 / requests as f64;
    if per_request < ACCESS_LOG_WRITES_PER_REQUEST {
        return;
    }
    // buffer= is not advice nginx would take for a log it reopens per request (a path
    // with variables, counted as opens): `access_log_reopened` names that one.
    let opens: u64 = inp.workers.iter().filter_map(|w| w.access_log_opens).sum();
    if opens as f64 / requests as f64 >= ACCESS_LOG_OPENS_PER_REQUEST {
        return;
    }
    // Logs the configuration shows nginx cannot buffer ("buffered logs cannot have
    // variables in name", "logs to syslog cannot be buffered"): said in the advice.
    let unbufferable: Vec<String> = inp
        .config
        .iter()
        .flat_map(|c| &c.access_logs)
        .filter(|a| a.path != "off" && !a.bufferable())
        .map(|a| format!("{} ({})", a.path, a.at))
        .collect();
    let log_ns: u64 = inp.workers.iter().map(|w| w.access_log_ns).sum();
    let all_ns: u64 = inp.workers.iter().map(|w| w.all_syscall_ns).sum();
    let Some((rate, share)) = access_log_material(inp, writes, log_ns, all_ns) else {
        return;
    };
    let p99 = inp
        .workers
        .iter()
        .map(|w| w.access_log_p99_ns)
        .max()
        .unwrap_or(0);
    let mut evidence = BTreeMap::new();
    evidence.insert("access_log_writes", serde_json::json!(writes));
    evidence.insert("requests", serde_json::json!(requests));
    evidence.insert(
        "requests_source",
        serde_json::json!(inp.requests_source.name()),
    );
    evidence.insert("writes_per_request", round3(per_request));
    evidence.insert("p99_write_us", round3(p99 as f64 / 1e3));
    if let Some(share) = share {
        evidence.insert("share_of_syscall_time", round3(share));
    }
    evidence.insert("writes_per_s", round3(rate));
    evidence.insert(
        "material_by",
        serde_json::json!(format!(
            "{ACCESS_LOG_MIN_WRITES_PER_S} writes/s or more, or {}% of the workers' syscall time at {ACCESS_LOG_SHARE_MIN_WRITES_PER_S} writes/s or more (below that rate buffering saves a few ms of CPU a second at most)",
            ACCESS_LOG_MIN_SYSCALL_SHARE * 100.0
        )),
    );
    out.push(Verdict::new(
        "access_log_unbuffered",
        Severity::Warning,
        evidence,
        &["access_log ... buffer=", "access_log ... flush=", "access_log off"],
        format!(
            "{per_request:.2} access-log write() calls per request: every request pays a write to the log file; buffer it (`access_log <path> buffer=32k flush=5s;`) or turn it off where it is not needed{}",
            if unbufferable.is_empty() {
                String::new()
            } else {
                format!(
                    ". nginx refuses buffer= on a path with variables or a syslog: target: {}; give such a log a fixed path to buffer it",
                    unbufferable.join(", ")
                )
            }
        ),
    ));
}

#[cfg(test)]
mod tests {
    use crate::analysis::verdict::{judge, Inputs, WorkerInput};

    /// Inputs with the exact request total of `workers` (as from stub_status).
    fn inputs(workers: Vec<WorkerInput>) -> Inputs {
        Inputs {
            requests: Some(workers.iter().map(|w| w.requests.unwrap_or(0)).sum()),
            workers,
            ..Inputs::default()
        }
    }

    use crate::analysis::inputs::w;

    #[test]
    fn access_log_reopened_counts_opens_per_request() {
        // Case 12 A: a variable in the path, 500 requests, 500 opens over two workers.
        let mut a = w(1, 5, 250);
        let mut b = w(2, 5, 250);
        a.access_log_opens = Some(250);
        b.access_log_opens = Some(250);
        let v = judge(&inputs(vec![a.clone(), b.clone()]));
        let ids: Vec<&str> = v.iter().map(|v| v.id.as_str()).collect();
        assert_eq!(ids, ["access_log_reopened"]);
        assert_eq!(v[0].evidence["opens_per_request"], serde_json::json!(1.0));
        assert_eq!(v[0].evidence["access_log_opens"], serde_json::json!(500));
        assert!(v[0].advice.contains("open_log_file_cache max="));
        // open_log_file_cache: one open per worker per `valid=` period.
        a.access_log_opens = Some(1);
        b.access_log_opens = Some(2);
        assert!(judge(&inputs(vec![a.clone(), b.clone()])).is_empty());
        // Opens not counted on one worker (no BTF): not judged.
        a.access_log_opens = None;
        b.access_log_opens = Some(250);
        assert!(judge(&inputs(vec![a, b])).is_empty());
    }

    #[test]
    fn error_log_verbose_above_five_writes_per_request() {
        // Case 13: `error_log ... debug` wrote 89 lines per request.
        let mut a = w(1, 10, 500);
        a.error_log_writes = 44_500;
        a.error_log_ns = 4_450_000;
        a.all_syscall_ns = 8_900_000;
        let v = judge(&inputs(vec![a.clone()]));
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].id, "error_log_verbose");
        assert_eq!(v[0].evidence["writes_per_request"], serde_json::json!(89.0));
        assert_eq!(
            v[0].evidence["share_of_syscall_time"],
            serde_json::json!(0.5)
        );
        assert!(v[0].advice.contains("`debug`"), "{}", v[0].advice);
        assert_eq!(v[0].directives, ["error_log"]);
        // `warn` with one problem per request (a 404, a buffered body): silent; the
        // threshold itself too.
        for writes in [500, 2_500] {
            a.error_log_writes = writes;
            assert!(judge(&inputs(vec![a.clone()])).is_empty());
        }
        // Too few requests to judge.
        let mut few = w(1, 1, 100);
        few.error_log_writes = 8_900;
        assert!(judge(&inputs(vec![few])).is_empty());
    }
}
