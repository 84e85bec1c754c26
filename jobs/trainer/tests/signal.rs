//! The built binary, stopped by a real SIGTERM while it trains, and resumed at the batch size
//! the host hands a resized job.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn sigterm_ends_it_after_the_epoch_under_way_with_status_143_and_a_checkpoint_that_matches_its_last_line() {
    let dir = tempfile_dir();
    let checkpoint = dir.join("model.ckpt");
    let mut child = Command::new(env!("CARGO_BIN_EXE_wasmsched-trainer"))
        .args(["--epochs", "100000", "--samples", "2000", "--threads", "1", "--checkpoint"])
        .arg(&checkpoint)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the trainer starts");
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let first = lines.next().expect("a first epoch").expect("utf-8");
    assert!(first.starts_with("{\"epoch\":1,"), "{first}");
    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill runs");
    assert!(killed.success());
    let rest: Vec<String> = lines.map(|l| l.expect("utf-8")).collect();
    let status = child.wait().expect("it exits");
    assert_eq!(status.code(), Some(143), "a stop asked for ends with 143, not by the signal");
    let last = rest.last().map_or(&first, |l| l);
    let epoch: u64 = last["{\"epoch\":".len()..].split(',').next().unwrap().parse().unwrap();
    assert_eq!(rest.len() as u64 + 1, epoch, "every epoch printed once: {rest:?}");
    let mut log = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("piped"), &mut log).unwrap();
    assert!(log.contains(&format!("asked to stop: ending after epoch {epoch}")), "{log}");
    // The checkpoint holds the last epoch printed: a resumed run prints the next one first, at
    // the batch size the host set for it (a resize's).
    let resumed = Command::new(env!("CARGO_BIN_EXE_wasmsched-trainer"))
        .args(["--epochs", &(epoch + 1).to_string(), "--samples", "2000", "--threads", "1", "--checkpoint"])
        .arg(&checkpoint)
        .env("WASMSCHED_BATCH_SIZE", "256")
        .output()
        .expect("the trainer runs");
    let out = String::from_utf8(resumed.stdout).unwrap();
    assert!(out.starts_with(&format!("{{\"epoch\":{},", epoch + 1)) && out.lines().count() == 1, "{out}");
    let log = String::from_utf8(resumed.stderr).unwrap();
    assert!(log.contains("batch size 256"), "{log}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_batch_size_in_the_environment_that_is_not_one_is_refused_before_training() {
    let run = Command::new(env!("CARGO_BIN_EXE_wasmsched-trainer"))
        .args(["--epochs", "1", "--samples", "200"])
        .env("WASMSCHED_BATCH_SIZE", "lots")
        .output()
        .expect("the trainer runs");
    assert_eq!(run.status.code(), Some(2));
    assert!(run.stdout.is_empty(), "no epoch trained");
    let log = String::from_utf8(run.stderr).unwrap();
    assert!(log.contains("WASMSCHED_BATCH_SIZE \"lots\" is not valid"), "{log}");
    // The option wins over the environment.
    let run = Command::new(env!("CARGO_BIN_EXE_wasmsched-trainer"))
        .args(["--epochs", "1", "--samples", "200", "--batch-size", "16"])
        .env("WASMSCHED_BATCH_SIZE", "lots")
        .output()
        .expect("the trainer runs");
    assert!(run.status.success() && String::from_utf8(run.stderr).unwrap().contains("batch size 16"));
}

/// A fresh directory under the system's temporary one.
fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("wasmsched-trainer-signal-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
