//! What if, from a live run (issue 42): four real training containers of two kinds run to the
//! end on this engine under a policy, recorded as `[record] telemetry` records; the recording
//! alone, replayed closed-loop under the same policy in the simulator, must give the jobs'
//! mean JCT (arrival to last epoch, as recorded) within 10 %: in one run, or else in the
//! median of up to three. The speeds rest on what the jobs ran (their CPU per epoch, as the
//! engine measured it): no calibration.

use crate::engine::trainer_engine_or_skip;
use crate::fidelity::{POLICIES, run_live};
use wasmsched_tests::whatif::{assert_each_within_median, replayed_error};

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
    assert_each_within_median(TOLERANCE, 3, &[("fifo", "{}"), POLICIES[1]], |policy, config, attempt| {
        let path = dir.path().join(format!("{policy}-{attempt}.jsonl"));
        run_live(e, policy, config, Some(&path));
        let (error, table) = replayed_error(&path, 4, policy, config, |_| true);
        eprintln!("{policy}, live recording replayed ({:+.1} %):\n{table}", 100.0 * error);
        error
    });
}
