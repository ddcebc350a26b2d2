//! The statistics of a benchmark: summaries with a 95% confidence interval,
//! outliers, two-sample comparisons (Welch's t-test, ratio of means, ratio and
//! difference of medians) and the paired comparison of two configurations run in the same rounds.
//!
//! Everything here is a pure function of the measured numbers, so it is tested
//! with known answers.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// Location and spread of one sample.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1); 0 for fewer than two values.
    pub stddev: f64,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// 95% confidence interval of the mean (Student's t); the mean itself for n < 2.
    pub ci95: (f64, f64),
}

/// The two-sided 97.5% quantile of Student's t with `df` degrees of freedom.
fn t975(df: f64) -> f64 {
    StudentsT::new(0.0, 1.0, df.max(1.0)).map(|t| t.inverse_cdf(0.975)).unwrap_or(f64::NAN)
}

pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() { f64::NAN } else { xs.iter().sum::<f64>() / xs.len() as f64 }
}

pub fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) { (sorted[mid - 1] + sorted[mid]) / 2.0 } else { sorted[mid] }
}

fn variance(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let m = mean(xs);
    xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64
}

pub fn summarize(xs: &[f64]) -> Summary {
    let n = xs.len();
    let mean = mean(xs);
    let stddev = variance(xs).sqrt();
    let half = if n >= 2 { t975((n - 1) as f64) * stddev / (n as f64).sqrt() } else { 0.0 };
    Summary {
        n,
        mean,
        stddev,
        median: median(xs),
        min: xs.iter().copied().fold(f64::INFINITY, f64::min),
        max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        ci95: (mean - half, mean + half),
    }
}

/// Indexes of outliers: modified z-score (median absolute deviation) above 3.5,
/// the rule hyperfine uses too. Needs at least 3 values.
pub fn outliers(xs: &[f64]) -> Vec<usize> {
    if xs.len() < 3 {
        return Vec::new();
    }
    let m = median(xs);
    let deviations: Vec<f64> = xs.iter().map(|x| (x - m).abs()).collect();
    let mad = median(&deviations);
    if mad == 0.0 {
        return Vec::new();
    }
    xs.iter().enumerate().filter(|&(_, &x)| (0.6745 * (x - m) / mad).abs() > 3.5).map(|(i, _)| i).collect()
}

/// Welch's two-sample t-test of `a` against `b`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Welch {
    /// mean(a) − mean(b).
    pub difference: f64,
    /// 95% confidence interval of the difference.
    pub ci95: (f64, f64),
    pub t: f64,
    pub df: f64,
    /// Two-sided p-value of "the means are equal".
    pub p: f64,
}

pub fn welch(a: &[f64], b: &[f64]) -> Option<Welch> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (va, vb) = (variance(a) / a.len() as f64, variance(b) / b.len() as f64);
    let difference = mean(a) - mean(b);
    let se = (va + vb).sqrt();
    if se == 0.0 {
        let p = if difference == 0.0 { 1.0 } else { 0.0 };
        return Some(Welch { difference, ci95: (difference, difference), t: f64::INFINITY, df: f64::NAN, p });
    }
    let df = (va + vb).powi(2) / (va.powi(2) / (a.len() - 1) as f64 + vb.powi(2) / (b.len() - 1) as f64);
    let t = difference / se;
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    let p = 2.0 * (1.0 - dist.cdf(t.abs()));
    let half = t975(df) * se;
    Some(Welch { difference, ci95: (difference - half, difference + half), t, df, p })
}

/// How many runs of each configuration a Welch t-test (two-sided, α = 0.05) needs to
/// tell apart two means `difference` apart with 80 % power, when the runs vary with
/// these standard deviations: n = (t(0.975, df) + t(0.80, df))² (σa² + σb²) / δ², with
/// Welch's degrees of freedom for n runs each, solved by iteration from the normal
/// quantiles. `None` when there is no difference or no noise to size against.
pub fn runs_to_resolve(difference: f64, stddev_a: f64, stddev_b: f64) -> Option<usize> {
    let (va, vb) = (stddev_a * stddev_a, stddev_b * stddev_b);
    let delta2 = difference * difference;
    let noise = va + vb;
    if !(delta2 > 0.0 && noise > 0.0 && delta2.is_finite() && noise.is_finite()) {
        return None;
    }
    let quantiles = |df: f64| -> Option<f64> {
        let t = StudentsT::new(0.0, 1.0, df.max(1.0)).ok()?;
        Some(t.inverse_cdf(0.975) + t.inverse_cdf(0.80))
    };
    let runs = |q: f64| (q * q * (va + vb) / delta2).ceil().max(2.0);
    let mut n = runs(1.959_964 + 0.841_621);
    for _ in 0..20 {
        let df = (va + vb).powi(2) * (n - 1.0) / (va * va + vb * vb);
        let next = runs(quantiles(df)?);
        if next == n {
            break;
        }
        n = next;
    }
    (n < 1e9).then_some(n as usize)
}

/// mean(a) / mean(b) with a 95% confidence interval (delta method, Welch degrees of
/// freedom) and the p-value of Welch's test that the means are equal.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    pub ratio: f64,
    pub ci95: (f64, f64),
    pub p: f64,
}

pub fn ratio(a: &[f64], b: &[f64]) -> Option<Ratio> {
    let w = welch(a, b)?;
    let (ma, mb) = (mean(a), mean(b));
    if mb <= 0.0 || ma <= 0.0 {
        return None;
    }
    let r = ma / mb;
    let rel_var = variance(a) / (a.len() as f64 * ma * ma) + variance(b) / (b.len() as f64 * mb * mb);
    let half = if w.df.is_finite() { t975(w.df) * r * rel_var.sqrt() } else { 0.0 };
    Some(Ratio { ratio: r, ci95: (r - half, r + half), p: w.p })
}

/// The ratio of two configurations measured in the same rounds, paired by round:
/// the geometric mean of the per-round ratios a[i] / b[i], with a 95% confidence
/// interval and the p-value of a paired t-test on their logarithms. Pairing
/// cancels what changes from round to round (other load on the machine), which the
/// two-sample intervals count as noise.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairedRatio {
    pub ratio: f64,
    pub ci95: (f64, f64),
    pub p: f64,
    pub pairs: usize,
}

/// `None` unless both sides have the same number (at least two) of positive values.
pub fn paired_ratio(a: &[f64], b: &[f64]) -> Option<PairedRatio> {
    if a.len() != b.len() || a.len() < 2 || a.iter().chain(b).any(|&x| x <= 0.0 || !x.is_finite()) {
        return None;
    }
    let logs: Vec<f64> = a.iter().zip(b).map(|(x, y)| (x / y).ln()).collect();
    let n = logs.len() as f64;
    let m = mean(&logs);
    let se = (variance(&logs) / n).sqrt();
    if se == 0.0 {
        let p = if m == 0.0 { 1.0 } else { 0.0 };
        return Some(PairedRatio { ratio: m.exp(), ci95: (m.exp(), m.exp()), p, pairs: logs.len() });
    }
    let df = n - 1.0;
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    let p = 2.0 * (1.0 - dist.cdf((m / se).abs()));
    let half = t975(df) * se;
    Some(PairedRatio { ratio: m.exp(), ci95: ((m - half).exp(), (m + half).exp()), p, pairs: logs.len() })
}

/// median(a) / median(b) with a 95% percentile-bootstrap confidence interval
/// ([`bootstrap_medians`]). `None` when either side is empty or a median is not positive.
pub fn median_ratio(a: &[f64], b: &[f64]) -> Option<(f64, (f64, f64))> {
    let (ma, mb) = (median(a), median(b));
    if a.is_empty() || b.is_empty() || ma <= 0.0 || mb <= 0.0 {
        return None;
    }
    let ci = bootstrap_medians(a, b, |x, y| (y > 0.0).then(|| x / y))?;
    Some((ma / mb, ci))
}

/// median(a) − median(b) with a 95% percentile-bootstrap confidence interval
/// ([`bootstrap_medians`]). `None` when either side is empty or holds a value that is not finite.
pub fn median_difference(a: &[f64], b: &[f64]) -> Option<(f64, (f64, f64))> {
    if a.is_empty() || b.is_empty() || a.iter().chain(b).any(|x| !x.is_finite()) {
        return None;
    }
    let ci = bootstrap_medians(a, b, |x, y| Some(x - y))?;
    Some((median(a) - median(b), ci))
}

/// The 2.5% and 97.5% quantiles of `statistic(median(a'), median(b'))` over 2000
/// resamples a', b' of each side, drawn with a fixed-seed generator so that the
/// answer is reproducible; resamples whose statistic is `None` are left out.
fn bootstrap_medians(
    a: &[f64],
    b: &[f64],
    statistic: impl Fn(f64, f64) -> Option<f64>,
) -> Option<(f64, f64)> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let mut values: Vec<f64> = Vec::with_capacity(2000);
    let (mut ra, mut rb) = (vec![0.0; a.len()], vec![0.0; b.len()]);
    for _ in 0..2000 {
        ra.iter_mut().for_each(|x| *x = a[next(a.len())]);
        rb.iter_mut().for_each(|x| *x = b[next(b.len())]);
        values.extend(statistic(median(&ra), median(&rb)));
    }
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    (!values.is_empty()).then(|| (at(0.025), at(0.975)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn runs_to_resolve_matches_the_textbook_sample_sizes() {
        // Equal spread, effect size d = δ/σ: 17 per group for d = 1 and 64 for d = 0.5
        // (Cohen's tables for the two-sample t-test, α = 0.05 two-sided, power 0.80).
        assert_eq!(runs_to_resolve(1.0, 1.0, 1.0), Some(17));
        assert_eq!(runs_to_resolve(0.5, 1.0, 1.0), Some(64));
        assert_eq!(runs_to_resolve(-0.5, 1.0, 1.0), Some(64));
        // Unequal spread: the variances add.
        assert_eq!(runs_to_resolve(1.0, 0.5_f64.sqrt(), 1.5_f64.sqrt()), Some(17));
        assert_eq!(runs_to_resolve(0.0, 1.0, 1.0), None);
        assert_eq!(runs_to_resolve(1.0, 0.0, 0.0), None);
    }

    #[test]
    fn summary_of_known_values() {
        let s = summarize(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!((s.n, s.mean, s.median, s.min, s.max), (8, 5.0, 4.5, 2.0, 9.0));
        assert!(close(s.stddev, 2.138_089_935, 1e-9));
        // t(0.975, 7) = 2.364624251 (scipy); half width = 2.364624251 * 2.138089935 / sqrt(8)
        assert!(
            close(s.ci95.0, 5.0 - 1.787_487_9, 1e-6) && close(s.ci95.1, 5.0 + 1.787_487_9, 1e-6),
            "{s:?}"
        );
        let one = summarize(&[3.0]);
        assert_eq!((one.stddev, one.ci95), (0.0, (3.0, 3.0)));
    }

    #[test]
    fn outliers_by_modified_z_score() {
        let xs = [1.00, 1.02, 0.98, 1.01, 0.99, 1.00, 2.50];
        assert_eq!(outliers(&xs), [6]);
        assert!(outliers(&[1.0, 1.1, 0.9, 1.05]).is_empty());
        assert!(outliers(&[1.0, 1.0, 1.0]).is_empty());
    }

    #[test]
    fn welch_test_known_answer() {
        // Textbook example: a = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4]
        // b = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4]
        // scipy.stats.ttest_ind(a, b, equal_var=False): t = -2.455356398, p = 0.021378001;
        // df = 24.9885, t(0.975, df) = 2.059586491
        let a = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4];
        let b = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4];
        let w = welch(&a, &b).unwrap();
        assert!(close(w.t, -2.455_356_398, 1e-8), "{w:?}");
        assert!(close(w.df, 24.988_5, 1e-3), "{w:?}");
        assert!(close(w.p, 0.021_378_001, 1e-8), "{w:?}");
        // difference -2.1666667 ± 2.059586491 * 2.1666667 / 2.455356398
        assert!(close(w.ci95.0, -3.984_096, 1e-5) && close(w.ci95.1, -0.349_237, 1e-5), "{w:?}");
    }

    #[test]
    fn ratio_of_medians_with_a_bootstrap_interval() {
        let a = [2.0, 2.2, 1.8, 2.1, 1.9, 2.05, 1.95];
        let b = [1.0, 1.1, 0.9, 1.05, 0.95, 1.02, 0.98];
        let (r, (lo, hi)) = median_ratio(&a, &b).unwrap();
        assert!(close(r, 2.0, 1e-12));
        assert!(lo < 2.0 && hi > 2.0 && lo > 1.6 && hi < 2.5, "{lo} {hi}");
        let (same, (lo, hi)) = median_ratio(&a, &a).unwrap();
        assert!(close(same, 1.0, 1e-12) && lo <= 1.0 && hi >= 1.0);
        assert_eq!(median_ratio(&a, &b), median_ratio(&a, &b));
        assert!(median_ratio(&[], &b).is_none());
    }

    #[test]
    fn difference_of_medians_with_a_bootstrap_interval() {
        // Medians 3 and 1.5. A resample's median of a is 1, 3 or 5 and of b 1, 1.5 or 2,
        // so every resampled difference lies in [1 − 2, 5 − 1] = [−1, 4].
        let (d, (lo, hi)) = median_difference(&[5.0, 1.0, 3.0], &[1.0, 2.0]).unwrap();
        assert_eq!(d, 1.5);
        assert!((-1.0..=1.5).contains(&lo) && (1.5..=4.0).contains(&hi), "{lo} {hi}");
        // Constant sides leave no spread: 3 − 1 = 2 in every resample.
        assert_eq!(median_difference(&[3.0; 4], &[1.0; 5]), Some((2.0, (2.0, 2.0))));
        assert_eq!(median_ratio(&[3.0; 4], &[1.0; 5]), Some((3.0, (3.0, 3.0))));
        assert!(median_difference(&[], &[1.0]).is_none());
        assert!(median_difference(&[f64::NAN], &[1.0]).is_none());
    }

    #[test]
    fn paired_ratio_known_answer() {
        // Per-round ratios 1.1, 0.9, 1.2, 1.0: logs 0.0953102, -0.1053605, 0.1823216, 0.0;
        // scipy: geometric mean 1.044008682, CI exp(mean ± t(0.975, 3)·se) = 0.857285556 …
        // 1.271401485, scipy.stats.ttest_1samp(logs, 0).pvalue = 0.536744447.
        let b = [2.0, 3.0, 1.0, 4.0];
        let a = [2.2, 2.7, 1.2, 4.0];
        let r = paired_ratio(&a, &b).unwrap();
        assert_eq!(r.pairs, 4);
        assert!(close(r.ratio, 1.044_008_6, 1e-6), "{r:?}");
        assert!(close(r.ci95.0, 0.857_285_556, 1e-6) && close(r.ci95.1, 1.271_401_485, 1e-6), "{r:?}");
        assert!(close(r.p, 0.536_744_447, 1e-6), "{r:?}");
    }

    #[test]
    fn paired_ratio_cancels_round_to_round_drift() {
        // b drifts 1 → 3 over the rounds, a is always 5% slower: the two-sample CI
        // spans 1, the paired one is exactly 1.05.
        let b = [1.0, 1.5, 2.0, 2.5, 3.0];
        let a: Vec<f64> = b.iter().map(|x| x * 1.05).collect();
        let r = paired_ratio(&a, &b).unwrap();
        assert!(close(r.ratio, 1.05, 1e-12) && close(r.ci95.0, 1.05, 1e-12) && r.p == 0.0, "{r:?}");
        assert!(ratio(&a, &b).unwrap().ci95.0 < 1.0);
        assert!(paired_ratio(&a, &b[..4]).is_none());
        assert!(paired_ratio(&[1.0], &[1.0]).is_none());
        assert!(paired_ratio(&[1.0, 0.0], &[1.0, 1.0]).is_none());
    }

    #[test]
    fn ratio_of_means_and_identical_samples() {
        let a = [2.0, 2.2, 1.8, 2.1, 1.9];
        let b = [1.0, 1.1, 0.9, 1.05, 0.95];
        let r = ratio(&a, &b).unwrap();
        assert!(close(r.ratio, 2.0, 1e-12));
        assert!(r.ci95.0 < 2.0 && r.ci95.1 > 2.0 && r.ci95.0 > 1.5, "{r:?}");
        assert!(r.p < 1e-4);
        let same = ratio(&a, &a).unwrap();
        assert!(close(same.ratio, 1.0, 1e-12) && close(same.p, 1.0, 1e-9));
        assert!(welch(&[1.0], &a).is_none());
    }
}
