//! The states kept for the next leader: a version's state restored when this host takes the
//! lead, and the line of versions a state was carried away from.

use std::time::Instant;

use wasmsched_loop::record;
use wasmsched_runtime::Runtime;

use super::{Checkpoint, HostDriver, ReloadOutcome, Serving, Slot, short};

impl HostDriver {
    /// Start policy `c.policy` from the state the last leader kept: in the version that saved
    /// it when this host has it (serving, or the one a rollback brings back: the last leader
    /// had rolled back), else in the serving version, as a hot swap hands a state on. A policy
    /// whose resource names its version keeps that version and takes the state into it. A state
    /// the version refuses is dropped and the version starts afresh.
    pub(super) fn restore_one(&mut self, rt: &Runtime, c: Checkpoint) {
        let serves = |s: &Slot| s.name == c.policy && (s.current.is_some() || s.previous.is_some());
        if !self.slots.iter().any(serves) {
            // Not here yet (a resource still being fetched): it starts from this state when it is.
            self.unrestored.retain(|k| k.policy != c.policy);
            self.unrestored.push(c);
            return;
        }
        let Some(slot) = self.slots.iter_mut().find(|s| s.name == c.policy) else { return };
        let digest_of = |s: &Option<Serving>| s.as_ref().map(|s| s.sup.policy().digest().to_string());
        if !slot.from_resource
            && digest_of(&slot.current).as_deref() != Some(&c.sha256)
            && digest_of(&slot.previous).as_deref() == Some(&c.sha256)
        {
            std::mem::swap(&mut slot.current, &mut slot.previous);
        }
        let Some(serving) = slot.current.as_mut() else { return };
        let digest = serving.sup.policy().digest().to_string();
        let (bytes, age_s) = (c.state.len(), record::wall_ms().saturating_sub(c.saved_unix_ms) / 1000);
        let from = if digest == c.sha256 { "its own".to_string() } else { format!("version {}'s", short(&c.sha256)) };
        let max = wasmsched_runtime::supervise::MAX_SAVED_STATE_BYTES;
        let started = if bytes > max {
            Err(format!("{bytes} bytes, over the {max} a state may carry"))
        } else if digest != c.sha256 && c.left.contains(&digest) {
            Err("that state's line had left this version, which serves again since: a rollback".into())
        } else {
            serving.sup.start(rt, Some(c.state)).map_err(|e| wasmsched_core::error_chain(&e))
        };
        let detail = match started {
            Ok(()) => {
                serving.left = if digest == c.sha256 { c.left } else { line(&c.left, &c.sha256) };
                tracing::info!(policy = %c.policy, sha256 = %digest, bytes, tick = c.tick, age_s, "took the lead: policy restarted from the state the last leader kept");
                format!("restarted from {from} state kept at tick {} ({bytes} bytes, {age_s} s old)", c.tick)
            }
            Err(why) => {
                tracing::warn!(policy = %c.policy, sha256 = %digest, reason = %why, "took the lead: the policy refused the kept state; it starts afresh");
                let fresh = serving.sup.start(rt, None);
                format!(
                    "refused {from} kept state ({why}); {}",
                    if fresh.is_ok() { "started afresh" } else { "and cannot start afresh" }
                )
            }
        };
        self.report(&c.policy, ReloadOutcome::Restored, Some(digest), detail, Instant::now(), None);
    }
}

/// A state's line after it leaves version `digest`: the versions it had left, and that one.
pub(super) fn line(left: &[String], digest: &str) -> Vec<String> {
    let mut line: Vec<String> = left.iter().filter(|d| *d != digest).cloned().collect();
    line.push(digest.to_string());
    line.drain(..line.len().saturating_sub(wasmsched_core::replicas::LINE_KEPT));
    line
}
