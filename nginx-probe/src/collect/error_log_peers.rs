//! The upstream peer of an error-log line: the `upstream: "scheme://host:port/..."`
//! field nginx writes from its own configuration after `, client: ...`
//! (`ngx_http_log_error_handler`), counted per peer and message class with bounded
//! cardinality.
//!
//! The client chose the request line before that field and the host and referrer
//! after it, and either may hold a fake `, upstream: "..."`: a line is attributed to a
//! peer only when exactly one such field follows `, client: ` (nginx's own); two or
//! more are ambiguous and counted apart. Only `scheme://authority` is kept (the URI
//! dropped), at most [`MAX_PEER_LEN`] bytes of `[A-Za-z0-9.:_-[]]`.

use std::collections::BTreeMap;

use crate::model::PeerErrorsReport;

/// Longest peer name kept, bytes.
pub const MAX_PEER_LEN: usize = 96;
/// Distinct peers tracked; lines of further peers count in `overflow`.
pub const MAX_PEERS_TRACKED: usize = 256;
/// Peers reported by name (the largest by lines); the rest are one row.
pub const TOP_PEERS: usize = 10;

/// The `scheme://authority` of the line's single `upstream: "..."` field after
/// `, client: `; Err(()) when there are two or more (a client's fake), Ok(None) when
/// there is none or it is malformed.
// The one error needs no more words than `Err(())`: two or more fields.
#[allow(clippy::result_unit_err)]
pub fn peer_of(line: &str) -> Result<Option<String>, ()> {
    const FIELD: &str = ", upstream: \"";
    let Some(ctx) = line.find(", client: ").map(|i| &line[i..]) else {
        return Ok(None);
    };
    let mut it = ctx.match_indices(FIELD);
    let Some((i, _)) = it.next() else {
        return Ok(None);
    };
    if it.next().is_some() {
        return Err(());
    }
    let v = &ctx[i + FIELD.len()..];
    let Some(end) = v.find('"') else {
        return Ok(None);
    };
    let v = &v[..end];
    let Some((scheme, rest)) = v.split_once("://") else {
        return Ok(None);
    };
    if scheme.is_empty() || scheme.len() > 10 || !scheme.bytes().all(|b| b.is_ascii_lowercase()) {
        return Ok(None);
    }
    // unix:/path:uri -> unix:/path; host:port/uri -> host:port
    let auth = match rest.strip_prefix("unix:") {
        Some(p) => &rest[..5 + p.find(':').unwrap_or(p.len())],
        None => &rest[..rest.find('/').unwrap_or(rest.len())],
    };
    let ok = |b: u8| b.is_ascii_alphanumeric() || b".:_-[]/".contains(&b);
    if auth.is_empty() || !auth.bytes().all(ok) {
        return Ok(None);
    }
    let peer = format!("{scheme}://{auth}");
    Ok((peer.len() <= MAX_PEER_LEN).then_some(peer))
}

/// Upstream-class lines per peer since attach, bounded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PeerCounts {
    /// Lines by peer (at most [`MAX_PEERS_TRACKED`] peers), by message class (the
    /// classes are nginx's fixed set, `error_log_classes`: bounded too).
    pub peers: BTreeMap<String, BTreeMap<&'static str, u64>>,
    /// Lines of peers past the bound.
    pub overflow: u64,
    /// Lines with two or more `upstream:` fields (not attributed).
    pub ambiguous: u64,
    /// Upstream-class lines without a readable field.
    pub unattributed: u64,
}

impl PeerCounts {
    /// Counts one upstream-class line of message class `class`.
    pub fn add(&mut self, line: &str, class: &'static str) {
        match peer_of(line) {
            Err(()) => self.ambiguous += 1,
            Ok(None) => self.unattributed += 1,
            Ok(Some(p)) => {
                if let Some(n) = self.peers.get_mut(&p) {
                    *n.entry(class).or_default() += 1;
                } else if self.peers.len() < MAX_PEERS_TRACKED {
                    self.peers.insert(p, BTreeMap::from([(class, 1)]));
                } else {
                    self.overflow += 1;
                }
            }
        }
    }

    /// `self - base`, per peer (the interval's lines).
    pub fn since(&self, base: &PeerCounts) -> PeerCounts {
        PeerCounts {
            peers: self
                .peers
                .iter()
                .map(|(p, classes)| {
                    let was = base.peers.get(p);
                    let d: BTreeMap<&'static str, u64> = classes
                        .iter()
                        .map(|(c, n)| {
                            let b = was.and_then(|w| w.get(c)).copied().unwrap_or(0);
                            (*c, n - b.min(*n))
                        })
                        .filter(|(_, n)| *n > 0)
                        .collect();
                    (p.clone(), d)
                })
                .filter(|(_, d)| !d.is_empty())
                .collect(),
            overflow: self.overflow - base.overflow.min(self.overflow),
            ambiguous: self.ambiguous - base.ambiguous.min(self.ambiguous),
            unattributed: self.unattributed - base.unattributed.min(self.unattributed),
        }
    }

    /// The [`TOP_PEERS`] largest peers by lines (ties by name), each with its lines
    /// by class, and the lines of all others (past the bound included).
    pub fn top(&self) -> (Vec<PeerErrorsReport>, u64) {
        let mut v: Vec<PeerErrorsReport> = self
            .peers
            .iter()
            .map(|(p, classes)| PeerErrorsReport {
                peer: p.clone(),
                lines: classes.values().sum(),
                by_class: classes.iter().map(|(c, n)| (c.to_string(), *n)).collect(),
            })
            .collect();
        v.sort_by(|a, b| b.lines.cmp(&a.lines).then(a.peer.cmp(&b.peer)));
        let rest: u64 = v.iter().skip(TOP_PEERS).map(|p| p.lines).sum::<u64>() + self.overflow;
        v.truncate(TOP_PEERS);
        (v, rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: &str = r#"2026/12/01 20:00:00 [error] 9#9: *3 connect() to 127.0.0.2:8602 failed (99: Cannot assign requested address) while connecting to upstream, client: 127.0.0.1, server: , request: "GET /a HTTP/1.1", upstream: "http://127.0.0.2:8602/a?x=1", host: "h""#;

    #[test]
    fn reads_nginx_s_field_only() {
        assert_eq!(peer_of(L), Ok(Some("http://127.0.0.2:8602".into())));
        let unix = r#"x, client: 1.2.3.4, server: , request: "GET /", upstream: "http://unix:/run/app.sock:/", host: "h""#;
        assert_eq!(peer_of(unix), Ok(Some("http://unix:/run/app.sock".into())));
        let fcgi = r#"x, client: 1.2.3.4, server: , request: "GET /", upstream: "fastcgi://[::1]:9000", host: "h""#;
        assert_eq!(peer_of(fcgi), Ok(Some("fastcgi://[::1]:9000".into())));
        // A fake in the request line or the referrer: two fields, not attributed.
        let fake = r#"x, client: 1.2.3.4, server: , request: "GET /", upstream: "http://10.0.0.1:80/", host: "h", referrer: "a", upstream: "http://6.6.6.6:1/""#;
        assert_eq!(peer_of(fake), Err(()));
        // A fake on a line nginx wrote without the field: the only one, but only
        // upstream-class lines are counted, which carry nginx's field.
        assert_eq!(peer_of("x, client: 1.2.3.4"), Ok(None));
        // ESC, spaces and overlong names are refused.
        let esc = "x, client: 1, upstream: \"http://a\x1b[2J:1/\"";
        assert_eq!(peer_of(esc), Ok(None));
        let long = format!("x, client: 1, upstream: \"http://{}:1/\"", "a".repeat(200));
        assert_eq!(peer_of(&long), Ok(None));
        // Before `, client: `: not looked at.
        assert_eq!(peer_of(r#"x upstream: "http://1.1.1.1:1/""#), Ok(None));
    }

    #[test]
    fn keeps_the_largest_peers_and_bounds_the_rest() {
        let mut c = PeerCounts::default();
        for i in 0..(MAX_PEERS_TRACKED + 5) {
            for _ in 0..=(i % 3) {
                c.add(
                    &format!(
                        "x, client: 1, upstream: \"http://10.0.{}.{}:80/\"",
                        i / 256,
                        i % 256
                    ),
                    "upstream_reset",
                );
            }
        }
        assert_eq!(c.peers.len(), MAX_PEERS_TRACKED);
        let total: u64 = (0..(MAX_PEERS_TRACKED + 5))
            .map(|i| (i % 3 + 1) as u64)
            .sum();
        let (top, rest) = c.top();
        assert_eq!(top.len(), TOP_PEERS);
        assert!(top.iter().all(|p| p.lines == 3));
        assert_eq!(top.iter().map(|p| p.lines).sum::<u64>() + rest, total);
        let base = c.clone();
        c.add(L, "upstream_addr_unavailable");
        let d = c.since(&base);
        assert_eq!(d.peers.len(), 0, "bound reached: overflow");
        assert_eq!(d.overflow, 1);
    }

    /// A refusing peer and a resetting one: each peer's lines by class, and an
    /// interval's by class too.
    #[test]
    fn counts_each_peer_by_class() {
        let line = |port: u16| format!("x, client: 1, upstream: \"http://127.0.0.1:{port}/\"");
        let mut c = PeerCounts::default();
        for _ in 0..3 {
            c.add(&line(18901), "upstream_connect_failed");
            c.add(&line(18902), "upstream_reset");
        }
        let base = c.clone();
        c.add(&line(18902), "upstream_reset");
        c.add(&line(18902), "upstream_prematurely_closed");
        let (top, rest) = c.top();
        assert_eq!(rest, 0);
        assert_eq!(top[0].peer, "http://127.0.0.1:18902");
        assert_eq!(top[0].lines, 5);
        assert_eq!(
            top[0].by_class,
            BTreeMap::from([
                ("upstream_prematurely_closed".to_string(), 1),
                ("upstream_reset".to_string(), 4)
            ])
        );
        assert_eq!(top[1].by_class["upstream_connect_failed"], 3);
        let d = c.since(&base).top().0;
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].lines, 2);
        assert_eq!(d[0].by_class["upstream_reset"], 1);
    }
}
