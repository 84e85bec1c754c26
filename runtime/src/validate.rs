//! Every action a policy returns is checked before it is applied: an unknown job or node, a
//! value out of range, more than the node has. A rejected action carries its reason; the
//! rest of the decision still applies. A decision larger than its world could need (more
//! actions than the jobs call for, more placements than queued jobs, more node entries than
//! nodes, more GPUs on one node than any has) is refused whole, by counting alone, before
//! any action is checked: its cost to the host is bounded by its lengths, not its contents. The rules themselves are the contract's, written once in `wasmsched-rules` and
//! shared with the backends and the SDK; this module reads the telemetry for them.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use wasmsched_core::bindings::wit::{self, ActionKind};
use wasmsched_core::world::World;
use wasmsched_rules::check::{self as rules, Act, Checker, JobNow, NodeCap, Room};
use wasmsched_rules::{JobId, NodeId};

pub use wasmsched_rules::check::{Oversized, Problem};
pub use wasmsched_rules::{MIN_CPU_MILLICORES, MIN_MEMORY_BYTES, max_actions};

/// The longest reason kept in the audit log, in bytes.
pub const MAX_REASON_BYTES: usize = 256;

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
    /// Why queued jobs wait, as the policy said: queued jobs only, one per job (its first),
    /// each cut to [`MAX_PENDING_BYTES`], in handle order.
    pub pending: Vec<wit::Pending>,
}

/// The most a reason why a job waits keeps, in bytes.
pub const MAX_PENDING_BYTES: usize = 120;

/// Check a decision against the world it was made for. Actions are checked in order against
/// the world as the earlier accepted ones leave it: a preemption frees GPUs that a later
/// placement in the same decision may take.
pub fn check(decision: wit::Decision, world: &World) -> Result<Checked, Oversized> {
    rules::size(decision.actions.iter().map(|a| act(&a.kind)), room(world))?;
    let mut checked = Checked::default();
    let mut checker = Checker::new(world.gpu_book()).with_tenants(world.ledger());
    let seen = Seen::new(world);
    for mut action in decision.actions {
        truncate_marked(&mut action.reason, MAX_REASON_BYTES);
        match checker.check(&seen, action.job, &act(&action.kind)) {
            Ok(()) => checked.accepted.push(action),
            Err(problem) => checked.rejected.push(Rejection { action, reason: problem.to_string() }),
        }
    }
    checked.pending = pending(decision.pending, world);
    Ok(checked)
}

/// The reasons why jobs wait that the host keeps: of the first as many entries as there are
/// queued jobs (a longer list costs no more than that), those naming a queued job, the first
/// per job, each cut to [`MAX_PENDING_BYTES`].
fn pending(said: Vec<wit::Pending>, world: &World) -> Vec<wit::Pending> {
    let mut kept: Vec<wit::Pending> = said
        .into_iter()
        .take(world.queue_len())
        .filter(|p| world.state(p.job).is_some_and(|s| !s.is_running()))
        .collect();
    kept.sort_by_key(|p| p.job);
    kept.dedup_by_key(|p| p.job);
    for p in &mut kept {
        p.reason = p.reason.chars().filter(|c| !c.is_control()).collect();
        truncate_marked(&mut p.reason, MAX_PENDING_BYTES);
    }
    kept
}

/// How much a decision for `world` may hold.
pub fn room(world: &World) -> Room {
    Room {
        jobs: world.job_count() + world.queue_len(),
        queued: world.queue_len(),
        nodes: world.nodes().len(),
        gpus_per_node: world.nodes().iter().map(|n| n.gpu_memory_bytes.len()).max().unwrap_or(0),
    }
}

/// The name of an action's kind, as the contract spells it.
pub fn kind_name(kind: &ActionKind) -> &'static str {
    match kind {
        ActionKind::SetCpu(_) => "set-cpu",
        ActionKind::SetMemory(_) => "set-memory",
        ActionKind::Migrate(_) => "migrate",
        ActionKind::Deliver => "deliver",
        ActionKind::Stop => "stop",
        ActionKind::SetGpuShare(_) => "set-gpu-share",
        ActionKind::Place(_) => "place",
        ActionKind::Preempt => "preempt",
        ActionKind::Resize(_) => "resize",
    }
}

/// How many reasons a [`summary`] quotes, and how much of each.
const SUMMARY_REASONS: usize = 3;
const SUMMARY_REASON_BYTES: usize = 160;

/// One log line's worth of refused actions, whatever their number: how many, of which kinds,
/// and the first few reasons, each cut short. None for none. Each refusal is the job, the
/// action's kind when known, and why. The audit log keeps every one; the host's own log
/// keeps this, so its volume per tick is bounded whatever a policy sends.
pub fn summary<'a>(refusals: impl IntoIterator<Item = (JobId, Option<&'a ActionKind>, &'a str)>) -> Option<String> {
    let mut count = 0usize;
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    let mut first = String::new();
    for (job, kind, reason) in refusals {
        count += 1;
        *kinds.entry(kind.map_or("action", kind_name)).or_default() += 1;
        if count <= SUMMARY_REASONS {
            let mut reason = reason.to_string();
            truncate_marked(&mut reason, SUMMARY_REASON_BYTES);
            let _ = write!(first, "{}job {job}: {reason}", if count > 1 { "; " } else { "" });
        }
    }
    if count == 0 {
        return None;
    }
    let kinds: Vec<String> = kinds.into_iter().map(|(k, n)| format!("{n} {k}")).collect();
    let more = if count > SUMMARY_REASONS { format!("; and {} more", count - SUMMARY_REASONS) } else { String::new() };
    Some(format!("{count} ({}): {first}{more}", kinds.join(", ")))
}

/// An action as the rules see it (`wasmsched_rules::check`).
pub fn act(kind: &ActionKind) -> Act<'_, wit::NodePlacement> {
    match kind {
        ActionKind::SetCpu(m) => Act::SetCpu(*m),
        ActionKind::SetMemory(b) => Act::SetMemory(*b),
        ActionKind::Migrate(to) => Act::Migrate(*to),
        ActionKind::Deliver => Act::Deliver,
        ActionKind::Stop => Act::Stop,
        ActionKind::SetGpuShare(s) => Act::SetGpuShare { gpu: s.gpu, percent: s.percent },
        ActionKind::Place(p) => Act::Place { nodes: &p.nodes, share: p.share },
        ActionKind::Preempt => Act::Preempt,
        ActionKind::Resize(r) => {
            Act::Resize { nodes: &r.placement.nodes, share: r.placement.share, batch_size: r.batch_size }
        }
    }
}

/// The world as the rules read it (`wasmsched_rules::check::World`), with each node's memory
/// in use summed once: a decision of many migrations reads it once each, and must not cost a
/// pass over every job each time.
pub struct Seen<'w> {
    world: &'w World,
    memory_on: Vec<u64>,
}

impl<'w> Seen<'w> {
    /// `world`, read for the rules.
    pub fn new(world: &'w World) -> Self {
        let mut memory_on = vec![0u64; world.nodes().len()];
        for (_, s) in world.jobs() {
            if let Some(m) = memory_on.get_mut(s.node.index()) {
                *m = m.saturating_add(s.memory_used_bytes);
            }
        }
        Seen { world, memory_on }
    }
}

impl rules::World for Seen<'_> {
    fn node(&self, node: NodeId) -> Option<NodeCap<'_>> {
        self.world.nodes().get(node.index()).map(|n| NodeCap {
            name: &n.name,
            cpu_millicores: n.cpu_millicores,
            memory_bytes: n.memory_bytes,
            gpus: n.gpu_memory_bytes.len() as u32,
            down: self.world.is_node_down(node),
        })
    }

    fn node_count(&self) -> usize {
        self.world.nodes().len()
    }

    fn job(&self, job: JobId) -> Option<JobNow<'_>> {
        let (spec, state) = (self.world.spec(job)?, self.world.state(job)?);
        Some(JobNow {
            gpu_counts: &spec.scaling.gpu_counts,
            batch_sizes: (spec.scaling.batch_size_min, spec.scaling.batch_size_max),
            gpus: spec.gpus,
            replicas: spec.replicas,
            node: state.is_running().then_some(state.node),
            memory_used_bytes: state.memory_used_bytes,
            tenant: Some(state.tenant as usize),
        })
    }

    fn gpus_of(&self, job: JobId) -> Vec<(NodeId, u32)> {
        self.world.state(job).map(|s| s.gpus.iter().map(|g| (g.node, g.index)).collect()).unwrap_or_default()
    }

    fn memory_used_on(&self, node: NodeId) -> u64 {
        self.memory_on.get(node.index()).copied().unwrap_or(0)
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

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_core::world::{GpuSlot, sample};

    fn act(job: u32, kind: ActionKind) -> wit::Action {
        wit::Action { job: JobId(job), kind, reason: "r".into() }
    }

    fn decision(actions: Vec<wit::Action>) -> wit::Decision {
        wit::Decision { actions, next_call_ms: None, pending: Vec::new() }
    }

    #[test]
    fn invalid_actions_are_rejected_with_reasons_and_the_rest_apply() {
        let world = sample::world(2, 4, 1);
        let d = decision(vec![
            act(99, ActionKind::SetCpu(Some(1000))),
            act(0, ActionKind::SetCpu(Some(0))),
            act(0, ActionKind::SetCpu(Some(u64::MAX))),
            act(0, ActionKind::SetMemory(Some(1))),
            act(0, ActionKind::Migrate(NodeId(7))),
            act(0, ActionKind::Migrate(NodeId(0))),
            act(0, ActionKind::SetGpuShare(wit::GpuShare { gpu: 3, percent: 50 })),
            act(0, ActionKind::SetGpuShare(wit::GpuShare { gpu: 0, percent: 101 })),
            act(0, ActionKind::SetCpu(Some(1500))),
            act(1, ActionKind::Migrate(NodeId(0))),
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
        world.state_mut(JobId(0)).unwrap().memory_used_bytes = 60 << 30;
        world.state_mut(JobId(1)).unwrap().memory_used_bytes = 8 << 30;
        let c = check(decision(vec![act(1, ActionKind::Migrate(NodeId(0)))]), &world).unwrap();
        assert!(c.rejected[0].reason.contains("is full"), "{:?}", c.rejected);
    }

    #[test]
    fn an_oversized_decision_is_refused_whole() {
        let world = sample::world(1, 2, 0);
        let d = decision((0..1000).map(|_| act(0, ActionKind::Stop)).collect());
        let e = check(d, &world).unwrap_err();
        assert_eq!(e, Oversized::Actions { actions: 1000, limit: max_actions(2), jobs: 2 });
        // A million node entries cost a look at the length and no more.
        let w = gpu_world();
        let million = (0..1_000_000).map(|n| (n % 2, &[0u32][..])).collect::<Vec<_>>();
        let e = check(decision(vec![place(1, &million, false)]), &w).unwrap_err();
        assert_eq!(e, Oversized::Entries { action: 0, entries: 1_000_000, nodes: 2 });
        let e = check(decision(vec![place(1, &[(0, &[0; 5])], false), place(2, &[(1, &[0])], false)]), &w);
        assert_eq!(e.unwrap_err(), Oversized::Gpus { action: 0, gpus: 5, most: 4 });
        let twice = vec![place(1, &[(0, &[1])], false), place(2, &[(1, &[0])], false), place(2, &[(1, &[1])], false)];
        assert_eq!(check(decision(twice), &w).unwrap_err(), Oversized::Placements { placements: 3, queued: 2 });
    }

    #[test]
    fn a_summary_of_refusals_is_one_bounded_line_whatever_their_number() {
        let reason = "x".repeat(10_000);
        let stop = ActionKind::Stop;
        let place = ActionKind::Place(wit::Placement { nodes: Vec::new(), share: false });
        let many = (0..100_000).map(|j| (JobId(j), Some(if j % 2 == 0 { &stop } else { &place }), reason.as_str()));
        let line = summary(many).unwrap();
        assert!(line.starts_with("100000 (50000 place, 50000 stop): job 0: xxx"), "{line}");
        assert!(line.ends_with("; and 99997 more"), "{line}");
        assert!(line.len() < 4 * SUMMARY_REASON_BYTES, "{} bytes", line.len());
        assert_eq!(summary(std::iter::empty()), None);
        assert_eq!(summary([(JobId(3), None, "gone")]).unwrap(), "1 (1 action): job 3: gone");
    }

    /// Two nodes of 4 GPUs; job 0 runs on node 0 holding GPU 0; jobs 1 (2 GPUs, 2 replicas) and
    /// 2 (1 GPU) wait.
    fn gpu_world() -> World {
        let mut w = sample::world(2, 1, 0);
        for n in 0..2 {
            let wider = wit::Node { gpu_memory_bytes: vec![16 << 30; 4], ..w.nodes()[n].clone() };
            assert!(w.set_node(NodeId(n as u32), wider));
        }
        w.state_mut(JobId(0)).unwrap().gpus = vec![GpuSlot { node: NodeId(0), index: 0 }];
        let ask = |gpus, replicas| wit::JobSpec { gpus, replicas, ..sample::job_spec(1) };
        w.enqueue_job(ask(2, 2));
        w.enqueue_job(ask(1, 1));
        w
    }

    fn place(job: u32, nodes: &[(u32, &[u32])], share: bool) -> wit::Action {
        let nodes = nodes.iter().map(|(node, gpus)| wit::NodePlacement::new(*node, *gpus)).collect();
        act(job, ActionKind::Place(wit::Placement { nodes, share }))
    }

    fn refused(world: &World, action: wit::Action) -> String {
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
            (place(1, &[(0, &[1])], false), "asks for 2 GPUs; the placement gives 1"),
            (place(2, &[(0, &[1]), (1, &[])], false), "at most 1 node"),
            (place(1, &[(0, &[1, 2]), (1, &[])], false), "each node of a spread placement"),
            (place(1, &[(1, &[0]), (1, &[1])], false), "names node node-1 twice"),
            (place(0, &[(1, &[0])], false), "already runs on node node-0"),
            (act(2, ActionKind::Preempt), "queued, not running"),
            (act(2, ActionKind::SetCpu(Some(1000))), "queued, not running"),
            (act(2, ActionKind::Migrate(NodeId(1))), "queued, not running"),
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
    fn a_placement_past_its_tenants_quota_is_refused_until_a_preemption_of_its_own_makes_room() {
        let mut w = gpu_world();
        w.set_tenants(vec![wit::Tenant { quota_gpus: Some(1), ..wasmsched_core::world::undeclared("default") }]);
        let why = refused(&w, place(2, &[(0, &[1])], false));
        assert_eq!(why, "tenant default holds 1 GPUs of its limit of 1 (its quota); 1 more would pass it");
        let c = check(decision(vec![act(0, ActionKind::Preempt), place(2, &[(0, &[1])], false)]), &w).unwrap();
        assert_eq!((c.accepted.len(), c.rejected.len()), (2, 0), "{:?}", c.rejected);
    }

    #[test]
    fn a_migration_needs_as_many_free_gpus_as_the_job_holds() {
        let mut w = gpu_world();
        w.state_mut(JobId(0)).unwrap().gpus = (0..4).map(|index| GpuSlot { node: NodeId(0), index }).collect();
        let c = check(decision(vec![place(1, &[(1, &[0, 1])], false), act(0, ActionKind::Migrate(NodeId(1)))]), &w)
            .unwrap();
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
