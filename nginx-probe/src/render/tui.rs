//! Live view: when stdout is a terminal (and neither `--json`, `--summary-only` nor
//! `--plain` is given), a top-like table of workers redrawn at every interval report,
//! drawn with ratatui on crossterm's alternate screen. `q`, Esc or Ctrl-C ends the run;
//! the summary is then printed as text on the normal screen.
//!
//! Drawing is a pure function of a [`Report`] ([`draw`]), so unit tests render it into
//! ratatui's `TestBackend` without a terminal.

use std::io;

use crossterm::event::{Event, EventStream, KeyCode, KeyEvent, KeyModifiers};
use futures_util::StreamExt as _;
use ratatui::{
    layout::{Constraint, Layout},
    style::{Color, Modifier, Style, Stylize as _},
    text::{Line, Span},
    widgets::{Block, Borders, Paragraph, Row, Table, Wrap},
    DefaultTerminal, Frame,
};

use crate::{
    model::{Report, WorkerReport},
    render::sections,
    render::text::{event_line, fmt_ns},
};

/// What the header of the view says about the run (fixed for the run).
#[derive(Clone, Debug)]
pub struct Title {
    /// Host pid of the master.
    pub master_pid: u32,
    /// The master's process title.
    pub master_title: String,
    /// Seconds between redraws (the interval).
    pub interval_s: f64,
}

/// What a key press or terminal event asks for.
#[derive(Debug, PartialEq)]
pub enum Input {
    /// End the run (`q`, Esc, Ctrl-C).
    Quit,
    /// Redraw (a resize).
    Redraw,
    /// Nothing to do.
    Ignore,
}

/// The live view on the terminal; [`LiveView::stop`] (or a panic) restores the
/// terminal.
pub struct LiveView {
    terminal: DefaultTerminal,
    events: EventStream,
    title: Title,
    last: Option<Report>,
    /// The latest worker events, newest first (kept across redraws).
    recent: Vec<String>,
}

impl LiveView {
    /// Enters the alternate screen in raw mode and draws a waiting screen.
    ///
    /// Errors: the terminal could not be set up (then nothing is left changed).
    pub fn start(title: Title) -> io::Result<LiveView> {
        let terminal = ratatui::try_init()?;
        let mut v = LiveView {
            terminal,
            events: EventStream::new(),
            title,
            last: None,
            recent: Vec::new(),
        };
        v.redraw()?;
        Ok(v)
    }

    /// Shows an interval report.
    pub fn show(&mut self, r: &Report) -> io::Result<()> {
        for e in &r.events {
            self.recent
                .insert(0, event_line(e, r.master_pid, r.master.is_some()));
        }
        self.recent.truncate(RECENT_EVENTS);
        self.last = Some(r.clone());
        self.redraw()
    }

    /// Draws the last report again (after a resize).
    pub fn redraw(&mut self) -> io::Result<()> {
        let (title, last, recent) = (&self.title, self.last.as_ref(), &self.recent);
        self.terminal
            .draw(|f| draw(f, title, last, recent))
            .map(|_| ())
    }

    /// The next key press or terminal event, classified. Pending forever once the
    /// terminal's input ends.
    pub async fn next_input(&mut self) -> Input {
        match self.events.next().await {
            Some(Ok(ev)) => classify(&ev),
            Some(Err(_)) | None => std::future::pending().await,
        }
    }

    /// Leaves the alternate screen and raw mode (also done on drop, so an error return
    /// restores the terminal too).
    pub fn stop(self) {}
}

impl Drop for LiveView {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// What a terminal event asks for: `q`, Esc and Ctrl-C quit (raw mode turns Ctrl-C
/// into a key, not SIGINT); a resize redraws.
pub fn classify(ev: &Event) -> Input {
    match ev {
        Event::Key(KeyEvent {
            code: KeyCode::Char('q') | KeyCode::Esc,
            ..
        }) => Input::Quit,
        Event::Key(KeyEvent {
            code: KeyCode::Char('c'),
            modifiers,
            ..
        }) if modifiers.contains(KeyModifiers::CONTROL) => Input::Quit,
        Event::Resize(..) => Input::Redraw,
        _ => Input::Ignore,
    }
}

fn per_s(n: u64, secs: f64) -> String {
    if secs > 0.0 {
        format!("{:.1}", n as f64 / secs)
    } else {
        "-".into()
    }
}

/// `part` seconds as a percentage of `secs` (`-` when unknown).
fn pct_of(part: Option<f64>, secs: f64) -> String {
    part.filter(|_| secs > 0.0)
        .map(|p| format!("{:.0}%", p / secs * 100.0))
        .unwrap_or_else(|| "-".into())
}

/// The cells of each worker's row (not the merged exited workers'), in [`COLUMNS`]
/// order, with whether the worker is alive.
///
/// The share, fds, requests per connection and longest loop are the facts of
/// [`sections`], as the reports show them. The live view deliberately shows rates over
/// its interval where the reports show totals (accepts, requests per second; CPU and
/// run-queue wait as % of the interval), sums EMFILE and ENFILE in one column, shows
/// the busy share without a decimal, and `-` for an accept4 p99 not timed: the columns
/// of a top-like view at 80 characters.
pub fn worker_rows(r: &Report, secs: f64) -> Vec<(bool, Vec<String>)> {
    let accepts = sections::accepts(r);
    let requests = sections::requests(r);
    let looped = sections::event_loop(r);
    r.workers
        .iter()
        .zip(accepts.rows.iter().zip(&requests.rows).zip(&looped.rows))
        .map(|(w, ((a, q), l))| {
            let facts = [
                a.text(&accepts, "share"),
                a.text(&accepts, "fds open"),
                a.text(&accepts, "fd limit"),
                q.text(&requests, "req/conn"),
                l.text(&looped, "max iteration"),
            ];
            (w.alive, worker_cells(w, secs, facts))
        })
        .collect()
}

/// One worker's row: its own rates and `facts` (share, fds open, fd limit, requests
/// per connection, longest loop, from [`sections`]).
fn worker_cells(w: &WorkerReport, secs: f64, facts: [&str; 5]) -> Vec<String> {
    let [share, fds_open, fd_limit, per_conn, max_loop] = facts;
    let errs: u64 = ["EMFILE", "ENFILE"]
        .iter()
        .map(|k| w.accept_errors.get(*k).copied().unwrap_or(0))
        .sum();
    vec![
        format!("{}{}", w.pid, if w.alive { "" } else { "+" }),
        format!("{}/{}", w.slot, w.generation),
        per_s(w.accepts, secs),
        share.to_string(),
        errs.to_string(),
        w.requests
            .count
            .map(|n| per_s(n, secs))
            .unwrap_or_else(|| "-".into()),
        per_conn.to_string(),
        format!("{:.0}%", w.event_loop.busy_share * 100.0),
        pct_of(w.cpu_s, secs),
        pct_of(w.run_delay_s, secs),
        format!("{fds_open}/{fd_limit}"),
        w.syscalls
            .get("accept4")
            .filter(|s| s.timed > 0)
            .map(|s| fmt_ns(s.p99_ns))
            .unwrap_or_else(|| "-".into()),
        max_loop.to_string(),
        w.writes
            .get("access_log")
            .and_then(|x| x.per_request)
            .map(|v| format!("{v:.2}"))
            .unwrap_or_else(|| "-".into()),
    ]
}

/// Column headers of the worker table.
pub const COLUMNS: [&str; 14] = [
    "WORKER",
    "SLOT/GEN",
    "ACCEPT/s",
    "SHARE",
    "E[MN]FILE",
    "REQ/s",
    "REQ/CONN",
    "BUSY",
    "CPU",
    "WAIT",
    "FDS/LIMIT",
    "ACCEPT4 p99",
    "MAX LOOP",
    "LOG W/REQ",
];

/// Width of each of [`COLUMNS`], characters.
const COLUMN_WIDTHS: [u16; 14] = [9, 8, 9, 6, 9, 9, 8, 5, 5, 5, 11, 11, 9, 9];

/// Which columns go first when the terminal is too narrow for all: least telling first.
const DROP_ORDER: [usize; 13] = [1, 13, 11, 12, 6, 10, 9, 8, 7, 4, 3, 5, 2];

/// Indexes of the [`COLUMNS`] that fit in `width` characters (one space between
/// columns), in table order: a narrow terminal loses whole columns rather than showing
/// cut-off numbers.
pub fn visible_columns(width: u16) -> Vec<usize> {
    let mut shown: Vec<usize> = (0..COLUMNS.len()).collect();
    let need = |cols: &[usize]| -> u32 { cols.iter().map(|&c| COLUMN_WIDTHS[c] as u32 + 1).sum() };
    for drop in DROP_ORDER {
        if need(&shown) <= width as u32 {
            break;
        }
        shown.retain(|&c| c != drop);
    }
    shown
}

/// Worker events kept on screen.
pub const RECENT_EVENTS: usize = 4;

/// What the live view's header says under `--detail sampled`: BUSY, LOOP and log
/// writes per request come from the detail windows only ("" with `--detail full`).
fn sampled_note(detail: Option<&crate::model::sampling::DetailReport>) -> String {
    match detail {
        None => String::new(),
        Some(d) if d.in_window_s <= 0.0 => {
            "  detail SAMPLED: no window in this interval (BUSY, MAX LOOP, LOG W/REQ unknown)".into()
        }
        Some(d) => format!(
            "  detail SAMPLED: BUSY, MAX LOOP, LOG W/REQ from {:.1} s of windows ({:.0}% of the interval)",
            d.in_window_s,
            d.coverage * 100.0
        ),
    }
}

/// Draws the view of `last` (None: waiting for the first interval) with the `recent`
/// worker events, newest first: the totals, the worker table, the listening sockets,
/// nginx's client connections, the verdicts and the events, top to bottom.
///
/// Every string shown (the master's title, what the report holds, the events) has its
/// control characters escaped first ([`crate::safe`]).
pub fn draw(f: &mut Frame, title: &Title, last: Option<&Report>, recent: &[String]) {
    let last = last.map(crate::safe::sanitized);
    let last = last.as_ref();
    let area = f.area();
    let nverdicts = last.map(|r| r.verdicts.len()).unwrap_or(0) as u16;
    let nlisten = last.map(|r| r.listen.len()).unwrap_or(0) as u16;
    let connections = connection_lines(last);
    let chunks = Layout::vertical([
        Constraint::Length(3),
        Constraint::Min(4),
        // Each socket's line, and the namespace's counters once.
        Constraint::Length((nlisten.clamp(1, 4) + 1) * 2 + 1),
        Constraint::Length(connections.len() as u16 + 1),
        Constraint::Length((nverdicts * 2).clamp(1, 8) + 2),
        Constraint::Length(5),
    ])
    .split(area);
    f.render_widget(header(title, last), chunks[0]);
    f.render_widget(workers_table(last, area.width), chunks[1]);
    let boxed = |lines, name| {
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::new().borders(Borders::TOP).title(name))
    };
    f.render_widget(boxed(listen_lines(last), " listen "), chunks[2]);
    // One row per line (cut at the right edge, not wrapped): the box's height is the
    // line count, and each line's count comes first.
    f.render_widget(
        Paragraph::new(connections)
            .block(Block::new().borders(Borders::TOP).title(" connections ")),
        chunks[3],
    );
    f.render_widget(boxed(verdict_lines(last), " verdicts "), chunks[4]);
    let events: Vec<Line> = recent
        .iter()
        .map(|e| Line::from(crate::safe::line(e).into_owned()))
        .collect();
    f.render_widget(
        Paragraph::new(events).block(Block::new().borders(Borders::TOP).title(" events ")),
        chunks[5],
    );
}

/// The top two lines: the master, and the interval's totals (or that the view waits
/// for the first interval). A narrow terminal wraps the totals rather than cutting
/// off the drops.
fn header<'a>(title: &Title, last: Option<&Report>) -> Paragraph<'a> {
    let head = match last {
        Some(r) => totals_line(r),
        None => format!("waiting for the first interval ({} s)...", title.interval_s),
    };
    Paragraph::new(vec![
        Line::from(vec![
            Span::styled("nginx-probe ", Style::new().bold()),
            Span::raw(format!(
                " q: quit   master {} `{}`",
                title.master_pid,
                crate::safe::line(&title.master_title)
            )),
        ]),
        Line::from(head),
    ])
    .wrap(Wrap { trim: false })
}

/// The interval's totals: time, length, live workers, accepts and requests per second,
/// what was not accounted ([`sections::drops`]) and the sampling note. The accepts are
/// the listed workers' (the reports add the merged exited workers' too).
fn totals_line(r: &Report) -> String {
    let accepts = r
        .workers
        .iter()
        .map(|w| w.accepts)
        .fold(0u64, u64::saturating_add);
    let requests = match r.requests.count {
        Some(n) => format!(
            "{}/s ({})",
            per_s(n, r.duration_s),
            r.requests.source.name()
        ),
        None => "unknown".to_string(),
    };
    let dropped = sections::drops(r);
    format!(
        "{} UTC  {:.1}s interval  workers {}  accepts {}/s  requests {}  drops: {}{}",
        crate::render::text::clock(r.time_unix_s),
        r.duration_s,
        r.workers.iter().filter(|w| w.alive).count(),
        per_s(accepts, r.duration_s),
        requests,
        if dropped.is_empty() {
            "none".to_string()
        } else {
            dropped.join(" ")
        },
        sampled_note(r.detail.as_ref())
    )
}

/// The worker table ([`worker_rows`]) in the columns that fit `width`; exited workers
/// dimmed.
fn workers_table<'a>(last: Option<&Report>, width: u16) -> Table<'a> {
    let secs = last.map(|r| r.duration_s).unwrap_or(0.0);
    let shown = visible_columns(width);
    let rows: Vec<Row> = last
        .map(|r| worker_rows(r, secs))
        .unwrap_or_default()
        .into_iter()
        .map(|(alive, cells)| {
            let row = Row::new(shown.iter().map(|&c| cells[c].clone()));
            if alive {
                row
            } else {
                row.style(Style::new().add_modifier(Modifier::DIM))
            }
        })
        .collect();
    let widths: Vec<Constraint> = shown
        .iter()
        .map(|&c| Constraint::Length(COLUMN_WIDTHS[c]))
        .collect();
    Table::new(rows, widths)
        .header(Row::new(shown.iter().map(|&c| COLUMNS[c])).style(Style::new().bold().reversed()))
        .block(Block::new().borders(Borders::TOP).title(" workers "))
}

/// One line per listening socket ([`sections::listen`]), red on an alert (the queue
/// overflowed, or nginx's socket dropped connections). Unlike the reports, the live
/// view shows the drops at nginx's own socket ([`sections::listen_socket_drops`]).
fn listen_lines<'a>(last: Option<&Report>) -> Vec<Line<'a>> {
    let Some(r) = last.filter(|r| !r.listen.is_empty()) else {
        return vec![Line::from("-")];
    };
    let t = sections::listen(r);
    let mut lines: Vec<Line> = t
        .rows
        .iter()
        .zip(&r.listen)
        .map(|(row, l)| {
            let c = |label: &str| row.text(&t, label);
            let socket = sections::listen_socket_drops(l);
            // Short enough for 80 columns: the socket's drops must stay visible.
            let line = Line::from(format!(
                "{:<21} backlog {} queue {} (max {}){}",
                c("address"),
                c("backlog"),
                c("queue now"),
                c("queue max"),
                socket
                    .as_ref()
                    .map(|n| format!(" drops at nginx's socket {}", n.text))
                    .unwrap_or_default()
            ));
            if socket.is_some_and(|n| n.alert) {
                line.fg(Color::Red)
            } else {
                line
            }
        })
        .collect();
    // The namespace's counters, once and said as the namespace's (TcpExt).
    if let (Some(cell), Some(n)) = (sections::listen_namespace(r), &r.listen_namespace) {
        let line = Line::from(format!(
            "whole network namespace (TcpExt, not per socket): listen overflows {} drops {}",
            n.overflows, n.drops
        ));
        lines.push(if cell.alert {
            line.fg(Color::Red)
        } else {
            line
        });
    }
    lines
}

/// Lines of nginx's client connections in the interval shown at most
/// ([`connection_lines`]); the rest is counted in a last line.
const CONNECTION_LINES_SHOWN: usize = 6;

/// The interval's CONNECTIONS lines of the text report
/// ([`super::text_connections::connections_lines`]: who closed first, resets, idle
/// time before nginx's closes, listeners closed), at most [`CONNECTION_LINES_SHOWN`];
/// or "not counted" and why; `-` before the first interval or when neither.
fn connection_lines<'a>(last: Option<&Report>) -> Vec<Line<'a>> {
    match last.and_then(super::text_connections::connections_lines) {
        Some(Ok((_, lines))) => {
            let mut shown: Vec<Line> = lines
                .iter()
                .take(CONNECTION_LINES_SHOWN)
                .map(|l| Line::from(l.clone()))
                .collect();
            if lines.len() > CONNECTION_LINES_SHOWN {
                shown.push(Line::from(format!(
                    "... {} more in the report",
                    lines.len() - CONNECTION_LINES_SHOWN
                )));
            }
            shown
        }
        Some(Err(why)) => vec![Line::from(format!("not counted: {why}"))],
        None => vec![Line::from("-")],
    }
}

/// Two lines per verdict: severity (critical red, warning yellow), id and the
/// directives, then the advice; `none` when none fired, `-` before the first interval.
fn verdict_lines<'a>(last: Option<&Report>) -> Vec<Line<'a>> {
    match last {
        Some(r) if !r.verdicts.is_empty() => r
            .verdicts
            .iter()
            .flat_map(|v| {
                let sev = sections::severity_name(v.severity);
                let color = if sev == "critical" {
                    Color::Red
                } else {
                    Color::Yellow
                };
                [
                    Line::from(vec![
                        Span::styled(format!("[{sev}] {}", v.id), Style::new().fg(color).bold()),
                        Span::raw(format!("  ({})", v.directives.join(", "))),
                    ]),
                    Line::from(format!("  {}", v.advice)),
                ]
            })
            .collect(),
        Some(_) => vec![Line::from("none")],
        None => vec![Line::from("-")],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::recording::Recording;
    use ratatui::{backend::TestBackend, Terminal};

    fn report() -> Report {
        let w = |pid: u32, slot: u32, accepts: u64, share: f64| {
            serde_json::json!({
                "pid": pid, "slot": slot, "generation": 1, "nspid": [pid], "alive": true,
                "accepts": accepts, "accept_share": share,
                "accept_errors": {"EMFILE": 3, "ENFILE": 0},
                "requests": {"count": accepts * 2, "source": "uprobe", "per_s": 1.0,
                             "per_connection": 2.0, "syscalls_per_request": {}},
                "fds": {"open": 40, "peak": 50, "limit": 64},
                "event_loop": {"iterations": 1, "busy_ns": 1, "busy_share": 0.25,
                               "p99_iteration_ns": 1, "max_iteration_ns": 1500},
                "cpu_s": 0.5, "run_delay_s": 0.2, "accepted_then_closed": 0, "writes": {}, "syscalls": {}
            })
        };
        let line = serde_json::json!({
            "schema": 1, "verdicts": [], "type": "interval", "time_unix_s": 3600.0,
            "master_pid": 9, "master_nspid": [9], "duration_s": 2.0,
            "workers": [w(101, 0, 300, 0.75), w(102, 1, 100, 0.25)],
            "requests": {"source": "stub_status", "count": 800, "per_s": 400.0,
                         "per_connection": 2.0},
            "listen": [{"addr": "127.0.0.1:80", "backlog": 511, "queue_now": 0,
                        "queue_max": 7, "overflows": 0, "drops": 0}],
            "logs": {}, "drops": {}, "traced_syscalls": [], "missing_tracepoints": [],
            "events": [{"t_s": 1.5, "event": "worker_started", "pid": 102}]
        })
        .to_string();
        Recording::parse("t", &(line + "\n")).unwrap().intervals[0].clone()
    }

    fn screen(last: Option<&Report>) -> String {
        screen_of(last, 140)
    }

    fn screen_of(last: Option<&Report>, width: u16) -> String {
        screen_titled(last, width, "nginx: master process")
    }

    fn screen_titled(last: Option<&Report>, width: u16, master_title: &str) -> String {
        let mut t = Terminal::new(TestBackend::new(width, 30)).unwrap();
        let title = Title {
            master_pid: 9,
            master_title: master_title.into(),
            interval_s: 2.0,
        };
        let recent: Vec<String> = last
            .map(|r| {
                r.events
                    .iter()
                    .map(|e| event_line(e, r.master_pid, r.master.is_some()))
                    .collect()
            })
            .unwrap_or_default();
        t.draw(|f| draw(f, &title, last, &recent)).unwrap();
        let buf = t.backend().buffer().clone();
        (0..buf.area.height)
            .map(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol().to_string())
                    .collect::<String>()
                    + "\n"
            })
            .collect()
    }

    #[test]
    fn workers_are_rows_with_rates_over_the_interval() {
        let r = report();
        assert_eq!(
            worker_rows(&r, 2.0)[0].1,
            [
                "101", "0/1", "150.0", "75.0%", "3", "300.0", "2.0", "25%", "25%", "10%", "40/64",
                "-", "1.5us", "-"
            ]
        );
        let s = screen(Some(&r));
        assert!(s.contains("master 9 `nginx: master process`"), "{s}");
        assert!(s.contains("01:00:00 UTC  2.0s interval  workers 2  accepts 200.0/s  requests 400.0/s (stub_status)  drops: none"), "{s}");
        let row = s.lines().find(|l| l.starts_with("102")).unwrap();
        assert!(
            row.contains("1/1") && row.contains("50.0") && row.contains("25.0%"),
            "{row}"
        );
        assert!(s.contains("127.0.0.1:80"), "{s}");
        assert!(s.contains("+1.5s worker 102 started"), "{s}");
        assert!(s.contains("none"), "no verdicts: {s}");
    }

    #[test]
    fn sampled_detail_is_marked_in_the_header() {
        let mut r = report();
        let full = screen_of(Some(&r), 200);
        assert!(!full.contains("SAMPLED"), "{full}");
        // 0.5 s of windows in a 2 s interval.
        r.detail = Some(crate::model::sampling::DetailReport::new(
            &crate::model::sampling::Schedule::new(1.0, 20.0).unwrap(),
            &crate::model::sampling::Coverage {
                windows: 1,
                open_now: false,
                open_s: 0.5,
                requests: Some(100),
            },
            2.0,
            Some(800),
            (0, 0, 24),
        ));
        let s = screen_of(Some(&r), 200);
        assert!(
            s.contains("detail SAMPLED: BUSY, MAX LOOP, LOG W/REQ from 0.5 s of windows (25% of the interval)"),
            "{s}"
        );
        if let Some(d) = r.detail.as_mut() {
            d.in_window_s = 0.0;
            d.coverage = 0.0;
        }
        let s = screen_of(Some(&r), 200);
        assert!(s.contains("no window in this interval"), "{s}");
    }

    #[test]
    fn a_narrow_terminal_drops_whole_columns() {
        assert_eq!(visible_columns(200).len(), COLUMNS.len());
        let at80: Vec<&str> = visible_columns(80).iter().map(|&c| COLUMNS[c]).collect();
        assert_eq!(
            at80,
            [
                "WORKER",
                "ACCEPT/s",
                "SHARE",
                "E[MN]FILE",
                "REQ/s",
                "BUSY",
                "CPU",
                "WAIT",
                "FDS/LIMIT"
            ]
        );
        assert_eq!(visible_columns(20), [0, 2]);
        assert_eq!(visible_columns(15), [0]);
    }

    #[test]
    fn at_80_columns_totals_and_listen_counts_stay_whole() {
        let s = screen_of(Some(&report()), 80);
        let flat: String = s.lines().map(str::trim_end).collect::<Vec<_>>().join(" ");
        assert!(flat.contains("drops: none"), "{s}");
        assert!(flat.contains("q: quit"), "{s}");
        assert!(flat.contains("backlog 511 queue 0 (max 7)"), "{s}");
        // The namespace's counters once, as the namespace's, not on the socket's line.
        assert!(!flat.contains("(max 7) overflows"), "{s}");
        assert!(
            flat.contains(
                "whole network namespace (TcpExt, not per socket): listen overflows 0 drops 0"
            ),
            "{s}"
        );
    }

    #[test]
    fn connections_are_the_reports_lines_or_why_they_were_not_counted() {
        let mut r = report();
        assert!(
            screen(Some(&r)).contains("connections ─"),
            "the box is always drawn"
        );
        r.connections = Some(crate::model::connections::sample_report());
        let s = screen(Some(&r));
        assert!(
            s.contains("established 14  closed first by nginx 10  by the client 3  by a reset 1"),
            "{s}"
        );
        assert!(
            s.contains("nginx closes connections 2.0 s after their last data"),
            "{s}"
        );
        r.connections = None;
        r.connections_not_traced = Some("--no-lifecycle".into());
        assert!(screen(Some(&r)).contains("not counted: --no-lifecycle"));
    }

    #[test]
    fn escape_sequences_in_titles_and_reports_are_shown_escaped() {
        let mut r = report();
        r.listen[0].addr = "127.0.0.1:80\u{1b}[2J".into();
        // A hostile event name in a recording reads as Unknown: it never reaches the screen.
        r.events[0].event = crate::model::EventKind::Unknown;
        let s = screen_titled(
            Some(&r),
            160,
            "nginx: master process -p /tmp/\u{1b}]0;title\u{7}/",
        );
        assert!(!s.contains('\u{1b}') && !s.contains('\u{7}'), "{s}");
        assert!(s.contains("-p /tmp/\\x1b]0;title\\x07/"), "{s}");
        assert!(s.contains("127.0.0.1:80\\x1b[2J"), "{s}");
        assert!(s.contains("unknown event"), "{s}");
    }

    #[test]
    fn before_the_first_interval_it_says_it_is_waiting() {
        let s = screen(None);
        assert!(s.contains("waiting for the first interval (2 s)"), "{s}");
        assert!(s.contains("WORKER"), "{s}");
    }

    #[test]
    fn q_esc_and_ctrl_c_quit() {
        let key = |c, m| Event::Key(KeyEvent::new(c, m));
        assert_eq!(
            classify(&key(KeyCode::Char('q'), KeyModifiers::NONE)),
            Input::Quit
        );
        assert_eq!(
            classify(&key(KeyCode::Esc, KeyModifiers::NONE)),
            Input::Quit
        );
        assert_eq!(
            classify(&key(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Input::Quit
        );
        assert_eq!(
            classify(&key(KeyCode::Char('c'), KeyModifiers::NONE)),
            Input::Ignore
        );
        assert_eq!(classify(&Event::Resize(80, 24)), Input::Redraw);
    }
}
