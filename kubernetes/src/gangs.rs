//! Groups on the cluster: found among the managed pods at each observation, one job of the
//! world once whole, and never left partly bound. A group the host finds with some of its pods
//! bound and not all (a bind that failed midway and could not be taken back, a host stopped
//! between binds, a member lost while the group ran) has its bound pods taken back at once:
//! each is re-created unbound from its spec, the original deleted, as a preemption does.
//! [`moves`] carries out a group's migration, resize or new shape.
//!
//! What a group is — how its pods declare it, its size, how a placement is dealt to its pieces —
//! is [`crate::group`]'s; this module is the backend's work on groups, beside [`crate::actions`].

mod moves;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::reflector::ObjectRef;

use wasmsched_core::bindings::wit;
use wasmsched_core::live::{self, carried, unix_ms};
use wasmsched_core::world::{GpuSlot, JobId, JobState, NodeId, World};
use wasmsched_rules::{GpuBook, NodePlacement};

use crate::actions::{Ask, Effect, Failure, Flight, Freeing, Frees, PodCopy, PodRef, bind, gone};
use crate::follow::Streams;
use crate::group::{self, Gang, GroupKey, Member, Size};
use crate::pod::{self, Stand};
use crate::{By, Kubernetes, Managed, within};

/// One group's pods found at an observation: uid, pod, where it stands.
pub(crate) type Found<'a> = Vec<(&'a str, &'a Pod, Stand)>;

impl Kubernetes {
    /// Take the pods of gang groups out of `live`, by group; a `basic` group's pods stay in
    /// `live` as jobs of their own, and a group whose size is not known yet waits (said once).
    /// Pods for another scheduler stay in `live` (they are not ours to place).
    pub(crate) fn take_groups<'a>(&mut self, live: &mut Found<'a>) -> BTreeMap<GroupKey, (u32, Found<'a>)> {
        self.held.clear();
        // Pods taken back are remembered until they are gone (or seen unbound: never bound).
        let present: HashSet<&str> =
            live.iter().filter(|(_, _, s)| matches!(s, Stand::Bound(_))).map(|(uid, _, _)| *uid).collect();
        self.taken.retain(|uid| present.contains(uid.as_str()));
        let mut groups: BTreeMap<GroupKey, Found<'a>> = BTreeMap::new();
        live.retain(|(uid, p, stand)| {
            let Some(key) = group::declared(p).filter(|_| matches!(stand, Stand::Queued | Stand::Bound(_))) else {
                return true;
            };
            groups.entry(key).or_default().push((uid, p, stand.clone()));
            false
        });
        let mut sized = BTreeMap::new();
        for (key, pods) in groups {
            let known = self.jobs.get(&key.entry()).and_then(|m| m.gang.as_ref()).map(|g| g.size);
            let size = self.podgroups.size(&key, &pods.iter().map(|(_, p, _)| *p).collect::<Vec<_>>());
            match (size, known) {
                (Size::Gang(n), _) => {
                    sized.insert(key, (n, pods));
                }
                (Size::Basic, _) => live.extend(pods),
                (Size::Unknown(_) | Size::Unread, Some(n)) => {
                    sized.insert(key, (n, pods));
                }
                (Size::Unread, None) => {}
                (Size::Unknown(why), None) => {
                    self.held.insert(key.name.clone(), why.clone());
                    let name = key.name.clone();
                    self.logged
                        .once(format!("group-size:{}:{why}", key.name), || format!("pod group {name} waits: {why}"));
                }
            }
        }
        sized
    }

    /// Make the world's group jobs match the groups found: a whole group new to the host
    /// becomes a job (queued, or running where every pod is bound); a group with fewer pods
    /// than its size waits outside the world; a group whose job is queued while some of its
    /// pods are bound, or that lost a pod while it ran, has its bound pods taken back. Groups
    /// an action in flight re-creates are left as they are until it lands.
    pub(crate) fn observe_groups(
        &mut self,
        groups: BTreeMap<GroupKey, (u32, Found<'_>)>,
        moving: &HashSet<Arc<str>>,
        world: &mut World,
        book: &mut GpuBook,
        streams: &mut Streams,
    ) {
        let busy: HashSet<Arc<str>> = self.flight.iter().map(|f| f.uid.clone()).collect();
        for (key, (size, mut pods)) in groups {
            let entry = key.entry();
            if let Some(m) = self.jobs.get_mut(&entry) {
                m.present = true;
            }
            if moving.contains(&entry) || busy.contains(&entry) {
                continue;
            }
            pods.sort_by_cached_key(|(uid, p, _)| (pod::rank(p).unwrap_or(u32::MAX), job_name(p), *uid));
            if pods.iter().any(|(_, _, s)| matches!(s, Stand::Bound(n) if self.node_index(n).is_none())) {
                continue; // bound to a node not yet seen: next tick
            }
            // Pods unchanged since the last observation: nothing to read again but the log.
            let seen = fingerprint(&pods);
            if let Some(g) = self.jobs.get(&entry).and_then(|m| m.gang.as_ref())
                && g.seen == seen
            {
                self.refresh_leader(&entry, &pods, world, streams);
                continue;
            }
            // A group whose pods' GPUs come through claims is not a job until every claim (or
            // its template) is read: its GPU count would be short.
            let unread = pods.iter().find_map(|(_, p, _)| self.dra.unread(p));
            if let (Some(why), false) = (unread, self.jobs.contains_key(&entry)) {
                let name = key.name.clone();
                self.held.insert(name.clone(), format!("its pods' claims are not read yet: {why}"));
                self.logged.once(format!("group-claims-unread:{name}"), || {
                    format!("pod group {name} waits to be managed: a pod's claims are not read yet ({why})")
                });
                continue;
            }
            let members: Vec<Member> = pods.iter().map(|(uid, p, stand)| self.member(uid, p, stand)).collect();
            let running = self.jobs.get(&entry).and_then(|m| world.state(m.job.handle)).map(|s| s.is_running());
            let bound = members.iter().filter(|m| m.node.is_some()).count();
            // A running group lost a pod when one of its pods is gone (or ended); one not seen
            // bound yet is a bind the watch has not brought yet.
            let lost = running == Some(true)
                && self
                    .jobs
                    .get(&entry)
                    .and_then(|m| m.gang.as_ref())
                    .is_some_and(|g| g.members.iter().any(|m| !members.iter().any(|found| found.uid == m.uid)));
            match running {
                Some(true) if lost => {
                    // It lost a pod while it ran: the rest are taken back and it waits whole again.
                    let m = self.unmanage(&entry).expect("just found");
                    world.remove_job(m.job.handle);
                    tracing::warn!(group = %key.name, job = %m.job.handle, bound, size, "a running pod group lost a pod: taking back the rest; it waits until it is whole again");
                    self.take_back(&key, &pods, world);
                }
                Some(true) => {
                    // Its own pods, each where it was bound (the watch may not show a bind yet);
                    // extra pods that came while it ran wait outside it.
                    self.found_again(&entry, seen, members, true);
                    self.refresh_leader(&entry, &pods, world, streams);
                }
                Some(false) if bound > 0 => {
                    tracing::warn!(group = %key.name, bound, size, "a queued pod group has pods bound: taking them back");
                    self.take_back(&key, &pods, world);
                }
                Some(false) if members.len() < size as usize => {
                    let m = self.unmanage(&entry).expect("just found");
                    world.remove_job(m.job.handle);
                    tracing::info!(group = %key.name, job = %m.job.handle, "a queued pod group lost a pod; it waits until it is whole again");
                    self.hold_short(&key, members.len(), size);
                }
                Some(false) => {
                    self.found_again(&entry, seen, members, false);
                    self.refresh_leader(&entry, &pods, world, streams);
                }
                None if members.len() < size as usize => self.hold_short(&key, members.len(), size),
                None if bound > 0 && bound < members.len() => {
                    tracing::warn!(group = %key.name, bound, size, "found a pod group partly bound: taking its bound pods back");
                    self.take_back(&key, &pods, world);
                }
                None => self.adopt_group(key, size, members, &pods, (world, book, streams)),
            }
        }
    }

    /// Managed group `entry` as found again: its pods' fingerprint `seen`, and `members` carried
    /// over onto the members it had ([`carried_over`]); with `own_only`, only the pods it had.
    fn found_again(&mut self, entry: &Arc<str>, seen: u64, members: Vec<Member>, own_only: bool) {
        let m = self.jobs.get_mut(entry).expect("just found");
        let g = m.gang.as_mut().expect("a group's entry");
        g.seen = seen;
        let found = members.into_iter().filter(|m| !own_only || g.members.iter().any(|o| o.uid == m.uid)).collect();
        g.members = carried_over(&g.members, found);
    }

    /// Group `key` has `have` of its `size` pods: it is held outside the queue until it is whole.
    fn hold_short(&mut self, key: &GroupKey, have: usize, size: u32) {
        let name = key.name.clone();
        self.held.insert(name.clone(), format!("{have} of {size} pods exist"));
        self.logged.once(format!("group-short:{}:{have}", key.name), || {
            format!("pod group {name} waits: {have} of {size} pods exist")
        });
    }

    /// A group's pod as a member.
    fn member(&self, uid: &str, p: &Pod, stand: &Stand) -> Member {
        let node = match stand {
            Stand::Bound(n) => self.node_index(n).map(|i| NodeId(i as u32)),
            _ => None,
        };
        Member {
            uid: Arc::from(uid),
            name: p.metadata.name.clone().unwrap_or_default(),
            job_name: job_name(p).to_string(),
            requests: pod::requests(p),
            selector: Arc::new(pod::node_selector(p)),
            gpus: self.gpus_asked(p),
            node,
            last_cpu: None,
            used: (0, 0),
        }
    }

    /// The group's entry follows its first pod (its leader): its name, its limits, its log.
    fn refresh_leader(&mut self, entry: &Arc<str>, pods: &Found<'_>, world: &mut World, streams: &mut Streams) {
        let Some(&(_, leader, _)) = pods.first() else { return };
        let Some(m) = self.jobs.get_mut(entry) else { return };
        let name = leader.metadata.name.clone().unwrap_or_default();
        if m.name != name {
            // A new leader pod (the group was re-created): its log is read from its start.
            m.name = name;
            m.job.last_line_ns = Arc::default();
            m.annotated = None;
            m.version = None;
        }
        m.requests = pod::requests(leader);
        let (handle, node) = (m.job.handle, m.gang.as_ref().and_then(|g| g.members.first()?.node));
        let version = leader.metadata.resource_version.clone();
        if m.version != version {
            self.read_limits(handle, leader, node.map(|n| n.index()), world);
            if let Some(m) = self.jobs.get_mut(entry) {
                m.version = version;
            }
        }
        self.read_progress(entry, leader, streams);
    }

    /// Start managing a whole group as one job: running when every pod is bound, else queued.
    fn adopt_group(
        &mut self,
        key: GroupKey,
        size: u32,
        members: Vec<Member>,
        pods: &Found<'_>,
        (world, book, streams): (&mut World, &mut GpuBook, &mut Streams),
    ) {
        let per = members[0].gpus;
        if let Some(odd) = members.iter().find(|m| m.gpus != per) {
            let (name, pod, gpus) = (key.name.clone(), odd.name.clone(), odd.gpus);
            self.held.insert(
                name.clone(),
                format!("pod {pod} asks for {gpus} GPU(s), the first for {per}: a group's pods are equal pieces"),
            );
            self.logged.once(format!("group-uneven:{}", key.name), || {
                format!(
                    "pod group {name} cannot be placed: its pods are its equal pieces, and pod {pod} asks for {gpus} \
                     GPU(s) where the first asks for {per}; give every pod of the group the same nvidia.com/gpu"
                )
            });
            return;
        }
        let leader = pods[0].1;
        let origin = self.clock.origin_unix_ms();
        let now = unix_ms();
        let mut declared = pod::declared(leader);
        let created = |p: &Pod| {
            let at = p.metadata.creation_timestamp.as_ref().and_then(|t| carried::unix_ms_of(&t.0.to_string()));
            carried::arrived_unix_ms(&pod::keys(p), at.unwrap_or(now))
        };
        let arrived_unix_ms = pods.iter().map(|(_, p, _)| created(p)).min().unwrap_or(now);
        let n = members.len() as u32;
        let spec = &mut declared.spec;
        spec.name = key.name.clone();
        spec.arrival_ms = arrived_unix_ms.saturating_sub(origin);
        spec.gpus = per.saturating_mul(n);
        spec.replicas = n;
        // An elastic group declares its GPU counts in all (the leader's wasmsched.gpu-counts).
        // Each piece requests what the most demanding pod does.
        let most = members.iter().fold((0, 0), |(c, m), p| (p.requests.0.max(c), p.requests.1.max(m)));
        spec.requests = wasmsched_core::bindings::wit::Resources { cpu_millicores: most.0, memory_bytes: most.1 };
        let running = members.iter().all(|m| m.node.is_some());
        let handle = if running {
            world.add_job(declared.spec.clone(), members[0].node.unwrap_or_default())
        } else {
            world.enqueue_job(declared.spec.clone())
        };
        let keys = pod::keys(leader);
        if running {
            let gpus: Vec<GpuSlot> = members
                .iter()
                .flat_map(|m| crate::adopt::free_slots(book, m.node.unwrap_or_default(), m.gpus, handle))
                .collect();
            let started = leader
                .status
                .as_ref()
                .and_then(|s| s.start_time.as_ref())
                .and_then(|t| carried::unix_ms_of(&t.0.to_string()));
            let (run_ms, gpu_ms) = carried::attained(&keys, started, now, gpus.len());
            if let Some(state) = world.state_mut(handle) {
                state.gpus = gpus;
                (state.run_ms, state.gpu_ms) = (run_ms, gpu_ms);
            }
        } else if let Some(state) = world.state_mut(handle) {
            state.queued = Some(carried::wait_reason(&keys));
            let (run_ms, gpu_ms) = carried::attained(&keys, None, now, 0);
            (state.run_ms, state.gpu_ms) = (run_ms, gpu_ms);
        }
        let entry = key.entry();
        let seen = fingerprint(pods);
        let (name, requests, selector) = (members[0].name.clone(), members[0].requests, members[0].selector.clone());
        let m = Managed {
            gang: Some(Gang { key: key.clone(), size, members, seen }),
            ..Managed::new(live::Job::new(handle, &declared, arrived_unix_ms), name, requests, selector)
        };
        tracing::debug!(group = %key.name, job = %handle, pods = n, gpus = per * n, running, "managing a pod group as one job");
        self.manage(entry.clone(), m);
        self.refresh_leader(&entry, pods, world, streams);
    }

    /// Take back the bound pods of group `key` (of `pods`): each is re-created unbound from its
    /// spec, carrying its job's arrival, and the original deleted. Sent as the backend's, and
    /// landed at a later observation.
    fn take_back(&mut self, key: &GroupKey, pods: &Found<'_>, world: &mut World) {
        // A pod taken back already (its deletion not yet in the watch's view) is not copied twice.
        let bound: Vec<Pod> = pods
            .iter()
            .filter(|(uid, _, s)| matches!(s, Stand::Bound(_)) && !self.taken.contains(*uid))
            .map(|(_, p, _)| (*p).clone())
            .collect();
        if bound.is_empty() {
            return;
        }
        self.taken.extend(bound.iter().filter_map(|p| p.metadata.uid.clone()));
        let uids = bound.iter().filter_map(|p| p.metadata.uid.as_deref().map(Arc::from)).collect();
        let job = self.jobs.get(&key.entry()).map_or(JobId(u32::MAX), |m| m.job.handle);
        let service = world.state(job).map_or((0, 0), |s| (s.run_ms, s.gpu_ms));
        let task = self.take_back_task(bound, false, service, unix_ms(), None);
        self.flight.push(Flight::group(job, key.entry(), uids, By::Backend, self.rt.spawn(task)));
    }

    /// How this host takes pods back ([`TakeBack`]).
    pub(super) fn taker(&self) -> TakeBack {
        TakeBack {
            scheduler: self.config.scheduler.clone(),
            api: self.pods_api(),
            limit: self.config.timeout,
            gate: self.gate.clone(),
            dra: (self.dra.clone(), self.claims_api()),
        }
    }

    /// [`TakeBack::run`] with this host's settings.
    fn take_back_task(
        &self,
        pods: Vec<Pod>,
        preempted: bool,
        service: (u64, u64),
        arrived_unix_ms: u64,
        frees: Option<Frees>,
    ) -> impl Future<Output = Result<Effect, Failure>> + Send + 'static + use<> {
        self.taker().run(pods, preempted, service, arrived_unix_ms, frees)
    }

    /// Send a group's placement, dealt into `pieces` (each pod's node and GPUs): every pod is
    /// bound at once, once `first`'s write lock is free (the decision's preemptions and stops
    /// are done); if any bind fails, the pods bound are taken back at once and the group
    /// waits again.
    pub(crate) fn send_group_place(
        &mut self,
        action: &wit::Action,
        pieces: Vec<NodePlacement>,
        world: &World,
        by: By,
        first: &Arc<tokio::sync::RwLock<()>>,
    ) -> Result<Flight, String> {
        let entry = self.uid_of(action.job).ok_or("the group is no longer managed")?;
        let g = self.jobs.get(&entry).and_then(|m| m.gang.clone()).ok_or("the group is no longer managed")?;
        let state = world.state(action.job).ok_or("the group is no longer managed")?;
        if state.is_running() {
            return Err("the group already runs; preempt it first".into());
        }
        let mut binds = Vec::with_capacity(pieces.len());
        for (member, &NodePlacement { node, .. }) in g.members.iter().zip(&pieces) {
            let p = self.pods.get(&ObjectRef::new(&member.name).within(&self.config.namespace));
            let p = p.ok_or_else(|| format!("pod {} of the group is gone", member.name))?;
            let n = self.nodes.get(node.index()).ok_or(format!("node {node} is not in the cluster"))?;
            if !n.ready {
                return Err(format!("node {} is NotReady", n.name));
            }
            binds.push((p, n.name.clone()));
        }
        // Every pod's claims allocated before any pod is bound; none, if one cannot be.
        let pods: Vec<(&Pod, NodeId, &[u32])> =
            binds.iter().zip(&pieces).map(|((p, _), piece)| (&**p, piece.node, piece.gpus.as_slice())).collect();
        let claims = self.claims_for(&pods)?;
        let (api, limit, gate) = (self.pods_api(), self.config.timeout, self.gate.clone());
        let node = pieces[0].node;
        let slots = GpuSlot::of(&pieces);
        // For whichever pods turn out bound if another's bind fails.
        let (service, arrived) =
            ((state.run_ms, state.gpu_ms), self.jobs.get(&entry).map_or(0, |m| m.job.arrived_unix_ms));
        let taker = self.taker();
        let lock = first.clone();
        let effect = Effect::StartedSpread { node, gpus: slots.clone() };
        let task = self.rt.spawn(async move {
            drop(lock.write().await);
            if let Some(c) = &claims {
                c.write(&gate, limit).await?;
            }
            let asks = binds.iter().map(|(p, node)| {
                let (api, gate, name) = (api.clone(), gate.clone(), p.metadata.name.clone().unwrap_or_default());
                async move { gate.pass(|| within(limit, bind(&api, &name, node))).await }
            });
            let results = futures_util::future::join_all(asks).await;
            let failed: Vec<(usize, kube::Error)> =
                results.into_iter().enumerate().filter_map(|(i, r)| r.err().map(|e| (i, e))).collect();
            if failed.is_empty() {
                return Ok(effect);
            }
            let bound: Vec<usize> = (0..binds.len()).filter(|i| failed.iter().all(|(f, _)| f != i)).collect();
            let (i, e) = failed.into_iter().next().expect("one failed");
            let why = match Failure::from(e) {
                Failure::Refused(why) | Failure::Declined(why) | Failure::Unreachable(why) => why,
            };
            let mut taken = 0;
            for &k in &bound {
                let back = taker.clone().run(vec![(*binds[k].0).clone()], false, service, arrived, None);
                taken += usize::from(back.await.is_ok());
            }
            if let Some(c) = &claims {
                c.release(&gate, limit, c.len()).await;
            }
            let name = binds[i].0.metadata.name.clone().unwrap_or_default();
            Err(Failure::Refused(format!(
                "pod {name} could not be bound ({why}); {taken} of the group's {} pods bound were taken back, and \
                 the group waits whole",
                bound.len()
            )))
        });
        let target = Some((node, slots));
        let mut flight = Flight::new(action.job, entry, false, by, target, None, task);
        flight.spread = Some(pieces.iter().map(|p| p.node).collect());
        Ok(flight)
    }

    /// The request that puts one action into force on a group (`p` its leader pod): a
    /// preemption re-creates every pod unbound, a stop deletes them all, a delivery runs in the
    /// leader; the rest are refused, saying why.
    pub(crate) fn act_group(
        &self,
        g: &Gang,
        p: &Pod,
        action: &wit::Action,
        state: &JobState,
        freeing: &Arc<Freeing>,
    ) -> Ask {
        let pods: Vec<Pod> = g
            .members
            .iter()
            .filter_map(|m| self.pods.get(&ObjectRef::new(&m.name).within(&self.config.namespace)))
            .map(|p| (*p).clone())
            .collect();
        let declined = |why: String| -> Ask { Box::pin(async move { Err(Failure::Declined(why)) }) };
        match &action.kind {
            wit::ActionKind::Preempt => {
                if !state.is_running() {
                    return declined("the group is queued: only a place or a stop acts on it".into());
                }
                let m = self.uid_of(action.job).and_then(|u| self.jobs.get(&u));
                let Some(folder) = m.and_then(|m| m.job.checkpoint.clone()) else {
                    return declined(
                        "the group's pods declare no wasmsched.checkpoint folder, so a preemption would lose its \
                         progress; annotate them with the folder they checkpoint to, on a volume that outlives them"
                            .into(),
                    );
                };
                if let Some(why) = pods.iter().find_map(|p| pod::checkpoint_survives(p, &folder).err()) {
                    return declined(why);
                }
                let arrived = m.map_or(0, |m| m.job.arrived_unix_ms);
                let task =
                    self.take_back_task(pods, true, (state.run_ms, state.gpu_ms), arrived, Some(freeing.frees()));
                Box::pin(task)
            }
            wit::ActionKind::Stop => {
                let asks: Vec<Ask> = pods
                    .iter()
                    .map(|p| {
                        let name = p.metadata.name.clone().unwrap_or_default();
                        let to =
                            PodRef { api: self.pods_api(), name, limit: self.config.timeout, gate: self.gate.clone() };
                        crate::actions::delete(to, state, freeing)
                    })
                    .collect();
                Box::pin(async move {
                    let mut last = Ok(Effect::Done);
                    for done in futures_util::future::join_all(asks).await {
                        match done {
                            Err(e) => return Err(e),
                            Ok(effect) => last = Ok(effect),
                        }
                    }
                    last
                })
            }
            wit::ActionKind::Deliver => self.act(p, action, state, freeing),
            wit::ActionKind::Migrate(_) | wit::ActionKind::Resize(_) => {
                declined("a group's migration or resize is dealt to its pods first".into())
            }
            wit::ActionKind::SetCpu(_) | wit::ActionKind::SetMemory(_) => declined(
                "a pod group's pods keep the limits they declare: set-cpu and set-memory act on pods of their own"
                    .into(),
            ),
            wit::ActionKind::SetGpuShare(_) => declined(
                "Kubernetes gives a pod whole GPUs through the device plugin; it cannot cap a pod's GPU share".into(),
            ),
            wit::ActionKind::Place(_) => declined("a group's placement is dealt to its pods first".into()),
        }
    }

    /// Set the nodes of group `entry`'s pods, piece by piece (None: unbound).
    pub(crate) fn set_spread(&mut self, entry: &Arc<str>, spread: Option<&[NodeId]>) {
        let Some(g) = self.jobs.get_mut(entry).and_then(|m| m.gang.as_mut()) else { return };
        for (i, m) in g.members.iter_mut().enumerate() {
            m.node = spread.and_then(|s| s.get(i).copied());
        }
    }

    /// What an action on group `entry` did, into the world and the books; false when `entry`
    /// is not a group's.
    pub(crate) fn group_took_effect(
        &mut self,
        entry: &Arc<str>,
        job: JobId,
        effect: &Effect,
        world: &mut World,
    ) -> bool {
        let Some(m) = self.jobs.get_mut(entry).filter(|m| m.gang.is_some()) else {
            return entry.starts_with("group/");
        };
        match effect {
            Effect::StartedSpread { .. } => {
                (m.job.refused, m.retry) = (None, None);
                tracing::debug!(%job, group = %m.gang.as_ref().map_or("", |g| &g.key.name), "bound every pod of the group");
            }
            Effect::Requeued { .. } => {
                tracing::info!(%job, group = %m.gang.as_ref().map_or("", |g| &g.key.name), "preempted: every pod of the group waits unbound with its checkpoint");
                self.set_spread(entry, None);
            }
            Effect::MovedSpread { copies, resized, gpus, .. } => {
                // The copies are the group's pods now, piece by piece. The old leader's log is
                // read to its end (its last epochs are the job's too), then the new leader's
                // from its start.
                m.job.last_line_ns = Arc::default();
                if let Some(copy) = copies.first() {
                    m.name = copy.name.clone();
                }
                let (name, before) = m.gang.as_ref().map_or_else(Default::default, |g| (g.key.name.clone(), g.size));
                self.reshaped(entry, copies, gpus.len());
                let what = if resized.is_some() { "resized" } else { "moved" };
                tracing::info!(%job, group = %name, pods = copies.len(), before, gpus = gpus.len(), "{what}: every pod of the group re-created from its checkpoint");
            }
            Effect::Removed => {
                self.unmanage(entry);
            }
            _ => {}
        }
        effect.update(job, world);
        true
    }
}

/// What taking a group's pods back needs: our scheduler's name and the pods' API.
#[derive(Clone)]
pub(super) struct TakeBack {
    scheduler: String,
    api: kube::Api<Pod>,
    limit: Duration,
    gate: crate::gate::Gate,
    /// The DRA objects and the claims' API: a pod taken back releases its claims once gone.
    dra: (Arc<crate::dra::Dra>, kube::Api<k8s_openapi::api::resource::v1::ResourceClaim>),
}

impl TakeBack {
    /// Re-create `pods` unbound, each from its own spec (waiting as preempted when
    /// `preempted`, carrying the job's attained `service` and its arrival), delete the
    /// originals and wait until they are gone; all at once. The leader's copy is the effect's.
    pub(super) fn run(
        self,
        pods: Vec<Pod>,
        preempted: bool,
        service: (u64, u64),
        arrived_unix_ms: u64,
        frees: Option<Frees>,
    ) -> impl Future<Output = Result<Effect, Failure>> + Send + 'static {
        let changes = pod::Changes {
            scheduler: self.scheduler.clone(),
            preempted,
            service,
            arrived_unix_ms,
            gpus: None,
            batch_size: None,
            rank: None,
            job_name: None,
        };
        let copied = self.copy_all(&pods, &changes);
        async move {
            let copies = copied.await;
            drop(frees);
            Ok(match copies?.into_iter().next() {
                Some(made) if preempted => Effect::Requeued { copy: PodCopy::of(made) },
                _ => Effect::Done,
            })
        }
    }
}

impl TakeBack {
    /// Copy each of `pods` from its own spec with `changes`, delete the original and wait until
    /// it is gone ([`Self::replace`]).
    pub(super) fn copy_all(
        &self,
        pods: &[Pod],
        changes: &pod::Changes,
    ) -> impl Future<Output = Result<Vec<Pod>, Failure>> + Send + 'static + use<> {
        self.replace(pods, pods.iter().map(|p| pod::copy(p, changes)).collect())
    }

    /// Create `copies`, then delete `originals` and wait until they are gone; all at once. If
    /// a copy cannot be created, the copies made are deleted and the originals kept. The
    /// copies as made, in order.
    pub(super) fn replace(
        &self,
        originals: &[Pod],
        copies: Vec<Pod>,
    ) -> impl Future<Output = Result<Vec<Pod>, Failure>> + Send + 'static + use<> {
        let to = |name: String| PodRef { api: self.api.clone(), name, limit: self.limit, gate: self.gate.clone() };
        let creates: Vec<_> = copies
            .into_iter()
            .map(|copy| {
                let PodRef { api, limit, gate, .. } = to(String::new());
                async move {
                    let post = PostParams::default();
                    gate.pass(|| within(limit, api.create(&post, &copy))).await
                }
            })
            .collect();
        let deletes: Vec<_> = originals
            .iter()
            .map(|p| {
                let (name, uid) =
                    (p.metadata.name.clone().unwrap_or_default(), p.metadata.uid.clone().unwrap_or_default());
                let grace =
                    p.spec.as_ref().and_then(|s| s.termination_grace_period_seconds).unwrap_or(30).clamp(0, 600);
                let PodRef { api, name, limit, gate } = to(name);
                // Its devices are free once it is gone, not when the controller manager gets to
                // its claims.
                let claims = self.dra.1.clone();
                let (held, released) = self.dra.0.claim_names(p);
                async move {
                    let delete = DeleteParams::default();
                    gate.pass(|| within(limit, api.delete(&name, &delete))).await?;
                    gone(&api, &gate, &name, &uid, limit + Duration::from_secs(grace as u64 + 30)).await?;
                    if !held.is_empty() {
                        crate::dra::release(&claims, &gate, limit, &held, &uid, Some(&released)).await;
                    }
                    Ok::<(), Failure>(())
                }
            })
            .collect();
        let undo = to(String::new());
        async move {
            let made: Vec<Result<Pod, kube::Error>> = futures_util::future::join_all(creates).await;
            if let Some(i) = made.iter().position(Result::is_err) {
                let PodRef { api, limit, gate, .. } = undo;
                let names: Vec<String> = made.iter().flatten().filter_map(|p| p.metadata.name.clone()).collect();
                let delete = DeleteParams::default();
                for name in names {
                    let _ = gate.pass(|| within(limit, api.delete(&name, &delete))).await;
                }
                let e = made.into_iter().nth(i).and_then(Result::err).expect("one failed");
                return Err(Failure::from(e));
            }
            let made: Vec<Pod> = made.into_iter().flatten().collect();
            for done in futures_util::future::join_all(deletes).await {
                done?;
            }
            Ok(made)
        }
    }
}

/// What the pods found say, in one number: their uids and versions, in order. The same number
/// at the next observation: nothing changed.
fn fingerprint(pods: &Found<'_>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for (uid, p, _) in pods {
        (uid, p.metadata.resource_version.as_deref()).hash(&mut h);
    }
    h.finish()
}

/// `members` found now, with what was measured of each pod before (by uid).
fn carried_over(before: &[Member], mut members: Vec<Member>) -> Vec<Member> {
    for m in &mut members {
        if let Some(b) = before.iter().find(|b| b.uid == m.uid) {
            (m.last_cpu, m.used) = (b.last_cpu, b.used);
            // Bound by the host a moment ago, not yet in the watch's view.
            m.node = m.node.or(b.node);
        }
    }
    members
}

/// A pod's job name: the one its copies keep, else its own.
pub(crate) fn job_name(p: &Pod) -> &str {
    p.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(pod::JOB_NAME))
        .or(p.metadata.name.as_ref())
        .map_or("", String::as_str)
}
