//! GPU telemetry, with `[backend.gpu-telemetry]`: each GPU's use and which pod holds it, from
//! NVIDIA's dcgm-exporter (the GPU Operator runs one pod of it on every GPU node).
//!
//! The exporters are found by the pods (namespace `gpu-operator`, selector
//! `app=nvidia-dcgm-exporter` by default: the GPU Operator's), or, with `service`, by that
//! Service's EndpointSlices (each ready endpoint's node, pod and address, and the slice's port
//! where it names one). The exporter of each node that runs managed pods is read as
//! the kubelet summaries are (`poll.rs`): through the apiserver's pod proxy
//! (`/api/v1/namespaces/{ns}/pods/{pod}:{port}/proxy{path}`), else from the pod's IP directly,
//! every 10 s (sooner while a GPU pod there is not named yet), 16 nodes at most at once, with a
//! backoff per node that fails. dcgm-exporter collects every 30 s by default
//! (`DCGM_EXPORTER_INTERVAL`, ms): a read every 10 s sees a new figure within 10 s of its
//! collection, for one small request per node.
//!
//! What is read ([`super::dcgm`]) goes to the world: each GPU's utilisation and memory in use;
//! each managed job's GPU use (the mean over the GPUs its pods hold; a GPU that several pods
//! share is split among them by their GPU shares, since the exporter measures the GPU and not
//! each process on it) and, as the Docker backend does, its GPU slots on that node set to the
//! indices the exporter names (the device plugin chose them, not the host; a pod whose
//! devices come through claims keeps those the host allocated). The GPUs' model and
//! memory stand in for GPU Feature Discovery's `nvidia.com/gpu.product` and
//! `nvidia.com/gpu.memory` labels on a node that lacks them.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde::Deserialize;

use wasmsched_core::bindings::wit;
use wasmsched_core::world::{GpuSlot, JobId, NodeId, World};

use super::dcgm::{self, PodRef};
use super::{Health, Kubernetes, STATS_IN_FLIGHT, filled, poll, stats_backoff, watch};

/// `[backend.gpu-telemetry]`: where the dcgm-exporter pods are and how their figures are read.
/// Every key is optional; the GPU Operator's defaults.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct GpuTelemetryConfig {
    /// The namespace of the exporter pods (default `"gpu-operator"`).
    pub namespace: String,
    /// The label selector of the exporter pods (default `"app=nvidia-dcgm-exporter"`; the
    /// dcgm-exporter Helm chart's own is `"app.kubernetes.io/name=dcgm-exporter"`). Not read
    /// with `service`.
    pub selector: String,
    /// A Service whose endpoints are the exporters (the GPU Operator's is
    /// `"nvidia-dcgm-exporter"`): found through its EndpointSlices instead of by `selector`.
    pub service: Option<String>,
    /// The port they serve their metrics on (default 9400); with `service`, the one its
    /// endpoints name where they name a single port.
    pub port: u16,
    /// The path of their metrics (default `"/metrics"`).
    pub path: String,
}

impl Default for GpuTelemetryConfig {
    fn default() -> Self {
        GpuTelemetryConfig {
            namespace: "gpu-operator".into(),
            selector: "app=nvidia-dcgm-exporter".into(),
            service: None,
            port: 9400,
            path: "/metrics".into(),
        }
    }
}

impl GpuTelemetryConfig {
    /// Why the table cannot be used, saying what to write.
    pub fn check(&self) -> Result<(), String> {
        let says = |what: &str| format!("[backend.gpu-telemetry] {what}");
        filled(&self.namespace, &says("namespace is the exporter pods' namespace, e.g. \"gpu-operator\""))?;
        filled(
            &self.selector,
            &says("selector is the exporter pods' label selector, e.g. \"app=nvidia-dcgm-exporter\""),
        )?;
        if let Some(service) = &self.service {
            filled(service, &says("service is the exporters' Service's name, e.g. \"nvidia-dcgm-exporter\""))?;
        }
        if self.port == 0 {
            return Err(says("port is the port the exporter serves on, e.g. 9400"));
        }
        if !self.path.starts_with('/') || self.path.contains(char::is_whitespace) {
            return Err(says(&format!(
                "path is the metrics' path, starting with /, e.g. \"/metrics\" (not {:?})",
                self.path
            )));
        }
        Ok(())
    }
}

/// What a node's exporter said of its GPUs' kind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Seen {
    /// Their model as GPU Feature Discovery labels it (`NVIDIA-A100-SXM4-80GB`).
    pub model: String,
    /// Each one's memory, bytes; 0 when not reported.
    pub memory_bytes: u64,
}

/// Fill what `node`'s labels left unsaid from what its exporter `seen`: its GPUs' type and
/// memory.
pub(super) fn fill(node: &mut wit::Node, seen: Option<&Seen>) {
    let Some(seen) = seen else { return };
    if node.gpu_type.is_empty() {
        node.gpu_type = seen.model.clone();
    }
    if seen.memory_bytes > 0 && node.gpu_memory_bytes.iter().all(|&b| b == 0) {
        node.gpu_memory_bytes.fill(seen.memory_bytes);
    }
}

/// Where the exporters are found: their pods, or their Service's endpoints.
enum Found {
    Pods(Store<Pod>),
    Endpoints(Store<EndpointSlice>),
}

/// A node's exporter: its pod, address and port.
#[derive(Clone, Debug, PartialEq)]
struct Exporter {
    pod: String,
    ip: String,
    port: u16,
}

/// The exporters, watched, and how each is reached.
pub(super) struct Exporters {
    config: GpuTelemetryConfig,
    found: Found,
    /// The watch's own health: a namespace the host may not read leaves the apiserver up.
    health: Arc<Mutex<Health>>,
    /// Clients to exporters reached directly, by node name, with the address each reaches.
    direct: HashMap<String, (String, Client)>,
}

impl Exporters {
    /// Watch `config`'s exporter pods, each trimmed to its name, node, phase and address; or,
    /// with `service`, that Service's EndpointSlices.
    pub(super) fn watch(rt: &tokio::runtime::Runtime, client: &Client, config: &GpuTelemetryConfig) -> Exporters {
        let health = Arc::new(Mutex::new(Health::default()));
        let found = match &config.service {
            Some(service) => {
                let api: Api<EndpointSlice> = Api::namespaced(client.clone(), &config.namespace);
                let of_service = watcher::Config::default().labels(&format!("kubernetes.io/service-name={service}"));
                Found::Endpoints(watch(rt, api, of_service, health.clone(), |s| s.managed_fields_mut().clear()))
            }
            None => {
                let api: Api<Pod> = Api::namespaced(client.clone(), &config.namespace);
                let labelled = watcher::Config::default().labels(&config.selector);
                Found::Pods(watch(rt, api, labelled, health.clone(), |p| {
                    p.managed_fields_mut().clear();
                    (p.metadata.labels, p.metadata.annotations, p.metadata.owner_references) = (None, None, None);
                    let node_name = p.spec.as_mut().and_then(|s| s.node_name.take());
                    p.spec = Some(PodSpec { node_name, ..PodSpec::default() });
                    let status = p.status.take().unwrap_or_default();
                    p.status = Some(PodStatus { phase: status.phase, pod_ip: status.pod_ip, ..PodStatus::default() });
                }))
            }
        };
        Exporters { config: config.clone(), found, health, direct: HashMap::new() }
    }

    /// Where the exporters are looked for, in words.
    fn whereabouts(&self) -> String {
        let ns = &self.config.namespace;
        match &self.config.service {
            Some(service) => format!("the endpoints of Service {service} in namespace {ns}"),
            None => format!("the pods of selector {} in namespace {ns}", self.config.selector),
        }
    }

    /// Each node's exporter, by node name (the first by pod name where there are several).
    fn by_node(&self) -> HashMap<String, Exporter> {
        match &self.found {
            Found::Pods(store) => running_pods(&store.state(), self.config.port),
            Found::Endpoints(store) => ready_endpoints(&store.state(), self.config.port),
        }
    }

    /// A client to exporter `at` on node `node`, with no credentials (made once per address).
    fn direct(&mut self, rt: &tokio::runtime::Runtime, node: &str, at: &Exporter) -> Option<Client> {
        let ip = &at.ip;
        let host = if ip.contains(':') { format!("[{ip}]") } else { ip.to_string() };
        let url = format!("http://{host}:{}", at.port);
        if let Some((_, client)) = self.direct.get(node).filter(|(at, _)| *at == url) {
            return Some(client.clone());
        }
        let _entered = rt.enter();
        let client = Client::try_from(kube::Config::new(url.parse().ok()?)).ok()?;
        self.direct.insert(node.to_string(), (url, client.clone()));
        Some(client)
    }
}

/// Each node's exporter among `pods`: Running, with an address, not being deleted; serving on
/// `port`.
fn running_pods(pods: &[Arc<Pod>], port: u16) -> HashMap<String, Exporter> {
    let mut pods: Vec<&Arc<Pod>> = pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect();
    pods.sort_by_key(|p| p.name_any());
    let mut found = HashMap::new();
    for p in pods {
        let status = p.status.as_ref();
        let running = status.and_then(|s| s.phase.as_deref()) == Some("Running");
        let ip = status.and_then(|s| s.pod_ip.clone());
        if let (true, Some(node), Some(ip)) = (running, p.spec.as_ref().and_then(|s| s.node_name.clone()), ip) {
            found.entry(node).or_insert(Exporter { pod: p.name_any(), ip, port });
        }
    }
    found
}

/// Each node's exporter among a Service's `slices`: an endpoint not known to be unready or
/// terminating, with its node, its pod and an address; on the slice's port where it names one
/// alone, else on `port`.
fn ready_endpoints(slices: &[Arc<EndpointSlice>], port: u16) -> HashMap<String, Exporter> {
    let mut found: Vec<(String, Exporter)> = Vec::new();
    for slice in slices {
        let port = match slice.ports.as_deref() {
            Some([only]) => only.port.and_then(|p| u16::try_from(p).ok()).unwrap_or(port),
            _ => port,
        };
        for e in slice.endpoints.iter().flatten() {
            let conditions = e.conditions.clone().unwrap_or_default();
            let serving = conditions.ready != Some(false) && conditions.terminating != Some(true);
            let pod = e.target_ref.as_ref().filter(|r| r.kind.as_deref() == Some("Pod")).and_then(|r| r.name.clone());
            if let (true, Some(node), Some(pod), Some(ip)) = (serving, e.node_name.clone(), pod, e.addresses.first()) {
                found.push((node, Exporter { pod, ip: ip.clone(), port }));
            }
        }
    }
    found.sort_by(|a, b| a.1.pod.cmp(&b.1.pod));
    let mut by_node = HashMap::new();
    for (node, exporter) in found {
        by_node.entry(node).or_insert(exporter);
    }
    by_node
}

/// The GPUs each job holds on one node (`count` of them), once its exporter named the ones
/// some hold (`named`): a job named on as many GPUs as it holds there (`held`) takes those
/// (several jobs named on one GPU share it, as MPS or a shared device lets them); a job not
/// named moves off a named GPU, or off one past `count`, to the lowest no one holds. The jobs
/// whose GPUs change, with their new ones, in index order.
pub(super) fn reseat(
    count: u32,
    held: &[(JobId, Vec<u32>)],
    named: &HashMap<JobId, Vec<u32>>,
) -> Vec<(JobId, Vec<u32>)> {
    let mut taken = BTreeSet::new();
    let mut seats: Vec<(JobId, Option<Vec<u32>>)> = Vec::new();
    for (job, gpus) in held {
        let real = named.get(job).filter(|real| real.len() == gpus.len() && real.iter().all(|&g| g < count));
        if let Some(real) = real {
            taken.extend(real.iter().copied());
            seats.push((*job, Some(real.clone())));
        } else {
            seats.push((*job, None));
        }
    }
    let mut changed = Vec::new();
    for ((job, old), (_, seat)) in held.iter().zip(&seats) {
        let mut new = match seat {
            Some(real) => real.clone(),
            None => {
                let mut kept: Vec<u32> = old.iter().copied().filter(|g| *g < count && !taken.contains(g)).collect();
                taken.extend(kept.iter().copied());
                let missing = old.len() - kept.len();
                let free: Vec<u32> = (0..count).filter(|g| !taken.contains(g)).take(missing).collect();
                taken.extend(free.iter().copied());
                kept.extend(free);
                // Overbooked: no GPU left for it; it keeps what it had.
                if kept.len() < old.len() { old.clone() } else { kept }
            }
        };
        new.sort_unstable();
        let mut before = old.clone();
        before.sort_unstable();
        if new != before {
            changed.push((*job, new));
        }
    }
    changed
}

/// Each job holding GPUs of `node`, with their indices there.
pub(super) fn held_on(node: NodeId, world: &World) -> Vec<(JobId, Vec<u32>)> {
    world
        .jobs()
        .map(|(_, s)| (s.handle, s.gpus.iter().filter(|g| g.node == node).map(|g| g.index).collect::<Vec<_>>()))
        .filter(|(_, gpus)| !gpus.is_empty())
        .collect()
}

/// Book each job of `changed` on its new GPUs of `node` ([`reseat`]).
pub(super) fn rebook(node: NodeId, changed: Vec<(JobId, Vec<u32>)>, world: &mut World) {
    for (job, gpus) in changed {
        let Some(state) = world.state_mut(job) else { continue };
        let mut new = gpus.into_iter();
        for slot in state.gpus.iter_mut().filter(|g| g.node == node) {
            slot.index = new.next().unwrap_or(slot.index);
        }
    }
}

impl Kubernetes {
    /// Per node: whether it has GPUs and runs managed pods, and its pods with GPUs that no page
    /// has named yet.
    fn gpu_pods(&self, world: &World) -> (Vec<bool>, Vec<u32>) {
        let n = self.nodes.len();
        let (mut wanted, mut unnamed) = (vec![false; n], vec![0u32; n]);
        for m in self.jobs.values() {
            let Some(s) = world.state(m.job.handle).filter(|s| s.is_running()) else { continue };
            let pods: Vec<(NodeId, u32)> = match &m.gang {
                Some(g) => g.members.iter().filter_map(|p| Some((p.node?, p.gpus))).collect(),
                None => vec![(s.node, s.gpus.len() as u32)],
            };
            for (node, gpus) in pods.into_iter().filter(|(node, _)| node.index() < n) {
                wanted[node.index()] |= self.nodes[node.index()].gpus > 0;
                unnamed[node.index()] += u32::from(gpus > 0 && !m.gpu_use.iter().any(|(g, _)| g.node == node));
            }
        }
        (wanted, unnamed)
    }

    /// Ask for the exporter pages due (see [`Kubernetes::measure`]).
    pub(super) fn ask_exporters(&mut self, world: &World) {
        if self.exporters.is_none() {
            return;
        }
        self.check_exporters();
        let (wanted, _) = self.gpu_pods(world);
        let due = poll::due(self.nodes.iter().map(|e| &e.gpu), &wanted, STATS_IN_FLIGHT);
        let Some(exporters) = self.exporters.as_ref().filter(|_| !due.is_empty()) else { return };
        let (by_node, config, whereabouts) = (exporters.by_node(), exporters.config.clone(), exporters.whereabouts());
        for i in due {
            let name = self.nodes[i].name.clone();
            let ask = match by_node.get(&name) {
                Some(at) => {
                    let (ns, pod, port, path) = (&config.namespace, &at.pod, at.port, &config.path);
                    let proxy = (self.client.clone(), format!("/api/v1/namespaces/{ns}/pods/{pod}:{port}/proxy{path}"));
                    let direct = self.exporters.as_mut().and_then(|e| e.direct(&self.rt, &name, at));
                    let ask = poll::get(
                        self.nodes[i].gpu.route,
                        proxy,
                        direct.map(|c| (c, path.clone())),
                        self.config.timeout,
                    );
                    self.rt.spawn(ask)
                }
                None => {
                    let why = format!("no exporter serves there (none among {whereabouts})");
                    self.rt.spawn(async move { Err(why) })
                }
            };
            self.nodes[i].gpu.asking = Some(ask);
        }
    }

    /// Log the exporters' watch failing, once, and working again.
    fn check_exporters(&mut self) {
        let Some(e) = &self.exporters else { return };
        let down = e.health.lock().expect("health lock").down.clone();
        let whereabouts = e.whereabouts();
        let what = match e.found {
            Found::Pods(_) => "pods",
            Found::Endpoints(_) => "endpointslices (discovery.k8s.io)",
        };
        match down {
            Some((_, why)) => self.logged.once("gpu-exporters-down".into(), || {
                format!(
                    "cannot watch the GPU exporters ({whereabouts}: {why}); GPUs keep their last figures. Check \
                     [backend.gpu-telemetry] and grant the host list and watch on {what} there"
                )
            }),
            None => {
                if self.logged.clear("gpu-exporters-down") {
                    tracing::info!(exporters = %whereabouts, "the GPU exporters are watched again");
                }
            }
        }
    }

    /// Node `i`'s exporter page into its GPUs' use and its jobs' (see the module docs); why
    /// there is none, when it newly fails.
    pub(super) fn read_exporter(&mut self, i: usize, answer: poll::Answer, world: &mut World) -> Result<(), String> {
        let read = answer.and_then(|(text, route)| {
            let reading = dcgm::parse(&text);
            match reading.gpus.is_empty() {
                true => Err(format!("its page names no GPU ({} lines refused)", reading.bad_lines)),
                false => Ok((reading, route)),
            }
        });
        let (reading, route) = match read {
            Ok(read) => read,
            Err(why) => return if self.nodes[i].gpu.failed(stats_backoff) { Err(why) } else { Ok(()) },
        };
        let (node, name) = (NodeId(i as u32), self.nodes[i].name.clone());
        if reading.bad_lines > 0 {
            let bad = reading.bad_lines;
            self.logged.once(format!("dcgm-bad:{name}"), || {
                format!("node {name}'s GPU exporter page has {bad} line(s) it cannot use (not a sample, no GPU index, a value out of range); they are skipped and the rest is used (not logged again)")
            });
        }
        for g in &reading.gpus {
            let (util, used) = (g.utilisation_percent.unwrap_or(0.0), g.memory_used_bytes.unwrap_or(0));
            if !world.set_gpu_use(node, g.index, util, used) {
                let (index, count) = (g.index, self.nodes[i].gpus);
                self.logged.once(format!("dcgm-beyond:{name}"), || {
                    format!("node {name}'s GPU exporter reports GPU {index}, and the node has {count} nvidia.com/gpu; that GPU is left out")
                });
            }
        }
        self.saw_gpus(i, &reading, world);
        self.read_holders(node, &reading, world);
        // A GPU pod there not named yet (the exporter maps pods to GPUs when it collects) is
        // asked about again at the next tick.
        let unnamed = self.gpu_pods(world).1[i];
        let entry = &mut self.nodes[i];
        entry.gpu.answered(&entry.name, "GPU exporter", route, unnamed);
        Ok(())
    }

    /// Node `i`'s GPUs' model and memory, as its exporter reports them, into the world's node
    /// where its labels say nothing.
    fn saw_gpus(&mut self, i: usize, reading: &dcgm::Reading, world: &mut World) {
        let model = reading.gpus.iter().find(|g| !g.model.is_empty()).map(|g| g.model.replace(' ', "-"));
        let memory_bytes = reading.gpus.iter().find_map(|g| g.memory_total_bytes).unwrap_or(0);
        let seen = Seen { model: model.unwrap_or_default().chars().take(64).collect(), memory_bytes };
        if self.nodes[i].gpu_seen.as_ref() == Some(&seen) {
            return;
        }
        if let Some(mut node) = world.nodes().get(i).cloned() {
            fill(&mut node, Some(&seen));
            world.set_node(NodeId(i as u32), node);
        }
        self.nodes[i].gpu_seen = Some(seen);
    }

    /// The managed pods that `reading` names on node `node`'s GPUs: their jobs' GPU use and
    /// slots there.
    fn read_holders(&mut self, node: NodeId, reading: &dcgm::Reading, world: &mut World) {
        let namespace = &self.config.namespace;
        let mut pods: HashMap<PodRef, Arc<str>> = HashMap::new();
        for (entry, m) in &self.jobs {
            let names = m
                .gang
                .as_ref()
                .map_or_else(|| vec![m.name.clone()], |g| g.members.iter().map(|p| p.name.clone()).collect());
            pods.extend(names.into_iter().map(|name| (PodRef { namespace: namespace.clone(), name }, entry.clone())));
        }
        // The exporter measures a GPU, not each process on it: a GPU that several pods hold is
        // split among them by their shares (a pod not ours, or without a share, counts whole).
        let weight = |h: &PodRef| {
            let share =
                pods.get(h).and_then(|e| self.jobs.get(e)).and_then(|m| world.state(m.job.handle)?.gpu_share_percent);
            share.map_or(100.0, |p| f32::from(p.clamp(1, 100)))
        };
        let mut used: HashMap<Arc<str>, Vec<(u32, f32)>> = HashMap::new();
        for g in &reading.gpus {
            let total: f32 = g.holders.iter().map(weight).sum();
            for h in &g.holders {
                if let Some(entry) = pods.get(h) {
                    let util = g.utilisation_percent.unwrap_or(0.0) * weight(h) / total;
                    used.entry(entry.clone()).or_default().push((g.index, util));
                }
            }
        }
        let mut real: HashMap<JobId, Vec<u32>> = HashMap::new();
        for (entry, gpus) in used {
            let Some(m) = self.jobs.get_mut(&entry) else { continue };
            let Some(state) = world.state_mut(m.job.handle).filter(|s| s.is_running()) else { continue };
            m.gpu_use.retain(|(g, _)| g.node != node && state.gpus.iter().any(|h| h.node == g.node));
            m.gpu_use.extend(gpus.iter().map(|&(index, util)| (GpuSlot { node, index }, util)));
            state.gpu_used_percent = m.gpu_use.iter().map(|(_, u)| u).sum::<f32>() / m.gpu_use.len() as f32;
            real.insert(m.job.handle, gpus.iter().map(|&(index, _)| index).collect());
        }
        let held = held_on(node, world);
        // A pod whose GPUs come through claims holds the devices the host allocated to them:
        // its book is right, whatever the page says or has not said yet (a copy's new pod
        // name, say), and no other job is moved onto them.
        for (job, gpus) in &held {
            let m = self.uid_of(*job).and_then(|uid| self.jobs.get(&uid));
            if m.and_then(|m| self.pod_of(m)).is_some_and(|p| super::dra::Dra::uses_claims(&p)) {
                real.insert(*job, gpus.clone());
            }
        }
        rebook(node, reseat(self.nodes[node.index()].gpus, &held, &real), world);
    }

    /// Log the nodes whose exporters failed, one line per cause.
    pub(super) fn log_exporter_failures(&mut self, failed: Vec<(usize, String)>) {
        let failed: Vec<(&str, String)> =
            failed.into_iter().map(|(i, why)| (self.nodes[i].name.as_str(), why)).collect();
        poll::log_causes(&mut self.logged, "dcgm-why", &failed, |nodes, more, why| {
            tracing::warn!(
                nodes,
                more,
                why,
                "cannot read these nodes' GPU exporters; their GPUs' use stays as last read, each is asked again later and later (up to 5 min), and other nodes failing for the same reason are not logged again"
            );
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jobs(held: &[(u32, &[u32])]) -> Vec<(JobId, Vec<u32>)> {
        held.iter().map(|(j, g)| (JobId(*j), g.to_vec())).collect()
    }

    #[test]
    fn a_named_job_takes_its_real_gpus_and_one_in_the_way_moves_to_a_free_one() {
        // The host booked job 1 on GPU 0 and job 2 on GPU 1; the device plugin gave job 1 GPU 1.
        let named = HashMap::from([(JobId(1), vec![1])]);
        let changed = reseat(4, &jobs(&[(1, &[0]), (2, &[1])]), &named);
        assert_eq!(changed, jobs(&[(1, &[1]), (2, &[0])]), "job 2 to the lowest GPU no one holds");
        let named = HashMap::from([(JobId(1), vec![0])]);
        assert!(reseat(4, &jobs(&[(1, &[0]), (2, &[1])]), &named).is_empty(), "the book was right");
    }

    #[test]
    fn a_job_named_on_fewer_or_other_gpus_than_it_holds_keeps_its_own() {
        let held = jobs(&[(1, &[0, 1]), (2, &[2])]);
        assert!(reseat(4, &held, &HashMap::from([(JobId(1), vec![3])])).is_empty(), "one of its two");
        assert!(reseat(4, &held, &HashMap::from([(JobId(2), vec![7])])).is_empty(), "a GPU the node lacks");
        // Two jobs named on the same GPU share it.
        let named = HashMap::from([(JobId(1), vec![2, 3]), (JobId(2), vec![3])]);
        assert_eq!(reseat(4, &held, &named), jobs(&[(1, &[2, 3]), (2, &[3])]));
        // One not named moves off a GPU the page gives another.
        let named = HashMap::from([(JobId(1), vec![2, 3])]);
        assert_eq!(reseat(4, &held, &named), jobs(&[(1, &[2, 3]), (2, &[0])]));
    }

    #[test]
    fn jobs_past_a_count_that_shrank_move_below_it_and_the_rest_stay() {
        // Another scheduler's pod took two of the node's four GPUs: jobs on 1 and 3 of the old four.
        let held = jobs(&[(1, &[1]), (2, &[3])]);
        assert_eq!(reseat(2, &held, &HashMap::new()), jobs(&[(2, &[0])]), "job 1 stays on 1, job 2 to 0");
        // No room below: it keeps what it had (the cluster is overbooked; the kubelet decides).
        let full = jobs(&[(1, &[0, 1]), (2, &[3])]);
        assert!(reseat(2, &full, &HashMap::new()).is_empty());
    }

    #[test]
    fn the_table_is_checked_and_says_what_to_write() {
        let table: GpuTelemetryConfig = toml::from_str("").unwrap();
        assert_eq!(table, GpuTelemetryConfig::default());
        assert_eq!((table.namespace.as_str(), table.port, table.check()), ("gpu-operator", 9400, Ok(())));
        let typo = toml::from_str::<GpuTelemetryConfig>("prot = 9400").unwrap_err().to_string();
        assert!(typo.contains("unknown field `prot`"), "{typo}");
        let path = GpuTelemetryConfig { path: "metrics".into(), ..GpuTelemetryConfig::default() };
        assert!(path.check().unwrap_err().contains("e.g. \"/metrics\""));
        let port = GpuTelemetryConfig { port: 0, ..GpuTelemetryConfig::default() };
        assert!(port.check().unwrap_err().contains("port"));
        let selector = GpuTelemetryConfig { selector: " ".into(), ..GpuTelemetryConfig::default() };
        assert!(selector.check().unwrap_err().contains("app=nvidia-dcgm-exporter"));
        let service: GpuTelemetryConfig = toml::from_str("service = \"nvidia-dcgm-exporter\"").unwrap();
        assert_eq!((service.service.as_deref(), service.check()), (Some("nvidia-dcgm-exporter"), Ok(())));
        let blank = GpuTelemetryConfig { service: Some("".into()), ..GpuTelemetryConfig::default() };
        assert!(blank.check().unwrap_err().contains("Service's name"));
    }

    fn slice(ports: serde_json::Value, endpoints: serde_json::Value) -> Arc<EndpointSlice> {
        let slice = serde_json::json!({"metadata": {"name": "s"}, "addressType": "IPv4", "ports": ports, "endpoints": endpoints});
        Arc::new(serde_json::from_value(slice).unwrap())
    }

    fn endpoint(pod: &str, node: &str, ip: &str, conditions: serde_json::Value) -> serde_json::Value {
        serde_json::json!({"addresses": [ip], "nodeName": node, "conditions": conditions,
            "targetRef": {"kind": "Pod", "name": pod, "namespace": "gpu-operator"}})
    }

    #[test]
    fn a_services_ready_endpoints_are_its_nodes_exporters_on_the_port_they_name() {
        let ready = serde_json::json!({"ready": true});
        let endpoints = serde_json::json!([
            endpoint("dcgm-b", "n1", "10.0.0.2", ready.clone()),
            endpoint("dcgm-a", "n1", "10.0.0.1", ready.clone()),
            endpoint("dcgm-c", "n2", "10.0.0.3", serde_json::json!({"ready": false})),
            endpoint("dcgm-d", "n3", "10.0.0.4", serde_json::json!({"ready": true, "terminating": true})),
            endpoint("dcgm-e", "n4", "10.0.0.5", serde_json::json!({})),
            {"addresses": ["10.0.0.6"], "nodeName": "n5"},
        ]);
        let found = ready_endpoints(
            &[slice(serde_json::json!([{"name": "gpu-metrics", "port": 9500}]), endpoints.clone())],
            9400,
        );
        let at = |pod: &str, ip: &str, port| Exporter { pod: pod.into(), ip: ip.into(), port };
        assert_eq!(
            found.get("n1"),
            Some(&at("dcgm-a", "10.0.0.1", 9500)),
            "the first by pod name, on the slice's port"
        );
        assert_eq!(found.get("n4"), Some(&at("dcgm-e", "10.0.0.5", 9500)), "readiness unknown counts as ready");
        assert_eq!(found.len(), 2, "not unready, terminating, or without a pod: {found:?}");
        let two_ports = serde_json::json!([{"port": 9500}, {"port": 9401}]);
        let found = ready_endpoints(&[slice(two_ports, endpoints)], 9400);
        assert_eq!(found["n1"].port, 9400, "two ports: the configured one");
    }

    #[test]
    fn the_exporters_model_and_memory_stand_in_only_where_labels_say_nothing() {
        let seen = Seen { model: "NVIDIA-A100-SXM4-80GB".into(), memory_bytes: 80 << 30 };
        let node = |gpu_type: &str, gpu_memory_bytes: Vec<u64>| wit::Node {
            name: "vm".into(),
            cpu_millicores: 0,
            memory_bytes: 0,
            gpu_memory_bytes,
            gpu_type: gpu_type.into(),
            labels: Vec::new(),
            domains: Vec::new(),
        };
        let mut bare = node("", vec![0, 0]);
        fill(&mut bare, Some(&seen));
        assert_eq!(
            (bare.gpu_type.as_str(), bare.gpu_memory_bytes),
            ("NVIDIA-A100-SXM4-80GB", vec![80 << 30, 80 << 30])
        );
        let mut labelled = node("a100", vec![40 << 30]);
        fill(&mut labelled, Some(&seen));
        assert_eq!((labelled.gpu_type.as_str(), labelled.gpu_memory_bytes), ("a100", vec![40 << 30]));
    }
}
