//! `wasmsched calibrate`: measures a real job on a real Docker Engine and writes what the
//! simulator needs to run it ([`Profile`]).
//!
//! The job runs from its image with each of a few CPU allocations (by default 0.5, 1 and all
//! the engine's cores). The whole engine it gets alone; a smaller allocation it gets twice: as
//! a CFS share, running beside copies of itself (four copies on two cores give each half a
//! core), which is how jobs share a node under fair-share; and alone under a CPU quota
//! (`docker run --cpus`), as a policy's limits give it. The two differ for a job of several
//! threads: a quota lets its threads burn the period's budget together and then stalls them,
//! and the two-threaded trainer takes 5–15 % longer per epoch that way than as a share of the
//! same size. Its epoch lines are read from its
//! log with the Docker backend's own parser ([`wasmsched_core::live::progress`]: JSON lines
//! naming the metric, or FlowCon's `Loss: x Time: t`), each stamped by the engine. Under the
//! largest limit it runs to the end, which gives its learning curve (a deterministic job, such
//! as `jobs/trainer` for a seed, walks the same curve every time); under the others it runs
//! only the first few epochs. The engine's stats give the CPU time charged to it and its
//! memory (the most reported).
//!
//! From the epoch times under each limit [`fit`] finds the work of an epoch and the most
//! cores the job uses usefully (its module says how, and why that model), and the start-up:
//! from the container's creation to its first epoch. Each container is removed when its run
//! ends, whatever happens.

pub mod fit;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bollard::Docker as Client;
use bollard::errors::Error as DockerError;
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters as q;
use fit::{FitError, LimitSample};
use futures_util::StreamExt;

use wasmsched_core::bindings::wit;
use wasmsched_core::live::progress::{self, Line, unix_ns};
use wasmsched_sim::profile::{Costs, LimitRun, Measured, Profile, ProfileError};

/// What to calibrate, and how.
#[derive(Clone, Debug)]
pub struct Spec {
    /// The engine: `unix:///path/docker.sock` or `tcp://HOST:PORT`.
    pub endpoint: String,
    /// The job's image, already on the engine.
    pub image: String,
    /// Its command; the image's own when empty.
    pub command: Vec<String>,
    /// The profile's name.
    pub name: String,
    /// The metric its epoch lines carry.
    pub metric: String,
    /// Whether a higher or a lower metric is better.
    pub direction: wit::Direction,
    /// The CPU allocations to run under, in cores; empty: 0.5, 1 and the engine's cores.
    /// Each below the engine's cores runs as a CFS share (as many copies side by side as
    /// split the engine's cores into it) and as a CPU quota (`docker run --cpus`, alone).
    pub limits_cores: Vec<f64>,
    /// Epochs to time under every limit but the largest (where the job runs to the end).
    pub epochs_per_limit: u32,
    /// How long one run may take.
    pub timeout: Duration,
}

/// A calibrated profile, with the fit behind it.
#[derive(Clone, Debug)]
pub struct Calibration {
    /// What the simulator reads.
    pub profile: Profile,
    /// The fitted model and how each limit compares with it.
    pub fit: fit::Fit,
}

/// Why a calibration failed. Each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    /// The async runtime could not start.
    #[error("cannot start the Docker client's runtime")]
    Runtime(#[source] std::io::Error),
    /// The engine does not answer.
    #[error(
        "cannot reach the Docker Engine at {endpoint}: start one (`.ci/docker-engine start` prints its endpoint) \
         and pass it with --engine or DOCKER_HOST"
    )]
    Engine {
        /// The endpoint tried.
        endpoint: String,
        /// What the client said.
        #[source]
        source: DockerError,
    },
    /// The image is not on the engine.
    #[error(
        "image {image} is not on the engine at {endpoint}: build or load it there first (docker build, docker load)"
    )]
    ImageMissing {
        /// The image.
        image: String,
        /// The engine.
        endpoint: String,
    },
    /// A call to the engine about a calibration container failed.
    #[error("{what} {container} failed")]
    Docker {
        /// What was asked.
        what: &'static str,
        /// The container.
        container: String,
        /// What the engine said.
        #[source]
        source: DockerError,
    },
    /// A share whole copies cannot make.
    #[error(
        "{cores} cores cannot be made on {engine_cores} CPUs by running whole copies side by side: give the \
         engine's cores divided by 2, 3, 4 … (e.g. --limits {half},{engine_cores})"
    )]
    Share {
        /// The allocation asked for.
        cores: f64,
        /// The engine's CPUs.
        engine_cores: f64,
        /// Half of them, for the example.
        half: f64,
    },
    /// A limit the engine cannot give.
    #[error("limit {cores} cores: the engine has {engine_cores} CPUs; give limits from 0.01 to {engine_cores}")]
    Limit {
        /// The limit asked for.
        cores: f64,
        /// The engine's CPUs.
        engine_cores: f64,
    },
    /// The job printed no epoch line.
    #[error(
        "the job printed no epoch line with metric `{metric}` under {cores} cores ({ended}); its last output: {output:?}. \
         Make it print one JSON line per epoch naming the metric ({{\"epoch\": 1, \"{metric}\": 0.5}}), or name its \
         metric with --metric"
    )]
    NoEpochs {
        /// The metric looked for.
        metric: String,
        /// The limit.
        cores: f64,
        /// How the container ended.
        ended: String,
        /// Its last lines of other output.
        output: Vec<String>,
    },
    /// The job ended before enough epochs.
    #[error(
        "the job printed {found} epoch line(s) under {cores} cores and ended ({ended}); calibration needs {needed}: \
         ask it for more epochs"
    )]
    TooFewEpochs {
        /// The limit.
        cores: f64,
        /// Lines printed.
        found: usize,
        /// Lines needed.
        needed: usize,
        /// How the container ended.
        ended: String,
    },
    /// A run took too long.
    #[error("the job ran {waited:?} under {cores} cores without finishing: raise --timeout or ask for fewer epochs")]
    Timeout {
        /// The limit.
        cores: f64,
        /// How long it ran.
        waited: Duration,
    },
    /// The measurements could not be fitted.
    #[error(transparent)]
    Fit(#[from] FitError),
    /// The profile is not valid (a curve with a non-finite value, say).
    #[error(transparent)]
    Profile(#[from] ProfileError),
}

/// One run's readings.
struct Run {
    cores: f64,
    /// Engine time of the container's creation, Unix ns.
    created_ns: u64,
    /// Each epoch line: engine time, Unix ns, and the metric.
    lines: Vec<(u64, f64)>,
    /// The engine's stats: when read (engine time, Unix ns), the CPU time charged so far (ns)
    /// and the memory in use.
    stats: Vec<(u64, u64, u64)>,
    /// How many copies ran side by side.
    copies: u32,
    /// Whether it ran alone under a quota below the engine's cores (else as a share, or alone
    /// with the whole engine).
    quota: bool,
}

/// Runs the job under each limit and fits the profile; see the module docs.
pub fn calibrate(spec: &Spec) -> Result<Calibration, CalibrateError> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(CalibrateError::Runtime)?;
    rt.block_on(calibrate_on(spec))
}

async fn calibrate_on(spec: &Spec) -> Result<Calibration, CalibrateError> {
    let engine = |source| CalibrateError::Engine { endpoint: spec.endpoint.clone(), source };
    let client = wasmsched_docker::connect(&spec.endpoint, Duration::from_secs(10)).map_err(engine)?;
    let client = client.negotiate_version().await.map_err(engine)?;
    let info = client.info().await.map_err(engine)?;
    let engine_cores = info.ncpu.unwrap_or(1).max(1) as f64;
    match client.inspect_image(&spec.image).await {
        Ok(_) => {}
        Err(DockerError::DockerResponseServerError { status_code: 404, .. }) => {
            return Err(CalibrateError::ImageMissing { image: spec.image.clone(), endpoint: spec.endpoint.clone() });
        }
        Err(e) => return Err(engine(e)),
    }
    let plan = plan(spec, engine_cores)?;
    let mut runs = Vec::with_capacity(plan.len());
    for (k, &(cores, copies)) in plan.iter().enumerate() {
        let whole = k == 0;
        tracing::info!(cores, copies, whole, "calibrating {}: running {} with {cores} cores", spec.name, spec.image);
        let done = run_copies(&client, spec, cores, copies, whole, k).await?;
        tracing::info!(cores, epochs = done[0].lines.len(), "measured");
        runs.extend(done);
    }
    let since = |created_ns: u64, at: u64| at.saturating_sub(created_ns) as f64 / 1e9;
    let samples: Vec<LimitSample> = runs
        .iter()
        .map(|r| LimitSample {
            cores: r.cores,
            quota: r.quota,
            lines_s: r.lines.iter().map(|&(at, _)| since(r.created_ns, at)).collect(),
            cpu_s: r.stats.iter().map(|&(at, cpu, _)| (since(r.created_ns, at), cpu as f64 / 1e9)).collect(),
        })
        .collect();
    let fitted = fit::fit(&samples)?;
    let costs = Costs {
        work_per_epoch_core_s: fitted.work_per_epoch_core_s,
        max_cores: fitted.max_cores,
        startup_s: fitted.startup_s,
        memory_bytes: runs.iter().flat_map(|r| r.stats.iter().map(|s| s.2)).max().unwrap_or(0),
        share_cost: fitted.share_cost.clone(),
        quota_cost: fitted.quota_cost.clone(),
    };
    let curve = runs[0].lines.iter().map(|&(_, m)| m).collect();
    let mut profile = Profile::new(&spec.name, spec.name.clone(), spec.metric.clone(), spec.direction, costs, curve)?;
    profile.measured = Some(Measured {
        image: spec.image.clone(),
        command: spec.command.clone(),
        engine_cores,
        limits: fitted
            .limits
            .iter()
            .zip(&runs)
            .map(|(l, run)| LimitRun {
                cores: l.cores,
                copies: run.copies,
                quota: run.quota,
                epochs: run.lines.len() as u32,
                epoch_s: l.epoch_s,
                fitted_epoch_s: l.fitted_epoch_s,
                startup_s: l.startup_s,
                cpu_per_epoch_core_s: l.cpu_per_epoch_core_s,
            })
            .collect(),
    });
    Ok(Calibration { profile, fit: fitted })
}

/// The runs to make, (cores, copies) each: the whole run at the most cores, then each smaller
/// allocation as a share (copies side by side) and as a quota (one copy).
fn plan(spec: &Spec, engine_cores: f64) -> Result<Vec<(f64, usize)>, CalibrateError> {
    let mut limits =
        if spec.limits_cores.is_empty() { vec![0.5, 1.0, engine_cores] } else { spec.limits_cores.clone() };
    if let Some(&cores) = limits.iter().find(|&&c| !(0.01..=engine_cores).contains(&c)) {
        return Err(CalibrateError::Limit { cores, engine_cores });
    }
    // The largest first: the whole run, whose curve is the profile's.
    limits.sort_by(|a, b| b.total_cmp(a));
    limits.dedup();
    let mut plan = vec![(limits[0], 1)];
    for &cores in &limits[1..] {
        let copies = (engine_cores / cores).round().max(1.0) as usize;
        if (engine_cores / copies as f64 - cores).abs() > 0.02 * cores {
            return Err(CalibrateError::Share { cores, engine_cores, half: engine_cores / 2.0 });
        }
        plan.extend([(cores, copies), (cores, 1)]);
    }
    Ok(plan)
}

/// Runs `copies` copies of the job side by side with `cores` each: alone to the end when
/// `whole`, else for the first `epochs_per_limit` epochs, every copy kept running until all
/// have them. One copy runs under a quota of `cores`; several share the engine unlimited.
/// The containers are removed whatever happens.
async fn run_copies(
    client: &Client,
    spec: &Spec,
    cores: f64,
    copies: usize,
    whole: bool,
    k: usize,
) -> Result<Vec<Run>, CalibrateError> {
    let force = || Some(q::RemoveContainerOptions { force: true, ..Default::default() });
    let mut ids = Vec::with_capacity(copies);
    let mut created = Ok(());
    for copy in 0..copies {
        let name = format!("wasmsched-calibrate-{}-{}-{k}-{copy}", container_safe(&spec.name), std::process::id());
        let _ = client.remove_container(&name, force()).await;
        let body = ContainerCreateBody {
            image: Some(spec.image.clone()),
            cmd: (!spec.command.is_empty()).then(|| spec.command.clone()),
            labels: Some(HashMap::from([("wasmsched.calibrate".to_string(), spec.name.clone())])),
            host_config: Some(HostConfig {
                network_mode: Some("none".into()),
                nano_cpus: (copies == 1).then(|| (cores * 1e9).round() as i64),
                ..Default::default()
            }),
            ..Default::default()
        };
        let options = q::CreateContainerOptions { name: Some(name.clone()), ..Default::default() };
        match client.create_container(Some(options), body).await {
            Ok(c) => ids.push((name, c.id)),
            Err(source) => {
                created = Err(CalibrateError::Docker { what: "creating container", container: name, source });
                break;
            }
        }
    }
    let result = match created {
        Ok(()) => {
            let follows = ids.iter().map(|(_, id)| follow(client, spec, id, cores, whole));
            futures_util::future::join_all(follows)
                .await
                .into_iter()
                .zip(&ids)
                .map(|(r, (name, _))| {
                    r.map_err(|e| match e {
                        Failure::Docker(what, source) => {
                            CalibrateError::Docker { what, container: name.clone(), source }
                        }
                        Failure::Calibrate(e) => e,
                    })
                })
                .collect::<Result<Vec<Run>, CalibrateError>>()
        }
        Err(e) => Err(e),
    };
    for (_, id) in &ids {
        let _ = client.remove_container(id, force()).await;
    }
    let quota = copies == 1 && !whole;
    result.map(|runs| runs.into_iter().map(|r| Run { copies: copies as u32, quota, ..r }).collect())
}

/// How [`follow`] failed: a Docker call (named), or the job itself.
enum Failure {
    Docker(&'static str, DockerError),
    Calibrate(CalibrateError),
}

/// Starts container `id` and reads its epoch lines until it has given enough or ends.
async fn follow(client: &Client, spec: &Spec, id: &str, cores: f64, whole: bool) -> Result<Run, Failure> {
    let inspected = client.inspect_container(id, None).await.map_err(|e| Failure::Docker("inspecting container", e))?;
    let created_ns = inspected.created.as_deref().and_then(unix_ns).unwrap_or(0);
    client.start_container(id, None).await.map_err(|e| Failure::Docker("starting container", e))?;
    let started = Instant::now();
    let readings = Arc::new(Mutex::new(Vec::new()));
    let stats = {
        let (client, id, readings) = (client.clone(), id.to_string(), readings.clone());
        tokio::spawn(async move {
            let mut stream = client.stats(&id, Some(q::StatsOptions { stream: true, one_shot: false }));
            while let Some(Ok(s)) = stream.next().await {
                let cpu = s.cpu_stats.and_then(|c| c.cpu_usage).and_then(|u| u.total_usage);
                let (Some(at), Some(cpu)) = (s.read.as_deref().and_then(unix_ns), cpu) else { continue };
                let memory = s.memory_stats.and_then(|m| m.usage).unwrap_or(0);
                readings.lock().expect("readings lock").push((at, cpu, memory));
            }
        })
    };
    let metrics = [wit::MetricSpec { name: spec.metric.clone(), direction: spec.direction }];
    let needed = spec.epochs_per_limit.max(2) as usize;
    let options = q::LogsOptions { follow: true, stdout: true, stderr: true, timestamps: true, ..Default::default() };
    let mut stream = client.logs(id, Some(options));
    let (mut lines, mut splitter, mut other) = (Vec::new(), progress::Lines::default(), VecDeque::new());
    let deadline = tokio::time::Instant::now() + spec.timeout;
    let timed_out = loop {
        let chunk = match tokio::time::timeout_at(deadline, stream.next()).await {
            Err(_) => break true,
            Ok(None | Some(Err(_))) => break false,
            Ok(Some(Ok(chunk))) => chunk,
        };
        splitter.feed(&chunk.into_bytes(), |text, _| {
            let Some((at_ns, text)) = progress::timestamped(text) else { return };
            match progress::parse(text, &metrics) {
                Line::Progress { values, .. } => lines.push((at_ns, values[0])),
                _ => {
                    other.push_back(text.to_string());
                    if other.len() > 5 {
                        other.pop_front();
                    }
                }
            }
        });
        if !whole && lines.len() >= needed {
            lines.truncate(needed);
            break false;
        }
    };
    stats.abort();
    if timed_out {
        return Err(Failure::Calibrate(CalibrateError::Timeout { cores, waited: started.elapsed() }));
    }
    if lines.len() < needed {
        let state = client.inspect_container(id, None).await.ok().and_then(|c| c.state);
        let ended = match state.and_then(|s| s.exit_code) {
            Some(code) => format!("exit code {code}"),
            None => "its log ended".to_string(),
        };
        let error = if lines.is_empty() {
            CalibrateError::NoEpochs { metric: spec.metric.clone(), cores, ended, output: other.into() }
        } else {
            CalibrateError::TooFewEpochs { cores, found: lines.len(), needed, ended }
        };
        return Err(Failure::Calibrate(error));
    }
    let stats = std::mem::take(&mut *readings.lock().expect("readings lock"));
    Ok(Run { cores, created_ns, lines, stats, copies: 1, quota: !whole })
}

/// `name` with only the characters a container name may hold.
fn container_safe(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || "_.-".contains(c) { c } else { '-' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_container_safe_and_engine_times_parse() {
        assert_eq!(container_safe("small job/1"), "small-job-1");
        assert_eq!(unix_ns("1970-01-01T00:00:01.5Z"), Some(1_500_000_000));
        assert_eq!(unix_ns("yesterday"), None);
    }

    #[test]
    fn an_unreachable_engine_says_how_to_start_one() {
        let spec = Spec {
            endpoint: "unix:///nonexistent/docker.sock".into(),
            image: "x".into(),
            command: Vec::new(),
            name: "x".into(),
            metric: "accuracy".into(),
            direction: wit::Direction::HigherIsBetter,
            limits_cores: Vec::new(),
            epochs_per_limit: 4,
            timeout: Duration::from_secs(5),
        };
        let err = calibrate(&spec).expect_err("no engine there");
        assert!(matches!(err, CalibrateError::Engine { .. }), "{err:?}");
        assert!(err.to_string().contains("--engine"), "{err}");
    }
}
