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

/// The configured logs of `kind` (their paths are fixed: see `collect::log_files`).
fn fixed_paths<'a>(configured: &'a [ConfiguredLog], kind: &str) -> Vec<&'a ConfiguredLog> {
    configured.iter().filter(|c| c.kind == kind).collect()
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
    /// Workers holding it (host pids, at most [`MAX_PIDS`]).
    pub workers: Vec<u32>,
    /// The configured paths of its kind and what is there now: `path (file:line): a
    /// different file` or `... : absent`.
    pub configured: Vec<String>,
}

/// The stale log files at `cur`: deleted ones always; renamed ones only when the
/// configuration was read, every configured log of that kind has a fixed path
/// (`variable_paths` false for access logs), and none of them is this file.
/// `prev`: the samples at the period's start, for the bytes written in it.
pub fn stale_logs(
    cur: &[LogFileSample],
    prev: Option<&[LogFileSample]>,
    configured: Option<&[ConfiguredLog]>,
    variable_access_paths: bool,
) -> Vec<StaleLogReport> {
    let mut out = Vec::new();
    for s in cur {
        let of_kind = configured.map(|c| fixed_paths(c, s.kind));
        if of_kind
            .as_ref()
            .is_some_and(|k| k.iter().any(|c| c.found == Some((s.dev, s.ino))))
        {
            continue;
        }
        let judgeable = of_kind.as_ref().is_some_and(|k| !k.is_empty())
            && !(s.kind == "access_log" && variable_access_paths);
        let state = if s.nlink == 0 {
            "deleted"
        } else if judgeable {
            "renamed"
        } else {
            continue;
        };
        let bytes_in_period = prev.and_then(|p| {
            p.iter()
                .find(|q| (q.dev, q.ino) == (s.dev, s.ino))
                .map(|q| s.size.saturating_sub(q.size))
        });
        out.push(StaleLogReport {
            kind: s.kind.to_string(),
            state: state.to_string(),
            path_now: s.path.clone(),
            size_bytes: s.size,
            bytes_in_period,
            workers: s.pids.clone(),
            configured: of_kind
                .unwrap_or_default()
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
        assert_eq!(v[0].workers, [11, 12]);
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
    }
}
