//! Sia's workload CSVs (`data/workloads/sia/…`): one row per job, `name,time,application,
//! num_replicas,batch_size`, read as the simulator reads them (`lab/src/scenario/trace.rs`):
//! `time` the arrival in seconds, `num_replicas` the GPUs, one a replica. Pure, tested here.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// The workload a `sia` run submits unless told otherwise (160 jobs over 8 h).
pub const DEFAULT_WORKLOAD: &str = "data/workloads/sia/philly/workload-1.csv";

/// The columns of a Sia workload, in the artifact's order.
const COLUMNS: [&str; 5] = ["name", "time", "application", "num_replicas", "batch_size"];

/// The longest job name taken: a pod is `<job>-<replica>`, and a pod's name must make a host
/// name (63 characters) with room for the replica's number.
const MAX_NAME: usize = 56;

/// Why a workload could not be read. Every message names the file and, for a row, its line.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The file could not be read.
    #[error(
        "cannot read the workload {path}: pass --workload, or run from the repository root (the default is {DEFAULT_WORKLOAD})"
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A line that is not what a Sia workload has there.
    #[error("{path}:{line}: {detail}")]
    Line {
        /// The file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
        /// What is wrong and what to write instead.
        detail: String,
    },
    /// A header and no job.
    #[error("{path}: no jobs: after the header `name,time,application,num_replicas,batch_size`, write a row per job")]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// One job of the workload: a `PodGroup` of `replicas` pods, one GPU each.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SiaJob {
    /// Its name: its `PodGroup`'s, and its pods' `<name>-<replica>`.
    pub name: String,
    /// When it arrives, seconds from the workload's start (before any speed-up).
    pub arrival_s: f64,
    /// Its model (`wasmsched.model`): Sia's `application`.
    pub application: String,
    /// Its pods, one GPU each (`num_replicas`).
    pub replicas: u32,
    /// Its global batch size (`wasmsched.batch-size`).
    pub batch_size: u32,
    /// Its line in the file.
    pub line: usize,
}

impl SiaJob {
    /// The name of its `replica`th pod (from 0), numbers padded so that name order is replica
    /// order (the host takes a group's pods in name order as its pieces).
    pub fn pod_name(&self, replica: u32) -> String {
        let width = self.replicas.saturating_sub(1).to_string().len();
        format!("{}-{replica:0width$}", self.name)
    }
}

/// Reads the workload at `path`: its jobs in arrival order (rows of one time in file order).
pub fn read(path: &Path) -> Result<Vec<SiaJob>, WorkloadError> {
    let text = std::fs::read_to_string(path).map_err(|source| WorkloadError::Read { path: path.to_owned(), source })?;
    parse(path, &text)
}

/// Parses a workload's `text` (`path` names it in errors): its jobs in arrival order.
pub fn parse(path: &Path, text: &str) -> Result<Vec<SiaJob>, WorkloadError> {
    let fail = |line: usize, detail: String| WorkloadError::Line { path: path.to_owned(), line, detail };
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim_end_matches('\r')));
    let (header_line, header) = lines
        .by_ref()
        .find(|(_, l)| !l.trim().is_empty())
        .ok_or_else(|| WorkloadError::Empty { path: path.to_owned() })?;
    let columns: Vec<&str> = header.trim_start_matches('\u{feff}').split(',').map(str::trim).collect();
    let index = |name: &str| columns.iter().position(|c| *c == name);
    let expected = COLUMNS.join(",");
    if let Some(unknown) = columns.iter().find(|c| !COLUMNS.contains(c)) {
        return Err(fail(header_line, format!("unknown column `{unknown}`: the header must be `{expected}`")));
    }
    let mut at = [0; 5];
    for (slot, name) in at.iter_mut().zip(COLUMNS) {
        *slot = index(name)
            .ok_or_else(|| fail(header_line, format!("missing column `{name}`: the header must be `{expected}`")))?;
    }
    let [c_name, c_time, c_app, c_replicas, c_batch] = at;

    let mut jobs = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (line, text) in lines {
        if text.trim().is_empty() {
            continue;
        }
        let cells: Vec<&str> = text.split(',').map(str::trim).collect();
        if cells.len() != columns.len() {
            return Err(fail(
                line,
                format!("{} fields where the header has {}: fix the row", cells.len(), columns.len()),
            ));
        }
        let cell = |i: usize, what: &str, why: &str| fail(line, format!("{what} `{}` {why}", cells[i]));
        let name = cells[c_name].to_owned();
        if !is_name(&name) {
            return Err(cell(
                c_name,
                "name",
                &format!(
                    "is not a name Kubernetes takes for a PodGroup: write at most {MAX_NAME} lowercase letters, digits, \
                     '-' and '.', beginning and ending with a letter or digit"
                ),
            ));
        }
        let arrival_s: f64 = cells[c_time]
            .parse()
            .ok()
            .filter(|t: &f64| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| cell(c_time, "time", "is not an arrival in seconds: write a number of at least 0"))?;
        let application = cells[c_app].to_owned();
        if !is_label_value(&application) {
            return Err(cell(
                c_app,
                "application",
                "is not a label value: write a model name of letters, digits, '-', '_' and '.' (cifar10, bert, …)",
            ));
        }
        let replicas: u32 = cells[c_replicas].parse().ok().filter(|r| *r >= 1).ok_or_else(|| {
            cell(c_replicas, "num_replicas", "is not a GPU count: write a whole number of at least 1")
        })?;
        let batch_size: u32 =
            cells[c_batch].parse().ok().filter(|b| *b >= 1).ok_or_else(|| {
                cell(c_batch, "batch_size", "is not a batch size: write a whole number of at least 1")
            })?;
        if let Some(first) = seen.insert(name.clone(), line) {
            return Err(fail(
                line,
                format!("job `{name}` is named again (first on line {first}): names must be unique"),
            ));
        }
        jobs.push(SiaJob { name, arrival_s, application, replicas, batch_size, line });
    }
    if jobs.is_empty() {
        return Err(WorkloadError::Empty { path: path.to_owned() });
    }
    jobs.sort_by(|a, b| a.arrival_s.total_cmp(&b.arrival_s));
    Ok(jobs)
}

/// Whether `name` is a DNS-1123 subdomain short enough for its pods' names ([`MAX_NAME`]).
fn is_name(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    name.len() <= MAX_NAME
        && name.starts_with(alnum)
        && name.ends_with(alnum)
        && name.chars().all(|c| alnum(c) || c == '-' || c == '.')
}

/// Whether `value` is a label value Kubernetes takes (non-empty here: a model must be named).
fn is_label_value(value: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    value.len() <= 63
        && value.starts_with(alnum)
        && value.ends_with(alnum)
        && value.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<Vec<SiaJob>, WorkloadError> {
        parse(Path::new("w.csv"), text)
    }

    fn error(text: &str) -> String {
        parsed(text).unwrap_err().to_string()
    }

    #[test]
    fn good_rows_become_jobs_in_arrival_order() {
        let jobs = parsed(
            "name,time,application,num_replicas,batch_size\n\
             cifar10-0,107,cifar10,6,2048\n\
             bert-1,12.5,bert,16,12\n\
             \n\
             deepspeech2-3,262,deepspeech2,12,640\n",
        )
        .unwrap();
        let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, ["bert-1", "cifar10-0", "deepspeech2-3"]);
        assert_eq!(
            jobs[1],
            SiaJob {
                name: "cifar10-0".into(),
                arrival_s: 107.0,
                application: "cifar10".into(),
                replicas: 6,
                batch_size: 2048,
                line: 2
            }
        );
        assert_eq!((jobs[0].arrival_s, jobs[0].replicas, jobs[2].line), (12.5, 16, 5));
    }

    #[test]
    fn columns_may_come_in_any_order() {
        let jobs = parsed("application,batch_size,name,num_replicas,time\nncf,512,x,2,7\n").unwrap();
        assert_eq!((jobs[0].name.as_str(), jobs[0].application.as_str(), jobs[0].replicas), ("x", "ncf", 2));
    }

    #[test]
    fn a_malformed_row_is_an_error_naming_its_line_and_cell() {
        let header = "name,time,application,num_replicas,batch_size\n";
        let e = error(&format!("{header}a,0,cifar10,4,128\nb,soon,cifar10,4,128\n"));
        assert!(e.starts_with("w.csv:3: time `soon`"), "{e}");
        let e = error(&format!("{header}a,0,cifar10,4\n"));
        assert!(e.starts_with("w.csv:2: 4 fields where the header has 5"), "{e}");
        let e = error(&format!("{header}a,0,cifar10,0,128\n"));
        assert!(e.contains("w.csv:2: num_replicas `0`") && e.contains("at least 1"), "{e}");
        let e = error(&format!("{header}Big_Job,0,cifar10,1,128\n"));
        assert!(e.contains("w.csv:2: name `Big_Job`") && e.contains("lowercase"), "{e}");
        let e = error(&format!("{header}a,-1,cifar10,1,128\n"));
        assert!(e.contains("w.csv:2: time `-1`"), "{e}");
        let e = error(&format!("{header}a,0,cifar10,1,128\na,5,bert,1,8\n"));
        assert!(e.contains("w.csv:3: job `a` is named again (first on line 2)"), "{e}");
    }

    #[test]
    fn a_bad_header_or_no_jobs_says_what_to_write() {
        let e = error("name,time,application,num_replicas\na,0,cifar10,1\n");
        assert!(e.contains("w.csv:1: missing column `batch_size`"), "{e}");
        let e = error("name,time,application,num_replicas,batch_size,user\n");
        assert!(e.contains("w.csv:1: unknown column `user`"), "{e}");
        assert!(error("name,time,application,num_replicas,batch_size\n").contains("no jobs"));
        assert!(error("").contains("no jobs"));
    }

    #[test]
    fn pods_are_named_after_their_job_padded_to_sort_in_replica_order() {
        let job = |replicas| SiaJob {
            name: "cifar10-2".into(),
            arrival_s: 0.0,
            application: "cifar10".into(),
            replicas,
            batch_size: 8,
            line: 2,
        };
        assert_eq!(job(16).pod_name(3), "cifar10-2-03");
        assert_eq!(job(6).pod_name(5), "cifar10-2-5");
        assert!(job(16).pod_name(9) < job(16).pod_name(10));
    }

    #[test]
    fn the_shipped_workload_parses_to_160_jobs() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(DEFAULT_WORKLOAD);
        let jobs = read(&path).unwrap();
        assert_eq!(jobs.len(), 160);
        assert!(jobs.windows(2).all(|w| w[0].arrival_s <= w[1].arrival_s));
        assert!(jobs.iter().all(|j| j.replicas <= 64), "every job fits heterogeneous-64");
    }
}
