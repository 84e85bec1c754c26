//! What the live what-if checks share (`tests/docker/whatif.rs`, `tests/kubernetes/whatif.rs`):
//! a live run's recording replayed under its own policy, and the verdict over attempts.

use std::path::Path;
use std::time::Duration;

use wasmsched::calibrate::fit::median;
use wasmsched::experiment::batch;
use wasmsched::experiment::run::{PolicyChoice, RunOptions, simulate};
use wasmsched::sim::SimConfig;
use wasmsched::sim::workload::NodeSpec;
use wasmsched::whatif::{Recorded, Speed};

use crate::common::{loaded, runtime};

/// The recording at `path` of `jobs` live trainer jobs under `policy` (`config`), replayed
/// under the same policy on the recorded nodes `keep` keeps: the mean JCT's relative error,
/// replayed against recorded, and the replay's table. Every job must have ended in the
/// recording and be replayed at a profile of its own.
pub fn replayed_error(
    path: &Path,
    jobs: usize,
    policy: &str,
    config: &str,
    keep: impl Fn(&NodeSpec) -> bool,
) -> (f64, String) {
    let recorded = Recorded::open(path).unwrap();
    let (mut scenario, replay) = recorded.scenario().unwrap();
    scenario.workload.nodes.retain(keep);
    assert_eq!(replay.jobs.len(), jobs, "{replay:?}");
    for job in &replay.jobs {
        assert!(matches!(job.speed, Some(Speed::Profile { .. })), "{policy}: each job's own profile: {job:?}");
        assert!(job.recorded_jct_s.is_some() && !job.unfinished, "{policy}: every job ended: {job:?}");
    }
    let choice = PolicyChoice { label: policy.into(), config_json: config.into(), policy: loaded(policy) };
    let tick = Duration::from_millis(recorded.tick_ms);
    let run = simulate(
        runtime(),
        &choice,
        &scenario,
        &RunOptions { sim: SimConfig::default(), tick, ..RunOptions::default() },
    );
    let n = jobs as f64;
    let recorded_mean = replay.jobs.iter().filter_map(|j| j.recorded_jct_s).sum::<f64>() / n;
    let replayed_mean = run.jobs.iter().map(|j| j.jct_s.expect("every job ends in the replay")).sum::<f64>() / n;
    let versus = replay.versus(&batch::comparison(&scenario, vec![run]));
    (replayed_mean / recorded_mean - 1.0, replay.table(&versus, jobs))
}

/// Runs `attempt` (which returns a relative error) until the median of the errors so far is
/// within `tolerance`, `attempts` times at most: a live run on a shared machine now and then
/// stalls for seconds, which one run alone would take for a fault of the replay; a replay
/// that drifts moves the median with it. Err with every error when the median stays out.
pub fn within_median(tolerance: f64, attempts: u32, mut attempt: impl FnMut(u32) -> f64) -> Result<Vec<f64>, Vec<f64>> {
    let mut errors = Vec::new();
    for n in 1..=attempts {
        errors.push(attempt(n));
        if median(&errors).is_some_and(|m| m.abs() <= tolerance) {
            return Ok(errors);
        }
    }
    Err(errors)
}

/// For each of `policies` (name, config), [`within_median`] of `attempt` (given the policy, its
/// config and the attempt's number, from 1); panics naming every policy whose median stays out
/// of `tolerance`, with its errors.
pub fn assert_each_within_median(
    tolerance: f64,
    attempts: u32,
    policies: &[(&str, &str)],
    mut attempt: impl FnMut(&str, &str, u32) -> f64,
) {
    let mut misses = Vec::new();
    for &(policy, config) in policies {
        if let Err(errors) = within_median(tolerance, attempts, |n| attempt(policy, config, n)) {
            let errors: Vec<String> = errors.iter().map(|e| format!("{:+.1} %", 100.0 * e)).collect();
            misses.push(format!("{policy}: {errors:?}"));
        }
    }
    assert!(
        misses.is_empty(),
        "replayed mean JCTs off by more than {:.0} % in the median: {misses:?}",
        100.0 * tolerance
    );
}
