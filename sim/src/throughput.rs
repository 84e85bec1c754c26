//! How fast a GPU job trains: seconds per optimiser step for a placement and a batch size.
//!
//! **What is measured.** For each of the six models the Pollux authors timed one optimiser step
//! (and its gradient all-reduce part) on their testbed of 4-GPU nodes (petuum/adaptdl, OSDI'21
//! artifact, Apache-2.0; see `data/README.md`):
//! - `placements.csv`: every placement over one to four nodes of one to four GPUs each (up to
//!   rotation: `1213` stands for `2131`, `1312` and `3121` too), each at 7 to 21 per-GPU batch
//!   sizes;
//! - `scalability.csv`: 6, 8, 12 and 16 nodes at several GPU counts, at the same batch sizes.
//!
//! **How we read them.**
//! - A placement that was measured uses its own row set, linear in the per-GPU batch size.
//! - Any other placement (five nodes and more, more than four GPUs on a node, or a measured
//!   shape under a new GPU count) uses the mean step time of the measured placements with its
//!   node count and GPU count, linear in the batch size, then in the GPU count at the nearest
//!   measured node counts, then in the node count (more than 16 nodes count as 16, as in Pollux's
//!   simulator).
//! - Outside a measured range (a per-GPU batch below the smallest measured one, a GPU count
//!   beyond the largest measured at a node count) the nearest measured value stands. Both are
//!   assumptions of ours: a smaller batch takes no less time than the smallest measured one;
//!   eight GPUs on one node scale like four.
//!
//! **GPU types.** Those files are one GPU type: the T4s of AWS g4dn nodes (Sia's `aws`). Sia's
//! artifact (siasosp23/artifacts, SOSP'23; see `data/README.md`) measured the same models the
//! same way on four more ([`GpuType`]): `placements-<type>.csv` and `scalability-<type>.csv`,
//! read by the same rules. A node's type is its scenario's `gpu-type`; a node without one is a
//! T4 node, as every node was before types. A job spread over nodes of several types runs at
//! the slowest type's step time (the simulator allows it; Sia's policies never place so).
//!
//! **How a job uses them** ([`GpuConfig`], Pollux's rule for jobs of a fixed batch size): a
//! job of global batch size B on r GPUs runs ⌈B/r⌉ samples per GPU, in ⌈that / m⌉ passes
//! (gradient accumulation) when a GPU holds at most m at a time (m = the largest measured
//! per-GPU batch, 8 for yolov3 as in Pollux's simulator); a single GPU given a batch larger
//! than the model's smallest accumulates at least once. One optimiser step then takes
//! `step + (passes − 1) × (step − sync)`.

use super::model::Model;

pub use wasmsched_goodput::steps::{GpuConfig, GpuType, local_range, packed, shape_of};

/// Seconds `model` needs for its first `epochs` epochs with `config` on `shape`, without
/// start-up costs: its measured steps at its batch size times its step time there.
pub fn run_s(model: Model, config: GpuConfig, shape: &[u32], epochs: u32) -> f64 {
    let steps: f64 = (1..=epochs).map(|e| model.steps_in(config.batch_size(), e)).sum();
    steps * config.step_s(model, shape)
}
