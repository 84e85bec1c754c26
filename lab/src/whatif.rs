//! What if: a recorded cluster replayed under other policies, closed-loop. A telemetry
//! recording (`[record] telemetry`, or `wasmsched simulate --record`) becomes a scenario,
//! which `compare` then runs under any policies, the recorded one among them.
//!
//! - **The cluster**: every node the recording shows, with its capacity and GPU type; the
//!   tenants as declared.
//! - **The jobs**: every job it shows, with its arrival, GPUs, scaling, tenant, targets and
//!   declarations as recorded ([`Trail`] holds what the recording shows of one).
//! - **Each job's work and speed** ([`fit`]): the epochs it ran, and how fast. A GPU job whose
//!   model the simulator has measured step times for runs by those tables, scaled by the ratio
//!   of the time it took to the time the tables give for the same epochs on the same GPUs; a
//!   GPU job of another model by the tables of ResNet-50 on ImageNet (Pollux's measurements,
//!   `data/models`), scaled the same way, so that it scales over GPU counts and nodes as that
//!   model was measured to. A CPU job runs the CPU its epochs were measured to take (core-
//!   seconds per epoch from its CPU use, the most cores it used, its start-up and its own
//!   curve), as a calibrated profile does. Each job's column in the report says which.
//! - **Its length**: a job that left ran the epochs it ran. One still running or queued at the
//!   recording's end runs its declared `max-epochs`, else its model's schedule, else the epochs
//!   it ran so far; it is marked unfinished, and its recorded JCT is unknown.
//!
//! The simulator runs a recording's jobs without noise (their speeds are measured), so the
//! recorded policy replayed reproduces the recorded JCTs: exactly for a simulator run, within
//! the machine's noise for a live one (`docs/fidelity.md`).

pub mod fit;

use std::collections::HashMap;
use std::path::Path;

use serde::Serialize;

use wasmsched_core::bindings::wit;
use wasmsched_core::recording::RecordedTick;
use wasmsched_core::world::{JobId, NodeId, World};
use wasmsched_loop::budget::BudgetConfig;
use wasmsched_loop::record::{RecordError, read_recording};
use wasmsched_sim::model::Model;
use wasmsched_sim::playback::apply_delta;
use wasmsched_sim::throughput::shape_of;
use wasmsched_sim::workload::{JobPlan, NodeSpec, Workload};

use crate::experiment::run::Comparison;
use crate::scenario::Scenario;

pub use fit::Speed;

/// What a recording shows of one job.
#[derive(Clone, Debug, PartialEq)]
pub struct Trail {
    /// Its spec as the recording first showed it.
    pub spec: wit::JobSpec,
    /// Its runs, in order.
    pub stints: Vec<Stint>,
    /// Its epochs' ends: time (ms), epoch, main metric (NaN where it had none).
    pub epochs: Vec<(u64, u32, f64)>,
    /// When it left the cluster (ended or was stopped), by the recording's clock.
    pub left_ms: Option<u64>,
    /// The batch size in force when it first ran (0: none said).
    pub batch_size: u32,
    /// The most CPU (millicores) and memory (bytes) it was seen to use.
    pub peak: (u64, u64),
}

/// One run of a job: from its start to its stop (or the recording's end), on one set of GPUs.
#[derive(Clone, Debug, PartialEq)]
pub struct Stint {
    /// When it started, ms.
    pub from_ms: u64,
    /// When it stopped, ms; the last tick seen while it still runs.
    pub to_ms: u64,
    /// Its node (its first, for a job over several).
    pub node: NodeId,
    /// The node of each GPU it held.
    pub gpu_nodes: Vec<NodeId>,
    /// CPU it was seen to use, core-milliseconds (use at each tick × the time since the last;
    /// the last use seen until its end).
    pub cpu_core_ms: f64,
    /// The CPU it used at the last tick that read any, millicores.
    pub cpu_millicores: u64,
    /// Time since then with no reading (zero): a pause, unless the job ended then (an engine
    /// has no rate for a container that just exited), when the last reading stands for it.
    pub unread_ms: u64,
    /// Whether it still ran at the recording's end.
    pub open: bool,
}

impl Stint {
    /// The CPU read at the tick at `now` (millicores, over the time since the last tick), in
    /// a job's `first` run or a later one. A zero is no reading: a job's first readings before
    /// its first rate are its container starting (the first rate stands for them); zeros between
    /// readings are a pause; zeros at its end are its exit (see [`Stint::unread_ms`]).
    fn read_cpu(&mut self, millicores: u64, now: u64, first: bool) {
        let since = self.to_ms.max(self.from_ms);
        let span = now.saturating_sub(since);
        self.to_ms = now;
        if millicores == 0 {
            self.unread_ms += span;
            return;
        }
        let mut charged = span;
        if first && self.cpu_millicores == 0 {
            charged += self.unread_ms;
        }
        self.cpu_core_ms += millicores as f64 / 1000.0 * charged as f64;
        self.cpu_millicores = millicores;
        self.unread_ms = 0;
    }

    /// GPUs per node, as the throughput tables index them.
    pub fn shape(&self) -> Vec<u32> {
        shape_of(self.gpu_nodes.iter().map(|n| n.0))
    }
}

/// The most epochs a recorded job runs in a replay: a record claiming more (a stranger's
/// recording may say anything) counts as this many.
pub const MAX_EPOCHS: u32 = 100_000;

impl Trail {
    /// Epochs ended (at most [`MAX_EPOCHS`]).
    pub fn epochs_done(&self) -> u32 {
        self.epochs.iter().map(|e| e.1).max().unwrap_or(0).min(MAX_EPOCHS)
    }

    /// When its last epoch ended, ms.
    pub fn last_epoch_ms(&self) -> Option<u64> {
        self.epochs.iter().map(|e| e.0).max()
    }

    /// Its completion time as recorded: from its arrival to its last epoch's end, for a job
    /// that left after at least one epoch; None for one still there at the end.
    pub fn jct_s(&self) -> Option<f64> {
        self.left_ms?;
        let end = self.last_epoch_ms()?;
        Some(end.saturating_sub(self.spec.arrival_ms) as f64 / 1000.0)
    }
}

/// A recording read for replay.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// Its name: the file's stem.
    pub name: String,
    /// The recorded loop's tick, ms.
    pub tick_ms: u64,
    /// The disruption budget the run went under.
    pub budget: BudgetConfig,
    /// Every node seen, in the recording's node order, with the cores its jobs could use
    /// ([`NodeHeld`]).
    pub nodes: Vec<wit::Node>,
    /// The nodes whose jobs could use fewer cores than the node's allocatable.
    pub held: Vec<NodeHeld>,
    /// The tenants as last declared.
    pub tenants: Vec<wit::Tenant>,
    /// Every job seen, in the order they appeared.
    pub jobs: Vec<Trail>,
    /// The time of the last tick, ms.
    pub end_ms: u64,
    /// The policy that decided (the last one the recorded decisions name).
    pub policy: Option<String>,
}

/// A node whose jobs, held back, used together fewer cores than it has: the rest went to
/// work the host does not manage (the system, other tenants' processes). The replay gives its
/// jobs what they could use: the median over the ticks when one of them was held back (it used
/// less than its own most so far, under no limit of its own) of what they used together, once
/// there were five such ticks.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeHeld {
    /// The node.
    pub node: String,
    /// What it reports.
    pub allocatable_millicores: u64,
    /// What its jobs could use together.
    pub usable_millicores: u64,
}

/// The longest span of arrivals a replay takes, in days: a loop that ticks every few seconds
/// through more would run for hours.
const MAX_SPAN_DAYS: f64 = 366.0;

/// A recording read tick by tick: the world it was cut from, each job's trail so far, and per
/// node the CPU its jobs used together at each tick one of them was held back.
#[derive(Default)]
struct Reading {
    world: World,
    jobs: Vec<Trail>,
    /// A job's handle to its trail.
    index: HashMap<JobId, usize>,
    tenants: Vec<wit::Tenant>,
    last_ms: Option<u64>,
    policy: Option<String>,
    contended: Vec<Vec<u64>>,
}

impl Reading {
    fn tick(&mut self, t: &RecordedTick) {
        if let Some(d) = &t.decision {
            self.policy.get_or_insert_with(String::new).clone_from(&d.policy);
        } else if !t.arms.is_empty() {
            let arms: Vec<&str> = t.arms.iter().map(|d| d.policy.as_str()).collect();
            self.policy = Some(format!("split of {}", arms.join(" and ")));
        }
        let s = &t.snapshot;
        apply_delta(&mut self.world, s);
        let now = s.time_ms;
        let before = self.last_ms.unwrap_or(now);
        if let Some(declared) = &s.tenants {
            self.tenants.clone_from(declared);
        }
        self.arrivals(&s.added, now);
        self.epochs(t);
        self.departures(&s.removed, now);
        let use_here = self.stints(before, now);
        if self.contended.len() < use_here.len() {
            self.contended.resize(use_here.len(), Vec::new());
        }
        for (n, &(used, held)) in use_here.iter().enumerate() {
            if held && used > 0 {
                self.contended[n].push(used);
            }
        }
        self.last_ms = Some(now);
    }

    /// A trail for each job seen for the first time.
    fn arrivals(&mut self, added: &[wit::JobSpec], now: u64) {
        for spec in added {
            self.index.entry(spec.handle).or_insert_with(|| {
                // A job is seen once it has arrived: a later arrival is not one a host writes.
                let spec = wit::JobSpec { arrival_ms: spec.arrival_ms.min(now), ..spec.clone() };
                self.jobs.push(Trail {
                    spec,
                    stints: Vec::new(),
                    epochs: Vec::new(),
                    left_ms: None,
                    batch_size: 0,
                    peak: (0, 0),
                });
                self.jobs.len() - 1
            });
        }
    }

    /// The epochs the tick's progress records and its departed jobs' last records report.
    fn epochs(&mut self, t: &RecordedTick) {
        let p = &t.snapshot.progress;
        let mut k = 0;
        for i in 0..p.job.len() {
            let first = p.values.get(k).copied().unwrap_or(f64::NAN);
            k += usize::from(p.value_count[i]);
            if let Some(&j) = self.index.get(&p.job[i]) {
                let main = if p.value_count[i] > 0 { first } else { f64::NAN };
                self.jobs[j].epochs.push((p.time_ms[i], p.epoch[i], main));
            }
        }
        for r in &t.departed {
            if let Some(&j) = self.index.get(&r.job) {
                let main = r.values.first().copied().flatten().unwrap_or(f64::NAN);
                self.jobs[j].epochs.push((r.time_ms, r.epoch, main));
            }
        }
    }

    /// The jobs that left: each one's open stint closed at its end.
    fn departures(&mut self, removed: &[JobId], now: u64) {
        for h in removed {
            if let Some(&j) = self.index.get(h) {
                let trail = &mut self.jobs[j];
                trail.left_ms = Some(now);
                let end = trail.last_epoch_ms().unwrap_or(now).min(now);
                if let Some(open) = trail.stints.last_mut().filter(|s| s.open) {
                    // It ran at its last use read from then to its end.
                    let tail_ms = (end.saturating_sub(open.to_ms) + open.unread_ms) as f64;
                    open.cpu_core_ms += open.cpu_millicores as f64 / 1000.0 * tail_ms;
                    open.to_ms = end.max(open.from_ms);
                    open.open = false;
                }
            }
        }
    }

    /// Each job's stint carried on, closed or begun as it runs where it ran or elsewhere, its
    /// use read. Returns per node this tick: the CPU its jobs used together, and whether one of
    /// them was held back (below its own most so far, with no limit of its own below that).
    fn stints(&mut self, before: u64, now: u64) -> Vec<(u64, bool)> {
        let mut use_here: Vec<(u64, bool)> = vec![(0, false); self.world.nodes().len()];
        for (spec, state) in self.world.all_jobs() {
            let Some(&j) = self.index.get(&spec.handle) else { continue };
            let trail = &mut self.jobs[j];
            let running = state.is_running();
            if running && let Some(here) = use_here.get_mut(state.node.index()) {
                let most = trail.peak.0;
                let unlimited = state.cpu_limit_millicores.is_none_or(|l| l >= most);
                here.0 += state.cpu_used_millicores;
                here.1 |= unlimited && (state.cpu_used_millicores as f64) < HELD_BACK * most as f64;
            }
            let mut gpu_nodes: Vec<NodeId> = state.gpus.iter().map(|g| g.node).collect();
            gpu_nodes.sort_unstable();
            let same = trail
                .stints
                .last()
                .is_some_and(|s| s.open && running && s.node == state.node && s.gpu_nodes == gpu_nodes);
            if !same && let Some(open) = trail.stints.last_mut().filter(|s| s.open) {
                // It stopped, or moved, when the last tick's decision was applied.
                open.to_ms = before;
                open.open = false;
            }
            if !running {
                continue;
            }
            if !same {
                let from_ms = before.max(spec.arrival_ms).min(now);
                trail.stints.push(Stint {
                    from_ms,
                    to_ms: from_ms,
                    node: state.node,
                    gpu_nodes,
                    cpu_core_ms: 0.0,
                    cpu_millicores: 0,
                    unread_ms: 0,
                    open: true,
                });
            }
            let first = trail.stints.len() == 1;
            let stint = trail.stints.last_mut().expect("just pushed or kept");
            stint.read_cpu(state.cpu_used_millicores, now, first);
            if trail.batch_size == 0 {
                trail.batch_size = state.batch_size;
            }
            trail.peak = (trail.peak.0.max(state.cpu_used_millicores), trail.peak.1.max(state.memory_used_bytes));
        }
        use_here
    }
}

/// The recorded nodes, each at the CPU its jobs could use together where they were held back
/// below its allocatable on enough ticks (the median of those ticks), and those nodes.
fn usable(recorded: &[wit::Node], contended: Vec<Vec<u64>>) -> (Vec<wit::Node>, Vec<NodeHeld>) {
    let mut nodes = recorded.to_vec();
    let mut held = Vec::new();
    for (node, mut seen) in nodes.iter_mut().zip(contended) {
        if seen.len() < MIN_CONTENDED_TICKS {
            continue;
        }
        seen.sort_unstable();
        let usable = seen[seen.len() / 2];
        // Within a twentieth of it, the node gave its jobs all it has.
        if (usable as f64) < 0.95 * node.cpu_millicores as f64 {
            held.push(NodeHeld {
                node: node.name.clone(),
                allocatable_millicores: node.cpu_millicores,
                usable_millicores: usable,
            });
            node.cpu_millicores = usable;
        }
    }
    (nodes, held)
}

/// A job using less than this share of its own most CPU so far is held back.
const HELD_BACK: f64 = 0.9;

/// How many ticks of held-back jobs a node needs before its usable cores are read from them.
const MIN_CONTENDED_TICKS: usize = 5;

/// Why a recording cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum WhatifError {
    /// It could not be read.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// It holds nothing to replay.
    #[error("{0}")]
    Empty(String),
}

impl Recorded {
    /// Read the recording at `path`.
    pub fn open(path: &Path) -> Result<Recorded, WhatifError> {
        let (header, ticks) = read_recording(path)?;
        let name = path.file_stem().map_or_else(|| "recording".into(), |s| s.to_string_lossy().into_owned());
        let budget = header.budget.unwrap_or_else(BudgetConfig::off);
        Recorded::of(&name, header.tick_ms, budget, &ticks)
    }

    /// What `ticks` show, tick by tick through the world they were cut from.
    pub fn of(name: &str, tick_ms: u64, budget: BudgetConfig, ticks: &[RecordedTick]) -> Result<Recorded, WhatifError> {
        let mut r = Reading::default();
        for t in ticks {
            r.tick(t);
        }
        let Reading { world, jobs, tenants, last_ms, policy, contended, .. } = r;
        let (nodes, held) = usable(world.nodes(), contended);
        if nodes.is_empty() {
            return Err(WhatifError::Empty(format!(
                "the recording {name} shows no node: record a run whose backend reached its cluster"
            )));
        }
        if jobs.is_empty() {
            return Err(WhatifError::Empty(format!(
                "the recording {name} shows no job: record a run while jobs arrive, run or wait"
            )));
        }
        Ok(Recorded {
            name: name.into(),
            tick_ms,
            budget,
            nodes,
            held,
            tenants,
            jobs,
            end_ms: last_ms.unwrap_or(0),
            policy,
        })
    }

    /// The scenario it becomes (its cluster, and its jobs at their fitted speeds, by arrival),
    /// and the replay's account of every job: those it runs in the scenario's order, then those
    /// it leaves out.
    pub fn scenario(&self) -> Result<(Scenario, Replay), WhatifError> {
        let nodes: Vec<NodeSpec> = self
            .nodes
            .iter()
            .map(|n| NodeSpec {
                name: n.name.clone(),
                cpu_millicores: n.cpu_millicores.max(1),
                memory_bytes: n.memory_bytes,
                gpus: n.gpu_memory_bytes.len() as u32,
                gpu_memory_bytes: n.gpu_memory_bytes.first().copied().unwrap_or(0),
                gpu_type: n.gpu_type.clone(),
                domains: Vec::new(),
            })
            .collect();
        let mut names: HashMap<String, u32> = HashMap::new();
        let mut kept: Vec<(JobPlan, ReplayedJob)> = Vec::new();
        let mut left_out = Vec::new();
        for (trail, fitted) in self.jobs.iter().zip(fit::fit_all(self, &nodes)) {
            let Some((plan, speed)) = fitted else {
                left_out.push(ReplayedJob::of(trail, trail.spec.name.clone(), None));
                continue;
            };
            // A name appears once in a workload: a second job of the same name gets its handle.
            let seen = names.entry(plan.name.clone()).or_insert(0);
            *seen += 1;
            let name = if *seen > 1 { format!("{}#{}", plan.name, trail.spec.handle) } else { plan.name.clone() };
            kept.push((JobPlan { name: name.clone(), ..plan }, ReplayedJob::of(trail, name, Some(speed))));
        }
        // The replay's clock starts at the first arrival, to the tick (a host that ran for months
        // before the recording began counts its jobs' arrivals from its own start).
        let tick_s = self.tick_ms.max(1) as f64 / 1000.0;
        let first = kept.iter().map(|(plan, _)| plan.arrival_s).fold(f64::INFINITY, f64::min);
        let shift = if first.is_finite() { (first / tick_s).floor() * tick_s } else { 0.0 };
        for (plan, _) in &mut kept {
            plan.arrival_s -= shift;
        }
        let span_days = kept.iter().map(|(plan, _)| plan.arrival_s).fold(0.0, f64::max) / 86_400.0;
        if span_days > MAX_SPAN_DAYS {
            return Err(WhatifError::Empty(format!(
                "the jobs of the recording {} arrive over {span_days:.0} days; whatif replays at most {MAX_SPAN_DAYS:.0}: \
                 cut the recording",
                self.name
            )));
        }
        if kept.is_empty() {
            return Err(WhatifError::Empty(format!(
                "no job of the recording {} ran a whole epoch or can borrow a speed from one that did: nothing to replay",
                self.name
            )));
        }
        // The simulator takes jobs by arrival (ties in the recording's order).
        kept.sort_by(|a, b| a.0.arrival_s.total_cmp(&b.0.arrival_s));
        let (plans, mut jobs): (Vec<JobPlan>, Vec<ReplayedJob>) = kept.into_iter().unzip();
        jobs.extend(left_out);
        let mut scenario = Scenario::of(Workload::of(self.name.clone(), nodes, plans));
        scenario.budget = self.budget;
        scenario.tenants = self.tenants.clone();
        let replay = Replay {
            recording: self.name.clone(),
            recorded_policy: self.policy.clone(),
            jobs,
            held: self.held.clone(),
        };
        Ok((scenario, replay))
    }
}

/// The recording's account of its jobs, beside which the replays are read.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Replay {
    /// The recording's name.
    pub recording: String,
    /// The policy that decided in the recording (the last one its decisions name).
    pub recorded_policy: Option<String>,
    /// Every recorded job: those the replays run, in the scenario's order (the runs' `jobs`
    /// order), then those left out.
    pub jobs: Vec<ReplayedJob>,
    /// The nodes whose jobs could use fewer cores than the node has, and how many.
    pub held: Vec<NodeHeld>,
}

/// Mean JCTs, recorded and replayed, over a set of jobs.
#[derive(Clone, Debug, PartialEq)]
pub struct Means {
    /// Whose jobs: a tenant's, or all (None).
    pub tenant: Option<String>,
    /// How many.
    pub jobs: usize,
    /// Their mean JCT as recorded.
    pub recorded_s: f64,
    /// Under each policy, in [`Replay::versus`] order.
    pub policies_s: Vec<f64>,
}

/// One policy's replays beside the recording.
#[derive(Clone, Debug, PartialEq)]
pub struct Versus {
    /// The policy.
    pub policy: String,
    /// Each replayed job's JCT, mean over the seeds it ended in (None: it ended in none), in
    /// [`Replay::jobs`] order.
    pub jct_s: Vec<Option<f64>>,
}

impl Replay {
    /// Each policy of `comparison` (which ran this replay's scenario) job by job.
    pub fn versus(&self, comparison: &Comparison) -> Vec<Versus> {
        comparison
            .policies()
            .into_iter()
            .map(|policy| {
                let runs: Vec<_> = comparison.runs.iter().filter(|r| r.policy == policy).collect();
                let jct_s = (0..self.jobs.len())
                    .map(|i| {
                        let ended: Vec<f64> = runs.iter().filter_map(|r| r.jobs.get(i)?.jct_s).collect();
                        (!ended.is_empty()).then(|| ended.iter().sum::<f64>() / ended.len() as f64)
                    })
                    .collect();
                Versus { policy: policy.to_string(), jct_s }
            })
            .collect()
    }

    /// The jobs compared with the recording: those that ended in it and in every policy's
    /// replays.
    fn compared(&self, versus: &[Versus]) -> Vec<usize> {
        (0..self.jobs.len())
            .filter(|&i| self.jobs[i].recorded_jct_s.is_some() && versus.iter().all(|v| v.jct_s[i].is_some()))
            .collect()
    }

    /// The mean JCT recorded and under each policy (in `versus` order) over the jobs that ended
    /// in the recording and in every replay: of them all (tenant None), then of each tenant's
    /// when there are several, by name.
    pub fn means(&self, versus: &[Versus]) -> Vec<Means> {
        let jobs = self.compared(versus);
        let of = |tenant: Option<&str>| {
            let of: Vec<usize> =
                jobs.iter().copied().filter(|&i| tenant.is_none_or(|t| self.jobs[i].tenant == t)).collect();
            let mean = |f: &dyn Fn(usize) -> f64| of.iter().map(|&i| f(i)).sum::<f64>() / of.len().max(1) as f64;
            Means {
                tenant: tenant.map(str::to_string),
                jobs: of.len(),
                recorded_s: mean(&|i| self.jobs[i].recorded_jct_s.unwrap_or(0.0)),
                policies_s: versus.iter().map(|v| mean(&|i| v.jct_s[i].unwrap_or(0.0))).collect(),
            }
        };
        let mut tenants: Vec<&str> = jobs.iter().map(|&i| self.jobs[i].tenant.as_str()).collect();
        tenants.sort_unstable();
        tenants.dedup();
        let mut means = vec![of(None)];
        if tenants.len() > 1 {
            means.extend(tenants.into_iter().map(|t| of(Some(t))));
        }
        means
    }

    /// The mean JCT recorded and under each policy, over the jobs that ended in both; per
    /// tenant when there are several; per job (up to `max_jobs`), with what each job's speed
    /// rests on. Markdown tables.
    pub fn table(&self, versus: &[Versus], max_jobs: usize) -> String {
        use std::fmt::Write as _;
        let recorded = self.recorded_policy.as_deref().unwrap_or("recorded");
        let mut out = String::new();
        let means = self.means(versus);
        let all = &means[0];
        let _ = writeln!(
            out,
            "what if: {} ({} jobs replayed, {} left out; mean JCT over the {} that ended in the recording and in \
             every replay)",
            self.recording,
            self.jobs.iter().filter(|j| j.speed.is_some()).count(),
            self.jobs.iter().filter(|j| j.speed.is_none()).count(),
            all.jobs,
        );
        for h in &self.held {
            let _ = writeln!(
                out,
                "node {}: its jobs could use {:.2} of its {:.2} cores together; the replays give them that",
                h.node,
                h.usable_millicores as f64 / 1000.0,
                h.allocatable_millicores as f64 / 1000.0
            );
        }
        let _ = writeln!(out, "| policy | mean JCT s | vs recorded |\n|---|---:|---:|");
        let _ = writeln!(out, "| recorded ({recorded}) | {:.1} | |", all.recorded_s);
        for (v, m) in versus.iter().zip(&all.policies_s) {
            let _ = writeln!(out, "| {} | {m:.1} | {:+.1} % |", v.policy, 100.0 * (m / all.recorded_s - 1.0));
        }
        // A table's header: its first columns, then one right-aligned column per policy.
        let header = |first: &str, aligned: &str| {
            let names: Vec<&str> = versus.iter().map(|v| v.policy.as_str()).collect();
            format!("\n| {first} | {} |\n|{aligned}{}", names.join(" | "), "---:|".repeat(names.len()))
        };
        if means.len() > 1 {
            let _ = writeln!(out, "{}", header("tenant | jobs | recorded", "---|---:|---:|"));
            for m in &means[1..] {
                let cells: Vec<String> = m.policies_s.iter().map(|p| format!("{p:.1}")).collect();
                let tenant = m.tenant.as_deref().unwrap_or("");
                let _ = writeln!(out, "| {tenant} | {} | {:.1} | {} |", m.jobs, m.recorded_s, cells.join(" | "));
            }
        }
        if self.jobs.len() <= max_jobs {
            let _ = writeln!(out, "{}", header("job | tenant | speed | recorded JCT s", "---|---|---|---:|"));
            let show = |v: Option<f64>| v.map_or_else(|| "—".to_string(), |v| format!("{v:.1}"));
            for (i, j) in self.jobs.iter().enumerate() {
                let speed = j.speed.as_ref().map_or_else(|| "left out".to_string(), ToString::to_string);
                let recorded = if j.unfinished { "unfinished".to_string() } else { show(j.recorded_jct_s) };
                let cells: Vec<String> = versus.iter().map(|v| show(v.jct_s.get(i).copied().flatten())).collect();
                let _ = writeln!(out, "| {} | {} | {speed} | {recorded} | {} |", j.name, j.tenant, cells.join(" | "));
            }
        } else {
            let _ = writeln!(out, "\n({} jobs: each one's figures are in --json and --report)", self.jobs.len());
        }
        out
    }
}

/// A recorded job as the replay runs it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplayedJob {
    /// Its name in the scenario (the recorded name; a repeated name gets its handle).
    pub name: String,
    /// Its tenant.
    pub tenant: String,
    /// What its speed rests on; None: left out of the replay (it ran no epoch, or it is not a
    /// training job).
    pub speed: Option<Speed>,
    /// Epochs it ran in the recording.
    pub epochs: u32,
    /// Whether it was still running or queued when the recording ended.
    pub unfinished: bool,
    /// Its completion time as recorded; None when unfinished.
    pub recorded_jct_s: Option<f64>,
}

impl ReplayedJob {
    fn of(trail: &Trail, name: String, speed: Option<Speed>) -> ReplayedJob {
        ReplayedJob {
            name,
            tenant: trail.spec.tenant.clone(),
            speed,
            epochs: trail.epochs_done(),
            unfinished: trail.left_ms.is_none(),
            recorded_jct_s: trail.jct_s(),
        }
    }
}

/// The model a recorded job trains, when the simulator has measurements of it.
pub fn known_model(spec: &wit::JobSpec) -> Option<Model> {
    Model::parse(&spec.model)
}

#[cfg(test)]
mod tests;
