//! `--dra`: the nodes' GPUs as DRA devices and the pods' GPUs through ResourceClaims, as
//! scheduler_perf's DRA cases do. Each object node gets one ResourceSlice of [`DRIVER`]'s
//! devices (its pool named after it), one DeviceClass selects them, and each pod of a run names a
//! ResourceClaim made for it before it (no template: the controller manager that would make
//! template claims is stopped). Both schedulers allocate the claims themselves before they bind;
//! [`check`] reads what they wrote.
//!
//! With the controller manager stopped nobody takes the delete-protection finalizer off an
//! allocated claim, so [`delete_claims`] clears it before it deletes them.

use std::collections::HashMap;

use futures_util::{StreamExt, stream};
use k8s_openapi::api::core::v1::{NodeSelector, Pod, PodResourceClaim, ResourceClaim as ContainerClaim};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde::Serialize;
use serde_json::{Value, json};

use super::manifests::{self, SCALE_LABEL, typed};
use super::{ScaleError, api_error};

/// The driver of the harness's devices (`gpu-drivers` in the host's config).
pub const DRIVER: &str = "gpu.scale.wasmsched.dev";
/// The DeviceClass of its devices.
pub const CLASS: &str = "scale-gpu";
/// The product every device says it is.
pub const PRODUCT: &str = "NVIDIA A100-SXM4-80GB";
/// The memory every device has.
pub const MEMORY: &str = "80Gi";
/// The selector each claim's request adds to the class's: at least 40 GiB, so that both
/// schedulers evaluate a capacity through CEL for every device they consider.
pub fn memory_selector() -> String {
    format!("device.capacity['{DRIVER}'].memory.compareTo(quantity('40Gi')) >= 0")
}
/// The most devices one ResourceSlice may list (`resource.k8s.io/v1`).
pub const MAX_DEVICES_PER_SLICE: u32 = 128;
/// The name of a pod's claim in its `spec.resourceClaims` and its container's `claims`.
const POD_CLAIM: &str = "gpu";

/// The ResourceSlice of node `node`: `gpus` devices `gpu-0`… of [`DRIVER`], each a whole GPU
/// (`type: gpu`) with its product, index and memory; the pool is the node.
pub fn slice(node: &str, gpus: u32) -> ResourceSlice {
    let devices: Vec<Value> = (0..gpus)
        .map(|i| {
            json!({
                "name": format!("gpu-{i}"),
                "attributes": {
                    "type": {"string": "gpu"},
                    "productName": {"string": PRODUCT},
                    "index": {"int": i},
                },
                "capacity": {"memory": {"value": MEMORY}},
            })
        })
        .collect();
    typed(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": format!("{node}-gpus"), "labels": {SCALE_LABEL: "true"}},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "nodeName": node,
            "devices": devices,
        },
    }))
}

/// The DeviceClass of [`DRIVER`]'s devices.
pub fn class() -> DeviceClass {
    typed(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": CLASS, "labels": {SCALE_LABEL: "true"}},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == '{DRIVER}'")}}]},
    }))
}

/// The name of the claim of the pod named `pod`.
pub fn claim_name(pod: &str) -> String {
    format!("{pod}-gpu")
}

/// The claim of the `index`th pod: `gpus` devices of [`CLASS`] of at least 40 GiB.
pub fn claim(index: u32, namespace: &str, gpus: u32) -> ResourceClaim {
    typed(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": claim_name(&manifests::pod_name(index)),
            "namespace": namespace,
            "labels": {SCALE_LABEL: "true"},
        },
        "spec": {"devices": {"requests": [{
            "name": "gpu",
            "exactly": {
                "deviceClassName": CLASS,
                "count": gpus,
                "selectors": [{"cel": {"expression": memory_selector()}}],
            },
        }]}},
    }))
}

/// `pod` with its GPUs through its claim ([`claim_name`]) instead of `nvidia.com/gpu`.
pub fn with_claim(mut pod: Pod) -> Pod {
    let name = claim_name(pod.metadata.name.as_deref().unwrap_or_default());
    if let Some(spec) = pod.spec.as_mut() {
        let reference =
            PodResourceClaim { name: POD_CLAIM.into(), resource_claim_name: Some(name), ..PodResourceClaim::default() };
        spec.resource_claims = Some(vec![reference]);
        for c in &mut spec.containers {
            let resources = c.resources.get_or_insert_default();
            for list in [resources.requests.as_mut(), resources.limits.as_mut()].into_iter().flatten() {
                list.remove("nvidia.com/gpu");
            }
            resources.claims = Some(vec![ContainerClaim { name: POD_CLAIM.into(), request: None }]);
        }
    }
    pod
}

/// A node's status patch ([`manifests::node_status`]) without `nvidia.com/gpu`: its GPUs are
/// in its ResourceSlice.
pub fn node_status(status: Value) -> Value {
    let mut status = status;
    for list in ["capacity", "allocatable"] {
        if let Some(resources) = status["status"][list].as_object_mut() {
            resources.remove("nvidia.com/gpu");
        }
    }
    status
}

/// Creates the class and a slice for each of `nodes` of `gpus` devices, `concurrency`
/// requests in flight.
pub async fn create_devices(
    client: &kube::Client,
    nodes: &[String],
    gpus: u32,
    concurrency: usize,
) -> Result<(), ScaleError> {
    let classes: Api<DeviceClass> = Api::all(client.clone());
    let post = PostParams::default();
    classes.create(&post, &class()).await.map_err(api_error(format!(
        "create DeviceClass {CLASS} (does the cluster serve resource.k8s.io/v1? shared/k8s/README.md, \"DRA\")"
    )))?;
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    let results: Vec<Result<(), ScaleError>> = stream::iter(nodes)
        .map(|node| {
            let (slices, post) = (&slices, &post);
            async move {
                slices
                    .create(post, &slice(node, gpus))
                    .await
                    .map_err(api_error(format!("create the slice of {node}")))?;
                Ok(())
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    results.into_iter().collect()
}

/// Deletes the harness's slices and its class. Best effort, quiet where the cluster does not
/// serve DRA.
pub async fn delete_devices(client: &kube::Client) {
    let ours = ListParams::default().labels(&format!("{SCALE_LABEL}=true"));
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    match slices.delete_collection(&DeleteParams::default(), &ours).await {
        Ok(either) => {
            if either.left().is_some_and(|l| !l.items.is_empty()) {
                tracing::info!("scale ResourceSlices deleted");
            }
        }
        Err(e) => tracing::debug!(error = %e, "could not delete the scale ResourceSlices"),
    }
    let classes: Api<DeviceClass> = Api::all(client.clone());
    if let Err(e) = classes.delete_collection(&DeleteParams::default(), &ours).await {
        tracing::debug!(error = %e, "could not delete the scale DeviceClass");
    }
}

/// Deletes the claims of namespace `ns`, each one's finalizers cleared first (the
/// delete-protection a scheduler puts on an allocated claim stays otherwise, and its namespace
/// `Terminating`, while the controller manager is stopped). Quiet where the cluster does not
/// serve DRA or there are none.
pub async fn delete_claims(client: &kube::Client, ns: &str) {
    let api: Api<ResourceClaim> = Api::namespaced(client.clone(), ns);
    let Ok(claims) = api.list_metadata(&ListParams::default()).await else { return };
    let clear = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    let patch = PatchParams::default();
    let held: Vec<String> = claims
        .items
        .iter()
        .filter(|c| c.metadata.finalizers.as_ref().is_some_and(|f| !f.is_empty()))
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    let count = claims.items.len();
    stream::iter(held)
        .for_each_concurrent(32, |name| {
            let (api, clear, patch) = (&api, &clear, &patch);
            async move {
                if let Err(e) = api.patch(&name, patch, clear).await {
                    tracing::warn!(claim = name, error = %e, "could not clear the claim's finalizers");
                }
            }
        })
        .await;
    if count > 0 {
        if let Err(e) = api.delete_collection(&DeleteParams::default(), &ListParams::default()).await {
            tracing::warn!(namespace = ns, error = %e, "could not delete the run's claims");
        }
        tracing::info!(namespace = ns, count, "deleted the run's ResourceClaims");
    }
}

/// What a run's scheduler wrote into its pods' claims.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DraReport {
    /// The run's pods' claims found.
    pub claims: u64,
    /// Claims with an allocation.
    pub allocated: u64,
    /// Claims allocated on the node their pod was bound to: the allocation's node selector
    /// names that node, and every device given is one of its slice's, as many as asked.
    pub on_pod_node: u64,
    /// Claims whose `reservedFor` names their pod.
    pub reserved_for_pod: u64,
    /// Devices of [`DRIVER`] that two claims or more (in any namespace) are allocated.
    pub double_allocated_devices: u64,
}

/// Reads the claims of the run in `namespace` and every claim of the cluster, against the node
/// each pod was bound to (`bound`, by pod name); each claim is to have `gpus` devices. None
/// when the claims cannot be listed.
pub async fn check(
    client: &kube::Client,
    namespace: &str,
    bound: &HashMap<String, String>,
    gpus: u32,
) -> Option<DraReport> {
    let all: Api<ResourceClaim> = Api::all(client.clone());
    let claims = match all.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(e) => {
            tracing::warn!(error = %e, "could not list the ResourceClaims to check them");
            return None;
        }
    };
    Some(tally(&claims, namespace, bound, gpus))
}

/// [`check`]'s arithmetic over `claims` as listed.
pub fn tally(claims: &[ResourceClaim], namespace: &str, bound: &HashMap<String, String>, gpus: u32) -> DraReport {
    let mut report = DraReport::default();
    let mut holders: HashMap<(&str, &str), u32> = HashMap::new();
    for c in claims {
        let allocation = c.status.as_ref().and_then(|s| s.allocation.as_ref());
        let results: Vec<_> = allocation
            .and_then(|a| a.devices.as_ref())
            .and_then(|d| d.results.as_deref())
            .unwrap_or_default()
            .iter()
            .collect();
        for r in results.iter().filter(|r| r.driver == DRIVER && r.admin_access != Some(true)) {
            *holders.entry((r.pool.as_str(), r.device.as_str())).or_default() += 1;
        }
        if c.metadata.namespace.as_deref() != Some(namespace) {
            continue;
        }
        let name = c.metadata.name.as_deref().unwrap_or_default();
        let Some(pod) = name.strip_suffix("-gpu").filter(|p| manifests::pod_index(p).is_some()) else { continue };
        report.claims += 1;
        let Some(allocation) = allocation else { continue };
        report.allocated += 1;
        if let Some(node) = bound.get(pod) {
            let devices_there = results.len() == gpus as usize && results.iter().all(|r| r.pool == *node);
            if allocation.node_selector.as_ref().is_some_and(|s| names_only(s, node)) && devices_there {
                report.on_pod_node += 1;
            }
        }
        let reserved = c.status.iter().flat_map(|s| s.reserved_for.iter().flatten());
        if reserved.into_iter().any(|r| r.resource == "pods" && r.name == pod) {
            report.reserved_for_pod += 1;
        }
    }
    report.double_allocated_devices = holders.values().filter(|n| **n > 1).count() as u64;
    report
}

/// Whether node selector `s` takes node `node` and no other: each of its terms holds
/// `metadata.name` (or `kubernetes.io/hostname`) `In [node]`.
fn names_only(s: &NodeSelector, node: &str) -> bool {
    let pins = |r: &k8s_openapi::api::core::v1::NodeSelectorRequirement| {
        matches!(r.key.as_str(), "metadata.name" | "kubernetes.io/hostname")
            && r.operator == "In"
            && r.values.as_deref() == Some(&[node.to_owned()][..])
    };
    !s.node_selector_terms.is_empty()
        && s.node_selector_terms
            .iter()
            .all(|t| t.match_fields.iter().flatten().chain(t.match_expressions.iter().flatten()).any(pins))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    #[test]
    fn a_slice_lists_the_nodes_gpus_with_their_attributes_and_memory() {
        let s = slice("scale-node-00002", 8);
        assert_eq!(s.metadata.name.as_deref(), Some("scale-node-00002-gpus"));
        assert_eq!((s.spec.driver.as_str(), s.spec.node_name.as_deref()), (DRIVER, Some("scale-node-00002")));
        assert_eq!(
            (s.spec.pool.name.as_str(), s.spec.pool.generation, s.spec.pool.resource_slice_count),
            ("scale-node-00002", 1, 1)
        );
        let devices = s.spec.devices.unwrap();
        assert_eq!(devices.len(), 8);
        let d = &devices[7];
        assert_eq!(d.name, "gpu-7");
        let attributes = d.attributes.as_ref().unwrap();
        assert_eq!(attributes["type"].string.as_deref(), Some("gpu"));
        assert_eq!(attributes["productName"].string.as_deref(), Some(PRODUCT));
        assert_eq!(attributes["index"].int, Some(7));
        assert_eq!(d.capacity.as_ref().unwrap()["memory"].value, Quantity(MEMORY.into()));
    }

    #[test]
    fn the_class_selects_the_driver_and_a_claim_asks_for_memory_too() {
        let expr = class().spec.selectors.unwrap()[0].cel.clone().unwrap().expression;
        assert_eq!(expr, format!("device.driver == '{DRIVER}'"));
        let c = claim(12, "ns-d", 2);
        assert_eq!(
            (c.metadata.name.as_deref(), c.metadata.namespace.as_deref()),
            (Some("scale-pod-00012-gpu"), Some("ns-d"))
        );
        let request = &c.spec.devices.unwrap().requests.unwrap()[0];
        let exactly = request.exactly.as_ref().unwrap();
        assert_eq!((exactly.device_class_name.as_str(), exactly.count), (CLASS, Some(2)));
        assert_eq!(exactly.selectors.as_ref().unwrap()[0].cel.as_ref().unwrap().expression, memory_selector());
    }

    #[test]
    fn a_dra_pod_names_its_claim_and_asks_for_no_extended_resource() {
        let p = with_claim(manifests::pod(5, "ns-d", "wasmsched", 1, 1));
        let spec = p.spec.unwrap();
        let reference = &spec.resource_claims.unwrap()[0];
        assert_eq!(
            (reference.name.as_str(), reference.resource_claim_name.as_deref()),
            ("gpu", Some("scale-pod-00005-gpu"))
        );
        let resources = spec.containers[0].resources.clone().unwrap();
        assert_eq!(resources.claims.unwrap()[0].name, "gpu");
        assert!(!resources.requests.unwrap().contains_key("nvidia.com/gpu"));
        assert!(!resources.limits.unwrap().contains_key("nvidia.com/gpu"));
    }

    #[test]
    fn a_dra_node_has_no_nvidia_gpu_in_its_status() {
        let shape = manifests::NodeShape { cores: 64, memory_gib: 256, pods: 110, gpus: 8 };
        let status = node_status(manifests::node_status(shape, "2026-01-01T00:00:00Z"));
        assert!(status["status"]["capacity"].get("nvidia.com/gpu").is_none());
        assert!(status["status"]["allocatable"].get("nvidia.com/gpu").is_none());
        assert_eq!(status["status"]["allocatable"]["cpu"], "64");
    }

    /// A claim of pod `index` in `ns`, allocated `devices` (pool, device) with a node selector
    /// for `node`, reserved for `reserved`.
    fn allocated(index: u32, ns: &str, node: &str, devices: &[(&str, &str)], reserved: &str) -> ResourceClaim {
        let mut c = serde_json::to_value(claim(index, ns, devices.len() as u32)).unwrap();
        let results: Vec<Value> = devices
            .iter()
            .map(|(pool, device)| json!({"request": "gpu", "driver": DRIVER, "pool": pool, "device": device}))
            .collect();
        c["status"] = json!({
            "allocation": {
                "devices": {"results": results},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]},
            },
            "reservedFor": [{"resource": "pods", "name": reserved, "uid": "u"}],
        });
        serde_json::from_value(c).unwrap()
    }

    #[test]
    fn the_check_counts_claims_on_their_pods_nodes_reserved_and_devices_given_twice() {
        let bound: HashMap<String, String> = [(1, "n1"), (2, "n1"), (3, "n2")]
            .map(|(i, n)| (manifests::pod_name(i), n.to_owned()))
            .into_iter()
            .collect();
        let claims = vec![
            allocated(1, "run", "n1", &[("n1", "gpu-0")], "scale-pod-00001"),
            // On the wrong node, and reserved for another pod.
            allocated(2, "run", "n2", &[("n2", "gpu-0")], "scale-pod-00009"),
            // Its node selector says n2, its device is n1's and n1's gpu-0 is taken already.
            allocated(3, "run", "n2", &[("n1", "gpu-0")], "scale-pod-00003"),
            // Not allocated.
            claim(4, "run", 1),
            // Another namespace's claim counts for devices given twice only.
            allocated(1, "other", "n2", &[("n2", "gpu-0")], "scale-pod-00001"),
        ];
        let r = tally(&claims, "run", &bound, 1);
        assert_eq!(
            r,
            DraReport { claims: 4, allocated: 3, on_pod_node: 1, reserved_for_pod: 2, double_allocated_devices: 2 }
        );
    }

    #[test]
    fn a_node_selector_names_one_node_in_every_term() {
        let s = |terms: Value| serde_json::from_value::<NodeSelector>(json!({"nodeSelectorTerms": terms})).unwrap();
        let pin = json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]});
        assert!(names_only(&s(json!([pin])), "n1"));
        assert!(!names_only(&s(json!([pin])), "n2"));
        assert!(!names_only(&s(json!([pin, {}])), "n1"), "a term without the pin takes any node");
        assert!(!names_only(&s(json!([])), "n1"));
        let two = json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}]});
        assert!(!names_only(&s(json!([two])), "n1"));
    }
}
