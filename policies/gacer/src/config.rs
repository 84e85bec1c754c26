//! GACER's config table: every constant of the policy, with its default, and the checks that
//! refuse a bad value with the key's name and its allowed range.

use serde::Deserialize;
use wasmsched_sdk::PolicyError;

/// GACER's constants. Numbers are read as JSON numbers and checked in [`Config::check`], so
/// that an out-of-range value is refused with its key's name.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Set GPU shares and protect services; false places the same way and sets no shares
    /// (the unregulated, time-sliced baseline).
    pub regulate: bool,
    /// Jobs share a GPU only when their demands, in percent of a GPU, add up to at most
    /// this (1 to 200).
    pub pack_limit_percent: f64,
    /// Jobs share a GPU only when their memory adds up to at most this fraction of it
    /// (above 0, at most 1).
    pub memory_fraction: f64,
    /// Two trainers whose demands fit in one GPU each get their demand plus this (0 to 100).
    pub margin_percent: f64,
    /// A service beside a trainer starts at its demand plus this (0 to 100).
    pub service_margin_percent: f64,
    /// No job sharing a GPU gets less than this share (1 to 50).
    pub min_share_percent: f64,
    /// A service's share is raised to at most this (1 to 99; with `min-share-percent`, at
    /// most 100).
    pub max_service_percent: f64,
    /// A service that misses its target gains this much share, its trainer loses it (1 to 50).
    pub step_percent: f64,
    /// Checks a service misses its target at its maximum share before its trainer is
    /// preempted (a whole number, 1 to 1000).
    pub protect_after: f64,
    /// A service whose p99 stays below this fraction of its target gives share back (0, off,
    /// to below 1).
    pub relax_below: f64,
    /// Checks below `relax-below` before it does (a whole number, 1 to 1000).
    pub relax_after: f64,
    /// How much share it gives back each time (1 to 50).
    pub relax_step_percent: f64,
    /// A trainer is preempted at most once in this many seconds (0 or more).
    pub min_move_interval_s: f64,
    /// Intervals a model must run alone on a GPU before its profile is trusted (a whole
    /// number, 1 to 1000).
    pub profile_samples: f64,
    /// Weight of the newest interval in a model's demand, an exponentially weighted mean
    /// (above 0, at most 1).
    pub ewma_weight: f64,
    /// Models that, regulated on one GPU, get less than this much of it in all (each one's
    /// speed there, added up; 1 is what one alone gets) no longer share: the latest of them
    /// is preempted and they are never put together again (0 to 2; 0 off).
    pub min_pair_gain: f64,
    /// Trainers on one GPU at most (a whole number, 2 to 4); a service shares its GPU with one
    /// trainer only.
    pub max_per_gpu: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            regulate: true,
            pack_limit_percent: 130.0,
            memory_fraction: 0.9,
            margin_percent: 10.0,
            service_margin_percent: 20.0,
            min_share_percent: 10.0,
            max_service_percent: 90.0,
            step_percent: 10.0,
            protect_after: 3.0,
            relax_below: 0.5,
            relax_after: 3.0,
            relax_step_percent: 5.0,
            min_move_interval_s: 600.0,
            profile_samples: 3.0,
            ewma_weight: 0.3,
            min_pair_gain: 1.0,
            max_per_gpu: 3.0,
        }
    }
}

/// `key`'s value, refused unless it is a whole number from `lo` to `hi`.
fn whole(key: &str, value: f64, lo: f64, hi: f64) -> Result<(), PolicyError> {
    if value.is_finite() && value.fract() == 0.0 && (lo..=hi).contains(&value) {
        return Ok(());
    }
    Err(PolicyError::InvalidConfig(format!("{key} must be a whole number from {lo} to {hi}; got {value}")))
}

/// `key`'s value, refused unless it is finite and `ok`; `shape` says in words what is allowed.
fn shaped(key: &str, value: f64, shape: &str, ok: bool) -> Result<(), PolicyError> {
    if value.is_finite() && ok {
        Ok(())
    } else {
        Err(PolicyError::InvalidConfig(format!("{key} must be {shape}; got {value}")))
    }
}

impl Config {
    /// Refuse the first value out of its range, naming its key.
    pub fn check(&self) -> Result<(), PolicyError> {
        whole("pack-limit-percent", self.pack_limit_percent, 1.0, 200.0)?;
        let f = self.memory_fraction;
        shaped("memory-fraction", f, "above 0 and at most 1", f > 0.0 && f <= 1.0)?;
        whole("margin-percent", self.margin_percent, 0.0, 100.0)?;
        whole("service-margin-percent", self.service_margin_percent, 0.0, 100.0)?;
        whole("min-share-percent", self.min_share_percent, 1.0, 50.0)?;
        whole("max-service-percent", self.max_service_percent, 1.0, 99.0)?;
        whole("step-percent", self.step_percent, 1.0, 50.0)?;
        whole("protect-after", self.protect_after, 1.0, 1000.0)?;
        let r = self.relax_below;
        shaped("relax-below", r, "from 0 (off) to below 1", (0.0..1.0).contains(&r))?;
        whole("relax-after", self.relax_after, 1.0, 1000.0)?;
        whole("relax-step-percent", self.relax_step_percent, 1.0, 50.0)?;
        let m = self.min_move_interval_s;
        shaped("min-move-interval-s", m, "a number of seconds, zero or more", m >= 0.0)?;
        whole("profile-samples", self.profile_samples, 1.0, 1000.0)?;
        let w = self.ewma_weight;
        shaped("ewma-weight", w, "above 0 and at most 1", w > 0.0 && w <= 1.0)?;
        let g = self.min_pair_gain;
        shaped("min-pair-gain", g, "from 0 (off) to 2", (0.0..=2.0).contains(&g))?;
        whole("max-per-gpu", self.max_per_gpu, 2.0, 4.0)?;
        if self.max_service_percent + self.min_share_percent > 100.0 {
            return Err(PolicyError::InvalidConfig(format!(
                "max-service-percent ({}) and min-share-percent ({}) add up to more than 100: lower one, so \
                 that the trainer beside a service keeps its floor",
                self.max_service_percent, self.min_share_percent
            )));
        }
        Ok(())
    }

    /// A percent key as a share (checked to be whole and at most 200 by [`Self::check`]).
    pub(crate) fn percent(value: f64) -> u8 {
        value.clamp(0.0, 255.0) as u8
    }

    /// A count key (checked to be whole and at least 1 by [`Self::check`]).
    pub(crate) fn count(value: f64) -> u32 {
        value.max(1.0) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(config: Config) -> String {
        match config.check() {
            Err(PolicyError::InvalidConfig(message)) => message,
            other => panic!("{config:?} was not refused: {other:?}"),
        }
    }

    #[test]
    fn the_defaults_pass_their_own_checks() {
        assert!(Config::default().check().is_ok());
    }

    #[test]
    fn each_value_out_of_range_is_refused_with_its_key_and_range() {
        let d = Config::default;
        for (config, expected) in [
            (
                Config { pack_limit_percent: 250.0, ..d() },
                "pack-limit-percent must be a whole number from 1 to 200; got 250",
            ),
            (Config { memory_fraction: 0.0, ..d() }, "memory-fraction must be above 0 and at most 1; got 0"),
            (Config { margin_percent: -5.0, ..d() }, "margin-percent must be a whole number from 0 to 100"),
            (
                Config { min_share_percent: 10.5, ..d() },
                "min-share-percent must be a whole number from 1 to 50; got 10.5",
            ),
            (Config { max_service_percent: 100.0, ..d() }, "max-service-percent must be a whole number from 1 to 99"),
            (Config { step_percent: 0.0, ..d() }, "step-percent must be a whole number from 1 to 50"),
            (Config { protect_after: 0.0, ..d() }, "protect-after must be a whole number from 1 to 1000"),
            (Config { relax_below: 1.0, ..d() }, "relax-below must be from 0 (off) to below 1; got 1"),
            (
                Config { min_move_interval_s: f64::NAN, ..d() },
                "min-move-interval-s must be a number of seconds, zero or more; got NaN",
            ),
            (Config { ewma_weight: 1.5, ..d() }, "ewma-weight must be above 0 and at most 1"),
            (Config { max_service_percent: 95.0, ..d() }, "add up to more than 100"),
        ] {
            let message = refusal(config);
            assert!(message.contains(expected), "{message} should say {expected}");
        }
    }
}
