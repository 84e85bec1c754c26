//! What Gavel's allocations are computed from: the cluster's GPU types ([`Pool`]) and, per job,
//! its throughput on each of them and its steps ([`JobRow`], [`Problem`]).

use wasmsched_goodput::goodput::split;
use wasmsched_goodput::{GpuConfig, GpuType, Model, packed};
use wasmsched_sdk::prelude::*;

/// One GPU type's nodes that take work (a type without measurements is planned as T4s).
pub type Pool = sched::Pool<GpuType>;

/// The GPU types of the nodes that take work and have GPUs, in order of first appearance.
pub fn pools(s: &Snapshot) -> Vec<Pool> {
    Pool::by_kind(s, |n| GpuType::parse(n.gpu_type()).unwrap_or_default())
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
    let mut config = split(m, pool.kind, batch, gpus);
    if gpus == 1 && config.accum_steps == 0 {
        config = GpuConfig { replicas: 1, local_bsz: batch.div_ceil(2).max(1), accum_steps: 1 };
    }
    1.0 / config.step_s_on(m, pool.kind, &shape).max(1e-9) / m.goodput_slowdown()
}

/// The batch size a job of `model` on `gpus` GPUs is taken to run at before it has run, when
/// it declares none: its GPUs filled in one pass, within the model's measured range.
pub fn guessed_batch(model: Model, gpus: u32) -> u32 {
    gpus.saturating_mul(model.max_local_batch()).clamp(model.default_batch_size(), model.max_batch_size())
}
