//! What an action did to a job on a live backend, and the world's update for it: one rule for
//! every live backend, which keeps only its own books (container ids, pod uids, log followers).

use wasmsched_rules::{JobId, NodeId};

use crate::bindings::wit;
use crate::world::{GpuSlot, World};

/// What an action did. `C` is how the backend names the copy that carries a job on after it
/// was re-created (Docker: the new container's id; Kubernetes: the new pod's uid and name).
#[derive(Clone, Debug, PartialEq)]
pub enum Effect<C> {
    /// Its CPU limit is now this (None: none).
    Cpu(Option<u64>),
    /// Its memory limit is now this (None: none).
    Memory(Option<u64>),
    /// Nothing the world shows changed (a delivery, a stop that the next observation sees).
    Done,
    /// A queued job started on `node` with `gpus` there, as `copy` when one was made.
    Started {
        /// Its node.
        node: NodeId,
        /// Its GPUs there.
        gpus: Vec<u32>,
        /// The copy that runs it, where the backend made one to start it.
        copy: Option<C>,
    },
    /// A queued job started whole on several nodes at once (a group of pods): `node` its first,
    /// `gpus` every GPU it got, on every node.
    StartedSpread {
        /// Its first node.
        node: NodeId,
        /// Its GPUs, on all its nodes.
        gpus: Vec<GpuSlot>,
    },
    /// A running job was re-created from its checkpoint as `copy` on `node`, on `gpus` there:
    /// a migration, or (with `resized`) a resize, at that batch size (None: the one it had).
    Moved {
        /// Its node now.
        node: NodeId,
        /// Its GPUs there.
        gpus: Vec<u32>,
        /// The copy that runs it.
        copy: C,
        /// After a resize, the batch size in force (None within: unchanged).
        resized: Option<Option<u32>>,
    },
    /// A job spread over several nodes (a group of pods) was re-created as `copies` (one per
    /// piece, in order; perhaps another number of them) on `gpus`, `node` its first: a running
    /// one's migration or resize from its checkpoint, at that batch size (None: the one it
    /// had), or a queued elastic one's placement in another shape (it starts).
    MovedSpread {
        /// Its first node now.
        node: NodeId,
        /// Its GPUs now, on all its nodes.
        gpus: Vec<GpuSlot>,
        /// The copies that run it, piece by piece.
        copies: Vec<C>,
        /// After a resize, the batch size in force (None within: unchanged; None: a migration).
        resized: Option<Option<u32>>,
    },
    /// A running job was re-created as `copy` with its GPU share at `percent`.
    Shared {
        /// The copy that runs it.
        copy: C,
        /// Its share of each of its GPUs.
        percent: u8,
    },
    /// A running job was stopped and waits again, preempted, as `copy`.
    Requeued {
        /// The copy that waits.
        copy: C,
    },
    /// A queued job was removed.
    Removed,
}

impl<C> Effect<C> {
    /// Put the effect on `job` into `world`.
    pub fn update(&self, job: JobId, world: &mut World) {
        match self {
            Effect::Cpu(limit) => {
                if let Some(s) = world.state_mut(job) {
                    s.cpu_limit_millicores = *limit;
                }
            }
            Effect::Memory(limit) => {
                if let Some(s) = world.state_mut(job) {
                    s.memory_limit_bytes = *limit;
                }
            }
            Effect::Done => {}
            Effect::Started { node, gpus, .. } => {
                world.start_job(job, *node, slots(*node, gpus));
            }
            Effect::StartedSpread { node, gpus } => {
                world.start_job(job, *node, gpus.clone());
            }
            Effect::Moved { node, gpus, resized, .. } => {
                copied(job, world);
                if let Some(s) = world.state_mut(job) {
                    s.node = *node;
                    s.gpus = slots(*node, gpus);
                    s.batch_size = resized.flatten().unwrap_or(s.batch_size);
                }
            }
            Effect::MovedSpread { node, gpus, resized, .. } => {
                if world.state(job).is_some_and(|s| !s.is_running()) {
                    // A queued group placed in another shape.
                    world.start_job(job, *node, gpus.clone());
                }
                copied(job, world);
                if let Some(s) = world.state_mut(job) {
                    s.node = *node;
                    s.gpus = gpus.clone();
                    s.batch_size = resized.flatten().unwrap_or(s.batch_size);
                }
            }
            Effect::Shared { percent, .. } => {
                copied(job, world);
                if let Some(s) = world.state_mut(job) {
                    s.gpu_share_percent = Some(*percent).filter(|&p| p < 100);
                }
            }
            Effect::Requeued { .. } => {
                copied(job, world);
                world.requeue_job(job, wit::WaitReason::Preempted);
            }
            Effect::Removed => {
                world.remove_job(job);
            }
        }
    }
}

/// The job runs on as a copy of itself: its CPU use is unknown until the copy's is measured.
fn copied(job: JobId, world: &mut World) {
    if let Some(s) = world.state_mut(job) {
        s.cpu_used_millicores = 0;
    }
}

/// GPU indices on `node` as the world's slots.
fn slots(node: NodeId, gpus: &[u32]) -> Vec<GpuSlot> {
    gpus.iter().map(|&index| GpuSlot { node, index }).collect()
}
