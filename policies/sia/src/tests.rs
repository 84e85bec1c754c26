use wasmsched_sdk::testing::{Harness, TestWorld, busy_rounds, churn_typed, job, placed};

use super::*;

/// Nodes n0 (4 T4) and n1 (8 A100).
fn mixed() -> TestWorld {
    TestWorld::typed_gpu_cluster(&[(4, "t4"), (8, "a100")])
}

fn elastic(name: &str, model: &str) -> wasmsched_sdk::testing::JobBuilder {
    let (lo, hi) = match model {
        "imagenet" => (200, 12800),
        _ => (128, 4096),
    };
    job(name, model).gpus(1).elastic(&(1..=16).collect::<Vec<u32>>(), lo..=hi)
}

fn sia() -> Sia {
    Sia::new(Config::default()).unwrap()
}

#[test]
fn the_allocation_respects_every_types_gpus_and_keeps_locked_jobs() {
    let c = |pool, gpus, value| Choice { pool, gpus, value };
    let choices = vec![
        vec![c(0, 1, 0.3), c(0, 4, 0.6), c(1, 8, 0.8)],
        vec![c(0, 1, 0.3), c(1, 8, 0.9)],
        vec![c(0, 4, 0.5), c(1, 1, 0.2)],
    ];
    let pick = allocate(&choices, &[None, None, None], &[5, 8]);
    let used = |t: usize| -> u32 {
        pick.iter()
            .enumerate()
            .filter_map(|(j, p)| p.map(|k| choices[j][k]))
            .filter(|c| c.pool == t)
            .map(|c| c.gpus)
            .sum()
    };
    assert!(used(0) <= 5 && used(1) <= 8, "{pick:?}");
    // The optimum: 0.3 + 0.9 + 0.5, every job on something.
    assert_eq!(pick, [Some(0), Some(1), Some(0)]);
    let locked = allocate(&choices, &[Some(2), None, None], &[4, 8]);
    assert_eq!(locked[0], Some(2), "a job still restoring keeps its configuration");
}

#[test]
fn queued_elastic_jobs_start_on_the_faster_type_and_grow_round_by_round() {
    let mut w = mixed();
    let a = w.queue_job(elastic("a", "cifar10"));
    let b = w.queue_job(elastic("b", "cifar10"));
    let mut h = Harness::new(sia(), w);
    let d = h.tick(Seconds(60.0)).unwrap();
    assert_eq!(sched::check(&h.runner().view(), &d), Ok(()));
    let first = placed(&d);
    assert_eq!(first.len(), 2, "{d:?}");
    // Never run: at most twice what it ran on (nothing yet), so one GPU each.
    assert!(first.iter().all(|(_, e)| e.iter().map(|(_, g)| g.len()).sum::<usize>() == 1), "{first:?}");
    // Later rounds: they may double, and do, once their restore delay has passed.
    let mut most = 0;
    for _ in 0..6 {
        let d = h.tick(Seconds(60.0)).unwrap();
        assert_eq!(sched::check(&h.runner().view(), &d), Ok(()), "{d:?}");
        let view = h.runner().view();
        most = most.max(view.job(a).unwrap().gpus().len() + view.job(b).unwrap().gpus().len());
    }
    assert!(most >= 4, "they grew: {most} GPUs at most");
}

#[test]
fn a_rigid_job_gets_its_own_count_and_a_node_that_takes_no_work_gets_nothing() {
    let mut w = mixed();
    w.set_takes_work(NodeId(1), false);
    let r = w.queue_job(job("r", "cifar10").gpus(3));
    let big = w.queue_job(job("big", "cifar10").gpus(8));
    let mut h = Harness::new(sia(), w);
    let d = h.tick(Seconds(60.0)).unwrap();
    assert_eq!(sched::check(&h.runner().view(), &d), Ok(()));
    assert_eq!(placed(&d), [(r, vec![(0, vec![0, 1, 2])])], "three GPUs, though Sia offers 1, 2 and 4");
    let why: Vec<&(JobId, String)> = d.pending_reasons().iter().filter(|(j, _)| *j == big).collect();
    assert_eq!(why.len(), 1, "the 8-GPU job is told why it waits: {:?}", d.pending_reasons());
}

#[test]
fn a_bad_config_is_refused_with_what_to_write() {
    for (json, says) in [
        (r#"{"p": 0}"#, "p = 0"),
        (r#"{"lambda": -1}"#, "lambda = -1"),
        (r#"{"interval-s": -5}"#, "interval-s"),
        (r#"{"colocate-min-gain": 2.5}"#, "colocate-min-gain = 2.5"),
        (r#"{"colocate-min-gain": 0}"#, "at most 2, e.g. 1.5"),
        (r#"{"colocate-memory-fraction": 1.2}"#, "colocate-memory-fraction = 1.2"),
        (r#"{"colocate-memory-fraction": 0}"#, "at most 1, e.g. 0.9"),
    ] {
        let e = Harness::<Sia>::from_config(json, mixed()).err().expect("refused").to_string();
        assert!(e.contains(says), "{e}");
    }
}

#[test]
fn every_decision_on_a_busy_cluster_passes_the_hosts_checks() {
    churn_typed(|| Sia::new(Config { interval_s: 0.0, ..Config::default() }).unwrap(), 0..3);
}

/// Every assignment of `choices` within `capacity`, the best value: the exact answer.
fn brute_force(choices: &[Vec<Choice>], capacity: &[u32]) -> f64 {
    fn go(j: usize, choices: &[Vec<Choice>], left: &mut [u32]) -> f64 {
        let Some(row) = choices.get(j) else { return 0.0 };
        let mut best = go(j + 1, choices, left);
        for c in row {
            if c.value > 0.0 && left[c.pool] >= c.gpus {
                left[c.pool] -= c.gpus;
                best = best.max(c.value + go(j + 1, choices, left));
                left[c.pool] += c.gpus;
            }
        }
        best
    }
    go(0, choices, &mut capacity.to_vec())
}

#[test]
fn the_allocation_reaches_the_optimum_of_small_problems() {
    // A deterministic stream of small problems: 7 jobs, 2 types of 6 and 8 GPUs.
    let mut seed = 0x5eed_u64;
    let mut next = move || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) as u32
    };
    let capacity = [6, 8];
    for _ in 0..40 {
        let choices: Vec<Vec<Choice>> = (0..7)
            .map(|_| {
                [1u32, 2, 4, 8]
                    .iter()
                    .flat_map(|&gpus| (0..2).map(move |pool| (pool, gpus)))
                    .filter(|&(pool, gpus)| gpus <= capacity[pool])
                    .map(|(pool, gpus)| Choice { pool, gpus, value: f64::from(next() % 1000) / 1000.0 - 0.2 })
                    .collect()
            })
            .collect();
        let pick = allocate(&choices, &[None; 7], &capacity);
        let value: f64 = pick.iter().enumerate().filter_map(|(j, p)| p.map(|k| choices[j][k].value)).sum();
        let best = brute_force(&choices, &capacity);
        assert!(value >= best * (1.0 - 1e-4) - 1e-9, "{value} < optimum {best}");
        let greedy_value: f64 = greedy(&choices, &[None; 7], &capacity)
            .iter()
            .enumerate()
            .filter_map(|(j, p)| p.map(|k| choices[j][k].value))
            .sum();
        assert!(greedy_value <= value + 1e-9);
    }
}

/// One node of one T4 (16 GiB): job `a` (of `host`) placed and run alone for a round, its GPU
/// showing `memory` in use, then job `b` (of `guest`) queued. Returns the harness, both ids and
/// the decision of the round after `b` arrives.
fn one_gpu_taken(config: &str, host: &str, guest: &str, memory: Bytes) -> (Harness<Sia>, JobId, JobId, Decision) {
    let mut w = TestWorld::typed_gpu_cluster(&[(1, "t4")]);
    let a = w.queue_job(elastic("a", host));
    let mut h = Harness::<Sia>::from_config(config, w).unwrap();
    let d = h.tick(Seconds(60.0)).unwrap();
    assert_eq!(placed(&d).len(), 1, "{d:?}");
    h.world.set_gpu_use(NodeId(0), 0, 100.0, memory);
    h.tick(Seconds(60.0)).unwrap();
    let b = h.world.queue_job(elastic("b", guest));
    let d = h.tick(Seconds(60.0)).unwrap();
    assert_eq!(sched::check(&h.runner().view(), &d), Ok(()), "{d:?}");
    (h, a, b, d)
}

fn shared_places(d: &Decision) -> Vec<(JobId, wasmsched_sdk::testing::Entries)> {
    d.actions()
        .iter()
        .filter_map(|a| match a.kind() {
            ActionKind::Place(p) if p.share => {
                Some((a.job(), p.nodes.iter().map(|n| (n.node, n.gpus.clone())).collect()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_job_that_would_wait_joins_a_gpu_whose_holder_it_runs_well_beside() {
    let (mut h, a, b, d) = one_gpu_taken(r#"{"colocate": true}"#, "cifar10", "cifar10", Bytes::gib(4));
    assert_eq!(shared_places(&d), [(b, vec![(0, vec![0])])], "{d:?}");
    let host_share =
        d.actions().iter().any(|x| x.job() == a && matches!(x.kind(), ActionKind::SetGpuShare(s) if s.percent == 100));
    assert!(host_share, "the host gets a share so the two share in space: {d:?}");
    // Once the guest runs, it gets its share too, and it stays while no one needs its GPU.
    h.world.set_gpu_use(NodeId(0), 0, 100.0, Bytes::gib(8));
    let d = h.tick(Seconds(5.0)).unwrap();
    let guest_share =
        d.actions().iter().any(|x| x.job() == b && matches!(x.kind(), ActionKind::SetGpuShare(s) if s.percent == 100));
    assert!(guest_share, "{d:?}");
    let d = h.tick(Seconds(60.0)).unwrap();
    assert_eq!(sched::check(&h.runner().view(), &d), Ok(()), "{d:?}");
    assert!(!d.actions().iter().any(|x| x.job() == b && matches!(x.kind(), ActionKind::Preempt)), "{d:?}");
}

#[test]
fn without_colocate_the_job_waits_as_in_sia() {
    let (_, _, b, d) = one_gpu_taken("{}", "cifar10", "cifar10", Bytes::gib(4));
    assert!(shared_places(&d).is_empty(), "{d:?}");
    assert!(d.pending_reasons().iter().any(|(j, _)| *j == b), "{d:?}");
}

#[test]
fn a_pair_that_slows_each_other_down_does_not_share() {
    // ResNet-50 beside ResNet-50: 0.36 and 0.41 of their speeds alone, measured.
    let (s_g, s_h) = colocate::speeds(Model::Imagenet, Model::Imagenet).unwrap();
    assert!(s_g + s_h < 1.0, "{s_g} {s_h}");
    let (_, _, _, d) = one_gpu_taken(r#"{"colocate": true}"#, "imagenet", "imagenet", Bytes::gib(4));
    assert!(shared_places(&d).is_empty(), "{d:?}");
}

#[test]
fn a_pair_whose_memory_does_not_fit_does_not_share() {
    // 10 GiB each: 20 GiB of a 16 GiB T4.
    let (_, _, _, d) = one_gpu_taken(r#"{"colocate": true}"#, "cifar10", "cifar10", Bytes::gib(10));
    assert!(shared_places(&d).is_empty(), "{d:?}");
}

#[test]
fn the_measured_pairs_load_and_good_pairs_gain() {
    assert_eq!(colocate::types(), 26);
    let (a, b) = colocate::speeds(Model::Cifar10, Model::Cifar10).unwrap();
    assert!(a + b > 1.5, "{a} {b}");
    let (x, y) = colocate::speeds(Model::Cifar10, Model::Deepspeech2).unwrap();
    let (y2, x2) = colocate::speeds(Model::Deepspeech2, Model::Cifar10).unwrap();
    assert!((x - x2).abs() < 1e-12 && (y - y2).abs() < 1e-12, "both orders agree");
}

#[test]
fn every_decision_with_colocate_on_a_busy_cluster_passes_the_hosts_checks() {
    churn_typed(
        || Sia::new(Config { interval_s: 0.0, colocate: true, colocate_min_gain: 1.0, ..Config::default() }).unwrap(),
        0..3,
    );
}

/// Tick `h` by a round, check the decision as the host would, and return it.
fn round(h: &mut Harness<Sia>) -> Decision {
    let d = h.tick(Seconds(60.0)).unwrap();
    assert_eq!(sched::check(&h.runner().view(), &d), Ok(()), "{d:?}");
    d
}

/// The decisions of busy runs, action by action and in order, as recorded, with and without
/// `colocate`: a change to the placement (which GPUs, the order of moves, preemptions, idle
/// GPUs filled, guests kept) changes them.
#[test]
fn the_decisions_of_busy_runs_are_as_recorded() {
    let mut got = Vec::new();
    for seed in [3, 5, 33, 35] {
        for colocate in [false, true] {
            // On nodes of 4, 4, 8 and 8 GPUs (T4, T4, A100, RTX), every GPU a job holds showing
            // 3 GiB in use.
            let config = Config { colocate, colocate_min_gain: 1.0, ..Config::default() };
            let world = TestWorld::typed_gpu_cluster(&[(4, "t4"), (4, "t4"), (8, "a100"), (8, "rtx")]);
            let mut h = Harness::new(Sia::new(config).unwrap(), world);
            got.push(busy_rounds(&mut h, 60, seed, elastic, Some((90.0, Bytes::gib(3))), round).summary());
        }
    }
    // Per seed, without and with `colocate`: the fingerprint, rounds, resizes, preemptions.
    let recorded = [
        (0xbff2_e63b_52a5_efd9, 60, 31, 14),
        (0x9f6c_eb16_6973_291c, 60, 28, 10),
        (0x9bcb_9cb8_d7c0_593e, 60, 31, 15),
        (0xdad6_2786_ab4d_82f7, 60, 29, 5),
        (0x2bc0_ae04_e2cc_37d4, 60, 41, 6),
        (0x7e67_7b13_215a_c933, 60, 50, 10),
        (0xc9f8_a29e_d5ea_cbde, 60, 31, 7),
        (0x84eb_ca70_dae8_7af5, 60, 43, 12),
    ];
    assert_eq!(got, recorded, "{got:#x?}");
}
