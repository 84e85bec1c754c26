//! Step 5 of the round: GPUs taken back for tenants below their entitlement.

use wasmsched_sdk::prelude::*;

use super::{EPS, FairShareDecay, Plan, Tenants};

/// A running job that might be preempted.
struct Victim<'s> {
    job: Job<'s>,
    tenant: usize,
    /// Its current run so far.
    run_s: f64,
}

impl FairShareDecay {
    /// Step 5: preempt for tenants below their entitlement, highest factor first, and place
    /// each job right after the preemptions that make its room.
    pub(crate) fn take_back(&mut self, s: &Snapshot, plan: &mut Plan, d: &mut Decision) {
        let victims: Vec<Victim> = s
            .jobs()
            .filter(|j| !j.gpus().is_empty())
            .filter_map(|job| {
                let run = job.run_time().0;
                let run_s = run - self.state.started.get(&job.id().0).copied().unwrap_or(run);
                let tenant = s.tenant_index(job.tenant())?;
                (run_s >= self.config.min_run_s).then_some(Victim { job, tenant, run_s })
            })
            .collect();
        if victims.is_empty() {
            return;
        }
        let Plan { ts, queues, placed, free, ledger, .. } = plan;
        let mut gone = vec![false; victims.len()];
        let mut budget = self.config.max_preemptions as usize;
        let mut order: Vec<usize> = (0..ts.names.len()).filter(|&t| !queues[t].is_empty()).collect();
        order.sort_by(|&a, &b| ts.factor[b].total_cmp(&ts.factor[a]).then(ts.names[a].cmp(ts.names[b])));
        for t in order {
            for (i, job) in queues[t].iter().enumerate() {
                let ask = u64::from(job.gpus_asked());
                if budget == 0 {
                    return;
                }
                if placed[t][i] || ask == 0 || (ts.holds[t] + ask) as f64 > ts.entitled[t] + EPS {
                    continue;
                }
                if free.find_job(job).is_some() {
                    continue; // it waits for another reason than GPUs (its limit, or no backfill)
                }
                let Some((p, needed)) = make_room(free, &victims, &mut gone, ts, job, t, budget) else { continue };
                for &v in &needed {
                    ledger.release(victims[v].tenant, victims[v].job.gpus().len() as u64);
                }
                if ledger.check(t, ask).is_err() {
                    for &v in &needed {
                        let (vt, g) = (victims[v].tenant, victims[v].job.gpus().len() as u64);
                        (gone[v], ts.holds[vt]) = (false, ts.holds[vt] + g);
                        ledger.hold(vt, g);
                        free.hold(&victims[v].job);
                    }
                    continue;
                }
                budget -= needed.len();
                for &v in &needed {
                    let vt = victims[v].tenant;
                    let why = format!(
                        "fair-share-decay: tenant {} is above its entitlement of {:.1} GPUs; {} of tenant {} (entitled \
                         to {:.1}, holds {}) takes its GPUs",
                        ts.names[vt],
                        ts.entitled[vt],
                        job.name(),
                        ts.names[t],
                        ts.entitled[t],
                        ts.holds[t]
                    );
                    d.push(Action::preempt(victims[v].job.id()).because(why));
                }
                free.take(&p);
                ledger.hold(t, ask);
                ts.holds[t] += ask;
                placed[t][i] = true;
                self.state.started.insert(job.id().0, job.run_time().0);
                let why = format!(
                    "fair-share-decay: tenant {} below its entitlement of {:.1} GPUs, on GPUs taken back",
                    ts.names[t], ts.entitled[t]
                );
                d.push(p.action(job.id()).because(why));
            }
        }
    }
}

/// Where `job` of tenant `t` fits once running jobs of other tenants are released from `free`,
/// at most `budget` of them, and which of them it needs. Released one at a time: of the tenant
/// most above its entitlement, the shortest current run first, then the highest handle, never
/// taking a tenant below its entitlement; then only those whose GPUs the placement takes are
/// kept released (`gone`, their tenants' holds lowered). Leaves everything as it was on None.
fn make_room(
    free: &mut sched::FreeGpus,
    victims: &[Victim],
    gone: &mut [bool],
    ts: &mut Tenants,
    job: &Job,
    t: usize,
    budget: usize,
) -> Option<(sched::Placement, Vec<usize>)> {
    let mut released = Vec::new();
    let mut found = None;
    while released.len() < budget {
        let excess = |v: usize| ts.holds[victims[v].tenant] as f64 - ts.entitled[victims[v].tenant];
        let next = (0..victims.len())
            .filter(|&v| !gone[v] && victims[v].tenant != t)
            .filter(|&v| excess(v) - victims[v].job.gpus().len() as f64 >= -EPS)
            .max_by(|&a, &b| {
                let newer = victims[b].run_s.total_cmp(&victims[a].run_s);
                excess(a).total_cmp(&excess(b)).then(newer).then(victims[a].job.id().cmp(&victims[b].job.id()))
            });
        let Some(v) = next else { break };
        gone[v] = true;
        ts.holds[victims[v].tenant] -= victims[v].job.gpus().len() as u64;
        free.release(&victims[v].job);
        released.push(v);
        found = free.find_job(job);
        if found.is_some() {
            break;
        }
    }
    let taken: Vec<GpuSlot> = found.iter().flat_map(|p| p.gpus()).collect();
    let (needed, spare): (Vec<usize>, Vec<usize>) =
        released.into_iter().partition(|&v| victims[v].job.gpus().iter().any(|g| taken.contains(g)));
    for v in spare {
        gone[v] = false;
        ts.holds[victims[v].tenant] += victims[v].job.gpus().len() as u64;
        free.hold(&victims[v].job);
    }
    Some((found?, needed))
}
