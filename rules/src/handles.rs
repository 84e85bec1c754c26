//! What the contract names things by, as types: a placement's entry ([`NodePlacement`]). The
//! host's contract types (`wasmsched_core::bindings::wit`) are these very types, so a value
//! made here crosses to a policy unchanged.

/// One node of a placement: the node, and the indices of its GPUs the job gets there (none for
/// a CPU job's piece).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct NodePlacement {
    /// The node.
    pub node: u32,
    /// Its GPUs the job gets, by index on the node.
    pub gpus: Vec<u32>,
}

impl NodePlacement {
    /// `gpus` of `node`.
    pub fn new(node: u32, gpus: impl Into<Vec<u32>>) -> Self {
        NodePlacement { node, gpus: gpus.into() }
    }
}

impl crate::check::Entry for NodePlacement {
    fn node(&self) -> u32 {
        self.node
    }
    fn gpus(&self) -> &[u32] {
        &self.gpus
    }
}
