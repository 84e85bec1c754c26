//! The experiments: `demo`, `simulate`, `compare`, `sweep`, `fidelity` and `whatif`, every run through
//! one batch runner ([`wasmsched::experiment::batch`]), several at a time, with one progress
//! bar; and `replay`, a policy over a recording, diffed against what was done.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use wasmsched::experiment::batch::{self, Task};
use wasmsched::experiment::paper::{self, Figure};
use wasmsched::experiment::run::{Comparison, PolicyChoice, RunOptions};
use wasmsched::experiment::sia_tables;
use wasmsched::experiment::sweep::{self, Axis};
use wasmsched::record::TelemetryRecorder;
use wasmsched::report::{self, Compared};
use wasmsched::results::{CompareResults, Results};
use wasmsched::runtime::supervise::{Fallback, Quarantine, Supervised};
use wasmsched::runtime::{Limits, Runtime};
use wasmsched::scenario::Scenario;
use wasmsched::sim::SimConfig;
use wasmsched::whatif::Recorded;
use wasmsched::{admission, experiment, replay, shipped, world};

use super::{OutputArgs, RuntimeArgs, WorkloadArgs, print_admissions, progress_bar, write_file};

/// How often the demo calls its policies, on the simulator's clock.
const DEMO_TICK: Duration = Duration::from_secs(30);

/// Every policy on every seed of `scenario`, through the batch runner: one comparison.
fn compare_on(
    rt: &Runtime,
    scenario: &Scenario,
    policies: &[String],
    seeds: std::ops::Range<u64>,
    tick: Duration,
    limits: Limits,
    timeline: bool,
) -> anyhow::Result<Comparison> {
    let choices = policies.iter().map(|p| PolicyChoice::resolve(rt, p)).collect::<Result<Vec<_>, _>>()?;
    let tasks = batch::grid(scenario, &choices, seeds, tick, limits, timeline);
    Ok(batch::comparison(scenario, run(rt, &tasks)))
}

/// Run `tasks` on every core with a progress bar in jobs ended; say which runs the watchdog
/// stepped into and which ended with jobs unfinished.
fn run(rt: &Runtime, tasks: &[Task<'_>]) -> Vec<experiment::run::RunReport> {
    let reports = batch::run(rt, tasks, batch::default_threads(), &progress_bar(batch::jobs_in(tasks), "jobs ended"));
    for r in &reports {
        if r.rescues > 0 {
            say!(
                "warning: {} (seed {}) left queued jobs waiting that fit: the host started {} of them",
                r.policy,
                r.seed,
                r.rescues
            );
        }
        if let Some(why) = &r.benched {
            say!("warning: {} (seed {}) was benched by the watchdog: {why}", r.policy, r.seed);
        }
        if let Some(why) = &r.unfinished {
            say!("error: seed {}: {why}", r.seed);
        }
    }
    reports
}

/// `wasmsched simulate`: one policy, one seed; its telemetry recording to `record`, when asked.
pub fn simulate(
    workload: &WorkloadArgs,
    policy: String,
    seed: u64,
    json: Option<&Path>,
    record: Option<&Path>,
    runtime: &RuntimeArgs,
) -> anyhow::Result<ExitCode> {
    let (rt, limits) = runtime.runtime()?;
    let scenario = workload.load()?;
    let comparison = match record {
        None => compare_on(&rt, &scenario, &[policy], seed..seed + 1, workload.tick, limits, false)?,
        Some(path) => {
            let choice = PolicyChoice::resolve(&rt, &policy)?;
            let tick_ms = workload.tick.as_millis() as u64;
            let mut recorder = TelemetryRecorder::create(path, tick_ms, scenario.budget)
                .with_context(|| format!("cannot record the run to {}", path.display()))?;
            let options = RunOptions {
                sim: SimConfig { seed, perturb: scenario.perturb, ..SimConfig::default() },
                tick: workload.tick,
                limits,
                timeline: false,
            };
            let (report, failed) = experiment::run::simulate_recorded(&rt, &choice, &scenario, &options, &mut recorder);
            if let Some(e) = failed {
                say!("error: the recording stopped early: {}", wasmsched::error_chain(&e));
            }
            out!("recording: {}", path.display());
            batch::comparison(&scenario, vec![report])
        }
    };
    out!("{}", comparison.table());
    if let Some(path) = json {
        let results = Results::Compare(CompareResults::new(&comparison, &scenario));
        write_file(path, |w| results.write_json(w).map_err(anyhow::Error::from))?;
    }
    // A run that could not finish its jobs is an error: the line above says which and why.
    Ok(if comparison.runs.iter().any(|r| r.unfinished.is_some()) { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// What `wasmsched whatif` replays, and how.
pub struct WhatifArgs {
    /// The telemetry recording.
    pub recording: PathBuf,
    /// The policies.
    pub policies: Vec<String>,
    /// Seeds per policy.
    pub seeds: u64,
    /// The tick; the recording's when None.
    pub tick: Option<Duration>,
    /// Print each job's figures up to this many jobs.
    pub show_jobs: usize,
    /// The watchdog's stall rule; the default when None.
    pub stall_after: Option<Duration>,
    /// Input shaking per seed (`--perturb`).
    pub perturb: f64,
}

/// `wasmsched whatif`: the recording as a scenario, then `compare` on it, and each job's
/// recorded JCT beside each policy's.
pub fn whatif(args: &WhatifArgs, out: &OutputArgs, runtime: &RuntimeArgs) -> anyhow::Result<ExitCode> {
    let (rt, limits) = runtime.runtime()?;
    let path = &args.recording;
    let recorded = Recorded::open(path).with_context(|| format!("cannot replay {}", path.display()))?;
    let (mut scenario, replay) = recorded.scenario().with_context(|| format!("cannot replay {}", path.display()))?;
    if let Some(after) = args.stall_after {
        scenario.watchdog.stall_after = after;
    }
    scenario.perturb = args.perturb;
    let tick = args.tick.unwrap_or(Duration::from_millis(recorded.tick_ms.max(1)));
    let comparison = compare_on(&rt, &scenario, &args.policies, 0..args.seeds, tick, limits, out.report.is_some())?;
    out!("{}", comparison.table());
    if comparison.policies().len() > 1 {
        out!("{}", comparison.paired_table(&scenario.claims));
    }
    let versus = replay.versus(&comparison);
    out!("{}", replay.table(&versus, args.show_jobs));
    out.write(&Results::Compare(CompareResults::new(&comparison, &scenario).recorded(&replay)))?;
    if let Some(dir) = &out.report {
        let title = format!("What if: {}", scenario.name());
        let compared = Compared { comparison: &comparison, scenario: &scenario, recorded: Some(&replay) };
        let page = report::write_html(&title, &[compared], dir)
            .with_context(|| format!("cannot write the report into {}", dir.display()))?;
        out!("report: {}", page.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// What `wasmsched abtest` runs.
pub struct AbtestArgs {
    /// The arms; the first is the baseline.
    pub policies: Vec<String>,
    /// In turn or side by side.
    pub design: wasmsched::experiment_design::Design,
    /// In a split, what a job's arm is drawn from.
    pub assign: wasmsched::experiment_design::Assign,
    /// Each block's length.
    pub block: Duration,
    /// Each block's burn-in.
    pub burn_in: Duration,
    /// Replications.
    pub seeds: u64,
    /// Also run every arm alone, and check the estimators.
    pub truth: bool,
    /// Where to write the replications as JSON.
    pub json: Option<PathBuf>,
}

/// `wasmsched abtest`: a switchback or split of the arms on the simulator over seeds, each replication's
/// estimates, and with `--truth` how each estimator did against every arm alone.
pub fn abtest(workload: &WorkloadArgs, args: &AbtestArgs, runtime: &RuntimeArgs) -> anyhow::Result<ExitCode> {
    use wasmsched::experiment::abtest;
    let (rt, limits) = runtime.runtime()?;
    let scenario = workload.load()?;
    // The same policy twice is an A/A test: the second is labelled `NAME#2`, and every
    // difference found is noise.
    let labels: Vec<String> = args
        .policies
        .iter()
        .enumerate()
        .map(|(i, p)| match args.policies[..i].iter().filter(|q| *q == p).count() {
            0 => p.clone(),
            k => format!("{p}#{}", k + 1),
        })
        .collect();
    use wasmsched::experiment_design::{Design, ExperimentConfig};
    let config = match args.design {
        Design::Switchback => ExperimentConfig::switchback(labels.clone(), args.block, args.burn_in, 0),
        Design::Split => ExperimentConfig::split(labels.clone(), args.assign, args.block, args.burn_in, 0),
    };
    config.check()?;
    let arms = args
        .policies
        .iter()
        .zip(labels)
        .map(|(p, label)| PolicyChoice::resolve(&rt, p).map(|c| PolicyChoice { label, ..c }))
        .collect::<Result<Vec<_>, _>>()?;
    let options = RunOptions { sim: SimConfig::default(), tick: workload.tick, limits, timeline: false };
    let runs_each = if args.truth { 1 + arms.len() } else { 1 };
    say!(
        "{} replication(s) of a {} of {} in blocks of {} (burn-in {}){}",
        args.seeds,
        if args.design == Design::Split { "split" } else { "switchback" },
        args.policies.join(" and "),
        humantime::format_duration(args.block),
        humantime::format_duration(args.burn_in),
        if args.truth {
            format!(", and each arm alone: {} runs", args.seeds * runs_each as u64)
        } else {
            String::new()
        }
    );
    let bar = progress_bar(args.seeds, "replications");
    let runs = abtest::replicate(
        &rt,
        &arms,
        &scenario,
        &options,
        &config,
        0..args.seeds,
        args.truth,
        batch::default_threads(),
        &bar,
    );
    for r in &runs {
        out!("seed {}:", r.seed);
        for v in r.estimates.iter().filter(|v| v.change.is_finite()) {
            out!("  {}", v.sentence());
        }
    }
    let checks = abtest::check(&runs);
    if !checks.is_empty() {
        out!("\n{}", abtest::check_table(&checks));
    }
    if let Some(path) = &args.json {
        let body = serde_json::json!({ "workload": scenario.name(), "design": args.design, "assign": args.assign, "block_s": args.block.as_secs_f64(), "burn_in_s": args.burn_in.as_secs_f64(), "perturb": scenario.perturb, "replications": runs, "checks": checks });
        write_file(path, |w| serde_json::to_writer_pretty(w, &body).map_err(anyhow::Error::from))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `wasmsched compare`: several policies on the same scenario and seeds; the config variants
/// its paper figures name run too.
pub fn compare(
    workload: &WorkloadArgs,
    mut policies: Vec<String>,
    seeds: u64,
    out: &OutputArgs,
    runtime: &RuntimeArgs,
) -> anyhow::Result<ExitCode> {
    let (rt, limits) = runtime.runtime()?;
    let scenario = workload.load()?;
    for (named, figure) in paper::named_variants(&scenario.claims, &policies) {
        say!("also running {named}: the scenario's {} figure names it", figure.key());
        policies.push(named);
    }
    let comparison = compare_on(&rt, &scenario, &policies, 0..seeds, workload.tick, limits, out.report.is_some())?;
    out!("{}", comparison.table());
    out!("{}", comparison.paired_table(&scenario.claims));
    let fairness = comparison.runs.iter().filter_map(|r| Some((r.policy.as_str(), r.fairness.as_ref()?)));
    let fairness = wasmsched::experiment::fairness::table(fairness);
    if !fairness.is_empty() {
        out!("{fairness}");
    }
    if !scenario.claims.is_empty() {
        out!("{}", comparison.paper_table(&scenario.claims));
    }
    out.write(&Results::Compare(CompareResults::new(&comparison, &scenario)))?;
    if let Some(dir) = &out.report {
        let title = format!("Policies on {}", scenario.name());
        let page = report::write_html(
            &title,
            &[Compared { comparison: &comparison, scenario: &scenario, recorded: None }],
            dir,
        )
        .with_context(|| format!("cannot write the report into {}", dir.display()))?;
        out!("report: {}", page.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// What `wasmsched sweep` sweeps, beside the workload and the outputs.
pub struct SweepArgs {
    /// The policy swept.
    pub policy: String,
    /// The config keys swept and their values.
    pub axes: Vec<Axis>,
    /// The config keys held at one value.
    pub fixed: Vec<Axis>,
    /// What every point is compared with.
    pub baseline: String,
    /// The figure measured; the policy's own objective when None.
    pub figure: Option<Figure>,
    /// Seeds per point.
    pub seeds: u64,
    /// Runs at once; one per core when None.
    pub threads: Option<usize>,
}

/// `wasmsched sweep`: one policy over a grid of its config against a baseline.
pub fn sweep(
    workload: &WorkloadArgs,
    args: SweepArgs,
    out: &OutputArgs,
    runtime: &RuntimeArgs,
) -> anyhow::Result<ExitCode> {
    let (rt, limits) = runtime.runtime()?;
    let scenario = workload.load()?;
    let policy = &args.policy;
    let claim = paper::objective(&scenario.claims, policy);
    let figure = args.figure.or(claim.map(|c| c.figure)).with_context(|| {
        format!(
            "{} gives {policy} no objective of its own: say what to measure with --figure ({})",
            scenario.name(),
            Figure::ALL.map(Figure::key).join(", ")
        )
    })?;
    let paper = claim.filter(|c| c.figure == figure).and_then(|c| c.value);
    let mut set = serde_json::Map::new();
    for axis in args.fixed {
        let [value] = &axis.values[..] else {
            anyhow::bail!("--set {} takes one value (a list is a --grid)", axis.key);
        };
        set.insert(axis.key, value.clone());
    }
    let (choice, base) = (PolicyChoice::resolve(&rt, policy)?, PolicyChoice::resolve(&rt, &args.baseline)?);
    let spec = sweep::Spec {
        policy: &choice,
        baseline: &base,
        figure,
        paper,
        fixed: set,
        axes: args.axes,
        seeds: 0..args.seeds,
        tick: workload.tick,
        limits,
        threads: args.threads.unwrap_or_else(batch::default_threads),
    };
    let done = sweep::sweep(&rt, &scenario, &spec, &progress_bar(spec.jobs(&scenario), "jobs ended"));
    out!("{}", done.table());
    out.write(&Results::Sweep(&done))?;
    if let Some(dir) = &out.report {
        let page = report::write_sweep_html(&done, dir)
            .with_context(|| format!("cannot write the report into {}", dir.display()))?;
        out!("report: {}", page.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The published results `wasmsched fidelity` checks against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Published {
    /// Pollux's simulator: Tiresias on Pollux's workloads 1–4.
    Pollux,
    /// Sia's Table 3: the heterogeneous cluster, Philly and newTrace.
    #[value(name = "sia-table-3")]
    SiaTable3,
    /// Sia's Table 4: the homogeneous cluster, Philly.
    #[value(name = "sia-table-4")]
    SiaTable4,
}

/// What `fidelity` takes for Sia's tables only.
#[derive(Clone, Debug, Default)]
pub struct SiaTableArgs {
    /// Which traces and policies.
    pub select: sia_tables::Select,
    /// Where to write the rows as JSON.
    pub json: Option<PathBuf>,
}

/// `wasmsched fidelity`: the simulator against published figures.
pub fn fidelity(which: Published, seeds: u64, sia: SiaTableArgs, runtime: &RuntimeArgs) -> anyhow::Result<ExitCode> {
    let (rt, limits) = runtime.runtime()?;
    let table = match which {
        Published::Pollux => {
            let rows = experiment::fidelity::against_pollux(&rt, 0..seeds, limits, batch::default_threads())?;
            out!("{}", experiment::fidelity::table(&rows));
            return Ok(if rows.iter().all(|r| r.within()) { ExitCode::SUCCESS } else { ExitCode::FAILURE });
        }
        Published::SiaTable3 => sia_tables::TABLE_3,
        Published::SiaTable4 => sia_tables::TABLE_4,
    };
    let plan = sia_tables::Plan::new(table, &sia.select, 0..seeds, limits)?;
    let reports = run(&rt, &plan.tasks(&rt)?);
    let rows = plan.rows(&reports);
    out!("{}", sia_tables::text(&table, &rows));
    if let Some(path) = &sia.json {
        write_file(path, |w| Ok(serde_json::to_writer_pretty(w, &rows)?))?;
    }
    let good = rows.iter().all(|r| r.within()) && sia_tables::same_order(&rows);
    Ok(if good { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// `wasmsched demo`: admit every shipped policy, run each on its own scenario beside its
/// baseline (every run of every scenario in one batch), print its objective, write the report.
pub fn demo(seeds: u64, report_dir: &Path, runtime: &RuntimeArgs) -> anyhow::Result<ExitCode> {
    let (rt, limits) = runtime.runtime()?;
    let world = world::sample::with_queue(2, 6, 2, 5);
    let results = shipped::SHIPPED
        .iter()
        .map(|p| (p.name.to_string(), admission::admit(&rt, p.name, p.wasm, "{}", limits, &world)));
    if print_admissions(results) > 0 {
        return Ok(ExitCode::FAILURE);
    }
    let scenarios = experiment::DEMO
        .iter()
        .map(|demo| Ok(Scenario::from_toml_str(demo.name, demo.text)?.with_default_targets()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let choices = experiment::DEMO
        .iter()
        .map(|demo| demo.policies.iter().map(|p| PolicyChoice::resolve(&rt, p)).collect::<Result<Vec<_>, _>>())
        .collect::<Result<Vec<_>, _>>()?;
    let grids: Vec<Vec<Task>> =
        scenarios.iter().zip(&choices).map(|(s, c)| batch::grid(s, c, 0..seeds, DEMO_TICK, limits, true)).collect();
    let mut reports = run(&rt, &grids.concat()).into_iter();
    let sizes: Vec<usize> = grids.iter().map(Vec::len).collect();
    drop(grids);
    let done: Vec<(Scenario, Comparison)> = scenarios
        .into_iter()
        .zip(sizes)
        .map(|(scenario, runs)| {
            let comparison = batch::comparison(&scenario, reports.by_ref().take(runs).collect());
            (scenario, comparison)
        })
        .collect();
    out!("\n{}", experiment::demo_table(&done, seeds));
    let scenarios: Vec<Compared> =
        done.iter().map(|(s, c)| Compared { comparison: c, scenario: s, recorded: None }).collect();
    let page = report::write_html("wasmsched demo: each policy at its own objective", &scenarios, report_dir)
        .with_context(|| format!("cannot write the report into {}", report_dir.display()))?;
    out!(
        "report: {}  (every table, the JCT distribution, placements and limits over time)\n\
         next: wasmsched compare --workload scenarios/specon-paper.toml --policy fair-share --policy specon --seeds 5 \
         --report report/   (docs/results.md has every paper's set-up)",
        page.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `wasmsched replay`: run `policy` over the recording and print how its decisions differ.
pub fn replay(recording: &Path, policy: &str, show: usize, runtime: &RuntimeArgs) -> anyhow::Result<ExitCode> {
    let (rt, limits) = runtime.runtime()?;
    let choice = PolicyChoice::resolve(&rt, policy)?;
    let mut supervised =
        Supervised::new(choice.policy, choice.config_json, limits, Fallback::KeepLimits, Quarantine::default());
    let mut opened =
        replay::Recording::open(recording).with_context(|| format!("cannot replay {}", recording.display()))?;
    let report = replay::replay(&rt, &mut opened, &mut supervised);
    out!(
        "replayed {} ticks of {} with {policy}: {} decided, {} identical, {} differ",
        report.ticks,
        recording.display(),
        report.compared,
        report.identical,
        report.differences.len()
    );
    if report.recorded_fallbacks > 0 {
        out!("({} recorded ticks fell back; a deadline on the live host may not recur)", report.recorded_fallbacks);
    }
    for d in report.differences.iter().take(show) {
        out!("tick {}:\n  recorded: {}\n  replayed: {}", d.tick, actions(&d.recorded), actions(&d.replayed));
    }
    Ok(if report.is_identical() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Actions on one line, for a person.
fn actions(list: &Option<Vec<wasmsched::bindings::wit::Action>>) -> String {
    match list {
        None => "not asked".into(),
        Some(list) if list.is_empty() => "no actions".into(),
        Some(list) => {
            list.iter().map(|a| format!("job {} {:?} ({})", a.job, a.kind, a.reason)).collect::<Vec<_>>().join("; ")
        }
    }
}
