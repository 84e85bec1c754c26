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

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde::Serialize;

use super::model::Model;
use super::paper::Claim;
use crate::bindings::wit;

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

impl JobPlan {
    /// A training job of `model` arriving at `arrival_s`: the model's default batch size, no
    /// GPU, no pinned node, its whole curve at the model's work per epoch, no targets.
    pub fn training(name: impl Into<String>, model: Model, arrival_s: f64) -> JobPlan {
        JobPlan {
            name: name.into(),
            model,
            kind: wit::JobKind::Training,
            arrival_s,
            node: None,
            batch_size: model.default_batch_size(),
            gpus: 0,
            max_epochs: None,
            work_scale: 1.0,
            tiers: None,
            qoe_target: None,
            request_rate: None,
            duration_s: None,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::trace::{PHILLY_HEADER, POLLUX_HEADER};
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

[[paper]]
policy = "flowcon"
figure = "best-job-jct"
value = -0.42
source = "a paper"
"#;
        let w = Workload::from_scenario_str("t.toml", text).expect("loads");
        assert_eq!(w.name, "full");
        assert_eq!((w.paper.len(), w.paper[0].figure), (1, crate::sim::paper::Figure::BestJobJct));
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
    fn unknown_key_is_refused_with_its_name_and_line() {
        let text = format!("{NODE}[[job]]\nname = \"a\"\nmodel = \"ncf\"\ncolour = \"red\"\n");
        let e = scenario_err(&text);
        assert!(matches!(e, WorkloadError::Toml { line: Some(7), .. }), "{e:?}");
        let message = e.to_string();
        assert!(message.contains("colour") && message.starts_with("t.toml:7:"), "{message}");
    }

    #[test]
    fn an_unknown_paper_figure_is_refused_with_the_known_ones() {
        let text = format!(
            "{NODE}[[job]]\nname = \"a\"\nmodel = \"ncf\"\n[[paper]]\npolicy = \"x\"\nfigure = \"speedup\"\nvalue = 1\nsource = \"s\"\n"
        );
        let message = scenario_err(&text).to_string();
        assert!(message.contains("speedup") && message.contains("best-job-jct"), "{message}");
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
        assert_eq!(
            w.jobs,
            vec![JobPlan { batch_size: 2048, gpus: 6, ..JobPlan::training("cifar10-0", Model::Cifar10, 107.0) }]
        );
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
