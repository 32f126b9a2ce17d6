//! The completed TLS handshakes that carried no request: nginx's count of handshakes
//! (`ngx_ssl_ocsp_validate`) less the connections whose first request the access log
//! holds (`$connection_requests` 1). Shown in the report beside the handshakes and used
//! by `tls_handshake_cost` (newcomer trial 12: 150 of 320 TLS connections carried no
//! request, and the figure appeared only when the verdict fired).

use super::{access_log::AccessLogReport, TlsReport};

/// A floor of the completed handshakes that carried no request, with what it was
/// counted from.
#[derive(Clone, Debug, PartialEq)]
pub struct HandshakesWithoutRequest {
    /// At least this many (handshakes less `carried`, `missing` and `open`; may be 0).
    pub min: u64,
    /// Connections that carried a request: access-log lines with
    /// `$connection_requests` 1, all ports (plain ones among them: a floor).
    pub carried: u64,
    /// Requests nginx counted that the log may miss (each may be a first request).
    pub missing: u64,
    /// Client connections open at the end (stub_status `active`): a connection whose
    /// first request is still running has no line yet.
    pub open: u64,
}

/// What the report's parts say of it: nginx's handshake count (`t`), the access log,
/// nginx's own hops (`model::own_hops`' reason), whether QUIC listeners are there and
/// stub_status's `active`. Err(why unknown) when the handshakes include nginx's own TLS
/// connects to upstreams (counted at `SSL_do_handshake`), own hops or QUIC connections,
/// or when the log cannot count connections.
pub fn handshakes_without_request(
    t: &TlsReport,
    access_log: Option<&AccessLogReport>,
    own_hops: Option<String>,
    quic: bool,
    open: Option<u64>,
) -> Result<HandshakesWithoutRequest, String> {
    if t.handshakes_from.as_deref() != Some("ngx_ssl_ocsp_validate") {
        return Err("how many of them carried a request is unknown: the handshakes were counted at SSL_do_handshake, which nginx's own TLS connects to upstreams reach too".into());
    }
    if let Some(why) = own_hops {
        return Err(format!("how many of them carried a request is unknown: nginx's own hops may be among them ({why})"));
    }
    if quic {
        return Err("how many of them carried a request is unknown: QUIC connections' handshakes are among them".into());
    }
    let Some(a) = access_log else {
        return Err("how many of them carried a request is unknown: the access log was not read (log $connection_requests in a complete access log to count the connections that carried one)".into());
    };
    let Some((carried, missing)) = a.connections_carried() else {
        return Err("how many of them carried a request is unknown: the access log does not hold every request with $connection_requests (1 on a connection's first request), which counts the connections that carried one".into());
    };
    // A connection whose first request is still running at the period's end has no
    // line yet (nginx logs a request when it ends: a WebSocket, a stream, a long
    // download): the connections open then (nginx's gauge) may each be one.
    let Some(open) = open else {
        return Err("how many of them carried a request is unknown: nginx's count of open connections is not read, and a connection whose first request is still running has no access-log line yet".into());
    };
    Ok(HandshakesWithoutRequest {
        min: t.handshakes.saturating_sub(carried + missing + open),
        carried,
        missing,
        open,
    })
}

impl HandshakesWithoutRequest {
    /// `at least N of the completed handshakes carried no request (M connections
    /// carried one: ...)`, or None when the floor is 0.
    pub fn said(&self) -> Option<String> {
        if self.min == 0 {
            return None;
        }
        let less = match self.missing {
            0 => format!(", less the {} connections open at the end (stub_status active: a first request may still be running)", self.open),
            m => format!(", less {m} requests the log may miss and the {} connections open at the end (stub_status active: a first request may still be running)", self.open),
        };
        Some(format!(
            "at least {} of the completed handshakes carried no request ({} connections carried one: access log, $connection_requests 1, all ports{less})",
            self.min, self.carried
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trial 16: a buffered log (`buffer=4k flush=1s`, so not proven to hold every
    /// request) that holds all of nginx's 123121 requests, 129 connections with a first
    /// request, 229 handshakes, none open: exactly 100 carried none. Without nginx's
    /// count kept (older recordings), the rounded share allows 61 requests missing.
    #[test]
    fn a_buffered_log_holding_every_request_misses_none() {
        let mut a = AccessLogReport {
            lines: 123_121,
            statuses: [("200".to_string(), 123_121)].into(),
            connections_with_requests: Some(129),
            share_logged: Some(1.0),
            nginx_requests: Some(123_121),
            ..Default::default()
        };
        let t = TlsReport {
            handshakes: 229,
            handshakes_from: Some("ngx_ssl_ocsp_validate".into()),
            ..Default::default()
        };
        let u = handshakes_without_request(&t, Some(&a), None, false, Some(0)).unwrap();
        assert_eq!((u.min, u.carried, u.missing), (100, 129, 0));
        a.nginx_requests = None;
        let u = handshakes_without_request(&t, Some(&a), None, false, Some(0)).unwrap();
        assert_eq!((u.min, u.missing), (39, 61));
    }
}
