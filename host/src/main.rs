//! The `wasmsched` command line: parses arguments and calls into the library.

use std::net::SocketAddr;
use std::ops::Range;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tracing_subscriber::EnvFilter;
use wasmsched::admission;
use wasmsched::backend::replay::Replay;
use wasmsched::backend::sim::SimConfig;
use wasmsched::backend::sim::workload::{LoadOptions, Workload};
use wasmsched::bindings::wit::Direction;
use wasmsched::config::{DEFAULT_API, HostConfig};
use wasmsched::experiment::run::{Comparison, PolicyChoice, RunOptions};
use wasmsched::host::{self, Host};
use wasmsched::replay;
use wasmsched::runtime::supervise::{Fallback, Quarantine, Supervised};
use wasmsched::runtime::{Limits, Runtime, RuntimeConfig};
use wasmsched::{api, experiment, shipped, snapshot};

/// A WebAssembly policy-plugin host for the schedulers of deep-learning containers.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check every shipped policy, then compare fair-share in the simulator with the policies
    /// that tune running jobs (on the built-in scenario) and with those that place (on a GPU
    /// queue).
    Demo {
        /// How many seeds each policy runs with.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
        seeds: u64,
        #[command(flatten)]
        runtime: RuntimeArgs,
    },
    /// Run one policy on a workload in the simulator and print its summary.
    Simulate {
        #[command(flatten)]
        workload: WorkloadArgs,
        /// A shipped policy's name, or a path to a `.wasm` component.
        #[arg(long)]
        policy: String,
        /// The simulator's seed.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Write the run as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        #[command(flatten)]
        runtime: RuntimeArgs,
    },
    /// Check the simulator against Pollux's: Tiresias on Pollux's workloads 1–4, our mean JCT
    /// beside the published one; exit status 1 when one is more than 10 % off.
    Fidelity {
        /// How many seeds (0, 1, … N-1) each workload runs with.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
        seeds: u64,
        #[command(flatten)]
        runtime: RuntimeArgs,
    },
    /// Run several policies on the same workload and seeds; print one table.
    Compare {
        #[command(flatten)]
        workload: WorkloadArgs,
        /// Shipped policy names or `.wasm` paths; give it once per policy.
        #[arg(long = "policy", required = true)]
        policies: Vec<String>,
        /// How many seeds (0, 1, … N-1) each policy runs with.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
        seeds: u64,
        /// Write every run as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Write an HTML report with pictures into this directory.
        #[arg(long)]
        report: Option<PathBuf>,
        #[command(flatten)]
        runtime: RuntimeArgs,
    },
    /// Check policy files: contract and version, init, and a dry-run decide. Exit 1 when
    /// any file fails.
    Validate {
        /// Policy components (`.wasm`); a `NAME.toml` beside one is its config.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        runtime: RuntimeArgs,
    },
    /// Run the host: the configured policies on the backend, hot-reloading the policies
    /// directory, with the control API on loopback. Ctrl-C stops it cleanly.
    Run {
        /// The host's config (TOML).
        #[arg(long)]
        config: PathBuf,
    },
    /// Run a policy over a telemetry recording and diff its decisions against the recorded
    /// ones. Exit 1 when they differ.
    Replay {
        /// A recording written by `run` (`[record] telemetry = …`).
        #[arg(long)]
        recording: PathBuf,
        /// A shipped policy's name, or a path to a `.wasm` component.
        #[arg(long)]
        policy: String,
        /// How many differing ticks to print.
        #[arg(long, default_value_t = 5)]
        show: usize,
        #[command(flatten)]
        runtime: RuntimeArgs,
    },
    /// Print a running host's status: policies, versions, digests, counters, reloads.
    Status {
        #[command(flatten)]
        api: ApiArgs,
        /// Print the raw JSON.
        #[arg(long)]
        json: bool,
    },
    /// Bring back a policy's previous version on a running host.
    Rollback {
        /// The policy's name.
        policy: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Measure a job on a Docker Engine: run its image under a few CPU limits, read its epoch
    /// lines, fit its work per epoch, most useful cores and start-up, keep its learning curve,
    /// and write a profile a scenario's `[[profile]]` runs in the simulator.
    Calibrate(CalibrateArgs),
}

#[derive(Args)]
struct CalibrateArgs {
    /// The job's image, already on the engine.
    #[arg(long)]
    image: String,
    /// The profile's name (what scenarios write in `model`).
    #[arg(long)]
    name: String,
    /// Where to write the profile (TOML).
    #[arg(long)]
    out: PathBuf,
    /// The Docker Engine (default: DOCKER_HOST, else the system socket).
    #[arg(long)]
    engine: Option<String>,
    /// CPU allocations to run with, in cores, comma-separated (default: 0.5, 1 and all the
    /// engine's cores). The job runs alone to the end with the largest; a smaller one runs as
    /// a CFS share among copies side by side (the engine's cores divided by 2, 3, 4 …) and
    /// alone under a CPU quota (`docker run --cpus`).
    #[arg(long, value_delimiter = ',')]
    limits: Vec<f64>,
    /// Epochs timed under each limit but the largest.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(2..))]
    epochs_per_limit: u32,
    /// The metric the job's epoch lines carry.
    #[arg(long, default_value = "accuracy")]
    metric: String,
    /// A lower metric is better (a loss, an error rate).
    #[arg(long)]
    lower_is_better: bool,
    /// How long one run may take.
    #[arg(long, default_value = "30m", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// The job's command (after `--`); the image's own when absent.
    #[arg(last = true)]
    command: Vec<String>,
}

#[derive(Args)]
struct ApiArgs {
    /// The host's control API.
    #[arg(long, default_value = DEFAULT_API)]
    addr: SocketAddr,
    /// The API's bearer token, when it has one.
    #[arg(long)]
    token: Option<String>,
}

#[derive(Args)]
struct WorkloadArgs {
    /// A scenario (.toml), a Pollux workload (.csv) or the Philly trace (.csv).
    #[arg(long)]
    workload: PathBuf,
    /// Time between policy calls, on the simulator's clock.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    tick: Duration,
    /// Cluster size for CSV workloads (each has a documented default).
    #[arg(long)]
    nodes: Option<usize>,
    /// Keep only the first N jobs.
    #[arg(long)]
    limit: Option<usize>,
    /// Do not give jobs without targets the default targets derived from their curves.
    #[arg(long)]
    no_default_targets: bool,
}

impl WorkloadArgs {
    fn load(&self) -> anyhow::Result<Workload> {
        let opts = LoadOptions { nodes: self.nodes, limit: self.limit };
        let workload = Workload::load(&self.workload, &opts).context("cannot use the workload")?;
        Ok(if self.no_default_targets { workload } else { workload.with_default_targets() })
    }
}

#[derive(Args)]
struct RuntimeArgs {
    /// Deadline per policy call, in milliseconds.
    #[arg(long, default_value_t = 50)]
    deadline_ms: u64,
    /// Memory cap per policy instance, in MiB.
    #[arg(long, default_value_t = 64)]
    memory_mib: u64,
    /// Where compiled policies are cached (default: ~/.cache/wasmsched).
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Compile every time; do not read or write the cache.
    #[arg(long)]
    no_cache: bool,
}

impl RuntimeArgs {
    fn runtime(&self) -> anyhow::Result<(Runtime, Limits)> {
        let mut config = RuntimeConfig::default();
        if let Some(dir) = &self.cache_dir {
            config.cache_dir = Some(dir.clone());
        }
        if self.no_cache {
            config.cache_dir = None;
        }
        let rt = Runtime::new(config)
            .map_err(|e| anyhow::anyhow!("{e:#}"))
            .context("cannot start the WebAssembly engine")?;
        let limits = Limits {
            deadline: Duration::from_millis(self.deadline_ms),
            memory_bytes: self.memory_mib << 20,
            ..Limits::default()
        };
        Ok((rt, limits))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A simulated run asks its policies thousands of times in a few seconds: their own info
    // lines would drown the table, so they show from warn up (RUST_LOG=policy=info for all).
    let batch = matches!(
        cli.command,
        Command::Demo { .. } | Command::Simulate { .. } | Command::Compare { .. } | Command::Fidelity { .. }
    );
    let policy = if batch { "warn" } else { "info" };
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("info,policy={policy},cranelift=warn,wasmtime=warn")));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Demo { seeds, runtime } => {
            let (rt, limits) = runtime.runtime()?;
            let world = snapshot::sample::with_queue(2, 6, 2, 5);
            let results: Vec<_> = shipped::all()
                .iter()
                .map(|p| (p.name.to_string(), admission::admit(&rt, p.name, p.wasm, "{}", limits, &world)))
                .collect();
            let places: Vec<bool> = results.iter().map(|(_, r)| r.as_ref().is_ok_and(|a| a.places)).collect();
            if print_admissions(results.into_iter()) > 0 {
                return Ok(ExitCode::FAILURE);
            }
            // The policies that tune running jobs on the CPU scenario; those that place on the
            // GPU queue. Fair-share, the baseline, first in both: jobs start as they come.
            let (mut tuners, mut schedulers) = (vec!["fair-share".to_string()], vec!["fair-share".to_string()]);
            for (p, places) in shipped::names().into_iter().zip(places).filter(|(p, _)| *p != "fair-share") {
                if places { &mut schedulers } else { &mut tuners }.push(p.to_string());
            }
            for (name, text, policies) in [
                ("demo", experiment::DEMO_SCENARIO, &tuners),
                ("gpu-queue", experiment::GPU_QUEUE_SCENARIO, &schedulers),
            ] {
                let workload = Workload::from_scenario_str(name, text)?.with_default_targets();
                let runs = Runs { workload: &workload, policies, seeds: 0..seeds, tick: DEMO_TICK, limits };
                println!("\n{}", runs.run(&rt, false)?.table());
            }
            println!(
                "next: wasmsched compare --workload scenarios/specon-paper.toml --policy fair-share --policy specon \
                 --seeds 5 --report report/   (docs/results.md has every paper's set-up; docs/scheduling.md the queue)"
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Simulate { workload, policy, seed, json, runtime } => {
            let (rt, limits) = runtime.runtime()?;
            let plan = workload.load()?;
            let policies = [policy];
            let runs =
                Runs { workload: &plan, policies: &policies, seeds: seed..seed + 1, tick: workload.tick, limits };
            let comparison = runs.run(&rt, false)?;
            println!("{}", comparison.table());
            if let Some(path) = json {
                write_json(&path, &comparison)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Compare { workload, policies, seeds, json, report, runtime } => {
            let (rt, limits) = runtime.runtime()?;
            let plan = workload.load()?;
            let runs = Runs { workload: &plan, policies: &policies, seeds: 0..seeds, tick: workload.tick, limits };
            let comparison = runs.run(&rt, report.is_some())?;
            println!("{}", comparison.table());
            if !plan.paper.is_empty() {
                println!("{}", comparison.paper_table(&plan.paper));
            }
            if let Some(path) = json {
                write_json(&path, &comparison)?;
            }
            if let Some(dir) = report {
                let page = experiment::report::write_html(&comparison, &plan, &dir)
                    .with_context(|| format!("cannot write the report into {}", dir.display()))?;
                println!("report: {}", page.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Fidelity { seeds, runtime } => {
            let (rt, limits) = runtime.runtime()?;
            let rows = experiment::fidelity::against_pollux(&rt, 0..seeds, limits)?;
            println!("{}", experiment::fidelity::table(&rows));
            Ok(if rows.iter().all(|r| r.within()) { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Command::Validate { files, runtime } => {
            let (rt, limits) = runtime.runtime()?;
            let world = snapshot::sample::with_queue(2, 6, 2, 5);
            let results =
                files.iter().map(|f| (f.display().to_string(), admission::admit_file(&rt, f, limits, &world)));
            let failed = print_admissions(results);
            Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Command::Run { config } => run_host(&config),
        Command::Replay { recording, policy, show, runtime } => {
            let (rt, limits) = runtime.runtime()?;
            let choice = PolicyChoice::resolve(&rt, &policy)?;
            let mut supervised =
                Supervised::new(choice.policy, choice.config_json, limits, Fallback::KeepLimits, Quarantine::default());
            let mut backend =
                Replay::open(&recording).with_context(|| format!("cannot replay {}", recording.display()))?;
            let report = replay::replay(&rt, &mut backend, &mut supervised);
            println!(
                "replayed {} ticks of {} with {policy}: {} decided, {} identical, {} differ",
                report.ticks,
                recording.display(),
                report.compared,
                report.identical,
                report.differences.len()
            );
            if report.recorded_fallbacks > 0 {
                println!(
                    "({} recorded ticks fell back; a deadline on the live host may not recur)",
                    report.recorded_fallbacks
                );
            }
            for d in report.differences.iter().take(show) {
                println!(
                    "tick {}:\n  recorded: {}\n  replayed: {}",
                    d.tick,
                    actions(&d.recorded),
                    actions(&d.replayed)
                );
            }
            Ok(if report.is_identical() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Command::Status { api, json } => {
            let status = api::client::status(api.addr, api.token.as_deref())?;
            if json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                print!("{}", status.render());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Rollback { policy, api } => {
            let done = api::client::rollback(api.addr, &policy, api.token.as_deref())?;
            println!("{} rolled back: {} serves again", done.policy, done.sha256);
            Ok(ExitCode::SUCCESS)
        }
        Command::Calibrate(args) => calibrate(args),
    }
}

fn calibrate(args: CalibrateArgs) -> anyhow::Result<ExitCode> {
    let spec = wasmsched::calibrate::Spec {
        endpoint: args.engine.unwrap_or_else(wasmsched::backend::docker::default_endpoint),
        image: args.image,
        command: args.command,
        name: args.name,
        metric: args.metric,
        direction: if args.lower_is_better { Direction::LowerIsBetter } else { Direction::HigherIsBetter },
        limits_cores: args.limits,
        epochs_per_limit: args.epochs_per_limit,
        timeout: args.timeout,
    };
    let done = wasmsched::calibrate::calibrate(&spec).context("calibration failed")?;
    std::fs::write(&args.out, done.profile.to_toml())
        .with_context(|| format!("cannot write the profile to {}", args.out.display()))?;
    let costs = &done.profile.costs;
    println!(
        "{}: {:.3} core-s per epoch ({}), at most {:.2} cores{}, start-up {:.2} s, {} epochs, {:.1} MiB",
        done.profile.name,
        costs.work_per_epoch_core_s,
        if done.fit.work_measured { "CPU time charged" } else { "fitted to epoch times: too few CPU readings" },
        costs.max_cores,
        if done.fit.capped { "" } else { " (still faster at the largest limit)" },
        costs.startup_s,
        done.profile.curve().epochs(),
        costs.memory_bytes as f64 / f64::from(1u32 << 20),
    );
    println!(
        "{:>8} {:>10} {:>12} {:>12} {:>12} {:>14}",
        "cores", "as", "epoch s", "fitted s", "start-up s", "CPU/epoch c·s"
    );
    for l in done.profile.measured.iter().flat_map(|m| &m.limits) {
        let cpu = l.cpu_per_epoch_core_s.map_or_else(|| "-".to_string(), |c| format!("{c:.3}"));
        let how = match (l.quota, l.copies) {
            (true, _) => "quota".to_string(),
            (false, 1) => "alone".to_string(),
            (false, n) => format!("share ×{n}"),
        };
        println!(
            "{:>8.2} {how:>10} {:>12.3} {:>12.3} {:>12.2} {cpu:>14}",
            l.cores, l.epoch_s, l.fitted_epoch_s, l.startup_s
        );
    }
    if let Some(usable) = done.profile.measured.as_ref().and_then(|m| m.usable_cores()) {
        println!(
            "usable cores: {usable:.2} (what the containers got when they filled the engine: simulate this machine as a node of that many)"
        );
    }
    println!("profile: {}", args.out.display());
    Ok(ExitCode::SUCCESS)
}

fn run_host(path: &std::path::Path) -> anyhow::Result<ExitCode> {
    let config = HostConfig::load(path)?;
    let mut runtime_config = RuntimeConfig::default();
    if let Some(dir) = &config.cache_dir {
        runtime_config.cache_dir = Some(dir.clone());
    }
    let rt = Runtime::new(runtime_config)
        .map_err(|e| anyhow::anyhow!("{e:#}"))
        .context("cannot start the WebAssembly engine")?;
    let host = Host::new(config.clone()).context("cannot start the host")?;
    let handle = host.handle();
    host::stop_on_signal(handle.clone()).context("cannot listen for Ctrl-C")?;
    let _api = if config.api.enabled {
        let server = api::serve(handle.clone(), config.api.listen, config.api.token.clone())?;
        println!("control API on http://{}", server.addr());
        Some(server)
    } else {
        None
    };
    let summary = host.run(&rt)?;
    let status = handle.board().get();
    println!(
        "stopped after {} ticks ({:.1} s of backend time): {} decided, {} actions applied, {} swaps, {} files refused, {} late ticks",
        summary.ticks,
        summary.end_ms as f64 / 1000.0,
        summary.decisions,
        summary.applied,
        status.swaps,
        status.refused,
        status.late_ticks
    );
    Ok(ExitCode::SUCCESS)
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

/// How often the demo calls its policies, on the simulator's clock.
const DEMO_TICK: Duration = Duration::from_secs(30);

/// Every policy on every seed of one workload.
struct Runs<'a> {
    workload: &'a Workload,
    policies: &'a [String],
    seeds: Range<u64>,
    tick: Duration,
    limits: Limits,
}

impl Runs<'_> {
    /// Run them all, in (policy, seed) order, with a progress bar (in jobs ended) once it
    /// takes longer than a second. `timeline` keeps each policy's first run's CPU over time.
    fn run(&self, rt: &Runtime, timeline: bool) -> anyhow::Result<Comparison> {
        let choices = self.policies.iter().map(|p| PolicyChoice::resolve(rt, p)).collect::<Result<Vec<_>, _>>()?;
        let jobs = self.workload.jobs.len() as u64;
        let seeds = self.seeds.clone().count() as u64;
        let bar =
            ProgressBar::with_draw_target(Some(choices.len() as u64 * seeds * jobs), ProgressDrawTarget::hidden());
        bar.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {percent:>3}% of jobs ended, ETA {eta}  {msg}")
                .expect("a valid template"),
        );
        let started = Instant::now();
        let mut runs = Vec::new();
        for choice in &choices {
            for seed in self.seeds.clone() {
                bar.set_message(format!("{} seed {seed}", choice.label));
                let options = RunOptions {
                    sim: SimConfig { seed, ..SimConfig::default() },
                    tick: self.tick,
                    limits: self.limits,
                    timeline: timeline && seed == self.seeds.start,
                };
                let before = runs.len() as u64 * jobs;
                let report = experiment::run::simulate_watched(rt, choice, self.workload, &options, |world| {
                    if bar.is_hidden() && started.elapsed() > Duration::from_secs(1) {
                        bar.set_draw_target(ProgressDrawTarget::stderr());
                    }
                    bar.set_position(before + u64::from(world.jobs_seen()) - world.all_jobs().len() as u64);
                });
                runs.push(report);
                bar.set_position(runs.len() as u64 * jobs);
            }
        }
        bar.finish_and_clear();
        Ok(Comparison { workload: self.workload.name.clone(), runs })
    }
}

fn write_json(path: &std::path::Path, comparison: &Comparison) -> anyhow::Result<()> {
    let file = std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    serde_json::to_writer_pretty(std::io::BufWriter::new(file), comparison)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// One line per policy; returns how many failed.
fn print_admissions(
    results: impl Iterator<Item = (String, Result<admission::Admitted, admission::AdmissionError>)>,
) -> usize {
    let mut failed = 0;
    for (name, result) in results {
        match result {
            Ok(ok) => println!("{ok}"),
            Err(e) => {
                failed += 1;
                println!("FAILED {name}: {}", wasmsched::error_chain(&e));
            }
        }
    }
    failed
}
