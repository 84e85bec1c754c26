//! Sia's Tables 3 and 4 (Subramanya et al., SOSP 2023) reproduced on our simulator: the
//! policies on Sia's workloads and 64-GPU clusters, our average and 99th-percentile JCT,
//! makespan and GPU-hours per job beside the published ones. `wasmsched fidelity sia-table-3`
//! and `sia-table-4` print them.
//!
//! How each policy runs, as in the paper:
//! - Sia and Pollux get **elastic** jobs (any GPU count, their own batch size; the workload's
//!   `num_replicas` and `batch_size` are where they start);
//! - Gavel and Themis get **TunedJobs** ([`GpuJobs::Tuned`]): rigid jobs at the workload's
//!   `num_replicas` and `batch_size`, which Sia's authors tuned per job, trained as long as
//!   the elastic ones and restarted at the same cost.
//!
//! Every policy is called each 60 s of simulated time (Gavel and Themis plan once per 360 s
//! round themselves) with a deadline of at least [`MIN_DEADLINE`]: these policies solve an
//! optimisation once a round, not a quick rule each tick. The watchdog's stall rule is off
//! ([`NO_STALL_RULE`]).
//!
//! The published figures pool the jobs of all traces: average JCT ± the standard deviation of
//! the traces' averages, p99 over all jobs, makespan ± the standard deviation over traces,
//! GPU-hours per job. Ours do the same over traces and seeds (a trace's figure is its mean over
//! the seeds). Table 4 ran TunedJobs re-tuned for the homogeneous cluster, which the artifact
//! does not hold; ours run the same TunedJobs on both clusters.

use std::fmt::Write as _;
use std::ops::Range;
use std::time::Duration;

use serde::Serialize;

use wasmsched_runtime::{Limits, Runtime};
use wasmsched_sim::SimConfig;

use super::batch::Task;
use super::run::{PolicyChoice, RunOptions, RunReport, mean, std_dev};
use crate::scenario::{Cluster, GpuJobs, LoadOptions, Scenario, WorkloadError};

/// The least per-call deadline the tables' runs get.
pub const MIN_DEADLINE: Duration = Duration::from_secs(2);

/// The watchdog's stall rule, off: these policies keep a job waiting that would fit by design
/// (its turn in Gavel's and Themis's rounds has not come; it fits only across GPU types, which
/// they never place; Sia and Pollux found more goodput elsewhere), and a rescue would make the
/// run another policy's. The watchdog's other rules still hold.
pub const NO_STALL_RULE: Duration = Duration::from_secs(365 * 24 * 3600);

/// The watchdog's livelock rule, off as well: Pollux moves a job every round while it finds
/// more goodput elsewhere, and on the heterogeneous cluster a job can be moved five times
/// before its restore delay has let it progress. The published figures are of the policy
/// doing that; benching it for the safe policy (as the rule did in 2 of Table 3's runs per
/// trace set, newTrace's Pollux then 2.4 h against 1.3 h) would make the run another policy's.
pub const NO_CHURN_RULE: u32 = u32::MAX;

/// What the tables are judged by: every average JCT within this fraction of the published one.
pub const TOLERANCE: f64 = 0.15;

/// One published row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Published {
    /// The policy as the paper names it.
    pub label: &'static str,
    /// Our shipped policy that runs it.
    pub policy: &'static str,
    /// Whether its jobs are elastic (else TunedJobs).
    pub elastic: bool,
    /// Average JCT, hours, and its deviation over traces where published.
    pub avg_jct_h: (f64, Option<f64>),
    /// 99th-percentile JCT, hours.
    pub p99_jct_h: f64,
    /// Makespan, hours, and its deviation over traces where published.
    pub makespan_h: (f64, Option<f64>),
    /// GPU-hours per job.
    pub gpu_h_per_job: f64,
}

/// One set of traces of a table.
#[derive(Clone, Copy, Debug)]
pub struct TraceSet {
    /// Its name in the paper.
    pub name: &'static str,
    /// (workload name, CSV text), in order.
    pub traces: &'static [(&'static str, &'static str)],
    /// The published rows, in the paper's order.
    pub rows: &'static [Published],
}

/// One table: a cluster and its trace sets.
#[derive(Clone, Copy, Debug)]
pub struct Table {
    /// `sia-table-3` or `sia-table-4`.
    pub name: &'static str,
    /// What the paper calls it.
    pub title: &'static str,
    /// The cluster.
    pub cluster: Cluster,
    /// Its trace sets.
    pub sets: &'static [TraceSet],
}

macro_rules! traces {
    ($dir:literal: $($n:literal),+) => {
        &[$((
            concat!($dir, "/workload-", $n),
            include_str!(concat!("../../../data/workloads/sia/", $dir, "/workload-", $n, ".csv")),
        )),+]
    };
}

const PHILLY: &[(&str, &str)] = traces!("philly": "1", "2", "3", "4", "5", "6", "7", "8");
const NEWTRACE: &[(&str, &str)] = traces!("newtrace": "1", "2", "3", "4", "5", "6", "7", "8", "9", "10");

const fn row(
    label: &'static str,
    policy: &'static str,
    elastic: bool,
    avg_jct_h: (f64, Option<f64>),
    p99_jct_h: f64,
    makespan_h: (f64, Option<f64>),
    gpu_h_per_job: f64,
) -> Published {
    Published { label, policy, elastic, avg_jct_h, p99_jct_h, makespan_h, gpu_h_per_job }
}

/// Table 3: the heterogeneous cluster (6 × 4 T4, 3 × 8 RTX 2080Ti, 2 × 8 A100).
pub const TABLE_3: Table = Table {
    name: "sia-table-3",
    title: "Sia's Table 3: heterogeneous cluster, 64 GPUs",
    cluster: Cluster::Heterogeneous64,
    sets: &[
        TraceSet {
            name: "Philly",
            traces: PHILLY,
            rows: &[
                row("Sia", "sia", true, (0.6, Some(0.1)), 9.5, (14.2, Some(1.9)), 4.0),
                row("Pollux", "pollux", true, (1.0, Some(0.1)), 14.9, (24.5, Some(7.9)), 5.6),
                row("Gavel+TJ", "gavel", false, (1.9, Some(0.3)), 30.0, (33.8, Some(8.6)), 9.0),
            ],
        },
        TraceSet {
            name: "newTrace",
            traces: NEWTRACE,
            rows: &[
                row("Sia", "sia", true, (0.7, Some(0.1)), 4.6, (52.2, Some(1.3)), 3.0),
                row("Pollux", "pollux", true, (1.5, Some(0.2)), 10.3, (62.3, Some(4.6)), 3.4),
                row("Gavel+TJ", "gavel", false, (11.3, Some(3.0)), 98.1, (110.0, Some(21.5)), 6.4),
            ],
        },
    ],
};

/// Table 4: the homogeneous cluster (16 × 4 T4), Philly traces.
pub const TABLE_4: Table = Table {
    name: "sia-table-4",
    title: "Sia's Table 4: homogeneous cluster, 64 T4",
    cluster: Cluster::Homogeneous64,
    sets: &[TraceSet {
        name: "Philly",
        traces: PHILLY,
        rows: &[
            row("Sia", "sia", true, (1.9, None), 18.1, (21.4, None), 8.4),
            row("Pollux", "pollux", true, (2.0, None), 19.3, (21.7, None), 8.6),
            row("Themis+TJ", "themis", false, (5.4, None), 44.7, (49.7, None), 17.2),
            row("Gavel+TJ", "gavel", false, (4.3, None), 37.1, (44.3, None), 15.3),
        ],
    }],
};

/// The tables by name.
pub const TABLES: [Table; 2] = [TABLE_3, TABLE_4];

/// Which part of a table to run: all of it by default.
#[derive(Clone, Debug, Default)]
pub struct Select {
    /// Only the first N traces of each set.
    pub traces: Option<usize>,
    /// Only these trace sets (`philly`, `newtrace`).
    pub sets: Vec<String>,
    /// Only these policies (`sia`, `pollux`, `gavel`, `themis`).
    pub policies: Vec<String>,
}

/// What to run of a table.
#[derive(Clone, Debug)]
pub struct Plan {
    table: Table,
    /// Per set, per trace: (elastic, tuned) scenarios.
    scenarios: Vec<Vec<[Scenario; 2]>>,
    /// The published rows kept (all, or those of the policies asked for).
    rows: Vec<(usize, Published)>,
    seeds: Range<u64>,
    limits: Limits,
}

/// Our figures for one published row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The trace set.
    pub set: String,
    /// The policy as the paper names it.
    pub label: String,
    /// Average JCT, hours: pooled over traces and seeds, and the deviation of the traces'.
    pub avg_jct_h: (f64, f64),
    /// 99th-percentile JCT over every job of every run, hours.
    pub p99_jct_h: f64,
    /// Makespan, hours: mean over traces and its deviation.
    pub makespan_h: (f64, f64),
    /// GPU-hours per job.
    pub gpu_h_per_job: f64,
    /// Jobs that never finished, over all runs.
    pub unfinished: usize,
    /// Runs in which the watchdog stepped in (rescued or benched).
    pub watched: usize,
    /// Median and 99th-percentile policy call, milliseconds (the worst run's).
    pub policy_call_ms: [f64; 2],
    /// Wall time of all its runs, seconds.
    pub wall_s: f64,
    /// Its runs' average JCT against the first policy's of its trace set, run by run (the
    /// same trace and seed): the change, its interval and the paired test. None for the
    /// first policy itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub against_first: Option<(String, crate::stats::Paired)>,
    /// Each run's average JCT, seconds, in (trace, seed) order.
    #[serde(skip)]
    pub run_avg_jct_s: Vec<f64>,
    /// The published figures.
    #[serde(skip)]
    pub published: Published,
}

impl Row {
    /// (ours − published) / published, for the average JCT.
    pub fn error(&self) -> f64 {
        (self.avg_jct_h.0 - self.published.avg_jct_h.0) / self.published.avg_jct_h.0
    }

    /// Whether the average JCT is within [`TOLERANCE`].
    pub fn within(&self) -> bool {
        self.error().abs() <= TOLERANCE
    }
}

impl Plan {
    /// Table `table` with `seeds`: of `select`'s trace sets and policies, the first `traces`
    /// traces of each set.
    pub fn new(table: Table, select: &Select, seeds: Range<u64>, limits: Limits) -> anyhow::Result<Plan> {
        let picked = |list: &[String], name: &str| list.is_empty() || list.iter().any(|o| o.eq_ignore_ascii_case(name));
        let sets: Vec<&str> = table.sets.iter().map(|s| s.name).collect();
        let mut policies: Vec<&str> = table.sets.iter().flat_map(|s| s.rows.iter().map(|r| r.policy)).collect();
        policies.dedup();
        for (asked, known, what) in [(&select.sets, &sets, "trace set"), (&select.policies, &policies, "policy")] {
            if let Some(bad) = asked.iter().find(|a| !known.iter().any(|k| k.eq_ignore_ascii_case(a))) {
                anyhow::bail!("{} has no {what} {bad:?}: it has {}", table.name, known.join(", "));
            }
        }
        let load = |name: &str, text: &str, jobs: GpuJobs| {
            let options = LoadOptions { cluster: Some(table.cluster), jobs, ..Default::default() };
            let mut scenario = Scenario::from_pollux_csv(name, text, &options)?;
            scenario.watchdog.stall_after = NO_STALL_RULE;
            scenario.watchdog.churn_after = NO_CHURN_RULE;
            Ok::<_, WorkloadError>(scenario)
        };
        let scenarios = table
            .sets
            .iter()
            .map(|set| {
                set.traces
                    .iter()
                    .take(if picked(&select.sets, set.name) { select.traces.unwrap_or(usize::MAX).max(1) } else { 0 })
                    .map(|(name, text)| Ok([load(name, text, GpuJobs::Elastic)?, load(name, text, GpuJobs::Tuned)?]))
                    .collect::<Result<Vec<_>, WorkloadError>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let rows = table
            .sets
            .iter()
            .enumerate()
            .flat_map(|(s, set)| set.rows.iter().map(move |r| (s, *r)))
            .filter(|(s, r)| picked(&select.sets, table.sets[*s].name) && picked(&select.policies, r.policy))
            .collect();
        let limits = Limits { deadline: limits.deadline.max(MIN_DEADLINE), ..limits };
        Ok(Plan { table, scenarios, rows, seeds, limits })
    }

    /// Every run, in (row, trace, seed) order.
    pub fn tasks(&self, rt: &Runtime) -> anyhow::Result<Vec<Task<'_>>> {
        let mut tasks = Vec::new();
        for (set, published) in &self.rows {
            let choice = PolicyChoice::resolve(rt, published.policy)?;
            for pair in &self.scenarios[*set] {
                let scenario = &pair[usize::from(!published.elastic)];
                for seed in self.seeds.clone() {
                    tasks.push(Task {
                        scenario,
                        choice: choice.clone(),
                        options: RunOptions {
                            sim: SimConfig { seed, ..SimConfig::default() },
                            tick: Duration::from_secs(60),
                            limits: self.limits,
                            timeline: false,
                        },
                    });
                }
            }
        }
        Ok(tasks)
    }

    /// Our rows from the reports of [`Plan::tasks`], in the same order.
    pub fn rows(&self, reports: &[RunReport]) -> Vec<Row> {
        let seeds = self.seeds.clone().count().max(1);
        let mut reports = reports.iter();
        let hours = |s: f64| s / 3600.0;
        let mut rows = self
            .rows
            .iter()
            .map(|(set, published)| {
                let traces = self.scenarios[*set].len();
                let runs: Vec<&RunReport> = reports.by_ref().take(traces * seeds).collect();
                let per_trace = |metric: fn(&RunReport) -> f64| -> Vec<f64> {
                    runs.chunks(seeds).map(|c| mean(&c.iter().map(|r| metric(r)).collect::<Vec<_>>())).collect()
                };
                let jcts: Vec<f64> = runs.iter().flat_map(|r| r.jobs.iter().filter_map(|j| j.jct_s)).collect();
                let mut sorted = jcts.clone();
                sorted.sort_by(f64::total_cmp);
                let jobs: usize = runs.iter().map(|r| r.jobs.len()).sum();
                let gpu_s: f64 = runs.iter().flat_map(|r| r.jobs.iter().map(|j| j.gpu_s)).sum();
                let trace_avg = per_trace(|r| mean(&r.jobs.iter().filter_map(|j| j.jct_s).collect::<Vec<_>>()));
                let makespans = per_trace(|r| r.makespan_s);
                Row {
                    set: self.table.sets[*set].name.into(),
                    label: published.label.into(),
                    avg_jct_h: (hours(mean(&jcts)), hours(std_dev(&trace_avg))),
                    p99_jct_h: hours(wasmsched_core::units::nearest_rank(&sorted, 0.99).unwrap_or(0.0)),
                    makespan_h: (hours(mean(&makespans)), hours(std_dev(&makespans))),
                    gpu_h_per_job: hours(gpu_s) / jobs.max(1) as f64,
                    unfinished: runs.iter().map(|r| r.jobs.iter().filter(|j| j.jct_s.is_none()).count()).sum(),
                    watched: runs.iter().filter(|r| r.rescues > 0 || r.benched.is_some()).count(),
                    policy_call_ms: runs
                        .iter()
                        .map(|r| r.policy_call_ms)
                        .fold([0.0, 0.0], |a, b| [a[0].max(b[0]), a[1].max(b[1])]),
                    wall_s: runs.iter().map(|r| r.wall_ms).sum::<f64>() / 1000.0,
                    against_first: None,
                    run_avg_jct_s: runs
                        .iter()
                        .map(|r| mean(&r.jobs.iter().filter_map(|j| j.jct_s).collect::<Vec<_>>()))
                        .collect(),
                    published: *published,
                }
            })
            .collect::<Vec<Row>>();
        paired_with_first(&mut rows);
        rows
    }

    /// The table's name and title.
    pub fn table(&self) -> Table {
        self.table
    }
}

/// Each row but the first of its trace set, paired run by run with that first one's runs.
fn paired_with_first(rows: &mut [Row]) {
    for i in 0..rows.len() {
        let Some(first) = rows.iter().position(|r| r.set == rows[i].set) else { continue };
        if first == i {
            continue;
        }
        let changes: Vec<f64> = rows[i]
            .run_avg_jct_s
            .iter()
            .zip(&rows[first].run_avg_jct_s)
            .filter(|(_, base)| **base > 0.0)
            .map(|(ours, base)| ours / base - 1.0)
            .collect();
        rows[i].against_first = Some((rows[first].label.to_string(), crate::stats::Paired::of(&changes, 0.0)));
    }
}

/// The rows as text: ours beside the published figure, one line per policy and trace set,
/// ending with the verdict on the average JCTs and on the policies' order.
pub fn text(table: &Table, rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}: ours / published", table.title);
    let _ = writeln!(
        out,
        "{:<9} {:<10} {:>25} {:>15} {:>27} {:>13} {:>8}  round ms p50/p99",
        "traces", "policy", "avg JCT h", "p99 JCT h", "makespan h", "GPU-h/job", "error"
    );
    let pm = |(v, sd): (f64, f64)| format!("{v:.1} ± {sd:.1}");
    let published =
        |(v, sd): (f64, Option<f64>)| sd.map_or_else(|| format!("{v:.1}"), |sd| format!("{v:.1} ± {sd:.1}"));
    for r in rows {
        let p = r.published;
        let _ = write!(
            out,
            "{:<9} {:<10} {:>25} {:>15} {:>27} {:>13} {:>+7.0}%  {:.1}/{:.1}",
            r.set,
            r.label,
            format!("{} / {}", pm(r.avg_jct_h), published(p.avg_jct_h)),
            format!("{:.1} / {:.1}", r.p99_jct_h, p.p99_jct_h),
            format!("{} / {}", pm(r.makespan_h), published(p.makespan_h)),
            format!("{:.1} / {:.1}", r.gpu_h_per_job, p.gpu_h_per_job),
            100.0 * r.error(),
            r.policy_call_ms[0],
            r.policy_call_ms[1],
        );
        if r.unfinished > 0 {
            let _ = write!(out, "  {} jobs unfinished", r.unfinished);
        }
        if r.watched > 0 {
            let _ = write!(out, "  watchdog stepped into {} runs", r.watched);
        }
        out.push('\n');
    }
    for r in rows {
        if let Some((first, paired)) = &r.against_first {
            let change = paired.describe_over(|x| format!("{:+.1} %", 100.0 * x), "run");
            let _ = writeln!(out, "{} {}: average JCT against {first}, run by run: {change}", r.set, r.label);
        }
    }
    let within = rows.iter().filter(|r| r.within()).count();
    let _ = writeln!(out, "{within} of {} average JCTs within ±{:.0}% of the published", rows.len(), 100.0 * TOLERANCE);
    let _ = write!(out, "{}", order_verdict(rows));
    out
}

/// Whether, in each trace set, our average JCTs order the policies as the published ones do.
pub fn same_order(rows: &[Row]) -> bool {
    let mut sets: Vec<&str> = rows.iter().map(|r| r.set.as_str()).collect();
    sets.dedup();
    sets.iter().all(|set| {
        let of: Vec<&Row> = rows.iter().filter(|r| r.set == *set).collect();
        of.iter().all(|a| {
            of.iter().all(|b| (a.avg_jct_h.0 < b.avg_jct_h.0) == (a.published.avg_jct_h.0 < b.published.avg_jct_h.0))
        })
    })
}

fn order_verdict(rows: &[Row]) -> String {
    if same_order(rows) {
        "the policies rank as in the paper".into()
    } else {
        "the policies do not rank as in the paper".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_trace_loads_as_sias_workload_on_64_gpus() {
        for table in TABLES {
            for set in table.sets {
                for (name, text) in set.traces {
                    let s = Scenario::from_pollux_csv(
                        name,
                        text,
                        &LoadOptions { cluster: Some(table.cluster), jobs: GpuJobs::Elastic, ..Default::default() },
                    )
                    .unwrap();
                    let jobs = if set.name == "Philly" { 160 } else { 960 };
                    assert_eq!(s.workload.jobs.len(), jobs, "{name}");
                    assert_eq!(s.workload.nodes.iter().map(|n| n.gpus).sum::<u32>(), 64, "{name}");
                }
            }
        }
    }

    #[test]
    fn a_selection_the_table_lacks_is_refused_with_what_it_has() {
        let select = |sets: &[&str], policies: &[&str]| Select {
            traces: Some(1),
            sets: sets.iter().map(|s| s.to_string()).collect(),
            policies: policies.iter().map(|s| s.to_string()).collect(),
        };
        let err = Plan::new(TABLE_4, &select(&["newtrace"], &[]), 0..1, Limits::default()).unwrap_err();
        assert_eq!(err.to_string(), r#"sia-table-4 has no trace set "newtrace": it has Philly"#);
        let err = Plan::new(TABLE_3, &select(&[], &["themis"]), 0..1, Limits::default()).unwrap_err();
        assert!(err.to_string().contains("no policy \"themis\": it has sia, pollux, gavel"), "{err}");
        let plan = Plan::new(TABLE_3, &select(&["PHILLY"], &["sia"]), 0..1, Limits::default()).unwrap();
        assert_eq!(plan.rows.len(), 1);
        assert_eq!(plan.scenarios.iter().map(Vec::len).collect::<Vec<_>>(), [1, 0], "one Philly trace, no newTrace");
    }

    fn ours(label: &str, avg: f64) -> Row {
        let published = TABLE_4.sets[0].rows.iter().find(|r| r.label == label).copied().unwrap();
        Row {
            set: "Philly".into(),
            label: label.into(),
            avg_jct_h: (avg, 0.0),
            p99_jct_h: 0.0,
            makespan_h: (0.0, 0.0),
            gpu_h_per_job: 0.0,
            unfinished: 0,
            watched: 0,
            policy_call_ms: [0.0; 2],
            wall_s: 0.0,
            against_first: None,
            run_avg_jct_s: vec![avg * 3600.0; 6],
            published,
        }
    }

    #[test]
    fn each_policy_is_paired_run_by_run_with_the_first_of_its_set() {
        let mut rows = [ours("Sia", 2.0), ours("Gavel+TJ", 3.0)];
        rows[1].run_avg_jct_s = (0..6).map(|k| 2.0 * 3600.0 * (1.5 + 0.01 * k as f64)).collect();
        paired_with_first(&mut rows);
        assert!(rows[0].against_first.is_none());
        let (first, paired) = rows[1].against_first.clone().unwrap();
        assert_eq!((first.as_str(), paired.n, paired.p), ("Sia", 6, Some(2.0 / 64.0)));
        assert!((paired.mean - 0.525).abs() < 1e-9, "{paired:?}");
        let text = text(&TABLE_4, &rows);
        assert!(text.contains("Philly Gavel+TJ: average JCT against Sia, run by run: +52.5 % (95 % CI"), "{text}");
    }

    #[test]
    fn the_verdicts_follow_the_tolerance_and_the_published_order() {
        // Published: Sia 1.9, Gavel 4.3 h.
        assert!(ours("Sia", 1.9 * 1.15 - 1e-9).within() && !ours("Sia", 1.9 * 1.16).within());
        assert!(same_order(&[ours("Sia", 2.0), ours("Gavel+TJ", 3.0)]));
        assert!(!same_order(&[ours("Sia", 3.0), ours("Gavel+TJ", 2.0)]));
        let text = text(&TABLE_4, &[ours("Sia", 1.9), ours("Gavel+TJ", 1.0)]);
        assert!(text.contains("1 of 2 average JCTs within ±15%"), "{text}");
        assert!(text.ends_with("do not rank as in the paper"), "{text}");
    }
}
