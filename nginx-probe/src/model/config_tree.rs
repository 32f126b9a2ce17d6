//! nginx's configuration as a tree of [`Directive`]s, and whether it passes requests
//! to an upstream at all: the `*_pass` directives of nginx's http modules counted
//! anywhere in the http block (servers, locations, `if` and `limit_except` blocks). An upstream-class error-log
//! line (`upstream timed out`, `connect() failed ... while connecting to upstream`)
//! from an nginx with none was not written by nginx's upstream code: a client can write
//! lines into the error log (docs/security.md). Pure.

/// One directive of the tree `collect::config` read, includes already expanded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Directive {
    /// Directive name as written.
    pub name: String,
    /// Its arguments, quotes removed.
    pub args: Vec<String>,
    /// Index into `ConfigReport::files` of the file it is written in; `G_FILE` for
    /// the master's `-g`.
    pub file: usize,
    /// 1-based line in that file.
    pub line: usize,
    /// Its block's directives (`http { ... }`), None for a simple directive.
    pub block: Option<Vec<Directive>>,
}

/// The directives that pass a request to an upstream server.
pub const PASSES: [&str; 6] = [
    "proxy_pass",
    "fastcgi_pass",
    "uwsgi_pass",
    "scgi_pass",
    "grpc_pass",
    "memcached_pass",
];

/// Most blocks looked into (a hostile configuration's nesting is bounded).
const MAX_DEPTH: usize = 16;

/// The [`PASSES`] directives in `block` and every block inside it, at most
/// [`MAX_DEPTH`] levels down (deeper blocks count as passing: unknown is not none).
pub fn count_passes(block: &[Directive]) -> u64 {
    fn walk(block: &[Directive], depth: usize) -> u64 {
        block
            .iter()
            .map(|d| {
                let own = u64::from(PASSES.contains(&d.name.as_str()));
                let inner = match &d.block {
                    Some(_) if depth >= MAX_DEPTH => 1,
                    Some(b) => walk(b, depth + 1),
                    None => 0,
                };
                own + inner
            })
            .sum()
    }
    walk(block, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(name: &str, block: Option<Vec<Directive>>) -> Directive {
        Directive {
            name: name.into(),
            args: Vec::new(),
            file: 0,
            line: 1,
            block,
        }
    }

    #[test]
    fn passes_are_counted_in_nested_blocks() {
        let limit = d("limit_except", Some(vec![d("fastcgi_pass", None)]));
        let loc = d("location", Some(vec![d("root", None), limit]));
        let iff = d("if", Some(vec![d("proxy_pass", None)]));
        let server = d("server", Some(vec![loc, d("location", Some(vec![iff]))]));
        assert_eq!(count_passes(&[server]), 2);
        assert_eq!(count_passes(&[d("server", Some(vec![d("root", None)]))]), 0);
        let mut deep = d("proxy_pass", None);
        for _ in 0..20 {
            deep = d("location", Some(vec![deep]));
        }
        assert_eq!(count_passes(&[deep]), 1);
    }
}
