//! The built binary as two ranks of a group, told their ranks by the environment the host
//! sets, and refusing a group it cannot form before it trains.

use std::process::{Command, Output, Stdio};

/// The trainer with `args` and `env` and none of the group variables of the test's own
/// environment.
fn trainer(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_wasmsched-trainer"));
    command.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    for var in ["WASMSCHED_RANK", "WASMSCHED_WORLD_SIZE", "RANK", "WORLD_SIZE", "WASMSCHED_BATCH_SIZE"] {
        command.env_remove(var);
    }
    command.envs(env.iter().copied());
    command
}

/// The lines without their `time_s`, which differs from process to process.
fn without_times(out: &[u8]) -> Vec<String> {
    let out = String::from_utf8(out.to_vec()).expect("utf-8");
    out.lines().map(|l| l.split(",\"time_s\"").next().expect("a field").to_owned()).collect()
}

#[test]
fn two_processes_told_their_rank_by_the_environment_train_one_model_beside_the_checkpoint() {
    let dir = std::env::temp_dir().join(format!("wasmsched-trainer-group-bin-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let checkpoint = dir.join("model.ckpt");
    let args = ["--epochs", "2", "--samples", "2000", "--hidden", "16", "--threads", "1", "--checkpoint"];
    let args: Vec<&str> = args.into_iter().chain([checkpoint.to_str().expect("utf-8")]).collect();
    let ranks: Vec<_> = [("WASMSCHED_RANK", "0"), ("RANK", "1")]
        .into_iter()
        .map(|rank| trainer(&args, &[rank, ("WASMSCHED_WORLD_SIZE", "2")]).spawn().expect("the trainer starts"))
        .collect();
    let outputs: Vec<Output> = ranks.into_iter().map(|r| r.wait_with_output().expect("it exits")).collect();
    for output in &outputs {
        let log = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{log}");
        let beside = format!(" of 2, batch 32 per rank, rendezvous {}", dir.join("rendezvous").display());
        assert!(log.contains(&beside), "{log}");
    }
    let lines = without_times(&outputs[0].stdout);
    assert_eq!(lines, without_times(&outputs[1].stdout));
    assert!(lines.len() == 2 && lines[1].starts_with("{\"epoch\":2,"), "{lines:?}");
    assert!(checkpoint.exists() && dir.join("rendezvous/epoch-2-of-2/rank-1").exists());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_group_it_cannot_form_is_refused_before_training_with_status_2() {
    let cases: [(&[(&str, &str)], &str); 3] = [
        (&[("WASMSCHED_WORLD_SIZE", "none")], "WASMSCHED_WORLD_SIZE \"none\" is not valid"),
        (&[("RANK", "3"), ("WORLD_SIZE", "2")], "RANK \"3\" is not valid: expected a whole number from 0 to 1"),
        (&[("WASMSCHED_RANK", "1"), ("WASMSCHED_WORLD_SIZE", "2")], "give --rendezvous DIR"),
    ];
    for (env, message) in cases {
        let run = trainer(&["--epochs", "1", "--samples", "200"], env).output().expect("the trainer runs");
        let log = String::from_utf8(run.stderr).unwrap();
        assert_eq!(run.status.code(), Some(2), "{env:?}: {log}");
        assert!(run.stdout.is_empty(), "no epoch trained");
        assert!(log.contains(message), "{env:?}: {log}");
    }
}
