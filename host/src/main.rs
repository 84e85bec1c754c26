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
use wasmsched::config::{DEFAULT_API, HostConfig};
use wasmsched::experiment::paper::{self, Figure};
use wasmsched::experiment::report::{self, Scenario};
use wasmsched::experiment::results::{CompareResults, Results};
use wasmsched::experiment::run::{Comparison, PolicyChoice, RunOptions};
use wasmsched::experiment::sweep::{self, Axis};
use wasmsched::host::{self, Host};
use wasmsched::replay;
use wasmsched::runtime::supervise::{Fallback, Quarantine, Supervised};
use wasmsched::runtime::{Limits, Runtime, RuntimeConfig};
use wasmsched::scaffold::{self, Lang};
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
    /// Check every shipped policy, then run each on the scenario that shows its own objective
    /// beside fair-share, print the objective for both and the paper's, and write a report.
    Demo {
        /// How many seeds each policy runs with.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
        seeds: u64,
        /// Where the HTML report goes.
        #[arg(long, default_value = "report/demo")]
        report: PathBuf,
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
        #[command(flatten)]
        out: OutputArgs,
        #[command(flatten)]
        runtime: RuntimeArgs,
    },
    /// Run one policy over a grid of its config keys, every point over the same seeds against
    /// a baseline; print the figure at every point and the best.
    Sweep {
        #[command(flatten)]
        workload: WorkloadArgs,
        /// The policy swept: a shipped name, or a `.wasm` path (its `NAME.toml` is the start).
        #[arg(long)]
        policy: String,
        /// A config key and its values: `KEY=V1,V2,…` or `KEY=START:END:STEP`; once per key.
        #[arg(long = "grid", required = true)]
        axes: Vec<Axis>,
        /// A config key held at one value at every point: `KEY=VALUE`.
        #[arg(long = "set")]
        fixed: Vec<Axis>,
        /// What every point is compared with.
        #[arg(long, default_value = "fair-share")]
        baseline: String,
        /// The figure measured (default: the policy's own objective in the workload).
        #[arg(long)]
        figure: Option<Figure>,
        /// How many seeds (0, 1, … N-1) every point runs with.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
        seeds: u64,
        /// Runs at once (default: one per core).
        #[arg(long)]
        threads: Option<usize>,
        #[command(flatten)]
        out: OutputArgs,
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
    /// Write a new policy project (a policy, a native test, its build, a README) that builds,
    /// passes its test and passes `validate` as written.
    New {
        /// The policy's name: lowercase letters, digits and '-' (`my-policy`).
        name: String,
        /// Its language.
        #[arg(long, value_enum, default_value_t = Lang::Rust)]
        lang: Lang,
        /// Where to write it (default: ./NAME); it must not exist or be empty.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The Rust SDK's folder (a wasmsched checkout's `sdk/`), for a Rust project.
        #[arg(long)]
        sdk: Option<PathBuf>,
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
#[cfg_attr(not(feature = "docker"), allow(dead_code, reason = "read only by a host built with the docker feature"))]
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
struct OutputArgs {
    /// Write the results as JSON here (docs/results.schema.json).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the results as CSV here.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Write an HTML report into this directory.
    #[arg(long)]
    report: Option<PathBuf>,
}

impl OutputArgs {
    /// Write the JSON and CSV asked for.
    fn write(&self, results: &Results) -> anyhow::Result<()> {
        if let Some(path) = &self.json {
            write_file(path, |w| results.write_json(w).map_err(anyhow::Error::from))?;
        }
        if let Some(path) = &self.csv {
            write_file(path, |w| results.write_csv(w).map_err(anyhow::Error::from))?;
        }
        Ok(())
    }
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
    /// Budget for starting an instance, in milliseconds: making it with its `init`, and again
    /// its first decide (apart from the per-call deadline: a component that bundles an
    /// interpreter needs more to start).
    #[arg(long, default_value_t = 1000)]
    instantiate_ms: u64,
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
            instantiate: Duration::from_millis(self.instantiate_ms),
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
        Command::Demo { .. }
            | Command::Simulate { .. }
            | Command::Compare { .. }
            | Command::Sweep { .. }
            | Command::Fidelity { .. }
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
        Command::Demo { seeds, report, runtime } => demo(seeds, &report, &runtime),
        Command::Simulate { workload, policy, seed, json, runtime } => {
            let (rt, limits) = runtime.runtime()?;
            let plan = workload.load()?;
            let policies = [policy];
            let runs =
                Runs { workload: &plan, policies: &policies, seeds: seed..seed + 1, tick: workload.tick, limits };
            let comparison = runs.run(&rt, false)?;
            println!("{}", comparison.table());
            if let Some(path) = json {
                let results = Results::Compare(CompareResults::new(&comparison, &plan));
                write_file(&path, |w| results.write_json(w).map_err(anyhow::Error::from))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Compare { workload, mut policies, seeds, out, runtime } => {
            let (rt, limits) = runtime.runtime()?;
            let plan = workload.load()?;
            // A config variant of an asked-for policy that a [[paper]] figure names runs too.
            for claim in &plan.paper {
                for named in std::iter::once(&claim.policy).chain(&claim.baseline) {
                    let variant_of = named.split_once(':').map(|(base, _)| base.to_string());
                    if !policies.contains(named) && variant_of.is_some_and(|base| policies.contains(&base)) {
                        eprintln!("also running {named}: the scenario's {} figure names it", claim.figure.key());
                        policies.push(named.clone());
                    }
                }
            }
            let runs = Runs { workload: &plan, policies: &policies, seeds: 0..seeds, tick: workload.tick, limits };
            let comparison = runs.run(&rt, out.report.is_some())?;
            println!("{}", comparison.table());
            if !plan.paper.is_empty() {
                println!("{}", comparison.paper_table(&plan.paper));
            }
            out.write(&Results::Compare(CompareResults::new(&comparison, &plan)))?;
            if let Some(dir) = &out.report {
                let title = format!("Policies on {}", plan.name);
                let page = report::write_html(&title, &[Scenario { comparison: &comparison, workload: &plan }], dir)
                    .with_context(|| format!("cannot write the report into {}", dir.display()))?;
                println!("report: {}", page.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Sweep { workload, policy, axes, fixed, baseline, figure, seeds, threads, out, runtime } => {
            let (rt, limits) = runtime.runtime()?;
            let plan = workload.load()?;
            let claim = paper::objective(&plan.paper, &policy);
            let figure = figure.or(claim.map(|c| c.figure)).with_context(|| {
                format!(
                    "{} gives {policy} no objective of its own: say what to measure with --figure ({})",
                    plan.name,
                    Figure::ALL.map(Figure::key).join(", ")
                )
            })?;
            let paper = claim.filter(|c| c.figure == figure).and_then(|c| c.value);
            let mut set = serde_json::Map::new();
            for axis in fixed {
                let [value] = &axis.values[..] else {
                    anyhow::bail!("--set {} takes one value (a list is a --grid)", axis.key);
                };
                set.insert(axis.key, value.clone());
            }
            let (choice, base) = (PolicyChoice::resolve(&rt, &policy)?, PolicyChoice::resolve(&rt, &baseline)?);
            let threads =
                threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get));
            let spec = sweep::Spec {
                policy: &choice,
                baseline: &base,
                figure,
                paper,
                fixed: set,
                axes,
                seeds: 0..seeds,
                tick: workload.tick,
                limits,
                threads,
            };
            let bar = ProgressBar::new(spec.runs() as u64);
            bar.set_style(
                ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} runs, ETA {eta}")
                    .expect("a valid template"),
            );
            let done = sweep::sweep(&rt, &plan, &spec, &|| bar.inc(1));
            bar.finish_and_clear();
            println!("{}", done.table());
            out.write(&Results::Sweep(&done))?;
            if let Some(dir) = &out.report {
                let page = report::write_sweep_html(&done, dir)
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
        Command::New { name, lang, dir, sdk } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            let project = scaffold::create(&name, lang, &dir, &sdk.unwrap_or_else(scaffold::default_sdk))?;
            let [install, test, build] = project.commands();
            println!("wrote a {lang} policy project in {}; next, in that folder:", project.dir.display());
            println!(
                "  {install:<64} # the toolchain, once\n  {test:<64} # the native tests\n  {build:<64} # the component"
            );
            println!("  wasmsched validate {}", project.wasm.display());
            Ok(ExitCode::SUCCESS)
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

#[cfg(not(feature = "docker"))]
fn calibrate(_: CalibrateArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!(
        "this wasmsched was built without the docker backend, which calibrate runs on: rebuild with --features docker"
    )
}

#[cfg(feature = "docker")]
fn calibrate(args: CalibrateArgs) -> anyhow::Result<ExitCode> {
    use wasmsched::bindings::wit::Direction;
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
    let load =
        |path: &std::path::Path| Workload::load(path, &LoadOptions::default()).map(Workload::with_default_targets);
    let host = Host::new(config.clone(), load).context("cannot start the host")?;
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

/// Create `path` and fill it with `write`, buffered.
fn write_file(
    path: &std::path::Path,
    write: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let file = std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    write(&mut out)
        .and_then(|()| Ok(std::io::Write::flush(&mut out)?))
        .with_context(|| format!("cannot write {}", path.display()))
}

/// `wasmsched demo`: admit every shipped policy, run each on its own scenario beside
/// fair-share, print its objective, write the report.
fn demo(seeds: u64, report_dir: &std::path::Path, runtime: &RuntimeArgs) -> anyhow::Result<ExitCode> {
    let (rt, limits) = runtime.runtime()?;
    let world = snapshot::sample::with_queue(2, 6, 2, 5);
    let results = shipped::all()
        .iter()
        .map(|p| (p.name.to_string(), admission::admit(&rt, p.name, p.wasm, "{}", limits, &world)));
    if print_admissions(results) > 0 {
        return Ok(ExitCode::FAILURE);
    }
    let mut done = Vec::new();
    for demo in &experiment::DEMO {
        let workload = Workload::from_scenario_str(demo.name, demo.text)?.with_default_targets();
        let policies: Vec<String> = demo.policies.iter().map(|p| p.to_string()).collect();
        let runs = Runs { workload: &workload, policies: &policies, seeds: 0..seeds, tick: DEMO_TICK, limits };
        let comparison = runs.run(&rt, true)?;
        done.push((workload, comparison));
    }
    println!(
        "\neach policy on the scenario that shows its own objective, against its baseline; mean over {seeds} seed(s)"
    );
    println!(
        "{:<10} {:<16} {:<22} {:>12} {:>12} {:>12} {:>20} {:>10}",
        "policy", "scenario", "objective", "baseline", "theirs", "ours", "change ± sd", "paper"
    );
    for (workload, comparison) in &done {
        for policy in comparison.policies().into_iter().filter(|p| *p != comparison.baseline()) {
            let Some(claim) = paper::objective(&workload.paper, policy) else { continue };
            let row = match comparison.measure(claim) {
                Some(m) => (m.figure.format_value(m.baseline_value), m.figure.format_value(m.value), m.summary()),
                None => ("—".into(), "—".into(), "not measured".into()),
            };
            let paper = claim.value.map_or_else(|| "—".to_string(), |v| claim.figure.format(v));
            println!(
                "{policy:<10} {:<16} {:<22} {:>12} {:>12} {:>12} {:>20} {paper:>10}",
                workload.name,
                claim.figure.name(),
                comparison.baseline_of(claim),
                row.0,
                row.1,
                row.2
            );
        }
    }
    let scenarios: Vec<Scenario> = done.iter().map(|(w, c)| Scenario { comparison: c, workload: w }).collect();
    let page = report::write_html("wasmsched demo: each policy at its own objective", &scenarios, report_dir)
        .with_context(|| format!("cannot write the report into {}", report_dir.display()))?;
    println!(
        "\nreport: {}  (every table, the JCT distribution, placements and limits over time)\n\
         next: wasmsched compare --workload scenarios/specon-paper.toml --policy fair-share --policy specon --seeds 5 \
         --report report/   (docs/results.md has every paper's set-up)",
        page.display()
    );
    Ok(ExitCode::SUCCESS)
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
