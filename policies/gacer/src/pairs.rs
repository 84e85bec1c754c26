//! What each set of models gets from a GPU they share, learnt from their GPU use: a job's
//! speed beside the others is its GPU use there over its demand alone, and a set's *gain* is
//! the speeds added up (1: as much as one job alone gets; below, the jobs would do better
//! taking the GPU one after the other). Demands alone cannot tell this: two light models may
//! still slow each other down badly. A set is a pair or more, up to `max-per-gpu`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use wasmsched_sdk::prelude::*;

use crate::book::Entry;
use crate::profile::Profiles;

/// One set of models: its gain, an exponentially weighted mean over the intervals it was
/// seen regulated, and how many.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Pair {
    /// Both speeds added up.
    pub gain: f64,
    /// Intervals seen.
    pub samples: u32,
}

/// Per set of models, keyed `a+b+…` with the names in order (a model twice, twice).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Pairs {
    pairs: BTreeMap<String, Pair>,
}

/// A GPU's regulated trainers and what they got together, as learnt so far.
pub struct Reading<'a> {
    /// The GPU.
    pub slot: GpuSlot,
    /// The jobs.
    pub jobs: Vec<Job<'a>>,
    /// Their set's gain.
    pub gain: f64,
}

fn key(models: &[&str]) -> String {
    let mut models = models.to_vec();
    models.sort_unstable();
    models.join("+")
}

impl Pairs {
    /// What is known of `models` together.
    pub fn get(&self, models: &[&str]) -> Option<&Pair> {
        self.pairs.get(&key(models))
    }

    /// Whether `models` were seen long enough (`samples` intervals) to get less than
    /// `min_gain` of a GPU together.
    pub fn poor(&self, models: &[&str], min_gain: f64, samples: u32) -> bool {
        self.get(models).is_some_and(|p| p.samples >= samples && p.gain < min_gain)
    }

    /// Learn from every GPU that two or more running single-GPU trainers share, all with a
    /// share set (regulated) and their models profiled; the readings, for the caller to act on.
    pub fn learn<'a>(&mut self, entries: &[Entry<'a>], profiles: &Profiles, weight: f64) -> Vec<Reading<'a>> {
        let mut readings = Vec::new();
        for entry in entries.iter().filter(|e| e.holders.len() > 1) {
            let regulated_trainer = |j: &Job| {
                j.kind() == JobKind::Training && !j.is_queued() && j.gpus_asked() == 1 && j.gpu_share().is_some()
            };
            if !entry.holders.iter().all(regulated_trainer) {
                continue;
            }
            let speed = |j: &Job| {
                let demand = profiles.get(j.model())?.demand_percent;
                let used = f64::from(j.gpu_use_percent());
                (demand > 0.0 && used.is_finite() && used > 0.0).then(|| (used / demand).min(1.5))
            };
            let Some(speeds) = entry.holders.iter().map(speed).collect::<Option<Vec<f64>>>() else { continue };
            let gain: f64 = speeds.iter().sum();
            let models: Vec<&str> = entry.holders.iter().map(Job::model).collect();
            let set = self.pairs.entry(key(&models)).or_default();
            set.gain = if set.samples == 0 { gain } else { weight * gain + (1.0 - weight) * set.gain };
            set.samples = set.samples.saturating_add(1);
            readings.push(Reading { slot: entry.slot, jobs: entry.holders.clone(), gain: set.gain });
        }
        readings
    }
}
