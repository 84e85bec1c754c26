//! One simulated run, and a comparison of several: each policy on the same workload with the
//! same seeds, summarised per run ([`RunReport`]) and per policy ([`Comparison`]).

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use wasmsched_core::world::World;
use wasmsched_loop::control::{self, LoopConfig};
use wasmsched_loop::record::{RecordError, TelemetryRecorder};
use wasmsched_runtime::supervise::{Fallback, Quarantine, Supervised, TickOutcome};
use wasmsched_runtime::{Limits, LoadError, LoadedPolicy, Runtime, admission};
use wasmsched_shipped as shipped;
use wasmsched_sim::{JobOutcome, SimConfig, Simulator};

use crate::scenario::Scenario;

/// A policy to run: a shipped one by name, or any component by path.
#[derive(Clone, Debug)]
pub struct PolicyChoice {
    /// What the user wrote.
    pub label: String,
    /// The loaded component.
    pub policy: LoadedPolicy,
    /// Its config, as JSON.
    pub config_json: String,
}

/// Why a policy could not be chosen.
#[derive(Debug, thiserror::Error)]
pub enum ChoiceError {
    /// Neither a shipped policy nor a file.
    #[error("no policy named {name:?}: shipped policies are {}; or give a path to a .wasm component", shipped.join(", "))]
    Unknown {
        /// What was asked for.
        name: String,
        /// What exists.
        shipped: Vec<&'static str>,
    },
    /// The file did not load.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// Its config beside it is broken.
    #[error(transparent)]
    Config(#[from] admission::AdmissionError),
    /// Config keys after the name that are not `KEY=VALUE` pairs.
    #[error("{0:?}: config keys after the policy go as NAME:KEY=VALUE,KEY=VALUE")]
    Keys(String),
}

impl PolicyChoice {
    /// A shipped policy by name, or a component by path (with the `NAME.toml` beside it);
    /// either may end in `:KEY=VALUE,KEY=VALUE` to set config keys over its config (each
    /// value JSON, else a string): `gacer:regulate=false`. The label is the whole spec.
    pub fn resolve(rt: &Runtime, spec: &str) -> Result<PolicyChoice, ChoiceError> {
        if let Some((base, keys)) = spec.rsplit_once(':').filter(|(_, keys)| keys.contains('='))
            && !Path::new(spec).is_file()
        {
            let mut choice = PolicyChoice::resolve(rt, base)?;
            let mut config: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(&choice.config_json).unwrap_or_default();
            for pair in keys.split(',') {
                let (key, value) = pair.split_once('=').ok_or_else(|| ChoiceError::Keys(spec.into()))?;
                let value = value.trim();
                let value = serde_json::from_str(value).unwrap_or_else(|_| serde_json::Value::String(value.into()));
                config.insert(key.trim().into(), value);
            }
            choice.label = spec.into();
            choice.config_json = serde_json::Value::Object(config).to_string();
            return Ok(choice);
        }
        let path = Path::new(spec);
        if spec.ends_with(".wasm") || path.is_file() {
            let policy = rt.load_file(path)?;
            let config_json = admission::config_beside(path)?;
            return Ok(PolicyChoice { label: spec.into(), policy, config_json });
        }
        let shipped = shipped::by_name(spec)
            .ok_or_else(|| ChoiceError::Unknown { name: spec.into(), shipped: shipped::names() })?;
        Ok(PolicyChoice { label: spec.into(), policy: rt.load(shipped.name, shipped.wasm)?, config_json: "{}".into() })
    }
}

/// Knobs of a simulated run.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions {
    /// The simulator's settings (the seed among them).
    pub sim: SimConfig,
    /// The loop's tick and horizon.
    pub tick: Duration,
    /// Limits on each policy call.
    pub limits: Limits,
    /// Keep each tick's per-job CPU for pictures.
    pub timeline: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            sim: SimConfig::default(),
            tick: Duration::from_secs(30),
            limits: Limits::default(),
            timeline: false,
        }
    }
}

/// One sample of the timeline: the time and what each running job had then.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sample {
    /// Virtual time.
    pub time_s: f64,
    /// Every running job (queued ones are left out).
    pub jobs: Vec<JobSample>,
}

/// What one running job had at one tick.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobSample {
    /// The job's index in the workload (and in [`RunReport::jobs`]).
    pub job: u32,
    /// The node it runs on, by index in the workload.
    pub node: u32,
    /// CPU used, in cores.
    pub cpu: f64,
    /// CPU limit in force, in cores; None while unlimited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_limit: Option<f64>,
    /// The GPUs it holds, as (node, index).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<(u32, u32)>,
    /// The GPU share set on it, in percent; None while it runs unregulated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_share: Option<u8>,
    /// How much of each GPU it holds it used, in percent; None when it holds none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_used: Option<f32>,
}

/// The result of one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunReport {
    /// The policy's label.
    pub policy: String,
    /// The policy's sha256.
    pub digest: String,
    /// The simulator's seed.
    pub seed: u64,
    /// From the first arrival to the last end.
    pub makespan_s: f64,
    /// Mean job completion time of the jobs that ended.
    pub mean_jct_s: f64,
    /// 95th percentile of job completion time.
    pub p95_jct_s: f64,
    /// Jobs that met their QoE target.
    pub satisfied: usize,
    /// Jobs that declared a QoE target.
    pub with_qoe_target: usize,
    /// CPU used over CPU present, over the makespan.
    pub cpu_utilisation: f64,
    /// Times the policy was called.
    pub policy_calls: u64,
    /// Time spent in the policy, milliseconds.
    pub policy_time_ms: f64,
    /// The median and 99th percentile of one call's time in the policy, milliseconds.
    #[serde(default)]
    pub policy_call_ms: [f64; 2],
    /// Ticks that fell back.
    pub fallbacks: u64,
    /// Actions refused by validation.
    pub rejected_actions: u64,
    /// Stops, migrations and preemptions applied.
    pub disruptions: u64,
    /// Actions refused over the workload's disruption budget.
    pub over_budget: u64,
    /// Queued jobs the host started itself, because the policy that places left them waiting
    /// although they fit (the watchdog's stall rule).
    #[serde(skip_serializing_if = "is_zero")]
    pub rescues: u64,
    /// Why the watchdog benched the policy, when it did (the safe policy ran from then on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub benched: Option<String>,
    /// When the run ended with jobs unfinished: which, and why (no job made progress for the
    /// simulator's idle limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unfinished: Option<String>,
    /// Wall-clock time of the whole run, milliseconds.
    pub wall_ms: f64,
    /// Per job, in workload order.
    pub jobs: Vec<JobOutcome>,
    /// Per tick CPU, when asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<Sample>,
    /// How fairly the tenants shared the GPUs, when the jobs belong to more than one
    /// ([`super::fairness`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fairness: Option<super::fairness::Fairness>,
}

/// Run one policy on one workload with one seed.
pub fn simulate(rt: &Runtime, choice: &PolicyChoice, scenario: &Scenario, options: &RunOptions) -> RunReport {
    simulate_watched(rt, choice, scenario, options, |_| {})
}

/// [`simulate`], calling `watch` after every decision with the world as it stands (for a
/// progress bar: [`World::jobs_seen`] less [`World::job_count`] jobs have ended).
pub fn simulate_watched(
    rt: &Runtime,
    choice: &PolicyChoice,
    scenario: &Scenario,
    options: &RunOptions,
    watch: impl FnMut(&World),
) -> RunReport {
    simulate_with(rt, choice, scenario, options, watch, None).0
}

/// [`simulate`], writing every tick's snapshot and decision to `recorder` (a telemetry
/// recording, as `[record] telemetry` writes on a live host); why the recording stopped, if it
/// could not be written to the end (the run goes on).
pub fn simulate_recorded(
    rt: &Runtime,
    choice: &PolicyChoice,
    scenario: &Scenario,
    options: &RunOptions,
    recorder: &mut TelemetryRecorder,
) -> (RunReport, Option<RecordError>) {
    simulate_with(rt, choice, scenario, options, |_| {}, Some(recorder))
}

/// One policy as the loop's driver: every decided tick to a closure, every tick to the
/// recorder when there is one.
struct Simulated<'a, F> {
    policy: &'a mut Supervised,
    decided: F,
    recorder: Option<&'a mut TelemetryRecorder>,
    failed: Option<RecordError>,
}

impl<F: FnMut(&World, &TickOutcome)> control::Driver for Simulated<'_, F> {
    fn observed(
        &mut self,
        world: &World,
        _: Vec<wasmsched_core::backend::Endpoint>,
        _: Option<wasmsched_core::replicas::Leadership>,
    ) {
        if let Some(r) = self.recorder.as_mut() {
            r.observed(world);
        }
    }

    fn policies(&mut self) -> control::Policies<'_> {
        control::Policies { active: Some(&mut *self.policy), shadows: Vec::new(), split: None }
    }

    fn record(&mut self, tick: control::Tick<'_>) {
        if let Some(r) = self.recorder.as_mut()
            && let Err(e) = r.record(&tick)
        {
            self.failed = Some(e);
            self.recorder = None;
        }
        if let Some(active) = &tick.active {
            (self.decided)(tick.world, &active.outcome);
        }
    }
}

fn simulate_with(
    rt: &Runtime,
    choice: &PolicyChoice,
    scenario: &Scenario,
    options: &RunOptions,
    mut watch: impl FnMut(&World),
    recorder: Option<&mut TelemetryRecorder>,
) -> (RunReport, Option<RecordError>) {
    let started = Instant::now();
    let workload = &scenario.workload;
    let mut sim = Simulator::new(workload, SimConfig { keep_progress: options.timeline, ..options.sim });
    let mut supervised = Supervised::new(
        choice.policy.clone(),
        choice.config_json.clone(),
        options.limits,
        Fallback::KeepLimits,
        Quarantine::default(),
    );
    let names: std::collections::HashMap<&str, u32> =
        workload.jobs.iter().enumerate().map(|(i, j)| (j.name.as_str(), i as u32)).collect();
    let (budget, watchdog, tenants) = (scenario.budget, scenario.watchdog, scenario.tenants.clone());
    let config = LoopConfig { tick: options.tick, horizon: None, budget, watchdog, tenants };
    let mut seen = Seen::new(workload.jobs.len(), options.timeline);
    let decided = |world: &World, outcome: &TickOutcome| {
        watch(world);
        seen.decided(world, outcome, &names);
    };
    let mut driver = Simulated { policy: &mut supervised, decided, recorder, failed: None };
    let summary = control::drive(&mut sim, &mut driver, rt, &config);
    if let Some(r) = driver.recorder.as_mut()
        && let Err(e) = r.finish()
    {
        driver.failed = Some(e);
    }
    let failed = driver.failed.take();
    drop(driver);
    let Seen { pending, mut calls_ms, benched, tracker, timeline, .. } = seen;
    let mut jobs = sim.outcomes();
    for (job, why) in jobs.iter_mut().zip(pending) {
        job.pending = why;
    }
    let first_arrival = workload.jobs.first().map_or(0.0, |j| j.arrival_s);
    let last_end = jobs.iter().filter_map(|j| j.finish_s).fold(first_arrival, f64::max);
    let makespan_s = last_end - first_arrival;
    let mut jcts: Vec<f64> = jobs.iter().filter_map(|j| j.jct_s).collect();
    jcts.sort_by(f64::total_cmp);
    let counters = supervised.counters();
    let report = RunReport {
        policy: choice.label.clone(),
        digest: choice.policy.digest().into(),
        seed: options.sim.seed,
        makespan_s,
        mean_jct_s: mean(&jcts),
        p95_jct_s: percentile(&jcts, 0.95),
        satisfied: jobs.iter().filter(|j| j.satisfied == Some(true)).count(),
        with_qoe_target: jobs.iter().filter(|j| j.satisfied.is_some()).count(),
        cpu_utilisation: if makespan_s > 0.0 { sim.busy_core_s() / (sim.capacity_cores() * makespan_s) } else { 0.0 },
        policy_calls: counters.calls,
        policy_time_ms: counters.call_micros as f64 / 1000.0,
        policy_call_ms: {
            calls_ms.sort_by(f64::total_cmp);
            [percentile(&calls_ms, 0.5), percentile(&calls_ms, 0.99)]
        },
        fallbacks: counters.fallbacks,
        rejected_actions: counters.rejected_actions,
        disruptions: summary.disruptions,
        over_budget: summary.over_budget,
        rescues: summary.rescues,
        benched,
        unfinished: sim.unfinished().map(|why| format!("{}: {why}", choice.label)),
        wall_ms: started.elapsed().as_secs_f64() * 1000.0,
        fairness: (tracker.tenant_count() > 1).then(|| {
            let of_jobs: Vec<(String, Option<f64>)> = jobs.iter().map(|o| (o.tenant.clone(), o.jct_s)).collect();
            tracker.finish(&of_jobs)
        }),
        jobs,
        timeline,
    };
    (report, failed)
}

/// What a simulated run's ticks showed, kept for its report.
struct Seen {
    /// Per workload job, why it waited as the policy last said.
    pending: Vec<Option<String>>,
    /// Each call's time, ms (the calls that did not fall back).
    calls_ms: Vec<f64>,
    /// Why the watchdog benched the policy, the first time it did.
    benched: Option<String>,
    tracker: super::fairness::Tracker,
    /// The jobs' use at each decision, when the report asks for it (`keep_timeline`).
    timeline: Vec<Sample>,
    keep_timeline: bool,
}

impl Seen {
    fn new(jobs: usize, keep_timeline: bool) -> Seen {
        let tracker = super::fairness::Tracker::new(keep_timeline);
        let pending = vec![None; jobs];
        Seen { pending, calls_ms: Vec::new(), benched: None, tracker, timeline: Vec::new(), keep_timeline }
    }

    /// A decision the policy made over `world`; `names` gives a job's place in the workload.
    fn decided(&mut self, world: &World, outcome: &TickOutcome, names: &std::collections::HashMap<&str, u32>) {
        if outcome.fallback.is_none() {
            self.calls_ms.push(outcome.latency.as_secs_f64() * 1000.0);
        }
        for p in &outcome.pending {
            if let Some(&job) = world.spec(p.job).and_then(|s| names.get(s.name.as_str())) {
                self.pending[job as usize] = Some(p.reason.clone());
            }
        }
        if self.benched.is_none()
            && let Some(wasmsched_runtime::supervise::Failure::Benched { why, .. }) = &outcome.failure
        {
            self.benched = Some(why.to_string());
        }
        self.tracker.observe(world);
        if self.keep_timeline {
            let jobs = world
                .jobs()
                .filter(|(_, s)| s.queued.is_none())
                .filter_map(|(spec, s)| {
                    names.get(spec.name.as_str()).map(|&job| JobSample {
                        job,
                        node: s.node.0,
                        cpu: s.cpu_used_millicores as f64 / 1000.0,
                        cpu_limit: s.cpu_limit_millicores.map(|m| m as f64 / 1000.0),
                        gpus: s.gpus.iter().map(|g| (g.node.0, g.index)).collect(),
                        gpu_share: s.gpu_share_percent,
                        gpu_used: (!s.gpus.is_empty()).then_some(s.gpu_used_percent),
                    })
                })
                .collect();
            self.timeline.push(Sample { time_s: world.time_ms() as f64 / 1000.0, jobs });
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The mean; 0 for no values.
pub(crate) fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() { 0.0 } else { xs.iter().sum::<f64>() / xs.len() as f64 }
}

/// The sample standard deviation; 0 for fewer than two values.
pub(crate) fn std_dev(xs: &[f64]) -> f64 {
    crate::stats::sd(xs)
}

/// The `q`-quantile of sorted values (nearest rank); 0 for none.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    wasmsched_core::units::nearest_rank(sorted, q).unwrap_or(0.0)
}

/// Reads one number off a run.
type Metric = fn(&RunReport) -> f64;

/// Every run of a comparison, in (policy, seed) order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// The workload's name.
    pub workload: String,
    /// The runs.
    pub runs: Vec<RunReport>,
}

impl Comparison {
    /// The policies in the order they were given.
    pub fn policies(&self) -> Vec<&str> {
        let mut seen: Vec<&str> = Vec::new();
        for r in &self.runs {
            if !seen.contains(&r.policy.as_str()) {
                seen.push(&r.policy);
            }
        }
        seen
    }

    /// `claim`'s baseline: the policy it names, else [`Comparison::baseline`].
    pub fn baseline_of<'a>(&'a self, claim: &'a crate::scenario::Claim) -> &'a str {
        claim.baseline.as_deref().unwrap_or_else(|| self.baseline())
    }

    /// What every other policy is compared with: fair-share if it ran, else the first policy.
    pub fn baseline(&self) -> &str {
        let policies = self.policies();
        policies.iter().copied().find(|p| *p == "fair-share").or(policies.first().copied()).unwrap_or("")
    }

    fn of(&self, policy: &str, f: impl Fn(&RunReport) -> f64) -> Vec<f64> {
        self.runs.iter().filter(|r| r.policy == policy).map(f).collect()
    }

    /// The table a person reads: each policy's mean ± spread over seeds, and its ratio to the
    /// baseline (`fair-share` if it ran, else the first policy).
    pub fn table(&self) -> String {
        let policies = self.policies();
        let baseline = self.baseline();
        let seeds = self.runs.iter().filter(|r| r.policy == baseline).count();
        let columns: [(&str, Metric); 5] = [
            ("makespan s", |r| r.makespan_s),
            ("mean JCT s", |r| r.mean_jct_s),
            ("p95 JCT s", |r| r.p95_jct_s),
            ("satisfied", |r| r.satisfied as f64),
            ("CPU util %", |r| 100.0 * r.cpu_utilisation),
        ];
        let mut out = String::new();
        let _ = writeln!(out, "workload {} — {} seed(s); mean ± sd, (×) ratio to {baseline}", self.workload, seeds);
        let w = policies.iter().map(|p| p.len()).max().unwrap_or(0).max(14);
        let _ = write!(out, "{:<w$}", "policy");
        for (name, _) in &columns {
            let _ = write!(out, " {name:>24}");
        }
        let _ = writeln!(out, " {:>12}", "policy ms");
        for policy in &policies {
            let _ = write!(out, "{policy:<w$}");
            for (_, f) in &columns {
                let xs = self.of(policy, f);
                let base = mean(&self.of(baseline, f));
                let ratio = if base.abs() > 1e-12 { format!("({:.3}×)", mean(&xs) / base) } else { String::new() };
                let _ = write!(out, " {:>24}", format!("{:.1} ± {:.1} {ratio}", mean(&xs), std_dev(&xs)));
            }
            let _ = writeln!(out, " {:>12.2}", mean(&self.of(policy, |r| r.policy_time_ms)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_takes_the_nearest_rank() {
        let xs: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&xs, 0.95), 19.0);
        assert_eq!(percentile(&xs, 1.0), 20.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }

    #[test]
    fn spread_of_one_value_is_zero() {
        assert_eq!(std_dev(&[3.0]), 0.0);
        assert!((std_dev(&[1.0, 3.0]) - 2f64.sqrt()).abs() < 1e-12);
    }
}
