//! The `[backend]` table of `kind = "sim"`, and the simulator it builds.

use std::path::PathBuf;

use serde::Deserialize;

use wasmsched_core::backend::Speed;
use wasmsched_core::backend::{Built, Settings, filled};

use super::workload::Workload;
use super::{SimConfig, Simulator};

/// `kind = "sim"`: the built-in simulator, running a workload.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SimSettings {
    /// The workload (required): a scenario (`.toml`) or a workload CSV, relative to the
    /// config file.
    #[serde(default)]
    pub workload: PathBuf,
    /// Seeds the simulator's noise (default 0).
    #[serde(default)]
    pub seed: u64,
    /// How fast the simulated clock runs against the wall clock: `"real-time"` (the default),
    /// `"max"` (as fast as possible), or a factor (`60` runs an hour a minute).
    #[serde(default)]
    pub speed: Speed,
}

impl Settings for SimSettings {
    const KIND: &'static str = "sim";
    const DOES: &'static str = "runs a workload on a simulated clock";

    fn check(&self) -> Result<(), String> {
        let needs = "the sim backend needs a workload: [backend] workload = \"scenarios/demo.toml\"";
        filled(&self.workload.to_string_lossy(), needs)
    }
}

impl SimSettings {
    /// The simulator on `workload`, which the caller loaded from [`SimSettings::workload`].
    pub fn build(&self, workload: &Workload) -> Built {
        let simulator = Simulator::new(workload, SimConfig { seed: self.seed, ..SimConfig::default() });
        Built { backend: Box::new(simulator), name: format!("sim ({})", workload.name) }
    }
}
