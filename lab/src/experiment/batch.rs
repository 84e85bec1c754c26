//! One batch runner for every experiment: a list of simulated runs (a scenario, a policy, the
//! run's options) run several at a time, the reports in the list's order. `simulate`,
//! `compare`, `demo`, `sweep` and `fidelity` all go through it; each run is deterministic and
//! apart from the others, so how many run at once changes the wall time, never a figure.

use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use wasmsched_runtime::{Limits, Runtime};
use wasmsched_sim::SimConfig;

use super::run::{Comparison, PolicyChoice, RunOptions, RunReport, simulate_watched};
use crate::scenario::Scenario;

/// One run of a batch.
#[derive(Clone, Debug)]
pub struct Task<'a> {
    /// What it runs on.
    pub scenario: &'a Scenario,
    /// The policy, with its config.
    pub choice: PolicyChoice,
    /// Seed, tick, limits, timeline.
    pub options: RunOptions,
}

/// Every policy on every seed of one scenario, in (policy, seed) order: what `simulate`,
/// `compare` and each of the demo's scenarios run. `timeline` keeps each policy's first run's
/// use over time, for the report.
pub fn grid<'a>(
    scenario: &'a Scenario,
    choices: &[PolicyChoice],
    seeds: Range<u64>,
    tick: Duration,
    limits: Limits,
    timeline: bool,
) -> Vec<Task<'a>> {
    let task = |choice: &PolicyChoice, seed| Task {
        scenario,
        choice: choice.clone(),
        options: RunOptions {
            sim: SimConfig { seed, perturb: scenario.perturb, ..SimConfig::default() },
            tick,
            limits,
            timeline: timeline && seed == seeds.start,
        },
    };
    choices.iter().flat_map(|c| seeds.clone().map(move |seed| task(c, seed))).collect()
}

/// The reports of a [`grid`] on `scenario`, as one comparison.
pub fn comparison(scenario: &Scenario, runs: Vec<RunReport>) -> Comparison {
    Comparison { workload: scenario.name().to_string(), runs }
}

/// How many runs go at once by default: one per core.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// How many jobs the runs of `tasks` hold in all: what [`run`]'s progress counts up to.
pub fn jobs_in(tasks: &[Task<'_>]) -> u64 {
    tasks.iter().map(|t| t.scenario.workload.jobs.len() as u64).sum()
}

/// Run `tasks`, `threads` at a time; the reports come back in the tasks' order. `progress`
/// hears, now and then, how many jobs have ended so far over all the runs (up to
/// [`jobs_in`]).
pub fn run(rt: &Runtime, tasks: &[Task<'_>], threads: usize, progress: &(dyn Fn(u64) + Sync)) -> Vec<RunReport> {
    let ended = AtomicU64::new(0);
    each(tasks, threads, |task| {
        let mut mine = 0u64;
        let mut count = |now: u64| {
            if now > mine {
                progress(ended.fetch_add(now - mine, Ordering::Relaxed) + now - mine);
                mine = now;
            }
        };
        let report = simulate_watched(rt, &task.choice, task.scenario, &task.options, |world| {
            count(u64::from(world.jobs_seen()) - world.all_jobs().len() as u64);
        });
        count(task.scenario.workload.jobs.len() as u64);
        report
    })
}

/// `f` of every item, `threads` at a time (each thread takes the next item left), the results
/// in the items' order.
pub fn each<T: Sync, R: Send>(items: &[T], threads: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let out: Mutex<Vec<Option<R>>> = Mutex::new(items.iter().map(|_| None).collect());
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, items.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = f(item);
                    out.lock().expect("no run panics while holding it")[i] = Some(r);
                }
            });
        }
    });
    out.into_inner().expect("every run ended").into_iter().map(|r| r.expect("every item ran")).collect()
}
