//! The fixture's own tests: each behaviour decides what its name says, on a small world.

use std::panic::{AssertUnwindSafe, catch_unwind};

use super::*;
use wasmsched_sdk::testing::{Harness, TestWorld, job, placed};

/// Three nodes of two GPUs; `a` runs on node 0 and `b` too, `q` (two GPUs) waits.
fn world() -> (TestWorld, JobId, JobId, JobId) {
    let mut w = TestWorld::gpu_cluster(&[2, 2, 2]);
    let a = w.add_job(job("a", "cifar10"));
    let b = w.add_job(job("b", "cifar10"));
    let q = w.queue_job(job("q", "cifar10").gpus(2));
    (w, a, b, q)
}

fn misbehave(config: &str, w: TestWorld) -> Harness<Misbehave> {
    Harness::from_config(config, w).unwrap_or_else(|e| panic!("{config}: {e:?}"))
}

fn refused(config: &str) -> String {
    match Harness::<Misbehave>::from_config(config, TestWorld::new()) {
        Err(PolicyError::InvalidConfig(m)) => m,
        Err(e) => panic!("{config}: refused, but not as a bad config: {e:?}"),
        Ok(_) => panic!("{config}: accepted"),
    }
}

/// One action of a decision, as (job, kind), reasons aside.
/// Its own misbehaviour, that is: the queue's first-fit placements aside.
fn kinds(d: &Decision) -> Vec<(JobId, ActionKind)> {
    d.actions()
        .iter()
        .filter(|a| !a.reason().contains("starts the queue"))
        .map(|a| (a.job(), a.kind().clone()))
        .collect()
}

fn assert_reasons_name(d: &Decision, behaviour: &str) {
    for a in d.actions().iter().filter(|a| !a.reason().contains("starts the queue")) {
        assert!(a.reason().starts_with(&format!("misbehave {behaviour}")), "{:?}", a.reason());
    }
}

#[test]
fn numbers_puts_each_field_at_its_extreme() {
    let (_, a, _, q) = world();
    for (value, u8x, u32x, u64x) in [("zero", 0, 0, 0), ("max", u8::MAX, u32::MAX, u64::MAX)] {
        let cases = [
            ("job", Action::set_cpu(JobId(u32x), Millicores(500))),
            ("set-cpu", Action::set_cpu(a, Millicores(u64x))),
            ("set-memory", Action::set_memory(a, Bytes(u64x))),
            ("migrate-node", Action::migrate(a, NodeId(u32x))),
            ("gpu-share-gpu", Action::set_gpu_share(a, u32x, 50)),
            ("gpu-share-percent", Action::set_gpu_share(a, 0, u8x)),
            ("place-node", Action::place(q, NodeId(u32x), &[0])),
            ("place-gpu", Action::place(q, NodeId(0), &[u32x])),
        ];
        for (field, expected) in cases {
            let config = format!(r#"{{"behaviour": "numbers", "field": "{field}", "value": "{value}"}}"#);
            let d = misbehave(&config, world().0).tick(Seconds(30.0)).unwrap();
            assert_eq!(kinds(&d), kinds(&Decision::new().with(expected)), "{config}");
            assert_eq!(d.next_call(), None, "{config}");
            assert_eq!(d.actions()[0].reason(), format!("misbehave numbers: {field} at {value}"));
        }
        let config = format!(r#"{{"behaviour": "numbers", "field": "next-call-ms", "value": "{value}"}}"#);
        let d = misbehave(&config, world().0).tick(Seconds(30.0)).unwrap();
        assert!(kinds(&d).is_empty(), "{config}");
        assert_eq!(d.next_call().map(Seconds::as_millis), Some(u64x), "{config}");
    }
}

#[test]
fn numbers_without_a_suitable_job_decides_nothing() {
    for field in ["set-cpu", "migrate-node", "gpu-share-percent"] {
        let config = format!(r#"{{"behaviour": "numbers", "field": "{field}", "value": "max"}}"#);
        let mut w = TestWorld::gpu_cluster(&[2]);
        w.queue_job(job("waits", "cifar10"));
        assert!(kinds(&misbehave(&config, w).tick(Seconds(30.0)).unwrap()).is_empty(), "{field}: no running job");
    }
    let config = r#"{"behaviour": "numbers", "field": "place-node", "value": "max"}"#;
    let mut w = TestWorld::gpu_cluster(&[2]);
    w.add_job(job("runs", "cifar10"));
    assert!(kinds(&misbehave(config, w).tick(Seconds(30.0)).unwrap()).is_empty(), "no queued job to place");
}

#[test]
fn duplicate_sends_every_action_twice() {
    let (w, a, _, q) = world();
    let d = misbehave(r#"{"behaviour": "duplicate"}"#, w).tick(Seconds(30.0)).unwrap();
    assert_eq!(
        kinds(&d)[..6],
        [
            (a, ActionKind::SetCpu(Some(700))),
            (a, ActionKind::SetCpu(Some(700))),
            (a, ActionKind::Stop),
            (a, ActionKind::Stop),
            (a, ActionKind::Preempt),
            (a, ActionKind::Preempt),
        ]
    );
    assert_eq!(placed(&d), [(q, vec![(0, vec![0, 1])]), (q, vec![(0, vec![0, 1])])]);
    assert_eq!(d.actions().len(), 8);
    assert_reasons_name(&d, "duplicate");
}

#[test]
fn contradictory_caps_lifts_migrates_stops_and_preempts_one_job_and_places_and_stops_another() {
    let (w, a, _, q) = world();
    let d = misbehave(r#"{"behaviour": "contradictory"}"#, w).tick(Seconds(30.0)).unwrap();
    let k = kinds(&d);
    assert_eq!(
        k[..5],
        [
            (a, ActionKind::SetCpu(Some(500))),
            (a, ActionKind::SetCpu(None)),
            (a, ActionKind::Migrate(1)),
            (a, ActionKind::Stop),
            (a, ActionKind::Preempt),
        ]
    );
    assert_eq!(placed(&d), [(q, vec![(0, vec![0, 1])])]);
    assert_eq!(k[5].0, q);
    assert_eq!(k[6], (q, ActionKind::Stop));
    assert_eq!(k.len(), 7);
    assert_reasons_name(&d, "contradictory");
}

#[test]
fn stop_everything_stops_running_and_queued_jobs_on_every_call() {
    let (w, a, b, q) = world();
    let mut h = misbehave(r#"{"behaviour": "stop-everything"}"#, w);
    let d = h.tick(Seconds(30.0)).unwrap();
    assert_eq!(kinds(&d), [(a, ActionKind::Stop), (b, ActionKind::Stop), (q, ActionKind::Stop)]);
    assert_reasons_name(&d, "stop-everything");
    let c = h.world.queue_job(job("c", "cifar10"));
    assert_eq!(kinds(&h.tick(Seconds(30.0)).unwrap()), [(c, ActionKind::Stop)]);
}

#[test]
fn migrate_churn_moves_the_first_running_job_round_the_nodes() {
    let (w, a, _, _) = world();
    let mut h = misbehave(r#"{"behaviour": "migrate-churn"}"#, w);
    for node in [1, 2, 0, 1] {
        let d = h.tick(Seconds(30.0)).unwrap();
        assert_eq!(kinds(&d), [(a, ActionKind::Migrate(node))]);
        assert_reasons_name(&d, "migrate-churn");
    }
}

#[test]
fn preempt_churn_preempts_every_running_job_on_every_call() {
    let (w, a, b, q) = world();
    let mut h = misbehave(r#"{"behaviour": "preempt-churn"}"#, w);
    let d = h.tick(Seconds(30.0)).unwrap();
    assert_eq!(kinds(&d), [(a, ActionKind::Preempt), (b, ActionKind::Preempt)]);
    assert_reasons_name(&d, "preempt-churn");
    // The first call also started `q` from the queue; `a` is started by hand.
    h.world.start(a, NodeId(1), &[]);
    assert_eq!(kinds(&h.tick(Seconds(30.0)).unwrap()), [(a, ActionKind::Preempt), (q, ActionKind::Preempt)]);
}

/// The decision of abuser `behaviour` on [`world`]'s first call.
fn abuse(behaviour: &str) -> (Decision, JobId, JobId, JobId) {
    let (w, a, b, q) = world();
    let d = misbehave(&format!(r#"{{"behaviour": "{behaviour}"}}"#), w).tick(Seconds(30.0)).unwrap();
    assert_reasons_name(&d, behaviour);
    (d, a, b, q)
}

#[test]
fn the_queues_abusers_place_as_their_names_say_and_start_nothing_else() {
    let (d, _, _, q) = abuse("never-place");
    assert!(d.actions().is_empty());
    assert_eq!(placed(&abuse("place-missing-node").0), [(q, vec![(3, vec![0, 1])])]);
    assert_eq!(placed(&abuse("place-missing-gpu").0), [(q, vec![(0, vec![2, 3])])]);
    assert_eq!(placed(&abuse("place-no-nodes").0), [(q, vec![])]);
    assert_eq!(placed(&abuse("place-gpu-repeated").0), [(q, vec![(0, vec![0, 0, 0, 0])])]);
    assert_eq!(placed(&abuse("place-wrong-count").0), [(q, vec![(0, vec![0, 1, 2])])]);
    assert_eq!(placed(&abuse("pile-on").0), [(q, vec![(0, vec![0, 1])])]);
    assert_eq!(placed(&abuse("place-twice").0), [(q, vec![(0, vec![0, 1])]), (q, vec![(1, vec![0, 1])])]);
    let (d, a, b, _) = abuse("place-running");
    assert_eq!(placed(&d), [(a, vec![(1, vec![])]), (b, vec![(1, vec![])])]);
    let (d, _, _, _) = abuse("huge-placement");
    assert_eq!(placed(&d)[0].1.len(), HUGE_ENTRIES as usize);
}

#[test]
fn the_preempting_abusers_preempt_and_place_in_one_decision() {
    let (d, a, b, q) = abuse("preempt-replace-all");
    assert_eq!(kinds(&d)[..2], [(a, ActionKind::Preempt), (b, ActionKind::Preempt)]);
    assert_eq!(placed(&d), [(q, vec![(0, vec![0, 1])])]);
    let (d, a, _, q) = abuse("preempt-for-head");
    assert_eq!(kinds(&d)[0], (a, ActionKind::Preempt));
    assert_eq!(placed(&d).len(), 1);
    assert_eq!(placed(&d)[0].0, q);
    let (d, a, b, _) = abuse("place-preempted");
    let k = kinds(&d);
    assert_eq!((k[0].clone(), k[2].0), ((a, ActionKind::Preempt), b));
    let again: Vec<JobId> = placed(&d).into_iter().map(|(j, _)| j).collect();
    assert_eq!(again[..2], [a, b], "the preempted jobs are placed again, then the queue starts");
    let mut w = TestWorld::gpu_cluster(&[2]);
    let keep = w.add_job(job("keep", "cifar10").label("wasmsched.disruptible", "false"));
    w.add_job(job("other", "cifar10"));
    let d = misbehave(r#"{"behaviour": "preempt-protected"}"#, w).tick(Seconds(30.0)).unwrap();
    assert_eq!(kinds(&d), [(keep, ActionKind::Preempt)]);
}

#[test]
fn trap_every_other_panics_on_even_calls_and_caps_every_job_on_odd_ones() {
    let (w, a, b, q) = world();
    let mut h = misbehave(r#"{"behaviour": "trap-every-other"}"#, w);
    for call in 1..=4 {
        let result = catch_unwind(AssertUnwindSafe(|| h.tick(Seconds(30.0))));
        if call % 2 == 0 {
            assert!(result.is_err(), "call {call} must panic");
        } else {
            let d = result.expect("an odd call does not panic").unwrap();
            // The first call also started `q` from the queue.
            let mut capped = vec![a, b];
            capped.extend((call > 1).then_some(q));
            let want: Vec<_> = capped.into_iter().map(|j| (j, ActionKind::SetCpu(Some(1000)))).collect();
            assert_eq!(kinds(&d), want);
            assert_reasons_name(&d, "trap-every-other");
        }
    }
}

#[test]
fn fail_after_answers_three_calls_then_fails_with_its_own_error_for_good() {
    let (w, _, _, _) = world();
    let mut h = misbehave(r#"{"behaviour": "fail-after"}"#, w);
    for call in 1..=6 {
        match h.tick(Seconds(30.0)) {
            Ok(d) => assert!(call <= 3 && kinds(&d).is_empty(), "call {call}: {d:?}"),
            Err(PolicyError::Failed(m)) => assert!(call > 3 && m.contains("fail-after"), "call {call}: {m}"),
            Err(e) => panic!("call {call}: {e:?}"),
        }
    }
}

#[test]
fn save_state_huge_saves_48_mib_and_decides_nothing() {
    let (w, _, _, _) = world();
    let mut h = misbehave(r#"{"behaviour": "save-state-huge"}"#, w);
    assert!(kinds(&h.tick(Seconds(30.0)).unwrap()).is_empty());
    assert_eq!(h.runner().save_state().len(), 48 << 20);
}

#[test]
fn leak_keeps_leak_mib_more_on_every_call() {
    let (w, _, _, _) = world();
    let mut h = misbehave(r#"{"behaviour": "leak", "leak-mib": 1}"#, w);
    for _ in 0..3 {
        assert!(kinds(&h.tick(Seconds(30.0)).unwrap()).is_empty());
    }
    assert_eq!(h.policy().kept.iter().map(Vec::len).sum::<usize>(), 3 << 20);
}

#[test]
fn bad_configs_are_refused_as_invalid_config_naming_what_is_wrong() {
    let cases = [
        (r#"{}"#, "behaviour"),
        (r#"{"behaviour": "explode"}"#, "explode"),
        (r#"{"behaviour": "numbers", "field": "set-gpu", "value": "max"}"#, "set-gpu"),
        (r#"{"behaviour": "numbers", "field": "set-cpu", "value": "huge"}"#, "huge"),
        (r#"{"behaviour": "numbers", "field": "set-cpu"}"#, "`value`"),
        (r#"{"behaviour": "numbers", "value": "max"}"#, "`field`"),
        (r#"{"behaviour": "leak", "field": "set-cpu", "value": "max"}"#, "not `leak`"),
        (r#"{"behaviour": "duplicate", "leak-mib": 8}"#, "not `duplicate`"),
        (r#"{"behaviour": "leak", "leak-mib": 0}"#, "1 to 1024"),
        (r#"{"behaviour": "leak", "leak-mib": -1}"#, "-1"),
        (r#"{"behaviour": "leak", "speed": 3}"#, "speed"),
    ];
    for (config, says) in cases {
        let message = refused(config);
        assert!(message.contains(says), "{config}: expected {says:?} in {message:?}");
    }
}

#[test]
fn every_behaviour_but_the_init_ones_builds_from_its_name() {
    for name in [
        "log-flood",
        "leak",
        "trap-every-other",
        "save-state-spin",
        "save-state-trap",
        "save-state-huge",
        "duplicate",
        "contradictory",
        "stop-everything",
        "migrate-churn",
        "preempt-churn",
        "fail-after",
        "never-place",
        "place-missing-node",
        "place-missing-gpu",
        "place-no-nodes",
        "place-gpu-repeated",
        "place-wrong-count",
        "place-running",
        "pile-on",
        "place-twice",
        "preempt-for-head",
        "preempt-replace-all",
        "huge-placement",
        "preempt-protected",
        "place-preempted",
    ] {
        let h = misbehave(&format!(r#"{{"behaviour": "{name}"}}"#), TestWorld::new());
        assert_eq!(h.policy().behaviour.name(), name);
    }
}
