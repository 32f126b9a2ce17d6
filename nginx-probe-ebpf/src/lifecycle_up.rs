//! The lifecycle of the TCP connections nginx's workers open (upstream peers),
//! continuous layer, counted per peer address: see `nginx_probe_common::lifecycle::up`.
//! A socket is nginx's from its `CLOSE -> SYN_SENT`, which runs in the `connect()` of
//! the task: a tracked worker's. It is then followed by its pointer (`LC_UP_SOCKS`),
//! so its later state changes in softirq are still attributed to nginx.

use aya_ebpf::{helpers::bpf_get_current_pid_tgid, programs::TracePointContext};
use nginx_probe_common::lifecycle::{
    self as lc, raw_off,
    up::{self, PeerKey, UpPeerStats},
};

use crate::{
    helpers::record_at,
    lifecycle::{
        awaiting_response, idle_ms, ms_since_remote_data, raw_read, remote_data_within_a_jiffy,
        task_exiting, IPPROTO_TCP, TCP_CLOSE, TCP_CLOSE_WAIT, TCP_ESTABLISHED, TCP_FIN_WAIT1,
        TCP_SYN_SENT,
    },
    maps::{LC_UP_PEERS, LC_UP_SOCKS, LC_UP_ZERO},
    workers::slot_of,
};

const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;
/// `bpf_map_update_elem` flag: only a new key.
const BPF_NOEXIST: u64 = 1;

/// Adds `n` to counter `i` of the peer's counters at `p`, atomically (a hash map value
/// shared by every CPU).
#[inline(always)]
fn up_add(p: *mut UpPeerStats, i: usize, n: u64) {
    if i >= up::UP_PER_PEER {
        return;
    }
    use core::intrinsics::{atomic_xadd, AtomicOrdering};
    // SAFETY: `p` is a valid map value; `i` is in bounds; the BPF atomic add without
    // fetch.
    unsafe {
        atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(core::ptr::addr_of_mut!((*p).c[i]), n)
    };
}

/// Raises counter `i` to `v` (not atomic: a race can lose one extreme, never a count).
#[inline(always)]
fn up_max(p: *mut UpPeerStats, i: usize, v: u64) {
    if i >= up::UP_PER_PEER {
        return;
    }
    // SAFETY: `p` is a valid map value; `i` is in bounds.
    unsafe {
        if v > (*p).c[i] {
            (*p).c[i] = v;
        }
    }
}

/// The counters of `key`, inserted zeroed if new; those of the other peers (family 0,
/// inserted by user space at load) when the map is full.
#[inline(always)]
fn stats_of(key: &PeerKey) -> Option<*mut UpPeerStats> {
    if let Some(p) = LC_UP_PEERS.get_ptr_mut(key) {
        return Some(p);
    }
    if let Some(z) = LC_UP_ZERO.get_ptr(0) {
        // SAFETY: a valid map value of the right type; the helper copies it. By
        // reference: by value it would be copied onto the 512-byte eBPF stack.
        #[allow(clippy::needless_borrows_for_generic_args)]
        let _ = LC_UP_PEERS.insert(key, unsafe { &*z }, BPF_NOEXIST);
    }
    if let Some(p) = LC_UP_PEERS.get_ptr_mut(key) {
        return Some(p);
    }
    LC_UP_PEERS.get_ptr_mut(PeerKey::default())
}

/// An idle time (ms) into a count, a sum, the since-attach extremes and a log2
/// histogram.
#[inline(always)]
fn up_idle(p: *mut UpPeerStats, ms: u64, [count, sum, max, inv_min, hist]: [usize; 5]) {
    up_add(p, count, 1);
    up_add(p, sum, ms);
    up_max(p, max, ms);
    up_max(p, inv_min, !ms);
    up_add(p, hist + lc::idle_bucket(ms), 1);
}

/// nginx closed its connection `sk` to the peer of `p` first: awaiting a response
/// (with how long), else its idle time, and whether the peer's data came in the
/// close's last jiffy.
#[inline(always)]
fn up_nginx_close(p: *mut UpPeerStats, sk: u64) {
    up_add(p, up::CLOSED_BY_NGINX, 1);
    match awaiting_response(sk) {
        Some((true, ms)) => {
            up_add(p, up::NGINX_CLOSED_AWAITING, 1);
            up_add(p, up::NGINX_AWAITING_SUM_MS, ms);
        }
        Some(_) => {
            if let Some((ms, _)) = idle_ms(sk, true) {
                up_add(p, up::NGINX_IDLE_COUNT, 1);
                up_add(p, up::NGINX_IDLE_SUM_MS, ms);
            }
            if remote_data_within_a_jiffy(sk) {
                up_add(p, up::NGINX_CLOSED_AFTER_PEER_DATA, 1);
            }
        }
        None => {}
    }
}

/// A state change of a socket that is not on one of nginx's listening ports: a
/// connection a worker opens (marked at its `connect()`), or nothing of nginx's.
/// `peer` reads the peer of a socket being connected.
#[inline(always)]
pub(crate) fn up_set_state(sk: u64, old: i32, new: i32, peer: impl FnOnce() -> Option<PeerKey>) {
    if sk == 0 {
        return;
    }
    if old == TCP_CLOSE && new == TCP_SYN_SENT {
        if slot_of((bpf_get_current_pid_tgid() >> 32) as u32).is_none() {
            return;
        }
        let Some(key) = peer() else { return };
        let _ = LC_UP_SOCKS.insert(sk, key, 0);
        if let Some(p) = stats_of(&key) {
            up_add(p, up::CONNECTS, 1);
        }
        return;
    }
    // SAFETY: the value is copied out at once.
    let Some(key) = (unsafe { LC_UP_SOCKS.get(sk) }).copied() else {
        return;
    };
    if let Some(p) = stats_of(&key) {
        match (old, new) {
            (TCP_SYN_SENT, TCP_ESTABLISHED) => up_add(p, up::ESTABLISHED, 1),
            (TCP_SYN_SENT, TCP_CLOSE) => up_add(p, up::CONNECT_FAILED, 1),
            (TCP_ESTABLISHED, TCP_FIN_WAIT1) if task_exiting() => {
                up_add(p, up::CLOSED_BY_WORKER_EXIT, 1)
            }
            (TCP_ESTABLISHED, TCP_FIN_WAIT1) => up_nginx_close(p, sk),
            (TCP_ESTABLISHED, TCP_CLOSE_WAIT) => {
                up_add(p, up::CLOSED_BY_PEER, 1);
                match idle_ms(sk, false) {
                    Some((_, true)) => up_add(p, up::PEER_CLOSED_AFTER_ITS_DATA, 1),
                    Some((ms, false)) => {
                        let at = [
                            up::PEER_IDLE_COUNT,
                            up::PEER_IDLE_SUM_MS,
                            up::PEER_IDLE_MAX_MS,
                            up::PEER_IDLE_INV_MIN_MS,
                            up::PEER_IDLE_HIST,
                        ];
                        up_idle(p, ms, at);
                    }
                    None => {}
                }
            }
            (TCP_ESTABLISHED, TCP_CLOSE) => {
                up_add(p, up::CLOSED_BY_RESET, 1);
                if let Some(ms) = ms_since_remote_data(sk) {
                    let at = [
                        up::RESET_IDLE_COUNT,
                        up::RESET_IDLE_SUM_MS,
                        up::RESET_IDLE_MAX_MS,
                        up::RESET_IDLE_INV_MIN_MS,
                        up::RESET_IDLE_HIST,
                    ];
                    up_idle(p, ms, at);
                }
            }
            _ => {}
        }
    }
    if new == TCP_CLOSE {
        let _ = LC_UP_SOCKS.remove(sk);
    }
}

/// The peer of the TCP socket `sk`, read with the kernel's BTF offsets.
#[inline(always)]
pub(crate) fn raw_peer(sk: u64) -> Option<PeerKey> {
    if raw_read::<u16>(sk, raw_off::SK_PROTOCOL)? != IPPROTO_TCP {
        return None;
    }
    let family = raw_read::<u16>(sk, raw_off::SKC_FAMILY)?;
    let port = u16::from_be(raw_read::<u16>(sk, raw_off::SKC_DPORT)?);
    let mut key = PeerKey {
        family,
        port,
        addr: [0; 16],
    };
    match family {
        AF_INET => {
            let a = raw_read::<[u8; 4]>(sk, raw_off::SKC_DADDR)?;
            key.addr[..4].copy_from_slice(&a);
        }
        AF_INET6 => key.addr = raw_read::<[u8; 16]>(sk, raw_off::SKC_V6_DADDR)?,
        _ => return None,
    }
    Some(key)
}

/// The peer of a `sock:inet_sock_set_state` record (TCP checked by the caller):
/// `family` at 28, `dport` (host order) at 26, `daddr` at 36, `daddr_v6` at 56.
#[inline(always)]
pub(crate) fn record_peer(ctx: &TracePointContext) -> Option<PeerKey> {
    let family = record_at::<u16>(ctx, 28);
    let mut key = PeerKey {
        family,
        port: record_at::<u16>(ctx, 26),
        addr: [0; 16],
    };
    match family {
        AF_INET => key.addr[..4].copy_from_slice(&record_at::<[u8; 4]>(ctx, 36)),
        AF_INET6 => key.addr = record_at::<[u8; 16]>(ctx, 56),
        _ => return None,
    }
    Some(key)
}
