//! One observation, in order: the lead (with `[backend.election]`), the actions in flight that
//! have landed, the nodes ([`super::nodes`]), the managed pods made into the world's jobs
//! (new ones adopted: [`super::adopt`]; half-made copies settled), their progress
//! ([`super::follow`]) and use ([`super::usage`]), the jobs whose pods are gone, and the default
//! placement.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::DeleteParams;

use super::adopt::free_slots;
use super::follow::Streams;
use super::pod::{self, Stand};
use super::{Kubernetes, lease, within};
use wasmsched_core::live::carried::{REPLACES, batch_in_force};
use wasmsched_core::live::progress;
use wasmsched_core::world::{JobId, NodeId, World};

impl Kubernetes {
    pub(super) fn observe_at(&mut self, world: &mut World, until_ms: u64) {
        // The backend's clock is the wall clock: wait until `until_ms` is due (at once the
        // first time).
        if self.clock.wait_for(until_ms) {
            // Give the first lists a moment, so the first tick sees the cluster.
            let (pods, nodes, limit) = (self.pods.clone(), self.node_store.clone(), self.config.timeout);
            let bound = self.bound.clone();
            self.rt.block_on(async move {
                let ready = async move {
                    let _ = pods.wait_until_ready().await;
                    let _ = nodes.wait_until_ready().await;
                    for b in bound {
                        let _ = b.wait_until_ready().await;
                    }
                };
                let _ = tokio::time::timeout(limit, ready).await;
            });
        }
        world.accrue_service(until_ms.saturating_sub(world.time_ms()));
        let acting = self.leads();
        if self.acted && !acting {
            // The lead is lost: what this replica still had in flight goes no further.
            self.abort_flights();
        }
        self.acted = acting;
        self.land_flights(world);
        self.check_health();
        let (pods_listed, nodes_listed) = self.listed();
        // A replica campaigns once its world is warm: a leader never decides on a cold one.
        if pods_listed
            && nodes_listed
            && let (Some(config), Some((api, identity))) = (&self.config.election, self.candidate.take())
        {
            let election = lease::Election::start(&self.rt, api, config, identity, self.config.timeout);
            // The first tick comes at once: it says whether this replica leads, not "not yet".
            election.first_look(&self.rt, self.config.timeout);
            self.election = Some(election);
        }
        if nodes_listed {
            self.observe_nodes(world);
        }
        let mut gone = Vec::new();
        if pods_listed {
            gone = self.discover(world);
        }
        let followers: Vec<_> = gone.iter().filter_map(|uid| self.jobs.get_mut(uid)?.follower.take()).collect();
        self.rt.block_on(async {
            for f in followers {
                let _ = tokio::time::timeout(Duration::from_millis(300), f).await;
            }
        });
        self.measure(world);
        self.deliver_progress(world, until_ms);
        for uid in gone {
            if let Some(m) = self.unmanage(&uid) {
                tracing::info!(job = %m.job.handle, pod = %m.name, "pod ended or was deleted");
                world.remove_job(m.job.handle);
            }
        }
        let rooms = self.rooms(world);
        world.set_room(Some(
            rooms
                .iter()
                .map(|r| wasmsched_core::world::Room {
                    cpu: r.cpu,
                    memory: r.memory,
                    pods: u32::try_from(r.pods).unwrap_or(u32::MAX),
                })
                .collect(),
        ));
        world.set_time_ms(until_ms);
        if acting && self.placer == wasmsched_core::backend::Placer::Backend && self.apiserver_up() {
            self.place_queued(world, None);
        }
    }

    /// Log the apiserver going away, once, and coming back.
    fn check_health(&mut self) {
        let down = self.health.lock().expect("health lock").down.clone();
        match down {
            Some((_, why)) => {
                let url = self.kube_config.cluster_url.to_string();
                self.logged.once("apiserver-down".into(), || {
                    format!(
                        "the Kubernetes apiserver {url} does not answer ({why}); jobs keep their last state, \
                         retrying with backoff"
                    )
                });
            }
            None => {
                if self.logged.clear("apiserver-down") {
                    tracing::info!(apiserver = %self.kube_config.cluster_url, "the Kubernetes apiserver answers again");
                }
            }
        }
    }

    /// Make the world's jobs match the managed pods; the uids of jobs whose pods are gone. A
    /// pod that a preemption or a migration in flight re-creates is left as it is until that
    /// lands: its original's absence and its copy's presence are the host's own doing.
    fn discover(&mut self, world: &mut World) -> Vec<Arc<str>> {
        let pods = self.pods.state();
        let moving: HashSet<Arc<str>> = self.flight.iter().flat_map(|f| f.moving()).cloned().collect();
        let mut live: Vec<(&str, &Pod, Stand)> = pods
            .iter()
            .filter_map(|p| {
                let stand = pod::stand(p, &self.config.scheduler);
                (stand != Stand::Ended).then_some((p.metadata.uid.as_deref()?, p.as_ref(), stand))
            })
            .collect();
        // In the order they were made, so that the jobs adopted at once get their handles in
        // arrival order (pods made before the host started all arrive at its start).
        live.sort_by(|(_, a, _), (_, b, _)| {
            let (a, b) = (&a.metadata, &b.metadata);
            a.creation_timestamp.cmp(&b.creation_timestamp).then_with(|| a.name.cmp(&b.name))
        });
        // A copy half-made is the leader's to settle: it may be making it now.
        let dropped = if self.acted { self.settle_copies(&live, &moving) } else { HashSet::new() };
        live.retain(|(uid, _, _)| !dropped.contains(*uid));
        let mut book = world.gpu_book();
        let mut streams = Streams::new(self.config.max_log_streams, self.jobs.values());
        // Marked as their pods are found; the rest are gone.
        for (uid, m) in self.jobs.iter_mut() {
            m.present = moving.contains(uid);
        }
        let groups = self.take_groups(&mut live);
        self.observe_groups(groups, &moving, world, &mut book, &mut streams);
        for (uid, p, stand) in live {
            if dropped.contains(uid) || replaces(p).is_some_and(|original| moving.contains(original)) {
                continue;
            }
            let node = match stand {
                Stand::Bound(node) => Some(node),
                Stand::Queued => None,
                Stand::Elsewhere(scheduler) => {
                    self.waits_elsewhere(uid, p, &scheduler);
                    continue;
                }
                Stand::Ended => continue,
            };
            let node_index = node.as_deref().and_then(|n| self.node_index(n));
            if node.is_some() && node_index.is_none() {
                if let Some(m) = self.jobs.get_mut(uid) {
                    m.present = true;
                }
                continue; // bound to a node not yet seen: next tick
            }
            let Some(m) = self.jobs.get_mut(uid) else {
                self.adopt(uid, p, node_index, world, &mut book, &mut streams);
                continue;
            };
            m.present = true;
            let handle = m.job.handle;
            if let Some(i) = node_index
                && world.state(handle).is_some_and(|s| !s.is_running())
            {
                let gpus = free_slots(&mut book, NodeId(i as u32), m.job.gpus_asked, handle);
                world.start_job(handle, NodeId(i as u32), gpus);
                tracing::debug!(job = %handle, pod = %m.name, node = %self.nodes[i].name, "a queued pod was bound");
            }
            // A pod unchanged since the last observation has nothing new to read but its log.
            let version = p.metadata.resource_version.as_deref();
            let unchanged = version.is_some() && m.version.as_deref() == version;
            if unchanged && !pod::started(p) {
                continue;
            }
            let uid = self.jobs.get_key_value(uid).expect("just read").0.clone();
            if !unchanged {
                self.read_limits(handle, p, node_index, world);
            }
            self.read_progress(&uid, p, &mut streams);
            if !unchanged && let Some(m) = self.jobs.get_mut(&uid) {
                m.version = version.map(str::to_string);
            }
        }
        if let Some(waiting) = streams.waiting() {
            self.streams_full(waiting);
        }
        self.jobs.iter().filter(|(_, m)| !m.present).map(|(uid, _)| uid.clone()).collect()
    }

    /// Pod `p` (uid `uid`) waits for `scheduler`: said once.
    fn waits_elsewhere(&mut self, uid: &str, p: &Pod, scheduler: &str) {
        let name = p.metadata.name.clone().unwrap_or_default();
        let ours = &self.config.scheduler;
        if self.logged.first(format!("elsewhere:{uid}")) {
            tracing::info!(pod = %name, scheduler, "pod waits for another scheduler; it becomes a job once bound (give it schedulerName {ours} to queue it here)");
        }
    }

    /// `waiting` running pods are not followed for their progress: said once.
    fn streams_full(&mut self, waiting: usize) {
        let most = self.config.max_log_streams;
        self.logged.once("streams-full".into(), || {
            format!(
                "{waiting} running pods are not followed for progress: max-log-streams ({most}) logs are followed \
                 already; have the jobs report through their wasmsched.progress annotation (docs/kubernetes.md), \
                 or raise [backend] max-log-streams"
            )
        });
    }

    /// The limits in the pod's spec, in the world (a lifted limit is the node's allocatable),
    /// and the batch size in force its `wasmsched.batch-size-in-force` annotation carries (a
    /// resize writes it; without it the job's is the least of its declared range).
    pub(super) fn read_limits(&self, handle: JobId, p: &Pod, node: Option<usize>, world: &mut World) {
        let (cpu, memory) = pod::limits(p);
        let (all_cpu, all_memory) = node.map_or((u64::MAX, u64::MAX), |i| {
            let n = &self.nodes[i];
            (n.cpu_millicores, n.memory_bytes)
        });
        let batch = batch_in_force(&pod::keys(p));
        if let Some(state) = world.state_mut(handle) {
            state.cpu_limit_millicores = cpu.filter(|&m| m < all_cpu);
            state.memory_limit_bytes = memory.filter(|&b| b < all_memory);
            state.batch_size = batch.unwrap_or(state.batch_size);
        }
    }

    /// Delete the copies among `live` that a stopped host left half-made: a copy (it names the
    /// pod it replaces) that is not ours and whose original still runs, unless the original is
    /// `moving` (its copy is being made now). Returns their uids.
    fn settle_copies(&mut self, live: &[(&str, &Pod, Stand)], moving: &HashSet<Arc<str>>) -> HashSet<String> {
        let mut dropped = HashSet::new();
        let copies: Vec<_> = live
            .iter()
            .filter(|(uid, p, stand)| *stand == Stand::Queued && replaces(p).is_some() && !self.jobs.contains_key(*uid))
            .collect();
        if copies.is_empty() {
            return dropped;
        }
        let uids: HashSet<&str> = live.iter().map(|(uid, _, _)| *uid).collect();
        for (uid, p, _) in copies {
            let original = replaces(p).filter(|o| uids.contains(o) && !moving.contains(*o));
            let Some(original) = original else { continue };
            let name = p.metadata.name.clone().unwrap_or_default();
            let (api, limit) = (self.pods_api(), self.config.timeout);
            match self.rt.block_on(within(limit, api.delete(&name, &DeleteParams::default()))) {
                Ok(_) => {
                    tracing::info!(copy = %name, original = %original, "deleted an unfinished copy; its original still runs");
                    dropped.insert(uid.to_string());
                }
                Err(e) => self
                    .logged
                    .once(format!("settle:{uid}"), || format!("cannot delete the unfinished copy {name}: {e}")),
            }
        }
        dropped
    }

    /// Hand the lines the followers read to the world, in order.
    pub(super) fn deliver_progress(&mut self, world: &mut World, until_ms: u64) {
        let origin = self.clock.origin_unix_ms();
        for incoming in self.inbox.take() {
            let key = if self.jobs.contains_key(&incoming.key) {
                incoming.key.clone()
            } else {
                // An original pod's last lines, read after its copy took its job over.
                match self.jobs.iter().find(|(_, m)| m.former.as_ref() == Some(&incoming.key)) {
                    Some((uid, _)) => uid.clone(),
                    None => continue,
                }
            };
            let m = self.jobs.get_mut(&key).expect("just found");
            let fallback = || m.name.clone();
            if let Some((key, message)) =
                progress::hand(world, m.job.handle, &mut m.job.epochs, incoming, (origin, until_ms), fallback)
            {
                self.logged.once(key, || message);
            }
        }
    }
}

/// The uid of the pod that pod `p` is a copy of, if it is one.
fn replaces(p: &Pod) -> Option<&str> {
    p.metadata.annotations.as_ref()?.get(REPLACES).map(String::as_str)
}
