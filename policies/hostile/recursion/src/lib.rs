//! Hostile fixture: `decide` recurses without bound. The engine's stack limit must stop it.

use wasmsched_sdk::prelude::*;

struct Recursion;

/// Small frames, no locals in linear memory: the wasm call stack itself overflows.
fn depth(n: u64) -> u64 {
    if n == u64::MAX { 0 } else { depth(n + 1).wrapping_mul(3) ^ n }
}

impl Policy for Recursion {
    type Config = NoConfig;
    fn new(_: NoConfig) -> Result<Self, PolicyError> {
        Ok(Recursion)
    }
    fn decide(&mut self, s: &Snapshot) -> Result<Decision, PolicyError> {
        let d = depth(s.job_count() as u64);
        Ok(Decision::new().with(Action::stop(JobId(d as u32))))
    }
}

export_policy!(Recursion);
