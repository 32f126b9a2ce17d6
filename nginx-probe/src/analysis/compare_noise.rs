//! The noise of a comparison (`nginx-probe compare`): the median and spread of a
//! metric's interval (or run) values, and whether a change is beyond them. A run whose
//! load was not steady (its whole-run value outside the middle half of its intervals:
//! newcomer trial 17, 3900 requests all in one of 5 intervals, "0±0 (n=5)") has no
//! noise estimate from its intervals: [`Significance::Unsteady`].

use serde::Serialize;

/// Intervals needed on each side before their spread is used as the noise estimate.
pub const MIN_INTERVALS: usize = 3;
/// A change counts as beyond noise when the interval medians differ by more than this
/// many times the sum of both sides' spreads (half the interquartile range).
pub const NOISE_FACTOR: f64 = 2.0;
/// Relative changes smaller than this are reported as unchanged, whatever the noise.
pub const MIN_RELATIVE_CHANGE: f64 = 0.05;

/// Median and spread (half the interquartile range) of some values.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct Spread {
    /// Values behind it (intervals).
    pub n: usize,
    /// The middle value (linear interpolation between closest ranks), in the metric's
    /// unit.
    pub median: f64,
    /// (Q3 - Q1) / 2.
    pub half_iqr: f64,
}

/// `xs` sorted, ascending.
fn sorted(xs: &[f64]) -> Vec<f64> {
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

/// The `p` quantile (0..=1) of the sorted, non-empty `v`: linear interpolation between
/// the closest ranks.
fn quantile(v: &[f64], p: f64) -> f64 {
    let pos = p * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

/// [`Spread`] of `xs`; None when empty.
pub fn spread(xs: &[f64]) -> Option<Spread> {
    if xs.is_empty() {
        return None;
    }
    let v = sorted(xs);
    Some(Spread {
        n: v.len(),
        median: quantile(&v, 0.5),
        half_iqr: (quantile(&v, 0.75) - quantile(&v, 0.25)) / 2.0,
    })
}

/// How a metric moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Significance {
    /// The interval medians moved by more than the noise allows.
    BeyondNoise,
    /// The change is within the intervals' noise.
    WithinNoise,
    /// Less than [`MIN_RELATIVE_CHANGE`] either way.
    Unchanged,
    /// Too few intervals on a side to estimate noise; the whole-run values are shown.
    NoiseUnknown,
    /// A side's load was not steady ([`steady`]): its intervals' spread is no noise
    /// estimate of its whole-run value; the whole-run values are shown.
    Unsteady,
    /// A share of a limit far below what matters on both sides (peak fds under half
    /// the limit: 28 vs 30 fds of 20000), whatever its relative change (trial 21: a
    /// -10% change said "unchanged", which means under 5%).
    FarFromLimit,
}

/// Whether a run's whole-run value `whole` lies within the middle half of its
/// interval values `xs` (between their first and third quartiles, widened by 10% of
/// the value): one steady load, whose intervals' spread estimates the noise. True
/// with fewer than [`MIN_INTERVALS`] values (nothing is estimated from them).
pub fn steady(whole: f64, xs: &[f64]) -> bool {
    if xs.len() < MIN_INTERVALS {
        return true;
    }
    let v = sorted(xs);
    let tol = 0.1 * whole.abs() + 1e-9;
    (quantile(&v, 0.25) - tol..=quantile(&v, 0.75) + tol).contains(&whole)
}

/// Whether a change is beyond the noise: unchanged under [`MIN_RELATIVE_CHANGE`];
/// with [`MIN_INTERVALS`] a side, beyond noise when the medians differ by more than
/// [`NOISE_FACTOR`] times both spreads; else noise unknown.
pub fn judge(before: Option<Spread>, after: Option<Spread>, relative: Option<f64>) -> Significance {
    if let Some(r) = relative {
        if r.abs() < MIN_RELATIVE_CHANGE {
            return Significance::Unchanged;
        }
    }
    match (before, after) {
        (Some(b), Some(a)) if b.n >= MIN_INTERVALS && a.n >= MIN_INTERVALS => {
            let d = (a.median - b.median).abs();
            let scale = b.median.abs().max(a.median.abs());
            if scale > 0.0 && d / scale < MIN_RELATIVE_CHANGE {
                Significance::Unchanged
            } else if d > NOISE_FACTOR * (a.half_iqr + b.half_iqr) {
                Significance::BeyondNoise
            } else {
                Significance::WithinNoise
            }
        }
        _ => Significance::NoiseUnknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trial 17: 3900 requests in the first of 5 intervals (779.6/s), the run's
    /// 156/s: not steady; a steady load and too few intervals are.
    #[test]
    fn a_burst_in_one_interval_is_not_a_steady_load() {
        assert!(!steady(156.0, &[779.6, 0.0, 0.0, 0.0, 0.0]));
        assert!(steady(1000.0, &[990.0, 1010.0, 1000.0, 1005.0, 995.0]));
        assert!(steady(1000.0, &[950.0, 1100.0, 1000.0]));
        assert!(steady(156.0, &[779.6, 0.0]));
    }
}
