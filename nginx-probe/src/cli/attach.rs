//! Loading and attaching the programs for one master: the syscall tracepoints, the
//! accept uprobe of sampled detail, the request sources (nginx's counters, the request
//! and TLS uprobes), and the banner on stderr that says what is attached and what the
//! detail mode costs. Called by [`super::session`]'s `Session::attach`.

use std::path::Path;

use log::warn;

use super::TraceArgs;
use crate::{
    collect::{
        loader::{self, Probe},
        target::{self, Master},
        tracker::Tracker,
    },
    error::ProbeError,
    model, safe,
};

/// Loads the programs with a slot per worker (and room for more), and starts the
/// tracker on the master's `workers`: a `master_restart` event after `restarts`, the
/// workers followed, nginx's configuration read, the listening ports and error-log
/// inodes registered before the first write is classified.
///
/// Errors: the programs do not load, a worker cannot be followed.
pub(super) fn load_probe(
    args: &TraceArgs,
    master: &Master,
    tracefs_root: &Path,
    workers: &[target::WorkerProc],
    restarts: u64,
) -> Result<(Probe, Tracker), ProbeError> {
    let ncpus = aya::util::nr_cpus().unwrap_or(1);
    let slots = loader::slots_for(workers.len(), ncpus);
    let mut probe = Probe::load(tracefs_root, master.pid, slots, !args.writes_from_proc)?;
    let mut tracker = Tracker::new(master.clone());
    if restarts > 0 {
        tracker.events.push(model::Event {
            t_s: 0.0,
            event: model::EventKind::MasterRestart,
            pid: master.pid,
        });
    }
    tracker.add_workers(&mut probe, workers, false)?;
    // The generations at attach, before the first refresh adopts workers forked since.
    tracker.refresh_lifecycle(&mut probe);
    let pids: Vec<u32> = workers.iter().map(|w| w.pid).collect();
    tracker.set_config(crate::collect::config::read_for_master(master.pid, &pids));
    // Listening ports and error-log inodes before the first write is classified.
    tracker.register_destinations(&mut probe)?;
    Ok((probe, tracker))
}

/// Attaches the syscall programs (and with `sampled` detail the accept uprobe), the
/// request sources, and follows the workers forked meanwhile; warns of tracepoints
/// that are missing.
///
/// Errors: a program does not attach, the worker refresh fails.
pub(super) fn attach_programs(
    args: &TraceArgs,
    master: &Master,
    tracefs_root: &Path,
    sampled: bool,
    probe: &mut Probe,
    tracker: &mut Tracker,
) -> Result<(), ProbeError> {
    if sampled {
        // Accepts from nginx's ngx_get_connection: no syscall tracepoint stays
        // attached between windows.
        let exe = std::path::PathBuf::from(format!("/proc/{}/exe", master.pid));
        if let Err(e) = probe.attach_accept_uprobe(&exe) {
            probe.check_fds()?;
            warn!("accepts come from the accept4/accept tracepoints, attached all the time ({e}): every syscall of every process takes the kernel's syscall-tracing path between windows");
        }
    }
    if args.lifecycle_from_perf_events {
        probe.lifecycle.meta.raw_unavailable = Some("--lifecycle-from-perf-events".into());
    }
    if args.no_lifecycle {
        probe.lifecycle.meta.not_traced = Some("--no-lifecycle".into());
    }
    probe.attach(tracefs_root, &args.syscalls.0, sampled)?;
    let exe = std::path::PathBuf::from(format!("/proc/{}/exe", master.pid));
    probe.attach_drain_uprobe(&exe);
    probe.attach_reuse_marker(&exe);
    probe.attach_tls_close_uprobe(&exe);
    probe.attach_config_loads(&exe);
    probe.attach_quic_ends(&exe);
    probe.check_fds()?;
    tracker.mark_draining_at_attach(probe);
    tracker.accepts_from_uprobe = probe.accepts_from_uprobe;
    tracker.traced = args.syscalls.0.clone();
    if probe.fd_walk.is_ok() {
        tracker.write_source = model::WriteSource::FdTable;
    }
    tracker.counts_log_opens = probe.counts_log_opens;
    attach_request_sources(args, master, probe, tracker, sampled)?;
    // Workers forked between the first scan and fork following being attached.
    tracker.refresh(probe)?;
    for m in &probe.missing {
        warn!("tracepoint {m} is not available; it reads as zero");
    }
    Ok(())
}

/// nginx's own counters (always), the request uprobes (`--uprobes`) and the TLS
/// handshake uprobes (unless `--no-tls`: in the libssl nginx maps, or in the nginx binary when OpenSSL is linked into it); each one that cannot
/// be had is warned about and left out of the report with its reason.
fn attach_request_sources(
    args: &TraceArgs,
    master: &Master,
    probe: &mut Probe,
    tracker: &mut Tracker,
    sampled: bool,
) -> Result<(), ProbeError> {
    tracker.open_counters();
    if let Some(e) = &tracker.counters_error {
        warn!(
            "nginx's request counters unavailable ({e}); requests are unknown{}",
            if args.uprobes {
                ""
            } else {
                " (--uprobes counts them per worker)"
            }
        );
    }
    if args.uprobes {
        let exe = std::path::PathBuf::from(format!("/proc/{}/exe", master.pid));
        match probe.attach_uprobes(&exe) {
            Ok(()) => tracker.request_source = model::RequestSource::Uprobe,
            Err(e) => {
                probe.check_fds()?;
                warn!("per-worker request counts unavailable ({e})");
            }
        }
    }
    if !args.no_tls {
        attach_tls(master, probe, tracker, sampled)?;
    }
    Ok(())
}

/// The TLS handshake uprobes: nginx's count in its binary, libssl's programs where
/// libssl's functions are (the libssl the master maps, or the nginx binary when OpenSSL
/// is linked into it); what cannot be had is warned about with its reason.
///
/// Errors: [`ProbeError::FdLimit`] when a uprobe failed for want of file descriptors.
/// The master's UDP listening ports (`listen ... quic`, or the stream module's `listen
/// ... udp`), as "443" or "443, 8443"; None when it has none.
fn quic_ports(master: u32) -> Option<String> {
    let ports = crate::collect::udp_listen::udp_listen_ports(
        master,
        &crate::collect::listen::socket_inodes(master),
    );
    (!ports.is_empty()).then(|| {
        ports
            .iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    })
}

fn attach_tls(
    master: &Master,
    probe: &mut Probe,
    tracker: &mut Tracker,
    sampled: bool,
) -> Result<(), ProbeError> {
    let exe = std::path::PathBuf::from(format!("/proc/{}/exe", master.pid));
    let libssl = match quic_ports(master.pid) {
        Some(ports) => Err(format!("nginx listens on UDP port {ports} (HTTP/3 over QUIC, or a stream udp listener): libssl's uprobes are left out, since in nginx's workers they made HTTP/3 handshakes stall (newcomer trial 21, nginx 1.26.3 and curl 8.14.1 on this host: 3 s timeouts in 8 of 16 runs of 10 x 12 requests with them, 1 of 28 without); nginx's own count stays")),
        None => loader::find_libssl(master.pid),
    };
    let shown = match &libssl {
        Ok(f) => libssl_words(&f.source),
        Err(_) => String::new(),
    };
    let attached = probe.attach_tls(libssl, &exe, sampled);
    probe.check_fds()?;
    match attached {
        Ok(src) => {
            tracker.tls_from_nginx = src.handshakes_from_nginx;
            tracker.tls_libssl_sampled = src.libssl_sampled;
            if let Some(e) = &src.nginx_unavailable {
                warn!("TLS handshakes are counted by libssl's SSL_do_handshake, traced all the time (several uprobe hits per connection), not by nginx's ngx_ssl_ocsp_validate ({e})");
            }
            if let model::LibsslSource::Unavailable(why) = &src.libssl {
                warn!(
                    "TLS handshakes are counted by nginx's ngx_ssl_ocsp_validate but not timed: {}",
                    safe::line(why)
                );
            }
            tracker.tls_libssl = Some(src.libssl);
        }
        Err(e) if shown.is_empty() => warn!(
            "TLS handshakes are neither counted nor timed: {}",
            safe::line(&e)
        ),
        Err(e) => warn!("TLS handshakes are not timed ({shown}: {e})"),
    }
    Ok(())
}

/// Where libssl's functions are, as the banner and warnings say it.
fn libssl_words(src: &model::LibsslSource) -> String {
    match src {
        model::LibsslSource::SharedLibrary(p) => format!("libssl {}", safe::line(p)),
        model::LibsslSource::NginxBinary(p) => {
            format!("OpenSSL linked into nginx {}", safe::line(p))
        }
        model::LibsslSource::Unavailable(_) => "no libssl".into(),
    }
}

/// The line that says what is traced, on stderr.
pub(super) fn banner(
    master: &Master,
    workers: &[target::WorkerProc],
    probe: &Probe,
    tracker: &Tracker,
) {
    let nspid_note = if master.nspid.len() > 1 {
        format!(
            " (pid {} in its namespace)",
            master.nspid[master.nspid.len() - 1]
        )
    } else {
        String::new()
    };
    let pids: Vec<String> = workers.iter().map(|w| w.pid.to_string()).collect();
    let start = super::master_tag::line_start();
    eprintln!(
        "{start}Tracing nginx master {}{nspid_note} `{}`: {} workers [{}], {}{}{}{}{}{}. Hit Ctrl-C to end.",
        master.pid,
        safe::line(&master.title),
        workers.len(),
        pids.join(" "),
        // Sampled with the accept uprobe: every syscall tracepoint is in the windows
        // (the next line counts them).
        if probe.attached == 0 && probe.accepts_from_uprobe {
            "accepts from a uprobe, no syscall tracepoint between detail windows".to_string()
        } else {
            format!(
                "{} syscall tracepoints attached all the time",
                probe.attached
            )
        },
        if probe.follows_forks {
            ", following forks"
        } else {
            ""
        },
        if tracker.request_source == model::RequestSource::Uprobe {
            ", request uprobes"
        } else {
            ""
        },
        if tracker.counters.is_some() {
            ", requests from nginx's counters"
        } else {
            ""
        },
        tls_note(tracker),
        lifecycle_note(&probe.lifecycle),
    );
    eprintln!("{start}{}", detail_banner(probe, tracker));
}

/// The banner's words for the TLS handshake uprobes: who counts the handshakes, and
/// where libssl's figures come from (attached whenever nginx has libssl's functions or
/// nginx's count, TLS listener or not: the config is not read; they fire only on TLS
/// handshakes).
fn tls_note(tracker: &Tracker) -> String {
    let Some(src) = &tracker.tls_libssl else {
        return String::new();
    };
    let libssl = libssl_words(src);
    let what = match (tracker.tls_from_nginx, tracker.tls_libssl_sampled, src) {
        (true, _, model::LibsslSource::Unavailable(_)) => {
            "handshakes counted by nginx's ngx_ssl_ocsp_validate, not timed".to_string()
        }
        (true, true, _) => format!("handshakes counted by nginx's ngx_ssl_ocsp_validate (called at every completed handshake, OCSP or not), timed by {libssl} in detail windows"),
        (true, false, _) => format!("handshakes counted by nginx's ngx_ssl_ocsp_validate (called at every completed handshake, OCSP or not), timed by {libssl}"),
        (false, _, _) => format!("counted and timed by {libssl}"),
    };
    // libssl's uprobes are linked per worker process (newcomer trials 12 and 21: an
    // HTTP/3 client on the same host trapped in them and failed more often): said,
    // since a shared libssl's breakpoints would otherwise be in every process.
    let shared = match src {
        model::LibsslSource::SharedLibrary(_) => "; libssl's uprobes are placed in nginx's workers only, not in other processes using that libssl",
        _ => "",
    };
    format!(", TLS handshake uprobes (idle without TLS connections: {what}{shared})")
}

/// The banner's words for the connection lifecycle programs: which set is attached
/// (raw tracepoints, or perf-event ones and why).
fn lifecycle_note(lc: &crate::collect::lifecycle::Lifecycle) -> String {
    if let Some(why) = &lc.meta.not_traced {
        return format!(", connection lifecycle not traced ({why})");
    }
    match (lc.attached.is_empty(), lc.meta.raw) {
        (true, _) => String::new(),
        (false, true) => ", connection lifecycle from raw tracepoints".into(),
        (false, false) => format!(
            ", connection lifecycle from perf-event tracepoints ({})",
            lc.meta
                .raw_unavailable
                .as_deref()
                .unwrap_or("raw tracepoints not tried")
        ),
    }
}

/// The banner's second line: the detail mode, what it costs and what stays exact.
fn detail_banner(probe: &Probe, tracker: &Tracker) -> String {
    match &tracker.sampling {
        None => "Detail: full: every per-request syscall is traced for the whole run (each tracepoint hit costs the worker 0.4-1 us; bench: about +12% (HTTPS 4 KB) to +23% (30-byte file) worker CPU per request, --detail sampled within the bench's noise of no tracer; docs/detail.md). --detail sampled traces them in windows.".to_string(),
        Some((s, _)) => format!(
            "Detail: sampled: {} syscall tracepoints attached {} s in every {} s ({:.0}% of the time; this window's attach took {} us; {}); {}. --detail full traces everything.",
            probe.detail_programs(),
            s.schedule.window_s,
            s.schedule.period_s,
            s.schedule.duty() * 100.0,
            s.cost.0,
            sampled_cost(&s.schedule),
            if probe.accepts_from_uprobe {
                "between windows no syscall tracepoint is attached: accepts per worker (uprobe on nginx's ngx_get_connection), requests (stub_status), TLS, the error log (accept4() and EMFILE failures by errno) and /proc are exact; accept errors by errno as syscalls see them, latency histograms, writes, the event loop and upstream connects are sampled".to_string()
            } else {
                format!("{} rare tracepoints (accept4/accept, fd-creating start-up calls) attached all the time: accepts, refusals and EMFILE by errno, requests (stub_status), TLS, the error log and /proc are exact; latency histograms, writes, the event loop and upstream connects are sampled", probe.attached)
            },
        ),
    }
}

/// What the banner says a sampled schedule costs: the benchmark's figure for the
/// default schedule only; any other was not measured, and the cost grows with the share
/// of time attached.
fn sampled_cost(s: &crate::model::sampling::Schedule) -> String {
    let default = crate::model::sampling::Schedule::new(
        super::plan::DETAIL_WINDOW_S,
        super::plan::DETAIL_EVERY_S,
    );
    if default.as_ref() == Ok(s) {
        "bench, this default schedule, workers' CPU per request: with keepalive within the bench's noise of no tracer (medians -5% to +5%, HTTPS and a 30-byte file); with one request per connection, what stays attached between windows +3.6% (30-byte file) to +4.7% (HTTPS, a full handshake each), most of it its 1-2 uprobe hits per connection (accepts, TLS handshakes); the windows add their share; docs/detail.md".into()
    } else {
        format!(
            "this schedule was not benchmarked: a window costs what --detail full costs, so expect about {:.0}% of full detail's cost (full: +12-23% worker CPU per request, docs/benchmarks.md)",
            s.duty() * 100.0
        )
    }
}

#[cfg(test)]
mod tests {
    use super::sampled_cost;
    use crate::model::sampling::Schedule;

    #[test]
    fn only_the_benchmarked_schedule_quotes_the_benchmark() {
        let default = Schedule::new(
            super::super::plan::DETAIL_WINDOW_S,
            super::super::plan::DETAIL_EVERY_S,
        )
        .unwrap();
        assert!(
            sampled_cost(&default).contains("medians -5% to +5%"),
            "{}",
            sampled_cost(&default)
        );
        let busy = Schedule::new(0.5, 2.0).unwrap();
        let text = sampled_cost(&busy);
        assert!(!text.contains("medians"), "{text}");
        assert!(
            text.contains("not benchmarked") && text.contains("about 25% of full detail's cost"),
            "{text}"
        );
    }
}
