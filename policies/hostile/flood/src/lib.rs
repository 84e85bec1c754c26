//! Hostile fixture: a decision of twenty thousand actions, far more than any job count justifies.

use wasmsched_sdk::prelude::*;

struct Flood;

impl Policy for Flood {
    type Config = NoConfig;
    fn new(_: NoConfig) -> Result<Self, PolicyError> {
        Ok(Flood)
    }
    fn decide(&mut self, s: &Snapshot) -> Result<Decision, PolicyError> {
        let job = s.jobs().next().map_or(JobId(0), |j| j.id());
        let mut d = Decision::new();
        for i in 0..20_000u64 {
            d.push(Action::set_cpu(job, Millicores(1000 + i % 7)).because("flood"));
        }
        Ok(d)
    }
}

export_policy!(Flood);
