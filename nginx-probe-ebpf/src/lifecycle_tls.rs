//! Who began a TLS close. nginx writes its close_notify (and an HTTP/2 GOAWAY) before
//! its `close()`; a client that closes on reading it can get its FIN in first, so
//! the state changes alone would count nginx's keepalive timeout as the client's close.
//! The uprobe on `ngx_ssl_shutdown(c)` sees the close before anything is written: when
//! the connection is a client's (`c->listening`), nginx has not read the client's EOF
//! (`c->read->eof` 0) and the socket is still `ESTABLISHED`, nginx began the close;
//! the socket (`c->fd` through the worker's fd table) is marked in `LC_TLS_CLOSING`
//! with the facts read then (worker, drain state, idle time before the close_notify),
//! and the state change that ends the close counts it as nginx's (see
//! `lifecycle::on_set_state`). The other way round, when nginx had read the client's
//! close_notify or EOF (`c->read->eof`) and the socket is still `ESTABLISHED`, the
//! client began the close: nginx answers at once and its FIN can go out before the
//! client's, which the state changes alone would count as nginx's close; the socket
//! is marked as the client's (`CLIENT_BEGAN`). So is one in `CLOSE_WAIT` whose
//! close_notify nginx read: OpenSSL read the alert, not the FIN behind it, which the
//! rule of `lifecycle::on_close_after_fin` (a FIN unread at nginx's close) would
//! otherwise take for nginx's own close.

use aya_ebpf::{helpers::bpf_probe_read_user, macros::uprobe, programs::ProbeContext};
use nginx_probe_common::{lifecycle as lc, lifecycle::raw_off, off};

use crate::{
    fds::{fd_file, fd_walk, kread, S_IFMT, S_IFSOCK},
    lifecycle::{
        client_close_facts, close_facts, count_nginx_close, fin_after_nginx_data, lc_add, raw_base,
        raw_read, CloseFacts, TCP_CLOSE_WAIT, TCP_ESTABLISHED,
    },
    maps::{LC_TLS_CLOSING, LC_TLS_ON},
    tls::CONN_LISTENING,
    workers::worker_slot,
};

/// Offset of `read` (`ngx_event_t *`) in `ngx_connection_t` on 64-bit, after `data`.
pub(crate) const CONN_READ: u64 = 8;
/// Offset of `fd` (`ngx_socket_t`, an int) in `ngx_connection_t` on 64-bit, after
/// `data`, `read`, `write`.
const CONN_FD: u64 = 24;
/// Offset of the flag bits in `ngx_event_t` on 64-bit, after `void *data`: `write`,
/// `accept`, `instance`, `active`, `disabled`, `ready`, `oneshot`, `complete`, `eof`,
/// `error`, `timedout`... one bit each from bit 0, in every nginx from 1.14 to 1.29
/// (checked in the sources of 1.14, 1.18, 1.22, 1.26 and the current one).
pub(crate) const EV_FLAGS: u64 = 8;
/// `ngx_event_t.eof`: nginx read the peer's EOF (a FIN, or a TLS close_notify:
/// `ngx_ssl_recv` sets it on `NGX_DONE`).
const EV_EOF: u32 = 1 << 8;

/// A socket whose TLS close nginx began: the facts read at its `ngx_ssl_shutdown`, and
/// whether the close was already counted (the client's FIN came first); or one whose
/// close the client began ([`CLIENT_BEGAN`]: its facts are the client's side's,
/// `lifecycle::client_close_facts`).
#[derive(Clone, Copy)]
#[repr(C)]
pub(crate) struct TlsClose {
    pub(crate) facts: CloseFacts,
    counted: u64,
}

/// [`TlsClose::counted`] of a socket whose client began the close: nginx had read its
/// close_notify or EOF (`c->read->eof`) when it called `ngx_ssl_shutdown`.
const CLIENT_BEGAN: u64 = 2;

impl TlsClose {
    /// Whether the client began this close (see [`CLIENT_BEGAN`]).
    #[inline(always)]
    pub(crate) fn client_began(&self) -> bool {
        self.counted == CLIENT_BEGAN
    }

    /// Whether nginx began this close and it is not counted yet.
    #[inline(always)]
    pub(crate) fn nginx_began_uncounted(&self) -> bool {
        self.counted == 0
    }
}

/// Reads a `T` at address `at` of the worker's memory.
#[inline(always)]
pub(crate) fn user<T>(at: u64) -> Option<T> {
    // SAFETY: bpf_probe_read_user copes with any address (faults return Err).
    unsafe { bpf_probe_read_user(at as *const T) }.ok()
}

/// The current task's TCP socket (`struct sock *`) on `fd`: the fd table walk, the file
/// a socket (`i_mode`), its `socket->sk`. None without the walk's offsets.
#[inline(always)]
fn sock_of_fd(fd: u64) -> Option<u64> {
    if !fd_walk() {
        return None;
    }
    let file = fd_file(fd)?;
    let inode = kread::<u64>(file, off::FILE_INODE)?;
    if kread::<u16>(inode, off::INODE_MODE)? & S_IFMT != S_IFSOCK {
        return None;
    }
    let sock = kread::<u64>(file, off::FILE_PRIVATE)?;
    kread::<u64>(sock, off::SOCKET_SK)
}

/// `ngx_int_t ngx_ssl_shutdown(ngx_connection_t *c)`, in nginx's binary: nginx is about
/// to end a TLS connection (write its close_notify unless quiet, then close). Marks
/// the client socket when nginx began the close (see the module doc). Also counts,
/// at once, a close nginx began with the client's FIN already in but unread (its
/// close_notify unread too: `c->read->eof` 0), nginx having sent data (a response
/// with `Connection: close` at keepalive_requests, an HTTP/2 GOAWAY at a timeout or
/// in its idle sweep) in the jiffy before this call or before the FIN came: the state
/// change counted it as the client's, which `lc::CLOSED_BY_CLIENT_ANSWERING_NGINX`
/// takes back. A client closing an idle connection on its own is read first
/// (`c->read->eof` set: the client's); so is one aborting a request nginx checks
/// (`ngx_http_upstream_check_broken_connection` sets it).
#[uprobe]
pub fn lc_ssl_shutdown(ctx: ProbeContext) -> u32 {
    let _ = on_ssl_shutdown(&ctx);
    0
}

#[inline(always)]
fn on_ssl_shutdown(ctx: &ProbeContext) -> Option<()> {
    worker_slot()?;
    let c: u64 = ctx.arg(0)?;
    if user::<u64>(c + CONN_LISTENING)? == 0 {
        return None;
    }
    let ev = user::<u32>(user::<u64>(c + CONN_READ)? + EV_FLAGS)?;
    let fd = user::<i32>(c + CONN_FD)?;
    if fd < 0 {
        return None;
    }
    let sk = sock_of_fd(fd as u64)?;
    let base = raw_base(sk)?;
    let state = i32::from(raw_read::<u8>(sk, raw_off::SK_STATE)?);
    if ev & EV_EOF != 0 {
        // nginx read the client's close_notify (or its EOF): the client began the
        // close, even when nginx's close() gets its FIN out before the client's, or
        // when the client's FIN is in but unread (OpenSSL read the alert only).
        if state == TCP_ESTABLISHED || state == TCP_CLOSE_WAIT {
            let facts = client_close_facts(sk);
            mark(
                sk,
                TlsClose {
                    facts,
                    counted: CLIENT_BEGAN,
                },
            );
        }
        return None;
    }
    let facts = close_facts(sk);
    if state == TCP_ESTABLISHED {
        mark(sk, TlsClose { facts, counted: 0 });
    } else if state == TCP_CLOSE_WAIT && (facts.wrote() || fin_after_nginx_data(sk)) {
        count_nginx_close(base, &facts);
        lc_add(base, lc::CLOSED_BY_NGINX_CLIENT_FIN_FIRST, 1);
        lc_add(base, lc::CLOSED_BY_CLIENT_ANSWERING_NGINX, 1);
        mark(sk, TlsClose { facts, counted: 1 });
    }
    Some(())
}

/// Marks `sk` in `LC_TLS_CLOSING`, after setting `LC_TLS_ON` (so the state change that
/// ends the close, on any CPU, looks it up).
#[inline(always)]
fn mark(sk: u64, t: TlsClose) {
    if let Some(p) = LC_TLS_ON.get_ptr_mut(0) {
        // SAFETY: a valid u32 of the array; every writer writes 1.
        unsafe {
            if *p == 0 {
                *p = 1;
            }
        }
    }
    let _ = LC_TLS_CLOSING.insert(sk, t, 0);
}

/// Whether any TLS close was ever marked (`LC_TLS_ON`, set by [`mark`]): until then,
/// on an nginx serving no TLS, the state changes of every connection skip the hash
/// lookups of `LC_TLS_CLOSING`.
#[inline(always)]
pub(crate) fn tls_closes_on() -> bool {
    LC_TLS_ON.get(0) == Some(&1)
}

/// Takes `sk`'s mark out of `LC_TLS_CLOSING`, when there is one.
#[inline(always)]
pub(crate) fn tls_close_take(sk: u64) -> Option<TlsClose> {
    if !tls_closes_on() {
        return None;
    }
    // SAFETY: the value is copied out at once.
    let t = unsafe { LC_TLS_CLOSING.get(sk) }.copied()?;
    let _ = LC_TLS_CLOSING.remove(sk);
    Some(t)
}

/// The client's FIN on `sk` of port `base`: when nginx began its TLS close, counted as
/// nginx's close (once) with the facts of its `ngx_ssl_shutdown`, and true; the mark
/// stays for the worker's `close()` to find.
#[inline(always)]
pub(crate) fn tls_close_fin_first(base: u32, sk: u64) -> bool {
    if !tls_closes_on() {
        return false;
    }
    let Some(p) = LC_TLS_CLOSING.get_ptr_mut(sk) else {
        return false;
    };
    // SAFETY: a valid entry of the map; a socket's state changes are serialized by its
    // lock.
    let t = unsafe { &mut *p };
    if t.counted == CLIENT_BEGAN {
        // The client's own close: counted as the client's by the caller.
        return false;
    }
    if t.counted == 0 {
        t.counted = 1;
        let facts = t.facts;
        count_nginx_close(base, &facts);
        lc_add(base, lc::CLOSED_BY_NGINX_CLIENT_FIN_FIRST, 1);
    }
    true
}
