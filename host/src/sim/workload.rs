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
//!   alone on a node with [`Model::max_parallelism_cores`] cores, walks its whole curve in
//!   `duration` seconds;
//! - the job is named `philly-<row>`, `<row>` being its 1-based data row in the file.
//!
//! Default cluster: [`PHILLY_NODES`] nodes of 64 cores, 512 GiB, 8 GPUs of 32 GiB.
//!
//! Whatever the format, jobs are sorted by arrival (stably), names are unique, and
//! [`LoadOptions`] may resize a CSV workload's cluster and keep only its first jobs.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::model::Model;
use crate::bindings::wit;

const GIB: u64 = 1 << 30;

/// Nodes in the default cluster of a Pollux workload.
pub const POLLUX_NODES: usize = 16;
/// Nodes in the default cluster of the Philly trace.
pub const PHILLY_NODES: usize = 256;

/// The columns of a Pollux workload CSV, in the artifact's order.
const POLLUX_COLUMNS: [&str; 5] = ["name", "time", "application", "num_replicas", "batch_size"];
const POLLUX_HEADER: &str = "name,time,application,num_replicas,batch_size";
/// The columns of the Philly trace CSV, in the file's order.
const PHILLY_COLUMNS: [&str; 5] = ["timestamp", "duration", "num_gpus", "gpu_time", "cluster"];
const PHILLY_HEADER: &str = "timestamp,duration,num_gpus,gpu_time,cluster";

/// Philly rows shorter than this are dropped (as in Pollux).
const PHILLY_MIN_DURATION_S: f64 = 60.0;
/// Philly rows with at least this much GPU time are dropped (1000 GPU-hours, as in Pollux).
const PHILLY_MAX_GPU_TIME_S: f64 = 1000.0 * 3600.0;

/// Nodes and planned jobs, ready for the simulator.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Workload {
    /// A short name for reports: the scenario's `name`, else the file's stem.
    pub name: String,
    /// The cluster, at least one node.
    pub nodes: Vec<NodeSpec>,
    /// The jobs, at least one, sorted by `arrival_s` (stable: ties keep the file's order).
    pub jobs: Vec<JobPlan>,
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
    /// Which model it trains (or serves), hence its curve and costs.
    pub model: Model,
    /// Training or inference; inference only comes from scenarios.
    pub kind: wit::JobKind,
    /// When it arrives, in seconds from the start of the run (≥ 0).
    pub arrival_s: f64,
    /// Pinned placement (an index into [`Workload::nodes`]); `None` lets the simulator place it.
    pub node: Option<u32>,
    /// Global batch size; picks the nearest measured curve.
    pub batch_size: u32,
    /// GPUs it asks for.
    pub gpus: u32,
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
    /// A model name that is none of the six.
    #[error(
        "{}: `{field}`: unknown model `{found}`: use one of bert, cifar10, deepspeech2, imagenet, ncf, yolov3",
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
                let workload = scenario(&label, &stem, &text)?;
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
    /// stands for the file in errors.
    pub fn from_scenario_str(name: &str, text: &str) -> Result<Workload, WorkloadError> {
        let workload = scenario(name, name, text)?;
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
                job.tiers = Some(job.model.curve(job.batch_size).default_tiers());
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

// ---------------------------------------------------------------------------------------------
// TOML scenarios
// ---------------------------------------------------------------------------------------------

/// A scenario file: see `scenarios/README.md`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    /// The workload's name in reports; the file's stem when absent.
    name: Option<String>,
    /// The cluster's nodes, one `[[node]]` table each; at least one.
    #[serde(default)]
    node: Vec<NodeTable>,
    /// The jobs, one `[[job]]` table each (or several, with `count`); at least one.
    #[serde(default)]
    job: Vec<JobTable>,
}

/// A `[[node]]` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct NodeTable {
    /// Unique name jobs may pin to; `node-<i>` (0-based) when absent.
    name: Option<String>,
    /// CPU capacity in cores; fractions allowed (`0.5`), must be positive.
    cores: f64,
    /// Memory capacity with a unit: `"64GiB"`, `"512MiB"`, `"1.5TiB"`, `"64GB"`.
    memory: String,
    /// GPUs on the node; 0 when absent.
    #[serde(default)]
    gpus: i64,
    /// Memory of each GPU, with a unit; required when `gpus` > 0.
    gpu_memory: Option<String>,
}

/// Whether a job trains or serves.
#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum KindName {
    /// Walks its model's learning curve epoch by epoch.
    Training,
    /// Serves requests at `request-rate` for `duration`.
    Inference,
}

/// A `[[job]]` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct JobTable {
    /// Unique job name (with `count`, the prefix of `<name>-<i>`).
    name: String,
    /// One of bert, cifar10, deepspeech2, imagenet, ncf, yolov3.
    model: String,
    /// When it arrives, as a duration from the start: `"0s"`, `"90s"`, `"2m"`, `"1h30m"`; `"0s"`
    /// when absent.
    arrival: Option<String>,
    /// `"training"` (the default) or `"inference"`.
    kind: Option<KindName>,
    /// Pins the job to the node of this name; the simulator places it when absent.
    node: Option<String>,
    /// Global batch size (positive); the model's default when absent.
    batch_size: Option<i64>,
    /// GPUs the job asks for; 0 when absent.
    gpus: Option<i64>,
    /// Stop after this many epochs (positive); the whole curve when absent.
    max_epochs: Option<i64>,
    /// Multiplies the model's work per epoch (positive); 1.0 when absent.
    work_scale: Option<f64>,
    /// TRADL tiers `[T1, T2]` on the model's metric; T1 must be easier than T2. Training only.
    tiers: Option<Vec<f64>>,
    /// DQoES target (positive): seconds per epoch for training, milliseconds per request for
    /// inference.
    qoe_target: Option<f64>,
    /// Inference only, required there: requests per second (positive).
    request_rate: Option<f64>,
    /// Inference only, required there: how long the service runs, as a duration (`"1h"`).
    duration: Option<String>,
    /// Expands this table into `count` jobs named `<name>-0` … `<name>-<count-1>`.
    count: Option<i64>,
    /// With `count`: the time between two consecutive arrivals (`"10s"`); `"0s"` when absent.
    every: Option<String>,
}

/// Which array of tables a line lookup is about.
#[derive(Clone, Copy)]
enum Table {
    Node,
    Job,
}

/// Finds the lines of `[[node]]`/`[[job]]` tables and of their keys in a scenario's text, so
/// that semantic errors point at a line. Gives `None` when the file uses another TOML form
/// (inline arrays of tables) and the count does not match.
struct LineIndex<'a> {
    lines: Vec<&'a str>,
    /// 0-based line of each `[[node]]` header.
    nodes: Vec<usize>,
    /// 0-based line of each `[[job]]` header.
    jobs: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    fn new(text: &'a str, node_count: usize, job_count: usize) -> LineIndex<'a> {
        let lines: Vec<&str> = text.lines().collect();
        let headers = |name: &str| -> Vec<usize> {
            let header = format!("[[{name}]]");
            lines
                .iter()
                .enumerate()
                .filter(|(_, l)| {
                    let l = l.trim();
                    l.strip_prefix(&header).is_some_and(|rest| rest.trim().is_empty() || rest.trim().starts_with('#'))
                })
                .map(|(i, _)| i)
                .collect()
        };
        let (mut nodes, mut jobs) = (headers("node"), headers("job"));
        if nodes.len() != node_count {
            nodes.clear();
        }
        if jobs.len() != job_count {
            jobs.clear();
        }
        LineIndex { lines, nodes, jobs }
    }

    /// The 1-based line of the `index`-th table's header.
    fn table(&self, table: Table, index: usize) -> Option<usize> {
        let starts = match table {
            Table::Node => &self.nodes,
            Table::Job => &self.jobs,
        };
        starts.get(index).map(|l| l + 1)
    }

    /// The 1-based line of `key` in the `index`-th table, else that table's header line.
    fn field(&self, table: Table, index: usize, key: &str) -> Option<usize> {
        let start = self.table(table, index)?;
        let found = self.lines[start..]
            .iter()
            .take_while(|l| !l.trim_start().starts_with('['))
            .position(|l| l.trim_start().strip_prefix(key).is_some_and(|rest| rest.trim_start().starts_with('=')));
        Some(found.map_or(start, |offset| start + offset + 1))
    }
}

/// Parses and validates a scenario. `path` labels errors; `default_name` names the workload
/// when the scenario has no `name`.
fn scenario(path: &str, default_name: &str, text: &str) -> Result<Workload, WorkloadError> {
    let file: ScenarioFile = toml::from_str(text).map_err(|e| {
        let (line, column) = e.span().map_or((None, None), |span| {
            let (line, column) = line_column(text, span.start);
            (Some(line), Some(column))
        });
        WorkloadError::Toml { path: path.into(), line, column, message: e.message().trim_end().to_string() }
    })?;
    let lines = LineIndex::new(text, file.node.len(), file.job.len());
    let field_err = |table, index, key: &str, message: String| WorkloadError::Field {
        path: path.into(),
        line: lines.field(table, index, key),
        field: key.into(),
        message,
    };

    if file.node.is_empty() {
        return Err(WorkloadError::NoNodes {
            path: path.into(),
            hint: "add a [[node]] table with `cores` and `memory` (see scenarios/README.md)",
        });
    }
    let mut nodes: Vec<NodeSpec> = Vec::with_capacity(file.node.len());
    for (i, table) in file.node.iter().enumerate() {
        let err = |key: &str, message: String| field_err(Table::Node, i, key, message);
        let name = table.name.clone().unwrap_or_else(|| format!("node-{i}"));
        if nodes.iter().any(|n| n.name == name) {
            return Err(err("name", format!("node name `{name}` is used twice: give every node its own name")));
        }
        let cpu_millicores = (table.cores * 1000.0).round();
        if !table.cores.is_finite() || cpu_millicores < 1.0 {
            return Err(err(
                "cores",
                format!("{} cores: a node needs a positive number of cores, e.g. 16 or 0.5", table.cores),
            ));
        }
        let memory_bytes = parse_bytes(&table.memory).map_err(|m| err("memory", m))?;
        let gpus = whole("gpus", table.gpus, 0).map_err(|m| err("gpus", m))?;
        let gpu_memory_bytes = match (&table.gpu_memory, gpus) {
            (Some(text), _) => parse_bytes(text).map_err(|m| err("gpu-memory", m))?,
            (None, 0) => 0,
            (None, _) => {
                return Err(err(
                    "gpu-memory",
                    "the node has GPUs: say how much memory each has, e.g. \"32GiB\"".into(),
                ));
            }
        };
        nodes.push(NodeSpec { name, cpu_millicores: cpu_millicores as u64, memory_bytes, gpus, gpu_memory_bytes });
    }

    if file.job.is_empty() {
        return Err(WorkloadError::Empty {
            path: path.into(),
            hint: "add a [[job]] table with `name` and `model` (see scenarios/README.md)",
        });
    }
    let mut jobs = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, table) in file.job.iter().enumerate() {
        let err = |key: &str, message: String| field_err(Table::Job, i, key, message);
        let model = Model::parse(&table.model).ok_or_else(|| WorkloadError::UnknownModel {
            path: path.into(),
            line: lines.field(Table::Job, i, "model"),
            field: "model".into(),
            found: table.model.clone(),
        })?;
        let kind = match table.kind.unwrap_or(KindName::Training) {
            KindName::Training => wit::JobKind::Training,
            KindName::Inference => wit::JobKind::Inference,
        };
        let arrival_s = match &table.arrival {
            Some(text) => parse_duration_s(text).map_err(|m| err("arrival", m))?,
            None => 0.0,
        };
        let node = match &table.node {
            Some(wanted) => {
                let index = nodes.iter().position(|n| &n.name == wanted).ok_or_else(|| WorkloadError::UnknownNode {
                    path: path.into(),
                    line: lines.field(Table::Job, i, "node"),
                    job: table.name.clone(),
                    node: wanted.clone(),
                    known: nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(", "),
                })?;
                Some(index as u32)
            }
            None => None,
        };
        let batch_size = match table.batch_size {
            Some(b) => whole("batch-size", b, 1).map_err(|m| err("batch-size", m))?,
            None => model.default_batch_size(),
        };
        let gpus = whole("gpus", table.gpus.unwrap_or(0), 0).map_err(|m| err("gpus", m))?;
        let max_epochs =
            table.max_epochs.map(|e| whole("max-epochs", e, 1)).transpose().map_err(|m| err("max-epochs", m))?;
        let work_scale = positive("work-scale", table.work_scale.unwrap_or(1.0)).map_err(|m| err("work-scale", m))?;
        let qoe_target =
            table.qoe_target.map(|q| positive("qoe-target", q)).transpose().map_err(|m| err("qoe-target", m))?;
        let tiers = match (table.tiers.as_deref(), kind) {
            (None, _) => None,
            (Some(_), wit::JobKind::Inference) => {
                return Err(err(
                    "tiers",
                    "tiers apply to training jobs: give an inference service a qoe-target".into(),
                ));
            }
            (Some(&[t1, t2]), wit::JobKind::Training) => Some(check_tiers(model, t1, t2).map_err(|m| err("tiers", m))?),
            (Some(other), wit::JobKind::Training) => {
                return Err(err("tiers", format!("{} values: write two, [T1, T2], e.g. [0.85, 0.92]", other.len())));
            }
        };
        let (request_rate, duration_s) = match kind {
            wit::JobKind::Inference => {
                let rate = table.request_rate.ok_or_else(|| {
                    err("request-rate", "an inference job needs `request-rate`, in requests per second, e.g. 20".into())
                })?;
                let rate = positive("request-rate", rate).map_err(|m| err("request-rate", m))?;
                let text = table.duration.as_deref().ok_or_else(|| {
                    err("duration", "an inference job needs `duration`, how long it serves, e.g. \"1h\"".into())
                })?;
                let duration = parse_duration_s(text).map_err(|m| err("duration", m))?;
                if duration <= 0.0 {
                    return Err(err(
                        "duration",
                        "an inference service must run for a positive duration, e.g. \"1h\"".into(),
                    ));
                }
                (Some(rate), Some(duration))
            }
            wit::JobKind::Training => {
                for (key, set) in
                    [("request-rate", table.request_rate.is_some()), ("duration", table.duration.is_some())]
                {
                    if set {
                        return Err(err(
                            key,
                            format!("`{key}` is for inference jobs: drop it or add kind = \"inference\""),
                        ));
                    }
                }
                (None, None)
            }
        };
        let count = match table.count {
            Some(c) => whole("count", c, 1).map_err(|m| err("count", m))? as usize,
            None => 1,
        };
        let every_s = match (&table.every, table.count) {
            (Some(_), None) => {
                return Err(err("every", "`every` spaces the jobs of a `count`: add `count` or drop it".into()));
            }
            (Some(text), Some(_)) => parse_duration_s(text).map_err(|m| err("every", m))?,
            (None, _) => 0.0,
        };
        let line = lines.field(Table::Job, i, "name");
        for k in 0..count {
            let name = if table.count.is_some() { format!("{}-{k}", table.name) } else { table.name.clone() };
            if name.trim().is_empty() {
                return Err(err("name", "a job needs a non-empty name".into()));
            }
            if let Some(&first) = seen.get(&name) {
                return Err(WorkloadError::DuplicateJob {
                    path: path.into(),
                    line,
                    name,
                    first_line: lines.field(Table::Job, first, "name"),
                });
            }
            seen.insert(name.clone(), i);
            jobs.push(JobPlan {
                name,
                model,
                kind,
                arrival_s: arrival_s + every_s * k as f64,
                node,
                batch_size,
                gpus,
                max_epochs,
                work_scale,
                tiers,
                qoe_target,
                request_rate,
                duration_s,
            });
        }
    }
    Ok(Workload { name: file.name.unwrap_or_else(|| default_name.to_string()), nodes, jobs })
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Checks that T1 is easier than T2 for `model`'s metric direction.
fn check_tiers(model: Model, t1: f64, t2: f64) -> Result<(f64, f64), String> {
    if !t1.is_finite() || !t2.is_finite() {
        return Err("tiers must be two finite numbers, [T1, T2]".into());
    }
    let (metric, direction) = model.metric();
    let ok = match direction {
        wit::Direction::HigherIsBetter => t1 < t2,
        wit::Direction::LowerIsBetter => t1 > t2,
    };
    if ok {
        return Ok((t1, t2));
    }
    let order = match direction {
        wit::Direction::HigherIsBetter => "higher is better, so T1 (the easier target) must be below T2",
        wit::Direction::LowerIsBetter => "lower is better, so T1 (the easier target) must be above T2",
    };
    let (d1, d2) = model.curve(model.default_batch_size()).default_tiers();
    Err(format!(
        "[{t1}, {t2}] is in the wrong order: for {}'s {metric} {order}; swap them (its default tiers are [{d1:.4}, {d2:.4}])",
        model.name()
    ))
}

/// `value` as a u32 of at least `min`.
fn whole(key: &str, value: i64, min: i64) -> Result<u32, String> {
    if value < min || value > i64::from(u32::MAX) {
        let floor = if min == 0 { "zero or more" } else { "at least 1" };
        return Err(format!("{value} is out of range: `{key}` must be a whole number, {floor}"));
    }
    Ok(value as u32)
}

/// `value` if it is finite and positive.
fn positive(key: &str, value: f64) -> Result<f64, String> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(format!("{value} is out of range: `{key}` must be a positive number"))
    }
}

/// Parses a duration such as `"30s"`, `"2m"`, `"1h30m"`, `"1.5h"`, `"500ms"` or `"0"` into
/// seconds. Units: `ms`, `s`, `m`, `h`, `d`.
fn parse_duration_s(text: &str) -> Result<f64, String> {
    let s = text.trim();
    let example = "write a duration such as \"30s\", \"2m\", \"1h30m\"";
    if s.starts_with('-') {
        return Err(format!("\"{text}\" is negative: {example} (zero or more)"));
    }
    if s.is_empty() {
        return Err(format!("the duration is empty: {example}"));
    }
    if s == "0" {
        return Ok(0.0);
    }
    let mut total_s = 0.0;
    let mut rest = s;
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let number: f64 = rest[..number_len].parse().map_err(|_| format!("\"{text}\" is not a duration: {example}"))?;
        rest = rest[number_len..].trim_start();
        let unit_len = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
        let unit_s = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86_400.0,
            "" => return Err(format!("\"{text}\" lacks a unit: {example} (units ms, s, m, h, d)")),
            other => return Err(format!("\"{text}\" has unknown unit `{other}`: use ms, s, m, h or d")),
        };
        total_s += number * unit_s;
        rest = rest[unit_len..].trim_start();
    }
    if total_s.is_finite() { Ok(total_s) } else { Err(format!("\"{text}\" is too long: {example}")) }
}

/// Parses a memory size such as `"64GiB"`, `"512 MiB"`, `"1.5TiB"` or `"64GB"` into bytes.
/// Binary units `KiB MiB GiB TiB`, decimal `kB MB GB TB`, and `B`; case-insensitive.
fn parse_bytes(text: &str) -> Result<u64, String> {
    let s = text.trim();
    let example = "write a size such as \"64GiB\" or \"512MiB\"";
    if s.starts_with('-') {
        return Err(format!("\"{text}\" is negative: {example}"));
    }
    let number_len = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let number: f64 = s[..number_len].parse().map_err(|_| format!("\"{text}\" is not a size: {example}"))?;
    let unit = s[number_len..].trim().to_ascii_lowercase();
    let scale: f64 = match unit.as_str() {
        "b" => 1.0,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => GIB as f64,
        "tib" => GIB as f64 * 1024.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "" => return Err(format!("\"{text}\" lacks a unit: {example}")),
        other => {
            return Err(format!("\"{text}\" has unknown unit `{other}`: use B, KiB, MiB, GiB, TiB, kB, MB, GB or TB"));
        }
    };
    let bytes = (number * scale).round();
    if bytes.is_finite() && bytes < u64::MAX as f64 {
        Ok(bytes as u64)
    } else {
        Err(format!("\"{text}\" is too large"))
    }
}

// ---------------------------------------------------------------------------------------------
// CSV workloads
// ---------------------------------------------------------------------------------------------

#[derive(Debug, PartialEq, Eq)]
enum CsvFormat {
    Pollux,
    Philly,
}

/// Picks the CSV format from the header row: the format sharing most columns with it.
fn detect(path: &str, header: &str) -> Result<CsvFormat, WorkloadError> {
    let header = header.trim_start_matches('\u{feff}').trim_end_matches(['\r', '\n']);
    if header.trim().is_empty() {
        return Err(WorkloadError::Empty {
            path: path.into(),
            hint: "the file is empty: it needs a header row and jobs",
        });
    }
    let columns: Vec<&str> = header.split(',').map(str::trim).collect();
    let shared = |names: &[&str]| columns.iter().filter(|c| names.contains(c)).count();
    let (pollux, philly) = (shared(&POLLUX_COLUMNS), shared(&PHILLY_COLUMNS));
    if philly > pollux {
        Ok(CsvFormat::Philly)
    } else if pollux > 0 {
        Ok(CsvFormat::Pollux)
    } else {
        Err(WorkloadError::UnknownHeader { path: path.into(), found: header.into() })
    }
}

/// Maps the header's columns to `expected`'s order, refusing unknown or missing ones.
fn column_indices<const N: usize>(
    path: &str,
    headers: &csv::StringRecord,
    expected: [&str; N],
    expected_header: &'static str,
) -> Result<[usize; N], WorkloadError> {
    let line = headers.position().map_or(1, |p| p.line() as usize);
    if let Some(unknown) = headers.iter().find(|h| !expected.contains(h)) {
        return Err(WorkloadError::UnknownColumn {
            path: path.into(),
            line,
            column: unknown.into(),
            expected: expected_header,
        });
    }
    let mut indices = [0; N];
    for (slot, name) in indices.iter_mut().zip(expected) {
        *slot = headers.iter().position(|h| h == name).ok_or_else(|| WorkloadError::MissingColumn {
            path: path.into(),
            line,
            column: name.into(),
            expected: expected_header,
        })?;
    }
    Ok(indices)
}

/// A CSV reader that trims fields and expects a header row.
fn csv_reader<R: Read>(reader: R) -> csv::Reader<R> {
    csv::ReaderBuilder::new().has_headers(true).trim(csv::Trim::All).from_reader(reader)
}

/// Converts a CSV reader error.
fn csv_error(path: &str, e: &csv::Error) -> WorkloadError {
    let line = e.position().map(|p| p.line() as usize);
    let message = match e.kind() {
        csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
            format!("a row has {len} fields where the header has {expected_len}")
        }
        _ => e.to_string(),
    };
    WorkloadError::Csv { path: path.into(), line, message }
}

/// Reads the header row of a CSV workload and maps it to `expected`.
fn csv_header<R: Read, const N: usize>(
    path: &str,
    reader: &mut csv::Reader<R>,
    expected: [&str; N],
    expected_header: &'static str,
) -> Result<[usize; N], WorkloadError> {
    let headers = reader.headers().map_err(|e| csv_error(path, &e))?;
    if headers.iter().all(str::is_empty) {
        return Err(WorkloadError::Empty {
            path: path.into(),
            hint: "the file is empty: it needs a header row and jobs",
        });
    }
    let mut headers = headers.clone();
    if let Some(first) = headers.get(0).and_then(|f| f.strip_prefix('\u{feff}')) {
        let mut cleaned = csv::StringRecord::new();
        cleaned.push_field(first);
        headers.iter().skip(1).for_each(|f| cleaned.push_field(f));
        cleaned.set_position(headers.position().cloned());
        headers = cleaned;
    }
    column_indices(path, &headers, expected, expected_header)
}

/// The default cluster of a CSV workload, resized by `nodes`.
fn cluster(
    path: &str,
    default_nodes: usize,
    nodes: Option<usize>,
    shape: NodeSpec,
) -> Result<Vec<NodeSpec>, WorkloadError> {
    let count = nodes.unwrap_or(default_nodes);
    if count == 0 {
        return Err(WorkloadError::NoNodes { path: path.into(), hint: "ask for at least one node" });
    }
    Ok((0..count).map(|i| NodeSpec { name: format!("node-{i}"), ..shape.clone() }).collect())
}

/// One row's fields, with the error context for its cells.
struct Row<'r> {
    path: &'r str,
    line: usize,
    record: &'r csv::StringRecord,
}

impl Row<'_> {
    fn cell(&self, index: usize) -> &str {
        self.record.get(index).unwrap_or("")
    }

    fn err(&self, field: &str, message: String) -> WorkloadError {
        WorkloadError::Field { path: self.path.into(), line: Some(self.line), field: field.into(), message }
    }

    /// A finite number ≥ 0.
    fn non_negative(&self, index: usize, field: &str, unit: &str) -> Result<f64, WorkloadError> {
        let cell = self.cell(index);
        match cell.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
            Ok(_) => Err(self.err(field, format!("{cell} is negative: write a number of {unit}, zero or more"))),
            Err(_) => Err(self.err(field, format!("`{cell}` is not a number: write a number of {unit}, zero or more"))),
        }
    }

    /// A whole number of at least `min`.
    fn whole(&self, index: usize, field: &str, min: u32) -> Result<u32, WorkloadError> {
        let cell = self.cell(index);
        match cell.parse::<u32>() {
            Ok(v) if v >= min => Ok(v),
            _ => Err(self.err(field, format!("`{cell}` is not a whole number of at least {min}: fix the cell"))),
        }
    }

    fn model(&self, index: usize, field: &str) -> Result<Model, WorkloadError> {
        let cell = self.cell(index);
        Model::parse(cell).ok_or_else(|| WorkloadError::UnknownModel {
            path: self.path.into(),
            line: Some(self.line),
            field: field.into(),
            found: cell.into(),
        })
    }
}

/// Parses a Pollux workload CSV.
fn pollux(path: &str, name: &str, text: &str, opts: &LoadOptions) -> Result<Workload, WorkloadError> {
    let mut reader = csv_reader(text.as_bytes());
    let [c_name, c_time, c_app, c_replicas, c_batch] = csv_header(path, &mut reader, POLLUX_COLUMNS, POLLUX_HEADER)?;
    let nodes = cluster(
        path,
        POLLUX_NODES,
        opts.nodes,
        NodeSpec {
            name: String::new(),
            cpu_millicores: 64_000,
            memory_bytes: 256 * GIB,
            gpus: 4,
            gpu_memory_bytes: 32 * GIB,
        },
    )?;
    let mut jobs = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut record = csv::StringRecord::new();
    while reader.read_record(&mut record).map_err(|e| csv_error(path, &e))? {
        let line = record.position().map_or(0, |p| p.line() as usize);
        let row = Row { path, line, record: &record };
        let job_name = row.cell(c_name).to_string();
        if job_name.is_empty() {
            return Err(row.err("name", "the job has no name: give every row a unique name".into()));
        }
        let arrival_s = row.non_negative(c_time, "time", "seconds")?;
        let model = row.model(c_app, "application")?;
        let gpus = row.whole(c_replicas, "num_replicas", 0)?;
        let batch_size = row.whole(c_batch, "batch_size", 1)?;
        if let Some(&first_line) = seen.get(&job_name) {
            return Err(WorkloadError::DuplicateJob {
                path: path.into(),
                line: Some(line),
                name: job_name,
                first_line: Some(first_line),
            });
        }
        seen.insert(job_name.clone(), line);
        jobs.push(training(job_name, model, arrival_s, batch_size, gpus, 1.0));
    }
    finish(path, Workload { name: name.into(), nodes, jobs }, opts.limit)
}

/// A training job with no targets, placed by the simulator.
fn training(name: String, model: Model, arrival_s: f64, batch_size: u32, gpus: u32, work_scale: f64) -> JobPlan {
    JobPlan {
        name,
        model,
        kind: wit::JobKind::Training,
        arrival_s,
        node: None,
        batch_size,
        gpus,
        max_epochs: None,
        work_scale,
        tiers: None,
        qoe_target: None,
        request_rate: None,
        duration_s: None,
    }
}

/// Streams the Philly trace CSV (see the module docs for the mapping).
fn philly(path: &str, name: &str, input: impl Read, opts: &LoadOptions) -> Result<Workload, WorkloadError> {
    let mut reader = csv_reader(input);
    let [c_time, c_duration, c_gpus, c_gpu_time, _c_cluster] =
        csv_header(path, &mut reader, PHILLY_COLUMNS, PHILLY_HEADER)?;
    let nodes = cluster(
        path,
        PHILLY_NODES,
        opts.nodes,
        NodeSpec {
            name: String::new(),
            cpu_millicores: 64_000,
            memory_bytes: 512 * GIB,
            gpus: 8,
            gpu_memory_bytes: 32 * GIB,
        },
    )?;
    let mut jobs = Vec::new();
    let mut earliest_s = f64::INFINITY;
    let mut record = csv::StringRecord::new();
    let mut data_row = 0usize;
    while reader.read_record(&mut record).map_err(|e| csv_error(path, &e))? {
        data_row += 1;
        let line = record.position().map_or(0, |p| p.line() as usize);
        let row = Row { path, line, record: &record };
        let submitted_s = parse_timestamp_s(row.cell(c_time)).map_err(|m| row.err("timestamp", m))? as f64;
        let duration_s = row.non_negative(c_duration, "duration", "seconds")?;
        let gpus = row.whole(c_gpus, "num_gpus", 0)?;
        let gpu_time_s = row.non_negative(c_gpu_time, "gpu_time", "GPU-seconds")?;
        if duration_s < PHILLY_MIN_DURATION_S || gpu_time_s >= PHILLY_MAX_GPU_TIME_S {
            continue;
        }
        let model = philly_model(gpu_time_s, data_row);
        earliest_s = earliest_s.min(submitted_s);
        let curve_work_core_s =
            model.work_per_epoch_core_s() * f64::from(model.curve(model.default_batch_size()).epochs());
        let work_scale = duration_s * model.max_parallelism_cores() / curve_work_core_s;
        jobs.push(training(
            format!("philly-{data_row}"),
            model,
            submitted_s,
            model.default_batch_size(),
            gpus,
            work_scale,
        ));
    }
    for job in &mut jobs {
        job.arrival_s -= earliest_s;
    }
    finish(path, Workload { name: name.into(), nodes, jobs }, opts.limit)
}

/// The model of a Philly job, by its GPU time and (1-based) data row.
fn philly_model(gpu_time_s: f64, data_row: usize) -> Model {
    let gpu_hours = gpu_time_s / 3600.0;
    let odd = data_row % 2 == 1;
    if gpu_hours < 1.0 {
        if odd { Model::Cifar10 } else { Model::Ncf }
    } else if gpu_hours < 10.0 {
        if odd { Model::Deepspeech2 } else { Model::Bert }
    } else if gpu_hours < 100.0 {
        Model::Yolov3
    } else {
        Model::Imagenet
    }
}

/// Seconds since 1970-01-01 00:00:00 of a `YYYY-MM-DD HH:MM:SS` timestamp (no time zone).
fn parse_timestamp_s(text: &str) -> Result<i64, String> {
    let bad = || format!("`{text}` is not a timestamp: write `YYYY-MM-DD HH:MM:SS`, e.g. `2017-10-09 07:01:55`");
    let b = text.as_bytes();
    if b.len() != 19 || b[4] != b'-' || b[7] != b'-' || b[10] != b' ' || b[13] != b':' || b[16] != b':' {
        return Err(bad());
    }
    let number = |from: usize, to: usize| -> Result<i64, String> {
        b[from..to]
            .iter()
            .try_fold(0i64, |acc, &c| if c.is_ascii_digit() { Ok(acc * 10 + i64::from(c - b'0')) } else { Err(bad()) })
    };
    let (year, month, day) = (number(0, 4)?, number(5, 7)?, number(8, 10)?);
    let (hour, minute, second) = (number(11, 13)?, number(14, 16)?, number(17, 19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return Err(bad());
    }
    Ok(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: &str = "[[node]]\ncores = 8\nmemory = \"32GiB\"\n";

    fn scenario_err(text: &str) -> WorkloadError {
        match Workload::from_scenario_str("t.toml", text) {
            Ok(w) => panic!("expected an error, got {w:?}"),
            Err(e) => e,
        }
    }

    fn pollux_err(text: &str) -> WorkloadError {
        match Workload::from_pollux_csv("w.csv", text, &LoadOptions::default()) {
            Ok(w) => panic!("expected an error, got {w:?}"),
            Err(e) => e,
        }
    }

    fn philly_csv(rows: &[&str]) -> String {
        format!("{PHILLY_HEADER}\n{}\n", rows.join("\n"))
    }

    fn repo_root() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    #[test]
    fn a_scenario_with_every_field_loads_into_plans() {
        let text = r#"
name = "full"

[[node]]
name = "a"
cores = 12.5
memory = "48GiB"
gpus = 2
gpu-memory = "16GiB"

[[job]]
name = "serve"
model = "BERT"
kind = "inference"
arrival = "1m30s"
node = "a"
gpus = 1
qoe-target = 120.0
request-rate = 20
duration = "1h"

[[job]]
name = "train"
model = "deepspeech2"
arrival = "30s"
batch-size = 40
max-epochs = 10
work-scale = 0.5
tiers = [40, 30]
qoe-target = 60
"#;
        let w = Workload::from_scenario_str("t.toml", text).expect("loads");
        assert_eq!(w.name, "full");
        assert_eq!(
            w.nodes,
            vec![NodeSpec {
                name: "a".into(),
                cpu_millicores: 12_500,
                memory_bytes: 48 * GIB,
                gpus: 2,
                gpu_memory_bytes: 16 * GIB
            }]
        );
        let names: Vec<&str> = w.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, ["train", "serve"], "sorted by arrival");
        let serve = &w.jobs[1];
        assert_eq!(
            (serve.model, serve.kind, serve.arrival_s, serve.node),
            (Model::Bert, wit::JobKind::Inference, 90.0, Some(0))
        );
        assert_eq!(
            (serve.request_rate, serve.duration_s, serve.qoe_target, serve.gpus),
            (Some(20.0), Some(3600.0), Some(120.0), 1)
        );
        assert_eq!(serve.batch_size, Model::Bert.default_batch_size());
        let train = &w.jobs[0];
        assert_eq!(
            (train.batch_size, train.max_epochs, train.work_scale, train.tiers),
            (40, Some(10), 0.5, Some((40.0, 30.0)))
        );
        assert_eq!((train.request_rate, train.duration_s, train.node), (None, None, None));
    }

    #[test]
    fn count_and_every_expand_into_numbered_jobs() {
        let text =
            format!("{NODE}[[job]]\nname = \"c\"\nmodel = \"cifar10\"\narrival = \"10s\"\ncount = 3\nevery = \"1m\"\n");
        let w = Workload::from_scenario_str("t.toml", &text).expect("loads");
        let got: Vec<(&str, f64)> = w.jobs.iter().map(|j| (j.name.as_str(), j.arrival_s)).collect();
        assert_eq!(got, [("c-0", 10.0), ("c-1", 70.0), ("c-2", 130.0)]);
        assert_eq!(w.name, "t.toml", "no name in the scenario: the given one");
    }

    #[test]
    fn jobs_are_sorted_by_arrival_and_ties_keep_the_file_order() {
        let csv = "name,time,application,num_replicas,batch_size\nb,50,ncf,1,256\na,10,ncf,1,256\nc,50,ncf,1,256\nd,0,ncf,1,256\n";
        let w = Workload::from_pollux_csv("w.csv", csv, &LoadOptions::default()).expect("loads");
        let names: Vec<&str> = w.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, ["d", "a", "b", "c"]);
    }

    #[test]
    fn durations_parse_with_units_and_refuse_negative_or_non_numeric_values() {
        assert_eq!(parse_duration_s("30s"), Ok(30.0));
        assert_eq!(parse_duration_s("2m"), Ok(120.0));
        assert_eq!(parse_duration_s("1h"), Ok(3600.0));
        assert_eq!(parse_duration_s("1h30m"), Ok(5400.0));
        assert_eq!(parse_duration_s(" 1.5 h "), Ok(5400.0));
        assert_eq!(parse_duration_s("250ms"), Ok(0.25));
        assert_eq!(parse_duration_s("0"), Ok(0.0));
        for bad in ["-5s", "", "soon", "30", "5y", "1..2s"] {
            assert!(parse_duration_s(bad).is_err(), "{bad:?}");
        }
        assert!(parse_duration_s("-5s").is_err_and(|m| m.contains("negative")));
    }

    #[test]
    fn memory_sizes_parse_with_binary_and_decimal_units() {
        assert_eq!(parse_bytes("64GiB"), Ok(64 * GIB));
        assert_eq!(parse_bytes("512 MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes("1.5gib"), Ok(3 * GIB / 2));
        assert_eq!(parse_bytes("2GB"), Ok(2_000_000_000));
        for bad in ["64", "-1GiB", "lots", "3 parsecs"] {
            assert!(parse_bytes(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn unknown_key_is_refused_with_its_name_and_line() {
        let text = format!("{NODE}[[job]]\nname = \"a\"\nmodel = \"ncf\"\ncolour = \"red\"\n");
        let e = scenario_err(&text);
        assert!(matches!(e, WorkloadError::Toml { line: Some(7), .. }), "{e:?}");
        let message = e.to_string();
        assert!(message.contains("colour") && message.starts_with("t.toml:7:"), "{message}");
    }

    #[test]
    fn a_value_of_the_wrong_type_is_refused_with_its_line() {
        let e = scenario_err("[[node]]\ncores = \"many\"\nmemory = \"1GiB\"\n[[job]]\nname = \"a\"\nmodel = \"ncf\"\n");
        assert!(matches!(e, WorkloadError::Toml { line: Some(2), .. }), "{e:?}");
    }

    #[test]
    fn unknown_model_is_refused_with_the_six_names() {
        let e = scenario_err(&format!("{NODE}[[job]]\nname = \"a\"\nmodel = \"resnet\"\n"));
        assert!(matches!(&e, WorkloadError::UnknownModel { line: Some(6), found, .. } if found == "resnet"), "{e:?}");
        let message = e.to_string();
        for model in Model::ALL {
            assert!(message.contains(model.name()), "{message}");
        }
        let e = pollux_err("name,time,application,num_replicas,batch_size\na,0,gpt5,1,8\n");
        assert!(matches!(&e, WorkloadError::UnknownModel { line: Some(2), .. }), "{e:?}");
        assert!(e.to_string().contains("yolov3"));
    }

    #[test]
    fn negative_or_non_numeric_times_durations_and_counts_are_refused() {
        let job = |extra: &str| format!("{NODE}[[job]]\nname = \"a\"\nmodel = \"ncf\"\n{extra}\n");
        let e = scenario_err(&job("arrival = \"-30s\""));
        assert!(matches!(&e, WorkloadError::Field { field, line: Some(7), .. } if field == "arrival"), "{e:?}");
        let e = scenario_err(&job("arrival = \"later\""));
        assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "arrival"), "{e:?}");
        let e = scenario_err(&job("count = -2"));
        assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "count"), "{e:?}");
        let e = scenario_err(&job("count = \"three\""));
        assert!(matches!(&e, WorkloadError::Toml { line: Some(7), .. }), "{e:?}");
        let e = scenario_err(&job("kind = \"inference\"\nrequest-rate = 5\nduration = \"-1h\""));
        assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "duration"), "{e:?}");
        let e = pollux_err("name,time,application,num_replicas,batch_size\na,0,ncf,1,8\nb,-3,ncf,1,8\n");
        assert!(matches!(&e, WorkloadError::Field { field, line: Some(3), .. } if field == "time"), "{e:?}");
        let e = pollux_err("name,time,application,num_replicas,batch_size\na,soon,ncf,1,8\n");
        assert!(matches!(&e, WorkloadError::Field { field, line: Some(2), .. } if field == "time"), "{e:?}");
        assert!(e.to_string().starts_with("w.csv:2: `time`"), "{e}");
        let text = philly_csv(&["2017-10-09 07:01:55,-66.0,1,66.0,x"]);
        let e = Workload::from_philly_csv("p.csv", text.as_bytes(), &LoadOptions::default()).expect_err("refused");
        assert!(matches!(&e, WorkloadError::Field { field, line: Some(2), .. } if field == "duration"), "{e:?}");
        let text = philly_csv(&["yesterday,66.0,1,66.0,x"]);
        let e = Workload::from_philly_csv("p.csv", text.as_bytes(), &LoadOptions::default()).expect_err("refused");
        assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "timestamp"), "{e:?}");
    }

    #[test]
    fn an_empty_workload_is_refused() {
        assert!(matches!(scenario_err(NODE), WorkloadError::Empty { .. }));
        assert!(matches!(pollux_err("name,time,application,num_replicas,batch_size\n"), WorkloadError::Empty { .. }));
        assert!(matches!(pollux_err(""), WorkloadError::Empty { .. }));
        assert!(matches!(detect("e.csv", ""), Err(WorkloadError::Empty { .. })));
        let only_short = philly_csv(&["2017-10-09 07:01:55,10.0,1,10.0,x"]);
        let e = Workload::from_philly_csv("p.csv", only_short.as_bytes(), &LoadOptions::default());
        assert!(matches!(e, Err(WorkloadError::Empty { .. })), "{e:?}");
        let csv = "name,time,application,num_replicas,batch_size\na,0,ncf,1,8\n";
        let e = Workload::from_pollux_csv("w.csv", csv, &LoadOptions { nodes: None, limit: Some(0) });
        assert!(matches!(e, Err(WorkloadError::Empty { .. })), "{e:?}");
    }

    #[test]
    fn duplicate_job_names_are_refused_with_both_lines() {
        let text = format!("{NODE}[[job]]\nname = \"a\"\nmodel = \"ncf\"\n\n[[job]]\nname = \"a\"\nmodel = \"bert\"\n");
        let e = scenario_err(&text);
        assert!(matches!(&e, WorkloadError::DuplicateJob { line: Some(9), first_line: Some(5), .. }), "{e:?}");
        let e = scenario_err(&format!(
            "{NODE}[[job]]\nname = \"a\"\nmodel = \"ncf\"\ncount = 2\n[[job]]\nname = \"a-1\"\nmodel = \"ncf\"\n"
        ));
        assert!(matches!(&e, WorkloadError::DuplicateJob { name, .. } if name == "a-1"), "{e:?}");
        let e = pollux_err("name,time,application,num_replicas,batch_size\na,0,ncf,1,8\na,5,ncf,1,8\n");
        assert!(matches!(&e, WorkloadError::DuplicateJob { line: Some(3), first_line: Some(2), .. }), "{e:?}");
    }

    #[test]
    fn a_node_reference_that_does_not_exist_is_refused() {
        let e = scenario_err(&format!("{NODE}[[job]]\nname = \"a\"\nmodel = \"ncf\"\nnode = \"gpu-box\"\n"));
        assert!(
            matches!(&e, WorkloadError::UnknownNode { line: Some(7), node, known, .. } if node == "gpu-box" && known == "node-0"),
            "{e:?}"
        );
        assert!(e.to_string().contains("use one of node-0"), "{e}");
    }

    #[test]
    fn an_inference_job_without_request_rate_or_duration_is_refused() {
        let job =
            |extra: &str| format!("{NODE}[[job]]\nname = \"s\"\nmodel = \"bert\"\nkind = \"inference\"\n{extra}\n");
        let e = scenario_err(&job("duration = \"1h\""));
        assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "request-rate"), "{e:?}");
        let e = scenario_err(&job("request-rate = 10"));
        assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "duration"), "{e:?}");
        let e = scenario_err(&format!("{NODE}[[job]]\nname = \"t\"\nmodel = \"bert\"\nrequest-rate = 10\n"));
        assert!(
            matches!(&e, WorkloadError::Field { field, .. } if field == "request-rate"),
            "training with a rate: {e:?}"
        );
    }

    #[test]
    fn tiers_in_the_wrong_order_for_the_direction_are_refused() {
        let job =
            |model: &str, tiers: &str| format!("{NODE}[[job]]\nname = \"a\"\nmodel = \"{model}\"\ntiers = {tiers}\n");
        let e = scenario_err(&job("cifar10", "[0.9, 0.8]"));
        assert!(matches!(&e, WorkloadError::Field { field, line: Some(7), .. } if field == "tiers"), "{e:?}");
        assert!(e.to_string().contains("swap"), "{e}");
        let e = scenario_err(&job("deepspeech2", "[30, 40]"));
        assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "tiers"), "{e:?}");
        let e = scenario_err(&job("ncf", "[0.6, 0.6]"));
        assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "tiers"), "{e:?}");
        assert!(Workload::from_scenario_str("t", &job("deepspeech2", "[40, 30]")).is_ok());
        assert!(Workload::from_scenario_str("t", &job("cifar10", "[0.8, 0.9]")).is_ok());
        let e = scenario_err(&job("yolov3", "[0.8, 0.9, 1.0]"));
        assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "tiers"), "three tiers: {e:?}");
    }

    #[test]
    fn zero_nodes_are_refused() {
        let e = scenario_err("[[job]]\nname = \"a\"\nmodel = \"ncf\"\n");
        assert!(matches!(&e, WorkloadError::NoNodes { .. }), "{e:?}");
        let csv = "name,time,application,num_replicas,batch_size\na,0,ncf,1,8\n";
        let e = Workload::from_pollux_csv("w.csv", csv, &LoadOptions { nodes: Some(0), limit: None });
        assert!(matches!(e, Err(WorkloadError::NoNodes { .. })), "{e:?}");
    }

    #[test]
    fn a_node_with_zero_cores_is_refused() {
        let e = scenario_err(
            "[[node]]\nname = \"n\"\ncores = 0\nmemory = \"1GiB\"\n[[job]]\nname = \"a\"\nmodel = \"ncf\"\n",
        );
        assert!(matches!(&e, WorkloadError::Field { field, line: Some(3), .. } if field == "cores"), "{e:?}");
        let e = scenario_err("[[node]]\ncores = -4\nmemory = \"1GiB\"\n[[job]]\nname = \"a\"\nmodel = \"ncf\"\n");
        assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "cores"), "{e:?}");
        let e =
            scenario_err("[[node]]\ncores = 4\nmemory = \"1GiB\"\ngpus = 2\n[[job]]\nname = \"a\"\nmodel = \"ncf\"\n");
        assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "gpu-memory"), "{e:?}");
    }

    #[test]
    fn missing_and_unknown_columns_are_refused() {
        let e = pollux_err("name,time,application,num_replicas\na,0,ncf,1\n");
        assert!(matches!(&e, WorkloadError::MissingColumn { column, line: 1, .. } if column == "batch_size"), "{e:?}");
        let e = pollux_err("name,time,application,num_replicas,batch_size,user\na,0,ncf,1,8,bob\n");
        assert!(matches!(&e, WorkloadError::UnknownColumn { column, .. } if column == "user"), "{e:?}");
        assert!(e.to_string().contains(POLLUX_HEADER), "{e}");
        let text = "timestamp,duration,num_gpus,cluster\n2017-10-09 07:01:55,66.0,1,x\n";
        let e = Workload::from_philly_csv("p.csv", text.as_bytes(), &LoadOptions::default()).expect_err("refused");
        assert!(matches!(&e, WorkloadError::MissingColumn { column, .. } if column == "gpu_time"), "{e:?}");
        let e = pollux_err("name,time,application,num_replicas,batch_size\na,0,ncf,1\n");
        assert!(matches!(&e, WorkloadError::Csv { line: Some(2), .. }), "short row: {e:?}");
    }

    #[test]
    fn columns_may_come_in_any_order() {
        let csv = "application,batch_size,name,num_replicas,time\nncf,512,x,2,7\n";
        let w = Workload::from_pollux_csv("w.csv", csv, &LoadOptions::default()).expect("loads");
        let j = &w.jobs[0];
        assert_eq!((j.name.as_str(), j.model, j.batch_size, j.gpus, j.arrival_s), ("x", Model::Ncf, 512, 2, 7.0));
    }

    #[test]
    fn an_unknown_csv_header_names_both_formats() {
        assert_eq!(detect("f", PHILLY_HEADER).ok(), Some(CsvFormat::Philly));
        assert_eq!(detect("f", &format!("\u{feff}{POLLUX_HEADER}\r")).ok(), Some(CsvFormat::Pollux));
        let e = detect("f.csv", "a,b,c").expect_err("refused");
        let message = e.to_string();
        assert!(
            message.contains(POLLUX_HEADER) && message.contains(PHILLY_HEADER) && message.contains("f.csv:1"),
            "{message}"
        );
    }

    #[test]
    fn load_refuses_unknown_extensions_missing_files_and_node_counts_for_scenarios() {
        let dir = tempfile::tempdir().expect("temp dir");
        let yaml = dir.path().join("w.yaml");
        std::fs::write(&yaml, "jobs: []").expect("write");
        assert!(matches!(Workload::load(&yaml, &LoadOptions::default()), Err(WorkloadError::UnknownFormat { .. })));
        let missing = dir.path().join("absent.csv");
        assert!(matches!(Workload::load(&missing, &LoadOptions::default()), Err(WorkloadError::Read { .. })));
        let odd = dir.path().join("odd.csv");
        std::fs::write(&odd, "when,what\n1,2\n").expect("write");
        assert!(matches!(Workload::load(&odd, &LoadOptions::default()), Err(WorkloadError::UnknownHeader { .. })));
        let demo = repo_root().join("scenarios/demo.toml");
        let e = Workload::load(&demo, &LoadOptions { nodes: Some(3), limit: None });
        assert!(matches!(&e, Err(WorkloadError::Field { field, .. }) if field == "nodes"), "{e:?}");
    }

    #[test]
    fn pollux_rows_map_to_plans_on_the_default_cluster() {
        let csv = "name,time,application,num_replicas,batch_size\ncifar10-0,107,cifar10,6,2048\n";
        let w = Workload::from_pollux_csv("w", csv, &LoadOptions::default()).expect("loads");
        assert_eq!(w.nodes.len(), POLLUX_NODES);
        assert_eq!(
            w.nodes[3],
            NodeSpec {
                name: "node-3".into(),
                cpu_millicores: 64_000,
                memory_bytes: 256 * GIB,
                gpus: 4,
                gpu_memory_bytes: 32 * GIB
            }
        );
        assert_eq!(w.jobs, vec![training("cifar10-0".into(), Model::Cifar10, 107.0, 2048, 6, 1.0)]);
        let w = Workload::from_pollux_csv("w", csv, &LoadOptions { nodes: Some(2), limit: None }).expect("loads");
        assert_eq!(w.nodes.len(), 2);
    }

    #[test]
    fn philly_rows_map_to_models_by_gpu_time() {
        let text = philly_csv(&[
            "2017-10-09 07:00:00,100.0,1,100.0,a",         // row 1: < 1 GPU-h, odd → cifar10
            "2017-10-09 07:00:10,100.0,1,100.0,a",         // row 2: < 1 GPU-h, even → ncf
            "2017-10-09 07:00:20,7200.0,1,7200.0,a",       // row 3: 2 GPU-h, odd → deepspeech2
            "2017-10-09 07:00:30,3600.0,2,7200.0,a",       // row 4: 2 GPU-h, even → bert
            "2017-10-09 07:00:40,36000.0,4,144000.0,a",    // row 5: 40 GPU-h → yolov3
            "2017-10-09 07:00:50,360000.0,8,2880000.0,a",  // row 6: 800 GPU-h → imagenet
            "2017-10-09 06:59:00,30.0,1,30.0,a",           // row 7: too short, dropped
            "2017-10-09 07:01:00,1000000.0,4,4000000.0,a", // row 8: ≥ 1000 GPU-h, dropped
        ]);
        let w = Workload::from_philly_csv("p.csv", text.as_bytes(), &LoadOptions::default()).expect("loads");
        let got: Vec<(&str, Model, f64, u32)> =
            w.jobs.iter().map(|j| (j.name.as_str(), j.model, j.arrival_s, j.gpus)).collect();
        assert_eq!(
            got,
            [
                ("philly-1", Model::Cifar10, 0.0, 1),
                ("philly-2", Model::Ncf, 10.0, 1),
                ("philly-3", Model::Deepspeech2, 20.0, 1),
                ("philly-4", Model::Bert, 30.0, 2),
                ("philly-5", Model::Yolov3, 40.0, 4),
                ("philly-6", Model::Imagenet, 50.0, 8),
            ]
        );
        assert_eq!(w.nodes.len(), PHILLY_NODES);
        assert_eq!((w.nodes[0].cpu_millicores, w.nodes[0].memory_bytes, w.nodes[0].gpus), (64_000, 512 * GIB, 8));
    }

    #[test]
    fn a_philly_job_alone_at_full_parallelism_lasts_its_duration() {
        let text = philly_csv(&["2017-10-09 07:00:00,1800.0,1,1800.0,a", "2017-10-09 08:00:00,7200.0,1,7200.0,a"]);
        let w = Workload::from_philly_csv("p.csv", text.as_bytes(), &LoadOptions::default()).expect("loads");
        for (job, duration_s) in w.jobs.iter().zip([1800.0, 7200.0]) {
            let epochs = f64::from(job.model.curve(job.batch_size).epochs());
            let alone_s =
                epochs * job.model.work_per_epoch_core_s() * job.work_scale / job.model.max_parallelism_cores();
            assert!((alone_s - duration_s).abs() < 1e-6, "{}: {alone_s} s", job.name);
        }
        assert_eq!(w.jobs[1].arrival_s, 3600.0);
    }

    #[test]
    fn timestamps_parse_to_seconds_since_the_epoch() {
        assert_eq!(parse_timestamp_s("1970-01-01 00:00:00"), Ok(0));
        assert_eq!(parse_timestamp_s("2017-10-09 07:01:55"), Ok(1_507_532_515));
        assert_eq!(parse_timestamp_s("2000-03-01 00:00:00"), Ok(951_868_800));
        for bad in ["2017-10-09T07:01:55", "2017-13-09 07:01:55", "2017-10-09 7:01:55", "", "2017-1a-09 07:01:55"] {
            assert!(parse_timestamp_s(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn limit_keeps_the_first_jobs_by_arrival() {
        let csv = "name,time,application,num_replicas,batch_size\nb,50,ncf,1,256\na,10,ncf,1,256\nc,70,ncf,1,256\n";
        let w = Workload::from_pollux_csv("w.csv", csv, &LoadOptions { nodes: None, limit: Some(2) }).expect("loads");
        let names: Vec<&str> = w.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
    }

    #[test]
    fn default_targets_fill_only_missing_training_tiers() {
        let text = format!(
            "{NODE}[[job]]\nname = \"a\"\nmodel = \"cifar10\"\n[[job]]\nname = \"b\"\nmodel = \"ncf\"\ntiers = [0.6, 0.65]\n\
             [[job]]\nname = \"s\"\nmodel = \"bert\"\nkind = \"inference\"\nrequest-rate = 5\nduration = \"10m\"\n"
        );
        let w = Workload::from_scenario_str("t", &text).expect("loads").with_default_targets();
        assert_eq!(w.jobs[0].tiers, Some(Model::Cifar10.curve(Model::Cifar10.default_batch_size()).default_tiers()));
        assert_eq!(w.jobs[1].tiers, Some((0.6, 0.65)));
        assert_eq!(w.jobs[2].tiers, None);
    }

    #[test]
    fn every_example_scenario_and_bundled_workload_loads() {
        let mut loaded = 0;
        for dir in ["scenarios", "data/workloads"] {
            let entries = std::fs::read_dir(repo_root().join(dir)).expect("folder exists");
            for entry in entries {
                let path = entry.expect("readable folder").path();
                if !matches!(path.extension().and_then(|e| e.to_str()), Some("toml" | "csv")) {
                    continue;
                }
                let w = Workload::load(&path, &LoadOptions::default()).unwrap_or_else(|e| panic!("{e}"));
                assert!(w.jobs.windows(2).all(|p| p[0].arrival_s <= p[1].arrival_s), "{}", path.display());
                assert!(!w.nodes.is_empty());
                loaded += 1;
            }
        }
        assert!(loaded >= 6, "two scenarios and four Pollux workloads, found {loaded}");
        let demo = Workload::load(&repo_root().join("scenarios/demo.toml"), &LoadOptions::default()).expect("loads");
        assert_eq!(demo.nodes.len(), 1);
        assert_eq!(demo.nodes[0].cpu_millicores, 16_000);
        let training: Vec<&JobPlan> = demo.jobs.iter().filter(|j| j.kind == wit::JobKind::Training).collect();
        assert_eq!(training.len(), 6);
        assert!(training.iter().all(|j| j.arrival_s <= 120.0));
        assert_eq!(demo.jobs.iter().filter(|j| j.kind == wit::JobKind::Inference).count(), 1);
        let two =
            Workload::load(&repo_root().join("scenarios/two-nodes.toml"), &LoadOptions::default()).expect("loads");
        assert_eq!((two.nodes.len(), two.jobs.len()), (2, 8));
    }

    #[test]
    fn the_philly_trace_loads_whole() {
        let path = repo_root().join("../shared/data/philly_jobs_pollux.csv");
        if !path.exists() {
            eprintln!("SKIPPED: ../shared/data/philly_jobs_pollux.csv absent");
            return;
        }
        let w = Workload::load(&path, &LoadOptions::default()).expect("the trace loads");
        assert!(w.jobs.len() > 60_000, "{} jobs after filtering", w.jobs.len());
        assert!(w.jobs.windows(2).all(|p| p[0].arrival_s <= p[1].arrival_s), "sorted by arrival");
        assert_eq!(w.jobs[0].arrival_s, 0.0);
        for model in Model::ALL {
            assert!(w.jobs.iter().any(|j| j.model == model), "{model:?} present");
        }
        let limited = Workload::load(&path, &LoadOptions { nodes: Some(4), limit: Some(100) }).expect("loads");
        assert_eq!((limited.jobs.len(), limited.nodes.len()), (100, 4));
        assert_eq!(limited.jobs[..], w.jobs[..100]);
    }
}
