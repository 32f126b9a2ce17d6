//! Rendering a [`Report`] as text (per-worker tables, bcc-style log2 histograms) or JSON.

use std::fmt::Write as _;

use crate::model::{bucket_bounds, Event, FdReport, Report, RequestSource, WorkerReport};

/// One line describing a worker-set event, for stderr and the summary.
pub fn event_line(ev: &Event, master: u32) -> String {
    match ev.event.as_str() {
        "worker_started" => format!("+{:.1}s worker {} started (forked by master {master}); tracing it", ev.t_s, ev.pid),
        "worker_exited" => format!("+{:.1}s worker {} exited", ev.t_s, ev.pid),
        "new_master" => format!(
            "+{:.1}s new nginx master {} started under master {master} (binary upgrade, USR2); this run keeps following master {master}: trace the new one with --pid {}",
            ev.t_s, ev.pid, ev.pid
        ),
        other => format!("+{:.1}s {other} {}", ev.t_s, ev.pid),
    }
}

/// Formats a duration in ns with a unit a person reads at a glance: `850ns`, `12.3us`,
/// `4.50ms`, `1.23s`.
pub fn fmt_ns(ns: u64) -> String {
    if ns < 1_000 {
        format!("{ns}ns")
    } else if ns < 1_000_000 {
        format!("{:.1}us", ns as f64 / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2}ms", ns as f64 / 1e6)
    } else {
        format!("{:.2}s", ns as f64 / 1e9)
    }
}

/// bcc-style log2 histogram (`nsecs : count | **** |`), from the first to the last
/// non-empty bucket. Empty string when the histogram is empty.
pub fn log2_hist(hist: &[u64], unit: &str) -> String {
    let first = hist.iter().position(|&c| c > 0);
    let last = hist.iter().rposition(|&c| c > 0);
    let (Some(first), Some(last)) = (first, last) else {
        return String::new();
    };
    let peak = *hist.iter().max().unwrap_or(&1);
    let mut out = String::new();
    let _ = writeln!(out, "{:>28}: {:<9} distribution", unit, "count");
    for (b, &count) in hist.iter().enumerate().take(last + 1).skip(first) {
        let (lo, hi) = bucket_bounds(b);
        let hi = if b == hist.len() - 1 {
            "inf".to_string()
        } else {
            hi.to_string()
        };
        let stars = if peak == 0 {
            0
        } else {
            (count as u128 * 40).div_ceil(peak as u128) as usize
        };
        let _ = writeln!(
            out,
            "{:>12} -> {:<12}: {:<9} |{:<40}|",
            lo,
            hi,
            count,
            "*".repeat(stars.min(40))
        );
    }
    out
}

fn fds_cell(f: &FdReport) -> String {
    let o = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_else(|| "-".into());
    format!("{}/{}/{}", o(f.open), o(f.peak), o(f.limit))
}

fn worker_label(w: &WorkerReport) -> String {
    let mut s = w.pid.to_string();
    if w.nspid.len() > 1 {
        let _ = write!(s, "({})", w.nspid[w.nspid.len() - 1]);
    }
    if !w.alive {
        s.push('+');
    }
    s
}

/// Renders a report as the text tables printed every interval and at exit.
/// `hist` names a syscall whose per-worker histogram is appended.
pub fn render_text(r: &Report, hist: Option<&str>, clock: &str) -> String {
    let mut out = String::new();
    let total_accepts: u64 = r.workers.iter().map(|w| w.accepts).sum::<u64>()
        + r.exited_merged
            .as_ref()
            .map(|m| m.stats.accepts)
            .unwrap_or(0);
    let title = if r.kind == "summary" {
        "SUMMARY"
    } else {
        "INTERVAL"
    };
    let _ = writeln!(
        out,
        "\n{clock} {title} {:.1}s  master {}  workers {}  accepts {} ({:.1}/s)",
        r.duration_s,
        r.master_pid,
        r.workers.iter().filter(|w| w.alive).count(),
        total_accepts,
        if r.duration_s > 0.0 {
            total_accepts as f64 / r.duration_s
        } else {
            0.0
        },
    );
    if r.verdicts.is_empty() {
        let _ = writeln!(out, "verdicts: none");
    } else {
        let _ = writeln!(out, "VERDICTS");
        for v in &r.verdicts {
            let sev = serde_json::to_value(v.severity)
                .ok()
                .and_then(|x| x.as_str().map(str::to_string))
                .unwrap_or_default();
            let _ = writeln!(out, "  [{sev}] {}: {}", v.id, v.advice);
            let ev: Vec<String> = v
                .evidence
                .iter()
                .map(|(k, val)| format!("{k}={val}"))
                .collect();
            let _ = writeln!(out, "      evidence: {}", ev.join(" "));
            let _ = writeln!(out, "      directives: {}", v.directives.join(", "));
        }
    }
    let _ = writeln!(
        out,
        "\n{:<12} {:>9} {:>6} {:>7} {:>7} {:>13} {:>6} {:>6} {:>9} {:>18}",
        "WORKER",
        "ACCEPTS",
        "SHARE",
        "EMFILE",
        "ENFILE",
        "ECONNABORTED",
        "EINTR",
        "OTHER",
        "EAGAIN",
        "FDS OPEN/PEAK/LIM"
    );
    let merged = r
        .exited_merged
        .as_ref()
        .map(|m| (format!("exited({})", m.workers), &m.stats));
    let rows = r.workers.iter().map(|w| (worker_label(w), w)).chain(merged);
    for (label, w) in rows {
        let e = |k: &str| w.accept_errors.get(k).copied().unwrap_or(0);
        let _ = writeln!(
            out,
            "{:<12} {:>9} {:>5.1}% {:>7} {:>7} {:>13} {:>6} {:>6} {:>9} {:>18}",
            label,
            w.accepts,
            w.accept_share * 100.0,
            e("EMFILE"),
            e("ENFILE"),
            e("ECONNABORTED"),
            e("EINTR"),
            e("OTHER"),
            e("EAGAIN"),
            fds_cell(&w.fds),
        );
    }
    if !r.listen.is_empty() {
        let _ = writeln!(
            out,
            "\n{:<28} {:>8} {:>10} {:>10} {:>10} {:>8}   (overflows/drops: whole network namespace)",
            "LISTEN", "BACKLOG", "QUEUE NOW", "QUEUE MAX", "OVERFLOWS", "DROPS"
        );
        for l in &r.listen {
            let _ = writeln!(
                out,
                "{:<28} {:>8} {:>10} {:>10} {:>10} {:>8}",
                l.addr, l.backlog, l.queue_now, l.queue_max, l.overflows, l.drops
            );
        }
    }
    if let Some(first) = r.workers.first() {
        let source = match first.requests.source {
            RequestSource::Uprobe => "uprobes",
            RequestSource::WritevEstimate => "estimated from writev calls; --uprobes for exact",
        };
        let _ = writeln!(
            out,
            "\n{:<12} {:>9} {:>9} {:>9} {:>9} {:>9}   requests: {source}",
            "WORKER", "REQUESTS", "REQ/S", "REQ/CONN", "P50", "P99"
        );
        for w in &r.workers {
            let q = &w.requests;
            let _ = writeln!(
                out,
                "{:<12} {:>9} {:>9.1} {:>9} {:>9} {:>9}",
                worker_label(w),
                q.count,
                q.per_s,
                q.per_connection
                    .map(|v| format!("{v:.1}"))
                    .unwrap_or_else(|| "-".into()),
                q.p50_ns.map(fmt_ns).unwrap_or_else(|| "-".into()),
                q.p99_ns.map(fmt_ns).unwrap_or_else(|| "-".into()),
            );
        }
        let _ = writeln!(out, "\nsyscalls per request:");
        for w in &r.workers {
            if w.requests.syscalls_per_request.is_empty() {
                continue;
            }
            let mix: Vec<String> = w
                .requests
                .syscalls_per_request
                .iter()
                .map(|(k, v)| format!("{k} {v:.2}"))
                .collect();
            let _ = writeln!(out, "{:<12} {}", worker_label(w), mix.join("  "));
        }
    }
    let _ = writeln!(
        out,
        "\n{:<12} {:<12} {:>9} {:>8} {:>9} {:>9} {:>9} {:>10} {:>12}",
        "WORKER", "SYSCALL", "COUNT", "ERRORS", "P50", "P99", "MAX", "TOTAL", "BYTES/EVENTS"
    );
    for w in &r.workers {
        for (name, s) in &w.syscalls {
            if s.count == 0 {
                continue;
            }
            let extra = s
                .bytes
                .or(s.events)
                .map(|v| v.to_string())
                .unwrap_or_else(|| "-".into());
            let _ = writeln!(
                out,
                "{:<12} {:<12} {:>9} {:>8} {:>9} {:>9} {:>9} {:>10} {:>12}",
                worker_label(w),
                name,
                s.count,
                s.errors,
                fmt_ns(s.p50_ns),
                fmt_ns(s.p99_ns),
                fmt_ns(s.max_ns),
                fmt_ns(s.total_ns),
                extra
            );
        }
    }
    if let Some(name) = hist {
        for w in &r.workers {
            if let Some(s) = w.syscalls.get(name) {
                let h = log2_hist(&s.hist_log2_ns, "nsecs");
                let _ = writeln!(out, "\nworker {} {name} latency:", worker_label(w));
                if h.is_empty() {
                    let _ = writeln!(out, "  no {name} calls timed in this period");
                } else {
                    out.push_str(&h);
                }
            }
        }
    }
    let drops: Vec<String> = r
        .drops
        .iter()
        .filter(|(_, &v)| v > 0)
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if !drops.is_empty() {
        let _ = writeln!(out, "\nnot fully accounted: {}", drops.join(" "));
    }
    if !r.missing_tracepoints.is_empty() {
        let _ = writeln!(
            out,
            "not attached (kernel lacks them): {}",
            r.missing_tracepoints.join(" ")
        );
    }
    if !r.events.is_empty() {
        let _ = writeln!(out, "\nevents:");
        for ev in &r.events {
            let _ = writeln!(out, "  {}", event_line(ev, r.master_pid));
        }
    }
    if r.workers.iter().any(|w| !w.alive) {
        let _ = writeln!(out, "+ = worker exited during the run");
    }
    if let Some(reason) = &r.end_reason {
        let _ = writeln!(out, "ended: {reason}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_durations() {
        assert_eq!(fmt_ns(850), "850ns");
        assert_eq!(fmt_ns(12_345), "12.3us");
        assert_eq!(fmt_ns(4_500_000), "4.50ms");
        assert_eq!(fmt_ns(1_230_000_000), "1.23s");
    }

    #[test]
    fn histogram_trims_and_scales() {
        let mut h = vec![0u64; 40];
        h[10] = 4;
        h[12] = 1;
        let text = log2_hist(&h, "nsecs");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].contains("nsecs") && lines[0].contains("distribution"));
        assert!(lines[1].contains("1024 -> 2047"));
        assert!(lines[1].contains(&format!("|{}|", "*".repeat(40))));
        assert!(
            lines[2].contains("2048 -> 4095")
                && lines[2].contains(&format!("|{}|", " ".repeat(40)))
        );
        assert!(lines[3].contains(&format!("|{}{}|", "*".repeat(10), " ".repeat(30))));
        assert_eq!(log2_hist(&[0; 40], "nsecs"), "");
    }
}
