//! The plan of a tracing run, decided from the arguments alone (pure, unit-tested): what
//! stdout shows, how often interval reports are made and where they go, and the option
//! cross-checks that must fail before anything touches the kernel.

use nginx_probe_common::SYSCALLS;

use super::{DetailArg, TraceArgs, MAX_SECONDS};
use crate::error::{ProbeError, UsageError};
use crate::model::sampling::{DetailMode, Schedule};

/// Seconds between live view redraws when --interval is not given.
pub const LIVE_INTERVAL_S: f64 = 2.0;

/// Seconds between interval reports (stdout text, recordings) when --interval is not
/// given and there is no live view.
pub const DEFAULT_INTERVAL_S: f64 = 5.0;

/// Length of a detail window when --detail-window is not given, seconds.
pub const DETAIL_WINDOW_S: f64 = 1.0;

/// Time between detail windows' starts when --detail-every is not given, seconds.
/// With 1 s windows that is 5% of the time: measured (`cargo xtask bench overhead`,
/// 4 interleaved rounds of 20 s) +1.6% worker CPU per request on HTTPS 4 KB and +1.2%
/// on the 30-byte file, against +4.7% and +3.3% with a window every 10 s.
pub const DETAIL_EVERY_S: f64 = 20.0;

/// What stdout gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputMode {
    /// The live terminal view (ratatui), then the text summary on the normal screen.
    Live,
    /// Text reports (tables, verdicts).
    Text,
    /// One JSON document per line.
    Json,
}

/// How a run reports, from [`Plan::new`].
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// What stdout gets.
    pub mode: OutputMode,
    /// Seconds between interval reports on stdout (and live view refreshes); `None`:
    /// stdout gets only the summary.
    pub stdout_every_s: Option<f64>,
    /// Seconds between recorded intervals (used only with --record).
    pub record_every_s: f64,
    /// Seconds between interval reports made for stdout, the recording or both (one
    /// period); `None`: no interval report is made.
    pub tick_every_s: Option<f64>,
    /// How the detail layer is attached (`--detail`): sampled by default for continuous
    /// runs (`--listen`, `--record`), full for interactive ones.
    pub detail: DetailMode,
}

impl Plan {
    /// Decides the plan from the arguments; `stdout_is_terminal` picks the live view.
    ///
    /// Errors: [`ProbeError::Usage`] for options that contradict each other
    /// (`--interval` with `--summary-only` and no `--record`; `--hist` of an untraced
    /// syscall).
    pub fn new(args: &TraceArgs, stdout_is_terminal: bool) -> Result<Plan, ProbeError> {
        if args.summary_only && args.interval.is_some() && args.record.is_none() {
            return Err(UsageError::Conflict(
                "--interval has no effect with --summary-only (add --record FILE to record intervals)",
            )
            .into());
        }
        if let Some(h) = &args.hist {
            let i = SYSCALLS
                .iter()
                .position(|d| d.name == h)
                .unwrap_or(usize::MAX);
            if !args.syscalls.0.contains(&i) {
                return Err(UsageError::HistNotTraced { syscall: h.clone() }.into());
            }
        }
        // A terminal gets the live view unless plain text, JSON or only the summary is asked.
        let mode = if args.json {
            OutputMode::Json
        } else if !(args.summary_only || args.plain) && stdout_is_terminal {
            OutputMode::Live
        } else {
            OutputMode::Text
        };
        let record_every_s = args.interval.unwrap_or(if mode == OutputMode::Live {
            LIVE_INTERVAL_S
        } else {
            DEFAULT_INTERVAL_S
        });
        let stdout_every_s = if args.summary_only {
            None
        } else if mode == OutputMode::Json {
            args.interval
        } else {
            Some(record_every_s)
        };
        let tick_every_s = stdout_every_s.or(args.record.as_ref().map(|_| record_every_s));
        Ok(Plan {
            mode,
            stdout_every_s,
            record_every_s,
            tick_every_s,
            detail: detail_mode(args)?,
        })
    }

    /// The report tick's period, seconds (a week when no interval report is made).
    pub fn tick_period_s(&self) -> f64 {
        self.tick_every_s.unwrap_or(MAX_SECONDS)
    }
}

/// `--detail` with its window options: explicit, else sampled for continuous runs
/// (`--listen`, `--record`) or when a window option is given, else full.
///
/// Errors: window options with `--detail full`; a window not shorter than its period.
fn detail_mode(args: &TraceArgs) -> Result<DetailMode, ProbeError> {
    let windows_given = args.detail_window.is_some() || args.detail_every.is_some();
    let sampled =
        match args.detail {
            Some(DetailArg::Full) if windows_given => return Err(UsageError::Conflict(
                "--detail-window and --detail-every apply to --detail sampled, not --detail full",
            )
            .into()),
            Some(d) => d == DetailArg::Sampled,
            None => windows_given || args.listen.is_some() || args.record.is_some(),
        };
    if !sampled {
        return Ok(DetailMode::Full);
    }
    Schedule::new(
        args.detail_window.unwrap_or(DETAIL_WINDOW_S),
        args.detail_every.unwrap_or(DETAIL_EVERY_S),
    )
    .map(DetailMode::Sampled)
    .map_err(|e| UsageError::Schedule(e).into())
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::cli::Cli;

    fn plan(args: &[&str], terminal: bool) -> Result<Plan, ProbeError> {
        let mut argv = vec!["nginx-probe", "--pid", "7"];
        argv.extend_from_slice(args);
        let cli = Cli::try_parse_from(argv).expect("arguments parse");
        Plan::new(&cli.trace, terminal)
    }

    #[test]
    fn a_terminal_gets_the_live_view_unless_asked_otherwise() {
        let p = plan(&[], true).unwrap();
        assert_eq!(p.mode, OutputMode::Live);
        assert_eq!(p.stdout_every_s, Some(LIVE_INTERVAL_S));
        assert_eq!(p.tick_every_s, Some(LIVE_INTERVAL_S));
        for opt in ["--plain", "--summary-only"] {
            assert_eq!(plan(&[opt], true).unwrap().mode, OutputMode::Text, "{opt}");
        }
        assert_eq!(plan(&["--json"], true).unwrap().mode, OutputMode::Json);
        let p = plan(&[], false).unwrap();
        assert_eq!(p.mode, OutputMode::Text);
        assert_eq!(p.stdout_every_s, Some(DEFAULT_INTERVAL_S));
    }

    #[test]
    fn json_prints_intervals_only_when_given_one() {
        let p = plan(&["--json"], false).unwrap();
        assert_eq!((p.stdout_every_s, p.tick_every_s), (None, None));
        let p = plan(&["--json", "--interval", "2"], false).unwrap();
        assert_eq!((p.stdout_every_s, p.tick_every_s), (Some(2.0), Some(2.0)));
    }

    #[test]
    fn summary_only_still_records_intervals() {
        let p = plan(&["--summary-only"], false).unwrap();
        assert_eq!((p.stdout_every_s, p.tick_every_s), (None, None));
        assert_eq!(p.tick_period_s(), MAX_SECONDS);
        let p = plan(
            &["--summary-only", "--record", "/x", "--interval", "1"],
            false,
        )
        .unwrap();
        assert_eq!((p.stdout_every_s, p.tick_every_s), (None, Some(1.0)));
        let p = plan(&["--summary-only", "--record", "/x"], true).unwrap();
        assert_eq!(p.record_every_s, DEFAULT_INTERVAL_S);
        assert_eq!(p.tick_every_s, Some(DEFAULT_INTERVAL_S));
    }

    #[test]
    fn continuous_runs_sample_the_detail_layer_interactive_ones_do_not() {
        let sampled = DetailMode::Sampled(Schedule::new(DETAIL_WINDOW_S, DETAIL_EVERY_S).unwrap());
        assert_eq!(plan(&[], true).unwrap().detail, DetailMode::Full);
        assert_eq!(
            plan(&["--duration", "5"], false).unwrap().detail,
            DetailMode::Full
        );
        assert_eq!(plan(&["--listen"], false).unwrap().detail, sampled);
        assert_eq!(plan(&["--record", "/x"], false).unwrap().detail, sampled);
        assert_eq!(
            plan(&["--listen", "--detail", "full"], false)
                .unwrap()
                .detail,
            DetailMode::Full
        );
        assert_eq!(
            plan(&["--detail", "sampled"], true).unwrap().detail,
            sampled
        );
        assert_eq!(
            plan(&["--detail-window", "500ms", "--detail-every", "5s"], true)
                .unwrap()
                .detail,
            DetailMode::Sampled(Schedule::new(0.5, 5.0).unwrap())
        );
        // Either window option alone, without --detail, selects sampled.
        assert_eq!(
            plan(&["--detail-every", "2s"], true).unwrap().detail,
            DetailMode::Sampled(Schedule::new(DETAIL_WINDOW_S, 2.0).unwrap())
        );
        assert_eq!(
            plan(&["--detail-window", "2s"], true).unwrap().detail,
            DetailMode::Sampled(Schedule::new(2.0, DETAIL_EVERY_S).unwrap())
        );
        // With --detail full: a one-line usage error, exit 2.
        for opt in ["--detail-every", "--detail-window"] {
            let e = plan(&["--detail", "full", opt, "2s"], false).unwrap_err();
            assert!(e.to_string().contains("--detail sampled"), "{e}");
            assert!(!e.to_string().contains('\n'), "{e}");
            assert_eq!(e.exit_code(), 2, "{e}");
        }
        let e = plan(&["--detail", "sampled", "--detail-window", "20s"], false).unwrap_err();
        assert!(e.to_string().contains("shorter than --detail-every"), "{e}");
    }

    #[test]
    fn contradictions_fail_before_attaching() {
        let e = plan(&["--summary-only", "--interval", "1"], false).unwrap_err();
        assert!(e.to_string().contains("--summary-only"), "{e}");
        let e = plan(&["--hist", "openat"], false).unwrap_err();
        assert!(e.to_string().contains("openat is not traced"), "{e}");
        assert!(plan(&["--hist", "openat", "--syscalls", "all"], false).is_ok());
    }
}
