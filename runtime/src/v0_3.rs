//! Components built against contract 0.3.0, served unchanged: the one place their snapshots
//! and decisions are converted. A 0.3.0 policy sees everything but what 0.4.0 added: what a
//! job's pieces request and the labels they need, nodes' labels, topology domains and room.
//! Its decisions have the same shape as 0.4.0's; the host still holds its placements to the
//! room it cannot see.

wasmtime::component::bindgen!({
    path: "../wit/0.3.0",
    world: "policy-plugin",
    additional_derives: [PartialEq],
});

pub(crate) use self::wasmsched::policy::types as old;

use wasmsched_core::bindings::wit;

/// The 0.3.0 snapshot for the 0.4.0 snapshot `s`: the same deltas, less the new fields.
pub(crate) fn snapshot(s: &wit::Snapshot) -> old::Snapshot {
    old::Snapshot {
        time_ms: s.time_ms,
        interval_ms: s.interval_ms,
        resync: s.resync,
        nodes: s.nodes.as_ref().map(|nodes| nodes.iter().map(node).collect()),
        nodes_down: super::older::numbers(&s.nodes_down),
        tenants: s.tenants.as_ref().map(|tenants| {
            tenants
                .iter()
                .map(|t| old::Tenant {
                    name: t.name.clone(),
                    weight: t.weight,
                    quota_gpus: t.quota_gpus,
                    borrowing_limit_gpus: t.borrowing_limit_gpus,
                    cohort: t.cohort.clone(),
                })
                .collect()
        }),
        gpus: gpu_states(&s.gpus),
        added: s.added.iter().map(job_spec).collect(),
        removed: super::older::numbers(&s.removed),
        jobs: job_states(&s.jobs),
        queue: queue_states(&s.queue),
        progress: progress_records(&s.progress),
    }
}

super::older::older_common!(old);
super::older::older_columns!(old, batch_size);

/// A job's declaration in 0.3.0 terms: all but what its pieces request and where they may go.
fn job_spec(s: &wit::JobSpec) -> old::JobSpec {
    old::JobSpec {
        handle: s.handle.0,
        name: s.name.clone(),
        model: s.model.clone(),
        kind: match s.kind {
            wit::JobKind::Training => old::JobKind::Training,
            wit::JobKind::Inference => old::JobKind::Inference,
        },
        metrics: s
            .metrics
            .iter()
            .map(|m| old::MetricSpec {
                name: m.name.clone(),
                direction: match m.direction {
                    wit::Direction::HigherIsBetter => old::Direction::HigherIsBetter,
                    wit::Direction::LowerIsBetter => old::Direction::LowerIsBetter,
                },
            })
            .collect(),
        tiers: s.tiers.map(|t| old::Tiers { deliverable: t.deliverable, final_: t.final_ }),
        qoe_target: s.qoe_target,
        max_epochs: s.max_epochs,
        labels: s.labels.clone(),
        arrival_ms: s.arrival_ms,
        gpus: s.gpus,
        replicas: s.replicas,
        scaling: old::Scaling {
            gpu_counts: s.scaling.gpu_counts.clone(),
            batch_size_min: s.scaling.batch_size_min,
            batch_size_max: s.scaling.batch_size_max,
        },
        tenant: s.tenant.clone(),
    }
}

/// A node in 0.3.0 terms: its capacity and GPU type.
fn node(n: &wit::Node) -> old::Node {
    old::Node {
        name: n.name.clone(),
        cpu_millicores: n.cpu_millicores,
        memory_bytes: n.memory_bytes,
        gpu_memory_bytes: n.gpu_memory_bytes.clone(),
        gpu_type: n.gpu_type.clone(),
    }
}

/// Where a job starts or runs next, in 0.4.0 terms (the same shape).
fn placement(p: old::Placement) -> wit::Placement {
    wit::Placement {
        nodes: p.nodes.into_iter().map(|n| wit::NodePlacement::new(n.node, n.gpus)).collect(),
        share: p.share,
    }
}

/// A 0.3.0 decision in 0.4.0 terms: the same actions and reasons why jobs wait.
pub(crate) fn decision(d: old::Decision) -> wit::Decision {
    let pending = d.pending.iter().map(|p| wit::Pending { job: p.job.into(), reason: p.reason.clone() }).collect();
    let mut new = super::older::older_decision!(
        old,
        d,
        old::ActionKind::Place(p) => wit::ActionKind::Place(placement(p)),
        old::ActionKind::Preempt => wit::ActionKind::Preempt,
        old::ActionKind::Resize(r) => wit::ActionKind::Resize(wit::Resize {
            placement: placement(r.placement),
            batch_size: r.batch_size,
        }),
    );
    new.pending = pending;
    new
}

/// What a 0.3.0 policy said it does, in 0.4.0 terms.
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
        assert_eq!(old.jobs.batch_size, new.jobs.batch_size);
        assert_eq!(old.nodes_down, new.nodes_down);
        assert_eq!(old.queue.handle, new.queue.handle);
        assert_eq!(old.added.len(), new.added.len());
        assert_eq!(old.added[0].tenant, new.added[0].tenant);
        assert_eq!(old.added[0].scaling.gpu_counts, new.added[0].scaling.gpu_counts);
        assert_eq!(old.nodes.as_ref().map(Vec::len), new.nodes.as_ref().map(Vec::len));
        let q = new.queue.handle[0];
        let d = decision(old::Decision {
            actions: vec![old::Action {
                job: q.0,
                kind: old::ActionKind::Resize(old::Resize {
                    placement: old::Placement {
                        nodes: vec![old::NodePlacement { node: 0, gpus: vec![3] }],
                        share: false,
                    },
                    batch_size: Some(64),
                }),
                reason: "grow".into(),
            }],
            next_call_ms: Some(5),
            pending: vec![old::Pending { job: q.0, reason: "waits".into() }],
        });
        assert_eq!(d.pending, [wit::Pending { job: q, reason: "waits".into() }]);
        assert!(matches!(&d.actions[0].kind, wit::ActionKind::Resize(r) if r.batch_size == Some(64)));
    }
}
