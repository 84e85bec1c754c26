//! The scenario layer, above the backends: a [`Scenario`] is what an experiment runs — the
//! simulator's [`Workload`] (nodes and planned jobs), the published figures it sets out to
//! reproduce ([`Claim`]) and the disruption budget its runs go under — loaded from one of three
//! formats, each validated with an error that names the file, the line and what to change
//! ([`WorkloadError`]).
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
//!   [`Model::max_parallelism_cores`](wasmsched_sim::model::Model::max_parallelism_cores) cores);
//! - the job is named `philly-<row>`, `<row>` being its 1-based data row in the file;
//! - its tenant is the virtual cluster it was submitted to (`cluster`, e.g. `6214e9`; an empty
//!   cell: `default`), undeclared (weight 1, no quota) unless the run declares it.
//!
//! Default cluster: [`PHILLY_NODES`] nodes of 64 cores, 512 GiB, 8 GPUs of 32 GiB.
//!
//! Whatever the format, jobs are sorted by arrival (stably), names are unique, and
//! [`LoadOptions`] may resize a CSV workload's cluster and keep only its first jobs.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use wasmsched_loop::budget::BudgetConfig;
use wasmsched_loop::watchdog::WatchdogConfig;
use wasmsched_sim::workload::Workload;

pub mod claim;
mod parse;
mod trace;

pub use claim::{Claim, Figure};
use trace::{CsvFormat, detect, philly, pollux};

const GIB: u64 = 1 << 30;

/// Nodes in the default cluster of a Pollux workload.
pub const POLLUX_NODES: usize = 16;
/// Nodes in the default cluster of the Philly trace.
pub const PHILLY_NODES: usize = 256;

/// What an experiment runs: a workload, the figures it sets out to reproduce, and the
/// disruption budget its runs go under.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// The nodes and the planned jobs: what the simulator runs.
    pub workload: Workload,
    /// What a paper reports for this set-up (a scenario's `[[paper]]` tables), to print beside
    /// our figures.
    pub claims: Vec<Claim>,
    /// The disruption budget its runs go under: a scenario's `[budget]` table, the cautious
    /// default when it has none; off for Pollux's workloads and the Philly trace, which
    /// reproduce published set-ups.
    pub budget: BudgetConfig,
    /// The watchdog its runs go under: a scenario's `[watchdog]` table, the default when it
    /// has none.
    pub watchdog: WatchdogConfig,
    /// The tenants its jobs belong to, as declared (`[[tenants]]`); none for a CSV workload.
    pub tenants: Vec<wasmsched_core::bindings::wit::Tenant>,
    /// Input shaking for every seed of its runs (`--perturb`, [`wasmsched_sim::workload::Workload::shaken`]):
    /// 0 runs the workload as written.
    pub perturb: f64,
}

/// How to load a workload file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Overrides the default cluster size of a CSV workload (refused for a scenario, which
    /// lists its own nodes).
    pub nodes: Option<usize>,
    /// Keeps only the first N jobs by arrival.
    pub limit: Option<usize>,
    /// Runs a CSV workload on one of the clusters Sia's evaluation simulates instead of its
    /// default cluster (refused with `nodes`, and for a scenario).
    pub cluster: Option<Cluster>,
    /// How a CSV workload's GPU training jobs run.
    pub jobs: GpuJobs,
}

/// How a CSV workload's GPU training jobs run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GpuJobs {
    /// At their `num_replicas` and `batch_size`, to their curve's end (Pollux's simulator).
    #[default]
    Rigid,
    /// Sia's adaptive jobs: any GPU count a policy gives them, their own batch size, their
    /// model's full schedule and restore delay; their `num_replicas` and `batch_size` stay
    /// what they ask for and start at.
    Elastic,
    /// Sia's TunedJobs: rigid at their `num_replicas` and `batch_size`, run by the same rules
    /// as elastic jobs otherwise (their model's full schedule, progress by goodput, restore
    /// delay), as Sia's simulator runs Gavel's and Themis's jobs.
    Tuned,
}

/// The clusters of Sia's evaluation (SOSP'23, Tables 3 and 4), 64 GPUs each, for CSV workloads.
/// Their CPU and memory figures are ours; GPU memory is the type's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cluster {
    /// Six nodes of 4 T4, three of 8 RTX 2080Ti, two of 8 A100 (Table 3).
    Heterogeneous64,
    /// Sixteen nodes of 4 T4 (Table 4).
    Homogeneous64,
}

impl Cluster {
    /// Every cluster, in declaration order.
    pub const ALL: [Cluster; 2] = [Cluster::Heterogeneous64, Cluster::Homogeneous64];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Cluster::Heterogeneous64 => "heterogeneous-64",
            Cluster::Homogeneous64 => "homogeneous-64",
        }
    }

    /// The cluster named `name`, or what to write instead.
    pub fn parse(name: &str) -> Result<Cluster, String> {
        Cluster::ALL.into_iter().find(|c| c.name() == name).ok_or_else(|| {
            let known: Vec<&str> = Cluster::ALL.iter().map(|c| c.name()).collect();
            format!("{name:?} is not a cluster the simulator knows: write one of {}", known.join(", "))
        })
    }

    /// Its nodes: `<type>-<i>`, type by type.
    pub fn nodes(self) -> Vec<wasmsched_sim::workload::NodeSpec> {
        let groups: &[(&str, usize, u32, u64)] = match self {
            Cluster::Heterogeneous64 => &[("t4", 6, 4, 16), ("rtx", 3, 8, 11), ("a100", 2, 8, 40)],
            Cluster::Homogeneous64 => &[("t4", 16, 4, 16)],
        };
        let mut nodes = Vec::new();
        for &(gpu_type, count, gpus, gpu_gib) in groups {
            for i in 0..count {
                nodes.push(wasmsched_sim::workload::NodeSpec {
                    name: format!("{gpu_type}-{i}"),
                    cpu_millicores: 64_000,
                    memory_bytes: 256 * GIB,
                    gpus,
                    gpu_memory_bytes: gpu_gib * GIB,
                    gpu_type: gpu_type.into(),
                    domains: Vec::new(),
                });
            }
        }
        nodes
    }
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

impl Scenario {
    /// A workload with no published figures and no disruption budget: what a trace or a test
    /// runs.
    pub fn of(workload: Workload) -> Scenario {
        Scenario {
            workload,
            claims: Vec::new(),
            budget: BudgetConfig::off(),
            watchdog: WatchdogConfig::default(),
            tenants: Vec::new(),
            perturb: 0.0,
        }
    }

    /// Its name, for reports.
    pub fn name(&self) -> &str {
        &self.workload.name
    }

    /// Loads `path` by its extension: `.toml` is a scenario; `.csv` is the Philly trace if its
    /// header is `timestamp,duration,num_gpus,gpu_time,cluster`, a Pollux workload if it is
    /// `name,time,application,num_replicas,batch_size`. A header close to one of them gets that
    /// format's missing/unknown-column error; one sharing no column with either is refused
    /// naming both. The workload is named after the file's stem (a scenario's `name` wins).
    pub fn load(path: &Path, opts: &LoadOptions) -> Result<Scenario, WorkloadError> {
        let label = path.display().to_string();
        let stem = path.file_stem().map_or_else(|| label.clone(), |s| s.to_string_lossy().into_owned());
        let read_err = |source| WorkloadError::Read { path: label.clone(), source };
        let extension = path.extension().map(|e| e.to_string_lossy().to_ascii_lowercase());
        match extension.as_deref() {
            Some("toml") => {
                if opts.cluster.is_some() {
                    return Err(WorkloadError::Field {
                        path: label,
                        line: None,
                        field: "cluster".into(),
                        message: "a scenario lists its own [[node]] tables; a cluster applies to CSV workloads only: \
                                  drop it or edit the scenario"
                            .into(),
                    });
                }
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
                let mut scenario = parse::scenario(&label, &stem, &text, path.parent())?;
                scenario.workload = finish(&label, scenario.workload, opts.limit)?;
                Ok(scenario)
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
                    CsvFormat::Philly => philly(&label, &stem, reader, opts).map(Scenario::of),
                    CsvFormat::Pollux => {
                        let mut text = String::new();
                        reader.read_to_string(&mut text).map_err(read_err)?;
                        pollux(&label, &stem, &text, opts).map(Scenario::of)
                    }
                }
            }
            _ => Err(WorkloadError::UnknownFormat { path: label }),
        }
    }

    /// Parses a TOML scenario; `name` names the workload (unless the scenario has its own) and
    /// stands for the file in errors. Its `[[profile]]` files are read relative to the current
    /// directory.
    pub fn from_toml_str(name: &str, text: &str) -> Result<Scenario, WorkloadError> {
        let mut scenario = parse::scenario(name, name, text, None)?;
        scenario.workload = finish(name, scenario.workload, None)?;
        Ok(scenario)
    }

    /// Parses a Pollux workload CSV; `name` names the workload and stands for the file in
    /// errors.
    pub fn from_pollux_csv(name: &str, text: &str, opts: &LoadOptions) -> Result<Scenario, WorkloadError> {
        pollux(name, name, text, opts).map(Scenario::of)
    }

    /// Streams the Philly trace CSV from `reader`; `name` names the workload and stands for the
    /// file in errors.
    pub fn from_philly_csv(name: &str, reader: impl Read, opts: &LoadOptions) -> Result<Scenario, WorkloadError> {
        philly(name, name, reader, opts).map(Scenario::of)
    }

    /// The workload of the file at `path`, its jobs given their default targets: what the
    /// long-running host's simulator runs (`Host::new` takes this as its workload loader).
    pub fn load_workload(path: &Path) -> Result<Workload, WorkloadError> {
        Ok(Scenario::load(path, &LoadOptions::default())?.with_default_targets().workload)
    }

    /// Gives every training job without tiers the default tiers of its curve
    /// ([`Workload::with_default_targets`]).
    pub fn with_default_targets(mut self) -> Scenario {
        self.workload = self.workload.with_default_targets();
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
