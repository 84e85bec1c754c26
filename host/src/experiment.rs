//! Experiments above the loop: policies run on the simulator backend
//! ([`crate::backend::sim`]) over workloads and seeds, and compared.
//!
//! [`run`] runs one policy on one workload with one seed and compares several over seeds
//! (what `simulate`, `compare` and `demo` do), [`paper`] sets our figures beside a paper's,
//! [`report`] draws the comparison as an HTML page, and [`fidelity`] checks the simulator
//! against Pollux's own.

pub mod fidelity;
pub mod paper;
pub mod report;
pub mod run;
pub mod sweep;

/// The built-in scenario `wasmsched demo` runs (`scenarios/demo.toml`).
pub const DEMO_SCENARIO: &str = include_str!("../../scenarios/demo.toml");

/// The GPU queue the demo runs the schedulers on (`scenarios/gpu-queue.toml`).
pub const GPU_QUEUE_SCENARIO: &str = include_str!("../../scenarios/gpu-queue.toml");
