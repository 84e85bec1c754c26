use serde_json::json;

use wasmsched_core::bindings::wit::Direction;
use wasmsched_sim::model::Model;
use wasmsched_sim::workload::{JobPlan, NodeSpec};

use super::charts::normalised;
use super::lanes::{Mark, Stretch, gpu_uses, pack, placements_of};
use super::*;
use crate::experiment::paper::{Claim, Figure, Measured};
use crate::experiment::run::{JobSample, Sample};
use crate::experiment::sweep::{Axis, Point};

fn node(name: &str, gpus: u32) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        cpu_millicores: 8000,
        memory_bytes: 64 << 30,
        gpus,
        gpu_memory_bytes: 32 << 30,
        gpu_type: String::new(),
        domains: Vec::new(),
    }
}

fn plan(name: &str, arrival_s: f64) -> JobPlan {
    JobPlan { max_epochs: Some(5), tiers: Some((0.5, 0.8)), ..JobPlan::training(name, Model::Cifar10, arrival_s) }
}

fn workload(names: &[&str]) -> Scenario {
    let jobs = names.iter().enumerate().map(|(i, n)| plan(n, 10.0 * i as f64)).collect();
    let mut w = Scenario::of(Workload::of("tiny & <odd>", vec![node("n0", 0), node("n1", 0)], jobs));
    w.claims = vec![Claim {
        policy: "flowcon".into(),
        figure: Figure::MeanJct,
        value: Some(-0.1),
        source: "FlowCon <paper> & co".into(),
        baseline: None,
    }];
    w
}

fn outcome(name: &str, jct_s: Option<f64>, progress: Vec<(f64, f64)>) -> JobOutcome {
    JobOutcome {
        name: name.into(),
        model: "cifar10".into(),
        tenant: "default".into(),
        gpus: 1,
        arrival_s: 0.0,
        finish_s: jct_s,
        jct_s,
        targets_reached_s: vec![Some(30.0), None],
        delivered_s: None,
        satisfied: Some(true),
        qoe: None,
        migrations: 1,
        preemptions: 0,
        waited_s: Some(0.0),
        gpu_s: 0.0,
        stopped: false,
        epochs: 5,
        progress,
        pending: None,
    }
}

fn run(policy: &str, seed: u64, jobs: Vec<JobOutcome>, timeline: Vec<Sample>) -> RunReport {
    let jcts: Vec<f64> = jobs.iter().filter_map(|j| j.jct_s).collect();
    RunReport {
        policy: policy.into(),
        digest: "00".into(),
        seed,
        makespan_s: jcts.iter().copied().fold(0.0, f64::max),
        mean_jct_s: crate::experiment::run::mean(&jcts),
        p95_jct_s: 90.0,
        satisfied: 1,
        with_qoe_target: 2,
        cpu_utilisation: 0.5,
        policy_calls: 10,
        policy_time_ms: 1.0,
        policy_call_ms: [0.1, 0.2],
        fallbacks: 0,
        rejected_actions: 0,
        disruptions: 0,
        over_budget: 0,
        rescues: 0,
        benched: None,
        unfinished: None,
        wall_ms: 3.0,
        jobs,
        timeline,
        fairness: None,
    }
}

/// A job on `node` using `cpu` cores under `cpu_limit`, without GPUs.
fn on(job: u32, node: u32, cpu: f64, cpu_limit: Option<f64>) -> JobSample {
    JobSample { job, node, cpu, cpu_limit, gpus: Vec::new(), gpu_share: None, gpu_used: None }
}

/// Every job on node 0 at five ticks, limited to 4 cores when `limits`.
fn timeline(jobs: u32, limits: bool) -> Vec<Sample> {
    (0..5)
        .map(|t| Sample {
            time_s: 30.0 * t as f64,
            jobs: (0..jobs).map(|job| on(job, 0, 1.0 + f64::from(job), limits.then_some(4.0))).collect(),
        })
        .collect()
}

/// fair-share (no limits) and flowcon (limits) over two seeds, the first with timelines.
fn two_policies() -> (Comparison, Scenario) {
    let w = workload(&["a<b", "plain"]);
    let jobs = |scale: f64| {
        vec![
            outcome("a<b", Some(60.0 * scale), vec![(0.0, 0.1), (30.0, 0.5), (60.0, 0.8)]),
            outcome("plain", Some(90.0 * scale), vec![(10.0, 0.2), (100.0, 0.7)]),
        ]
    };
    let runs = vec![
        run("fair-share", 0, jobs(1.0), timeline(2, false)),
        run("fair-share", 1, jobs(1.1), Vec::new()),
        run("flowcon", 0, jobs(0.8), timeline(2, true)),
        run("flowcon", 1, jobs(0.9), Vec::new()),
    ];
    (Comparison { workload: w.workload.name.clone(), runs }, w)
}

fn write(title: &str, scenarios: &[Compared<'_>]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = write_html(title, scenarios, dir.path()).unwrap();
    assert_eq!(path, dir.path().join("index.html"));
    std::fs::read_to_string(path).unwrap()
}

fn page_of(comparison: &Comparison, scenario: &Scenario) -> String {
    write("Report", &[Compared { comparison, scenario, recorded: None }])
}

/// Every number in an SVG attribute or a sort key parses as a finite float.
fn assert_numbers_are_finite(html: &str) {
    let attrs = [
        " x=\"",
        " y=\"",
        " x1=\"",
        " x2=\"",
        " y1=\"",
        " y2=\"",
        " cx=\"",
        " cy=\"",
        " width=\"",
        " height=\"",
        " data-v=\"",
        " fill-opacity=\"",
        " stroke-width=\"",
    ];
    for attr in attrs {
        for rest in html.split(attr).skip(1) {
            let value = &rest[..rest.find('"').unwrap()];
            assert!(value.parse::<f64>().is_ok_and(f64::is_finite), "{attr}{value}");
        }
    }
    for rest in html.split(" points=\"").skip(1) {
        for pair in rest[..rest.find('"').unwrap()].split(' ') {
            for v in pair.split(',') {
                assert!(v.parse::<f64>().is_ok_and(f64::is_finite), "points {pair}");
            }
        }
    }
}

fn assert_clean(html: &str) {
    assert!(!html.contains("NaN"), "NaN in the page");
    assert!(!html.contains(">inf") && !html.contains("\"inf"), "inf in the page");
    assert_eq!(html.matches("<script").count(), 1, "the one inline script");
    assert!(!html.contains("http"), "nothing fetched");
    assert!(!html.contains("<pre"), "no preformatted tables");
    assert_eq!(html.matches("<svg").count(), html.matches("</svg>").count());
    assert_eq!(html.matches("<table").count(), html.matches("</table>").count());
    assert_eq!(html.matches("<table").count(), html.matches("<table class=\"sortable\"").count(), "every table sorts");
    assert_numbers_are_finite(html);
}

#[test]
fn each_policys_objective_comes_first_then_the_paper_then_the_summary() {
    let (comparison, workload) = two_policies();
    let html = page_of(&comparison, &workload);
    let at = |s: &str| html.find(s).unwrap_or_else(|| panic!("{s} missing"));
    assert!(at("Each policy's own objective") < at("Beside the paper"));
    assert!(at("Beside the paper") < at("<h3>Summary</h3>"));
    assert!(at("<h3>Summary</h3>") < at("<svg"), "tables before pictures");
    let objective = &html[at("id=\"objectives\"")..at("Beside the paper")];
    assert!(objective.contains("<td class=\"l\">flowcon</td><td class=\"l\">mean JCT</td>"), "{objective}");
    assert!(objective.contains("-10.0 %"), "the paper's value: {objective}");
    assert!(objective.contains("fair-share: "), "the baseline's value: {objective}");
    // flowcon's mean JCT is 0.8 then 0.9 of fair-share's: -20 % and -18.2 %, better.
    assert!(objective.contains("class=\"good\""), "{objective}");
    assert!(!objective.contains("<td class=\"l\">fair-share</td>"), "the baseline has no row of its own");
    // Two seeds: an interval, and a test that cannot find anything (p = 0.5).
    assert!(objective.contains("[-20.0 %, -18.2 %]") || objective.contains("[-20.0 %, -18.1 %]"), "{objective}");
    assert!(objective.contains(">p = 0.50<"), "{objective}");
    let paired = &html[at("Against the baseline, paired over seeds")..];
    assert!(at("<h3>Summary</h3>") < at("Against the baseline, paired over seeds"));
    assert!(paired.contains("<g class=\"paired\"><title>flowcon: mean JCT -19.1 % (2 seeds from"), "{paired}");
    assert!(paired.contains("no difference found at 2 seeds"), "the whole sentence in the tooltip");
    assert_clean(&html);
}

#[test]
fn every_table_sorts_and_the_job_tables_have_a_search_box() {
    let (comparison, workload) = two_policies();
    let html = page_of(&comparison, &workload);
    assert!(html.contains("table.sortable") && html.contains("data-v"), "the sorting script and its keys");
    assert_eq!(html.matches("class=\"filter\"").count(), 2, "one job table per policy");
    for id in ["s0-jobs-0", "s0-jobs-1"] {
        assert!(html.contains(&format!("data-table=\"{id}\"")) && html.contains(&format!("id=\"{id}\"")), "{id}");
    }
    assert!(html.contains("@media print"));
    assert_clean(&html);
}

#[test]
fn a_policy_without_limits_gets_a_line_instead_of_an_empty_chart() {
    let (comparison, workload) = two_policies();
    let html = page_of(&comparison, &workload);
    assert!(html.contains("fair-share set no CPU limit (seed 0)."));
    assert!(!html.contains("CPU limit per job: fair-share"));
    assert!(html.contains("CPU limit per job: flowcon (seed 0)"));
    assert_clean(&html);
}

#[test]
fn limits_draw_one_line_per_stretch() {
    let (mut comparison, workload) = two_policies();
    // Job 0 limited, then unlimited, then limited again: two stretches.
    comparison.runs[2].timeline = (0..6)
        .map(|t| Sample {
            time_s: 30.0 * t as f64,
            jobs: vec![on(0, 0, 1.0, (t != 2 && t != 3).then_some(2.0 + f64::from(t))), on(1, 0, 1.0, None)],
        })
        .collect();
    let html = page_of(&comparison, &workload);
    let limits = &html[html.find("CPU limit per job: flowcon").unwrap()..];
    let limits = &limits[..limits.find("</svg>").unwrap()];
    assert_eq!(limits.matches("<polyline").count(), 2, "{limits}");
    assert_clean(&html);
}

#[test]
fn progress_of_a_falling_loss_and_a_rising_accuracy_both_run_from_0_to_1() {
    let loss =
        normalised(&[(0.0, 25.0), (10.0, 18.0), (20.0, 13.0), (30.0, 12.0)], Some(13.0), Direction::LowerIsBetter);
    assert_eq!(loss.iter().map(|p| p.1).collect::<Vec<_>>(), [0.0, 7.0 / 12.0, 1.0, 1.0]);
    let accuracy = normalised(&[(0.0, 0.1), (10.0, 0.5), (20.0, 0.9)], Some(0.9), Direction::HigherIsBetter);
    assert_eq!(accuracy.iter().map(|p| p.1).collect::<Vec<_>>(), [0.0, 0.5, 1.0]);
    // No target: the last report is 1; a dip below the first is clamped to 0.
    let untargeted = normalised(&[(0.0, 0.4), (5.0, 0.3), (10.0, 0.6)], None, Direction::HigherIsBetter);
    assert_eq!(untargeted.iter().map(|p| p.1).collect::<Vec<_>>(), [0.0, 0.0, 1.0]);
    // Already at the target at the first report, a flat curve, non-finite reports.
    let there = normalised(&[(0.0, 0.95), (1.0, 0.97)], Some(0.9), Direction::HigherIsBetter);
    assert!(there.iter().all(|p| p.1 == 1.0));
    let odd =
        normalised(&[(0.0, f64::NAN), (1.0, 2.0), (f64::INFINITY, 3.0), (2.0, 2.0)], None, Direction::LowerIsBetter);
    assert_eq!(odd, [(1.0, 1.0), (2.0, 1.0)]);
    assert!(normalised(&[], Some(1.0), Direction::HigherIsBetter).is_empty());

    // On the page: one axis from 0 to 1 for a yolov3 (loss) job and a cifar10 (accuracy) one.
    let mut w = workload(&["yolo", "cifar"]);
    w.workload.jobs[0] = JobPlan { tiers: Some((15.0, 13.0)), ..JobPlan::training("yolo", Model::Yolov3, 0.0) };
    let jobs = vec![
        outcome("yolo", Some(30.0), vec![(0.0, 25.0), (30.0, 13.0)]),
        outcome("cifar", Some(30.0), vec![(0.0, 0.1), (30.0, 0.8)]),
    ];
    let comparison = Comparison { workload: "w".into(), runs: vec![run("fair-share", 0, jobs, timeline(2, false))] };
    let html = page_of(&comparison, &w);
    assert!(
        html.contains("yolo (loss ↓)") && html.contains("cifar (accuracy ↑)"),
        "metric and direction in the legend"
    );
    let chart = &html[html.find("Progress toward target: fair-share").unwrap()..];
    let chart = &chart[..chart.find("</svg>").unwrap()];
    // Both lines end on the same pixel row: the target.
    let ends: Vec<&str> =
        chart.split("<circle").skip(1).map(|c| c.split("cy=\"").nth(1).unwrap().split('"').next().unwrap()).collect();
    assert_eq!(ends.len(), 2);
    assert_eq!(ends[0], ends[1], "{chart}");
    assert_clean(&html);
}

#[test]
fn the_node_timeline_marks_a_migration_and_a_preemption() {
    let sample = |t: f64, jobs: Vec<JobSample>| Sample { time_s: t, jobs };
    let timeline = vec![
        sample(0.0, vec![on(0, 0, 1.0, None), on(1, 0, 1.0, None)]),
        sample(30.0, vec![on(0, 0, 1.0, None), on(1, 0, 1.0, None)]),
        sample(60.0, vec![on(0, 1, 1.0, None)]),
        sample(90.0, vec![on(0, 1, 1.0, None), on(1, 0, 1.0, None)]),
    ];
    let (stretches, marks) = placements_of(&timeline);
    assert_eq!(
        stretches,
        [
            Stretch { job: 0, node: 0, from_s: 0.0, to_s: 60.0 },
            Stretch { job: 1, node: 0, from_s: 0.0, to_s: 60.0 },
            Stretch { job: 1, node: 0, from_s: 90.0, to_s: 120.0 },
            Stretch { job: 0, node: 1, from_s: 60.0, to_s: 120.0 },
        ]
    );
    assert_eq!(
        marks,
        [Mark::Migration { job: 0, at_s: 60.0, from: 0, to: 1 }, Mark::Preemption { job: 1, at_s: 60.0, node: 0 }]
    );

    let (mut comparison, workload) = two_policies();
    comparison.runs[0].timeline = timeline;
    let html = page_of(&comparison, &workload);
    let lanes = &html[html.find("Jobs on nodes: fair-share").unwrap()..];
    let lanes = &lanes[..lanes.find("</svg>").unwrap()];
    assert_eq!(lanes.matches("<g class=\"migration\">").count(), 1, "{lanes}");
    assert!(lanes.contains("a&lt;b migrated from n0 to n1 at 60 s"), "{lanes}");
    assert_eq!(lanes.matches("<g class=\"preemption\">").count(), 1, "{lanes}");
    assert_eq!(lanes.matches("<g class=\"stretch\">").count(), 4);
    assert_clean(&html);
}

#[test]
fn jobs_at_once_on_a_node_get_rows_of_their_own_and_a_later_one_reuses_a_free_row() {
    let at = |job, node, from_s, to_s| Stretch { job, node, from_s, to_s };
    let stretches =
        [at(0, 0, 0.0, 60.0), at(1, 0, 0.0, 30.0), at(2, 0, 30.0, 90.0), at(3, 0, 50.0, 70.0), at(4, 1, 0.0, 9.0)];
    let (rows, counts) = pack(&stretches);
    assert_eq!(rows, [0, 1, 1, 2, 0]);
    assert_eq!(counts.into_iter().collect::<Vec<_>>(), [(0, 3), (1, 1)]);
}

#[test]
fn the_gpu_section_appears_only_when_the_workload_has_gpus() {
    let (mut comparison, mut workload) = two_policies();
    let html = page_of(&comparison, &workload);
    assert!(!html.contains("<h3>GPUs</h3>"));

    workload.workload.nodes = vec![node("g0", 2)];
    let held = |job: u32, gpu: u32, used: f32| JobSample {
        gpus: vec![(0, gpu)],
        gpu_share: Some(50),
        gpu_used: Some(used),
        ..on(job, 0, 1.0, None)
    };
    comparison.runs[2].timeline = (0..4)
        .map(|t| Sample {
            time_s: 30.0 * f64::from(t),
            jobs: vec![held(0, 0, 40.0), held(1, if t < 2 { 0 } else { 1 }, 80.0)],
        })
        .collect();
    let uses = gpu_uses(&comparison.runs[2].timeline);
    // GPU 0 shared by both jobs for two ticks, then job 0 alone; GPU 1 job 1's from 60 s.
    assert_eq!(uses.len(), 4, "{uses:?}");
    assert_eq!((uses[0].slots, uses[0].from_s, uses[0].to_s), (2, 0.0, 60.0));
    assert_eq!((uses[2].job, uses[2].slots, uses[2].used), (0, 1, Some(40.0)));
    assert_eq!((uses[3].gpu, uses[3].from_s, uses[3].to_s, uses[3].share), ((0, 1), 60.0, 120.0, Some(50)));

    let html = page_of(&comparison, &workload);
    assert!(html.contains("<h3>GPUs</h3>"));
    assert!(html.contains("GPU holders and use: flowcon (seed 0)"));
    assert!(html.contains("<td class=\"l\">g0 GPU 1</td>"), "the per-GPU table");
    assert_eq!(html.matches("<g class=\"gpu-use\">").count(), 4);
    assert_clean(&html);
}

#[test]
fn hostile_names_are_escaped_everywhere() {
    let (mut comparison, mut workload) = two_policies();
    for r in &mut comparison.runs {
        if r.policy == "flowcon" {
            r.policy = "<script>alert('x')</script>".into();
        }
    }
    workload.claims[0].policy = "<script>alert('x')</script>".into();
    workload.workload.name = "\"quoted\" & <b>bold</b>".into();
    let html =
        write("<title> & \"more\"", &[Compared { comparison: &comparison, scenario: &workload, recorded: None }]);
    assert!(!html.contains("<script>alert"));
    assert!(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
    assert!(html.contains("&quot;quoted&quot; &amp; &lt;b&gt;bold&lt;/b&gt;"));
    assert!(html.contains("<h1>&lt;title&gt; &amp; &quot;more&quot;</h1>"));
    assert!(html.contains("a&lt;b") && !html.contains("a<b"));
    assert!(html.contains("FlowCon &lt;paper&gt; &amp; co"));
    assert_clean(&html);
}

#[test]
fn several_scenarios_get_a_section_each_and_one_objective_table_on_top() {
    let (comparison, workload) = two_policies();
    let mut other = workload.clone();
    other.workload.name = "second".into();
    let html = write(
        "Demo",
        &[
            Compared { comparison: &comparison, scenario: &workload, recorded: None },
            Compared { comparison: &comparison, scenario: &other, recorded: None },
        ],
    );
    assert!(html.contains("<section id=\"s0\">") && html.contains("<section id=\"s1\">"));
    assert!(html.contains("<a href=\"#s1\">second</a>"));
    let top = &html[html.find("id=\"objectives\"").unwrap()..html.find("<section").unwrap()];
    assert_eq!(top.matches("<td class=\"l\">flowcon</td>").count(), 2, "one row per scenario: {top}");
    assert!(html.contains("id=\"s1-objectives\""), "and each section's own");
    assert_clean(&html);
}

#[test]
fn unfinished_jobs_single_points_and_non_finite_inputs_draw_no_nan() {
    let workload = workload(&["only"]);
    let mut lone = outcome("only", None, vec![(5.0, f64::NAN), (7.0, 0.3)]);
    lone.targets_reached_s.clear();
    lone.satisfied = None;
    let one_sample =
        vec![Sample { time_s: 0.0, jobs: vec![on(0, 0, f64::INFINITY, Some(f64::NAN)), on(99, 7, 2.0, None)] }];
    let mut flat = run("flat", 0, vec![outcome("only", Some(0.0), vec![(0.0, 1.0), (0.0, 1.0)])], timeline(1, true));
    flat.makespan_s = f64::NAN;
    flat.policy_time_ms = f64::INFINITY;
    let comparison = Comparison {
        workload: "w".into(),
        runs: vec![run("stuck", 0, vec![lone], one_sample), run("empty", 0, Vec::new(), Vec::new()), flat],
    };
    let html = page_of(&comparison, &workload);
    assert!(html.contains("no job finished (of 1)"));
    assert!(html.contains("did not end"));
    assert!(html.contains("empty: no timeline recorded"));
    assert!(html.contains("node 7"), "a node the workload does not list");
    assert_clean(&html);
}

#[test]
fn zero_runs_and_zero_scenarios_still_write_a_page() {
    let workload = workload(&["x<y"]);
    let html = page_of(&Comparison { workload: workload.workload.name.clone(), runs: Vec::new() }, &workload);
    assert!(html.contains("no runs"));
    assert!(html.contains("1 jobs on 2 nodes"));
    assert_clean(&html);
    let html = write("nothing", &[]);
    assert!(html.contains("No scenario was given."));
    assert_clean(&html);
}

#[test]
fn more_than_twenty_jobs_draw_the_twenty_busiest_and_say_so() {
    let names: Vec<String> = (0..25).map(|i| format!("job-{i:02}")).collect();
    let workload = workload(&names.iter().map(String::as_str).collect::<Vec<_>>());
    let jobs = names.iter().map(|n| outcome(n, Some(10.0), Vec::new())).collect();
    let report = run("fair-share", 0, jobs, timeline(25, false));
    assert_eq!(busiest_jobs(&[&report], 25, 20), (5..25).rev().collect::<Vec<_>>());
    let html = page_of(&Comparison { workload: "w".into(), runs: vec![report] }, &workload);
    assert!(html.contains("Only the 20 jobs with the most CPU"));
    assert!(html.contains("5 other jobs"));
    assert!(html.contains("<td class=\"l\">job-00</td>"), "the table lists every job");
    assert_clean(&html);
}

fn paired_of(mean: f64) -> crate::stats::Paired {
    crate::stats::Paired::of(&[mean - 0.01, mean + 0.01], 0.0)
}

fn measured(mean: f64) -> Measured {
    Measured {
        policy: "flowcon".into(),
        baseline: "fair-share".into(),
        figure: Figure::BestJobJct,
        baseline_value: 100.0,
        value: 100.0 * (1.0 + mean),
        mean,
        sd: 0.01,
        range: (mean - 0.01, mean + 0.01),
        seeds: 2,
        paired: paired_of(mean),
        paper: Some(-0.42),
        source: "FlowCon".into(),
    }
}

fn sweep(axes: Vec<Axis>) -> Sweep {
    let mut points = Vec::new();
    let sizes: Vec<usize> = axes.iter().map(|a| a.values.len()).collect();
    let total: usize = sizes.iter().product();
    for n in 0..total {
        let mut at = vec![0; sizes.len()];
        let mut rest = n;
        for k in (0..sizes.len()).rev() {
            at[k] = rest % sizes[k];
            rest /= sizes[k];
        }
        let mean = -0.05 * n as f64 + 0.1;
        let config = axes.iter().zip(&at).map(|(a, &i)| (a.key.clone(), a.values[i].clone())).collect();
        let (measured, error) =
            if n == 1 { (None, Some("alpha <0 refused".to_string())) } else { (Some(measured(mean)), None) };
        points.push(Point { at, config, per_seed: vec![Some(mean), None], measured, error });
    }
    Sweep {
        workload: "flowcon-paper".into(),
        policy: "flowcon".into(),
        baseline: "fair-share".into(),
        figure: Figure::BestJobJct,
        paper: Some(-0.4206),
        seeds: vec![0, 1],
        axes,
        points,
    }
}

fn axis(key: &str, values: Vec<serde_json::Value>) -> Axis {
    Axis { key: key.into(), values }
}

fn write_sweep(s: &Sweep) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = write_sweep_html(s, dir.path()).unwrap();
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn the_sweep_heat_map_has_a_labelled_cell_per_point_and_frames_the_best() {
    let s = sweep(vec![
        axis("alpha", vec![json!(0.1), json!(0.5), json!(0.9)]),
        axis("mode", vec![json!("a"), json!("b")]),
    ]);
    let html = write_sweep(&s);
    assert_eq!(html.matches("<g class=\"cell\">").count(), 6);
    assert_eq!(html.matches("<g class=\"best\">").count(), 1);
    // The last point is best (-15 %): alpha=0.9, mode=b.
    assert!(html.contains("<title>best point: alpha=0.9 · mode=b</title>"));
    assert!(html.contains(">-15.0 %</text>"), "each cell labelled with its value");
    assert!(html.contains(">refused</text>") && html.contains("alpha &lt;0 refused"));
    assert!(html.contains("The paper reports -42.1 %"));
    assert!(html.contains("<strong>alpha=0.9 · mode=b</strong>"));
    assert!(html.contains("★ alpha=0.9 · mode=b"), "the best row of the table");
    // Blue for a gain, red for a loss: the first point (+10 %) is the reddest, the best the bluest.
    assert!(html.contains(&format!("fill=\"{}\"", svg::diverging(1.0))));
    assert!(html.contains(&format!("fill=\"{}\"", svg::diverging(-10.0 / 15.0))));
    assert_eq!(html.matches("<tr>").count(), 1 + 6, "a row per point");
    assert_clean(&html);
}

#[test]
fn a_sweep_of_one_axis_is_one_row_and_of_three_holds_the_third_at_the_best() {
    let one = write_sweep(&sweep(vec![axis("alpha", vec![json!(1), json!(2), json!(3), json!(4)])]));
    assert_eq!(one.matches("<g class=\"cell\">").count(), 4);
    assert!(!one.contains("Only the first two axes"));
    assert_clean(&one);

    let three = sweep(vec![
        axis("a", vec![json!(1), json!(2)]),
        axis("b", vec![json!(1), json!(2)]),
        axis("c", vec![json!("x"), json!("y")]),
    ]);
    let html = write_sweep(&three);
    assert_eq!(html.matches("<g class=\"cell\">").count(), 4, "the first two axes");
    assert!(html.contains("the others held at the best point&#39;s values: c=y"));
    assert_eq!(html.matches("<tr>").count(), 1 + 8, "the table has every point");
    assert_clean(&html);
}

#[test]
fn a_sweep_of_nothing_measured_still_writes_a_page() {
    let mut s = sweep(vec![axis("alpha", vec![json!(f64::MAX)])]);
    s.points[0].measured = None;
    s.points[0].per_seed = vec![None];
    s.paper = None;
    let html = write_sweep(&s);
    assert!(html.contains("No point could be measured."));
    assert!(html.contains(">not measured</text>"));
    assert_clean(&html);
}

#[test]
fn the_diverging_scale_runs_from_red_through_white_to_blue() {
    assert_eq!(svg::diverging(1.0), "#2166ac");
    assert_eq!(svg::diverging(-1.0), "#b2182b");
    assert_eq!(svg::diverging(0.0), "#f7f7f7");
    assert_eq!(svg::diverging(f64::NAN), "#f7f7f7");
    assert_eq!(svg::diverging(7.0), "#2166ac");
}

#[test]
fn ticks_step_by_one_two_or_five_times_a_power_of_ten() {
    assert_eq!(nice_step(0.7), 1.0);
    assert_eq!(nice_step(1.3), 2.0);
    assert_eq!(nice_step(30.0), 50.0);
    assert_eq!(nice_step(600.0), 1000.0);
    assert_eq!(nice_step(0.0), 1.0);
    assert_eq!(nice_step(f64::NAN), 1.0);
    let s = Scale::nice(0.0, 93.0, 0.0, 100.0);
    assert_eq!((s.lo, s.hi, s.step), (0.0, 100.0, 20.0));
    assert_eq!(s.ticks(), vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
    let flat = Scale::nice(0.5, 0.5, 0.0, 100.0);
    assert!(flat.lo < 0.5 && flat.hi > 0.5, "{flat:?}");
    assert_eq!(tick_label(0.30000000000000004, 0.1), "0.3");
}

#[test]
fn time_unit_follows_the_largest_value() {
    assert_eq!(TimeUnit::for_max(90.0), TimeUnit::S);
    assert_eq!(TimeUnit::for_max(600.0), TimeUnit::MIN);
    assert_eq!(TimeUnit::for_max(36_000.0), TimeUnit::H);
    assert_eq!(TimeUnit::for_max(f64::NAN), TimeUnit::S);
    assert_eq!(duration(5400.0), "90 min");
}

#[test]
fn quartiles_interpolate_between_ranks() {
    let xs = [1.0, 2.0, 3.0, 4.0];
    assert_eq!(quantile(&xs, 0.5), 2.5);
    assert_eq!(quantile(&xs, 0.0), 1.0);
    assert_eq!(quantile(&xs, 1.0), 4.0);
    assert_eq!(quantile(&[], 0.5), 0.0);
}

#[test]
fn escape_replaces_the_html_specials() {
    assert_eq!(escape(r#"a<b>&"c'"#), "a&lt;b&gt;&amp;&quot;c&#39;");
    assert_eq!(shorten("abcdef", 4), "abc…");
}
