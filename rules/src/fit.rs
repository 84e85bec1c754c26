//! First fit, the one default placement: the caller says which nodes a job may go to and in
//! what order (the simulator: least loaded first; Kubernetes: Ready nodes with room, by name;
//! Docker: the engine the container was created on; a policy: index order, or most free
//! first), and first fit picks the GPUs.

use crate::book::GpuBook;
use crate::gpus_per_piece;
use crate::handles::{NodeId, NodePlacement};

/// What a job asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ask {
    /// GPUs in all (0 for a CPU job).
    pub gpus: u32,
    /// Into how many pieces it may be split across nodes (each of
    /// [`gpus_per_piece`] GPUs); 1 keeps it on one node.
    pub replicas: u32,
}

impl Ask {
    /// The most nodes its placement may name.
    pub fn pieces(&self) -> u32 {
        self.replicas.max(1)
    }
}

/// Where a job of `ask` starts by first fit over the nodes of `order` (those it may go to, in
/// the order to try them): the first node with enough free GPUs, its lowest free ones; else,
/// for a job that may be split, over the nodes in order in whole pieces, on at most
/// `replicas` nodes. One entry per node, its first node first. A CPU job gets the first node
/// of `order`. None when it does not fit now. Takes nothing: hold what it returns with
/// [`GpuBook::take`].
pub fn first_fit(book: &GpuBook, ask: Ask, order: &[NodeId]) -> Option<Vec<NodePlacement>> {
    first_fit_within(book, ask, order, |_| u32::MAX)
}

/// [`first_fit`] where node `n` takes at most `room(n)` of the job's pieces (what its CPU,
/// memory and pod slots left allow for what a piece requests; 0 where the job may not go):
/// a node holds the job whole only with room for every piece, and a spread takes no more
/// pieces from a node than it has room for. A CPU job goes whole to the first node with room
/// for all its pieces, else, when it may be split, over the nodes in order, as many pieces on
/// each as it takes ([`crate::room::pieces_on`] says how many).
pub fn first_fit_within(
    book: &GpuBook,
    ask: Ask,
    order: &[NodeId],
    room: impl Fn(NodeId) -> u32,
) -> Option<Vec<NodePlacement>> {
    let want = ask.gpus;
    let pieces = ask.pieces();
    if let Some(&node) = order.iter().find(|&&n| book.free_count(n) >= want && room(n) >= pieces) {
        return Some(vec![NodePlacement { node, gpus: book.free_on(node).take(want as usize).collect() }]);
    }
    if pieces == 1 {
        return None;
    }
    let mut nodes = Vec::new();
    if want == 0 {
        let mut left = pieces;
        for &node in order {
            if nodes.len() == pieces as usize {
                break;
            }
            let take = room(node).min(left);
            if take > 0 {
                nodes.push(NodePlacement { node, gpus: Vec::new() });
                left -= take;
            }
            if left == 0 {
                return Some(nodes);
            }
        }
        return None;
    }
    let per = gpus_per_piece(ask.gpus, ask.replicas);
    let even = want.is_multiple_of(pieces);
    let mut left = want;
    for &node in order {
        if nodes.len() == pieces as usize {
            break;
        }
        let free = book.free_count(node);
        let fits = room(node);
        let most = if even {
            fits.saturating_mul(per)
        } else if fits > 0 {
            u32::MAX
        } else {
            0
        };
        let take = (free - free % per).min(left).min(most);
        if take > 0 {
            nodes.push(NodePlacement { node, gpus: book.free_on(node).take(take as usize).collect() });
            left -= take;
        }
        if left == 0 {
            return Some(nodes);
        }
    }
    None
}

/// Whether a job of `ask` could ever start on the nodes of `order`: on the cluster with every
/// GPU free. A job that cannot never holds up the queue behind it.
pub fn could_ever_fit(book: &GpuBook, ask: Ask, order: &[NodeId]) -> bool {
    let gpus_on = |n: &NodeId| book.gpus_on(*n).unwrap_or(0);
    let best = order.iter().map(gpus_on).max().unwrap_or(0);
    let per = gpus_per_piece(ask.gpus, ask.replicas);
    let mut sizes: Vec<u32> = order.iter().map(|n| gpus_on(n) - gpus_on(n) % per).collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    let spread: u32 = sizes.iter().take(ask.pieces() as usize).sum();
    ask.gpus <= best || (ask.pieces() > 1 && ask.gpus <= spread)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::JobId;

    fn ask(gpus: u32, replicas: u32) -> Ask {
        Ask { gpus, replicas }
    }

    fn nodes(ns: &[u32]) -> Vec<NodeId> {
        ns.iter().map(|&n| NodeId(n)).collect()
    }

    fn p<const N: usize>(node: u32, gpus: [u32; N]) -> NodePlacement {
        NodePlacement::new(node, gpus)
    }

    #[test]
    fn the_first_node_in_order_with_enough_gives_its_lowest_free_gpus() {
        let mut book = GpuBook::new([4, 4]);
        book.take(&[p(0, [0, 2])], JobId(1));
        assert_eq!(first_fit(&book, ask(2, 1), &nodes(&[0, 1])), Some(vec![p(0, [1, 3])]));
        assert_eq!(first_fit(&book, ask(3, 1), &nodes(&[0, 1])), Some(vec![p(1, [0, 1, 2])]));
        assert_eq!(first_fit(&book, ask(2, 1), &nodes(&[1, 0])), Some(vec![p(1, [0, 1])]), "the caller's order");
        assert_eq!(first_fit(&book, ask(1, 1), &nodes(&[])), None, "no eligible node");
    }

    #[test]
    fn a_cpu_job_gets_the_first_node_in_order() {
        let book = GpuBook::new([0, 0]);
        assert_eq!(first_fit(&book, ask(0, 1), &nodes(&[1, 0])), Some(vec![p(1, [])]));
    }

    #[test]
    fn a_job_no_node_holds_spreads_in_whole_pieces_on_at_most_its_replicas() {
        let book = GpuBook::new([3, 3, 4]);
        let all = nodes(&[0, 1, 2]);
        assert_eq!(first_fit(&book, ask(8, 1), &all), None, "one replica never spreads");
        assert_eq!(first_fit(&book, ask(8, 4), &all), Some(vec![p(0, [0, 1]), p(1, [0, 1]), p(2, [0, 1, 2, 3])]));
        assert_eq!(first_fit(&book, ask(6, 2), &all), Some(vec![p(0, [0, 1, 2]), p(1, [0, 1, 2])]));
        assert_eq!(first_fit(&book, ask(8, 2), &all), None, "pieces of 4 fit node 2 alone");
        let pairs = GpuBook::new([2, 2, 2]);
        assert_eq!(first_fit(&pairs, ask(3, 2), &all), Some(vec![p(0, [0, 1]), p(1, [0])]));
        assert_eq!(first_fit(&pairs, ask(5, 2), &all), None, "an uneven split uses no more nodes than replicas");
    }

    #[test]
    fn room_for_the_pieces_bounds_each_node() {
        let book = GpuBook::new([4, 4, 4]);
        let all = nodes(&[0, 1, 2]);
        // Node 0 holds one piece only, node 1 none (a selector that excludes it, say).
        let room = |n: NodeId| [1, 0, 4][n.index()];
        assert_eq!(first_fit_within(&book, ask(4, 1), &all, room), Some(vec![p(0, [0, 1, 2, 3])]));
        assert_eq!(
            first_fit_within(&book, ask(4, 2), &all, room),
            Some(vec![p(2, [0, 1, 2, 3])]),
            "two pieces on one node need room for two"
        );
        assert_eq!(first_fit_within(&book, ask(8, 4), &all, room), None, "node 0 takes 2 GPUs, node 2 four");
        assert_eq!(first_fit_within(&book, ask(6, 3), &all, room), Some(vec![p(0, [0, 1]), p(2, [0, 1, 2, 3])]));
        assert_eq!(first_fit_within(&book, ask(0, 1), &all, room), Some(vec![p(0, [])]));
        assert_eq!(first_fit_within(&book, ask(0, 3), &all, room), Some(vec![p(2, [])]), "whole where room allows");
        assert_eq!(first_fit_within(&book, ask(0, 5), &all, room), Some(vec![p(0, []), p(2, [])]));
        assert_eq!(first_fit_within(&book, ask(0, 6), &all, room), None, "five pieces fit in all");
    }

    #[test]
    fn a_job_too_big_for_the_empty_cluster_could_never_fit() {
        let book = GpuBook::new([4, 2]);
        assert!(could_ever_fit(&book, ask(4, 1), &nodes(&[0, 1])));
        assert!(!could_ever_fit(&book, ask(4, 1), &nodes(&[1])), "only node 1 is eligible");
        assert!(could_ever_fit(&book, ask(6, 6), &nodes(&[0, 1])));
        assert!(!could_ever_fit(&book, ask(6, 1), &nodes(&[0, 1])));
        assert!(!could_ever_fit(&book, ask(6, 2), &nodes(&[0, 1])), "two pieces of 3 fit only node 0");
    }
}
