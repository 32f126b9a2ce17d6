//! `--all`: every nginx master on the host and in its containers, followed by one
//! nginx-probe process. [`run`] rescans /proc every [`RESCAN_MS`]
//! (`collect::masters::scan`), attaches a [`Session`] to each new master (at most
//! [`MAX_MASTERS`] at once), and lets each session end on its own when its master
//! exits (its final summary printed then) or when the run ends. Every report a session
//! builds names its master (`Report::master`) and, where two masters would mix in the
//! connection lifecycle counters (one port, two network namespaces), says that figure
//! is unknown and why. One `/metrics` server answers for all: each scrape is handed to
//! every session and the texts are merged with a `master` label
//! (`render::prometheus_masters::merge`).
//!
//! Each master's session loads its own set of eBPF programs (its own worker slots,
//! filter, `ACCEPT_CALLER` range of its own binary, listening ports and lifecycle
//! ports), so no kernel map is shared between masters; the cost is one set of programs
//! per master on each tracepoint (docs/usage.md, `--all`).

use std::{
    cell::RefCell,
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
    rc::Rc,
    time::Duration,
};

use log::warn;
use tokio::{
    sync::{mpsc, oneshot},
    task::JoinHandle,
};

use super::{
    master_tag,
    plan::Plan,
    session::{deadline_of, tracefs_and_kernel, Carry, Relabel, Session},
    TraceArgs,
};
use crate::{
    collect::{masters, selfcost, target},
    error::ProbeError,
    io::metrics_server::{self, Endpoint, Scrape},
    model::masters::{shared_port, Listeners, MasterInfo},
    render::{prometheus, prometheus_masters},
};

/// How often /proc is scanned for new masters, ms.
pub const RESCAN_MS: u64 = 2000;

/// Most masters followed at once: each has its own programs and its own series.
pub const MAX_MASTERS: usize = 16;

/// How long a scrape waits for the masters' sessions to answer (a session busy
/// finishing its summary is left out of that scrape).
const SCRAPE_WAIT: Duration = Duration::from_secs(5);

/// One master being followed.
struct Followed {
    info: MasterInfo,
    /// Its pid and start time, as [`started`] read them at attach.
    key: (u32, Option<u64>),
    /// Hands the session its share of each scrape.
    scrapes: mpsc::Sender<Scrape>,
    task: JoinHandle<Result<(), ProbeError>>,
}

/// Everything `--all` holds: the followed masters and the one `/metrics` server.
struct Supervisor {
    args: &'static TraceArgs,
    plan: Plan,
    tracefs_root: PathBuf,
    metrics: Endpoint,
    deadline: Option<tokio::time::Instant>,
    followed: BTreeMap<u32, Followed>,
    /// Masters whose session ended or failed to attach, by (pid, start time in clock
    /// ticks since boot): not attached again. The start time tells a new master that
    /// reuses an old one's pid, which a long-running exporter will meet.
    done: BTreeSet<(u32, Option<u64>)>,
    /// Masters found and not followed at the last scan (the cap).
    left_out: usize,
    /// Each followed master's network namespace and ports, read at every scan.
    listeners: Rc<RefCell<Listeners>>,
}

/// Runs `nginx-probe --all ...`: checks, then follows every master until a signal or
/// `--duration` ends the run; each master's summary is printed when its session ends.
///
/// Errors: usage errors and missing kernel features before anything is attached.
pub async fn run(args: TraceArgs) -> Result<(), ProbeError> {
    // No live view: one screen cannot show several masters' reports.
    let plan = Plan::new(&args, false)?;
    if !nix::unistd::geteuid().is_root() {
        return Err(ProbeError::NotRoot);
    }
    if let Some(w) = crate::collect::fd_limit::raise() {
        warn!("{w}");
    }
    let listener = metrics_server::bind(args.listen)?;
    let tracefs_root = tracefs_and_kernel(&args)?;
    // Sessions run as local tasks for the whole run; the arguments live as long.
    let args: &'static TraceArgs = Box::leak(Box::new(args));
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async move {
            let mut sup = Supervisor {
                args,
                plan,
                tracefs_root,
                metrics: Endpoint::start(listener)?,
                deadline: args
                    .duration
                    .map(|d| tokio::time::Instant::now() + Duration::from_secs_f64(d)),
                followed: BTreeMap::new(),
                done: BTreeSet::new(),
                left_out: 0,
                listeners: Rc::new(RefCell::new(Listeners::new())),
            };
            sup.rescan();
            eprintln!(
                "Following every nginx master (--all): {} now [{}], /proc rescanned every {} s (at most {MAX_MASTERS}). Hit Ctrl-C to end.",
                sup.followed.len(),
                sup.followed.keys().map(|p| p.to_string()).collect::<Vec<_>>().join(" "),
                RESCAN_MS / 1000
            );
            sup.event_loop().await?;
            sup.wind_down().await;
            Ok(())
        })
        .await
}

impl Supervisor {
    /// Rescans, answers scrapes and reaps ended sessions until a signal or the
    /// deadline. The sessions see the same signal and deadline and end on their own.
    async fn event_loop(&mut self) -> Result<(), ProbeError> {
        let [mut sigint, mut sigterm, mut sighup] = super::session::end_signals()?;
        let mut rescan = tokio::time::interval(Duration::from_millis(RESCAN_MS));
        rescan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        rescan.tick().await;
        let until = self.deadline;
        let deadline = deadline_of(until);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                _ = sigint.recv() => return Ok(()),
                _ = sigterm.recv() => return Ok(()),
                _ = sighup.recv() => return Ok(()),
                _ = &mut deadline => return Ok(()),
                _ = rescan.tick() => self.rescan(),
                Some(reply) = self.metrics.next_scrape() => {
                    let text = self.scrape().await;
                    let _ = reply.send(text);
                }
            }
        }
    }

    /// Lets go of masters whose session ended, then attaches to the new ones, up to
    /// [`MAX_MASTERS`]; says once when masters are left out.
    fn rescan(&mut self) {
        self.reap();
        let found = masters::scan();
        let new: Vec<u32> = found
            .iter()
            .copied()
            .filter(|&p| !self.followed.contains_key(&p) && !self.done.contains(&started(p)))
            .collect();
        let room = MAX_MASTERS.saturating_sub(self.followed.len());
        if new.len() > room && self.left_out == 0 {
            warn!(
                "--all follows at most {MAX_MASTERS} nginx masters at once: {} left out for now ({})",
                new.len() - room,
                new[room..]
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
        self.left_out = new.len().saturating_sub(room);
        for pid in new.into_iter().take(room) {
            self.follow(pid);
        }
        // Each followed master's ports, for the connection figures a shared port
        // would mix (read here, so that each report sees every other master's).
        let mut all = self.listeners.borrow_mut();
        for &pid in self.followed.keys() {
            all.insert(pid, masters::listeners(pid));
        }
    }

    /// Removes the sessions that ended (their summary already printed), warning of
    /// those that failed.
    fn reap(&mut self) {
        let ended: Vec<u32> = self
            .followed
            .iter()
            .filter(|(_, f)| f.task.is_finished())
            .map(|(&p, _)| p)
            .collect();
        for pid in ended {
            if let Some(f) = self.followed.remove(&pid) {
                self.done.insert(f.key);
                self.listeners.borrow_mut().remove(&pid);
                if let Some(Ok(Err(e))) = futures_now(f.task) {
                    master_tag::sync_scope(pid, || warn!("{e}"));
                }
            }
        }
    }

    /// Attaches a session to master `pid` and runs it as a local task; a master that
    /// cannot be attached is warned about and not tried again. Every line printed for
    /// it starts with `master <pid>: ` ([`master_tag`]).
    fn follow(&mut self, pid: u32) {
        master_tag::sync_scope(pid, || self.follow_tagged(pid));
    }

    /// [`Supervisor::follow`], inside master `pid`'s tag.
    fn follow_tagged(&mut self, pid: u32) {
        let master = match target::validate_master(pid) {
            Ok(m) => m,
            Err(e) => {
                warn!("left out: {e}");
                self.done.insert(started(pid));
                return;
            }
        };
        let info = masters::info(pid);
        let (tx, relay) = Endpoint::relay();
        let carry = Carry {
            metrics: relay,
            record: None,
            record_error: None,
            restarts: 0,
            deadline: self.deadline,
        };
        let mut session = match Session::attach(
            self.args,
            self.plan.clone(),
            master,
            &self.tracefs_root,
            carry,
        ) {
            Ok(s) => s,
            Err(e) => {
                warn!("left out: {e}");
                self.done.insert(started(pid));
                return;
            }
        };
        session.relabel = Some(relabel(info.clone(), self.listeners.clone()));
        let task = tokio::task::spawn_local(master_tag::scope(pid, run_session(session, pid)));
        self.followed.insert(
            pid,
            Followed {
                info,
                key: started(pid),
                scrapes: tx,
                task,
            },
        );
    }

    /// The `/metrics` text: every followed master's, merged and labelled.
    async fn scrape(&mut self) -> String {
        // Every session is asked first, so they render meanwhile; one deadline for all.
        let mut waiting = Vec::new();
        for f in self.followed.values() {
            let (reply, text) = oneshot::channel();
            if f.scrapes.try_send(reply).is_ok() {
                waiting.push((f.info.clone(), text));
            }
        }
        let until = tokio::time::Instant::now() + SCRAPE_WAIT;
        let mut parts = Vec::new();
        for (info, text) in waiting {
            if let Ok(Ok(text)) = tokio::time::timeout_at(until, text).await {
                parts.push((info, text));
            }
        }
        let own = prometheus::render_waiting(&prometheus::Extras {
            own: selfcost::read(None),
            ..Default::default()
        });
        prometheus_masters::merge(&own, &parts, self.left_out)
    }

    /// After a signal or the deadline: waits for every session to print its summary,
    /// then stops the server.
    async fn wind_down(mut self) {
        for (pid, f) in std::mem::take(&mut self.followed) {
            let ended = f.task.await;
            master_tag::sync_scope(pid, || match ended {
                Ok(Err(e)) => warn!("{e}"),
                Err(e) => warn!("its session stopped ({e})"),
                Ok(Ok(())) => {}
            });
        }
        self.metrics.shutdown().await;
    }
}

/// One master's session under `--all`, from its event loop to its programs detached.
///
/// The end of a run (a signal, `--duration`) reaches every session in the same turn of
/// the runtime; each takes its final snapshot ([`Session::conclude`], about a ms) and
/// yields before writing its summary, so no master's period runs on while another's is
/// written. Detaching (dropping the probe) took 1.9-3.2 s per master on this machine
/// (each tracepoint's perf event waits for the kernel, see `collect::loader`), 99.9% of
/// a session's end: it runs on a blocking thread, every master's in parallel, and is
/// awaited before the run exits.
async fn run_session(mut session: Session<'static>, pid: u32) -> Result<(), ProbeError> {
    let why = session.event_loop().await?;
    let exited = session.master_exited;
    let concluded = session.conclude(why.clone(), false).await?;
    tokio::task::yield_now().await;
    let (_, probe) = concluded.deliver()?;
    if exited {
        eprintln!(
            "nginx-probe: {}{why}: its summary is printed and it is let go (--all)",
            master_tag::tag()
        );
    }
    let detach = move || master_tag::sync_scope(pid, || drop(probe));
    if let Err(e) = tokio::task::spawn_blocking(detach).await {
        warn!("its programs' detach stopped ({e}); they are released when nginx-probe exits");
    }
    Ok(())
}

/// What `--all` does to every report of master `info.pid`: names the master, records
/// its listening ports, and makes its client-connection figures unknown (with why)
/// while another followed master listens on one of its ports in another network
/// namespace ([`shared_port`]).
fn relabel(info: MasterInfo, listeners: Rc<RefCell<Listeners>>) -> Relabel {
    // Once mixed, the counters since attach stay mixed: the reason sticks.
    let mixed: RefCell<Option<String>> = RefCell::new(None);
    Box::new(move |r: &mut crate::model::Report| {
        if mixed.borrow().is_none() {
            *mixed.borrow_mut() = shared_port(info.pid, &listeners.borrow());
        }
        if let Some(why) = mixed.borrow().clone() {
            r.connections = None;
            r.connections_not_traced = Some(why);
        }
        r.master = Some(info.clone());
    })
}

/// A process's pid with its start time (`/proc/<pid>/stat` field 22), None once gone.
fn started(pid: u32) -> (u32, Option<u64>) {
    let start = procfs::process::Process::new(pid as i32)
        .and_then(|p| p.stat())
        .ok()
        .map(|s| s.starttime);
    (pid, start)
}

/// The result of a task known to be finished, without waiting.
fn futures_now<T>(task: JoinHandle<T>) -> Option<Result<T, tokio::task::JoinError>> {
    use std::future::Future as _;
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut task = task;
    match std::pin::Pin::new(&mut task).poll(&mut cx) {
        std::task::Poll::Ready(r) => Some(r),
        std::task::Poll::Pending => None,
    }
}
