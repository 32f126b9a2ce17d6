//! Client connection lifecycle per nginx listening port: who closed first, the idle
//! time before nginx's closes, resets, listeners closed. Built from the cumulative
//! in-kernel counters of `nginx_probe_common::lifecycle` (sources: tracepoints
//! `sock:inet_sock_set_state`, `tcp:tcp_send_reset`, `tcp:tcp_receive_reset`,
//! `tcp:tcp_destroy_sock`; idle time from the socket's `tcp_sock.lsndtime` and
//! `icsk_ack.lrcvtime`, jiffies, at nginx's close). Pure.

use std::collections::BTreeMap;

use nginx_probe_common::lifecycle::{self as lc, LC_PER_PORT, LC_REASONS};
use serde::{Deserialize, Serialize};

pub use crate::model::idle::{
    fmt_ms, idle_report, pinned, IdleAt, IdleReport, PINNED_MIN_CLOSES, PINNED_SLACK_MS,
    PINNED_SPREAD,
};
use crate::model::listener_closes::{ListenerClose, ListenerClosesMerged};

/// Cumulative counters of every counted port at one instant (summed over CPUs; the
/// max/min entries combined by max), as read from `LC_STATS`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LifecycleRaw {
    /// Local port (host order) -> its `LC_PER_PORT` counters.
    pub ports: BTreeMap<u16, Vec<u64>>,
    /// Upstream peer -> its `up::UP_PER_PEER` counters (`LC_UP_PEERS`).
    pub peers: BTreeMap<lc::up::PeerKey, Vec<u64>>,
}

/// What the collector knows about how the counters were made (constant for a run).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LifecycleMeta {
    /// The kernel's HZ and where it was read; None: idle time not measured.
    pub hz: Option<(u64, String)>,
    /// Why idle time is not measured (BTF offsets or HZ unknown), when it is not.
    pub idle_unknown: Option<String>,
    /// `sk_rst_reason` names by value, from the tracepoint's format file.
    pub reason_names: Vec<String>,
    /// nginx ports not counted (more than `LC_MAX_PORTS`).
    pub ports_not_counted: u64,
    /// The programs attached are the raw tracepoints ([`RAW_SOURCE`]), not the
    /// perf-event ones ([`SOURCE`]).
    pub raw: bool,
    /// Why the raw-tracepoint programs are not the source (struct offsets not in the
    /// kernel's BTF, or the kernel refused them), when they are not.
    pub raw_unavailable: Option<String>,
    /// Why closes by exiting workers are not told apart from nginx's
    /// (`task_struct.flags` not in the kernel's BTF), when they are not.
    pub worker_exit_unknown: Option<String>,
    /// Why no lifecycle program is attached at all when the user left them out
    /// (`--no-lifecycle`): nothing is counted and the report has no `connections`.
    pub not_traced: Option<String>,
    /// Programs were attached (the per-worker closes are counted).
    pub attached: bool,
    /// Why closes by draining workers are not told apart from the serving workers'
    /// (the `ngx_close_idle_connections` uprobe not attached), when they are not.
    pub draining_unknown: Option<String>,
    /// Why TLS closes nginx began can be counted as the client's (the
    /// `ngx_ssl_shutdown` uprobe not attached: nginx built without TLS, the fd-table
    /// walk's offsets unknown...), when they can.
    pub tls_close_unknown: Option<String>,
    /// Why nginx's closes met by a client's FIN it never read can count as the
    /// client's (see `PortLifecycle::closed_by_nginx_client_fin_unread`), when they
    /// can.
    pub fin_unread_unknown: Option<String>,
    /// Why closes of connections that received no data are not counted
    /// (`tcp_sock.bytes_received` not in the kernel's BTF), when they are not.
    pub without_data_unknown: Option<String>,
    /// Why nginx's closes reusing connections at `worker_connections` are not counted
    /// (the `ngx_get_connection` uprobe not attached), when they are not.
    pub reusing_unknown: Option<String>,
}

/// One listening port's client connections in the period.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PortLifecycle {
    /// Local port.
    pub port: u16,
    /// Connections established (`SYN_RECV -> ESTABLISHED`).
    pub established: u64,
    /// nginx closed first (`ESTABLISHED -> FIN_WAIT1` in a worker's `close()` or
    /// `shutdown()`).
    pub closed_by_nginx: u64,
    /// Closed first on nginx's side by the kernel as the worker holding them exited
    /// (`ESTABLISHED -> FIN_WAIT1` in a task with `PF_EXITING`: a worker killed,
    /// crashed, or ending without closing them; `ESTABLISHED -> CLOSE` there too, a
    /// reset for a socket with the client's data unread: a request in flight); not in
    /// `closed_by_nginx` nor `closed_by_reset`.
    #[serde(default)]
    pub closed_by_worker_exit: u64,
    /// The client closed first (`ESTABLISHED -> CLOSE_WAIT`), less the FINs that
    /// answered a TLS close nginx had begun (`closed_by_nginx_client_fin_first`) and
    /// those nginx never read before its own close (`closed_by_nginx_client_fin_unread`).
    pub closed_by_client: u64,
    /// Of `closed_by_nginx`, TLS closes nginx began (uprobe `ngx_ssl_shutdown`: the
    /// client's EOF unread, the socket established; a keepalive or idle timeout, a
    /// response with `Connection: close`, a draining worker's sweep) whose client's FIN
    /// (or its reset) arrived before nginx's own `close()`: the client answered nginx's
    /// close_notify (or HTTP/2 GOAWAY). Not in `closed_by_client` nor `closed_by_reset`.
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub closed_by_nginx_client_fin_first: u64,
    /// Of `closed_by_nginx_client_fin_first`, those whose client answered with a reset
    /// (it closed with nginx's close_notify unread), not a FIN.
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub closed_by_nginx_client_reset_first: u64,
    /// Of `closed_by_nginx`, closes nginx decided on its own whose client's FIN came
    /// first but was never read: at the worker's `close()` (`CLOSE_WAIT -> LAST_ACK`)
    /// `tcp_sock.copied_seq` was behind `rcv_nxt` and nginx had sent data in the last
    /// jiffy: a response with `Connection: close` (keepalive_requests reached,
    /// keepalive_timeout 0, HTTP/1.0) and a client closing on reading it while nginx
    /// wrote its access log. Not in `closed_by_client`.
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub closed_by_nginx_client_fin_unread: u64,
    /// Of `closed_by_nginx`, TLS closes nginx began (uprobe `ngx_ssl_shutdown`: the
    /// client's EOF unread, the socket `ESTABLISHED`) whose `close()` found the
    /// client's data unread, so the kernel ended them with a reset
    /// (`ESTABLISHED -> CLOSE`, `TCP_ABORT_ON_CLOSE`): the client's close_notify
    /// answering nginx's, most often. Not in `closed_by_reset`.
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub closed_by_nginx_data_unread: u64,
    /// Of `closed_by_nginx`, closes by draining workers (after they entered
    /// `ngx_close_idle_connections`: a reload, a graceful QUIT, a binary upgrade's
    /// WINCH); not in `idle_before_nginx_close`. 0 also when not told apart (the
    /// report's `draining_unknown` then says why).
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub closed_while_draining: u64,
    /// Of `closed_while_draining`, closes inside the worker's call of
    /// `ngx_close_idle_connections` (between its uprobe and uretprobe): the
    /// connections nginx marks idle (kept-alive, waiting for a next request), closed
    /// under their clients, whatever nginx wrote as it closed (a TLS close_notify, an
    /// HTTP/2 GOAWAY).
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub closed_while_draining_idle: u64,
    /// Of `closed_while_draining`, closes after that sweep with nginx's own data sent
    /// at most one jiffy before (`tcp_sock.lsndtime`): a response then the close, or a
    /// TLS close_notify / HTTP/2 GOAWAY (not told apart).
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub closed_while_draining_after_data: u64,
    /// Of `closed_while_draining`, closes after that sweep with nothing sent by nginx
    /// in the close's last jiffy: a request whose response had not begun (cut at
    /// `worker_shutdown_timeout`, say), a connection still waiting for its first
    /// request, or a response that ended earlier.
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub closed_while_draining_silent: u64,
    /// Of `closed_while_draining_silent`, closes with nginx's last data sent a jiffy
    /// or more after the client's (`tcp_sock.lsndtime` newer than
    /// `icsk_ack.lrcvtime`): a response under way (a stream, a download) cut between
    /// two of its writes. The rest had the client's data last: a request waiting for
    /// its response, or a connection without a whole request.
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub closed_while_draining_mid_response: u64,
    /// Time from the worker's drain start (its `ngx_close_idle_connections` uprobe,
    /// `bpf_ktime_get_ns`) to its `closed_while_draining_silent` closes: the shortest
    /// and longest since attach; absent when there were none in the period (or the
    /// worker was draining before attach: its drain start is unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub silent_close_after_drain_start: Option<MsSpan>,
    /// The same for its `closed_while_draining_after_data` closes: a response still
    /// being sent when `worker_shutdown_timeout` cut it closes at that timeout after
    /// the drain began, like the silent closes it cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_data_close_after_drain_start: Option<MsSpan>,
    /// Ended by a reset while established (`ESTABLISHED -> CLOSE`, either side).
    pub closed_by_reset: u64,
    /// Of nginx's closes (`closed_by_nginx`, `closed_by_nginx_reset`), those made inside
    /// the worker's call of `ngx_get_connection` (uprobe: the call's return address
    /// still in its stack slot at the close): nginx at `worker_connections`, 1/16 or
    /// fewer of its connections free, closing reusable ones (kept-alive idle, or
    /// waiting for their first request) to take their place for a new connection
    /// (`ngx_drain_connections`; nginx logs "worker_connections are not enough,
    /// reusing connections" at warn). 0 also when not counted (the report's
    /// `reusing_unknown` then says why).
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub closed_reusing_connections: u64,
    /// Of `closed_reusing_connections`, those ended by a reset: the client's data was
    /// unread at the close (`TCP_ABORT_ON_CLOSE`), a request nginx never read, failed
    /// for its client unless it retries.
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub closed_reusing_connections_reset: u64,
    /// Of `closed_by_reset`, nginx's own: `ESTABLISHED -> CLOSE` in a worker's
    /// `close()` with no received reset being processed: a close with the client's data
    /// unread (`TCP_ABORT_ON_CLOSE`), or `SO_LINGER` 0 (`reset_timedout_connection`).
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub closed_by_nginx_reset: u64,
    /// Of `closed_by_nginx_reset`, by draining workers: connections a reload or QUIT
    /// cut with a reset (a request arrived as the worker closed them).
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub closed_while_draining_reset: u64,
    /// Resets received (`tcp:tcp_receive_reset`).
    pub resets_received: u64,
    /// Resets sent from the port (`tcp:tcp_send_reset`), socket or not.
    pub resets_sent: u64,
    /// Resets sent by the kernel's reason (`sk_rst_reason`), non-zero ones.
    pub resets_sent_by_reason: BTreeMap<String, u64>,
    /// Of the resets sent for a client's data after nginx closed (`TCP_ABORT_ON_DATA`,
    /// `TCP_TIMEWAIT_SOCKET`), those answering a segment of 1 to 31 bytes of payload
    /// (tracepoint `tcp:tcp_send_reset`, the segment's `sk_buff.len` less its TCP
    /// header): the size of one TLS alert record (a client's close_notify: 24 bytes
    /// in TLS 1.3, 23 to 31 in TLS 1.2's AEAD suites), too short for a request on a
    /// TLS port; on a plain port, a request that short is possible.
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub resets_after_close_alert_sized: u64,
    /// Of the resets sent with reason `NO_SOCKET`, those answering a SYN (the answered
    /// segment's TCP flags, tracepoint `tcp:tcp_send_reset`): connection attempts
    /// refused, no listener having the port (nginx stopped, or a reload dropped it);
    /// 0 in recordings made before it, and when the offsets are unknown.
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub syns_refused: u64,
    /// Listening sockets of the port closed (`LISTEN -> CLOSE`: a reload that dropped
    /// a `reuseport` socket, a port removed from the config).
    pub listeners_closed: u64,
    /// Resets sent to connections queued on a listener as it was closed.
    pub resets_of_closed_listener_queue: u64,
    /// Of `closed_by_nginx`, connections that had received not one byte from the
    /// client (`tcp_sock.bytes_received` 0 at `ESTABLISHED -> FIN_WAIT1`): opened and
    /// never used (a spare connection, a health check that only connects), closed at
    /// `client_header_timeout` or by a draining worker. 0 also when not counted (the
    /// report's
    /// `without_data_unknown` then says why).
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub closed_without_data_by_nginx: u64,
    /// Of `closed_by_client`, connections the client closed without sending a byte
    /// (`tcp_sock.bytes_received` at most 1, the FIN's, at `ESTABLISHED -> CLOSE_WAIT`).
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub closed_without_data_by_client: u64,
    /// Of `closed_by_reset`, connections that had received no byte before the reset.
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub closed_without_data_by_reset: u64,
    /// Idle time before nginx's closes; absent when not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_before_nginx_close: Option<IdleReport>,
    /// Lifetime of the connections first closed in the period (by any side), from
    /// their `SYN_RECV -> ESTABLISHED` to that close (`bpf_ktime_get_ns()`, the
    /// socket noted in `LC_BORN`): only those established since attach, and while at
    /// most `LC_MAX_BORN` were open at once; absent when none was measured.
    /// `after_nginx_wrote` is 0 here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifetime: Option<IdleReport>,
    /// Idle time before the client's closes (`closed_by_client`, its FIN first), at
    /// `ESTABLISHED -> CLOSE_WAIT`, counted once the worker's close showed the close
    /// was the client's: the time since the client's last data
    /// (`icsk_ack.lrcvtime`), or since nginx's (`tcp_sock.lsndtime`) when nginx sent
    /// last or the client's data came in the close's last jiffy. Absent when none was
    /// measured (HZ or the offsets unknown, none closed). `after_nginx_wrote` is 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_before_client_close: Option<IdleReport>,
    /// Idle time before a reset received ended an established connection (the same
    /// two time stamps, at `ESTABLISHED -> CLOSE`): near 0 a reset mid-exchange, long
    /// ones an idle connection dropped. Absent when none was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_before_reset_received: Option<IdleReport>,
}

impl PortLifecycle {
    /// Connections closed (first, by any side) that had received not one byte from
    /// the client: they carried no request.
    pub fn closed_without_data(&self) -> u64 {
        self.closed_without_data_by_nginx
            + self.closed_without_data_by_client
            + self.closed_without_data_by_reset
    }

    /// These counts with the connections closed before the client sent a byte left
    /// out of who closed first (`closed_by_nginx`, `closed_by_client`,
    /// `closed_by_reset`): they carried no request, so their closes say nothing of
    /// keepalive.
    pub fn with_data(&self) -> PortLifecycle {
        let mut c = self.clone();
        c.closed_by_nginx = c
            .closed_by_nginx
            .saturating_sub(c.closed_without_data_by_nginx);
        c.closed_by_client = c
            .closed_by_client
            .saturating_sub(c.closed_without_data_by_client);
        c.closed_by_reset = c
            .closed_by_reset
            .saturating_sub(c.closed_without_data_by_reset);
        c
    }
}

impl PortLifecycle {
    /// The silent draining closes told apart by which side's data came last, as the
    /// text report and `worker_shutdown_timeout_cut` say them (empty when none).
    ///
    /// `h2_mid` of the mid-response ones were on ports serving HTTP/2 (or of an
    /// unknown configuration): there nginx's own frames (a SETTINGS ack, a
    /// WINDOW_UPDATE) follow a client's request, so a request still waiting looks the
    /// same as a response cut between two writes, and they are said as not told apart
    /// (see [`ConnectionsReport::mid_response_on`]).
    pub fn silent_split(&self, h2_mid: u64) -> String {
        let n = self.closed_while_draining_silent;
        let m = self.closed_while_draining_mid_response.min(n);
        let h = h2_mid.min(m);
        let mut parts = Vec::new();
        if m > h {
            parts.push(format!("{} in the middle of a response (nginx's data after the client's: a stream or a download cut between two writes, its client got part of it)", m - h));
        }
        if h > 0 {
            parts.push(format!("{h} with nginx's data after the client's on a port serving HTTP/2 (or whose configuration is unknown), where nginx's own frames follow a request: a response cut between two writes or a request still waiting, not told apart"));
        }
        if n > m {
            parts.push(format!("{} with the client's data last (a request waiting for its response, its client got none, or a connection without a whole request)", n - m));
        }
        parts.join(", ")
    }
}

/// The shortest and longest of a set of times, ms, each the extreme since attach (the
/// times themselves are durations from an event: see the field using it).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct MsSpan {
    /// Shortest, ms.
    pub min_ms: u64,
    /// Longest, ms.
    pub max_ms: u64,
}

impl MsSpan {
    /// The span covering both.
    pub fn union(self, o: MsSpan) -> MsSpan {
        MsSpan {
            min_ms: self.min_ms.min(o.min_ms),
            max_ms: self.max_ms.max(o.max_ms),
        }
    }

    /// The span covering both, either or neither.
    pub fn union_opt(a: Option<MsSpan>, b: Option<MsSpan>) -> Option<MsSpan> {
        match (a, b) {
            (Some(a), Some(b)) => Some(a.union(b)),
            (a, b) => a.or(b),
        }
    }

    /// From the kernel's pair of counters (`max`, `!min`; 0 = none) when `n` closes
    /// were counted in the period.
    fn from_counters(n: u64, max: u64, inv_min: u64) -> Option<MsSpan> {
        (n > 0 && inv_min != 0).then_some(MsSpan {
            min_ms: !inv_min,
            max_ms: max,
        })
    }
}

/// One worker's client connection closes in the period, counted where the worker's own
/// `close()` made the state change (tracepoint `sock:inet_sock_set_state` in the
/// worker's context; a client's FIN or a reset arrives in softirq, with no worker to
/// name, so these say which worker closed, not every way a connection ended).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct WorkerCloses {
    /// The worker closed first (`ESTABLISHED -> FIN_WAIT1`).
    pub by_nginx: u64,
    /// Of `by_nginx`, while the worker was draining (it had entered
    /// `ngx_close_idle_connections`); 0 also when not told apart.
    pub while_draining: u64,
    /// The client had closed first and the worker closed its end (`CLOSE_WAIT ->
    /// LAST_ACK`, or `CLOSE_WAIT -> CLOSE` by its close with data unread).
    pub after_client: u64,
    /// Closed by the kernel as the worker exited (`ESTABLISHED -> FIN_WAIT1` with
    /// `PF_EXITING`).
    pub by_worker_exit: u64,
    /// Ended by the worker's own reset (`ESTABLISHED -> CLOSE` in its `close()`, no
    /// received reset being processed: the client's data unread, or `SO_LINGER` 0 as
    /// `reset_timedout_connection` sets); 0 in recordings made before it.
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub reset_by_nginx: u64,
    /// Closes the worker made inside its `ngx_get_connection`, reusing connections
    /// at `worker_connections` (`PortLifecycle::closed_reusing_connections`, per
    /// worker; by its FIN or its reset); 0 in recordings made before it.
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub reusing: u64,
    /// Of `reset_by_nginx`, while the worker was draining: requests its `close()`
    /// found unread as it shut down (`PortLifecycle::closed_while_draining_reset`,
    /// per worker); 0 in recordings made before it.
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub reset_while_draining: u64,
}

impl WorkerCloses {
    /// The counts in a worker's period stats (`model::CLOSES_IDX`).
    pub fn of(stats: &crate::model::SlotStats) -> WorkerCloses {
        use lc::worker as w;
        let c = |i: usize| stats[crate::model::CLOSES_IDX + i].count;
        WorkerCloses {
            by_nginx: c(w::CLOSED_BY_NGINX),
            while_draining: c(w::CLOSED_WHILE_DRAINING),
            after_client: c(w::CLOSED_AFTER_CLIENT),
            by_worker_exit: c(w::CLOSED_BY_WORKER_EXIT),
            reset_by_nginx: c(w::RESET_BY_NGINX),
            reusing: c(w::CLOSED_REUSING),
            reset_while_draining: c(w::RESET_WHILE_DRAINING),
        }
    }
}

/// Client connections per listening port (JSON `connections`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ConnectionsReport {
    /// Where the numbers come from.
    pub source: String,
    /// Ports with anything in the period, in port order.
    pub ports: Vec<PortLifecycle>,
    /// The kernel's HZ used to turn jiffies into ms, and where it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hz: Option<u64>,
    /// Where HZ was read (the kernel's config, or measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hz_source: Option<String>,
    /// Why idle time before close is unknown, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_unknown: Option<String>,
    /// Why closes by exiting workers are counted as nginx's (`task_struct.flags`
    /// unknown), when they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_exit_unknown: Option<String>,
    /// Why closes by draining workers are not told apart (then they are in
    /// `closed_by_nginx` and the idle times), when they are not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draining_unknown: Option<String>,
    /// Why a TLS client's FIN answering nginx's close_notify can be counted as the
    /// client's close (the `ngx_ssl_shutdown` uprobe not attached), when it can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_close_unknown: Option<String>,
    /// Why nginx's closes met by a client's FIN it never read (a response with
    /// `Connection: close` and a client closing on reading it) can be counted as the
    /// client's (the `ngx_ssl_shutdown` uprobe not attached on an nginx with TLS,
    /// `tcp_sock` offsets unknown), when they can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fin_unread_unknown: Option<String>,
    /// Whether nginx's closes met by a client's FIN it never read are told apart from
    /// the clients' closes (the rule was on: `fin_unread_unknown` unset). Absent
    /// (false) in recordings made before the rule: there they are not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fin_unread_told_apart: bool,
    /// Why closes of connections that received no data
    /// (`PortLifecycle::closed_without_data_by_*`) are not counted, when they are not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without_data_unknown: Option<String>,
    /// Whether closes of connections that received no data were counted (written
    /// when they were; absent in recordings made before, where a 0 says nothing).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub without_data_counted: bool,
    /// Why nginx's closes reusing connections at `worker_connections`
    /// (`PortLifecycle::closed_reusing_connections`) are not counted, when they are
    /// not: the `ngx_get_connection` uprobe not attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reusing_unknown: Option<String>,
    /// Whether those closes were counted (written when they were; absent in
    /// recordings made before, where a 0 says nothing).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reusing_counted: bool,
    /// nginx listening ports not counted (beyond the first 16).
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub ports_not_counted: u64,
    /// Why the counts come from the perf-event tracepoints and not from the raw
    /// tracepoints (the cheaper default), when they do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_unavailable: Option<String>,
    /// nginx's listening sockets closed, one event per port and refresh that saw any
    /// (the summary: since attach; an interval: the events its refreshes saw), with
    /// the reload each followed and the resets of their queued connections (see
    /// [`crate::model::listener_closes`]); at most
    /// [`crate::model::listener_closes::MAX_LISTENER_CLOSES`] since attach.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listener_closes: Vec<ListenerClose>,
    /// The period's listener-close events merged away to keep the list bounded (the
    /// oldest since attach), summed; absent when none were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listener_closes_merged: Option<ListenerClosesMerged>,
    /// The TCP connections nginx's workers opened, per upstream peer, with anything in
    /// the period (see [`crate::model::upstream_lifecycle`]); empty: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upstream_peers: Vec<crate::model::upstream_lifecycle::PeerLifecycle>,
}

/// Source line of [`ConnectionsReport::source`] from the perf-event tracepoints (they
/// read the record the kernel builds per hit).
pub const SOURCE: &str = "tracepoints sock:inet_sock_set_state, tcp:tcp_send_reset, tcp:tcp_receive_reset on sockets whose local port is one of nginx's listening ports";

/// Source line of [`ConnectionsReport::source`] from the raw tracepoints (the socket
/// read with offsets from the kernel's BTF; no record built per hit).
pub const RAW_SOURCE: &str = "raw tracepoints inet_sock_set_state, tcp_send_reset, tcp_receive_reset on sockets whose local port is one of nginx's listening ports (struct sock read with offsets from the kernel's BTF)";

impl ConnectionsReport {
    /// The silent draining closes with nginx's data last
    /// (`closed_while_draining_mid_response`) on `h2_ports`, the ports serving HTTP/2
    /// (from the configuration: `ConfigReport::http2_ports`); on every port when they
    /// are unknown (None).
    pub fn mid_response_on(&self, h2_ports: Option<&[u16]>) -> u64 {
        self.ports
            .iter()
            .filter(|p| h2_ports.is_none_or(|h| h.contains(&p.port)))
            .map(|p| p.closed_while_draining_mid_response)
            .sum()
    }

    /// Why nginx's closes met by a client's FIN it never read can be among the clients'
    /// closes: `fin_unread_unknown`, or, in a recording made before the rule, that;
    /// None when they are told apart.
    pub fn fin_unread_why(&self) -> Option<String> {
        if self.fin_unread_told_apart {
            return None;
        }
        Some(
            self.fin_unread_unknown.clone().unwrap_or_else(|| {
                "recorded by a version that did not tell them apart".to_string()
            }),
        )
    }

    /// Sum over ports (idle and lifetime: [`super::idle::merged`]).
    pub fn total(&self) -> PortLifecycle {
        let mut t = PortLifecycle::default();
        for p in &self.ports {
            t.established += p.established;
            t.closed_by_nginx += p.closed_by_nginx;
            t.closed_by_worker_exit += p.closed_by_worker_exit;
            t.closed_while_draining += p.closed_while_draining;
            t.closed_while_draining_idle += p.closed_while_draining_idle;
            t.closed_while_draining_after_data += p.closed_while_draining_after_data;
            t.closed_while_draining_silent += p.closed_while_draining_silent;
            t.closed_while_draining_mid_response += p.closed_while_draining_mid_response;
            t.silent_close_after_drain_start = MsSpan::union_opt(
                t.silent_close_after_drain_start,
                p.silent_close_after_drain_start,
            );
            t.after_data_close_after_drain_start = MsSpan::union_opt(
                t.after_data_close_after_drain_start,
                p.after_data_close_after_drain_start,
            );
            t.closed_by_client += p.closed_by_client;
            t.closed_by_nginx_client_fin_first += p.closed_by_nginx_client_fin_first;
            t.closed_by_nginx_client_reset_first += p.closed_by_nginx_client_reset_first;
            t.closed_by_nginx_client_fin_unread += p.closed_by_nginx_client_fin_unread;
            t.closed_by_nginx_data_unread += p.closed_by_nginx_data_unread;
            t.resets_after_close_alert_sized += p.resets_after_close_alert_sized;
            t.syns_refused += p.syns_refused;
            t.closed_without_data_by_nginx += p.closed_without_data_by_nginx;
            t.closed_without_data_by_client += p.closed_without_data_by_client;
            t.closed_without_data_by_reset += p.closed_without_data_by_reset;
            t.closed_by_reset += p.closed_by_reset;
            t.closed_by_nginx_reset += p.closed_by_nginx_reset;
            t.closed_while_draining_reset += p.closed_while_draining_reset;
            t.closed_reusing_connections += p.closed_reusing_connections;
            t.closed_reusing_connections_reset += p.closed_reusing_connections_reset;
            t.resets_received += p.resets_received;
            t.resets_sent += p.resets_sent;
            t.listeners_closed += p.listeners_closed;
            t.resets_of_closed_listener_queue += p.resets_of_closed_listener_queue;
            for (k, v) in &p.resets_sent_by_reason {
                *t.resets_sent_by_reason.entry(k.clone()).or_default() += v;
            }
        }
        t.idle_before_nginx_close = super::idle::merged(
            self.ports
                .iter()
                .filter_map(|p| p.idle_before_nginx_close.as_ref()),
        );
        let merged = |f: fn(&PortLifecycle) -> Option<&IdleReport>| {
            super::idle::merged(self.ports.iter().filter_map(f))
        };
        t.lifetime = merged(|p| p.lifetime.as_ref());
        t.idle_before_client_close = merged(|p| p.idle_before_client_close.as_ref());
        t.idle_before_reset_received = merged(|p| p.idle_before_reset_received.as_ref());
        t
    }
}

/// Accepts that carried no request: connections closed before their client sent a
/// byte (`PortLifecycle::closed_without_data`, when counted) plus TLS handshakes
/// abandoned (`TlsReport::abandoned`). None when the abandoned handshakes are counted
/// in the detail windows only (libssl sampled, some counted): their number over the
/// period is not known. The accepts less these are the connections that may have
/// carried a request: text's REQUESTS line and the verdict `keepalive_off` take them
/// from here.
pub fn accepts_without_request(
    conns: Option<&ConnectionsReport>,
    tls: Option<&crate::model::TlsReport>,
) -> Option<u64> {
    let abandoned = match tls {
        Some(t) if t.libssl_sampled && t.abandoned > 0 => return None,
        Some(t) => t.abandoned,
        None => 0,
    };
    let without_data = conns
        .filter(|c| c.without_data_unknown.is_none())
        .map_or(0, |c| c.total().closed_without_data());
    Some(without_data + abandoned)
}

/// The report of the period between `prev` (None = attach) and `cur`; None when no
/// port had anything in the period (the JSON then has no `connections`).
pub fn connections_report(
    cur: &LifecycleRaw,
    prev: Option<&LifecycleRaw>,
    meta: &LifecycleMeta,
) -> Option<ConnectionsReport> {
    let mut ports = Vec::new();
    for (&port, c) in &cur.ports {
        if c.len() != LC_PER_PORT {
            continue;
        }
        let p = prev.and_then(|p| p.ports.get(&port));
        let r = port_lifecycle(port, c, p.map(|p| p.as_slice()), meta);
        let any = r.established
            + r.closed_by_nginx
            + r.closed_by_worker_exit
            + r.closed_by_client
            + r.closed_by_reset
            + r.resets_received
            + r.resets_sent
            + r.listeners_closed
            > 0;
        if any {
            ports.push(r);
        }
    }
    let upstream_peers = crate::model::upstream_lifecycle::peer_lifecycles(
        &cur.peers,
        prev.map(|p| &p.peers),
        meta.hz.is_some() && meta.idle_unknown.is_none(),
    );
    if ports.is_empty() && upstream_peers.is_empty() {
        return None;
    }
    Some(ConnectionsReport {
        ports,
        upstream_peers,
        ..empty_report(meta)
    })
}

/// A report with no port counted in the period, how the counts are made from `meta`:
/// what a period whose only news is a listener close seen by a refresh (its counters
/// read by the period before) carries them in.
pub fn empty_report(meta: &LifecycleMeta) -> ConnectionsReport {
    ConnectionsReport {
        source: if meta.raw { RAW_SOURCE } else { SOURCE }.to_string(),
        ports: Vec::new(),
        hz: meta.hz.as_ref().map(|h| h.0),
        hz_source: meta.hz.as_ref().map(|h| h.1.clone()),
        idle_unknown: meta.idle_unknown.clone(),
        worker_exit_unknown: meta.worker_exit_unknown.clone(),
        draining_unknown: meta.draining_unknown.clone(),
        tls_close_unknown: meta.tls_close_unknown.clone(),
        fin_unread_unknown: meta.fin_unread_unknown.clone(),
        fin_unread_told_apart: meta.fin_unread_unknown.is_none(),
        without_data_unknown: meta.without_data_unknown.clone(),
        without_data_counted: meta.without_data_unknown.is_none(),
        reusing_unknown: meta.reusing_unknown.clone(),
        reusing_counted: meta.reusing_unknown.is_none(),
        ports_not_counted: meta.ports_not_counted,
        raw_unavailable: meta.raw_unavailable.clone(),
        listener_closes: Vec::new(),
        listener_closes_merged: None,
        upstream_peers: Vec::new(),
    }
}

/// One port's connection lifecycle over the period: the change of its counters `c`
/// since `prev` (None: attach), its resets by reason, its idle times before nginx closed.
fn port_lifecycle(
    port: u16,
    c: &[u64],
    prev: Option<&[u64]>,
    meta: &LifecycleMeta,
) -> PortLifecycle {
    let d = |i: usize| c[i].saturating_sub(prev.and_then(|p| p.get(i).copied()).unwrap_or(0));
    let mut by_reason = BTreeMap::new();
    for r in 0..LC_REASONS {
        let n = d(lc::RST_BY_REASON + r);
        if n > 0 {
            let name = meta
                .reason_names
                .get(r)
                .cloned()
                .unwrap_or_else(|| format!("reason_{r}"));
            *by_reason.entry(name).or_default() += n;
        }
    }
    let measured = |at: &IdleAt| Some(idle_report(c, &d, at)).filter(|i| i.count > 0);
    let idle = (meta.hz.is_some() && meta.idle_unknown.is_none()).then(|| {
        let mut i = idle_report(c, &d, &CLIENT_IDLE);
        i.after_nginx_wrote = d(lc::IDLE_AFTER_NGINX_WROTE);
        i
    });
    PortLifecycle {
        port,
        established: d(lc::ESTABLISHED),
        closed_by_nginx: d(lc::CLOSED_BY_NGINX),
        closed_by_worker_exit: d(lc::CLOSED_BY_WORKER_EXIT),
        closed_while_draining: d(lc::CLOSED_WHILE_DRAINING),
        closed_while_draining_idle: d(lc::CLOSED_WHILE_DRAINING_IDLE),
        closed_while_draining_after_data: d(lc::CLOSED_WHILE_DRAINING_AFTER_DATA),
        closed_while_draining_silent: d(lc::CLOSED_WHILE_DRAINING_SILENT),
        closed_while_draining_mid_response: d(lc::CLOSED_WHILE_DRAINING_MID_RESPONSE),
        silent_close_after_drain_start: MsSpan::from_counters(
            d(lc::CLOSED_WHILE_DRAINING_SILENT),
            c[lc::DRAIN_SILENT_MAX_MS],
            c[lc::DRAIN_SILENT_INV_MIN_MS],
        ),
        after_data_close_after_drain_start: MsSpan::from_counters(
            d(lc::CLOSED_WHILE_DRAINING_AFTER_DATA),
            c[lc::DRAIN_AFTER_DATA_MAX_MS],
            c[lc::DRAIN_AFTER_DATA_INV_MIN_MS],
        ),
        closed_by_client: d(lc::CLOSED_BY_CLIENT)
            .saturating_sub(d(lc::CLOSED_BY_CLIENT_ANSWERING_NGINX))
            .saturating_sub(d(lc::CLOSED_BY_NGINX_CLIENT_FIN_UNREAD)),
        closed_by_nginx_client_fin_first: d(lc::CLOSED_BY_NGINX_CLIENT_FIN_FIRST),
        closed_by_nginx_client_reset_first: d(lc::CLOSED_BY_NGINX_CLIENT_RST_FIRST),
        closed_by_nginx_client_fin_unread: d(lc::CLOSED_BY_NGINX_CLIENT_FIN_UNREAD),
        closed_by_nginx_data_unread: d(lc::CLOSED_BY_NGINX_DATA_UNREAD),
        resets_after_close_alert_sized: d(lc::RST_AFTER_CLOSE_ALERT_SIZED),
        syns_refused: d(lc::RST_NO_SOCKET_SYN),
        closed_without_data_by_nginx: d(lc::CLOSED_WITHOUT_DATA_BY_NGINX),
        closed_without_data_by_client: d(lc::CLOSED_WITHOUT_DATA_BY_CLIENT),
        closed_without_data_by_reset: d(lc::CLOSED_WITHOUT_DATA_BY_RESET),
        closed_by_reset: d(lc::CLOSED_BY_RESET),
        closed_by_nginx_reset: d(lc::CLOSED_BY_NGINX_RESET),
        closed_while_draining_reset: d(lc::CLOSED_WHILE_DRAINING_RESET),
        closed_reusing_connections: d(lc::CLOSED_REUSING),
        closed_reusing_connections_reset: d(lc::CLOSED_REUSING_RESET),
        resets_received: d(lc::RST_RECEIVED),
        resets_sent: d(lc::RST_SENT),
        resets_sent_by_reason: by_reason,
        listeners_closed: d(lc::LISTENERS_CLOSED),
        resets_of_closed_listener_queue: d(lc::RST_CLOSED_LISTENER),
        idle_before_nginx_close: idle.filter(|i| i.count > 0),
        lifetime: measured(&LIFETIME),
        idle_before_client_close: measured(&IdleAt::from_count(lc::CLIENT_CLOSE_IDLE_COUNT)),
        idle_before_reset_received: measured(&IdleAt::from_count(lc::RESET_IDLE_COUNT)),
    }
}

/// The connections' lifetimes in `LC_STATS`.
const LIFETIME: IdleAt = IdleAt {
    count: lc::LIFETIME_COUNT,
    sum: lc::LIFETIME_SUM_MS,
    max: lc::LIFETIME_MAX_MS,
    inv_min: lc::LIFETIME_INV_MIN_MS,
    hist: lc::LIFETIME_HIST,
};

/// The client side's idle time before nginx's closes in `LC_STATS`.
const CLIENT_IDLE: IdleAt = IdleAt {
    count: lc::IDLE_COUNT,
    sum: lc::IDLE_SUM_MS,
    max: lc::IDLE_MAX_MS,
    inv_min: lc::IDLE_INV_MIN_MS,
    hist: lc::IDLE_HIST,
};

/// A report with every field set (port 80: 10 closes by nginx pinned at 2.0 s, 3 by
/// the client after 1.0 s idle, 1 reset each way (the received one after 500 ms idle), a listener closed, the 14 lived 2.0 s; upstream peer 127.0.0.2:8080: 10
/// connects, all closed by the peer after 1.0 s idle), for render tests.
#[cfg(test)]
pub(crate) fn sample_report() -> ConnectionsReport {
    let mut v = vec![0; LC_PER_PORT];
    for (i, n) in [
        (lc::ESTABLISHED, 14),
        (lc::CLOSED_BY_NGINX, 10),
        (lc::CLOSED_BY_CLIENT, 3),
        (lc::CLOSED_BY_RESET, 1),
        (lc::RST_RECEIVED, 1),
        (lc::RST_SENT, 1),
        (lc::RST_BY_REASON + 14, 1),
        (lc::LISTENERS_CLOSED, 1),
        (lc::RST_CLOSED_LISTENER, 1),
        (lc::IDLE_COUNT, 10),
        (lc::IDLE_SUM_MS, 20_000),
        (lc::IDLE_MAX_MS, 2000),
        (lc::IDLE_INV_MIN_MS, !2000u64),
        (lc::IDLE_HIST + 10, 10),
        (lc::LIFETIME_COUNT, 14),
        (lc::LIFETIME_SUM_MS, 28_000),
        (lc::LIFETIME_MAX_MS, 2010),
        (lc::LIFETIME_INV_MIN_MS, !1990u64),
        (lc::LIFETIME_HIST + 10, 14),
        (lc::CLIENT_CLOSE_IDLE_COUNT, 3),
        (lc::CLIENT_CLOSE_IDLE_SUM_MS, 3000),
        (lc::CLIENT_CLOSE_IDLE_MAX_MS, 1000),
        (lc::CLIENT_CLOSE_IDLE_INV_MIN_MS, !1000u64),
        (lc::CLIENT_CLOSE_IDLE_HIST + 9, 3),
        (lc::RESET_IDLE_COUNT, 1),
        (lc::RESET_IDLE_SUM_MS, 500),
        (lc::RESET_IDLE_MAX_MS, 500),
        (lc::RESET_IDLE_INV_MIN_MS, !500u64),
        (lc::RESET_IDLE_HIST + 8, 1),
    ] {
        v[i] = n;
    }
    let mut peer = vec![0; lc::up::UP_PER_PEER];
    for (i, n) in [
        (lc::up::CONNECTS, 10),
        (lc::up::ESTABLISHED, 10),
        (lc::up::CLOSED_BY_PEER, 10),
        (lc::up::PEER_IDLE_COUNT, 10),
        (lc::up::PEER_IDLE_SUM_MS, 10_000),
        (lc::up::PEER_IDLE_MAX_MS, 1000),
        (lc::up::PEER_IDLE_INV_MIN_MS, !1000u64),
        (lc::up::PEER_IDLE_HIST + 9, 10),
    ] {
        peer[i] = n;
    }
    let key = lc::up::PeerKey {
        family: 2,
        port: 8080,
        addr: [127, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    };
    let raw = LifecycleRaw {
        ports: [(80, v)].into_iter().collect(),
        peers: [(key, peer)].into_iter().collect(),
    };
    let meta = LifecycleMeta {
        hz: Some((250, "test".into())),
        ..Default::default()
    };
    connections_report(&raw, None, &meta).expect("counted")
}

#[cfg(test)]
#[path = "connections_tests.rs"]
mod tests;
