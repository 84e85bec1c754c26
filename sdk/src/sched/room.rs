//! Tenants' room as a round's plan leaves it: which queued jobs the host would refuse to place
//! because their tenant is at its limit ([`crate::Ledger`]).

use wasmsched_rules::{Ledger, OverLimit};

use crate::view::{Job, Snapshot};

/// What each tenant holds, kept in step with a round's placements and preemptions.
#[derive(Clone, Debug)]
pub struct TenantRoom {
    ledger: Ledger,
    /// Tenant names in the ledger's order.
    names: Vec<String>,
}

impl TenantRoom {
    /// What every tenant holds now.
    pub fn of(s: &Snapshot<'_>) -> Self {
        TenantRoom { ledger: s.ledger(), names: s.tenants().map(|t| t.name().to_string()).collect() }
    }

    fn index(&self, job: &Job<'_>) -> Option<usize> {
        self.names.iter().position(|n| n == job.tenant())
    }

    /// Why placing queued `job` (the GPUs it asks for) would take its tenant past its limit,
    /// if it would.
    pub fn check(&self, job: &Job<'_>) -> Result<(), OverLimit> {
        self.index(job).map_or(Ok(()), |t| self.ledger.check(t, u64::from(job.gpus_asked())))
    }

    /// Count `job`'s GPUs (those it asks for) to its tenant: it is placed.
    pub fn take(&mut self, job: &Job<'_>) {
        if let Some(t) = self.index(job) {
            self.ledger.hold(t, u64::from(job.gpus_asked()));
        }
    }

    /// Count running `job`'s GPUs (those it holds) off its tenant: it is preempted.
    pub fn release(&mut self, job: &Job<'_>) {
        if let Some(t) = self.index(job) {
            self.ledger.release(t, job.gpus().len() as u64);
        }
    }

    /// The ledger as the plan leaves it.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }
}
