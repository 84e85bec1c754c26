//! The GPU book: per node, which jobs hold each of its GPUs. A GPU is free when nobody holds
//! it; several holders share it (a placement with `share`). Built from what runs, then
//! changed as a round's plan or a decision's earlier actions would change it.

use crate::handles::{Entry, JobId, NodeId};

/// Who holds each GPU of each node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuBook {
    /// Where each node's GPUs start in `holders`; one more entry than nodes.
    offsets: Vec<usize>,
    /// Per GPU, in node order then index order, the jobs that hold it.
    holders: Vec<Vec<JobId>>,
}

impl GpuBook {
    /// A book of nodes with these many GPUs each, all free.
    pub fn new(gpus_per_node: impl IntoIterator<Item = u32>) -> Self {
        let mut offsets = vec![0];
        for gpus in gpus_per_node {
            offsets.push(offsets[offsets.len() - 1] + gpus as usize);
        }
        let holders = vec![Vec::new(); offsets[offsets.len() - 1]];
        GpuBook { offsets, holders }
    }

    /// How many nodes it has.
    pub fn node_count(&self) -> u32 {
        (self.offsets.len() - 1) as u32
    }

    /// How many GPUs `node` has; None when there is no such node.
    pub fn gpus_on(&self, node: NodeId) -> Option<u32> {
        let n = node.index();
        (n + 1 < self.offsets.len()).then(|| (self.offsets[n + 1] - self.offsets[n]) as u32)
    }

    fn at(&self, node: NodeId, index: u32) -> Option<usize> {
        (index < self.gpus_on(node)?).then(|| self.offsets[node.index()] + index as usize)
    }

    /// Whether GPU `index` of `node` exists.
    pub fn exists(&self, node: NodeId, index: u32) -> bool {
        self.at(node, index).is_some()
    }

    /// The jobs holding GPU `index` of `node`, the first to take it first (empty for a GPU that
    /// does not exist).
    pub fn holders(&self, node: NodeId, index: u32) -> &[JobId] {
        self.at(node, index).map_or(&[], |i| &self.holders[i])
    }

    /// Whether GPU `index` of `node` exists and nobody holds it.
    pub fn is_free(&self, node: NodeId, index: u32) -> bool {
        self.at(node, index).is_some_and(|i| self.holders[i].is_empty())
    }

    /// `job` holds GPU `index` of `node` (nothing happens for a GPU that does not exist).
    pub fn hold(&mut self, node: NodeId, index: u32, job: JobId) {
        if let Some(i) = self.at(node, index) {
            self.holders[i].push(job);
        }
    }

    /// `job` lets go of GPU `index` of `node`, if it held it.
    pub fn release(&mut self, node: NodeId, index: u32, job: JobId) {
        if let Some(i) = self.at(node, index)
            && let Some(k) = self.holders[i].iter().position(|&h| h == job)
        {
            self.holders[i].remove(k);
        }
    }

    /// `job` holds every GPU of a placement: per node, the indices of its GPUs there.
    pub fn take<E: Entry>(&mut self, placement: &[E], job: JobId) {
        for entry in placement {
            for &index in entry.gpus() {
                self.hold(entry.node(), index, job);
            }
        }
    }

    /// The free GPUs of `node`, lowest index first (none for a node that does not exist).
    pub fn free_on(&self, node: NodeId) -> impl Iterator<Item = u32> + '_ {
        let gpus = self.gpus_on(node).unwrap_or(0);
        (0..gpus).filter(move |&index| self.is_free(node, index))
    }

    /// How many GPUs of `node` are free.
    pub fn free_count(&self, node: NodeId) -> u32 {
        let n = node.index();
        match (self.offsets.get(n), self.offsets.get(n + 1)) {
            (Some(&from), Some(&to)) => self.holders[from..to].iter().filter(|h| h.is_empty()).count() as u32,
            _ => 0,
        }
    }

    /// Every GPU of the cluster, free or not.
    pub fn gpu_count(&self) -> u32 {
        self.holders.len() as u32
    }

    /// The GPUs nobody holds.
    pub fn free_total(&self) -> u32 {
        self.holders.iter().filter(|h| h.is_empty()).count() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NodePlacement;

    #[test]
    fn a_gpu_is_free_until_held_and_again_once_every_holder_let_go() {
        let mut book = GpuBook::new([2, 0, 3]);
        assert_eq!((book.node_count(), book.gpu_count(), book.free_total()), (3, 5, 5));
        assert_eq!((book.gpus_on(NodeId(1)), book.gpus_on(NodeId(3))), (Some(0), None));
        book.hold(NodeId(2), 1, JobId(7));
        book.hold(NodeId(2), 1, JobId(8));
        assert_eq!(book.holders(NodeId(2), 1), [JobId(7), JobId(8)]);
        assert_eq!(book.free_on(NodeId(2)).collect::<Vec<_>>(), [0, 2]);
        book.release(NodeId(2), 1, JobId(7));
        assert!(!book.is_free(NodeId(2), 1), "job 8 still holds it");
        book.release(NodeId(2), 1, JobId(9));
        assert_eq!(book.holders(NodeId(2), 1), [JobId(8)], "a job that never held it changes nothing");
        book.release(NodeId(2), 1, JobId(8));
        assert!(book.is_free(NodeId(2), 1));
    }

    #[test]
    fn gpus_that_do_not_exist_are_never_free_and_never_held() {
        let mut book = GpuBook::new([1]);
        book.hold(NodeId(0), 5, JobId(1));
        book.hold(NodeId(4), 0, JobId(1));
        assert_eq!(book.free_total(), 1);
        assert!(!book.is_free(NodeId(0), 5) && !book.exists(NodeId(4), 0));
        assert!(book.holders(NodeId(0), 5).is_empty());
        assert_eq!(book.free_on(NodeId(9)).count(), 0);
    }

    #[test]
    fn taking_a_placement_holds_each_of_its_gpus() {
        let mut book = GpuBook::new([2, 2]);
        book.take(&[NodePlacement::new(0, [1]), NodePlacement::new(1, [0, 1])], JobId(3));
        assert_eq!((book.free_count(NodeId(0)), book.free_count(NodeId(1))), (1, 0));
        assert_eq!(book.free_count(NodeId(2)), 0, "a node that does not exist has nothing free");
    }
}
