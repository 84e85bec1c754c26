//! What the simulator runs: a [`Workload`] of nodes ([`NodeSpec`]) and planned jobs
//! ([`JobPlan`]). The files they come from (TOML scenarios, Pollux workloads, the Philly
//! trace) are read by the scenario layer above the backends (`scenario.rs`); the
//! simulator takes a `Workload` and nothing else.

use std::sync::Arc;

use serde::Serialize;

use wasmsched_core::bindings::wit;

use super::model::Model;
use super::profile::{JobCurve, Profile};
use super::throughput::GpuConfig;

/// Nodes and planned jobs, ready for the simulator.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Workload {
    /// A short name for reports: the scenario's `name`, else the file's stem.
    pub name: String,
    /// The cluster, at least one node.
    pub nodes: Vec<NodeSpec>,
    /// The jobs, at least one, sorted by `arrival_s` (stable: ties keep the file's order).
    pub jobs: Vec<JobPlan>,
}

/// The most cores a scenario's node may have: far past any real machine (a few hundred), so
/// a mistyped number (`1e300`) is refused rather than simulated.
pub const MAX_NODE_CORES: f64 = 65_536.0;
/// The most memory a scenario's node may have: 1024 TiB.
pub const MAX_NODE_MEMORY_BYTES: u64 = 1 << 50;
/// The most GPUs a scenario's node may have (a real one has at most 16).
pub const MAX_NODE_GPUS: u32 = 1024;
/// The most GPUs, or replicas, a scenario's job may ask for (a real cluster has a few tens of
/// thousands of GPUs).
pub const MAX_JOB_GPUS: u32 = 1 << 20;

/// One node of the simulated cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeSpec {
    /// Unique name, e.g. `node-0`.
    pub name: String,
    /// CPU capacity, in millicores (1000 = one core); never zero.
    pub cpu_millicores: u64,
    /// Memory capacity.
    pub memory_bytes: u64,
    /// GPUs on the node.
    pub gpus: u32,
    /// Memory of each GPU.
    pub gpu_memory_bytes: u64,
    /// The type of its GPUs, as policies see it ("t4", "a100"); empty when not said.
    pub gpu_type: String,
    /// Its topology domains, coarsest first ("block-1", "rack-3"); empty when not said.
    pub domains: Vec<String>,
}

/// One job the simulator will start at `arrival_s`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobPlan {
    /// Unique within the workload; stable across runs and seeds.
    pub name: String,
    /// Which model it trains (or serves), hence its curve and costs; unused when `profile` is
    /// set.
    pub model: Model,
    /// A calibrated job kind it runs instead of a built-in model: the profile's curve, metric,
    /// costs, start-up and name replace `model`'s (a scenario's `[[profile]]`).
    #[serde(serialize_with = "profile_name")]
    pub profile: Option<Arc<Profile>>,
    /// Training or inference; inference only comes from scenarios.
    pub kind: wit::JobKind,
    /// When it arrives, in seconds from the start of the run (≥ 0).
    pub arrival_s: f64,
    /// Pinned placement (an index into [`Workload::nodes`]); `None` lets the simulator place it.
    pub node: Option<u32>,
    /// Global batch size; picks the nearest measured curve.
    pub batch_size: u32,
    /// GPUs it asks for, in all.
    pub gpus: u32,
    /// Into how many pieces it may be split across nodes (each takes `gpus / replicas`);
    /// 1 keeps it on one node.
    pub replicas: u32,
    /// Stop after this many epochs even if the curve goes on.
    pub max_epochs: Option<u32>,
    /// Multiplies the model's work per epoch; 1.0 by default.
    pub work_scale: f64,
    /// TRADL tiers `(T1, T2)` on the main metric; T1 is the easier one.
    pub tiers: Option<(f64, f64)>,
    /// DQoES target: seconds per epoch (training) or milliseconds per request (inference).
    pub qoe_target: Option<f64>,
    /// Inference: requests per second (always set for inference).
    pub request_rate: Option<f64>,
    /// Inference: how long the service runs, in seconds (always set for inference).
    pub duration_s: Option<f64>,
    /// False opts the job out of disruption: it declares `wasmsched.disruptible=false`, and
    /// the disruption budget refuses to stop, migrate or preempt it.
    pub disruptible: bool,
    /// An elastic GPU training job (Sia's "adaptive" jobs, `super::goodput`): it runs on any
    /// GPU count a policy gives it, picks its own batch size for them, trains its model's full
    /// schedule of epochs, and pays its model's restore delay at every restart. `gpus` is what
    /// it asks for when placed by a policy that does not resize.
    pub elastic: bool,
    /// A TunedJob (Sia's rigid jobs): rigid at `gpus` and `batch_size` to policies, but run
    /// by the elastic jobs' rules otherwise (full schedule, progress by goodput, restore delay).
    pub tuned: bool,
    /// The tenant it belongs to ("default" unless the scenario or trace names one).
    pub tenant: String,
    /// Its work was measured (a recorded job's, `wasmsched_lab::whatif`): the seed's noise leaves it as
    /// it is.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub measured: bool,
}

impl JobPlan {
    /// Whether it runs by Sia's simulator's rules (elastic or tuned): progress by goodput over
    /// its model's full schedule, its model's restore delay at every restart.
    pub fn by_goodput(&self) -> bool {
        self.elastic || self.tuned
    }

    /// A training job of `model` arriving at `arrival_s`: the model's default batch size, no
    /// GPU, no pinned node, its whole curve at the model's work per epoch, no targets.
    pub fn training(name: impl Into<String>, model: Model, arrival_s: f64) -> JobPlan {
        JobPlan {
            name: name.into(),
            model,
            profile: None,
            kind: wit::JobKind::Training,
            arrival_s,
            node: None,
            batch_size: model.default_batch_size(),
            gpus: 0,
            replicas: 1,
            max_epochs: None,
            work_scale: 1.0,
            tiers: None,
            qoe_target: None,
            request_rate: None,
            duration_s: None,
            disruptible: true,
            elastic: false,
            tuned: false,
            tenant: wasmsched_core::world::DEFAULT_TENANT.into(),
            measured: false,
        }
    }

    /// A training job of a calibrated `profile` arriving at `arrival_s`: its whole curve, no
    /// GPU, no pinned node, no targets.
    pub fn profiled(name: impl Into<String>, profile: Arc<Profile>, arrival_s: f64) -> JobPlan {
        JobPlan { profile: Some(profile), ..JobPlan::training(name, Model::Cifar10, arrival_s) }
    }

    /// The learning curve it walks: its profile's, else its model's at its batch size.
    pub fn curve(&self) -> JobCurve {
        match &self.profile {
            Some(p) => JobCurve::Profile(p.curve().clone()),
            None => JobCurve::Model(self.model.curve(self.batch_size)),
        }
    }

    /// The units of work of its epoch `epoch` (1-based) at GPU configuration `gpu`, at a work
    /// scale of one: goodput progress for an elastic or tuned GPU job, optimiser steps for a
    /// rigid one, one for a CPU job (whose epoch is its cost in core-seconds).
    pub fn epoch_units(&self, gpu: Option<GpuConfig>, epoch: u32) -> f64 {
        match gpu {
            Some(_) if self.by_goodput() => {
                let model = self.model.key();
                super::goodput::boundary(model, epoch) - super::goodput::boundary(model, epoch - 1)
            }
            Some(g) => self.model.steps_in(g.batch_size(), epoch),
            None => 1.0,
        }
    }

    /// The name of its model or profile, for reports.
    pub fn model_name(&self) -> &str {
        self.profile.as_ref().map_or(self.model.name(), |p| p.name.as_str())
    }

    /// The name and direction of its main metric.
    pub fn metric(&self) -> (&str, wit::Direction) {
        self.profile.as_ref().map_or(self.model.metric(), |p| (p.metric.as_str(), p.direction))
    }

    /// CPU work of one epoch, in core-seconds, before `work_scale`.
    pub fn work_per_epoch_core_s(&self) -> f64 {
        self.profile.as_ref().map_or(self.model.work_per_epoch_core_s(), |p| p.costs.work_per_epoch_core_s)
    }

    /// Nominal work one core-second does for this job when it gets `cores` under `limit`:
    /// 1 for a built-in model, a profile's measured cost by CPU otherwise
    /// ([`super::profile::Costs::efficiency`]).
    pub fn cpu_efficiency(&self, cores: f64, limit: Option<f64>) -> f64 {
        self.profile.as_ref().map_or(1.0, |p| p.costs.efficiency(cores, limit))
    }

    /// The most cores it uses usefully.
    pub fn max_cores(&self) -> f64 {
        self.profile.as_ref().map_or(self.model.max_parallelism_cores(), |p| p.costs.max_cores)
    }

    /// Its resident memory.
    pub fn memory_bytes(&self) -> u64 {
        self.profile.as_ref().map_or(self.model.memory_bytes(), |p| p.costs.memory_bytes)
    }

    /// Wall time from its first start to the start of its first epoch (a profile's measured
    /// start-up; none for a built-in model).
    pub fn startup_s(&self) -> f64 {
        self.profile.as_ref().map_or(0.0, |p| p.costs.startup_s)
    }
}

/// A plan's profile as its name, in reports.
fn profile_name<S: serde::Serializer>(profile: &Option<Arc<Profile>>, s: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&profile.as_ref().map(|p| p.name.as_str()), s)
}

impl Workload {
    /// A workload of `nodes` and `jobs` (sorted by arrival by the caller).
    pub fn of(name: impl Into<String>, nodes: Vec<NodeSpec>, jobs: Vec<JobPlan>) -> Workload {
        Workload { name: name.into(), nodes, jobs }
    }

    /// The workload shaken for `seed` (input shaking, so that a result is not one trace's
    /// artefact): each gap between one arrival and the next, each job's work and each
    /// service's duration times its own factor drawn uniformly from
    /// [1 − `fraction`, 1 + `fraction`]. The first arrival and the jobs' order stay, so runs
    /// of several policies on one seed still pair job by job. `fraction` is clamped to
    /// [0, 0.9]; 0 gives the workload as it is.
    pub fn shaken(&self, fraction: f64, seed: u64) -> Workload {
        let fraction = if fraction.is_finite() { fraction.clamp(0.0, 0.9) } else { 0.0 };
        let mut rng = crate::Rng::new(seed ^ 0x5a4e_d1f7_e2a0);
        let mut jobs = self.jobs.clone();
        let mut previous = self.jobs.first().map_or(0.0, |j| j.arrival_s);
        let mut at = previous;
        for job in &mut jobs {
            at += (job.arrival_s - previous) * rng.around_one(fraction);
            previous = job.arrival_s;
            job.arrival_s = at;
            job.work_scale *= rng.around_one(fraction);
            if let Some(d) = job.duration_s.as_mut() {
                *d *= rng.around_one(fraction);
            }
        }
        Workload { name: self.name.clone(), nodes: self.nodes.clone(), jobs }
    }

    /// Gives every training job without tiers the default tiers of its curve
    /// ([`super::model::Curve::default_tiers`]: 80 % and 95 % of the curve's improvement).
    pub fn with_default_targets(mut self) -> Workload {
        for job in &mut self.jobs {
            if job.kind == wit::JobKind::Training && job.tiers.is_none() {
                job.tiers = Some(job.curve().default_tiers());
            }
        }
        self
    }
}
