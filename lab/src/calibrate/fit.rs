//! The pure half of calibration: from what a job did under each CPU limit to the simulator's
//! cost model (work per epoch, most useful cores, start-up).
//!
//! **The model**, the simulator's own: an epoch is `W` core-seconds of work, done at the rate
//! of the cores the job gets, and the job gets at most `M` of them, so under a limit of `c`
//! cores an epoch takes `W / min(c, M)`. A job of `T` threads that synchronise every step
//! speeds up nearly linearly to `T` cores and not at all beyond; the cap says exactly that,
//! and the simulator shares a node's CPU with it as CFS does (what a capped job cannot use
//! flows to the others). Amdahl's law, the usual alternative, would bend the curve below `T`
//! but needs a sharing rule of its own; [`Fit::limits`] shows how far each measured point lies
//! from the fitted line, so a job for which the cap is wrong is seen to be.
//!
//! **Work.** `W` is the CPU time the job's cgroup was charged per epoch (the engine's stats,
//! between the first and the last epoch line, epochs interpolated between lines), the median
//! over the limits. CPU time is what CFS shares out, so it is the simulator's unit of work; it
//! also does not grow when something else on the machine slows the job down, as wall time
//! does. Without CPU readings (a run too short for two), `W` is fitted with `M`.
//!
//! **The fit.** One point per limit, the median time between two epoch lines there (the first
//! line is left out: it carries the start-up). `M` (and `W` when it was not measured)
//! minimise the squared error of the logarithms (relative errors, so a slow point weighs as
//! much as a fast one): for a given `M`, the best `ln W` is the mean of `ln(tᵢ · min(cᵢ, M))`;
//! `M` is searched over a fine grid up to the largest limit. When the job still sped up at the
//! largest limit, `M` is that limit (all that was measured) and [`Fit::capped`] is false.
//!
//! **Cost by CPU, when CPU readings exist.** One work figure hides two things the engine
//! shows: a job of several threads is charged more CPU per epoch the more cores it runs on at
//! once (its threads wait on each other less idly), and more again under a quota, which lets
//! its threads burn a period's budget together and then stalls them all. So with CPU readings
//! the model is measured rather than fitted: `M` is the cores the job used alone under the
//! largest limit (CPU charged per second; uncapped when that is the whole limit); the **share
//! cost** is, per allocation run as a CFS share (and alone), the CPU charged per epoch at the
//! cores the job used there; the **quota cost** is, per allocation run alone under a quota, the
//! quota-seconds an epoch took (epoch time × the quota, up to `M`). The simulator charges a job
//! the quota cost at its limit while a limit below `M` holds it, else the share cost at the
//! cores it gets, each linear between the measured points and flat beyond them. `W` is then the
//! median share cost, the figure the simulator scales by.
//!
//! **Start-up**: from the container's creation to its first epoch line, less one epoch at
//! that limit; the median over the limits.

use wasmsched_sim::profile::Costs;

/// What one run under one CPU limit showed.
#[derive(Clone, Debug, PartialEq)]
pub struct LimitSample {
    /// The CPU limit, in cores.
    pub cores: f64,
    /// Whether it ran alone under a CPU quota below the largest limit (else as a CFS share
    /// beside copies of itself, or alone with the whole engine).
    pub quota: bool,
    /// From the container's creation to each epoch line, in seconds, in order.
    pub lines_s: Vec<f64>,
    /// CPU readings: from the container's creation, in seconds, and the CPU time charged to
    /// it so far, in core-seconds; in order.
    pub cpu_s: Vec<(f64, f64)>,
}

/// How one limit compares with the fitted model.
#[derive(Clone, Debug, PartialEq)]
pub struct LimitFit {
    /// The limit, in cores.
    pub cores: f64,
    /// The median time between two epoch lines.
    pub epoch_s: f64,
    /// What the model says it is.
    pub fitted_epoch_s: f64,
    /// From creation to the first epoch line, less one fitted epoch.
    pub startup_s: f64,
    /// CPU time charged per epoch, when there were readings enough.
    pub cpu_per_epoch_core_s: Option<f64>,
}

/// The fitted cost model.
#[derive(Clone, Debug, PartialEq)]
pub struct Fit {
    /// CPU work of one epoch, in core-seconds.
    pub work_per_epoch_core_s: f64,
    /// The most cores used usefully.
    pub max_cores: f64,
    /// Whether the job stopped speeding up below the largest limit measured.
    pub capped: bool,
    /// Whether `work_per_epoch_core_s` is measured CPU time (else fitted to epoch times).
    pub work_measured: bool,
    /// From creation to the first epoch's start, in seconds.
    pub startup_s: f64,
    /// CPU charged per epoch at the cores used, as a share: `(cores, core-s)`, by cores;
    /// empty without CPU readings.
    pub share_cost: Vec<(f64, f64)>,
    /// Quota-seconds per epoch under a quota: `(limit, core-s)`, by limit; empty without
    /// quota runs or CPU readings.
    pub quota_cost: Vec<(f64, f64)>,
    /// Per limit with an epoch time, in the order given.
    pub limits: Vec<LimitFit>,
}

/// Why the measurements cannot be fitted.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum FitError {
    /// Fewer than two limits with a measured epoch time.
    #[error(
        "{found} CPU limit(s) gave an epoch time (each needs two epoch lines): measure at two limits or more, \
         e.g. --limits 0.5,1,2"
    )]
    TooFewLimits {
        /// How many did.
        found: usize,
    },
    /// A limit or a time that is not a positive number.
    #[error("limit {cores}: times and limits must be positive and finite")]
    NotPositive {
        /// The limit.
        cores: f64,
    },
}

/// Grid points searched for `M` between the lowest sensible cap and the largest limit.
const GRID: usize = 4000;

/// Fits the cost model to `samples`; limits with fewer than two epoch lines give no epoch time
/// (but still a start-up when they have one line).
pub fn fit(samples: &[LimitSample]) -> Result<Fit, FitError> {
    for s in samples {
        let bad = |x: f64| !(x.is_finite() && x > 0.0);
        if bad(s.cores) || s.lines_s.iter().any(|&t| bad(t)) || s.lines_s.windows(2).any(|w| w[1] < w[0]) {
            return Err(FitError::NotPositive { cores: s.cores });
        }
    }
    let epochs: Vec<Option<f64>> = samples.iter().map(epoch_s).collect();
    let mut limits: Vec<f64> = samples.iter().zip(&epochs).filter(|(_, e)| e.is_some()).map(|(s, _)| s.cores).collect();
    limits.sort_by(f64::total_cmp);
    limits.dedup();
    if limits.len() < 2 {
        return Err(FitError::TooFewLimits { found: limits.len() });
    }
    let highest = limits[limits.len() - 1];
    let cpu: Vec<Option<f64>> = samples.iter().map(cpu_per_epoch).collect();
    let model = measured(samples, &epochs, &cpu, highest).unwrap_or_else(|| fitted(samples, &epochs, &cpu, &limits));
    let startups: Vec<f64> = samples
        .iter()
        .filter_map(|s| s.lines_s.first().map(|&first| (first - model.epoch_s(s.cores, s.quota)).max(0.0)))
        .collect();
    let limits = samples
        .iter()
        .zip(epochs.iter().zip(cpu))
        .filter_map(|(s, (epoch_s, cpu_per_epoch_core_s))| {
            let fitted_epoch_s = model.epoch_s(s.cores, s.quota);
            Some(LimitFit {
                cores: s.cores,
                epoch_s: (*epoch_s)?,
                fitted_epoch_s,
                startup_s: s.lines_s.first().map_or(0.0, |&f| (f - fitted_epoch_s).max(0.0)),
                cpu_per_epoch_core_s,
            })
        })
        .collect();
    let capped = model.costs.max_cores < highest * 0.98;
    Ok(Fit {
        work_per_epoch_core_s: model.costs.work_per_epoch_core_s,
        max_cores: if capped { model.costs.max_cores } else { highest },
        capped,
        work_measured: model.work_measured,
        startup_s: median(&startups).unwrap_or(0.0),
        share_cost: model.costs.share_cost,
        quota_cost: model.costs.quota_cost,
        limits,
    })
}

/// A cost model, measured or fitted: the simulator's own figures (start-up and memory aside).
struct Model {
    costs: Costs,
    work_measured: bool,
}

impl Model {
    fn new(
        work: f64,
        max_cores: f64,
        work_measured: bool,
        share_cost: Vec<(f64, f64)>,
        quota_cost: Vec<(f64, f64)>,
    ) -> Model {
        let costs =
            Costs { work_per_epoch_core_s: work, max_cores, startup_s: 0.0, memory_bytes: 0, share_cost, quota_cost };
        Model { costs, work_measured }
    }

    /// The epoch time it gives under `cores` (a quota, or a share).
    fn epoch_s(&self, cores: f64, quota: bool) -> f64 {
        let used = cores.min(self.costs.max_cores);
        self.costs.work_per_epoch_core_s / (used * self.costs.efficiency(used, quota.then_some(cores)))
    }
}

/// The time between two epoch lines (the median), if there are two.
fn epoch_s(s: &LimitSample) -> Option<f64> {
    let gaps: Vec<f64> = s.lines_s.windows(2).map(|w| w[1] - w[0]).collect();
    median(&gaps).filter(|&t| t > 0.0)
}

/// The model from CPU readings (the module docs): None without a CPU reading of the run alone
/// under the largest limit.
fn measured(samples: &[LimitSample], epochs: &[Option<f64>], cpu: &[Option<f64>], highest: f64) -> Option<Model> {
    let runs: Vec<(&LimitSample, f64, Option<f64>)> =
        samples.iter().zip(epochs.iter().zip(cpu)).filter_map(|(s, (e, c))| Some((s, (*e)?, *c))).collect();
    let alone: Vec<f64> = runs
        .iter()
        .filter(|(s, _, _)| !s.quota && s.cores == highest)
        .filter_map(|&(_, epoch, cpu)| Some(cpu? / epoch))
        .collect();
    let max_cores = mean(&alone)?.min(highest);
    // Per allocation: the mean over its runs of (cores used, CPU per epoch), or of the
    // quota-seconds per epoch.
    let by_allocation = |quota: bool, point: &dyn Fn(f64, f64, Option<f64>) -> Option<(f64, f64)>| {
        let mut cores: Vec<f64> = runs.iter().filter(|r| r.0.quota == quota).map(|r| r.0.cores).collect();
        cores.sort_by(f64::total_cmp);
        cores.dedup();
        let mut points: Vec<(f64, f64)> = cores
            .iter()
            .filter_map(|&c| {
                let at: Vec<(f64, f64)> = runs
                    .iter()
                    .filter(|r| r.0.quota == quota && r.0.cores == c)
                    .filter_map(|r| point(r.0.cores, r.1, r.2))
                    .collect();
                Some((
                    mean(&at.iter().map(|p| p.0).collect::<Vec<_>>())?,
                    mean(&at.iter().map(|p| p.1).collect::<Vec<_>>())?,
                ))
            })
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        points
    };
    let share_cost = by_allocation(false, &|_, epoch, cpu| cpu.map(|c| (c / epoch, c)));
    let quota_cost = by_allocation(true, &|cores, epoch, _| Some((cores, epoch * cores.min(max_cores))));
    let share_samples: Vec<f64> = runs.iter().filter(|r| !r.0.quota).filter_map(|r| r.2).collect();
    Some(Model::new(median(&share_samples)?, max_cores, true, share_cost, quota_cost))
}

/// The model fitted to epoch times (the module docs): one work figure, measured as the median
/// CPU per epoch when there are readings, and the cap that fits the times best.
fn fitted(samples: &[LimitSample], epochs: &[Option<f64>], cpu: &[Option<f64>], limits: &[f64]) -> Model {
    let points: Vec<(f64, f64)> = samples.iter().zip(epochs).filter_map(|(s, e)| Some((s.cores, (*e)?))).collect();
    let (lowest, highest) = (limits[0], limits[limits.len() - 1]);
    let measured_work = median(&cpu.iter().flatten().copied().collect::<Vec<_>>());
    let error = |m: f64| -> (f64, f64) {
        let logs: Vec<f64> = points.iter().map(|&(c, t)| (t * c.min(m)).ln()).collect();
        let ln_w = measured_work.map_or_else(|| logs.iter().sum::<f64>() / logs.len() as f64, f64::ln);
        (logs.iter().map(|l| (l - ln_w).powi(2)).sum(), ln_w.exp())
    };
    // From a quarter of the lowest limit (a job that cannot use even that) to the highest.
    let from = (lowest / 4.0).ln();
    let step = (highest.ln() - from) / GRID as f64;
    let mut best = (f64::INFINITY, 0.0, highest);
    for k in 0..=GRID {
        let m = if k == GRID { highest } else { (from + step * k as f64).exp() };
        let (e, w) = error(m);
        // Ties (a flat stretch of the error) go to the largest cap: no cap is claimed that the
        // measurements do not show.
        if e <= best.0 * (1.0 + 1e-9) + 1e-15 {
            best = (e, w, m);
        }
    }
    let (_, work, max_cores) = best;
    Model::new(work, max_cores, measured_work.is_some(), Vec::new(), Vec::new())
}

/// The mean; None for no values.
fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// CPU time charged per epoch: between the first and the last reading that fall between the
/// first and the last epoch line, over the epochs done meanwhile (interpolated between lines);
/// None without two such readings an epoch or more apart.
fn cpu_per_epoch(s: &LimitSample) -> Option<f64> {
    let (&first, &last) = (s.lines_s.first()?, s.lines_s.last()?);
    let inside: Vec<(f64, f64)> = s.cpu_s.iter().copied().filter(|&(t, _)| first <= t && t <= last).collect();
    let (&(ta, ca), &(tb, cb)) = (inside.first()?, inside.last()?);
    let epochs = epochs_done(&s.lines_s, tb) - epochs_done(&s.lines_s, ta);
    (epochs >= 1.0 && cb > ca).then(|| (cb - ca) / epochs)
}

/// Epochs done at time `t` (between the first and the last line), counting the one in
/// progress by the time it has run.
fn epochs_done(lines_s: &[f64], t: f64) -> f64 {
    let k = lines_s.partition_point(|&l| l <= t);
    match (k.checked_sub(1).map(|i| lines_s[i]), lines_s.get(k)) {
        (Some(before), Some(&after)) => k as f64 + (t - before) / (after - before),
        _ => k as f64,
    }
}

/// The median; None for no values.
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    Some(if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Epoch lines of a job with work `w` and cap `m` under `cores`, after `startup` seconds,
    /// each epoch stretched by the factor `noise(k)`.
    fn run(cores: f64, w: f64, m: f64, startup: f64, epochs: usize, noise: impl Fn(usize) -> f64) -> LimitSample {
        let mut t = startup;
        let lines_s = (0..epochs)
            .map(|k| {
                t += w / cores.min(m) * noise(k);
                t
            })
            .collect();
        LimitSample { cores, quota: false, lines_s, cpu_s: Vec::new() }
    }

    /// `sample` with CPU readings every `every` seconds of a job charged `w` core-seconds per
    /// epoch (each epoch's work spread evenly over it).
    fn with_cpu(mut sample: LimitSample, w: f64, every: f64) -> LimitSample {
        let end = *sample.lines_s.last().unwrap();
        let mut t = every;
        while t <= end {
            sample.cpu_s.push((t, w * epochs_done(&sample.lines_s, t)));
            t += every;
        }
        sample
    }

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance * b.abs()
    }

    #[test]
    fn a_capped_job_gives_back_its_work_cap_and_startup() {
        let samples: Vec<LimitSample> = [2.0, 1.0, 0.5].iter().map(|&c| run(c, 1.2, 1.6, 0.4, 5, |_| 1.0)).collect();
        let f = fit(&samples).expect("fits");
        assert!(close(f.work_per_epoch_core_s, 1.2, 0.001), "{f:?}");
        assert!(close(f.max_cores, 1.6, 0.005), "{f:?}");
        assert!(f.capped);
        assert!(close(f.startup_s, 0.4, 0.01), "{f:?}");
        for l in &f.limits {
            assert!(close(l.fitted_epoch_s, l.epoch_s, 0.005), "{l:?}");
        }
        assert!(!f.work_measured);
    }

    #[test]
    fn measured_cpu_time_is_the_work_even_when_the_epochs_ran_slower() {
        // Something else on the machine stretched every epoch by 20 %: wall time says more
        // work, the CPU charged to the job does not.
        let slowed = |_: usize| 1.2;
        let samples: Vec<LimitSample> =
            [2.0, 1.0, 0.5].iter().map(|&c| with_cpu(run(c, 0.6, 1.0, 0.3, 12, slowed), 0.6, 0.5)).collect();
        let f = fit(&samples).expect("fits");
        assert!(f.work_measured);
        assert!(close(f.work_per_epoch_core_s, 0.6, 0.01), "{f:?}");
        for l in &f.limits {
            assert!(close(l.cpu_per_epoch_core_s.expect("readings"), 0.6, 0.01), "{l:?}");
        }
        // The cap is what the slowed epochs say: 0.6 core-s in 0.72 s.
        assert!(close(f.max_cores, 0.6 / 0.72, 0.01), "{f:?}");
    }

    #[test]
    fn with_cpu_readings_the_cost_is_measured_by_cores_and_under_quotas() {
        // A two-threaded job: charged 1.3 core-s an epoch on half a core, 1.4 on one, 1.5 alone
        // on 1.8 of two cores; under a quota its epochs take longer again.
        let share = |cores: f64, w: f64, m: f64| with_cpu(run(cores, w, m, 0.3, 8, |_| 1.0), w, 0.25);
        let quota = |cores: f64, epoch: f64| {
            let mut s = with_cpu(run(cores, epoch * cores, 64.0, 0.3, 8, |_| 1.0), epoch * cores * 0.97, 0.25);
            s.quota = true;
            s
        };
        let samples =
            [share(2.0, 1.5, 1.8), share(1.0, 1.4, 1.8), share(0.5, 1.3, 1.8), quota(1.0, 1.6), quota(0.5, 3.0)];
        let f = fit(&samples).expect("fits");
        assert!(f.work_measured && f.capped && close(f.max_cores, 1.8, 0.01), "{f:?}");
        let expect_share = [(0.5, 1.3), (1.0, 1.4), (1.8, 1.5)];
        let expect_quota = [(0.5, 1.5), (1.0, 1.6)];
        for (got, want) in [(&f.share_cost, &expect_share[..]), (&f.quota_cost, &expect_quota[..])] {
            assert_eq!(got.len(), want.len(), "{f:?}");
            for (g, w) in got.iter().zip(want) {
                assert!(close(g.0, w.0, 0.02) && close(g.1, w.1, 0.02), "{g:?} against {w:?} in {f:?}");
            }
        }
        // The model gives back every measured epoch time, quotas included.
        for l in &f.limits {
            assert!(close(l.fitted_epoch_s, l.epoch_s, 0.03), "{l:?}");
        }
        assert!(close(f.work_per_epoch_core_s, 1.4, 0.02), "the median share cost: {f:?}");
    }

    #[test]
    fn epochs_done_interpolates_between_lines() {
        let lines = [1.0, 2.0, 4.0];
        assert_eq!(epochs_done(&lines, 1.0), 1.0);
        assert_eq!(epochs_done(&lines, 1.5), 1.5);
        assert_eq!(epochs_done(&lines, 3.0), 2.5);
        assert_eq!(epochs_done(&lines, 4.0), 3.0);
        let short = with_cpu(run(1.0, 1.0, 1.0, 0.0, 2, |_| 1.0), 1.0, 5.0);
        assert_eq!(cpu_per_epoch(&short), None, "no two readings between the lines");
    }

    #[test]
    fn a_job_that_scales_to_the_largest_limit_is_not_capped_below_it() {
        let samples: Vec<LimitSample> = [0.5, 1.0, 2.0].iter().map(|&c| run(c, 0.8, 64.0, 0.2, 4, |_| 1.0)).collect();
        let f = fit(&samples).expect("fits");
        assert!(!f.capped, "{f:?}");
        assert_eq!(f.max_cores, 2.0);
        assert!(close(f.work_per_epoch_core_s, 0.8, 0.001), "{f:?}");
    }

    #[test]
    fn a_single_threaded_job_is_capped_at_one_core() {
        let samples: Vec<LimitSample> = [0.5, 1.0, 2.0].iter().map(|&c| run(c, 0.5, 1.0, 0.3, 4, |_| 1.0)).collect();
        let f = fit(&samples).expect("fits");
        assert!(f.capped && close(f.max_cores, 1.0, 0.01), "{f:?}");
    }

    #[test]
    fn noisy_epochs_and_a_slow_first_one_still_fit_within_a_few_per_cent() {
        // ±4 % per epoch, and a first epoch twice as long (caches, page faults): the median
        // ignores the outlier, and the first line goes to the start-up.
        let wobble = |k: usize| if k == 0 { 2.0 } else { 1.0 + 0.04 * ((k * 7 % 5) as f64 - 2.0) / 2.0 };
        let samples: Vec<LimitSample> = [0.5, 1.0, 2.0].iter().map(|&c| run(c, 1.0, 1.8, 0.5, 8, wobble)).collect();
        let f = fit(&samples).expect("fits");
        assert!(close(f.work_per_epoch_core_s, 1.0, 0.04), "{f:?}");
        assert!(close(f.max_cores, 1.8, 0.06), "{f:?}");
        assert!(f.startup_s > 0.5, "the slow first epoch counts as start-up: {f:?}");
    }

    #[test]
    fn too_few_limits_or_bad_numbers_are_refused() {
        let one = [run(1.0, 1.0, 2.0, 0.1, 4, |_| 1.0)];
        assert_eq!(fit(&one), Err(FitError::TooFewLimits { found: 1 }));
        let single_lines = [run(1.0, 1.0, 2.0, 0.1, 1, |_| 1.0), run(2.0, 1.0, 2.0, 0.1, 1, |_| 1.0)];
        assert_eq!(fit(&single_lines), Err(FitError::TooFewLimits { found: 0 }));
        let negative = [
            LimitSample { cores: -1.0, quota: false, lines_s: vec![1.0, 2.0], cpu_s: Vec::new() },
            run(1.0, 1.0, 2.0, 0.1, 4, |_| 1.0),
        ];
        assert_eq!(fit(&negative), Err(FitError::NotPositive { cores: -1.0 }));
        assert!(FitError::TooFewLimits { found: 1 }.to_string().contains("--limits"));
    }

    #[test]
    fn median_of_even_and_odd_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }
}
