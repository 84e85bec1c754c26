//! Topology (contract 0.4.0): each node's domains, coarsest first (block, rack, ...), and
//! packing a job that no node holds whole into the fewest of them: [`FreeGpus::pack_job`] puts it
//! in the smallest domain that holds it, finest level first, and says where it went or why it
//! had to spread. [`FreeGpus::carve`] prefers the same domain when it spills over nodes.

use std::collections::HashMap;

use super::{FreeGpus, Placement, request};
use crate::units::NodeId;
use crate::view::{Job, Snapshot};
use wasmsched_rules::{Ask, first_fit_within, gpus_per_piece};

/// Per node, its domain at each level, interned: two nodes share domain id `d` at level `i`
/// when their domain lists agree on levels 0 to i.
#[derive(Clone, Debug, Default)]
pub(super) struct Domains {
    /// Per node, one id per level (`levels` of them).
    ids: Vec<Vec<u32>>,
    /// Per level, each id's name (the node's domain at that level).
    names: Vec<Vec<String>>,
}

impl Domains {
    /// The snapshot's nodes' domains; none when no node names any.
    pub(super) fn of(s: &Snapshot<'_>) -> Domains {
        let levels = s.nodes().map(|n| n.domains().len()).max().unwrap_or(0);
        if levels == 0 {
            return Domains::default();
        }
        let mut names: Vec<Vec<String>> = vec![Vec::new(); levels];
        let mut seen: Vec<HashMap<(u32, &str), u32>> = vec![HashMap::new(); levels];
        let mut ids = Vec::with_capacity(s.nodes().len());
        for n in s.nodes() {
            let d = n.domains();
            let mut parent = u32::MAX;
            let mut mine = Vec::with_capacity(levels);
            if d.is_empty() {
                // A node that names no domain shares none with another.
                for (level, named) in names.iter_mut().enumerate() {
                    mine.push(named.len() as u32);
                    named.push(String::new());
                    seen[level].insert((u32::MAX - n.id().0, ""), mine[level]);
                }
                ids.push(mine);
                continue;
            }
            for level in 0..levels {
                let name = d.get(level).map_or("", String::as_str);
                let next = seen[level].len() as u32;
                let id = *seen[level].entry((parent, name)).or_insert(next);
                if id == next {
                    names[level].push(name.to_string());
                }
                mine.push(id);
                parent = id;
            }
            ids.push(mine);
        }
        Domains { ids, names }
    }

    /// How many levels the nodes' domains have (0: no topology).
    pub(super) fn levels(&self) -> usize {
        self.names.len()
    }

    fn id(&self, node: u32, level: usize) -> Option<u32> {
        self.ids.get(node as usize).and_then(|d| d.get(level)).copied()
    }

    /// Of the domains at `level`, the one whose nodes (with the pieces each takes, from
    /// `nodes`) hold `pieces` pieces with the fewest to spare, the first on a tie; None when
    /// none holds them.
    fn tightest(&self, level: usize, nodes: &[(u32, u32)], pieces: u32) -> Option<u32> {
        let mut room: HashMap<u32, u64> = HashMap::new();
        for &(n, p) in nodes {
            if let Some(d) = self.id(n, level) {
                *room.entry(d).or_default() += u64::from(p);
            }
        }
        room.into_iter().filter(|&(_, r)| r >= u64::from(pieces)).min_by_key(|&(d, r)| (r, d)).map(|(d, _)| d)
    }

    /// The finest domain (its level and id) whose nodes hold `pieces` pieces, given per node
    /// the pieces it takes.
    pub(super) fn smallest(&self, nodes: &[(u32, u32)], pieces: u32) -> Option<(usize, u32)> {
        (0..self.levels()).rev().find_map(|level| self.tightest(level, nodes, pieces).map(|d| (level, d)))
    }

    /// Whether node `node` lies in domain `id` at `level`.
    pub(super) fn within(&self, node: u32, (level, id): (usize, u32)) -> bool {
        self.id(node, level) == Some(id)
    }

    fn name(&self, (level, id): (usize, u32)) -> &str {
        self.names.get(level).and_then(|n| n.get(id as usize)).map_or("", String::as_str)
    }
}

/// Where [`FreeGpus::pack_job`] put a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Packed {
    /// On one node.
    OneNode,
    /// Over several nodes of one domain: the finest that holds it.
    Within {
        /// The domain's level (0: the coarsest).
        level: usize,
        /// Its name (the nodes' domain at that level).
        domain: String,
    },
    /// Over several domains of the coarsest level (or nodes without topology): why.
    Spread(String),
}

impl FreeGpus {
    /// [`FreeGpus::find_packed`], and takes what it returns.
    pub fn pack_job(&mut self, job: &Job<'_>) -> Option<(Placement, Packed)> {
        let (placement, packed) = self.find_packed(job)?;
        self.take(&placement);
        Some((placement, packed))
    }

    /// Where queued `job` (what it asks and requests, on nodes its selector allows) starts in
    /// the fewest topology domains: on one node when one holds it (first fit), else over the
    /// nodes of the finest domain that holds it (the tightest such domain, its nodes with the
    /// most free GPUs first), else spread by first fit over the cluster, saying why. None when
    /// it does not fit now. Takes nothing.
    pub fn find_packed(&self, job: &Job<'_>) -> Option<(Placement, Packed)> {
        let ask = Ask { gpus: job.gpus_asked(), replicas: job.replicas() };
        let request = request(job);
        let found = self.find_job(job)?;
        let pieces = ask.pieces();
        let even = ask.gpus.is_multiple_of(pieces);
        if found.nodes().len() == 1 || !even {
            let how = if found.nodes().len() == 1 { Packed::OneNode } else { Packed::Spread(uneven(ask)) };
            return Some((found, how));
        }
        let per = if ask.gpus == 0 { 0 } else { gpus_per_piece(ask.gpus, ask.replicas) };
        let selector = job.node_selector();
        let takes = |n: u32| {
            let room = self.room_for(NodeId(n), request, selector);
            self.book.free_count(NodeId(n)).checked_div(per).map_or(room, |whole| room.min(whole))
        };
        let nodes: Vec<(u32, u32)> =
            (0..self.nodes.len() as u32).map(|n| (n, takes(n))).filter(|&(_, p)| p > 0).collect();
        let Some(domain) = self.domains.smallest(&nodes, pieces) else {
            let why = if self.domains.levels() == 0 {
                "the nodes name no topology domains".to_string()
            } else {
                format!("no domain has room for {pieces} pieces of {per} GPU(s) now")
            };
            return Some((found, Packed::Spread(why)));
        };
        let mut order: Vec<(u32, u32)> = nodes.into_iter().filter(|&(n, _)| self.domains.within(n, domain)).collect();
        order.sort_by_key(|&(n, p)| (std::cmp::Reverse(p), n));
        let order: Vec<NodeId> = order.into_iter().map(|(n, _)| NodeId(n)).collect();
        let fits = |n: NodeId| self.room_for(n, request, selector);
        let entries = first_fit_within(&self.book, ask, &order, fits)?;
        let placement = Placement::of(entries, ask, request, fits);
        let packed = Packed::Within { level: domain.0, domain: self.domains.name(domain).to_string() };
        Some((placement, packed))
    }

    /// The finest domain whose nodes of `nodes` hold `want` GPUs in pieces of `size`, for
    /// [`FreeGpus::carve`]: the nodes to try first.
    pub(super) fn domain_holding(&self, nodes: &[(NodeId, u32)], want: u32, size: u32) -> Option<(usize, u32)> {
        if self.domains.levels() == 0 {
            return None;
        }
        let size = size.max(1);
        let room: Vec<(u32, u32)> = nodes.iter().map(|(n, _)| (n.0, self.book.free_count(*n) / size)).collect();
        self.domains.smallest(&room, want.div_ceil(size))
    }

    /// Whether node `node` lies in `domain` ([`FreeGpus::domain_holding`]).
    pub(super) fn in_domain(&self, node: NodeId, domain: Option<(usize, u32)>) -> bool {
        domain.is_none_or(|d| self.domains.within(node.0, d))
    }
}

/// Why a job whose GPUs do not split evenly is not packed.
fn uneven(ask: Ask) -> String {
    format!("{} GPUs do not split evenly into {} pieces: first fit spreads them", ask.gpus, ask.pieces())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Inspect, TestWorld, job};
    use crate::{Bytes, Millicores, Runner};

    #[test]
    fn a_job_no_node_holds_goes_to_the_tightest_finest_domain() {
        let mut w = TestWorld::gpu_cluster(&[4, 4, 4, 4, 4, 4]);
        // Two blocks; block a has racks 1 (nodes 0, 1) and 2 (node 2); block b rack 1 (3, 4, 5).
        let domains = [["a", "1"], ["a", "1"], ["a", "2"], ["b", "1"], ["b", "1"], ["b", "1"]];
        for (n, d) in domains.iter().enumerate() {
            w.set_domains(NodeId(n as u32), d);
        }
        let busy = w.queue_job(job("busy", "cifar10").gpus(2));
        w.start(busy, NodeId(3), &[0, 1]);
        let a = w.queue_job(job("a", "cifar10").gpus(8).replicas(2));
        let b = w.queue_job(job("b", "cifar10").gpus(12).replicas(3));
        let c = w.queue_job(job("c", "cifar10").gpus(16).replicas(8));
        let mut r = Runner::from_policy(Inspect);
        r.decide(w.snapshot()).unwrap();
        let s = r.view();
        let mut free = FreeGpus::of(&s);
        let nodes = |p: &Placement| p.nodes().iter().map(|(n, _)| n.0).collect::<Vec<_>>();
        // Rack a/1 holds 8 GPUs exactly; rack b/1 has 10 free: a/1 is the tightest.
        let (p, how) = free.pack_job(&s.job(a).unwrap()).unwrap();
        assert_eq!((nodes(&p), how), (vec![0, 1], Packed::Within { level: 1, domain: "1".into() }));
        // 12 GPUs in pieces of 4: rack b/1 has 4 + 4 + 2 free, two pieces; block a has node 2.
        let (p, how) = free.pack_job(&s.job(b).unwrap()).unwrap();
        assert_eq!(how, Packed::Spread("no domain has room for 3 pieces of 4 GPU(s) now".into()));
        assert_eq!(p.gpus().count(), 12);
        assert!(free.pack_job(&s.job(c).unwrap()).is_none(), "2 GPUs are left");
    }

    #[test]
    fn one_node_first_and_the_room_of_each_piece_counts() {
        let mut w = TestWorld::new();
        let small = w.node_with_gpus("small", Millicores(2000), Bytes::gib(8), &[Bytes::gib(16); 4]);
        let big = w.node_with_gpus("big", Millicores(8000), Bytes::gib(8), &[Bytes::gib(16); 4]);
        w.set_domains(small, &["r1"]);
        w.set_domains(big, &["r1"]);
        let j = w.queue_job(job("j", "cifar10").gpus(2).replicas(2).requests(Millicores(1500), Bytes::gib(1)));
        let mut r = Runner::from_policy(Inspect);
        r.decide(w.snapshot()).unwrap();
        let s = r.view();
        let mut free = FreeGpus::of(&s);
        let (p, how) = free.pack_job(&s.job(j).unwrap()).unwrap();
        assert_eq!((p.node(), how), (big, Packed::OneNode), "small has room for one piece of 1500m only");
        assert_eq!(free.room(big).map(|r| r.cpu), Some(5000));
    }
}
