//! What the simulator runs: a [`Workload`] of nodes ([`NodeSpec`]) and planned jobs
//! ([`JobPlan`]), loaded from one of three formats, each validated with an error that names the
//! file, the line and what to change ([`WorkloadError`]).
//!
//! **TOML scenario** (`.toml`, our own format, documented field by field in
//! `scenarios/README.md`): `[[node]]` and `[[job]]` tables, durations as `"30s"`, memory as
//! `"64GiB"`, a `count`/`every` shortcut for repeated jobs. Unknown keys are refused.
//!
//! **Pollux workload** (`.csv` with header `name,time,application,num_replicas,batch_size`, the
//! `workload-*.csv` of the Pollux OSDI'21 artifact): one training job per row, arriving `time`
//! seconds in, of model `application`, asking for `num_replicas` GPUs at global batch size
//! `batch_size`. Default cluster: [`POLLUX_NODES`] nodes of 64 cores, 256 GiB, 4 GPUs of 32 GiB
//! each, the 16 × 4-GPU shape of Pollux's testbed (its CPU and memory figures are ours).
//!
//! **Philly trace** (`.csv` with header `timestamp,duration,num_gpus,gpu_time,cluster`, the
//! Pollux authors' extract of Microsoft's Philly trace, 82,247 jobs). Mapped as Pollux's
//! `workload.py` does, without its 8-hour window and sampling:
//! - rows with `duration < 60 s` or `gpu_time ≥ 1000` GPU-hours are dropped;
//! - arrival = seconds since the earliest `timestamp` kept (`YYYY-MM-DD HH:MM:SS`, no zone);
//! - the model follows the GPU time: under 1 GPU-hour cifar10 on odd data rows and ncf on even
//!   ones; under 10, deepspeech2 on odd rows and bert on even ones; under 100, yolov3; else
//!   imagenet;
//! - `gpus = num_gpus`, the model's default batch size, and a `work_scale` such that the job,
//!   alone on its GPUs packed on the fewest nodes, walks its whole curve in `duration` seconds
//!   at the measured step times (a CPU job, `num_gpus = 0`: alone with
//!   [`Model::max_parallelism_cores`] cores);
//! - the job is named `philly-<row>`, `<row>` being its 1-based data row in the file.
//!
//! Default cluster: [`PHILLY_NODES`] nodes of 64 cores, 512 GiB, 8 GPUs of 32 GiB.
//!
//! Whatever the format, jobs are sorted by arrival (stably), names are unique, and
//! [`LoadOptions`] may resize a CSV workload's cluster and keep only its first jobs.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

use super::model::Model;
use super::profile::{JobCurve, Profile};
use crate::bindings::wit;
use crate::budget::BudgetConfig;
use crate::experiment::paper::Claim;

mod scenario;
mod trace;

pub(crate) use scenario::parse_bytes;
use scenario::scenario;
use trace::{CsvFormat, detect, philly, pollux};

const GIB: u64 = 1 << 30;

/// Nodes in the default cluster of a Pollux workload.
pub const POLLUX_NODES: usize = 16;
/// Nodes in the default cluster of the Philly trace.
pub const PHILLY_NODES: usize = 256;

/// Nodes and planned jobs, ready for the simulator.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Workload {
    /// A short name for reports: the scenario's `name`, else the file's stem.
    pub name: String,
    /// The cluster, at least one node.
    pub nodes: Vec<NodeSpec>,
    /// The jobs, at least one, sorted by `arrival_s` (stable: ties keep the file's order).
    pub jobs: Vec<JobPlan>,
    /// What a paper reports for this workload (scenarios' `[[paper]]` tables), to print
    /// beside our figures.
    pub paper: Vec<Claim>,
    /// The disruption budget its runs go under: a scenario's `[budget]` table, the cautious
    /// default when it has none; off for Pollux's workloads and the Philly trace, which
    /// reproduce published set-ups.
    pub budget: BudgetConfig,
}

/// One node of the simulated cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeSpec {
    /// Unique name, e.g. `node-0`.
    pub name: String,
    /// CPU capacity, in millicores (1000 = one core); never zero.
    pub cpu_millicores: u64,
    /// Memory capacity.
    pub memory_bytes: u64,
    /// GPUs on the node.
    pub gpus: u32,
    /// Memory of each GPU.
    pub gpu_memory_bytes: u64,
}

/// One job the simulator will start at `arrival_s`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobPlan {
    /// Unique within the workload; stable across runs and seeds.
    pub name: String,
    /// Which model it trains (or serves), hence its curve and costs; unused when `profile` is
    /// set.
    pub model: Model,
    /// A calibrated job kind it runs instead of a built-in model: the profile's curve, metric,
    /// costs, start-up and name replace `model`'s (a scenario's `[[profile]]`).
    #[serde(serialize_with = "profile_name")]
    pub profile: Option<Arc<Profile>>,
    /// Training or inference; inference only comes from scenarios.
    pub kind: wit::JobKind,
    /// When it arrives, in seconds from the start of the run (≥ 0).
    pub arrival_s: f64,
    /// Pinned placement (an index into [`Workload::nodes`]); `None` lets the simulator place it.
    pub node: Option<u32>,
    /// Global batch size; picks the nearest measured curve.
    pub batch_size: u32,
    /// GPUs it asks for, in all.
    pub gpus: u32,
    /// Into how many pieces it may be split across nodes (each takes `gpus / replicas`);
    /// 1 keeps it on one node.
    pub replicas: u32,
    /// Stop after this many epochs even if the curve goes on.
    pub max_epochs: Option<u32>,
    /// Multiplies the model's work per epoch; 1.0 by default.
    pub work_scale: f64,
    /// TRADL tiers `(T1, T2)` on the main metric; T1 is the easier one.
    pub tiers: Option<(f64, f64)>,
    /// DQoES target: seconds per epoch (training) or milliseconds per request (inference).
    pub qoe_target: Option<f64>,
    /// Inference: requests per second (always set for inference).
    pub request_rate: Option<f64>,
    /// Inference: how long the service runs, in seconds (always set for inference).
    pub duration_s: Option<f64>,
    /// False opts the job out of disruption: it declares `wasmsched.disruptible=false`, and
    /// the disruption budget refuses to stop, migrate or preempt it.
    pub disruptible: bool,
}

impl JobPlan {
    /// A training job of `model` arriving at `arrival_s`: the model's default batch size, no
    /// GPU, no pinned node, its whole curve at the model's work per epoch, no targets.
    pub fn training(name: impl Into<String>, model: Model, arrival_s: f64) -> JobPlan {
        JobPlan {
            name: name.into(),
            model,
            profile: None,
            kind: wit::JobKind::Training,
            arrival_s,
            node: None,
            batch_size: model.default_batch_size(),
            gpus: 0,
            replicas: 1,
            max_epochs: None,
            work_scale: 1.0,
            tiers: None,
            qoe_target: None,
            request_rate: None,
            duration_s: None,
            disruptible: true,
        }
    }

    /// A training job of a calibrated `profile` arriving at `arrival_s`: its whole curve, no
    /// GPU, no pinned node, no targets.
    pub fn profiled(name: impl Into<String>, profile: Arc<Profile>, arrival_s: f64) -> JobPlan {
        JobPlan { profile: Some(profile), ..JobPlan::training(name, Model::Cifar10, arrival_s) }
    }

    /// The learning curve it walks: its profile's, else its model's at its batch size.
    pub fn curve(&self) -> JobCurve {
        match &self.profile {
            Some(p) => JobCurve::Profile(p.curve().clone()),
            None => JobCurve::Model(self.model.curve(self.batch_size)),
        }
    }

    /// The name of its model or profile, for reports.
    pub fn model_name(&self) -> &str {
        self.profile.as_ref().map_or(self.model.name(), |p| p.name.as_str())
    }

    /// The name and direction of its main metric.
    pub fn metric(&self) -> (&str, wit::Direction) {
        self.profile.as_ref().map_or(self.model.metric(), |p| (p.metric.as_str(), p.direction))
    }

    /// CPU work of one epoch, in core-seconds, before `work_scale`.
    pub fn work_per_epoch_core_s(&self) -> f64 {
        self.profile.as_ref().map_or(self.model.work_per_epoch_core_s(), |p| p.costs.work_per_epoch_core_s)
    }

    /// Nominal work one core-second does for this job when it gets `cores` under `limit`:
    /// 1 for a built-in model, a profile's measured cost by CPU otherwise
    /// ([`super::profile::Costs::efficiency`]).
    pub fn cpu_efficiency(&self, cores: f64, limit: Option<f64>) -> f64 {
        self.profile.as_ref().map_or(1.0, |p| p.costs.efficiency(cores, limit))
    }

    /// The most cores it uses usefully.
    pub fn max_cores(&self) -> f64 {
        self.profile.as_ref().map_or(self.model.max_parallelism_cores(), |p| p.costs.max_cores)
    }

    /// Its resident memory.
    pub fn memory_bytes(&self) -> u64 {
        self.profile.as_ref().map_or(self.model.memory_bytes(), |p| p.costs.memory_bytes)
    }

    /// Wall time from its first start to the start of its first epoch (a profile's measured
    /// start-up; none for a built-in model).
    pub fn startup_s(&self) -> f64 {
        self.profile.as_ref().map_or(0.0, |p| p.costs.startup_s)
    }
}

/// A plan's profile as its name, in reports.
fn profile_name<S: serde::Serializer>(profile: &Option<Arc<Profile>>, s: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&profile.as_ref().map(|p| p.name.as_str()), s)
}

/// How to load a workload file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Overrides the default cluster size of a CSV workload (refused for a scenario, which
    /// lists its own nodes).
    pub nodes: Option<usize>,
    /// Keeps only the first N jobs by arrival.
    pub limit: Option<usize>,
}

/// Why a workload could not be loaded. Every message names the file (or the name it was given)
/// and, where known, the 1-based line, then says what to change.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The file could not be read.
    #[error("cannot read workload {path}: check that the file exists and is readable")]
    Read {
        /// The file.
        path: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The file's extension is neither `.toml` nor `.csv`.
    #[error("{path}: unknown workload format: use a .toml scenario or a .csv workload (Pollux or Philly)")]
    UnknownFormat {
        /// The file.
        path: String,
    },
    /// A CSV file whose header is neither format's.
    #[error(
        "{path}:1: header `{found}` is neither a Pollux workload (`name,time,application,num_replicas,batch_size`) \
         nor the Philly trace (`timestamp,duration,num_gpus,gpu_time,cluster`): fix the header row"
    )]
    UnknownHeader {
        /// The file.
        path: String,
        /// The header row found.
        found: String,
    },
    /// A CSV header lacks a column.
    #[error("{path}:{line}: missing column `{column}`: the header must be `{expected}`")]
    MissingColumn {
        /// The file.
        path: String,
        /// The header's line.
        line: usize,
        /// The missing column.
        column: String,
        /// The header the format needs.
        expected: &'static str,
    },
    /// A CSV header has a column the format does not know.
    #[error("{path}:{line}: unknown column `{column}`: the header must be `{expected}`")]
    UnknownColumn {
        /// The file.
        path: String,
        /// The header's line.
        line: usize,
        /// The unexpected column.
        column: String,
        /// The header the format needs.
        expected: &'static str,
    },
    /// The CSV itself is malformed (e.g. a row with too few fields).
    #[error("{}: malformed CSV ({message}): give every row the header's columns", at(.path, .line))]
    Csv {
        /// The file.
        path: String,
        /// Where, when known.
        line: Option<usize>,
        /// What the CSV reader said.
        message: String,
    },
    /// A scenario is not valid TOML, has an unknown key or a value of the wrong type.
    #[error("{}: {message} (the scenario format is in scenarios/README.md)", at_column(.path, .line, .column))]
    Toml {
        /// The file.
        path: String,
        /// Where, when known.
        line: Option<usize>,
        /// The column (1-based, in characters), when known.
        column: Option<usize>,
        /// What the TOML parser said, naming the key.
        message: String,
    },
    /// A value that is out of range, malformed or inconsistent with the job's other fields.
    #[error("{}: `{field}`: {message}", at(.path, .line))]
    Field {
        /// The file.
        path: String,
        /// Where, when known.
        line: Option<usize>,
        /// The key or column.
        field: String,
        /// What is wrong and what to write instead.
        message: String,
    },
    /// A model name that is none of the six, nor a profile's.
    #[error(
        "{}: `{field}`: unknown model `{found}`: use one of bert, cifar10, deepspeech2, imagenet, ncf, yolov3, \
         or the name of a [[profile]] of the scenario",
        at(.path, .line)
    )]
    UnknownModel {
        /// The file.
        path: String,
        /// Where, when known.
        line: Option<usize>,
        /// The key or column.
        field: String,
        /// The name found.
        found: String,
    },
    /// Two jobs with the same name.
    #[error("{}: duplicate job name `{name}`{}: give every job its own name", at(.path, .line), first(.first_line))]
    DuplicateJob {
        /// The file.
        path: String,
        /// Where the second one is, when known.
        line: Option<usize>,
        /// The name.
        name: String,
        /// Where the first one is, when known.
        first_line: Option<usize>,
    },
    /// A job pinned to a node that is not in the workload.
    #[error("{}: job `{job}` names node `{node}`, which does not exist: use one of {known}", at(.path, .line))]
    UnknownNode {
        /// The file.
        path: String,
        /// Where, when known.
        line: Option<usize>,
        /// The job.
        job: String,
        /// The node name it gave.
        node: String,
        /// The nodes there are, comma-separated.
        known: String,
    },
    /// No jobs at all (or none left after filtering and `limit`).
    #[error("{path}: the workload has no jobs: {hint}")]
    Empty {
        /// The file.
        path: String,
        /// What to do.
        hint: &'static str,
    },
    /// No nodes at all.
    #[error("{path}: the workload has no nodes: {hint}")]
    NoNodes {
        /// The file.
        path: String,
        /// What to do.
        hint: &'static str,
    },
}

/// `path:line`, or `path` alone when the line is unknown.
fn at(path: &str, line: &Option<usize>) -> String {
    match line {
        Some(line) => format!("{path}:{line}"),
        None => path.to_string(),
    }
}

/// `path:line:column`, dropping what is unknown.
fn at_column(path: &str, line: &Option<usize>, column: &Option<usize>) -> String {
    match (line, column) {
        (Some(line), Some(column)) => format!("{path}:{line}:{column}"),
        _ => at(path, line),
    }
}

/// ` (first at line N)`, or nothing.
fn first(line: &Option<usize>) -> String {
    line.map_or_else(String::new, |l| format!(" (first at line {l})"))
}

impl Workload {
    /// A workload of `nodes` and `jobs` (sorted by arrival by the caller), with no paper
    /// figures and no disruption budget: what a trace or a test builds.
    pub fn of(name: impl Into<String>, nodes: Vec<NodeSpec>, jobs: Vec<JobPlan>) -> Workload {
        Workload { name: name.into(), nodes, jobs, paper: Vec::new(), budget: BudgetConfig::off() }
    }

    /// Loads `path` by its extension: `.toml` is a scenario; `.csv` is the Philly trace if its
    /// header is `timestamp,duration,num_gpus,gpu_time,cluster`, a Pollux workload if it is
    /// `name,time,application,num_replicas,batch_size`. A header close to one of them gets that
    /// format's missing/unknown-column error; one sharing no column with either is refused
    /// naming both. The workload is named after the file's stem (a scenario's `name` wins).
    pub fn load(path: &Path, opts: &LoadOptions) -> Result<Workload, WorkloadError> {
        let label = path.display().to_string();
        let stem = path.file_stem().map_or_else(|| label.clone(), |s| s.to_string_lossy().into_owned());
        let read_err = |source| WorkloadError::Read { path: label.clone(), source };
        let extension = path.extension().map(|e| e.to_string_lossy().to_ascii_lowercase());
        match extension.as_deref() {
            Some("toml") => {
                if opts.nodes.is_some() {
                    return Err(WorkloadError::Field {
                        path: label,
                        line: None,
                        field: "nodes".into(),
                        message: "a scenario lists its own [[node]] tables; the node count applies to CSV \
                                  workloads only: drop it or edit the scenario"
                            .into(),
                    });
                }
                let text = std::fs::read_to_string(path).map_err(read_err)?;
                let workload = scenario(&label, &stem, &text, path.parent())?;
                finish(&label, workload, opts.limit)
            }
            Some("csv") => {
                let file = std::fs::File::open(path).map_err(read_err)?;
                let mut reader = BufReader::new(file);
                let header = {
                    let buf = reader.fill_buf().map_err(read_err)?;
                    let end = buf.iter().position(|&b| b == b'\n').unwrap_or(buf.len());
                    String::from_utf8_lossy(&buf[..end]).into_owned()
                };
                match detect(&label, &header)? {
                    CsvFormat::Philly => philly(&label, &stem, reader, opts),
                    CsvFormat::Pollux => {
                        let mut text = String::new();
                        reader.read_to_string(&mut text).map_err(read_err)?;
                        pollux(&label, &stem, &text, opts)
                    }
                }
            }
            _ => Err(WorkloadError::UnknownFormat { path: label }),
        }
    }

    /// Parses a TOML scenario; `name` names the workload (unless the scenario has its own) and
    /// stands for the file in errors. Its `[[profile]]` files are read relative to the current
    /// directory.
    pub fn from_scenario_str(name: &str, text: &str) -> Result<Workload, WorkloadError> {
        let workload = scenario(name, name, text, None)?;
        finish(name, workload, None)
    }

    /// Parses a Pollux workload CSV; `name` names the workload and stands for the file in
    /// errors.
    pub fn from_pollux_csv(name: &str, text: &str, opts: &LoadOptions) -> Result<Workload, WorkloadError> {
        pollux(name, name, text, opts)
    }

    /// Streams the Philly trace CSV from `reader`; `name` names the workload and stands for the
    /// file in errors.
    pub fn from_philly_csv(name: &str, reader: impl Read, opts: &LoadOptions) -> Result<Workload, WorkloadError> {
        philly(name, name, reader, opts)
    }

    /// Gives every training job without tiers the default tiers of its curve
    /// ([`super::model::Curve::default_tiers`]: 80 % and 95 % of the curve's improvement).
    pub fn with_default_targets(mut self) -> Workload {
        for job in &mut self.jobs {
            if job.kind == wit::JobKind::Training && job.tiers.is_none() {
                job.tiers = Some(job.curve().default_tiers());
            }
        }
        self
    }
}

/// Sorts the jobs by arrival (stable), applies `limit` and refuses an empty result.
fn finish(path: &str, mut workload: Workload, limit: Option<usize>) -> Result<Workload, WorkloadError> {
    workload.jobs.sort_by(|a, b| a.arrival_s.total_cmp(&b.arrival_s));
    if let Some(limit) = limit {
        workload.jobs.truncate(limit);
    }
    if workload.jobs.is_empty() {
        let hint =
            if limit == Some(0) { "the job limit is 0: ask for at least one job" } else { "add at least one job" };
        return Err(WorkloadError::Empty { path: path.into(), hint });
    }
    Ok(workload)
}

#[cfg(test)]
mod tests;
