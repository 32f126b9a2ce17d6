//! The configuration nginx runs, as effective values: each directive the verdicts and
//! the CONFIG section care about, with the file and line it comes from or `default`
//! (nginx's documented default where the directive is absent). Pure: built by
//! [`evaluate`] from a directive tree that `collect::config` read from the master's
//! root. Every string in it comes from files others write: renderers sanitize it.

use serde::{Deserialize, Serialize};

/// `at` of a value nginx would use because no directive sets it.
pub const DEFAULT: &str = "default";
/// `at` of a value set by the master's `-g` (main-context directives nginx applies on
/// top of the file).
pub const FROM_G: &str = "-g";
/// [`Directive::file`] of a directive from the master's `-g`.
pub const G_FILE: usize = usize::MAX;

pub use super::config_tree::Directive;

/// One file read (the main file and every include).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ConfigFile {
    /// Path inside the master's root (as nginx opens it).
    pub path: String,
    /// Size, bytes (fstat).
    pub bytes: u64,
    /// Last modification, seconds since the Unix epoch (fstat); None when unknown.
    pub mtime_unix_s: Option<f64>,
    /// Modified after the last load (the master's start or its newest worker's start,
    /// `/proc/<pid>/stat` starttime): values from it are on disk, possibly not loaded.
    pub changed_since_load: bool,
    /// Modified, replaced or removed on disk since it was read (its mtime looked at
    /// again every 2 s): the values shown are as read, not as the file is now.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub changed_since_read: bool,
}

/// One effective value.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ConfigValue {
    /// Directive name (`keepalive_timeout`).
    pub directive: String,
    /// Where it applies: `main`, `events`, `http`, `server <name>`, `server <name>
    /// location <uri>`, `upstream <name>`.
    pub scope: String,
    /// Its arguments joined with spaces (for a default: nginx's documented default).
    pub value: String,
    /// `file:line` of the directive, [`FROM_G`] (the master's `-g`), or [`DEFAULT`].
    pub at: String,
    /// The file was modified after the last load: the value is on disk, possibly not
    /// loaded.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_loaded: bool,
    /// Some configuration file was not read (over the size limits, past an include
    /// glob's match limit): it may set this directive here, so the value shown (a
    /// default above all) may not be nginx's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unread_may_set: bool,
}

impl ConfigValue {
    /// `value (at)`, with `on disk, possibly not loaded` when so, and `a file not read
    /// may set it` when so: for evidence.
    pub fn quoted(&self) -> String {
        let stale = match (self.not_loaded, self.unread_may_set) {
            (true, true) => ", on disk, possibly not loaded; a config file not read may set it",
            (true, false) => ", on disk, possibly not loaded",
            (false, true) => "; a config file not read may set it",
            (false, false) => "",
        };
        // An empty value (`proxy_set_header Connection "";`) as written.
        let value = if self.value.is_empty() {
            "\"\""
        } else {
            &self.value
        };
        format!("{value} ({}{stale})", self.at)
    }

    /// Whether no directive sets it.
    pub fn is_default(&self) -> bool {
        self.at == DEFAULT
    }

    /// A loaded value as the evaluator writes it (unit tests).
    #[cfg(test)]
    pub(crate) fn of(directive: &str, scope: &str, value: &str, at: &str) -> ConfigValue {
        ConfigValue {
            directive: directive.into(),
            scope: scope.into(),
            value: value.into(),
            at: at.into(),
            not_loaded: false,
            unread_may_set: false,
        }
    }
}

/// One `listen` of a server.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ListenValue {
    /// `server <name>`.
    pub scope: String,
    /// Address and port as written (`*:80` for the default).
    pub address: String,
    /// `backlog=`; None: nginx's default (511 on Linux).
    pub backlog: Option<String>,
    /// `reuseport`: one listening socket per worker.
    pub reuseport: bool,
    /// `ssl`.
    pub ssl: bool,
    /// `http2`.
    pub http2: bool,
    /// `quic` (HTTP/3, UDP).
    pub quic: bool,
    /// `file:line` or [`DEFAULT`].
    pub at: String,
    /// The file changed after the load: the value may not be what nginx runs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_loaded: bool,
}

/// One `access_log`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct AccessLogValue {
    /// Where it applies (`http`, `server <name>`, ...).
    pub scope: String,
    /// Path as written, or `off`.
    pub path: String,
    /// Format name (`combined` when not given; empty for `access_log off`).
    pub format: String,
    /// `buffer=` size; None: every request is written at once.
    pub buffer: Option<String>,
    /// `flush=` time; None: no timed flush.
    pub flush: Option<String>,
    /// `if=` condition: requests for which it is empty or "0" are not logged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    /// `file:line` or [`DEFAULT`].
    pub at: String,
    /// The file changed after the load: the value may not be what nginx runs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_loaded: bool,
}

impl AccessLogValue {
    /// Whether nginx accepts `buffer=` on this log: not `off`, not `syslog:`, and no
    /// variable in its path (nginx refuses it: "buffered logs cannot have variables in
    /// name", "logs to syslog cannot be buffered").
    pub fn bufferable(&self) -> bool {
        self.path != "off" && !self.path.contains('$') && !self.path.starts_with("syslog:")
    }

    /// The directive's arguments as they read: `off`, or `path format[ buffer=B
    /// flush=F]` with `absent` where no `buffer=` is set.
    pub fn spec(&self, absent: &str) -> String {
        if self.path == "off" {
            return "off".into();
        }
        format!("{} {}{}", self.path, self.format, self.buffer_flush(absent))
    }

    /// ` buffer=B flush=F` as configured; `absent` when no `buffer=` is set (nothing
    /// for `access_log off`).
    pub fn buffer_flush(&self, absent: &str) -> String {
        let buffer = match (&self.buffer, self.path.as_str()) {
            (_, "off") => String::new(),
            (Some(b), _) => format!(" buffer={b}"),
            (None, _) => absent.to_string(),
        };
        let flush = self
            .flush
            .as_ref()
            .map(|f| format!(" flush={f}"))
            .unwrap_or_default();
        buffer + &flush
    }
}

/// One `server` line of an upstream block.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct UpstreamServer {
    /// Address as written.
    pub address: String,
    /// `max_fails=` (default 1).
    pub max_fails: String,
    /// `fail_timeout=` (default 10s).
    pub fail_timeout: String,
    /// The other parameters as written (`weight=2 backup`).
    pub other: String,
    /// `file:line`.
    pub at: String,
    /// The line's arguments as written (`127.0.0.1:8080 weight=2`), for quoting; empty
    /// in recordings made before it was kept.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub as_written: String,
}

/// One `upstream` block; its `keepalive`, `keepalive_timeout` and `keepalive_requests`
/// are in [`ConfigReport::values`] with scope `upstream <name>`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct UpstreamValue {
    /// The upstream's name.
    pub name: String,
    /// Its `server` lines.
    pub servers: Vec<UpstreamServer>,
    /// `file:line` of the block.
    pub at: String,
}

/// Overrides [`ConfigReport::with_overrides`] quotes after the http-level value, at most.
pub const MAX_OVERRIDES_QUOTED: usize = 8;

/// Up to [`MAX_OVERRIDES_QUOTED`] parts joined with `; `, then `N more`; None when
/// there are none.
pub fn bounded_list(parts: Vec<String>) -> Option<String> {
    let n = parts.len();
    let mut kept: Vec<String> = parts.into_iter().take(MAX_OVERRIDES_QUOTED).collect();
    if n > MAX_OVERRIDES_QUOTED {
        kept.push(format!("{} more", n - MAX_OVERRIDES_QUOTED));
    }
    (!kept.is_empty()).then(|| kept.join("; "))
}

/// The configuration as read at attach (or after the last reload seen).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ConfigReport {
    /// The main file, inside the master's root.
    pub main_file: String,
    /// How it was found: `-c` (the master's command line), `--conf-path` (the
    /// binary's configure arguments), `default` (nginx's compiled-in default), or
    /// `unknown` (the master's title does not say: `main_file` is empty, `unknown`
    /// says why).
    pub found_by: String,
    /// Why every setting is unknown: the main file was not found or not read. Then no
    /// value is a default: `values` and the lists hold only what `-g` sets. None when
    /// the main file was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
    /// The master's `-g` as its title gives it (directives nginx applies on top of the
    /// main file; their values are at [`FROM_G`]). None without `-g`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub globals: Option<String>,
    /// nginx's prefix (`-p`, `--prefix=` of the binary, or `/usr/local/nginx/`).
    pub prefix: String,
    /// The directory files were read in: `/proc/<pid>/root` (the master's own root).
    pub root: String,
    /// nginx's version from its binary (`nginx/X.Y.Z`), None when not found.
    pub nginx_version: Option<String>,
    /// The last load, seconds since the Unix epoch: the newest of the master's and its
    /// workers' start times (`/proc/<pid>/stat` starttime). None when unknown.
    pub loaded_unix_s: Option<f64>,
    /// Every file read, in reading order.
    pub files: Vec<ConfigFile>,
    /// Problems, one line each (`file:line: ...`): unreadable or oversized files,
    /// parse errors, include loops, limits reached. Values may then be incomplete.
    pub errors: Vec<String>,
    /// Effective values: the main, events and http ones (each directive once, a
    /// default when absent), then explicit overrides in servers, locations and
    /// upstreams, then the effective proxy settings of each location with
    /// `proxy_pass`.
    pub values: Vec<ConfigValue>,
    /// Every `listen` of the http servers.
    pub listens: Vec<ListenValue>,
    /// Every `access_log`, at any level (nginx's default where a server has none).
    pub access_logs: Vec<AccessLogValue>,
    /// `error_log` at the main level (the default when none).
    pub error_logs: Vec<ConfigValue>,
    /// Every `access_log` and `error_log` path of the configuration, at any level
    /// (server and location ones too), with nginx's defaults where none is set: the
    /// files the workers may hold open. Not in the JSON (see `access_logs`,
    /// `error_logs`).
    #[serde(skip)]
    pub log_paths: Vec<LogPath>,
    /// Every `upstream` block of the http block.
    pub upstreams: Vec<UpstreamValue>,
    /// Every `log_format` of the http block, whole (the `values` list cuts it), for
    /// reading the access logs. Not in the JSON (its name is in `values`).
    #[serde(skip)]
    pub log_formats: Vec<LogFormatValue>,
    /// Whether the main file has a `stream` block (its directives, `limit_conn`
    /// included, are not in `values`); None when unknown (the main file not read, or a
    /// report recorded before this was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_block: Option<bool>,
    /// Directives that pass requests to an upstream (`proxy_pass`, `fastcgi_pass`...;
    /// [`crate::model::config_tree::PASSES`]) anywhere in the http block; None: unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_passes: Option<u64>,
}

/// One `log_format`: its strings concatenated as nginx does.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogFormatValue {
    /// The format's name.
    pub name: String,
    /// `default`, `json` or `none` (`escape=`).
    pub escape: String,
    /// The format, at most [`MAX_FORMAT_CHARS`] bytes kept (longer is refused later).
    pub format: String,
    /// `file:line`.
    pub at: String,
}

/// Bytes of a `log_format` kept.
pub const MAX_FORMAT_CHARS: usize = 8192;

impl ConfigReport {
    /// The value of `directive` at the level it is first set (main, events, http):
    /// the one every server inherits.
    pub fn value(&self, directive: &str) -> Option<&ConfigValue> {
        self.values.iter().find(|v| {
            v.directive == directive && matches!(v.scope.as_str(), "main" | "events" | "http")
        })
    }

    /// Values of `directive` set in servers or locations (upstream blocks' own
    /// `keepalive_timeout` is another directive: scope `upstream <name>`).
    pub fn overrides<'a>(&'a self, directive: &'a str) -> impl Iterator<Item = &'a ConfigValue> {
        self.values.iter().filter(move |v| {
            v.directive == directive
                && !matches!(v.scope.as_str(), "main" | "events" | "http")
                && !v.scope.starts_with("upstream ")
        })
    }

    /// The level value of `directive` ([`ConfigReport::value`]) then its server and
    /// location overrides: every place it is in force.
    pub fn everywhere<'a>(&'a self, directive: &'a str) -> impl Iterator<Item = &'a ConfigValue> {
        self.value(directive)
            .into_iter()
            .chain(self.overrides(directive))
    }

    /// The http-level value of `directive` and its server and location overrides,
    /// quoted with their places: `65s (nginx.conf:12); server a: 0 (a.conf:3)`, at most
    /// [`MAX_OVERRIDES_QUOTED`] overrides (`N more` after them); None when the level
    /// value is unknown.
    pub fn with_overrides(&self, directive: &str) -> Option<String> {
        let v = self.value(directive)?.quoted();
        let o = bounded_list(
            self.overrides(directive)
                .map(|x| format!("{}: {}", x.scope, x.quoted()))
                .collect(),
        );
        Some(match o {
            Some(o) => format!("{v}; {o}"),
            None => v,
        })
    }

    /// The effective value of `directive` in each location that proxies (a location
    /// with `proxy_pass`: the scopes given `proxy_set_header Connection`), one per
    /// location; empty when no location proxies.
    pub fn proxied<'a>(&'a self, directive: &'a str) -> impl Iterator<Item = &'a ConfigValue> {
        let scopes: Vec<&str> = self
            .values
            .iter()
            .filter(|v| v.directive == "proxy_set_header Connection")
            .map(|v| v.scope.as_str())
            .collect();
        scopes.into_iter().filter_map(move |s| {
            self.values
                .iter()
                .rev()
                .find(|v| v.directive == directive && v.scope == s)
        })
    }

    /// Whether the main file was read: the values are the configuration's (else every
    /// setting is unknown, [`ConfigReport::unknown`] says why).
    pub fn is_read(&self) -> bool {
        self.unknown.is_none()
    }

    /// Whether any file read was modified after the last load.
    pub fn changed_since_load(&self) -> bool {
        self.files.iter().any(|f| f.changed_since_load)
    }

    /// The TCP ports of the `listen`s that serve HTTP/2 (`listen ... http2`, or
    /// `http2 on` in their server); None when the main file was not read.
    pub fn http2_ports(&self) -> Option<Vec<u16>> {
        self.tcp_ports_where(|l| l.http2)
    }

    /// The TCP ports of the `listen ... ssl`s; None when the main file was not read.
    pub fn tls_ports(&self) -> Option<Vec<u16>> {
        self.tcp_ports_where(|l| l.ssl)
    }

    /// The ports of the TCP `listen`s (not `quic`) that `keep` takes; None when the
    /// main file was not read.
    fn tcp_ports_where(&self, keep: impl Fn(&ListenValue) -> bool) -> Option<Vec<u16>> {
        self.is_read().then(|| {
            self.listens
                .iter()
                .filter(|l| keep(l) && !l.quic)
                .filter_map(|l| crate::model::listen::listen_port(&l.address))
                .collect()
        })
    }

    /// Whether `directive` is known to be absent from the configuration nginx runs:
    /// the main file and every include read without a problem, none modified since the
    /// last load, the values not cut at [`MAX_VALUES`], and `directive` nowhere in
    /// them (a directive of [`LISTED`], kept wherever it is set in the http block;
    /// `stream_ok`: the directive also exists in a `stream` block, which is not read,
    /// so it is absent only when the file has no `stream` block).
    pub fn lacks(&self, directive: &str, stream_ok: bool) -> bool {
        self.is_read()
            && self.errors.is_empty()
            && !self.changed_since_load()
            && self.values.len() < MAX_VALUES
            && (!stream_ok || self.stream_block == Some(false))
            && !self.values.iter().any(|v| v.directive == directive)
    }
}

/// One log path as configured (the first argument, whole) and where.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogPath {
    /// `access_log` or `error_log`.
    pub kind: &'static str,
    /// As written (relative paths are under the prefix), or nginx's default.
    pub path: String,
    /// `file:line` or [`DEFAULT`].
    pub at: String,
}

/// Every `access_log`/`error_log` under `block`, depth first, at most [`MAX_VALUES`].
fn log_paths(files: &[ConfigFile], block: &[Directive], out: &mut Vec<LogPath>) {
    for d in block {
        if out.len() >= MAX_VALUES {
            return;
        }
        let kind = match d.name.as_str() {
            "access_log" => "access_log",
            "error_log" => "error_log",
            _ => {
                if let Some(b) = &d.block {
                    log_paths(files, b, out);
                }
                continue;
            }
        };
        if let Some(path) = d.args.first() {
            out.push(LogPath {
                kind,
                path: path.clone(),
                at: at(files, d).0,
            });
        }
    }
}

/// The error-log target nginx reads as its standard error, not a file: the value of
/// `error_log stderr` and of a binary built `--error-log-path=stderr` (ngx_log.c,
/// auto/options).
pub const STDERR: &str = "stderr";

/// How [`STDERR`] is said in a value: what nginx means by it.
pub const STDERR_SAID: &str = "stderr (the standard error nginx was started with, not a file)";

/// An error-log target as nginx means it: [`STDERR`] said as [`STDERR_SAID`], any other
/// path as given.
fn error_log_said(target: &str) -> &str {
    if target == STDERR {
        STDERR_SAID
    } else {
        target
    }
}

/// What the binary and the command line say where the files do not.
#[derive(Clone, Debug, Default)]
pub struct BuildDefaults {
    /// nginx's prefix, with a trailing `/`.
    pub prefix: String,
    /// `--error-log-path=` of the binary (default `logs/error.log`).
    pub error_log: Option<String>,
    /// `--http-log-path=` of the binary (default `logs/access.log`).
    pub http_log: Option<String>,
}

pub use super::config_defaults::HTTP;
use super::config_defaults::{EVENTS, MAIN, UPSTREAM};

/// Directives listed wherever they appear (no default): zones and log formats.
const LISTED: &[&str] = &[
    "limit_req_zone",
    "limit_req",
    "limit_conn_zone",
    "limit_conn",
    "limit_req_status",
    "limit_conn_status",
    "log_format",
];
/// Values longer than this (a log_format's format) are cut, characters.
pub const MAX_VALUE_CHARS: usize = 200;
/// Effective values kept (a hostile config with thousands of servers), per list.
pub const MAX_VALUES: usize = 2000;

struct Eval<'a> {
    files: &'a [ConfigFile],
    out: ConfigReport,
}

fn at(files: &[ConfigFile], d: &Directive) -> (String, bool) {
    match files.get(d.file) {
        Some(f) => (format!("{}:{}", f.path, d.line), f.changed_since_load),
        None if d.file == G_FILE => (FROM_G.to_string(), false),
        None => (format!("?:{}", d.line), false),
    }
}

fn joined(args: &[String]) -> String {
    let s = args.join(" ");
    if s.chars().count() > MAX_VALUE_CHARS {
        let mut t: String = s.chars().take(MAX_VALUE_CHARS).collect();
        t.push('…');
        t
    } else {
        s
    }
}

fn find<'a>(block: &'a [Directive], name: &str) -> Option<&'a Directive> {
    block.iter().find(|d| d.name == name)
}

impl Eval<'_> {
    /// nginx's default access log, where a server has no access_log of its own nor one
    /// inherited from `http` (ngx_http_log_merge_loc_conf): with every server setting
    /// one, the default file is never opened.
    fn default_access_log(&mut self, http: &[Directive], build: &BuildDefaults) {
        let a_server_without = !http.iter().any(|d| d.name == "access_log")
            && (!http.iter().any(|d| d.name == "server")
                || http.iter().any(|d| {
                    d.name == "server"
                        && d.block
                            .as_ref()
                            .is_none_or(|b| !b.iter().any(|x| x.name == "access_log"))
                }));
        if a_server_without {
            let path = build
                .http_log
                .clone()
                .unwrap_or_else(|| "logs/access.log".to_string());
            self.out.access_logs.push(AccessLogValue {
                scope: "http".to_string(),
                path,
                format: "combined".to_string(),
                at: DEFAULT.to_string(),
                ..Default::default()
            });
        }
    }

    /// The main `error_log`s as values (`path level`, `error` by default), or the
    /// compiled-in default when there is none.
    fn error_logs(&mut self, main: &[Directive], build: &BuildDefaults) {
        for d in main
            .iter()
            .filter(|d| d.name == "error_log")
            .take(MAX_VALUES)
        {
            let mut v = self.value("main", d);
            let level = d
                .args
                .get(1)
                .cloned()
                .unwrap_or_else(|| "error".to_string());
            let target = d.args.first().map_or("", String::as_str);
            v.value = format!("{} {level}", error_log_said(target));
            self.out.error_logs.push(v);
        }
        if self.out.error_logs.is_empty() {
            let path = build
                .error_log
                .clone()
                .unwrap_or_else(|| "logs/error.log".to_string());
            self.out.error_logs.push(self.default_value(
                "error_log",
                "main",
                &format!("{} error", error_log_said(&path)),
            ));
        }
    }

    fn value(&self, scope: &str, d: &Directive) -> ConfigValue {
        let (at, not_loaded) = at(self.files, d);
        let value = match d.name.as_str() {
            "log_format" => d.args.first().cloned().unwrap_or_default(),
            _ => joined(&d.args),
        };
        ConfigValue {
            directive: d.name.clone(),
            scope: scope.to_string(),
            value,
            at,
            not_loaded,
            unread_may_set: false,
        }
    }

    fn push(&mut self, v: ConfigValue) {
        if self.out.values.len() < MAX_VALUES {
            self.out.values.push(v);
        }
    }

    /// Each of `table` once for `scope`: set in `block` or the default.
    fn level(&mut self, scope: &str, block: &[Directive], table: &[(&str, &str)]) {
        for (name, default) in table {
            let v = match find(block, name) {
                Some(d) => self.value(scope, d),
                None => ConfigValue {
                    directive: name.to_string(),
                    scope: scope.to_string(),
                    value: default.to_string(),
                    at: DEFAULT.to_string(),
                    not_loaded: false,
                    unread_may_set: false,
                },
            };
            self.push(v);
        }
    }

    /// Explicit settings of the http-level directives in a server or location.
    fn overrides(&mut self, scope: &str, block: &[Directive]) {
        for d in block {
            if HTTP.iter().any(|(n, _)| *n == d.name) || LISTED.contains(&d.name.as_str()) {
                let v = self.value(scope, d);
                self.push(v);
            }
        }
    }

    fn access_logs(&mut self, scope: &str, block: &[Directive]) {
        for d in block.iter().filter(|d| d.name == "access_log") {
            if self.out.access_logs.len() >= MAX_VALUES {
                return;
            }
            let (at, not_loaded) = at(self.files, d);
            let path = d.args.first().cloned().unwrap_or_default();
            let format = match d.args.get(1) {
                _ if path == "off" => String::new(),
                Some(f) if !f.contains('=') => f.clone(),
                _ => "combined".to_string(),
            };
            let opt = |k: &str| {
                d.args
                    .iter()
                    .skip(1)
                    .find_map(|a| a.strip_prefix(k).map(str::to_string))
            };
            self.out.access_logs.push(AccessLogValue {
                scope: scope.to_string(),
                path,
                format,
                buffer: opt("buffer="),
                flush: opt("flush="),
                condition: opt("if="),
                at,
                not_loaded,
            });
        }
    }

    fn server(&mut self, server: &Directive, body: &[Directive], http: &[Directive]) {
        let name = find(body, "server_name")
            .and_then(|d| d.args.first())
            .cloned()
            .or_else(|| find(body, "listen").and_then(|d| d.args.first()).cloned())
            .unwrap_or_else(|| at(self.files, server).0);
        let scope = format!("server {}", joined(std::slice::from_ref(&name)));
        let listens: Vec<&Directive> = body.iter().filter(|d| d.name == "listen").collect();
        if listens.is_empty() && self.out.listens.len() < MAX_VALUES {
            self.out.listens.push(ListenValue {
                scope: scope.clone(),
                address: "*:80".to_string(),
                at: DEFAULT.to_string(),
                ..Default::default()
            });
        }
        // `http2 on;` (nginx 1.25.1+) in the server turns HTTP/2 on for its listens.
        let http2_directive =
            find(body, "http2").is_some_and(|d| d.args.first().is_some_and(|a| a == "on"));
        for d in listens {
            if self.out.listens.len() >= MAX_VALUES {
                break;
            }
            let (at, not_loaded) = at(self.files, d);
            let has = |k: &str| d.args.iter().skip(1).any(|a| a == k);
            self.out.listens.push(ListenValue {
                scope: scope.clone(),
                address: d.args.first().cloned().unwrap_or_default(),
                backlog: d
                    .args
                    .iter()
                    .skip(1)
                    .find_map(|a| a.strip_prefix("backlog=").map(str::to_string)),
                reuseport: has("reuseport"),
                ssl: has("ssl"),
                http2: has("http2") || http2_directive,
                quic: has("quic"),
                at,
                not_loaded,
            });
        }
        self.overrides(&scope, body);
        self.access_logs(&scope, body);
        // What the http level sets (proxy_set_header too) reaches its servers.
        let inherited = Inherited::default().with(http);
        self.locations(&scope, body, &inherited);
    }

    fn locations(&mut self, scope: &str, body: &[Directive], outer: &Inherited) {
        let here = outer.with(body);
        for d in body.iter().filter(|d| d.name == "location") {
            let Some(b) = &d.block else { continue };
            let scope = format!("{scope} location {}", joined(&d.args));
            self.overrides(&scope, b);
            self.access_logs(&scope, b);
            let inner = here.with(b);
            // `proxy_pass` in the location, or in an `if` inside it (nginx proxies there
            // when the condition holds).
            let pass = find(b, "proxy_pass").or_else(|| {
                b.iter()
                    .filter(|d| d.name == "if")
                    .find_map(|d| d.block.as_deref().and_then(|ib| find(ib, "proxy_pass")))
            });
            if let Some(pass) = pass {
                let v = self.value(&scope, pass);
                self.push(v);
                self.proxied(&scope, &inner);
            }
            self.locations(&scope, b, &here);
        }
    }

    /// The effective proxy settings of a location with `proxy_pass`.
    fn proxied(&mut self, scope: &str, inh: &Inherited) {
        for (name, default) in HTTP.iter().filter(|(n, _)| n.starts_with("proxy_")) {
            let v = match inh.get(name) {
                Some(d) => self.value(scope, d),
                None => self.http_value(name, default, scope),
            };
            self.push(v);
        }
        // proxy_set_header is inherited only by levels that set none themselves.
        let v = match &inh.set_header {
            Some(list) => match list.iter().find(|d| {
                d.args
                    .first()
                    .is_some_and(|h| h.eq_ignore_ascii_case("connection"))
            }) {
                Some(d) => {
                    let mut v = self.value(scope, d);
                    v.value = joined(&d.args[1..]);
                    v
                }
                None => self.default_value("proxy_set_header Connection", scope, "close"),
            },
            None => self.default_value("proxy_set_header Connection", scope, "close"),
        };
        let v = ConfigValue {
            directive: "proxy_set_header Connection".to_string(),
            ..v
        };
        self.push(v);
    }

    fn http_value(&self, name: &str, default: &str, scope: &str) -> ConfigValue {
        match self.out.value(name) {
            Some(v) => ConfigValue {
                scope: scope.to_string(),
                ..v.clone()
            },
            None => self.default_value(name, scope, default),
        }
    }

    fn default_value(&self, name: &str, scope: &str, value: &str) -> ConfigValue {
        ConfigValue {
            directive: name.to_string(),
            scope: scope.to_string(),
            value: value.to_string(),
            at: DEFAULT.to_string(),
            not_loaded: false,
            unread_may_set: false,
        }
    }

    fn upstream(&mut self, d: &Directive, body: &[Directive]) {
        if self.out.upstreams.len() >= MAX_VALUES {
            return;
        }
        let name = d.args.first().cloned().unwrap_or_default();
        let scope = format!("upstream {}", joined(std::slice::from_ref(&name)));
        let mut servers = Vec::new();
        for s in body.iter().filter(|s| s.name == "server").take(MAX_VALUES) {
            let opt = |k: &str| {
                s.args
                    .iter()
                    .skip(1)
                    .find_map(|a| a.strip_prefix(k).map(str::to_string))
            };
            let other: Vec<String> = s
                .args
                .iter()
                .skip(1)
                .filter(|a| !a.starts_with("max_fails=") && !a.starts_with("fail_timeout="))
                .cloned()
                .collect();
            servers.push(UpstreamServer {
                address: s.args.first().cloned().unwrap_or_default(),
                max_fails: opt("max_fails=").unwrap_or_else(|| "1".to_string()),
                fail_timeout: opt("fail_timeout=").unwrap_or_else(|| "10s".to_string()),
                other: joined(&other),
                at: at(self.files, s).0,
                as_written: joined(&s.args),
            });
        }
        self.level(&scope, body, UPSTREAM);
        self.out.upstreams.push(UpstreamValue {
            name,
            servers,
            at: at(self.files, d).0,
        });
    }
}

/// The proxy directives a location inherits: the innermost setting of each, and the
/// innermost level's `proxy_set_header` list.
#[derive(Clone, Default)]
struct Inherited<'a> {
    set: Vec<&'a Directive>,
    set_header: Option<Vec<&'a Directive>>,
}

impl<'a> Inherited<'a> {
    fn with(&self, block: &'a [Directive]) -> Inherited<'a> {
        let mut next = self.clone();
        for d in block {
            if d.name.starts_with("proxy_") && d.name != "proxy_set_header" {
                next.set.retain(|o| o.name != d.name);
                next.set.push(d);
            }
        }
        let headers: Vec<&Directive> = block
            .iter()
            .filter(|d| d.name == "proxy_set_header")
            .collect();
        if !headers.is_empty() {
            next.set_header = Some(headers);
        }
        next
    }

    fn get(&self, name: &str) -> Option<&'a Directive> {
        self.set.iter().find(|d| d.name == name).copied()
    }
}

/// The effective values of the tree `main` (the main file's directives, includes
/// expanded). `files` carry `changed_since_load`; `build` the compiled-in defaults.
pub fn evaluate(main: &[Directive], files: &[ConfigFile], build: &BuildDefaults) -> ConfigReport {
    let mut e = Eval {
        files,
        out: ConfigReport::default(),
    };
    let empty: Vec<Directive> = Vec::new();
    fn block<'a>(d: Option<&'a Directive>, empty: &'a [Directive]) -> &'a [Directive] {
        d.and_then(|d| d.block.as_deref()).unwrap_or(empty)
    }
    e.level("main", main, MAIN);
    let events = find(main, "events");
    e.level("events", block(events, &empty), EVENTS);
    let http_d = find(main, "http");
    let http = block(http_d, &empty);
    e.level("http", http, HTTP);
    for d in http.iter().filter(|d| LISTED.contains(&d.name.as_str())) {
        let v = e.value("http", d);
        e.push(v);
    }
    let formats = http.iter().filter(|d| d.name == "log_format").take(64);
    e.out
        .log_formats
        .extend(formats.filter_map(|d| log_format(files, d)));
    if http_d.is_some() {
        e.default_access_log(http, build);
        e.access_logs("http", http);
    }
    for d in http {
        match (d.name.as_str(), &d.block) {
            ("server", Some(b)) => e.server(d, b, http),
            ("upstream", Some(b)) => e.upstream(d, b),
            _ => {}
        }
    }
    e.error_logs(main, build);
    e.out.stream_block = Some(find(main, "stream").is_some());
    e.out.upstream_passes = http_d.map(|_| super::config_tree::count_passes(http));
    e.out.log_paths = log_paths_and_defaults(files, main, &e.out);
    e.out.prefix = build.prefix.clone();
    e.out
}

/// The configuration when the main file was not read (`why`): every setting unknown,
/// never nginx's default; only what the master's `-g` (`globals`) sets is known.
pub fn evaluate_unread(
    globals: &[Directive],
    files: &[ConfigFile],
    build: &BuildDefaults,
    why: String,
) -> ConfigReport {
    let mut r = evaluate(globals, files, build);
    r.values.retain(|v| !v.is_default());
    r.error_logs.retain(|v| !v.is_default());
    r.access_logs.retain(|a| a.at != DEFAULT);
    r.listens.retain(|l| l.at != DEFAULT);
    r.log_paths.retain(|l| l.at != DEFAULT);
    r.unknown = Some(why);
    r
}

/// One `log_format` directive `d` as a value: its name, `escape=`, and its strings
/// joined (at most [`MAX_FORMAT_CHARS`]); None without a name.
fn log_format(files: &[ConfigFile], d: &Directive) -> Option<LogFormatValue> {
    let (Some(name), rest) = (d.args.first(), d.args.get(1..).unwrap_or_default()) else {
        return None;
    };
    let (escape, strings) = match rest.first().and_then(|a| a.strip_prefix("escape=")) {
        Some(x) => (x.to_string(), &rest[1..]),
        None => ("default".to_string(), rest),
    };
    let mut format = String::new();
    for s in strings {
        if format.len() + s.len() > MAX_FORMAT_CHARS {
            break;
        }
        format.push_str(s);
    }
    Some(LogFormatValue {
        name: name.clone(),
        escape,
        format,
        at: at(files, d).0,
    })
}

/// The paths of the logs the tree `main` names, then nginx's defaults where nothing is
/// set (`out`'s access and error logs at `default`).
fn log_paths_and_defaults(
    files: &[ConfigFile],
    main: &[Directive],
    out: &ConfigReport,
) -> Vec<LogPath> {
    let mut paths = Vec::new();
    log_paths(files, main, &mut paths);
    // nginx's defaults where nothing is set (the first word of the default error
    // log's value is its path).
    let defaults = out
        .access_logs
        .iter()
        .filter(|a| a.at == DEFAULT)
        .map(|a| ("access_log", a.path.clone()))
        .chain(out.error_logs.iter().filter(|v| v.at == DEFAULT).map(|v| {
            let path = match v.value.strip_prefix(STDERR_SAID) {
                Some(_) => STDERR,
                None => v
                    .value
                    .rsplit_once(' ')
                    .map_or(v.value.as_str(), |(p, _)| p),
            };
            ("error_log", path.to_string())
        }));
    for (kind, path) in defaults {
        paths.push(LogPath {
            kind,
            path,
            at: DEFAULT.to_string(),
        });
    }
    paths
}

/// Whether an access log's path (an `access_log` directive of `cfg`) has variables
/// (nginx opens it per request: the files its workers hold are then at no configured
/// path).
pub fn variable_access_paths(cfg: &ConfigReport) -> bool {
    cfg.access_logs.iter().any(|a| a.path.contains('$'))
}
