//! contrib/: the Prometheus alert rules pass `promtool check rules`, a real scrape
//! passes `promtool check metrics`, and every metric the dashboard and the rules name
//! is in a real scrape. Also gzip on /metrics. The rules under `promtool test rules` on
//! the series of real runs are in `alert_rules`. Run as root through `cargo xtask test`.

use std::{
    collections::BTreeSet,
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

mod alert_rules;

use nginx_probe_tests::{
    free_port, metric_sum, metric_value, one_request_per_connection, scrape, scrape_text, Nginx,
    NginxConfig, Probe,
};

fn contrib(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../contrib")
        .join(path)
}

/// Runs `cmd` with `input` on stdin; (success, stdout + stderr).
fn run_with_input(cmd: &mut Command, input: &[u8]) -> (bool, String) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (run `cargo xtask setup`)"));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// `nginx_probe_*` names in a PromQL expression.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = expr;
    while let Some(i) = rest.find("nginx_probe_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    out
}

/// Every `expr` in the dashboard (panel targets and variable queries).
fn dashboard_exprs() -> Vec<String> {
    let text = std::fs::read_to_string(contrib("grafana/nginx-probe.json")).expect("dashboard");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("dashboard is JSON");
    let mut out = Vec::new();
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    match (k.as_str(), x) {
                        ("expr" | "definition", serde_json::Value::String(s)) => {
                            out.push(s.clone())
                        }
                        _ => walk(x, out),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    walk(&doc, &mut out);
    out
}

/// Every `expr:` of the alert rules (single-line or `|` blocks).
fn rule_exprs() -> Vec<String> {
    let text = std::fs::read_to_string(contrib("prometheus/alerts.yml")).expect("rules");
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        let Some(rest) = t.strip_prefix("expr:") else {
            continue;
        };
        if rest.trim() == "|" {
            let indent = line.len() - t.len();
            let mut block = String::new();
            while let Some(next) = lines.peek() {
                let nt = next.trim_start();
                if !nt.is_empty() && next.len() - nt.len() <= indent {
                    break;
                }
                block += next;
                block.push('\n');
                lines.next();
            }
            out.push(block);
        } else {
            out.push(rest.trim().to_string());
        }
    }
    out
}

#[test]
fn alert_rules_pass_promtool() {
    let out = Command::new("promtool")
        .args(["check", "rules"])
        .arg(contrib("prometheus/alerts.yml"))
        .output()
        .expect("run promtool (run `cargo xtask setup`)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(text.contains("SUCCESS: 8 rules found"), "{text}");
    assert_eq!(rule_exprs().len(), 8);
}

/// Restores `kernel.bpf_stats_enabled` when dropped.
struct BpfStats(String);

impl BpfStats {
    fn enable() -> BpfStats {
        let path = "/proc/sys/kernel/bpf_stats_enabled";
        let before = std::fs::read_to_string(path).expect("read bpf_stats_enabled");
        std::fs::write(path, "1").expect("enable BPF stats");
        BpfStats(before.trim().to_string())
    }
}

impl Drop for BpfStats {
    fn drop(&mut self) {
        let _ = std::fs::write("/proc/sys/kernel/bpf_stats_enabled", &self.0);
    }
}

#[test]
fn a_real_scrape_passes_promtool_and_has_every_metric_the_dashboard_and_rules_name() {
    // BPF run-time statistics on for this test only, so that the probe's cost series
    // the dashboard charts are in the scrape.
    let _stats = BpfStats::enable();
    let ng = Nginx::start(&NginxConfig::default());
    let port = free_port();
    let probe = Probe::on(&ng).json().summary_only().listen(port).start();
    assert_eq!(one_request_per_connection(ng.addr(), 40), 40);
    // Let the 500 ms sampler see fds and the listen socket.
    std::thread::sleep(Duration::from_millis(1200));
    let text = scrape_text(port);
    assert_eq!(
        metric_sum(&text, "nginx_probe_accepts_total"),
        40.0,
        "{text}"
    );

    let (ok, said) = run_with_input(
        Command::new("promtool").args(["check", "metrics"]),
        text.as_bytes(),
    );
    assert!(ok, "promtool check metrics: {said}");

    // The probe's own cost: real numbers.
    assert!(
        metric_value(&text, "nginx_probe_self_cpu_seconds_total").is_some(),
        "{text}"
    );
    assert!(metric_value(&text, "nginx_probe_self_resident_memory_bytes").unwrap() > 1e6);
    assert_eq!(
        metric_value(&text, "nginx_probe_bpf_stats_enabled"),
        Some(1.0)
    );
    // Every accept4 exit ran the exit program at least once.
    let runs: f64 = text
        .lines()
        .filter(|l| {
            l.starts_with("nginx_probe_bpf_program_runs_total{program=\"sys_exit_accept4\"}")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(runs >= 40.0, "{text}");

    // Sample names, and families declared by `# TYPE` (a healthy nginx has no active
    // verdict, so `nginx_probe_verdict` has no sample, but the family is there).
    let mut scraped: BTreeSet<String> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split([' ', '{']).next())
        .map(str::to_string)
        .collect();
    scraped.extend(
        text.lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split(' ').next())
            .map(str::to_string),
    );
    let dashboard = dashboard_exprs();
    let rules = rule_exprs();
    assert!(dashboard.len() >= 15, "{dashboard:?}");
    let mut named = BTreeSet::new();
    for expr in dashboard.iter().chain(&rules) {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "no nginx-probe metric in {expr}");
        named.extend(names);
    }
    let missing: Vec<&String> = named.difference(&scraped).collect();
    assert!(missing.is_empty(), "named but not scraped: {missing:?}");

    // gzip when asked, plain otherwise; the same exposition either way.
    let (head, body) = scrape(port, true);
    assert!(head.contains("content-encoding: gzip"), "{head}");
    let (ok, unzipped) = run_with_input(Command::new("gzip").arg("-dc"), &body);
    assert!(ok, "{unzipped}");
    assert!(unzipped.contains("# TYPE nginx_probe_accepts_total counter"));
    assert!(
        body.len() * 3 < unzipped.len(),
        "gzip saved little: {} of {}",
        body.len(),
        unzipped.len()
    );
    let (head, _) = scrape(port, false);
    assert!(!head.contains("content-encoding"), "{head}");
    drop(probe);
}
