//! Latency percentiles and rates: the pure arithmetic of the report.

use std::time::Duration;

use serde::Serialize;

/// p50, p99 and max of a set of latencies, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Latency {
    /// How many samples.
    pub count: usize,
    /// The median (nearest rank).
    pub p50_ms: f64,
    /// The 99th percentile (nearest rank).
    pub p99_ms: f64,
    /// The largest.
    pub max_ms: f64,
}

/// The `q`-quantile (0 < q ≤ 1) of sorted samples by nearest rank: the smallest sample with at
/// least `q` of all samples at or below it. None for no samples.
pub fn nearest_rank(sorted: &[Duration], q: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// The percentiles of `samples` (sorted here); None for no samples.
pub fn latency(mut samples: Vec<Duration>) -> Option<Latency> {
    samples.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    Some(Latency {
        count: samples.len(),
        p50_ms: ms(nearest_rank(&samples, 0.50)?),
        p99_ms: ms(nearest_rank(&samples, 0.99)?),
        max_ms: ms(*samples.last()?),
    })
}

/// `count` per second over `over`; None over no time.
pub fn per_second(count: f64, over: Duration) -> Option<f64> {
    let secs = over.as_secs_f64();
    (secs > 0.0).then(|| count / secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&m| Duration::from_millis(m)).collect()
    }

    #[test]
    fn nearest_rank_of_a_hundred_samples_is_the_sample_at_that_rank() {
        let sorted = ms(&(1..=100).collect::<Vec<_>>());
        assert_eq!(nearest_rank(&sorted, 0.5), Some(Duration::from_millis(50)));
        assert_eq!(nearest_rank(&sorted, 0.99), Some(Duration::from_millis(99)));
        assert_eq!(nearest_rank(&sorted, 1.0), Some(Duration::from_millis(100)));
    }

    #[test]
    fn one_sample_is_every_percentile() {
        let l = latency(ms(&[7])).unwrap();
        assert_eq!((l.count, l.p50_ms, l.p99_ms, l.max_ms), (1, 7.0, 7.0, 7.0));
    }

    #[test]
    fn latency_sorts_its_samples_first() {
        let l = latency(ms(&[900, 5, 30, 10, 20])).unwrap();
        assert_eq!((l.p50_ms, l.p99_ms, l.max_ms), (20.0, 900.0, 900.0));
    }

    #[test]
    fn no_samples_have_no_percentiles() {
        assert_eq!(latency(Vec::new()), None);
        assert_eq!(nearest_rank(&[], 0.5), None);
    }

    #[test]
    fn a_rate_over_no_time_is_none() {
        assert_eq!(per_second(10.0, Duration::ZERO), None);
        assert_eq!(per_second(10.0, Duration::from_millis(2500)), Some(4.0));
    }
}
