//! The one loop: observe (backend) → snapshot → decide (policy, sandboxed) → validate →
//! apply (backend) → record. Every backend runs through here, so a policy sees the same
//! types in simulation, replay and production.

use std::time::Duration;

use crate::backend::Backend;
use crate::runtime::Runtime;
use crate::runtime::supervise::{Supervised, TickOutcome};
use crate::snapshot::Telemetry;

/// How the loop runs.
#[derive(Clone, Copy, Debug)]
pub struct LoopConfig {
    /// Time between observations, on the backend's clock.
    pub tick: Duration,
    /// Stop after this much backend time, whatever is left.
    pub horizon: Option<Duration>,
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig { tick: Duration::from_secs(30), horizon: None }
    }
}

/// What a run through the loop did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoopSummary {
    /// Observations made.
    pub ticks: u64,
    /// Ticks on which the policy was asked (it may ask to be called less often, and it is not
    /// asked while no job runs).
    pub decisions: u64,
    /// Actions put into force.
    pub applied: u64,
    /// Actions the backend could not apply.
    pub apply_errors: u64,
    /// The backend's clock at the end, milliseconds.
    pub end_ms: u64,
}

/// Run `policy` against `backend` until the backend has nothing left (or the horizon).
/// `record` sees every tick's outcome, for audit logs and reports.
pub fn run(
    backend: &mut dyn Backend,
    policy: &mut Supervised,
    rt: &Runtime,
    config: &LoopConfig,
    mut record: impl FnMut(&Telemetry, &TickOutcome),
) -> LoopSummary {
    let tick_ms = (config.tick.as_millis() as u64).max(1);
    let horizon_ms = config.horizon.map(|h| h.as_millis() as u64);
    let mut world = Telemetry::new();
    let mut summary = LoopSummary::default();
    let mut next_call_ms = 0;
    loop {
        let until = summary.end_ms + tick_ms;
        if horizon_ms.is_some_and(|h| until > h) || !backend.observe(&mut world, until) {
            break;
        }
        summary.end_ms = until;
        summary.ticks += 1;
        if world.job_count() == 0 || until < next_call_ms {
            continue;
        }
        summary.decisions += 1;
        let outcome = policy.tick(rt, &world);
        let errors = backend.apply(&outcome.actions, &mut world);
        for e in &errors {
            tracing::warn!(policy = policy.policy().name(), job = e.job, reason = %e.reason, "action could not be applied");
        }
        summary.applied += (outcome.actions.len() - errors.len()) as u64;
        summary.apply_errors += errors.len() as u64;
        next_call_ms = until + outcome.next_call_ms.unwrap_or(0);
        record(&world, &outcome);
    }
    summary
}
