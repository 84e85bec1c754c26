//! wasmsched: a WebAssembly policy-plugin host for the schedulers of deep-learning
//! containers.
//!
//! **The loop.** Everything the host does is one loop, whatever the backend: observe →
//! snapshot → decide → validate → apply → record. The backend's observations land in a
//! [`world::World`]; each policy instance receives from it only what changed since its
//! previous call ([`world::Cursor`]): a job's strings once, nodes when they change,
//! numbers every tick (in columns), progress as new records. [`control::run`] is the loop.
//!
//! **Scheduling.** From contract 0.2.0 a live job either runs or waits in the queue. A policy
//! that says it places (`abilities.places` at `init`) starts queued jobs with `place` (a node
//! and an explicit list of GPUs, or one entry per node) and sends running ones back with
//! `preempt`; for any other policy (every 0.1.0 component, adapted in one place,
//! `runtime::v0_1`), or one that is failing, the loop hands placement to the backend
//! ([`backend::Placer`]), which starts jobs first come, first served, first fit.
//!
//! **Backends.** A [`backend::Backend`] is where jobs run: it observes them into the
//! telemetry and applies validated actions; backends know the telemetry types and never the
//! runtime. The simulator ([`backend::sim::Simulator`], a deterministic discrete-event model
//! on a virtual clock, with its models and workloads) is the default; [`backend::docker`]
//! manages real containers on Docker Engines (labels declare their targets: [`declare`]; GPUs
//! come through NVML: [`gpu`]); [`backend::playback`] plays back a recording. Each backend owns
//! its `[backend]` table and builds itself from it ([`backend::BackendConfig`]); Docker,
//! Kubernetes and NVML are Cargo features (`docker`, `kubernetes`, `nvml`), on by default.
//!
//! **Above the loop.** What drives it: a [`scenario`] is what an experiment runs (the
//! simulator's workload, the paper's figures, the disruption budget), read from TOML or a
//! trace; [`experiment`] runs policies on scenarios over seeds through one batch runner
//! ([`experiment::batch`]), compares them and draws the HTML report (`simulate`, `compare`,
//! `demo`, `sweep`, `fidelity`); [`replay`] runs a policy over a recording and diffs its
//! decisions; [`host`] is the long-running host. [`calibrate`] measures a real job on a Docker
//! Engine into a profile the simulator runs. `docs/architecture.md` has the layers and what
//! each may import (checked by `tests/tests/architecture.rs`).
//!
//! **The runtime.** [`runtime::Runtime`] owns one wasmtime engine with epoch interruption and
//! a cache of compiled components on disk. A policy file becomes a
//! [`runtime::LoadedPolicy`]; its [`runtime::PolicyInstance`]s run every call under a
//! deadline and a memory cap, with no filesystem, network, environment, clock or randomness
//! of their own. [`runtime::supervise::Supervised`] keeps the loop going through any
//! failure: a fallback for the tick, a fresh instance after a trap, quarantine after N
//! failures in a row. [`validate`] checks every action before it is applied, by the
//! contract's rules written once in the `wasmsched-rules` crate; the loop then
//! holds the active policy's stops, migrations and preemptions to a [`budget`] (per window,
//! per node, per job, and never a job that opted out).
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
//! recording that [`backend::playback`] plays back to any policy. [`api`] serves status,
//! metrics and rollback on loopback. Its [`watchdog`] benches an active policy that has failed
//! on every call for too long, starved the queue or kept every job from progressing, and runs
//! a safe one until a new version or a rollback.
//!
//! **Distribution.** [`oci`] pushes policy components to OCI registries and pulls them back, as
//! CNCF TAG Runtime's Wasm artifacts (`wasmsched push`, `wasmsched pull`).
//!
//! The contract's types come from [`bindings`], generated once from `wit/`.

#![cfg_attr(
    not(all(feature = "docker", feature = "kubernetes")),
    allow(rustdoc::broken_intra_doc_links, reason = "the docs link to the backends a full build has")
)]

pub use wasmsched_core::{bindings, declare, recording, tenants, units, world};
#[cfg(feature = "docker")]
pub use wasmsched_docker::gpu;

pub mod admission;
pub mod api;
pub mod backend;
pub mod budget;
#[cfg(feature = "docker")]
pub mod calibrate;
pub mod config;
pub mod control;
pub mod experiment;
pub mod host;
pub mod oci;
pub mod record;
pub mod reload;
pub mod replay;
#[cfg(feature = "kubernetes")]
pub mod resources;
pub mod runtime;
pub mod scaffold;
pub mod scenario;
pub mod shadow;
pub mod shipped;
pub mod validate;
pub mod watchdog;
pub mod whatif;

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
