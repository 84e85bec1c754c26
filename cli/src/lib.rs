//! wasmsched: a WebAssembly policy-plugin host for the schedulers of deep-learning
//! containers. This crate is the `wasmsched` binary (`main.rs`, `cli/`, [`scaffold`]) and one
//! name for the library beneath it, each layer a crate of its own, re-exported where callers
//! have always found it:
//!
//! | here | crate | what |
//! |---|---|---|
//! | [`bindings`], [`world`], [`declare`], [`tenants`], [`units`], [`recording`] | `wasmsched-core` | the vocabulary |
//! | [`runtime`], [`validate`], [`admission`] | `wasmsched-runtime` | the policy sandbox, the checks of every action, admission |
//! | [`sim`], [`playback`] | `wasmsched-sim` | the simulator, a recording played back |
//! | [`control`], [`watchdog`], [`budget`], [`shadow`], [`record`] | `wasmsched-loop` | the loop |
//! | [`scenario`], [`experiment`], [`results`], [`report`], [`whatif`], [`replay`] | `wasmsched-lab` | scenarios, experiments and the report, what-if |
//! | `host`, `status`, `config`, `backend`, `reload`, `resources`, `api` | `wasmsched-host` (feature `live`) | the long-running host |
//! | `oci` | `wasmsched-oci` (feature `live`) | policies in OCI registries, signatures |
//!
//! `docs/architecture.md` has the layers and what each may depend on (checked by
//! `tests/tests/architecture.rs`). With `--no-default-features` the binary is the lab alone
//! (the demo, the experiments, what-if, replay, validate, new); the default features add the
//! live host with Docker, Kubernetes and NVML, and the registries.

#![cfg_attr(
    not(all(feature = "docker", feature = "kubernetes")),
    allow(rustdoc::broken_intra_doc_links, reason = "the docs link to the backends a full build has")
)]

pub use wasmsched_core::{bindings, declare, error_chain, recording, tenants, units, world};

/// The `Backend` trait and what backends share; with `live`, `wasmsched-host`'s module, which
/// adds the `[backend]` table.
#[cfg(not(feature = "live"))]
pub use wasmsched_core::backend;
#[cfg(feature = "docker")]
pub use wasmsched_docker::gpu;
#[cfg(feature = "kubernetes")]
pub use wasmsched_host::resources;
#[cfg(feature = "live")]
pub use wasmsched_host::{api, backend, config, host, journal, reload, status};
#[cfg(feature = "docker")]
pub use wasmsched_lab::calibrate;
pub use wasmsched_lab::{experiment, replay, report, results, scenario, stats, whatif};
pub use wasmsched_loop::experiment as experiment_design;
pub use wasmsched_loop::{budget, control, record, shadow, watchdog};
#[cfg(feature = "live")]
pub use wasmsched_oci as oci;
pub use wasmsched_runtime::{self as runtime, admission, validate};
pub use wasmsched_shipped as shipped;
pub use wasmsched_sim::{self as sim, playback};

#[cfg(feature = "live")]
pub mod run;
pub mod scaffold;
