//! Repeated runs: the median of each config's runs, 95% confidence intervals of the
//! per-run values (Student's t interval of the mean), and how often a rule's decision
//! survives resampling the runs (bootstrap), so that a claim is decided only when the
//! decision does not hang on one lucky run.

use super::*;

/// Share of bootstrap resamples that must give the median's decision for it to stand;
/// below it the claim is `inconclusive`.
pub const DECISION_AGREEMENT: f64 = 0.95;

/// Bootstrap resamples of the runs per judgement.
pub const RESAMPLES: usize = 400;

/// Two-sided 95% Student's t quantiles for 1..=30 degrees of freedom; beyond, 1.96.
const T95: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// [`crate::stats::median`] of `xs`, 0 when no value is finite: a figure no run gave
/// is 0 in [`Metrics`] as in its default (the rules read 0 as "not seen").
pub fn median_or_zero(xs: &[f64]) -> f64 {
    crate::stats::median(xs).unwrap_or(0.0)
}

/// 95% confidence interval of the mean of `xs` (t interval); a single value is its own
/// interval (no spread is known: the caller says so).
pub fn ci95(xs: &[f64]) -> (f64, f64) {
    let n = xs.len();
    if n == 0 {
        return (0.0, 0.0);
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return (mean, mean);
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let t = T95.get(n - 2).copied().unwrap_or(1.96);
    let half = t * (var / n as f64).sqrt();
    (mean - half, mean + half)
}

/// The field-by-field median of several runs of one config: numbers by their median,
/// per-request counts key by key, verdicts printed in more than half of the runs.
pub fn median_metrics(runs: &[Metrics]) -> Metrics {
    let f =
        |get: &dyn Fn(&Metrics) -> f64| median_or_zero(&runs.iter().map(get).collect::<Vec<_>>());
    let u = |get: &dyn Fn(&Metrics) -> u64| f(&|m| get(m) as f64).round() as u64;
    let mut per_request = BTreeMap::new();
    for k in runs.iter().flat_map(|m| m.per_request.keys()) {
        per_request.insert(
            k.clone(),
            f(&|m| m.per_request.get(k).copied().unwrap_or(0.0)),
        );
    }
    let mut verdicts: Vec<String> = Vec::new();
    for v in runs.iter().flat_map(|m| m.verdicts.iter()) {
        let seen = runs.iter().filter(|m| m.verdicts.contains(v)).count();
        if seen * 2 > runs.len() && !verdicts.contains(v) {
            verdicts.push(v.clone());
        }
    }
    Metrics {
        rps: f(&|m| m.rps),
        client_errors: u(&|m| m.client_errors),
        requests: u(&|m| m.requests),
        accepts: u(&|m| m.accepts),
        accepts_per_request: f(&|m| m.accepts_per_request),
        setup_share: f(&|m| m.setup_share),
        access_log_writes_per_request: f(&|m| m.access_log_writes_per_request),
        access_log_share: f(&|m| m.access_log_share),
        file_share: f(&|m| m.file_share),
        per_request,
        syscalls_per_request: f(&|m| m.syscalls_per_request),
        syscall_us_per_request: f(&|m| m.syscall_us_per_request),
        cpu_us_per_request: f(&|m| m.cpu_us_per_request),
        accept_skew: f(&|m| m.accept_skew),
        busy_skew: f(&|m| m.busy_skew),
        busy_cores: f(&|m| m.busy_cores),
        emfile: u(&|m| m.emfile),
        fd_peak: u(&|m| m.fd_peak),
        fd_limit: u(&|m| m.fd_limit),
        accepted_then_closed: u(&|m| m.accepted_then_closed),
        listen_backlog: u(&|m| m.listen_backlog),
        listen_queue_max: u(&|m| m.listen_queue_max),
        listen_overflows: u(&|m| m.listen_overflows),
        context_switches: u(&|m| m.context_switches),
        nonvoluntary_switches: u(&|m| m.nonvoluntary_switches),
        verdicts,
        config: runs.first().map(|m| m.config.clone()).unwrap_or_default(),
        closed_by_nginx: opt(runs, |m| m.closed_by_nginx),
        upstream_connects: u(&|m| m.upstream_connects),
        accept_eagain: u(&|m| m.accept_eagain),
        over_nofile_warnings: opt(runs, |m| m.over_nofile_warnings),
        emfile_log_lines: u(&|m| m.emfile_log_lines),
        load_connections: u(&|m| m.load_connections),
        online_cpus: u(&|m| m.online_cpus),
        tls_handshakes: u(&|m| m.tls_handshakes),
        tls_call_ns: u(&|m| m.tls_call_ns),
        cpu_cores: f(&|m| m.cpu_cores),
        run_delay_us_per_request: f(&|m| m.run_delay_us_per_request),
        other_writes: u(&|m| m.other_writes),
        loop_p99_us: f(&|m| m.loop_p99_us),
        loop_max_us: f(&|m| m.loop_max_us),
    }
}

/// Median of an optional count over the runs that have it; None when none has.
fn opt(runs: &[Metrics], get: impl Fn(&Metrics) -> Option<u64>) -> Option<u64> {
    let xs: Vec<f64> = runs.iter().filter_map(&get).map(|v| v as f64).collect();
    (!xs.is_empty()).then(|| median_or_zero(&xs).round() as u64)
}

/// Per numeric metric of one config's runs: the per-run values, their median and 95%
/// interval, as `{"metric": {"runs": [...], "median": m, "ci95": [lo, hi]}}`.
pub fn spread_json(runs: &[Metrics]) -> Value {
    let docs: Vec<Value> = runs.iter().map(Metrics::json).collect();
    let mut out = serde_json::Map::new();
    if let Some(Value::Object(first)) = docs.first() {
        for (k, v) in first {
            if !v.is_number() {
                continue;
            }
            let xs: Vec<f64> = docs.iter().filter_map(|d| d[k].as_f64()).collect();
            let (lo, hi) = ci95(&xs);
            out.insert(
                k.clone(),
                json!({"runs": xs, "median": round(median_or_zero(&xs), 4), "ci95": [round(lo, 4), round(hi, 4)]}),
            );
        }
    }
    Value::Object(out)
}

/// A claim's decision over repeated runs: the rule judged on each config's median, and
/// the share of bootstrap resamples (each config's runs drawn with replacement, the
/// rule judged on their medians) that agree. Below [`DECISION_AGREEMENT`] the outcome
/// is `inconclusive`, with the agreement in the reason. A single run per config is
/// judged as it is, and says that its noise is unknown.
pub fn judge_repeated(judge: fn(&[Metrics]) -> Judgement, runs: &[Vec<Metrics>]) -> Judgement {
    let medians: Vec<Metrics> = runs.iter().map(|r| median_metrics(r)).collect();
    let mut j = judge(&medians);
    let n = runs.iter().map(Vec::len).min().unwrap_or(0);
    if n < 2 {
        j.reason = format!("{} (one run per config: noise unknown)", j.reason);
        return j;
    }
    let mut rng = fastrand::Rng::with_seed(0x6e67_696e_7870);
    let mut agree = 0;
    for _ in 0..RESAMPLES {
        let sample: Vec<Metrics> = runs
            .iter()
            .map(|r| {
                let pick: Vec<Metrics> = (0..r.len())
                    .map(|_| r[rng.usize(..r.len())].clone())
                    .collect();
                median_metrics(&pick)
            })
            .collect();
        if judge(&sample).outcome == j.outcome {
            agree += 1;
        }
    }
    let share = agree as f64 / RESAMPLES as f64;
    if j.outcome != Outcome::Inconclusive && share < DECISION_AGREEMENT {
        j.reason = format!(
            "on the medians of {n} runs per config: {}; but only {:.0}% of resamples of the runs agree (needs {:.0}%), so the runs do not settle it",
            j.reason,
            share * 100.0,
            DECISION_AGREEMENT * 100.0
        );
        j.outcome = Outcome::Inconclusive;
    } else {
        j.reason = format!(
            "on the medians of {n} runs per config ({:.0}% of resamples agree): {}",
            share * 100.0,
            j.reason
        );
    }
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rule for the tests: confirmed when B's accepts per request are at least twice A's.
    fn doubles(ms: &[Metrics]) -> Judgement {
        let (a, b) = (ms[0].accepts_per_request, ms[1].accepts_per_request);
        let outcome = if b >= 2.0 * a {
            Outcome::Confirmed
        } else {
            Outcome::Refuted
        };
        verdict(outcome, format!("{a} -> {b}"), "doubles or not")
    }

    fn runs(values: &[f64]) -> Vec<Metrics> {
        values
            .iter()
            .map(|&v| Metrics {
                accepts_per_request: v,
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn median_and_t_interval() {
        assert_eq!(median_or_zero(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median_or_zero(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median_or_zero(&[]), 0.0);
        // mean 2, sd 1, n 3: 2 +- 4.303 / sqrt(3)
        let (lo, hi) = ci95(&[1.0, 2.0, 3.0]);
        assert!((lo - (2.0 - 4.303 / 3f64.sqrt())).abs() < 1e-9, "{lo}");
        assert!((hi - (2.0 + 4.303 / 3f64.sqrt())).abs() < 1e-9, "{hi}");
        assert_eq!(ci95(&[5.0]), (5.0, 5.0));
    }

    #[test]
    fn consistent_runs_decide_and_say_how_sure() {
        let j = judge_repeated(doubles, &[runs(&[1.0, 1.1, 0.9]), runs(&[3.0, 3.2, 2.9])]);
        assert_eq!(j.outcome, Outcome::Confirmed);
        assert!(j.reason.contains("100% of resamples agree"), "{}", j.reason);
    }

    #[test]
    fn runs_that_disagree_are_inconclusive() {
        // B's median doubles A's, but one run of three does not: resampling often flips it.
        let j = judge_repeated(doubles, &[runs(&[1.0, 1.0, 1.0]), runs(&[2.1, 2.2, 1.2])]);
        assert_eq!(j.outcome, Outcome::Inconclusive, "{}", j.reason);
        assert!(j.reason.contains("do not settle it"), "{}", j.reason);
    }

    #[test]
    fn one_run_says_its_noise_is_unknown() {
        let j = judge_repeated(doubles, &[runs(&[1.0]), runs(&[3.0])]);
        assert_eq!(j.outcome, Outcome::Confirmed);
        assert!(j.reason.contains("noise unknown"));
    }

    #[test]
    fn the_median_config_keeps_majority_verdicts() {
        let mut r = runs(&[1.0, 2.0, 9.0]);
        r[0].verdicts = vec!["keepalive_off".into()];
        r[1].verdicts = vec!["keepalive_off".into(), "fd_exhaustion".into()];
        let m = median_metrics(&r);
        assert_eq!(m.accepts_per_request, 2.0);
        assert_eq!(m.verdicts, vec!["keepalive_off".to_string()]);
        let s = spread_json(&r);
        assert_eq!(s["accepts_per_request"]["median"], 2.0);
        assert_eq!(s["accepts_per_request"]["runs"], json!([1.0, 2.0, 9.0]));
    }
}
