//! How fast an elastic job learns: goodput, as Pollux defines it and Sia's simulator runs it.
//!
//! **Progress** is counted in optimiser steps at the model's smallest measured batch size B0
//! (the `progress` column of `data/models/<model>/validation-<B>.csv`, equal to the steps at
//! B0). Epoch e ends at [`boundary`]`(e)`: the least progress any measured batch size had made by
//! the end of its e-th epoch. An elastic job trains a fixed number of epochs
//! ([`Model::elastic_epochs`], Sia's), whatever its metric reaches.
//!
//! **Goodput.** At global batch B a step moves progress by the gain
//! `(var + sqr) / (var / s + sqr)` with `s = B / B0`, where `sqr` and `var` are the gradient's
//! squared norm and variance measured at that epoch (`grad_sqr`, `grad_var`; linear between
//! the measured batch sizes). A step takes the measured step time of the job's placement and GPU
//! type (`super::throughput`), divided by Sia's calibration ([`Model::goodput_slowdown`]). So
//! the job's speed in progress per second is `gain / step time / slowdown`.
//!
//! **Batch size.** An elastic job picks its own batch size for the GPUs it is given, as an
//! AdaptDL job does ([`best_config`]): of 50 sizes spaced geometrically from
//! `max(B0, R × smallest per-GPU batch)` to the model's largest, the one of highest goodput,
//! split over its R GPUs in as few passes as the type's per-GPU memory allows. A resize that
//! names a batch size pins it instead.
//!
//! **Restarts** cost each model its own restore delay ([`Model::restore_s`], Sia's), at every
//! start, resize, migration and resume.

use std::sync::OnceLock;

use crate::Model;
use crate::steps::{GpuConfig, GpuType, local_range, rows};

/// One model's validation files read for goodput: per measured batch size (ascending), per
/// epoch row, progress and gradient statistics.
#[derive(Debug)]
struct Stats {
    batch_sizes: Vec<f64>,
    /// `progress[k][e]`: progress by the end of epoch e + 1 at batch size k.
    progress: Vec<Vec<f64>>,
    sqr: Vec<Vec<f64>>,
    var: Vec<Vec<f64>>,
}

static STATS: [OnceLock<Stats>; 6] = [const { OnceLock::new() }; 6];

fn stats(model: Model) -> &'static Stats {
    STATS[model as usize].get_or_init(|| {
        let mut s = Stats { batch_sizes: Vec::new(), progress: Vec::new(), sqr: Vec::new(), var: Vec::new() };
        for &(batch, text) in model.curve_files() {
            let rows = rows(text, &["progress", "grad_sqr", "grad_var"]).unwrap_or_else(|e| {
                panic!("embedded data/models/{}/validation-{batch}.csv is malformed: {e}", model.name())
            });
            s.batch_sizes.push(f64::from(batch));
            s.progress.push(rows.iter().map(|r| r[0]).collect());
            s.sqr.push(rows.iter().map(|r| r[1]).collect());
            s.var.push(rows.iter().map(|r| r[2]).collect());
        }
        s
    })
}

impl Model {
    /// The epochs an elastic job trains (Sia's simulator: every job trains its model's full
    /// schedule).
    pub fn elastic_epochs(self) -> u32 {
        match self {
            Model::Bert => 2,
            Model::Cifar10 => 100,
            Model::Deepspeech2 => 80,
            Model::Imagenet => 90,
            Model::Ncf => 10,
            Model::Yolov3 => 50,
        }
    }

    /// Seconds a restart from checkpoint costs before the job steps again (Sia's simulator).
    pub fn restore_s(self) -> f64 {
        match self {
            Model::Bert => 120.0,
            Model::Cifar10 => 50.0,
            Model::Deepspeech2 => 25.0,
            Model::Imagenet => 250.0,
            Model::Ncf => 15.0,
            Model::Yolov3 => 80.0,
        }
    }

    /// How much slower than the measured step times Sia's simulator runs each model's goodput
    /// (its calibration against its testbed).
    pub fn goodput_slowdown(self) -> f64 {
        match self {
            Model::Cifar10 => 1.8,
            Model::Ncf => 1.5,
            _ => 1.2,
        }
    }

    /// The largest per-GPU batch one GPU of `gpu` holds in a pass: the largest measured there
    /// (Sia's artifact sets DeepSpeech2 on the RTX 2080Ti to 57).
    pub fn max_local_batch_on(self, gpu: GpuType) -> u32 {
        if (self, gpu) == (Model::Deepspeech2, GpuType::Rtx) {
            return 57;
        }
        local_range(self, gpu).1
    }
}

/// Progress (steps at B0) by the end of epoch `epoch` (0 at epoch 0): the least any measured
/// batch size had made; past the shortest file, the least of those that go on.
pub fn boundary(model: Model, epoch: u32) -> f64 {
    if epoch == 0 {
        return 0.0;
    }
    let row = epoch as usize - 1;
    let s = stats(model);
    let at: Vec<f64> = s.progress.iter().filter_map(|p| p.get(row).copied()).collect();
    if at.is_empty() {
        // Past every file: the longest one's last step per epoch, continued.
        let longest = s.progress.iter().max_by_key(|p| p.len()).expect("a model has curves");
        let last = longest.len() - 1;
        let per_epoch = if last > 0 { longest[last] - longest[last - 1] } else { longest[last] };
        return longest[last] + per_epoch * (row - last) as f64;
    }
    at.into_iter().fold(f64::INFINITY, f64::min)
}

/// The progress one step at global batch `batch` makes in epoch `epoch` (1-based; the
/// statistics of the epoch in progress), at least 1e-3.
pub fn gain(model: Model, batch: f64, epoch: u32) -> f64 {
    let s = stats(model);
    let b0 = s.batch_sizes[0];
    let row = |k: usize| (epoch.max(1) as usize - 1).min(s.sqr[k].len() - 1);
    let at = |column: &[Vec<f64>], k: usize| column[k][row(k)];
    let hi = s.batch_sizes.partition_point(|&b| b < batch).min(s.batch_sizes.len() - 1);
    let lo = hi.saturating_sub(usize::from(s.batch_sizes[hi] > batch));
    let w = if hi == lo {
        0.0
    } else {
        ((batch - s.batch_sizes[lo]) / (s.batch_sizes[hi] - s.batch_sizes[lo])).clamp(0.0, 1.0)
    };
    let sqr = at(&s.sqr, lo) + (at(&s.sqr, hi) - at(&s.sqr, lo)) * w;
    let var = at(&s.var, lo) + (at(&s.var, hi) - at(&s.var, lo)) * w;
    let scale = (batch / b0).max(1.0);
    let denominator = var / scale + sqr;
    if denominator.is_nan() || denominator <= 0.0 || !(var + sqr).is_finite() {
        return 1.0;
    }
    ((var + sqr) / denominator).clamp(1e-3, scale)
}

/// How `batch` splits over `replicas` GPUs of `gpu`: per-GPU batch and extra passes, as Sia's
/// jobs split it (a single GPU above B0 accumulates at least once).
pub fn split(model: Model, gpu: GpuType, batch: u32, replicas: u32) -> GpuConfig {
    let replicas = replicas.max(1);
    let max_local = model.max_local_batch_on(gpu).max(1);
    let local = batch.max(1).div_ceil(replicas);
    let mut accum_steps = local.div_ceil(max_local).saturating_sub(1);
    if replicas == 1 && batch > model.default_batch_size() {
        accum_steps = accum_steps.max(1);
    }
    let per_pass = local.div_ceil(accum_steps + 1);
    let cap = model.max_batch_size() / replicas.saturating_mul(accum_steps + 1).max(1);
    GpuConfig { replicas, local_bsz: per_pass.min(cap).max(1), accum_steps }
}

/// Progress per second of `config` on `shape` GPUs of `gpu` in epoch `epoch`.
pub fn speed(model: Model, gpu: GpuType, config: GpuConfig, shape: &[u32], epoch: u32) -> f64 {
    let step_s = config.step_s_on(model, gpu, shape).max(1e-9);
    gain(model, f64::from(config.batch_size()), epoch) / step_s / model.goodput_slowdown()
}

/// The configuration of highest goodput for `shape` GPUs of `gpu` in epoch `epoch` (see the
/// module docs).
pub fn best_config(model: Model, gpu: GpuType, shape: &[u32], epoch: u32) -> GpuConfig {
    let replicas: u32 = shape.iter().sum::<u32>().max(1);
    let min_local = local_range(model, gpu).0.max(1);
    let (lo, hi) = (
        f64::from(model.default_batch_size().max(min_local.saturating_mul(replicas))),
        f64::from(model.max_batch_size()),
    );
    const CANDIDATES: u32 = 50;
    let mut best: Option<(f64, GpuConfig)> = None;
    for k in 0..CANDIDATES {
        let batch = if hi <= lo { lo } else { lo * (hi / lo).powf(f64::from(k) / f64::from(CANDIDATES - 1)) };
        let config = split(model, gpu, batch.round() as u32, replicas);
        if config.local_bsz < min_local {
            continue;
        }
        let v = speed(model, gpu, config, shape, epoch);
        if best.is_none_or(|(b, _)| v > b) {
            best = Some((v, config));
        }
    }
    best.map_or_else(|| split(model, gpu, model.default_batch_size(), replicas), |(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_end_where_the_slowest_measured_batch_size_ended_them() {
        // cifar10: 391 steps an epoch at 128 (50,000 images).
        assert_eq!(boundary(Model::Cifar10, 0), 0.0);
        assert!((boundary(Model::Cifar10, 1) - 391.0).abs() < 1.0, "{}", boundary(Model::Cifar10, 1));
        for model in Model::ALL {
            let ends: Vec<f64> = (0..=model.elastic_epochs()).map(|e| boundary(model, e)).collect();
            assert!(ends.windows(2).all(|w| w[1] > w[0]), "{model:?}: {ends:?}");
        }
    }

    #[test]
    fn a_larger_batch_gains_more_per_step_but_less_than_its_size() {
        for model in Model::ALL {
            let b0 = f64::from(model.default_batch_size());
            assert!((gain(model, b0, 1) - 1.0).abs() < 1e-9, "{model:?} at B0");
            let g = gain(model, 4.0 * b0, 10);
            assert!((1.0..=4.0).contains(&g), "{model:?}: {g}");
        }
    }

    #[test]
    fn more_gpus_and_faster_ones_give_more_goodput_and_the_batch_grows_with_them() {
        let m = Model::Cifar10;
        let one = best_config(m, GpuType::T4, &[1], 10);
        let eight = best_config(m, GpuType::T4, &[4, 4], 10);
        assert!(eight.batch_size() > one.batch_size(), "{one:?} then {eight:?}");
        let v = |gpu, shape: &[u32]| speed(m, gpu, best_config(m, gpu, shape, 10), shape, 10);
        assert!(v(GpuType::T4, &[4, 4]) > v(GpuType::T4, &[1]));
        assert!(v(GpuType::A100, &[1]) > v(GpuType::T4, &[1]));
        assert_eq!(Model::Deepspeech2.max_local_batch_on(GpuType::Rtx), 57);
    }
}
