//! The crossing cost, as a ratio measured in one run: the same policy logic on the same
//! snapshots, called as a Wasm component (`wasm/<policy>/<jobs>`) and as plain Rust through
//! the SDK's runner (`native/<policy>/<jobs>`).
//!
//! The crossing's copy (`convert/first-tick/<jobs>`, `convert/steady/<jobs>`, and `…/moved`):
//! the host's snapshot made into bindgen's types before every call, copied (`decide_raw`) or
//! moved (`decide`, on the world), against `wasm/…`, the whole call.
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
//!
//! The placing policies at cluster scale (`placing/<policy>/…/<jobs>`): 8-GPU nodes, four
//! running jobs for every five nodes and six queued ones for every five (the smaller anchor,
//! 1,000 jobs on 500 nodes, beside 10,000 jobs on 5,000 nodes). `first-tick` is a fresh
//! instance's full resync; `steady` a tick of a run in which, every 30 s, a hundredth of the
//! running jobs end and as many arrive, the policy's decisions applied to the world between
//! ticks (the ticks are recorded once, natively, and replayed to an instance that saw the ones
//! before). `placing-native/…` is the same logic as plain Rust. The calls run under a deadline
//! raised far above the 50 ms default so that a slow policy is measured rather than cut off;
//! the slowest steady tick of one pass is printed, as the deadline sees it.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use wasmsched::bindings::wit;
use wasmsched::runtime::{Limits, LoadedPolicy, Runtime, RuntimeConfig, current};
use wasmsched::world::{Cursor, JobId, World, sample};
use wasmsched_sdk::Runner;

const TICKS: usize = 16;

/// The first snapshot (a full resync) and `TICKS` steady-state deltas after it.
fn deltas(jobs: usize) -> (wit::Snapshot, Vec<wit::Snapshot>) {
    let mut world: World = sample::with_queue(jobs.div_ceil(50), jobs, jobs / 10, 20);
    let mut cursor = Cursor::fresh();
    let first = world.snapshot_for(&mut cursor);
    let handles: Vec<JobId> = world.jobs().map(|(_, s)| s.handle).collect();
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

/// The crossing's copy (`convert/…`): a snapshot in the host's contract types made into bindgen's,
/// as every call of a current policy does before wasmtime lowers it, on the snapshots the `wasm`
/// group sends (a full resync, and a steady tick).
fn bench_convert(c: &mut Criterion) {
    let mut group = c.benchmark_group("convert");
    for jobs in [10usize, 100, 1000] {
        let (first, ticks) = deltas(jobs);
        for (name, s) in [("first-tick", &first), ("steady", &ticks[0])] {
            group.bench_function(BenchmarkId::new(name, jobs), |b| {
                b.iter(|| black_box(current::snapshot(Cow::Borrowed(s))))
            });
            // As `decide` on the world does: the snapshot, made for the call, moved across (its
            // copy, made outside the timing, is dropped outside it too).
            group.bench_function(BenchmarkId::new(format!("{name}/moved"), jobs), |b| {
                b.iter_batched(|| s.clone(), |s| current::snapshot(Cow::Owned(s)), criterion::BatchSize::SmallInput)
            });
        }
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
    bench_convert(c);
    bench_policy::<policy_fair_share::FairShare>(c, &rt, "fair-share", "{}");
    bench_policy::<policy_flowcon::FlowCon>(c, &rt, "flowcon", "{}");
    bench_policy::<policy_tiresias::Tiresias>(c, &rt, "tiresias", r#"{"interval-s": 0}"#);
    // The policies that plan GPU types and counts, a round on every call.
    bench_policy::<policy_sia::Sia>(c, &rt, "sia", r#"{"interval-s": 0}"#);
    bench_policy::<policy_pollux::Pollux>(c, &rt, "pollux", r#"{"interval-s": 0}"#);
    bench_policy::<policy_gavel::Gavel>(c, &rt, "gavel", r#"{"interval-s": 0}"#);
    bench_policy::<policy_themis::Themis>(c, &rt, "themis", r#"{"interval-s": 0}"#);
    bench_languages(c, &rt);
}

/// Steady ticks recorded per run of the cluster; the first `WARM` (GACER's profiles need three
/// intervals) are replayed untimed after each fresh instance.
const CLUSTER_TICKS: usize = 24;
const WARM: usize = 4;

/// A recorded run of a cluster: its first snapshot (a full resync) and the steady ticks after
/// it, each made after the policy's decision on the one before was applied.
struct ClusterRun {
    first: wit::Snapshot,
    ticks: Vec<wit::Snapshot>,
}

/// Apply a decision to the world as a backend would: placements start, preemptions requeue,
/// shares are set (the host's validation is left out: the policies' tests check it).
fn apply(world: &mut World, decision: &wit::Decision) {
    for action in &decision.actions {
        match &action.kind {
            wit::ActionKind::Place(p) => {
                world.start_job(action.job, p.nodes[0].node, wasmsched::world::GpuSlot::of(&p.nodes));
            }
            wit::ActionKind::Preempt => {
                world.requeue_job(action.job, wit::WaitReason::Preempted);
            }
            wit::ActionKind::SetGpuShare(g) => {
                if let Some(s) = world.state_mut(action.job) {
                    s.gpu_share_percent = Some(g.percent);
                }
            }
            _ => {}
        }
    }
}

/// Record a run of policy `P` on `nodes` 8-GPU nodes with `jobs` jobs, four in ten running.
fn cluster_run<P: wasmsched_sdk::Policy>(config: &str, nodes: usize, jobs: usize) -> ClusterRun {
    let (running, queued) = (jobs * 2 / 5, jobs * 3 / 5);
    let mut world = sample::gpu_cluster(nodes, 8, running, queued);
    let mut cursor = Cursor::fresh();
    let mut runner = Runner::<P>::init(config, None).unwrap();
    let mut decide = |world: &mut World, snapshot: &wit::Snapshot| {
        let raw = runner.decide_raw(to_sdk(snapshot)).unwrap();
        let decision: wit::Decision = serde_json::from_value(serde_json::to_value(raw).unwrap()).unwrap();
        apply(world, &decision);
    };
    let first = world.snapshot_for(&mut cursor);
    decide(&mut world, &first);
    let mut arrivals = running + queued;
    let ticks = (0..CLUSTER_TICKS)
        .map(|tick| {
            world.set_time_ms(world.time_ms() + 30_000);
            world.accrue_service(30_000);
            let ending: Vec<JobId> =
                world.jobs().map(|(_, s)| s.handle).filter(|h| (h.index() + 7 * tick).is_multiple_of(100)).collect();
            for &h in &ending {
                world.remove_job(h);
            }
            for _ in 0..ending.len() {
                let (gpus, replicas) = sample::gpu_ask(arrivals, true);
                let spec = wit::JobSpec { arrival_ms: world.time_ms(), gpus, replicas, ..sample::job_spec(arrivals) };
                world.enqueue_job(spec);
                arrivals += 1;
            }
            let snapshot = world.snapshot_for(&mut cursor);
            decide(&mut world, &snapshot);
            snapshot
        })
        .collect();
    ClusterRun { first, ticks }
}

/// The placing policies at cluster scale; see the crate's docs.
fn bench_placing<P: wasmsched_sdk::Policy>(c: &mut Criterion, rt: &Runtime, name: &str, config: &str) {
    let wasm = wasmsched::shipped::by_name(name).expect("a shipped policy");
    let loaded = rt.load(name, wasm.wasm).expect("the shipped policy loads");
    for (nodes, jobs) in [(500usize, 1_000usize), (5_000, 10_000)] {
        let run = OnceCell::new();
        let run = || run.get_or_init(|| cluster_run::<P>(config, nodes, jobs));
        placing_in_the_sandbox(c, rt, &loaded, (name, config), jobs, &run);
        placing_natively::<P>(c, (name, config), jobs, &run);
    }
}

/// The shipped component deciding on `run`: its first tick, and the steady ticks after.
fn placing_in_the_sandbox<'r>(
    c: &mut Criterion,
    rt: &Runtime,
    loaded: &LoadedPolicy,
    (name, config): (&str, &str),
    jobs: usize,
    run: &dyn Fn() -> &'r ClusterRun,
) {
    let limits =
        Limits { deadline: Duration::from_secs(20), instantiate: Duration::from_secs(20), ..Limits::default() };
    let fresh = || loaded.instantiate(rt, limits, config, None).unwrap();
    let printed = std::cell::Cell::new(false);
    let mut group = c.benchmark_group("placing");
    group.sample_size(10);
    group.bench_function(BenchmarkId::new(format!("{name}/first-tick"), jobs), |b| {
        let first = &run().first;
        // The instance is returned, to be dropped outside the timing.
        b.iter_batched(
            fresh,
            |mut i| {
                let d = i.decide_raw(first).unwrap();
                (i, black_box(d))
            },
            criterion::BatchSize::PerIteration,
        )
    });
    group.bench_function(BenchmarkId::new(format!("{name}/steady"), jobs), |b| {
        let run = run();
        // An instance that has seen the first tick and the warm ones, and the next tick.
        let warm = || {
            let mut instance = fresh();
            instance.decide_raw(&run.first).unwrap();
            for t in &run.ticks[..WARM] {
                instance.decide_raw(t).unwrap();
            }
            (instance, WARM)
        };
        let (mut instance, _) = warm();
        if !printed.replace(true) {
            let mut slowest = Duration::ZERO;
            for t in &run.ticks[WARM..] {
                let started = Instant::now();
                black_box(instance.decide_raw(t).unwrap());
                slowest = slowest.max(started.elapsed());
            }
            eprintln!(
                "placing: {name} at {jobs} jobs, slowest of {} steady ticks: {slowest:.2?}",
                CLUSTER_TICKS - WARM
            );
        }
        let mut next = WARM;
        b.iter_custom(|iters| {
            let mut took = Duration::ZERO;
            for _ in 0..iters {
                if next == CLUSTER_TICKS {
                    (instance, next) = warm();
                }
                let started = Instant::now();
                black_box(instance.decide_raw(&run.ticks[next]).unwrap());
                took += started.elapsed();
                next += 1;
            }
            took
        })
    });
    group.finish();
}

/// The same policy built natively, on the same ticks, for the sandbox's overhead.
fn placing_natively<'r, P: wasmsched_sdk::Policy>(
    c: &mut Criterion,
    (name, config): (&str, &str),
    jobs: usize,
    run: &dyn Fn() -> &'r ClusterRun,
) {
    let mut group = c.benchmark_group("placing-native");
    group.sample_size(10);
    group.bench_function(BenchmarkId::new(format!("{name}/first-tick"), jobs), |b| {
        let first = &run().first;
        b.iter_batched(
            || (Runner::<P>::init(config, None).unwrap(), to_sdk(first)),
            |(mut runner, s)| {
                let d = runner.decide_raw(s).unwrap();
                (runner, black_box(d))
            },
            criterion::BatchSize::PerIteration,
        )
    });
    group.bench_function(BenchmarkId::new(format!("{name}/steady"), jobs), |b| {
        let run = run();
        let ticks: Vec<_> = run.ticks.iter().map(to_sdk).collect();
        let warm = || {
            let mut runner = Runner::<P>::init(config, None).unwrap();
            runner.decide_raw(to_sdk(&run.first)).unwrap();
            for t in &ticks[..WARM] {
                runner.decide_raw(t.clone()).unwrap();
            }
            (runner, WARM)
        };
        let (mut runner, mut next) = warm();
        b.iter_custom(|iters| {
            let mut took = Duration::ZERO;
            for _ in 0..iters {
                if next == CLUSTER_TICKS {
                    (runner, next) = warm();
                }
                let tick = ticks[next].clone();
                let started = Instant::now();
                black_box(runner.decide_raw(tick).unwrap());
                took += started.elapsed();
                next += 1;
            }
            took
        })
    });
    group.finish();
}

fn placing(c: &mut Criterion) {
    let rt = Runtime::new(RuntimeConfig { cache_dir: None, ..RuntimeConfig::default() }).unwrap();
    bench_placing::<policy_fifo::Fifo>(c, &rt, "fifo", "{}");
    bench_placing::<policy_tiresias::Tiresias>(c, &rt, "tiresias", r#"{"interval-s": 0}"#);
    bench_placing::<policy_gacer::Gacer>(c, &rt, "gacer", "{}");
}

criterion_group!(benches, decide, placing);
criterion_main!(benches);
