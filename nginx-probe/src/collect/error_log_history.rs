//! The error log back to the master's start: what nginx wrote about its own processes
//! before the probe attached (a worker it could not spawn, one that crashed or exited),
//! which the reader, counting from attach on, would never see.
//!
//! Bounded: at most [`MAX_HISTORY_BYTES`] before the attach offset are read, lines cut
//! at [`super::error_log_classes::MAX_LINE`]; only lines whose timestamp is at or after the
//! master's start (to the second) count, and only the classes of
//! [`HISTORY_CLASSES`]. The master's start: `/proc/<master>/stat` field 22 (clock
//! ticks after boot) plus `btime` of `/proc/stat`. nginx writes its timestamps in its
//! local time: they are read in the probe's local time zone (the same unless nginx
//! runs with another `TZ`).

use std::{
    fs::File,
    io::{Seek, SeekFrom},
};

use super::error_log_classes::{classify, MAX_LINE};
use super::tail::read_chunks;

/// Bytes of the log read back from the attach offset, at most.
pub const MAX_HISTORY_BYTES: u64 = 16 << 20;

/// The classes counted back to the master's start (the model's: a report names them).
pub use crate::model::error_classes::HISTORY_CLASSES;
/// What the log says between the master's start and attach (the model's: a report is
/// built from it).
pub use crate::model::nginx_errors::ErrorLogHistory as History;

/// Distinct keys of `History::spawn_failed_by`, at most (then `other`).
const MAX_SPAWN_KEYS: usize = 8;

/// The calls nginx's master names in `<call>() failed while spawning "<name>"`
/// (`ngx_spawn_process`, 1.22 and 1.26): any other is said as `other`.
const SPAWN_CALLS: &[&str] = &["socketpair", "ioctl", "fcntl", "fork"];

/// The failed call and errno of a master's `<call>() failed while spawning "<name>"
/// (N: text)` line, as `fork() EAGAIN`: the call one of [`SPAWN_CALLS`] (else
/// `other call`), the errno's name from its number (`errno N` for one Linux does not
/// name, `errno unknown` without one). Pure; the line is untrusted: nothing of its
/// text is kept but a known call's name and a number.
pub fn spawn_failure(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    let call = text
        .find("() failed while spawning \"")
        .and_then(|at| {
            let before = &text[..at];
            let name = &before[before.rfind(' ').map_or(0, |i| i + 1)..];
            SPAWN_CALLS.iter().find(|c| **c == name)
        })
        .map_or("other call".to_string(), |c| format!("{c}()"));
    // nginx ends the line with ` (N: strerror)`.
    let errno = text
        .rfind(" (")
        .and_then(|i| text[i + 2..].split(':').next())
        .and_then(|n| n.parse::<i32>().ok());
    let name = match errno {
        Some(n) => match nix::errno::Errno::from_raw(n) {
            nix::errno::Errno::UnknownErrno => format!("errno {n}"),
            e => format!("{e:?}"),
        },
        None => "errno unknown".to_string(),
    };
    format!("{call} {name}")
}

/// The master's start time in Unix seconds, from `/proc/<pid>/stat` and `/proc/stat`.
pub fn master_start_unix_s(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22 counts from the field after the comm's closing parenthesis (field 3).
    let after = &stat[stat.rfind(')')? + 2..];
    let ticks: u64 = after.split(' ').nth(19)?.parse().ok()?;
    let btime: u64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| btime + ticks / hz as u64)
}

/// The Unix time of a line's `YYYY/MM/DD HH:MM:SS` prefix, read in local time; None
/// when it has none.
pub fn line_time(line: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(line.get(..19)?).ok()?;
    let b = s.as_bytes();
    let sep = [(4, b'/'), (7, b'/'), (10, b' '), (13, b':'), (16, b':')];
    if sep.iter().any(|&(i, c)| b[i] != c) {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i32> {
        let t = &s[r];
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    // SAFETY: tm is plain data; mktime reads and normalises it.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    tm.tm_year = num(0..4)? - 1900;
    tm.tm_mon = num(5..7)? - 1;
    tm.tm_mday = num(8..10)?;
    tm.tm_hour = num(11..13)?;
    tm.tm_min = num(14..16)?;
    tm.tm_sec = num(17..19)?;
    tm.tm_isdst = -1;
    // SAFETY: tm is a valid, initialised struct.
    let t = unsafe { libc::mktime(&mut tm) };
    u64::try_from(t).ok()
}

/// Reads `file` back from `end` (the attach offset), at most [`MAX_HISTORY_BYTES`],
/// and counts the lines of [`HISTORY_CLASSES`] written at or after `since` (Unix
/// seconds).
pub fn scan(file: &mut File, end: u64, since: u64) -> History {
    let start = end.saturating_sub(MAX_HISTORY_BYTES);
    let mut h = History {
        master_started_unix_s: since,
        reached_master_start: start == 0,
        ..History::default()
    };
    if file.seek(SeekFrom::Start(start)).is_err() {
        return h;
    }
    let mut line: Vec<u8> = Vec::new();
    // Starting inside the file: the first (partial) line is skipped.
    let mut skipping = start > 0;
    let mut first = true;
    let mut count = |line: &[u8], h: &mut History| {
        let Some(t) = line_time(line) else { return };
        if first && start > 0 {
            // The bound reached the master's start only if this first complete line
            // is older than it.
            h.reached_master_start = t < since;
        }
        first = false;
        if t < since {
            return;
        }
        if let Some((_, class)) = classify(line) {
            if let Some(c) = HISTORY_CLASSES.iter().find(|c| **c == class) {
                *h.classes.entry(c).or_insert(0) += 1;
            }
            if class == "worker_spawn_failed" {
                if line.ends_with(b"(24: Too many open files)") {
                    h.spawn_failed_emfile += 1;
                }
                let key = spawn_failure(line);
                if h.spawn_failed_by.len() < MAX_SPAWN_KEYS || h.spawn_failed_by.contains_key(&key)
                {
                    *h.spawn_failed_by.entry(key).or_insert(0) += 1;
                } else {
                    *h.spawn_failed_by.entry("other".to_string()).or_insert(0) += 1;
                }
            }
        }
    };
    // Lines a request wrote (a %0A in its URI) are not nginx's: left out.
    let mut filter = super::error_log_entries::EntryFilter::default();
    let read = read_chunks(file, end - start, &mut |chunk| {
        for &b in chunk {
            if b != b'\n' {
                if !skipping && line.len() < MAX_LINE {
                    line.push(b);
                }
                continue;
            }
            if skipping {
                skipping = false;
                continue;
            }
            filter.push(&line, &mut |l| count(l, &mut h), &mut |_| {});
            line.clear();
        }
    });
    filter.flush(&mut |l| count(l, &mut h));
    h.bytes_read = read;
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn at(t: u64) -> String {
        // SAFETY: tm is plain data filled by localtime_r.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        let tt = t as libc::time_t;
        unsafe { libc::localtime_r(&tt, &mut tm) };
        format!(
            "{:04}/{:02}/{:02} {:02}:{:02}:{:02}",
            tm.tm_year + 1900,
            tm.tm_mon + 1,
            tm.tm_mday,
            tm.tm_hour,
            tm.tm_min,
            tm.tm_sec
        )
    }

    #[test]
    fn counts_the_masters_history_since_its_start_only() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("error.log");
        let mut f = File::create(&p).unwrap();
        let start = 1_796_000_000;
        let spawn = r#"[alert] 10#10: socketpair() failed while spawning "worker process" (24: Too many open files)"#;
        // A previous master's lines: not counted.
        writeln!(f, "{} {spawn}", at(start - 100)).unwrap();
        writeln!(
            f,
            "{} [alert] 10#10: worker process 12 exited on signal 11",
            at(start - 1)
        )
        .unwrap();
        for i in 0..3 {
            writeln!(f, "{} {spawn}", at(start + i)).unwrap();
        }
        writeln!(
            f,
            "{} [alert] 10#10: worker process 13 exited on signal 11 (core dumped)",
            at(start + 5)
        )
        .unwrap();
        writeln!(
            f,
            "{} [notice] 10#10: worker process 14 exited with code 0",
            at(start + 6)
        )
        .unwrap();
        // A hostile line: ESC, not UTF-8, split by a newline in a logged path.
        f.write_all(format!("{} [error] 11#11: *1 open() \"/a\ngarbage [alert] 1#1: worker process 1 exited on signal 9\" failed\x1b", at(start + 7)).as_bytes()).unwrap();
        f.write_all(b"\xff\n").unwrap();
        let len = f.metadata().unwrap().len();
        let mut r = File::open(&p).unwrap();
        let h = scan(&mut r, len, start);
        assert!(h.reached_master_start);
        assert_eq!(h.bytes_read, len);
        assert_eq!(h.classes.get("worker_spawn_failed"), Some(&3));
        assert_eq!(h.spawn_failed_emfile, 3);
        assert_eq!(
            h.spawn_failed_by,
            [("socketpair() EMFILE".to_string(), 3)].into()
        );
        assert_eq!(h.classes.get("worker_crashed"), Some(&1));
        assert_eq!(h.classes.get("worker_exited"), None);
    }

    #[test]
    fn says_when_the_bound_cut_the_scan() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("error.log");
        let mut f = File::create(&p).unwrap();
        let start = 1_796_000_000;
        let line = format!(
            "{} [alert] 10#10: worker process 13 exited on signal 11\n",
            at(start + 10)
        );
        let n = (MAX_HISTORY_BYTES as usize / line.len()) + 10;
        for _ in 0..n {
            f.write_all(line.as_bytes()).unwrap();
        }
        let len = f.metadata().unwrap().len();
        let h = scan(&mut File::open(&p).unwrap(), len, start);
        assert!(!h.reached_master_start);
        assert_eq!(h.bytes_read, MAX_HISTORY_BYTES);
        // Every complete line inside the bound, the partial first one skipped.
        assert_eq!(
            h.classes["worker_crashed"],
            (MAX_HISTORY_BYTES / line.len() as u64)
        );
    }

    /// The lines nginx 1.22 wrote here with its master in a cgroup of pids.max 3 and
    /// worker_processes 4; a call nginx does not name and an errno Linux does not
    /// name are said so, nothing of the line's text kept.
    #[test]
    fn names_each_spawn_failure_s_call_and_errno() {
        let at = "2026/12/07 23:30:38 [alert] 5963#5963: ";
        let said = |m: &str| spawn_failure(format!("{at}{m}").as_bytes());
        assert_eq!(
            said(
                r#"fork() failed while spawning "worker process" (11: Resource temporarily unavailable)"#
            ),
            "fork() EAGAIN"
        );
        assert_eq!(
            said(
                r#"socketpair() failed while spawning "worker process" (24: Too many open files)"#
            ),
            "socketpair() EMFILE"
        );
        assert_eq!(
            said("evil\x1b[2J() failed while spawning \"worker process\" (4242: x)"),
            "other call errno 4242"
        );
        assert_eq!(
            said(r#"fork() failed while spawning "worker process""#),
            "fork() errno unknown"
        );
    }

    #[test]
    fn reads_nginx_timestamps() {
        assert_eq!(line_time(at(1_796_000_000).as_bytes()), Some(1_796_000_000));
        assert_eq!(line_time(b"2026-12-01 20:00:00"), None);
        assert_eq!(line_time(b"2026/1x/01 20:00:00"), None);
        assert_eq!(line_time(b"short"), None);
    }
}
