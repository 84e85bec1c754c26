//! wasmsched's lab: what runs policies offline and what it reports.
//!
//! - [`scenario`]: what an experiment runs — the simulator's workload, the paper's figures,
//!   the disruption budget — read from TOML, a Pollux workload CSV or the Philly trace.
//! - [`experiment`]: policies on scenarios over seeds through one batch runner
//!   ([`experiment::batch`]); `simulate`, `compare`, `demo`, `sweep`, `fidelity`, the results
//!   [`results`] as data (the JSON schema in `docs/results.schema.json`) and the HTML
//!   [`report`].
//! - [`stats`]: how sure a difference between two policies over the same seeds is (a paired
//!   bootstrap interval and a paired permutation test).
//! - [`whatif`]: a recording of a live cluster as a scenario (its jobs at their fitted
//!   speeds), for any policy; [`replay`]: a policy over a recording, its decisions diffed.
//! - `calibrate` (feature `docker`): a real job measured on a Docker Engine into a profile the
//!   simulator runs.
//!
//! It drives the loop (`wasmsched-loop`) over the simulator (`wasmsched-sim`) with the
//! sandbox (`wasmsched-runtime`), and names no live host, registry or cluster.

#[cfg(feature = "docker")]
pub mod calibrate;
pub mod experiment;
pub mod replay;
pub mod report;
pub mod results;
pub mod scenario;
pub use wasmsched_loop::stats;
pub mod whatif;
