//! Devices through DRA on the kit: the upstream DRA test driver publishes devices on both nodes
//! (`K8S_DRA=4 ../shared/k8s/cluster up 2`), pods ask for one through a ResourceClaimTemplate,
//! and the host allocates each claim before it binds the pod, frees it when a preemption
//! re-creates the pod, and never gives one device to two claims; all of it as the host's
//! ServiceAccount, with the rights of `examples/kubernetes/rbac.yaml`.

use std::time::Duration;

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

use super::*;
use crate::manifests;

/// The kit's DRA test driver.
const DRIVER: &str = "test-driver.cdi.k8s.io";

/// How many devices the test driver publishes on node `vm2`; None when it publishes none.
fn devices_on_vm2(c: &Cluster) -> Option<usize> {
    let slices: Api<ResourceSlice> = Api::all(c.client.clone());
    let listed = c.rt.block_on(slices.list(&ListParams::default())).ok()?;
    let on = listed.items.iter().filter(|s| s.spec.driver == DRIVER && s.spec.node_name.as_deref() == Some("vm2"));
    Some(on.map(|s| s.spec.devices.as_ref().map_or(0, Vec::len)).sum::<usize>()).filter(|&n| n >= 2)
}

/// A DeviceClass of the driver's devices and a ResourceClaimTemplate of one of them, named
/// after the test; deleted when dropped.
struct Objects {
    cluster: &'static Cluster,
    name: String,
}

impl Objects {
    fn make(c: &'static Cluster, label: &str) -> Objects {
        let name = format!("wst-{label}");
        let class: DeviceClass = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": format!("device.driver == '{DRIVER}'")}}]},
        }))
        .unwrap();
        let template: ResourceClaimTemplate = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": name}}]}}},
        }))
        .unwrap();
        let made = c.rt.block_on(async {
            Api::<DeviceClass>::all(c.client.clone()).create(&PostParams::default(), &class).await?;
            Api::<ResourceClaimTemplate>::default_namespaced(c.client.clone())
                .create(&PostParams::default(), &template)
                .await
        });
        made.expect("the apiserver takes the class and the template");
        Objects { cluster: c, name }
    }
}

impl Drop for Objects {
    fn drop(&mut self) {
        let (c, dp) = (self.cluster, DeleteParams::default());
        let _ =
            c.rt.block_on(Api::<ResourceClaimTemplate>::default_namespaced(c.client.clone()).delete(&self.name, &dp));
        let _ = c.rt.block_on(Api::<DeviceClass>::all(c.client.clone()).delete(&self.name, &dp));
    }
}

/// Pod `name`'s claim as the apiserver has it now, once the controller manager made it.
fn claim_of(c: &Cluster, name: &str) -> Option<ResourceClaim> {
    let made = c.pod(name)?.status?.resource_claim_statuses?.into_iter().next()?.resource_claim_name?;
    c.rt.block_on(Api::<ResourceClaim>::default_namespaced(c.client.clone()).get_opt(&made)).ok()?
}

/// The devices claim `claim` is allocated (`node/device`), and the pod uids it is reserved for.
fn holding(claim: &ResourceClaim) -> (Vec<String>, Vec<String>) {
    let status = claim.status.clone().unwrap_or_default();
    let results = status.allocation.and_then(|a| a.devices).and_then(|d| d.results).unwrap_or_default();
    let devices = results.iter().map(|r| format!("{}/{}", r.pool, r.device)).collect();
    (devices, status.reserved_for.unwrap_or_default().into_iter().map(|r| r.uid).collect())
}

fn place_on(job: JobId, node: u32, gpus: Vec<u32>) -> wit::Action {
    let nodes = vec![wit::NodePlacement { node: NodeId(node), gpus }];
    action(job, wit::ActionKind::Place(wit::Placement { nodes, share: false }))
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn a_claims_device_is_allocated_by_the_host_never_twice_and_freed_by_a_preemption() {
    let (c, image, _serial) = trainer_cluster_or_skip!();
    let Some(devices) = devices_on_vm2(c) else {
        eprintln!(
            "SKIPPED {}: the kit's DRA test driver publishes no devices; start the kit with \
             `K8S_DRA=4 ../shared/k8s/cluster up 2`",
            module_path!()
        );
        return;
    };
    let label = test_label("dra");
    let _sweep = c.sweep(&label);
    let objects = Objects::make(c, &label);
    let dir = tempfile::tempdir().unwrap();
    let first = TrainerPod {
        annotations: &[("checkpoint", "/ckpt")],
        claim_template: Some(&objects.name),
        ..TrainerPod::new("dra", &label, CHECKPOINTED).with_checkpoint_dir(dir.path())
    };
    let name = c.trainer(&image, first).metadata.name.unwrap();
    let other = TrainerPod { claim_template: Some(&objects.name), ..TrainerPod::new("dra-other", &label, QUICK) };
    let other_name = c.trainer(&image, other).metadata.name.unwrap();
    // As the host's ServiceAccount, with exactly the rights of rbac.yaml.
    for doc in manifests::manifest("rbac.yaml") {
        manifests::apply(c, &doc, false).unwrap_or_else(|e| panic!("rbac.yaml, {}: {e}", doc["kind"]));
    }
    let account = tempfile::tempdir().unwrap();
    let mut k = Kubernetes::new(KubernetesConfig {
        kubeconfig: Some(manifests::kubeconfig_as(c, manifests::SERVICE_ACCOUNT, account.path())),
        selector: format!("wasmsched.test={label}"),
        gpu_drivers: vec![DRIVER.into()],
        ..KubernetesConfig::default()
    })
    .unwrap();
    k.set_placer(wasmsched::backend::Placer::Policy);
    let mut world = World::new();
    let (job, other) = c.wait(&label, "both pods queued, vm2's devices counted", Duration::from_secs(30), || {
        step(&mut k, &mut world, 300);
        let counted = world.nodes().get(1).is_some_and(|n| n.gpu_memory_bytes.len() == devices);
        Some((job_named(&world, &name)?, job_named(&world, &other_name)?)).filter(|_| counted)
    });
    assert_eq!(world.spec(job).unwrap().gpus, 1, "one device, from its claim's template");
    // Both claims made by the controller manager before the host allocates them.
    c.wait(&label, "both claims made", Duration::from_secs(30), || {
        step(&mut k, &mut world, 300);
        (claim_of(c, &name).is_some() && claim_of(c, &other_name).is_some()).then_some(())
    });

    // Both placed on vm2's third device in one decision: the second gets another one.
    let mut errors = k.apply(&[place_on(job, 1, vec![2]), place_on(other, 1, vec![2])], &mut world);
    errors.extend(k.drain(&mut world, Duration::from_secs(30)));
    assert!(errors.is_empty(), "{errors:?}");
    let uid = c.pod(&name).unwrap().metadata.uid.unwrap();
    let (mine, reserved) = holding(&claim_of(c, &name).unwrap());
    assert_eq!(mine, ["vm2/device-02"], "the device the policy named");
    assert_eq!(reserved, [uid], "reserved for its pod");
    let (theirs, _) = holding(&claim_of(c, &other_name).unwrap());
    assert_eq!(theirs.len(), 1);
    assert_ne!(theirs, mine, "never one device for two claims");
    c.wait(&label, "epochs from the pod on its claimed device", Duration::from_secs(90), || {
        step(&mut k, &mut world, 500);
        (world.history(job).count() >= 2).then_some(())
    });
    assert_eq!(c.pod(&name).and_then(|p| p.spec?.node_name).as_deref(), Some("vm2"));

    // A preemption re-creates the pod; its device is free once it is gone, and the copy,
    // placed on the same device, gets it.
    let mut errors = k.apply(&[action(job, wit::ActionKind::Preempt)], &mut world);
    errors.extend(k.drain(&mut world, Duration::from_secs(90)));
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(world.state(job).unwrap().queued, Some(wit::WaitReason::Preempted));
    let copy =
        c.labelled(&label).into_iter().find(|p| p.metadata.name.as_deref() != Some(other_name.as_str())).unwrap();
    let copy_name = copy.metadata.name.unwrap();
    c.wait(&label, "the copy's claim made", Duration::from_secs(30), || {
        step(&mut k, &mut world, 300);
        claim_of(c, &copy_name).map(|_| ())
    });
    let last = world.history(job).last().unwrap().epoch;
    let mut errors = k.apply(&[place_on(job, 1, vec![2])], &mut world);
    errors.extend(k.drain(&mut world, Duration::from_secs(30)));
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(holding(&claim_of(c, &copy_name).unwrap()).0, ["vm2/device-02"], "its device, freed and given again");
    c.wait(&label, "epochs again after the preemption", Duration::from_secs(90), || {
        step(&mut k, &mut world, 500);
        (world.history(job).last()?.epoch >= last + 2).then_some(())
    });
    assert_consecutive_epochs(world.history(job), "resumed on its claimed device");
}
