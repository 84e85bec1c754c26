//! The six deep-learning model types the simulator runs, each with its real learning curves and
//! the per-model constants of our cost model.
//!
//! **What is measured.** Every curve is a real training run by the Pollux authors (petuum/adaptdl,
//! OSDI'21 artifact, Apache-2.0; see `data/README.md`): one validation metric per epoch (or per
//! evaluation, for bert) at a given global batch size. The files live in
//! `data/models/<model>/validation-<B>.csv`, are embedded in the binary with `include_str!` and
//! parsed once, on first use. The same files give the optimiser steps of each epoch at that
//! batch size (their `iteration` column), which a GPU job takes at the measured step times of
//! [`super::throughput`].
//!
//! **What is assumed.** For CPU jobs, the CPU work of an epoch, the most cores a job uses
//! usefully; for every job, its resident memory. They are ours (the `SPECS` table in this
//! file): plausible CPU-training figures, scaled so that a simulated cluster shows contention
//! within minutes to hours, not measurements.
//!
//! Metrics: bert reports SQuAD F1 (0–100, higher is better); cifar10 and imagenet top-1 accuracy
//! (0–1, higher is better); deepspeech2 the word error rate **in percent** (lower is better); ncf
//! the hit rate (0–1, higher is better); yolov3 a metric that falls from ~25 to ~12 over training,
//! most likely the **validation loss** (not mAP), so lower is better.
//!
//! Start with [`Model`]; [`Model::curve`] gives a [`Curve`].

use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

use wasmsched_core::bindings::wit;

/// One of the six model types of the Pollux traces. Serialised as its folder name (`cifar10`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Model {
    /// BERT fine-tuned on SQuAD; metric F1 (higher is better); two evaluations.
    Bert,
    /// ResNet-18 on CIFAR-10; metric top-1 accuracy in 0..1 (higher is better); 100 epochs.
    Cifar10,
    /// DeepSpeech2 on CMU-ARCTIC; metric word error rate in percent (lower is better); 80 epochs.
    Deepspeech2,
    /// ResNet-50 on ImageNet; metric top-1 accuracy in 0..1 (higher is better); 90 epochs.
    Imagenet,
    /// Neural collaborative filtering on MovieLens; metric hit rate in 0..1 (higher is better);
    /// 10 epochs.
    Ncf,
    /// YOLOv3 on PASCAL VOC; metric most likely the validation loss (lower is better); 50 epochs.
    Yolov3,
}

/// The per-model constants of one [`Model`].
struct Spec {
    /// Folder name under `data/models`, and the name users write.
    name: &'static str,
    /// Name of the validation metric the curves record.
    metric: &'static str,
    /// Whether the metric grows or falls as the model improves.
    direction: wit::Direction,
    /// CPU work of one epoch (one evaluation interval, for bert), in core-seconds.
    work_per_epoch_core_s: f64,
    /// The most cores one job keeps busy; more gives it no speed.
    max_parallelism_cores: f64,
    /// Resident memory of one job.
    memory_bytes: u64,
}

const GIB: u64 = 1 << 30;

/// Our cost model, one row per [`Model`] in declaration order.
///
/// **These figures are assumptions of ours, not measurements** (the curves are the real
/// measurements). They are plausible for CPU training of scaled-down runs and chosen so that
/// the six models differ the way the real ones do:
///
/// | model       | work per epoch | max cores | memory | epochs | alone on 4 cores | alone at max cores |
/// |-------------|---------------:|----------:|-------:|-------:|-----------------:|-------------------:|
/// | bert        |      7 200 c·s |         8 |  6 GiB |      2 |  1 h (30 min/ep) |  30 min (15 min/ep)|
/// | cifar10     |         96 c·s |         6 |  2 GiB |    100 |  40 min (24 s/ep)|  27 min (16 s/ep)  |
/// | deepspeech2 |        300 c·s |         8 |  4 GiB |     80 |  100 min (75 s/ep)| 50 min (37.5 s/ep)|
/// | imagenet    |      3 600 c·s |        16 | 12 GiB |     90 |  22.5 h (15 min/ep)| 5.6 h (225 s/ep) |
/// | ncf         |         40 c·s |         2 |  2 GiB |     10 |  3.3 min (20 s/ep)| 3.3 min (20 s/ep) |
/// | yolov3      |        600 c·s |         8 |  8 GiB |     50 |  2.1 h (150 s/ep)|  62.5 min (75 s/ep)|
///
/// Why: cifar10 is the reference, ~40 min for its whole curve alone on 4 cores; imagenet is
/// ~40× heavier per epoch (25× the images at a higher resolution) and scales furthest; ncf is a
/// small embedding model that cannot use more than two cores; bert has only two evaluations, so
/// each interval is long (two core-hours); deepspeech2 and yolov3 sit in between. The work is
/// the same at every batch size: the batch size picks the curve, not the cost.
const SPECS: [Spec; 6] = [
    Spec {
        name: "bert",
        metric: "f1",
        direction: wit::Direction::HigherIsBetter,
        work_per_epoch_core_s: 7200.0,
        max_parallelism_cores: 8.0,
        memory_bytes: 6 * GIB,
    },
    Spec {
        name: "cifar10",
        metric: "accuracy",
        direction: wit::Direction::HigherIsBetter,
        work_per_epoch_core_s: 96.0,
        max_parallelism_cores: 6.0,
        memory_bytes: 2 * GIB,
    },
    Spec {
        name: "deepspeech2",
        metric: "wer",
        direction: wit::Direction::LowerIsBetter,
        work_per_epoch_core_s: 300.0,
        max_parallelism_cores: 8.0,
        memory_bytes: 4 * GIB,
    },
    Spec {
        name: "imagenet",
        metric: "accuracy",
        direction: wit::Direction::HigherIsBetter,
        work_per_epoch_core_s: 3600.0,
        max_parallelism_cores: 16.0,
        memory_bytes: 12 * GIB,
    },
    Spec {
        name: "ncf",
        metric: "hit-rate",
        direction: wit::Direction::HigherIsBetter,
        work_per_epoch_core_s: 40.0,
        max_parallelism_cores: 2.0,
        memory_bytes: 2 * GIB,
    },
    Spec {
        name: "yolov3",
        metric: "loss",
        direction: wit::Direction::LowerIsBetter,
        work_per_epoch_core_s: 600.0,
        max_parallelism_cores: 8.0,
        memory_bytes: 8 * GIB,
    },
];

/// The parsed curves of one model.
struct ModelCurves {
    batch_sizes: Vec<u32>,
    curves: Vec<Curve>,
}

/// Every embedded curve, parsed on first use.
static CURVES: LazyLock<Vec<ModelCurves>> = LazyLock::new(|| {
    Model::ALL
        .iter()
        .map(|&model| {
            let files = model.key().curve_files();
            let curves = files
                .iter()
                .map(|&(batch, text)| {
                    Curve::parse(text, model.spec().direction).unwrap_or_else(|e| {
                        panic!("embedded data/models/{}/validation-{batch}.csv is malformed: {e}", model.name())
                    })
                })
                .collect();
            ModelCurves { batch_sizes: files.iter().map(|&(b, _)| b).collect(), curves }
        })
        .collect()
});

impl From<Model> for wasmsched_goodput::Model {
    fn from(m: Model) -> Self {
        match m {
            Model::Bert => Self::Bert,
            Model::Cifar10 => Self::Cifar10,
            Model::Deepspeech2 => Self::Deepspeech2,
            Model::Imagenet => Self::Imagenet,
            Model::Ncf => Self::Ncf,
            Model::Yolov3 => Self::Yolov3,
        }
    }
}

impl Model {
    /// Every model, in declaration order.
    pub const ALL: [Model; 6] =
        [Model::Bert, Model::Cifar10, Model::Deepspeech2, Model::Imagenet, Model::Ncf, Model::Yolov3];

    fn spec(self) -> &'static Spec {
        &SPECS[self as usize]
    }

    /// The model's folder name under `data/models`, e.g. `"cifar10"`.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The model named `name` (a folder name, any case, surrounding spaces ignored).
    pub fn parse(name: &str) -> Option<Model> {
        let name = name.trim();
        Model::ALL.into_iter().find(|m| m.name().eq_ignore_ascii_case(name))
    }

    /// The name and direction of the validation metric the model's curves record: F1 for bert,
    /// accuracy for cifar10 and imagenet, WER (%) for deepspeech2, hit rate for ncf and (most
    /// likely) validation loss for yolov3.
    pub fn metric(self) -> (&'static str, wit::Direction) {
        (self.spec().metric, self.spec().direction)
    }

    /// CPU work of one epoch at the default batch size, in core-seconds (an assumption of ours,
    /// see the `SPECS` table in this file).
    pub fn work_per_epoch_core_s(self) -> f64 {
        self.spec().work_per_epoch_core_s
    }

    /// The most cores one job can use usefully (an assumption of ours).
    pub fn max_parallelism_cores(self) -> f64 {
        self.spec().max_parallelism_cores
    }

    /// Resident memory of one job, in bytes (an assumption of ours).
    pub fn memory_bytes(self) -> u64 {
        self.spec().memory_bytes
    }

    /// The batch size whose curve is used when none is given: the smallest measured one, where
    /// a job starts in Pollux's simulator.
    pub fn default_batch_size(self) -> u32 {
        self.key().default_batch_size()
    }

    /// The largest global batch size with a measured curve.
    pub fn max_batch_size(self) -> u32 {
        self.key().max_batch_size()
    }

    /// The same model as the measurements name it (`wasmsched_goodput`), for its step times
    /// and goodput.
    pub fn key(self) -> wasmsched_goodput::Model {
        self.into()
    }

    /// The fewest samples per GPU measured.
    pub fn min_local_batch(self) -> u32 {
        self.key().min_local_batch()
    }

    /// The most samples one T4 holds in one pass.
    pub fn max_local_batch(self) -> u32 {
        self.key().max_local_batch()
    }

    /// The epochs an elastic job trains (`wasmsched_goodput::goodput`).
    pub fn elastic_epochs(self) -> u32 {
        self.key().elastic_epochs()
    }

    /// Seconds a restart from checkpoint costs an elastic job.
    pub fn restore_s(self) -> f64 {
        self.key().restore_s()
    }

    /// Optimiser steps of epoch `epoch` (1-based) at global batch size `batch_size`: the
    /// measured ones where a curve was measured at that size, else linear between the two
    /// measured sizes around it (as Pollux's simulator does), the nearest outside them.
    pub fn steps_in(self, batch_size: u32, epoch: u32) -> f64 {
        let set = &CURVES[self as usize];
        let sizes = &set.batch_sizes;
        let b = batch_size.clamp(sizes[0], sizes[sizes.len() - 1]);
        let hi = sizes.partition_point(|&s| s < b);
        let steps = |k: usize| set.curves[k].steps_in(epoch).unwrap_or(0.0);
        if sizes[hi] == b || hi == 0 {
            return steps(hi);
        }
        let lo = hi - 1;
        let w = f64::from(b - sizes[lo]) / f64::from(sizes[hi] - sizes[lo]);
        steps(lo) + (steps(hi) - steps(lo)) * w
    }

    /// The global batch sizes with a measured curve, ascending.
    pub fn batch_sizes(self) -> &'static [u32] {
        &CURVES[self as usize].batch_sizes
    }

    /// The learning curve measured at the batch size nearest to `batch_size` (nearest by ratio,
    /// since the measured sizes are powers of two; a tie goes to the smaller size; 0 counts as 1).
    pub fn curve(self, batch_size: u32) -> &'static Curve {
        let set = &CURVES[self as usize];
        let wanted = f64::from(batch_size.max(1)).ln();
        let distance = |b: u32| (f64::from(b).ln() - wanted).abs();
        let mut best = 0;
        for (i, &b) in set.batch_sizes.iter().enumerate() {
            if distance(b) < distance(set.batch_sizes[best]) {
                best = i;
            }
        }
        &set.curves[best]
    }
}

/// A measured learning curve: the validation metric after each epoch of one real training run.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    metrics: Vec<f64>,
    /// Optimiser steps taken by the end of each epoch (the `iteration` column), cumulative;
    /// empty when the file has no such column.
    iterations: Vec<f64>,
    direction: wit::Direction,
}

impl Curve {
    /// Parses a Pollux `validation-<B>.csv` (header `progress,iteration,metric,…`); the
    /// `iteration` column is optional.
    fn parse(text: &str, direction: wit::Direction) -> Result<Curve, String> {
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let header = lines.next().ok_or("the file is empty")?;
        let position = |name: &str| header.split(',').position(|c| c.trim() == name);
        let column = position("metric").ok_or_else(|| format!("no `metric` column in header `{header}`"))?;
        let steps = position("iteration");
        let cell = |row: usize, line: &str, column: usize, name: &str| -> Result<f64, String> {
            let cell = line.split(',').nth(column).ok_or_else(|| format!("row {row} has no {name}"))?;
            match cell.trim().parse::<f64>() {
                Ok(v) if v.is_finite() => Ok(v),
                _ => Err(format!("row {row}: {name} `{cell}` is not a finite number")),
            }
        };
        let (mut metrics, mut iterations) = (Vec::new(), Vec::new());
        for (i, line) in lines.enumerate() {
            metrics.push(cell(i + 1, line, column, "metric")?);
            if let Some(steps) = steps {
                let done = cell(i + 1, line, steps, "iteration")?;
                if done < iterations.last().copied().unwrap_or(0.0) {
                    return Err(format!("row {}: iteration {done} is below the row before's", i + 1));
                }
                iterations.push(done);
            }
        }
        if metrics.is_empty() {
            return Err("the file has no data rows".into());
        }
        Ok(Curve { metrics, iterations, direction })
    }

    /// Optimiser steps of epoch `epoch` (1-based) in the measured run; past the last epoch,
    /// the last one's. None when the curve has no `iteration` column.
    pub fn steps_in(&self, epoch: u32) -> Option<f64> {
        let last = self.iterations.len();
        if last == 0 {
            return None;
        }
        let e = (epoch.max(1) as usize).min(last);
        let before = if e >= 2 { self.iterations[e - 2] } else { 0.0 };
        Some(self.iterations[e - 1] - before)
    }

    /// A curve of `metrics`, one per epoch (a calibrated job's own, say); None when there is
    /// none or one is not a finite number.
    pub fn new(metrics: Vec<f64>, direction: wit::Direction) -> Option<Curve> {
        (!metrics.is_empty() && metrics.iter().all(|m| m.is_finite())).then_some(Curve {
            metrics,
            iterations: Vec::new(),
            direction,
        })
    }

    /// Number of epochs (evaluations) the curve records: the data rows of its file.
    pub fn epochs(&self) -> u32 {
        self.metrics.len() as u32
    }

    /// The metric after `epoch` epochs (1-based). Past the last epoch it stays at the last
    /// value; epoch 0, before any evaluation, gives the first value.
    pub fn metric_at(&self, epoch: u32) -> f64 {
        let i = (epoch.max(1) as usize).min(self.metrics.len()) - 1;
        self.metrics[i]
    }

    /// Whether a higher or a lower metric is better.
    pub fn direction(&self) -> wit::Direction {
        self.direction
    }

    /// Default TRADL tiers `(T1, T2)`: the metric values at which 80 % and 95 % of the curve's
    /// total improvement is reached, the improvement being from its first value to its best
    /// value (the highest, or the lowest for a lower-is-better metric). Both are thresholds, not
    /// measured points: `T1 = first + 0.80 × (best − first)`, `T2 = first + 0.95 × (best − first)`.
    /// The curve reaches both (it reaches its best), and T1 is the easier one.
    pub fn default_tiers(&self) -> (f64, f64) {
        let first = self.metrics[0];
        let best = self.best();
        (first + 0.80 * (best - first), first + 0.95 * (best - first))
    }

    /// The best value of the curve in its direction.
    fn best(&self) -> f64 {
        let pick = match self.direction {
            wit::Direction::HigherIsBetter => f64::max,
            wit::Direction::LowerIsBetter => f64::min,
        };
        self.metrics.iter().copied().fold(self.metrics[0], pick)
    }

    /// The first epoch (1-based) whose metric meets `target`: at least it when higher is
    /// better, at most it when lower is better. `None` if the curve never gets there.
    pub fn epochs_to_reach(&self, target: f64) -> Option<u32> {
        self.metrics.iter().position(|&m| meets(m, target, self.direction)).map(|i| i as u32 + 1)
    }
}

/// Whether `value` meets `target` in `direction`.
pub fn meets(value: f64, target: f64, direction: wit::Direction) -> bool {
    match direction {
        wit::Direction::HigherIsBetter => value >= target,
        wit::Direction::LowerIsBetter => value <= target,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_curve_of_every_model_parses_and_matches_its_folder() {
        for model in Model::ALL {
            assert!(!model.batch_sizes().is_empty(), "{model:?}");
            assert!(model.batch_sizes().windows(2).all(|w| w[0] < w[1]), "{model:?} sizes ascending");
            assert_eq!(model.default_batch_size(), model.batch_sizes()[0]);
            let (_, direction) = model.metric();
            for &b in model.batch_sizes() {
                let curve = model.curve(b);
                assert_eq!(curve.direction(), direction, "{model:?} {b}");
                assert!(curve.epochs() >= 2, "{model:?} {b}");
            }
        }
    }

    #[test]
    fn the_curve_folders_hold_exactly_the_embedded_files() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/models");
        for model in Model::ALL {
            let mut on_disk: Vec<u32> = std::fs::read_dir(root.join(model.name()))
                .expect("data/models/<model> exists")
                .filter_map(|e| {
                    let name = e.ok()?.file_name().into_string().ok()?;
                    name.strip_prefix("validation-")?.strip_suffix(".csv")?.parse().ok()
                })
                .collect();
            on_disk.sort_unstable();
            assert_eq!(on_disk, model.batch_sizes(), "{model:?}");
        }
    }

    #[test]
    fn curves_have_the_documented_lengths_and_directions() {
        let epochs = |m: Model| m.curve(m.default_batch_size()).epochs();
        assert_eq!(epochs(Model::Bert), 2);
        assert_eq!(epochs(Model::Cifar10), 100);
        assert_eq!(epochs(Model::Deepspeech2), 80);
        assert_eq!(epochs(Model::Imagenet), 90);
        assert_eq!(epochs(Model::Ncf), 10);
        assert_eq!(epochs(Model::Yolov3), 50);
        assert_eq!(Model::Bert.metric(), ("f1", wit::Direction::HigherIsBetter));
        assert_eq!(Model::Deepspeech2.metric(), ("wer", wit::Direction::LowerIsBetter));
        assert_eq!(Model::Yolov3.metric(), ("loss", wit::Direction::LowerIsBetter));
        assert_eq!(Model::Ncf.metric(), ("hit-rate", wit::Direction::HigherIsBetter));
        let c = Model::Cifar10.curve(256);
        assert_eq!(c.metric_at(1), 0.4229, "first row of cifar10/validation-256.csv");
        assert!(Model::Deepspeech2.curve(20).metric_at(80) < 30.0, "WER falls to ~23 %");
    }

    #[test]
    fn metric_at_clamps_to_the_first_and_last_epochs() {
        let c = Model::Ncf.curve(256);
        assert_eq!(c.metric_at(0), c.metric_at(1));
        assert_eq!(c.metric_at(10_000), c.metric_at(c.epochs()));
        assert_ne!(c.metric_at(1), c.metric_at(c.epochs()));
    }

    #[test]
    fn default_tiers_lie_between_first_and_best_and_t1_is_easier() {
        for model in Model::ALL {
            for &b in model.batch_sizes() {
                let curve = model.curve(b);
                let (t1, t2) = curve.default_tiers();
                let (first, best) = (curve.metric_at(1), curve.best());
                let (lo, hi) = if first < best { (first, best) } else { (best, first) };
                assert!(lo <= t1 && t1 <= hi && lo <= t2 && t2 <= hi, "{model:?} {b}: {t1} {t2} in {first}..{best}");
                assert!(meets(t2, t1, curve.direction()) && t1 != t2, "{model:?} {b}: T2 {t2} harder than T1 {t1}");
                let (e1, e2) = (curve.epochs_to_reach(t1), curve.epochs_to_reach(t2));
                assert!(e1.is_some() && e2.is_some() && e1 <= e2, "{model:?} {b}: reached at {e1:?}, {e2:?}");
            }
        }
    }

    #[test]
    fn epochs_to_reach_agrees_with_metric_at() {
        for model in Model::ALL {
            let curve = model.curve(model.default_batch_size());
            for e in 1..=curve.epochs() {
                let target = curve.metric_at(e);
                let reached = curve.epochs_to_reach(target).expect("a value of the curve is reachable");
                assert!(reached <= e, "{model:?}: {target} at epoch {e} but first reached at {reached}");
                assert!(meets(curve.metric_at(reached), target, curve.direction()));
                assert!((1..reached).all(|before| !meets(curve.metric_at(before), target, curve.direction())));
            }
            let beyond = match curve.direction() {
                wit::Direction::HigherIsBetter => curve.best() + 1.0,
                wit::Direction::LowerIsBetter => curve.best() - 1.0,
            };
            assert_eq!(curve.epochs_to_reach(beyond), None, "{model:?}");
        }
    }

    #[test]
    fn curve_picks_the_nearest_measured_batch_size() {
        let m = Model::Cifar10;
        assert!(std::ptr::eq(m.curve(128), m.curve(1)));
        assert!(std::ptr::eq(m.curve(0), m.curve(128)));
        assert!(std::ptr::eq(m.curve(300), m.curve(256)));
        assert!(std::ptr::eq(m.curve(1_000_000), m.curve(4096)));
        assert!(!std::ptr::eq(m.curve(128), m.curve(256)));
    }

    #[test]
    fn names_parse_case_insensitively_and_round_trip_through_serde() {
        for model in Model::ALL {
            assert_eq!(Model::parse(model.name()), Some(model));
            assert_eq!(Model::parse(&model.name().to_uppercase()), Some(model));
            let json = serde_json::to_string(&model).expect("serialises");
            assert_eq!(json, format!("\"{}\"", model.name()));
        }
        assert_eq!(Model::parse("resnet"), None);
    }

    #[test]
    fn a_cifar10_job_alone_on_four_cores_takes_twenty_to_sixty_minutes() {
        let m = Model::Cifar10;
        let epochs = f64::from(m.curve(m.default_batch_size()).epochs());
        let seconds = epochs * m.work_per_epoch_core_s() / m.max_parallelism_cores().min(4.0);
        assert!((20.0 * 60.0..=60.0 * 60.0).contains(&seconds), "{seconds} s");
        assert!(Model::Imagenet.work_per_epoch_core_s() > 10.0 * m.work_per_epoch_core_s());
        assert!(Model::Ncf.work_per_epoch_core_s() < m.work_per_epoch_core_s());
    }

    #[test]
    fn steps_per_epoch_are_the_measured_iterations_and_linear_between_batch_sizes() {
        let m = Model::Cifar10;
        // cifar10/validation-256.csv: 300 steps by epoch 1, 592 by epoch 2.
        assert_eq!(m.steps_in(256, 1), 300.0);
        assert_eq!(m.steps_in(256, 2), 292.0);
        let (lo, hi) = (m.steps_in(256, 3), m.steps_in(512, 3));
        assert!((m.steps_in(384, 3) - (lo + hi) / 2.0).abs() < 1e-9);
        assert_eq!(m.steps_in(1, 3), m.steps_in(128, 3), "below the smallest measured size");
        assert_eq!(m.steps_in(1 << 30, 3), m.steps_in(4096, 3), "above the largest");
        assert_eq!(m.steps_in(256, 10_000), m.steps_in(256, 100), "past the last epoch");
        assert_eq!(m.max_batch_size(), 4096);
        assert_eq!((Model::Yolov3.max_local_batch(), Model::Cifar10.max_local_batch()), (8, 1024));
        let total: f64 = (1..=100).map(|e| m.steps_in(128, e)).sum();
        assert_eq!(total, 39062.0, "the last row's iteration");
    }

    #[test]
    fn malformed_curve_text_is_refused() {
        let hi = wit::Direction::HigherIsBetter;
        assert!(Curve::parse("", hi).is_err());
        assert!(Curve::parse("progress,iteration\n1,2\n", hi).is_err());
        assert!(Curve::parse("progress,iteration,metric\n", hi).is_err());
        assert!(Curve::parse("progress,iteration,metric\n1,2,abc\n", hi).is_err());
        assert_eq!(Curve::parse("progress,iteration,metric\n1,2,0.5\n", hi).map(|c| c.epochs()), Ok(1));
        assert!(Curve::parse("progress,iteration,metric\n1,5,0.5\n2,3,0.6\n", hi).is_err(), "steps go backwards");
        assert_eq!(Curve::parse("metric\n0.5\n", hi).map(|c| c.steps_in(1)), Ok(None));
    }
}
