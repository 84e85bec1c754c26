//! What the operator's page costs the host, at 1,000 jobs on 500 nodes (the anchor) and at
//! 10,000 jobs on 5,000 8-GPU nodes (four in five running), the journal full (20,000
//! decisions, one shadow):
//!
//! - `page/keep/<jobs>`: the loop's share, every tick whether a page is open or not: the
//!   world handed to the journal and one tick of 200 decisions (and the shadow's) recorded,
//!   with a reason for every queued job;
//! - `page/<view>/<jobs>`: one answer of each view the page reads, built as JSON (what a page
//!   open on that view asks for after each tick, at most twice a second).
//!
//! Each view's size in bytes is printed first: the data a page moves per refresh.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use wasmsched::bindings::wit;
use wasmsched::budget::BudgetConfig;
use wasmsched::control::{Decided, Tick};
use wasmsched::journal::view::{self, DecisionQuery, Paging, QueueQuery};
use wasmsched::journal::{Journal, ShadowSeen};
use wasmsched::runtime::supervise::TickOutcome;
use wasmsched::status::{PolicyStatus, Status};
use wasmsched::world::{World, sample};

/// Decisions a tick records, and ticks recorded before measuring (the journal full).
const PER_TICK: usize = 200;
const TICKS: usize = 100;

/// `n` place actions on the queued jobs of `world`, each on the node after the last.
fn places(world: &World, n: usize, skew: usize) -> Vec<wit::Action> {
    let nodes = world.nodes().len() as u32;
    world
        .queue()
        .take(n)
        .enumerate()
        .map(|(i, (spec, _))| wit::Action {
            job: spec.handle,
            kind: wit::ActionKind::Place(wit::Placement {
                nodes: vec![wit::NodePlacement { node: wit::NodeHandle((i + skew) as u32 % nodes), gpus: vec![0] }],
                share: false,
            }),
            reason: "next in arrival order".into(),
        })
        .collect()
}

fn decided(policy: &str, actions: Vec<wit::Action>, pending: Vec<wit::Pending>) -> Decided {
    Decided {
        policy: Arc::from(policy),
        digest: "ab".repeat(32),
        outcome: TickOutcome { actions, pending, ..TickOutcome::default() },
    }
}

/// A journal after `TICKS` ticks on a world of `jobs` jobs, and the status beside it.
fn full(jobs: usize) -> (Journal, Arc<World>, Status) {
    let world = Arc::new(sample::gpu_cluster(jobs / 2, 8, jobs * 4 / 5, jobs / 5));
    let journal = Journal::new(BudgetConfig::default());
    for tick in 1..=TICKS as u64 {
        record(&journal, &world, tick);
    }
    let mut status = Status { ticks: TICKS as u64, running: true, ..Status::default() };
    status.policies = vec![PolicyStatus::new("fifo", wasmsched::config::Role::Active)];
    (journal, world, status)
}

fn record(journal: &Journal, world: &Arc<World>, tick: u64) {
    journal.observed(world.clone(), &[]);
    // A reason for every queued job, as a policy that explains its whole queue gives.
    let pending = world
        .queue()
        .map(|(spec, _)| wit::Pending { job: spec.handle, reason: format!("behind {} others", spec.handle.0) })
        .collect();
    let active = decided("fifo", places(world, PER_TICK, 0), pending);
    let shadow = decided("tiresias", places(world, PER_TICK, tick as usize % 3), Vec::new());
    let t = Tick {
        number: tick,
        world,
        asked: true,
        active: Some(active),
        shadows: vec![shadow],
        arms: Vec::new(),
        apply_errors: Vec::new(),
        disruptions: 0,
        budget_spent: 0,
        rescued: Vec::new(),
        benched: None,
        benched_now: false,
    };
    // The shadow told apart from the active policy on every tick: its differences in words.
    journal.record(&t, |_| 1, &[ShadowSeen::default()]);
}

/// One view, built.
type View<'a> = Box<dyn Fn() -> serde_json::Value + 'a>;

fn page(c: &mut Criterion) {
    let mut group = c.benchmark_group("page");
    for jobs in [1_000, 10_000] {
        let (journal, world, status) = full(jobs);
        let queued = world.queue().next().map(|(s, _)| s.handle.0).unwrap_or(0);
        let views: Vec<(&str, View)> = vec![
            ("overview", Box::new(|| view::overview(&status, &journal, &Paging::default(), true))),
            ("queue", Box::new(|| view::queue(&status, &journal, &QueueQuery::default()))),
            ("tenants", Box::new(|| view::tenants(&status, &journal))),
            ("decisions", Box::new(|| view::decisions(&journal, &DecisionQuery::default()))),
            (
                "decisions-of-a-job",
                Box::new(|| {
                    view::decisions(
                        &journal,
                        &DecisionQuery { job: Some(queued.to_string()), ..DecisionQuery::default() },
                    )
                }),
            ),
            ("shadows", Box::new(|| view::shadows(&status, &journal))),
            ("job", Box::new(|| view::job(&journal, queued).unwrap_or_default())),
        ];
        for (name, view) in &views {
            let bytes = serde_json::to_vec(&view()).unwrap().len();
            println!("page: {name} at {jobs} jobs on {} nodes: {bytes} bytes", jobs / 2);
            group.bench_with_input(BenchmarkId::new(*name, jobs), &jobs, |b, _| {
                b.iter(|| black_box(serde_json::to_vec(&view()).unwrap()))
            });
        }
        let mut tick = TICKS as u64;
        group.bench_with_input(BenchmarkId::new("keep", jobs), &jobs, |b, _| {
            b.iter(|| {
                tick += 1;
                record(&journal, &world, tick)
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(4));
    targets = page
}
criterion_main!(benches);
