//! What a live backend knows of every job it manages, whatever runs it (a container, a pod):
//! the fields both live backends keep the same way.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use wasmsched_rules::JobId;

use crate::bindings::wit;
use crate::declare::Declared;

/// A managed job, as a live backend keeps it beside what runs it.
#[derive(Debug)]
pub struct Job {
    /// Its handle in the world.
    pub handle: JobId,
    /// The metrics its progress lines report, the main one first.
    pub metrics: Vec<wit::MetricSpec>,
    /// The command `deliver` runs inside it, if declared.
    pub deliver: Option<Vec<String>>,
    /// The folder its checkpoints are in, which a copy carries along, if declared.
    pub checkpoint: Option<String>,
    /// The GPUs it asks for.
    pub gpus_asked: u32,
    /// When it arrived, Unix ms: the queue's order (a copy keeps its original's).
    pub arrived_unix_ms: u64,
    /// Why starting it failed, once it has: the default placement leaves it (only a policy's
    /// `place` tries it again).
    pub refused: Option<String>,
    /// Epochs counted, for progress lines that do not name theirs.
    pub epochs: u32,
    /// The last log line read, Unix ns; a follower resumes after it.
    pub last_line_ns: Arc<AtomicU64>,
}

impl Job {
    /// Job `handle` as `declared`, arrived at `arrived_unix_ms`.
    pub fn new(handle: JobId, declared: &Declared, arrived_unix_ms: u64) -> Job {
        Job {
            handle,
            metrics: declared.spec.metrics.clone(),
            deliver: declared.deliver.clone(),
            checkpoint: declared.checkpoint.clone(),
            gpus_asked: declared.spec.gpus,
            arrived_unix_ms,
            refused: None,
            epochs: 0,
            last_line_ns: Arc::default(),
        }
    }
}
