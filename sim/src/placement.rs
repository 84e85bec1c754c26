//! The simulator's scheduling: the queue jobs wait in on arrival, the default placement
//! (first come, first served, first fit on whole GPUs), starting a job where a policy or the
//! default placed it, preemption, and the GPU book-keeping (who holds which GPU, who shares).

use wasmsched_core::bindings::wit;
use wasmsched_core::world::{GpuSlot, World};
use wasmsched_rules::fit::{Ask, could_ever_fit, first_fit};
use wasmsched_rules::{JobId, Ledger, NodeId};

use super::throughput::{GpuConfig, GpuType, shape_of};
use super::workload::JobPlan;
use super::{FEED_CORES_PER_GPU, Phase, Placer, Simulator, colocation, goodput, job_spec, secs_to_ms};

impl Simulator {
    /// The running jobs that hold `gpu`, in the order they started.
    pub(super) fn holders_of(&self, gpu: GpuSlot) -> Vec<usize> {
        if self.book.holders(gpu.node, gpu.index).is_empty() {
            return Vec::new();
        }
        self.running().filter(|&i| self.jobs[i].gpus.contains(&gpu)).collect()
    }

    /// How `gpu` is shared now: each job computing on it (holders restarting do not) with its
    /// speed and the share of the GPU's compute it uses ([`colocation`]). A job the model
    /// cannot type (a calibrated job holding a GPU) time-slices.
    pub(super) fn gpu_use(&self, gpu: GpuSlot) -> Vec<(usize, f64, f64)> {
        let now = self.now_s;
        let on: Vec<usize> = self.holders_of(gpu).into_iter().filter(|&i| self.jobs[i].runnable(now)).collect();
        let holders: Option<Vec<colocation::Holder>> = on
            .iter()
            .map(|&i| {
                let j = &self.jobs[i];
                let share = j.gpu_share.map(|p| f64::from(p) / 100.0);
                j.gpu_kind.map(|(kind, _)| colocation::Holder { kind, share })
            })
            .collect();
        let Some(holders) = holders else {
            let k = on.len() as f64;
            return on.into_iter().map(|i| (i, 1.0 / k, 1.0 / k)).collect();
        };
        let speeds = colocation::speeds(&holders);
        let used = colocation::used(&holders, &speeds);
        on.into_iter().zip(speeds).zip(used).map(|((i, s), u)| (i, s, u)).collect()
    }

    /// Job `i`'s speed on its GPUs as a fraction of alone: on the slowest of them (1 without).
    pub(super) fn gpu_speed(&self, i: usize) -> f64 {
        let speed_on =
            |g: &GpuSlot| self.gpu_use(*g).into_iter().find(|&(k, _, _)| k == i).map_or(1.0, |(_, speed, _)| speed);
        self.jobs[i].gpus.iter().map(speed_on).fold(1.0, f64::min)
    }

    /// Why job `i` cannot join the jobs holding its GPUs `gpus`: the GPU memory would not
    /// hold them all (Gavel could not run the pair, or the footprints add up to more).
    pub(super) fn memory_refusal(&self, i: usize, gpus: &[GpuSlot]) -> Option<String> {
        let (kind, mine) = self.jobs[i].gpu_kind?;
        for &g in gpus {
            let others: Vec<usize> = self.holders_of(g).into_iter().filter(|&k| k != i).collect();
            let capacity = self.nodes.get(g.node.index())?.gpu_memory_bytes;
            let mut held = 0;
            for &k in &others {
                let Some((theirs, bytes)) = self.jobs[k].gpu_kind else { continue };
                held += bytes;
                if !colocation::measured_to_fit(kind, theirs) {
                    return Some(format!(
                        "GPU {} of node {} holds {} ({}), which ran out of memory beside {} when measured",
                        g.index,
                        g.node,
                        self.jobs[k].plan.name,
                        colocation::type_name(theirs),
                        colocation::type_name(kind)
                    ));
                }
            }
            if !others.is_empty() && held + mine > capacity {
                let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
                return Some(format!(
                    "GPU {} of node {} has {:.1} GiB of memory: {:.1} GiB held and {:.1} GiB asked do not fit",
                    g.index,
                    g.node,
                    gib(capacity),
                    gib(held),
                    gib(mine)
                ));
            }
        }
        None
    }

    /// The first `n` GPUs of `node` that no running job holds.
    pub(super) fn free_gpus(&self, node: NodeId, n: usize) -> Vec<GpuSlot> {
        self.book.free_on(node).take(n).map(|index| GpuSlot { node, index }).collect()
    }

    /// The nodes in the order the default placement tries them: the pinned node alone, or
    /// every node, least loaded first (CPU asked for over capacity; the lowest index on a tie).
    pub(super) fn node_order(&self, plan: &JobPlan) -> Vec<NodeId> {
        if let Some(n) = plan.node {
            return vec![NodeId(n)];
        }
        let load = |n: usize| -> f64 {
            let cores: f64 = self.on_node[n].iter().map(|&i| self.jobs[i].max_cores).sum();
            cores / (self.nodes[n].cpu_millicores as f64 / 1000.0).max(1e-9)
        };
        let mut order: Vec<(f64, u32)> = (0..self.nodes.len()).map(|n| (load(n), n as u32)).collect();
        order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        order.into_iter().map(|(_, n)| NodeId(n)).collect()
    }

    /// First fit for job `i` over the nodes in [`Self::node_order`]: its first node and GPUs;
    /// None when it does not fit now.
    pub(super) fn fit(&self, i: usize) -> Option<(NodeId, Vec<GpuSlot>)> {
        let plan = &self.jobs[i].plan;
        let ask = Ask { gpus: plan.gpus, replicas: plan.replicas };
        let entries = first_fit(&self.book, ask, &self.node_order(plan))?;
        Some((entries[0].node, GpuSlot::of(&entries)))
    }

    /// The default placement: start queued jobs in arrival order while the first one fits. A
    /// job that could not fit even on the empty cluster, or whose tenant is at its limit
    /// ([`wasmsched_core::tenants`]), never blocks the ones behind it.
    pub(super) fn place_queued(&mut self, world: &mut World) {
        let mut ledger = world.ledger();
        let mut k = 0;
        while let Some(&i) = self.queue.get(k) {
            let tenant = self.tenant_room(i, world, &ledger);
            if tenant.is_err() {
                k += 1;
            } else if let Some((node, gpus)) = self.fit(i) {
                ledger.hold(tenant.unwrap_or_default(), gpus.len() as u64);
                self.start(i, node, gpus, world);
            } else if self.could_ever_fit(i) {
                break;
            } else {
                k += 1;
            }
        }
    }

    /// Job `i`'s tenant's index when it may take the GPUs job `i` asks for; Err when that
    /// would pass its limit.
    fn tenant_room(&self, i: usize, world: &World, ledger: &Ledger) -> Result<usize, ()> {
        let Some(tenant) = self.jobs[i].handle.and_then(|h| world.state(h)).map(|s| s.tenant as usize) else {
            return Ok(0);
        };
        ledger.check(tenant, u64::from(self.jobs[i].plan.gpus)).map(|()| tenant).map_err(drop)
    }

    /// The queued jobs the default placement would start now, in its order, as handles: a dry
    /// run of [`Self::place_queued`] on a copy of the GPU book.
    pub(super) fn startable(&self, world: &World) -> Vec<JobId> {
        let mut book = self.book.clone();
        let mut ledger = world.ledger();
        let mut startable = Vec::new();
        for &i in &self.queue {
            let plan = &self.jobs[i].plan;
            let Ok(tenant) = self.tenant_room(i, world, &ledger) else { continue };
            match first_fit(&book, Ask { gpus: plan.gpus, replicas: plan.replicas }, &self.node_order(plan)) {
                Some(entries) => {
                    book.take(&entries, holder(i));
                    ledger.hold(tenant, u64::from(plan.gpus));
                    startable.extend(self.jobs[i].handle);
                }
                None if self.could_ever_fit(i) => break,
                None => {}
            }
        }
        startable
    }

    /// Start queued `handles` with the default placement, in that order, each where it fits
    /// now and its tenant has room: the watchdog's rescue. Returns those started.
    pub(super) fn rescue(&mut self, handles: &[JobId], world: &mut World) -> Vec<JobId> {
        let mut ledger = world.ledger();
        let mut started = Vec::new();
        for &h in handles {
            let Some(i) = self.job_of(h).filter(|&i| self.jobs[i].phase == Phase::Queued) else { continue };
            let Ok(tenant) = self.tenant_room(i, world, &ledger) else { continue };
            if let Some((node, gpus)) = self.fit(i) {
                ledger.hold(tenant, gpus.len() as u64);
                self.start(i, node, gpus, world);
                started.push(h);
            }
        }
        started
    }

    /// Whether job `i` fits the cluster with every GPU free.
    pub(super) fn could_ever_fit(&self, i: usize) -> bool {
        let plan = &self.jobs[i].plan;
        let nodes: Vec<NodeId> =
            plan.node.map_or_else(|| (0..self.nodes.len() as u32).map(NodeId).collect(), |n| vec![NodeId(n)]);
        could_ever_fit(&self.book, Ask { gpus: plan.gpus, replicas: plan.replicas }, &nodes)
    }

    /// A job arrives: it waits in the queue (and the default placement may start it now).
    pub(super) fn arrive(&mut self, i: usize, world: &mut World) {
        let spec = job_spec(&self.jobs[i].plan);
        let handle = world.enqueue_job(spec);
        if let Some(s) = world.state_mut(handle) {
            s.since_ms = secs_to_ms(self.now_s);
        }
        self.by_handle.push(i);
        debug_assert_eq!(self.by_handle.len() as u32, handle.0 + 1, "the simulator is the world's only source of jobs");
        let noise = self.epoch_noise(i);
        let j = &mut self.jobs[i];
        j.handle = Some(handle);
        j.phase = Phase::Queued;
        j.work_left = j.epoch_work(1) * noise;
        self.queue.push(i);
        self.last_activity_s = self.now_s;
        if self.placer == Placer::Backend {
            self.place_queued(world);
        }
    }

    /// Start queued job `i` on `node` (its first) with `gpus`. Before it runs it pays: after a
    /// preemption, the restart cost; a GPU job, its start-up every time; a calibrated job, on
    /// its first start, its measured time from creation to its first epoch (none for a
    /// built-in CPU model).
    pub(super) fn start(&mut self, i: usize, node: NodeId, gpus: Vec<GpuSlot>, world: &mut World) {
        self.queue.retain(|&k| k != i);
        for g in &gpus {
            self.book.hold(g.node, g.index, holder(i));
        }
        if let Some(h) = self.jobs[i].handle {
            world.start_job(h, node, gpus.clone());
        }
        let now = self.now_s;
        let restart = self.restart_cost(i);
        let j = &mut self.jobs[i];
        let first = j.started_s.is_none();
        let pause = if first && j.gpu.is_none() { j.plan.startup_s() } else { restart };
        if pause > 0.0 {
            j.paused_until = now + pause;
        }
        if first {
            j.started_s = Some(now);
            j.start_s = now.max(j.plan.arrival_s);
            j.last_epoch_end_s = now;
        }
        j.node = node;
        j.gpus = gpus;
        self.set_step_time(i);
        let j = &mut self.jobs[i];
        j.phase = Phase::Running;
        j.last_update_s = now;
        self.on_node[node.index()].push(i);
        let gpus = self.jobs[i].gpus.clone();
        self.reshare_around(node, &gpus);
    }

    /// What a (re)start of job `i` costs before it runs.
    pub(super) fn restart_cost(&self, i: usize) -> f64 {
        let j = &self.jobs[i];
        match j.gpu {
            Some(_) if j.plan.by_goodput() => j.plan.model.restore_s(),
            Some(_) => self.config.gpu_start_s,
            None => self.config.restart_cost_s,
        }
    }

    /// Restart running job `i` from its checkpoint on node `to` (its first) and the GPUs
    /// `gpus` picks once its own are released (a migration, a resize): it pays the restart
    /// cost, and a CPU job loses the epoch in progress.
    pub(super) fn restart_on(
        &mut self,
        i: usize,
        to: NodeId,
        gpus: impl FnOnce(&Self) -> Vec<GpuSlot>,
        world: &mut World,
    ) {
        let (from, old_gpus) = (self.jobs[i].node, self.jobs[i].gpus.clone());
        self.release(i);
        let gpus = gpus(self);
        for g in &gpus {
            self.book.hold(g.node, g.index, holder(i));
        }
        self.on_node[to.index()].push(i);
        if let Some(s) = self.jobs[i].handle.and_then(|h| world.state_mut(h)) {
            s.gpus.clone_from(&gpus);
        }
        self.jobs[i].gpus = gpus;
        self.reshare_around(from, &old_gpus);
        let restart = self.now_s + self.restart_cost(i);
        self.set_step_time(i);
        let j = &mut self.jobs[i];
        if j.gpu.is_none() {
            j.work_left = j.epoch_work(j.epoch + 1);
        }
        j.paused_until = restart;
        j.node = to;
        j.migrations += 1;
        j.cores = 0.0;
        j.speed = 0.0;
    }

    /// A GPU job's seconds per step on the GPUs it holds now ([`gpu_step`]); an elastic job
    /// takes the configuration it runs there.
    pub(super) fn set_step_time(&mut self, i: usize) {
        let types = self.gpu_types_of(i);
        // Spread over topology domains, each step pays the slower links between them.
        let slowdown = if self.spans_domains(i) { 1.0 / colocation::cross_domain_speed() } else { 1.0 };
        let j = &mut self.jobs[i];
        let Some(config) = j.gpu else { return };
        let shape = shape_of(j.gpus.iter().map(|s| s.node.0));
        match gpu_step(&j.plan, config, j.pinned_batch, &types, &shape, j.epoch + 1) {
            Some((step_s, config)) => {
                j.step_s = step_s * slowdown;
                if j.plan.by_goodput() {
                    j.gpu = Some(config);
                    j.max_cores = f64::from(config.replicas) * FEED_CORES_PER_GPU;
                }
            }
            None => j.step_s = f64::INFINITY,
        }
    }

    /// Whether job `i`'s GPUs lie on nodes of more than one topology domain (the nodes' full
    /// domain lists differ; nodes that name none have no topology).
    fn spans_domains(&self, i: usize) -> bool {
        let mut domains = self.jobs[i].gpus.iter().filter_map(|s| self.nodes.get(s.node.index())).map(|n| &n.domains);
        let Some(first) = domains.next() else { return false };
        domains.any(|d| d != first)
    }

    /// The GPU types of the GPUs job `i` holds, each once.
    fn gpu_types_of(&self, i: usize) -> Vec<GpuType> {
        let mut types: Vec<GpuType> =
            self.jobs[i].gpus.iter().filter_map(|s| self.gpu_types.get(s.node.index()).copied()).collect();
        types.sort_unstable();
        types.dedup();
        types
    }

    /// Job `i` leaves its node and GPUs (it ended, was preempted or moves).
    pub(super) fn release(&mut self, i: usize) {
        self.catch_up(i);
        let node = self.jobs[i].node;
        self.on_node[node.index()].retain(|&k| k != i);
        for g in std::mem::take(&mut self.jobs[i].gpus) {
            self.book.release(g.node, g.index, holder(i));
        }
        self.jobs[i].cores = 0.0;
        self.jobs[i].speed = 0.0;
    }

    /// Checkpoint job `i` and send it back to the queue: a CPU job loses the epoch in progress
    /// (it checkpoints at epoch ends, like our trainer); a GPU job keeps every step (it
    /// checkpoints when told to stop, as elastic DL frameworks do and Pollux's simulator
    /// assumes), and loses its GPU share.
    pub(super) fn preempt(&mut self, i: usize, world: &mut World) {
        let gpus = self.jobs[i].gpus.clone();
        self.release(i);
        let j = &mut self.jobs[i];
        j.phase = Phase::Queued;
        j.preemptions += 1;
        // Its share was of the GPUs it left: placed again, it starts uncapped, as the world
        // says of a job sent back to the queue.
        j.gpu_share = None;
        if j.gpu.is_none() {
            j.work_left = j.epoch_work(j.epoch + 1);
        }
        j.paused_until = 0.0;
        j.version += 1;
        let handle = j.handle;
        if let Some(h) = handle {
            world.requeue_job(h, wit::WaitReason::Preempted);
        }
        // Back in arrival order.
        let pos = self.queue.partition_point(|&k| self.jobs[k].handle < handle);
        self.queue.insert(pos, i);
        self.reshare_around(self.jobs[i].node, &gpus);
    }

    /// Reshare `node`, and the nodes of the running jobs that hold any of `gpus` (their
    /// time-slice of a shared GPU changed).
    pub(super) fn reshare_around(&mut self, node: NodeId, gpus: &[GpuSlot]) {
        let mut nodes = vec![node];
        if gpus.iter().any(|g| !self.book.holders(g.node, g.index).is_empty()) {
            for k in self.running().collect::<Vec<_>>() {
                if self.jobs[k].gpus.iter().any(|g| gpus.contains(g)) {
                    nodes.push(self.jobs[k].node);
                }
            }
        }
        nodes.sort_unstable();
        nodes.dedup();
        for n in nodes {
            self.reshare(n);
        }
    }
}

/// Seconds per unit of work ([`JobPlan::epoch_units`]) of a GPU job of `plan` at its epoch
/// `epoch` on GPUs of `types` (each once) in `shape` (GPUs per node), alone on them, and the
/// configuration it runs there: a rigid job runs `config`; an elastic or tuned one its pinned
/// batch size split over the GPUs, else the best configuration for them. Over several types,
/// the slowest type's. None where it holds no GPU; infinite where it cannot run.
pub fn gpu_step(
    plan: &JobPlan,
    config: GpuConfig,
    pinned_batch: Option<u32>,
    types: &[GpuType],
    shape: &[u32],
    epoch: u32,
) -> Option<(f64, GpuConfig)> {
    if shape.is_empty() {
        return None;
    }
    if !plan.by_goodput() {
        let slowest = types.iter().map(|&t| config.step_s_on(plan.model, t, shape)).fold(f64::NAN, f64::max);
        return Some((if slowest.is_nan() { f64::INFINITY } else { slowest }, config));
    }
    let model = plan.model.key();
    let replicas: u32 = shape.iter().sum();
    let (speed, config) = types
        .iter()
        .map(|&t| {
            let config = match pinned_batch {
                Some(batch) => goodput::split(model, t, batch, replicas),
                None => goodput::best_config(model, t, shape, epoch),
            };
            (goodput::speed(model, t, config, shape, epoch), config)
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))?;
    Some((if speed > 0.0 { 1.0 / speed } else { f64::INFINITY }, config))
}

/// Who holds a GPU in the simulator's book: job `i` of its own list (not the job's handle,
/// which it gets only once it arrives).
fn holder(i: usize) -> JobId {
    JobId(i as u32)
}
