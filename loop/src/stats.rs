//! Paired statistics: how sure a difference between two policies is.
//!
//! Every experiment runs each policy on the same seeds (and, with `--perturb`, the same
//! shaken workloads), so a policy's figure on a seed is measured against the baseline's run of
//! that same seed: one paired value per seed (`Measured` in the lab's `experiment::paper`). Over those
//! values [`Paired::of`] gives:
//! - the mean and a 95 % **bootstrap** interval of it: the expanded percentile interval
//!   (Hesterberg, 2015), which widens the plain percentile interval by Student's t so that it
//!   keeps its coverage with the few seeds experiments run (the plain one covers far less than
//!   95 % below about 20);
//! - a two-sided **paired sign-flip permutation test** of "no difference" (0 for a change, 1 for
//!   a ratio): exact over every sign pattern up to [`EXACT_UP_TO`] seeds, 100,000 random ones
//!   beyond. With n seeds its smallest p is 2 / 2ⁿ, so fewer than [`SEEDS_TO_FIND`] seeds can
//!   never find a difference at 5 %, whatever the figures;
//! - where no difference is found, how many seeds would resolve one of [`RESOLVE`] (2 %, or
//!   0.02× for a ratio) with 80 % power, from the spread seen.
//!
//! The verdict ([`Paired::found`]) is the test's (p < 0.05); the interval says how large the
//! difference is. Both are deterministic: the resampling draws from a fixed seed.

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

pub use wasmsched_core::random::SplitMix;

/// The interval's confidence level, and 1 − the test's significance level.
pub const LEVEL: f64 = 0.95;

/// The difference whose seeds a result that found none states (2 %, or 0.02× for a ratio).
pub const RESOLVE: f64 = 0.02;

/// The power that seed count is for.
pub const POWER: f64 = 0.8;

/// Up to this many pairs the test enumerates every sign pattern (2¹⁶ of them).
pub const EXACT_UP_TO: usize = 16;

/// The fewest pairs with which the test can find a difference at 5 % (2 / 2⁶ < 0.05).
pub const SEEDS_TO_FIND: usize = 6;

/// Bootstrap resamples of the mean.
const RESAMPLES: usize = 10_000;

/// Random sign patterns beyond [`EXACT_UP_TO`] pairs.
const FLIPS: usize = 100_000;

/// A paired difference over seeds, and how sure it is.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Paired {
    /// Pairs (seeds) it rests on.
    pub n: usize,
    /// The mean over them.
    pub mean: f64,
    /// Its 95 % interval (expanded percentile bootstrap); None with fewer than two pairs. Below
    /// [`SEEDS_TO_FIND`] pairs it is about their range and covers less than 95 % (about 75 %
    /// at 3), which [`Paired::describe`] says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<[f64; 2]>,
    /// What no difference is: 0 for a change, 1 for a ratio.
    pub null: f64,
    /// The two-sided p of the paired sign-flip permutation test; None with no pairs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p: Option<f64>,
    /// Whether `p` is exact (every sign pattern) rather than sampled.
    pub exact: bool,
    /// Where no difference was found: about how many seeds would resolve one of [`RESOLVE`]
    /// with 80 % power, from the spread seen (at least [`SEEDS_TO_FIND`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seeds_to_resolve: Option<usize>,
}

impl Paired {
    /// The paired values `xs` (one per seed) against `null`.
    pub fn of(xs: &[f64], null: f64) -> Paired {
        let xs: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
        let n = xs.len();
        let mean = if n == 0 { null } else { xs.iter().sum::<f64>() / n as f64 };
        let (p, exact) = match n {
            0 => (None, true),
            _ => {
                let (p, exact) = sign_flip_p(&xs, null);
                (Some(p), exact)
            }
        };
        let mut paired = Paired { n, mean, interval: interval(&xs), null, p, exact, seeds_to_resolve: None };
        if !paired.found() && n > 0 {
            paired.seeds_to_resolve = Some(seeds_for(sd(&xs), RESOLVE));
        }
        paired
    }

    /// Whether the test found a difference at 5 %.
    pub fn found(&self) -> bool {
        self.p.is_some_and(|p| p < 1.0 - LEVEL)
    }

    /// The figure with its interval and test, for a person: `-8.3 % (95 % CI -11.0 % … -5.4 %,
    /// 10 seeds, p < 0.01)`, then, where nothing was found, what more seeds would do.
    /// `format` writes one value of the figure.
    pub fn describe(&self, format: impl Fn(f64) -> String) -> String {
        self.describe_over(format, "seed")
    }

    /// [`Paired::describe`] with the pairs called `unit` (`run`, for runs of several traces
    /// and seeds) rather than seeds.
    pub fn describe_over(&self, format: impl Fn(f64) -> String, unit: &str) -> String {
        let seeds = match self.n {
            1 => format!("1 {unit}"),
            n => format!("{n} {unit}s"),
        };
        let mut out = format(self.mean);
        match (self.interval, self.p) {
            (Some([lo, hi]), Some(p)) if self.n < SEEDS_TO_FIND => {
                let (lo, hi) = (format(lo), format(hi));
                out += &format!(" ({seeds} from {lo} to {hi}, too few for a 95 % interval, {})", show_p(p))
            }
            (Some([lo, hi]), Some(p)) => {
                out += &format!(" (95 % CI {} … {}, {seeds}, {})", format(lo), format(hi), show_p(p))
            }
            (None, Some(p)) => out += &format!(" ({seeds}, {})", show_p(p)),
            _ => out += " (no seed measured it)",
        }
        if self.found() || self.n == 0 {
            return out;
        }
        out += &format!("; no difference found at {seeds}");
        if self.n < SEEDS_TO_FIND {
            out += &format!(" (the paired test needs {SEEDS_TO_FIND} to find one)");
        }
        if let Some(more) = self.seeds_to_resolve {
            let what = if self.null == 0.0 { format!("{:.0} %", 100.0 * RESOLVE) } else { format!("{RESOLVE}×") };
            out += &format!("; about {more} {unit}s would resolve a {what} difference");
        }
        out
    }
}

/// A p-value for a person: `p < 0.001`, `p < 0.01`, `p = 0.03`, `p = 1`.
pub fn show_p(p: f64) -> String {
    if p < 0.001 {
        "p < 0.001".into()
    } else if p < 0.01 {
        "p < 0.01".into()
    } else if p >= 0.995 {
        "p = 1".into()
    } else {
        format!("p = {p:.2}")
    }
}

/// The sample standard deviation; 0 for fewer than two values.
pub fn sd(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let m = xs.iter().sum::<f64>() / xs.len() as f64;
    (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64).sqrt()
}

/// The two-sided p of the sign-flip test of `xs` against `null`, and whether it is exact.
///
/// Under no difference each paired value is as likely above `null` as below by the same
/// amount, so every pattern of signs on the differences is as likely as the one seen; p is the
/// share of patterns whose sum is at least as far from zero.
fn sign_flip_p(xs: &[f64], null: f64) -> (f64, bool) {
    let d: Vec<f64> = xs.iter().map(|x| x - null).collect();
    let seen = d.iter().sum::<f64>().abs();
    // Sums equal to the one seen, up to rounding, count as at least as far.
    let tolerance = 1e-9 * d.iter().map(|x| x.abs()).sum::<f64>().max(f64::MIN_POSITIVE);
    let as_far = |sum: f64| sum.abs() >= seen - tolerance;
    if d.len() <= EXACT_UP_TO {
        let patterns = 1u32 << d.len();
        let hits = (0..patterns)
            .filter(|&mask| as_far(d.iter().enumerate().map(|(i, x)| if mask >> i & 1 == 1 { -x } else { *x }).sum()))
            .count();
        return (hits as f64 / f64::from(patterns), true);
    }
    let mut rng = SplitMix::new(0x07e5_70f5_eed5);
    let hits = (0..FLIPS)
        .filter(|_| {
            let mut sum = 0.0;
            let mut bits = 0u64;
            for (i, x) in d.iter().enumerate() {
                if i % 64 == 0 {
                    bits = rng.next_u64();
                }
                sum += if bits >> (i % 64) & 1 == 1 { -x } else { *x };
            }
            as_far(sum)
        })
        .count();
    // The pattern seen counts among the sampled ones: p is never 0.
    ((hits + 1) as f64 / (FLIPS + 1) as f64, false)
}

/// The 95 % expanded percentile bootstrap interval of the mean of `xs`; None for fewer than
/// two values.
fn interval(xs: &[f64]) -> Option<[f64; 2]> {
    bootstrap(xs.len(), |picked| picked.iter().map(|&i| xs[i]).sum::<f64>() / picked.len() as f64)
}

/// The 95 % expanded percentile bootstrap interval of `statistic` over `n` independent units
/// (seeds, or an experiment's blocks), each resample `n` of them drawn with replacement and
/// given to `statistic` by index; None for fewer than two units, or when `statistic` is not
/// finite on most resamples (a ratio over units that may all be empty).
///
/// The percentile interval of the resampled statistics, at the tail probability whose normal
/// quantile is √(n / (n − 1)) times Student's t quantile at n − 1 degrees of freedom: wider
/// than the plain interval for few units, the same for many.
pub fn bootstrap(n: usize, statistic: impl Fn(&[usize]) -> f64) -> Option<[f64; 2]> {
    if n < 2 {
        return None;
    }
    let t = StudentsT::new(0.0, 1.0, (n - 1) as f64).ok()?.inverse_cdf(1.0 - (1.0 - LEVEL) / 2.0);
    let z = (n as f64 / (n - 1) as f64).sqrt() * t;
    let tail = Normal::standard().cdf(-z);
    let mut rng = SplitMix::new(0xb007_57a9);
    let mut picked = vec![0; n];
    let mut values: Vec<f64> = (0..RESAMPLES)
        .filter_map(|_| {
            picked.iter_mut().for_each(|p| *p = rng.below(n));
            Some(statistic(&picked)).filter(|v| v.is_finite())
        })
        .collect();
    if values.len() < RESAMPLES / 2 {
        return None;
    }
    values.sort_by(f64::total_cmp);
    Some([quantile(&values, tail), quantile(&values, 1.0 - tail)])
}

/// The `q`-quantile of sorted values, interpolated between the two nearest.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let at = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo as f64)
}

/// Pairs needed to find a true difference of `delta` at 5 % with 80 % power, for paired values
/// of spread `sd` (the normal approximation, n = ((z₀.₉₇₅ + z₀.₈) · sd / δ)²); never fewer than
/// [`SEEDS_TO_FIND`].
pub fn seeds_for(sd: f64, delta: f64) -> usize {
    let normal = Normal::standard();
    let z = normal.inverse_cdf(1.0 - (1.0 - LEVEL) / 2.0) + normal.inverse_cdf(POWER);
    let n = (z * sd / delta).powi(2).ceil();
    if n.is_finite() { (n as usize).max(SEEDS_TO_FIND) } else { SEEDS_TO_FIND }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_seeds_can_never_find_a_difference_and_say_so() {
        let p = Paired::of(&[-0.10, -0.11, -0.105], 0.0);
        assert_eq!(p.p, Some(0.25), "2 of the 8 sign patterns are as far as all-negative");
        assert!(p.exact && !p.found());
        let [lo, hi] = p.interval.unwrap();
        assert!(lo <= -0.11 + 1e-12 && hi >= -0.10 - 1e-12, "{lo} {hi}: at 3 seeds it spans the values");
        let line = p.describe(|x| format!("{:.1} %", 100.0 * x));
        assert!(line.starts_with("-10.5 % (3 seeds from -11.0 % to -10.0 %, too few for a 95 % interval"), "{line}");
        assert!(line.contains("p = 0.25); no difference found at 3 seeds"), "{line}");
        assert!(line.contains("the paired test needs 6 to find one"), "{line}");
        assert!(line.contains("about 6 seeds would resolve a 2 % difference"), "{line}");
    }

    #[test]
    fn ten_consistent_seeds_find_it() {
        let xs = [-0.083, -0.07, -0.095, -0.081, -0.09, -0.077, -0.088, -0.079, -0.084, -0.086];
        let p = Paired::of(&xs, 0.0);
        assert_eq!(p.p, Some(2.0 / 1024.0));
        assert!(p.found() && p.seeds_to_resolve.is_none());
        let [lo, hi] = p.interval.unwrap();
        assert!(lo < p.mean && p.mean < hi && hi < 0.0, "{lo} {hi}");
        let line = p.describe(|x| format!("{:.1} %", 100.0 * x));
        assert!(line.ends_with("10 seeds, p < 0.01)"), "{line}");
    }

    #[test]
    fn noise_around_nothing_is_no_difference_and_asks_for_more_seeds() {
        let xs = [0.03, -0.04, 0.02, -0.01, 0.05, -0.03, 0.01, -0.02];
        let p = Paired::of(&xs, 0.0);
        assert!(!p.found(), "{p:?}");
        let [lo, hi] = p.interval.unwrap();
        assert!(lo < 0.0 && hi > 0.0);
        let wanted = p.seeds_to_resolve.unwrap();
        // sd ≈ 0.032: ((1.96 + 0.84) × 0.032 / 0.02)² ≈ 20.
        assert!((15..=25).contains(&wanted), "{wanted}");
    }

    #[test]
    fn a_ratio_is_tested_against_one() {
        let p = Paired::of(&[1.28, 1.30, 1.27, 1.29, 1.26, 1.31, 1.28], 1.0);
        assert_eq!(p.p, Some(2.0 / 128.0));
        assert!(p.interval.unwrap()[0] > 1.0);
        let none = Paired::of(&[1.0, 1.0, 1.0], 1.0);
        assert_eq!(none.p, Some(1.0));
        let line = none.describe(|x| format!("{x:.2}×"));
        assert!(line.contains("about 6 seeds would resolve a 0.02× difference"), "{line}");
    }

    #[test]
    fn many_seeds_are_sampled_and_stay_deterministic() {
        let xs: Vec<f64> = (0..40).map(|i| 0.01 * ((i * 7919) % 13) as f64 - 0.05).collect();
        let (a, b) = (Paired::of(&xs, 0.0), Paired::of(&xs, 0.0));
        assert!(!a.exact);
        assert_eq!(a, b);
        let p = a.p.unwrap();
        assert!(p > 0.0 && p <= 1.0);
    }

    #[test]
    fn nothing_measured_is_said_plainly() {
        let p = Paired::of(&[f64::NAN], 0.0);
        assert_eq!((p.n, p.p, p.interval), (0, None, None));
        assert_eq!(p.describe(|x| format!("{x}")), "0 (no seed measured it)");
        let one = Paired::of(&[-0.2], 0.0);
        assert_eq!(one.p, Some(1.0));
        assert!(one.describe(|x| format!("{x}")).starts_with("-0.2 (1 seed, p = 1)"));
    }

    #[test]
    fn the_interval_covers_the_true_mean_about_as_often_as_it_says() {
        // Normal draws (Box–Muller on SplitMix) around -0.05 with sd 0.03, 8 seeds at a time.
        let mut rng = SplitMix::new(42);
        let mut uniform = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let (mut covered, trials) = (0, 400);
        for _ in 0..trials {
            let xs: Vec<f64> = (0..8)
                .map(|_| {
                    let (u, v) = (uniform().max(1e-300), uniform());
                    -0.05 + 0.03 * (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
                })
                .collect();
            let [lo, hi] = interval(&xs).unwrap();
            covered += usize::from(lo <= -0.05 && -0.05 <= hi);
        }
        let coverage = covered as f64 / trials as f64;
        assert!((0.91..=0.99).contains(&coverage), "coverage {coverage} at nominal 0.95");
    }
}

#[cfg(test)]
mod coverage {
    use super::*;

    /// The coverage table of `docs/experiments.md`: 1,000 replications per row of n values with
    /// true mean 0, normal and skewed (a centred lognormal), the expanded interval's coverage
    /// beside the plain percentile interval's, and how often the test finds a difference that
    /// is not there (the expanded interval must keep 90 % from 6 values on; the plain one
    /// is printed to show why it is not used).
    #[test]
    #[ignore = "about 40 s in a dev build: prints the coverage table of docs/experiments.md"]
    fn the_expanded_interval_keeps_its_coverage_from_six_seeds() {
        let mut rng = SplitMix::new(99);
        let mut uniform = move || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        for skew in [false, true] {
            for n in [3usize, 6, 10, 20] {
                let (mut expanded, mut plain, mut found, trials) = (0, 0, 0, 1000);
                for _ in 0..trials {
                    let xs: Vec<f64> = (0..n)
                        .map(|_| {
                            let (u, v) = (uniform().max(1e-300), uniform());
                            let z = (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos();
                            if skew { (0.5 * z).exp() - 0.125f64.exp() } else { z }
                        })
                        .collect();
                    let [lo, hi] = interval(&xs).expect("n ≥ 2");
                    expanded += usize::from(lo <= 0.0 && 0.0 <= hi);
                    let mut draw = SplitMix::new(0xb007_57a9);
                    let mut means: Vec<f64> =
                        (0..RESAMPLES).map(|_| (0..n).map(|_| xs[draw.below(n)]).sum::<f64>() / n as f64).collect();
                    means.sort_by(f64::total_cmp);
                    plain += usize::from(quantile(&means, 0.025) <= 0.0 && 0.0 <= quantile(&means, 0.975));
                    found += usize::from(Paired::of(&xs, 0.0).found());
                }
                let share = |k: usize| k as f64 / f64::from(trials);
                println!(
                    "{} n={n}: expanded {:.3}, plain {:.3}, a difference found where there is none {:.3}",
                    if skew { "skewed" } else { "normal" },
                    share(expanded),
                    share(plain),
                    share(found)
                );
                if n >= SEEDS_TO_FIND {
                    assert!(share(expanded) >= 0.9, "n = {n}: {}", share(expanded));
                }
            }
        }
    }
}
