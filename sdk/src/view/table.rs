//! The job and node tables the SDK keeps inside the guest: each tick's delta (added and
//! removed jobs, numbers in columns, new progress records, nodes when they change) folded into
//! complete tables, so only what changed has to cross. [`super::Snapshot`] reads them.

use std::collections::VecDeque;

use super::{GpuSlot, HISTORY_LIMIT, ProgressRecord, Values, WaitReason};
use crate::bindings::wasmsched::policy::types as wit;
use crate::units::{NodeId, Seconds};

/// One job's numbers, as the last tick's columns gave them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct JobNumbers {
    pub(crate) node: u32,
    /// Its GPUs are `gpu_count` slots of the table's GPU list from `gpu_first`.
    pub(crate) gpu_first: u32,
    pub(crate) gpu_count: u16,
    pub(crate) run_ms: u64,
    pub(crate) gpu_ms: u64,
    pub(crate) cpu_limit: Option<u64>,
    pub(crate) memory_limit: Option<u64>,
    pub(crate) cpu_used: u64,
    pub(crate) memory_used: u64,
    pub(crate) gpu_share: Option<u8>,
    pub(crate) gpu_used: f32,
    pub(crate) batch_size: u32,
}

impl JobNumbers {
    /// Whether every column has as many rows as `handle`.
    fn columns_agree(c: &wit::JobStates) -> bool {
        let rows = c.handle.len();
        [
            c.node.len(),
            c.cpu_limit_millicores.len(),
            c.memory_limit_bytes.len(),
            c.cpu_used_millicores.len(),
            c.memory_used_bytes.len(),
            c.gpu_count.len(),
            c.gpu_share_percent.len(),
            c.gpu_used_percent.len(),
            c.run_ms.len(),
            c.gpu_ms.len(),
            c.batch_size.len(),
        ]
        .iter()
        .all(|&n| n == rows)
            && c.gpu_node.len() == c.gpu_index.len()
            && c.gpu_count.iter().map(|&n| usize::from(n)).sum::<usize>() == c.gpu_node.len()
    }

    /// Row `i` of the columns, which [`Self::columns_agree`] checked; its GPUs start at
    /// `gpu_first` of the GPU columns.
    fn from_columns(c: &wit::JobStates, i: usize, gpu_first: usize) -> Self {
        let nonzero = |v: u64| (v != 0).then_some(v);
        JobNumbers {
            node: c.node[i],
            gpu_first: gpu_first as u32,
            gpu_count: c.gpu_count[i],
            run_ms: c.run_ms[i],
            gpu_ms: c.gpu_ms[i],
            cpu_limit: nonzero(c.cpu_limit_millicores[i]),
            memory_limit: nonzero(c.memory_limit_bytes[i]),
            cpu_used: c.cpu_used_millicores[i],
            memory_used: c.memory_used_bytes[i],
            gpu_share: Some(c.gpu_share_percent[i]).filter(|p| *p != 0),
            gpu_used: c.gpu_used_percent[i],
            batch_size: c.batch_size[i],
        }
    }

    /// Append this row, holding `gpus`, to the columns, as the host sends them.
    pub(crate) fn push_to(&self, handle: u32, gpus: &[GpuSlot], c: &mut wit::JobStates) {
        c.handle.push(handle);
        c.node.push(self.node);
        c.gpu_count.push(gpus.len() as u16);
        c.gpu_node.extend(gpus.iter().map(|g| g.node.0));
        c.gpu_index.extend(gpus.iter().map(|g| g.index));
        c.run_ms.push(self.run_ms);
        c.gpu_ms.push(self.gpu_ms);
        c.cpu_limit_millicores.push(self.cpu_limit.unwrap_or(0));
        c.memory_limit_bytes.push(self.memory_limit.unwrap_or(0));
        c.cpu_used_millicores.push(self.cpu_used);
        c.memory_used_bytes.push(self.memory_used);
        c.gpu_share_percent.push(self.gpu_share.unwrap_or(0));
        c.gpu_used_percent.push(self.gpu_used);
        c.batch_size.push(self.batch_size);
    }
}

/// Columns with no rows.
pub(crate) fn no_states() -> wit::JobStates {
    wit::JobStates {
        handle: Vec::new(),
        node: Vec::new(),
        cpu_limit_millicores: Vec::new(),
        memory_limit_bytes: Vec::new(),
        cpu_used_millicores: Vec::new(),
        memory_used_bytes: Vec::new(),
        gpu_count: Vec::new(),
        gpu_node: Vec::new(),
        gpu_index: Vec::new(),
        gpu_share_percent: Vec::new(),
        gpu_used_percent: Vec::new(),
        run_ms: Vec::new(),
        gpu_ms: Vec::new(),
        batch_size: Vec::new(),
    }
}

/// Queue columns with no rows.
pub(crate) fn no_queue() -> wit::QueueStates {
    wit::QueueStates {
        handle: Vec::new(),
        reason: Vec::new(),
        since_ms: Vec::new(),
        run_ms: Vec::new(),
        gpu_ms: Vec::new(),
    }
}

/// A queued job's numbers, as the last tick's queue columns gave them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct QueueNumbers {
    pub(crate) reason: WaitReason,
    pub(crate) since_ms: u64,
    pub(crate) run_ms: u64,
    pub(crate) gpu_ms: u64,
}

/// Progress columns with no records.
pub(crate) fn no_progress() -> wit::ProgressRecords {
    wit::ProgressRecords {
        job: Vec::new(),
        time_ms: Vec::new(),
        epoch: Vec::new(),
        value_count: Vec::new(),
        values: Vec::new(),
    }
}

#[derive(Debug)]
pub(crate) struct JobEntry {
    pub(super) spec: wit::JobSpec,
    pub(super) state: JobNumbers,
    /// Why and since when it waits, while it is queued.
    pub(super) queued: Option<QueueNumbers>,
    pub(super) history: VecDeque<ProgressRecord>,
    pub(super) fresh: usize,
    pub(super) first_seen: Seconds,
}

/// Every live job, in handle order, with its history: the guest-side half of the cost rule.
#[derive(Debug, Default)]
pub(crate) struct JobTable {
    pub(super) entries: Vec<JobEntry>,
    /// The GPUs running jobs hold, each job's in a run (`JobNumbers::gpu_first`).
    pub(crate) gpus: Vec<GpuSlot>,
    pub(super) running: usize,
}

impl JobTable {
    /// Folds one tick's delta into the table and returns the rest of the snapshot. Refuses
    /// columns of unequal length and a handle no host gives (host bugs) without touching the
    /// table's numbers.
    pub(crate) fn apply(&mut self, raw: wit::Snapshot) -> Result<(Seconds, Seconds), String> {
        let now = Seconds::from_millis(raw.time_ms);
        check_columns(&raw)?;
        if raw.resync {
            self.entries.clear();
        }
        self.remove(raw.removed);
        self.add(raw.added, now);
        for entry in &mut self.entries {
            entry.fresh = 0;
        }
        self.fold_states(&raw.jobs);
        self.fold_queue(&raw.queue);
        self.fold_progress(&raw.progress);
        Ok((now, Seconds::from_millis(raw.interval_ms)))
    }

    /// Drops the jobs that ended.
    fn remove(&mut self, mut removed: Vec<u32>) {
        if !removed.is_empty() {
            removed.sort_unstable();
            self.entries.retain(|e| removed.binary_search(&e.spec.handle).is_err());
        }
    }

    /// Takes in the jobs that arrived, seen first at `now`, keeping handle order.
    fn add(&mut self, added: Vec<wit::JobSpec>, now: Seconds) {
        if added.is_empty() {
            return;
        }
        let mut last = self.entries.last().map(|e| e.spec.handle);
        let mut in_order = true;
        for spec in added {
            in_order &= last.is_none_or(|h| spec.handle > h);
            last = Some(spec.handle);
            let entry = JobEntry {
                spec,
                state: JobNumbers::default(),
                queued: None,
                history: VecDeque::new(),
                fresh: 0,
                first_seen: now,
            };
            self.entries.push(entry);
        }
        if !in_order {
            self.entries.sort_by_key(|e| e.spec.handle);
            self.entries.dedup_by_key(|e| e.spec.handle);
        }
    }

    /// The running jobs' numbers and the GPUs they hold.
    fn fold_states(&mut self, jobs: &wit::JobStates) {
        // The host sends rows in handle order, so the common case is a straight zip.
        let mut gpu_first = 0;
        self.running = jobs.handle.len();
        for (i, &handle) in jobs.handle.iter().enumerate() {
            let idx = match self.entries.get(i) {
                Some(e) if e.spec.handle == handle => Some(i),
                _ => self.index(handle),
            };
            if let Some(idx) = idx {
                self.entries[idx].state = JobNumbers::from_columns(jobs, i, gpu_first);
                self.entries[idx].queued = None;
            }
            gpu_first += usize::from(jobs.gpu_count[i]);
        }
        self.gpus.clear();
        self.gpus.extend(
            jobs.gpu_node.iter().zip(&jobs.gpu_index).map(|(&node, &index)| GpuSlot { node: NodeId(node), index }),
        );
    }

    /// The queued jobs' reasons and waits.
    fn fold_queue(&mut self, q: &wit::QueueStates) {
        for i in 0..q.handle.len() {
            if let Some(idx) = self.index(q.handle[i]) {
                self.entries[idx].queued = Some(QueueNumbers {
                    reason: q.reason[i],
                    since_ms: q.since_ms[i],
                    run_ms: q.run_ms[i],
                    gpu_ms: q.gpu_ms[i],
                });
            }
        }
    }

    /// The tick's progress records, appended to each job's history (the oldest dropped past
    /// [`HISTORY_LIMIT`]).
    fn fold_progress(&mut self, p: &wit::ProgressRecords) {
        let mut offset = 0;
        for i in 0..p.job.len() {
            let count = usize::from(p.value_count[i]);
            let values = Values::from_slice(&p.values[offset..offset + count]);
            offset += count;
            if let Some(idx) = self.index(p.job[i]) {
                let entry = &mut self.entries[idx];
                if entry.history.len() == HISTORY_LIMIT {
                    entry.history.pop_front();
                }
                entry.history.push_back(ProgressRecord {
                    time: Seconds::from_millis(p.time_ms[i]),
                    epoch: p.epoch[i],
                    values,
                });
                entry.fresh = (entry.fresh + 1).min(HISTORY_LIMIT);
            }
        }
    }

    pub(super) fn index(&self, handle: u32) -> Option<usize> {
        self.entries.binary_search_by_key(&handle, |e| e.spec.handle).ok()
    }
}

/// Refuses a snapshot whose columns differ in length or whose handles no host gives, before
/// anything of it is folded in.
fn check_columns(raw: &wit::Snapshot) -> Result<(), String> {
    if !JobNumbers::columns_agree(&raw.jobs) {
        return Err("job-state columns differ in length".into());
    }
    let p = &raw.progress;
    let records = p.job.len();
    if p.time_ms.len() != records || p.epoch.len() != records || p.value_count.len() != records {
        return Err("progress columns differ in length".into());
    }
    if p.value_count.iter().map(|&n| usize::from(n)).sum::<usize>() != p.values.len() {
        return Err("progress values do not add up to the value counts".into());
    }
    let q = &raw.queue;
    let queued = q.handle.len();
    if q.reason.len() != queued || q.since_ms.len() != queued || q.run_ms.len() != queued || q.gpu_ms.len() != queued {
        return Err("queue columns differ in length".into());
    }
    if raw.added.iter().any(|spec| spec.handle == u32::MAX) {
        return Err(format!("a job handle is {}, past the last one a host gives", u32::MAX));
    }
    Ok(())
}

/// The nodes as last sent (they cross only when they change) and every GPU's use this tick.
#[derive(Debug, Default)]
pub(crate) struct NodeTable {
    pub(super) nodes: Vec<wit::Node>,
    /// Node i's GPUs are `first_gpu[i]..first_gpu[i + 1]` of the GPU columns (one entry more
    /// than there are nodes).
    pub(super) first_gpu: Vec<usize>,
    pub(super) utilisation: Vec<f32>,
    pub(super) memory_used: Vec<u64>,
    /// Per GPU, in the columns' order, how many running jobs hold it.
    pub(super) holders: Vec<u32>,
    /// The nodes that cannot take work now, ascending.
    pub(super) down: Vec<u32>,
    /// The tenants, as last sent.
    pub(super) tenants: Vec<wit::Tenant>,
    /// Every node's room this tick: CPU and memory not requested yet, pieces it takes still.
    pub(crate) room_cpu: Vec<u64>,
    pub(crate) room_memory: Vec<u64>,
    pub(crate) room_pods: Vec<u32>,
}

impl NodeTable {
    /// Takes the tick's nodes (when they changed) and GPU columns. Refuses GPU columns that do
    /// not match the nodes' GPU counts (a host bug) without touching the table.
    pub(crate) fn apply(&mut self, raw: &mut wit::Snapshot) -> Result<(), String> {
        let nodes = raw.nodes.take();
        let first_gpu = nodes.as_ref().map(|list| {
            let mut starts = vec![0];
            starts.extend(list.iter().scan(0, |next, n| {
                *next += n.gpu_memory_bytes.len();
                Some(*next)
            }));
            starts
        });
        let total = *first_gpu.as_ref().unwrap_or(&self.first_gpu).last().unwrap_or(&0);
        let gpus = &mut raw.gpus;
        if gpus.utilisation_percent.len() != total || gpus.memory_used_bytes.len() != total {
            return Err(format!(
                "GPU columns ({} and {} entries) do not match the nodes' {total} GPUs",
                gpus.utilisation_percent.len(),
                gpus.memory_used_bytes.len()
            ));
        }
        let count = nodes.as_ref().map_or(self.nodes.len(), Vec::len);
        let room = &mut raw.room;
        if [room.cpu_millicores.len(), room.memory_bytes.len(), room.pods.len()] != [count; 3] {
            return Err(format!("room columns do not match the {count} nodes"));
        }
        if let (Some(nodes), Some(first_gpu)) = (nodes, first_gpu) {
            self.nodes = nodes;
            self.first_gpu = first_gpu;
        }
        self.room_cpu = std::mem::take(&mut room.cpu_millicores);
        self.room_memory = std::mem::take(&mut room.memory_bytes);
        self.room_pods = std::mem::take(&mut room.pods);
        self.down = std::mem::take(&mut raw.nodes_down);
        if let Some(tenants) = raw.tenants.take() {
            self.tenants = tenants;
        }
        self.utilisation = std::mem::take(&mut gpus.utilisation_percent);
        self.memory_used = std::mem::take(&mut gpus.memory_used_bytes);
        Ok(())
    }

    /// Count who holds each GPU, from the GPUs the running jobs hold (slots that name no GPU
    /// are not counted): once a tick, so that a question about one node costs its GPUs only.
    pub(crate) fn count_holders(&mut self, held: &[GpuSlot]) {
        self.holders.clear();
        self.holders.resize(self.first_gpu.last().copied().unwrap_or(0), 0);
        for g in held {
            let node = g.node.0 as usize;
            if let (Some(&first), Some(&end)) = (self.first_gpu.get(node), self.first_gpu.get(node + 1))
                && first + (g.index as usize) < end
            {
                self.holders[first + g.index as usize] += 1;
            }
        }
    }

    /// How many running jobs hold each GPU of `node`, in GPU order (none for a node that does
    /// not exist).
    pub(super) fn holders_on(&self, node: NodeId) -> &[u32] {
        let n = node.0 as usize;
        match (self.first_gpu.get(n), self.first_gpu.get(n + 1)) {
            (Some(&first), Some(&end)) if n < self.nodes.len() => self.holders.get(first..end).unwrap_or_default(),
            _ => &[],
        }
    }
}
