//! What the contract names things by, as types: a job's handle ([`JobId`]), a node's
//! ([`NodeId`]) and a placement's entry ([`NodePlacement`], or any [`Entry`]). The host's
//! contract types (`wasmsched_core::bindings::wit`) are these very types, and the Rust SDK's
//! too, so a value made here crosses to a policy unchanged, and a job's handle cannot be passed
//! for a node's.
//!
//! Each handle records and serializes as its number, and prints as it (`{}` and `{:?}`), as the
//! contract's plain `u32` did: outputs, recordings and audit logs are unchanged. A text that
//! should say which kind it is writes so (`"job#{}"`).

use std::fmt;

/// A job's handle: unique on its host for the job's lifetime, never reused.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize), serde(transparent))]
pub struct JobId(pub u32);

/// A node's handle: its index in the node list (`snapshot.nodes`, as last sent).
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize), serde(transparent))]
pub struct NodeId(pub u32);

impl NodeId {
    /// The node's index in the node list.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl JobId {
    /// The handle as an index (the simulator's and the tests' jobs are numbered from 0).
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

macro_rules! number {
    ($t:ident) => {
        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
        impl From<u32> for $t {
            fn from(n: u32) -> Self {
                $t(n)
            }
        }
        impl From<$t> for u32 {
            fn from(h: $t) -> u32 {
                h.0
            }
        }
        // A handle compares with its number (a test's expected handles, a recorded one): what
        // it guards against is one kind of handle passed for another, which stays an error.
        impl PartialEq<u32> for $t {
            fn eq(&self, n: &u32) -> bool {
                self.0 == *n
            }
        }
        impl PartialEq<$t> for u32 {
            fn eq(&self, h: &$t) -> bool {
                *self == h.0
            }
        }
    };
}
number!(JobId);
number!(NodeId);

/// One node of a placement: the node, and the indices of its GPUs the job gets there (none for
/// a CPU job's piece).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct NodePlacement {
    /// The node.
    pub node: NodeId,
    /// Its GPUs the job gets, by index on the node.
    pub gpus: Vec<u32>,
}

impl NodePlacement {
    /// `gpus` of `node`.
    pub fn new(node: impl Into<NodeId>, gpus: impl Into<Vec<u32>>) -> Self {
        NodePlacement { node: node.into(), gpus: gpus.into() }
    }
}

/// One node of a placement as the rules read it: the node and the indices of its GPUs the job
/// gets. [`NodePlacement`] is one; the Rust SDK's guest type is another.
pub trait Entry {
    /// The node.
    fn node(&self) -> NodeId;
    /// Its GPUs the job gets.
    fn gpus(&self) -> &[u32];
}

impl Entry for NodePlacement {
    fn node(&self) -> NodeId {
        self.node
    }
    fn gpus(&self) -> &[u32] {
        &self.gpus
    }
}
