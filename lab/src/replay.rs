//! Replay above the loop: run any policy over a recording ([`wasmsched_sim::playback`] plays
//! it back as a backend) and diff its decisions against the ones that were taken. A policy
//! is a pure function of its snapshots, so the same policy gives the same decisions, bit for
//! bit.

use std::path::Path;
use std::time::Duration;

use wasmsched_core::bindings::wit;
use wasmsched_loop::budget::BudgetConfig;
use wasmsched_loop::control::{self, Driver, LoopConfig, Policies, Tick};
use wasmsched_loop::record::{self, RecordError};
use wasmsched_runtime::Runtime;
use wasmsched_runtime::supervise::Supervised;
use wasmsched_sim::playback::Playback;

/// A recording opened for playback: its ticks as a backend, and the loop it was made with.
pub struct Recording {
    /// The ticks, played back through the loop.
    pub backend: Playback,
    /// The recorded loop's tick, and the disruption budget it went under (none for a
    /// recording made before hosts had one), so that a replay refuses what the run refused.
    pub config: LoopConfig,
}

impl Recording {
    /// Read the recording at `path`.
    pub fn open(path: &Path) -> Result<Recording, RecordError> {
        let (header, ticks) = record::read_recording(path)?;
        let budget = header.budget.unwrap_or_else(BudgetConfig::off);
        let config = LoopConfig { tick: Duration::from_millis(header.tick_ms), budget, ..LoopConfig::default() };
        Ok(Recording { backend: Playback::new(ticks), config })
    }
}

/// One tick whose decisions differ.
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    /// The tick's number.
    pub tick: u64,
    /// What was done then (None: the policy was not asked).
    pub recorded: Option<Vec<wit::Action>>,
    /// What the replayed policy decided (None: it was not asked).
    pub replayed: Option<Vec<wit::Action>>,
}

/// What a replay found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReplayReport {
    /// Ticks played.
    pub ticks: u64,
    /// Ticks on which the recording or the replay decided.
    pub compared: u64,
    /// Of those, ticks with identical actions (reasons included).
    pub identical: u64,
    /// Recorded ticks that fell back (a deadline on the live host may not recur).
    pub recorded_fallbacks: u64,
    /// The ticks that differ, in order.
    pub differences: Vec<Difference>,
}

impl ReplayReport {
    /// True when every compared tick is identical.
    pub fn is_identical(&self) -> bool {
        self.differences.is_empty()
    }
}

struct Collect<'a> {
    policy: &'a mut Supervised,
    decided: Vec<Option<Vec<wit::Action>>>,
}

impl Driver for Collect<'_> {
    fn policies(&mut self) -> Policies<'_> {
        Policies { active: Some(&mut *self.policy), shadows: Vec::new(), split: None }
    }

    fn record(&mut self, tick: Tick<'_>) {
        self.decided.push(tick.active.map(|a| a.outcome.actions));
    }
}

/// Run `policy` over the recording through the one loop and diff its decisions against the
/// recorded ones.
pub fn replay(rt: &Runtime, recording: &mut Recording, policy: &mut Supervised) -> ReplayReport {
    let mut driver = Collect { policy, decided: Vec::new() };
    let replay = &mut recording.backend;
    let summary = control::drive(replay, &mut driver, rt, &recording.config);
    let mut report = ReplayReport { ticks: summary.ticks, ..ReplayReport::default() };
    for (i, (recorded, replayed)) in replay.recorded().iter().zip(driver.decided).enumerate() {
        let recorded_actions = recorded.as_ref().map(|d| d.actions.clone());
        if recorded_actions.is_none() && replayed.is_none() {
            continue;
        }
        report.compared += 1;
        report.recorded_fallbacks += u64::from(recorded.as_ref().is_some_and(|d| d.fallback));
        if recorded_actions == replayed {
            report.identical += 1;
        } else {
            report.differences.push(Difference { tick: i as u64 + 1, recorded: recorded_actions, replayed });
        }
    }
    report
}
