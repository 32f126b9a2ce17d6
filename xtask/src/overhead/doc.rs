//! The overhead benchmark's summaries: per mode medians and the paired ratio with its
//! interval, printed as a console table and written as a markdown page.

use std::{fmt::Write as _, process::Command};

use crate::command::text_of;

use super::{
    stats::{bootstrap_median_ci95, median_or_nan, paired_ratios},
    ModeDef, Tracer, Workload, WorkloadResult, CONNECTIONS, UPSTREAM_KEEPALIVE,
};

/// The machine the runs were made on.
pub struct Machine {
    /// `date -u` at the start.
    pub date: String,
    /// `uname -r`.
    pub kernel: String,
    /// First `model name` of `/proc/cpuinfo`.
    pub cpu: String,
    /// Online CPUs.
    pub nproc: usize,
    /// `nginx -v`, and the OpenSSL nginx was built with (`nginx -V`).
    pub nginx: String,
    /// `openssl version`.
    pub openssl: String,
    /// The measured tree: `git describe --always --dirty` of the workspace.
    pub commit: String,
}

/// What `c args` printed ([`text_of`]), or `unknown`.
fn output(c: &str, args: &[&str]) -> String {
    text_of(Command::new(c).args(args))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

impl Machine {
    /// Reads the machine's facts now.
    pub fn read() -> Machine {
        let cpu = crate::load::cpu_model();
        let nginx_bin = std::env::var("NGINX_BIN").unwrap_or_else(|_| "/usr/sbin/nginx".into());
        let v = output(&nginx_bin, &["-V"]);
        let version = v
            .lines()
            .find_map(|l| l.strip_prefix("nginx version: "))
            .unwrap_or("unknown");
        let version = version.strip_prefix("nginx/").unwrap_or(version);
        let nginx = match v.lines().find(|l| l.starts_with("built with OpenSSL")) {
            Some(ssl) => format!("{version} ({ssl})"),
            None => version.to_string(),
        };
        Machine {
            date: output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
            kernel: output("uname", &["-r"]),
            cpu,
            nproc: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            nginx,
            openssl: output("openssl", &["version"]),
            commit: output(
                "git",
                &[
                    "-C",
                    env!("CARGO_MANIFEST_DIR"),
                    "describe",
                    "--always",
                    "--dirty",
                ],
            ),
        }
    }
}

/// One mode's summary over the rounds of a workload.
pub struct Row {
    /// The mode.
    pub mode: ModeDef,
    /// Median of the workers' CPU per request, us.
    pub us_per_req: f64,
    /// Per-round ratios of the workers' CPU per request to the no-tracer run of the
    /// same round.
    pub ratios: Vec<f64>,
    /// Median of `ratios`.
    pub ratio: f64,
    /// 95% bootstrap interval of that median (None with one round).
    pub ci95: Option<(f64, f64)>,
    /// Median req/s (wrk).
    pub rps: f64,
    /// Median p99 latency, ms (wrk).
    pub p99_ms: f64,
    /// Median tracer CPU, % of one core.
    pub cpu_pct: Option<f64>,
    /// Median tracer RSS, MiB.
    pub rss_mib: Option<f64>,
    /// Median ms from spawn to attached.
    pub attach_ms: Option<f64>,
    /// Median ns per BPF program run.
    pub ns_per_run: Option<f64>,
    /// Median new upstream connections per request (proxy workload).
    pub upstream_conns_per_req: Option<f64>,
    /// Other processes' share of the workers' CPUs per run, % (see `Run::others_pct`).
    pub others_pct: Vec<f64>,
    /// Medians of the tracer's tracepoint and uprobe program runs per request, with
    /// their own ns per run (kernel's counts; None when not counted).
    pub tracepoint_hits: Option<(f64, Option<f64>)>,
    pub raw_tracepoint_hits: Option<(f64, Option<f64>)>,
    pub uprobe_hits: Option<(f64, Option<f64>)>,
    /// Median requests per client connection (1 with `Connection: close`).
    pub requests_per_connection: f64,
    /// What one hit costs the workers, us: the mode's median CPU per request above the
    /// baseline's, over its hits per request. Derived from two medians, so it carries
    /// the machine's noise; None without hits.
    pub us_per_hit: Option<f64>,
    /// Median access-log lines nginx-probe read per run, and their share of the lines
    /// nginx wrote (None unless the tracer is nginx-probe and the log was read).
    pub log_lines_read: Option<f64>,
    pub log_share_read: Option<f64>,
    /// Median of nginx-probe's whole process CPU per 10,000 access-log lines it read,
    /// ms: an upper bound of what reading the log costs it (all its user-space work is
    /// in it).
    pub cpu_ms_per_10k_lines: Option<f64>,
}

impl Row {
    /// The cells the console and the markdown tables both start with: mode, us
    /// CPU/request, ratio [95% CI], req/s, p99 ms, tracer CPU %.
    fn main_cells(&self) -> [String; 6] {
        [
            self.mode.name.to_string(),
            format!("{:.2}", self.us_per_req),
            ratio_cell(self),
            format!("{:.0}", self.rps),
            format!("{:.2}", self.p99_ms),
            opt(self.cpu_pct, 2),
        ]
    }

    /// All probe hits (tracepoint, raw tracepoint and uprobe runs) per request; None
    /// when not counted.
    pub fn hits_per_req(&self) -> Option<f64> {
        let kinds = [
            self.tracepoint_hits,
            self.raw_tracepoint_hits,
            self.uprobe_hits,
        ];
        kinds
            .iter()
            .any(Option::is_some)
            .then(|| kinds.iter().flatten().map(|x| x.0).sum())
    }
}

/// Median runs per request and ns per run of one kind of hits over `runs`.
fn hits_median(
    runs: &[super::Run],
    kind: fn(&super::Run) -> Option<super::Hits>,
) -> Option<(f64, Option<f64>)> {
    let h: Vec<super::Hits> = runs.iter().filter_map(kind).collect();
    if h.is_empty() {
        return None;
    }
    let ns: Vec<f64> = h.iter().filter_map(|x| x.ns_per_hit).collect();
    Some((
        median_or_nan(&h.iter().map(|x| x.per_req).collect::<Vec<_>>()),
        (!ns.is_empty()).then(|| median_or_nan(&ns)),
    ))
}

/// The hits table of one workload (console and markdown alike): per mode, probe hits
/// per request and per connection by kind, the programs' own ns per hit, the derived
/// cost of one hit to the workers, and with `cost` (the dispatch of one hit, measured
/// alone: [`super::hitcost`]) the counted cost: hits per connection times (dispatch +
/// program ns) per kind, in us per connection and as a share of no tracer's CPU per
/// connection. An upper bound for the workers: it counts the hits of every process
/// (the load generator's sockets pass the lifecycle tracepoints too).
pub fn hits_table(rows: &[Row], cost: Option<&super::hitcost::HitCost>) -> String {
    let mut s = String::from(
        "| mode | tracepoint hits/request (perf-event, raw) | uprobe hits/request | hits/connection | program ns/hit (tracepoint, raw, uprobe) | workers' us per hit (derived) | counted cost, us/connection (% of CPU) |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    let base_per_conn = rows
        .first()
        .map(|b| b.us_per_req * b.requests_per_connection);
    for row in rows.iter().skip(1) {
        let Some(all) = row.hits_per_req() else {
            continue;
        };
        let ns = |h: Option<(f64, Option<f64>)>| opt(h.and_then(|x| x.1), 0);
        let counted = cost.map(|c| {
            let per_conn = |h: Option<(f64, Option<f64>)>, dispatch: f64| {
                h.map_or(0.0, |(per_req, prog)| {
                    per_req * row.requests_per_connection * (dispatch + prog.unwrap_or(0.0))
                })
            };
            (per_conn(row.tracepoint_hits, c.tracepoint_ns)
                + per_conn(row.raw_tracepoint_hits, c.raw_tracepoint_ns)
                + per_conn(row.uprobe_hits, c.uprobe_ns))
                / 1e3
        });
        let counted = match (counted, base_per_conn) {
            (Some(us), Some(b)) if b > 0.0 => format!("{us:.2} ({:.1}%)", 100.0 * us / b),
            (Some(us), _) => format!("{us:.2}"),
            (None, _) => "-".to_string(),
        };
        let _ = writeln!(
            s,
            "| {} | {}, {} | {} | {:.2} | {}, {}, {} | {} | {} |",
            row.mode.name,
            opt(row.tracepoint_hits.map(|x| x.0), 3),
            opt(row.raw_tracepoint_hits.map(|x| x.0), 3),
            opt(row.uprobe_hits.map(|x| x.0), 3),
            all * row.requests_per_connection,
            ns(row.tracepoint_hits),
            ns(row.raw_tracepoint_hits),
            ns(row.uprobe_hits),
            opt(row.us_per_hit, 2),
            counted,
        );
    }
    if let Some(c) = cost {
        let _ = writeln!(
            s,
            "\ndispatch of one hit, measured alone (empty programs, median of repeats, kernel.bpf_stats_enabled off): uprobe {:.0} ns, tracepoint {:.0} ns, raw tracepoint {:.0} ns{}",
            c.uprobe_ns,
            c.tracepoint_ns,
            c.raw_tracepoint_ns,
            c.bpf_stats_ns
                .map(|n| format!("; kernel.bpf_stats_enabled's own timing adds {n:.0} ns per program run (not in the ratios: the rounds run with it off, the hits are counted in one extra run per mode)"))
                .unwrap_or_default()
        );
    }
    s
}

/// Summarises every mode of `r` against its first (baseline) mode.
pub fn rows(r: &WorkloadResult) -> Vec<Row> {
    let base: Vec<f64> = r.runs[0].iter().map(|x| x.worker_us_per_req).collect();
    let base_us = median_or_nan(&base);
    r.modes
        .iter()
        .zip(&r.runs)
        .zip(&r.counting)
        .map(|((mode, runs), counting)| {
            // Hits and ns per run from the counting run (bpf_stats on) when there is
            // one, else from the rounds (an older result, or stats on all along).
            let counted = counting
                .as_ref()
                .map_or(runs.as_slice(), std::slice::from_ref);
            let cpu: Vec<f64> = runs.iter().map(|x| x.worker_us_per_req).collect();
            let ratios = paired_ratios(&cpu, &base);
            let opt = |f: &dyn Fn(&super::Run) -> Option<f64>| {
                let v: Vec<f64> = runs.iter().filter_map(f).collect();
                (!v.is_empty()).then(|| median_or_nan(&v))
            };
            let tracepoint_hits = hits_median(counted, |x| x.tracepoint_hits);
            let raw_tracepoint_hits = hits_median(counted, |x| x.raw_tracepoint_hits);
            let uprobe_hits = hits_median(counted, |x| x.uprobe_hits);
            let hits = [tracepoint_hits, raw_tracepoint_hits, uprobe_hits]
                .iter()
                .flatten()
                .map(|x| x.0)
                .sum::<f64>();
            Row {
                mode: *mode,
                us_per_req: median_or_nan(&cpu),
                tracepoint_hits,
                raw_tracepoint_hits,
                uprobe_hits,
                requests_per_connection: median_or_nan(
                    &runs
                        .iter()
                        .map(|x| x.requests_per_connection)
                        .collect::<Vec<_>>(),
                ),
                us_per_hit: (hits > 0.0).then(|| (median_or_nan(&cpu) - base_us) / hits),
                ratio: median_or_nan(&ratios),
                ci95: bootstrap_median_ci95(&ratios),
                ratios,
                rps: median_or_nan(&runs.iter().map(|x| x.rps).collect::<Vec<_>>()),
                p99_ms: median_or_nan(&runs.iter().map(|x| x.p99_ms).collect::<Vec<_>>()),
                cpu_pct: opt(&|x| x.cpu_pct),
                rss_mib: opt(&|x| x.rss_mib),
                attach_ms: opt(&|x| x.attach_ms),
                ns_per_run: {
                    let v: Vec<f64> = counted.iter().filter_map(|x| x.ns_per_event).collect();
                    (!v.is_empty()).then(|| median_or_nan(&v))
                },
                upstream_conns_per_req: opt(&|x| x.upstream_conns_per_req),
                others_pct: runs.iter().filter_map(|x| x.others_pct).collect(),
                log_lines_read: opt(&|x| x.log_lines_read.filter(|&n| n > 0).map(|n| n as f64)),
                log_share_read: opt(&|x| match (x.log_lines_read, x.log_lines_written) {
                    (Some(r), Some(w)) if r > 0 && w > 0 => Some(r as f64 / w as f64),
                    _ => None,
                }),
                cpu_ms_per_10k_lines: opt(&|x| match (x.log_lines_read, x.tracer_cpu_s) {
                    (Some(n), Some(c)) if n > 0 => Some(c * 1000.0 / n as f64 * 10_000.0),
                    _ => None,
                }),
            }
        })
        .collect()
}

/// `1.143 [1.101, 1.190]`, or `1.143 (1 round)`.
pub fn ratio_cell(row: &Row) -> String {
    match row.ci95 {
        Some((lo, hi)) => format!("{:.3} [{lo:.3}, {hi:.3}]", row.ratio),
        None => format!("{:.3} (1 round)", row.ratio),
    }
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map(|x| format!("{x:.prec$}"))
        .unwrap_or_else(|| "-".into())
}

/// The console table of one workload.
pub fn console_table(
    r: &WorkloadResult,
    bpf_stats: bool,
    cost: Option<&super::hitcost::HitCost>,
) -> String {
    let rounds = r.runs[0].len();
    let mut s = format!(
        "\n{} workload, medians of {rounds} rounds; ratio = workers' CPU per request against no tracer, same round [95% CI]\n",
        r.workload.name()
    );
    let _ = writeln!(
        s,
        "{:<50} {:>10} {:>24} {:>9} {:>8} {:>8} {:>8} {:>9}{}",
        "mode",
        "us CPU/req",
        "ratio [95% CI]",
        "req/s",
        "p99 ms",
        "tracer%",
        "RSS MiB",
        "attach ms",
        if bpf_stats { "  ns/run" } else { "" }
    );
    let rows = rows(r);
    for row in &rows {
        let [name, us, ratio, rps, p99, cpu] = row.main_cells();
        let _ = writeln!(
            s,
            "{name:<50} {us:>10} {ratio:>24} {rps:>9} {p99:>8} {cpu:>8} {:>8} {:>9}{}",
            opt(row.rss_mib, 1),
            opt(row.attach_ms, 0),
            if bpf_stats {
                format!("  {:>6}", opt(row.ns_per_run, 0))
            } else {
                String::new()
            }
        );
    }
    if let Some((median, _)) = others_share(&rows) {
        let _ = writeln!(
            s,
            "other tasks on the workers' CPUs: median {median:.0}% of their time over the runs"
        );
    }
    s.push_str(log_reading(&rows).trim_start());
    if bpf_stats {
        s.push_str("\nprobe hits (kernel's run counts of the tracer's programs):\n");
        s.push_str(&hits_table(&rows, cost));
    }
    s
}

/// What the markdown page is made of.
pub struct Page<'a> {
    /// The machine.
    pub machine: &'a Machine,
    /// The command that made it.
    pub command: String,
    /// What was pinned (None: nothing).
    pub pinning: Option<String>,
    /// Load average at the start and at the end.
    pub load_before: &'a str,
    /// Load average at the end.
    pub load_after: &'a str,
    /// Rounds per workload.
    pub rounds: usize,
    /// Seconds per run.
    pub secs: u64,
    /// The floor's tracepoints.
    pub floor: &'a [String],
    /// Every workload's runs.
    pub results: &'a [WorkloadResult],
    /// The dispatch of one hit, measured alone (with bpf_stats).
    pub hit_cost: Option<super::hitcost::HitCost>,
}

/// `+11.1% [+8.4%, +26.2%]`: a ratio as a change in percent, with its interval.
fn pct_ci(row: &Row) -> String {
    let p = |r: f64| format!("{:+.1}%", (r - 1.0) * 100.0);
    match row.ci95 {
        Some((lo, hi)) => format!("{} [{}, {}]", p(row.ratio), p(lo), p(hi)),
        None => p(row.ratio),
    }
}

/// The row of the first mode whose tracer matches `pred`, if measured.
fn find(rows: &[Row], pred: impl Fn(&Tracer) -> bool) -> Option<&Row> {
    rows.iter().find(|row| pred(&row.mode.tracer))
}

/// The line after which the page is written by hand: `--write-doc` replaces what is
/// above it and keeps it and everything below.
pub const HAND_WRITTEN: &str =
    "<!-- Written by hand below this line: `--write-doc` keeps it and replaces what is above. -->";

/// `generated` followed by the hand-written part of `old` (from [`HAND_WRITTEN`] on), or
/// by the marker alone when `old` has none.
pub fn keep_hand_written(generated: &str, old: Option<&str>) -> String {
    let tail = old
        .and_then(|o| o.find(HAND_WRITTEN).map(|i| &o[i..]))
        .map(str::to_string)
        .unwrap_or_else(|| format!("{HAND_WRITTEN}\n"));
    format!("{}\n\n{tail}", generated.trim_end_matches('\n'))
}

/// Whether other processes competed with the workers: the median share of the
/// workers' CPUs that other processes used during the runs (`Run::others_pct`) is above
/// 5%. The load average is no measure of that: the benchmark raises it itself, and it
/// still carries whatever ran the minute before. Without that figure (unpinned runs
/// measure no CPU of their own), a 1-minute load average above half the CPUs at the
/// start.
fn busy(p: &Page) -> bool {
    let others: Vec<f64> = p
        .results
        .iter()
        .flat_map(|w| w.runs.iter().flatten())
        .filter_map(|r| r.others_pct)
        .collect();
    if !others.is_empty() {
        return median_or_nan(&others) > 5.0;
    }
    p.load_before
        .split_whitespace()
        .next()
        .and_then(|l| l.parse::<f64>().ok())
        .is_some_and(|l| l > 0.5 * p.machine.nproc as f64)
}

/// Other processes' share of the workers' CPUs over every run of `rows`
/// (`Row::others_pct`), %: its median and its maximum; None when not measured.
fn others_share(rows: &[Row]) -> Option<(f64, f64)> {
    let others: Vec<f64> = rows.iter().flat_map(|r| r.others_pct.clone()).collect();
    if others.is_empty() {
        return None;
    }
    let max = others.iter().copied().fold(f64::NAN, f64::max);
    Some((median_or_nan(&others), max))
}

/// The markdown page (docs/benchmarks.md): the header, a section per workload, what
/// the floor is.
pub fn markdown(p: &Page) -> String {
    let mut s = page_header(p);
    for r in p.results {
        s.push_str(&workload_section(p, r));
    }
    s.push_str(&floor_prose(p));
    s
}

/// The page's title, the machine, the command, the load and the method.
fn page_header(p: &Page) -> String {
    let m = p.machine;
    let mut s = String::from("# Benchmarks: what nginx-probe costs nginx\n\n");
    s.push_str(
        "Generated by `cargo xtask bench overhead` (xtask/src/overhead/); regenerate it with \
         the command below on a quiet machine. Every figure above \"Measured separately\" \
         comes from that one invocation.\n\n",
    );
    let _ = writeln!(s, "- Date: {}", m.date);
    let _ = writeln!(
        s,
        "- Machine: kernel {}, {} ({} CPUs), nginx {}, {}",
        m.kernel, m.cpu, m.nproc, m.nginx, m.openssl
    );
    let _ = writeln!(
        s,
        "- Command: `{}` (nginx-probe built from commit {})",
        p.command, m.commit
    );
    let _ = writeln!(
        s,
        "- Load average (1, 5, 15 min): {} at the start, {} at the end{}",
        p.load_before,
        p.load_after,
        if busy(p) {
            " (a busy machine: other processes competed for the CPUs, treat the figures as rough)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        s,
        "- {}",
        p.pinning
            .clone()
            .unwrap_or_else(|| "Not pinned: wrk and the workers share the CPUs.".into())
    );
    s.push_str(&method(p));
    s
}

/// The paragraph on how the runs were made and what the figures are.
fn method(p: &Page) -> String {
    format!(
        "\nMethod: for each workload, {} interleaved rounds (the order rotates each round); \
         each round runs every mode once under `wrk -t1 -c{CONNECTIONS} -d{}s --latency` \
         after a 2 s warm-up (wrk opens its {CONNECTIONS} connections at the start of each \
         run: {CONNECTIONS} TLS handshakes per run on https). \"us CPU/request\" is the nginx workers' CPU time (user + \
         system, `/proc/<pid>/stat`) over the run divided by the requests wrk completed: \
         what tracing adds to each request, steadier than req/s on a shared machine. The \
         ratio is the median over rounds of each round's us CPU/request against the \
         no-tracer run of the same round; the interval is a 95% percentile bootstrap of \
         that median (10,000 resamples of the rounds; with 5 rounds it spans about the \
         lowest to the highest round). req/s and p99 are wrk's, medians over rounds. A \
         tracer's own process (nginx-probe's user space, bpftrace) runs outside the workers: \
         its CPU is the \"tracer CPU\" column (% of one core, median), not in the ratio.\n\n",
        p.rounds, p.secs
    )
}

/// One workload's section: its ratio table, probe hits, log reading, the machine's
/// competition and the upstream connections.
fn workload_section(p: &Page, r: &WorkloadResult) -> String {
    let rows = rows(r);
    let mut s = format!("## {}\n\n{}.\n\n", r.workload.name(), r.workload.describe());
    s.push_str(&ratio_table(&rows));
    if rows.iter().any(|r| r.hits_per_req().is_some()) {
        let _ = write!(
            s,
            "\nProbe hits, counted by the kernel (`run_cnt` of the tracer's programs) in one \
             extra run per mode after the rounds with `kernel.bpf_stats_enabled` on (the \
             measured rounds run with it off: its timing is not in the ratios); a \
             program's own ns per hit leaves out the uprobe trap and the tracepoint's \
             dispatch; the workers' us per hit is the mode's median CPU per request above \
             no tracer's over its hits per request, so it carries the machine's noise:\n\n{}",
            hits_table(&rows, p.hit_cost.as_ref())
        );
    }
    s.push_str(&log_reading(&rows));
    if let Some((median, max)) = others_share(&rows) {
        let _ = writeln!(
            s,
            "\nOther processes on the workers' CPUs during the runs (`/proc/stat` user + nice + \
             system + steal minus the workers' CPU time; the tracer's own process \
             included{}): median {median:.0}% of \
             their time, at most {max:.0}%.",
            if p.pinning.is_some() { "" } else { ", and wrk" },
        );
    }
    s.push_str(&upstream_note(&rows));
    s.push('\n');
    s
}

/// The markdown table of the modes' CPU per request and ratios.
fn ratio_table(rows: &[Row]) -> String {
    let mut s = String::from(
        "| mode | workers' us CPU/request (median) | ratio to no tracer [95% CI] | req/s | p99 ms | tracer CPU % | per-round ratios |\n| --- | ---: | ---: | ---: | ---: | ---: | --- |\n",
    );
    for row in rows {
        let per_round: Vec<String> = row.ratios.iter().map(|x| format!("{x:.3}")).collect();
        let _ = writeln!(
            s,
            "| {} | {} |",
            row.main_cells().join(" | "),
            per_round.join(" ")
        );
    }
    s
}

/// New upstream connections per request of the baseline (proxy workload; empty
/// otherwise).
fn upstream_note(rows: &[Row]) -> String {
    let Some(c) = rows[0].upstream_conns_per_req else {
        return String::new();
    };
    let mut s = format!(
        "\nNew upstream connections per request, median of the no-tracer runs: {c:.3} \
         (the upstream's `stub_status` accepts over wrk's requests)."
    );
    if c >= 0.01 {
        let _ = write!(
            s,
            " Some requests opened a new upstream connection: more were in flight in a \
             worker than the {UPSTREAM_KEEPALIVE} idle connections `keepalive` keeps."
        );
    }
    s.push('\n');
    s
}

/// What reading the access log cost nginx-probe, per mode that read it (empty when
/// none did).
pub fn log_reading(rows: &[Row]) -> String {
    let mut s = String::new();
    for r in rows {
        let (Some(lines), Some(share), Some(ms)) =
            (r.log_lines_read, r.log_share_read, r.cpu_ms_per_10k_lines)
        else {
            continue;
        };
        let _ = writeln!(
            s,
            "\nAccess log read by {}: {lines:.0} lines a run ({:.1}% of the lines nginx \
             wrote, counted in the file after the run), its whole process CPU {ms:.1} ms per \
             10,000 lines (median over rounds; an upper bound of what reading the log costs \
             it: its maps, /proc and stub_status reads are in it). The workers take no part \
             in the reading: their cost is the ratio above.",
            r.mode.name,
            share * 100.0
        );
    }
    s
}

/// The floor's tracepoints in a few words: `enter+exit of a, b; exit of c; d`.
pub fn floor_summary(tps: &[String]) -> String {
    let name = |t: &String, kind: &str| {
        t.strip_prefix("syscalls:sys_")
            .and_then(|r| r.strip_prefix(kind))
            .map(str::to_string)
    };
    let enters: Vec<String> = tps.iter().filter_map(|t| name(t, "enter_")).collect();
    let exits: Vec<String> = tps.iter().filter_map(|t| name(t, "exit_")).collect();
    let both: Vec<&String> = enters.iter().filter(|e| exits.contains(e)).collect();
    let enter_only: Vec<&String> = enters.iter().filter(|e| !exits.contains(e)).collect();
    let exit_only: Vec<&String> = exits.iter().filter(|e| !enters.contains(e)).collect();
    let other: Vec<&String> = tps
        .iter()
        .filter(|t| !t.starts_with("syscalls:sys_"))
        .collect();
    // Each name once, with its count of programs when more than one.
    let list = |v: &[&String]| {
        let mut seen: Vec<&String> = Vec::new();
        for x in v {
            if !seen.contains(x) {
                seen.push(x);
            }
        }
        seen.iter()
            .map(|s| match v.iter().filter(|x| x == &s).count() {
                1 => format!("`{s}`"),
                n => format!("`{s}` ({n} programs)"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut parts = Vec::new();
    if !both.is_empty() {
        parts.push(format!("enter and exit of {}", list(&both)));
    }
    if !exit_only.is_empty() {
        parts.push(format!("exit of {}", list(&exit_only)));
    }
    if !enter_only.is_empty() {
        parts.push(format!("enter of {}", list(&enter_only)));
    }
    if !other.is_empty() {
        parts.push(list(&other));
    }
    parts.join("; ")
}

/// The section on what the floor is made of, with this run's figures.
fn floor_prose(p: &Page) -> String {
    let mut s = String::from("## What the floor is\n\n");
    let _ = writeln!(
        s,
        "nginx-probe attaches eBPF programs to syscall tracepoints (`syscalls:sys_enter_*`, \
         `sys_exit_*`): a stable kernel ABI, and on this kernel the only one (kprobes and \
         fentry are not available). Two empty-program modes separate the cost of the \
         mechanism from nginx-probe's own work:\n\n\
         - **one empty program on sys_exit_accept4**: attaching any syscall tracepoint sets \
         the syscall-tracing flag on every task, so every syscall of every process takes \
         the kernel's slower tracing path; accept4 itself is rare under keepalive. This \
         mode is the cost of that flag alone.\n\
         - **empty programs, nginx-probe's tracepoints (floor)**: bpftrace with an empty \
         action on exactly the {} tracepoint programs nginx-probe attaches by default \
         ({}; derived from the syscall table nginx-probe plans from, and checked against \
         the count nginx-probe's banner prints). Each hit of a per-request syscall (write, writev, sendfile, epoll_wait, ...) \
         then also runs a program through the tracepoint path, whatever the program does. \
         No tool on these tracepoints can cost less; nginx-probe's default mode minus the \
         floor is its own work.\n",
        p.floor.len(),
        floor_summary(p.floor)
    );
    s.push_str("In this run (ratio medians of workers' CPU per request against no tracer):\n\n");
    for r in p.results {
        let rows = rows(r);
        let flag = find(&rows, |t| matches!(t, Tracer::Empty(_)));
        let floor = find(&rows, |t| matches!(t, Tracer::EmptyOnProbeTracepoints));
        let probe = find(&rows, |t| matches!(t, Tracer::Probe(a) if a.is_empty()));
        let (Some(flag), Some(floor), Some(probe)) = (flag, floor, probe) else {
            continue;
        };
        let _ = writeln!(
            s,
            "- {}: the syscall-tracing flag alone {}, the floor {}, nginx-probe's default {} ({} points against the floor).",
            r.workload.name(),
            pct_ci(flag),
            pct_ci(floor),
            pct_ci(probe),
            format_args!("{:+.1}", (probe.ratio - floor.ratio) * 100.0),
        );
    }
    s.push_str(
        "\nOn a quiet machine the two rows tell the flag from the hits: the cost is per \
         tracepoint hit, so it weighs most where a request does least (the 30-byte static \
         file is the worst case; a page served over TLS or through a proxy spends more of \
         the workers' CPU on work no tracer touches). The way down is \
         to hit per-request syscalls less often (fewer tracepoints in the always-on mode), \
         not to make each hit cheaper: a prototype with one raw_syscalls program pair in \
         place of the per-syscall tracepoints was not cheaper, as it runs on every syscall \
         of every process.\n",
    );
    if p.results.iter().any(|r| r.workload == Workload::Static)
        && p.results
            .iter()
            .all(|r| r.modes.iter().all(|m| !matches!(m.tracer, Tracer::Strace)))
    {
        s.push_str(
            "\nbpftrace with histograms, `strace -c -f`, `--syscalls all` and \
             `--writes-from-proc` are measured on the static workload with `--extra-modes`.\n",
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::{Run, MODES};
    use super::*;

    fn run(us: f64) -> Run {
        Run {
            rps: 1000.0,
            p99_ms: 2.0,
            worker_us_per_req: us,
            ..Run::default()
        }
    }

    fn result(base: &[f64], probe: &[f64]) -> WorkloadResult {
        WorkloadResult {
            workload: Workload::Https,
            modes: vec![MODES[0], MODES[1]],
            runs: vec![
                base.iter().map(|&x| run(x)).collect(),
                probe.iter().map(|&x| run(x)).collect(),
            ],
            counting: vec![None, None],
        }
    }

    #[test]
    fn rows_pair_rounds_and_give_intervals() {
        // Per-round ratios 1.10, 1.20, 1.15 (the base drifts; the pairs do not).
        let r = result(&[10.0, 20.0, 40.0], &[11.0, 24.0, 46.0]);
        let rows = rows(&r);
        assert_eq!(rows[0].ratio, 1.0);
        assert_eq!(rows[0].ci95, Some((1.0, 1.0)));
        assert_eq!(rows[1].us_per_req, 24.0);
        assert!((rows[1].ratio - 1.15).abs() < 1e-12);
        let (lo, hi) = rows[1].ci95.unwrap();
        assert!(
            (lo - 1.10).abs() < 1e-12 && (hi - 1.20).abs() < 1e-12,
            "{lo} {hi}"
        );
        assert_eq!(ratio_cell(&rows[1]), "1.150 [1.100, 1.200]");
    }

    #[test]
    fn counted_cost_is_hits_per_connection_times_dispatch_plus_program_time() {
        // One request per connection, no tracer 200 us; the mode: 13 tracepoint hits at
        // 134 ns of program time, 2 uprobe hits at 387 ns; dispatch 150 and 750 ns:
        // 13 * 284 + 2 * 1137 = 5966 ns = 5.97 us per connection, 3.0% of 200 us.
        let mut r = result(&[200.0, 200.0, 200.0], &[204.0, 204.0, 204.0]);
        for runs in r.runs.iter_mut() {
            for x in runs.iter_mut() {
                x.requests_per_connection = 1.0;
            }
        }
        for x in r.runs[1].iter_mut() {
            x.tracepoint_hits = Some(super::super::Hits {
                per_req: 13.0,
                ns_per_hit: Some(134.0),
            });
            x.raw_tracepoint_hits = Some(super::super::Hits {
                per_req: 10.0,
                ns_per_hit: Some(50.0),
            });
            x.uprobe_hits = Some(super::super::Hits {
                per_req: 2.0,
                ns_per_hit: Some(387.0),
            });
        }
        let cost = super::super::hitcost::HitCost {
            uprobe_ns: 750.0,
            tracepoint_ns: 150.0,
            raw_tracepoint_ns: 30.0,
            bpf_stats_ns: Some(21.0),
        };
        let t = hits_table(&rows(&r), Some(&cost));
        // 13 x (150 + 134) + 10 x (30 + 50) + 2 x (750 + 387) = 6766 ns.
        assert!(
            t.contains("| 13.000, 10.000 | 2.000 | 25.00 | 134, 50, 387 | 0.16 | 6.77 (3.4%) |"),
            "{t}"
        );
        assert!(
            t.contains("uprobe 750 ns, tracepoint 150 ns, raw tracepoint 30 ns"),
            "{t}"
        );
        assert!(
            t.contains("bpf_stats_enabled's own timing adds 21 ns per program run"),
            "{t}"
        );
        let without = hits_table(&rows(&r), None);
        assert!(without.contains("| 0.16 | - |"), "{without}");
    }

    #[test]
    fn hits_come_from_the_counting_run_and_the_ratio_from_the_rounds() {
        // Rounds (bpf_stats off) carry no hits; the counting run (bpf_stats on) is
        // slower (220 us) and has 7 hits per request at 90 ns: its CPU stays out of the
        // ratio, its hits fill the hits columns.
        let mut r = result(&[200.0, 200.0, 200.0], &[204.0, 204.0, 204.0]);
        let mut counting = r.runs[1][0].clone();
        counting.worker_us_per_req = 220.0;
        counting.raw_tracepoint_hits = Some(super::super::Hits {
            per_req: 7.0,
            ns_per_hit: Some(90.0),
        });
        counting.ns_per_event = Some(90.0);
        r.counting[1] = Some(counting);
        let rows = rows(&r);
        assert!((rows[1].ratio - 1.02).abs() < 1e-9);
        assert_eq!(rows[1].raw_tracepoint_hits, Some((7.0, Some(90.0))));
        assert_eq!(rows[1].ns_per_run, Some(90.0));
        assert_eq!(rows[0].raw_tracepoint_hits, None);
    }

    #[test]
    fn log_reading_is_the_probes_cpu_over_the_lines_it_read() {
        let mut r = result(&[10.0, 10.0, 10.0], &[11.0, 11.0, 11.0]);
        // 0.5 s of CPU over 1,000,000 lines = 5 ms per 10k; one round read 90% of them.
        for (i, x) in r.runs[1].iter_mut().enumerate() {
            x.tracer_cpu_s = Some(0.5);
            x.log_lines_read = Some(if i == 0 { 900_000 } else { 1_000_000 });
            x.log_lines_written = Some(1_000_000);
        }
        let rows = rows(&r);
        assert_eq!(rows[0].cpu_ms_per_10k_lines, None);
        assert_eq!(rows[1].log_lines_read, Some(1_000_000.0));
        assert_eq!(rows[1].log_share_read, Some(1.0));
        assert!((rows[1].cpu_ms_per_10k_lines.unwrap() - 5.0).abs() < 1e-9);
        let text = log_reading(&rows);
        assert!(
            text.contains("1000000 lines a run (100.0% of the lines nginx wrote")
                && text.contains("5.0 ms per 10,000 lines"),
            "{text}"
        );
    }

    #[test]
    fn the_floor_is_summarised_by_kind() {
        let tps: Vec<String> = [
            "sched:sched_process_fork",
            "syscalls:sys_enter_close",
            "syscalls:sys_exit_openat",
            "syscalls:sys_enter_write",
            "syscalls:sys_exit_write",
            "syscalls:sys_exit_openat",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            floor_summary(&tps),
            "enter and exit of `write`; exit of `openat` (2 programs); enter of `close`; `sched:sched_process_fork`"
        );
    }

    #[test]
    fn regenerating_keeps_the_hand_written_part() {
        let first = keep_hand_written("# gen 1\n", None);
        assert_eq!(first, format!("# gen 1\n\n{HAND_WRITTEN}\n"));
        let edited = format!("{first}## Soak\n\nby hand\n");
        assert_eq!(
            keep_hand_written("# gen 2\n", Some(&edited)),
            format!("# gen 2\n\n{HAND_WRITTEN}\n## Soak\n\nby hand\n")
        );
        // A file without the marker is replaced whole.
        assert_eq!(
            keep_hand_written("# gen\n", Some("old text")),
            format!("# gen\n\n{HAND_WRITTEN}\n")
        );
    }

    #[test]
    fn one_round_says_so() {
        let rows = rows(&result(&[10.0], &[12.0]));
        assert_eq!(ratio_cell(&rows[1]), "1.200 (1 round)");
    }

    #[test]
    fn the_page_has_the_machine_command_and_a_table_per_workload() {
        let m = Machine {
            date: "2026-11-30 22:00 UTC".into(),
            kernel: "6.18.0".into(),
            cpu: "AMD EPYC".into(),
            nproc: 2,
            nginx: "nginx/1.22.1".into(),
            openssl: "OpenSSL 3.0.19".into(),
            commit: "abc1234".into(),
        };
        let results = [result(&[10.0, 10.0], &[11.0, 12.0])];
        let page = markdown(&Page {
            machine: &m,
            command: "cargo xtask bench overhead --workload https --rounds 2 --secs 5".into(),
            pinning: None,
            load_before: "0.10 0.20 0.30",
            load_after: "0.40 0.20 0.30",
            rounds: 2,
            secs: 5,
            floor: &["syscalls:sys_exit_write".into()],
            results: &results,
            hit_cost: None,
        });
        assert!(page.contains("- Date: 2026-11-30 22:00 UTC"));
        assert!(
            page.contains("kernel 6.18.0, AMD EPYC (2 CPUs), nginx nginx/1.22.1, OpenSSL 3.0.19")
        );
        assert!(page.contains(
            "`cargo xtask bench overhead --workload https --rounds 2 --secs 5` (nginx-probe built from commit abc1234)"
        ));
        assert!(page.contains("## https\n"));
        assert!(
            page.contains(
                "| nginx-probe (default) | 11.50 | 1.150 [1.100, 1.200] | 1000 | 2.00 | - | 1.100 1.200 |"
            ),
            "{page}"
        );
        assert!(page.contains("## What the floor is"));
        assert!(!page.contains("a busy machine"));
    }

    #[test]
    fn busy_is_what_others_took_from_the_workers_not_the_load_average() {
        let m = Machine {
            date: "d".into(),
            kernel: "k".into(),
            cpu: "c".into(),
            nproc: 2,
            nginx: "n".into(),
            openssl: "o".into(),
            commit: "c".into(),
        };
        let with_others = |pct: Option<f64>| {
            let mut r = result(&[10.0, 10.0], &[11.0, 12.0]);
            for x in r.runs.iter_mut().flatten() {
                x.others_pct = pct;
            }
            r
        };
        let page = |results: &[WorkloadResult], load: &str| {
            markdown(&Page {
                machine: &m,
                command: "c".into(),
                pinning: None,
                load_before: load,
                load_after: load,
                rounds: 2,
                secs: 5,
                floor: &[],
                results,
                hit_cost: None,
            })
        };
        // The bench's own load: a high load average, nobody else on the workers' CPUs.
        assert!(!page(&[with_others(Some(0.0))], "3.0 2.0 1.0").contains("a busy machine"));
        assert!(page(&[with_others(Some(12.0))], "0.1 0.1 0.1").contains("a busy machine"));
        // Unmeasured: the load average at the start decides.
        assert!(page(&[with_others(None)], "3.0 2.0 1.0").contains("a busy machine"));
        assert!(!page(&[with_others(None)], "0.2 0.1 0.1").contains("a busy machine"));
    }
}
