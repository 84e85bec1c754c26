//! The [`Policy`] trait an author implements, and the [`Runner`] that drives one: it turns
//! the contract's deltas into a complete [`Snapshot`], calls the policy and turns its
//! [`Decision`] back. The export glue and native tests use the same runner.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::bindings::wasmsched::policy::types as wit;
use crate::decision::Decision;
use crate::units::Seconds;
use crate::view::{JobTable, NodeTable, Snapshot};

pub use wit::PolicyError;

/// A scheduling policy.
pub trait Policy: Sized {
    /// The policy's own config table (from the host's TOML, delivered as JSON). Use
    /// `#[serde(deny_unknown_fields)]` and defaults for every constant.
    type Config: DeserializeOwned;

    /// Build the policy from its config; refuse a bad one with [`PolicyError::InvalidConfig`].
    fn new(config: Self::Config) -> Result<Self, PolicyError>;

    /// Whether it places queued jobs itself (`Action::place`). When false, the host's default
    /// placement (first come, first served, first fit) starts them and the policy tunes
    /// what runs.
    const PLACES: bool = false;

    /// Decide what to do on this tick.
    fn decide(&mut self, snapshot: &Snapshot<'_>) -> Result<Decision, PolicyError>;

    /// What a newer version should start from after a hot swap ([`crate::state::encode`]).
    fn save_state(&self) -> Vec<u8> {
        Vec::new()
    }

    /// Take over the state an older version saved ([`crate::state::decode`]). Called only
    /// with a non-empty state.
    fn restore_state(&mut self, _saved: &[u8]) -> Result<(), PolicyError> {
        Ok(())
    }
}

/// The config of a policy that has none: an empty table, anything else refused.
#[derive(Clone, Copy, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoConfig {}

/// Drives one policy: keeps the job table and converts to and from the contract's types.
pub struct Runner<P> {
    policy: P,
    table: JobTable,
    nodes: NodeTable,
    time: Seconds,
    interval: Seconds,
}

impl<P: Policy> Runner<P> {
    /// What `init` does: parse the config JSON (empty means `{}`), build the policy, hand it
    /// the saved state.
    pub fn init(config_json: &str, saved_state: Option<&[u8]>) -> Result<Self, PolicyError> {
        let json = if config_json.trim().is_empty() { "{}" } else { config_json };
        let config: P::Config = serde_json::from_str(json).map_err(|e| PolicyError::InvalidConfig(e.to_string()))?;
        let mut policy = P::new(config)?;
        if let Some(saved) = saved_state.filter(|s| !s.is_empty()) {
            policy.restore_state(saved)?;
        }
        Ok(Self::from_policy(policy))
    }

    /// A runner around a policy built natively.
    pub fn from_policy(policy: P) -> Self {
        Runner {
            policy,
            table: JobTable::default(),
            nodes: NodeTable::default(),
            time: Seconds(0.0),
            interval: Seconds(0.0),
        }
    }

    /// What `decide` does.
    pub fn decide_raw(&mut self, snapshot: wit::Snapshot) -> Result<wit::Decision, PolicyError> {
        self.decide(snapshot).map(Decision::into_raw)
    }

    /// Fold the tick's delta into the job table and ask the policy.
    pub fn decide(&mut self, mut snapshot: wit::Snapshot) -> Result<Decision, PolicyError> {
        let malformed = |e| PolicyError::Failed(format!("the host sent a malformed snapshot: {e}"));
        self.nodes.apply(&mut snapshot).map_err(malformed)?;
        let applied = self.table.apply(snapshot);
        self.nodes.count_holders(&self.table.gpus);
        (self.time, self.interval) = applied.map_err(malformed)?;
        let view = Snapshot { time: self.time, interval: self.interval, nodes: &self.nodes, table: &self.table };
        self.policy.decide(&view)
    }

    /// The world as the policy saw it on the last call.
    pub fn view(&self) -> Snapshot<'_> {
        Snapshot { time: self.time, interval: self.interval, nodes: &self.nodes, table: &self.table }
    }

    /// What `save-state` does.
    pub fn save_state(&self) -> Vec<u8> {
        self.policy.save_state()
    }

    /// The policy itself, for tests that inspect it.
    pub fn policy(&self) -> &P {
        &self.policy
    }
}

/// Encoding of saved state, so that authors never handle bytes or JSON themselves.
pub mod state {
    use super::*;

    /// Encode a policy's state for [`Policy::save_state`].
    pub fn encode<T: Serialize>(state: &T) -> Vec<u8> {
        serde_json::to_vec(state).unwrap_or_default()
    }

    /// Decode a state saved by [`encode`], for [`Policy::restore_state`].
    pub fn decode<T: DeserializeOwned>(saved: &[u8]) -> Result<T, PolicyError> {
        serde_json::from_slice(saved).map_err(|e| PolicyError::InvalidState(e.to_string()))
    }
}

/// The export glue's plumbing; used by [`crate::export_policy!`], not by authors.
#[doc(hidden)]
pub mod glue {
    use std::cell::RefCell;
    use std::thread::LocalKey;

    use super::*;

    /// Where the exported component keeps its one runner.
    pub type Slot<P> = LocalKey<RefCell<Option<Runner<P>>>>;

    /// `init`: (re)build the runner, and say what the policy does.
    pub fn init<P: Policy>(
        slot: &'static Slot<P>,
        config: String,
        saved: Option<Vec<u8>>,
    ) -> Result<wit::Abilities, PolicyError> {
        let runner = Runner::<P>::init(&config, saved.as_deref())?;
        slot.with(|s| *s.borrow_mut() = Some(runner));
        Ok(wit::Abilities { places: P::PLACES })
    }

    /// `decide`: refuses politely when `init` has not run.
    pub fn decide<P: Policy>(slot: &'static Slot<P>, snapshot: wit::Snapshot) -> Result<wit::Decision, PolicyError> {
        slot.with(|s| match s.borrow_mut().as_mut() {
            Some(runner) => runner.decide_raw(snapshot),
            None => Err(PolicyError::Failed("decide called before init".into())),
        })
    }

    /// `save-state`: empty when `init` has not run.
    pub fn save_state<P: Policy>(slot: &'static Slot<P>) -> Vec<u8> {
        slot.with(|s| s.borrow().as_ref().map(Runner::save_state).unwrap_or_default())
    }
}
