//! HTTP requests (`--uprobes`): started in `ngx_http_create_request`, ended in
//! `ngx_http_free_request`, timed between the two per connection.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user},
    macros::uprobe,
    programs::ProbeContext,
};
use nginx_probe_common::drop;

use crate::{
    helpers::count_drop,
    maps::{REQUESTS, REQ_START},
    workers::worker_slot,
};

/// `ngx_http_request_t *ngx_http_create_request(ngx_connection_t *c)`: one HTTP/1.x
/// request starts on connection `c`.
#[uprobe]
pub fn ngx_http_create_request(ctx: ProbeContext) -> u32 {
    let Some(slot) = worker_slot() else { return 0 };
    let Some(conn) = ctx.arg::<u64>(0) else {
        return 0;
    };
    // SAFETY: helper call without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let tgid = bpf_get_current_pid_tgid() >> 32;
    let _ = REQ_START.insert([tgid, conn], now, 0);
    if let Some(s) = REQUESTS.get_ptr_mut(slot) {
        // SAFETY: per-CPU slot.
        unsafe { (*s).count += 1 };
    } else {
        count_drop(drop::SLOT_OUT_OF_RANGE);
    }
    0
}

/// `void ngx_http_free_request(ngx_http_request_t *r, ngx_int_t rc)`: the request
/// ends. `r->connection` is the second field of `ngx_http_request_t` (offset 8 on
/// 64-bit, after `uint32_t signature`), stable across nginx versions.
#[uprobe]
pub fn ngx_http_free_request(ctx: ProbeContext) -> u32 {
    let Some(slot) = worker_slot() else { return 0 };
    let Some(r) = ctx.arg::<u64>(0) else { return 0 };
    // SAFETY: reads 8 bytes of the worker's memory; failure is handled.
    let conn = match unsafe { bpf_probe_read_user((r + 8) as *const u64) } {
        Ok(c) => c,
        Err(_) => return 0,
    };
    // SAFETY: copied out before removal.
    let key = [bpf_get_current_pid_tgid() >> 32, conn];
    let Some(start) = (unsafe { REQ_START.get(key) }).copied() else {
        return 0;
    };
    let _ = REQ_START.remove(key);
    // SAFETY: helper call without preconditions.
    let ns = unsafe { bpf_ktime_get_ns() }.saturating_sub(start);
    if let Some(s) = REQUESTS.get_ptr_mut(slot) {
        // SAFETY: per-CPU slot.
        unsafe { (*s).record_ns(ns) };
    }
    0
}
