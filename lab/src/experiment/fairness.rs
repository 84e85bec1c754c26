//! How fairly a run shared the GPUs among tenants, measured tick by tick ([`Tracker`]) and
//! summed up at the end ([`Fairness`]).
//!
//! - **Entitlement.** While the tenants' usable demand (the GPUs their running jobs hold and
//!   their queued jobs ask for, leaving out jobs a tenant could never run: larger than its
//!   limit or than the cluster, [`wasmsched_rules::Entitlement::usable_demand`]) exceeds the
//!   GPUs of the nodes that take work, the cluster is *contended*, and each tenant is entitled
//!   to its weighted max-min fair share of those GPUs: shares in proportion to the weights, no
//!   tenant more than it can use, what one cannot use shared again among the others
//!   (water-filling, [`wasmsched_rules::tenants::entitled`], the rule `fair-share-decay` plans
//!   by). Only contended time counts: when every demand is met, every split is fair.
//! - **Share.** A tenant's GPU-time received while contended, over the whole cluster's; its
//!   *entitled* share likewise. `share_error` is share / entitled − 1.
//! - **Jain's index** of the tenants' received over entitled GPU-time: 1 when every tenant got
//!   exactly its entitlement, 1/n when one got everything.
//! - **Waiting for quota.** A tenant with a quota *waits for quota* while it holds less than its
//!   quota, a queued job of it would fit within the quota, and another tenant holds more than its
//!   own quota (or holds GPUs with no quota at all). The longest such wait, and the mean of the
//!   waits that ended (the reclaim latency), are reported.
//! - **Mean JCT per tenant**, from the jobs' outcomes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use wasmsched_core::tenants::jain;
use wasmsched_core::world::World;

/// One tenant's figures over a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TenantFigures {
    /// Its name.
    pub name: String,
    /// Its weight.
    pub weight: f64,
    /// Its quota, GPUs.
    pub quota_gpus: Option<u32>,
    /// GPU-hours received over the whole run.
    pub gpu_hours: f64,
    /// Its share of the GPU-time received while contended.
    pub share: f64,
    /// The share it was entitled to over that time.
    pub entitled_share: f64,
    /// share / entitled share − 1 (0 when it was entitled to nothing).
    pub share_error: f64,
    /// Its jobs.
    pub jobs: usize,
    /// Mean JCT of its finished jobs, seconds (None when none finished).
    pub mean_jct_s: Option<f64>,
    /// The longest it waited for its quota while another tenant held more than its own, seconds.
    pub longest_quota_wait_s: f64,
}

/// A run's fairness among tenants.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Fairness {
    /// Every tenant, in the world's order.
    pub tenants: Vec<TenantFigures>,
    /// Seconds the cluster was contended.
    pub contended_s: f64,
    /// Jain's index of received over entitled GPU-time while contended (1: perfectly fair).
    pub jain: f64,
    /// The largest |share error| of any tenant entitled to anything.
    pub max_share_error: f64,
    /// The longest any tenant waited for its quota, seconds.
    pub longest_quota_wait_s: f64,
    /// The mean of the waits for quota that ended, seconds (the reclaim latency); None when
    /// none ended.
    pub mean_reclaim_s: Option<f64>,
    /// Each tenant's GPUs held, sampled at every tick: (seconds, GPUs per tenant in order);
    /// kept only when asked for (the report draws it), as a run's timeline is.
    #[serde(skip)]
    pub held: Vec<(f64, Vec<u32>)>,
}

/// Per tenant, what the ticks added up.
#[derive(Clone, Debug, Default)]
struct Acc {
    gpu_s: f64,
    received_s: f64,
    entitled_s: f64,
    /// When its current wait for quota began.
    waiting_since: Option<f64>,
    longest_wait_s: f64,
}

/// Watches a run tick by tick.
#[derive(Clone, Debug, Default)]
pub struct Tracker {
    /// The world's tenants as last seen.
    tenants: Vec<wasmsched_core::bindings::wit::Tenant>,
    acc: Vec<Acc>,
    last_s: Option<f64>,
    contended_s: f64,
    /// The waits for quota that ended: their sum, seconds, and their number.
    ended_waits: (f64, u32),
    /// Whether to keep each tick's GPUs per tenant.
    keep_series: bool,
    held: Vec<(f64, Vec<u32>)>,
}

impl Tracker {
    /// A tracker that has seen nothing; `keep_series` keeps each tick's GPUs per tenant
    /// ([`Fairness::held`]).
    pub fn new(keep_series: bool) -> Self {
        Tracker { keep_series, ..Self::default() }
    }

    /// Take in the world as a tick leaves it: what each tenant held since the last tick.
    pub fn observe(&mut self, world: &World) {
        let now = world.time_ms() as f64 / 1000.0;
        let tenants = world.tenants();
        if self.acc.len() < tenants.len() || self.tenants.len() != tenants.len() {
            self.acc.resize(tenants.len().max(self.acc.len()), Acc::default());
            self.tenants = tenants.to_vec();
        }
        let n = tenants.len();
        let loads = world.tenant_loads();
        let held: Vec<u64> = loads.iter().map(|l| l.gpus).collect();
        let capacity = world.gpus_taking_work();
        let dt = self.last_s.map_or(0.0, |last| (now - last).max(0.0));
        self.last_s = Some(now);
        let contended = loads.iter().map(|l| l.usable).sum::<u64>() > capacity;
        let entitled = if contended { world.entitlements(&loads) } else { Vec::new() };
        if contended {
            self.contended_s += dt;
        }
        let over_quota = |t: usize| tenants[t].quota_gpus.map_or(held[t] > 0, |q| held[t] > u64::from(q));
        for (t, acc) in self.acc.iter_mut().enumerate().take(n) {
            acc.gpu_s += held[t] as f64 * dt;
            if contended {
                acc.received_s += held[t] as f64 * dt;
                acc.entitled_s += entitled[t] * dt;
            }
            let waits = tenants[t].quota_gpus.is_some_and(|q| {
                let q = u64::from(q);
                held[t] < q && loads[t].smallest_ask <= q - held[t] && (0..n).any(|o| o != t && over_quota(o))
            });
            match (waits, acc.waiting_since) {
                (true, None) => acc.waiting_since = Some(now),
                (false, Some(since)) => {
                    acc.longest_wait_s = acc.longest_wait_s.max(now - since);
                    self.ended_waits = (self.ended_waits.0 + now - since, self.ended_waits.1 + 1);
                    acc.waiting_since = None;
                }
                _ => {}
            }
        }
        if self.keep_series {
            self.held.push((now, held.iter().map(|&h| h.min(u64::from(u32::MAX)) as u32).collect()));
        }
    }

    /// How many tenants it has seen.
    pub fn tenant_count(&self) -> usize {
        self.tenants.len()
    }

    /// The figures, given each job's (tenant, JCT if it finished).
    pub fn finish(mut self, jobs: &[(String, Option<f64>)]) -> Fairness {
        let tenants = std::mem::take(&mut self.tenants);
        let now = self.last_s.unwrap_or(0.0);
        self.acc.resize(tenants.len(), Acc::default());
        for acc in &mut self.acc {
            if let Some(since) = acc.waiting_since.take() {
                acc.longest_wait_s = acc.longest_wait_s.max(now - since);
            }
        }
        let received: f64 = self.acc.iter().map(|a| a.received_s).sum();
        let entitled: f64 = self.acc.iter().map(|a| a.entitled_s).sum();
        let mut per_tenant: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for (tenant, jct) in jobs {
            *counts.entry(tenant.as_str()).or_default() += 1;
            per_tenant.entry(tenant.as_str()).or_default().extend(jct);
        }
        let figures: Vec<TenantFigures> = tenants
            .iter()
            .zip(&self.acc)
            .map(|(t, a)| {
                let share = if received > 0.0 { a.received_s / received } else { 0.0 };
                let entitled_share = if entitled > 0.0 { a.entitled_s / entitled } else { 0.0 };
                let jcts = per_tenant.get(t.name.as_str()).map_or(&[][..], Vec::as_slice);
                TenantFigures {
                    name: t.name.clone(),
                    weight: t.weight,
                    quota_gpus: t.quota_gpus,
                    gpu_hours: a.gpu_s / 3600.0,
                    share,
                    entitled_share,
                    share_error: if entitled_share > 0.0 { share / entitled_share - 1.0 } else { 0.0 },
                    jobs: counts.get(t.name.as_str()).copied().unwrap_or(0),
                    mean_jct_s: (!jcts.is_empty()).then(|| jcts.iter().sum::<f64>() / jcts.len() as f64),
                    longest_quota_wait_s: a.longest_wait_s,
                }
            })
            .collect();
        let ratios: Vec<f64> =
            self.acc.iter().filter(|a| a.entitled_s > 0.0).map(|a| a.received_s / a.entitled_s).collect();
        Fairness {
            contended_s: self.contended_s,
            jain: jain(&ratios),
            max_share_error: figures
                .iter()
                .filter(|f| f.entitled_share > 0.0)
                .map(|f| f.share_error.abs())
                .fold(0.0, f64::max),
            longest_quota_wait_s: figures.iter().map(|f| f.longest_quota_wait_s).fold(0.0, f64::max),
            mean_reclaim_s: (self.ended_waits.1 > 0).then(|| self.ended_waits.0 / f64::from(self.ended_waits.1)),
            tenants: figures,
            held: self.held,
        }
    }
}

/// The table a person reads of `runs` (policy, fairness) over seeds: per policy the means of
/// Jain's index, the largest share error, the longest wait for quota and the reclaim latency;
/// then per tenant and policy its share against its entitlement and its mean JCT. Empty when no
/// run had tenants.
pub fn table<'a>(runs: impl IntoIterator<Item = (&'a str, &'a Fairness)>) -> String {
    use std::fmt::Write as _;
    let mut by_policy: Vec<(&str, Vec<&Fairness>)> = Vec::new();
    for (policy, f) in runs {
        match by_policy.iter_mut().find(|(p, _)| *p == policy) {
            Some((_, fs)) => fs.push(f),
            None => by_policy.push((policy, vec![f])),
        }
    }
    let Some((_, first)) = by_policy.first() else { return String::new() };
    let mean = |xs: &mut dyn Iterator<Item = f64>| {
        let v: Vec<f64> = xs.collect();
        if v.is_empty() { f64::NAN } else { v.iter().sum::<f64>() / v.len() as f64 }
    };
    let mut out = String::from("tenants: fairness while contended, mean over seeds\n");
    let w = by_policy.iter().map(|(p, _)| p.len()).max().unwrap_or(0).max(6);
    let t = first[0].tenants.iter().map(|x| x.name.len()).max().unwrap_or(0).max(6);
    let _ = writeln!(
        out,
        "{:<w$} {:>8} {:>16} {:>18} {:>14} {:>14}",
        "policy", "Jain", "max share error", "longest quota wait", "mean reclaim", "contended"
    );
    for (policy, fs) in &by_policy {
        let reclaim = mean(&mut fs.iter().filter_map(|f| f.mean_reclaim_s));
        let _ = writeln!(
            out,
            "{policy:<w$} {:>8.3} {:>15.1}% {:>18} {:>14} {:>14}",
            mean(&mut fs.iter().map(|f| f.jain)),
            100.0 * mean(&mut fs.iter().map(|f| f.max_share_error)),
            crate::scenario::claim::format_seconds(mean(&mut fs.iter().map(|f| f.longest_quota_wait_s))),
            crate::scenario::claim::format_seconds(reclaim),
            crate::scenario::claim::format_seconds(mean(&mut fs.iter().map(|f| f.contended_s))),
        );
    }
    let _ = writeln!(
        out,
        "{:<t$} {:<w$} {:>7} {:>9} {:>9} {:>12}",
        "tenant", "policy", "weight", "entitled", "share", "mean JCT"
    );
    for (k, tenant) in first[0].tenants.iter().enumerate() {
        for (policy, fs) in &by_policy {
            let of = |pick: fn(&TenantFigures) -> f64| mean(&mut fs.iter().filter_map(|f| f.tenants.get(k)).map(pick));
            let jct = mean(&mut fs.iter().filter_map(|f| f.tenants.get(k)?.mean_jct_s));
            let _ = writeln!(
                out,
                "{:<t$} {policy:<w$} {:>7.2} {:>8.1}% {:>8.1}% {:>12}",
                tenant.name,
                tenant.weight,
                100.0 * of(|f| f.entitled_share),
                100.0 * of(|f| f.share),
                crate::scenario::claim::format_seconds(jct),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_core::bindings::wit;
    use wasmsched_core::world::{GpuSlot, JobId, NodeId, sample, undeclared};

    #[test]
    fn jain_is_one_when_fair_and_one_over_n_when_one_takes_all() {
        assert_eq!(jain(&[1.0, 1.0, 1.0]), 1.0);
        assert!((jain(&[3.0, 0.0, 0.0]) - 1.0 / 3.0).abs() < 1e-12);
    }

    /// One node of `gpus` GPUs; tenants a (weight 3, quota 6) and b (weight 1, quota 2).
    fn world(gpus: usize) -> World {
        let mut w = World::new();
        w.add_node(wit::Node {
            name: "n0".into(),
            cpu_millicores: 64_000,
            memory_bytes: 256 << 30,
            gpu_memory_bytes: vec![16 << 30; gpus],
            gpu_type: String::new(),
            labels: Vec::new(),
            domains: Vec::new(),
        });
        w.set_tenants(vec![
            wit::Tenant { weight: 3.0, quota_gpus: Some(6), ..undeclared("a") },
            wit::Tenant { weight: 1.0, quota_gpus: Some(2), ..undeclared("b") },
        ]);
        w
    }

    fn job(w: &mut World, tenant: &str, gpus: u32, on: Option<&[u32]>) -> JobId {
        let h = w.enqueue_job(wit::JobSpec { gpus, tenant: tenant.into(), ..sample::job_spec(0) });
        if let Some(on) = on {
            assert!(w.start_job(h, NodeId(0), on.iter().map(|&index| GpuSlot { node: NodeId(0), index }).collect()));
        }
        h
    }

    #[test]
    fn a_tenant_above_its_entitlement_shows_as_an_error_and_lowers_jains_index() {
        let mut w = world(8);
        // a holds 4 and b 4, both want more: entitled 6 and 2.
        job(&mut w, "a", 4, Some(&[0, 1, 2, 3]));
        job(&mut w, "b", 4, Some(&[4, 5, 6, 7]));
        job(&mut w, "a", 4, None);
        job(&mut w, "b", 4, None);
        let mut t = Tracker::new(true);
        for s in 0..=10 {
            w.set_time_ms(s * 60_000);
            t.observe(&w);
        }
        let f = t.finish(&[("a".into(), Some(100.0)), ("b".into(), None)]);
        assert_eq!(f.contended_s, 600.0);
        let (a, b) = (&f.tenants[0], &f.tenants[1]);
        assert_eq!((a.share, a.entitled_share), (0.5, 0.75));
        assert!((a.share_error + 1.0 / 3.0).abs() < 1e-12 && (b.share_error - 1.0).abs() < 1e-12);
        assert!((f.jain - jain(&[4.0 / 6.0, 2.0])).abs() < 1e-12);
        assert_eq!((a.mean_jct_s, a.jobs, b.jobs, b.mean_jct_s), (Some(100.0), 1, 1, None));
        assert_eq!(a.gpu_hours, 4.0 * 600.0 / 3600.0);
        // a waits for its quota (it holds 4 of 6, a job of 4 will not fit within it): no wait.
        assert_eq!(f.longest_quota_wait_s, 0.0);
    }

    #[test]
    fn a_job_beyond_its_tenants_limit_is_no_part_of_its_due() {
        let mut w = world(8);
        job(&mut w, "a", 6, Some(&[0, 1, 2, 3, 4, 5]));
        job(&mut w, "b", 4, None); // b's limit is its quota of 2: this job can never run
        let mut t = Tracker::new(false);
        for s in 0..=10 {
            w.set_time_ms(s * 60_000);
            t.observe(&w);
        }
        assert_eq!(w.tenant_loads()[1].usable, 0);
        assert_eq!(t.finish(&[]).contended_s, 0.0, "8 GPUs, 6 held and nothing else usable: not contended");
    }

    #[test]
    fn a_wait_for_quota_while_another_borrows_is_timed_until_it_ends() {
        let mut w = world(8);
        let borrowed = job(&mut w, "b", 4, Some(&[0, 1, 2, 3]));
        job(&mut w, "a", 4, Some(&[4, 5, 6, 7]));
        job(&mut w, "a", 2, None);
        let mut t = Tracker::new(true);
        for s in 0..=5 {
            w.set_time_ms(s * 60_000);
            t.observe(&w);
        }
        // b's borrowed job is preempted at 5 min; a's job starts a minute later.
        assert!(w.requeue_job(borrowed, wit::WaitReason::Preempted));
        w.set_time_ms(360_000);
        t.observe(&w);
        let f = t.finish(&[]);
        assert_eq!(f.longest_quota_wait_s, 360.0);
        assert_eq!(f.mean_reclaim_s, Some(360.0));
        assert_eq!(f.tenants[0].longest_quota_wait_s, 360.0);
    }
}
