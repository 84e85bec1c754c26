//! Ready-made worlds: a small realistic one for dry runs, and large ones for benchmarks.

use super::*;

const MODELS: [(&str, &str, wit::Direction, wit::JobKind); 6] = [
    ("cifar10", "accuracy", wit::Direction::HigherIsBetter, wit::JobKind::Training),
    ("deepspeech2", "wer", wit::Direction::LowerIsBetter, wit::JobKind::Training),
    ("imagenet", "accuracy", wit::Direction::HigherIsBetter, wit::JobKind::Training),
    ("yolov3", "loss", wit::Direction::LowerIsBetter, wit::JobKind::Training),
    ("ncf", "hit-rate", wit::Direction::HigherIsBetter, wit::JobKind::Training),
    ("bert", "latency-ms", wit::Direction::LowerIsBetter, wit::JobKind::Inference),
];

/// A job declaration of the `i`-th kind above (six kinds, both metric directions,
/// training and inference, TRADL tiers and QoE targets on some).
pub fn job_spec(i: usize) -> wit::JobSpec {
    let (model, metric, direction, kind) = MODELS[i % MODELS.len()];
    let higher = direction == wit::Direction::HigherIsBetter;
    wit::JobSpec {
        handle: JobId(0),
        name: format!("{model}-{i}"),
        model: model.into(),
        kind,
        metrics: vec![wit::MetricSpec { name: metric.into(), direction }],
        tiers: i.is_multiple_of(3).then_some(if higher {
            wit::Tiers { deliverable: 0.8, final_: 0.9 }
        } else {
            wit::Tiers { deliverable: 0.5, final_: 0.3 }
        }),
        qoe_target: (i % 4 == 1).then_some(30.0),
        max_epochs: Some(100),
        labels: vec![("team".into(), format!("t{}", i % 5))],
        tenant: crate::world::DEFAULT_TENANT.into(),
        scaling: wit::Scaling::rigid(),
        arrival_ms: 0,
        gpus: 0,
        replicas: 1,
        requests: wit::Resources::NONE,
        node_selector: Vec::new(),
    }
}

/// [`world`] with `queued` jobs waiting as well, every other one asking for a GPU: the
/// world a dry run and the benchmarks give a policy that places.
pub fn with_queue(nodes: usize, jobs: usize, queued: usize, epochs: u32) -> World {
    let mut t = world(nodes, jobs, epochs);
    for i in 0..queued {
        let spec = wit::JobSpec { arrival_ms: t.time_ms(), gpus: (i % 2) as u32, replicas: 1, ..job_spec(jobs + i) };
        t.enqueue_job(spec);
    }
    t
}

/// The GPUs the `i`-th job of [`gpu_cluster`] asks for, and in how many replicas: mostly
/// whole nodes and halves among the running, every size in the queue.
pub fn gpu_ask(i: usize, queued: bool) -> (u32, u32) {
    const RUNNING: [(u32, u32); 8] = [(8, 1), (8, 1), (8, 1), (4, 1), (4, 1), (2, 1), (1, 1), (1, 1)];
    const QUEUED: [(u32, u32); 8] = [(1, 1), (2, 1), (4, 1), (8, 1), (1, 1), (0, 1), (2, 1), (16, 2)];
    if queued { QUEUED[i % QUEUED.len()] } else { RUNNING[i % RUNNING.len()] }
}

/// A GPU cluster at scale: `nodes` nodes of 64 cores, 512 GiB and `gpus_per_node` GPUs;
/// `running` jobs packed onto them by first fit in node order (asks by [`gpu_ask`], each
/// with some hours of attained service, a tenth of them past 16 GPU-hours), then `queued`
/// jobs that wait, asking for 0 to 16 GPUs. Each job has one progress record.
pub fn gpu_cluster(nodes: usize, gpus_per_node: u32, running: usize, queued: usize) -> World {
    let mut t = World::new();
    for n in 0..nodes.max(1) {
        t.add_node(wit::Node {
            name: format!("node-{n}"),
            cpu_millicores: 64_000,
            memory_bytes: 512 << 30,
            gpu_memory_bytes: vec![80 << 30; gpus_per_node as usize],
            gpu_type: "a100".into(),
            labels: Vec::new(),
            domains: Vec::new(),
        });
    }
    let mut book = t.gpu_book();
    let order: Vec<NodeId> = (0..t.nodes.len() as u32).map(NodeId).collect();
    t.set_time_ms(3_600_000);
    for i in 0..running {
        let (gpus, replicas) = gpu_ask(i, false);
        let ask = wasmsched_rules::Ask { gpus, replicas };
        let Some(place) = wasmsched_rules::first_fit(&book, ask, &order) else { break };
        let h = t.add_job(wit::JobSpec { arrival_ms: 0, gpus, replicas, ..job_spec(i) }, place[0].node);
        book.take(&place, h);
        t.record(h, 1, vec![0.5]);
        let s = t.state_mut(h).expect("just added");
        s.gpus = GpuSlot::of(&place);
        let gpus_held = s.gpus.clone();
        let hours = if i % 10 == 9 { 20 } else { 1 + (i as u64 * 7) % 12 } * 3_600_000 / u64::from(gpus.max(1));
        s.accrue(hours);
        s.cpu_used_millicores = 2_000 + (i as u64 * 37) % 6_000;
        s.memory_used_bytes = (8 << 30) + (i as u64 % 7) * (1 << 30);
        s.gpu_used_percent = 20.0 + (i % 6) as f32 * 10.0;
        for g in gpus_held {
            t.set_gpu_use(g.node, g.index, 50.0, 10 << 30);
        }
    }
    for i in 0..queued {
        let (gpus, replicas) = gpu_ask(i, true);
        t.enqueue_job(wit::JobSpec { arrival_ms: t.time_ms, gpus, replicas, ..job_spec(running + i) });
    }
    t
}

/// `nodes` nodes of 16 cores and 64 GiB (one GPU each), `jobs` jobs spread over them, each
/// with `epochs` progress records one minute apart, and the clock just after the last.
pub fn world(nodes: usize, jobs: usize, epochs: u32) -> World {
    let mut t = World::new();
    for n in 0..nodes.max(1) {
        let handle = t.add_node(wit::Node {
            name: format!("node-{n}"),
            cpu_millicores: 16_000,
            memory_bytes: 64 << 30,
            gpu_memory_bytes: vec![80 << 30],
            gpu_type: "a100".into(),
            labels: Vec::new(),
            domains: Vec::new(),
        });
        t.set_gpu_use(handle, 0, 40.0, 4 << 30);
    }
    let handles: Vec<JobId> = (0..jobs).map(|i| t.add_job(job_spec(i), NodeId((i % nodes.max(1)) as u32))).collect();
    for epoch in 1..=epochs {
        t.set_time_ms(u64::from(epoch) * 60_000);
        for (i, &h) in handles.iter().enumerate() {
            let x = f64::from(epoch) / f64::from(epochs.max(1));
            let value = if i % 6 == 1 || i % 6 == 3 || i % 6 == 5 {
                1.0 / (1.0 + 4.0 * x)
            } else {
                0.9 * (1.0 - (-3.0 * x).exp())
            };
            t.record(h, epoch, vec![value]);
        }
    }
    for (i, &h) in handles.iter().enumerate() {
        let s = t.state_mut(h).expect("just added");
        s.cpu_used_millicores = 500 + (i as u64 * 37) % 1500;
        s.memory_used_bytes = (1 << 30) + (i as u64 % 7) * (256 << 20);
    }
    t.set_time_ms(u64::from(epochs) * 60_000 + 1_000);
    t
}
