//! The report's sections as facts, computed once from a [`Report`] and laid out by each
//! medium: the text report ([`super::text`]), the HTML page ([`super::html`]) and the
//! live view ([`super::tui`]). A section is a [`Table`]: a title, its columns and rows
//! of labelled [`Cell`]s (the figure as every medium shows it, and whether it is an
//! alert), each row naming the worker it is about ([`Who`]) so that each medium names
//! workers its own way. A new fact is added here once, as a column; each medium then
//! places it (HTML lays every column out; the text report and the live view pick theirs
//! by label, at their fixed widths).
//!
//! Where a medium deliberately shows something else, it computes that itself and says
//! so: the live view shows rates over its interval where the reports show totals, the
//! text report's accepts table keeps the three fd figures in one cell and leaves a few
//! columns to the JSON and the page to stay within a terminal's width, and the HTML
//! page shows the merged exited workers in its accepts bars rather than in the table.

use crate::model::{
    write_destination_label, ListenReport, Report, Severity, TlsReport, WorkerReport,
};

use super::figures::{fmt_ns, fmt_quantile_ns, fmt_syscall_ns};

/// How a column's cells read: the HTML page right-aligns numbers and sets names in
/// the monospace face.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A figure (a count, a duration, a share), right-aligned.
    Number,
    /// A name from the system (a syscall, an address), monospace.
    Code,
    /// Words (a write destination's description).
    Words,
}

/// One column of a section: its label (lower case, as the HTML page heads it) and how
/// its cells read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Column {
    /// The label, unique within its table; the media find a cell by it.
    pub label: &'static str,
    /// Figure, name or words.
    pub kind: Kind,
}

const fn num(label: &'static str) -> Column {
    Column {
        label,
        kind: Kind::Number,
    }
}

/// One figure of a row, formatted as every medium shows it (`-` when unknown).
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    /// The figure as shown.
    pub text: String,
    /// The figure means trouble (EMFILE at accept, a listen queue overflowing): a
    /// medium may mark it.
    pub alert: bool,
}

impl Cell {
    fn of(text: impl ToString) -> Cell {
        Cell {
            text: text.to_string(),
            alert: false,
        }
    }

    fn alert_if(text: impl ToString, alert: bool) -> Cell {
        Cell {
            text: text.to_string(),
            alert,
        }
    }
}

/// Whom a row is about: a worker of the report, the exited workers merged into one
/// row ([`Report::exited_merged`]), or nobody (a listening socket).
#[derive(Clone, Copy, Debug)]
pub enum Who<'a> {
    /// One worker.
    Worker(&'a WorkerReport),
    /// `workers` older exited workers, their figures summed in `stats`.
    Exited {
        /// How many workers were merged.
        workers: u64,
        /// Their figures, summed.
        stats: &'a WorkerReport,
    },
    /// Not a worker's row.
    Nobody,
}

impl<'a> Who<'a> {
    /// The figures of the row's worker (summed for the merged exited workers); None
    /// for a row about no worker.
    pub fn worker(self) -> Option<&'a WorkerReport> {
        match self {
            Who::Worker(w) | Who::Exited { stats: w, .. } => Some(w),
            Who::Nobody => None,
        }
    }
}

/// The rows of a per-worker table that counts every worker: each listed worker (by
/// slot), then the merged exited workers when the report has them.
pub fn workers(r: &Report) -> impl Iterator<Item = Who<'_>> {
    let merged = r.exited_merged.as_ref().map(|m| Who::Exited {
        workers: m.workers,
        stats: &m.stats,
    });
    r.workers.iter().map(Who::Worker).chain(merged)
}

/// One row of a section: whom it is about and its cells, in the table's column order.
#[derive(Clone, Debug)]
pub struct Row<'a> {
    /// The worker (or merged workers) of the row.
    pub who: Who<'a>,
    /// One cell per column of the table.
    pub cells: Vec<Cell>,
}

/// One section of the report as facts: title, columns, rows.
#[derive(Clone, Debug)]
pub struct Table<'a> {
    /// The section's title (as the HTML page heads it).
    pub title: &'static str,
    /// The columns, in order; the worker's name is not a column (each medium names
    /// workers its own way from [`Row::who`]).
    pub columns: Vec<Column>,
    /// The rows, in the report's order (workers by slot, the merged ones last).
    pub rows: Vec<Row<'a>>,
}

impl<'a> Table<'a> {
    /// The rows about worker `w` (its own rows, not the merged exited workers'), in
    /// order.
    pub fn rows_of<'t>(&'t self, w: &'t WorkerReport) -> impl Iterator<Item = &'t Row<'a>> {
        self.rows
            .iter()
            .filter(move |row| matches!(row.who, Who::Worker(x) if std::ptr::eq(x, w)))
    }

    /// The index of the column labelled `label`. A label not in the table is a
    /// programming error (caught by the tests in debug builds); `0` then.
    pub fn index(&self, label: &str) -> usize {
        let i = self.columns.iter().position(|c| c.label == label);
        debug_assert!(i.is_some(), "no column `{label}` in `{}`", self.title);
        i.unwrap_or(0)
    }
}

impl Row<'_> {
    /// The cell of `row` in the column labelled `label` of `table`.
    pub fn get<'r>(&'r self, table: &Table<'_>, label: &str) -> &'r Cell {
        &self.cells[table.index(label)]
    }

    /// The text of the cell labelled `label`.
    pub fn text<'r>(&'r self, table: &Table<'_>, label: &str) -> &'r str {
        &self.get(table, label).text
    }
}

/// The binary upgrade's new master running beside this one in the period, when there
/// is one: (its pid, seconds since attach it was seen a master). Its workers serve
/// the same listening sockets and write the same logs, so the per-port connection
/// counts and the access log's lines include theirs (`Report::new_master_beside`, the
/// tracker's until the new master is gone; in recordings made before it, the report's
/// own `new_master` events).
pub fn upgrade_beside(r: &Report) -> Option<(u32, f64)> {
    if let Some(b) = r.new_master_beside {
        return Some((b.pid, b.since_s));
    }
    r.events
        .iter()
        .rev()
        .find(|e| e.event == crate::model::EventKind::NewMaster)
        .map(|e| (e.pid, e.t_s))
}

/// `v` as text, `-` when unknown.
pub fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "-".into())
}

/// A share (0..=1) as a percentage with one decimal: `42.5%`.
pub fn pct1(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// Where the TLS section's libssl figures (started, abandoned, wall times, time
/// inside `SSL_do_handshake`) come from, as every medium words it: `libssl PATH` (the
/// libssl the master maps), `OpenSSL linked into nginx PATH` (the nginx binary), or
/// `none (why)`; None in recordings made before it was reported.
pub fn tls_libssl(t: &TlsReport) -> Option<String> {
    let path = t.libssl_path.as_deref().unwrap_or("?");
    match t.libssl_from.as_deref()? {
        "shared_library" => Some(format!("libssl {path}")),
        "nginx_binary" => Some(format!("OpenSSL linked into nginx {path}")),
        _ => Some(format!(
            "none ({})",
            t.libssl_unavailable.as_deref().unwrap_or("not attached")
        )),
    }
}

/// The accept errno classes of the per-worker table, in column order (nginx's
/// `accept4` failures, from the `sys_exit_accept4` tracepoint or the accept uprobe).
pub const ACCEPT_ERRNOS: [&str; 6] = [
    "EMFILE",
    "ENFILE",
    "ECONNABORTED",
    "EINTR",
    "OTHER",
    "EAGAIN",
];

/// The per-worker accepts table: accepts and share (of all the workers' accepts), the
/// accept errors by errno class (EMFILE and ENFILE are alerts: the fd limit is hit),
/// the fds from `/proc/<pid>/fd` (open now, peak, `RLIMIT_NOFILE`), and connections
/// accepted then closed without a request. Live workers, then the merged exited ones.
pub fn accepts(r: &Report) -> Table<'_> {
    let mut columns = vec![num("accepts"), num("share")];
    columns.extend(ACCEPT_ERRNOS.map(num));
    columns.extend([
        num("fds open"),
        num("fds peak"),
        num("fd limit"),
        num("accepted then closed"),
    ]);
    let rows = workers(r)
        .filter_map(|who| {
            Some(Row {
                who,
                cells: accepts_cells(who.worker()?),
            })
        })
        .collect();
    Table {
        title: "Accepts, accept errors and file descriptors",
        columns,
        rows,
    }
}

/// The cells of one worker's row of [`accepts`].
fn accepts_cells(w: &WorkerReport) -> Vec<Cell> {
    let mut cells = vec![Cell::of(w.accepts), Cell::of(pct1(w.accept_share))];
    cells.extend(ACCEPT_ERRNOS.map(|k| {
        let n = w.accept_errors.get(k).copied().unwrap_or(0);
        Cell::alert_if(n, n > 0 && matches!(k, "EMFILE" | "ENFILE"))
    }));
    cells.extend([
        Cell::of(opt(w.fds.open)),
        Cell::of(opt(w.fds.peak)),
        Cell::of(opt(w.fds.limit)),
        Cell::of(w.accepted_then_closed),
    ]);
    cells
}

/// The per-worker requests table (requests counted by the uprobes, `-` unknown): count,
/// per second and per connection, and the request time's p50, p99 and max.
pub fn requests(r: &Report) -> Table<'_> {
    let rows = r
        .workers
        .iter()
        .map(|w| Row {
            who: Who::Worker(w),
            cells: requests_cells(w),
        })
        .collect();
    Table {
        title: "Requests",
        columns: ["requests", "req/s", "req/conn", "p50", "p99", "max"]
            .map(num)
            .to_vec(),
        rows,
    }
}

/// The cells of one worker's row of [`requests`].
fn requests_cells(w: &WorkerReport) -> Vec<Cell> {
    let q = &w.requests;
    let one = |v: Option<f64>| opt(v.map(|v| format!("{v:.1}")));
    [
        opt(q.count),
        one(q.per_s),
        one(q.per_connection),
        opt(q.p50_ns.map(fmt_ns)),
        opt(q.p99_ns.map(fmt_ns)),
        opt(q.max_ns.map(fmt_ns)),
    ]
    .map(Cell::of)
    .to_vec()
}

/// The per-worker event loop table (epoll wait return to the next wait): iterations,
/// busy time and share (of the period, or of the in-window seconds when sampled), the
/// p99 and longest iteration (`none` without one), and CPU seconds from
/// `/proc/<pid>/stat`.
pub fn event_loop(r: &Report) -> Table<'_> {
    let share = busy_share_label(r);
    let rows = r
        .workers
        .iter()
        .map(|w| Row {
            who: Who::Worker(w),
            cells: event_loop_cells(w),
        })
        .collect();
    Table {
        title: "Event loop and CPU",
        columns: [
            "iterations",
            "busy",
            share,
            "p99 iteration",
            "max iteration",
            "CPU s",
        ]
        .map(num)
        .to_vec(),
        rows,
    }
}

/// The label of [`event_loop`]'s busy share column: the share of the in-window
/// seconds when sampled (`--detail sampled`), of the period otherwise.
pub fn busy_share_label(r: &Report) -> &'static str {
    if r.detail.is_some() {
        "busy share of the in-window seconds (sampled)"
    } else {
        "busy share"
    }
}

/// The cells of one worker's row of [`event_loop`].
fn event_loop_cells(w: &WorkerReport) -> Vec<Cell> {
    let l = &w.event_loop;
    [
        l.iterations.to_string(),
        fmt_ns(l.busy_ns),
        pct1(l.busy_share),
        fmt_quantile_ns(l.iterations, l.p99_iteration_ns),
        fmt_quantile_ns(l.iterations, l.max_iteration_ns),
        opt(w.cpu_s.map(|c| format!("{c:.2}"))),
    ]
    .map(Cell::of)
    .to_vec()
}

/// The per-worker syscalls table, one row per worker and syscall called in the period:
/// calls, errors, latency p50, p99, max and total (`-` for a syscall counted, not timed;
/// `none` when none was timed), bytes or events. From the `sys_enter_*`/`sys_exit_*`
/// tracepoints.
pub fn syscalls(r: &Report) -> Table<'_> {
    let mut columns = vec![Column {
        label: "syscall",
        kind: Kind::Code,
    }];
    columns.extend(
        [
            "calls",
            "errors",
            "p50",
            "p99",
            "max",
            "total",
            "bytes / events",
        ]
        .map(num),
    );
    let rows = r
        .workers
        .iter()
        .flat_map(|w| {
            w.syscalls
                .iter()
                .filter(|(_, s)| s.count > 0)
                .map(move |(name, s)| {
                    let ns = |v, total| Cell::of(fmt_syscall_ns(r, name, s, v, total));
                    let cells = vec![
                        Cell::of(name),
                        Cell::of(s.count),
                        Cell::of(s.errors),
                        ns(s.p50_ns, false),
                        ns(s.p99_ns, false),
                        ns(s.max_ns, false),
                        ns(s.total_ns, true),
                        Cell::of(opt(s.bytes.or(s.events))),
                    ];
                    Row {
                        who: Who::Worker(w),
                        cells,
                    }
                })
        })
        .collect();
    Table {
        title: "Syscalls",
        columns,
        rows,
    }
}

/// The writes-by-destination table, one row per worker and destination written to
/// (write, writev, pwrite64, pwritev, classified by fd): calls, bytes, total time, p50
/// (`unknown` in recordings older than it) and p99, share of the worker's syscall time,
/// writes per request. The access-log opens that follow each worker's rows are left to
/// each medium: the text report hides their per-request figure when sampled.
pub fn writes(r: &Report) -> Table<'_> {
    let mut columns = vec![Column {
        label: "destination",
        kind: Kind::Words,
    }];
    columns.extend(
        [
            "calls",
            "bytes",
            "time",
            "p50",
            "p99",
            "share of syscall time",
            "per request",
        ]
        .map(num),
    );
    let rows = r
        .workers
        .iter()
        .flat_map(|w| {
            w.writes
                .iter()
                .filter(|(_, x)| x.count > 0)
                .map(move |(dest, x)| {
                    let cells = vec![
                        Cell::of(write_destination_label(dest)),
                        Cell::of(x.count),
                        Cell::of(x.bytes),
                        Cell::of(fmt_ns(x.total_ns)),
                        Cell::of(
                            x.p50_ns
                                .map(|ns| fmt_quantile_ns(x.count, ns))
                                .unwrap_or_else(|| "unknown".into()),
                        ),
                        Cell::of(fmt_quantile_ns(x.count, x.p99_ns)),
                        Cell::of(opt(x.share_of_syscall_time.map(pct1))),
                        Cell::of(opt(x.per_request.map(|v| format!("{v:.2}")))),
                    ];
                    Row {
                        who: Who::Worker(w),
                        cells,
                    }
                })
        })
        .collect();
    Table {
        title: "Writes by destination",
        columns,
        rows,
    }
}

/// The listening sockets table (sock_diag of nginx's network namespace): address,
/// backlog, accept queue now (`closed` once nginx closed it) and at its peak. The
/// namespace's TcpExt ListenOverflows and ListenDrops are no socket's: said once under
/// the table ([`listen_namespace`]). Drops at nginx's own socket are
/// [`listen_socket_drops`]: only the live view shows them beside the table; the text
/// and HTML reports leave them to the JSON and Prometheus.
pub fn listen(r: &Report) -> Table<'_> {
    let mut columns = vec![Column {
        label: "address",
        kind: Kind::Code,
    }];
    columns.extend(["backlog", "queue now", "queue max"].map(num));
    let rows = r
        .listen
        .iter()
        .map(|l| Row {
            who: Who::Nobody,
            cells: vec![
                Cell::of(&l.addr),
                Cell::of(l.backlog),
                Cell::of(l.queue_now_shown()),
                Cell::of(l.queue_max),
            ],
        })
        .collect();
    Table {
        title: "Listening sockets",
        columns,
        rows,
    }
}

/// The listen overflows and drops of nginx's network namespace in the period, once,
/// said as namespace-wide with their source (the kernel counts them per network
/// namespace, for every listening socket in it, nginx's or not: they belong to no row
/// of [`listen`]); an alert on any overflow. None when nginx listens on nothing or the
/// counters were unreadable.
pub fn listen_namespace(r: &Report) -> Option<Cell> {
    let n = r
        .listen_namespace
        .as_ref()
        .filter(|_| !r.listen.is_empty())?;
    Some(Cell::alert_if(
        format!(
            "namespace-wide, not per socket: listen overflows {}, drops {} ({})",
            n.overflows, n.drops, n.source
        ),
        n.overflows > 0,
    ))
}

/// Connections dropped at nginx's own listening socket `l` in the period
/// (sock_diag `SK_MEMINFO_DROPS`), as a cell: an alert when any; None when the kernel
/// gives no socket memory info.
pub fn listen_socket_drops(l: &ListenReport) -> Option<Cell> {
    l.socket_drops.map(|n| Cell::alert_if(n, n > 0))
}

/// The events nginx-probe could not account, `reason=count` for each non-zero one
/// (the `drops` of the report: exits without an entry, slots exhausted, ...).
pub fn drops(r: &Report) -> Vec<String> {
    r.drops
        .iter()
        .filter(|(_, &v)| v > 0)
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
}

/// A verdict's severity as every medium writes it: `warning`, `critical`.
pub fn severity_name(s: Severity) -> &'static str {
    match s {
        Severity::Warning => "warning",
        Severity::Critical => "critical",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The summary of a real recording (2 workers, `--syscalls all`, 300 connections).
    fn real_summary() -> Report {
        let jsonl = include_str!("../testdata/two_workers_300_connections.jsonl");
        serde_json::from_str(jsonl.lines().last().unwrap()).unwrap()
    }

    #[test]
    fn every_row_has_one_cell_per_column_and_labels_are_unique() {
        let r = real_summary();
        for t in [
            accepts(&r),
            requests(&r),
            event_loop(&r),
            syscalls(&r),
            writes(&r),
            listen(&r),
        ] {
            assert!(!t.rows.is_empty(), "{}", t.title);
            for row in &t.rows {
                assert_eq!(row.cells.len(), t.columns.len(), "{}", t.title);
            }
            let labels: std::collections::BTreeSet<_> = t.columns.iter().map(|c| c.label).collect();
            assert_eq!(labels.len(), t.columns.len(), "{}", t.title);
        }
    }

    #[test]
    fn fd_limit_errors_and_overflows_are_alerts() {
        let mut r = real_summary();
        r.workers[0].accept_errors.insert("EMFILE".into(), 2);
        r.workers[0].accept_errors.insert("EAGAIN".into(), 9);
        r.listen_namespace = Some(crate::model::ListenNamespaceReport {
            overflows: 1,
            drops: 0,
            source: crate::model::listen::LISTEN_NAMESPACE_SOURCE.into(),
        });
        let t = accepts(&r);
        let row = &t.rows[0];
        assert!(row.get(&t, "EMFILE").alert && row.text(&t, "EMFILE") == "2");
        assert!(
            !row.get(&t, "EAGAIN").alert,
            "EAGAIN is nginx's normal wakeup"
        );
        assert!(!t.rows[1].get(&t, "EMFILE").alert);
        // The namespace's counters are said once, never on a socket's row.
        let l = listen(&r);
        assert!(l
            .columns
            .iter()
            .all(|c| !["overflows", "drops"].contains(&c.label)));
        let ns = listen_namespace(&r).unwrap();
        assert!(ns.alert);
        assert!(
            ns.text.starts_with("namespace-wide, not per socket: listen overflows 1, drops 0 (/proc/<master>/net/netstat TcpExt"),
            "{}",
            ns.text
        );
        // Rows of one worker: its own, in order.
        let s = syscalls(&r);
        assert!(s
            .rows_of(&r.workers[1])
            .all(|row| matches!(row.who, Who::Worker(w) if w.pid == r.workers[1].pid)));
    }
}
