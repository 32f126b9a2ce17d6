//! nginx's own words: what it appends to its error log from attach on, counted by
//! message class (`limiting requests` -> limit_req, `upstream timed out` ->
//! proxy_read_timeout, ...). Requests refused or failed inside nginx (limit_req and
//! limit_conn 503s, upstream 502/504s) leave no trace in the workers' syscalls; nginx
//! logs each one.
//!
//! The file read is the one nginx writes: its master's fd 2, which nginx points at the
//! main `error_log` file (`ngx_log_redirect_stderr`), opened through
//! `/proc/<master>/fd/2` so that no path (renamed, replaced by a symlink) is followed.
//! Reading starts at the file's size at attach and follows appends every poll; a new
//! file behind fd 2 (rotation then `nginx -s reopen`, USR1) is read from its start, a
//! truncated one (copytruncate) from 0 again. Reads are bounded: [`MAX_READ_PER_POLL`]
//! bytes a poll, lines cut at [`MAX_LINE`] bytes, a backlog past
//! [`MAX_BACKLOG`] skipped (and counted). The file is written by whoever can write it:
//! lines are parsed, never kept. Only a line's level and class are counted; client
//! addresses, URIs, hosts and everything else in a line are dropped at once. One
//! exception: the last 8 `[emerg]` lines (nginx's configuration errors; 300 bytes of
//! message each, with the writer's pid) are held in memory, so that a measured failed
//! configuration load can quote nginx's reason; only the one line of the process whose
//! load failed reaches a report.
//!
//! Not read: `error_log` directives inside `http`/`server`/`location` blocks (their
//! files look like access logs from /proc), `syslog:` and `stderr` targets.

use super::tail::{Polled, Tail};
pub use super::tail::{MAX_BACKLOG, MAX_READ_PER_POLL};

pub use super::error_log_classes::{
    class, classify, emerg_line, message_class, Class, Group, CLASSES, LEVELS, MAX_LINE,
};
use crate::model::nginx_errors::{EmergLine, MAX_EMERG_KEPT};

/// Counts by class, then by level index ([`LEVELS`]) (the model's type).
pub use crate::model::error_classes::Counts;

/// Whether the error log could be read, and why not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Being read: its path, as the kernel gives it (raw: the text renderers escape it).
    Reading(String),
    /// Not readable: why (raw, like the path it may quote).
    Unknown(String),
}

/// Reads one nginx master's error log (its fd 2) from attach on; see the module doc.
pub struct ErrorLogReader {
    /// `/proc/<master>/fd/2`: the link to the file nginx writes.
    fd_path: String,
    /// The file followed (`collect::tail`): its offset, cut lines, skipped bytes,
    /// truncations and files read.
    pub tail: Tail,
    /// What is known of the file.
    pub status: Status,
    counts: Counts,
    interval_base: Counts,
    skipped_interval_base: u64,
    truncations_interval_base: u64,
    /// The master whose fd 2 this is (None in tests of a plain link).
    master: Option<u32>,
    /// The first file read back to the master's start (see `error_log_history`).
    pub history: Option<super::error_log_history::History>,
    /// Upstream-class lines per peer since attach, and at the interval's start.
    pub peers: super::error_log_peers::PeerCounts,
    peers_interval_base: super::error_log_peers::PeerCounts,
    /// Lines held until no later line shows a request wrote them.
    filter: super::error_log_entries::EntryFilter,
    /// The distinct worker pids of the crash lines read since attach (at most
    /// [`MAX_CRASH_PIDS`]), to be checked against the workers the kernel saw: only a
    /// pid the check confirms is a crash (see `Tracker::crash_lines_contradicted`).
    pub crash_pids: Vec<u32>,
    /// The last `[emerg]` lines read (at most `MAX_EMERG_KEPT`), each with its
    /// number among the emerg lines read since attach.
    emerg: std::collections::VecDeque<(u64, EmergLine)>,
    /// `[emerg]` lines read since attach, and at the interval's start.
    emerg_read: u64,
    emerg_interval_base: u64,
}

/// Crash lines whose pid is kept for checking, at most.
pub const MAX_CRASH_PIDS: usize = 64;

/// The class of lines a request wrote into the log (`%0A`s in its URI).
pub const WRITTEN_BY_REQUEST: &str = "written_by_request";

/// [`LEVELS`]' index of `error`.
const ERROR_LEVEL: usize = 3;

impl ErrorLogReader {
    /// A reader for master `master`'s error log; nothing is read until [`poll`].
    ///
    /// [`poll`]: ErrorLogReader::poll
    pub fn new(master: u32) -> ErrorLogReader {
        ErrorLogReader {
            master: Some(master),
            ..ErrorLogReader::at(format!("/proc/{master}/fd/2"))
        }
    }

    /// A reader of the file behind the link `fd_path` (a `/proc/<pid>/fd/<n>` entry,
    /// or any symlink in tests).
    pub fn at(fd_path: String) -> ErrorLogReader {
        ErrorLogReader {
            fd_path,
            tail: Tail::new(MAX_LINE),
            status: Status::Unknown("not looked at yet".into()),
            counts: Counts::new(),
            interval_base: Counts::new(),
            truncations_interval_base: 0,
            skipped_interval_base: 0,
            master: None,
            history: None,
            peers: Default::default(),
            peers_interval_base: Default::default(),
            filter: Default::default(),
            crash_pids: Vec::new(),
            emerg: Default::default(),
            emerg_read: 0,
            emerg_interval_base: 0,
        }
    }

    /// Reads what nginx appended since the last poll (at most [`MAX_READ_PER_POLL`]
    /// bytes) and counts its lines. Called every 500 ms; the first file found is
    /// read from where it ended then.
    pub fn poll(&mut self) {
        let not_file = |link: &str| {
            format!(
                "nginx's fd 2 is {link}, not a regular file (error_log to stderr or syslog, or a pipe to a log collector)"
            )
        };
        let master = self.master;
        let history = &mut self.history;
        // What nginx wrote about its processes before attach, back to the master's
        // start (bounded).
        let mut first = |file: &mut std::fs::File, offset: u64| {
            use super::error_log_history as h;
            if let Some(since) = master.and_then(h::master_start_unix_s) {
                *history = Some(h::scan(file, offset, since));
            }
        };
        let (counts, peers) = (&mut self.counts, &mut self.peers);
        let crash_pids = &mut self.crash_pids;
        let (emerg, emerg_read) = (&mut self.emerg, &mut self.emerg_read);
        let mut line = |l: &[u8]| {
            if let Some((level, class)) = classify(l) {
                counts.entry(class).or_insert([0; 8])[level] += 1;
                if let Some(e) = (level == 0).then(|| emerg_line(l)).flatten() {
                    *emerg_read += 1;
                    if emerg.len() == MAX_EMERG_KEPT {
                        emerg.pop_front();
                    }
                    emerg.push_back((*emerg_read, e));
                }
                if class == "worker_crashed" && crash_pids.len() < MAX_CRASH_PIDS {
                    // Distinct pids: a worker crashes once; lines repeating a pid, or
                    // beyond the bound, are never counted as crashes.
                    if let Some(pid) = super::error_log_classes::exited_worker_pid(l)
                        .filter(|p| !crash_pids.contains(p))
                    {
                        crash_pids.push(pid);
                    }
                }
                if super::error_log_classes::class(class)
                    .is_some_and(|c| c.group == Group::Upstream)
                {
                    peers.add(&String::from_utf8_lossy(l), class);
                }
            }
        };
        // Lines a request wrote into the log are counted as such, at their level
        // (error when they have none), never as nginx's words.
        let mut forged_lines: Vec<usize> = Vec::new();
        let mut forged = |l: &[u8]| forged_lines.push(classify(l).map_or(ERROR_LEVEL, |c| c.0));
        let filter = &mut self.filter;
        let polled = self
            .tail
            .poll(&self.fd_path, &not_file, &mut first, &mut |l| {
                filter.push(l, &mut line, &mut forged)
            });
        filter.flush(&mut line);
        for level in forged_lines {
            counts.entry(WRITTEN_BY_REQUEST).or_insert([0; 8])[level] += 1;
        }
        match polled {
            Polled::Read => {}
            Polled::Opened(path) => self.status = Status::Reading(path),
            // The master gone: keep what was known and counted.
            Polled::Gone(why) if !self.tail.has_file() => self.status = Status::Unknown(why),
            Polled::Gone(_) => {}
            Polled::Failed(why) => self.status = Status::Unknown(why),
        }
    }

    /// Starts a new interval.
    pub fn start_interval(&mut self) {
        self.interval_base = self.counts.clone();
        self.skipped_interval_base = self.tail.bytes_skipped;
        self.truncations_interval_base = self.tail.truncations;
        self.peers_interval_base = self.peers.clone();
        self.emerg_interval_base = self.emerg_read;
    }

    /// The last `[emerg]` lines read since attach (`summary`) or in the interval,
    /// oldest first, at most `MAX_EMERG_KEPT`.
    pub fn emerg_lines(&self, summary: bool) -> Vec<EmergLine> {
        self.emerg
            .iter()
            .filter(|(n, _)| summary || *n > self.emerg_interval_base)
            .map(|(_, e)| e.clone())
            .collect()
    }

    /// Counts since attach (`summary`) or since the interval started.
    pub fn counts(&self, summary: bool) -> Counts {
        if summary {
            return self.counts.clone();
        }
        let mut out = Counts::new();
        for (class, now) in &self.counts {
            let base = self.interval_base.get(class).copied().unwrap_or([0; 8]);
            let mut d = [0u64; 8];
            for i in 0..8 {
                d[i] = now[i].saturating_sub(base[i]);
            }
            if d.iter().any(|&n| n > 0) {
                out.insert(class, d);
            }
        }
        out
    }

    /// Upstream-class lines per peer since attach (`summary`) or in the interval.
    pub fn peer_counts(&self, summary: bool) -> super::error_log_peers::PeerCounts {
        if summary {
            self.peers.clone()
        } else {
            self.peers.since(&self.peers_interval_base)
        }
    }

    /// Truncations seen since attach or in the interval.
    pub fn truncated(&self, summary: bool) -> u64 {
        let t = self.tail.truncations;
        if summary {
            t
        } else {
            t - self.truncations_interval_base.min(t)
        }
    }

    /// Bytes skipped since attach or in the interval.
    pub fn skipped(&self, summary: bool) -> u64 {
        let b = self.tail.bytes_skipped;
        if summary {
            b
        } else {
            b - self.skipped_interval_base.min(b)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_nginx_wording_without_keeping_request_data() {
        let c = |l: &str| classify(l.as_bytes());
        assert_eq!(
            c(
                r#"2026/11/30 16:52:42 [error] 1234#1234: *5 limiting requests, excess: 0.800 by zone "z", client: 127.0.0.1, server: , request: "GET / HTTP/1.1", host: "x""#
            ),
            Some((3, "limit_req"))
        );
        assert_eq!(
            c(
                r#"2026/11/30 16:52:42 [error] 1234#1234: *5 limiting requests, dry run, excess: 0.800 by zone "z", client: 127.0.0.1"#
            ),
            Some((3, "limit_req_dry_run"))
        );
        assert_eq!(
            c(
                r#"2026/11/30 16:52:42 [error] 9#9: *77 limiting connections by zone "c", client: 10.0.0.1"#
            ),
            Some((3, "limit_conn"))
        );
        assert_eq!(
            c("2026/11/30 16:52:42 [warn] 9#9: 64 worker_connections are not enough, reusing connections"),
            Some((4, "worker_connections_reusing"))
        );
        assert_eq!(
            c("2026/11/30 16:52:42 [alert] 9#9: 64 worker_connections are not enough"),
            Some((1, "worker_connections"))
        );
        assert_eq!(
            c("2026/11/30 16:52:42 [alert] 9#9: *3 socket() failed (24: Too many open files) while connecting to upstream, client: 1.2.3.4"),
            Some((1, "emfile"))
        );
        assert_eq!(
            c("2026/11/30 16:52:42 [crit] 9#9: accept4() failed (24: Too many open files)"),
            Some((2, "emfile"))
        );
        assert_eq!(
            c("2026/11/30 16:52:42 [error] 9#9: *3 upstream timed out (110: Connection timed out) while reading response header from upstream, client: 1.2.3.4"),
            Some((3, "upstream_read_timeout"))
        );
        assert_eq!(
            c("2026/11/30 16:52:42 [error] 9#9: *3 upstream timed out (110: Connection timed out) while connecting to upstream, client: 1.2.3.4"),
            Some((3, "upstream_connect_timeout"))
        );
        assert_eq!(
            c("2026/11/30 16:52:42 [error] 9#9: *3 connect() failed (111: Connection refused) while connecting to upstream, client: 1.2.3.4"),
            Some((3, "upstream_connect_failed"))
        );
        assert_eq!(
            c("2026/11/30 16:52:42 [error] 9#9: *3 no live upstreams while connecting to upstream, client: 1.2.3.4"),
            Some((3, "no_live_upstreams"))
        );
        assert_eq!(
            c("2026/11/30 16:52:42 [error] 9#9: *3 backend.example could not be resolved (110: Operation timed out), client: 1.2.3.4"),
            Some((3, "resolver"))
        );
        assert_eq!(
            c(
                r#"2026/11/30 16:52:42 [error] 9#9: *3 open() "/x/limiting requests" failed (2: No such file or directory), client: 1.2.3.4"#
            ),
            Some((3, "file_not_found"))
        );
        // A URI that mimics a message does not change the class: only the message's
        // start is nginx's.
        assert_eq!(
            c(
                r#"2026/11/30 16:52:42 [info] 9#9: *3 client closed connection while waiting for request, client: 1.2.3.4, request: "GET /limiting requests""#
            ),
            Some((6, "client_closed"))
        );
        assert_eq!(c("garbage"), None);
        assert_eq!(c("2026/11/30 16:52:42 [bogus] 9#9: x"), None);
        assert_eq!(c("2026/11/30 16:52:42 [error] 9#x: x"), None);
        assert_eq!(c(""), None);
        assert_eq!(c("\u{1b}]0;title\u{7}"), None);
    }

    #[test]
    fn every_class_is_in_the_table() {
        for msg in [
            "limiting requests, excess",
            "upstream sent too big header while reading response header from upstream",
            "upstream prematurely closed connection while reading response header from upstream",
            "recv() failed (104: Connection reset by peer) while reading response header from upstream",
            "client intended to send too large body: 2000000 bytes",
            "SSL_do_handshake() failed",
            "something new",
        ] {
            assert!(class(message_class(msg)).is_some(), "{msg}");
        }
    }

    #[test]
    fn the_last_emerg_lines_are_held_bounded_with_their_pid_by_period() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("error.log");
        let link = dir.path().join("fd2");
        let mut f = std::fs::File::create(&log).unwrap();
        std::os::unix::fs::symlink(&log, &link).unwrap();
        let mut r = ErrorLogReader::at(link.to_string_lossy().into_owned());
        r.poll();
        let emerg =
            |pid: u32, msg: &str| format!("2026/12/06 05:01:02 [emerg] {pid}#{pid}: {msg}\n");
        f.write_all(emerg(7, "unknown directive \"x\" in /etc/nginx/nginx.conf:3").as_bytes())
            .unwrap();
        // Not emerg: not held.
        f.write_all(b"2026/12/06 05:01:02 [alert] 7#7: something\n")
            .unwrap();
        r.poll();
        assert_eq!(
            r.emerg_lines(true),
            vec![EmergLine {
                pid: 7,
                message: "unknown directive \"x\" in /etc/nginx/nginx.conf:3".into()
            }]
        );
        r.start_interval();
        assert!(r.emerg_lines(false).is_empty());
        // Ten more, one overlong: the last 8 held, the message cut at 300 bytes.
        for i in 0..9 {
            f.write_all(emerg(8, &format!("bind() failed {i}")).as_bytes())
                .unwrap();
        }
        f.write_all(emerg(9, &"é".repeat(400)).as_bytes()).unwrap();
        r.poll();
        let held = r.emerg_lines(false);
        assert_eq!(held.len(), MAX_EMERG_KEPT);
        assert_eq!(held[0].message, "bind() failed 2");
        assert_eq!(held[7].pid, 9);
        assert_eq!(held[7].message, "é".repeat(150));
        assert_eq!(r.emerg_lines(true).len(), MAX_EMERG_KEPT);
    }

    #[test]
    fn reads_appends_from_attach_through_rotation_and_truncation() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("error.log");
        let link = dir.path().join("fd2");
        let line =
            |msg: &str| format!("2026/11/30 16:52:42 [error] 7#7: *1 {msg}, client: 1.2.3.4\n");
        let mut f = std::fs::File::create(&log).unwrap();
        // Before attach: not counted.
        f.write_all(line("limiting requests, excess: 1.000 by zone \"z\"").as_bytes())
            .unwrap();
        std::os::unix::fs::symlink(&log, &link).unwrap();
        let mut r = ErrorLogReader::at(link.to_string_lossy().into_owned());
        r.poll();
        assert_eq!(r.status, Status::Reading(link_target(&link)));
        assert!(r.counts(true).is_empty());
        // Two appends, one split across polls.
        f.write_all(line("limiting requests, excess: 1.000 by zone \"z\"").as_bytes())
            .unwrap();
        f.write_all(b"2026/11/30 16:52:42 [warn] 7#7: 64 worker_connections are not")
            .unwrap();
        r.poll();
        f.write_all(b" enough, reusing connections\n").unwrap();
        r.poll();
        assert_eq!(r.counts(true)["limit_req"][3], 1);
        assert_eq!(r.counts(true)["worker_connections_reusing"][4], 1);
        r.start_interval();
        // An overlong line is cut, still classified, and never kept whole.
        let long = format!(
            "limiting requests, excess: 1.000 by zone \"{}\"",
            "x".repeat(10_000)
        );
        f.write_all(line(&long).as_bytes()).unwrap();
        r.poll();
        assert_eq!(r.tail.lines_cut, 1);
        assert_eq!(r.counts(false)["limit_req"][3], 1);
        // Rotation: the old file renamed, a new one behind fd 2 (nginx -s reopen).
        f.write_all(line("no live upstreams while connecting to upstream").as_bytes())
            .unwrap();
        let rotated = dir.path().join("error.log.1");
        std::fs::rename(&log, &rotated).unwrap();
        let mut g = std::fs::File::create(&log).unwrap();
        g.write_all(line("upstream timed out (110: Connection timed out) while reading response header from upstream").as_bytes())
            .unwrap();
        r.poll();
        assert_eq!(r.tail.files, 2);
        assert_eq!(
            r.counts(true)["no_live_upstreams"][3],
            1,
            "old file read to its end"
        );
        assert_eq!(
            r.counts(true)["upstream_read_timeout"][3],
            1,
            "new file from 0"
        );
        // Truncation (copytruncate): read from 0 again.
        g.set_len(0).unwrap();
        let mut g = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        g.write_all(line("limiting connections by zone \"c\"").as_bytes())
            .unwrap();
        r.poll();
        assert_eq!(r.counts(true)["limit_conn"][3], 1);
        assert_eq!(r.counts(true)["limit_req"][3], 2);
        assert_eq!(r.tail.bytes_skipped, 0);
        // Said, since lines written just before it may be lost.
        assert_eq!(r.truncated(true), 1);
    }

    /// `error_log /dev/null`: the lines are discarded, said so (not "not a regular
    /// file"); unknown, not zero. A pipe to a log collector is not a regular file.
    #[test]
    fn a_fd_2_on_dev_null_is_discarded_and_a_fifo_is_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let null = dir.path().join("fd2-null");
        std::os::unix::fs::symlink("/dev/null", &null).unwrap();
        let mut p = ErrorLogReader::at(null.to_string_lossy().into_owned());
        p.poll();
        assert!(matches!(p.status, Status::Unknown(ref w) if w == crate::collect::tail::DISCARDED));
        // A pipe to a log collector: not a regular file, with the reason.
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let fd2 = dir.path().join("fd2-fifo");
        std::os::unix::fs::symlink(&fifo, &fd2).unwrap();
        let mut p = ErrorLogReader::at(fd2.to_string_lossy().into_owned());
        p.poll();
        assert!(matches!(p.status, Status::Unknown(ref w) if w.contains("not a regular file")));
    }

    #[test]
    fn the_path_is_kept_raw_for_json_and_escaped_only_by_the_renderers() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("err\x1b[2J\nx.log");
        std::fs::write(&log, b"").unwrap();
        let link = dir.path().join("fd2");
        std::os::unix::fs::symlink(&log, &link).unwrap();
        let mut r = ErrorLogReader::at(link.to_string_lossy().into_owned());
        r.poll();
        assert_eq!(r.status, Status::Reading(log.to_str().unwrap().to_string()));
    }

    fn link_target(link: &std::path::Path) -> String {
        std::fs::read_link(link)
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }
}
