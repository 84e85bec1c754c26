//! Replicas of the host, on the simulator: a backend that stands by until a given tick and
//! keeps the policies' states in memory, as the Kubernetes backend keeps them in ConfigMaps
//! (`tests/tests/kubernetes/replicas.rs` has the real thing). A standby asks no policy and
//! applies nothing; the replica that takes the lead starts each policy from the kept state,
//! through the hot swap's path when another version saved it, afresh when it is refused.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use wasmsched::backend::{ApplyError, Backend, Checkpoint, DefaultPlacement, Leadership, Placer, Replicas};
use wasmsched::bindings::wit;
use wasmsched::config::HostConfig;
use wasmsched::scenario::Scenario;
use wasmsched::status::{ReloadOutcome, Status};
use wasmsched::world::World;

use wasmsched_tests::live::{Running, Setup, component, sha256, variant};

/// The states kept "in the cluster": shared by every replica of a test.
type Store = Arc<Mutex<Vec<Checkpoint>>>;

/// The simulator, standing by until its `lead_from`th observation.
struct Replica {
    inner: Box<dyn Backend + Send>,
    lead_from: u64,
    observed: u64,
    store: Store,
    stepped_down: bool,
    /// Actions handed to `apply` while this replica did not lead.
    applied_standing_by: Arc<AtomicU64>,
    /// Keep the states every this many ticks.
    every: u64,
}

impl Replica {
    fn on(config: &HostConfig, lead_from: u64, store: &Store) -> (Replica, Arc<AtomicU64>) {
        let built = config.backend.build(Scenario::load_workload).unwrap();
        let applied = Arc::new(AtomicU64::new(0));
        let replica = Replica {
            inner: built.backend,
            lead_from,
            observed: 0,
            store: store.clone(),
            stepped_down: false,
            applied_standing_by: applied.clone(),
            every: 2,
        };
        (replica, applied)
    }
}

impl Backend for Replica {
    fn set_placer(&mut self, by: Placer) {
        self.inner.set_placer(by);
    }
    fn observe(&mut self, world: &mut World, until_ms: u64) -> bool {
        self.observed += 1;
        self.inner.observe(world, until_ms)
    }
    fn apply(&mut self, actions: &[wit::Action], world: &mut World) -> Vec<ApplyError> {
        if !Backend::leads(self) {
            self.applied_standing_by.fetch_add(actions.len() as u64, Ordering::Relaxed);
        }
        self.inner.apply(actions, world)
    }
    fn placement(&mut self) -> Option<&mut dyn DefaultPlacement> {
        self.inner.placement()
    }
    fn status(&self) -> Option<&dyn wasmsched::backend::Status> {
        self.inner.status()
    }
    fn replicas(&self) -> Option<&dyn Replicas> {
        Some(self)
    }
    fn replicas_mut(&mut self) -> Option<&mut dyn Replicas> {
        Some(self)
    }
}

impl Replicas for Replica {
    fn leadership(&self) -> Leadership {
        let leading = !self.stepped_down && self.observed >= self.lead_from;
        Leadership { identity: "replica".into(), leading, ..Leadership::default() }
    }
    fn keep_every(&self) -> u64 {
        self.every
    }
    fn keep(&mut self, checkpoints: &[Checkpoint]) {
        *self.store.lock().unwrap() = checkpoints.to_vec();
    }
    fn kept(&mut self) -> Vec<Checkpoint> {
        self.store.lock().unwrap().clone()
    }
    fn step_down(&mut self) {
        self.stepped_down = true;
    }
}

const COUNTER: &str = "[policy.counter]\nrole = \"active\"\ndeadline = \"2s\"\n";

/// The counter's call numbers in a replica's audit log, one per decision.
fn calls(setup: &Setup) -> Vec<u64> {
    setup
        .audit_lines()
        .iter()
        .filter_map(|l| l.active.as_ref()?.actions.first()?.reason.strip_prefix("call ")?.parse().ok())
        .collect()
}

fn restored(s: &Status) -> Option<String> {
    let reload = s.policy("counter")?.last_reload.clone()?;
    (reload.outcome == ReloadOutcome::Restored).then_some(reload.detail)
}

/// A replica of `setup` on `store` that leads from its `lead_from`th observation, run until
/// its counter has decided `decisions` times; its audit's call numbers and the restore's
/// detail, if any.
fn run(setup: &Setup, store: &Store, lead_from: u64, decisions: u64) -> (Vec<u64>, Option<String>) {
    let config = setup.config("1s", "100", COUNTER);
    let (replica, applied) = Replica::on(&config, lead_from, store);
    let running = Running::start_on(config, Box::new(replica));
    let status = running.wait("decisions", |s| s.decisions >= decisions);
    assert!(status.ticks >= lead_from, "{status:?}");
    running.stop();
    assert_eq!(applied.load(Ordering::Relaxed), 0, "a standby applied nothing");
    (calls(setup), restored(&status))
}

#[test]
fn a_standby_asks_nothing_and_the_next_leader_goes_on_from_the_state_kept() {
    let store = Store::default();
    // The first leader decides, keeps its state every two ticks and once more as it stops.
    let first = Setup::new();
    first.land("counter", &component("counter"));
    let (led, _) = run(&first, &store, 0, 5);
    let last = *led.last().unwrap();
    assert_eq!(led, (1..=last).collect::<Vec<_>>());
    let kept = store.lock().unwrap().clone();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!((kept[0].policy.as_str(), &kept[0].sha256), ("counter", &sha256(&component("counter"))));

    // The next stands by for six observations, asking nothing, then goes on from the count.
    let second = Setup::new();
    second.land("counter", &component("counter"));
    let (led, detail) = run(&second, &store, 6, 3);
    assert_eq!(led.first(), Some(&(last + 1)), "the count goes on: {led:?}");
    let detail = detail.expect("the restore shows as the policy's last reload");
    assert!(detail.contains("restarted from its own state"), "{detail}");

    // Another version takes the state as a hot swap hands it on.
    let third = Setup::new();
    let v2 = variant("counter", 2);
    third.land("counter", &v2);
    let before = store.lock().unwrap()[0].state.clone();
    let (led, detail) = run(&third, &store, 1, 2);
    assert!(led[0] > 1, "{led:?}");
    assert!(detail.unwrap().contains(&format!("version {}'s state", &sha256(&component("counter"))[..12])));
    assert_ne!(store.lock().unwrap()[0].state, before, "the new leader keeps its own state");
    assert_eq!(store.lock().unwrap()[0].sha256, sha256(&v2));
}

#[test]
fn a_kept_state_the_policy_refuses_or_too_large_to_carry_starts_it_afresh() {
    let digest = sha256(&component("counter"));
    for (state, says) in [
        (b"not the counter's state".to_vec(), "invalid saved state"),
        (vec![0; (16 << 20) + 1], "over the 16777216 a state may carry"),
    ] {
        let checkpoint = Checkpoint {
            policy: "counter".into(),
            sha256: digest.clone(),
            version: 1,
            tick: 9,
            saved_unix_ms: 0,
            state,
            left: Vec::new(),
        };
        let store = Store::new(Mutex::new(vec![checkpoint]));
        let setup = Setup::new();
        setup.land("counter", &component("counter"));
        let (led, detail) = run(&setup, &store, 1, 2);
        assert_eq!(led.first(), Some(&1), "afresh: {led:?}");
        let detail = detail.unwrap();
        assert!(detail.contains(says) && detail.contains("started afresh"), "{detail}");
    }
}

#[test]
fn a_swap_and_a_rollback_keep_the_state_at_once_and_a_state_never_goes_back_to_a_version_it_left() {
    let (v1, v2) = (component("counter"), variant("counter", 2));
    let store = Store::default();
    let setup = Setup::new();
    setup.land("counter", &v1);
    let config = setup.config("1s", "100", COUNTER);
    let (mut replica, _) = Replica::on(&config, 0, &store);
    replica.every = 1_000_000;
    let running = Running::start_on(config, Box::new(replica));
    running.wait("decisions", |s| s.decisions >= 3);
    let kept = |sha: &str| store.lock().unwrap().first().is_some_and(|c| c.sha256 == sha);
    let wait_kept = |sha: &str| {
        let started = std::time::Instant::now();
        while !kept(sha) {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "no state of {sha} kept: {:?}",
                store.lock().unwrap()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    // The swap keeps v2's state at once (the cadence here is a million ticks), its line having left v1.
    setup.land("counter", &v2);
    running.wait("v2", |s| s.policy("counter").and_then(|p| p.sha256.as_deref()) == Some(&*sha256(&v2)));
    wait_kept(&sha256(&v2));
    let v2_kept = store.lock().unwrap()[0].clone();
    assert_eq!(v2_kept.left, vec![sha256(&v1)]);
    // So does the rollback: the state kept is v1's own again.
    let (tx, rx) = std::sync::mpsc::channel();
    running.handle.rollback("counter", move |r| tx.send(r.is_ok()).unwrap());
    assert!(rx.recv().unwrap(), "the rollback");
    wait_kept(&sha256(&v1));
    running.stop();

    // A leader serving v1 is not handed v2's state, whose line left v1: it starts afresh.
    *store.lock().unwrap() = vec![v2_kept];
    let next = Setup::new();
    next.land("counter", &v1);
    let (led, detail) = run(&next, &store, 1, 2);
    assert_eq!(led.first(), Some(&1), "afresh: {led:?}");
    let detail = detail.unwrap();
    assert!(detail.contains("had left this version") && detail.contains("started afresh"), "{detail}");
}
