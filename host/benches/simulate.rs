//! Simulator speed: Pollux workload-1 (160 jobs over 8 hours) with a Wasm policy called every
//! 30 simulated seconds, and the same run's bookkeeping alone. The whole Philly trace is timed
//! once by `wasmsched simulate` (see the README), not here: it is too long to repeat.

use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use wasmsched::runtime::{Runtime, RuntimeConfig};
use wasmsched::sim::run::{PolicyChoice, RunOptions, simulate};
use wasmsched::sim::workload::{LoadOptions, Workload};

fn simulate_workload_1(c: &mut Criterion) {
    let rt = Runtime::new(RuntimeConfig { cache_dir: None, ..RuntimeConfig::default() }).unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/workloads/workload-1.csv");
    let workload = Workload::load(&path, &LoadOptions::default()).unwrap().with_default_targets();
    let choice = PolicyChoice::resolve(&rt, "fair-share").unwrap();
    let options = RunOptions { tick: Duration::from_secs(30), ..RunOptions::default() };
    let mut group = c.benchmark_group("simulate");
    group.sample_size(10);
    group.bench_function("pollux-workload-1/fair-share", |b| b.iter(|| simulate(&rt, &choice, &workload, &options)));
    group.finish();
}

criterion_group!(benches, simulate_workload_1);
criterion_main!(benches);
