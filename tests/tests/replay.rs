//! Recording and replay: a run's telemetry played back to a policy gives the decisions that
//! were taken, when it is the same policy; the audit log survives a kill.

use std::io::Write;

use wasmsched::replay;
use wasmsched::runtime::Limits;
use wasmsched::runtime::supervise::{Fallback, Quarantine, Supervised};

use wasmsched_tests::common::{loaded, runtime};
use wasmsched_tests::live::{Running, Setup, assert_no_tick_missed, component};

fn supervised(name: &str) -> Supervised {
    let limits = Limits { deadline: std::time::Duration::from_secs(2), ..Limits::default() };
    Supervised::new(loaded(name), "{}".into(), limits, Fallback::KeepLimits, Quarantine::default())
}

/// Run the counter as the active policy for a while, recording.
fn recorded_run() -> Setup {
    let setup = Setup::new();
    setup.land("counter", &component("counter"));
    let running = Running::start(setup.config("10s", "\"max\"", "[policy.counter]\ndeadline = \"2s\"\n"));
    running.wait("sixty ticks", |s| s.ticks >= 60);
    running.stop();
    setup
}

#[test]
fn replaying_a_recording_with_the_same_policy_gives_identical_decisions() {
    let setup = recorded_run();
    let mut backend = replay::Recording::open(&setup.recording()).unwrap();
    assert_eq!(backend.config.tick, std::time::Duration::from_secs(10));
    let report = replay::replay(runtime(), &mut backend, &mut supervised("counter"));
    assert!(report.ticks >= 60, "{report:?}");
    assert!(report.compared >= 60);
    assert!(report.is_identical(), "first difference: {:?}", report.differences.first());
    assert_eq!(report.identical, report.compared);
}

#[test]
fn replaying_another_policy_shows_where_its_decisions_differ() {
    let setup = recorded_run();
    let mut backend = replay::Recording::open(&setup.recording()).unwrap();
    let report = replay::replay(runtime(), &mut backend, &mut supervised("fair-share"));
    assert!(!report.is_identical());
    let first = &report.differences[0];
    assert!(first.recorded.as_ref().is_some_and(|a| !a.is_empty()), "{first:?}");
    // The counter's caps are in the recorded world: fair-share lifts them.
    assert!(report.differences.iter().any(|d| d.replayed.as_ref().is_some_and(|a| !a.is_empty())));
}

#[test]
fn the_audit_log_stays_readable_after_a_kill_and_the_next_run_appends_to_it() {
    let setup = Setup::new();
    setup.land("fs", &component("fair-share"));
    let config = setup.config("1s", "\"max\"", "[policy.fs]\ndeadline = \"2s\"\n");
    let running = Running::start(config.clone());
    running.wait("ten ticks", |s| s.ticks >= 10);
    running.stop();
    let before = setup.audit_lines();
    assert_no_tick_missed(&before, 1000);
    // A kill in the middle of a write leaves half a line.
    let mut f = std::fs::OpenOptions::new().append(true).open(setup.audit()).unwrap();
    f.write_all(br#"{"tick":99999,"time_ms":1,"wall_ms":1,"active":{"policy":"fs","sha"#).unwrap();
    drop(f);
    assert_eq!(setup.audit_lines(), before, "the torn line is skipped");

    let running = Running::start(config);
    running.wait("ten more ticks", |s| s.ticks >= 10);
    running.stop();
    let after = setup.audit_lines();
    assert!(after.len() > before.len());
    assert_eq!(&after[..before.len()], &before[..]);
    assert_eq!(after[before.len()].tick, 1, "the second run's lines follow the first's");
}
