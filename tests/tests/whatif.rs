//! What if (`wasmsched whatif`): a simulated run recorded, then replayed closed-loop from its
//! recording alone, under its own policy (which must give the recorded JCTs again) and under
//! others (which must agree with the same policies run on the workload itself).

use std::path::{Path, PathBuf};
use std::time::Duration;

use wasmsched::experiment::batch;
use wasmsched::experiment::run::{Comparison, PolicyChoice, RunOptions, RunReport, simulate, simulate_recorded};
use wasmsched::experiment::sia_tables::{MIN_DEADLINE, NO_STALL_RULE};
use wasmsched::record::TelemetryRecorder;
use wasmsched::runtime::Limits;
use wasmsched::scenario::{Cluster, GpuJobs, LoadOptions, Scenario};
use wasmsched::sim::SimConfig;
use wasmsched::watchdog::WatchdogConfig;
use wasmsched::whatif::{Recorded, Replay, Speed};

use wasmsched_tests::common::runtime;

fn load(path: &str, opts: &LoadOptions) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path);
    Scenario::load(&path, opts).unwrap().with_default_targets()
}

fn options(seed: u64, tick: Duration) -> RunOptions {
    // Sia solves an optimisation a round: the deadline Sia's tables give it.
    let limits = Limits { deadline: MIN_DEADLINE, ..Limits::default() };
    RunOptions { sim: SimConfig { seed, ..SimConfig::default() }, tick, limits, ..RunOptions::default() }
}

fn choice(policy: &str) -> PolicyChoice {
    PolicyChoice::resolve(runtime(), policy).unwrap()
}

/// `policy` on `scenario` with seed 0, recorded into `dir`: the run, and the recording's path.
fn record(scenario: &Scenario, policy: &str, tick: Duration, dir: &Path) -> (RunReport, PathBuf) {
    let path = dir.join(format!("{policy}.jsonl"));
    let mut recorder = TelemetryRecorder::create(&path, tick.as_millis() as u64, scenario.budget).unwrap();
    let (report, failed) = simulate_recorded(runtime(), &choice(policy), scenario, &options(0, tick), &mut recorder);
    assert!(failed.is_none(), "{failed:?}");
    (report, path)
}

/// The recording at `path` replayed under each of `policies` with `seeds` (the watchdog's stall
/// rule after `stall_after`): the replay's account and the runs.
fn replay_with(path: &Path, policies: &[&str], seeds: u64, stall_after: Duration) -> (Replay, Comparison) {
    let recorded = Recorded::open(path).unwrap();
    let tick = Duration::from_millis(recorded.tick_ms);
    let (mut scenario, replay) = recorded.scenario().unwrap();
    scenario.watchdog.stall_after = stall_after;
    let scenario = &scenario;
    let runs = policies
        .iter()
        .flat_map(|p| (0..seeds).map(move |seed| simulate(runtime(), &choice(p), scenario, &options(seed, tick))))
        .collect();
    (replay, batch::comparison(scenario, runs))
}

/// [`replay_with`] the watchdog's default stall rule.
fn replay(path: &Path, policies: &[&str], seeds: u64) -> (Replay, Comparison) {
    replay_with(path, policies, seeds, WatchdogConfig::default().stall_after)
}

/// Each job of `run` by name: its JCT there.
fn jct_of(run: &RunReport, name: &str) -> Option<f64> {
    run.jobs.iter().find(|j| j.name == name)?.jct_s
}

#[test]
fn a_simulated_run_replayed_under_its_own_policy_gives_every_recorded_jct_again() {
    let dir = tempfile::tempdir().unwrap();
    let gpu_queue = load("scenarios/gpu-queue.toml", &LoadOptions::default());
    // FIFO runs each job whole where it starts; Tiresias preempts and restarts them.
    for policy in ["fifo", "tiresias"] {
        let (original, path) = record(&gpu_queue, policy, Duration::from_secs(30), dir.path());
        let (replay, comparison) = replay(&path, &[policy], 1);
        let run = &comparison.runs[0];
        assert_eq!(replay.recorded_policy.as_deref(), Some(policy));
        assert_eq!(replay.jobs.len(), gpu_queue.workload.jobs.len(), "every job replayed");
        for (i, job) in replay.jobs.iter().enumerate() {
            assert!(matches!(job.speed, Some(Speed::Tables { reference: false, .. })), "{job:?}");
            let recorded = job.recorded_jct_s.unwrap_or_else(|| panic!("{policy}: {} ended: {job:?}", job.name));
            let ran = jct_of(&original, &job.name).unwrap();
            assert!((recorded - ran).abs() < 0.01, "{policy}: {} recorded {recorded}, ran {ran}", job.name);
            let replayed = run.jobs[i].jct_s.unwrap();
            assert!(
                (replayed - recorded).abs() < 0.01,
                "{policy}: {} recorded {recorded}, replayed {replayed}",
                job.name
            );
        }
    }
}

#[test]
fn sia_replayed_from_a_fifo_recording_of_its_workload_agrees_with_sia_run_on_the_workload() {
    let dir = tempfile::tempdir().unwrap();
    let opts =
        LoadOptions { cluster: Some(Cluster::Heterogeneous64), jobs: GpuJobs::Elastic, ..LoadOptions::default() };
    let mut workload = load("data/workloads/sia/philly/workload-1.csv", &opts);
    // As Sia's tables run it: a call a minute, no stall rule (its plan keeps jobs waiting).
    workload.watchdog.stall_after = NO_STALL_RULE;
    let tick = Duration::from_secs(60);
    let (fifo, path) = record(&workload, "fifo", tick, dir.path());
    let (replay, comparison) = replay_with(&path, &["fifo", "sia"], 1, NO_STALL_RULE);
    assert!(comparison.runs.iter().all(|r| r.benched.is_none() && r.fallbacks == 0), "{:?}", comparison.runs);
    let versus = replay.versus(&comparison);
    let mean = |v: &[Option<f64>]| v.iter().map(|j| j.unwrap()).sum::<f64>() / v.len() as f64;
    assert!((mean(&versus[0].jct_s) - fifo.mean_jct_s).abs() < 0.01, "FIFO replayed: {}", mean(&versus[0].jct_s));
    let sia_on_workload: Vec<f64> =
        (0..2).map(|seed| simulate(runtime(), &choice("sia"), &workload, &options(seed, tick)).mean_jct_s).collect();
    let expected = sia_on_workload.iter().sum::<f64>() / 2.0;
    let replayed = mean(&versus[1].jct_s);
    let error = replayed / expected - 1.0;
    eprintln!("Sia: replayed {replayed:.1} s, on the workload {expected:.1} s ({:+.1} %)", 100.0 * error);
    assert!(error.abs() < 0.10, "Sia replayed {replayed:.1} s, on the workload {expected:.1} s");
    assert!(
        replayed < 0.7 * fifo.mean_jct_s,
        "Sia still beats FIFO by far in the replay: {replayed} vs {}",
        fifo.mean_jct_s
    );
}

#[test]
fn cpu_jobs_and_a_service_replay_within_two_per_cent_of_their_recorded_jcts() {
    let dir = tempfile::tempdir().unwrap();
    let demo = load("scenarios/demo.toml", &LoadOptions::default());
    let (original, path) = record(&demo, "fair-share", Duration::from_secs(30), dir.path());
    let (replay, comparison) = replay(&path, &["fair-share"], 1);
    let service = replay.jobs.iter().find(|j| j.name == "qa-service").unwrap();
    assert!(
        matches!(service.speed, Some(Speed::Service { request_rate, duration_s }) if (request_rate - 40.0).abs() < 0.5 && (duration_s - 2700.0).abs() < 1.0),
        "{service:?}"
    );
    let cifar = replay.jobs.iter().find(|j| j.name == "cifar-a").unwrap();
    assert!(matches!(&cifar.speed, Some(Speed::ModelCpu { model, .. }) if model == "cifar10"), "{cifar:?}");
    let versus = replay.versus(&comparison);
    let replayed: f64 = versus[0].jct_s.iter().map(|j| j.unwrap()).sum::<f64>() / replay.jobs.len() as f64;
    let error = replayed / original.mean_jct_s - 1.0;
    assert!(error.abs() < 0.02, "replayed {replayed:.1} s, recorded {:.1} s", original.mean_jct_s);
    let table = replay.table(&versus, 40);
    assert!(
        table.contains("| recorded (fair-share) |") && table.contains("| qa-service | default | service"),
        "{table}"
    );
}

#[test]
fn a_job_still_running_when_the_recording_ends_is_finished_at_its_fitted_speed_and_marked() {
    let dir = tempfile::tempdir().unwrap();
    let gpu_queue = load("scenarios/gpu-queue.toml", &LoadOptions::default());
    let (_, path) = record(&gpu_queue, "fifo", Duration::from_secs(30), dir.path());
    // Cut the recording at ten hours: the long runs are still running, the short jobs queued.
    let cut = dir.path().join("cut.jsonl");
    let lines: Vec<String> = wasmsched::record::read_lines(&path).unwrap();
    let kept: Vec<&str> = lines
        .iter()
        .enumerate()
        .filter(|(i, l)| {
            *i == 0
                || serde_json::from_str::<serde_json::Value>(l).unwrap()["snapshot"]["time_ms"].as_u64().unwrap()
                    <= 36_000_000
        })
        .map(|(_, l)| l.as_str())
        .collect();
    std::fs::write(&cut, kept.join("\n") + "\n").unwrap();
    let (replay, comparison) = replay(&cut, &["fifo"], 1);
    let long = replay.jobs.iter().find(|j| j.name == "resnet50-0").unwrap();
    assert!(long.unfinished && long.recorded_jct_s.is_none() && long.epochs > 0, "{long:?}");
    assert!(matches!(long.speed, Some(Speed::Tables { .. })), "fitted to the epochs it ran: {long:?}");
    let short = replay.jobs.iter().find(|j| j.name == "cifar-0").unwrap();
    assert!(short.unfinished && short.epochs == 0, "{short:?}");
    assert!(matches!(&short.speed, Some(Speed::Assumed { from, .. }) if from.contains("median")), "{short:?}");
    // Both run to their ends in the replay: the long run its 24 epochs, the short its 60.
    let run = &comparison.runs[0];
    for name in ["resnet50-0", "cifar-0"] {
        let job = run.jobs.iter().find(|j| j.name == name).unwrap();
        assert!(job.jct_s.is_some(), "{name} ends in the replay: {job:?}");
    }
    assert_eq!(run.jobs.iter().find(|j| j.name == "resnet50-0").unwrap().epochs, 24);
    assert_eq!(run.jobs.iter().find(|j| j.name == "cifar-0").unwrap().epochs, 60);
}

#[test]
fn each_tenants_jobs_are_set_beside_the_recording_as_well_as_the_whole() {
    let dir = tempfile::tempdir().unwrap();
    let tenants = load("scenarios/tenants.toml", &LoadOptions::default());
    let (original, path) = record(&tenants, "fair-share", Duration::from_secs(30), dir.path());
    let (replay, comparison) = replay(&path, &["fair-share", "drf"], 1);
    let versus = replay.versus(&comparison);
    let means = replay.means(&versus);
    let mut names: Vec<&str> = tenants.tenants.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    let shown: Vec<&str> = means[1..].iter().map(|m| m.tenant.as_deref().unwrap()).collect();
    assert_eq!(shown, names, "every tenant, by name, after the whole");
    assert_eq!(means[0].jobs, means[1..].iter().map(|m| m.jobs).sum::<usize>());
    for m in &means[1..] {
        let tenant = m.tenant.as_deref().unwrap();
        let ran: Vec<f64> = original.jobs.iter().filter(|j| j.tenant == tenant).filter_map(|j| j.jct_s).collect();
        let expected = ran.iter().sum::<f64>() / ran.len() as f64;
        assert!((m.recorded_s - expected).abs() < 0.01, "{tenant}: recorded {} against {expected}", m.recorded_s);
    }
    let table = replay.table(&versus, 0);
    assert!(table.contains("| tenant | jobs | recorded | fair-share | drf |"), "{table}");
}
