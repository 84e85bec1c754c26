//! A calibrated job kind: what `wasmsched calibrate` measured of a real job on a real Docker
//! Engine, in a form the simulator runs ([`Profile`]).
//!
//! The simulator's cost model is the one it runs for the built-in models: an epoch is a fixed
//! amount of CPU work (`work-per-epoch-core-s`, measured as the CPU time charged), done at the
//! rate of the cores the job gets, and a job gets at most `max-cores` cores (its most useful
//! parallelism). A calibrated epoch's cost may also depend on the CPU the job gets, as
//! measured: `share-cost` gives it by the cores used as a share, `quota-cost` by the limit
//! while a CPU quota below `max-cores` holds the job ([`Costs::efficiency`]). A profile adds a
//! start-up delay (`startup-s`: from the container's creation to the start of its first epoch,
//! a wall time that uses no modelled CPU) and replaces the model's learning curve with the
//! job's own, one metric value per epoch. `wasmsched_lab::calibrate` explains how each figure is
//! measured and fitted.
//!
//! The file is TOML, unknown keys refused:
//!
//! ```toml
//! name = "learner"
//! metric = "accuracy"
//! direction = "higher-is-better"
//! work-per-epoch-core-s = 1.37
//! max-cores = 1.86
//! startup-s = 0.42
//! share-cost = [[0.49, 1.33], [0.99, 1.42], [1.82, 1.52]]   # [cores used, core-s per epoch]
//! quota-cost = [[0.5, 1.51], [1.0, 1.6]]                    # [limit, quota-s per epoch]
//! memory = "41.3MiB"
//! curve = [0.3726, 0.379, 0.3832]
//!
//! [measured]                      # how it was measured; kept for people, not used
//! image = "wasmsched-trainer:99bc4f2d54fe"
//! command = ["/wasmsched-trainer", "--epochs", "3"]
//! engine-cores = 2.0
//! [[measured.limit]]                # one per copy: four ran side by side, half a core each
//! cores = 0.5
//! copies = 4
//! quota = false
//! epochs = 4
//! epoch-s = 2.74
//! fitted-epoch-s = 2.74
//! startup-s = 0.45
//! cpu-per-epoch-core-s = 1.36
//! ```

use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use wasmsched_core::bindings::wit;
use wasmsched_core::units::parse_bytes;

use super::model::Curve;

/// A job kind measured on a real engine: its curve, its CPU cost and its start-up.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// The name scenarios use for it (`model = "learner"`) and reports show.
    pub name: String,
    /// The metric its curve records.
    pub metric: String,
    /// Whether a higher or a lower metric is better.
    pub direction: wit::Direction,
    /// What the job costs.
    pub costs: Costs,
    /// One metric value per epoch.
    curve: Arc<Curve>,
    /// The metric values, as measured.
    metrics: Vec<f64>,
    /// How it was measured, when known.
    pub measured: Option<Measured>,
}

/// What a calibrated job costs, in the simulator's cost model.
#[derive(Clone, Debug, PartialEq)]
pub struct Costs {
    /// CPU work of one epoch, in core-seconds.
    pub work_per_epoch_core_s: f64,
    /// The most cores the job uses usefully.
    pub max_cores: f64,
    /// Wall time from the job's creation to the start of its first epoch.
    pub startup_s: f64,
    /// Resident memory.
    pub memory_bytes: u64,
    /// CPU charged per epoch at the cores the job gets as a share: `(cores, core-s)`, by
    /// cores; empty: `work_per_epoch_core_s` at any.
    pub share_cost: Vec<(f64, f64)>,
    /// Quota-seconds per epoch while a CPU limit below `max_cores` holds the job:
    /// `(limit, core-s)`, by limit; empty: the share cost.
    pub quota_cost: Vec<(f64, f64)>,
}

impl Costs {
    /// How much of an epoch's nominal work (`work_per_epoch_core_s`) one core-second does for
    /// a job that gets `cores` under `limit`: the quota cost at the limit while a limit below
    /// `max_cores` holds it, else the share cost at `cores`; each linear between its points and
    /// flat beyond them (`wasmsched_lab::calibrate::fit` says how they are measured). 1 without them.
    pub fn efficiency(&self, cores: f64, limit: Option<f64>) -> f64 {
        let held = limit.filter(|&l| l < self.max_cores * 0.98 && !self.quota_cost.is_empty());
        let cost = match held {
            Some(l) => piecewise(&self.quota_cost, l),
            None if !self.share_cost.is_empty() => piecewise(&self.share_cost, cores),
            None => return 1.0,
        };
        self.work_per_epoch_core_s / cost
    }
}

/// `points` (sorted by x, not empty) at `x`: linear between them, flat beyond them.
fn piecewise(points: &[(f64, f64)], x: f64) -> f64 {
    let k = points.partition_point(|p| p.0 < x);
    match (k.checked_sub(1).map(|i| points[i]), points.get(k)) {
        (Some((x0, y0)), Some(&(x1, y1))) if x1 > x0 => y0 + (y1 - y0) * (x - x0) / (x1 - x0),
        (_, Some(&(_, y))) | (Some((_, y)), None) => y,
        (None, None) => f64::NAN,
    }
}

/// How a profile was measured: for people reading the file; the simulator does not use it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Measured {
    /// The image the job ran from.
    pub image: String,
    /// Its command, as run.
    pub command: Vec<String>,
    /// The engine's CPUs.
    pub engine_cores: f64,
    /// One entry per CPU limit it ran under.
    #[serde(default, rename = "limit")]
    pub limits: Vec<LimitRun>,
}

impl Measured {
    /// The cores the engine gave its containers when they filled it: over each share run
    /// (copies side by side), the CPU the copies were charged per second together, averaged
    /// over the runs. Less than the engine's CPUs by what the engine, the host and the rest of
    /// the machine take; a simulated node of the same machine should have this many cores.
    /// None without a share run whose copies all have CPU readings.
    pub fn usable_cores(&self) -> Option<f64> {
        let mut groups: Vec<(f64, f64, u32)> = Vec::new();
        for l in self.limits.iter().filter(|l| l.copies > 1 && !l.quota) {
            let rate = l.cpu_per_epoch_core_s.filter(|_| l.epoch_s > 0.0).map(|c| c / l.epoch_s);
            match groups.iter_mut().find(|g| g.0 == l.cores) {
                Some(g) => {
                    g.1 += rate.unwrap_or(f64::NAN);
                    g.2 += 1;
                }
                None => groups.push((l.cores, rate.unwrap_or(f64::NAN), 1)),
            }
        }
        let whole: Vec<f64> = groups
            .iter()
            .filter(|&&(cores, sum, seen)| {
                sum.is_finite() && (cores * f64::from(seen) - self.engine_cores).abs() < 0.05
            })
            .map(|g| g.1)
            .collect();
        (!whole.is_empty()).then(|| whole.iter().sum::<f64>() / whole.len() as f64)
    }
}

/// What one run under one CPU limit measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LimitRun {
    /// The CPU allocation, in cores.
    pub cores: f64,
    /// Copies of the job that ran side by side (this row is one of them).
    pub copies: u32,
    /// Whether the allocation was a CPU quota (else a CFS share among the copies).
    pub quota: bool,
    /// Epochs it ran.
    pub epochs: u32,
    /// Median time between two epoch lines.
    pub epoch_s: f64,
    /// What the fitted model says the epoch time is at this limit.
    pub fitted_epoch_s: f64,
    /// From the container's creation to its first epoch line, less one epoch.
    pub startup_s: f64,
    /// CPU time the engine charged per epoch, when it reported enough readings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_per_epoch_core_s: Option<f64>,
}

/// Why a profile could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The file could not be read.
    #[error("cannot read profile {path}: check that the file exists (`wasmsched calibrate --out` writes one)")]
    Read {
        /// The file.
        path: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// Not valid TOML, an unknown key, or a value of the wrong type.
    #[error("profile {path}: {message} (the format is in scenarios/README.md, `[[profile]]`)")]
    Toml {
        /// The file.
        path: String,
        /// What the parser said.
        message: String,
    },
    /// A value out of range.
    #[error("profile {path}: `{field}`: {message}")]
    Field {
        /// The file.
        path: String,
        /// The key.
        field: &'static str,
        /// What is wrong and what to write.
        message: String,
    },
}

/// The file's form.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ProfileFile {
    /// The job kind's name.
    name: String,
    /// The metric the curve records.
    metric: String,
    /// `higher-is-better` or `lower-is-better`.
    direction: DirectionName,
    /// CPU work of one epoch, core-seconds.
    work_per_epoch_core_s: f64,
    /// The most cores used usefully.
    max_cores: f64,
    /// From creation to the first epoch's start, seconds.
    startup_s: f64,
    /// `[cores, core-s per epoch]` as a share.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    share_cost: Vec<(f64, f64)>,
    /// `[limit, core-s per epoch]` under a quota.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    quota_cost: Vec<(f64, f64)>,
    /// Resident memory, with a unit.
    memory: String,
    /// The metric after each epoch.
    curve: Vec<f64>,
    /// How it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    measured: Option<Measured>,
}

/// A metric direction as written in a profile.
#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum DirectionName {
    /// A higher metric is better.
    HigherIsBetter,
    /// A lower metric is better.
    LowerIsBetter,
}

impl Profile {
    /// A profile from its figures; `path` labels errors. Refuses an empty or non-finite curve,
    /// a work or core count that is not positive, and a negative start-up.
    pub fn new(
        path: &str,
        name: String,
        metric: String,
        direction: wit::Direction,
        costs: Costs,
        metrics: Vec<f64>,
    ) -> Result<Profile, ProfileError> {
        let Costs { work_per_epoch_core_s, max_cores, startup_s, .. } = costs;
        let mut costs = costs;
        let field = |field, message: String| ProfileError::Field { path: path.into(), field, message };
        if name.trim().is_empty() {
            return Err(field("name", "a profile needs a non-empty name".into()));
        }
        if !(work_per_epoch_core_s.is_finite() && work_per_epoch_core_s > 0.0) {
            return Err(field("work-per-epoch-core-s", format!("{work_per_epoch_core_s}: must be a positive number")));
        }
        if !(max_cores.is_finite() && max_cores > 0.0) {
            return Err(field("max-cores", format!("{max_cores}: must be a positive number of cores")));
        }
        if !(startup_s.is_finite() && startup_s >= 0.0) {
            return Err(field("startup-s", format!("{startup_s}: must be zero or more seconds")));
        }
        for (key, points) in [("share-cost", &mut costs.share_cost), ("quota-cost", &mut costs.quota_cost)] {
            if let Some(&(cores, core_s)) =
                points.iter().find(|&&(c, w)| !(c.is_finite() && c > 0.0 && w.is_finite() && w > 0.0))
            {
                let message = format!("[{cores}, {core_s}]: give [cores, core-s per epoch] pairs of positive numbers");
                return Err(field(key, message));
            }
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        let curve = Curve::new(metrics.clone(), direction).ok_or_else(|| {
            field("curve", "give the metric after each epoch, at least one value, every one a finite number".into())
        })?;
        Ok(Profile { name, metric, direction, costs, curve: Arc::new(curve), metrics, measured: None })
    }

    /// Reads a profile file.
    pub fn load(path: &Path) -> Result<Profile, ProfileError> {
        let label = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|source| ProfileError::Read { path: label.clone(), source })?;
        Profile::from_toml_str(&label, &text)
    }

    /// Parses a profile; `path` labels errors.
    pub fn from_toml_str(path: &str, text: &str) -> Result<Profile, ProfileError> {
        let file: ProfileFile = toml::from_str(text)
            .map_err(|e| ProfileError::Toml { path: path.into(), message: e.message().trim_end().to_string() })?;
        let memory_bytes = parse_bytes(&file.memory).map_err(|message| ProfileError::Field {
            path: path.into(),
            field: "memory",
            message,
        })?;
        let direction = match file.direction {
            DirectionName::HigherIsBetter => wit::Direction::HigherIsBetter,
            DirectionName::LowerIsBetter => wit::Direction::LowerIsBetter,
        };
        let mut profile = Profile::new(
            path,
            file.name,
            file.metric,
            direction,
            Costs {
                work_per_epoch_core_s: file.work_per_epoch_core_s,
                max_cores: file.max_cores,
                startup_s: file.startup_s,
                memory_bytes,
                share_cost: file.share_cost,
                quota_cost: file.quota_cost,
            },
            file.curve,
        )?;
        profile.measured = file.measured;
        Ok(profile)
    }

    /// The profile as a TOML file that [`Profile::from_toml_str`] reads back.
    pub fn to_toml(&self) -> String {
        let file = ProfileFile {
            name: self.name.clone(),
            metric: self.metric.clone(),
            direction: match self.direction {
                wit::Direction::HigherIsBetter => DirectionName::HigherIsBetter,
                wit::Direction::LowerIsBetter => DirectionName::LowerIsBetter,
            },
            work_per_epoch_core_s: self.costs.work_per_epoch_core_s,
            max_cores: self.costs.max_cores,
            startup_s: self.costs.startup_s,
            share_cost: self.costs.share_cost.clone(),
            quota_cost: self.costs.quota_cost.clone(),
            memory: format!("{:.1}MiB", self.costs.memory_bytes as f64 / f64::from(1u32 << 20)),
            curve: self.metrics.clone(),
            measured: self.measured.clone(),
        };
        let body = toml::to_string(&file).expect("a profile serialises to TOML");
        format!(
            "# A job kind measured by `wasmsched calibrate`: the simulator runs it as a scenario's\n\
             # [[profile]] (scenarios/README.md). work-per-epoch-core-s, max-cores, startup-s and the\n\
             # costs by CPU come from [measured]; curve is the metric after each epoch of one whole run.\n{body}"
        )
    }

    /// The learning curve, shared by every job of this kind.
    pub fn curve(&self) -> &Arc<Curve> {
        &self.curve
    }
}

/// The learning curve a job walks: a built-in model's (embedded, static) or a calibrated
/// profile's (shared by its jobs).
#[derive(Clone, Debug)]
pub enum JobCurve {
    /// A built-in model's measured curve.
    Model(&'static Curve),
    /// A calibrated profile's curve.
    Profile(Arc<Curve>),
}

impl Deref for JobCurve {
    type Target = Curve;

    fn deref(&self) -> &Curve {
        match self {
            JobCurve::Model(c) => c,
            JobCurve::Profile(c) => c,
        }
    }
}

/// A calibrated profile of three epochs, for tests (here and in the lab's scenarios) and
/// examples.
pub fn sample() -> Profile {
    let mut p = Profile::new(
        "p",
        "learner".into(),
        "accuracy".into(),
        wit::Direction::HigherIsBetter,
        Costs {
            work_per_epoch_core_s: 1.25,
            max_cores: 1.8,
            startup_s: 0.4,
            memory_bytes: 40 << 20,
            share_cost: Vec::new(),
            quota_cost: Vec::new(),
        },
        vec![0.3, 0.5, 0.6],
    )
    .expect("valid");
    p.measured = Some(Measured {
        image: "trainer:1".into(),
        command: vec!["/t".into(), "--epochs".into(), "3".into()],
        engine_cores: 2.0,
        limits: vec![LimitRun {
            cores: 0.5,
            copies: 4,
            quota: false,
            epochs: 4,
            epoch_s: 2.5,
            fitted_epoch_s: 2.5,
            startup_s: 0.4,
            cpu_per_epoch_core_s: Some(1.25),
        }],
    });
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sample` with costs by CPU: 1.2 core-s an epoch on half a core, 1.4 on 1.8 cores, 1.5
    /// under a quota of half a core.
    fn with_costs() -> Profile {
        let mut p = sample();
        p.costs.share_cost = vec![(0.5, 1.2), (1.8, 1.4)];
        p.costs.quota_cost = vec![(0.5, 1.5)];
        p
    }

    #[test]
    fn a_profile_round_trips_through_its_file() {
        for p in [sample(), with_costs()] {
            let text = p.to_toml();
            assert!(text.starts_with("# A job kind measured by `wasmsched calibrate`"), "{text}");
            assert_eq!(Profile::from_toml_str("p", &text).expect("reads back"), p);
            assert_eq!(p.curve().epochs(), 3);
            assert_eq!(p.curve().metric_at(2), 0.5);
        }
    }

    #[test]
    fn the_cost_of_an_epoch_follows_the_cpu_a_job_gets_and_how() {
        let c = with_costs().costs;
        let cost = |cores: f64, limit: Option<f64>| c.work_per_epoch_core_s / c.efficiency(cores, limit);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        // As a share: linear between the measured points, flat beyond them.
        assert!(close(cost(0.5, None), 1.2) && close(cost(0.25, None), 1.2));
        assert!(close(cost(1.15, None), 1.3) && close(cost(1.8, None), 1.4) && close(cost(4.0, None), 1.4));
        // A limit below the most useful cores holds the job: the quota cost, at the limit.
        assert!(close(cost(0.5, Some(0.5)), 1.5) && close(cost(0.3, Some(1.0)), 1.5));
        // A limit at or above them does not: the share cost.
        assert!(close(cost(1.8, Some(2.0)), 1.4));
        // Without measurements, every core-second does nominal work.
        assert_eq!(sample().costs.efficiency(0.7, Some(0.5)), 1.0);
    }

    #[test]
    fn bad_profiles_are_refused_naming_the_field() {
        let good = sample().to_toml();
        let cases = [
            ("work-per-epoch-core-s = 1.25", "work-per-epoch-core-s = 0.0", "work-per-epoch-core-s"),
            ("max-cores = 1.8", "max-cores = -1.0", "max-cores"),
            ("startup-s = 0.4", "startup-s = -0.1", "startup-s"),
            ("curve = [0.3, 0.5, 0.6]", "curve = []", "curve"),
            ("memory = \"40.0MiB\"", "memory = \"lots\"", "memory"),
            ("startup-s = 0.4", "startup-s = 0.4\nshare-cost = [[0.5, 0.0]]", "share-cost"),
            ("startup-s = 0.4", "startup-s = 0.4\nquota-cost = [[-1.0, 1.0]]", "quota-cost"),
            ("direction = \"higher-is-better\"", "direction = \"up\"", "unknown variant"),
            ("name = \"learner\"", "name = \"learner\"\ncolour = \"red\"", "unknown field"),
        ];
        for (from, to, says) in cases {
            assert!(good.contains(from), "{from} in {good}");
            let err = Profile::from_toml_str("p.toml", &good.replace(from, to)).expect_err(to).to_string();
            assert!(err.starts_with("profile p.toml:") && err.contains(says), "{to}: {err}");
        }
    }

    #[test]
    fn a_profiled_job_starts_up_then_walks_its_curve_at_its_measured_cost() {
        use crate::workload::{JobPlan, NodeSpec, Workload};
        use crate::{SimConfig, Simulator};
        use wasmsched_core::backend::Backend;
        // 1.25 core-s per epoch, at most 1.8 cores, 0.4 s of start-up, on 4 cores: the job
        // ends 0.4 + 3 × 1.25 / 1.8 s after it arrives, having reported its own curve.
        let profile = Arc::new(sample());
        let node = NodeSpec {
            name: "n".into(),
            cpu_millicores: 4000,
            memory_bytes: 1 << 30,
            gpus: 0,
            gpu_memory_bytes: 0,
            gpu_type: String::new(),
            domains: Vec::new(),
        };
        let job = JobPlan { tiers: Some((0.4, 0.55)), ..JobPlan::profiled("a", profile, 2.0) };
        assert_eq!(
            (job.model_name(), job.metric().0, job.max_cores(), job.startup_s()),
            ("learner", "accuracy", 1.8, 0.4)
        );
        let w = Workload::of("w", vec![node], vec![job]);
        let mut sim = Simulator::new(&w, SimConfig { noise: 0.0, keep_progress: true, ..SimConfig::default() });
        let mut world = wasmsched_core::world::World::new();
        let mut t = 0;
        while sim.observe(&mut world, t + 100) {
            t += 100;
            if let Some((spec, state)) = world.jobs().next() {
                assert_eq!((spec.model.as_str(), state.memory_used_bytes), ("learner", 40 << 20));
            }
        }
        let out = &sim.outcomes()[0];
        let expected = 0.4 + 3.0 * 1.25 / 1.8;
        assert!((out.jct_s.expect("it ends") - expected).abs() < 1e-6, "{out:?}");
        assert_eq!(out.progress.iter().map(|p| p.1).collect::<Vec<_>>(), [0.3, 0.5, 0.6]);
        assert_eq!(out.model, "learner");
        let t1 = out.targets_reached_s[0].expect("T1 = 0.4 is reached at the second epoch");
        assert!((t1 - (0.4 + 2.0 * 1.25 / 1.8)).abs() < 1e-6, "{t1}");
    }

    #[test]
    fn a_job_curve_reads_like_the_curve_it_holds() {
        let p = sample();
        let shared = JobCurve::Profile(p.curve().clone());
        assert_eq!(shared.metric_at(3), 0.6);
        let model = super::super::model::Model::Ncf;
        let builtin = JobCurve::Model(model.curve(model.default_batch_size()));
        assert_eq!(builtin.epochs(), 10);
    }

    #[test]
    fn usable_cores_are_what_the_copies_of_a_full_share_run_were_charged_together() {
        let run = |cores: f64, copies: u32, epoch_s: f64, cpu: Option<f64>| LimitRun {
            cores,
            copies,
            quota: false,
            epochs: 4,
            epoch_s,
            fitted_epoch_s: epoch_s,
            startup_s: 0.4,
            cpu_per_epoch_core_s: cpu,
        };
        let measured = |limits| Measured { engine_cores: 2.0, limits, ..Measured::default() };
        // Four copies at half a core, each charged 1.2 core-s per 2.5 s epoch: 1.92 cores.
        let four = vec![run(0.5, 4, 2.5, Some(1.2)); 4];
        assert!((measured(four.clone()).usable_cores().unwrap() - 1.92).abs() < 1e-9);
        // With a full two-copy run beside it, the mean of the two.
        let mut both = four.clone();
        both.extend(vec![run(1.0, 2, 1.25, Some(1.25)); 2]);
        assert!((measured(both).usable_cores().unwrap() - (1.92 + 2.0) / 2.0).abs() < 1e-9);
        // A run missing a copy, a copy without CPU readings, or no share run at all: nothing.
        assert_eq!(measured(four[..3].to_vec()).usable_cores(), None);
        let mut unread = four;
        unread[0].cpu_per_epoch_core_s = None;
        assert_eq!(measured(unread).usable_cores(), None);
        assert_eq!(measured(vec![run(2.0, 1, 0.6, Some(1.2))]).usable_cores(), None);
    }
}
