//! TLS handshakes of nginx's client connections. Completed handshakes are counted in
//! nginx's own code (one entry uprobe per handshake, kept on between `--detail sampled`
//! windows); libssl's calls (when a handshake starts, how long it takes, how many are
//! abandoned) are timed by the `SSL_do_handshake`/`SSL_free` programs, attached
//! continuously with `--detail full` or when nginx's symbol is missing, else only inside
//! detail windows.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user},
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};
use nginx_probe_common::{SyscallStats, TLS_STATS};

use crate::{
    helpers::{count_in_slot, detail_closed},
    maps::{DETAIL_GATE, HS_CALL, HS_START, TLS, TLS_CLIENT, TLS_DONE},
    workers::{slot_of, worker_slot},
};

/// Offset of `listening` in nginx's `ngx_connection_t` on 64-bit: after `data`, `read`,
/// `write`, `fd` (4 bytes and padding), `recv`, `send`, `recv_chain`, `send_chain`. The
/// head of the struct has had this layout in every nginx since 0.x (1.22 and 1.26
/// checked).
pub(crate) const CONN_LISTENING: u64 = 64;

/// `ngx_int_t ngx_ssl_ocsp_validate(ngx_connection_t *c)`, in nginx's binary (nginx
/// 1.19+). `ngx_ssl_handshake` calls it once when `SSL_do_handshake` returns 1, on
/// every TLS connection, TCP and QUIC; a connection nginx accepted has `c->listening`
/// set, one nginx opened to an upstream has it NULL and is not counted. With
/// `ssl_ocsp on` (client certificates checked against an OCSP responder), a handshake
/// whose check waits for the responder calls it again when the answer comes, so it is
/// counted once per such wait as well.
#[uprobe]
pub fn ngx_ssl_ocsp_validate(ctx: ProbeContext) -> u32 {
    let Some(slot) = worker_slot() else { return 0 };
    let Some(c) = ctx.arg::<u64>(0) else { return 0 };
    // SAFETY: reads 8 bytes of the worker's memory; failure is handled.
    match unsafe { bpf_probe_read_user((c + CONN_LISTENING) as *const u64) } {
        Ok(l) if l != 0 => {}
        _ => return 0,
    }
    count_in_slot(&TLS_DONE, slot);
    0
}

/// `void SSL_set_connect_state(SSL *s)`, in libssl: nginx's `ngx_ssl_create_connection`
/// calls it for a connection to an upstream (`proxy_ssl`, `grpc_ssl`, ...), once,
/// before its first `SSL_do_handshake`; client connections get `SSL_set_accept_state`.
#[uprobe]
pub fn ssl_set_connect_state(ctx: ProbeContext) -> u32 {
    let Some((pid_tgid, _, ssl)) = libssl_call(&ctx) else {
        return 0;
    };
    let _ = TLS_CLIENT.insert([pid_tgid >> 32, ssl], 1u8, 0);
    0
}

/// Whether the libssl programs must count nothing now: they are in the detail layer
/// (`DETAIL_GATE` element 1 = 1, set by user space when nginx's own handshake count is
/// attached) and the detail gate is closed (between windows).
#[inline(always)]
fn tls_gate_closed() -> bool {
    matches!(DETAIL_GATE.get(1), Some(&1)) && detail_closed()
}

/// `BPF_NOEXIST`: insert only when the key is absent.
const BPF_NOEXIST: u64 = 1;

/// What every libssl entry program starts from: nothing while the gate is closed or
/// for other processes, else (pid_tgid, worker slot, the `SSL*` argument).
#[inline(always)]
fn libssl_call(ctx: &ProbeContext) -> Option<(u64, u32, u64)> {
    if tls_gate_closed() {
        return None;
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    let slot = slot_of((pid_tgid >> 32) as u32)?;
    Some((pid_tgid, slot, ctx.arg::<u64>(0)?))
}

#[inline(always)]
fn tls_stats(slot: u32, i: u32) -> Option<&'static mut SyscallStats> {
    // SAFETY: per-CPU element; uprobe programs do not nest on one CPU.
    TLS.get_ptr_mut(slot * TLS_STATS + i)
        .map(|p| unsafe { &mut *p })
}

/// `int SSL_do_handshake(SSL *s)` entry, in libssl: the first call on `s` starts a
/// handshake; every call is timed to its return.
#[uprobe]
pub fn ssl_do_handshake(ctx: ProbeContext) -> u32 {
    let Some((pid_tgid, slot, ssl)) = libssl_call(&ctx) else {
        return 0;
    };
    // SAFETY: only presence is read.
    if unsafe { TLS_CLIENT.get([pid_tgid >> 32, ssl]) }.is_some() {
        return 0;
    }
    // SAFETY: helper call without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    if HS_START
        .insert([pid_tgid >> 32, ssl], now, BPF_NOEXIST)
        .is_ok()
    {
        if let Some(s) = tls_stats(slot, 0) {
            s.count += 1;
        }
    }
    let _ = HS_CALL.insert(pid_tgid, [ssl, now], 0);
    0
}

/// `SSL_do_handshake` return: 1 completes the handshake of the `SSL*` (wall time
/// from its first call); anything else (WANT_READ/WANT_WRITE, errors) leaves it open.
#[uretprobe]
pub fn ssl_do_handshake_ret(ctx: RetProbeContext) -> u32 {
    if tls_gate_closed() {
        return 0;
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(slot) = slot_of((pid_tgid >> 32) as u32) else {
        return 0;
    };
    // SAFETY: copied out before removal.
    let Some([ssl, entered]) = (unsafe { HS_CALL.get(pid_tgid) }).copied() else {
        return 0;
    };
    let _ = HS_CALL.remove(pid_tgid);
    // SAFETY: helper call without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    if let Some(s) = tls_stats(slot, 1) {
        s.count += 1;
        s.record_ns(now.saturating_sub(entered));
    }
    let ret: i32 = ctx.ret();
    if ret != 1 {
        return 0;
    }
    let key = [pid_tgid >> 32, ssl];
    // SAFETY: copied out before removal.
    if let Some(start) = (unsafe { HS_START.get(key) }).copied() {
        let _ = HS_START.remove(key);
        if let Some(s) = tls_stats(slot, 0) {
            s.record_ns(now.saturating_sub(start));
        }
    }
    0
}

/// `void SSL_free(SSL *s)`: a handshake still open on `s` was abandoned (client gone,
/// protocol error, timeout).
#[uprobe]
pub fn ssl_free(ctx: ProbeContext) -> u32 {
    let Some((pid_tgid, slot, ssl)) = libssl_call(&ctx) else {
        return 0;
    };
    let key = [pid_tgid >> 32, ssl];
    let _ = TLS_CLIENT.remove(key);
    // SAFETY: only presence is read.
    if unsafe { HS_START.get(key) }.is_some() {
        let _ = HS_START.remove(key);
        if let Some(s) = tls_stats(slot, 0) {
            s.errors += 1;
        }
    }
    0
}
