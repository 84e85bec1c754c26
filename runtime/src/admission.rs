//! Admitting a policy file: everything a version must pass before it may serve. The right
//! contract and version, `init` accepting its config, and a dry-run `decide` on a snapshot
//! that finishes within the deadline with no invalid action. `wasmsched validate` and the
//! hot reload both use it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use wasmsched_core::bindings;
use wasmsched_core::world::World;

use crate::instance::timed;
use crate::producers::Producers;
use crate::validate::{self, Oversized, Rejection};
use crate::{CallError, Limits, LoadError, LoadedPolicy, Runtime};

/// Why a policy was not admitted.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// The file is not a usable component of this contract.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The config table beside the file is not valid TOML.
    #[error("config {path} is not valid TOML: {detail}")]
    Config {
        /// The config file.
        path: PathBuf,
        /// What is wrong, with the line.
        detail: String,
    },
    /// `init` trapped or refused.
    #[error("init failed")]
    Init(#[source] CallError),
    /// The dry-run `decide` trapped or returned an error.
    #[error("dry-run decide failed")]
    DryRun(#[source] CallError),
    /// The dry-run decision was refused whole.
    #[error("dry-run decision refused")]
    Oversized(#[source] Oversized),
    /// The dry-run decision held invalid actions.
    #[error("dry-run decision has {} invalid action(s): {}", rejected.len(), summarise(rejected))]
    InvalidActions {
        /// The rejected actions.
        rejected: Vec<Rejection>,
    },
}

fn summarise(rejected: &[Rejection]) -> String {
    let mut parts: Vec<String> = rejected.iter().take(3).map(|r| r.reason.clone()).collect();
    if rejected.len() > 3 {
        parts.push(format!("and {} more", rejected.len() - 3));
    }
    parts.join("; ")
}

/// A policy that passed every check.
pub struct Admitted {
    /// The loaded version, ready to serve.
    pub policy: LoadedPolicy,
    /// How long the dry-run decide took.
    pub dry_run: Duration,
    /// How many actions the dry run returned.
    pub actions: usize,
    /// Whether it places queued jobs itself (it said so at `init`).
    pub places: bool,
    /// Which toolchain built it, where the component says.
    pub toolchain: Producers,
}

impl fmt::Display for Admitted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.policy;
        let compiled = if p.cache_hit() {
            "from cache".to_string()
        } else {
            format!("compiled in {} ms", p.compile_time().as_millis())
        };
        write!(
            f,
            "ok {}: world wasmsched:policy/policy-plugin, contract {}{}, sha256 {}, built with {}, init ok, dry-run decide {:.2} ms ({} actions), {compiled}",
            p.name(),
            p.contract(),
            match (p.contract(), self.places) {
                (bindings::Contract::V0_1, _) => " (adapted: no queue; the host places its jobs)",
                (bindings::Contract::V0_3, true) => " (adapted: no requests, labels, topology or room; places jobs)",
                (bindings::Contract::V0_3, false) => " (adapted: no requests, labels, topology or room)",
                (bindings::Contract::V0_2, true) => " (adapted: no GPU types or resizes; places jobs)",
                (bindings::Contract::V0_2, false) => " (adapted: no GPU types or resizes)",
                (_, true) => " (places jobs)",
                (_, false) => "",
            },
            p.digest(),
            self.toolchain,
            self.dry_run.as_secs_f64() * 1e3,
            self.actions,
        )
    }
}

/// Load, init and dry-run a policy on `world`.
pub fn admit(
    rt: &Runtime,
    name: &str,
    bytes: &[u8],
    config_json: &str,
    limits: Limits,
    world: &World,
) -> Result<Admitted, AdmissionError> {
    let policy = rt.load(name, bytes)?;
    let mut instance = policy.instantiate(rt, limits, config_json, None).map_err(AdmissionError::Init)?;
    let (decision, dry_run) = timed(|| instance.decide(world));
    let decision = decision.map_err(AdmissionError::DryRun)?;
    let checked = validate::check(decision, world).map_err(AdmissionError::Oversized)?;
    if !checked.rejected.is_empty() {
        return Err(AdmissionError::InvalidActions { rejected: checked.rejected });
    }
    Ok(Admitted {
        policy,
        dry_run,
        actions: checked.accepted.len(),
        places: instance.abilities().places,
        toolchain: Producers::of(bytes),
    })
}

/// The policy's own config: `NAME.toml` beside `NAME.wasm`, as JSON; `{}` when absent.
pub fn config_beside(wasm: &Path) -> Result<String, AdmissionError> {
    let path = wasm.with_extension("toml");
    let Ok(text) = std::fs::read_to_string(&path) else { return Ok("{}".into()) };
    let table: toml::Table =
        toml::from_str(&text).map_err(|e| AdmissionError::Config { path: path.clone(), detail: e.to_string() })?;
    Ok(serde_json::to_string(&table).expect("a TOML table is valid JSON"))
}

/// Admit a file on disk, with the config beside it.
pub fn admit_file(rt: &Runtime, path: &Path, limits: Limits, world: &World) -> Result<Admitted, AdmissionError> {
    let bytes = std::fs::read(path).map_err(|source| LoadError::Read { path: path.to_path_buf(), source })?;
    let name = path.file_stem().map_or_else(|| path.display().to_string(), |s| s.to_string_lossy().into_owned());
    let config = config_beside(path)?;
    admit(rt, &name, &bytes, &config, limits, world)
}
