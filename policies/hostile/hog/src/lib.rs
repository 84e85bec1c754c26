//! Hostile fixture: `decide` allocates until something stops it. The host's memory cap must.

use wasmsched_sdk::prelude::*;

struct Hog(Vec<Vec<u8>>);

impl Policy for Hog {
    type Config = NoConfig;
    fn new(_: NoConfig) -> Result<Self, PolicyError> {
        Ok(Hog(Vec::new()))
    }
    fn decide(&mut self, _: &Snapshot) -> Result<Decision, PolicyError> {
        loop {
            self.0.push(std::hint::black_box(vec![1u8; 1 << 20]));
        }
    }
}

export_policy!(Hog);
