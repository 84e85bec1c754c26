use wasmsched_sdk::testing::{Harness, TestWorld, busy_rounds, churn_typed, job};

use super::*;

/// Nodes n0, n1 (4 T4 each), n2 (8 A100) and n3 (8 RTX).
fn mixed() -> TestWorld {
    TestWorld::typed_gpu_cluster(&[(4, "t4"), (4, "t4"), (8, "a100"), (8, "rtx")])
}

/// An elastic job of `model`, as the simulator declares one: 1 GPU asked, any count up to 64.
fn elastic(name: &str, model: &str) -> wasmsched_sdk::testing::JobBuilder {
    let m = Model::parse(model).expect("a measured model");
    job(name, model).gpus(1).elastic(&(1..=64).collect::<Vec<u32>>(), m.default_batch_size()..=m.max_batch_size())
}

fn pollux() -> Pollux {
    Pollux::new(Config::default()).unwrap()
}

/// Tick `h` by a round, check the decision as the host would, and return it.
fn round(h: &mut Harness<Pollux>) -> Decision {
    let d = h.tick(Seconds(60.0)).unwrap();
    assert_eq!(sched::check(&h.runner().view(), &d), Ok(()), "{d:?}");
    d
}

/// GPUs each running job holds, by job, as the last tick's snapshot shows them: before that
/// tick's decision.
fn holdings(h: &Harness<Pollux>) -> BTreeMap<JobId, Vec<GpuSlot>> {
    h.runner().view().jobs().map(|j| (j.id(), j.gpus().to_vec())).collect()
}

#[test]
fn the_search_never_gives_a_pool_more_than_it_has_and_keeps_a_locked_job() {
    let c = |options: Vec<(u32, f64)>, current, locked| Candidate { options, idle: 1000.0, current, locked };
    let jobs = vec![
        c(vec![(1, 4.0), (2, 2.5), (4, 1.5)], Some((0, 4, 1.2)), true),
        c(vec![(1, 4.0), (2, 2.0), (4, 1.0)], None, false),
        c(vec![(1, 4.0), (3, 2.0)], Some((1, 1, 3.9)), false),
    ];
    let picks = search(&jobs, &[5, 3]);
    let used = |pool: usize| -> u32 { picks.iter().flatten().filter(|p| p.0 == pool).map(|p| p.1).sum() };
    assert!(used(0) <= 5 && used(1) <= 3, "{picks:?}");
    assert_eq!(picks[0], Some((0, 4)), "the locked job keeps its 4 GPUs");
    assert!(picks.iter().all(Option::is_some), "with p = −1 no job goes without: {picks:?}");
}

#[test]
fn no_type_is_oversubscribed_and_each_job_stays_on_one_type() {
    let mut w = mixed();
    let models = ["cifar10", "imagenet", "bert", "deepspeech2", "yolov3"];
    for (i, m) in models.iter().cycle().take(9).enumerate() {
        w.queue_job(elastic(&format!("j{i}"), m));
    }
    let mut h = Harness::new(pollux(), w);
    let mut busiest = 0;
    for _ in 0..12 {
        round(&mut h);
        let view = h.runner().view();
        let mut used: BTreeMap<&str, usize> = BTreeMap::new();
        for j in view.jobs() {
            let types: BTreeSet<&str> = j.gpus().iter().map(|g| view.node(g.node).unwrap().gpu_type()).collect();
            assert!(types.len() <= 1, "{} runs on {types:?}", j.name());
            for t in types {
                *used.entry(t).or_default() += j.gpus().len();
            }
        }
        for (t, n) in &used {
            let have: usize = view.nodes().filter(|n| n.gpu_type() == *t).map(|n| n.gpus().len()).sum();
            assert!(*n <= have, "{n} GPUs of {t} in use, {have} exist");
        }
        busiest = busiest.max(used.values().sum::<usize>());
    }
    assert!(busiest > 9, "the jobs grew past one GPU each: {busiest} GPUs at most");
}

#[test]
fn more_gpus_go_to_the_job_that_scales_better() {
    // On one T4 node of 8 GPUs: which of the two scales better at epoch 1, by the profile.
    let (a_model, b_model) = ("imagenet", "deepspeech2");
    let scaling = |m: &str| {
        let m = Model::parse(m).unwrap();
        let g = |n| {
            let shape = packed(n, 4);
            speed(m, GpuType::T4, best_config(m, GpuType::T4, &shape, 1), &shape, 1)
        };
        g(4) / g(1)
    };
    assert!(scaling(a_model) > 1.2 * scaling(b_model), "{} vs {}", scaling(a_model), scaling(b_model));
    let mut w = TestWorld::gpu_cluster(&[4, 4]);
    let a = w.queue_job(elastic("a", a_model));
    let b = w.queue_job(elastic("b", b_model));
    let mut h = Harness::new(pollux(), w);
    for _ in 0..15 {
        round(&mut h);
    }
    let held = holdings(&h);
    let (na, nb) = (held[&a].len(), held[&b].len());
    assert!(na > nb && nb >= 1, "{a_model} {na} GPUs, {b_model} {nb}");
}

#[test]
fn no_job_starves_when_jobs_outnumber_gpus() {
    let mut w = TestWorld::gpu_cluster(&[4]);
    let ids: Vec<JobId> = (0..6).map(|i| w.queue_job(elastic(&format!("j{i}"), "cifar10"))).collect();
    let mut h = Harness::new(pollux(), w);
    let mut ran: BTreeSet<JobId> = BTreeSet::new();
    for tick in 0..12 {
        round(&mut h);
        // What the decision of the tick before made of it (unless a job just ended).
        let held = holdings(&h);
        let waiting = h.runner().view().queue_len();
        if tick % 4 != 0 && waiting > 0 {
            // p = −1: while a job waits, no job holds a second GPU and none is idle.
            assert!(held.values().all(|g| g.len() == 1), "tick {tick}: {held:?}");
            assert_eq!(held.len(), 4, "tick {tick}: every GPU in use");
        }
        ran.extend(held.keys());
        // The longest-running job ends every fourth round.
        if tick % 4 == 3 {
            let first = *held.keys().min().unwrap();
            h.world.remove_job(first);
        }
    }
    assert_eq!(ran.len(), ids.len(), "every job ran: {ran:?}");
}

#[test]
fn a_node_that_takes_no_work_gets_nothing_and_its_jobs_move() {
    let mut w = mixed();
    for i in 0..5 {
        w.queue_job(elastic(&format!("j{i}"), "cifar10"));
    }
    let mut h = Harness::new(pollux(), w);
    for _ in 0..3 {
        round(&mut h);
    }
    h.world.set_takes_work(NodeId(2), false);
    h.world.set_takes_work(NodeId(0), false);
    for tick in 0..6 {
        round(&mut h);
        if tick == 0 {
            // The snapshot of this tick still shows the GPUs the jobs held before.
            continue;
        }
        let view = h.runner().view();
        let down: Vec<(JobId, GpuSlot)> = view
            .jobs()
            .flat_map(|j| j.gpus().iter().map(move |g| (j.id(), *g)).collect::<Vec<_>>())
            .filter(|(_, g)| g.node == NodeId(0) || g.node == NodeId(2))
            .collect();
        assert!(down.is_empty(), "tick {tick}: GPUs held on nodes that take no work: {down:?}");
    }
    assert_eq!(h.runner().view().jobs().count(), 5, "all five still run, on n1 and n3");
}

#[test]
fn a_job_restoring_from_a_restart_is_not_moved_again() {
    let mut w = TestWorld::gpu_cluster(&[4, 4]);
    let a = w.queue_job(elastic("a", "imagenet"));
    let mut h = Harness::new(pollux(), w);
    let restore = Model::Imagenet.restore_s();
    let acted = |d: &Decision| d.actions().iter().any(|x| x.job() == a);
    // It starts on one GPU, then grows once its restore delay has passed.
    let mut changes: Vec<f64> = Vec::new();
    while changes.len() < 2 {
        assert!(h.world.time().0 < 1200.0, "it never grew: {changes:?}");
        if acted(&round(&mut h)) {
            changes.push(h.world.time().0);
        }
    }
    // Seven jobs arrive while it restores from growing: with p = −1 it would give one of them a
    // GPU at once, but it keeps its GPUs until its restore delay has passed.
    for i in 0..7 {
        h.world.queue_job(elastic(&format!("b{i}"), "cifar10"));
    }
    for _ in 0..8 {
        if acted(&round(&mut h)) {
            changes.push(h.world.time().0);
        }
    }
    assert!(changes.len() >= 3, "it gave way once it could: {changes:?}");
    assert!(changes.windows(2).all(|w| w[1] - w[0] >= restore), "changes {restore} s apart at least: {changes:?}");
}

#[test]
fn the_state_survives_a_hot_swap() {
    let mut w = mixed();
    for i in 0..4 {
        w.queue_job(elastic(&format!("j{i}"), if i % 2 == 0 { "cifar10" } else { "bert" }));
    }
    let mut h = Harness::new(pollux(), w);
    for _ in 0..5 {
        round(&mut h);
    }
    assert!(h.policy().state.jobs.values().any(|l| l.ran && l.since.is_some()), "{:?}", h.policy().state);
    let fresh = h.swap_into(pollux()).unwrap();
    assert_eq!(fresh.state, h.policy().state);
    assert!(pollux().restore_state(b"not a state").is_err(), "garbage is refused");
}

#[test]
fn a_bad_config_is_refused_with_what_to_write() {
    for (json, says) in [
        (r#"{"p": "x"}"#, "p"),
        (r#"{"restart-penalty-s": -1}"#, "restart-penalty-s = -1"),
        (r#"{"interval-s": -5}"#, "interval-s"),
        (r#"{"profile": "h100"}"#, "h100"),
        (r#"{"lambda": 1}"#, "lambda"),
    ] {
        let e = Harness::<Pollux>::from_config(json, mixed()).err().expect("refused").to_string();
        assert!(e.contains(says), "{json}: {e}");
    }
    assert!(Harness::<Pollux>::from_config(r#"{"p": 1, "profile": "aws"}"#, mixed()).is_ok());
}

#[test]
fn every_decision_on_a_busy_cluster_passes_the_hosts_checks() {
    churn_typed(|| Pollux::new(Config { interval_s: 0.0, ..Config::default() }).unwrap(), 0..3);
}

/// The decisions of busy runs, action by action and in order, as recorded: a change to the
/// placement (which GPUs, the order of moves, preemptions, idle GPUs filled) changes them.
#[test]
fn the_decisions_of_busy_runs_are_as_recorded() {
    let mut got = Vec::new();
    for seed in [4, 12, 17, 27] {
        let mut h = Harness::new(pollux(), mixed());
        got.push(busy_rounds(&mut h, 60, seed, elastic, None, round).summary());
    }
    let recorded = [
        (0x6737_eb6e_27d8_6b57, 60, 47, 0),
        (0x6106_21af_9248_e85c, 60, 38, 3),
        (0xefd1_7aed_02ed_7c1c, 60, 51, 5),
        (0xcd60_8119_7b54_dd48, 60, 39, 4),
    ];
    assert_eq!(got, recorded, "{got:#x?}");
}
