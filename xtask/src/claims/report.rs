//! The lab's report: the machine it ran on, the markdown table (stdout and
//! `claims.md`, with `nginx-probe compare`'s sentences, the runs' spread and the rules)
//! and `claims.json`.

use super::*;

/// Machine and run facts for the report header.
pub(super) struct Machine {
    nproc: String,
    cpu: String,
    kernel: String,
    date: String,
    nginx: String,
    /// `/proc/loadavg`'s 1, 5 and 15 minute figures when the lab started.
    loadavg: String,
}

/// The machine's facts now: CPUs, CPU model, kernel, date, nginx, load average.
pub(super) fn machine() -> Machine {
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

/// `s` with its `|` escaped for a markdown table cell.
fn md_cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The table: per claim its source, config changes, req/s, what nginx-probe saw and the
/// decision.
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

/// The command line that reproduces the lab's run.
fn command_line(opts: &Options, repeat: usize) -> String {
    format!(
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
    )
}

/// Prints the table and writes `claims.md` and `claims.json` under `opts.out`.
pub(super) fn write_report(
    opts: &Options,
    lab: &Lab,
    m: &Machine,
    results: &[ClaimResult],
) -> Result<()> {
    let command = command_line(opts, lab.repeat);
    let table = markdown_table(results);
    println!("{table}");
    let mut md = header(&command, lab, m);
    md.push_str(&table);
    md.push_str(&sections(results));
    let doc = report_json(&command, lab, m, results);
    std::fs::write(opts.out.join("claims.md"), md)?;
    std::fs::write(
        opts.out.join("claims.json"),
        serde_json::to_string_pretty(&doc)? + "\n",
    )?;
    eprintln!(
        "claims: wrote {} and {} (runs in {})",
        opts.out.join("claims.md").display(),
        opts.out.join("claims.json").display(),
        lab.runs.display()
    );
    Ok(())
}

/// `claims.md`'s title and the paragraph on the machine and the method.
fn header(command: &str, lab: &Lab, m: &Machine) -> String {
    format!(
        "# nginx-probe claims lab\n\n`{command}`: {} cores ({}), kernel {}, nginx {}, {}, load average {} at the start; {} s of load per config, {} run(s) per config interleaved, each claim judged on the configs' medians and decided only when {:.0}% of bootstrap resamples of the runs agree; 2 nginx workers unless the claim says otherwise, a 30-byte file, access log on and unbuffered unless the claim changes it. {}\n\n",
        m.nproc, m.cpu, m.kernel, m.nginx, m.date, m.loadavg, lab.secs, lab.repeat, DECISION_AGREEMENT * 100.0,
        lab.pinning.map(|p| p.describe()).unwrap_or_else(|| "Not pinned: the load generator and the workers share the CPUs.".into())
    )
}

/// The sections after the table: `nginx-probe compare`'s sentences, the spread of the
/// runs, the rules' decisions.
fn sections(results: &[ClaimResult]) -> String {
    let mut md = String::from("\n## What `nginx-probe compare` says\n\n");
    for r in results {
        for (label, sentence) in &r.sentences {
            md.push_str(&format!(
                "- **{}**, {} -> {label}: {sentence}\n",
                r.claim.id, r.claim.variants[0].label
            ));
        }
    }
    md.push_str("\n## Spread of the runs (median [95% interval])\n\n");
    for r in results {
        for (v, runs) in r.claim.variants.iter().zip(&r.runs) {
            md.push_str(&spread_line(r.claim, v, runs));
        }
    }
    md.push_str("\n## Rules\n\n");
    for r in results {
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
    md
}

/// One config's runs: req/s, accepts per request, worker CPU per request and accept
/// skew, each as median [95% interval].
fn spread_line(claim: &Claim, v: &Variant, runs: &[Metrics]) -> String {
    let key = |name: &str, get: &dyn Fn(&Metrics) -> f64| {
        let xs: Vec<f64> = runs.iter().map(get).collect();
        let (lo, hi) = ci95(&xs);
        format!("{name} {:.3} [{:.3}, {:.3}]", median_or_zero(&xs), lo, hi)
    };
    format!(
        "- **{}** {}: {} runs; {}; {}; {}; {}\n",
        claim.id,
        v.label,
        runs.len(),
        key("req/s", &|m| m.rps),
        key("accepts/request", &|m| m.accepts_per_request),
        key("worker CPU us/request", &|m| m.cpu_us_per_request),
        key("accept skew", &|m| m.accept_skew),
    )
}

/// `claims.json`: the command, the machine, and per claim its decision, sentences and
/// configs with their medians, recordings and spread.
fn report_json(command: &str, lab: &Lab, m: &Machine, results: &[ClaimResult]) -> Value {
    json!({
        "command": command,
        "machine": {"nproc": m.nproc, "cpu": m.cpu, "kernel": m.kernel, "nginx": m.nginx, "date": m.date, "loadavg": m.loadavg},
        "load_secs": lab.secs,
        "repeat": lab.repeat,
        "pinning": lab.pinning.map(|p| p.describe()),
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
    })
}
