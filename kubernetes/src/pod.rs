//! Pods as jobs, pure: what a pod declares, where it stands, what it asks for, the resize a
//! limit becomes (and what Kubernetes would refuse), and the spec of the pod that carries a
//! job on after a preemption, a migration or a resize. Unit-tested against pod JSON.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Container, EnvVar, Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::json;

use wasmsched_core::declare::{self, Declared};
use wasmsched_core::live::carried::{
    ARRIVED, BATCH_IN_FORCE, BATCH_SIZE_ENV, GPU_MS, RANK_ENV, REPLACES, RUN_MS, WAIT, WORLD_SIZE_ENV,
};

/// The extended resource GPUs are counted by (the NVIDIA device plugin's).
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// Annotation: the job's name, kept by every copy of its pod (a copy's pod has a name of its
/// own).
pub const JOB_NAME: &str = "wasmsched.job-name";

/// Annotation and label: a group's pod's rank, set on every pod the host re-creates for a
/// group; the group's pods are in rank order, and a Service can select rank 0 by the label.
pub const RANK: &str = "wasmsched.rank";

/// Annotation: how many pods the group has, set on every pod the host re-creates for a group
/// (after a resize to another pod count, it is the group's size from then on).
pub const GROUP_SIZE: &str = "wasmsched.group-size";

/// Annotation: how many pods a Kueue plain-pod group has.
pub const KUEUE_TOTAL: &str = "kueue.x-k8s.io/pod-group-total-count";

/// torchrun's rank and world size variables, rewritten in a group's copies where the pod
/// sets them.
const TORCHRUN_ENV: [&str; 2] = ["RANK", "WORLD_SIZE"];

/// Where a pod stands, for the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stand {
    /// Bound to a node: a running job (its containers may still be starting).
    Bound(String),
    /// Unbound and for our scheduler: a queued job.
    Queued,
    /// Unbound and for another scheduler: not ours to place; not a job until it is bound.
    Elsewhere(String),
    /// Succeeded, failed, or being deleted: the job has ended.
    Ended,
}

/// Where `pod` stands, when `scheduler` is our scheduler's name.
pub fn stand(pod: &Pod, scheduler: &str) -> Stand {
    if pod.metadata.deletion_timestamp.is_some() {
        return Stand::Ended;
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return Stand::Ended;
    }
    let spec = pod.spec.as_ref();
    match spec.and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty()) {
        Some(node) => Stand::Bound(node.to_string()),
        None => {
            let theirs = spec.and_then(|s| s.scheduler_name.as_deref()).unwrap_or("default-scheduler");
            if theirs == scheduler { Stand::Queued } else { Stand::Elsewhere(theirs.to_string()) }
        }
    }
}

/// Whether the pod's containers have started (its logs can be read).
pub fn started(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// A pod's labels and annotations as one map; an annotation wins over a label of the same key
/// (label values cannot hold commas or slashes, so `tiers` and `deliver` are annotations).
pub fn keys(pod: &Pod) -> HashMap<String, String> {
    let mut keys: HashMap<String, String> = pod.metadata.labels.clone().unwrap_or_default().into_iter().collect();
    keys.extend(pod.metadata.annotations.clone().unwrap_or_default());
    keys
}

/// The job's main container: the first one (its logs are the progress, its limits the job's).
pub fn main_container(pod: &Pod) -> Option<&Container> {
    pod.spec.as_ref()?.containers.first()
}

/// What the pod declares, exactly as a container's labels would ([`declare`]); the GPUs it
/// asks for are its containers' `nvidia.com/gpu` requests when it has any, what it requests
/// its containers' CPU and memory requests, and the labels it needs its node selector.
pub fn declared(pod: &Pod) -> Declared {
    let keys = keys(pod);
    let pod_name = pod.metadata.name.as_deref().unwrap_or("");
    let name = keys.get(JOB_NAME).map_or(pod_name, String::as_str);
    let image = main_container(pod).and_then(|c| c.image.as_deref()).unwrap_or("");
    let mut declared = declare::from_labels(name, image, &keys);
    let gpus = gpus_asked(pod);
    if gpus > 0 {
        declared.spec.gpus = gpus;
    }
    let (cpu_millicores, memory_bytes) = requests(pod);
    declared.spec.requests = wasmsched_core::bindings::wit::Resources { cpu_millicores, memory_bytes };
    declared.spec.node_selector = node_selector(pod).into_iter().collect();
    if let Some(namespace) = &pod.metadata.namespace {
        declared.spec.labels.retain(|(k, _)| k != declare::NAMESPACE_LABEL);
        declared.spec.labels.push((declare::NAMESPACE_LABEL.into(), namespace.clone()));
    }
    declared
}

/// The node a pod is bound to.
pub fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

/// The GPUs a pod asks for: the sum of its containers' `nvidia.com/gpu` (limits, which the
/// device plugin allocates by, else requests).
pub fn gpus_asked(pod: &Pod) -> u32 {
    let Some(spec) = &pod.spec else { return 0 };
    let sum: u64 = spec
        .containers
        .iter()
        .filter_map(|c| {
            let r = c.resources.as_ref()?;
            let q = r.limits.as_ref().and_then(|l| l.get(GPU_RESOURCE)).or(r.requests.as_ref()?.get(GPU_RESOURCE))?;
            Some(count(q).unwrap_or(0))
        })
        .sum();
    u32::try_from(sum).unwrap_or(u32::MAX)
}

/// The pod's CPU and memory requests summed over its containers (millicores, bytes): what the
/// default placement fits onto a node's allocatable.
pub fn requests(pod: &Pod) -> (u64, u64) {
    let Some(spec) = &pod.spec else { return (0, 0) };
    spec.containers.iter().fold((0, 0), |(cpu, memory), c| {
        let get = |key: &str| {
            let r = c.resources.as_ref()?;
            r.requests.as_ref().and_then(|q| q.get(key)).or_else(|| r.limits.as_ref()?.get(key)).cloned()
        };
        let m = get("cpu").and_then(|q| millicores(&q)).unwrap_or(0);
        let b = get("memory").and_then(|q| bytes(&q)).unwrap_or(0);
        (cpu.saturating_add(m), memory.saturating_add(b))
    })
}

/// The main container's CPU and memory limits (millicores, bytes); None where it has none.
pub fn limits(pod: &Pod) -> (Option<u64>, Option<u64>) {
    let limits = main_container(pod).and_then(|c| c.resources.as_ref()?.limits.as_ref());
    let get = |key: &str| limits.and_then(|l| l.get(key));
    (get("cpu").and_then(millicores), get("memory").and_then(bytes))
}

/// What the host reads of a node: its allocatable CPU (millicores), memory (bytes), GPUs and
/// pods, whether it is Ready, and its labels (for pods' node selectors).
#[derive(Clone, Debug, PartialEq)]
pub struct NodeFacts {
    /// Its name.
    pub name: String,
    /// Allocatable CPU, millicores.
    pub cpu: u64,
    /// Allocatable memory, bytes.
    pub memory: u64,
    /// Allocatable `nvidia.com/gpu`.
    pub gpus: u32,
    /// How many pods it takes (`pods` allocatable; unlimited when it says nothing).
    pub pods: u64,
    /// Whether it takes pods: its `Ready` condition is True and it is not cordoned
    /// (`spec.unschedulable`).
    pub ready: bool,
    /// Its GPUs' type: label `wasmsched.gpu-type`, else GPU Feature Discovery's
    /// `nvidia.com/gpu.product`; empty when neither is set.
    pub gpu_type: String,
    /// Each GPU's memory from GPU Feature Discovery's `nvidia.com/gpu.memory` (MiB); 0 when
    /// unknown.
    pub gpu_memory_bytes: u64,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
}

/// The node label that names its GPUs' type for policies ("a100", "t4").
pub const GPU_TYPE_LABEL: &str = "wasmsched.gpu-type";

/// What the host reads of `node`.
pub fn node_facts(node: &Node) -> NodeFacts {
    let name = node.metadata.name.clone().unwrap_or_default();
    let status = node.status.as_ref();
    let alloc = status.and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref()));
    let get = |key: &str| alloc.and_then(|a| a.get(key));
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false);
    let labels = node.metadata.labels.as_ref();
    let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
    let gpu_type = label(GPU_TYPE_LABEL).or_else(|| label("nvidia.com/gpu.product")).unwrap_or_default();
    let gpu_memory_mib = label("nvidia.com/gpu.memory").and_then(|m| m.trim().parse::<u64>().ok()).unwrap_or(0);
    NodeFacts {
        name,
        cpu: get("cpu").and_then(millicores).unwrap_or(0),
        memory: get("memory").and_then(bytes).unwrap_or(0),
        gpus: get(GPU_RESOURCE).and_then(count).map_or(0, |g| u32::try_from(g).unwrap_or(u32::MAX)),
        pods: get("pods").and_then(count).unwrap_or(u64::MAX),
        ready: ready && !cordoned,
        gpu_type: gpu_type.chars().take(64).collect(),
        gpu_memory_bytes: gpu_memory_mib.saturating_mul(1 << 20),
        labels: node.metadata.labels.clone().unwrap_or_default(),
    }
}

/// The labels a node must carry for `pod` to go there (its `nodeSelector`).
pub fn node_selector(pod: &Pod) -> BTreeMap<String, String> {
    pod.spec.as_ref().and_then(|s| s.node_selector.clone()).unwrap_or_default()
}

/// Whether a node labelled `labels` satisfies node selector `selector`.
pub fn selects(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// Where a node's kubelet answers directly: its InternalIP and its kubelet port.
pub fn kubelet_address(node: &Node) -> Option<(String, i32)> {
    let status = node.status.as_ref()?;
    let port = status.daemon_endpoints.as_ref()?.kubelet_endpoint.as_ref()?.port;
    let ip = status.addresses.as_ref()?.iter().find(|a| a.type_ == "InternalIP")?.address.clone();
    Some((ip, port))
}

/// A CPU quantity in millicores: `500m`, `2`, `1.5`, `0.25`; None for garbage or a negative.
pub fn millicores(q: &Quantity) -> Option<u64> {
    let text = q.0.trim();
    if let Some(m) = text.strip_suffix('m') {
        return m.parse::<u64>().ok();
    }
    let cores: f64 = text.parse().ok()?;
    (cores.is_finite() && cores >= 0.0).then(|| (cores * 1000.0).round().min(u64::MAX as f64) as u64)
}

/// A memory quantity in bytes: `512Mi`, `1Gi`, `1G`, `1e9`, `2048`, `128974848`; None for
/// garbage or a negative.
pub fn bytes(q: &Quantity) -> Option<u64> {
    let text = q.0.trim();
    let units: [(&str, f64); 12] = [
        ("Ki", 1024.0),
        ("Mi", 1024f64.powi(2)),
        ("Gi", 1024f64.powi(3)),
        ("Ti", 1024f64.powi(4)),
        ("Pi", 1024f64.powi(5)),
        ("Ei", 1024f64.powi(6)),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    let (number, scale) = units
        .iter()
        .find_map(|(suffix, scale)| text.strip_suffix(suffix).map(|n| (n, *scale)))
        .or_else(|| text.strip_suffix('m').map(|n| (n, 1e-3)))
        .unwrap_or((text, 1.0));
    let value: f64 = number.parse().ok()?;
    let b = value * scale;
    (b.is_finite() && b >= 0.0).then(|| b.round().min(u64::MAX as f64) as u64)
}

/// A count quantity (`2`): None for garbage, a fraction or a negative.
fn count(q: &Quantity) -> Option<u64> {
    q.0.trim().parse().ok()
}

/// A pod's quality-of-service class, as Kubernetes derives it from its containers' CPU and
/// memory requests and limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Qos {
    /// Every container has CPU and memory limits equal to its requests.
    Guaranteed,
    /// Something is requested or limited, not all of it equally.
    Burstable,
    /// Nothing is requested or limited.
    BestEffort,
}

/// The QoS class of pods with these containers.
pub fn qos(containers: &[Container]) -> Qos {
    let mut any = false;
    let mut guaranteed = true;
    for c in containers {
        let r = c.resources.as_ref();
        for key in ["cpu", "memory"] {
            let limit = r.and_then(|r| r.limits.as_ref()?.get(key));
            let request = r.and_then(|r| r.requests.as_ref()?.get(key)).or(limit);
            any |= limit.is_some() || request.is_some();
            let same = match (limit, request) {
                (Some(l), Some(q)) if key == "cpu" => millicores(l) == millicores(q),
                (Some(l), Some(q)) => bytes(l) == bytes(q),
                _ => false,
            };
            guaranteed &= same;
        }
    }
    match (any, guaranteed) {
        (false, _) => Qos::BestEffort,
        (true, true) => Qos::Guaranteed,
        (true, false) => Qos::Burstable,
    }
}

/// Which resource a limit is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    /// CPU, in millicores.
    Cpu,
    /// Memory, in bytes.
    Memory,
}

impl Resource {
    fn key(self) -> &'static str {
        match self {
            Resource::Cpu => "cpu",
            Resource::Memory => "memory",
        }
    }

    fn quantity(self, value: u64) -> Quantity {
        match self {
            Resource::Cpu => Quantity(format!("{value}m")),
            Resource::Memory => Quantity(value.to_string()),
        }
    }
}

/// The patch of the `resize` subresource that sets the main container's `resource` limit to
/// `value`, or the reason Kubernetes would refuse it (the host refuses first, saying what to
/// change). A Guaranteed pod's request moves with its limit, so it stays Guaranteed.
pub fn resize(pod: &Pod, resource: Resource, value: u64) -> Result<serde_json::Value, String> {
    let Some(spec) = &pod.spec else { return Err("the pod has no spec".into()) };
    let Some(main) = spec.containers.first() else { return Err("the pod has no container".into()) };
    let key = resource.key();
    let restarts =
        main.resize_policy.iter().flatten().any(|p| p.resource_name == key && p.restart_policy == "RestartContainer");
    if restarts {
        return Err(format!(
            "container {}'s resizePolicy restarts it on a {key} resize, which would lose its progress since the \
             last checkpoint; set its resizePolicy for {key} to NotRequired",
            main.name
        ));
    }
    let before = qos(&spec.containers);
    let mut after = spec.containers.clone();
    let resources = after[0].resources.get_or_insert_with(Default::default);
    resources.limits.get_or_insert_with(BTreeMap::new).insert(key.into(), resource.quantity(value));
    let keep_request = before == Qos::Guaranteed;
    if keep_request {
        resources.requests.get_or_insert_with(BTreeMap::new).insert(key.into(), resource.quantity(value));
    }
    let request_below = resources.requests.as_ref().and_then(|r| r.get(key)).and_then(|q| match resource {
        Resource::Cpu => millicores(q),
        Resource::Memory => bytes(q),
    });
    if let Some(request) = request_below.filter(|&r| r > value) {
        return Err(format!(
            "container {}'s {key} request ({request}) is above the limit asked ({value}); Kubernetes refuses a limit \
             below the request",
            main.name
        ));
    }
    let now = qos(&after);
    if now != before {
        return Err(format!(
            "the pod's QoS class is {before:?} and this limit would make it {now:?}; Kubernetes cannot change a \
             running pod's QoS class: give container {} a {key} request (and limit) when it is created",
            main.name
        ));
    }
    let mut patch = json!({ "limits": { key: resource.quantity(value).0 } });
    if keep_request {
        patch["requests"] = json!({ key: resource.quantity(value).0 });
    }
    Ok(json!({ "spec": { "containers": [ { "name": main.name, "resources": patch } ] } }))
}

/// How the pod that carries a job on differs from its original.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Changes {
    /// Our scheduler's name: the copy waits unbound until it is bound (placed).
    pub scheduler: String,
    /// Whether it waits in the queue after a preemption (`wasmsched.wait=preempted`).
    pub preempted: bool,
    /// The run and GPU time attained so far, milliseconds.
    pub service: (u64, u64),
    /// When the job arrived, Unix ms, if the original does not say.
    pub arrived_unix_ms: u64,
    /// After a resize: the `nvidia.com/gpu` its main container asks for from now on (requests
    /// and limits); None keeps the original's.
    pub gpus: Option<u32>,
    /// After a resize: the global batch size in force, given to the main container as
    /// `WASMSCHED_BATCH_SIZE` and kept in the `wasmsched.batch-size-in-force` annotation; None
    /// keeps the original's.
    pub batch_size: Option<u32>,
    /// For a group's pod: its rank and the group's pod count, given to the main container as
    /// `WASMSCHED_RANK` and `WASMSCHED_WORLD_SIZE` (and torchrun's `RANK` and `WORLD_SIZE`
    /// where it sets them), and kept in the [`RANK`] and [`GROUP_SIZE`] annotations (and
    /// Kueue's total count, where the pod has it).
    pub rank: Option<(u32, u32)>,
    /// The job name the copy keeps, for a group's pod copied from another (its leader's) spec;
    /// None: the original's.
    pub job_name: Option<String>,
}

/// The pod that carries `pod`'s job on: its own spec, unbound, for our scheduler, with the
/// bookkeeping annotations (the uid it replaces, the job's name and arrival, its attained
/// service, whether it waits as preempted, its batch size in force); after a resize, its main
/// container asks for the new GPUs and is told the new batch size; a name made by the
/// apiserver from the job's.
pub fn copy(pod: &Pod, changes: &Changes) -> Pod {
    let meta = &pod.metadata;
    let mut annotations = meta.annotations.clone().unwrap_or_default();
    let job_name = changes
        .job_name
        .clone()
        .or_else(|| annotations.get(JOB_NAME).cloned())
        .or_else(|| meta.name.clone())
        .unwrap_or_default();
    annotations.insert(JOB_NAME.into(), job_name.clone());
    annotations.insert(REPLACES.into(), meta.uid.clone().unwrap_or_default());
    annotations.entry(ARRIVED.into()).or_insert_with(|| changes.arrived_unix_ms.to_string());
    annotations.insert(RUN_MS.into(), changes.service.0.to_string());
    annotations.insert(GPU_MS.into(), changes.service.1.to_string());
    if changes.preempted {
        annotations.insert(WAIT.into(), "preempted".into());
    } else {
        annotations.remove(WAIT);
    }
    if let Some(batch) = changes.batch_size {
        annotations.insert(BATCH_IN_FORCE.into(), batch.to_string());
    }
    if let Some((rank, size)) = changes.rank {
        annotations.insert(RANK.into(), rank.to_string());
        annotations.insert(GROUP_SIZE.into(), size.to_string());
        if let Some(total) = annotations.get_mut(KUEUE_TOTAL) {
            *total = size.to_string();
        }
    }
    let mut spec = pod.spec.clone().unwrap_or_default();
    spec.node_name = None;
    spec.scheduler_name = Some(changes.scheduler.clone());
    if let Some(main) = spec.containers.first_mut() {
        main_container_changed(main, changes);
    }
    // A group's rank is a label too, so that a Service can select rank 0 (where the ranks meet)
    // across the pods the host re-creates.
    let mut labels = meta.labels.clone().unwrap_or_default();
    if let Some((rank, _)) = changes.rank {
        labels.insert(RANK.into(), rank.to_string());
    }
    // A generated name: `job-` plus five characters, within the 63 a name may have.
    let stem: String = job_name.chars().take(50).collect();
    Pod {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            generate_name: Some(format!("{}-", stem.trim_end_matches('-'))),
            namespace: meta.namespace.clone(),
            labels: Some(labels),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// The copy's main container after `changes`: the GPUs it asks for, its batch size, its rank
/// and the group's size in its environment (torchrun's names too, where it uses them).
fn main_container_changed(main: &mut Container, changes: &Changes) {
    if let Some(count) = changes.gpus {
        let resources = main.resources.get_or_insert_with(Default::default);
        for asked in [&mut resources.requests, &mut resources.limits] {
            let asked = asked.get_or_insert_with(BTreeMap::new);
            asked.remove(GPU_RESOURCE);
            if count > 0 {
                asked.insert(GPU_RESOURCE.into(), Quantity(count.to_string()));
            }
        }
    }
    if let Some(batch) = changes.batch_size {
        let env = main.env.get_or_insert_with(Vec::new);
        env.retain(|v| v.name != BATCH_SIZE_ENV);
        env.push(EnvVar { name: BATCH_SIZE_ENV.into(), value: Some(batch.to_string()), value_from: None });
    }
    if let Some((rank, size)) = changes.rank {
        let env = main.env.get_or_insert_with(Vec::new);
        let torchrun = |name: &str| env.iter().any(|v| v.name == name);
        let mut set: Vec<(&str, u32)> = vec![(RANK_ENV, rank), (WORLD_SIZE_ENV, size)];
        set.extend(TORCHRUN_ENV.into_iter().zip([rank, size]).filter(|(name, _)| torchrun(name)));
        env.retain(|v| !set.iter().any(|(name, _)| v.name == *name));
        env.extend(set.into_iter().map(|(name, value)| EnvVar {
            name: name.into(),
            value: Some(value.to_string()),
            value_from: None,
        }));
    }
}

/// The rank a group's pod carries ([`RANK`]), if the host re-created it.
pub fn rank(pod: &Pod) -> Option<u32> {
    pod.metadata.annotations.as_ref()?.get(RANK)?.trim().parse().ok()
}

/// Whether a resize can give pod `pod` its new GPUs: it sets the main container's
/// `nvidia.com/gpu`, so no other container may ask for any (the job's GPUs would not be the
/// count the resize names). Says why not.
pub fn resizable(pod: &Pod) -> Result<(), String> {
    let spec = pod.spec.as_ref().ok_or("the pod has no spec")?;
    let others: Vec<&str> = spec
        .containers
        .iter()
        .skip(1)
        .filter(|c| {
            let r = c.resources.as_ref();
            let asks = |q: Option<&BTreeMap<String, Quantity>>| q.is_some_and(|q| q.contains_key(GPU_RESOURCE));
            asks(r.and_then(|r| r.limits.as_ref())) || asks(r.and_then(|r| r.requests.as_ref()))
        })
        .map(|c| c.name.as_str())
        .collect();
    if others.is_empty() {
        return Ok(());
    }
    Err(format!(
        "containers {} ask for nvidia.com/gpu besides the main one; a resize sets the main container's GPUs only: \
         ask for the job's GPUs in its first container alone",
        others.join(", ")
    ))
}

/// Whether the declared checkpoint folder survives the pod: it lies under a volume mount of
/// the main container whose volume outlives the pod (not an emptyDir). Says why not.
pub fn checkpoint_survives(pod: &Pod, folder: &str) -> Result<(), String> {
    let spec = pod.spec.as_ref().ok_or("the pod has no spec")?;
    let main = spec.containers.first().ok_or("the pod has no container")?;
    let mount = main
        .volume_mounts
        .iter()
        .flatten()
        .filter(|m| {
            folder == m.mount_path.trim_end_matches('/')
                || folder.starts_with(&format!("{}/", m.mount_path.trim_end_matches('/')))
        })
        .max_by_key(|m| m.mount_path.len())
        .ok_or_else(|| {
            format!(
                "the checkpoint folder {folder} is on no volume of container {}, so it dies with the pod; mount a \
                 volume both nodes reach there (a ReadWriteMany claim, NFS, or a hostPath on one machine)",
                main.name
            )
        })?;
    let volume = spec.volumes.iter().flatten().find(|v| v.name == mount.name);
    if volume.is_some_and(|v| v.empty_dir.is_some()) {
        return Err(format!(
            "the checkpoint folder {folder} is on emptyDir volume {}, which dies with the pod; use a volume both nodes \
             reach",
            mount.name
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
