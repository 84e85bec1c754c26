//! The built-in discrete-event simulator: DL jobs that follow real learning curves on nodes
//! that share CPU like CFS, on a virtual clock. The same seed gives the same run, bit for bit.
//!
//! [`model`] holds the six model types and their curves, [`workload`] loads what to run,
//! [`engine`] is the simulator backend, [`run`] runs and compares policies on it, [`paper`]
//! sets our figures beside a paper's, and [`report`] draws the comparison.

pub mod engine;
pub mod model;
pub mod paper;
pub mod report;
pub mod run;
pub mod workload;

/// The built-in scenario `wasmsched demo` runs (`scenarios/demo.toml`).
pub const DEMO_SCENARIO: &str = include_str!("../../scenarios/demo.toml");
