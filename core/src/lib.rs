//! wasmsched's vocabulary, shared by every layer above it: the contract's types, generated once
//! ([`bindings`]); [`world::World`], what the host sees of its nodes, jobs and queue, and the
//! delta each policy gets from it; what a job's labels declare ([`declare`]); tenants
//! ([`tenants`]); units ([`units`]); a telemetry recording's lines ([`recording`]).
//!
//! Beside the vocabulary, what a backend is to the loop: the [`backend::Backend`] trait, and
//! [`replicas::Replicas`] for a backend whose host runs as several replicas. [`live`] is what
//! the live backends (Docker, Kubernetes) share: the wall clock, logging a cause once, the
//! fields every managed job has, the first-come-first-served default placement over
//! `wasmsched_rules::first_fit`, and how an action's effect updates the world.
//!
//! This crate knows no backend, no Wasm runtime and no loop; the backends (`wasmsched-docker`,
//! `wasmsched-kubernetes`) build on it, and `wasmsched` (the runtime, the simulator, the loop,
//! the experiments and the binary) on all of them. Start reading at [`world`].

pub mod backend;
pub mod bindings;
pub mod declare;
pub mod live;
pub mod random;
pub mod recording;
pub mod replicas;
pub mod tenants;
pub mod units;
pub mod world;

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
