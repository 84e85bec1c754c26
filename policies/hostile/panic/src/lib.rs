//! Hostile fixture: `decide` panics. In a component a panic aborts: the call traps.

use wasmsched_sdk::prelude::*;

struct Panic;

impl Policy for Panic {
    type Config = NoConfig;
    fn new(_: NoConfig) -> Result<Self, PolicyError> {
        Ok(Panic)
    }
    fn decide(&mut self, s: &Snapshot) -> Result<Decision, PolicyError> {
        panic!("policy bug: {} jobs is more than this policy can count", s.job_count());
    }
}

export_policy!(Panic);
