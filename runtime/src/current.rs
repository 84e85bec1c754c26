//! Components built against the current contract (0.4.0): bindgen's bindings for the calls, and
//! the conversions between its types and core's (`wasmsched_core::bindings::wit`), which have
//! the same names and shapes but no wasmtime in them. The conversions are written from the WIT
//! at build time (`build.rs`): a snapshot crosses moved or copied ([`snapshot`]), a decision
//! comes back moved. The `convert` benchmark of the binary's `decide` bench measures the crossing.

#![allow(missing_docs, reason = "bindgen's generated bindings")]

wasmtime::component::bindgen!({
    path: "../wit",
    world: "policy-plugin",
});

use std::borrow::Cow;

/// Core's contract types, under the name the generated conversions use.
use wasmsched_core::bindings::wit as host;

pub use self::wasmsched::policy::types as guest;

/// The current snapshot in bindgen's types, as the call lowers it: moved when the host is done
/// with it (its strings and lists of numbers are not copied), else copied.
pub fn snapshot(s: Cow<'_, host::Snapshot>) -> guest::Snapshot {
    match s {
        Cow::Owned(s) => s.into(),
        Cow::Borrowed(s) => s.into(),
    }
}

#[allow(clippy::all, reason = "generated: one rule writes every field")]
mod conversions {
    use super::{guest, host};
    include!(concat!(env!("OUT_DIR"), "/conversions.rs"));
}

#[cfg(test)]
mod tests {
    use std::fmt::Debug;

    use wasmsched_core::world::{Cursor, JobId, NodeId, sample};

    use super::{guest, host};

    /// `h` crosses to bindgen's type and back unchanged, and both print alike.
    fn crosses<H, G>(h: &H)
    where
        H: From<G> + PartialEq + Debug,
        G: for<'a> From<&'a H> + From<H> + Debug,
    {
        let g = G::from(h);
        assert_eq!(format!("{h:?}"), format!("{g:?}"));
        assert!(H::from(g) == *h, "{h:?} came back changed");
        let moved = G::from(H::from(G::from(h)));
        assert_eq!(format!("{moved:?}"), format!("{h:?}"), "moved across, it is the same");
    }

    #[test]
    fn a_full_snapshot_crosses_unchanged_and_prints_as_bindgen_prints_it() {
        let mut world = sample::gpu_cluster(6, 8, 10, 7);
        for (i, h) in world.jobs().map(|(_, s)| s.handle).collect::<Vec<_>>().into_iter().enumerate() {
            world.record(h, 3, vec![0.25 * i as f64, 1e-300]);
        }
        let snapshot = world.snapshot_for(&mut Cursor::fresh());
        assert!(!snapshot.added.is_empty() && !snapshot.queue.handle.is_empty() && !snapshot.progress.job.is_empty());
        crosses::<host::Snapshot, guest::Snapshot>(&snapshot);
    }

    #[test]
    fn every_action_and_error_crosses_unchanged_and_prints_as_bindgen_prints_it() {
        let placement = host::Placement {
            nodes: vec![
                host::NodePlacement { node: NodeId(3), gpus: vec![0, 7] },
                host::NodePlacement { node: NodeId(9), gpus: vec![] },
            ],
            share: true,
        };
        let kinds = [
            host::ActionKind::SetCpu(Some(796)),
            host::ActionKind::SetCpu(None),
            host::ActionKind::SetMemory(Some(u64::MAX)),
            host::ActionKind::Migrate(NodeId(u32::MAX)),
            host::ActionKind::Deliver,
            host::ActionKind::Stop,
            host::ActionKind::SetGpuShare(host::GpuShare { gpu: 2, percent: 255 }),
            host::ActionKind::Place(placement.clone()),
            host::ActionKind::Preempt,
            host::ActionKind::Resize(host::Resize { placement, batch_size: Some(0) }),
        ];
        let decision = host::Decision {
            actions: kinds
                .into_iter()
                .enumerate()
                .map(|(i, kind)| host::Action { job: JobId(i as u32), kind, reason: format!("reason ü {i}") })
                .collect(),
            next_call_ms: Some(0),
            pending: vec![host::Pending { job: JobId(4), reason: String::new() }],
        };
        crosses::<host::Decision, guest::Decision>(&decision);
        crosses::<host::Abilities, guest::Abilities>(&host::Abilities { places: true });
        for error in [
            host::PolicyError::InvalidConfig("no such key".into()),
            host::PolicyError::InvalidState(String::new()),
            host::PolicyError::Failed("\0".into()),
        ] {
            crosses::<host::PolicyError, guest::PolicyError>(&error);
            assert_eq!(error.to_string(), guest::PolicyError::from(&error).to_string());
        }
    }
}
