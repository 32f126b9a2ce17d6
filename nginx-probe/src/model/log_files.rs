//! Log files the workers write that are no longer where nginx's configuration puts
//! them: a rotation renamed or deleted the file and nobody told nginx to reopen
//! (`nginx -s reopen`, SIGUSR1). Pure: built from two snapshots' samples of the
//! workers' log fds and of the configured paths (see `collect::log_files`).

use serde::{Deserialize, Serialize};

/// One log file a worker holds open, at a snapshot. Source: `/proc/<pid>/fd/<fd>`
/// (readlink for the name, stat through the link for the open file itself) of the
/// fds classified as access or error log (`/proc/<pid>/fdinfo` O_APPEND, fd 2).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogFileSample {
    /// `access_log` or `error_log`.
    pub kind: &'static str,
    /// The open file's name now, as the kernel gives it (` (deleted)` stripped); raw,
    /// escaped by the renderers.
    pub path: String,
    /// Device and inode of the open file.
    pub dev: u64,
    /// Inode of the open file.
    pub ino: u64,
    /// Hard links left: 0 when the file was deleted while open.
    pub nlink: u64,
    /// Size of the open file, bytes.
    pub size: u64,
    /// Workers holding it open (host pids, at most [`MAX_PIDS`]).
    pub pids: Vec<u32>,
}

/// Worker pids kept per file.
pub const MAX_PIDS: usize = 16;

/// A log path of nginx's configuration and the file found there, at a snapshot.
/// Source: the configuration (`access_log`, `error_log` with a fixed path), stat in
/// the master's root (`/proc/<master>/root`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfiguredLog {
    /// `access_log` or `error_log`.
    pub kind: &'static str,
    /// The path nginx opens (the prefix prepended to a relative one).
    pub path: String,
    /// `file:line` of the directive (or `default`).
    pub at: String,
    /// Device and inode of the file at the path now; None when it does not exist or
    /// cannot be read.
    pub found: Option<(u64, u64)>,
}

/// The last component of a path.
fn base(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A log file the workers write that is not the file at any configured path.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct StaleLogReport {
    /// `access_log` or `error_log`.
    pub kind: String,
    /// `deleted` (no link left: its space is held until nginx closes it) or `renamed`
    /// (on disk under `path_now`, and no configured path of its kind is this file).
    pub state: String,
    /// The open file's name now (raw; renderers escape it).
    pub path_now: String,
    /// Its size, bytes (fstat through `/proc/<pid>/fd`).
    pub size_bytes: u64,
    /// Bytes it grew by in the period (the same inode's size at both snapshots); None
    /// when it was not seen at the period's start.
    pub bytes_in_period: Option<u64>,
    /// It was at another name, or still linked, at the period's start (renamed or
    /// deleted during the period): part of `bytes_in_period` was written before that,
    /// when is not measured (trial 10: 26 MB said to have gone to a renamed file, 22 MB
    /// of them after the rename).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub became_stale_in_period: bool,
    /// Workers holding it (host pids, at most [`MAX_PIDS`]).
    pub workers: Vec<u32>,
    /// The configured paths of its kind and what is there now: `path (file:line): a
    /// different file` or `... : absent`.
    pub configured: Vec<String>,
}

/// The stale log files at `cur`: deleted ones always; renamed ones when the
/// configuration was read (`configured`), no configured log is this file, and its name
/// now continues the name of a configured log that is absent or another file now
/// (`access.log` -> `access.log.1`, `access.log-20261202`). Access logs are not judged
/// renamed when some access log has variables in its path (`variable_access_paths`:
/// its files are at no configured path). `prev`: the samples at the period's start,
/// for the bytes written in it.
pub fn stale_logs(
    cur: &[LogFileSample],
    prev: Option<&[LogFileSample]>,
    configured: Option<&[ConfiguredLog]>,
    variable_access_paths: bool,
) -> Vec<StaleLogReport> {
    let mut out = Vec::new();
    let all = configured.unwrap_or_default();
    let (unheld, unmatched) = unpaired(cur, all);
    for s in cur {
        if all.iter().any(|c| c.found == Some((s.dev, s.ino))) {
            continue;
        }
        // Configured logs this file was rotated away from: its name continues theirs;
        // else, whatever its new name, the one configured log no worker holds when this
        // is the one open log at no configured path (every worker opens every
        // configured log at start, so the pair is forced).
        let mut origins: Vec<&ConfiguredLog> = all
            .iter()
            .filter(|c| base(&s.path).starts_with(base(&c.path)))
            .collect();
        if origins.is_empty() && s.nlink > 0 && unheld.len() == 1 && unmatched == 1 {
            origins = unheld.clone();
        }
        let kind = origins.first().map_or(s.kind, |c| c.kind);
        let state = if s.nlink == 0 {
            "deleted"
        } else if !(origins.is_empty() || (kind == "access_log" && variable_access_paths)) {
            "renamed"
        } else {
            continue;
        };
        let before = prev.and_then(|p| p.iter().find(|q| (q.dev, q.ino) == (s.dev, s.ino)));
        let bytes_in_period = before.map(|q| s.size.saturating_sub(q.size));
        // It became stale in the period when it was the live log at the start (at a
        // configured path, still linked): a file already rotated away and renamed or
        // deleted again took every byte of the period as a stale file. With no
        // configured path known, assumed so (the bytes then said as a ceiling).
        let became_stale_in_period = before.is_some_and(|q| {
            let was_live = all.is_empty() || all.iter().any(|c| c.path == q.path);
            was_live && q.nlink > 0 && (q.path != s.path || s.nlink == 0)
        });
        out.push(StaleLogReport {
            kind: kind.to_string(),
            state: state.to_string(),
            path_now: s.path.clone(),
            size_bytes: s.size,
            bytes_in_period,
            became_stale_in_period,
            workers: s.pids.clone(),
            configured: origins
                .iter()
                .map(|c| {
                    let now = if c.found.is_some() {
                        "a different file"
                    } else {
                        "absent"
                    };
                    format!("{} ({}): {now}", c.path, c.at)
                })
                .collect(),
        });
    }
    out
}

/// The configured logs whose file at the configured path no worker holds open (moved,
/// deleted or replaced since nginx opened it), and how many open logs that still have
/// a name (not deleted) are at no configured path.
fn unpaired<'a>(
    cur: &[LogFileSample],
    all: &'a [ConfiguredLog],
) -> (Vec<&'a ConfiguredLog>, usize) {
    let unheld = all
        .iter()
        .filter(|c| !cur.iter().any(|s| c.found == Some((s.dev, s.ino))))
        .collect();
    let unmatched = cur
        .iter()
        .filter(|s| s.nlink > 0 && !all.iter().any(|c| c.found == Some((s.dev, s.ino))))
        .count();
    (unheld, unmatched)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(kind: &'static str, path: &str, ino: u64, nlink: u64, size: u64) -> LogFileSample {
        LogFileSample {
            kind,
            path: path.into(),
            dev: 8,
            ino,
            nlink,
            size,
            pids: vec![11, 12],
        }
    }

    fn conf(kind: &'static str, path: &str, found: Option<u64>) -> ConfiguredLog {
        ConfiguredLog {
            kind,
            path: path.into(),
            at: "nginx.conf:9".into(),
            found: found.map(|i| (8, i)),
        }
    }

    #[test]
    fn renamed_and_deleted_logs_with_the_bytes_written_there() {
        let prev = [sample("access_log", "/l/access.log", 5, 1, 1000)];
        // mv access.log access.log.1, logrotate's create made a new access.log (ino 6).
        let cur = [
            sample("access_log", "/l/access.log.1", 5, 1, 4096),
            sample("error_log", "/l/error.log", 7, 1, 10),
        ];
        let configured = [
            conf("access_log", "/l/access.log", Some(6)),
            conf("error_log", "/l/error.log", Some(7)),
        ];
        let v = stale_logs(&cur, Some(&prev), Some(&configured), false);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].state, "renamed");
        assert_eq!(v[0].path_now, "/l/access.log.1");
        assert_eq!(v[0].bytes_in_period, Some(3096));
        assert!(v[0].became_stale_in_period);
        assert_eq!(v[0].workers, [11, 12]);
        // Already rotated away at the start and renamed again (access.log.1 ->
        // access.log.2): every byte of the period went to a stale file.
        let again = [sample("access_log", "/l/access.log.2", 5, 1, 4096)];
        let was = [sample("access_log", "/l/access.log.1", 5, 1, 1000)];
        let v = stale_logs(&again, Some(&was), Some(&configured), false);
        assert_eq!((v.len(), v[0].became_stale_in_period), (1, false));
        // ...or deleted then: the same.
        let deleted = [sample("access_log", "/l/access.log.1", 5, 0, 4096)];
        let v = stale_logs(&deleted, Some(&was), Some(&configured), false);
        assert_eq!(
            (v[0].state.as_str(), v[0].became_stale_in_period),
            ("deleted", false)
        );
        assert_eq!(
            v[0].configured,
            ["/l/access.log (nginx.conf:9): a different file"]
        );
        // Variable access-log paths: a file at no configured path is not judged...
        assert!(stale_logs(&cur, Some(&prev), Some(&configured), true).is_empty());
        // ...nor without the configuration, but a deleted file always is.
        assert!(stale_logs(&cur, None, None, false).is_empty());
        let gone = [sample("access_log", "/l/access.log", 5, 0, 1500)];
        let v = stale_logs(&gone, Some(&prev), None, false);
        assert_eq!(v[0].state, "deleted");
        assert_eq!(v[0].bytes_in_period, Some(500));
        assert!(v[0].configured.is_empty());
        // Not seen at the period's start: bytes unknown, not zero.
        assert_eq!(
            stale_logs(&gone, None, None, false)[0].bytes_in_period,
            None
        );
        // The file at its configured path: nothing to say.
        let fine = [sample("access_log", "/l/access.log", 6, 1, 9)];
        assert!(stale_logs(&fine, None, Some(&configured), false).is_empty());
        // A server's own error log (O_APPEND, so sampled as an access log) at its
        // configured path, and an appended file no log directive names: neither is
        // stale.
        let mut more = configured.to_vec();
        more.push(conf("error_log", "/l/vhost-error.log", Some(9)));
        let others = [
            sample("access_log", "/l/vhost-error.log", 9, 1, 9),
            sample("access_log", "/l/module.out", 10, 1, 9),
        ];
        assert!(stale_logs(&others, None, Some(&more), false).is_empty());
        // A rotated server error log is said as an error log, from its origin.
        let rotated = [sample("access_log", "/l/vhost-error.log.1", 9, 1, 9)];
        let mut moved = configured.to_vec();
        moved.push(conf("error_log", "/l/vhost-error.log", None));
        let v = stale_logs(&rotated, None, Some(&moved), false);
        assert_eq!(
            (v[0].kind.as_str(), v[0].state.as_str()),
            ("error_log", "renamed")
        );
        assert_eq!(
            v[0].configured,
            ["/l/vhost-error.log (nginx.conf:9): absent"]
        );
    }

    #[test]
    fn a_log_renamed_to_any_name_is_paired_with_the_configured_log_no_worker_holds() {
        // mv access.log "x\x1b[2Jy": no name continues access.log, but it is the one
        // open log at no configured path, and access.log is the one configured log no
        // worker holds.
        let cur = [
            sample("access_log", "/l/x\x1b[2Jy", 5, 1, 4096),
            sample("error_log", "/l/error.log", 7, 1, 10),
        ];
        let configured = [
            conf("access_log", "/l/access.log", None),
            conf("error_log", "/l/error.log", Some(7)),
        ];
        let v = stale_logs(&cur, None, Some(&configured), false);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(
            (v[0].kind.as_str(), v[0].state.as_str()),
            ("access_log", "renamed")
        );
        assert_eq!(v[0].configured, ["/l/access.log (nginx.conf:9): absent"]);
        // Two open logs at no configured path: which one moved is not known.
        let two = [
            cur[0].clone(),
            sample("access_log", "/l/other", 8, 1, 1),
            cur[1].clone(),
        ];
        assert!(stale_logs(&two, None, Some(&configured), false).is_empty());
        // Every configured log held: an appended file at another path is not a log moved.
        let held = [
            conf("access_log", "/l/access.log", Some(5)),
            configured[1].clone(),
        ];
        let extra = [
            cur[0].clone(),
            cur[1].clone(),
            sample("access_log", "/l/m.out", 9, 1, 1),
        ];
        assert!(stale_logs(&extra, None, Some(&held), false).is_empty());
    }
}
