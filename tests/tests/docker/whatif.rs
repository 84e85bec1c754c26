//! What if, from a live run (issue 42): four real training containers of two kinds run to the
//! end on this engine under a policy, recorded as `[record] telemetry` records; the recording
//! alone, replayed closed-loop under the same policy in the simulator, must give the jobs'
//! mean JCT (arrival to last epoch, as recorded) within 10 %. The speeds rest on what the
//! jobs ran (their CPU per epoch, as the engine measured it): no calibration.

use std::time::Duration;

use wasmsched::backend::sim::SimConfig;
use wasmsched::experiment::run::{PolicyChoice, RunOptions, simulate};
use wasmsched::whatif::{Recorded, Speed};

use crate::engine::trainer_engine_or_skip;
use crate::fidelity::{POLICIES, run_live};
use wasmsched_tests::common::{loaded, runtime};

/// How far the replayed mean JCT may be from the recorded one.
const TOLERANCE: f64 = 0.10;

#[test]
#[cfg_attr(
    not(live_docker),
    ignore = "needs a Docker Engine: `.ci/docker-engine start`, export WASMSCHED_DOCKER=<its endpoint>"
)]
fn live_runs_replayed_from_their_recordings_give_their_mean_jct_within_ten_per_cent() {
    let (e, _serial) = trainer_engine_or_skip!();
    let dir = tempfile::tempdir().unwrap();
    let mut misses = Vec::new();
    for (policy, config) in [("fifo", "{}"), POLICIES[1]] {
        let path = dir.path().join(format!("{policy}.jsonl"));
        run_live(e, policy, config, Some(&path));
        let recorded = Recorded::open(&path).unwrap();
        let (scenario, replay) = recorded.scenario().unwrap();
        assert_eq!(replay.jobs.len(), 4, "{replay:?}");
        for job in &replay.jobs {
            assert!(matches!(job.speed, Some(Speed::Profile { .. })), "{policy}: each job's own profile: {job:?}");
            assert!(job.recorded_jct_s.is_some() && !job.unfinished, "{policy}: every job ended: {job:?}");
        }
        let choice = PolicyChoice { label: policy.into(), config_json: config.into(), policy: loaded(policy) };
        let options = RunOptions {
            sim: SimConfig::default(),
            tick: Duration::from_millis(recorded.tick_ms),
            ..RunOptions::default()
        };
        let run = simulate(runtime(), &choice, &scenario, &options);
        let recorded_mean = replay.jobs.iter().filter_map(|j| j.recorded_jct_s).sum::<f64>() / replay.jobs.len() as f64;
        let replayed_mean = run.jobs.iter().map(|j| j.jct_s.expect("every job ends")).sum::<f64>() / 4.0;
        let error = replayed_mean / recorded_mean - 1.0;
        let versus = replay.versus(&wasmsched::experiment::batch::comparison(&scenario, vec![run]));
        eprintln!("{policy}, live recording replayed ({:+.1} %):\n{}", 100.0 * error, replay.table(&versus, 10));
        if error.abs() > TOLERANCE {
            misses.push(format!("{policy}: recorded {recorded_mean:.1} s, replayed {replayed_mean:.1} s"));
        }
    }
    assert!(misses.is_empty(), "replayed mean JCTs off by more than {:.0} %: {misses:?}", 100.0 * TOLERANCE);
}
