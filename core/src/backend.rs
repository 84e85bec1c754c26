//! What every backend is to the loop: the [`Backend`] trait (observe into the [`World`], apply
//! validated actions), what only some backends have ([`DefaultPlacement`], [`Progress`],
//! [`Status`]), who starts queued jobs ([`Placer`]), how a backend's own `[backend]`
//! table is read ([`Settings`]) and what it builds ([`Built`]). The loop, above, is the same for
//! every backend; backends know the world's types and never the policy runtime.

use std::fmt;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use wasmsched_rules::JobId;

use crate::bindings::wit;
use crate::replicas::Replicas;
use crate::world::World;

/// How fast the backend's clock runs against the wall clock.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Speed {
    /// One backend second a wall second.
    #[default]
    RealTime,
    /// This many backend seconds a wall second.
    Factor(f64),
    /// No waiting: the next tick as soon as the last is done.
    Max,
}

impl Speed {
    /// The wall time one backend interval takes; None for [`Speed::Max`].
    pub fn wall(&self, backend: Duration) -> Option<Duration> {
        match self {
            Speed::RealTime => Some(backend),
            Speed::Factor(f) => Some(Duration::try_from_secs_f64(backend.as_secs_f64() / f).unwrap_or(Duration::MAX)),
            Speed::Max => None,
        }
    }
}

impl fmt::Display for Speed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Speed::RealTime => f.write_str("real-time"),
            Speed::Factor(x) => write!(f, "{x}x"),
            Speed::Max => f.write_str("max"),
        }
    }
}

impl<'de> Deserialize<'de> for Speed {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Word(String),
            Number(f64),
        }
        let bad = || serde::de::Error::custom("speed is \"real-time\", \"max\", or a factor above 0 such as 60");
        match Raw::deserialize(d)? {
            Raw::Word(w) if w == "real-time" => Ok(Speed::RealTime),
            Raw::Word(w) if w == "max" => Ok(Speed::Max),
            Raw::Number(x) if x.is_finite() && x > 0.0 => Ok(Speed::Factor(x)),
            _ => Err(bad()),
        }
    }
}

/// Why an action could not be put into force.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("job {job}: {reason}")]
pub struct ApplyError {
    /// The job acted on.
    pub job: JobId,
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
    /// Requests the host has made to it since it started, where the backend counts them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// Actions sent to it and not yet answered, where the backend sends them without waiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<u64>,
}

/// Work a backend holds outside the world, and why: a pod group not yet whole, say, which no
/// policy could place. The status shows it beside the queue.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Held {
    /// Its name (a pod group's).
    pub name: String,
    /// Why it is held, in a few words ("2 of 3 pods exist").
    pub reason: String,
}

/// Who starts queued jobs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Placer {
    /// The backend's default placement: first come, first served, first fit, as soon as a
    /// job fits (for a policy that does not place, or one that is failing).
    #[default]
    Backend,
    /// The active policy, through its `place` actions.
    Policy,
}

/// A place where jobs run: the simulator, real containers, pods, a recording played back.
///
/// The loop's side is four methods: who places ([`Backend::set_placer`]), [`Backend::observe`],
/// [`Backend::apply`] and [`Backend::settled`]. What only some backends have is reached through
/// an accessor that says None where it has none: a default placement of its own
/// ([`Backend::placement`]), progress it can tell beyond the jobs' reports
/// ([`Backend::progress`]), places it reaches and jobs it holds for the status
/// ([`Backend::status`]), and replicas ([`Backend::replicas`]).
pub trait Backend {
    /// Who starts queued jobs from now on; the loop says so before every observation.
    fn set_placer(&mut self, _by: Placer) {}

    /// Bring `world` up to `until_ms` on the backend's clock: new jobs, ended jobs, measured
    /// use, progress records. Returns false once nothing is left to run.
    fn observe(&mut self, world: &mut World, until_ms: u64) -> bool;

    /// Put validated actions into force at the world's current time. Returns the ones that
    /// failed (a container that vanished, say); the rest took effect.
    fn apply(&mut self, actions: &[wit::Action], world: &mut World) -> Vec<ApplyError>;

    /// The actions of earlier ticks' [`Backend::apply`] that were still in flight when it
    /// returned (counted as applied then) and failed since; each is returned once. A backend
    /// that waits for every action has none.
    fn settled(&mut self) -> Vec<ApplyError> {
        Vec::new()
    }

    /// Its default placement ([`DefaultPlacement`]); None for a backend that starts nothing of
    /// its own (a recording played back).
    fn placement(&mut self) -> Option<&mut dyn DefaultPlacement> {
        None
    }

    /// What it tells of the jobs' progress beyond their own reports ([`Progress`]); None for a
    /// backend that knows only what the jobs report.
    fn progress(&self) -> Option<&dyn Progress> {
        None
    }

    /// What the status shows of it ([`Status`]); None for a backend that reaches nothing
    /// outside the process and holds no job outside the world.
    fn status(&self) -> Option<&dyn Status> {
        None
    }

    /// Its side as one of several replicas of the host that share it ([`Replicas`]: who leads,
    /// and the policies' states kept for the next leader); None for a backend that runs no
    /// replicas, which always acts.
    fn replicas(&self) -> Option<&dyn Replicas> {
        None
    }

    /// The same, to act on: keep states, read them, step down.
    fn replicas_mut(&mut self) -> Option<&mut dyn Replicas> {
        None
    }

    /// Whether this host may act now: it leads, or it runs no replicas.
    fn leads(&self) -> bool {
        self.replicas().is_none_or(|r| r.leads())
    }
}

/// A backend's own placement: first come, first served, first fit, as soon as a job fits. It
/// starts queued jobs while no policy places ([`Placer::Backend`]), and the watchdog judges a
/// placing policy against it and rescues the jobs that policy left waiting.
pub trait DefaultPlacement {
    /// The queued jobs it would start now, in the order it would start them, without starting
    /// any: what a placing policy is judged against (the watchdog's stall rule).
    fn startable(&self, world: &World) -> Vec<JobId>;

    /// Start queued `jobs` now, in the order given, each where it fits (the watchdog's rescue
    /// of jobs a placing policy left waiting). Returns those started; the others stay queued.
    fn rescue(&mut self, jobs: &[JobId], world: &mut World) -> Vec<JobId>;
}

/// What a backend tells of the jobs' progress beyond their reports. Every method has the
/// answer of a backend that knows only the reports.
pub trait Progress {
    /// When any job last did work, on the backend's clock (ms), where the backend can tell
    /// (the simulator can; a live one cannot tell a container at work from one stuck). The
    /// watchdog benches a policy under which jobs run but none progresses.
    fn last_progress_ms(&self) -> Option<u64> {
        None
    }

    /// Whether `job` made progress it keeps since `since_ms` (since it started, when None): the
    /// watchdog's livelock rule counts the disruptions that find it without. By default, what
    /// the job reported: a progress record (an epoch, after which it checkpoints) since then. A
    /// backend whose jobs keep every step (the simulator's GPU jobs) says whether it worked.
    fn progressed_since(&self, job: JobId, since_ms: Option<u64>, world: &World) -> bool {
        world.reported_since(job, since_ms)
    }

    /// Whether a `set-gpu-share` restarts the job from its checkpoint here (the container is
    /// made anew), losing what it did since: then it counts against the disruption budget like
    /// a migration.
    fn gpu_share_restarts(&self) -> bool {
        false
    }
}

/// What a backend shows on the status page beside the world.
pub trait Status {
    /// The places it reaches and whether they answer.
    fn endpoints(&self) -> Vec<Endpoint>;

    /// What it holds outside the world, and why ([`Held`]); none for most backends.
    fn held(&self) -> Vec<Held> {
        Vec::new()
    }
}

/// The progress of a backend that knows only what the jobs report: [`Progress`]'s answers.
/// The loop reads `backend.progress().unwrap_or(&Reports)`.
pub struct Reports;

impl Progress for Reports {}

/// What the host's `[backend]` table asks of a backend's own table: `kind` chooses the
/// backend, the rest is its own.
pub trait Settings: DeserializeOwned {
    /// Its `kind`.
    const KIND: &'static str;
    /// What the backend does, in a few words, for the message that asks to remove another
    /// backend's key: "the docker backend *runs real containers in real time*; remove speed".
    const DOES: &'static str;

    /// Refuse values that parse but cannot be used, saying what to write instead.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
}

/// For a [`Settings::check`]: `Err(says)` when `value` is empty or blank.
pub fn filled(value: &str, says: &str) -> Result<(), String> {
    if value.trim().is_empty() { Err(says.into()) } else { Ok(()) }
}

/// A backend ready to run, and how the status names it.
pub struct Built {
    /// The backend.
    pub backend: Box<dyn Backend + Send>,
    /// What it is, for the status and the logs: `sim (demo)`, `docker (unix:///…)`.
    pub name: String,
}
