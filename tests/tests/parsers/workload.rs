//! Workloads: scenario TOML, Pollux and Philly CSVs, and `Workload::load`'s dispatch.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use wasmsched::bindings::wit;
use wasmsched::error_chain;
use wasmsched::scenario::{LoadOptions, Scenario};
use wasmsched::sim::model::Model;
use wasmsched::sim::workload::Workload;

use super::{Checked, apply, bytes, cases, csv_lines, csv_values, edits, file, names, toml_lines, toml_values};

/// What any workload that loads must be.
fn check_workload(w: &Workload) -> Checked {
    prop_assert!(!w.nodes.is_empty() && !w.jobs.is_empty());
    prop_assert!(w.nodes.iter().all(|n| n.cpu_millicores >= 1));
    let mut names: Vec<&str> = w.nodes.iter().map(|n| n.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    prop_assert_eq!(names.len(), w.nodes.len(), "node names are unique");
    let mut names: Vec<&str> = w.jobs.iter().map(|j| j.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    prop_assert_eq!(names.len(), w.jobs.len(), "job names are unique");
    prop_assert!(w.jobs.windows(2).all(|p| p[0].arrival_s <= p[1].arrival_s), "sorted by arrival");
    for j in &w.jobs {
        prop_assert!(!j.name.trim().is_empty(), "{j:?}");
        prop_assert!(j.arrival_s.is_finite() && j.arrival_s >= 0.0, "{}: arrival {}", j.name, j.arrival_s);
        prop_assert!(j.work_scale.is_finite() && j.work_scale > 0.0, "{}: work scale {}", j.name, j.work_scale);
        prop_assert!(j.batch_size >= 1 && j.replicas >= 1 && j.max_epochs.is_none_or(|e| e >= 1), "{j:?}");
        prop_assert!(j.node.is_none_or(|n| (n as usize) < w.nodes.len()), "{j:?}");
        prop_assert!(j.tiers.is_none_or(|(a, b)| a.is_finite() && b.is_finite()), "{j:?}");
        for x in [j.qoe_target, j.request_rate, j.duration_s].into_iter().flatten() {
            prop_assert!(x.is_finite() && x > 0.0, "{j:?}");
        }
        if j.kind == wit::JobKind::Inference {
            prop_assert!(j.request_rate.is_some() && j.duration_s.is_some(), "{j:?}");
        }
    }
    Ok(())
}

/// A workload that loads is valid; an error names the input, and any line it gives is one.
pub(super) fn check_loaded(result: Result<Scenario, impl std::error::Error>, input: &str, text: &str) -> Checked {
    match result {
        Ok(s) => check_workload(&s.workload),
        Err(e) => names(&e, input, text.lines().count()),
    }
}

#[derive(Clone, Debug)]
struct NodeGen {
    half_cores: u32,
    mib: u32,
    gpus: u32,
    gpu_gib: u32,
}

#[derive(Clone, Debug)]
struct JobGen {
    model: Model,
    arrival_s: u32,
    node: Option<usize>,
    batch: Option<u32>,
    gpus: u32,
    replicas: Option<u32>,
    max_epochs: Option<u32>,
    work_scale: Option<f64>,
    qoe: Option<u32>,
    tiers: bool,
    /// Inference: requests per second and seconds of service.
    inference: Option<(u32, u32)>,
    /// `count` and `every` (seconds).
    count: Option<(u32, u32)>,
}

fn scenario() -> impl Strategy<Value = (Vec<NodeGen>, Vec<JobGen>)> {
    let node = (1..=256u32, 1..=1u32 << 20, 0..=8u32, 1..=80u32).prop_map(|(half_cores, mib, gpus, gpu_gib)| NodeGen {
        half_cores,
        mib,
        gpus,
        gpu_gib,
    });
    let job = (
        (
            prop::sample::select(Model::ALL.to_vec()),
            0..100_000u32,
            any::<Option<usize>>(),
            prop::option::of(1..=4096u32),
        ),
        (0..=16u32, prop::option::of(1..=4u32), prop::option::of(1..=200u32), prop::option::of(1..=500u32)),
        (prop::option::of(1..=1000u32), any::<bool>(), prop::option::of((1..=100u32, 1..=86_400u32))),
        prop::option::of((1..=5u32, 0..=600u32)),
    )
        .prop_map(
            |((model, arrival_s, node, batch), (gpus, replicas, max_epochs, scale), (qoe, tiers, inference), count)| {
                let work_scale = scale.map(|s| f64::from(s) / 100.0);
                JobGen {
                    model,
                    arrival_s,
                    node,
                    batch,
                    gpus,
                    replicas,
                    max_epochs,
                    work_scale,
                    qoe,
                    tiers,
                    inference,
                    count,
                }
            },
        );
    (prop::collection::vec(node, 1..4), prop::collection::vec(job, 1..5))
}

fn scenario_text(name: Option<&str>, nodes: &[NodeGen], jobs: &[JobGen]) -> String {
    let mut text = name.map_or(String::new(), |n| format!("name = \"{n}\"\n"));
    for (i, n) in nodes.iter().enumerate() {
        text += &format!(
            "\n[[node]]\nname = \"n{i}\"\ncores = {}\nmemory = \"{}MiB\"\n",
            f64::from(n.half_cores) / 2.0,
            n.mib
        );
        if n.gpus > 0 {
            text += &format!("gpus = {}\ngpu-memory = \"{}GiB\"\n", n.gpus, n.gpu_gib);
        }
    }
    for (i, j) in jobs.iter().enumerate() {
        text +=
            &format!("\n[[job]]\nname = \"j{i}\"\nmodel = \"{}\"\narrival = \"{}s\"\n", j.model.name(), j.arrival_s);
        let mut key = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                text += &format!("{k} = {v}\n");
            }
        };
        key("node", j.node.map(|n| format!("\"n{}\"", n % nodes.len())));
        key("batch-size", j.batch.map(|b| b.to_string()));
        key("gpus", Some(j.gpus.to_string()));
        key("replicas", j.replicas.map(|r| r.to_string()));
        key("max-epochs", j.max_epochs.map(|e| e.to_string()));
        key("work-scale", j.work_scale.map(|w| format!("{w:?}")));
        key("qoe-target", j.qoe.map(|q| q.to_string()));
        key("count", j.count.map(|c| c.0.to_string()));
        key("every", j.count.map(|c| format!("\"{}s\"", c.1)));
        match j.inference {
            Some((rate, duration)) => {
                key("kind", Some("\"inference\"".into()));
                key("request-rate", Some(rate.to_string()));
                key("duration", Some(format!("\"{duration}s\"")));
            }
            None if j.tiers => {
                let (t1, t2) = j.model.curve(j.batch.unwrap_or(j.model.default_batch_size())).default_tiers();
                key("tiers", Some(format!("[{t1:?}, {t2:?}]")));
            }
            None => {}
        }
    }
    text
}

/// The scenario's jobs as the loader must give them: expanded, then sorted by arrival.
fn check_scenario(w: &Workload, nodes: &[NodeGen], jobs: &[JobGen]) -> Checked {
    prop_assert_eq!(w.nodes.len(), nodes.len());
    for (i, (got, n)) in w.nodes.iter().zip(nodes).enumerate() {
        prop_assert_eq!(&got.name, &format!("n{i}"));
        prop_assert_eq!(got.cpu_millicores, u64::from(n.half_cores) * 500);
        prop_assert_eq!(got.memory_bytes, u64::from(n.mib) << 20);
        prop_assert_eq!(
            (got.gpus, got.gpu_memory_bytes),
            (n.gpus, if n.gpus > 0 { u64::from(n.gpu_gib) << 30 } else { 0 })
        );
    }
    let mut expected = Vec::new();
    for (i, j) in jobs.iter().enumerate() {
        let (count, every) = j.count.unwrap_or((1, 0));
        for k in 0..count {
            let name = if j.count.is_some() { format!("j{i}-{k}") } else { format!("j{i}") };
            expected.push((name, f64::from(j.arrival_s + every * k), j));
        }
    }
    expected.sort_by(|a, b| a.1.total_cmp(&b.1));
    prop_assert_eq!(w.jobs.len(), expected.len());
    for (got, (name, arrival_s, j)) in w.jobs.iter().zip(&expected) {
        prop_assert_eq!((&got.name, got.arrival_s, got.model), (name, *arrival_s, j.model));
        prop_assert_eq!(got.node, j.node.map(|n| (n % nodes.len()) as u32));
        prop_assert_eq!(got.batch_size, j.batch.unwrap_or(j.model.default_batch_size()));
        prop_assert_eq!((got.gpus, got.replicas, got.max_epochs), (j.gpus, j.replicas.unwrap_or(1), j.max_epochs));
        prop_assert_eq!((got.work_scale, got.qoe_target), (j.work_scale.unwrap_or(1.0), j.qoe.map(f64::from)));
        let inference = j.inference.map(|(r, d)| (f64::from(r), f64::from(d)));
        prop_assert_eq!(got.request_rate.zip(got.duration_s), inference);
        prop_assert_eq!(got.tiers.is_some(), j.tiers && j.inference.is_none());
    }
    Ok(())
}

#[derive(Clone, Debug)]
struct PolluxRow {
    arrival: (String, f64),
    model: Model,
    upper: bool,
    gpus: u32,
    batch: u32,
}

fn pollux() -> impl Strategy<Value = (Vec<usize>, Vec<PolluxRow>)> {
    let row = (
        prop_oneof![(0..1_000_000u32).prop_map(f64::from), (0..1_000_000u32).prop_map(|t| f64::from(t) / 8.0)],
        prop::sample::select(Model::ALL.to_vec()),
        any::<bool>(),
        0..=64u32,
        1..=4096u32,
    )
        .prop_map(|(t, model, upper, gpus, batch)| PolluxRow {
            arrival: (t.to_string(), t),
            model,
            upper,
            gpus,
            batch,
        });
    (Just((0..5).collect::<Vec<usize>>()).prop_shuffle(), prop::collection::vec(row, 1..8))
}

fn pollux_text(order: &[usize], rows: &[PolluxRow]) -> String {
    const COLUMNS: [&str; 5] = ["name", "time", "application", "num_replicas", "batch_size"];
    let mut text = order.iter().map(|&c| COLUMNS[c]).collect::<Vec<_>>().join(",") + "\n";
    for (i, r) in rows.iter().enumerate() {
        let model = if r.upper { r.model.name().to_uppercase() } else { r.model.name().to_string() };
        let cells = [format!("job-{i}"), r.arrival.0.clone(), model, r.gpus.to_string(), r.batch.to_string()];
        text += &(order.iter().map(|&c| cells[c].as_str()).collect::<Vec<_>>().join(",") + "\n");
    }
    text
}

#[derive(Clone, Debug)]
struct PhillyRow {
    day: u32,
    second: u32,
    duration_s: u32,
    gpus: u32,
    gpu_time_s: u32,
}

fn philly() -> impl Strategy<Value = (Vec<usize>, Vec<PhillyRow>)> {
    let row = (1..=28u32, 0..86_400u32, 0..200_000u32, 0..=32u32, 0..5_000_000u32).prop_map(
        |(day, second, duration_s, gpus, gpu_time_s)| PhillyRow { day, second, duration_s, gpus, gpu_time_s },
    );
    (Just((0..5).collect::<Vec<usize>>()).prop_shuffle(), prop::collection::vec(row, 1..8))
}

fn philly_text(order: &[usize], rows: &[PhillyRow]) -> String {
    const COLUMNS: [&str; 5] = ["timestamp", "duration", "num_gpus", "gpu_time", "cluster"];
    let mut text = order.iter().map(|&c| COLUMNS[c]).collect::<Vec<_>>().join(",") + "\n";
    for r in rows {
        let (h, m, s) = (r.second / 3600, r.second / 60 % 60, r.second % 60);
        let cells = [
            format!("2017-10-{:02} {h:02}:{m:02}:{s:02}", r.day),
            r.duration_s.to_string(),
            r.gpus.to_string(),
            r.gpu_time_s.to_string(),
            "c1".into(),
        ];
        text += &(order.iter().map(|&c| cells[c].as_str()).collect::<Vec<_>>().join(",") + "\n");
    }
    text
}

/// The Philly mapping of the workload module's docs, for the rows it keeps.
fn check_philly(w: &Workload, rows: &[PhillyRow]) -> Checked {
    let kept: Vec<(usize, &PhillyRow)> =
        (1..).zip(rows).filter(|(_, r)| r.duration_s >= 60 && f64::from(r.gpu_time_s) < 1000.0 * 3600.0).collect();
    let start = |r: &PhillyRow| f64::from(r.day * 86_400 + r.second);
    let earliest = kept.iter().map(|(_, r)| start(r)).fold(f64::INFINITY, f64::min);
    prop_assert_eq!(w.jobs.len(), kept.len());
    for (row, r) in kept {
        let name = format!("philly-{row}");
        let job = w.jobs.iter().find(|j| j.name == name);
        prop_assert!(job.is_some(), "{name} is missing");
        let job = job.expect("just checked");
        let hours = f64::from(r.gpu_time_s) / 3600.0;
        let model = match (hours, row % 2 == 1) {
            (h, true) if h < 1.0 => Model::Cifar10,
            (h, false) if h < 1.0 => Model::Ncf,
            (h, true) if h < 10.0 => Model::Deepspeech2,
            (h, false) if h < 10.0 => Model::Bert,
            (h, _) if h < 100.0 => Model::Yolov3,
            _ => Model::Imagenet,
        };
        prop_assert_eq!((job.model, job.gpus, job.replicas), (model, r.gpus, r.gpus.max(1)));
        prop_assert_eq!(job.arrival_s, start(r) - earliest);
    }
    Ok(())
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn any_workload_file_loads_or_names_its_path(
        bytes in bytes(),
        name in prop::sample::select(vec!["w.toml", "w.csv", "w.CSV", "w.txt", "w", ".toml"]),
    ) {
        let (_dir, path) = file(name, &bytes);
        let label = path.display().to_string();
        check_loaded(Scenario::load(&path, &LoadOptions::default()), &label, &String::from_utf8_lossy(&bytes))?;
        if let Ok(text) = std::str::from_utf8(&bytes) {
            check_loaded(Scenario::from_toml_str("input-7", text), "input-7", text)?;
            check_loaded(Scenario::from_pollux_csv("input-7", text, &LoadOptions::default()), "input-7", text)?;
        }
        let lossy = String::from_utf8_lossy(&bytes);
        check_loaded(Scenario::from_philly_csv("input-7", &bytes[..], &LoadOptions::default()), "input-7", &lossy)?;
    }

    #[test]
    fn a_valid_scenario_gives_its_nodes_and_jobs(
        name in prop::option::of("[a-z][a-z0-9 -]{0,12}"),
        (nodes, jobs) in scenario(),
    ) {
        let text = scenario_text(name.as_deref(), &nodes, &jobs);
        let w = Scenario::from_toml_str("gen-1", &text).map_err(|e| TestCaseError::fail(format!("{}\n{text}", error_chain(&e))))?.workload;
        prop_assert_eq!(w.name.as_str(), name.as_deref().unwrap_or("gen-1"));
        check_scenario(&w, &nodes, &jobs)?;
        check_workload(&w)?;
    }

    #[test]
    fn a_scenario_near_a_valid_one_loads_or_names_itself_and_the_line(
        input in "[a-z]{1,6}-[0-9]{1,3}",
        (nodes, jobs) in scenario(),
        edits in edits(toml_values(), toml_lines()),
    ) {
        let text = apply(&scenario_text(None, &nodes, &jobs), &edits, false);
        check_loaded(Scenario::from_toml_str(&input, &text), &input, &text)?;
    }

    #[test]
    fn a_valid_pollux_csv_gives_its_jobs_whatever_the_column_order((order, rows) in pollux()) {
        let text = pollux_text(&order, &rows);
        let (_dir, path) = file("workload-gen.csv", text.as_bytes());
        let w = Scenario::load(&path, &LoadOptions::default()).map_err(|e| TestCaseError::fail(error_chain(&e)))?.workload;
        prop_assert_eq!((w.name.as_str(), w.nodes.len(), w.jobs.len()), ("workload-gen", 16, rows.len()));
        for (i, r) in rows.iter().enumerate() {
            let job = w.jobs.iter().find(|j| j.name == format!("job-{i}")).expect("every row is a job");
            prop_assert_eq!((job.arrival_s, job.model), (r.arrival.1, r.model));
            prop_assert_eq!((job.gpus, job.replicas, job.batch_size), (r.gpus, r.gpus.max(1), r.batch));
        }
        check_workload(&w)?;
    }

    #[test]
    fn a_pollux_csv_near_a_valid_one_loads_or_names_itself_and_the_line(
        (order, rows) in pollux(),
        edits in edits(csv_values(), csv_lines()),
    ) {
        let text = apply(&pollux_text(&order, &rows), &edits, true);
        check_loaded(Scenario::from_pollux_csv("input-3", &text, &LoadOptions::default()), "input-3", &text)?;
        let (_dir, path) = file("w.csv", text.as_bytes());
        check_loaded(Scenario::load(&path, &LoadOptions::default()), &path.display().to_string(), &text)?;
    }

    #[test]
    fn a_valid_philly_trace_keeps_and_maps_its_rows_as_documented((order, rows) in philly()) {
        let text = philly_text(&order, &rows);
        match Scenario::from_philly_csv("trace-9", text.as_bytes(), &LoadOptions::default()) {
            Ok(s) => {
                check_philly(&s.workload, &rows)?;
                check_workload(&s.workload)?;
            }
            Err(e) => {
                prop_assert!(rows.iter().all(|r| r.duration_s < 60 || r.gpu_time_s >= 3_600_000), "{}", error_chain(&e));
                names(&e, "trace-9", text.lines().count())?;
            }
        }
    }

    #[test]
    fn a_philly_trace_near_a_valid_one_loads_or_names_itself_and_the_line(
        (order, rows) in philly(),
        edits in edits(csv_values(), csv_lines()),
    ) {
        let text = apply(&philly_text(&order, &rows), &edits, true);
        check_loaded(Scenario::from_philly_csv("trace-2", text.as_bytes(), &LoadOptions::default()), "trace-2", &text)?;
    }
}
