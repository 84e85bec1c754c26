//! The simulator as the loop sees it ([`Backend`]): what an observation reports of every
//! running job and GPU, and how a policy's actions take effect.

use wasmsched_core::backend::{ApplyError, Backend, DefaultPlacement, Placer, Progress};
use wasmsched_core::bindings::wit::{self, ActionKind};
use wasmsched_core::world::{GpuSlot, World};
use wasmsched_rules::{JobId, NodeId};

use super::{Phase, Simulator, secs_to_ms};

impl Backend for Simulator {
    fn set_placer(&mut self, by: Placer) {
        self.placer = by;
    }

    fn observe(&mut self, world: &mut World, until_ms: u64) -> bool {
        if world.nodes().is_empty() {
            for n in &self.nodes {
                world.add_node(wit::Node {
                    name: n.name.clone(),
                    cpu_millicores: n.cpu_millicores,
                    memory_bytes: n.memory_bytes,
                    gpu_memory_bytes: vec![n.gpu_memory_bytes; n.gpus as usize],
                    gpu_type: n.gpu_type.clone(),
                    labels: Vec::new(),
                    domains: n.domains.clone(),
                });
            }
        }
        let from_s = self.now_s;
        let until_s = until_ms as f64 / 1000.0;
        if self.placer == Placer::Backend {
            // The policy may have stopped placing (it failed, or was swapped): start what fits.
            world.set_time_ms(secs_to_ms(self.now_s));
            self.place_queued(world);
        }
        world.set_time_ms(until_ms);
        self.advance(until_s, world);
        for h in self.ended.drain(..) {
            world.remove_job(h);
        }
        let interval = (until_s - from_s).max(1e-9);
        let running: Vec<usize> = self.running().collect();
        // Each GPU's use as it stands at the end of the interval, as NVML would tell it: busy
        // (100 %) while any job computes on it, the memory its holders take, and per job the
        // share of its compute the job keeps busy (its demand times its speed there).
        let mut gpu_used = vec![0.0; running.len()];
        for (node, spec) in self.nodes.iter().enumerate() {
            for index in 0..spec.gpus {
                let gpu = GpuSlot { node: NodeId(node as u32), index };
                let mut busy = false;
                for (i, _, used) in self.gpu_use(gpu) {
                    busy = true;
                    if let Some(k) = running.iter().position(|&r| r == i) {
                        gpu_used[k] = f64::max(gpu_used[k], used);
                    }
                }
                let memory: u64 =
                    self.holders_of(gpu).iter().filter_map(|&i| self.jobs[i].gpu_kind).map(|(_, b)| b).sum();
                world.set_gpu_use(NodeId(node as u32), index, if busy { 100.0 } else { 0.0 }, memory);
            }
        }
        for (k, i) in running.into_iter().enumerate() {
            let j = &mut self.jobs[i];
            let Some(state) = j.handle.and_then(|h| world.state_mut(h)) else { continue };
            state.node = j.node;
            state.cpu_used_millicores = (1000.0 * j.used_core_s / interval).round() as u64;
            state.memory_used_bytes = j.memory_bytes;
            state.cpu_limit_millicores = j.limit_cores.map(|c| (c * 1000.0).round() as u64);
            if state.gpus != j.gpus {
                state.gpus.clone_from(&j.gpus);
            }
            state.gpu_share_percent = j.gpu_share;
            state.gpu_used_percent = (100.0 * gpu_used[k]) as f32;
            state.run_ms = secs_to_ms(j.run_s);
            state.gpu_ms = secs_to_ms(j.gpu_s);
            state.batch_size = j.gpu.map_or(0, |g| g.batch_size());
            j.used_core_s = 0.0;
        }
        if self.over()
            && let Some(why) = self.unfinished()
        {
            tracing::warn!("{why}; the run ends");
        }
        !self.over()
    }

    fn placement(&mut self) -> Option<&mut dyn DefaultPlacement> {
        Some(self)
    }

    fn progress(&self) -> Option<&dyn Progress> {
        Some(self)
    }

    fn apply(&mut self, actions: &[wit::Action], world: &mut World) -> Vec<ApplyError> {
        let mut errors = Vec::new();
        let mut touched: Vec<NodeId> = Vec::new();
        for action in actions {
            if let Err(reason) = self.apply_one(action, world, &mut touched) {
                errors.push(ApplyError { job: action.job, reason });
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for node in touched {
            self.reshare(node);
        }
        for h in self.ended.drain(..) {
            world.remove_job(h);
        }
        if self.placer == Placer::Backend {
            self.place_queued(world);
        }
        for action in actions {
            let Some(j) = self.job_of(action.job).map(|i| &self.jobs[i]).filter(|j| j.phase == Phase::Running) else {
                continue;
            };
            if let Some(state) = world.state_mut(action.job) {
                state.cpu_limit_millicores = j.limit_cores.map(|c| (c * 1000.0).round() as u64);
                state.node = j.node;
            }
        }
        errors
    }
}

impl Simulator {
    /// Put one validated action into force; the nodes whose GPU or CPU sharing it changed go
    /// to `touched`. Err says why it could not.
    fn apply_one(&mut self, action: &wit::Action, world: &mut World, touched: &mut Vec<NodeId>) -> Result<(), String> {
        let Some(i) = self.job_of(action.job) else { return Err("the job has ended".into()) };
        let node = self.jobs[i].node;
        let running = self.jobs[i].phase == Phase::Running;
        match action.kind {
            ActionKind::Place(_) if running => return Err("the job already runs".into()),
            ActionKind::Place(ref p) => {
                let gpus = GpuSlot::of(&p.nodes);
                if let Some(why) = self.memory_refusal(i, &gpus) {
                    return Err(format!("not placed: {why}"));
                }
                let first = p.nodes.first().map_or(NodeId(0), |e| e.node);
                self.start(i, first, gpus, world);
            }
            ActionKind::Stop => self.finish(i, true, world),
            _ if !running => return Err("the job is queued, not running".into()),
            ActionKind::Preempt => {
                self.preempt(i, world);
            }
            ActionKind::SetCpu(limit) => {
                self.catch_up(i);
                self.jobs[i].limit_cores = limit.map(|m| m as f64 / 1000.0);
                touched.push(node);
            }
            ActionKind::SetMemory(limit) => {
                if let Some(s) = world.state_mut(action.job) {
                    s.memory_limit_bytes = limit;
                }
            }
            ActionKind::Migrate(to) => {
                let held = self.jobs[i].gpus.len();
                self.restart_on(i, to, |sim| sim.free_gpus(to, held), world);
                touched.extend([node, to]);
            }
            ActionKind::Resize(ref r) => {
                let to = self.resize(i, action.job, r, world)?;
                touched.extend([node, to]);
            }
            ActionKind::Deliver => {
                let j = &mut self.jobs[i];
                j.delivered_s.get_or_insert(self.now_s - j.plan.arrival_s);
            }
            ActionKind::SetGpuShare(share) => {
                // Resharing brings every job up to the clock at its old speed first.
                let gpus = self.jobs[i].gpus.clone();
                self.jobs[i].gpu_share = Some(share.percent);
                self.reshare_around(node, &gpus);
            }
        }
        Ok(())
    }

    /// Restart running job `i` (handle `job`) on the GPUs `r` names, at the batch size it names
    /// if any. Returns the node it runs on now.
    fn resize(&mut self, i: usize, job: JobId, r: &wit::Resize, world: &mut World) -> Result<NodeId, String> {
        let gpus = GpuSlot::of(&r.placement.nodes);
        let mine = |g: &GpuSlot| self.jobs[i].gpus.contains(g);
        let fresh: Vec<GpuSlot> = gpus.iter().filter(|g| !mine(g)).copied().collect();
        if let Some(why) = self.memory_refusal(i, &fresh) {
            return Err(format!("not resized: {why}"));
        }
        let to = r.placement.nodes.first().map_or(self.jobs[i].node, |e| e.node);
        if r.batch_size.is_some() {
            self.jobs[i].pinned_batch = r.batch_size;
        }
        self.restart_on(i, to, move |_| gpus, world);
        let batch = self.jobs[i].gpu.map(|g| g.batch_size()).or(r.batch_size);
        if let (Some(batch_size), Some(s)) = (batch, world.state_mut(job)) {
            s.batch_size = batch_size;
        }
        Ok(to)
    }
}

impl DefaultPlacement for Simulator {
    fn startable(&self, world: &World) -> Vec<JobId> {
        Simulator::startable(self, world)
    }

    fn rescue(&mut self, jobs: &[JobId], world: &mut World) -> Vec<JobId> {
        Simulator::rescue(self, jobs, world)
    }
}

/// The simulator knows when any job last worked, and its GPU jobs keep every step.
impl Progress for Simulator {
    fn last_progress_ms(&self) -> Option<u64> {
        Some(secs_to_ms(self.last_progress_s()))
    }

    fn progressed_since(&self, job: JobId, since_ms: Option<u64>, world: &World) -> bool {
        self.kept_work_since(job, since_ms, world)
    }
}
