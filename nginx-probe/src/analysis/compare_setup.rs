//! `compare`'s caveats on the setups compared: the two sides traced different nginx
//! masters, nginx versions, configurations or numbers of workers. Each fact comes from
//! the recordings themselves (a report's `master_pid`, `master` under `--all` and
//! `config`, a `--record` header's `nginx_version`); a fact a recording lacks is said
//! unknown, never assumed equal.

use std::collections::BTreeMap;

use crate::model::{recording::Recording, Report};

/// Effective values a configuration caveat quotes at most.
const VALUES_QUOTED: usize = 3;

/// The caveats on what differs between the setups of `runs` (every run of both sides,
/// with its name), in this order: masters, nginx versions, configurations, workers.
pub fn setup_caveats(runs: &[(&str, &Recording)]) -> Vec<String> {
    let whole: Vec<(&str, &Recording, &Report)> = runs
        .iter()
        .map(|(n, r)| (*n, *r, r.whole_run().0))
        .collect();
    let mut out = Vec::new();
    out.extend(masters(&whole));
    out.extend(versions(&whole));
    out.extend(configs(&whole));
    out.extend(workers(&whole));
    for (name, rec, w) in &whole {
        out.extend(sampled(name, w));
        out.extend(load_shape(name, rec));
    }
    out
}

/// A run traced with `--detail sampled` (the default of `--record`): its detail
/// figures are the windows' (trial 18: a mean busy share of 0.48 was one 1 s window's,
/// and intervals with no window read 0).
fn sampled(name: &str, w: &Report) -> Option<String> {
    let d = w.detail.as_ref()?;
    Some(format!(
        "{name} was traced with --detail sampled: its detail figures (busy share, syscalls and writes per request, latencies) were counted in {} window(s), {:.0}% of its time, and its intervals with no window have none",
        d.windows,
        d.coverage * 100.0
    ))
}

/// A run whose requests came mostly in a few of its intervals: the interval values
/// (a median, its spread) do not describe its load (trial 18: 3000 requests in the
/// first of 10 intervals, shown as 0±0). Said when one interval held at least half of
/// the requests of 3 or more intervals, or all of them of 2 (trial 19: a 2-interval
/// burst was not said). The counts are each interval's exact request count (its
/// `requests.source`: nginx's stub_status counter, the uprobes or the access log);
/// an interval with an estimated or unknown count says nothing.
fn load_shape(name: &str, rec: &Recording) -> Option<String> {
    let counts: Vec<u64> = rec
        .intervals
        .iter()
        .map(|r| r.requests.count.filter(|_| r.requests.source.exact()))
        .collect::<Option<_>>()?;
    let total: u64 = counts.iter().sum();
    let top = *counts.iter().max()?;
    let concentrated = match counts.len() {
        0 | 1 => false,
        2 => top == total,
        _ => top * 2 >= total,
    };
    if total == 0 || !concentrated {
        return None;
    }
    let busy = counts.iter().filter(|&&n| n > 0).count();
    let source = rec.intervals[0].requests.source.name();
    Some(format!(
        "{name}'s load was not spread over its run: its busiest interval held {top} of its {total} requests ({:.0}%, {source}), and {busy} of its {} intervals had any",
        top as f64 * 100.0 / total as f64,
        counts.len()
    ))
}

/// A run compared on its own intervals (one recording a side) with fewer than
/// [`super::compare_noise::MIN_INTERVALS`] of them: the noise of its figures is
/// unknown, and why (trial 19: "noise unknown" on every metric, not explained).
pub(super) fn few_intervals(name: &str, rec: &Recording) -> Option<String> {
    let n = rec.intervals.len();
    (n < super::compare_noise::MIN_INTERVALS).then(|| format!(
        "{name} has {n} interval(s), fewer than the {} its noise is estimated from: every change against it is 'noise unknown' (a longer run, or a shorter --interval, records more)",
        super::compare_noise::MIN_INTERVALS
    ))
}

/// The first run whose `f` differs from the first run's, with both values.
fn first_difference<T: PartialEq + Clone>(
    runs: &[(&str, &Recording, &Report)],
    f: impl Fn(&Recording, &Report) -> T,
) -> Option<((String, T), (String, T))> {
    let (n0, r0, w0) = runs.first()?;
    let v0 = f(r0, w0);
    runs.iter().find_map(|(n, r, w)| {
        let v = f(r, w);
        (v != v0).then(|| ((n0.to_string(), v0.clone()), (n.to_string(), v)))
    })
}

/// Different master pids: another master (a restart, or another nginx).
fn masters(runs: &[(&str, &Recording, &Report)]) -> Option<String> {
    let ((n0, p0), (n, p)) = first_difference(runs, |_, w| w.master_pid)?;
    Some(format!(
        "different nginx masters: pid {p0} in {n0}, pid {p} in {n} (a restart or another nginx: its start, binary and configuration may differ)"
    ))
}

/// nginx's version as the run recorded it: the header's, `--all`'s master's, or the
/// configuration reader's (`nginx/` left out); None when the recording holds none.
fn version_of(rec: &Recording, r: &Report) -> Option<String> {
    let v = rec
        .header
        .as_ref()
        .and_then(|h| h.nginx_version.clone())
        .or_else(|| r.master.as_ref().and_then(|m| m.nginx_version.clone()))
        .or_else(|| r.config.as_ref().and_then(|c| c.nginx_version.clone()))?;
    Some(v.strip_prefix("nginx/").map(String::from).unwrap_or(v))
}

/// Different nginx versions, or a version one recording lacks.
fn versions(runs: &[(&str, &Recording, &Report)]) -> Option<String> {
    let ((n0, v0), (n, v)) = first_difference(runs, version_of)?;
    Some(match (v0, v) {
        (Some(a), Some(b)) => format!("different nginx versions: {a} in {n0}, {b} in {n}"),
        (Some(a), None) | (None, Some(a)) => {
            let lacks = runs
                .iter()
                .find(|(_, r, w)| version_of(r, w).is_none())
                .map_or("", |(n, _, _)| *n);
            format!("nginx version unknown in {lacks} (the recording does not hold it): whether it is {a} on both sides is unknown")
        }
        (None, None) => return None,
    })
}

/// Effective configuration values by directive and scope, or why unknown.
fn config_values(r: &Report) -> Result<BTreeMap<(String, String), String>, String> {
    let c = r
        .config
        .as_ref()
        .ok_or("the recording holds no configuration")?;
    if let Some(why) = &c.unknown {
        return Err(format!("its configuration was not read: {why}"));
    }
    let mut values: BTreeMap<(String, String), String> = c
        .values
        .iter()
        .map(|v| ((v.directive.clone(), v.scope.clone()), v.value.clone()))
        .collect();
    // The logs and upstream servers are kept apart from `values` (trial 21: an
    // access_log given buffer=32k flush=5s between two recordings drew no caveat).
    for l in &c.access_logs {
        let cond = l
            .condition
            .as_ref()
            .map(|c| format!(" if={c}"))
            .unwrap_or_default();
        values.insert(
            ("access_log".into(), format!("{} {}", l.scope, l.path)),
            format!("{}{cond}", l.spec(" unbuffered")),
        );
    }
    for e in &c.error_logs {
        values.insert(("error_log".into(), e.scope.clone()), e.value.clone());
    }
    for u in &c.upstreams {
        for s in &u.servers {
            values.insert(
                (
                    format!("server {}", s.address),
                    format!("upstream {}", u.name),
                ),
                format!(
                    "max_fails={} fail_timeout={} {}",
                    s.max_fails, s.fail_timeout, s.other
                )
                .trim_end()
                .to_string(),
            );
        }
    }
    Ok(values)
}

/// Different effective configuration values (the first few quoted), or a
/// configuration one recording lacks.
fn configs(runs: &[(&str, &Recording, &Report)]) -> Option<String> {
    if let Some((n, _, w)) = runs.iter().find(|(_, _, w)| config_values(w).is_err()) {
        let why = config_values(w).err().unwrap_or_default();
        return Some(format!(
            "whether nginx's configuration differs is unknown: {n}: {why}"
        ));
    }
    let ((n0, c0), (n, c)) = first_difference(runs, |_, w| config_values(w).ok())?;
    let (c0, c) = (c0.unwrap_or_default(), c.unwrap_or_default());
    let mut keys: Vec<&(String, String)> = c0.keys().chain(c.keys()).collect();
    keys.sort();
    keys.dedup();
    let differ: Vec<String> = keys
        .into_iter()
        .filter(|k| c0.get(*k) != c.get(*k))
        .map(|k| {
            let v = |m: &BTreeMap<(String, String), String>| {
                m.get(k).cloned().unwrap_or_else(|| "absent".into())
            };
            format!("{} ({}): {} -> {}", k.0, k.1, v(&c0), v(&c))
        })
        .collect();
    let shown = differ[..differ.len().min(VALUES_QUOTED)].join("; ");
    let more = differ.len().saturating_sub(VALUES_QUOTED);
    Some(format!(
        "different nginx configurations in {n0} and {n}: {} effective values differ: {shown}{}",
        differ.len(),
        if more > 0 {
            format!("; and {more} more")
        } else {
            String::new()
        }
    ))
}

/// Different numbers of workers alive at the end of the period.
fn workers(runs: &[(&str, &Recording, &Report)]) -> Option<String> {
    let alive = |_: &Recording, w: &Report| w.workers.iter().filter(|x| x.alive).count();
    let ((n0, a0), (n, a)) = first_difference(runs, alive)?;
    Some(format!(
        "different numbers of workers: {a0} alive at the end in {n0}, {a} in {n}"
    ))
}
