//! The CSV workloads: Pollux's `workload-*.csv` and the Philly trace (formats and the row
//! mapping in the parent module's docs).

use std::collections::HashMap;
use std::io::Read;

use wasmsched_sim::model::Model;
use wasmsched_sim::throughput::{GpuConfig, packed, run_s};
use wasmsched_sim::workload::{JobPlan, NodeSpec, Workload};

use super::{GIB, GpuJobs, LoadOptions, PHILLY_NODES, POLLUX_NODES, WorkloadError, finish};

/// The columns of a Pollux workload CSV, in the artifact's order.
const POLLUX_COLUMNS: [&str; 5] = ["name", "time", "application", "num_replicas", "batch_size"];
pub(super) const POLLUX_HEADER: &str = "name,time,application,num_replicas,batch_size";
/// The columns of the Philly trace CSV, in the file's order.
const PHILLY_COLUMNS: [&str; 5] = ["timestamp", "duration", "num_gpus", "gpu_time", "cluster"];
pub(super) const PHILLY_HEADER: &str = "timestamp,duration,num_gpus,gpu_time,cluster";

/// The most GPUs a job holds: the contract counts a job's GPUs in 16 bits
/// (`job-states.gpu-count`).
const MAX_JOB_GPUS: u32 = u16::MAX as u32;
/// Philly rows shorter than this are dropped (as in Pollux).
const PHILLY_MIN_DURATION_S: f64 = 60.0;
/// Philly rows with at least this much GPU time are dropped (1000 GPU-hours, as in Pollux).
const PHILLY_MAX_GPU_TIME_S: f64 = 1000.0 * 3600.0;

#[derive(Debug, PartialEq, Eq)]
pub(super) enum CsvFormat {
    Pollux,
    Philly,
}

/// Picks the CSV format from the header row: the format sharing most columns with it.
pub(super) fn detect(path: &str, header: &str) -> Result<CsvFormat, WorkloadError> {
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

/// The cluster of a CSV workload: its default one, resized by `opts.nodes`, or the named
/// `opts.cluster`.
fn cluster(
    path: &str,
    default_nodes: usize,
    opts: &LoadOptions,
    shape: NodeSpec,
) -> Result<Vec<NodeSpec>, WorkloadError> {
    if let Some(named) = opts.cluster {
        if opts.nodes.is_some() {
            return Err(WorkloadError::Field {
                path: path.into(),
                line: None,
                field: "nodes".into(),
                message: format!("cluster {} has its own nodes: drop the node count or the cluster", named.name()),
            });
        }
        return Ok(named.nodes());
    }
    let count = opts.nodes.unwrap_or(default_nodes);
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
pub(super) fn pollux(path: &str, name: &str, text: &str, opts: &LoadOptions) -> Result<Workload, WorkloadError> {
    let mut reader = csv_reader(text.as_bytes());
    let [c_name, c_time, c_app, c_replicas, c_batch] = csv_header(path, &mut reader, POLLUX_COLUMNS, POLLUX_HEADER)?;
    let nodes = cluster(
        path,
        POLLUX_NODES,
        opts,
        NodeSpec {
            name: String::new(),
            cpu_millicores: 64_000,
            memory_bytes: 256 * GIB,
            gpus: 4,
            gpu_memory_bytes: 32 * GIB,
            gpu_type: String::new(),
            domains: Vec::new(),
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
        // Data-parallel: each replica holds one GPU and may sit on any node.
        let gpu = gpus > 0;
        jobs.push(JobPlan {
            batch_size,
            gpus,
            replicas: gpus.max(1),
            elastic: gpu && opts.jobs == GpuJobs::Elastic,
            tuned: gpu && opts.jobs == GpuJobs::Tuned,
            ..JobPlan::training(job_name, model, arrival_s)
        });
    }
    finish(path, Workload::of(name, nodes, jobs), opts.limit)
}

/// Streams the Philly trace CSV (see the module docs for the mapping).
pub(super) fn philly(path: &str, name: &str, input: impl Read, opts: &LoadOptions) -> Result<Workload, WorkloadError> {
    let mut reader = csv_reader(input);
    let [c_time, c_duration, c_gpus, c_gpu_time, c_cluster] =
        csv_header(path, &mut reader, PHILLY_COLUMNS, PHILLY_HEADER)?;
    let nodes = cluster(
        path,
        PHILLY_NODES,
        opts,
        NodeSpec {
            name: String::new(),
            cpu_millicores: 64_000,
            memory_bytes: 512 * GIB,
            gpus: 8,
            gpu_memory_bytes: 32 * GIB,
            gpu_type: String::new(),
            domains: Vec::new(),
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
        if gpus > MAX_JOB_GPUS {
            let message = format!("{gpus} is more GPUs than a job holds ({MAX_JOB_GPUS}): fix the cell");
            return Err(row.err("num_gpus", message));
        }
        let gpu_time_s = row.non_negative(c_gpu_time, "gpu_time", "GPU-seconds")?;
        if duration_s < PHILLY_MIN_DURATION_S || gpu_time_s >= PHILLY_MAX_GPU_TIME_S {
            continue;
        }
        let model = philly_model(gpu_time_s, data_row);
        earliest_s = earliest_s.min(submitted_s);
        let batch = model.default_batch_size();
        let epochs = model.curve(batch).epochs();
        let work_scale = if gpus > 0 {
            let config = GpuConfig::new(model, batch, gpus);
            duration_s / run_s(model, config, &packed(gpus, nodes[0].gpus), epochs).max(1e-9)
        } else {
            duration_s * model.max_parallelism_cores() / (model.work_per_epoch_core_s() * f64::from(epochs))
        };
        if !work_scale.is_finite() {
            return Err(row.err("duration", format!("{duration_s} seconds is too long to simulate: fix the cell")));
        }
        // The virtual cluster a job was submitted to is its tenant.
        let tenant = match row.cell(c_cluster).trim() {
            "" => wasmsched_core::world::DEFAULT_TENANT.to_string(),
            vc if wasmsched_core::tenants::valid_name(vc) => vc.to_string(),
            vc => {
                return Err(row.err(
                    "cluster",
                    format!("`{vc}` is not a virtual cluster's name: {}", wasmsched_core::tenants::NAME_RULE),
                ));
            }
        };
        jobs.push(JobPlan {
            gpus,
            replicas: gpus.max(1),
            work_scale,
            tenant,
            ..JobPlan::training(format!("philly-{data_row}"), model, submitted_s)
        });
    }
    for job in &mut jobs {
        job.arrival_s -= earliest_s;
    }
    finish(path, Workload::of(name, nodes, jobs), opts.limit)
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

    #[test]
    fn timestamps_parse_to_seconds_since_the_epoch() {
        assert_eq!(parse_timestamp_s("1970-01-01 00:00:00"), Ok(0));
        assert_eq!(parse_timestamp_s("2017-10-09 07:01:55"), Ok(1_507_532_515));
        assert_eq!(parse_timestamp_s("2000-03-01 00:00:00"), Ok(951_868_800));
        for bad in ["2017-10-09T07:01:55", "2017-13-09 07:01:55", "2017-10-09 7:01:55", "", "2017-1a-09 07:01:55"] {
            assert!(parse_timestamp_s(bad).is_err(), "{bad:?}");
        }
    }
}
