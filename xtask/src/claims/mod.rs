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

use crate::{
    command::text_of,
    load::{ctxt_switches, hey_new_connections, pin_plan, wrk, ClientRun},
};

mod configs;
mod metrics;
mod rules;
mod rules_checked;
mod run;
mod stats;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_checked;

pub use configs::*;
pub use metrics::*;
pub use rules::*;
pub use rules_checked::*;
use run::*;
pub use stats::*;

/// A claim's runs and decision.
pub struct ClaimResult<'a> {
    /// The claim.
    pub claim: &'a Claim,
    /// Each variant's runs, in order (one per `--repeat` round).
    pub runs: Vec<Vec<Metrics>>,
    /// Each variant's median over its runs, in order.
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
    let cmd = |c: &str, args: &[&str]| text_of(Command::new(c).args(args)).unwrap_or_default();
    let cpu = crate::load::cpu_model();
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
    /// Runs per config, interleaved (A B A B ...).
    pub repeat: usize,
    /// Pin the load generator to the last CPU and the nginx workers to the others.
    pub pin: bool,
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
    let pinning = pin_plan(opts.pin);
    if let Some(p) = &pinning {
        eprintln!("claims: {}", p.describe());
        crate::load::pin_clients(&p.client_cpus);
    }
    let repeat = opts.repeat.max(1);
    let mut results = Vec::new();
    for claim in &selected {
        let mut runs_of: Vec<Vec<Metrics>> = vec![Vec::new(); claim.variants.len()];
        // Interleaved: A B A B ..., so a drift of the machine hits every config alike.
        for round in 0..repeat {
            for (i, v) in claim.variants.iter().enumerate() {
                eprintln!(
                    "claims: {} {} `{}` under {} for {secs} s (run {}/{repeat})",
                    claim.id,
                    v.label,
                    v.change,
                    claim.load.describe(),
                    round + 1
                );
                let mut v = v.clone();
                if let Some(p) = &pinning {
                    v.cfg.main_extra.push_str(&p.nginx_directive);
                }
                let m = record(probe, claim, &v, round, secs, &runs)
                    .with_context(|| format!("claim {} config {}", claim.id, v.label))?;
                if interrupted.load(Ordering::SeqCst) {
                    bail!("interrupted: throwaway nginx stopped, nothing written");
                }
                eprintln!(
                    "claims:   {:.0} req/s, {} requests, verdicts {:?}",
                    m.rps, m.requests, m.verdicts
                );
                runs_of[i].push(m);
            }
        }
        let judgement = judge_repeated(claim.judge, &runs_of);
        let metrics: Vec<Metrics> = runs_of.iter().map(|r| median_metrics(r)).collect();
        let rec = |v: &Variant| runs.join(run_file_name(claim, v, 0));
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
            runs: runs_of,
            metrics,
            judgement,
            sentences,
        });
    }
    let command = format!(
        "cargo xtask claims{}{}{}{}",
        if opts.quick { " --quick" } else { "" },
        if opts.repeat != 3 && !opts.quick {
            format!(" --repeat {repeat}")
        } else {
            String::new()
        },
        if opts.pin { "" } else { " --no-pin" },
        if opts.filter.is_empty() {
            String::new()
        } else {
            format!(" {}", opts.filter.join(" "))
        }
    );
    let table = markdown_table(&results);
    println!("{table}");
    let mut md = format!(
        "# nginx-probe claims lab\n\n`{command}`: {} cores ({}), kernel {}, nginx {}, {}, load average {} at the start; {secs} s of load per config, {repeat} run(s) per config interleaved, each claim judged on the configs' medians and decided only when {:.0}% of bootstrap resamples of the runs agree; 2 nginx workers unless the claim says otherwise, a 30-byte file, access log on and unbuffered unless the claim changes it. {}\n\n",
        m.nproc, m.cpu, m.kernel, m.nginx, m.date, m.loadavg, DECISION_AGREEMENT * 100.0,
        pinning.as_ref().map(|p| p.describe()).unwrap_or_else(|| "Not pinned: the load generator and the workers share the CPUs.".into())
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
    md.push_str("\n## Spread of the runs (median [95% interval])\n\n");
    for r in &results {
        for (v, runs) in r.claim.variants.iter().zip(&r.runs) {
            let key = |name: &str, get: &dyn Fn(&Metrics) -> f64| {
                let xs: Vec<f64> = runs.iter().map(get).collect();
                let (lo, hi) = ci95(&xs);
                format!("{name} {:.3} [{:.3}, {:.3}]", median_or_zero(&xs), lo, hi)
            };
            md.push_str(&format!(
                "- **{}** {}: {} runs; {}; {}; {}; {}\n",
                r.claim.id,
                v.label,
                runs.len(),
                key("req/s", &|m| m.rps),
                key("accepts/request", &|m| m.accepts_per_request),
                key("worker CPU us/request", &|m| m.cpu_us_per_request),
                key("accept skew", &|m| m.accept_skew),
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
        "repeat": repeat,
        "pinning": pinning.as_ref().map(|p| p.describe()),
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
            "configs": r.claim.variants.iter().zip(&r.metrics).zip(&r.runs).map(|((v, m), runs)| json!({
                "label": v.label,
                "change": v.change,
                "records": (0..runs.len()).map(|i| format!("runs/{}", run_file_name(r.claim, v, i))).collect::<Vec<_>>(),
                "metrics": m.json(),
                "spread": spread_json(runs),
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
