//! Where containers live. A backend observes them into the host's [`Telemetry`] and applies
//! validated actions to them; the loop in [`crate::control`] is the same for every backend.
//! Backends know the telemetry types and never the policy runtime: [`sim`] (the simulator),
//! [`docker`] (real containers), [`kubernetes`] (pods on a cluster) and [`replay`] (a recording
//! played back).

pub mod carried;
pub mod docker;
pub mod kubernetes;
pub mod playback;
pub mod progress;
pub mod sim;

use crate::bindings::wit;
use crate::snapshot::Telemetry;

/// Why an action could not be put into force.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("job {job}: {reason}")]
pub struct ApplyError {
    /// The job acted on.
    pub job: u32,
    /// What went wrong.
    pub reason: String,
}

/// One place a backend reaches (a Docker Engine, a Kubernetes apiserver), as the status shows it.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Endpoint {
    /// What it is: `engine` (a Docker Engine) or `apiserver` (a Kubernetes apiserver).
    #[serde(default)]
    pub kind: String,
    /// Its address.
    pub name: String,
    /// Whether it answered at the last observation.
    pub up: bool,
    /// The jobs managed there.
    pub jobs: u32,
    /// How long it has not answered, milliseconds; None while it answers.
    pub down_for_ms: Option<u64>,
}

/// Who starts queued jobs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Placement {
    /// The backend's default placement: first come, first served, first fit, as soon as a
    /// job fits (for a policy that does not place, or one that is failing).
    #[default]
    Backend,
    /// The active policy, through its `place` actions.
    Policy,
}

/// A place where jobs run: the simulator, real containers ([`docker`]), a replayed recording
/// ([`replay`]).
pub trait Backend {
    /// Who starts queued jobs from now on; the loop says so before every observation.
    fn set_placement(&mut self, _by: Placement) {}

    /// Bring `world` up to `until_ms` on the backend's clock: new jobs, ended jobs, measured
    /// use, progress records. Returns false once nothing is left to run.
    fn observe(&mut self, world: &mut Telemetry, until_ms: u64) -> bool;

    /// Put validated actions into force at the world's current time. Returns the ones that
    /// failed (a container that vanished, say); the rest took effect.
    fn apply(&mut self, actions: &[wit::Action], world: &mut Telemetry) -> Vec<ApplyError>;

    /// The places it reaches and whether they answer, for the status; none for a backend that
    /// reaches nothing outside the process.
    fn endpoints(&self) -> Vec<Endpoint> {
        Vec::new()
    }
}
