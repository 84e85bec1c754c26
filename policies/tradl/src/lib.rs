//! TRADL: two-tier accuracy targets. A job declares T1 (deliverable) and T2 (final) on its
//! main metric; the policy delivers the model the moment it reaches T1, keeps training it
//! towards T2, and stops it at T2 or its epoch cap.
//!
//! States: *urgent* (T1 not reached: the client is waiting), *delivered* (T1 reached: one
//! `deliver` action, never repeated, even across a hot swap), *done* (T2 or the epoch cap:
//! `stop`, its CPU released). Every Δ each node's CPU is split: the urgent class weighs
//! `w-urgent` per job against `w-delivered`, within a class by FlowCon's growth efficiency
//! (equal shares while nobody's is known), and a delivered job keeps at least 1/(2n) of the
//! node. Limits are fractional cores. Jobs without tiers count as delivered (our reading);
//! inference services are left alone.
//!
//! Reads: each job's tiers, epoch cap, progress records (main metric, either direction), CPU
//! use and node.
//!
//! Config (kebab-case keys, all optional):
//! - `interval-s` (30): Δ, seconds between rounds;
//! - `w-urgent` (4) and `w-delivered` (1): the classes' weights per job;
//! - `stop-when-done` (true): stop a job at T2 or its epoch cap;
//! - `min-limit-millicores` (10): no limit is set below this.
//!
//! Paper: W. Zheng, Y. Song, Z. Guo, Y. Cui, S. Gu, Y. Mao, L. Cheng, "Target-based Resource
//! Allocation for Deep Learning Applications in a Multi-tenancy System", IEEE HPEC 2019,
//! doi 10.1109/HPEC.2019.8916403.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use wasmsched_sdk::prelude::*;

/// TRADL's constants.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Δ: seconds between rounds.
    pub interval_s: f64,
    /// Weight of each urgent job.
    pub w_urgent: f64,
    /// Weight of each delivered job.
    pub w_delivered: f64,
    /// Stop a job at T2 or its epoch cap.
    pub stop_when_done: bool,
    /// The smallest limit set, in millicores.
    pub min_limit_millicores: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config { interval_s: 30.0, w_urgent: 4.0, w_delivered: 1.0, stop_when_done: true, min_limit_millicores: 10 }
    }
}

/// Where a job stands against its targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stage {
    /// T1 not reached yet.
    Urgent,
    /// T1 reached and delivered; training on towards T2.
    Delivered,
    /// T2 reached or the epoch cap hit.
    Done,
}

/// What survives a hot swap: above all, which jobs were delivered already.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct State {
    stages: BTreeMap<u32, Stage>,
    rounds: Rounds,
}

/// The TRADL policy.
pub struct Tradl {
    config: Config,
    state: State,
}

impl Tradl {
    /// A job's stage, for tests and logs.
    pub fn stage(&self, job: JobId) -> Option<Stage> {
        self.state.stages.get(&job.0).copied()
    }

    /// Move the job's stage on from its latest record, emitting `deliver` and `stop`.
    fn advance(&mut self, job: &Job, d: &mut Decision) -> Stage {
        let stage = self.state.stages.entry(job.id().0).or_insert(if job.tiers().is_some() {
            Stage::Urgent
        } else {
            Stage::Delivered
        });
        let latest = job.latest().map(|r| r.value()).filter(|v| v.is_finite());
        if let (Some(tiers), Some(v)) = (job.tiers(), latest) {
            if *stage == Stage::Urgent && stats::reaches(job.direction(), v, tiers.deliverable) {
                *stage = Stage::Delivered;
                d.push(Action::deliver(job.id()).because(format!("tradl: reached T1 = {}", tiers.deliverable)));
            }
            if *stage == Stage::Delivered && stats::reaches(job.direction(), v, tiers.final_) {
                *stage = Stage::Done;
            }
        }
        if *stage != Stage::Done && job.max_epochs().is_some_and(|cap| job.epoch() >= cap) {
            *stage = Stage::Done;
        }
        *stage
    }

    /// One node's round: stages moved on, CPU split among the jobs not done.
    fn round_on(&mut self, s: &Snapshot, node: Node, d: &mut Decision) {
        let now = s.time();
        let delta = Seconds(self.config.interval_s);
        let mut live: Vec<(Job, Stage)> = Vec::new();
        for job in s.jobs_on(node.id()).filter(|j| j.kind() == JobKind::Training) {
            match self.advance(&job, d) {
                Stage::Done if self.config.stop_when_done => {
                    d.push(Action::stop(job.id()).because("tradl: final target or epoch cap reached"));
                }
                stage => live.push((job, stage)),
            }
        }
        if live.is_empty() {
            return;
        }
        let n = live.len() as f64;
        let cpu = node.cpu().0 as f64;
        let class = |stage: Stage| if stage == Stage::Urgent { Stage::Urgent } else { Stage::Delivered };
        let weight_of = |stage: Stage| {
            if class(stage) == Stage::Urgent { self.config.w_urgent } else { self.config.w_delivered }
        };
        let growth: Vec<f64> = live.iter().map(|(j, _)| j.growth_efficiency(now, delta, node.cpu())).collect();
        let class_total: f64 = live.iter().map(|(_, st)| weight_of(*st)).sum();
        let mut weights = Vec::with_capacity(live.len());
        for (i, (_, stage)) in live.iter().enumerate() {
            let members: Vec<usize> = (0..live.len()).filter(|&k| class(live[k].1) == class(*stage)).collect();
            let class_share = weight_of(*stage) * members.len() as f64 / class_total.max(1e-12);
            let class_growth: f64 = members.iter().map(|&k| growth[k]).sum();
            let within = if class_growth > 0.0 { growth[i] / class_growth } else { 1.0 / members.len() as f64 };
            weights.push(class_share * within);
        }
        let floors: Vec<f64> = live
            .iter()
            .map(|(_, st)| {
                let min = self.config.min_limit_millicores as f64;
                if class(*st) == Stage::Delivered { (cpu / (2.0 * n)).max(min) } else { min }
            })
            .collect();
        let caps = vec![cpu; live.len()];
        let shares = stats::proportional_split(cpu, &weights, &floors, &caps);
        for ((job, stage), share) in live.iter().zip(shares) {
            let limit = Millicores((share.round() as u64).max(self.config.min_limit_millicores));
            if job.cpu_limit() != Some(limit) {
                let why = if *stage == Stage::Urgent { "urgent" } else { "delivered" };
                d.push(
                    Action::set_cpu(job.id(), limit)
                        .because(format!("tradl: {why}, {:.0} % of the node", 100.0 * share / cpu)),
                );
            }
        }
    }
}

impl Policy for Tradl {
    type Config = Config;

    fn new(config: Config) -> Result<Self, PolicyError> {
        let valid = config.interval_s.is_finite()
            && config.interval_s > 0.0
            && config.w_urgent.is_finite()
            && config.w_urgent > 0.0
            && config.w_delivered.is_finite()
            && config.w_delivered > 0.0;
        if !valid {
            return Err(PolicyError::InvalidConfig("interval-s, w-urgent and w-delivered must be positive".into()));
        }
        Ok(Tradl { config, state: State::default() })
    }

    fn decide(&mut self, s: &Snapshot) -> Result<Decision, PolicyError> {
        let mut d = Decision::new();
        let live: Vec<u32> = s.jobs().map(|j| j.id().0).collect();
        self.state.stages.retain(|h, _| live.binary_search(h).is_ok());
        // A job reaching T1 is delivered at once, between rounds too.
        if !self.state.rounds.due(s.time(), Seconds(self.config.interval_s), &mut d) {
            for job in s.jobs().filter(|j| j.kind() == JobKind::Training) {
                self.advance(&job, &mut d);
            }
            return Ok(d);
        }
        for node in s.nodes() {
            self.round_on(s, node, &mut d);
        }
        d.call_again_in(Seconds(self.config.interval_s));
        Ok(d)
    }

    keep_state!(state);
}

export_policy!(Tradl);

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_sdk::testing::{Harness, TestWorld, job};

    const NODE: Millicores = Millicores(8000);

    /// Tiers in `direction`: accuracy 0.8 / 0.9, or WER 40 / 30.
    fn tiered(name: &str, direction: Direction) -> wasmsched_sdk::testing::JobBuilder {
        let b = job(name, "m").metric("m", direction);
        match direction {
            Direction::HigherIsBetter => b.tiers(0.8, 0.9),
            Direction::LowerIsBetter => b.tiers(40.0, 30.0),
        }
    }

    /// A value before T1, between the tiers, and past T2.
    fn values(direction: Direction) -> [f64; 3] {
        match direction {
            Direction::HigherIsBetter => [0.5, 0.85, 0.95],
            Direction::LowerIsBetter => [60.0, 35.0, 25.0],
        }
    }

    fn world(jobs: &[wasmsched_sdk::testing::JobBuilder]) -> Harness<Tradl> {
        let mut w = TestWorld::new();
        w.node("n0", NODE, Bytes::gib(64));
        for j in jobs {
            w.add_job(j.clone());
        }
        Harness::new(Tradl::new(Config::default()).unwrap(), w)
    }

    fn delivers(d: &Decision) -> Vec<u32> {
        d.actions().iter().filter(|a| matches!(a.kind(), ActionKind::Deliver)).map(|a| a.job().0).collect()
    }

    fn stops(d: &Decision) -> Vec<u32> {
        d.actions().iter().filter(|a| matches!(a.kind(), ActionKind::Stop)).map(|a| a.job().0).collect()
    }

    #[test]
    fn a_job_is_delivered_exactly_once_when_it_first_reaches_t1() {
        for direction in [Direction::HigherIsBetter, Direction::LowerIsBetter] {
            let [before, between, _] = values(direction);
            let mut h = world(&[tiered("a", direction)]);
            h.world.report(JobId(0), 1, &[before]);
            assert!(delivers(&h.tick(Seconds(30.0)).unwrap()).is_empty(), "{direction:?}");
            assert_eq!(h.policy().stage(JobId(0)), Some(Stage::Urgent));
            let mut delivered = Vec::new();
            for epoch in 2..6 {
                h.world.report(JobId(0), epoch, &[between]);
                delivered.extend(delivers(&h.tick(Seconds(10.0)).unwrap()));
            }
            assert_eq!(delivered, [0], "{direction:?}: one deliver, between rounds too");
            assert_eq!(h.policy().stage(JobId(0)), Some(Stage::Delivered));
        }
    }

    #[test]
    fn a_job_stops_at_t2_or_at_its_epoch_cap() {
        for direction in [Direction::HigherIsBetter, Direction::LowerIsBetter] {
            let [before, _, past] = values(direction);
            let mut h = world(&[tiered("a", direction), tiered("b", direction).max_epochs(3)]);
            h.world.report(JobId(0), 1, &[past]);
            h.world.report(JobId(1), 3, &[before]);
            let d = h.tick(Seconds(30.0)).unwrap();
            assert_eq!(delivers(&d), [0], "{direction:?}: T2 implies T1, delivered first");
            assert_eq!(stops(&d), [0, 1], "{direction:?}: a at T2, b at its cap");
        }
    }

    #[test]
    fn urgent_jobs_weigh_four_times_and_delivered_ones_keep_their_floor() {
        let direction = Direction::HigherIsBetter;
        let [before, between, _] = values(direction);
        let jobs: Vec<_> = ["u1", "u2", "d1", "d2"].iter().map(|n| tiered(n, direction)).collect();
        let mut h = world(&jobs);
        for (j, v) in [before, before, between, between].into_iter().enumerate() {
            h.world.report(JobId(j as u32), 1, &[v]);
        }
        let d = h.tick(Seconds(30.0)).unwrap();
        let limits: Vec<Option<Option<Millicores>>> = (0..4).map(|j| d.cpu_limit_for(JobId(j))).collect();
        // Weights 4, 4, 1, 1 of 8 cores would give the delivered 800 m each; their floor is
        // 1/(2n) = 1000 m, and the urgent ones share the rest.
        let want = [3000, 3000, 1000, 1000].map(|m| Some(Some(Millicores(m))));
        assert_eq!(limits, want);
    }

    #[test]
    fn a_job_without_tiers_counts_as_delivered() {
        let mut h = world(&[job("plain", "m").metric("m", Direction::HigherIsBetter)]);
        h.world.report(JobId(0), 1, &[0.1]);
        let d = h.tick(Seconds(30.0)).unwrap();
        assert_eq!(h.policy().stage(JobId(0)), Some(Stage::Delivered));
        assert!(delivers(&d).is_empty(), "nothing to deliver");
        assert_eq!(d.cpu_limit_for(JobId(0)), Some(Some(NODE)));
    }

    #[test]
    fn a_delivered_job_is_not_delivered_again_after_a_swap() {
        let direction = Direction::LowerIsBetter;
        let [_, between, _] = values(direction);
        let mut h = world(&[tiered("a", direction)]);
        h.world.report(JobId(0), 1, &[between]);
        assert_eq!(delivers(&h.tick(Seconds(30.0)).unwrap()), [0]);
        let saved = h.runner().save_state();
        let mut next = Tradl::new(Config::default()).unwrap();
        next.restore_state(&saved).unwrap();
        let mut h2 = Harness::new(next, TestWorld::new());
        h2.world.node("n0", NODE, Bytes::gib(64));
        h2.world.add_job(tiered("a", direction));
        h2.world.report(JobId(0), 2, &[between]);
        assert!(delivers(&h2.tick(Seconds(30.0)).unwrap()).is_empty());
    }
}
