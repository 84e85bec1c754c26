//! One observation: the nodes and pods the watches hold, made into the world; half-made copies
//! settled; log streams followed; each node's kubelet summary read; progress handed over.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::AsyncReadExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, LogParams};

use super::pod::{self, Stand};
use super::{Kubernetes, Managed, NodeEntry, STATS_WAIT, StatsRoute, stats, unix_ms, within};
use crate::backend::carried::{ARRIVED, REPLACES, WAIT, attained, unix_ms_of};
use crate::backend::progress;
use crate::bindings::wit;
use crate::world::{GpuSlot, World};

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
        self.check_health();
        let (pods_listed, nodes_listed) = self.listed();
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
            if let Some(m) = self.jobs.remove(&uid) {
                tracing::info!(job = m.handle, pod = %m.name, "pod ended or was deleted");
                world.remove_job(m.handle);
            }
        }
        world.set_time_ms(until_ms);
        if self.placer == crate::backend::Placer::Backend && self.apiserver_up() {
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
        let mut nodes: Vec<_> = self.node_store.state().iter().map(|n| (pod::node_capacity(n), n.clone())).collect();
        nodes.sort_by(|a, b| a.0.0.cmp(&b.0.0));
        for ((name, cpu, memory, gpus, ready), _) in nodes {
            let wit_node = |name: &str| wit::Node {
                name: name.to_string(),
                cpu_millicores: cpu,
                memory_bytes: memory,
                gpu_memory_bytes: vec![0; gpus as usize],
            };
            let i = match self.node_index(&name) {
                Some(i) => i,
                None => {
                    world.add_node(wit_node(&name));
                    self.nodes.push(NodeEntry {
                        name: name.clone(),
                        cpu_millicores: cpu,
                        memory_bytes: memory,
                        gpus,
                        ready: true,
                        stats: None,
                        asking: None,
                    });
                    self.nodes.len() - 1
                }
            };
            let entry = &mut self.nodes[i];
            if (entry.cpu_millicores, entry.memory_bytes, entry.gpus) != (cpu, memory, gpus) {
                (entry.cpu_millicores, entry.memory_bytes, entry.gpus) = (cpu, memory, gpus);
                world.set_node(i as u32, wit_node(&name));
            }
            if entry.ready != ready {
                entry.ready = ready;
                if ready {
                    self.logged.remove(&format!("notready:{name}"));
                    tracing::info!(node = %name, "node is Ready again");
                } else {
                    self.log_once(format!("notready:{name}"), || {
                        format!("node {name} is NotReady; its pods keep their last state and nothing is placed there")
                    });
                }
            }
        }
    }

    /// Make the world's jobs match the managed pods; the uids of jobs whose pods are gone.
    fn discover(&mut self, world: &mut World) -> Vec<Arc<str>> {
        let pods = self.pods.state();
        let live: HashMap<&str, &Pod> = pods
            .iter()
            .filter(|p| pod::stand(p, &self.config.scheduler) != Stand::Ended)
            .filter_map(|p| Some((p.metadata.uid.as_deref()?, p.as_ref())))
            .collect();
        let dropped = self.settle_copies(&live);
        let mut present = HashSet::new();
        for (uid, p) in &live {
            if dropped.contains(*uid) {
                continue;
            }
            let node = match pod::stand(p, &self.config.scheduler) {
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
            present.insert(*uid);
            let node_index = node.as_deref().and_then(|n| self.node_index(n));
            if node.is_some() && node_index.is_none() {
                continue; // bound to a node not yet seen: next tick
            }
            let Some(m) = self.jobs.get(*uid) else {
                self.adopt(uid, p, node_index, world);
                continue;
            };
            let handle = m.handle;
            if let Some(i) = node_index
                && world.state(handle).is_some_and(|s| !s.is_running())
            {
                let gpus = free_slots(world, i as u32, m.gpus_asked);
                world.start_job(handle, i as u32, gpus);
                tracing::info!(job = handle, pod = %m.name, node = %self.nodes[i].name, "a queued pod was bound");
            }
            self.read_limits(handle, p, node_index, world);
            let uid: Arc<str> = Arc::from(*uid);
            let m = &self.jobs[&uid];
            if pod::started(p) && m.follower.as_ref().is_none_or(|f| f.is_finished()) {
                let follower = self.follow(&uid, m);
                self.jobs.get_mut(&uid).expect("just read").follower = follower;
            }
        }
        self.jobs.keys().filter(|uid| !present.contains(uid.as_ref())).cloned().collect()
    }

    /// The limits in the pod's spec, in the world (a lifted limit is the node's allocatable).
    fn read_limits(&self, handle: u32, p: &Pod, node: Option<usize>, world: &mut World) {
        let (cpu, memory) = pod::limits(p);
        let (all_cpu, all_memory) = node.map_or((u64::MAX, u64::MAX), |i| {
            let n = &self.nodes[i];
            (n.cpu_millicores, n.memory_bytes)
        });
        if let Some(state) = world.state_mut(handle) {
            state.cpu_limit_millicores = cpu.filter(|&m| m < all_cpu);
            state.memory_limit_bytes = memory.filter(|&b| b < all_memory);
        }
    }

    /// Start managing pod `uid`: a running job on node `node`, or a queued one.
    fn adopt(&mut self, uid: &str, p: &Pod, node: Option<usize>, world: &mut World) {
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
        let gpus = node.map_or_else(Vec::new, |i| free_slots(world, i as u32, gpus_asked));
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
        let mut m = Managed {
            handle,
            name: pod_name.clone(),
            metrics,
            deliver: declared.deliver,
            checkpoint: declared.checkpoint,
            gpus_asked,
            requests: pod::requests(p),
            arrived_unix_ms: arrived,
            refused: None,
            epochs: 0,
            last_cpu: None,
            last_line_ns: Arc::default(),
            follower: None,
        };
        let uid: Arc<str> = Arc::from(uid);
        if pod::started(p) {
            m.follower = self.follow(&uid, &m);
        }
        tracing::info!(job = handle, pod = %pod_name, queued = node.is_none(), "managing a new pod");
        self.jobs.insert(uid, m);
    }

    /// Delete the copies among `live` that a stopped host left half-made: a copy (it names the
    /// pod it replaces) that is not ours and whose original still runs. Returns their uids.
    fn settle_copies(&mut self, live: &HashMap<&str, &Pod>) -> HashSet<String> {
        let mut dropped = HashSet::new();
        for (uid, p) in live {
            let original = p.metadata.annotations.as_ref().and_then(|a| a.get(REPLACES));
            let Some(original) = original.filter(|o| live.contains_key(o.as_str())) else { continue };
            if self.jobs.contains_key(*uid) || !matches!(pod::stand(p, &self.config.scheduler), Stand::Queued) {
                continue;
            }
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
    pub(super) fn follow(&self, uid: &Arc<str>, m: &Managed) -> Option<tokio::task::JoinHandle<()>> {
        let api = self.pods_api();
        let p = self.pods.state().into_iter().find(|p| p.metadata.uid.as_deref() == Some(uid))?;
        let container = pod::main_container(&p)?.name.clone();
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
                    return;
                }
            };
            let mut stream = std::pin::pin!(stream);
            let mut reader = progress::Reader::new(metrics, after);
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                let n = match tokio::time::timeout(FOLLOW_QUIET, stream.read(&mut buf)).await {
                    Ok(Ok(0)) => return tracing::debug!(pod = %name, "the log stream ended"),
                    Ok(Err(e)) => return tracing::debug!(pod = %name, "the log stream broke: {e}"),
                    Err(_) => return tracing::debug!(pod = %name, "the log stream was quiet; following it again"),
                    Ok(Ok(n)) => n,
                };
                inbox.feed(&uid, &mut reader, &buf[..n], &last);
            }
        }))
    }

    /// Each node's kubelet summary, asked once per tick for the nodes that run managed pods.
    /// The asks run on the runtime and the tick waits for them briefly ([`STATS_WAIT`]): an
    /// answer that takes longer (a hung kubelet) is read at a later tick and never holds the
    /// loop up; a node is not asked again while its last ask is out.
    fn measure(&mut self, world: &mut World) {
        let mut wanted: Vec<usize> = Vec::new();
        for m in self.jobs.values() {
            if let Some(s) = world.state(m.handle).filter(|s| s.is_running())
                && !wanted.contains(&(s.node as usize))
            {
                wanted.push(s.node as usize);
            }
        }
        for i in wanted {
            if i < self.nodes.len() && self.nodes[i].asking.is_none() {
                let ask = self.ask_summary(i);
                self.nodes[i].asking = Some(self.rt.spawn(ask));
            }
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
        for (i, answer) in answers {
            self.read_summary(i, answer, world);
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
                        "{}the kubelet itself: {e}",
                        proxy_error.map_or(String::new(), |p| format!("through the apiserver: {p}; "))
                    )),
                },
                (Err(e), None) => Err(e.map_or_else(String::new, |e| e.to_string())),
            }
        }
    }

    /// Node `i`'s kubelet summary (or why there is none) into its pods' use.
    fn read_summary(&mut self, i: usize, answer: Result<(String, StatsRoute), String>, world: &mut World) {
        let name = self.nodes[i].name.clone();
        let (text, route) = match answer {
            Ok(a) => a,
            Err(why) => {
                self.log_once(format!("stats:{name}"), || {
                    format!("cannot read node {name}'s kubelet summary ({why}); its pods' use stays as last read")
                });
                return;
            }
        };
        if self.logged.remove(&format!("stats:{name}")) {
            tracing::info!(node = %name, "node's kubelet summary read again");
        }
        if self.nodes[i].stats != Some(route) {
            if route == StatsRoute::Direct {
                tracing::info!(node = %name, "reading the kubelet's summary from the kubelet itself (the apiserver does not proxy to it)");
            }
            self.nodes[i].stats = Some(route);
        }
        let used = match stats::parse(&text) {
            Ok(u) => u,
            Err(e) => {
                self.log_once(format!("stats-parse:{name}"), || {
                    format!("node {name}'s kubelet summary does not parse: {e}")
                });
                return;
            }
        };
        for (uid, m) in self.jobs.iter_mut() {
            let (Some(u), Some(state)) = (used.get(uid.as_ref()), world.state_mut(m.handle)) else { continue };
            if state.node as usize != i || !state.is_running() {
                continue;
            }
            match (u.cpu, m.last_cpu) {
                (Some(now), Some(then)) if now.1 > then.1 => {
                    if let Some(mc) = stats::millicores_between(then, now) {
                        state.cpu_used_millicores = mc;
                    }
                    m.last_cpu = Some(now);
                }
                (Some(now), None) => {
                    m.last_cpu = Some(now);
                    if let Some(nano) = u.nano_cores {
                        state.cpu_used_millicores = nano / 1_000_000;
                    }
                }
                _ => {}
            }
            if let Some(b) = u.memory_bytes {
                state.memory_used_bytes = b;
            }
        }
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
            let Some(m) = self.jobs.get_mut(&incoming.key) else { continue };
            let fallback = || m.name.clone();
            if let Some((key, message)) =
                progress::hand(world, m.handle, &mut m.epochs, incoming, (origin, until_ms), fallback)
            {
                self.log_once(key, || message);
            }
        }
    }
}

/// How long a log stream may bring nothing before it is followed again.
const FOLLOW_QUIET: Duration = Duration::from_secs(30);

/// The first `count` free GPUs of node `node`, as world slots (the host's bookkeeping: the
/// device plugin chooses the devices).
pub(super) fn free_slots(world: &World, node: u32, count: u32) -> Vec<GpuSlot> {
    world.free_gpus(node).into_iter().take(count as usize).map(|index| GpuSlot { node, index }).collect()
}
