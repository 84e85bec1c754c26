//! SpeCon: speculative migration of slow-growing jobs across nodes.
//!
//! Every check (Δ) the policy takes each training job's growth g: how fast its normalised main
//! metric moved between its last two reports, in percent per minute (optionally per unit of
//! the node's CPU it used). A job with g < α on k checks in a row is *slow-growing*, unless it
//! will finish within the restart cost anyway. Every `act-every` checks, each slow-growing job
//! (slowest first) moves to the node with the most free CPU (fewest jobs on a tie) when that
//! node would still be less loaded than the source after the move; otherwise the policy logs
//! "no destination" and leaves it. A job migrates at most `max-migrations` times, with a
//! cooldown between moves. Moving slow growers off a crowded node releases its CPU to the
//! fast growers left behind. SpeCon sets no CPU limits.
//!
//! Reads: each job's progress records, epoch cap, CPU use and node; each node's CPU.
//!
//! Config (kebab-case keys, all optional):
//! - `check-interval-s` (10): Δ, seconds between checks (at most one per host call);
//! - `act-every` (3): the master acts every this many checks;
//! - `alpha` (0.1): growth threshold, percent of the normalised metric per minute;
//! - `slow-checks` (2): k, consecutive slow checks before a job is slow-growing;
//! - `per-cpu` (false): divide g by the job's CPU share of its node, as FlowCon does;
//! - `restart-cost-s` (20): what a migration costs; a job finishing sooner is never moved;
//! - `max-migrations` (2): per job;
//! - `cooldown-s` (300): time after a job's migration before it may move again.
//!
//! Load, for the destination rule, is running jobs per core: under CFS every busy node uses
//! all its CPU, so CPU use alone cannot tell a crowded node from a quiet one.
//!
//! Paper: Y. Mao, Y. Fu, W. Zheng, L. Cheng, Q. Liu, D. Tao, "SpeCon: Speculative Container
//! Scheduling for Deep Learning Applications in a Kubernetes Cluster", IEEE Systems Journal
//! 2021, arXiv 2010.11307.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use wasmsched_sdk::prelude::*;

/// SpeCon's constants.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Δ: seconds between checks.
    pub check_interval_s: f64,
    /// The master acts every this many checks.
    pub act_every: u32,
    /// α: growth below which a check is slow, in percent of the normalised metric per minute.
    pub alpha: f64,
    /// k: consecutive slow checks that make a job slow-growing.
    pub slow_checks: u32,
    /// Divide growth by the job's CPU share of its node.
    pub per_cpu: bool,
    /// Time a migration costs, seconds.
    pub restart_cost_s: f64,
    /// Migrations per job at most.
    pub max_migrations: u32,
    /// Seconds after a migration before the job may move again.
    pub cooldown_s: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            check_interval_s: 10.0,
            act_every: 3,
            alpha: 0.1,
            slow_checks: 2,
            per_cpu: false,
            restart_cost_s: 20.0,
            max_migrations: 2,
            cooldown_s: 300.0,
        }
    }
}

/// What the policy remembers of a job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Track {
    /// Slow checks in a row.
    slow: u32,
    /// Migrations so far.
    migrations: u32,
    /// When it last migrated.
    last_move_s: Option<f64>,
}

/// What survives a hot swap.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct State {
    jobs: BTreeMap<u32, Track>,
    checks_clock: Rounds,
    checks: u32,
}

/// The SpeCon policy.
pub struct SpeCon {
    config: Config,
    state: State,
}

/// A node's load as the master sees it while planning moves.
#[derive(Clone, Copy, Debug)]
struct Load {
    cores: f64,
    jobs: usize,
    used_cores: f64,
}

impl Load {
    fn per_core(&self, jobs: usize) -> f64 {
        jobs as f64 / self.cores.max(1e-9)
    }

    fn free(&self) -> f64 {
        self.cores - self.used_cores
    }
}

impl SpeCon {
    /// How many slow checks in a row `job` has had.
    pub fn slow_checks(&self, job: JobId) -> u32 {
        self.state.jobs.get(&job.0).map_or(0, |t| t.slow)
    }

    /// Growth in percent of the normalised metric per minute, between its last two reports.
    fn growth(&self, job: &Job, node: Option<Node>) -> Option<f64> {
        let mut last_two = job.normalised().collect::<Vec<_>>().into_iter().rev().take(2);
        let (t1, now) = last_two.next()?;
        let (t0, before) = last_two.next()?;
        let per_minute = 100.0 * 60.0 * stats::growth_rate(before, now, t1 - t0);
        match (self.config.per_cpu, node) {
            (true, Some(node)) => Some(stats::growth_efficiency(per_minute, job.cpu_use().fraction_of(node.cpu()))),
            _ => Some(per_minute),
        }
    }

    /// Whether the job will end within the restart cost: its epochs left at its mean epoch
    /// time so far. Unknown (no cap, no epoch yet) is not ending.
    fn ends_soon(&self, job: &Job) -> bool {
        let (Some(cap), Some(first), Some(last)) = (job.max_epochs(), job.history().next(), job.latest()) else {
            return false;
        };
        if last.epoch <= first.epoch {
            return false;
        }
        let per_epoch = (last.time.0 - first.time.0) / f64::from(last.epoch - first.epoch);
        f64::from(cap.saturating_sub(last.epoch)) * per_epoch <= self.config.restart_cost_s
    }

    /// One check: count slow growers.
    fn check(&mut self, s: &Snapshot) {
        for job in s.jobs().filter(|j| j.kind() == JobKind::Training) {
            let Some(g) = self.growth(&job, s.node(job.node())) else { continue };
            let slow = g < self.config.alpha && !self.ends_soon(&job);
            let track = self.state.jobs.entry(job.id().0).or_default();
            track.slow = if slow { track.slow + 1 } else { 0 };
        }
    }

    /// The master's round: move slow growers where they would load a node less.
    fn act(&mut self, s: &Snapshot, d: &mut Decision) {
        let now = s.time().0;
        let mut loads: Vec<Load> = s
            .nodes()
            .map(|n| Load { cores: n.cpu().cores(), jobs: s.jobs_on(n.id()).count(), used_cores: 0.0 })
            .collect();
        for job in s.jobs() {
            if let Some(l) = loads.get_mut(job.node().0 as usize) {
                l.used_cores += job.cpu_use().cores();
            }
        }
        let mut slow: Vec<(Job, f64)> = s
            .jobs()
            .filter(|j| self.state.jobs.get(&j.id().0).is_some_and(|t| t.slow >= self.config.slow_checks))
            .filter_map(|j| self.growth(&j, s.node(j.node())).map(|g| (j, g)))
            .collect();
        slow.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.id().cmp(&b.0.id())));
        for (job, g) in slow {
            let track = self.state.jobs.get(&job.id().0).cloned().unwrap_or_default();
            if track.migrations >= self.config.max_migrations {
                continue;
            }
            if track.last_move_s.is_some_and(|t| now - t < self.config.cooldown_s) {
                continue;
            }
            let from = job.node().0 as usize;
            if from >= loads.len() {
                continue;
            }
            let destination = (0..loads.len())
                .filter(|&n| n != from)
                .max_by(|&a, &b| {
                    let (la, lb) = (loads[a], loads[b]);
                    la.free().total_cmp(&lb.free()).then(lb.jobs.cmp(&la.jobs)).then(b.cmp(&a))
                })
                .filter(|&to| loads[to].per_core(loads[to].jobs + 1) < loads[from].per_core(loads[from].jobs - 1));
            let Some(to) = destination else {
                info!("specon: no destination for {} (growth {g:.3} %/min)", job.name());
                continue;
            };
            let moved = job.cpu_use().cores();
            loads[from].jobs -= 1;
            loads[from].used_cores -= moved;
            loads[to].jobs += 1;
            loads[to].used_cores += moved;
            let node = NodeId(to as u32);
            d.push(
                Action::migrate(job.id(), node)
                    .because(format!("specon: slow-growing ({g:.3} %/min), to a less loaded node")),
            );
            let track = self.state.jobs.entry(job.id().0).or_default();
            track.migrations += 1;
            track.last_move_s = Some(now);
            track.slow = 0;
        }
    }
}

impl Policy for SpeCon {
    type Config = Config;

    fn new(config: Config) -> Result<Self, PolicyError> {
        let positive = |x: f64| x.is_finite() && x > 0.0;
        if !positive(config.check_interval_s) || config.act_every == 0 || config.slow_checks == 0 {
            return Err(PolicyError::InvalidConfig(
                "check-interval-s must be positive, act-every and slow-checks at least 1".into(),
            ));
        }
        Ok(SpeCon { config, state: State::default() })
    }

    fn decide(&mut self, s: &Snapshot) -> Result<Decision, PolicyError> {
        let mut d = Decision::new();
        let live: Vec<u32> = s.jobs().map(|j| j.id().0).collect();
        self.state.jobs.retain(|h, _| live.binary_search(h).is_ok());
        if !self.state.checks_clock.due(s.time(), Seconds(self.config.check_interval_s), &mut d) {
            return Ok(d);
        }
        self.check(s);
        self.state.checks += 1;
        if self.state.checks.is_multiple_of(self.config.act_every) {
            self.act(s, &mut d);
        }
        d.call_again_in(Seconds(self.config.check_interval_s));
        Ok(d)
    }

    keep_state!(state);
}

export_policy!(SpeCon);

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_sdk::testing::{Harness, TestWorld, job};

    const BOTH: [Direction; 2] = [Direction::HigherIsBetter, Direction::LowerIsBetter];

    struct Rig {
        h: Harness<SpeCon>,
        direction: Direction,
        epoch: u32,
        /// Per job: normalised progress so far, and its step per report (0 = flat).
        progress: BTreeMap<u32, (f64, f64)>,
    }

    impl Rig {
        /// Nodes of 8 cores; `placement[i]` is job i's node, `steps[i]` its progress per report.
        fn new(direction: Direction, nodes: usize, placement: &[u32], steps: &[f64], config: &str) -> Rig {
            let mut world = TestWorld::new();
            for n in 0..nodes {
                world.node(&format!("n{n}"), Millicores(8000), Bytes::gib(64));
            }
            let h = Harness::from_config(config, world).unwrap();
            let mut rig = Rig { h, direction, epoch: 0, progress: BTreeMap::new() };
            for (&node, &step) in placement.iter().zip(steps) {
                rig.add(node, step, None);
            }
            rig
        }

        fn add(&mut self, node: u32, step: f64, max_epochs: Option<u32>) -> JobId {
            let mut spec = job("j", "cifar10").metric("m", self.direction);
            if let Some(cap) = max_epochs {
                spec = spec.max_epochs(cap);
            }
            let id = self.h.world.add_job_on(spec, NodeId(node));
            self.h.world.set_cpu_use(id, Millicores(1000));
            self.progress.insert(id.0, (0.0, step));
            id
        }

        /// 10 s pass; every job reports an epoch.
        fn tick(&mut self) -> Decision {
            self.epoch += 1;
            self.h.world.advance(Seconds(10.0));
            for (&id, (x, step)) in &mut self.progress {
                *x += *step;
                let v = match self.direction {
                    Direction::HigherIsBetter => 0.2 + *x,
                    Direction::LowerIsBetter => 2.0 * (1.0 - *x),
                };
                self.h.world.report(JobId(id), self.epoch, &[v]);
            }
            let d = self.h.tick(Seconds(0.0)).unwrap();
            for a in d.actions() {
                if let ActionKind::Migrate(_) = a.kind() {
                    assert!(a.reason().starts_with("specon: slow-growing"));
                }
            }
            d
        }
    }

    fn moves(d: &Decision) -> Vec<(u32, u32)> {
        d.actions()
            .iter()
            .filter_map(|a| match a.kind() {
                ActionKind::Migrate(to) => Some((a.job().0, *to)),
                _ => None,
            })
            .collect()
    }

    const FAST: f64 = 0.02; // 12 % per minute
    const FLAT: f64 = 0.0;

    #[test]
    fn a_job_is_slow_growing_after_k_slow_checks_in_a_row() {
        for direction in BOTH {
            let mut rig = Rig::new(direction, 1, &[0, 0], &[FLAT, FAST], "{}");
            rig.tick(); // one report each: no growth yet
            rig.tick();
            assert_eq!((rig.h.policy().slow_checks(JobId(0)), rig.h.policy().slow_checks(JobId(1))), (1, 0));
            rig.tick();
            assert_eq!(rig.h.policy().slow_checks(JobId(0)), 2, "{direction:?}");
            rig.progress.get_mut(&0).unwrap().1 = FAST;
            rig.tick();
            assert_eq!(rig.h.policy().slow_checks(JobId(0)), 0, "{direction:?}: growing again resets the count");
        }
    }

    #[test]
    fn a_slow_grower_moves_to_the_node_with_the_most_free_cpu() {
        for direction in BOTH {
            // n0 crowded (a slow, b and c fast), n1 one job using a core, n2 empty.
            let mut rig = Rig::new(direction, 3, &[0, 0, 0, 1], &[FLAT, FAST, FAST, FAST], "{}");
            assert!(moves(&rig.tick()).is_empty());
            assert!(moves(&rig.tick()).is_empty());
            // Third check: the master acts, and a has been slow twice.
            assert_eq!(moves(&rig.tick()), [(0, 2)], "{direction:?}");
        }
    }

    #[test]
    fn no_destination_when_no_node_would_be_less_loaded() {
        for direction in BOTH {
            let mut rig = Rig::new(direction, 2, &[0, 0, 1, 1], &[FLAT, FAST, FAST, FAST], "{}");
            for _ in 0..6 {
                assert!(moves(&rig.tick()).is_empty(), "{direction:?}: 2 jobs each, a move would only swap the load");
            }
        }
    }

    #[test]
    fn a_job_migrates_at_most_twice_and_never_within_the_cooldown() {
        let config = r#"{"cooldown-s": 60}"#;
        let mut rig = Rig::new(Direction::HigherIsBetter, 3, &[0, 0, 0], &[FLAT, FAST, FAST], config);
        rig.tick();
        rig.tick();
        assert_eq!(moves(&rig.tick()), [(0, 1)]);
        // Crowd a's new node so that a move would help again.
        for _ in 0..3 {
            rig.add(1, FAST, None);
        }
        let mut at = Vec::new();
        for t in 4..=12 {
            if !moves(&rig.tick()).is_empty() {
                at.push(t);
            }
        }
        // Acts at checks 6, 9, 12; 6 is within 60 s of the move at 3, so the second is at 9.
        assert_eq!(at, [9]);
        for _ in 0..3 {
            rig.add(2, FAST, None);
        }
        for _ in 0..12 {
            assert!(moves(&rig.tick()).is_empty(), "two migrations at most");
        }
    }

    #[test]
    fn a_job_that_ends_within_the_restart_cost_is_never_flagged() {
        let mut rig = Rig::new(Direction::LowerIsBetter, 3, &[0, 0], &[FAST, FAST], "{}");
        // 10 s epochs, capped at 4: after epoch 2 it has 20 s left, the restart cost.
        let ending = rig.add(0, FLAT, Some(4));
        for _ in 0..6 {
            assert!(moves(&rig.tick()).iter().all(|(j, _)| *j != ending.0));
        }
        assert_eq!(rig.h.policy().slow_checks(ending), 0);
    }

    #[test]
    fn a_bad_config_is_refused() {
        assert!(SpeCon::new(Config { act_every: 0, ..Config::default() }).is_err());
        assert!(Harness::<SpeCon>::from_config(r#"{"alpha": 0.2, "per-cpu": true}"#, TestWorld::new()).is_ok());
        assert!(Harness::<SpeCon>::from_config(r#"{"k": 2}"#, TestWorld::new()).is_err());
    }
}
