use gavel_rounds::{Config, JobRow};
use wasmsched_sdk::prelude::*;
use wasmsched_sdk::testing::{Harness, TestWorld, churn_typed, job, placed};

use super::*;

fn row(gpus: u32, throughput: &[f64], age_s: f64, steps_total: f64) -> JobRow {
    JobRow { gpus, throughput: throughput.to_vec(), age_s, prestart_s: 0.0, steps_total, steps_done: 0.0 }
}

fn themis() -> Themis {
    Themis::new(Config::default()).unwrap()
}

/// ρ of each job under `x`, as the module docs define it.
fn rhos(p: &Problem, x: &[Vec<f64>]) -> Vec<f64> {
    let iso = isolated(p);
    p.jobs
        .iter()
        .enumerate()
        .map(|(i, j)| {
            let at = |share: &[f64]| j.throughput.iter().zip(share).map(|(a, b)| a * b).sum::<f64>();
            let remaining = (j.steps_total - j.steps_done).max(1.0);
            (j.age_s + remaining / at(&x[i])) / (j.prestart_s + j.steps_total / at(&iso[i]))
        })
        .collect()
}

#[test]
fn the_largest_finish_time_ratio_is_minimised_within_the_gpus() {
    // Two types; a job far behind (old), two fresh ones, one only on the first type.
    let p = Problem {
        capacity: vec![4, 4],
        jobs: vec![
            row(4, &[0.5, 0.5], 3600.0, 500.0),
            row(2, &[3.0, 3.0], 0.0, 2000.0),
            row(4, &[2.0, 0.0], 0.0, 4000.0),
        ],
    };
    let x = finish_time_fair(&p);
    for (t, &cap) in p.capacity.iter().enumerate() {
        let used: f64 = p.jobs.iter().zip(&x).map(|(j, r)| f64::from(j.gpus) * r[t]).sum();
        assert!(used <= f64::from(cap) + 1e-6, "type {t}: {used} GPUs of {cap}");
    }
    assert!(x.iter().all(|r| r.iter().sum::<f64>() <= 1.0 + 1e-6), "{x:?}");
    let worst = |x: &[Vec<f64>]| rhos(&p, x).into_iter().fold(0.0, f64::max);
    let ours = worst(&x);
    assert!(ours <= worst(&isolated(&p)) + 1e-9, "no worse than the isolated share");
    assert!(ours < worst(&policy_gavel_like(&p)) - 1e-3, "fairer than the fastest allocation: {ours}");
    // Within the bisection's tolerance of the optimum: 1 % less is out of reach.
    let terms = terms(&p, &isolated(&p));
    // The bisection's LPs (no objective) and the last one (throughput) agree on both.
    for objective in [Objective::None, Objective::Throughput] {
        assert!(feasible(&p, &terms, ours * 1.001, objective).is_some());
        assert!(feasible(&p, &terms, ours * 0.99, objective).is_none(), "{ours} is not the least largest ratio");
    }
}

/// The allocation that maximises the summed throughput alone (what Gavel would pick): all of
/// each type to its fastest job per GPU.
fn policy_gavel_like(p: &Problem) -> Vec<Vec<f64>> {
    Lp::new(p, |i, t| p.jobs[i].throughput[t]).solve().unwrap()
}

#[test]
fn the_most_behind_job_gets_the_gpus_first() {
    // One node of 4 A100s. `old` (imagenet, slow) has waited an hour; `fresh` (cifar10, many
    // steps per second) has just come. Gavel would run the fast one; Themis the one behind.
    let world = || {
        let mut w = TestWorld::gpu_cluster(&[4]);
        w.set_gpu_type(NodeId(0), "a100");
        let old = w.queue_job(job("old", "imagenet").gpus(4).replicas(4));
        w.advance(Seconds(3600.0));
        let fresh = w.queue_job(job("fresh", "cifar10").gpus(4).replicas(4));
        (w, old, fresh)
    };
    let (w, old, fresh) = world();
    let mut gavel = Harness::new(policy_gavel::Gavel::new(Config::default()).unwrap(), world().0);
    let mut h = Harness::new(themis(), w);
    let d = h.tick(Seconds(360.0)).unwrap();
    assert_eq!(sched::check(&h.runner().view(), &d), Ok(()));
    assert_eq!(placed(&d).iter().map(|p| p.0).collect::<Vec<_>>(), [old], "{d:?}");
    let g = gavel.tick(Seconds(360.0)).unwrap();
    assert_eq!(placed(&g).iter().map(|p| p.0).collect::<Vec<_>>(), [fresh], "Gavel runs the fast one: {g:?}");
    let why = d.pending_reasons().iter().find(|(j, _)| *j == fresh).map(|(_, r)| r.as_str());
    assert!(why.is_some_and(|r| r.starts_with("themis: ")), "{:?}", d.pending_reasons());
}

#[test]
fn a_node_that_takes_no_work_gets_nothing() {
    let mut w = TestWorld::gpu_cluster(&[8, 4]);
    w.set_gpu_type(NodeId(0), "a100");
    w.set_gpu_type(NodeId(1), "t4");
    w.set_takes_work(NodeId(0), false);
    for k in 0..3 {
        w.queue_job(job(&format!("j{k}"), "cifar10").gpus(2).replicas(2));
    }
    let mut h = Harness::new(themis(), w);
    let d = h.tick(Seconds(360.0)).unwrap();
    let on: Vec<u32> = placed(&d).iter().flat_map(|p| p.1.iter().map(|e| e.0)).collect();
    assert_eq!(on, [1, 1], "two of the three on the T4 node, none on the A100s: {d:?}");
    assert_eq!(d.pending_reasons().len(), 1, "{d:?}");
}

#[test]
fn the_state_survives_a_hot_swap() {
    let mut w = TestWorld::gpu_cluster(&[4]);
    w.set_gpu_type(NodeId(0), "t4");
    for k in 0..3 {
        w.queue_job(job(&format!("j{k}"), "bert").gpus(4).replicas(4));
    }
    let mut h = Harness::new(themis(), w);
    for _ in 0..3 {
        h.tick(Seconds(360.0)).unwrap();
    }
    let newer = h.swap_into(themis()).unwrap();
    assert_eq!(newer.state(), h.policy().state());
}

#[test]
fn every_decision_on_a_busy_cluster_passes_the_hosts_checks() {
    churn_typed(|| Themis::new(Config { interval_s: 0.0 }).unwrap(), 1..4);
}
