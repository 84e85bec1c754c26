//! Build snapshots natively, so a policy's logic is tested with plain `cargo test`.
//!
//! A [`TestWorld`] plays the host: nodes, jobs with their declarations, measured use and
//! progress reports, a queue of jobs that wait, and a clock. [`Harness`] runs a policy
//! against it tick by tick and, like the host, puts what the policy decides into force:
//! limits, migrations, placements, preemptions and stops.
//!
//! ```
//! use wasmsched_sdk::prelude::*;
//! use wasmsched_sdk::testing::{Harness, TestWorld, job};
//!
//! struct Nothing;
//! impl Policy for Nothing {
//!     type Config = NoConfig;
//!     fn new(_: NoConfig) -> Result<Self, PolicyError> { Ok(Nothing) }
//!     fn decide(&mut self, _: &Snapshot) -> Result<Decision, PolicyError> { Ok(Decision::new()) }
//! }
//!
//! let mut world = TestWorld::new();
//! world.node("n0", Millicores(8000), Bytes::gib(32));
//! let a = world.add_job(job("a", "cifar10").metric("accuracy", Direction::HigherIsBetter));
//! world.report(a, 1, &[0.42]);
//! let mut h = Harness::new(Nothing, world);
//! assert!(h.tick(Seconds(30.0)).unwrap().is_empty());
//! ```

use std::collections::BTreeMap;

use crate::bindings::wasmsched::policy::types as wit;
use crate::decision::{ActionKind, Decision};
use crate::policy::{Policy, PolicyError, Runner};
use crate::units::{Bytes, JobId, Millicores, NodeId, Seconds};
use crate::view::{
    Direction, GpuSlot, JobKind, JobNumbers, QueueNumbers, WaitReason, no_progress, no_queue, no_states,
};

/// Declares a job: start with [`job`], chain what it declares.
#[derive(Clone, Debug)]
pub struct JobBuilder(wit::JobSpec);

/// A training job named `name` running `model`, with no metrics or targets yet.
pub fn job(name: &str, model: &str) -> JobBuilder {
    JobBuilder(wit::JobSpec {
        handle: 0,
        name: name.into(),
        model: model.into(),
        kind: JobKind::Training,
        metrics: Vec::new(),
        tiers: None,
        qoe_target: None,
        max_epochs: None,
        labels: Vec::new(),
        arrival_ms: 0,
        gpus: 0,
        replicas: 1,
        scaling: wit::Scaling { gpu_counts: Vec::new(), batch_size_min: 0, batch_size_max: 0 },
        tenant: "default".into(),
        requests: wit::Resources { cpu_millicores: 0, memory_bytes: 0 },
        node_selector: Vec::new(),
    })
}

/// Declares a tenant: start with [`tenant`], chain what it is entitled to, hand it to
/// [`TestWorld::declare`].
#[derive(Clone, Debug)]
pub struct TenantBuilder(wit::Tenant);

/// Tenant `name`: weight 1, no quota, no cohort.
pub fn tenant(name: &str) -> TenantBuilder {
    TenantBuilder(wit::Tenant {
        name: name.into(),
        weight: 1.0,
        quota_gpus: None,
        borrowing_limit_gpus: None,
        cohort: String::new(),
    })
}

impl TenantBuilder {
    /// Its weight against the other tenants'.
    pub fn weight(mut self, weight: f64) -> Self {
        self.0.weight = weight;
        self
    }

    /// The GPUs guaranteed to it.
    pub fn quota(mut self, gpus: u32) -> Self {
        self.0.quota_gpus = Some(gpus);
        self
    }

    /// The most GPUs it may borrow beyond its quota.
    pub fn borrowing_limit(mut self, gpus: u32) -> Self {
        self.0.borrowing_limit_gpus = Some(gpus);
        self
    }

    /// The cohort it lends to and borrows from.
    pub fn cohort(mut self, cohort: &str) -> Self {
        self.0.cohort = cohort.into();
        self
    }
}

impl JobBuilder {
    /// Make it an inference service.
    pub fn inference(mut self) -> Self {
        self.0.kind = JobKind::Inference;
        self
    }

    /// Declare a metric; the first declared is the main one.
    pub fn metric(mut self, name: &str, direction: Direction) -> Self {
        self.0.metrics.push(wit::MetricSpec { name: name.into(), direction });
        self
    }

    /// TRADL's two-tier targets on the main metric.
    pub fn tiers(mut self, deliverable: f64, final_: f64) -> Self {
        self.0.tiers = Some(wit::Tiers { deliverable, final_ });
        self
    }

    /// DQoES's QoE target.
    pub fn qoe_target(mut self, target: f64) -> Self {
        self.0.qoe_target = Some(target);
        self
    }

    /// The epoch cap.
    pub fn max_epochs(mut self, n: u32) -> Self {
        self.0.max_epochs = Some(n);
        self
    }

    /// The GPUs it asks for, in all.
    pub fn gpus(mut self, n: u32) -> Self {
        self.0.gpus = n;
        self
    }

    /// Into how many pieces it may be split across nodes.
    pub fn replicas(mut self, n: u32) -> Self {
        self.0.replicas = n;
        self
    }

    /// Make it elastic: it runs on any of `gpu_counts` GPUs (its `gpus` among them) at a
    /// global batch size in `batch_sizes`, starting at the smallest.
    pub fn elastic(mut self, gpu_counts: &[u32], batch_sizes: std::ops::RangeInclusive<u32>) -> Self {
        self.0.scaling = wit::Scaling {
            gpu_counts: gpu_counts.to_vec(),
            batch_size_min: *batch_sizes.start(),
            batch_size_max: *batch_sizes.end(),
        };
        self
    }

    /// The tenant it belongs to (default "default").
    pub fn tenant(mut self, name: &str) -> Self {
        self.0.tenant = name.into();
        self
    }

    /// A free-form label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.0.labels.push((key.into(), value.into()));
        self
    }

    /// What each of its pieces requests of its node.
    pub fn requests(mut self, cpu: Millicores, memory: Bytes) -> Self {
        self.0.requests = wit::Resources { cpu_millicores: cpu.0, memory_bytes: memory.0 };
        self
    }

    /// A label every node it uses must carry.
    pub fn node_selector(mut self, key: &str, value: &str) -> Self {
        self.0.node_selector.push((key.into(), value.into()));
        self
    }
}

/// One job of a [`TestWorld`].
#[derive(Debug)]
struct TestJob {
    spec: wit::JobSpec,
    state: JobNumbers,
    gpus: Vec<GpuSlot>,
    queued: Option<QueueNumbers>,
}

/// A host in miniature: it produces the same deltas a real host sends.
#[derive(Debug, Default)]
pub struct TestWorld {
    time_ms: u64,
    last_call_ms: Option<u64>,
    nodes: Vec<wit::Node>,
    nodes_sent: usize,
    /// Per node, each GPU's (utilisation percent, memory used).
    gpu_use: Vec<Vec<(f32, u64)>>,
    jobs: BTreeMap<u32, TestJob>,
    next_handle: u32,
    added: Vec<u32>,
    removed: Vec<u32>,
    progress: Option<wit::ProgressRecords>,
    /// The nodes that cannot take work, ascending.
    down: Vec<u32>,
    /// Per node, the pieces (pods) it takes in all.
    pods: Vec<u32>,
    /// Declared tenants first, then those jobs named undeclared, as the host keeps them.
    tenants: Vec<wit::Tenant>,
    declared: usize,
    tenants_changed: bool,
}

impl TestWorld {
    /// No nodes, no jobs, time zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Nodes `n0`, `n1`, … with these GPU counts (16 GiB each), 8 cores and 64 GiB apiece.
    pub fn gpu_cluster(gpus: &[usize]) -> Self {
        let mut w = TestWorld::new();
        for (i, &n) in gpus.iter().enumerate() {
            w.node_with_gpus(&format!("n{i}"), Millicores(8000), Bytes::gib(64), &vec![Bytes::gib(16); n]);
        }
        w
    }

    /// Nodes `n0`, `n1`, … as [`Self::gpu_cluster`] makes them, each with its GPU count and
    /// GPU type ("t4", "a100"; "" for none).
    pub fn typed_gpu_cluster(nodes: &[(usize, &str)]) -> Self {
        let mut w = TestWorld::gpu_cluster(&nodes.iter().map(|n| n.0).collect::<Vec<_>>());
        for (i, (_, gpu_type)) in nodes.iter().enumerate().filter(|(_, n)| !n.1.is_empty()) {
            w.set_gpu_type(NodeId(i as u32), gpu_type);
        }
        w
    }

    /// Declare a tenant (replacing an earlier declaration of the same name).
    pub fn declare(&mut self, tenant: TenantBuilder) {
        let t = tenant.0;
        match self.tenants.iter().position(|d| d.name == t.name) {
            Some(i) if i < self.declared => self.tenants[i] = t,
            Some(i) => {
                self.tenants.remove(i);
                self.tenants.insert(self.declared, t);
                self.declared += 1;
            }
            None => {
                self.tenants.insert(self.declared, t);
                self.declared += 1;
            }
        }
        self.tenants_changed = true;
    }

    /// A job names tenant `name`: added undeclared (weight 1, no quota) when new.
    fn name_tenant(&mut self, name: &str) {
        if !self.tenants.iter().any(|t| t.name == name) {
            self.tenants.push(tenant(name).0);
            self.tenants_changed = true;
        }
    }

    /// Every node's room, as a host counts it: its capacity and pod slots less what the
    /// pieces of the jobs running there request.
    fn room(&self) -> wit::NodeRoom {
        let mut room: Vec<wasmsched_rules::NodeRoom> = self
            .nodes
            .iter()
            .zip(&self.pods)
            .map(|(n, &pods)| wasmsched_rules::NodeRoom { cpu: n.cpu_millicores, memory: n.memory_bytes, pods })
            .collect();
        for j in self.jobs.values().filter(|j| j.queued.is_none()) {
            let request =
                wasmsched_rules::Request { cpu: j.spec.requests.cpu_millicores, memory: j.spec.requests.memory_bytes };
            let held = j.gpus.iter().map(|g| g.node);
            let node = NodeId(j.state.node);
            for (node, pieces) in wasmsched_rules::room::pieces_held(j.spec.gpus, j.spec.replicas, held, node) {
                if let Some(r) = room.get_mut(node.index()) {
                    r.take(request, pieces);
                }
            }
        }
        wit::NodeRoom {
            cpu_millicores: room.iter().map(|r| r.cpu).collect(),
            memory_bytes: room.iter().map(|r| r.memory).collect(),
            pods: room.iter().map(|r| r.pods).collect(),
        }
    }

    /// Add a node without GPUs.
    pub fn node(&mut self, name: &str, cpu: Millicores, memory: Bytes) -> NodeId {
        self.node_with_gpus(name, cpu, memory, &[])
    }

    /// Add a node with GPUs of the given memory sizes, idle.
    pub fn node_with_gpus(&mut self, name: &str, cpu: Millicores, memory: Bytes, gpus: &[Bytes]) -> NodeId {
        self.nodes.push(wit::Node {
            name: name.into(),
            cpu_millicores: cpu.0,
            memory_bytes: memory.0,
            gpu_memory_bytes: gpus.iter().map(|b| b.0).collect(),
            gpu_type: String::new(),
            labels: Vec::new(),
            domains: Vec::new(),
        });
        self.pods.push(u32::MAX);
        self.gpu_use.push(vec![(0.0, 0); gpus.len()]);
        NodeId(self.nodes.len() as u32 - 1)
    }

    /// Name the type of `node`'s GPUs ("a100"); nodes start with none.
    pub fn set_gpu_type(&mut self, node: NodeId, gpu_type: &str) {
        let n = self.nodes.get_mut(node.0 as usize).unwrap_or_else(|| panic!("node#{node} is not in this TestWorld"));
        n.gpu_type = gpu_type.into();
        self.nodes_sent = usize::MAX;
    }

    /// Give `node` a label (its labels stay sorted by key).
    pub fn set_label(&mut self, node: NodeId, key: &str, value: &str) {
        let n = self.nodes.get_mut(node.0 as usize).unwrap_or_else(|| panic!("node#{node} is not in this TestWorld"));
        n.labels.retain(|(k, _)| k != key);
        n.labels.push((key.into(), value.into()));
        n.labels.sort();
        self.nodes_sent = usize::MAX;
    }

    /// Name `node`'s topology domains, coarsest first.
    pub fn set_domains(&mut self, node: NodeId, domains: &[&str]) {
        let n = self.nodes.get_mut(node.0 as usize).unwrap_or_else(|| panic!("node#{node} is not in this TestWorld"));
        n.domains = domains.iter().map(|d| d.to_string()).collect();
        self.nodes_sent = usize::MAX;
    }

    /// Say how many pieces (pods) `node` takes in all (no limit unless set); its room counts
    /// the running jobs' pieces off it.
    pub fn set_pods(&mut self, node: NodeId, pods: u32) {
        *self.pods.get_mut(node.0 as usize).unwrap_or_else(|| panic!("node#{node} is not in this TestWorld")) = pods;
    }

    /// Say whether `node` can take work (false: NotReady or cordoned).
    pub fn set_takes_work(&mut self, node: NodeId, takes_work: bool) {
        match (self.down.binary_search(&node.0), takes_work) {
            (Err(at), false) => self.down.insert(at, node.0),
            (Ok(at), true) => _ = self.down.remove(at),
            _ => {}
        }
    }

    /// Set a GPU's measured use over the last interval.
    pub fn set_gpu_use(&mut self, node: NodeId, gpu: u32, utilisation_percent: f32, memory_used: Bytes) {
        let slot = self.gpu_use.get_mut(node.0 as usize).and_then(|g| g.get_mut(gpu as usize));
        *slot.unwrap_or_else(|| panic!("node#{node} has no GPU {gpu} in this TestWorld")) =
            (utilisation_percent, memory_used.0);
    }

    /// Start a job on node 0.
    pub fn add_job(&mut self, spec: JobBuilder) -> JobId {
        self.add_job_on(spec, NodeId(0))
    }

    /// Start a job on `node` (without GPUs; [`TestWorld::start`] gives a queued one GPUs).
    pub fn add_job_on(&mut self, spec: JobBuilder, node: NodeId) -> JobId {
        let job = self.queue_job(spec);
        self.start(job, node, &[]);
        job
    }

    /// A job arrives now and waits in the queue.
    pub fn queue_job(&mut self, spec: JobBuilder) -> JobId {
        let handle = self.next_handle;
        self.next_handle += 1;
        let mut spec = spec.0;
        spec.handle = handle;
        // As the host sends it: the counts ascending, holding the GPUs it asks for.
        spec.scaling.gpu_counts.push(spec.gpus);
        spec.scaling.gpu_counts.sort_unstable();
        spec.scaling.gpu_counts.dedup();
        let batch_size = spec.scaling.batch_size_min;
        spec.arrival_ms = self.time_ms;
        if spec.tenant.trim().is_empty() {
            spec.tenant = "default".into();
        }
        self.name_tenant(&spec.tenant);
        let queued = QueueNumbers { reason: WaitReason::NeverStarted, since_ms: self.time_ms, run_ms: 0, gpu_ms: 0 };
        let state = JobNumbers { batch_size, ..JobNumbers::default() };
        self.jobs.insert(handle, TestJob { spec, state, gpus: Vec::new(), queued: Some(queued) });
        self.added.push(handle);
        JobId(handle)
    }

    /// A queued job starts on `node` with these of its GPUs.
    pub fn start(&mut self, job: JobId, node: NodeId, gpus: &[u32]) {
        let slots = gpus.iter().map(|&index| GpuSlot { node, index }).collect();
        self.start_on(job, node, slots);
    }

    fn start_on(&mut self, job: JobId, node: NodeId, gpus: Vec<GpuSlot>) {
        let j = self.job(job);
        if let Some(q) = j.queued.take() {
            j.state.run_ms = q.run_ms;
            j.state.gpu_ms = q.gpu_ms;
        }
        j.state.node = node.0;
        j.gpus = gpus;
    }

    /// A running job goes back to the queue, preempted.
    pub fn preempt(&mut self, job: JobId) {
        let now = self.time_ms;
        let j = self.job(job);
        if j.queued.is_none() {
            j.queued = Some(QueueNumbers {
                reason: WaitReason::Preempted,
                since_ms: now,
                run_ms: j.state.run_ms,
                gpu_ms: j.state.gpu_ms,
            });
            j.gpus.clear();
        }
    }

    fn job(&mut self, job: JobId) -> &mut TestJob {
        self.jobs.get_mut(&job.0).unwrap_or_else(|| panic!("job#{job} is not in this TestWorld"))
    }

    /// End a job.
    pub fn remove_job(&mut self, job: JobId) {
        if self.jobs.remove(&job.0).is_some() {
            self.added.retain(|h| *h != job.0);
            self.removed.push(job.0);
        }
    }

    fn state(&mut self, job: JobId) -> &mut JobNumbers {
        &mut self.job(job).state
    }

    /// Set the job's measured CPU use over the last interval.
    pub fn set_cpu_use(&mut self, job: JobId, used: Millicores) {
        self.state(job).cpu_used = used.0;
    }

    /// Set the job's CPU limit as the host would report it.
    pub fn set_cpu_limit(&mut self, job: JobId, limit: Option<Millicores>) {
        self.state(job).cpu_limit = limit.map(|m| m.0);
    }

    /// Move the job to `node`.
    pub fn place(&mut self, job: JobId, node: NodeId) {
        self.state(job).node = node.0;
    }

    /// The job reports a record now.
    pub fn report(&mut self, job: JobId, epoch: u32, values: &[f64]) {
        let p = self.progress.get_or_insert_with(no_progress);
        p.job.push(job.0);
        p.time_ms.push(self.time_ms);
        p.epoch.push(epoch);
        p.value_count.push(values.len() as u8);
        p.values.extend_from_slice(values);
    }

    /// Move the clock forward; running jobs accrue run time and GPU time.
    pub fn advance(&mut self, by: Seconds) {
        let ms = by.as_millis();
        self.time_ms += ms;
        for j in self.jobs.values_mut().filter(|j| j.queued.is_none()) {
            j.state.run_ms += ms;
            j.state.gpu_ms += ms * j.gpus.len().max(1) as u64;
        }
    }

    /// The clock.
    pub fn time(&self) -> Seconds {
        Seconds::from_millis(self.time_ms)
    }

    /// The delta since the previous snapshot, as the host would send it.
    pub fn snapshot(&mut self) -> wit::Snapshot {
        let interval_ms = self.last_call_ms.map_or(0, |t| self.time_ms - t);
        let resync = self.last_call_ms.is_none();
        self.last_call_ms = Some(self.time_ms);
        // Nodes cross when they changed since the last call (a node added after it), as the
        // host sends them.
        let nodes_changed = resync || self.nodes_sent != self.nodes.len();
        self.nodes_sent = self.nodes.len();
        let tenants_changed = resync || std::mem::take(&mut self.tenants_changed);
        let mut jobs = no_states();
        let mut queue = no_queue();
        for (handle, j) in &self.jobs {
            match j.queued {
                None => j.state.push_to(*handle, &j.gpus, &mut jobs),
                Some(q) => {
                    queue.handle.push(*handle);
                    queue.reason.push(q.reason);
                    queue.since_ms.push(q.since_ms);
                    queue.run_ms.push(q.run_ms);
                    queue.gpu_ms.push(q.gpu_ms);
                }
            }
        }
        let added = std::mem::take(&mut self.added)
            .into_iter()
            .filter_map(|h| self.jobs.get(&h))
            .map(|j| j.spec.clone())
            .collect();
        wit::Snapshot {
            time_ms: self.time_ms,
            interval_ms,
            resync,
            nodes: nodes_changed.then(|| self.nodes.clone()),
            nodes_down: self.down.clone(),
            tenants: tenants_changed.then(|| self.tenants.clone()),
            gpus: wit::GpuStates {
                utilisation_percent: self.gpu_use.iter().flatten().map(|g| g.0).collect(),
                memory_used_bytes: self.gpu_use.iter().flatten().map(|g| g.1).collect(),
            },
            room: self.room(),
            added,
            removed: std::mem::take(&mut self.removed),
            jobs,
            queue,
            progress: self.progress.take().unwrap_or_else(no_progress),
        }
    }

    /// Put a decision into force, as the host would: limits, migrations, placements,
    /// preemptions and stops (it trusts the decision; the host validates it first).
    pub fn apply(&mut self, decision: &Decision) {
        for action in decision.actions() {
            let job = action.job();
            let Some(j) = self.jobs.get_mut(&job.0) else { continue };
            match action.kind() {
                ActionKind::SetCpu(limit) => j.state.cpu_limit = *limit,
                ActionKind::SetMemory(limit) => j.state.memory_limit = *limit,
                ActionKind::Migrate(node) => j.state.node = *node,
                ActionKind::Stop => self.removed.push(job.0),
                ActionKind::Place(p) => {
                    let first = NodeId(p.nodes.first().map_or(0, |e| e.node));
                    self.start_on(job, first, slots(p));
                }
                ActionKind::Preempt => self.preempt(job),
                ActionKind::Resize(r) => {
                    let j = self.job(job);
                    j.state.node = r.placement.nodes.first().map_or(j.state.node, |e| e.node);
                    j.gpus = slots(&r.placement);
                    if let Some(b) = r.batch_size {
                        j.state.batch_size = b;
                    }
                }
                ActionKind::Deliver | ActionKind::SetGpuShare(_) => {}
            }
        }
        for handle in self.removed.clone() {
            self.jobs.remove(&handle);
        }
    }
}

/// The GPUs a placement names, in its order.
fn slots(p: &wit::Placement) -> Vec<GpuSlot> {
    p.nodes.iter().flat_map(|e| e.gpus.iter().map(|&index| GpuSlot { node: NodeId(e.node), index })).collect()
}

/// A policy that decides nothing: to see a world as a policy sees it, run
/// `Runner::from_policy(Inspect)` on its snapshot and read `runner.view()`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Inspect;

impl Policy for Inspect {
    type Config = crate::NoConfig;
    fn new(_: crate::NoConfig) -> Result<Self, crate::PolicyError> {
        Ok(Inspect)
    }
    fn decide(&mut self, _: &crate::Snapshot) -> Result<Decision, crate::PolicyError> {
        Ok(Decision::new())
    }
}

/// A policy and a [`TestWorld`], ticked together.
pub struct Harness<P> {
    runner: Runner<P>,
    /// The world the policy runs in; change it between ticks.
    pub world: TestWorld,
}

impl<P: Policy> Harness<P> {
    /// Run `policy` against `world`.
    pub fn new(policy: P, world: TestWorld) -> Self {
        Harness { runner: Runner::from_policy(policy), world }
    }

    /// Build the policy from its config as JSON, as the host does.
    pub fn from_config(config_json: &str, world: TestWorld) -> Result<Self, PolicyError> {
        Ok(Harness { runner: Runner::init(config_json, None)?, world })
    }

    /// Advance the clock by `by`, call the policy, and put its limits into force.
    pub fn tick(&mut self, by: Seconds) -> Result<Decision, PolicyError> {
        self.world.advance(by);
        let decision = self.runner.decide(self.world.snapshot())?;
        self.world.apply(&decision);
        Ok(decision)
    }

    /// The policy, to inspect its state.
    pub fn policy(&self) -> &P {
        self.runner.policy()
    }

    /// The runner, to save its state.
    pub fn runner(&self) -> &Runner<P> {
        &self.runner
    }

    /// A hot swap: `fresh` restored from the state this harness's policy saves now.
    pub fn swap_into(&self, mut fresh: P) -> Result<P, PolicyError> {
        fresh.restore_state(&self.runner.save_state())?;
        Ok(fresh)
    }
}

/// A placement's entries as (node, GPU indices) pairs.
pub type Entries = Vec<(u32, Vec<u32>)>;

/// The placements of a decision, in order: each job with its entries.
pub fn placed(d: &Decision) -> Vec<(JobId, Entries)> {
    d.actions()
        .iter()
        .filter_map(|a| match a.kind() {
            ActionKind::Place(p) => Some((a.job(), p.nodes.iter().map(|e| (e.node, e.gpus.clone())).collect())),
            _ => None,
        })
        .collect()
}

/// [`churn`] for each seed of `seeds`, 40 ticks, each running job ending with one chance in 4,
/// on nodes of 4, 4, 8 and 8 GPUs, the last two of types "rtx" and "a100" (the first two
/// without a type): what a policy that plans by GPU type must keep within the host's rules.
pub fn churn_typed<P: Policy>(policy: impl Fn() -> P, seeds: std::ops::Range<u64>) {
    for seed in seeds {
        let world = TestWorld::typed_gpu_cluster(&[(4, ""), (4, ""), (8, "rtx"), (8, "a100")]);
        churn(&mut Harness::new(policy(), world), 40, seed, 4, |_| {});
    }
}

/// A test's dice, deterministic for their seed (xorshift64; a seed of 0 stays 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dice(pub u64);

impl Dice {
    /// The next throw, below `n` (at least 1).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// FNV-1a of `text`: a short fingerprint of a run's decisions, to pin them in a test.
pub fn fingerprint(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Every decision of a busy run ([`busy_rounds`]): one line a round, its actions in order and
/// its pending reasons; and how many resizes and preemptions there were.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Transcript {
    /// One line a round.
    pub text: String,
    /// `resize` actions in all.
    pub resizes: usize,
    /// `preempt` actions in all.
    pub preempts: usize,
}

impl Transcript {
    /// What a test pins: the text's [`fingerprint`], its rounds, the resizes and preemptions.
    pub fn summary(&self) -> (u64, usize, usize, usize) {
        (fingerprint(&self.text), self.text.lines().count(), self.resizes, self.preempts)
    }
}

/// A busy run of an elastic scheduler, deterministic for `seed`: for `rounds` rounds, up to two
/// jobs arrive (elastic ones of assorted models, as `elastic` makes them, and rigid ones of 1
/// to 8 GPUs in 1 or 2 replicas), and each running job ends with one chance in 6; each job
/// that runs on shows `gpu_use` (utilisation, memory) on every GPU it holds, when given.
/// `round` decides a round (and checks the decision as the host would).
pub fn busy_rounds<P: Policy>(
    h: &mut Harness<P>,
    rounds: u32,
    seed: u64,
    elastic: impl Fn(&str, &str) -> JobBuilder,
    gpu_use: Option<(f32, Bytes)>,
    mut round: impl FnMut(&mut Harness<P>) -> Decision,
) -> Transcript {
    const MODELS: [&str; 5] = ["cifar10", "imagenet", "deepspeech2", "yolov3", "bert"];
    const RIGID: [(u32, u32); 5] = [(1, 1), (2, 1), (4, 1), (4, 2), (8, 2)];
    let mut dice = Dice(seed);
    let mut below = |n: u64| dice.below(n);
    let mut t = Transcript::default();
    for tick in 0..rounds {
        for _ in 0..below(3) {
            let name = format!("j{tick}");
            if below(2) == 0 {
                h.world.queue_job(elastic(&name, MODELS[below(MODELS.len() as u64) as usize]));
            } else {
                let (gpus, replicas) = RIGID[below(RIGID.len() as u64) as usize];
                h.world.queue_job(job(&name, "cifar10").gpus(gpus).replicas(replicas));
            }
        }
        let running: Vec<(JobId, Vec<GpuSlot>)> =
            h.runner().view().jobs().map(|j| (j.id(), j.gpus().to_vec())).collect();
        for (id, gpus) in running {
            if below(6) == 0 {
                h.world.remove_job(id);
            } else if let Some((percent, memory)) = gpu_use {
                for g in gpus {
                    h.world.set_gpu_use(g.node, g.index, percent, memory);
                }
            }
        }
        let d = round(h);
        t.resizes += d.actions().iter().filter(|a| matches!(a.kind(), ActionKind::Resize(_))).count();
        t.preempts += d.actions().iter().filter(|a| matches!(a.kind(), ActionKind::Preempt)).count();
        t.text += &format!("{tick}: {:?} | {:?}\n", d.actions(), d.pending_reasons());
    }
    t
}

/// A busy world for a scheduler, deterministic for a `seed`: for `ticks` ticks of 30 s, up to
/// two jobs of assorted shapes (CPU only; 1 to 32 GPUs in 1 to 4 replicas) arrive, and each
/// running job ends with one chance in `end_one_in`. Every decision is checked as the host
/// would check it ([`crate::sched::check`]; a problem panics with its tick) and handed to
/// `seen`.
pub fn churn<P: Policy>(h: &mut Harness<P>, ticks: u32, seed: u64, end_one_in: u64, mut seen: impl FnMut(&Decision)) {
    const SHAPES: [(u32, u32); 10] = [(0, 1), (1, 1), (2, 1), (2, 2), (4, 1), (4, 2), (8, 1), (8, 4), (12, 3), (32, 4)];
    let mut dice = Dice(seed);
    let mut below = |n: u64| dice.below(n);
    for tick in 0..ticks {
        for _ in 0..below(3) {
            let (gpus, replicas) = SHAPES[below(SHAPES.len() as u64) as usize];
            h.world.queue_job(job(&format!("j{tick}"), "cifar10").gpus(gpus).replicas(replicas));
        }
        let running: Vec<JobId> = h.runner().view().jobs().map(|j| j.id()).collect();
        for id in running {
            if below(end_one_in) == 0 {
                h.world.remove_job(id);
            }
        }
        let d = h.tick(Seconds(30.0)).unwrap_or_else(|e| panic!("tick {tick}: the policy failed: {e:?}"));
        if let Err(problem) = crate::sched::check(&h.runner().view(), &d) {
            panic!("tick {tick}: {problem}");
        }
        seen(&d);
    }
}
