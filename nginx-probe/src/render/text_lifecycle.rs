//! The text report's lifecycle section: one line per reload generation still draining,
//! a row per draining or exited worker with its state, generation, what it holds and
//! how it exited. Printed only when the report has a `lifecycle` part (something
//! drains or exited), so other reports are unchanged. Numbers come from a report that
//! may be a recording from someone else: the caller escapes the whole text.

use std::fmt::Write as _;

use super::clock::clock;
use crate::model::{
    worker_lifecycle::{signal_name, LifecycleReport, WorkerExit, WorkerState},
    Report,
};

fn opt(v: Option<u64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "-".into())
}

fn mib(v: Option<u64>) -> String {
    v.map(|b| format!("{:.1}", b as f64 / (1 << 20) as f64))
        .unwrap_or_else(|| "-".into())
}

/// How an exit reads: `code 0 (graceful)`, `code 1`, `signal 11 (SIGSEGV)`.
pub fn exit_text(e: &WorkerExit) -> String {
    match (e.code, e.signal) {
        (_, Some(s)) => format!(
            "signal {s} ({}){}",
            signal_name(s),
            if e.core_dumped { ", core dumped" } else { "" }
        ),
        (Some(0), _) => "code 0 (graceful)".into(),
        (Some(c), _) => format!("code {c}"),
        _ => "unknown".into(),
    }
}

/// The section, or an empty string when the report has no lifecycle part.
pub fn lifecycle_section(r: &Report) -> String {
    let Some(l) = &r.lifecycle else {
        return String::new();
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nWORKER LIFECYCLE  (state: nginx's title in /proc/<pid>/cmdline, seen every 500 ms; exits: {})",
        if l.exit_status_unknown.is_some() {
            "status unknown"
        } else {
            "kernel sched:sched_process_exit"
        }
    );
    let quic = r
        .config
        .as_ref()
        .is_some_and(|c| c.listens.iter().any(|l| l.quic));
    draining_lines(&mut out, l, quic);
    worker_rows(&mut out, r);
    exit_lines(&mut out, l);
    out
}

/// One line per reload generation still draining: its workers, since when, what they
/// hold (TCP connections, from the workers' fd tables: `quic`, the configuration has
/// QUIC listens, whose connections are not counted there, and says so).
fn draining_lines(out: &mut String, l: &LifecycleReport, quic: bool) {
    for d in &l.draining {
        let _ = writeln!(
            out,
            "  generation {}: {} shutting down since {}{} ({:.1} s), holding {} client + {} upstream connections{}, {} MiB",
            d.reload_generation,
            match d.workers.len() {
                1 => "1 worker".to_string(),
                n => format!("{n} workers"),
            },
            clock(d.since_unix_s),
            if d.since_attach { " (attach; earlier)" } else { "" },
            d.draining_s,
            opt(d.client_connections),
            opt(d.upstream_connections),
            if quic {
                " (TCP; QUIC connections, which the configuration listens for, are not counted here)"
            } else {
                ""
            },
            mib(d.rss_bytes),
        );
    }
}

/// A row per worker shutting down or exited: generation, state, since when, client and
/// upstream connections, RSS, how it exited.
fn worker_rows(out: &mut String, r: &Report) {
    let rows: Vec<_> = r
        .workers
        .iter()
        .filter(|w| {
            w.lifecycle.state == Some(WorkerState::ShuttingDown) || w.lifecycle.exit.is_some()
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "  {:<10} {:>4} {:<14} {:>9} {:>8} {:>10} {:>8}  EXIT",
        "WORKER", "GEN", "STATE", "SINCE", "CLIENTS", "UPSTREAMS", "RSS MiB"
    );
    for w in rows {
        let l = &w.lifecycle;
        let state = match (w.alive, l.state) {
            (false, _) => "exited",
            (true, Some(WorkerState::ShuttingDown)) => "shutting down",
            (true, Some(WorkerState::Serving)) => "serving",
            _ => "unknown",
        };
        let _ = writeln!(
            out,
            "  {:<10} {:>4} {:<14} {:>9} {:>8} {:>10} {:>8}  {}",
            w.pid,
            l.reload_generation
                .map(|g| g.to_string())
                .unwrap_or_else(|| "-".into()),
            state,
            l.shutting_down_since_unix_s
                .map(clock)
                .unwrap_or_else(|| "-".into()),
            opt(l.client_connections),
            opt(l.upstream_connections),
            mib(l.rss_bytes),
            l.exit.as_ref().map(exit_text).unwrap_or_else(|| "-".into()),
        );
    }
}

/// The exits of the period by kind (graceful, other codes, signals), respawns, and why
/// exit statuses are unknown when they are.
fn exit_lines(out: &mut String, l: &LifecycleReport) {
    let e = &l.exits;
    if e.total() > 0 {
        let signals = e.signal_lines();
        let _ = writeln!(
            out,
            "  exits: {} graceful (code 0), {} other codes, {} on signals{}{}, {} unknown; {} respawned",
            e.graceful,
            e.exit_code,
            e.signal,
            if signals.is_empty() { "" } else { ": " },
            signals.join(", "),
            e.unknown,
            l.respawned
        );
    }
    if let Some(why) = &l.exit_status_unknown {
        let _ = writeln!(out, "  exit status unknown: {why}");
    }
}
