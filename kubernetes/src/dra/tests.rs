use k8s_openapi::api::core::v1::NodeSelectorTerm;
use k8s_openapi::api::resource::v1::{DeviceRequest, DeviceSubRequest, ExactDeviceRequest};

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
