//! A tracing session: attach to one nginx master ([`Session::attach`]), serve the event
//! loop (worker refreshes, interval reports, scrapes, signals: [`Session::event_loop`]),
//! and end with the last partial interval and the summary ([`Session::finish`]). What
//! goes where is decided beforehand by the pure [`Plan`].

use std::{
    path::Path,
    time::{Duration, Instant},
};

use log::{debug, warn};
use nginx_probe_common::SYSCALLS;
use tokio::signal::unix::{signal, SignalKind};

use super::{
    attach::{attach_programs, banner, load_probe},
    plan::{OutputMode, Plan},
    TraceArgs,
};
use crate::{
    collect::{
        discover, kernel,
        loader::Probe,
        selfcost,
        target::{self, Master},
        tracefs,
        tracker::{self, Tracker},
        window,
    },
    error::{DiscoveryError, ProbeError},
    io::{
        metrics_server,
        output::{Sent, Sink},
        recording,
    },
    model,
    render::{prometheus, text, tui},
    safe,
};

/// Interval reports waiting to be written to stdout before new ones are dropped (and
/// counted).
const OUTPUT_QUEUE: usize = 4;
/// How often the worker set is brought up to date (reloads, exits), ms.
pub(super) const REFRESH_MS: u64 = 500;

/// What outlives one master's session in exporter mode: the /metrics server, the
/// recording, the restarts and the --duration deadline.
pub(super) struct Carry {
    pub(super) metrics: metrics_server::Endpoint,
    /// The recording's writer, while it works (it ends with the first master).
    pub(super) record: Option<Sink>,
    /// Why the recording stopped early, when it did.
    pub(super) record_error: Option<String>,
    /// Masters attached after the first one exited.
    pub(super) restarts: u64,
    /// When --duration ends the run.
    pub(super) deadline: Option<tokio::time::Instant>,
}

/// The master to trace: `--pid`, else discovery (see [`discover::find_master`]).
fn resolve_master(args: &TraceArgs) -> Result<Master, ProbeError> {
    match args.pid {
        Some(pid) => target::validate_master(pid),
        None => find_master(args),
    }
}

/// Discovery from `--pid-file` (explicit) or the default pid file, then /proc.
fn find_master(args: &TraceArgs) -> Result<Master, ProbeError> {
    let file = args
        .pid_file
        .clone()
        .unwrap_or_else(|| std::path::PathBuf::from(discover::DEFAULT_PID_FILE));
    discover::find_master(&file, args.pid_file.is_some())
}

/// Runs `nginx-probe [--pid N] ...`: plan, find the master, check the kernel, attach,
/// loop, summary; with `--listen`, again for each new master after one exits.
///
/// Errors: usage errors before anything is attached; a missing kernel feature;
/// load/attach failures; a recording that could not be completed
/// ([`ProbeError::RecordIncomplete`], after the summary).
pub async fn run(args: TraceArgs) -> Result<(), ProbeError> {
    let plan = Plan::new(&args, std::io::IsTerminal::is_terminal(&std::io::stdout()))?;
    let mut master = resolve_master(&args)?;
    if !nix::unistd::geteuid().is_root() {
        return Err(ProbeError::NotRoot);
    }
    // Every map, program, link and /metrics connection is a file descriptor.
    if let Some(w) = crate::collect::fd_limit::raise() {
        warn!("{w}");
    }
    let metrics_listener = metrics_server::bind(args.listen)?;
    let tracefs_root = tracefs_and_kernel(&args)?;
    let mut carry = Carry::start(&args, &plan, &master, metrics_listener)?;
    loop {
        let mut session = Session::attach(&args, plan.clone(), master, &tracefs_root, carry)?;
        let end_reason = session.event_loop().await?;
        // Exporter mode: a master that exits is waited for, not the end of the run.
        let reattach = session.master_exited && args.listen.is_some();
        let old = session.master.clone();
        carry = session.finish(end_reason, reattach).await?;
        if !reattach {
            break;
        }
        match next_master(&args, &old, &mut carry).await {
            Some(m) => master = m,
            None => break,
        }
    }
    let metrics = std::mem::replace(&mut carry.metrics, metrics_server::Endpoint::none());
    metrics.shutdown().await;
    match (carry.record_error, &args.record) {
        (Some(why), Some(path)) => Err(ProbeError::RecordIncomplete(format!(
            "{}: {why}",
            path.display()
        ))),
        _ => Ok(()),
    }
}

/// tracefs, mounted when it was not (and said so), and the kernel's features checked;
/// a warning when `--uprobes` needs a newer kernel. Returns tracefs's root.
///
/// Errors: tracefs cannot be mounted, or a kernel feature the probe needs is missing.
pub(super) fn tracefs_and_kernel(args: &TraceArgs) -> Result<std::path::PathBuf, ProbeError> {
    let (tracefs_root, mounted) = tracefs::ensure_mounted()?;
    if mounted {
        eprintln!(
            "nginx-probe: mounted tracefs at {} (it was not mounted)",
            tracefs_root.display()
        );
    }
    kernel::check(&tracefs_root)?;
    if args.uprobes && kernel::uprobes_supported() == Some(false) {
        warn!(
            "--uprobes needs Linux {}.{} or later (bpf_probe_read_user); requests will likely be estimated from writev calls",
            kernel::MIN_KERNEL_UPROBES.0,
            kernel::MIN_KERNEL_UPROBES.1
        );
    }
    Ok(tracefs_root)
}

impl Carry {
    /// What the first master's session starts with: the recording opened with its
    /// header (`--record`), the /metrics server on `listener` (`--listen`); the
    /// --duration deadline is set when the first session has attached.
    ///
    /// Errors: the record file cannot be created, the server cannot start.
    fn start(
        args: &TraceArgs,
        plan: &Plan,
        master: &Master,
        listener: Option<std::net::TcpListener>,
    ) -> Result<Carry, ProbeError> {
        let record = match &args.record {
            Some(path) => {
                let workers = target::find_workers(master.pid);
                Some(recording::create(
                    path,
                    &record_header(args, plan, master, &workers),
                )?)
            }
            None => None,
        };
        Ok(Carry {
            metrics: metrics_server::Endpoint::start(listener)?,
            record,
            record_error: None,
            restarts: 0,
            deadline: None,
        })
    }
}

/// Resolves at `until` (the --duration deadline); never without one.
pub(super) async fn deadline_of(until: Option<tokio::time::Instant>) {
    match until {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Exporter mode, after master `old` exited: says so, waits for a new master
/// ([`wait_for_master`]) and counts the restart. None when the run ends first.
async fn next_master(args: &TraceArgs, old: &Master, carry: &mut Carry) -> Option<Master> {
    if let Some(path) = &args.record {
        warn!(
            "the recording {} ended with master {}; later masters are served on /metrics only",
            path.display(),
            old.pid
        );
    }
    let which = if args.pid.is_some() {
        format!(
            "a new master titled as it was (`{}`, the same nginx started again; --pid)",
            safe::bounded(&old.title, 200)
        )
    } else {
        "a new master".to_string()
    };
    eprintln!(
        "nginx-probe: nginx master {} exited; waiting for {which} (exporter mode)",
        old.pid
    );
    let m = wait_for_master(args, old, carry).await?;
    carry.restarts += 1;
    eprintln!(
        "nginx-probe: new nginx master {} found (restart {}); attaching",
        m.pid, carry.restarts
    );
    Some(m)
}

/// The master that replaces `old` in exporter mode. With `--pid` (a given master, not
/// discovery): the one live master titled as `old` was (`/proc/<pid>/cmdline`: the
/// same nginx started again, or a binary upgrade's new master once the old one
/// exited), never another nginx of the host; else discovery, as at start.
fn replacement(args: &TraceArgs, old: &Master) -> Result<Master, ProbeError> {
    if args.pid.is_none() {
        return find_master(args);
    }
    let same: Vec<Master> = crate::collect::masters::scan()
        .into_iter()
        .filter(|&p| p != old.pid)
        .filter_map(|p| target::validate_master(p).ok())
        .filter(|m| m.title == old.title)
        .collect();
    match same.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(ProbeError::Discovery(DiscoveryError::NoMaster {
            pid_file: "-".into(),
        })),
        several => Err(ProbeError::Discovery(DiscoveryError::SeveralMasters {
            masters: several
                .iter()
                .map(|m| format!("{} `{}`", m.pid, safe::bounded(&old.title, 200)))
                .collect(),
        })),
    }
}

/// SIGINT, SIGTERM and SIGHUP, which end a run (in that order).
///
/// Errors: a handler cannot be installed.
pub(super) fn end_signals() -> std::io::Result<[tokio::signal::unix::Signal; 3]> {
    Ok([
        signal(SignalKind::interrupt())?,
        signal(SignalKind::terminate())?,
        signal(SignalKind::hangup())?,
    ])
}

/// Exporter mode between masters: looks for a new master every 500 ms (the pid file,
/// else the only master in /proc) while answering scrapes with the probe's own metrics
/// and `nginx_probe_attached 0`. None when a signal or --duration ends the run first.
async fn wait_for_master(args: &TraceArgs, old: &Master, carry: &mut Carry) -> Option<Master> {
    let Ok([mut sigint, mut sigterm, mut sighup]) = end_signals() else {
        return None;
    };
    let mut poll = tokio::time::interval(Duration::from_millis(REFRESH_MS));
    let mut said_several = false;
    let until = carry.deadline;
    let deadline = deadline_of(until);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            _ = sigint.recv() => return None,
            _ = sigterm.recv() => return None,
            _ = sighup.recv() => return None,
            _ = &mut deadline => return None,
            Some(reply) = carry.metrics.next_scrape() => {
                let extras = prometheus::Extras {
                    restarts: carry.restarts,
                    own: selfcost::read(None),
                    ..Default::default()
                };
                let _ = reply.send(prometheus::render_waiting(&extras));
            }
            _ = poll.tick() => match replacement(args, old) {
                Ok(m) if m.pid != old.pid => return Some(m),
                Err(ProbeError::Discovery(e @ DiscoveryError::SeveralMasters { .. })) if !said_several => {
                    warn!("{e}; waiting until one is left");
                    said_several = true;
                }
                _ => {}
            },
        }
    }
}

/// What `--all` does to each report of one master's session: names the master, and
/// says why a figure that would mix masters is unknown (see `super::all`).
pub(super) type Relabel = Box<dyn Fn(&mut model::Report)>;

/// Everything one run holds between attach and summary.
pub(super) struct Session<'a> {
    args: &'a TraceArgs,
    plan: Plan,
    master: Master,
    probe: Probe,
    tracker: Tracker,
    /// The recording's writer, while it works.
    record: Option<Sink>,
    /// Why the recording stopped early, when it did.
    record_error: Option<String>,
    metrics: metrics_server::Endpoint,
    /// Masters attached before this one exited (exporter mode).
    restarts: u64,
    /// When --duration ends the run.
    deadline: Option<tokio::time::Instant>,
    /// Snapshots of the recent past for the verdict gauges (with --listen).
    window: Option<window::Window>,
    /// Set when the event loop ended because the master exited.
    pub(super) master_exited: bool,
    live: Option<tui::LiveView>,
    output: Sink,
    started: Instant,
    /// The snapshot when every program was attached, nginx's counters read with it: the
    /// start of the summary's period (and of the first interval's, and of the verdict
    /// window's until it is a window long). Counts the programs made while the others
    /// were still being attached stay out of it, as nginx's counters' growth then does:
    /// both sides of every comparison cover the same period.
    attached: model::snapshot::Snapshot,
    /// The snapshot at the start of the current interval, and when it was taken.
    prev: Option<model::snapshot::Snapshot>,
    prev_at: Instant,
    /// SIGINT, SIGTERM and SIGHUP handlers, installed before the banner (whoever
    /// waits for it may signal at once); the event loop takes them.
    signals: Option<[tokio::signal::unix::Signal; 3]>,
    /// With `--detail sampled`: when the detail window opens or closes next.
    detail_next: Option<tokio::time::Instant>,
    /// Under `--all`: applied to every report built (None otherwise).
    pub(super) relabel: Option<Relabel>,
}

impl<'a> Session<'a> {
    /// Validates the target and every output, then loads and attaches the programs,
    /// prints the banner and starts the live view. Nothing is attached when a check
    /// fails.
    pub(super) fn attach(
        args: &'a TraceArgs,
        plan: Plan,
        master: Master,
        tracefs_root: &Path,
        carry: Carry,
    ) -> Result<Session<'a>, ProbeError> {
        let workers = target::find_workers(master.pid);
        if workers.is_empty() {
            warn!(
                "master {} has no workers right now; waiting for them",
                master.pid
            );
        }
        let (mut probe, mut tracker) =
            load_probe(args, &master, tracefs_root, &workers, carry.restarts)?;
        let schedule = match plan.detail {
            model::sampling::DetailMode::Sampled(s) => Some(s),
            model::sampling::DetailMode::Full => None,
        };
        attach_programs(
            args,
            &master,
            tracefs_root,
            schedule.is_some(),
            &mut probe,
            &mut tracker,
        )?;
        // The period starts here, with every program counting: taken before the first
        // detail window opens, when the window's programs are not attached yet.
        let attached = tracker.snapshot(&probe)?;
        // Whoever waits for the banner may signal at once: the handlers come first (a
        // SIGINT between the banner and the event loop was lost, or killed the run).
        let signals = Some(end_signals()?);
        // The first detail window opens at once (t = 0 of the schedule).
        let detail_next = match schedule {
            Some(s) => {
                tracker.sampling = Some((model::sampling::Sampler::new(s), Instant::now()));
                Some(toggle_window(&mut probe, &mut tracker)?)
            }
            None => None,
        };
        banner(&master, &workers, &probe, &tracker);
        let live = (plan.mode == OutputMode::Live)
            .then(|| start_live(&master, plan.record_every_s))
            .flatten();
        let started = Instant::now();
        Ok(Session {
            args,
            plan,
            master,
            probe,
            tracker,
            record: carry.record,
            record_error: carry.record_error,
            metrics: carry.metrics,
            restarts: carry.restarts,
            // --duration counts from the first attach (the banner), not from the start:
            // attaching takes seconds under load, and the run is the time traced.
            deadline: carry.deadline.or_else(|| {
                args.duration
                    .map(|d| tokio::time::Instant::now() + Duration::from_secs_f64(d))
            }),
            window: args
                .listen
                .map(|_| window::Window::new(args.verdict_window)),
            master_exited: false,
            live,
            output: Sink::spawn(Box::new(std::io::stdout()), "stdout", OUTPUT_QUEUE),
            started,
            prev: Some(attached.clone()),
            attached,
            prev_at: started,
            signals,
            detail_next,
            relabel: None,
        })
    }

    /// Serves signals, worker refreshes, the live view's keys, scrapes and interval
    /// reports until the run ends; returns why it ended.
    pub(super) async fn event_loop(&mut self) -> Result<String, ProbeError> {
        let [mut sigint, mut sigterm, mut sighup] = match self.signals.take() {
            Some(s) => s,
            None => end_signals()?,
        };
        let mut refresh = tokio::time::interval(Duration::from_millis(REFRESH_MS));
        refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut report_tick =
            tokio::time::interval(Duration::from_secs_f64(self.plan.tick_period_s()));
        report_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        report_tick.tick().await; // the first tick is immediate
        let duration = self.args.duration;
        let until = self.deadline;
        let deadline = deadline_of(until);
        tokio::pin!(deadline);
        let ticking = self.plan.tick_every_s.is_some();
        let sampled = self.detail_next.is_some();
        loop {
            let next_window = self
                .detail_next
                .unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600));
            let ended: Option<String> = tokio::select! {
                _ = sigint.recv() => Some("interrupted (SIGINT)".into()),
                _ = sigterm.recv() => Some("terminated (SIGTERM)".into()),
                _ = sighup.recv() => Some("hangup (SIGHUP)".into()),
                _ = &mut deadline => Some(format!("--duration {} s elapsed", duration.unwrap_or(0.0))),
                _ = refresh.tick() => self.on_refresh()?,
                input = next_input(&mut self.live) => match input {
                    tui::Input::Quit => Some("quit from the live view".into()),
                    tui::Input::Redraw => {
                        if let Some(v) = self.live.as_mut() {
                            v.redraw()?;
                        }
                        None
                    }
                    tui::Input::Ignore => None,
                },
                Some(reply) = self.metrics.next_scrape() => {
                    // Each scrape: the summary so far, from fresh kernel counters, and
                    // the verdicts of the recent window.
                    let _ = reply.send(self.scrape()?);
                    None
                }
                _ = report_tick.tick(), if ticking => self.on_tick()?,
                _ = tokio::time::sleep_until(next_window), if sampled => {
                    self.detail_next = Some(toggle_window(&mut self.probe, &mut self.tracker)?);
                    None
                }
            };
            if let Some(why) = ended {
                return Ok(why);
            }
        }
    }

    /// Brings the worker set up to date; `Some(reason)` when the master is gone.
    fn on_refresh(&mut self) -> Result<Option<String>, ProbeError> {
        match target::alive(self.master.pid) {
            Ok(true) => {}
            Ok(false) => {
                self.master_exited = true;
                return Ok(Some(model::master_exited_reason(self.master.pid)));
            }
            // Not a fact about the master (EMFILE, EACCES): said, counted, and the run
            // goes on.
            Err(e) => self.tracker.proc_error(&e),
        }
        let events = self.tracker.refresh(&mut self.probe)?;
        for ev in events {
            // The live view shows them in its events pane.
            if self.live.is_none() {
                self.say_event(&ev);
            }
        }
        if self.window.as_ref().is_some_and(|w| w.due(Instant::now())) {
            let snap = self.tracker.snapshot(&self.probe)?;
            if let Some(w) = self.window.as_mut() {
                w.push(Instant::now(), snap);
            }
        }
        Ok(None)
    }

    /// A worker event on stderr; under `--all` it names its master first.
    fn say_event(&self, ev: &model::Event) {
        eprintln!(
            "nginx-probe: {}{}",
            super::master_tag::tag(),
            safe::line(&text::event_line(
                ev,
                self.master.pid,
                self.relabel.is_some()
            ))
        );
    }

    /// The /metrics text: the summary so far, the verdicts of the recent window, the
    /// restarts and the probe's own cost.
    fn scrape(&mut self) -> Result<String, ProbeError> {
        let r = self.summary(None)?;
        let recent = match &self.window {
            Some(w) => {
                let snap = self.tracker.snapshot(&self.probe)?;
                let (base, secs) = w.base(Instant::now(), self.started);
                Some(self.judged(
                    model::ReportKind::Window,
                    &snap,
                    base.or(Some(&self.attached)),
                    secs,
                    &self.probe.missing,
                    None,
                ))
            }
            None => None,
        };
        let extras = prometheus::Extras {
            restarts: self.restarts,
            own: selfcost::read(Some(&self.probe)),
            window: recent
                .as_ref()
                .map(|w| (w.duration_s, w.verdicts.as_slice())),
            skip_zero_histograms: self.args.skip_zero_histograms,
        };
        Ok(prometheus::render_with(&r, &extras))
    }

    /// One interval report: recorded, shown live or printed; `Some(reason)` when
    /// stdout went away.
    fn on_tick(&mut self) -> Result<Option<String>, ProbeError> {
        let snap = self.tracker.snapshot(&self.probe)?;
        let now = Instant::now();
        let r = self.interval_report(&snap, (now - self.prev_at).as_secs_f64());
        self.record_interval(&r);
        let mut ended = None;
        if let Some(v) = self.live.as_mut() {
            v.show(&r)?;
        } else if self.plan.stdout_every_s.is_some()
            && self.output.interval(self.render(&r)) == Sent::Closed
        {
            ended = Some("stdout closed".into());
        }
        self.tracker.start_interval();
        self.prev = Some(snap);
        self.prev_at = now;
        Ok(ended)
    }

    /// The report of the period from `prev` to `cur`, built by the model from the
    /// tracker's plain data and judged by analysis: the one path from collect through
    /// model to analysis.
    fn judged(
        &self,
        kind: model::ReportKind,
        cur: &model::snapshot::Snapshot,
        prev: Option<&model::snapshot::Snapshot>,
        secs: f64,
        missing: &[String],
        end_reason: Option<String>,
    ) -> model::Report {
        let inputs = self.tracker.period_inputs(kind);
        let mut r = model::build::report(&inputs, kind, cur, prev, secs, missing, end_reason);
        if let Some(relabel) = &self.relabel {
            relabel(&mut r);
        }
        r.verdicts = crate::analysis::verdict::judge_report(&r);
        r.not_judged = crate::analysis::not_judged::of_report(&r);
        r
    }

    /// The interval from the last tick to `snap`, `secs` long.
    fn interval_report(&mut self, snap: &model::snapshot::Snapshot, secs: f64) -> model::Report {
        self.judged(
            model::ReportKind::Interval,
            snap,
            self.prev.as_ref(),
            secs,
            &self.probe.missing,
            None,
        )
    }

    /// The report since attach (the snapshot when every program was attached), from
    /// fresh kernel counters, with the output drops
    /// counted; `end_reason` makes it the final summary.
    fn summary(&mut self, end_reason: Option<String>) -> Result<model::Report, ProbeError> {
        let snap = self.tracker.snapshot(&self.probe)?;
        let secs = self.started.elapsed().as_secs_f64();
        Ok(self.summary_of(&snap, secs, end_reason))
    }

    /// [`Session::summary`] from snapshot `snap`, taken `secs` after the start.
    fn summary_of(
        &mut self,
        snap: &model::snapshot::Snapshot,
        secs: f64,
        end_reason: Option<String>,
    ) -> model::Report {
        let mut r = self.judged(
            model::ReportKind::Summary,
            snap,
            Some(&self.attached),
            secs,
            &self.probe.missing,
            end_reason,
        );
        r.drops
            .insert("interval_reports_dropped".into(), self.output.dropped);
        r
    }

    /// Sends an interval line to the recording; a writer that stopped is warned about
    /// once and the run goes on without it.
    fn record_interval(&mut self, r: &model::Report) {
        let Some(sink) = self.record.as_mut() else {
            return;
        };
        if sink.interval(recording::sealed_line(&safe::json(r))) == Sent::Closed {
            let why = match self.record.take().map(|s| s.close()) {
                Some(Err(e)) => e.to_string(),
                _ => "its writer stopped".into(),
            };
            let path = self.args.record.as_ref().map(|p| p.display().to_string());
            warn!(
                "recording to {} stopped: {why}; the live report goes on",
                path.unwrap_or_default()
            );
            self.record_error = Some(why);
        }
    }

    /// One report as the user asked for it: a JSON line, or the text tables.
    fn render(&self, r: &model::Report) -> String {
        if self.plan.mode == OutputMode::Json {
            json_line(r)
        } else {
            text::render_text(r, self.args.hist.as_deref(), &text::clock(r.time_unix_s))
        }
    }

    /// Stops the server (unless `keep_serving`: exporter mode between masters) and the
    /// live view, writes the last partial interval (so the intervals add up to the
    /// summary) and the summary, and detaches. Returns what the next master's session
    /// carries on.
    pub(super) async fn finish(
        self,
        end_reason: String,
        keep_serving: bool,
    ) -> Result<Carry, ProbeError> {
        let (carry, probe) = self.conclude(end_reason, keep_serving).await?.deliver()?;
        drop(probe);
        Ok(carry)
    }

    /// The end of the run up to the summary's snapshot, nothing printed after the last
    /// partial interval: stops the server (unless `keep_serving`) and the live view,
    /// marks the workers that exited (a final refresh), writes the last partial interval
    /// and builds the summary from fresh kernel counters. The programs stay attached
    /// until [`Concluded::deliver`]'s caller drops the probe.
    pub(super) async fn conclude(
        mut self,
        end_reason: String,
        keep_serving: bool,
    ) -> Result<Concluded<'a>, ProbeError> {
        if !keep_serving {
            let metrics = std::mem::replace(&mut self.metrics, metrics_server::Endpoint::none());
            metrics.shutdown().await;
        }
        // Back to the normal screen for the summary.
        if let Some(v) = self.live.take() {
            v.stop();
        }
        // Final refresh so that workers that exited are marked.
        if let Ok(events) = self.tracker.refresh(&mut self.probe) {
            for ev in events {
                self.say_event(&ev);
            }
        }
        // One snapshot ends both the last partial interval and the summary, so the
        // intervals add up to it (trial 21: a tail under 50 ms was left out, the
        // intervals 4-13 ms and their counts short of the summary).
        let snap = self.tracker.snapshot(&self.probe)?;
        let now = Instant::now();
        let tail_s = (now - self.prev_at).as_secs_f64();
        if self.plan.tick_every_s.is_some() && tail_s > 0.0 {
            let r = self.interval_report(&snap, tail_s);
            if let Some(sink) = self.record.as_mut() {
                let _ = sink.interval(recording::sealed_line(&safe::json(&r)));
            }
            if self.plan.mode == OutputMode::Json && self.plan.stdout_every_s.is_some() {
                let _ = self.output.interval(self.render(&r));
            }
        }
        let secs = (now - self.started).as_secs_f64();
        let summary = self.summary_of(&snap, secs, Some(end_reason));
        Ok(Concluded {
            session: self,
            summary,
        })
    }
}

/// A session whose summary is built ([`Session::conclude`]) and not yet written; its
/// programs are still attached.
pub(super) struct Concluded<'a> {
    session: Session<'a>,
    summary: model::Report,
}

impl Concluded<'_> {
    /// Writes the summary to the recording and stdout, and hands back what the next
    /// master's session carries on and the probe: dropping it detaches every program
    /// (seconds: each tracepoint's perf event waits for the kernel), which `--all` does
    /// on a blocking thread per master, in parallel.
    pub(super) fn deliver(self) -> Result<(Carry, Probe), ProbeError> {
        let Concluded {
            session: mut s,
            summary: mut r,
        } = self;
        if s.args.record.is_some() {
            r.drops.insert(
                "record_lines_dropped".into(),
                s.record.as_ref().map(|s| s.dropped).unwrap_or(0),
            );
        }
        if let Some(sink) = s.record.take() {
            if let Err(e) = sink.finish(recording::sealed_line(&safe::json(&r))) {
                s.record_error = Some(e.to_string());
            }
        }
        let text = s.render(&r);
        s.output.finish(text)?;
        let carry = Carry {
            metrics: s.metrics,
            record: s.record,
            record_error: s.record_error,
            restarts: s.restarts,
            deadline: s.deadline,
        };
        Ok((carry, s.probe))
    }
}

/// A report as one JSON line: strings exact (the raw paths and names nginx gave),
/// terminal-safe escapes ([`safe::json`]).
fn json_line(r: &model::Report) -> String {
    safe::json(r) + "\n"
}

/// The recording's header: what ran where, with which options.
fn record_header(
    args: &TraceArgs,
    plan: &Plan,
    master: &Master,
    workers: &[target::WorkerProc],
) -> recording::Header {
    let (host, kernel) = recording::host_and_kernel();
    recording::Header {
        kind: "header".into(),
        schema: model::SCHEMA_VERSION,
        tool: format!("nginx-probe {}", env!("CARGO_PKG_VERSION")),
        host,
        kernel,
        cpus: aya::util::online_cpus().map(|c| c.len()).unwrap_or(0),
        nginx_version: target::nginx_version(master.pid),
        master_title: master.title.clone(),
        master_pid: master.pid,
        workers: workers.iter().map(|w| w.pid).collect(),
        started_unix_s: tracker::unix_now(),
        options: recording::Options {
            interval_s: plan.record_every_s,
            syscalls: args
                .syscalls
                .0
                .iter()
                .map(|&i| SYSCALLS[i].name.to_string())
                .collect(),
            uprobes: args.uprobes,
            argv: std::env::args().collect(),
        },
    }
}

/// Opens the detail window when the schedule says one should be open and none is, or
/// closes it in the opposite case. The detail programs count only while their gate is
/// open, and nginx's request counter is read right after it opens and right after it
/// closes, so the window's requests and its detail figures cover the same time.
/// Returns when to look again (the schedule's next change).
fn toggle_window(
    probe: &mut Probe,
    tracker: &mut Tracker,
) -> Result<tokio::time::Instant, ProbeError> {
    let Some((s, t0)) = tracker.sampling.as_mut() else {
        return Ok(tokio::time::Instant::now() + Duration::from_secs(3600));
    };
    let t = t0.elapsed().as_secs_f64();
    let want_open = s.schedule.is_open(t);
    if want_open != s.ledger.is_open() {
        if want_open {
            let cost = probe.attach_detail()?;
            // Counting starts with the gate, at the counter read: the window's requests
            // and its detail figures cover the same time.
            probe.set_detail_gate(true)?;
            let requests = tracker.counters.as_mut().map(|c| c.read().requests);
            s.ledger.open(t0.elapsed().as_secs_f64(), requests);
            s.cost.0 = cost.us;
            s.cost.2 = cost.links;
            // The previous window's release, finished on the closer thread by now.
            s.cost.1 = probe.last_detach_us();
            s.attach_us_total += cost.us;
            debug!(
                "detail window opened at {t:.3} s: {} links attached in {} us",
                cost.links, cost.us
            );
        } else {
            probe.set_detail_gate(false)?;
            let requests = tracker.counters.as_mut().map(|c| c.read().requests);
            s.ledger.close(t0.elapsed().as_secs_f64(), requests);
            let cost = probe.detach_detail();
            debug!(
                "detail window closed at {t:.3} s: {} links handed to the closer in {} us (the previous release took {} us)",
                cost.links,
                cost.us,
                probe.last_detach_us()
            );
        }
    }
    let next = s.schedule.next_change(t0.elapsed().as_secs_f64());
    Ok(tokio::time::Instant::from_std(
        *t0 + Duration::from_secs_f64(next),
    ))
}

/// The live view, or `None` (with a warning) when the terminal cannot host it.
fn start_live(master: &Master, interval_s: f64) -> Option<tui::LiveView> {
    let title = tui::Title {
        master_pid: master.pid,
        master_title: master.title.clone(),
        interval_s,
    };
    match tui::LiveView::start(title) {
        Ok(v) => Some(v),
        Err(e) => {
            warn!("no live view ({e}): printing text reports");
            None
        }
    }
}

/// The live view's next input; never ready without a live view.
async fn next_input(live: &mut Option<tui::LiveView>) -> tui::Input {
    match live {
        Some(v) => v.next_input().await,
        None => std::future::pending().await,
    }
}
