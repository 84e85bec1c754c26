//! Hostile fixture: one misbehaviour of thirty-one, picked by the config's `behaviour`, so the
//! host's sandbox, validation and audit meet each without a fixture crate apiece.
//!
//! Behaviours, on every call and deterministically:
//! - `numbers`: one action whose `field` is at the `value` extreme, on the first running job
//!   (the first queued one for `place-*`); nothing when there is no such job.
//! - `log-flood`: 10,000 lines of 200 bytes through the host's log import; decides nothing.
//! - `leak`: keeps another `leak-mib` MiB of touched memory, never freed; decides nothing.
//! - `trap-every-other`: panics on calls 2, 4, … of an instance; on the others caps every
//!   running job at 1000 millicores.
//! - `save-state-spin`, `save-state-trap`, `save-state-huge`: decide nothing; `save_state`
//!   never returns, panics, or returns 48 MiB.
//! - `init-spin`, `init-alloc`: `new` never returns, or allocates and touches 128 MiB in
//!   1 MiB chunks.
//! - `duplicate`: caps, stops and preempts the first running job, each twice; places the
//!   first queued one twice.
//! - `contradictory`: caps, lifts, migrates to node 1, stops and preempts the first running
//!   job; places, then stops, the first queued one.
//! - `stop-everything`: stops every running and every queued job.
//! - `migrate-churn`: migrates the first running job to the next node (index + 1, modulo the
//!   node count).
//! - `preempt-churn`: preempts every running job.
//! - `fail-after`: answers its first three calls of an instance with nothing and every later
//!   one with its own error (not a trap: the instance lives on, so it never recovers).
//! - `resize-churn`: resizes every running job onto the GPUs it holds, on odd calls at the
//!   largest batch size there is (refused: the jobs take none), on even calls as it is (valid:
//!   a restart each, which the disruption budget must hold back).
//! - `pending-flood`: says why jobs wait 200,000 times: every job (running ones too) and
//!   handles that do not exist, short reasons and 64 KiB ones full of control characters.
//!
//! The queue's abusers, each of them on every call, and only the last two also starting the
//! queue:
//! - `never-place`: says it places, and places nothing.
//! - `place-missing-node`: places every queued job on the node one past the last.
//! - `place-missing-gpu`: places every queued job on node 0 with GPU indices past its last.
//! - `place-no-nodes`: places every queued job naming no node.
//! - `place-gpu-repeated`: places every queued job on GPU 0 of node 0, named four times.
//! - `place-wrong-count`: places every queued job on one GPU more than it asks for.
//! - `place-running`: places every running job again, on the next node.
//! - `pile-on`: places every queued job on GPUs `0..n` of node 0, not shared, whoever holds
//!   them.
//! - `place-twice`: places every queued job twice, on node 0 and on node 1, each on the
//!   node's first free GPUs.
//! - `preempt-for-head`: preempts the first running job and places the queue's head on the
//!   GPUs that frees, in one decision (with nothing running, places the head first fit).
//! - `preempt-replace-all`: preempts every running job and places every queued job, first fit
//!   over the GPUs that frees.
//! - `huge-placement`: places the queue's head with one placement naming a million node
//!   entries.
//! - `preempt-protected`: preempts every running job that opted out of disruption
//!   (`wasmsched.disruptible=false`).
//! - `place-preempted`: preempts every running job and places it again on its own GPUs, in
//!   one decision.
//!
//! Every behaviour before them but `duplicate`, `contradictory` and `stop-everything` also
//! starts queued jobs, first fit: the fixture says it places, so nothing would run otherwise.
//!
//! Config (kebab-case keys; a key the chosen behaviour does not use is refused):
//! - `behaviour` (required): one of the names above.
//! - `field`, `value` (`numbers` only, both required): which number ([`Field`]) and which
//!   extreme, `zero` or `max` (the maximum of the number's integer type).
//! - `leak-mib` (`leak` only, 4): MiB kept per call, 1 to 1024.

use std::fmt::Write as _;
use std::hint::black_box;

use serde::Deserialize;
use wasmsched_sdk::log::{self, Level};
use wasmsched_sdk::prelude::*;

/// The fixture's config: which misbehaviour, and its parameters.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// What to do wrong.
    pub behaviour: Behaviour,
    /// For `numbers`: which number is at an extreme.
    pub field: Option<Field>,
    /// For `numbers`: which extreme.
    pub value: Option<Extreme>,
    /// For `leak`: MiB kept on every call (4 when absent).
    pub leak_mib: Option<u32>,
}

/// The misbehaviours; the crate's doc says what each does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Behaviour {
    /// One action with a number at an extreme.
    Numbers,
    /// Ten thousand log lines a call.
    LogFlood,
    /// Memory kept and never freed, more on every call.
    Leak,
    /// A panic on every even call.
    TrapEveryOther,
    /// `save_state` never returns.
    SaveStateSpin,
    /// `save_state` panics.
    SaveStateTrap,
    /// `save_state` returns 48 MiB.
    SaveStateHuge,
    /// `new` never returns.
    InitSpin,
    /// `new` allocates past any 64 MiB cap.
    InitAlloc,
    /// Every action twice.
    Duplicate,
    /// Actions that undo or forbid each other, on one job.
    Contradictory,
    /// Stop every job.
    StopEverything,
    /// Move the first running job on every call.
    MigrateChurn,
    /// Preempt every running job on every call.
    PreemptChurn,
    /// Its own error on every call after the third.
    FailAfter,
    /// Restart every running job by resizing it onto its own GPUs.
    ResizeChurn,
    /// Reasons why jobs wait, far too many and too long.
    PendingFlood,
    /// Places nothing.
    NeverPlace,
    /// Places on a node that does not exist.
    PlaceMissingNode,
    /// Places on GPUs node 0 does not have.
    PlaceMissingGpu,
    /// Places naming no node.
    PlaceNoNodes,
    /// Places on one GPU named four times.
    PlaceGpuRepeated,
    /// Places on one GPU more than asked.
    PlaceWrongCount,
    /// Places running jobs again.
    PlaceRunning,
    /// Places everything on node 0's first GPUs, not shared.
    PileOn,
    /// Places everything twice.
    PlaceTwice,
    /// Preempts a running job for the queue's head.
    PreemptForHead,
    /// Preempts everything and places the queue back.
    PreemptReplaceAll,
    /// One placement of a million node entries.
    HugePlacement,
    /// Preempts the jobs that opted out of disruption.
    PreemptProtected,
    /// Preempts every running job and places it back, in one decision.
    PlacePreempted,
}

impl Behaviour {
    /// Whether it also starts queued jobs (first fit), as a placing policy must for anything
    /// to run: every behaviour but those whose point is the actions they send.
    fn places_the_queue(self) -> bool {
        !matches!(self, Behaviour::Duplicate | Behaviour::Contradictory | Behaviour::StopEverything)
            && (!self.abuses_the_queue() || matches!(self, Behaviour::PreemptProtected | Behaviour::PlacePreempted))
    }

    /// Whether it is one of the queue's abusers (the crate's doc lists them).
    fn abuses_the_queue(self) -> bool {
        matches!(
            self,
            Behaviour::NeverPlace
                | Behaviour::PlaceMissingNode
                | Behaviour::PlaceMissingGpu
                | Behaviour::PlaceNoNodes
                | Behaviour::PlaceGpuRepeated
                | Behaviour::PlaceWrongCount
                | Behaviour::PlaceRunning
                | Behaviour::PileOn
                | Behaviour::PlaceTwice
                | Behaviour::PreemptForHead
                | Behaviour::PreemptReplaceAll
                | Behaviour::HugePlacement
                | Behaviour::PreemptProtected
                | Behaviour::PlacePreempted
        )
    }

    /// Its name in the config.
    fn name(self) -> &'static str {
        match self {
            Behaviour::Numbers => "numbers",
            Behaviour::LogFlood => "log-flood",
            Behaviour::Leak => "leak",
            Behaviour::TrapEveryOther => "trap-every-other",
            Behaviour::SaveStateSpin => "save-state-spin",
            Behaviour::SaveStateTrap => "save-state-trap",
            Behaviour::SaveStateHuge => "save-state-huge",
            Behaviour::InitSpin => "init-spin",
            Behaviour::InitAlloc => "init-alloc",
            Behaviour::Duplicate => "duplicate",
            Behaviour::Contradictory => "contradictory",
            Behaviour::StopEverything => "stop-everything",
            Behaviour::MigrateChurn => "migrate-churn",
            Behaviour::PreemptChurn => "preempt-churn",
            Behaviour::FailAfter => "fail-after",
            Behaviour::ResizeChurn => "resize-churn",
            Behaviour::PendingFlood => "pending-flood",
            Behaviour::NeverPlace => "never-place",
            Behaviour::PlaceMissingNode => "place-missing-node",
            Behaviour::PlaceMissingGpu => "place-missing-gpu",
            Behaviour::PlaceNoNodes => "place-no-nodes",
            Behaviour::PlaceGpuRepeated => "place-gpu-repeated",
            Behaviour::PlaceWrongCount => "place-wrong-count",
            Behaviour::PlaceRunning => "place-running",
            Behaviour::PileOn => "pile-on",
            Behaviour::PlaceTwice => "place-twice",
            Behaviour::PreemptForHead => "preempt-for-head",
            Behaviour::PreemptReplaceAll => "preempt-replace-all",
            Behaviour::HugePlacement => "huge-placement",
            Behaviour::PreemptProtected => "preempt-protected",
            Behaviour::PlacePreempted => "place-preempted",
        }
    }
}

/// For `numbers`: the number set to an extreme. A running job means the first running job; a
/// queued job, the first queued one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Field {
    /// The job handle (u32) of a `set-cpu` of 500 millicores; needs no job.
    Job,
    /// A running job's CPU limit in millicores (u64).
    SetCpu,
    /// A running job's memory limit in bytes (u64).
    SetMemory,
    /// The node (u32) a running job migrates to.
    MigrateNode,
    /// The GPU index (u32) of a running job's 50 % GPU share.
    GpuShareGpu,
    /// The percent (u8) of a running job's share of its GPU 0.
    GpuSharePercent,
    /// The node (u32) a queued job is placed on, with GPUs `[0]`.
    PlaceNode,
    /// The one GPU index (u32) a queued job is placed on, on node 0.
    PlaceGpu,
    /// The decision's `next-call-ms` (u64), with no action.
    NextCallMs,
}

impl Field {
    /// Its name in the config.
    fn name(self) -> &'static str {
        match self {
            Field::Job => "job",
            Field::SetCpu => "set-cpu",
            Field::SetMemory => "set-memory",
            Field::MigrateNode => "migrate-node",
            Field::GpuShareGpu => "gpu-share-gpu",
            Field::GpuSharePercent => "gpu-share-percent",
            Field::PlaceNode => "place-node",
            Field::PlaceGpu => "place-gpu",
            Field::NextCallMs => "next-call-ms",
        }
    }
}

/// For `numbers`: which end of the number's integer type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Extreme {
    /// Zero.
    Zero,
    /// The type's maximum: `u8::MAX`, `u32::MAX` or `u64::MAX`.
    Max,
}

impl Extreme {
    fn u8(self) -> u8 {
        if self == Extreme::Max { u8::MAX } else { 0 }
    }

    fn u32(self) -> u32 {
        if self == Extreme::Max { u32::MAX } else { 0 }
    }

    fn u64(self) -> u64 {
        if self == Extreme::Max { u64::MAX } else { 0 }
    }

    /// A wait that crosses the contract as this many milliseconds: `Seconds::as_millis`
    /// saturates, so the largest finite `f64` becomes `u64::MAX`.
    fn wait(self) -> Seconds {
        Seconds(if self == Extreme::Max { f64::MAX } else { 0.0 })
    }

    fn name(self) -> &'static str {
        if self == Extreme::Max { "max" } else { "zero" }
    }
}

/// `leak-mib` when the config leaves it out.
const DEFAULT_LEAK_MIB: u32 = 4;
/// What `init-alloc` allocates, in 1 MiB chunks.
const INIT_ALLOC_MIB: usize = 128;
/// What `save-state-huge` returns.
const HUGE_STATE_BYTES: usize = 48 << 20;
/// `log-flood`'s lines per call, and each line's length.
const FLOOD_LINES: usize = 10_000;
const FLOOD_LINE_BYTES: usize = 200;
/// `pending-flood`: reasons per call, and the length of its long ones.
const PENDING_FLOOD: usize = 200_000;
const PENDING_LONG_BYTES: usize = 64 << 10;
/// `fail-after`: the calls of an instance answered before the errors begin.
const FAIL_AFTER_CALLS: u64 = 3;

/// The fixture.
pub struct Misbehave {
    behaviour: Behaviour,
    /// `numbers`' field and extreme; `Some` exactly when the behaviour is `numbers`.
    numbers: Option<(Field, Extreme)>,
    leak_mib: u32,
    /// Calls to `decide` on this instance.
    calls: u64,
    /// What `leak` and `init-alloc` keep.
    kept: Vec<Vec<u8>>,
}

impl Policy for Misbehave {
    type Config = Config;

    const PLACES: bool = true;

    fn new(config: Config) -> Result<Self, PolicyError> {
        let b = config.behaviour;
        let name = b.name();
        let refuse = |m: String| Err(PolicyError::InvalidConfig(m));
        let numbers = match (b, config.field, config.value) {
            (Behaviour::Numbers, Some(field), Some(value)) => Some((field, value)),
            (Behaviour::Numbers, field, _) => {
                let missing = if field.is_none() { "field" } else { "value" };
                return refuse(format!("behaviour `numbers` needs `{missing}` (see the crate's doc): add it"));
            }
            (_, None, None) => None,
            _ => return refuse(format!("`field` and `value` are for behaviour `numbers`, not `{name}`: remove them")),
        };
        let leak_mib = match (b, config.leak_mib) {
            (Behaviour::Leak, None) => DEFAULT_LEAK_MIB,
            (Behaviour::Leak, Some(mib @ 1..=1024)) => mib,
            (Behaviour::Leak, Some(mib)) => return refuse(format!("leak-mib = {mib} is out of range: give 1 to 1024")),
            (_, None) => 0,
            (_, Some(_)) => return refuse(format!("`leak-mib` is for behaviour `leak`, not `{name}`: remove it")),
        };
        let mut policy = Misbehave { behaviour: b, numbers, leak_mib, calls: 0, kept: Vec::new() };
        match b {
            Behaviour::InitSpin => spin_forever(),
            Behaviour::InitAlloc => {
                for _ in 0..INIT_ALLOC_MIB {
                    policy.kept.push(black_box(vec![1u8; 1 << 20]));
                }
            }
            _ => {}
        }
        Ok(policy)
    }

    fn decide(&mut self, s: &Snapshot) -> Result<Decision, PolicyError> {
        self.calls += 1;
        let mut d = Decision::new();
        match self.behaviour {
            Behaviour::Numbers => {
                if let Some((field, value)) = self.numbers {
                    numbers(s, field, value, &mut d);
                }
            }
            Behaviour::LogFlood => log_flood(self.calls),
            Behaviour::Leak => self.kept.push(black_box(vec![1u8; (self.leak_mib as usize) << 20])),
            Behaviour::TrapEveryOther => trap_every_other(s, self.calls, &mut d),
            Behaviour::SaveStateSpin
            | Behaviour::SaveStateTrap
            | Behaviour::SaveStateHuge
            | Behaviour::InitSpin
            | Behaviour::InitAlloc => {}
            Behaviour::Duplicate => duplicate(s, &mut d),
            Behaviour::Contradictory => contradictory(s, &mut d),
            Behaviour::StopEverything => stop_everything(s, &mut d),
            Behaviour::MigrateChurn => migrate_churn(s, &mut d),
            Behaviour::PreemptChurn => preempt_churn(s, &mut d),
            Behaviour::FailAfter if self.calls > FAIL_AFTER_CALLS => {
                return Err(PolicyError::Failed(format!("misbehave fail-after: call {} fails", self.calls)));
            }
            Behaviour::FailAfter => {}
            Behaviour::ResizeChurn => resize_churn(s, self.calls, &mut d),
            Behaviour::PendingFlood => pending_flood(s, &mut d),
            b if b.abuses_the_queue() => abuse_the_queue(b, s, &mut d),
            _ => unreachable!("every behaviour has its arm above"),
        }
        if self.behaviour.places_the_queue() {
            // It says it places, so nothing starts unless it does: the rest of the queue, first fit
            // (all of it but the job `numbers` placed, or misplaced, itself).
            let placed = self.numbers.filter(|(f, _)| matches!(f, Field::PlaceNode | Field::PlaceGpu));
            place_queue(s, placed.and_then(|_| s.queue().next().map(|j| j.id())), &mut d);
        }
        Ok(d)
    }

    fn save_state(&self) -> Vec<u8> {
        match self.behaviour {
            Behaviour::SaveStateSpin => spin_forever(),
            Behaviour::SaveStateTrap => {
                panic!("misbehave save-state-trap: saving state fails after {} calls", self.calls)
            }
            Behaviour::SaveStateHuge => vec![0x5a; HUGE_STATE_BYTES],
            _ => Vec::new(),
        }
    }
}

/// Never returns: a loop the optimiser cannot remove.
fn spin_forever() -> ! {
    let mut n = black_box(1u64);
    loop {
        n = black_box(n.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

/// `numbers`: the one action, or the next call, with `field` at `value`.
fn numbers(s: &Snapshot, field: Field, value: Extreme, d: &mut Decision) {
    let running = s.jobs().next().map(|j| j.id());
    let queued = s.queue().next().map(|j| j.id());
    let action = match field {
        Field::Job => Some(Action::set_cpu(JobId(value.u32()), Millicores(500))),
        Field::SetCpu => running.map(|j| Action::set_cpu(j, Millicores(value.u64()))),
        Field::SetMemory => running.map(|j| Action::set_memory(j, Bytes(value.u64()))),
        Field::MigrateNode => running.map(|j| Action::migrate(j, NodeId(value.u32()))),
        Field::GpuShareGpu => running.map(|j| Action::set_gpu_share(j, value.u32(), 50)),
        Field::GpuSharePercent => running.map(|j| Action::set_gpu_share(j, 0, value.u8())),
        Field::PlaceNode => queued.map(|j| Action::place(j, NodeId(value.u32()), &[0])),
        Field::PlaceGpu => queued.map(|j| Action::place(j, NodeId(0), &[value.u32()])),
        Field::NextCallMs => {
            d.call_again_in(value.wait());
            None
        }
    };
    if let Some(a) = action {
        d.push(a.because(format!("misbehave numbers: {} at {}", field.name(), value.name())));
    }
}

/// `trap-every-other`: a panic on even calls; on odd ones every running job capped at 1000
/// millicores.
fn trap_every_other(s: &Snapshot, call: u64, d: &mut Decision) {
    if call.is_multiple_of(2) {
        panic!("misbehave trap-every-other: call {} of this instance is an even one", call);
    }
    for job in s.jobs() {
        d.push(Action::set_cpu(job.id(), Millicores(1000)).because("misbehave trap-every-other: odd call"));
    }
}

/// `stop-everything`: every running and every queued job stopped.
fn stop_everything(s: &Snapshot, d: &mut Decision) {
    for job in s.jobs().chain(s.queue()) {
        d.push(Action::stop(job.id()).because("misbehave stop-everything"));
    }
}

/// `migrate-churn`: the first running job migrated to the next node.
fn migrate_churn(s: &Snapshot, d: &mut Decision) {
    let nodes = s.nodes().len() as u64;
    if let Some(job) = s.jobs().next().filter(|_| nodes > 0) {
        let next = NodeId(((u64::from(job.node().0) + 1) % nodes) as u32);
        d.push(Action::migrate(job.id(), next).because("misbehave migrate-churn: to the next node"));
    }
}

/// `preempt-churn`: every running job preempted.
fn preempt_churn(s: &Snapshot, d: &mut Decision) {
    for job in s.jobs() {
        d.push(Action::preempt(job.id()).because("misbehave preempt-churn"));
    }
}

/// `resize-churn`: every running job resized onto the GPUs it holds, at the largest batch
/// size there is on odd calls, as it is on even ones.
fn resize_churn(s: &Snapshot, call: u64, d: &mut Decision) {
    let batch_size = (call % 2 == 1).then_some(u32::MAX);
    for job in s.jobs() {
        d.push(Action::resize(job.id(), &own_entries(&job), batch_size).because("misbehave resize-churn"));
    }
}

/// `pending-flood`: [`PENDING_FLOOD`] reasons, for every job and for handles that do not
/// exist, every thousandth of them [`PENDING_LONG_BYTES`] of control characters.
fn pending_flood(s: &Snapshot, d: &mut Decision) {
    let long: String = "\u{7}\n\t".repeat(PENDING_LONG_BYTES / 3);
    let handles: Vec<JobId> = s.jobs().chain(s.queue()).map(|j| j.id()).collect();
    for i in 0..PENDING_FLOOD {
        let job = handles.get(i % (handles.len() + 1)).copied().unwrap_or(JobId(u32::MAX - i as u32));
        let reason = if i % 1000 == 0 { long.clone() } else { format!("flood {i}") };
        d.pending(job, reason);
    }
}

/// `log-flood`: the lines of one call, each padded to [`FLOOD_LINE_BYTES`].
fn log_flood(call: u64) {
    let mut line = String::with_capacity(FLOOD_LINE_BYTES);
    for i in 0..FLOOD_LINES {
        line.clear();
        write!(line, "misbehave log-flood: call {call}, line {i} of {FLOOD_LINES} ").expect("a String takes any text");
        while line.len() < FLOOD_LINE_BYTES {
            line.push('.');
        }
        log::emit(Level::Info, &line);
    }
}

/// Starts every queued job that fits, first fit, but `skip`.
fn place_queue(s: &Snapshot, skip: Option<JobId>, d: &mut Decision) {
    let mut free = wasmsched_sdk::sched::FreeGpus::of(s);
    for job in s.queue().filter(|j| Some(j.id()) != skip) {
        if let Some(p) = free.fit_job(&job) {
            d.push(p.action(job.id()).because("misbehave: starts the queue, first fit"));
        }
    }
}

/// GPUs `0..n` of a node for a queued job that asks for `n`.
fn first_gpus(job: &Job) -> Vec<u32> {
    (0..job.gpus_asked()).collect()
}

/// The GPUs `job` holds as node entries, in the order it holds them; its node with no GPUs
/// when it holds none.
fn own_entries(job: &Job) -> Vec<(NodeId, Vec<u32>)> {
    let mut entries: Vec<(NodeId, Vec<u32>)> = Vec::new();
    for g in job.gpus() {
        match entries.iter_mut().find(|(n, _)| *n == g.node) {
            Some((_, gpus)) => gpus.push(g.index),
            None => entries.push((g.node, vec![g.index])),
        }
    }
    if entries.is_empty() {
        entries.push((job.node(), Vec::new()));
    }
    entries
}

/// How many node entries `huge-placement` names.
const HUGE_ENTRIES: u32 = 1_000_000;
/// The opt-out label `preempt-protected` looks for, and its value.
const OPT_OUT: (&str, &str) = ("wasmsched.disruptible", "false");

/// The queue's abusers: what behaviour `b` decides on `s`.
fn abuse_the_queue(b: Behaviour, s: &Snapshot, d: &mut Decision) {
    let why = format!("misbehave {}", b.name());
    let nodes = s.nodes().len() as u32;
    let mut push = |a: Action| {
        d.push(a.because(why.clone()));
    };
    match b {
        Behaviour::PlaceMissingNode => place_missing_node(s, nodes, &mut push),
        Behaviour::PlaceMissingGpu => place_missing_gpu(s, &mut push),
        Behaviour::PlaceNoNodes => place_no_nodes(s, &mut push),
        Behaviour::PlaceGpuRepeated => place_gpu_repeated(s, &mut push),
        Behaviour::PlaceWrongCount => place_wrong_count(s, &mut push),
        Behaviour::PlaceRunning => place_running(s, nodes, &mut push),
        Behaviour::PileOn => pile_on(s, &mut push),
        Behaviour::PlaceTwice => place_twice(s, &mut push),
        Behaviour::PreemptForHead => preempt_for_head(s, &mut push),
        Behaviour::PreemptReplaceAll => preempt_replace_all(s, &mut push),
        Behaviour::HugePlacement => huge_placement(s, nodes, &mut push),
        Behaviour::PreemptProtected => preempt_protected(s, &mut push),
        Behaviour::PlacePreempted => place_preempted(s, &mut push),
        Behaviour::NeverPlace => {}
        _ => unreachable!("{} is not one of the queue's abusers", b.name()),
    }
}

/// `place-missing-node`: every queued job on node `nodes`, one past the last.
fn place_missing_node(s: &Snapshot, nodes: u32, push: &mut impl FnMut(Action)) {
    for job in s.queue() {
        push(Action::place(job.id(), NodeId(nodes), &first_gpus(&job)));
    }
}

/// `place-missing-gpu`: every queued job on node 0, on GPU indices past its last.
fn place_missing_gpu(s: &Snapshot, push: &mut impl FnMut(Action)) {
    let past = s.nodes().next().map_or(0, |n| n.gpus().len() as u32);
    for job in s.queue() {
        let gpus: Vec<u32> = (past..past + job.gpus_asked().max(1)).collect();
        push(Action::place(job.id(), NodeId(0), &gpus));
    }
}

/// `place-no-nodes`: every queued job placed naming no node.
fn place_no_nodes(s: &Snapshot, push: &mut impl FnMut(Action)) {
    for job in s.queue() {
        push(Action::place_on(job.id(), &[], false));
    }
}

/// `place-gpu-repeated`: every queued job on GPU 0 of node 0, named four times.
fn place_gpu_repeated(s: &Snapshot, push: &mut impl FnMut(Action)) {
    for job in s.queue() {
        push(Action::place(job.id(), NodeId(0), &[0; 4]));
    }
}

/// `place-wrong-count`: every queued job on one GPU more than it asks for.
fn place_wrong_count(s: &Snapshot, push: &mut impl FnMut(Action)) {
    for job in s.queue() {
        let gpus: Vec<u32> = (0..=job.gpus_asked()).collect();
        push(Action::place(job.id(), NodeId(0), &gpus));
    }
}

/// `place-running`: every running job placed again, on the next of the `nodes` nodes.
fn place_running(s: &Snapshot, nodes: u32, push: &mut impl FnMut(Action)) {
    for job in s.jobs() {
        let next = NodeId((job.node().0 + 1) % nodes.max(1));
        push(Action::place(job.id(), next, &first_gpus(&job)));
    }
}

/// `pile-on`: every queued job on GPUs `0..n` of node 0, whoever holds them.
fn pile_on(s: &Snapshot, push: &mut impl FnMut(Action)) {
    for job in s.queue() {
        push(Action::place(job.id(), NodeId(0), &first_gpus(&job)));
    }
}

/// `place-twice`: every queued job on node 0 and on node 1, each on its first free GPUs.
fn place_twice(s: &Snapshot, push: &mut impl FnMut(Action)) {
    let free = wasmsched_sdk::sched::FreeGpus::of(s);
    for job in s.queue() {
        for node in [NodeId(0), NodeId(1)] {
            let gpus: Vec<u32> = free.free_on(node).into_iter().take(job.gpus_asked() as usize).collect();
            push(Action::place(job.id(), node, &gpus));
        }
    }
}

/// `preempt-for-head`: the first running job preempted, the queue's head placed first fit on
/// what that frees.
fn preempt_for_head(s: &Snapshot, push: &mut impl FnMut(Action)) {
    if let Some(head) = s.queue().next() {
        let mut free = wasmsched_sdk::sched::FreeGpus::of(s);
        if let Some(running) = s.jobs().next() {
            push(Action::preempt(running.id()));
            free.release(&running);
        }
        if let Some(p) = free.fit_job(&head) {
            push(p.action(head.id()));
        }
    }
}

/// `preempt-replace-all`: every running job preempted, every queued job placed first fit on
/// what that frees.
fn preempt_replace_all(s: &Snapshot, push: &mut impl FnMut(Action)) {
    let mut free = wasmsched_sdk::sched::FreeGpus::of(s);
    for job in s.jobs() {
        push(Action::preempt(job.id()));
        free.release(&job);
    }
    for job in s.queue() {
        if let Some(p) = free.fit_job(&job) {
            push(p.action(job.id()));
        }
    }
}

/// `huge-placement`: the queue's head placed with [`HUGE_ENTRIES`] node entries, over the
/// `nodes` nodes.
fn huge_placement(s: &Snapshot, nodes: u32, push: &mut impl FnMut(Action)) {
    if let Some(head) = s.queue().next() {
        let entries: Vec<(NodeId, Vec<u32>)> = (0..HUGE_ENTRIES).map(|n| (NodeId(n % nodes.max(1)), vec![0])).collect();
        push(Action::place_on(head.id(), &entries, false));
    }
}

/// `preempt-protected`: every running job that opted out of disruption ([`OPT_OUT`]) preempted.
fn preempt_protected(s: &Snapshot, push: &mut impl FnMut(Action)) {
    for job in s.jobs().filter(|j| j.label(OPT_OUT.0) == Some(OPT_OUT.1)) {
        push(Action::preempt(job.id()));
    }
}

/// `place-preempted`: every running job preempted and placed again on its own GPUs.
fn place_preempted(s: &Snapshot, push: &mut impl FnMut(Action)) {
    for job in s.jobs() {
        push(Action::preempt(job.id()));
        push(Action::place_on(job.id(), &own_entries(&job), false));
    }
}

/// `duplicate`: every valid action twice.
fn duplicate(s: &Snapshot, d: &mut Decision) {
    let why = "misbehave duplicate: the same action twice";
    if let Some(job) = s.jobs().next() {
        let id = job.id();
        for a in [Action::set_cpu(id, Millicores(700)), Action::stop(id), Action::preempt(id)] {
            d.push(a.clone().because(why));
            d.push(a.because(why));
        }
    }
    if let Some(job) = s.queue().next() {
        let place = Action::place(job.id(), NodeId(0), &first_gpus(&job)).because(why);
        d.push(place.clone());
        d.push(place);
    }
}

/// `contradictory`: actions on one job that undo or forbid each other.
fn contradictory(s: &Snapshot, d: &mut Decision) {
    if let Some(job) = s.jobs().next() {
        let id = job.id();
        d.push(Action::set_cpu(id, Millicores(500)).because("misbehave contradictory: cap"));
        d.push(Action::lift_cpu(id).because("misbehave contradictory: lift the cap just set"));
        d.push(Action::migrate(id, NodeId(1)).because("misbehave contradictory: migrate"));
        d.push(Action::stop(id).because("misbehave contradictory: stop what migrates"));
        d.push(Action::preempt(id).because("misbehave contradictory: preempt what stopped"));
    }
    if let Some(job) = s.queue().next() {
        let id = job.id();
        d.push(Action::place(id, NodeId(0), &first_gpus(&job)).because("misbehave contradictory: place"));
        d.push(Action::stop(id).because("misbehave contradictory: stop what was placed"));
    }
}

export_policy!(Misbehave);

#[cfg(test)]
mod tests;
