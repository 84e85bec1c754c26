//! `wasmsched calibrate`: measure a job on a Docker Engine into a profile the simulator runs.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

#[derive(Args)]
#[cfg_attr(not(feature = "docker"), allow(dead_code, reason = "read only by a host built with the docker feature"))]
pub struct CalibrateArgs {
    /// The job's image, already on the engine.
    #[arg(long)]
    pub image: String,
    /// The profile's name (what scenarios write in `model`).
    #[arg(long)]
    pub name: String,
    /// Where to write the profile (TOML).
    #[arg(long)]
    pub out: PathBuf,
    /// The Docker Engine (default: DOCKER_HOST, else the system socket).
    #[arg(long)]
    pub engine: Option<String>,
    /// CPU allocations to run with, in cores, comma-separated (default: 0.5, 1 and all the
    /// engine's cores). The job runs alone to the end with the largest; a smaller one runs as
    /// a CFS share among copies side by side (the engine's cores divided by 2, 3, 4 …) and
    /// alone under a CPU quota (`docker run --cpus`).
    #[arg(long, value_delimiter = ',')]
    pub limits: Vec<f64>,
    /// Epochs timed under each limit but the largest.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(2..))]
    pub epochs_per_limit: u32,
    /// The metric the job's epoch lines carry.
    #[arg(long, default_value = "accuracy")]
    pub metric: String,
    /// A lower metric is better (a loss, an error rate).
    #[arg(long)]
    pub lower_is_better: bool,
    /// How long one run may take.
    #[arg(long, default_value = "30m", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// The job's command (after `--`); the image's own when absent.
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// `wasmsched calibrate` in a host built without Docker: say how to get one.
#[cfg(not(feature = "docker"))]
pub fn calibrate(_: CalibrateArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!(
        "this wasmsched was built without the docker backend, which calibrate runs on: rebuild with --features docker"
    )
}

/// `wasmsched calibrate`: run the job under a few CPU limits and write its profile.
#[cfg(feature = "docker")]
pub fn calibrate(args: CalibrateArgs) -> anyhow::Result<ExitCode> {
    use anyhow::Context;
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
    out!(
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
    out!(
        "{:>8} {:>10} {:>12} {:>12} {:>12} {:>14}",
        "cores",
        "as",
        "epoch s",
        "fitted s",
        "start-up s",
        "CPU/epoch c·s"
    );
    for l in done.profile.measured.iter().flat_map(|m| &m.limits) {
        let cpu = l.cpu_per_epoch_core_s.map_or_else(|| "-".to_string(), |c| format!("{c:.3}"));
        let how = match (l.quota, l.copies) {
            (true, _) => "quota".to_string(),
            (false, 1) => "alone".to_string(),
            (false, n) => format!("share ×{n}"),
        };
        out!(
            "{:>8.2} {how:>10} {:>12.3} {:>12.3} {:>12.2} {cpu:>14}",
            l.cores,
            l.epoch_s,
            l.fitted_epoch_s,
            l.startup_s
        );
    }
    if let Some(usable) = done.profile.measured.as_ref().and_then(|m| m.usable_cores()) {
        out!(
            "usable cores: {usable:.2} (what the containers got when they filled the engine: simulate this machine as a node of that many)"
        );
    }
    out!("profile: {}", args.out.display());
    Ok(ExitCode::SUCCESS)
}
