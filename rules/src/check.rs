//! The checks every action passes before it applies, in the order the host makes them, each
//! refusal a typed [`Problem`] whose text is what the log and the audit trail show.
//!
//! A decision is checked action by action against the world as its earlier accepted actions
//! leave it ([`Checker`]): a preemption frees GPUs that a later placement in the same
//! decision may take, and a job placed, preempted or stopped by the decision is not acted on
//! again in it. The world is read through [`World`], so the host (its telemetry) and a policy
//! (the SDK's snapshot) run the same checks.

use std::collections::HashSet;
use std::fmt;

use crate::book::GpuBook;
pub use crate::handles::Entry;
use crate::handles::{JobId, NodeId};
use crate::tenants::{Ledger, OverLimit};
use crate::{MIN_CPU_MILLICORES, MIN_MEMORY_BYTES, gpus_per_piece, max_actions};

/// A node's capacity, as the checks need it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeCap<'a> {
    /// Its name, for messages.
    pub name: &'a str,
    /// CPU, millicores.
    pub cpu_millicores: u64,
    /// Memory, bytes.
    pub memory_bytes: u64,
    /// How many GPUs it has.
    pub gpus: u32,
    /// Whether it cannot take work now (NotReady, cordoned): nothing is placed, moved or
    /// resized onto it.
    pub down: bool,
}

/// A live job, as the checks need it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobNow<'a> {
    /// The GPUs it asks for.
    pub gpus: u32,
    /// Into how many pieces it may be split.
    pub replicas: u32,
    /// Where it runs (its first node); None while it waits in the queue.
    pub node: Option<NodeId>,
    /// The memory it uses now, bytes.
    pub memory_used_bytes: u64,
    /// The GPU counts it can run on, ascending (a rigid job: its `gpus` alone).
    pub gpu_counts: &'a [u32],
    /// The global batch sizes it accepts (0, 0: none to set).
    pub batch_sizes: (u32, u32),
    /// Its tenant's index in the checker's [`Ledger`]; None: no tenant limits it.
    pub tenant: Option<usize>,
}

/// What the checks read of the world a decision was made for.
pub trait World {
    /// Node `node`; None when there is no such node.
    fn node(&self, node: NodeId) -> Option<NodeCap<'_>>;
    /// How many nodes there are.
    fn node_count(&self) -> usize;
    /// Live job `job` (running or queued); None when it does not exist or has ended.
    fn job(&self, job: JobId) -> Option<JobNow<'_>>;
    /// The GPUs running job `job` holds, as (node, index).
    fn gpus_of(&self, job: JobId) -> Vec<(NodeId, u32)>;
    /// The memory the jobs running on `node` use, bytes.
    fn memory_used_on(&self, node: NodeId) -> u64;
}

/// An action, as the checks see it.
#[derive(Debug, PartialEq, Eq)]
pub enum Act<'a, E> {
    /// Cap the CPU (None lifts the cap), millicores.
    SetCpu(Option<u64>),
    /// Cap the memory (None lifts the cap), bytes.
    SetMemory(Option<u64>),
    /// Restart on another node.
    Migrate(NodeId),
    /// Hand the model over.
    Deliver,
    /// End the job.
    Stop,
    /// Set its share of GPU `gpu` of its node.
    SetGpuShare {
        /// The GPU's index on the job's node.
        gpu: u32,
        /// The share, percent.
        percent: u8,
    },
    /// Start a queued job.
    Place {
        /// One entry per node.
        nodes: &'a [E],
        /// Whether it may share GPUs others hold.
        share: bool,
    },
    /// Send a running job back to the queue.
    Preempt,
    /// Restart a running job on other GPUs, at another batch size.
    Resize {
        /// One entry per node: its GPUs from now on.
        nodes: &'a [E],
        /// Whether it may share GPUs others hold.
        share: bool,
        /// Its new global batch size; None keeps it.
        batch_size: Option<u32>,
    },
}

// By hand: it only borrows its entries, so it copies whatever they are.
impl<E> Clone for Act<'_, E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E> Copy for Act<'_, E> {}

/// Why an action is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs, reason = "each field is named for what it holds; the variant's text says the rest")]
pub enum Problem {
    /// The job is not live.
    NoSuchJob { job: JobId },
    /// The decision already placed, preempted or stopped it.
    AlreadyMoved { job: JobId },
    /// Only a place or a stop acts on a queued job.
    Queued { job: JobId },
    /// A CPU cap below what a container runtime accepts.
    CpuBelowMinimum { millicores: u64 },
    /// A CPU cap above the node's CPU.
    CpuAboveNode { millicores: u64, node: String, has: u64 },
    /// A memory cap below what a container runtime accepts.
    MemoryBelowMinimum { bytes: u64 },
    /// A memory cap above the node's memory.
    MemoryAboveNode { bytes: u64, node: String, has: u64 },
    /// A node that does not exist.
    NoSuchNode { node: NodeId, nodes: usize },
    /// A migration to the node the job runs on.
    AlreadyOn { job: JobId, node: String },
    /// A migration of a job that spans several nodes.
    SpansNodes { job: JobId },
    /// A migration to a node without as many free GPUs as the job holds.
    TooFewFreeGpus { node: String, free: u32, job: JobId, holds: usize },
    /// A migration to a node whose memory is used up.
    NodeFull { node: String, used: u64, capacity: u64, needs: u64 },
    /// A GPU the node does not have.
    NoSuchGpu { node: String, gpu: u32, count: u32 },
    /// A GPU share outside 1–100 %.
    ShareOutOfRange { percent: u8 },
    /// A placement of a job that runs.
    PlaceRunning { job: JobId, node: String },
    /// A placement that names no node.
    NoNodeNamed { job: JobId },
    /// A placement on more nodes than the job has replicas.
    TooManyNodes { job: JobId, pieces: u32, replicas: u32, named: usize },
    /// A placement that names a node twice.
    NodeTwice { node: String },
    /// A placement asking more GPUs of a node than it has.
    TooManyGpus { node: String, count: u32, asked: usize },
    /// A spread placement giving a node part of a replica.
    NotWholeReplicas { per_piece: u32, node: String, got: usize },
    /// A placement that names a GPU twice.
    GpuTwice { gpu: u32, node: String },
    /// A placement, not shared, on a GPU another job holds.
    GpuHeld { gpu: u32, node: String, holder: JobId },
    /// A placement giving the job another number of GPUs than it asks for.
    WrongGpuCount { job: JobId, asks: u32, given: usize },
    /// A placement, migration or resize onto a node that cannot take work.
    NodeDown { node: String },
    /// A resize to a GPU count the job cannot run on.
    CountNotAllowed { job: JobId, given: usize, counts: Vec<u32> },
    /// A resize to a batch size outside the job's range.
    BatchOutOfRange { job: JobId, batch_size: u32, min: u32, max: u32 },
    /// A resize naming a node without a GPU of the job's (a spread resize gives each node some).
    EmptyEntry { node: String },
    /// A placement or resize taking the job's tenant past its limit ([`crate::tenants`]).
    OverTenantLimit(OverLimit),
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Problem::*;
        match self {
            NoSuchJob { job } => write!(f, "job {job} does not exist or has ended"),
            AlreadyMoved { job } => write!(f, "job {job} was already placed, preempted or stopped by this decision"),
            Queued { job } => write!(f, "job {job} is queued, not running: place it first"),
            CpuBelowMinimum { millicores } => write!(
                f,
                "a CPU limit of {millicores} millicores is below the minimum of {MIN_CPU_MILLICORES}; lift the \
                 limit or give more"
            ),
            CpuAboveNode { millicores, node, has } => {
                write!(f, "a CPU limit of {millicores} millicores is more than node {node} has ({has})")
            }
            MemoryBelowMinimum { bytes } => {
                write!(f, "a memory limit of {bytes} bytes is below the minimum of {MIN_MEMORY_BYTES}")
            }
            MemoryAboveNode { bytes, node, has } => {
                write!(f, "a memory limit of {bytes} bytes is more than node {node} has ({has})")
            }
            NoSuchNode { node, nodes } => write!(f, "node {node} does not exist ({nodes} nodes)"),
            AlreadyOn { job, node } => write!(f, "job {job} already runs on node {node}"),
            SpansNodes { job } => write!(f, "job {job} spans several nodes; preempt it and place it instead"),
            TooFewFreeGpus { node, free, job, holds } => {
                write!(f, "node {node} has {free} free GPUs; job {job} holds {holds}")
            }
            NodeFull { node, used, capacity, needs } => {
                write!(f, "node {node} is full: {used} of {capacity} bytes in use, the job needs {needs}")
            }
            NoSuchGpu { node, gpu, count } => write!(f, "node {node} has no GPU {gpu} ({count} GPUs)"),
            ShareOutOfRange { percent } => write!(f, "a GPU share of {percent} % is outside 1–100"),
            PlaceRunning { job, node } => {
                write!(f, "job {job} already runs on node {node}; migrate it, or preempt it first")
            }
            NoNodeNamed { job } => write!(f, "the placement of job {job} names no node"),
            TooManyNodes { job, pieces, replicas, named } => write!(
                f,
                "job {job} runs on at most {pieces} node(s) ({replicas} replicas); the placement names {named}"
            ),
            NodeTwice { node } => write!(f, "the placement names node {node} twice"),
            TooManyGpus { node, count, asked } => {
                write!(f, "node {node} has {count} GPUs; the placement asks for {asked}")
            }
            NotWholeReplicas { per_piece, node, got } => write!(
                f,
                "each node of a spread placement takes whole replicas of {per_piece} GPU(s); node {node} gets {got}"
            ),
            GpuTwice { gpu, node } => write!(f, "the placement names GPU {gpu} of node {node} twice"),
            GpuHeld { gpu, node, holder } => {
                write!(f, "GPU {gpu} of node {node} is held by job {holder}; name a free GPU, or place with share")
            }
            WrongGpuCount { job, asks, given } => {
                write!(f, "job {job} asks for {asks} GPUs; the placement gives {given}")
            }
            NodeDown { node } => write!(f, "node {node} cannot take work now (NotReady or cordoned)"),
            CountNotAllowed { job, given, counts } => {
                write!(f, "job {job} runs on {counts:?} GPUs (its scaling); the placement gives {given}")
            }
            BatchOutOfRange { job, batch_size, min, max } => {
                if min == max && *min == 0 {
                    write!(f, "job {job} has no batch size the host sets; the resize asks for {batch_size}")
                } else {
                    write!(f, "job {job} accepts batch sizes {min}–{max}; the resize asks for {batch_size}")
                }
            }
            EmptyEntry { node } => write!(f, "the resize names node {node} with no GPU; leave it out"),
            OverTenantLimit(over) => over.fmt(f),
        }
    }
}

impl std::error::Error for Problem {}

/// How much a decision may hold for the world it was made for ([`size`]): what no decision
/// for that world could need more of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Room {
    /// Live jobs, running and queued: at most [`max_actions`] of them make the actions.
    pub jobs: usize,
    /// Queued jobs: no decision places more.
    pub queued: usize,
    /// Nodes: no placement names more node entries.
    pub nodes: usize,
    /// The most GPUs any node has: no node entry names more.
    pub gpus_per_node: usize,
}

/// Why a whole decision is refused: it holds more than any decision for its world needs. It is
/// found by counting alone, before any action is checked, so a decision of any size costs the
/// host a pass over its lengths and no more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Oversized {
    /// More actions than [`max_actions`] allows for the jobs there are.
    Actions {
        /// How many it held.
        actions: usize,
        /// How many are accepted.
        limit: usize,
        /// How many jobs were live.
        jobs: usize,
    },
    /// More placements than there are queued jobs.
    Placements {
        /// How many placements it held.
        placements: usize,
        /// How many jobs were queued.
        queued: usize,
    },
    /// A placement naming more node entries than there are nodes.
    Entries {
        /// The action's index in the decision.
        action: usize,
        /// How many entries it names.
        entries: usize,
        /// How many nodes there are.
        nodes: usize,
    },
    /// A node entry naming more GPUs than any node has.
    Gpus {
        /// The action's index in the decision.
        action: usize,
        /// How many GPUs the entry names.
        gpus: usize,
        /// The most any node has.
        most: usize,
    },
}

impl fmt::Display for Oversized {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Oversized::Actions { actions, limit, jobs } => {
                write!(f, "decision has {actions} actions; at most {limit} are accepted for {jobs} jobs")
            }
            Oversized::Placements { placements, queued } => {
                write!(f, "decision places {placements} jobs; {queued} are queued")
            }
            Oversized::Entries { action, entries, nodes } => {
                write!(f, "action {action} places on {entries} node entries; the cluster has {nodes} nodes")
            }
            Oversized::Gpus { action, gpus, most } => {
                write!(f, "action {action} names {gpus} GPUs of one node; no node has more than {most}")
            }
        }
    }
}

impl std::error::Error for Oversized {}

/// Refuse a decision (its actions as `acts`) larger than any decision for a world of `room`
/// could need: more actions than [`max_actions`], more placements than queued jobs, a
/// placement or resize naming more node entries than there are nodes, or a node entry more
/// GPUs than any node has. Counts lengths only, and stops at the first excess: the entries of a
/// placement are looked at only when there are no more of them than nodes.
pub fn size<'a, E: Entry + 'a>(acts: impl ExactSizeIterator<Item = Act<'a, E>>, room: Room) -> Result<(), Oversized> {
    let (actions, limit) = (acts.len(), max_actions(room.jobs));
    if actions > limit {
        return Err(Oversized::Actions { actions, limit, jobs: room.jobs });
    }
    let mut placements = 0;
    for (action, act) in acts.enumerate() {
        let nodes = match act {
            Act::Place { nodes, .. } => {
                placements += 1;
                if placements > room.queued {
                    return Err(Oversized::Placements { placements, queued: room.queued });
                }
                nodes
            }
            Act::Resize { nodes, .. } => nodes,
            _ => continue,
        };
        if nodes.len() > room.nodes {
            return Err(Oversized::Entries { action, entries: nodes.len(), nodes: room.nodes });
        }
        if let Some(gpus) = nodes.iter().map(|e| e.gpus().len()).find(|&g| g > room.gpus_per_node) {
            return Err(Oversized::Gpus { action, gpus, most: room.gpus_per_node });
        }
    }
    Ok(())
}

/// Checks a decision's actions in order, against the world as the accepted ones leave it.
#[derive(Clone, Debug)]
pub struct Checker {
    book: GpuBook,
    ledger: Ledger,
    moved: HashSet<JobId>,
}

impl Checker {
    /// Start on a world whose GPUs are held as `book` says (every running job's GPUs), with no
    /// tenant limits.
    pub fn new(book: GpuBook) -> Self {
        Checker { book, ledger: Ledger::default(), moved: HashSet::new() }
    }

    /// Hold tenants to their limits, from what `ledger` says they hold now (every running
    /// job's GPUs, counted to its tenant).
    pub fn with_tenants(mut self, ledger: Ledger) -> Self {
        self.ledger = ledger;
        self
    }

    /// The GPUs as the accepted actions so far leave them.
    pub fn book(&self) -> &GpuBook {
        &self.book
    }

    /// What each tenant holds as the accepted actions so far leave it.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// Check `act` on `job`; when it passes, the world moves on as it says (a placement takes
    /// its GPUs, a preemption or a stop frees them, a resize does both).
    pub fn check<W: World + ?Sized, E: Entry>(
        &mut self,
        world: &W,
        job: JobId,
        act: &Act<'_, E>,
    ) -> Result<(), Problem> {
        self.problem(world, job, act)?;
        let tenant = world.job(job).and_then(|j| j.tenant);
        let (freed, taken) = match act {
            Act::Place { nodes, .. } => (Vec::new(), *nodes),
            Act::Preempt | Act::Stop => (world.gpus_of(job), &[][..]),
            Act::Resize { nodes, .. } => (world.gpus_of(job), *nodes),
            _ => return Ok(()),
        };
        for &(node, index) in &freed {
            self.book.release(node, index, job);
        }
        for entry in taken {
            for &index in entry.gpus() {
                self.book.hold(entry.node(), index, job);
            }
        }
        if let Some(t) = tenant {
            self.ledger.release(t, freed.len() as u64);
            self.ledger.hold(t, taken.iter().map(|e| e.gpus().len() as u64).sum());
        }
        self.moved.insert(job);
        Ok(())
    }

    /// Why `job`'s tenant may not go from the GPUs it holds to those `nodes` name.
    fn tenant_room<W: World + ?Sized, E: Entry>(
        &self,
        world: &W,
        job: JobId,
        now: &JobNow,
        nodes: &[E],
    ) -> Result<(), Problem> {
        let Some(tenant) = now.tenant else { return Ok(()) };
        let taken: u64 = nodes.iter().map(|e| e.gpus().len() as u64).sum();
        let held = if now.node.is_some() { world.gpus_of(job).len() as u64 } else { 0 };
        self.ledger.check(tenant, taken.saturating_sub(held)).map_err(Problem::OverTenantLimit)
    }

    fn problem<W: World + ?Sized, E: Entry>(&self, world: &W, job: JobId, act: &Act<'_, E>) -> Result<(), Problem> {
        let Some(now) = world.job(job) else { return Err(Problem::NoSuchJob { job }) };
        if self.moved.contains(&job) {
            return Err(Problem::AlreadyMoved { job });
        }
        let Some(on) = now.node else {
            return match act {
                Act::Place { nodes, share } => {
                    self.placement(world, job, &now, nodes, *share)?;
                    self.tenant_room(world, job, &now, nodes)
                }
                Act::Stop => Ok(()),
                _ => Err(Problem::Queued { job }),
            };
        };
        let nodes = world.node_count();
        let node = world.node(on).ok_or(Problem::NoSuchNode { node: on, nodes })?;
        let name = || node.name.to_string();
        match *act {
            Act::SetCpu(Some(millicores)) if millicores < MIN_CPU_MILLICORES => {
                Err(Problem::CpuBelowMinimum { millicores })
            }
            Act::SetCpu(Some(millicores)) if millicores > node.cpu_millicores => {
                Err(Problem::CpuAboveNode { millicores, node: name(), has: node.cpu_millicores })
            }
            Act::SetMemory(Some(bytes)) if bytes < MIN_MEMORY_BYTES => Err(Problem::MemoryBelowMinimum { bytes }),
            Act::SetMemory(Some(bytes)) if bytes > node.memory_bytes => {
                Err(Problem::MemoryAboveNode { bytes, node: name(), has: node.memory_bytes })
            }
            Act::Migrate(to) => {
                let dest = world.node(to).ok_or(Problem::NoSuchNode { node: to, nodes })?;
                if dest.down {
                    return Err(Problem::NodeDown { node: dest.name.to_string() });
                }
                if to == on {
                    return Err(Problem::AlreadyOn { job, node: dest.name.to_string() });
                }
                let held = world.gpus_of(job);
                if held.iter().any(|&(n, _)| n != on) {
                    return Err(Problem::SpansNodes { job });
                }
                let free = self.book.free_count(to);
                if (free as usize) < held.len() {
                    return Err(Problem::TooFewFreeGpus { node: dest.name.to_string(), free, job, holds: held.len() });
                }
                let used = world.memory_used_on(to);
                if used + now.memory_used_bytes > dest.memory_bytes {
                    return Err(Problem::NodeFull {
                        node: dest.name.to_string(),
                        used,
                        capacity: dest.memory_bytes,
                        needs: now.memory_used_bytes,
                    });
                }
                Ok(())
            }
            Act::SetGpuShare { gpu, percent } => {
                if gpu >= node.gpus {
                    Err(Problem::NoSuchGpu { node: name(), gpu, count: node.gpus })
                } else if percent == 0 || percent > 100 {
                    Err(Problem::ShareOutOfRange { percent })
                } else {
                    Ok(())
                }
            }
            Act::Place { .. } => Err(Problem::PlaceRunning { job, node: name() }),
            Act::Resize { nodes: entries, share, batch_size } => {
                if let Some(batch_size) = batch_size {
                    let (min, max) = now.batch_sizes;
                    if batch_size < min || batch_size > max || max == 0 {
                        return Err(Problem::BatchOutOfRange { job, batch_size, min, max });
                    }
                }
                self.elastic_entries(world, job, &now, entries, share)?;
                self.tenant_room(world, job, &now, entries)
            }
            Act::SetCpu(_) | Act::SetMemory(_) | Act::Deliver | Act::Stop | Act::Preempt => Ok(()),
        }
    }

    /// Why queued job `job` cannot start where `nodes` say, if it cannot.
    fn placement<W: World + ?Sized, E: Entry>(
        &self,
        world: &W,
        job: JobId,
        now: &JobNow,
        nodes: &[E],
        share: bool,
    ) -> Result<(), Problem> {
        let pieces = now.replicas.max(1);
        if nodes.is_empty() {
            return Err(Problem::NoNodeNamed { job });
        }
        if now.gpu_counts.len() > 1 {
            // An elastic job starts on any of its counts, spread as a resize spreads it.
            return self.elastic_entries(world, job, now, nodes, share);
        }
        if nodes.len() > pieces as usize {
            return Err(Problem::TooManyNodes { job, pieces, replicas: now.replicas, named: nodes.len() });
        }
        self.entries(world, job, nodes, share, Some(gpus_per_piece(now.gpus, now.replicas)))?;
        let given: usize = nodes.iter().map(|e| e.gpus().len()).sum();
        if given != now.gpus as usize {
            return Err(Problem::WrongGpuCount { job, asks: now.gpus, given });
        }
        Ok(())
    }

    /// Why `job` cannot run on the GPUs `nodes` name as an elastic job starts or is resized: a
    /// total among its counts, each node named with at least one GPU (and [`Self::entries`]).
    fn elastic_entries<W: World + ?Sized, E: Entry>(
        &self,
        world: &W,
        job: JobId,
        now: &JobNow<'_>,
        nodes: &[E],
        share: bool,
    ) -> Result<(), Problem> {
        let given: usize = nodes.iter().map(|e| e.gpus().len()).sum();
        if u32::try_from(given).map_or(true, |g| now.gpu_counts.binary_search(&g).is_err()) {
            return Err(Problem::CountNotAllowed { job, given, counts: now.gpu_counts.to_vec() });
        }
        self.entries(world, job, nodes, share, None)
    }

    /// Why `job` cannot have the GPUs `nodes` name, if it cannot: each node exists, can take
    /// work and is named once, each GPU exists, is named once and is free (or `share`, or held
    /// by `job` itself, which a resize gives up). A placement's spread entries hold whole
    /// replicas of `per_piece` GPUs; a resize's (`per_piece` None) at least one GPU each.
    fn entries<W: World + ?Sized, E: Entry>(
        &self,
        world: &W,
        job: JobId,
        nodes: &[E],
        share: bool,
        per_piece: Option<u32>,
    ) -> Result<(), Problem> {
        if nodes.is_empty() {
            return Err(Problem::NoNodeNamed { job });
        }
        for (k, entry) in nodes.iter().enumerate() {
            let Some(node) = world.node(entry.node()) else {
                return Err(Problem::NoSuchNode { node: entry.node(), nodes: world.node_count() });
            };
            let name = || node.name.to_string();
            if node.down {
                return Err(Problem::NodeDown { node: name() });
            }
            if nodes[..k].iter().any(|e| e.node() == entry.node()) {
                return Err(Problem::NodeTwice { node: name() });
            }
            let gpus = entry.gpus();
            if gpus.len() > node.gpus as usize {
                return Err(Problem::TooManyGpus { node: name(), count: node.gpus, asked: gpus.len() });
            }
            match per_piece {
                Some(per_piece)
                    if nodes.len() > 1 && (gpus.is_empty() || !gpus.len().is_multiple_of(per_piece as usize)) =>
                {
                    return Err(Problem::NotWholeReplicas { per_piece, node: name(), got: gpus.len() });
                }
                None if nodes.len() > 1 && gpus.is_empty() => return Err(Problem::EmptyEntry { node: name() }),
                _ => {}
            }
            for (g, &index) in gpus.iter().enumerate() {
                if index >= node.gpus || !self.book.exists(entry.node(), index) {
                    return Err(Problem::NoSuchGpu { node: name(), gpu: index, count: node.gpus });
                }
                if gpus[..g].contains(&index) {
                    return Err(Problem::GpuTwice { gpu: index, node: name() });
                }
                let other = self.book.holders(entry.node(), index).iter().copied().find(|&h| h != job);
                if let (Some(holder), false) = (other, share) {
                    return Err(Problem::GpuHeld { gpu: index, node: name(), holder });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
