//! The part of Gavel that its policies share: the round-based mechanism ([`round`]: priorities
//! from the time each job was given against its share, the greedy pass, placement, the
//! bookkeeping that survives a hot swap), the allocation problem of a round ([`table`]: GPU
//! types, each job's throughput on each from the measured step times, its steps) and the LP
//! that every allocation shares ([`lp`]). `policy-gavel` runs it with max-sum-throughput,
//! `policy-themis` with finish-time fairness: each is an [`Allocation`] and a
//! [`RoundBased`] policy of it.
//!
//! A library, not a policy: a policy crate is a component that exports the policy interface,
//! and one that linked another's would export it twice.
//!
//! Start at [`Allocation`] and [`RoundBased`] in [`round`].

pub mod lp;
pub mod round;
pub mod table;

pub use round::{Allocation, Config, RoundBased, State};
pub use table::{JobRow, Pool, Problem};
