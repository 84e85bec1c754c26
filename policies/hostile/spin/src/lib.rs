//! Hostile fixture: `decide` never returns. The host's epoch deadline must stop it.

use wasmsched_sdk::prelude::*;

struct Spin;

impl Policy for Spin {
    type Config = NoConfig;
    fn new(_: NoConfig) -> Result<Self, PolicyError> {
        Ok(Spin)
    }
    fn decide(&mut self, s: &Snapshot) -> Result<Decision, PolicyError> {
        let mut n = s.job_count() as u64;
        loop {
            n = std::hint::black_box(n.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

export_policy!(Spin);
