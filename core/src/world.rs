//! The host's view of the world ([`World`]) and the per-instance [`Cursor`] that turns it
//! into the delta a policy instance receives: strings once, numbers every tick (in columns),
//! progress as new records only. A live job either runs (on a node, with GPUs) or waits in
//! the queue ([`JobState::queued`]); its declaration crosses once either way.

use std::collections::VecDeque;

use crate::bindings::wit;
pub use wasmsched_rules::{JobId, NodeId};

/// How many progress records the host keeps per job, for the resync of a fresh instance.
pub const HISTORY_KEPT: usize = 256;

/// Every live job and node, as the backend last observed them.
#[derive(Debug, Default, Clone)]
pub struct World {
    time_ms: u64,
    nodes: Vec<wit::Node>,
    /// Bumped whenever the node list changes, so a cursor knows when to resend it.
    nodes_version: u64,
    /// The nodes that cannot take work now, ascending.
    nodes_down: Vec<NodeId>,
    /// Every GPU's use, in node order then GPU order; `gpu_offsets[n]` is node n's first.
    gpu_utilisation: Vec<f32>,
    gpu_memory_used: Vec<u64>,
    gpu_offsets: Vec<usize>,
    // Parallel vectors, sorted by handle.
    specs: Vec<wit::JobSpec>,
    states: Vec<JobState>,
    history: Vec<VecDeque<Record>>,
    next_handle: u32,
    next_seq: u64,
    queued: usize,
    /// Declared tenants first (`declared` of them), then those jobs named undeclared.
    tenants: Vec<wit::Tenant>,
    declared: usize,
    /// Bumped whenever the tenant list changes, so a cursor knows when to resend it.
    tenants_version: u64,
    /// Jobs removed since [`World::forget_departed`], with their records: a recording keeps
    /// the last epochs of a job that ended, which no snapshot carries once it has gone.
    departed: Vec<(JobId, VecDeque<Record>)>,
    /// Every node's room as the backend counts it ([`World::set_room`]); None: as the world
    /// counts it from its own jobs ([`World::room`]).
    room: Option<Vec<Room>>,
}

pub use wasmsched_rules::NodeRoom as Room;

/// One GPU: its node and its index there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct GpuSlot {
    /// The node's handle.
    pub node: NodeId,
    /// The GPU's index on the node.
    pub index: u32,
}

impl GpuSlot {
    /// The GPUs a placement's entries name, entry by entry.
    pub fn of(entries: &[wasmsched_rules::NodePlacement]) -> Vec<GpuSlot> {
        entries.iter().flat_map(|e| e.gpus.iter().map(|&index| GpuSlot { node: e.node, index })).collect()
    }
}

/// A job's placement, limits and measured use: one row of the contract's `job-states` (or of
/// `queue-states`, while it waits).
#[derive(Clone, Debug, PartialEq)]
pub struct JobState {
    /// The job's handle.
    pub handle: JobId,
    /// Why it waits, while it is queued; None while it runs.
    pub queued: Option<wit::WaitReason>,
    /// Since when it waits (arrival or preemption), while queued.
    pub since_ms: u64,
    /// The node it runs on (its first, when it spans several).
    pub node: NodeId,
    /// Its CPU limit; None is unlimited.
    pub cpu_limit_millicores: Option<u64>,
    /// Its memory limit; None is unlimited.
    pub memory_limit_bytes: Option<u64>,
    /// Mean CPU use over the last interval.
    pub cpu_used_millicores: u64,
    /// Memory use at the end of the last interval.
    pub memory_used_bytes: u64,
    /// The GPUs it holds.
    pub gpus: Vec<GpuSlot>,
    /// Its share of its GPUs, if regulated.
    pub gpu_share_percent: Option<u8>,
    /// GPU use attributed to it.
    pub gpu_used_percent: f32,
    /// How long it has run, in all its runs.
    pub run_ms: u64,
    /// GPU time it has received (its run time when it holds no GPU).
    pub gpu_ms: u64,
    /// Its global batch size in force; 0 when the host knows none.
    pub batch_size: u32,
    /// Its tenant's index in [`World::tenants`].
    pub tenant: u32,
}

impl JobState {
    fn new(handle: JobId, node: NodeId) -> Self {
        JobState {
            handle,
            queued: None,
            since_ms: 0,
            node,
            cpu_limit_millicores: None,
            memory_limit_bytes: None,
            cpu_used_millicores: 0,
            memory_used_bytes: 0,
            gpus: Vec::new(),
            gpu_share_percent: None,
            gpu_used_percent: 0.0,
            run_ms: 0,
            gpu_ms: 0,
            batch_size: 0,
            tenant: 0,
        }
    }

    /// Whether it runs (rather than waits in the queue).
    pub fn is_running(&self) -> bool {
        self.queued.is_none()
    }

    /// Count `ms` more of running: its run time, and its GPU time for every GPU it holds.
    pub fn accrue(&mut self, ms: u64) {
        self.run_ms = self.run_ms.saturating_add(ms);
        self.gpu_ms = self.gpu_ms.saturating_add(ms.saturating_mul(self.gpus.len().max(1) as u64));
    }
}

/// What each piece of job `spec` requests, as the rules count it.
pub fn request_of(spec: &wit::JobSpec) -> wasmsched_rules::Request {
    wasmsched_rules::Request { cpu: spec.requests.cpu_millicores, memory: spec.requests.memory_bytes }
}

/// One progress report a job made.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    seq: u64,
    /// When it was reported.
    pub time_ms: u64,
    /// Epochs completed.
    pub epoch: u32,
    /// Values in the order of the job's metrics.
    pub values: Vec<f64>,
}

/// What one policy instance has been told so far.
#[derive(Debug, Default, Clone)]
pub struct Cursor {
    seen: Vec<JobId>,
    nodes_version: Option<u64>,
    tenants_version: Option<u64>,
    progress_seq: u64,
    last_call_ms: Option<u64>,
}

impl Cursor {
    /// A cursor for a fresh instance: its first snapshot is a full resync.
    pub fn fresh() -> Self {
        Self::default()
    }
}

impl World {
    /// An empty world at time zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// The clock, in milliseconds since the host's epoch.
    pub fn time_ms(&self) -> u64 {
        self.time_ms
    }

    /// Set the clock.
    pub fn set_time_ms(&mut self, ms: u64) {
        self.time_ms = ms;
    }

    /// The nodes, in handle order.
    pub fn nodes(&self) -> &[wit::Node] {
        &self.nodes
    }

    /// Add a node; returns its handle. Its GPUs start idle.
    pub fn add_node(&mut self, node: wit::Node) -> NodeId {
        let gpus = node.gpu_memory_bytes.len();
        self.gpu_offsets.push(self.gpu_utilisation.len());
        self.gpu_utilisation.extend(std::iter::repeat_n(0.0, gpus));
        self.gpu_memory_used.extend(std::iter::repeat_n(0, gpus));
        self.nodes.push(node);
        self.nodes_version += 1;
        NodeId(self.nodes.len() as u32 - 1)
    }

    /// Replace node `handle`'s description (its capacity became known, say). Its GPUs' use
    /// restarts idle when their number changes. False when there is no such node.
    pub fn set_node(&mut self, handle: NodeId, node: wit::Node) -> bool {
        let Some(old) = self.nodes.get(handle.index()) else { return false };
        if *old == node {
            return true;
        }
        if old.gpu_memory_bytes.len() == node.gpu_memory_bytes.len() {
            self.nodes[handle.index()] = node;
            self.nodes_version += 1;
            return true;
        }
        let mut nodes = std::mem::take(&mut self.nodes);
        nodes[handle.index()] = node;
        let (utilisation, memory, offsets) = (
            std::mem::take(&mut self.gpu_utilisation),
            std::mem::take(&mut self.gpu_memory_used),
            std::mem::take(&mut self.gpu_offsets),
        );
        for (n, node) in nodes.into_iter().enumerate() {
            let kept = if n == handle.index() { 0 } else { node.gpu_memory_bytes.len() };
            self.add_node(node);
            for g in 0..kept {
                self.gpu_utilisation[self.gpu_offsets[n] + g] = utilisation[offsets[n] + g];
                self.gpu_memory_used[self.gpu_offsets[n] + g] = memory[offsets[n] + g];
            }
        }
        true
    }

    /// Say whether node `handle` can take work (false: NotReady, cordoned, draining). False
    /// when there is no such node.
    pub fn set_node_down(&mut self, handle: NodeId, down: bool) -> bool {
        if handle.index() >= self.nodes.len() {
            return false;
        }
        match (self.nodes_down.binary_search(&handle), down) {
            (Err(at), true) => self.nodes_down.insert(at, handle),
            (Ok(at), false) => _ = self.nodes_down.remove(at),
            _ => {}
        }
        true
    }

    /// Every node's room as the backend counts it (a cluster's pods that are not jobs here
    /// included), in node order; None: as the world counts it ([`World::room`]).
    pub fn set_room(&mut self, room: Option<Vec<Room>>) {
        self.room = room;
    }

    /// Every node's room now, in node order: as the backend counted it last
    /// ([`World::set_room`]), else each node's capacity less what the pieces of the jobs running
    /// there request, with no limit on pieces.
    pub fn room(&self) -> Vec<Room> {
        let set = self.room.as_ref().filter(|r| r.len() == self.nodes.len());
        if let Some(room) = set {
            return room.clone();
        }
        let mut room: Vec<Room> =
            self.nodes.iter().map(|n| Room { cpu: n.cpu_millicores, memory: n.memory_bytes, pods: u32::MAX }).collect();
        for (spec, state) in self.jobs() {
            let request = request_of(spec);
            if request == wasmsched_rules::Request::default() {
                continue;
            }
            let held = state.gpus.iter().map(|g| g.node);
            for (node, pieces) in wasmsched_rules::room::pieces_held(spec.gpus, spec.replicas, held, state.node) {
                if let Some(n) = room.get_mut(node.index()) {
                    n.take(request, pieces);
                }
            }
        }
        room
    }

    /// [`World::room`] as the contract's columns.
    fn room_columns(&self) -> wit::NodeRoom {
        let room = self.room();
        wit::NodeRoom {
            cpu_millicores: room.iter().map(|r| r.cpu).collect(),
            memory_bytes: room.iter().map(|r| r.memory).collect(),
            pods: room.iter().map(|r| r.pods).collect(),
        }
    }

    /// Whether node `handle` cannot take work now.
    pub fn is_node_down(&self, handle: NodeId) -> bool {
        self.nodes_down.binary_search(&handle).is_ok()
    }

    /// The nodes that cannot take work now, ascending.
    pub fn nodes_down(&self) -> &[NodeId] {
        &self.nodes_down
    }

    /// Record a GPU's measured use. False when the node or the GPU does not exist.
    pub fn set_gpu_use(&mut self, node: NodeId, gpu: u32, utilisation_percent: f32, memory_used_bytes: u64) -> bool {
        let Some(count) = self.nodes.get(node.index()).map(|n| n.gpu_memory_bytes.len()) else { return false };
        if gpu as usize >= count {
            return false;
        }
        let i = self.gpu_offsets[node.index()] + gpu as usize;
        self.gpu_utilisation[i] = utilisation_percent;
        self.gpu_memory_used[i] = memory_used_bytes;
        true
    }

    /// Start tracking a job placed on `node`; its handle is assigned here and never reused.
    pub fn add_job(&mut self, mut spec: wit::JobSpec, node: NodeId) -> JobId {
        let handle = JobId(self.next_handle);
        self.next_handle += 1;
        spec.handle = handle;
        settle_scaling(&mut spec);
        if spec.tenant.trim().is_empty() {
            spec.tenant = DEFAULT_TENANT.into();
        }
        let mut state = JobState::new(handle, node);
        state.batch_size = spec.scaling.batch_size_min;
        state.tenant = self.tenant_index(&spec.tenant);
        self.specs.push(spec);
        self.states.push(state);
        self.history.push(VecDeque::new());
        handle
    }

    /// Start tracking a job that arrived and waits to be placed.
    pub fn enqueue_job(&mut self, spec: wit::JobSpec) -> JobId {
        let handle = self.add_job(spec, NodeId(0));
        let now = self.time_ms;
        let state = self.states.last_mut().expect("just added");
        state.queued = Some(wit::WaitReason::NeverStarted);
        state.since_ms = now;
        self.queued += 1;
        handle
    }

    /// A queued job starts on `gpus` (and `node`, its first node). False when it is not queued.
    pub fn start_job(&mut self, handle: JobId, node: NodeId, gpus: Vec<GpuSlot>) -> bool {
        let Some(state) = self.state_mut(handle).filter(|s| !s.is_running()) else { return false };
        state.queued = None;
        state.node = node;
        state.gpus = gpus;
        self.queued -= 1;
        true
    }

    /// A running job goes back to the queue (preempted), its GPUs and limits freed, its
    /// progress and attained service kept. False when it does not run.
    pub fn requeue_job(&mut self, handle: JobId, reason: wit::WaitReason) -> bool {
        let now = self.time_ms;
        let Some(state) = self.state_mut(handle).filter(|s| s.is_running()) else { return false };
        state.queued = Some(reason);
        state.since_ms = now;
        state.gpus.clear();
        state.gpu_share_percent = None;
        state.gpu_used_percent = 0.0;
        state.cpu_used_millicores = 0;
        state.memory_used_bytes = 0;
        self.queued += 1;
        true
    }

    /// Track a job under the handle it already carries (a replayed recording's); later
    /// handles continue after it. False, and nothing added, when that handle is not newer than
    /// every handle given so far.
    pub fn insert_job(&mut self, spec: wit::JobSpec, node: NodeId) -> bool {
        if spec.handle.0 < self.next_handle {
            return false;
        }
        self.next_handle = spec.handle.0;
        self.add_job(spec, node);
        true
    }

    /// The world with the queued jobs `hide` picks left out, every running job kept: the view
    /// of one arm of a split experiment, whose policy orders and places its own queue while
    /// the other arms' running jobs still hold their GPUs.
    pub fn without_queued(&self, hide: impl Fn(&wit::JobSpec) -> bool) -> World {
        let mut view = self.clone_shell();
        for ((spec, state), history) in self.specs.iter().zip(&self.states).zip(&self.history) {
            if !state.is_running() && hide(spec) {
                continue;
            }
            view.queued += usize::from(!state.is_running());
            view.specs.push(spec.clone());
            view.states.push(state.clone());
            view.history.push(history.clone());
        }
        view
    }

    /// Everything but the jobs, which [`World::without_queued`] copies one by one.
    fn clone_shell(&self) -> World {
        World {
            time_ms: self.time_ms,
            nodes: self.nodes.clone(),
            nodes_version: self.nodes_version,
            nodes_down: self.nodes_down.clone(),
            gpu_utilisation: self.gpu_utilisation.clone(),
            gpu_memory_used: self.gpu_memory_used.clone(),
            gpu_offsets: self.gpu_offsets.clone(),
            specs: Vec::new(),
            states: Vec::new(),
            history: Vec::new(),
            next_handle: self.next_handle,
            next_seq: self.next_seq,
            queued: 0,
            tenants: self.tenants.clone(),
            declared: self.declared,
            tenants_version: self.tenants_version,
            departed: self.departed.clone(),
            room: self.room.clone(),
        }
    }

    /// Stop tracking a job. False when it was not tracked.
    pub fn remove_job(&mut self, handle: JobId) -> bool {
        let Some(i) = self.index(handle) else { return false };
        self.queued -= usize::from(!self.states[i].is_running());
        self.specs.remove(i);
        self.states.remove(i);
        self.departed.push((handle, self.history.remove(i)));
        true
    }

    /// Forget the jobs removed so far (the loop does at every observation: their records are
    /// read, if at all, when the observation is).
    pub fn forget_departed(&mut self) {
        self.departed.clear();
    }

    /// The records of the jobs removed since [`World::forget_departed`] that no snapshot for
    /// `cursor` has carried, in the order they were made, with their jobs.
    pub fn departed_unsent(&self, cursor: &Cursor) -> Vec<(JobId, &Record)> {
        let mut unsent: Vec<(JobId, &Record)> = self
            .departed
            .iter()
            .flat_map(|(handle, records)| {
                records.iter().filter(|r| r.seq > cursor.progress_seq).map(move |r| (*handle, r))
            })
            .collect();
        unsent.sort_by_key(|(_, r)| r.seq);
        unsent
    }

    fn index(&self, handle: JobId) -> Option<usize> {
        self.states.binary_search_by_key(&handle, |s| s.handle).ok()
    }

    /// How many jobs were ever added (live and ended).
    pub fn jobs_seen(&self) -> u32 {
        self.next_handle
    }

    /// How many jobs run.
    pub fn job_count(&self) -> usize {
        self.states.len() - self.queued
    }

    /// How many jobs wait in the queue.
    pub fn queue_len(&self) -> usize {
        self.queued
    }

    /// Every running job's declaration and state, in handle order.
    pub fn jobs(&self) -> impl Iterator<Item = (&wit::JobSpec, &JobState)> {
        self.specs.iter().zip(&self.states).filter(|(_, s)| s.is_running())
    }

    /// Every queued job's declaration and state, in handle order.
    pub fn queue(&self) -> impl Iterator<Item = (&wit::JobSpec, &JobState)> {
        self.specs.iter().zip(&self.states).filter(|(_, s)| !s.is_running())
    }

    /// Every live job, running or queued, in handle order.
    pub fn all_jobs(&self) -> impl ExactSizeIterator<Item = (&wit::JobSpec, &JobState)> {
        self.specs.iter().zip(&self.states)
    }

    /// The use of node `node`'s GPUs, percent, in GPU order (empty for a node it lacks).
    pub fn gpu_use(&self, node: NodeId) -> &[f32] {
        let n = node.index();
        let Some(&from) = self.gpu_offsets.get(n) else { return &[] };
        let to = self.gpu_offsets.get(n + 1).copied().unwrap_or(self.gpu_utilisation.len());
        &self.gpu_utilisation[from..to]
    }

    /// How many GPUs there are, on all nodes.
    pub fn gpu_count(&self) -> usize {
        self.gpu_utilisation.len()
    }

    /// Who holds each GPU: every running job holds its GPUs, in handle order.
    pub fn gpu_book(&self) -> wasmsched_rules::GpuBook {
        let mut book = wasmsched_rules::GpuBook::new(self.nodes.iter().map(|n| n.gpu_memory_bytes.len() as u32));
        for (_, s) in self.jobs() {
            for g in &s.gpus {
                book.hold(g.node, g.index, s.handle);
            }
        }
        book
    }

    /// Node `node`'s GPUs that no running job holds, in index order.
    pub fn free_gpus(&self, node: NodeId) -> Vec<u32> {
        self.gpu_book().free_on(node).collect()
    }

    /// The GPUs job `job` holds on node `to` once migrated there: as many as it holds now, the
    /// lowest free there (fewer where fewer are free; none for a job without GPUs). A live
    /// backend's bookkeeping, as the simulator picks them; the device plugin or the runtime
    /// picks the devices.
    pub fn gpus_after_migration(&self, job: JobId, to: NodeId) -> Vec<u32> {
        let held = self.state(job).map_or(0, |s| s.gpus.len());
        if held == 0 {
            return Vec::new();
        }
        self.gpu_book().free_on(to).take(held).collect()
    }

    /// Where `gpu` sits in the GPU columns; None when it does not exist.
    pub fn gpu_position(&self, gpu: GpuSlot) -> Option<usize> {
        let count = self.nodes.get(gpu.node.index())?.gpu_memory_bytes.len();
        ((gpu.index as usize) < count).then(|| self.gpu_offsets[gpu.node.index()] + gpu.index as usize)
    }

    /// Count `ms` more of running for every running job: for backends that do not account it
    /// themselves.
    pub fn accrue_service(&mut self, ms: u64) {
        for s in self.states.iter_mut().filter(|s| s.is_running()) {
            s.accrue(ms);
        }
    }

    /// One job's declaration.
    pub fn spec(&self, handle: JobId) -> Option<&wit::JobSpec> {
        self.index(handle).map(|i| &self.specs[i])
    }

    /// One job's state.
    pub fn state(&self, handle: JobId) -> Option<&JobState> {
        self.index(handle).map(|i| &self.states[i])
    }

    /// One job's state, to update its use, limits or placement.
    pub fn state_mut(&mut self, handle: JobId) -> Option<&mut JobState> {
        self.index(handle).map(|i| &mut self.states[i])
    }

    /// A job reported progress now. False when the job is not tracked.
    pub fn record(&mut self, handle: JobId, epoch: u32, values: Vec<f64>) -> bool {
        self.record_at(handle, self.time_ms, epoch, values)
    }

    /// A job reported progress at `time_ms` (not after its previous record's time). False
    /// when the job is not tracked.
    pub fn record_at(&mut self, handle: JobId, time_ms: u64, epoch: u32, values: Vec<f64>) -> bool {
        let Some(i) = self.index(handle) else { return false };
        self.next_seq += 1;
        let history = &mut self.history[i];
        if history.len() == HISTORY_KEPT {
            history.pop_front();
        }
        history.push_back(Record { seq: self.next_seq, time_ms, epoch, values });
        true
    }

    /// One job's kept progress records, oldest first.
    pub fn history(&self, handle: JobId) -> impl Iterator<Item = &Record> {
        self.index(handle).into_iter().flat_map(|i| self.history[i].iter())
    }

    /// Whether the job reported progress after `since_ms` (ever, when None).
    pub fn reported_since(&self, handle: JobId, since_ms: Option<u64>) -> bool {
        self.history(handle).last().is_some_and(|r| since_ms.is_none_or(|since| r.time_ms > since))
    }

    /// The snapshot for the instance behind `cursor`, and the cursor moved past it.
    pub fn snapshot_for(&self, cursor: &mut Cursor) -> wit::Snapshot {
        let resync = cursor.last_call_ms.is_none();
        let interval_ms = cursor.last_call_ms.map_or(0, |t| self.time_ms.saturating_sub(t));
        let (mut added, mut removed) = (Vec::new(), Vec::new());
        if resync {
            added = self.specs.clone();
        } else {
            // Both lists are sorted by handle: one merge pass finds what came and went.
            let (mut i, mut j) = (0, 0);
            while i < self.specs.len() || j < cursor.seen.len() {
                let live = self.specs.get(i).map(|s| s.handle);
                let seen = cursor.seen.get(j).copied();
                match (live, seen) {
                    (Some(l), Some(s)) if l == s => (i, j) = (i + 1, j + 1),
                    (Some(l), Some(s)) if l < s => (added.push(self.specs[i].clone()), i += 1).1,
                    (Some(_), None) => (added.push(self.specs[i].clone()), i += 1).1,
                    (_, Some(s)) => (removed.push(s), j += 1).1,
                    (None, None) => unreachable!("loop condition"),
                }
            }
        }
        let mut fresh: Vec<(u64, JobId, &Record)> = Vec::new();
        for (state, history) in self.states.iter().zip(&self.history) {
            fresh.extend(
                history.iter().rev().take_while(|r| r.seq > cursor.progress_seq).map(|r| (r.seq, state.handle, r)),
            );
        }
        fresh.sort_unstable_by_key(|(seq, _, _)| *seq);

        if resync || !added.is_empty() || !removed.is_empty() {
            cursor.seen = self.states.iter().map(|s| s.handle).collect();
        }
        let nodes_changed = resync || cursor.nodes_version != Some(self.nodes_version);
        cursor.nodes_version = Some(self.nodes_version);
        let tenants_changed = resync || self.tenants_changed(cursor.tenants_version);
        cursor.tenants_version = Some(self.tenants_version());
        cursor.progress_seq = self.next_seq;
        cursor.last_call_ms = Some(self.time_ms);
        wit::Snapshot {
            time_ms: self.time_ms,
            interval_ms,
            resync,
            nodes: nodes_changed.then(|| self.nodes.clone()),
            nodes_down: self.nodes_down.clone(),
            tenants: tenants_changed.then(|| self.tenants.clone()),
            gpus: wit::GpuStates {
                utilisation_percent: self.gpu_utilisation.clone(),
                memory_used_bytes: self.gpu_memory_used.clone(),
            },
            room: self.room_columns(),
            added,
            removed,
            jobs: self.columns(),
            queue: self.queue_columns(),
            progress: progress_columns(&fresh),
        }
    }

    /// Every running job's numbers as the contract's columns, in handle order.
    fn columns(&self) -> wit::JobStates {
        let n = self.states.len() - self.queued;
        let mut c = wit::JobStates {
            handle: Vec::with_capacity(n),
            node: Vec::with_capacity(n),
            cpu_limit_millicores: Vec::with_capacity(n),
            memory_limit_bytes: Vec::with_capacity(n),
            cpu_used_millicores: Vec::with_capacity(n),
            memory_used_bytes: Vec::with_capacity(n),
            gpu_count: Vec::with_capacity(n),
            gpu_node: Vec::new(),
            gpu_index: Vec::new(),
            gpu_share_percent: Vec::with_capacity(n),
            gpu_used_percent: Vec::with_capacity(n),
            run_ms: Vec::with_capacity(n),
            gpu_ms: Vec::with_capacity(n),
            batch_size: Vec::with_capacity(n),
        };
        for j in self.states.iter().filter(|s| s.is_running()) {
            c.handle.push(j.handle);
            c.node.push(j.node);
            c.cpu_limit_millicores.push(j.cpu_limit_millicores.unwrap_or(0));
            c.memory_limit_bytes.push(j.memory_limit_bytes.unwrap_or(0));
            c.cpu_used_millicores.push(j.cpu_used_millicores);
            c.memory_used_bytes.push(j.memory_used_bytes);
            c.gpu_count.push(j.gpus.len().min(usize::from(u16::MAX)) as u16);
            for g in j.gpus.iter().take(usize::from(u16::MAX)) {
                c.gpu_node.push(g.node);
                c.gpu_index.push(g.index);
            }
            c.gpu_share_percent.push(j.gpu_share_percent.unwrap_or(0));
            c.gpu_used_percent.push(j.gpu_used_percent);
            c.run_ms.push(j.run_ms);
            c.gpu_ms.push(j.gpu_ms);
            c.batch_size.push(j.batch_size);
        }
        c
    }

    /// Every queued job's numbers as the contract's columns, in handle order.
    fn queue_columns(&self) -> wit::QueueStates {
        let q: Vec<&JobState> = self.states.iter().filter(|s| !s.is_running()).collect();
        wit::QueueStates {
            handle: q.iter().map(|j| j.handle).collect(),
            reason: q.iter().map(|j| j.queued.unwrap_or(wit::WaitReason::NeverStarted)).collect(),
            since_ms: q.iter().map(|j| j.since_ms).collect(),
            run_ms: q.iter().map(|j| j.run_ms).collect(),
            gpu_ms: q.iter().map(|j| j.gpu_ms).collect(),
        }
    }
}

/// The most GPU counts a job's `scaling` keeps.
pub const MAX_GPU_COUNTS: usize = 64;

/// A declaration's `scaling` made coherent: its GPU counts ascending, unique, at most
/// [`MAX_GPU_COUNTS`], and holding `gpus` (a job is rigid at `gpus` unless it says more); its
/// batch range in order.
fn settle_scaling(spec: &mut wit::JobSpec) {
    let counts = &mut spec.scaling.gpu_counts;
    counts.push(spec.gpus);
    counts.sort_unstable();
    counts.dedup();
    if counts.len() > MAX_GPU_COUNTS {
        let keep = counts.binary_search(&spec.gpus).unwrap_or(0).min(counts.len() - MAX_GPU_COUNTS);
        counts.drain(..keep);
        counts.truncate(MAX_GPU_COUNTS);
    }
    let s = &mut spec.scaling;
    if s.batch_size_min > s.batch_size_max {
        std::mem::swap(&mut s.batch_size_min, &mut s.batch_size_max);
    }
}

fn progress_columns(records: &[(u64, JobId, &Record)]) -> wit::ProgressRecords {
    wit::ProgressRecords {
        job: records.iter().map(|(_, job, _)| *job).collect(),
        time_ms: records.iter().map(|(_, _, r)| r.time_ms).collect(),
        epoch: records.iter().map(|(_, _, r)| r.epoch).collect(),
        value_count: records.iter().map(|(_, _, r)| r.values.len().min(255) as u8).collect(),
        values: records.iter().flat_map(|(_, _, r)| r.values.iter().take(255).copied()).collect(),
    }
}

pub mod sample;
mod tenants;

pub use tenants::{DEFAULT_TENANT, TenantLoad, entitlement, undeclared};

#[cfg(test)]
mod tests;
