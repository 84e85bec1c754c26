//! Scheduling through the loop with real components: a 0.1.0 component served unchanged (its
//! queued jobs placed for it by the default placement), and the shipped schedulers on GPU
//! workloads.

use std::time::Duration;

use wasmsched::experiment::run::{PolicyChoice, RunOptions, simulate};
use wasmsched::scenario::Scenario;
use wasmsched::sim::SimConfig;
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

/// Three two-GPU jobs and one node of two GPUs: FIFO starts one and says why the others wait;
/// `status` shows the reasons while they wait, and the audit log writes them when they change.
#[test]
fn fifo_says_why_queued_jobs_wait_and_status_and_the_audit_log_show_it() {
    use wasmsched_tests::live::{Running, Setup, component};
    let setup = Setup::new();
    std::fs::write(
        setup.dir.path().join("workload.toml"),
        "name = \"waits\"\n[[node]]\nname = \"g\"\ncores = 16\nmemory = \"64GiB\"\ngpus = 2\ngpu-memory = \"16GiB\"\n\
         [[job]]\nname = \"big\"\nmodel = \"cifar10\"\ngpus = 2\nmax-epochs = 40\ncount = 3\n",
    )
    .unwrap();
    setup.land("fifo", &component("fifo"));
    let running = Running::start(setup.config("10s", "1000", "[policy.fifo]\nrole = \"active\"\n"));
    let status = running.wait("two jobs waiting with reasons", |s| s.pending.len() == 2);
    let reasons: Vec<&str> = status.pending.iter().map(|p| p.reason.as_str()).collect();
    assert_eq!(reasons[0], "2 GPUs asked, 0 free on the 1 nodes taking work", "{reasons:?}");
    assert!(reasons[1].starts_with("behind big-"), "{reasons:?}");
    let render = status.render();
    assert!(
        render.contains(&format!("pending {} (job {}): 2 GPUs asked", status.pending[0].name, status.pending[0].job))
    );
    running.wait("the workload's end", |s| s.ticks > 0 && !s.running);
    let said: Vec<Vec<wasmsched::bindings::wit::Pending>> =
        setup.audit_lines().into_iter().filter_map(|l| l.active?.pending).collect();
    assert!(said.len() >= 2 && said.len() < 10, "written when they change, not every tick: {}", said.len());
    assert_eq!(said[0].len(), 2, "two jobs wait at first");
    assert!(said.last().unwrap().is_empty(), "none waits at the end");
}

/// The same three jobs through `simulate`: each run's outcome keeps why a job waited, which the
/// report's job table shows.
#[test]
fn a_runs_outcomes_keep_why_each_job_waited() {
    let rt = runtime();
    let workload = Scenario::from_toml_str(
        "waits",
        "[[node]]\nname = \"g\"\ncores = 16\nmemory = \"64GiB\"\ngpus = 2\ngpu-memory = \"16GiB\"\n\
         [[job]]\nname = \"big\"\nmodel = \"cifar10\"\ngpus = 2\nmax-epochs = 4\ncount = 3\n",
    )
    .unwrap();
    let run = simulate(rt, &PolicyChoice::resolve(rt, "fifo").unwrap(), &workload, &options());
    let why: Vec<Option<&str>> = run.jobs.iter().map(|j| j.pending.as_deref()).collect();
    assert_eq!(why[0], None, "the first started at once");
    assert!(why[1].is_some_and(|w| w.starts_with("2 GPUs asked, 0 free")), "{why:?}");
    assert!(why[2].is_some_and(|w| w.starts_with("2 GPUs asked") || w.starts_with("behind big-")), "{why:?}");
    use wasmsched::report::{Compared, write_html};
    let comparison = wasmsched::experiment::batch::comparison(&workload, vec![run]);
    let dir = tempfile::tempdir().unwrap();
    let page =
        write_html("waits", &[Compared { comparison: &comparison, scenario: &workload, recorded: None }], dir.path())
            .unwrap();
    let html = std::fs::read_to_string(page).unwrap();
    assert!(html.contains("why it waited") && html.contains("2 GPUs asked, 0 free"), "the report's job table says why");
}
