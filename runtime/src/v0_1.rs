//! Components built against contract 0.1.0, served unchanged: the one place their snapshots
//! and decisions are converted. A 0.1.0 policy never sees the queue: a job appears to it
//! when it starts running and leaves when it ends (or is preempted by someone else); the
//! host's default placement starts queued jobs for it (it declares no ability to place).

wasmtime::component::bindgen!({
    path: "../wit/0.1.0",
    world: "policy-plugin",
    additional_derives: [PartialEq],
});

pub(crate) use self::wasmsched::policy::types as old;

use std::collections::BTreeMap;

use wasmsched_core::bindings::wit;

/// What a 0.1.0 instance has been told, beside the cursor that feeds it.
#[derive(Debug, Default)]
pub(crate) struct Adapter {
    /// Every live job's declaration, as the deltas announced it.
    specs: BTreeMap<wit::JobHandle, wit::JobSpec>,
    /// The running jobs the instance knows, in handle order.
    known: Vec<wit::JobHandle>,
}

impl Adapter {
    /// The 0.1.0 snapshot for the current delta `s`: only running jobs, added when they start.
    pub(crate) fn snapshot(&mut self, s: &wit::Snapshot) -> old::Snapshot {
        if s.resync {
            self.specs.clear();
            self.known.clear();
        }
        for h in &s.removed {
            self.specs.remove(h);
        }
        for spec in &s.added {
            self.specs.insert(spec.handle, spec.clone());
        }
        let running = &s.jobs.handle;
        let removed: Vec<_> = self.known.iter().copied().filter(|h| running.binary_search(h).is_err()).collect();
        let added = running
            .iter()
            .filter(|h| self.known.binary_search(h).is_err())
            .filter_map(|h| self.specs.get(h).map(older_job_spec))
            .collect();
        self.known.clone_from(running);
        old::Snapshot {
            time_ms: s.time_ms,
            interval_ms: s.interval_ms,
            resync: s.resync,
            nodes: s.nodes.as_ref().map(|nodes| nodes.iter().map(older_node).collect()),
            gpus: gpu_states(&s.gpus),
            added,
            removed: super::older::numbers(&removed),
            jobs: job_states(&s.jobs),
            progress: progress(&s.progress, running),
        }
    }
}

super::older::older_contract!(old);

/// A 0.1.0 decision in current terms: the same actions (0.1.0 has no place, preempt or resize).
pub(crate) fn decision(d: old::Decision) -> wit::Decision {
    super::older::older_decision!(old, d)
}

/// 0.1.0 knew one GPU per job on its node: the first the job holds there.
fn job_states(c: &wit::JobStates) -> old::JobStates {
    let mut gpu = Vec::with_capacity(c.handle.len());
    let mut first = 0usize;
    for (i, &node) in c.node.iter().enumerate() {
        let count = usize::from(c.gpu_count.get(i).copied().unwrap_or(0));
        let held = first..(first + count).min(c.gpu_index.len());
        let on_node = held.clone().find(|&k| c.gpu_node.get(k) == Some(&node));
        gpu.push(on_node.map_or(-1, |k| i32::try_from(c.gpu_index[k]).unwrap_or(-1)));
        first = held.end;
    }
    old::JobStates {
        handle: super::older::numbers(&c.handle),
        node: super::older::numbers(&c.node),
        cpu_limit_millicores: c.cpu_limit_millicores.clone(),
        memory_limit_bytes: c.memory_limit_bytes.clone(),
        cpu_used_millicores: c.cpu_used_millicores.clone(),
        memory_used_bytes: c.memory_used_bytes.clone(),
        gpu,
        gpu_share_percent: c.gpu_share_percent.clone(),
        gpu_used_percent: c.gpu_used_percent.clone(),
    }
}

/// The records of running jobs only (a job preempted this tick may have reported).
fn progress(p: &wit::ProgressRecords, running: &[wit::JobHandle]) -> old::ProgressRecords {
    let mut out = old::ProgressRecords {
        job: Vec::new(),
        time_ms: Vec::new(),
        epoch: Vec::new(),
        value_count: Vec::new(),
        values: Vec::new(),
    };
    let mut offset = 0usize;
    for i in 0..p.job.len() {
        let count = usize::from(p.value_count[i]);
        let values = p.values.get(offset..offset + count).unwrap_or_default();
        offset += count;
        if running.binary_search(&p.job[i]).is_ok() {
            out.job.push(p.job[i].0);
            out.time_ms.push(p.time_ms[i]);
            out.epoch.push(p.epoch[i]);
            out.value_count.push(p.value_count[i]);
            out.values.extend_from_slice(values);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_core::world::{Cursor, GpuSlot, NodeId, sample};

    #[test]
    fn a_queued_job_is_hidden_until_it_runs_and_then_added_once() {
        let mut t = sample::world(1, 1, 0);
        let mut spec = sample::job_spec(1);
        spec.gpus = 1;
        let q = t.enqueue_job(spec);
        let (mut cursor, mut adapter) = (Cursor::fresh(), Adapter::default());
        let first = adapter.snapshot(&t.snapshot_for(&mut cursor));
        assert_eq!(first.added.iter().map(|s| s.handle).collect::<Vec<_>>(), [0], "the queued job is not shown");
        assert_eq!(first.jobs.handle, [0]);
        assert!(t.start_job(q, NodeId(0), vec![GpuSlot { node: NodeId(0), index: 0 }]));
        let second = adapter.snapshot(&t.snapshot_for(&mut cursor));
        assert_eq!(second.added.iter().map(|s| s.handle).collect::<Vec<_>>(), [q]);
        assert_eq!(second.jobs.gpu, [-1, 0]);
        let third = adapter.snapshot(&t.snapshot_for(&mut cursor));
        assert!(third.added.is_empty() && third.removed.is_empty());
        assert!(t.requeue_job(q, wit::WaitReason::Preempted));
        assert_eq!(adapter.snapshot(&t.snapshot_for(&mut cursor)).removed, [q], "preempted: gone from its view");
    }
}
