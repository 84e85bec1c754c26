//! A pod the host starts to manage: what it declares becomes a job, running on its node or
//! queued; a copy the host made carries its job's arrival, wait reason and attained service
//! in its annotations, so the job is the same job after a preemption, a migration or a restart
//! of the host.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use wasmsched_core::bindings::wit;
use wasmsched_core::declare::Declared;
use wasmsched_core::live::carried::{arrived_unix_ms, attained, unix_ms_of, wait_reason};
use wasmsched_core::live::{self, unix_ms};
use wasmsched_core::world::{GpuSlot, JobId, NodeId, World};
use wasmsched_rules::GpuBook;

use super::follow::Streams;
use super::{Kubernetes, Managed, dra, pod};

/// What a pod brings when the host starts to manage it, on the backend's clock from `origin`
/// (Unix ms).
#[derive(Debug)]
struct Adoption {
    /// Its job's declaration, its arrival on the backend's clock.
    declared: Declared,
    /// When its job arrived, Unix ms (a copy keeps its original's).
    arrived_unix_ms: u64,
    /// While it waits: why, and since when on the backend's clock.
    queued: (wit::WaitReason, u64),
    /// When its containers started, Unix ms, if they have.
    started_unix_ms: Option<u64>,
}

impl Adoption {
    fn of(p: &Pod, origin: u64, now: u64) -> Adoption {
        let mut declared = pod::declared(p);
        let keys = pod::keys(p);
        let created = p.metadata.creation_timestamp.as_ref().and_then(|t| unix_ms_of(&t.0.to_string())).unwrap_or(now);
        let arrived_unix_ms = arrived_unix_ms(&keys, created);
        declared.spec.arrival_ms = arrived_unix_ms.saturating_sub(origin);
        let reason = wait_reason(&keys);
        let started_unix_ms =
            p.status.as_ref().and_then(|s| s.start_time.as_ref()).and_then(|t| unix_ms_of(&t.0.to_string()));
        Adoption { declared, arrived_unix_ms, queued: (reason, created.saturating_sub(origin)), started_unix_ms }
    }
}

impl Kubernetes {
    /// Start managing pod `uid`: a running job on node `node`, or a queued one.
    pub(super) fn adopt(
        &mut self,
        uid: &str,
        p: &Pod,
        node: Option<usize>,
        world: &mut World,
        book: &mut GpuBook,
        streams: &mut Streams,
    ) {
        if let Some(why) = self.dra.unread(p) {
            // Its GPUs are its claims': not a job until they are known.
            let name = p.metadata.name.clone().unwrap_or_default();
            self.logged.once(format!("claims-unread:{uid}"), || format!("pod {name} waits to be managed: {why}"));
            return;
        }
        let now = unix_ms();
        let Adoption { mut declared, arrived_unix_ms, queued, started_unix_ms } =
            Adoption::of(p, self.clock.origin_unix_ms(), now);
        if dra::Dra::uses_claims(p) {
            declared.spec.gpus = self.gpus_asked(p);
        }
        let pod_name = p.metadata.name.clone().unwrap_or_default();
        for (key, why) in &declared.problems {
            let job = declared.spec.name.clone();
            self.logged.once(format!("key:{uid}:{key}"), || format!("pod {job}: ignoring {key}: {why}"));
        }
        let spec = declared.spec.clone();
        let handle = match node {
            Some(i) => world.add_job(spec, NodeId(i as u32)),
            None => world.enqueue_job(spec),
        };
        let gpus = node.map_or_else(Vec::new, |i| free_slots(book, NodeId(i as u32), declared.spec.gpus, handle));
        let (run_ms, gpu_ms) = attained(&pod::keys(p), started_unix_ms.filter(|_| node.is_some()), now, gpus.len());
        if let Some(state) = world.state_mut(handle) {
            if node.is_none() {
                (state.queued, state.since_ms) = (Some(queued.0), queued.1);
            }
            state.gpus = gpus;
            (state.run_ms, state.gpu_ms) = (run_ms, gpu_ms);
        }
        self.read_limits(handle, p, node, world);
        let m = Managed {
            version: p.metadata.resource_version.clone(),
            ..Managed::new(
                live::Job::new(handle, &declared, arrived_unix_ms),
                pod_name.clone(),
                pod::requests(p),
                Arc::new(pod::node_selector(p)),
            )
        };
        let uid: Arc<str> = Arc::from(uid);
        tracing::debug!(job = %handle, pod = %pod_name, queued = node.is_none(), "managing a new pod");
        self.manage(uid.clone(), m);
        self.read_progress(&uid, p, streams);
    }
}

/// The first `count` free GPUs of node `node` in `book`, as world slots, taken there for job
/// `handle` (the host's bookkeeping: the device plugin chooses the devices).
pub(super) fn free_slots(book: &mut GpuBook, node: NodeId, count: u32, handle: JobId) -> Vec<GpuSlot> {
    let free: Vec<u32> = book.free_on(node).take(count as usize).collect();
    for &index in &free {
        book.hold(node, index, handle);
    }
    free.into_iter().map(|index| GpuSlot { node, index }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(annotations: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "resnet-1",
                "uid": "u1",
                "creationTimestamp": "2026-11-28T10:00:10Z",
                "labels": {"wasmsched.managed": "true"},
                "annotations": annotations,
            },
            "spec": {"containers": [{"name": "train", "image": "trainer:1"}]},
            "status": {"startTime": "2026-11-28T10:00:20Z"},
        }))
        .unwrap()
    }

    const CREATED: u64 = 1_795_860_010_000;

    #[test]
    fn a_new_pod_arrives_when_it_was_created_and_waits_as_never_started() {
        let a = Adoption::of(&pod(serde_json::json!({})), CREATED - 4_000, CREATED + 60_000);
        assert_eq!(a.arrived_unix_ms, CREATED);
        assert_eq!(a.declared.spec.arrival_ms, 4_000, "on the backend's clock");
        assert_eq!(a.queued, (wit::WaitReason::NeverStarted, 4_000));
        assert_eq!(a.started_unix_ms, Some(CREATED + 10_000));
        assert_eq!(a.declared.spec.name, "resnet-1");
    }

    #[test]
    fn a_copy_keeps_its_originals_arrival_and_waits_as_preempted() {
        use wasmsched_core::live::carried::{ARRIVED, WAIT};
        let mut carried = serde_json::Map::new();
        carried.insert(ARRIVED.into(), (CREATED - 50_000).to_string().into());
        carried.insert(WAIT.into(), "preempted".into());
        let carried = serde_json::Value::Object(carried);
        let a = Adoption::of(&pod(carried), CREATED - 100_000, CREATED);
        assert_eq!((a.arrived_unix_ms, a.declared.spec.arrival_ms), (CREATED - 50_000, 50_000));
        assert_eq!(a.queued, (wit::WaitReason::Preempted, 100_000), "it waits since its copy was made");
    }

    #[test]
    fn free_slots_takes_the_lowest_free_gpus_for_the_job() {
        let mut book = GpuBook::new([4]);
        book.hold(NodeId(0), 0, JobId(9));
        let slots = free_slots(&mut book, NodeId(0), 2, JobId(7));
        assert_eq!(slots, [GpuSlot { node: NodeId(0), index: 1 }, GpuSlot { node: NodeId(0), index: 2 }]);
        assert_eq!(book.holders(NodeId(0), 1), [7]);
        assert_eq!(book.free_count(NodeId(0)), 1);
    }
}
