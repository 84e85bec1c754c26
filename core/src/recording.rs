//! The telemetry recording's lines, a leaf that both the writer above the loop (`record.rs` in
//! `wasmsched`) and the playback backend (`backend/playback.rs` there) read: each tick's snapshot
//! delta as the host encoded it, and the decision that was applied.

use serde::{Deserialize, Serialize};
use wasmsched_rules::JobId;

use crate::bindings::wit;

/// The decision a recorded tick applied.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedDecision {
    /// The active policy's name.
    pub policy: String,
    /// Its sha256.
    pub sha256: String,
    /// The actions handed to the backend.
    pub actions: Vec<wit::Action>,
    /// Whether they were a fallback's.
    pub fallback: bool,
}

/// One tick of a telemetry recording: what the backend showed, and what was done.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedTick {
    /// The tick's number, from 1.
    pub tick: u64,
    /// What changed since the previous tick (the first is a full resync).
    #[serde(deserialize_with = "snapshot_with_nan")]
    pub snapshot: wit::Snapshot,
    /// The active policy's decision, when it was asked.
    pub decision: Option<RecordedDecision>,
    /// A split experiment's arms' decisions, in the experiment's order, each applied for its
    /// own jobs (no policy was active).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arms: Vec<RecordedDecision>,
    /// The last records of the jobs that left since the previous tick, which the snapshot no
    /// longer carries (their final epochs): what `wasmsched whatif` reads their ends from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub departed: Vec<DepartedRecord>,
}

/// A record of a job that has left, kept in the recording beside the snapshot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DepartedRecord {
    /// The job.
    pub job: JobId,
    /// When it was reported, ms.
    pub time_ms: u64,
    /// Epochs completed.
    pub epoch: u32,
    /// Values in the order of the job's metrics (null for a missing one).
    pub values: Vec<Option<f64>>,
}

/// A recorded snapshot read back. serde_json writes a NaN as null, which it does not read back
/// as a float: the float columns (a progress value is NaN where a metric is missing) are read
/// as optional numbers, null as NaN.
fn snapshot_with_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<wit::Snapshot, D::Error> {
    use serde::de::Error;
    let mut value = serde_json::Value::deserialize(d)?;
    upgrade(&mut value);
    let mut floats = |pointer: &str| -> Result<Vec<f64>, D::Error> {
        let Some(column) = value.pointer_mut(pointer) else { return Ok(Vec::new()) };
        let read: Vec<Option<f64>> = serde_json::from_value(column.take()).map_err(D::Error::custom)?;
        *column = serde_json::Value::Array(Vec::new());
        Ok(read.into_iter().map(|v| v.unwrap_or(f64::NAN)).collect())
    };
    let values = floats("/progress/values")?;
    let gpu_used = floats("/jobs/gpu_used_percent")?;
    let utilisation = floats("/gpus/utilisation_percent")?;
    let mut s: wit::Snapshot = serde_json::from_value(value).map_err(D::Error::custom)?;
    s.progress.values = values;
    s.jobs.gpu_used_percent = gpu_used.into_iter().map(|v| v as f32).collect();
    s.gpus.utilisation_percent = utilisation.into_iter().map(|v| v as f32).collect();
    Ok(s)
}

/// A snapshot recorded under contract 0.2.0 or 0.3.0 read as a 0.4.0 one: no node down, GPUs
/// of no known type, no batch size, every job rigid; no requests, selectors, labels or
/// domains, and no room recorded (empty columns: a replay counts the room itself).
fn upgrade(value: &mut serde_json::Value) {
    use serde_json::{Value, json};
    let Some(s) = value.as_object_mut() else { return };
    s.entry("nodes_down").or_insert_with(|| json!([]));
    s.entry("room").or_insert_with(|| json!({"cpu_millicores": [], "memory_bytes": [], "pods": []}));
    if let Some(nodes) = s.get_mut("nodes").and_then(Value::as_array_mut) {
        for n in nodes.iter_mut().filter_map(Value::as_object_mut) {
            n.entry("gpu_type").or_insert_with(|| json!(""));
            n.entry("labels").or_insert_with(|| json!([]));
            n.entry("domains").or_insert_with(|| json!([]));
        }
    }
    if let Some(added) = s.get_mut("added").and_then(Value::as_array_mut) {
        for spec in added.iter_mut().filter_map(Value::as_object_mut) {
            spec.entry("scaling")
                .or_insert_with(|| json!({"gpu_counts": [], "batch_size_min": 0, "batch_size_max": 0}));
            spec.entry("requests").or_insert_with(|| json!({"cpu_millicores": 0, "memory_bytes": 0}));
            spec.entry("node_selector").or_insert_with(|| json!([]));
        }
    }
    if let Some(jobs) = s.get_mut("jobs").and_then(Value::as_object_mut) {
        let rows = jobs.get("handle").and_then(Value::as_array).map_or(0, Vec::len);
        jobs.entry("batch_size").or_insert_with(|| json!(vec![0; rows]));
    }
}

/// A recorded snapshot is one this host could have written: each group of columns of one
/// length (a replay reads them side by side), as many held GPUs as the jobs' GPU counts add up
/// to, as many values as the records' value counts, a GPU column per GPU of the nodes sent, and
/// no job handle past the last one. The SDKs' tables refuse the same deltas (the conformance
/// vectors in `wit/conformance/snapshots.json` hold one of each).
pub fn check_snapshot(s: &wit::Snapshot) -> Result<(), String> {
    let (j, q, p, g) = (&s.jobs, &s.queue, &s.progress, &s.gpus);
    let held: usize = j.gpu_count.iter().map(|&n| usize::from(n)).sum();
    let counted: usize = p.value_count.iter().map(|&n| usize::from(n)).sum();
    let node_gpus = s.nodes.as_ref().map(|nodes| nodes.iter().map(|n| n.gpu_memory_bytes.len()).sum::<usize>());
    let groups: [(&str, usize, &[usize]); 5] = [
        (
            "jobs",
            j.handle.len(),
            &[
                j.node.len(),
                j.cpu_limit_millicores.len(),
                j.memory_limit_bytes.len(),
                j.cpu_used_millicores.len(),
                j.memory_used_bytes.len(),
                j.gpu_count.len(),
                j.gpu_share_percent.len(),
                j.gpu_used_percent.len(),
                j.run_ms.len(),
                j.gpu_ms.len(),
                j.batch_size.len(),
            ],
        ),
        ("held GPU", held, &[j.gpu_node.len(), j.gpu_index.len()]),
        ("queue", q.handle.len(), &[q.reason.len(), q.since_ms.len(), q.run_ms.len(), q.gpu_ms.len()]),
        ("progress", p.job.len(), &[p.time_ms.len(), p.epoch.len(), p.value_count.len()]),
        ("progress value", counted, &[p.values.len()]),
    ];
    if let Some((group, _, _)) = groups.iter().find(|(_, len, others)| others.iter().any(|o| o != len)) {
        return Err(format!("the {group} columns are of unequal lengths, which no host writes: record the run again"));
    }
    let gpu_columns = g.utilisation_percent.len();
    if g.memory_used_bytes.len() != gpu_columns || node_gpus.is_some_and(|n| n != gpu_columns) {
        return Err("the GPU columns do not match the nodes' GPUs, which no host writes: record the run again".into());
    }
    if s.added.iter().any(|spec| spec.handle == JobId(u32::MAX)) {
        return Err(format!("a job handle is {}, past the last one a host gives: record the run again", u32::MAX));
    }
    let r = &s.room;
    let rows = r.cpu_millicores.len();
    if r.memory_bytes.len() != rows
        || r.pods.len() != rows
        || s.nodes.as_ref().is_some_and(|n| rows != 0 && n.len() != rows)
    {
        return Err("the room columns do not match the nodes, which no host writes: record the run again".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::Cursor;

    #[test]
    fn a_missing_metric_recorded_as_null_reads_back_as_nan() {
        let mut world = crate::world::sample::world(1, 1, 0);
        world.record(JobId(0), 1, vec![f64::NAN, 0.5]);
        let tick = RecordedTick {
            tick: 1,
            snapshot: world.snapshot_for(&mut Cursor::fresh()),
            decision: None,
            arms: Vec::new(),
            departed: Vec::new(),
        };
        let line = serde_json::to_string(&tick).unwrap();
        assert!(line.contains("\"values\":[null,0.5]"), "{line}");
        let back: RecordedTick = serde_json::from_str(&line).unwrap();
        let values = &back.snapshot.progress.values;
        assert!(values[0].is_nan() && values[1] == 0.5, "{values:?}");
        assert_eq!(back.snapshot.gpus, tick.snapshot.gpus);
    }

    #[test]
    fn a_snapshot_no_host_writes_is_refused_with_what_is_wrong() {
        let world = crate::world::sample::world(1, 2, 1);
        let good = world.snapshot_for(&mut Cursor::fresh());
        assert_eq!(check_snapshot(&good), Ok(()));
        let mut held = good.clone();
        held.jobs.gpu_count[0] = 1;
        assert!(check_snapshot(&held).unwrap_err().contains("held GPU columns"));
        let mut values = good.clone();
        values.progress.values.pop();
        assert!(check_snapshot(&values).unwrap_err().contains("progress value columns"));
        let mut gpus = good;
        gpus.gpus.memory_used_bytes.push(0);
        assert!(check_snapshot(&gpus).unwrap_err().contains("GPU columns do not match"));
    }
}
