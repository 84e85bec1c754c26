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
//! **Start-up**: from the container's creation to its first epoch line, less one epoch at
//! that limit; the median over the limits.

/// What one run under one CPU limit showed.
#[derive(Clone, Debug, PartialEq)]
pub struct LimitSample {
    /// The CPU limit, in cores.
    pub cores: f64,
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
    let epoch_s = |s: &LimitSample| {
        let gaps: Vec<f64> = s.lines_s.windows(2).map(|w| w[1] - w[0]).collect();
        median(&gaps).filter(|&t| t > 0.0)
    };
    let points: Vec<(f64, f64)> = samples.iter().filter_map(|s| epoch_s(s).map(|t| (s.cores, t))).collect();
    let mut limits: Vec<f64> = points.iter().map(|p| p.0).collect();
    limits.sort_by(f64::total_cmp);
    limits.dedup();
    if limits.len() < 2 {
        return Err(FitError::TooFewLimits { found: limits.len() });
    }
    let (lowest, highest) = (limits[0], limits[limits.len() - 1]);
    let cpu: Vec<Option<f64>> = samples.iter().map(cpu_per_epoch).collect();
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
    let capped = max_cores < highest * 0.98;
    let epoch_at = |c: f64| work / c.min(max_cores);
    let startups: Vec<f64> =
        samples.iter().filter_map(|s| s.lines_s.first().map(|&first| (first - epoch_at(s.cores)).max(0.0))).collect();
    let limits = samples
        .iter()
        .zip(cpu)
        .filter_map(|(s, cpu_per_epoch_core_s)| {
            let epoch_s = epoch_s(s)?;
            Some(LimitFit {
                cores: s.cores,
                epoch_s,
                fitted_epoch_s: epoch_at(s.cores),
                startup_s: s.lines_s.first().map_or(0.0, |&f| (f - epoch_at(s.cores)).max(0.0)),
                cpu_per_epoch_core_s,
            })
        })
        .collect();
    Ok(Fit {
        work_per_epoch_core_s: work,
        max_cores: if capped { max_cores } else { highest },
        capped,
        work_measured: measured_work.is_some(),
        startup_s: median(&startups).unwrap_or(0.0),
        limits,
    })
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
        LimitSample { cores, lines_s, cpu_s: Vec::new() }
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
            LimitSample { cores: -1.0, lines_s: vec![1.0, 2.0], cpu_s: Vec::new() },
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
