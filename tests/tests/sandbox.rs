//! Every hostile fixture is contained: the host keeps running, the deadline fires within two
//! epoch ticks, the memory cap holds, and the next call gets a fresh instance.

use std::time::Duration;

use wasmsched::bindings::wit::ActionKind;
use wasmsched::runtime::supervise::{Failure, Fallback, Quarantine, Supervised};
use wasmsched::runtime::{CallError, Limits, LoadError, TrapKind};
use wasmsched::world::{JobId, NodeId, sample};

use wasmsched_tests::common::{TICK, loaded, runtime};

/// Generous, so that a loaded test machine never turns a memory hog into a timeout.
fn limits() -> Limits {
    Limits { deadline: Duration::from_secs(1), ..Limits::default() }
}

fn tight() -> Limits {
    Limits { deadline: Duration::from_millis(100), ..Limits::default() }
}

fn supervised(name: &str, fallback: Fallback) -> Supervised {
    Supervised::new(loaded(name), "{}".into(), limits(), fallback, Quarantine::default())
}

fn trap_kind(name: &str) -> (TrapKind, String) {
    let world = sample::world(1, 4, 3);
    let mut instance = loaded(name).instantiate(runtime(), limits(), "{}", None).expect("init succeeds");
    let err = instance.decide(&world).expect_err("the fixture must fail");
    (err.trap_kind().unwrap_or_else(|| panic!("{name}: not a trap: {err}")), err.to_string())
}

#[test]
fn an_endless_loop_is_stopped_within_two_epoch_ticks_of_its_deadline() {
    let rt = runtime();
    let world = sample::world(1, 4, 3);
    // The first call has the instantiation budget: spin from the second.
    let mut instance = loaded("spin").instantiate(rt, tight(), r#"{"after": 1}"#, None).unwrap();
    instance.decide(&world).unwrap();
    let before = rt.epoch();
    let err = instance.decide(&world).unwrap_err();
    let ticks = rt.epoch() - before;
    assert_eq!(err.trap_kind(), Some(TrapKind::Deadline), "{err}");
    let deadline = rt.deadline_ticks(tight().deadline);
    assert!(ticks >= deadline - 1, "stopped after {ticks} ticks, before its deadline of {deadline}");
    assert!(ticks <= deadline + 2, "stopped after {ticks} ticks of {TICK:?}; deadline {deadline} ticks");
    assert!(err.to_string().contains("no answer within 100 ms"), "{err}");
}

#[test]
fn starting_runs_under_the_instantiation_budget_and_later_calls_under_the_per_call_deadline() {
    let rt = runtime();
    let limits = Limits { deadline: TICK * 2, instantiate: TICK * 20, ..Limits::default() };
    let budget = format!("no answer within {} ms", limits.instantiate.as_millis());
    // `init` that never returns is stopped at the instantiation budget, not the call deadline.
    let before = rt.epoch();
    let spin = r#"{"behaviour": "init-spin"}"#;
    let err = loaded("misbehave").instantiate(rt, limits, spin, None).err().expect("init never returns");
    let ticks = rt.epoch() - before;
    assert_eq!(err.trap_kind(), Some(TrapKind::Deadline), "{err}");
    assert!(ticks >= 19, "init was stopped after {ticks} ticks, before its instantiation budget of 20");
    assert!(err.to_string().contains(&budget), "{err}");
    // So is the first `decide` (a resync with every job), after a start that took no time.
    let world = sample::world(1, 2, 1);
    let mut instance = loaded("spin").instantiate(rt, limits, "{}", None).unwrap();
    let err = instance.decide(&world).unwrap_err();
    assert!(err.to_string().contains(&budget), "{err}");
    // Every call after the first has only the per-call deadline.
    let mut instance = loaded("spin").instantiate(rt, limits, r#"{"after": 1}"#, None).unwrap();
    instance.decide(&world).unwrap();
    let err = instance.decide(&world).unwrap_err();
    assert!(err.to_string().contains(&format!("no answer within {} ms", limits.deadline.as_millis())), "{err}");
}

#[test]
fn unbounded_allocation_hits_the_memory_cap() {
    let (kind, msg) = trap_kind("hog");
    assert_eq!(kind, TrapKind::MemoryCap, "{msg}");
}

#[test]
fn a_panic_is_a_trap_that_carries_the_panic_message() {
    let (kind, msg) = trap_kind("panic");
    assert_eq!(kind, TrapKind::Panic, "{msg}");
    assert!(msg.contains("more than this policy can count"), "{msg}");
}

#[test]
fn unbounded_recursion_overflows_the_stack_safely() {
    let (kind, msg) = trap_kind("recursion");
    assert_eq!(kind, TrapKind::StackOverflow, "{msg}");
}

#[test]
fn after_a_trap_the_next_call_gets_a_fresh_instance_and_the_loop_goes_on() {
    let world = sample::world(1, 3, 2);
    let mut s = supervised("panic", Fallback::KeepLimits);
    for _ in 0..3 {
        let out = s.tick(runtime(), &world);
        assert!(matches!(out.failure, Some(Failure::Call(CallError::Trap { kind: TrapKind::Panic, .. }))));
        assert_eq!(out.fallback, Some(Fallback::KeepLimits));
        assert!(out.actions.is_empty());
        assert!(!s.has_instance(), "a trapped instance must be dropped");
    }
    let c = s.counters();
    assert_eq!((c.calls, c.traps, c.instantiations, c.fallbacks), (3, 3, 3, 3));
    // The same runtime still serves a good policy.
    let mut good = supervised("fair-share", Fallback::KeepLimits);
    assert!(good.tick(runtime(), &world).failure.is_none());
}

#[test]
fn invalid_actions_are_rejected_and_the_valid_one_applies() {
    // Two jobs queued and a node of four GPUs: the fixture's two placements, one of three GPUs
    // on a node, are not more than the world could need.
    let mut world = sample::with_queue(1, 3, 2, 2);
    let wider = wasmsched::bindings::wit::Node { gpu_memory_bytes: vec![16 << 30; 4], ..world.nodes()[0].clone() };
    assert!(world.set_node(NodeId(0), wider));
    let mut s = supervised("garbage", Fallback::KeepLimits);
    let out = s.tick(runtime(), &world);
    assert!(out.failure.is_none(), "{:?}", out.failure);
    assert_eq!(out.actions.len(), 1, "{:?}", out.actions);
    assert_eq!(out.actions[0].kind, ActionKind::SetCpu(Some(500)));
    assert_eq!(out.rejected.len(), 10);
    assert!(out.rejected.iter().any(|r| r.reason.contains("does not exist or has ended")));
    assert!(out.rejected.iter().any(|r| r.reason.contains("already runs on node")));
    assert_eq!(s.counters().rejected_actions, 10);
}

#[test]
fn an_oversized_decision_is_refused_whole_and_the_tick_falls_back() {
    let mut world = sample::world(1, 3, 2);
    world.state_mut(JobId(0)).unwrap().cpu_limit_millicores = Some(2000);
    let mut s = supervised("flood", Fallback::FairShare);
    let out = s.tick(runtime(), &world);
    assert!(matches!(out.failure, Some(Failure::Oversized { .. })), "{:?}", out.failure);
    assert_eq!(out.fallback, Some(Fallback::FairShare));
    assert_eq!(out.actions.len(), 1);
    assert_eq!((out.actions[0].job, out.actions[0].kind.clone()), (JobId(0), ActionKind::SetCpu(None)));
}

#[test]
fn a_refused_config_is_a_policy_error_not_a_trap() {
    let err = loaded("init-fails").instantiate(runtime(), limits(), "{}", None).err().expect("init must fail");
    assert!(!err.is_trap());
    assert!(err.to_string().contains("invalid config: alpha must be positive"), "{err}");
}

#[test]
fn a_component_of_another_world_is_refused_with_what_to_do() {
    let path = wasmsched_test_artifacts::path("alien");
    let err = runtime().load_file(std::path::Path::new(path)).unwrap_err();
    assert!(matches!(err, LoadError::WrongWorld { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("wasmsched:policy/policy@0.2.0") && msg.contains("rebuild"), "{msg}");
}

#[test]
fn repeated_failures_quarantine_the_version_with_growing_backoff() {
    let mut world = sample::world(1, 2, 1);
    let q = Quarantine { after: 3, backoff: Duration::from_secs(30), max_backoff: Duration::from_secs(300) };
    let mut s = Supervised::new(loaded("panic"), "{}".into(), limits(), Fallback::KeepLimits, q);
    for _ in 0..3 {
        s.tick(runtime(), &world);
    }
    assert!(s.is_quarantined(world.time_ms()));
    let out = s.tick(runtime(), &world);
    assert!(matches!(out.failure, Some(Failure::Quarantined { .. })), "{:?}", out.failure);
    assert_eq!(s.counters().calls, 3, "a quarantined version is not called");
    world.set_time_ms(world.time_ms() + 30_000);
    s.tick(runtime(), &world);
    assert_eq!(s.counters().calls, 4, "after the backoff it is tried again");
    assert!(s.is_quarantined(world.time_ms() + 59_000), "the second quarantine lasts twice as long");
    assert_eq!(s.counters().quarantines, 2);
}
