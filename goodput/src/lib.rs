//! The measured models of deep-learning training on GPUs, shared by the host's simulator and by
//! the policies that plan with them (Pollux, Sia, Gavel and Themis need a job's throughput and
//! goodput on every GPU type and count):
//!
//! - [`steps`]: seconds per optimiser step for a placement, a per-GPU batch and a GPU type
//!   ([`GpuConfig`], [`GpuType`]), measured by the Pollux and Sia authors;
//! - [`epochs`]: optimiser steps done by the end of an epoch at a batch size;
//! - [`goodput`]: statistical efficiency from the measured gradient statistics, progress per
//!   second, and the batch size of highest goodput for a set of GPUs.
//!
//! The measurements are embedded (`data/models/<model>/`, see `data/README.md`): six models
//! ([`Model`]) on five GPU types. No dependencies: a policy component carries the same numbers
//! and the same arithmetic as the simulator.

pub mod epochs;
pub mod goodput;
pub mod steps;

pub use steps::{GpuConfig, GpuType, packed, shape_of};

/// One of the six model types of the Pollux and Sia measurements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Model {
    /// BERT fine-tuned on SQuAD.
    Bert,
    /// ResNet-18 on CIFAR-10.
    Cifar10,
    /// DeepSpeech2 on CMU-ARCTIC.
    Deepspeech2,
    /// ResNet-50 on ImageNet.
    Imagenet,
    /// Neural collaborative filtering on MovieLens.
    Ncf,
    /// YOLOv3 on PASCAL VOC.
    Yolov3,
}

/// Embeds `data/models/<model>/validation-<B>.csv` for each listed batch size, ascending.
macro_rules! curve_files {
    ($model:literal: $($batch:literal),+ $(,)?) => {
        &[$((
            $batch,
            include_str!(concat!("../../data/models/", $model, "/validation-", stringify!($batch), ".csv")),
        )),+]
    };
}

/// The embedded curve files, one list per [`Model`] in declaration order, batch sizes ascending.
const CURVE_FILES: [&[(u32, &str)]; 6] = [
    curve_files!("bert": 12, 24, 48, 96, 192, 384),
    curve_files!("cifar10": 128, 256, 512, 1024, 2048, 4096),
    curve_files!("deepspeech2": 20, 40, 80, 160, 320, 640),
    curve_files!("imagenet": 200, 400, 800, 1600, 3200, 6400, 12800),
    curve_files!("ncf": 256, 512, 1024, 2048, 4096, 8192, 16384, 32768),
    curve_files!("yolov3": 8, 16, 32, 64, 128, 256, 512),
];

impl Model {
    /// Every model, in declaration order.
    pub const ALL: [Model; 6] =
        [Model::Bert, Model::Cifar10, Model::Deepspeech2, Model::Imagenet, Model::Ncf, Model::Yolov3];

    /// Its folder name under `data/models` ("cifar10").
    pub fn name(self) -> &'static str {
        match self {
            Model::Bert => "bert",
            Model::Cifar10 => "cifar10",
            Model::Deepspeech2 => "deepspeech2",
            Model::Imagenet => "imagenet",
            Model::Ncf => "ncf",
            Model::Yolov3 => "yolov3",
        }
    }

    /// The model named `name` (any case, surrounding spaces ignored).
    pub fn parse(name: &str) -> Option<Model> {
        let name = name.trim();
        Model::ALL.into_iter().find(|m| m.name().eq_ignore_ascii_case(name))
    }

    /// Its embedded validation files: (global batch size, text), batch sizes ascending.
    pub fn curve_files(self) -> &'static [(u32, &'static str)] {
        CURVE_FILES[self as usize]
    }

    /// The smallest batch size with a measured curve (where a job starts in Pollux's
    /// simulator, and B0 of its statistical efficiency).
    pub fn default_batch_size(self) -> u32 {
        CURVE_FILES[self as usize][0].0
    }

    /// The largest global batch size with a measured curve.
    pub fn max_batch_size(self) -> u32 {
        CURVE_FILES[self as usize].last().map_or(1, |&(b, _)| b)
    }

    /// The per-GPU batch Pollux's simulator caps this model at, if it does (yolov3: 8).
    pub fn local_batch_cap(self) -> Option<u32> {
        (self == Model::Yolov3).then_some(8)
    }

    /// The most GPUs its largest measured batch feeds at the fewest samples per GPU measured:
    /// as far as an elastic job of this model scales (uncapped).
    pub fn most_gpus_fed(self) -> u32 {
        (self.max_batch_size() / self.min_local_batch().max(1)).max(1)
    }

    /// The fewest samples per GPU measured (the same on every GPU type).
    pub fn min_local_batch(self) -> u32 {
        steps::local_range(self, GpuType::T4).0
    }

    /// The most samples one T4 holds in one pass (the largest measured per-GPU batch, or less
    /// where Pollux's simulator set less).
    pub fn max_local_batch(self) -> u32 {
        let measured = steps::local_range(self, GpuType::T4).1;
        self.local_batch_cap().map_or(measured, |m| m.min(measured)).max(1)
    }
}
