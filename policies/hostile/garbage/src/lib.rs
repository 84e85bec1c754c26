//! Hostile fixture: every kind of invalid action beside one valid one. NaN and negative
//! values cannot cross the contract (its units are unsigned integers), so these are the
//! invalid values that can: an unknown job, zero CPU, more CPU or memory than the node has,
//! an unknown node, an unknown GPU and a share over 100 %.

use wasmsched_sdk::prelude::*;

struct Garbage;

impl Policy for Garbage {
    type Config = NoConfig;
    fn new(_: NoConfig) -> Result<Self, PolicyError> {
        Ok(Garbage)
    }
    fn decide(&mut self, s: &Snapshot) -> Result<Decision, PolicyError> {
        let mut d = Decision::new();
        d.push(Action::set_cpu(JobId(u32::MAX), Millicores(1000)).because("no such job"));
        let Some(job) = s.jobs().next() else { return Ok(d) };
        let id = job.id();
        d.push(Action::set_cpu(id, Millicores(0)).because("zero cpu"));
        d.push(Action::set_cpu(id, Millicores(u64::MAX)).because("more cpu than any node"));
        d.push(Action::set_memory(id, Bytes(u64::MAX)).because("more memory than any node"));
        d.push(Action::migrate(id, NodeId(9999)).because("no such node"));
        d.push(Action::set_gpu_share(id, 77, 50).because("no such gpu"));
        d.push(Action::set_gpu_share(id, 0, 250).because("share over 100 percent"));
        d.push(Action::place(id, NodeId(0), &[]).because("place a job that runs"));
        d.push(
            Action::place_on(JobId(u32::MAX), &[(NodeId(u32::MAX), vec![u32::MAX; 3])], true)
                .because("place nothing nowhere"),
        );
        d.push(Action::preempt(JobId(u32::MAX - 1)).because("preempt no such job"));
        d.push(Action::set_cpu(id, Millicores(500)).because("the one valid action"));
        Ok(d)
    }
}

export_policy!(Garbage);
