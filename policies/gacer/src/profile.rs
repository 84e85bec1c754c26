//! What GACER learns about each model: how much of a GPU it uses and how much GPU memory it
//! holds when it runs alone on one. Learnt from single-GPU jobs only, and only while they are
//! uncapped (no share, or a share of 100), so that what is measured is the model's own demand.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use wasmsched_sdk::prelude::*;

/// One model's profile.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Exponentially weighted mean of the percent of its GPU it used, per interval alone.
    pub demand_percent: f64,
    /// The most memory its GPU had in use while it ran alone there.
    pub memory_bytes: u64,
    /// Intervals it was measured alone.
    pub samples: u32,
}

impl Profile {
    /// Its GPU memory.
    pub fn memory(&self) -> Bytes {
        Bytes(self.memory_bytes)
    }

    /// Fold in one interval alone: `used` percent of the GPU, `memory` in use on it.
    fn observe(&mut self, used: f64, memory: Bytes, weight: f64) {
        self.demand_percent =
            if self.samples == 0 { used } else { weight * used + (1.0 - weight) * self.demand_percent };
        self.memory_bytes = self.memory_bytes.max(memory.0);
        self.samples = self.samples.saturating_add(1);
    }
}

/// Every model's profile, by model name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Profiles {
    models: BTreeMap<String, Profile>,
}

impl Profiles {
    /// A model's profile, once it has `samples` intervals alone.
    pub fn trusted(&self, model: &str, samples: u32) -> Option<&Profile> {
        self.models.get(model).filter(|p| p.samples >= samples)
    }

    /// A model's profile however few its samples.
    pub fn get(&self, model: &str) -> Option<&Profile> {
        self.models.get(model)
    }

    /// Set a model's profile (a test's starting point, say).
    pub fn insert(&mut self, model: &str, profile: Profile) {
        self.models.insert(model.to_owned(), profile);
    }

    /// Learn from the last interval: every running job that holds exactly one GPU, alone,
    /// uncapped, and used some of it. Logs a model when it reaches `samples`.
    pub fn learn(&mut self, s: &Snapshot, weight: f64, samples: u32) {
        for job in s.jobs() {
            let &[gpu] = job.gpus() else { continue };
            let alone = s.gpu_holders(gpu.node).get(gpu.index as usize) == Some(&1);
            let uncapped = job.gpu_share().is_none_or(|p| p >= 100);
            let used = f64::from(job.gpu_use_percent());
            if !(alone && uncapped && used.is_finite() && used > 0.0) {
                continue;
            }
            let memory =
                s.node(gpu.node).and_then(|n| n.gpus().nth(gpu.index as usize)).map_or(Bytes(0), |g| g.memory_used);
            let profile = self.models.entry(job.model().to_owned()).or_default();
            profile.observe(used.min(100.0), memory, weight);
            if profile.samples == samples {
                info!(
                    "gacer: profiled {}: {:.0} % of a GPU, {:.1} GiB of its memory",
                    job.model(),
                    profile.demand_percent,
                    gib(profile.memory())
                );
            }
        }
    }
}

/// Bytes in GiB, for reasons and logs.
pub fn gib(b: Bytes) -> f64 {
    b.0 as f64 / f64::from(1u32 << 30)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demand_is_a_weighted_mean_that_starts_at_the_first_sample_and_memory_its_maximum() {
        let mut p = Profile::default();
        p.observe(40.0, Bytes::gib(3), 0.5);
        assert_eq!((p.demand_percent, p.memory(), p.samples), (40.0, Bytes::gib(3), 1));
        p.observe(60.0, Bytes::gib(5), 0.5);
        p.observe(70.0, Bytes::gib(4), 0.5);
        assert_eq!((p.demand_percent, p.memory(), p.samples), (60.0, Bytes::gib(5), 3));
    }

    #[test]
    fn a_profile_is_trusted_only_after_enough_samples() {
        let mut profiles = Profiles::default();
        profiles.insert("bert", Profile { demand_percent: 50.0, memory_bytes: 0, samples: 2 });
        assert!(profiles.trusted("bert", 3).is_none());
        assert!(profiles.trusted("bert", 2).is_some());
        assert!(profiles.trusted("ncf", 1).is_none());
    }
}
