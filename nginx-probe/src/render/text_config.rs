//! The CONFIG section of the text report: nginx's effective values with the file and
//! line each comes from (`default` marked), files changed after the last load, and
//! the problems met reading them. In the summary only (the configuration is read at
//! attach). The report was sanitized before it gets here (`render_text`).

use std::fmt::Write;

use crate::model::{
    config::{ConfigReport, ConfigValue, ListenValue},
    Report, ReportKind,
};

/// Characters a packed line of values grows to before it wraps.
const WIDTH: usize = 100;
/// Problem lines printed (the JSON has them all).
const MAX_ERRORS_SHOWN: usize = 5;
/// Lines of one list (listens, overrides, logs) printed.
const MAX_ROWS: usize = 12;

/// `path:line` with the main file's directory cut, `default` as is, and the stale mark.
fn at(cfg: &ConfigReport, at: &str, not_loaded: bool) -> String {
    let dir = cfg.main_file.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
    let short = at
        .strip_prefix(dir)
        .and_then(|s| s.strip_prefix('/'))
        .filter(|_| !dir.is_empty())
        .unwrap_or(at);
    if not_loaded {
        format!("{short}, NOT LOADED?")
    } else {
        short.to_string()
    }
}

fn cell(cfg: &ConfigReport, v: &ConfigValue) -> String {
    let value = if v.value.is_empty() { "\"\"" } else { &v.value };
    // A default while part of the configuration was not read: not vouched for.
    let unread = if v.unread_may_set && v.is_default() {
        "?"
    } else {
        ""
    };
    format!(
        "{} {value} ({}{unread})",
        v.directive,
        at(cfg, &v.at, v.not_loaded)
    )
}

/// `label: a, b, c` wrapped at [`WIDTH`].
fn packed(out: &mut String, label: &str, cells: &[String]) {
    if cells.is_empty() {
        return;
    }
    let mut line = format!("  {label}:");
    for c in cells {
        if line.len() + c.len() + 2 > WIDTH && !line.ends_with(':') {
            let _ = writeln!(out, "{line}");
            line = " ".repeat(label.len() + 3);
        }
        line.push(' ');
        line.push_str(c);
    }
    let _ = writeln!(out, "{line}");
}

fn rows(out: &mut String, rows: Vec<String>) {
    let n = rows.len();
    for r in rows.into_iter().take(MAX_ROWS) {
        let _ = writeln!(out, "  {r}");
    }
    if n > MAX_ROWS {
        let _ = writeln!(out, "  ... {} more (JSON `config`)", n - MAX_ROWS);
    }
}

/// Appends the CONFIG section of a summary report that has a configuration.
pub fn config_section(out: &mut String, r: &Report) {
    let Some(cfg) = &r.config else { return };
    if r.kind != ReportKind::Summary {
        return;
    }
    config_lines(out, cfg);
}

/// The CONFIG section of `cfg`.
fn config_lines(out: &mut String, cfg: &ConfigReport) {
    title_and_problems(out, cfg);
    for scope in ["main", "events", "http"] {
        let cells: Vec<String> = cfg
            .values
            .iter()
            .filter(|v| v.scope == scope)
            .map(|v| cell(cfg, v))
            .collect();
        packed(out, scope, &cells);
    }
    let errs: Vec<String> = cfg.error_logs.iter().map(|v| cell(cfg, v)).collect();
    packed(out, "main", &errs);
    servers_and_locations(out, cfg);
    rows(
        out,
        cfg.listens.iter().map(|l| listen_row(cfg, l)).collect(),
    );
    rows(
        out,
        cfg.access_logs
            .iter()
            .map(|a| {
                format!(
                    "{}: access_log {} ({})",
                    a.scope,
                    a.spec(" unbuffered"),
                    at(cfg, &a.at, a.not_loaded)
                )
            })
            .collect(),
    );
    upstreams(out, cfg);
}

/// The title (main file, how it was found, files read, nginx's version), the files
/// changed after the last load, and the first problems met reading them.
fn title_and_problems(out: &mut String, cfg: &ConfigReport) {
    let _ = writeln!(
        out,
        "\nCONFIG {} (from {}; {} file{} read under {}{})",
        if cfg.main_file.is_empty() {
            "?"
        } else {
            &cfg.main_file
        },
        cfg.found_by,
        cfg.files.len(),
        if cfg.files.len() == 1 { "" } else { "s" },
        cfg.root,
        cfg.nginx_version
            .as_ref()
            .map(|v| format!("; nginx {v}"))
            .unwrap_or_default()
    );
    // A file included from two places is listed once.
    let mut seen = std::collections::BTreeSet::new();
    for f in cfg
        .files
        .iter()
        .filter(|f| f.changed_since_load && seen.insert(f.path.as_str()))
    {
        let _ = writeln!(
            out,
            "  ! {} changed after the last load: its values are on disk, possibly not loaded (NOT LOADED?)",
            f.path
        );
    }
    for f in cfg.files.iter().filter(|f| f.changed_since_read) {
        let _ = writeln!(
            out,
            "  ! {} changed on disk since it was read (modified, replaced or removed): the values below are as read, not as the file is now",
            f.path
        );
    }
    for e in cfg.errors.iter().take(MAX_ERRORS_SHOWN) {
        let _ = writeln!(out, "  ! {e}");
    }
    if cfg.values.iter().any(|v| v.unread_may_set) {
        let _ = writeln!(
            out,
            "  ! part of the configuration was not read (above): it may set or change any value below, so a `default?` may not be nginx's"
        );
    }
    if cfg.errors.len() > MAX_ERRORS_SHOWN {
        let _ = writeln!(
            out,
            "  ! ... {} more problems (JSON `config.errors`)",
            cfg.errors.len() - MAX_ERRORS_SHOWN
        );
    }
    if let Some(why) = &cfg.unknown {
        let _ = writeln!(
            out,
            "  every setting UNKNOWN (nginx's defaults are not assumed): {why}"
        );
    }
}

/// Servers and locations: explicit settings, then effective proxy settings, one
/// packed line per scope in the order first met; at most [`MAX_ROWS`] scopes.
fn servers_and_locations(out: &mut String, cfg: &ConfigReport) {
    let mut scoped: Vec<(&str, Vec<String>)> = Vec::new();
    for v in cfg.values.iter().filter(|v| {
        !matches!(v.scope.as_str(), "main" | "events" | "http") && !v.scope.starts_with("upstream ")
    }) {
        match scoped.iter_mut().find(|(s, _)| *s == v.scope) {
            Some((_, c)) => c.push(cell(cfg, v)),
            None => scoped.push((&v.scope, vec![cell(cfg, v)])),
        }
    }
    for (s, c) in scoped.iter().take(MAX_ROWS) {
        packed(out, s, c);
    }
    if scoped.len() > MAX_ROWS {
        let _ = writeln!(
            out,
            "  ... {} more servers/locations (JSON `config`)",
            scoped.len() - MAX_ROWS
        );
    }
}

/// `server: listen ADDRESS backlog=N reuseport ssl ... (file:line)`; a QUIC listen is
/// UDP, with no accept queue: no backlog said.
fn listen_row(cfg: &ConfigReport, l: &ListenValue) -> String {
    let mut opts = Vec::new();
    if !l.quic {
        opts.push(format!(
            "backlog={}",
            l.backlog.clone().unwrap_or_else(|| "511 (default)".into())
        ));
    }
    for (on, name) in [
        (l.reuseport, "reuseport"),
        (l.ssl, "ssl"),
        (l.http2, "http2"),
        (l.quic, "quic"),
    ] {
        if on {
            opts.push(name.to_string());
        }
    }
    format!(
        "{}: listen {} {} ({})",
        l.scope,
        l.address,
        opts.join(" "),
        at(cfg, &l.at, l.not_loaded)
    )
}

/// One packed line per upstream block: its servers (as written, with max_fails and
/// fail_timeout in force) and the values set in it.
fn upstreams(out: &mut String, cfg: &ConfigReport) {
    for u in cfg.upstreams.iter().take(MAX_ROWS) {
        let scope = format!("upstream {}", u.name);
        let mut cells: Vec<String> = u
            .servers
            .iter()
            .take(MAX_ROWS)
            .map(|s| {
                // As written, the defaults marked (trial 21).
                let (line, limits) = s.quoted();
                format!("{line} {limits} ({})", at(cfg, &s.at, false))
            })
            .collect();
        cells.extend(
            cfg.values
                .iter()
                .filter(|v| v.scope == scope)
                .map(|v| cell(cfg, v)),
        );
        packed(out, &scope, &cells);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unread: the reason, what -g sets, and no default shown as in force.
    #[test]
    fn an_unread_configuration_says_every_setting_is_unknown() {
        let cfg = ConfigReport {
            found_by: "unknown".into(),
            root: "/proc/7/root".into(),
            unknown: Some("the master's title does not say where its configuration is: x".into()),
            values: vec![ConfigValue {
                directive: "worker_processes".into(),
                scope: "main".into(),
                value: "3".into(),
                at: "-g".into(),
                not_loaded: false,
                unread_may_set: false,
            }],
            ..Default::default()
        };
        let mut out = String::new();
        config_lines(&mut out, &cfg);
        assert_eq!(
            out,
            "\nCONFIG ? (from unknown; 0 files read under /proc/7/root)\n  every setting UNKNOWN (nginx's defaults are not assumed): the master's title does not say where its configuration is: x\n  main: worker_processes 3 (-g)\n"
        );
    }

    /// Trial 14: `listen 127.0.0.1:19010 quic reuseport` beside `listen ... ssl` on the
    /// same port: the UDP one has no backlog, the TCP one nginx's default.
    #[test]
    fn a_quic_listen_has_no_backlog() {
        let cfg = ConfigReport::default();
        let mut l = ListenValue {
            scope: "server".into(),
            address: "127.0.0.1:19010".into(),
            quic: true,
            reuseport: true,
            at: "/e/n.conf:9".into(),
            ..Default::default()
        };
        assert_eq!(
            listen_row(&cfg, &l),
            "server: listen 127.0.0.1:19010 reuseport quic (/e/n.conf:9)"
        );
        (l.quic, l.reuseport, l.ssl) = (false, false, true);
        assert_eq!(
            listen_row(&cfg, &l),
            "server: listen 127.0.0.1:19010 backlog=511 (default) ssl (/e/n.conf:9)"
        );
    }
}
