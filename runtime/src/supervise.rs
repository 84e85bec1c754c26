//! A policy under supervision: a failure (trap, deadline, policy error, oversized decision)
//! never stops the loop. The tick falls back, a trapped instance is replaced by a fresh one
//! on the next call, and N failures in a row quarantine the version with a growing backoff.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use wasmsched_core::bindings::wit::{self, ActionKind};
use wasmsched_core::world::World;

use super::instance::timed;
use super::{CallError, Limits, LoadedPolicy, LogBudget, PolicyInstance, Runtime, SharedLogBudget, Throttle};
use crate::validate::{self, Oversized, Rejection};

/// The largest state one version may hand the next (16 MiB): a larger one is dropped.
pub const MAX_SAVED_STATE_BYTES: usize = 16 << 20;

/// What a tick does when the policy fails.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fallback {
    /// Apply nothing: the limits in force stay.
    #[default]
    KeepLimits,
    /// Run the built-in fair-share: lift every limit.
    FairShare,
}

impl std::fmt::Display for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Fallback::KeepLimits => "keep-limits",
            Fallback::FairShare => "fair-share",
        })
    }
}

/// When failures quarantine a version, and for how long.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quarantine {
    /// Failures in a row that quarantine the version.
    pub after: u32,
    /// The first quarantine's length; each next one doubles, up to `max_backoff`.
    pub backoff: Duration,
    /// The longest quarantine.
    pub max_backoff: Duration,
}

impl Default for Quarantine {
    fn default() -> Self {
        Quarantine { after: 5, backoff: Duration::from_secs(30), max_backoff: Duration::from_secs(600) }
    }
}

/// Why a tick fell back.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The call trapped or the policy returned an error.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The decision was refused whole.
    #[error("policy {policy}'s decision was refused")]
    Oversized {
        /// The policy's name.
        policy: Arc<str>,
        /// How large it was.
        #[source]
        source: Oversized,
    },
    /// The watchdog benched the version: it is not called until a new version is admitted or
    /// an operator rolls back.
    #[error("policy {policy} is benched by the watchdog ({why}); {safe} runs instead")]
    Benched {
        /// The policy's name.
        policy: Arc<str>,
        /// Why it was benched.
        why: Arc<str>,
        /// What runs instead.
        safe: Fallback,
    },
    /// The version is quarantined.
    #[error("policy {policy} is quarantined for {remaining_ms} ms more after {failures} failures in a row")]
    Quarantined {
        /// The policy's name.
        policy: Arc<str>,
        /// Until the next try.
        remaining_ms: u64,
        /// Failures in a row so far.
        failures: u32,
    },
}

/// Counters an operator watches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Ticks on which the policy was called.
    pub calls: u64,
    /// Calls that trapped (deadline included).
    pub traps: u64,
    /// Traps that were deadlines.
    pub timeouts: u64,
    /// Calls the policy answered with its own error.
    pub policy_errors: u64,
    /// Decisions refused whole.
    pub oversized: u64,
    /// Actions rejected by validation.
    pub rejected_actions: u64,
    /// Ticks that fell back.
    pub fallbacks: u64,
    /// Times the version was quarantined.
    pub quarantines: u64,
    /// Fresh instances made (the first included).
    pub instantiations: u64,
    /// Time spent in calls, microseconds.
    pub call_micros: u64,
}

/// What one tick produced.
#[derive(Debug, Default)]
pub struct TickOutcome {
    /// The actions to apply (validated, or the fallback's).
    pub actions: Vec<wit::Action>,
    /// Actions refused by validation.
    pub rejected: Vec<Rejection>,
    /// Valid actions refused over the disruption budget (filled in by the loop,
    /// `wasmsched_loop::budget`).
    pub over_budget: Vec<Rejection>,
    /// Why the tick fell back, if it did.
    pub failure: Option<Failure>,
    /// Which fallback ran, if one did.
    pub fallback: Option<Fallback>,
    /// Time in the policy.
    pub latency: Duration,
    /// When the policy wants its next call, in milliseconds from now.
    pub next_call_ms: Option<u64>,
    /// Why queued jobs wait, as the policy said (validated: [`validate::Checked::pending`]).
    pub pending: Vec<wit::Pending>,
}

/// One policy version with its live instance, fallback and quarantine.
pub struct Supervised {
    policy: LoadedPolicy,
    config_json: String,
    limits: Limits,
    fallback: Fallback,
    quarantine: Quarantine,
    instance: Option<PolicyInstance>,
    saved_state: Option<Vec<u8>>,
    failures_in_row: u32,
    quarantined_until_ms: Option<u64>,
    next_backoff: Duration,
    counters: Counters,
    /// Whether it places queued jobs itself, as its last instance said at `init`.
    places: Option<bool>,
    /// Benched by the watchdog: why, and what runs instead of it.
    benched: Option<(Arc<str>, Fallback)>,
    /// Benched and its limits not lifted yet: the next tick lifts them.
    lift: bool,
    /// Its log budget, shared by every instance made of it.
    log_budget: SharedLogBudget,
    /// The host's warnings about it, said at most once a minute per kind.
    throttle: Throttle,
}

impl Supervised {
    /// Supervise `policy` with its config (JSON), limits and fallback.
    pub fn new(
        policy: LoadedPolicy,
        config_json: String,
        limits: Limits,
        fallback: Fallback,
        quarantine: Quarantine,
    ) -> Self {
        let log_budget = LogBudget::shared(policy.name(), &limits);
        let throttle = Throttle::new(format!("policy {}", policy.name()));
        Supervised {
            log_budget,
            throttle,
            policy,
            config_json,
            limits,
            fallback,
            quarantine,
            instance: None,
            saved_state: None,
            failures_in_row: 0,
            quarantined_until_ms: None,
            next_backoff: quarantine.backoff,
            counters: Counters::default(),
            places: None,
            benched: None,
            lift: false,
        }
    }

    /// Hand the first instance a state saved by a previous version.
    pub fn with_saved_state(mut self, state: Vec<u8>) -> Self {
        self.saved_state = Some(state);
        self
    }

    /// The supervised version.
    pub fn policy(&self) -> &LoadedPolicy {
        &self.policy
    }

    /// Its counters.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Whether it is quarantined at `now_ms`.
    pub fn is_quarantined(&self, now_ms: u64) -> bool {
        self.quarantined_until_ms.is_some_and(|until| now_ms < until)
    }

    /// Stop calling it: every tick falls back to `safe` until [`Supervised::unbench`]. The
    /// watchdog's doing, for the reason `why`. The next tick first lifts every limit and GPU
    /// share in force, whatever `safe` is: they are the benched version's, and a broken
    /// policy's caps kept for good would slow its jobs for good.
    pub fn bench(&mut self, why: &str, safe: Fallback) {
        self.benched = Some((Arc::from(why), safe));
        self.instance = None;
        self.lift = true;
    }

    /// Call it again, from a fresh instance and a clean slate of failures.
    pub fn unbench(&mut self) {
        self.benched = None;
        self.failures_in_row = 0;
        self.quarantined_until_ms = None;
        self.next_backoff = self.quarantine.backoff;
    }

    /// Whether the watchdog benched it.
    pub fn is_benched(&self) -> bool {
        self.benched.is_some()
    }

    /// Whether it places queued jobs itself at `now_ms`: it said so at `init`, and it is
    /// neither benched, quarantined nor failing (then the host's default placement keeps jobs
    /// starting). Makes the instance now if none was made yet, to ask it.
    pub fn places(&mut self, rt: &Runtime, now_ms: u64) -> bool {
        if self.benched.is_some() || self.failures_in_row > 0 || self.is_quarantined(now_ms) {
            return false;
        }
        if self.places.is_none() && self.instance.is_none() {
            match self.instantiate(rt) {
                Ok(instance) => self.instance = Some(instance),
                Err(e) => {
                    tracing::debug!(policy = self.policy.name(), error = %e, "instance not made yet; the next call retries")
                }
            }
        }
        if let Some(instance) = &self.instance {
            self.places = Some(instance.abilities().places);
        }
        self.places.unwrap_or(false)
    }

    /// Whether a live instance is held (false after a trap, until the next call).
    pub fn has_instance(&self) -> bool {
        self.instance.is_some()
    }

    /// Make the live instance now, handing it `saved_state`, rather than on the first call: a
    /// hot swap checks that `init` takes the old version's state before the new one serves.
    pub fn start(&mut self, rt: &Runtime, saved_state: Option<Vec<u8>>) -> Result<(), CallError> {
        self.saved_state = saved_state;
        self.instance = None;
        let instance = self.instantiate(rt)?;
        self.places = Some(instance.abilities().places);
        self.instance = Some(instance);
        Ok(())
    }

    /// The state a newer version should start from: asked of the live instance, else the
    /// state this version was handed. A state over [`MAX_SAVED_STATE_BYTES`] is dropped: the
    /// next version starts fresh rather than spend its memory on it.
    pub fn save_state(&mut self) -> Option<Vec<u8>> {
        match self.instance.as_mut().map(PolicyInstance::save_state) {
            Some(Ok(state)) if state.len() > MAX_SAVED_STATE_BYTES => {
                tracing::warn!(
                    policy = self.policy.name(),
                    bytes = state.len(),
                    max = MAX_SAVED_STATE_BYTES,
                    "save-state returned more than a state may carry; the next version starts fresh"
                );
                None
            }
            Some(Ok(state)) => Some(state),
            Some(Err(e)) => {
                tracing::warn!(policy = self.policy.name(), error = %e, "save-state failed; the next version starts fresh");
                if e.is_trap() {
                    self.instance = None;
                }
                None
            }
            None => self.saved_state.clone(),
        }
    }

    /// Call the policy on `world`, validate its decision, and fall back on any failure.
    pub fn tick(&mut self, rt: &Runtime, world: &World) -> TickOutcome {
        let now = world.time_ms();
        if let Some((why, safe)) = self.benched.clone() {
            let failure = Failure::Benched { policy: self.name(), why, safe };
            let mut outcome = self.fall_back(safe, world, failure, Duration::ZERO);
            if std::mem::take(&mut self.lift) {
                outcome.actions = fallback_actions(Fallback::FairShare, world);
            }
            return outcome;
        }
        if let Some(until) = self.quarantined_until_ms.filter(|until| now < *until) {
            let failure =
                Failure::Quarantined { policy: self.name(), remaining_ms: until - now, failures: self.failures_in_row };
            return self.fall_back(self.fallback, world, failure, Duration::ZERO);
        }
        self.counters.calls += 1;
        let (result, latency) = timed(|| self.call(rt, world));
        self.counters.call_micros += latency.as_micros() as u64;
        match result {
            Ok(decision) => {
                let next_call_ms = decision.next_call_ms;
                match validate::check(decision, world) {
                    Ok(checked) => {
                        self.failures_in_row = 0;
                        self.next_backoff = self.quarantine.backoff;
                        self.quarantined_until_ms = None;
                        self.counters.rejected_actions += checked.rejected.len() as u64;
                        let refused =
                            checked.rejected.iter().map(|r| (r.action.job, Some(&r.action.kind), &r.reason[..]));
                        if let Some(summary) = validate::summary(refused)
                            && self.throttle.allow("actions rejected")
                        {
                            tracing::warn!(policy = self.policy.name(), rejected = %summary, "actions rejected");
                        }
                        TickOutcome {
                            actions: checked.accepted,
                            rejected: checked.rejected,
                            pending: checked.pending,
                            latency,
                            next_call_ms,
                            ..TickOutcome::default()
                        }
                    }
                    Err(source) => {
                        self.counters.oversized += 1;
                        let failure = Failure::Oversized { policy: self.name(), source };
                        self.failed(world, failure, latency)
                    }
                }
            }
            Err(e) => {
                match e.trap_kind() {
                    Some(kind) => {
                        self.counters.traps += 1;
                        self.counters.timeouts += u64::from(kind == super::TrapKind::Deadline);
                        self.instance = None;
                    }
                    None => self.counters.policy_errors += 1,
                }
                self.failed(world, Failure::Call(e), latency)
            }
        }
    }

    fn name(&self) -> Arc<str> {
        Arc::from(self.policy.name())
    }

    /// A fresh instance of it, from the state it was handed, counted, its log against the
    /// budget every instance of it shares.
    fn instantiate(&mut self, rt: &Runtime) -> Result<PolicyInstance, CallError> {
        self.counters.instantiations += 1;
        let (state, budget) = (self.saved_state.as_deref(), self.log_budget.clone());
        self.policy.instantiate_logging(rt, self.limits, &self.config_json, state, budget)
    }

    fn call(&mut self, rt: &Runtime, world: &World) -> Result<wit::Decision, CallError> {
        if self.instance.is_none() {
            self.instance = Some(self.instantiate(rt)?);
        }
        self.instance.as_mut().expect("just made").decide(world)
    }

    fn failed(&mut self, world: &World, failure: Failure, latency: Duration) -> TickOutcome {
        self.failures_in_row += 1;
        if self.throttle.allow("policy failed; falling back") {
            tracing::warn!(policy = self.policy.name(), digest = self.policy.digest(), failures = self.failures_in_row, error = %wasmsched_core::error_chain(&failure), "policy failed; falling back");
        }
        if self.failures_in_row >= self.quarantine.after {
            let backoff = self.next_backoff;
            self.quarantined_until_ms = Some(world.time_ms() + backoff.as_millis() as u64);
            self.next_backoff = (backoff * 2).min(self.quarantine.max_backoff);
            self.counters.quarantines += 1;
            self.instance = None;
            if self.throttle.allow("policy quarantined") {
                tracing::error!(
                    policy = self.policy.name(),
                    digest = self.policy.digest(),
                    backoff_s = backoff.as_secs_f64(),
                    "policy quarantined"
                );
            }
        }
        self.fall_back(self.fallback, world, failure, latency)
    }

    /// A tick that runs `fallback` instead of the policy, because of `failure`.
    fn fall_back(&mut self, fallback: Fallback, world: &World, failure: Failure, latency: Duration) -> TickOutcome {
        self.counters.fallbacks += 1;
        TickOutcome {
            actions: fallback_actions(fallback, world),
            failure: Some(failure),
            fallback: Some(fallback),
            latency,
            ..TickOutcome::default()
        }
    }
}

/// The actions a fallback takes on `world`: none, or every CPU and memory limit and every GPU
/// share lifted.
pub fn fallback_actions(fallback: Fallback, world: &World) -> Vec<wit::Action> {
    match fallback {
        Fallback::KeepLimits => Vec::new(),
        Fallback::FairShare => {
            let mut actions = Vec::new();
            for (_, s) in world.jobs() {
                if let (Some(percent), Some(gpu)) = (s.gpu_share_percent, s.gpus.first())
                    && percent < 100
                {
                    let share = wit::GpuShare { gpu: gpu.index, percent: 100 };
                    actions.push(wit::Action {
                        job: s.handle,
                        kind: ActionKind::SetGpuShare(share),
                        reason: "fallback: fair-share".into(),
                    });
                }
                if s.cpu_limit_millicores.is_some() {
                    actions.push(wit::Action {
                        job: s.handle,
                        kind: ActionKind::SetCpu(None),
                        reason: "fallback: fair-share".into(),
                    });
                }
                if s.memory_limit_bytes.is_some() {
                    actions.push(wit::Action {
                        job: s.handle,
                        kind: ActionKind::SetMemory(None),
                        reason: "fallback: fair-share".into(),
                    });
                }
            }
            actions
        }
    }
}
