//! Shadow policies: the same snapshots as the active one, decisions recorded and compared,
//! never applied.

use wasmsched_tests::live::{Running, Setup, component, serving};

#[test]
fn a_shadow_is_compared_with_the_active_policy_and_never_applied() {
    let setup = Setup::new();
    setup.land("fs", &component("fair-share"));
    setup.land("twin", &component("fair-share"));
    setup.land("counter", &component("counter"));
    let tables = "[policy.fs]\nrole = \"active\"\ndeadline = \"2s\"\n\
                  [policy.twin]\nrole = \"shadow\"\ndeadline = \"2s\"\n\
                  [policy.counter]\nrole = \"shadow\"\ndeadline = \"2s\"\n";
    let running = Running::start(setup.config("1s", "100", tables));
    running.wait("all three", |s| ["fs", "twin", "counter"].iter().all(|p| serving(s, p).is_some()));
    let s = running
        .wait("twenty comparisons", |s| s.policy("counter").and_then(|p| p.shadow).is_some_and(|a| a.compared >= 20));
    running.stop();

    let twin = s.policy("twin").unwrap().shadow.unwrap();
    assert!(twin.compared >= 20);
    assert_eq!(twin.rate(), 1.0, "the same policy agrees with itself: {twin:?}");
    assert_eq!(twin.cpu_diff_max_millicores, 0);
    let counter = s.policy("counter").unwrap().shadow.unwrap();
    assert_eq!(counter.rate(), 0.0, "the counter caps every job, fair-share does not: {counter:?}");
    assert!(counter.mean_cpu_diff_millicores() > 0.0);

    let lines = setup.audit_lines();
    for l in &lines {
        let active = l.active.as_ref().unwrap();
        // Had the counter's caps been applied, fair-share would be lifting them.
        assert!(active.actions.is_empty(), "tick {}: a shadow's limits reached the world: {active:?}", l.tick);
        assert_eq!(l.shadows.len(), 2);
        let c = l.shadows.iter().find(|d| d.policy == "counter").unwrap();
        assert!(!c.actions.is_empty());
        assert_eq!(c.agrees, Some(false));
    }
}
