use k8s_openapi::api::core::v1::NodeSelectorTerm;
use k8s_openapi::api::resource::v1::{DeviceRequest, DeviceSubRequest, ExactDeviceRequest};

use serde_json::json;

use super::*;

fn requirement(key: &str, operator: &str, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.into(),
        operator: operator.into(),
        values: Some(values.iter().map(|v| v.to_string()).collect()),
    }
}

#[test]
fn a_node_selector_takes_a_node_by_name_or_labels() {
    let labels = BTreeMap::from([("zone".to_string(), "a".to_string())]);
    let by_name = NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: Some(vec![requirement("metadata.name", "In", &["vm2"])]),
            ..Default::default()
        }],
    };
    assert!(selects(&by_name, "vm2", &labels));
    assert!(!selects(&by_name, "vm", &labels));
    let by_label = |op: &str, values: &[&str]| NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: Some(vec![requirement("zone", op, values)]),
            ..Default::default()
        }],
    };
    assert!(selects(&by_label("In", &["a", "b"]), "vm", &labels));
    assert!(!selects(&by_label("NotIn", &["a"]), "vm", &labels));
    assert!(selects(&by_label("Exists", &[]), "vm", &labels));
    assert!(!selects(&by_label("DoesNotExist", &[]), "vm", &labels));
    assert!(!selects(&by_label("Gt", &["1"]), "vm", &labels), "an operator not known takes nothing");
    assert!(!selects(&NodeSelector { node_selector_terms: vec![] }, "vm", &labels), "no term takes nothing");
}

#[test]
fn a_claim_asks_for_its_requests_counts_and_its_first_alternatives() {
    let exactly = |count: Option<i64>, mode: Option<&str>| DeviceRequest {
        name: "r".into(),
        exactly: Some(ExactDeviceRequest {
            device_class_name: "gpu".into(),
            count,
            allocation_mode: mode.map(str::to_string),
            ..Default::default()
        }),
        ..Default::default()
    };
    let first = DeviceRequest {
        name: "f".into(),
        first_available: Some(vec![
            DeviceSubRequest {
                name: "big".into(),
                device_class_name: "gpu".into(),
                count: Some(4),
                ..Default::default()
            },
            DeviceSubRequest {
                name: "small".into(),
                device_class_name: "gpu".into(),
                count: Some(1),
                ..Default::default()
            },
        ]),
        ..Default::default()
    };
    let claim = DeviceClaim {
        requests: Some(vec![exactly(None, None), exactly(Some(2), None), exactly(Some(9), Some("All")), first]),
        ..Default::default()
    };
    assert_eq!(devices_asked(&claim), 1 + 2 + 1 + 4);
    let huge = DeviceClaim {
        requests: Some(vec![exactly(Some(i64::MAX), None), exactly(Some(-5), None)]),
        ..Default::default()
    };
    assert_eq!(devices_asked(&huge), 1024, "a count is bounded, a negative one is none");
}

#[test]
fn a_nodes_gpus_are_its_own_devices_less_those_other_schedulers_pods_hold() {
    let slice = |name: &str, spec: serde_json::Value| -> ResourceSlice {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
    };
    let devices = |names: &[&str]| -> serde_json::Value {
        names.iter().map(|n| json!({"name": n, "capacity": {"memory": {"value": "16Gi"}}})).collect()
    };
    let slices = vec![
        slice(
            "a",
            json!({"driver": "gpu.example.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
            "devices": devices(&["g0", "g1", "g2"])}),
        ),
        // Devices that name their node themselves count there; one for all nodes counts nowhere.
        slice(
            "b",
            json!({"driver": "gpu.example.com", "perDeviceNodeSelection": true,
            "pool": {"name": "shared", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "s0", "nodeName": "n2", "allowMultipleAllocations": true}, {"name": "s1", "allNodes": true}]}),
        ),
        slice(
            "c",
            json!({"driver": "nic.example.com", "nodeName": "n1", "pool": {"name": "nic", "generation": 1, "resourceSliceCount": 1},
            "devices": devices(&["eth0"])}),
        ),
    ];
    let claim = |name: &str, device: &str, pod: &str| -> ResourceClaim {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": {"devices": {"requests": []}},
            "status": {"allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": device}]}},
                "reservedFor": [{"resource": "pods", "name": pod, "uid": format!("{pod}-uid")}]}}))
        .unwrap()
    };
    let dra = Dra::of(slices, vec![claim("theirs", "g1", "other"), claim("ours", "g2", "mine")], &["gpu.example.com"]);
    let theirs =
        |namespace: &str, name: &str, uid: &str| namespace == "default" && name == "other" && uid == "other-uid";
    let gpus = dra.gpus_by_node(&theirs);
    assert_eq!(gpus["n1"], NodeGpus { count: 2, gpu_type: String::new(), memory_bytes: 16 << 30 }, "g1 is another's");
    assert_eq!(gpus["n2"].count, 1, "s0 names n2 itself");
    assert_eq!(gpus.len(), 2);
    // A policy's GPU 1 on n1 is the second device shown there: g2, not g1.
    let shown = dra.shown.lock().unwrap();
    let names: Vec<&str> = shown["n1"].iter().map(|d| d.device.as_str()).collect();
    assert_eq!(names, ["g0", "g2"]);
}
