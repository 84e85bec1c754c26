//! Fair share with decay: tenants take turns by Slurm's fair-share factor, computed over the
//! GPU time each has used, with old use forgotten by a half-life; tenants that hold more than
//! their weighted share give GPUs back when another waits.
//!
//! Each round (every call, or every `interval-s`):
//! 1. **Usage.** Each tenant's usage U, in GPU-seconds, decays and grows:
//!    U ← U·2^(−Δt/`half-life-s`) + G·Δt, with Δt the time since the previous round and G the
//!    GPUs its running jobs hold now. So with nothing running a tenant's usage halves every
//!    half-life.
//! 2. **Fair-share factor.** F = 2^(−(U/ΣU)/S), S being the tenant's weight over the sum of
//!    the weights of every tenant there is; F = 1 while nobody has used anything. A tenant
//!    that used exactly its share has F = ½; less, more; more, less.
//! 3. **Entitlement.** The GPUs of the nodes that take work are split among the tenants by
//!    weight, each capped by its usable demand (the GPUs its running jobs hold and its waiting
//!    jobs ask, jobs larger than the cluster or than its own hard limit left out, the whole
//!    capped by that limit): weighted max-min fairness, by water-filling ([`stats::entitled`],
//!    the host's rule, which its fairness figures measure against).
//! 4. **Order and placement.** Each tenant's waiting jobs are ordered by `order` (arrival, or
//!    least attained service first). The tenants then take turns, one job at a time: next is
//!    a tenant whose next job keeps it within its entitlement, and among those (later, among
//!    the rest) the one with the highest *projected* factor, its usage counted as if each GPU
//!    given to it this round ran for one half-life; a tie goes to the name first in
//!    alphabetical order. So the under-served go first, and a round does not hand one tenant
//!    everything: weights 3:1 on 8 free GPUs give 6 and 2. A job is placed by first fit
//!    ([`sched::FreeGpus`]) when its tenant has room in the host's ledger
//!    ([`Snapshot::ledger`]: quotas and borrowing, counted as the round places); else it
//!    waits. A job that does not fit now is passed over (`backfill`); without backfill
//!    nothing is placed after it, though jobs larger than the whole cluster and jobs at their
//!    tenant's limit never hold the others back. The walk stops when no tenant's next job is
//!    within its entitlement; after the preemptions (5) it goes on, beyond entitlements, on
//!    the GPUs still free (work conserving), so a tenant never takes idle GPUs that a tenant
//!    below its entitlement is about to get back.
//! 5. **Preemption** (`preempt`). A tenant whose GPUs plus one of its waiting jobs' stay
//!    within its entitlement takes GPUs back for that job, tenants by factor, highest first.
//!    So does a tenant below its entitlement whose every waiting job asks for more than it
//!    lacks, for its smallest job (else a tenant whose jobs are larger than its entitlement,
//!    say 8 GPUs against 3, would never run at all). Running jobs of the tenant most above its
//!    entitlement are released one by one, the most recently started first (then the highest
//!    handle), only those whose current run has lasted `min-run-s`, until the job fits; only
//!    those whose GPUs its first fit then takes are preempted. A job of several GPUs also
//!    tries each of the 16 nodes with the most GPUs free or held by victims alone, and takes
//!    the room that preempts the fewest (released over the whole cluster, the newest jobs may
//!    free two GPUs on each node where the job needs four on one). A victim's tenant is never
//!    left further below its entitlement than the taking tenant stands now (GPUs held minus
//!    entitlement): each preemption narrows the gap between the two and never reverses it, so
//!    the lowest standing only rises and nothing moves back the next round. At most
//!    `max-preemptions` a round. The job is placed in the same decision, right after its
//!    preemptions (the host frees a preempted job's GPUs for the actions after it), so that
//!    the GPUs go to nobody else. A decision thus holds the placements within entitlements,
//!    then each group of preemptions with its placement, then the placements beyond.
//!
//! A job found running that the policy did not place counts its current run from the round
//! that first saw it. Between rounds (`interval-s` > 0) it asks to be called when the next is
//! due; jobs that arrive meanwhile wait for it.
//!
//! Reads: the tenants (weights, hard limits), each job's tenant, GPUs asked, replicas,
//! arrival, attained service and run time, the running jobs' GPUs, and which nodes take work.
//!
//! Says why the first [`REASONS`] jobs it leaves in the queue wait: at the tenant's limit,
//! larger than the cluster, behind a job that does not fit (no backfill), or no GPUs free
//! now, with the tenant's factor and that of the tenant with the highest.
//!
//! Config (kebab-case keys, all optional):
//! - `half-life-s` (3600): the half-life of usage; above 0 and finite;
//! - `order` ("las"): a tenant's own jobs by least attained service (GPU-seconds received)
//!   first, then arrival; or "fifo": by arrival. On the Philly trace's first 1,000 jobs on 64
//!   GPUs (its virtual clusters as tenants), FIFO within a tenant doubled the mean JCT
//!   against FIFO alone (long jobs it preempted came back first and held their GPUs), LAS cut
//!   it by a quarter at a higher Jain's index (`docs/tenants.md`);
//! - `backfill` (true): a job that does not fit now lets the jobs behind it go ahead;
//! - `preempt` (true): take GPUs back for tenants below their entitlement (5);
//! - `min-run-s` (600): a job's current run lasts at least this long before it is preempted;
//! - `max-preemptions` (4): preemptions a round at most;
//! - `interval-s` (0): seconds between rounds; 0 is every call.
//!
//! Source: Slurm's multifactor priority plugin, its classic fair-share factor 2^(−U/S) over
//! usage decayed by `PriorityDecayHalfLife` (7 days by default in Slurm; 1 hour here, since
//! simulated runs last hours), <https://slurm.schedmd.com/priority_multifactor.html>. The
//! entitlement and the preemption toward it are this policy's own.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use wasmsched_sdk::prelude::*;

/// How one tenant's own waiting jobs are ordered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Order {
    /// By arrival.
    Fifo,
    /// Least attained service (GPU-seconds received) first, then by arrival.
    #[default]
    Las,
}

/// Fair share with decay's knobs.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Seconds in which a tenant's usage halves; above 0.
    pub half_life_s: f64,
    /// How a tenant's own jobs are ordered.
    pub order: Order,
    /// Let the jobs behind one that does not fit now go ahead.
    pub backfill: bool,
    /// Take GPUs back for tenants below their entitlement.
    pub preempt: bool,
    /// Seconds a job's current run lasts at least before it is preempted.
    pub min_run_s: f64,
    /// Preemptions a round at most.
    pub max_preemptions: u32,
    /// Seconds between rounds; 0 runs a round on every call.
    pub interval_s: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            half_life_s: 3600.0,
            order: Order::Las,
            backfill: true,
            preempt: true,
            min_run_s: 600.0,
            max_preemptions: 4,
            interval_s: 0.0,
        }
    }
}

/// How many waiting jobs it gives a reason for, in the order of the round's walk.
pub const REASONS: usize = 64;

/// Slack for comparing GPU counts with fractional entitlements.
const EPS: f64 = 1e-6;

/// Slurm's classic fair-share factor: 2^(−(`usage`/`total`)/`share`), 1 when nothing has been
/// used at all (`total` 0), 0 for a tenant without a share.
pub fn factor(usage: f64, total: f64, share: f64) -> f64 {
    if total <= 0.0 {
        1.0
    } else if share <= 0.0 {
        0.0
    } else {
        (-(usage / total) / share).exp2()
    }
}

/// `usage` after `elapsed` seconds of decay with half-life `half_life`.
pub fn decay(usage: f64, elapsed: f64, half_life: f64) -> f64 {
    usage * (-elapsed / half_life).exp2()
}

/// What survives a hot swap.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct State {
    rounds: Rounds,
    /// When the last round ran.
    last_round_s: Option<f64>,
    /// Per tenant name: its decayed usage, in GPU-seconds.
    usage: BTreeMap<String, f64>,
    /// Per running job handle: its run time when its current run began.
    started: BTreeMap<u32, f64>,
}

/// What the last round made of one tenant (for tests and logs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Standing {
    /// Its fair-share factor.
    pub factor: f64,
    /// The GPUs it is entitled to now.
    pub entitled: f64,
}

/// Why a job the walk passed waits.
enum Wait<'s> {
    /// Its tenant is at its limit.
    Limit(String),
    /// No placement on this cluster would hold it.
    TooBig,
    /// Not enough GPUs free now.
    NoRoom,
    /// Behind a job that does not fit (no backfill).
    Behind(&'s str),
}

/// The tenants as one round sees them, indexed as [`Snapshot::tenants`].
struct Tenants<'s> {
    names: Vec<&'s str>,
    share: Vec<f64>,
    usage: Vec<f64>,
    factor: Vec<f64>,
    entitled: Vec<f64>,
    /// GPUs held: by running jobs, then as the round places and preempts.
    holds: Vec<u64>,
}

/// Per tenant, the GPUs its running jobs hold.
fn held(s: &Snapshot) -> Vec<u64> {
    let mut held = vec![0u64; s.tenants().len()];
    for job in s.jobs() {
        if let Some(t) = s.tenant_index(job.tenant()) {
            held[t] += job.gpus().len() as u64;
        }
    }
    held
}

/// A round's plan: the tenants, their waiting jobs in order, how far the walk went in each
/// and which it placed, the GPUs and ledger as its actions so far leave them, and why the jobs
/// it passed over wait (tenant, index in its queue), as many as the reasons need.
struct Plan<'s> {
    ts: Tenants<'s>,
    queues: Vec<Vec<Job<'s>>>,
    heads: Vec<usize>,
    placed: Vec<Vec<bool>>,
    /// Per tenant, the GPUs the walk gave it (its projected usage).
    given: Vec<u64>,
    free: sched::FreeGpus,
    ledger: Ledger,
    waits: Vec<(usize, usize, Wait<'s>)>,
    /// The job that does not fit and holds back the rest (no backfill).
    blocked: Option<&'s str>,
}

/// The fair-share-with-decay policy.
pub struct FairShareDecay {
    config: Config,
    state: State,
    standing: BTreeMap<String, Standing>,
}

impl FairShareDecay {
    /// A tenant's decayed usage in GPU-seconds, as of the last round.
    pub fn usage(&self, tenant: &str) -> Option<f64> {
        self.state.usage.get(tenant).copied()
    }

    /// A tenant's factor and entitlement as the last round that had jobs waiting saw them.
    pub fn standing(&self, tenant: &str) -> Option<Standing> {
        self.standing.get(tenant).copied()
    }

    /// Decay every tenant's usage by `elapsed` and add the GPU time of its running jobs; note
    /// when each running job's current run began.
    fn account(&mut self, s: &Snapshot, elapsed: f64) {
        let held = held(s);
        let old = std::mem::take(&mut self.state.usage);
        for t in s.tenants() {
            let u = old.get(t.name()).copied().unwrap_or(0.0);
            let now = decay(u, elapsed, self.config.half_life_s) + held[t.index()] as f64 * elapsed;
            self.state.usage.insert(t.name().to_string(), now);
        }
        let old = std::mem::take(&mut self.state.started);
        let started = s.jobs().map(|j| (j.id().0, old.get(&j.id().0).copied().unwrap_or(j.run_time().0)));
        self.state.started = started.collect();
    }

    /// Factors, demands and entitlements; each tenant's waiting jobs in its order.
    fn standings<'s>(&self, s: &Snapshot<'s>) -> (Tenants<'s>, Vec<Vec<Job<'s>>>) {
        let tenants: Vec<Tenant> = s.tenants().collect();
        let weights: Vec<f64> = tenants.iter().map(|t| t.weight()).collect();
        let total_w: f64 = weights.iter().sum();
        let share: Vec<f64> = weights.iter().map(|w| if total_w > 0.0 { w / total_w } else { 0.0 }).collect();
        let usage: Vec<f64> = tenants.iter().map(|t| self.usage(t.name()).unwrap_or(0.0)).collect();
        let total_u: f64 = usage.iter().sum();
        let factor: Vec<f64> = (0..tenants.len()).map(|t| factor(usage[t], total_u, share[t])).collect();
        let holds = held(s);
        let mut queues: Vec<Vec<Job>> = vec![Vec::new(); tenants.len()];
        for job in s.queue() {
            match s.tenant_index(job.tenant()) {
                Some(t) => queues[t].push(job),
                None => {
                    debug!("fair-share-decay: job#{} names tenant {}, which is not declared", job.id(), job.tenant())
                }
            }
        }
        for q in &mut queues {
            match self.config.order {
                Order::Fifo => q.sort_by(|a, b| a.arrival().0.total_cmp(&b.arrival().0).then(a.id().cmp(&b.id()))),
                Order::Las => q.sort_by(|a, b| {
                    let service = a.attained_service().0.total_cmp(&b.attained_service().0);
                    service.then(a.arrival().0.total_cmp(&b.arrival().0)).then(a.id().cmp(&b.id()))
                }),
            }
        }
        let capacity: u64 = s.nodes().filter(|n| n.takes_work()).map(|n| n.gpus().len() as u64).sum();
        let demand: Vec<u64> = tenants
            .iter()
            .map(|t| {
                let asks = queues[t.index()].iter().map(|j| u64::from(j.gpus_asked()));
                t.usable_demand(holds[t.index()], asks, capacity)
            })
            .collect();
        let entitled = stats::entitled(capacity, &weights, &demand);
        let names = tenants.iter().map(|t| t.name()).collect();
        (Tenants { names, share, usage, factor, entitled, holds }, queues)
    }

    /// One round on `s`: the walk within entitlements, the preemptions, the rest of the walk,
    /// then why jobs wait.
    fn round(&mut self, s: &Snapshot, d: &mut Decision) {
        let (ts, queues) = self.standings(s);
        self.standing = (0..ts.names.len())
            .map(|t| (ts.names[t].to_string(), Standing { factor: ts.factor[t], entitled: ts.entitled[t] }))
            .collect();
        let (heads, given) = (vec![0; queues.len()], vec![0; queues.len()]);
        let placed = queues.iter().map(|q| vec![false; q.len()]).collect();
        let (free, ledger) = (sched::FreeGpus::of(s), s.ledger());
        let mut plan = Plan { ts, queues, heads, placed, given, free, ledger, waits: Vec::new(), blocked: None };
        self.walk(s, &mut plan, d, true);
        if self.config.preempt && self.config.max_preemptions > 0 {
            self.take_back(s, &mut plan, d);
        }
        self.walk(s, &mut plan, d, false);
        let Plan { ts, queues, placed, free, waits, .. } = plan;
        let top = (0..ts.names.len())
            .filter(|&t| ts.holds[t] > 0 || !queues[t].is_empty())
            .max_by(|&a, &b| ts.factor[a].total_cmp(&ts.factor[b]).then(ts.names[b].cmp(ts.names[a])));
        for (t, i, wait) in waits.into_iter().filter(|&(t, i, _)| !placed[t][i]).take(REASONS) {
            let job = &queues[t][i];
            let why = match wait {
                Wait::Limit(over) => over,
                Wait::TooBig => {
                    format!("asks for {} GPUs, more than any placement on this cluster gives", job.gpus_asked())
                }
                Wait::Behind(ahead) => format!("behind {ahead} (fair-share order, no backfill)"),
                Wait::NoRoom => {
                    let (name, f) = (ts.names[t], ts.factor[t]);
                    let behind = match top {
                        Some(b) if ts.factor[b] > f => format!(", behind tenant {} ({:.2})", ts.names[b], ts.factor[b]),
                        _ => String::new(),
                    };
                    let room = format!("{} GPUs asked, {} free", job.gpus_asked(), free.free_count());
                    format!("tenant {name}: fair-share factor {f:.2}{behind}; {room}")
                }
            };
            d.pending(job.id(), why);
        }
    }

    /// Step 4: the tenants take turns placing their jobs by first fit; with `within_only`, only
    /// while the next job keeps its tenant within its entitlement.
    fn walk<'s>(&mut self, s: &Snapshot<'s>, plan: &mut Plan<'s>, d: &mut Decision, within_only: bool) {
        let Plan { ts, queues, heads, placed, given, free, ledger, waits, blocked } = plan;
        let n = ts.names.len();
        let h = self.config.half_life_s;
        let total_u: f64 = ts.usage.iter().sum();
        let mut idle = None;
        let keep = REASONS + self.config.max_preemptions as usize;
        loop {
            let ask = |t: usize| u64::from(queues[t][heads[t]].gpus_asked());
            let within = |t: usize| (ts.holds[t] + ask(t)) as f64 <= ts.entitled[t] + EPS;
            let total_p = total_u + h * given.iter().sum::<u64>() as f64;
            let projected = |t: usize| factor(ts.usage[t] + h * given[t] as f64, total_p, ts.share[t]);
            let next = (0..n).filter(|&t| heads[t] < queues[t].len()).max_by(|&a, &b| {
                let by_factor = projected(a).total_cmp(&projected(b));
                within(a).cmp(&within(b)).then(by_factor).then(ts.names[b].cmp(ts.names[a]))
            });
            let Some(t) = next.filter(|&t| within(t) || !within_only) else { break };
            let (i, job) = (heads[t], queues[t][heads[t]]);
            let (ask, within) = (ask(t), within(t));
            heads[t] += 1;
            if placed[t][i] {
                continue; // placed on GPUs taken back
            }
            if let Some(ahead) = *blocked {
                if waits.len() >= keep {
                    break;
                }
                waits.push((t, i, Wait::Behind(ahead)));
                continue;
            }
            if let Err(over) = ledger.check(t, ask) {
                if waits.len() < keep {
                    waits.push((t, i, Wait::Limit(over.to_string())));
                }
                continue;
            }
            let Some(p) = free.fit_job(&job) else {
                let never = idle.get_or_insert_with(|| sched::FreeGpus::idle(s)).find_job(&job).is_none();
                if !never && !self.config.backfill {
                    *blocked = Some(job.name());
                }
                if waits.len() < keep {
                    waits.push((t, i, if never { Wait::TooBig } else { Wait::NoRoom }));
                }
                continue;
            };
            ledger.hold(t, ask);
            ts.holds[t] += ask;
            given[t] += ask;
            placed[t][i] = true;
            self.state.started.insert(job.id().0, job.run_time().0);
            let (name, f, ent) = (ts.names[t], ts.factor[t], ts.entitled[t]);
            let why = if within {
                format!("fair-share-decay: tenant {name}, factor {f:.2}, within its entitlement of {ent:.1} GPUs")
            } else {
                format!(
                    "fair-share-decay: tenant {name}, factor {f:.2}, beyond its entitlement of {ent:.1} on idle GPUs"
                )
            };
            d.push(p.action(job.id()).because(why));
        }
    }
}

impl Policy for FairShareDecay {
    type Config = Config;

    const PLACES: bool = true;

    fn new(config: Config) -> Result<Self, PolicyError> {
        let c = &config;
        if !(c.half_life_s.is_finite() && c.half_life_s > 0.0) {
            return Err(PolicyError::InvalidConfig(format!(
                "half-life-s must be a finite number of seconds above 0, like 3600; got {}",
                c.half_life_s
            )));
        }
        let non_negative = |x: f64| x.is_finite() && x >= 0.0;
        if !(non_negative(c.min_run_s) && non_negative(c.interval_s)) {
            return Err(PolicyError::InvalidConfig(format!(
                "min-run-s and interval-s must be zero or more seconds; got {} and {}",
                c.min_run_s, c.interval_s
            )));
        }
        Ok(FairShareDecay { config, state: State::default(), standing: BTreeMap::new() })
    }

    fn decide(&mut self, s: &Snapshot) -> Result<Decision, PolicyError> {
        let mut d = Decision::new();
        let interval = Seconds(self.config.interval_s);
        if !self.state.rounds.due(s.time(), interval, &mut d) {
            return Ok(d);
        }
        let now = s.time().0;
        let elapsed = (now - self.state.last_round_s.unwrap_or(now)).max(0.0);
        self.state.last_round_s = Some(now);
        self.account(s, elapsed);
        if s.queue_len() > 0 {
            self.round(s, &mut d);
        }
        if interval.0 > 0.0 {
            d.call_again_in(interval);
        }
        Ok(d)
    }

    keep_state!(state);
}

export_policy!(FairShareDecay);

mod reclaim;

#[cfg(test)]
mod tests;
