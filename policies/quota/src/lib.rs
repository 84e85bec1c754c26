//! Quota: each tenant's guaranteed GPUs first, idle quota lent within a cohort, and lent GPUs
//! taken back by preemption when their owner's jobs wait.
//!
//! Each round the queue is walked twice in order of arrival, by first fit
//! ([`sched::FreeGpus`]):
//!
//! 1. **Within quota.** A job whose tenant stays within its quota once it starts. When it does
//!    not fit now and `reclaim` is on, GPUs are taken back: running jobs that hold GPUs beyond
//!    their tenant's quota are preempted (first those of tenants without a quota, then those
//!    of borrowing tenants of the job's cohort, the most recently started first) until the
//!    job fits, and it is placed in the same decision. A job is preempted only after
//!    `min-run-s` of running, at most `max-preemptions` a round.
//! 2. **Borrowing.** Every job left whose tenant has room under its limit (quota plus what its
//!    cohort lends, [`Snapshot::ledger`]), or has no quota at all, starts where it fits now;
//!    nothing is preempted for it.
//!
//! Within a tenant, `queueing = "best-effort-fifo"` (the default) lets a later job that fits
//! start while an earlier one waits; `"strict-fifo"` holds the tenant's later jobs behind its
//! first waiting one. A tenant without a quota runs on what is idle and is the first to give
//! it back. The host enforces the same limits on every placement (`crate`-independent rules in
//! `wasmsched-rules`), and the disruption budget on every preemption: a refused preemption is
//! tried again on a later round.
//!
//! Reads: the tenants (weights unused; quotas, borrowing limits, cohorts), each queued job's
//! tenant, GPUs asked and arrival, and the running jobs' tenants and GPUs.
//!
//! Says why the first [`REASONS`] jobs it leaves in the queue wait: at the tenant's limit,
//! GPUs being taken back, or no room now.
//!
//! Config (kebab-case keys, all optional):
//! - `reclaim` (true): take back lent GPUs for jobs within their tenant's quota;
//! - `min-run-s` (0): a job runs at least this long before it is preempted;
//! - `max-preemptions` (8): preemptions a round at most;
//! - `queueing` ("best-effort-fifo"): or "strict-fifo".
//!
//! Source: the quota model of Kubernetes Kueue (ClusterQueues with nominal quotas, cohorts,
//! borrowing limits, reclaim within the cohort), <https://kueue.sigs.k8s.io/docs/concepts/>.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use wasmsched_sdk::prelude::*;

/// How a tenant's own jobs queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Queueing {
    /// A later job that fits starts while an earlier one waits.
    #[default]
    BestEffortFifo,
    /// The tenant's later jobs wait behind its first waiting one.
    StrictFifo,
}

/// Quota's knobs.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Take lent GPUs back for jobs within their tenant's quota.
    pub reclaim: bool,
    /// Seconds a job runs at least before it is preempted.
    pub min_run_s: f64,
    /// Preemptions a round at most.
    pub max_preemptions: u32,
    /// How a tenant's own jobs queue.
    pub queueing: Queueing,
}

impl Default for Config {
    fn default() -> Self {
        Config { reclaim: true, min_run_s: 0.0, max_preemptions: 8, queueing: Queueing::BestEffortFifo }
    }
}

/// How many waiting jobs Quota gives a reason for, in queue order.
pub const REASONS: usize = 64;

/// What Quota remembers: when each running job last started, on the snapshot's clock (a job
/// preempted and placed again starts anew).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct State {
    started: BTreeMap<u32, f64>,
}

/// The Quota policy.
pub struct Quota {
    config: Config,
    state: State,
}

/// A running job that may be preempted for a job within its tenant's quota.
#[derive(Clone, Copy)]
struct Victim<'a> {
    job: Job<'a>,
    tenant: usize,
    /// 0: its tenant has no quota; 1: its tenant has one, and may be borrowing.
    class: u8,
    /// Its tenant's quota.
    quota: Option<u32>,
    started_s: f64,
}

impl Quota {
    /// Remember when each running job started; forget the others.
    fn track_starts(&mut self, s: &Snapshot) {
        let running: BTreeMap<u32, f64> =
            s.jobs().map(|j| (j.id().0, self.state.started.get(&j.id().0).copied().unwrap_or(s.time().0))).collect();
        self.state.started = running;
    }

    /// The running jobs that may ever be taken back this round (they have run `min-run-s`): those
    /// of tenants without a quota first, then those of tenants with one (taken only for a job of
    /// their cohort, and only while their tenant holds more than its quota); the most recently
    /// started first within each (then the latest to arrive).
    fn victims<'a>(&self, s: &Snapshot<'a>, tenants: &[Tenant<'a>]) -> Vec<Victim<'a>> {
        let now = s.time().0;
        let mut victims: Vec<Victim> = s
            .jobs()
            .filter(|j| !j.gpus().is_empty())
            .filter_map(|j| {
                let started_s = self.state.started.get(&j.id().0).copied()?;
                if now - started_s < self.config.min_run_s {
                    return None;
                }
                let tenant = s.tenant_index(j.tenant())?;
                let quota = tenants[tenant].quota();
                Some(Victim { job: j, tenant, class: u8::from(quota.is_some()), quota, started_s })
            })
            .collect();
        victims.sort_by(|a, b| {
            let newest = b.started_s.total_cmp(&a.started_s).then(b.job.arrival().0.total_cmp(&a.job.arrival().0));
            a.class.cmp(&b.class).then(newest).then(b.job.id().cmp(&a.job.id()))
        });
        victims
    }
}

/// One round's walks of the queue: what is free, what each tenant holds, what is decided.
struct Round<'r, 's> {
    config: &'r Config,
    s: &'r Snapshot<'s>,
    tenants: Vec<Tenant<'s>>,
    ledger: Ledger,
    free: sched::FreeGpus,
    /// The running jobs that may be taken back, in the order they are ([`Quota::victims`]).
    victims: Vec<Victim<'s>>,
    /// Per queued job, whether it is placed.
    placed: Vec<bool>,
    /// Why a job within its tenant's quota waits, from the first pass.
    waiting: Vec<Option<String>>,
    /// Per tenant: its first job that waits (strict FIFO holds the rest behind it).
    held_back: Vec<Option<JobId>>,
    /// The jobs preempted this round.
    preempted: Vec<JobId>,
    /// The placements, pushed after the preemptions.
    placements: Vec<Action>,
    /// Whether a tenant's jobs queue in strict FIFO.
    strict: bool,
}

impl<'s> Round<'_, 's> {
    /// The index of `j`'s tenant (`usize::MAX` for none).
    fn tenant_of(&self, j: &Job) -> usize {
        self.s.tenant_index(j.tenant()).unwrap_or(usize::MAX)
    }

    /// Pass 1 for queued job `i`: place it within its tenant's quota, taking lent GPUs back if need be.
    fn within_quota(&mut self, i: usize, job: &Job<'s>, d: &mut Decision) {
        let t = self.tenant_of(job);
        let Some(quota) = self.tenants.get(t).and_then(|x| x.quota()) else { return };
        let ask = u64::from(job.gpus_asked());
        if self.ledger.held(t) + ask > u64::from(quota) || (self.strict && self.held_back[t].is_some()) {
            return;
        }
        let placement = match self.free.find_job(job) {
            Some(p) => Some(p),
            None if self.config.reclaim => self.reclaim(job, t, quota, d),
            None => None,
        };
        match placement {
            Some(p) if self.ledger.check(t, ask).is_ok() => {
                self.free.take(&p);
                self.ledger.hold(t, ask);
                self.placed[i] = true;
                let why = format!(
                    "quota: tenant {} within its quota ({} of {quota})",
                    self.tenants[t].name(),
                    self.ledger.held(t)
                );
                self.placements.push(p.action(job.id()).because(why));
            }
            _ => {
                self.held_back[t] = self.held_back[t].or(Some(job.id()));
                let name = self.tenants[t].name();
                self.waiting[i] = Some(if !self.config.reclaim {
                    format!(
                        "within tenant {name}'s quota; {} GPUs asked, {} free",
                        job.gpus_asked(),
                        self.free.free_count()
                    )
                } else {
                    format!(
                        "within tenant {name}'s quota; waiting for lent GPUs to come back (a job runs {:.0} s at \
                         least, {} preemptions a round)",
                        self.config.min_run_s, self.config.max_preemptions
                    )
                });
            }
        }
    }

    /// Preempt the borrowers `job` of tenant `t` needs gone to fit: where it fits then, or None.
    fn reclaim(&mut self, job: &Job<'s>, t: usize, quota: u32, d: &mut Decision) -> Option<sched::Placement> {
        let tenants = &self.tenants;
        let victims = &self.victims;
        let most = (self.config.max_preemptions as usize).saturating_sub(self.preempted.len());
        let cohort = tenants[t].cohort();
        let mine = |v: &&Victim| {
            v.tenant != t && (v.quota.is_none() || cohort.is_some() && tenants[v.tenant].cohort() == cohort)
        };
        let candidates = victims.iter().enumerate().filter(|(_, v)| mine(v));
        let candidates = candidates.filter(|(_, v)| !self.preempted.contains(&v.job.id()));
        // A borrower gives back only while it holds more than its quota.
        let mut holds = self.ledger.clone();
        let borrowing = |k: usize| {
            let v = &victims[k];
            let beyond = v.quota.is_none_or(|q| holds.held(v.tenant) > u64::from(q));
            if beyond {
                holds.release(v.tenant, v.job.gpus().len() as u64);
            }
            beyond
        };
        match self.free.make_room(job, candidates.map(|(k, v)| (k, v.job)), borrowing, most) {
            Some((p, needed)) => {
                for v in needed.into_iter().map(|k| &self.victims[k]) {
                    self.free.release(&v.job);
                    self.ledger.release(v.tenant, v.job.gpus().len() as u64);
                    self.preempted.push(v.job.id());
                    let why = format!(
                        "quota: {} of tenant {} is within its quota of {quota}; {} runs beyond its tenant's",
                        job.id(),
                        self.tenants[t].name(),
                        v.job.id()
                    );
                    d.push(Action::preempt(v.job.id()).because(why));
                }
                Some(p)
            }
            None => None,
        }
    }

    /// Pass 2 for queued job `i`: place it on what is free if its tenant has room, or say why it waits.
    fn borrow(&mut self, i: usize, job: &Job<'s>, reasons: &mut usize, d: &mut Decision) {
        if self.placed[i] {
            return;
        }
        if let Some(why) = self.waiting[i].take() {
            if *reasons < REASONS {
                d.pending(job.id(), why);
                *reasons += 1;
            }
            return;
        }
        let t = self.tenant_of(job);
        let ask = u64::from(job.gpus_asked());
        let blocked =
            self.strict && t < self.held_back.len() && self.held_back[t].is_some_and(|first| first != job.id());
        let over = self.ledger.check(t, ask).err();
        let fits = if blocked || over.is_some() { None } else { self.free.find_job(job) };
        match fits {
            Some(p) => {
                self.free.take(&p);
                self.ledger.hold(t, ask);
                self.placed[i] = true;
                let name = self.tenants.get(t).map_or("?", |x| x.name());
                self.placements.push(p.action(job.id()).because(format!("quota: tenant {name} borrows idle GPUs")));
            }
            None if *reasons < REASONS => {
                let why = match (over, blocked) {
                    (Some(over), _) => over.to_string(),
                    (None, true) => "behind its tenant's first waiting job (strict FIFO)".into(),
                    (None, false) => format!("{} GPUs asked, {} free", job.gpus_asked(), self.free.free_count()),
                };
                d.pending(job.id(), why);
                *reasons += 1;
            }
            None => {}
        }
        if !self.placed[i] && t < self.held_back.len() {
            self.held_back[t] = self.held_back[t].or(Some(job.id()));
        }
    }
}

impl Policy for Quota {
    type Config = Config;

    const PLACES: bool = true;

    fn new(config: Config) -> Result<Self, PolicyError> {
        if !(config.min_run_s.is_finite() && config.min_run_s >= 0.0) {
            return Err(PolicyError::InvalidConfig("min-run-s must be zero or more seconds".into()));
        }
        Ok(Quota { config, state: State::default() })
    }

    fn decide(&mut self, s: &Snapshot) -> Result<Decision, PolicyError> {
        self.track_starts(s);
        let mut d = Decision::new();
        if s.queue_len() == 0 {
            return Ok(d);
        }
        let tenants: Vec<Tenant> = s.tenants().collect();
        let ledger = s.ledger();
        let free = sched::FreeGpus::of(s);
        let queue: Vec<Job> = s.queue().collect();
        let victims = if self.config.reclaim { self.victims(s, &tenants) } else { Vec::new() };
        let mut round = Round {
            config: &self.config,
            s,
            placed: vec![false; queue.len()],
            waiting: vec![None; queue.len()],
            held_back: vec![None; tenants.len()],
            tenants,
            ledger,
            free,
            victims,
            preempted: Vec::new(),
            placements: Vec::new(),
            strict: self.config.queueing == Queueing::StrictFifo,
        };
        // 1. Within quota, taking lent GPUs back where needed.
        for (i, job) in queue.iter().enumerate() {
            round.within_quota(i, job, &mut d);
        }
        // 2. Borrowing, and tenants without a quota, on what is free.
        let mut reasons = 0;
        for (i, job) in queue.iter().enumerate() {
            round.borrow(i, job, &mut reasons, &mut d);
        }
        for p in round.placements {
            d.push(p);
        }
        Ok(d)
    }

    keep_state!(state);
}

export_policy!(Quota);

#[cfg(test)]
mod tests;
