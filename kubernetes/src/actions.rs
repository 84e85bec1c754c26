//! Putting actions into force on pods: the request each action becomes, and what the world
//! learns when it succeeds. A preemption, a migration or a resize re-creates the pod: copy
//! (unbound; for a resize, asking for the new GPUs and told the new batch size) → delete the
//! original → wait until it is gone → (bind the copy to the target node, once every pod the
//! same decision takes away is gone).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};

use super::pod::{self, Resource};
use super::{By, Kubernetes, dra, within};
use wasmsched_core::backend::ApplyError;
use wasmsched_core::bindings::wit;
use wasmsched_core::live::carried::{batch_after_resize, resize_needs_checkpoint};
use wasmsched_core::live::effect;
use wasmsched_core::world::{GpuSlot, JobId, JobState, NodeId, World};

pub(crate) mod requests;

pub(super) use crate::gate::Failure;
use requests::deliver;
pub(super) use requests::{Freeing, Frees, PodRef, bind, delete, gone};

/// What an action did; a copy is named by its pod's uid and name.
pub(super) type Effect = effect::Effect<PodCopy>;

/// The pod that carries a job on after its pod was re-created.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct PodCopy {
    pub(super) uid: String,
    pub(super) name: String,
}

impl PodCopy {
    /// The copy the apiserver made.
    pub(super) fn of(made: Pod) -> PodCopy {
        PodCopy { uid: made.metadata.uid.unwrap_or_default(), name: made.metadata.name.unwrap_or_default() }
    }
}

pub(super) type Ask = BoxFuture<'static, Result<Effect, Failure>>;

/// An action sent to the apiserver and not yet answered.
pub(super) struct Flight {
    pub(super) job: JobId,
    /// The pod acted on.
    pub(super) uid: Arc<str>,
    /// Whether it re-creates the pod (a preemption, a migration or a resize): until it lands,
    /// the pod's absence and its copy's presence are its own doing.
    pub(super) moves: bool,
    by: By,
    /// For a placement: the node (a group's first) and the GPUs it binds the pod (or every
    /// pod of the group) to.
    pub(super) target: Option<(NodeId, Vec<GpuSlot>)>,
    /// For a group: the pods it re-creates (their absence and their copies' presence are its
    /// own doing until it lands); for a group's placement, each piece's node.
    members: Vec<Arc<str>>,
    pub(super) spread: Option<Vec<NodeId>>,
    /// For a placement the world already shows bound: the wait it had, restored if the bind
    /// fails.
    assumed: Option<(wit::WaitReason, u64)>,
    /// For a resize (or a group's move): the node (its first) and GPUs it gives the job.
    pub(super) resize: Option<(NodeId, Vec<GpuSlot>)>,
    /// For a resize the world already shows on its new GPUs: the node and GPUs it held
    /// before, restored if the resize fails.
    held: Option<(NodeId, Vec<GpuSlot>)>,
    task: tokio::task::JoinHandle<Result<Effect, Failure>>,
}

impl Flight {
    pub(super) fn new(
        job: JobId,
        uid: Arc<str>,
        moves: bool,
        by: By,
        target: Option<(NodeId, Vec<GpuSlot>)>,
        resize: Option<(NodeId, Vec<GpuSlot>)>,
        task: tokio::task::JoinHandle<Result<Effect, Failure>>,
    ) -> Flight {
        Flight {
            job,
            uid,
            moves,
            by,
            target,
            members: Vec::new(),
            spread: None,
            assumed: None,
            resize,
            held: None,
            task,
        }
    }

    /// An action on group `entry` (job `job`) that re-creates its pods `members`.
    pub(super) fn group(
        job: JobId,
        entry: Arc<str>,
        members: Vec<Arc<str>>,
        by: By,
        task: tokio::task::JoinHandle<Result<Effect, Failure>>,
    ) -> Flight {
        Flight { members, ..Flight::new(job, entry, true, by, None, None, task) }
    }

    /// The pods whose absence and copies' presence are its own doing until it lands.
    pub(super) fn moving(&self) -> impl Iterator<Item = &Arc<str>> {
        std::iter::once(&self.uid).chain(&self.members).filter(|_| self.moves)
    }
}

/// How long [`Kubernetes::apply_from`] waits for its actions' answers. The loop goes on
/// meanwhile: what is not answered by then lands at a later observation, and a placement still
/// in flight shows in the world as bound (as kube-scheduler assumes a pod bound while its
/// binding is out), so no tick places it twice.
const APPLY_WAIT: Duration = Duration::from_millis(250);

impl Kubernetes {
    /// Put `actions` into force, preemptions and stops first (a placement in the same decision
    /// may take what they free: placements are sent at once, and each waits at the apiserver's
    /// door until they are done). Every request passes the [`gate`](super::gate). Waits
    /// [`APPLY_WAIT`] at most; returns the failures known by then.
    pub(super) fn apply_from(&mut self, actions: &[wit::Action], world: &mut World, by: By) -> Vec<ApplyError> {
        let (places, rest): (Vec<&wit::Action>, Vec<&wit::Action>) =
            actions.iter().partition(|a| matches!(a.kind, wit::ActionKind::Place(_)));
        if let Some((since, why)) = self.health.lock().expect("health lock").down.clone() {
            let reason = format!(
                "the apiserver does not answer ({why}; for {:.1} s): nothing was sent, the pod keeps its last state",
                since.elapsed().as_secs_f64()
            );
            return actions.iter().map(|a| ApplyError { job: a.job, reason: reason.clone() }).collect();
        }
        // The decision's preemptions and stops each hold a read lock until done; its placements
        // take the write lock (and let it go) before they bind. Its migrations and resizes bind
        // once what it takes away is gone ([`Freeing`]), counted from now until all is sent.
        let first = Arc::new(tokio::sync::RwLock::new(()));
        let freeing = Arc::new(Freeing::default());
        let sending = freeing.frees();
        let busy: HashSet<JobId> = self.flight.iter().map(|f| f.job).collect();
        let mut errors = Vec::new();
        let mut sent = Vec::new();
        // A placement (or a resize onto another node) must find the room kube-scheduler would
        // ask for: the policy sees GPUs, not the pods' requests, selectors or a node's pod count.
        let takes_room = |a: &&wit::Action| {
            matches!(a.kind, wit::ActionKind::Place(_) | wit::ActionKind::Resize(_) | wit::ActionKind::Migrate(_))
        };
        let mut rooms = if actions.iter().any(|a| takes_room(&a)) { self.rooms(world) } else { Vec::new() };
        self.dra.begin();
        for action in rest.into_iter().chain(places) {
            if busy.contains(&action.job) {
                let reason = "an earlier action on this pod is still in flight; ask again once it has landed";
                errors.push(ApplyError { job: action.job, reason: reason.into() });
                continue;
            }
            let pieces = match self.room_for(action, world, &mut rooms) {
                Ok(pieces) => pieces,
                Err(reason) => {
                    errors.push(ApplyError { job: action.job, reason });
                    continue;
                }
            };
            let sent_now = match pieces {
                Some(pieces) if matches!(action.kind, wit::ActionKind::Place(_)) && !self.reshapes(action, &pieces) => {
                    self.send_group_place(action, pieces, world, by, &first)
                }
                Some(pieces) => self.send_group_move(action, pieces, world, by, &freeing),
                None => self.send(action, world, by, &first, &freeing),
            };
            match sent_now {
                Ok(flight) => sent.push(flight),
                Err(reason) => errors.push(ApplyError { job: action.job, reason }),
            }
        }
        drop(sending);
        self.wait_for(&sent, APPLY_WAIT);
        for flight in sent {
            if let Some(e) = self.in_flight(flight, world) {
                errors.push(e);
            }
        }
        errors
    }

    /// A flight sent this tick: landed now if it is done (its failure, if it failed), else kept
    /// in flight, the world showing it where it goes meanwhile.
    fn in_flight(&mut self, mut flight: Flight, world: &mut World) -> Option<ApplyError> {
        if flight.task.is_finished() {
            return self.land(&mut flight, world);
        }
        if let Some((node, slots)) = &flight.target
            && let Some(state) = world.state(flight.job)
        {
            // Assumed bound until the apiserver says otherwise.
            flight.assumed = state.queued.map(|reason| (reason, state.since_ms));
            world.start_job(flight.job, *node, slots.clone());
            self.set_spread(&flight.uid, flight.spread.as_deref());
        }
        if let Some((node, slots)) = &flight.resize
            && let Some(state) = world.state_mut(flight.job).filter(|s| s.is_running())
        {
            // Shown on its new GPUs while the resize goes on, so that no later tick gives
            // them away; back where it was if the resize fails.
            flight.held =
                Some((std::mem::replace(&mut state.node, *node), std::mem::replace(&mut state.gpus, slots.clone())));
        }
        self.flight.push(flight);
        None
    }

    /// For a placement, or a resize onto another node, take its pod's room on its node out of
    /// `rooms`; why not, when it does not fit there. A group's placement is dealt to its pods
    /// ([`super::group::deal`]), each pod's room taken on its node: each piece's node and GPUs.
    fn room_for(
        &self,
        action: &wit::Action,
        world: &World,
        rooms: &mut [super::queue::Room],
    ) -> Result<Option<super::group::Pieces>, String> {
        let Some(m) = self.uid_of(action.job).and_then(|u| self.jobs.get(&u)) else { return Ok(None) };
        if let Some(g) = &m.gang {
            let placement = match &action.kind {
                wit::ActionKind::Place(placement) => placement.clone(),
                _ => match self.group_destination(action, world) {
                    Some(placement) => {
                        // Its pods leave their nodes: their room is theirs to take again.
                        for p in &g.members {
                            if let Some(room) = p.node.and_then(|n| rooms.get_mut(n.index())) {
                                room.give(p.requests);
                            }
                        }
                        placement
                    }
                    None => return Ok(None),
                },
            };
            // A piece beyond the group's pods is a new pod, made from the leader's spec.
            let room = |node: NodeId, i: usize| {
                let p = g.members.get(i).unwrap_or(&g.members[0]);
                let (Some(room), Some(n)) = (rooms.get_mut(node.index()), self.nodes.get(node.index())) else {
                    return Err(format!("node {node} is not in the cluster"));
                };
                room.takes(p.requests, &p.selector)
                    .map_err(|why| format!("pod {} on node {}: {why}", p.name, n.name))?;
                room.take(p.requests);
                Ok(())
            };
            let elastic = world.spec(action.job).is_some_and(|s| s.scaling.gpu_counts.len() > 1);
            return super::group::deal(&placement, &g.members, elastic, room).map(Some);
        }
        let placement = match &action.kind {
            wit::ActionKind::Place(placement) => placement,
            wit::ActionKind::Resize(r) => &r.placement,
            _ => return Ok(None),
        };
        let Some(target) = placement.nodes.first() else { return Ok(None) };
        if matches!(action.kind, wit::ActionKind::Resize(_))
            && world.state(action.job).is_some_and(|s| s.node == target.node)
        {
            return Ok(None); // its own requests are counted there already
        }
        let (Some(room), Some(node)) = (rooms.get_mut(target.node.index()), self.nodes.get(target.node.index())) else {
            return Err(format!("node {} is not in the cluster", target.node));
        };
        room.takes(m.requests, &m.selector).map_err(|why| format!("node {}: {why}", node.name))?;
        room.take(m.requests);
        Ok(None)
    }

    /// Send one action: checked against what the host knows (the pod), then spawned. A
    /// placement waits for `first`'s write lock; any other action holds its read lock until it
    /// is done (so a decision's placements wait for its preemptions and stops). What it takes
    /// away is counted in `freeing`.
    fn send(
        &mut self,
        action: &wit::Action,
        world: &World,
        by: By,
        first: &Arc<tokio::sync::RwLock<()>>,
        freeing: &Arc<Freeing>,
    ) -> Result<Flight, String> {
        let uid = self.uid_of(action.job).ok_or("the pod is no longer managed")?;
        let p = self.jobs.get(&uid).and_then(|m| self.pod_of(m)).ok_or("the pod is no longer managed")?;
        let state = world.state(action.job).ok_or("the pod is no longer managed")?;
        let (target, resize) = match &action.kind {
            wit::ActionKind::Place(p) => (p.nodes.first().map(|n| (n.node, n.gpus.clone())), None),
            wit::ActionKind::Resize(r) => (
                None,
                r.placement
                    .nodes
                    .first()
                    .map(|n| (n.node, n.gpus.iter().map(|&index| GpuSlot { node: n.node, index }).collect())),
            ),
            _ => (None, None),
        };
        let moves =
            matches!(action.kind, wit::ActionKind::Preempt | wit::ActionKind::Migrate(_) | wit::ActionKind::Resize(_));
        let members: Vec<Arc<str>> = match self.jobs.get(&uid).and_then(|m| m.gang.as_ref()) {
            Some(g) if moves => g.members.iter().map(|p| p.uid.clone()).collect(),
            _ => Vec::new(),
        };
        let ask = match self.jobs.get(&uid).and_then(|m| m.gang.as_ref()) {
            Some(g) => self.act_group(g, &p, action, state, freeing),
            None => self.act(&p, action, state, freeing),
        };
        let task = match target {
            Some(_) => {
                let lock = first.clone();
                self.rt.spawn(async move {
                    drop(lock.write().await);
                    ask.await
                })
            }
            None => {
                let held = first.clone().try_read_owned().expect("no writer before the placements");
                self.rt.spawn(async move {
                    let done = ask.await;
                    drop(held);
                    done
                })
            }
        };
        let target = target.map(|(node, gpus)| (node, gpus.into_iter().map(|index| GpuSlot { node, index }).collect()));
        Ok(Flight { members, ..Flight::new(action.job, uid, moves, by, target, resize, task) })
    }

    /// The actions sent on earlier ticks that have landed since, into the world. The failures
    /// of the policy's wait in [`Backend::settled`](wasmsched_core::backend::Backend::settled); the default placement's are logged.
    pub(super) fn land_flights(&mut self, world: &mut World) {
        let mut flights = std::mem::take(&mut self.flight);
        let mut failed = Vec::new();
        flights.retain_mut(|f| {
            if !f.task.is_finished() {
                return true;
            }
            if let Some(e) = self.land(f, world) {
                failed.push((f.by, e));
            }
            false
        });
        flights.append(&mut self.flight);
        self.flight = flights;
        let (policy, backend): (Vec<_>, Vec<_>) = failed.into_iter().partition(|(by, _)| *by == By::Policy);
        self.late.extend(policy.into_iter().map(|(_, e)| e));
        self.report_binds(backend.iter().map(|(_, e)| e));
    }

    /// Cancel what is in flight: this replica lost the lead, and a request not yet sent (a
    /// preemption's delete after its copy, a migration's bind) must not go out. Each lands at
    /// the next observation as failed.
    pub(super) fn abort_flights(&self) {
        for f in &self.flight {
            f.task.abort();
        }
    }

    /// Wait until every action in flight has landed (`limit` at most), and take them into
    /// the world; the policy's failures since the last [`Backend::settled`](wasmsched_core::backend::Backend::settled) (the default
    /// placement's are logged). For callers that act outside the loop and want the outcome.
    pub fn drain(&mut self, world: &mut World, limit: Duration) -> Vec<ApplyError> {
        self.wait_for(&self.flight, limit);
        self.land_flights(world);
        std::mem::take(&mut self.late)
    }

    /// Block until every one of `flights` has an answer, or `limit` has passed.
    fn wait_for(&self, flights: &[Flight], limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        self.rt.block_on(async {
            while tokio::time::Instant::now() < deadline && flights.iter().any(|f| !f.task.is_finished()) {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        });
    }

    /// One finished action into the world; its failure, if it failed.
    fn land(&mut self, flight: &mut Flight, world: &mut World) -> Option<ApplyError> {
        use futures_util::FutureExt;
        let (job, uid) = (flight.job, flight.uid.clone());
        let result = match (&mut flight.task).now_or_never() {
            Some(Ok(result)) => result,
            Some(Err(e)) => Err(Failure::Unreachable(format!("the request was dropped: {e}"))),
            None => return None,
        };
        let failure = match result {
            Ok(effect) => {
                // The effect first: a group's move gives it its new pods, then their nodes.
                self.took_effect(&uid, job, effect, world);
                if flight.spread.is_some() {
                    self.set_spread(&uid, flight.spread.as_deref());
                }
                return None;
            }
            Err(failure) => failure,
        };
        if flight.target.is_some() {
            // What its claims were given is free again (the write was released or never made).
            self.dra.forget_pod(&uid);
            for member in self.jobs.get(&uid).and_then(|m| m.gang.as_ref()).into_iter().flat_map(|g| &g.members) {
                self.dra.forget_pod(&member.uid);
            }
        }
        if let Some((reason, since_ms)) = flight.assumed.take()
            && world.requeue_job(job, reason)
            && let Some(state) = world.state_mut(job)
        {
            state.since_ms = since_ms;
        }
        if flight.spread.is_some() {
            // The group's placement failed and its bound pods were taken back: the watch may
            // still show them bound for a moment, and they are not to be taken back twice.
            let members =
                self.jobs.get(&uid).and_then(|m| m.gang.as_ref()).map(|g| g.members.iter().map(|p| p.uid.to_string()));
            self.taken.extend(members.into_iter().flatten());
            self.set_spread(&uid, None);
        }
        if let Some((node, gpus)) = flight.held.take()
            && let Some(state) = world.state_mut(job).filter(|s| s.is_running())
        {
            (state.node, state.gpus) = (node, gpus);
        }
        let m = self.jobs.get_mut(&uid).filter(|_| flight.target.is_some());
        let reason = match failure {
            Failure::Refused(reason) => {
                if let Some(m) = m {
                    m.job.refused = Some(reason.clone());
                }
                reason
            }
            Failure::Unreachable(reason) => {
                if let Some(m) = m {
                    let failures = m.retry.map_or(0, |(_, n)| n) + 1;
                    m.retry = Some((Instant::now() + super::bind_backoff(failures - 1), failures));
                }
                reason
            }
            Failure::Declined(reason) => reason,
        };
        Some(ApplyError { job, reason })
    }

    /// Log the default placement's failed binds: one line for them all, with the first reason.
    pub(super) fn report_binds<'a>(&self, failed: impl IntoIterator<Item = &'a ApplyError>) {
        let mut failed = failed.into_iter();
        let Some(first) = failed.next() else { return };
        let more = failed.count();
        tracing::warn!(
            job = %first.job,
            why = %first.reason,
            more,
            "the default placement could not bind these pods; they stay queued (a bind the apiserver did not answer is tried again with backoff)"
        );
    }

    /// The request that puts one action into force on pod `p`, job `state`; what it takes
    /// away is counted in `freeing` until it is gone. An action the host declines before asking
    /// is a request that fails at once.
    pub(super) fn act(&self, p: &Pod, action: &wit::Action, state: &JobState, freeing: &Arc<Freeing>) -> Ask {
        let to = PodRef {
            api: self.pods_api(),
            name: p.metadata.name.clone().unwrap_or_default(),
            limit: self.config.timeout,
            gate: self.gate.clone(),
        };
        let asked = match &action.kind {
            wit::ActionKind::SetCpu(m) => self.set_limit(to, p, Resource::Cpu, *m, state),
            wit::ActionKind::SetMemory(m) => self.set_limit(to, p, Resource::Memory, *m, state),
            wit::ActionKind::Place(placement) => self.bind_queued(to, p, placement),
            wit::ActionKind::Preempt | wit::ActionKind::Migrate(_) | wit::ActionKind::Resize(_) => {
                self.recreate(to, p, action, state, freeing)
            }
            // Through claims, a share is the copy's allocation's config.
            wit::ActionKind::SetGpuShare(_) if dra::Dra::uses_claims(p) => self.recreate(to, p, action, state, freeing),
            wit::ActionKind::Stop => Ok(delete(to, state, freeing)),
            wit::ActionKind::Deliver => {
                let command = self.uid_of(action.job).and_then(|uid| self.jobs.get(&uid)?.job.deliver.clone());
                Ok(deliver(to, pod::main_container(p).map(|c| c.name.clone()), command))
            }
            wit::ActionKind::SetGpuShare(_) => Err("the device plugin gives this pod whole GPUs, and cannot cap its \
                share; a pod whose GPUs come through DRA ResourceClaims can be shared (its copy's allocation carries \
                the MPS share for the driver)"
                .into()),
        };
        asked.unwrap_or_else(|why| Box::pin(async move { Err(Failure::Declined(why)) }))
    }

    /// Resize a running pod's CPU or memory limit in place (a lifted limit is the node's
    /// allocatable).
    fn set_limit(
        &self,
        to: PodRef,
        p: &Pod,
        resource: Resource,
        m: Option<u64>,
        state: &JobState,
    ) -> Result<Ask, String> {
        let capacity = self.nodes.get(state.node.index()).map_or((0, 0), |n| (n.cpu_millicores, n.memory_bytes));
        let all = match resource {
            Resource::Cpu => capacity.0,
            Resource::Memory => capacity.1,
        };
        if !state.is_running() {
            return Err("a queued pod has no limits in force to resize; it gets its own when bound".into());
        }
        let patch = pod::resize(p, resource, m.unwrap_or(all).max(1))?;
        Ok(Box::pin(async move {
            let (params, patch) = (PatchParams::default(), Patch::Strategic(patch));
            let PodRef { api, name, limit, gate } = to;
            gate.pass(|| within(limit, api.patch_subresource("resize", &name, &params, &patch))).await?;
            Ok(match resource {
                Resource::Cpu => Effect::Cpu(m),
                Resource::Memory => Effect::Memory(m),
            })
        }))
    }

    /// Bind a queued pod `p` to the one node of its placement, its claims allocated there
    /// first. Its room, readiness and selector were checked before it was sent (`room_for`).
    fn bind_queued(&self, to: PodRef, p: &Pod, placement: &wit::Placement) -> Result<Ask, String> {
        let [target] = placement.nodes.as_slice() else {
            return Err("a pod runs on one node: place it on one (Kubernetes cannot split it)".into());
        };
        let node = self.nodes.get(target.node.index()).ok_or(format!("node {} is not in the cluster", target.node))?;
        let (node_name, node, gpus) = (node.name.clone(), target.node, target.gpus.clone());
        let claims = self.claims_for(&[(p, node, &gpus)])?;
        Ok(Box::pin(async move {
            let PodRef { api, name, limit, gate } = to;
            if let Some(c) = &claims {
                c.write(&gate, limit).await?;
            }
            if let Err(e) = gate.pass(|| within(limit, bind(&api, &name, &node_name))).await {
                if let Some(c) = &claims {
                    c.release(&gate, limit, c.len()).await;
                }
                return Err(e.into());
            }
            Ok(Effect::Started { node, gpus, copy: None })
        }))
    }

    /// The claims to allocate before `pods` (each with its node and the GPUs the policy named
    /// there) are bound; None when none of them gets devices through claims.
    pub(super) fn claims_for(&self, pods: &[(&Pod, NodeId, &[u32])]) -> Result<Option<dra::Claims>, String> {
        if !pods.iter().any(|(p, _, _)| dra::Dra::uses_claims(p)) {
            return Ok(None);
        }
        let mut places = Vec::with_capacity(pods.len());
        for &(_, node, prefer) in pods {
            let n = self.nodes.get(node.index()).ok_or(format!("node {node} is not in the cluster"))?;
            places.push((n, n.dra_places(prefer)));
        }
        let targets: Vec<dra::Target> = pods
            .iter()
            .zip(&places)
            .map(|(&(pod, _, _), (n, prefer))| dra::Target {
                pod,
                node: &n.name,
                labels: &n.labels,
                prefer,
                share: None,
            })
            .collect();
        let writes = self.dra.plan(&targets)?;
        let pods = pods
            .iter()
            .map(|(p, _, _)| (p.metadata.name.clone().unwrap_or_default(), p.metadata.uid.clone().unwrap_or_default()))
            .collect();
        Ok(Some(dra::Claims { api: self.claims_api(), writes, pods }))
    }

    /// Where a preemption (nowhere: it waits again), a migration or a resize takes a running
    /// pod: a Ready node, and another one unless it is resized there.
    fn copy_target(&self, kind: &wit::ActionKind, state: &JobState) -> Result<Option<(NodeId, String)>, String> {
        let to = match kind {
            wit::ActionKind::Migrate(to) => *to,
            wit::ActionKind::SetGpuShare(_) if !state.is_running() => {
                return Err("a queued pod has no GPU to share yet; set its share once it runs".into());
            }
            wit::ActionKind::SetGpuShare(_) => state.node,
            wit::ActionKind::Resize(_) if !state.is_running() => {
                return Err("a queued pod is placed, not resized: place it on the GPUs it should have".into());
            }
            wit::ActionKind::Resize(r) => match r.placement.nodes.as_slice() {
                [entry] => entry.node,
                spread => {
                    return Err(format!(
                        "a pod runs on one node and this resize spreads it over {}: resize it onto GPUs of a single \
                         node (Kubernetes cannot split one pod across nodes)",
                        spread.len()
                    ));
                }
            },
            _ => return Ok(None),
        };
        let stays = matches!(kind, wit::ActionKind::Resize(_) | wit::ActionKind::SetGpuShare(_));
        match self.nodes.get(to.index()) {
            Some(n) if n.ready && (to != state.node || stays) => Ok(Some((to, n.name.clone()))),
            Some(n) if n.ready => Err(format!("the pod already runs on node {}", n.name)),
            Some(n) => Err(format!("node {} is NotReady", n.name)),
            None => Err(format!("node {to} is not in the cluster")),
        }
    }

    /// Re-create a running pod from its checkpoint: a copy that waits unbound (a preemption),
    /// or is bound to another node (a migration), or asks for other GPUs at another batch size
    /// (a resize); the copy is made, the original deleted and waited for until it is gone.
    fn recreate(
        &self,
        to: PodRef,
        p: &Pod,
        action: &wit::Action,
        state: &JobState,
        freeing: &Arc<Freeing>,
    ) -> Result<Ask, String> {
        let m = self.uid_of(action.job).and_then(|uid| self.jobs.get(&uid)).ok_or("the pod is no longer managed")?;
        let resize = match &action.kind {
            wit::ActionKind::Resize(r) => Some(r),
            _ => None,
        };
        let target = self.copy_target(&action.kind, state)?;
        // A capped job's copy on other GPUs keeps its cap, as the world does; one sent back to
        // the queue loses it.
        let share = match &action.kind {
            wit::ActionKind::SetGpuShare(s) => match self.config.gpu_sharing.refuses_a_cap() {
                Some(why) => return Err(why.into()),
                None => Some(s.percent.clamp(1, 100)),
            },
            _ => state.gpu_share_percent.filter(|_| target.is_some()),
        };
        let sets_share = matches!(action.kind, wit::ActionKind::SetGpuShare(_));
        if resize.is_some() {
            pod::resizable(p)?;
        }
        match (&m.job.checkpoint, target.is_none()) {
            (None, true) => {
                return Err("the pod declares no wasmsched.checkpoint folder, so a preemption would lose its \
                            progress; annotate it with the folder it checkpoints to, on a volume that outlives it"
                    .into());
            }
            (None, false) if resize.is_some() || sets_share => {
                return Err(resize_needs_checkpoint(
                    "the pod",
                    "annotate it with the folder it checkpoints to, on a volume that outlives it",
                ));
            }
            (Some(folder), _) => pod::checkpoint_survives(p, folder)?,
            (None, false) => {}
        }
        // A resize gives the job its new GPUs and the batch size in force.
        let gpus = resize.and_then(|r| r.placement.nodes.first()).map(|e| e.gpus.clone());
        if let Some(g) = &gpus
            && dra::Dra::uses_claims(p)
            && g.len() != m.job.gpus_asked as usize
        {
            return Err(format!(
                "the pod's GPUs come through its ResourceClaims ({} device(s)); a resize to {} would need other \
                 claims, which the host does not write: resize it to the same count (another node or batch size), \
                 or give the job claims of the size it should have",
                m.job.gpus_asked,
                g.len()
            ));
        }
        let batch_size = resize.and_then(|r| batch_after_resize(r.batch_size, state.batch_size));
        let changes = pod::Changes {
            scheduler: self.config.scheduler.clone(),
            preempted: target.is_none(),
            service: (state.run_ms, state.gpu_ms),
            arrived_unix_ms: m.job.arrived_unix_ms,
            // A pod whose devices come through claims keeps them: its copy asks for no nvidia.com/gpu.
            gpus: gpus.as_ref().filter(|_| !dra::Dra::uses_claims(p)).map(|g| g.len() as u32),
            batch_size,
            rank: None,
            job_name: None,
        };
        let copy = pod::copy(p, &changes);
        let original_uid = p.metadata.uid.clone().unwrap_or_default();
        let grace = p.spec.as_ref().and_then(|s| s.termination_grace_period_seconds).unwrap_or(30).clamp(0, 600);
        let resized = resize.is_some().then_some(batch_size);
        let (frees, freeing) = (freeing.frees(), freeing.clone());
        let (claims, (held, released)) = (self.claims_api(), self.dra.claim_names(p));
        // A copy bound to a node has its claims allocated there first.
        let dra = dra::Dra::uses_claims(p).then(|| self.dra.clone());
        let copy_node = target.as_ref().and_then(|(n, _)| self.nodes.get(n.index()));
        let copy_labels = copy_node.map(|n| n.labels.clone());
        let prefer = gpus.clone().unwrap_or_else(|| state.gpus.iter().map(|s| s.index).collect());
        let prefer = match copy_node {
            Some(n) => n.dra_places(&prefer),
            None => prefer,
        };
        Ok(Box::pin(async move {
            let PodRef { api, name, limit, gate } = to;
            let (post, delete) = (PostParams::default(), DeleteParams::default());
            let made = gate.pass(|| within(limit, api.create(&post, &copy))).await?;
            let copy = PodCopy::of(made);
            gate.pass(|| within(limit, api.delete(&name, &delete))).await?;
            let patience = limit + Duration::from_secs(grace as u64 + 30);
            gone(&api, &gate, &name, &original_uid, patience).await?;
            // Its devices are free now, not when the controller manager gets to its claims.
            dra::release(&claims, &gate, limit, &held, &original_uid, Some(&released)).await;
            drop(frees);
            let Some((node, node_name)) = target else { return Ok(Effect::Requeued { copy }) };
            freeing.all_done().await;
            if let (Some(dra), Some(labels)) = (&dra, copy_labels) {
                let to = dra::CopyTarget { name: copy.name.clone(), node: node_name.clone(), labels, prefer, share };
                dra.allocate_copy(&api, claims, &gate, limit, &to).await?;
            }
            gate.pass(|| within(limit, bind(&api, &copy.name, &node_name))).await?;
            if let (true, Some(percent)) = (sets_share, share) {
                return Ok(Effect::Shared { copy, percent });
            }
            // A migration's GPUs there are the world's to say when it lands.
            Ok(Effect::Moved { node, gpus: gpus.unwrap_or_default(), copy, resized })
        }))
    }

    /// Put what the action on pod `uid` did into the world and the books.
    fn took_effect(&mut self, uid: &Arc<str>, job: JobId, mut effect: Effect, world: &mut World) {
        if self.group_took_effect(uid, job, &effect, world) {
            return;
        }
        match &mut effect {
            Effect::Cpu(_) | Effect::Memory(_) => self.follow_anew(uid),
            Effect::Done | Effect::StartedSpread { .. } | Effect::MovedSpread { .. } => {}
            Effect::Shared { copy, percent } => {
                let Some(m) = self.hand_over(uid, world) else { return };
                tracing::info!(%job, from = %m.name, to = %copy.name, percent, "GPU share set: re-created from its checkpoint");
                self.resume(copy, m);
            }
            Effect::Started { node, gpus, .. } => {
                let Some(m) = self.jobs.get_mut(uid) else { return };
                (m.job.refused, m.retry) = (None, None);
                tracing::debug!(%job, pod = %m.name, node = %self.nodes[node.index()].name, ?gpus, "bound");
            }
            Effect::Moved { node, gpus, copy, resized } => {
                let Some(mut m) = self.hand_over(uid, world) else { return };
                let to = &self.nodes[node.index()].name;
                match resized {
                    Some(batch_size) => {
                        tracing::info!(%job, from = %m.name, to = %copy.name, node = %to, ?gpus, ?batch_size, "resized: re-created from its checkpoint");
                        m.job.gpus_asked = gpus.len() as u32;
                    }
                    None => {
                        tracing::info!(%job, from = %m.name, to = %copy.name, node = %to, "migrated: re-created from its checkpoint");
                        *gpus = world.gpus_after_migration(job, *node);
                    }
                }
                self.resume(copy, m);
            }
            Effect::Requeued { copy } => {
                let Some(m) = self.hand_over(uid, world) else { return };
                tracing::info!(%job, from = %m.name, to = %copy.name, "preempted: waits unbound with its checkpoint");
                self.resume(copy, m);
            }
            Effect::Removed => {
                if let Some(m) = self.unmanage(uid) {
                    tracing::info!(%job, pod = %m.name, "deleted a queued pod");
                }
            }
        }
        effect.update(job, world);
    }

    /// Manage the pod `copy` as the job's entry `m`: its log is followed from its start once
    /// the original's has ended.
    fn resume(&mut self, copy: &PodCopy, mut m: super::Managed) {
        m.name = copy.name.clone();
        m.job.last_line_ns = Arc::default();
        self.manage(Arc::from(copy.uid.as_str()), m);
    }

    /// Stop following pod `uid`'s log; the next observation follows it again from after the
    /// last line read: cheap insurance after a resize, should the runtime start the container's
    /// log file afresh then (a follower left on the old file would hear nothing more).
    fn follow_anew(&mut self, uid: &Arc<str>) {
        if let Some(f) = self.jobs.get_mut(uid).and_then(|m| m.follower.take()) {
            f.abort();
        }
    }

    /// Pod `uid` is gone and a copy carries its job on: the records read so far are handed
    /// over and the job's entry is taken out. Its follower goes on with the entry, reading the
    /// pod's log to the end: on a loaded cluster the stream brings the last lines a second or
    /// more after the pod is gone, and those lines are the job's too.
    fn hand_over(&mut self, uid: &Arc<str>, world: &mut World) -> Option<super::Managed> {
        self.deliver_progress(world, world.time_ms());
        let mut m = self.unmanage(uid)?;
        m.former = Some(uid.clone());
        (m.last_cpu, m.cpu_measured) = (None, false);
        Some(m)
    }
}
