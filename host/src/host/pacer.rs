//! Keeping the loop's ticks on the wall clock at the configured speed.

use std::time::{Duration, Instant};

/// Keeps the wall clock and the backend's clock in step.
pub(super) struct Pacer {
    pub(super) speed: crate::config::Speed,
    pub(super) tick: Duration,
    pub(super) anchor: Option<(Instant, u64)>,
}

impl Pacer {
    /// When the observation up to `next_ms` is due; None for as fast as possible. The first is
    /// due at once: a host that starts (or a standby that takes over) acts on the cluster as
    /// it finds it without waiting a tick, and each one after comes a tick later.
    pub(super) fn due(&mut self, next_ms: u64) -> Option<Instant> {
        let wall = |ms: u64| self.speed.wall(Duration::from_millis(ms));
        let (at, from) = *self.anchor.get_or_insert((Instant::now(), next_ms));
        wall(next_ms.saturating_sub(from)).map(|d| at + d)
    }

    /// True (and the clock re-anchored) when the loop is more than a tick behind.
    pub(super) fn late(&mut self, next_ms: u64, due: Option<Instant>) -> bool {
        let (Some(due), Some(tick)) = (due, self.speed.wall(self.tick)) else { return false };
        let now = Instant::now();
        if now > due + tick {
            self.anchor = Some((now, next_ms));
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Speed;

    #[test]
    fn the_first_tick_is_due_at_once_and_each_after_a_tick_later() {
        let mut pacer = Pacer { speed: Speed::RealTime, tick: Duration::from_secs(2), anchor: None };
        let start = Instant::now();
        let first = pacer.due(2000).unwrap();
        assert!(first.duration_since(start) < Duration::from_millis(100), "at once: {:?}", first - start);
        assert_eq!(pacer.due(4000).unwrap() - first, Duration::from_secs(2));
        assert_eq!(pacer.due(8000).unwrap() - first, Duration::from_secs(6));
    }
}
