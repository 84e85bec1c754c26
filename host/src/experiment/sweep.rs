//! A parameter sweep: one policy's config keys over a grid, every point over the same seeds
//! against a baseline policy, measured by one figure (the policy's own objective unless told
//! otherwise).

use serde::Serialize;
use serde_json::Value;

use super::paper::{Figure, Measured};

/// One swept config key and the values it takes, in the order given.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Axis {
    /// The policy's config key (`alpha`, `interval-s`).
    pub key: String,
    /// Its values.
    pub values: Vec<Value>,
}

/// One point of the grid.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Point {
    /// The index of this point's value on each axis, in axis order.
    pub at: Vec<usize>,
    /// The policy's config at this point: the fixed keys and this point's value of each axis.
    pub config: serde_json::Map<String, Value>,
    /// The figure over the seeds; None when it could not be measured on any (or the policy
    /// refused the config: see `error`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured: Option<Measured>,
    /// The figure on each seed, in seed order (None where it could not be measured).
    pub per_seed: Vec<Option<f64>>,
    /// Why the point has no figure, when the policy refused its config.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A whole sweep.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sweep {
    /// The workload's name.
    pub workload: String,
    /// The policy swept.
    pub policy: String,
    /// What every point is compared with, seed by seed.
    pub baseline: String,
    /// The figure measured at every point.
    pub figure: Figure,
    /// The paper's value of that figure, when the workload gives one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paper: Option<f64>,
    /// The seeds every point ran with.
    pub seeds: Vec<u64>,
    /// The swept keys, the first varying slowest.
    pub axes: Vec<Axis>,
    /// Every point of the grid, the last axis varying fastest.
    pub points: Vec<Point>,
}

impl Sweep {
    /// The point with the best mean figure (lowest change, or highest ratio).
    pub fn best(&self) -> Option<&Point> {
        let key =
            |p: &&Point| p.measured.as_ref().map(|m| if self.figure.lower_is_better() { m.mean } else { -m.mean });
        self.points.iter().filter(|p| p.measured.is_some()).min_by(|a, b| key(a).unwrap().total_cmp(&key(b).unwrap()))
    }
}
