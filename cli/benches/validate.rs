//! The host's cost per decision under the worst decisions we can write, so that no decision a
//! policy returns within its memory cap costs the host more than a bounded amount.
//!
//! - `check/<case>/<jobs>`: the validation alone (`validate::check`, and dropping what it
//!   consumed) of a hostile decision on a
//!   world of `jobs` running jobs over 20 nodes (a tenth as many queued): a million node
//!   entries in one placement (refused whole by counting), a placement of every queued job over
//!   every node and GPU, the most actions a decision may hold as migrations (each reads the
//!   memory of its target node), and as CPU caps.
//! - `tick/<behaviour>`: a whole supervised tick of the `misbehave` fixture on the GPU queue's
//!   two nodes of four GPUs with jobs queued: the call, lifting its decision out of the
//!   component, and validating it. `huge-placement` returns a million node entries;
//!   `pile-on` the ordinary case beside it.

use std::hint::black_box;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use wasmsched::bindings::wit::{self, ActionKind};
use wasmsched::runtime::supervise::{Fallback, Quarantine, Supervised};
use wasmsched::runtime::{Limits, Runtime, RuntimeConfig};
use wasmsched::validate::{self, max_actions};
use wasmsched::world::{JobId, NodeId, World, sample};

/// The nodes of the validation benchmarks.
const NODES: usize = 20;

fn action(job: JobId, kind: ActionKind) -> wit::Action {
    wit::Action { job, kind, reason: "worst case".into() }
}

fn decision(actions: Vec<wit::Action>) -> wit::Decision {
    wit::Decision { actions, next_call_ms: None, pending: Vec::new() }
}

/// A world of `jobs` running jobs over [`NODES`] nodes of eight GPUs, and a tenth as many
/// queued.
fn world(jobs: usize) -> World {
    let mut w = sample::with_queue(NODES, jobs, jobs / 10, 2);
    for n in 0..NODES {
        let wider = wit::Node { gpu_memory_bytes: vec![80 << 30; 8], ..w.nodes()[n].clone() };
        w.set_node(NodeId(n as u32), wider);
    }
    w
}

/// The hostile decisions on `w`.
fn cases(w: &World) -> Vec<(&'static str, wit::Decision)> {
    let running: Vec<JobId> = w.jobs().map(|(s, _)| s.handle).collect();
    let queued: Vec<JobId> = w.queue().map(|(s, _)| s.handle).collect();
    let every_gpu = |n: u32| wit::NodePlacement { node: NodeId(n), gpus: (0..8).collect() };
    let limit = max_actions(running.len() + queued.len());
    let million = wit::Placement { nodes: (0..1_000_000).map(|n| every_gpu(n % NODES as u32)).collect(), share: false };
    let everywhere = wit::Placement { nodes: (0..NODES as u32).map(every_gpu).collect(), share: true };
    vec![
        ("million-entries", decision(vec![action(queued[0], ActionKind::Place(million))])),
        (
            "every-queued-job-everywhere",
            decision(queued.iter().map(|&j| action(j, ActionKind::Place(everywhere.clone()))).collect()),
        ),
        (
            "most-actions-as-migrations",
            decision(
                (0..limit)
                    .map(|i| action(running[i % running.len()], ActionKind::Migrate(NodeId(((i + 1) % NODES) as u32))))
                    .collect(),
            ),
        ),
        (
            "most-actions-as-cpu-caps",
            decision((0..limit).map(|i| action(running[i % running.len()], ActionKind::SetCpu(Some(1000)))).collect()),
        ),
    ]
}

fn check(c: &mut Criterion) {
    let mut group = c.benchmark_group("check");
    group.sample_size(10);
    for jobs in [100, 1000] {
        let w = world(jobs);
        for (name, d) in cases(&w) {
            let verdict = validate::check(d.clone(), &w);
            let outcome = match &verdict {
                Ok(c) => format!("{} accepted, {} rejected", c.accepted.len(), c.rejected.len()),
                Err(e) => format!("refused whole: {e}"),
            };
            println!("check/{name}/{jobs}: {outcome}");
            // The copy is made outside the timing; dropping what the check consumed is inside.
            group.bench_with_input(BenchmarkId::new(name, jobs), &d, |b, d| {
                b.iter_batched(|| d.clone(), |d| black_box(validate::check(d, &w)), BatchSize::LargeInput);
            });
        }
    }
    group.finish();
}

fn tick(c: &mut Criterion) {
    let rt = Runtime::new(RuntimeConfig::default()).expect("the engine starts");
    let bytes = std::fs::read(wasmsched_test_artifacts::path("misbehave")).expect("the fixture is built");
    let policy = rt.load("misbehave", &bytes).expect("the fixture loads");
    // Two nodes of four GPUs, four jobs running, four queued (one or two GPUs each).
    let mut w = sample::with_queue(2, 4, 4, 2);
    for n in 0..2 {
        let wider = wit::Node { gpu_memory_bytes: vec![32 << 30; 4], ..w.nodes()[n].clone() };
        w.set_node(NodeId(n as u32), wider);
    }
    let mut group = c.benchmark_group("tick");
    group.sample_size(10);
    for behaviour in ["pile-on", "huge-placement"] {
        // A generous deadline: what is measured is the host's side, not the fixture's budget.
        let limits = Limits { deadline: std::time::Duration::from_secs(10), ..Limits::default() };
        let config = format!(r#"{{"behaviour": "{behaviour}"}}"#);
        let mut sup = Supervised::new(policy.clone(), config, limits, Fallback::KeepLimits, Quarantine::default());
        let first = sup.tick(&rt, &w);
        let failure = first.failure.as_ref().map(|f| wasmsched::error_chain(f));
        println!("tick/{behaviour}: {} actions, failure: {failure:?}", first.actions.len());
        group.bench_function(behaviour, |b| {
            b.iter(|| {
                // A fresh supervisor each time: quarantine is not what is measured.
                sup = Supervised::new(
                    policy.clone(),
                    format!(r#"{{"behaviour": "{behaviour}"}}"#),
                    limits,
                    Fallback::KeepLimits,
                    Quarantine::default(),
                );
                black_box(sup.tick(&rt, &w))
            });
        });
    }
    group.finish();
}

criterion_group!(benches, check, tick);
criterion_main!(benches);
