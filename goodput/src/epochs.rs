//! Optimiser steps by epoch: how many steps a job of a model has done by the end of an epoch
//! at a global batch size, from the `iteration` column of the measured learning curves
//! (`data/models/<model>/validation-<B>.csv`), linear between the measured batch sizes around
//! it, as Pollux's simulator reads them. Gavel's allocations count a job's steps with it; the
//! host's simulator reads the same column for the steps of one epoch
//! (`Model::steps_in` in `sim/src/model.rs`).

use std::sync::OnceLock;

use crate::Model;
use crate::steps::rows;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_steps_are_done_before_the_first_epoch_and_more_after_each() {
        for m in Model::ALL {
            let b = m.default_batch_size();
            assert_eq!(steps_by_epoch(m, b, 0), 0.0, "{m:?}");
            assert!(steps_by_epoch(m, b, 1) > 0.0, "{m:?}");
            assert!(steps_by_epoch(m, b, 2) >= steps_by_epoch(m, b, 1), "{m:?}");
        }
    }

    #[test]
    fn between_measured_batch_sizes_the_steps_are_linear_and_outside_them_the_nearest_stand() {
        let m = Model::Cifar10;
        let (lo, hi) = (steps_by_epoch(m, 256, 3), steps_by_epoch(m, 512, 3));
        assert!((steps_by_epoch(m, 384, 3) - (lo + hi) / 2.0).abs() < 1e-9);
        assert_eq!(steps_by_epoch(m, 1, 3), steps_by_epoch(m, 128, 3), "below the smallest measured size");
        assert_eq!(steps_by_epoch(m, 1 << 30, 3), steps_by_epoch(m, 4096, 3), "above the largest");
        assert_eq!(steps_by_epoch(m, 256, 10_000), steps_by_epoch(m, 256, 100_000), "past the last epoch");
    }
}
