//! A recording read back (`--record FILE`): its [`Header`], interval reports and
//! summary, as data. Reading and writing the file is [`crate::io::recording`]'s.

use serde::{Deserialize, Serialize};

use super::Report;

/// First line of a recording: what was traced, where and how.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Header {
    /// Always `"header"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// [`super::SCHEMA_VERSION`] of every line in the file.
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

impl Recording {
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
