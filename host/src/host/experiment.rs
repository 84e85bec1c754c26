//! The `[experiment]` on the live host: the ledger of a switchback, the arm of the block now,
//! and what the status and the audit log show of it.

use wasmsched_core::world::World;
use wasmsched_loop::experiment::{Block, ExperimentConfig, ExperimentEvent, Ledger};

use super::{HostDriver, Slot};
use crate::config::Role;
use crate::status::ExperimentStatus;

/// The role `slot` serves in now: its configured one, or while an experiment runs, active for
/// the block's arm (for every arm, in a split) and shadow for every other policy.
pub(super) fn serving_role(experiment: Option<&LiveExperiment>, slot: &Slot) -> Role {
    let Some(e) = experiment.filter(|e| e.ended.is_none()) else { return slot.config.role };
    let config = e.ledger.config();
    let arm = match config.is_split() {
        true => config.arms.iter().any(|a| **a == *slot.name),
        false => match e.arm() {
            Some(arm) => arm == &*slot.name,
            None => return slot.config.role,
        },
    };
    if arm { Role::Active } else { Role::Shadow }
}

impl HostDriver {
    /// The world as just observed, counted by a running experiment, its status updated.
    pub(super) fn observe_experiment(&mut self, world: &World) {
        let Some(e) = self.experiment.as_mut().filter(|e| e.ended.is_none()) else { return };
        if let Some(event) = e.observed(world) {
            self.event = Some(event);
        }
        let status = e.status();
        self.board.update(|s| s.experiment = Some(status));
    }

    /// End the experiment now: the configured roles serve from the next tick.
    pub(super) fn stop_experiment(&mut self) -> Result<String, String> {
        let Some(e) = self.experiment.as_mut() else { return Err("no [experiment] is configured".into()) };
        let name = e.ledger.config().name.clone();
        if let Some(why) = &e.ended {
            return Err(format!("experiment {name} has already ended: {why}"));
        }
        let why = "stopped through the API".to_string();
        tracing::info!(experiment = %name, "experiment stopped; the configured roles serve again");
        e.ended = Some(why.clone());
        self.event = Some(e.event("stopped", why.clone()));
        let status = e.status();
        self.board.update(|s| s.experiment = Some(status));
        Ok(name)
    }
}

/// A switchback running on the live host.
pub(super) struct LiveExperiment {
    ledger: Ledger,
    /// The block that decides now; None before the first observation.
    block: Option<Block>,
    /// Why it ended (its rule, or a stop); the configured roles serve then.
    ended: Option<String>,
    /// Each arm against the baseline as of the last block's start.
    versus: Vec<wasmsched_loop::experiment::Versus>,
}

impl LiveExperiment {
    pub(super) fn new(config: ExperimentConfig) -> LiveExperiment {
        LiveExperiment { ledger: Ledger::new(config), block: None, ended: None, versus: Vec::new() }
    }

    /// Its config.
    pub(super) fn config(&self) -> &ExperimentConfig {
        self.ledger.config()
    }

    /// A split's config, while it runs: its arms decide side by side.
    pub(super) fn split(&self) -> Option<&ExperimentConfig> {
        Some(self.ledger.config()).filter(|c| c.is_split() && self.ended.is_none())
    }

    /// The arm active now in a switchback, while it runs.
    pub(super) fn arm(&self) -> Option<&str> {
        let block = self.block.filter(|_| self.ended.is_none() && !self.ledger.config().is_split())?;
        Some(&self.ledger.config().arms[block.arm])
    }

    /// An audit event of this experiment at its block now.
    fn event(&self, event: &str, detail: String) -> ExperimentEvent {
        let block = self.block.unwrap_or(Block { index: 0, group: 0, arm: 0, warm: false });
        ExperimentEvent {
            experiment: self.ledger.config().name.clone(),
            event: event.into(),
            block: block.index,
            group: block.group,
            arm: self.arm().map(str::to_string),
            detail,
        }
    }

    fn status(&self) -> ExperimentStatus {
        let config = self.ledger.config();
        ExperimentStatus {
            name: config.name.clone(),
            arms: config.arms.clone(),
            design: config.design,
            assign: config.assign,
            pools: config.pools.clone(),
            active: self.arm().map(str::to_string),
            block: self.block.map_or(0, |b| b.index),
            warm: self.block.is_some_and(|b| b.warm),
            block_s: config.block.as_secs_f64(),
            burn_in_s: config.burn_in.as_secs_f64(),
            groups: self.ledger.groups() as u64,
            versus: self.versus.clone(),
            ended: self.ended.clone(),
        }
    }

    /// The world as just observed: counted, and the block for the tick that starts now. An
    /// event when a block begins (or the experiment concludes by its rule).
    fn observed(&mut self, world: &World) -> Option<ExperimentEvent> {
        if self.ended.is_some() {
            return None;
        }
        self.ledger.observe(world);
        let block = self.ledger.decide_at(world.time_ms());
        let begins = self.block.is_none_or(|b| b.index != block.index);
        self.block = Some(block);
        if !begins {
            return None;
        }
        self.versus = self.ledger.versus();
        let name = &self.ledger.config().name;
        if let Some(why) = self.ledger.concluded() {
            tracing::info!(experiment = %name, %why, "experiment concluded; the configured roles serve again");
            self.ended = Some(why.clone());
            return Some(self.event("concluded", why));
        }
        match self.arm() {
            Some(arm) => tracing::info!(experiment = %name, block = block.index, %arm, "experiment: a block begins"),
            None => {
                tracing::info!(experiment = %name, block = block.index, "experiment: a block begins, every arm deciding")
            }
        }
        Some(self.event("block", String::new()))
    }
}
