//! Themis as Sia's artifact runs it: Gavel's finish-time-fairness policy inside Gavel's
//! round-based mechanism, every round minimising the largest finish-time ratio ρ among the
//! jobs (Mahajan et al., "Themis: Fair and efficient GPU cluster scheduling", NSDI 2020;
//! Gavel's `FinishTimeFairnessPolicyWithPerf`; Sia's Table 4, "Themis+TJ").
//!
//! A job's ρ under time fractions `x` is its finish time here over its finish time alone on an
//! equal share of the cluster:
//! `ρ_i(x) = (age_i + remaining_i / Σ_t thr[i][t] x[i][t]) / (prestart_i + total_i / thr_iso_i)`,
//! where `thr_iso_i = Σ_t thr[i][t] x_iso[i][t]` on the isolated share
//! ([`gavel_rounds::lp::isolated`]: `(GPUs_t / m) / n_i`, the row scaled to at most 1),
//! `prestart_i` the wait to its first round boundary plus its restore delay, `total_i` and
//! `remaining_i` (at least 1) optimiser steps at its batch size, by its completed epochs.
//!
//! **Solving it.** ρ is not linear in `x`, but `ρ_i(x) ≤ ρ` is: it holds exactly when
//! `Σ_t thr[i][t] x[i][t] ≥ remaining_i / (ρ · D_i − age_i)` (with `ρ · D_i > age_i`), `D_i`
//! the denominator. So we **bisect on ρ with feasibility LPs** ([`finish_time_fair`]): from a
//! bound no allocation beats (each job alone on its best type) to one the isolated share
//! reaches, until the bracket is within 0.1 % (at most 40 LPs, no clock involved: the result
//! is reproducible). The bisection's LPs ask only whether a ρ is feasible; one more LP at the
//! feasible end takes, of its allocations, the one of most normalised throughput
//! `Σ thr / thr_iso · x` (our reading: the artifact's ECOS minimises ρ alone and returns an
//! interior point), so GPUs the fairness bound does not need still work.
//! Then Gavel's mechanism runs it (priorities, greedy pass, placement: the crate
//! `gavel_rounds`, shared with `policy-gavel`).
//!
//! Reads what Gavel reads; the epoch of each job besides. Config (kebab-case keys, all
//! optional): `interval-s` (360).
//!
//! Where we differ from the artifact: what Gavel's differences say (a batch size guessed before
//! a job runs when it declares none, microlp for ECOS), and the remaining steps come from
//! completed epochs, where the artifact interpolates within the epoch. The original Themis's leases and partial-allocation
//! auction are not in the artifact and not here. When an LP fails the bracket's feasible end
//! stands; when the first one fails, the isolated share.

use gavel_rounds::lp::{Lp, isolated};
use gavel_rounds::{Allocation, Problem, RoundBased};
use microlp::ComparisonOp;
use wasmsched_sdk::export_policy;

/// The relative width of ρ's bracket at which bisection stops.
const RHO_TOLERANCE: f64 = 1e-3;
/// The most feasibility LPs one round solves.
const MAX_LPS: u32 = 40;

/// One job's terms of ρ.
#[derive(Clone, Copy, Debug)]
struct Terms {
    age_s: f64,
    remaining: f64,
    /// ρ's denominator: its isolated finish time.
    isolated_s: f64,
    /// Its throughput on its isolated share.
    thr_iso: f64,
}

impl Terms {
    /// Its ρ at throughput `thr` (infinite at none).
    fn rho(&self, thr: f64) -> f64 {
        if thr <= 0.0 { f64::INFINITY } else { (self.age_s + self.remaining / thr) / self.isolated_s }
    }
}

/// The largest ρ of allocation `x` among the jobs with terms.
fn max_rho(p: &Problem, terms: &[Option<Terms>], x: &[Vec<f64>]) -> f64 {
    terms
        .iter()
        .enumerate()
        .filter_map(|(i, t)| t.map(|t| t.rho(p.jobs[i].throughput.iter().zip(&x[i]).map(|(a, b)| a * b).sum())))
        .fold(0.0, f64::max)
}

/// Each job's terms of ρ, given the isolated share `iso`; None for a job that runs nowhere.
fn terms(p: &Problem, iso: &[Vec<f64>]) -> Vec<Option<Terms>> {
    p.jobs
        .iter()
        .zip(iso)
        .map(|(job, share)| {
            let thr_iso: f64 = job.throughput.iter().zip(share).map(|(a, b)| a * b).sum();
            (thr_iso > 0.0).then(|| Terms {
                age_s: job.age_s,
                remaining: (job.steps_total - job.steps_done).max(1.0),
                isolated_s: job.prestart_s + job.steps_total / thr_iso,
                thr_iso,
            })
        })
        .collect()
}

/// The time fractions that minimise the largest ρ (within 0.1 %), by bisection on ρ
/// over feasibility LPs (see the module docs).
pub fn finish_time_fair(p: &Problem) -> Vec<Vec<f64>> {
    let iso = isolated(p);
    let terms = terms(p, &iso);
    // Each job alone on its best type: no allocation gives it a smaller ρ.
    let mut lo = terms
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let job = &p.jobs[i];
            let best = (0..p.capacity.len())
                .map(|k| job.throughput[k] * (f64::from(p.capacity[k]) / f64::from(job.gpus.max(1))).min(1.0))
                .fold(0.0, f64::max);
            t.map(|t| t.rho(best))
        })
        .fold(0.0, f64::max);
    let mut hi = max_rho(p, &terms, &iso);
    let Some(first) = feasible(p, &terms, hi * (1.0 + 1e-9), Objective::Throughput) else { return iso };
    // The bisection asks only whether a ρ is feasible (no objective: the simplex stops at the
    // first feasible point); the allocation is the one LP with the objective at the end.
    let mut moved = false;
    for _ in 2..MAX_LPS {
        if hi - lo <= RHO_TOLERANCE * hi {
            break;
        }
        let mid = (lo + hi) / 2.0;
        match feasible(p, &terms, mid, Objective::None) {
            Some(_) => (hi, moved) = (mid, true),
            None => lo = mid,
        }
    }
    if moved { feasible(p, &terms, hi, Objective::Throughput).unwrap_or(first) } else { first }
}

/// What a feasibility LP maximises.
#[derive(Clone, Copy, PartialEq)]
enum Objective {
    /// Nothing: any feasible point answers.
    None,
    /// The normalised throughput `Σ thr / thr_iso · x`.
    Throughput,
}

/// An allocation in which every job's ρ is at most `rho`, the one of most normalised
/// throughput where `objective` asks for it; None when there is none.
fn feasible(p: &Problem, terms: &[Option<Terms>], rho: f64, objective: Objective) -> Option<Vec<Vec<f64>>> {
    let normalised = |i: usize, t: usize| terms[i].map_or(0.0, |k| p.jobs[i].throughput[t] / k.thr_iso);
    let mut lp = match objective {
        Objective::Throughput => Lp::new(p, normalised),
        Objective::None => Lp::new(p, |_, _| 0.0),
    };
    for (i, t) in terms.iter().enumerate() {
        let Some(t) = t else { continue };
        let slack = rho * t.isolated_s - t.age_s;
        if slack <= 0.0 {
            return None;
        }
        // Σ_t thr x ≥ remaining / slack, divided through by thr_iso.
        let need = t.remaining / slack / t.thr_iso;
        let row: Vec<_> = lp.vars[i].iter().enumerate().filter_map(|(k, v)| v.map(|v| (v, normalised(i, k)))).collect();
        let most: f64 = row.iter().map(|&(_, c)| c).fold(0.0, f64::max);
        if need > most {
            return None;
        }
        lp.lp.add_constraint(row.as_slice(), ComparisonOp::Ge, need);
    }
    lp.solve()
}

/// Gavel's finish-time-fairness allocation.
pub struct FinishTimeFairness;

impl Allocation for FinishTimeFairness {
    const NAME: &'static str = "themis";

    fn allocate(p: &Problem) -> Vec<Vec<f64>> {
        finish_time_fair(p)
    }
}

/// The Themis policy: finish-time fairness in Gavel's rounds.
pub type Themis = RoundBased<FinishTimeFairness>;

export_policy!(Themis);

#[cfg(test)]
mod tests;
