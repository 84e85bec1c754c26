use wasmsched_core::backend::{Backend, Placer};
use wasmsched_core::bindings::wit::ActionKind;

use super::*;

#[test]
fn cfs_splits_equally_and_gives_unused_share_to_the_others() {
    assert_eq!(cfs_shares(8.0, &[4.0, 4.0]), vec![4.0, 4.0]);
    assert_eq!(cfs_shares(8.0, &[1.0, 10.0, 10.0]), vec![1.0, 3.5, 3.5]);
    assert_eq!(cfs_shares(8.0, &[1.0, 1.0]), vec![1.0, 1.0]);
    assert!(cfs_shares(8.0, &[]).is_empty());
}

use crate::model::Model;
use crate::throughput::GpuConfig;
use crate::workload::{JobPlan, NodeSpec};

fn node(name: &str, cores: u64) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        cpu_millicores: cores * 1000,
        memory_bytes: 64 << 30,
        gpus: 0,
        gpu_memory_bytes: 0,
        gpu_type: String::new(),
        domains: Vec::new(),
    }
}

fn plan(name: &str, arrival_s: f64) -> JobPlan {
    JobPlan { max_epochs: Some(5), ..JobPlan::training(name, Model::Cifar10, arrival_s) }
}

fn quiet() -> SimConfig {
    SimConfig { noise: 0.0, ..SimConfig::default() }
}

#[test]
fn a_cpu_limit_caps_a_job_and_its_share_flows_to_the_other() {
    let w = Workload::of("t", vec![node("n0", 4)], vec![plan("a", 0.0), plan("b", 0.0)]);
    let mut sim = Simulator::new(&w, quiet());
    let mut world = World::new();
    assert!(sim.observe(&mut world, 10_000));
    let fair = 2.0f64.min(Model::Cifar10.max_parallelism_cores()) * 1000.0;
    assert!((world.state(JobId(0)).unwrap().cpu_used_millicores as f64 - fair).abs() <= 1.0);
    let limit = wit::Action { job: JobId(0), kind: ActionKind::SetCpu(Some(500)), reason: String::new() };
    assert!(sim.apply(&[limit], &mut world).is_empty());
    assert_eq!(world.state(JobId(0)).unwrap().cpu_limit_millicores, Some(500));
    sim.observe(&mut world, 20_000);
    let other = (3500.0f64).min(Model::Cifar10.max_parallelism_cores() * 1000.0);
    assert_eq!(world.state(JobId(0)).unwrap().cpu_used_millicores, 500);
    assert!((world.state(JobId(1)).unwrap().cpu_used_millicores as f64 - other).abs() <= 1.0);
}

#[test]
fn jobs_report_real_curve_values_each_epoch_and_leave_when_done() {
    let w = Workload::of("t", vec![node("n0", 8)], vec![plan("a", 5.0)]);
    let mut sim = Simulator::new(&w, quiet());
    let mut world = World::new();
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
    let w = Workload::of("t", vec![node("n0", 8), node("n1", 8)], vec![plan("a", 0.0)]);
    let mut sim = Simulator::new(&w, quiet());
    let mut world = World::new();
    sim.observe(&mut world, 1_000);
    let from = world.state(JobId(0)).unwrap().node;
    let to = NodeId(1 - from.0);
    let mv = wit::Action { job: JobId(0), kind: ActionKind::Migrate(to), reason: String::new() };
    assert!(sim.apply(&[mv], &mut world).is_empty());
    sim.observe(&mut world, 11_000);
    assert_eq!(world.state(JobId(0)).unwrap().node, to);
    assert_eq!(world.state(JobId(0)).unwrap().cpu_used_millicores, 0, "restarting: no CPU used yet");
    sim.observe(&mut world, 31_000);
    assert!(world.state(JobId(0)).unwrap().cpu_used_millicores > 0, "running again after 20 s");
    assert_eq!(sim.outcomes()[0].migrations, 1);
}

/// Observe `ms` further on.
fn step(sim: &mut Simulator, world: &mut World, ms: u64) -> bool {
    let until = world.time_ms() + ms;
    sim.observe(world, until)
}

fn gpus(world: &World, h: u32) -> Vec<u32> {
    world.state(JobId(h)).unwrap().gpus.iter().map(|g| g.index).collect()
}

#[test]
fn gpus_are_allocated_whole_and_a_job_waits_first_come_first_served_until_one_frees() {
    let gpu_node = NodeSpec { gpus: 2, gpu_memory_bytes: 32 << 30, ..node("g", 16) };
    let gpu_plan = |name: &str| JobPlan { gpus: 1, max_epochs: Some(2), ..plan(name, 0.0) };
    let jobs = vec![gpu_plan("a"), gpu_plan("b"), gpu_plan("c"), plan("cpu", 0.0)];
    let w = Workload::of("t", vec![gpu_node], jobs);
    let mut sim = Simulator::new(&w, quiet());
    let mut world = World::new();
    sim.observe(&mut world, 40_000);
    assert_eq!((gpus(&world, 0), gpus(&world, 1)), (vec![0], vec![1]));
    let queued: Vec<JobId> = world.queue().map(|(s, _)| s.handle).collect();
    assert_eq!(queued, [2, 3], "c waits for a GPU, and the CPU job behind it waits its turn");
    let used: Vec<f32> = (0..2).map(|h| world.state(JobId(h)).unwrap().gpu_used_percent).collect();
    let alone = (100.0 * super::colocation::demand(sim.jobs[0].gpu_kind.unwrap().0)) as f32;
    assert_eq!(used, [alone, alone], "nobody shares: each uses what it uses alone");
    let snapshot = world.snapshot_for(&mut wasmsched_core::world::Cursor::fresh());
    assert_eq!(snapshot.gpus.utilisation_percent, [100.0, 100.0]);
    assert_eq!(snapshot.queue.handle, [2, 3]);
    while step(&mut sim, &mut world, 10_000) {}
    let o = sim.outcomes();
    assert!(o.iter().all(|j| j.finish_s.is_some()), "everyone ran in the end");
    assert!(
        o[2].waited_s.unwrap() > 0.0 && o[2].waited_s.unwrap() >= o[0].jct_s.unwrap().min(o[1].jct_s.unwrap()) - 1e-6
    );
}

fn gpu_world(policy_places: bool) -> (Simulator, World) {
    let gpu_node = |name: &str| NodeSpec { gpus: 2, gpu_memory_bytes: 32 << 30, ..node(name, 16) };
    let jobs = vec![JobPlan { gpus: 2, replicas: 2, ..plan("a", 0.0) }, JobPlan { gpus: 1, ..plan("b", 0.0) }];
    let w = Workload::of("t", vec![gpu_node("g0"), gpu_node("g1")], jobs);
    let mut sim = Simulator::new(&w, quiet());
    if policy_places {
        sim.set_placer(Placer::Policy);
    }
    let world = World::new();
    (sim, world)
}

fn place(job: u32, nodes: &[(u32, &[u32])], share: bool) -> wit::Action {
    let nodes = nodes.iter().map(|(node, gpus)| wit::NodePlacement::new(*node, *gpus)).collect();
    wit::Action { job: JobId(job), kind: ActionKind::Place(wit::Placement { nodes, share }), reason: String::new() }
}

#[test]
fn a_policy_that_places_leaves_arrivals_queued_until_it_places_them() {
    let (mut sim, mut world) = gpu_world(true);
    sim.observe(&mut world, 10_000);
    assert_eq!((world.job_count(), world.queue_len()), (0, 2));
    let errors = sim.apply(&[place(0, &[(0, &[1]), (1, &[0])], false), place(1, &[(1, &[1])], false)], &mut world);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!((world.job_count(), world.queue_len()), (2, 0));
    assert_eq!(world.state(JobId(0)).unwrap().node, 0, "a spread job's first node");
    assert_eq!(world.state(JobId(0)).unwrap().gpus.len(), 2);
    sim.observe(&mut world, 40_000);
    let s = world.state(JobId(0)).unwrap();
    assert_eq!(s.cpu_used_millicores, 0, "a GPU job starting up uses no CPU: {s:?}");
    sim.observe(&mut world, 50_000);
    let s = world.state(JobId(0)).unwrap();
    assert!(s.cpu_used_millicores > 0 && s.run_ms == 40_000 && s.gpu_ms == 80_000, "{s:?}");
}

#[test]
fn a_job_spread_over_two_topology_domains_steps_slower_by_the_measured_factor() {
    // The same job spread over two nodes of one rack, and of two racks.
    let epoch_s = |racks: [&str; 2]| {
        let gpu_node = |name: &str, rack: &str| NodeSpec {
            gpus: 2,
            gpu_memory_bytes: 32 << 30,
            domains: vec!["block".into(), rack.into()],
            ..node(name, 16)
        };
        let jobs = vec![JobPlan { gpus: 4, replicas: 2, ..plan("a", 0.0) }];
        let w = Workload::of("t", vec![gpu_node("g0", racks[0]), gpu_node("g1", racks[1])], jobs);
        let mut sim = Simulator::new(&w, quiet());
        sim.set_placer(Placer::Policy);
        let mut world = World::new();
        sim.observe(&mut world, 1_000);
        assert!(sim.apply(&[place(0, &[(0, &[0, 1]), (1, &[0, 1])], false)], &mut world).is_empty());
        assert_eq!(world.nodes()[1].domains, ["block", racks[1]], "the policy sees the domains");
        let mut now = 1_000;
        while world.history(JobId(0)).count() < 2 {
            now += 1_000;
            sim.observe(&mut world, now);
        }
        let h: Vec<u64> = world.history(JobId(0)).map(|r| r.time_ms).collect();
        (h[1] - h[0]) as f64 / 1000.0
    };
    let (near, far) = (epoch_s(["r1", "r1"]), epoch_s(["r1", "r2"]));
    let ratio = far / near;
    let want = 1.0 / colocation::cross_domain_speed();
    assert!((ratio - want).abs() < 0.02 * want, "an epoch takes {near} s in one rack, {far} s over two: {ratio}");
}

#[test]
fn a_preempted_job_returns_to_the_queue_with_its_progress_and_pays_a_restart() {
    let (mut sim, mut world) = gpu_world(true);
    sim.observe(&mut world, 1_000);
    assert!(sim.apply(&[place(1, &[(0, &[0])], false)], &mut world).is_empty());
    while world.history(JobId(1)).count() < 2 {
        step(&mut sim, &mut world, 10_000);
    }
    let epochs = sim.outcomes()[1].epochs;
    let preempt = wit::Action { job: JobId(1), kind: ActionKind::Preempt, reason: String::new() };
    assert!(sim.apply(&[preempt], &mut world).is_empty());
    assert_eq!(world.state(JobId(1)).unwrap().queued, Some(wit::WaitReason::Preempted));
    assert!(world.state(JobId(1)).unwrap().run_ms > 0, "attained service is kept");
    step(&mut sim, &mut world, 30_000);
    assert_eq!(sim.outcomes()[1].epochs, epochs, "no progress while queued");
    assert!(sim.apply(&[place(1, &[(1, &[1])], false)], &mut world).is_empty());
    step(&mut sim, &mut world, 10_000);
    assert_eq!(world.state(JobId(1)).unwrap().cpu_used_millicores, 0, "restarting: no CPU used yet");
    step(&mut sim, &mut world, 30_000);
    assert!(world.state(JobId(1)).unwrap().cpu_used_millicores > 0, "running again after the restart cost");
    assert_eq!(sim.outcomes()[1].preemptions, 1);
}

#[test]
fn jobs_placed_to_share_a_gpu_time_slice_it() {
    let (mut sim, mut world) = gpu_world(true);
    sim.observe(&mut world, 1_000);
    assert!(sim.apply(&[place(1, &[(0, &[0])], false)], &mut world).is_empty());
    sim.observe(&mut world, 31_000);
    sim.observe(&mut world, 91_000);
    let alone = (world.state(JobId(1)).unwrap().cpu_used_millicores, sim.jobs[1].speed);
    assert!(sim.apply(&[place(0, &[(0, &[0, 1])], true)], &mut world).is_empty());
    sim.observe(&mut world, 121_000);
    sim.observe(&mut world, 181_000);
    let shared = (world.state(JobId(1)).unwrap().cpu_used_millicores, sim.jobs[1].speed);
    let demand = (100.0 * super::colocation::demand(sim.jobs[1].gpu_kind.unwrap().0)) as f32;
    assert_eq!(world.state(JobId(1)).unwrap().gpu_used_percent, demand / 2.0, "half its time on the GPU");
    assert!(shared.0 * 2 <= alone.0 + 2, "half the CPU on a GPU held by two: {alone:?} then {shared:?}");
    assert!((shared.1 * 2.0 - alone.1).abs() < 1e-9 * alone.1, "and half the steps: {alone:?} then {shared:?}");
}

/// Two one-GPU jobs of `models` (batch 64 each) placed on GPU 0 of one node by the policy.
fn two_on_one_gpu(models: [Model; 2], gpu_memory: u64) -> (Simulator, World, Vec<String>) {
    let gpu_node = NodeSpec { gpus: 1, gpu_memory_bytes: gpu_memory, ..node("g", 16) };
    let jobs = models
        .iter()
        .enumerate()
        .map(|(k, &m)| JobPlan {
            gpus: 1,
            batch_size: 64,
            max_epochs: Some(50),
            ..JobPlan::training(format!("j{k}"), m, 0.0)
        })
        .collect();
    let mut sim = Simulator::new(&Workload::of("t", vec![gpu_node], jobs), quiet());
    sim.set_placer(Placer::Policy);
    let mut world = World::new();
    sim.observe(&mut world, 1_000);
    let errors = sim.apply(&[place(0, &[(0, &[0])], false), place(1, &[(0, &[0])], true)], &mut world);
    sim.observe(&mut world, 61_000);
    (sim, world, errors.into_iter().map(|e| e.reason).collect())
}

#[test]
fn jobs_with_shares_on_one_gpu_share_it_in_space_at_their_measured_speeds() {
    let (mut sim, mut world, errors) = two_on_one_gpu([Model::Cifar10, Model::Ncf], 16 << 30);
    assert!(errors.is_empty(), "{errors:?}");
    let sliced = [sim.gpu_speed(0), sim.gpu_speed(1)];
    assert_eq!(sliced, [0.5, 0.5], "no shares: they time-slice");
    let share = |job, percent| wit::Action {
        job,
        kind: ActionKind::SetGpuShare(wit::GpuShare { gpu: 0, percent }),
        reason: String::new(),
    };
    assert!(sim.apply(&[share(JobId(0), 100), share(JobId(1), 100)], &mut world).is_empty());
    let kinds = [sim.jobs[0].gpu_kind.unwrap().0, sim.jobs[1].gpu_kind.unwrap().0];
    let holders = kinds.map(|kind| super::colocation::Holder { kind, share: Some(1.0) });
    let measured = super::colocation::speeds(&holders);
    assert_eq!([sim.gpu_speed(0), sim.gpu_speed(1)], [measured[0], measured[1]]);
    assert!(measured[0] + measured[1] > 1.1, "this pair gains from space sharing: {measured:?}");
    sim.observe(&mut world, 121_000);
    let used: Vec<f32> = (0..2).map(|h| world.state(JobId(h)).unwrap().gpu_used_percent).collect();
    assert!(used.iter().all(|&u| u > 0.0), "{used:?}");
    // Capping one below its demand slows it and frees the GPU for the other.
    assert!(sim.apply(&[share(JobId(1), 5)], &mut world).is_empty());
    assert!(sim.gpu_speed(1) < measured[1] && sim.gpu_speed(0) >= measured[0]);
}

#[test]
fn a_gpu_service_keeps_its_latency_beside_a_trainer_only_with_shares() {
    let gpu_node = NodeSpec { gpus: 1, gpu_memory_bytes: 16 << 30, ..node("g", 16) };
    let service = JobPlan {
        gpus: 1,
        batch_size: 16,
        request_rate: Some(50.0),
        duration_s: Some(600.0),
        kind: wit::JobKind::Inference,
        ..JobPlan::training("serve", Model::Cifar10, 0.0)
    };
    let trainer = JobPlan { gpus: 1, max_epochs: Some(50), ..JobPlan::training("lm", Model::Deepspeech2, 0.0) };
    let mut sim = Simulator::new(&Workload::of("t", vec![gpu_node], vec![service, trainer]), quiet());
    sim.set_placer(Placer::Policy);
    let mut world = World::new();
    sim.observe(&mut world, 1_000);
    assert!(sim.apply(&[place(0, &[(0, &[0])], false)], &mut world).is_empty());
    let p99 = |sim: &mut Simulator, world: &mut World| {
        let until = world.time_ms() + 60_000;
        sim.observe(world, until);
        world.history(JobId(0)).last().unwrap().values[0]
    };
    let alone = p99(&mut sim, &mut world);
    assert!(alone < 150.0, "alone: {alone} ms");
    assert!(sim.apply(&[place(1, &[(0, &[0])], true)], &mut world).is_empty());
    let sliced = p99(&mut sim, &mut world);
    assert!(sliced > 1000.0, "time-sliced, half the GPU cannot serve 50/s: {sliced} ms");
    let share = |job, percent| wit::Action {
        job,
        kind: ActionKind::SetGpuShare(wit::GpuShare { gpu: 0, percent }),
        reason: String::new(),
    };
    assert!(sim.apply(&[share(JobId(0), 80), share(JobId(1), 20)], &mut world).is_empty());
    let regulated = p99(&mut sim, &mut world);
    assert!(regulated < 150.0 && regulated >= alone, "side by side: {alone} ms alone, {regulated} ms shared");
}

#[test]
fn a_job_is_not_placed_beside_another_when_their_gpu_memory_does_not_fit() {
    let (_, world, errors) = two_on_one_gpu([Model::Imagenet, Model::Imagenet], 8 << 30);
    assert!(errors.len() == 1 && errors[0].contains("do not fit"), "{errors:?}");
    assert_eq!(world.queue_len(), 1, "the second waits");
}

#[test]
fn a_run_whose_queue_is_never_placed_ends_after_the_idle_limit() {
    let (mut sim, mut world) = gpu_world(true);
    let mut ticks = 0;
    while sim.observe(&mut world, (ticks + 1) * 60_000) {
        ticks += 1;
    }
    assert_eq!(ticks, 59, "an hour of nothing, then the run ends");
    assert!(sim.outcomes().iter().all(|o| o.waited_s.is_none()));
}

#[test]
fn noise_is_the_same_for_the_same_seed() {
    let (mut a, mut b) = (Rng::new(7), Rng::new(7));
    let xs: Vec<f64> = (0..5).map(|_| a.around_one(0.1)).collect();
    let ys: Vec<f64> = (0..5).map(|_| b.around_one(0.1)).collect();
    assert_eq!(xs, ys);
    assert!(xs.iter().all(|x| (0.9..=1.1).contains(x)));
}

fn gpu_job_world(jobs: Vec<JobPlan>, gpus: u32) -> (Simulator, World) {
    let gpu_node = NodeSpec { gpus, gpu_memory_bytes: 32 << 30, ..node("g", 16) };
    let w = Workload::of("t", vec![gpu_node], jobs);
    (Simulator::new(&w, quiet()), World::new())
}

#[test]
fn a_gpu_job_alone_takes_its_start_up_then_its_measured_steps_at_the_measured_step_time() {
    let job = JobPlan { gpus: 2, batch_size: 512, max_epochs: Some(3), ..plan("a", 0.0) };
    let (mut sim, mut world) = gpu_job_world(vec![job], 2);
    while step(&mut sim, &mut world, 60_000) {}
    let config = GpuConfig::new(Model::Cifar10, 512, 2);
    assert_eq!((config.local_bsz, config.accum_steps), (256, 0));
    let expected = SimConfig::default().gpu_start_s + throughput::run_s(Model::Cifar10, config, &[2], 3);
    let jct = sim.outcomes()[0].jct_s.unwrap();
    assert!((jct - expected).abs() < 1e-6, "{jct} s, expected {expected} s");
}

#[test]
fn a_gpu_job_preempted_mid_epoch_keeps_its_steps() {
    let job = JobPlan { gpus: 1, max_epochs: Some(1), ..plan("a", 0.0) };
    let alone = {
        let (mut sim, mut world) = gpu_job_world(vec![job.clone()], 1);
        while step(&mut sim, &mut world, 1_000) {}
        sim.outcomes()[0].jct_s.unwrap()
    };
    let (mut sim, mut world) = gpu_job_world(vec![job], 1);
    sim.set_placer(Placer::Policy);
    sim.observe(&mut world, 0);
    assert!(sim.apply(&[place(0, &[(0, &[0])], false)], &mut world).is_empty());
    let half = ((alone + SimConfig::default().gpu_start_s) / 2.0 * 1000.0) as u64;
    sim.observe(&mut world, half);
    let preempt = wit::Action { job: JobId(0), kind: ActionKind::Preempt, reason: String::new() };
    assert!(sim.apply(&[preempt], &mut world).is_empty());
    sim.observe(&mut world, half + 100_000);
    assert!(sim.apply(&[place(0, &[(0, &[0])], false)], &mut world).is_empty());
    while step(&mut sim, &mut world, 1_000) {}
    let jct = sim.outcomes()[0].jct_s.unwrap();
    // Queued 100 s and a second start-up; not a step is redone.
    let expected = alone + 100.0 + SimConfig::default().gpu_start_s;
    assert!((jct - expected).abs() <= 1.0, "{jct} s, expected {expected} s");
}

#[test]
fn a_gpu_job_starved_of_cpu_slows_in_proportion() {
    let job = JobPlan { gpus: 1, max_epochs: Some(2), ..plan("a", 0.0) };
    let (mut sim, mut world) = gpu_job_world(vec![job], 1);
    sim.observe(&mut world, 60_000);
    let full = sim.jobs[0].speed;
    let half = (FEED_CORES_PER_GPU * 500.0) as u64;
    let limit = wit::Action { job: JobId(0), kind: ActionKind::SetCpu(Some(half)), reason: String::new() };
    assert!(sim.apply(&[limit], &mut world).is_empty());
    assert!((sim.jobs[0].speed * 2.0 - full).abs() < 1e-9 * full, "{full} then {}", sim.jobs[0].speed);
}

#[test]
fn a_resize_restarts_the_job_on_the_gpus_it_names_after_the_restart_cost() {
    let (mut sim, mut world) = gpu_world(true);
    sim.observe(&mut world, 10_000);
    let errors = sim.apply(&[place(0, &[(0, &[1]), (1, &[0])], false), place(1, &[(1, &[1])], false)], &mut world);
    assert!(errors.is_empty(), "{errors:?}");
    sim.observe(&mut world, 200_000);
    let before = sim.jobs[0].epoch;
    // Job a gathers its two GPUs onto node 0, the one it keeps and the one beside it.
    let nodes = vec![wit::NodePlacement { node: NodeId(0), gpus: vec![0, 1] }];
    let resize = wit::Resize { placement: wit::Placement { nodes, share: false }, batch_size: None };
    let act = wit::Action { job: JobId(0), kind: ActionKind::Resize(resize), reason: String::new() };
    assert!(sim.apply(&[act], &mut world).is_empty());
    let s = world.state(JobId(0)).unwrap();
    let batch = sim.jobs[0].gpu.unwrap().batch_size();
    assert_eq!(
        (s.node, s.gpus.clone(), s.batch_size),
        (NodeId(0), vec![GpuSlot { node: NodeId(0), index: 0 }, GpuSlot { node: NodeId(0), index: 1 }], batch),
        "a rigid job keeps its batch size"
    );
    assert_eq!(sim.jobs[0].migrations, 1);
    assert_eq!(world.free_gpus(NodeId(1)), [0], "it left node 1's GPU 0");
    let paused_until = sim.jobs[0].paused_until;
    assert!(paused_until > 200.0, "it pays the restart: {paused_until}");
    sim.observe(&mut world, 200_000 + 1_000);
    assert_eq!(sim.jobs[0].epoch, before, "no progress while it restarts");
}

#[test]
fn a_job_on_a100s_runs_at_their_measured_step_time_and_finishes_before_one_on_t4s() {
    let jct = |gpu_type: &str| {
        let gpu_node = NodeSpec { gpus: 1, gpu_memory_bytes: 16 << 30, gpu_type: gpu_type.into(), ..node("g", 16) };
        let w = Workload::of("t", vec![gpu_node], vec![JobPlan { gpus: 1, batch_size: 512, ..plan("a", 0.0) }]);
        let mut sim = Simulator::new(&w, quiet());
        let mut world = World::new();
        while step(&mut sim, &mut world, 10_000) {}
        sim.outcomes()[0].jct_s.unwrap()
    };
    let (t4, a100, unnamed) = (jct("t4"), jct("a100"), jct(""));
    assert!(a100 < t4 * 0.6, "A100 {a100} s against T4 {t4} s");
    assert_eq!(unnamed, t4, "a node without a type has T4s");
    let config = GpuConfig::new(Model::Cifar10, 512, 1);
    let expected = SimConfig::default().gpu_start_s
        + (1..=5).map(|e| Model::Cifar10.steps_in(512, e)).sum::<f64>()
            * config.step_s_on(Model::Cifar10, throughput::GpuType::A100, &[1]);
    assert!((a100 - expected).abs() < 11.0, "{a100} against {expected} (a 10 s tick)");
}

#[test]
fn an_elastic_job_picks_its_batch_for_its_gpus_and_a_resize_onto_more_gpus_speeds_it_up() {
    let nodes = vec![
        NodeSpec { gpus: 4, gpu_memory_bytes: 16 << 30, gpu_type: "t4".into(), ..node("t4", 16) },
        NodeSpec { gpus: 8, gpu_memory_bytes: 40 << 30, gpu_type: "a100".into(), ..node("a100", 64) },
    ];
    let job = JobPlan { gpus: 1, batch_size: 128, elastic: true, ..JobPlan::training("e", Model::Cifar10, 0.0) };
    let run = |resize: bool| {
        let w = Workload::of("t", nodes.clone(), vec![job.clone()]);
        let mut sim = Simulator::new(&w, quiet());
        sim.set_placer(Placer::Policy);
        let mut world = World::new();
        sim.observe(&mut world, 1_000);
        let spec = world.spec(JobId(0)).unwrap().clone();
        assert_eq!((spec.scaling.batch_size_min, spec.scaling.batch_size_max), (128, 4096));
        assert_eq!(spec.scaling.gpu_counts.len(), 64, "1 to 64 GPUs");
        assert!(sim.apply(&[place(0, &[(0, &[0])], false)], &mut world).is_empty());
        sim.observe(&mut world, 600_000);
        let batch = world.state(JobId(0)).unwrap().batch_size;
        assert!((128..=4096).contains(&batch), "{batch}");
        if resize {
            let nodes = vec![wit::NodePlacement { node: NodeId(1), gpus: (0..8).collect() }];
            let resize = wit::Resize { placement: wit::Placement { nodes, share: false }, batch_size: None };
            let act = wit::Action { job: JobId(0), kind: ActionKind::Resize(resize), reason: String::new() };
            assert!(sim.apply(&[act], &mut world).is_empty());
            assert_eq!(sim.jobs[0].paused_until, 600.0 + Model::Cifar10.restore_s(), "cifar10's restore delay");
            assert!(world.state(JobId(0)).unwrap().batch_size > batch, "eight A100s take a larger batch");
        }
        while step(&mut sim, &mut world, 60_000) {}
        let o = &sim.outcomes()[0];
        assert_eq!(o.epochs, Model::Cifar10.elastic_epochs(), "its whole schedule");
        o.jct_s.unwrap()
    };
    let (stayed, resized) = (run(false), run(true));
    assert!(resized < stayed / 3.0, "eight A100s from ten minutes on: {resized} s against {stayed} s on one T4");
}

#[test]
fn a_tuned_job_is_rigid_at_its_batch_size_and_trains_its_models_full_schedule() {
    let nodes = vec![NodeSpec { gpus: 4, gpu_memory_bytes: 16 << 30, gpu_type: "t4".into(), ..node("t4", 16) }];
    let job =
        JobPlan { gpus: 2, replicas: 2, batch_size: 256, tuned: true, ..JobPlan::training("t", Model::Cifar10, 0.0) };
    let w = Workload::of("t", nodes, vec![job]);
    let mut sim = Simulator::new(&w, quiet());
    sim.set_placer(Placer::Policy);
    let mut world = World::new();
    sim.observe(&mut world, 1_000);
    let spec = world.spec(JobId(0)).unwrap().clone();
    assert_eq!(spec.scaling.gpu_counts, vec![2], "rigid: its own count");
    assert_eq!((spec.scaling.batch_size_min, spec.scaling.batch_size_max), (256, 256), "its one batch size");
    assert!(sim.apply(&[place(0, &[(0, &[0, 1])], false)], &mut world).is_empty());
    assert_eq!(sim.jobs[0].paused_until, 1.0 + Model::Cifar10.restore_s(), "cifar10's restore delay");
    sim.observe(&mut world, 600_000);
    assert_eq!(world.state(JobId(0)).unwrap().batch_size, 256, "its batch size, not the goodput-best");
    while step(&mut sim, &mut world, 60_000) {}
    assert_eq!(sim.outcomes()[0].epochs, Model::Cifar10.elastic_epochs(), "its whole schedule");
}

#[test]
fn the_default_placement_holds_a_tenant_to_its_quota_and_starts_the_others_past_it() {
    let gpu_node = NodeSpec { gpus: 4, gpu_memory_bytes: 32 << 30, ..node("g", 16) };
    let of = |name: &str, tenant: &str, gpus| JobPlan {
        gpus,
        tenant: tenant.into(),
        max_epochs: Some(2),
        ..plan(name, 0.0)
    };
    let jobs = vec![of("a0", "a", 1), of("a1", "a", 1), of("a2", "a", 1), of("b0", "b", 2)];
    let w = Workload::of("t", vec![gpu_node], jobs);
    let mut sim = Simulator::new(&w, quiet());
    let mut world = World::new();
    let quota = wit::Tenant { quota_gpus: Some(2), ..wasmsched_core::world::undeclared("a") };
    world.set_tenants(vec![quota]);
    sim.observe(&mut world, 10_000);
    let running: Vec<&str> = world.jobs().map(|(s, _)| s.name.as_str()).collect();
    assert_eq!(running, ["a0", "a1", "b0"], "a2 would pass a's quota; b0 behind it starts");
    let ledger = world.ledger();
    assert_eq!((ledger.held(0), ledger.room(0)), (2, Some(0)));
    assert_eq!(world.tenants().iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    while step(&mut sim, &mut world, 10_000) {}
    assert!(sim.outcomes().iter().all(|j| j.finish_s.is_some()), "a2 ran once a GPU of a's came back");
}

#[test]
fn a_shaken_workload_keeps_its_order_and_first_arrival_and_moves_each_by_at_most_the_fraction() {
    let mut jobs: Vec<JobPlan> =
        [0.0, 10.0, 10.0, 40.0, 100.0].iter().enumerate().map(|(i, &t)| plan(&format!("j{i}"), t)).collect();
    jobs[4].work_scale = 2.0;
    let workload = Workload::of("w", vec![node("n", 8)], jobs);
    let shaken = workload.shaken(0.2, 7);
    assert_eq!(shaken, workload.shaken(0.2, 7), "the same seed shakes alike");
    assert_ne!(shaken, workload.shaken(0.2, 8), "another seed shakes otherwise");
    assert_eq!(workload.shaken(0.0, 7), workload, "0 is the workload as it is");
    assert_eq!(shaken.jobs[0].arrival_s, 0.0);
    let names = |w: &Workload| w.jobs.iter().map(|j| j.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&shaken), names(&workload));
    for (i, (a, b)) in workload.jobs.iter().zip(&shaken.jobs).enumerate().skip(1) {
        let (gap, moved) = (a.arrival_s - workload.jobs[i - 1].arrival_s, b.arrival_s - shaken.jobs[i - 1].arrival_s);
        assert!(moved >= 0.8 * gap - 1e-9 && moved <= 1.2 * gap + 1e-9, "job {i}: gap {gap} became {moved}");
        let scale = b.work_scale / a.work_scale;
        assert!((0.8..=1.2).contains(&scale), "job {i}: work × {scale}");
    }
    assert_eq!(shaken.jobs[2].arrival_s, shaken.jobs[1].arrival_s, "a tie stays a tie");
}
