//! The `wasmsched` command line: parses arguments (clap) and hands each command to its
//! adapter in [`cli`] (experiments, the live host, policy files, registries, calibration); the
//! logic is in the library.

/// A line of results on stdout ([`cli::out`]): never a panic when the reader has gone.
macro_rules! out {
    ($($arg:tt)*) => { $crate::cli::out(format_args!($($arg)*)) };
}

/// A line for the person at the terminal on stderr ([`cli::say`]): never a panic when stderr
/// is closed.
macro_rules! say {
    ($($arg:tt)*) => { $crate::cli::say(format_args!($($arg)*)) };
}

mod cli;

#[cfg(not(feature = "live"))]
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[cfg(feature = "live")]
use cli::ApiArgs;
use cli::{CalibrateArgs, OutputArgs, RuntimeArgs, WorkloadArgs};
use tracing_subscriber::EnvFilter;
use wasmsched::experiment::paper::Figure;
use wasmsched::experiment::sweep::Axis;
use wasmsched::scaffold::Lang;

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
        /// How many seeds each policy runs with: 6 is the fewest with which the paired test
        /// can find a difference at 5 %.
        #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u64).range(1..))]
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
        /// Write the run's telemetry recording here (every tick's snapshot and decision, as
        /// `[record] telemetry` writes on a live host), for `replay` and `whatif`.
        #[arg(long)]
        record: Option<PathBuf>,
        #[command(flatten)]
        runtime: RuntimeArgs,
    },
    /// What if a recorded cluster had run other policies: the recording (`[record]
    /// telemetry`, or `simulate --record`) becomes a scenario of its nodes and its jobs at
    /// their measured speeds, and each policy runs it closed-loop on the simulator; print the
    /// mean JCT recorded beside each policy's, per tenant, and per job with what its speed
    /// rests on.
    Whatif {
        /// The telemetry recording.
        #[arg(long)]
        recording: PathBuf,
        /// Shipped policy names or `.wasm` paths; give it once per policy (the recorded one
        /// among them to check the replay against the recording).
        #[arg(long = "policy", required = true)]
        policies: Vec<String>,
        /// How many seeds (0, 1, … N-1) each policy runs with.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        seeds: u64,
        /// Time between policy calls, on the simulator's clock (default: the recording's).
        #[arg(long, value_parser = humantime::parse_duration)]
        tick: Option<std::time::Duration>,
        /// Print each job's figures when there are at most this many jobs.
        #[arg(long, default_value_t = 40)]
        show_jobs: usize,
        /// How long the watchdog lets a placing policy leave a job waiting that would fit
        /// (60 s unless given): longer than a round for a policy that plans in rounds.
        #[arg(long, value_parser = humantime::parse_duration)]
        stall_after: Option<std::time::Duration>,
        /// Shake the recorded workload for each seed: every gap between arrivals and every
        /// job's work times its own factor in [1 − F, 1 + F] (`0.1` or `10%`).
        #[arg(long, default_value = "0", value_parser = cli::perturbation)]
        perturb: f64,
        #[command(flatten)]
        out: OutputArgs,
        #[command(flatten)]
        runtime: RuntimeArgs,
    },
    /// Check the simulator against published results: `pollux` (Tiresias on Pollux's workloads
    /// 1–4, our mean JCT beside the one Pollux's simulator published; exit status 1 when one is
    /// more than 10 % off), `sia-table-3` and `sia-table-4` (Sia's Tables 3 and 4: Sia,
    /// Pollux, Gavel and Themis on Sia's traces and clusters, ours beside the paper's; exit
    /// status 1 when an average JCT is more than 15 % off or the policies rank otherwise).
    Fidelity {
        /// Which published results.
        #[arg(value_enum, default_value_t = cli::experiments::Published::Pollux)]
        which: cli::experiments::Published,
        /// How many seeds (0, 1, … N-1) each workload runs with.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
        seeds: u64,
        /// Sia's tables: run only the first N traces of each trace set.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        traces: Option<u64>,
        /// Sia's tables: run only these policies (sia, pollux, gavel, themis); give it once per
        /// policy.
        #[arg(long = "policy")]
        policies: Vec<String>,
        /// Sia's tables: run only these trace sets (philly, newtrace); give it once per set.
        #[arg(long = "set")]
        sets: Vec<String>,
        /// Sia's tables: write our rows as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
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
        #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u64).range(1..))]
        seeds: u64,
        #[command(flatten)]
        out: OutputArgs,
        #[command(flatten)]
        runtime: RuntimeArgs,
    },
    /// A/B test policies on the simulator the way a live cluster would run them: a switchback
    /// (one arm active at a time, in randomised blocks with a burn-in) or a split (every arm at
    /// once, each job on one arm), each arm's mean JCT, wait, throughput and GPU use against the
    /// first's by Little's law and naively, with intervals; with --truth, every arm also alone
    /// on the same workload and seed, and each estimator's bias, error and interval coverage
    /// over the seeds.
    Abtest {
        #[command(flatten)]
        workload: WorkloadArgs,
        /// Shipped policy names or `.wasm` paths, once per arm; the first is the baseline. The
        /// same one twice is an A/A test (the second labelled NAME#2).
        #[arg(long = "policy", required = true)]
        policies: Vec<String>,
        /// How the arms share the cluster: `switchback` (in turn) or `split` (side by side).
        #[arg(long, default_value = "switchback")]
        design: wasmsched::experiment_design::Design,
        /// In a split, what each job's arm is drawn from: `name` or `tenant` (hashed).
        #[arg(long, default_value = "name")]
        assign: wasmsched::experiment_design::Assign,
        /// How long each block runs one arm (on the simulator's clock); in a split, the
        /// batches the intervals are taken over.
        #[arg(long, default_value = "2h", value_parser = humantime::parse_duration)]
        block: std::time::Duration,
        /// The start of each block left out of every figure (in a split, the start of the run).
        #[arg(long, default_value = "30m", value_parser = humantime::parse_duration)]
        burn_in: std::time::Duration,
        /// Replications: seeds 0, 1, … N-1, each its own order or assignment and simulation.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
        seeds: u64,
        /// Also run every arm alone on each seed, and check the estimators against it.
        #[arg(long)]
        truth: bool,
        /// Write every replication and the checks as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
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
    #[cfg(feature = "live")]
    /// Put a policy component into an OCI registry as a Wasm artifact (CNCF TAG Runtime's
    /// layout: one `application/wasm` layer) and print `REF@sha256:…`, the digest to pin. The
    /// file is checked to be a policy component first.
    Push {
        /// The policy component (`.wasm`).
        file: PathBuf,
        /// Where: `REGISTRY/REPOSITORY:TAG` (`127.0.0.1:5000/policies/fair-share:v1`).
        reference: String,
        #[command(flatten)]
        registry: cli::oci::RegistryArgs,
    },
    #[cfg(feature = "live")]
    /// Fetch a policy component from an OCI registry, check it is a Wasm artifact and every
    /// digest, and write it whole (renamed into place: safe in a watched policies folder).
    Pull {
        /// What: `REGISTRY/REPOSITORY:TAG`, `…@sha256:…` (pinned), or both (then the tag must
        /// still name the pinned digest).
        reference: String,
        /// Where to write it: a file, or a folder to write it into under the name it was
        /// pushed with (else the repository's last part and `.wasm`); default: that name in the
        /// current folder.
        #[arg(short, long)]
        output: Option<PathBuf>,
        #[command(flatten)]
        registry: cli::oci::RegistryArgs,
    },
    #[cfg(feature = "live")]
    /// Keys for signing policies, as cosign writes them.
    Key {
        #[command(subcommand)]
        command: cli::trust::KeyCommand,
    },
    #[cfg(feature = "live")]
    /// Sign a policy artifact in its registry as `cosign sign --key` does (a signature image at
    /// the `sha256-<hex>.sig` tag beside it) and print the digest signed; or, with --blob, a
    /// file as `cosign sign-blob` does (its base64 signature). The private key's password comes
    /// from COSIGN_PASSWORD.
    Sign {
        /// What: `REGISTRY/REPOSITORY@sha256:…`; a tag alone is resolved to the digest it names
        /// now, and that digest is signed (and said).
        #[arg(required_unless_present = "blob", conflicts_with = "blob")]
        reference: Option<String>,
        /// Sign this file instead of an artifact.
        #[arg(long)]
        blob: Option<PathBuf>,
        /// The private key: PREFIX.key of `wasmsched key generate`, or cosign.key.
        #[arg(long)]
        key: PathBuf,
        /// An annotation the signature carries, `KEY=VALUE` (a `[trust]` signer can require
        /// it); once per annotation. Not with --blob: a blob's signature carries none.
        #[arg(short = 'a', long = "annotation", value_parser = cli::trust::parse_annotation, conflicts_with = "blob")]
        annotations: Vec<(String, String)>,
        /// With --blob: write the signature to this file, not to stdout.
        #[arg(short, long, requires = "blob")]
        output: Option<PathBuf>,
        #[command(flatten)]
        registry: cli::oci::RegistryArgs,
    },
    #[cfg(feature = "live")]
    /// Check a policy artifact's signatures (cosign's, or `wasmsched sign`'s) against a
    /// `[trust]` table or one public key; or, with --blob, a file's. Print who signed; exit 1,
    /// saying why, when the signatures are not those required.
    Verify {
        /// What: `REGISTRY/REPOSITORY@sha256:…`, or a tag (the digest it names now is checked).
        #[arg(required_unless_present = "blob", conflicts_with = "blob")]
        reference: Option<String>,
        /// Check this file's signature instead of an artifact's.
        #[arg(long, requires = "signature")]
        blob: Option<PathBuf>,
        /// With --blob: the file holding its base64 signature (`cosign sign-blob`'s).
        #[arg(long, requires = "blob")]
        signature: Option<PathBuf>,
        /// A TOML file with a `[trust]` table (the host's config will do); key paths in it are
        /// relative to its folder.
        #[arg(long, required_unless_present = "key", conflicts_with = "key")]
        trust: Option<PathBuf>,
        /// One public key (PEM, cosign.pub) that must have signed.
        #[arg(long)]
        key: Option<PathBuf>,
        #[command(flatten)]
        registry: cli::oci::RegistryArgs,
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
    #[cfg(feature = "live")]
    /// Run the host: the configured policies on the backend, hot-reloading the policies
    /// directory, with the control API on loopback. Ctrl-C stops it cleanly.
    Run {
        /// The host's config (TOML).
        #[arg(long)]
        config: PathBuf,
        /// Serve the API, the operator's page with it, on this TCP address too (over `[api]
        /// http`), e.g. `0.0.0.0:7878` in a pod; any address but loopback needs a token.
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
        /// Read the API's token from this file (a mounted Secret), over `[api] token`.
        #[arg(long, value_name = "PATH")]
        token_file: Option<PathBuf>,
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
    #[cfg(feature = "live")]
    /// Print a running host's status: policies, versions, digests, counters, reloads.
    Status {
        #[command(flatten)]
        api: ApiArgs,
        /// Print the raw JSON.
        #[arg(long)]
        json: bool,
    },
    #[cfg(feature = "live")]
    /// Ask a running host whether it is ready (its world is warm) or live (its loop ends
    /// ticks): exit 0 for yes, 1 and why for no. For a pod's exec probes.
    Probe {
        /// Which question.
        #[arg(value_enum)]
        which: wasmsched::api::client::Probe,
        #[command(flatten)]
        api: ApiArgs,
    },
    #[cfg(feature = "live")]
    /// End a running host's `[experiment]` now: each arm's figures so far stay in its status,
    /// and the configured roles serve again.
    StopExperiment {
        #[command(flatten)]
        api: ApiArgs,
    },
    #[cfg(feature = "live")]
    /// Bring back a policy's previous version on a running host.
    Rollback {
        /// The policy's name (with --resource: the SchedulingPolicy's).
        policy: String,
        /// Roll back the cluster's SchedulingPolicy resource instead of one host: apply again
        /// the spec of the version served before (its status.history), for every replica.
        #[arg(long)]
        resource: bool,
        /// With --resource: the resource's namespace (default wasmsched-system).
        #[arg(long, requires = "resource")]
        namespace: Option<String>,
        /// With --resource: the kubeconfig (default KUBECONFIG, ~/.kube/config, or the pod's
        /// service account).
        #[arg(long, requires = "resource")]
        kubeconfig: Option<PathBuf>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Print the SchedulingPolicy CustomResourceDefinition (`wasmsched crd | kubectl apply -f -`).
    #[cfg(feature = "kubernetes")]
    Crd,
    /// Measure a job on a Docker Engine: run its image under a few CPU limits, read its epoch
    /// lines, fit its work per epoch, most useful cores and start-up, keep its learning curve,
    /// and write a profile a scenario's `[[profile]]` runs in the simulator.
    Calibrate(CalibrateArgs),
    /// A command of the live host or the registries, in a binary built without them.
    #[cfg(not(feature = "live"))]
    #[command(external_subcommand)]
    Elsewhere(Vec<OsString>),
}

/// kube-client logs every request that fails at ERROR, one line each: at a thousand nodes whose
/// kubelets do not answer that was hundreds of lines a second. The Kubernetes backend reports
/// its failures itself, once per cause (`RUST_LOG=kube_client=debug` shows them all).
const KUBE_QUIET: &str = "kube_client::client::builder=off";

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A simulated run asks its policies thousands of times in a few seconds: their own info
    // lines would drown the table, so they show from warn up (RUST_LOG=policy=info for all).
    let batch = matches!(
        cli.command,
        Command::Demo { .. }
            | Command::Simulate { .. }
            | Command::Compare { .. }
            | Command::Abtest { .. }
            | Command::Whatif { .. }
            | Command::Sweep { .. }
            | Command::Fidelity { .. }
    );
    let policy = if batch { "warn" } else { "info" };
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("info,policy={policy},cranelift=warn,wasmtime=warn,{KUBE_QUIET}")));
    // A closed stderr (`2>&1 | head`) loses the log, and nothing else: the writer's errors are
    // not reported (reporting them would write to stderr again, and panic).
    // Colours only on a terminal: `kubectl logs` and `docker logs` read plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .log_internal_errors(false)
        .init();
    let code = match run(cli) {
        Ok(code) => code,
        Err(e) => {
            say!("error: {e:#}");
            ExitCode::from(2)
        }
    };
    // A reader that closed stdout early (`| head`) saw part of the results: say so in the status.
    if cli::stdout_gone() { ExitCode::from(1) } else { code }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Demo { seeds, report, runtime } => cli::experiments::demo(seeds, &report, &runtime),
        Command::Simulate { workload, policy, seed, json, record, runtime } => {
            cli::experiments::simulate(&workload, policy, seed, json.as_deref(), record.as_deref(), &runtime)
        }
        Command::Whatif { recording, policies, seeds, tick, show_jobs, stall_after, perturb, out, runtime } => {
            let args =
                cli::experiments::WhatifArgs { recording, policies, seeds, tick, show_jobs, stall_after, perturb };
            cli::experiments::whatif(&args, &out, &runtime)
        }
        Command::Compare { workload, policies, seeds, out, runtime } => {
            cli::experiments::compare(&workload, policies, seeds, &out, &runtime)
        }
        Command::Abtest { workload, policies, design, assign, block, burn_in, seeds, truth, json, runtime } => {
            let args = cli::experiments::AbtestArgs { policies, design, assign, block, burn_in, seeds, truth, json };
            cli::experiments::abtest(&workload, &args, &runtime)
        }
        Command::Sweep { workload, policy, axes, fixed, baseline, figure, seeds, threads, out, runtime } => {
            let sweep = cli::experiments::SweepArgs { policy, axes, fixed, baseline, figure, seeds, threads };
            cli::experiments::sweep(&workload, sweep, &out, &runtime)
        }
        Command::Fidelity { which, seeds, traces, policies, sets, json, runtime } => {
            let traces = traces.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
            let select = wasmsched::experiment::sia_tables::Select { traces, sets, policies };
            let sia = cli::experiments::SiaTableArgs { select, json };
            cli::experiments::fidelity(which, seeds, sia, &runtime)
        }
        Command::Validate { files, runtime } => cli::policy::validate(&files, &runtime),
        Command::New { name, lang, dir, sdk } => cli::policy::new(&name, lang, dir, sdk),
        #[cfg(feature = "live")]
        Command::Push { file, reference, registry } => cli::oci::push(&file, &reference, &registry),
        #[cfg(feature = "live")]
        Command::Pull { reference, output, registry } => cli::oci::pull(&reference, output.as_deref(), &registry),
        #[cfg(feature = "live")]
        Command::Key { command } => cli::trust::key(&command),
        #[cfg(feature = "live")]
        Command::Sign { reference, blob, key, annotations, output, registry } => match (blob, reference) {
            (Some(file), _) => cli::trust::sign_blob(&file, &key, output.as_deref()),
            (None, Some(reference)) => cli::trust::sign(&reference, &key, annotations, &registry),
            (None, None) => anyhow::bail!("give REF or --blob FILE"),
        },
        #[cfg(feature = "live")]
        Command::Verify { reference, blob, signature, trust, key, registry } => {
            let trusted = match (&trust, &key) {
                (Some(path), _) => cli::trust::Trusted::Table(path),
                (None, Some(path)) => cli::trust::Trusted::Key(path),
                (None, None) => anyhow::bail!("give --trust TRUST.toml or --key KEY.pub"),
            };
            match (blob, signature, reference) {
                (Some(file), Some(signature), _) => cli::trust::verify_blob(&file, &signature, &trusted),
                (None, _, Some(reference)) => cli::trust::verify(&reference, &trusted, &registry),
                _ => anyhow::bail!("give REF, or --blob FILE and --signature FILE.sig"),
            }
        }
        #[cfg(feature = "live")]
        Command::Run { config, http, token_file } => cli::live::run_host(&config, http, token_file),
        Command::Replay { recording, policy, show, runtime } => {
            cli::experiments::replay(&recording, &policy, show, &runtime)
        }
        #[cfg(feature = "live")]
        Command::Status { api, json } => cli::live::status(&api, json),
        #[cfg(feature = "kubernetes")]
        Command::Rollback { policy, resource: true, namespace, kubeconfig, .. } => {
            cli::resources::rollback(&policy, namespace.as_deref(), kubeconfig.as_deref())
        }
        #[cfg(feature = "live")]
        Command::Rollback { policy, api, .. } => cli::live::rollback(&policy, &api),
        #[cfg(feature = "live")]
        Command::StopExperiment { api } => cli::live::stop_experiment(&api),
        #[cfg(feature = "kubernetes")]
        Command::Crd => cli::resources::crd(),
        #[cfg(feature = "live")]
        Command::Probe { which, api } => Ok(cli::live::probe(which, &api)),
        Command::Calibrate(args) => cli::calibrate::calibrate(args),
        #[cfg(not(feature = "live"))]
        Command::Elsewhere(args) => {
            let name = args.first().map_or_else(String::new, |a| a.to_string_lossy().into_owned());
            anyhow::bail!(
                "`wasmsched {name}` is not a command of this build: it was built without the live host and the \
                 registries (--no-default-features), which `run`, `status`, `rollback`, `stop-experiment`, `probe`, \
                 `push`, `pull`, `key`, `sign` and `verify` need. Build the whole binary with `cargo build --release`."
            )
        }
    }
}
