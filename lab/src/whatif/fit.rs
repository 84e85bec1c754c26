//! Each recorded job's speed, as the simulator will run it ([`Speed`]), fitted from what the
//! recording shows it did ([`super::Trail`]).
//!
//! - **GPU jobs** run by measured step times: their model's, else ResNet-50's on ImageNet.
//!   Their work scale is the time they ran (less the simulator's start-up pause of each run:
//!   30 s for a rigid job, its model's restore time for an elastic one) over the time the
//!   tables give for the same epochs on the same GPUs, each epoch where it ended, alone on them.
//!   For a simulator's run that ran each job whole on one set of GPUs this is the job's own
//!   noise, to rounding, and the replay gives its JCT again.
//! - **CPU jobs** run by the CPU their epochs took: the core-seconds they were seen to use up to
//!   their last epoch's end, per epoch. A job of a built-in model runs that model scaled to it;
//!   any other job as a calibrated profile of its own (that figure, the most cores it was seen
//!   to use, its start-up, its curve as recorded).
//! - **A job that ran no whole epoch** has nothing to fit: it takes the median scale of the
//!   recording's fitted jobs of its kind (GPU or CPU, built-in model); a CPU job of its own kind
//!   takes the profile of a fitted job of the same model, else it is left out.

use std::sync::Arc;

use serde::Serialize;

use wasmsched_core::bindings::wit;
use wasmsched_sim::model::Model;
use wasmsched_sim::profile::{Costs, Profile};
use wasmsched_sim::throughput::{GpuConfig, GpuType};
use wasmsched_sim::workload::{JobPlan, NodeSpec};
use wasmsched_sim::{REQUEST_COST_CORE_S, SimConfig, gpu_step};

use super::{Recorded, Trail, known_model};

/// The measured model a GPU job of an unknown model scales like.
pub const REFERENCE_MODEL: Model = Model::Imagenet;

/// What a replayed job's speed rests on.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "source", rename_all = "kebab-case")]
pub enum Speed {
    /// A model's measured step times, times `scale`: its own model's, or [`REFERENCE_MODEL`]'s
    /// (`reference`) when the simulator has no measurements of its own.
    Tables {
        /// The tables' model.
        model: String,
        /// Its time over the tables' time.
        scale: f64,
        /// Whether the model is the reference, standing in for one not measured.
        reference: bool,
    },
    /// A built-in model's CPU cost, times `scale` (the CPU its epochs took over the model's).
    ModelCpu {
        /// The model.
        model: String,
        /// Its CPU per epoch over the model's.
        scale: f64,
    },
    /// Its own profile: the CPU its epochs took, the most cores it used, its start-up.
    Profile {
        /// Core-seconds per epoch.
        core_s_per_epoch: f64,
        /// The most cores it was seen to use.
        max_cores: f64,
        /// From its first start to its first epoch, less one epoch.
        startup_s: f64,
    },
    /// An inference service: the requests per second its CPU use says (its most, at the
    /// simulator's cost of a request), for as long as it ran.
    Service {
        /// Requests per second.
        request_rate: f64,
        /// How long it serves, seconds from its arrival.
        duration_s: f64,
    },
    /// It ran no whole epoch: a scale (or a profile) borrowed from the jobs that did.
    Assumed {
        /// The scale it runs at.
        scale: f64,
        /// Where it was borrowed from.
        from: String,
    },
}

impl Speed {
    /// Whether the speed was fitted to the job itself.
    pub fn fitted(&self) -> bool {
        !matches!(self, Speed::Assumed { .. })
    }
}

impl std::fmt::Display for Speed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Speed::Tables { model, scale, reference: false } => write!(f, "{model} tables ×{scale:.3}"),
            Speed::Tables { model, scale, reference: true } => {
                write!(f, "{model} tables ×{scale:.3} (model not measured)")
            }
            Speed::ModelCpu { model, scale } => write!(f, "{model} CPU cost ×{scale:.3}"),
            Speed::Profile { core_s_per_epoch, max_cores, .. } => {
                write!(f, "own profile: {core_s_per_epoch:.3} core-s/epoch, ≤{max_cores:.2} cores")
            }
            Speed::Service { request_rate, duration_s } => {
                write!(f, "service: {request_rate:.1} requests/s for {duration_s:.0} s")
            }
            Speed::Assumed { scale, from } => write!(f, "assumed ×{scale:.3} ({from}; no whole epoch ran)"),
        }
    }
}

/// Every job's plan and speed, in the recording's job order; None for one left out.
pub fn fit_all(recorded: &Recorded, nodes: &[NodeSpec]) -> Vec<Option<(JobPlan, Speed)>> {
    let types: Vec<GpuType> = nodes.iter().map(|n| GpuType::parse(&n.gpu_type).unwrap_or_default()).collect();
    let mut fitted: Vec<Option<(JobPlan, Option<Speed>)>> =
        recorded.jobs.iter().map(|t| base_plan(t, recorded.end_ms).map(|plan| fit_one(plan, t, &types))).collect();
    // What a job without a whole epoch borrows.
    let median_of = |gpu: bool| {
        let mut scales: Vec<f64> = fitted
            .iter()
            .flatten()
            .filter(|(plan, _)| (plan.gpus > 0) == gpu && plan.profile.is_none())
            .filter_map(|(plan, speed)| speed.as_ref().map(|_| plan.work_scale))
            .collect();
        scales.sort_by(f64::total_cmp);
        scales.get(scales.len() / 2).copied()
    };
    let (gpu_median, cpu_median) = (median_of(true), median_of(false));
    let profiles: Vec<(String, Arc<Profile>)> = recorded
        .jobs
        .iter()
        .zip(&fitted)
        .filter_map(|(t, f)| Some((t.spec.model.clone(), f.as_ref()?.0.profile.clone()?)))
        .collect();
    recorded
        .jobs
        .iter()
        .zip(fitted.iter_mut())
        .map(|(trail, f)| {
            let (mut plan, speed) = f.take()?;
            if let Some(speed) = speed {
                return Some((plan, speed));
            }
            let gpu = plan.gpus > 0;
            if gpu || known_model(&trail.spec).is_some() {
                let (median, kind) = if gpu { (gpu_median, "GPU") } else { (cpu_median, "CPU") };
                plan.work_scale = median.unwrap_or(1.0);
                let from = match median {
                    Some(_) => format!("the median of the recording's {kind} jobs"),
                    None => format!("no {kind} job ran a whole epoch: the tables as measured"),
                };
                let scale = plan.work_scale;
                return Some((plan, Speed::Assumed { scale, from }));
            }
            let (_, profile) = profiles.iter().find(|(model, _)| *model == trail.spec.model)?;
            plan.profile = Some(profile.clone());
            let from = format!("the profile of another {} job", trail.spec.model);
            Some((plan, Speed::Assumed { scale: 1.0, from }))
        })
        .collect()
}

/// The plan of a recorded training job at a work scale of one, or of a service.
fn base_plan(trail: &Trail, end_ms: u64) -> Option<JobPlan> {
    let spec = &trail.spec;
    if spec.kind == wit::JobKind::Inference {
        return Some(service(trail, end_ms));
    }
    let gpu = spec.gpus > 0;
    let model = known_model(spec).or(gpu.then_some(REFERENCE_MODEL)).unwrap_or(Model::Cifar10);
    let batch_size = [trail.batch_size, spec.scaling.batch_size_min].into_iter().find(|&b| b > 0);
    let plan = JobPlan {
        name: spec.name.clone(),
        batch_size: batch_size.unwrap_or_else(|| model.default_batch_size()),
        gpus: spec.gpus,
        replicas: spec.replicas.max(1),
        tiers: spec.tiers.map(|t| (t.deliverable, t.final_)),
        qoe_target: spec.qoe_target,
        disruptible: !wasmsched_core::declare::opted_out(spec),
        elastic: gpu && spec.scaling.gpu_counts.len() > 1,
        tenant: spec.tenant.clone(),
        measured: true,
        ..JobPlan::training(spec.name.clone(), model, spec.arrival_ms as f64 / 1000.0)
    };
    let schedule = if plan.by_goodput() { model.elastic_epochs() } else { plan.curve().epochs() };
    let done = trail.epochs_done();
    let max_epochs = if known_model(spec).is_some() {
        let whole = spec.max_epochs.map_or(schedule, |m| m.min(schedule));
        match trail.left_ms {
            // It left before its schedule's end: it ran what it ran.
            Some(_) if done < whole => Some(done.max(1)),
            _ => spec.max_epochs,
        }
    } else {
        // No schedule known: what it ran, or what it declared when it was still running. The
        // reference model's schedule bounds a GPU job's epochs ([`tables_scale`] spreads its
        // time over them).
        let ran = match trail.left_ms {
            Some(_) => done,
            None => spec.max_epochs.unwrap_or(done).max(done).min(super::MAX_EPOCHS),
        };
        Some(if gpu { ran.min(schedule) } else { ran }.max(1))
    };
    Some(JobPlan { max_epochs, ..plan })
}

/// A recorded service: its model (bert when not one of ours), serving from its arrival until it
/// left (or the recording's end, `end_ms`) at the rate its CPU use says.
fn service(trail: &Trail, end_ms: u64) -> JobPlan {
    let spec = &trail.spec;
    let model = known_model(spec).unwrap_or(Model::Bert);
    let duration_s = trail.left_ms.unwrap_or(end_ms).saturating_sub(spec.arrival_ms) as f64 / 1000.0;
    JobPlan {
        kind: wit::JobKind::Inference,
        gpus: spec.gpus,
        replicas: spec.replicas.max(1),
        qoe_target: spec.qoe_target,
        disruptible: !wasmsched_core::declare::opted_out(spec),
        tenant: spec.tenant.clone(),
        measured: true,
        request_rate: Some(trail.peak.0 as f64 / 1000.0 / REQUEST_COST_CORE_S),
        duration_s: Some(duration_s.max(0.001)),
        ..JobPlan::training(spec.name.clone(), model, spec.arrival_ms as f64 / 1000.0)
    }
}

/// `plan` fitted to what `trail` ran on nodes of `types`; the speed None when it ran no whole
/// epoch.
fn fit_one(plan: JobPlan, trail: &Trail, types: &[GpuType]) -> (JobPlan, Option<Speed>) {
    if let (Some(request_rate), Some(duration_s)) = (plan.request_rate, plan.duration_s) {
        return (plan, Some(Speed::Service { request_rate, duration_s }));
    }
    let Some(end) = trail.last_epoch_ms().filter(|_| trail.epochs_done() > 0) else { return (plan, None) };
    if plan.gpus > 0 {
        let Some(scale) = tables_scale(&plan, trail, types, end) else { return (plan, None) };
        let reference = known_model(&trail.spec).is_none();
        let speed = Speed::Tables { model: plan.model.name().into(), scale, reference };
        return (JobPlan { work_scale: scale, ..plan }, Some(speed));
    }
    let epochs = f64::from(trail.epochs_done());
    let (cpu_s, run_s) = cpu_until(trail, end);
    // Without CPU readings: one core for the time it ran.
    let core_s_per_epoch = if cpu_s > 0.0 { cpu_s / epochs } else { run_s / epochs };
    if !(core_s_per_epoch.is_finite() && core_s_per_epoch > 0.0) {
        return (plan, None);
    }
    if known_model(&trail.spec).is_some() {
        let scale = core_s_per_epoch / plan.model.work_per_epoch_core_s();
        let speed = Speed::ModelCpu { model: plan.model.name().into(), scale };
        return (JobPlan { work_scale: scale, ..plan }, Some(speed));
    }
    let max_cores = if cpu_s > 0.0 { (trail.peak.0 as f64 / 1000.0).max(0.01) } else { 1.0 };
    let startup_s = startup_s(trail);
    let costs = Costs {
        work_per_epoch_core_s: core_s_per_epoch,
        max_cores,
        startup_s,
        memory_bytes: trail.peak.1,
        share_cost: Vec::new(),
        quota_cost: Vec::new(),
    };
    let epochs_run = plan.max_epochs.unwrap_or(trail.epochs_done()).max(trail.epochs_done()).min(super::MAX_EPOCHS);
    let metric = trail.spec.metrics.first();
    let name = if trail.spec.model.trim().is_empty() { trail.spec.name.clone() } else { trail.spec.model.clone() };
    let profile = Profile::new(
        "the recording",
        name,
        metric.map_or_else(|| "progress".into(), |m| m.name.clone()),
        metric.map_or(wit::Direction::HigherIsBetter, |m| m.direction),
        costs,
        curve(trail, epochs_run),
    );
    match profile {
        Ok(profile) => {
            let speed = Speed::Profile { core_s_per_epoch, max_cores, startup_s };
            (JobPlan { profile: Some(Arc::new(profile)), max_epochs: Some(epochs_run), ..plan }, Some(speed))
        }
        Err(_) => (plan, None),
    }
}

/// A GPU job's time over its tables' time for the epochs it ran: up to `end` (its last epoch's
/// end), each run less the simulator's start-up pause, over each epoch's units at the step time
/// of the GPUs it ended on.
fn tables_scale(plan: &JobPlan, trail: &Trail, types: &[GpuType], end: u64) -> Option<f64> {
    let pause_s = if plan.by_goodput() { plan.model.restore_s() } else { SimConfig::default().gpu_start_s };
    let ran_s: f64 = trail
        .stints
        .iter()
        .filter(|s| s.from_ms < end)
        .map(|s| (s.to_ms.min(end).saturating_sub(s.from_ms) as f64 / 1000.0 - pause_s).max(0.0))
        .sum();
    // The epochs the replay runs (fewer than it ran for a model standing in with a shorter
    // schedule), each where its share of the recorded epochs ended.
    let done = trail.epochs_done();
    let runs = plan.max_epochs.unwrap_or(done).min(done).max(1);
    let mut tables_s = 0.0;
    for epoch in 1..=runs {
        let recorded = (u64::from(epoch) * u64::from(done)).div_ceil(u64::from(runs)) as u32;
        let ended = trail.epochs.iter().filter(|e| e.1 >= recorded).map(|e| e.0).min()?;
        let stint = trail.stints.iter().find(|s| s.from_ms < ended && ended <= s.to_ms)?;
        let mut held: Vec<GpuType> = stint.gpu_nodes.iter().filter_map(|&n| types.get(n.index()).copied()).collect();
        held.sort_unstable();
        held.dedup();
        let config = GpuConfig::new(plan.model, plan.batch_size, stint.gpu_nodes.len() as u32);
        let pinned = plan.tuned.then_some(plan.batch_size);
        let (step_s, config) = gpu_step(plan, config, pinned, &held, &stint.shape(), epoch)?;
        tables_s += plan.epoch_units(Some(config), epoch) * step_s;
    }
    let scale = ran_s / tables_s;
    (scale.is_finite() && scale > 0.0).then_some(scale)
}

/// The core-seconds a job was seen to use up to `end`, and the seconds it ran.
fn cpu_until(trail: &Trail, end: u64) -> (f64, f64) {
    trail.stints.iter().filter(|s| s.from_ms < end).fold((0.0, 0.0), |(cpu, run), s| {
        let span = s.to_ms.saturating_sub(s.from_ms) as f64;
        let kept = s.to_ms.min(end).saturating_sub(s.from_ms) as f64;
        let share = if span > 0.0 { kept / span } else { 0.0 };
        (cpu + s.cpu_core_ms * share / 1000.0, run + kept / 1000.0)
    })
}

/// From its first start to its first epoch's end, less one epoch (its second's length); 0
/// when it ran fewer than two epochs in its first run.
fn startup_s(trail: &Trail) -> f64 {
    let Some(first) = trail.stints.first() else { return 0.0 };
    let mut ends: Vec<u64> = trail.epochs.iter().filter(|e| e.0 <= first.to_ms).map(|e| e.0).collect();
    ends.sort_unstable();
    match ends[..] {
        [one, two, ..] => {
            ((one.saturating_sub(first.from_ms) as f64 - two.saturating_sub(one) as f64) / 1000.0).max(0.0)
        }
        _ => 0.0,
    }
}

/// Its main metric after each of `epochs` epochs, as recorded: a missing value is the one
/// before it (the first, the first recorded), and the last recorded stands beyond them.
pub(super) fn curve(trail: &Trail, epochs: u32) -> Vec<f64> {
    let mut by_epoch: Vec<Option<f64>> = vec![None; epochs.max(1) as usize];
    for &(_, epoch, value) in &trail.epochs {
        if value.is_finite()
            && let Some(slot) = epoch.checked_sub(1).and_then(|e| by_epoch.get_mut(e as usize))
        {
            *slot = Some(value);
        }
    }
    let first = by_epoch.iter().flatten().next().copied().unwrap_or(0.0);
    let mut last = first;
    by_epoch
        .into_iter()
        .map(|v| {
            last = v.unwrap_or(last);
            last
        })
        .collect()
}
