//! What a live experiment costs the loop each tick, at 1,000 jobs on 500 8-GPU nodes (the
//! anchor) and at 10,000 jobs on 5,000 (four in five running, a queue of the rest), with four
//! tenants:
//!
//! - `experiment/view/<jobs>`: one arm's view of a split (`ExperimentConfig::view`: every
//!   running job, its own queue), made for each arm on every tick; with `pooled` the other
//!   arm's half of the nodes set down as well;
//! - `experiment/observe-split/<jobs>`, `…/observe-pooled/<jobs>` (the split with pools) and
//!   `…/observe-switchback/<jobs>`: the ledger counting one observation (jobs in the system,
//!   queued, GPUs held, each tenant's fair share while contended);
//! - `experiment/versus/<jobs>`: every arm's figures against the baseline with their intervals
//!   over 48 blocks (what the host computes at each block's start);
//! - `experiment/clone/<jobs>`: the world cloned whole, the anchor a view is read against.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use wasmsched::bindings::wit;
use wasmsched::experiment_design::{Assign, ExperimentConfig, Ledger};
use wasmsched::world::{World, sample};

/// Four tenants of equal weight; the sample's jobs spread over them.
fn world(jobs: usize) -> World {
    let mut world = sample::gpu_cluster(jobs / 2, 8, jobs * 4 / 5, jobs / 5);
    let tenants: Vec<wit::Tenant> = (0..4)
        .map(|t| wit::Tenant {
            name: format!("t{t}"),
            weight: 1.0,
            quota_gpus: None,
            borrowing_limit_gpus: None,
            cohort: String::new(),
        })
        .collect();
    world.set_tenants(tenants);
    world
}

fn config(design_split: bool, pools: Option<&World>) -> ExperimentConfig {
    let arms = vec!["fifo".to_string(), "tiresias".to_string()];
    let (block, burn_in) = (Duration::from_secs(1800), Duration::from_secs(60));
    let mut c = match design_split {
        true => ExperimentConfig::split(arms, Assign::Name, block, burn_in, 0),
        false => ExperimentConfig::switchback(arms, block, burn_in, 0),
    };
    if let Some(world) = pools {
        let names: Vec<String> = world.nodes().iter().map(|n| n.name.clone()).collect();
        let half = names.len() / 2;
        c.pools = vec![names[..half].to_vec(), names[half..].to_vec()];
    }
    c
}

/// A ledger that has seen `blocks` blocks of `world`, observed every 30 s.
fn ledger(config: ExperimentConfig, world: &mut World, blocks: u64) -> Ledger {
    let mut ledger = Ledger::new(config);
    let start = world.time_ms();
    for step in 0..=(blocks * 60) {
        world.set_time_ms(start + step * 30_000);
        ledger.observe(world);
        ledger.decide_at(world.time_ms());
    }
    ledger
}

fn experiment(c: &mut Criterion) {
    let mut group = c.benchmark_group("experiment");
    for jobs in [1_000, 10_000] {
        let mut world = world(jobs);
        let split = config(true, None);
        let pooled = config(true, Some(&world));
        group.bench_with_input(BenchmarkId::new("clone", jobs), &jobs, |b, _| b.iter(|| black_box(world.clone())));
        group.bench_with_input(BenchmarkId::new("view", jobs), &jobs, |b, _| {
            b.iter(|| black_box(split.view(&world, 1)))
        });
        group.bench_with_input(BenchmarkId::new("view-pooled", jobs), &jobs, |b, _| {
            b.iter(|| black_box(pooled.view(&world, 1)))
        });
        let observed = [
            ("observe-split", config(true, None)),
            ("observe-pooled", pooled.clone()),
            ("observe-switchback", config(false, None)),
        ];
        for (name, c) in observed {
            let mut l = ledger(c, &mut world, 1);
            let mut now = world.time_ms();
            group.bench_with_input(BenchmarkId::new(name, jobs), &jobs, |b, _| {
                b.iter(|| {
                    now += 30_000;
                    world.set_time_ms(now);
                    l.observe(&world);
                    l.decide_at(now);
                })
            });
        }
        let l = ledger(config(true, None), &mut world, 48);
        group.bench_with_input(BenchmarkId::new("versus", jobs), &jobs, |b, _| b.iter(|| black_box(l.versus())));
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(3));
    targets = experiment
}
criterion_main!(benches);
