//! Where jobs run, as `wasmsched run` chooses it. The [`Backend`] trait and what every backend
//! shares are the core's (`wasmsched_core::backend`, re-exported here with [`Replicas`]); the
//! live backends are crates of their own (`docker`, `kubernetes`, re-exported here behind their
//! Cargo features); this crate keeps [`sim`] (the simulator) and [`playback`] (a recording
//! played back).
//!
//! `wasmsched run` picks one with its `[backend]` table, a [`BackendConfig`]: each backend
//! defines the type of its own table (its keys, their defaults, what it refuses: [`Settings`])
//! and how that table builds it; this file only chooses by `kind`, and names a key of another
//! backend with the kind it belongs to. A new backend is a variant of [`BackendConfig`] and of
//! [`BackendError`] with their arms below, and a feature in `host/Cargo.toml`
//! (docs/architecture.md, "A backend").

pub use wasmsched_core::backend::*;
pub use wasmsched_core::live::{carried, progress};
pub use wasmsched_core::replicas::{Checkpoint, Leadership, Replicas};
pub use wasmsched_sim::{self as sim, playback};

#[cfg(feature = "docker")]
pub use wasmsched_docker as docker;
#[cfg(feature = "kubernetes")]
pub use wasmsched_kubernetes as kubernetes;

use std::path::{Path, PathBuf};

use serde::de::{DeserializeOwned, Unexpected, Visitor};
use serde::{Deserialize, Deserializer};

use sim::workload::Workload;

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
    /// `kind = "kubernetes"`: pods on a Kubernetes cluster (boxed: its settings are several
    /// times the others').
    #[cfg(feature = "kubernetes")]
    Kubernetes(Box<kubernetes::KubernetesConfig>),
}

/// Every backend `run` knows, built in or not; a backend's Cargo feature is its kind.
const KINDS: &[&str] = &["sim", "docker", "kubernetes"];

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
            <kubernetes::KubernetesConfig as Settings>::KIND => {
                own(table).map(|k| BackendConfig::Kubernetes(Box::new(k)))
            }
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
            [
                "kubeconfig",
                "namespace",
                "selector",
                "scheduler-name",
                "max-log-streams",
                "topology",
                "election",
                "gpu-drivers",
                "gpu-telemetry",
                "gpu-sharing"
            ]
        );
    }

    #[test]
    fn every_backend_built_in_is_a_kind_run_knows() {
        let built: Vec<&str> = built_in().into_iter().map(|(kind, _)| kind).collect();
        assert!(built.iter().all(|k| KINDS.contains(k)), "{built:?}");
        assert_eq!(built[0], "sim", "the simulator is always built in");
    }
}
