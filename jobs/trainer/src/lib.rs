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
//! Several processes (the pods of one distributed job) can train together as a group of ranks,
//! data-parallel ([`group`]). Each is told its rank and the world size (`--rank` and
//! `--world-size`, else `WASMSCHED_RANK` and `WASMSCHED_WORLD_SIZE`, which the host sets, else
//! torchrun's `RANK` and `WORLD_SIZE`) and a rendezvous folder they all reach (`--rendezvous`,
//! else `rendezvous` beside the checkpoint). Every epoch each rank trains on its shard of the
//! same shuffled order, with its share of the batch size, then leaves its weights in the folder,
//! waits for every rank's and takes their mean (model averaging), so all ranks go on from the
//! same model and print the same line. Only rank 0 saves the checkpoint; every rank resumes
//! from it. A stop asked while a rank waits for the others gives them a few seconds (they are
//! stopped at the same moment), then abandons the epoch, neither printed nor saved, for the
//! resumed job to train again. A group of one rank trains alone, as without these options.
//!
//! Start reading at [`run`], then [`train::Trainer`] and [`group::Group`].

pub mod args;
pub mod checkpoint;
pub mod data;
pub mod group;
pub mod model;
pub mod rng;
pub mod train;

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::args::{Args, ArgsError, Format};
use crate::checkpoint::{Checkpoint, CheckpointError};
use crate::group::{Group, RendezvousError, Timing};
use crate::train::{CLASSES, EpochReport, FEATURES, Trainer};

/// Why a run stopped early.
#[derive(Debug)]
pub enum Error {
    /// The checkpoint could not be written.
    Checkpoint(CheckpointError),
    /// Standard output could not be written (closed pipe, full disk).
    Output(io::Error),
    /// The settings make no group: a rank outside the world, or no rendezvous folder.
    Settings(ArgsError),
    /// This rank's weights could not be left for the others.
    Rendezvous(RendezvousError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Checkpoint(e) => write!(f, "{e}"),
            Self::Output(e) => write!(f, "cannot write the epoch line to stdout: {e}"),
            Self::Settings(e) => write!(f, "{e}"),
            Self::Rendezvous(e) => write!(f, "{e}"),
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
    /// It was asked to stop, after this many epochs (each saved and printed; an epoch a group
    /// abandoned is not counted).
    Stopped(u64),
}

/// Trains until `args.epochs` epochs are done, writing one line per epoch to `out` (flushed
/// at once) and the rest to `log`: the banner, and whether a checkpoint was resumed or
/// refused. A checkpoint that cannot be used is reported and training starts afresh. Once
/// `stop` is set it ends after the epoch under way, saved and printed: a job stopped to be
/// moved or preempted resumes from the epoch after its last line, neither skipping one nor
/// running one twice.
///
/// As one rank of a group ([`Args::world`] above 1) it meets the others after every epoch and
/// goes on with their mean model; only rank 0 saves the checkpoint. A stop asked while it waits
/// for them waits [`Timing::grace`] more; if some are still missing, the epoch is abandoned
/// (neither saved nor printed) and the run ends after the epoch before.
pub fn run(args: &Args, out: &mut dyn Write, log: &mut dyn Write, stop: &AtomicBool) -> Result<Ended, Error> {
    run_with(args, Timing::default(), out, log, stop)
}

/// [`run`], a group's ranks waiting for each other as `timing` says (tests shorten the waits).
pub fn run_with(
    args: &Args,
    timing: Timing,
    out: &mut dyn Write,
    log: &mut dyn Write,
    stop: &AtomicBool,
) -> Result<Ended, Error> {
    let group = group(args, timing)?;
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
             {} hidden units, {} threads, batch size {}, epochs {} to {}{}",
            split.train.len(),
            split.validation.len(),
            args.hidden,
            args.threads,
            args.batch(),
            done + 1,
            args.epochs,
            group.as_ref().map_or_else(String::new, |g| format!(
                "; rank {} of {}, batch {} per rank, rendezvous {}",
                g.rank,
                g.world,
                trainer.rank_batch(),
                g.dir.display()
            )),
        ),
    );
    while trainer.epochs_done() < args.epochs {
        if stop.load(Ordering::Relaxed) {
            let done = trainer.epochs_done();
            note(log, format_args!("asked to stop: ending after epoch {done}"));
            return Ok(Ended::Stopped(done));
        }
        let done = trainer.epochs_done();
        let Some(report) = epoch(&mut trainer, group.as_ref(), stop, log)? else {
            let (grace, next) = (timing.grace.as_secs_f64(), done + 1);
            note(
                log,
                format_args!(
                    "asked to stop: the other ranks did not arrive within {grace} s; \
                     abandoning epoch {next}, ending after epoch {done}"
                ),
            );
            return Ok(Ended::Stopped(done));
        };
        // Saved before the line is printed: after a restart, no epoch is printed twice. Only
        // rank 0 saves; the others resume from its checkpoint.
        if let Some(path) = &args.checkpoint
            && args.rank() == 0
        {
            trainer.checkpoint().save(path).map_err(Error::Checkpoint)?;
        }
        writeln!(out, "{}", epoch_line(args.format, &report)).and_then(|()| out.flush()).map_err(Error::Output)?;
    }
    Ok(Ended::Trained)
}

/// The group `args` asks for, checked: none for one rank.
fn group(args: &Args, timing: Timing) -> Result<Option<Group>, Error> {
    args.rank_and_world_size(|_| None).map_err(Error::Settings)?;
    let Some(dir) = args.rendezvous_dir().map_err(Error::Settings)? else {
        return Ok(None);
    };
    Ok(Some(Group {
        rank: args.rank(),
        world: args.world(),
        dir,
        seed: args.seed,
        samples: args.samples as u64,
        timing,
    }))
}

/// Trains one epoch: alone, or as a rank of `group`, which it meets with after training and
/// whose mean model it takes; None when a stop abandoned the meeting.
fn epoch(
    trainer: &mut Trainer,
    group: Option<&Group>,
    stop: &AtomicBool,
    log: &mut dyn Write,
) -> Result<Option<EpochReport>, Error> {
    let Some(group) = group else {
        return Ok(Some(trainer.run_epoch()));
    };
    let start = Instant::now();
    trainer.train_epoch();
    let epoch = trainer.epochs_done();
    let mean = group.average(epoch, trainer.model().params(), stop, log).map_err(Error::Rendezvous)?;
    let Some(mean) = mean else {
        return Ok(None);
    };
    let fitted = trainer.set_params(mean);
    debug_assert!(fitted, "the mean has as many weights as the model");
    if group.rank == 0 {
        group.clean(epoch);
    }
    Ok(Some(trainer.report(start)))
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
