//! The telemetry recording's lines, a leaf that both the writer above the loop
//! ([`crate::record`]) and the playback backend ([`crate::backend::playback`]) read: each tick's
//! snapshot delta as the host encoded it, and the decision that was applied.

use serde::{Deserialize, Serialize};

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
    pub snapshot: wit::Snapshot,
    /// The active policy's decision, when it was asked.
    pub decision: Option<RecordedDecision>,
}

/// A recorded snapshot is one this host could have written: each group of columns of one
/// length (a replay reads them side by side), and no job handle past the last one.
pub fn check_snapshot(s: &wit::Snapshot) -> Result<(), String> {
    let (j, q, p) = (&s.jobs, &s.queue, &s.progress);
    let groups: [(&str, usize, &[usize]); 3] = [
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
            ],
        ),
        ("queue", q.handle.len(), &[q.reason.len(), q.since_ms.len(), q.run_ms.len(), q.gpu_ms.len()]),
        ("progress", p.job.len(), &[p.time_ms.len(), p.epoch.len(), p.value_count.len()]),
    ];
    if let Some((group, _, _)) = groups.iter().find(|(_, len, others)| others.iter().any(|o| o != len)) {
        return Err(format!("the {group} columns are of unequal lengths, which no host writes: record the run again"));
    }
    if s.added.iter().any(|spec| spec.handle == u32::MAX) {
        return Err(format!("a job handle is {}, past the last one a host gives: record the run again", u32::MAX));
    }
    Ok(())
}
