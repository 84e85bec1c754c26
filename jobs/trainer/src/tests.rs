//! Whole runs, small enough to take a fraction of a second each.

use std::fs;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::*;
use crate::model::Evaluation;

/// A run small enough for a unit test.
fn small(epochs: u64) -> Args {
    Args { epochs, samples: 2000, hidden: 32, threads: 2, seed: 11, ..Args::default() }
}

/// A fresh directory for one test's checkpoint.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wasmsched-trainer-run-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Runs `args`, returning stdout and stderr.
fn run_captured(args: &Args) -> (String, String) {
    let (mut out, mut log) = (Vec::new(), Vec::new());
    run(args, &mut out, &mut log, &AtomicBool::new(false)).expect("run succeeds");
    (String::from_utf8(out).expect("utf-8"), String::from_utf8(log).expect("utf-8"))
}

/// The lines without their `time_s`, which differs from run to run.
fn without_times(out: &str) -> Vec<&str> {
    out.lines().map(|l| l.split(",\"time_s\"").next().expect("a field")).collect()
}

#[test]
fn a_few_epochs_lift_validation_accuracy_far_above_chance() {
    let mut trainer = Trainer::new(&Args { samples: 5000, hidden: 64, ..small(0) });
    let before = trainer.model().evaluate(&trainer.split().validation, 1);
    let reports: Vec<EpochReport> = (0..4).map(|_| trainer.run_epoch()).collect();
    let after = reports[3].validation;
    let chance = 1.0 / CLASSES as f64;
    assert!(before.accuracy < 2.0 * chance, "untrained accuracy {}", before.accuracy);
    assert!(after.accuracy > 2.4 * chance, "accuracy after 4 epochs {}", after.accuracy);
    assert!(after.loss < before.loss, "loss {} -> {}", before.loss, after.loss);
    assert_eq!(reports.iter().map(|r| r.epoch).collect::<Vec<_>>(), [1, 2, 3, 4]);
}

#[test]
fn prints_one_flushed_line_per_epoch_and_the_banner_on_the_log() {
    let (out, log) = run_captured(&small(3));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3);
    for (i, line) in lines.iter().enumerate() {
        assert!(line.starts_with(&format!("{{\"epoch\":{},\"accuracy\":0.", i + 1)), "{line}");
        assert!(line.contains(",\"loss\":") && line.contains(",\"time_s\":") && line.ends_with('}'), "{line}");
    }
    assert!(log.contains("1600 training and 400 validation samples"), "{log}");
}

#[test]
fn a_resumed_run_continues_the_epoch_count_where_the_checkpoint_stopped() {
    let dir = temp_dir("resume");
    let path = dir.join("model.ckpt");
    let with_checkpoint = |epochs| Args { checkpoint: Some(path.clone()), ..small(epochs) };

    let (first, _) = run_captured(&with_checkpoint(2));
    let (second, log) = run_captured(&with_checkpoint(4));
    assert!(log.contains("at epoch 2"), "{log}");
    assert_eq!(second.lines().count(), 2);
    assert!(second.starts_with("{\"epoch\":3,"), "{second}");

    // Weights and shuffling continue exactly: the same curve as a run never interrupted.
    let (straight, _) = run_captured(&small(4));
    assert_eq!(without_times(&(first + &second)), without_times(&straight));
    fs::remove_dir_all(dir).expect("cleanup");
}

#[test]
fn a_run_whose_checkpoint_has_reached_the_epochs_prints_nothing() {
    let dir = temp_dir("done");
    let args = Args { checkpoint: Some(dir.join("model.ckpt")), ..small(1) };
    run_captured(&args);
    let (out, log) = run_captured(&args);
    assert_eq!(out, "");
    assert!(log.contains("at epoch 1") && log.contains("nothing to train"), "{log}");
    fs::remove_dir_all(dir).expect("cleanup");
}

#[test]
fn a_corrupt_checkpoint_is_refused_and_training_starts_afresh() {
    let dir = temp_dir("corrupt");
    let path = dir.join("model.ckpt");
    let args = Args { checkpoint: Some(path.clone()), ..small(1) };
    run_captured(&args);
    let mut bytes = fs::read(&path).expect("saved");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xFF;
    fs::write(&path, &bytes).expect("write");

    let (out, log) = run_captured(&Args { epochs: 2, ..args });
    assert!(log.contains("ignoring checkpoint") && log.contains("checksum"), "{log}");
    assert!(out.starts_with("{\"epoch\":1,"), "{out}");
    assert_eq!(Checkpoint::load(&path).expect("valid again").map(|c| c.epoch), Some(2));
    fs::remove_dir_all(dir).expect("cleanup");
}

#[test]
fn a_checkpoint_of_another_model_shape_is_refused() {
    let dir = temp_dir("shape");
    let path = dir.join("model.ckpt");
    run_captured(&Args { checkpoint: Some(path.clone()), ..small(1) });
    let (out, log) = run_captured(&Args { checkpoint: Some(path), hidden: 16, ..small(1) });
    assert!(log.contains("hidden 32, this run has hidden 16; starting fresh"), "{log}");
    assert!(out.starts_with("{\"epoch\":1,"), "{out}");
    fs::remove_dir_all(dir).expect("cleanup");
}

/// Standard output that asks the run to stop once it has `lines` lines, as a signal would
/// while the next epoch trains.
struct StopAfter<'a> {
    out: Vec<u8>,
    lines: usize,
    stop: &'a AtomicBool,
}

impl io::Write for StopAfter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.extend_from_slice(buf);
        if self.out.iter().filter(|&&b| b == b'\n').count() >= self.lines {
            self.stop.store(true, Ordering::Relaxed);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_stop_ends_after_the_epoch_under_way_and_the_next_run_resumes_after_its_line() {
    let dir = temp_dir("stop");
    let path = dir.join("model.ckpt");
    let stop = AtomicBool::new(false);
    let args = Args { checkpoint: Some(path.clone()), ..small(10) };
    let mut out = StopAfter { out: Vec::new(), lines: 2, stop: &stop };
    let mut log = Vec::new();
    let ended = run(&args, &mut out, &mut log, &stop).expect("run succeeds");
    assert_eq!(ended, Ended::Stopped(2));
    let printed = String::from_utf8(out.out).expect("utf-8");
    assert_eq!(printed.lines().count(), 2, "{printed}");
    assert!(String::from_utf8(log).expect("utf-8").contains("asked to stop: ending after epoch 2"));
    assert_eq!(Checkpoint::load(&path).expect("valid").map(|c| c.epoch), Some(2), "the last line's epoch is saved");
    let (resumed, _) = run_captured(&Args { epochs: 3, ..args });
    assert!(resumed.starts_with("{\"epoch\":3,") && resumed.lines().count() == 1, "{resumed}");
    fs::remove_dir_all(dir).expect("cleanup");
}

#[test]
fn an_unwritable_checkpoint_stops_the_run_with_the_path() {
    let dir = temp_dir("unwritable");
    let args = Args { checkpoint: Some(dir.join("missing/model.ckpt")), ..small(1) };
    let err = run(&args, &mut Vec::new(), &mut Vec::new(), &AtomicBool::new(false)).expect_err("cannot save");
    assert!(err.to_string().contains("missing/model.ckpt.tmp"), "{err}");
    fs::remove_dir_all(dir).expect("cleanup");
}

#[test]
fn both_formats_print_what_the_readers_expect() {
    let report = EpochReport {
        epoch: 3,
        validation: Evaluation { accuracy: 0.81234, loss: 0.45671 },
        elapsed: Duration::from_millis(1234),
    };
    assert_eq!(epoch_line(Format::Json, &report), r#"{"epoch":3,"accuracy":0.8123,"loss":0.4567,"time_s":1.234}"#);
    assert_eq!(epoch_line(Format::Flowcon, &report), "Loss: 0.4567 Time: 1.234");
    let diverged = EpochReport { validation: Evaluation { accuracy: 0.1, loss: f64::NAN }, ..report };
    assert!(epoch_line(Format::Json, &diverged).contains("\"loss\":null"));
}

#[test]
fn export_delivers_a_whole_checkpoint_and_refuses_a_damaged_or_missing_one() {
    let dir = temp_dir("export");
    let (model, delivered) = (dir.join("model.ckpt"), dir.join("delivered.ckpt"));
    assert!(export(&model, &delivered).unwrap_err().to_string().contains("no checkpoint yet"));
    run_captured(&Args { checkpoint: Some(model.clone()), ..small(2) });
    export(&model, &delivered).expect("a whole checkpoint is delivered");
    assert_eq!(fs::read(&model).unwrap(), fs::read(&delivered).unwrap());
    let mut bytes = fs::read(&model).unwrap();
    bytes.truncate(bytes.len() - 3);
    fs::write(&model, bytes).unwrap();
    assert!(export(&model, &delivered).is_err(), "a damaged checkpoint is not delivered");
    assert_eq!(Checkpoint::load(&delivered).unwrap().map(|c| c.epoch), Some(2), "the delivered model is intact");
    fs::remove_dir_all(dir).expect("cleanup");
}

/// Waits between polls, a grace and a report delay short enough for a unit test.
fn quick(grace_ms: u64) -> Timing {
    Timing {
        poll: Duration::from_millis(2),
        grace: Duration::from_millis(grace_ms),
        report_after: Duration::from_secs(30),
    }
}

/// Rank `rank` of `world`, meeting in `dir`.
fn rank(args: &Args, rank: usize, world: usize, dir: &std::path::Path) -> Args {
    Args { rank: Some(rank), world_size: Some(world), rendezvous: Some(dir.to_owned()), ..args.clone() }
}

/// Runs `ranks` together, one thread each, all stopped by `stop`: each one's result, stdout
/// and stderr.
fn run_group(ranks: &[Args], timing: Timing, stop: &AtomicBool) -> Vec<(Result<Ended, Error>, String, String)> {
    std::thread::scope(|s| {
        let handles: Vec<_> = ranks
            .iter()
            .map(|args| {
                s.spawn(move || {
                    let (mut out, mut log) = (Vec::new(), Vec::new());
                    let ended = run_with(args, timing, &mut out, &mut log, stop);
                    (ended, String::from_utf8(out).expect("utf-8"), String::from_utf8(log).expect("utf-8"))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a rank panicked")).collect()
    })
}

/// The validation accuracy of a JSON epoch line.
fn accuracy(line: &str) -> f64 {
    line.split("\"accuracy\":")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .expect("accuracy")
        .parse()
        .expect("number")
}

#[test]
fn a_group_of_two_trains_the_same_model_rank_0_saves_it_and_both_resume_from_it() {
    let dir = temp_dir("group");
    let (meet, path) = (dir.join("meet"), dir.join("model.ckpt"));
    let never = AtomicBool::new(false);
    // Rank 1 is given a checkpoint in a folder that does not exist: saving there would fail.
    let first = [
        rank(&Args { checkpoint: Some(path.clone()), ..small(3) }, 0, 2, &meet),
        rank(&Args { checkpoint: Some(dir.join("rank-1/model.ckpt")), ..small(3) }, 1, 2, &meet),
    ];
    let ran = run_group(&first, quick(300), &never);
    for (ended, _, log) in &ran {
        assert!(matches!(ended, Ok(Ended::Trained)), "{ended:?} {log}");
        assert!(log.contains("; rank ") && log.contains(" of 2, batch 32 per rank, rendezvous "), "{log}");
    }
    let lines = without_times(&ran[0].1);
    assert_eq!(lines, without_times(&ran[1].1), "both ranks hold the same model");
    assert_eq!(lines.len(), 3);
    for (i, line) in lines.iter().enumerate() {
        assert!(line.starts_with(&format!("{{\"epoch\":{},\"accuracy\":0.", i + 1)), "{line}");
    }
    assert_eq!(Checkpoint::load(&path).expect("valid").map(|c| c.epoch), Some(3), "rank 0 saved");
    assert!(!dir.join("rank-1").exists(), "rank 1 wrote no checkpoint of its own");

    // Both resume from rank 0's checkpoint and continue as a group never stopped does.
    let both = |epochs| [0, 1].map(|r| rank(&Args { checkpoint: Some(path.clone()), ..small(epochs) }, r, 2, &meet));
    let resumed = run_group(&both(5), quick(300), &never);
    for (ended, out, log) in &resumed {
        assert!(matches!(ended, Ok(Ended::Trained)), "{ended:?}");
        assert!(log.contains("at epoch 3") && out.starts_with("{\"epoch\":4,") && out.lines().count() == 2, "{out}");
    }
    let mut meetings: Vec<String> = fs::read_dir(&meet)
        .expect("meet")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
        .collect();
    meetings.sort();
    assert_eq!(meetings, ["epoch-4-of-2", "epoch-5-of-2"], "rank 0 removes the meetings two epochs old");
    let straight_dir = temp_dir("group-straight");
    let straight = [0, 1].map(|r| rank(&small(5), r, 2, &straight_dir));
    let straight = run_group(&straight, quick(300), &never);
    assert_eq!(without_times(&(ran[0].1.clone() + &resumed[1].1)), without_times(&straight[1].1));

    // Model averaging learns about as well as one rank over the whole data.
    let (alone, _) = run_captured(&small(5));
    let last_accuracy = |out: &str| accuracy(out.lines().last().expect("epoch 5"));
    let (group_accuracy, alone_accuracy) = (last_accuracy(&resumed[0].1), last_accuracy(&alone));
    assert!((group_accuracy - alone_accuracy).abs() < 0.1, "group {group_accuracy}, alone {alone_accuracy}");
    assert!(group_accuracy > 2.0 / CLASSES as f64, "the group learns: {group_accuracy}");
    fs::remove_dir_all(dir).expect("cleanup");
    fs::remove_dir_all(straight_dir).expect("cleanup");
}

#[test]
fn a_stopped_rank_whose_peer_never_arrives_abandons_the_epoch_after_the_grace() {
    let dir = temp_dir("abandon");
    let (meet, path) = (dir.join("meet"), dir.join("model.ckpt"));
    let stop = AtomicBool::new(false);
    let args = rank(&Args { checkpoint: Some(path.clone()), ..small(3) }, 0, 2, &meet);
    let (mut out, mut log) = (Vec::new(), Vec::new());
    let (ended, stopped_at) = std::thread::scope(|s| {
        // The stop comes once rank 0 waits at the first meeting, where rank 1 never comes.
        let watcher = s.spawn(|| {
            while !meet.join("epoch-1-of-2/rank-0").exists() {
                std::thread::sleep(Duration::from_millis(1));
            }
            stop.store(true, Ordering::Relaxed);
            std::time::Instant::now()
        });
        let ended = run_with(&args, quick(200), &mut out, &mut log, &stop);
        (ended, watcher.join().expect("watcher"))
    });
    assert_eq!(ended.expect("no error"), Ended::Stopped(0));
    assert!(stopped_at.elapsed() >= Duration::from_millis(200), "it waited the grace");
    assert!(out.is_empty(), "the abandoned epoch is not printed");
    assert!(!path.exists(), "nor saved");
    let log = String::from_utf8(log).expect("utf-8");
    assert!(log.contains("within 0.2 s; abandoning epoch 1, ending after epoch 0"), "{log}");
    fs::remove_dir_all(dir).expect("cleanup");
}

#[test]
fn a_stop_reaching_both_ranks_ends_them_after_the_same_epoch_saved_and_printed() {
    let dir = temp_dir("group-stop");
    let (meet, path) = (dir.join("meet"), dir.join("model.ckpt"));
    let stop = AtomicBool::new(false);
    let ranks = [0, 1].map(|r| rank(&Args { checkpoint: Some(path.clone()), ..small(10) }, r, 2, &meet));
    let ran = std::thread::scope(|s| {
        // The stop comes while rank 0 waits at the second meeting; rank 1 may be anywhere.
        s.spawn(|| {
            while !meet.join("epoch-2-of-2/rank-0").exists() {
                std::thread::sleep(Duration::from_millis(1));
            }
            stop.store(true, Ordering::Relaxed);
        });
        run_group(&ranks, quick(3000), &stop)
    });
    let Ok(Ended::Stopped(done)) = ran[0].0 else { panic!("{:?}", ran[0].0) };
    assert!(matches!(ran[1].0, Ok(Ended::Stopped(d)) if d == done), "{:?} vs {done}", ran[1].0);
    assert!(done >= 1, "epoch 1 was met before the stop");
    for (_, out, _) in &ran {
        assert_eq!(out.lines().count() as u64, done, "{out}");
    }
    assert_eq!(Checkpoint::load(&path).expect("valid").map(|c| c.epoch), Some(done), "the last line's epoch is saved");
    fs::remove_dir_all(dir).expect("cleanup");
}

#[test]
fn a_group_without_a_rendezvous_or_with_a_rank_outside_it_is_refused() {
    let nowhere = Args { rank: Some(1), world_size: Some(2), ..small(1) };
    let err = run(&nowhere, &mut Vec::new(), &mut Vec::new(), &AtomicBool::new(false)).expect_err("refused");
    assert!(err.to_string().contains("give --rendezvous DIR"), "{err}");
    let outside = Args { rank: Some(2), ..nowhere };
    let err = run(&outside, &mut Vec::new(), &mut Vec::new(), &AtomicBool::new(false)).expect_err("refused");
    assert!(err.to_string().contains("below the world size 2"), "{err}");
}

#[test]
fn a_group_of_one_trains_alone_and_never_meets() {
    let dir = temp_dir("one");
    let (out, log) = run_captured(&rank(&small(2), 0, 1, &dir.join("meet")));
    assert_eq!(without_times(&out), without_times(&run_captured(&small(2)).0));
    assert!(!log.contains("rank") && !dir.join("meet").exists(), "{log}");
    fs::remove_dir_all(dir).expect("cleanup");
}
