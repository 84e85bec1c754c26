//! What a policy returns: a [`Decision`] holding [`Action`]s, built with builders so that
//! units and reasons are never positional guesses.

use crate::bindings::wasmsched::policy::types as wit;
use crate::units::{Bytes, JobId, Millicores, NodeId, Seconds};

pub use wit::ActionKind;

/// One thing to do to one job, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Action(pub(crate) wit::Action);

impl Action {
    fn new(job: JobId, kind: ActionKind) -> Self {
        Action(wit::Action { job: job.0, kind, reason: String::new() })
    }

    /// Cap the job's CPU.
    pub fn set_cpu(job: JobId, limit: Millicores) -> Self {
        Self::new(job, ActionKind::SetCpu(Some(limit.0)))
    }

    /// Lift the job's CPU limit.
    pub fn lift_cpu(job: JobId) -> Self {
        Self::new(job, ActionKind::SetCpu(None))
    }

    /// Cap the job's memory.
    pub fn set_memory(job: JobId, limit: Bytes) -> Self {
        Self::new(job, ActionKind::SetMemory(Some(limit.0)))
    }

    /// Lift the job's memory limit.
    pub fn lift_memory(job: JobId) -> Self {
        Self::new(job, ActionKind::SetMemory(None))
    }

    /// Restart the job on `node` from its last checkpoint.
    pub fn migrate(job: JobId, node: NodeId) -> Self {
        Self::new(job, ActionKind::Migrate(node.0))
    }

    /// The job's model reached its deliverable target: hand it over.
    pub fn deliver(job: JobId) -> Self {
        Self::new(job, ActionKind::Deliver)
    }

    /// End the job.
    pub fn stop(job: JobId) -> Self {
        Self::new(job, ActionKind::Stop)
    }

    /// Give the job `percent` of GPU `gpu` on its node.
    pub fn set_gpu_share(job: JobId, gpu: u32, percent: u8) -> Self {
        Self::new(job, ActionKind::SetGpuShare(wit::GpuShare { gpu, percent }))
    }

    /// Start a queued job on `node` with these of its GPUs (none for a CPU job); each must be
    /// free.
    pub fn place(job: JobId, node: NodeId, gpus: &[u32]) -> Self {
        Self::place_on(job, &[(node, gpus.to_vec())], false)
    }

    /// Start a queued job over several nodes, one entry per node with its GPUs there; with
    /// `share`, it may take GPUs other jobs hold (co-location).
    pub fn place_on(job: JobId, nodes: &[(NodeId, Vec<u32>)], share: bool) -> Self {
        let nodes = nodes.iter().map(|(n, gpus)| wit::NodePlacement { node: n.0, gpus: gpus.clone() }).collect();
        Self::new(job, ActionKind::Place(wit::Placement { nodes, share }))
    }

    /// Restart a running job from its checkpoint on other GPUs, one entry per node with its
    /// GPUs there (their total one of its [`crate::Scaling`] counts), at `batch_size` (None
    /// keeps it). It pays its restore delay, as a migration does.
    pub fn resize(job: JobId, nodes: &[(NodeId, Vec<u32>)], batch_size: Option<u32>) -> Self {
        let nodes = nodes.iter().map(|(n, gpus)| wit::NodePlacement { node: n.0, gpus: gpus.clone() }).collect();
        Self::new(
            job,
            ActionKind::Resize(wit::Resize { placement: wit::Placement { nodes, share: false }, batch_size }),
        )
    }

    /// Checkpoint a running job and send it back to the queue with its progress.
    pub fn preempt(job: JobId) -> Self {
        Self::new(job, ActionKind::Preempt)
    }

    /// Say why; the reason goes into the audit log.
    pub fn because(mut self, reason: impl Into<String>) -> Self {
        self.0.reason = reason.into();
        self
    }

    /// The job it acts on.
    pub fn job(&self) -> JobId {
        JobId(self.0.job)
    }

    /// What it does.
    pub fn kind(&self) -> &ActionKind {
        &self.0.kind
    }

    /// The CPU limit it sets: `Some(None)` lifts the limit, `None` when it is not a CPU action.
    pub fn cpu_limit(&self) -> Option<Option<Millicores>> {
        match self.0.kind {
            ActionKind::SetCpu(limit) => Some(limit.map(Millicores)),
            _ => None,
        }
    }

    /// Why.
    pub fn reason(&self) -> &str {
        &self.0.reason
    }
}

/// A policy's answer for one tick.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decision {
    actions: Vec<Action>,
    next_call: Option<Seconds>,
    pending: Vec<(JobId, String)>,
}

impl Decision {
    /// Nothing to do.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add an action.
    pub fn push(&mut self, action: Action) -> &mut Self {
        self.actions.push(action);
        self
    }

    /// Add an action, by value.
    pub fn with(mut self, action: Action) -> Self {
        self.actions.push(action);
        self
    }

    /// Ask to be called again no sooner than `after` from now (the host reads more than an
    /// hour as an hour).
    pub fn call_again_in(&mut self, after: Seconds) -> &mut Self {
        self.next_call = Some(after);
        self
    }

    /// Say why queued job `job` waits, in a few words ("8 A100 asked, 3 free"); `status`, the
    /// audit log and the report show it. The host keeps the first 120 bytes and the first
    /// reason per job.
    pub fn pending(&mut self, job: JobId, reason: impl Into<String>) -> &mut Self {
        self.pending.push((job, reason.into()));
        self
    }

    /// Why queued jobs wait, as said with [`Decision::pending`].
    pub fn pending_reasons(&self) -> &[(JobId, String)] {
        &self.pending
    }

    /// The actions, in order.
    pub fn actions(&self) -> &[Action] {
        &self.actions
    }

    /// When the policy wants its next call, if it said.
    pub fn next_call(&self) -> Option<Seconds> {
        self.next_call
    }

    /// The action on `job`, if there is exactly one kind of interest: the last CPU limit set.
    pub fn cpu_limit_for(&self, job: JobId) -> Option<Option<Millicores>> {
        self.actions.iter().rev().filter(|a| a.job() == job).find_map(Action::cpu_limit)
    }

    /// True when it holds no action.
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }

    pub(crate) fn into_raw(self) -> wit::Decision {
        wit::Decision {
            actions: self.actions.into_iter().map(|a| a.0).collect(),
            next_call_ms: self.next_call.map(Seconds::as_millis),
            pending: self.pending.into_iter().map(|(job, reason)| wit::Pending { job: job.0, reason }).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builders_carry_units_and_reasons() {
        let a = Action::set_cpu(JobId(3), Millicores(1500)).because("growing");
        assert_eq!(a.job(), JobId(3));
        assert_eq!(a.cpu_limit(), Some(Some(Millicores(1500))));
        assert_eq!(a.reason(), "growing");
        assert_eq!(Action::stop(JobId(1)).cpu_limit(), None);
    }

    #[test]
    fn next_call_crosses_in_milliseconds() {
        let mut d = Decision::new().with(Action::lift_cpu(JobId(1)));
        d.call_again_in(Seconds(2.5));
        let raw = d.into_raw();
        assert_eq!(raw.next_call_ms, Some(2500));
        assert_eq!(raw.actions.len(), 1);
    }

    #[test]
    fn last_cpu_action_on_a_job_wins() {
        let d = Decision::new()
            .with(Action::set_cpu(JobId(1), Millicores(100)))
            .with(Action::stop(JobId(1)))
            .with(Action::lift_cpu(JobId(1)));
        assert_eq!(d.cpu_limit_for(JobId(1)), Some(None));
        assert_eq!(d.cpu_limit_for(JobId(2)), None);
    }
}

/// A policy's clock of rounds: every `interval` it does its work, and between rounds it asks
/// the host to call again when the next one is due. Serializable, so it rides in the saved
/// state across a hot swap.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Rounds {
    last_s: Option<f64>,
}

impl Rounds {
    /// Whether a round is due at `now`, `interval` after the last one (the first call always
    /// is). When it is, `now` becomes the last round; when not, `decision` asks to be called
    /// again when it will be.
    pub fn due(&mut self, now: Seconds, interval: Seconds, decision: &mut Decision) -> bool {
        if let Some(last) = self.last_s {
            let next = last + interval.0;
            if now.0 + 1e-9 < next {
                decision.call_again_in(Seconds(next - now.0));
                return false;
            }
        }
        self.last_s = Some(now.0);
        true
    }

    /// Start a round at `now` whatever the interval (a job arrived, say).
    pub fn start(&mut self, now: Seconds) {
        self.last_s = Some(now.0);
    }
}

#[cfg(test)]
mod rounds_tests {
    use super::*;

    #[test]
    fn a_round_is_due_every_interval_and_asks_for_a_call_between() {
        let mut r = Rounds::default();
        let mut d = Decision::new();
        assert!(r.due(Seconds(5.0), Seconds(30.0), &mut d), "the first call is a round");
        assert!(!r.due(Seconds(20.0), Seconds(30.0), &mut d));
        assert_eq!(d.next_call(), Some(Seconds(15.0)));
        assert!(r.due(Seconds(35.0), Seconds(30.0), &mut Decision::new()));
        r.start(Seconds(40.0));
        assert!(!r.due(Seconds(60.0), Seconds(30.0), &mut Decision::new()));
    }
}
