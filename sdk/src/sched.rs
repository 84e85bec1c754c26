//! What a policy that places jobs needs: a book of free GPUs per node ([`FreeGpus`]) built
//! from a [`Snapshot`], first-fit placement over it ([`FreeGpus::fit`]), and the
//! [`Placement`] it returns, which becomes an [`Action`].
//!
//! A policy that plans a round per GPU type (Sia, Pollux, Gavel) groups the nodes into
//! [`Pool`]s, starts from [`FreeGpus::up`] (every GPU of a node that takes work free), takes
//! the GPUs of the jobs that keep theirs ([`FreeGpus::take_gpu`]), carves the others' out of
//! their pool ([`FreeGpus::carve`]: a node that holds the job whole, else pieces over few
//! nodes, in the order a [`Spill`] gives) and gives back what a job that does not fit had
//! claimed ([`FreeGpus::give_back`]); [`merge`] adds GPUs to a job's [`Entries`]. From such a
//! plan to actions ([`Pick`]: per job a pool and a count): [`keep`] keeps the jobs that stay
//! and lets elastic ones claim their own GPUs first, [`order_moves`] orders the moves so that
//! each lands once its GPUs are free ([`Holders`]), and [`fill_idle`] starts queued elastic
//! jobs left out on GPUs the plan left idle.
//!
//! Plan a round on the book: `release` the jobs you mean to preempt, `fit` the jobs you mean
//! to start (each fit takes its GPUs, so the next one sees what is left), and push the
//! actions, preemptions first. [`check`] says whether a decision would pass the host's
//! validation, with the host's own words; policy tests run it on every decision. [`verdicts`]
//! gives each action's outcome, as the host's audit log would (the conformance vectors in
//! `wit/conformance/checks.json` hold the host's outcomes, and this SDK's tests compare).
//!
//! The book, first fit and the checks are the host's own (`wasmsched-rules`): first fit puts a
//! job on the first node with enough free GPUs, its lowest free ones, else, for a job that may
//! be split (`replicas` > 1), over the nodes in whole replicas on at most `replicas` nodes.
//! Only the order in which the nodes are tried is the policy's ([`NodeOrder`]): index order
//! by default. Each backend's own default placement tries them in its own order (the
//! simulator: least loaded first; Kubernetes: Ready nodes with room, by name). A CPU job (no
//! GPUs) goes to the node with the fewest running jobs per core, the lowest index on a tie.

use std::collections::HashMap;
use std::rc::Rc;

use wasmsched_rules::check::{Act, Checker, Entry, JobNow, NodeCap, Room, World};
use wasmsched_rules::room::pieces_on;
use wasmsched_rules::{Ask, GpuBook, NodeRoom, Request, first_fit_within, gpus_per_piece};

use crate::bindings::wasmsched::policy::types::NodePlacement;
use crate::decision::{Action, ActionKind, Decision};
use crate::units::{JobId, Millicores, NodeId};
use crate::view::{GpuSlot, Job, Snapshot};

mod moves;
mod nodes;
mod pools;
mod room;
mod topology;

pub use moves::{Filled, Holders, Kept, Pick, Step, fill_idle, keep, order_moves};
use nodes::NodeIndex;
pub use pools::{Entries, Pieces, Pool, Spill, merge, pool_of};
pub use room::TenantRoom;
pub use topology::Packed;

/// Per node selector (its labels), which nodes carry them, in node order.
type Selects = HashMap<Vec<(String, String)>, Vec<bool>>;

/// The holder the book records for GPUs a round's plan takes (the job is named only when the
/// placement becomes an action).
const PLANNED: JobId = JobId(u32::MAX);

/// Where a queued job starts: its GPUs on each node it uses, its first node first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    nodes: Vec<(NodeId, Vec<u32>)>,
    /// What each piece requests, and how many pieces each node takes (in `nodes`' order).
    request: Request,
    pieces: Vec<u32>,
}

impl Placement {
    /// One entry per node: the node and the indices of its GPUs the job gets (none for a CPU
    /// job).
    pub fn nodes(&self) -> &[(NodeId, Vec<u32>)] {
        &self.nodes
    }

    /// Its entries, one per node (what [`Action::place_on`] and [`Action::resize`] take).
    pub fn into_nodes(self) -> Entries {
        self.nodes
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

    /// First fit's entries as a placement whose pieces request `request`, each node taking
    /// what its room allows (`room`, for a CPU job's pieces).
    fn of(
        entries: Vec<wasmsched_rules::NodePlacement>,
        ask: Ask,
        request: Request,
        room: impl Fn(NodeId) -> u32,
    ) -> Placement {
        let held: Vec<(NodeId, u32)> = entries.iter().map(|e| (e.node, e.gpus.len() as u32)).collect();
        let pieces = pieces_on(ask.gpus, ask.replicas, &held, room).into_iter().map(|(_, p)| p).collect();
        Placement { nodes: entries.into_iter().map(|e| (e.node, e.gpus)).collect(), request, pieces }
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
    book: GpuBook,
    /// Per node, its CPU and the running jobs whose (first) node it is.
    nodes: Vec<(Millicores, u32)>,
    order: NodeOrder,
    /// The book's free GPUs and `nodes`' jobs per core, indexed: first fit asks it which
    /// nodes to try instead of walking them all.
    index: NodeIndex,
    /// Per node, its room for requests as the plan leaves it.
    room: Vec<NodeRoom>,
    /// Per node selector the snapshot's jobs give, which nodes carry its labels.
    selects: Rc<Selects>,
    /// Per node, its topology domains (interned per level), as [`topology`] reads them.
    domains: Rc<topology::Domains>,
}

/// The holder [`FreeGpus::of`] books the GPUs of a node that does not take work to.
pub const DOWN: JobId = JobId(u32::MAX);

/// Running jobs per core: the order in which CPU jobs try the nodes, fewest first.
fn load((cpu, jobs): (Millicores, u32)) -> f64 {
    f64::from(jobs) / cpu.cores().max(1e-3)
}

impl FreeGpus {
    /// The cluster as the snapshot has it: a GPU is free when no running job holds it and its
    /// node takes work (a node that does not is full: [`DOWN`] holds its GPUs, and it counts
    /// as loaded beyond any other for CPU jobs).
    pub fn of(s: &Snapshot<'_>) -> Self {
        let (mut book, mut nodes) = Self::down(s);
        for job in s.jobs() {
            if let Some(node) = nodes.get_mut(job.node().0 as usize) {
                node.1 = node.1.saturating_add(1);
            }
            for g in job.gpus() {
                book.hold(g.node, g.index, job.id());
            }
        }
        Self::indexed(book, nodes, s, s.nodes().map(|n| n.room().into()).collect())
    }

    /// The cluster with every GPU free and nothing running: what a job could ever get (each
    /// node's room its whole CPU and memory).
    pub fn idle(s: &Snapshot<'_>) -> Self {
        let book = GpuBook::new(s.nodes().map(|n| n.gpus().len() as u32));
        let room = s.nodes().map(|n| NodeRoom { cpu: n.cpu().0, memory: n.memory().0, pods: u32::MAX }).collect();
        Self::indexed(book, s.nodes().map(|n| (n.cpu(), 0)).collect(), s, room)
    }

    /// Every GPU of a node that takes work free, whatever runs (the GPUs of a node that does
    /// not are held by [`DOWN`]): the book a round's plan that reassigns every GPU starts from.
    /// Each node's room is what it would be with none of the running jobs there.
    pub fn up(s: &Snapshot<'_>) -> Self {
        let (book, nodes) = Self::down(s);
        let mut room: Vec<NodeRoom> = s.nodes().map(|n| n.room().into()).collect();
        for job in s.jobs() {
            for (node, pieces) in pieces_held(&job) {
                if let Some(r) = room.get_mut(node.index()) {
                    r.give(request(&job), pieces);
                }
            }
        }
        Self::indexed(book, nodes, s, room)
    }

    /// The book and per-node jobs of the cluster with nothing running: a node that does not
    /// take work is full ([`DOWN`] holds its GPUs) and loaded beyond any other.
    fn down(s: &Snapshot<'_>) -> (GpuBook, Vec<(Millicores, u32)>) {
        let mut book = GpuBook::new(s.nodes().map(|n| n.gpus().len() as u32));
        let mut nodes: Vec<(Millicores, u32)> = s.nodes().map(|n| (n.cpu(), 0)).collect();
        for n in s.nodes().filter(|n| !n.takes_work()) {
            for g in 0..n.gpus().len() as u32 {
                book.hold(n.id(), g, DOWN);
            }
            nodes[n.id().0 as usize].1 = u32::MAX;
        }
        (book, nodes)
    }

    fn indexed(book: GpuBook, nodes: Vec<(Millicores, u32)>, s: &Snapshot<'_>, room: Vec<NodeRoom>) -> Self {
        let index = Self::index_of(&book, &nodes);
        let mut selects = Selects::new();
        for job in s.queue().chain(s.jobs()) {
            let selector = job.node_selector();
            if !selector.is_empty() && !selects.contains_key(selector) {
                selects.insert(selector.to_vec(), s.nodes().map(|n| n.selects(selector)).collect());
            }
        }
        let domains = Rc::new(topology::Domains::of(s));
        FreeGpus { book, nodes, order: NodeOrder::Index, index, room, selects: Rc::new(selects), domains }
    }

    /// How many pieces requesting `request` node `node` takes now, for a job with node
    /// selector `selector` (none where the node lacks its labels).
    fn room_for(&self, node: NodeId, request: Request, selector: &[(String, String)]) -> u32 {
        let selected =
            selector.is_empty() || self.selects.get(selector).is_some_and(|m| m.get(node.index()) == Some(&true));
        if !selected {
            return 0;
        }
        self.room.get(node.index()).map_or(0, |r| r.pieces(request))
    }

    fn index_of(book: &GpuBook, nodes: &[(Millicores, u32)]) -> NodeIndex {
        NodeIndex::new(
            (0..nodes.len() as u32).map(|n| book.free_count(NodeId(n))),
            nodes.iter().map(|&n| load(n)).collect(),
        )
    }

    /// The same book, trying the nodes in `order`.
    pub fn ordered(mut self, order: NodeOrder) -> Self {
        self.order = order;
        self
    }

    /// The nodes first fit needs to try for `ask` to give the answer it would give trying
    /// every node in order (index order, most free first, or for a CPU job fewest jobs per
    /// core first), node `n` taking at most `fits(n)` of its pieces: the first node with enough
    /// free GPUs and room for every piece alone; else, for a job that may be split, the first
    /// `replicas` nodes in that order with room for a whole piece (first fit takes nothing
    /// from the others); else none.
    fn to_try(&self, ask: Ask, fits: &impl Fn(NodeId) -> u32) -> Vec<NodeId> {
        self.to_try_indexed(ask, &|n| fits(NodeId(n))).into_iter().map(NodeId).collect()
    }

    /// [`Self::to_try`] on the index's node numbers.
    fn to_try_indexed(&self, ask: Ask, fits: &impl Fn(u32) -> u32) -> Vec<u32> {
        let pieces = ask.pieces();
        if ask.gpus == 0 {
            if let Some(n) = self.index.least_loaded_where(|n| fits(n) >= pieces) {
                return vec![n];
            }
            if pieces == 1 {
                return Vec::new();
            }
            return self.index.loaded_where(|n| fits(n) > 0, pieces as usize);
        }
        // Nodes with at least `level` free GPUs in the book's order, from `from` on.
        let one = match self.order {
            NodeOrder::Index => self.first_where(0, ask.gpus, |n| fits(n) >= pieces),
            NodeOrder::MostFree => (ask.gpus..=self.index.most_free())
                .rev()
                .find_map(|level| self.first_where(0, level, |n| self.index.free(n) == level && fits(n) >= pieces)),
        };
        if let Some(node) = one {
            return vec![node];
        }
        if pieces == 1 {
            return Vec::new();
        }
        let per = gpus_per_piece(ask.gpus, ask.replicas);
        let mut nodes = Vec::with_capacity(pieces as usize);
        match self.order {
            NodeOrder::Index => {
                let mut from = 0;
                while nodes.len() < pieces as usize
                    && let Some(n) = self.first_where(from, per, |n| fits(n) > 0)
                {
                    nodes.push(n);
                    from = n as usize + 1;
                }
            }
            NodeOrder::MostFree => {
                // Most free first: every node with `level` free GPUs, in index order, from the
                // most down; those with more were taken at an earlier level.
                for level in (per..=self.index.most_free()).rev() {
                    let mut from = 0;
                    while nodes.len() < pieces as usize
                        && let Some(n) = self.first_where(from, level, |n| self.index.free(n) == level && fits(n) > 0)
                    {
                        nodes.push(n);
                        from = n as usize + 1;
                    }
                    if nodes.len() == pieces as usize {
                        break;
                    }
                }
            }
        }
        nodes
    }

    /// The first node from `from` on, in index order, with at least `gpus` (one or more) free
    /// GPUs and for which `ok` holds.
    fn first_where(&self, mut from: usize, gpus: u32, ok: impl Fn(u32) -> bool) -> Option<u32> {
        while let Some(n) = self.index.first_with(from, gpus) {
            if ok(n) {
                return Some(n);
            }
            from = n as usize + 1;
        }
        None
    }

    /// Every GPU of the cluster, free or not.
    pub fn gpu_count(&self) -> u32 {
        self.book.gpu_count()
    }

    /// The GPUs free now.
    pub fn free_count(&self) -> u32 {
        self.book.free_total()
    }

    /// The free GPUs of `node`, lowest index first (none for a node that does not exist).
    pub fn free_on(&self, node: NodeId) -> Vec<u32> {
        self.book.free_on(node).collect()
    }

    /// Whether GPU `gpu` exists and is free.
    pub fn is_free(&self, gpu: GpuSlot) -> bool {
        self.book.is_free(gpu.node, gpu.index)
    }

    /// Take GPU `gpu` for the plan if it is free (a job that keeps it, say); whether it was.
    pub fn take_gpu(&mut self, gpu: GpuSlot) -> bool {
        if !self.is_free(gpu) {
            return false;
        }
        self.book.hold(gpu.node, gpu.index, PLANNED);
        self.index.set_free(gpu.node.0, self.book.free_count(gpu.node));
        true
    }

    /// Free again GPUs the plan took ([`Self::take_gpu`], [`Self::carve`], [`Self::fit_on`]).
    pub fn give_back(&mut self, entries: &[(NodeId, Vec<u32>)]) {
        for (node, gpus) in entries {
            for &index in gpus {
                self.book.release(*node, index, PLANNED);
            }
            self.index.set_free(node.0, self.book.free_count(*node));
        }
    }

    /// First fit of `gpus` GPUs in at most `replicas` pieces over `nodes` alone, tried in the
    /// order given; takes what it returns. None when they do not fit there now.
    pub fn fit_on(&mut self, nodes: &[NodeId], gpus: u32, replicas: u32) -> Option<Placement> {
        let ask = Ask { gpus, replicas };
        let fits = |n: NodeId| self.room_for(n, Request::default(), &[]);
        let entries = first_fit_within(&self.book, ask, nodes, fits)?;
        let placement = Placement::of(entries, ask, Request::default(), fits);
        self.hold_placement(&placement);
        Some(placement)
    }

    /// Plan a running job's preemption: its GPUs become free and its node has one job less.
    /// A queued job holds nothing, so releasing one changes nothing.
    pub fn release(&mut self, job: &Job<'_>) {
        if job.is_queued() {
            return;
        }
        for g in job.gpus() {
            self.book.release(g.node, g.index, job.id());
            self.index.set_free(g.node.0, self.book.free_count(g.node));
        }
        self.room_of_job(job, NodeRoom::give);
        self.count_job(job.node(), |jobs| jobs.saturating_sub(1));
    }

    /// Change each node's room by running `job`'s pieces there (`give` them back or `take`
    /// them again).
    fn room_of_job(&mut self, job: &Job<'_>, change: fn(&mut NodeRoom, Request, u32)) {
        let request = request(job);
        for (node, pieces) in pieces_held(job) {
            if let Some(r) = self.room.get_mut(node.index()) {
                change(r, request, pieces);
            }
        }
    }

    /// [`Self::release`] for each of `jobs`, the index made again once at the end rather
    /// than kept for each GPU.
    pub fn release_all<'j>(&mut self, jobs: impl IntoIterator<Item = &'j Job<'j>>) {
        for job in jobs.into_iter().filter(|j| !j.is_queued()) {
            for g in job.gpus() {
                self.book.release(g.node, g.index, job.id());
            }
            self.room_of_job(job, NodeRoom::give);
            if let Some(n) = self.nodes.get_mut(job.node().0 as usize) {
                n.1 = n.1.saturating_sub(1);
            }
        }
        self.index = Self::index_of(&self.book, &self.nodes);
    }

    /// Node `node` runs `change(jobs)` jobs now.
    fn count_job(&mut self, node: NodeId, change: impl FnOnce(u32) -> u32) {
        if let Some(n) = self.nodes.get_mut(node.0 as usize) {
            n.1 = change(n.1);
            let load = load(*n);
            self.index.set_load(node.0, load);
        }
    }

    /// Undo [`Self::release`] of a running job: it holds its GPUs again and its node has one
    /// job more (a plan that released it to see what would fit, and keeps it).
    pub fn hold(&mut self, job: &Job<'_>) {
        if job.is_queued() {
            return;
        }
        for g in job.gpus() {
            self.book.hold(g.node, g.index, job.id());
            self.index.set_free(g.node.0, self.book.free_count(g.node));
        }
        self.room_of_job(job, NodeRoom::take);
        self.count_job(job.node(), |jobs| jobs + 1);
    }

    /// Where a job of `gpus` GPUs in at most `replicas` pieces would start, by first fit;
    /// None when it does not fit now. Takes nothing ([`Self::fit`] does). Its pieces request
    /// nothing but a pod slot each; [`Self::find_job`] fits what a job requests.
    pub fn find(&self, gpus: u32, replicas: u32) -> Option<Placement> {
        self.find_asking(Ask { gpus, replicas }, Request::default(), &[])
    }

    /// First fit of `ask`, each piece requesting `request` on a node that carries `selector`.
    fn find_asking(&self, ask: Ask, request: Request, selector: &[(String, String)]) -> Option<Placement> {
        let fits = |n: NodeId| self.room_for(n, request, selector);
        let entries = first_fit_within(&self.book, ask, &self.to_try(ask, &fits), fits)?;
        Some(Placement::of(entries, ask, request, fits))
    }

    /// Like [`Self::find`], and takes what it returns.
    pub fn fit(&mut self, gpus: u32, replicas: u32) -> Option<Placement> {
        let placement = self.find(gpus, replicas)?;
        self.take(&placement);
        Some(placement)
    }

    /// [`Self::find`] for what `job` asks: its GPUs, on nodes that carry its node selector's
    /// labels and have room for what each of its pieces requests.
    pub fn find_job(&self, job: &Job<'_>) -> Option<Placement> {
        self.find_asking(Ask { gpus: job.gpus_asked(), replicas: job.replicas() }, request(job), job.node_selector())
    }

    /// [`Self::fit`] for what `job` asks ([`Self::find_job`]).
    pub fn fit_job(&mut self, job: &Job<'_>) -> Option<Placement> {
        let placement = self.find_job(job)?;
        self.take(&placement);
        Some(placement)
    }

    /// Where queued `job` fits once some running jobs are preempted, and which of them it
    /// needs. `victims` (a key of the caller's, and the job) are released one by one in their
    /// order, each only if `release(key)` agrees (asked in that order, so it may keep its own
    /// count), until `job` fits; of those released, only the ones whose GPUs the placement
    /// takes are needed, at most `most` of them (None when more). The plan is left as it was.
    pub fn make_room<'a, K: Copy>(
        &mut self,
        job: &Job<'_>,
        victims: impl IntoIterator<Item = (K, Job<'a>)>,
        mut release: impl FnMut(K) -> bool,
        most: usize,
    ) -> Option<(Placement, Vec<K>)> {
        let mut released = Vec::new();
        let mut found = None;
        for (key, victim) in victims {
            if !release(key) {
                continue;
            }
            self.release(&victim);
            released.push((key, victim));
            found = self.find_job(job);
            if found.is_some() {
                break;
            }
        }
        for (_, victim) in &released {
            self.hold(victim);
        }
        let p = found?;
        let taken: Vec<GpuSlot> = p.gpus().collect();
        let needed: Vec<K> = released
            .into_iter()
            .filter(|(_, v)| v.gpus().iter().any(|g| taken.contains(g)))
            .map(|(key, _)| key)
            .collect();
        (needed.len() <= most).then_some((p, needed))
    }

    /// Book a placement: its GPUs are held, its pieces take their nodes' room, and its first
    /// node has one job more.
    pub fn take(&mut self, placement: &Placement) {
        self.hold_placement(placement);
        self.count_job(placement.node(), |jobs| jobs.saturating_add(1));
    }

    /// Hold a placement's GPUs and take its pieces out of their nodes' room.
    fn hold_placement(&mut self, placement: &Placement) {
        for g in placement.gpus() {
            self.book.hold(g.node, g.index, PLANNED);
            self.index.set_free(g.node.0, self.book.free_count(g.node));
        }
        for ((node, _), &pieces) in placement.nodes.iter().zip(&placement.pieces) {
            if let Some(r) = self.room.get_mut(node.0 as usize) {
                r.take(placement.request, pieces);
            }
        }
    }

    /// Node `node`'s room as the plan leaves it (none for a node that does not exist).
    pub fn room(&self, node: NodeId) -> Option<NodeRoom> {
        self.room.get(node.0 as usize).copied()
    }
}

/// What each piece of `job` requests, as the rules count it.
fn request(job: &Job<'_>) -> Request {
    let (cpu, memory) = job.requests();
    Request { cpu: cpu.0, memory: memory.0 }
}

/// How many of running `job`'s pieces each of its nodes holds.
fn pieces_held(job: &Job<'_>) -> Vec<(NodeId, u32)> {
    let held = job.gpus().iter().map(|g| g.node);
    wasmsched_rules::room::pieces_held(job.gpus_asked(), job.replicas(), held, job.node())
}

/// First fit, as FIFO would, for the queued jobs that ask for no GPU and that `keep` keeps: what
/// a policy planning GPUs leaves to the simplest rule. Each action's reason is `"{policy}: a CPU
/// job, first fit"`.
pub fn first_fit_cpu_jobs(s: &Snapshot<'_>, d: &mut Decision, policy: &str, keep: impl Fn(&Job<'_>) -> bool) {
    let mut free = FreeGpus::of(s);
    for job in s.queue().filter(|j| j.gpus_asked() == 0 && keep(j)) {
        if let Some(p) = free.fit_job(&job) {
            d.push(p.action(job.id()).because(format!("{policy}: a CPU job, first fit")));
        }
    }
}

/// Whether the host would accept every action of `d`, made on `s`: checked in order against
/// the world as the earlier actions leave it, by the host's own rules. A placement gives a
/// queued job exactly the GPUs it asks for, on at most `replicas` nodes, each node of a spread
/// taking whole replicas, every GPU existing and free (unless shared), no node or GPU twice; a
/// preemption is of a running job and frees its GPUs; a job placed, preempted or stopped is
/// not acted on again in the same decision; limits stay within the node; the decision holds no
/// more actions than the host accepts for the jobs there are. The first problem, as
/// `action N: ` and the host's words (the host's words alone for a decision too large).
pub fn check(s: &Snapshot<'_>, d: &Decision) -> Result<(), String> {
    let first = verdicts(s, d)?.into_iter().enumerate().find_map(|(i, v)| v.err().map(|p| format!("action {i}: {p}")));
    first.map_or(Ok(()), Err)
}

/// What the host's validation makes of each action of `d`, made on `s`, in order: accepted, or
/// refused with the host's words; a refused action changes nothing for the actions after it.
/// Err, with the host's words, when the decision is refused whole for its size.
pub fn verdicts(s: &Snapshot<'_>, d: &Decision) -> Result<Vec<Result<(), String>>, String> {
    let room = Room {
        jobs: s.job_count() + s.queue_len(),
        queued: s.queue_len(),
        nodes: s.nodes().len(),
        gpus_per_node: s.nodes().map(|n| n.gpus().len()).max().unwrap_or(0),
    };
    wasmsched_rules::check::size(d.actions().iter().map(act), room).map_err(|e| e.to_string())?;
    let world = Seen(s);
    let mut checker = Checker::new(FreeGpus::of(s).book).with_tenants(s.ledger());
    let verdict = |action: &Action| checker.check(&world, action.job(), &act(action)).map_err(|p| p.to_string());
    Ok(d.actions().iter().map(verdict).collect())
}

/// An action as the rules see it.
fn act(action: &Action) -> Act<'_, NodePlacement> {
    match action.kind() {
        ActionKind::SetCpu(m) => Act::SetCpu(*m),
        ActionKind::SetMemory(b) => Act::SetMemory(*b),
        ActionKind::Migrate(to) => Act::Migrate(NodeId(*to)),
        ActionKind::Deliver => Act::Deliver,
        ActionKind::Stop => Act::Stop,
        ActionKind::SetGpuShare(g) => Act::SetGpuShare { gpu: g.gpu, percent: g.percent },
        ActionKind::Place(p) => Act::Place { nodes: &p.nodes[..], share: p.share },
        ActionKind::Preempt => Act::Preempt,
        ActionKind::Resize(r) => {
            Act::Resize { nodes: &r.placement.nodes[..], share: r.placement.share, batch_size: r.batch_size }
        }
    }
}

/// The snapshot, as the rules read it.
struct Seen<'s, 'a>(&'s Snapshot<'a>);

impl World for Seen<'_, '_> {
    fn node(&self, node: NodeId) -> Option<NodeCap<'_>> {
        self.0.node(node).map(|n| NodeCap {
            name: n.name(),
            cpu_millicores: n.cpu().0,
            memory_bytes: n.memory().0,
            gpus: n.gpus().len() as u32,
            down: !n.takes_work(),
        })
    }

    fn node_count(&self) -> usize {
        self.0.nodes().len()
    }

    fn job(&self, job: JobId) -> Option<JobNow<'_>> {
        let j = self.0.job(job)?;
        let scaling = j.scaling();
        Some(JobNow {
            gpu_counts: &scaling.gpu_counts,
            batch_sizes: (scaling.batch_size_min, scaling.batch_size_max),
            gpus: j.gpus_asked(),
            replicas: j.declared_replicas(),
            node: (!j.is_queued()).then(|| j.node()),
            memory_used_bytes: j.memory_use().0,
            tenant: self.0.tenant_index(j.tenant()),
        })
    }

    fn gpus_of(&self, job: JobId) -> Vec<(NodeId, u32)> {
        self.0.job(job).map(|j| j.gpus().iter().map(|g| (g.node, g.index)).collect()).unwrap_or_default()
    }

    fn memory_used_on(&self, node: NodeId) -> u64 {
        self.0.jobs_on(node).filter(|j| !j.is_queued()).map(|j| j.memory_use().0).sum()
    }
}

impl Entry for NodePlacement {
    fn node(&self) -> NodeId {
        NodeId(self.node)
    }
    fn gpus(&self) -> &[u32] {
        &self.gpus
    }
}

#[cfg(test)]
mod tests;
