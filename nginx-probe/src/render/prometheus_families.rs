//! The table of Prometheus families, [`FAMILIES`]: one row a family, in the order of
//! the exposition. [`super::prometheus::render`] writes them, the series bound
//! ([`super::prometheus_series`]) and the documentation's metrics table
//! ([`super::prometheus_doc`]) are computed from them.

use nginx_probe_common::{
    CONNECT_ERR_NAMES, ERR_CLASS_NAMES, FD_CREATING, FD_KINDS_KERNEL, FD_KINDS_PROC, FD_KIND_NAMES,
    SYSCALLS,
};

use super::prometheus_format::{
    fixed, is_timed, secs, Family, Kind, Layer, Scrape, Series, Sink, Value, Workers,
    HISTOGRAM_SERIES,
};
use super::prometheus_lifecycle as life;
use super::{prometheus_conn as conn, prometheus_outcomes as outcomes, prometheus_tls as tls};
use crate::model::sampling::DetailReport;
use crate::model::{round3, ListenReport, Severity, SyscallReport, WorkerReport, WriteSource};

use Kind::{Counter, Gauge, Histogram};
use Layer::{Detail, FullOnly, Mixed};

/// Labels of a per-worker family with no other label.
const W: &[&str] = &["worker", "generation"];

/// Every family, in the order of the exposition. The exporter-state ones
/// ([`Values::Probe`]) come first: they are all a waiting exporter serves.
pub static FAMILIES: &[Family] = &[
    // The exporter itself.
    Family::probe(
        "nginx_probe_build_info",
        Gauge,
        &["version"],
        "nginx-probe build: always 1, the version in a label.",
        |_, _, o| o.sample(&[env!("CARGO_PKG_VERSION")], 1),
    ),
    Family::probe(
        "nginx_probe_attached",
        Gauge,
        &[],
        "1 while an nginx master is traced; 0 while exporter mode waits for a new master.",
        |_, attached, o| o.sample(&[], u64::from(attached)),
    ),
    Family::probe(
        "nginx_probe_restarts_total",
        Counter,
        &[],
        "nginx masters attached after the previous one exited (exporter mode); counters of the report restart from zero at each.",
        |x, _, o| o.sample(&[], x.restarts),
    ),
    Family::probe(
        "nginx_probe_self_cpu_seconds_total",
        Counter,
        &[],
        "CPU time (user + system) of nginx-probe itself since it started, seconds (/proc/self/stat).",
        |x, _, o| o.some(&[], x.own.cpu_s),
    )
    .omit_if_empty(),
    Family::probe(
        "nginx_probe_self_resident_memory_bytes",
        Gauge,
        &[],
        "Resident memory of nginx-probe itself, bytes (/proc/self/stat rss).",
        |x, _, o| o.some(&[], x.own.rss_bytes),
    )
    .omit_if_empty(),
    Family::probe(
        "nginx_probe_bpf_stats_enabled",
        Gauge,
        &[],
        "1 when the kernel counts BPF program run time (sysctl kernel.bpf_stats_enabled=1) and the bpf_program series are present.",
        |x, _, o| o.sample(&[], u64::from(x.own.programs.is_some())),
    ),
    Family::probe(
        "nginx_probe_bpf_program_run_seconds_total",
        Counter,
        &["program"],
        "Time the kernel spent running each nginx-probe BPF program while kernel.bpf_stats_enabled was 1, seconds (bpf_prog_info.run_time_ns).",
        |x, _, o| {
            if let Some(programs) = &x.own.programs {
                o.header();
                for p in programs {
                    o.sample(&[&p.name], secs(p.run_time_ns));
                }
            }
        },
    )
    .omit_if_empty(),
    Family::probe(
        "nginx_probe_bpf_program_runs_total",
        Counter,
        &["program"],
        "Runs of each nginx-probe BPF program while kernel.bpf_stats_enabled was 1 (bpf_prog_info.run_cnt).",
        |x, _, o| {
            if let Some(programs) = &x.own.programs {
                o.header();
                for p in programs {
                    o.sample(&[&p.name], p.run_count);
                }
            }
        },
    )
    .omit_if_empty(),
    // Scrape metadata.
    Family::report(
        "nginx_probe_master_pid",
        Gauge,
        &[],
        "Host pid of the nginx master being traced.",
        |s, o| o.sample(&[], s.report.master_pid),
    ),
    Family::report(
        "nginx_probe_start_time_seconds",
        Gauge,
        &[],
        "When nginx-probe attached, seconds since the Unix epoch: every counter counts from there.",
        |s, o| o.sample(&[], round3(s.report.time_unix_s - s.report.duration_s)),
    ),
    Family::report(
        "nginx_probe_exited_workers_merged",
        Gauge,
        &[],
        "Exited workers whose numbers are summed under worker=\"exited\" (the oldest beyond the 16 most recent exits).",
        |s, o| o.sample(&[], s.report.exited_merged.as_ref().map_or(0, |m| m.workers)),
    ),
    // All of nginx: requests and nginx's own counters.
    Family::report(
        "nginx_probe_requests_total",
        Counter,
        &["source"],
        "All HTTP requests (HTTP/2 streams included) from nginx's own counter (source=\"stub_status\"), else the uprobes' sum (source=\"uprobe\"), else the access log's lines when every request is logged (source=\"access_log\"); absent when unknown.",
        |s, o| {
            let r = &s.report.requests;
            if let Some(n) = r.count.filter(|_| r.source.exact()) {
                o.sample(&[r.source.name()], n);
            }
        },
    ),
    Family::report(
        "nginx_probe_nginx_connections_accepted_total",
        Counter,
        &[],
        "Client connections nginx accepted (stub_status ngx_stat_accepted).",
        |s, o| o.some(&[], s.report.stub_status.as_ref().map(|n| n.accepted)),
    )
    .omit_if_empty(),
    Family::report(
        "nginx_probe_nginx_connections_handled_total",
        Counter,
        &[],
        "Client connections nginx handled (stub_status ngx_stat_handled); accepted - handled were closed for lack of worker_connections.",
        |s, o| o.some(&[], s.report.stub_status.as_ref().map(|n| n.handled)),
    )
    .omit_if_empty(),
    Family::report(
        "nginx_probe_nginx_connections",
        Gauge,
        &["state"],
        "Client connections by state (stub_status): active (all open), reading, writing, waiting (idle keepalive).",
        |s, o| {
            if let Some(n) = &s.report.stub_status {
                for (state, v) in [
                    ("active", n.active),
                    ("reading", n.reading),
                    ("writing", n.writing),
                    ("waiting", n.waiting),
                ] {
                    o.sample(&[state], v);
                }
            }
        },
    )
    .omit_if_empty(),
    // TLS handshakes (uprobes on libssl).
    tls::HANDSHAKES,
    tls::FROM_NGINX,
    tls::STARTED,
    tls::ABANDONED,
    tls::CALLS,
    tls::CALL_SECONDS,
    // What the clients got, per nginx's access logs (prometheus_outcomes.rs).
    outcomes::LINES,
    outcomes::SKIPPED,
    outcomes::RESPONSES,
    outcomes::SHARE,
    outcomes::CONNECTIONS_WITH_REQUESTS,
    outcomes::REQUEST_TIME,
    outcomes::UPSTREAM_TRIES,
    outcomes::UPSTREAM_TIME,
    outcomes::RETRIED,
    // Worker lifecycle: draining generations, exits (prometheus_lifecycle.rs).
    life::SHUTTING_DOWN,
    life::GENERATIONS,
    life::LONGEST,
    life::CLIENTS,
    life::RSS,
    life::EXITS,
    life::SIGNALS,
    life::CONFIG_LOADS,
    life::QUIC_ENDS,
    // Client connections per port (TCP tracepoints).
    conn::CLOSED, conn::ESTABLISHED, conn::RESETS, conn::SYNS_REFUSED, conn::LISTENERS_CLOSED,
    conn::IDLE_SECONDS, conn::IDLE_COUNT, conn::IDLE_PINNED, conn::LIFETIME_SECONDS, conn::LIFETIME_COUNT, conn::CLIENT_IDLE_SECONDS, conn::CLIENT_IDLE_COUNT, conn::PEER_CONNECTIONS,
    conn::PEER_IDLE_PINNED, conn::CLOSED_WHILE_DRAINING, conn::CLOSED_WITHOUT_DATA, conn::CLOSED_REUSING,
    conn::WORKER_CLOSED,
    // Workers.
    Family::worker(
        "nginx_probe_worker_info",
        Gauge,
        &["worker", "generation", "pid", "alive"],
        "Always 1: the host pid of worker (slot, generation), and whether it is alive.",
        fixed(1),
        |_, w, o| o.sample(&[&w.pid.to_string(), &w.alive.to_string()], 1),
    )
    .of(Workers::Listed),
    Family::worker(
        "nginx_probe_accepts_total",
        Counter,
        W,
        "Connections the worker accepted: successful accept4/accept returns (syscalls:sys_exit_accept4, sys_exit_accept), or, when nginx_probe_detail_accepts_uprobe is 1, nginx's ngx_get_connection calls on an accepted socket (uprobe), the same count.",
        fixed(1),
        |_, w, o| o.sample(&[], w.accepts),
    ),
    Family::worker(
        "nginx_probe_accept_errors_total",
        Counter,
        &["worker", "generation", "errno"],
        "Failed accept4/accept calls by errno class; EAGAIN (accept queue empty, normal for nginx's non-blocking accepts) is nginx_probe_accept_eagain_total instead.",
        fixed(ERR_CLASS_NAMES.len() - 1),
        |_, w, o| {
            for errno in ERR_CLASS_NAMES.iter().filter(|e| **e != "EAGAIN") {
                o.sample(&[errno], w.accept_errors.get(*errno).copied().unwrap_or(0));
            }
        },
    )
    .layer(Mixed),
    Family::worker(
        "nginx_probe_accept_eagain_total",
        Counter,
        W,
        "accept4/accept calls that returned EAGAIN: the accept queue was empty (another worker took the connection, or a spurious wakeup). Not an error.",
        fixed(1),
        |_, w, o| o.sample(&[], w.accept_errors.get("EAGAIN").copied().unwrap_or(0)),
    )
    .layer(Mixed),
    Family::worker(
        "nginx_probe_worker_requests_total",
        Counter,
        &["worker", "generation", "source"],
        "HTTP requests of the worker (HTTP/2 streams included), counted by uprobes on ngx_http_create_request (--uprobes only): source=\"uprobe\".",
        fixed(1),
        |_, w, o| o.some(&[w.requests.source.name()], w.requests.count.filter(|_| w.requests.source.exact())),
    )
    .of(Workers::Uprobes),
    Family::worker(
        "nginx_probe_syscalls_total",
        Counter,
        &["worker", "generation", "syscall"],
        "Syscall exits of the worker (successes and errors), per traced syscall (syscalls:sys_exit_*).",
        per_traced(1),
        |_, w, o| {
            for (name, s) in &w.syscalls {
                o.sample(&[name], s.count);
            }
        },
    )
    .layer(Mixed),
    Family::worker(
        "nginx_probe_syscall_errors_total",
        Counter,
        &["worker", "generation", "syscall"],
        "Syscall exits with a negative return other than EAGAIN, per traced syscall.",
        per_traced(1),
        |_, w, o| {
            for (name, s) in &w.syscalls {
                o.sample(&[name], s.errors.saturating_sub(eagain(s)));
            }
        },
    )
    .layer(Mixed),
    Family::worker(
        "nginx_probe_syscall_eagain_total",
        Counter,
        &["worker", "generation", "syscall"],
        "Syscall exits that returned EAGAIN (nothing ready on a non-blocking fd: not an error), per traced syscall.",
        per_traced(1),
        |_, w, o| {
            for (name, s) in &w.syscalls {
                o.sample(&[name], eagain(s));
            }
        },
    )
    .layer(Mixed),
    Family::worker(
        "nginx_probe_syscall_duration_seconds",
        Histogram,
        &["worker", "generation", "syscall"],
        "Syscall latency from sys_enter to sys_exit, seconds, from the in-kernel log2 ns histogram (calls in flight at attach are counted in syscalls_total, not here; exit-only syscalls such as socket or pipe2 have none).",
        Series {
            fixed: 0,
            per_traced: 0,
            per_timed: HISTOGRAM_SERIES,
        },
        |sc, w, o| {
            for (name, s) in w.syscalls.iter().filter(|(n, _)| is_timed(n)) {
                if sc.extras.skip_zero_histograms && s.hist_log2_ns.iter().all(|&n| n == 0) {
                    continue;
                }
                o.histogram(&[name], &s.hist_log2_ns, s.total_ns);
            }
        },
    )
    .layer(Mixed),
    Family::worker(
        "nginx_probe_writes_total",
        Counter,
        &["worker", "generation", "destination"],
        "write/writev/pwrite64/pwritev calls by destination: client, upstream, access_log, error_log, temp_file, other_file, other, unknown (classified at each write from the worker's fd table), or socket, access_log, error_log, file, other (from /proc fd snapshots every 2 s, when the kernel has no BTF).",
        fixed(FD_KINDS_KERNEL.len()),
        |s, w, o| writes(s, w, o, |d| Value::U(d.count)),
    )
    .layer(Detail),
    Family::worker(
        "nginx_probe_write_bytes_total",
        Counter,
        &["worker", "generation", "destination"],
        "Bytes written by write/writev/pwrite64/pwritev, by destination.",
        fixed(FD_KINDS_KERNEL.len()),
        |s, w, o| writes(s, w, o, |d| Value::U(d.bytes)),
    )
    .layer(Detail),
    Family::worker(
        "nginx_probe_write_seconds_total",
        Counter,
        &["worker", "generation", "destination"],
        "Time spent in write/writev/pwrite64/pwritev, seconds, by destination.",
        fixed(FD_KINDS_KERNEL.len()),
        |s, w, o| writes(s, w, o, |d| Value::F(secs(d.total_ns))),
    )
    .layer(Detail),
    Family::worker(
        "nginx_probe_event_loop_iterations_total",
        Counter,
        W,
        "Event-loop iterations of the worker's main thread: from an epoll wait's return to the next epoll wait call.",
        fixed(1),
        |_, w, o| o.sample(&[], w.event_loop.iterations),
    )
    .layer(Detail),
    Family::worker(
        "nginx_probe_event_loop_busy_seconds_total",
        Counter,
        W,
        "Time the worker's main thread spent outside epoll waits, seconds.",
        fixed(1),
        |_, w, o| o.sample(&[], secs(w.event_loop.busy_ns)),
    )
    .layer(Detail),
    Family::worker(
        "nginx_probe_cpu_seconds_total",
        Counter,
        W,
        "CPU time (user + system) of the worker since attach, seconds (/proc/<pid>/stat, sampled every 500 ms).",
        fixed(1),
        |_, w, o| o.some(&[], w.cpu_s),
    ),
    Family::worker(
        "nginx_probe_accepted_then_closed_total",
        Counter,
        W,
        "Connections the worker closed right after accepting them (nginx's worker_connections-are-not-enough path).",
        fixed(1),
        |_, w, o| o.sample(&[], w.accepted_then_closed),
    )
    .layer(Detail),
    Family::worker(
        "nginx_probe_open_fds",
        Gauge,
        W,
        "Open file descriptors of a live worker at the last 500 ms sample (/proc/<pid>/fd).",
        fixed(1),
        |_, w, o| o.some(&[], w.fds.open),
    )
    .of(Workers::Live),
    Family::worker(
        "nginx_probe_open_fds_peak",
        Gauge,
        W,
        "Most open file descriptors seen at any 500 ms sample since attach, live workers.",
        fixed(1),
        |_, w, o| o.some(&[], w.fds.peak),
    )
    .of(Workers::Live),
    Family::worker(
        "nginx_probe_fd_limit",
        Gauge,
        W,
        "Soft open-files limit in force for a live worker (/proc/<pid>/limits).",
        fixed(1),
        |_, w, o| o.some(&[], w.fds.limit),
    )
    .of(Workers::Live),
    // Fd limits and upstream connections.
    Family::worker(
        "nginx_probe_fd_errors_total",
        Counter,
        &["worker", "generation", "syscall", "errno"],
        "EMFILE (soft RLIMIT_NOFILE) and ENFILE (fs.file-max) returned by each fd-creating syscall of the worker (accept4, openat, socket, pipe2, ...; syscall exit tracepoints).",
        fixed(2 * FD_CREATING.len()),
        |_, w, o| {
            for &i in FD_CREATING.iter() {
                let name = SYSCALLS[i as usize].name;
                let e = w.fd_errors.get(name).copied().unwrap_or_default();
                o.sample(&[name, "EMFILE"], e.emfile);
                o.sample(&[name, "ENFILE"], e.enfile);
            }
        },
    )
    .layer(Mixed),
    Family::worker(
        "nginx_probe_upstream_connects_total",
        Counter,
        W,
        "Upstream connections the worker opened: connect() calls (syscalls:sys_exit_connect); client connections come from accept4.",
        fixed(1),
        |_, w, o| o.sample(&[], w.upstream.connects),
    )
    .layer(Detail),
    Family::worker(
        "nginx_probe_upstream_established_total",
        Counter,
        W,
        "Upstream connects that succeeded (connect() returned 0, or getsockopt(SO_ERROR) read 0).",
        fixed(1),
        |_, w, o| o.sample(&[], w.upstream.established),
    )
    .layer(Detail),
    Family::worker(
        "nginx_probe_upstream_abandoned_total",
        Counter,
        W,
        "Upstream fds closed before nginx learned their connect's result (proxy_connect_timeout, or the client left).",
        fixed(1),
        |_, w, o| o.sample(&[], w.upstream.abandoned),
    )
    .layer(Detail),
    Family::worker(
        "nginx_probe_upstream_connect_errors_total",
        Counter,
        &["worker", "generation", "errno"],
        "Failed upstream connects by errno, at connect() or read from getsockopt(SO_ERROR) (EINPROGRESS is not an error).",
        fixed(CONNECT_ERR_NAMES.len()),
        |_, w, o| {
            for errno in CONNECT_ERR_NAMES {
                o.sample(&[errno], w.upstream.errors.get(errno).copied().unwrap_or(0));
            }
        },
    )
    .layer(Detail),
    Family::worker(
        "nginx_probe_upstream_connect_duration_seconds",
        Histogram,
        W,
        "Upstream connect latency as the worker sees it, seconds: from connect() to its return when it completes at once, else to the getsockopt(SO_ERROR) by which nginx learns the result (in-kernel log2 ns histogram).",
        fixed(HISTOGRAM_SERIES),
        |_, w, o| {
            let u = &w.upstream;
            o.histogram(&[], &u.latency_hist_log2_ns, u.latency_total_ns);
        },
    )
    .layer(Detail),
    Family::worker(
        "nginx_probe_upstream_fds_open",
        Gauge,
        W,
        "Upstream fds a live worker holds: connected since attach and not yet closed.",
        fixed(1),
        |_, w, o| o.some(&[], w.upstream.fds_open),
    )
    .layer(FullOnly)
    .of(Workers::Live),
    // Listening sockets.
    Family::report(
        "nginx_probe_listen_backlog",
        Gauge,
        &["addr"],
        "Backlog in force of nginx's open listening sockets of an address (sock_diag; the largest where reuseport gives several).",
        |s, o| per_socket(s, o, |ls| open(ls).map(|l| l.backlog.into()).max()),
    ),
    Family::report(
        "nginx_probe_listen_queue",
        Gauge,
        &["addr"],
        "Connections waiting in the accept queues of nginx's open listening sockets of an address at the last 500 ms sample (summed over its reuseport sockets; sockets nginx closed are left out).",
        |s, o| {
            per_socket(s, o, |ls| {
                open(ls).map(|l| u64::from(l.queue_now)).reduce(|a, b| a + b)
            })
        },
    ),
    Family::report(
        "nginx_probe_listen_queue_peak",
        Gauge,
        &["addr"],
        "Most connections seen waiting in one accept queue of an address at any 500 ms sample since attach (open sockets).",
        |s, o| per_socket(s, o, |ls| open(ls).map(|l| l.queue_max.into()).max()),
    ),
    // Overflows and drops are counted per network namespace by the kernel, not per
    // socket: one series each, without an addr label that would suggest otherwise (and
    // multiply the value when summed over sockets).
    Family::report(
        "nginx_probe_listen_overflows_total",
        Counter,
        &[],
        "Listen queue overflows in nginx's network namespace since attach (/proc/<master>/net/netstat TcpExt ListenOverflows: namespace-wide, every listening socket in it, nginx's or not; one series, no addr).",
        |s, o| o.some(&[], s.report.listen_namespace.as_ref().map(|n| n.overflows)),
    )
    .omit_if_empty(),
    Family::report(
        "nginx_probe_listen_drops_total",
        Counter,
        &[],
        "Listen drops in nginx's network namespace since attach (/proc/<master>/net/netstat TcpExt ListenDrops: namespace-wide, every listening socket in it, nginx's or not; one series, no addr).",
        |s, o| o.some(&[], s.report.listen_namespace.as_ref().map(|n| n.drops)),
    )
    .omit_if_empty(),
    // What each of nginx's own sockets dropped is known exactly (sk_drops).
    Family::report(
        "nginx_probe_listen_socket_drops_total",
        Counter,
        &["addr"],
        "Connections an nginx listening socket dropped since attach, a full accept queue among them (sock_diag SK_MEMINFO_DROPS of the socket).",
        |s, o| per_socket(s, o, |ls| ls.iter().map(|l| l.socket_drops).sum()),
    )
    .omit_if_empty(),
    // nginx's own words (its error log) and the CPU quota.
    Family::report(
        "nginx_probe_error_log_readable",
        Gauge,
        &["path"],
        "1 when nginx's error log (the master's fd 2) is being read; 0: its classes are unknown, not zero.",
        |s, o| {
            if let Some(e) = &s.report.nginx_errors {
                o.sample(&[e.path.as_deref().unwrap_or("")], u32::from(e.readable));
            }
        },
    )
    .omit_if_empty(),
    Family::report(
        "nginx_probe_nginx_errors_total",
        Counter,
        &["class"],
        "Lines nginx wrote to its error log since attach, by message class (limit_req, upstream_read_timeout, worker_connections_reusing, ...: see docs/verdicts.md).",
        |s, o| {
            if let Some(e) = s.report.nginx_errors.as_ref().filter(|e| e.readable) {
                o.header();
                for (class, c) in &e.classes {
                    o.sample(&[class], c.count);
                }
            }
        },
    )
    .omit_if_empty(),
    Family::report(
        "nginx_probe_upstream_peer_error_lines_total",
        Counter,
        &["peer"],
        "Upstream-class error-log lines since attach by upstream peer (nginx's upstream: field, scheme://host:port): the 10 largest peers, the rest as peer=\"other\" (at most 11 series).",
        |s, o| {
            if let Some(e) = s.report.nginx_errors.as_ref().filter(|e| e.readable) {
                if !e.upstream_peers.is_empty() {
                    o.header();
                    for p in &e.upstream_peers {
                        o.sample(&[&p.peer], p.lines);
                    }
                    if let Some(r) = &e.upstream_peers_rest {
                        o.sample(&["other"], r.other_peers);
                    }
                }
            }
        },
    )
    .omit_if_empty(),
    Family::report(
        "nginx_probe_workers_failed_to_spawn",
        Gauge,
        &[],
        "Workers the master failed to spawn since it started (error log: <call>() failed while spawning \"worker process\", read back to the master's start).",
        |s, o| {
            if let Some(h) = s.report.nginx_errors.as_ref().and_then(|e| e.history.as_ref()) {
                o.sample(&[], h.workers_failed_to_spawn);
            }
        },
    )
    .omit_if_empty(),
    Family::report(
        "nginx_probe_workers_exited_fatal",
        Gauge,
        &[],
        "Workers that exited with fatal code 2 during their own start and that the master does not respawn, since it started (error log: exited with fatal code 2 and cannot be respawned, read back to the master's start).",
        |s, o| {
            if let Some(h) = s.report.nginx_errors.as_ref().and_then(|e| e.history.as_ref()) {
                o.sample(&[], h.workers_exited_fatal);
            }
        },
    )
    .omit_if_empty(),
    Family::report(
        "nginx_probe_stale_log_file_bytes",
        Gauge,
        &["kind", "state"],
        "Size of the log files the workers write that a rotation renamed or deleted without nginx reopening them, bytes, by kind (access_log, error_log) and state (renamed, deleted): /proc/<pid>/fd of each worker against the configured paths (at most 4 series).",
        |s, o| {
            if s.report.stale_logs.is_empty() {
                return;
            }
            o.header();
            let mut sums: std::collections::BTreeMap<(&str, &str), u64> = Default::default();
            for l in &s.report.stale_logs {
                *sums.entry((&l.kind, &l.state)).or_default() += l.size_bytes;
            }
            for ((kind, state), bytes) in sums {
                o.sample(&[kind, state], bytes);
            }
        },
    )
    .omit_if_empty(),
    Family::report(
        "nginx_probe_cpu_quota_cpus",
        Gauge,
        &[],
        "CPU quota of the workers' cgroup in CPUs (cpu.max quota / period, the tightest up to the root).",
        |s, o| o.some(&[], s.report.cpu_quota.as_ref().map(|q| q.quota_cpus)),
    )
    .omit_if_empty(),
    Family::report(
        "nginx_probe_cpu_quota_periods_total",
        Counter,
        &[],
        "Enforcement periods of the quota's cgroup with runnable tasks since attach (cpu.stat nr_periods).",
        |s, o| o.some(&[], s.report.cpu_quota.as_ref().and_then(|q| q.nr_periods)),
    )
    .omit_if_empty(),
    Family::report(
        "nginx_probe_cpu_quota_throttled_periods_total",
        Counter,
        &[],
        "Periods in which the quota ran out since attach (cpu.stat nr_throttled).",
        |s, o| o.some(&[], s.report.cpu_quota.as_ref().and_then(|q| q.nr_throttled)),
    )
    .omit_if_empty(),
    Family::report(
        "nginx_probe_cpu_quota_throttled_seconds_total",
        Counter,
        &[],
        "Time the quota's cgroup was stopped by the quota since attach (cpu.stat throttled_usec).",
        |s, o| o.some(&[], s.report.cpu_quota.as_ref().and_then(|q| q.throttled_s)),
    )
    .omit_if_empty(),
    // Accounting and findings.
    Family::report(
        "nginx_probe_drops_total",
        Counter,
        &["reason"],
        "Events nginx-probe could not fully account, by reason (the JSON's drops: see docs/json.md).",
        |s, o| {
            for (reason, n) in &s.report.drops {
                o.sample(&[reason], *n);
            }
        },
    ),
    Family::report(
        "nginx_probe_verdict_window_seconds",
        Gauge,
        &[],
        "Seconds of the recent window the nginx_probe_verdict gauges were judged on (--verdict-window; shorter right after attach).",
        |s, o| o.some(&[], s.extras.window.map(|(secs, _)| round3(secs))),
    )
    .omit_if_empty(),
    Family::report(
        "nginx_probe_verdict",
        Gauge,
        &["id", "severity"],
        "1 for each finding active over the recent window (nginx_probe_verdict_window_seconds; see docs/verdicts.md).",
        |s, o| {
            let verdicts = match s.extras.window {
                Some((_, v)) => v,
                None => {
                    o.help("1 for each finding active over the run so far (see docs/verdicts.md).");
                    s.report.verdicts.as_slice()
                }
            };
            for v in verdicts {
                let severity = match v.severity {
                    Severity::Warning => "warning",
                    Severity::Critical => "critical",
                };
                o.sample(&[&v.id, severity], 1);
            }
        },
    ),
    // The detail layer's sampling (`--detail sampled` only: absent with `--detail
    // full`, whose exposition has no such family).
    Family::report(
        "nginx_probe_detail_sampled",
        Gauge,
        &[],
        "Always 1: the detail layer (per-request syscall tracepoints) is attached only in windows (--detail sampled). Absent with --detail full, where it is attached all the time.",
        |s, o| o.some(&[], detail(s).map(|_| 1u64)),
    )
    .omit_if_empty(),
    Family::report(
        "nginx_probe_detail_accepts_uprobe",
        Gauge,
        &[],
        "1: accepts are counted by a uprobe on nginx's ngx_get_connection and no syscall tracepoint is attached between detail windows; 0: by the accept4/accept exit tracepoints, attached all the time (the uprobe could not attach; the banner says why). --detail sampled only.",
        |s, o| o.some(&[], detail(s).map(|d| d.accepts_from_uprobe() as u64)),
    )
    .omit_if_empty(),
    Family::report(
        "nginx_probe_detail_accepts_agree",
        Gauge,
        &[],
        "With accepts from the ngx_get_connection uprobe: 1 when all workers' accepts since attach agree with nginx's own accepted counter (stub_status; within workers + 2 + 1%), 0 when they do not (nginx_probe_accepts_total is then unknown and no verdict reads it). Absent when not checked.",
        |s, o| o.some(&[], detail(s).and_then(|d| d.accepts_check).map(|c| c.agree as u64)),
    )
    .omit_if_empty(),
    Family::report(
        "nginx_probe_detail_coverage_ratio",
        Gauge,
        &[],
        "Share of the time since attach the detail layer was attached: window seconds / seconds since attach, in [0, 1] (this process's monotonic clock; --detail sampled only).",
        |s, o| o.some(&[], detail(s).map(|d| d.coverage)),
    )
    .omit_if_empty(),
    Family::report(
        "nginx_probe_detail_window_seconds_total",
        Counter,
        &[],
        "Seconds the detail layer was attached since attach (this process's monotonic clock; --detail sampled only).",
        |s, o| o.some(&[], detail(s).map(|d| d.in_window_s)),
    )
    .omit_if_empty(),
    Family::report(
        "nginx_probe_detail_windows_total",
        Counter,
        &[],
        "Detail windows opened since attach, one still open included (--detail sampled only).",
        |s, o| o.some(&[], detail(s).map(|d| d.windows)),
    )
    .omit_if_empty(),
    Family::report(
        "nginx_probe_detail_window_attach_seconds",
        Gauge,
        &[],
        "Wall time the last window took to attach every detail program, seconds (this process, measured around the calls; --detail sampled only).",
        |s, o| o.some(&[], detail(s).map(|d| d.attach_us as f64 / 1e6)),
    )
    .omit_if_empty(),
    Family::report(
        "nginx_probe_detail_window_requests_total",
        Counter,
        &[],
        "nginx's requests (stub_status) served while a detail window was open: the denominator of per-request detail figures (--detail sampled only; absent when stub_status is not readable).",
        |s, o| o.some(&[], detail(s).and_then(|d| d.requests_in_windows)),
    )
    .omit_if_empty(),
];

/// The report's detail sampling; None with `--detail full`.
fn detail<'a>(s: &Scrape<'a>) -> Option<&'a DetailReport> {
    s.report.detail.as_ref()
}

/// `n` series per traced syscall.
const fn per_traced(n: usize) -> Series {
    Series {
        fixed: 0,
        per_traced: n,
        per_timed: 0,
    }
}

/// EAGAIN returns of one syscall (its errno class count).
fn eagain(s: &SyscallReport) -> u64 {
    s.errnos.get("EAGAIN").copied().unwrap_or(0)
}

/// One sample per listening address (`addr`) where `value` gives one, from every socket
/// of that address seen (`reuseport` gives one socket per worker, all with the same
/// address: one series, not duplicates), closed ones included: gauges of the live
/// queue take the [`open`] ones only.
fn per_socket(s: &Scrape, o: &mut Sink, value: fn(&[&ListenReport]) -> Option<u64>) {
    let mut by_addr: std::collections::BTreeMap<&str, Vec<&ListenReport>> = Default::default();
    for l in &s.report.listen {
        by_addr.entry(l.addr.as_str()).or_default().push(l);
    }
    for (addr, ls) in by_addr {
        o.some(&[addr], value(&ls));
    }
}

/// The sockets nginx still holds.
fn open<'a>(ls: &'a [&'a ListenReport]) -> impl Iterator<Item = &'a ListenReport> {
    ls.iter().copied().filter(|l| !l.closed)
}

/// One sample per write destination the report lists (by how it classifies writes).
fn writes(
    s: &Scrape,
    w: &WorkerReport,
    o: &mut Sink,
    value: fn(&crate::model::WritesReport) -> Value,
) {
    let kinds: &[u32] = match s.report.write_destinations {
        WriteSource::FdTable => &FD_KINDS_KERNEL,
        WriteSource::ProcSnapshot => &FD_KINDS_PROC,
    };
    for dest in kinds.iter().map(|&k| FD_KIND_NAMES[k as usize]) {
        let d = w.writes.get(dest).cloned().unwrap_or_default();
        o.sample(&[dest], value(&d));
    }
}
