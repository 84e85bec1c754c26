//! A node's room for what a job's pieces request (contract 0.4.0): CPU and memory not requested
//! yet and pod slots left, how many pieces of a request it takes, and how many of a placed
//! job's pieces each of its nodes holds.

use crate::gpus_per_piece;
use crate::handles::NodeId;

/// A node's room: CPU (millicores) and memory (bytes) not requested yet, and the pieces (pods)
/// it takes still (`u32::MAX`: no limit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeRoom {
    /// Millicores not requested yet.
    pub cpu: u64,
    /// Bytes not requested yet.
    pub memory: u64,
    /// Pieces it takes still.
    pub pods: u32,
}

/// What one piece of a job requests of its node: CPU (millicores) and memory (bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Request {
    /// Millicores.
    pub cpu: u64,
    /// Bytes.
    pub memory: u64,
}

impl NodeRoom {
    /// No limit on anything: what a node without requests has.
    pub const UNLIMITED: NodeRoom = NodeRoom { cpu: u64::MAX, memory: u64::MAX, pods: u32::MAX };

    /// How many pieces requesting `r` it takes now.
    pub fn pieces(&self, r: Request) -> u32 {
        let by = |have: u64, want: u64| have.checked_div(want).map_or(u32::MAX, |n| n.min(u64::from(u32::MAX)) as u32);
        self.pods.min(by(self.cpu, r.cpu)).min(by(self.memory, r.memory))
    }

    /// `pieces` pieces requesting `r` land here.
    pub fn take(&mut self, r: Request, pieces: u32) {
        let p = u64::from(pieces);
        self.cpu = self.cpu.saturating_sub(r.cpu.saturating_mul(p));
        self.memory = self.memory.saturating_sub(r.memory.saturating_mul(p));
        if self.pods != u32::MAX {
            self.pods = self.pods.saturating_sub(pieces);
        }
    }

    /// `pieces` pieces requesting `r` leave (what [`NodeRoom::take`] took, given back).
    pub fn give(&mut self, r: Request, pieces: u32) {
        let p = u64::from(pieces);
        self.cpu = self.cpu.saturating_add(r.cpu.saturating_mul(p));
        self.memory = self.memory.saturating_add(r.memory.saturating_mul(p));
        if self.pods != u32::MAX {
            self.pods = self.pods.saturating_add(pieces);
        }
    }
}

/// How many of the `replicas` pieces of a job of `gpus` GPUs each node of its placement holds,
/// the nodes given with the GPUs they hold there, first node first: its GPUs there over a
/// piece's (one piece per node when its GPUs do not split evenly). A CPU job's pieces go to
/// its nodes in order, as many as `room(node)` takes (every piece to the first node when
/// the room is unlimited), what is left to the last node.
pub fn pieces_on(gpus: u32, replicas: u32, held: &[(NodeId, u32)], room: impl Fn(NodeId) -> u32) -> Vec<(NodeId, u32)> {
    let replicas = replicas.max(1);
    if gpus == 0 {
        let mut left = replicas;
        let mut out = Vec::with_capacity(held.len());
        for (i, &(node, _)) in held.iter().enumerate() {
            let take = if i + 1 == held.len() { left } else { room(node).min(left) };
            out.push((node, take));
            left -= take;
        }
        return out;
    }
    let per = gpus_per_piece(gpus, replicas);
    let even = gpus.is_multiple_of(replicas);
    held.iter().map(|&(node, count)| (node, if even { count.div_ceil(per) } else { 1 })).collect()
}

/// How many of a running job's pieces each of its nodes holds ([`pieces_on`]): the node of
/// each GPU it holds, in order (none for a CPU job, whose pieces are all on `node`).
pub fn pieces_held(
    gpus: u32,
    replicas: u32,
    gpu_nodes: impl IntoIterator<Item = NodeId>,
    node: NodeId,
) -> Vec<(NodeId, u32)> {
    let mut held: Vec<(NodeId, u32)> = Vec::new();
    for n in gpu_nodes {
        match held.iter_mut().find(|(m, _)| *m == n) {
            Some((_, count)) => *count += 1,
            None => held.push((n, 1)),
        }
    }
    if held.is_empty() {
        held.push((node, 0));
    }
    pieces_on(gpus, replicas, &held, |_| u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_takes_as_many_pieces_as_its_scarcest_resource_allows() {
        let room = NodeRoom { cpu: 4000, memory: 8 << 30, pods: 10 };
        assert_eq!(room.pieces(Request { cpu: 1000, memory: 1 << 30 }), 4, "CPU is scarcest");
        assert_eq!(room.pieces(Request { cpu: 0, memory: 3 << 30 }), 2, "memory is");
        assert_eq!(room.pieces(Request::default()), 10, "pods are");
        assert_eq!(NodeRoom::UNLIMITED.pieces(Request::default()), u32::MAX);
        let mut r = room;
        r.take(Request { cpu: 1000, memory: 1 << 30 }, 3);
        assert_eq!(r, NodeRoom { cpu: 1000, memory: 5 << 30, pods: 7 });
        r.give(Request { cpu: 1000, memory: 1 << 30 }, 3);
        assert_eq!(r, room);
    }

    #[test]
    fn pieces_follow_the_gpus_and_a_cpu_job_fills_its_nodes_in_order() {
        assert_eq!(pieces_on(8, 4, &[(NodeId(0), 4), (NodeId(3), 4)], |_| 0), [(NodeId(0), 2), (NodeId(3), 2)]);
        assert_eq!(
            pieces_on(3, 2, &[(NodeId(0), 2), (NodeId(1), 1)], |_| 0),
            [(NodeId(0), 1), (NodeId(1), 1)],
            "uneven: one per node"
        );
        assert_eq!(
            pieces_on(0, 5, &[(NodeId(2), 0), (NodeId(4), 0)], |n| if n == NodeId(2) { 3 } else { 9 }),
            [(NodeId(2), 3), (NodeId(4), 2)]
        );
        assert_eq!(pieces_on(0, 3, &[(NodeId(1), 0)], |_| u32::MAX), [(NodeId(1), 3)]);
        assert_eq!(pieces_held(4, 2, [5, 5, 2, 2].map(NodeId), NodeId(5)), [(NodeId(5), 1), (NodeId(2), 1)]);
        assert_eq!(pieces_held(0, 2, [], NodeId(7)), [(NodeId(7), 2)]);
    }
}
