//! Scheduling through the loop with real components: a 0.1.0 component served unchanged (its
//! queued jobs placed for it by the default placement), and the shipped schedulers on GPU
//! workloads.

use std::time::Duration;

use wasmsched::backend::sim::SimConfig;
use wasmsched::experiment::run::{PolicyChoice, RunOptions, simulate};
use wasmsched::scenario::Scenario;
use wasmsched_tests::common::runtime;

/// One node with two GPUs; four one-GPU jobs arrive together, and a CPU job after them: two
/// must wait for a GPU.
const CONTENDED: &str = r#"
name = "contended"
[[node]]
name = "g"
cores = 16
memory = "64GiB"
gpus = 2
gpu-memory = "16GiB"
[[job]]
name = "gpu"
model = "cifar10"
gpus = 1
max-epochs = 6
count = 4
[[job]]
name = "cpu"
model = "ncf"
arrival = "10s"
max-epochs = 4
"#;

fn options() -> RunOptions {
    RunOptions {
        sim: SimConfig { seed: 1, ..SimConfig::default() },
        tick: Duration::from_secs(30),
        ..RunOptions::default()
    }
}

#[test]
fn a_component_of_the_older_contract_runs_unchanged_and_its_queued_jobs_are_placed_for_it() {
    let rt = runtime();
    let path = wasmsched_test_artifacts::path("contract-0-1");
    let old = PolicyChoice::resolve(rt, path).unwrap();
    assert_eq!(old.policy.contract(), wasmsched::bindings::Contract::V0_1);
    let workload = Scenario::from_toml_str("contended", CONTENDED).unwrap();
    let run = simulate(rt, &old, &workload, &RunOptions { timeline: true, ..options() });
    // The fixture fails the call if it is shown a job twice or a record of a job it does not
    // know, so no fallback also means the adapter hid the queue.
    assert_eq!((run.fallbacks, run.rejected_actions), (0, 0), "every call served, every action valid");
    assert!(run.policy_calls > 0);
    for job in &run.jobs {
        assert!(job.jct_s.is_some(), "{} never ended", job.name);
    }
    let waited: Vec<f64> = run.jobs.iter().filter_map(|j| j.waited_s).collect();
    assert!(waited.iter().filter(|&&w| w > 0.0).count() >= 2, "two GPU jobs waited for a GPU: {waited:?}");
    let capped = run.timeline.iter().flat_map(|t| &t.jobs).filter(|j| j.cpu_limit == Some(1.5)).count();
    assert!(capped > 0, "its caps were applied");
}

#[test]
fn fifo_and_tiresias_run_as_components_on_a_pollux_workload_and_tiresias_cuts_mean_jct() {
    let rt = runtime();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/workloads/workload-1.csv");
    let workload = Scenario::load(&path, &Default::default()).unwrap();
    let run = |name: &str| simulate(rt, &PolicyChoice::resolve(rt, name).unwrap(), &workload, &options());
    let (fifo, tiresias) = (run("fifo"), run("tiresias"));
    for r in [&fifo, &tiresias] {
        assert_eq!((r.fallbacks, r.rejected_actions), (0, 0), "{}: every call served, every action valid", r.policy);
        assert!(r.jobs.iter().all(|j| j.jct_s.is_some()), "{}: every job ended", r.policy);
    }
    let preemptions = |r: &wasmsched::experiment::run::RunReport| r.jobs.iter().map(|j| j.preemptions).sum::<u32>();
    assert_eq!(preemptions(&fifo), 0, "FIFO never preempts");
    assert!(preemptions(&tiresias) > 0, "Tiresias preempts jobs that have had their GPU time");
    assert!(
        tiresias.mean_jct_s < 0.8 * fifo.mean_jct_s,
        "least attained service first: mean JCT {} against FIFO's {}",
        tiresias.mean_jct_s,
        fifo.mean_jct_s
    );
}
