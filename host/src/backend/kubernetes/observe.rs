//! One observation: the nodes and pods the watches hold, made into the world; half-made copies
//! settled; log streams followed; each node's kubelet summary read; progress handed over.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures_util::AsyncReadExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, LogParams};

use super::pod::{self, Stand};
use super::{
    Kubernetes, Managed, NodeEntry, STATS_EARLY, STATS_EVERY, STATS_IN_FLIGHT, STATS_WAIT, StatsRoute, lease, stats,
    stats_backoff, unix_ms, within,
};
use crate::backend::Backend;
use crate::backend::carried::{ARRIVED, REPLACES, WAIT, attained, batch_in_force, unix_ms_of};
use crate::backend::progress;
use crate::bindings::wit;
use crate::world::{GpuSlot, World};
use wasmsched_rules::GpuBook;

impl Kubernetes {
    pub(super) fn observe_at(&mut self, world: &mut World, until_ms: u64) {
        // The backend's clock is the wall clock: wait until `until_ms` is due.
        let elapsed = Duration::from_millis(until_ms);
        let first = self.origin.is_none();
        let (origin, _) = *self.origin.get_or_insert_with(|| {
            let now = Instant::now();
            (now.checked_sub(elapsed).unwrap_or(now), unix_ms().saturating_sub(until_ms))
        });
        if first {
            // Give the first lists a moment, so the first tick sees the cluster.
            let (pods, nodes, limit) = (self.pods.clone(), self.node_store.clone(), self.config.timeout);
            self.rt.block_on(async move {
                let ready = async move {
                    let _ = pods.wait_until_ready().await;
                    let _ = nodes.wait_until_ready().await;
                };
                let _ = tokio::time::timeout(limit, ready).await;
            });
        }
        if let Some(wait) = (origin + elapsed).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
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
            self.election = Some(lease::Election::start(&self.rt, api, config, identity, self.config.timeout));
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
                tracing::info!(job = m.handle, pod = %m.name, "pod ended or was deleted");
                world.remove_job(m.handle);
            }
        }
        world.set_time_ms(until_ms);
        if acting && self.placer == crate::backend::Placer::Backend && self.apiserver_up() {
            self.place_queued(world, None);
        }
    }

    /// Log the apiserver going away, once, and coming back.
    fn check_health(&mut self) {
        let down = self.health.lock().expect("health lock").down.clone();
        match down {
            Some((_, why)) => {
                let url = self.kube_config.cluster_url.to_string();
                self.log_once("apiserver-down".into(), || {
                    format!(
                        "the Kubernetes apiserver {url} does not answer ({why}); jobs keep their last state, \
                         retrying with backoff"
                    )
                });
            }
            None => {
                if self.logged.remove("apiserver-down") {
                    tracing::info!(apiserver = %self.kube_config.cluster_url, "the Kubernetes apiserver answers again");
                }
            }
        }
    }

    /// Nodes in name order get handles as they appear; capacity and readiness follow them.
    fn observe_nodes(&mut self, world: &mut World) {
        // Only the nodes new or changed since the last observation.
        let store = self.node_store.state();
        let mut nodes: Vec<_> = store
            .iter()
            .filter(|n| {
                let name = n.metadata.name.as_deref().unwrap_or_default();
                let seen = self.node_index(name).and_then(|i| self.nodes[i].version.as_deref());
                seen.is_none() || seen != n.metadata.resource_version.as_deref()
            })
            .map(|n| (pod::node_facts(n), n.metadata.resource_version.clone()))
            .collect();
        nodes.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        for (facts, version) in nodes {
            let pod::NodeFacts { name, cpu, memory, gpus, pods, ready, gpu_type, gpu_memory_bytes, labels } = facts;
            let wit_node = |name: &str| wit::Node {
                name: name.to_string(),
                cpu_millicores: cpu,
                memory_bytes: memory,
                gpu_memory_bytes: vec![gpu_memory_bytes; gpus as usize],
                gpu_type: gpu_type.clone(),
            };
            let i = match self.node_index(&name) {
                Some(i) => i,
                None => {
                    world.add_node(wit_node(&name));
                    self.node_names.insert(name.clone(), self.nodes.len());
                    self.nodes.push(NodeEntry {
                        name: name.clone(),
                        cpu_millicores: cpu,
                        memory_bytes: memory,
                        gpus,
                        pods,
                        labels: Arc::new(labels.clone()),
                        ready: true,
                        stats: None,
                        asking: None,
                        stats_due: None,
                        stats_failures: 0,
                        stats_early: 0,
                        version: None,
                    });
                    self.nodes.len() - 1
                }
            };
            let entry = &mut self.nodes[i];
            // Only nodes whose resource version moved are here: their description is sent
            // again when any of it changed (the world ignores an equal one).
            (entry.cpu_millicores, entry.memory_bytes, entry.gpus) = (cpu, memory, gpus);
            world.set_node(i as u32, wit_node(&name));
            world.set_node_down(i as u32, !ready);
            entry.pods = pods;
            entry.version = version;
            if *entry.labels != labels {
                entry.labels = Arc::new(labels);
            }
            if entry.ready != ready {
                entry.ready = ready;
                if ready {
                    self.logged.remove(&format!("notready:{name}"));
                    tracing::info!(node = %name, "node is Ready again");
                } else {
                    self.log_once(format!("notready:{name}"), || {
                        format!(
                            "node {name} is NotReady or cordoned; its pods keep their last state and nothing is placed there"
                        )
                    });
                }
            }
        }
    }

    /// Make the world's jobs match the managed pods; the uids of jobs whose pods are gone. A
    /// pod that a preemption or a migration in flight re-creates is left as it is until that
    /// lands: its original's absence and its copy's presence are the host's own doing.
    fn discover(&mut self, world: &mut World) -> Vec<Arc<str>> {
        let pods = self.pods.state();
        let moving: HashSet<Arc<str>> = self.flight.iter().filter(|f| f.moves).map(|f| f.uid.clone()).collect();
        let live: Vec<(&str, &Pod, Stand)> = pods
            .iter()
            .filter_map(|p| {
                let stand = pod::stand(p, &self.config.scheduler);
                (stand != Stand::Ended).then_some((p.metadata.uid.as_deref()?, p.as_ref(), stand))
            })
            .collect();
        // A copy half-made is the leader's to settle: it may be making it now.
        let dropped = if self.acted { self.settle_copies(&live, &moving) } else { HashSet::new() };
        let mut book = world.gpu_book();
        let mut streams = Streams::new(self.config.max_log_streams, self.jobs.values());
        // Marked as their pods are found; the rest are gone.
        for (uid, m) in self.jobs.iter_mut() {
            m.present = moving.contains(uid);
        }
        for (uid, p, stand) in live {
            if dropped.contains(uid) || replaces(p).is_some_and(|original| moving.contains(original)) {
                continue;
            }
            let node = match stand {
                Stand::Bound(node) => Some(node),
                Stand::Queued => None,
                Stand::Elsewhere(scheduler) => {
                    let name = p.metadata.name.clone().unwrap_or_default();
                    let ours = self.config.scheduler.clone();
                    if self.logged.insert(format!("elsewhere:{uid}")) {
                        tracing::info!(pod = %name, scheduler, "pod waits for another scheduler; it becomes a job once bound (give it schedulerName {ours} to queue it here)");
                    }
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
            let handle = m.handle;
            if let Some(i) = node_index
                && world.state(handle).is_some_and(|s| !s.is_running())
            {
                let gpus = free_slots(&mut book, i as u32, m.gpus_asked, handle);
                world.start_job(handle, i as u32, gpus);
                tracing::debug!(job = handle, pod = %m.name, node = %self.nodes[i].name, "a queued pod was bound");
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
            let most = self.config.max_log_streams;
            self.log_once("streams-full".into(), || {
                format!(
                    "{waiting} running pods are not followed for progress: max-log-streams ({most}) logs are followed \
                     already; have the jobs report through their wasmsched.progress annotation (docs/kubernetes.md), \
                     or raise [backend] max-log-streams"
                )
            });
        }
        self.jobs.iter().filter(|(_, m)| !m.present).map(|(uid, _)| uid.clone()).collect()
    }

    /// Read running pod `uid`'s progress: from its `wasmsched.progress` annotation when it has
    /// one, else by following its log while a stream is free.
    fn read_progress(&mut self, uid: &Arc<str>, p: &Pod, streams: &mut Streams) {
        let Some(m) = self.jobs.get_mut(uid) else { return };
        if let Some(value) = p.metadata.annotations.as_ref().and_then(|a| a.get(PROGRESS)) {
            if let Some(f) = m.follower.take() {
                f.abort();
            }
            if m.annotated.as_deref() != Some(value) {
                let mut reader = progress::Reader::new(m.metrics.clone(), m.last_line_ns.load(Ordering::Relaxed));
                self.inbox.feed(uid, &mut reader, format!("{value}\n").as_bytes(), &m.last_line_ns);
                m.annotated = Some(value.clone());
            }
            return;
        }
        if !pod::started(p) || m.follower.as_ref().is_some_and(|f| !f.is_finished()) {
            return;
        }
        let now = Instant::now();
        if let Some(ended) = m.follower.take() {
            use futures_util::FutureExt;
            let opened = ended.now_or_never().and_then(Result::ok).unwrap_or(false);
            m.follow_retry = match (opened, m.follow_retry) {
                (true, _) => None,
                // A stream that will not open (a kubelet that does not answer) is tried again
                // later and later, not at every tick.
                (false, failed) => {
                    let failures = failed.map_or(0, |(_, n)| n) + 1;
                    Some((now + super::backoff(Duration::from_secs(1), failures, FOLLOW_QUIET), failures))
                }
            };
        }
        if m.follow_retry.is_none_or(|(at, _)| at <= now) && streams.take() {
            let follower = self.follow(uid, p);
            self.jobs.get_mut(uid).expect("just read").follower = follower;
        }
    }

    /// The limits in the pod's spec, in the world (a lifted limit is the node's allocatable),
    /// and the batch size in force its `wasmsched.batch-size-in-force` annotation carries (a
    /// resize writes it; without it the job's is the least of its declared range).
    fn read_limits(&self, handle: u32, p: &Pod, node: Option<usize>, world: &mut World) {
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

    /// Start managing pod `uid`: a running job on node `node`, or a queued one.
    fn adopt(
        &mut self,
        uid: &str,
        p: &Pod,
        node: Option<usize>,
        world: &mut World,
        book: &mut GpuBook,
        streams: &mut Streams,
    ) {
        let mut declared = pod::declared(p);
        let pod_name = p.metadata.name.clone().unwrap_or_default();
        for (key, why) in &declared.problems {
            let job = declared.spec.name.clone();
            self.log_once(format!("key:{uid}:{key}"), || format!("pod {job}: ignoring {key}: {why}"));
        }
        let keys = pod::keys(p);
        let origin = self.origin.map_or(0, |(_, unix)| unix);
        let created_ms =
            p.metadata.creation_timestamp.as_ref().and_then(|t| unix_ms_of(&t.0.to_string())).unwrap_or_else(unix_ms);
        let arrived = keys.get(ARRIVED).and_then(|v| v.trim().parse::<u64>().ok()).unwrap_or(created_ms);
        declared.spec.arrival_ms = arrived.saturating_sub(origin);
        let metrics = declared.spec.metrics.clone();
        let gpus_asked = declared.spec.gpus;
        let handle = match node {
            Some(i) => world.add_job(declared.spec, i as u32),
            None => world.enqueue_job(declared.spec),
        };
        let gpus = node.map_or_else(Vec::new, |i| free_slots(book, i as u32, gpus_asked, handle));
        let started = p.status.as_ref().and_then(|s| s.start_time.as_ref()).and_then(|t| unix_ms_of(&t.0.to_string()));
        let (run_ms, gpu_ms) = attained(&keys, started.filter(|_| node.is_some()), unix_ms(), gpus.len());
        if let Some(state) = world.state_mut(handle) {
            if node.is_none() {
                let preempted = keys.get(WAIT).is_some_and(|w| w.trim() == "preempted");
                state.queued = Some(if preempted { wit::WaitReason::Preempted } else { wit::WaitReason::NeverStarted });
                state.since_ms = created_ms.saturating_sub(origin);
            }
            state.gpus = gpus;
            (state.run_ms, state.gpu_ms) = (run_ms, gpu_ms);
        }
        self.read_limits(handle, p, node, world);
        let m = Managed {
            handle,
            name: pod_name.clone(),
            metrics,
            deliver: declared.deliver,
            checkpoint: declared.checkpoint,
            gpus_asked,
            requests: pod::requests(p),
            selector: Arc::new(pod::node_selector(p)),
            arrived_unix_ms: arrived,
            refused: None,
            retry: None,
            annotated: None,
            epochs: 0,
            last_cpu: None,
            cpu_measured: false,
            last_line_ns: Arc::default(),
            follower: None,
            former: None,
            follow_retry: None,
            version: p.metadata.resource_version.clone(),
            present: true,
        };
        let uid: Arc<str> = Arc::from(uid);
        tracing::debug!(job = handle, pod = %pod_name, queued = node.is_none(), "managing a new pod");
        self.manage(uid.clone(), m);
        self.read_progress(&uid, p, streams);
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
                Err(e) => {
                    self.log_once(format!("settle:{uid}"), || format!("cannot delete the unfinished copy {name}: {e}"))
                }
            }
        }
        dropped
    }

    /// Follow pod `uid`'s log (its main container) from after the last line read. A stream
    /// quiet for [`FOLLOW_QUIET`] is dropped and followed again at the next observation: a
    /// stream can stall without ending (a log file the runtime started afresh, a proxy), and a
    /// job that prints rarely costs one request per pod per half minute.
    fn follow(&self, uid: &Arc<str>, p: &Pod) -> Option<tokio::task::JoinHandle<bool>> {
        let api = self.pods_api();
        let m = self.jobs.get(uid)?;
        let container = pod::main_container(p)?.name.clone();
        let (uid, name, metrics, inbox, last) =
            (uid.clone(), m.name.clone(), m.metrics.clone(), self.inbox.clone(), m.last_line_ns.clone());
        Some(self.rt.spawn(async move {
            let after = last.load(std::sync::atomic::Ordering::Relaxed);
            // An absolute time, not seconds ago: the apiserver may take seconds to answer (one
            // starting up does) and would count them from then, skipping what came meanwhile.
            // It takes whole seconds, rounded: from two seconds before the last line, skipping it.
            let since = (after > 0).then(|| {
                let seconds = i64::try_from(after / 1_000_000_000).unwrap_or(i64::MAX).saturating_sub(2);
                k8s_openapi::jiff::Timestamp::from_second(seconds).unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
            });
            let params = LogParams {
                container: Some(container),
                follow: true,
                timestamps: true,
                since_time: since,
                ..LogParams::default()
            };
            let stream = match api.log_stream(&name, &params).await {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::debug!(pod = %name, "cannot follow the log: {e}");
                    return false;
                }
            };
            let mut stream = std::pin::pin!(stream);
            let mut reader = progress::Reader::new(metrics, after);
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                match tokio::time::timeout(FOLLOW_QUIET, stream.read(&mut buf)).await {
                    Ok(Ok(0)) => tracing::debug!(pod = %name, "the log stream ended"),
                    Ok(Err(e)) => tracing::debug!(pod = %name, "the log stream broke: {e}"),
                    Err(_) => tracing::debug!(pod = %name, "the log stream was quiet; following it again"),
                    Ok(Ok(n)) => {
                        inbox.feed(&uid, &mut reader, &buf[..n], &last);
                        continue;
                    }
                }
                return true;
            }
        }))
    }

    /// The kubelet summaries of the nodes that run managed pods, each read every
    /// [`STATS_EVERY`] (sooner while a pod there is not measured yet), at most
    /// [`STATS_IN_FLIGHT`] asked at once, oldest due first; a node whose summary fails is asked
    /// again later and later ([`stats_backoff`]). The asks run on the runtime and the tick
    /// waits for them briefly ([`STATS_WAIT`]): an answer that takes longer (a hung kubelet) is
    /// read at a later tick and never holds the loop up.
    fn measure(&mut self, world: &mut World) {
        let now = Instant::now();
        // Per node: whether it runs managed pods, and how many of them have no CPU figure yet.
        let mut wanted = vec![false; self.nodes.len()];
        let mut unmeasured = vec![0u32; self.nodes.len()];
        for m in self.jobs.values() {
            if let Some(s) = world.state(m.handle).filter(|s| s.is_running())
                && let Some(w) = wanted.get_mut(s.node as usize)
            {
                *w = true;
                unmeasured[s.node as usize] += u32::from(!m.cpu_measured);
            }
        }
        let asking = self.nodes.iter().filter(|n| n.asking.is_some()).count();
        let mut due: Vec<(Option<Instant>, usize)> = (0..self.nodes.len())
            .filter(|&i| wanted[i] && self.nodes[i].asking.is_none())
            .filter(|&i| self.nodes[i].stats_due.is_none_or(|at| at <= now))
            .map(|i| (self.nodes[i].stats_due, i))
            .collect();
        due.sort_unstable();
        for (_, i) in due.into_iter().take(STATS_IN_FLIGHT.saturating_sub(asking)) {
            let ask = self.ask_summary(i);
            self.nodes[i].asking = Some(self.rt.spawn(ask));
        }
        let mut asking: Vec<_> =
            self.nodes.iter_mut().enumerate().filter_map(|(i, n)| Some((i, n.asking.take()?))).collect();
        let deadline = tokio::time::Instant::now() + STATS_WAIT;
        let answers = self.rt.block_on(async {
            let mut answers = Vec::new();
            for (i, ask) in &mut asking {
                if let Ok(answer) = tokio::time::timeout_at(deadline, &mut *ask).await {
                    answers.push((*i, answer.unwrap_or_else(|e| Err(format!("the request failed: {e}")))));
                }
            }
            answers
        });
        for (i, ask) in asking {
            if !answers.iter().any(|(answered, _)| *answered == i) {
                self.nodes[i].asking = Some(ask);
            }
        }
        let mut failed = Vec::new();
        for (i, answer) in answers {
            if let Err(why) = self.read_summary(i, answer, unmeasured[i], world) {
                failed.push((i, why));
            }
        }
        // One line per cause: a thousand nodes failing alike (no kubelet behind them) are one
        // line, not one a tick.
        let mut causes: HashMap<&str, Vec<&str>> = HashMap::new();
        for (i, why) in &failed {
            causes.entry(why.as_str()).or_default().push(self.nodes[*i].name.as_str());
        }
        for (why, names) in causes {
            if self.logged.insert(format!("stats-why:{why}")) {
                let shown = names[..names.len().min(5)].join(", ");
                let more = names.len().saturating_sub(5);
                tracing::warn!(
                    nodes = %shown,
                    more,
                    why,
                    "cannot read these nodes' kubelet summaries; their pods' use stays as last read, each is asked again later and later (up to 5 min), and other nodes failing for the same reason are not logged again"
                );
            }
        }
    }

    /// The request for node `i`'s kubelet summary: through the apiserver's node proxy, else
    /// (or once that is known not to work) from the kubelet itself.
    fn ask_summary(&mut self, i: usize) -> impl Future<Output = Result<(String, StatsRoute), String>> + use<> {
        let (name, route, limit) = (self.nodes[i].name.clone(), self.nodes[i].stats, self.config.timeout);
        let proxy = self.client.clone();
        let direct = self.kubelet_client(&name);
        async move {
            let get = |client: kube::Client, path: String| async move {
                let request = http::Request::get(path).body(Vec::new()).map_err(kube::Error::HttpError)?;
                within(limit, client.request_text(request)).await
            };
            let proxied = format!("/api/v1/nodes/{name}/proxy/stats/summary");
            let answer = match route {
                Some(StatsRoute::Direct) => Err(None),
                _ => get(proxy, proxied).await.map_err(Some),
            };
            match (answer, direct) {
                (Ok(text), _) => Ok((text, StatsRoute::Proxy)),
                (Err(proxy_error), Some(direct)) => match get(direct, "/stats/summary".into()).await {
                    Ok(text) => Ok((text, StatsRoute::Direct)),
                    Err(e) => Err(format!(
                        "{}the kubelet itself: {}",
                        proxy_error.map_or(String::new(), |p| format!("through the apiserver: {}; ", said(&p))),
                        said(&e)
                    )),
                },
                (Err(e), None) => Err(e.map_or_else(String::new, |e| said(&e))),
            }
        }
    }

    /// Node `i`'s kubelet summary into its pods' use; why there is none, when it newly fails
    /// (a node that keeps failing is reported once, when it starts to).
    /// `unmeasured`: node `i`'s running pods with no CPU figure before this summary.
    fn read_summary(
        &mut self,
        i: usize,
        answer: Result<(String, StatsRoute), String>,
        mut unmeasured: u32,
        world: &mut World,
    ) -> Result<(), String> {
        let node = &mut self.nodes[i];
        let parsed = answer.and_then(|(text, route)| Ok((stats::parse(&text).map_err(|e| format!("{e}"))?, route)));
        let (used, route) = match parsed {
            Ok(answer) => answer,
            Err(why) => {
                node.stats_failures += 1;
                node.stats_due = Some(Instant::now() + stats_backoff(node.stats_failures));
                return if node.stats_failures == 1 { Err(why) } else { Ok(()) };
            }
        };
        if node.stats_failures > 0 {
            tracing::info!(node = %node.name, "node's kubelet summary read again");
        }
        node.stats_failures = 0;
        if node.stats != Some(route) {
            if route == StatsRoute::Direct {
                tracing::info!(node = %node.name, "reading the kubelet's summary from the kubelet itself (the apiserver does not proxy to it)");
            }
            node.stats = Some(route);
        }
        for (uid, u) in &used {
            let Some(m) = self.jobs.get_mut(uid.as_str()) else { continue };
            let Some(state) = world.state_mut(m.handle) else { continue };
            if state.node as usize != i || !state.is_running() {
                continue;
            }
            let measured = match (u.cpu, m.last_cpu) {
                (Some(now), Some(then)) if now.1 > then.1 => {
                    m.last_cpu = Some(now);
                    stats::millicores_between(then, now)
                }
                // A container's first sample has a rate of zero (the runtime has nothing to
                // take it against): not a measurement; the next sample's difference is.
                (Some(now), None) => {
                    m.last_cpu = Some(now);
                    u.nano_cores.filter(|&n| n > 0).map(|nano| nano / 1_000_000)
                }
                _ => None,
            };
            if let Some(mc) = measured {
                state.cpu_used_millicores = mc;
                if !m.cpu_measured {
                    m.cpu_measured = true;
                    unmeasured = unmeasured.saturating_sub(1);
                }
            }
            if let Some(b) = u.memory_bytes {
                state.memory_used_bytes = b;
            }
        }
        // A pod that has started but that the summary does not measure yet (its containers
        // are a few seconds old) is asked about again at the next tick, not a period later: a
        // policy meanwhile sees a job that uses no CPU. Counted, not looked for among every
        // job: this runs for every summary read.
        let node = &mut self.nodes[i];
        let early = unmeasured > 0 && node.stats_early < STATS_EARLY;
        node.stats_early = if unmeasured > 0 { node.stats_early.saturating_add(1) } else { 0 };
        node.stats_due = Some(Instant::now() + if early { Duration::ZERO } else { STATS_EVERY });
        Ok(())
    }

    /// A client to node `name`'s kubelet itself (its InternalIP and kubelet port, the
    /// kubeconfig's credentials), made once.
    fn kubelet_client(&mut self, name: &str) -> Option<kube::Client> {
        if let Some(c) = self.kubelets.get(name) {
            return Some(c.clone());
        }
        let node = self.node_store.state().into_iter().find(|n| n.metadata.name.as_deref() == Some(name))?;
        let (ip, port) = pod::kubelet_address(&node)?;
        let host = if ip.contains(':') { format!("[{ip}]") } else { ip };
        let mut config = self.kube_config.clone();
        config.cluster_url = format!("https://{host}:{port}").parse().ok()?;
        let _entered = self.rt.enter();
        let client = kube::Client::try_from(config).ok()?;
        self.kubelets.insert(name.to_string(), client.clone());
        Some(client)
    }

    /// Hand the lines the followers read to the world, in order.
    pub(super) fn deliver_progress(&mut self, world: &mut World, until_ms: u64) {
        let origin = self.origin.map_or(0, |(_, unix)| unix);
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
                progress::hand(world, m.handle, &mut m.epochs, incoming, (origin, until_ms), fallback)
            {
                self.log_once(key, || message);
            }
        }
    }
}

/// What the apiserver said, in short: its status code and message, not the whole status.
fn said(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => format!("{} {}", status.code, status.message),
        other => other.to_string(),
    }
}

/// How long a log stream may bring nothing before it is followed again.
const FOLLOW_QUIET: Duration = Duration::from_secs(30);

/// The annotation through which a job may report its progress instead of its log: its latest
/// progress lines, each after its time (RFC 3339), newest last.
pub const PROGRESS: &str = "wasmsched.progress";

/// The first `count` free GPUs of node `node` in `book`, as world slots, taken there for job
/// `handle` (the host's bookkeeping: the device plugin chooses the devices).
fn free_slots(book: &mut GpuBook, node: u32, count: u32, handle: u32) -> Vec<GpuSlot> {
    let free: Vec<u32> = book.free_on(node).take(count as usize).collect();
    for &index in &free {
        book.hold(node, index, handle);
    }
    free.into_iter().map(|index| GpuSlot { node, index }).collect()
}

/// The uid of the pod that pod `p` is a copy of, if it is one.
fn replaces(p: &Pod) -> Option<&str> {
    p.metadata.annotations.as_ref()?.get(REPLACES).map(String::as_str)
}

/// The log streams one observation may open: the limit less those open.
struct Streams {
    free: usize,
    /// Pods that wanted one and found none.
    waiting: usize,
}

impl Streams {
    fn new<'a>(most: usize, jobs: impl Iterator<Item = &'a Managed>) -> Streams {
        let open = jobs.filter(|m| m.follower.as_ref().is_some_and(|f| !f.is_finished())).count();
        Streams { free: most.saturating_sub(open), waiting: 0 }
    }

    /// Whether a stream is free; it is taken.
    fn take(&mut self) -> bool {
        let free = self.free > 0;
        self.free -= usize::from(free);
        self.waiting += usize::from(!free);
        free
    }

    fn waiting(&self) -> Option<usize> {
        (self.waiting > 0).then_some(self.waiting)
    }
}
