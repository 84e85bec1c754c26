//! Computations several schedulers share: windowed means, normalised progress, growth
//! efficiency, and a proportional split with floors and caps. Written once, here.

use crate::units::Seconds;
use crate::view::Direction;

/// Normalises a metric series: a lower-is-better value is divided by the largest value seen
/// so far (so it lies in (0, 1]); a higher-is-better value passes as is.
#[derive(Clone, Debug)]
pub struct Normaliser {
    direction: Direction,
    largest: f64,
}

impl Normaliser {
    /// A normaliser that has seen nothing yet.
    pub fn new(direction: Direction) -> Self {
        Normaliser { direction, largest: 0.0 }
    }

    /// The normalised value of the next sample; None for NaN or infinite samples, and for
    /// lower-is-better samples while every value seen is zero or negative.
    pub fn push(&mut self, value: f64) -> Option<f64> {
        if !value.is_finite() {
            return None;
        }
        match self.direction {
            Direction::HigherIsBetter => Some(value),
            Direction::LowerIsBetter => {
                self.largest = self.largest.max(value);
                (self.largest > 0.0).then(|| value / self.largest)
            }
        }
    }
}

/// Whether `value` meets `target` in `direction`: at least it when higher is better, at most
/// it when lower is better.
pub fn reaches(direction: Direction, value: f64, target: f64) -> bool {
    match direction {
        Direction::HigherIsBetter => value >= target,
        Direction::LowerIsBetter => value <= target,
    }
}

/// Mean of the samples whose time lies in `(from, to]`; None when there are none.
pub fn window_mean(samples: impl IntoIterator<Item = (Seconds, f64)>, from: Seconds, to: Seconds) -> Option<f64> {
    let (sum, n) = samples
        .into_iter()
        .filter(|(t, v)| *t > from && *t <= to && v.is_finite())
        .fold((0.0, 0usize), |(s, n), (_, v)| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// |now − before| / dt: how fast a normalised metric moved, whatever its direction.
/// Zero when `dt` is not positive.
pub fn growth_rate(before: f64, now: f64, dt: Seconds) -> f64 {
    if dt.0 > 0.0 { (now - before).abs() / dt.0 } else { 0.0 }
}

/// Progress bought per unit of CPU: `rate / cpu_fraction`, with `cpu_fraction` the job's
/// CPU use as a fraction of its node. Zero when the job used about no CPU.
pub fn growth_efficiency(rate: f64, cpu_fraction: f64) -> f64 {
    if cpu_fraction > 1e-6 && rate.is_finite() { rate / cpu_fraction } else { 0.0 }
}

/// Splits `total` in proportion to `weights`, each share clamped to `[floors[i], caps[i]]`:
/// the host's own rule ([`wasmsched_rules::split`]), so that a policy's fair shares are the
/// ones the host measures against.
pub use wasmsched_rules::split::proportional_split;

/// Each tenant's entitlement now: `capacity` GPUs shared by weight, max-min fair, none given
/// more than its usable demand ([`crate::view::Tenant::usable_demand`]): the host's own rule,
/// the one its fairness figures measure against.
pub use wasmsched_rules::tenants::entitled;

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn lower_is_better_values_are_divided_by_the_largest_seen() {
        let mut n = Normaliser::new(Direction::LowerIsBetter);
        assert_eq!(n.push(2.0), Some(1.0));
        assert_eq!(n.push(1.0), Some(0.5));
        assert_eq!(n.push(4.0), Some(1.0));
        assert_eq!(n.push(1.0), Some(0.25));
        assert_eq!(n.push(f64::NAN), None);
    }

    #[test]
    fn a_target_is_reached_from_either_side_by_direction() {
        assert!(reaches(Direction::HigherIsBetter, 0.9, 0.85) && !reaches(Direction::HigherIsBetter, 0.8, 0.85));
        assert!(reaches(Direction::LowerIsBetter, 25.0, 30.0) && !reaches(Direction::LowerIsBetter, 31.0, 30.0));
        assert!(reaches(Direction::LowerIsBetter, 30.0, 30.0));
    }

    #[test]
    fn higher_is_better_values_pass_as_they_are() {
        let mut n = Normaliser::new(Direction::HigherIsBetter);
        assert_eq!(n.push(0.42), Some(0.42));
        assert_eq!(n.push(0.9), Some(0.9));
    }

    #[test]
    fn window_mean_takes_samples_after_from_up_to_and_including_to() {
        let s = [(Seconds(0.0), 1.0), (Seconds(10.0), 2.0), (Seconds(20.0), 4.0), (Seconds(30.0), 8.0)];
        assert_eq!(window_mean(s, Seconds(0.0), Seconds(20.0)), Some(3.0));
        assert_eq!(window_mean(s, Seconds(30.0), Seconds(60.0)), None);
    }

    #[test]
    fn growth_is_the_same_whichever_way_the_metric_moves() {
        assert!(close(growth_rate(0.5, 0.8, Seconds(10.0)), 0.03));
        assert!(close(growth_rate(0.8, 0.5, Seconds(10.0)), 0.03));
        assert_eq!(growth_rate(0.5, 0.8, Seconds(0.0)), 0.0);
    }

    #[test]
    fn a_job_using_no_cpu_has_no_growth_efficiency() {
        assert_eq!(growth_efficiency(0.5, 0.0), 0.0);
        assert!(close(growth_efficiency(0.03, 0.5), 0.06));
    }
}
