//! wasmsched's live host: `wasmsched run`, the one loop (`wasmsched_loop::control::drive`) on a
//! real backend or the simulator, for as long as it runs.
//!
//! - [`config`]: the host's TOML (`[backend]`, `[policy.NAME]`, `[resources]`, `[trust]`,
//!   `[api]`, `[record]`, the budget and the watchdog), checked whole before anything starts.
//! - [`backend`]: the `[backend]` table, [`backend::BackendConfig`], which builds the
//!   simulator or a live backend (`wasmsched-docker`, `wasmsched-kubernetes`, Cargo features
//!   `docker` and `kubernetes`).
//! - [`host`]: the long-running [`host::Host`] — one active policy and any number of
//!   shadows, swaps at tick boundaries with the old version's state, rollback, leadership on
//!   a backend with replicas; [`status`], what it reports (to the API, `wasmsched status`).
//! - [`reload`]: the policies directory watched, new versions admitted off to the side;
//!   `resources` (feature `kubernetes`): SchedulingPolicy resources as the policies.
//! - [`api`]: status, metrics, probes and rollback over HTTP, and its client.

#![cfg_attr(
    not(all(feature = "docker", feature = "kubernetes")),
    allow(rustdoc::broken_intra_doc_links, reason = "the docs link to the backends a full build has")
)]

pub mod api;
pub mod backend;
pub mod config;
pub mod host;
pub mod journal;
pub mod reload;
#[cfg(feature = "kubernetes")]
pub mod resources;
pub mod status;
