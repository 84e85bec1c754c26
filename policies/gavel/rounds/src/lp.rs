//! Gavel's linear programs over time fractions `x[i][t]` (the share of a round job `i` spends
//! on type `t`): each job at most all of its time (`Σ_t x ≤ 1`), each type at most its GPUs
//! (`Σ_i n_i x ≤ GPUs_t`). [`Lp`] builds them, with a variable only where the job can run;
//! a policy adds its own rows and objective.

use microlp::{ComparisonOp, OptimizationDirection, Variable};

use crate::table::Problem;

/// The allocation LP of a [`Problem`], maximising `Σ objective(i, t) · x[i][t]`.
pub struct Lp {
    /// The LP; add rows to it before [`Lp::solve`].
    pub lp: microlp::Problem,
    /// Per job, per pool, its variable where it can run there.
    pub vars: Vec<Vec<Option<Variable>>>,
}

impl Lp {
    /// The LP of `p` with the constraints every allocation shares.
    pub fn new(p: &Problem, objective: impl Fn(usize, usize) -> f64) -> Lp {
        let mut lp = microlp::Problem::new(OptimizationDirection::Maximize);
        let vars: Vec<Vec<Option<Variable>>> = p
            .jobs
            .iter()
            .enumerate()
            .map(|(i, job)| {
                (0..p.capacity.len())
                    .map(|t| (job.throughput[t] > 0.0).then(|| lp.add_var(objective(i, t), (0.0, 1.0))))
                    .collect()
            })
            .collect();
        for row in &vars {
            let terms: Vec<(Variable, f64)> = row.iter().flatten().map(|&v| (v, 1.0)).collect();
            if terms.len() > 1 {
                lp.add_constraint(terms.as_slice(), ComparisonOp::Le, 1.0);
            }
        }
        for (t, &gpus) in p.capacity.iter().enumerate() {
            let terms: Vec<(Variable, f64)> =
                vars.iter().zip(&p.jobs).filter_map(|(row, job)| row[t].map(|v| (v, f64::from(job.gpus)))).collect();
            if !terms.is_empty() {
                lp.add_constraint(terms.as_slice(), ComparisonOp::Le, f64::from(gpus));
            }
        }
        Lp { lp, vars }
    }

    /// The optimal `x`, or None when the LP has no solution (infeasible, or the solver gave up).
    pub fn solve(&self) -> Option<Vec<Vec<f64>>> {
        let solution = self.lp.solve().ok()?.into_solution().ok()?;
        Some(
            self.vars
                .iter()
                .map(|row| row.iter().map(|v| v.map_or(0.0, |v| solution.var_value(v).clamp(0.0, 1.0))).collect())
                .collect(),
        )
    }
}

/// Each job's equal share of every type: `x[i][t] = (GPUs_t / m) / n_i` over the `m` jobs, the
/// row scaled down to a sum of 1 when it is more; 0 where the job cannot run.
pub fn isolated(p: &Problem) -> Vec<Vec<f64>> {
    let m = p.jobs.len().max(1) as f64;
    p.jobs
        .iter()
        .map(|job| {
            let mut row: Vec<f64> = (0..p.capacity.len())
                .map(|t| {
                    if job.throughput[t] > 0.0 {
                        f64::from(p.capacity[t]) / m / f64::from(job.gpus.max(1))
                    } else {
                        0.0
                    }
                })
                .collect();
            let sum: f64 = row.iter().sum();
            if sum > 1.0 {
                row.iter_mut().for_each(|x| *x /= sum);
            }
            row
        })
        .collect()
}
