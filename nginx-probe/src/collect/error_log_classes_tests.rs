//! The classifier against nginx 1.22.1's and 1.26.3's own message formats
//! (`testdata/nginx_error_formats.tsv`), and hostile lines.

use super::*;
use crate::collect::error_log::{classify, LEVELS};
use crate::collect::error_log_entries::*;

/// nginx's message formats with the class each must get (see the file's header).
const FORMATS: &str = include_str!("../testdata/nginx_error_formats.tsv");

/// `fmt` with its nginx %-specifiers (`%V`, `%s`, `%*s`, `%ui`, `%04Xd`, ...)
/// replaced, in order, by `values` (then by `x` for strings and `1` for numbers).
pub(crate) fn render(fmt: &str, values: &[&str]) -> String {
    let mut out = String::new();
    let mut vals = values.iter();
    let mut it = fmt.chars().peekable();
    while let Some(ch) = it.next() {
        if ch != '%' {
            out.push(ch);
            continue;
        }
        if it.peek() == Some(&'%') {
            it.next();
            out.push('%');
            continue;
        }
        while it
            .peek()
            .is_some_and(|c| c.is_ascii_digit() || *c == '*' || *c == '-')
        {
            it.next();
        }
        while it
            .peek()
            .is_some_and(|c| matches!(c, 'u' | 'x' | 'X' | 'l'))
        {
            it.next();
        }
        let conv = it.next().unwrap_or('s');
        let default = if matches!(conv, 's' | 'V' | 'v') {
            "x"
        } else {
            "1"
        };
        out.push_str(vals.next().copied().unwrap_or(default));
    }
    out
}

/// Every row: (level, versions, expected class, format, values).
fn rows() -> Vec<(
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    Vec<&'static str>,
)> {
    FORMATS
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert!(f.len() == 4 || f.len() == 5, "bad fixture row {l:?}");
            let vals = f.get(4).map(|v| v.split('|').collect()).unwrap_or_default();
            (f[0], f[1], f[2], f[3], vals)
        })
        .collect()
}

#[test]
fn every_nginx_format_gets_its_class() {
    let rows = rows();
    let mut wrong = Vec::new();
    let (mut v122, mut v126) = (0, 0);
    for (level, versions, want, fmt, vals) in &rows {
        let msg = render(fmt, vals);
        let line = format!("2026/11/30 16:52:42 [{level}] 9#9: *3 {msg}, client: 1.2.3.4");
        let got = classify(line.as_bytes());
        let lvl = LEVELS.iter().position(|l| l == level).unwrap();
        if got != Some((lvl, want)) {
            wrong.push(format!("{level}\t{want}\t{fmt}\t-> {got:?}"));
        }
        assert!(class(want).is_some(), "{want} is not in CLASSES");
        v122 += (*versions != "1.26") as usize;
        v126 += (*versions != "1.22") as usize;
    }
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    // The fixture's size, so that a shortened file fails.
    assert_eq!((rows.len(), v122, v126), (736, 657, 729));
}

#[test]
fn only_formats_without_words_are_other() {
    // `other` is for wording nginx does not have: the only nginx formats there are
    // the ones that carry no words of nginx's (`%*s`: a text made elsewhere).
    let others: Vec<&str> = rows()
        .into_iter()
        .filter(|r| r.2 == "other")
        .map(|r| r.3)
        .collect();
    assert_eq!(others, ["%*s"]);
}

#[test]
fn every_class_is_reachable_from_nginx_formats() {
    let rows = rows();
    for c in CLASSES {
        assert!(
            // `written_by_request` is no wording: the reader's class for lines a
            // request wrote (EntryFilter).
            rows.iter().any(|r| r.2 == c.name)
                || c.name == "other"
                || c.name == crate::collect::error_log::WRITTEN_BY_REQUEST,
            "no nginx format for {}",
            c.name
        );
    }
}

#[test]
fn the_lines_of_issue_22_get_real_classes() {
    let c = |m: &str| {
        let line = format!("2026/12/01 20:01:02 [error] 9#9: *3 {m}");
        classify(line.as_bytes()).map(|(_, c)| c)
    };
    let up = r#", client: 127.0.0.1, server: , request: "GET / HTTP/1.1", upstream: "http://127.0.0.2:8602/", host: "x""#;
    for (msg, want) in [
        ("connect() to 127.0.0.2:8602 failed (99: Cannot assign requested address) while connecting to upstream", "upstream_addr_unavailable"),
        ("recv() failed (104: Connection reset by peer) while reading response header from upstream", "upstream_reset"),
        // Trial 21: a backend resetting after 1000 of its 100000 bytes.
        ("readv() failed (104: Connection reset by peer) while reading upstream", "upstream_cut_mid_response"),
        ("upstream prematurely closed connection while reading upstream", "upstream_cut_mid_response"),
        ("upstream timed out (110: Connection timed out) while reading upstream", "upstream_cut_mid_response"),
        ("upstream prematurely closed connection while reading response header from upstream", "upstream_prematurely_closed"),
        ("upstream timed out (110: Connection timed out) while reading response header from upstream", "upstream_read_timeout"),
        ("upstream server temporarily disabled while reading response header from upstream", "upstream_server_disabled"),
        ("connect() to 127.0.0.1:1 failed (111: Connection refused) while connecting to upstream", "upstream_connect_failed"),
        ("a client request body is buffered to a temporary file /var/lib/nginx/body/0000000001", "client_body_buffered"),
    ] {
        assert_eq!(c(&format!("{msg}{up}")), Some(want), "{msg}");
    }
    for (msg, want) in [
        (
            "worker process 4242 exited on signal 11 (core dumped)",
            "worker_crashed",
        ),
        ("worker process 4242 exited on signal 9", "worker_killed"),
        ("worker process 4242 exited on signal 15", "worker_killed"),
        ("worker process 4242 exited on signal 6", "worker_crashed"),
        ("worker process 4242 exited with code 2", "worker_exited"),
        ("worker process 4242 exited with code 0", "worker_exited_ok"),
        (
            "worker process 4242 exited with fatal code 2 and cannot be respawned",
            "worker_exited_fatal",
        ),
        (
            "send() failed (111: Connection refused) while resolving, resolver: 127.0.0.1:53",
            "resolver",
        ),
        (
            r#"socketpair() failed while spawning "worker process" (24: Too many open files)"#,
            "worker_spawn_failed",
        ),
        (
            r#"fork() failed while spawning "cache manager process" (11: Resource temporarily unavailable)"#,
            "worker_spawn_failed",
        ),
        (
            r#"unknown directive "foo" in /etc/nginx/nginx.conf:12"#,
            "config",
        ),
    ] {
        assert_eq!(c(msg), Some(want), "{msg}");
    }
}

#[test]
fn a_uri_cannot_fake_the_masters_lines() {
    // A path derived from the URI, in nginx's own open() message: the process classes
    // are matched at the message's start only.
    let c = |m: &str| {
        let line = format!("2026/12/01 20:01:02 [error] 9#9: *3 {m}");
        classify(line.as_bytes()).map(|(_, c)| c)
    };
    assert_eq!(
        c(
            r#"open() "/srv/worker process 1 exited on signal 11" failed (2: No such file or directory), client: 1.2.3.4"#
        ),
        Some("file_not_found")
    );
    assert_ne!(
        c(
            r#"open() "/srv/x) failed while spawning "worker process" (24: Too many open files)" failed (2: No such file or directory)"#
        ),
        Some("worker_spawn_failed")
    );
    assert_eq!(c("worker process x exited on signal 11"), Some("other"));
    assert_eq!(c("worker process 12 exited sideways"), Some("other"));
    // Bytes that are not UTF-8, ESC and a huge line: classified from their start, never
    // kept.
    assert_eq!(
        classify(
            b"2026/12/01 20:01:02 [alert] 9#9: worker process 7 exited on signal 6\xff\x1b[2J"
        ),
        Some((1, "worker_crashed"))
    );
}

/// Newcomer trial: a binary upgrade (USR2) whose new binary is gone logs the execve()
/// failure and the new binary's exit with code 1: both are the failed upgrade, not
/// `process_other` nor a worker's exit. A clean exit of the new master (a rollback's
/// QUIT) is not a failure.
#[test]
fn a_failed_binary_upgrade_is_its_own_class() {
    let class = |msg: &str| {
        let line = format!("2026/12/04 10:00:00 [alert] 4841#4841: {msg}");
        classify(line.as_bytes()).map(|(_, c)| c)
    };
    assert_eq!(
        class("execve() failed while executing new binary process \"/usr/sbin/nginx\" (2: No such file or directory)"),
        Some("binary_upgrade_failed")
    );
    assert_eq!(
        class("new binary process 4900 exited with code 1"),
        Some("binary_upgrade_failed")
    );
    assert_eq!(
        class("new binary process 4900 exited on signal 11 (core dumped)"),
        Some("binary_upgrade_failed")
    );
    assert_eq!(
        class("new binary process 4900 exited with code 0"),
        Some("process_other")
    );
    assert_eq!(
        class("the changing binary signal is ignored: you should shutdown or terminate before either old or new binary's process"),
        Some("binary_upgrade_failed")
    );
    // The upgrade begun: its own class, not a reload's (a newcomer saw "changing
    // binary" under master_reload with nginx.conf as its directive).
    assert_eq!(class("changing binary"), Some("binary_upgrade"));
    assert_eq!(
        class("start new binary process 4900"),
        Some("binary_upgrade")
    );
    assert_eq!(class("reconfiguring"), Some("master_reload"));
    // A worker's exit stays a worker's.
    assert_eq!(
        class("worker process 4843 exited with code 1"),
        Some("worker_exited")
    );
    let c = class_of("binary_upgrade_failed");
    assert_eq!(c.group, Group::Process);
    assert!(c.directive.contains("USR2"), "{}", c.directive);
    assert!(crate::model::error_classes::HISTORY_CLASSES.contains(&"binary_upgrade_failed"));
}

fn class_of(name: &str) -> &'static Class {
    class(name).unwrap()
}

/// A 404 whose URI carries `%0A`s: nginx decodes them into the file name it quotes,
/// so the entry spans 3 lines, the last 2 of the client's choosing (one a crash line).
/// The filter keeps nginx's header line and hands the 2 others to `forged`; lines
/// around it pass through, in order.
#[test]
fn lines_a_request_wrote_into_the_log_are_not_nginx_s() {
    let lines = [
        "2026/12/05 19:00:00 [notice] 9#9: signal process started",
        "2026/12/05 19:00:01 [error] 10#10: *5 open() \"/srv/x",
        "2026/12/05 19:00:01 [alert] 9#9: worker process 10 exited on signal 11 (core dumped)",
        "y\" failed (2: No such file or directory), client: 1.2.3.4, server: s, request: \"GET /x%0A2026/12/05%2019:00:01%20[alert]%209#9:%20worker%20process%2010%20exited%20on%20signal%2011%20(core%20dumped)%0ay HTTP/1.1\", host: \"h\"",
        "2026/12/05 19:00:02 [error] 10#10: *6 limiting requests, excess: 1.0 by zone \"one\", client: 1.2.3.4, server: s, request: \"GET / HTTP/1.1\", host: \"h\"",
    ];
    let (mut kept, mut forged) = (Vec::new(), Vec::new());
    let mut f = EntryFilter::default();
    for l in lines {
        f.push(
            l.as_bytes(),
            &mut |k| kept.push(String::from_utf8_lossy(k).into_owned()),
            &mut |k| forged.push(String::from_utf8_lossy(k).into_owned()),
        );
    }
    f.flush(&mut |k| kept.push(String::from_utf8_lossy(k).into_owned()));
    // nginx's header gets the end of its entry back (what follows the client's last
    // segment): classed as nginx wrote it, a 404's file_not_found (trial 21: `other`).
    let header = format!("{}{}", lines[1], &lines[3][1..]);
    assert_eq!(kept, [lines[0], header.as_str(), lines[4]]);
    assert_eq!(forged, [lines[3], lines[2]]);
    assert_eq!(
        classify(header.as_bytes()).map(|(_, c)| c),
        Some("file_not_found")
    );
}

/// The second trial's attacks on the filter: a Referer carrying a fake request field
/// after nginx's own does not hide nginx's; a `%0A` in a query, or in a path whose
/// lines are not in the log (a limit_req line), takes back no line of nginx's.
#[test]
fn only_lines_that_are_the_request_s_own_path_are_taken_back() {
    use std::collections::VecDeque;
    let pending: VecDeque<Vec<u8>> = [
        "2026/12/05 19:00:01 [alert] 9#9: worker process 10 exited on signal 11",
        "2026/12/05 19:00:01 [error] 10#10: *5 open() \"/srv/x",
        "FORGED",
    ]
    .iter()
    .map(|l| l.as_bytes().to_vec())
    .collect();
    let tail = "y\" failed (2: No such file or directory), client: c, server: s, request: \"GET /x%0AFORGED%0Ay HTTP/1.1\", host: \"h\", referrer: \"http://a/, request: \"GET /b HTTP/1.1\"";
    assert_eq!(request_lines(tail.as_bytes(), &pending), 2);
    // A query's %0A: nothing.
    let q = "2026/12/05 19:00:02 [error] 10#10: *6 limiting requests, client: c, server: s, request: \"GET /r?q=%0A%0A HTTP/1.1\"";
    assert_eq!(request_lines(q.as_bytes(), &pending), 0);
    // A path's %0A on a line that does not quote it: the lines before are not its own.
    let p = "2026/12/05 19:00:02 [error] 10#10: *6 limiting requests, client: c, server: s, request: \"GET /r%0A%0A HTTP/1.1\"";
    assert_eq!(request_lines(p.as_bytes(), &pending), 0);
}

/// Lines further back than one entry (2048 bytes) are handed on before a later line
/// could claim them: a request can only take back lines of its own entry.
#[test]
fn a_request_takes_back_no_line_beyond_one_entry() {
    // Its header line (ending with the path's first segment) is more than one entry
    // back: handed on already, so the request cannot claim the lines after it.
    let long = "2026/12/05 19:00:00 [error] 9#9: ".to_string() + &"a".repeat(MAX_ENTRY) + "/x";
    let tail = "y\" failed, client: c, server: s, request: \"GET /x%0AFORGED%0Ay HTTP/1.1\"";
    let (mut kept, mut forged) = (0, 0);
    let mut f = EntryFilter::default();
    for l in [long.as_str(), "FORGED", tail] {
        f.push(l.as_bytes(), &mut |_| kept += 1, &mut |_| forged += 1);
    }
    f.flush(&mut |_| kept += 1);
    assert_eq!((kept, forged), (3, 0));
}

#[test]
fn the_pid_of_a_worker_exit_line_is_read_from_nginx_s_words_only() {
    let l = |s: &str| exited_worker_pid(s.as_bytes());
    assert_eq!(
        l("2026/12/05 19:00:01 [alert] 9#9: worker process 1234 exited on signal 11 (core dumped)"),
        Some(1234)
    );
    assert_eq!(
        l("2026/12/05 19:00:01 [notice] 9#9: signal process started"),
        None
    );
    assert_eq!(l("worker process 1234 exited on signal 11"), None);
}

/// An entry nginx cut at 2048 bytes after a quoted path: its `request:` field is gone,
/// but nginx's header line opens the path and the lines to the cut add up to exactly
/// 2048 bytes with their line feeds, so the lines after the header are the request's.
/// One byte short, or a header that quotes no path, and they are nginx's.
#[test]
fn lines_of_an_entry_nginx_cut_at_2048_bytes_are_the_request_s() {
    let header = "2026/12/05 19:00:01 [error] 10#10: *5 open() \"/srv/x";
    let crash =
        "2026/12/05 19:00:01 [alert] 9#9: worker process 10 exited on signal 11 (core dumped)";
    let run = |header: &str, last: &str| {
        let (mut kept, mut forged) = (Vec::new(), Vec::new());
        let mut f = EntryFilter::default();
        for l in [header, crash, last] {
            f.push(
                l.as_bytes(),
                &mut |k| kept.push(String::from_utf8_lossy(k).into_owned()),
                &mut |k| forged.push(String::from_utf8_lossy(k).into_owned()),
            );
        }
        f.flush(&mut |k| kept.push(String::from_utf8_lossy(k).into_owned()));
        (kept, forged)
    };
    // nginx's errno at its fixed place (2048 - 50 bytes into the entry), then the
    // client's fields, cut at 2047 bytes and the line feed.
    let before = header.len() + 1 + crash.len() + 1;
    let errno = "... (2: No such file or directory), client: 1.2.3.4, server: s, request: \"GET /x";
    let mut cut = "a".repeat(MAX_ENTRY - 50 - before) + errno + &"a".repeat(100);
    cut.truncate(MAX_ENTRY - 1 - before);
    let (kept, forged) = run(header, &cut);
    assert_eq!(forged, [cut.clone(), crash.to_string()]);
    // The header gets nginx's errno back, and with it its class.
    let rejoined = format!("{header}{}", &cut[MAX_ENTRY - 50 - before..]);
    assert_eq!(kept, std::slice::from_ref(&rejoined));
    assert_eq!(
        classify(rejoined.as_bytes()).map(|c| c.1),
        Some("file_not_found")
    );
    // An errno-like text off its place is the client's: not given to the header.
    let off = "b".to_string() + &cut[..cut.len() - 1];
    assert_eq!(run(header, &off).0, [header.to_string()]);
    // One byte short of the bound: not a cut entry.
    let short = &cut[1..];
    assert_eq!(run(header, short).1, Vec::<String>::new());
    // Headers that open a path: any call, a bare quoted path, a directory index.
    for h in [
        "2026/12/05 19:00:01 [crit] 10#10: *5 stat() \"/srv/x",
        "2026/12/05 19:00:01 [error] 10#10: *5 \"/srv/x",
        "2026/12/05 19:00:01 [error] 10#10: *5 directory index of \"/srv/x",
    ] {
        let last = "a".repeat(MAX_ENTRY - h.len() - crash.len() - 3);
        assert_eq!(run(h, &last).1.len(), 2, "{h}");
    }
    // A header that quotes no path (limit_req names its zone): nginx's lines all.
    let h = "2026/12/05 19:00:01 [error] 10#10: *5 limiting requests, excess: 1.0 by zone \"one";
    let last = "a".repeat(MAX_ENTRY - h.len() - crash.len() - 3);
    assert_eq!(run(h, &last).1, Vec::<String>::new());
    // Not an nginx line at all (no date): nothing taken back.
    let h = "open() \"/srv/x";
    let last = "a".repeat(MAX_ENTRY - h.len() - crash.len() - 3);
    assert_eq!(run(h, &last).1, Vec::<String>::new());
}
