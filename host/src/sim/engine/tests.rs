use super::*;

#[test]
fn cfs_splits_equally_and_gives_unused_share_to_the_others() {
    assert_eq!(cfs_shares(8.0, &[4.0, 4.0]), vec![4.0, 4.0]);
    assert_eq!(cfs_shares(8.0, &[1.0, 10.0, 10.0]), vec![1.0, 3.5, 3.5]);
    assert_eq!(cfs_shares(8.0, &[1.0, 1.0]), vec![1.0, 1.0]);
    assert!(cfs_shares(8.0, &[]).is_empty());
}

use crate::sim::model::Model;
use crate::sim::workload::{JobPlan, NodeSpec};

fn node(name: &str, cores: u64) -> NodeSpec {
    NodeSpec { name: name.into(), cpu_millicores: cores * 1000, memory_bytes: 64 << 30, gpus: 0, gpu_memory_bytes: 0 }
}

fn plan(name: &str, arrival_s: f64) -> JobPlan {
    JobPlan { max_epochs: Some(5), ..JobPlan::training(name, Model::Cifar10, arrival_s) }
}

fn quiet() -> SimConfig {
    SimConfig { noise: 0.0, ..SimConfig::default() }
}

#[test]
fn a_cpu_limit_caps_a_job_and_its_share_flows_to_the_other() {
    let w = Workload {
        name: "t".into(),
        nodes: vec![node("n0", 4)],
        jobs: vec![plan("a", 0.0), plan("b", 0.0)],
        paper: Vec::new(),
    };
    let mut sim = Simulator::new(&w, quiet());
    let mut world = Telemetry::new();
    assert!(sim.observe(&mut world, 10_000));
    let fair = 2.0f64.min(Model::Cifar10.max_parallelism_cores()) * 1000.0;
    assert!((world.state(0).unwrap().cpu_used_millicores as f64 - fair).abs() <= 1.0);
    let limit = wit::Action { job: 0, kind: ActionKind::SetCpu(Some(500)), reason: String::new() };
    assert!(sim.apply(&[limit], &mut world).is_empty());
    assert_eq!(world.state(0).unwrap().cpu_limit_millicores, Some(500));
    sim.observe(&mut world, 20_000);
    let other = (3500.0f64).min(Model::Cifar10.max_parallelism_cores() * 1000.0);
    assert_eq!(world.state(0).unwrap().cpu_used_millicores, 500);
    assert!((world.state(1).unwrap().cpu_used_millicores as f64 - other).abs() <= 1.0);
}

#[test]
fn jobs_report_real_curve_values_each_epoch_and_leave_when_done() {
    let w = Workload { name: "t".into(), nodes: vec![node("n0", 8)], jobs: vec![plan("a", 5.0)], paper: Vec::new() };
    let mut sim = Simulator::new(&w, quiet());
    let mut world = Telemetry::new();
    let mut t = 0;
    while sim.observe(&mut world, t + 60_000) {
        t += 60_000;
    }
    let curve = Model::Cifar10.curve(Model::Cifar10.default_batch_size());
    let out = &sim.outcomes()[0];
    assert_eq!(out.epochs, 5);
    assert_eq!(world.job_count(), 0, "a finished job leaves the world");
    let per_epoch = Model::Cifar10.work_per_epoch_core_s() / Model::Cifar10.max_parallelism_cores().min(8.0);
    assert!((out.jct_s.unwrap() - 5.0 * per_epoch).abs() < 1e-6, "{:?}", out.jct_s);
    assert!(curve.metric_at(5).is_finite());
}

#[test]
fn a_migration_restarts_from_the_last_epoch_after_the_restart_cost() {
    let w = Workload {
        name: "t".into(),
        nodes: vec![node("n0", 8), node("n1", 8)],
        jobs: vec![plan("a", 0.0)],
        paper: Vec::new(),
    };
    let mut sim = Simulator::new(&w, quiet());
    let mut world = Telemetry::new();
    sim.observe(&mut world, 1_000);
    let from = world.state(0).unwrap().node;
    let to = 1 - from;
    let mv = wit::Action { job: 0, kind: ActionKind::Migrate(to), reason: String::new() };
    assert!(sim.apply(&[mv], &mut world).is_empty());
    sim.observe(&mut world, 11_000);
    assert_eq!(world.state(0).unwrap().node, to);
    assert_eq!(world.state(0).unwrap().cpu_used_millicores, 0, "restarting: no CPU used yet");
    sim.observe(&mut world, 31_000);
    assert!(world.state(0).unwrap().cpu_used_millicores > 0, "running again after 20 s");
    assert_eq!(sim.outcomes()[0].migrations, 1);
}

#[test]
fn gpu_jobs_spread_over_a_node_s_gpus_and_time_slice_when_they_share_one() {
    let gpu_node = NodeSpec { gpus: 2, gpu_memory_bytes: 32 << 30, ..node("g", 16) };
    let gpu_plan = |name: &str| JobPlan { gpus: 1, ..plan(name, 0.0) };
    let jobs = vec![gpu_plan("a"), gpu_plan("b"), gpu_plan("c"), plan("cpu", 0.0)];
    let w = Workload { name: "t".into(), nodes: vec![gpu_node], jobs, paper: Vec::new() };
    let mut sim = Simulator::new(&w, quiet());
    let mut world = Telemetry::new();
    sim.observe(&mut world, 10_000);
    let gpus: Vec<Option<u32>> = (0..4).map(|h| world.state(h).unwrap().gpu).collect();
    assert_eq!(gpus, [Some(0), Some(1), Some(0), None]);
    let used: Vec<f32> = (0..4).map(|h| world.state(h).unwrap().gpu_used_percent).collect();
    assert_eq!(used, [50.0, 100.0, 50.0, 0.0], "two jobs time-slice GPU 0");
    let snapshot = world.snapshot_for(&mut crate::snapshot::Cursor::fresh());
    assert_eq!(snapshot.gpus.utilisation_percent, [100.0, 100.0]);
}

#[test]
fn noise_is_the_same_for_the_same_seed() {
    let (mut a, mut b) = (Rng(7), Rng(7));
    let xs: Vec<f64> = (0..5).map(|_| a.around_one(0.1)).collect();
    let ys: Vec<f64> = (0..5).map(|_| b.around_one(0.1)).collect();
    assert_eq!(xs, ys);
    assert!(xs.iter().all(|x| (0.9..=1.1).contains(x)));
}
