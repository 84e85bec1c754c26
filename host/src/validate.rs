//! Every action a policy returns is checked before it is applied: an unknown job or node, a
//! value out of range, more than the node has. A rejected action carries its reason; the
//! rest of the decision still applies. A decision far larger than the job count is refused
//! whole.

use crate::bindings::wit::{self, ActionKind};
use crate::snapshot::{GpuSlot, Telemetry};

/// Docker refuses CPU limits below a hundredth of a core.
pub const MIN_CPU_MILLICORES: u64 = 10;
/// Docker refuses memory limits below 6 MiB.
pub const MIN_MEMORY_BYTES: u64 = 6 << 20;
/// The longest reason kept in the audit log, in bytes.
pub const MAX_REASON_BYTES: usize = 256;

/// The most actions a decision may hold for `jobs` live jobs.
pub fn max_actions(jobs: usize) -> usize {
    64 + 8 * jobs
}

/// How many GPUs each piece of a job of `gpus` GPUs in `replicas` pieces takes on a node:
/// `gpus / replicas`, or single GPUs when that does not divide.
pub fn gpus_per_piece(gpus: u32, replicas: u32) -> u32 {
    let pieces = replicas.max(1);
    if gpus.is_multiple_of(pieces) { (gpus / pieces).max(1) } else { 1 }
}

/// An action that will not be applied, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Rejection {
    /// The action as the policy sent it.
    pub action: wit::Action,
    /// Why it was refused, for the log and the audit trail.
    pub reason: String,
}

/// A decision after validation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Checked {
    /// The actions to apply, in the policy's order, reasons trimmed.
    pub accepted: Vec<wit::Action>,
    /// The actions refused, with reasons.
    pub rejected: Vec<Rejection>,
}

/// Why a whole decision was refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("decision has {actions} actions; at most {limit} are accepted for {jobs} jobs")]
pub struct Oversized {
    /// How many it held.
    pub actions: usize,
    /// How many are accepted.
    pub limit: usize,
    /// How many jobs were live.
    pub jobs: usize,
}

/// Check a decision against the world it was made for. Actions are checked in order against
/// the world as the earlier accepted ones leave it: a preemption frees GPUs that a later
/// placement in the same decision may take.
pub fn check(decision: wit::Decision, world: &Telemetry) -> Result<Checked, Oversized> {
    let jobs = world.job_count() + world.queue_len();
    let limit = max_actions(jobs);
    if decision.actions.len() > limit {
        return Err(Oversized { actions: decision.actions.len(), limit, jobs });
    }
    let mut checked = Checked::default();
    let mut scratch = Scratch::new(world);
    for mut action in decision.actions {
        truncate_marked(&mut action.reason, MAX_REASON_BYTES);
        match problem(&action, world, &scratch) {
            None => {
                scratch.commit(&action, world);
                checked.accepted.push(action);
            }
            Some(reason) => checked.rejected.push(Rejection { action, reason }),
        }
    }
    Ok(checked)
}

/// The GPUs held and the jobs moved as the decision's accepted actions so far leave them.
struct Scratch {
    /// Per GPU (in the columns' order), a job that holds it, and how many do.
    holder: Vec<(Option<u32>, u32)>,
    /// Jobs placed, preempted or stopped by this decision.
    moved: Vec<u32>,
}

impl Scratch {
    fn new(world: &Telemetry) -> Self {
        let mut holder = vec![(None, 0); world.gpu_count()];
        for (_, s) in world.jobs() {
            for g in &s.gpus {
                if let Some(i) = world.gpu_position(*g) {
                    holder[i].0.get_or_insert(s.handle);
                    holder[i].1 += 1;
                }
            }
        }
        Scratch { holder, moved: Vec::new() }
    }

    fn commit(&mut self, action: &wit::Action, world: &Telemetry) {
        match &action.kind {
            ActionKind::Place(p) => {
                for entry in &p.nodes {
                    for &index in &entry.gpus {
                        if let Some(i) = world.gpu_position(GpuSlot { node: entry.node, index }) {
                            self.holder[i].0.get_or_insert(action.job);
                            self.holder[i].1 += 1;
                        }
                    }
                }
            }
            ActionKind::Preempt | ActionKind::Stop => {
                for g in world.state(action.job).map(|s| s.gpus.as_slice()).unwrap_or_default() {
                    if let Some(i) = world.gpu_position(*g) {
                        let h = &mut self.holder[i];
                        h.1 = h.1.saturating_sub(1);
                        if h.0 == Some(action.job) || h.1 == 0 {
                            h.0 = None;
                        }
                    }
                }
            }
            _ => return,
        }
        self.moved.push(action.job);
    }

    fn free_on(&self, world: &Telemetry, node: u32) -> usize {
        let count = world.nodes().get(node as usize).map_or(0, |n| n.gpu_memory_bytes.len());
        (0..count as u32)
            .filter_map(|index| world.gpu_position(GpuSlot { node, index }))
            .filter(|&i| self.holder[i].1 == 0)
            .count()
    }
}

/// Cut `text` to at most `max` bytes on a character boundary, marking the cut with `…`.
pub(crate) fn truncate_marked(text: &mut String, max: usize) {
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
}

fn problem(action: &wit::Action, world: &Telemetry, scratch: &Scratch) -> Option<String> {
    let job = action.job;
    let (Some(spec), Some(state)) = (world.spec(job), world.state(job)) else {
        return Some(format!("job {job} does not exist or has ended"));
    };
    if scratch.moved.contains(&job) {
        return Some(format!("job {job} was already placed, preempted or stopped by this decision"));
    }
    if !state.is_running() {
        return match &action.kind {
            ActionKind::Place(p) => placement_problem(spec, p, world, scratch),
            ActionKind::Stop => None,
            _ => Some(format!("job {job} is queued, not running: place it first")),
        };
    }
    let node = &world.nodes()[state.node as usize];
    match &action.kind {
        ActionKind::SetCpu(Some(m)) if *m < MIN_CPU_MILLICORES => Some(format!(
            "a CPU limit of {m} millicores is below the minimum of {MIN_CPU_MILLICORES}; lift the limit or give more"
        )),
        ActionKind::SetCpu(Some(m)) if *m > node.cpu_millicores => {
            Some(format!("a CPU limit of {m} millicores is more than node {} has ({})", node.name, node.cpu_millicores))
        }
        ActionKind::SetMemory(Some(b)) if *b < MIN_MEMORY_BYTES => {
            Some(format!("a memory limit of {b} bytes is below the minimum of {MIN_MEMORY_BYTES}"))
        }
        ActionKind::SetMemory(Some(b)) if *b > node.memory_bytes => {
            Some(format!("a memory limit of {b} bytes is more than node {} has ({})", node.name, node.memory_bytes))
        }
        ActionKind::Migrate(to) => {
            let to = *to;
            let Some(dest) = world.nodes().get(to as usize) else {
                return Some(format!("node {to} does not exist ({} nodes)", world.nodes().len()));
            };
            if to == state.node {
                return Some(format!("job {job} already runs on node {}", dest.name));
            }
            if state.gpus.iter().any(|g| g.node != state.node) {
                return Some(format!("job {job} spans several nodes; preempt it and place it instead"));
            }
            let free = scratch.free_on(world, to);
            if free < state.gpus.len() {
                return Some(format!("node {} has {free} free GPUs; job {job} holds {}", dest.name, state.gpus.len()));
            }
            let used: u64 = world.jobs().filter(|(_, s)| s.node == to).map(|(_, s)| s.memory_used_bytes).sum();
            (used + state.memory_used_bytes > dest.memory_bytes).then(|| {
                format!(
                    "node {} is full: {} of {} bytes in use, the job needs {}",
                    dest.name, used, dest.memory_bytes, state.memory_used_bytes
                )
            })
        }
        ActionKind::SetGpuShare(wit::GpuShare { gpu, percent }) => {
            if *gpu as usize >= node.gpu_memory_bytes.len() {
                Some(format!("node {} has no GPU {gpu} ({} GPUs)", node.name, node.gpu_memory_bytes.len()))
            } else if *percent == 0 || *percent > 100 {
                Some(format!("a GPU share of {percent} % is outside 1–100"))
            } else {
                None
            }
        }
        ActionKind::Place(_) => {
            Some(format!("job {job} already runs on node {}; migrate it, or preempt it first", node.name))
        }
        ActionKind::SetCpu(_) | ActionKind::SetMemory(_) | ActionKind::Deliver | ActionKind::Stop => None,
        ActionKind::Preempt => None,
    }
}

/// Why a queued job cannot start where `p` says, if it cannot.
fn placement_problem(spec: &wit::JobSpec, p: &wit::Placement, world: &Telemetry, scratch: &Scratch) -> Option<String> {
    let job = spec.handle;
    let pieces = spec.replicas.max(1) as usize;
    if p.nodes.is_empty() {
        return Some(format!("the placement of job {job} names no node"));
    }
    if p.nodes.len() > pieces {
        return Some(format!(
            "job {job} runs on at most {pieces} node(s) ({} replicas); the placement names {}",
            spec.replicas,
            p.nodes.len()
        ));
    }
    let per_piece = gpus_per_piece(spec.gpus, spec.replicas) as usize;
    for (k, entry) in p.nodes.iter().enumerate() {
        let Some(node) = world.nodes().get(entry.node as usize) else {
            return Some(format!("node {} does not exist ({} nodes)", entry.node, world.nodes().len()));
        };
        if p.nodes[..k].iter().any(|e| e.node == entry.node) {
            return Some(format!("the placement names node {} twice", node.name));
        }
        let count = node.gpu_memory_bytes.len();
        if entry.gpus.len() > count {
            return Some(format!("node {} has {count} GPUs; the placement asks for {}", node.name, entry.gpus.len()));
        }
        if p.nodes.len() > 1 && (entry.gpus.is_empty() || !entry.gpus.len().is_multiple_of(per_piece)) {
            return Some(format!(
                "each node of a spread placement takes whole replicas of {per_piece} GPU(s); node {} gets {}",
                node.name,
                entry.gpus.len()
            ));
        }
        for (g, &index) in entry.gpus.iter().enumerate() {
            let Some(i) = world.gpu_position(GpuSlot { node: entry.node, index }) else {
                return Some(format!("node {} has no GPU {index} ({count} GPUs)", node.name));
            };
            if entry.gpus[..g].contains(&index) {
                return Some(format!("the placement names GPU {index} of node {} twice", node.name));
            }
            if let (Some(holder), false) = (scratch.holder[i].0, p.share) {
                return Some(format!(
                    "GPU {index} of node {} is held by job {holder}; name a free GPU, or place with share",
                    node.name
                ));
            }
        }
    }
    let given: usize = p.nodes.iter().map(|e| e.gpus.len()).sum();
    (given != spec.gpus as usize).then(|| format!("job {job} asks for {} GPUs; the placement gives {given}", spec.gpus))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::sample;

    fn act(job: u32, kind: ActionKind) -> wit::Action {
        wit::Action { job, kind, reason: "r".into() }
    }

    fn decision(actions: Vec<wit::Action>) -> wit::Decision {
        wit::Decision { actions, next_call_ms: None }
    }

    #[test]
    fn invalid_actions_are_rejected_with_reasons_and_the_rest_apply() {
        let world = sample::world(2, 4, 1);
        let d = decision(vec![
            act(99, ActionKind::SetCpu(Some(1000))),
            act(0, ActionKind::SetCpu(Some(0))),
            act(0, ActionKind::SetCpu(Some(u64::MAX))),
            act(0, ActionKind::SetMemory(Some(1))),
            act(0, ActionKind::Migrate(7)),
            act(0, ActionKind::Migrate(0)),
            act(0, ActionKind::SetGpuShare(wit::GpuShare { gpu: 3, percent: 50 })),
            act(0, ActionKind::SetGpuShare(wit::GpuShare { gpu: 0, percent: 101 })),
            act(0, ActionKind::SetCpu(Some(1500))),
            act(1, ActionKind::Migrate(0)),
        ]);
        let c = check(d, &world).unwrap();
        assert_eq!(c.accepted.len(), 2, "{:?}", c.accepted);
        assert_eq!(c.rejected.len(), 8);
        let reasons: Vec<&str> = c.rejected.iter().map(|r| r.reason.as_str()).collect();
        assert!(reasons[0].contains("job 99 does not exist"));
        assert!(reasons[2].contains("more than node node-0 has"));
        assert!(reasons[4].contains("node 7 does not exist"));
        assert!(reasons[5].contains("already runs on"));
    }

    #[test]
    fn a_migration_to_a_full_node_is_rejected() {
        let mut world = sample::world(2, 2, 0);
        world.state_mut(0).unwrap().memory_used_bytes = 60 << 30;
        world.state_mut(1).unwrap().memory_used_bytes = 8 << 30;
        let c = check(decision(vec![act(1, ActionKind::Migrate(0))]), &world).unwrap();
        assert!(c.rejected[0].reason.contains("is full"), "{:?}", c.rejected);
    }

    #[test]
    fn an_oversized_decision_is_refused_whole() {
        let world = sample::world(1, 2, 0);
        let d = decision((0..1000).map(|_| act(0, ActionKind::Stop)).collect());
        let e = check(d, &world).unwrap_err();
        assert_eq!((e.actions, e.limit), (1000, max_actions(2)));
    }

    /// Two nodes of 4 GPUs; job 0 runs on node 0 holding GPU 0; jobs 1 (2 GPUs, 2 replicas) and
    /// 2 (1 GPU) wait.
    fn gpu_world() -> Telemetry {
        let mut w = sample::world(2, 1, 0);
        for n in 0..2 {
            let wider = wit::Node { gpu_memory_bytes: vec![16 << 30; 4], ..w.nodes()[n].clone() };
            assert!(w.set_node(n as u32, wider));
        }
        w.state_mut(0).unwrap().gpus = vec![GpuSlot { node: 0, index: 0 }];
        let ask = |gpus, replicas| wit::JobSpec { gpus, replicas, ..sample::job_spec(1) };
        w.enqueue_job(ask(2, 2));
        w.enqueue_job(ask(1, 1));
        w
    }

    fn place(job: u32, nodes: &[(u32, &[u32])], share: bool) -> wit::Action {
        let nodes = nodes.iter().map(|(node, gpus)| wit::NodePlacement { node: *node, gpus: gpus.to_vec() }).collect();
        act(job, ActionKind::Place(wit::Placement { nodes, share }))
    }

    fn refused(world: &Telemetry, action: wit::Action) -> String {
        let c = check(decision(vec![action]), world).unwrap();
        assert!(c.accepted.is_empty(), "accepted: {:?}", c.accepted);
        c.rejected[0].reason.clone()
    }

    #[test]
    fn every_placement_error_is_refused_with_its_reason() {
        let w = gpu_world();
        let cases: Vec<(wit::Action, &str)> = vec![
            (place(9, &[(0, &[1])], false), "job 9 does not exist"),
            (place(1, &[], false), "names no node"),
            (place(1, &[(5, &[0, 1])], false), "node 5 does not exist"),
            (place(1, &[(0, &[1, 7])], false), "has no GPU 7"),
            (place(1, &[(0, &[0, 1])], false), "GPU 0 of node node-0 is held by job 0"),
            (place(1, &[(0, &[1, 1])], false), "names GPU 1 of node node-0 twice"),
            (place(1, &[(0, &[1, 2, 3, 0, 1])], false), "has 4 GPUs; the placement asks for 5"),
            (place(1, &[(0, &[1])], false), "asks for 2 GPUs; the placement gives 1"),
            (place(2, &[(0, &[1]), (1, &[])], false), "at most 1 node"),
            (place(1, &[(0, &[1, 2]), (1, &[])], false), "each node of a spread placement"),
            (place(1, &[(1, &[0]), (1, &[1])], false), "names node node-1 twice"),
            (place(0, &[(1, &[0])], false), "already runs on node node-0"),
            (act(2, ActionKind::Preempt), "queued, not running"),
            (act(2, ActionKind::SetCpu(Some(1000))), "queued, not running"),
            (act(2, ActionKind::Migrate(1)), "queued, not running"),
        ];
        for (action, why) in cases {
            let reason = refused(&w, action.clone());
            assert!(reason.contains(why), "{action:?}: expected {why:?}, got {reason:?}");
        }
    }

    #[test]
    fn good_placements_pass_and_a_preemption_frees_gpus_for_a_placement_after_it() {
        let w = gpu_world();
        let spread = place(1, &[(0, &[1]), (1, &[3])], false);
        let shared = place(2, &[(0, &[0])], true);
        let c = check(decision(vec![spread, shared]), &w).unwrap();
        assert_eq!((c.accepted.len(), c.rejected.len()), (2, 0), "{:?}", c.rejected);

        let taken_twice = check(decision(vec![place(1, &[(0, &[1, 2])], false), place(2, &[(0, &[2])], false)]), &w);
        assert!(taken_twice.unwrap().rejected[0].reason.contains("held by job 1"), "the first placement took GPU 2");

        let swap = vec![act(0, ActionKind::Preempt), place(2, &[(0, &[0])], false), place(0, &[(0, &[1])], false)];
        let c = check(decision(swap), &w).unwrap();
        assert_eq!(c.accepted.len(), 2, "{:?}", c.rejected);
        assert!(c.rejected[0].reason.contains("already placed, preempted or stopped by this decision"));
    }

    #[test]
    fn a_migration_needs_as_many_free_gpus_as_the_job_holds() {
        let mut w = gpu_world();
        w.state_mut(0).unwrap().gpus = (0..4).map(|index| GpuSlot { node: 0, index }).collect();
        let c = check(decision(vec![place(1, &[(1, &[0, 1])], false), act(0, ActionKind::Migrate(1))]), &w).unwrap();
        assert!(c.rejected[0].reason.contains("node node-1 has 2 free GPUs; job 0 holds 4"), "{:?}", c.rejected);
    }

    #[test]
    fn long_reasons_are_trimmed_not_rejected() {
        let world = sample::world(1, 1, 0);
        let mut a = act(0, ActionKind::Deliver);
        a.reason = "é".repeat(400);
        let c = check(decision(vec![a]), &world).unwrap();
        assert!(c.accepted[0].reason.len() <= MAX_REASON_BYTES + '…'.len_utf8());
    }
}
