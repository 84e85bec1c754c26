//! Pollux: every round, give each job the GPU count that maximises the power mean (p = −1) of
//! all jobs' speedups, each job picking its own goodput-best batch size for its GPUs, as Sia's
//! artifact runs Pollux (Qiao et al., "Pollux: Co-adaptive cluster scheduling for goodput-optimized
//! deep learning", OSDI 2021; Subramanya et al., SOSP 2023, `pollux_unaware.py`).
//!
//! Each round (`interval-s`, 60 s):
//! 1. **View.** Heterogeneity-unaware: every GPU is planned as a GPU of one type (`profile`,
//!    the T4, Sia's `aws`), on virtual nodes as large as the smallest node of any type (4 GPUs).
//!    Only nodes that take work count. A job's GPUs stay within one GPU type (the pools).
//! 2. **Speedup** of a job on n GPUs: its goodput there (`wasmsched_goodput`: the profile's
//!    measured step times packed on virtual nodes, at the batch size of best goodput and the
//!    statistical efficiency of its epoch), over its goodput at its fair share (the cluster's
//!    GPUs over the jobs, rounded up, packed). An elastic job may take its `scaling` counts up to
//!    twice the most GPUs it has run on (at least one) and the smallest pool; a rigid job (or
//!    one of a model without measurements) its own count, at speedup 1.
//! 3. **Restart factor.** Any allocation but the current one multiplies the speedup by
//!    `max(age − restarts × restart-penalty-s, 0) / (age + restart-penalty-s)`.
//! 4. **Objective**: the power mean with `p` (−1) of the speedups, each scaled by the virtual
//!    node's share of the cluster (speedup / 4 on 4-GPU nodes) plus 0.001, so that a job without
//!    GPUs costs the mean dearly and no job hoards them while another waits. `plan` searches for
//!    the allocation of highest mean (greedy upgrades and moves of GPUs between jobs, from two
//!    starts); a job still restoring from its last change keeps its allocation.
//! 5. **Placement** (`place`): unchanged jobs keep their GPUs; the others are packed onto as few
//!    nodes as they need. It places queued jobs, resizes running ones (they pick their own batch
//!    size), preempts those left without GPUs, and says why a job waits.
//!
//! Reads: each node's GPU type and GPUs and whether it takes work; each job's model, scaling,
//! GPUs, epoch, arrival and attained service.
//!
//! Where we differ from the artifact: it searches with a genetic algorithm (NSGA-II, population
//! 100, 100 generations, unseeded) and takes the Pareto solution of best mean; ours is the
//! deterministic search of `plan`, which keeps no second (utilisation) objective. Its goodput
//! comes from a model fitted to what each job has run (merged over GPU types); ours reads the
//! profile's measured tables directly, as if profiling were exact. It allocates on virtual nodes
//! and then drops the GPUs of a job's minority GPU types, leaving them idle; we search within one
//! type from the start, so no GPU is dropped. Its rule of at most one multi-node job per virtual
//! node is a constraint; ours is a preference of the placement. Its fair-share baseline is one
//! node of ⌈GPUs/jobs⌉ GPUs; ours packs those GPUs on virtual nodes. Like Sia's port, it locks a
//! job still restoring and gives GPUs the plan leaves idle to jobs that wait.
//!
//! Config (kebab-case keys, all optional): `interval-s` (60), `p` (−1), `restart-penalty-s`
//! (30), `profile` ("t4").

mod place;
mod plan;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};
use wasmsched_goodput::goodput::{best_config, speed};
use wasmsched_goodput::{GpuType, Model, packed};
use wasmsched_sdk::prelude::*;

use place::{Outcome, Pool};
use plan::{Candidate, prune, search};

/// Pollux's constants.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Seconds between rounds.
    pub interval_s: f64,
    /// The power of the mean of the speedups (−1: the harmonic mean; 1: their sum).
    pub p: f64,
    /// Seconds a restart is taken to cost, in the restart factor.
    pub restart_penalty_s: f64,
    /// The GPU type whose measurements stand for every GPU ("t4", Sia's "aws").
    pub profile: String,
}

impl Default for Config {
    fn default() -> Self {
        Config { interval_s: 60.0, p: -1.0, restart_penalty_s: 30.0, profile: "t4".into() }
    }
}

/// What Pollux remembers of a job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Ledger {
    /// Times it restarted: each resize, and each start after its first.
    restarts: u32,
    /// The most GPUs it has run on.
    most_gpus: u32,
    /// When it last started or changed, while it runs.
    since: Option<f64>,
    /// Whether it has ever run.
    ran: bool,
}

/// What survives a hot swap.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct State {
    rounds: Rounds,
    jobs: BTreeMap<u32, Ledger>,
}

/// The Pollux policy.
pub struct Pollux {
    config: Config,
    profile: GpuType,
    state: State,
}

/// Speedups are raised by this before the power (the artifact's 1e-3): a job without GPUs
/// has a finite cost.
const FLOOR: f64 = 1e-3;

/// Goodputs of one round, by (model, epoch, GPUs).
type Goodputs = HashMap<(Model, u32, u32), f64>;

impl Pollux {
    /// What a (scaled, floored) speedup `x` costs the objective: lower is better.
    fn cost(&self, x: f64) -> f64 {
        let p = self.config.p;
        if p == 0.0 {
            -x.ln()
        } else if p < 0.0 {
            x.powf(p)
        } else {
            -x.powf(p)
        }
    }

    /// Goodput of `model` in `epoch` on `gpus` GPUs of the profile, packed on `vnode`-GPU nodes.
    fn goodput(&self, cache: &mut Goodputs, model: Model, epoch: u32, gpus: u32, vnode: u32) -> f64 {
        *cache.entry((model, epoch, gpus)).or_insert_with(|| {
            let shape = packed(gpus, vnode);
            let g = speed(model, self.profile, best_config(model, self.profile, &shape, epoch), &shape, epoch);
            if g.is_finite() { g.max(0.0) } else { 0.0 }
        })
    }

    /// Job `job` as the search sees it.
    #[allow(clippy::too_many_arguments, reason = "one round's figures, passed once")]
    fn candidate(
        &self,
        job: &Job,
        pools: &[Pool],
        vnode: u32,
        fair: u32,
        now: f64,
        restoring: bool,
        cache: &mut Goodputs,
    ) -> Candidate {
        let ledger = self.state.jobs.get(&job.id().0).cloned().unwrap_or_default();
        let scale = 1.0 / f64::from(vnode);
        let idle = self.cost(FLOOR);
        let on: BTreeSet<Option<usize>> = job.gpus().iter().map(|g| sched::pool_of(pools, g.node)).collect();
        let on: Vec<Option<usize>> = on.into_iter().collect();
        let current = match (job.is_queued(), &on[..]) {
            (false, [Some(pool)]) => Some((*pool, job.gpus().len() as u32)),
            _ => None,
        };
        let age = (now - job.arrival().0).max(0.0);
        let penalty = self.config.restart_penalty_s;
        let restart = (age - f64::from(ledger.restarts) * penalty).max(0.0) / (age + penalty);
        let largest = pools.iter().map(|p| p.total).max().unwrap_or(0);
        let model = Model::parse(job.model()).filter(|_| job.is_elastic());
        let speedups: Vec<(u32, f64)> = match model {
            Some(m) => {
                let smallest = pools.iter().map(|p| p.total).min().unwrap_or(0);
                let cap = (2 * ledger.most_gpus).max(1).min(smallest);
                let epoch = job.epoch() + 1;
                let base = self.goodput(cache, m, epoch, fair, vnode);
                let mut counts: Vec<u32> =
                    job.scaling().gpu_counts.iter().copied().filter(|&n| n >= 1 && n <= cap).collect();
                counts.extend(current.map(|c| c.1));
                counts.sort_unstable();
                counts.dedup();
                counts
                    .into_iter()
                    .map(|n| (n, if base > 0.0 { self.goodput(cache, m, epoch, n, vnode) / base } else { 0.0 }))
                    .collect()
            }
            None if job.gpus_asked() > 0 && job.gpus_asked() <= largest => vec![(job.gpus_asked(), 1.0)],
            None => Vec::new(),
        };
        let stay = current.and_then(|(pool, n)| {
            speedups.iter().find(|s| s.0 == n).map(|s| (pool, n, self.cost(s.1 * scale + FLOOR)))
        });
        let options = prune(speedups.iter().map(|&(n, s)| (n, self.cost(s * restart * scale + FLOOR))).collect());
        Candidate { options, idle, current: stay, locked: restoring && stay.is_some() }
    }

    fn round(&mut self, s: &Snapshot, now: f64, d: &mut Decision) {
        let pools = place::pools(s);
        let capacity: Vec<u32> = pools.iter().map(|p| p.total).collect();
        let vnode = pools.iter().map(|p| p.per_node).min().unwrap_or(1).max(1);
        let mut jobs: Vec<Job> = s.jobs().chain(s.queue()).filter(|j| j.gpus_asked() > 0 || j.is_elastic()).collect();
        // The artifact's order: least attained service first, then the oldest.
        jobs.sort_by(|a, b| {
            a.attained_service().0.total_cmp(&b.attained_service().0).then(a.arrival().0.total_cmp(&b.arrival().0))
        });
        let total: u32 = capacity.iter().sum();
        let fair = total.div_ceil(jobs.len().max(1) as u32).max(1);
        let mut cache = Goodputs::new();
        let candidates: Vec<Candidate> = jobs
            .iter()
            .map(|job| {
                let since = self.state.jobs.get(&job.id().0).and_then(|l| l.since);
                let restore = Model::parse(job.model()).map_or(30.0, |m| m.restore_s());
                let restoring = !job.is_queued() && since.is_some_and(|t| now - t < restore);
                self.candidate(job, &pools, vnode, fair, now, restoring, &mut cache)
            })
            .collect();
        let picks = search(&candidates, &capacity);
        let out = place::place(s, &pools, &jobs, &picks, d);
        self.remember(&jobs, &out, now);
        for (j, job) in jobs.iter().enumerate() {
            if !job.is_queued() || out.started.iter().any(|x| x.0 == j) || out.filled.contains(&j) {
                continue;
            }
            let why = if out.unplaced.contains(&j) {
                "pollux: its GPUs are split over nodes or held this round; next round".to_string()
            } else if candidates[j].options.is_empty() {
                format!("pollux: no GPU type here has {} GPUs for it", job.gpus_asked())
            } else {
                format!("pollux: all {total} GPUs go to jobs of higher speedup this round")
            };
            d.pending(job.id(), why);
        }
    }

    /// Record starts, resizes and preemptions in the ledgers.
    fn remember(&mut self, jobs: &[Job], out: &Outcome, now: f64) {
        let ledgers = &mut self.state.jobs;
        fn ledger<'l>(ledgers: &'l mut BTreeMap<u32, Ledger>, job: &Job) -> &'l mut Ledger {
            ledgers.entry(job.id().0).or_default()
        }
        for &(j, gpus) in &out.started {
            let l = ledger(ledgers, &jobs[j]);
            l.restarts += u32::from(l.ran);
            (l.ran, l.since, l.most_gpus) = (true, Some(now), l.most_gpus.max(gpus));
        }
        for &j in &out.filled {
            let l = ledger(ledgers, &jobs[j]);
            l.restarts += u32::from(l.ran);
            (l.ran, l.since, l.most_gpus) = (true, Some(now), l.most_gpus.max(1));
        }
        for &(j, gpus) in &out.resized {
            let l = ledger(ledgers, &jobs[j]);
            l.restarts += 1;
            (l.since, l.most_gpus) = (Some(now), l.most_gpus.max(gpus));
        }
        for &j in &out.kept {
            let gpus = jobs[j].gpus().len() as u32;
            let l = ledger(ledgers, &jobs[j]);
            (l.ran, l.most_gpus) = (true, l.most_gpus.max(gpus));
        }
        for &j in &out.preempted {
            ledger(ledgers, &jobs[j]).since = None;
        }
    }
}

impl Policy for Pollux {
    type Config = Config;

    const PLACES: bool = true;

    fn new(config: Config) -> Result<Self, PolicyError> {
        if !(config.interval_s >= 0.0 && config.interval_s.is_finite()) {
            return Err(PolicyError::InvalidConfig(format!(
                "interval-s = {}: give seconds, 0 or more",
                config.interval_s
            )));
        }
        if !config.p.is_finite() {
            return Err(PolicyError::InvalidConfig(format!("p = {}: give a finite power, e.g. -1", config.p)));
        }
        if !(config.restart_penalty_s >= 0.0 && config.restart_penalty_s.is_finite()) {
            return Err(PolicyError::InvalidConfig(format!(
                "restart-penalty-s = {}: give seconds, 0 or more, e.g. 30",
                config.restart_penalty_s
            )));
        }
        let Some(profile) = GpuType::parse(&config.profile) else {
            let known: Vec<&str> = GpuType::ALL.iter().map(|t| t.name()).collect();
            return Err(PolicyError::InvalidConfig(format!(
                "profile = {:?}: give a measured GPU type, one of {}",
                config.profile,
                known.join(", ")
            )));
        };
        Ok(Pollux { config, profile, state: State::default() })
    }

    fn decide(&mut self, s: &Snapshot) -> Result<Decision, PolicyError> {
        let mut d = Decision::new();
        let now = s.time().0;
        // Forget jobs that ended.
        let live: BTreeSet<u32> = s.jobs().chain(s.queue()).map(|j| j.id().0).collect();
        self.state.jobs.retain(|h, _| live.contains(h));
        if !self.state.rounds.due(s.time(), Seconds(self.config.interval_s), &mut d) {
            return Ok(d);
        }
        self.round(s, now, &mut d);
        sched::first_fit_cpu_jobs(s, &mut d, "pollux", |j| !j.is_elastic());
        if self.config.interval_s > 0.0 {
            d.call_again_in(Seconds(self.config.interval_s));
        }
        Ok(d)
    }

    keep_state!(state);
}

export_policy!(Pollux);

#[cfg(test)]
mod tests;
