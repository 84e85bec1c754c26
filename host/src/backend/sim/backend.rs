//! The simulator as the loop sees it ([`Backend`]): what an observation reports of every
//! running job and GPU, and how a policy's actions take effect.

use super::{Phase, Simulator, secs_to_ms};
use crate::backend::{ApplyError, Backend, Placement};
use crate::bindings::wit::{self, ActionKind};
use crate::snapshot::{GpuSlot, Telemetry};

impl Backend for Simulator {
    fn set_placement(&mut self, by: Placement) {
        self.placement = by;
    }

    fn observe(&mut self, world: &mut Telemetry, until_ms: u64) -> bool {
        if world.nodes().is_empty() {
            for n in &self.nodes {
                world.add_node(wit::Node {
                    name: n.name.clone(),
                    cpu_millicores: n.cpu_millicores,
                    memory_bytes: n.memory_bytes,
                    gpu_memory_bytes: vec![n.gpu_memory_bytes; n.gpus as usize],
                });
            }
        }
        let from_s = self.now_s;
        let until_s = until_ms as f64 / 1000.0;
        if self.placement == Placement::Backend {
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
        // A GPU is busy while a job that ran this interval is on it; they time-slice it.
        self.gpu_jobs.fill(0);
        for &i in &running {
            let j = &self.jobs[i];
            if j.used_core_s > 0.0 {
                for g in &j.gpus {
                    self.gpu_jobs[self.first_gpu[g.node as usize] + g.index as usize] += 1;
                }
            }
        }
        for i in running {
            let j = &mut self.jobs[i];
            let Some(state) = j.handle.and_then(|h| world.state_mut(h)) else { continue };
            let sharing =
                j.gpus.iter().map(|g| self.gpu_jobs[self.first_gpu[g.node as usize] + g.index as usize]).max();
            state.node = j.node;
            state.cpu_used_millicores = (1000.0 * j.used_core_s / interval).round() as u64;
            state.memory_used_bytes = j.memory_bytes;
            state.cpu_limit_millicores = j.limit_cores.map(|c| (c * 1000.0).round() as u64);
            if state.gpus != j.gpus {
                state.gpus.clone_from(&j.gpus);
            }
            state.gpu_share_percent = j.gpu_share;
            state.gpu_used_percent = match sharing {
                Some(k) if j.used_core_s > 0.0 && k > 0 => 100.0 / k as f32,
                _ => 0.0,
            };
            state.run_ms = secs_to_ms(j.run_s);
            state.gpu_ms = secs_to_ms(j.gpu_s);
            j.used_core_s = 0.0;
        }
        for (node, &first) in self.first_gpu.iter().enumerate() {
            for g in 0..self.nodes[node].gpus as usize {
                let busy = self.gpu_jobs[first + g] > 0;
                if busy != self.gpu_busy[first + g] {
                    self.gpu_busy[first + g] = busy;
                    world.set_gpu_use(node as u32, g as u32, if busy { 100.0 } else { 0.0 }, 0);
                }
            }
        }
        if self.over() && !self.queue.is_empty() {
            tracing::warn!(
                queued = self.queue.len(),
                idle_s = self.config.idle_limit_s,
                "jobs still wait but nothing has run for the idle limit; the run ends"
            );
        }
        !self.over()
    }

    fn apply(&mut self, actions: &[wit::Action], world: &mut Telemetry) -> Vec<ApplyError> {
        let mut errors = Vec::new();
        let mut touched: Vec<u32> = Vec::new();
        for action in actions {
            let Some(i) = self.job_of(action.job) else {
                errors.push(ApplyError { job: action.job, reason: "the job has ended".into() });
                continue;
            };
            let node = self.jobs[i].node;
            let running = self.jobs[i].phase == Phase::Running;
            match &action.kind {
                ActionKind::Place(p) => {
                    if running {
                        errors.push(ApplyError { job: action.job, reason: "the job already runs".into() });
                        continue;
                    }
                    let gpus: Vec<GpuSlot> = p
                        .nodes
                        .iter()
                        .flat_map(|e| e.gpus.iter().map(|&index| GpuSlot { node: e.node, index }))
                        .collect();
                    let first = p.nodes.first().map_or(0, |e| e.node);
                    self.start(i, first, gpus, world);
                    continue;
                }
                ActionKind::Stop if !running => {
                    self.finish(i, true, world);
                    continue;
                }
                _ if !running => {
                    errors.push(ApplyError { job: action.job, reason: "the job is queued, not running".into() });
                    continue;
                }
                _ => {}
            }
            match action.kind {
                ActionKind::Place(_) => {}
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
                    let old_gpus = self.jobs[i].gpus.clone();
                    self.release(i);
                    let gpus = self.free_gpus(to, held);
                    for g in &gpus {
                        let at = self.gpu_at(*g);
                        self.gpu_holders[at] += 1;
                    }
                    self.on_node[to as usize].push(i);
                    if let Some(s) = world.state_mut(action.job) {
                        s.gpus.clone_from(&gpus);
                    }
                    self.jobs[i].gpus = gpus;
                    self.reshare_around(node, &old_gpus);
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
                    touched.extend([node, to]);
                }
                ActionKind::Deliver => {
                    let j = &mut self.jobs[i];
                    j.delivered_s.get_or_insert(self.now_s - j.plan.arrival_s);
                }
                ActionKind::Stop => self.finish(i, true, world),
                ActionKind::SetGpuShare(share) => self.jobs[i].gpu_share = Some(share.percent),
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
        if self.placement == Placement::Backend {
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
