//! The command line's adapters: each turns a command's arguments into calls into the library
//! and prints what comes back. [`experiments`] (demo, simulate, compare, sweep, fidelity: one
//! batch runner), [`live`] (run, status, rollback, replay), [`policy`] (validate, new),
//! [`oci`] (push, pull), [`trust`] (key, sign, verify), [`calibrate`]. The arguments several
//! commands share are here.

pub mod calibrate;
pub mod experiments;
#[cfg(feature = "live")]
pub mod live;
#[cfg(feature = "live")]
pub mod oci;
pub mod policy;
#[cfg(feature = "kubernetes")]
pub mod resources;
#[cfg(feature = "live")]
pub mod trust;

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use wasmsched::admission;
use wasmsched::results::Results;
use wasmsched::runtime::{Limits, Runtime, RuntimeConfig};
use wasmsched::scenario::{GpuJobs, LoadOptions, Scenario};

pub use calibrate::CalibrateArgs;

/// Set once stdout could not be written.
static STDOUT_GONE: AtomicBool = AtomicBool::new(false);

/// Write a line of results to stdout. When the reader has gone (a closed pipe) the host says so
/// once on stderr and writes no more, and the command exits with status 1 once done; the run
/// itself is not cut short.
pub fn out(line: std::fmt::Arguments<'_>) {
    if STDOUT_GONE.load(Ordering::Relaxed) {
        return;
    }
    if let Err(e) = writeln!(std::io::stdout().lock(), "{line}") {
        STDOUT_GONE.store(true, Ordering::Relaxed);
        say(format_args!("error: the results could not be written to stdout ({e}); the rest are not shown"));
    }
}

/// Whether stdout could not be written.
pub fn stdout_gone() -> bool {
    STDOUT_GONE.load(Ordering::Relaxed)
}

/// Write a line to stderr; a closed stderr is ignored, as the log's writer ignores it.
pub fn say(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

#[derive(Args)]
pub struct OutputArgs {
    /// Write the results as JSON here (docs/results.schema.json).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the results as CSV here.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Write an HTML report into this directory.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

impl OutputArgs {
    /// Write the JSON and CSV asked for.
    pub fn write(&self, results: &Results) -> anyhow::Result<()> {
        if let Some(path) = &self.json {
            write_file(path, |w| results.write_json(w).map_err(anyhow::Error::from))?;
        }
        if let Some(path) = &self.csv {
            write_file(path, |w| results.write_csv(w).map_err(anyhow::Error::from))?;
        }
        Ok(())
    }
}

#[cfg(feature = "live")]
#[derive(Args)]
pub struct ApiArgs {
    /// The host's control API: an address, or `unix:PATH` for a Unix socket.
    #[arg(long, default_value = wasmsched::config::DEFAULT_API)]
    pub addr: wasmsched::api::Listen,
    /// The API's bearer token, when it has one.
    #[arg(long)]
    pub token: Option<String>,
}

#[derive(Args)]
pub struct WorkloadArgs {
    /// A scenario (.toml), a Pollux workload (.csv) or the Philly trace (.csv).
    #[arg(long)]
    pub workload: PathBuf,
    /// Time between policy calls, on the simulator's clock.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub tick: Duration,
    /// Cluster size for CSV workloads (each has a documented default).
    #[arg(long)]
    pub nodes: Option<usize>,
    /// Keep only the first N jobs.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Run a CSV workload on one of Sia's 64-GPU clusters: heterogeneous-64 (6 × 4 T4,
    /// 3 × 8 RTX 2080Ti, 2 × 8 A100) or homogeneous-64 (16 × 4 T4).
    #[arg(long, value_parser = wasmsched::scenario::Cluster::parse)]
    pub cluster: Option<wasmsched::scenario::Cluster>,
    /// Make a CSV workload's GPU jobs elastic, as Sia's adaptive jobs: any GPU count a policy
    /// resizes them to, their own batch size, their model's full schedule and restore delay.
    #[arg(long)]
    pub elastic: bool,
    /// Run a CSV workload's GPU jobs as Sia's TunedJobs: rigid at their `num_replicas` and
    /// `batch_size`, by the rules of Sia's simulator otherwise (their model's full schedule,
    /// progress by goodput, restore delay).
    #[arg(long, conflicts_with = "elastic")]
    pub tuned_jobs: bool,
    /// Do not give jobs without targets the default targets derived from their curves.
    #[arg(long)]
    pub no_default_targets: bool,
    /// How long the watchdog lets a placing policy leave a job waiting that would fit, before
    /// the host starts it (the workload's `[watchdog] stall-after`, 60 s unless it says):
    /// longer than a round for a policy that plans in rounds (Gavel, Themis: 360 s).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub stall_after: Option<Duration>,
    /// Declare the workload's tenants from a TOML file of `[[tenants]]` tables (their weights,
    /// quotas, borrowing limits and cohorts, as in the host's config), in place of the
    /// scenario's own: a Philly job's tenant is its virtual cluster.
    #[arg(long)]
    pub tenants: Option<PathBuf>,
    /// Shake the workload for each seed (input shaking): every gap between arrivals, every
    /// job's work and every service's duration times its own factor in [1 − F, 1 + F], drawn
    /// per seed, so that a result is not one trace's artefact. `0.1` or `10%` is ±10 %.
    #[arg(long, default_value = "0", value_parser = perturbation)]
    pub perturb: f64,
}

/// `--perturb`: a fraction in [0, 0.9], as `0.1` or `10%`.
pub fn perturbation(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let value = match t.strip_suffix('%') {
        Some(percent) => percent.trim().parse::<f64>().map(|p| p / 100.0),
        None => t.parse::<f64>(),
    };
    match value {
        Ok(f) if (0.0..=0.9).contains(&f) => Ok(f),
        _ => Err(format!(
            "{text:?}: give a fraction from 0 to 0.9 (0.1, or 10%): how far each gap, work and duration may move"
        )),
    }
}

impl WorkloadArgs {
    pub fn load(&self) -> anyhow::Result<Scenario> {
        let jobs = match (self.elastic, self.tuned_jobs) {
            (true, _) => GpuJobs::Elastic,
            (_, true) => GpuJobs::Tuned,
            _ => GpuJobs::Rigid,
        };
        let opts = LoadOptions { nodes: self.nodes, limit: self.limit, cluster: self.cluster, jobs };
        let mut scenario = Scenario::load(&self.workload, &opts).context("cannot use the workload")?;
        if let Some(after) = self.stall_after {
            scenario.watchdog.stall_after = after;
        }
        if let Some(path) = &self.tenants {
            scenario.tenants = wasmsched::tenants::load(path)?;
        }
        scenario.perturb = self.perturb;
        Ok(if self.no_default_targets { scenario } else { scenario.with_default_targets() })
    }
}

#[derive(Args)]
pub struct RuntimeArgs {
    /// Deadline per policy call, in milliseconds.
    #[arg(long, default_value_t = 50)]
    pub deadline_ms: u64,
    /// Budget for starting an instance, in milliseconds: making it with its `init`, and again
    /// its first decide (apart from the per-call deadline: a component that bundles an
    /// interpreter needs more to start).
    #[arg(long, default_value_t = 1000)]
    pub instantiate_ms: u64,
    /// Memory cap per policy instance, in MiB.
    #[arg(long, default_value_t = 64)]
    pub memory_mib: u64,
    /// Where compiled policies are cached (default: ~/.cache/wasmsched).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Compile every time; do not read or write the cache.
    #[arg(long)]
    pub no_cache: bool,
}

impl RuntimeArgs {
    pub fn runtime(&self) -> anyhow::Result<(Runtime, Limits)> {
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

/// Create `path` and fill it with `write`, buffered.
pub fn write_file(
    path: &std::path::Path,
    write: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let file = std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    write(&mut out)
        .and_then(|()| Ok(std::io::Write::flush(&mut out)?))
        .with_context(|| format!("cannot write {}", path.display()))
}

/// A progress bar over `len` units that shows itself only once its work takes longer than a
/// second; `what` says what is counted.
pub fn progress_bar(len: u64, what: &str) -> impl Fn(u64) + Sync {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
    let template = format!("{{elapsed_precise}} [{{bar:30}}] {{percent:>3}}% of {what}, ETA {{eta}}");
    bar.set_style(ProgressStyle::with_template(&template).expect("a valid template"));
    let started = Instant::now();
    move |pos| {
        if bar.is_hidden() && started.elapsed() > Duration::from_secs(1) {
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
        bar.set_position(pos);
        if pos >= len {
            bar.finish_and_clear();
        }
    }
}

/// One line per policy; returns how many failed.
pub fn print_admissions(
    results: impl Iterator<Item = (String, Result<admission::Admitted, admission::AdmissionError>)>,
) -> usize {
    let mut failed = 0;
    for (name, result) in results {
        match result {
            Ok(ok) => out!("{ok}"),
            Err(e) => {
                failed += 1;
                out!("FAILED {name}: {}", wasmsched::error_chain(&e));
            }
        }
    }
    failed
}
