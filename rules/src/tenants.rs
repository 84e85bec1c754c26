//! Tenants' hard limits: how many GPUs a tenant may hold, written once for the host's checks,
//! its default placement and a policy's own planning.
//!
//! A tenant with a quota holds at most its quota when it has no cohort, and at most its quota
//! plus its borrowing limit (no limit: as much as the cohort has idle) when it has one. The
//! tenants of a cohort that have quotas hold, together, at most the sum of their quotas: what
//! one borrows is another's idle quota. A tenant without a quota has no limit. GPUs count as
//! held by the job's tenant for as long as the job runs, whether or not it shares them.

use std::fmt;

/// What one tenant is entitled to, as the limits need it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entitlement {
    /// Its name, for messages.
    pub name: String,
    /// GPUs guaranteed to it; None: no quota, no limit.
    pub quota: Option<u32>,
    /// GPUs it may hold beyond its quota, borrowed within its cohort; None: no limit of its own.
    pub borrowing_limit: Option<u32>,
    /// Its cohort's name; None: it borrows from nobody.
    pub cohort: Option<String>,
}

impl Entitlement {
    /// The most GPUs it may hold by its own entitlement (its cohort may allow fewer); None
    /// when unlimited.
    pub fn limit(&self) -> Option<u64> {
        let quota = u64::from(self.quota?);
        match (&self.cohort, self.borrowing_limit) {
            (None, _) => Some(quota),
            (Some(_), Some(borrow)) => Some(quota + u64::from(borrow)),
            (Some(_), None) => None,
        }
    }

    /// The GPUs it can use now, over which entitlements are shared ([`entitled`]): what it
    /// holds plus what its waiting jobs ask for (`asks`), leaving out any job that alone asks
    /// for more than its limit or than the `capacity` taking work, and in all no more than its
    /// limit (or than it holds, when that is more). A job it could never run is no part of its
    /// due.
    pub fn usable_demand(&self, held: u64, asks: impl IntoIterator<Item = u64>, capacity: u64) -> u64 {
        let most = self.limit().map_or(capacity, |l| l.min(capacity));
        let asked = asks.into_iter().filter(|&a| a <= most).fold(0u64, u64::saturating_add);
        held.saturating_add(asked).min(most.max(held))
    }
}

/// What each tenant is entitled to now: `capacity` GPUs shared by `weights`, max-min fair
/// (water-filling), none given more than its usable demand ([`Entitlement::usable_demand`]);
/// what one cannot use goes to the others by weight.
pub fn entitled(capacity: u64, weights: &[f64], demand: &[u64]) -> Vec<f64> {
    let caps: Vec<f64> = demand.iter().map(|&d| d as f64).collect();
    crate::split::proportional_split(capacity as f64, weights, &vec![0.0; demand.len()], &caps)
}

/// Why GPUs for a tenant's job are refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OverLimit {
    /// The tenant would hold more than its own limit.
    Tenant {
        /// The tenant.
        tenant: String,
        /// What it holds now.
        holds: u64,
        /// What the action would add.
        asks: u64,
        /// Its limit.
        limit: u64,
        /// Its quota.
        quota: u32,
    },
    /// The tenant's cohort would hold more than its members' quotas.
    Cohort {
        /// The tenant.
        tenant: String,
        /// Its cohort.
        cohort: String,
        /// What the cohort's members with quotas hold now.
        holds: u64,
        /// What the action would add.
        asks: u64,
        /// The sum of their quotas.
        quotas: u64,
    },
}

impl fmt::Display for OverLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OverLimit::Tenant { tenant, holds, asks, limit, quota } => {
                let beyond = if u64::from(*quota) == *limit {
                    String::from("its quota")
                } else {
                    format!("quota {quota} + borrowing {}", limit - u64::from(*quota))
                };
                write!(
                    f,
                    "tenant {tenant} holds {holds} GPUs of its limit of {limit} ({beyond}); {asks} more would pass it"
                )
            }
            OverLimit::Cohort { tenant, cohort, holds, asks, quotas } => write!(
                f,
                "tenant {tenant}'s cohort {cohort} holds {holds} GPUs of its members' {quotas} of quota; {asks} more \
                 would pass it (nothing idle to borrow)"
            ),
        }
    }
}

impl std::error::Error for OverLimit {}

/// Who holds how many GPUs, per tenant and per cohort, against their limits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ledger {
    tenants: Vec<Entitlement>,
    held: Vec<u64>,
    /// Per tenant, its cohort's index in `cohorts`.
    cohort_of: Vec<Option<usize>>,
    /// Per cohort: its name, the sum of its members' quotas, what those members hold.
    cohorts: Vec<(String, u64, u64)>,
}

impl Ledger {
    /// A ledger of `tenants` (indexed as given) holding nothing.
    pub fn new(tenants: Vec<Entitlement>) -> Self {
        let mut cohorts: Vec<(String, u64, u64)> = Vec::new();
        let cohort_of = tenants
            .iter()
            .map(|t| {
                let name = t.cohort.as_ref()?;
                let i = cohorts.iter().position(|(c, _, _)| c == name).unwrap_or_else(|| {
                    cohorts.push((name.clone(), 0, 0));
                    cohorts.len() - 1
                });
                cohorts[i].1 += t.quota.map_or(0, u64::from);
                Some(i)
            })
            .collect();
        Ledger { held: vec![0; tenants.len()], tenants, cohort_of, cohorts }
    }

    /// A ledger of `tenants` holding what `held` says (tenant index, GPUs), which is read only
    /// when some tenant has a limit (else nothing is ever refused, and nothing need be counted).
    pub fn holding(tenants: Vec<Entitlement>, held: impl IntoIterator<Item = (usize, u64)>) -> Self {
        let mut ledger = Ledger::new(tenants);
        if ledger.limits_anything() {
            for (tenant, gpus) in held {
                ledger.hold(tenant, gpus);
            }
        }
        ledger
    }

    /// Whether any tenant has a limit: when none has, every check passes.
    pub fn limits_anything(&self) -> bool {
        self.tenants.iter().any(|t| t.quota.is_some())
    }

    /// The tenants, in index order.
    pub fn tenants(&self) -> &[Entitlement] {
        &self.tenants
    }

    /// The GPUs `tenant`'s running jobs hold (0 for an unknown tenant).
    pub fn held(&self, tenant: usize) -> u64 {
        self.held.get(tenant).copied().unwrap_or(0)
    }

    /// How many more GPUs `tenant` may take; None when no limit applies.
    pub fn room(&self, tenant: usize) -> Option<u64> {
        let t = self.tenants.get(tenant)?;
        t.quota?;
        let own = t.limit().map(|l| l.saturating_sub(self.held[tenant]));
        let cohort = self.cohort_of[tenant].map(|c| self.cohorts[c].1.saturating_sub(self.cohorts[c].2));
        match (own, cohort) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Why `tenant` may not take `gpus` more, if it may not.
    pub fn check(&self, tenant: usize, gpus: u64) -> Result<(), OverLimit> {
        let Some(t) = self.tenants.get(tenant) else { return Ok(()) };
        let Some(quota) = t.quota else { return Ok(()) };
        if gpus == 0 {
            return Ok(());
        }
        let holds = self.held[tenant];
        if let Some(limit) = t.limit()
            && holds + gpus > limit
        {
            return Err(OverLimit::Tenant { tenant: t.name.clone(), holds, asks: gpus, limit, quota });
        }
        if let Some(c) = self.cohort_of[tenant] {
            let (cohort, quotas, holds) = &self.cohorts[c];
            if holds + gpus > *quotas {
                return Err(OverLimit::Cohort {
                    tenant: t.name.clone(),
                    cohort: cohort.clone(),
                    holds: *holds,
                    asks: gpus,
                    quotas: *quotas,
                });
            }
        }
        Ok(())
    }

    /// Count `gpus` more held by `tenant` (an unknown tenant is ignored).
    pub fn hold(&mut self, tenant: usize, gpus: u64) {
        self.shift(tenant, gpus, |a, b| a.saturating_add(b));
    }

    /// Count `gpus` fewer held by `tenant`.
    pub fn release(&mut self, tenant: usize, gpus: u64) {
        self.shift(tenant, gpus, u64::saturating_sub);
    }

    fn shift(&mut self, tenant: usize, gpus: u64, op: impl Fn(u64, u64) -> u64) {
        let Some(held) = self.held.get_mut(tenant) else { return };
        *held = op(*held, gpus);
        if self.tenants[tenant].quota.is_some()
            && let Some(c) = self.cohort_of[tenant]
        {
            self.cohorts[c].2 = op(self.cohorts[c].2, gpus);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(name: &str, quota: Option<u32>, borrowing_limit: Option<u32>, cohort: Option<&str>) -> Entitlement {
        Entitlement { name: name.into(), quota, borrowing_limit, cohort: cohort.map(String::from) }
    }

    #[test]
    fn a_tenant_without_a_cohort_holds_its_quota_at_most() {
        let mut l = Ledger::new(vec![tenant("a", Some(4), Some(8), None), tenant("free", None, None, None)]);
        l.hold(0, 3);
        assert_eq!(l.room(0), Some(1));
        assert!(l.check(0, 1).is_ok());
        let e = l.check(0, 2).unwrap_err();
        assert_eq!(e.to_string(), "tenant a holds 3 GPUs of its limit of 4 (its quota); 2 more would pass it");
        l.hold(1, 1000);
        assert_eq!((l.room(1), l.check(1, 1000)), (None, Ok(())), "no quota, no limit");
    }

    #[test]
    fn a_cohort_lends_idle_quota_up_to_each_borrowing_limit() {
        let mut l = Ledger::new(vec![
            tenant("a", Some(4), Some(2), Some("lab")),
            tenant("b", Some(4), None, Some("lab")),
            tenant("c", Some(0), None, Some("lab")),
        ]);
        assert_eq!(l.room(0), Some(6), "quota 4 + borrowing 2");
        assert_eq!(l.room(1), Some(8), "the whole cohort");
        assert_eq!(l.room(2), Some(8), "a pure borrower");
        l.hold(0, 6);
        assert!(l.check(0, 1).unwrap_err().to_string().contains("quota 4 + borrowing 2"));
        assert_eq!(l.room(1), Some(2), "a lent two of b's four");
        let e = l.check(2, 3).unwrap_err();
        assert!(matches!(e, OverLimit::Cohort { holds: 6, quotas: 8, .. }), "{e}");
        l.release(0, 6);
        assert_eq!(l.room(2), Some(8));
    }

    #[test]
    fn unknown_tenants_and_zero_asks_pass() {
        let mut l = Ledger::new(vec![tenant("a", Some(0), None, None)]);
        assert!(l.check(7, 100).is_ok());
        assert!(l.check(0, 0).is_ok());
        l.hold(7, 3);
        l.release(0, 3);
        assert_eq!(l.held(0), 0);
        assert!(l.limits_anything());
        assert!(!Ledger::new(vec![tenant("x", None, None, Some("c"))]).limits_anything());
    }

    #[test]
    fn usable_demand_leaves_out_what_the_tenant_could_never_hold() {
        let capped = tenant("a", Some(6), None, None);
        assert_eq!(capped.usable_demand(2, [2, 2], 64), 6, "within its limit: all of it");
        assert_eq!(capped.usable_demand(0, [8, 2], 64), 2, "an 8-GPU job can never run under a limit of 6");
        assert_eq!(capped.usable_demand(4, [4, 4], 64), 6, "no more than its limit in all");
        assert_eq!(capped.usable_demand(7, [], 64), 7, "what it holds counts, even past its limit");
        let free = tenant("b", None, None, None);
        assert_eq!(free.usable_demand(0, [16, 4], 8), 4, "a job larger than the capacity is left out");
        assert_eq!(free.usable_demand(u64::MAX, [u64::MAX], u64::MAX), u64::MAX, "no overflow");
    }

    #[test]
    fn entitlements_are_water_filled_by_weight_up_to_each_demand() {
        let close = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9);
        assert!(close(&entitled(8, &[3.0, 1.0], &[10, 10]), &[6.0, 2.0]));
        assert!(close(&entitled(8, &[1.0, 1.0, 1.0], &[1, 10, 10]), &[1.0, 3.5, 3.5]));
        assert!(close(&entitled(8, &[1.0, 1.0], &[2, 3]), &[2.0, 3.0]), "every demand met");
        assert!(close(&entitled(8, &[5.0, 1.0], &[0, 10]), &[0.0, 8.0]), "no demand, no entitlement");
    }
}
