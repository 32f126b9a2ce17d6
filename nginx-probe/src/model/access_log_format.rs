//! An nginx `log_format` turned into a line matcher (the `regex` crate), so that the
//! fields the outcomes need (`$status`, `$request_time`, `$upstream_*`, the server
//! name) are read from lines nginx wrote, and nothing else is kept. Pure.
//!
//! Why not a crate: `access_log_parser` knows fixed formats only (common, combined),
//! `nginx_log_parser` (themasch) is unpublished and unmaintained since 2018. What is
//! specific to nginx is which variable can hold which bytes; the matching is `regex`'s.
//!
//! Exactness: nginx escapes `"`, `\` and bytes outside 0x20-0x7e in variable values
//! (`escape=default`, `\xHH`; `escape=json`, `\"` and `\uHHHH`), so a field between
//! double quotes cannot contain the quote that ends it. Fields outside quotes that
//! clients control (`$http_*`, `$request`, `$remote_user`, ...) can contain spaces:
//! the pattern is anchored at both ends, and when a format has two or more such fields
//! a line is matched a second time with them greedy; a line whose two readings differ
//! in a field used is `ambiguous` and not counted. `escape=none` formats are not read
//! (client bytes could forge the delimiters).

use regex::Regex;

/// Format strings longer than this are refused (`log_format` is concatenated by nginx;
/// a hostile config can make it large), bytes.
pub const MAX_FORMAT_BYTES: usize = 4096;

/// nginx's predefined `combined` format (ngx_http_log_module.c).
pub const COMBINED: &str = "$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent \"$http_referer\" \"$http_user_agent\"";

/// The fields nginx-probe reads, by what the format carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// `$status`: the response status sent to the client.
    Status,
    /// `$request_time`: seconds with millisecond resolution, first byte read to last
    /// byte logged.
    RequestTime,
    /// `$server_name` (the configured name) or `$host`.
    Server,
    /// `$upstream_addr`: the peers tried, `, `-separated (` : ` between upstream groups
    /// after an internal redirect).
    UpstreamAddr,
    /// `$upstream_status`, same shape as `$upstream_addr`.
    UpstreamStatus,
    /// `$upstream_response_time`, seconds, same shape.
    UpstreamResponseTime,
    /// `$upstream_connect_time`, seconds, same shape.
    UpstreamConnectTime,
    /// `$connection_requests`: the request's number on its client connection (1 on a
    /// connection's first request, HTTP/1 and HTTP/2 alike).
    ConnectionRequests,
}

impl Field {
    /// Every field, in report order.
    pub const ALL: [Field; 8] = [
        Field::Status,
        Field::RequestTime,
        Field::Server,
        Field::UpstreamAddr,
        Field::UpstreamStatus,
        Field::UpstreamResponseTime,
        Field::UpstreamConnectTime,
        Field::ConnectionRequests,
    ];

    /// The fields whose absence is said in the report (`not logged by the format`):
    /// those the outcomes need; `$connection_requests` serves only the count of
    /// connections that carried a request, said where that count is.
    pub fn reported_missing(self) -> bool {
        self != Field::ConnectionRequests
    }

    fn of(var: &str) -> Option<Field> {
        Some(match var {
            "status" => Field::Status,
            "request_time" => Field::RequestTime,
            "server_name" | "host" => Field::Server,
            "upstream_addr" => Field::UpstreamAddr,
            "upstream_status" => Field::UpstreamStatus,
            "upstream_response_time" => Field::UpstreamResponseTime,
            "upstream_connect_time" => Field::UpstreamConnectTime,
            "connection_requests" => Field::ConnectionRequests,
            _ => return None,
        })
    }

    /// The variable as written in a format (for "not logged" lines).
    pub fn variable(self) -> &'static str {
        match self {
            Field::Status => "$status",
            Field::RequestTime => "$request_time",
            Field::Server => "$server_name or $host",
            Field::UpstreamAddr => "$upstream_addr",
            Field::UpstreamStatus => "$upstream_status",
            Field::UpstreamResponseTime => "$upstream_response_time",
            Field::UpstreamConnectTime => "$upstream_connect_time",
            Field::ConnectionRequests => "$connection_requests",
        }
    }
}

/// What one line gave, borrowed from it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fields<'a> {
    /// `$status`.
    pub status: Option<u16>,
    /// `$request_time` in milliseconds.
    pub request_time_ms: Option<u64>,
    /// `$server_name` or `$host` as logged (raw).
    pub server: Option<&'a str>,
    /// The `$upstream_*` lists as logged (see [`list_items`]).
    pub upstream_addr: Option<&'a str>,
    /// `$upstream_status` as logged.
    pub upstream_status: Option<&'a str>,
    /// `$upstream_response_time` as logged.
    pub upstream_response_time: Option<&'a str>,
    /// `$upstream_connect_time` as logged.
    pub upstream_connect_time: Option<&'a str>,
    /// `$connection_requests`.
    pub connection_requests: Option<u64>,
}

/// How one line matched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// The line, read.
    Line(Fields<'a>),
    /// The line is not in this format.
    NoMatch,
    /// Two readings of the line differ in a field used (see the module doc).
    Ambiguous,
}

/// A compiled `log_format`.
#[derive(Clone, Debug)]
pub struct LogFormat {
    /// Its name (`combined`, `main`, ...).
    pub name: String,
    /// The fields it carries, in [`Field::ALL`] order.
    pub fields: Vec<Field>,
    /// Capture group index of each field read.
    groups: Vec<(Field, usize)>,
    lazy: Regex,
    /// Set when two or more free fields lie outside quotes.
    greedy: Option<Regex>,
}

/// One piece of a format string.
#[derive(Debug, PartialEq)]
enum Piece<'a> {
    Lit(&'a str),
    Var(&'a str),
}

fn pieces(format: &str) -> Result<Vec<Piece<'_>>, String> {
    let mut out = Vec::new();
    let b = format.as_bytes();
    let (mut i, mut lit) = (0, 0);
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    while i < b.len() {
        if b[i] != b'$' {
            i += 1;
            continue;
        }
        if lit < i {
            out.push(Piece::Lit(&format[lit..i]));
        }
        let braced = b.get(i + 1) == Some(&b'{');
        let (start, end) = if braced {
            let close = format[i + 2..].find('}').ok_or("a `${` without its `}`")?;
            (i + 2, i + 2 + close)
        } else {
            let mut j = i + 1;
            while j < b.len() && word(b[j]) {
                j += 1;
            }
            (i + 1, j)
        };
        if start == end {
            return Err("a `$` without a variable name".into());
        }
        out.push(Piece::Var(&format[start..end]));
        i = if braced { end + 1 } else { end };
        lit = i;
    }
    if lit < b.len() {
        out.push(Piece::Lit(&format[lit..]));
    }
    Ok(out)
}

/// A pattern for a variable whose values nginx (not the client) shapes; None for a
/// free field.
fn shaped(var: &str) -> Option<&'static str> {
    Some(match var {
        "status" => r"\d{3}",
        "request_time" | "msec" => r"\d+\.\d{3}",
        "upstream_response_time" | "upstream_connect_time" | "upstream_header_time" => {
            r"(?:\d+\.\d{3}|-)(?:(?:, | : )(?:\d+\.\d{3}|-))*"
        }
        "upstream_status" => r"(?:\d{3}|-)(?:(?:, | : )(?:\d{3}|-))*",
        // Addresses or an upstream group's name: no spaces, the separators apart.
        "upstream_addr" => r"[^ ,]+(?:(?:, | : )[^ ,]+)*",
        "body_bytes_sent"
        | "bytes_sent"
        | "request_length"
        | "connection"
        | "connection_requests"
        | "pid"
        | "content_length" => r"\d*|-",
        "time_local" => r"\d{2}/[A-Za-z]{3}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4}",
        "time_iso8601"
        | "remote_addr"
        | "server_addr"
        | "server_port"
        | "remote_port"
        | "scheme"
        | "server_protocol"
        | "pipe"
        | "request_method"
        | "upstream_cache_status"
        | "ssl_protocol"
        | "ssl_cipher"
        | "server_name"
        | "host" => r"[^ ]*",
        _ => return None,
    })
}

impl LogFormat {
    /// Compiles format `name` written `format` with `escape` (`default`, `json` or
    /// `none`). Errors, one line: a format nginx-probe cannot read exactly.
    pub fn compile(name: &str, format: &str, escape: &str) -> Result<LogFormat, String> {
        if escape == "none" {
            return Err("escape=none: client bytes could forge its delimiters".into());
        }
        if format.len() > MAX_FORMAT_BYTES {
            return Err(format!("longer than {MAX_FORMAT_BYTES} bytes"));
        }
        let ps = pieces(format)?;
        let (mut lazy, mut greedy) = (String::from("^"), String::from("^"));
        let mut groups = Vec::new();
        let mut unquoted_free = 0;
        for (k, p) in ps.iter().enumerate() {
            let v = match p {
                Piece::Lit(s) => {
                    lazy.push_str(&regex::escape(s));
                    greedy.push_str(&regex::escape(s));
                    continue;
                }
                Piece::Var(v) => v,
            };
            let before = k.checked_sub(1).and_then(|i| ps.get(i));
            let quoted = matches!(before, Some(Piece::Lit(l)) if l.ends_with('"'))
                && matches!(ps.get(k + 1), Some(Piece::Lit(l)) if l.starts_with('"'));
            // escape=json writes a variable with no value as nothing, not `-`: the
            // `$upstream_*` of a request nginx did not proxy.
            let empty_ok = escape == "json" && v.starts_with("upstream_");
            let optional = shaped(v).map(|p| format!("(?:{p})?"));
            let (l, g) = match shaped(v) {
                Some(_) if empty_ok => {
                    let o = optional.as_deref().unwrap_or_default();
                    (o, o)
                }
                Some(p) => (p, p),
                None if quoted => (r#"(?:[^"\\]|\\.)*"#, r#"(?:[^"\\]|\\.)*"#),
                None => {
                    unquoted_free += 1;
                    (".*?", ".*")
                }
            };
            match Field::of(v).filter(|f| !groups.iter().any(|(g, _)| g == f)) {
                Some(f) => {
                    groups.push((f, groups.len() + 1));
                    lazy.push_str(&format!("({l})"));
                    greedy.push_str(&format!("({g})"));
                }
                None => {
                    lazy.push_str(&format!("(?:{l})"));
                    greedy.push_str(&format!("(?:{g})"));
                }
            }
        }
        lazy.push('$');
        greedy.push('$');
        let re = |s: &str| {
            regex::RegexBuilder::new(s)
                .size_limit(1 << 20)
                .build()
                .map_err(|e| format!("cannot be matched: {e}"))
        };
        let fields = Field::ALL
            .iter()
            .copied()
            .filter(|f| groups.iter().any(|(g, _)| g == f))
            .collect();
        Ok(LogFormat {
            name: name.to_string(),
            fields,
            lazy: re(&lazy)?,
            greedy: if unquoted_free >= 2 {
                Some(re(&greedy)?)
            } else {
                None
            },
            groups,
        })
    }

    /// Whether `other` is the same format: same name, same compiled pattern.
    pub fn same_as(&self, other: &LogFormat) -> bool {
        self.name == other.name && self.lazy.as_str() == other.lazy.as_str()
    }

    /// Whether the format carries `f`.
    pub fn has(&self, f: Field) -> bool {
        self.fields.contains(&f)
    }

    /// Reads one line (without its newline).
    pub fn parse<'a>(&self, line: &'a str) -> Parsed<'a> {
        let Some(c) = self.lazy.captures(line) else {
            return Parsed::NoMatch;
        };
        let take = |c: &regex::Captures<'a>| -> Vec<Option<&'a str>> {
            self.groups
                .iter()
                .map(|(_, g)| c.get(*g).map(|m| m.as_str()))
                .collect()
        };
        let first = take(&c);
        if let Some(g) = &self.greedy {
            match g.captures(line) {
                Some(c2) if take(&c2) == first => {}
                _ => return Parsed::Ambiguous,
            }
        }
        let mut out = Fields::default();
        for ((f, _), v) in self.groups.iter().zip(first) {
            let Some(v) = v else { continue };
            match f {
                Field::Status => out.status = v.parse().ok(),
                Field::RequestTime => out.request_time_ms = seconds_ms(v),
                Field::Server => out.server = Some(v),
                Field::UpstreamAddr => out.upstream_addr = Some(v),
                Field::UpstreamStatus => out.upstream_status = Some(v),
                Field::UpstreamResponseTime => out.upstream_response_time = Some(v),
                Field::UpstreamConnectTime => out.upstream_connect_time = Some(v),
                Field::ConnectionRequests => out.connection_requests = v.parse().ok(),
            }
        }
        Parsed::Line(out)
    }
}

/// `1.503` (seconds, 3 decimals as nginx writes them) in milliseconds; None for `-`.
pub fn seconds_ms(v: &str) -> Option<u64> {
    let (s, ms) = v.split_once('.')?;
    if ms.len() != 3 {
        return None;
    }
    Some(s.parse::<u64>().ok()?.checked_mul(1000)? + ms.parse::<u64>().ok()?)
}

/// The items of an `$upstream_*` list (`a, b : c`), in order.
pub fn list_items(v: &str) -> impl Iterator<Item = &str> {
    v.split(" : ").flat_map(|g| g.split(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_gives_the_status_and_nothing_else() {
        let f = LogFormat::compile("combined", COMBINED, "default").unwrap();
        assert_eq!(f.fields, vec![Field::Status]);
        let line = r#"127.0.0.1 - - [02/Dec/2026:18:43:28 +0000] "GET /a b\x22 404 HTTP/1.1" 200 30 "-" "curl/8 \x22 500""#;
        match f.parse(line) {
            Parsed::Line(x) => assert_eq!(x.status, Some(200)),
            other => panic!("{other:?}"),
        }
        assert_eq!(f.parse("garbage"), Parsed::NoMatch);
    }

    #[test]
    fn timing_and_upstream_fields_are_read() {
        let fmt = "$remote_addr $host [$time_local] \"$request\" $status $request_time \
                   $upstream_addr $upstream_status $upstream_response_time $upstream_connect_time";
        let f = LogFormat::compile("t", fmt, "default").unwrap();
        let line = r#"10.0.0.1 example.org [02/Dec/2026:18:43:28 +0000] "GET / HTTP/1.1" 200 1.503 127.0.0.1:81, 127.0.0.2:81 502, 200 0.001, 1.499 -, 0.000"#;
        let Parsed::Line(x) = f.parse(line) else {
            panic!()
        };
        assert_eq!(x.status, Some(200));
        assert_eq!(x.request_time_ms, Some(1503));
        assert_eq!(x.server, Some("example.org"));
        assert_eq!(x.upstream_addr, Some("127.0.0.1:81, 127.0.0.2:81"));
        assert_eq!(x.upstream_status, Some("502, 200"));
        assert_eq!(
            list_items(x.upstream_response_time.unwrap()).collect::<Vec<_>>(),
            ["0.001", "1.499"]
        );
        assert_eq!(x.upstream_connect_time, Some("-, 0.000"));
    }

    #[test]
    fn two_unquoted_client_fields_around_a_used_one_are_ambiguous_not_misread() {
        let f = LogFormat::compile("u", "$http_a $status $http_b", "default").unwrap();
        assert!(f.greedy.is_some());
        assert_eq!(f.parse("x 404 y 200 z"), Parsed::Ambiguous);
        let Parsed::Line(x) = f.parse("x 200 z") else {
            panic!()
        };
        assert_eq!(x.status, Some(200));
        // One unquoted client field: anchored at both ends, the status is the last.
        let f = LogFormat::compile("v", "$http_a $status", "default").unwrap();
        let Parsed::Line(x) = f.parse("x 404 y 200") else {
            panic!()
        };
        assert_eq!(x.status, Some(200));
    }

    #[test]
    fn refused_formats_say_why_and_braces_and_json_are_read() {
        assert!(LogFormat::compile("n", "$status", "none")
            .unwrap_err()
            .contains("escape=none"));
        assert!(LogFormat::compile("b", "${status", "default").is_err());
        assert!(LogFormat::compile("e", "a $ b", "default").is_err());
        let long = "$status ".repeat(1000);
        assert!(LogFormat::compile("l", &long, "default").is_err());
        let f = LogFormat::compile("j", r#"{"s":"${status}","ua":"$http_user_agent"}"#, "json")
            .unwrap();
        let Parsed::Line(x) = f.parse(r#"{"s":"503","ua":"a \"q\" b"}"#) else {
            panic!()
        };
        assert_eq!(x.status, Some(503));
    }

    #[test]
    fn json_lines_of_requests_not_proxied_have_empty_upstream_fields() {
        // The helper's case: escape=json writes unset $upstream_* as "" (nginx 1.22, 1.26).
        let f = LogFormat::compile(
            "j",
            r#"{"s":$status,"rt":$request_time,"u":"$upstream_addr","us":"$upstream_status","urt":"$upstream_response_time"}"#,
            "json",
        )
        .unwrap();
        let Parsed::Line(x) = f.parse(r#"{"s":200,"rt":0.000,"u":"","us":"","urt":""}"#) else {
            panic!("a static request's line is read")
        };
        assert_eq!((x.status, x.upstream_addr), (Some(200), Some("")));
        let Parsed::Line(y) =
            f.parse(r#"{"s":502,"rt":0.004,"u":"10.0.0.1:80","us":"502","urt":"0.003"}"#)
        else {
            panic!("a proxied request's line is read")
        };
        assert_eq!(y.upstream_status, Some("502"));
        let mut o = super::super::access_log::Outcomes::default();
        o.add(&x);
        o.add(&y);
        let r = o.report(&f.fields, Vec::new(), Vec::new());
        assert_eq!(r.lines, 2);
        assert_eq!(r.upstreams.len(), 1, "the static request tried no peer");
        assert_eq!(r.upstreams[0].tries, 1);
        // With escape=default an empty upstream field is not nginx's: not read.
        let d = LogFormat::compile("d", "$status \"$upstream_addr\"", "default").unwrap();
        assert_eq!(d.parse(r#"200 """#), Parsed::NoMatch);
    }

    #[test]
    fn seconds_are_milliseconds() {
        assert_eq!(seconds_ms("1.503"), Some(1503));
        assert_eq!(seconds_ms("0.000"), Some(0));
        assert_eq!(seconds_ms("-"), None);
        assert_eq!(seconds_ms("1.5"), None);
    }
}
