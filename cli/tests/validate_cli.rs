//! `wasmsched validate` as a person runs it: exit 0 and one summary line for a good policy;
//! a non-zero exit and a reason for every hostile fixture and every kind of broken file.

use std::path::Path;
use std::process::{Command, Output};

fn validate(files: &[&Path], cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .arg("validate")
        // Generous: a loaded test machine must not turn a memory hog into a timeout.
        .args(["--deadline-ms", "1000"])
        .arg("--cache-dir")
        .arg(cache)
        .args(files)
        .env("RUST_LOG", "error")
        .output()
        .expect("the binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_good_policy_passes_with_one_summary_line() {
    let cache = tempfile::tempdir().unwrap();
    let out = validate(&[Path::new(wasmsched_test_artifacts::path("fair-share"))], cache.path());
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
    let line = text.lines().next().unwrap();
    let contract = format!("contract {},", wasmsched::bindings::PACKAGE);
    for part in ["ok ", &contract, "sha256 ", "init ok", "dry-run decide"] {
        assert!(line.contains(part), "{part:?} missing from {line}");
    }
}

#[test]
fn a_component_of_the_older_contract_passes_and_says_which_it_speaks() {
    let cache = tempfile::tempdir().unwrap();
    let out = validate(&[Path::new(wasmsched_test_artifacts::path("contract-0-1"))], cache.path());
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("contract wasmsched:policy@0.1.0 (adapted: no queue; the host places its jobs)"), "{text}");
}

#[test]
fn every_hostile_fixture_fails_with_a_reason() {
    let cache = tempfile::tempdir().unwrap();
    let expected = [
        ("alien", "rebuild it against the current SDK"),
        ("flood", "at most"),
        // Refused whole by counting (it names more GPUs of one node than any node has).
        ("garbage", "dry-run decision refused"),
        ("hog", "memory cap"),
        ("init-fails", "alpha must be positive"),
        ("panic", "panicked"),
        ("recursion", "overflowed its stack"),
        ("spin", "deadline"),
    ];
    for (name, reason) in expected {
        let out = validate(&[Path::new(wasmsched_test_artifacts::path(name))], cache.path());
        let text = stdout(&out);
        assert_eq!(out.status.code(), Some(1), "{name}: {text}");
        assert!(text.starts_with("FAILED") && text.contains(reason), "{name}: expected {reason:?} in {text}");
    }
}

#[test]
fn broken_files_fail_with_a_reason_a_person_understands() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(wasmsched_test_artifacts::path("fair-share")).unwrap();
    let cases: [(&str, Vec<u8>, &str); 4] = [
        ("empty", Vec::new(), "is empty"),
        ("truncated", good[..good.len() / 2].to_vec(), "not a WebAssembly component"),
        ("random", (0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect(), "magic bytes"),
        ("core", b"\0asm\x01\0\0\0".to_vec(), "core module"),
    ];
    for (name, bytes, reason) in cases {
        let path = dir.path().join(format!("{name}.wasm"));
        std::fs::write(&path, bytes).unwrap();
        let out = validate(&[&path], dir.path());
        let text = stdout(&out);
        assert_eq!(out.status.code(), Some(1), "{name}: {text}");
        assert!(text.contains(reason), "{name}: expected {reason:?} in {text}");
    }
    let missing = validate(&[&dir.path().join("missing.wasm")], dir.path());
    assert_eq!(missing.status.code(), Some(1));
    assert!(stdout(&missing).contains("cannot read policy file"));
}

#[test]
fn a_broken_config_beside_the_policy_is_reported_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("fair-share.wasm");
    std::fs::copy(wasmsched_test_artifacts::path("fair-share"), &wasm).unwrap();
    std::fs::write(dir.path().join("fair-share.toml"), "alpha = [").unwrap();
    let text = stdout(&validate(&[&wasm], dir.path()));
    assert!(text.contains("fair-share.toml is not valid TOML"), "{text}");
    std::fs::write(dir.path().join("fair-share.toml"), "alpha = 0.1").unwrap();
    let text = stdout(&validate(&[&wasm], dir.path()));
    assert!(text.contains("unknown field `alpha`"), "{text}");
}
