//! A/B tests of policies on one cluster: a **switchback** design and its estimators.
//!
//! The cluster's time is cut into blocks (`block`, 30 minutes unless told). The blocks go in
//! groups of one block per arm, each group in its own random order (drawn from `seed`), and
//! in each block one arm's policy is the active one: the others are asked as shadows, so that
//! each keeps its view of the cluster current and can take over at the next block's first
//! tick, as a hot reload does. The first `burn-in` of a block (5 minutes unless told) is left
//! out of every figure: the jobs then still carry the last arm's decisions.
//!
//! Arms that share a cluster in turn interfere: a job that arrives late in an A block waits
//! and runs mostly under B. [`Ledger`] keeps, per group and arm, over the time past burn-in:
//! - **Little's law**: the jobs in the system and in the queue integrated over time, and the
//!   arrivals. An arm's mean time in the system is `∫N dt / arrivals`, its mean wait
//!   `∫Q dt / arrivals`; neither waits for a job to end, so no job that outlives the run is
//!   left out (after Jia, Johari, Si and Zheng, who build A/B estimators for scheduling
//!   policies on Little's law);
//! - **the naive estimator**: the mean JCT of the jobs that arrived in the arm's blocks and
//!   have ended, which carries the other arms' influence and leaves out the jobs still running;
//! - completions per hour and GPU utilisation, over the arm's time.
//!
//! Every figure is an arm's against the first arm's (the baseline), as a change; its 95 %
//! interval is a bootstrap over the groups ([`crate::stats::bootstrap`]), each group holding
//! one block of every arm. How biased each estimator is, and how often its interval holds the
//! truth, is measured on the simulator against separate runs of each arm
//! (`wasmsched abtest --truth`, `docs/experiments.md`).
//!
//! A **split** runs the arms side by side instead: every job belongs to one arm, by a hash of
//! its name or of its tenant (with `seed`), and each arm's policy orders and places its own
//! queue on the shared cluster, seeing every running job (the other arms' hold their GPUs)
//! but only its own queued ones ([`World::without_queued`]); an action on another arm's job is
//! refused. The figures are the same, each arm's over its own jobs; time is still cut into
//! blocks, every block a group in which every arm counts (batch means for the intervals:
//! resampling the jobs instead, which ignores that one arm's jobs queue behind each other,
//! covered far less often on the simulator), and only the experiment's first `burn-in` is left
//! out. The arms compete
//! for the same GPUs, so a split is biased too: an arm that holds GPUs longer slows the other
//! arm's jobs as well as its own.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use wasmsched_core::bindings::wit;
use wasmsched_core::world::{JobId, NodeId, World};

use crate::stats;

/// `[experiment]`: two or more policies against each other, in turn.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ExperimentConfig {
    /// Its name, in the status, the metrics and the audit log.
    #[serde(default = "default_name")]
    pub name: String,
    /// The policies, by name; the first is the baseline every other is measured against.
    pub arms: Vec<String>,
    /// How the arms share the cluster: `switchback` (in turn) or `split` (side by side).
    #[serde(default)]
    pub design: Design,
    /// In a split, what a job's arm is drawn from: its `name` or its `tenant`.
    #[serde(default)]
    pub assign: Assign,
    /// In a split, each arm's own nodes by name, in the order of `arms`: an arm places only
    /// there, and the arms no longer compete for GPUs (each pool a smaller cluster). None:
    /// every arm on every node.
    #[serde(default)]
    pub pools: Vec<Vec<String>>,
    /// How long each block runs one arm.
    #[serde(default = "default_block", deserialize_with = "wasmsched_core::units::duration")]
    pub block: Duration,
    /// The start of each block left out of every figure.
    #[serde(default = "default_burn_in", deserialize_with = "wasmsched_core::units::duration")]
    pub burn_in: Duration,
    /// Draws the order of the arms in each group of blocks.
    #[serde(default)]
    pub seed: u64,
    /// Conclude after this many groups (one block of every arm each); none: run until stopped.
    #[serde(default)]
    pub groups: Option<u64>,
    /// Conclude early, once at least this many groups have run, when the interval of every
    /// arm's mean time in the system against the baseline leaves out no difference.
    #[serde(default)]
    pub conclude_after: Option<u64>,
}

fn default_name() -> String {
    "experiment".into()
}

fn default_block() -> Duration {
    Duration::from_secs(30 * 60)
}

fn default_burn_in() -> Duration {
    Duration::from_secs(5 * 60)
}

/// How the arms share the cluster.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Design {
    /// One arm at a time, in randomised blocks.
    #[default]
    Switchback,
    /// Every arm at once, each job on one arm ([`ExperimentConfig::arm_of`]).
    Split,
}

/// In a split, what decides a job's arm.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Assign {
    /// A hash of the job's name: jobs of one tenant on every arm.
    #[default]
    Name,
    /// A hash of the job's tenant: all of a tenant's jobs on one arm.
    Tenant,
}

impl std::str::FromStr for Design {
    type Err = String;

    fn from_str(s: &str) -> Result<Design, String> {
        match s {
            "switchback" => Ok(Design::Switchback),
            "split" => Ok(Design::Split),
            _ => Err(format!("no design {s:?}: switchback (the arms in turn) or split (side by side)")),
        }
    }
}

impl std::str::FromStr for Assign {
    type Err = String;

    fn from_str(s: &str) -> Result<Assign, String> {
        match s {
            "name" => Ok(Assign::Name),
            "tenant" => Ok(Assign::Tenant),
            _ => Err(format!("no assignment {s:?}: name (a hash of each job's name) or tenant (of its tenant)")),
        }
    }
}

/// Why an `[experiment]` cannot run.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ExperimentError {
    /// Fewer than two arms, or one twice.
    #[error("[experiment] arms = {0:?}: name two or more different policies; the first is the baseline")]
    Arms(Vec<String>),
    /// Pools that are not one per arm, or a node in two.
    #[error(
        "[experiment] pools = {0:?}: a split gives one list of node names per arm, in the order of arms, no node in two"
    )]
    Pools(Vec<Vec<String>>),
    /// A block too short to leave time past its burn-in.
    #[error("[experiment] block ({block}) must be longer than burn-in ({burn_in}) and at least a second")]
    Block {
        /// The block.
        block: String,
        /// The burn-in.
        burn_in: String,
    },
}

impl ExperimentConfig {
    /// A switchback of `arms` (the first the baseline) with the default block and burn-in.
    pub fn switchback(arms: Vec<String>, block: Duration, burn_in: Duration, seed: u64) -> ExperimentConfig {
        ExperimentConfig {
            name: default_name(),
            arms,
            design: Design::Switchback,
            assign: Assign::Name,
            pools: Vec::new(),
            block,
            burn_in,
            seed,
            groups: None,
            conclude_after: None,
        }
    }

    /// Refuses a config that cannot run, saying what to change.
    pub fn check(&self) -> Result<(), ExperimentError> {
        let mut names = self.arms.clone();
        names.sort();
        names.dedup();
        if self.arms.len() < 2 || names.len() != self.arms.len() {
            return Err(ExperimentError::Arms(self.arms.clone()));
        }
        if !self.pools.is_empty() {
            let mut nodes: Vec<&String> = self.pools.iter().flatten().collect();
            let all = nodes.len();
            nodes.sort();
            nodes.dedup();
            if !self.is_split() || self.pools.len() != self.arms.len() || nodes.len() != all {
                return Err(ExperimentError::Pools(self.pools.clone()));
            }
        }
        if self.block < Duration::from_secs(1) || self.burn_in >= self.block {
            return Err(ExperimentError::Block {
                block: humantime::format_duration(self.block).to_string(),
                burn_in: humantime::format_duration(self.burn_in).to_string(),
            });
        }
        Ok(())
    }

    /// A split of `arms` (the first the baseline), each job's arm drawn by `assign`; the
    /// intervals are over blocks of `block`, and the first `burn_in` is left out.
    pub fn split(arms: Vec<String>, assign: Assign, block: Duration, burn_in: Duration, seed: u64) -> ExperimentConfig {
        ExperimentConfig { design: Design::Split, assign, ..ExperimentConfig::switchback(arms, block, burn_in, seed) }
    }

    /// The block that holds time `ms`. In a split each block is a group of its own and its
    /// `arm` means nothing (every arm runs); only the experiment's first burn-in is cold.
    pub fn block_at(&self, ms: u64) -> Block {
        let block_ms = (self.block.as_millis() as u64).max(1);
        let index = ms / block_ms;
        let burn_in = self.burn_in.as_millis() as u64;
        if self.design == Design::Split {
            return Block { index, group: index, arm: 0, warm: ms >= burn_in };
        }
        let arms = self.arms.len().max(1) as u64;
        Block {
            index,
            group: index / arms,
            arm: order(self.arms.len().max(1), self.seed, index / arms)[(index % arms) as usize],
            warm: ms % block_ms >= burn_in,
        }
    }

    /// In a split, the arm `job` belongs to, by position in `arms`: a hash of its name or
    /// tenant with `seed`, so that it stays the same across restarts of the host.
    pub fn arm_of(&self, job: &wit::JobSpec) -> usize {
        let key = match self.assign {
            Assign::Name => &job.name,
            Assign::Tenant => &job.tenant,
        };
        stats::SplitMix::new(wasmsched_core::random::fnv1a(key.as_bytes()) ^ self.seed).below(self.arms.len().max(1))
    }

    /// Whether the arms run side by side.
    pub fn is_split(&self) -> bool {
        self.design == Design::Split
    }

    /// In a split, what arm `arm`'s policy sees of `world`: every running job, its own queued
    /// jobs only, and with pools, every node outside its pool down.
    pub fn view(&self, world: &World, arm: usize) -> World {
        let mut view = world.without_queued(|spec| self.arm_of(spec) != arm);
        if let Some(inside) = self.pool_of(world, arm) {
            for (n, _) in inside.iter().enumerate().filter(|(_, inside)| !**inside) {
                view.set_node_down(NodeId(n as u32), true);
            }
        }
        view
    }

    /// With pools, whether each of `world`'s nodes (in node order) is in arm `arm`'s pool.
    fn pool_of(&self, world: &World, arm: usize) -> Option<Vec<bool>> {
        let pool: std::collections::HashSet<&str> = self.pools.get(arm)?.iter().map(String::as_str).collect();
        Some(world.nodes().iter().map(|n| pool.contains(n.name.as_str())).collect())
    }
}

/// One block of a switchback.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Block {
    /// Its number from the cluster's time 0.
    pub index: u64,
    /// Its group: one block of every arm.
    pub group: u64,
    /// The arm that is active in it, by position in `arms`.
    pub arm: usize,
    /// Whether the time asked about is past the block's burn-in.
    pub warm: bool,
}

/// The arms in the random order of group `group`.
fn order(arms: usize, seed: u64, group: u64) -> Vec<usize> {
    let mut rng = stats::SplitMix::new(seed ^ group.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x00ab_7e57);
    let mut order: Vec<usize> = (0..arms).collect();
    for i in (1..arms).rev() {
        order.swap(i, rng.below(i + 1));
    }
    order
}

/// What one arm did in one group's block, past its burn-in.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Tally {
    /// Time counted, ms.
    pub time_ms: f64,
    /// Jobs in the system (queued or running) integrated over that time, job-ms.
    pub in_system_ms: f64,
    /// Jobs in the queue integrated over that time, job-ms.
    pub queued_ms: f64,
    /// Jobs that arrived in it.
    pub arrivals: u64,
    /// Jobs that ended in it.
    pub completions: u64,
    /// GPUs held integrated over the time, GPU-ms.
    pub gpu_held_ms: f64,
    /// GPUs present integrated over the time, GPU-ms.
    pub gpu_ms: f64,
    /// The JCTs, summed, of the jobs that arrived in it and have ended (the naive estimator).
    pub jct_sum_ms: f64,
    /// How many JCTs `jct_sum_ms` holds.
    pub jct_count: u64,
    /// Per tenant (the world's order), GPU-ms received and entitled while the arm's GPUs were
    /// contended ([`World::entitlements_on`]).
    pub tenant_received_ms: Vec<f64>,
    /// See `tenant_received_ms`.
    pub tenant_entitled_ms: Vec<f64>,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.time_ms += other.time_ms;
        self.in_system_ms += other.in_system_ms;
        self.queued_ms += other.queued_ms;
        self.arrivals += other.arrivals;
        self.completions += other.completions;
        self.gpu_held_ms += other.gpu_held_ms;
        self.gpu_ms += other.gpu_ms;
        self.jct_sum_ms += other.jct_sum_ms;
        self.jct_count += other.jct_count;
        add_each(&mut self.tenant_received_ms, &other.tenant_received_ms, 1.0);
        add_each(&mut self.tenant_entitled_ms, &other.tenant_entitled_ms, 1.0);
    }
}

/// `to[i] += from[i] * by`, `to` grown to fit.
fn add_each(to: &mut Vec<f64>, from: &[f64], by: f64) {
    if to.len() < from.len() {
        to.resize(from.len(), 0.0);
    }
    to.iter_mut().zip(from).for_each(|(t, f)| *t += f * by);
}

/// A figure an experiment estimates per arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Estimate {
    /// Mean time in the system by Little's law: ∫N dt / arrivals, seconds.
    LittleJct,
    /// Mean wait in the queue by Little's law: ∫Q dt / arrivals, seconds.
    LittleWait,
    /// Mean JCT of the arm's jobs that ended (a switchback: those that arrived in its blocks), seconds.
    NaiveJct,
    /// Jobs ended per hour of the arm's time.
    Throughput,
    /// GPUs held over GPUs present, over the arm's time.
    GpuUtilisation,
    /// Jain's index of the tenants' GPU-time received over entitled while contended (1:
    /// every tenant got its weighted fair share); with fewer than two tenants entitled, none.
    TenantFairness,
}

impl Estimate {
    /// Every estimate, in the order shown.
    pub const ALL: [Estimate; 6] = [
        Estimate::LittleJct,
        Estimate::NaiveJct,
        Estimate::LittleWait,
        Estimate::Throughput,
        Estimate::GpuUtilisation,
        Estimate::TenantFairness,
    ];

    /// What it is called in tables.
    pub fn label(self) -> &'static str {
        match self {
            Estimate::LittleJct => "mean JCT (Little's law)",
            Estimate::LittleWait => "mean wait (Little's law)",
            Estimate::NaiveJct => "mean JCT (naive: the arm's ended jobs)",
            Estimate::Throughput => "jobs ended per hour",
            Estimate::GpuUtilisation => "GPU utilisation",
            Estimate::TenantFairness => "tenants' fairness (Jain)",
        }
    }

    /// Its value over `t`; not finite when `t` cannot give it (no arrival, no time).
    pub fn of(self, t: &Tally) -> f64 {
        match self {
            Estimate::LittleJct => t.in_system_ms / t.arrivals as f64 / 1000.0,
            Estimate::LittleWait => t.queued_ms / t.arrivals as f64 / 1000.0,
            Estimate::NaiveJct => t.jct_sum_ms / t.jct_count as f64 / 1000.0,
            Estimate::Throughput => t.completions as f64 / (t.time_ms / 3_600_000.0),
            Estimate::GpuUtilisation => t.gpu_held_ms / t.gpu_ms,
            Estimate::TenantFairness => {
                let ratios: Vec<f64> = (t.tenant_received_ms.iter().zip(&t.tenant_entitled_ms))
                    .filter(|(_, e)| **e > 0.0)
                    .map(|(r, e)| r / e)
                    .collect();
                if ratios.len() < 2 { f64::NAN } else { wasmsched_core::tenants::jain(&ratios) }
            }
        }
    }
}

/// One arm's figure against the baseline's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Versus {
    /// The arm.
    pub arm: String,
    /// What is estimated.
    pub estimate: Estimate,
    /// The baseline's value.
    pub baseline: f64,
    /// The arm's value.
    pub value: f64,
    /// The arm's value over the baseline's, less 1.
    pub change: f64,
    /// The change's 95 % interval over the groups; None with fewer than two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<[f64; 2]>,
    /// Groups it rests on.
    pub groups: usize,
}

impl Versus {
    /// For a person: `tiresias: mean JCT (Little's law) -41.0 % (95 % CI -52.1 % … -30.2 %, 12 groups)`.
    pub fn sentence(&self) -> String {
        let pct = |x: f64| format!("{:+.1} %", 100.0 * x);
        let interval = match self.interval {
            Some([lo, hi]) => format!("95 % CI {} … {}, ", pct(lo), pct(hi)),
            None => String::new(),
        };
        format!("{}: {} {} ({interval}{} groups)", self.arm, self.estimate.label(), pct(self.change), self.groups)
    }
}

/// `value` against `base`, less 1; not a number unless both are finite and `base` is not 0 (an
/// arm with no arrival counted has no time in the system to compare).
fn relative(value: f64, base: f64) -> f64 {
    if value.is_finite() && base.is_finite() && base != 0.0 { value / base - 1.0 } else { f64::NAN }
}

/// What an experiment did, as the audit log keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExperimentEvent {
    /// The experiment's name.
    pub experiment: String,
    /// `block` (a block began), `concluded` or `stopped`.
    pub event: String,
    /// The block's number and group.
    pub block: u64,
    /// Its group.
    pub group: u64,
    /// The arm active from now (a block), or none (concluded, stopped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm: Option<String>,
    /// Why, for a conclusion or a stop.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// The experiment's figures as it runs: per group and arm, what happened past burn-in.
#[derive(Clone, Debug)]
pub struct Ledger {
    config: ExperimentConfig,
    /// Per group, one tally per arm.
    groups: BTreeMap<u64, Vec<Tally>>,
    /// The jobs in the world at the last observation, with the block they arrived in.
    present: BTreeMap<JobId, (u64, Block)>,
    /// The last observation: its time, per arm in a split (else one for the cluster) the jobs
    /// in the system, queued and the GPUs held, and the GPUs present.
    last: Option<(u64, Vec<[f64; 3]>, f64)>,
    /// The block that governs the time since the last observation.
    current: Option<Block>,
}

impl Ledger {
    /// An empty ledger for `config`.
    pub fn new(config: ExperimentConfig) -> Ledger {
        Ledger { config, groups: BTreeMap::new(), present: BTreeMap::new(), last: None, current: None }
    }

    /// Its config.
    pub fn config(&self) -> &ExperimentConfig {
        &self.config
    }

    /// The block that decides at `ms`: the arm to make active for the tick that starts then.
    pub fn decide_at(&mut self, ms: u64) -> Block {
        let block = self.config.block_at(ms);
        self.current = Some(block);
        block
    }

    /// The world as just observed: what happened since the last observation goes to the block
    /// that decided then (its arm's decisions governed that time); in a split, each job's
    /// share of it to the job's own arm.
    pub fn observe(&mut self, world: &World) {
        let now = world.time_ms();
        let split = self.config.is_split();
        // Jobs in the system, queued, and GPUs held: per arm in a split, else the cluster's.
        let mut counts = vec![[0.0_f64; 3]; if split { self.config.arms.len() } else { 1 }];
        for (spec, state) in world.all_jobs() {
            let c = &mut counts[if split { self.config.arm_of(spec) } else { 0 }];
            c[0] += 1.0;
            c[1] += f64::from(u8::from(!state.is_running()));
            c[2] += state.gpus.len() as f64;
        }
        let gpus = world.gpu_count() as f64;
        if let (Some(block), Some((then, before, g0))) = (self.current, self.last.take())
            && now > then
            && block.warm
        {
            let dt = (now - then) as f64;
            for (k, (c0, c)) in before.iter().zip(&counts).enumerate() {
                let shares = self.contended_shares(world, split.then_some(k));
                let tally = self.tally(Block { arm: if split { k } else { block.arm }, ..block });
                tally.time_ms += dt;
                tally.in_system_ms += dt * (c0[0] + c[0]) / 2.0;
                tally.queued_ms += dt * (c0[1] + c[1]) / 2.0;
                tally.gpu_held_ms += dt * (c0[2] + c[2]) / 2.0;
                tally.gpu_ms += dt * (g0 + gpus) / 2.0;
                if let Some((held, entitled)) = shares {
                    add_each(&mut tally.tenant_received_ms, &held, dt);
                    add_each(&mut tally.tenant_entitled_ms, &entitled, dt);
                }
            }
        }
        let mut still = BTreeMap::new();
        for (spec, state) in world.all_jobs() {
            let entry = match self.present.remove(&state.handle) {
                Some(known) => known,
                None => {
                    let mut arrived = self.config.block_at(spec.arrival_ms);
                    if split {
                        arrived.arm = self.config.arm_of(spec);
                    }
                    if arrived.warm {
                        self.tally(arrived).arrivals += 1;
                    }
                    (spec.arrival_ms, arrived)
                }
            };
            still.insert(state.handle, entry);
        }
        // What is left ended (or went away) since the last observation.
        for (_, (arrival_ms, arrived)) in std::mem::replace(&mut self.present, still) {
            if let Some(block) = self.current.filter(|b| b.warm) {
                self.tally(Block { arm: if split { arrived.arm } else { block.arm }, ..block }).completions += 1;
            }
            if arrived.warm {
                let t = self.tally(arrived);
                t.jct_sum_ms += now.saturating_sub(arrival_ms) as f64;
                t.jct_count += 1;
            }
        }
        self.last = Some((now, counts, gpus));
    }

    /// When the GPUs of `arm` (its pool, or those the other arms do not hold; the cluster's in
    /// a switchback) are contended: each tenant's GPUs held by its jobs there, and its weighted
    /// fair share of them.
    fn contended_shares(&self, world: &World, arm: Option<usize>) -> Option<(Vec<f64>, Vec<f64>)> {
        if world.tenants().len() < 2 {
            // Fairness needs two tenants: no figure to count.
            return None;
        }
        let mine = |spec: &wit::JobSpec| arm.is_none_or(|k| self.config.arm_of(spec) == k);
        let capacity = match arm.map(|k| self.config.pool_of(world, k)) {
            None => world.gpus_taking_work(),
            Some(Some(inside)) => (world.nodes().iter().zip(inside).enumerate())
                .filter(|(n, (_, inside))| *inside && !world.is_node_down(NodeId(*n as u32)))
                .map(|(_, (node, _))| node.gpu_memory_bytes.len() as u64)
                .sum(),
            Some(None) => {
                let others: usize = world.jobs().filter(|(spec, _)| !mine(spec)).map(|(_, s)| s.gpus.len()).sum();
                world.gpus_taking_work().saturating_sub(others as u64)
            }
        };
        let loads = world.tenant_loads_of(mine, capacity);
        if loads.iter().map(|l| l.usable).sum::<u64>() <= capacity {
            return None;
        }
        let entitled = world.entitlements_on(&loads, capacity);
        Some((loads.iter().map(|l| l.gpus as f64).collect(), entitled))
    }

    fn tally(&mut self, block: Block) -> &mut Tally {
        let arms = self.config.arms.len();
        &mut self.groups.entry(block.group).or_insert_with(|| vec![Tally::default(); arms])[block.arm]
    }

    /// Groups in which every arm has counted time.
    fn complete(&self) -> Vec<&Vec<Tally>> {
        self.groups.values().filter(|g| g.iter().all(|t| t.time_ms > 0.0)).collect()
    }

    /// How many groups every arm has run in.
    pub fn groups(&self) -> usize {
        self.complete().len()
    }

    /// Each arm but the baseline against it, for every estimate either side has a value for,
    /// over the complete groups.
    pub fn versus(&self) -> Vec<Versus> {
        let groups = self.complete();
        let sum = |picked: &mut dyn Iterator<Item = usize>, arm: usize| {
            let mut t = Tally::default();
            picked.for_each(|g| t.add(&groups[g][arm]));
            t
        };
        let mut out = Vec::new();
        for arm in 1..self.config.arms.len() {
            for estimate in Estimate::ALL {
                let change = |picked: &[usize]| {
                    let base = estimate.of(&sum(&mut picked.iter().copied(), 0));
                    relative(estimate.of(&sum(&mut picked.iter().copied(), arm)), base)
                };
                let all: Vec<usize> = (0..groups.len()).collect();
                let (baseline, value) =
                    (estimate.of(&sum(&mut all.iter().copied(), 0)), estimate.of(&sum(&mut all.iter().copied(), arm)));
                if !baseline.is_finite() && !value.is_finite() {
                    // Nothing to give on either side: fairness among fewer than two tenants.
                    continue;
                }
                // An interval over groups needs two that hold the figure on both sides: with one,
                // every resample that draws it gives the same ratio, a certainty that is not there.
                let holding =
                    groups.iter().filter(|g| estimate.of(&g[0]).is_finite() && estimate.of(&g[arm]).is_finite());
                let interval = if holding.count() >= 2 { stats::bootstrap(groups.len(), change) } else { None };
                out.push(Versus {
                    arm: self.config.arms[arm].clone(),
                    estimate,
                    baseline,
                    value,
                    change: relative(value, baseline),
                    interval,
                    groups: groups.len(),
                });
            }
        }
        out
    }

    /// Whether the experiment is over: its `groups` have run, or (after `conclude-after`
    /// groups) every arm's Little's-law JCT interval leaves out no difference.
    pub fn concluded(&self) -> Option<String> {
        let done = self.groups() as u64;
        if let Some(limit) = self.config.groups
            && done >= limit
        {
            return Some(format!("{done} groups ran, as configured"));
        }
        let after = self.config.conclude_after?;
        if done < after.max(2) {
            return None;
        }
        let resolved = self
            .versus()
            .into_iter()
            .filter(|v| v.estimate == Estimate::LittleJct)
            .all(|v| v.interval.is_some_and(|[lo, hi]| lo > 0.0 || hi < 0.0));
        resolved.then(|| format!("every arm's mean JCT interval left out no difference after {done} groups"))
    }
}

#[cfg(test)]
mod tests;
