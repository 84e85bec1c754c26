//! What the operator's page shows beyond the status: the world as last observed, every action
//! the active policy took and what became of it, the tenants' and the shadows' figures over
//! time, and the jobs that ended lately. The loop writes it once a tick; the page's handlers
//! read it ([`crate::api::page`]). Everything in it is bounded: [`DECISIONS_KEPT`] decisions,
//! [`POINTS_KEPT`] points a series (thinned by halves as it grows), [`ENDED_KEPT`] ended jobs.

pub mod view;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::Serialize;

use wasmsched_core::bindings::wit::{self, ActionKind};
use wasmsched_core::world::{JobId, Record, World};
use wasmsched_loop::budget::BudgetConfig;
use wasmsched_loop::control::{Decided, Tick};
use wasmsched_loop::shadow::Agreement;

/// How many decisions the journal keeps (the audit log keeps every one).
pub const DECISIONS_KEPT: usize = 20_000;
/// How many points a series over time keeps; past that every other one goes.
pub const POINTS_KEPT: usize = 720;
/// How many ended jobs the journal remembers.
pub const ENDED_KEPT: usize = 500;
/// How many differences from the active policy the journal keeps per shadow.
pub const DIFFERENCES_KEPT: usize = 50;
/// The longest reason or detail kept, bytes (a policy's words are untrusted).
const WORDS_KEPT: usize = 200;

/// What became of one action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Handed to the backend, which applied it.
    Applied,
    /// Refused by validation.
    Refused,
    /// Valid, but refused over the disruption budget.
    OverBudget,
    /// The backend could not apply it.
    NotApplied,
    /// The host started the job itself (the watchdog's stall rule).
    Rescued,
    /// The policy failed; its fallback's action was applied.
    Fallback,
}

impl Outcome {
    /// Every outcome, in the order the page lists them.
    pub const ALL: [Outcome; 6] = [
        Outcome::Applied,
        Outcome::Refused,
        Outcome::OverBudget,
        Outcome::NotApplied,
        Outcome::Rescued,
        Outcome::Fallback,
    ];

    /// Its name, as in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::Refused => "refused",
            Outcome::OverBudget => "over-budget",
            Outcome::NotApplied => "not-applied",
            Outcome::Rescued => "rescued",
            Outcome::Fallback => "fallback",
        }
    }
}

/// One action on the timeline.
#[derive(Clone, Debug, Serialize)]
pub struct Decision {
    /// Its number on the timeline, from 1.
    pub seq: u64,
    /// The tick that took it.
    pub tick: u64,
    /// The backend's clock then, ms.
    pub time_ms: u64,
    /// The wall clock then, Unix ms.
    pub wall_ms: u64,
    /// The job acted on.
    pub job: Option<JobId>,
    /// Its name, as the host knew it then.
    pub job_name: String,
    /// Its tenant.
    pub tenant: String,
    /// The action's kind (`place`, `preempt`, … `rescue`).
    pub kind: &'static str,
    /// The action in a few words.
    pub detail: String,
    /// The policy that took it.
    pub policy: String,
    /// That policy's version number.
    pub version: u32,
    /// The version's sha256, its first 12 hex digits.
    pub sha256: String,
    /// The policy's words.
    pub reason: String,
    /// What became of it.
    pub outcome: Outcome,
    /// Why it was refused or not applied.
    pub why: Option<String>,
}

/// One tenant at one time.
#[derive(Clone, Debug, Serialize)]
pub struct TenantPoint {
    /// Its name.
    pub name: String,
    /// GPUs held.
    pub gpus: u64,
    /// GPUs its fair share gives it.
    pub gpus_entitled: f64,
    /// GPUs its queued jobs ask for.
    pub gpus_queued: u64,
}

/// Every tenant at one time.
#[derive(Clone, Debug, Serialize)]
pub struct TenantsAt {
    /// The backend's clock, ms.
    pub time_ms: u64,
    /// Each tenant.
    pub tenants: Vec<TenantPoint>,
}

/// A shadow's agreement counts at one time (cumulative).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct AgreementAt {
    /// The backend's clock, ms.
    pub time_ms: u64,
    /// Ticks compared so far.
    pub compared: u64,
    /// Ticks on which it decided as the active policy did.
    pub agreed: u64,
}

/// A tick on which a shadow decided otherwise than the active policy.
#[derive(Clone, Debug, Serialize)]
pub struct Difference {
    /// The tick.
    pub tick: u64,
    /// The backend's clock, ms.
    pub time_ms: u64,
    /// Actions only the active policy took.
    pub only_active: Vec<String>,
    /// Actions only the shadow would have taken.
    pub only_shadow: Vec<String>,
}

/// One shadow's record.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ShadowTrail {
    /// The policy's name.
    pub name: String,
    /// Its agreement over time.
    pub series: Series<AgreementAt>,
    /// Its latest differences, newest first.
    pub differences: VecDeque<Difference>,
}

/// How the host compared one shadow with the active policy on a tick (`shadow::compare`, as
/// the status and the audit log count it).
#[derive(Clone, Copy, Debug, Default)]
pub struct ShadowSeen {
    /// Its agreement so far, this tick counted.
    pub agreement: Agreement,
    /// Whether it decided as the active policy did on this tick.
    pub agrees: bool,
}

/// A job that has ended (or left the backend), as last seen.
#[derive(Clone, Debug)]
pub struct Ended {
    /// Its declaration.
    pub spec: wit::JobSpec,
    /// Its tenant's name.
    pub tenant: String,
    /// How long it ran.
    pub run_ms: u64,
    /// When it was last seen, ms.
    pub last_seen_ms: u64,
    /// Its last progress records.
    pub progress: Vec<Record>,
}

/// A series over time that keeps at most [`POINTS_KEPT`] points: once full, every other point
/// goes and from then on only every other sample is kept, so the points stay evenly spread
/// over the whole run.
#[derive(Clone, Debug, Serialize)]
#[serde(transparent)]
pub struct Series<T> {
    points: Vec<T>,
    #[serde(skip)]
    stride: u64,
    #[serde(skip)]
    offered: u64,
}

impl<T> Default for Series<T> {
    fn default() -> Self {
        Series { points: Vec::new(), stride: 1, offered: 0 }
    }
}

impl<T> Series<T> {
    /// Offer a sample; kept when it falls on the stride.
    pub fn push(&mut self, point: T) {
        if self.offered.is_multiple_of(self.stride) {
            self.points.push(point);
            if self.points.len() >= POINTS_KEPT {
                let mut i = 0;
                self.points.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                self.stride *= 2;
            }
        }
        self.offered += 1;
    }

    /// The points kept, oldest first.
    pub fn points(&self) -> &[T] {
        &self.points
    }
}

/// Where the page's data lives; shared by the loop (writing once a tick) and the API.
#[derive(Debug)]
pub struct Journal {
    inner: Mutex<Entries>,
    pulse: tokio::sync::watch::Sender<Pulse>,
}

/// What a page that listens is told after each tick.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Pulse {
    /// Ticks ended.
    pub ticks: u64,
    /// The backend's clock, ms.
    pub time_ms: u64,
    /// The last decision's number.
    pub seq: u64,
    /// Whether the loop still runs.
    pub running: bool,
}

/// The journal's contents.
#[derive(Debug, Default)]
pub struct Entries {
    /// The world as last observed.
    pub world: Option<Arc<World>>,
    /// The latest decisions, oldest first.
    pub decisions: VecDeque<Decision>,
    /// Decisions ever added.
    pub seq: u64,
    /// Why queued jobs wait, as the active policy last said (shared with the views that read
    /// it, so that none copies it under the lock).
    pub pending: Arc<Vec<wit::Pending>>,
    /// The tenants over time.
    pub tenants: Series<TenantsAt>,
    /// Each shadow's record, in the order they first answered.
    pub shadows: Vec<ShadowTrail>,
    /// Jobs that ended lately, oldest first.
    pub ended: VecDeque<Ended>,
    /// The disruption budget as configured.
    pub budget: BudgetConfig,
}

impl Entries {
    /// The ended job with handle `job`, if remembered.
    pub fn ended(&self, job: JobId) -> Option<&Ended> {
        self.ended.iter().rev().find(|e| e.spec.handle == job)
    }

    /// Put `d` on the timeline as its next entry, the oldest going past [`DECISIONS_KEPT`].
    fn add(&mut self, mut d: Decision) {
        self.seq += 1;
        d.seq = self.seq;
        if self.decisions.len() == DECISIONS_KEPT {
            self.decisions.pop_front();
        }
        self.decisions.push_back(d);
    }
}

impl Journal {
    /// An empty journal, with the disruption budget as configured.
    pub fn new(budget: BudgetConfig) -> Journal {
        let (pulse, _) = tokio::sync::watch::channel(Pulse { running: true, ..Pulse::default() });
        Journal { inner: Mutex::new(Entries { budget, ..Entries::default() }), pulse }
    }

    /// Its contents, locked: hold the guard briefly (the loop waits on it).
    pub fn read(&self) -> MutexGuard<'_, Entries> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A receiver of the pulse after each tick.
    pub fn listen(&self) -> tokio::sync::watch::Receiver<Pulse> {
        self.pulse.subscribe()
    }

    /// The world just observed and its tenants as the status shows them (none when there is
    /// only the default one): jobs gone since the last observation are remembered as ended,
    /// the tenants join their series.
    pub fn observed(&self, world: Arc<World>, tenants: &[crate::status::TenantStatus]) {
        let mut e = self.read();
        if !tenants.is_empty() {
            let tenants = tenants
                .iter()
                .map(|t| TenantPoint {
                    name: t.name.clone(),
                    gpus: t.gpus,
                    gpus_entitled: t.gpus_entitled,
                    gpus_queued: t.gpus_queued,
                })
                .collect();
            e.tenants.push(TenantsAt { time_ms: world.time_ms(), tenants });
        }
        if let Some(before) = e.world.take() {
            let now = world.time_ms();
            let gone: Vec<Ended> = before
                .all_jobs()
                .filter(|(spec, _)| world.state(spec.handle).is_none())
                .map(|(spec, state)| Ended {
                    spec: spec.clone(),
                    tenant: tenant_name(&before, state.tenant),
                    run_ms: state.run_ms,
                    last_seen_ms: now,
                    progress: before.history(spec.handle).cloned().collect(),
                })
                .collect();
            for g in gone {
                if e.ended.len() == ENDED_KEPT {
                    e.ended.pop_front();
                }
                e.ended.push_back(g);
            }
        }
        e.world = Some(world);
    }

    /// What one tick did; `version` names each policy's version number, `shadows` how the host
    /// compared each of `tick.shadows` with the active policy, in their order.
    pub fn record(&self, tick: &Tick<'_>, version: impl Fn(&str) -> u32, shadows: &[ShadowSeen]) {
        let world = tick.world;
        let time_ms = world.time_ms();
        let wall_ms = wasmsched_loop::record::wall_ms();
        let mut e = self.read();
        // The active policy's decision, or a split experiment's arms', each for its own jobs.
        let applied: Vec<&Decided> = tick.applied().collect();
        for decided in &applied {
            let o = &decided.outcome;
            let base = Decision {
                seq: 0,
                tick: tick.number,
                time_ms,
                wall_ms,
                job: None,
                job_name: String::new(),
                tenant: String::new(),
                kind: "",
                detail: String::new(),
                policy: decided.policy.to_string(),
                version: version(&decided.policy),
                sha256: short(&decided.digest).to_string(),
                reason: String::new(),
                outcome: Outcome::Applied,
                why: None,
            };
            let of = |a: &wit::Action, outcome: Outcome, why: Option<&str>| {
                let (kind, detail) = describe(&a.kind, world);
                let (job_name, tenant) = job_words(world, a.job);
                Decision {
                    job: Some(a.job),
                    job_name,
                    tenant,
                    kind,
                    detail,
                    reason: words(&a.reason),
                    outcome,
                    why: why.map(words),
                    ..base.clone()
                }
            };
            let fallback = o.fallback.is_some();
            for a in &o.actions {
                let failed = tick.apply_errors.iter().find(|x| x.job == a.job);
                let d = match (failed, fallback) {
                    (Some(x), _) => of(a, Outcome::NotApplied, Some(&x.reason)),
                    (None, true) => {
                        let why = o.failure.as_ref().map(|f| format!("the policy failed ({f}); its fallback's action"));
                        of(a, Outcome::Fallback, why.as_deref())
                    }
                    (None, false) => of(a, Outcome::Applied, None),
                };
                e.add(d);
            }
            for (list, outcome) in [(&o.rejected, Outcome::Refused), (&o.over_budget, Outcome::OverBudget)] {
                for r in list {
                    e.add(of(&r.action, outcome, Some(&r.reason)));
                }
            }
        }
        // A failure of an action still in flight from an earlier tick: its entry was applied.
        let this_tick = |job| applied.iter().any(|d| d.outcome.actions.iter().any(|a| a.job == job));
        for x in tick.apply_errors.iter().filter(|x| !this_tick(x.job)) {
            let earlier = e.decisions.iter_mut().rev().find(|d| d.job == Some(x.job) && d.outcome == Outcome::Applied);
            if let Some(d) = earlier {
                (d.outcome, d.why) = (Outcome::NotApplied, Some(words(&x.reason)));
            }
        }
        if !applied.is_empty() {
            e.pending = Arc::new(applied.iter().flat_map(|d| d.outcome.pending.iter().cloned()).collect());
        }
        for &job in &tick.rescued {
            let (job_name, tenant) = job_words(world, job);
            e.add(Decision {
                seq: 0,
                tick: tick.number,
                time_ms,
                wall_ms,
                job: Some(job),
                job_name,
                tenant,
                kind: "rescue",
                detail: "started by the host".into(),
                policy: "watchdog".into(),
                version: 0,
                sha256: String::new(),
                reason: "it fit, and the policy that places left it waiting past stall-after".into(),
                outcome: Outcome::Rescued,
                why: None,
            });
        }
        let applied_actions = tick.applied_actions();
        for (shadow, &seen) in tick.shadows.iter().zip(shadows) {
            note_shadow(&mut e, tick.number, time_ms, &applied_actions, shadow, seen, world);
        }
        let pulse = Pulse { ticks: tick.number, time_ms, seq: e.seq, running: true };
        drop(e);
        self.pulse.send_replace(pulse);
    }

    /// The loop has ended.
    pub fn finished(&self) {
        self.pulse.send_modify(|p| p.running = false);
    }
}

/// A shadow's agreement so far on its series and, on a tick it decided otherwise than the
/// active policy, the actions only one of them took, in words.
fn note_shadow(
    e: &mut Entries,
    tick: u64,
    time_ms: u64,
    active: &[wit::Action],
    shadow: &Decided,
    seen: ShadowSeen,
    world: &World,
) {
    let at = match e.shadows.iter().position(|s| *s.name == *shadow.policy) {
        Some(at) => at,
        None => {
            e.shadows.push(ShadowTrail { name: shadow.policy.to_string(), ..ShadowTrail::default() });
            e.shadows.len() - 1
        }
    };
    let trail = &mut e.shadows[at];
    let Agreement { compared, agreed, .. } = seen.agreement;
    trail.series.push(AgreementAt { time_ms, compared, agreed });
    if seen.agrees {
        return;
    }
    let said = |actions: &[wit::Action]| -> Vec<String> {
        let mut v: Vec<String> = actions.iter().map(|a| summary(a, world)).collect();
        v.sort();
        v
    };
    let (a, s) = (said(active), said(&shadow.outcome.actions));
    let (only_active, only_shadow) = (minus(&a, &s), minus(&s, &a));
    if trail.differences.len() == DIFFERENCES_KEPT {
        trail.differences.pop_back();
    }
    trail.differences.push_front(Difference { tick, time_ms, only_active, only_shadow });
}

/// What is in sorted `a` and not in sorted `b`, as multisets (12 at most, then how many more).
fn minus(a: &[String], b: &[String]) -> Vec<String> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() {
        match b.get(j).map(|y| a[i].cmp(y)) {
            Some(std::cmp::Ordering::Equal) => (i, j) = (i + 1, j + 1),
            Some(std::cmp::Ordering::Greater) => j += 1,
            _ => {
                out.push(a[i].clone());
                i += 1;
            }
        }
    }
    if out.len() > 12 {
        let more = out.len() - 12;
        out.truncate(12);
        out.push(format!("and {more} more"));
    }
    out
}

/// An action in a few words, the job named: `place train-3 on node-1 ×2`.
pub fn summary(a: &wit::Action, world: &World) -> String {
    let (kind, detail) = describe(&a.kind, world);
    let (name, _) = job_words(world, a.job);
    if detail.is_empty() { format!("{kind} {name}") } else { format!("{kind} {name}: {detail}") }
}

/// An action's kind and what it asks, in a few words.
pub fn describe(kind: &ActionKind, world: &World) -> (&'static str, String) {
    let node = |n: wasmsched_core::world::NodeId| {
        world.nodes().get(n.index()).map_or_else(|| format!("node #{}", n.0), |n| n.name.clone())
    };
    let placed = |p: &wit::Placement| {
        let mut s: Vec<String> = p.nodes.iter().map(|e| format!("{} ×{}", node(e.node), e.gpus.len())).collect();
        if s.len() > 4 {
            let more = s.len() - 4;
            s.truncate(4);
            s.push(format!("{more} more nodes"));
        }
        let shared = if p.share { " (shared)" } else { "" };
        format!("{}{shared}", s.join(", "))
    };
    match kind {
        ActionKind::SetCpu(Some(m)) => ("set-cpu", format!("{m} millicores")),
        ActionKind::SetCpu(None) => ("set-cpu", "no limit".into()),
        ActionKind::SetMemory(Some(b)) => ("set-memory", format!("{:.1} GiB", *b as f64 / (1u64 << 30) as f64)),
        ActionKind::SetMemory(None) => ("set-memory", "no limit".into()),
        ActionKind::Migrate(to) => ("migrate", format!("to {}", node(*to))),
        ActionKind::Deliver => ("deliver", String::new()),
        ActionKind::Stop => ("stop", String::new()),
        ActionKind::SetGpuShare(s) => ("set-gpu-share", format!("GPU {} at {} %", s.gpu, s.percent)),
        ActionKind::Place(p) => ("place", placed(p)),
        ActionKind::Preempt => ("preempt", String::new()),
        ActionKind::Resize(r) => {
            let batch = r.batch_size.map(|b| format!(", batch {b}")).unwrap_or_default();
            ("resize", format!("{}{batch}", placed(&r.placement)))
        }
    }
}

/// A job's name and tenant, as `world` knows them (its handle when it does not).
fn job_words(world: &World, job: JobId) -> (String, String) {
    match (world.spec(job), world.state(job)) {
        (Some(spec), Some(state)) => (words(&spec.name), tenant_name(world, state.tenant)),
        (Some(spec), None) => (words(&spec.name), words(&spec.tenant)),
        _ => (format!("job #{}", job.0), String::new()),
    }
}

/// A tenant's name from its index in `world`.
pub fn tenant_name(world: &World, index: u32) -> String {
    world.tenants().get(index as usize).map(|t| t.name.clone()).unwrap_or_default()
}

/// Untrusted words, cut to [`WORDS_KEPT`] bytes on a character boundary.
fn words(s: &str) -> String {
    let mut end = s.len().min(WORDS_KEPT);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// A digest's first 12 hex digits.
fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_keeps_its_points_spread_over_the_whole_run() {
        let mut s = Series::default();
        for i in 0..10_000u64 {
            s.push(i);
        }
        let p = s.points();
        assert!(p.len() < POINTS_KEPT && p.len() > POINTS_KEPT / 4, "{}", p.len());
        assert_eq!(p[0], 0);
        assert!(*p.last().unwrap() > 9_000, "the newest part is there: {}", p.last().unwrap());
        let gaps: Vec<u64> = p.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.iter().all(|&g| g == gaps[0]), "evenly spread: {gaps:?}");
    }

    #[test]
    fn multiset_difference_counts_repeats_and_says_how_many_more() {
        let v = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(minus(&v(&["a", "a", "b"]), &v(&["a", "c"])), v(&["a", "b"]));
        assert_eq!(minus(&v(&["a"]), &v(&["a"])), Vec::<String>::new());
        let many: Vec<String> = (0..20).map(|i| format!("{i:02}")).collect();
        let d = minus(&many, &[]);
        assert_eq!(d.len(), 13);
        assert_eq!(d[12], "and 8 more");
    }

    #[test]
    fn each_action_is_on_the_timeline_with_what_became_of_it() {
        use wasmsched_core::backend::ApplyError;
        use wasmsched_core::world::NodeId;
        use wasmsched_runtime::supervise::TickOutcome;
        use wasmsched_runtime::validate::Rejection;
        let world = wasmsched_core::world::sample::with_queue(2, 2, 3, 1);
        let journal = Journal::new(BudgetConfig::default());
        journal.observed(Arc::new(world.clone()), &[]);
        let q: Vec<JobId> = world.queue().map(|(spec, _)| spec.handle).collect();
        let place = |job, node| wit::Action {
            job,
            kind: ActionKind::Place(wit::Placement {
                nodes: vec![wit::NodePlacement { node: NodeId(node), gpus: Vec::new() }],
                share: false,
            }),
            reason: "<b>next</b>".into(),
        };
        let tick = |number, actions, rejected, apply_errors| Tick {
            number,
            world: &world,
            asked: true,
            active: Some(Decided {
                policy: Arc::from("fifo"),
                digest: "ab".repeat(32),
                outcome: TickOutcome { actions, rejected, ..TickOutcome::default() },
            }),
            shadows: Vec::new(),
            arms: Vec::new(),
            apply_errors,
            disruptions: 0,
            budget_spent: 0,
            rescued: Vec::new(),
            benched: None,
            benched_now: false,
        };
        let refused = Rejection { action: place(q[2], 9), reason: "no node 9".into() };
        journal.record(&tick(1, vec![place(q[0], 0), place(q[1], 1)], vec![refused], Vec::new()), |_| 3, &[]);
        // The engine fails q1's placement, in flight since tick 1.
        let failed = ApplyError { job: q[1], reason: "the engine said no".into() };
        journal.record(&tick(2, Vec::new(), Vec::new(), vec![failed]), |_| 3, &[]);
        let e = journal.read();
        let shown: Vec<(Option<JobId>, &str, Outcome, Option<&str>)> =
            e.decisions.iter().map(|d| (d.job, d.kind, d.outcome, d.why.as_deref())).collect();
        assert_eq!(
            shown,
            [
                (Some(q[0]), "place", Outcome::Applied, None),
                (Some(q[1]), "place", Outcome::NotApplied, Some("the engine said no")),
                (Some(q[2]), "place", Outcome::Refused, Some("no node 9")),
            ]
        );
        let d = &e.decisions[0];
        assert_eq!((d.seq, d.tick, d.version, d.policy.as_str(), d.reason.as_str()), (1, 1, 3, "fifo", "<b>next</b>"));
        assert_eq!(d.sha256, "abababababab");
        drop(e);
        let not_applied = view::decisions(
            &journal,
            &view::DecisionQuery { outcome: Some("not-applied".into()), ..view::DecisionQuery::default() },
        );
        assert_eq!(not_applied["total"], 1);
        assert_eq!(not_applied["items"][0]["why"], "the engine said no");
    }

    #[test]
    fn untrusted_words_are_cut_on_a_character_boundary() {
        let long = "é".repeat(300);
        let cut = words(&long);
        assert!(cut.len() <= WORDS_KEPT && cut.chars().all(|c| c == 'é'));
    }
}
