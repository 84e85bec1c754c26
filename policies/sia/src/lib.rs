//! Sia: every round, give each job the GPU type and count of the best goodput the cluster can
//! afford, weighing every job alike (Subramanya et al., "Sia: Heterogeneity-aware,
//! goodput-optimized ML-cluster scheduling", SOSP 2023).
//!
//! Each round (`interval-s`, 60 s):
//! 1. **Configurations.** Per GPU type among the nodes that take work: 1, 2 and 4 GPUs, a whole
//!    node, then whole nodes up to all of them. A job may take the ones among its `scaling`
//!    counts, up to twice the most GPUs it has run on (at least one): Sia grows a job step by
//!    step, as its throughput model is only trusted near what was seen. A rigid job has one
//!    count, its own, offered on every type with as many GPUs.
//! 2. **Goodput** of a job on each configuration: progress per second at the batch size of
//!    highest goodput for those GPUs (`wasmsched_goodput`: the measured step times of the type
//!    and the statistical efficiency at the job's epoch). A rigid job keeps its batch size.
//! 3. **Scores.** Each job's goodputs are divided by its lowest (its worst configuration
//!    scores 1); every configuration but its current one is multiplied by the restart factor
//!    `max(age − restarts × penalty, 0) / (age + penalty)`; each score is raised to `p`
//!    (−0.5), so that a job gains most from its first GPUs and no job is starved.
//! 4. **Allocation**: the configurations that minimise the sum of the scores plus `lambda`
//!    (1.1) for every job left without one, within each type's GPUs. A job still restoring from
//!    its last change keeps its configuration. This is Sia's integer program; we solve it with
//!    microlp's branch and bound (pure Rust, inside the sandbox), started from a greedy answer
//!    and stopped within 0.01 % of the optimum, as Sia's solver is, or after 2,000 nodes.
//! 5. **Placement.** A job whose type and count are unchanged keeps its GPUs; the others take
//!    whole free nodes first, then the nodes with the most free GPUs. It places queued jobs,
//!    resizes running ones, and preempts those left without GPUs; it says why a job waits.
//!
//! Reads: each node's GPU type and GPUs and whether it takes work; each job's model, scaling,
//! GPUs, batch size, epoch and arrival. A job whose model has no measurements, or whose node
//! type has none, is planned as the T4s of its model, or placed first fit when it has no model.
//! With `colocate`: also each GPU's holders and memory in use and each job's GPU share.
//!
//! Where we differ from the artifact (siasosp23/artifacts): its goodput for a GPU type comes
//! from a throughput model fitted to what the job has run, bootstrapped from profiles of one
//! GPU of each type; ours reads the measured tables directly (as if profiling were exact). Its
//! restart penalties per model are kept (`penalty_s`). Its placement is rebuilt each round from
//! empty nodes; ours keeps jobs whose configuration is unchanged where they are.
//!
//! **Co-location** (`colocate = true`; off: Sia as published). After the round, a queued job
//! it leaves waiting that can run on one GPU joins a GPU that one training job holds, where
//! the two run well together: `colocate::speeds` (Gavel's measured pair speeds, the means
//! over the two models' families) give the guest's speed `s_g` and the host's `s_h`; a host
//! on `n` GPUs runs at its slowest GPU's pace, so the pair gains `s_g − n · (pace − min(pace,
//! s_h))` of a GPU, and must gain at least `colocate-min-gain − 1`; the best GPU first, at
//! most two jobs a GPU. The two jobs' GPU memory, learnt from each GPU's memory in use while a
//! job holds it alone (per job, else the most seen for its model), must fit in
//! `colocate-memory-fraction` of the GPU's. Every job on a shared GPU gets a share of 100 %,
//! so that the two share it in space at their measured speeds rather than in time slices. A
//! guest is planned in the next round as if queued: given a configuration, it moves to GPUs of
//! its own; otherwise it keeps its GPU unless the plan needs it for another job.
//!
//! Config (kebab-case keys, all optional): `interval-s` (60), `p` (−0.5), `lambda` (1.1),
//! `colocate` (false), `colocate-min-gain` (1.5; above 0, at most 2), `colocate-memory-fraction`
//! (0.9; above 0, at most 1). A value out of range is refused at load, with what to write.

use std::collections::BTreeMap;

mod colocate;

use microlp::{ComparisonOp, OptimizationDirection, Problem, SolveOptions, Variable};
use serde::{Deserialize, Serialize};
use wasmsched_goodput::goodput::{best_config, speed, split};
use wasmsched_goodput::{GpuType, Model, packed};
use wasmsched_sdk::prelude::*;
use wasmsched_sdk::sched::{Entries, Holders, Kept, Pick, Pieces, Pool, Spill, Step, merge};

/// Sia's constants.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Seconds between rounds.
    pub interval_s: f64,
    /// The power scores are raised to (negative: a job's first GPUs count most).
    pub p: f64,
    /// What leaving a job without GPUs costs the objective.
    pub lambda: f64,
    /// Put a job that would wait onto a GPU held by a one-GPU job it runs well beside, both
    /// with a GPU share (false: Sia as published).
    pub colocate: bool,
    /// With `colocate`: the least the two jobs' measured speeds beside each other (each a
    /// fraction of alone) must add up to.
    pub colocate_min_gain: f64,
    /// With `colocate`: the fraction of a GPU's memory the two jobs may fill.
    pub colocate_memory_fraction: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            interval_s: 60.0,
            p: -0.5,
            lambda: 1.1,
            colocate: false,
            colocate_min_gain: 1.5,
            colocate_memory_fraction: 0.9,
        }
    }
}

/// What Sia remembers of a job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Ledger {
    /// Times its configuration changed after its first start.
    restarts: u32,
    /// The most GPUs it has run on.
    most_gpus: u32,
    /// Its configuration (type index, GPUs) and since when, while it runs.
    config: Option<(usize, u32, f64)>,
    /// Whether it runs as a guest on a GPU another job holds (`colocate`).
    #[serde(default)]
    guest: bool,
    /// The most GPU memory one of its GPUs showed in use while it held it alone.
    #[serde(default)]
    memory_bytes: u64,
}

impl Ledger {
    /// It starts or moves to `gpus` GPUs of pool `pool` at `now`.
    fn runs(&mut self, pool: usize, gpus: u32, now: f64) {
        self.most_gpus = self.most_gpus.max(gpus);
        self.config = Some((pool, gpus, now));
        self.guest = false;
    }
}

/// What survives a hot swap.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct State {
    rounds: Rounds,
    jobs: BTreeMap<u32, Ledger>,
    /// Per model, the most GPU memory a job of it was seen to take on a GPU alone (`colocate`).
    #[serde(default)]
    footprints: BTreeMap<String, u64>,
}

/// The Sia policy.
pub struct Sia {
    config: Config,
    state: State,
}

/// One GPU type's nodes that take work (a type without measurements is planned as T4s).
type TypePool = Pool<GpuType>;

/// What a job's current configuration gains over another of the same rounded score.
const STAY_BONUS: f64 = 0.01;

/// Sia's restart penalty per model, in seconds (its policy's, not its simulator's delays).
fn penalty_s(model: Option<Model>) -> f64 {
    match model {
        Some(Model::Deepspeech2) => 25.0,
        Some(Model::Imagenet) => 250.0,
        Some(Model::Cifar10) => 30.0,
        Some(Model::Bert) => 120.0,
        Some(Model::Yolov3) => 45.0,
        _ => 30.0,
    }
}

/// The GPU counts Sia offers on a type: 1, 2, 4, a whole node, then whole nodes.
fn counts(pool: &TypePool) -> Vec<u32> {
    let mut c: Vec<u32> = [1, 2, 4, pool.per_node].into_iter().filter(|&n| n <= pool.per_node).collect();
    c.extend((2..=pool.nodes.len() as u32).map(|k| k * pool.per_node));
    c.sort_unstable();
    c.dedup();
    c.retain(|&n| n <= pool.total);
    c
}

/// One choice for one job: a type, a count, and its value (lambda less its score).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Choice {
    pool: usize,
    gpus: u32,
    value: f64,
}

/// The allocation problem: per job its choices (and whether it is locked to one), per type its
/// GPUs. Returns per job the index of its choice, or None: the integer program Sia solves,
/// maximise the sum of the values of the picks, at most one pick per job, within each type's
/// GPUs, with microlp's branch and bound. It starts from [`greedy`]'s answer and stops at
/// `NODES` branch-and-bound nodes or within 0.01 % of the optimum (Sia's own gap), so a round's
/// cost is bounded and the same on every machine; should the solver fail, the greedy answer
/// stands.
fn allocate(choices: &[Vec<Choice>], locked: &[Option<usize>], capacity: &[u32]) -> Vec<Option<usize>> {
    /// Branch-and-bound nodes one round may search.
    const NODES: u64 = 2_000;
    let start = greedy(choices, locked, capacity);
    let mut problem = Problem::new(OptimizationDirection::Maximize);
    let mut vars: Vec<Vec<Option<Variable>>> = Vec::with_capacity(choices.len());
    let mut per_type: Vec<Vec<(Variable, f64)>> = vec![Vec::new(); capacity.len()];
    let mut hint = Vec::new();
    for (j, row) in choices.iter().enumerate() {
        let mut vs = Vec::with_capacity(row.len());
        let mut one = Vec::new();
        for (k, c) in row.iter().enumerate() {
            // A choice of no value is never worth a job's one pick (a locked one is kept).
            if locked[j] != Some(k) && (c.value <= 0.0 || locked[j].is_some()) {
                vs.push(None);
                continue;
            }
            let least = i32::from(locked[j] == Some(k));
            let v = problem.add_integer_var(c.value, (least, 1));
            per_type[c.pool].push((v, f64::from(c.gpus)));
            one.push((v, 1.0));
            hint.push((v, if start[j] == Some(k) { 1.0 } else { 0.0 }));
            vs.push(Some(v));
        }
        if one.len() > 1 {
            problem.add_constraint(one.as_slice(), ComparisonOp::Le, 1.0);
        }
        vars.push(vs);
    }
    for (t, terms) in per_type.iter().enumerate() {
        if !terms.is_empty() {
            problem.add_constraint(terms.as_slice(), ComparisonOp::Le, f64::from(capacity[t]));
        }
    }
    let mut options = SolveOptions::default();
    options.node_limit = Some(NODES);
    options.mip_gap = 1e-4;
    options.warm_start = Some(hint);
    let Ok(Some(solution)) = problem.solve_with(options).map(|o| o.solution().cloned()) else {
        return start;
    };
    let pick: Vec<Option<usize>> =
        vars.iter().map(|vs| vs.iter().position(|v| v.is_some_and(|v| solution.var_value(v) > 0.5))).collect();
    // The rounded answer is held to the capacities once more: never trust a tolerance.
    let used = usage(choices, capacity.len(), &pick);
    if used.iter().zip(capacity).any(|(u, c)| *u > u64::from(*c)) || total(choices, &pick) < total(choices, &start) {
        return start;
    }
    pick
}

/// The GPUs of each of `types` types that `pick` takes.
fn usage(choices: &[Vec<Choice>], types: usize, pick: &[Option<usize>]) -> Vec<u64> {
    let mut used = vec![0u64; types];
    for (j, p) in pick.iter().enumerate() {
        if let Some(k) = p {
            used[choices[j][*k].pool] += u64::from(choices[j][*k].gpus);
        }
    }
    used
}

/// The sum of the values of `pick`'s choices: the objective Sia maximises.
fn total(choices: &[Vec<Choice>], pick: &[Option<usize>]) -> f64 {
    pick.iter().enumerate().filter_map(|(j, p)| p.map(|k| choices[j][k].value)).sum()
}

/// A quick answer to [`allocate`]'s problem: Lagrange prices on the types' GPUs, each job
/// taking its best choice at those prices, then repaired (the picks of least value per GPU
/// dropped from an overfull type) and filled greedily; the best of up to 60 price rounds.
fn greedy(choices: &[Vec<Choice>], locked: &[Option<usize>], capacity: &[u32]) -> Vec<Option<usize>> {
    let types = capacity.len();
    // The fill's order: jobs by their best choice's value, highest first, ties by index (a
    // stable sort). Prices never enter it, so it is sorted once; each repair walks it and
    // skips the picked jobs, which is the order a sort of the unpicked ones would give.
    let mut by_value: Vec<(usize, f64)> = choices
        .iter()
        .enumerate()
        .map(|(j, row)| (j, row.iter().fold(0.0, |m, c| if c.value > m { c.value } else { m })))
        .collect();
    by_value.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut price = vec![0.0f64; types];
    let mut best: Option<(f64, Vec<Option<usize>>)> = None;
    for round in 0..60 {
        let pick = priced_picks(choices, locked, &price);
        let used = usage(choices, types, &pick);
        let repaired = repair(choices, locked, capacity, &by_value, pick);
        let value = total(choices, &repaired);
        if best.as_ref().is_none_or(|(v, _)| value > *v) {
            best = Some((value, repaired));
        }
        if !reprice(&mut price, &used, capacity, round) {
            break;
        }
    }
    best.map_or_else(|| vec![None; choices.len()], |(_, pick)| pick)
}

/// Each job's best choice less its GPUs' cost at the types' prices, if above zero (a locked job keeps its own).
fn priced_picks(choices: &[Vec<Choice>], locked: &[Option<usize>], price: &[f64]) -> Vec<Option<usize>> {
    (0..choices.len())
        .map(|j| {
            if let Some(k) = locked[j] {
                return Some(k);
            }
            let net = |c: &Choice| c.value - price[c.pool] * f64::from(c.gpus);
            (0..choices[j].len())
                .filter(|&k| net(&choices[j][k]) > 0.0)
                .max_by(|&a, &b| net(&choices[j][a]).total_cmp(&net(&choices[j][b])))
        })
        .collect()
}

/// `pick` held within the types' GPUs, then filled greedily in the order `by_value`.
fn repair(
    choices: &[Vec<Choice>],
    locked: &[Option<usize>],
    capacity: &[u32],
    by_value: &[(usize, f64)],
    mut pick: Vec<Option<usize>>,
) -> Vec<Option<usize>> {
    // Repair: drop the picks of least value per GPU on an overfull type (never a locked
    // one), then fill what is left greedily with each job's best affordable choice.
    let types = capacity.len();
    let mut used = usage(choices, types, &pick);
    for t in 0..types {
        while used[t] > u64::from(capacity[t]) {
            let worst = (0..pick.len())
                .filter(|&j| locked[j].is_none())
                .filter_map(|j| pick[j].map(|k| (j, choices[j][k])))
                .filter(|(_, c)| c.pool == t)
                .min_by(|a, b| (a.1.value / f64::from(a.1.gpus)).total_cmp(&(b.1.value / f64::from(b.1.gpus))));
            let Some((j, c)) = worst else { break };
            pick[j] = None;
            used[t] -= u64::from(c.gpus);
        }
    }
    for &(j, _) in by_value {
        if pick[j].is_some() {
            continue;
        }
        let fits = |c: &Choice| used[c.pool] + u64::from(c.gpus) <= u64::from(capacity[c.pool]);
        let best = (0..choices[j].len())
            .filter(|&k| choices[j][k].value > 0.0 && fits(&choices[j][k]))
            .max_by(|&a, &b| choices[j][a].value.total_cmp(&choices[j][b].value));
        if let Some(k) = best {
            used[choices[j][k].pool] += u64::from(choices[j][k].gpus);
            pick[j] = Some(k);
        }
    }
    pick
}

/// Moves the types' prices after price round `round`, whose picks used `used`; whether any moved.
fn reprice(price: &mut [f64], used: &[u64], capacity: &[u32], round: u32) -> bool {
    // Raise the price of an overfull type, lower that of a type with room.
    let step = 0.5 / f64::from(round + 1);
    let mut moved = false;
    for t in 0..capacity.len() {
        let excess = (used[t] as f64 - f64::from(capacity[t])) / f64::from(capacity[t].max(1));
        let next = (price[t] + step * excess).max(0.0);
        moved |= (next - price[t]).abs() > 1e-9;
        price[t] = next;
    }
    moved
}

impl Sia {
    /// The node pools by GPU type, of the nodes that take work and have GPUs.
    fn pools(s: &Snapshot) -> Vec<TypePool> {
        Pool::by_kind(s, |n| GpuType::parse(n.gpu_type()).unwrap_or_default())
    }

    /// Job `job`'s choices on `pools` at `now`, and the index of its current one.
    fn choices(&self, job: &Job, pools: &[TypePool], offers: &[Vec<u32>], now: f64) -> (Vec<Choice>, Option<usize>) {
        let model = Model::parse(job.model());
        let ledger = self.state.jobs.get(&job.id().0).cloned().unwrap_or_default();
        let allowed = &job.scaling().gpu_counts;
        let cap = (2 * ledger.most_gpus).max(1);
        let epoch = job.epoch() + 1;
        let mut goodputs: Vec<(usize, u32, f64)> = Vec::new();
        for (t, (pool, counts)) in pools.iter().zip(offers).enumerate() {
            // Sia's counts, and a rigid job's own (3 GPUs, say) where the type has as many.
            let own = job.gpus_asked();
            let extra = (!job.is_elastic() && own <= pool.total && !counts.contains(&own)).then_some(own);
            for n in counts.iter().copied().chain(extra) {
                let elastic_ok = job.is_elastic() && allowed.binary_search(&n).is_ok() && n <= cap;
                if !(elastic_ok || n == job.gpus_asked()) {
                    continue;
                }
                let shape = packed(n, pool.per_node);
                let g = match model {
                    // A job that has not run yet has no goodput model in Sia: one GPU of any
                    // type, all alike, until it has run.
                    _ if job.is_elastic() && ledger.most_gpus == 0 => {
                        if n == 1 {
                            1.0
                        } else {
                            continue;
                        }
                    }
                    Some(m) if job.is_elastic() => {
                        speed(m, pool.kind, best_config(m, pool.kind, &shape, epoch), &shape, epoch)
                    }
                    Some(m) => {
                        let batch = if job.batch_size() > 0 { job.batch_size() } else { m.default_batch_size() };
                        speed(m, pool.kind, split(m, pool.kind, batch, n), &shape, epoch)
                    }
                    // No measurements: every configuration alike, the fewer GPUs the better.
                    None => 1.0 / f64::from(n),
                };
                if g.is_finite() && g > 0.0 {
                    goodputs.push((t, n, g));
                }
            }
        }
        let lowest = goodputs.iter().map(|g| g.2).fold(f64::INFINITY, f64::min);
        // A guest is planned as if queued: whatever it is given is a start of its own.
        let current = ledger.config.filter(|_| !job.is_queued() && !ledger.guest).map(|(t, n, _)| (t, n));
        let age = (now - job.arrival().0).max(0.0);
        let penalty = penalty_s(model);
        let restart = (age - f64::from(ledger.restarts) * penalty).max(0.0) / (age + penalty);
        let mut out = Vec::with_capacity(goodputs.len());
        let mut index = None;
        for (t, n, g) in goodputs {
            let mut score = g / lowest;
            if current.is_some() && current != Some((t, n)) {
                score *= restart;
            }
            let a = if score > 0.0 { (score.powf(self.config.p) * 100.0).round() / 100.0 } else { 3000.0 };
            if current == Some((t, n)) {
                index = Some(out.len());
            }
            // Its current configuration wins a tie (the scores are rounded, and a move costs a
            // restart the scores only partly see).
            let stay = if current == Some((t, n)) { STAY_BONUS } else { 0.0 };
            out.push(Choice { pool: t, gpus: n, value: self.config.lambda - a.min(3000.0) + stay });
        }
        (out, index)
    }

    /// One round; whether it put a job beside another on a GPU.
    fn round(&mut self, s: &Snapshot, now: f64, d: &mut Decision) -> bool {
        let pools = Self::pools(s);
        let capacity: Vec<u32> = pools.iter().map(|p| p.total).collect();
        let jobs: Vec<Job> = s.jobs().chain(s.queue()).filter(|j| j.gpus_asked() > 0 || j.is_elastic()).collect();
        let offers: Vec<Vec<u32>> = pools.iter().map(counts).collect();
        let mut choices = Vec::with_capacity(jobs.len());
        let mut locked = Vec::with_capacity(jobs.len());
        for job in &jobs {
            let (c, current) = self.choices(job, &pools, &offers, now);
            let ledger = self.state.jobs.get(&job.id().0);
            let restoring = ledger.and_then(|l| l.config).is_some_and(|(_, _, since)| {
                let restore = Model::parse(job.model()).map_or(30.0, |m| m.restore_s());
                now - since < restore
            });
            locked.push(current.filter(|_| restoring));
            choices.push(c);
        }
        let pick = allocate(&choices, &locked, &capacity);
        self.place(s, &pools, &jobs, &choices, &pick, now, d)
    }

    /// Turn the allocation into actions: keep unchanged jobs' GPUs, place the rest.
    #[allow(clippy::too_many_arguments, reason = "one round's tables, passed once")]
    fn place(
        &mut self,
        s: &Snapshot,
        pools: &[TypePool],
        jobs: &[Job],
        choices: &[Vec<Choice>],
        pick: &[Option<usize>],
        now: f64,
        d: &mut Decision,
    ) -> bool {
        // Per node, which GPUs are taken in the plan.
        let mut taken = sched::FreeGpus::up(s);
        // Guests on others' GPUs (`colocate`): planned as if queued, they keep nothing.
        let guest: Vec<bool> = jobs
            .iter()
            .map(|job| !job.is_queued() && self.state.jobs.get(&job.id().0).is_some_and(|l| l.guest))
            .collect();
        // Jobs whose type and count stay keep their GPUs. The others go most GPUs first: whole
        // free nodes, then the fullest-free nodes; but first, every elastic job that stays on its
        // type keeps what it can of its own GPUs (growing or shrinking in place), so that jobs
        // seldom need each other's GPUs.
        let picks: Vec<Option<Pick>> = (0..jobs.len())
            .map(|j| pick[j].map(|k| Pick { pool: choices[j][k].pool, gpus: choices[j][k].gpus }))
            .collect();
        let Kept { kept, movers, own } = sched::keep(&mut taken, pools, jobs, &picks, |j| !guest[j]);
        let plan = Plan { s, pools, jobs, choices, pick, guest: &guest, kept: &kept };
        let (moves, mut unplaced) = plan.carve(&mut taken, movers, own);
        // Preempt running jobs left without GPUs, then resize and place in an order the host
        // accepts: each move once the GPUs it takes are free. A GPU may have two holders (a
        // guest beside its host).
        let mut holder = Holders::of(jobs);
        self.preempt_unplanned(&plan, &moves, &unplaced, &mut holder, d);
        self.land(&plan, &mut holder, moves, &mut unplaced, now, d);
        // A queued elastic job left out takes one free GPU where the plan left one: every GPU
        // the plan leaves idle is one the host's stall rule would hand out anyway.
        for f in sched::fill_idle(&mut taken, pools, jobs, &mut holder, unplaced.clone(), Spill::MostFree) {
            d.push(Action::place_on(jobs[f.job].id(), &f.entries, false).because("sia: a GPU the plan left idle"));
            self.state.jobs.entry(jobs[f.job].id().0).or_default().runs(f.pool, 1, now);
            unplaced.retain(|&k| k != f.job);
        }
        let colocated = if self.config.colocate { self.colocate(&plan, &mut holder, now, d) } else { Vec::new() };
        self.settle(&plan, &unplaced, &colocated, now, d);
        !colocated.is_empty()
    }

    /// Preempt the running jobs the plan leaves without GPUs, but a guest whose GPU stays its host's.
    fn preempt_unplanned(
        &mut self,
        plan: &Plan,
        moves: &[(usize, Entries)],
        unplaced: &[usize],
        holder: &mut Holders,
        d: &mut Decision,
    ) {
        let (jobs, pick, kept) = (plan.jobs, plan.pick, plan.kept);
        // Who the plan gives each GPU: the jobs that keep theirs and the moves.
        let mut claimed: BTreeMap<(NodeId, u32), usize> = BTreeMap::new();
        for (j, job) in jobs.iter().enumerate().filter(|(j, _)| kept[*j]) {
            for g in job.gpus() {
                claimed.insert((g.node, g.index), j);
            }
        }
        for (j, entries) in moves {
            for (n, gpus) in entries {
                for &i in gpus {
                    claimed.insert((*n, i), *j);
                }
            }
        }
        for (j, job) in jobs.iter().enumerate() {
            if !job.is_queued() && (pick[j].is_none() || unplaced.contains(&j)) {
                // A guest the plan gives nothing stays where it is while its GPU goes to no one
                // but the host it shares it with now, unchanged.
                let stays = plan.guest[j]
                    && job.gpus().iter().all(|g| {
                        claimed
                            .get(&(g.node, g.index))
                            .is_none_or(|&h| kept[h] && holder.on(g.node, g.index).contains(&h))
                    });
                if stays {
                    continue;
                }
                d.push(Action::preempt(job.id()).because("sia: no configuration this round"));
                holder.release(j);
                self.state.jobs.entry(job.id().0).or_default().config = None;
            }
        }
    }

    /// Resize and place the moves in an order the host accepts; a move that must wait joins `unplaced`.
    fn land(
        &mut self,
        plan: &Plan,
        holder: &mut Holders,
        moves: Vec<(usize, Entries)>,
        unplaced: &mut Vec<usize>,
        now: f64,
        d: &mut Decision,
    ) {
        let jobs = plan.jobs;
        for step in sched::order_moves(jobs, holder, moves) {
            match step {
                Step::Land { job: j, entries } => {
                    let job = &jobs[j];
                    let c = plan.choice(j);
                    let ledger = self.state.jobs.entry(job.id().0).or_default();
                    if job.is_queued() {
                        d.push(Action::place_on(job.id(), &entries, false).because("sia: goodput-optimal allocation"));
                    } else {
                        d.push(Action::resize(job.id(), &entries, None).because("sia: goodput-optimal allocation"));
                        ledger.restarts += 1;
                    }
                    ledger.runs(c.pool, c.gpus, now);
                }
                Step::Preempt { job: j } => {
                    d.push(
                        Action::preempt(jobs[j].id())
                            .because("sia: its new GPUs are another's, which moves to its own"),
                    );
                    self.state.jobs.entry(jobs[j].id().0).or_default().config = None;
                }
                Step::Wait { job: j } => unplaced.push(j),
            }
        }
    }

    /// Remember the kept jobs' configurations, and say why each queued job left out waits.
    fn settle(&mut self, plan: &Plan, unplaced: &[usize], colocated: &[usize], now: f64, d: &mut Decision) {
        let (jobs, choices, pick) = (plan.jobs, plan.choices, plan.pick);
        for (j, job) in jobs.iter().enumerate() {
            if plan.kept[j] {
                let c = plan.choice(j);
                let ledger = self.state.jobs.entry(job.id().0).or_default();
                if ledger.config.is_none() {
                    ledger.config = Some((c.pool, c.gpus, now));
                }
                ledger.most_gpus = ledger.most_gpus.max(c.gpus);
            }
            if job.is_queued() && (pick[j].is_none() || unplaced.contains(&j)) && !colocated.contains(&j) {
                let why = if unplaced.contains(&j) {
                    "sia: its GPUs are split over nodes or held this round; next round".to_string()
                } else if choices[j].is_empty() {
                    format!("sia: no GPU type here runs it on {} GPUs", job.gpus_asked())
                } else {
                    let total: u32 = plan.pools.iter().map(|p| p.total).sum();
                    format!("sia: all {total} GPUs go to jobs that gain more from them this round")
                };
                d.pending(job.id(), why);
            }
        }
    }
}

/// One round's allocation as placement reads it.
struct Plan<'p, 's> {
    /// The round's snapshot.
    s: &'p Snapshot<'s>,
    /// The GPU types' pools.
    pools: &'p [TypePool],
    /// The jobs planned for.
    jobs: &'p [Job<'s>],
    /// Per job, its choices.
    choices: &'p [Vec<Choice>],
    /// Per job, the index of the choice the allocation picked, if any.
    pick: &'p [Option<usize>],
    /// Per job, whether it runs as a guest on another's GPU (`colocate`).
    guest: &'p [bool],
    /// Per job, whether it keeps its GPUs as they are.
    kept: &'p [bool],
}

impl Plan<'_, '_> {
    /// Job `j`'s picked choice.
    fn choice(&self, j: usize) -> Choice {
        self.choices[j][self.pick[j].expect("picked")]
    }

    /// Carve the movers' GPUs from `taken`: the moves, and the movers that found no room.
    fn carve(
        &self,
        taken: &mut sched::FreeGpus,
        movers: Vec<usize>,
        mut own: BTreeMap<usize, Entries>,
    ) -> (Vec<(usize, Entries)>, Vec<usize>) {
        let (pools, jobs, pick) = (self.pools, self.jobs, self.pick);
        let mut moves: Vec<(usize, Entries)> = Vec::new();
        let mut unplaced = Vec::new();
        // A guest the plan gives nothing keeps its GPU while the others fit elsewhere: moving
        // it costs a restart.
        let mut reserved: Entries = Vec::new();
        for (_, job) in jobs.iter().enumerate().filter(|(j, _)| self.guest[*j] && pick[*j].is_none()) {
            for g in job.gpus() {
                if taken.take_gpu(*g) {
                    merge(&mut reserved, vec![(g.node, vec![g.index])]);
                }
            }
        }
        for j in movers {
            let c = self.choice(j);
            let job = &jobs[j];
            let mine = own.remove(&j).unwrap_or_default();
            let kept_own: u32 = mine.iter().map(|(_, g)| g.len() as u32).sum();
            let (nodes, pieces) = (&pools[c.pool].nodes, Pieces::of(job, c.gpus));
            let mut more = taken.carve(nodes, c.gpus - kept_own, pieces, Spill::MostFree);
            if more.is_none() && !reserved.is_empty() {
                taken.give_back(&std::mem::take(&mut reserved));
                more = taken.carve(nodes, c.gpus - kept_own, pieces, Spill::MostFree);
            }
            let Some(more) = more else {
                taken.give_back(&mine);
                unplaced.push(j);
                continue;
            };
            let mut entries = mine;
            merge(&mut entries, more);
            moves.push((j, entries));
        }
        (moves, unplaced)
    }
}

impl Policy for Sia {
    type Config = Config;

    const PLACES: bool = true;

    fn new(config: Config) -> Result<Self, PolicyError> {
        if !(config.interval_s >= 0.0 && config.interval_s.is_finite()) {
            return Err(PolicyError::InvalidConfig(format!(
                "interval-s = {}: give seconds, 0 or more",
                config.interval_s
            )));
        }
        if !(config.p.is_finite() && config.p != 0.0) {
            return Err(PolicyError::InvalidConfig(format!("p = {}: give a non-zero power, e.g. -0.5", config.p)));
        }
        if !(config.lambda.is_finite() && config.lambda > 0.0) {
            return Err(PolicyError::InvalidConfig(format!(
                "lambda = {}: give a positive cost, e.g. 1.1",
                config.lambda
            )));
        }
        // Each job's speed beside the other is a fraction of alone: the pair adds up to 2 at most.
        let gain = config.colocate_min_gain;
        if !(gain.is_finite() && gain > 0.0 && gain <= 2.0) {
            return Err(PolicyError::InvalidConfig(format!(
                "colocate-min-gain = {gain}: give the least the two jobs' speeds beside each other (each a fraction \
                 of alone) must add up to, above 0 and at most 2, e.g. 1.5"
            )));
        }
        let fraction = config.colocate_memory_fraction;
        if !(fraction.is_finite() && fraction > 0.0 && fraction <= 1.0) {
            return Err(PolicyError::InvalidConfig(format!(
                "colocate-memory-fraction = {fraction}: give the fraction of a GPU's memory two jobs may fill, above \
                 0 and at most 1, e.g. 0.9"
            )));
        }
        Ok(Sia { config, state: State::default() })
    }

    fn decide(&mut self, s: &Snapshot) -> Result<Decision, PolicyError> {
        let mut d = Decision::new();
        let now = s.time().0;
        // Forget jobs that ended.
        let live: std::collections::BTreeSet<u32> = s.jobs().chain(s.queue()).map(|j| j.id().0).collect();
        self.state.jobs.retain(|h, _| live.contains(h));
        if self.config.colocate {
            self.tend_shared_gpus(s, &mut d);
        }
        if !self.state.rounds.due(s.time(), Seconds(self.config.interval_s), &mut d) {
            return Ok(d);
        }
        let shared = self.round(s, now, &mut d);
        sched::first_fit_cpu_jobs(s, &mut d, "sia", |j| !j.is_elastic());
        if self.config.interval_s > 0.0 {
            d.call_again_in(Seconds(self.config.interval_s));
        }
        if shared {
            // The guests' shares are set once they run: soon, not a round later.
            d.call_again_in(Seconds(5.0));
        }
        Ok(d)
    }

    keep_state!(state);
}

export_policy!(Sia);

#[cfg(test)]
mod tests;
