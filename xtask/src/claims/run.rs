//! Running one config: record it with nginx-probe, read the summary back, compare runs.

use super::*;
use crate::command::capture;

/// nginx-probe options that record a run into `file`: full detail (a recording
/// defaults to sampled windows, and a claim is judged on exact figures: EMFILE on
/// accept4, writes per request), 1 s intervals (the noise estimate of `compare`), only
/// the summary on stdout.
pub(super) fn recording_args(file: &Path) -> Vec<String> {
    vec![
        "--record".into(),
        file.display().to_string(),
        "--detail".into(),
        "full".into(),
        "--interval".into(),
        "1".into(),
        "--summary-only".into(),
    ]
}

/// `nginx-probe compare before after --json`: the comparison document.
pub(super) fn compare(probe: &Path, before: &Path, after: &Path) -> Result<Value> {
    let out = capture(
        Command::new(probe)
            .arg("compare")
            .args([before, after])
            .arg("--json"),
    )
    .context("run nginx-probe compare")?;
    if !out.status.success() {
        bail!("nginx-probe compare failed: {}", out.stderr.trim());
    }
    serde_json::from_str(&out.stdout).context("nginx-probe compare printed no JSON")
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

pub(super) fn workers_switches(pids: &[u32]) -> (u64, u64) {
    pids.iter()
        .filter_map(|&p| ctxt_switches(p))
        .fold((0, 0), |acc, (v, n)| (acc.0 + v, acc.1 + n))
}

/// Starts the variant's nginx, records it with nginx-probe under the claim's load for
/// `secs`, and returns its metrics.
pub(super) fn record(
    probe: &Path,
    claim: &Claim,
    v: &Variant,
    round: usize,
    secs: u64,
    runs: &Path,
) -> Result<Metrics> {
    // A config that proxies names its backend's port with BACKEND_PORT: a second
    // throwaway nginx serving the same file, not traced, started first.
    let backend = uses_backend(&v.cfg).then(|| Nginx::start(&backend_config()));
    let cfg = match &backend {
        Some(b) => with_backend_port(&v.cfg, b.port),
        None => v.cfg.clone(),
    };
    let ng = Nginx::start(&cfg);
    let file = runs.join(run_file_name(claim, v, round));
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
    .map(|mut m| {
        m.load_connections = claim.load.connections();
        m.online_cpus = thread::available_parallelism().map_or(0, |n| n.get() as u64);
        m
    })
    .with_context(|| format!("{}", file.display()))
}

/// Stands for the backend's port in a config's `http_extra` or `server_extra`; the lab
/// starts the backend ([`backend_config`]) and puts its port there.
pub const BACKEND_PORT: &str = "@BACKEND_PORT@";

/// True when the config proxies to the lab's backend ([`BACKEND_PORT`]).
pub(super) fn uses_backend(cfg: &NginxConfig) -> bool {
    cfg.http_extra.contains(BACKEND_PORT) || cfg.server_extra.contains(BACKEND_PORT)
}

/// The backend of the proxy claims: one worker serving the 30-byte file, no access log
/// (its cost is not the claim's).
pub(super) fn backend_config() -> NginxConfig {
    NginxConfig {
        workers: 1,
        access_log: Some("off".into()),
        ..NginxConfig::default()
    }
}

/// The config with [`BACKEND_PORT`] replaced by `port`.
pub(super) fn with_backend_port(cfg: &NginxConfig, port: u16) -> NginxConfig {
    let p = port.to_string();
    NginxConfig {
        http_extra: cfg.http_extra.replace(BACKEND_PORT, &p),
        server_extra: cfg.server_extra.replace(BACKEND_PORT, &p),
        ..cfg.clone()
    }
}

/// File name of a config's recorded run `round` (0-based) under the lab's `runs/`.
pub(super) fn run_file_name(claim: &Claim, v: &Variant, round: usize) -> String {
    format!("{}-{}-r{}.jsonl", claim.id, v.label, round + 1)
}
