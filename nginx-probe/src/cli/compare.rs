//! `nginx-probe compare`: the runs of each side read ([`crate::io::recording`]), judged
//! ([`compare::compare_runs`]), shown as JSON or as text, printed
//! ([`crate::io::output::print_all`]). The text of a comparison is here, with the
//! command: `render` stands below `analysis`, whose [`Comparison`] it is.

use std::{fmt::Write as _, path::PathBuf};

use crate::{
    analysis::compare::{self, fmt_value, Comparison, NoiseSource, Significance, Spread},
    error::{ProbeError, UsageError},
    io::{
        output::print_all,
        recording::{load_all, side_files, Recording},
    },
    safe,
};

/// `nginx-probe compare BEFORE AFTER`, or `compare A1 A2 .. -- B1 B2 ..`.
///
/// Errors: other than two paths without `--`, a side that does not read
/// ([`side_files`], [`load_all`]), stdout failing.
pub(super) fn compare_command(
    files: &[PathBuf],
    after_runs: &[PathBuf],
    json: bool,
    master: Option<(u32, u32)>,
) -> Result<(), ProbeError> {
    let (before, after) = if after_runs.is_empty() {
        match files {
            [b, a] => (
                side_files(std::slice::from_ref(b))?,
                side_files(std::slice::from_ref(a))?,
            ),
            _ => return Err(UsageError::CompareSides { given: files.len() }.into()),
        }
    } else {
        (side_files(files)?, side_files(after_runs)?)
    };
    let (b, a) = (
        load_all(&before, master.map(|m| m.0))?,
        load_all(&after, master.map(|m| m.1))?,
    );
    let bv: Vec<(&str, &Recording)> = b.iter().map(|(n, r)| (n.as_str(), r)).collect();
    let av: Vec<(&str, &Recording)> = a.iter().map(|(n, r)| (n.as_str(), r)).collect();
    let c = compare::compare_runs(&bv, &av);
    let out = if json {
        safe::json(&c) + "\n"
    } else {
        render_text(&c)
    };
    print_all(&out)
}

/// `--master`: `PID` (the same master on both sides) or `BEFORE_PID:AFTER_PID`.
pub(super) fn parse_masters(s: &str) -> Result<(u32, u32), String> {
    let pid = |p: &str| match p.trim().parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "`{p}` is not a pid: give PID or BEFORE_PID:AFTER_PID"
        )),
    };
    match s.split_once(':') {
        Some((b, a)) => Ok((pid(b)?, pid(a)?)),
        None => pid(s).map(|p| (p, p)),
    }
}

/// The comparison as text: caveats, the sentence, then a table of every metric.
///
/// The paths, the caveats (which quote the recordings' host names and kernels), the
/// sentence and the verdict ids come from files someone else may have written: each is
/// shown with its control characters escaped ([`safe::line`]), and so is the whole text.
pub fn render_text(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "BEFORE {}\nAFTER  {}",
        safe::line(&c.before),
        safe::line(&c.after)
    );
    for cv in &c.caveats {
        let _ = writeln!(out, "caveat: {}", safe::line(cv));
    }
    let _ = writeln!(out, "\n{}\n", safe::line(&c.sentence));
    let (bn, an) = match c.noise_from {
        NoiseSource::Intervals => ("BEFORE INTERVALS", "AFTER INTERVALS"),
        NoiseSource::Runs => ("BEFORE RUNS", "AFTER RUNS"),
    };
    let _ = writeln!(
        out,
        "{:<54} {:>10} {:>10} {:>8}  {:>22} {:>22}  NOISE",
        "METRIC", "BEFORE", "AFTER", "CHANGE", bn, an
    );
    let v = |x: Option<f64>| x.map(fmt_value).unwrap_or_else(|| "-".into());
    let s = |x: Option<Spread>| {
        x.map(|s| {
            format!(
                "{}±{} (n={})",
                fmt_value(s.median),
                fmt_value(s.half_iqr),
                s.n
            )
        })
        .unwrap_or_else(|| "-".into())
    };
    for m in &c.metrics {
        let label = if m.unit.is_empty() {
            m.label.clone()
        } else {
            format!("{} ({})", m.label, m.unit)
        };
        let sig = match m.significance {
            Significance::BeyondNoise => "beyond noise",
            Significance::WithinNoise => "within noise",
            Significance::Unchanged => "unchanged",
            Significance::NoiseUnknown => "noise unknown",
            Significance::Unsteady => "load not steady: noise unknown",
            Significance::FarFromLimit => "far from the limit on both sides",
        };
        let _ = writeln!(
            out,
            "{:<54} {:>10} {:>10} {:>8}  {:>22} {:>22}  {}",
            label,
            v(m.before),
            v(m.after),
            m.relative
                .map(|r| format!("{:+.0}%", r * 100.0))
                .unwrap_or_else(|| "-".into()),
            s(m.before_intervals),
            s(m.after_intervals),
            sig
        );
    }
    let list = |v: &[String]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.iter()
                .map(|s| safe::line(s))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    let _ = writeln!(
        out,
        "\nverdicts went away: {}\nverdicts appeared: {}\nverdicts in both: {}",
        list(&c.verdicts.went_away),
        list(&c.verdicts.appeared),
        list(&c.verdicts.remained)
    );
    safe::block(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn master_is_one_pid_for_both_sides_or_one_each() {
        assert_eq!(parse_masters("101"), Ok((101, 101)));
        assert_eq!(parse_masters("101:202"), Ok((101, 202)));
        for bad in ["0", "x", "101:", ":202", "1:2:3", "-4"] {
            assert!(parse_masters(bad).is_err(), "{bad}");
        }
    }
    use crate::analysis::compare::VerdictChanges;

    #[test]
    fn text_shows_control_characters_of_recordings_escaped() {
        let c = Comparison {
            schema: 1,
            kind: "comparison",
            before: "/tmp/\x1b]0;title\x07before.jsonl".into(),
            after: "after\x1b[2J.jsonl".into(),
            noise_from: NoiseSource::Intervals,
            metrics: vec![],
            verdicts: VerdictChanges {
                went_away: vec!["id\x1b[2J".into()],
                ..Default::default()
            },
            caveats: vec!["recorded on host\x1b]0;x\x07 then on b".into()],
            sentence: "line\nforged".into(),
        };
        let t = render_text(&c);
        assert!(!t.contains('\x1b') && !t.contains('\x07'), "{t}");
        assert!(
            t.contains("BEFORE /tmp/\\x1b]0;title\\x07before.jsonl"),
            "{t}"
        );
        assert!(t.contains("AFTER  after\\x1b[2J.jsonl"), "{t}");
        assert!(
            t.contains("caveat: recorded on host\\x1b]0;x\\x07 then"),
            "{t}"
        );
        assert!(t.contains("line\\x0aforged"), "{t}");
        assert!(t.contains("verdicts went away: id\\x1b[2J"), "{t}");
    }
}
