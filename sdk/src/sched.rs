//! What a policy that places jobs needs: a book of free GPUs per node ([`FreeGpus`]) built
//! from a [`Snapshot`], first-fit placement over it ([`FreeGpus::fit`]), and the
//! [`Placement`] it returns, which becomes an [`Action`].
//!
//! Plan a round on the book: `release` the jobs you mean to preempt, `fit` the jobs you mean
//! to start (each fit takes its GPUs, so the next one sees what is left), and push the
//! actions, preemptions first. [`check`] says whether a decision's placements and
//! preemptions would pass the host's validation; policy tests run it on every decision.
//!
//! First fit, as the host's default placement: one node with enough free GPUs, nodes in
//! index order, its lowest free GPUs; else, for a job that may be split (`replicas` > 1), over
//! the nodes in index order in whole replicas. A CPU job (no GPUs) goes to the node with the
//! fewest running jobs per core, the lowest index on a tie.

use crate::decision::{Action, ActionKind, Decision};
use crate::units::{JobId, Millicores, NodeId};
use crate::view::{GpuSlot, Job, Snapshot};

/// Where a queued job starts: its GPUs on each node it uses, its first node first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    nodes: Vec<(NodeId, Vec<u32>)>,
}

impl Placement {
    /// One entry per node: the node and the indices of its GPUs the job gets (none for a CPU
    /// job).
    pub fn nodes(&self) -> &[(NodeId, Vec<u32>)] {
        &self.nodes
    }

    /// The job's first node (where a spread job does its CPU work).
    pub fn node(&self) -> NodeId {
        self.nodes[0].0
    }

    /// Every GPU it takes.
    pub fn gpus(&self) -> impl Iterator<Item = GpuSlot> + '_ {
        self.nodes.iter().flat_map(|(node, gpus)| gpus.iter().map(|&index| GpuSlot { node: *node, index }))
    }

    /// The action that starts `job` here (on free GPUs: not shared).
    pub fn action(&self, job: JobId) -> Action {
        Action::place_on(job, &self.nodes, false)
    }
}

/// One node's page of the book.
#[derive(Clone, Debug)]
struct NodePage {
    id: NodeId,
    cpu: Millicores,
    /// How many jobs hold each GPU; 0 is free.
    holders: Vec<u32>,
    /// Running jobs whose (first) node it is.
    jobs: u32,
}

impl NodePage {
    /// Its free GPUs, lowest index first.
    fn free(&self) -> impl Iterator<Item = u32> + '_ {
        self.holders.iter().enumerate().filter(|(_, h)| **h == 0).map(|(i, _)| i as u32)
    }

    fn free_count(&self) -> usize {
        self.holders.iter().filter(|h| **h == 0).count()
    }

    /// Running jobs per core, for a CPU job's choice of node.
    fn load(&self) -> f64 {
        f64::from(self.jobs) / self.cpu.cores().max(1e-3)
    }
}

/// The order in which first fit tries the nodes for a GPU job.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NodeOrder {
    /// Node index order (packs jobs onto the first nodes).
    #[default]
    Index,
    /// The nodes with the most free GPUs first, the lowest index on a tie (spreads jobs out,
    /// as Pollux's simulator of Tiresias does).
    MostFree,
}

/// Per node, which GPUs are free and how many jobs run there, as a round's plan leaves them.
#[derive(Clone, Debug)]
pub struct FreeGpus {
    nodes: Vec<NodePage>,
    order: NodeOrder,
}

impl FreeGpus {
    /// The cluster as the snapshot has it: a GPU is free when no running job holds it.
    pub fn of(s: &Snapshot<'_>) -> Self {
        let mut book = Self::idle(s);
        for job in s.jobs() {
            if let Some(page) = book.nodes.get_mut(job.node().0 as usize) {
                page.jobs += 1;
            }
            for g in job.gpus() {
                if let Some(h) = book.holder(*g) {
                    *h += 1;
                }
            }
        }
        book
    }

    /// The cluster with every GPU free and nothing running: what a job could ever get.
    pub fn idle(s: &Snapshot<'_>) -> Self {
        let nodes = s
            .nodes()
            .map(|n| NodePage { id: n.id(), cpu: n.cpu(), holders: vec![0; n.gpus().len()], jobs: 0 })
            .collect();
        FreeGpus { nodes, order: NodeOrder::Index }
    }

    /// The same book, trying the nodes in `order`.
    pub fn ordered(mut self, order: NodeOrder) -> Self {
        self.order = order;
        self
    }

    /// The pages in the order first fit tries them.
    fn in_order(&self) -> Vec<&NodePage> {
        let mut pages: Vec<&NodePage> = self.nodes.iter().collect();
        if self.order == NodeOrder::MostFree {
            pages.sort_by_key(|p| std::cmp::Reverse(p.free_count()));
        }
        pages
    }

    fn holder(&mut self, g: GpuSlot) -> Option<&mut u32> {
        self.nodes.get_mut(g.node.0 as usize)?.holders.get_mut(g.index as usize)
    }

    /// Every GPU of the cluster, free or not.
    pub fn gpu_count(&self) -> u32 {
        self.nodes.iter().map(|n| n.holders.len() as u32).sum()
    }

    /// The GPUs free now.
    pub fn free_count(&self) -> u32 {
        self.nodes.iter().map(|n| n.free_count() as u32).sum()
    }

    /// The free GPUs of `node`, lowest index first (none for a node that does not exist).
    pub fn free_on(&self, node: NodeId) -> Vec<u32> {
        self.nodes.get(node.0 as usize).map(|n| n.free().collect()).unwrap_or_default()
    }

    /// Plan a running job's preemption: its GPUs become free and its node has one job less.
    /// A queued job holds nothing, so releasing one changes nothing.
    pub fn release(&mut self, job: &Job<'_>) {
        if job.is_queued() {
            return;
        }
        for g in job.gpus() {
            if let Some(h) = self.holder(*g) {
                *h = h.saturating_sub(1);
            }
        }
        if let Some(page) = self.nodes.get_mut(job.node().0 as usize) {
            page.jobs = page.jobs.saturating_sub(1);
        }
    }

    /// Where a job of `gpus` GPUs in at most `replicas` pieces would start, by first fit;
    /// None when it does not fit now. Takes nothing ([`Self::fit`] does).
    pub fn find(&self, gpus: u32, replicas: u32) -> Option<Placement> {
        if gpus == 0 {
            let page = self.nodes.iter().min_by(|a, b| a.load().total_cmp(&b.load()))?;
            return Some(Placement { nodes: vec![(page.id, Vec::new())] });
        }
        let ask = gpus as usize;
        let pages = self.in_order();
        if let Some(page) = pages.iter().find(|n| n.free_count() >= ask) {
            return Some(Placement { nodes: vec![(page.id, page.free().take(ask).collect())] });
        }
        let pieces = replicas.max(1);
        if pieces == 1 {
            return None;
        }
        // Each node takes whole replicas; an uneven split (the host's rule) counts single GPUs.
        let per = if gpus.is_multiple_of(pieces) { (gpus / pieces) as usize } else { 1 };
        let mut nodes = Vec::new();
        let mut left = ask;
        for page in pages {
            if nodes.len() == pieces as usize {
                break;
            }
            let free = page.free_count();
            let take = (free - free % per).min(left);
            if take > 0 {
                nodes.push((page.id, page.free().take(take).collect()));
                left -= take;
            }
            if left == 0 {
                return Some(Placement { nodes });
            }
        }
        None
    }

    /// Like [`Self::find`], and takes what it returns.
    pub fn fit(&mut self, gpus: u32, replicas: u32) -> Option<Placement> {
        let placement = self.find(gpus, replicas)?;
        self.take(&placement);
        Some(placement)
    }

    /// [`Self::find`] for what `job` asks.
    pub fn find_job(&self, job: &Job<'_>) -> Option<Placement> {
        self.find(job.gpus_asked(), job.replicas())
    }

    /// [`Self::fit`] for what `job` asks.
    pub fn fit_job(&mut self, job: &Job<'_>) -> Option<Placement> {
        self.fit(job.gpus_asked(), job.replicas())
    }

    /// Book a placement: its GPUs are held and its first node has one job more.
    pub fn take(&mut self, placement: &Placement) {
        for g in placement.gpus() {
            if let Some(h) = self.holder(g) {
                *h += 1;
            }
        }
        if let Some(page) = self.nodes.get_mut(placement.node().0 as usize) {
            page.jobs += 1;
        }
    }
}

/// Whether the host would accept every placement and preemption of `d`, made on `s`: checked
/// in order against the world as the earlier actions leave it, as the host does. A placement
/// gives a queued job exactly the GPUs it asks for, on at most `replicas` nodes, each node of a
/// spread taking whole replicas, every GPU existing and free (unless shared), no node or GPU
/// twice; a preemption is of a running job and frees its GPUs; a job is placed, preempted or
/// stopped once at most. The first problem, in words.
pub fn check(s: &Snapshot<'_>, d: &Decision) -> Result<(), String> {
    let mut book = FreeGpus::of(s);
    let mut moved: Vec<JobId> = Vec::new();
    for (i, action) in d.actions().iter().enumerate() {
        let id = action.job();
        let Some(job) = s.job(id) else { return Err(format!("action {i}: {id} does not exist")) };
        let acts_once = matches!(action.kind(), ActionKind::Place(_) | ActionKind::Preempt | ActionKind::Stop);
        if acts_once && moved.contains(&id) {
            return Err(format!("action {i}: {id} was already placed, preempted or stopped"));
        }
        match action.kind() {
            ActionKind::Place(p) => {
                if !job.is_queued() {
                    return Err(format!("action {i}: {id} runs; only a queued job is placed"));
                }
                let pieces = job.replicas() as usize;
                let given: usize = p.nodes.iter().map(|e| e.gpus.len()).sum();
                if p.nodes.is_empty() || p.nodes.len() > pieces {
                    return Err(format!("action {i}: {id} placed on {} nodes, may use 1 to {pieces}", p.nodes.len()));
                }
                if given != job.gpus_asked() as usize {
                    return Err(format!("action {i}: {id} asks for {} GPUs, gets {given}", job.gpus_asked()));
                }
                let per = if job.gpus_asked().is_multiple_of(job.replicas()) {
                    (job.gpus_asked() / job.replicas()) as usize
                } else {
                    1
                };
                let mut taken = Vec::new();
                for (k, entry) in p.nodes.iter().enumerate() {
                    let node = NodeId(entry.node);
                    if s.node(node).is_none() || p.nodes[..k].iter().any(|e| e.node == entry.node) {
                        return Err(format!("action {i}: {id} names {node}, which is missing or named twice"));
                    }
                    if p.nodes.len() > 1 && (entry.gpus.is_empty() || !entry.gpus.len().is_multiple_of(per.max(1))) {
                        return Err(format!(
                            "action {i}: {id} gets {} GPUs of {node}, not whole replicas",
                            entry.gpus.len()
                        ));
                    }
                    let free = book.free_on(node);
                    let count = s.node(node).map_or(0, |n| n.gpus().len());
                    for (g, &index) in entry.gpus.iter().enumerate() {
                        if index as usize >= count || entry.gpus[..g].contains(&index) {
                            return Err(format!("action {i}: {id} names GPU {index} of {node}: missing or twice"));
                        }
                        if !p.share && !free.contains(&index) {
                            return Err(format!("action {i}: {id} names GPU {index} of {node}, which is held"));
                        }
                    }
                    taken.push((node, entry.gpus.clone()));
                }
                book.take(&Placement { nodes: taken });
            }
            ActionKind::Preempt => {
                if job.is_queued() {
                    return Err(format!("action {i}: {id} is queued; only a running job is preempted"));
                }
                book.release(&job);
            }
            ActionKind::Stop => book.release(&job),
            _ if job.is_queued() => return Err(format!("action {i}: {id} is queued; place it first")),
            _ => {}
        }
        if acts_once {
            moved.push(id);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{TestWorld, job};
    use crate::{Bytes, NoConfig, Policy, PolicyError, Runner};

    struct Inspect;
    impl Policy for Inspect {
        type Config = NoConfig;
        fn new(_: NoConfig) -> Result<Self, PolicyError> {
            Ok(Inspect)
        }
        fn decide(&mut self, _: &Snapshot) -> Result<Decision, PolicyError> {
            Ok(Decision::new())
        }
    }

    /// The world as a policy sees it.
    fn seen(world: &mut TestWorld) -> Runner<Inspect> {
        let mut r = Runner::from_policy(Inspect);
        r.decide(world.snapshot()).unwrap();
        r
    }

    fn entries(p: &Placement) -> Vec<(u32, Vec<u32>)> {
        p.nodes().iter().map(|(n, g)| (n.0, g.clone())).collect()
    }

    #[test]
    fn most_free_first_spreads_jobs_over_the_emptiest_nodes() {
        let mut w = TestWorld::gpu_cluster(&[4, 4, 2]);
        let a = w.queue_job(job("a", "cifar10").gpus(1));
        w.start(a, NodeId(0), &[0]);
        let r = seen(&mut w);
        let mut free = FreeGpus::of(&r.view()).ordered(NodeOrder::MostFree);
        assert_eq!(entries(&free.fit(1, 1).unwrap()), [(1, vec![0])], "node 1 has the most free GPUs");
        assert_eq!(entries(&free.fit(1, 1).unwrap()), [(0, vec![1])], "a tie of 3 free: the lower index");
        let mut packed = FreeGpus::of(&r.view());
        assert_eq!(entries(&packed.fit(1, 1).unwrap()), [(0, vec![1])], "index order packs node 0");
    }

    #[test]
    fn first_fit_takes_the_lowest_free_gpus_of_the_first_node_with_enough() {
        let mut w = TestWorld::gpu_cluster(&[4, 4]);
        let a = w.queue_job(job("a", "cifar10").gpus(2));
        w.start(a, NodeId(0), &[0, 2]);
        let r = seen(&mut w);
        let mut free = FreeGpus::of(&r.view());
        assert_eq!((free.gpu_count(), free.free_count()), (8, 6));
        assert_eq!(entries(&free.fit(2, 1).unwrap()), [(0, vec![1, 3])]);
        assert_eq!(entries(&free.fit(3, 1).unwrap()), [(1, vec![0, 1, 2])], "node 0 is full now");
        assert_eq!(free.fit(2, 1), None, "one GPU is left");
    }

    #[test]
    fn a_job_no_node_can_hold_spreads_in_whole_replicas_when_it_may() {
        let mut w = TestWorld::gpu_cluster(&[3, 3, 4]);
        let r = seen(&mut w);
        let free = FreeGpus::of(&r.view());
        assert_eq!(free.find(8, 1), None, "one replica never spreads");
        // Pieces of 2: two of node 0's three GPUs, two of node 1's, all four of node 2's.
        assert_eq!(entries(&free.find(8, 4).unwrap()), [(0, vec![0, 1]), (1, vec![0, 1]), (2, vec![0, 1, 2, 3])]);
        // Pieces of 3 fit nodes 0 and 1, not node 2 with its one left over.
        assert_eq!(entries(&free.find(6, 2).unwrap()), [(0, vec![0, 1, 2]), (1, vec![0, 1, 2])]);
        assert_eq!(free.find(8, 2), None, "pieces of 4 fit node 2 alone");
        assert_eq!(free.find(10, 2), None, "two pieces of 5 fit no node");
    }

    #[test]
    fn an_uneven_split_uses_single_gpus_on_no_more_nodes_than_replicas() {
        let mut w = TestWorld::gpu_cluster(&[2, 2, 2]);
        let r = seen(&mut w);
        let free = FreeGpus::of(&r.view());
        assert_eq!(entries(&free.find(3, 2).unwrap()), [(0, vec![0, 1]), (1, vec![0])]);
        assert_eq!(free.find(5, 2), None, "5 GPUs over 2 nodes of 2 do not fit");
    }

    #[test]
    fn releasing_a_running_job_frees_its_gpus_and_queued_jobs_hold_none() {
        let mut w = TestWorld::gpu_cluster(&[4]);
        let a = w.queue_job(job("a", "cifar10").gpus(4));
        let b = w.queue_job(job("b", "cifar10").gpus(4));
        w.start(a, NodeId(0), &[0, 1, 2, 3]);
        let r = seen(&mut w);
        let view = r.view();
        let mut free = FreeGpus::of(&view);
        assert_eq!(free.find(1, 1), None);
        free.release(&view.job(b).unwrap());
        assert_eq!(free.free_count(), 0, "a queued job frees nothing");
        free.release(&view.job(a).unwrap());
        assert_eq!(entries(&free.fit_job(&view.job(b).unwrap()).unwrap()), [(0, vec![0, 1, 2, 3])]);
        assert_eq!(free.free_count(), 0, "what fit returns is taken");
    }

    #[test]
    fn cpu_jobs_go_to_the_node_with_the_fewest_jobs_per_core() {
        let mut w = TestWorld::new();
        let small = w.node("small", Millicores(2000), Bytes::gib(8));
        let big = w.node("big", Millicores(8000), Bytes::gib(8));
        w.add_job_on(job("a", "ncf"), small);
        w.add_job_on(job("b", "ncf"), big);
        w.add_job_on(job("c", "ncf"), big);
        let r = seen(&mut w);
        let mut free = FreeGpus::of(&r.view());
        // small: 1 job on 2 cores; big: 2 jobs on 8 cores, then 3, then 4 (0.5 a core, a tie).
        assert_eq!(entries(&free.fit(0, 1).unwrap()), [(big.0, vec![])]);
        assert_eq!(entries(&free.fit(0, 1).unwrap()), [(big.0, vec![])]);
        assert_eq!(entries(&free.fit(0, 1).unwrap()), [(small.0, vec![])], "a tie goes to the lower index");
    }

    #[test]
    fn a_placement_becomes_a_place_action_with_one_entry_per_node() {
        let mut w = TestWorld::gpu_cluster(&[2, 2]);
        let r = seen(&mut w);
        let p = FreeGpus::of(&r.view()).find(4, 2).unwrap();
        assert_eq!(p.node(), NodeId(0));
        assert_eq!(p.gpus().count(), 4);
        let action = p.action(JobId(7)).because("first fit");
        assert_eq!(
            action,
            Action::place_on(JobId(7), &[(NodeId(0), vec![0, 1]), (NodeId(1), vec![0, 1])], false).because("first fit")
        );
    }

    #[test]
    fn the_idle_book_holds_every_gpu_free_whatever_runs() {
        let mut w = TestWorld::gpu_cluster(&[2]);
        let a = w.queue_job(job("a", "cifar10").gpus(2));
        w.start(a, NodeId(0), &[0, 1]);
        let r = seen(&mut w);
        assert_eq!(FreeGpus::of(&r.view()).free_count(), 0);
        assert_eq!(FreeGpus::idle(&r.view()).free_count(), 2);
    }

    #[test]
    fn check_accepts_what_the_host_accepts_and_names_what_it_refuses() {
        let mut w = TestWorld::gpu_cluster(&[2, 2]);
        let a = w.queue_job(job("a", "cifar10").gpus(2));
        let b = w.queue_job(job("b", "cifar10").gpus(2).replicas(2));
        w.start(a, NodeId(0), &[0, 1]);
        let r = seen(&mut w);
        let view = r.view();
        let ok = Decision::new().with(Action::preempt(a)).with(Action::place(b, NodeId(0), &[0, 1]));
        assert_eq!(check(&view, &ok), Ok(()), "a preemption frees GPUs for a later placement");
        let refused = [
            (Decision::new().with(Action::place(b, NodeId(0), &[0, 1])), "held"),
            (Decision::new().with(Action::place(b, NodeId(1), &[0])), "asks for 2"),
            (Decision::new().with(Action::place(b, NodeId(1), &[0, 0])), "twice"),
            (Decision::new().with(Action::place(b, NodeId(1), &[0, 2])), "missing"),
            (Decision::new().with(Action::place(a, NodeId(1), &[0, 1])), "only a queued job"),
            (Decision::new().with(Action::preempt(b)), "only a running job"),
            (Decision::new().with(Action::preempt(a)).with(Action::preempt(a)), "already"),
            (Decision::new().with(Action::place(JobId(9), NodeId(1), &[])), "does not exist"),
        ];
        for (d, why) in refused {
            let err = check(&view, &d).unwrap_err();
            assert!(err.contains(why), "{err} should say {why}");
        }
        let mut w = TestWorld::gpu_cluster(&[2, 2]);
        let c = w.queue_job(job("c", "cifar10").gpus(2).replicas(1));
        let d = w.queue_job(job("d", "cifar10").gpus(4).replicas(2));
        let r = seen(&mut w);
        let view = r.view();
        let spread = Action::place_on(c, &[(NodeId(0), vec![0]), (NodeId(1), vec![0])], false);
        assert!(check(&view, &Decision::new().with(spread)).unwrap_err().contains("may use 1 to 1"));
        let split = Action::place_on(d, &[(NodeId(0), vec![0, 1, 1]), (NodeId(1), vec![0])], false);
        assert!(check(&view, &Decision::new().with(split)).unwrap_err().contains("not whole replicas"));
    }
}
