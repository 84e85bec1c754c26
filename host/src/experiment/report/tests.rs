use super::*;
use crate::backend::sim::model::Model;
use crate::backend::sim::workload::{JobPlan, NodeSpec};
use crate::experiment::run::{JobSample, Sample};

fn plan(name: &str, arrival_s: f64) -> JobPlan {
    JobPlan { max_epochs: Some(5), ..JobPlan::training(name, Model::Cifar10, arrival_s) }
}

fn workload(names: &[&str]) -> Workload {
    let node =
        NodeSpec { name: "n0".into(), cpu_millicores: 8000, memory_bytes: 64 << 30, gpus: 0, gpu_memory_bytes: 0 };
    Workload::of("tiny & <odd>", vec![node], names.iter().enumerate().map(|(i, n)| plan(n, 10.0 * i as f64)).collect())
}

fn outcome(name: &str, jct_s: Option<f64>, progress: Vec<(f64, f64)>) -> JobOutcome {
    JobOutcome {
        name: name.into(),
        model: "cifar10".into(),
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
        stopped: false,
        epochs: 5,
        progress,
    }
}

fn run(policy: &str, seed: u64, jobs: Vec<JobOutcome>, timeline: Vec<Sample>) -> RunReport {
    RunReport {
        policy: policy.into(),
        digest: "00".into(),
        seed,
        makespan_s: 100.0,
        mean_jct_s: 50.0,
        p95_jct_s: 90.0,
        satisfied: 1,
        with_qoe_target: 2,
        cpu_utilisation: 0.5,
        policy_calls: 10,
        policy_time_ms: 1.0,
        fallbacks: 0,
        rejected_actions: 0,
        disruptions: 0,
        over_budget: 0,
        wall_ms: 3.0,
        jobs,
        timeline,
    }
}

/// A job on node 0 using `cpu` cores under `cpu_limit`, without GPUs.
fn on_cpu(job: u32, cpu: f64, cpu_limit: Option<f64>) -> JobSample {
    JobSample { job, node: 0, cpu, cpu_limit, gpus: Vec::new(), gpu_share: None, gpu_used: None }
}

fn timeline(jobs: u32) -> Vec<Sample> {
    (0..5)
        .map(|t| Sample {
            time_s: 30.0 * t as f64,
            jobs: (0..jobs).map(|job| on_cpu(job, 1.0 + f64::from(job), Some(4.0))).collect(),
        })
        .collect()
}

fn two_policies() -> (Comparison, Workload) {
    let w = workload(&["a<b", "plain"]);
    let jobs = |scale: f64| {
        vec![
            outcome("a<b", Some(60.0 * scale), vec![(0.0, 0.1), (30.0, 0.5), (60.0, 0.8)]),
            outcome("plain", Some(90.0 * scale), vec![(10.0, 0.2), (100.0, 0.7)]),
        ]
    };
    let runs = vec![
        run("fair-share", 0, jobs(1.0), timeline(2)),
        run("fair-share", 1, jobs(1.1), Vec::new()),
        run("flowcon", 0, jobs(0.8), timeline(2)),
        run("flowcon", 1, jobs(0.9), Vec::new()),
    ];
    (Comparison { workload: w.name.clone(), runs }, w)
}

fn write(comparison: &Comparison, workload: &Workload) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = write_html(comparison, workload, dir.path()).unwrap();
    assert_eq!(path, dir.path().join("index.html"));
    std::fs::read_to_string(path).unwrap()
}

/// Every number in an SVG attribute parses as a finite float.
fn assert_svg_numbers_are_finite(html: &str) {
    for attr in
        [" x=\"", " y=\"", " x1=\"", " x2=\"", " y1=\"", " y2=\"", " cx=\"", " cy=\"", " width=\"", " height=\""]
    {
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
    assert!(!html.contains("inf"), "inf in the page");
    assert!(!html.contains("<script"), "no JavaScript");
    assert!(!html.contains("http"), "nothing fetched");
    assert_svg_numbers_are_finite(html);
}

#[test]
fn report_has_a_chart_per_policy_and_escapes_every_name() {
    let (comparison, workload) = two_policies();
    let html = write(&comparison, &workload);
    // One JCT chart, then a CPU chart, a limits chart and a progress chart per policy.
    assert_eq!(html.matches("<svg").count(), 1 + 3 * 2);
    assert_eq!(html.matches("</svg>").count(), 1 + 3 * 2);
    assert!(html.contains("CPU limit per job: flowcon (seed 0)"));
    assert!(!html.contains("no CPU limit was set"), "both runs have limits");
    for policy in ["fair-share", "flowcon"] {
        assert!(html.contains(policy), "{policy} missing");
    }
    assert!(html.contains("a&lt;b"));
    assert!(!html.contains("a<b"));
    assert!(html.contains("tiny &amp; &lt;odd&gt;"));
    assert!(html.contains("<pre>") && html.contains("mean JCT s"), "the text table is on the page");
    assert!(html.contains("2 jobs on 1 nodes (8 cores)"));
    assert_clean(&html);
}

#[test]
fn limits_draw_one_line_per_stretch_and_a_run_without_limits_says_so() {
    let (mut comparison, workload) = two_policies();
    // Job 0 limited, then unlimited, then limited again: two stretches.
    comparison.runs[2].timeline = (0..6)
        .map(|t| Sample {
            time_s: 30.0 * t as f64,
            jobs: vec![on_cpu(0, 1.0, (t != 2 && t != 3).then_some(2.0 + f64::from(t))), on_cpu(1, 1.0, None)],
        })
        .collect();
    comparison.runs[0].timeline = Vec::new();
    let html = write(&comparison, &workload);
    let limits = &html[html.find("CPU limit per job: flowcon").unwrap()..];
    let limits = &limits[..limits.find("</svg>").unwrap()];
    assert_eq!(limits.matches("<polyline").count(), 2, "{limits}");
    assert!(html.contains("no CPU limit was set in this run"), "fair-share's first run has none");
    assert_clean(&html);
}

#[test]
fn zero_runs_still_write_a_page_with_the_jobs_of_the_workload() {
    let workload = workload(&["x<y"]);
    let html = write(&Comparison { workload: workload.name.clone(), runs: Vec::new() }, &workload);
    assert_eq!(html.matches("<svg").count(), 1, "only the JCT chart, saying there are no runs");
    assert!(html.contains("no runs"));
    assert!(html.contains("x&lt;y"));
    assert_clean(&html);
}

#[test]
fn unfinished_jobs_single_points_and_non_finite_inputs_draw_no_nan() {
    let workload = workload(&["only"]);
    let mut lone = outcome("only", None, vec![(5.0, f64::NAN), (7.0, 0.3)]);
    lone.targets_reached_s.clear();
    lone.satisfied = None;
    let one_sample = vec![Sample { time_s: 0.0, jobs: vec![on_cpu(0, f64::INFINITY, None), on_cpu(99, 2.0, None)] }];
    let comparison = Comparison {
        workload: "w".into(),
        runs: vec![
            run("stuck", 0, vec![lone.clone()], one_sample),
            run("empty", 0, Vec::new(), Vec::new()),
            run("flat", 0, vec![outcome("only", Some(0.0), vec![(0.0, 1.0), (0.0, 1.0)])], timeline(1)),
        ],
    };
    let html = write(&comparison, &workload);
    assert_eq!(html.matches("<svg").count(), 1 + 3 * 3);
    assert!(html.contains("no job finished (of 1)"));
    assert!(html.contains("did not end"));
    assert!(html.contains("no timeline recorded"));
    assert_clean(&html);
}

#[test]
fn more_than_twenty_jobs_draw_the_twenty_busiest_and_say_so() {
    let names: Vec<String> = (0..25).map(|i| format!("job-{i:02}")).collect();
    let workload = workload(&names.iter().map(String::as_str).collect::<Vec<_>>());
    let jobs = names.iter().map(|n| outcome(n, Some(10.0), Vec::new())).collect();
    let report = run("fair-share", 0, jobs, timeline(25));
    assert_eq!(busiest_jobs(&[&report], 25, 20), (5..25).rev().collect::<Vec<_>>());
    let html = write(&Comparison { workload: "w".into(), runs: vec![report] }, &workload);
    assert!(html.contains("Only the 20 jobs with the most CPU"));
    assert!(html.contains("5 other jobs"));
    assert_clean(&html);
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
