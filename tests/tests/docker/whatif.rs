//! What if, from a live run (issue 42): four real training containers of two kinds run to the
//! end on this engine under a policy, recorded as `[record] telemetry` records; the recording
//! alone, replayed closed-loop under the same policy in the simulator, must give the jobs'
//! mean JCT (arrival to last epoch, as recorded) within 10 %: in one run, or else in the
//! median of up to three. The speeds rest on what the jobs ran (their CPU per epoch, as the
//! engine measured it): no calibration.

use crate::engine::trainer_engine_or_skip;
use crate::fidelity::{POLICIES, run_live};
use wasmsched_tests::whatif::{replayed_error, within_median};

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
        let judged = within_median(TOLERANCE, 3, |attempt| {
            let path = dir.path().join(format!("{policy}-{attempt}.jsonl"));
            run_live(e, policy, config, Some(&path));
            let (error, table) = replayed_error(&path, 4, policy, config, |_| true);
            eprintln!("{policy}, live recording replayed ({:+.1} %):\n{table}", 100.0 * error);
            error
        });
        if let Err(errors) = judged {
            misses.push(format!(
                "{policy}: {:?}",
                errors.iter().map(|e| format!("{:+.1} %", 100.0 * e)).collect::<Vec<_>>()
            ));
        }
    }
    assert!(
        misses.is_empty(),
        "replayed mean JCTs off by more than {:.0} % in the median: {misses:?}",
        100.0 * TOLERANCE
    );
}
