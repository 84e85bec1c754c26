//! A training run: the data, the model, the shuffling generator and the epoch count, from
//! scratch or from a checkpoint.

use std::time::{Duration, Instant};

use crate::args::Args;
use crate::checkpoint::{Checkpoint, CheckpointError};
use crate::data::{Problem, Split};
use crate::model::{Evaluation, Mlp};
use crate::rng::SplitMix64;

/// Features per generated sample.
pub const FEATURES: usize = 32;
/// Classes of the generated problem.
pub const CLASSES: usize = 8;
/// The default learning rate of the first epoch (`--lr`); epoch e uses
/// `lr / (1 + e / RATE_DECAY_EPOCHS)`.
pub const LEARNING_RATE: f32 = 0.05;
/// Epochs after which the learning rate has halved.
const RATE_DECAY_EPOCHS: f32 = 10.0;
/// Mixed into the seed for the initial weights.
const INIT_STREAM: u64 = 0x1417_0000_0000_0002;
/// Mixed into the seed for the shuffling.
const SHUFFLE_STREAM: u64 = 0x5AFF_0000_0000_0003;

/// A training run in progress.
#[derive(Clone, Debug)]
pub struct Trainer {
    problem: Problem,
    split: Split,
    model: Mlp,
    shuffle: SplitMix64,
    epochs_done: u64,
    threads: usize,
    batch: usize,
    rate: f32,
    rank: usize,
    world: usize,
}

/// What one epoch achieved.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EpochReport {
    /// The epoch's number, from 1.
    pub epoch: u64,
    /// Accuracy and loss on the validation set after the epoch.
    pub validation: Evaluation,
    /// Wall time of the epoch: training and validation.
    pub elapsed: Duration,
}

impl Trainer {
    /// A fresh run with `args`'s settings.
    pub fn new(args: &Args) -> Self {
        let problem = problem(args);
        let model = Mlp::new(FEATURES, args.hidden, CLASSES, &mut SplitMix64::new(args.seed ^ INIT_STREAM));
        let shuffle = SplitMix64::new(args.seed ^ SHUFFLE_STREAM);
        Self {
            split: problem.generate(),
            problem,
            model,
            shuffle,
            epochs_done: 0,
            threads: args.threads,
            batch: args.batch(),
            rate: args.lr,
            rank: args.rank(),
            world: args.world(),
        }
    }

    /// The run saved in `checkpoint`, continued with `args`'s threads and batch size (a job
    /// resized to other GPUs resumes at the batch size chosen for them); refused when it was
    /// written by a run with other data or another model shape.
    pub fn resume(args: &Args, checkpoint: Checkpoint) -> Result<Self, CheckpointError> {
        let problem = problem(args);
        let settings = [
            ("seed", checkpoint.seed, args.seed),
            ("samples", checkpoint.samples, args.samples as u64),
            ("features", checkpoint.features.into(), FEATURES as u64),
            ("hidden", checkpoint.hidden.into(), args.hidden as u64),
            ("classes", checkpoint.classes.into(), CLASSES as u64),
        ];
        if let Some(&(setting, checkpoint, requested)) = settings.iter().find(|(_, saved, asked)| saved != asked) {
            return Err(CheckpointError::Mismatch { setting, checkpoint, requested });
        }
        let weights = checkpoint.params.len() as u64;
        let model =
            Mlp::from_params(FEATURES, args.hidden, CLASSES, checkpoint.params).ok_or(CheckpointError::Mismatch {
                setting: "weights",
                checkpoint: weights,
                requested: Mlp::param_count(FEATURES, args.hidden, CLASSES) as u64,
            })?;
        Ok(Self {
            split: problem.generate(),
            problem,
            model,
            shuffle: SplitMix64::new(checkpoint.rng_state),
            epochs_done: checkpoint.epoch,
            threads: args.threads,
            batch: args.batch(),
            rate: args.lr,
            rank: args.rank(),
            world: args.world(),
        })
    }

    /// Epochs done so far, those before a resume included.
    pub fn epochs_done(&self) -> u64 {
        self.epochs_done
    }

    /// The data.
    pub fn split(&self) -> &Split {
        &self.split
    }

    /// The model as it stands.
    pub fn model(&self) -> &Mlp {
        &self.model
    }

    /// Trains one epoch (one shuffled pass over the training set) and measures the model on
    /// the validation set.
    pub fn run_epoch(&mut self) -> EpochReport {
        let start = Instant::now();
        self.train_epoch();
        self.report(start)
    }

    /// Trains one epoch and counts it done: one shuffled pass over this rank's shard of the
    /// training set. Every rank of a group draws the same order (the same generator, from the
    /// same seed or checkpoint) and takes the positions `rank, rank + world, ...` of it, in
    /// minibatches of the batch size divided among the ranks; one rank alone takes it all.
    pub fn train_epoch(&mut self) {
        let mut order: Vec<u32> = (0..self.split.train.len() as u32).collect();
        self.shuffle.shuffle(&mut order);
        if self.world > 1 {
            order = order.into_iter().skip(self.rank).step_by(self.world).collect();
        }
        let rate = self.rate / (1.0 + self.epochs_done as f32 / RATE_DECAY_EPOCHS);
        self.model.train_epoch(&self.split.train, &order, rate, self.rank_batch(), self.threads);
        self.epochs_done += 1;
    }

    /// Samples per minibatch on this rank: the batch size divided among the ranks, at least 1.
    pub fn rank_batch(&self) -> usize {
        (self.batch / self.world).max(1)
    }

    /// Replaces the weights, with a group's mean; false (and nothing changed) when their
    /// number does not fit the model.
    pub fn set_params(&mut self, params: Vec<f32>) -> bool {
        match Mlp::from_params(FEATURES, self.model.hidden(), CLASSES, params) {
            Some(model) => {
                self.model = model;
                true
            }
            None => false,
        }
    }

    /// The report of the epoch just trained: the model measured on the validation set, and
    /// the time since `start`.
    pub fn report(&self, start: Instant) -> EpochReport {
        let validation = self.model.evaluate(&self.split.validation, self.threads);
        EpochReport { epoch: self.epochs_done, validation, elapsed: start.elapsed() }
    }

    /// The state to save, from which [`Trainer::resume`] continues exactly.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            seed: self.problem.seed,
            samples: self.problem.samples as u64,
            features: FEATURES as u32,
            hidden: self.model.hidden() as u32,
            classes: CLASSES as u32,
            epoch: self.epochs_done,
            rng_state: self.shuffle.state(),
            params: self.model.params().to_vec(),
        }
    }
}

/// The data `args` asks for.
fn problem(args: &Args) -> Problem {
    Problem { seed: args.seed, samples: args.samples, features: FEATURES, classes: CLASSES }
}
