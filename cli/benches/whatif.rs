//! `wasmsched whatif` at scale: a week of a 1,000-node cluster (4,000 T4 GPUs) taking 10,080
//! GPU jobs, one a minute (CIFAR-10 and NCF on one GPU, DeepSpeech2 on two, ImageNet on
//! four), run under FIFO at a 5-minute tick and recorded once; then, measured in one run:
//! - `whatif/convert`: reading the recording and fitting every job (`Recorded::open` and
//!   `scenario`), what `whatif` does before its first run;
//! - `whatif/replay/fifo` and `whatif/replay/tiresias`: one replay of the week under each.
//!
//! The recording's size and how long the recorded run took go to stderr.

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use wasmsched::experiment::run::{PolicyChoice, RunOptions, simulate, simulate_recorded};
use wasmsched::record::TelemetryRecorder;
use wasmsched::runtime::{Runtime, RuntimeConfig};
use wasmsched::scenario::Scenario;
use wasmsched::sim::SimConfig;
use wasmsched::sim::model::Model;
use wasmsched::sim::workload::{JobPlan, NodeSpec, Workload};
use wasmsched::whatif::Recorded;

const TICK: Duration = Duration::from_secs(300);
const NODES: usize = 1000;
const JOBS: usize = 7 * 24 * 60;

/// The week: jobs in a repeating order of four kinds, one a minute.
fn week() -> Scenario {
    let nodes = (0..NODES)
        .map(|i| NodeSpec {
            name: format!("node-{i:04}"),
            cpu_millicores: 48_000,
            memory_bytes: 192 << 30,
            gpus: 4,
            gpu_memory_bytes: 16 << 30,
            gpu_type: "t4".into(),
            domains: Vec::new(),
        })
        .collect();
    let kinds: [(Model, u32, Option<u32>); 4] = [
        (Model::Cifar10, 1, None),
        (Model::Ncf, 1, None),
        (Model::Deepspeech2, 2, Some(20)),
        (Model::Imagenet, 4, Some(24)),
    ];
    let jobs = (0..JOBS)
        .map(|i| {
            let (model, gpus, max_epochs) = kinds[i % kinds.len()];
            let plan = JobPlan::training(format!("{}-{i}", model.name()), model, 60.0 * i as f64);
            JobPlan { gpus, replicas: gpus, max_epochs, ..plan }
        })
        .collect();
    Scenario::of(Workload::of("week", nodes, jobs))
}

fn whatif(c: &mut Criterion) {
    let rt = Runtime::new(RuntimeConfig { cache_dir: None, ..RuntimeConfig::default() }).unwrap();
    let options = RunOptions { sim: SimConfig::default(), tick: TICK, ..RunOptions::default() };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("week.jsonl");
    let fifo = PolicyChoice::resolve(&rt, "fifo").unwrap();
    let started = Instant::now();
    let scenario = week();
    let mut recorder = TelemetryRecorder::create(&path, TICK.as_millis() as u64, scenario.budget).unwrap();
    let (run, failed) = simulate_recorded(&rt, &fifo, &scenario, &options, &mut recorder);
    assert!(failed.is_none() && run.unfinished.is_none(), "{failed:?} {:?}", run.unfinished);
    let bytes = std::fs::metadata(&path).unwrap().len();
    eprintln!(
        "recorded: {JOBS} jobs on {NODES} nodes over {:.1} days under FIFO in {:.1} s, mean JCT {:.0} s; {:.0} MB",
        run.makespan_s / 86_400.0,
        started.elapsed().as_secs_f64(),
        run.mean_jct_s,
        bytes as f64 / 1e6
    );

    let mut group = c.benchmark_group("whatif");
    group.sample_size(10);
    group.bench_function("convert", |b| b.iter(|| Recorded::open(&path).unwrap().scenario().unwrap()));
    let (replayed, _) = Recorded::open(&path).unwrap().scenario().unwrap();
    for policy in ["fifo", "tiresias"] {
        let choice = PolicyChoice::resolve(&rt, policy).unwrap();
        group.bench_function(format!("replay/{policy}"), |b| b.iter(|| simulate(&rt, &choice, &replayed, &options)));
    }
    group.finish();
}

criterion_group!(benches, whatif);
criterion_main!(benches);
