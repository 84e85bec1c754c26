//! FlowCon: elastic CPU limits on each node, by growth efficiency.
//!
//! Every Δ the policy measures how much each training job's normalised metric moved (the
//! windowed mean over the last Δ against the Δ before it) per second, per unit of the node's
//! CPU the job used: its growth efficiency G. A job below α once is *watching* (it keeps its
//! limit), twice in a row *completing*; G ≥ α makes it *growing* again. Growing jobs get
//! min(G/ΣG, 1) of the node, completing ones max(G/ΣG, 1/(n+1)) so near-done jobs still
//! finish. When every job of a node is completing, its limits are lifted and the interval
//! doubles (Δ, 2Δ, 4Δ …) until a job starts or ends. A job is never limited before it has 2Δ of
//! history. Limits are fractional cores.
//!
//! Units (our reading): P is measured per minute. Per second, a CIFAR-10 job sharing a node
//! with nine others moves its accuracy by about 0.002 per second early in training, so with
//! α = 0.03 every job would be "completing" from its first round and FlowCon would never act;
//! per minute, α = 0.03 separates the steep start of a learning curve from its plateau.
//!
//! Reads: each job's progress records (main metric, either direction), CPU use and node.
//! Inference services are left alone.
//!
//! Config (kebab-case keys, all optional):
//! - `interval-s` (30): Δ, seconds between rounds;
//! - `alpha` (0.03): the growth-efficiency threshold, in normalised metric per minute per
//!   node-fraction of CPU;
//! - `max-backoff` (16): the interval grows to at most this many Δ;
//! - `min-limit-millicores` (10): no limit is set below this.
//!
//! Paper: W. Zheng, M. Tynes, H. Gorelick, Y. Mao, L. Cheng, Y. Hou, "FlowCon: Elastic Flow
//! Configuration for Containerized Deep Learning Applications", ICPP 2019,
//! doi 10.1145/3337821.3337868.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use wasmsched_sdk::prelude::*;

/// FlowCon's constants.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Δ: seconds between rounds.
    pub interval_s: f64,
    /// α: growth efficiency (normalised metric per minute per node-fraction) below which a
    /// job is slow.
    pub alpha: f64,
    /// The interval backs off to at most this many Δ.
    pub max_backoff: u32,
    /// The smallest limit set, in millicores.
    pub min_limit_millicores: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config { interval_s: 30.0, alpha: 0.03, max_backoff: 16, min_limit_millicores: 10 }
    }
}

/// Where a job stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Flag {
    /// Growing fast enough for its CPU.
    Growing,
    /// Slow for one round: keeps its limit.
    Watching,
    /// Slow for two rounds or more: near done.
    Completing,
}

/// What survives a hot swap.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct State {
    /// Per job handle.
    flags: BTreeMap<u32, Flag>,
    /// When the last round ran.
    rounds: Rounds,
    /// The interval is `backoff` × Δ.
    backoff: u32,
    /// The jobs seen at the last round, to notice one starting or ending.
    jobs: Vec<u32>,
}

/// The FlowCon policy.
pub struct FlowCon {
    config: Config,
    state: State,
}

impl FlowCon {
    /// A job's flag, for tests and logs.
    pub fn flag(&self, job: JobId) -> Option<Flag> {
        self.state.flags.get(&job.0).copied()
    }

    /// The current interval between rounds.
    pub fn interval(&self) -> Seconds {
        Seconds(self.config.interval_s * f64::from(self.state.backoff.max(1)))
    }

    /// One node's round: flags updated, limits decided. True when every job there is
    /// completing (a job too young to judge is not).
    fn round_on(&mut self, s: &Snapshot, node: Node, d: &mut Decision) -> bool {
        let now = s.time();
        let delta = Seconds(self.config.interval_s);
        let jobs: Vec<Job> = s.jobs_on(node.id()).filter(|j| j.kind() == JobKind::Training).collect();
        if jobs.is_empty() {
            return false;
        }
        let n = jobs.len() as f64;
        // Jobs with 2Δ of history are judged; younger ones run unlimited.
        let mut judged: Vec<(Job, f64)> = Vec::new();
        for job in &jobs {
            if now.0 - job.first_seen().0 < 2.0 * delta.0 {
                if job.cpu_limit().is_some() {
                    d.push(Action::lift_cpu(job.id()).because("flowcon: new job, unlimited for its first 2Δ"));
                }
                continue;
            }
            let g = job.growth_efficiency(now, delta, node.cpu());
            let flag = self.state.flags.entry(job.id().0).or_insert(Flag::Growing);
            *flag = match (*flag, g < self.config.alpha) {
                (_, false) => Flag::Growing,
                (Flag::Growing, true) => Flag::Watching,
                (Flag::Watching | Flag::Completing, true) => Flag::Completing,
            };
            judged.push((*job, g));
        }
        if judged.is_empty() {
            return false;
        }
        let flag = |job: &Job| self.state.flags[&job.id().0];
        if judged.len() == jobs.len() && judged.iter().all(|(job, _)| flag(job) == Flag::Completing) {
            for (job, _) in &judged {
                if job.cpu_limit().is_some() {
                    d.push(Action::lift_cpu(job.id()).because("flowcon: every job on the node is completing"));
                }
            }
            return true;
        }
        let total: f64 = judged.iter().map(|(_, g)| g).sum();
        for (job, g) in &judged {
            let share = if total > 0.0 { g / total } else { 1.0 / judged.len() as f64 };
            let (fraction, why) = match flag(job) {
                Flag::Watching => continue,
                Flag::Growing => (share.min(1.0), "growing"),
                Flag::Completing => (share.max(1.0 / (n + 1.0)), "completing"),
            };
            let limit =
                Millicores(((fraction * node.cpu().0 as f64).round() as u64).max(self.config.min_limit_millicores));
            if job.cpu_limit() != Some(limit) {
                d.push(
                    Action::set_cpu(job.id(), limit)
                        .because(format!("flowcon: {why}, G = {g:.4}, {:.0} % of the node", 100.0 * fraction)),
                );
            }
        }
        false
    }
}

impl Policy for FlowCon {
    type Config = Config;

    fn new(config: Config) -> Result<Self, PolicyError> {
        let valid =
            config.interval_s.is_finite() && config.interval_s > 0.0 && config.alpha.is_finite() && config.alpha >= 0.0;
        if !valid || config.max_backoff == 0 {
            return Err(PolicyError::InvalidConfig(
                "interval-s must be positive, alpha zero or more, max-backoff at least 1".into(),
            ));
        }
        Ok(FlowCon { config, state: State { backoff: 1, ..State::default() } })
    }

    fn decide(&mut self, s: &Snapshot) -> Result<Decision, PolicyError> {
        let now = s.time();
        let mut d = Decision::new();
        let jobs: Vec<u32> = s.jobs().map(|j| j.id().0).collect();
        let changed = jobs != self.state.jobs;
        if changed {
            // A job started or ended: back to Δ, and forget the jobs that left.
            self.state.backoff = 1;
            self.state.flags.retain(|h, _| jobs.binary_search(h).is_ok());
            self.state.jobs = jobs;
        }
        if changed {
            self.state.rounds.start(now);
        } else if !self.state.rounds.due(now, self.interval(), &mut d) {
            return Ok(d);
        }
        let mut busy_nodes = 0;
        let mut all_completing = 0;
        for node in s.nodes() {
            if s.jobs_on(node.id()).next().is_none() {
                continue;
            }
            busy_nodes += 1;
            all_completing += usize::from(self.round_on(s, node, &mut d));
        }
        if busy_nodes > 0 && all_completing == busy_nodes {
            self.state.backoff = (self.state.backoff * 2).min(self.config.max_backoff);
            info!("flowcon: every job is completing; next round in {}", self.interval());
        } else {
            self.state.backoff = 1;
        }
        d.call_again_in(self.interval());
        Ok(d)
    }

    keep_state!(state);
}

export_policy!(FlowCon);

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_sdk::testing::{Harness, TestWorld, job};

    const NODE: Millicores = Millicores(8000);

    /// The reported value after normalised progress `x` from 0.2: accuracy itself when
    /// higher is better; a loss falling from 2.0 (so normalised by 2.0) when lower is better.
    fn value(direction: Direction, x: f64) -> f64 {
        match direction {
            Direction::HigherIsBetter => 0.2 + x,
            Direction::LowerIsBetter => 2.0 * (1.0 - x),
        }
    }

    struct Rig {
        h: Harness<FlowCon>,
        direction: Direction,
        round: u32,
        progress: Vec<f64>,
    }

    impl Rig {
        fn new(direction: Direction, jobs: &[&str]) -> Rig {
            let mut world = TestWorld::new();
            world.node("n0", NODE, Bytes::gib(64));
            for name in jobs {
                world.add_job(job(name, "cifar10").metric("m", direction));
            }
            let mut h = Harness::new(FlowCon::new(Config::default()).unwrap(), world);
            h.tick(Seconds(0.0)).unwrap(); // t = 0: the jobs are seen
            Rig { h, direction, round: 0, progress: vec![0.0; jobs.len()] }
        }

        /// 30 s pass; each job reports, its progress moved by its step, after using 2 cores.
        fn tick(&mut self, steps: &[f64]) -> Decision {
            self.round += 1;
            self.h.world.advance(Seconds(30.0));
            for (i, step) in steps.iter().enumerate() {
                let job = JobId(i as u32);
                self.h.world.set_cpu_use(job, Millicores(2000));
                self.progress[i] += step;
                let v = value(self.direction, self.progress[i]);
                self.h.world.report(job, self.round, &[v]);
            }
            self.h.tick(Seconds(0.0)).unwrap()
        }
    }

    fn limit(d: &Decision, job: u32) -> Option<Option<Millicores>> {
        d.cpu_limit_for(JobId(job))
    }

    const BOTH: [Direction; 2] = [Direction::HigherIsBetter, Direction::LowerIsBetter];

    #[test]
    fn no_job_is_cut_before_it_has_two_intervals_of_history() {
        for direction in BOTH {
            let mut rig = Rig::new(direction, &["fast", "flat"]);
            rig.h.world.set_cpu_limit(JobId(1), Some(Millicores(500)));
            let d = rig.tick(&[0.3, 0.0]);
            assert_eq!(limit(&d, 0), None, "{direction:?}: nothing set on a young job");
            assert_eq!(limit(&d, 1), Some(None), "{direction:?}: a young job's limit is lifted");
        }
    }

    #[test]
    fn a_slow_job_watches_after_one_round_and_completes_after_two_with_the_floor() {
        for direction in BOTH {
            let mut rig = Rig::new(direction, &["fast", "flat"]);
            rig.tick(&[0.3, 0.0]); // t = 30: both young
            let d = rig.tick(&[0.3, 0.0]); // t = 60: judged for the first time
            assert_eq!(rig.h.policy().flag(JobId(1)), Some(Flag::Watching), "{direction:?}");
            assert_eq!(limit(&d, 1), None, "{direction:?}: a watching job keeps its limit");
            assert_eq!(limit(&d, 0), Some(Some(NODE)), "{direction:?}: the only grower may use the node");
            let d = rig.tick(&[0.3, 0.0]); // t = 90
            assert_eq!(rig.h.policy().flag(JobId(1)), Some(Flag::Completing), "{direction:?}");
            assert_eq!(rig.h.policy().flag(JobId(0)), Some(Flag::Growing), "{direction:?}");
            // G = 0, so its share is the floor 1/(n+1) of the node, in fractional cores.
            assert_eq!(limit(&d, 1), Some(Some(Millicores(2667))), "{direction:?}");
        }
    }

    #[test]
    fn growing_again_clears_the_flags() {
        let mut rig = Rig::new(Direction::HigherIsBetter, &["a", "b"]);
        rig.tick(&[0.3, 0.0]);
        rig.tick(&[0.3, 0.0]);
        assert_eq!(rig.h.policy().flag(JobId(1)), Some(Flag::Watching));
        rig.tick(&[0.3, 0.3]);
        assert_eq!(rig.h.policy().flag(JobId(1)), Some(Flag::Growing));
    }

    #[test]
    fn growers_split_the_node_by_growth_efficiency() {
        let mut rig = Rig::new(Direction::HigherIsBetter, &["a", "b"]);
        rig.tick(&[0.3, 0.9]);
        let d = rig.tick(&[0.3, 0.9]);
        // Same CPU use, so G is in proportion to progress: a gets 1/4 of the node, b 3/4.
        assert_eq!(limit(&d, 0), Some(Some(Millicores(2000))));
        assert_eq!(limit(&d, 1), Some(Some(Millicores(6000))));
    }

    #[test]
    fn when_all_complete_limits_are_lifted_and_the_interval_backs_off_until_a_job_arrives() {
        for direction in BOTH {
            let mut rig = Rig::new(direction, &["a", "b"]);
            rig.tick(&[0.3, 0.0]);
            rig.tick(&[0.3, 0.0]);
            let d = rig.tick(&[0.3, 0.0]);
            assert!(matches!(limit(&d, 1), Some(Some(_))), "{direction:?}: b limited while a grows");
            rig.tick(&[0.0, 0.0]); // t = 120: a watching
            let d = rig.tick(&[0.0, 0.0]); // t = 150: a completing too
            assert_eq!(limit(&d, 1), Some(None), "{direction:?}: lifted");
            assert_eq!(rig.h.policy().interval(), Seconds(60.0), "{direction:?}");
            assert_eq!(d.next_call(), Some(Seconds(60.0)));
            let d = rig.tick(&[0.0, 0.0]); // t = 180: not due until 210
            assert!(d.is_empty() && d.next_call() == Some(Seconds(30.0)), "{direction:?}");
            rig.tick(&[0.0, 0.0]); // t = 210: still all completing
            assert_eq!(rig.h.policy().interval(), Seconds(120.0), "{direction:?}: 4Δ");
            rig.h.world.add_job(job("c", "ncf").metric("m", direction));
            let d = rig.tick(&[0.0, 0.0]); // t = 240: a job started: a round now, back to Δ
            assert_eq!(rig.h.policy().interval(), Seconds(30.0), "{direction:?}");
            assert_eq!(d.next_call(), Some(Seconds(30.0)));
        }
    }

    #[test]
    fn state_survives_a_swap() {
        let mut rig = Rig::new(Direction::HigherIsBetter, &["a", "b"]);
        rig.tick(&[0.3, 0.0]);
        rig.tick(&[0.3, 0.0]);
        let saved = rig.h.runner().save_state();
        let mut next = FlowCon::new(Config::default()).unwrap();
        next.restore_state(&saved).unwrap();
        assert_eq!(next.flag(JobId(1)), Some(Flag::Watching));
    }

    #[test]
    fn a_bad_config_is_refused() {
        assert!(Harness::<FlowCon>::from_config(r#"{"interval-s": 0}"#, TestWorld::new()).is_err());
        assert!(Harness::<FlowCon>::from_config(r#"{"beta": 1}"#, TestWorld::new()).is_err());
        assert!(Harness::<FlowCon>::from_config(r#"{"alpha": 0.05}"#, TestWorld::new()).is_ok());
    }
}
