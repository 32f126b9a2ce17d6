//! Property tests over what nginx-probe reads from others: any bytes given to the
//! recording reader give a recording or a one-line error, never a panic; whatever it
//! accepts renders (text report, compare) with no control character reaching the
//! output; a line is never buffered past its cap.

use nginx_probe::{
    analysis::compare,
    cli::compare::render_text,
    io::recording::{read_line_bounded, Keep, LineRead, Recording},
    render::text,
    safe,
};
use proptest::prelude::*;

/// A valid interval/summary line, with `{S}` where a generated string goes and `{N}`
/// where a generated number goes.
const TEMPLATE: &str = r#"{"schema":1,"verdicts":[{"id":"{S}","severity":"warning","advice":"{S}","evidence":{"{S}":{N}},"directives":["{S}"]}],"type":"{T}","time_unix_s":{N},"master_pid":9,"master_nspid":[9],"duration_s":{N},"workers":[{"pid":10,"nspid":[10],"alive":true,"accepts":{N},"accept_share":1.0,"accept_errors":{"EMFILE":{N}},"requests":{"count":{N},"source":"writev_estimate","per_s":1.0,"per_connection":1.0,"syscalls_per_request":{"{S}":1.0}},"fds":{"open":5,"peak":6,"limit":1024},"event_loop":{"iterations":1,"busy_ns":1,"busy_share":0.1,"p99_iteration_ns":1,"max_iteration_ns":1},"cpu_s":0.1,"accepted_then_closed":0,"writes":{},"syscalls":{"writev":{"count":{N},"errors":0,"errnos":{"{S}":{N}},"timed":1,"total_ns":{N},"p50_ns":1,"p99_ns":1,"max_ns":1,"hist_log2_ns":[{N},0,{N}]}}}],"listen":[{"addr":"{S}","backlog":511,"queue_now":0,"queue_max":{N},"overflows":0,"drops":0}],"logs":{"{S}":"access_log"},"drops":{"{S}":{N}},"traced_syscalls":["{S}"],"missing_tracepoints":[],"events":[{"t_s":1.0,"event":"{S}","pid":{N}}],"end_reason":"{S}"}"#;

const HEADER: &str = r#"{"type":"header","schema":1,"tool":"{S}","host":"{S}","kernel":"{S}","cpus":2,"nginx_version":"{S}","master_title":"{S}","master_pid":9,"workers":[10],"started_unix_s":{N},"options":{"interval_s":1.0,"syscalls":["{S}"],"uprobes":false,"argv":["{S}"]}}"#;

/// Fills the template: strings JSON-escaped (any char, controls included), numbers as
/// given (possibly huge, negative or fractional).
fn fill(template: &str, kind: &str, strings: &[String], numbers: &[String]) -> String {
    let mut out = String::new();
    let (mut si, mut ni) = (0, 0);
    let mut rest = template.replace("{T}", kind);
    loop {
        let s = rest.find("{S}");
        let n = rest.find("{N}");
        let (at, is_s) = match (s, n) {
            (None, None) => break,
            (Some(a), None) => (a, true),
            (None, Some(b)) => (b, false),
            (Some(a), Some(b)) => (a.min(b), a < b),
        };
        out.push_str(&rest[..at]);
        if is_s {
            let v = serde_json::to_string(&strings[si % strings.len()]).unwrap();
            out.push_str(&v[1..v.len() - 1]);
            si += 1;
        } else {
            out.push_str(&numbers[ni % numbers.len()]);
            ni += 1;
        }
        rest = rest[at + 3..].to_string();
    }
    out + &rest
}

/// No character a terminal acts on, besides newlines and tabs.
fn terminal_safe(s: &str) -> bool {
    !s.chars().any(|c| c.is_control() && c != '\n' && c != '\t')
}

/// Reads, and when that succeeds renders everything a person may ask for; checks the
/// error or the output.
fn read_and_render(bytes: &[u8]) -> Result<(), TestCaseError> {
    match Recording::parse_from("rec", bytes, Keep::All) {
        Err(e) => {
            let line = safe::line(&e.to_string()).into_owned();
            prop_assert!(!line.contains('\n'));
            prop_assert!(terminal_safe(&line));
        }
        Ok(rec) => {
            let (whole, _) = rec.whole_run();
            for r in rec.intervals.iter().chain([whole]) {
                let t = text::render_text(r, Some("writev"), &text::clock(r.time_unix_s));
                prop_assert!(terminal_safe(&t), "{t}");
            }
            let c = compare::compare("a", &rec, "b", &rec);
            let t = render_text(&c);
            prop_assert!(terminal_safe(&t), "{t}");
            if let Some(h) = &rec.header {
                let _ = text::utc_datetime(h.started_unix_s);
            }
        }
    }
    Ok(())
}

fn any_string() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        Just("\u{1b}]0;title\u{7}".to_string()),
        Just("\u{1b}[2J".to_string()),
        "[\\x00-\\x1f\\x7f\\u{80}-\\u{9f}a-z]{0,12}",
    ]
}

fn any_number() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<u64>().prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|f| if f.is_finite() {
            format!("{f:e}")
        } else {
            "1e999".into()
        }),
        (0u64..2_000_000_000).prop_map(|n| n.to_string()),
        Just("253402300800".to_string()),
        Just("9007199254740993".to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn any_bytes_give_a_recording_or_one_line(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        read_and_render(&bytes)?;
    }

    #[test]
    fn any_lines_of_json_give_a_recording_or_one_line(
        lines in proptest::collection::vec("[{}\\[\\]\":,a-z0-9 \\n\\x1b]{0,200}", 0..8)
    ) {
        read_and_render(lines.join("\n").as_bytes())?;
    }

    #[test]
    fn recordings_with_any_strings_and_numbers_render_safely(
        strings in proptest::collection::vec(any_string(), 1..8),
        numbers in proptest::collection::vec(any_number(), 1..8),
        cut in any::<u16>(),
        header in any::<bool>(),
    ) {
        let mut text = String::new();
        if header {
            text += &fill(HEADER, "header", &strings, &numbers);
            text.push('\n');
        }
        text += &fill(TEMPLATE, "interval", &strings, &numbers);
        text.push('\n');
        text += &fill(TEMPLATE, "summary", &strings, &numbers);
        text.push('\n');
        read_and_render(text.as_bytes())?;
        // Cut anywhere (a crash mid-write, a truncated download).
        let at = cut as usize % (text.len() + 1);
        let at = (0..=at).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
        read_and_render(&text.as_bytes()[..at])?;
    }

    #[test]
    fn a_line_is_never_buffered_past_its_cap(
        bytes in proptest::collection::vec(prop_oneof![Just(b'\n'), any::<u8>()], 0..2048),
        max in 1usize..64,
        cap in 1usize..32,
    ) {
        let mut r = std::io::BufReader::with_capacity(cap, &bytes[..]);
        let mut buf = Vec::new();
        let mut lines = 0;
        loop {
            match read_line_bounded(&mut r, &mut buf, max).unwrap() {
                LineRead::Eof => break,
                LineRead::Line(ended) => {
                    prop_assert!(buf.len() <= max + 1);
                    prop_assert_eq!(ended, buf.last() == Some(&b'\n'));
                    lines += 1;
                }
                LineRead::TooLong => {
                    prop_assert!(buf.is_empty());
                    break;
                }
            }
            prop_assert!(lines <= bytes.len());
        }
    }
}
