//! DRF: dominant resource fairness across tenants, over GPUs, CPU and memory.
//!
//! A tenant's dominant share is the largest fraction it holds of any one resource of the
//! cluster, divided by its weight. Each round hands out what is free by progressive filling:
//! the tenant with the lowest dominant share that has a job which fits now gets its oldest such
//! job placed, its share grows by that job's demand, and the next pick is made, until no tenant
//! has a job that fits. A tenant whose jobs need little of the resource others crowd on (CPU
//! against GPUs, say) thus gets more jobs before it counts as served. Nothing is ever
//! preempted: as in classic DRF, fairness acts only on what is free, so a tenant over its share
//! keeps what runs and is merely last in line for what frees up.
//!
//! In detail, every `interval-s`:
//! 1. The cluster's totals are the GPUs, CPU (millicores) and memory (bytes) of the nodes that
//!    take work; a resource of which the cluster has none counts for no one.
//! 2. A tenant's usage is the sum over its running jobs (wherever they run) of the GPUs each
//!    holds and the CPU and memory it uses now, each at least the job's per-GPU share of its
//!    node (the node's CPU, or memory, over its GPU count, for each GPU held), so that a job
//!    that looks idle still counts; a running CPU job counts at least as a queued one would.
//! 3. Tenants are ranked by dominant share over weight, then by dominant share alone, then by
//!    name. The first tenant with jobs left gets its jobs tried in order of arrival: a job fits
//!    when first fit ([`sched::FreeGpus`], node index order) finds it GPUs on nodes that take
//!    work and the tenant has room for them under its limit ([`Snapshot::ledger`], held as the
//!    round places, so the host never refuses a placement). The first job that fits is placed
//!    and its demand added to the tenant's usage; a job that does not fit is passed over for the
//!    rest of the round (GPUs and room only shrink within it), and a tenant with no job left
//!    that fits drops out of the round.
//!
//! Demand of a queued job (our reading: the contract carries no CPU or memory requests, and
//! the snapshot no use for a job that waits): its GPUs asked, and the per-GPU share of CPU and
//! memory of the node(s) first fit would give it, for each GPU; a CPU job (no GPUs) counts as
//! `cpu-job-millicores` and `cpu-job-memory-bytes`. A job that ran before and was preempted is
//! estimated the same way, nothing better being known of it while it waits. Once it runs its
//! measured use counts (step 2).
//!
//! Reads: the tenants (names, weights, and the limits through the ledger), each node's GPUs,
//! CPU, memory and whether it takes work, the running jobs' tenants, GPUs, CPU and memory use,
//! and the queued jobs' tenants, arrival, GPUs asked and replicas.
//!
//! Says why the first [`REASONS`] jobs it leaves in the queue wait: at the tenant's limit, GPUs
//! taken this round by tenants ahead of it (with both dominant shares), or too few GPUs free.
//!
//! Config (kebab-case keys, all optional):
//! - `cpu-job-millicores` (1000): the CPU a CPU job is taken to use while it waits, and at least
//!   while it runs;
//! - `cpu-job-memory-bytes` (4 GiB, 4294967296): the same for memory;
//! - `interval-s` (0): seconds between rounds; 0 is every call.
//!
//! Paper: A. Ghodsi, M. Zaharia, B. Hindman, A. Konwinski, S. Shenker, I. Stoica, "Dominant
//! Resource Fairness: Fair Allocation of Multiple Resource Types", NSDI 2011: progressive
//! filling as there, and its weighted variant with one weight per tenant for every resource;
//! the CPU and memory estimates, and placing by first fit, are ours.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use wasmsched_sdk::prelude::*;

/// DRF's knobs.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Millicores a CPU job is taken to use while it waits, and at least while it runs.
    pub cpu_job_millicores: u64,
    /// Bytes of memory a CPU job is taken to use while it waits, and at least while it runs.
    pub cpu_job_memory_bytes: u64,
    /// Seconds between rounds; 0 runs a round on every call.
    pub interval_s: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config { cpu_job_millicores: 1000, cpu_job_memory_bytes: Bytes::gib(4).0, interval_s: 0.0 }
    }
}

/// How many waiting jobs DRF gives a reason for, in queue order.
pub const REASONS: usize = 64;

/// One of the resources shares are counted in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    /// GPUs held.
    Gpus,
    /// CPU, millicores.
    Cpu,
    /// Memory, bytes.
    Memory,
}

impl Resource {
    /// In the order of a usage vector's entries.
    const ALL: [Resource; 3] = [Resource::Gpus, Resource::Cpu, Resource::Memory];
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Resource::Gpus => "GPUs",
            Resource::Cpu => "CPU",
            Resource::Memory => "memory",
        })
    }
}

/// GPUs, millicores, bytes: a usage or a demand.
type Vector = [f64; 3];

/// A tenant's dominant share as a round left it.
#[derive(Clone, Debug, PartialEq)]
pub struct Share {
    /// The tenant.
    pub tenant: String,
    /// Its weight.
    pub weight: f64,
    /// Its largest fraction of any resource of the cluster.
    pub dominant: f64,
    /// The resource of that fraction.
    pub resource: Resource,
}

impl Share {
    /// The dominant share over the weight: what tenants are ranked by.
    pub fn weighted(&self) -> f64 {
        self.dominant / self.weight
    }

    /// "0.42 (GPUs)", or "0.21 (GPUs 0.42, weight 2)" for a weight other than 1.
    fn describe(&self) -> String {
        if self.weight == 1.0 {
            format!("{:.2} ({})", self.dominant, self.resource)
        } else {
            format!("{:.2} ({} {:.2}, weight {})", self.weighted(), self.resource, self.dominant, self.weight)
        }
    }
}

/// What the cluster has and what a job counts as.
struct Cluster {
    totals: Vector,
    /// Per node: millicores and bytes per GPU (0 without GPUs), and whether it takes work.
    nodes: Vec<(f64, f64, bool)>,
    /// What a CPU job counts as.
    cpu_job: Vector,
}

impl Cluster {
    fn of(s: &Snapshot, config: &Config) -> Self {
        let mut totals = [0.0; 3];
        let nodes = s
            .nodes()
            .map(|n| {
                let gpus = n.gpus().len() as f64;
                let (cpu, memory) = (n.cpu().0 as f64, n.memory().0 as f64);
                if n.takes_work() {
                    totals = [totals[0] + gpus, totals[1] + cpu, totals[2] + memory];
                }
                let per = |x: f64| if gpus > 0.0 { x / gpus } else { 0.0 };
                (per(cpu), per(memory), n.takes_work())
            })
            .collect();
        let cpu_job = [0.0, config.cpu_job_millicores as f64, config.cpu_job_memory_bytes as f64];
        Cluster { totals, nodes, cpu_job }
    }

    /// The per-GPU share of CPU and memory of these GPUs' nodes, with the GPUs; a CPU job's
    /// estimate for none.
    fn per_gpu(&self, gpus: impl Iterator<Item = GpuSlot>) -> Vector {
        let mut v = [0.0; 3];
        for g in gpus {
            let (cpu, memory, _) = self.nodes.get(g.node.0 as usize).copied().unwrap_or_default();
            v = [v[0] + 1.0, v[1] + cpu, v[2] + memory];
        }
        if v[0] == 0.0 { self.cpu_job } else { v }
    }

    /// What a running job counts as: its GPUs, its use, at least its per-GPU share.
    fn running(&self, job: &Job) -> Vector {
        let floor = self.per_gpu(job.gpus().iter().copied());
        [job.gpus().len() as f64, floor[1].max(job.cpu_use().0 as f64), floor[2].max(job.memory_use().0 as f64)]
    }

    /// The share of `usage` for a tenant of `weight`.
    fn share(&self, tenant: &str, weight: f64, usage: &Vector) -> Share {
        let mut share = Share { tenant: tenant.into(), weight, dominant: 0.0, resource: Resource::Gpus };
        for (r, (used, total)) in Resource::ALL.into_iter().zip(usage.iter().zip(self.totals)) {
            if total > 0.0 && used / total > share.dominant {
                (share.dominant, share.resource) = (used / total, r);
            }
        }
        share
    }
}

/// One tenant in a round.
struct Account {
    share: Share,
    /// Its index in the ledger (past its end for a tenant the snapshot does not list: no limit).
    ledger: usize,
    usage: Vector,
    /// Its queued jobs (positions in the round's queue), oldest first, and the next to try.
    waiting: Vec<usize>,
    next: usize,
}

impl Account {
    /// The ranking: weighted share, then share, then name (shares compared to 1e-9, so that
    /// sums that differ in rounding alone tie).
    fn key(&self) -> (i64, i64, &str) {
        let q = |x: f64| (x * 1e9).round() as i64;
        (q(self.share.weighted()), q(self.share.dominant), self.share.tenant.as_str())
    }
}

/// Why a job tried in a round did not start.
#[derive(Clone, Copy)]
enum Why {
    /// Its tenant has no room for its GPUs under its limit.
    Limit,
    /// It fitted when the round began and tenants ranked ahead took the GPUs.
    Behind {
        /// Its tenant's weighted share and dominant resource when it was tried.
        own: f64,
        resource: Resource,
        /// The last other tenant placed before it was tried, and that tenant's weighted share
        /// when picked.
        ahead: usize,
        theirs: f64,
    },
    /// Too few GPUs free (or no node takes work).
    NoRoom,
}

/// The DRF policy.
pub struct Drf {
    config: Config,
    rounds: Rounds,
    shares: Vec<Share>,
}

impl Drf {
    /// Every tenant's dominant share as the last round with jobs waiting left it, its
    /// placements counted, in the snapshot's tenant order: for tests and logs.
    pub fn shares(&self) -> &[Share] {
        &self.shares
    }

    /// One round of progressive filling.
    fn round<'s>(&mut self, s: &Snapshot<'s>, d: &mut Decision) {
        let cluster = Cluster::of(s, &self.config);
        let (mut accounts, queue, tenant_of) = Self::accounts(s, &cluster);
        let (why, free, ledger) = Self::fill(s, &cluster, &mut accounts, &queue, d);
        Self::tell_pending(&queue, &tenant_of, &accounts, &why, &free, &ledger, d);
        self.shares = accounts.into_iter().map(|a| a.share).collect();
    }

    /// Every tenant's account, its usage that of its running jobs (tenants the snapshot does
    /// not list after those it does); the queue, oldest first; per queued job, its account.
    fn accounts<'s>(s: &Snapshot<'s>, cluster: &Cluster) -> (Vec<Account>, Vec<Job<'s>>, Vec<usize>) {
        let mut accounts: Vec<Account> = s
            .tenants()
            .map(|t| {
                let weight = if t.weight().is_finite() && t.weight() > 0.0 { t.weight() } else { 1.0 };
                let share = cluster.share(t.name(), weight, &[0.0; 3]);
                Account { share, ledger: t.index(), usage: [0.0; 3], waiting: Vec::new(), next: 0 }
            })
            .collect();
        let mut index: BTreeMap<&'s str, usize> = s.tenants().map(|t| (t.name(), t.index())).collect();
        let mut account_of = |name: &'s str, accounts: &mut Vec<Account>| -> usize {
            *index.entry(name).or_insert_with(|| {
                let share = cluster.share(name, 1.0, &[0.0; 3]);
                accounts.push(Account { share, ledger: usize::MAX, usage: [0.0; 3], waiting: Vec::new(), next: 0 });
                accounts.len() - 1
            })
        };
        for job in s.jobs() {
            let a = account_of(job.tenant(), &mut accounts);
            let used = cluster.running(&job);
            accounts[a].usage = std::array::from_fn(|r| accounts[a].usage[r] + used[r]);
        }
        let mut queue: Vec<Job> = s.queue().collect();
        queue.sort_by(|a, b| a.arrival().0.total_cmp(&b.arrival().0).then(a.id().cmp(&b.id())));
        let tenant_of: Vec<usize> = queue.iter().map(|j| account_of(j.tenant(), &mut accounts)).collect();
        for (i, &a) in tenant_of.iter().enumerate() {
            accounts[a].waiting.push(i);
        }
        for a in &mut accounts {
            a.share = cluster.share(&a.share.tenant, a.share.weight, &a.usage);
        }
        (accounts, queue, tenant_of)
    }

    /// The filling itself: the tenant of the lowest share with a job that fits gets its oldest
    /// such job placed, until no tenant has one. Per queued job why it did not start (`None`
    /// when placed or not tried), and the GPUs free and the ledger as the round leaves them.
    fn fill(
        s: &Snapshot,
        cluster: &Cluster,
        accounts: &mut [Account],
        queue: &[Job],
        d: &mut Decision,
    ) -> (Vec<Option<Why>>, sched::FreeGpus, Ledger) {
        let start = sched::FreeGpus::of(s);
        let mut free = start.clone();
        let mut ledger = s.ledger();
        let mut why: Vec<Option<Why>> = vec![None; queue.len()];
        // The last placement of GPUs: its tenant and that tenant's share then; and the last one
        // of another tenant.
        let mut last: Option<(usize, f64)> = None;
        let mut before = None;
        let mut live: Vec<usize> = (0..accounts.len()).filter(|&a| !accounts[a].waiting.is_empty()).collect();
        while let Some(k) = (0..live.len()).min_by(|&x, &y| accounts[live[x]].key().cmp(&accounts[live[y]].key())) {
            let a = live[k];
            let acc = &mut accounts[a];
            let mut found = None;
            while found.is_none() && acc.next < acc.waiting.len() {
                let i = acc.waiting[acc.next];
                acc.next += 1;
                let job = &queue[i];
                let ask = u64::from(job.gpus_asked());
                let takes_work = |p: &sched::Placement| p.nodes().iter().all(|(n, _)| cluster.nodes[n.0 as usize].2);
                why[i] = if ledger.check(acc.ledger, ask).is_err() {
                    Some(Why::Limit)
                } else if let Some(p) = free.find_job(job).filter(takes_work) {
                    found = Some((i, p));
                    None
                } else {
                    match [last, before].into_iter().flatten().find(|&(t, _)| t != a) {
                        Some((ahead, theirs)) if start.find_job(job).is_some() => {
                            Some(Why::Behind { own: acc.share.weighted(), resource: acc.share.resource, ahead, theirs })
                        }
                        _ => Some(Why::NoRoom),
                    }
                };
            }
            let Some((i, p)) = found else {
                live.swap_remove(k);
                continue;
            };
            let job = &queue[i];
            let why =
                format!("drf: tenant {} had the lowest dominant share, {}", acc.share.tenant, acc.share.describe());
            d.push(p.action(job.id()).because(why));
            if job.gpus_asked() > 0 {
                if last.is_some_and(|(t, _)| t != a) {
                    before = last;
                }
                last = Some((a, acc.share.weighted()));
            }
            let demand = if job.gpus_asked() == 0 { cluster.cpu_job } else { cluster.per_gpu(p.gpus()) };
            free.take(&p);
            ledger.hold(acc.ledger, u64::from(job.gpus_asked()));
            acc.usage = std::array::from_fn(|r| acc.usage[r] + demand[r]);
            acc.share = cluster.share(&acc.share.tenant, acc.share.weight, &acc.usage);
        }
        (why, free, ledger)
    }

    /// Says why the first [`REASONS`] jobs the round left waiting wait, in queue order.
    fn tell_pending(
        queue: &[Job],
        tenant_of: &[usize],
        accounts: &[Account],
        why: &[Option<Why>],
        free: &sched::FreeGpus,
        ledger: &Ledger,
        d: &mut Decision,
    ) {
        let left = why.iter().enumerate().filter_map(|(i, w)| w.map(|w| (i, w)));
        for (i, w) in left.take(REASONS) {
            let (job, acc) = (&queue[i], &accounts[tenant_of[i]]);
            let reason = match w {
                Why::Limit => ledger
                    .check(acc.ledger, u64::from(job.gpus_asked()))
                    .err()
                    .map_or_else(|| format!("tenant {} is at its limit", acc.share.tenant), |over| over.to_string()),
                Why::Behind { own, resource, ahead, theirs } => {
                    let label = if acc.share.weight == 1.0 { "dominant share" } else { "weighted dominant share" };
                    let other = &accounts[ahead].share.tenant;
                    format!("tenant {}: {label} {own:.2} ({resource}), behind {other} ({theirs:.2})", acc.share.tenant)
                }
                Why::NoRoom if job.gpus_asked() == 0 => "a CPU job; no node takes work now".into(),
                Why::NoRoom => format!("{} GPUs asked, {} free", job.gpus_asked(), free.free_count()),
            };
            d.pending(job.id(), reason);
        }
    }
}

impl Policy for Drf {
    type Config = Config;

    const PLACES: bool = true;

    fn new(config: Config) -> Result<Self, PolicyError> {
        if !(config.interval_s.is_finite() && config.interval_s >= 0.0) {
            return Err(PolicyError::InvalidConfig(format!(
                "interval-s must be zero (every call) or more seconds, like 30; got {}",
                config.interval_s
            )));
        }
        if config.cpu_job_millicores == 0 || config.cpu_job_memory_bytes == 0 {
            return Err(PolicyError::InvalidConfig(
                "cpu-job-millicores and cpu-job-memory-bytes must be above 0, like 1000 and 4294967296 (4 GiB)".into(),
            ));
        }
        Ok(Drf { config, rounds: Rounds::default(), shares: Vec::new() })
    }

    fn decide(&mut self, s: &Snapshot) -> Result<Decision, PolicyError> {
        let mut d = Decision::new();
        let interval = Seconds(self.config.interval_s);
        if !self.rounds.due(s.time(), interval, &mut d) {
            return Ok(d);
        }
        if interval.0 > 0.0 {
            d.call_again_in(interval);
        }
        if s.queue_len() > 0 {
            self.round(s, &mut d);
        }
        Ok(d)
    }

    keep_state!(rounds);
}

export_policy!(Drf);

#[cfg(test)]
mod tests;
