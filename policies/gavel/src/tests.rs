use gavel_rounds::JobRow;
use wasmsched_sdk::prelude::*;
use wasmsched_sdk::testing::{Harness, TestWorld, churn_typed, job, placed};

use super::*;

fn row(gpus: u32, throughput: &[f64]) -> JobRow {
    JobRow { gpus, throughput: throughput.to_vec(), age_s: 0.0, prestart_s: 0.0, steps_total: 1e4, steps_done: 0.0 }
}

fn gavel() -> Gavel {
    Gavel::new(Config::default()).unwrap()
}

/// Node n0 with 4 T4s and n1 with 8 A100s.
fn mixed() -> TestWorld {
    TestWorld::typed_gpu_cluster(&[(4, "t4"), (8, "a100")])
}

/// The GPUs `job` holds as the last tick's snapshot saw it (what the decision before it left).
fn gpus_seen(h: &Harness<Gavel>, job: JobId) -> Vec<GpuSlot> {
    h.runner().view().job(job).map(|j| j.gpus().to_vec()).unwrap_or_default()
}

/// The nodes each placement and move of `d` names.
fn targets(d: &Decision) -> Vec<(JobId, Vec<u32>)> {
    d.actions()
        .iter()
        .filter_map(|a| match a.kind() {
            ActionKind::Place(p) => Some((a.job(), p.nodes.iter().map(|e| e.node).collect())),
            ActionKind::Resize(r) => Some((a.job(), r.placement.nodes.iter().map(|e| e.node).collect())),
            _ => None,
        })
        .collect()
}

#[test]
fn the_lp_keeps_each_type_within_its_gpus_and_finds_the_optimum() {
    // Types of 8 and 4 GPUs. Per GPU-second, the 8-GPU job is best on the first type and the
    // second job on the second: the optimum runs those two all the time (5 + 3 steps/s).
    let p = Problem { capacity: vec![8, 4], jobs: vec![row(4, &[2.0, 1.0]), row(4, &[1.0, 3.0]), row(8, &[5.0, 0.0])] };
    let x = max_sum_throughput(&p);
    for (t, &cap) in p.capacity.iter().enumerate() {
        let used: f64 = p.jobs.iter().zip(&x).map(|(j, r)| f64::from(j.gpus) * r[t]).sum();
        assert!(used <= f64::from(cap) + 1e-6, "type {t}: {used} GPUs of {cap}: {x:?}");
    }
    assert!(x.iter().all(|r| r.iter().sum::<f64>() <= 1.0 + 1e-6), "{x:?}");
    assert_eq!(x[2][1], 0.0, "no time where the job does not fit");
    let value: f64 =
        p.jobs.iter().zip(&x).map(|(j, r)| j.throughput.iter().zip(r).map(|(a, b)| a * b).sum::<f64>()).sum();
    assert!((value - 8.0).abs() < 1e-6, "{value}: {x:?}");
}

#[test]
fn jobs_alike_split_their_time_evenly() {
    let p = Problem { capacity: vec![4], jobs: vec![row(4, &[1.0]), row(4, &[1.0]), row(4, &[1.0]), row(2, &[0.1])] };
    let x = max_sum_throughput(&p);
    for i in 0..3 {
        assert!((x[i][0] - 1.0 / 3.0).abs() < 1e-6, "{x:?}");
    }
    assert!(x[3][0] < 1e-9, "the slow job gets nothing: {x:?}");
}

#[test]
fn the_faster_type_is_worth_more_steps_per_second() {
    let mut w = mixed();
    let mut r = wasmsched_sdk::Runner::from_policy(wasmsched_sdk::testing::Inspect);
    r.decide(w.snapshot()).unwrap();
    let pools = gavel_rounds::table::pools(&r.view());
    assert_eq!(pools.iter().map(|p| (p.kind.name(), p.total)).collect::<Vec<_>>(), [("t4", 4), ("a100", 8)]);
    let m = wasmsched_goodput::Model::parse("cifar10");
    let thr = |pool, gpus| gavel_rounds::table::steps_per_s(m, &pools[pool], gpus, 2048);
    assert!(thr(1, 4) > thr(0, 4) && thr(0, 4) > 0.0, "t4 {}, a100 {}", thr(0, 4), thr(1, 4));
    assert_eq!(thr(0, 6), 0.0, "6 GPUs do not fit 4 T4s");
}

#[test]
fn priorities_rotate_the_gpus_among_jobs_that_do_not_all_fit() {
    let mut w = TestWorld::gpu_cluster(&[4]);
    w.set_gpu_type(NodeId(0), "t4");
    let jobs: Vec<JobId> = (0..3).map(|k| w.queue_job(job(&format!("j{k}"), "cifar10").gpus(4).replicas(4))).collect();
    let mut h = Harness::new(gavel(), w);
    let mut rounds_run = [0u32; 3];
    for round in 0..7 {
        let d = h.tick(Seconds(360.0)).unwrap();
        assert_eq!(sched::check(&h.runner().view(), &d), Ok(()), "round {round}: {d:?}");
        if round == 0 {
            continue;
        }
        // What the previous round left running.
        let running: Vec<usize> = (0..3).filter(|&k| !gpus_seen(&h, jobs[k]).is_empty()).collect();
        assert_eq!(running.len(), 1, "round {round}: one job at a time on 4 GPUs");
        rounds_run[running[0]] += 1;
    }
    assert_eq!(rounds_run, [2, 2, 2], "each job its third of the rounds");
}

#[test]
fn a_job_keeps_its_gpus_while_its_type_is_unchanged() {
    let mut w = mixed();
    let a = w.queue_job(job("a", "cifar10").gpus(4).replicas(4));
    let mut h = Harness::new(gavel(), w);
    let d = h.tick(Seconds(360.0)).unwrap();
    let first = placed(&d);
    assert_eq!(first.len(), 1, "{d:?}");
    assert_eq!(first[0].1[0].0, 1, "on the A100s, the faster type: {d:?}");
    h.tick(Seconds(360.0)).unwrap();
    let before = gpus_seen(&h, a);
    assert_eq!(before.len(), 4);
    for _ in 0..3 {
        let d = h.tick(Seconds(360.0)).unwrap();
        assert!(d.actions().iter().all(|x| x.job() != a), "no action on a job that stays: {d:?}");
        assert_eq!(gpus_seen(&h, a), before);
    }
}

#[test]
fn a_node_that_takes_no_work_gets_nothing_and_its_job_moves() {
    let mut w = TestWorld::gpu_cluster(&[4, 8]);
    w.set_gpu_type(NodeId(0), "t4");
    w.set_gpu_type(NodeId(1), "t4");
    let a = w.queue_job(job("a", "cifar10").gpus(4).replicas(4));
    w.start(a, NodeId(0), &[0, 1, 2, 3]);
    w.set_takes_work(NodeId(0), false);
    let b = w.queue_job(job("b", "cifar10").gpus(2).replicas(2));
    let mut h = Harness::new(gavel(), w);
    let d = h.tick(Seconds(360.0)).unwrap();
    assert_eq!(sched::check(&h.runner().view(), &d), Ok(()), "{d:?}");
    let moved = targets(&d);
    assert!(moved.iter().any(|(j, _)| *j == a), "a leaves the node that takes no work: {d:?}");
    assert!(moved.iter().all(|(_, nodes)| nodes == &[1]), "nothing on node 0: {d:?}");
    assert!(moved.iter().any(|(j, _)| *j == b), "b starts beside it: {d:?}");
    h.tick(Seconds(360.0)).unwrap();
    assert!(gpus_seen(&h, a).iter().all(|g| g.node == NodeId(1)) && !gpus_seen(&h, a).is_empty());
}

#[test]
fn a_waiting_job_is_told_why_and_one_too_large_says_so() {
    let mut w = mixed();
    let big = w.queue_job(job("big", "cifar10").gpus(16).replicas(16));
    let a = w.queue_job(job("a", "cifar10").gpus(8).replicas(8));
    let b = w.queue_job(job("b", "cifar10").gpus(8).replicas(8));
    let mut h = Harness::new(gavel(), w);
    let d = h.tick(Seconds(360.0)).unwrap();
    let reason = |j: JobId| d.pending_reasons().iter().find(|(k, _)| *k == j).map(|(_, r)| r.clone());
    assert_eq!(reason(big).as_deref(), Some("gavel: no GPU type here has 16 GPUs"));
    let ran: Vec<JobId> = placed(&d).iter().map(|p| p.0).collect();
    assert_eq!(ran.len(), 1, "one 8-GPU job on the A100s: {d:?}");
    let waiting = if ran[0] == a { b } else { a };
    assert!(reason(waiting).is_some_and(|r| r.contains("not this round")), "{:?}", d.pending_reasons());
}

#[test]
fn the_bookkeeping_survives_a_hot_swap() {
    let mut w = TestWorld::gpu_cluster(&[4]);
    w.set_gpu_type(NodeId(0), "rtx");
    for k in 0..3 {
        w.queue_job(job(&format!("j{k}"), "yolov3").gpus(4).replicas(4));
    }
    let mut h = Harness::new(gavel(), w);
    for _ in 0..4 {
        h.tick(Seconds(360.0)).unwrap();
    }
    let mut newer = h.swap_into(gavel()).unwrap();
    assert_eq!(newer.state(), h.policy().state());
    assert_ne!(newer.state(), gavel().state(), "there was something to carry");
    assert!(newer.restore_state(b"not a state").is_err());
}

#[test]
fn a_bad_interval_is_refused_with_what_to_write() {
    for json in [r#"{"interval-s": -5}"#, r#"{"interval": 60}"#] {
        let e = Harness::<Gavel>::from_config(json, mixed()).err().expect("refused").to_string();
        assert!(e.contains("interval"), "{e}");
    }
    assert!(Harness::<Gavel>::from_config(r#"{"interval-s": 60}"#, mixed()).is_ok());
}

#[test]
fn every_decision_on_a_busy_cluster_passes_the_hosts_checks() {
    churn_typed(|| Gavel::new(Config { interval_s: 0.0 }).unwrap(), 1..4);
}

#[test]
fn a_job_no_type_can_hold_runs_on_where_the_host_put_it_while_nobody_needs_its_gpus() {
    // 2 T4s and 2 A100s: no type has the job's 4 GPUs, but the host may start it over both.
    let mut w = TestWorld::gpu_cluster(&[2, 2]);
    w.set_gpu_type(NodeId(0), "t4");
    w.set_gpu_type(NodeId(1), "a100");
    let a = w.queue_job(job("a", "cifar10").gpus(4).replicas(4));
    w.start(a, NodeId(0), &[0, 1]);
    let mut h = Harness::new(gavel(), w);
    let d = h.tick(Seconds(360.0)).unwrap();
    assert!(d.actions().iter().all(|x| x.job() != a), "its GPUs are idle in the plan: {d:?}");
    // Two jobs come that fill both types: now it yields.
    let b = h.world.queue_job(job("b", "cifar10").gpus(2).replicas(2));
    let c = h.world.queue_job(job("c", "cifar10").gpus(2).replicas(2));
    let d = h.tick(Seconds(360.0)).unwrap();
    assert_eq!(sched::check(&h.runner().view(), &d), Ok(()), "{d:?}");
    assert!(d.actions().iter().any(|x| x.job() == a && matches!(x.kind(), ActionKind::Preempt)), "{d:?}");
    assert_eq!(placed(&d).iter().map(|p| p.0).collect::<Vec<_>>(), [b, c], "{d:?}");
}
