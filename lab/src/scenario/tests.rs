use wasmsched_core::bindings::wit;
use wasmsched_sim::model::Model;
use wasmsched_sim::throughput::{GpuConfig, run_s};
use wasmsched_sim::workload::{JobPlan, NodeSpec};

use super::trace::{PHILLY_HEADER, POLLUX_HEADER};
use super::*;

const NODE: &str = "[[node]]\ncores = 8\nmemory = \"32GiB\"\n";

fn scenario_err(text: &str) -> WorkloadError {
    match Scenario::from_toml_str("t.toml", text) {
        Ok(w) => panic!("expected an error, got {w:?}"),
        Err(e) => e,
    }
}

fn pollux_err(text: &str) -> WorkloadError {
    match Scenario::from_pollux_csv("w.csv", text, &LoadOptions::default()) {
        Ok(w) => panic!("expected an error, got {w:?}"),
        Err(e) => e,
    }
}

fn philly_csv(rows: &[&str]) -> String {
    format!("{PHILLY_HEADER}\n{}\n", rows.join("\n"))
}

fn repo_root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn a_scenario_with_every_field_loads_into_plans() {
    let text = r#"
name = "full"

[[node]]
name = "a"
cores = 12.5
memory = "48GiB"
gpus = 2
gpu-memory = "16GiB"

[[job]]
name = "serve"
model = "BERT"
kind = "inference"
arrival = "1m30s"
node = "a"
gpus = 1
qoe-target = 120.0
request-rate = 20
duration = "1h"

[[job]]
name = "train"
model = "deepspeech2"
arrival = "30s"
batch-size = 40
max-epochs = 10
work-scale = 0.5
tiers = [40, 30]
qoe-target = 60

[[paper]]
policy = "flowcon"
figure = "best-job-jct"
value = -0.42
source = "a paper"
"#;
    let scenario = Scenario::from_toml_str("t.toml", text).expect("loads");
    assert_eq!((scenario.claims.len(), scenario.claims[0].figure), (1, Figure::BestJobJct));
    let w = scenario.workload;
    assert_eq!(w.name, "full");
    assert_eq!(
        w.nodes,
        vec![NodeSpec {
            name: "a".into(),
            cpu_millicores: 12_500,
            memory_bytes: 48 * GIB,
            gpus: 2,
            gpu_memory_bytes: 16 * GIB,
            gpu_type: String::new(),
            domains: Vec::new(),
        }]
    );
    let names: Vec<&str> = w.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names, ["train", "serve"], "sorted by arrival");
    let serve = &w.jobs[1];
    assert_eq!(
        (serve.model, serve.kind, serve.arrival_s, serve.node),
        (Model::Bert, wit::JobKind::Inference, 90.0, Some(0))
    );
    assert_eq!(
        (serve.request_rate, serve.duration_s, serve.qoe_target, serve.gpus),
        (Some(20.0), Some(3600.0), Some(120.0), 1)
    );
    assert_eq!(serve.batch_size, Model::Bert.default_batch_size());
    let train = &w.jobs[0];
    assert_eq!(
        (train.batch_size, train.max_epochs, train.work_scale, train.tiers),
        (40, Some(10), 0.5, Some((40.0, 30.0)))
    );
    assert_eq!((train.request_rate, train.duration_s, train.node), (None, None, None));
}

#[test]
fn count_and_every_expand_into_numbered_jobs() {
    let text =
        format!("{NODE}[[job]]\nname = \"c\"\nmodel = \"cifar10\"\narrival = \"10s\"\ncount = 3\nevery = \"1m\"\n");
    let w = Scenario::from_toml_str("t.toml", &text).expect("loads").workload;
    let got: Vec<(&str, f64)> = w.jobs.iter().map(|j| (j.name.as_str(), j.arrival_s)).collect();
    assert_eq!(got, [("c-0", 10.0), ("c-1", 70.0), ("c-2", 130.0)]);
    assert_eq!(w.name, "t.toml", "no name in the scenario: the given one");
}

#[test]
fn jobs_are_sorted_by_arrival_and_ties_keep_the_file_order() {
    let csv = "name,time,application,num_replicas,batch_size\nb,50,ncf,1,256\na,10,ncf,1,256\nc,50,ncf,1,256\nd,0,ncf,1,256\n";
    let w = Scenario::from_pollux_csv("w.csv", csv, &LoadOptions::default()).expect("loads").workload;
    let names: Vec<&str> = w.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names, ["d", "a", "b", "c"]);
}

#[test]
fn unknown_key_is_refused_with_its_name_and_line() {
    let text = format!("{NODE}[[job]]\nname = \"a\"\nmodel = \"ncf\"\ncolour = \"red\"\n");
    let e = scenario_err(&text);
    assert!(matches!(e, WorkloadError::Toml { line: Some(7), .. }), "{e:?}");
    let message = e.to_string();
    assert!(message.contains("colour") && message.starts_with("t.toml:7:"), "{message}");
}

#[test]
fn an_unknown_paper_figure_is_refused_with_the_known_ones() {
    let text = format!(
        "{NODE}[[job]]\nname = \"a\"\nmodel = \"ncf\"\n[[paper]]\npolicy = \"x\"\nfigure = \"speedup\"\nvalue = 1\nsource = \"s\"\n"
    );
    let message = scenario_err(&text).to_string();
    assert!(message.contains("speedup") && message.contains("best-job-jct"), "{message}");
}

#[test]
fn a_value_of_the_wrong_type_is_refused_with_its_line() {
    let e = scenario_err("[[node]]\ncores = \"many\"\nmemory = \"1GiB\"\n[[job]]\nname = \"a\"\nmodel = \"ncf\"\n");
    assert!(matches!(e, WorkloadError::Toml { line: Some(2), .. }), "{e:?}");
}

#[test]
fn unknown_model_is_refused_with_the_six_names() {
    let e = scenario_err(&format!("{NODE}[[job]]\nname = \"a\"\nmodel = \"resnet\"\n"));
    assert!(matches!(&e, WorkloadError::UnknownModel { line: Some(6), found, .. } if found == "resnet"), "{e:?}");
    let message = e.to_string();
    for model in Model::ALL {
        assert!(message.contains(model.name()), "{message}");
    }
    let e = pollux_err("name,time,application,num_replicas,batch_size\na,0,gpt5,1,8\n");
    assert!(matches!(&e, WorkloadError::UnknownModel { line: Some(2), .. }), "{e:?}");
    assert!(e.to_string().contains("yolov3"));
}

#[test]
fn negative_or_non_numeric_times_durations_and_counts_are_refused() {
    let job = |extra: &str| format!("{NODE}[[job]]\nname = \"a\"\nmodel = \"ncf\"\n{extra}\n");
    let e = scenario_err(&job("arrival = \"-30s\""));
    assert!(matches!(&e, WorkloadError::Field { field, line: Some(7), .. } if field == "arrival"), "{e:?}");
    let e = scenario_err(&job("arrival = \"later\""));
    assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "arrival"), "{e:?}");
    let e = scenario_err(&job("count = -2"));
    assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "count"), "{e:?}");
    let e = scenario_err(&job("count = \"three\""));
    assert!(matches!(&e, WorkloadError::Toml { line: Some(7), .. }), "{e:?}");
    let e = scenario_err(&job("kind = \"inference\"\nrequest-rate = 5\nduration = \"-1h\""));
    assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "duration"), "{e:?}");
    let e = pollux_err("name,time,application,num_replicas,batch_size\na,0,ncf,1,8\nb,-3,ncf,1,8\n");
    assert!(matches!(&e, WorkloadError::Field { field, line: Some(3), .. } if field == "time"), "{e:?}");
    let e = pollux_err("name,time,application,num_replicas,batch_size\na,soon,ncf,1,8\n");
    assert!(matches!(&e, WorkloadError::Field { field, line: Some(2), .. } if field == "time"), "{e:?}");
    assert!(e.to_string().starts_with("w.csv:2: `time`"), "{e}");
    let text = philly_csv(&["2017-10-09 07:01:55,-66.0,1,66.0,x"]);
    let e = Scenario::from_philly_csv("p.csv", text.as_bytes(), &LoadOptions::default()).expect_err("refused");
    assert!(matches!(&e, WorkloadError::Field { field, line: Some(2), .. } if field == "duration"), "{e:?}");
    let text = philly_csv(&["yesterday,66.0,1,66.0,x"]);
    let e = Scenario::from_philly_csv("p.csv", text.as_bytes(), &LoadOptions::default()).expect_err("refused");
    assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "timestamp"), "{e:?}");
}

#[test]
fn an_empty_workload_is_refused() {
    assert!(matches!(scenario_err(NODE), WorkloadError::Empty { .. }));
    assert!(matches!(pollux_err("name,time,application,num_replicas,batch_size\n"), WorkloadError::Empty { .. }));
    assert!(matches!(pollux_err(""), WorkloadError::Empty { .. }));
    assert!(matches!(detect("e.csv", ""), Err(WorkloadError::Empty { .. })));
    let only_short = philly_csv(&["2017-10-09 07:01:55,10.0,1,10.0,x"]);
    let e = Scenario::from_philly_csv("p.csv", only_short.as_bytes(), &LoadOptions::default());
    assert!(matches!(e, Err(WorkloadError::Empty { .. })), "{e:?}");
    let csv = "name,time,application,num_replicas,batch_size\na,0,ncf,1,8\n";
    let e = Scenario::from_pollux_csv(
        "w.csv",
        csv,
        &LoadOptions { nodes: None, limit: Some(0), cluster: None, jobs: GpuJobs::Rigid },
    );
    assert!(matches!(e, Err(WorkloadError::Empty { .. })), "{e:?}");
}

#[test]
fn duplicate_job_names_are_refused_with_both_lines() {
    let text = format!("{NODE}[[job]]\nname = \"a\"\nmodel = \"ncf\"\n\n[[job]]\nname = \"a\"\nmodel = \"bert\"\n");
    let e = scenario_err(&text);
    assert!(matches!(&e, WorkloadError::DuplicateJob { line: Some(9), first_line: Some(5), .. }), "{e:?}");
    let e = scenario_err(&format!(
        "{NODE}[[job]]\nname = \"a\"\nmodel = \"ncf\"\ncount = 2\n[[job]]\nname = \"a-1\"\nmodel = \"ncf\"\n"
    ));
    assert!(matches!(&e, WorkloadError::DuplicateJob { name, .. } if name == "a-1"), "{e:?}");
    let e = pollux_err("name,time,application,num_replicas,batch_size\na,0,ncf,1,8\na,5,ncf,1,8\n");
    assert!(matches!(&e, WorkloadError::DuplicateJob { line: Some(3), first_line: Some(2), .. }), "{e:?}");
}

#[test]
fn a_node_reference_that_does_not_exist_is_refused() {
    let e = scenario_err(&format!("{NODE}[[job]]\nname = \"a\"\nmodel = \"ncf\"\nnode = \"gpu-box\"\n"));
    assert!(
        matches!(&e, WorkloadError::UnknownNode { line: Some(7), node, known, .. } if node == "gpu-box" && known == "node-0"),
        "{e:?}"
    );
    assert!(e.to_string().contains("use one of node-0"), "{e}");
}

#[test]
fn an_inference_job_without_request_rate_or_duration_is_refused() {
    let job = |extra: &str| format!("{NODE}[[job]]\nname = \"s\"\nmodel = \"bert\"\nkind = \"inference\"\n{extra}\n");
    let e = scenario_err(&job("duration = \"1h\""));
    assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "request-rate"), "{e:?}");
    let e = scenario_err(&job("request-rate = 10"));
    assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "duration"), "{e:?}");
    let e = scenario_err(&format!("{NODE}[[job]]\nname = \"t\"\nmodel = \"bert\"\nrequest-rate = 10\n"));
    assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "request-rate"), "training with a rate: {e:?}");
}

#[test]
fn tiers_in_the_wrong_order_for_the_direction_are_refused() {
    let job = |model: &str, tiers: &str| format!("{NODE}[[job]]\nname = \"a\"\nmodel = \"{model}\"\ntiers = {tiers}\n");
    let e = scenario_err(&job("cifar10", "[0.9, 0.8]"));
    assert!(matches!(&e, WorkloadError::Field { field, line: Some(7), .. } if field == "tiers"), "{e:?}");
    assert!(e.to_string().contains("swap"), "{e}");
    let e = scenario_err(&job("deepspeech2", "[30, 40]"));
    assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "tiers"), "{e:?}");
    let e = scenario_err(&job("ncf", "[0.6, 0.6]"));
    assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "tiers"), "{e:?}");
    assert!(Scenario::from_toml_str("t", &job("deepspeech2", "[40, 30]")).is_ok());
    assert!(Scenario::from_toml_str("t", &job("cifar10", "[0.8, 0.9]")).is_ok());
    let e = scenario_err(&job("yolov3", "[0.8, 0.9, 1.0]"));
    assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "tiers"), "three tiers: {e:?}");
}

#[test]
fn zero_nodes_are_refused() {
    let e = scenario_err("[[job]]\nname = \"a\"\nmodel = \"ncf\"\n");
    assert!(matches!(&e, WorkloadError::NoNodes { .. }), "{e:?}");
    let csv = "name,time,application,num_replicas,batch_size\na,0,ncf,1,8\n";
    let e = Scenario::from_pollux_csv(
        "w.csv",
        csv,
        &LoadOptions { nodes: Some(0), limit: None, cluster: None, jobs: GpuJobs::Rigid },
    );
    assert!(matches!(e, Err(WorkloadError::NoNodes { .. })), "{e:?}");
}

#[test]
fn a_node_with_zero_cores_is_refused() {
    let e =
        scenario_err("[[node]]\nname = \"n\"\ncores = 0\nmemory = \"1GiB\"\n[[job]]\nname = \"a\"\nmodel = \"ncf\"\n");
    assert!(matches!(&e, WorkloadError::Field { field, line: Some(3), .. } if field == "cores"), "{e:?}");
    let e = scenario_err("[[node]]\ncores = -4\nmemory = \"1GiB\"\n[[job]]\nname = \"a\"\nmodel = \"ncf\"\n");
    assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "cores"), "{e:?}");
    let e = scenario_err("[[node]]\ncores = 4\nmemory = \"1GiB\"\ngpus = 2\n[[job]]\nname = \"a\"\nmodel = \"ncf\"\n");
    assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "gpu-memory"), "{e:?}");
}

#[test]
fn numbers_past_any_real_cluster_are_refused_with_the_limit() {
    let job = "[[job]]\nname = \"a\"\nmodel = \"ncf\"\n";
    let cases = [
        ("cores = 1e300\nmemory = \"1GiB\"\n", "cores", "up to 65536"),
        ("cores = 4\nmemory = \"2048TiB\"\n", "memory", "at most 1024TiB"),
        ("cores = 4\nmemory = \"1GiB\"\ngpus = 4000000000\ngpu-memory = \"1GiB\"\n", "gpus", "at most 1024"),
    ];
    for (node, key, says) in cases {
        let e = scenario_err(&format!("[[node]]\n{node}{job}"));
        assert!(matches!(&e, WorkloadError::Field { field, .. } if field == key), "{node}: {e:?}");
        assert!(e.to_string().contains(says), "{node}: {e}");
    }
    let node = "[[node]]\ncores = 4\nmemory = \"1GiB\"\n";
    let e = scenario_err(&format!("{node}{job}gpus = 4000000000\n"));
    assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "gpus"), "{e:?}");
    let e = scenario_err(&format!("{node}{job}replicas = 2000000\n"));
    assert!(matches!(&e, WorkloadError::Field { field, .. } if field == "replicas"), "{e:?}");
    let ok = Scenario::from_toml_str(
        "big",
        &format!("[[node]]\ncores = 65536\nmemory = \"1024TiB\"\ngpus = 1024\ngpu-memory = \"80GiB\"\n{job}"),
    );
    assert!(ok.is_ok(), "the limits themselves pass: {ok:?}");
}

#[test]
fn missing_and_unknown_columns_are_refused() {
    let e = pollux_err("name,time,application,num_replicas\na,0,ncf,1\n");
    assert!(matches!(&e, WorkloadError::MissingColumn { column, line: 1, .. } if column == "batch_size"), "{e:?}");
    let e = pollux_err("name,time,application,num_replicas,batch_size,user\na,0,ncf,1,8,bob\n");
    assert!(matches!(&e, WorkloadError::UnknownColumn { column, .. } if column == "user"), "{e:?}");
    assert!(e.to_string().contains(POLLUX_HEADER), "{e}");
    let text = "timestamp,duration,num_gpus,cluster\n2017-10-09 07:01:55,66.0,1,x\n";
    let e = Scenario::from_philly_csv("p.csv", text.as_bytes(), &LoadOptions::default()).expect_err("refused");
    assert!(matches!(&e, WorkloadError::MissingColumn { column, .. } if column == "gpu_time"), "{e:?}");
    let e = pollux_err("name,time,application,num_replicas,batch_size\na,0,ncf,1\n");
    assert!(matches!(&e, WorkloadError::Csv { line: Some(2), .. }), "short row: {e:?}");
}

#[test]
fn columns_may_come_in_any_order() {
    let csv = "application,batch_size,name,num_replicas,time\nncf,512,x,2,7\n";
    let w = Scenario::from_pollux_csv("w.csv", csv, &LoadOptions::default()).expect("loads").workload;
    let j = &w.jobs[0];
    assert_eq!((j.name.as_str(), j.model, j.batch_size, j.gpus, j.arrival_s), ("x", Model::Ncf, 512, 2, 7.0));
}

#[test]
fn an_unknown_csv_header_names_both_formats() {
    assert_eq!(detect("f", PHILLY_HEADER).ok(), Some(CsvFormat::Philly));
    assert_eq!(detect("f", &format!("\u{feff}{POLLUX_HEADER}\r")).ok(), Some(CsvFormat::Pollux));
    let e = detect("f.csv", "a,b,c").expect_err("refused");
    let message = e.to_string();
    assert!(
        message.contains(POLLUX_HEADER) && message.contains(PHILLY_HEADER) && message.contains("f.csv:1"),
        "{message}"
    );
}

#[test]
fn load_refuses_unknown_extensions_missing_files_and_node_counts_for_scenarios() {
    let dir = tempfile::tempdir().expect("temp dir");
    let yaml = dir.path().join("w.yaml");
    std::fs::write(&yaml, "jobs: []").expect("write");
    assert!(matches!(Scenario::load(&yaml, &LoadOptions::default()), Err(WorkloadError::UnknownFormat { .. })));
    let missing = dir.path().join("absent.csv");
    assert!(matches!(Scenario::load(&missing, &LoadOptions::default()), Err(WorkloadError::Read { .. })));
    let odd = dir.path().join("odd.csv");
    std::fs::write(&odd, "when,what\n1,2\n").expect("write");
    assert!(matches!(Scenario::load(&odd, &LoadOptions::default()), Err(WorkloadError::UnknownHeader { .. })));
    let demo = repo_root().join("scenarios/demo.toml");
    let e = Scenario::load(&demo, &LoadOptions { nodes: Some(3), limit: None, cluster: None, jobs: GpuJobs::Rigid });
    assert!(matches!(&e, Err(WorkloadError::Field { field, .. }) if field == "nodes"), "{e:?}");
}

#[test]
fn pollux_rows_map_to_plans_on_the_default_cluster() {
    let csv = "name,time,application,num_replicas,batch_size\ncifar10-0,107,cifar10,6,2048\n";
    let w = Scenario::from_pollux_csv("w", csv, &LoadOptions::default()).expect("loads").workload;
    assert_eq!(w.nodes.len(), POLLUX_NODES);
    assert_eq!(
        w.nodes[3],
        NodeSpec {
            name: "node-3".into(),
            cpu_millicores: 64_000,
            memory_bytes: 256 * GIB,
            gpus: 4,
            gpu_memory_bytes: 32 * GIB,
            gpu_type: String::new(),
            domains: Vec::new(),
        }
    );
    assert_eq!(
        w.jobs,
        vec![JobPlan {
            batch_size: 2048,
            gpus: 6,
            replicas: 6,
            ..JobPlan::training("cifar10-0", Model::Cifar10, 107.0)
        }]
    );
    let w = Scenario::from_pollux_csv(
        "w",
        csv,
        &LoadOptions { nodes: Some(2), limit: None, cluster: None, jobs: GpuJobs::Rigid },
    )
    .expect("loads")
    .workload;
    assert_eq!(w.nodes.len(), 2);
}

#[test]
fn philly_rows_map_to_models_by_gpu_time() {
    let text = philly_csv(&[
        "2017-10-09 07:00:00,100.0,1,100.0,a",         // row 1: < 1 GPU-h, odd → cifar10
        "2017-10-09 07:00:10,100.0,1,100.0,a",         // row 2: < 1 GPU-h, even → ncf
        "2017-10-09 07:00:20,7200.0,1,7200.0,a",       // row 3: 2 GPU-h, odd → deepspeech2
        "2017-10-09 07:00:30,3600.0,2,7200.0,a",       // row 4: 2 GPU-h, even → bert
        "2017-10-09 07:00:40,36000.0,4,144000.0,a",    // row 5: 40 GPU-h → yolov3
        "2017-10-09 07:00:50,360000.0,8,2880000.0,a",  // row 6: 800 GPU-h → imagenet
        "2017-10-09 06:59:00,30.0,1,30.0,a",           // row 7: too short, dropped
        "2017-10-09 07:01:00,1000000.0,4,4000000.0,a", // row 8: ≥ 1000 GPU-h, dropped
    ]);
    let w = Scenario::from_philly_csv("p.csv", text.as_bytes(), &LoadOptions::default()).expect("loads").workload;
    let got: Vec<(&str, Model, f64, u32)> =
        w.jobs.iter().map(|j| (j.name.as_str(), j.model, j.arrival_s, j.gpus)).collect();
    assert_eq!(
        got,
        [
            ("philly-1", Model::Cifar10, 0.0, 1),
            ("philly-2", Model::Ncf, 10.0, 1),
            ("philly-3", Model::Deepspeech2, 20.0, 1),
            ("philly-4", Model::Bert, 30.0, 2),
            ("philly-5", Model::Yolov3, 40.0, 4),
            ("philly-6", Model::Imagenet, 50.0, 8),
        ]
    );
    assert_eq!(w.nodes.len(), PHILLY_NODES);
    assert_eq!((w.nodes[0].cpu_millicores, w.nodes[0].memory_bytes, w.nodes[0].gpus), (64_000, 512 * GIB, 8));
}

#[test]
fn a_philly_job_alone_on_its_packed_gpus_lasts_its_duration() {
    let text = philly_csv(&[
        "2017-10-09 07:00:00,1800.0,1,1800.0,a",
        "2017-10-09 08:00:00,7200.0,1,7200.0,a",
        "2017-10-09 09:00:00,3600.0,12,43200.0,a",
    ]);
    let w = Scenario::from_philly_csv("p.csv", text.as_bytes(), &LoadOptions::default()).expect("loads").workload;
    for (job, duration_s, shape) in
        w.jobs.iter().zip([1800.0, 7200.0, 3600.0]).zip([vec![1], vec![1], vec![8, 4]]).map(|((j, d), s)| (j, d, s))
    {
        let epochs = job.model.curve(job.batch_size).epochs();
        let config = GpuConfig::new(job.model, job.batch_size, job.gpus);
        let alone_s = run_s(job.model, config, &shape, epochs) * job.work_scale;
        assert!((alone_s - duration_s).abs() < 1e-6, "{}: {alone_s} s", job.name);
    }
    assert_eq!(w.jobs[1].arrival_s, 3600.0);
}

#[test]
fn limit_keeps_the_first_jobs_by_arrival() {
    let csv = "name,time,application,num_replicas,batch_size\nb,50,ncf,1,256\na,10,ncf,1,256\nc,70,ncf,1,256\n";
    let w = Scenario::from_pollux_csv(
        "w.csv",
        csv,
        &LoadOptions { nodes: None, limit: Some(2), cluster: None, jobs: GpuJobs::Rigid },
    )
    .expect("loads")
    .workload;
    let names: Vec<&str> = w.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn default_targets_fill_only_missing_training_tiers() {
    let text = format!(
        "{NODE}[[job]]\nname = \"a\"\nmodel = \"cifar10\"\n[[job]]\nname = \"b\"\nmodel = \"ncf\"\ntiers = [0.6, 0.65]\n\
             [[job]]\nname = \"s\"\nmodel = \"bert\"\nkind = \"inference\"\nrequest-rate = 5\nduration = \"10m\"\n"
    );
    let w = Scenario::from_toml_str("t", &text).expect("loads").with_default_targets().workload;
    assert_eq!(w.jobs[0].tiers, Some(Model::Cifar10.curve(Model::Cifar10.default_batch_size()).default_tiers()));
    assert_eq!(w.jobs[1].tiers, Some((0.6, 0.65)));
    assert_eq!(w.jobs[2].tiers, None);
}

#[test]
fn every_example_scenario_and_bundled_workload_loads() {
    let mut loaded = 0;
    for dir in ["scenarios", "data/workloads"] {
        let entries = std::fs::read_dir(repo_root().join(dir)).expect("folder exists");
        for entry in entries {
            let path = entry.expect("readable folder").path();
            if !matches!(path.extension().and_then(|e| e.to_str()), Some("toml" | "csv")) {
                continue;
            }
            let w = Scenario::load(&path, &LoadOptions::default()).unwrap_or_else(|e| panic!("{e}")).workload;
            assert!(w.jobs.windows(2).all(|p| p[0].arrival_s <= p[1].arrival_s), "{}", path.display());
            assert!(!w.nodes.is_empty());
            loaded += 1;
        }
    }
    assert!(loaded >= 6, "two scenarios and four Pollux workloads, found {loaded}");
    let demo =
        Scenario::load(&repo_root().join("scenarios/demo.toml"), &LoadOptions::default()).expect("loads").workload;
    assert_eq!(demo.nodes.len(), 1);
    assert_eq!(demo.nodes[0].cpu_millicores, 16_000);
    let training: Vec<&JobPlan> = demo.jobs.iter().filter(|j| j.kind == wit::JobKind::Training).collect();
    assert_eq!(training.len(), 6);
    assert!(training.iter().all(|j| j.arrival_s <= 120.0));
    assert_eq!(demo.jobs.iter().filter(|j| j.kind == wit::JobKind::Inference).count(), 1);
    let two =
        Scenario::load(&repo_root().join("scenarios/two-nodes.toml"), &LoadOptions::default()).expect("loads").workload;
    assert_eq!((two.nodes.len(), two.jobs.len()), (2, 8));
}

#[test]
fn a_count_too_large_to_hold_is_refused_before_any_job_is_made() {
    let e = scenario_err(&format!("{NODE}[[job]]\nname = \"a\"\nmodel = \"cifar10\"\ncount = 4294967295\n"));
    let e = e.to_string();
    assert!(e.starts_with("t.toml:7: `count`") && e.contains("at most 100000"), "{e}");
}

#[test]
fn a_count_whose_last_job_would_never_arrive_is_refused() {
    let long = format!("\"{}s\"", "9".repeat(308));
    let job = format!("[[job]]\nname = \"a\"\nmodel = \"cifar10\"\narrival = {long}\ncount = 3\nevery = {long}\n");
    let e = scenario_err(&format!("{NODE}{job}")).to_string();
    assert!(e.starts_with("t.toml:") && e.contains("`every`") && e.contains("too long"), "{e}");
}

#[test]
fn a_philly_row_asking_for_more_gpus_than_a_job_holds_is_refused_at_once() {
    let text = philly_csv(&["2017-10-09 07:01:55,100,4294967295,10,c"]);
    let e = Scenario::from_philly_csv("p.csv", text.as_bytes(), &LoadOptions::default()).expect_err("refused");
    let e = e.to_string();
    assert!(e.starts_with("p.csv:2: `num_gpus`: 4294967295") && e.contains("65535"), "{e}");
}

#[test]
fn a_philly_row_too_long_to_simulate_is_refused_not_given_an_infinite_work_scale() {
    let text = philly_csv(&["2017-10-09 07:01:55,1e308,0,10,c"]);
    let e = Scenario::from_philly_csv("p.csv", text.as_bytes(), &LoadOptions::default()).expect_err("refused");
    let e = e.to_string();
    assert!(e.starts_with("p.csv:2: `duration`") && e.contains("too long"), "{e}");
}

#[test]
fn the_philly_trace_loads_whole() {
    let path = repo_root().join("../shared/data/philly_jobs_pollux.csv");
    if !path.exists() {
        eprintln!("SKIPPED: ../shared/data/philly_jobs_pollux.csv absent");
        return;
    }
    let w = Scenario::load(&path, &LoadOptions::default()).expect("the trace loads").workload;
    assert!(w.jobs.len() > 60_000, "{} jobs after filtering", w.jobs.len());
    assert!(w.jobs.windows(2).all(|p| p[0].arrival_s <= p[1].arrival_s), "sorted by arrival");
    assert_eq!(w.jobs[0].arrival_s, 0.0);
    for model in Model::ALL {
        assert!(w.jobs.iter().any(|j| j.model == model), "{model:?} present");
    }
    let limited =
        Scenario::load(&path, &LoadOptions { nodes: Some(4), limit: Some(100), cluster: None, jobs: GpuJobs::Rigid })
            .expect("loads")
            .workload;
    assert_eq!((limited.jobs.len(), limited.nodes.len()), (100, 4));
    assert_eq!(limited.jobs[..], w.jobs[..100]);
}

#[test]
fn a_scenario_names_its_profiles_in_model_and_refuses_what_does_not_fit() {
    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::create_dir(dir.path().join("profiles")).expect("mkdir");
    std::fs::write(dir.path().join("profiles/learner.toml"), wasmsched_sim::profile::sample().to_toml())
        .expect("write");
    let node = "[[node]]\ncores = 2\nmemory = \"4GiB\"\n";
    let profile = "[[profile]]\nfile = \"profiles/learner.toml\"\nname = \"small\"\n";
    let load = |body: &str| {
        let path = dir.path().join("s.toml");
        std::fs::write(&path, format!("{node}{profile}{body}")).expect("write");
        Scenario::load(&path, &LoadOptions::default()).map(|s| s.workload)
    };
    let w = load("[[job]]\nname = \"a\"\nmodel = \"small\"\ncount = 2\n[[job]]\nname = \"b\"\nmodel = \"ncf\"\n")
        .expect("loads");
    let names: Vec<&str> = w.jobs.iter().map(|j| j.model_name()).collect();
    assert_eq!(names, ["small", "small", "ncf"]);
    assert!(w.jobs[0].profile.is_some() && w.jobs[2].profile.is_none());
    let targets = w.clone().with_default_targets();
    assert_eq!(targets.jobs[0].tiers, Some(wasmsched_sim::profile::sample().curve().default_tiers()));
    let refused = [
        ("[[job]]\nname = \"a\"\nmodel = \"small\"\nbatch-size = 64\n", "has one measured curve"),
        ("[[job]]\nname = \"a\"\nmodel = \"learner\"\n", "or the name of a [[profile]]"),
        ("[[job]]\nname = \"a\"\nmodel = \"small\"\ntiers = [0.6, 0.4]\n", "wrong order"),
    ];
    for (body, says) in refused {
        let err = load(body).expect_err(body).to_string();
        assert!(err.contains(says), "{body}: {err}");
    }
    std::fs::remove_file(dir.path().join("profiles/learner.toml")).expect("rm");
    let err = load("[[job]]\nname = \"a\"\nmodel = \"small\"\n").expect_err("no file").to_string();
    assert!(err.contains("`file`") && err.contains("wasmsched calibrate --out"), "{err}");
}

#[test]
fn sias_clusters_have_64_gpus_of_their_types_and_refuse_a_node_count() {
    let csv = "name,time,application,num_replicas,batch_size\na,0,cifar10,2,256\n";
    for (cluster, types) in [
        (Cluster::Heterogeneous64, vec![("a100", 16), ("rtx", 24), ("t4", 24)]),
        (Cluster::Homogeneous64, vec![("t4", 64)]),
    ] {
        let opts = LoadOptions { cluster: Some(cluster), ..LoadOptions::default() };
        let w = Scenario::from_pollux_csv("w.csv", csv, &opts).expect("loads").workload;
        let mut gpus: std::collections::BTreeMap<&str, u32> = Default::default();
        for n in &w.nodes {
            *gpus.entry(n.gpu_type.as_str()).or_default() += n.gpus;
        }
        assert_eq!(gpus.into_iter().collect::<Vec<_>>(), types, "{}", cluster.name());
        assert_eq!(Cluster::parse(cluster.name()), Ok(cluster));
    }
    let both = LoadOptions { cluster: Some(Cluster::Homogeneous64), nodes: Some(4), limit: None, jobs: GpuJobs::Rigid };
    let e = Scenario::from_pollux_csv("w.csv", csv, &both).unwrap_err().to_string();
    assert!(e.contains("has its own nodes"), "{e}");
    assert!(Cluster::parse("mixed").unwrap_err().contains("heterogeneous-64, homogeneous-64"));
}

#[test]
fn a_nodes_gpu_type_is_one_the_simulator_measured() {
    let node = |gpu_type: &str| {
        format!(
            "name = \"t\"\n[[node]]\nname = \"n\"\ncores = 8\nmemory = \"32GiB\"\ngpus = 8\ngpu-memory = \"40GiB\"\n\
             gpu-type = \"{gpu_type}\"\n[[job]]\nname = \"j\"\nmodel = \"cifar10\"\ngpus = 1\n"
        )
    };
    let w = Scenario::from_toml_str("t", &node("dgx-ext")).expect("Sia's name for it").workload;
    assert_eq!(w.nodes[0].gpu_type, "a100");
    let e = Scenario::from_toml_str("t", &node("h100")).unwrap_err().to_string();
    assert!(
        e.contains("\"h100\" is not a GPU type the simulator has measurements of: write one of t4, rtx, a100"),
        "{e}"
    );
}
