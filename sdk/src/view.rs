//! The typed view a policy reads: [`Snapshot`], [`Job`], [`Node`], and the job table the SDK
//! keeps inside the guest so that only what changed has to cross each tick.

use crate::bindings::wasmsched::policy::types as wit;
use crate::stats;
use crate::units::{Bytes, JobId, Millicores, NodeId, Seconds};

pub use wit::{Direction, JobKind, MetricSpec, Scaling, Tiers, WaitReason};

mod table;
mod tenant;

use table::JobEntry;
pub(crate) use table::{JobNumbers, JobTable, NodeTable, QueueNumbers, no_progress, no_queue, no_states};
pub use tenant::Tenant;

/// One GPU: its node and its index there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GpuSlot {
    /// The node.
    pub node: NodeId,
    /// The GPU's index on the node.
    pub index: u32,
}

/// How many progress records the SDK keeps per job (the oldest are dropped first).
pub const HISTORY_LIMIT: usize = 512;

/// One progress report of a job, as kept in its history.
#[derive(Clone, Debug, PartialEq)]
pub struct ProgressRecord {
    /// When the job reported it.
    pub time: Seconds,
    /// Epochs completed (training) or windows served (inference).
    pub epoch: u32,
    /// Values in the order of the job's [`Job::metrics`]; NaN where missing.
    pub values: Values,
}

/// A record's values: a slice (`&record.values[..]`, `.iter()`, `.first()`), kept inline up to
/// [`Values::INLINE`] of them so that a record costs no allocation of its own.
#[derive(Clone, Default)]
pub struct Values {
    len: usize,
    inline: [f64; Values::INLINE],
    spilled: Vec<f64>,
}

impl Values {
    /// How many values fit without an allocation.
    pub const INLINE: usize = 3;

    /// A copy of `values`.
    pub fn from_slice(values: &[f64]) -> Self {
        let mut v = Values { len: values.len(), ..Values::default() };
        if values.len() <= Self::INLINE {
            v.inline[..values.len()].copy_from_slice(values);
        } else {
            v.spilled = values.to_vec();
        }
        v
    }
}

impl std::ops::Deref for Values {
    type Target = [f64];

    fn deref(&self) -> &[f64] {
        if self.len <= Self::INLINE { &self.inline[..self.len] } else { &self.spilled }
    }
}

impl PartialEq for Values {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for Values {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl ProgressRecord {
    /// The main metric's value (the first declared), NaN when absent.
    pub fn value(&self) -> f64 {
        self.values.first().copied().unwrap_or(f64::NAN)
    }
}

/// What a policy sees on a tick: the time, the nodes and every live job.
#[derive(Clone, Copy)]
pub struct Snapshot<'a> {
    pub(crate) time: Seconds,
    pub(crate) interval: Seconds,
    pub(crate) nodes: &'a NodeTable,
    pub(crate) table: &'a JobTable,
}

impl<'a> Snapshot<'a> {
    /// The host's clock (virtual in the simulator).
    pub fn time(&self) -> Seconds {
        self.time
    }

    /// Time since this policy's previous call (zero on the first).
    pub fn interval(&self) -> Seconds {
        self.interval
    }

    /// Every node, in handle order.
    pub fn nodes(&self) -> impl ExactSizeIterator<Item = Node<'a>> + 'a {
        let table = self.nodes;
        (0..table.nodes.len()).map(move |i| Node { id: NodeId(i as u32), table })
    }

    /// One node, if it exists.
    pub fn node(&self, id: NodeId) -> Option<Node<'a>> {
        ((id.0 as usize) < self.nodes.nodes.len()).then_some(Node { id, table: self.nodes })
    }

    /// Every running job, in handle order.
    pub fn jobs(&self) -> impl Iterator<Item = Job<'a>> + 'a {
        let table = self.table;
        table.entries.iter().filter(|e| e.queued.is_none()).map(move |entry| Job { entry, table })
    }

    /// Every job that waits to be placed, in handle order (arrival order; a preempted job
    /// keeps its place).
    pub fn queue(&self) -> impl Iterator<Item = Job<'a>> + 'a {
        let table = self.table;
        table.entries.iter().filter(|e| e.queued.is_some()).map(move |entry| Job { entry, table })
    }

    /// How many jobs wait to be placed.
    pub fn queue_len(&self) -> usize {
        self.table.entries.len() - self.table.running
    }

    /// How many running jobs hold each GPU of `node`, in GPU order.
    pub fn gpu_holders(&self, node: NodeId) -> Vec<u32> {
        self.nodes.holders_on(node).to_vec()
    }

    /// The GPUs of `node` that no running job holds, in GPU order.
    pub fn free_gpus(&self, node: NodeId) -> Vec<u32> {
        self.gpu_holders(node).iter().enumerate().filter(|(_, h)| **h == 0).map(|(i, _)| i as u32).collect()
    }

    /// The live jobs placed on `node`.
    pub fn jobs_on(&self, node: NodeId) -> impl Iterator<Item = Job<'a>> + 'a {
        self.jobs().filter(move |j| j.node() == node)
    }

    /// One job, if it is live (running or queued).
    pub fn job(&self, id: JobId) -> Option<Job<'a>> {
        self.table.index(id.0).map(|i| Job { entry: &self.table.entries[i], table: self.table })
    }

    /// How many jobs run.
    pub fn job_count(&self) -> usize {
        self.table.running
    }
}

/// A node and its capacity.
#[derive(Clone, Copy)]
pub struct Node<'a> {
    id: NodeId,
    table: &'a NodeTable,
}

/// A node's room for requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Room {
    /// CPU not requested yet.
    pub cpu: Millicores,
    /// Memory not requested yet.
    pub memory: Bytes,
    /// Pieces (pods) it takes still; `u32::MAX`: no limit.
    pub pods: u32,
}

impl From<Room> for wasmsched_rules::NodeRoom {
    fn from(r: Room) -> Self {
        wasmsched_rules::NodeRoom { cpu: r.cpu.0, memory: r.memory.0, pods: r.pods }
    }
}

/// One GPU: its memory and its measured use over the last interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gpu {
    /// Busy time over the last interval, in percent.
    pub utilisation_percent: f32,
    /// Memory in use.
    pub memory_used: Bytes,
    /// Memory present.
    pub memory_total: Bytes,
}

impl<'a> Node<'a> {
    /// Its handle.
    pub fn id(&self) -> NodeId {
        self.id
    }

    fn raw(&self) -> &'a wit::Node {
        &self.table.nodes[self.id.0 as usize]
    }

    /// Its name.
    pub fn name(&self) -> &'a str {
        &self.raw().name
    }

    /// CPU capacity.
    pub fn cpu(&self) -> Millicores {
        Millicores(self.raw().cpu_millicores)
    }

    /// Memory capacity.
    pub fn memory(&self) -> Bytes {
        Bytes(self.raw().memory_bytes)
    }

    /// The type of its GPUs as the cluster names it ("t4", "a100"); empty when unknown.
    pub fn gpu_type(&self) -> &'a str {
        &self.raw().gpu_type
    }

    /// Its labels, sorted by key.
    pub fn labels(&self) -> &'a [(String, String)] {
        &self.raw().labels
    }

    /// The value of its label `key`.
    pub fn label(&self, key: &str) -> Option<&'a str> {
        self.raw().labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The topology domains it lies in, coarsest first (empty when the host names none): two
    /// nodes share a domain at level i when these agree on levels 0 to i.
    pub fn domains(&self) -> &'a [String] {
        &self.raw().domains
    }

    /// Its room now, as the host counts it: CPU and memory not requested yet, and the
    /// pieces (pods) it takes still (`u32::MAX`: no limit).
    pub fn room(&self) -> Room {
        let n = self.id.0 as usize;
        let t = self.table;
        Room {
            cpu: Millicores(t.room_cpu.get(n).copied().unwrap_or(0)),
            memory: Bytes(t.room_memory.get(n).copied().unwrap_or(0)),
            pods: t.room_pods.get(n).copied().unwrap_or(0),
        }
    }

    /// Whether it carries every label of `selector`.
    pub fn selects(&self, selector: &[(String, String)]) -> bool {
        selector.iter().all(|(k, v)| self.label(k) == Some(v.as_str()))
    }

    /// Whether it can take work now: false while it is NotReady or cordoned (the host refuses
    /// to place, migrate or resize onto it; its jobs still run).
    pub fn takes_work(&self) -> bool {
        self.table.down.binary_search(&self.id.0).is_err()
    }

    /// Its GPUs, with their utilisation and memory over the last interval.
    pub fn gpus(&self) -> impl ExactSizeIterator<Item = Gpu> + 'a {
        let table = self.table;
        let first = table.first_gpu[self.id.0 as usize];
        self.raw().gpu_memory_bytes.iter().enumerate().map(move |(k, &total)| Gpu {
            utilisation_percent: table.utilisation[first + k],
            memory_used: Bytes(table.memory_used[first + k]),
            memory_total: Bytes(total),
        })
    }
}

/// One live job: its declaration, placement, limits, measured use and progress history.
#[derive(Clone, Copy)]
pub struct Job<'a> {
    entry: &'a JobEntry,
    table: &'a JobTable,
}

impl<'a> Job<'a> {
    /// Its handle.
    pub fn id(&self) -> JobId {
        JobId(self.entry.spec.handle)
    }

    /// Its name as declared.
    pub fn name(&self) -> &'a str {
        &self.entry.spec.name
    }

    /// The model or application it runs.
    pub fn model(&self) -> &'a str {
        &self.entry.spec.model
    }

    /// Training or inference.
    pub fn kind(&self) -> JobKind {
        self.entry.spec.kind
    }

    /// The metrics it reports; the first is the main one.
    pub fn metrics(&self) -> &'a [MetricSpec] {
        &self.entry.spec.metrics
    }

    /// The direction of the main metric (higher-is-better when none is declared).
    pub fn direction(&self) -> Direction {
        self.metrics().first().map_or(Direction::HigherIsBetter, |m| m.direction)
    }

    /// TRADL's two-tier targets, if declared.
    pub fn tiers(&self) -> Option<Tiers> {
        self.entry.spec.tiers
    }

    /// DQoES target: seconds per epoch (training) or milliseconds per request (inference).
    pub fn qoe_target(&self) -> Option<f64> {
        self.entry.spec.qoe_target
    }

    /// The epoch cap, if declared.
    pub fn max_epochs(&self) -> Option<u32> {
        self.entry.spec.max_epochs
    }

    /// The tenant it belongs to ("default" when it names none).
    pub fn tenant(&self) -> &'a str {
        &self.entry.spec.tenant
    }

    /// A label from the job's declaration.
    pub fn label(&self, key: &str) -> Option<&'a str> {
        self.entry.spec.labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The node it runs on.
    pub fn node(&self) -> NodeId {
        NodeId(self.entry.state.node)
    }

    /// Its CPU limit; none means unlimited.
    pub fn cpu_limit(&self) -> Option<Millicores> {
        self.entry.state.cpu_limit.map(Millicores)
    }

    /// Its memory limit; none means unlimited.
    pub fn memory_limit(&self) -> Option<Bytes> {
        self.entry.state.memory_limit.map(Bytes)
    }

    /// Mean CPU use over the last interval.
    pub fn cpu_use(&self) -> Millicores {
        Millicores(self.entry.state.cpu_used)
    }

    /// Memory use at the end of the last interval.
    pub fn memory_use(&self) -> Bytes {
        Bytes(self.entry.state.memory_used)
    }

    /// The GPUs it holds while it runs (none while queued).
    pub fn gpus(&self) -> &'a [GpuSlot] {
        if self.is_queued() {
            return &[];
        }
        let s = &self.entry.state;
        let first = s.gpu_first as usize;
        self.table.gpus.get(first..first + usize::from(s.gpu_count)).unwrap_or_default()
    }

    /// Its share of its GPUs in percent, if regulated.
    pub fn gpu_share(&self) -> Option<u8> {
        self.entry.state.gpu_share
    }

    /// The GPUs it asks for, in all.
    pub fn gpus_asked(&self) -> u32 {
        self.entry.spec.gpus
    }

    /// The GPU counts and batch sizes it can run at (a rigid job: its GPU count alone).
    pub fn scaling(&self) -> &'a Scaling {
        &self.entry.spec.scaling
    }

    /// Whether it may be resized to another GPU count.
    pub fn is_elastic(&self) -> bool {
        self.entry.spec.scaling.gpu_counts.len() > 1
    }

    /// Its global batch size in force (0: none the host knows; 0 while queued).
    pub fn batch_size(&self) -> u32 {
        if self.is_queued() { 0 } else { self.entry.state.batch_size }
    }

    /// What each of its pieces requests of its node: CPU and memory (zero when it declares
    /// none).
    pub fn requests(&self) -> (Millicores, Bytes) {
        let r = &self.entry.spec.requests;
        (Millicores(r.cpu_millicores), Bytes(r.memory_bytes))
    }

    /// Labels every node it uses must carry (empty: any node).
    pub fn node_selector(&self) -> &'a [(String, String)] {
        &self.entry.spec.node_selector
    }

    /// Into how many pieces it may be split across nodes (1: one node).
    pub fn replicas(&self) -> u32 {
        self.entry.spec.replicas.max(1)
    }

    /// Its replicas as declared, 0 included: the host's checks name the declared number.
    pub(crate) fn declared_replicas(&self) -> u32 {
        self.entry.spec.replicas
    }

    /// When it arrived.
    pub fn arrival(&self) -> Seconds {
        Seconds::from_millis(self.entry.spec.arrival_ms)
    }

    /// Whether it waits in the queue.
    pub fn is_queued(&self) -> bool {
        self.entry.queued.is_some()
    }

    /// Why it waits, while queued.
    pub fn wait_reason(&self) -> Option<WaitReason> {
        self.entry.queued.map(|q| q.reason)
    }

    /// How long it has waited at `now` since it arrived or was preempted; zero while it runs.
    pub fn wait(&self, now: Seconds) -> Seconds {
        self.entry.queued.map_or(Seconds(0.0), |q| Seconds((now.0 - Seconds::from_millis(q.since_ms).0).max(0.0)))
    }

    /// How long it has run, in all its runs.
    pub fn run_time(&self) -> Seconds {
        Seconds::from_millis(self.entry.queued.map_or(self.entry.state.run_ms, |q| q.run_ms))
    }

    /// Its attained service: GPU-seconds received, each GPU held counting (its run time when
    /// it holds none), as Tiresias ranks jobs.
    pub fn attained_service(&self) -> Seconds {
        Seconds::from_millis(self.entry.queued.map_or(self.entry.state.gpu_ms, |q| q.gpu_ms))
    }

    /// GPU use attributed to it over the last interval, in percent.
    pub fn gpu_use_percent(&self) -> f32 {
        self.entry.state.gpu_used
    }

    /// When this policy instance first saw it.
    pub fn first_seen(&self) -> Seconds {
        self.entry.first_seen
    }

    /// Its progress records, oldest first (at most [`HISTORY_LIMIT`]).
    pub fn history(&self) -> impl DoubleEndedIterator<Item = &'a ProgressRecord> + ExactSizeIterator + 'a {
        self.entry.history.iter()
    }

    /// The records that arrived on this tick.
    pub fn new_records(&self) -> impl DoubleEndedIterator<Item = &'a ProgressRecord> + 'a {
        self.entry.history.iter().skip(self.entry.history.len() - self.entry.fresh)
    }

    /// Its latest record.
    pub fn latest(&self) -> Option<&'a ProgressRecord> {
        self.entry.history.back()
    }

    /// Epochs completed, by its latest record (0 before the first).
    pub fn epoch(&self) -> u32 {
        self.latest().map_or(0, |r| r.epoch)
    }

    /// The main metric over time, normalised to (0, 1] for a lower-is-better metric (divided
    /// by the largest value seen so far) and as reported for a higher-is-better one.
    pub fn normalised(&self) -> impl Iterator<Item = (Seconds, f64)> + 'a {
        let mut norm = stats::Normaliser::new(self.direction());
        self.history().filter_map(move |r| norm.push(r.value()).map(|v| (r.time, v)))
    }

    /// Mean normalised main metric over `[from, to)`, if any record fell in it.
    pub fn window_mean(&self, from: Seconds, to: Seconds) -> Option<f64> {
        stats::window_mean(self.normalised(), from, to)
    }

    /// FlowCon's progress over the window of length `window` ending now:
    /// |E_i − E_{i−1}| / window, with E the windowed mean of the normalised metric.
    /// None until both windows hold a record.
    pub fn progress_rate(&self, now: Seconds, window: Seconds) -> Option<f64> {
        let current = self.window_mean(now - window, now)?;
        let previous = self.window_mean(now - window - window, now - window)?;
        Some(stats::growth_rate(previous, current, window))
    }

    /// FlowCon's growth efficiency, which TRADL shares: [`Self::progress_rate`] per **minute**,
    /// divided by the fraction of `node_cpu` the job used over the last interval. Zero until
    /// both windows hold a record, or while the job used about no CPU.
    pub fn growth_efficiency(&self, now: Seconds, window: Seconds, node_cpu: Millicores) -> f64 {
        let per_minute = |rate: f64| 60.0 * rate;
        self.progress_rate(now, window)
            .map_or(0.0, |p| stats::growth_efficiency(per_minute(p), self.cpu_use().fraction_of(node_cpu)))
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{Inspect, TestWorld, job};
    use crate::{Direction, Millicores, Runner, Seconds};

    fn world() -> TestWorld {
        let mut w = TestWorld::new();
        w.node("n0", Millicores(8000), crate::Bytes::gib(16));
        w
    }

    #[test]
    fn the_table_keeps_history_across_ticks_and_marks_new_records() {
        let mut w = world();
        let a = w.add_job(job("a", "deepspeech2").metric("wer", Direction::LowerIsBetter));
        let mut r = Runner::from_policy(Inspect);
        w.report(a, 1, &[40.0]);
        r.decide(w.snapshot()).unwrap();
        w.advance(Seconds(30.0));
        w.report(a, 2, &[20.0]);
        w.set_cpu_use(a, Millicores(1200));
        r.decide(w.snapshot()).unwrap();
        let view = r.view();
        let job = view.job(a).unwrap();
        assert_eq!(job.history().len(), 2);
        assert_eq!(job.new_records().map(|p| p.epoch).collect::<Vec<_>>(), [2]);
        assert_eq!(job.cpu_use(), Millicores(1200));
        assert_eq!(job.normalised().map(|(_, v)| v).collect::<Vec<_>>(), [1.0, 0.5]);
        assert_eq!(job.first_seen(), Seconds(0.0));
    }

    #[test]
    fn a_node_added_after_the_first_call_reaches_the_policy() {
        let mut w = world();
        let mut r = Runner::from_policy(Inspect);
        r.decide(w.snapshot()).unwrap();
        w.node("n1", Millicores(4000), crate::Bytes::gib(8));
        r.decide(w.snapshot()).unwrap();
        let names: Vec<&str> = r.view().nodes().map(|n| n.name()).collect();
        assert_eq!(names, ["n0", "n1"]);
    }

    #[test]
    fn removed_jobs_leave_and_late_jobs_join_in_handle_order() {
        let mut w = world();
        let a = w.add_job(job("a", "ncf"));
        let b = w.add_job(job("b", "ncf"));
        let mut r = Runner::from_policy(Inspect);
        r.decide(w.snapshot()).unwrap();
        w.remove_job(a);
        let c = w.add_job(job("c", "bert").inference());
        r.decide(w.snapshot()).unwrap();
        let ids: Vec<_> = r.view().jobs().map(|j| j.id()).collect();
        assert_eq!(ids, [b, c]);
    }

    #[test]
    fn progress_rate_compares_two_windows_of_the_normalised_metric() {
        let mut w = world();
        let a = w.add_job(job("a", "cifar10").metric("accuracy", Direction::HigherIsBetter));
        let mut r = Runner::from_policy(Inspect);
        for (epoch, acc) in [(1, 0.2), (2, 0.4), (3, 0.5), (4, 0.6)] {
            w.advance(Seconds(15.0));
            w.report(a, epoch, &[acc]);
        }
        r.decide(w.snapshot()).unwrap();
        let view = r.view();
        let job = view.job(a).unwrap();
        // Windows (0, 30] and (30, 60]: means 0.3 and 0.55 → 0.25 / 30 s.
        let rate = job.progress_rate(Seconds(60.0), Seconds(30.0)).unwrap();
        assert!((rate - 0.25 / 30.0).abs() < 1e-12, "{rate}");
        assert_eq!(job.progress_rate(Seconds(60.0), Seconds(60.0)), None);
    }

    #[test]
    fn ragged_columns_from_a_broken_host_are_refused_not_trusted() {
        let mut w = world();
        w.add_job(job("a", "ncf"));
        let mut r = Runner::from_policy(Inspect);
        let mut s = w.snapshot();
        s.jobs.cpu_used_millicores.clear();
        let err = r.decide(s).unwrap_err();
        assert!(matches!(err, crate::PolicyError::Failed(m) if m.contains("columns differ")));
    }

    #[test]
    fn nodes_are_kept_between_ticks_and_gpu_use_is_read_from_the_columns() {
        let mut w = TestWorld::new();
        w.node("cpu-only", Millicores(8000), crate::Bytes::gib(16));
        let g = w.node_with_gpus("gpu", Millicores(16000), crate::Bytes::gib(64), &[crate::Bytes::gib(32); 2]);
        let mut r = Runner::from_policy(Inspect);
        let first = w.snapshot();
        assert!(first.nodes.is_some());
        r.decide(first).unwrap();
        w.set_gpu_use(g, 1, 60.0, crate::Bytes::gib(3));
        let second = w.snapshot();
        assert!(second.nodes.is_none(), "unchanged nodes are not resent");
        r.decide(second).unwrap();
        let view = r.view();
        assert_eq!(view.nodes().len(), 2);
        let node = view.node(g).unwrap();
        assert_eq!((node.name(), node.cpu()), ("gpu", Millicores(16000)));
        let gpus: Vec<_> = node.gpus().collect();
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[1].utilisation_percent, 60.0);
        assert_eq!((gpus[1].memory_used, gpus[1].memory_total), (crate::Bytes::gib(3), crate::Bytes::gib(32)));
        assert_eq!(view.node(crate::NodeId(0)).unwrap().gpus().len(), 0);
        assert!(view.node(crate::NodeId(2)).is_none());

        let mut bad = w.snapshot();
        bad.gpus.memory_used_bytes.pop();
        let err = r.decide(bad).unwrap_err();
        assert!(matches!(err, crate::PolicyError::Failed(m) if m.contains("do not match the nodes' 2 GPUs")));
    }
}
