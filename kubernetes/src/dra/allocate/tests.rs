use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{Counter, DeviceCounterConsumption};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::*;

fn device(name: &str, model: &str, slot: Option<(&str, &str)>) -> Device {
    Device {
        name: name.into(),
        attributes: Some(BTreeMap::from([(
            "model".to_string(),
            DeviceAttribute { string: Some(model.into()), ..Default::default() },
        )])),
        consumes_counters: slot.map(|(set, memory)| {
            vec![DeviceCounterConsumption {
                counter_set: set.into(),
                counters: BTreeMap::from([("memory".to_string(), Counter { value: Quantity(memory.into()) })]),
            }]
        }),
        ..Default::default()
    }
}

fn offers(devices: &[Device]) -> Vec<Offer<'_>> {
    devices
        .iter()
        .map(|d| Offer {
            id: DeviceId { driver: "gpu.example.com".into(), pool: "node-a".into(), device: d.name.clone() },
            device: d,
            value: cel::device_value("gpu.example.com", d),
        })
        .collect()
}

fn request(name: &str, selectors: &[&str], count: Count) -> Request {
    let way = Way { name: name.into(), selectors: selectors.iter().map(|s| s.to_string()).collect(), count };
    Request { name: name.into(), ways: vec![way] }
}

fn chosen(picked: &[(String, &Offer)]) -> Vec<String> {
    picked.iter().map(|(r, o)| format!("{r}={}", o.id.device)).collect()
}

#[test]
fn devices_are_chosen_in_order_by_their_selectors_and_never_twice() {
    let devices = [device("d0", "a100", None), device("d1", "h100", None), device("d2", "a100", None)];
    let offers = offers(&devices);
    let mut s = Selectors::default();
    let wants = [
        request("big", &["device.attributes['gpu.example.com'].model == 'h100'"], Count::Exactly(1)),
        request("small", &["device.driver == 'gpu.example.com'"], Count::Exactly(2)),
    ];
    let picked = allocate(&wants, &[], &offers, &HashSet::new(), &mut Counters::new(), &mut s).unwrap();
    assert_eq!(chosen(&picked), ["big=d1", "small=d0", "small=d2"]);
    let taken = HashSet::from([offers[0].id.clone()]);
    let why = allocate(&wants, &[], &offers, &taken, &mut Counters::new(), &mut s).unwrap_err();
    assert!(why.contains("request small wants 2 device(s) and 1 free one(s)"), "{why}");
}

#[test]
fn the_first_available_alternative_that_fits_is_taken() {
    let devices = [device("d0", "a100", None)];
    let offers = offers(&devices);
    let ways = vec![
        Way {
            name: "gpu/h100".into(),
            selectors: vec!["device.attributes['gpu.example.com'].model == 'h100'".into()],
            count: Count::Exactly(1),
        },
        Way { name: "gpu/any".into(), selectors: vec![], count: Count::Exactly(1) },
    ];
    let wants = [Request { name: "gpu".into(), ways }];
    let picked =
        allocate(&wants, &[], &offers, &HashSet::new(), &mut Counters::new(), &mut Selectors::default()).unwrap();
    assert_eq!(chosen(&picked), ["gpu/any=d0"]);
}

#[test]
fn a_match_attribute_constraint_keeps_the_devices_alike() {
    let devices = [device("d0", "a100", None), device("d1", "h100", None), device("d2", "h100", None)];
    let offers = offers(&devices);
    let wants = [request("pair", &[], Count::Exactly(2))];
    let alike = [Constraint { requests: vec![], attribute: "gpu.example.com/model".into() }];
    let picked = allocate(&wants, &alike, &offers, &HashSet::new(), &mut Counters::new(), &mut Selectors::default());
    // First fit fixes a100 at d0 and finds no second one: no backtracking.
    assert!(picked.is_err());
    let picked =
        allocate(&wants, &alike, &offers[1..], &HashSet::new(), &mut Counters::new(), &mut Selectors::default());
    assert_eq!(chosen(&picked.unwrap()), ["pair=d1", "pair=d2"]);
}

#[test]
fn a_whole_gpu_and_its_slices_share_one_counter_set() {
    let devices = [
        device("gpu-0", "a100", Some(("gpu-0-counters", "40Gi"))),
        device("gpu-0-mig-1g", "a100", Some(("gpu-0-counters", "5Gi"))),
    ];
    let offers = offers(&devices);
    let key = ("gpu.example.com".to_string(), "node-a".to_string(), "gpu-0-counters".to_string(), "memory".to_string());
    let mut counters = Counters::from([(key.clone(), cel::milli(&Quantity("40Gi".into())).unwrap())]);
    let whole = [request("whole", &["device.attributes['gpu.example.com'].model == 'a100'"], Count::Exactly(1))];
    let picked = allocate(&whole, &[], &offers, &HashSet::new(), &mut counters, &mut Selectors::default()).unwrap();
    assert_eq!(chosen(&picked), ["whole=gpu-0"]);
    assert_eq!(counters[&key], 0, "the whole GPU spends its set");
    // With the whole GPU given, its slice does not fit: the counters are spent.
    let taken = HashSet::from([offers[0].id.clone()]);
    let slice = [request("slice", &[], Count::Exactly(1))];
    assert!(allocate(&slice, &[], &offers, &taken, &mut counters, &mut Selectors::default()).is_err());
}

#[test]
fn all_takes_every_match_and_a_failing_selector_says_why() {
    let devices = [device("d0", "a100", None), device("d1", "a100", None)];
    let offers = offers(&devices);
    let all = [request("all", &[], Count::All)];
    let picked =
        allocate(&all, &[], &offers, &HashSet::new(), &mut Counters::new(), &mut Selectors::default()).unwrap();
    assert_eq!(picked.len(), 2);
    let broken = [request("x", &["device.attributes['nope'].model == 'a'"], Count::Exactly(1))];
    let why =
        allocate(&broken, &[], &offers, &HashSet::new(), &mut Counters::new(), &mut Selectors::default()).unwrap_err();
    assert!(why.contains("fails on this device"), "{why}");
}
