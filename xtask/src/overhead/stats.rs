//! Paired-round statistics of the overhead benchmark: per-round ratios of a mode to the
//! no-tracer run of the same round, their median and a 95% percentile-bootstrap
//! interval of that median.

/// Bootstrap resamples per interval.
pub const RESAMPLES: usize = 10_000;

/// Seed of the bootstrap's generator: the same runs always give the same interval.
const SEED: u64 = 0x6f76_6572_6865_6164;

/// [`crate::stats::median`] of `xs`, NaN when no value is finite: the bench's tables
/// print a figure no run gave as NaN.
pub fn median_or_nan(xs: &[f64]) -> f64 {
    crate::stats::median(xs).unwrap_or(f64::NAN)
}

/// Per-round ratios `mode[i] / base[i]` of rounds where both are finite and the base is
/// positive (the pairs of one interleaved round saw the same machine state).
pub fn paired_ratios(mode: &[f64], base: &[f64]) -> Vec<f64> {
    mode.iter()
        .zip(base)
        .filter(|(m, b)| m.is_finite() && b.is_finite() && **b > 0.0)
        .map(|(m, b)| m / b)
        .collect()
}

/// `q`-quantile (0..=1) of sorted `v`, by linear interpolation between order statistics.
fn quantile(v: &[f64], q: f64) -> f64 {
    let pos = q * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

/// 95% percentile-bootstrap interval of the median of `xs` ([`RESAMPLES`] resamples
/// with replacement, fixed seed); `None` with fewer than 2 values (no spread is known).
/// With 5 values it is about [min, max] of them: a median of 5 rounds is not known
/// better than that.
pub fn bootstrap_median_ci95(xs: &[f64]) -> Option<(f64, f64)> {
    let v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.len() < 2 {
        return None;
    }
    let mut rng = fastrand::Rng::with_seed(SEED);
    let mut medians: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            let pick: Vec<f64> = (0..v.len()).map(|_| v[rng.usize(..v.len())]).collect();
            median_or_nan(&pick)
        })
        .collect();
    medians.sort_by(|a, b| a.total_cmp(b));
    Some((quantile(&medians, 0.025), quantile(&medians, 0.975)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_median_without_values_is_nan() {
        assert_eq!(median_or_nan(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median_or_nan(&[]).is_nan());
        assert!(median_or_nan(&[f64::NAN]).is_nan());
    }

    #[test]
    fn ratios_pair_rounds_and_skip_missing_ones() {
        let r = paired_ratios(&[11.0, 24.0, f64::NAN, 9.0], &[10.0, 20.0, 10.0, 0.0]);
        assert_eq!(r.len(), 2);
        assert!((r[0] - 1.1).abs() < 1e-12);
        assert!((r[1] - 1.2).abs() < 1e-12);
    }

    #[test]
    fn identical_rounds_give_a_point_interval() {
        assert_eq!(bootstrap_median_ci95(&[1.14; 5]), Some((1.14, 1.14)));
    }

    #[test]
    fn one_round_has_no_interval() {
        assert_eq!(bootstrap_median_ci95(&[1.1]), None);
        assert_eq!(bootstrap_median_ci95(&[]), None);
    }

    #[test]
    fn five_rounds_span_their_extremes() {
        // A resampled median of 5 is the smallest value with probability 5.8% (3 or more
        // of 5 draws are it), above 2.5%: the interval's ends are the extremes.
        let (lo, hi) = bootstrap_median_ci95(&[1.30, 1.10, 1.15, 1.12, 1.20]).unwrap();
        assert_eq!((lo, hi), (1.10, 1.30));
    }

    #[test]
    fn many_rounds_narrow_the_interval() {
        // 0.90, 0.91 ... 1.10 (21 values, median 1.00): the median's interval is much
        // narrower than the range and contains the median.
        let xs: Vec<f64> = (0..21).map(|i| 0.90 + 0.01 * i as f64).collect();
        let (lo, hi) = bootstrap_median_ci95(&xs).unwrap();
        assert!(lo < 1.0 && hi > 1.0, "{lo} {hi}");
        assert!(lo >= 0.95 && hi <= 1.05, "{lo} {hi}");
        // Deterministic: the same input, the same interval.
        assert_eq!(bootstrap_median_ci95(&xs), Some((lo, hi)));
    }
}
