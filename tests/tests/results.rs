//! Results as data: `compare --json` and `sweep --json` follow docs/results.schema.json, the
//! CSVs have a row per run (or per point and seed), and a sweep's parallel runs give the same
//! figures as the same runs one by one.

use std::time::Duration;

use serde_json::Value;
use wasmsched::experiment::paper::{self, Figure};
use wasmsched::experiment::run::{Comparison, PolicyChoice, RunOptions, simulate};
use wasmsched::experiment::sweep::{self, Axis};
use wasmsched::results::{CompareResults, Results};
use wasmsched::runtime::Limits;
use wasmsched::scenario::Scenario;
use wasmsched::sim::SimConfig;

use wasmsched_tests::common::runtime;

fn flowcon_paper() -> Scenario {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/flowcon-paper.toml");
    Scenario::load(std::path::Path::new(path), &Default::default()).unwrap().with_default_targets()
}

fn options(seed: u64, timeline: bool) -> RunOptions {
    RunOptions {
        sim: SimConfig { seed, ..SimConfig::default() },
        tick: Duration::from_secs(30),
        timeline,
        ..Default::default()
    }
}

/// docs/results.schema.json, compiled.
fn schema() -> (boon::Schemas, boon::SchemaIndex) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/results.schema.json");
    let mut schemas = boon::Schemas::new();
    let index = boon::Compiler::new().compile(path, &mut schemas).expect("the schema is a valid JSON Schema");
    (schemas, index)
}

/// The validator's words when `json` does not follow the schema.
fn schema_errors(json: &Value) -> Option<String> {
    let (schemas, index) = schema();
    schemas.validate(json, index).err().map(|e| e.to_string())
}

/// Panics with the validator's words when `json` does not follow the schema.
fn assert_follows_schema(json: &Value) {
    if let Some(errors) = schema_errors(json) {
        panic!("the output breaks docs/results.schema.json:\n{errors}");
    }
}

#[test]
fn output_that_breaks_the_schema_is_caught() {
    let rt = runtime();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/demo.toml");
    let workload = Scenario::load(std::path::Path::new(path), &Default::default()).unwrap();
    let run = simulate(rt, &PolicyChoice::resolve(rt, "fifo").unwrap(), &workload, &options(0, false));
    let comparison = Comparison { workload: workload.name().to_string(), runs: vec![run] };
    let good = to_json(&Results::Compare(CompareResults::new(&comparison, &workload)));
    assert_eq!(schema_errors(&good), None);
    let mut no_version = good.clone();
    no_version.as_object_mut().unwrap().remove("version");
    assert!(schema_errors(&no_version).is_some_and(|e| e.contains("version")), "{:?}", schema_errors(&no_version));
    let mut wrong_kind = good;
    wrong_kind["kind"] = Value::from(7);
    assert!(schema_errors(&wrong_kind).is_some(), "a kind that is a number is caught");
}

fn to_json(results: &Results) -> Value {
    let mut bytes = Vec::new();
    results.write_json(&mut bytes).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

fn csv_rows(results: &Results) -> Vec<csv::StringRecord> {
    let mut bytes = Vec::new();
    results.write_csv(&mut bytes).unwrap();
    csv::Reader::from_reader(&bytes[..]).records().map(Result::unwrap).collect()
}

#[test]
fn a_comparison_against_a_config_variant_as_json_follows_the_schema() {
    let rt = runtime();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/gacer-throughput.toml");
    let workload = Scenario::load(std::path::Path::new(path), &Default::default()).unwrap();
    let runs = ["fifo", "gacer", "gacer:regulate=false"]
        .map(|spec| simulate(rt, &PolicyChoice::resolve(rt, spec).unwrap(), &workload, &options(0, false)));
    let comparison = Comparison { workload: workload.name().to_string(), runs: runs.to_vec() };
    let json = to_json(&Results::Compare(CompareResults::new(&comparison, &workload)));
    assert_follows_schema(&json);
    let measured: Vec<(&str, &str)> = json["paper"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["figure"].as_str().unwrap(), m["baseline"].as_str().unwrap()))
        .collect();
    assert_eq!(measured, [("throughput", "fifo"), ("throughput", "gacer:regulate=false")]);
}

#[test]
fn a_replay_of_a_recording_as_json_follows_the_schema() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let workload = flowcon_paper();
    let mut recorder = wasmsched::record::TelemetryRecorder::create(&path, 30_000, workload.budget).unwrap();
    let fair = PolicyChoice::resolve(rt, "fair-share").unwrap();
    let (_, failed) =
        wasmsched::experiment::run::simulate_recorded(rt, &fair, &workload, &options(0, false), &mut recorder);
    assert!(failed.is_none());
    let (scenario, replay) = wasmsched::whatif::Recorded::open(&path).unwrap().scenario().unwrap();
    let runs = ["fair-share", "flowcon"]
        .map(|p| simulate(rt, &PolicyChoice::resolve(rt, p).unwrap(), &scenario, &options(0, false)));
    let comparison = Comparison { workload: scenario.name().to_string(), runs: runs.to_vec() };
    let json = to_json(&Results::Compare(CompareResults::new(&comparison, &scenario).recorded(&replay)));
    assert_follows_schema(&json);
    let jobs = json["recorded"]["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), workload.workload.jobs.len());
    assert!(jobs.iter().all(|j| j["speed"]["source"] == "model-cpu" && j["recorded_jct_s"].is_number()), "{jobs:?}");
    assert_eq!(json["recorded"]["recorded_policy"], "fair-share");
}

#[test]
fn a_comparison_as_json_follows_the_schema_and_as_csv_has_a_row_per_run() {
    let rt = runtime();
    let workload = flowcon_paper();
    let mut runs = Vec::new();
    for policy in ["fair-share", "flowcon"] {
        let choice = PolicyChoice::resolve(rt, policy).unwrap();
        runs.extend((0..2).map(|seed| simulate(rt, &choice, &workload, &options(seed, seed == 0))));
    }
    let comparison = Comparison { workload: workload.name().to_string(), runs };
    let results = Results::Compare(CompareResults::new(&comparison, &workload));
    let json = to_json(&results);
    assert_follows_schema(&json);
    assert_eq!(
        (json["format"].as_str(), json["version"].as_u64(), json["kind"].as_str()),
        (Some("wasmsched-results"), Some(1), Some("compare"))
    );
    let objective = &json["objectives"][0];
    assert_eq!((objective["policy"].as_str(), objective["figure"].as_str()), (Some("flowcon"), Some("best-job-jct")));
    assert!(objective["mean"].as_f64().unwrap() < -0.05, "FlowCon's best job gains: {objective}");
    assert!(json["runs"][0]["timeline"][0]["jobs"].as_array().is_some_and(|j| !j.is_empty()));

    let rows = csv_rows(&results);
    assert_eq!(rows.len(), 4, "one row per run");
    assert_eq!((&rows[3][1], &rows[3][2]), ("flowcon", "1"));
    let makespan: f64 = rows[0][3].parse().unwrap();
    assert_eq!(makespan, comparison.runs[0].makespan_s);
}

#[test]
fn a_sweep_reports_every_point_refuses_bad_configs_and_matches_runs_made_one_by_one() {
    let rt = runtime();
    let workload = flowcon_paper();
    let flowcon = PolicyChoice::resolve(rt, "flowcon").unwrap();
    let fair = PolicyChoice::resolve(rt, "fair-share").unwrap();
    let claim = paper::objective(&workload.claims, "flowcon").unwrap();
    let spec = sweep::Spec {
        policy: &flowcon,
        baseline: &fair,
        figure: claim.figure,
        paper: claim.value,
        fixed: Default::default(),
        axes: vec!["alpha=0.01,0.1".parse().unwrap(), "interval-s=0:60:30".parse().unwrap()],
        seeds: 0..2,
        tick: Duration::from_secs(30),
        limits: Limits::default(),
        threads: 2,
    };
    let ended = std::sync::atomic::AtomicU64::new(0);
    let done = sweep::sweep(rt, &workload, &spec, &|jobs| {
        ended.fetch_max(jobs, std::sync::atomic::Ordering::Relaxed);
    });
    assert_eq!(ended.into_inner(), spec.jobs(&workload), "the progress counts every run's jobs, refused ones too");
    assert_eq!(done.points.len(), 6);
    for point in &done.points {
        let refused = point.config["interval-s"] == 0;
        assert_eq!(point.error.is_some(), refused, "{point:?}");
        assert_eq!(point.measured.is_none(), refused, "{point:?}");
    }

    // The point alpha=0.1, interval-s=30, run by hand, seed by seed.
    let point = done.points.iter().find(|p| p.at == [1, 1]).unwrap();
    let by_hand = PolicyChoice { config_json: r#"{"alpha":0.1,"interval-s":30}"#.into(), ..flowcon.clone() };
    for (seed, figure) in (0..2).zip(&point.per_seed) {
        let ours = simulate(rt, &by_hand, &workload, &options(seed, false));
        let base = simulate(rt, &fair, &workload, &options(seed, false));
        assert_eq!(*figure, Figure::BestJobJct.measure(&ours, &base), "seed {seed}");
    }
    assert!(done.best().is_some_and(|b| b.measured.as_ref().unwrap().mean < 0.0));
    assert!(done.table().contains("← best"), "{}", done.table());

    let results = Results::Sweep(&done);
    let json = to_json(&results);
    assert_follows_schema(&json);
    assert_eq!(json["kind"], "sweep");
    let rows = csv_rows(&results);
    assert_eq!(rows.len(), 6 * 2, "one row per point and seed");
    assert!(
        rows.iter().filter(|r| &r[4] == "0").all(|r| r[7].contains("interval-s")),
        "refusals carry the policy's words"
    );
}

#[test]
fn axes_read_lists_and_ranges_and_say_what_is_wrong() {
    let axis: Axis = "alpha=0.01, 0.03,true,fast".parse().unwrap();
    assert_eq!(axis.values, [Value::from(0.01), Value::from(0.03), Value::from(true), Value::from("fast")]);
    let range: Axis = "interval-s=10:30:10".parse().unwrap();
    assert_eq!(range.values, [Value::from(10), Value::from(20), Value::from(30)]);
    let fine: Axis = "alpha=0.1:0.3:0.1".parse().unwrap();
    assert_eq!(fine.values, [Value::from(0.1), Value::from(0.2), Value::from(0.3)], "no float noise");
    for bad in ["alpha", "=1", "alpha=", "a=1:0:1", "a=0:1:0", "a=0:1:-1", "a=0:inf:1", "a=0:1e6:1"] {
        let err = bad.parse::<Axis>().unwrap_err().to_string();
        assert!(
            err.contains("KEY=VALUES") || err.contains("START:END:STEP") || err.contains("at most"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn a_comparison_over_six_seeds_gives_each_policy_paired_against_the_baseline() {
    let rt = runtime();
    let workload = flowcon_paper();
    let choices = ["fair-share", "flowcon"].map(|p| PolicyChoice::resolve(rt, p).unwrap());
    let tasks = wasmsched::experiment::batch::grid(
        &workload,
        &choices,
        0..6,
        Duration::from_secs(30),
        Limits::default(),
        false,
    );
    let runs = wasmsched::experiment::batch::run(rt, &tasks, 2, &|_| {});
    let comparison = wasmsched::experiment::batch::comparison(&workload, runs);
    let json = to_json(&Results::Compare(CompareResults::new(&comparison, &workload)));
    assert_follows_schema(&json);
    let paired = json["paired"].as_array().unwrap();
    let figures: Vec<&str> = paired.iter().map(|m| m["figure"].as_str().unwrap()).collect();
    // FlowCon's own figures in the scenario first (its best job, then the makespan), then
    // the mean JCT, which the scenario does not give it; nothing twice.
    assert_eq!(figures, ["best-job-jct", "makespan", "mean-jct"]);
    let best = &paired[0]["paired"];
    assert_eq!(best["n"], 6);
    // The best job is faster under FlowCon on every seed: only all-negative and all-positive
    // sign patterns are as far, 2 of 64.
    assert_eq!(best["p"].as_f64(), Some(2.0 / 64.0), "{best}");
    let interval: Vec<f64> = best["interval"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    assert!(interval[0] <= best["mean"].as_f64().unwrap() && interval[1] < 0.0, "{best}");
    let text = comparison.paired_table(&workload.claims);
    assert!(text.contains("flowcon: best job, JCT -10."), "{text}");
    assert!(text.contains("6 seeds, p = 0.03)"), "{text}");
}

#[test]
fn perturbed_runs_shake_each_seed_alike_for_every_policy() {
    let rt = runtime();
    let mut workload = flowcon_paper();
    let fair = PolicyChoice::resolve(rt, "fair-share").unwrap();
    let plain = simulate(rt, &fair, &workload, &options(1, false));
    workload.perturb = 0.2;
    let tasks =
        wasmsched::experiment::batch::grid(&workload, &[fair], 1..3, Duration::from_secs(30), Limits::default(), false);
    let shaken = wasmsched::experiment::batch::run(rt, &tasks, 1, &|_| {});
    let arrivals = |r: &wasmsched::experiment::run::RunReport| r.jobs.iter().map(|j| j.arrival_s).collect::<Vec<_>>();
    assert_ne!(arrivals(&plain), arrivals(&shaken[0]), "seed 1 shaken moves arrivals");
    assert_ne!(arrivals(&shaken[0]), arrivals(&shaken[1]), "each seed shakes its own way");
    let names = |r: &wasmsched::experiment::run::RunReport| r.jobs.iter().map(|j| j.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&plain), names(&shaken[0]), "jobs keep their order, so runs still pair job by job");
    let comparison = wasmsched::experiment::batch::comparison(&workload, shaken.clone());
    let json = to_json(&Results::Compare(CompareResults::new(&comparison, &workload)));
    assert_follows_schema(&json);
    assert_eq!(json["perturb"].as_f64(), Some(0.2), "the results say how the seeds were shaken");
    let again = wasmsched::experiment::batch::run(rt, &tasks, 2, &|_| {});
    assert_eq!(arrivals(&again[1]), arrivals(&shaken[1]), "the same seed shakes alike");
    assert_eq!(again[1].mean_jct_s, shaken[1].mean_jct_s);
}
