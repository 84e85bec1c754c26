//! What each pair of models gets from a GPU they share, learnt from their GPU use: a job's
//! speed beside the other is its GPU use there over its demand alone, and a pair's *gain* is
//! the two speeds added up (1: as much as one job alone gets; below, the pair would do better
//! taking the GPU in turns, or one after the other). Demands alone cannot tell this: two light
//! models may still slow each other down badly.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use wasmsched_sdk::prelude::*;

use crate::book::Entry;
use crate::profile::Profiles;

/// One pair of models: its gain, an exponentially weighted mean over the intervals it was
/// seen regulated, and how many.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Pair {
    /// Both speeds added up.
    pub gain: f64,
    /// Intervals seen.
    pub samples: u32,
}

/// Per pair of models, keyed `a+b` with the names in order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Pairs {
    pairs: BTreeMap<String, Pair>,
}

/// A GPU's two regulated trainers and what they got together this interval.
pub struct Reading<'a> {
    /// The GPU.
    pub slot: GpuSlot,
    /// The two jobs.
    pub jobs: [Job<'a>; 2],
    /// Their speeds added up.
    pub gain: f64,
}

fn key(a: &str, b: &str) -> String {
    if a <= b { format!("{a}+{b}") } else { format!("{b}+{a}") }
}

impl Pairs {
    /// What is known of models `a` and `b` together.
    pub fn get(&self, a: &str, b: &str) -> Option<&Pair> {
        self.pairs.get(&key(a, b))
    }

    /// Whether `a` and `b` were seen long enough (`samples` intervals) to get less than
    /// `min_gain` of a GPU together.
    pub fn poor(&self, a: &str, b: &str, min_gain: f64, samples: u32) -> bool {
        self.get(a, b).is_some_and(|p| p.samples >= samples && p.gain < min_gain)
    }

    /// Learn from every GPU two running single-GPU trainers share with shares set (regulated)
    /// whose models are profiled; the readings, for the caller to act on.
    pub fn learn<'a>(&mut self, entries: &[Entry<'a>], profiles: &Profiles, weight: f64) -> Vec<Reading<'a>> {
        let mut readings = Vec::new();
        for entry in entries {
            let &[a, b] = entry.holders.as_slice() else { continue };
            let regulated_trainer = |j: &Job| {
                j.kind() == JobKind::Training && !j.is_queued() && j.gpus_asked() == 1 && j.gpu_share().is_some()
            };
            if !(regulated_trainer(&a) && regulated_trainer(&b)) {
                continue;
            }
            let speed = |j: &Job| {
                let demand = profiles.get(j.model())?.demand_percent;
                let used = f64::from(j.gpu_use_percent());
                (demand > 0.0 && used.is_finite() && used > 0.0).then(|| (used / demand).min(1.5))
            };
            let (Some(sa), Some(sb)) = (speed(&a), speed(&b)) else { continue };
            let gain = sa + sb;
            let pair = self.pairs.entry(key(a.model(), b.model())).or_default();
            pair.gain = if pair.samples == 0 { gain } else { weight * gain + (1.0 - weight) * pair.gain };
            pair.samples += 1;
            readings.push(Reading { slot: entry.slot, jobs: [a, b], gain: pair.gain });
        }
        readings
    }
}
