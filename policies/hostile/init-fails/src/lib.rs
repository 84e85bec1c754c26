//! Hostile fixture: refuses every config, as a policy with a bad config table would.

use wasmsched_sdk::prelude::*;

struct InitFails;

impl Policy for InitFails {
    type Config = NoConfig;
    fn new(_: NoConfig) -> Result<Self, PolicyError> {
        Err(PolicyError::InvalidConfig("alpha must be positive (this fixture refuses every config)".into()))
    }
    fn decide(&mut self, _: &Snapshot) -> Result<Decision, PolicyError> {
        Ok(Decision::new())
    }
}

export_policy!(InitFails);
