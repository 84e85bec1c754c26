//! A running group moved whole: a migration (every pod to one node) or a resize that keeps its
//! pods (the same GPUs per pod, on other nodes, perhaps at another batch size). Every pod is
//! re-created from its own spec and its checkpoint, the originals deleted and waited for, then
//! every copy bound at once, each to its piece's node; a copy that cannot be bound sends the
//! copies already bound back to the queue, so the group waits whole.

use std::sync::Arc;

use kube::runtime::reflector::ObjectRef;

use wasmsched_core::bindings::wit;
use wasmsched_core::live::carried::{batch_after_resize, resize_needs_checkpoint};
use wasmsched_core::world::{GpuSlot, World};

use super::{Gang, Pieces};
use crate::actions::requests::{Freeing, bind};
use crate::actions::{Effect, Failure, Flight, PodCopy};
use crate::within;
use crate::{By, Kubernetes, pod};

impl Kubernetes {
    /// Where a migration or a resize takes group `g` (job `job`): the resize's placement, or
    /// for a migration to `to` as many GPUs there as it holds, the lowest free ones (its own
    /// there counted free). None for any other action.
    pub(crate) fn group_destination(&self, action: &wit::Action, world: &World) -> Option<wit::Placement> {
        match &action.kind {
            wit::ActionKind::Resize(r) => Some(r.placement.clone()),
            wit::ActionKind::Migrate(to) => {
                let state = world.state(action.job)?;
                let mut book = world.gpu_book();
                for g in state.gpus.iter().filter(|g| g.node == *to) {
                    book.release(g.node, g.index, action.job);
                }
                let gpus = book.free_on(*to).take(state.gpus.len()).collect();
                Some(wit::Placement { nodes: vec![wit::NodePlacement { node: *to, gpus }], share: false })
            }
            _ => None,
        }
    }

    /// Send the move of running group `action.job` dealt into `pieces` (each pod's node and
    /// GPUs): its pods are copied from their checkpoints (the resize's batch size in force in
    /// each copy), the originals deleted, and once they and what the decision frees are gone,
    /// every copy is bound. If a bind fails, the copies bound are taken back and the group waits
    /// whole, preempted.
    pub(crate) fn send_group_move(
        &mut self,
        action: &wit::Action,
        pieces: Pieces,
        world: &World,
        by: By,
        freeing: &Arc<Freeing>,
    ) -> Result<Flight, String> {
        let entry = self.uid_of(action.job).ok_or("the group is no longer managed")?;
        let m = self.jobs.get(&entry).ok_or("the group is no longer managed")?;
        let g: &Gang = m.gang.as_ref().ok_or("the group is no longer managed")?;
        let state = world.state(action.job).filter(|s| s.is_running()).ok_or("the group is queued: place it")?;
        let resize = match &action.kind {
            wit::ActionKind::Resize(r) => Some(r),
            _ => None,
        };
        let Some(folder) = m.job.checkpoint.clone() else {
            return Err(resize_needs_checkpoint(
                "the group's pods",
                "annotate them with the folder they checkpoint to, on a volume that outlives them",
            ));
        };
        let mut moves = Vec::with_capacity(pieces.len());
        for (member, (node, _)) in g.members.iter().zip(&pieces) {
            let p = self.pods.get(&ObjectRef::new(&member.name).within(&self.config.namespace));
            let p = p.ok_or_else(|| format!("pod {} of the group is gone", member.name))?;
            pod::checkpoint_survives(&p, &folder)?;
            let n = self.nodes.get(*node as usize).ok_or(format!("node {node} is not in the cluster"))?;
            if !n.ready {
                return Err(format!("node {} is NotReady", n.name));
            }
            moves.push(((*p).clone(), n.name.clone()));
        }
        let batch_size = resize.and_then(|r| batch_after_resize(r.batch_size, state.batch_size));
        let changes = pod::Changes {
            scheduler: self.config.scheduler.clone(),
            preempted: false,
            service: (state.run_ms, state.gpu_ms),
            arrived_unix_ms: m.job.arrived_unix_ms,
            gpus: None,
            batch_size,
        };
        let slots: Vec<GpuSlot> =
            pieces.iter().flat_map(|(node, gpus)| gpus.iter().map(|&index| GpuSlot { node: *node, index })).collect();
        let first = pieces.first().map_or(state.node, |(n, _)| *n);
        let slots_shown = slots.clone();
        let resized_to = resize.map(|_| batch_size);
        let effect_of = move |copies| Effect::MovedSpread { node: first, gpus: slots, copies, resized: resized_to };
        let (api, limit, gate) = (self.pods_api(), self.config.timeout, self.gate.clone());
        let taker = self.taker();
        let (frees, freeing) = (freeing.frees(), freeing.clone());
        let (service, arrived) = (changes.service, changes.arrived_unix_ms);
        let members: Vec<Arc<str>> = g.members.iter().map(|p| p.uid.clone()).collect();
        let resized = resize.is_some();
        let pods: Vec<_> = moves.iter().map(|(p, _)| p.clone()).collect();
        let copied = taker.copy_all(&pods, &changes);
        let task = self.rt.spawn(async move {
            let copies = copied.await;
            drop(frees);
            let copies = copies?;
            freeing.all_done().await;
            let binds = copies.iter().zip(&moves).map(|(copy, (_, node))| {
                let (api, gate, name) = (api.clone(), gate.clone(), copy.metadata.name.clone().unwrap_or_default());
                async move { gate.pass(|| within(limit, bind(&api, &name, node))).await }
            });
            let results = futures_util::future::join_all(binds).await;
            let failed = results.iter().position(Result::is_err);
            let Some(i) = failed else {
                return Ok(effect_of(copies.into_iter().map(PodCopy::of).collect()));
            };
            // Partly bound: every copy goes back to the queue, the group waits whole.
            let back = taker.run(copies.clone(), true, service, arrived, None).await;
            let name = copies[i].metadata.name.clone().unwrap_or_default();
            let why = match results.into_iter().nth(i).and_then(Result::err).map(Failure::from) {
                Some(Failure::Refused(w) | Failure::Declined(w) | Failure::Unreachable(w)) => w,
                None => String::new(),
            };
            let what = if resized { "resize" } else { "migration" };
            Err(Failure::Refused(format!(
                "the group's {what}: pod {name} could not be bound ({why}); every copy {} back to the queue, and the \
                 group waits whole",
                if back.is_ok() { "went" } else { "is being taken" }
            )))
        });
        let mut flight = Flight::group(action.job, entry, members, by, task);
        flight.spread = Some(pieces.iter().map(|(n, _)| *n).collect());
        flight.resize = Some((first, slots_shown));
        Ok(flight)
    }
}
