//! The simulator through the loop with real policy components.

use std::time::Duration;

use wasmsched::sim::engine::SimConfig;
use wasmsched::sim::run::{PolicyChoice, RunOptions, simulate};
use wasmsched::sim::workload::Workload;

use crate::common::runtime;

fn demo() -> Workload {
    Workload::from_scenario_str("demo", wasmsched::sim::DEMO_SCENARIO).unwrap().with_default_targets()
}

fn options(seed: u64) -> RunOptions {
    RunOptions {
        sim: SimConfig { seed, ..SimConfig::default() },
        tick: Duration::from_secs(30),
        ..RunOptions::default()
    }
}

#[test]
fn the_same_seed_gives_the_same_run_bit_for_bit() {
    let rt = runtime();
    let choice = PolicyChoice::resolve(rt, "fair-share").unwrap();
    let json = |seed| {
        let mut r = simulate(rt, &choice, &demo(), &options(seed));
        r.wall_ms = 0.0;
        r.policy_time_ms = 0.0;
        serde_json::to_string(&r).unwrap()
    };
    assert_eq!(json(7), json(7));
    assert_ne!(json(7), json(8), "another seed perturbs the run");
}

#[test]
fn every_training_job_of_the_demo_finishes_and_reports_its_targets() {
    let rt = runtime();
    let choice = PolicyChoice::resolve(rt, "fair-share").unwrap();
    let workload = demo();
    let r = simulate(rt, &choice, &workload, &options(0));
    assert_eq!(r.jobs.len(), workload.jobs.len());
    for job in &r.jobs {
        let jct = job.jct_s.unwrap_or_else(|| panic!("{} never ended", job.name));
        assert!(jct > 0.0);
    }
    assert!(r.makespan_s >= r.jobs.iter().filter_map(|j| j.jct_s).fold(0.0, f64::max) - 1e-9);
    assert!(r.cpu_utilisation > 0.0 && r.cpu_utilisation <= 1.0 + 1e-9, "{}", r.cpu_utilisation);
    assert!(r.policy_calls > 0);
    let with_tiers = r.jobs.iter().filter(|j| !j.targets_reached_s.is_empty()).count();
    assert!(with_tiers > 0, "default targets are filled in");
}

#[test]
fn an_unknown_policy_name_lists_the_shipped_ones() {
    let err = PolicyChoice::resolve(runtime(), "flowkon").unwrap_err().to_string();
    assert!(err.contains("flowkon") && err.contains("fair-share"), "{err}");
}
