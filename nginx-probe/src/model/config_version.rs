//! nginx's defaults that depend on its version (read from its binary,
//! `collect::target::nginx_version`): `keepalive_requests` 100 before 1.19.10, 1000
//! since, and `keepalive_time` only since 1.19.10 (nginx's CHANGES). Pure.

use super::config::ConfigValue;

/// The nginx version from which `keepalive_requests` defaults to 1000 and
/// `keepalive_time` exists (nginx's CHANGES, 1.19.10): before it keepalive_requests
/// defaulted to 100 (http and upstream blocks alike).
pub const KEEPALIVE_1000_SINCE: (u32, u32, u32) = (1, 19, 10);

/// The nginx version from which an `upstream` block has `keepalive_requests`.
pub const UPSTREAM_KEEPALIVE_REQUESTS_SINCE: (u32, u32, u32) = (1, 15, 3);

/// `X.Y.Z` (nginx's version as its binary writes it) as numbers; None when it is not
/// three numbers.
pub fn parse_version(v: &str) -> Option<(u32, u32, u32)> {
    let mut it = v.trim().split('.').map(|p| p.parse::<u32>().ok());
    let t = (it.next()??, it.next()??, it.next()??);
    it.next().is_none().then_some(t)
}

/// Rewrites the defaults `model::config_defaults` gives for the nginx that runs
/// (`version`, from its binary): before 1.19.10 `keepalive_requests` defaults to 100
/// and `keepalive_time` does not exist (its default entry is dropped). With the version
/// unknown, the default says both values (`1000 (100 before nginx 1.19.10)`): a rule
/// reading it as a number then reads neither. Values a file sets are left alone.
pub fn for_version(values: &mut Vec<ConfigValue>, version: Option<&str>) {
    let old = version
        .and_then(parse_version)
        .map(|v| v < KEEPALIVE_1000_SINCE);
    // The upstream block's keepalive_requests exists from 1.15.3 (nginx's CHANGES).
    let no_upstream_requests = version
        .and_then(parse_version)
        .is_some_and(|v| v < UPSTREAM_KEEPALIVE_REQUESTS_SINCE);
    values.retain(|v| {
        let gone = (v.directive == "keepalive_time" && old == Some(true))
            || (v.directive == "keepalive_requests"
                && v.scope.starts_with("upstream ")
                && no_upstream_requests);
        !(v.is_default() && gone)
    });
    for v in values
        .iter_mut()
        .filter(|v| v.is_default() && v.directive == "keepalive_requests")
    {
        v.value = match old {
            Some(true) => "100".into(),
            Some(false) => "1000".into(),
            None => UNKNOWN_VERSION_KEEPALIVE_REQUESTS.into(),
        };
    }
}

/// The `keepalive_requests` default when nginx's version is unknown.
pub const UNKNOWN_VERSION_KEEPALIVE_REQUESTS: &str = "1000 (100 before nginx 1.19.10)";

/// Whether a default `keepalive_requests` value is `n`: its number; never with the
/// version unknown (either of nginx's two defaults may be in force).
pub fn keepalive_requests_default_may_be(value: &str, n: u64) -> bool {
    // With the version unknown the default is only maybe `n`: never a cause (review).
    value != UNKNOWN_VERSION_KEEPALIVE_REQUESTS && value.trim().parse::<u64>() == Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::config::DEFAULT;

    fn defaults() -> Vec<ConfigValue> {
        vec![
            ConfigValue::of("keepalive_requests", "http", "1000", DEFAULT),
            ConfigValue::of("keepalive_time", "http", "1h", DEFAULT),
            ConfigValue::of("keepalive_requests", "upstream b", "1000", DEFAULT),
            ConfigValue::of("keepalive_requests", "server a", "50", "/x/a.conf:3"),
        ]
    }

    #[test]
    fn nginx_before_1_19_10_defaults_keepalive_requests_to_100_and_has_no_keepalive_time() {
        let mut v = defaults();
        for_version(&mut v, Some("1.18.0"));
        let got: Vec<_> = v
            .iter()
            .map(|x| (x.directive.as_str(), x.value.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("keepalive_requests", "100"),
                ("keepalive_requests", "100"),
                ("keepalive_requests", "50")
            ]
        );
        let mut v = defaults();
        for_version(&mut v, Some("1.19.10"));
        assert_eq!(v, defaults());
        let mut v = defaults();
        for_version(&mut v, None);
        assert_eq!(v[0].value, UNKNOWN_VERSION_KEEPALIVE_REQUESTS);
        assert_eq!(v[3].value, "50");
        assert!(!keepalive_requests_default_may_be(&v[0].value, 100));
        assert!(!keepalive_requests_default_may_be(&v[0].value, 1000));
        assert!(keepalive_requests_default_may_be("100", 100));
        // nginx 1.14: no keepalive_requests in an upstream block at all.
        let mut v = defaults();
        for_version(&mut v, Some("1.14.2"));
        assert_eq!(v.iter().filter(|x| x.scope == "upstream b").count(), 0);
        assert!(!keepalive_requests_default_may_be(&v[0].value, 50));
        for bad in ["1.18", "1.x.0", "1.2.3.4", ""] {
            assert_eq!(parse_version(bad), None, "{bad}");
        }
        assert_eq!(parse_version("1.26.3"), Some((1, 26, 3)));
    }
}
