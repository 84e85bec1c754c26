//! The Kubernetes backend: pods on a real cluster, through kube-rs. The host is the cluster's
//! scheduler for the pods that name it, and their resource manager.
//!
//! - **Which pods.** Those in the configured namespace that carry the selector label
//!   (`wasmsched.managed=true` by default). Their labels and annotations declare them exactly
//!   as a container's labels do ([`wasmsched_core::declare`]; an annotation wins over a label, and
//!   values a label cannot hold, such as `wasmsched.tiers=0.8,0.9`, go in annotations). The
//!   GPUs a pod asks for are its `nvidia.com/gpu` requests, or its DRA claims' devices. Every
//!   node is a node, in name order; its allocatable CPU, memory and `nvidia.com/gpu`, and the
//!   whole GPUs its ResourceSlices publish, are its capacity.
//! - **Devices through DRA** (`dra.rs`): a pod's ResourceClaims are allocated by the host on
//!   the node it binds the pod to, before the bind (CEL selectors, constraints, counters), and
//!   released when a re-created pod is gone.
//! - **Queued, placed, preempted.** A pod with `schedulerName` set to ours (`wasmsched`) and
//!   no node is a queued job; *placing* it binds it to the chosen node (the `binding`
//!   subresource; the device plugin chooses which GPUs there, so the GPU indices are the
//!   host's bookkeeping). A bound pod is a running job. *Preempting* it makes a copy of the
//!   pod, unbound (queued, `wasmsched.wait=preempted`, its attained service in annotations),
//!   then deletes the original and waits until it is gone, so its last checkpoint is final;
//!   *migrating* does the same and then binds the copy to the target node; *resizing* is a
//!   migration whose copy's main container asks for the new `nvidia.com/gpu` count and is told
//!   the batch size in force (`WASMSCHED_BATCH_SIZE`, kept in the pod's
//!   `wasmsched.batch-size-in-force` annotation, which the world's batch size is read from),
//!   bound to the one node the resize names (a resize spread over nodes is refused: a pod runs
//!   on one). A copy is bound once every pod its decision takes away is gone. The checkpoint
//!   must lie on a volume that outlives the pod. The copy keeps the job's handle, its name
//!   (`wasmsched.job-name`) and its arrival; `wasmsched.replaces` names the original's uid, so
//!   a copy a stopped host left half-made is settled by the next: while its original still
//!   runs it is deleted. Without a placing policy the default placement binds queued pods
//!   first come, first served, first fit on a Ready node.
//! - **Groups.** The pods of a pod group (the upstream `PodGroup`, Kueue's, coscheduling's or
//!   Volcano's declaration: [`group`]) are one job once they all exist, bound whole or not at
//!   all; a group found partly bound has its bound pods taken back at once; preempt and stop
//!   act on every pod.
//! - **World.** Pods and nodes through watches (a reflector each: one list, then changes,
//!   and a fresh list whenever the watch breaks), never a poll of every pod per tick; what the
//!   host never reads (managed fields, a node's image list) is dropped before it is stored.
//!   Progress from each running pod's `wasmsched.progress` annotation when the job writes its
//!   records there (no request by the host), else from its log stream (its first container),
//!   in Docker's line formats, with the apiserver's timestamps, for at most `max-log-streams`
//!   pods at once; a stream is followed again from after the last line read when it ends,
//!   when it was quiet for half a minute, and after a resize: a log file started afresh under
//!   a stream leaves it hearing nothing more (the test cluster does this, as one node's
//!   kubelet removes the other's log directories), and it resumes from an absolute time, as an
//!   apiserver may take seconds to answer. A stream that will not open is tried again later
//!   and later. CPU and memory use from each node's kubelet summary (`/stats/summary`, through
//!   the apiserver's node proxy, or from the kubelet directly where the apiserver will not
//!   proxy to it), read every 10 s (the kubelet's own refresh period), 16 nodes at most at
//!   once, with a backoff per node that fails. With `[backend.gpu-telemetry]`, GPU use from
//!   NVIDIA's dcgm-exporter pod on those nodes, read the same way (through the apiserver's pod
//!   proxy, else from the pod's IP; [`gpus`], [`dcgm`]): each GPU's utilisation and memory, each
//!   job's GPU use, and the GPU indices its pod really holds. A tick waits at most a quarter
//!   second for both: a kubelet or an exporter that hangs delays its own node's figures, never
//!   the loop.
//! - **Actions** pass one [`gate`] that bounds the requests in flight and adapts to the
//!   apiserver's load; the tick waits a quarter second for their answers and goes on, the rest
//!   landing at later observations (a placement in flight shows as bound meanwhile).
//!   `set-cpu` and `set-memory` patch the `resize` subresource (in place, no
//!   restart; a lifted limit is the node's allocatable); what Kubernetes would refuse (a
//!   change of QoS class, a resize policy that restarts the container, a limit below the
//!   request) is refused first, saying what to change. `deliver` execs the declared command
//!   in the pod; `stop` deletes it; `preempt`, `migrate` and `resize` re-create it (above);
//!   `set-gpu-share` re-creates a pod whose GPUs come through claims with the share in its
//!   copy's allocation config, and is refused for the rest (the device plugin gives whole
//!   GPUs).
//! - **Faults.** The apiserver going away: the watches retry with backoff, every job stays as
//!   last seen, the cause is logged once, and when it answers the watches list again and the
//!   log streams resume after the last line read. A pod deleted behind the host's back leaves
//!   at the next observation; a node going NotReady is logged once and its pods are kept.

mod actions;
mod adopt;
mod config;
pub mod dcgm;
mod dra;
mod follow;
mod gangs;
pub mod gate;
pub mod gpus;
pub mod group;
mod keep;
pub mod lease;
mod nodes;
mod observe;
pub mod pod;
mod poll;
mod queue;
pub mod resource;
pub mod stats;
mod usage;

pub use config::{DEFAULT_SCHEDULER, DEFAULT_TOPOLOGY, KubernetesConfig, KubernetesSetupError};
pub use dra::sharing;
pub use follow::PROGRESS;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};

use wasmsched_core::backend::{
    ApplyError, Backend, DefaultPlacement, Endpoint, Held, Placer, Progress, Status, filled,
};
use wasmsched_core::bindings::wit;
use wasmsched_core::live::{self, Clock, Logged, progress};
use wasmsched_core::replicas::{Checkpoint, Leadership, Replicas};
use wasmsched_core::world::{JobId, World};

pub use wasmsched_core::live::DEFAULT_SELECTOR;

/// When the default placement may try a bind again after `failures` in a row that the
/// apiserver did not answer: a second, doubled per failure, at most a minute.
fn bind_backoff(failures: u32) -> Duration {
    backoff(Duration::from_secs(1), failures, Duration::from_secs(60))
}

/// `first` doubled for each of `failures`, at most `most`: how long each thing retried here
/// (a bind, a kubelet summary, a log stream) waits before its next try.
fn backoff(first: Duration, failures: u32, most: Duration) -> Duration {
    first.saturating_mul(1 << failures.min(16)).min(most)
}

/// Who asked for an action: the policy, whose failures it hears of, or the default placement,
/// whose failures the host logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum By {
    Policy,
    Backend,
}

impl Kubernetes {
    /// The GPUs pod `p` asks for: its containers' `nvidia.com/gpu` and its claims' devices.
    fn gpus_asked(&self, p: &Pod) -> u32 {
        pod::gpus_asked(p).saturating_add(self.dra.gpus_asked(p).unwrap_or(0))
    }
}

/// Whether the apiserver answers, as the watches find it.
#[derive(Default)]
struct Health {
    /// Since when a watch fails, and why; None while they succeed.
    down: Option<(Instant, String)>,
}

/// One node as the host knows it: its handle is its place in `Kubernetes::nodes`.
struct NodeEntry {
    name: String,
    cpu_millicores: u64,
    memory_bytes: u64,
    gpus: u32,
    /// How many pods it takes.
    pods: u64,
    labels: Arc<BTreeMap<String, String>>,
    ready: bool,
    /// Its kubelet summary's reads.
    stats: poll::Reads,
    /// Its GPU exporter's reads, with `[backend.gpu-telemetry]`.
    gpu: poll::Reads,
    /// The model and memory of its GPUs as its exporter last reported them: for a node without
    /// GPU Feature Discovery's labels.
    gpu_seen: Option<gpus::Seen>,
    /// Its `resourceVersion` when last read: an unchanged node is not read again.
    version: Option<String>,
    /// The GPUs DRA gave it when last read: a node whose devices changed is read again.
    dra: Option<dra::NodeGpus>,
    /// The device-plugin GPUs (`nvidia.com/gpu`) that pods the host does not manage hold
    /// there, when last read: not the host's to give.
    held_by_others: u32,
}

/// How long a tick waits for the kubelets' summaries; a later answer is read at a later tick.
const STATS_WAIT: Duration = Duration::from_millis(250);

/// How often a node's kubelet summary is read: the kubelet refreshes its pod-level figures
/// about this often, and one request per node per tick would weigh on a large cluster.
const STATS_EVERY: Duration = Duration::from_secs(10);

/// How many times in a row a node's summary is asked for again at the next tick because a pod
/// there is not measured yet (then every [`STATS_EVERY`]: a pod the kubelet never measures
/// does not cost a request a tick).
const STATS_EARLY: u32 = 10;

/// The most kubelet summaries asked for at once (the rest wait their turn, oldest due first).
const STATS_IN_FLIGHT: usize = 16;

/// When node's summary is asked again after `failures` in a row: [`STATS_EVERY`] doubled
/// per failure, at most five minutes.
fn stats_backoff(failures: u32) -> Duration {
    backoff(STATS_EVERY, failures, Duration::from_secs(300))
}

/// One managed pod.
struct Managed {
    /// What every live backend keeps of its jobs.
    job: live::Job,
    /// The pod's current name (a copy has a name of its own).
    name: String,
    /// Its CPU and memory requests, for the default placement.
    requests: (u64, u64),
    /// The labels a node must carry to take it (its `nodeSelector`).
    selector: Arc<BTreeMap<String, String>>,
    /// After a bind the apiserver did not answer: when the default placement may try again,
    /// and the failures so far ([`bind_backoff`]).
    retry: Option<(Instant, u32)>,
    /// The last `wasmsched.progress` annotation read: a pod that reports there is never
    /// followed.
    annotated: Option<String>,
    /// The last cumulative CPU sample (core-ns, Unix ns).
    last_cpu: Option<(u64, u64)>,
    /// Whether its pod's CPU use has been measured (a first sample may come without a rate).
    cpu_measured: bool,
    /// Its GPUs' utilisation (percent) as their exporters last reported it, GPU by GPU.
    gpu_use: Vec<(wasmsched_core::world::GpuSlot, f32)>,
    /// Its log's follower; it ends true when the stream opened. After a migration or a
    /// preemption it is still the original pod's, reading that log to its end: the copy's is
    /// followed once it has ended, so the job's lines come in order.
    follower: Option<tokio::task::JoinHandle<bool>>,
    /// The uid of the pod this one copies: lines its follower still reads are this job's.
    former: Option<Arc<str>>,
    /// After streams that would not open: when to try again, and the failures in a row.
    follow_retry: Option<(Instant, u32)>,
    /// The pod's `resourceVersion` when it was last read: an unchanged pod is not read again.
    version: Option<String>,
    /// Whether the observation under way has found its pod.
    present: bool,
    /// For a group's job: its pods, piece by piece (the entry's pod, whose log is the job's
    /// progress, is the first). Its entry is kept under [`group::GroupKey::entry`], not a uid.
    gang: Option<group::Gang>,
}

impl Managed {
    /// Job `job`, carried by the pod `name` (a group's leader) asking `requests` of a node that
    /// carries the labels of `selector`: present, not yet read, followed or measured.
    fn new(job: live::Job, name: String, requests: (u64, u64), selector: Arc<BTreeMap<String, String>>) -> Managed {
        Managed {
            job,
            name,
            requests,
            selector,
            retry: None,
            annotated: None,
            last_cpu: None,
            cpu_measured: false,
            gpu_use: Vec::new(),
            follower: None,
            former: None,
            follow_retry: None,
            version: None,
            present: true,
            gang: None,
        }
    }
}

/// Pods on a Kubernetes cluster; see the module docs.
pub struct Kubernetes {
    rt: tokio::runtime::Runtime,
    config: KubernetesConfig,
    /// The client's settings, for a direct client to a kubelet.
    kube_config: kube::Config,
    client: Client,
    /// Requests made to the apiserver (every one through `client`).
    requests: Arc<AtomicU64>,
    /// What every action's requests pass through ([`gate`]).
    gate: gate::Gate,
    /// Actions not yet answered when their tick went on; taken at the next observations.
    flight: Vec<actions::Flight>,
    /// Actions of the policy's from earlier ticks that failed since, not yet reported.
    late: Vec<ApplyError>,
    pods: Store<Pod>,
    /// Every pod bound to a node and not ended that the host does not manage, in every
    /// namespace, trimmed to its node and requests: what other schedulers' pods take of a
    /// node's room ([`bound_pods`]).
    bound: Vec<Store<Pod>>,
    node_store: Store<Node>,
    /// The `PodGroup` objects that size the pod groups.
    podgroups: group::PodGroups,
    /// ResourceSlices, DeviceClasses and ResourceClaims: devices through DRA.
    dra: Arc<dra::Dra>,
    /// The pod groups not yet whole at the last observation, and why, by name.
    held: BTreeMap<String, String>,
    /// The uids of group pods taken back and not yet gone from the watch's view: never copied
    /// twice.
    taken: std::collections::HashSet<String>,
    health: Arc<Mutex<Health>>,
    nodes: Vec<NodeEntry>,
    /// Node handles by name.
    node_names: HashMap<String, usize>,
    /// Clients to kubelets reached directly, by node name.
    kubelets: HashMap<String, Client>,
    /// The GPU exporters, with `[backend.gpu-telemetry]`.
    exporters: Option<gpus::Exporters>,
    /// By pod uid.
    jobs: BTreeMap<Arc<str>, Managed>,
    /// Pod uids by job handle.
    uids: HashMap<JobId, Arc<str>>,
    inbox: progress::Inbox,
    clock: Clock,
    /// Causes already logged, so each is logged once.
    logged: Logged,
    placer: Placer,
    /// This replica's candidacy, with `[backend.election]`, from its first warm observation.
    election: Option<lease::Election>,
    /// Until then, the Lease to campaign for and this replica's identity.
    candidate: Option<(Api<k8s_openapi::api::coordination::v1::Lease>, String)>,
    /// The digests of the policies' states kept in the cluster.
    kept: keep::Kept,
    /// Whether this replica acted at the last observation.
    acted: bool,
}

impl Kubernetes {
    /// Load the cluster's configuration and start watching its pods and nodes. The apiserver
    /// need not answer yet: the watches retry with backoff.
    pub fn new(config: KubernetesConfig) -> Result<Kubernetes, KubernetesSetupError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("wasmsched-kube")
            .enable_all()
            .build()
            .map_err(KubernetesSetupError::Runtime)?;
        let kube_config = rt.block_on(load_config(config.kubeconfig.as_deref()))?;
        let requests = Arc::new(AtomicU64::new(0));
        let client = {
            let _entered = rt.enter();
            let counted = requests.clone();
            let count = tower::util::MapRequestLayer::new(move |r: http::Request<kube::client::Body>| {
                counted.fetch_add(1, Ordering::Relaxed);
                r
            });
            kube::client::ClientBuilder::try_from(kube_config.clone())
                .map_err(|e| KubernetesSetupError::Client(e.to_string()))?
                .with_layer(&count)
                .build()
        };
        let health = Arc::new(Mutex::new(Health::default()));
        let pods_api: Api<Pod> = Api::namespaced(client.clone(), &config.namespace);
        let pods = watch(&rt, pods_api, watcher::Config::default().labels(&config.selector), health.clone(), |p| {
            p.managed_fields_mut().clear();
        });
        let node_store =
            watch(&rt, Api::<Node>::all(client.clone()), watcher::Config::default(), health.clone(), |n| {
                // Of a node the host reads its name, capacity, readiness, taints and addresses: the
                // rest (its images, most of all) is thousands of nodes' worth of memory.
                n.managed_fields_mut().clear();
                if let Some(status) = n.status.as_mut() {
                    status.images = None;
                    status.volumes_attached = None;
                    status.volumes_in_use = None;
                }
            });
        let bound = bound_pods(&rt, &client, &config, &health);
        let podgroups = group::PodGroups::watch(&rt, &client, &config.namespace);
        let dra = Arc::new(dra::Dra::watch(&rt, &client, &config));
        let exporters = config.gpu_telemetry.as_ref().map(|g| gpus::Exporters::watch(&rt, &client, g));
        let candidate = config.election.as_ref().map(|e| {
            let namespace = e.namespace.clone().unwrap_or_else(|| kube_config.default_namespace.clone());
            (Api::namespaced(client.clone(), &namespace), e.identity())
        });
        Ok(Kubernetes {
            rt,
            election: None,
            candidate,
            kept: keep::Kept::default(),
            acted: false,
            config,
            kube_config,
            client,
            requests,
            gate: gate::Gate::default(),
            flight: Vec::new(),
            late: Vec::new(),
            pods,
            bound,
            node_store,
            podgroups,
            dra,
            held: BTreeMap::new(),
            taken: Default::default(),
            health,
            nodes: Vec::new(),
            node_names: HashMap::new(),
            kubelets: HashMap::new(),
            exporters,
            jobs: BTreeMap::new(),
            uids: HashMap::new(),
            inbox: progress::Inbox::default(),
            clock: Clock::default(),
            logged: Logged::default(),
            placer: Placer::Backend,
        })
    }

    /// Whether the apiserver answered the watches at their last try, and both have listed.
    pub fn apiserver_up(&self) -> bool {
        let (pods, nodes) = self.listed();
        pods && nodes && self.health.lock().expect("health lock").down.is_none()
    }

    /// Whether the pods' and the nodes' watches have listed once (their stores are whole); the
    /// nodes count as listed once the other pods bound to them have too (their room is known).
    fn listed(&self) -> (bool, bool) {
        use futures_util::FutureExt;
        let ready = |s: &Store<Pod>| s.wait_until_ready().now_or_never().is_some_and(|r| r.is_ok());
        let nodes = self.node_store.wait_until_ready().now_or_never().is_some_and(|r| r.is_ok());
        (ready(&self.pods), nodes && self.bound.iter().all(ready))
    }

    fn pods_api(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.config.namespace)
    }

    /// The managed namespace's ResourceClaims.
    fn claims_api(&self) -> Api<k8s_openapi::api::resource::v1::ResourceClaim> {
        Api::namespaced(self.client.clone(), &self.config.namespace)
    }

    /// The managed pod `handle`, by uid.
    fn uid_of(&self, handle: JobId) -> Option<Arc<str>> {
        self.uids.get(&handle).cloned()
    }

    /// The node handle of the node named `name`.
    fn node_index(&self, name: &str) -> Option<usize> {
        self.node_names.get(name).copied()
    }

    /// The managed pod `m` as the watch holds it now.
    fn pod_of(&self, m: &Managed) -> Option<Arc<Pod>> {
        self.pods.get(&reflector::ObjectRef::new(&m.name).within(&self.config.namespace))
    }

    /// Manage pod `uid` as `m` (its job's entry, whichever pod carries the job now).
    fn manage(&mut self, uid: Arc<str>, m: Managed) {
        self.uids.insert(m.job.handle, uid.clone());
        self.jobs.insert(uid, m);
    }

    /// Whether this host acts now: it runs no election, or its candidacy holds the lead (not
    /// one waiting for a warm world, nor one that stepped down).
    pub fn leads(&self) -> bool {
        self.config.election.is_none() || self.election.as_ref().is_some_and(lease::Election::leading)
    }

    /// Stop managing pod `uid`; its entry.
    fn unmanage(&mut self, uid: &str) -> Option<Managed> {
        let m = self.jobs.remove(uid)?;
        if self.uids.get(&m.job.handle).is_some_and(|u| &**u == uid) {
            self.uids.remove(&m.job.handle);
        }
        Some(m)
    }
}

impl Backend for Kubernetes {
    fn set_placer(&mut self, by: Placer) {
        self.placer = by;
    }

    fn observe(&mut self, world: &mut World, until_ms: u64) -> bool {
        self.observe_at(world, until_ms);
        true
    }

    fn apply(&mut self, actions: &[wit::Action], world: &mut World) -> Vec<ApplyError> {
        if !self.leads() {
            // The lead was lost between the observation and now: nothing goes out.
            let reason = "this replica lost the lead before the action went out; the new leader decides again";
            return actions.iter().map(|a| ApplyError { job: a.job, reason: reason.into() }).collect();
        }
        self.apply_from(actions, world, By::Policy)
    }

    fn settled(&mut self) -> Vec<ApplyError> {
        std::mem::take(&mut self.late)
    }

    fn placement(&mut self) -> Option<&mut dyn DefaultPlacement> {
        Some(self)
    }

    fn status(&self) -> Option<&dyn Status> {
        Some(self)
    }

    fn progress(&self) -> Option<&dyn Progress> {
        Some(self)
    }

    fn replicas(&self) -> Option<&dyn Replicas> {
        self.config.election.is_some().then_some(self as &dyn Replicas)
    }

    fn replicas_mut(&mut self) -> Option<&mut dyn Replicas> {
        self.config.election.is_some().then_some(self as &mut dyn Replicas)
    }
}

/// Its jobs' progress is what they report; a new GPU share is a new pod (through its claims).
impl Progress for Kubernetes {
    fn gpu_share_restarts(&self) -> bool {
        true
    }
}

impl DefaultPlacement for Kubernetes {
    fn startable(&self, world: &World) -> Vec<JobId> {
        Kubernetes::startable(self, world)
    }

    fn rescue(&mut self, jobs: &[JobId], world: &mut World) -> Vec<JobId> {
        if !self.apiserver_up() || !self.leads() {
            return Vec::new();
        }
        self.place_queued(world, Some(jobs))
    }
}

impl Status for Kubernetes {
    fn endpoints(&self) -> Vec<Endpoint> {
        let up = self.apiserver_up();
        let h = self.health.lock().expect("health lock");
        vec![Endpoint {
            kind: "apiserver".into(),
            name: self.kube_config.cluster_url.to_string(),
            up,
            jobs: self.jobs.len() as u32,
            down_for_ms: h.down.as_ref().map(|(since, _)| since.elapsed().as_millis() as u64),
            requests: Some(self.requests.load(Ordering::Relaxed)),
            in_flight: Some(self.flight.len() as u64),
        }]
    }

    fn held(&self) -> Vec<Held> {
        let held = self.held.iter();
        held.map(|(name, reason)| Held { name: name.clone(), reason: reason.clone() }).collect()
    }
}

/// With `[backend.election]`: one replica of the host leads (a Lease), the others stand by;
/// the policies' states are kept in Secrets for the next leader (`lease.rs`, `keep.rs`).
impl Replicas for Kubernetes {
    fn leadership(&self) -> Leadership {
        let lease = self.config.election.as_ref().map_or("", |e| &e.lease[..]);
        match (&self.election, &self.candidate) {
            (Some(e), _) => e.leadership(),
            (None, candidate) => Leadership {
                identity: candidate.as_ref().map(|(_, id)| id.clone()).unwrap_or_default(),
                lease: format!("{}/{}", candidate.as_ref().and_then(|(api, _)| api.namespace()).unwrap_or("?"), lease),
                ..Leadership::default()
            },
        }
    }

    fn leads(&self) -> bool {
        Kubernetes::leads(self)
    }

    fn keep_every(&self) -> u64 {
        self.config.election.as_ref().map_or(0, |e| e.checkpoint_every)
    }

    fn keep(&mut self, checkpoints: &[Checkpoint]) {
        if self.leads() {
            self.keep_checkpoints(checkpoints);
        }
    }

    fn kept(&mut self) -> Vec<Checkpoint> {
        self.kept_checkpoints()
    }

    fn step_down(&mut self) {
        self.candidate = None;
        if let Some(e) = self.election.as_mut() {
            e.step_down(&self.rt, self.config.timeout);
        }
    }
}

/// The cluster's configuration: from `path`, else inferred (KUBECONFIG, ~/.kube/config, the
/// in-cluster service account).
pub(crate) async fn load_config(path: Option<&std::path::Path>) -> Result<kube::Config, KubernetesSetupError> {
    let failed = |e: &dyn std::fmt::Display| KubernetesSetupError::Config(e.to_string());
    match path {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| KubernetesSetupError::Config(format!("{}: {e}", path.display())))?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| failed(&e))
        }
        None => kube::Config::infer().await.map_err(|e| failed(&e)),
    }
}

/// The watches of the pods bound to a node that the host does not manage: those of every other
/// namespace, and those of the managed namespace outside the managed selector when it can be
/// negated (`key=value`, `key`); else every bound pod, the managed ones skipped when counted.
fn bound_pods(
    rt: &tokio::runtime::Runtime,
    client: &Client,
    config: &KubernetesConfig,
    health: &Arc<Mutex<Health>>,
) -> Vec<Store<Pod>> {
    const BOUND: &str = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed";
    let trim = |p: &mut Pod| {
        // Of another pod the host reads its node and its containers' requests alone.
        p.managed_fields_mut().clear();
        p.metadata.annotations = None;
        p.metadata.labels = None;
        p.status = None;
        if let Some(spec) = p.spec.as_mut() {
            (spec.init_containers, spec.volumes, spec.affinity, spec.tolerations) = (None, None, None, None);
            for c in &mut spec.containers {
                (c.env, c.command, c.args, c.volume_mounts) = (None, None, None, None);
                (c.liveness_probe, c.readiness_probe, c.startup_probe) = (None, None, None);
            }
        }
    };
    let all = Api::<Pod>::all(client.clone());
    let Some(others) = negated(&config.selector) else {
        return vec![watch(rt, all, watcher::Config::default().fields(BOUND), health.clone(), trim)];
    };
    let elsewhere = format!("{BOUND},metadata.namespace!={}", config.namespace);
    let here = Api::<Pod>::namespaced(client.clone(), &config.namespace);
    vec![
        watch(rt, all, watcher::Config::default().fields(&elsewhere), health.clone(), trim),
        watch(rt, here, watcher::Config::default().fields(BOUND).labels(&others), health.clone(), trim),
    ]
}

/// The label selector of the pods `selector` does not select, for a selector of one term
/// (`key=value`, `key==value`, `key`); None for any other.
fn negated(selector: &str) -> Option<String> {
    let s = selector.trim();
    if s.contains([',', '!', '(', ' ']) {
        return None;
    }
    match s.split_once("==").or_else(|| s.split_once('=')) {
        Some((key, value)) if !key.is_empty() => Some(format!("{key}!={value}")),
        Some(_) => None,
        None if !s.is_empty() => Some(format!("!{s}")),
        None => None,
    }
}

/// A reflector of `api`'s objects, each trimmed by `trim` before it is stored, kept up to date
/// on the runtime; it lists again whenever the watch breaks, with backoff, and reports whether
/// the apiserver answers.
fn watch<K>(
    rt: &tokio::runtime::Runtime,
    api: Api<K>,
    config: watcher::Config,
    health: Arc<Mutex<Health>>,
    trim: fn(&mut K),
) -> Store<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher::watcher(api, config).default_backoff().modify(trim));
    rt.spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            let mut h = health.lock().expect("health lock");
            match event {
                Ok(_) => h.down = None,
                Err(e) => {
                    if h.down.is_none() {
                        h.down = Some((Instant::now(), e.to_string()));
                    }
                }
            }
        }
    });
    store
}

/// `fut`, failing after `limit`.
async fn within<T>(limit: Duration, fut: impl Future<Output = Result<T, kube::Error>>) -> Result<T, kube::Error> {
    live::within(limit, fut, || kube::Error::Service(format!("no answer within {limit:?}").into())).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_one_term_selector_is_negated_and_any_other_is_not() {
        assert_eq!(negated("wasmsched.managed=true").as_deref(), Some("wasmsched.managed!=true"));
        assert_eq!(negated("team==a").as_deref(), Some("team!=a"));
        assert_eq!(negated("managed").as_deref(), Some("!managed"));
        for other in ["a=1,b=2", "a!=1", "env in (x)", "", "=x"] {
            assert_eq!(negated(other), None, "{other}");
        }
    }

    #[test]
    fn backoffs_double_and_stop_at_their_ceiling() {
        let binds: Vec<u64> = (0..9).map(|n| bind_backoff(n).as_secs()).collect();
        assert_eq!(binds, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        let stats: Vec<u64> = (1..8).map(|n| stats_backoff(n).as_secs()).collect();
        assert_eq!(stats, [20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(stats_backoff(u32::MAX), Duration::from_secs(300));
    }
}
