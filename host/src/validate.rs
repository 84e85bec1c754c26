//! Every action a policy returns is checked before it is applied: an unknown job or node, a
//! value out of range, more than the node has. A rejected action carries its reason; the
//! rest of the decision still applies. A decision far larger than the job count is refused
//! whole.

use crate::bindings::wit::{self, ActionKind};
use crate::snapshot::Telemetry;

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

/// Check a decision against the world it was made for.
pub fn check(decision: wit::Decision, world: &Telemetry) -> Result<Checked, Oversized> {
    let limit = max_actions(world.job_count());
    if decision.actions.len() > limit {
        return Err(Oversized { actions: decision.actions.len(), limit, jobs: world.job_count() });
    }
    let mut checked = Checked::default();
    for mut action in decision.actions {
        truncate_marked(&mut action.reason, MAX_REASON_BYTES);
        match problem(&action, world) {
            None => checked.accepted.push(action),
            Some(reason) => checked.rejected.push(Rejection { action, reason }),
        }
    }
    Ok(checked)
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

fn problem(action: &wit::Action, world: &Telemetry) -> Option<String> {
    let Some(state) = world.state(action.job) else {
        return Some(format!("job {} is not running", action.job));
    };
    let node = &world.nodes()[state.node as usize];
    match action.kind {
        ActionKind::SetCpu(Some(m)) if m < MIN_CPU_MILLICORES => Some(format!(
            "a CPU limit of {m} millicores is below the minimum of {MIN_CPU_MILLICORES}; lift the limit or give more"
        )),
        ActionKind::SetCpu(Some(m)) if m > node.cpu_millicores => {
            Some(format!("a CPU limit of {m} millicores is more than node {} has ({})", node.name, node.cpu_millicores))
        }
        ActionKind::SetMemory(Some(b)) if b < MIN_MEMORY_BYTES => {
            Some(format!("a memory limit of {b} bytes is below the minimum of {MIN_MEMORY_BYTES}"))
        }
        ActionKind::SetMemory(Some(b)) if b > node.memory_bytes => {
            Some(format!("a memory limit of {b} bytes is more than node {} has ({})", node.name, node.memory_bytes))
        }
        ActionKind::Migrate(to) => {
            let Some(dest) = world.nodes().get(to as usize) else {
                return Some(format!("node {to} does not exist ({} nodes)", world.nodes().len()));
            };
            if to == state.node {
                return Some(format!("job {} already runs on node {}", action.job, dest.name));
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
            if gpu as usize >= node.gpu_memory_bytes.len() {
                Some(format!("node {} has no GPU {gpu} ({} GPUs)", node.name, node.gpu_memory_bytes.len()))
            } else if percent == 0 || percent > 100 {
                Some(format!("a GPU share of {percent} % is outside 1–100"))
            } else {
                None
            }
        }
        ActionKind::SetCpu(_) | ActionKind::SetMemory(_) | ActionKind::Deliver | ActionKind::Stop => None,
    }
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
        assert!(reasons[0].contains("job 99 is not running"));
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

    #[test]
    fn long_reasons_are_trimmed_not_rejected() {
        let world = sample::world(1, 1, 0);
        let mut a = act(0, ActionKind::Deliver);
        a.reason = "é".repeat(400);
        let c = check(decision(vec![a]), &world).unwrap();
        assert!(c.accepted[0].reason.len() <= MAX_REASON_BYTES + '…'.len_utf8());
    }
}
