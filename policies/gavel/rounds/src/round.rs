//! Gavel's round-based mechanism, whatever the allocation ([`Allocation`]): every round it
//! turns the time fractions `x` into the jobs that run, by priority `x / (job time / cluster
//! time)`, keeps those whose GPU type is unchanged on their GPUs, places and moves the others,
//! and preempts the rest. [`RoundBased`] is the policy; Gavel and Themis differ only in the
//! allocation.

use std::collections::{BTreeMap, BTreeSet};
use std::marker::PhantomData;

use serde::{Deserialize, Serialize};
use wasmsched_goodput::Model;
use wasmsched_goodput::epochs::steps_by_epoch;
use wasmsched_sdk::prelude::*;
use wasmsched_sdk::sched::Entries;

use crate::table::{JobRow, Pool, Problem, guessed_batch, pools, steps_per_s};

/// How a round-based policy splits the cluster's time among the jobs.
pub trait Allocation {
    /// The policy's name, at the head of its reasons and errors.
    const NAME: &'static str;

    /// Per job of `p`, per pool, the fraction of the round it should spend there (each row
    /// summing to at most 1, each pool's GPUs `Σ_i n_i x[i][t]` at most its capacity).
    fn allocate(p: &Problem) -> Vec<Vec<f64>>;
}

/// The mechanism's constants.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Seconds between rounds.
    pub interval_s: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config { interval_s: 360.0 }
    }
}

/// What the mechanism remembers of a job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Ledger {
    /// Per GPU type name, the seconds of rounds it was given there, from half a round
    /// (Gavel's job time).
    time_s: BTreeMap<String, f64>,
    /// Its global batch size, once seen running (0 before).
    batch: u32,
}

/// What survives a hot swap.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    rounds: Rounds,
    /// Per GPU type name, the seconds of rounds handed out there (Gavel's cluster time).
    cluster_time_s: BTreeMap<String, f64>,
    jobs: BTreeMap<u32, Ledger>,
}

/// A round-based policy of allocation `A`.
pub struct RoundBased<A> {
    config: Config,
    state: State,
    allocation: PhantomData<fn() -> A>,
}

/// Per GPU (node, index), the job (its position in the round's jobs) that holds it.
type Holders = BTreeMap<(NodeId, u32), usize>;

/// One round's outcome for a job.
#[derive(Clone, Debug, PartialEq)]
enum Plan {
    /// It runs on pool `pool`: on its own GPUs (no entries), or on the new ones named.
    Runs { pool: usize, entries: Option<Entries> },
    /// The greedy pass gave it a pool, but its GPUs do not fit there as its replicas allow.
    Unplaced,
    /// Not scheduled.
    Out,
}

impl<A: Allocation> RoundBased<A> {
    /// The state it would hand to its successor (tests compare it across a swap).
    pub fn state(&self) -> &State {
        &self.state
    }

    /// The allocation problem of the jobs `jobs` on `pools` at `now`.
    fn problem(&self, jobs: &[Job], pools: &[Pool], now: f64) -> Problem {
        let interval = self.config.interval_s;
        let rows = jobs
            .iter()
            .map(|job| {
                let model = Model::parse(job.model());
                let n = job.gpus_asked();
                let seen = self.state.jobs.get(&job.id().0).map_or(0, |l| l.batch);
                // What it ran at, else the one batch size a rigid job declares, else a guess.
                let declared = job.scaling().batch_size_min;
                let batch = match model {
                    _ if seen > 0 => seen,
                    _ if declared > 0 => declared,
                    Some(m) => guessed_batch(m, n),
                    None => 0,
                };
                let arrival = job.arrival().0;
                let wait = if interval > 0.0 { interval - arrival % interval } else { 0.0 };
                let (total, done) = model.map_or((1.0, 0.0), |m| {
                    let epochs = m.elastic_epochs();
                    (steps_by_epoch(m, batch, epochs), steps_by_epoch(m, batch, job.epoch().min(epochs)))
                });
                JobRow {
                    gpus: n,
                    throughput: pools.iter().map(|p| steps_per_s(model, p, n, batch)).collect(),
                    age_s: (now - arrival).max(0.0),
                    prestart_s: wait + model.map_or(30.0, Model::restore_s),
                    steps_total: total,
                    steps_done: done,
                }
            })
            .collect();
        Problem { capacity: pools.iter().map(|p| p.total).collect(), jobs: rows }
    }

    /// Gavel's greedy pass: all (job, pool) pairs by priority, then time fraction, descending;
    /// each job scheduled once, where its GPUs fit in what the pool has left. Per job its pool.
    fn schedule(&self, jobs: &[Job], pools: &[Pool], p: &Problem, x: &[Vec<f64>]) -> Vec<Option<usize>> {
        let mut pairs: Vec<(f64, f64, usize, usize)> = Vec::new();
        for (i, job) in jobs.iter().enumerate() {
            let ledger = self.state.jobs.get(&job.id().0);
            for (t, pool) in pools.iter().enumerate() {
                if p.jobs[i].throughput[t] <= 0.0 {
                    continue;
                }
                let name = pool.kind.name();
                let half = self.config.interval_s / 2.0;
                let job_time = ledger.and_then(|l| l.time_s.get(name)).copied().unwrap_or(half).max(1e-9);
                let cluster_time = self.state.cluster_time_s.get(name).copied().unwrap_or(half).max(1e-9);
                let share = x[i][t];
                let priority = if share > 1e-9 { share / (job_time / cluster_time) } else { 0.0 };
                pairs.push((priority, share, i, t));
            }
        }
        pairs.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.total_cmp(&a.1)).then(a.2.cmp(&b.2)).then(a.3.cmp(&b.3)));
        let mut left: Vec<u32> = pools.iter().map(|p| p.total).collect();
        let mut pick = vec![None; jobs.len()];
        for (_, _, i, t) in pairs {
            let n = p.jobs[i].gpus;
            if pick[i].is_none() && n <= left[t] {
                pick[i] = Some(t);
                left[t] -= n;
            }
        }
        pick
    }

    /// Where each scheduled job runs: on its own GPUs when all of them are of its pool, else
    /// by first fit over the pool's nodes, the most GPUs first.
    fn place(s: &Snapshot, jobs: &[Job], pools: &[Pool], pick: &[Option<usize>]) -> Vec<Plan> {
        let mut book = sched::FreeGpus::up(s);
        let mut plans = vec![Plan::Out; jobs.len()];
        for (i, job) in jobs.iter().enumerate() {
            let Some(t) = pick[i] else { continue };
            let stays = !job.is_queued()
                && job.gpus().len() as u32 == job.gpus_asked()
                && job.gpus().iter().all(|g| pools[t].has(g.node) && book.is_free(*g));
            if stays {
                for g in job.gpus() {
                    book.take_gpu(*g);
                }
                plans[i] = Plan::Runs { pool: t, entries: None };
            }
        }
        let mut order: Vec<usize> = (0..jobs.len()).filter(|&i| pick[i].is_some() && plans[i] == Plan::Out).collect();
        order.sort_by_key(|&i| (pick[i], std::cmp::Reverse(jobs[i].gpus_asked()), i));
        for i in order {
            let t = pick[i].expect("scheduled");
            let nodes: Vec<NodeId> = pools[t].node_ids().collect();
            plans[i] = match book.fit_on(&nodes, jobs[i].gpus_asked(), jobs[i].replicas()) {
                Some(p) => Plan::Runs { pool: t, entries: Some(p.into_nodes()) },
                None => Plan::Unplaced,
            };
        }
        plans
    }

    /// One round: the plan of who runs where, the actions that carry it out, the rounds
    /// counted, and why each job left waiting waits.
    fn round(&mut self, s: &Snapshot, now: f64, d: &mut Decision) {
        let pools = pools(s);
        let jobs: Vec<Job> = s.jobs().chain(s.queue()).filter(|j| j.gpus_asked() > 0).collect();
        self.open_ledgers(&jobs, &pools);
        let problem = self.problem(&jobs, &pools, now);
        let x = A::allocate(&problem);
        let pick = self.schedule(&jobs, &pools, &problem, &x);
        let plans = Self::place(s, &jobs, &pools, &pick);

        // Preempt the running jobs that do not run this round, then place and move the others
        // in an order the host accepts: each once the GPUs it takes are free.
        let mut holder: Holders = BTreeMap::new();
        for (i, job) in jobs.iter().enumerate() {
            for g in job.gpus() {
                holder.insert((g.node, g.index), i);
            }
        }
        let mut out = Self::preempt_unscheduled(s, &jobs, &plans, &mut holder, d);
        let runs = Self::move_and_place(&jobs, &pools, &plans, &mut holder, &mut out, d);
        self.count_rounds(&jobs, &pools, &runs);
        Self::tell_pending(&jobs, &problem, &x, &plans, &runs, &out, d);
    }

    /// Opens the ledger of each job seen for the first time, and adds to the cluster's time.
    fn open_ledgers(&mut self, jobs: &[Job], pools: &[Pool]) {
        let interval = self.config.interval_s;
        // A job seen for the first time: half a round on every type, for it and the cluster.
        for job in jobs {
            let ledger = self.state.jobs.entry(job.id().0).or_default();
            if ledger.time_s.is_empty() {
                for pool in pools {
                    ledger.time_s.insert(pool.kind.name().into(), interval / 2.0);
                    *self.state.cluster_time_s.entry(pool.kind.name().into()).or_default() += interval / 2.0;
                }
            }
        }
    }

    /// Preempts the running jobs the plan does not run, but those it leaves idle where they
    /// are; their GPUs leave `holder`. The jobs preempted.
    fn preempt_unscheduled(
        s: &Snapshot,
        jobs: &[Job],
        plans: &[Plan],
        holder: &mut Holders,
        d: &mut Decision,
    ) -> BTreeSet<usize> {
        let name = A::NAME;
        // A running job not scheduled runs on where the plan leaves all its GPUs idle (on nodes
        // that take work): the host would start it again there anyway, after a restart.
        let wanted: BTreeSet<(NodeId, u32)> = plans
            .iter()
            .filter_map(|p| match p {
                Plan::Runs { entries: Some(e), .. } => Some(e),
                _ => None,
            })
            .flat_map(|e| e.iter().flat_map(|(n, gpus)| gpus.iter().map(move |&g| (*n, g))))
            .collect();
        let idle = |job: &Job| {
            job.gpus()
                .iter()
                .all(|g| !wanted.contains(&(g.node, g.index)) && s.node(g.node).is_some_and(|n| n.takes_work()))
        };
        let mut out: BTreeSet<usize> = BTreeSet::new();
        for (i, job) in jobs.iter().enumerate() {
            if !job.is_queued() && !matches!(plans[i], Plan::Runs { .. }) && !idle(job) {
                d.push(Action::preempt(job.id()).because(format!("{name}: not scheduled this round")));
                holder.retain(|_, h| *h != i);
                out.insert(i);
            }
        }
        out
    }

    /// Places and moves the jobs the plan puts on new GPUs, each once `holder` shows those
    /// free; a running job caught in a cycle is preempted (into `out`). Per job that runs,
    /// its pool.
    fn move_and_place(
        jobs: &[Job],
        pools: &[Pool],
        plans: &[Plan],
        holder: &mut Holders,
        out: &mut BTreeSet<usize>,
        d: &mut Decision,
    ) -> BTreeMap<usize, usize> {
        let name = A::NAME;
        let mut moves: Vec<(usize, usize, &Entries)> = plans
            .iter()
            .enumerate()
            .filter_map(|(i, p)| match p {
                Plan::Runs { pool, entries: Some(e) } => Some((i, *pool, e)),
                _ => None,
            })
            .collect();
        let mut runs: BTreeMap<usize, usize> = plans
            .iter()
            .enumerate()
            .filter_map(|(i, p)| match p {
                Plan::Runs { pool, entries: None } => Some((i, *pool)),
                _ => None,
            })
            .collect();
        while !moves.is_empty() {
            let free = |i: usize, e: &[(NodeId, Vec<u32>)], holder: &Holders| {
                e.iter().all(|(n, gpus)| gpus.iter().all(|&g| holder.get(&(*n, g)).is_none_or(|&h| h == i)))
            };
            let Some(k) = moves.iter().position(|&(i, _, e)| free(i, e, holder)) else {
                // Running jobs that would take each other's GPUs: no order lets the host
                // accept them. The first waits a round, freeing its GPUs for the others.
                let Some(k) = moves.iter().position(|&(i, _, _)| !jobs[i].is_queued()) else {
                    // Only queued jobs blocked: nothing to free this round; they wait for the next.
                    break;
                };
                let (i, _, _) = moves.remove(k);
                d.push(Action::preempt(jobs[i].id()).because(format!("{name}: its new GPUs are held; next round")));
                holder.retain(|_, h| *h != i);
                out.insert(i);
                continue;
            };
            let (i, t, entries) = moves.remove(k);
            holder.retain(|_, h| *h != i);
            for (n, gpus) in entries {
                for &g in gpus {
                    holder.insert((*n, g), i);
                }
            }
            let gpu = pools[t].kind.name();
            if jobs[i].is_queued() {
                d.push(Action::place_on(jobs[i].id(), entries, false).because(format!("{name}: scheduled on {gpu}")));
            } else {
                d.push(Action::resize(jobs[i].id(), entries, None).because(format!("{name}: moves to {gpu}")));
            }
            runs.insert(i, t);
        }
        runs
    }

    /// Counts this round in the job time and the cluster time of the types where jobs ran.
    fn count_rounds(&mut self, jobs: &[Job], pools: &[Pool], runs: &BTreeMap<usize, usize>) {
        let interval = self.config.interval_s;
        // The bookkeeping: each job that runs has a round more on its type, and so does the type.
        for (&i, &t) in runs {
            let gpu = pools[t].kind.name();
            let ledger = self.state.jobs.entry(jobs[i].id().0).or_default();
            *ledger.time_s.entry(gpu.into()).or_insert(interval / 2.0) += interval;
            *self.state.cluster_time_s.entry(gpu.into()).or_insert(interval / 2.0) += interval;
        }
    }

    /// Tells each queued job that does not run this round why: no type large enough, no fit
    /// as its replicas allow, or its share ranks below those that run.
    fn tell_pending(
        jobs: &[Job],
        problem: &Problem,
        x: &[Vec<f64>],
        plans: &[Plan],
        runs: &BTreeMap<usize, usize>,
        out: &BTreeSet<usize>,
        d: &mut Decision,
    ) {
        let name = A::NAME;
        for (i, job) in jobs.iter().enumerate().filter(|(i, j)| j.is_queued() && !runs.contains_key(i)) {
            let n = job.gpus_asked();
            let why = if problem.jobs[i].throughput.iter().all(|&thr| thr <= 0.0) {
                format!("{name}: no GPU type here has {n} GPUs")
            } else if plans[i] == Plan::Unplaced || out.contains(&i) {
                format!("{name}: its {n} GPUs do not fit as its replicas allow this round")
            } else {
                // A whole percentage: an integer is written far faster than a rounded float.
                let share = (x[i].iter().sum::<f64>() * 100.0).round().clamp(0.0, 100.0) as u32;
                format!("{name}: not this round; its share of {share} % ranks below the jobs that run")
            };
            d.pending(job.id(), why);
        }
    }
}

impl<A: Allocation> Policy for RoundBased<A> {
    type Config = Config;

    const PLACES: bool = true;

    fn new(config: Config) -> Result<Self, PolicyError> {
        if !(config.interval_s >= 0.0 && config.interval_s.is_finite()) {
            return Err(PolicyError::InvalidConfig(format!(
                "{}: interval-s = {}: give seconds, 0 or more (Gavel's rounds are 360)",
                A::NAME,
                config.interval_s
            )));
        }
        Ok(RoundBased { config, state: State::default(), allocation: PhantomData })
    }

    fn decide(&mut self, s: &Snapshot) -> Result<Decision, PolicyError> {
        let mut d = Decision::new();
        let now = s.time().0;
        // Forget the jobs that ended; learn the batch sizes of those that run.
        let live: BTreeSet<u32> = s.jobs().chain(s.queue()).map(|j| j.id().0).collect();
        self.state.jobs.retain(|h, _| live.contains(h));
        for job in s.jobs().filter(|j| j.batch_size() > 0) {
            self.state.jobs.entry(job.id().0).or_default().batch = job.batch_size();
        }
        if !self.state.rounds.due(s.time(), Seconds(self.config.interval_s), &mut d) {
            return Ok(d);
        }
        self.round(s, now, &mut d);
        sched::first_fit_cpu_jobs(s, &mut d, A::NAME, |_| true);
        if self.config.interval_s > 0.0 {
            d.call_again_in(Seconds(self.config.interval_s));
        }
        Ok(d)
    }

    keep_state!(state);
}
