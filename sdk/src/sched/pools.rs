//! GPUs by type, for policies that plan a whole round per GPU type (Sia, Pollux, Gavel):
//! the [`Pool`]s of the nodes that take work, and [`FreeGpus::carve`], which takes a count of
//! GPUs of one pool in pieces over few nodes, the rule their placements share.
//!
//! A round's plan starts from [`FreeGpus::up`] (every GPU of a node that takes work free),
//! takes the GPUs of the jobs that stay ([`FreeGpus::take_gpu`]), carves GPUs for the others,
//! and gives back ([`FreeGpus::give_back`]) what a job that does not fit had claimed.
//! [`merge`] adds GPUs to a job's [`Entries`].

use std::collections::BTreeSet;

use super::{FreeGpus, PLANNED};
use crate::units::NodeId;
use crate::view::{Job, Node, Snapshot};

/// A job's GPUs, node by node: per node the indices of its GPUs there (what
/// [`crate::Action::place_on`] and [`crate::Action::resize`] take).
pub type Entries = Vec<(NodeId, Vec<u32>)>;

/// The nodes of one GPU type that take work and have GPUs.
#[derive(Clone, Debug, PartialEq)]
pub struct Pool<K> {
    /// What the nodes have in common: their GPU type as the policy reads it.
    pub kind: K,
    /// (node, its GPU count), in index order.
    pub nodes: Vec<(NodeId, u32)>,
    /// The most GPUs one of its nodes has.
    pub per_node: u32,
    /// All its GPUs.
    pub total: u32,
}

impl<K: PartialEq> Pool<K> {
    /// The pools of the snapshot's nodes that take work and have GPUs, one per `kind` of node
    /// (its GPU type, as the policy parses it: by name, or by a type that maps unknown names
    /// to a default), in order of first appearance.
    pub fn by_kind(s: &Snapshot<'_>, kind: impl Fn(&Node<'_>) -> K) -> Vec<Pool<K>> {
        let mut pools: Vec<Pool<K>> = Vec::new();
        for n in s.nodes().filter(|n| n.takes_work() && n.gpus().len() > 0) {
            let k = kind(&n);
            let count = n.gpus().len() as u32;
            match pools.iter_mut().find(|p| p.kind == k) {
                Some(p) => {
                    p.nodes.push((n.id(), count));
                    p.per_node = p.per_node.max(count);
                    p.total += count;
                }
                None => pools.push(Pool { kind: k, nodes: vec![(n.id(), count)], per_node: count, total: count }),
            }
        }
        pools
    }
}

impl<K> Pool<K> {
    /// Whether `node` is one of its nodes.
    pub fn has(&self, node: NodeId) -> bool {
        self.nodes.iter().any(|(n, _)| *n == node)
    }

    /// Its nodes, in index order.
    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes.iter().map(|(n, _)| *n)
    }
}

/// The index of the pool of `pools` that holds `node`, if one does.
pub fn pool_of<K>(pools: &[Pool<K>], node: NodeId) -> Option<usize> {
    pools.iter().position(|p| p.has(node))
}

/// How a job's GPUs may be split over nodes: in pieces of `size` GPUs on at most `nodes`
/// nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pieces {
    /// GPUs each node takes a multiple of.
    pub size: u32,
    /// The most nodes the job may span.
    pub nodes: usize,
}

impl Pieces {
    /// Any split: single GPUs on any number of nodes (an elastic job).
    pub const ANY: Pieces = Pieces { size: 1, nodes: usize::MAX };

    /// How `job` may split `gpus` GPUs: any way when it is elastic; else in whole replicas
    /// (`gpus / replicas`, at least 1) on at most `replicas` nodes.
    pub fn of(job: &Job<'_>, gpus: u32) -> Pieces {
        if job.is_elastic() {
            Pieces::ANY
        } else {
            let replicas = job.replicas();
            Pieces { size: (gpus / replicas).max(1), nodes: replicas as usize }
        }
    }
}

/// Where [`FreeGpus::carve`] goes when no node holds the job whole. Either way it first tries
/// the node with the fewest free GPUs that can hold it whole (whole free nodes last on a tie);
/// a spill first tries the nodes of the finest topology domain that holds it, when the nodes
/// name domains.
#[derive(Clone, Copy, Debug)]
pub enum Spill<'a> {
    /// The nodes with the most free GPUs first, whole free ones first on a tie (Sia).
    MostFree,
    /// Whole free nodes first, then the nodes outside `avoid`, then the most free first; a
    /// node in `avoid` also comes last among those that hold the job whole with as many free
    /// (Pollux: `avoid` holds the nodes that hold part of another spread job).
    WholeFree {
        /// Nodes taken only when the others do not do.
        avoid: &'a BTreeSet<NodeId>,
    },
}

impl FreeGpus {
    /// Take `want` free GPUs of `nodes` (a pool's, with their GPU counts) split as `pieces`
    /// allows: on the node with the fewest free GPUs that holds them all, else over nodes in
    /// the order `spill` gives, each taking the most whole pieces it can of what is left. Each
    /// node gives its lowest free GPUs. None, taking nothing, when they do not fit so; an empty
    /// [`Entries`] for none wanted.
    pub fn carve(&mut self, nodes: &[(NodeId, u32)], want: u32, pieces: Pieces, spill: Spill<'_>) -> Option<Entries> {
        if want == 0 {
            return Some(Vec::new());
        }
        let free = |n: NodeId| self.book.free_count(n);
        let mut order: Vec<(NodeId, u32)> = nodes.to_vec();
        // A spill stays in the finest topology domain that holds it, when the nodes name any.
        let domain = if nodes.iter().any(|&(n, _)| free(n) >= want) {
            None
        } else {
            self.domain_holding(nodes, want, pieces.size)
        };
        // Each node's free count is read once, not at every comparison.
        order.sort_by_cached_key(|&(n, size)| {
            let f = free(n);
            let (whole, avoided) = (f == size, matches!(spill, Spill::WholeFree { avoid } if avoid.contains(&n)));
            let outside = !self.in_domain(n, domain);
            if f >= want {
                (false, false, f, !whole, avoided, 0)
            } else {
                match spill {
                    Spill::MostFree => (true, outside, u32::MAX - f, !whole, false, 0),
                    Spill::WholeFree { .. } => (true, outside, 0, !whole, avoided, u32::MAX - f),
                }
            }
        });
        let mut left = want;
        let mut plan: Vec<(NodeId, u32)> = Vec::new();
        for (n, _) in order {
            if left == 0 || plan.len() == pieces.nodes {
                break;
            }
            let take = (free(n).min(left) / pieces.size) * pieces.size;
            if take > 0 {
                plan.push((n, take));
                left -= take;
            }
        }
        if left > 0 {
            return None;
        }
        let mut entries = Vec::with_capacity(plan.len());
        for (n, count) in plan {
            let got: Vec<u32> = self.book.free_on(n).take(count as usize).collect();
            for &i in &got {
                self.book.hold(n, i, PLANNED);
            }
            self.index.set_free(n.0, self.book.free_count(n));
            entries.push((n, got));
        }
        Some(entries)
    }
}

/// Add `more` to `entries`: each node's GPUs into its entry when it has one, else as a new
/// entry at the end; every entry's GPUs sorted after.
pub fn merge(entries: &mut Entries, more: Entries) {
    for (n, gpus) in more {
        match entries.iter_mut().find(|(m, _)| *m == n) {
            Some((_, have)) => have.extend(gpus),
            None => entries.push((n, gpus)),
        }
    }
    for (_, gpus) in entries.iter_mut() {
        gpus.sort_unstable();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Runner;
    use crate::testing::{Inspect, TestWorld, job};
    use crate::view::GpuSlot;

    fn seen(world: &mut TestWorld) -> Runner<Inspect> {
        let mut r = Runner::from_policy(Inspect);
        r.decide(world.snapshot()).unwrap();
        r
    }

    fn at(e: &Entries) -> Vec<(u32, Vec<u32>)> {
        e.iter().map(|(n, g)| (n.0, g.clone())).collect()
    }

    fn slot(node: u32, index: u32) -> GpuSlot {
        GpuSlot { node: NodeId(node), index }
    }

    #[test]
    fn pools_group_the_nodes_that_take_work_by_kind_in_order_of_first_appearance() {
        let mut w = TestWorld::gpu_cluster(&[4, 8, 4, 2, 0]);
        for (n, t) in [(0, "t4"), (1, "a100"), (2, "t4"), (3, "a100"), (4, "t4")] {
            w.set_gpu_type(NodeId(n), t);
        }
        w.set_takes_work(NodeId(3), false);
        let r = seen(&mut w);
        let pools = Pool::by_kind(&r.view(), |n| n.gpu_type().to_string());
        type Shape<'p> = (&'p str, Vec<(u32, u32)>, u32, u32);
        let shape: Vec<Shape> = pools
            .iter()
            .map(|p| (p.kind.as_str(), p.nodes.iter().map(|(n, c)| (n.0, *c)).collect(), p.per_node, p.total))
            .collect();
        assert_eq!(shape, [("t4", vec![(0, 4), (2, 4)], 4, 8), ("a100", vec![(1, 8)], 8, 8)]);
        assert_eq!((pool_of(&pools, NodeId(2)), pool_of(&pools, NodeId(3))), (Some(0), None), "node 3 is down");
        let one = Pool::by_kind(&r.view(), |_| ());
        assert_eq!((one.len(), one[0].total), (1, 16), "one kind: one pool of every GPU that takes work");
    }

    #[test]
    fn the_up_book_frees_every_gpu_of_a_node_that_takes_work_whatever_runs() {
        let mut w = TestWorld::gpu_cluster(&[2, 2]);
        let a = w.queue_job(job("a", "cifar10").gpus(2));
        w.start(a, NodeId(0), &[0, 1]);
        w.set_takes_work(NodeId(1), false);
        let r = seen(&mut w);
        let mut up = FreeGpus::up(&r.view());
        assert_eq!(up.free_count(), 2);
        assert!(up.is_free(slot(0, 1)) && !up.is_free(slot(1, 0)));
        assert!(up.take_gpu(slot(0, 1)), "a free GPU is taken");
        assert!(!up.take_gpu(slot(0, 1)), "a taken one is not taken twice");
        up.give_back(&[(NodeId(0), vec![1])]);
        assert_eq!(up.free_on(NodeId(0)), [0, 1]);
    }

    #[test]
    fn a_spill_stays_in_the_finest_topology_domain_that_holds_it() {
        let mut w = TestWorld::gpu_cluster(&[4, 4, 4, 4]);
        let nodes: Vec<(NodeId, u32)> = (0..4).map(|n| (NodeId(n), 4)).collect();
        let without =
            FreeGpus::of(&seen(&mut w).view()).carve(&nodes, 8, Pieces { size: 4, nodes: 2 }, Spill::MostFree);
        assert_eq!(at(&without.unwrap()), [(0, vec![0, 1, 2, 3]), (1, vec![0, 1, 2, 3])], "no topology: index order");
        for (n, rack) in [(0, "r1"), (1, "r2"), (2, "r1"), (3, "r2")] {
            w.set_domains(NodeId(n), &["b", rack]);
        }
        let mut free = FreeGpus::of(&seen(&mut w).view());
        let packed = free.carve(&nodes, 8, Pieces { size: 4, nodes: 2 }, Spill::MostFree).unwrap();
        assert_eq!(at(&packed), [(0, vec![0, 1, 2, 3]), (2, vec![0, 1, 2, 3])], "both in rack r1");
        let next = free.carve(&nodes, 8, Pieces { size: 4, nodes: 2 }, Spill::MostFree).unwrap();
        assert_eq!(at(&next), [(1, vec![0, 1, 2, 3]), (3, vec![0, 1, 2, 3])], "then rack r2");
    }

    #[test]
    fn carve_takes_the_fullest_node_that_holds_the_job_whole() {
        let mut w = TestWorld::gpu_cluster(&[8, 4, 4]);
        let a = w.queue_job(job("a", "cifar10").gpus(2));
        w.start(a, NodeId(2), &[0, 1]);
        let r = seen(&mut w);
        let mut free = FreeGpus::of(&r.view());
        let nodes = [(NodeId(0), 8), (NodeId(1), 4), (NodeId(2), 4)];
        for spill in [Spill::MostFree, Spill::WholeFree { avoid: &BTreeSet::new() }] {
            let mut free = free.clone();
            assert_eq!(at(&free.carve(&nodes, 2, Pieces::ANY, spill).unwrap()), [(2, vec![2, 3])]);
            assert_eq!(at(&free.carve(&nodes, 3, Pieces::ANY, spill).unwrap()), [(1, vec![0, 1, 2])]);
        }
        assert_eq!(free.carve(&nodes, 0, Pieces::ANY, Spill::MostFree), Some(Vec::new()));
        assert_eq!(free.free_count(), 14, "nothing wanted, nothing taken");
    }

    #[test]
    fn spilling_most_free_first_and_whole_free_first_differ_where_a_partial_node_has_more() {
        // Node 0: 6 of 8 free; nodes 1 and 2: 4 of 4 free. 10 GPUs fit no node whole.
        let mut w = TestWorld::gpu_cluster(&[8, 4, 4]);
        let a = w.queue_job(job("a", "cifar10").gpus(2));
        w.start(a, NodeId(0), &[0, 1]);
        let r = seen(&mut w);
        let free = FreeGpus::of(&r.view());
        let nodes = [(NodeId(0), 8), (NodeId(1), 4), (NodeId(2), 4)];
        let most = free.clone().carve(&nodes, 10, Pieces::ANY, Spill::MostFree).unwrap();
        assert_eq!(at(&most), [(0, vec![2, 3, 4, 5, 6, 7]), (1, vec![0, 1, 2, 3])]);
        let whole = free.clone().carve(&nodes, 10, Pieces::ANY, Spill::WholeFree { avoid: &BTreeSet::new() }).unwrap();
        assert_eq!(at(&whole), [(1, vec![0, 1, 2, 3]), (2, vec![0, 1, 2, 3]), (0, vec![2, 3])]);
        let avoid = BTreeSet::from([NodeId(1)]);
        let shy = free.clone().carve(&nodes, 10, Pieces::ANY, Spill::WholeFree { avoid: &avoid }).unwrap();
        assert_eq!(at(&shy), [(2, vec![0, 1, 2, 3]), (1, vec![0, 1, 2, 3]), (0, vec![2, 3])], "node 1 after 2");
    }

    #[test]
    fn carve_keeps_to_whole_pieces_and_to_the_most_nodes_and_takes_nothing_when_it_fails() {
        let mut w = TestWorld::gpu_cluster(&[3, 3, 2]);
        let r = seen(&mut w);
        let mut free = FreeGpus::of(&r.view());
        let nodes = [(NodeId(0), 3), (NodeId(1), 3), (NodeId(2), 2)];
        assert_eq!(free.carve(&nodes, 8, Pieces { size: 2, nodes: 3 }, Spill::MostFree), None, "2 + 2 + 2 of 3, 3, 2");
        assert_eq!(free.carve(&nodes, 6, Pieces { size: 2, nodes: 2 }, Spill::MostFree), None, "at most 2 nodes");
        assert_eq!(free.free_count(), 8, "a failed carve takes nothing");
        let e = free.carve(&nodes, 6, Pieces { size: 3, nodes: 2 }, Spill::MostFree).unwrap();
        assert_eq!(at(&e), [(0, vec![0, 1, 2]), (1, vec![0, 1, 2])]);
        assert_eq!(free.free_count(), 2);
    }

    #[test]
    fn pieces_split_a_rigid_job_in_whole_replicas_and_an_elastic_one_any_way() {
        let mut w = TestWorld::gpu_cluster(&[4]);
        let rigid = w.queue_job(job("r", "cifar10").gpus(8).replicas(4));
        let elastic = w.queue_job(job("e", "cifar10").gpus(1).elastic(&[1, 2, 4], 128..=512));
        let r = seen(&mut w);
        let view = r.view();
        assert_eq!(Pieces::of(&view.job(rigid).unwrap(), 8), Pieces { size: 2, nodes: 4 });
        assert_eq!(Pieces::of(&view.job(rigid).unwrap(), 2), Pieces { size: 1, nodes: 4 });
        assert_eq!(Pieces::of(&view.job(elastic).unwrap(), 4), Pieces::ANY);
    }

    #[test]
    fn merge_adds_to_a_nodes_entry_or_appends_one_and_sorts() {
        let mut e: Entries = vec![(NodeId(1), vec![3, 0])];
        merge(&mut e, vec![(NodeId(0), vec![2]), (NodeId(1), vec![1])]);
        assert_eq!(at(&e), [(1, vec![0, 1, 3]), (0, vec![2])]);
    }
}
