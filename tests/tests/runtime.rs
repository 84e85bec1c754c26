//! The runtime with a good policy: the cache, state handoff, and the cost rule.

use wasmsched::runtime::{Limits, Runtime, RuntimeConfig};
use wasmsched::world::{JobId, sample};

use wasmsched_tests::common::{cache_dir, loaded, runtime};

#[test]
fn a_second_load_of_the_same_file_comes_from_the_cache() {
    let bytes = std::fs::read(wasmsched_test_artifacts::path("fair-share")).unwrap();
    let first = runtime().load("fair-share-cache-test", &bytes).unwrap();
    let second = runtime().load("fair-share-cache-test", &bytes).unwrap();
    assert_eq!(first.digest(), second.digest());
    assert!(second.cache_hit(), "the second load must hit the cache");
    assert!(cache_dir().read_dir().unwrap().any(|e| e.unwrap().path().extension().is_some_and(|x| x == "cwasm")));
}

#[test]
fn a_corrupt_cache_entry_is_compiled_again() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::new(RuntimeConfig { cache_dir: Some(dir.path().into()), ..RuntimeConfig::default() }).unwrap();
    let bytes = std::fs::read(wasmsched_test_artifacts::path("fair-share")).unwrap();
    rt.load("fs", &bytes).unwrap();
    for entry in dir.path().read_dir().unwrap() {
        std::fs::write(entry.unwrap().path(), b"not a compiled component").unwrap();
    }
    let again = rt.load("fs", &bytes).expect("a corrupt entry is replaced, not fatal");
    assert!(!again.cache_hit());
    assert!(rt.load("fs", &bytes).unwrap().cache_hit());
}

#[test]
fn fair_share_lifts_limits_through_the_component() {
    let mut world = sample::world(1, 3, 2);
    world.state_mut(JobId(1)).unwrap().cpu_limit_millicores = Some(1500);
    let mut instance = loaded("fair-share").instantiate(runtime(), Limits::default(), "{}", None).unwrap();
    let d = instance.decide(&world).unwrap();
    assert_eq!(d.actions.len(), 1);
    assert_eq!(d.actions[0].job, 1);
    // Nothing changed: nothing to do, and nothing crossed but numbers.
    world.state_mut(JobId(1)).unwrap().cpu_limit_millicores = None;
    assert!(instance.decide(&world).unwrap().actions.is_empty());
}

#[test]
fn fair_share_refuses_unknown_config_keys_through_the_component() {
    let err = loaded("fair-share").instantiate(runtime(), Limits::default(), r#"{"alpha": 0.1}"#, None).err().unwrap();
    assert!(err.to_string().contains("unknown field `alpha`"), "{err}");
}

#[test]
fn fuel_gives_the_same_cost_for_the_same_snapshot() {
    let rt = Runtime::new(RuntimeConfig {
        fuel: true,
        cache_dir: Some(cache_dir().join("fuel")),
        ..RuntimeConfig::default()
    })
    .unwrap();
    let bytes = std::fs::read(wasmsched_test_artifacts::path("fair-share")).unwrap();
    let policy = rt.load("fair-share", &bytes).unwrap();
    let cost = || {
        let world = sample::world(2, 50, 5);
        let mut instance = policy.instantiate(&rt, Limits::default(), "{}", None).unwrap();
        instance.decide(&world).unwrap();
        instance.last_fuel()
    };
    let (a, b) = (cost(), cost());
    assert!(a > 0, "fuel is counted");
    assert_eq!(a, b, "the same call on the same snapshot burns the same fuel");
}
