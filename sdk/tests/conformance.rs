//! The conformance vectors the host writes with its own encoder and validator
//! (`wit/conformance/`, see its README): the SDK's tables decode every delta into the table the
//! host's world holds and refuse every malformed one, and `sched::verdicts` gives every action
//! of every decision the host's outcome, word for word.

use std::path::Path;

use serde_json::{Value, json};
use wasmsched_sdk::bindings::wasmsched::policy::types as wit;
use wasmsched_sdk::testing::Inspect;
use wasmsched_sdk::{
    Action, Bytes, Decision, Direction, JobId, JobKind, Millicores, NodeId, PolicyError, Runner, Seconds, Snapshot,
    WaitReason, sched,
};

fn vectors(file: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit/conformance").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A delta as serde wrote it. serde_json writes NaN as null, which it does not read back as a
/// float: the progress values (NaN where a metric is missing) are read as optional.
fn delta(json: &Value) -> wit::Snapshot {
    let mut json = json.clone();
    let values: Vec<Option<f64>> = serde_json::from_value(json["progress"]["values"].take()).expect("values");
    json["progress"]["values"] = json!([]);
    let mut s: wit::Snapshot = serde_json::from_value(json).expect("a delta as serde writes the contract's");
    s.progress.values = values.into_iter().map(|v| v.unwrap_or(f64::NAN)).collect();
    s
}

fn ms(s: Seconds) -> u64 {
    (s.0 * 1000.0).round() as u64
}

/// The table as the policy's view reads it, in the vectors' neutral form.
fn table(view: &Snapshot<'_>) -> Value {
    let nodes: Vec<Value> = view
        .nodes()
        .map(|n| {
            let gpus: Vec<Value> = n
                .gpus()
                .map(|g| {
                    json!({
                        "memory_bytes": g.memory_total.0,
                        "utilisation_percent": f64::from(g.utilisation_percent),
                        "memory_used_bytes": g.memory_used.0,
                    })
                })
                .collect();
            json!({ "name": n.name(), "cpu_millicores": n.cpu().0, "memory_bytes": n.memory().0, "gpus": gpus })
        })
        .collect();
    let mut jobs: Vec<_> = view.jobs().chain(view.queue()).collect();
    jobs.sort_by_key(|j| j.id());
    let jobs: Vec<Value> = jobs
        .iter()
        .map(|j| {
            let running = (!j.is_queued()).then(|| {
                json!({
                    "node": j.node().0,
                    "gpus": j.gpus().iter().map(|g| [g.node.0, g.index]).collect::<Vec<_>>(),
                    "cpu_limit_millicores": j.cpu_limit().map(|m| m.0),
                    "memory_limit_bytes": j.memory_limit().map(|b| b.0),
                    "cpu_used_millicores": j.cpu_use().0,
                    "memory_used_bytes": j.memory_use().0,
                    "gpu_share_percent": j.gpu_share(),
                    "gpu_used_percent": f64::from(j.gpu_use_percent()),
                    "run_ms": ms(j.run_time()),
                    "gpu_ms": ms(j.attained_service()),
                })
            });
            let queued = j.wait_reason().map(|reason| {
                json!({
                    "reason": match reason {
                        WaitReason::NeverStarted => "never-started",
                        WaitReason::Preempted => "preempted",
                    },
                    "since_ms": ms(view.time()) - ms(j.wait(view.time())),
                    "run_ms": ms(j.run_time()),
                    "gpu_ms": ms(j.attained_service()),
                })
            });
            let metrics: Vec<Value> = j
                .metrics()
                .iter()
                .map(|m| {
                    let direction = match m.direction {
                        Direction::HigherIsBetter => "higher-is-better",
                        Direction::LowerIsBetter => "lower-is-better",
                    };
                    json!({ "name": m.name, "direction": direction })
                })
                .collect();
            let last = j.latest().map(|r| json!({ "time_ms": ms(r.time), "epoch": r.epoch, "values": &r.values[..] }));
            json!({
                "handle": j.id().0,
                "name": j.name(),
                "model": j.model(),
                "kind": match j.kind() {
                    JobKind::Training => "training",
                    JobKind::Inference => "inference",
                },
                "metrics": metrics,
                "gpus_asked": j.gpus_asked(),
                "replicas": j.replicas(),
                "arrival_ms": ms(j.arrival()),
                "running": running,
                "queued": queued,
                "history": {
                    "length": j.history().len(),
                    "new": j.new_records().count(),
                    "epochs": j.history().map(|r| r.epoch).collect::<Vec<_>>(),
                    "last": last,
                },
            })
        })
        .collect();
    json!({ "time_ms": ms(view.time()), "interval_ms": ms(view.interval()), "nodes": nodes, "jobs": jobs })
}

#[test]
fn every_snapshot_vector_decodes_into_the_table_the_host_holds_or_is_refused() {
    let file = vectors("snapshots.json");
    let cases = file["cases"].as_array().expect("cases");
    assert!(cases.len() >= 5, "the vectors are there");
    for case in cases {
        let name = case["name"].as_str().expect("a name");
        let mut runner = Runner::from_policy(Inspect);
        for (i, tick) in case["ticks"].as_array().expect("ticks").iter().enumerate() {
            let outcome = runner.decide(delta(&tick["delta"]));
            match tick["expect"].get("table") {
                Some(expected) => {
                    outcome.unwrap_or_else(|e| panic!("{name}, tick {}: refused: {e:?}", i + 1));
                    assert_eq!(&table(&runner.view()), expected, "{name}, tick {}", i + 1);
                }
                None => assert!(
                    matches!(outcome, Err(PolicyError::Failed(ref m)) if m.contains("malformed")),
                    "{name}, tick {}: not refused: {outcome:?}",
                    i + 1
                ),
            }
        }
    }
}

/// A neutral place's or resize's node entries.
fn entries(a: &Value) -> Vec<(NodeId, Vec<u32>)> {
    a["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| {
            let gpus = n["gpus"].as_array().expect("gpus").iter().map(|g| g.as_u64().expect("a GPU") as u32);
            (NodeId(n["node"].as_u64().expect("a node") as u32), gpus.collect())
        })
        .collect()
}

/// A neutral action as the SDK's.
fn action(a: &Value) -> Action {
    let job = JobId(a["job"].as_u64().expect("a job") as u32);
    let number = |key: &str| a[key].as_u64().unwrap_or_else(|| panic!("{key} in {a}"));
    match a["kind"].as_str().expect("a kind") {
        "set-cpu" => a["millicores"].as_u64().map_or(Action::lift_cpu(job), |m| Action::set_cpu(job, Millicores(m))),
        "set-memory" => a["bytes"].as_u64().map_or(Action::lift_memory(job), |b| Action::set_memory(job, Bytes(b))),
        "migrate" => Action::migrate(job, NodeId(number("node") as u32)),
        "deliver" => Action::deliver(job),
        "stop" => Action::stop(job),
        "set-gpu-share" => Action::set_gpu_share(job, number("gpu") as u32, number("percent") as u8),
        "place" => Action::place_on(job, &entries(a), a["share"].as_bool().expect("share")),
        "preempt" => Action::preempt(job),
        // The vectors' resizes are not shared, as the builder makes them.
        "resize" if a["share"] == false => Action::resize(job, &entries(a), a["batch_size"].as_u64().map(|b| b as u32)),
        other => panic!("no action kind {other}"),
    }
}

#[test]
fn every_check_vector_gets_the_hosts_outcome_for_each_action() {
    let file = vectors("checks.json");
    let cases = file["cases"].as_array().expect("cases");
    assert!(cases.len() >= 10, "the vectors are there");
    for case in cases {
        let name = case["name"].as_str().expect("a name");
        let mut runner = Runner::from_policy(Inspect);
        runner.decide(delta(&case["snapshot"])).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let view = runner.view();
        let mut decision = Decision::new();
        for a in case["decision"].as_array().expect("a decision") {
            decision.push(action(a));
        }
        let got = sched::verdicts(&view, &decision);
        match case["refused_whole"].as_str() {
            Some(whole) => assert_eq!(got, Err(whole.to_string()), "{name}"),
            None => {
                let expected: Vec<Result<(), String>> = case["outcomes"]
                    .as_array()
                    .expect("outcomes")
                    .iter()
                    .map(|o| match o.as_str().expect("an outcome") {
                        "accepted" => Ok(()),
                        problem => Err(problem.to_string()),
                    })
                    .collect();
                assert_eq!(got, Ok(expected.clone()), "{name}");
                let first = expected.iter().enumerate().find_map(|(i, v)| v.clone().err().map(|p| (i, p)));
                let said = sched::check(&view, &decision);
                assert_eq!(said, first.map_or(Ok(()), |(i, p)| Err(format!("action {i}: {p}"))), "{name}");
            }
        }
    }
}
