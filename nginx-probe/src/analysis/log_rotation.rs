//! `log_not_reopened`: the workers write a log file that a rotation renamed or
//! deleted, and nginx was never told to reopen its logs (case 22 of the shared cases).
//! Judged on the report's `stale_logs` (fstat of the workers' log fds through
//! `/proc/<pid>/fd` against the files at the configured paths); nothing else fires it.

use std::collections::BTreeMap;

use crate::model::{log_files::StaleLogReport, Severity, Verdict};

/// Stale log files listed in one verdict's advice, at most.
pub const MAX_LISTED: usize = 4;

fn said(s: &StaleLogReport) -> String {
    let what = match s.state.as_str() {
        "deleted" => "a deleted file (its disk space stays used while nginx holds it, and what is written there is lost with it)".to_string(),
        _ if s.configured.is_empty() => "a renamed file".to_string(),
        _ => format!("a renamed file, not the one at its configured path ({})", s.configured.join("; ")),
    };
    let bytes = match s.bytes_in_period {
        Some(b) if s.became_stale_in_period => format!(
            "the file grew {b} bytes in this period, in which it was {}: at most {b} went there after that (when is not measured)",
            if s.state == "deleted" { "deleted" } else { "renamed" }
        ),
        Some(b) => format!("{b} bytes went there in this period"),
        None => {
            "the bytes written there in this period are unknown (first seen at its end)".to_string()
        }
    };
    let n = s.workers.len();
    format!(
        "{n} worker{} write{} their {} to {}, {what}: {bytes} (file size, fstat through /proc/<pid>/fd; {} bytes now)",
        if n == 1 { "" } else { "s" },
        if n == 1 { "s" } else { "" },
        s.kind.replace('_', " "),
        s.path_now,
        s.size_bytes
    )
}

/// `log_not_reopened`: critical when a deleted file is written, else warning.
pub fn log_not_reopened(stale: &[StaleLogReport], out: &mut Vec<Verdict>) {
    if stale.is_empty() {
        return;
    }
    let deleted = stale.iter().any(|s| s.state == "deleted");
    let mut evidence = BTreeMap::new();
    evidence.insert("stale_logs", serde_json::json!(stale.len()));
    evidence.insert(
        "files",
        serde_json::json!(stale
            .iter()
            .take(MAX_LISTED)
            .map(|s| serde_json::json!({
                "kind": s.kind,
                "state": s.state,
                "path_now": s.path_now,
                "bytes_in_period": s.bytes_in_period,
                "became_stale_in_period": s.became_stale_in_period,
                "workers": s.workers.len(),
            }))
            .collect::<Vec<_>>()),
    );
    evidence.insert(
        "source",
        serde_json::json!("/proc/<pid>/fd of each worker (readlink, fstat) and the configured paths in the master's root"),
    );
    let mut parts: Vec<String> = stale.iter().take(MAX_LISTED).map(said).collect();
    if stale.len() > MAX_LISTED {
        parts.push(format!("{} more files", stale.len() - MAX_LISTED));
    }
    // The directives of the kinds of log that are stale, and what happened to them as
    // measured (moved, deleted, or both), never a rotation assumed.
    let mut directives: Vec<&str> = ["access_log", "error_log"]
        .into_iter()
        .filter(|k| stale.iter().any(|s| s.kind == *k))
        .collect();
    directives.push("nginx -s reopen (logrotate postrotate)");
    let renamed = stale.iter().any(|s| s.state != "deleted");
    let happened = match (renamed, deleted) {
        (true, true) => "Its logs were moved and deleted",
        (false, true) => "The log was deleted",
        _ => "The log was moved",
    };
    out.push(Verdict::new(
        "log_not_reopened",
        if deleted {
            Severity::Critical
        } else {
            Severity::Warning
        },
        evidence,
        &directives,
        format!(
            "{}. {happened} while nginx held it open, and nginx was not told to reopen: run `nginx -s reopen` (SIGUSR1 to the master) now; where a rotation does this, reopen in its postrotate step (logrotate: `postrotate` ... `nginx -s reopen` ... `endscript`), or rotate with `copytruncate`",
            parts.join("; ")
        ),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stale(state: &str, bytes: Option<u64>, configured: &[&str]) -> StaleLogReport {
        StaleLogReport {
            kind: "access_log".into(),
            state: state.into(),
            path_now: "/l/access.log.1".into(),
            size_bytes: 4096,
            bytes_in_period: bytes,
            became_stale_in_period: false,
            workers: vec![11, 12],
            configured: configured.iter().map(|c| c.to_string()).collect(),
        }
    }

    #[test]
    fn a_renamed_log_warns_and_a_deleted_one_is_critical() {
        let mut out = Vec::new();
        log_not_reopened(&[], &mut out);
        assert!(out.is_empty());
        log_not_reopened(
            &[stale(
                "renamed",
                Some(3096),
                &["/l/access.log (nginx.conf:9): a different file"],
            )],
            &mut out,
        );
        assert_eq!(out[0].id, "log_not_reopened");
        assert_eq!(out[0].severity, Severity::Warning);
        assert!(out[0].advice.starts_with(
            "2 workers write their access log to /l/access.log.1, a renamed file, not the one at its configured path (/l/access.log (nginx.conf:9): a different file): 3096 bytes went there in this period"
        ), "{}", out[0].advice);
        assert!(out[0].advice.contains("`nginx -s reopen`"));
        // Trial 10: renamed during the period, part of the growth came before.
        let mut s = stale("renamed", Some(3096), &[]);
        s.became_stale_in_period = true;
        let mut out = Vec::new();
        log_not_reopened(&[s], &mut out);
        assert!(out[0].advice.contains("the file grew 3096 bytes in this period, in which it was renamed: at most 3096 went there after that (when is not measured)"), "{}", out[0].advice);
        let mut out = Vec::new();
        log_not_reopened(&[stale("deleted", None, &[])], &mut out);
        assert_eq!(out[0].severity, Severity::Critical);
        assert!(out[0].advice.contains("a deleted file"));
        assert!(out[0].advice.contains("unknown"), "{}", out[0].advice);
        assert!(out[0]
            .advice
            .contains(". The log was deleted while nginx held it open"));
        assert_eq!(out[0].directives[0], "access_log");
        // Only the error log was deleted: no access_log directive, no rotation assumed.
        let mut err = stale("deleted", Some(11845), &[]);
        err.kind = "error_log".into();
        let mut out = Vec::new();
        log_not_reopened(&[err], &mut out);
        assert_eq!(
            out[0].directives,
            ["error_log", "nginx -s reopen (logrotate postrotate)"]
        );
        assert!(
            !out[0].advice.contains("A rotation moved"),
            "{}",
            out[0].advice
        );
    }
}
