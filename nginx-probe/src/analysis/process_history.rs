//! Verdicts on the master's own history, from its error log back to its start
//! (`NginxErrorsReport::history`): workers it failed to spawn (`worker_spawn_failed`)
//! and workers that crashed (`worker_crashed`). Counted lines only: no count, no
//! verdict.

use std::collections::BTreeMap;

use super::inputs::Inputs;
use crate::model::{reloads::FailedLoad, Severity, Verdict};

/// Spawn failures at or above which `worker_spawn_failed` fires (critical).
pub const SPAWN_FAILED_MIN: u64 = 1;
/// Crashes (exits on a signal) at or above which `worker_crashed` fires (critical).
pub const CRASHED_MIN: u64 = 1;

fn history(inp: &Inputs) -> Option<&crate::model::ProcessHistoryReport> {
    inp.nginx_errors
        .as_ref()
        .filter(|e| e.readable)?
        .history
        .as_ref()
}

fn limit(v: Option<u64>) -> String {
    v.map(|v| v.to_string())
        .unwrap_or_else(|| "unlimited or unknown".into())
}

/// `worker_processes` as configured, quoted with where it is set: `" of worker_processes
/// 64 (nginx.conf:1)"`; empty when the configuration was not read or says `auto`.
fn of_configured(inp: &Inputs) -> String {
    inp.config
        .as_ref()
        .and_then(|c| c.value("worker_processes"))
        .filter(|v| v.value.parse::<u64>().is_ok())
        .map(|v| format!(" of worker_processes {}", v.quoted()))
        .unwrap_or_default()
}

/// The evidence both verdicts carry: when the master started, whether its error log was
/// read back that far, and that source.
fn history_evidence(
    h: &crate::model::ProcessHistoryReport,
) -> BTreeMap<&'static str, serde_json::Value> {
    let mut evidence = BTreeMap::new();
    evidence.insert(
        "master_started_unix_s",
        serde_json::json!(h.master_started_unix_s),
    );
    evidence.insert(
        "reached_master_start",
        serde_json::json!(h.reached_master_start),
    );
    evidence.insert(
        "source",
        serde_json::json!("error log since the master's start"),
    );
    evidence
}

/// `worker_spawn_failed`: workers nginx meant to run and does not, since the master
/// started (error log): `<call>() failed while spawning "worker process"` lines (the
/// master could not start them) and `... exited with fatal code 2 and cannot be
/// respawned` lines (spawned, failed their own init, not started again).
pub fn worker_spawn_failed(inp: &Inputs, out: &mut Vec<Verdict>) {
    let Some(h) = history(inp) else { return };
    let failed = h.workers_failed_to_spawn;
    let fatal = h.workers_exited_fatal;
    if failed + fatal < SPAWN_FAILED_MIN {
        return;
    }
    let running = inp.workers.iter().filter(|w| w.alive && w.pid > 0).count() as u64;
    let mut evidence = history_evidence(h);
    evidence.insert("workers_failed_to_spawn", serde_json::json!(failed));
    evidence.insert("workers_exited_fatal", serde_json::json!(fatal));
    evidence.insert("workers_running", serde_json::json!(running));
    evidence.insert(
        "spawn_failed_emfile_before_attach",
        serde_json::json!(h.spawn_failed_emfile_before_attach),
    );
    evidence.insert(
        "master_nofile_soft",
        serde_json::json!(h.master_nofile_soft),
    );
    evidence.insert(
        "master_nofile_hard",
        serde_json::json!(h.master_nofile_hard),
    );
    if !h.spawn_failed_by_before_attach.is_empty() {
        evidence.insert(
            "spawn_failed_by_before_attach",
            serde_json::json!(h.spawn_failed_by_before_attach),
        );
    }
    if let Some(p) = &h.master_pids_limit {
        evidence.insert("master_pids_limit", serde_json::json!(p));
    }
    let bound = if h.reached_master_start {
        String::new()
    } else {
        format!(
            " (at least: the last {} bytes read back did not reach the master's start)",
            h.bytes_read_back
        )
    };
    let fatal_said = if fatal > 0 {
        format!(
            "; {fatal} more were spawned but exited with fatal code 2 during their own start (error log: 'exited with fatal code 2 and cannot be respawned'; the line each wrote before it says why) and the master does not start them again"
        )
    } else {
        String::new()
    };
    let configured = of_configured(inp);
    let (cause, directives) = spawn_cause(h);
    out.push(Verdict::new(
        "worker_spawn_failed",
        Severity::Critical,
        evidence,
        &directives,
        format!(
            "nginx failed to spawn {failed} worker processes since the master started (error log){bound}{fatal_said}; {running} workers run{configured}{cause}"
        ),
    ));
}

/// What worker_spawn_failed says of the cause, and the directives and limits it
/// names: the failures by call and errno (read back before attach); with EMFILE, that
/// the master ran out of fds under its open-files limit (LimitNOFILE); with EAGAIN at
/// fork(), the process limit that refused it when measured (its cgroup's
/// `pids.events` counting refused forks at `pids.max`: TasksMax), else the limits it
/// may be, said unknown; otherwise the master's open-files limit, no cause named.
fn spawn_cause(h: &crate::model::ProcessHistoryReport) -> (String, Vec<&'static str>) {
    let nofile = format!(
        "the master's open-files limit: soft {}, hard {} (/proc/<master>/limits)",
        limit(h.master_nofile_soft),
        limit(h.master_nofile_hard)
    );
    if h.workers_failed_to_spawn == 0 {
        return (format!("; {nofile}"), vec!["worker_processes"]);
    }
    let by = &h.spawn_failed_by_before_attach;
    let listed: Vec<String> = by.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let mut said = String::new();
    let mut directives = vec!["worker_processes"];
    if h.spawn_failed_emfile_before_attach > 0 {
        said.push_str(&format!(
            "; {} of them failed with EMFILE: the master ran out of fds (it holds a channel socketpair, 2 fds, per worker, plus the listening sockets and logs) under its soft open-files limit of {} (hard {}); raise the master's limit (systemd LimitNOFILE=, or ulimit -n where nginx is started: worker_rlimit_nofile applies to the workers only) or lower worker_processes",
            h.spawn_failed_emfile_before_attach,
            limit(h.master_nofile_soft),
            limit(h.master_nofile_hard)
        ));
        directives.push("LimitNOFILE (the master's nofile)");
    }
    let eagain = by.get("fork() EAGAIN").copied().unwrap_or(0);
    if eagain > 0 {
        said.push_str(&format!("; {eagain} of them failed with EAGAIN at fork(): the master could not create a process, {}", fork_limit(h)));
        directives.push("TasksMax (the master's cgroup pids.max)");
    }
    if h.spawn_failed_emfile_before_attach == 0 && eagain == 0 {
        let each = if listed.is_empty() {
            "the errno of each is in the error log".to_string()
        } else {
            format!(
                "before attach, by failed call and errno: {}",
                listed.join(", ")
            )
        };
        said.push_str(&format!("; {each} ({nofile})"));
    }
    (said, directives)
}

/// Which process limit refused the master's forks, as measured: its cgroup's
/// `pids.events` counting refused forks at `pids.max` names it; else the limits an
/// EAGAIN from fork() may come from, each with its value, the one at work unknown.
fn fork_limit(h: &crate::model::ProcessHistoryReport) -> String {
    let nproc = format!(
        "the master's RLIMIT_NPROC (Max processes: soft {}, per user; not applied to root in the host)",
        limit(h.master_nproc_soft)
    );
    match &h.master_pids_limit {
        Some(p) if p.refused.is_some_and(|n| n > 0) => format!(
            "and its cgroup {} (v{}) refused {} forks at its pids.max of {} (pids.events: forks of any process in it since it was made; {} tasks in it now, pids.current): raise that limit (systemd TasksMax=, docker or podman --pids-limit, a Kubernetes pod's pids limit) or lower worker_processes",
            p.cgroup,
            p.cgroup_version,
            p.refused.unwrap_or(0),
            p.max,
            p.current.map_or("unknown".to_string(), |c| c.to_string())
        ),
        Some(p) => format!(
            "a process limit, which one is unknown: its cgroup {} sets pids.max {} with no refused fork counted (pids.events{}), {nproc}, or the kernel's kernel.threads-max",
            p.cgroup,
            p.max,
            if p.refused.is_none() { " unreadable" } else { "" }
        ),
        None => format!(
            "a process limit, which one is unknown: no pids.max is set on the master's cgroup or it is unreadable; {nproc}, or the kernel's kernel.threads-max"
        ),
    }
}

/// `worker_crashed`: `worker process N exited on signal S` lines since the master
/// started, S a crash signal (SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL; a SIGKILL or
/// SIGTERM is `worker_killed`, no crash). Critical when one was written during the
/// run; a warning when all came before attach (a past crash, not this run's).
pub fn worker_crashed(inp: &Inputs, out: &mut Vec<Verdict>) {
    let Some(h) = history(inp) else { return };
    let crashed = h.workers_crashed;
    if crashed < CRASHED_MIN {
        return;
    }
    let now = h.workers_crashed_since_attach;
    let mut evidence = history_evidence(h);
    evidence.insert("workers_crashed", serde_json::json!(crashed));
    evidence.insert("workers_crashed_since_attach", serde_json::json!(now));
    evidence.insert("workers_killed", serde_json::json!(h.workers_killed));
    if h.crash_lines_contradicted > 0 {
        evidence.insert(
            "crash_lines_contradicted",
            serde_json::json!(h.crash_lines_contradicted),
        );
    }
    let (severity, when) = if now > 0 {
        (Severity::Critical, format!("{now} of them during this run"))
    } else {
        (
            Severity::Warning,
            "all before this run: none crashed while it watched".to_string(),
        )
    };
    out.push(Verdict::new(
        "worker_crashed",
        severity,
        evidence,
        &["worker_rlimit_core", "working_directory"],
        format!(
            "{crashed} worker processes died on a crash signal (SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL) since the master started, {when} (error log); the master respawned them, and each dropped the connections it held (not counted from the log). Get a core dump (worker_rlimit_core, a writable working_directory) and check third-party modules. After a crash nginx's own gauges (stub_status active/reading/writing) keep the dead worker's connections counted: they are nginx's leaked counts, not live connections"
        ),
    ));
}

/// `config_not_loaded`: the period's last load by the master (a reload) or by a binary
/// upgrade's new master (USR2: a child of the master running its binary file) did not
/// load the configuration on disk (uretprobe `ngx_init_cycle` returned NULL), and no
/// load of theirs came after it: nginx serves on with the configuration (and, after a
/// failed upgrade, the binary) it had. nginx's reason is in its `emerg` lines of the
/// period (a configuration error `in <file>:<line>`, a `bind()` to a port another
/// process holds, a file it cannot open), counted, not quoted. Loads by other
/// processes of the binary (`nginx -t`, `nginx -s`, another master) fire nothing:
/// which configuration file they loaded is not known. `emerg` configuration lines with
/// no failed load measured fire nothing (a client can write lines into the error log;
/// another nginx can share it); where loads are not measured (the uretprobe not
/// attached, an old recording) the lines alone give the warning, saying that no failed
/// load was measured.
pub fn config_not_loaded(inp: &Inputs, out: &mut Vec<Verdict>) {
    let serving = inp.workers.iter().filter(|w| w.alive).count();
    let errors = inp.nginx_errors.as_ref().filter(|e| e.readable);
    let emerg = |class: Option<&str>| {
        errors.map_or(0, |e| {
            e.classes
                .iter()
                .filter(|(name, _)| class.is_none_or(|c| c == name.as_str()))
                .filter(|(name, _)| name.as_str() != "written_by_request")
                .filter_map(|(_, c)| c.levels.get("emerg"))
                .sum::<u64>()
        })
    };
    let loads = inp.config_loads.as_ref();
    let Some(l) = loads.filter(|l| l.unknown.is_none()) else {
        let config_emerg = emerg(Some("config"));
        if serving > 0 && config_emerg > 0 {
            let why = loads
                .and_then(|l| l.unknown.clone())
                .unwrap_or_else(|| "the recording predates them".into());
            out.push(unmeasured(config_emerg, serving, &why));
        }
        return;
    };
    let Some(which) = l.last_load_failed().filter(|_| serving > 0) else {
        return;
    };
    let mut evidence = std::collections::BTreeMap::new();
    evidence.insert("workers_running", serde_json::json!(serving));
    let all_emerg = emerg(None);
    let reason = if errors.is_none() {
        "nginx's reason is not known: its error log is not read".to_string()
    } else if all_emerg == 0 {
        "nginx's reason is not in the error log read (no emerg line in this period)".to_string()
    } else {
        evidence.insert("emerg_lines", serde_json::json!(all_emerg));
        let what = match which {
            FailedLoad::Reload => "a reload",
            FailedLoad::Upgrade => "a new master's load",
        };
        let lines = if all_emerg == 1 { "line" } else { "lines" };
        format!(
            "its error log holds {all_emerg} emerg {lines} from this period, where nginx writes why {what} failed (nginx -t runs and other writers can add lines there too)"
        )
    };
    evidence.insert("reloads_failed", serde_json::json!(l.reloads_failed));
    evidence.insert("reloads_loaded", serde_json::json!(l.reloads_loaded));
    if l.upgrades_loaded + l.upgrades_failed > 0 {
        evidence.insert("upgrades_failed", serde_json::json!(l.upgrades_failed));
        evidence.insert("upgrades_loaded", serde_json::json!(l.upgrades_loaded));
    }
    evidence.insert("source", serde_json::json!(crate::model::reloads::SOURCE));
    let quote = match (&l.last_failed_emerg, l.last_failed_pid) {
        (Some(line), Some(pid)) => {
            evidence.insert("emerg_line", serde_json::json!(line));
            let ns = l
                .last_failed_emerg_nspid
                .map(|n| format!(" (pid {n} in its pid namespace, as nginx wrote it)"))
                .unwrap_or_default();
            format!(
                "; the last emerg line process {pid}{ns} wrote in this period reads \"{line}\" (as read from the error log, not proven nginx's)"
            )
        }
        _ => String::new(),
    };
    let head = failed_load_head(l, which, serving);
    out.push(config_verdict(
        "config_not_loaded",
        evidence,
        format!(
            "{head}; {reason}{quote}. Fix what they name, then reload or upgrade again (nginx -t finds configuration errors, not a port another process holds: a bind() failure passes it)"
        ),
    ));
}

/// What failed, when, and what nginx serves with since (`serving` workers).
fn failed_load_head(
    l: &crate::model::reloads::ConfigLoadsReport,
    which: FailedLoad,
    serving: usize,
) -> String {
    let when = |t: Option<f64>| {
        t.map(|t| format!(", the last at {}", crate::model::clock::utc_datetime(t)))
            .unwrap_or_default()
    };
    match which {
        FailedLoad::Reload => format!(
            "{} of the master's {} reloads in this period did not load the configuration on disk (uretprobe ngx_init_cycle returned NULL{}) and none loaded after: nginx serves on with the configuration it had ({serving} workers running), so the change it was reloaded for is not in force",
            l.reloads_failed,
            l.reloads_failed + l.reloads_loaded,
            when(l.last_reload_failed_unix_s)
        ),
        FailedLoad::Upgrade => format!(
            "{} of {} binary upgrades in this period (USR2) failed: the new master, a child of the master running its binary file, did not load the configuration (uretprobe ngx_init_cycle returned NULL{}) and exited, and nothing loaded after: the old master serves on with the binary and configuration it had ({serving} workers running)",
            l.upgrades_failed,
            l.upgrades_failed + l.upgrades_loaded,
            when(l.last_upgrade_failed_unix_s)
        ),
    }
}

/// `config_not_loaded` from `emerg` configuration lines alone, where loads are not
/// measured (`why`).
fn unmeasured(emerg: u64, serving: usize, why: &str) -> Verdict {
    let mut evidence = std::collections::BTreeMap::new();
    evidence.insert("workers_running", serde_json::json!(serving));
    evidence.insert("config_emerg_lines", serde_json::json!(emerg));
    evidence.insert("config_loads_unknown", serde_json::json!(why));
    evidence.insert("source", serde_json::json!("nginx's error log (its `emerg` lines ending `in <file>:<line>`); configuration loads not measured"));
    config_verdict(
        "config_not_loaded",
        evidence,
        format!(
            "nginx's error log holds {emerg} configuration errors at emerg from this period; no failed load was measured (configuration loads unknown: {why}), so a reload, an nginx -s or -t run, or a line another writer put in the log may have written them. If a reload failed, nginx serves on with the configuration it had ({serving} workers running): run nginx -t, fix it, then reload"
        ),
    )
}

/// A warning about the configuration on disk.
fn config_verdict(
    id: &str,
    evidence: std::collections::BTreeMap<&'static str, serde_json::Value>,
    advice: String,
) -> Verdict {
    Verdict::new(
        id,
        Severity::Warning,
        evidence,
        &["nginx.conf (nginx -t)"],
        advice,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::verdict::{judge, WorkerInput};
    use crate::model::{NginxErrorsReport, ProcessHistoryReport};

    fn inputs(failed: u64, emfile: u64, crashed: u64, running: usize) -> Inputs {
        Inputs {
            workers: (0..running)
                .map(|i| WorkerInput {
                    pid: 100 + i as u32,
                    alive: true,
                    ..WorkerInput::default()
                })
                .collect(),
            nginx_errors: Some(NginxErrorsReport {
                readable: true,
                history: Some(ProcessHistoryReport {
                    master_started_unix_s: 1_796_000_000,
                    reached_master_start: true,
                    workers_failed_to_spawn: failed,
                    spawn_failed_emfile_before_attach: emfile,
                    workers_crashed: crashed,
                    master_nofile_soft: Some(64),
                    master_nofile_hard: Some(4096),
                    ..ProcessHistoryReport::default()
                }),
                ..NginxErrorsReport::default()
            }),
            ..Inputs::default()
        }
    }

    /// The master's reload loaded at 100 s; an upgrade's new master failed at `u`.
    fn loads(u: f64) -> crate::model::reloads::ConfigLoadsReport {
        crate::model::reloads::ConfigLoadsReport {
            reloads_loaded: 1,
            last_reload_loaded_unix_s: Some(100.0),
            upgrades_failed: 1,
            last_upgrade_failed_unix_s: Some(u),
            others_failed: 3,
            ..Default::default()
        }
    }

    #[test]
    fn a_failed_upgrade_is_said_as_one_unless_a_load_came_after_it() {
        let mut inp = inputs(0, 0, 0, 2);
        inp.config_loads = Some(loads(101.0));
        let v = judge(&inp);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].id, "config_not_loaded");
        assert_eq!(v[0].evidence["upgrades_failed"], 1);
        assert_eq!(v[0].evidence["reloads_failed"], 0);
        assert!(v[0].advice.starts_with("1 of 1 binary upgrades in this period (USR2) failed: the new master, a child of the master running its binary file, did not load the configuration (uretprobe ngx_init_cycle returned NULL, the last at 1970-01-01 00:01:41 UTC) and exited, and nothing loaded after: the old master serves on with the binary and configuration it had (2 workers running); nginx's reason is not in the error log read (no emerg line in this period). Fix what they name, then reload or upgrade again"), "{}", v[0].advice);
        // The reload at 100 s came after an upgrade that failed at 99 s: in force.
        inp.config_loads = Some(loads(99.0));
        assert!(judge(&inp).is_empty());
        // Other processes' failures alone fire nothing.
        inp.config_loads = Some(crate::model::reloads::ConfigLoadsReport {
            others_failed: 3,
            ..Default::default()
        });
        assert!(judge(&inp).is_empty());
    }

    #[test]
    fn spawn_failures_fire_from_one_and_name_the_masters_limit() {
        let v = judge(&inputs(36, 36, 0, 28));
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].id, "worker_spawn_failed");
        assert_eq!(v[0].severity, Severity::Critical);
        assert_eq!(v[0].evidence["workers_failed_to_spawn"], 36);
        assert_eq!(v[0].evidence["workers_running"], 28);
        assert!(v[0].advice.starts_with(
            "nginx failed to spawn 36 worker processes since the master started (error log); 28 workers run; 36 of them failed with EMFILE"
        ), "{}", v[0].advice);
        assert!(v[0]
            .advice
            .contains("soft open-files limit of 64 (hard 4096)"));
        // A failure without EMFILE: no fd cause named.
        let v = judge(&inputs(1, 0, 0, 2));
        assert!(!v[0].advice.contains("ran out of fds"), "{}", v[0].advice);
        assert!(judge(&inputs(0, 0, 0, 2)).is_empty());
    }

    /// nginx 1.22 with worker_processes 4 in a cgroup of pids.max 3 (this machine): 2
    /// `fork() failed ... (11: Resource temporarily unavailable)` lines, pids.events
    /// `max 2`. The cgroup's refusals name TasksMax, never the fd limit; without them
    /// the process limit is said unknown.
    #[test]
    fn fork_eagain_names_the_cgroup_s_pids_limit_only_when_it_refused() {
        let mut inp = inputs(2, 0, 0, 2);
        let pids = crate::model::PidsLimitReport {
            cgroup: "/np-pids".into(),
            cgroup_version: 1,
            max: 3,
            current: Some(3),
            refused: Some(2),
        };
        let h = inp.nginx_errors.as_mut().unwrap().history.as_mut().unwrap();
        h.spawn_failed_by_before_attach = [("fork() EAGAIN".to_string(), 2)].into();
        h.master_pids_limit = Some(pids.clone());
        let v = judge(&inp);
        assert_eq!(v[0].id, "worker_spawn_failed");
        assert!(v[0].advice.contains("; 2 of them failed with EAGAIN at fork(): the master could not create a process, and its cgroup /np-pids (v1) refused 2 forks at its pids.max of 3 (pids.events"), "{}", v[0].advice);
        assert_eq!(
            v[0].directives,
            [
                "worker_processes",
                "TasksMax (the master's cgroup pids.max)"
            ]
        );
        assert!(!v[0].advice.contains("open-files"), "{}", v[0].advice);
        // No refusal counted: unknown, with the candidates.
        let h = inp.nginx_errors.as_mut().unwrap().history.as_mut().unwrap();
        h.master_pids_limit = Some(crate::model::PidsLimitReport {
            refused: Some(0),
            ..pids
        });
        let v = judge(&inp);
        assert!(v[0].advice.contains("the master could not create a process, a process limit, which one is unknown: its cgroup /np-pids sets pids.max 3 with no refused fork counted"), "{}", v[0].advice);
        // Another errno: listed, no cause named.
        let h = inp.nginx_errors.as_mut().unwrap().history.as_mut().unwrap();
        h.spawn_failed_by_before_attach = [("fork() ENOMEM".to_string(), 2)].into();
        let v = judge(&inp);
        assert!(v[0].advice.contains("; before attach, by failed call and errno: fork() ENOMEM 2 (the master's open-files limit"), "{}", v[0].advice);
        assert_eq!(v[0].directives, ["worker_processes"]);
    }

    /// [`inputs`] with one worker exited with fatal code 2 at its start.
    fn with_a_fatal_exit(failed: u64, emfile: u64, running: usize) -> Inputs {
        let mut inp = inputs(failed, emfile, 0, running);
        if let Some(h) = inp.nginx_errors.as_mut().and_then(|e| e.history.as_mut()) {
            h.workers_exited_fatal = 1;
        }
        inp
    }

    #[test]
    fn fatal_exits_at_start_are_workers_that_do_not_run() {
        let v = judge(&with_a_fatal_exit(30, 30, 33));
        assert_eq!(v[0].id, "worker_spawn_failed");
        assert_eq!(v[0].evidence["workers_exited_fatal"], 1);
        assert!(
            v[0].advice.starts_with(
                "nginx failed to spawn 30 worker processes since the master started (error log); 1 more were spawned but exited with fatal code 2 during their own start"
            ),
            "{}",
            v[0].advice
        );
        assert!(v[0]
            .advice
            .contains("; 33 workers run; 30 of them failed with EMFILE"));
        // Fatal exits alone still fire: fewer workers run than nginx meant.
        let v = judge(&with_a_fatal_exit(0, 0, 3));
        assert_eq!(v[0].id, "worker_spawn_failed");
        assert!(!v[0].advice.contains("ran out of fds"), "{}", v[0].advice);
    }

    #[test]
    fn crashes_fire_from_one() {
        let v = judge(&inputs(0, 0, 1, 2));
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].id, "worker_crashed");
        assert!(v[0].advice.contains("nginx's leaked counts"));
        assert!(judge(&inputs(0, 0, 0, 2)).is_empty());
    }

    /// A crash written before attach is a warning about the past; one during the run
    /// is critical; a SIGKILL is no crash at all.
    #[test]
    fn crashes_before_attach_are_a_warning_and_kills_no_crash() {
        let v = judge(&inputs(0, 0, 2, 2));
        assert_eq!(v[0].id, "worker_crashed");
        assert_eq!(v[0].severity, Severity::Warning);
        assert!(
            v[0].advice.starts_with("2 worker processes died on a crash signal (SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL) since the master started, all before this run: none crashed while it watched (error log)"),
            "{}",
            v[0].advice
        );
        assert!(!v[0].advice.contains("requests they held failed"));
        let mut inp = inputs(0, 0, 2, 2);
        if let Some(h) = inp.nginx_errors.as_mut().and_then(|e| e.history.as_mut()) {
            h.workers_crashed_since_attach = 1;
        }
        let v = judge(&inp);
        assert_eq!(v[0].severity, Severity::Critical);
        assert!(v[0]
            .advice
            .contains(", 1 of them during this run (error log)"));
        let mut inp = inputs(0, 0, 0, 2);
        if let Some(h) = inp.nginx_errors.as_mut().and_then(|e| e.history.as_mut()) {
            h.workers_killed = 3;
        }
        assert!(judge(&inp).is_empty());
    }
}
