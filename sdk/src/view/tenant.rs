//! Tenants as a policy sees them: each one's weight, quota, borrowing limit and cohort
//! ([`Tenant`]), which tenant a job belongs to ([`super::Job::tenant`]), and what each holds
//! against the limits the host enforces ([`Snapshot::ledger`]).

use wasmsched_rules::{Entitlement, Ledger};

use super::{Snapshot, wit};

/// A tenant (team, queue, virtual cluster) and what it is entitled to.
#[derive(Clone, Copy, Debug)]
pub struct Tenant<'a> {
    index: usize,
    raw: &'a wit::Tenant,
}

impl<'a> Tenant<'a> {
    /// Its index in [`Snapshot::tenants`] (and in [`Snapshot::ledger`]).
    pub fn index(&self) -> usize {
        self.index
    }

    /// Its name.
    pub fn name(&self) -> &'a str {
        &self.raw.name
    }

    /// Its weight against the other tenants' (fair share); the host keeps it above 0.
    pub fn weight(&self) -> f64 {
        self.raw.weight
    }

    /// The GPUs guaranteed to it; None: no quota.
    pub fn quota(&self) -> Option<u32> {
        self.raw.quota_gpus
    }

    /// The most GPUs it may borrow beyond its quota within its cohort; None: as many as the
    /// cohort has idle.
    pub fn borrowing_limit(&self) -> Option<u32> {
        self.raw.borrowing_limit_gpus
    }

    /// Its cohort, the tenants that lend each other their idle quota; None: none.
    pub fn cohort(&self) -> Option<&'a str> {
        (!self.raw.cohort.is_empty()).then_some(self.raw.cohort.as_str())
    }

    /// The most GPUs it may hold by its own entitlement (its cohort may allow fewer); None
    /// when unlimited.
    pub fn limit(&self) -> Option<u64> {
        self.entitlement().limit()
    }

    /// The GPUs it can use now, given what it `held` and what its waiting jobs ask for
    /// (`asks`): jobs that alone ask for more than its limit or than the `capacity` taking
    /// work are left out, and the whole is capped by its limit. Entitlements are shared over
    /// this ([`crate::stats::entitled`]).
    pub fn usable_demand(&self, held: u64, asks: impl IntoIterator<Item = u64>, capacity: u64) -> u64 {
        self.entitlement().usable_demand(held, asks, capacity)
    }

    /// Its limits as the shared rules read them.
    pub fn entitlement(&self) -> Entitlement {
        Entitlement {
            name: self.raw.name.clone(),
            quota: self.raw.quota_gpus,
            borrowing_limit: self.raw.borrowing_limit_gpus,
            cohort: self.cohort().map(String::from),
        }
    }
}

impl<'a> Snapshot<'a> {
    /// Every tenant, declared ones first; every job's tenant is among them.
    pub fn tenants(&self) -> impl ExactSizeIterator<Item = Tenant<'a>> + 'a {
        self.nodes.tenants.iter().enumerate().map(|(index, raw)| Tenant { index, raw })
    }

    /// Tenant `name`, if there is one.
    pub fn tenant(&self, name: &str) -> Option<Tenant<'a>> {
        self.tenants().find(|t| t.name() == name)
    }

    /// Each tenant's limits and the GPUs its running jobs hold now, indexed as
    /// [`Self::tenants`]: `ledger.room(t)` is how many more GPUs tenant `t` may take before the
    /// host refuses a placement.
    pub fn ledger(&self) -> Ledger {
        let held = self.jobs().filter_map(|job| Some((self.tenant_index(job.tenant())?, job.gpus().len() as u64)));
        Ledger::holding(self.tenants().map(|t| t.entitlement()).collect(), held)
    }

    /// The index of tenant `name` in [`Self::tenants`].
    pub fn tenant_index(&self, name: &str) -> Option<usize> {
        self.nodes.tenants.iter().position(|t| t.name == name)
    }
}
