//! Idle times as the lifecycle counts them: a count, a sum, the since-attach extremes
//! and a log2 histogram of ms per side of a close (nginx's client connections,
//! upstream peers), turned into quantiles and a pinned value. Pure.

use nginx_probe_common::lifecycle::LC_IDLE_BUCKETS;
use serde::{Deserialize, Serialize};

/// Idle times of nginx's closes "sit at one value" when the longest and the shortest
/// since attach differ by at most this share of their mean (or by [`PINNED_SLACK_MS`]).
pub const PINNED_SPREAD: f64 = 0.10;
/// Absolute slack for [`PINNED_SPREAD`], ms (a few jiffies at HZ 250).
pub const PINNED_SLACK_MS: u64 = 12;
/// Fewest measured nginx closes before a pinned value is claimed.
pub const PINNED_MIN_CLOSES: u64 = 3;

/// Idle time before nginx closed connections that were established (kept-alive
/// connections waiting for their next request, or fresh ones), ms: the time since the
/// last data segment sent or received on the socket at nginx's `close()`/`shutdown()`
/// (`tcp_sock.lsndtime`, `icsk_ack.lrcvtime`); when nginx itself sent data at most one
/// jiffy before the close (a TLS close_notify, an HTTP/2 GOAWAY, a response closed at
/// once), the time since the client's last data ([`IdleReport::after_nginx_wrote`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct IdleReport {
    /// Closes measured in the period.
    pub count: u64,
    /// Of `count`, closes nginx had sent data at most one jiffy before (TLS
    /// close_notify, HTTP/2 GOAWAY, or a response closed at once): their idle time is
    /// the time since the client's last data, not since nginx's final words.
    #[serde(default)]
    pub after_nginx_wrote: u64,
    /// Mean idle time, ms.
    pub mean_ms: f64,
    /// p50 / p99 estimated from the log2 histogram, ms (within a factor of 2), kept
    /// between the shortest and longest idle time since attach.
    pub p50_ms: u64,
    /// p99, ms (log2-histogram estimate).
    pub p99_ms: u64,
    /// Shortest and longest idle time since attach, ms (not per period).
    pub min_ms_since_attach: u64,
    /// Longest idle time since attach, ms (not per period).
    pub max_ms_since_attach: u64,
    /// The value nginx's closes sit at, ms: set when every measured close since attach
    /// lies within [`PINNED_SPREAD`] of their mean (at least [`PINNED_MIN_CLOSES`]); the
    /// mean of the period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_ms: Option<f64>,
    /// log2 histogram, ms: bucket `i` counts `2^i <= ms < 2^(i+1)` (bucket 0 holds 0).
    pub hist: Vec<u64>,
}

/// Quantile `q` of an ms log2 histogram (see [`crate::model::quantile_ns`]), kept
/// inside [`min_ms`, `max_ms`]: the shortest and longest idle time since attach bound
/// every sample of any period, so its quantiles too.
pub(crate) fn quantile_ms(hist: &[u64], q: f64, min_ms: u64, max_ms: u64) -> u64 {
    let v = crate::model::quantile_ns(hist, q, max_ms);
    if min_ms <= max_ms {
        v.clamp(min_ms, max_ms)
    } else {
        v
    }
}

/// Whether idle times between `min` and `max` ms (mean `mean`) sit at one value.
pub fn pinned(min: u64, max: u64, mean: f64, count: u64) -> bool {
    count >= PINNED_MIN_CLOSES
        && max >= min
        && (max - min) as f64 <= (PINNED_SPREAD * mean).max(PINNED_SLACK_MS as f64)
}

/// Where an idle time's counters are in a counter vector: count, sum (ms), maximum
/// and inverted minimum since attach, first histogram bucket.
pub struct IdleAt {
    /// Closes measured.
    pub count: usize,
    /// Sum of their idle times, ms.
    pub sum: usize,
    /// Longest since attach, ms.
    pub max: usize,
    /// `!min` since attach (0: none).
    pub inv_min: usize,
    /// First of `LC_IDLE_BUCKETS` log2 buckets, ms.
    pub hist: usize,
}

impl IdleAt {
    /// Counters laid out in a row from `count`: sum, maximum, inverted minimum, then
    /// the histogram (`lc::CLIENT_CLOSE_IDLE_COUNT`, `lc::RESET_IDLE_COUNT`).
    pub const fn from_count(count: usize) -> Self {
        IdleAt {
            count,
            sum: count + 1,
            max: count + 2,
            inv_min: count + 3,
            hist: count + 4,
        }
    }
}

/// The idle times of the counters `at` of `c` (their change over the period by `d`):
/// quantiles from the log2 histogram, min and max since attach, and whether they sit
/// at one value.
pub fn idle_report(c: &[u64], d: &dyn Fn(usize) -> u64, at: &IdleAt) -> IdleReport {
    let count = d(at.count);
    let hist: Vec<u64> = (0..LC_IDLE_BUCKETS).map(|b| d(at.hist + b)).collect();
    let max = c[at.max];
    let min = if c[at.inv_min] == 0 {
        0
    } else {
        !c[at.inv_min]
    };
    let mean = if count > 0 {
        d(at.sum) as f64 / count as f64
    } else {
        0.0
    };
    IdleReport {
        count,
        after_nginx_wrote: 0,
        mean_ms: (mean * 1000.0).round() / 1000.0,
        p50_ms: quantile_ms(&hist, 0.5, min, max),
        p99_ms: quantile_ms(&hist, 0.99, min, max),
        min_ms_since_attach: min,
        max_ms_since_attach: max,
        pinned_ms: (count > 0 && pinned(min, max, mean, c[at.count]))
            .then_some((mean * 1000.0).round() / 1000.0),
        hist,
    }
}

/// The union of several ports' reports: counts, `after_nginx_wrote` and histograms
/// added, the mean weighted, extremes widened, quantiles read again from the summed
/// histogram; `pinned_ms` kept only when every report with closes is pinned and the
/// pinned values lie within [`PINNED_SPREAD`] of each other. None when no report has
/// a close.
pub fn merged<'a>(reports: impl Iterator<Item = &'a IdleReport>) -> Option<IdleReport> {
    let mut acc: Option<IdleReport> = None;
    let (mut pinned, mut unpinned) = (Vec::new(), false);
    for i in reports.filter(|i| i.count > 0) {
        match i.pinned_ms {
            Some(v) => pinned.push(v),
            None => unpinned = true,
        }
        let a = acc.get_or_insert_with(|| IdleReport {
            hist: vec![0; LC_IDLE_BUCKETS],
            min_ms_since_attach: u64::MAX,
            ..Default::default()
        });
        let sum = a.mean_ms * a.count as f64 + i.mean_ms * i.count as f64;
        a.count += i.count;
        a.after_nginx_wrote += i.after_nginx_wrote;
        a.mean_ms = sum / a.count as f64;
        a.min_ms_since_attach = a.min_ms_since_attach.min(i.min_ms_since_attach);
        a.max_ms_since_attach = a.max_ms_since_attach.max(i.max_ms_since_attach);
        for (x, y) in a.hist.iter_mut().zip(&i.hist) {
            *x += y;
        }
    }
    let mut a = acc?;
    let (lo, hi) = (a.min_ms_since_attach, a.max_ms_since_attach);
    a.p50_ms = quantile_ms(&a.hist, 0.5, lo, hi);
    a.p99_ms = quantile_ms(&a.hist, 0.99, lo, hi);
    a.mean_ms = (a.mean_ms * 1000.0).round() / 1000.0;
    let lo = pinned.iter().cloned().fold(f64::MAX, f64::min);
    let hi = pinned.iter().cloned().fold(0.0, f64::max);
    if !unpinned && !pinned.is_empty() && hi - lo <= PINNED_SPREAD * hi {
        a.pinned_ms = Some(a.mean_ms);
    }
    Some(a)
}

/// "2.0 s" / "350 ms": an idle time for people.
pub fn fmt_ms(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else {
        format!("{ms:.0} ms")
    }
}

/// A span of ms as a person reads it: `1.0 s` when both ends print alike, else
/// `980 ms to 1.1 s`.
pub fn ms_range(min_ms: u64, max_ms: u64) -> String {
    let (a, b) = (fmt_ms(min_ms as f64), fmt_ms(max_ms as f64));
    if a == b {
        a
    } else {
        format!("{a} to {b}")
    }
}
