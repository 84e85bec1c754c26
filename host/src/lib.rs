//! wasmsched: a WebAssembly policy-plugin host for the schedulers of deep-learning
//! containers.
//!
//! **The loop.** Everything the host does is one loop, whatever the backend: observe →
//! snapshot → decide → validate → apply → record. The backend's observations land in a
//! [`snapshot::Telemetry`]; each policy instance receives from it only what changed since its
//! previous call ([`snapshot::Cursor`]): a job's strings once, nodes when they change,
//! numbers every tick (in columns), progress as new records. [`control::run`] is the loop.
//!
//! **Backends.** A [`backend::Backend`] is where jobs run: it observes them into the
//! telemetry and applies validated actions. The simulator ([`sim::engine::Simulator`], a
//! deterministic discrete-event model on a virtual clock) is the default;
//! [`backend::docker`] manages real containers on Docker Engines (labels declare their
//! targets: [`declare`]; GPUs come through NVML: [`gpu`]); [`backend::replay`] plays back a
//! recording. Around it, [`sim`] loads workloads, runs and compares policies over seeds, and
//! draws the HTML report.
//!
//! **The runtime.** [`runtime::Runtime`] owns one wasmtime engine with epoch interruption and
//! a cache of compiled components on disk. A policy file becomes a
//! [`runtime::LoadedPolicy`]; its [`runtime::PolicyInstance`]s run every call under a
//! deadline and a memory cap, with no filesystem, network, environment, clock or randomness
//! of their own. [`runtime::supervise::Supervised`] keeps the loop going through any
//! failure: a fallback for the tick, a fresh instance after a trap, quarantine after N
//! failures in a row. [`validate`] checks every action before it is applied.
//!
//! **Admission.** [`admission::admit`] is what a policy must pass to serve: the right
//! contract, `init`, and a dry-run `decide` with no invalid action. `wasmsched validate` and
//! the hot reload share it.
//!
//! **The live host.** `wasmsched run` is [`host::Host`]: the same loop ([`control::drive`]) with
//! one active policy and any number of shadows ([`shadow`]: same snapshots, decisions compared,
//! never applied), configured by [`config`]. [`reload`] watches the policies directory and
//! admits new versions off to the side; the host swaps them in at a tick boundary with the old
//! version's saved state, and can roll back. [`record`] keeps the audit log and the telemetry
//! recording that [`backend::replay`] plays back to any policy. [`api`] serves status,
//! metrics and rollback on loopback.
//!
//! The contract's types come from [`bindings`], generated once from `wit/`.

pub mod admission;
pub mod api;
pub mod backend;
pub mod bindings;
pub mod config;
pub mod control;
pub mod declare;
pub mod gpu;
pub mod host;
pub mod record;
pub mod reload;
pub mod runtime;
pub mod shadow;
pub mod shipped;
pub mod sim;
pub mod snapshot;
pub mod validate;

/// An error and its sources on one line, `: `-separated, for logs and the command line.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}
