use serde_json::json;

use super::*;

/// A trainer pod as the apiserver returns it, with `resources` on its container.
fn pod(resources: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": "train-a", "namespace": "default", "uid": "uid-a",
            "creationTimestamp": "2026-11-24T10:00:00Z",
            "labels": {"wasmsched.managed": "true", "wasmsched.metric": "accuracy"},
            "annotations": {"wasmsched.tiers": "0.8,0.9", "wasmsched.checkpoint": "/ckpt", "wasmsched.metric": "acc"}
        },
        "spec": {
            "schedulerName": "wasmsched",
            "containers": [{
                "name": "trainer", "image": "local/wasmsched-trainer:1",
                "resources": resources,
                "volumeMounts": [{"name": "ckpt", "mountPath": "/ckpt"}, {"name": "scratch", "mountPath": "/tmp"}]
            }],
            "volumes": [{"name": "ckpt", "hostPath": {"path": "/srv/ckpt/a"}}, {"name": "scratch", "emptyDir": {}}]
        },
        "status": {"phase": "Pending"}
    }))
    .unwrap()
}

fn burstable() -> Pod {
    pod(json!({"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": "2", "nvidia.com/gpu": "2"}}))
}

#[test]
fn labels_and_annotations_declare_the_job_as_container_labels_do() {
    let d = declared(&burstable());
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    assert_eq!(d.spec.name, "train-a");
    assert_eq!(d.spec.model, "local/wasmsched-trainer:1", "no model label: the image");
    assert_eq!(d.spec.metrics[0].name, "acc", "an annotation wins over a label");
    assert_eq!(d.spec.tiers, Some(wit_tiers(0.8, 0.9)));
    assert_eq!(d.checkpoint.as_deref(), Some("/ckpt"));
    assert_eq!(d.spec.gpus, 2, "GPUs from nvidia.com/gpu");
}

fn wit_tiers(deliverable: f64, final_: f64) -> wasmsched_core::bindings::wit::Tiers {
    wasmsched_core::bindings::wit::Tiers { deliverable, final_ }
}

#[test]
fn a_pod_stands_queued_bound_elsewhere_or_ended() {
    let mut p = burstable();
    assert_eq!(stand(&p, "wasmsched"), Stand::Queued);
    assert_eq!(stand(&p, "other"), Stand::Elsewhere("wasmsched".into()));
    p.spec.as_mut().unwrap().node_name = Some("vm2".into());
    assert_eq!(stand(&p, "wasmsched"), Stand::Bound("vm2".into()));
    p.status.as_mut().unwrap().phase = Some("Succeeded".into());
    assert_eq!(stand(&p, "wasmsched"), Stand::Ended);
}

#[test]
fn quantities_read_as_kubernetes_writes_them() {
    let q = |s: &str| Quantity(s.into());
    assert_eq!(
        [millicores(&q("250m")), millicores(&q("2")), millicores(&q("1.5")), millicores(&q("x"))],
        [Some(250), Some(2000), Some(1500), None]
    );
    assert_eq!(bytes(&q("64Mi")), Some(64 << 20));
    assert_eq!(bytes(&q("1G")), Some(1_000_000_000));
    assert_eq!(bytes(&q("1e3")), Some(1000));
    assert_eq!(bytes(&q("128974848")), Some(128_974_848));
    assert_eq!(bytes(&q("-1Gi")), None);
    assert_eq!(requests(&burstable()), (250, 64 << 20));
    assert_eq!(limits(&burstable()), (Some(2000), None));
    // Requests without limits (the usual pod), and limits alone (its requests default to them).
    assert_eq!(requests(&pod(json!({"requests": {"cpu": "7", "memory": "1Gi"}}))), (7000, 1 << 30));
    assert_eq!(requests(&pod(json!({"limits": {"cpu": "1", "memory": "1Gi"}}))), (1000, 1 << 30));
}

#[test]
fn a_burstable_pods_cpu_limit_is_resized_alone() {
    let patch = resize(&burstable(), Resource::Cpu, 700).unwrap();
    assert_eq!(patch, json!({"spec": {"containers": [{"name": "trainer", "resources": {"limits": {"cpu": "700m"}}}]}}));
}

#[test]
fn a_guaranteed_pods_request_moves_with_its_limit() {
    let p = pod(json!({"limits": {"cpu": "1", "memory": "128Mi"}}));
    assert_eq!(qos(&p.spec.as_ref().unwrap().containers), Qos::Guaranteed);
    let patch = resize(&p, Resource::Cpu, 500).unwrap();
    assert_eq!(patch["spec"]["containers"][0]["resources"]["requests"]["cpu"], "500m");
}

#[test]
fn what_kubernetes_would_refuse_is_refused_with_what_to_change() {
    let best_effort = pod(json!({}));
    let why = resize(&best_effort, Resource::Cpu, 500).unwrap_err();
    assert!(why.contains("QoS class is BestEffort") && why.contains("request"), "{why}");

    let below = resize(&burstable(), Resource::Cpu, 100).unwrap_err();
    assert!(below.contains("below the request"), "{below}");

    let mut restarts = burstable();
    restarts.spec.as_mut().unwrap().containers[0].resize_policy =
        Some(vec![k8s_openapi::api::core::v1::ContainerResizePolicy {
            resource_name: "memory".into(),
            restart_policy: "RestartContainer".into(),
        }]);
    assert!(resize(&restarts, Resource::Cpu, 700).is_ok(), "the CPU policy is NotRequired");
    let why = resize(&restarts, Resource::Memory, 256 << 20).unwrap_err();
    assert!(why.contains("resizePolicy") && why.contains("NotRequired"), "{why}");
}

#[test]
fn a_copy_is_the_pods_own_spec_unbound_with_its_bookkeeping() {
    let mut p = burstable();
    p.spec.as_mut().unwrap().node_name = Some("vm".into());
    let changes = Changes {
        scheduler: "wasmsched".into(),
        preempted: true,
        service: (60_000, 120_000),
        arrived_unix_ms: 5,
        ..Changes::default()
    };
    let c = copy(&p, &changes);
    let a = c.metadata.annotations.as_ref().unwrap();
    assert_eq!(a[REPLACES], "uid-a");
    assert_eq!(a[JOB_NAME], "train-a");
    assert_eq!(
        (a[RUN_MS].as_str(), a[GPU_MS].as_str(), a[WAIT].as_str(), a[ARRIVED].as_str()),
        ("60000", "120000", "preempted", "5")
    );
    assert_eq!(c.metadata.generate_name.as_deref(), Some("train-a-"));
    assert_eq!(c.metadata.name, None);
    assert_eq!(c.metadata.uid, None);
    let spec = c.spec.as_ref().unwrap();
    assert_eq!((spec.node_name.as_deref(), spec.scheduler_name.as_deref()), (None, Some("wasmsched")));
    assert_eq!(spec.containers, p.spec.as_ref().unwrap().containers, "the same containers");
    // A copy of the copy keeps the job's name and arrival, and no longer waits.
    let again = copy(&c, &Changes { preempted: false, ..changes });
    let a = again.metadata.annotations.unwrap();
    assert_eq!((a[JOB_NAME].as_str(), a.get(WAIT)), ("train-a", None));
}

#[test]
fn a_resized_copy_asks_for_its_new_gpus_and_carries_its_batch_size() {
    let mut p = burstable();
    p.spec.as_mut().unwrap().containers[0].env =
        Some(vec![EnvVar { name: BATCH_SIZE_ENV.into(), value: Some("64".into()), value_from: None }]);
    let changes = Changes { scheduler: "wasmsched".into(), gpus: Some(4), batch_size: Some(512), ..Changes::default() };
    let c = copy(&p, &changes);
    assert_eq!(gpus_asked(&c), 4);
    let resources = c.spec.as_ref().unwrap().containers[0].resources.clone().unwrap();
    let gpu = |q: Option<BTreeMap<String, Quantity>>| q.and_then(|q| q.get(GPU_RESOURCE).map(|g| g.0.clone()));
    assert_eq!(gpu(resources.requests.clone()).as_deref(), Some("4"), "requested");
    assert_eq!(gpu(resources.limits.clone()).as_deref(), Some("4"), "limited");
    assert_eq!(resources.limits.unwrap()["cpu"].0, "2", "the rest of its limits stay");
    let env = c.spec.as_ref().unwrap().containers[0].env.clone().unwrap();
    let batch: Vec<_> = env.iter().filter(|v| v.name == BATCH_SIZE_ENV).map(|v| v.value.as_deref()).collect();
    assert_eq!(batch, [Some("512")], "the new batch size replaces the old");
    assert_eq!(c.metadata.annotations.as_ref().unwrap()[BATCH_IN_FORCE], "512");
    assert_eq!(wasmsched_core::live::carried::batch_in_force(&keys(&c)), Some(512), "read back as the batch in force");
    // A resize to no GPU asks for none; one that keeps the batch size leaves it as it was.
    let none = copy(&c, &Changes { gpus: Some(0), batch_size: None, ..changes });
    assert_eq!(gpus_asked(&none), 0);
    assert_eq!(none.metadata.annotations.as_ref().unwrap()[BATCH_IN_FORCE], "512");
    // A migration's copy changes neither.
    let moved = copy(&p, &Changes { scheduler: "wasmsched".into(), ..Changes::default() });
    assert_eq!(moved.spec.as_ref().unwrap().containers, p.spec.as_ref().unwrap().containers);
}

#[test]
fn a_groups_copy_is_told_its_rank_and_the_groups_size() {
    let mut p = burstable();
    p.metadata.annotations.get_or_insert_with(Default::default).insert(crate::pod::KUEUE_TOTAL.into(), "2".into());
    p.spec.as_mut().unwrap().containers[0].env = Some(vec![
        EnvVar { name: "RANK".into(), value: Some("0".into()), value_from: None },
        EnvVar { name: "OTHER".into(), value: Some("x".into()), value_from: None },
    ]);
    let changes = Changes { rank: Some((2, 3)), job_name: Some("pair-2".into()), ..Changes::default() };
    let c = copy(&p, &changes);
    let env: Vec<(String, Option<String>)> =
        c.spec.unwrap().containers[0].env.clone().unwrap().into_iter().map(|v| (v.name, v.value)).collect();
    let value = |name: &str| env.iter().find(|(n, _)| n == name).and_then(|(_, v)| v.clone());
    assert_eq!(value("WASMSCHED_RANK").as_deref(), Some("2"));
    assert_eq!(value("WASMSCHED_WORLD_SIZE").as_deref(), Some("3"));
    assert_eq!(value("RANK").as_deref(), Some("2"), "torchrun's rank, where the pod sets it, follows");
    assert_eq!(value("WORLD_SIZE"), None, "torchrun's world size is not added where the pod does not set it");
    assert_eq!(value("OTHER").as_deref(), Some("x"), "the rest stays");
    assert_eq!(env.iter().filter(|(n, _)| n == "RANK").count(), 1, "set once");
    let a = c.metadata.annotations.as_ref().unwrap();
    assert_eq!((a[RANK].as_str(), a[GROUP_SIZE].as_str(), a[crate::pod::KUEUE_TOTAL].as_str()), ("2", "3", "3"));
    assert_eq!((a[JOB_NAME].as_str(), c.metadata.generate_name.as_deref()), ("pair-2", Some("pair-2-")));
    assert_eq!(c.metadata.labels.as_ref().unwrap()[RANK], "2", "a label too: a Service selects rank 0 by it");
    let mut read = Pod::default();
    read.metadata.annotations = c.metadata.annotations.clone();
    assert_eq!(rank(&read), Some(2), "read back for the group's order");
}

#[test]
fn a_resize_is_refused_when_another_container_asks_for_gpus() {
    let mut p = burstable();
    assert!(resizable(&p).is_ok());
    let mut sidecar = p.spec.as_ref().unwrap().containers[0].clone();
    sidecar.name = "sidecar".into();
    p.spec.as_mut().unwrap().containers.push(sidecar);
    let why = resizable(&p).unwrap_err();
    assert!(why.contains("sidecar") && why.contains("first container alone"), "{why}");
}

#[test]
fn a_checkpoint_must_be_on_a_volume_that_outlives_the_pod() {
    let p = burstable();
    assert!(checkpoint_survives(&p, "/ckpt").is_ok());
    assert!(checkpoint_survives(&p, "/ckpt/model").is_ok());
    assert!(checkpoint_survives(&p, "/tmp/ckpt").unwrap_err().contains("emptyDir"));
    assert!(checkpoint_survives(&p, "/ckptx").unwrap_err().contains("on no volume"));
}

#[test]
fn a_cordoned_or_not_ready_node_takes_no_work_and_its_gpu_type_is_read_from_its_labels() {
    let node = |unschedulable: bool, ready: &str, labels: serde_json::Value| -> k8s_openapi::api::core::v1::Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n", "labels": labels},
            "spec": {"unschedulable": unschedulable},
            "status": {
                "allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "4", "pods": "110"},
                "conditions": [{"type": "Ready", "status": ready}],
            },
        }))
        .unwrap()
    };
    let gfd = serde_json::json!({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", "nvidia.com/gpu.memory": "40960"});
    let ready = node_facts(&node(false, "True", gfd.clone()));
    assert!(ready.ready);
    assert_eq!((ready.gpu_type.as_str(), ready.gpu_memory_bytes), ("NVIDIA-A100-SXM4-40GB", 40 << 30));
    assert!(!node_facts(&node(true, "True", gfd.clone())).ready, "cordoned");
    assert!(!node_facts(&node(false, "False", gfd)).ready, "NotReady");
    let ours = node_facts(&node(
        false,
        "True",
        serde_json::json!({"wasmsched.gpu-type": "a100", "nvidia.com/gpu.product": "x"}),
    ));
    assert_eq!(ours.gpu_type, "a100", "our label first");
}
