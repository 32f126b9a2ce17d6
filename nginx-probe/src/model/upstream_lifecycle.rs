//! The TCP connections nginx's workers open, per upstream peer address: connects,
//! handshakes, who closed first (nginx, the peer, a reset, the worker's exit), the
//! idle time before the peer's closes (how long a pooled connection sat before the
//! peer gave up on it), and how long after the peer's last data a reset came (a
//! request sent on a connection the peer had already dropped). Built from the
//! cumulative in-kernel counters of `nginx_probe_common::lifecycle::up` (source:
//! `sock:inet_sock_set_state` on sockets marked at a tracked worker's `connect()`;
//! idle times from `tcp_sock.lsndtime` and `icsk_ack.lrcvtime`). Pure.

use std::{
    collections::BTreeMap,
    net::{Ipv4Addr, Ipv6Addr},
};

use nginx_probe_common::lifecycle::up::{self, PeerKey};
use serde::{Deserialize, Serialize};

use crate::model::idle::{idle_report, IdleAt, IdleReport};

/// Source line of the upstream peers' counts.
pub const SOURCE: &str = "tracepoint sock:inet_sock_set_state on the TCP sockets nginx's workers connect (marked at their CLOSE -> SYN_SENT in a worker's connect(), followed by socket from then on); idle times from tcp_sock.lsndtime and icsk_ack.lrcvtime";

/// The peer's idle time before its closes in `up::UpPeerStats`.
const PEER_IDLE: IdleAt = IdleAt {
    count: up::PEER_IDLE_COUNT,
    sum: up::PEER_IDLE_SUM_MS,
    max: up::PEER_IDLE_MAX_MS,
    inv_min: up::PEER_IDLE_INV_MIN_MS,
    hist: up::PEER_IDLE_HIST,
};

/// Time since the peer's last data at a reset, in `up::UpPeerStats`.
const RESET_IDLE: IdleAt = IdleAt {
    count: up::RESET_IDLE_COUNT,
    sum: up::RESET_IDLE_SUM_MS,
    max: up::RESET_IDLE_MAX_MS,
    inv_min: up::RESET_IDLE_INV_MIN_MS,
    hist: up::RESET_IDLE_HIST,
};

/// One upstream peer's connections in the period.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PeerLifecycle {
    /// `ip:port` (`[ip6]:port`), or `other peers` (those beyond the first
    /// `UP_MAX_PEERS - 1` seen, summed).
    pub peer: String,
    /// `connect()`s by nginx's workers (`CLOSE -> SYN_SENT`).
    pub connects: u64,
    /// Handshakes completed (`SYN_SENT -> ESTABLISHED`).
    pub established: u64,
    /// Connects that never established (`SYN_SENT -> CLOSE`: refused, timed out,
    /// unreachable, or given up by nginx).
    pub connect_failed: u64,
    /// nginx closed first (`ESTABLISHED -> FIN_WAIT1`): the TIME-WAIT is nginx's.
    pub closed_by_nginx: u64,
    /// The peer closed first (`ESTABLISHED -> CLOSE_WAIT`).
    pub closed_by_peer: u64,
    /// Ended by a reset while established (`ESTABLISHED -> CLOSE`).
    pub closed_by_reset: u64,
    /// Closed by the kernel as the worker exited (`PF_EXITING`).
    #[serde(default)]
    pub closed_by_worker_exit: u64,
    /// Idle time before the peer's closes that came with nothing from the peer in the
    /// close's last jiffy (since the last data either way): how long a kept-alive
    /// connection sat before the peer closed it. Absent when not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_before_peer_close: Option<IdleReport>,
    /// Of `closed_by_peer`, closes right after the peer's own data (at most one
    /// jiffy): a response with `Connection: close`, or a TLS close_notify (not told
    /// apart); not in `idle_before_peer_close`, since a connection busy with a slow
    /// response is not idle.
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub closed_by_peer_after_its_data: u64,
    /// Time since the peer's last data when a reset ended an established connection,
    /// ms: a reset on a request sent to a connection idle that long. Absent when not
    /// measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_peer_data_at_reset: Option<IdleReport>,
    /// Mean idle time before nginx's own closes, ms, those awaiting a response left
    /// out. Absent when not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_before_nginx_close_mean_ms: Option<f64>,
    /// Of `closed_by_nginx`, closes while awaiting the peer's response: nginx's last
    /// data sent (`tcp_sock.lsndtime`) later than the peer's (`icsk_ack.lrcvtime`):
    /// a request sent, nothing back since (`proxy_read_timeout`, a client gone, a
    /// worker's shutdown). Absent when 0.
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub closed_by_nginx_awaiting_response: u64,
    /// Their mean time since nginx's last data, ms: how long the response was awaited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub awaited_before_nginx_close_mean_ms: Option<f64>,
    /// Of `closed_by_nginx`, closes not awaiting a response with the peer's last data
    /// (`icsk_ack.lrcvtime`) at most one jiffy before: nginx ending the connection on
    /// the response it just read (it asked the peer to close, or the response said so:
    /// HTTP/1.0, `Connection: close`), its FIN racing the peer's own. With
    /// `closed_by_peer_after_its_data`, the connections that ended with a response.
    /// Absent when 0 (and not counted when idle times are not measured).
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub closed_by_nginx_after_peer_data: u64,
    /// The peer's address is one of nginx's network namespace's own (its interfaces,
    /// getifaddrs in the namespace, read when the report is built): a connect to it
    /// reaches nginx's wildcard listeners as loopback does. Absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub own_address: bool,
}

impl PeerLifecycle {
    /// The counts by event, named as the metrics label them: `connect`,
    /// `established`, `connect_failed`, `closed_by_nginx`, `closed_by_peer`,
    /// `closed_by_reset`, `closed_by_worker_exit`.
    pub fn events(&self) -> [(&'static str, u64); 7] {
        [
            ("connect", self.connects),
            ("established", self.established),
            ("connect_failed", self.connect_failed),
            ("closed_by_nginx", self.closed_by_nginx),
            ("closed_by_peer", self.closed_by_peer),
            ("closed_by_reset", self.closed_by_reset),
            ("closed_by_worker_exit", self.closed_by_worker_exit),
        ]
    }
}

/// `ip:port` of a peer key, `[ip6]:port` for IPv6, `other peers` for family 0.
pub fn peer_name(k: &PeerKey) -> String {
    match k.family {
        2 => {
            let a = Ipv4Addr::new(k.addr[0], k.addr[1], k.addr[2], k.addr[3]);
            format!("{a}:{}", k.port)
        }
        10 => format!("[{}]:{}", Ipv6Addr::from(k.addr), k.port),
        0 => "other peers".into(),
        f => format!("family {f} port {}", k.port),
    }
}

/// `sum / n` ms to the µs, when timed and `n > 0`.
fn mean_ms(timed: bool, sum: u64, n: u64) -> Option<f64> {
    (timed && n > 0).then(|| (sum as f64 / n as f64 * 1000.0).round() / 1000.0)
}

/// Every peer with anything in the period between `prev` (None: attach) and `cur`
/// (cumulative counters per peer, `LifecycleRaw::peers`), by peer address (the other
/// peers last); idle times only when `timed` (HZ and the BTF offsets known).
pub fn peer_lifecycles(
    cur: &BTreeMap<PeerKey, Vec<u64>>,
    prev: Option<&BTreeMap<PeerKey, Vec<u64>>>,
    timed: bool,
) -> Vec<PeerLifecycle> {
    let mut out: Vec<(bool, PeerLifecycle)> = Vec::new();
    for (k, c) in cur {
        if c.len() != up::UP_PER_PEER {
            continue;
        }
        let p = prev.and_then(|p| p.get(k));
        let d = |i: usize| c[i].saturating_sub(p.and_then(|p| p.get(i).copied()).unwrap_or(0));
        let r = PeerLifecycle {
            peer: peer_name(k),
            connects: d(up::CONNECTS),
            established: d(up::ESTABLISHED),
            connect_failed: d(up::CONNECT_FAILED),
            closed_by_nginx: d(up::CLOSED_BY_NGINX),
            closed_by_peer: d(up::CLOSED_BY_PEER),
            closed_by_reset: d(up::CLOSED_BY_RESET),
            closed_by_worker_exit: d(up::CLOSED_BY_WORKER_EXIT),
            idle_before_peer_close: timed
                .then(|| idle_report(c, &d, &PEER_IDLE))
                .filter(|i| i.count > 0),
            closed_by_peer_after_its_data: d(up::PEER_CLOSED_AFTER_ITS_DATA),
            since_peer_data_at_reset: timed
                .then(|| idle_report(c, &d, &RESET_IDLE))
                .filter(|i| i.count > 0),
            idle_before_nginx_close_mean_ms: mean_ms(
                timed,
                d(up::NGINX_IDLE_SUM_MS),
                d(up::NGINX_IDLE_COUNT),
            ),
            closed_by_nginx_awaiting_response: d(up::NGINX_CLOSED_AWAITING),
            awaited_before_nginx_close_mean_ms: mean_ms(
                timed,
                d(up::NGINX_AWAITING_SUM_MS),
                d(up::NGINX_CLOSED_AWAITING),
            ),
            closed_by_nginx_after_peer_data: d(up::NGINX_CLOSED_AFTER_PEER_DATA),
            own_address: false,
        };
        if r.events().iter().any(|(_, n)| *n > 0) {
            out.push((k.family == 0, r));
        }
    }
    out.sort_by_key(|a| a.0);
    out.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(port: u16) -> PeerKey {
        let mut addr = [0; 16];
        addr[..4].copy_from_slice(&[127, 0, 0, 2]);
        PeerKey {
            family: 2,
            port,
            addr,
        }
    }

    fn raw(set: &[(PeerKey, &[(usize, u64)])]) -> BTreeMap<PeerKey, Vec<u64>> {
        let mut r = BTreeMap::new();
        for (k, counters) in set {
            let mut v = vec![0; up::UP_PER_PEER];
            for &(i, n) in counters.iter() {
                v[i] = n;
            }
            r.insert(*k, v);
        }
        r
    }

    #[test]
    fn peer_names_for_people() {
        assert_eq!(peer_name(&key(8080)), "127.0.0.2:8080");
        let mut v6 = PeerKey {
            family: 10,
            port: 443,
            addr: [0; 16],
        };
        v6.addr[15] = 1;
        assert_eq!(peer_name(&v6), "[::1]:443");
        assert_eq!(peer_name(&PeerKey::default()), "other peers");
    }

    #[test]
    fn a_peer_closing_pooled_connections_at_one_second_is_pinned() {
        let idle: &[(usize, u64)] = &[
            (up::CONNECTS, 10),
            (up::ESTABLISHED, 10),
            (up::CLOSED_BY_PEER, 10),
            (up::PEER_IDLE_COUNT, 10),
            (up::PEER_IDLE_SUM_MS, 10_040),
            (up::PEER_IDLE_MAX_MS, 1008),
            (up::PEER_IDLE_INV_MIN_MS, !1000u64),
            (up::PEER_IDLE_HIST + 9, 10),
        ];
        let other: &[(usize, u64)] = &[(up::CONNECTS, 1), (up::CONNECT_FAILED, 1)];
        let cur = raw(&[(PeerKey::default(), other), (key(8080), idle)]);
        let prev = raw(&[(key(8080), &[(up::CONNECTS, 2)])]);
        let v = peer_lifecycles(&cur, Some(&prev), true);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].peer, "127.0.0.2:8080", "named peers first");
        assert_eq!((v[0].connects, v[0].closed_by_peer), (8, 10));
        let i = v[0].idle_before_peer_close.as_ref().unwrap();
        assert_eq!(i.pinned_ms, Some(1004.0));
        assert_eq!(v[1].peer, "other peers");
        assert_eq!(v[1].connect_failed, 1);
        assert_eq!(v[0].events()[0], ("connect", 8));
    }

    #[test]
    fn without_hz_no_idle_time_is_claimed() {
        let cur = raw(&[(
            key(80),
            &[(up::CLOSED_BY_PEER, 3), (up::PEER_IDLE_COUNT, 3)],
        )]);
        let v = peer_lifecycles(&cur, None, false);
        assert_eq!(v[0].closed_by_peer, 3);
        assert!(v[0].idle_before_peer_close.is_none());
    }

    /// Resets all 1000 ms after the peer's last data read as 1000 ms (p50, minimum),
    /// not a value interpolated down from the bucket's floor; closes right after the
    /// peer's own data are counted apart, with no idle time.
    #[test]
    fn resets_at_one_second_read_one_second_and_busy_closes_no_idle() {
        let cur = raw(&[(
            key(80),
            &[
                (up::CLOSED_BY_RESET, 6),
                (up::RESET_IDLE_COUNT, 6),
                (up::RESET_IDLE_SUM_MS, 6000),
                (up::RESET_IDLE_MAX_MS, 1000),
                (up::RESET_IDLE_INV_MIN_MS, !1000u64),
                (up::RESET_IDLE_HIST + 9, 6),
                (up::CLOSED_BY_PEER, 4),
                (up::PEER_CLOSED_AFTER_ITS_DATA, 4),
            ],
        )]);
        let v = peer_lifecycles(&cur, None, true);
        let r = v[0].since_peer_data_at_reset.as_ref().unwrap();
        assert_eq!(
            (r.p50_ms, r.min_ms_since_attach, r.max_ms_since_attach),
            (1000, 1000, 1000)
        );
        assert_eq!(v[0].closed_by_peer_after_its_data, 4);
        assert!(v[0].idle_before_peer_close.is_none());
    }
}
