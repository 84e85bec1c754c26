//! What Gavel's allocations are computed from: the cluster's GPU types ([`Pool`]) and, per job,
//! its throughput on each of them and its steps ([`JobRow`], [`Problem`]).

use std::sync::OnceLock;

use wasmsched_goodput::goodput::split;
use wasmsched_goodput::steps::rows;
use wasmsched_goodput::{GpuConfig, GpuType, Model, packed};
use wasmsched_sdk::prelude::*;

/// One GPU type's nodes that take work.
#[derive(Clone, Debug, PartialEq)]
pub struct Pool {
    /// Its GPU type (a type without measurements is planned as T4s).
    pub gpu: GpuType,
    /// Its nodes, in index order.
    pub nodes: Vec<NodeId>,
    /// The most GPUs one of its nodes has.
    pub per_node: u32,
    /// Its GPUs.
    pub total: u32,
}

/// The GPU types of the nodes that take work and have GPUs, in order of first appearance.
pub fn pools(s: &Snapshot) -> Vec<Pool> {
    let mut pools: Vec<Pool> = Vec::new();
    for n in s.nodes().filter(|n| n.takes_work() && n.gpus().len() > 0) {
        let gpu = GpuType::parse(n.gpu_type()).unwrap_or_default();
        let count = n.gpus().len() as u32;
        match pools.iter_mut().find(|p| p.gpu == gpu) {
            Some(p) => {
                p.nodes.push(n.id());
                p.per_node = p.per_node.max(count);
                p.total += count;
            }
            None => pools.push(Pool { gpu, nodes: vec![n.id()], per_node: count, total: count }),
        }
    }
    pools
}

/// One job as an allocation sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct JobRow {
    /// The GPUs it runs on (its TunedJobs count).
    pub gpus: u32,
    /// Its steps per second on each pool's GPUs; 0 where it cannot run (more GPUs than the
    /// type has).
    pub throughput: Vec<f64>,
    /// Seconds since it arrived.
    pub age_s: f64,
    /// What Themis adds to its isolated finish time: the wait to the first round boundary
    /// after it arrived, and its restore delay.
    pub prestart_s: f64,
    /// Optimiser steps it trains in all, at its batch size.
    pub steps_total: f64,
    /// Optimiser steps it has done (by its completed epochs).
    pub steps_done: f64,
}

/// One round's allocation problem: the pools' GPUs and the jobs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Problem {
    /// Per pool, its GPUs.
    pub capacity: Vec<u32>,
    /// The jobs that ask for GPUs.
    pub jobs: Vec<JobRow>,
}

/// Steps per second of a job of `model` on `gpus` GPUs of `pool` at global batch `batch`, as
/// Gavel predicts them: the batch split over the GPUs, packed onto the type's nodes, the
/// measured step time with accumulation, times the model's calibration. One GPU always
/// accumulates at least once in Gavel's estimate. A job without measurements runs at 1 step/s
/// on any type it fits.
pub fn steps_per_s(model: Option<Model>, pool: &Pool, gpus: u32, batch: u32) -> f64 {
    if gpus == 0 || gpus > pool.total {
        return 0.0;
    }
    let Some(m) = model else { return 1.0 };
    let shape = packed(gpus, pool.per_node);
    let mut config = split(m, pool.gpu, batch, gpus);
    if gpus == 1 && config.accum_steps == 0 {
        config = GpuConfig { replicas: 1, local_bsz: batch.div_ceil(2).max(1), accum_steps: 1 };
    }
    1.0 / config.step_s_on(m, pool.gpu, &shape).max(1e-9) / m.goodput_slowdown()
}

/// The batch size a job of `model` on `gpus` GPUs is taken to run at before it has run (the
/// host does not declare a rigid job's batch size): its GPUs filled in one pass, within the
/// model's measured range.
pub fn guessed_batch(model: Model, gpus: u32) -> u32 {
    gpus.saturating_mul(model.max_local_batch()).clamp(model.default_batch_size(), model.max_batch_size())
}

/// A measured batch size and the optimiser steps done by the end of each epoch at it.
type StepCurve = (u32, Vec<f64>);

/// Per model, its measured step curves, batch sizes ascending.
static ITERATIONS: [OnceLock<Vec<StepCurve>>; 6] = [const { OnceLock::new() }; 6];

/// Optimiser steps a job of `model` at global batch `batch` has done by the end of epoch
/// `epoch` (0 at 0): the measured `iteration` column, linear between the measured batch sizes
/// around `batch` (clamped to them), past the last row the last.
pub fn steps_by_epoch(model: Model, batch: u32, epoch: u32) -> f64 {
    if epoch == 0 {
        return 0.0;
    }
    let curves = ITERATIONS[model as usize].get_or_init(|| {
        model
            .curve_files()
            .iter()
            .map(|&(b, text)| (b, rows(text, &["iteration"]).unwrap_or_default().into_iter().map(|r| r[0]).collect()))
            .collect()
    });
    let at = |k: usize| -> f64 {
        let column: &Vec<f64> = &curves[k].1;
        column.get((epoch as usize).min(column.len()).saturating_sub(1)).copied().unwrap_or(0.0)
    };
    let sizes: Vec<u32> = curves.iter().map(|c| c.0).collect();
    let b = batch.clamp(sizes[0], sizes[sizes.len() - 1]);
    let hi = sizes.partition_point(|&s| s < b);
    if sizes[hi] == b || hi == 0 {
        return at(hi);
    }
    let w = f64::from(b - sizes[hi - 1]) / f64::from(sizes[hi] - sizes[hi - 1]);
    at(hi - 1) + (at(hi) - at(hi - 1)) * w
}
