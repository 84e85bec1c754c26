//! A parameter sweep: one policy's config keys over a grid, every point over the same seeds
//! against a baseline policy, measured by one figure (the policy's own objective unless told
//! otherwise).

use std::fmt::Write as _;
use std::ops::Range;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};

use wasmsched_runtime::{Limits, Runtime};
use wasmsched_sim::SimConfig;

use super::batch::{self, Task};
use super::paper::{Claim, Figure, Measured};
use super::run::{PolicyChoice, RunOptions, RunReport};
use crate::scenario::Scenario;

/// One swept config key and the values it takes, in the order given.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Axis {
    /// The policy's config key (`alpha`, `interval-s`).
    pub key: String,
    /// Its values.
    pub values: Vec<Value>,
}

/// One point of the grid.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Point {
    /// The index of this point's value on each axis, in axis order.
    pub at: Vec<usize>,
    /// The policy's config at this point: the fixed keys and this point's value of each axis.
    pub config: serde_json::Map<String, Value>,
    /// The figure over the seeds; None when it could not be measured on any (or the policy
    /// refused the config: see `error`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured: Option<Measured>,
    /// The figure on each seed, in seed order (None where it could not be measured).
    pub per_seed: Vec<Option<f64>>,
    /// Why the point has no figure, when the policy refused its config.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A whole sweep.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sweep {
    /// The workload's name.
    pub workload: String,
    /// The policy swept.
    pub policy: String,
    /// What every point is compared with, seed by seed.
    pub baseline: String,
    /// The figure measured at every point.
    pub figure: Figure,
    /// The paper's value of that figure, when the workload gives one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paper: Option<f64>,
    /// The seeds every point ran with.
    pub seeds: Vec<u64>,
    /// The swept keys, the first varying slowest.
    pub axes: Vec<Axis>,
    /// Every point of the grid, the last axis varying fastest.
    pub points: Vec<Point>,
}

impl Sweep {
    /// The point with the best mean figure (lowest change, or highest ratio).
    pub fn best(&self) -> Option<&Point> {
        let score = |m: &Measured| if self.figure.lower_is_better() { m.mean } else { -m.mean };
        self.points
            .iter()
            .filter_map(|p| Some((p, score(p.measured.as_ref()?))))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(p, _)| p)
    }
}

/// Why an axis given on the command line cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AxisError {
    /// Not `KEY=VALUES`.
    #[error("{0:?} is not KEY=VALUES: write alpha=0.01,0.03,0.1 or interval-s=10:60:10")]
    Shape(String),
    /// A range that is not three finite numbers with a step that reaches the end.
    #[error("{0:?} is not a range START:END:STEP of numbers with STEP > 0 and END >= START")]
    Range(String),
    /// Too many values.
    #[error("{key} takes {count} values; at most {MAX_AXIS_VALUES} per axis")]
    TooMany {
        /// The key.
        key: String,
        /// How many it would take.
        count: usize,
    },
}

/// Values one axis may take at most (a grid of two such axes is 10,000 points per seed).
pub const MAX_AXIS_VALUES: usize = 100;

impl std::str::FromStr for Axis {
    type Err = AxisError;

    /// `KEY=V1,V2,…` (each a JSON value, else a string) or `KEY=START:END:STEP` (numbers,
    /// both ends included).
    fn from_str(text: &str) -> Result<Axis, AxisError> {
        let (key, values) = text.split_once('=').ok_or_else(|| AxisError::Shape(text.into()))?;
        let key = key.trim();
        if key.is_empty() || values.trim().is_empty() {
            return Err(AxisError::Shape(text.into()));
        }
        let parts: Vec<&str> = values.split(':').collect();
        let values = if parts.len() == 3 && !values.contains(',') {
            let n: Vec<f64> = parts.iter().filter_map(|p| p.trim().parse::<f64>().ok()).collect();
            let [start, end, step] = n[..] else { return Err(AxisError::Range(values.into())) };
            if !(start.is_finite() && end.is_finite() && step.is_finite() && step > 0.0 && end >= start) {
                return Err(AxisError::Range(values.into()));
            }
            let count = ((end - start) / step + 1e-9).floor() + 1.0;
            if count > MAX_AXIS_VALUES as f64 {
                return Err(AxisError::TooMany { key: key.into(), count: count as usize });
            }
            (0..count as usize).map(|i| number(start + step * i as f64)).collect()
        } else {
            values
                .split(',')
                .map(|v| serde_json::from_str(v.trim()).unwrap_or_else(|_| Value::String(v.trim().into())))
                .collect::<Vec<_>>()
        };
        if values.len() > MAX_AXIS_VALUES {
            return Err(AxisError::TooMany { key: key.into(), count: values.len() });
        }
        Ok(Axis { key: key.into(), values })
    }
}

/// A number as JSON, without the float noise of `start + step × i` (an integer stays one).
fn number(x: f64) -> Value {
    let rounded = (x * 1e9).round() / 1e9;
    if rounded.fract() == 0.0 && rounded.abs() < 1e15 {
        Value::from(rounded as i64)
    } else {
        serde_json::Number::from_f64(rounded).map_or(Value::Null, Value::Number)
    }
}

/// What to sweep.
pub struct Spec<'a> {
    /// The policy swept; its own config (beside its file) is where every point starts.
    pub policy: &'a PolicyChoice,
    /// What every point is compared with.
    pub baseline: &'a PolicyChoice,
    /// The figure measured.
    pub figure: Figure,
    /// The paper's value of it, if any.
    pub paper: Option<f64>,
    /// Keys set at every point.
    pub fixed: Map<String, Value>,
    /// The swept keys.
    pub axes: Vec<Axis>,
    /// The seeds.
    pub seeds: Range<u64>,
    /// The loop's tick.
    pub tick: Duration,
    /// Limits on each policy call.
    pub limits: Limits,
    /// Runs at once.
    pub threads: usize,
}

impl Spec<'_> {
    /// Every point's indices and config, the last axis varying fastest.
    fn grid(&self) -> Vec<(Vec<usize>, Map<String, Value>)> {
        let mut base: Map<String, Value> = match serde_json::from_str(&self.policy.config_json) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        base.extend(self.fixed.clone());
        let mut points = vec![(Vec::new(), base)];
        for axis in &self.axes {
            points = points
                .into_iter()
                .flat_map(|(at, config)| {
                    axis.values.iter().enumerate().map(move |(i, v)| {
                        let mut config = config.clone();
                        config.insert(axis.key.clone(), v.clone());
                        let mut at = at.clone();
                        at.push(i);
                        (at, config)
                    })
                })
                .collect();
        }
        points
    }

    /// How many simulated runs the sweep takes at most: the baseline's and every point's.
    pub fn runs(&self) -> usize {
        let points: usize = self.axes.iter().map(|a| a.values.len()).product();
        (points + 1) * self.seeds.clone().count()
    }

    /// How many jobs its runs hold in all on `scenario`: what [`sweep`]'s progress counts up
    /// to.
    pub fn jobs(&self, scenario: &Scenario) -> u64 {
        self.runs() as u64 * scenario.workload.jobs.len() as u64
    }
}

/// Run the sweep on `scenario`, `spec.threads` runs at a time. `progress` hears how many
/// jobs have ended over all the runs, up to [`Spec::jobs`] (a point whose config the policy
/// refuses counts as ended at once).
pub fn sweep(rt: &Runtime, scenario: &Scenario, spec: &Spec, progress: &(dyn Fn(u64) + Sync)) -> Sweep {
    let grid = spec.grid();
    let seeds: Vec<u64> = spec.seeds.clone().collect();
    // A point whose config the policy refuses at init is reported, not run.
    let errors: Vec<Option<String>> = grid
        .iter()
        .map(|(_, config)| {
            let json = Value::Object(config.clone()).to_string();
            spec.policy.policy.instantiate(rt, spec.limits, &json, None).err().map(|e| e.to_string())
        })
        .collect();
    // Tasks: (point or None for the baseline, seed).
    let mut tasks: Vec<(Option<usize>, u64)> = seeds.iter().map(|&s| (None, s)).collect();
    for (p, error) in errors.iter().enumerate() {
        if error.is_none() {
            tasks.extend(seeds.iter().map(|&s| (Some(p), s)));
        }
    }
    let runs: Vec<Task> = tasks
        .iter()
        .map(|&(point, seed)| Task {
            scenario,
            choice: match point {
                None => spec.baseline.clone(),
                Some(p) => PolicyChoice {
                    label: label(&spec.policy.label, &spec.axes, &grid[p].1),
                    policy: spec.policy.policy.clone(),
                    config_json: Value::Object(grid[p].1.clone()).to_string(),
                },
            },
            options: RunOptions {
                sim: SimConfig { seed, perturb: scenario.perturb, ..SimConfig::default() },
                tick: spec.tick,
                limits: spec.limits,
                timeline: false,
            },
        })
        .collect();
    let skipped = (spec.runs() - runs.len()) as u64 * scenario.workload.jobs.len() as u64;
    progress(skipped);
    let mut results: Vec<Option<RunReport>> =
        batch::run(rt, &runs, spec.threads, &|ended| progress(skipped + ended)).into_iter().map(Some).collect();
    let baseline: Vec<RunReport> = results[..seeds.len()].iter_mut().filter_map(Option::take).collect();
    let mut by_point: Vec<Vec<RunReport>> = vec![Vec::new(); grid.len()];
    for ((point, _), report) in tasks.iter().zip(results).skip(seeds.len()) {
        if let (Some(p), Some(report)) = (point, report) {
            by_point[*p].push(report);
        }
    }
    let points = grid
        .into_iter()
        .zip(by_point)
        .zip(errors)
        .map(|(((at, config), runs), error)| point(spec, &seeds, &baseline, (at, config), &runs, error))
        .collect();
    Sweep {
        workload: scenario.workload.name.clone(),
        policy: spec.policy.label.clone(),
        baseline: spec.baseline.label.clone(),
        figure: spec.figure,
        paper: spec.paper,
        seeds,
        axes: spec.axes.clone(),
        points,
    }
}

/// Point `at` (with its `config`) measured: each seed's run of it against the baseline's run of
/// the same seed.
fn point(
    spec: &Spec,
    seeds: &[u64],
    baseline: &[RunReport],
    (at, config): (Vec<usize>, Map<String, Value>),
    runs: &[RunReport],
    error: Option<String>,
) -> Point {
    let pairs: Vec<Option<(&RunReport, &RunReport)>> = seeds
        .iter()
        .map(|seed| Some((runs.iter().find(|r| r.seed == *seed)?, baseline.iter().find(|r| r.seed == *seed)?)))
        .collect();
    let per_seed = pairs.iter().map(|pair| pair.and_then(|(run, base)| spec.figure.measure(run, base))).collect();
    let claim = Claim {
        policy: label(&spec.policy.label, &spec.axes, &config),
        figure: spec.figure,
        value: spec.paper,
        source: String::new(),
        baseline: None,
    };
    let measured = Measured::over(&claim, &spec.baseline.label, pairs.into_iter().flatten());
    Point { at, config, measured, per_seed, error }
}

/// A point's runs are labelled with the policy and the swept values: `flowcon alpha=0.1`.
fn label(policy: &str, axes: &[Axis], config: &Map<String, Value>) -> String {
    let mut out = policy.to_string();
    for axis in axes {
        let _ = write!(out, " {}={}", axis.key, config.get(&axis.key).map_or_else(String::new, show));
    }
    out
}

/// A config value for a person: strings without their quotes.
pub fn show(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl Sweep {
    /// The table a person reads: one row per point, the best marked.
    pub fn table(&self) -> String {
        let best = self.best().map(|p| &p.at);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "sweep of {} on {} — {} against {}, the same seed for both; mean over {} seed(s), 95 % bootstrap \
             interval, paired permutation test",
            self.policy,
            self.workload,
            self.figure.name(),
            self.baseline,
            self.seeds.len()
        );
        for axis in &self.axes {
            let _ = write!(out, "{:>12} ", axis.key);
        }
        let _ = writeln!(out, " {:>44}", self.figure.name());
        for point in &self.points {
            for axis in &self.axes {
                let _ = write!(out, "{:>12} ", point.config.get(&axis.key).map_or_else(String::new, show));
            }
            let figure = match (&point.measured, &point.error) {
                (_, Some(e)) => format!("refused: {e}"),
                (None, None) => "not measured".to_string(),
                (Some(m), None) => {
                    let p = m.paired.p.map_or_else(String::new, crate::stats::show_p);
                    format!("{} {} {p}", self.figure.format(m.mean), m.interval())
                }
            };
            let mark = if best == Some(&point.at) { "  ← best" } else { "" };
            let _ = writeln!(out, " {figure:>44}{mark}");
        }
        if let Some(point) = self.best() {
            let m = point.measured.as_ref().expect("the best point was measured");
            let figure = self.figure;
            let _ = write!(
                out,
                "best: {} {}",
                label("", &self.axes, &point.config).trim(),
                m.paired.describe(|x| figure.format(x))
            );
            if let Some(paper) = self.paper {
                let _ = write!(out, " (paper: {})", self.figure.format(paper));
            }
            out.push('\n');
            let measured = self.points.iter().filter(|p| p.measured.is_some()).count();
            if measured > 1 {
                let _ = writeln!(
                    out,
                    "(the best of {measured} points: its interval and p do not allow for having picked it)"
                );
            }
        }
        out
    }
}
