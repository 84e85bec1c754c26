//! The one loop: observe (backend) → snapshot → decide (policy, sandboxed) → validate →
//! apply (backend) → record. Every backend runs through here, so a policy sees the same
//! types in simulation, replay and production.
//!
//! [`drive`] is the loop; a [`Driver`] says which policies it calls, what happens at each tick
//! boundary (pacing, commands, hot swaps) and where each tick goes. [`run`] is the simple
//! case: one policy, no boundary work.

use std::sync::Arc;
use std::time::Duration;

use wasmsched_core::backend::{ApplyError, Backend, Placer, Reports};
use wasmsched_core::replicas::{Checkpoint, Leadership};
use wasmsched_core::world::{JobId, World};
use wasmsched_runtime::supervise::{Supervised, TickOutcome};
use wasmsched_runtime::{Runtime, Throttle, validate};

use crate::budget::{Budget, BudgetConfig, disruptive};
use crate::experiment::ExperimentConfig;
use crate::watchdog::{self, Benched, Churn, Stalls, Watchdog, WatchdogConfig};

/// How the loop runs.
#[derive(Clone, Debug)]
pub struct LoopConfig {
    /// Time between observations, on the backend's clock.
    pub tick: Duration,
    /// Stop after this much backend time, whatever is left.
    pub horizon: Option<Duration>,
    /// How many disruptions the active policy may cause ([`crate::budget`]).
    pub budget: BudgetConfig,
    /// When the active policy is benched, and when queued jobs are rescued from it
    /// ([`crate::watchdog`]).
    pub watchdog: WatchdogConfig,
    /// The declared tenants ([`wasmsched_core::tenants`]): every action and the default placement hold
    /// them to their limits.
    pub tenants: Vec<wasmsched_core::bindings::wit::Tenant>,
}

impl LoopConfig {
    /// A loop ticking every `tick` with no horizon and no disruption budget (every valid
    /// action applies), under the default watchdog.
    pub fn unbudgeted(tick: Duration) -> Self {
        LoopConfig { tick, budget: BudgetConfig::off(), ..LoopConfig::default() }
    }
}

impl Default for LoopConfig {
    /// A 30 s tick, no horizon, the cautious default budget, the default watchdog.
    fn default() -> Self {
        LoopConfig {
            tick: Duration::from_secs(30),
            horizon: None,
            budget: BudgetConfig::default(),
            watchdog: WatchdogConfig::default(),
            tenants: Vec::new(),
        }
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
    /// Actions put into force (or, on a backend that sends them without waiting, sent and not
    /// known to have failed).
    pub applied: u64,
    /// Actions the backend could not apply.
    pub apply_errors: u64,
    /// Disruptive actions handed to the backend (stop, migrate, preempt).
    pub disruptions: u64,
    /// Actions refused over the disruption budget.
    pub over_budget: u64,
    /// Queued jobs the host started itself, because the policy that places left them waiting
    /// ([`crate::watchdog`]).
    pub rescues: u64,
    /// Times the watchdog benched the active version.
    pub benchings: u64,
    /// The backend's clock at the end, milliseconds.
    pub end_ms: u64,
}

/// The policies the loop calls on a tick.
#[derive(Default)]
pub struct Policies<'a> {
    /// The one whose decisions are applied, if any.
    pub active: Option<&'a mut Supervised>,
    /// Those asked on the same world whose decisions are only recorded.
    pub shadows: Vec<&'a mut Supervised>,
    /// A split experiment's arms, in the experiment's order: each asked on its own view and
    /// its actions applied for its own jobs. While they decide, no policy is active.
    pub split: Option<Split<'a>>,
}

/// The arms of a split experiment on a tick ([`crate::experiment`]).
pub struct Split<'a> {
    /// Each arm's policy, in the experiment's order; None for an arm with no version serving
    /// (its jobs wait).
    pub arms: Vec<Option<&'a mut Supervised>>,
    /// The experiment, which says whose job is whose ([`ExperimentConfig::arm_of`]).
    pub experiment: &'a ExperimentConfig,
}

/// One policy's answer on a tick.
#[derive(Debug)]
pub struct Decided {
    /// The policy's name.
    pub policy: Arc<str>,
    /// The sha256 of the version that answered.
    pub digest: String,
    /// What it decided (validated), or the fallback's actions.
    pub outcome: TickOutcome,
}

impl Decided {
    fn ask(policy: &mut Supervised, rt: &Runtime, world: &World) -> Decided {
        let outcome = policy.tick(rt, world);
        Decided { policy: Arc::from(policy.policy().name()), digest: policy.policy().digest().into(), outcome }
    }
}

/// What one tick did, handed to [`Driver::record`].
#[derive(Debug)]
pub struct Tick<'a> {
    /// The tick's number, from 1.
    pub number: u64,
    /// The world after the active policy's actions were applied.
    pub world: &'a World,
    /// Whether the policies were asked on this tick.
    pub asked: bool,
    /// The active policy's answer, when it was asked.
    pub active: Option<Decided>,
    /// The shadows' answers, when they were asked.
    pub shadows: Vec<Decided>,
    /// A split experiment's arms' answers, in the experiment's order, when they were asked:
    /// applied, each for its own jobs.
    pub arms: Vec<Decided>,
    /// The applied policies' actions the backend could not apply: this tick's, and earlier
    /// ticks' that were in flight and failed since ([`Backend::settled`]).
    pub apply_errors: Vec<ApplyError>,
    /// How many of the applied actions disrupted their jobs.
    pub disruptions: u64,
    /// Disruptions the budget counts within its window now ([`Budget::spent`]).
    pub budget_spent: u64,
    /// Queued jobs the host started itself on this tick: the policy that places had left them
    /// waiting for `stall-after` although they fit ([`crate::watchdog`]).
    pub rescued: Vec<JobId>,
    /// The version the watchdog benches, while it does.
    pub benched: Option<&'a Benched>,
    /// Whether the watchdog benched it on this tick.
    pub benched_now: bool,
}

impl Tick<'_> {
    /// The decisions applied on the tick: the active policy's, or a split's arms'.
    pub fn applied(&self) -> impl Iterator<Item = &Decided> {
        self.active.iter().chain(&self.arms)
    }

    /// The actions applied on the tick, all policies together: what a shadow is compared with.
    pub fn applied_actions(&self) -> std::borrow::Cow<'_, [wasmsched_core::bindings::wit::Action]> {
        match (&self.active, &self.arms[..]) {
            (Some(a), []) => std::borrow::Cow::Borrowed(&a.outcome.actions),
            (None, []) => std::borrow::Cow::Borrowed(&[]),
            _ => self.applied().flat_map(|d| d.outcome.actions.iter().cloned()).collect(),
        }
    }
}

/// Whoever runs the loop: the policies, the work at tick boundaries, where ticks go.
pub trait Driver {
    /// At a tick boundary, before observing up to `next_ms`: pace the clock, take commands,
    /// swap policies. No policy is in a call here. False stops the loop.
    fn boundary(&mut self, _rt: &Runtime, _next_ms: u64) -> bool {
        true
    }

    /// The world as just observed, before any policy sees it (every tick), the places the
    /// backend reaches, and where this host stands among its replicas (None: it runs none).
    fn observed(
        &mut self,
        _world: &World,
        _endpoints: Vec<wasmsched_core::backend::Endpoint>,
        _lead: Option<Leadership>,
    ) {
    }

    /// What the backend holds outside the world just observed, and why (a pod group not yet
    /// whole).
    fn held(&mut self, _held: Vec<wasmsched_core::backend::Held>) {}

    /// The policies to ask on this tick.
    fn policies(&mut self) -> Policies<'_>;

    /// The serving policies' states, for the backend to keep for the next leader
    /// ([`wasmsched_core::replicas::Replicas::keep`]); `tick` is the tick's number.
    fn checkpoints(&mut self, _tick: u64) -> Vec<Checkpoint> {
        Vec::new()
    }

    /// Whether to keep the states now, whatever the cadence (a version just swapped in or
    /// rolled back to); asking clears it.
    fn keep_now(&mut self) -> bool {
        false
    }

    /// This host has just taken the lead: start the policies from the states the last leader
    /// kept, before any is asked.
    fn restore(&mut self, _rt: &Runtime, _kept: Vec<Checkpoint>) {}

    /// Every tick, after its actions were applied.
    fn record(&mut self, tick: Tick<'_>);
}

/// Run `policy` against `backend` until the backend has nothing left (or the horizon).
/// `record` sees every tick's outcome, for audit logs and reports.
pub fn run(
    backend: &mut dyn Backend,
    policy: &mut Supervised,
    rt: &Runtime,
    config: &LoopConfig,
    record: impl FnMut(&World, &TickOutcome),
) -> LoopSummary {
    drive(backend, &mut Single { policy, record }, rt, config)
}

/// One policy, whose every decided tick goes to a closure.
struct Single<'a, F> {
    policy: &'a mut Supervised,
    record: F,
}

impl<F: FnMut(&World, &TickOutcome)> Driver for Single<'_, F> {
    fn policies(&mut self) -> Policies<'_> {
        Policies { active: Some(&mut *self.policy), shadows: Vec::new(), split: None }
    }

    fn record(&mut self, tick: Tick<'_>) {
        if let Some(active) = &tick.active {
            (self.record)(tick.world, &active.outcome);
        }
    }
}

/// The longest a policy may ask to be left alone (its decision's `next-call-ms`): a larger ask,
/// up to `u64::MAX`, is read as this (one hour).
pub const MAX_NEXT_CALL_MS: u64 = 3_600_000;

/// The loop: until the backend has nothing left, the horizon, or the driver says stop.
///
/// A policy's `next-call-ms` holds only for the version that asked: a swap or a rollback to
/// another digest is asked on the next tick. Policies are asked at most once a tick and the
/// clock moves on by a tick every time round, so no decision can hold time still.
pub fn drive(backend: &mut dyn Backend, driver: &mut dyn Driver, rt: &Runtime, config: &LoopConfig) -> LoopSummary {
    let tick_ms = (config.tick.as_millis() as u64).max(1);
    let horizon_ms = config.horizon.map(|h| h.as_millis() as u64);
    let mut run = Run::new(backend, config);
    loop {
        let until = run.summary.end_ms + tick_ms;
        if horizon_ms.is_some_and(|h| until > h) || !driver.boundary(rt, until) {
            break;
        }
        let leading = run.lead(backend, driver, rt);
        let placing = run.placing(driver, rt, leading);
        backend.set_placer(if placing { Placer::Policy } else { Placer::Backend });
        run.world.forget_departed();
        let more = backend.observe(&mut run.world, until);
        let status = backend.status();
        driver.observed(
            &run.world,
            status.map(|s| s.endpoints()).unwrap_or_default(),
            backend.replicas().map(|r| r.leadership()),
        );
        driver.held(status.map(|s| s.held()).unwrap_or_default());
        if !more {
            // The last observation: nothing is left to run, and the driver has seen it so.
            break;
        }
        run.summary.end_ms = until;
        run.summary.ticks += 1;
        let asked = leading && run.world.job_count() + run.world.queue_len() > 0 && until >= run.next_call_ms;
        let mut apply_errors = run.settled(backend);
        let Decisions { active, shadows, arms, disrupted } = match asked {
            true => run.decide(backend, driver, rt, until, &mut apply_errors),
            false => Decisions::default(),
        };
        // The default placement knows no pools: while a split keeps its arms to pools of their
        // own, the stall rule would start an arm's job on another arm's nodes, so it rests.
        let pooled = driver.policies().split.is_some_and(|s| !s.experiment.pools.is_empty());
        let rescued = match leading && placing && config.watchdog.enabled && !pooled {
            true => rescue(backend, &mut run, config.watchdog.stall_after),
            false => {
                run.stalls.clear();
                Vec::new()
            }
        };
        run.summary.rescues += rescued.len() as u64;
        let churned = std::mem::take(&mut run.churned);
        let shown = Shown {
            active: active.as_ref(),
            rescued: &rescued,
            churned: churned.as_ref().map(|(j, n)| (j.as_str(), *n)),
        };
        let benched_now = leading && watch(&mut run.dog, driver, backend, &run.world, shown);
        run.summary.benchings += u64::from(benched_now);
        if leading
            && let Some(replicas) = backend.replicas_mut()
            && replicas.keep_every() > 0
            && (driver.keep_now() || run.summary.ticks.is_multiple_of(replicas.keep_every()))
        {
            replicas.keep(&driver.checkpoints(run.summary.ticks));
        }
        driver.record(Tick {
            number: run.summary.ticks,
            world: &run.world,
            asked,
            active,
            shadows,
            arms,
            apply_errors,
            disruptions: disrupted,
            budget_spent: run.budget.spent(run.world.time_ms()),
            rescued,
            benched: run.dog.benched(),
            benched_now,
        });
    }
    if let Some(replicas) = backend.replicas_mut() {
        if run.led && replicas.leads() {
            replicas.keep(&driver.checkpoints(run.summary.ticks));
        }
        replicas.step_down();
    }
    run.summary
}

/// What the loop keeps from tick to tick.
struct Run {
    world: World,
    summary: LoopSummary,
    budget: Budget,
    dog: Watchdog,
    stalls: Stalls,
    churn: Churn,
    /// This tick's job disrupted most times in a row before it progressed, by name, and how many.
    churned: Option<(String, u32)>,
    /// The loop's warnings about what the active policy's actions met, at most once a minute
    /// per kind.
    throttle: Throttle,
    /// Before this backend time the active version asked not to be called.
    next_call_ms: u64,
    /// The digest of the version whose `next-call-ms` holds.
    delayed_by: Option<String>,
    /// Whether this host led at the last tick.
    led: bool,
}

impl Run {
    fn new(backend: &dyn Backend, config: &LoopConfig) -> Run {
        let mut world = World::new();
        world.set_tenants(config.tenants.clone());
        Run {
            world,
            summary: LoopSummary::default(),
            budget: Budget::new(config.budget)
                .share_restarts(backend.progress().unwrap_or(&Reports).gpu_share_restarts()),
            dog: Watchdog::new(config.watchdog).ticking(config.tick),
            stalls: Stalls::new(),
            churn: Churn::new(),
            churned: None,
            throttle: Throttle::new("the active policy's actions"),
            next_call_ms: 0,
            delayed_by: None,
            led: false,
        }
    }

    /// Whether this host leads now; when it has just taken the lead, the policies start from
    /// the states the last leader kept.
    fn lead(&mut self, backend: &mut dyn Backend, driver: &mut dyn Driver, rt: &Runtime) -> bool {
        let leading = backend.leads();
        if leading
            && !self.led
            && let Some(replicas) = backend.replicas_mut()
        {
            driver.restore(rt, replicas.kept());
            self.delayed_by = None;
        }
        self.led = leading;
        leading
    }

    /// Whether the active policy places. Another version than the one whose `next-call-ms`
    /// holds is asked now; a version the watchdog benched that is no longer the active one is
    /// released. A standby asks nothing of its policies and leaves the watchdog as it stands.
    fn placing(&mut self, driver: &mut dyn Driver, rt: &Runtime, leading: bool) -> bool {
        let now = self.summary.end_ms;
        let policies = driver.policies();
        let (placing, swapped, released) = match (policies.active, policies.split) {
            _ if !leading => (false, false, false),
            (Some(p), _) => {
                let digest = p.policy().digest();
                let released = self.dog.benched().is_some_and(|b| b.sha256 != digest);
                let swapped = self.delayed_by.as_deref() != Some(digest);
                (p.places(rt, now), swapped, released)
            }
            // The arms of a split place when any of them does: each places its own queue.
            (None, Some(split)) => {
                let mut places = false;
                for p in split.arms.into_iter().flatten() {
                    places |= p.places(rt, now);
                }
                (places, true, self.dog.benched().is_some())
            }
            (None, None) => (false, self.delayed_by.is_some(), self.dog.benched().is_some()),
        };
        if swapped {
            self.next_call_ms = 0;
        }
        if released && let Some(b) = self.dog.release() {
            tracing::warn!(policy = %b.policy, sha256 = %b.sha256, "watchdog: another version is active; control goes back to the policy");
        }
        placing
    }

    /// Actions of earlier ticks that were in flight, counted as applied then, and failed since.
    fn settled(&mut self, backend: &mut dyn Backend) -> Vec<ApplyError> {
        let failed = backend.settled();
        if let Some(failed) = validate::summary(failed.iter().map(|e| (e.job, None, &e.reason[..])))
            && self.throttle.allow("actions of earlier ticks failed")
        {
            tracing::warn!(%failed, "actions of earlier ticks failed once they reached the backend");
        }
        self.summary.applied = self.summary.applied.saturating_sub(failed.len() as u64);
        self.summary.apply_errors += failed.len() as u64;
        failed
    }

    /// Ask every policy; hold the active one's actions (or a split's arms') to the budget and
    /// apply them. The actions that failed go to `apply_errors`, the job disrupted most times
    /// in a row before it progressed to `churned` ([`Churn`]).
    fn decide(
        &mut self,
        backend: &mut dyn Backend,
        driver: &mut dyn Driver,
        rt: &Runtime,
        until: u64,
        apply_errors: &mut Vec<ApplyError>,
    ) -> Decisions {
        self.summary.decisions += 1;
        let policies = driver.policies();
        let mut active = policies.active.map(|p| Decided::ask(p, rt, &self.world));
        let shadows = policies.shadows.into_iter().map(|p| Decided::ask(p, rt, &self.world)).collect();
        let mut disrupted = 0;
        if let Some(a) = &mut active {
            disrupted += self.apply(backend, a, apply_errors);
        }
        let mut arms = Vec::new();
        if let Some(split) = policies.split {
            arms = self.decide_split(backend, rt, split, apply_errors, &mut disrupted);
        }
        let delay = active.as_ref().and_then(|a| a.outcome.next_call_ms).unwrap_or(0);
        self.next_call_ms = until.saturating_add(delay.min(MAX_NEXT_CALL_MS));
        self.delayed_by = active.as_ref().map(|a| a.digest.clone());
        Decisions { active, shadows, arms, disrupted }
    }

    /// A split's arms, each asked on its view ([`ExperimentConfig::view`]), in an
    /// order that turns every tick so that no arm always takes the free GPUs first; each sees
    /// what the arms before it applied. An action on another arm's job is refused.
    fn decide_split(
        &mut self,
        backend: &mut dyn Backend,
        rt: &Runtime,
        split: Split<'_>,
        apply_errors: &mut Vec<ApplyError>,
        disrupted: &mut u64,
    ) -> Vec<Decided> {
        let experiment = split.experiment;
        let n = split.arms.len();
        let mut asked: Vec<Option<Decided>> = (0..n).map(|_| None).collect();
        let mut arms = split.arms;
        let first = self.summary.ticks as usize;
        for k in (0..n).map(|i| (i + first) % n) {
            let Some(policy) = arms[k].take() else { continue };
            let view = experiment.view(&self.world, k);
            let mut d = Decided::ask(policy, rt, &view);
            let (own, foreign): (Vec<_>, Vec<_>) = std::mem::take(&mut d.outcome.actions)
                .into_iter()
                .partition(|a| self.world.spec(a.job).is_none_or(|spec| experiment.arm_of(spec) == k));
            d.outcome.actions = own;
            d.outcome.rejected.extend(foreign.into_iter().map(|action| {
                let owner = self.world.spec(action.job).map_or(0, |spec| experiment.arm_of(spec));
                let reason = format!(
                    "job {} belongs to arm {} of experiment {}: an arm acts on its own jobs only",
                    job_name(&self.world, action.job),
                    experiment.arms[owner],
                    experiment.name
                );
                validate::Rejection { action, reason }
            }));
            *disrupted += self.apply(backend, &mut d, apply_errors);
            asked[k] = Some(d);
        }
        asked.into_iter().flatten().collect()
    }

    /// Hold `a`'s actions to the budget and apply them; returns how many disrupt their jobs.
    fn apply(&mut self, backend: &mut dyn Backend, a: &mut Decided, apply_errors: &mut Vec<ApplyError>) -> u64 {
        let (admitted, refused) = self.budget.admit(std::mem::take(&mut a.outcome.actions), &self.world);
        let over = refused.iter().map(|r| (r.action.job, Some(&r.action.kind), &r.reason[..]));
        if let Some(summary) = validate::summary(over)
            && self.throttle.allow("actions over the disruption budget")
        {
            tracing::warn!(policy = %a.policy, refused = %summary, "actions over the disruption budget");
        }
        a.outcome.actions = admitted;
        a.outcome.over_budget = refused;
        let disrupted = self.budget.disruptions(&a.outcome.actions);
        self.summary.disruptions += disrupted;
        self.summary.over_budget += a.outcome.over_budget.len() as u64;
        let failed = backend.apply(&a.outcome.actions, &mut self.world);
        let hit = a.outcome.actions.iter().filter(|x| disruptive(&x.kind) && !failed.iter().any(|e| e.job == x.job));
        let progress = backend.progress().unwrap_or(&Reports);
        let kept = |job, since| progress.progressed_since(job, since, &self.world);
        let churned = self.churn.disrupted(&a.digest, hit.map(|x| x.job), &self.world, kept);
        self.churned = churned.map(|(job, n)| (job_name(&self.world, job), n));
        if let Some(summary) = validate::summary(failed.iter().map(|e| (e.job, None, &e.reason[..])))
            && self.throttle.allow("actions could not be applied")
        {
            tracing::warn!(policy = %a.policy, failed = %summary, "actions could not be applied");
        }
        self.summary.applied += (a.outcome.actions.len() - failed.len()) as u64;
        self.summary.apply_errors += failed.len() as u64;
        apply_errors.extend(failed);
        disrupted
    }
}

/// What [`Run::decide`] asked and applied on a tick.
#[derive(Default)]
struct Decisions {
    active: Option<Decided>,
    shadows: Vec<Decided>,
    arms: Vec<Decided>,
    /// How many applied actions disrupted their jobs.
    disrupted: u64,
}

/// The watchdog's stall rule: start the queued jobs the default placement would have started
/// `stall_after` ago and the policy that places has left waiting since. Returns those started.
fn rescue(backend: &mut dyn Backend, run: &mut Run, stall_after: Duration) -> Vec<JobId> {
    let Run { world, stalls, throttle, .. } = run;
    if world.queue_len() == 0 {
        stalls.clear();
        return Vec::new();
    }
    let Some(placement) = backend.placement() else { return Vec::new() };
    let overdue = stalls.overdue(&placement.startable(world), world.time_ms(), stall_after);
    if overdue.is_empty() {
        return Vec::new();
    }
    let started = placement.rescue(&overdue, world);
    stalls.started(&started);
    if !started.is_empty() && throttle.allow("jobs left waiting, started by the host") {
        let names: Vec<String> = started.iter().take(5).map(|&job| job_name(world, job)).collect();
        let more = started.len().saturating_sub(names.len());
        tracing::warn!(
            jobs = %names.join(", "),
            more,
            waited_s = stall_after.as_secs(),
            "watchdog: the policy that places left these jobs waiting although they fit; the host started them with the default placement"
        );
    }
    started
}

/// A job's name for the log, or its handle once it has left the world.
fn job_name(world: &World, job: JobId) -> String {
    world.spec(job).map_or_else(|| format!("#{job}"), |s| s.name.clone())
}

/// What the loop did on a tick that the watchdog judges.
struct Shown<'a> {
    /// The active policy's answer, when it was asked.
    active: Option<&'a Decided>,
    /// The jobs the host rescued from the queue.
    rescued: &'a [JobId],
    /// The job disrupted most times in a row before it progressed, by name, and how many.
    churned: Option<(&'a str, u32)>,
}

/// Show the watchdog the tick; when it benches the active version, bench it. True when it did.
fn watch(dog: &mut Watchdog, driver: &mut dyn Driver, backend: &dyn Backend, world: &World, shown: Shown<'_>) -> bool {
    let Shown { active, rescued, churned } = shown;
    let Some(p) = driver.policies().active else { return false };
    // Jobs run and none has progressed: judged only where the backend can tell, and only while
    // the policy itself answers (a failing one is the other rule's).
    let idle_ms = backend
        .progress()
        .unwrap_or(&Reports)
        .last_progress_ms()
        .filter(|_| world.job_count() > 0 && active.is_none_or(|a| a.outcome.failure.is_none()))
        .map(|at| world.time_ms().saturating_sub(at));
    let seen = watchdog::Seen {
        policy: p.policy().name(),
        sha256: p.policy().digest(),
        failed: active.map(|a| a.outcome.failure.is_some()),
        rescued: rescued.len(),
        idle_ms,
        churned,
    };
    let Some(b) = dog.observe(seen, world.time_ms()) else { return false };
    tracing::error!(
        policy = %b.policy,
        sha256 = %b.sha256,
        why = %b.why,
        safe = %b.safe,
        "watchdog: the active policy is benched; the safe policy runs until a new version is admitted or an operator rolls back"
    );
    p.bench(&b.why, b.safe);
    true
}
