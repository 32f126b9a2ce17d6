//! The detail layer's windows (`--detail sampled`), as pure logic: when windows open
//! and close ([`Schedule`]), what they covered ([`Ledger`]: in-window seconds and the
//! exact requests nginx served inside them, from its stub_status counters), and how a
//! report says so ([`DetailReport`]).
//!
//! The detail programs count only inside windows, so a detail figure over any period
//! is the sum over the windows in it; dividing it by the requests of the same windows
//! gives a per-request ratio that is exact for those windows and an unbiased estimate
//! of the period's (windows are placed by the clock, not by the traffic).

use serde::{Deserialize, Serialize};

/// How the detail layer (latency histograms, writes by destination, syscall mix,
/// event-loop iterations, upstream connects) is attached.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DetailMode {
    /// Attached for the whole run: every figure counts every call.
    Full,
    /// Attached in windows of `window_s` seconds every `period_s` seconds (the first
    /// at attach).
    Sampled(Schedule),
}

impl DetailMode {
    /// `full` or `sampled` (JSON, Prometheus, the banner).
    pub fn name(&self) -> &'static str {
        match self {
            DetailMode::Full => "full",
            DetailMode::Sampled(_) => "sampled",
        }
    }
}

/// Windows of `window_s` seconds starting every `period_s` seconds from attach (t = 0):
/// open on [k·period, k·period + window) for k = 0, 1, 2...
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Schedule {
    /// Window length, seconds.
    pub window_s: f64,
    /// Time from one window's start to the next one's, seconds.
    pub period_s: f64,
}

impl Schedule {
    /// A schedule, checked: both finite and positive, and the window shorter than the
    /// period (a window as long as the period is `--detail full`).
    ///
    /// Errors: a one-line reason naming the options.
    pub fn new(window_s: f64, period_s: f64) -> Result<Schedule, String> {
        if !(window_s.is_finite() && period_s.is_finite() && window_s > 0.0 && period_s > 0.0) {
            return Err("--detail-window and --detail-every must be positive durations".into());
        }
        if window_s >= period_s {
            return Err(format!(
                "--detail-window ({window_s} s) must be shorter than --detail-every ({period_s} s); for detail all the time use --detail full"
            ));
        }
        Ok(Schedule { window_s, period_s })
    }

    /// Whether a window is open at `t_s` seconds after attach.
    pub fn is_open(&self, t_s: f64) -> bool {
        t_s >= 0.0 && t_s.rem_euclid(self.period_s) < self.window_s
    }

    /// When the state changes next after `t_s` (a window closes or opens), seconds
    /// after attach; always later than `t_s`.
    pub fn next_change(&self, t_s: f64) -> f64 {
        let t = t_s.max(0.0);
        let k = (t / self.period_s).floor();
        let start = k * self.period_s;
        let close = start + self.window_s;
        if t < close {
            close
        } else {
            start + self.period_s
        }
    }

    /// Seconds of window time in [0, `t_s`].
    pub fn open_s_until(&self, t_s: f64) -> f64 {
        let t = t_s.max(0.0);
        let k = (t / self.period_s).floor();
        k * self.window_s + (t - k * self.period_s).min(self.window_s)
    }

    /// Share of time the detail layer is attached, 0..1.
    pub fn duty(&self) -> f64 {
        self.window_s / self.period_s
    }
}

/// Cumulative coverage of the windows since attach, as snapshots carry it (reports
/// subtract two of them with [`Coverage::since`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Coverage {
    /// Windows opened (one open now counts). In a difference ([`Coverage::since`]):
    /// the windows that overlap the period, a window carried over from before it
    /// included.
    pub windows: u64,
    /// Whether a window was open at the snapshot: it overlaps the next period too.
    pub open_now: bool,
    /// Seconds the detail layer was attached.
    pub open_s: f64,
    /// nginx's requests (stub_status `requests`) served while a window was open;
    /// None when the counters are not readable (then per-request detail ratios are
    /// unknown).
    pub requests: Option<u64>,
}

impl Coverage {
    /// The coverage between `prev` (earlier) and `self`: the windows that overlap the
    /// period (opened in it, plus the one open at `prev`, carried over) and the
    /// seconds of them inside it (only the carried window's part after `prev`, only
    /// the part before `self` of one still open), so both describe the same windows.
    pub fn since(&self, prev: &Coverage) -> Coverage {
        Coverage {
            windows: self.windows.saturating_sub(prev.windows) + u64::from(prev.open_now),
            open_now: self.open_now,
            open_s: (self.open_s - prev.open_s).max(0.0),
            requests: match (self.requests, prev.requests) {
                (Some(c), Some(p)) => Some(c.saturating_sub(p)),
                _ => None,
            },
        }
    }
}

/// The per-window bookkeeping of one session: windows closed so far, and the one
/// open now (when it opened, and nginx's request counter then).
#[derive(Clone, Debug, Default)]
pub struct Ledger {
    closed: Coverage,
    /// (seconds after attach, requests counter) when the open window opened.
    open: Option<(f64, Option<u64>)>,
    /// Whether every window so far had readable counters at both ends.
    requests_known: bool,
}

impl Ledger {
    /// An empty ledger: no window yet, requests known until a window misses them.
    pub fn new() -> Ledger {
        Ledger {
            closed: Coverage {
                requests: Some(0),
                ..Default::default()
            },
            open: None,
            requests_known: true,
        }
    }

    /// A window opened at `t_s` with nginx's request counter at `requests` (None:
    /// unreadable). Ignored while one is open.
    pub fn open(&mut self, t_s: f64, requests: Option<u64>) {
        if self.open.is_none() {
            self.open = Some((t_s, requests));
            self.closed.windows += 1;
        }
    }

    /// Whether a window is open.
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// The open window closed at `t_s` with the counter at `requests`.
    pub fn close(&mut self, t_s: f64, requests: Option<u64>) {
        if let Some(part) = self.partial(t_s, requests) {
            self.closed.open_s += part.0;
            self.add_requests(part.1);
        }
        self.open = None;
    }

    /// Coverage since attach up to `t_s` (the counter at `requests` then), the open
    /// window counted up to `t_s`.
    pub fn at(&self, t_s: f64, requests: Option<u64>) -> Coverage {
        let mut c = self.closed;
        c.open_now = self.open.is_some();
        if let Some(part) = self.partial(t_s, requests) {
            c.open_s += part.0;
            c.requests = match (c.requests, part.1) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
        }
        c
    }

    /// The open window's seconds and requests up to `t_s`.
    fn partial(&self, t_s: f64, requests: Option<u64>) -> Option<(f64, Option<u64>)> {
        let (start, at_start) = self.open?;
        let reqs = match (at_start, requests) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        Some(((t_s - start).max(0.0), reqs))
    }

    fn add_requests(&mut self, r: Option<u64>) {
        match (self.closed.requests, r) {
            (Some(a), Some(b)) if self.requests_known => self.closed.requests = Some(a + b),
            _ => {
                self.requests_known = false;
                self.closed.requests = None;
            }
        }
    }
}

/// A session's sampling state: the schedule, the windows so far, and what the last
/// window's attach and detach cost (µs, links).
#[derive(Clone, Debug)]
pub struct Sampler {
    /// When the detail windows open and close (`--detail-window`, `--detail-every`).
    pub schedule: Schedule,
    /// The windows so far: their open time and the requests they saw.
    pub ledger: Ledger,
    /// Last window's attach µs, detach µs, links attached.
    pub cost: (u64, u64, usize),
    /// Sum of attach µs and windows opened, for the mean.
    pub attach_us_total: u64,
}

impl Sampler {
    /// Nothing opened yet.
    pub fn new(schedule: Schedule) -> Sampler {
        Sampler {
            schedule,
            ledger: Ledger::new(),
            cost: (0, 0, 0),
            attach_us_total: 0,
        }
    }
}

/// How a report's detail figures were collected (JSON `detail`; absent with
/// `--detail full`, where every figure counts every call).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DetailReport {
    /// `sampled`.
    pub mode: String,
    /// Window length and period, seconds (`--detail-window`, `--detail-every`).
    pub window_s: f64,
    /// Period of the windows, seconds (`--detail-every`).
    pub period_s: f64,
    /// Windows that overlap the period: opened in it (one still open at its end
    /// counts), and one carried over from the previous period, open at its start.
    pub windows: u64,
    /// Seconds the detail programs were attached in the period: the parts of those
    /// windows inside it.
    pub in_window_s: f64,
    /// `in_window_s` / the period's length, in (0, 1]; 0 when no window fell in it.
    pub coverage: f64,
    /// nginx's requests (stub_status) while windows were open: the denominator of
    /// every per-request detail figure. None when the counters are not readable.
    pub requests_in_windows: Option<u64>,
    /// Every request in the period (stub_status), for the share in windows.
    pub requests_total: Option<u64>,
    /// What the figures sampled are (report sections), and what stays exact.
    pub sampled: Vec<String>,
    /// What stays exact (report sections counted all the time).
    pub exact: Vec<String>,
    /// Where the workers' accepts come from: [`ACCEPTS_FROM_UPROBE`] (nothing traced on
    /// syscalls between windows) or [`ACCEPTS_FROM_TRACEPOINTS`] (accept4/accept exits
    /// attached all the time). Empty in recordings made before it existed.
    #[serde(default)]
    pub accepts_from: String,
    /// With accepts from the uprobe: the workers' accepts against nginx's own
    /// `accepted` counter (stub_status) over the same period. None when not checked
    /// (tracepoints, or nginx's counters unreadable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepts_check: Option<AcceptsCheck>,
    /// Wall time of the last window's attach of every detail program (perf events
    /// opened, links created, state reset), µs, measured around the calls; the time the
    /// kernel took to release the last released window's links and perf events, µs
    /// (on nginx-probe's closer thread, off the main loop); and how many links.
    pub attach_us: u64,
    /// Time the kernel took to release the last released window's links, µs.
    pub detach_us: u64,
    /// Links (tracepoints, perf events) the last window attached.
    pub links: usize,
}

/// The uprobe's accepts checked against nginx's own counter: a build of nginx whose
/// `ngx_event_accept` reached `ngx_get_connection` through a private copy would leave
/// the uprobe short, and a count that disagrees is not used.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct AcceptsCheck {
    /// Accepts of all workers in the period (the uprobe).
    pub probe: u64,
    /// nginx's `accepted` counter over the period (stub_status, read from the master's
    /// shared memory).
    pub nginx_accepted: u64,
    /// Whether they agree within [`AcceptsCheck::tolerance`]; false: every verdict
    /// that reads accepts stays silent.
    pub agree: bool,
    /// nginx has UDP listening sockets (QUIC): nginx's count exceeding the uprobe's is
    /// its QUIC connections ([`super::quic::QuicReport`]), not a disagreement; only
    /// more accepts than nginx counted disagree.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub quic_udp: bool,
}

impl AcceptsCheck {
    /// The check with nginx listening on UDP (QUIC): agree unless the uprobe counted
    /// more than nginx's `accepted` beyond the tolerance.
    pub fn with_quic_udp(mut self, workers: usize) -> AcceptsCheck {
        self.quic_udp = true;
        self.agree =
            self.probe <= self.nginx_accepted + Self::tolerance(self.nginx_accepted, workers);
        self
    }

    /// Compares `probe` with `nginx_accepted` for a period with `workers` workers.
    pub fn new(probe: u64, nginx_accepted: u64, workers: usize) -> AcceptsCheck {
        AcceptsCheck {
            probe,
            nginx_accepted,
            agree: probe.abs_diff(nginx_accepted) <= Self::tolerance(nginx_accepted, workers),
            quic_udp: false,
        }
    }

    /// How far apart the two may be: nginx counts an accept just before calling
    /// `ngx_get_connection`, so a snapshot can fall between the two in each worker
    /// (`workers`), and the uprobe is attached some milliseconds before nginx's counter
    /// is first read (1% of the count, plus 2).
    pub fn tolerance(nginx_accepted: u64, workers: usize) -> u64 {
        workers as u64 + 2 + nginx_accepted / 100
    }
}

/// [`DetailReport::accepts_from`] when the `ngx_get_connection` uprobe counts accepts.
pub const ACCEPTS_FROM_UPROBE: &str = "uprobe ngx_get_connection";
/// [`DetailReport::accepts_from`] when the accept4/accept exit tracepoints count them.
pub const ACCEPTS_FROM_TRACEPOINTS: &str = "tracepoints sys_exit_accept4/sys_exit_accept";

/// Whether the workers' accepts of a report with `detail` may be used (shown as a plain
/// figure, compared, judged): false only when the uprobe's count disagrees with nginx's
/// own `accepted` counter ([`DetailReport::accepts_disagree`]).
pub fn accepts_known(detail: Option<&DetailReport>) -> bool {
    !detail.is_some_and(|d| d.accepts_disagree())
}

/// Whether syscall `i` (index into `SYSCALLS`) was counted for the whole period of a
/// report with `detail` (`None`: `--detail full`, everything is): under
/// `--detail sampled` only the `is_rare` ones, and only while accepts come from their
/// tracepoints (not the `ngx_get_connection` uprobe).
pub fn counted_all_the_time(i: usize, detail: Option<&DetailReport>) -> bool {
    match detail {
        None => true,
        Some(d) => nginx_probe_common::is_rare(i as u32) && !d.accepts_from_uprobe(),
    }
}

/// Report sections counted only inside windows with `--detail sampled`, after the
/// syscall table's line ([`SAMPLED_SYSCALLS_UPROBE`] or [`SAMPLED_SYSCALLS`]).
pub const SAMPLED_SECTIONS: &[&str] = &[
    "writes by destination",
    "event loop iterations and busy time",
    "upstream connects",
    "accepted-then-closed connections",
    "access-log opens",
];

/// The syscall table under `--detail sampled` with accepts from the uprobe.
pub const SAMPLED_SYSCALLS_UPROBE: &str = "syscalls (every row, accept4/accept and the fd-creating calls included: accept errors by errno as the syscall returned them)";
/// The syscall table under `--detail sampled` with accepts from the tracepoints.
pub const SAMPLED_SYSCALLS: &str =
    "syscalls (all but accept4/accept and the rare fd-creating calls)";

/// Report sections exact in every mode, after the accepts' lines
/// ([`EXACT_ACCEPTS_UPROBE`] or [`EXACT_ACCEPTS`]).
pub const EXACT_SECTIONS: &[&str] = &[
    "requests (nginx's stub_status counters)",
    "stub_status",
    "TLS handshakes",
    "listening sockets",
    "nginx error log classes",
    "CPU and fds (/proc), cgroup quota",
];

/// What is exact about accepts when the uprobe counts them.
pub const EXACT_ACCEPTS_UPROBE: &[&str] = &[
    "accepts per worker (uprobe on nginx's ngx_get_connection)",
    "accept and fd failures nginx logs (accept4() failed, EMFILE/ENFILE: nginx error log classes)",
];
/// What is exact about accepts when the tracepoints count them.
pub const EXACT_ACCEPTS: &[&str] = &[
    "accepts and accept errors (accept4/accept)",
    "EMFILE/ENFILE of pipe2, eventfd2, epoll_create1, socketpair, dup*",
];

/// The `sampled` and `exact` section lists of a report (`uprobe`: accepts from the
/// `ngx_get_connection` uprobe).
fn sections(uprobe: bool) -> (Vec<String>, Vec<String>) {
    let (syscalls, accepts) = if uprobe {
        (SAMPLED_SYSCALLS_UPROBE, EXACT_ACCEPTS_UPROBE)
    } else {
        (SAMPLED_SYSCALLS, EXACT_ACCEPTS)
    };
    let own = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut sampled = vec![syscalls.to_string()];
    sampled.extend(own(SAMPLED_SECTIONS));
    let mut exact = own(accepts);
    exact.extend(own(EXACT_SECTIONS));
    (sampled, exact)
}

impl DetailReport {
    /// The report of a period `duration_s` long with window coverage `cov`, the
    /// period's exact request total and the last window's cost.
    pub fn new(
        schedule: &Schedule,
        cov: &Coverage,
        duration_s: f64,
        requests_total: Option<u64>,
        cost: (u64, u64, usize),
    ) -> DetailReport {
        let coverage = if duration_s > 0.0 {
            (cov.open_s / duration_s).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let (sampled, exact) = sections(false);
        DetailReport {
            mode: "sampled".into(),
            window_s: schedule.window_s,
            period_s: schedule.period_s,
            windows: cov.windows,
            in_window_s: super::round3(cov.open_s),
            coverage: super::round3(coverage),
            requests_in_windows: cov.requests,
            requests_total,
            sampled,
            exact,
            accepts_from: ACCEPTS_FROM_TRACEPOINTS.into(),
            accepts_check: None,
            attach_us: cost.0,
            detach_us: cost.1,
            links: cost.2,
        }
    }

    /// The same report for a run whose accepts come from the `ngx_get_connection`
    /// uprobe: its sections say which figures that makes sampled.
    /// `check`: the accepts against nginx's counter, when it is readable.
    pub fn with_accepts_from_uprobe(mut self, check: Option<AcceptsCheck>) -> DetailReport {
        (self.sampled, self.exact) = sections(true);
        self.accepts_from = ACCEPTS_FROM_UPROBE.into();
        self.accepts_check = check;
        self
    }

    /// Whether the accepts come from the `ngx_get_connection` uprobe.
    pub fn accepts_from_uprobe(&self) -> bool {
        self.accepts_from == ACCEPTS_FROM_UPROBE
    }

    /// Whether the accepts of this period are known to be wrong (the uprobe's count
    /// disagrees with nginx's `accepted`): then no verdict may read them.
    pub fn accepts_disagree(&self) -> bool {
        self.accepts_check.is_some_and(|c| !c.agree)
    }

    /// One line for text reports: sampled, the coverage, and the in-window requests.
    pub fn line(&self) -> String {
        format!(
            "Detail SAMPLED: {} window(s) of {} s every {} s, {:.3} s attached = {:.1}% of the period; {} requests in windows{} (per-request detail figures divide by these); {}. Window attach {} us, detach {} us ({} links).",
            self.windows,
            self.window_s,
            self.period_s,
            self.in_window_s,
            self.coverage * 100.0,
            self.requests_in_windows
                .map(|r| r.to_string())
                .unwrap_or_else(|| "unknown".into()),
            match self.requests_total {
                Some(t) => format!(" of {t}"),
                None => String::new(),
            },
            match (self.accepts_from_uprobe(), self.accepts_check) {
                (true, Some(c)) if !c.agree => format!(
                    "ACCEPTS UNKNOWN: the ngx_get_connection uprobe counted {} but nginx's accepted counter says {} (verdicts on accepts withheld; nginx also counts stream UDP sessions, which no accept returns, and a build whose ngx_event_accept bypasses the exported ngx_get_connection would leave the uprobe short); requests, TLS, error log exact",
                    c.probe, c.nginx_accepted
                ),
                (true, _) => "accepts (ngx_get_connection uprobe, checked against nginx's accepted counter), requests, TLS, error log exact; accept errors by errno sampled (every one nginx logs is in the error log classes)".to_string(),
                (false, _) => "accepts, requests, errors by errno, TLS, error log exact".to_string(),
            },
            self.attach_us,
            self.detach_us,
            self.links,
        )
    }
}

/// With `--detail sampled`: the per-request syscall mix divides each syscall counted
/// in windows by the requests of the windows (unknown: left out) and each one counted
/// all the time ([`counted_all_the_time`]) by every request;
/// per-worker per-request figures are dropped (per-worker requests in windows are
/// unknown).
pub fn sampled_ratios(
    mut requests: super::RequestTotals,
    mut workers: Vec<super::WorkerReport>,
    all: &super::SlotStats,
    detail: &DetailReport,
) -> (super::RequestTotals, Vec<super::WorkerReport>) {
    let windowed = super::syscalls_per_request(all, detail.requests_in_windows.unwrap_or(0));
    requests.syscalls_per_request.retain(|name, _| {
        nginx_probe_common::SYSCALLS
            .iter()
            .enumerate()
            .any(|(i, d)| d.name == name && counted_all_the_time(i, Some(detail)))
    });
    for (name, v) in windowed {
        requests.syscalls_per_request.entry(name).or_insert(v);
    }
    for w in &mut workers {
        for x in w.writes.values_mut() {
            x.per_request = None;
        }
        w.upstream.connects_per_request = None;
    }
    (requests, workers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_check_allows_the_in_flight_accepts_and_one_percent() {
        // 2 workers: 2 in flight + 2, plus 1% of nginx's count.
        assert_eq!(AcceptsCheck::tolerance(500, 2), 9);
        assert!(AcceptsCheck::new(500, 500, 2).agree);
        assert!(AcceptsCheck::new(491, 500, 2).agree);
        assert!(!AcceptsCheck::new(490, 500, 2).agree);
        assert!(!AcceptsCheck::new(0, 500, 2).agree);
        assert!(AcceptsCheck::new(4, 0, 2).agree);
        let d = |c| {
            DetailReport::new(
                &Schedule::new(1.0, 20.0).unwrap(),
                &Coverage::default(),
                20.0,
                None,
                (0, 0, 0),
            )
            .with_accepts_from_uprobe(c)
        };
        assert!(!d(None).accepts_disagree());
        assert!(d(Some(AcceptsCheck::new(0, 500, 2))).accepts_disagree());
        assert!(d(Some(AcceptsCheck::new(0, 500, 2)))
            .line()
            .contains("ACCEPTS UNKNOWN"));
        assert!(!d(Some(AcceptsCheck::new(500, 500, 2)))
            .line()
            .contains("UNKNOWN"));
    }

    #[test]
    fn windows_open_at_each_period_start() {
        let s = Schedule::new(1.0, 10.0).unwrap();
        assert!(s.is_open(0.0));
        assert!(s.is_open(0.999));
        assert!(!s.is_open(1.0));
        assert!(!s.is_open(9.99));
        assert!(s.is_open(10.0));
        assert!(s.is_open(20.5));
        assert!(!s.is_open(-1.0));
        assert_eq!(s.next_change(0.0), 1.0);
        assert_eq!(s.next_change(0.5), 1.0);
        assert_eq!(s.next_change(1.0), 10.0);
        assert_eq!(s.next_change(5.0), 10.0);
        assert_eq!(s.next_change(10.0), 11.0);
        assert_eq!(s.next_change(-3.0), 1.0);
        assert_eq!(s.open_s_until(0.0), 0.0);
        assert_eq!(s.open_s_until(0.5), 0.5);
        assert_eq!(s.open_s_until(5.0), 1.0);
        assert_eq!(s.open_s_until(10.25), 1.25);
        assert_eq!(s.open_s_until(35.0), 4.0);
        assert_eq!(s.duty(), 0.1);
        // Walking the changes alternates open and closed.
        let mut t = 0.0;
        let mut open = true;
        for _ in 0..20 {
            assert_eq!(s.is_open(t), open, "t={t}");
            t = s.next_change(t);
            open = !open;
        }
        assert_eq!(t, 100.0);
    }

    #[test]
    fn bad_schedules_are_refused() {
        assert!(Schedule::new(10.0, 10.0)
            .unwrap_err()
            .contains("--detail full"));
        assert!(Schedule::new(0.0, 10.0).is_err());
        assert!(Schedule::new(1.0, f64::INFINITY).is_err());
        assert!(Schedule::new(f64::NAN, 10.0).is_err());
    }

    #[test]
    fn the_ledger_counts_requests_inside_windows_only() {
        let mut l = Ledger::new();
        // Counter at 100 when the first window opens, 130 when it closes: 30 in it.
        l.open(0.0, Some(100));
        assert_eq!(l.at(0.5, Some(110)).requests, Some(10));
        l.close(1.0, Some(130));
        // 500 requests between windows do not count.
        l.open(10.0, Some(630));
        let c = l.at(10.5, Some(640));
        assert_eq!(c.windows, 2);
        assert_eq!(c.requests, Some(40));
        assert!((c.open_s - 1.5).abs() < 1e-9);
        l.close(11.0, Some(650));
        let end = l.at(15.0, Some(900));
        assert_eq!(end.requests, Some(50));
        assert!((end.open_s - 2.0).abs() < 1e-9);
        // A period between two snapshots: the second window only.
        let d = end.since(&Coverage {
            windows: 1,
            open_s: 1.0,
            requests: Some(30),
            open_now: false,
        });
        assert_eq!(d.windows, 1);
        assert_eq!(d.requests, Some(20));
        assert!((d.open_s - 1.0).abs() < 1e-9);
        // Opening twice is one window.
        l.open(20.0, Some(900));
        l.open(20.5, Some(950));
        assert_eq!(l.at(21.0, Some(1000)).windows, 3);
        assert_eq!(l.at(21.0, Some(1000)).requests, Some(150));
    }

    #[test]
    fn a_window_straddling_two_intervals_counts_in_both_with_its_part_of_each() {
        // Windows of 0.5 s every 2 s; intervals end at 1.25 s and 2.25 s (a report a
        // little after the schedule's), the summary at 3.0 s.
        let mut l = Ledger::new();
        let start = Coverage {
            requests: Some(0),
            ..Default::default()
        };
        l.open(0.0, Some(0));
        l.close(0.5, Some(50));
        l.open(2.0, Some(200));
        // First interval [0, 2.25): the window at 0 and the one at 2, still open.
        let s1 = l.at(2.25, Some(225));
        let i1 = s1.since(&start);
        assert_eq!(i1.windows, 2);
        assert_eq!(i1.open_s, 0.75);
        assert_eq!(i1.requests, Some(75));
        assert!(i1.open_now);
        l.close(2.5, Some(250));
        // Second interval [2.25, 3): the window at 2 carried over, its last 0.25 s.
        let s2 = l.at(3.0, Some(300));
        let i2 = s2.since(&s1);
        assert_eq!(i2.windows, 1);
        assert_eq!(i2.open_s, 0.25);
        assert_eq!(i2.requests, Some(25));
        assert!(!i2.open_now);
        // The same through the reports: windows and seconds agree.
        let sch = Schedule::new(0.5, 2.0).unwrap();
        let r1 = DetailReport::new(&sch, &i1, 2.25, Some(225), (0, 0, 0));
        assert_eq!((r1.windows, r1.in_window_s), (2, 0.75));
        let r2 = DetailReport::new(&sch, &i2, 0.75, Some(75), (0, 0, 0));
        assert_eq!((r2.windows, r2.in_window_s), (1, 0.25));
        // The summary [0, 3): two windows, 1 s, the straddling one counted once.
        let sum = s2.since(&start);
        assert_eq!(sum.windows, 2);
        assert_eq!(sum.open_s, 1.0);
        assert_eq!(sum.requests, Some(100));
        let rs = DetailReport::new(&sch, &sum, 3.0, Some(300), (0, 0, 0));
        assert_eq!((rs.windows, rs.in_window_s), (2, 1.0));
        // An interval inside one window: that window, the interval's whole length.
        let mut l = Ledger::new();
        l.open(0.0, Some(0));
        let a = l.at(0.125, Some(0));
        let b = l.at(0.375, Some(0));
        let d = b.since(&a);
        assert_eq!((d.windows, d.open_s), (1, 0.25));
    }

    #[test]
    fn one_unreadable_counter_makes_window_requests_unknown_for_good() {
        let mut l = Ledger::new();
        l.open(0.0, Some(1));
        l.close(1.0, None);
        l.open(10.0, Some(5));
        l.close(11.0, Some(9));
        assert_eq!(l.at(12.0, Some(9)).requests, None);
        assert_eq!(l.at(12.0, Some(9)).windows, 2);
    }

    #[test]
    fn the_report_says_sampled_with_its_coverage() {
        let s = Schedule::new(1.0, 10.0).unwrap();
        let cov = Coverage {
            windows: 3,
            open_s: 3.0,
            requests: Some(300),
            open_now: false,
        };
        let r = DetailReport::new(&s, &cov, 25.0, Some(2500), (120, 80, 20));
        assert_eq!(r.mode, "sampled");
        assert_eq!(r.coverage, 0.12);
        assert_eq!(r.requests_in_windows, Some(300));
        let line = r.line();
        assert!(line.contains("SAMPLED"), "{line}");
        assert!(line.contains("12.0%"), "{line}");
        assert!(line.contains("300 requests in windows of 2500"), "{line}");
        assert_eq!(
            DetailReport::new(&s, &cov, 0.0, None, (0, 0, 0)).coverage,
            0.0
        );
        assert_eq!(
            DetailReport::new(&s, &cov, 2.0, None, (0, 0, 0)).coverage,
            1.0
        );
    }
}
