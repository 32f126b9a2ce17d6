//! Recordings (`--record FILE`): JSON lines, one [`Header`] describing the run, then one
//! [`Report`] per interval, then the summary [`Report`]. The reports are exactly the
//! documents `--json` prints, so a captured `--json --interval N` stdout (no header) reads
//! back too. Parsing is pure: unit tests feed it text.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{ProbeError, UsageError};
use crate::io::output::Sink;
use crate::model::{Report, SCHEMA_VERSION};
use crate::safe;

pub use crate::error::RecordingError;
pub use crate::model::recording::{Header, Keep, Options, Recording};

/// Longest line a recording may have, bytes: far above a real report (about 5 KB per
/// worker with every syscall traced) and what bounds the memory of a read. A longer line
/// is refused without being held whole.
pub const MAX_LINE_BYTES: usize = 8 << 20;
/// Most workers a report (or a header) may list.
pub const MAX_WORKERS: usize = 1024;
/// Most events, listening sockets, verdicts, log paths or syscalls a line may list.
pub const MAX_ITEMS: usize = 4096;
/// Largest integer a recording may hold: 2^53, what an f64 holds exactly. Sums over
/// [`MAX_WORKERS`] such values stay below 2^63, so no sum over a report overflows.
pub const MAX_COUNT: u64 = 1 << 53;
/// Interval lines a read keeps with [`Keep::All`], counted in bytes of their text: 16
/// times [`MAX_LINE_BYTES`] (days of 5 s intervals for a few workers).
pub const MAX_KEPT_BYTES: usize = 16 * MAX_LINE_BYTES;

/// The field each line of a recording ends with: `,"crc32":"8 hex digits"}`, the
/// CRC-32 of the line's bytes before it (the JSON object without its closing brace).
const SEAL_KEY: &str = ",\"crc32\":\"";
/// Bytes of the seal: the key, 8 hex digits, `"}`.
const SEAL_LEN: usize = SEAL_KEY.len() + 8 + 2;

/// A JSON object's text (`{...}`, no newline) sealed for a recording: its CRC-32 added
/// as its last field (see [`SEAL_KEY`]), then a newline. A report or header is never an
/// empty object.
pub fn sealed_line(json: &str) -> String {
    let body = json.strip_suffix('}').unwrap_or(json);
    format!(
        "{body}{SEAL_KEY}{:08x}\"}}\n",
        crc32fast::hash(body.as_bytes())
    )
}

/// Checks a line's seal: Ok for a line that has none (recordings made before lines
/// were sealed, a captured `--json` stdout), and for one whose CRC-32 matches.
///
/// Errors: the checksum does not match (the line was changed after it was written:
/// an edit, or a corrupted disk).
fn check_seal(line: &[u8]) -> Result<(), String> {
    let line = line.trim_ascii_end();
    let Some(cut) = line.len().checked_sub(SEAL_LEN) else {
        return Ok(());
    };
    let (body, seal) = line.split_at(cut);
    let Some(hex) = seal
        .strip_prefix(SEAL_KEY.as_bytes())
        .and_then(|s| s.strip_suffix(b"\"}"))
        .and_then(|h| std::str::from_utf8(h).ok())
        .and_then(|h| u32::from_str_radix(h, 16).ok())
    else {
        return Ok(());
    };
    if crc32fast::hash(body) == hex {
        Ok(())
    } else {
        Err("its checksum (crc32) does not match its content: the line was changed after nginx-probe wrote it (edited, or corrupted on disk), so its numbers cannot be vouched for".into())
    }
}

/// One line read with [`read_line_bounded`].
#[derive(Debug, PartialEq, Eq)]
pub enum LineRead {
    /// No more input.
    Eof,
    /// A line (in the buffer); `true` when it ended with a newline.
    Line(bool),
    /// The line is longer than the limit; what was read of it is dropped.
    TooLong,
}

/// Reads one line into `buf` (cleared first), holding at most `max` bytes of it: a line
/// longer than that (or a file of zeros without newlines) returns
/// [`LineRead::TooLong`] after reading `max + 1` bytes, never buffering it whole.
pub fn read_line_bounded(
    reader: &mut impl std::io::BufRead,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<LineRead> {
    buf.clear();
    loop {
        let avail = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            return Ok(if buf.is_empty() {
                LineRead::Eof
            } else {
                LineRead::Line(false)
            });
        }
        let (take, done) = match avail.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (avail.len(), false),
        };
        if buf.len() + take > max + usize::from(done) {
            reader.consume(take);
            buf.clear();
            return Ok(LineRead::TooLong);
        }
        buf.extend_from_slice(&avail[..take]);
        reader.consume(take);
        if done {
            return Ok(LineRead::Line(true));
        }
    }
}

/// Walks a JSON document without keeping it, refusing integers beyond [`MAX_COUNT`] and
/// floats beyond it (or not finite): what the reader checks before a typed parse.
struct NumberScan;

impl<'de> serde::de::DeserializeSeed<'de> for NumberScan {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for NumberScan {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<(), E> {
        if v > MAX_COUNT {
            return Err(E::custom(format!("number {v} is beyond 2^53")));
        }
        Ok(())
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<(), E> {
        self.visit_u64(v.unsigned_abs())
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<(), E> {
        if !v.is_finite() || v.abs() > MAX_COUNT as f64 {
            return Err(E::custom(format!("number {v} is beyond 2^53")));
        }
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(NumberScan)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key::<serde::de::IgnoredAny>()?.is_some() {
            map.next_value_seed(NumberScan)?;
        }
        Ok(())
    }
}

/// The fields every line is sorted by (the rest is skipped without being kept).
#[derive(Deserialize)]
struct LineKind {
    #[serde(rename = "type")]
    kind: Option<String>,
    schema: Option<SchemaField>,
    /// A report's master (every report has one; a header's is the run's).
    master_pid: Option<u32>,
}

/// Most masters' pids an error lists (the count says how many there were).
const MASTERS_LISTED: usize = 16;

/// The masters whose reports a read met, for [`Recording::parse_master`]: the one kept
/// and how many there were, the first [`MASTERS_LISTED`] by pid.
#[derive(Default)]
struct MastersSeen {
    /// The first master met: the one kept without `--master`.
    first: Option<u32>,
    listed: std::collections::BTreeSet<u32>,
    count: usize,
    /// A report of the master asked for was met.
    chosen_met: bool,
}

impl MastersSeen {
    /// Counts master `pid`; whether its report is kept (it is `chosen`'s, or without
    /// a choice the first master's).
    fn see(&mut self, pid: u32, chosen: Option<u32>) -> bool {
        let first = *self.first.get_or_insert(pid);
        let keep = chosen.unwrap_or(first) == pid;
        self.chosen_met |= keep && chosen.is_some();
        if self.listed.contains(&pid) || (pid == first && self.count > 0) {
            return keep;
        }
        self.count += 1;
        if self.listed.len() < MASTERS_LISTED {
            self.listed.insert(pid);
        }
        keep
    }

    fn words(&self) -> String {
        let mut s: Vec<String> = self.listed.iter().map(|p| p.to_string()).collect();
        if self.count > self.listed.len() {
            s.push(format!("and {} more", self.count - self.listed.len()));
        }
        s.join(", ")
    }
}

/// A line's `schema`: a number, or anything else (then the typed parse says why).
#[derive(Deserialize)]
#[serde(untagged)]
enum SchemaField {
    Number(u64),
    #[allow(dead_code)]
    Other(serde::de::IgnoredAny),
}

fn check_time(what: &str, t: f64) -> Result<(), String> {
    if !(0.0..=crate::model::MAX_UNIX_S).contains(&t) {
        return Err(format!(
            "{what} {t} is not a time between 1970 and 9999 (seconds since the Unix epoch)"
        ));
    }
    Ok(())
}

fn check_len(what: &str, n: usize, max: usize) -> Result<(), String> {
    if n > max {
        return Err(format!(
            "{n} {what}, more than the {max} a recording may hold"
        ));
    }
    Ok(())
}

/// Range checks of a report read from a recording: counts of workers and other lists,
/// histogram lengths, times. The number scan has already bounded every number.
fn check_report(r: &Report) -> Result<(), String> {
    check_time("time_unix_s", r.time_unix_s)?;
    // Finite: the number scan refused the rest.
    if r.duration_s < 0.0 {
        return Err(format!("duration_s {} is negative", r.duration_s));
    }
    check_len("workers", r.workers.len(), MAX_WORKERS)?;
    check_len("master_nspid entries", r.master_nspid.len(), 64)?;
    check_len("events", r.events.len(), MAX_ITEMS)?;
    check_len("listening sockets", r.listen.len(), MAX_ITEMS)?;
    check_len("verdicts", r.verdicts.len(), MAX_ITEMS)?;
    check_len("log paths", r.logs.len(), MAX_ITEMS)?;
    let merged = r.exited_merged.as_ref().map(|m| &m.stats);
    for w in r.workers.iter().chain(merged) {
        check_len("nspid entries", w.nspid.len(), 64)?;
        check_len("syscalls", w.syscalls.len(), MAX_ITEMS)?;
        for (name, s) in &w.syscalls {
            if s.hist_log2_ns.len() > nginx_probe_common::HIST_BUCKETS {
                return Err(format!(
                    "the {name} histogram has {} buckets, more than the {} of a log2 histogram of ns",
                    s.hist_log2_ns.len(),
                    nginx_probe_common::HIST_BUCKETS
                ));
            }
        }
    }
    Ok(())
}

fn check_header(h: &Header) -> Result<(), String> {
    check_time("started_unix_s", h.started_unix_s)?;
    check_len("workers", h.workers.len(), MAX_WORKERS)?;
    check_len("syscalls", h.options.syscalls.len(), MAX_ITEMS)?;
    check_len("arguments", h.options.argv.len(), MAX_ITEMS)?;
    if h.options.interval_s <= 0.0 {
        return Err(format!(
            "interval_s {} is not positive",
            h.options.interval_s
        ));
    }
    Ok(())
}

/// The kind of a recording's line, its numbers checked in range without keeping the
/// document; None for a line that is not JSON and lacks its newline (only the last line
/// can: cut off mid-write).
///
/// Errors: serde's message on a line that is not JSON or holds a number out of range.
fn line_kind(line: &[u8], ended: bool) -> Result<Option<LineKind>, String> {
    let scanned = {
        let mut de = serde_json::Deserializer::from_slice(line);
        serde::de::DeserializeSeed::deserialize(NumberScan, &mut de).and_then(|()| de.end())
    };
    match scanned.and_then(|()| serde_json::from_slice(line)) {
        Ok(k) => Ok(Some(k)),
        Err(_) if !ended => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// Adds one line of type `kind` to `rec`: the header, an interval (only the last one
/// with [`Keep::Last`]; with [`Keep::All`] counted in `kept_bytes`), or the summary.
///
/// Errors: the line does not parse or check as its type, the intervals kept pass
/// [`MAX_KEPT_BYTES`], or the type is unknown.
fn add_line(
    rec: &mut Recording,
    kind: Option<&str>,
    line: &[u8],
    keep: Keep,
    kept_bytes: &mut usize,
) -> Result<(), String> {
    let report = || -> Result<Report, String> {
        let mut r: Report = serde_json::from_slice(line).map_err(|e| e.to_string())?;
        check_report(&r)?;
        r.fill_legacy_requests();
        r.fill_legacy_listen_namespace();
        Ok(r)
    };
    match kind {
        Some("header") => {
            let h: Header = serde_json::from_slice(line).map_err(|e| e.to_string())?;
            check_header(&h)?;
            rec.header = Some(h);
        }
        Some("interval") => {
            let r = report()?;
            if keep == Keep::Last {
                rec.intervals.clear();
            } else {
                *kept_bytes += line.len();
                if *kept_bytes > MAX_KEPT_BYTES {
                    return Err(format!(
                        "more than {} MiB of interval lines to hold for a comparison or a page (`report` without --intervals reads any length)",
                        MAX_KEPT_BYTES >> 20
                    ));
                }
            }
            rec.intervals.push(r);
            rec.interval_count += 1;
        }
        Some("summary") => rec.summary = Some(report()?),
        other => return Err(format!("unknown type {other:?}")),
    }
    Ok(())
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
    /// recording. Whatever the bytes, memory is bounded: a line is at most
    /// [`MAX_LINE_BYTES`], its report a few times that, and the intervals kept with
    /// [`Keep::All`] at most [`MAX_KEPT_BYTES`] of text.
    ///
    /// Errors (one line each), besides those of [`Recording::parse`]: a line longer
    /// than [`MAX_LINE_BYTES`], a number beyond [`MAX_COUNT`], more than
    /// [`MAX_WORKERS`] workers (or [`MAX_ITEMS`] of another list) in a line, a histogram
    /// longer than `HIST_BUCKETS`, a time outside 1970..9999, more intervals than
    /// [`MAX_KEPT_BYTES`] with [`Keep::All`].
    pub fn parse_from(
        path: &str,
        reader: impl std::io::BufRead,
        keep: Keep,
    ) -> Result<Recording, RecordingError> {
        Recording::parse_master(path, reader, keep, None)
    }

    /// [`Recording::parse_from`], keeping only the reports of nginx master `master`
    /// (`--master`; their `master_pid`). A file may hold several masters' reports (an
    /// `--all --json` stdout, an exporter's across a restart): without `master` it is
    /// refused when it does, naming them, so that one master's figures are never
    /// mixed with another's or another's silently shown.
    ///
    /// Errors: those of [`Recording::parse_from`];
    /// [`RecordingError::SeveralMasters`] without `master` in a file of several;
    /// [`RecordingError::NoSuchMaster`] when `master` has no report in it.
    pub fn parse_master(
        path: &str,
        mut reader: impl std::io::BufRead,
        keep: Keep,
        master: Option<u32>,
    ) -> Result<Recording, RecordingError> {
        let mut seen = MastersSeen::default();
        let mut rec = Recording {
            header: None,
            intervals: Vec::new(),
            interval_count: 0,
            summary: None,
            truncated_tail: false,
        };
        let mut line: Vec<u8> = Vec::new();
        let mut kept_bytes = 0usize;
        let mut n = 0;
        loop {
            n += 1;
            let bad = |reason: String| RecordingError::BadLine {
                path: path.to_string(),
                line: n,
                reason,
            };
            let ended = match read_line_bounded(&mut reader, &mut line, MAX_LINE_BYTES) {
                Ok(LineRead::Eof) => break,
                Ok(LineRead::Line(ended)) => ended,
                Ok(LineRead::TooLong) => {
                    return Err(bad(format!(
                        "the line is longer than {} MiB",
                        MAX_LINE_BYTES >> 20
                    )))
                }
                Err(e) => return Err(bad(e.to_string())),
            };
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let Some(kind) = line_kind(&line, ended).map_err(bad)? else {
                rec.truncated_tail = true;
                continue;
            };
            check_seal(&line).map_err(bad)?;
            let schema = match kind.schema {
                Some(SchemaField::Number(v)) => v,
                _ => 0,
            };
            if schema > SCHEMA_VERSION as u64 {
                return Err(RecordingError::Schema {
                    path: path.to_string(),
                    found: schema,
                });
            }
            let report = kind.kind.as_deref() != Some("header");
            // Without --master the first master's reports are kept and the others
            // only counted (the read is refused at the end when there were others).
            if let (true, Some(pid)) = (report, kind.master_pid) {
                if !seen.see(pid, master) {
                    continue;
                }
            }
            add_line(&mut rec, kind.kind.as_deref(), &line, keep, &mut kept_bytes).map_err(bad)?;
        }
        check_masters(path, &seen, master)?;
        if rec.interval_count == 0 && rec.summary.is_none() {
            return Err(RecordingError::Empty {
                path: path.to_string(),
                header: rec.header.is_some(),
            });
        }
        Ok(rec)
    }

    /// Reads and parses the recording at `path`, keeping what `keep` says, refusing a
    /// file of several masters ([`Recording::load_master`] with None).
    pub fn load(path: &std::path::Path, keep: Keep) -> Result<Recording, RecordingError> {
        Recording::load_master(path, keep, None)
    }

    /// Reads and parses the recording at `path`, keeping what `keep` says and only
    /// master `master`'s reports ([`Recording::parse_master`]).
    ///
    /// Errors: a path that is not a regular file (a directory, a FIFO, a device such as
    /// `/dev/zero`, a socket) is refused before it is opened, and it is opened with
    /// `O_NONBLOCK` so that a FIFO swapped in meanwhile cannot block; then as
    /// [`Recording::parse_from`].
    pub fn load_master(
        path: &std::path::Path,
        keep: Keep,
        master: Option<u32>,
    ) -> Result<Recording, RecordingError> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let shown = path.display().to_string();
        let not_regular = |ft: &std::fs::FileType| RecordingError::Read {
            path: shown.clone(),
            source: std::io::Error::other(if ft.is_dir() {
                "it is a directory, not a recording".to_string()
            } else {
                format!(
                    "it is {}, not a regular file: a recording is a file",
                    crate::io::files::kind_of(ft)
                )
            }),
        };
        let read_err = |source| RecordingError::Read {
            path: shown.clone(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(read_err)?;
        if !meta.is_file() {
            return Err(not_regular(&meta.file_type()));
        }
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)
            .map_err(read_err)?;
        let meta = f.metadata().map_err(read_err)?;
        if !meta.is_file() {
            return Err(not_regular(&meta.file_type()));
        }
        Recording::parse_master(&shown, std::io::BufReader::new(f), keep, master)
    }
}

/// After a read: one master's reports, or the one `master` asked for.
///
/// Errors: several masters and none asked for; `master` not among them.
fn check_masters(
    path: &str,
    seen: &MastersSeen,
    master: Option<u32>,
) -> Result<(), RecordingError> {
    match master {
        None if seen.count > 1 => Err(RecordingError::SeveralMasters {
            path: path.to_string(),
            count: seen.count,
            masters: seen.words(),
        }),
        Some(m) if seen.count > 0 && !seen.chosen_met => Err(RecordingError::NoSuchMaster {
            path: path.to_string(),
            master: m,
            masters: seen.words(),
        }),
        _ => Ok(()),
    }
}

/// Most runs read for one side of `compare`.
pub const MAX_RUNS_PER_SIDE: usize = 100;

/// The recordings of one side of `compare`: `paths` as given, a directory standing for
/// the `*.jsonl` files in it (sorted).
///
/// Errors: an unreadable or empty directory, or more than [`MAX_RUNS_PER_SIDE`] runs.
pub fn side_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ProbeError> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut runs: Vec<PathBuf> = std::fs::read_dir(p)?
                .flatten()
                .map(|e| e.path())
                .filter(|f| f.is_file() && f.extension().is_some_and(|x| x == "jsonl"))
                .collect();
            runs.sort();
            if runs.is_empty() {
                return Err(UsageError::NoRecordingsIn {
                    dir: p.display().to_string(),
                }
                .into());
            }
            out.extend(runs);
        } else {
            out.push(p.clone());
        }
        if out.len() > MAX_RUNS_PER_SIDE {
            return Err(UsageError::TooManyRuns {
                max: MAX_RUNS_PER_SIDE,
            }
            .into());
        }
    }
    Ok(out)
}

/// The recordings at `paths`, every interval kept ([`Keep::All`]), only master
/// `master`'s reports when given ([`Recording::load_master`]), each with its path as
/// shown.
///
/// Errors: the first that does not load.
pub fn load_all(
    paths: &[PathBuf],
    master: Option<u32>,
) -> Result<Vec<(String, Recording)>, ProbeError> {
    paths
        .iter()
        .map(|p| {
            Ok((
                p.display().to_string(),
                Recording::load_master(p, Keep::All, master)?,
            ))
        })
        .collect()
}

/// Interval lines waiting to be written to the record file before new ones are dropped
/// (and counted): a minute of 1 s intervals on a stalled disk.
pub const RECORD_QUEUE: usize = 64;

/// Creates `--record FILE` (never over an existing file) and writes its header line, so
/// that an unwritable path or a full disk is reported before anything is attached; the
/// reports that follow go through the returned [`Sink`] ([`RECORD_QUEUE`] in flight).
///
/// Errors (usage, exit 2): a directory, a path [`crate::io::files::check_output`]
/// refuses, an existing file, a write that fails.
pub fn create(path: &Path, header: &Header) -> Result<Sink, ProbeError> {
    use std::io::Write as _;
    let shown = path.display().to_string();
    let fail = |reason: std::io::Error| -> ProbeError {
        UsageError::RecordUnwritable {
            path: shown.clone(),
            reason,
        }
        .into()
    };
    if path.is_dir() {
        return Err(UsageError::RecordIsDirectory { path: shown }.into());
    }
    if let Err(what) = crate::io::files::check_output(path) {
        return Err(UsageError::RecordNotAFile { path: shown, what }.into());
    }
    // Never over an earlier recording: a reused "before" name would destroy a baseline.
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                UsageError::RecordExists {
                    path: shown.clone(),
                }
                .into()
            } else {
                fail(e)
            }
        })?;
    let line = sealed_line(&safe::json(header));
    f.write_all(line.as_bytes())
        .and_then(|_| f.sync_data())
        .map_err(fail)?;
    Ok(Sink::spawn(Box::new(f), &shown, RECORD_QUEUE))
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

    /// Trial 16: a sealed recording whose worker accepts were edited from 163 to 99163
    /// read back without a word; sealed lines read back as written, an edited one is
    /// refused with its line number, an unsealed one (older recordings, a captured
    /// `--json` stdout) is read as before.
    #[test]
    fn an_edited_sealed_line_is_refused_and_unsealed_lines_read() {
        let sealed = |kind: &str, n: u64| sealed_line(report_line(kind, n).trim_end());
        let text = sealed("interval", 163) + &sealed("summary", 163);
        assert!(text.lines().all(|l| l.ends_with("\"}")), "{text}");
        let r = Recording::parse("r", &text).unwrap();
        assert_eq!(r.summary.unwrap().workers[0].accepts, 163);
        let edited = text.replacen("\"accepts\":163", "\"accepts\":99163", 1);
        assert_ne!(edited, text);
        match Recording::parse("r", &edited) {
            Err(RecordingError::BadLine { line, reason, .. }) => {
                assert_eq!(line, 1);
                assert!(
                    reason.starts_with("its checksum (crc32) does not match"),
                    "{reason}"
                );
            }
            other => panic!("{other:?}"),
        }
        let plain = report_line("summary", 7);
        assert_eq!(
            Recording::parse("r", &plain)
                .unwrap()
                .summary
                .unwrap()
                .workers[0]
                .accepts,
            7
        );
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

    /// An `--all --json` stdout: two masters' intervals and summaries interleaved.
    #[test]
    fn a_file_of_several_masters_is_refused_unless_one_is_chosen() {
        let of = |kind: &str, accepts: u64, pid: u32| {
            report_line(kind, accepts).replace("\"master_pid\":9", &format!("\"master_pid\":{pid}"))
        };
        let text = of("interval", 1, 202)
            + &of("interval", 2, 101)
            + &of("summary", 3, 202)
            + &of("summary", 4, 101);
        let e = Recording::parse("all.json", &text).unwrap_err().to_string();
        assert_eq!(
            e,
            "all.json holds the reports of 2 nginx masters (101, 202): choose one with --master <PID>"
        );
        for (pid, interval, summary) in [(101, 2, 4), (202, 1, 3)] {
            let r =
                Recording::parse_master("all.json", text.as_bytes(), Keep::All, Some(pid)).unwrap();
            assert_eq!(r.interval_count, 1);
            assert_eq!(r.intervals[0].workers[0].accepts, interval);
            let s = r.summary.unwrap();
            assert_eq!((s.master_pid, s.workers[0].accepts), (pid, summary));
        }
        let e = Recording::parse_master("all.json", text.as_bytes(), Keep::Last, Some(303))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "all.json holds no report of nginx master 303 (it holds 101, 202)"
        );
        // One master's file reads as before, with or without --master.
        let one = of("interval", 1, 101) + &of("summary", 4, 101);
        assert!(Recording::parse("one", &one).is_ok());
        assert!(Recording::parse_master("one", one.as_bytes(), Keep::All, Some(101)).is_ok());
        let e = Recording::parse_master("one", one.as_bytes(), Keep::All, Some(202))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "one holds no report of nginx master 202 (it holds 101)");
        // Many masters: the first 16 listed, the rest counted.
        let many: String = (1..=20).map(|p| of("summary", 1, p)).collect();
        let e = Recording::parse("many", &many).unwrap_err().to_string();
        assert!(
            e.starts_with("many holds the reports of 20 nginx masters (1, 2, 3, ")
                && e.contains(", 16, and 4 more)"),
            "{e}"
        );
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
        assert_eq!(
            e.to_string(),
            "x: no reports in it (an empty recording, or not a recording)"
        );
        // Trial 18: a header alone is a recording that ended before its first interval.
        let e = Recording::parse("x", &header_line("1796017762.4")).unwrap_err();
        assert_eq!(e.to_string(), "x: no reports in it (a recording's header alone: the run ended, or was cut, before its first interval)");
        let newer = report_line("interval", 1).replace("\"schema\":1", "\"schema\":99");
        let e = Recording::parse("x", &newer).unwrap_err();
        assert!(e.to_string().contains("schema 99"), "{e}");
        let e = Recording::parse("x", "{\"type\":\"other\"}\n").unwrap_err();
        assert!(e.to_string().contains("unknown type"), "{e}");
    }

    fn header_line(started: &str) -> String {
        format!(
            "{{\"type\":\"header\",\"schema\":1,\"tool\":\"t\",\"host\":\"h\",\"kernel\":\"k\",\"cpus\":2,\"nginx_version\":null,\"master_title\":\"m\",\"master_pid\":9,\"workers\":[10],\"started_unix_s\":{started},\"options\":{{\"interval_s\":5.0,\"syscalls\":[],\"uprobes\":false,\"argv\":[]}}}}\n"
        )
    }

    #[test]
    fn times_beyond_year_9999_are_refused() {
        let ok = header_line("1796017762.4") + &report_line("summary", 1);
        assert!(Recording::parse("x", &ok).unwrap().header.is_some());
        let e = Recording::parse(
            "x",
            &(header_line("253402300800") + &report_line("summary", 1)),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "x:1: not an nginx-probe recording line (started_unix_s 253402300800 is not a time between 1970 and 9999 (seconds since the Unix epoch))");
        let late = report_line("summary", 1).replace("\"time_unix_s\":1.0", "\"time_unix_s\":1e12");
        assert!(Recording::parse("x", &late)
            .unwrap_err()
            .to_string()
            .contains("time_unix_s"));
    }

    #[test]
    fn numbers_that_could_overflow_sums_are_refused() {
        let big =
            report_line("summary", 1).replace("\"accepts\":1", "\"accepts\":18446744073709551615");
        let e = Recording::parse("x", &big).unwrap_err().to_string();
        assert!(
            e.contains("number 18446744073709551615 is beyond 2^53"),
            "{e}"
        );
        let at_limit =
            report_line("summary", 1).replace("\"accepts\":1", "\"accepts\":9007199254740992");
        assert_eq!(
            Recording::parse("x", &at_limit)
                .unwrap()
                .summary
                .unwrap()
                .workers[0]
                .accepts,
            1 << 53
        );
    }

    #[test]
    fn lists_beyond_their_caps_are_refused() {
        let line = report_line("summary", 1);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        let w = v["workers"][0].clone();
        let mut many = v.clone();
        many["workers"] = serde_json::Value::Array(vec![w; MAX_WORKERS + 1]);
        let e = Recording::parse("x", &(many.to_string() + "\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("1025 workers, more than the 1024"), "{e}");
        let mut hist = v.clone();
        hist["workers"][0]["syscalls"] = serde_json::json!({"writev": {
            "count": 1, "errors": 0, "errnos": {}, "timed": 1, "total_ns": 1, "p50_ns": 1, "p99_ns": 1,
            "max_ns": 1, "hist_log2_ns": vec![1; 65]}});
        let e = Recording::parse("x", &(hist.to_string() + "\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("65 buckets"), "{e}");
    }

    #[test]
    fn a_line_longer_than_the_cap_is_refused_without_holding_it() {
        let mut buf = Vec::new();
        let mut r = std::io::BufReader::with_capacity(4, &b"abc\nabcdefgh\nab"[..]);
        assert_eq!(
            read_line_bounded(&mut r, &mut buf, 4).unwrap(),
            LineRead::Line(true)
        );
        assert_eq!(buf, b"abc\n");
        assert_eq!(
            read_line_bounded(&mut r, &mut buf, 4).unwrap(),
            LineRead::TooLong
        );
        assert!(buf.capacity() <= 16, "{}", buf.capacity());
        // An exact fit (4 bytes and the newline) is a line.
        let mut r = &b"abcd\n"[..];
        assert_eq!(
            read_line_bounded(&mut r, &mut buf, 4).unwrap(),
            LineRead::Line(true)
        );
        let mut r = &b"ab"[..];
        assert_eq!(
            read_line_bounded(&mut r, &mut buf, 4).unwrap(),
            LineRead::Line(false)
        );
        assert_eq!(
            read_line_bounded(&mut r, &mut buf, 4).unwrap(),
            LineRead::Eof
        );

        // Zeros without a newline: refused after MAX_LINE_BYTES, not read to the end.
        let mut zeros = std::io::Read::take(std::io::repeat(0), u64::MAX);
        let e = Recording::parse_from("z", std::io::BufReader::new(&mut zeros), Keep::Last)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "z:1: not an nginx-probe recording line (the line is longer than 8 MiB)"
        );
    }

    #[test]
    fn only_regular_files_are_read_and_never_block() {
        let e = Recording::load(std::path::Path::new("/dev/zero"), Keep::Last)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "cannot read /dev/zero: it is a character device, not a regular file: a recording is a file"
        );
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // No writer: opening it to read would block forever; it is refused instead.
        let e = Recording::load(&fifo, Keep::Last).unwrap_err().to_string();
        assert!(
            e.ends_with("it is a FIFO, not a regular file: a recording is a file"),
            "{e}"
        );
    }
}
