//! A loaded policy ([`LoadedPolicy`]: compiled, linked, ready to instantiate) and a live
//! instance of it ([`PolicyInstance`]), whose every call runs under a deadline and a memory
//! cap. A call that traps poisons the instance: the caller drops it and makes a fresh one.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::{Store, Trap};

use wasmsched_core::bindings::{Contract, wit};
use wasmsched_core::world::{Cursor, World};

use super::Runtime;
use super::current::{self, PolicyPlugin, PolicyPluginPre};
use super::limits::{Limits, LogBudget, SharedLogBudget, StoreState};
use super::{v0_1, v0_2, v0_3};

/// A linked component of one contract version, ready to instantiate.
#[derive(Clone)]
pub(super) enum Pre {
    Current(PolicyPluginPre<StoreState>),
    V0_3(v0_3::PolicyPluginPre<StoreState>),
    V0_2(v0_2::PolicyPluginPre<StoreState>),
    V0_1(v0_1::PolicyPluginPre<StoreState>),
}

/// A live component of one contract version; a 0.1.0 one with its adapter (0.3.0's and
/// 0.2.0's convert without keeping anything).
enum Plugin {
    Current(PolicyPlugin),
    V0_3(v0_3::PolicyPlugin),
    V0_2(v0_2::PolicyPlugin),
    V0_1(v0_1::PolicyPlugin, v0_1::Adapter),
}

/// A compiled, linked policy component.
#[derive(Clone)]
pub struct LoadedPolicy {
    name: Arc<str>,
    digest: String,
    pre: Pre,
    compile_time: Duration,
    cache_hit: bool,
}

impl fmt::Debug for LoadedPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadedPolicy").field("name", &self.name).field("digest", &self.digest).finish_non_exhaustive()
    }
}

/// How a call trapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrapKind {
    /// It ran past its deadline.
    Deadline,
    /// It asked for more memory than its cap.
    MemoryCap,
    /// It overflowed its stack.
    StackOverflow,
    /// It panicked (Rust aborts a component on panic).
    Panic,
    /// It ran out of fuel.
    Fuel,
    /// It accessed memory out of bounds (what overflowing Rust's in-memory stack does).
    MemoryFault,
    /// Any other trap.
    Other,
}

impl fmt::Display for TrapKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TrapKind::Deadline => "ran past its deadline",
            TrapKind::MemoryCap => "hit its memory cap",
            TrapKind::StackOverflow => "overflowed its stack",
            TrapKind::Panic => "panicked",
            TrapKind::Fuel => "ran out of fuel",
            TrapKind::MemoryFault => "accessed memory out of bounds",
            TrapKind::Other => "trapped",
        })
    }
}

/// Why a call into a policy failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The call trapped; the instance is unusable.
    #[error("policy {policy} {kind} in {call}: {detail}")]
    Trap {
        /// The policy's name.
        policy: Arc<str>,
        /// Which export was called.
        call: &'static str,
        /// How it trapped.
        kind: TrapKind,
        /// The engine's words, and the policy's panic message if it left one.
        detail: String,
    },
    /// The policy returned its own error; the instance stays usable.
    #[error("policy {policy} refused {call}: {}", describe(error))]
    Policy {
        /// The policy's name.
        policy: Arc<str>,
        /// Which export was called.
        call: &'static str,
        /// Its error.
        error: wit::PolicyError,
    },
}

impl CallError {
    /// True when the instance that made this error must be dropped.
    pub fn is_trap(&self) -> bool {
        matches!(self, CallError::Trap { .. })
    }

    /// The trap's kind, if it was one.
    pub fn trap_kind(&self) -> Option<TrapKind> {
        match self {
            CallError::Trap { kind, .. } => Some(*kind),
            CallError::Policy { .. } => None,
        }
    }
}

fn describe(e: &wit::PolicyError) -> String {
    match e {
        wit::PolicyError::InvalidConfig(m) => format!("invalid config: {m}"),
        wit::PolicyError::InvalidState(m) => format!("invalid saved state: {m}"),
        wit::PolicyError::Failed(m) => m.clone(),
    }
}

impl LoadedPolicy {
    pub(super) fn new(name: Arc<str>, digest: String, pre: Pre, compile_time: Duration, cache_hit: bool) -> Self {
        LoadedPolicy { name, digest, pre, compile_time, cache_hit }
    }

    /// Its name (the file stem).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The contract version it speaks.
    pub fn contract(&self) -> Contract {
        match self.pre {
            Pre::Current(_) => Contract::V0_4,
            Pre::V0_3(_) => Contract::V0_3,
            Pre::V0_2(_) => Contract::V0_2,
            Pre::V0_1(_) => Contract::V0_1,
        }
    }

    /// The sha256 of its file, hex.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// How long compiling (or loading from the cache) took.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// Whether the compiled code came from the on-disk cache.
    pub fn cache_hit(&self) -> bool {
        self.cache_hit
    }

    /// A fresh instance, initialised with `config_json` and an optional saved state, with a log
    /// budget of its own.
    pub fn instantiate(
        &self,
        rt: &Runtime,
        limits: Limits,
        config_json: &str,
        saved_state: Option<&[u8]>,
    ) -> Result<PolicyInstance, CallError> {
        let budget = LogBudget::shared(&self.name, &limits);
        self.instantiate_logging(rt, limits, config_json, saved_state, budget)
    }

    /// [`LoadedPolicy::instantiate`], its log counted against `budget`: one a supervisor
    /// keeps across the instances it makes, so that a policy trapped and made again every tick
    /// gets no fresh budget each time.
    pub fn instantiate_logging(
        &self,
        rt: &Runtime,
        limits: Limits,
        config_json: &str,
        saved_state: Option<&[u8]>,
        budget: SharedLogBudget,
    ) -> Result<PolicyInstance, CallError> {
        let mut store = Store::new(rt.engine(), StoreState::new(self.name.clone(), &limits, budget));
        store.limiter(|s| &mut s.memory);
        let mut guard = Guard {
            name: self.name.clone(),
            deadline: limits.instantiate,
            deadline_ticks: rt.deadline_ticks(limits.instantiate),
            limits,
            fuel: rt.config().fuel,
        };
        // Instantiation and `init` share the instantiation budget, and the first `decide` (a
        // resync that carries every job, which the instance folds into its tables) gets it
        // afresh; every call after it runs under the per-call deadline.
        let started = rt.epoch();
        let (plugin, _) = guard.run(&mut store, "instantiate", |store| match &self.pre {
            Pre::Current(pre) => pre.instantiate(store).map(Plugin::Current),
            Pre::V0_3(pre) => pre.instantiate(store).map(Plugin::V0_3),
            Pre::V0_2(pre) => pre.instantiate(store).map(Plugin::V0_2),
            Pre::V0_1(pre) => pre.instantiate(store).map(|p| Plugin::V0_1(p, v0_1::Adapter::default())),
        })?;
        guard.deadline_ticks = guard.deadline_ticks.saturating_sub(rt.epoch() - started).max(1);
        let no_abilities = wit::Abilities { places: false };
        let mut instance = PolicyInstance {
            guard,
            store,
            plugin,
            cursor: Cursor::fresh(),
            last_fuel: 0,
            abilities: no_abilities,
            per_call: (limits.deadline, rt.deadline_ticks(limits.deadline)),
        };
        instance.abilities = instance.call("init", |store, plugin| match plugin {
            Plugin::Current(p) => p
                .wasmsched_policy_policy()
                .call_init(store, config_json, saved_state)
                .map(|r| r.map(From::from).map_err(From::from)),
            Plugin::V0_3(p) => p
                .wasmsched_policy_policy()
                .call_init(store, config_json, saved_state)
                .map(|r| r.map(v0_3::abilities).map_err(v0_3::error)),
            Plugin::V0_2(p) => p
                .wasmsched_policy_policy()
                .call_init(store, config_json, saved_state)
                .map(|r| r.map(v0_2::abilities).map_err(v0_2::error)),
            Plugin::V0_1(p, _) => p
                .wasmsched_policy_policy()
                .call_init(store, config_json, saved_state)
                .map(|r| r.map(|()| no_abilities).map_err(v0_1::error)),
        })?;
        instance.guard.deadline_ticks = rt.deadline_ticks(limits.instantiate);
        Ok(instance)
    }
}

/// One live instance of a policy, with what it has been told so far.
pub struct PolicyInstance {
    guard: Guard,
    store: Store<StoreState>,
    plugin: Plugin,
    cursor: Cursor,
    last_fuel: u64,
    abilities: wit::Abilities,
    /// The per-call deadline, and in epoch ticks, in force once the first `decide` returned.
    per_call: (Duration, u64),
}

impl PolicyInstance {
    /// What the policy said it does, at `init`.
    pub fn abilities(&self) -> wit::Abilities {
        self.abilities
    }

    /// Ask for a decision on the current telemetry (only what changed since this instance's
    /// previous call crosses).
    pub fn decide(&mut self, telemetry: &World) -> Result<wit::Decision, CallError> {
        let snapshot = telemetry.snapshot_for(&mut self.cursor);
        self.decide_on(Cow::Owned(snapshot))
    }

    /// Ask for a decision on a snapshot built by the caller.
    pub fn decide_raw(&mut self, snapshot: &wit::Snapshot) -> Result<wit::Decision, CallError> {
        self.decide_on(Cow::Borrowed(snapshot))
    }

    /// `decide` on a snapshot the host still holds, or one it hands over (a current policy's
    /// then crosses without a copy).
    fn decide_on(&mut self, snapshot: Cow<'_, wit::Snapshot>) -> Result<wit::Decision, CallError> {
        let result = self.call("decide", |store, plugin| match plugin {
            Plugin::Current(p) => p
                .wasmsched_policy_policy()
                .call_decide(store, &current::snapshot(snapshot))
                .map(|r| r.map(From::from).map_err(From::from)),
            Plugin::V0_3(p) => p
                .wasmsched_policy_policy()
                .call_decide(store, &v0_3::snapshot(&snapshot))
                .map(|r| r.map(v0_3::decision).map_err(v0_3::error)),
            Plugin::V0_2(p) => p
                .wasmsched_policy_policy()
                .call_decide(store, &v0_2::snapshot(&snapshot))
                .map(|r| r.map(v0_2::decision).map_err(v0_2::error)),
            Plugin::V0_1(p, adapter) => {
                let old = adapter.snapshot(&snapshot);
                p.wasmsched_policy_policy().call_decide(store, &old).map(|r| r.map(v0_1::decision).map_err(v0_1::error))
            }
        });
        // Warm from now on: the per-call deadline.
        (self.guard.deadline, self.guard.deadline_ticks) = self.per_call;
        result
    }

    /// Ask for the state a newer version should start from.
    pub fn save_state(&mut self) -> Result<Vec<u8>, CallError> {
        self.call("save-state", |store, plugin| match plugin {
            Plugin::Current(p) => p.wasmsched_policy_policy().call_save_state(store).map(Ok),
            Plugin::V0_3(p) => p.wasmsched_policy_policy().call_save_state(store).map(Ok),
            Plugin::V0_2(p) => p.wasmsched_policy_policy().call_save_state(store).map(Ok),
            Plugin::V0_1(p, _) => p.wasmsched_policy_policy().call_save_state(store).map(Ok),
        })
    }

    /// Fuel the last call burned (0 unless the runtime counts fuel).
    pub fn last_fuel(&self) -> u64 {
        self.last_fuel
    }

    fn call<R>(
        &mut self,
        call: &'static str,
        f: impl FnOnce(&mut Store<StoreState>, &mut Plugin) -> wasmtime::Result<Result<R, wit::PolicyError>>,
    ) -> Result<R, CallError> {
        let plugin = &mut self.plugin;
        let (result, fuel) = self.guard.run(&mut self.store, call, |store| f(store, plugin))?;
        self.last_fuel = fuel;
        result.map_err(|error| CallError::Policy { policy: self.guard.name.clone(), call, error })
    }
}

/// What every call into one instance runs under.
struct Guard {
    name: Arc<str>,
    /// The deadline its calls run under now (the instantiation budget until the first
    /// `decide` returns).
    deadline: Duration,
    deadline_ticks: u64,
    limits: Limits,
    fuel: bool,
}

impl Guard {
    /// Run `f` under the deadline, memory cap and fuel; classify a trap. Returns the fuel
    /// burned beside the result.
    fn run<R>(
        &self,
        store: &mut Store<StoreState>,
        call: &'static str,
        f: impl FnOnce(&mut Store<StoreState>) -> wasmtime::Result<R>,
    ) -> Result<(R, u64), CallError> {
        store.set_epoch_deadline(self.deadline_ticks);
        store.data_mut().log_lines = 0;
        if self.fuel {
            let _ = store.set_fuel(self.limits.fuel);
        }
        let result = f(store);
        let burned = if self.fuel { self.limits.fuel - store.get_fuel().unwrap_or(0) } else { 0 };
        result.map(|r| (r, burned)).map_err(|e| self.classify(store.data(), call, &e))
    }

    fn classify(&self, data: &StoreState, call: &'static str, e: &wasmtime::Error) -> CallError {
        let kind = if data.memory.hit {
            TrapKind::MemoryCap
        } else {
            match e.downcast_ref::<Trap>() {
                Some(Trap::Interrupt) => TrapKind::Deadline,
                Some(Trap::StackOverflow) => TrapKind::StackOverflow,
                Some(Trap::UnreachableCodeReached) => TrapKind::Panic,
                Some(Trap::OutOfFuel) => TrapKind::Fuel,
                Some(Trap::MemoryOutOfBounds) => TrapKind::MemoryFault,
                _ => TrapKind::Other,
            }
        };
        let mut detail = match (kind, e.downcast_ref::<Trap>()) {
            (TrapKind::Deadline, _) => format!("no answer within {} ms", self.deadline.as_millis()),
            (_, Some(trap)) => trap.to_string(),
            (_, None) => e.root_cause().to_string(),
        };
        let said = data.stderr();
        if !said.is_empty() {
            detail = format!("{detail}; it said: {said}");
        }
        CallError::Trap { policy: self.name.clone(), call, kind, detail }
    }
}

/// Time one closure.
pub(crate) fn timed<R>(f: impl FnOnce() -> R) -> (R, Duration) {
    let started = Instant::now();
    let r = f();
    (r, started.elapsed())
}
