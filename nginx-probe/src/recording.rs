//! Recordings (`--record FILE`): JSON lines, one [`Header`] describing the run, then one
//! [`Report`] per interval, then the summary [`Report`]. The reports are exactly the
//! documents `--json` prints, so a captured `--json --interval N` stdout (no header) reads
//! back too. Parsing is pure: unit tests feed it text.

use serde::{Deserialize, Serialize};

use crate::model::{Report, SCHEMA_VERSION};

/// First line of a recording: what was traced, where and how.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Header {
    /// Always `"header"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// [`SCHEMA_VERSION`] of every line in the file.
    pub schema: u32,
    /// `nginx-probe <version>` that wrote it.
    pub tool: String,
    /// Host name (`/proc/sys/kernel/hostname`).
    pub host: String,
    /// Kernel release (`/proc/sys/kernel/osrelease`).
    pub kernel: String,
    /// Online CPUs.
    pub cpus: usize,
    /// nginx version found in the master's binary (`nginx/1.22.1`), when found.
    pub nginx_version: Option<String>,
    /// The master's process title (`nginx: master process /usr/sbin/nginx -c ...`).
    pub master_title: String,
    /// Host pid of the master.
    pub master_pid: u32,
    /// Host pids of the workers at attach.
    pub workers: Vec<u32>,
    /// Wall clock at attach, seconds since the Unix epoch.
    pub started_unix_s: f64,
    /// Options in force.
    pub options: Options,
}

/// The options of a recorded run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Options {
    /// Seconds between interval lines.
    pub interval_s: f64,
    /// Traced syscalls.
    pub syscalls: Vec<String>,
    /// Whether exact request counting (uprobes) was asked for.
    pub uprobes: bool,
    /// The command line, program name first.
    pub argv: Vec<String>,
}

/// Which interval reports a read keeps in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// Every one (compare's noise estimate, `report --intervals`, the HTML timeline).
    All,
    /// Only the last (the report of a cut-short run): flat memory for any length.
    Last,
}

/// A recording read back.
#[derive(Clone, Debug)]
pub struct Recording {
    /// The header, absent in a captured `--json` stdout.
    pub header: Option<Header>,
    /// Interval reports in file order (only the last with [`Keep::Last`]).
    pub intervals: Vec<Report>,
    /// Interval lines in the file.
    pub interval_count: usize,
    /// The summary, absent when the run was cut short (SIGKILL, a crash, a full disk).
    pub summary: Option<Report>,
    /// A last line that was cut off mid-write and skipped.
    pub truncated_tail: bool,
}

/// Why a recording could not be read. Each renders as one line.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    /// A line is not a report of this schema.
    #[error("{path}:{line}: not an nginx-probe recording line ({reason})")]
    BadLine {
        path: String,
        line: usize,
        reason: String,
    },
    /// Written by a newer nginx-probe.
    #[error("{path}: recorded with schema {found}, this nginx-probe reads schema {SCHEMA_VERSION}: use a newer nginx-probe")]
    Schema { path: String, found: u64 },
    /// No report in the file.
    #[error("{path}: no reports in it (an empty recording, or not a recording)")]
    Empty { path: String },
}

impl Recording {
    /// Parses a recording's text, keeping every interval. `path` is only used in error
    /// messages.
    ///
    /// Errors: a line that is not JSON or not a report/header (except a last line
    /// without its newline, which is what a crash mid-write leaves, and is skipped), a
    /// schema newer than this binary's, or no report at all.
    #[cfg(test)]
    pub fn parse(path: &str, text: &str) -> Result<Recording, RecordingError> {
        Recording::parse_from(path, text.as_bytes(), Keep::All)
    }

    /// Parses a recording line by line from `reader`, holding one line at a time and,
    /// with [`Keep::Last`], only the last interval: memory stays flat however long the
    /// recording. Errors as [`Recording::parse`].
    pub fn parse_from(
        path: &str,
        mut reader: impl std::io::BufRead,
        keep: Keep,
    ) -> Result<Recording, RecordingError> {
        let mut rec = Recording {
            header: None,
            intervals: Vec::new(),
            interval_count: 0,
            summary: None,
            truncated_tail: false,
        };
        let mut line = String::new();
        let mut n = 0;
        loop {
            line.clear();
            n += 1;
            let bad = |reason: String| RecordingError::BadLine {
                path: path.to_string(),
                line: n,
                reason,
            };
            match reader.read_line(&mut line) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => return Err(bad(e.to_string())),
            }
            if line.trim().is_empty() {
                continue;
            }
            let v: serde_json::Value = match serde_json::from_str(&line) {
                Ok(v) => v,
                // Only the last line can lack its newline: cut off mid-write.
                Err(_) if !line.ends_with('\n') => {
                    rec.truncated_tail = true;
                    continue;
                }
                Err(e) => return Err(bad(e.to_string())),
            };
            let schema = v.get("schema").and_then(|s| s.as_u64()).unwrap_or(0);
            if schema > SCHEMA_VERSION as u64 {
                return Err(RecordingError::Schema {
                    path: path.to_string(),
                    found: schema,
                });
            }
            match v.get("type").and_then(|t| t.as_str()) {
                Some("header") => {
                    rec.header = Some(serde_json::from_value(v).map_err(|e| bad(e.to_string()))?)
                }
                Some("interval") => {
                    let r: Report = serde_json::from_value(v).map_err(|e| bad(e.to_string()))?;
                    if keep == Keep::Last {
                        rec.intervals.clear();
                    }
                    rec.intervals.push(r);
                    rec.interval_count += 1;
                }
                Some("summary") => {
                    rec.summary = Some(serde_json::from_value(v).map_err(|e| bad(e.to_string()))?)
                }
                other => return Err(bad(format!("unknown type {other:?}"))),
            }
        }
        if rec.interval_count == 0 && rec.summary.is_none() {
            return Err(RecordingError::Empty {
                path: path.to_string(),
            });
        }
        Ok(rec)
    }

    /// Reads and parses the recording at `path`, keeping what `keep` says.
    pub fn load(path: &std::path::Path, keep: Keep) -> Result<Recording, RecordingError> {
        let shown = path.display().to_string();
        if path.is_dir() {
            return Err(RecordingError::Read {
                path: shown,
                source: std::io::Error::other("it is a directory, not a recording"),
            });
        }
        let f = std::fs::File::open(path).map_err(|source| RecordingError::Read {
            path: shown.clone(),
            source,
        })?;
        Recording::parse_from(&shown, std::io::BufReader::new(f), keep)
    }

    /// The report that stands for the whole run: the summary, or when the run was cut
    /// short, the last interval (with a note saying so).
    pub fn whole_run(&self) -> (&Report, Option<String>) {
        match (&self.summary, self.intervals.last()) {
            (Some(s), _) => (s, None),
            (None, Some(last)) => (
                last,
                Some(format!(
                    "the recording has no summary (the run was cut short): showing its last interval, the {} recorded (--intervals shows them all)",
                    ordinal(self.interval_count)
                )),
            ),
            (None, None) => unreachable!("parse rejects recordings without reports"),
        }
    }
}

/// `1st`, `2nd`, `3rd`, `4th`, ... `11th`, `21st`.
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// Host name and kernel release, from `/proc/sys/kernel/{hostname,osrelease}`.
pub fn host_and_kernel() -> (String, String) {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into())
    };
    (
        read("/proc/sys/kernel/hostname"),
        read("/proc/sys/kernel/osrelease"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report_line(kind: &str, accepts: u64) -> String {
        let w = serde_json::json!({
            "pid": 10, "nspid": [10], "alive": true, "accepts": accepts, "accept_share": 1.0,
            "accept_errors": {"EMFILE": 0}, "requests": {"count": accepts, "source": "writev_estimate",
            "per_s": 1.0, "per_connection": 1.0, "syscalls_per_request": {}},
            "fds": {"open": 5, "peak": 6, "limit": 1024},
            "event_loop": {"iterations": 1, "busy_ns": 1, "busy_share": 0.1, "p99_iteration_ns": 1, "max_iteration_ns": 1},
            "cpu_s": 0.1, "accepted_then_closed": 0, "writes": {}, "syscalls": {}
        });
        serde_json::json!({
            "schema": 1, "verdicts": [], "type": kind, "time_unix_s": 1.0, "master_pid": 9,
            "master_nspid": [9], "duration_s": 1.0, "workers": [w], "listen": [], "logs": {},
            "drops": {}, "traced_syscalls": ["accept4"], "missing_tracepoints": [], "events": []
        })
        .to_string()
            + "\n"
    }

    #[test]
    fn reads_intervals_and_summary_and_tolerates_a_cut_last_line() {
        let text =
            report_line("interval", 3) + &report_line("interval", 4) + &report_line("summary", 7);
        let r = Recording::parse("r", &text).unwrap();
        assert!(r.header.is_none());
        assert_eq!(r.intervals.len(), 2);
        assert_eq!(r.intervals[1].workers[0].accepts, 4);
        assert_eq!(r.summary.as_ref().unwrap().workers[0].accepts, 7);
        assert!(r.whole_run().1.is_none());

        // Killed mid-write: the last line is cut and has no newline.
        let cut = report_line("interval", 3) + &report_line("summary", 7)[..40];
        let r = Recording::parse("r", &cut).unwrap();
        assert!(r.truncated_tail);
        assert!(r.summary.is_none());
        let (whole, note) = r.whole_run();
        assert_eq!(whole.workers[0].accepts, 3);
        assert!(note.unwrap().contains("no summary"));
    }

    #[test]
    fn keeping_only_the_last_interval_still_counts_them_all() {
        let text = report_line("interval", 3) + &report_line("interval", 4);
        let r = Recording::parse_from("r", text.as_bytes(), Keep::Last).unwrap();
        assert_eq!(r.interval_count, 2);
        assert_eq!(r.intervals.len(), 1);
        assert_eq!(r.intervals[0].workers[0].accepts, 4);
        assert!(r.whole_run().1.unwrap().contains("the 2nd recorded"));
    }

    #[test]
    fn rejects_what_is_not_a_recording() {
        let e = Recording::parse("x", "hello\nworld\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "x:1: not an nginx-probe recording line (expected value at line 1 column 1)"
        );
        let e = Recording::parse("x", "").unwrap_err();
        assert!(e.to_string().contains("no reports"));
        let newer = report_line("interval", 1).replace("\"schema\":1", "\"schema\":99");
        let e = Recording::parse("x", &newer).unwrap_err();
        assert!(e.to_string().contains("schema 99"), "{e}");
        let e = Recording::parse("x", "{\"type\":\"other\"}\n").unwrap_err();
        assert!(e.to_string().contains("unknown type"), "{e}");
    }
}
