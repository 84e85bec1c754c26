//! fair-share: the baseline every result is a ratio against.
//!
//! Docker's default: no limits, so the kernel's CFS splits the CPU equally among runnable
//! containers and an idle one's share flows to the others. The policy lifts every CPU and
//! memory limit it finds and otherwise does nothing. Reads: each job's limits. Config: none.

use wasmsched_sdk::prelude::*;

/// Lifts every limit.
pub struct FairShare;

impl Policy for FairShare {
    type Config = NoConfig;

    fn new(_: NoConfig) -> Result<Self, PolicyError> {
        Ok(FairShare)
    }

    fn decide(&mut self, s: &Snapshot) -> Result<Decision, PolicyError> {
        let mut d = Decision::new();
        for job in s.jobs() {
            if job.cpu_limit().is_some() {
                d.push(Action::lift_cpu(job.id()).because("fair-share sets no CPU limit"));
            }
            if job.memory_limit().is_some() {
                d.push(Action::lift_memory(job.id()).because("fair-share sets no memory limit"));
            }
        }
        Ok(d)
    }
}

export_policy!(FairShare);

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_sdk::testing::{Harness, TestWorld, job};

    #[test]
    fn lifts_a_cpu_limit_it_finds_and_then_leaves_the_job_alone() {
        let mut world = TestWorld::new();
        world.node("n0", Millicores(4000), Bytes::gib(8));
        let a = world.add_job(job("a", "cifar10"));
        let b = world.add_job(job("b", "ncf"));
        world.set_cpu_limit(a, Some(Millicores(500)));
        let mut h = Harness::new(FairShare, world);
        let d = h.tick(Seconds(30.0)).unwrap();
        assert_eq!(d.actions().len(), 1);
        assert_eq!(d.cpu_limit_for(a), Some(None));
        assert_eq!(d.cpu_limit_for(b), None);
        assert!(h.tick(Seconds(30.0)).unwrap().is_empty());
    }

    #[test]
    fn refuses_a_config_with_keys_it_does_not_know() {
        let err = Harness::<FairShare>::from_config(r#"{"alpha":1}"#, TestWorld::new()).err().unwrap();
        assert!(matches!(err, PolicyError::InvalidConfig(m) if m.contains("alpha")));
    }
}
