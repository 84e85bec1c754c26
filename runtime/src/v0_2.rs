//! Components built against contract 0.2.0, served unchanged: the one place their snapshots
//! and decisions are converted. A 0.2.0 policy sees everything but what 0.3.0 and 0.4.0 added: GPU types,
//! nodes that cannot take work (the host refuses its placements there), how a job may be
//! resized and its batch size; it cannot resize and gives no reason why a job waits.

wasmtime::component::bindgen!({
    path: "../wit/0.2.0",
    world: "policy-plugin",
    additional_derives: [PartialEq],
});

pub(crate) use self::wasmsched::policy::types as old;

use wasmsched_core::bindings::wit;

/// The 0.2.0 snapshot for the current snapshot `s`: the same deltas, less the new fields.
pub(crate) fn snapshot(s: &wit::Snapshot) -> old::Snapshot {
    old::Snapshot {
        time_ms: s.time_ms,
        interval_ms: s.interval_ms,
        resync: s.resync,
        nodes: s.nodes.as_ref().map(|nodes| nodes.iter().map(older_node).collect()),
        gpus: gpu_states(&s.gpus),
        added: s.added.iter().map(older_job_spec).collect(),
        removed: super::older::numbers(&s.removed),
        jobs: job_states(&s.jobs),
        queue: queue_states(&s.queue),
        progress: progress_records(&s.progress),
    }
}

super::older::older_contract!(old, arrival_ms, gpus, replicas);
super::older::older_columns!(old);

/// A 0.2.0 decision in current terms: the same actions, no reasons why jobs wait.
pub(crate) fn decision(d: old::Decision) -> wit::Decision {
    super::older::older_decision!(
        old,
        d,
        old::ActionKind::Place(p) => wit::ActionKind::Place(wit::Placement {
            nodes: p.nodes.into_iter().map(|n| wit::NodePlacement::new(n.node, n.gpus)).collect(),
            share: p.share,
        }),
        old::ActionKind::Preempt => wit::ActionKind::Preempt,
    )
}

/// What a 0.2.0 policy said it does, in current terms.
pub(crate) fn abilities(a: old::Abilities) -> wit::Abilities {
    wit::Abilities { places: a.places }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_core::world::{Cursor, NodeId, sample};

    #[test]
    fn the_same_deltas_cross_less_the_new_fields_and_a_decision_comes_back_whole() {
        let mut t = sample::gpu_cluster(2, 4, 2, 1);
        t.set_node_down(NodeId(1), true);
        let mut cursor = Cursor::fresh();
        let new = t.snapshot_for(&mut cursor);
        let old = snapshot(&new);
        assert_eq!(old.jobs.handle, new.jobs.handle);
        assert_eq!(old.jobs.gpu_index, new.jobs.gpu_index);
        assert_eq!(old.queue.handle, new.queue.handle);
        assert_eq!(old.added.len(), new.added.len());
        assert_eq!(old.nodes.as_ref().map(Vec::len), new.nodes.as_ref().map(Vec::len));
        let d = decision(old::Decision {
            actions: vec![old::Action {
                job: new.queue.handle[0].0,
                kind: old::ActionKind::Place(old::Placement {
                    nodes: vec![old::NodePlacement { node: 0, gpus: vec![3] }],
                    share: false,
                }),
                reason: "first fit".into(),
            }],
            next_call_ms: Some(5),
        });
        assert!(d.pending.is_empty());
        assert!(matches!(&d.actions[0].kind, wit::ActionKind::Place(p) if p.nodes[0].gpus == [3]));
    }
}
