//! The policy fuzzer: the `fuzz` fixture, whose every decision is drawn from a seed (actions of
//! every kind, valid and not, on jobs, nodes and GPUs that exist and that do not; decisions from
//! empty to huge; failures, panics, hangs and memory past the cap on some calls; log bursts),
//! through what `simulate` runs, on every scenario in `scenarios/`, on Pollux's workload CSV
//! (as it ships, and as Sia's elastic jobs on Sia's heterogeneous cluster) and on the Philly
//! trace. Every run must end on its own within [`wall_bound`], with every job ended, by
//! [`virtual_bound`] of simulated time, and with the host's log within [`LOG_PER_TICK`] on any
//! tick and [`LOG_PER_RUN`] a minute. A failing run names its workload and seed, to replay:
//!
//! ```sh
//! WASMSCHED_FUZZ_SEEDS=1 WASMSCHED_FUZZ_FIRST_SEED=SEED cargo test --test integration fuzz -- --nocapture
//! ```
//!
//! CI runs [`DEFAULT_SEEDS`] seeds on each workload; a night's run is documented in
//! `docs/run.md` (the same test in a release build, with many more seeds).

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use wasmsched::experiment::run::{PolicyChoice, RunOptions, RunReport, simulate, simulate_watched};
use wasmsched::scenario::{Cluster, GpuJobs, LoadOptions, Scenario};

use wasmsched_tests::common::{counted_log, loaded, repo, runtime};

/// Seeds per workload in CI; `WASMSCHED_FUZZ_SEEDS` asks for more.
const DEFAULT_SEEDS: u64 = 12;

/// The longest one run may take, wall-clock, in the test's debug build, ticking every `tick`
/// for at most `simulated_s`: a policy may use its whole deadline on every call (50 ms), and
/// the host's own work on a tick is bounded (10 ms in a debug build, with room), plus a minute
/// for the rest. A run that takes longer is taken to hang.
fn wall_bound(simulated_s: f64, tick: Duration) -> Duration {
    let ticks = (simulated_s / tick.as_secs_f64()).ceil() as u32;
    Duration::from_secs(60) + (RunOptions::default().limits.deadline + Duration::from_millis(10)) * ticks
}

/// The most the host may log on one tick: a minute's policy log budget (8 KiB of messages,
/// 60 lines, with the log's own prefix on each), the held-back summaries, and one line of each
/// kind of warning the host says about a policy.
const LOG_PER_TICK: usize = 32 << 10;

/// The most the host may log in one run, per started minute of its wall time: the same.
const LOG_PER_RUN: usize = 48 << 10;

/// The longest a run may take in simulated time: what the baseline takes, three times, and six
/// hours more. A policy may stop jobs, restart them, hold them to a small share until it is
/// benched, or place them sharing GPUs (which they keep); it may not keep them from ending.
fn virtual_bound(baseline_s: f64) -> f64 {
    3.0 * baseline_s + 6.0 * 3600.0
}

/// The Philly trace beside the repository, where this machine has it.
fn philly() -> Option<PathBuf> {
    let path = repo().join("../shared/data/philly_jobs_pollux.csv");
    path.exists().then_some(path)
}

/// A workload the fuzzer runs on: its name, as `simulate` loads it (default targets on), and the
/// tick it runs at.
struct Workload {
    name: String,
    scenario: Scenario,
    tick: Duration,
}

/// The tick `simulate` runs at.
const TICK: Duration = Duration::from_secs(30);

/// The Philly trace's tick: its first jobs span 40 days (a job runs for weeks), 115,000 ticks
/// of 30 s, too many for a debug build's minute.
const PHILLY_TICK: Duration = Duration::from_secs(600);

/// Every workload the fuzzer runs on.
fn workloads() -> Vec<Workload> {
    let load = |path: &Path, opts: LoadOptions| {
        Scenario::load(path, &opts).unwrap_or_else(|e| panic!("{}: {e}", path.display())).with_default_targets()
    };
    let mut found: Vec<PathBuf> = std::fs::read_dir(repo().join("scenarios"))
        .expect("scenarios/ lists")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    found.sort();
    assert!(found.len() >= 11, "every shipped scenario: {found:?}");
    let at = |name: &str, scenario, tick| Workload { name: name.into(), scenario, tick };
    let mut all: Vec<Workload> = found
        .iter()
        .map(|p| at(&p.file_stem().unwrap().to_string_lossy(), load(p, LoadOptions::default()), TICK))
        .collect();
    let pollux = repo().join("data/workloads/workload-1.csv");
    let first = LoadOptions { limit: Some(60), ..LoadOptions::default() };
    all.push(at("pollux workload-1", load(&pollux, first), TICK));
    let elastic = LoadOptions {
        limit: Some(60),
        cluster: Some(Cluster::Heterogeneous64),
        jobs: GpuJobs::Elastic,
        ..LoadOptions::default()
    };
    all.push(at("pollux workload-1, elastic on heterogeneous-64", load(&pollux, elastic), TICK));
    match philly() {
        Some(path) => all.push(at("philly", load(&path, first), PHILLY_TICK)),
        None => println!("SKIPPED: the Philly trace (../shared/data/philly_jobs_pollux.csv) is not on this machine"),
    }
    all
}

/// The seeds to run: `WASMSCHED_FUZZ_FIRST_SEED` on, `WASMSCHED_FUZZ_SEEDS` of them.
fn seeds() -> std::ops::Range<u64> {
    let var = |name: &str, default: u64| {
        std::env::var(name).ok().map_or(default, |v| v.parse().unwrap_or_else(|_| panic!("{name}={v}: give a number")))
    };
    let first = var("WASMSCHED_FUZZ_FIRST_SEED", 0);
    first..first + var("WASMSCHED_FUZZ_SEEDS", DEFAULT_SEEDS)
}

/// What one fuzzed run did.
struct Fuzzed {
    report: RunReport,
    wall: Duration,
    /// The most the host logged on one tick, and in all.
    log_tick: usize,
    log_run: usize,
}

/// The fuzz fixture with `seed` on `scenario`, the simulator seeded alike, in a thread of its
/// own: None when it did not end within `wall`.
fn fuzz(scenario: &Scenario, tick: Duration, seed: u64, wall: Duration) -> Option<Fuzzed> {
    let (tx, rx) = mpsc::channel();
    let scenario = scenario.clone();
    std::thread::spawn(move || {
        let choice = PolicyChoice {
            label: format!("fuzz seed {seed}"),
            policy: loaded("fuzz"),
            config_json: format!(r#"{{"seed": {seed}}}"#),
        };
        let mut options = RunOptions { tick, ..RunOptions::default() };
        options.sim.seed = seed;
        let (log, bytes) = counted_log();
        let (mut last, mut most) = (0, 0);
        let started = Instant::now();
        let report = tracing::dispatcher::with_default(&log, || {
            simulate_watched(runtime(), &choice, &scenario, &options, |_| {
                let now = bytes.load(Ordering::Relaxed);
                most = most.max(now - last);
                last = now;
            })
        });
        let total = bytes.load(Ordering::Relaxed);
        let _ = tx.send(Fuzzed { report, wall: started.elapsed(), log_tick: most.max(total - last), log_run: total });
    });
    rx.recv_timeout(wall).ok()
}

/// One workload's line of the table.
#[derive(Default)]
struct Line {
    runs: usize,
    /// Benchings by the rule that benched: failing, starving the queue, no progress, churn.
    benched: [usize; 4],
    longest_wall: Duration,
    longest_virtual_s: f64,
    log_tick: usize,
    log_run: usize,
}

impl Line {
    fn add(&mut self, f: &Fuzzed) {
        self.runs += 1;
        if let Some(why) = &f.report.benched {
            let rule = ["it failed", "the host started", "no job made progress", "it disrupted"]
                .iter()
                .position(|p| why.starts_with(p))
                .unwrap_or_else(|| panic!("a benching by no known rule: {why}"));
            self.benched[rule] += 1;
        }
        self.longest_wall = self.longest_wall.max(f.wall);
        self.longest_virtual_s = self.longest_virtual_s.max(f.report.makespan_s);
        self.log_tick = self.log_tick.max(f.log_tick);
        self.log_run = self.log_run.max(f.log_run);
    }
}

#[test]
fn no_seed_of_the_fuzzer_hangs_a_run_keeps_a_job_from_ending_or_floods_the_log_on_any_workload() {
    let seeds = seeds();
    let fair = PolicyChoice { label: "fair-share".into(), policy: loaded("fair-share"), config_json: "{}".into() };
    let mut table = String::from(
        "workload                                         runs  failing starving progress churn  none  \
         longest wall  longest virtual  log on a tick  log in a run\n",
    );
    let mut failures = Vec::new();
    for Workload { name, scenario, tick } in workloads() {
        let baseline = simulate(runtime(), &fair, &scenario, &RunOptions { tick, ..RunOptions::default() });
        assert_eq!(baseline.unfinished, None, "{name}: the baseline finishes");
        let bound_s = virtual_bound(baseline.makespan_s);
        let wall = wall_bound(bound_s, tick);
        let mut line = Line::default();
        for seed in seeds.clone() {
            let replay = format!("{name}, seed {seed}");
            let Some(f) = fuzz(&scenario, tick, seed, wall) else {
                failures.push(format!("{replay}: still running after {wall:?}"));
                continue;
            };
            line.add(&f);
            let r = &f.report;
            let budget = LOG_PER_RUN * (1 + f.wall.as_secs() as usize / 60);
            let problems = [
                r.unfinished.as_ref().map(|why| format!("jobs left unfinished: {why}")),
                r.jobs.iter().any(|j| j.finish_s.is_none()).then(|| "a job never ended".to_string()),
                (r.makespan_s > bound_s).then(|| format!("{:.0} s simulated, over {bound_s:.0} s", r.makespan_s)),
                (f.log_tick > LOG_PER_TICK).then(|| format!("{} bytes logged on one tick", f.log_tick)),
                (f.log_run > budget).then(|| format!("{} bytes logged in the run", f.log_run)),
            ];
            failures.extend(problems.into_iter().flatten().map(|p| format!("{replay}: {p}")));
        }
        let [failing, starving, progress, churn] = line.benched;
        let none = line.runs - line.benched.iter().sum::<usize>();
        table.push_str(&format!(
            "{name:<48} {:>4}  {failing:>7} {starving:>8} {progress:>8} {churn:>5} {none:>5}  {:>10.2} s  {:>12.0} s  \
             {:>10} B  {:>10} B\n",
            line.runs,
            line.longest_wall.as_secs_f64(),
            line.longest_virtual_s,
            line.log_tick,
            line.log_run,
        ));
    }
    println!("the policy fuzzer, seeds {seeds:?}, benchings by rule:\n{table}");
    assert!(failures.is_empty(), "{} runs failed:\n{}", failures.len(), failures.join("\n"));
}
