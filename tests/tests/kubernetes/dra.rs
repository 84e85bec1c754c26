//! Devices through DRA on the kit: the upstream DRA test driver publishes devices on both nodes
//! (`K8S_DRA=4 ../shared/k8s/cluster up 2`), pods ask for one through a ResourceClaimTemplate,
//! and the host allocates each claim before it binds the pod (a migration's copy too), frees it
//! when a preemption re-creates the pod, and never gives one device to two claims; all of it as the host's
//! ServiceAccount, with the rights of `examples/kubernetes/rbac.yaml`.

use std::time::Duration;

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

use super::*;
use crate::manifests;

/// The kit's DRA test driver.
pub(crate) const DRIVER: &str = "test-driver.cdi.k8s.io";

/// How many devices the test driver publishes on node `vm2`; None when it publishes none.
pub(crate) fn devices_on_vm2(c: &Cluster) -> Option<usize> {
    let slices: Api<ResourceSlice> = Api::all(c.client.clone());
    let listed = c.rt.block_on(slices.list(&ListParams::default())).ok()?;
    let on = listed.items.iter().filter(|s| s.spec.driver == DRIVER && s.spec.node_name.as_deref() == Some("vm2"));
    Some(on.map(|s| s.spec.devices.as_ref().map_or(0, Vec::len)).sum::<usize>()).filter(|&n| n >= 2)
}

/// The cluster with the trainer's image and the test driver's devices on `vm2` (how many), and
/// the lock; or return from the test after saying why it is skipped.
macro_rules! dra_cluster_or_skip {
    () => {{
        let (c, image, serial) = trainer_cluster_or_skip!();
        let Some(devices) = devices_on_vm2(c) else {
            eprintln!(
                "SKIPPED {}: the kit's DRA test driver publishes no devices; start the kit with \
                 `K8S_DRA=4 ../shared/k8s/cluster up 2`",
                module_path!()
            );
            return;
        };
        (c, image, serial, devices)
    }};
}

/// A DeviceClass of the driver's devices and a ResourceClaimTemplate of one of them, named
/// after the test; deleted when dropped.
struct Objects {
    cluster: &'static Cluster,
    name: String,
}

impl Objects {
    fn make(c: &'static Cluster, label: &str) -> Objects {
        Objects::with_class(c, label, None)
    }

    /// The same, the template's request naming device class `class` instead of its own.
    fn with_class(c: &'static Cluster, label: &str, other: Option<&str>) -> Objects {
        let name = format!("wst-{label}");
        let class: DeviceClass = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": format!("device.driver == '{DRIVER}'")}}]},
        }))
        .unwrap();
        let template: ResourceClaimTemplate = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": other.unwrap_or(&name)}}]}}},
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
pub(crate) fn claim_of(c: &Cluster, name: &str) -> Option<ResourceClaim> {
    let made = c.pod(name)?.status?.resource_claim_statuses?.into_iter().next()?.resource_claim_name?;
    c.rt.block_on(Api::<ResourceClaim>::default_namespaced(c.client.clone()).get_opt(&made)).ok()?
}

/// The devices claim `claim` is allocated (`node/device`), and the pod uids it is reserved for.
pub(crate) fn holding(claim: &ResourceClaim) -> (Vec<String>, Vec<String>) {
    let status = claim.status.clone().unwrap_or_default();
    let results = status.allocation.and_then(|a| a.devices).and_then(|d| d.results).unwrap_or_default();
    let devices = results.iter().map(|r| format!("{}/{}", r.pool, r.device)).collect();
    (devices, status.reserved_for.unwrap_or_default().into_iter().map(|r| r.uid).collect())
}

/// A backend that manages the pods labelled `label`, counts the test driver's devices as GPUs,
/// and acts as the host's ServiceAccount with exactly the rights of `rbac.yaml` (its
/// kubeconfig written in `dir`); the policy places.
fn dra_backend(c: &Cluster, label: &str, dir: &std::path::Path) -> Kubernetes {
    for doc in manifests::manifest("rbac.yaml") {
        manifests::apply(c, &doc, false).unwrap_or_else(|e| panic!("rbac.yaml, {}: {e}", doc["kind"]));
    }
    let mut k = Kubernetes::new(KubernetesConfig {
        kubeconfig: Some(manifests::kubeconfig_as(c, manifests::SERVICE_ACCOUNT, dir)),
        selector: format!("wasmsched.test={label}"),
        gpu_drivers: vec![DRIVER.into()],
        ..KubernetesConfig::default()
    })
    .unwrap();
    k.set_placer(wasmsched::backend::Placer::Policy);
    k
}

/// Node `name`'s handle in the world (other tests' object nodes may sort before the kit's).
pub(crate) fn node(world: &World, name: &str) -> Option<u32> {
    world.nodes().iter().position(|n| n.name == name).map(|i| i as u32)
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
    let (c, image, _serial, devices) = dra_cluster_or_skip!();
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
    let account = tempfile::tempdir().unwrap();
    let mut k = dra_backend(c, &label, account.path());
    let mut world = World::new();
    let (job, other) = c.wait(&label, "both pods queued, vm2's devices counted", Duration::from_secs(30), || {
        step(&mut k, &mut world, 300);
        let counted = node(&world, "vm2").is_some_and(|n| world.nodes()[n as usize].gpu_memory_bytes.len() == devices);
        Some((job_named(&world, &name)?, job_named(&world, &other_name)?)).filter(|_| counted)
    });
    assert_eq!(world.spec(job).unwrap().gpus, 1, "one device, from its claim's template");
    // Both claims made by the controller manager before the host allocates them.
    c.wait(&label, "both claims made", Duration::from_secs(30), || {
        step(&mut k, &mut world, 300);
        (claim_of(c, &name).is_some() && claim_of(c, &other_name).is_some()).then_some(())
    });

    // Both placed on vm2's third device in one decision: the second gets another one.
    let vm2 = node(&world, "vm2").unwrap();
    let mut errors = k.apply(&[place_on(job, vm2, vec![2]), place_on(other, vm2, vec![2])], &mut world);
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
    let mut errors = k.apply(&[place_on(job, vm2, vec![2])], &mut world);
    errors.extend(k.drain(&mut world, Duration::from_secs(30)));
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(holding(&claim_of(c, &copy_name).unwrap()).0, ["vm2/device-02"], "its device, freed and given again");
    c.wait(&label, "epochs again after the preemption", Duration::from_secs(90), || {
        step(&mut k, &mut world, 500);
        (world.history(job).last()?.epoch >= last + 2).then_some(())
    });
    assert_consecutive_epochs(world.history(job), "resumed on its claimed device");

    // A migration allocates the copy's new claim on the other node before it binds it.
    let vm = node(&world, "vm").unwrap();
    let mut errors = k.apply(&[action(job, wit::ActionKind::Migrate(NodeId(vm)))], &mut world);
    errors.extend(k.drain(&mut world, Duration::from_secs(90)));
    assert!(errors.is_empty(), "{errors:?}");
    let moved =
        c.labelled(&label).into_iter().find(|p| p.metadata.name.as_deref() != Some(other_name.as_str())).unwrap();
    let moved_name = moved.metadata.name.unwrap();
    assert_eq!(moved.spec.unwrap().node_name.as_deref(), Some("vm"));
    let (devices, reserved) = holding(&claim_of(c, &moved_name).unwrap());
    assert_eq!((devices.len(), reserved), (1, vec![moved.metadata.uid.unwrap()]), "allocated on vm: {devices:?}");
    assert!(devices[0].starts_with("vm/"), "{devices:?}");
    let last = world.history(job).last().unwrap().epoch;
    c.wait(&label, "epochs on vm after the migration", Duration::from_secs(90), || {
        step(&mut k, &mut world, 500);
        (world.history(job).last()?.epoch >= last + 2).then_some(())
    });
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn a_group_of_dra_pods_is_placed_whole_and_one_that_cannot_be_writes_no_claim() {
    let (c, image, _serial, _) = dra_cluster_or_skip!();
    let label = test_label("dragroup");
    let _sweep = c.sweep(&label);
    let good = Objects::make(c, &label);
    // A template whose class does not exist: its claim cannot be allocated anywhere.
    let bad = Objects::with_class(c, &format!("{label}-bad"), Some("wst-no-such-class"));
    let member = |group: &'static str, i: usize, template: &'static str| {
        let labels: &'static [(&'static str, &'static str)] =
            Box::leak(Box::new([("kueue.x-k8s.io/pod-group-name", group)]));
        let name: &'static str = Box::leak(format!("{group}-{i}").into_boxed_str());
        TrainerPod {
            raw_labels: labels,
            raw_annotations: &[("kueue.x-k8s.io/pod-group-total-count", "2")],
            claim_template: Some(template),
            ..TrainerPod::new(name, &label, QUICK)
        }
    };
    let (good_t, bad_t): (&'static str, &'static str) =
        (Box::leak(good.name.clone().into_boxed_str()), Box::leak(bad.name.clone().into_boxed_str()));
    let whole = Box::leak(format!("wst-{label}-whole").into_boxed_str());
    let held = Box::leak(format!("wst-{label}-held").into_boxed_str());
    let pods: Vec<String> =
        [member(whole, 0, good_t), member(whole, 1, good_t), member(held, 0, good_t), member(held, 1, bad_t)]
            .into_iter()
            .map(|p| c.trainer(&image, p).metadata.name.unwrap())
            .collect();
    let account = tempfile::tempdir().unwrap();
    let mut k = dra_backend(c, &label, account.path());
    let mut world = World::new();
    let (a, b) = c.wait(&label, "both groups queued, every claim made", Duration::from_secs(45), || {
        step(&mut k, &mut world, 300);
        let made = pods.iter().all(|p| claim_of(c, p).is_some());
        Some((job_named(&world, whole)?, job_named(&world, held)?)).filter(|_| made)
    });
    assert_eq!(world.spec(a).unwrap().gpus, 2, "a device for each of its pods");

    let (vm, vm2) = (node(&world, "vm").unwrap(), node(&world, "vm2").unwrap());
    let mut errors = k.apply(&[place_on(a, vm2, vec![0, 1])], &mut world);
    errors.extend(k.drain(&mut world, Duration::from_secs(30)));
    assert!(errors.is_empty(), "{errors:?}");
    let mut given = Vec::new();
    for p in &pods[..2] {
        assert_eq!(c.pod(p).and_then(|p| p.spec?.node_name).as_deref(), Some("vm2"), "{p} bound with its group");
        let (devices, reserved) = holding(&claim_of(c, p).unwrap());
        assert_eq!((devices.len(), reserved), (1, vec![c.pod(p).unwrap().metadata.uid.unwrap()]), "{p}");
        given.extend(devices);
    }
    given.sort();
    assert_eq!(given, ["vm2/device-00", "vm2/device-01"], "the devices the placement named, one each");
    c.wait(&label, "the group's first epochs", Duration::from_secs(90), || {
        step(&mut k, &mut world, 500);
        (world.history(a).count() >= 1).then_some(())
    });

    // The other group cannot have its second pod's device: nothing of it is written or bound.
    let mut errors = k.apply(&[place_on(b, vm, vec![0, 1])], &mut world);
    errors.extend(k.drain(&mut world, Duration::from_secs(30)));
    assert!(errors.len() == 1 && errors[0].reason.contains("wst-no-such-class"), "{errors:?}");
    for p in &pods[2..] {
        assert_eq!(c.pod(p).and_then(|p| p.spec?.node_name), None, "{p} stays unbound");
        assert_eq!(holding(&claim_of(c, p).unwrap()), (vec![], vec![]), "{p}'s claim is not written");
    }
    assert!(world.state(b).unwrap().queued.is_some(), "the group waits whole");
    drop(bad);
}

/// A device of a driver of the test's own (no kubelet plugin: its pods never start, and what
/// is checked is the allocation) that several claims may hold at once, published on `vm2`,
/// with a class of it; deleted when dropped.
struct SharedDevice {
    cluster: &'static Cluster,
    name: String,
    /// The claims made of it, deleted with it.
    claims: std::sync::Mutex<Vec<String>>,
}

impl SharedDevice {
    const DRIVER: &'static str = "shared.wasmsched.dev";

    fn publish(c: &'static Cluster, label: &str) -> SharedDevice {
        let name = format!("wst-{label}");
        let slice: ResourceSlice = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {
                "driver": Self::DRIVER, "nodeName": "vm2",
                "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                "devices": [{
                    "name": "gpu-0", "allowMultipleAllocations": true,
                    "attributes": {"productName": {"string": "NVIDIA H100 80GB HBM3"}},
                    "capacity": {"memory": {"value": "80Gi", "requestPolicy": {"default": "40Gi", "validRange": {"min": "1Gi"}}}},
                }],
            },
        }))
        .unwrap();
        let class: DeviceClass = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": format!("device.driver == '{}'", Self::DRIVER)}}]},
        }))
        .unwrap();
        let made = c.rt.block_on(async {
            Api::<ResourceSlice>::all(c.client.clone()).create(&PostParams::default(), &slice).await?;
            Api::<DeviceClass>::all(c.client.clone()).create(&PostParams::default(), &class).await
        });
        made.expect("the apiserver takes the slice and the class");
        SharedDevice { cluster: c, name, claims: Default::default() }
    }

    /// A claim `claim` of one device of the class, asking `memory` of it (its default when None).
    fn claim(&self, claim: &str, memory: Option<&str>) {
        let mut exactly = json!({"deviceClassName": self.name});
        if let Some(m) = memory {
            exactly["capacity"] = json!({"requests": {"memory": m}});
        }
        let claim: ResourceClaim = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": claim},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
        }))
        .unwrap();
        let api = Api::<ResourceClaim>::default_namespaced(self.cluster.client.clone());
        self.cluster.rt.block_on(api.create(&PostParams::default(), &claim)).expect("the apiserver takes the claim");
        self.claims.lock().unwrap().extend(claim.metadata.name);
    }
}

impl Drop for SharedDevice {
    fn drop(&mut self) {
        let (c, dp) = (self.cluster, DeleteParams::default());
        let claims = Api::<ResourceClaim>::default_namespaced(c.client.clone());
        for claim in self.claims.lock().unwrap().iter() {
            let _ = c.rt.block_on(claims.delete(claim, &dp));
        }
        let _ = c.rt.block_on(Api::<ResourceSlice>::all(c.client.clone()).delete(&self.name, &dp));
        let _ = c.rt.block_on(Api::<DeviceClass>::all(c.client.clone()).delete(&self.name, &dp));
    }
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn a_device_that_allows_several_allocations_is_shared_while_its_capacity_lasts() {
    let (c, image, _serial) = trainer_cluster_or_skip!();
    let label = test_label("drashare");
    let _sweep = c.sweep(&label);
    let device = SharedDevice::publish(c, &label);
    let claims: Vec<String> = (0..3).map(|i| format!("wst-{label}-{i}")).collect();
    device.claim(&claims[0], Some("30Gi"));
    device.claim(&claims[1], None);
    device.claim(&claims[2], None);
    let pods: Vec<String> = claims
        .iter()
        .enumerate()
        .map(|(i, claim)| {
            let name: &'static str = Box::leak(format!("share-{i}").into_boxed_str());
            let mut pod = TrainerPod::new(name, &label, QUICK);
            pod.claim_name = Some(Box::leak(claim.clone().into_boxed_str()));
            c.trainer(&image, pod).metadata.name.unwrap()
        })
        .collect();
    let account = tempfile::tempdir().unwrap();
    let mut k = Kubernetes::new(KubernetesConfig {
        kubeconfig: Some(manifests::kubeconfig_as(c, manifests::SERVICE_ACCOUNT, account.path())),
        selector: format!("wasmsched.test={label}"),
        gpu_drivers: vec![SharedDevice::DRIVER.into()],
        ..KubernetesConfig::default()
    })
    .unwrap();
    k.set_placer(wasmsched::backend::Placer::Policy);
    let mut world = World::new();
    let jobs: Vec<JobId> =
        c.wait(&label, "three pods queued, the shared device counted", Duration::from_secs(30), || {
            step(&mut k, &mut world, 300);
            let vm2 = node(&world, "vm2")?;
            let counted = world.nodes()[vm2 as usize].gpu_type == "NVIDIA H100 80GB HBM3";
            pods.iter().map(|p| job_named(&world, p)).collect::<Option<Vec<_>>>().filter(|_| counted)
        });
    let vm2 = node(&world, "vm2").unwrap();
    let both = [place_on(jobs[0], vm2, vec![0]), place_on(jobs[1], vm2, vec![0])];
    let mut errors = k.apply(&both, &mut world);
    errors.extend(k.drain(&mut world, Duration::from_secs(30)));
    assert!(errors.is_empty(), "{errors:?}");
    let api = Api::<ResourceClaim>::default_namespaced(c.client.clone());
    let result = |claim: &str| {
        let claim = c.rt.block_on(api.get(claim)).unwrap();
        let mut results = claim.status.unwrap().allocation.unwrap().devices.unwrap().results.unwrap();
        results.remove(0)
    };
    let (first, second) = (result(&claims[0]), result(&claims[1]));
    assert_eq!((first.device.as_str(), second.device.as_str()), ("gpu-0", "gpu-0"), "one device, two claims");
    assert!(first.share_id.is_some() && first.share_id != second.share_id, "a share id each: {first:?} {second:?}");
    assert_eq!(first.consumed_capacity.unwrap()["memory"].0, "32212254720", "what it asked: 30Gi");
    assert_eq!(second.consumed_capacity.unwrap()["memory"].0, "42949672960", "the default: 40Gi");
    // 70 of its 80 GiB are given: a third claim's default does not fit.
    let mut errors = k.apply(&[place_on(jobs[2], vm2, vec![0])], &mut world);
    errors.extend(k.drain(&mut world, Duration::from_secs(30)));
    assert!(errors.len() == 1 && errors[0].reason.contains("0 free one(s)"), "{errors:?}");
    assert_eq!(c.pod(&pods[2]).and_then(|p| p.spec?.node_name), None, "the third pod stays unbound");
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn a_gpu_share_is_the_copys_allocation_config_and_the_job_resumes() {
    let (c, image, _serial, _) = dra_cluster_or_skip!();
    let label = test_label("drampsshare");
    let _sweep = c.sweep(&label);
    let objects = Objects::make(c, &label);
    let dir = tempfile::tempdir().unwrap();
    let pod = TrainerPod {
        annotations: &[("checkpoint", "/ckpt")],
        claim_template: Some(&objects.name),
        ..TrainerPod::new("mps", &label, CHECKPOINTED).with_checkpoint_dir(dir.path())
    };
    let name = c.trainer(&image, pod).metadata.name.unwrap();
    let account = tempfile::tempdir().unwrap();
    let mut k = dra_backend(c, &label, account.path());
    let mut world = World::new();
    let job = c.wait(&label, "the pod queued with its claim", Duration::from_secs(30), || {
        step(&mut k, &mut world, 300);
        job_named(&world, &name).filter(|_| claim_of(c, &name).is_some())
    });
    let vm2 = node(&world, "vm2").unwrap();
    let mut errors = k.apply(&[place_on(job, vm2, vec![1])], &mut world);
    errors.extend(k.drain(&mut world, Duration::from_secs(30)));
    assert!(errors.is_empty(), "{errors:?}");
    c.wait(&label, "two epochs", Duration::from_secs(90), || {
        step(&mut k, &mut world, 500);
        (world.history(job).count() >= 2).then_some(())
    });

    let share = wit::ActionKind::SetGpuShare(wit::GpuShare { gpu: 1, percent: 50 });
    let mut errors = k.apply(&[action(job, share)], &mut world);
    errors.extend(k.drain(&mut world, Duration::from_secs(90)));
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(world.state(job).unwrap().gpu_share_percent, Some(50));
    let copy = c.labelled(&label).remove(0);
    let copy_name = copy.metadata.name.unwrap();
    assert_ne!(copy_name, name, "re-created");
    assert_eq!(copy.spec.unwrap().node_name.as_deref(), Some("vm2"), "on its node");
    let claim = claim_of(c, &copy_name).unwrap();
    assert_eq!(holding(&claim).0, ["vm2/device-01"], "on its device");
    let config = claim.status.unwrap().allocation.unwrap().devices.unwrap().config.unwrap();
    let mps = config.iter().find_map(|c| Some(c.opaque.as_ref()?.parameters.0.clone())).expect("a config");
    // The test driver takes a flat map of variables: the one CUDA's MPS clients read.
    assert_eq!(mps, json!({"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50"}));
    let last = world.history(job).last().unwrap().epoch;
    c.wait(&label, "epochs again with its share", Duration::from_secs(90), || {
        step(&mut k, &mut world, 500);
        (world.history(job).last()?.epoch >= last + 2).then_some(())
    });
    assert_consecutive_epochs(world.history(job), "resumed from its checkpoint with its share");

    // Moved to the other node, it keeps its share: the next copy's allocation carries it too.
    let vm = node(&world, "vm").unwrap();
    let mut errors = k.apply(&[action(job, wit::ActionKind::Migrate(NodeId(vm)))], &mut world);
    errors.extend(k.drain(&mut world, Duration::from_secs(90)));
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(world.state(job).unwrap().gpu_share_percent, Some(50), "the world keeps it");
    let moved = c.labelled(&label).remove(0).metadata.name.unwrap();
    assert!(moved != name && moved != copy_name, "re-created again");
    let claim = claim_of(c, &moved).unwrap();
    let (devices, _) = holding(&claim);
    assert!(matches!(devices.as_slice(), [d] if d.starts_with("vm/")), "on a device of vm: {devices:?}");
    let config = claim.status.unwrap().allocation.unwrap().devices.unwrap().config.unwrap();
    let mps = config.iter().find_map(|c| Some(c.opaque.as_ref()?.parameters.0.clone()));
    assert_eq!(mps, Some(json!({"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50"})), "its share went with it");
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn a_group_of_dra_pods_migrates_whole_with_its_copies_claims_and_frees_its_devices() {
    let (c, image, _serial, _) = dra_cluster_or_skip!();
    let label = test_label("dragmove");
    let _sweep = c.sweep(&label);
    let objects = Objects::make(c, &label);
    let dir = tempfile::tempdir().unwrap();
    // Two ranks of one job, each with a device through a claim of the template, checkpointing
    // to a folder both nodes reach.
    let template: &'static str = Box::leak(objects.name.clone().into_boxed_str());
    let group: &'static str = Box::leak(format!("wst-{label}-pair").into_boxed_str());
    let labels: &'static [(&'static str, &'static str)] =
        Box::leak(Box::new([("kueue.x-k8s.io/pod-group-name", group)]));
    let args: Vec<Vec<String>> = (0..2)
        .map(|rank| {
            let mut a: Vec<String> = CHECKPOINTED.iter().map(|s| s.to_string()).collect();
            a.extend(["--rank".into(), rank.to_string(), "--world-size".into(), "2".into()]);
            a
        })
        .collect();
    let args: Vec<Vec<&str>> = args.iter().map(|a| a.iter().map(String::as_str).collect()).collect();
    for rank in 0..2 {
        let pod = TrainerPod {
            annotations: &[("checkpoint", "/ckpt")],
            raw_labels: labels,
            raw_annotations: &[("kueue.x-k8s.io/pod-group-total-count", "2")],
            claim_template: Some(template),
            ..TrainerPod::new(["rank0", "rank1"][rank], &label, &args[rank]).with_checkpoint_dir(dir.path())
        };
        c.trainer(&image, pod);
    }
    let account = tempfile::tempdir().unwrap();
    let mut k = dra_backend(c, &label, account.path());
    let mut world = World::new();
    let pair = c.wait(&label, "the group queued, its claims made", Duration::from_secs(45), || {
        step(&mut k, &mut world, 300);
        let made = c.labelled(&label).iter().all(|p| claim_of(c, p.metadata.name.as_deref().unwrap()).is_some());
        job_named(&world, group).filter(|_| made)
    });
    let (vm, vm2) = (node(&world, "vm").unwrap(), node(&world, "vm2").unwrap());
    let mut errors = k.apply(&[place_on(pair, vm2, vec![0, 1])], &mut world);
    errors.extend(k.drain(&mut world, Duration::from_secs(30)));
    assert!(errors.is_empty(), "{errors:?}");
    c.wait(&label, "the group's first epochs on vm2", Duration::from_secs(90), || {
        step(&mut k, &mut world, 500);
        (world.history(pair).count() >= 2).then_some(())
    });
    let before: Vec<(String, String)> = c
        .labelled(&label)
        .iter()
        .map(|p| claim_of(c, p.metadata.name.as_deref().unwrap()).unwrap())
        .map(|claim| (claim.metadata.name.unwrap(), claim.metadata.uid.unwrap()))
        .collect();

    // Migrated whole to vm: each copy's claim is allocated there and reserved for it before
    // the binds, and the originals' claims no longer hold vm2's devices.
    let last = world.history(pair).last().unwrap().epoch;
    let mut errors = k.apply(&[action(pair, wit::ActionKind::Migrate(NodeId(vm)))], &mut world);
    errors.extend(k.drain(&mut world, Duration::from_secs(120)));
    assert!(errors.is_empty(), "{errors:?}");
    let mut given = Vec::new();
    for p in c.labelled(&label) {
        let name = p.metadata.name.clone().unwrap();
        assert_eq!(p.spec.as_ref().unwrap().node_name.as_deref(), Some("vm"), "{name} bound on vm");
        let (devices, reserved) = holding(&claim_of(c, &name).unwrap());
        assert_eq!(reserved, [p.metadata.uid.clone().unwrap()], "{name}'s claim reserved for it");
        given.extend(devices);
    }
    given.sort();
    assert!(given.len() == 2 && given.iter().all(|d| d.starts_with("vm/")), "a device of vm each: {given:?}");
    let claims = Api::<ResourceClaim>::default_namespaced(c.client.clone());
    for (name, uid) in &before {
        let now = c.rt.block_on(claims.get_opt(name)).unwrap().filter(|c| c.metadata.uid.as_deref() == Some(uid));
        assert!(now.is_none_or(|c| holding(&c).0.is_empty()), "{name}: the original's claim holds no device");
    }
    c.wait(&label, "epochs again on vm", Duration::from_secs(90), || {
        step(&mut k, &mut world, 500);
        (world.history(pair).last()?.epoch >= last + 2).then_some(())
    });
    assert_consecutive_epochs(world.history(pair), "resumed from its checkpoint on vm");

    // Preempted whole: both copies re-created unbound, and vm's devices free again.
    let mut errors = k.apply(&[action(pair, wit::ActionKind::Preempt)], &mut world);
    errors.extend(k.drain(&mut world, Duration::from_secs(90)));
    assert!(errors.is_empty(), "{errors:?}");
    step(&mut k, &mut world, 300);
    let held: Vec<String> =
        c.rt.block_on(claims.list(&ListParams::default()))
            .unwrap()
            .items
            .iter()
            .flat_map(|claim| holding(claim).0)
            .filter(|d| given.contains(d))
            .collect();
    assert!(held.is_empty(), "the preempted group's devices are free at once: {held:?}");
    assert_eq!(world.free_gpus(NodeId(vm)).len(), devices_on_vm2(c).unwrap(), "every device of vm free in the book");
}
