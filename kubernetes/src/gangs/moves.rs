//! A group moved whole: a migration (every pod to one node), a resize, or the placement of an
//! elastic group in another shape. Its pods are re-created, one per piece: piece i from pod i's
//! own spec (a piece beyond its pods from its leader's), told its rank, the group's pod count
//! and the batch size in force, asking for the piece's GPUs; the originals are deleted and
//! waited for, then every copy is bound at once, each to its piece's node (a group whose pods'
//! devices come through ResourceClaims has every copy's claims allocated on its node first,
//! all or nothing). A copy that cannot be bound sends the copies to the queue, so the group
//! waits whole, in its new shape.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::ObjectRef;

use wasmsched_core::bindings::wit;
use wasmsched_core::live::carried::{batch_after_resize, resize_needs_checkpoint};
use wasmsched_core::world::{GpuSlot, World};
use wasmsched_rules::NodePlacement;

use crate::actions::requests::{Freeing, bind};
use crate::actions::{Effect, Failure, Flight, PodCopy};
use crate::group::{Gang, Member, Pieces};
use crate::{By, Kubernetes, dra, pod, within};

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

    /// Whether the group `action` acts on takes another shape in `pieces`: another pod count,
    /// or other GPUs per pod.
    pub(crate) fn reshapes(&self, action: &wit::Action, pieces: &Pieces) -> bool {
        let g = self.uid_of(action.job).and_then(|u| self.jobs.get(&u)?.gang.as_ref());
        g.is_some_and(|g| {
            pieces.len() != g.members.len() || pieces.iter().any(|p| p.gpus.len() as u32 != g.per_piece())
        })
    }

    /// Send the move of group `action.job` dealt into `pieces` (each piece's node and GPUs): a
    /// running group's migration or resize, or a queued elastic group's placement in another
    /// shape. Its pods are copied (a running group's from their checkpoint), the originals
    /// deleted, and once they and what the decision frees are gone, every copy is bound. If a
    /// bind fails, the copies bound are taken back and the group waits whole.
    pub(crate) fn send_group_move(
        &mut self,
        action: &wit::Action,
        pieces: Pieces,
        world: &World,
        by: By,
        freeing: &Arc<Freeing>,
    ) -> Result<Flight, String> {
        let MoveFrom { entry, originals, nodes } = self.group_move_from(action, &pieces, world)?;
        let m = &self.jobs[&entry];
        let g: &Gang = m.gang.as_ref().expect("checked: a group");
        // Pods whose devices come through claims keep their claims' sizes: each copy's claims
        // are allocated on its node before the binds.
        let claimed = originals.iter().any(dra::Dra::uses_claims);
        if claimed && pieces.iter().any(|p| p.gpus.len() as u32 != g.per_piece()) {
            return Err(format!(
                "the group's GPUs come through its pods' ResourceClaims ({} device(s) a pod); a move to pods of \
                 other sizes would need other claims, which the host does not write: move it in pieces of {} GPU(s)",
                g.per_piece(),
                g.per_piece()
            ));
        }
        let dra = claimed.then(|| {
            let at: Vec<_> = pieces
                .iter()
                .map(|p| (self.nodes[p.node.index()].labels.clone(), self.nodes[p.node.index()].dra_places(&p.gpus)))
                .collect();
            (self.dra.clone(), self.claims_api(), at)
        });
        let state = world.state(action.job).expect("checked: in the world");
        let placing = matches!(action.kind, wit::ActionKind::Place(_));
        let resize = if let wit::ActionKind::Resize(r) = &action.kind { Some(r) } else { None };
        let per = g.per_piece();
        let batch_size = resize.and_then(|r| batch_after_resize(r.batch_size, state.batch_size));
        let preempted = state.is_running() || state.queued == Some(wit::WaitReason::Preempted);
        let (service, arrived) = ((state.run_ms, state.gpu_ms), m.job.arrived_unix_ms);
        let size = pieces.len() as u32;
        let base = pod::Changes {
            scheduler: self.config.scheduler.clone(),
            service,
            arrived_unix_ms: arrived,
            batch_size,
            ..pod::Changes::default()
        };
        let copies: Vec<Pod> = pieces
            .iter()
            .enumerate()
            .map(|(i, piece)| {
                let held = piece.gpus.len() as u32;
                let changes = pod::Changes {
                    gpus: (held != per).then_some(held),
                    rank: Some((i as u32, size)),
                    job_name: (i >= originals.len()).then(|| added_job_name(&g.key.name, i)),
                    ..base.clone()
                };
                pod::copy(originals.get(i).unwrap_or(&originals[0]), &changes)
            })
            .collect();
        let slots = GpuSlot::of(&pieces);
        let first = pieces.first().map_or(state.node, |p| p.node);
        let shown = (first, slots.clone());
        let resized_to = resize.map(|_| batch_size);
        let effect_of = move |copies| Effect::MovedSpread { node: first, gpus: slots, copies, resized: resized_to };
        let (api, limit, gate) = (self.pods_api(), self.config.timeout, self.gate.clone());
        let taker = self.taker();
        let frees = state.is_running().then(|| freeing.frees());
        let freeing = freeing.clone();
        let members: Vec<Arc<str>> = g.members.iter().map(|p| p.uid.clone()).collect();
        let what = move_words(resize.is_some(), placing);
        let replaced = taker.replace(&originals, copies);
        let task = self.rt.spawn(async move {
            let copies = replaced.await;
            drop(frees);
            let copies = copies?;
            freeing.all_done().await;
            if let Some((dra, claims, at)) = dra {
                let to: Vec<dra::CopyTarget> = copies
                    .iter()
                    .zip(nodes.iter().zip(at))
                    .map(|(c, (node, (labels, prefer)))| dra::CopyTarget {
                        name: c.metadata.name.clone().unwrap_or_default(),
                        node: node.clone(),
                        labels,
                        prefer,
                        share: None,
                    })
                    .collect();
                if let Err(why) = dra.allocate_copies(&api, claims, &gate, limit, &to).await {
                    let back = taker.run(copies.clone(), preempted, service, arrived, None).await;
                    return Err(partly_bound(what, &copies[0], Some(why), back.is_ok()));
                }
            }
            let binds = copies.iter().zip(&nodes).map(|(copy, node)| {
                let (api, gate, name) = (api.clone(), gate.clone(), copy.metadata.name.clone().unwrap_or_default());
                async move { gate.pass(|| within(limit, bind(&api, &name, node))).await }
            });
            let results = futures_util::future::join_all(binds).await;
            let failed = results.iter().position(Result::is_err);
            let Some(i) = failed else {
                return Ok(effect_of(copies.into_iter().map(PodCopy::of).collect()));
            };
            // Partly bound: every copy goes back to the queue, the group waits whole.
            let back = taker.run(copies.clone(), preempted, service, arrived, None).await;
            let why = results.into_iter().nth(i).and_then(Result::err).map(Failure::from);
            Err(partly_bound(what, &copies[i], why, back.is_ok()))
        });
        let mut flight = Flight::group(action.job, entry, members, by, task);
        flight.spread = Some(pieces.iter().map(|p| p.node).collect());
        if placing {
            flight.target = Some(shown);
        } else {
            flight.resize = Some(shown);
        }
        Ok(flight)
    }

    /// What a move of group `action.job` into `pieces` starts from ([`MoveFrom`]), checked. Err
    /// says why it cannot move.
    fn group_move_from(&self, action: &wit::Action, pieces: &Pieces, world: &World) -> Result<MoveFrom, String> {
        const GONE: &str = "the group is no longer managed";
        let entry = self.uid_of(action.job).ok_or(GONE)?;
        let m = self.jobs.get(&entry).ok_or(GONE)?;
        let g: &Gang = m.gang.as_ref().ok_or(GONE)?;
        let state = world.state(action.job).ok_or(GONE)?;
        let placing = matches!(action.kind, wit::ActionKind::Place(_));
        match (placing, state.is_running()) {
            (true, true) => return Err("the group already runs; preempt it first".into()),
            (false, false) => return Err("the group is queued: place it".into()),
            _ => {}
        }
        let mut originals = Vec::with_capacity(g.members.len());
        for member in &g.members {
            let p = self.pods.get(&ObjectRef::new(&member.name).within(&self.config.namespace));
            originals.push((*p.ok_or_else(|| format!("pod {} of the group is gone", member.name))?).clone());
        }
        if !placing {
            let Some(folder) = &m.job.checkpoint else {
                return Err(resize_needs_checkpoint(
                    "the group's pods",
                    "annotate them with the folder they checkpoint to, on a volume that outlives them",
                ));
            };
            originals.iter().try_for_each(|p| pod::checkpoint_survives(p, folder))?;
        }
        let mut nodes = Vec::with_capacity(pieces.len());
        for &NodePlacement { node, .. } in pieces {
            let n = self.nodes.get(node.index()).ok_or(format!("node {node} is not in the cluster"))?;
            if !n.ready {
                return Err(format!("node {} is NotReady", n.name));
            }
            nodes.push(n.name.clone());
        }
        if pieces.iter().any(|p| p.gpus.len() as u32 != g.per_piece()) {
            originals.iter().try_for_each(pod::resizable)?;
        }
        Ok(MoveFrom { entry, originals, nodes })
    }

    /// Group `entry`'s pods are `copies` now, one per piece of `gpus` in all: its members
    /// follow them (a piece beyond the pods it had is a pod made from its leader's spec), and
    /// its size is their count.
    pub(crate) fn reshaped(&mut self, entry: &Arc<str>, copies: &[PodCopy], gpus: usize) {
        let Some(g) = self.jobs.get_mut(entry).and_then(|m| m.gang.as_mut()) else { return };
        let Some(leader) = g.members.first().cloned() else { return };
        let per = u32::try_from(gpus.checked_div(copies.len()).unwrap_or(0)).unwrap_or(u32::MAX);
        let before = std::mem::take(&mut g.members);
        g.members = copies
            .iter()
            .enumerate()
            .map(|(i, copy)| {
                let was = before.get(i);
                Member {
                    uid: Arc::from(copy.uid.as_str()),
                    name: copy.name.clone(),
                    job_name: was.map_or_else(|| added_job_name(&g.key.name, i), |m| m.job_name.clone()),
                    gpus: per,
                    node: None,
                    last_cpu: None,
                    used: (0, 0),
                    ..was.unwrap_or(&leader).clone()
                }
            })
            .collect();
        g.size = copies.len() as u32;
        g.seen = 0;
    }
}

/// The job name of piece `i` of group `group` when the group has grown past its pods.
fn added_job_name(group: &str, i: usize) -> String {
    format!("{group}-{i}")
}

/// What a group's move starts from: the group's entry, its pods as they are, and each piece's
/// node by name.
struct MoveFrom {
    entry: Arc<str>,
    originals: Vec<Pod>,
    nodes: Vec<String>,
}

/// What a group's move is, in words: a resize, a queued group placed in another shape, or a
/// migration.
fn move_words(resized: bool, placing: bool) -> &'static str {
    match (resized, placing) {
        (true, _) => "resize",
        (false, true) => "placement in another shape",
        (false, false) => "migration",
    }
}

/// Why a group's move failed with copy `pod` not bound (`why`, from its bind): every copy went
/// back to the queue (`back`), or is being taken back, and the group waits whole.
fn partly_bound(what: &str, pod: &Pod, why: Option<Failure>, back: bool) -> Failure {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let why = match why {
        Some(Failure::Refused(w) | Failure::Declined(w) | Failure::Unreachable(w)) => w,
        None => String::new(),
    };
    Failure::Refused(format!(
        "the group's {what}: pod {name} could not be bound ({why}); every copy {} back to the queue, and the group \
         waits whole",
        if back { "went" } else { "is being taken" }
    ))
}
