//! The simulator through the loop with real policy components.

use std::time::Duration;

use wasmsched::experiment::run::{PolicyChoice, RunOptions, simulate};
use wasmsched::scenario::Scenario;
use wasmsched::sim::SimConfig;

use wasmsched_tests::common::runtime;

fn demo() -> Scenario {
    Scenario::from_toml_str("demo", wasmsched::experiment::DEMO_SCENARIO).unwrap().with_default_targets()
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
        r.policy_call_ms = [0.0; 2];
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
    assert_eq!(r.jobs.len(), workload.workload.jobs.len());
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

/// A paper scenario from `scenarios/`, with its default targets.
fn scenario(name: &str) -> Scenario {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios").join(name);
    Scenario::load(&path, &Default::default()).unwrap().with_default_targets()
}

#[test]
fn every_published_policy_runs_as_a_component_on_its_paper_scenario_and_moves_its_figure() {
    use wasmsched::experiment::paper::Figure;
    let rt = runtime();
    let fair = PolicyChoice::resolve(rt, "fair-share").unwrap();
    for (file, name, figure) in [
        ("flowcon-paper.toml", "flowcon", Figure::BestJobJct),
        ("specon-paper.toml", "specon", Figure::Makespan),
        ("tradl-paper.toml", "tradl", Figure::BestJobT1),
        ("dqoes-paper.toml", "dqoes", Figure::SatisfiedRatio),
    ] {
        let workload = scenario(file);
        let base = simulate(rt, &fair, &workload, &options(0));
        let run = simulate(rt, &PolicyChoice::resolve(rt, name).unwrap(), &workload, &options(0));
        assert_eq!((run.fallbacks, run.rejected_actions), (0, 0), "{name}: every call served, every action valid");
        let value = figure.measure(&run, &base).unwrap_or_else(|| panic!("{name}: {figure:?} not measured"));
        let better = if figure == Figure::SatisfiedRatio { value > 1.0 } else { value < -0.05 };
        assert!(better, "{name}: {figure:?} = {value}");
    }
}

#[test]
fn tradl_delivers_each_job_once_at_t1_and_specon_migrates() {
    let rt = runtime();
    let tradl = simulate(rt, &PolicyChoice::resolve(rt, "tradl").unwrap(), &scenario("tradl-paper.toml"), &options(0));
    for job in &tradl.jobs {
        let t1 = job.targets_reached_s[0].unwrap_or_else(|| panic!("{} never reached T1", job.name));
        let delivered = job.delivered_s.unwrap_or_else(|| panic!("{} never delivered", job.name));
        // Delivered on the first call after T1 was reached: within one tick.
        assert!(delivered >= t1 && delivered <= t1 + 30.0 + 1e-6, "{}: T1 at {t1}, delivered at {delivered}", job.name);
    }
    let specon =
        simulate(rt, &PolicyChoice::resolve(rt, "specon").unwrap(), &scenario("specon-paper.toml"), &options(0));
    let migrations: u32 = specon.jobs.iter().map(|j| j.migrations).sum();
    assert!(migrations > 0 && specon.jobs.iter().all(|j| j.migrations <= 2), "{migrations} migrations");
}

#[test]
fn tiresias_on_pollux_workloads_1_to_4_stays_within_ten_percent_of_pollux_simulator() {
    use wasmsched::experiment::fidelity;
    let rows = fidelity::against_pollux(runtime(), 0..3, Default::default(), 2).unwrap();
    eprintln!("{}", fidelity::table(&rows));
    assert_eq!(rows.len(), 4);
    for r in &rows {
        assert!(r.ours_s.iter().all(|&s| s > 0.0), "{}: every run ended jobs", r.workload);
        assert!(
            r.within(),
            "{}: our mean JCT {:.0} s is {:+.1} % off Pollux's simulator's {:.0} s (tolerance ±{:.0} %)",
            r.workload,
            r.mean_s(),
            100.0 * r.error(),
            r.reference_s,
            100.0 * fidelity::TOLERANCE
        );
    }
}

#[test]
fn sias_table_4_reproduces_within_fifteen_percent_and_in_the_papers_order() {
    // The CI-sized run of `wasmsched fidelity sia-table-4`: every policy on all eight Philly
    // traces, one seed.
    use wasmsched::experiment::{batch, sia_tables};
    let rt = runtime();
    let plan = sia_tables::Plan::new(sia_tables::TABLE_4, &Default::default(), 0..1, Default::default()).unwrap();
    let rows = plan.rows(&batch::run(rt, &plan.tasks(rt).unwrap(), 2, &|_| {}));
    eprintln!("{}", sia_tables::text(&sia_tables::TABLE_4, &rows));
    assert_eq!(rows.len(), 4);
    for r in &rows {
        assert_eq!((r.unfinished, r.watched), (0, 0), "{}: every job ended, no rescue", r.label);
        assert!(r.gpu_h_per_job > 0.0 && r.p99_jct_h > r.avg_jct_h.0, "{r:?}");
        assert!(
            r.within(),
            "{}: average JCT {:.2} h, {:+.0} % off the published {} h",
            r.label,
            r.avg_jct_h.0,
            100.0 * r.error(),
            r.published.avg_jct_h.0
        );
    }
    assert!(sia_tables::same_order(&rows), "the policies rank otherwise than in the paper");
}

#[test]
fn a_policy_asking_never_to_be_called_again_is_asked_once_an_hour_and_the_host_does_not_overflow() {
    let rt = runtime();
    let mut choice = PolicyChoice::resolve(rt, "tiresias").unwrap();
    // 1e300 s crosses the contract as `next-call-ms` = u64::MAX.
    choice.config_json = r#"{"interval-s": 1e300}"#.into();
    let queue = Scenario::from_toml_str("gpu-queue", wasmsched::experiment::GPU_QUEUE_SCENARIO).unwrap();
    let r = simulate(rt, &choice, &queue, &options(0));
    // Asleep for an hour at a time while queued jobs fit, it has them started by the watchdog,
    // and is benched for it; every job finishes.
    assert!(r.rescues > 0, "{r:?}");
    assert!(r.benched.as_deref().is_some_and(|w| w.contains("left waiting")), "{:?}", r.benched);
    assert!(r.jobs.iter().all(|j| j.finish_s.is_some()) && r.unfinished.is_none(), "{:?}", r.unfinished);
    let hours = r.makespan_s / 3600.0;
    assert!(r.policy_calls >= 2, "asked again after the hour: {} calls", r.policy_calls);
    assert!(
        r.policy_calls as f64 <= hours + 2.0,
        "at most once an hour over {hours:.1} h, not every tick: {} calls",
        r.policy_calls
    );
}

/// Asks `first` until `swap_at_ms`, then `second`; notes when `second` is first asked.
struct Swap {
    first: wasmsched::runtime::supervise::Supervised,
    second: wasmsched::runtime::supervise::Supervised,
    swap_at_ms: u64,
    now_ms: u64,
    first_ask_after_swap_ms: Option<u64>,
}

impl wasmsched::control::Driver for Swap {
    fn boundary(&mut self, _rt: &wasmsched::runtime::Runtime, next_ms: u64) -> bool {
        self.now_ms = next_ms;
        next_ms <= self.swap_at_ms + 600_000
    }

    fn policies(&mut self) -> wasmsched::control::Policies<'_> {
        let active = if self.now_ms > self.swap_at_ms { &mut self.second } else { &mut self.first };
        wasmsched::control::Policies { active: Some(active), shadows: Vec::new(), split: None }
    }

    fn record(&mut self, tick: wasmsched::control::Tick<'_>) {
        if tick.asked && self.now_ms > self.swap_at_ms && self.first_ask_after_swap_ms.is_none() {
            self.first_ask_after_swap_ms = Some(self.now_ms);
        }
    }
}

#[test]
fn a_delay_asked_by_one_version_does_not_outlive_a_swap() {
    use wasmsched::runtime::supervise::{Fallback, Quarantine, Supervised};
    let rt = runtime();
    let supervised = |name: &str, config: &str| {
        let choice = PolicyChoice::resolve(rt, name).unwrap();
        Supervised::new(choice.policy, config.into(), Default::default(), Fallback::KeepLimits, Quarantine::default())
    };
    let queue = Scenario::from_toml_str("gpu-queue", wasmsched::experiment::GPU_QUEUE_SCENARIO).unwrap();
    let mut sim = wasmsched::sim::Simulator::new(&queue.workload, SimConfig::default());
    let mut driver = Swap {
        first: supervised("tiresias", r#"{"interval-s": 1e300}"#),
        second: supervised("fifo", "{}"),
        swap_at_ms: 300_000,
        now_ms: 0,
        first_ask_after_swap_ms: None,
    };
    let config = wasmsched::control::LoopConfig::unbudgeted(Duration::from_secs(30));
    wasmsched::control::drive(&mut sim, &mut driver, rt, &config);
    assert_eq!(
        driver.first_ask_after_swap_ms,
        Some(330_000),
        "the new version is asked on the first tick after the swap"
    );
}

#[test]
fn gacer_as_a_component_moves_both_its_figures_and_time_slicing_does_not() {
    use wasmsched::experiment::paper::Figure;
    let rt = runtime();
    let resolve = |spec| PolicyChoice::resolve(rt, spec).unwrap();
    let (fifo, gacer, unregulated) = (resolve("fifo"), resolve("gacer"), resolve("gacer:regulate=false"));
    let throughput = scenario("gacer-throughput.toml");
    let [base, run, sliced] = [&fifo, &gacer, &unregulated].map(|p| simulate(rt, p, &throughput, &options(0)));
    assert_eq!((run.fallbacks, run.rejected_actions), (0, 0), "every call served, every action valid");
    let vs_fifo = Figure::Throughput.measure(&run, &base).unwrap();
    let vs_sliced = Figure::Throughput.measure(&run, &sliced).unwrap();
    assert!(vs_fifo > 1.15 && vs_sliced > 1.1, "{vs_fifo:.2}x one job per GPU, {vs_sliced:.2}x time-sliced");

    let latency = scenario("gacer-latency.toml");
    let [base, run, sliced] = [&fifo, &gacer, &unregulated].map(|p| simulate(rt, p, &latency, &options(0)));
    assert_eq!((run.fallbacks, run.rejected_actions), (0, 0));
    assert_eq!((base.satisfied, run.satisfied, sliced.satisfied), (2, 2, 0), "services within their p99 target");
    assert!(run.mean_jct_s < base.mean_jct_s, "the trainers gain from sharing");
}

#[test]
fn gacer_protects_a_service_by_raising_its_share_and_at_last_moving_the_trainer() {
    // A BERT service (15 requests/s, p99 target 400 ms) is slowed beside an LM trainer more
    // than any share can help: its share rises to the maximum, then the trainer is moved.
    let text = r#"
        name = "protect"
        [[node]]
        name = "v100"
        cores = 32
        memory = "128GiB"
        gpus = 2
        gpu-memory = "16GiB"
        [[job]]
        name = "serve"
        model = "bert"
        kind = "inference"
        gpus = 1
        batch-size = 16
        request-rate = 15.0
        duration = "1h"
        qoe-target = 400.0
        [[job]]
        name = "lm"
        model = "deepspeech2"
        arrival = "1s"
        gpus = 1
        max-epochs = 8
        count = 3
        every = "1s"
        [budget]
        enabled = false
    "#;
    let workload = Scenario::from_toml_str("protect", text).unwrap();
    let rt = runtime();
    let run = simulate(rt, &PolicyChoice::resolve(rt, "gacer").unwrap(), &workload, &options(0));
    assert_eq!((run.fallbacks, run.rejected_actions), (0, 0));
    let serve = &run.jobs[0];
    assert_eq!(serve.satisfied, Some(true), "p99 {:?} ms, target 400 ms", serve.qoe);
    // lm-0 runs alone first (to be learnt); lm-1 joins the service and is moved away; lm-2
    // may later leave the three on the other GPU for the service's, once the service ends.
    let moved: Vec<&str> = run.jobs.iter().filter(|j| j.preemptions > 0).map(|j| j.name.as_str()).collect();
    assert!(moved.contains(&"lm-1") && !moved.contains(&"serve"), "the trainer beside the service moved: {moved:?}");
    assert!(run.jobs.iter().all(|j| j.jct_s.is_some()), "every job ends");
}
