//! Results as data: what `compare --json`, `simulate --json`, `whatif --json` and `sweep --json`
//! write, in the
//! versioned schema of `docs/results.schema.json`, and the `--csv` tables for spreadsheets.
//!
//! A file is one JSON object: `format` (always [`FORMAT`]), `version` ([`VERSION`], raised
//! when a field changes meaning or goes away; new fields may come without it), `kind`
//! (`compare` or `sweep`) and the kind's own fields.

use std::io::Write;

use serde::Serialize;

use crate::experiment::paper::{self, Measured};
use crate::experiment::run::{Comparison, RunReport};
use crate::experiment::sweep::{Sweep, show};
use crate::scenario::Scenario;
use crate::whatif::Replay;

/// What every results file says it is.
pub const FORMAT: &str = "wasmsched-results";

/// The schema's version.
pub const VERSION: u32 = 1;

/// A comparison with what it measured.
#[derive(Serialize)]
pub struct CompareResults<'a> {
    /// The workload's name.
    pub workload: &'a str,
    /// What every policy is measured against.
    pub baseline: &'a str,
    /// The policies, in the order given.
    pub policies: Vec<&'a str>,
    /// Each policy's own objective (its first `[[paper]]` figure), where the workload gives
    /// one.
    pub objectives: Vec<Measured>,
    /// Every `[[paper]]` figure that could be measured.
    pub paper: Vec<Measured>,
    /// Every policy but the baseline against it, paired over the same seeds: its own figures,
    /// then mean JCT and makespan (and the tenants' fairness) ([`Comparison::against_baseline`]).
    pub paired: Vec<Measured>,
    /// The input shaking every seed's workload had (`--perturb`); absent when none.
    #[serde(skip_serializing_if = "is_zero")]
    pub perturb: f64,
    /// Every run, in (policy, seed) order.
    pub runs: &'a [RunReport],
    /// For a replay of a recording (`whatif`): the recorded jobs, in the runs' job order, with
    /// their recorded JCTs and what each one's speed rests on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded: Option<&'a Replay>,
}

impl<'a> CompareResults<'a> {
    /// The comparison's results on `workload`.
    pub fn new(comparison: &'a Comparison, scenario: &Scenario) -> CompareResults<'a> {
        let policies = comparison.policies();
        let objectives =
            policies.iter().filter_map(|p| paper::objective(&scenario.claims, p)).filter_map(|c| comparison.measure(c));
        CompareResults {
            workload: &comparison.workload,
            baseline: comparison.baseline(),
            objectives: objectives.collect(),
            paper: scenario.claims.iter().filter_map(|c| comparison.measure(c)).collect(),
            paired: comparison.against_baseline(&scenario.claims),
            policies,
            perturb: scenario.perturb,
            runs: &comparison.runs,
            recorded: None,
        }
    }

    /// The same, as a replay of a recording.
    pub fn recorded(self, replay: &'a Replay) -> CompareResults<'a> {
        CompareResults { recorded: Some(replay), ..self }
    }
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// The body of a results file.
#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Results<'a> {
    /// Several policies on one workload (`compare`, `simulate`).
    Compare(CompareResults<'a>),
    /// One policy's config over a grid (`sweep`).
    Sweep(&'a Sweep),
}

#[derive(Serialize)]
struct Envelope<'a> {
    format: &'static str,
    version: u32,
    #[serde(flatten)]
    results: &'a Results<'a>,
}

impl Results<'_> {
    /// Write as JSON, pretty.
    pub fn write_json(&self, out: impl Write) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, &Envelope { format: FORMAT, version: VERSION, results: self })
    }

    /// Write as CSV: one row per run for a comparison, one per point and seed for a sweep.
    pub fn write_csv(&self, out: impl Write) -> csv::Result<()> {
        let mut w = csv::Writer::from_writer(out);
        match self {
            Results::Compare(c) => {
                w.write_record([
                    "workload",
                    "policy",
                    "seed",
                    "makespan_s",
                    "mean_jct_s",
                    "p95_jct_s",
                    "satisfied",
                    "with_qoe_target",
                    "cpu_utilisation",
                    "disruptions",
                    "over_budget",
                    "fallbacks",
                    "rejected_actions",
                    "policy_calls",
                    "policy_time_ms",
                    "wall_ms",
                ])?;
                for r in c.runs {
                    w.write_record([
                        c.workload.to_string(),
                        r.policy.clone(),
                        r.seed.to_string(),
                        r.makespan_s.to_string(),
                        r.mean_jct_s.to_string(),
                        r.p95_jct_s.to_string(),
                        r.satisfied.to_string(),
                        r.with_qoe_target.to_string(),
                        r.cpu_utilisation.to_string(),
                        r.disruptions.to_string(),
                        r.over_budget.to_string(),
                        r.fallbacks.to_string(),
                        r.rejected_actions.to_string(),
                        r.policy_calls.to_string(),
                        r.policy_time_ms.to_string(),
                        r.wall_ms.to_string(),
                    ])?;
                }
            }
            Results::Sweep(s) => {
                let mut header = vec!["workload".to_string(), "policy".into(), "baseline".into()];
                header.extend(s.axes.iter().map(|a| a.key.clone()));
                header.extend(["seed".into(), s.figure.key().into(), "error".into()]);
                w.write_record(&header)?;
                for point in &s.points {
                    for (seed, value) in s.seeds.iter().zip(&point.per_seed) {
                        let mut row = vec![s.workload.clone(), s.policy.clone(), s.baseline.clone()];
                        row.extend(s.axes.iter().map(|a| point.config.get(&a.key).map_or_else(String::new, show)));
                        row.push(seed.to_string());
                        row.push(value.map_or_else(String::new, |v| v.to_string()));
                        row.push(point.error.clone().unwrap_or_default());
                        w.write_record(&row)?;
                    }
                }
            }
        }
        w.flush()?;
        Ok(())
    }
}
