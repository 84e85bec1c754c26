//! `wasmsched run`, `status`, `rollback` and `replay` as a person runs them.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_wasmsched");

/// A temp dir with `policies/NAME.wasm` for each (name, artifact) given, the demo workload,
/// and a `host.toml` with `extra` appended.
fn setup(policies: &[(&str, &str)], extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("policies")).unwrap();
    for (name, artifact) in policies {
        std::fs::copy(wasmsched_test_artifacts::path(artifact), dir.path().join(format!("policies/{name}.wasm")))
            .unwrap();
    }
    let workload = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/demo.toml");
    let config = format!(
        "tick = \"30s\"\npolicies-dir = \"policies\"\ncache-dir = \"cache\"\n\
         [backend]\nkind = \"sim\"\nworkload = {:?}\n{extra}",
        workload.display().to_string()
    );
    std::fs::write(dir.path().join("host.toml"), config).unwrap();
    dir
}

fn wasmsched(args: &[&str]) -> Output {
    Command::new(BIN).args(args).env("RUST_LOG", "warn").output().expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn run_refuses_unknown_config_keys_with_the_key_name() {
    let dir = setup(&[], "speed = \"max\"\ncolour = \"blue\"\n");
    let config = dir.path().join("host.toml");
    let out = wasmsched(&["run", "--config", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("unknown field `colour`"), "{err}");
}

#[test]
fn run_with_a_missing_workload_fails_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("policies")).unwrap();
    let config = dir.path().join("host.toml");
    std::fs::write(
        &config,
        "tick = \"30s\"\npolicies-dir = \"policies\"\n[backend]\nkind = \"sim\"\nworkload = \"gone.toml\"\n",
    )
    .unwrap();
    let out = wasmsched(&["run", "--config", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("cannot start the host: cannot load the workload: cannot read workload"), "{err}");
    assert!(err.contains("gone.toml") && !text(&out.stdout).contains("control API"), "{err}");
}

#[test]
fn run_serves_its_status_and_stops_cleanly_on_ctrl_c() {
    let extra = "speed = 1\n[api]\nlisten = \"127.0.0.1:0\"\n[policy.fs]\ndeadline = \"2s\"\n";
    let dir = setup(&[("fs", "fair-share")], extra);
    let config = dir.path().join("host.toml");
    let mut child = Command::new(BIN)
        .args(["run", "--config", config.to_str().unwrap()])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a line").unwrap();
    let addr = first.strip_prefix("control API on http://").unwrap_or_else(|| panic!("{first}")).to_string();

    // The API answers at once; the policy serves once it is loaded.
    let started = std::time::Instant::now();
    let status = loop {
        let out = wasmsched(&["status", "--addr", &addr]);
        let status = text(&out.stdout);
        assert!(out.status.success(), "{status}{}", text(&out.stderr));
        if status.contains("serving") || started.elapsed() > std::time::Duration::from_secs(60) {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.contains("fs") && status.contains("serving"), "{status}");
    let out = wasmsched(&["rollback", "fs", "--addr", &addr]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("no previous version"), "{}", text(&out.stderr));

    let kill = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let exit = child.wait().unwrap();
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    assert!(exit.success(), "{exit:?}: {rest:?}");
    assert!(rest.iter().any(|l| l.starts_with("stopped after")), "{rest:?}");
}

#[test]
fn replay_says_whether_a_policy_decides_as_the_recorded_run_did() {
    let extra = "speed = \"max\"\n[api]\nenabled = false\n[record]\ntelemetry = \"telemetry.jsonl\"\n\
                 [policy.counter]\ndeadline = \"2s\"\n";
    let dir = setup(&[("counter", "counter")], extra);
    let config = dir.path().join("host.toml");
    let out = wasmsched(&["run", "--config", config.to_str().unwrap()]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let recording = dir.path().join("telemetry.jsonl");
    let recording = recording.to_str().unwrap();
    let cache = dir.path().join("cache");
    let cache = cache.to_str().unwrap();

    let same = wasmsched(&[
        "replay",
        "--recording",
        recording,
        "--policy",
        wasmsched_test_artifacts::path("counter"),
        "--deadline-ms",
        "2000",
        "--cache-dir",
        cache,
    ]);
    let said = text(&same.stdout);
    assert!(same.status.success(), "{said}{}", text(&same.stderr));
    assert!(said.contains(" 0 differ"), "{said}");

    let other = wasmsched(&["replay", "--recording", recording, "--policy", "fair-share", "--cache-dir", cache]);
    let said = text(&other.stdout);
    assert_eq!(other.status.code(), Some(1), "{said}");
    assert!(said.contains("recorded: job"), "{said}");
}
