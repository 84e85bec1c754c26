//! The share arithmetic, pure: what the trainers on one GPU get, where a service beside a
//! trainer starts, and how its share follows its latency ([`Watch`]).

use serde::{Deserialize, Serialize};
use wasmsched_sdk::stats;

use crate::config::Config;

/// A percent as a share of 1 to 100.
fn share(percent: f64) -> u8 {
    Config::percent(percent.round().clamp(1.0, 100.0))
}

/// The shares of trainers on one GPU with `demands` (percent of a GPU): each its demand plus
/// the margin (at most 100) when all fit in one GPU; otherwise 100 split in proportion to the
/// demands, each at least the floor (the last takes what the rounding of the others leaves).
pub fn trainers(config: &Config, demands: &[f64]) -> Vec<u8> {
    if demands.iter().sum::<f64>() <= 100.0 {
        return demands.iter().map(|d| share(d + config.margin_percent)).collect();
    }
    let floor = config.min_share_percent;
    let n = demands.len();
    let split = stats::proportional_split(100.0, demands, &vec![floor; n], &vec![100.0; n]);
    let mut shares: Vec<f64> = split.iter().map(|s| s.round().max(floor)).collect();
    if let Some((last, rest)) = shares.split_last_mut() {
        *last = (100.0 - rest.iter().sum::<f64>()).max(floor);
    }
    shares.into_iter().map(share).collect()
}

/// Where a service with `demand` starts beside a trainer: its demand plus the service margin,
/// between the floor and the maximum.
pub fn service_start(config: &Config, demand: f64) -> u8 {
    share((demand + config.service_margin_percent).clamp(config.min_share_percent, config.max_service_percent))
}

/// The service's share now: the one in force while it lies between its start and the maximum
/// (raised or relaxed before); clamped into that range; its start when it has none, or holds
/// more than the maximum (it ran alone until now).
pub fn service_now(config: &Config, current: Option<u8>, start: u8) -> u8 {
    let max = Config::percent(config.max_service_percent);
    match current {
        Some(p) if p <= max => p.clamp(start.min(max), max),
        _ => start,
    }
}

/// The trainer's share beside a service that holds `service`: the rest, at least the floor.
pub fn trainer_beside(config: &Config, service: u8) -> u8 {
    (100 - service.min(100)).max(Config::percent(config.min_share_percent))
}

/// What a service's latency asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Leave the shares as they are.
    Keep,
    /// Raise the service's share to this.
    Raise(u8),
    /// Give share back to the trainer: the service's drops to this.
    Relax(u8),
    /// It is at the maximum and still misses: move the trainer away.
    Protect,
}

/// A service's consecutive checks: misses at its maximum share, and checks well within its
/// target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Watch {
    misses_at_max: u32,
    easy: u32,
}

impl Watch {
    /// One check of a service holding `share` (starting at `start`) whose newest p99 is `p99`
    /// against `target`, both in ms.
    pub fn check(&mut self, config: &Config, share: u8, start: u8, p99: f64, target: f64) -> Verdict {
        let max = Config::percent(config.max_service_percent);
        if p99 > target {
            self.easy = 0;
            if share < max {
                self.misses_at_max = 0;
                return Verdict::Raise(share.saturating_add(Config::percent(config.step_percent)).min(max));
            }
            self.misses_at_max += 1;
            return if self.misses_at_max >= Config::count(config.protect_after) {
                Verdict::Protect
            } else {
                Verdict::Keep
            };
        }
        self.misses_at_max = 0;
        if p99 >= config.relax_below * target {
            self.easy = 0;
            return Verdict::Keep;
        }
        self.easy = self.easy.saturating_add(1);
        if self.easy < Config::count(config.relax_after) || share <= start {
            return Verdict::Keep;
        }
        self.easy = 0;
        Verdict::Relax(share.saturating_sub(Config::percent(config.relax_step_percent)).max(start))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_light_trainers_each_get_their_demand_plus_the_margin() {
        let c = Config::default();
        assert_eq!(trainers(&c, &[45.0, 40.0]), [55, 50]);
        assert_eq!(trainers(&c, &[95.0, 5.0]), [100, 15], "capped at the whole GPU");
        assert_eq!(trainers(&c, &[20.0, 30.0, 40.0]), [30, 40, 50], "three that fit");
    }

    #[test]
    fn two_heavy_trainers_split_the_gpu_by_demand_above_the_floor() {
        let c = Config::default();
        assert_eq!(trainers(&c, &[70.0, 55.0]), [56, 44]);
        assert_eq!(trainers(&c, &[100.0, 4.0]), [90, 10], "the lighter keeps its floor");
        assert_eq!(trainers(&c, &[60.0, 30.0, 30.0]), [50, 25, 25], "three that do not");
    }

    #[test]
    fn a_service_starts_at_its_demand_plus_margin_and_keeps_a_raised_share() {
        let c = Config::default();
        assert_eq!(service_start(&c, 40.0), 60);
        assert_eq!(service_start(&c, 85.0), 90, "no more than the maximum");
        assert_eq!(service_now(&c, None, 60), 60);
        assert_eq!(service_now(&c, Some(100), 60), 60, "it was alone: back to its start");
        assert_eq!(service_now(&c, Some(80), 60), 80);
        assert_eq!(service_now(&c, Some(50), 60), 60, "never below its start");
        assert_eq!(trainer_beside(&c, 60), 40);
        assert_eq!(trainer_beside(&c, 95), 10, "the trainer keeps its floor");
    }

    #[test]
    fn misses_raise_the_service_and_misses_at_the_maximum_protect_it() {
        let c = Config::default();
        let mut w = Watch::default();
        assert_eq!(w.check(&c, 60, 60, 130.0, 100.0), Verdict::Raise(70));
        assert_eq!(w.check(&c, 85, 60, 130.0, 100.0), Verdict::Raise(90));
        assert_eq!(w.check(&c, 90, 60, 130.0, 100.0), Verdict::Keep);
        assert_eq!(w.check(&c, 90, 60, 130.0, 100.0), Verdict::Keep);
        assert_eq!(w.check(&c, 90, 60, 80.0, 100.0), Verdict::Keep, "a met target breaks the run");
        for _ in 0..2 {
            assert_eq!(w.check(&c, 90, 60, 130.0, 100.0), Verdict::Keep);
        }
        assert_eq!(w.check(&c, 90, 60, 130.0, 100.0), Verdict::Protect);
    }

    #[test]
    fn a_service_well_within_its_target_gives_share_back_slowly_down_to_its_start() {
        let c = Config::default();
        let mut w = Watch::default();
        assert_eq!(w.check(&c, 70, 60, 40.0, 100.0), Verdict::Keep);
        assert_eq!(w.check(&c, 70, 60, 40.0, 100.0), Verdict::Keep);
        assert_eq!(w.check(&c, 70, 60, 40.0, 100.0), Verdict::Relax(65));
        assert_eq!(w.check(&c, 62, 60, 40.0, 100.0), Verdict::Keep);
        assert_eq!(w.check(&c, 62, 60, 60.0, 100.0), Verdict::Keep, "above half the target resets the count");
        for _ in 0..2 {
            assert_eq!(w.check(&c, 62, 60, 40.0, 100.0), Verdict::Keep);
        }
        assert_eq!(w.check(&c, 62, 60, 40.0, 100.0), Verdict::Relax(60));
        for _ in 0..5 {
            assert_eq!(w.check(&c, 60, 60, 40.0, 100.0), Verdict::Keep, "never below its start");
        }
    }
}
