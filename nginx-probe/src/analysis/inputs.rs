//! What the verdict rules look at: each worker's numbers over the period judged, the
//! listening sockets, nginx's error-log classes and the CPU quota. Built from a report
//! by `verdict::verdict_inputs` and the tracker; pure data.

/// One worker's numbers for the period judged.
#[derive(Clone, Debug, Default)]
pub struct WorkerInput {
    /// Host pid (0 for the merged old exited workers).
    pub pid: u32,
    /// False for workers that exited during the period: they count in totals
    /// (requests, accepts per request, log writes) but not in balance or fd rules.
    pub alive: bool,
    /// Successful accepts.
    pub accepts: u64,
    /// EMFILE on every fd-creating syscall (accept4, openat, socket, pipe2, ...).
    pub emfile: u64,
    /// ENFILE likewise.
    pub enfile: u64,
    /// (EMFILE, ENFILE) by fd-creating syscall name, non-zero ones only.
    pub fd_errors: std::collections::BTreeMap<String, (u64, u64)>,
    /// Upstream `connect()` calls (the traced `connect` syscall; resolver and syslog
    /// sockets count too).
    pub upstream_connects: u64,
    /// Upstream connections established (connect returned 0, or `getsockopt(SO_ERROR)`
    /// read 0): the only ones keepalive could have reused.
    pub upstream_established: u64,
    /// Connects that failed, by errno name (at the call or from `SO_ERROR`), non-zero
    /// ones only.
    pub upstream_errors: std::collections::BTreeMap<String, u64>,
    /// Connect latency (from `connect()` to the return or `getsockopt(SO_ERROR)` that
    /// completed it) as a log2 histogram, ns buckets.
    pub connect_hist: Vec<u64>,
    /// Longest connect latency, ns.
    pub connect_max_ns: u64,
    /// Upstream fds open at the end of the period (None: unknown).
    pub upstream_fds_open: Option<u64>,
    /// Regular files open at the last classification (`/proc/<pid>/fd` links, read
    /// every 2 s); None when not classified.
    pub files_open: Option<u64>,
    /// Most regular files open at one classification in the period.
    pub files_peak: Option<u64>,
    /// Most sockets open at one classification in the period (client connections,
    /// listeners and nginx's channels alike).
    pub sockets_peak: Option<u64>,
    /// Requests counted by uprobes; None without them. Request-based rules judge the
    /// global [`Inputs::requests`] where a total is enough.
    pub requests: Option<u64>,
    /// Time outside epoll_wait (busy), ns; None when not measured.
    pub busy_ns: Option<u64>,
    /// CPU time in the period (`/proc/<pid>/stat`), seconds; None when unreadable.
    pub cpu_s: Option<f64>,
    /// Time runnable but waiting for a CPU in the period (`/proc/<pid>/schedstat`),
    /// ns; None when unreadable.
    pub run_delay_ns: Option<u64>,
    /// Connections closed right after accept (no free connection).
    pub accepted_then_closed: u64,
    /// Client connections the worker closed to reuse them at `worker_connections`
    /// (closes inside its `ngx_get_connection`: `WorkerCloses::reusing`); 0 also when
    /// not counted.
    pub closed_reusing: u64,
    /// Client connections the worker reset as it drained, a request unread
    /// (`WorkerCloses::reset_while_draining`); 0 also when not counted.
    pub reset_while_draining: u64,
    /// The worker's reload generation (`WorkerLifecycle::reload_generation`: 0 for
    /// the workers seen at attach, +1 per reload seen since); None when unknown.
    pub reload_generation: Option<u32>,
    /// Whether it was already shutting down at attach (its title then).
    pub draining_at_attach: bool,
    /// Whether it was serving at the period's end (alive, titled `worker process`);
    /// None when its state is unknown.
    pub serving: Option<bool>,
    /// Writes (write, writev, pwrite64) to access logs, classified by their fd at the
    /// moment of the write.
    pub access_log_writes: u64,
    /// Their total time, ns.
    pub access_log_ns: u64,
    /// Their p99 latency, ns (log2-histogram estimate).
    pub access_log_p99_ns: u64,
    /// openat calls that returned an access-log fd; None when not counted.
    pub access_log_opens: Option<u64>,
    /// Writes to error logs, classified like the access log's.
    pub error_log_writes: u64,
    /// Their total time, ns.
    pub error_log_ns: u64,
    /// Longest event-loop iteration (from one epoll_wait's return to the next call), ns.
    pub max_iteration_ns: u64,
    /// p99 event-loop iteration, ns (log2-histogram estimate).
    pub p99_iteration_ns: u64,
    /// Request duration (`ngx_http_create_request` to `ngx_http_free_request`) p50, ns;
    /// uprobes only.
    pub request_p50_ns: Option<u64>,
    /// The same at p99, ns.
    pub request_p99_ns: Option<u64>,
    /// ns spent in accept4/accept and close (connection set-up and tear-down).
    pub conn_syscall_ns: u64,
    /// ns spent in all traced syscalls.
    pub all_syscall_ns: u64,
    /// Open fds now (/proc/<pid>/fd); None when unreadable.
    pub fds_open: Option<u64>,
    /// Most fds open at one reading in the period; None when unreadable.
    pub fds_peak: Option<u64>,
    /// The soft RLIMIT_NOFILE in force (/proc/<pid>/limits); None when unreadable.
    pub fd_limit: Option<u64>,
}

/// Everything the rules look at.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// Live workers (exited ones are left out of balance rules).
    pub workers: Vec<WorkerInput>,
    /// Whether `close` was traced (`--syscalls all`), for the keepalive evidence.
    pub close_traced: bool,
    /// nginx's listening sockets over the period.
    pub listen: Vec<crate::model::ListenReport>,
    /// The listen overflows and drops of nginx's network namespace in the period
    /// (TcpExt, namespace-wide); None when unreadable.
    pub listen_namespace: Option<crate::model::ListenNamespaceReport>,
    /// Length of the period judged, seconds.
    pub period_s: f64,
    /// nginx's error log in the period (None: not looked at).
    pub nginx_errors: Option<crate::model::NginxErrorsReport>,
    /// The workers' cgroup CPU quota in the period (None: no quota).
    pub cpu_quota: Option<crate::model::CpuQuotaReport>,
    /// All requests in the period from an exact source (nginx's stub_status counter,
    /// or the uprobes); None when unknown: every request-based rule stays silent.
    pub requests: Option<u64>,
    /// Where `requests` comes from (named in the evidence).
    pub requests_source: crate::model::RequestSource,
    /// nginx's own count of connections closed at once for lack of worker_connections
    /// (stub_status `accepted - handled`); None without nginx's counters.
    pub stub_dropped: Option<u64>,
    /// Connections open at the end of the period (stub_status `active`, a gauge);
    /// None without nginx's counters.
    pub connections_active: Option<u64>,
    /// TLS handshakes in the period; None when not measured.
    pub tls: Option<crate::model::TlsReport>,
    /// With `--detail sampled`: the windows' coverage and exact requests; detail
    /// figures per request divide by `requests_in_windows`. None: `--detail full`.
    pub detail: Option<crate::model::sampling::DetailReport>,
    /// Draining generations and worker exits in the period (None: none, or unknown).
    pub lifecycle: Option<crate::model::worker_lifecycle::LifecycleReport>,
    /// The configuration loads in the period (uretprobe `ngx_init_cycle`); None in
    /// recordings made before it.
    pub config_loads: Option<crate::model::reloads::ConfigLoadsReport>,
    /// nginx's configuration (effective values, file:line); None when not read, its
    /// main file included (`ConfigReport::is_read`): the verdicts then quote no
    /// directive.
    pub config: Option<crate::model::config::ConfigReport>,
    /// Client connections per port in the period (who closed, idle before nginx's
    /// close); None when nothing was counted.
    pub connections: Option<crate::model::connections::ConnectionsReport>,
    /// Why connections are not counted at all (`Report::connections_not_traced`).
    pub connections_not_traced: Option<String>,
    /// nginx's UDP listening sockets and QUIC connections in the period; None: no UDP
    /// listening socket.
    pub quic: Option<crate::model::quic::QuicReport>,
    /// Log files the workers write that a rotation renamed or deleted (fstat through
    /// `/proc/<pid>/fd` against the configured paths); empty when none or unknown.
    pub stale_logs: Vec<crate::model::log_files::StaleLogReport>,
    /// nginx's network namespace's local port range and TIME-WAIT at the period's end;
    /// None when not read.
    pub local_ports: Option<crate::model::local_ports::LocalPortsReport>,
    /// The run ended because the master exited (the summary's `end_reason`,
    /// [`crate::model::ended_by_master_exit`]): its last moments are a shutdown, its
    /// workers gone before it.
    pub master_exited: bool,
    /// What the clients got, per nginx's access log; None when none was read.
    pub access_log: Option<crate::model::access_log::AccessLogReport>,
}

impl Inputs {
    /// The seconds the detail layer counted in the period: `period_s` with `--detail
    /// full`, the windows' attached seconds with `--detail sampled`
    /// ([`crate::model::detail_seconds`]). Rates and busy shares of detail figures
    /// (event loop, upstream connects, detail syscalls) divide by this.
    pub fn detail_s(&self) -> f64 {
        crate::model::detail_seconds(self.period_s, self.detail.as_ref())
    }

    /// Whether the workers' accepts may be judged: false when the uprobe's count
    /// disagrees with nginx's own `accepted` counter
    /// ([`crate::model::sampling::DetailReport::accepts_disagree`]).
    pub fn accepts_known(&self) -> bool {
        crate::model::sampling::accepts_known(self.detail.as_ref())
    }

    /// Whether accepts per request may be judged: accepts known, no QUIC connection in
    /// the period (HTTP/3 requests count in `requests` but no accept carried them)
    /// ([`crate::model::quic::QuicReport::makes_requests_per_accept_unknown`]), and no
    /// own hop of nginx's among them ([`crate::model::own_hops`]: `listen unix:`, a
    /// proxy to its own listener).
    pub fn accepts_per_request_known(&self) -> bool {
        self.accepts_known()
            && !self
                .quic
                .as_ref()
                .is_some_and(|q| q.makes_requests_per_accept_unknown())
            && self.own_hops().is_none()
    }

    /// The configuration as it bears on the period's traffic: the servers that had
    /// client connections and the upstreams they pass to (see
    /// [`super::config_scope::served`]); None when not read. Advice on keepalive and
    /// upstream pools quotes this, never an idle server's settings.
    pub fn served_config(&self) -> Option<crate::model::config::ConfigReport> {
        let cfg = self.config.as_ref()?;
        Some(super::config_scope::served(cfg, self.connections.as_ref()))
    }

    /// nginx's own hops among its accepts and requests ([`crate::model::own_hops`]),
    /// with why; None when there are none.
    pub fn own_hops(&self) -> Option<String> {
        crate::model::own_hops(
            self.config.as_ref(),
            self.connections.as_ref(),
            &self.listen,
        )
    }

    /// The workers' failed upstream connects by errno name (`connect()` and
    /// `getsockopt(SO_ERROR)`), summed over the workers; detail figures under
    /// `--detail sampled` (the windows' only).
    pub fn upstream_connect_errors(&self) -> std::collections::BTreeMap<String, u64> {
        let mut by = std::collections::BTreeMap::new();
        for w in &self.workers {
            for (k, n) in &w.upstream_errors {
                *by.entry(k.clone()).or_default() += n;
            }
        }
        by
    }

    /// nginx's client connections closed in the period before their client sent a
    /// byte (they carried no request: a spare connection, a health check that only
    /// connects), over every port (`tcp_sock.bytes_received` at the first close; see
    /// [`crate::model::connections::PortLifecycle::closed_without_data`]); 0 when
    /// they are not counted (no lifecycle, or the offset unknown).
    pub fn closed_without_data(&self) -> u64 {
        self.without_data(|t| t.closed_without_data())
    }

    /// Of [`Inputs::closed_without_data`], those the client closed itself (a health
    /// check that only connects, a spare connection dropped): not closed unserved by
    /// nginx.
    pub fn closed_without_data_by_client(&self) -> u64 {
        self.without_data(|t| t.closed_without_data_by_client)
    }

    /// `f` of the period's totals when connections closed without data are counted,
    /// else 0.
    fn without_data(&self, f: impl Fn(&crate::model::connections::PortLifecycle) -> u64) -> u64 {
        self.connections
            .as_ref()
            .filter(|c| c.without_data_unknown.is_none())
            .map(|c| f(&c.total()))
            .unwrap_or(0)
    }
}

/// Lines of error-log class `name` in the period (0 when the log is not read).
pub fn log_count(inp: &Inputs, name: &str) -> u64 {
    inp.nginx_errors
        .as_ref()
        .map(|e| e.count(name))
        .unwrap_or(0)
}

/// A live worker with `accepts` and exact `requests`, everything else default: the
/// unit tests' usual worker.
#[cfg(test)]
pub(crate) fn w(pid: u32, accepts: u64, requests: u64) -> WorkerInput {
    WorkerInput {
        pid,
        alive: true,
        accepts,
        requests: Some(requests),
        ..WorkerInput::default()
    }
}
