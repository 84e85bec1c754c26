//! The world's tenants: those declared (the host's config, a scenario) and those jobs name
//! without a declaration (weight 1, no quota), each job's tenant kept as an index, and what
//! each holds against its limits ([`wasmsched_rules::tenants`]).

use wasmsched_rules::{Entitlement, Ledger, NodeId};

use super::World;
use crate::bindings::wit;

/// The tenant of a job that names none.
pub const DEFAULT_TENANT: &str = "default";

/// A tenant nobody declared: weight 1, no quota, no cohort.
pub fn undeclared(name: &str) -> wit::Tenant {
    wit::Tenant { name: name.into(), weight: 1.0, quota_gpus: None, borrowing_limit_gpus: None, cohort: String::new() }
}

impl World {
    /// The tenants, declared ones first, then those jobs named undeclared, in order of
    /// appearance.
    pub fn tenants(&self) -> &[wit::Tenant] {
        &self.tenants
    }

    /// Declare the tenants (replacing earlier declarations); tenants that live jobs name and
    /// `declared` does not stay, undeclared.
    pub fn set_tenants(&mut self, declared: Vec<wit::Tenant>) {
        if self.tenants[..self.declared] == declared[..] {
            return;
        }
        let old = std::mem::replace(&mut self.tenants, declared);
        self.declared = self.tenants.len();
        self.tenants_version += 1;
        for state in &mut self.states {
            let name = &old[state.tenant as usize].name;
            state.tenant = match self.tenants.iter().position(|t| &t.name == name) {
                Some(i) => i as u32,
                None => {
                    self.tenants.push(undeclared(name));
                    self.tenants.len() as u32 - 1
                }
            };
        }
    }

    /// The index of tenant `name`, added undeclared when new.
    pub(super) fn tenant_index(&mut self, name: &str) -> u32 {
        match self.tenants.iter().position(|t| t.name == name) {
            Some(i) => i as u32,
            None => {
                self.tenants.push(undeclared(name));
                self.tenants_version += 1;
                self.tenants.len() as u32 - 1
            }
        }
    }

    /// Whether a cursor that last saw tenants at `version` must be sent them again.
    pub(super) fn tenants_changed(&self, version: Option<u64>) -> bool {
        version != Some(self.tenants_version)
    }

    pub(super) fn tenants_version(&self) -> u64 {
        self.tenants_version
    }

    /// Each tenant's limits and the GPUs its running jobs hold, indexed as [`Self::tenants`].
    pub fn ledger(&self) -> Ledger {
        let held = self.jobs().map(|(_, state)| (state.tenant as usize, state.gpus.len() as u64));
        Ledger::holding(self.tenants.iter().map(entitlement).collect(), held)
    }

    /// The name of the tenant at `index`.
    pub fn tenant_name(&self, index: u32) -> &str {
        self.tenants.get(index as usize).map_or(DEFAULT_TENANT, |t| &t.name)
    }
}

/// What one tenant's jobs hold and ask for now ([`World::tenant_loads`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TenantLoad {
    /// GPUs its running jobs hold.
    pub gpus: u64,
    /// GPUs its queued jobs ask for.
    pub gpus_queued: u64,
    /// Its running jobs.
    pub jobs_running: u64,
    /// Its queued jobs.
    pub jobs_queued: u64,
    /// The fewest GPUs a queued GPU job of it asks for (u64::MAX when none waits).
    pub smallest_ask: u64,
    /// The GPUs it can use now, over which entitlements are shared
    /// ([`Entitlement::usable_demand`]): jobs it could never run left out.
    pub usable: u64,
}

impl World {
    /// Per tenant, in [`World::tenants`] order, what its jobs hold and ask for now.
    pub fn tenant_loads(&self) -> Vec<TenantLoad> {
        self.tenant_loads_of(|_| true, self.gpus_taking_work())
    }

    /// [`World::tenant_loads`] over the jobs `keep` picks, on `capacity` GPUs (one arm of a
    /// split experiment: its own jobs, on the GPUs the other arms do not hold).
    pub fn tenant_loads_of(&self, keep: impl Fn(&wit::JobSpec) -> bool, capacity: u64) -> Vec<TenantLoad> {
        let mut loads = vec![TenantLoad { smallest_ask: u64::MAX, ..TenantLoad::default() }; self.tenants.len()];
        let mut asks: Vec<Vec<u64>> = vec![Vec::new(); self.tenants.len()];
        for (spec, s) in self.all_jobs().filter(|(spec, _)| keep(spec)) {
            let Some(l) = loads.get_mut(s.tenant as usize) else { continue };
            if s.is_running() {
                l.gpus += s.gpus.len() as u64;
                l.jobs_running += 1;
            } else {
                l.gpus_queued += u64::from(spec.gpus);
                l.jobs_queued += 1;
                if spec.gpus > 0 {
                    l.smallest_ask = l.smallest_ask.min(u64::from(spec.gpus));
                    asks[s.tenant as usize].push(u64::from(spec.gpus));
                }
            }
        }
        for ((l, t), asks) in loads.iter_mut().zip(&self.tenants).zip(asks) {
            l.usable = entitlement(t).usable_demand(l.gpus, asks, capacity);
        }
        loads
    }

    /// Each tenant's entitlement now, in [`World::tenants`] order, given `loads`
    /// ([`World::tenant_loads`]): the GPUs taking work shared by weight, max-min fair, up to
    /// each tenant's usable demand.
    pub fn entitlements(&self, loads: &[TenantLoad]) -> Vec<f64> {
        self.entitlements_on(loads, self.gpus_taking_work())
    }

    /// [`World::entitlements`] of `capacity` GPUs.
    pub fn entitlements_on(&self, loads: &[TenantLoad], capacity: u64) -> Vec<f64> {
        let weights: Vec<f64> = self.tenants.iter().map(|t| t.weight).collect();
        let demand: Vec<u64> = loads.iter().map(|l| l.usable).collect();
        wasmsched_rules::tenants::entitled(capacity, &weights, &demand)
    }

    /// The GPUs of the nodes that take work.
    pub fn gpus_taking_work(&self) -> u64 {
        let nodes = self.nodes.iter().enumerate();
        nodes.filter(|(i, _)| !self.is_node_down(NodeId(*i as u32))).map(|(_, n)| n.gpu_memory_bytes.len() as u64).sum()
    }
}

/// A tenant's limits as the rules read them.
pub fn entitlement(t: &wit::Tenant) -> Entitlement {
    Entitlement {
        name: t.name.clone(),
        quota: t.quota_gpus,
        borrowing_limit: t.borrowing_limit_gpus,
        cohort: (!t.cohort.is_empty()).then(|| t.cohort.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::{Cursor, JobId, sample};

    #[test]
    fn tenants_cross_on_a_resync_and_when_a_job_names_a_new_one() {
        let mut w = World::new();
        w.set_tenants(vec![wit::Tenant { weight: 3.0, ..undeclared("vision") }]);
        let mut cursor = Cursor::fresh();
        let names =
            |s: &wit::Snapshot| s.tenants.as_ref().map(|t| t.iter().map(|t| t.name.clone()).collect::<Vec<_>>());
        assert_eq!(names(&w.snapshot_for(&mut cursor)), Some(vec!["vision".to_string()]), "resync");
        w.enqueue_job(wit::JobSpec { tenant: "vision".into(), ..sample::job_spec(0) });
        assert_eq!(names(&w.snapshot_for(&mut cursor)), None, "no new tenant");
        let h = w.enqueue_job(wit::JobSpec { tenant: String::new(), ..sample::job_spec(1) });
        assert_eq!(w.spec(h).unwrap().tenant, DEFAULT_TENANT, "a job naming none is default's");
        assert_eq!(names(&w.snapshot_for(&mut cursor)), Some(vec!["vision".into(), "default".into()]));
        // Declaring again keeps the jobs' tenants, and undeclared ones stay.
        w.set_tenants(vec![undeclared("speech"), wit::Tenant { weight: 3.0, ..undeclared("vision") }]);
        let tenant_of = |h: u32| w.tenant_name(w.state(JobId(h)).unwrap().tenant).to_string();
        assert_eq!((tenant_of(0), tenant_of(1)), ("vision".into(), "default".into()));
        assert_eq!(names(&w.snapshot_for(&mut cursor)).unwrap(), ["speech", "vision", "default"]);
    }
}
