//! What the clients got: nginx's access logs, tailed from attach on like the error log
//! (`collect::tail`), each line matched against its `log_format`
//! (`model::access_log_format`) and counted (`model::access_log`), then dropped: no
//! client address, URI or header is kept.
//!
//! Which files: every `access_log` of the configuration nginx runs (`collect::config`)
//! with a fixed path (not `off`, `syslog:`, `memory:` or with a variable), at most
//! [`MAX_FILES`], each read through a worker's fd for the file now at its path (looked
//! up in the master's root, matched by device and inode), so a container's log and a
//! rotated-then-reopened one are the file nginx writes. A path no worker holds open is
//! left until one does (the old file goes on being read meanwhile).
//!
//! Reloads: a file whose formats changed is read in the new ones, and a line in none of
//! them is tried in the previous generation's (old workers drain on, writing the old
//! format); a file no longer in the configuration is read on while a worker holds it
//! (`retired`); a file first followed is read from its start when it was created after
//! attach (the new path of a reload: the lines the new workers wrote before the probe
//! read the configuration again are theirs).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;

use crate::model::access_log::{AccessLogFileReport, AccessLogReport, Outcomes};
use crate::model::access_log_format::{Field, LogFormat, Parsed, COMBINED};
use crate::model::config::ConfigReport;

use super::tail::{Polled, Tail};

/// Access log files followed, at most.
pub const MAX_FILES: usize = 8;
/// Longest line read whole, bytes; a longer one is counted cut and not read.
pub const MAX_LINE: usize = 16 << 10;

/// Per-file counters: lines read, unparsed, ambiguous.
#[derive(Clone, Copy, Default)]
struct Counters {
    lines: u64,
    unparsed: u64,
    ambiguous: u64,
}

/// One file followed.
struct Followed {
    /// The path nginx opens (prefix applied), inside the master's root.
    path: String,
    formats: Vec<LogFormat>,
    /// The formats before the last reload that changed them, tried when a line is in
    /// none of `formats` (old workers still write them).
    previous: Vec<LogFormat>,
    /// No longer in the configuration nginx runs: read while a worker holds it.
    retired: bool,
    buffered: Option<String>,
    /// The file at `path` when last looked up (device, inode).
    want: Option<(u64, u64)>,
    /// The worker fd it is read through (`/proc/<pid>/fd/<n>`).
    link: Option<String>,
    tail: Tail,
    counts: Counters,
    base: Counters,
    cut_base: u64,
    skipped_base: u64,
    /// The reader's backlog when the interval started (`Tail::backlog`).
    backlog_base: u64,
    /// Lines in none of the formats at the last poll, tried once more at the next one
    /// (at most [`MAX_RETRIED`]): a new worker of a reload that changed the format can
    /// write before the probe has read the new configuration (it does so when it sees
    /// the worker start, in the next poll at the latest).
    retry: Vec<String>,
}

/// Lines held for one more try per file; past it, a line in no format is unparsed at
/// once.
const MAX_RETRIED: usize = 256;

/// One file to follow, from the configuration: its path, each format that writes to
/// it (name, format, `escape=`), its `buffer=`/`flush=`.
struct Wanted {
    path: String,
    formats: Vec<(String, String, String)>,
    buffered: Option<String>,
}

/// The fields the reader counts that `format` (a `log_format` name) logs; 0 when it
/// is unknown or refused.
fn fields_logged(cfg: &ConfigReport, format: &str) -> usize {
    let compiled = match cfg.log_formats.iter().find(|f| f.name == format) {
        Some(f) => LogFormat::compile(&f.name, &f.format, &f.escape),
        None if format == "combined" => LogFormat::compile("combined", COMBINED, "default"),
        None => return 0,
    };
    compiled.map_or(0, |f| {
        let mut fields = f.fields;
        fields.sort_by_key(|f| f.variable());
        fields.dedup();
        fields.len()
    })
}

/// nginx writes a request to every access_log of its context: two in one scope log it
/// twice. One file per scope is read (one another scope reads, else one with no
/// `if=` nor buffer, then the one whose format logs the most fields the reader
/// counts, the first of equals: trial 11 read
/// a `combined` file beside one with `$request_time` and said request time was not
/// logged): the files read, and the (scope, path) of those left for it.
fn one_file_per_scope(cfg: &ConfigReport) -> (Vec<&str>, Vec<(&str, &str)>) {
    let fixed = |p: &str| p != "off" && !p.contains('$') && !p.contains(':');
    let mut read_once: Vec<&str> = Vec::new();
    let mut skipped: Vec<(&str, &str)> = Vec::new();
    let mut scopes: Vec<&str> = cfg.access_logs.iter().map(|a| a.scope.as_str()).collect();
    scopes.dedup();
    for scope in scopes {
        // A conditional (`if=`) or buffered log is never the whole of the period:
        // the plain one first, then the most fields (review).
        let logs: Vec<(&str, (bool, usize))> = cfg
            .access_logs
            .iter()
            .filter(|a| a.scope == scope && fixed(&a.path))
            .map(|a| {
                let plain = a.condition.is_none() && a.buffer.is_none();
                (a.path.as_str(), (plain, fields_logged(cfg, &a.format)))
            })
            .collect();
        let paths: Vec<&str> = logs.iter().map(|(p, _)| *p).collect();
        let richest = logs
            .iter()
            .fold(None::<(&str, (bool, usize))>, |best, &(p, n)| match best {
                Some((_, m)) if m >= n => best,
                _ => Some((p, n)),
            })
            .map(|(p, _)| p);
        let keep = paths
            .iter()
            .copied()
            .find(|p| read_once.contains(p))
            .or(richest);
        if let Some(k) = keep {
            if !read_once.contains(&k) {
                read_once.push(k);
            }
            skipped.extend(paths.iter().filter(|p| **p != k).map(|p| (scope, *p)));
        }
    }
    (read_once, skipped)
}

/// The access log files of `cfg` with a fixed path, at most [`MAX_FILES`], and one line
/// for each access log not read.
fn wanted_files(cfg: &ConfigReport) -> (Vec<Wanted>, Vec<String>) {
    let (mut wanted, mut not_read): (Vec<Wanted>, Vec<String>) = (Vec::new(), Vec::new());
    if let Some(why) = &cfg.unknown {
        not_read.push(format!("which access logs nginx writes is unknown: {why}"));
        return (wanted, not_read);
    }
    let (read_once, skipped) = one_file_per_scope(cfg);
    for a in &cfg.access_logs {
        let p = a.path.as_str();
        let twice =
            skipped.iter().any(|(s, q)| *s == a.scope && *q == p) && !read_once.contains(&p);
        if twice {
            if not_read.len() < MAX_FILES {
                not_read.push(format!(
                    "{p} ({}): its requests are logged in another file of the same scope, read once",
                    a.at
                ));
            }
            continue;
        }
        let why = match p {
            "off" => Some(""),
            _ if p.starts_with("syslog:") => Some("sent to syslog"),
            _ if p.starts_with("memory:") => Some("kept in memory"),
            _ if p.contains('$') => Some("a variable in its path (one file per value)"),
            "/dev/null" => {
                Some("nginx is configured to discard these writes, so there are no lines to count")
            }
            _ => None,
        };
        if let Some(why) = why {
            if !why.is_empty() && not_read.len() < MAX_FILES {
                not_read.push(format!("{p} ({}): {why}", a.at));
            }
            continue;
        }
        let path = if p.starts_with('/') {
            p.to_string()
        } else {
            format!("{}{p}", cfg.prefix)
        };
        let (format, escape) = match cfg.log_formats.iter().find(|f| f.name == a.format) {
            Some(f) => (f.format.clone(), f.escape.clone()),
            None if a.format == "combined" => (COMBINED.to_string(), "default".to_string()),
            None => {
                not_read.push(format!(
                    "{path} ({}): log_format {} is not defined in the configuration read",
                    a.at, a.format
                ));
                continue;
            }
        };
        let i = match wanted.iter().position(|w| w.path == path) {
            Some(i) => i,
            None if wanted.len() < MAX_FILES => {
                wanted.push(Wanted {
                    path: path.clone(),
                    formats: Vec::new(),
                    buffered: None,
                });
                wanted.len() - 1
            }
            None => {
                not_read.push(format!(
                    "{path} ({}): over {MAX_FILES} access log files",
                    a.at
                ));
                continue;
            }
        };
        let w = &mut wanted[i];
        if !w.formats.iter().any(|(n, _, _)| *n == a.format) {
            w.formats.push((a.format.clone(), format, escape));
        }
        if a.buffer.is_some() || a.flush.is_some() {
            w.buffered = Some(a.buffer_flush("").trim().to_string());
        }
    }
    (wanted, not_read)
}

/// nginx's access logs, followed; see the module doc.
#[derive(Default)]
pub struct AccessLogs {
    master: u32,
    files: Vec<Followed>,
    /// Access logs not read, and why (one line each).
    not_read: Vec<String>,
    /// The fields of every format read, in `Field::ALL` order.
    fields: Vec<Field>,
    total: Outcomes,
    interval: Outcomes,
    /// Whether a configuration was given (else no section in the report).
    configured: bool,
    /// When the first configuration was given (attach): files created since are read
    /// from their start.
    attached: Option<std::time::SystemTime>,
    /// Why the configuration does not log every request once, at once, in the files
    /// read (see [`every_request_logged`]); None when it does.
    not_every_request: Option<String>,
    /// `log_subrequest` is on somewhere: a subrequest's line repeats its parent's
    /// `$connection_requests`, so lines with 1 are no count of connections.
    subrequests_logged: bool,
}

/// Whether the configuration writes every request nginx serves at once to exactly one
/// file read here: Err with the first reason it does not (`access_log off` at
/// file:line, `if=`, `buffer=`/`flush=`, `log_subrequest on`, a log not read, the
/// configuration changed since its load or read with errors).
fn every_request_logged(cfg: &ConfigReport, not_read: &[String]) -> Result<(), String> {
    if let Some(e) = cfg.errors.first() {
        return Err(format!("the configuration was read with errors ({e})"));
    }
    if cfg.changed_since_load() {
        return Err("a configuration file changed after nginx loaded it".into());
    }
    if cfg.access_logs.is_empty() {
        return Err("no access_log in the configuration read".into());
    }
    for a in &cfg.access_logs {
        if a.path == "off" {
            return Err(format!(
                "access_log off ({}) leaves requests unlogged",
                a.at
            ));
        }
        if let Some(c) = &a.condition {
            return Err(format!(
                "access_log {} if={c} ({}) logs only some requests",
                a.path, a.at
            ));
        }
        if a.buffer.is_some() || a.flush.is_some() {
            return Err(format!(
                "access_log {}{} ({}) writes lines late",
                a.path,
                a.buffer_flush(""),
                a.at
            ));
        }
    }
    if let Some(v) = cfg.everywhere("log_subrequest").find(|v| v.value != "off") {
        return Err(format!(
            "log_subrequest {} logs subrequests too",
            v.quoted()
        ));
    }
    if let Some(n) = not_read.first() {
        return Err(format!("an access log is not read: {n}"));
    }
    Ok(())
}

/// Reads `line` in each of `formats`: the first reading in `read`, `ambiguous` set
/// when a format cannot tell or two readings disagree. Whether any format matched.
fn read_in<'a>(
    formats: &[LogFormat],
    line: &'a str,
    read: &mut Option<crate::model::access_log_format::Fields<'a>>,
    ambiguous: &mut bool,
) -> bool {
    let mut any = false;
    for c in formats {
        match c.parse(line) {
            Parsed::Line(x) if read.is_none() => *read = Some(x),
            Parsed::Line(x) => *ambiguous |= read.as_ref() != Some(&x),
            Parsed::Ambiguous => *ambiguous = true,
            Parsed::NoMatch => continue,
        }
        any = true;
    }
    any
}

/// Counts one line read in `formats`, else in `previous`: a line (into `total` and
/// `interval`) or an ambiguous one; false when it is in none of them (not counted).
fn count_line(
    formats: &[LogFormat],
    previous: &[LogFormat],
    s: &str,
    counts: &mut Counters,
    total: &mut Outcomes,
    interval: &mut Outcomes,
) -> bool {
    let (mut read, mut ambiguous) = (None, false);
    if !read_in(formats, s, &mut read, &mut ambiguous) {
        read_in(previous, s, &mut read, &mut ambiguous);
    }
    match read {
        _ if ambiguous => counts.ambiguous += 1,
        Some(x) => {
            counts.lines += 1;
            total.add(&x);
            interval.add(&x);
        }
        None => return false,
    }
    true
}

/// The same formats, in the same order (by name and compiled text).
fn same_formats(a: &[LogFormat], b: &[LogFormat]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same_as(y))
}

impl AccessLogs {
    /// Sets the files to follow from `cfg` (at attach and after each reload). A file
    /// already followed keeps its position and counts.
    pub fn configure(&mut self, master: u32, cfg: &ConfigReport) {
        self.master = master;
        self.configured = true;
        let attached = *self.attached.get_or_insert_with(std::time::SystemTime::now);
        let (wanted, mut not_read) = wanted_files(cfg);
        let mut files = Vec::new();
        for w in wanted {
            let mut compiled = Vec::new();
            for (name, format, escape) in &w.formats {
                match LogFormat::compile(name, format, escape) {
                    Ok(c) => compiled.push(c),
                    Err(why) => {
                        not_read.push(format!("{}: log_format {name} not read: {why}", w.path))
                    }
                }
            }
            if compiled.is_empty() {
                continue;
            }
            let mut f = match self.files.iter().position(|f| f.path == w.path) {
                Some(i) => self.files.swap_remove(i),
                None => Followed {
                    path: w.path,
                    formats: Vec::new(),
                    previous: Vec::new(),
                    retired: false,
                    buffered: None,
                    want: None,
                    link: None,
                    tail: Tail::new(MAX_LINE).since(attached),
                    counts: Counters::default(),
                    base: Counters::default(),
                    cut_base: 0,
                    skipped_base: 0,
                    backlog_base: 0,
                    retry: Vec::new(),
                },
            };
            if !f.formats.is_empty() && !same_formats(&f.formats, &compiled) {
                f.previous = std::mem::replace(&mut f.formats, compiled);
            } else {
                f.formats = compiled;
            }
            f.retired = false;
            f.buffered = w.buffered;
            files.push(f);
        }
        // Files the configuration no longer names: old workers may still write them
        // (draining). Read on while a worker holds one, and kept in the report (its
        // counts are part of the totals); MAX_FILES of them at most.
        let mut retired: Vec<Followed> = std::mem::take(&mut self.files);
        for f in &mut retired {
            f.retired = true;
        }
        retired.truncate(MAX_FILES);
        files.extend(retired);
        self.files = files;
        self.not_every_request = every_request_logged(cfg, &not_read).err();
        self.subrequests_logged = cfg
            .everywhere("log_subrequest")
            .any(|v| v.value.trim() != "off");
        self.not_read = not_read;
        self.fields = Field::ALL
            .iter()
            .copied()
            .filter(|x| {
                self.files
                    .iter()
                    .any(|f| f.formats.iter().chain(&f.previous).any(|c| c.has(*x)))
            })
            .collect();
        self.look_up(&BTreeMap::new());
    }

    /// Finds each file at its path in the master's root and a worker fd for it.
    /// `log_fds`: live worker pid -> access/error log fd -> kind (the tracker's).
    fn look_up(&mut self, log_fds: &BTreeMap<u32, BTreeMap<u32, u32>>) {
        use nix::fcntl::OFlag;
        use std::os::fd::{FromRawFd, OwnedFd};
        let root = nix::fcntl::open(
            format!("/proc/{}/root", self.master).as_str(),
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .ok()
        // SAFETY: open returned a new fd that nothing else owns.
        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) });
        for f in &mut self.files {
            f.want = root.as_ref().and_then(|r| {
                let fd = super::config::open_in_root(r, &f.path, OFlag::O_PATH).ok()?;
                let m = std::fs::File::from(fd).metadata().ok()?;
                Some((m.dev(), m.ino()))
            });
            let Some(want) = f.want else { continue };
            let held = log_fds.iter().flat_map(|(pid, fds)| {
                fds.iter()
                    .filter(|(_, &k)| k == nginx_probe_common::fd_kind::ACCESS_LOG)
                    .map(move |(fd, _)| format!("/proc/{pid}/fd/{fd}"))
            });
            for link in held {
                if std::fs::metadata(&link).is_ok_and(|m| (m.dev(), m.ino()) == want) {
                    f.link = Some(link);
                    break;
                }
            }
        }
    }

    /// Reads what nginx appended to each file since the last poll. `look_up`: look for
    /// the files at their paths again (every 2 s: a reopen after rotation).
    pub fn poll(&mut self, log_fds: &BTreeMap<u32, BTreeMap<u32, u32>>, look_up: bool) {
        if look_up || self.files.iter().any(|f| f.link.is_none()) {
            self.look_up(log_fds);
        }
        let (total, interval) = (&mut self.total, &mut self.interval);
        for f in &mut self.files {
            let link = f.link.clone();
            let (formats, previous, counts) = (&f.formats, &f.previous, &mut f.counts);
            // Last poll's lines in no format, once more with the formats now read.
            for s in std::mem::take(&mut f.retry) {
                if !count_line(formats, previous, &s, counts, total, interval) {
                    counts.unparsed += 1;
                }
            }
            let retry = &mut f.retry;
            let mut line = |l: &[u8]| {
                if l.len() >= MAX_LINE {
                    return; // counted by the tail as cut
                }
                // nginx writes client bytes raw (escape=json leaves non-ASCII as is):
                // invalid UTF-8 is replaced, the line's shape stays.
                let s = String::from_utf8_lossy(l);
                if !count_line(formats, previous, &s, counts, total, interval) {
                    if retry.len() < MAX_RETRIED {
                        retry.push(s.into_owned());
                    } else {
                        counts.unparsed += 1;
                    }
                }
            };
            let not_file = |t: &str| format!("{t} is not a regular file");
            // Only the file now at the path (a rotation) or the one being read: a worker's
            // fd number is reused for another log after `nginx -s reopen`.
            let want = f.want;
            let polled = link.as_deref().map(|l| {
                f.tail
                    .poll_wanting(l, want, &not_file, &mut |_, _| {}, &mut line)
            });
            if let None | Some(Polled::Gone(_) | Polled::Failed(_)) = polled {
                // No worker holds it now (the old workers of a reload exited, a worker
                // was respawned): what they appended before is read from the file
                // already open; another worker's fd is looked for next poll.
                f.link = None;
                f.tail.read_open(&mut line);
            }
        }
    }

    /// Starts a new interval.
    pub fn start_interval(&mut self) {
        self.interval = Outcomes::default();
        for f in &mut self.files {
            f.base = f.counts;
            f.cut_base = f.tail.lines_cut;
            f.skipped_base = f.tail.bytes_skipped;
            f.backlog_base = f.tail.backlog;
        }
    }

    /// The report's `access_log` section since attach (`summary`) or in the interval;
    /// None when no configuration was read.
    pub fn report(&self, summary: bool) -> Option<AccessLogReport> {
        if !self.configured {
            return None;
        }
        let files = self
            .files
            .iter()
            .map(|f| {
                let b = if summary { Counters::default() } else { f.base };
                let (cut, skipped) = if summary {
                    (0, 0)
                } else {
                    (f.cut_base, f.skipped_base)
                };
                AccessLogFileReport {
                    retired: f.retired,
                    path: f.path.clone(),
                    formats: f.formats.iter().map(|c| c.name.clone()).collect(),
                    buffered: f.buffered.clone(),
                    lines: f.counts.lines - b.lines,
                    // Lines waiting for their second try are unparsed so far.
                    unparsed: f.counts.unparsed - b.unparsed + f.retry.len() as u64,
                    ambiguous: f.counts.ambiguous - b.ambiguous,
                    lines_cut: f.tail.lines_cut - cut,
                    bytes_skipped: f.tail.bytes_skipped - skipped,
                    unread_bytes_at_end: f.tail.backlog,
                    unread_bytes_at_start: if summary { 0 } else { f.backlog_base },
                }
            })
            .collect();
        let o = if summary { &self.total } else { &self.interval };
        let mut r = o.report(&self.fields, files, self.not_read.clone());
        // What the reader adds to the configuration's proof: each file followed from
        // attach on through a worker's fd, nothing skipped, no truncation.
        let why = self.not_every_request.clone().or_else(|| {
            self.files.iter().find_map(|f| {
                if !f.tail.has_file() {
                    Some(format!("{} is not read (no worker holds it open)", f.path))
                } else if f.tail.truncations > 0 {
                    // Trial 10: a copytruncate rotation was said only as "skipped
                    // bytes or truncated".
                    Some(format!(
                        "{}: truncated in place {} time(s) since attach (a copytruncate rotation, or another writer: what nginx wrote between a copy and the truncation is in neither file, and the lines the reader had not reached are not counted)",
                        f.path, f.tail.truncations
                    ))
                } else if f.tail.bytes_skipped > 0 {
                    Some(format!(
                        "{}: the reader fell too far behind and skipped {} bytes",
                        f.path, f.tail.bytes_skipped
                    ))
                } else {
                    None
                }
            })
        });
        if self.subrequests_logged {
            r.connections_with_requests = None;
            r.ended_most_at = None;
        }
        r.counts_every_request = why.is_none();
        r.not_every_request = why;
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::config::AccessLogValue;

    fn log(scope: &str, path: &str) -> AccessLogValue {
        AccessLogValue {
            scope: scope.into(),
            path: path.into(),
            format: "combined".into(),
            at: format!("nginx.conf ({scope})"),
            ..Default::default()
        }
    }

    #[test]
    fn an_access_log_to_dev_null_is_not_read_and_said_discarded() {
        let cfg = ConfigReport {
            prefix: "/p/".into(),
            access_logs: vec![log("http", "/dev/null"), log("server b", "logs/b.log")],
            ..Default::default()
        };
        let (wanted, not_read) = wanted_files(&cfg);
        let paths: Vec<&str> = wanted.iter().map(|w| w.path.as_str()).collect();
        assert_eq!(paths, ["/p/logs/b.log"]);
        assert_eq!(
            not_read,
            ["/dev/null (nginx.conf (http)): nginx is configured to discard these writes, so there are no lines to count"]
        );
    }

    #[test]
    fn two_logs_of_one_scope_are_read_once() {
        // The newcomer's case: a main log and a second one at the http level logged
        // every request twice (200% of nginx's requests).
        let cfg = ConfigReport {
            prefix: "/p/".into(),
            access_logs: vec![
                log("http", "logs/access.log"),
                log("http", "logs/access2.log"),
                log("server b", "logs/b.log"),
                log("server c", "logs/b.log"),
                log("server c", "logs/c.log"),
            ],
            ..Default::default()
        };
        let (wanted, not_read) = wanted_files(&cfg);
        let paths: Vec<&str> = wanted.iter().map(|w| w.path.as_str()).collect();
        assert_eq!(paths, ["/p/logs/access.log", "/p/logs/b.log"]);
        assert_eq!(not_read.len(), 2, "{not_read:?}");
        assert!(not_read[0].starts_with(
            "logs/access2.log (nginx.conf (http)): its requests are logged in another file"
        ));
        assert!(not_read[1].starts_with("logs/c.log (nginx.conf (server c))"));
        // Trial 11: beside `combined`, the file whose format logs more is read.
        let mut cfg = cfg;
        cfg.access_logs[1].format = "cr".into();
        cfg.log_formats.push(crate::model::config::LogFormatValue {
            name: "cr".into(),
            escape: "default".into(),
            format: "$status $request_time $connection_requests".into(),
            at: "nginx.conf:3".into(),
        });
        let (wanted, not_read) = wanted_files(&cfg);
        assert_eq!(wanted[0].path, "/p/logs/access2.log");
        assert!(not_read[0].starts_with("logs/access.log (nginx.conf (http)): its requests"));
    }

    /// Reloads, as the newcomer's trial ran them: a reload that changes the format of
    /// a file, then one that moves the log to a new file. Old-format lines written after
    /// the first reload (old workers draining) are read in the previous format; the old
    /// file's last lines are read though the configuration no longer names it; the new
    /// file, created after attach, is read from its start. Every line counted once,
    /// per-file counts adding up to the total. The "workers" here are this process,
    /// holding the files open (their fds are what is read through).
    #[test]
    fn reloads_that_change_the_format_or_the_path_lose_no_line() {
        // Long because: one log's story through two reloads and a configuration read
        // late, each step asserted on the same reader.
        use crate::model::config::LogFormatValue;
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.log"), dir.path().join("b.log"));
        let mut fa = std::fs::File::create(&a).unwrap();
        writeln!(fa, "200 before-attach").unwrap();
        let cfg = |path: &std::path::Path, format: &str| ConfigReport {
            access_logs: vec![AccessLogValue {
                scope: "http".into(),
                path: path.display().to_string(),
                format: "m".into(),
                at: "n.conf:1".into(),
                ..Default::default()
            }],
            log_formats: vec![LogFormatValue {
                name: "m".into(),
                escape: "default".into(),
                format: format.into(),
                at: "n.conf:2".into(),
            }],
            ..Default::default()
        };
        let me = std::process::id();
        let fds = |files: &[&std::fs::File]| {
            let held: BTreeMap<u32, u32> = files
                .iter()
                .map(|f| {
                    (
                        f.as_raw_fd() as u32,
                        nginx_probe_common::fd_kind::ACCESS_LOG,
                    )
                })
                .collect();
            BTreeMap::from([(me, held)])
        };
        let mut logs = AccessLogs::default();
        logs.configure(me, &cfg(&a, "$status $remote_user"));
        logs.poll(&fds(&[&fa]), true);
        writeln!(fa, "200 x").unwrap();
        writeln!(fa, "404 x").unwrap();
        // Reload 1: the format becomes `[$status] $request_time`; old workers write on.
        logs.configure(me, &cfg(&a, "[$status] $request_time \"$http_user_agent\""));
        writeln!(fa, "500 old-worker").unwrap();
        writeln!(fa, "[200] 0.010 \"ua\"").unwrap();
        logs.poll(&fds(&[&fa]), true);
        // Reload 2: the log moves to b.log (created now, after attach); the new workers
        // wrote two lines before the probe read the configuration again.
        let mut fb = std::fs::File::create(&b).unwrap();
        writeln!(fb, "[201] 0.020 \"ua\"").unwrap();
        writeln!(fb, "[201] 0.030 \"ua\"").unwrap();
        writeln!(fa, "[503] 0.040 \"ua\"").unwrap();
        logs.configure(me, &cfg(&b, "[$status] $request_time \"$http_user_agent\""));
        logs.poll(&fds(&[&fa, &fb]), true);
        let r = logs.report(true).unwrap();
        assert_eq!(r.lines, 7, "{r:?}");
        let st = |c: &str| r.statuses.get(c).copied().unwrap_or(0);
        assert_eq!(
            (st("200"), st("404"), st("500"), st("201"), st("503")),
            (2, 1, 1, 2, 1)
        );
        let per_file: Vec<(String, u64, u64, bool)> = r
            .files
            .iter()
            .map(|f| (f.path.clone(), f.lines, f.unparsed, f.retired))
            .collect();
        assert_eq!(
            per_file,
            [
                (b.display().to_string(), 2, 0, false),
                (a.display().to_string(), 5, 0, true),
            ]
        );
        // Non-UTF-8 bytes (a client's, written raw) do not hide the line.
        fb.write_all(b"[200] 0.001 \"Mozilla \xff\xfe\"\n").unwrap();
        logs.poll(&fds(&[&fa, &fb]), false);
        let r = logs.report(true).unwrap();
        assert_eq!((r.files[0].lines, r.files[0].unparsed), (3, 0), "{r:?}");
        // A reload's new worker writes its new format before the probe reads the new
        // configuration (the suite's flake: 1 line unparsed in 53934): held for one
        // more poll, then counted in the format read meanwhile.
        writeln!(fb, "{{200}} 0.002").unwrap();
        logs.poll(&fds(&[&fa, &fb]), false);
        let r = logs.report(true).unwrap();
        assert_eq!(
            (r.files[0].lines, r.files[0].unparsed),
            (3, 1),
            "pending: {r:?}"
        );
        logs.configure(me, &cfg(&b, "{$status} $request_time"));
        logs.poll(&fds(&[&fa, &fb]), false);
        let r = logs.report(true).unwrap();
        assert_eq!((r.files[0].lines, r.files[0].unparsed), (4, 0), "{r:?}");
        // Still in no format at its second try: unparsed.
        writeln!(fb, "garbage").unwrap();
        logs.poll(&fds(&[&fa, &fb]), false);
        logs.poll(&fds(&[&fa, &fb]), false);
        let r = logs.report(true).unwrap();
        assert_eq!((r.files[0].lines, r.files[0].unparsed), (4, 1), "{r:?}");
    }

    /// The proof that every request is logged once, at once, in the files read: each
    /// way the configuration breaks it is named with its line.
    #[test]
    fn every_request_logged_needs_no_off_if_buffer_or_subrequests() {
        let with = |extra: AccessLogValue| ConfigReport {
            prefix: "/p/".into(),
            access_logs: vec![log("http", "logs/access.log"), extra],
            ..Default::default()
        };
        let ok = with(log("server b", "logs/b.log"));
        assert_eq!(every_request_logged(&ok, &[]), Ok(()));
        let off = with(AccessLogValue {
            path: "off".into(),
            at: "n.conf:9".into(),
            ..log("server b location /x", "off")
        });
        assert_eq!(
            every_request_logged(&off, &[]),
            Err("access_log off (n.conf:9) leaves requests unlogged".into())
        );
        let cond = with(AccessLogValue {
            condition: Some("$loggable".into()),
            ..log("server b", "logs/b.log")
        });
        assert!(every_request_logged(&cond, &[])
            .unwrap_err()
            .contains("if=$loggable"));
        let buf = with(AccessLogValue {
            buffer: Some("32k".into()),
            ..log("server b", "logs/b.log")
        });
        assert!(every_request_logged(&buf, &[])
            .unwrap_err()
            .contains("buffer=32k"));
        let mut sub = ok.clone();
        sub.values.push(crate::model::config::ConfigValue {
            directive: "log_subrequest".into(),
            scope: "http".into(),
            value: "on".into(),
            at: "n.conf:3".into(),
            not_loaded: false,
            unread_may_set: false,
        });
        assert_eq!(
            every_request_logged(&sub, &[]),
            Err("log_subrequest on (n.conf:3) logs subrequests too".into())
        );
        assert!(every_request_logged(&ok, &["x: sent to syslog".into()])
            .unwrap_err()
            .starts_with("an access log is not read: x"));
        let bad = ConfigReport {
            errors: vec!["n.conf:4: unexpected }".into()],
            ..ok
        };
        assert!(every_request_logged(&bad, &[]).is_err());
    }

    /// `nginx -s reopen` closes each log's old fd and opens it again: the fd number
    /// nginx-probe read one log through may then name another log. Each line is still
    /// counted once, in its own file (the newcomer's trial counted 8460 lines twice and
    /// 1144 "not in the format").
    #[test]
    fn an_fd_number_reused_for_another_log_is_not_followed() {
        use crate::model::config::LogFormatValue;
        use std::io::Write;
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.log"), dir.path().join("b.log"));
        let mut fa = std::fs::File::create(&a).unwrap();
        let mut fb = std::fs::File::create(&b).unwrap();
        let cfg = ConfigReport {
            access_logs: ["a", "b"]
                .iter()
                .map(|n| AccessLogValue {
                    scope: format!("server {n}"),
                    path: dir.path().join(format!("{n}.log")).display().to_string(),
                    format: (*n).into(),
                    at: "n.conf:1".into(),
                    ..Default::default()
                })
                .collect(),
            log_formats: vec![
                LogFormatValue {
                    name: "a".into(),
                    escape: "default".into(),
                    format: "a $status".into(),
                    at: "n.conf:2".into(),
                },
                LogFormatValue {
                    name: "b".into(),
                    escape: "default".into(),
                    format: "b $status".into(),
                    at: "n.conf:3".into(),
                },
            ],
            ..Default::default()
        };
        let me = std::process::id();
        let kind = nginx_probe_common::fd_kind::ACCESS_LOG;
        let mut logs = AccessLogs::default();
        logs.configure(me, &cfg);
        let (na, nb) = (fa.as_raw_fd() as u32, fb.as_raw_fd() as u32);
        let held = BTreeMap::from([(me, BTreeMap::from([(na, kind), (nb, kind)]))]);
        logs.poll(&held, true);
        writeln!(fa, "a 200").unwrap();
        writeln!(fb, "b 201").unwrap();
        logs.poll(&held, false);
        // "Reopen": a's fd number now names b.log (a's file is open at another number).
        let fa2 = fa.try_clone().unwrap();
        drop(fa);
        // SAFETY: dup2 onto the number `fa` had (free now); we own the result.
        let moved = unsafe { libc::dup2(fb.as_raw_fd(), na as i32) };
        assert_eq!(moved, na as i32);
        // SAFETY: dup2 returned an fd we now own.
        let _moved = unsafe { OwnedFd::from_raw_fd(moved) };
        let mut fa = fa2;
        for _ in 0..3 {
            writeln!(fa, "a 200").unwrap();
            writeln!(fb, "b 201").unwrap();
        }
        let held = BTreeMap::from([(
            me,
            BTreeMap::from([(na, kind), (nb, kind), (fa.as_raw_fd() as u32, kind)]),
        )]);
        logs.poll(&held, false);
        logs.poll(&held, true);
        let r = logs.report(true).unwrap();
        let per_file: Vec<(u64, u64)> = r.files.iter().map(|f| (f.lines, f.unparsed)).collect();
        assert_eq!(per_file, [(4, 0), (4, 0)], "{r:?}");
        assert_eq!(r.statuses.get("200"), Some(&4));
        assert_eq!(r.statuses.get("201"), Some(&4));
    }
}
