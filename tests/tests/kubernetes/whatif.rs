//! What if, from a live run on the kit (issue 42): four real trainer pods of two kinds, queued
//! for our scheduler at staggered times, run to the end under a policy, recorded as `[record]
//! telemetry` records; the recording alone, replayed closed-loop under the same policy in the
//! simulator, must give the jobs' mean JCT (arrival to last epoch, as recorded) within 10 %: in
//! one run, or else in the median of up to three.
//! Their speeds rest on the CPU the kubelets measured: no calibration.

use std::time::Duration;

use wasmsched::budget::BudgetConfig;
use wasmsched::control::{self, Driver, LoopConfig, Policies, Tick};
use wasmsched::record::TelemetryRecorder;
use wasmsched::runtime::Runtime;
use wasmsched::runtime::supervise::{Fallback, Quarantine, Supervised};
use wasmsched::world::World;

use crate::cluster::{Cluster, TrainerPod, trainer_cluster_or_skip};
use crate::{backend, test_label};
use wasmsched_tests::common::{loaded, runtime};
use wasmsched_tests::live::every_job_came_and_went;
use wasmsched_tests::whatif::{assert_each_within_median, replayed_error};

/// The jobs: name, trainer arguments, arrival (seconds after the first). A two-threaded
/// learner and a one-threaded job that learns nothing, twice each, as the Docker check runs
/// them but twice as long: a kubelet reads a pod's CPU over 10 s windows, which a job of half a
/// minute spans too few of.
const JOBS: [(&str, &[&str], u64); 4] =
    [("learner-0", LEARNER, 0), ("flat-0", FLAT, 0), ("learner-1", LEARNER, 8), ("flat-1", FLAT, 16)];
const LEARNER: &[&str] =
    &["--epochs", "40", "--samples", "40000", "--hidden", "1024", "--threads", "2", "--lr", "0.02"];
const FLAT: &[&str] = &["--epochs", "100", "--samples", "40000", "--hidden", "512", "--threads", "1", "--lr", "0"];

/// The loop's tick, live and replayed.
const TICK: Duration = Duration::from_secs(1);

/// How far the replayed mean JCT may be from the recorded one.
const TOLERANCE: f64 = 0.10;

/// The most backend time one live run may take.
const LIMIT_MS: u64 = 300_000;

/// Creates the pods at their arrival times, asks the policy every tick, records every tick,
/// and stops once every job has come and gone.
struct Live<'a> {
    cluster: &'a Cluster,
    image: &'a str,
    label: &'a str,
    policy: &'a mut Supervised,
    created: usize,
    first_ms: Option<u64>,
    done: bool,
    recorder: TelemetryRecorder,
}

impl Driver for Live<'_> {
    fn boundary(&mut self, _rt: &Runtime, next_ms: u64) -> bool {
        assert!(next_ms <= LIMIT_MS, "the live run took longer than {LIMIT_MS} ms");
        let first = *self.first_ms.get_or_insert(next_ms);
        while let Some(&(name, args, arrival_s)) = JOBS.get(self.created) {
            if first + arrival_s * 1000 > next_ms {
                break;
            }
            let labels = [("metric", "accuracy")];
            // All on one node: the kit's two nodes are one machine's two cores, and a replay
            // would take them for two machines.
            let pod = TrainerPod { labels: &labels, node: Some("vm"), ..TrainerPod::new(name, self.label, args) };
            self.cluster.trainer(self.image, pod);
            self.created += 1;
        }
        !self.done
    }

    fn observed(
        &mut self,
        world: &World,
        _: Vec<wasmsched::backend::Endpoint>,
        _: Option<wasmsched::backend::Leadership>,
    ) {
        self.done = every_job_came_and_went(world, self.created, JOBS.len());
        self.recorder.observed(world);
    }

    fn policies(&mut self) -> Policies<'_> {
        Policies { active: Some(&mut *self.policy), shadows: Vec::new(), split: None }
    }

    fn record(&mut self, tick: Tick<'_>) {
        self.recorder.record(&tick).expect("the recording is written");
    }
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn live_runs_on_the_kit_replayed_from_their_recordings_give_their_mean_jct_within_ten_per_cent() {
    let (c, image, _serial) = trainer_cluster_or_skip!();
    let dir = tempfile::tempdir().unwrap();
    let policies = [("fifo", "{}"), ("flowcon", r#"{"interval-s": 4, "alpha": 0.005}"#)];
    assert_each_within_median(TOLERANCE, 3, &policies, |policy, config, attempt| {
        let label = test_label(&format!("whatif-{policy}-{attempt}"));
        let _sweep = c.sweep(&label);
        let path = dir.path().join(format!("{policy}-{attempt}.jsonl"));
        let mut supervised = Supervised::new(
            loaded(policy),
            config.into(),
            Default::default(),
            Fallback::KeepLimits,
            Quarantine::default(),
        );
        let mut live = Live {
            cluster: c,
            image: &image,
            label: &label,
            policy: &mut supervised,
            created: 0,
            first_ms: None,
            done: false,
            recorder: TelemetryRecorder::create(&path, TICK.as_millis() as u64, BudgetConfig::off()).unwrap(),
        };
        let mut k = backend(c, &label);
        let summary = control::drive(&mut k, &mut live, runtime(), &LoopConfig::unbudgeted(TICK));
        assert!(live.done, "{policy}: the loop ended before every job did: {summary:?}\n{}", c.describe(&label));
        // The kit's two nodes are one machine's cores: the replay has the node the jobs ran
        // on (a replay of both would give them twice the machine).
        let (error, table) = replayed_error(&path, JOBS.len(), policy, config, |n| n.name == "vm");
        eprintln!("{policy} on the kit, recording replayed ({:+.1} %):\n{table}", 100.0 * error);
        error
    });
}
