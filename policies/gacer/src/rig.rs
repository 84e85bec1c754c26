//! The tests' host: a [`TestWorld`] plus the side of GPU sharing it does not play (shares in
//! force, GPU use per job), and readers of a decision's shares, preemptions and reasons.

use std::collections::BTreeMap;

use wasmsched_sdk::Runner;
use wasmsched_sdk::prelude::*;
use wasmsched_sdk::testing::TestWorld;

use crate::{Gacer, Profile, State};

/// A policy and its world, with the host's side of GPU sharing that [`TestWorld`] does not
/// play: each job's share in force (taken from the decisions, dropped on preemption) and
/// its GPU use, written into the snapshot's columns.
pub struct Rig {
    /// The world; change it between ticks.
    pub world: TestWorld,
    /// The policy, behind the SDK's runner.
    pub runner: Runner<Gacer>,
    /// Per job: its share in force (0: none) and the percent of its GPU it used.
    pub gpu: BTreeMap<JobId, (u8, f32)>,
}

impl Rig {
    /// `config`, with these models (name, demand in percent, memory in GiB) profiled.
    pub fn new(config: &str, profiles: &[(&str, f64, u64)], world: TestWorld) -> Rig {
        let mut state = State::default();
        for &(model, demand_percent, memory) in profiles {
            let profile = Profile { demand_percent, memory_bytes: Bytes::gib(memory).0, samples: 3 };
            state.profiles.insert(model, profile);
        }
        let runner = Runner::init(config, Some(&state::encode(&state))).unwrap();
        Rig { world, runner, gpu: BTreeMap::new() }
    }

    /// The job used this percent of its GPU over the coming interval.
    pub fn used(&mut self, job: JobId, percent: f32) {
        self.gpu.entry(job).or_default().1 = percent;
    }

    /// The share in force.
    pub fn share(&self, job: JobId) -> Option<u8> {
        self.gpu.get(&job).map(|g| g.0).filter(|p| *p > 0)
    }

    /// A tick whose decision must pass the host's checks, put into force.
    pub fn tick(&mut self, by: f64) -> Decision {
        self.world.advance(Seconds(by));
        let mut raw = self.world.snapshot();
        for (i, handle) in raw.jobs.handle.iter().enumerate() {
            if let Some(&(share, used)) = self.gpu.get(&JobId(*handle)) {
                raw.jobs.gpu_share_percent[i] = share;
                raw.jobs.gpu_used_percent[i] = used;
            }
        }
        let d = self.runner.decide(raw).unwrap();
        assert_eq!(sched::check(&self.runner.view(), &d), Ok(()));
        self.world.apply(&d);
        for a in d.actions() {
            match a.kind() {
                ActionKind::SetGpuShare(s) => self.gpu.entry(a.job()).or_default().0 = s.percent,
                ActionKind::Preempt => drop(self.gpu.remove(&a.job())),
                _ => {}
            }
        }
        d
    }

    /// The policy, to inspect its state.
    pub fn policy(&self) -> &Gacer {
        self.runner.policy()
    }

    /// Whether `job` waited in the queue on the last tick.
    pub fn queued(&self, job: JobId) -> bool {
        self.runner.view().job(job).is_some_and(|j| j.is_queued())
    }
}

/// The shares a decision sets, in order.
pub fn shares(d: &Decision) -> Vec<(JobId, u8)> {
    d.actions()
        .iter()
        .filter_map(|a| match a.kind() {
            ActionKind::SetGpuShare(s) => Some((a.job(), s.percent)),
            _ => None,
        })
        .collect()
}

/// The jobs a decision preempts, in order.
pub fn preempted(d: &Decision) -> Vec<JobId> {
    d.actions().iter().filter(|a| matches!(a.kind(), ActionKind::Preempt)).map(Action::job).collect()
}

/// Whether the decision places `job` on a GPU others hold.
pub fn shared(d: &Decision, job: JobId) -> bool {
    d.actions().iter().any(|a| a.job() == job && matches!(a.kind(), ActionKind::Place(p) if p.share))
}

/// Every reason a decision gives for `job`, joined.
pub fn reason_of(d: &Decision, job: JobId) -> String {
    d.actions().iter().filter(|a| a.job() == job).map(|a| a.reason().to_owned()).collect::<Vec<_>>().join("; ")
}
