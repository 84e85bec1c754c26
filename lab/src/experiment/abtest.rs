//! A/B tests on the simulator, where the truth is known: a switchback or a split of the arms'
//! policies on one simulated cluster ([`wasmsched_loop::experiment`]), and beside it, with `truth`,
//! every arm alone on the same workload and seed. Over many seeds, how far each estimator
//! lands from the truth and how often its interval holds it ([`Check`]): what
//! `wasmsched abtest` prints and `docs/experiments.md` reports.

use std::fmt::Write as _;

use serde::Serialize;

use std::sync::atomic::{AtomicUsize, Ordering};
use wasmsched_core::world::World;
use wasmsched_loop::control::{self, LoopConfig};
use wasmsched_loop::experiment::{Estimate, ExperimentConfig, Ledger, Versus};
use wasmsched_runtime::Runtime;
use wasmsched_runtime::supervise::{Fallback, Quarantine, Supervised};
use wasmsched_sim::{SimConfig, Simulator};

use super::run::{PolicyChoice, RunOptions, RunReport, simulate};
use crate::scenario::Scenario;

/// The arms of an experiment on one cluster, in turn or side by side, with its ledger: what a
/// loop's driver asks for the policies on each tick ([`Arms::observed`], [`Arms::policies`]).
/// [`experiment`] drives it on the simulator; a live test drives it on a real backend.
pub struct Arms {
    arms: Vec<Supervised>,
    ledger: Ledger,
    active: usize,
}

impl Arms {
    /// `arms` (the first the baseline) under `config`, each in its own sandbox with `limits`.
    pub fn new(arms: &[PolicyChoice], config: &ExperimentConfig, limits: wasmsched_runtime::limits::Limits) -> Arms {
        let arms = arms
            .iter()
            .map(|c| {
                let (policy, json) = (c.policy.clone(), c.config_json.clone());
                Supervised::new(policy, json, limits, Fallback::KeepLimits, Quarantine::default())
            })
            .collect();
        Arms { arms, ledger: Ledger::new(config.clone()), active: 0 }
    }

    /// What the experiment has counted.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The world as just observed: counted, and the arm for the tick that starts now.
    pub fn observed(&mut self, world: &World) {
        self.ledger.observe(world);
        self.active = self.ledger.decide_at(world.time_ms()).arm;
    }

    /// The policies to ask now: a split's arms side by side, or the block's arm active and
    /// the others shadows.
    pub fn policies(&mut self) -> control::Policies<'_> {
        let experiment = self.ledger.config();
        if experiment.is_split() {
            let arms = self.arms.iter_mut().map(Some).collect();
            return control::Policies { split: Some(control::Split { arms, experiment }), ..Default::default() };
        }
        let active = self.active;
        let mut active_one = None;
        let mut shadows = Vec::new();
        for (k, p) in self.arms.iter_mut().enumerate() {
            if k == active { active_one = Some(p) } else { shadows.push(p) }
        }
        control::Policies { active: active_one, shadows, split: None }
    }
}

impl control::Driver for Arms {
    fn observed(
        &mut self,
        world: &World,
        _: Vec<wasmsched_core::backend::Endpoint>,
        _: Option<wasmsched_core::replicas::Leadership>,
    ) {
        Arms::observed(self, world);
    }

    fn policies(&mut self) -> control::Policies<'_> {
        Arms::policies(self)
    }

    fn record(&mut self, _: control::Tick<'_>) {}
}

/// One run of the experiment `config` (a switchback or a split) of `arms` (the first the
/// baseline) on `scenario` with `options`' seed.
pub fn experiment(
    rt: &Runtime,
    arms: &[PolicyChoice],
    scenario: &Scenario,
    options: &RunOptions,
    config: &ExperimentConfig,
) -> Ledger {
    let mut sim = Simulator::new(&scenario.workload, options.sim);
    let mut driver = Arms::new(arms, config, options.limits);
    let loop_config = LoopConfig {
        tick: options.tick,
        horizon: None,
        budget: scenario.budget,
        watchdog: scenario.watchdog,
        tenants: scenario.tenants.clone(),
    };
    control::drive(&mut sim, &mut driver, rt, &loop_config);
    driver.ledger
}

/// One replication: the experiment's estimates, and with the truth, each arm run alone.
#[derive(Clone, Debug, Serialize)]
pub struct Replication {
    /// The simulator's seed.
    pub seed: u64,
    /// Every arm but the baseline against it, every estimate.
    pub estimates: Vec<Versus>,
    /// The truth: each arm alone on the same workload and seed, in arm order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alone: Vec<Truth>,
}

/// An arm run alone: the figures the estimates stand for.
#[derive(Clone, Debug, Serialize)]
pub struct Truth {
    /// The arm.
    pub arm: String,
    /// Mean JCT of its jobs, seconds.
    pub mean_jct_s: f64,
    /// Mean wait before the first start, seconds.
    pub mean_wait_s: f64,
    /// Jain's index of the tenants' received over entitled GPU-time while contended, where
    /// the workload has two tenants or more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jain: Option<f64>,
}

impl Truth {
    fn of(report: &RunReport) -> Truth {
        let waits: Vec<f64> = report.jobs.iter().filter_map(|j| j.waited_s).collect();
        Truth {
            arm: report.policy.clone(),
            mean_jct_s: report.mean_jct_s,
            mean_wait_s: waits.iter().sum::<f64>() / waits.len().max(1) as f64,
            jain: report.fairness.as_ref().map(|f| f.jain),
        }
    }

    /// What `estimate` stands for, where the truth has it.
    fn value(&self, estimate: Estimate) -> Option<f64> {
        match estimate {
            Estimate::LittleJct | Estimate::NaiveJct => Some(self.mean_jct_s),
            Estimate::LittleWait => Some(self.mean_wait_s),
            Estimate::TenantFairness => self.jain,
            Estimate::Throughput | Estimate::GpuUtilisation => None,
        }
    }
}

impl Replication {
    /// The experiment of `arms` on `scenario` with `seed`, and with `truth`, each arm alone.
    pub fn run(
        rt: &Runtime,
        arms: &[PolicyChoice],
        scenario: &Scenario,
        options: &RunOptions,
        config: &ExperimentConfig,
        truth: bool,
    ) -> Replication {
        let ledger = experiment(rt, arms, scenario, options, config);
        let alone = match truth {
            true => arms.iter().map(|c| Truth::of(&simulate(rt, c, scenario, options))).collect(),
            false => Vec::new(),
        };
        Replication { seed: options.sim.seed, estimates: ledger.versus(), alone }
    }

    /// The true change of `arm`'s `estimate` against the baseline, where known.
    fn truth(&self, arm: &str, estimate: Estimate) -> Option<f64> {
        let base = self.alone.first()?.value(estimate)?;
        let ours = self.alone.iter().find(|t| t.arm == arm)?.value(estimate)?;
        Some(ours / base - 1.0)
    }
}

/// [`Replication::run`] for every seed of `seeds`, `threads` at a time, in seed order;
/// `progress` hears how many have ended. Each run uses `options` with its seed, and the
/// scenario's `perturb`.
#[allow(clippy::too_many_arguments)]
pub fn replicate(
    rt: &Runtime,
    arms: &[PolicyChoice],
    scenario: &Scenario,
    options: &RunOptions,
    config: &ExperimentConfig,
    seeds: std::ops::Range<u64>,
    truth: bool,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Vec<Replication> {
    let seeds: Vec<u64> = seeds.collect();
    let ended = AtomicUsize::new(0);
    super::batch::each(&seeds, threads, |&seed| {
        let sim = SimConfig { seed, perturb: scenario.perturb, ..options.sim };
        // Each replication draws its own order of the arms in every group (a switchback) or its
        // own assignment of the jobs (a split).
        let config = ExperimentConfig { seed, ..config.clone() };
        let run = Replication::run(rt, arms, scenario, &RunOptions { sim, ..*options }, &config, truth);
        progress(ended.fetch_add(1, Ordering::Relaxed) as u64 + 1);
        run
    })
}

/// How an estimator did over the replications against the truth.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    /// The arm.
    pub arm: String,
    /// The estimator.
    pub estimate: Estimate,
    /// Replications that gave both an estimate and the truth.
    pub replications: usize,
    /// The mean true change.
    pub truth: f64,
    /// The mean estimated change.
    pub estimated: f64,
    /// Mean of estimate − truth.
    pub bias: f64,
    /// Root mean square of estimate − truth.
    pub rmse: f64,
    /// Share of the replications whose 95 % interval held the truth.
    pub coverage: f64,
    /// Share whose estimate had the truth's sign.
    pub sign_agrees: f64,
}

/// One replication's estimate beside the truth.
struct Pair {
    estimate: f64,
    truth: f64,
    interval: Option<[f64; 2]>,
}

/// Every estimator that has a truth, checked over `runs`.
pub fn check(runs: &[Replication]) -> Vec<Check> {
    let Some(first) = runs.first() else { return Vec::new() };
    let mut out = Vec::new();
    for v in &first.estimates {
        let pairs: Vec<Pair> = runs
            .iter()
            .filter_map(|r| {
                let e = r.estimates.iter().find(|e| e.arm == v.arm && e.estimate == v.estimate)?;
                let truth = r.truth(&v.arm, v.estimate)?;
                let pair = Pair { estimate: e.change, truth, interval: e.interval };
                (e.change.is_finite() && truth.is_finite()).then_some(pair)
            })
            .collect();
        if pairs.is_empty() {
            continue;
        }
        let n = pairs.len() as f64;
        let mean = |f: &dyn Fn(&Pair) -> f64| pairs.iter().map(f).sum::<f64>() / n;
        let holds = |p: &Pair| p.interval.is_some_and(|[lo, hi]| lo <= p.truth && p.truth <= hi);
        out.push(Check {
            arm: v.arm.clone(),
            estimate: v.estimate,
            replications: pairs.len(),
            truth: mean(&|p| p.truth),
            estimated: mean(&|p| p.estimate),
            bias: mean(&|p| p.estimate - p.truth),
            rmse: mean(&|p| (p.estimate - p.truth).powi(2)).sqrt(),
            coverage: mean(&|p| f64::from(u8::from(holds(p)))),
            sign_agrees: mean(&|p| f64::from(u8::from(p.estimate.signum() == p.truth.signum()))),
        });
    }
    out
}

/// The checks for a person: one row per arm and estimator.
pub fn check_table(checks: &[Check]) -> String {
    let mut out = String::from(
        "each estimator against the truth (every arm alone, same workload and seed), over the replications\n",
    );
    let _ = writeln!(
        out,
        "{:<12} {:<46} {:>5} {:>9} {:>10} {:>9} {:>8} {:>15} {:>6}",
        "arm", "estimator", "runs", "truth", "estimated", "bias", "RMSE", "95 % coverage", "sign"
    );
    let pct = |x: f64| format!("{:+.1} %", 100.0 * x);
    for c in checks {
        let _ = writeln!(
            out,
            "{:<12} {:<46} {:>5} {:>9} {:>10} {:>9} {:>8} {:>15} {:>6}",
            c.arm,
            c.estimate.label(),
            c.replications,
            pct(c.truth),
            pct(c.estimated),
            pct(c.bias),
            format!("{:.1} %", 100.0 * c.rmse),
            format!("{:.0} %", 100.0 * c.coverage),
            format!("{:.0} %", 100.0 * c.sign_agrees)
        );
    }
    out
}
