//! The audit log's line for a tick.

use std::sync::Arc;

use wasmsched_loop::control::Tick;
use wasmsched_loop::record::{self, AuditDecision, AuditLine, Refused};
use wasmsched_loop::shadow::{self, Agreement};

use crate::journal::ShadowSeen;

use super::HostDriver;

impl HostDriver {
    /// The tick's line in the audit log, where it has one: the decisions (each shadow's
    /// agreement with the active counted), the jobs rescued, the policies' changes. How each
    /// shadow compared, in `tick.shadows`' order.
    pub(super) fn write_audit(&mut self, tick: &Tick<'_>) -> Vec<ShadowSeen> {
        let time_ms = tick.world.time_ms();
        if !tick.asked && tick.rescued.is_empty() && self.changes.is_empty() && self.event.is_none() {
            return Vec::new();
        }
        let seen = self.seen.clone().unwrap_or_else(|| Arc::new(tick.world.clone()));
        let applied_actions = tick.applied_actions();
        let mut shadows = Vec::with_capacity(tick.shadows.len());
        let mut compared = Vec::with_capacity(tick.shadows.len());
        for d in &tick.shadows {
            let diff = shadow::compare(&applied_actions, &d.outcome.actions, &seen);
            let mut agreement = Agreement::default();
            if let Some(slot) = self.slots.iter_mut().find(|s| *s.name == *d.policy) {
                slot.agreement.add(&diff);
                agreement = slot.agreement;
            }
            compared.push(ShadowSeen { agreement, agrees: diff.agree });
            let mut line = AuditDecision::of(d);
            line.agrees = Some(diff.agree);
            shadows.push(line);
        }
        let active = tick.active.as_ref().map(|a| {
            let mut line = AuditDecision::of(a);
            if a.outcome.pending != self.last_pending {
                self.last_pending.clone_from(&a.outcome.pending);
                line.pending = Some(a.outcome.pending.clone());
            }
            line.not_applied = tick.apply_errors.iter().map(Refused::failed).collect();
            line
        });
        // A split's arms: each line holds the failures of its own jobs' actions.
        let split = self.experiment.as_ref().map(|e| e.config()).filter(|c| c.is_split());
        let owner = |job| split.and_then(|c| Some(c.arm_of(tick.world.spec(job)?)));
        let arms = tick
            .arms
            .iter()
            .map(|d| {
                let mut line = AuditDecision::of(d);
                let k = split.and_then(|c| c.arms.iter().position(|a| **a == *d.policy));
                let own = |e: &&wasmsched_core::backend::ApplyError| {
                    d.outcome.actions.iter().any(|a| a.job == e.job) || (k.is_some() && owner(e.job) == k)
                };
                line.not_applied = tick.apply_errors.iter().filter(own).map(Refused::failed).collect();
                line
            })
            .collect();
        if let Some(audit) = &mut self.audit {
            let line = AuditLine {
                tick: tick.number,
                time_ms,
                wall_ms: record::wall_ms(),
                active,
                shadows,
                arms,
                rescued: tick.rescued.clone(),
                changes: std::mem::take(&mut self.changes),
                experiment: self.event.take(),
            };
            if let Err(e) = audit.write(&line) {
                self.write_failed(&e);
            }
        }
        self.changes.clear();
        self.event = None;
        compared
    }
}
