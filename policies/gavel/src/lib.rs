//! Gavel: every round, the time fractions that maximise the cluster's summed throughput over
//! heterogeneous GPU types, turned into the jobs that run by how far each is behind its share
//! (Narayanan et al., "Heterogeneity-aware cluster scheduling policies for deep learning
//! workloads", OSDI 2020), as Sia's artifact runs it with TunedJobs (Table 3 and 4, "Gavel+TJ").
//!
//! Each round (`interval-s`, 360 s):
//! 1. **Throughput** (`gavel_rounds::table`). Jobs are rigid: their own GPU count `n_i` and
//!    batch size. On each GPU type among the nodes that take work, `thr[i][t]` is steps per
//!    second from the measured step times: the batch split over `n_i` GPUs of the type packed
//!    onto its nodes, with accumulation where a GPU cannot hold its share, times the model's
//!    calibration; 0 where the type has fewer than `n_i` GPUs.
//! 2. **Allocation** ([`max_sum_throughput`]): time fractions `x[i][t] ≥ 0` with
//!    `Σ_t x ≤ 1` and `Σ_i n_i x ≤ GPUs_t` that maximise `Σ thr · x` (raw steps per second, as
//!    the artifact's), solved exactly with microlp.
//! 3. **Mechanism** (`gavel_rounds::round`): priority
//!    `x[i][t] / (job_time[i][t] / cluster_time[t])`, where a job's time on a type starts at
//!    half a round and grows by a round each round it runs there, and the type's grows by half
//!    a round for each new job and a round for each job it runs. All (job, type) pairs by
//!    priority, then `x`, descending; each job scheduled once, where its GPUs fit in what the
//!    type has left (zero-priority pairs fill what is left).
//! 4. **Placement.** A job that stays on its type keeps its GPUs; the others take GPUs of the
//!    type by first fit over its nodes, the most GPUs first (queued ones are placed, running ones
//!    moved); a running job not scheduled is preempted, unless the plan leaves all its GPUs
//!    idle (see below). Each waiting job is told why.
//!
//! Reads: each node's GPU type and GPUs and whether it takes work; each job's model, GPUs,
//! replicas, arrival, batch size while it runs, and epoch (Themis). The bookkeeping and the
//! batch sizes seen live in the state, which survives a hot swap. The mechanism is the crate
//! `gavel-rounds` (`policies/gavel/rounds`), shared with Themis (`policy-themis`), which runs
//! it with another [`Allocation`].
//!
//! Where we differ from the artifact (siasosp23/artifacts, `gavel.py`): a job's batch size is
//! the one it runs at, else the one it declares (a rigid job's `scaling`), else the batch that
//! fills its GPUs in one pass, within its model's measured range
//! (`gavel_rounds::table::guessed_batch`). Its LP is solved by ECOS, an interior-point method,
//! which splits the time of jobs alike (same model, GPUs and batch) evenly among them;
//! microlp's simplex ends at a vertex, which would give one of them all and the others
//! nothing, so we solve for one share per class of jobs alike, the same for each member. It
//! sets the throughput of a job larger than a type to 0.1; we leave that type out for it (0.1
//! gives the same figures on Sia's tables, and 0 lets a job too large everywhere be told so). Its
//! workers are reassigned by server order; ours by first fit, which also keeps a job that must
//! stay on one node whole. A job whose model has no measurements runs at 1 step/s everywhere.
//! The artifact preempts every job not scheduled; the host starts a queued job that fits
//! (across GPU types, say) after a minute, so a job the plan cannot schedule on one type but
//! that fits over several would restart every round. We leave a running job that is not
//! scheduled where the plan leaves all its GPUs idle (its rounds there are not counted).
//!
//! Config (kebab-case keys, all optional): `interval-s` (360).

pub use gavel_rounds::{Allocation, Config, Problem, RoundBased};

use gavel_rounds::lp::{Lp, isolated};
use wasmsched_sdk::export_policy;

/// Gavel's max-sum-throughput: maximise `Σ thr[i][t] · x[i][t]` in raw steps per second (as
/// the artifact does: it favours jobs of many steps per second). Jobs alike (the same GPUs and
/// throughputs) share one variable, their common share, so that they split their time evenly
/// (see the module docs); the isolated allocation when the solver fails.
pub fn max_sum_throughput(p: &Problem) -> Vec<Vec<f64>> {
    let mut classes: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, job) in p.jobs.iter().enumerate() {
        let alike = |k: usize| p.jobs[k].gpus == job.gpus && p.jobs[k].throughput == job.throughput;
        match classes.iter_mut().find(|(first, _)| alike(*first)) {
            Some((_, members)) => members.push(i),
            None => classes.push((i, vec![i])),
        }
    }
    // A class of k jobs is one job of k times the GPUs and throughput, at each member's share.
    let reduced = Problem {
        capacity: p.capacity.clone(),
        jobs: classes
            .iter()
            .map(|(first, members)| {
                let (job, k) = (&p.jobs[*first], members.len() as u32);
                let mut row = job.clone();
                row.gpus = job.gpus * k;
                row.throughput.iter_mut().for_each(|thr| *thr *= f64::from(k));
                row
            })
            .collect(),
    };
    let Some(shares) = Lp::new(&reduced, |c, t| reduced.jobs[c].throughput[t]).solve() else { return isolated(p) };
    let mut x = vec![Vec::new(); p.jobs.len()];
    for ((_, members), share) in classes.iter().zip(shares) {
        for &i in members {
            x[i] = share.clone();
        }
    }
    x
}

/// Gavel's max-sum-throughput allocation.
pub struct MaxSumThroughput;

impl Allocation for MaxSumThroughput {
    const NAME: &'static str = "gavel";

    fn allocate(p: &Problem) -> Vec<Vec<f64>> {
        max_sum_throughput(p)
    }
}

/// The Gavel policy.
pub type Gavel = RoundBased<MaxSumThroughput>;

export_policy!(Gavel);

#[cfg(test)]
mod tests;
