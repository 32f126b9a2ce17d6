//! `contrib/prometheus/alerts.yml` under `promtool test rules`, on series scraped from
//! real runs. The same nginx (2 workers, a `reuseport` socket each, soft `nofile` 64
//! from its parent) under the same load (200 held connections) twice: as it is, its
//! workers run out of fds (EMFILE on accept4) and the fd-exhaustion alerts must fire
//! with their labels and annotations; with `worker_rlimit_nofile 4096` no alert of the
//! file may fire. The probe runs as the exporter does (`--listen`, hence `--detail
//! sampled`), scraped once a second; every scraped series goes into the test file.

use std::{
    collections::BTreeMap,
    process::Command,
    time::{Duration, Instant},
};

use nginx_probe_tests::{free_port, metric_sum, scrape_text, Nginx, NginxConfig, Probe};
use serde_json::{json, Value};

use super::contrib;

/// Scrapes per run, one a second (so the test file's `interval` is 1s).
const SCRAPES: usize = 10;
/// Connections held open during a run: more than two workers with 64 fds each take.
const HELD: usize = 200;
/// The rate window of the rules (`[5m]`), seconds.
const RATE_WINDOW_S: usize = 300;

/// One run: the `instance` Prometheus would give the probe, and its scrapes, 1 s apart.
struct Run {
    instance: String,
    scrapes: Vec<String>,
}

impl Run {
    fn last(&self) -> &str {
        self.scrapes.last().expect("scraped")
    }
}

/// nginx started with `cfg` under [`HELD`] held connections and the probe in exporter
/// mode (`--listen`, with `--duration`), scraped [`SCRAPES`] times, at 0 s, 1 s, ...
/// from the load's start.
fn scraped_run(cfg: &NginxConfig) -> Run {
    let ng = Nginx::start(cfg);
    let port = free_port();
    let mut probe = Probe::on(&ng)
        .json()
        .summary_only()
        .listen(port)
        .duration(format!("{}s", SCRAPES + 3))
        .start();
    let held = ng.hold_connections(HELD);
    let start = Instant::now();
    let scrapes = (0..SCRAPES)
        .map(|k| {
            let at = start + Duration::from_secs(k as u64);
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            scrape_text(port)
        })
        .collect();
    drop(held);
    let out = probe.wait();
    assert!(out.status.success(), "{out:?}");
    Run {
        instance: format!("127.0.0.1:{port}"),
        scrapes,
    }
}

/// The samples of `name` in a scrape: the label text between the braces, the value.
fn samples<'a>(text: &'a str, name: &str) -> Vec<(&'a str, f64)> {
    text.lines()
        .filter(|l| l.split(['{', ' ']).next() == Some(name))
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').expect("sample line");
            let labels = series.split_once('{').map_or("", |(_, rest)| rest);
            let labels = labels.strip_suffix('}').unwrap_or(labels);
            (labels, value.parse().expect("sample value"))
        })
        .collect()
}

/// Sum of the samples of `name` whose labels contain `label` (`errno="EMFILE"`).
fn sum_where(text: &str, name: &str, label: &str) -> f64 {
    samples(text, name)
        .iter()
        .filter(|(labels, _)| labels.contains(label))
        .fold(0.0, |sum, (_, v)| sum + v)
}

/// The value of label `key` in a sample's label text.
fn label<'a>(labels: &'a str, key: &str) -> &'a str {
    let rest = &labels[labels.find(&format!("{key}=\"")).expect(key) + key.len() + 2..];
    &rest[..rest.find('"').expect("closing quote")]
}

/// A scraped series with the target labels Prometheus' scrape adds (`instance`,
/// `job`); every scraped label is kept as it was.
fn with_target_labels(series: &str, instance: &str) -> String {
    let target = format!("instance=\"{instance}\",job=\"nginx-probe\"");
    match series.split_once('{') {
        Some((name, labels)) => format!("{name}{{{target},{labels}"),
        None => format!("{series}{{{target}}}"),
    }
}

/// Every series of a run and its value in each scrape (None where a scrape lacks it).
fn series(run: &Run) -> BTreeMap<String, Vec<Option<String>>> {
    let mut out: BTreeMap<String, Vec<Option<String>>> = BTreeMap::new();
    for (k, text) in run.scrapes.iter().enumerate() {
        for line in text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
        {
            let (series, value) = line.rsplit_once(' ').expect("sample line");
            let values = out
                .entry(with_target_labels(series, &run.instance))
                .or_insert_with(|| vec![None; SCRAPES]);
            values[k] = Some(value.to_string());
        }
    }
    out
}

/// A series' `values` for promtool: as scraped (`_` before a series appears, `stale`
/// where it went away, as Prometheus marks it); then, for a series of the last scrape,
/// its last scraped value held for `hold` more 1 s steps. Held, not invented: the run
/// lasts seconds and the rules' `for:` minutes, so the last state of the run stands for
/// the minutes after it (counters stop growing, gauges stay).
fn values_text(values: &[Option<String>], hold: usize) -> String {
    let mut out = Vec::new();
    let mut present = false;
    for v in values {
        out.push(match v {
            Some(v) => v.clone(),
            None if present => "stale".to_string(),
            None => "_".to_string(),
        });
        present = v.is_some();
    }
    if let (Some(Some(last)), true) = (values.last(), hold > 0) {
        out.push(format!("{last}x{}", hold - 1));
    }
    out.join(" ")
}

/// An alerting rule of alerts.yml: its name, `for:` (s), labels and annotation templates.
#[derive(Default)]
struct Rule {
    name: String,
    for_s: usize,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
}

/// The alerting rules of contrib/prometheus/alerts.yml, read in the file's own shape
/// (`- alert:`, then `for:`, `labels:` and `annotations:` with one-line values).
fn rules() -> Vec<Rule> {
    let text = std::fs::read_to_string(contrib("prometheus/alerts.yml")).expect("rules");
    let (mut out, mut block, mut indent) = (Vec::<Rule>::new(), "", 0);
    for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
        let t = line.trim_start();
        let at = line.len() - t.len();
        if let Some(name) = t.strip_prefix("- alert: ") {
            out.push(Rule {
                name: name.to_string(),
                ..Rule::default()
            });
            indent = at + 2;
            continue;
        }
        let Some(rule) = out.last_mut() else {
            continue;
        };
        let (key, value) = t.split_once(':').unwrap_or((t, ""));
        let value = value.trim().trim_matches('"');
        if at == indent {
            block = key;
            if key == "for" {
                rule.for_s = seconds(value);
            }
        } else if at == indent + 2 && matches!(block, "labels" | "annotations") {
            assert!(
                !value.contains('\\'),
                "escapes this test does not read: {t}"
            );
            let map = match block {
                "labels" => &mut rule.labels,
                _ => &mut rule.annotations,
            };
            map.insert(key.to_string(), value.to_string());
        }
    }
    out
}

/// `30s`, `5m`, `1h` in seconds.
fn seconds(d: &str) -> usize {
    let (n, unit) = d.split_at(d.len() - 1);
    let n: usize = n.parse().unwrap_or_else(|_| panic!("duration {d}"));
    n * match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => panic!("duration {d}"),
    }
}

/// Go's `%.4g` for a value from 1e-4 to below 1e4 (what Prometheus' `humanize` and
/// `humanizePercentage` print with): 4 significant digits, trailing zeros dropped.
fn go_g4(v: f64) -> String {
    if v == 0.0 {
        return "0".to_string();
    }
    let sci = format!("{:.3e}", v.abs());
    let (mantissa, exp) = sci.split_once('e').expect("exponent");
    let exp: i32 = exp.parse().expect("exponent");
    assert!((-4..4).contains(&exp), "{v} is printed with an exponent");
    let digits = mantissa.replace('.', "");
    let fixed = if exp >= 0 {
        let (int, frac) = digits.split_at(exp as usize + 1);
        format!("{int}.{frac}")
    } else {
        format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
    };
    let fixed = fixed.trim_end_matches('0').trim_end_matches('.');
    format!("{}{fixed}", if v < 0.0 { "-" } else { "" })
}

/// Prometheus' template function `humanize`: SI prefixes, 4 significant digits.
fn humanize(mut v: f64) -> String {
    let mut prefix = "";
    if v != 0.0 && v.abs() >= 1.0 {
        for p in ["k", "M", "G", "T", "P", "E", "Z", "Y"] {
            if v.abs() < 1000.0 {
                break;
            }
            (prefix, v) = (p, v / 1000.0);
        }
    } else if v != 0.0 {
        for p in ["m", "u", "n", "p", "f", "a", "z", "y"] {
            if v.abs() >= 1.0 {
                break;
            }
            (prefix, v) = (p, v * 1000.0);
        }
    }
    format!("{}{prefix}", go_g4(v))
}

/// An annotation template rendered as Prometheus renders this file's: `$labels.<name>`,
/// `$value | humanize`, `$value | humanizePercentage`.
fn render(template: &str, labels: &BTreeMap<String, String>, value: f64) -> String {
    let mut out = template
        .replace("{{ $value | humanize }}", &humanize(value))
        .replace(
            "{{ $value | humanizePercentage }}",
            &format!("{}%", go_g4(value * 100.0)),
        );
    for (k, v) in labels {
        out = out.replace(&format!("{{{{ $labels.{k} }}}}"), v);
    }
    assert!(
        !out.contains("{{"),
        "a template this test does not render: {out}"
    );
    out
}

/// A firing alert of `rule` as promtool compares it: the expression's labels `by` and
/// the rule's, the annotations rendered with them and the expression's `value`.
fn expected(rule: &Rule, by: &[(&str, &str)], value: f64) -> Value {
    let mut labels = rule.labels.clone();
    labels.extend(by.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let annotations: BTreeMap<&String, String> = rule
        .annotations
        .iter()
        .map(|(k, t)| (k, render(t, &labels, value)))
        .collect();
    json!({ "exp_labels": labels, "exp_annotations": annotations })
}

/// An `alert_rule_test` entry: exactly `alerts` of rule `name` fire at `at_s`.
fn alert_test(at_s: usize, name: &str, alerts: Vec<Value>) -> Value {
    json!({ "eval_time": format!("{at_s}s"), "alertname": name, "exp_alerts": alerts })
}

fn rule<'a>(rules: &'a [Rule], name: &str) -> &'a Rule {
    rules
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no rule {name} in alerts.yml"))
}

/// Runs `promtool test rules` on a test file (JSON, which YAML reads) of the run's
/// series up to `until_s`, alerts.yml, and `tests`; fails with promtool's output.
fn promtool_test_rules(name: &str, run: &Run, until_s: usize, tests: Vec<Value>) {
    let input: Vec<Value> = series(run)
        .iter()
        .map(|(s, v)| json!({ "series": s, "values": values_text(v, until_s + 1 - SCRAPES) }))
        .collect();
    let file = json!({
        "rule_files": [contrib("prometheus/alerts.yml")],
        "evaluation_interval": "1s",
        "tests": [{ "name": name, "interval": "1s", "input_series": input, "alert_rule_test": tests }],
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join(format!("{name}.test.yml"));
    std::fs::write(&path, serde_json::to_vec_pretty(&file).expect("JSON")).expect("write");
    let out = Command::new("promtool")
        .args(["test", "rules"])
        .arg(&path)
        .output()
        .expect("run promtool (run `cargo xtask setup`)");
    let said = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "promtool test rules ({name}):\n{said}"
    );
}

/// The EMFILE run: its counters, then the fd-exhaustion alerts under promtool.
fn emfile_run_fires(run: &Run, rules: &[Rule]) {
    let last = run.last();
    let emfile = samples(last, "nginx_probe_accept_errors_total");
    let emfile: Vec<&(&str, f64)> = emfile
        .iter()
        .filter(|(l, v)| l.contains("errno=\"EMFILE\"") && *v > 0.0)
        .collect();
    eprintln!("EMFILE on accept4 (detail windows): {emfile:?}");
    assert!(!emfile.is_empty(), "no EMFILE on accept4: {last}");
    // nginx's error log counts every failed accept4 (all the time, not in windows).
    let series = series(run);
    let key = |class: &str| {
        with_target_labels(
            &format!("nginx_probe_nginx_errors_total{{class=\"{class}\"}}"),
            &run.instance,
        )
    };
    assert!(!series.contains_key(&key("enfile")), "{last}");
    let log = &series[&key("emfile")];
    eprintln!("nginx_errors_total{{class=\"emfile\"}} per scrape: {log:?}");
    let first = log.iter().position(Option::is_some).expect("scraped");
    let value = |v: &Option<String>| v.as_deref().expect("present").parse::<f64>().unwrap();
    let (v0, v1) = (value(&log[first]), value(&log[SCRAPES - 1]));
    assert!(
        v1 > v0,
        "nginx's EMFILE lines did not grow while scraped: {log:?}"
    );
    // 5 minutes after the series' first sample the rate window holds its samples end to
    // end, 1 s apart: Prometheus' rate is then their increase over 300 s, not
    // extrapolated, computed as it computes it.
    let at_rate = first + RATE_WINDOW_S;
    let rate = (v1 - v0) * (1.0 / RATE_WINDOW_S as f64);
    // Past every `for:` of the fd alerts (5m at most) counted from the first scrapes.
    let at_for = 360;
    let inst = ("instance", run.instance.as_str());
    let verdict = expected(
        rule(rules, "NginxProbeVerdictCritical"),
        &[inst, ("id", "fd_exhaustion")],
        1.0,
    );
    // Each of the two workers takes about half of the 200 connections (reuseport) and
    // holds its whole limit: every live worker fires, at its own open fds / limit.
    let workers = samples(last, "nginx_probe_worker_info");
    let live: Vec<&str> = workers
        .iter()
        .filter(|(l, _)| l.contains("alive=\"true\""))
        .map(|(l, _)| *l)
        .collect();
    assert_eq!(live.len(), 2, "{last}");
    let headroom = live
        .iter()
        .map(|l| {
            let (w, g) = (label(l, "worker"), label(l, "generation"));
            let of = |name| sum_where(last, name, &format!("worker=\"{w}\",generation=\"{g}\""));
            let ratio = of("nginx_probe_open_fds") / of("nginx_probe_fd_limit");
            eprintln!("worker {w} generation {g}: open fds / limit {ratio}");
            let by = [inst, ("worker", w), ("generation", g)];
            expected(rule(rules, "NginxWorkerFdHeadroomLow"), &by, ratio)
        })
        .collect();
    let accept_emfile = expected(rule(rules, "NginxAcceptEMFILE"), &[inst], rate);
    eprintln!("NginxAcceptEMFILE at {at_rate}s: {accept_emfile}");
    let tests = vec![
        alert_test(at_rate, "NginxAcceptEMFILE", vec![accept_emfile]),
        alert_test(at_rate, "NginxProbeVerdictCritical", vec![verdict.clone()]),
        alert_test(at_for, "NginxWorkerFdHeadroomLow", headroom),
        alert_test(at_for, "NginxProbeVerdictCritical", vec![verdict]),
    ];
    promtool_test_rules("emfile", run, at_for, tests);
}

/// The tuned run: no EMFILE, every connection accepted, and no alert of the file
/// firing 30 s after its `for:` (when one true from the first scrapes would fire).
fn tuned_run_is_silent(run: &Run, rules: &[Rule]) {
    let last = run.last();
    let emfile = sum_where(last, "nginx_probe_accept_errors_total", "errno=\"EMFILE\"");
    let logged = sum_where(last, "nginx_probe_nginx_errors_total", "class=\"emfile\"");
    eprintln!("tuned: EMFILE on accept4 {emfile}, in nginx's error log {logged}");
    assert_eq!((emfile, logged), (0.0, 0.0), "{last}");
    assert_eq!(
        metric_sum(last, "nginx_probe_accepts_total"),
        HELD as f64,
        "{last}"
    );
    let tests = rules
        .iter()
        .map(|r| alert_test(r.for_s + 30, &r.name, vec![]))
        .collect();
    let until = rules.iter().map(|r| r.for_s + 30).max().expect("rules");
    promtool_test_rules("tuned", run, until, tests);
}

#[test]
fn the_alert_rules_fire_on_an_emfile_run_and_stay_silent_on_a_tuned_one() {
    let rules = rules();
    assert_eq!(rules.len(), 8);
    let emfile = NginxConfig {
        nofile: Some((64, 4096)),
        listen_extra: "reuseport".into(),
        ..NginxConfig::default()
    };
    let tuned = NginxConfig {
        main_extra: "worker_rlimit_nofile 4096;".into(),
        ..emfile.clone()
    };
    emfile_run_fires(&scraped_run(&emfile), &rules);
    tuned_run_is_silent(&scraped_run(&tuned), &rules);
}
