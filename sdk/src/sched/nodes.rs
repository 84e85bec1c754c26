//! Which nodes first fit tries, found without walking every node: per node its free GPUs in
//! a tree of maxima (the first node in index order with enough, or the one with the most),
//! and its running jobs per core in a tree of minima (where a CPU job goes). Each change to
//! a node costs O(log nodes), and so does each question.

use std::cmp::Ordering;

/// Per node, its free GPUs and its running jobs per core, kept in two trees.
#[derive(Clone, Debug)]
pub(super) struct NodeIndex {
    /// Leaves from `size`: each node's free GPUs (0 past the last node); above, the maximum
    /// of the two below.
    free: Vec<u32>,
    /// Leaves from `size`: each node (`NONE` past the last); above, the one of the two below
    /// with the fewest running jobs per core, the lower index on a tie.
    least: Vec<u32>,
    /// Per node, running jobs per core.
    load: Vec<f64>,
    /// How many nodes.
    len: usize,
    /// Leaves in each tree: a power of two, at least `len`.
    size: usize,
}

/// No node (a leaf past the last).
const NONE: u32 = u32::MAX;

impl NodeIndex {
    /// Nodes with these free GPUs and running jobs per core.
    pub(super) fn new(free: impl IntoIterator<Item = u32>, load: Vec<f64>) -> Self {
        let len = load.len();
        let size = len.next_power_of_two().max(1);
        let mut index = NodeIndex { free: vec![0; 2 * size], least: vec![NONE; 2 * size], load, len, size };
        for (n, f) in free.into_iter().enumerate().take(len) {
            index.free[size + n] = f;
            index.least[size + n] = n as u32;
        }
        for i in (1..size).rev() {
            index.free[i] = index.free[2 * i].max(index.free[2 * i + 1]);
            index.least[i] = index.lesser(index.least[2 * i], index.least[2 * i + 1]);
        }
        index
    }

    /// Of two nodes (or `NONE`), the one with fewer running jobs per core, the lower index on
    /// a tie (where a stable sort by load puts it).
    fn lesser(&self, a: u32, b: u32) -> u32 {
        match (a, b) {
            (NONE, _) => b,
            (_, NONE) => a,
            _ => match self.load[a as usize].total_cmp(&self.load[b as usize]) {
                Ordering::Greater => b,
                Ordering::Equal if b < a => b,
                _ => a,
            },
        }
    }

    /// Node `node` has `free` free GPUs now.
    pub(super) fn set_free(&mut self, node: u32, free: u32) {
        let mut i = self.size + node as usize;
        if node as usize >= self.len || self.free[i] == free {
            return;
        }
        self.free[i] = free;
        while i > 1 {
            i /= 2;
            self.free[i] = self.free[2 * i].max(self.free[2 * i + 1]);
        }
    }

    /// Node `node` has `load` running jobs per core now.
    pub(super) fn set_load(&mut self, node: u32, load: f64) {
        if node as usize >= self.len {
            return;
        }
        self.load[node as usize] = load;
        let mut i = self.size + node as usize;
        while i > 1 {
            i /= 2;
            self.least[i] = self.lesser(self.least[2 * i], self.least[2 * i + 1]);
        }
    }

    /// The free GPUs of `node` (a node that exists).
    pub(super) fn free(&self, node: u32) -> u32 {
        self.free[self.size + node as usize]
    }

    /// The most free GPUs any node has.
    pub(super) fn most_free(&self) -> u32 {
        self.free[1]
    }

    /// The node with the fewest running jobs per core (the lowest index on a tie) for which
    /// `ok` holds; None when it holds for none.
    pub(super) fn least_loaded_where(&self, ok: impl Fn(u32) -> bool) -> Option<u32> {
        self.loaded_where(ok, 1).pop()
    }

    /// Up to `most` nodes for which `ok` holds, fewest running jobs per core first (the lower
    /// index on a tie). Best first down the tree of minima: each node refused costs
    /// O(log nodes), so a few refused nodes (full, or lacking a job's labels) cost little.
    pub(super) fn loaded_where(&self, ok: impl Fn(u32) -> bool, most: usize) -> Vec<u32> {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        /// A subtree, ordered by its least loaded node (the lower index on a tie).
        struct Entry<'a>(&'a NodeIndex, usize);
        impl Entry<'_> {
            fn node(&self) -> u32 {
                self.0.least[self.1]
            }
        }
        impl PartialEq for Entry<'_> {
            fn eq(&self, other: &Self) -> bool {
                self.node() == other.node()
            }
        }
        impl Eq for Entry<'_> {}
        impl PartialOrd for Entry<'_> {
            fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
                Some(self.cmp(other))
            }
        }
        impl Ord for Entry<'_> {
            fn cmp(&self, other: &Self) -> Ordering {
                let (a, b) = (self.node(), other.node());
                self.0.load[a as usize].total_cmp(&self.0.load[b as usize]).then(a.cmp(&b))
            }
        }
        let mut found = Vec::new();
        if self.least[1] == NONE || most == 0 {
            return found;
        }
        let mut heap = BinaryHeap::from([Reverse(Entry(self, 1))]);
        while let Some(Reverse(Entry(_, i))) = heap.pop() {
            if i >= self.size {
                let node = self.least[i];
                if ok(node) {
                    found.push(node);
                    if found.len() == most {
                        break;
                    }
                }
                continue;
            }
            for child in [2 * i, 2 * i + 1] {
                if self.least[child] != NONE {
                    heap.push(Reverse(Entry(self, child)));
                }
            }
        }
        found
    }

    /// The first node from `from` on, in index order, with at least `at_least` (one or more)
    /// free GPUs.
    pub(super) fn first_with(&self, from: usize, at_least: u32) -> Option<u32> {
        debug_assert!(at_least > 0, "a leaf past the last node has zero free GPUs");
        self.descend(1, 0, self.size, from, at_least).filter(|&n| (n as usize) < self.len)
    }

    /// [`Self::first_with`] under tree node `i`, which covers leaves `lo..hi`.
    fn descend(&self, i: usize, lo: usize, hi: usize, from: usize, at_least: u32) -> Option<u32> {
        if hi <= from || self.free[i] < at_least {
            return None;
        }
        if hi - lo == 1 {
            return Some(lo as u32);
        }
        let mid = (lo + hi) / 2;
        self.descend(2 * i, lo, mid, from, at_least).or_else(|| self.descend(2 * i + 1, mid, hi, from, at_least))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_with_finds_the_first_node_with_enough_from_a_starting_point() {
        let index = NodeIndex::new([2, 0, 5, 3, 8], vec![0.0; 5]);
        assert_eq!(index.first_with(0, 3), Some(2));
        assert_eq!(index.first_with(3, 3), Some(3));
        assert_eq!(index.first_with(4, 9), None);
        assert_eq!(index.first_with(5, 1), None, "past the last node");
        assert_eq!(index.most_free(), 8);
    }

    #[test]
    fn changes_move_the_answers() {
        let mut index = NodeIndex::new([4, 4, 4], vec![1.0, 0.5, 0.5]);
        assert_eq!(index.least_loaded_where(|_| true), Some(1), "a tie goes to the lower index");
        index.set_load(1, 2.0);
        assert_eq!(index.least_loaded_where(|_| true), Some(2));
        index.set_free(0, 1);
        assert_eq!(index.first_with(0, 2), Some(1));
        assert_eq!((index.free(0), index.most_free()), (1, 4));
        assert_eq!(NodeIndex::new([], Vec::new()).least_loaded_where(|_| true), None);
    }

    #[test]
    fn least_loaded_where_passes_over_the_nodes_refused_in_load_order() {
        let index = NodeIndex::new([0; 5], vec![0.0, 0.5, 0.25, 0.25, 1.0]);
        assert_eq!(index.least_loaded_where(|_| true), Some(0));
        assert_eq!(index.least_loaded_where(|n| n != 0), Some(2), "a tie goes to the lower index");
        assert_eq!(index.loaded_where(|n| n != 2, 3), [0, 3, 1]);
        assert_eq!(index.least_loaded_where(|_| false), None);
    }
}
