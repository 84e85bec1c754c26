//! Keeping the loop's ticks on the wall clock at the configured speed.

use std::time::{Duration, Instant};

/// Keeps the wall clock and the backend's clock in step.
pub(super) struct Pacer {
    pub(super) speed: crate::config::Speed,
    pub(super) tick: Duration,
    pub(super) anchor: Option<(Instant, u64)>,
}

impl Pacer {
    /// When the observation up to `next_ms` is due; None for as fast as possible.
    pub(super) fn due(&mut self, next_ms: u64) -> Option<Instant> {
        let wall = |ms: u64| self.speed.wall(Duration::from_millis(ms));
        let (at, from) =
            *self.anchor.get_or_insert((Instant::now(), next_ms.saturating_sub(self.tick.as_millis() as u64)));
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
