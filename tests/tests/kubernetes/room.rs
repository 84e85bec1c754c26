//! Contract 0.4.0 on the kit: what a node's room counts (every pod bound there, another
//! scheduler's too, and the GPUs that pod holds), what a pod requests and selects, and a node's
//! topology domains, as the policy sees them and as the default placement uses them.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use wasmsched::world::World;

use crate::cluster;
use crate::groups::ObjectNodes;
use crate::{backend, step, test_label};

/// A pod of `label`'s test for our scheduler, requesting `cpu`, held to the test's nodes.
fn managed(name: &str, label: &str, cpu: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"wasmsched.test": label}},
        "spec": {
            "schedulerName": "wasmsched",
            "nodeSelector": {"wasmsched.test": label},
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "local/busybox:1", "imagePullPolicy": "Never",
                "command": ["sleep", "3600"], "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}],
        },
    }))
    .unwrap()
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn another_schedulers_pod_takes_its_nodes_room_and_topology_labels_are_domains() {
    let Some(c) = cluster::cluster() else {
        eprintln!("SKIPPED {}: no Kubernetes cluster", module_path!());
        return;
    };
    let _serial = cluster::serial();
    let label = test_label("room");
    let _sweep = c.sweep(&label);
    let nodes = ObjectNodes::new(c, &label, 2, 4);
    let api: Api<Node> = Api::all(c.client.clone());
    for (name, rack) in nodes.names.iter().zip(["rack-1", "rack-2"]) {
        let labels = json!({"metadata": {"labels": {
            "cloud.provider.com/topology-block": "block-a", "cloud.provider.com/topology-rack": rack}}});
        c.rt.block_on(api.patch(name, &PatchParams::default(), &Patch::Merge(labels))).unwrap();
    }
    // Another scheduler's pod (bound by name, as a DaemonSet's is), not the host's: 7 of node
    // n0's 8 cores, and 3 of its 4 GPUs.
    let other = format!("wsr-{label}-other");
    let foreign: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": other, "labels": {"wasmsched.foreign": label}},
        "spec": {"nodeName": nodes.names[0], "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "local/busybox:1", "imagePullPolicy": "Never",
                "resources": {"requests": {"cpu": "7", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": "3"}}}]},
    }))
    .unwrap();
    c.rt.block_on(c.pods().create(&PostParams::default(), &foreign)).expect("the apiserver creates the pod");
    let _other = Deleted(c, other.clone());
    let mine = format!("wsr-{label}-mine");
    c.rt.block_on(c.pods().create(&PostParams::default(), &managed(&mine, &label, "2"))).unwrap();

    // The default placement tries the nodes in name order: n0 first, which has 1 core left.
    let mut k = backend(c, &label);
    let mut world = World::new();
    let on = c.wait(&label, "the pod bound", Duration::from_secs(30), || {
        step(&mut k, &mut world, 500);
        c.pod(&mine).and_then(|p| p.spec?.node_name)
    });
    assert_eq!(on, nodes.names[1], "n0's room is what the other pod left, 1 core: {:?}", world.room());
    let n0 = world.nodes().iter().position(|n| n.name == nodes.names[0]).unwrap();
    let n1 = world.nodes().iter().position(|n| n.name == nodes.names[1]).unwrap();
    step(&mut k, &mut world, 500);
    let room = world.room();
    assert_eq!(room[n0].cpu, 1000, "8 cores less the other pod's 7");
    assert_eq!(room[n1].cpu, 6000, "8 cores less the host's pod's 2");
    assert_eq!((room[n0].pods, room[n1].pods), (109, 109));
    // What the policy is shown: the room, the pod's requests and selector, the domains.
    let mut cursor = wasmsched::world::Cursor::fresh();
    let s = world.snapshot_for(&mut cursor);
    assert_eq!(s.room.cpu_millicores[n0], 1000);
    let spec = s.added.iter().find(|j| j.name == mine).unwrap();
    assert_eq!(spec.requests.cpu_millicores, 2000);
    assert_eq!(spec.node_selector, [("wasmsched.test".to_string(), label.clone())]);
    let shown = s.nodes.unwrap();
    assert_eq!(shown[n0].domains, ["block-a", "rack-1"]);
    assert_eq!(shown[n1].domains, ["block-a", "rack-2"]);
    assert!(shown[n0].labels.iter().any(|(k, v)| k == "wasmsched.test" && *v == label));
    // The GPUs the other pod holds are not the host's to give: n0 shows the one left.
    assert_eq!((shown[n0].gpu_memory_bytes.len(), shown[n1].gpu_memory_bytes.len()), (1, 4));
    assert_eq!(world.free_gpus(wasmsched::world::NodeId(n0 as u32)), [0]);
    drop(_other);
    c.wait(&label, "n0's four GPUs back once the other pod is gone", Duration::from_secs(30), || {
        step(&mut k, &mut world, 500);
        (world.nodes()[n0].gpu_memory_bytes.len() == 4).then_some(())
    });
    drop(nodes);
}

/// Deletes the pod it names when dropped (the sweep deletes the test's labelled pods only).
struct Deleted(&'static cluster::Cluster, String);

impl Drop for Deleted {
    fn drop(&mut self) {
        let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
        let _ = self.0.rt.block_on(self.0.pods().delete(&self.1, &now));
    }
}
