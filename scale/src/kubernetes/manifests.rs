//! The harness's nodes, pods and namespaces as API objects: pure functions, tested here.

use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use serde_json::{Value, json};

/// The label on every node, pod and namespace the harness makes (`wasmsched.scale=true`).
pub const SCALE_LABEL: &str = "wasmsched.scale";
/// The host's default selector of managed pods (`wasmsched.managed=true`).
pub const MANAGED_LABEL: &str = "wasmsched.managed";
/// The taint admission puts on every new node; the harness's pods tolerate it.
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
/// The image of the pods (never pulled, never run: no kubelet serves the nodes).
pub const IMAGE: &str = "local/busybox:1";

/// What each fake node offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeShape {
    /// CPU cores.
    pub cores: u32,
    /// Memory, GiB.
    pub memory_gib: u32,
    /// The pod capacity.
    pub pods: u32,
    /// `nvidia.com/gpu`.
    pub gpus: u32,
}

impl NodeShape {
    /// 64 cores, 256 GiB and 110 pods, each raised where `pods` pods of 1 core and 1 GiB on
    /// `nodes` nodes would need more (twice the even share, so a scheduler that packs still
    /// has room); `gpus` as asked.
    pub fn for_load(nodes: u32, pods: u32, gpus: u32) -> Self {
        let share = pods.div_ceil(nodes.max(1)).saturating_mul(2);
        let cores = share.max(64);
        NodeShape { cores, memory_gib: (cores * 4).max(256), pods: cores.max(110), gpus }
    }
}

/// What every node name of the harness begins with.
pub const NODE_PREFIX: &str = "scale-node-";

/// The name of the `index`th node (from 1): `scale-node-00001`.
pub fn node_name(index: u32) -> String {
    format!("{NODE_PREFIX}{index:05}")
}

/// The name of the `index`th pod (from 1): `scale-pod-00001`.
pub fn pod_name(index: u32) -> String {
    format!("scale-pod-{index:05}")
}

/// The index of the pod named `name` ([`pod_name`]).
pub fn pod_index(name: &str) -> Option<u32> {
    name.strip_prefix("scale-pod-")?.parse().ok()
}

/// A node as created: its name and the scale label. Its status is patched after
/// ([`node_status`]): the status of a create is ignored.
pub fn node(index: u32) -> Node {
    labelled_node(&node_name(index), &[])
}

/// A node named `name` with the scale label and `labels` besides (its status as [`node`]'s).
pub fn labelled_node(name: &str, labels: &[(&str, String)]) -> Node {
    let mut all = serde_json::Map::new();
    all.insert(SCALE_LABEL.into(), json!("true"));
    all.extend(labels.iter().map(|(k, v)| ((*k).to_owned(), json!(v))));
    typed(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": { "name": name, "labels": all },
    }))
}

/// The merge patch of a node's `status` subresource: capacity and allocatable as `shape`, and
/// a Ready condition that nothing will ever refresh (the controller manager is stopped).
pub fn node_status(shape: NodeShape, now_rfc3339: &str) -> Value {
    let resources = json!({
        "cpu": shape.cores.to_string(),
        "memory": format!("{}Gi", shape.memory_gib),
        "pods": shape.pods.to_string(),
        "nvidia.com/gpu": shape.gpus.to_string(),
    });
    json!({
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "wasmsched-scale: an API object, no kubelet",
                "lastHeartbeatTime": now_rfc3339,
                "lastTransitionTime": now_rfc3339,
            }],
        }
    })
}

/// A fresh namespace of the harness.
pub fn namespace(name: &str) -> Namespace {
    typed(json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": { "name": name, "labels": { SCALE_LABEL: "true" } },
    }))
}

/// The namespace's `default` ServiceAccount, which admission insists on and which the
/// controller manager (stopped) would otherwise make.
pub fn default_service_account(namespace: &str) -> ServiceAccount {
    typed(json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": { "name": "default", "namespace": namespace },
    }))
}

/// The `index`th pod for `scheduler`: 1 CPU and 1 GiB (and `gpus` `nvidia.com/gpu`, as request
/// and limit), tolerating the not-ready taint, held to the scale nodes by a node selector.
pub fn pod(index: u32, namespace: &str, scheduler: &str, gpus: u32, group_size: u32) -> Pod {
    pod_of(&PodParts {
        name: pod_name(index),
        namespace,
        scheduler,
        labels: &[],
        memory_gib: 1,
        gpus,
        group: (group_size > 1).then(|| group_name(group_of(index, group_size))),
    })
}

/// What varies between the harness's pods; the rest is [`pod_of`]'s.
#[derive(Clone, Debug)]
pub struct PodParts<'a> {
    /// The pod's name.
    pub name: String,
    /// Its namespace.
    pub namespace: &'a str,
    /// The `schedulerName` it names.
    pub scheduler: &'a str,
    /// Labels besides `wasmsched.managed=true`: only keys the host reads
    /// (`core/src/declare.rs`), or it warns once per pod.
    pub labels: &'a [(&'a str, String)],
    /// Memory it requests, GiB (and 1 CPU).
    pub memory_gib: u32,
    /// `nvidia.com/gpu`, as request and limit (none when 0).
    pub gpus: u32,
    /// The upstream `PodGroup` it belongs to (`spec.schedulingGroup.podGroupName`).
    pub group: Option<String>,
}

/// A pod of the harness: 1 CPU and `memory_gib` (and its GPUs as request and limit), tolerating
/// the not-ready taint, held to the scale nodes by a node selector, never started (no kubelet).
pub fn pod_of(parts: &PodParts<'_>) -> Pod {
    let mut requests = json!({ "cpu": "1", "memory": format!("{}Gi", parts.memory_gib) });
    let mut limits = json!({});
    if parts.gpus > 0 {
        requests["nvidia.com/gpu"] = json!(parts.gpus.to_string());
        limits["nvidia.com/gpu"] = json!(parts.gpus.to_string());
    }
    // Only the host's own keys: it warns once per pod about any other `wasmsched.` label.
    let mut labels = serde_json::Map::new();
    labels.insert(MANAGED_LABEL.into(), json!("true"));
    labels.extend(parts.labels.iter().map(|(k, v)| ((*k).to_owned(), json!(v))));
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": parts.name, "namespace": parts.namespace, "labels": labels },
        "spec": {
            "schedulerName": parts.scheduler,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": { SCALE_LABEL: "true" },
            "tolerations": [{ "key": NOT_READY_TAINT, "operator": "Exists", "effect": "NoSchedule" }],
            "containers": [{
                "name": "main",
                "image": IMAGE,
                "imagePullPolicy": "Never",
                "command": ["sleep", "3600"],
                "resources": { "requests": requests, "limits": limits },
            }],
        },
    });
    if let Some(group) = &parts.group {
        pod["spec"]["schedulingGroup"] = json!({ "podGroupName": group });
    }
    typed(pod)
}

/// The group (from 1) of the `index`th pod (from 1), `size` pods a group.
pub fn group_of(index: u32, size: u32) -> u32 {
    (index - 1) / size.max(1) + 1
}

/// The name of the `index`th group (from 1): `scale-group-00001`.
pub fn group_name(index: u32) -> String {
    format!("scale-group-{index:05}")
}

/// The upstream `PodGroup` API (`scheduling.k8s.io/v1alpha2`).
pub fn pod_group_api() -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: "scheduling.k8s.io".into(),
        version: "v1alpha2".into(),
        api_version: "scheduling.k8s.io/v1alpha2".into(),
        kind: "PodGroup".into(),
        plural: "podgroups".into(),
    }
}

/// The upstream `PodGroup` of group `index`: a gang of `size` pods.
pub fn pod_group(index: u32, namespace: &str, size: u32) -> Value {
    named_pod_group(&group_name(index), namespace, size)
}

/// The upstream `PodGroup` named `name`: a gang of `size` pods.
pub fn named_pod_group(name: &str, namespace: &str, size: u32) -> Value {
    json!({
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": { "name": name, "namespace": namespace, "labels": { SCALE_LABEL: "true" } },
        "spec": { "schedulingPolicy": { "gang": { "minCount": size } } },
    })
}

/// A manifest of the harness as the API type. It cannot fail for the shapes written here and in
/// `sia/objects.rs`, whatever their strings (the tests build each one).
pub(crate) fn typed<T: serde::de::DeserializeOwned>(manifest: Value) -> T {
    serde_json::from_value(manifest).expect("the harness's manifests match the API types")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    #[test]
    fn names_are_zero_padded_so_name_order_is_creation_order() {
        assert_eq!(node_name(1), "scale-node-00001");
        assert_eq!(pod_name(10000), "scale-pod-10000");
        assert!(node_name(9) < node_name(10));
    }

    #[test]
    fn the_default_shape_holds_ten_pods_a_node_with_room_to_spare() {
        assert_eq!(NodeShape::for_load(1000, 10000, 8), NodeShape { cores: 64, memory_gib: 256, pods: 110, gpus: 8 });
    }

    #[test]
    fn a_dense_load_raises_cores_memory_and_pod_capacity() {
        let shape = NodeShape::for_load(10, 1000, 0);
        assert_eq!((shape.cores, shape.memory_gib, shape.pods), (200, 800, 200));
    }

    #[test]
    fn a_node_carries_the_scale_label_and_no_status() {
        let n = node(7);
        assert_eq!(n.metadata.name.as_deref(), Some("scale-node-00007"));
        assert_eq!(n.metadata.labels.unwrap()[SCALE_LABEL], "true");
        assert!(n.status.is_none());
    }

    #[test]
    fn the_status_patch_is_a_node_status_with_gpus_and_ready_true() {
        let patch = node_status(NodeShape { cores: 64, memory_gib: 256, pods: 110, gpus: 8 }, "2026-01-01T00:00:00Z");
        let node: Node = serde_json::from_value(json!({ "metadata": {}, "status": patch["status"] })).unwrap();
        let status = node.status.unwrap();
        let alloc = status.allocatable.unwrap();
        assert_eq!(alloc["nvidia.com/gpu"], Quantity("8".into()));
        assert_eq!(alloc["memory"], Quantity("256Gi".into()));
        assert_eq!(status.capacity.unwrap()["pods"], Quantity("110".into()));
        let ready = &status.conditions.unwrap()[0];
        assert_eq!((ready.type_.as_str(), ready.status.as_str()), ("Ready", "True"));
    }

    #[test]
    fn a_pod_names_its_scheduler_tolerates_not_ready_and_stays_on_scale_nodes() {
        let p = pod(3, "ns-a", "wasmsched", 0, 1);
        assert_eq!(p.metadata.namespace.as_deref(), Some("ns-a"));
        assert_eq!(p.metadata.labels.as_ref().unwrap()[MANAGED_LABEL], "true");
        let spec = p.spec.unwrap();
        assert_eq!(spec.scheduler_name.as_deref(), Some("wasmsched"));
        assert_eq!(spec.node_selector.unwrap()[SCALE_LABEL], "true");
        let toleration = &spec.tolerations.unwrap()[0];
        assert_eq!(toleration.key.as_deref(), Some(NOT_READY_TAINT));
        let c = &spec.containers[0];
        assert_eq!((c.image.as_deref(), c.image_pull_policy.as_deref()), (Some(IMAGE), Some("Never")));
        let resources = c.resources.as_ref().unwrap();
        assert_eq!(resources.requests.as_ref().unwrap()["cpu"], Quantity("1".into()));
        assert!(!resources.requests.as_ref().unwrap().contains_key("nvidia.com/gpu"));
    }

    #[test]
    fn a_gpu_pod_asks_for_its_gpu_as_request_and_limit() {
        let p = pod(1, "ns-b", "default-scheduler", 1, 1);
        let resources = p.spec.unwrap().containers[0].resources.clone().unwrap();
        assert_eq!(resources.requests.unwrap()["nvidia.com/gpu"], Quantity("1".into()));
        assert_eq!(resources.limits.unwrap()["nvidia.com/gpu"], Quantity("1".into()));
    }

    #[test]
    fn a_grouped_pod_names_its_podgroup_a_gang_of_the_groups_size() {
        let p = pod(7, "ns-g", "wasmsched", 1, 3);
        let group = p.spec.unwrap().scheduling_group.unwrap().pod_group_name.unwrap();
        assert_eq!((group.as_str(), group_of(7, 3), group_of(6, 3)), ("scale-group-00003", 3, 2));
        assert_eq!(pod_index(&pod_name(7)), Some(7));
        let g = pod_group(3, "ns-g", 3);
        assert_eq!(g["metadata"]["name"], "scale-group-00003");
        assert_eq!(g["spec"]["schedulingPolicy"]["gang"]["minCount"], 3);
        assert!(pod(7, "ns-g", "wasmsched", 1, 1).spec.unwrap().scheduling_group.is_none(), "no group of one");
    }

    #[test]
    fn namespaces_and_their_service_account_are_labelled_and_placed() {
        assert_eq!(namespace("x").metadata.labels.unwrap()[SCALE_LABEL], "true");
        let sa = default_service_account("x");
        assert_eq!((sa.metadata.name.as_deref(), sa.metadata.namespace.as_deref()), (Some("default"), Some("x")));
    }
}
