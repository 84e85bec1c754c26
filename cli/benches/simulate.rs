//! Simulator speed, measured in one run so the ratios hold on a noisy machine:
//! - `pollux-workload-1/fair-share`: Pollux workload-1 (160 jobs over 8 hours) with the Wasm
//!   fair-share policy called every 30 simulated seconds, through the one loop;
//! - `pollux-workload-1/tiresias`: the same workload with the Wasm Tiresias policy placing
//!   and preempting every job on 64 GPUs (measured step times), the run `wasmsched fidelity`
//!   sets beside Pollux's simulator (whose run of it took 34 s);
//! - `pollux-workload-1/simulator-only`: the same workload observed every 30 s with no policy,
//!   i.e. the simulator's own bookkeeping;
//! - `philly/fair-share`: the whole Philly trace (82,247 jobs), when `../shared/data` has it;
//! - `sweep/flowcon-4x4/threads-N`: `wasmsched sweep` of FlowCon's α and Δ (16 points, 2
//!   seeds, 34 runs) on its paper scenario, one run at a time against N at once.

use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use wasmsched::backend::Backend;
use wasmsched::experiment::paper::Figure;
use wasmsched::experiment::run::{PolicyChoice, RunOptions, simulate};
use wasmsched::experiment::sweep::{self, Spec};
use wasmsched::runtime::{Limits, Runtime, RuntimeConfig};
use wasmsched::scenario::{LoadOptions, Scenario};
use wasmsched::sim::{SimConfig, Simulator};
use wasmsched::world::World;

const TICK: Duration = Duration::from_secs(30);

fn load(path: &Path) -> Scenario {
    Scenario::load(path, &LoadOptions::default()).unwrap().with_default_targets()
}

fn simulator_only(scenario: &Scenario) -> u64 {
    let mut sim = Simulator::new(&scenario.workload, SimConfig::default());
    let mut world = World::new();
    let mut until = 0;
    while sim.observe(&mut world, until + TICK.as_millis() as u64) {
        until += TICK.as_millis() as u64;
    }
    until
}

fn speed(c: &mut Criterion) {
    let rt = Runtime::new(RuntimeConfig { cache_dir: None, ..RuntimeConfig::default() }).unwrap();
    let choice = PolicyChoice::resolve(&rt, "fair-share").unwrap();
    let options = RunOptions { tick: TICK, ..RunOptions::default() };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");

    let mut group = c.benchmark_group("simulate");
    group.sample_size(10);
    let pollux = load(&root.join("data/workloads/workload-1.csv"));
    group.bench_function("pollux-workload-1/fair-share", |b| b.iter(|| simulate(&rt, &choice, &pollux, &options)));
    let tiresias = PolicyChoice::resolve(&rt, "tiresias").unwrap();
    group.bench_function("pollux-workload-1/tiresias", |b| b.iter(|| simulate(&rt, &tiresias, &pollux, &options)));
    group.bench_function("pollux-workload-1/simulator-only", |b| b.iter(|| simulator_only(&pollux)));

    let philly = root.join("../shared/data/philly_jobs_pollux.csv");
    if philly.is_file() {
        let trace = load(&philly);
        group.measurement_time(Duration::from_secs(60));
        group.bench_function("philly/fair-share", |b| b.iter(|| simulate(&rt, &choice, &trace, &options)));
    } else {
        eprintln!(
            "SKIPPED philly/fair-share: {} is absent (the trace is not copied into this repository)",
            philly.display()
        );
    }
    group.finish();
}

fn sweep(c: &mut Criterion) {
    let rt = Runtime::new(RuntimeConfig { cache_dir: None, ..RuntimeConfig::default() }).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let workload = load(&root.join("scenarios/flowcon-paper.toml"));
    let flowcon = PolicyChoice::resolve(&rt, "flowcon").unwrap();
    let fair = PolicyChoice::resolve(&rt, "fair-share").unwrap();
    let mut group = c.benchmark_group("sweep");
    group.sample_size(10);
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    for threads in [1, cores] {
        let spec = Spec {
            policy: &flowcon,
            baseline: &fair,
            figure: Figure::BestJobJct,
            paper: None,
            fixed: Default::default(),
            axes: vec!["alpha=0.001,0.01,0.03,0.1".parse().unwrap(), "interval-s=30:120:30".parse().unwrap()],
            seeds: 0..2,
            tick: TICK,
            limits: Limits::default(),
            threads,
        };
        group.bench_function(format!("flowcon-4x4/threads-{threads}"), |b| {
            b.iter(|| sweep::sweep(&rt, &workload, &spec, &|_| {}))
        });
    }
    group.finish();
}

criterion_group!(benches, speed, sweep);
criterion_main!(benches);
