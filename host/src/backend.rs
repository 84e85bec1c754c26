//! Where containers live. A backend observes them into the host's [`World`] and applies
//! validated actions to them; the loop (`control.rs`, above the backends) is the same for every
//! backend. Backends know the world's types and never the policy runtime: [`sim`] (the
//! simulator), `docker` (real containers), `kubernetes` (pods on a cluster) and [`playback`] (a
//! recording played back).
//!
//! `wasmsched run` picks one with its `[backend]` table, a [`BackendConfig`]: each backend
//! defines the type of its own table (its keys, their defaults, what it refuses: [`Settings`])
//! and how that table builds it; this file only chooses by `kind`, and names a key of another
//! backend with the kind it belongs to. Docker and Kubernetes are Cargo features (`docker`,
//! `kubernetes`, on by default). A new backend is a module here, a variant of
//! [`BackendConfig`] and of [`BackendError`] with their arms below, and a feature in
//! `host/Cargo.toml` when it brings dependencies.

pub mod carried;
#[cfg(feature = "docker")]
pub mod docker;
#[cfg(feature = "kubernetes")]
pub mod kubernetes;
pub mod playback;
pub mod progress;
pub mod sim;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::{DeserializeOwned, Unexpected, Visitor};
use serde::{Deserialize, Deserializer};

use crate::bindings::wit;
use crate::world::World;
use sim::workload::Workload;

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
    /// Requests the host has made to it since it started, where the backend counts them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// Actions sent to it and not yet answered, where the backend sends them without waiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<u64>,
}

/// Where this host stands among replicas of it that share a backend (a Kubernetes cluster
/// with `[backend.election]`), as the status shows it.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Leadership {
    /// This replica's identity.
    pub identity: String,
    /// Whether this replica acts now.
    pub leading: bool,
    /// Who held the lead at the last look (None: nobody, or not read yet).
    pub holder: Option<String>,
    /// Where the lead is kept: the Lease's `namespace/name`.
    pub lease: String,
    /// How many times the lead changed hands, as the Lease counts.
    pub transitions: u64,
    /// Times this replica took the lead since it started.
    pub acquired: u64,
}

/// A policy's state as the leader saved it, kept by the backend for the replica that leads
/// next ([`Backend::keep`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint {
    /// The policy's name in the config.
    pub policy: String,
    /// The sha256 of the version that saved it.
    pub sha256: String,
    /// That version's number among the policy's versions on the host that saved it.
    pub version: u32,
    /// The tick it was saved at.
    pub tick: u64,
    /// When, milliseconds since the Unix epoch.
    pub saved_unix_ms: u64,
    /// What the version's `save-state` returned.
    pub state: Vec<u8>,
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

/// A place where jobs run: the simulator ([`sim`]), real containers, pods, a recording played
/// back ([`playback`]).
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

    /// The places it reaches and whether they answer, for the status; none for a backend that
    /// reaches nothing outside the process.
    fn endpoints(&self) -> Vec<Endpoint> {
        Vec::new()
    }

    /// The queued jobs its default placement would start now, in the order it would start
    /// them, without starting any: what a placing policy is judged against (the watchdog's
    /// stall rule). None for a backend that starts nothing of its own.
    fn startable(&self, _world: &World) -> Vec<u32> {
        Vec::new()
    }

    /// Start queued `jobs` now with the default placement, in the order given, each where it
    /// fits (the watchdog's rescue of jobs a placing policy left waiting). Returns those
    /// started; the others stay queued.
    fn rescue(&mut self, _jobs: &[u32], _world: &mut World) -> Vec<u32> {
        Vec::new()
    }

    /// When any job last did work, on the backend's clock (ms), where the backend can tell
    /// (the simulator can; a live one cannot tell a container at work from one stuck). The
    /// watchdog benches a policy under which jobs run but none progresses.
    fn last_progress_ms(&self) -> Option<u64> {
        None
    }

    /// Whether a `set-gpu-share` restarts the job from its checkpoint here (the container is
    /// made anew): then it counts against the disruption budget like a migration.
    fn gpu_share_restarts(&self) -> bool {
        false
    }

    /// Where this host stands among its replicas; None for a backend that runs no replicas
    /// (it always acts). While a replica does not lead, its `observe` changes nothing outside
    /// the host, and the loop asks no policy and applies nothing: the world stays warm for
    /// the moment it takes the lead.
    fn leadership(&self) -> Option<Leadership> {
        None
    }

    /// Whether this host may act now: it leads, or it runs no replicas.
    fn leads(&self) -> bool {
        self.leadership().is_none_or(|l| l.leading)
    }

    /// Every how many ticks the leader hands the policies' states to [`Backend::keep`]; None
    /// for a backend that keeps none.
    fn keep_every(&self) -> Option<u64> {
        None
    }

    /// Keep the policies' states where the next leader finds them ([`Backend::kept`]).
    fn keep(&mut self, _checkpoints: &[Checkpoint]) {}

    /// The states the last leader kept, read when this host takes the lead.
    fn kept(&mut self) -> Vec<Checkpoint> {
        Vec::new()
    }

    /// The host is stopping: stop acting and hand the lead on now rather than at its expiry.
    fn step_down(&mut self) {}
}

/// The `[backend]` table of `wasmsched run`: which backend (`kind`), with that backend's own
/// settings. Another backend's key is refused with the kind it belongs to; a kind this host
/// was built without says which feature to rebuild with.
#[derive(Clone, Debug)]
pub enum BackendConfig {
    /// `kind = "sim"`: the built-in simulator on a workload.
    Sim(sim::SimSettings),
    /// `kind = "docker"`: real containers on Docker Engines.
    #[cfg(feature = "docker")]
    Docker(docker::DockerConfig),
    /// `kind = "kubernetes"`: pods on a Kubernetes cluster.
    #[cfg(feature = "kubernetes")]
    Kubernetes(kubernetes::KubernetesConfig),
}

/// Every backend `run` knows, built in or not; a backend's Cargo feature is its kind.
const KINDS: &[&str] = &["sim", "docker", "kubernetes"];

/// What [`BackendConfig`] asks of a backend's own table.
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
pub(crate) fn filled(value: &str, says: &str) -> Result<(), String> {
    if value.trim().is_empty() { Err(says.into()) } else { Ok(()) }
}

/// A backend ready to run, and how the status names it.
pub struct Built {
    /// The backend.
    pub backend: Box<dyn Backend + Send>,
    /// What it is, for the status and the logs: `sim (demo)`, `docker (unix:///…)`.
    pub name: String,
}

/// Why a backend could not be built: the setup error of the backend configured. One variant
/// a backend, each carrying that backend's own error type (not a boxed one), so a caller can
/// still tell, say, [`docker::DockerSetupError::NoEngine`] from the rest.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The simulator's workload did not load (the caller's loader said why).
    #[error("cannot load the workload")]
    Workload(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The Docker backend could not be set up.
    #[cfg(feature = "docker")]
    #[error(transparent)]
    Docker(#[from] docker::DockerSetupError),
    /// The Kubernetes backend could not be set up.
    #[cfg(feature = "kubernetes")]
    #[error(transparent)]
    Kubernetes(#[from] kubernetes::KubernetesSetupError),
}

impl BackendConfig {
    /// The `kind` it was configured with.
    pub fn kind(&self) -> &'static str {
        match self {
            BackendConfig::Sim(_) => sim::SimSettings::KIND,
            #[cfg(feature = "docker")]
            BackendConfig::Docker(_) => docker::DockerConfig::KIND,
            #[cfg(feature = "kubernetes")]
            BackendConfig::Kubernetes(_) => kubernetes::KubernetesConfig::KIND,
        }
    }

    /// How fast the backend's clock runs against the wall clock: the simulator's `speed`;
    /// real time for a live backend.
    pub fn speed(&self) -> Speed {
        match self {
            BackendConfig::Sim(s) => s.speed,
            #[cfg(feature = "docker")]
            BackendConfig::Docker(_) => Speed::RealTime,
            #[cfg(feature = "kubernetes")]
            BackendConfig::Kubernetes(_) => Speed::RealTime,
        }
    }

    /// The paths it holds, for the config file's folder to resolve.
    pub fn paths(&mut self) -> Vec<&mut PathBuf> {
        match self {
            BackendConfig::Sim(s) => vec![&mut s.workload],
            #[cfg(feature = "docker")]
            BackendConfig::Docker(_) => Vec::new(),
            #[cfg(feature = "kubernetes")]
            BackendConfig::Kubernetes(k) => k.kubeconfig.iter_mut().collect(),
        }
    }

    /// Build the backend. The simulator runs the workload that `load` reads from its
    /// `workload` path: the caller owns the workload's parsers, the backends do not.
    pub fn build<E>(&self, load: impl FnOnce(&Path) -> Result<Workload, E>) -> Result<Built, BackendError>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        match self {
            BackendConfig::Sim(s) => {
                let workload = load(&s.workload).map_err(|e| BackendError::Workload(Box::new(e)))?;
                Ok(s.build(&workload))
            }
            #[cfg(feature = "docker")]
            BackendConfig::Docker(d) => Ok(d.build()?),
            #[cfg(feature = "kubernetes")]
            BackendConfig::Kubernetes(k) => Ok(k.build()?),
        }
    }
}

impl<'de> Deserialize<'de> for BackendConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut table = toml::Table::deserialize(d)?;
        let kind = match table.remove("kind") {
            Some(toml::Value::String(kind)) => kind,
            Some(other) => {
                return Err(D::Error::invalid_type(Unexpected::Other(other.type_str()), &"a backend's kind"));
            }
            None => return Err(D::Error::missing_field("kind")),
        };
        let config = match kind.as_str() {
            <sim::SimSettings as Settings>::KIND => own(table).map(BackendConfig::Sim),
            #[cfg(feature = "docker")]
            <docker::DockerConfig as Settings>::KIND => own(table).map(BackendConfig::Docker),
            #[cfg(feature = "kubernetes")]
            <kubernetes::KubernetesConfig as Settings>::KIND => own(table).map(BackendConfig::Kubernetes),
            missing if KINDS.contains(&missing) => Err(format!(
                "this wasmsched was built without the {missing} backend: rebuild with --features {missing}"
            )),
            unknown => return Err(D::Error::unknown_variant(unknown, KINDS)),
        };
        config.map_err(D::Error::custom)
    }
}

/// The backends built into this host, each with its keys.
fn built_in() -> Vec<(&'static str, &'static [&'static str])> {
    Vec::from([
        (sim::SimSettings::KIND, keys::<sim::SimSettings>()),
        #[cfg(feature = "docker")]
        (docker::DockerConfig::KIND, keys::<docker::DockerConfig>()),
        #[cfg(feature = "kubernetes")]
        (kubernetes::KubernetesConfig::KIND, keys::<kubernetes::KubernetesConfig>()),
    ])
}

/// A backend's own table, once `kind` is taken out: another backend's keys are named with the
/// kinds they belong to, then the rest is the backend's to read and check.
fn own<T: Settings>(table: toml::Table) -> Result<T, String> {
    let mine = keys::<T>();
    let kinds = built_in();
    let owners = |key: &str| -> Vec<&'static str> {
        kinds.iter().filter(|(_, keys)| keys.contains(&key)).map(|(kind, _)| *kind).collect()
    };
    let misplaced: Vec<(&str, Vec<&str>)> = table
        .keys()
        .filter(|k| !mine.contains(&k.as_str()))
        .map(|k| (k.as_str(), owners(k)))
        .filter(|(_, owners)| !owners.is_empty())
        .collect();
    if let [rest @ .., (last, _)] = &misplaced[..] {
        let mut kinds: Vec<&str> = misplaced.iter().flat_map(|(_, owners)| owners.iter().copied()).collect();
        kinds.sort_by_key(|o| KINDS.iter().position(|k| k == o));
        kinds.dedup();
        let kinds: Vec<String> = kinds.iter().map(|o| format!("kind = \"{o}\"")).collect();
        let (keys, they) = match rest {
            [] => (last.to_string(), "it is"),
            rest => (format!("{} and {last}", rest.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ")), "they are"),
        };
        return Err(format!("the {} backend {}; remove {keys} ({they} for {})", T::KIND, T::DOES, kinds.join(" and ")));
    }
    let settings: T = toml::Value::Table(table).try_into().map_err(|e| e.message().trim_end().to_string())?;
    settings.check()?;
    Ok(settings)
}

/// The keys of `T`'s table as serde knows them (renamed; skipped fields left out), read by
/// asking it to deserialize itself from a deserializer that only notes the fields it names.
fn keys<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Fields<'a>(&'a mut &'static [&'static str]);
    impl<'de> Deserializer<'de> for Fields<'_> {
        type Error = serde::de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(serde::de::Error::custom("a backend's settings are a table"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(serde::de::Error::custom("fields noted"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
            unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Fields(&mut fields));
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backends_keys_are_its_tables_keys_as_written() {
        assert_eq!(keys::<sim::SimSettings>(), ["workload", "seed", "speed"]);
        #[cfg(feature = "docker")]
        assert_eq!(keys::<docker::DockerConfig>(), ["engines", "selector", "gpus"], "timeout is no key");
        #[cfg(feature = "kubernetes")]
        assert_eq!(
            keys::<kubernetes::KubernetesConfig>(),
            ["kubeconfig", "namespace", "selector", "scheduler-name", "max-log-streams", "election"]
        );
    }

    #[test]
    fn every_backend_built_in_is_a_kind_run_knows() {
        let built: Vec<&str> = built_in().into_iter().map(|(kind, _)| kind).collect();
        assert!(built.iter().all(|k| KINDS.contains(k)), "{built:?}");
        assert_eq!(built[0], "sim", "the simulator is always built in");
    }
}
