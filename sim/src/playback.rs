//! The replay backend: a telemetry recording's ticks ([`wasmsched_core::recording`]) played back
//! through the one loop. Observing rebuilds the world tick by tick from the recorded deltas;
//! applying changes nothing. `wasmsched_lab::replay` opens a recording and runs a policy over it,
//! diffing its decisions against the recorded ones.

use wasmsched_core::backend::{ApplyError, Backend};
use wasmsched_core::bindings::wit;
use wasmsched_core::recording::{RecordedDecision, RecordedTick};
use wasmsched_core::world::{GpuSlot, NodeId, World};

/// A recording being played back.
pub struct Playback {
    ticks: std::vec::IntoIter<RecordedTick>,
    played: Vec<Option<RecordedDecision>>,
}

impl Playback {
    /// Play `ticks` back, in order.
    pub fn new(ticks: Vec<RecordedTick>) -> Playback {
        Playback { ticks: ticks.into_iter(), played: Vec::new() }
    }

    /// The recorded decisions of the ticks played so far, in order.
    pub fn recorded(&self) -> &[Option<RecordedDecision>] {
        &self.played
    }
}

impl Backend for Playback {
    fn observe(&mut self, world: &mut World, until_ms: u64) -> bool {
        let mut any = false;
        while self.ticks.as_slice().first().is_some_and(|t| t.snapshot.time_ms <= until_ms) {
            let t = self.ticks.next().expect("just peeked");
            apply_delta(world, &t.snapshot);
            self.played.push(t.decision);
            any = true;
        }
        world.set_time_ms(until_ms);
        any
    }

    fn apply(&mut self, _actions: &[wit::Action], _world: &mut World) -> Vec<ApplyError> {
        Vec::new()
    }
}

/// Fold one recorded snapshot into the world it was cut from.
pub fn apply_delta(world: &mut World, s: &wit::Snapshot) {
    world.set_time_ms(s.time_ms);
    if let Some(nodes) = &s.nodes {
        for (n, node) in nodes.iter().enumerate() {
            if n < world.nodes().len() {
                world.set_node(NodeId(n as u32), node.clone());
            } else {
                world.add_node(node.clone());
            }
        }
    }
    for &h in &s.removed {
        world.remove_job(h);
    }
    // The room as recorded (a recording made before 0.4.0 has none: the world counts it).
    let r = &s.room;
    let recorded = !r.cpu_millicores.is_empty() && r.cpu_millicores.len() == world.nodes().len();
    world.set_room(recorded.then(|| {
        (0..r.cpu_millicores.len())
            .map(|n| wasmsched_core::world::Room {
                cpu: r.cpu_millicores[n],
                memory: r.memory_bytes[n],
                pods: r.pods[n],
            })
            .collect()
    }));
    let c = &s.jobs;
    for spec in &s.added {
        let node = c.handle.iter().position(|&h| h == spec.handle).map_or(NodeId(0), |i| c.node[i]);
        if !world.insert_job(spec.clone(), node) {
            tracing::warn!(job = %spec.handle, "recording adds a job whose handle is not new; skipped");
        }
    }
    // Queued jobs are added like running ones and then sent to the queue.
    for &h in &s.queue.handle {
        world.requeue_job(h, wit::WaitReason::NeverStarted);
    }
    for (i, &h) in s.queue.handle.iter().enumerate() {
        let Some(state) = world.state_mut(h) else { continue };
        state.queued = Some(s.queue.reason[i]);
        state.since_ms = s.queue.since_ms[i];
        state.run_ms = s.queue.run_ms[i];
        state.gpu_ms = s.queue.gpu_ms[i];
    }
    running_jobs(world, c);
    let mut k = 0;
    let gpus: Vec<(NodeId, u32)> = world
        .nodes()
        .iter()
        .enumerate()
        .flat_map(|(n, node)| (0..node.gpu_memory_bytes.len() as u32).map(move |g| (NodeId(n as u32), g)))
        .collect();
    for (&(node, gpu), (&util, &mem)) in
        gpus.iter().zip(s.gpus.utilisation_percent.iter().zip(&s.gpus.memory_used_bytes))
    {
        world.set_gpu_use(node, gpu, util, mem);
    }
    let p = &s.progress;
    for i in 0..p.job.len() {
        let n = usize::from(p.value_count[i]);
        let values = p.values.get(k..k + n).map(<[f64]>::to_vec).unwrap_or_default();
        k += n;
        world.record_at(p.job[i], p.time_ms[i], p.epoch[i], values);
    }
}

/// The running jobs' columns of a snapshot into the world: each started where it was queued,
/// its GPUs, service, limits and use as recorded.
fn running_jobs(world: &mut World, c: &wit::JobStates) {
    let mut first_gpu = 0usize;
    for (i, &h) in c.handle.iter().enumerate() {
        let held = first_gpu..first_gpu + usize::from(c.gpu_count[i]);
        first_gpu = held.end;
        if world.state(h).is_some_and(|s| !s.is_running()) {
            world.start_job(h, c.node[i], Vec::new());
        }
        let Some(state) = world.state_mut(h) else { continue };
        state.gpus =
            held.filter_map(|k| Some(GpuSlot { node: *c.gpu_node.get(k)?, index: *c.gpu_index.get(k)? })).collect();
        state.run_ms = c.run_ms[i];
        state.gpu_ms = c.gpu_ms[i];
        state.node = c.node[i];
        state.cpu_limit_millicores = Some(c.cpu_limit_millicores[i]).filter(|&m| m > 0);
        state.memory_limit_bytes = Some(c.memory_limit_bytes[i]).filter(|&b| b > 0);
        state.cpu_used_millicores = c.cpu_used_millicores[i];
        state.memory_used_bytes = c.memory_used_bytes[i];
        state.gpu_share_percent = Some(c.gpu_share_percent[i]).filter(|&p| p > 0);
        state.gpu_used_percent = c.gpu_used_percent[i];
    }
}
