//! Hostile fixture: `decide` never returns (after `after` calls that decide nothing; config
//! `{"after": N}`, 0 when absent). The host's epoch deadline must stop it.

use serde::Deserialize;
use wasmsched_sdk::prelude::*;

/// How many calls pass before it spins.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Config {
    after: u32,
}

struct Spin {
    config: Config,
    calls: u32,
}

impl Policy for Spin {
    type Config = Config;

    fn new(config: Config) -> Result<Self, PolicyError> {
        Ok(Spin { config, calls: 0 })
    }

    fn decide(&mut self, s: &Snapshot) -> Result<Decision, PolicyError> {
        self.calls += 1;
        if self.calls <= self.config.after {
            return Ok(Decision::new());
        }
        let mut n = s.job_count() as u64;
        loop {
            n = std::hint::black_box(n.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

export_policy!(Spin);
