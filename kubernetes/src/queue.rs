//! The default placement, for a policy that does not place: queued pods are bound in arrival
//! order, each to the first Ready node (in name order) that its node selector allows, with room
//! for its CPU and memory requests, one more pod and its GPUs, while the oldest one fits
//! (strict first come, first served). Room is the node's allocatable less what the managed
//! pods bound there request; a policy's own placements are held to the same room
//! ([`Room::takes`]). A pod that no
//! node could ever hold is reported once and skipped, as is one whose binding the apiserver
//! refused (only a policy's `place` tries that one again); one whose binding the apiserver did
//! not answer waits out a backoff before it is tried again.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use wasmsched_core::world::{JobId, NodeId, World};
use wasmsched_rules::{GpuBook, Ledger, NodePlacement};

use super::{By, Kubernetes};
use wasmsched_core::live::queue::{self, Eligible, Turn};

/// What a queued pod asks of a node beyond GPUs: CPU (millicores) and memory (bytes) requested,
/// and the labels its node must carry (its node selector).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct PodAsk {
    pub requests: (u64, u64),
    pub selector: Arc<BTreeMap<String, String>>,
    /// For a group, every pod's ask and GPUs, piece by piece (the first is this one); None for
    /// a pod of its own.
    pub group: Option<Arc<[(PodAsk, u32)]>>,
}

/// A queued pod, as the default placement sees it.
pub(super) type Waiting = queue::Waiting<PodAsk>;

/// A node's room: CPU and memory left unrequested, pods it takes still, and whether it is
/// Ready (its free GPUs are in the GPU book).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Room {
    pub cpu: u64,
    pub memory: u64,
    pub pods: u64,
    /// Its whole allocatable (CPU, memory, GPUs): what no pod may ask beyond.
    pub all: (u64, u64, u32),
    pub ready: bool,
    pub labels: Arc<BTreeMap<String, String>>,
}

impl Room {
    /// Whether a pod asking `requests` and with node selector `selector` may be bound here
    /// now (GPUs aside: the GPU book says those); else why not.
    pub(super) fn takes(&self, requests: (u64, u64), selector: &BTreeMap<String, String>) -> Result<(), String> {
        if !self.ready {
            return Err("the node is NotReady".into());
        }
        if !super::pod::selects(selector, &self.labels) {
            return Err(format!("the node lacks labels the pod's nodeSelector asks for ({selector:?})"));
        }
        if self.pods == 0 {
            return Err("the node takes no more pods (its pods allocatable)".into());
        }
        if requests.0 > self.cpu || requests.1 > self.memory {
            return Err(format!(
                "the node has {}m CPU and {} MiB unrequested; the pod requests {}m and {} MiB",
                self.cpu,
                self.memory >> 20,
                requests.0,
                requests.1 >> 20
            ));
        }
        Ok(())
    }

    /// Give back what a pod asking `requests` took (it leaves the node).
    pub(super) fn give(&mut self, requests: (u64, u64)) {
        self.cpu = self.cpu.saturating_add(requests.0);
        self.memory = self.memory.saturating_add(requests.1);
        self.pods = self.pods.saturating_add(1);
    }

    /// Take a pod asking `requests` out of the room.
    pub(super) fn take(&mut self, requests: (u64, u64)) {
        self.cpu = self.cpu.saturating_sub(requests.0);
        self.memory = self.memory.saturating_sub(requests.1);
        self.pods = self.pods.saturating_sub(1);
    }
}

/// The nodes' room as the default placement goes down the queue. Linear in pods and nodes for
/// a queue of like pods, as a cluster's is: the leading nodes that none of the pods still to go
/// could take are passed over for good.
struct Rooms {
    rooms: Vec<Room>,
    /// The least that any pod from k on asks for, each resource on its own.
    least: Vec<(u64, u64, u32)>,
    /// The first node that some pod still to go could take.
    start: usize,
    /// Whether some node could ever hold a pod of this shape.
    ever: HashMap<Shape, bool>,
    /// The nodes of the last group fitted, piece by piece.
    pieces: Vec<NodeId>,
    /// The cluster empty (every node's whole allocatable, every GPU free), once a group asks
    /// whether it could ever fit.
    empty: Option<(Vec<Room>, GpuBook)>,
}

/// Where each of `pieces` (a pod's ask and GPUs) goes, piece by piece, over `rooms` from node
/// `from` on, with the free GPUs of `book`: each to the first node that takes it, what earlier
/// pieces took counted. Each piece's node and its GPUs there; None when one does not fit.
fn fit_pieces(rooms: &[Room], book: &GpuBook, pieces: &[(PodAsk, u32)], from: usize) -> Option<Vec<NodePlacement>> {
    let mut taken: HashMap<usize, (Room, u32)> = HashMap::new();
    let mut placed = Vec::with_capacity(pieces.len());
    for (ask, gpus) in pieces {
        let node = (from..rooms.len()).find(|&i| {
            let (room, used) = taken.get(&i).map_or((&rooms[i], 0), |(r, u)| (r, *u));
            book.free_count(NodeId(i as u32)).saturating_sub(used) >= *gpus
                && room.takes(ask.requests, &ask.selector).is_ok()
        })?;
        let (room, used) = taken.entry(node).or_insert_with(|| (rooms[node].clone(), 0));
        room.take(ask.requests);
        let node = NodeId(node as u32);
        placed
            .push(NodePlacement { node, gpus: book.free_on(node).skip(*used as usize).take(*gpus as usize).collect() });
        *used += gpus;
    }
    Some(placed)
}

/// What a pod asks of a node: CPU, memory, GPUs, and the labels it must carry.
type Shape = (u64, u64, u32, Arc<BTreeMap<String, String>>);

impl Rooms {
    fn new(rooms: Vec<Room>) -> Rooms {
        Rooms { rooms, least: Vec::new(), start: 0, ever: HashMap::new(), pieces: Vec::new(), empty: None }
    }
}

impl Eligible<PodAsk> for Rooms {
    fn queue(&mut self, sorted: &[Waiting]) {
        self.least = vec![(u64::MAX, u64::MAX, u32::MAX); sorted.len() + 1];
        for (k, w) in sorted.iter().enumerate().rev() {
            let after = self.least[k + 1];
            // A group's least is its smallest piece's.
            let asks = match &w.ask.group {
                Some(pieces) => pieces.iter().map(|(a, g)| (a.requests, *g)).collect(),
                None => vec![(w.ask.requests, w.gpus)],
            };
            self.least[k] =
                asks.into_iter().fold(after, |l, ((cpu, memory), gpus)| (l.0.min(cpu), l.1.min(memory), l.2.min(gpus)));
        }
    }

    fn ever(&mut self, w: &Waiting, book: &GpuBook) -> bool {
        if let Some(pieces) = &w.ask.group {
            let rooms = &self.rooms;
            let (empty, all_free) = self.empty.get_or_insert_with(|| {
                let empty = rooms
                    .iter()
                    .map(|r| Room { cpu: r.all.0, memory: r.all.1, pods: u64::MAX, ready: true, ..r.clone() })
                    .collect();
                (empty, GpuBook::new((0..book.node_count()).map(|n| book.gpus_on(NodeId(n)).unwrap_or(0))))
            });
            return fit_pieces(empty, all_free, pieces, 0).is_some();
        }
        let shape = (w.ask.requests.0, w.ask.requests.1, w.gpus, w.ask.selector.clone());
        let rooms = &self.rooms;
        *self.ever.entry(shape).or_insert_with(|| {
            rooms.iter().any(|r| {
                w.ask.requests.0 <= r.all.0
                    && w.ask.requests.1 <= r.all.1
                    && w.gpus <= r.all.2
                    && super::pod::selects(&w.ask.selector, &r.labels)
            })
        })
    }

    fn now(&mut self, k: usize, w: &Waiting, book: &GpuBook) -> Vec<NodeId> {
        let fits = |r: &Room, i: usize, requests, gpus, selector| {
            gpus <= book.free_count(NodeId(i as u32)) && r.takes(requests, selector).is_ok()
        };
        // Resources alone (not labels) pass a node over for good: another pod may select it.
        let (cpu, memory, gpus) = self.least[k];
        let any = BTreeMap::new();
        while self.start < self.rooms.len() && !fits(&self.rooms[self.start], self.start, (cpu, memory), gpus, &any) {
            self.start += 1;
        }
        let found =
            (self.start..self.rooms.len()).find(|&i| fits(&self.rooms[i], i, w.ask.requests, w.gpus, &w.ask.selector));
        found.map(|i| vec![NodeId(i as u32)]).unwrap_or_default()
    }

    fn fit(&mut self, k: usize, w: &Waiting, book: &GpuBook) -> Option<Vec<NodePlacement>> {
        let Some(pieces) = &w.ask.group else {
            let order = self.now(k, w, book);
            return wasmsched_rules::fit::first_fit(
                book,
                wasmsched_rules::fit::Ask { gpus: w.gpus, replicas: 1 },
                &order,
            );
        };
        self.now(k, w, book); // passes over the nodes no pod still to go could take
        let placed = fit_pieces(&self.rooms, book, pieces, self.start)?;
        self.pieces = placed.iter().map(|p| p.node).collect();
        Some(super::group::placement_of(&placed).nodes)
    }

    fn took(&mut self, w: &Waiting, placed: &[NodePlacement]) {
        match &w.ask.group {
            Some(pieces) => {
                for ((ask, _), node) in pieces.iter().zip(std::mem::take(&mut self.pieces)) {
                    self.rooms[node.index()].take(ask.requests);
                }
            }
            None => self.rooms[placed[0].node.index()].take(w.ask.requests),
        }
    }
}

/// Strict FCFS first fit over the Ready nodes with room, in name order, and the GPUs `book`
/// says are free; a pod whose tenant is at its limit (`ledger`) is passed over.
fn first_fit(waiting: Vec<Waiting>, rooms: Vec<Room>, book: GpuBook, ledger: Ledger) -> Vec<Turn> {
    queue::first_come_first_served(waiting, book, ledger, &mut Rooms::new(rooms))
}

impl Kubernetes {
    /// The default placement's turns now: the queued pods (of `only`, when given), strict first
    /// come, first served, over the Ready nodes' room and the free GPUs.
    fn turns(&self, world: &World, only: Option<&[JobId]>) -> Vec<Turn> {
        let now = std::time::Instant::now();
        let only: Option<HashSet<JobId>> = only.map(|o| o.iter().copied().collect());
        let waiting: Vec<Waiting> = self
            .jobs
            .values()
            .filter(|m| m.job.refused.is_none() && m.retry.is_none_or(|(at, _)| at <= now))
            .filter(|m| world.state(m.job.handle).is_some_and(|s| !s.is_running()))
            .filter(|m| only.as_ref().is_none_or(|only| only.contains(&m.job.handle)))
            .map(|m| Waiting {
                handle: m.job.handle,
                gpus: m.job.gpus_asked,
                arrived_unix_ms: m.job.arrived_unix_ms,
                tenant: world.state(m.job.handle).map_or(0, |s| s.tenant as usize),
                ask: PodAsk {
                    requests: m.requests,
                    selector: m.selector.clone(),
                    group: m.gang.as_ref().map(|g| {
                        let piece = |p: &super::group::Member| {
                            (PodAsk { requests: p.requests, selector: p.selector.clone(), group: None }, p.gpus)
                        };
                        g.members.iter().map(piece).collect()
                    }),
                },
            })
            .collect();
        if waiting.is_empty() {
            return Vec::new();
        }
        first_fit(waiting, self.rooms(world), world.gpu_book(), world.ledger())
    }

    /// Every node's room now: its allocatable less what every pod bound there requests (the
    /// managed ones, those being bound, and the cluster's other pods).
    pub(super) fn rooms(&self, world: &World) -> Vec<Room> {
        let mut rooms: Vec<Room> = self
            .nodes
            .iter()
            .map(|n| Room {
                cpu: n.cpu_millicores,
                memory: n.memory_bytes,
                pods: n.pods,
                all: (n.cpu_millicores, n.memory_bytes, n.gpus),
                ready: n.ready,
                labels: n.labels.clone(),
            })
            .collect();
        // Pods the host does not manage (other schedulers', daemons') take their room too.
        for p in self.others_bound() {
            if let Some(room) = super::pod::node_of(&p).and_then(|n| self.node_index(n)).and_then(|n| rooms.get_mut(n))
            {
                room.take(super::pod::requests(&p));
            }
        }
        for m in self.jobs.values() {
            let Some(s) = world.state(m.job.handle).filter(|s| s.is_running()) else { continue };
            match &m.gang {
                // A group's pods, each on its own node.
                Some(g) => {
                    for p in &g.members {
                        if let Some(room) = p.node.and_then(|n| rooms.get_mut(n.index())) {
                            room.take(p.requests);
                        }
                    }
                }
                None => {
                    if let Some(room) = rooms.get_mut(s.node.index()) {
                        room.take(m.requests);
                    }
                }
            }
        }
        rooms
    }

    /// The pods bound to a node that the host does not manage: other schedulers', daemons'.
    pub(super) fn others_bound(&self) -> impl Iterator<Item = std::sync::Arc<k8s_openapi::api::core::v1::Pod>> + '_ {
        let managed = |p: &k8s_openapi::api::core::v1::Pod| {
            self.pods.get(&kube::runtime::reflector::ObjectRef::from_obj(p)).is_some()
        };
        self.bound.iter().flat_map(kube::runtime::reflector::Store::state).filter(move |p| !managed(p))
    }

    /// The queued pods the default placement would bind now, in its order (none while the
    /// apiserver does not answer).
    pub(super) fn startable(&self, world: &World) -> Vec<JobId> {
        if !self.apiserver_up() {
            return Vec::new();
        }
        queue::started(&self.turns(world, None))
    }

    /// Bind what the default placement binds now (of `only`, when given). Returns the jobs
    /// bound.
    pub(super) fn place_queued(&mut self, world: &mut World, only: Option<&[JobId]>) -> Vec<JobId> {
        let (actions, never) = queue::placements(self.turns(world, only));
        for handle in never {
            let name = world.spec(handle).map_or_else(|| handle.to_string(), |s| s.name.clone());
            let group =
                self.uid_of(handle).and_then(|u| self.jobs.get(&u)).and_then(|m| m.gang.as_ref()).map(|g| g.size);
            self.logged.once(format!("never:{handle}"), || match group {
                Some(size) => format!(
                    "pod group {name} ({size} pods) asks for more CPU, memory or GPUs than the cluster could hold with \
                     every node empty: the default placement cannot bind it, and holds nothing for it; the pods behind \
                     it go ahead"
                ),
                None => format!(
                    "pod {name} asks for more CPU, memory or GPUs than any node has: the default placement \
                     cannot bind it; the pods behind it go ahead"
                ),
            });
        }
        let errors = self.apply_from(&actions, world, By::Backend);
        self.report_binds(&errors);
        queue::succeeded(&actions, &errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(handle: u32, cpu: u64, gpus: u32, arrived: u64) -> Waiting {
        let ask = PodAsk { requests: (cpu, 0), selector: Arc::default(), group: None };
        Waiting { handle: JobId(handle), gpus, arrived_unix_ms: arrived, tenant: 0, ask }
    }

    fn room(cpu: u64, gpus: u32, ready: bool) -> Room {
        Room { cpu, memory: u64::MAX, pods: 110, all: (cpu, u64::MAX, gpus), ready, labels: Arc::default() }
    }

    /// Every GPU of the rooms free.
    fn book(rooms: &[Room]) -> GpuBook {
        GpuBook::new(rooms.iter().map(|r| r.all.2))
    }

    #[test]
    fn pods_are_bound_in_arrival_order_to_the_first_node_with_room() {
        let rooms = vec![room(2000, 1, true), room(2000, 0, true)];
        let turns =
            first_fit(vec![job(2, 1500, 0, 20), job(1, 1000, 1, 10)], rooms.clone(), book(&rooms), Ledger::default());
        assert_eq!(
            turns,
            [
                Turn::Start { handle: JobId(1), nodes: vec![NodePlacement::new(0, [0])] },
                Turn::Start { handle: JobId(2), nodes: vec![NodePlacement::new(1, [])] }
            ]
        );
    }

    #[test]
    fn a_not_ready_node_gets_nothing_and_the_oldest_pod_holds_up_the_rest() {
        let rooms = vec![room(4000, 0, false), room(2000, 0, true)];
        let turns =
            first_fit(vec![job(1, 3000, 0, 10), job(2, 100, 0, 20)], rooms.clone(), book(&rooms), Ledger::default());
        assert!(turns.is_empty(), "{turns:?}");
    }

    #[test]
    fn a_large_pod_behind_small_ones_still_finds_the_first_node_that_takes_it() {
        // The small pods fill node 0's GPUs; node 1 has room for the large one only after them.
        let rooms = vec![room(8000, 2, true), room(8000, 1, true), room(8000, 4, true)];
        let pods = vec![job(1, 100, 1, 1), job(2, 100, 1, 2), job(3, 100, 4, 3), job(4, 100, 1, 4)];
        let turns = first_fit(pods, rooms.clone(), book(&rooms), Ledger::default());
        let nodes: Vec<(u32, u32)> = turns
            .iter()
            .map(|t| match t {
                Turn::Start { handle, nodes } => (handle.0, nodes[0].node.0),
                Turn::Never { handle } => (handle.0, u32::MAX),
            })
            .collect();
        assert_eq!(nodes, [(1, 0), (2, 0), (3, 2), (4, 1)]);
    }

    #[test]
    fn a_node_selector_and_a_nodes_pod_count_are_kept() {
        let labelled = Arc::new(BTreeMap::from([("pool".to_string(), "scale".to_string())]));
        let rooms = vec![
            Room { pods: 1, ..room(8000, 0, true) },
            Room { labels: labelled.clone(), ..room(8000, 0, true) },
            room(8000, 0, true),
        ];
        let pods = vec![
            Waiting { ask: PodAsk { selector: labelled.clone(), ..job(1, 100, 0, 1).ask }, ..job(1, 100, 0, 1) },
            job(2, 100, 0, 2),
            job(3, 100, 0, 3),
            Waiting {
                ask: PodAsk {
                    selector: Arc::new(BTreeMap::from([("pool".into(), "none".into())])),
                    ..job(4, 100, 0, 4).ask
                },
                ..job(4, 100, 0, 4)
            },
        ];
        let turns = first_fit(pods, rooms.clone(), book(&rooms), Ledger::default());
        assert_eq!(
            turns,
            [
                Turn::Start { handle: JobId(1), nodes: vec![NodePlacement::new(1, [])] },
                Turn::Start { handle: JobId(2), nodes: vec![NodePlacement::new(0, [])] },
                Turn::Start { handle: JobId(3), nodes: vec![NodePlacement::new(1, [])] },
                Turn::Never { handle: JobId(4) },
            ],
            "node 0 takes one pod; only node 1 carries the label"
        );
        let why = rooms[2].takes((100, 0), &labelled).unwrap_err();
        assert!(why.contains("nodeSelector"), "{why}");
        let why = rooms[0].takes((9000, 0), &BTreeMap::new()).unwrap_err();
        assert!(why.contains("8000m CPU") && why.contains("9000m"), "{why}");
    }

    #[test]
    fn a_pod_no_node_could_hold_is_reported_and_does_not_block() {
        let rooms = vec![room(1000, 2, true)];
        let turns = first_fit(vec![job(1, 0, 4, 10), job(2, 0, 1, 20)], rooms.clone(), book(&rooms), Ledger::default());
        assert_eq!(
            turns,
            [
                Turn::Never { handle: JobId(1) },
                Turn::Start { handle: JobId(2), nodes: vec![NodePlacement::new(0, [0])] }
            ]
        );
    }
}
