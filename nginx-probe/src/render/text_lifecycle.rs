//! The text report's lifecycle section: one line per reload generation still draining,
//! a row per draining or exited worker with its state, generation, what it holds and
//! how it exited, and the configuration loads (the master's reloads, `nginx -t` runs).
//! Printed only when the report has a `lifecycle` part (something drains or exited) or
//! a configuration load to tell of, so other reports are unchanged. Numbers come from a report that
//! may be a recording from someone else: the caller escapes the whole text.

use std::fmt::Write as _;

use super::clock::clock;
use crate::model::{
    reloads::{ConfigLoadsReport, FailedLoad},
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

/// How an exit reads: `code 0 after a graceful QUIT (it drained)`, `code 0, a fast
/// stop (TERM/INT: it never drained), 17 client connections cut`, `code 1`, `signal 11
/// (SIGSEGV)`. nginx exits 0 after a graceful QUIT and after a fast stop (TERM/INT, as
/// `nginx -s stop` sends) alike; a QUIT always begins with `ngx_close_idle_connections`,
/// whose uprobe marks the worker drained (`WorkerExit::drained`), a TERM never: with
/// the mark known, a code 0 says which. Without it, connections left to the kernel at
/// a code 0 tell a fast stop (a QUIT waits for its connections, or closes them itself
/// at `worker_shutdown_timeout`), and with none QUIT and TERM are not told apart.
/// `cut`: the client connections the kernel closed as the worker exited
/// (`WorkerCloses::by_worker_exit`; None without the lifecycle programs).
pub fn exit_text(e: &WorkerExit, cut: Option<u64>) -> String {
    match (e.code, e.signal) {
        (_, Some(s)) => format!(
            "signal {s} ({}){}",
            signal_name(s),
            if e.core_dumped { ", core dumped" } else { "" }
        ),
        (Some(0), _) => code0_text(e.drained, cut),
        (Some(c), _) => format!("code {c}"),
        _ => "unknown".into(),
    }
}

/// A code 0 exit in words (see [`exit_text`]).
fn code0_text(drained: Option<bool>, cut: Option<u64>) -> String {
    let cut_said = |n: u64| match n {
        0 => String::new(),
        n => format!(", {n} client connections cut as it exited"),
    };
    match (drained, cut) {
        (Some(true), c) => format!(
            "code 0 after a graceful QUIT (it drained){}",
            c.map(cut_said).unwrap_or_default()
        ),
        (Some(false), c) => format!(
            "code 0, a fast stop (TERM/INT: it never drained){}",
            c.map(cut_said).unwrap_or_default()
        ),
        (None, Some(0)) => "code 0 (no connection cut)".into(),
        (None, Some(n)) => format!("code 0, {n} client connections cut (a fast stop: TERM/INT)"),
        (None, None) => "code 0 (client connections cut at exit: not counted)".into(),
    }
}

/// The section, or an empty string when the report has no lifecycle part and no
/// configuration load to tell of.
pub fn lifecycle_section(r: &Report) -> String {
    let loads = r.config_loads.as_ref().filter(|c| c.worth_saying());
    let l = match (&r.lifecycle, loads) {
        (Some(l), _) => l,
        (None, Some(_)) => &LifecycleReport::default(),
        (None, None) => return String::new(),
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
    exit_lines(&mut out, l, code0_exits(r));
    if let Some(c) = loads {
        config_load_line(&mut out, c);
    }
    out
}

/// The configuration loads of the period: the master's reloads that loaded and
/// failed, a binary upgrade's new masters' (when there were any), and the other runs
/// of nginx's binary (`nginx -t`, `nginx -s`).
fn config_load_line(out: &mut String, c: &ConfigLoadsReport) {
    if let Some(why) = &c.unknown {
        let _ = writeln!(out, "  configuration loads: unknown ({why})");
        return;
    }
    let reloads = failed_note(
        c,
        c.last_reload_failed_unix_s,
        FailedLoad::Reload,
        "nginx serves on with the configuration it had",
    );
    let upgrades = if c.upgrades_loaded + c.upgrades_failed > 0 {
        format!(
            "; binary upgrades' new masters (USR2, children of the master) {} loaded, {} failed{}",
            c.upgrades_loaded,
            c.upgrades_failed,
            failed_note(
                c,
                c.last_upgrade_failed_unix_s,
                FailedLoad::Upgrade,
                "the new master exited and the old one serves on with the binary and configuration it had",
            )
        )
    } else {
        String::new()
    };
    let partial = c
        .others_unknown
        .as_ref()
        .map(|why| format!(" seen; not all are: {why}"))
        .unwrap_or_default();
    let others = if c.upgrades_unknown.is_some() {
        "nginx -t, nginx -s, a new or second master"
    } else {
        "nginx -t, nginx -s, another master"
    };
    let _ = writeln!(
        out,
        "  configuration loads (uretprobe ngx_init_cycle): the master's reloads {} loaded, {} failed{reloads}{upgrades}; other processes of its binary ({others}; which configuration file is not known) {} loaded, {} failed{partial}",
        c.reloads_loaded, c.reloads_failed, c.others_loaded, c.others_failed
    );
}

/// After a count of failed loads of kind `which` whose last returned at `failed_at`:
/// when, and whether nothing loaded after it (`then`: what nginx does now) or what did.
fn failed_note(
    c: &ConfigLoadsReport,
    failed_at: Option<f64>,
    which: FailedLoad,
    then: &str,
) -> String {
    let utc = crate::model::clock::utc_datetime;
    let Some(f) = failed_at else {
        return String::new();
    };
    if c.last_load_failed() == Some(which) {
        return format!(" (the last at {}, none loaded after: {then})", utc(f));
    }
    let after = [
        (c.last_reload_loaded_unix_s, "a reload"),
        (
            c.last_upgrade_loaded_unix_s,
            "a binary upgrade's new master",
        ),
    ]
    .into_iter()
    .filter_map(|(t, who)| t.filter(|t| *t > f).map(|t| (t, who)))
    .max_by(|a, b| a.0.total_cmp(&b.0));
    match after {
        Some((l, who)) => format!(
            " (the last at {}; {who} at {} loaded after it)",
            utc(f),
            utc(l)
        ),
        None => format!(" (the last at {})", utc(f)),
    }
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
            l.exit
                .as_ref()
                .map(|e| exit_text(e, w.connections_closed.as_ref().map(|c| c.by_worker_exit)))
                .unwrap_or_else(|| "-".into()),
        );
    }
}

/// Code 0 exits among the exited workers the report lists (at most
/// `collect::tracker::MAX_EXITED_KEPT` kept apart): how many, how many were a fast
/// stop (never drained, or, where that is not known, left client connections to the
/// kernel), how many a graceful QUIT (drained), and the connections cut as they exited
/// (see [`exit_text`]); None when the lifecycle programs did not count closes at exit.
#[derive(Clone, Copy, Default)]
struct Code0Exits {
    listed: u64,
    fast: u64,
    quit: u64,
    /// Those whose drain mark was known (`WorkerExit::drained`).
    drain_known: u64,
    cut: u64,
}

fn code0_exits(r: &Report) -> Option<Code0Exits> {
    let mut out = Code0Exits::default();
    for w in r.workers.iter().filter(|w| !w.alive) {
        let Some(e) = &w.lifecycle.exit else { continue };
        if e.code != Some(0) || e.signal.is_some() {
            continue;
        }
        let cut = w.connections_closed.as_ref()?.by_worker_exit;
        out.listed += 1;
        out.cut += cut;
        out.drain_known += u64::from(e.drained.is_some());
        match e.drained {
            Some(true) => out.quit += 1,
            Some(false) => out.fast += 1,
            None if cut > 0 => out.fast += 1,
            None => {}
        }
    }
    Some(out)
}

/// The exits of the period by kind (code 0, other codes, signals), respawns, and why
/// exit statuses are unknown when they are. `c0`: the code 0 exits told apart
/// ([`code0_exits`]); the rest are said as code 0 only.
fn exit_lines(out: &mut String, l: &LifecycleReport, c0: Option<Code0Exits>) {
    let e = &l.exits;
    if e.total() > 0 {
        let signals = e.signal_lines();
        let code0 = match c0 {
            Some(c) if c.listed >= e.graceful && c.drain_known == c.listed && c.listed > 0 => {
                format!(
                    "{} with code 0 ({} after a graceful QUIT, they drained; {} a fast stop, TERM/INT as `nginx -s stop` sends, they never drained: ngx_close_idle_connections uprobe; {} client connections cut as they exited)",
                    e.graceful, c.quit, c.fast, c.cut
                )
            }
            Some(c) if c.fast == 0 && c.listed >= e.graceful => {
                format!(
                    "{} with code 0 (none left a client connection to the kernel)",
                    e.graceful
                )
            }
            Some(c) if c.fast > 0 => format!(
                "{} with code 0 ({} of them cut {} client connections as they exited: a fast stop, TERM/INT as `nginx -s stop` sends; a graceful QUIT waits for its connections)",
                e.graceful, c.fast, c.cut
            ),
            _ => format!(
                "{} with code 0 (graceful QUIT or fast stop: {})",
                e.graceful,
                if c0.is_some() {
                    "not all exited workers are listed"
                } else {
                    "connections cut at exit not counted"
                }
            ),
        };
        let _ = writeln!(
            out,
            "  exits: {code0}, {} other codes, {} on signals{}{}, {} unknown; {} respawned",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_reload_alone_gives_the_section_and_unknown_loads_say_why() {
        let mut r = crate::render::prometheus::tests::report();
        r.lifecycle = None;
        r.config_loads = Some(ConfigLoadsReport {
            reloads_loaded: 1,
            reloads_failed: 1,
            last_reload_failed_unix_s: Some(1_796_521_371.5),
            others_failed: 2,
            ..Default::default()
        });
        let text = lifecycle_section(&r);
        assert!(text.contains("\n  configuration loads (uretprobe ngx_init_cycle): the master's reloads 1 loaded, 1 failed (the last at 2026-12-06 01:42:51 UTC, none loaded after: nginx serves on with the configuration it had); other processes of its binary (nginx -t, nginx -s, another master; which configuration file is not known) 0 loaded, 2 failed\n"), "{text}");
        // A failed upgrade after it, then a reload that loaded; a parent not read.
        r.config_loads = Some(ConfigLoadsReport {
            reloads_loaded: 1,
            last_reload_loaded_unix_s: Some(1_796_521_380.0),
            upgrades_failed: 1,
            last_upgrade_failed_unix_s: Some(1_796_521_371.5),
            upgrades_unknown: Some("x".into()),
            ..Default::default()
        });
        let text = lifecycle_section(&r);
        assert!(text.contains("\n  configuration loads (uretprobe ngx_init_cycle): the master's reloads 1 loaded, 0 failed; binary upgrades' new masters (USR2, children of the master) 0 loaded, 1 failed (the last at 2026-12-06 01:42:51 UTC; a reload at 2026-12-06 01:43:00 UTC loaded after it); other processes of its binary (nginx -t, nginx -s, a new or second master; which configuration file is not known) 0 loaded, 0 failed\n"), "{text}");
        r.config_loads.as_mut().unwrap().last_reload_loaded_unix_s = Some(1_796_521_300.0);
        let text = lifecycle_section(&r);
        assert!(text.contains(" 0 loaded, 1 failed (the last at 2026-12-06 01:42:51 UTC, none loaded after: the new master exited and the old one serves on with the binary and configuration it had);"), "{text}");
        r.config_loads = Some(ConfigLoadsReport {
            unknown: Some("no ngx_init_cycle".into()),
            ..Default::default()
        });
        assert!(lifecycle_section(&r)
            .ends_with("\n  configuration loads: unknown (no ngx_init_cycle)\n"));
        r.config_loads = Some(ConfigLoadsReport::default());
        assert_eq!(lifecycle_section(&r), "", "nothing to tell: no section");
    }

    /// A report whose two workers (1100, 1101) exited with code 0, each with its drain
    /// mark and the client connections the kernel closed as it exited.
    fn two_exited(exits_of: [(Option<bool>, u64); 2]) -> Report {
        use crate::model::{connections::WorkerCloses, worker_lifecycle::ExitCounts};
        let mut r = crate::render::prometheus::tests::report();
        r.workers.truncate(1);
        let mut w2 = r.workers[0].clone();
        w2.pid = 1101;
        r.workers.push(w2);
        let mut exits = ExitCounts::default();
        for (w, (drained, cut)) in r.workers.iter_mut().zip(exits_of) {
            w.alive = false;
            w.lifecycle.exit = Some(WorkerExit {
                code: Some(0),
                drained,
                ..Default::default()
            });
            exits.add(w.lifecycle.exit.as_ref());
            w.connections_closed = Some(WorkerCloses {
                by_worker_exit: cut,
                ..Default::default()
            });
        }
        r.lifecycle = Some(LifecycleReport {
            exits,
            ..Default::default()
        });
        r
    }

    /// Trial 14: `nginx -s stop` under wrk: both workers exited with code 0, the kernel
    /// closed 35 client connections as they exited (17 + 18): a fast stop, never said
    /// graceful; a worker that closed none at code 0 cut nothing (QUIT or TERM, not told
    /// apart); without the lifecycle programs code 0 is said without either word.
    #[test]
    fn code_0_exits_that_cut_connections_are_a_fast_stop() {
        let mut r = two_exited([(None, 17), (None, 18)]);
        let text = lifecycle_section(&r);
        assert!(text.contains("\n  exits: 2 with code 0 (2 of them cut 35 client connections as they exited: a fast stop, TERM/INT as `nginx -s stop` sends; a graceful QUIT waits for its connections), 0 other codes,"), "{text}");
        assert!(
            text.contains("  code 0, 17 client connections cut (a fast stop: TERM/INT)\n"),
            "{text}"
        );
        assert!(
            text.contains("  code 0, 18 client connections cut (a fast stop: TERM/INT)\n"),
            "{text}"
        );
        assert!(!text.contains("graceful)"), "{text}");
        for w in &mut r.workers {
            w.connections_closed.as_mut().unwrap().by_worker_exit = 0;
        }
        let text = lifecycle_section(&r);
        assert!(
            text.contains("\n  exits: 2 with code 0 (none left a client connection to the kernel), 0 other codes,"),
            "{text}"
        );
        assert!(text.contains("  code 0 (no connection cut)\n"), "{text}");
        for w in &mut r.workers {
            w.connections_closed = None;
        }
        let text = lifecycle_section(&r);
        assert!(text.contains("\n  exits: 2 with code 0 (graceful QUIT or fast stop: connections cut at exit not counted), 0 other codes,"), "{text}");
        assert!(!text.contains("graceful)"), "{text}");
    }

    /// With the drain uprobe's mark: a worker that drained exited after a QUIT, one
    /// that never did after a TERM/INT, whatever it cut (a stop of idle workers cuts
    /// nothing and is still a fast stop).
    #[test]
    fn the_drain_mark_tells_a_quit_from_a_stop() {
        let mut r = two_exited([(Some(true), 0), (Some(false), 3)]);
        let text = lifecycle_section(&r);
        assert!(text.contains("\n  exits: 2 with code 0 (1 after a graceful QUIT, they drained; 1 a fast stop, TERM/INT as `nginx -s stop` sends, they never drained: ngx_close_idle_connections uprobe; 3 client connections cut as they exited), 0 other codes,"), "{text}");
        assert!(
            text.contains("  code 0 after a graceful QUIT (it drained)\n"),
            "{text}"
        );
        assert!(
            text.contains("  code 0, a fast stop (TERM/INT: it never drained), 3 client connections cut as it exited\n"),
            "{text}"
        );
        r.workers[1]
            .connections_closed
            .as_mut()
            .unwrap()
            .by_worker_exit = 0;
        let text = lifecycle_section(&r);
        assert!(
            text.contains("  code 0, a fast stop (TERM/INT: it never drained)\n"),
            "{text}"
        );
    }
}
