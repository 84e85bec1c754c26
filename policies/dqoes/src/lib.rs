//! DQoES: differentiated QoE targets. Each job declares a target T: seconds per epoch for a
//! training job, milliseconds per request for an inference service. Its achieved QoE Q is the
//! mean over its last few reports (epoch durations, or reported latencies).
//!
//! Every Δ, on each node: a job with Q < (1 − β)·T is *over-satisfied* and gives up CPU, a step
//! proportional to its slack (T − Q)/T, never going below a floor; a job with Q > T is
//! *unsatisfied* and receives the freed CPU, and whatever part of the node nobody holds, in
//! proportion to its normalised gap (Q − T)/T; a
//! job in between is *satisfied* and left alone. Nothing is cut while no job is unsatisfied
//! (our reading: the cut exists to feed them). When every job with a target is unsatisfied,
//! the node is split among them in proportion to their gaps. A job's current allocation is its
//! CPU limit, or its CPU use while it has none. Jobs without a target are left unlimited
//! (our reading).
//!
//! Reads: each job's QoE target, kind, progress records (times for training, latency values
//! for inference), CPU limit and use, and node.
//!
//! Config (kebab-case keys, all optional):
//! - `interval-s` (10): Δ, seconds between rounds;
//! - `beta` (0.05): the tolerance β;
//! - `floor-cores` (0.1): no job is cut below this;
//! - `gain` (0.5): an over-satisfied job gives up `gain × slack` of its allocation (our
//!   choice: the paper gives the step's direction, not its size);
//! - `window` (3): reports in the moving mean Q.
//!
//! Paper: Y. Mao, W. Yan, Y. Song, Y. Zeng, M. Chen, L. Cheng, Q. Liu, "Differentiate Quality
//! of Experience Scheduling for Deep Learning Applications with Docker Containers in the
//! Cloud", arXiv 2010.12728.

use serde::Deserialize;
use wasmsched_sdk::prelude::*;

/// DQoES's constants.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Δ: seconds between rounds.
    pub interval_s: f64,
    /// β: the tolerance below the target that still counts as satisfied.
    pub beta: f64,
    /// No job is cut below this many cores.
    pub floor_cores: f64,
    /// An over-satisfied job gives up `gain × slack` of its allocation.
    pub gain: f64,
    /// Reports in the moving mean.
    pub window: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config { interval_s: 10.0, beta: 0.05, floor_cores: 0.1, gain: 0.5, window: 3 }
    }
}

/// How a job stands against its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Better than (1 − β)·T: it can give CPU away.
    OverSatisfied,
    /// Within the tolerance.
    Satisfied,
    /// Worse than T: it needs CPU.
    Unsatisfied,
}

/// The DQoES policy.
pub struct Dqoes {
    config: Config,
    rounds: Rounds,
}

impl Dqoes {
    /// The job's achieved QoE: mean seconds per epoch over its last `window` epochs, or the
    /// time its current epoch has run if that is longer (training); the mean reported latency
    /// over its last `window` reports (inference). None before there is one.
    pub fn qoe(&self, job: &Job, now: Seconds) -> Option<f64> {
        let recent: Vec<&ProgressRecord> = job.history().rev().take(self.config.window + 1).collect();
        let samples: Vec<f64> = match job.kind() {
            JobKind::Training => recent
                .windows(2)
                .filter(|w| w[0].epoch > w[1].epoch)
                .map(|w| (w[0].time.0 - w[1].time.0) / f64::from(w[0].epoch - w[1].epoch))
                .collect(),
            JobKind::Inference => recent.iter().take(self.config.window).map(|r| r.value()).collect(),
        };
        let samples: Vec<f64> = samples.into_iter().filter(|x| x.is_finite()).collect();
        let mean = (!samples.is_empty()).then(|| samples.iter().sum::<f64>() / samples.len() as f64)?;
        // An epoch still running for longer than that is already slower than the mean.
        let running = match (job.kind(), recent.first()) {
            (JobKind::Training, Some(last)) => now.0 - last.time.0,
            _ => 0.0,
        };
        Some(mean.max(running))
    }

    /// The class of a job with QoE `q` and target `target`.
    pub fn classify(&self, q: f64, target: f64) -> Class {
        if q < (1.0 - self.config.beta) * target {
            Class::OverSatisfied
        } else if q <= target {
            Class::Satisfied
        } else {
            Class::Unsatisfied
        }
    }

    fn round_on(&self, s: &Snapshot, node: Node, d: &mut Decision) {
        let cpu = node.cpu().cores();
        let floor = self.config.floor_cores.min(cpu);
        // (job, class, Q, T, current allocation in cores)
        let mut rows = Vec::new();
        for job in s.jobs_on(node.id()) {
            let Some(target) = job.qoe_target().filter(|t| *t > 0.0) else { continue };
            let Some(q) = self.qoe(&job, s.time()) else { continue };
            // What it holds: its limit, or less if it uses less (a job cannot use more cores
            // than its work has threads), or its use while unlimited.
            let used = job.cpu_use().cores();
            let current = job.cpu_limit().map_or(used, |l| l.cores().min(used.max(floor))).max(floor);
            rows.push((job, self.classify(q, target), q, target, current));
        }
        if rows.is_empty() {
            return;
        }
        let gap = |q: f64, t: f64| (q - t) / t;
        let set = |d: &mut Decision, job: &Job, cores: f64, why: String| {
            let limit = Millicores::from_cores(cores.clamp(floor, cpu));
            if job.cpu_limit() != Some(limit) {
                d.push(Action::set_cpu(job.id(), limit).because(why));
            }
        };
        if rows.iter().all(|r| r.1 == Class::Unsatisfied) {
            let gaps: Vec<f64> = rows.iter().map(|r| gap(r.2, r.3)).collect();
            let shares = stats::proportional_split(cpu, &gaps, &vec![floor; rows.len()], &vec![cpu; rows.len()]);
            for (r, share) in rows.iter().zip(shares) {
                set(d, &r.0, share, format!("dqoes: all unsatisfied, gap {:.2}", gap(r.2, r.3)));
            }
            return;
        }
        // What no job with a target holds is free too: the node minus their allocations and
        // the use of the jobs without one.
        let others: f64 = s.jobs_on(node.id()).filter(|j| j.qoe_target().is_none()).map(|j| j.cpu_use().cores()).sum();
        let held: f64 = rows.iter().map(|r| r.4).sum();
        let mut freed = (cpu - others - held).max(0.0);
        if rows.iter().all(|r| r.1 != Class::Unsatisfied) {
            return; // Nobody needs more: cutting would only idle the node.
        }
        for r in rows.iter().filter(|r| r.1 == Class::OverSatisfied) {
            let slack = (r.3 - r.2) / r.3;
            let next = (r.4 * (1.0 - self.config.gain * slack)).max(floor);
            freed += r.4 - next;
            set(d, &r.0, next, format!("dqoes: over-satisfied (Q {:.3} < T {:.3}), gives up CPU", r.2, r.3));
        }
        let needy: Vec<_> = rows.iter().filter(|r| r.1 == Class::Unsatisfied).collect();
        let total_gap: f64 = needy.iter().map(|r| gap(r.2, r.3)).sum();
        if freed <= 0.0 || total_gap <= 0.0 {
            return;
        }
        for r in needy {
            let extra = freed * gap(r.2, r.3) / total_gap;
            set(d, &r.0, r.4 + extra, format!("dqoes: unsatisfied (Q {:.3} > T {:.3}), gets freed CPU", r.2, r.3));
        }
    }
}

impl Policy for Dqoes {
    type Config = Config;

    fn new(config: Config) -> Result<Self, PolicyError> {
        let valid = config.interval_s.is_finite()
            && config.interval_s > 0.0
            && (0.0..1.0).contains(&config.beta)
            && config.floor_cores.is_finite()
            && config.floor_cores > 0.0
            && config.gain.is_finite()
            && config.gain > 0.0
            && config.window > 0;
        if !valid {
            return Err(PolicyError::InvalidConfig(
                "interval-s, floor-cores, gain and window must be positive, beta in [0, 1)".into(),
            ));
        }
        Ok(Dqoes { config, rounds: Rounds::default() })
    }

    fn decide(&mut self, s: &Snapshot) -> Result<Decision, PolicyError> {
        let mut d = Decision::new();
        if !self.rounds.due(s.time(), Seconds(self.config.interval_s), &mut d) {
            return Ok(d);
        }
        for node in s.nodes() {
            self.round_on(s, node, &mut d);
        }
        d.call_again_in(Seconds(self.config.interval_s));
        Ok(d)
    }
}

export_policy!(Dqoes);

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_sdk::testing::{Harness, TestWorld, job};

    fn policy() -> Dqoes {
        Dqoes::new(Config::default()).unwrap()
    }

    #[test]
    fn the_three_classes_follow_the_tolerance() {
        let p = policy();
        assert_eq!(p.classify(90.0, 100.0), Class::OverSatisfied);
        assert_eq!(p.classify(96.0, 100.0), Class::Satisfied);
        assert_eq!(p.classify(100.0, 100.0), Class::Satisfied);
        assert_eq!(p.classify(101.0, 100.0), Class::Unsatisfied);
    }

    #[test]
    fn training_qoe_is_time_per_epoch_and_inference_qoe_is_latency() {
        let mut w = TestWorld::new();
        w.node("n0", Millicores(8000), Bytes::gib(64));
        let t = w.add_job(job("t", "cifar10").metric("acc", Direction::HigherIsBetter).qoe_target(30.0));
        let i = w.add_job(job("i", "bert").inference().metric("latency-ms", Direction::LowerIsBetter).qoe_target(25.0));
        let mut h = Harness::new(policy(), w);
        for (k, gap) in [20.0, 40.0, 40.0, 40.0].into_iter().enumerate() {
            h.world.advance(Seconds(gap));
            h.world.report(t, k as u32 + 1, &[0.5]);
            h.world.report(i, k as u32 + 1, &[10.0 * (k + 1) as f64]);
        }
        h.tick(Seconds(0.0)).unwrap();
        let view = h.runner().view();
        let now = view.time();
        assert_eq!(h.policy().qoe(&view.job(t).unwrap(), now), Some(40.0), "the last 3 epochs took 40 s each");
        assert_eq!(h.policy().qoe(&view.job(i).unwrap(), now), Some(30.0), "mean of 20, 30, 40 ms");
        let later = Seconds(now.0 + 100.0);
        assert_eq!(h.policy().qoe(&view.job(t).unwrap(), later), Some(100.0), "an epoch running for 100 s");
    }

    fn limits(d: &Decision, n: u32) -> Vec<Option<f64>> {
        (0..n).map(|j| d.cpu_limit_for(JobId(j)).flatten().map(|m| m.cores())).collect()
    }

    /// An 8-core node where each job (target s/epoch, s per epoch, cores) has run four epochs of
    /// exactly `per_epoch` seconds at its limit, using all of it.
    fn rig(jobs: &[(f64, f64, f64)]) -> Harness<Dqoes> {
        let mut w = TestWorld::new();
        w.node("n0", Millicores(8000), Bytes::gib(64));
        let ids: Vec<JobId> = jobs
            .iter()
            .map(|&(target, _, cores)| {
                let id = w.add_job(job("j", "cifar10").metric("acc", Direction::HigherIsBetter).qoe_target(target));
                w.set_cpu_limit(id, Some(Millicores::from_cores(cores)));
                w.set_cpu_use(id, Millicores::from_cores(cores));
                id
            })
            .collect();
        // Every job's 4th epoch ends together at `end`, its epochs `per_epoch` apart before
        // that: advance through the merged times.
        let end = jobs.iter().map(|j| 4.0 * j.1).fold(0.0, f64::max);
        let mut events: Vec<(f64, usize, u32)> = Vec::new();
        for (j, &(_, per_epoch, _)) in jobs.iter().enumerate() {
            for k in 1..=4u32 {
                events.push((end - per_epoch * f64::from(4 - k), j, k));
            }
        }
        events.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut now = 0.0;
        for (t, j, k) in events {
            w.advance(Seconds(t - now));
            now = t;
            w.report(ids[j], k, &[0.5]);
        }
        Harness::new(policy(), w)
    }

    #[test]
    fn over_satisfied_jobs_give_cpu_to_unsatisfied_ones_in_proportion_to_their_gaps() {
        // Targets 100 s/epoch. Job 0 runs at 50 s (slack 0.5), job 1 at 150 s (gap 0.5),
        // job 2 at 125 s (gap 0.25), job 3 at 98 s (satisfied).
        let mut h = rig(&[(100.0, 50.0, 2.0), (100.0, 150.0, 2.0), (100.0, 125.0, 2.0), (100.0, 98.0, 2.0)]);
        let d = h.tick(Seconds(1.0)).unwrap();
        // The node is fully held. Job 0 gives up gain × slack = 0.5 × 0.5 of its 2 cores; jobs
        // 1 and 2 split that half core 2 : 1.
        let got = limits(&d, 4);
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 0.002);
        assert!(close(got[0], 1.5) && close(got[1], 2.0 + 1.0 / 3.0) && close(got[2], 2.0 + 1.0 / 6.0), "{got:?}");
        assert_eq!(got[3], None, "a satisfied job is left alone");
    }

    #[test]
    fn cpu_nobody_holds_goes_to_the_unsatisfied() {
        // 4 of 8 cores held; job 1 is unsatisfied, job 0 satisfied.
        let mut h = rig(&[(100.0, 99.0, 2.0), (100.0, 150.0, 2.0)]);
        let got = limits(&h.tick(Seconds(1.0)).unwrap(), 2);
        assert_eq!(got, [None, Some(6.0)]);
    }

    #[test]
    fn a_job_is_never_cut_below_the_floor() {
        // Job 0 is far ahead (slack 0.9 at 0.15 cores): it would drop to 0.015 cores.
        let mut h = rig(&[(100.0, 10.0, 0.15), (100.0, 200.0, 2.0)]);
        let got = limits(&h.tick(Seconds(1.0)).unwrap(), 2);
        assert_eq!(got[0], Some(0.1));
    }

    #[test]
    fn when_every_job_is_unsatisfied_the_node_is_split_by_their_gaps() {
        let mut h = rig(&[(100.0, 300.0, 2.0), (100.0, 200.0, 2.0)]);
        let got = limits(&h.tick(Seconds(1.0)).unwrap(), 2);
        // Gaps 2 and 1 of 8 cores.
        assert_eq!(got, [Some(5.333), Some(2.667)]);
    }

    #[test]
    fn a_bad_config_is_refused() {
        assert!(Harness::<Dqoes>::from_config(r#"{"beta": 1.5}"#, TestWorld::new()).is_err());
        assert!(Harness::<Dqoes>::from_config(r#"{"window": 0}"#, TestWorld::new()).is_err());
        assert!(Harness::<Dqoes>::from_config(r#"{"beta": 0.1, "floor-cores": 0.2}"#, TestWorld::new()).is_ok());
    }
}
