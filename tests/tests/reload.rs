//! Hot reload on the simulator backend: swaps while ticking, refusals that keep the old
//! version serving, state carried across a swap, unload and rollback.

use wasmsched::status::{PolicyState, ReloadOutcome};

use wasmsched_tests::live::{Running, Setup, assert_no_tick_missed, component, serving, sha256, variant};

/// A policy table with a generous deadline: a loaded test machine must not turn a dry run
/// into a timeout.
fn policy(name: &str, role: &str) -> String {
    format!("[policy.{name}]\nrole = \"{role}\"\ndeadline = \"2s\"\nquarantine-after = 1000\n")
}

#[test]
fn a_reload_storm_of_hundreds_of_swaps_misses_and_fails_no_tick() {
    const SWAPS: u32 = 200;
    let setup = Setup::new();
    let versions = [variant("fair-share", 1), variant("fair-share", 2)];
    setup.land("fs", &versions[0]);
    // 1 s ticks at 200× speed: a tick every 5 ms of wall time.
    let running = Running::start(setup.config("1s", "200", &policy("fs", "active")));
    running.wait("the first version", |s| s.policy("fs").is_some_and(|p| p.version == 1));
    for i in 1..=SWAPS {
        let bytes = &versions[(i % 2) as usize];
        // Half of the swaps overwrite the file in place, half rename a finished copy over it.
        if i % 4 < 2 {
            setup.overwrite("fs", bytes)
        } else {
            setup.land("fs", bytes)
        }
        let want = i + 1;
        running.wait(&format!("swap {i}"), |s| s.policy("fs").is_some_and(|p| p.version >= want));
    }
    let status = running.handle.board().get();
    let summary = running.stop();
    let lines = setup.audit_lines();
    println!(
        "reload storm: {SWAPS} swaps over {} ticks, {} late, {} refused",
        summary.ticks, status.late_ticks, status.refused
    );
    assert_eq!(status.policy("fs").unwrap().version, SWAPS + 1);
    assert_no_tick_missed(&lines, 1000);
    assert_eq!(lines.len() as u64, summary.ticks, "every tick is decided (the service runs throughout)");
    for line in &lines {
        let active = line.active.as_ref().unwrap_or_else(|| panic!("tick {} had no active policy", line.tick));
        assert!(active.failure.is_none() && active.fallback.is_none(), "tick {} failed: {active:?}", line.tick);
    }
    let digests: std::collections::BTreeSet<&str> =
        lines.iter().filter_map(|l| l.active.as_ref()).map(|a| a.sha256.as_str()).collect();
    assert_eq!(digests.len(), 2, "both versions served");
}

#[test]
fn a_swap_requested_while_the_policy_is_mid_call_happens_at_the_next_tick_boundary() {
    let setup = Setup::new();
    let slow = component("counter");
    setup.land("p", &slow);
    // Each call does a few hundred milliseconds of busy work: the loop is almost always in one.
    let table = "[policy.p]\ndeadline = \"10s\"\n[policy.p.config]\nbusy = 200000000\n";
    let running = Running::start(setup.config("1s", "\"max\"", table));
    running.wait("the second call", |s| s.policy("p").is_some_and(|p| p.counters.calls >= 2));
    // The next version takes the same config table (the counter's own, without the work).
    let good = variant("counter", 7);
    setup.land("p", &good);
    let fixed = running.wait("the new version", |s| serving(s, "p").as_deref() == Some(&*sha256(&good)));
    let after = fixed.ticks;
    running.wait("a few ticks on it", |s| s.ticks >= after + 5);
    running.stop();
    let lines = setup.audit_lines();
    assert_no_tick_missed(&lines, 1000);
    let split = lines.iter().position(|l| l.active.as_ref().unwrap().sha256 != sha256(&slow)).expect("it served");
    assert!(split >= 2, "the slow version served its calls first");
    let counted: Vec<u64> = counts(&lines[..split]).into_iter().map(|(_, n)| n).collect();
    assert_eq!(counted, (1..=split as u64).collect::<Vec<_>>(), "every call of the old version finished");
    for l in &lines[split..] {
        let a = l.active.as_ref().unwrap();
        assert_eq!(a.sha256, sha256(&good));
        assert!(a.failure.is_none(), "tick {}: {a:?}", l.tick);
    }
}

/// Start `p` on fair-share, land `bad`, and check it is refused for `reason` while fair-share
/// keeps serving.
fn refused_while_the_old_version_serves(bad: &[u8], reason: &str) {
    let setup = Setup::new();
    let good = component("fair-share");
    setup.land("p", &good);
    let running = Running::start(setup.config("1s", "100", &policy("p", "active")));
    running.wait("fair-share", |s| serving(s, "p").is_some());
    setup.land("p", bad);
    let s = running.wait("the refusal", |s| s.refused >= 1);
    let p = s.policy("p").unwrap();
    let last = p.last_reload.as_ref().unwrap();
    assert_eq!(last.outcome, ReloadOutcome::Refused);
    assert!(last.detail.contains(reason), "expected {reason:?} in {:?}", last.detail);
    assert_eq!(p.sha256.as_deref(), Some(&*sha256(&good)), "the old version serves");
    let calls = p.counters.calls;
    running.wait("more calls to the old version", |s| s.policy("p").unwrap().counters.calls > calls + 3);
    running.stop();
    let lines = setup.audit_lines();
    assert!(lines.iter().all(|l| l.active.as_ref().is_some_and(|a| a.sha256 == sha256(&good))));
}

#[test]
fn reload_keeps_old_version_when_new_file_is_truncated() {
    let good = component("fair-share");
    refused_while_the_old_version_serves(&good[..good.len() / 2], "not a WebAssembly component");
}

#[test]
fn reload_keeps_old_version_when_new_file_speaks_another_world() {
    refused_while_the_old_version_serves(&component("alien"), "rebuild it against the current SDK");
}

#[test]
fn reload_keeps_old_version_when_new_version_refuses_init() {
    refused_while_the_old_version_serves(&component("init-fails"), "alpha must be positive");
}

/// The call numbers the counter fixture put in its reasons, tick by tick.
fn counts(lines: &[wasmsched::record::AuditLine]) -> Vec<(String, u64)> {
    lines
        .iter()
        .filter_map(|l| l.active.as_ref())
        .map(|a| {
            let reason = &a.actions.first().expect("the counter caps every job").reason;
            (a.sha256.clone(), reason.strip_prefix("call ").unwrap().parse().unwrap())
        })
        .collect()
}

#[test]
fn state_is_carried_across_a_swap() {
    let setup = Setup::new();
    let (v1, v2) = (variant("counter", 1), variant("counter", 2));
    setup.land("c", &v1);
    let running = Running::start(setup.config("1s", "100", &policy("c", "active")));
    running.wait("five calls", |s| s.policy("c").unwrap().counters.calls >= 5);
    setup.land("c", &v2);
    let s = running.wait("the swap", |s| serving(s, "c").as_deref() == Some(&*sha256(&v2)));
    assert!(s.policy("c").unwrap().last_reload.as_ref().unwrap().detail.contains("bytes of its state"));
    running.wait("calls to the new version", |s| s.policy("c").unwrap().counters.calls >= 3);
    running.stop();
    let counts = counts(&setup.audit_lines());
    let first_new = counts.iter().position(|(sha, _)| *sha == sha256(&v2)).unwrap();
    assert!(first_new >= 5);
    let numbers: Vec<u64> = counts.iter().map(|(_, n)| *n).collect();
    let expected: Vec<u64> = (1..=numbers.len() as u64).collect();
    assert_eq!(numbers, expected, "the count goes on across the swap instead of starting again");
}

#[test]
fn a_deleted_file_unloads_its_policy_and_a_rollback_brings_it_back() {
    let setup = Setup::new();
    let good = component("fair-share");
    setup.land("p", &good);
    let running = Running::start(setup.config("1s", "100", &policy("p", "active")));
    running.wait("fair-share", |s| serving(s, "p").is_some());
    std::fs::remove_file(setup.policies().join("p.wasm")).unwrap();
    let s = running.wait("the unload", |s| s.policy("p").unwrap().state == PolicyState::Absent);
    assert_eq!(s.policy("p").unwrap().last_reload.as_ref().unwrap().outcome, ReloadOutcome::Unloaded);
    let unloaded_at = s.ticks;
    running.wait("ticks without a policy", |s| s.ticks > unloaded_at + 3);
    let (tx, rx) = std::sync::mpsc::channel();
    running.handle.rollback("p", move |r| tx.send(r).unwrap());
    let back = rx.recv().unwrap().expect("the rollback happens");
    assert_eq!(back.sha256, sha256(&good));
    assert_eq!(back.replaced, None);
    let s = running.wait("fair-share again", |s| s.policy("p").unwrap().state == PolicyState::Serving);
    running.wait("ticks on it", |t| t.ticks > s.ticks + 2);
    running.stop();
    let lines = setup.audit_lines();
    assert!(lines.iter().any(|l| l.active.is_none()), "ticks went on with no active policy");
    assert!(lines.last().unwrap().active.is_some());
}

#[test]
fn rollback_brings_back_the_previous_version_and_refuses_when_there_is_none() {
    let setup = Setup::new();
    let (v1, v2) = (variant("counter", 1), variant("counter", 2));
    setup.land("c", &v1);
    let running = Running::start(setup.config("1s", "100", &policy("c", "active")));
    running.wait("v1", |s| serving(s, "c").is_some());
    let rollback = |name: &str| {
        let (tx, rx) = std::sync::mpsc::channel();
        running.handle.rollback(name, move |r| tx.send(r).unwrap());
        rx.recv().unwrap()
    };
    assert!(rollback("c").unwrap_err().to_string().contains("no previous version"));
    assert!(rollback("nope").unwrap_err().to_string().contains("no policy named nope"));
    setup.land("c", &v2);
    running.wait("v2", |s| serving(s, "c").as_deref() == Some(&*sha256(&v2)));
    let back = rollback("c").unwrap();
    assert_eq!((back.sha256.as_str(), back.replaced.as_deref()), (&*sha256(&v1), Some(&*sha256(&v2))));
    let s = running.handle.board().get();
    assert_eq!(serving(&s, "c"), Some(sha256(&v1)));
    assert_eq!(s.policy("c").unwrap().previous_sha256, Some(sha256(&v2)));
    running.stop();
}

#[test]
fn a_changed_config_beside_the_component_is_a_new_version_and_a_broken_one_is_refused() {
    let setup = Setup::new();
    setup.land("c", &component("counter"));
    let running = Running::start(setup.config("1s", "100", &policy("c", "active")));
    running.wait("v1", |s| s.policy("c").is_some_and(|p| p.version == 1));
    std::fs::write(setup.policies().join("c.toml"), "step = 50\n").unwrap();
    let s = running.wait("the new config", |s| s.policy("c").unwrap().version == 2);
    assert_eq!(s.policy("c").unwrap().last_reload.as_ref().unwrap().outcome, ReloadOutcome::Swapped);
    std::fs::write(setup.policies().join("c.toml"), "step = [\n").unwrap();
    let s = running.wait("the refusal", |s| s.refused >= 1);
    let p = s.policy("c").unwrap();
    assert!(p.last_reload.as_ref().unwrap().detail.contains("c.toml is not valid TOML"), "{p:?}");
    assert_eq!(p.version, 2, "the version with the good config keeps serving");
    std::fs::write(setup.policies().join("c.toml"), "stride = 3\n").unwrap();
    let s = running.wait("the second refusal", |s| s.refused >= 2);
    let detail = &s.policy("c").unwrap().last_reload.as_ref().unwrap().detail;
    assert!(detail.contains("unknown field `stride`"), "{detail}");
    running.stop();
    // With step 50 the caps are 1000 + (n mod 8) × 50, never above 1350 millicores.
    let lines = setup.audit_lines();
    let last = lines.last().unwrap().active.as_ref().unwrap();
    assert!(
        last.actions
            .iter()
            .all(|a| matches!(a.kind, wasmsched::bindings::wit::ActionKind::SetCpu(Some(m)) if m <= 1350))
    );
}

#[test]
fn a_polled_folder_notices_a_file_copied_in_with_an_older_time_and_the_same_second() {
    let setup = Setup::new();
    let (v1, v2, v3) = (variant("fair-share", 1), variant("fair-share", 2), variant("fair-share", 3));
    setup.land("fs", &v1);
    let mut config = setup.config("100ms", "1", &policy("fs", "active"));
    config.reload.poll = Some(std::time::Duration::from_millis(100));
    let running = Running::start(config);
    running.wait("v1", |s| serving(s, "fs") == Some(sha256(&v1)));
    // As `tar` extracts it (what `kubectl cp` runs): the archive's time, 1970, kept.
    setup.overwrite("fs", &v2);
    let file = std::fs::File::options().write(true).open(setup.policies().join("fs.wasm")).unwrap();
    file.set_modified(std::time::UNIX_EPOCH).unwrap();
    running.wait("v2, though older by its time", |s| serving(s, "fs") == Some(sha256(&v2)));
    // Twice within one second of the file's time.
    setup.overwrite("fs", &v3);
    file.set_modified(std::time::UNIX_EPOCH).unwrap();
    running.wait("v3, with the same time as v2", |s| serving(s, "fs") == Some(sha256(&v3)));
    running.stop();
}
