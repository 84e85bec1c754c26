//! The simulator backend: a discrete-event simulation of DL jobs on nodes.
//!
//! **What is real.** Each training job walks its model's measured learning curve (the
//! per-epoch validation metric of a real run, [`model`]); an epoch's metric is the
//! real one, so progress, plateaus and targets behave as in real training.
//!
//! **GPU jobs run at measured speed.** A training job that asks for GPUs takes, per epoch, the
//! optimiser steps its model's measured run took at its batch size, and each step takes the
//! measured step time of its placement and per-GPU batch ([`throughput`]); it needs
//! [`FEED_CORES_PER_GPU`] cores a GPU to feed them (an assumption) and slows in proportion
//! when it gets less. Every start of a GPU job, the first included, costs
//! [`SimConfig::gpu_start_s`] before its first step (Pollux's simulator's 30 s).
//!
//! **CPU jobs run on assumed costs.** An epoch costs a fixed amount of CPU work (core-seconds
//! per model, scaled by the job's `work_scale`), and a job uses at most its model's maximum
//! useful parallelism. CPU on a node is shared like CFS: each runnable job is entitled to an
//! equal share, a limit caps it, and what a job cannot use flows to the others
//! (work-conserving). A job of a calibrated profile costs what it was measured to cost at the
//! CPU it gets, as a share or under a limit (`profile::Costs::efficiency`).
//!
//! **Scheduling.** A job that arrives waits in the queue until it is placed: by the policy
//! (`place`), or, for a policy that does not place, by the default placement, first come
//! first served, first fit, at the moment it fits (a CPU job always fits, on the least-loaded
//! node as before, so CPU scenarios start every job on arrival). GPUs are allocated whole; a
//! placement may share them ([`colocation`]): jobs on one GPU time-slice it (each runs at 1/k of
//! its speed with k jobs there) unless every one of them has a GPU share, when they share it in
//! space at the speeds Gavel measured for the pair (MPS), capped by their shares. A job spread over nodes does its CPU work on its first node.
//! A migration, and a placement after a preemption, restart the job from its checkpoint after
//! a restart cost: a CPU job's last completed epoch (the epoch in progress is lost), a GPU
//! job's last step. An inference service needs `request_rate` × 20 ms
//! of one core per second; its latency follows an M/M/1 queue on the CPU it is entitled to,
//! or, for a service that asks for GPUs, its p99 latency on the GPU it shares
//! ([`colocation::p99_ms`]).
//! A seed perturbs each job's work per epoch and each epoch's length by a few per cent, so
//! several seeds give a spread; the same seed gives the same run, bit for bit.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

mod backend;
pub mod colocation;
pub mod goodput;
pub mod model;
mod outcome;
mod placement;
pub mod playback;
pub mod profile;
mod settings;
pub mod throughput;
pub mod workload;

use self::model::meets;
use self::profile::JobCurve;
use self::throughput::{GpuConfig, GpuType};
use self::workload::{JobPlan, NodeSpec, Workload};
pub use outcome::JobOutcome;
pub use placement::gpu_step;
pub use settings::SimSettings;
use wasmsched_core::backend::Placer;
use wasmsched_core::bindings::wit;
use wasmsched_core::world::{GpuSlot, World};
use wasmsched_rules::{GpuBook, JobId, NodeId};

/// CPU one inference request costs, in core-seconds.
pub const REQUEST_COST_CORE_S: f64 = 0.02;

/// Cores a GPU job keeps busy per GPU feeding it (input pipeline, launches), an assumption of
/// ours; with fewer it slows in proportion.
pub const FEED_CORES_PER_GPU: f64 = 2.0;

/// How the simulator behaves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimConfig {
    /// Seeds the per-job and per-epoch noise.
    pub seed: u64,
    /// Time lost when a CPU job restarts on another node or after a preemption.
    pub restart_cost_s: f64,
    /// Time from placing a GPU job (first start, restart, migration) to its first step.
    pub gpu_start_s: f64,
    /// Relative spread of a job's work per epoch (and half of it per epoch).
    pub noise: f64,
    /// How often an inference service reports its latency.
    pub inference_window_s: f64,
    /// Keep every job's progress curve (time, metric) for pictures.
    pub keep_progress: bool,
    /// End the run when no job has progressed (done work, ended or arrived) for this long,
    /// and none is left to arrive: jobs wait that nothing places, or every job that runs is
    /// restarted before its first step, again and again. The run's result says so.
    pub idle_limit_s: f64,
    /// Input shaking: each gap between arrivals, each job's work and each service's duration
    /// times its own factor in [1 − perturb, 1 + perturb], drawn for the seed
    /// ([`Workload::shaken`]); 0 runs the workload as it is.
    pub perturb: f64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 0,
            restart_cost_s: 20.0,
            gpu_start_s: 30.0,
            noise: 0.05,
            inference_window_s: 10.0,
            keep_progress: false,
            idle_limit_s: 3600.0,
            perturb: 0.0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Not arrived yet.
    Pending,
    /// Arrived, waiting to be placed.
    Queued,
    Running,
    Done,
}

/// One job as the simulator tracks it.
#[derive(Debug)]
struct SimJob {
    plan: JobPlan,
    curve: JobCurve,
    direction: wit::Direction,
    handle: Option<JobId>,
    node: NodeId,
    phase: Phase,
    epochs_total: u32,
    /// CPU job: core-seconds per epoch. GPU job: what multiplies its measured steps per epoch
    /// (its `work_scale` and the seed's noise).
    work_per_epoch: f64,
    /// How it runs on GPUs; None for a CPU job.
    gpu: Option<GpuConfig>,
    /// A GPU job: its measured job type on a shared GPU ([`colocation::job_type`]) and its
    /// GPU memory.
    gpu_kind: Option<(usize, u64)>,
    /// GPU job: seconds per optimiser step where it runs now.
    step_s: f64,
    /// Work done per second now: for a CPU job its cores (times a calibrated profile's
    /// efficiency at them), for a GPU job steps.
    speed: f64,
    max_cores: f64,
    memory_bytes: u64,
    epoch: u32,
    work_left: f64,
    cores: f64,
    entitled: f64,
    limit_cores: Option<f64>,
    /// The GPUs it holds while it runs.
    gpus: Vec<GpuSlot>,
    gpu_share: Option<u8>,
    /// The batch size a resize pinned (an elastic job otherwise picks its own).
    pinned_batch: Option<u32>,
    paused_until: f64,
    version: u64,
    last_update_s: f64,
    used_core_s: f64,
    total_core_s: f64,
    start_s: f64,
    finish_s: Option<f64>,
    reached: [Option<f64>; 2],
    delivered_s: Option<f64>,
    migrations: u32,
    preemptions: u32,
    /// When it last did work (not paused in a restart), if ever.
    worked_s: Option<f64>,
    /// When it first started running.
    started_s: Option<f64>,
    run_s: f64,
    gpu_s: f64,
    stopped: bool,
    last_epoch_end_s: f64,
    epoch_time_sum: f64,
    latency_sum_ms: f64,
    windows: u32,
    progress: Vec<(f64, f64)>,
}

impl SimJob {
    /// The job `plan` describes, not yet arrived: its epochs, its work per epoch (the
    /// simulator's `noise` drawn from `rng` unless the plan was measured) and what it runs on.
    fn of(plan: &JobPlan, noise: f64, rng: &mut Rng) -> SimJob {
        let curve = plan.curve();
        let schedule = if plan.by_goodput() { plan.model.elastic_epochs() } else { curve.epochs() };
        let epochs_total = plan.max_epochs.map_or(schedule, |m| m.min(schedule)).max(1);
        // A calibrated (profile) job is CPU work whatever it holds.
        let gpu = (plan.gpus > 0 && plan.kind == wit::JobKind::Training && plan.profile.is_none())
            .then(|| GpuConfig::new(plan.model, plan.batch_size, plan.gpus));
        let cost = if gpu.is_some() { 1.0 } else { plan.work_per_epoch_core_s() };
        let noise = if plan.measured { 0.0 } else { noise };
        let work_per_epoch = cost * plan.work_scale * rng.around_one(noise);
        SimJob {
            direction: curve.direction(),
            curve,
            handle: None,
            node: NodeId(0),
            phase: Phase::Pending,
            epochs_total,
            work_per_epoch,
            gpu,
            // A training job at its per-GPU batch; a GPU service at its batch.
            gpu_kind: (plan.gpus > 0 && plan.profile.is_none()).then(|| {
                let batch = gpu.map_or(plan.batch_size, |g| g.local_bsz);
                let kind = colocation::job_type(plan.model, batch);
                (kind, colocation::footprint_bytes(kind, batch))
            }),
            step_s: 0.0,
            speed: 0.0,
            max_cores: match gpu {
                Some(g) => f64::from(g.replicas) * FEED_CORES_PER_GPU,
                None => plan.max_cores(),
            },
            memory_bytes: plan.memory_bytes(),
            epoch: 0,
            work_left: 0.0,
            cores: 0.0,
            entitled: 0.0,
            limit_cores: None,
            gpus: Vec::new(),
            gpu_share: None,
            pinned_batch: plan.tuned.then_some(plan.batch_size),
            paused_until: 0.0,
            version: 0,
            last_update_s: 0.0,
            used_core_s: 0.0,
            total_core_s: 0.0,
            start_s: plan.arrival_s,
            finish_s: None,
            reached: [None, None],
            delivered_s: None,
            migrations: 0,
            preemptions: 0,
            worked_s: None,
            started_s: None,
            run_s: 0.0,
            gpu_s: 0.0,
            stopped: false,
            last_epoch_end_s: plan.arrival_s,
            epoch_time_sum: 0.0,
            latency_sum_ms: 0.0,
            windows: 0,
            progress: Vec::new(),
            plan: plan.clone(),
        }
    }

    /// Whether, running at `now`, it works: it is not paused in a restart's restore (a start
    /// that is no restart does work from the first moment).
    fn works_at(&self, now: f64) -> bool {
        let restarted = self.preemptions > 0 || self.migrations > 0;
        now > self.paused_until || !restarted
    }

    fn is_inference(&self) -> bool {
        self.plan.kind == wit::JobKind::Inference
    }

    fn demand_cores(&self) -> f64 {
        let cap = self.limit_cores.unwrap_or(f64::INFINITY).min(self.max_cores);
        if self.is_inference() { cap.min(self.plan.request_rate.unwrap_or(0.0) * REQUEST_COST_CORE_S) } else { cap }
    }

    fn runnable(&self, now: f64) -> bool {
        self.phase == Phase::Running && now >= self.paused_until
    }

    /// The work of epoch `epoch` (1-based), before the per-epoch noise.
    fn epoch_work(&self, epoch: u32) -> f64 {
        self.plan.epoch_units(self.gpu, epoch) * self.work_per_epoch
    }
}

/// An event on the virtual clock. Ordered by time, then job, for determinism.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Event {
    time_s: f64,
    job: usize,
    version: u64,
}

impl Eq for Event {}

impl Ord for Event {
    fn cmp(&self, other: &Self) -> Ordering {
        other.time_s.total_cmp(&self.time_s).then_with(|| other.job.cmp(&self.job))
    }
}

impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The simulator's noise and input shaking: SplitMix64.
pub(crate) use wasmsched_core::random::SplitMix as Rng;

/// The simulator backend.
pub struct Simulator {
    config: SimConfig,
    nodes: Vec<NodeSpec>,
    /// Each node's GPU type (a node that names none, or one not measured, has T4s).
    gpu_types: Vec<GpuType>,
    jobs: Vec<SimJob>,
    /// The running jobs of each node, in start order.
    on_node: Vec<Vec<usize>>,
    by_handle: Vec<usize>,
    next_arrival: usize,
    now_s: f64,
    events: BinaryHeap<Event>,
    ended: Vec<JobId>,
    rng: Rng,
    busy_core_s: f64,
    /// Who holds each GPU: the running jobs, by index into `jobs`.
    book: GpuBook,
    /// Who starts queued jobs.
    placer: Placer,
    /// Queued jobs, in arrival order (handle order).
    queue: Vec<usize>,
    /// When a job last did work (a restart's pause is not work, a first start-up is), ended or
    /// arrived.
    last_activity_s: f64,
}

impl Simulator {
    /// A simulator of `workload` (its jobs must be sorted by arrival).
    pub fn new(workload: &Workload, config: SimConfig) -> Self {
        let shaken;
        let workload = if config.perturb > 0.0 {
            shaken = workload.shaken(config.perturb, config.seed);
            &shaken
        } else {
            workload
        };
        let mut rng = Rng::new(config.seed ^ 0x5eed_0f5e_ed00);
        let jobs = workload.jobs.iter().map(|plan| SimJob::of(plan, config.noise, &mut rng)).collect();
        Simulator {
            config,
            nodes: workload.nodes.clone(),
            gpu_types: workload.nodes.iter().map(|n| GpuType::parse(&n.gpu_type).unwrap_or_default()).collect(),
            jobs,
            on_node: vec![Vec::new(); workload.nodes.len()],
            by_handle: Vec::new(),
            next_arrival: 0,
            now_s: 0.0,
            events: BinaryHeap::new(),
            ended: Vec::new(),
            rng,
            busy_core_s: 0.0,
            book: GpuBook::new(workload.nodes.iter().map(|n| n.gpus)),
            placer: Placer::Backend,
            queue: Vec::new(),
            last_activity_s: 0.0,
        }
    }

    /// The virtual clock.
    pub fn now_s(&self) -> f64 {
        self.now_s
    }

    /// Core-seconds of CPU the jobs used so far.
    pub fn busy_core_s(&self) -> f64 {
        self.busy_core_s
    }

    /// The nodes' total CPU, in cores.
    pub fn capacity_cores(&self) -> f64 {
        self.nodes.iter().map(|n| n.cpu_millicores as f64 / 1000.0).sum()
    }

    /// Bring every runnable job on `node` up to the clock, then share the node's CPU anew and
    /// reschedule their next events.
    fn reshare(&mut self, node: NodeId) {
        let now = self.now_s;
        let on_node = self.on_node[node.index()].clone();
        for &i in &on_node {
            self.catch_up(i);
        }
        let runnable: Vec<usize> = on_node.iter().copied().filter(|&i| self.jobs[i].runnable(now)).collect();
        let spec = &self.nodes[node.index()];
        let capacity = spec.cpu_millicores as f64 / 1000.0;
        // On a shared GPU a job runs slower (`colocation`): by this factor.
        let sharing: Vec<f64> = runnable.iter().map(|&i| 1.0 / self.gpu_speed(i).max(1e-6)).collect();
        let caps: Vec<f64> = runnable.iter().zip(&sharing).map(|(&i, k)| self.jobs[i].demand_cores() / k).collect();
        let shares = cfs_shares(capacity, &caps);
        // What a service is entitled to, were it busy: its latency depends on it.
        let busy_caps: Vec<f64> = runnable
            .iter()
            .zip(&caps)
            .map(|(&i, &c)| {
                let j = &self.jobs[i];
                if j.is_inference() { j.limit_cores.unwrap_or(f64::INFINITY).min(j.max_cores) } else { c }
            })
            .collect();
        let entitled = cfs_shares(capacity, &busy_caps);
        for (k, &i) in runnable.iter().enumerate() {
            let sharing = sharing[k];
            let j = &mut self.jobs[i];
            j.cores = shares[k];
            j.entitled = entitled[k];
            j.speed = match j.gpu {
                // Its GPUs' time-slice, slowed in proportion when its CPU falls short of feeding it.
                Some(_) => (j.cores / (j.max_cores / sharing).max(1e-9)).min(1.0) / (j.step_s.max(1e-9) * sharing),
                None => j.cores * j.plan.cpu_efficiency(j.cores, j.limit_cores),
            };
        }
        for &i in &on_node {
            if !runnable.contains(&i) {
                let j = &mut self.jobs[i];
                j.cores = 0.0;
                j.speed = 0.0;
            }
            self.schedule(i);
        }
    }

    /// Account the work job `i` did since its last update.
    /// The noise on job `i`'s next epoch's work: a draw around one by half the seed's spread,
    /// one for a job whose work was measured (drawn all the same, so that the other jobs'
    /// draws stay as they were).
    fn epoch_noise(&mut self, i: usize) -> f64 {
        let spread = if self.jobs[i].plan.measured { 0.0 } else { self.config.noise / 2.0 };
        self.rng.around_one(spread)
    }

    fn catch_up(&mut self, i: usize) {
        let now = self.now_s;
        let j = &mut self.jobs[i];
        if j.phase == Phase::Running && now > j.last_update_s {
            let dt = now - j.last_update_s;
            j.run_s += dt;
            j.gpu_s += dt * j.gpus.len().max(1) as f64;
            // Work, or the start-up of a job never restarted: a restart's pause is no progress.
            if j.works_at(now) {
                self.last_activity_s = now;
                j.worked_s = Some(now);
            }
        }
        if j.phase == Phase::Running && now > j.last_update_s && j.cores > 0.0 {
            let dt = now - j.last_update_s;
            let used = j.cores * dt;
            j.used_core_s += used;
            j.total_core_s += used;
            self.busy_core_s += used;
            if !j.is_inference() {
                j.work_left -= j.speed * dt;
            }
        }
        j.last_update_s = now;
    }

    /// Push job `i`'s next event: its epoch end, window end, service end, or restart.
    fn schedule(&mut self, i: usize) {
        let now = self.now_s;
        let window = self.config.inference_window_s;
        let j = &mut self.jobs[i];
        j.version += 1;
        if j.phase != Phase::Running {
            return;
        }
        let time_s = if now < j.paused_until {
            j.paused_until
        } else if j.is_inference() {
            let end = j.plan.arrival_s + j.plan.duration_s.unwrap_or(0.0);
            (j.start_s + window * f64::from(j.windows + 1)).min(end)
        } else if j.speed > 0.0 {
            now + j.work_left.max(0.0) / j.speed
        } else {
            return;
        };
        self.events.push(Event { time_s, job: i, version: j.version });
    }

    fn finish(&mut self, i: usize, stopped: bool, world: &mut World) {
        let was_running = self.jobs[i].phase == Phase::Running;
        let gpus = self.jobs[i].gpus.clone();
        if was_running {
            self.release(i);
        }
        self.queue.retain(|&k| k != i);
        let now = self.now_s;
        let j = &mut self.jobs[i];
        j.phase = Phase::Done;
        j.finish_s = Some(now);
        j.stopped = stopped;
        if let Some(h) = j.handle {
            self.ended.push(h);
        }
        let node = j.node;
        self.last_activity_s = now;
        if was_running {
            self.reshare_around(node, &gpus);
        }
        if self.placer == Placer::Backend {
            self.place_queued(world);
        }
    }

    /// Handle job `i`'s due event.
    fn fire(&mut self, i: usize, world: &mut World) {
        let now = self.now_s;
        if self.jobs[i].paused_until > 0.0 {
            // A restart after a migration is over: the job runs again.
            if now >= self.jobs[i].paused_until {
                // Reshared while the pause still shows, so the time up to now is accounted as
                // paused (no progress); runnable it is already.
                let node = self.jobs[i].node;
                self.reshare(node);
                self.jobs[i].paused_until = 0.0;
            }
            return;
        }
        if self.jobs[i].is_inference() {
            self.service_window(i, world);
            return;
        }
        self.catch_up(i);
        let j = &mut self.jobs[i];
        j.epoch += 1;
        j.epoch_time_sum += now - j.last_epoch_end_s;
        j.last_epoch_end_s = now;
        let metric = j.curve.metric_at(j.epoch);
        if let Some((t1, t2)) = j.plan.tiers {
            for (k, target) in [t1, t2].into_iter().enumerate() {
                if j.reached[k].is_none() && meets(metric, target, j.direction) {
                    j.reached[k] = Some(now - j.plan.arrival_s);
                }
            }
        }
        if let Some(h) = j.handle {
            world.record_at(h, secs_to_ms(now), j.epoch, vec![metric]);
        }
        if self.config.keep_progress {
            j.progress.push((now, metric));
        }
        if j.epoch >= j.epochs_total {
            self.finish(i, false, world);
        } else {
            let noise = self.epoch_noise(i);
            let j = &mut self.jobs[i];
            j.work_left = j.epoch_work(j.epoch + 1) * noise;
            if j.plan.by_goodput() {
                // The next epoch's gradient statistics: another gain, perhaps another batch.
                let before = j.step_s;
                self.set_step_time(i);
                let j = &mut self.jobs[i];
                if j.step_s.is_finite() && j.step_s > 0.0 {
                    j.speed *= before / j.step_s;
                }
            }
            self.schedule(i);
        }
    }

    fn service_window(&mut self, i: usize, world: &mut World) {
        self.catch_up(i);
        let now = self.now_s;
        let on_gpu =
            self.jobs[i].gpu_kind.filter(|_| !self.jobs[i].gpus.is_empty()).map(|(k, _)| (k, self.gpu_speed(i)));
        let j = &mut self.jobs[i];
        let rate = j.plan.request_rate.unwrap_or(0.0);
        let latency_ms = match on_gpu {
            // On a GPU: its p99 at the speed its GPU gives it.
            Some((kind, speed)) => colocation::p99_ms(kind, speed, rate),
            None => {
                let service_ms = 1000.0 * REQUEST_COST_CORE_S / j.entitled.max(1e-6);
                let load = rate * REQUEST_COST_CORE_S / j.entitled.max(1e-6);
                if load < 0.99 { service_ms / (1.0 - load) } else { service_ms * 100.0 }
            }
        };
        j.windows += 1;
        j.latency_sum_ms += latency_ms;
        if let Some(h) = j.handle {
            world.record_at(h, secs_to_ms(now), j.windows, vec![latency_ms]);
        }
        if self.config.keep_progress {
            j.progress.push((now, latency_ms));
        }
        if now >= j.plan.arrival_s + j.plan.duration_s.unwrap_or(0.0) - 1e-9 {
            self.finish(i, false, world);
        } else {
            self.schedule(i);
        }
    }

    /// Run the clock to `until_s`.
    fn advance(&mut self, until_s: f64, world: &mut World) {
        loop {
            let arrival = self.jobs.get(self.next_arrival).map(|j| j.plan.arrival_s);
            while self.events.peek().is_some_and(|e| self.jobs[e.job].version != e.version) {
                self.events.pop();
            }
            let event = self.events.peek().map(|e| e.time_s);
            let next = match (arrival, event) {
                (Some(a), Some(e)) => a.min(e),
                (a, e) => a.or(e).unwrap_or(f64::INFINITY),
            };
            if next > until_s {
                break;
            }
            self.now_s = self.now_s.max(next);
            if arrival == Some(next) {
                let i = self.next_arrival;
                self.next_arrival += 1;
                self.arrive(i, world);
            } else if let Some(e) = self.events.pop() {
                self.fire(e.job, world);
            }
        }
        self.now_s = self.now_s.max(until_s);
        for n in 0..self.on_node.len() {
            for k in 0..self.on_node[n].len() {
                self.catch_up(self.on_node[n][k]);
            }
        }
    }

    /// When a job last progressed: now, while a running job works (it is not paused in a
    /// restart), else the last activity. A job's work is counted at its events (an epoch's
    /// end, a change of share), and with a tick longer than its epochs none may fall within a
    /// tick; a job started on this tick has had no event yet.
    fn last_progress_s(&self) -> f64 {
        if self.running().any(|i| self.jobs[i].works_at(self.now_s)) { self.now_s } else { self.last_activity_s }
    }

    /// Whether the job behind `handle` did work it keeps since `since_ms` (ever, when None): a
    /// GPU job keeps every step, so any work counts; a CPU job loses the epoch in progress, so
    /// only an epoch's end does (its progress record).
    fn kept_work_since(&self, handle: JobId, since_ms: Option<u64>, world: &World) -> bool {
        let Some(j) = self.by_handle.get(handle.index()).map(|&i| &self.jobs[i]) else { return false };
        match j.gpu {
            Some(_) => j.worked_s.is_some_and(|t| since_ms.is_none_or(|since| secs_to_ms(t) > since)),
            None => world.reported_since(handle, since_ms),
        }
    }

    fn running(&self) -> impl Iterator<Item = usize> + '_ {
        self.on_node.iter().flatten().copied()
    }

    /// The live job (running or queued) behind `handle`.
    fn job_of(&self, handle: JobId) -> Option<usize> {
        self.by_handle
            .get(handle.index())
            .copied()
            .filter(|&i| matches!(self.jobs[i].phase, Phase::Running | Phase::Queued))
    }

    /// Whether the run is over: nothing left to arrive, and nothing left to run or no progress
    /// for the idle limit ([`Simulator::unfinished`] says which jobs that leaves).
    fn over(&self) -> bool {
        let idle = self.now_s - self.last_activity_s >= self.config.idle_limit_s;
        self.next_arrival >= self.jobs.len()
            && ((self.on_node.iter().all(Vec::is_empty) && self.queue.is_empty()) || idle)
    }

    /// When the run ended, or must end, with jobs unfinished: which, and why.
    pub fn unfinished(&self) -> Option<String> {
        let left = self.jobs.iter().filter(|j| matches!(j.phase, Phase::Queued | Phase::Running)).count();
        if left == 0 {
            return None;
        }
        let (running, queued) = (self.on_node.iter().map(Vec::len).sum::<usize>(), self.queue.len());
        let idle = self.now_s - self.last_activity_s;
        let why = if running > 0 {
            "the jobs that ran were restarted before any work, again and again"
        } else {
            "nothing placed the jobs that wait"
        };
        Some(format!(
            "{left} jobs never finished ({running} running, {queued} queued): no job made progress for {idle:.0} s of \
             simulated time ({why})"
        ))
    }
}

/// CFS on one node: equal shares of `capacity`, each capped by its demand, with what a job
/// cannot use flowing to the others.
pub fn cfs_shares(capacity: f64, caps: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..caps.len()).collect();
    order.sort_by(|&a, &b| caps[a].total_cmp(&caps[b]).then(a.cmp(&b)));
    let mut shares = vec![0.0; caps.len()];
    let mut left = capacity;
    for (k, &i) in order.iter().enumerate() {
        let fair = left / (caps.len() - k) as f64;
        shares[i] = caps[i].max(0.0).min(fair);
        left -= shares[i];
    }
    shares
}

fn secs_to_ms(s: f64) -> u64 {
    (s * 1000.0).round() as u64
}

/// The declaration a policy sees for a planned job.
fn job_spec(plan: &JobPlan) -> wit::JobSpec {
    let (metric, direction) = if plan.kind == wit::JobKind::Inference {
        ("latency-ms", wit::Direction::LowerIsBetter)
    } else {
        plan.metric()
    };
    wit::JobSpec {
        handle: JobId(0),
        name: plan.name.clone(),
        model: plan.model_name().into(),
        kind: plan.kind,
        metrics: vec![wit::MetricSpec { name: metric.into(), direction }],
        tiers: plan.tiers.map(|(deliverable, final_)| wit::Tiers { deliverable, final_ }),
        qoe_target: plan.qoe_target,
        max_epochs: plan.max_epochs,
        labels: if plan.disruptible {
            Vec::new()
        } else {
            vec![(wasmsched_core::declare::OPT_OUT_LABEL.into(), "false".into())]
        },
        arrival_ms: secs_to_ms(plan.arrival_s),
        gpus: plan.gpus,
        replicas: plan.replicas.max(1),
        scaling: if plan.elastic {
            elastic_scaling(plan.model)
        } else if plan.kind == wit::JobKind::Training && plan.gpus > 0 {
            // A rigid GPU job declares its one batch size, as the contract has it.
            wit::Scaling { batch_size_min: plan.batch_size, batch_size_max: plan.batch_size, ..wit::Scaling::rigid() }
        } else {
            wit::Scaling::rigid()
        },
        tenant: plan.tenant.clone(),
        requests: wit::Resources::NONE,
        node_selector: Vec::new(),
    }
}

/// What an elastic job of `model` runs at: one GPU up to as many as its largest batch feeds at
/// the smallest per-GPU batch (64 at most), at any batch size its curves were measured between.
fn elastic_scaling(model: model::Model) -> wit::Scaling {
    let most = model.key().most_gpus_fed().min(wasmsched_core::world::MAX_GPU_COUNTS as u32);
    wit::Scaling {
        gpu_counts: (1..=most).collect(),
        batch_size_min: model.default_batch_size(),
        batch_size_max: model.max_batch_size(),
    }
}

#[cfg(test)]
mod tests;
