//! Step 5 of the round: GPUs taken back for tenants below their entitlement.

use std::collections::BTreeMap;

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
        let victims = self.victims(s);
        if victims.is_empty() {
            return;
        }
        let Plan { ts, queues, placed, free, ledger, .. } = plan;
        let mut room = Room { free, victims: &victims, gone: vec![false; victims.len()], ts };
        let mut budget = self.config.max_preemptions as usize;
        let ts = &*room.ts;
        let mut order: Vec<usize> = (0..ts.names.len()).filter(|&t| !queues[t].is_empty()).collect();
        order.sort_by(|&a, &b| ts.factor[b].total_cmp(&ts.factor[a]).then(ts.names[a].cmp(ts.names[b])));
        for t in order {
            // A tenant below its entitlement whose every job asks for more than it lacks may
            // take its smallest job past the entitlement (else it would never reach it).
            let smallest = queues[t].iter().map(|j| u64::from(j.gpus_asked())).filter(|&a| a > 0).min();
            let ts = &*room.ts;
            let past = smallest.filter(|&a| {
                let h = ts.holds[t] as f64;
                h + EPS < ts.entitled[t] && h + a as f64 > ts.entitled[t] + EPS
            });
            for (i, job) in queues[t].iter().enumerate() {
                let ask = u64::from(job.gpus_asked());
                if budget == 0 {
                    return;
                }
                let ts = &*room.ts;
                let allowed = (ts.holds[t] + ask) as f64 <= ts.entitled[t] + EPS || past == Some(ask);
                if placed[t][i] || ask == 0 || !allowed {
                    continue;
                }
                if room.free.find_job(job).is_some() {
                    continue; // it waits for another reason than GPUs (its limit, or no backfill)
                }
                let Some((p, preempted)) = room.preempt_for(s, job, t, budget, ledger, d) else { continue };
                budget -= preempted;
                let ts = &mut *room.ts;
                room.free.take(&p);
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

    /// The running jobs that may be preempted: those with GPUs, of a tenant the snapshot
    /// lists, whose current run has lasted `min-run-s`.
    fn victims<'s>(&self, s: &Snapshot<'s>) -> Vec<Victim<'s>> {
        s.jobs()
            .filter(|j| !j.gpus().is_empty())
            .filter_map(|job| {
                let run = job.run_time().0;
                let run_s = run - self.state.started.get(&job.id().0).copied().unwrap_or(run);
                let tenant = s.tenant_index(job.tenant())?;
                (run_s >= self.config.min_run_s).then_some(Victim { job, tenant, run_s })
            })
            .collect()
    }
}

/// At most this many nodes are tried one by one for a job's room, those with the most GPUs
/// free or held by victims first.
const NODES_TRIED: usize = 16;

/// The round's plan as preemptions are weighed: the GPUs free, the running jobs that may be
/// preempted, which of them are released (`gone`), and the tenants' holds.
struct Room<'r, 's, 'j> {
    free: &'r mut sched::FreeGpus,
    victims: &'r [Victim<'j>],
    gone: Vec<bool>,
    ts: &'r mut Tenants<'s>,
}

impl Room<'_, '_, '_> {
    /// [`Room::make`] over the whole cluster and on each of the likeliest nodes alone: the
    /// room that preempts the fewest jobs (freed one at a time over the whole cluster, victims
    /// on several nodes may free GPUs no single node gathers for a job of several GPUs).
    /// Leaves the chosen room's victims released, or everything as it was on None.
    fn least(&mut self, s: &Snapshot, job: &Job, t: usize, budget: usize) -> Option<(sched::Placement, Vec<usize>)> {
        let mut tries = vec![None];
        if job.gpus_asked() > 1 {
            let mut held: BTreeMap<NodeId, usize> = BTreeMap::new();
            for v in (0..self.victims.len()).filter(|&v| !self.gone[v] && self.victims[v].tenant != t) {
                for g in self.victims[v].job.gpus() {
                    *held.entry(g.node).or_default() += 1;
                }
            }
            let mut nodes: Vec<(usize, NodeId)> = s
                .nodes()
                .filter(|n| n.gpus().len() >= job.gpus_asked() as usize)
                .map(|n| (self.free.free_on(n.id()).len() + held.get(&n.id()).copied().unwrap_or(0), n.id()))
                .filter(|&(room, _)| room >= job.gpus_asked() as usize)
                .collect();
            nodes.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            tries.extend(nodes.into_iter().take(NODES_TRIED).map(|(_, n)| Some(n)));
        }
        // Each tried and undone; the one that preempts the fewest (the first of equals) made again.
        let mut best: Option<(usize, Option<NodeId>)> = None;
        for on in tries {
            let most = best.map_or(budget, |(n, _)| n.saturating_sub(1));
            if most == 0 {
                break;
            }
            if let Some((_, needed)) = self.make(job, t, budget, on) {
                self.put_back(&needed);
                if needed.len() <= most {
                    best = Some((needed.len(), on));
                }
            }
        }
        self.make(job, t, budget, best?.1)
    }

    /// Preempts the fewest running jobs ([`Room::least`], at most `budget`) that make room
    /// for `job` of tenant `t`, if the ledger then has room for it under the tenant's limit:
    /// where it goes, and how many were preempted. Leaves everything as it was on None.
    fn preempt_for(
        &mut self,
        s: &Snapshot,
        job: &Job,
        t: usize,
        budget: usize,
        ledger: &mut Ledger,
        d: &mut Decision,
    ) -> Option<(sched::Placement, usize)> {
        let victims = self.victims;
        let ask = u64::from(job.gpus_asked());
        let (p, needed) = self.least(s, job, t, budget)?;
        for &v in &needed {
            ledger.release(victims[v].tenant, victims[v].job.gpus().len() as u64);
        }
        if ledger.check(t, ask).is_err() {
            for &v in &needed {
                ledger.hold(victims[v].tenant, victims[v].job.gpus().len() as u64);
            }
            self.put_back(&needed);
            return None;
        }
        let ts = &*self.ts;
        for &v in &needed {
            let vt = victims[v].tenant;
            let why = format!(
                "fair-share-decay: tenant {} holds {} GPUs against its entitlement of {:.1}; {} of tenant {} \
                 (entitled to {:.1}, holds {}) takes its GPUs",
                ts.names[vt],
                ts.holds[vt] + victims[v].job.gpus().len() as u64,
                ts.entitled[vt],
                job.name(),
                ts.names[t],
                ts.entitled[t],
                ts.holds[t]
            );
            d.push(Action::preempt(victims[v].job.id()).because(why));
        }
        Some((p, needed.len()))
    }

    /// Undo the release of `vs`: their GPUs held again, their tenants' holds raised.
    fn put_back(&mut self, vs: &[usize]) {
        for &v in vs {
            self.gone[v] = false;
            self.ts.holds[self.victims[v].tenant] += self.victims[v].job.gpus().len() as u64;
            self.free.hold(&self.victims[v].job);
        }
    }

    /// Where `job` of tenant `t` fits once running jobs of other tenants are released, at
    /// most `budget` of them, and which of them it needs; with `on`, only jobs on that node
    /// are released. Released one at a time: of the tenant most above its entitlement, the
    /// shortest current run first, then the highest handle, never leaving a tenant below the
    /// floor (module docs, step 5); then only those whose GPUs the placement takes are kept
    /// released (`gone`, their tenants' holds lowered). Leaves everything as it was on None.
    fn make(
        &mut self,
        job: &Job,
        t: usize,
        budget: usize,
        on: Option<NodeId>,
    ) -> Option<(sched::Placement, Vec<usize>)> {
        let (victims, ts) = (self.victims, &*self.ts);
        // A victim's tenant is never left below where tenant `t` stands now, against their
        // entitlements: each preemption narrows the gap between the two and never reverses
        // it, so the lowest standing only rises and nothing moves back the next round.
        let floor = ts.holds[t] as f64 - ts.entitled[t] + 2.0 * EPS;
        let mut released = Vec::new();
        let mut found = None;
        while released.len() < budget {
            let ts = &*self.ts;
            let excess = |v: usize| ts.holds[victims[v].tenant] as f64 - ts.entitled[victims[v].tenant];
            let next = (0..victims.len())
                .filter(|&v| !self.gone[v] && victims[v].tenant != t)
                .filter(|&v| on.is_none_or(|node| victims[v].job.gpus().iter().any(|g| g.node == node)))
                .filter(|&v| excess(v) - victims[v].job.gpus().len() as f64 >= floor - EPS)
                .max_by(|&a, &b| {
                    let newer = victims[b].run_s.total_cmp(&victims[a].run_s);
                    excess(a).total_cmp(&excess(b)).then(newer).then(victims[a].job.id().cmp(&victims[b].job.id()))
                });
            let Some(v) = next else { break };
            self.gone[v] = true;
            self.ts.holds[victims[v].tenant] -= victims[v].job.gpus().len() as u64;
            self.free.release(&victims[v].job);
            released.push(v);
            found = self.free.find_job(job);
            if found.is_some() {
                break;
            }
        }
        let taken: Vec<GpuSlot> = found.iter().flat_map(|p| p.gpus()).collect();
        let (needed, spare): (Vec<usize>, Vec<usize>) =
            released.into_iter().partition(|&v| victims[v].job.gpus().iter().any(|g| taken.contains(g)));
        self.put_back(&spare);
        Some((found?, needed))
    }
}
