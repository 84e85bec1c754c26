//! wasmsched-rules: the contract's rules, written once, on plain integers.
//!
//! The host validates every action a policy returns, each backend's default placement starts
//! queued jobs, and a policy plans its own placements inside its component: all three must
//! agree on what a placement is and when it fits. So the rules live here, with no
//! dependencies, and the host ([`check`] through its validator), the backends ([`fit`]) and
//! the Rust SDK (its `sched` module) all call them. Another language's SDK checks itself
//! against the vectors in `wit/conformance/`, which the host writes with these rules.
//!
//! Start at [`GpuBook`] (who holds which GPU), then [`fit::first_fit`] (where a job of some
//! GPUs in some replicas starts, given the nodes to try in order) and [`check::Checker`]
//! (whether an action may apply to the world as the decision's earlier actions leave it, and
//! if not, a [`check::Problem`] whose text is what the audit log shows).

pub mod book;
pub mod check;
pub mod fit;
pub mod handles;
pub mod room;
pub mod split;
pub mod tenants;

pub use book::GpuBook;
pub use check::{Act, Checker, JobNow, NodeCap, Oversized, Problem, Room, World};
pub use fit::{Ask, first_fit, first_fit_within};
pub use handles::{JobId, NodeId, NodePlacement};
pub use room::{NodeRoom, Request};
pub use tenants::{Entitlement, Ledger, OverLimit};

/// Docker refuses CPU limits below a hundredth of a core.
pub const MIN_CPU_MILLICORES: u64 = 10;
/// Docker refuses memory limits below 6 MiB.
pub const MIN_MEMORY_BYTES: u64 = 6 << 20;

/// The most actions a decision may hold for `jobs` live jobs (running or queued); a larger
/// decision is refused whole.
pub fn max_actions(jobs: usize) -> usize {
    64 + 8 * jobs
}

/// How many GPUs each piece of a job of `gpus` GPUs in `replicas` pieces takes on a node:
/// `gpus / replicas`, or single GPUs when that does not divide.
pub fn gpus_per_piece(gpus: u32, replicas: u32) -> u32 {
    let pieces = replicas.max(1);
    if gpus.is_multiple_of(pieces) { (gpus / pieces).max(1) } else { 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_take_an_even_share_or_single_gpus() {
        assert_eq!(gpus_per_piece(8, 4), 2);
        assert_eq!(gpus_per_piece(3, 2), 1);
        assert_eq!(gpus_per_piece(4, 0), 4, "no replicas reads as one");
        assert_eq!(gpus_per_piece(0, 2), 1, "a CPU job's pieces are never empty");
    }
}
