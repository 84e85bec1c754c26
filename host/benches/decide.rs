//! The crossing cost, as a ratio measured in one run: the same policy logic on the same
//! snapshots, called as a Wasm component (`wasm/<policy>/<jobs>`) and as plain Rust through
//! the SDK's runner (`native/<policy>/<jobs>`).
//!
//! The cost of a language (`language/…`): the same policies written in Rust, Python
//! (componentize-py) and JavaScript (componentize-qjs), each as a component: making an
//! instance and its `init` (`language/instantiate/<policy>`), the first tick with every job
//! (`language/first-tick/<policy>/<jobs>`), and a steady-state tick
//! (`language/decide/<policy>/<jobs>`); their sizes are printed first. A policy whose
//! toolchain was not installed is left out, with a line that says so.
//!
//! Each benchmark replays a sequence of per-tick deltas as the host sends them in steady
//! state: every job's numbers, a queue a tenth as long as the job list (half of it asking for
//! a GPU), and a new progress record from a quarter of the jobs.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use wasmsched::bindings::wit;
use wasmsched::runtime::{Limits, Runtime, RuntimeConfig};
use wasmsched::world::{Cursor, World, sample};
use wasmsched_sdk::Runner;

const TICKS: usize = 16;

/// The first snapshot (a full resync) and `TICKS` steady-state deltas after it.
fn deltas(jobs: usize) -> (wit::Snapshot, Vec<wit::Snapshot>) {
    let mut world: World = sample::with_queue(jobs.div_ceil(50), jobs, jobs / 10, 20);
    let mut cursor = Cursor::fresh();
    let first = world.snapshot_for(&mut cursor);
    let handles: Vec<u32> = world.jobs().map(|(_, s)| s.handle).collect();
    let ticks = (0..TICKS)
        .map(|tick| {
            world.set_time_ms(world.time_ms() + 30_000);
            for (i, &h) in handles.iter().enumerate() {
                world.state_mut(h).unwrap().cpu_used_millicores = 400 + ((i + tick) as u64 * 53) % 1600;
                if (i + tick) % 4 == 0 {
                    world.record(h, 21 + tick as u32, vec![0.5 + 0.01 * tick as f64]);
                }
            }
            world.snapshot_for(&mut cursor)
        })
        .collect();
    (first, ticks)
}

/// The steady-state deltas in turn, each stamped 30 s after the one before.
struct Steady {
    ticks: Vec<wit::Snapshot>,
    time_ms: u64,
    next: usize,
}

impl Steady {
    fn new(first: &wit::Snapshot, ticks: Vec<wit::Snapshot>) -> Steady {
        Steady { ticks, time_ms: first.time_ms, next: 0 }
    }

    fn tick(&mut self) -> &wit::Snapshot {
        self.time_ms += 30_000;
        let s = &mut self.ticks[self.next % TICKS];
        s.time_ms = self.time_ms;
        self.next += 1;
        s
    }
}

/// The same snapshot in the SDK's generated types.
fn to_sdk(s: &wit::Snapshot) -> wasmsched_sdk::bindings::wasmsched::policy::types::Snapshot {
    serde_json::from_value(serde_json::to_value(s).unwrap()).unwrap()
}

/// `config` is the policy's config as JSON (Tiresias runs a round on every call).
fn bench_policy<P: wasmsched_sdk::Policy>(c: &mut Criterion, rt: &Runtime, name: &str, config: &str) {
    let wasm = wasmsched::shipped::by_name(name).expect("a shipped policy");
    let loaded = rt.load(name, wasm.wasm).expect("the shipped policy loads");
    for jobs in [10usize, 100, 1000] {
        let (first, ticks) = deltas(jobs);
        let sdk_ticks: Vec<_> = ticks.iter().map(to_sdk).collect();

        let mut instance = loaded.instantiate(rt, Limits::default(), config, None).unwrap();
        instance.decide_raw(&first).unwrap();
        let mut steady = Steady::new(&first, ticks);
        c.benchmark_group("wasm").bench_function(BenchmarkId::new(name, jobs), |b| {
            b.iter(|| black_box(instance.decide_raw(steady.tick()).unwrap()))
        });

        let mut runner = Runner::<P>::init(config, None).unwrap();
        runner.decide_raw(to_sdk(&first)).unwrap();
        let mut time = first.time_ms;
        let mut i = 0;
        c.benchmark_group("native").bench_function(BenchmarkId::new(name, jobs), |b| {
            b.iter(|| {
                time += 30_000;
                let mut s = sdk_ticks[i % TICKS].clone();
                s.time_ms = time;
                i += 1;
                black_box(runner.decide_raw(s).unwrap())
            })
        });
    }
}

/// The languages' costs, on the same snapshots: fair-share and FlowCon in each language built.
fn bench_languages(c: &mut Criterion, rt: &Runtime) {
    let mut policies: Vec<(&str, Vec<u8>)> = Vec::new();
    for name in ["fair-share", "fair-share-py", "fair-share-js", "flowcon", "flowcon-py"] {
        let bytes = match wasmsched::shipped::by_name(name) {
            Some(shipped) => Ok(shipped.wasm.to_vec()),
            None => {
                wasmsched_test_artifacts::foreign(name).map(|f| std::fs::read(f.path).expect("the built component"))
            }
        };
        match bytes {
            Ok(bytes) => {
                eprintln!("language: {name} is {:.2} MB", bytes.len() as f64 / 1e6);
                policies.push((name, bytes));
            }
            Err(why) => eprintln!("language: left out: {why}"),
        }
    }
    let mut group = c.benchmark_group("language");
    group.sample_size(20);
    // Room to measure the tail: a deadline and a memory cap well above the defaults (with
    // 1,000 jobs' full histories a JavaScript instance needs more than 64 MiB).
    let limits = Limits { deadline: std::time::Duration::from_secs(2), memory_bytes: 512 << 20, ..Limits::default() };
    for (name, bytes) in &policies {
        let loaded = rt.load(name, bytes).expect("the component loads");
        group.bench_function(BenchmarkId::new("instantiate", name), |b| {
            b.iter(|| black_box(loaded.instantiate(rt, limits, "{}", None).unwrap()))
        });
        for jobs in [100usize, 1000] {
            let (first, ticks) = deltas(jobs);
            group.bench_function(BenchmarkId::new(format!("first-tick/{name}"), jobs), |b| {
                b.iter_batched(
                    || loaded.instantiate(rt, limits, "{}", None).unwrap(),
                    |mut instance| black_box(instance.decide_raw(&first).unwrap()),
                    criterion::BatchSize::PerIteration,
                )
            });
            let mut instance = loaded.instantiate(rt, limits, "{}", None).unwrap();
            instance.decide_raw(&first).unwrap();
            let mut steady = Steady::new(&first, ticks);
            group.bench_function(BenchmarkId::new(format!("decide/{name}"), jobs), |b| {
                b.iter(|| black_box(instance.decide_raw(steady.tick()).unwrap()))
            });
            // The tail, which a deadline meets and a mean hides (a garbage collector's pause).
            let mut took: Vec<f64> = (0..200)
                .map(|_| {
                    let s = steady.tick();
                    let started = std::time::Instant::now();
                    black_box(instance.decide_raw(s).unwrap());
                    started.elapsed().as_secs_f64() * 1e3
                })
                .collect();
            took.sort_by(f64::total_cmp);
            eprintln!("language: {name} at {jobs} jobs, 200 ticks: p99 {:.2} ms, max {:.2} ms", took[197], took[199]);
        }
    }
}

fn decide(c: &mut Criterion) {
    let rt = Runtime::new(RuntimeConfig { cache_dir: None, ..RuntimeConfig::default() }).unwrap();
    bench_policy::<policy_fair_share::FairShare>(c, &rt, "fair-share", "{}");
    bench_policy::<policy_flowcon::FlowCon>(c, &rt, "flowcon", "{}");
    bench_policy::<policy_tiresias::Tiresias>(c, &rt, "tiresias", r#"{"interval-s": 0}"#);
    bench_languages(c, &rt);
}

criterion_group!(benches, decide);
criterion_main!(benches);
