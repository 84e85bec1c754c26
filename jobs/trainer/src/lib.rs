//! wasmsched-trainer: a small but real training job for container tests and demos.
//!
//! It generates a classification problem from a seed (Gaussian blobs, [`data`]), trains a
//! one-hidden-layer MLP on it by minibatch SGD on several threads ([`model`]) and prints the
//! validation accuracy and loss after every epoch, so a CPU limit really slows it down and its
//! learning curve really rises fast and then flattens. It can save a checkpoint after every
//! epoch and resume from it ([`checkpoint`]). Asked to stop (SIGTERM), it finishes the epoch
//! under way, so its last checkpoint and its last line agree. It has one small dependency (for
//! the signal) and links statically, to run as PID 1 in a container built FROM scratch.
//!
//! Start reading at [`run`], then [`train::Trainer`].

pub mod args;
pub mod checkpoint;
pub mod data;
pub mod model;
pub mod rng;
pub mod train;

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::args::{Args, Format};
use crate::checkpoint::{Checkpoint, CheckpointError};
use crate::train::{CLASSES, EpochReport, FEATURES, Trainer};

/// Why a run stopped early.
#[derive(Debug)]
pub enum Error {
    /// The checkpoint could not be written.
    Checkpoint(CheckpointError),
    /// Standard output could not be written (closed pipe, full disk).
    Output(io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Checkpoint(e) => write!(f, "{e}"),
            Self::Output(e) => write!(f, "cannot write the epoch line to stdout: {e}"),
        }
    }
}

impl std::error::Error for Error {}

/// Delivers the model: reads the checkpoint at `from` whole (a damaged one is refused) and
/// saves it at `to`, atomically.
pub fn export(from: &std::path::Path, to: &std::path::Path) -> Result<(), Error> {
    let checkpoint = Checkpoint::load(from).map_err(Error::Checkpoint)?;
    let checkpoint = checkpoint.ok_or_else(|| {
        Error::Checkpoint(CheckpointError::Read {
            path: from.to_owned(),
            source: io::Error::new(io::ErrorKind::NotFound, "no checkpoint yet: train an epoch first"),
        })
    })?;
    checkpoint.save(to).map_err(Error::Checkpoint)
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// `--epochs` epochs are done.
    Trained,
    /// It was asked to stop, after this many epochs (each saved and printed).
    Stopped(u64),
}

/// Trains until `args.epochs` epochs are done, writing one line per epoch to `out` (flushed
/// at once) and the rest to `log`: the banner, and whether a checkpoint was resumed or
/// refused. A checkpoint that cannot be used is reported and training starts afresh. Once
/// `stop` is set it ends after the epoch under way, saved and printed: a job stopped to be
/// moved or preempted resumes from the epoch after its last line, neither skipping one nor
/// running one twice.
pub fn run(args: &Args, out: &mut dyn Write, log: &mut dyn Write, stop: &AtomicBool) -> Result<Ended, Error> {
    let mut trainer = start(args, log);
    let (done, split) = (trainer.epochs_done(), trainer.split());
    if done >= args.epochs {
        note(log, format_args!("nothing to train: {done} epochs done, --epochs is {}", args.epochs));
        return Ok(Ended::Trained);
    }
    note(
        log,
        format_args!(
            "wasmsched-trainer: {} training and {} validation samples, {FEATURES} features, {CLASSES} classes, \
             {} hidden units, {} threads, batch size {}, epochs {} to {}",
            split.train.len(),
            split.validation.len(),
            args.hidden,
            args.threads,
            args.batch(),
            done + 1,
            args.epochs,
        ),
    );
    while trainer.epochs_done() < args.epochs {
        if stop.load(Ordering::Relaxed) {
            let done = trainer.epochs_done();
            note(log, format_args!("asked to stop: ending after epoch {done}"));
            return Ok(Ended::Stopped(done));
        }
        let report = trainer.run_epoch();
        // Saved before the line is printed: after a restart, no epoch is printed twice.
        if let Some(path) = &args.checkpoint {
            trainer.checkpoint().save(path).map_err(Error::Checkpoint)?;
        }
        writeln!(out, "{}", epoch_line(args.format, &report)).and_then(|()| out.flush()).map_err(Error::Output)?;
    }
    Ok(Ended::Trained)
}

/// The trainer to start with: resumed from the checkpoint when there is a usable one.
fn start(args: &Args, log: &mut dyn Write) -> Trainer {
    let Some(path) = &args.checkpoint else {
        return Trainer::new(args);
    };
    match Checkpoint::load(path).and_then(|saved| saved.map(|c| Trainer::resume(args, c)).transpose()) {
        Ok(Some(trainer)) => {
            let epoch = trainer.epochs_done();
            note(log, format_args!("resumed from checkpoint {} at epoch {epoch}", path.display()));
            trainer
        }
        Ok(None) => Trainer::new(args),
        Err(e) => {
            note(log, format_args!("ignoring checkpoint {}: {e}; starting fresh", path.display()));
            Trainer::new(args)
        }
    }
}

/// One epoch's line in `format`, without the newline.
pub fn epoch_line(format: Format, report: &EpochReport) -> String {
    let (accuracy, loss) = (report.validation.accuracy, report.validation.loss);
    let time_s = report.elapsed.as_secs_f64();
    match format {
        Format::Json => format!(
            "{{\"epoch\":{},\"accuracy\":{},\"loss\":{},\"time_s\":{time_s:.3}}}",
            report.epoch,
            json_number(accuracy),
            json_number(loss)
        ),
        Format::Flowcon => format!("Loss: {loss:.4} Time: {time_s:.3}"),
    }
}

/// `x` with four decimals, or `null` when it is not finite (JSON has no NaN).
fn json_number(x: f64) -> String {
    if x.is_finite() { format!("{x:.4}") } else { "null".to_owned() }
}

/// Writes a line to the log; a log that cannot be written must not stop training.
fn note(log: &mut dyn Write, line: fmt::Arguments<'_>) {
    let _ = writeln!(log, "{line}");
}

#[cfg(test)]
mod tests;
