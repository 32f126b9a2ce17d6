//! `cargo xtask claims`: the claims lab. Each tuning claim from `../shared/seeds` becomes
//! two to four nginx configs (a throwaway nginx each: temp prefix, 127.0.0.1, free port,
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
    load::Pinning,
    load::{ctxt_switches, hey_new_connections, pin_plan, wrk, ClientRun},
};

mod configs;
mod metrics;
mod report;
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
use report::*;
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
    let lab = Lab {
        probe,
        secs: if opts.quick { 2 } else { 8 },
        repeat: opts.repeat.max(1),
        runs: &runs,
        pinning: pinning.as_ref(),
        interrupted: &interrupted,
    };
    let results = selected
        .iter()
        .map(|claim| lab.claim(claim))
        .collect::<Result<Vec<_>>>()?;
    write_report(opts, &lab, &m, &results)
}

/// What every claim's runs share.
struct Lab<'a> {
    /// The nginx-probe binary.
    probe: &'a Path,
    /// Seconds of load per run.
    secs: u64,
    /// Runs per config.
    repeat: usize,
    /// Where the recordings go.
    runs: &'a Path,
    /// The CPUs of the load generator and of the workers, when pinned.
    pinning: Option<&'a Pinning>,
    /// Set by Ctrl-C.
    interrupted: &'a AtomicBool,
}

impl Lab<'_> {
    /// One claim: its configs' runs, their medians, the rule's decision and
    /// `nginx-probe compare`'s sentences.
    fn claim<'c>(&self, claim: &'c Claim) -> Result<ClaimResult<'c>> {
        let runs_of = self.rounds(claim)?;
        let judgement = judge_repeated(claim.judge, &runs_of);
        let metrics: Vec<Metrics> = runs_of.iter().map(|r| median_metrics(r)).collect();
        let sentences = self.sentences(claim)?;
        eprintln!(
            "claims: {} {}: {}",
            claim.id, judgement.outcome, judgement.reason
        );
        Ok(ClaimResult {
            claim,
            runs: runs_of,
            metrics,
            judgement,
            sentences,
        })
    }

    /// Each config's runs, interleaved: A B A B ..., so a drift of the machine hits
    /// every config alike.
    fn rounds(&self, claim: &Claim) -> Result<Vec<Vec<Metrics>>> {
        let (secs, repeat) = (self.secs, self.repeat);
        let mut runs_of: Vec<Vec<Metrics>> = vec![Vec::new(); claim.variants.len()];
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
                if let Some(p) = self.pinning {
                    v.cfg.main_extra.push_str(&p.nginx_directive);
                }
                let m = record(self.probe, claim, &v, round, secs, self.runs)
                    .with_context(|| format!("claim {} config {}", claim.id, v.label))?;
                if self.interrupted.load(Ordering::SeqCst) {
                    bail!("interrupted: throwaway nginx stopped, nothing written");
                }
                eprintln!(
                    "claims:   {:.0} req/s, {} requests, verdicts {:?}",
                    m.rps, m.requests, m.verdicts
                );
                runs_of[i].push(m);
            }
        }
        Ok(runs_of)
    }

    /// `nginx-probe compare` of the first config's first run with each later config's:
    /// (label of the later config, the ticket sentence).
    fn sentences(&self, claim: &Claim) -> Result<Vec<(String, String)>> {
        let rec = |v: &Variant| self.runs.join(run_file_name(claim, v, 0));
        let mut sentences = Vec::new();
        for v in claim.variants.iter().skip(1) {
            let c = compare(self.probe, &rec(&claim.variants[0]), &rec(v))?;
            let sentence = c["sentence"].as_str().unwrap_or_default().to_string();
            eprintln!(
                "claims:   compare {} -> {}: {sentence}",
                claim.variants[0].label, v.label
            );
            sentences.push((v.label.to_string(), sentence));
        }
        Ok(sentences)
    }
}
