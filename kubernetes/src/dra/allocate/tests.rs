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
    let way = Way {
        name: name.into(),
        selectors: selectors.iter().map(|s| s.to_string()).collect(),
        count,
        capacity: BTreeMap::new(),
    };
    Request { name: name.into(), ways: vec![way] }
}

fn chosen(picked: &[Pick]) -> Vec<String> {
    picked.iter().map(|p| format!("{}={}", p.request, p.offer.id.device)).collect()
}

/// Nothing in use, but `taken` held whole and `counters` left.
fn in_use(taken: &[&Offer], counters: Counters) -> InUse {
    InUse { taken: taken.iter().map(|o| o.id.clone()).collect(), counters, shared: Shared::new() }
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
    let picked = allocate(&wants, &[], &offers, &mut in_use(&[], Counters::new()), &mut s).unwrap();
    assert_eq!(chosen(&picked), ["big=d1", "small=d0", "small=d2"]);
    let why = allocate(&wants, &[], &offers, &mut in_use(&[&offers[0]], Counters::new()), &mut s).unwrap_err();
    assert!(why.contains("too few for all of them together"), "{why}");
    let why = allocate(&wants, &[], &offers, &mut in_use(&[&offers[0], &offers[2]], Counters::new()), &mut s);
    assert!(why.unwrap_err().contains("request small wants 2 device(s) and 1 free one(s)"));
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
            capacity: BTreeMap::new(),
        },
        Way { name: "gpu/any".into(), selectors: vec![], count: Count::Exactly(1), capacity: BTreeMap::new() },
    ];
    let wants = [Request { name: "gpu".into(), ways }];
    let picked = allocate(&wants, &[], &offers, &mut InUse::default(), &mut Selectors::default()).unwrap();
    assert_eq!(chosen(&picked), ["gpu/any=d0"]);
}

#[test]
fn a_match_attribute_constraint_keeps_the_devices_alike() {
    let devices = [device("d0", "a100", None), device("d1", "h100", None), device("d2", "h100", None)];
    let offers = offers(&devices);
    let wants = [request("pair", &[], Count::Exactly(2))];
    let alike = [Constraint { requests: vec![], attribute: "gpu.example.com/model".into() }];
    // d0 first fixes a100 and finds no second one: the search gives d0 up for the h100 pair.
    let picked = allocate(&wants, &alike, &offers, &mut InUse::default(), &mut Selectors::default());
    assert_eq!(chosen(&picked.unwrap()), ["pair=d1", "pair=d2"]);
    let three = [request("three", &[], Count::Exactly(3))];
    let why = allocate(&three, &alike, &offers, &mut InUse::default(), &mut Selectors::default()).unwrap_err();
    assert!(why.contains("with the same gpu.example.com/model"), "{why}");
}

#[test]
fn a_choice_for_one_request_is_given_up_when_a_later_one_cannot_be_met_beside_it() {
    // "any" would take d0, the one h100, and "h100" would find none: the search gives d0 up.
    let two = [device("d0", "h100", None), device("d1", "a100", None)];
    let first = offers(&two);
    let wants = [
        request("any", &[], Count::Exactly(1)),
        request("h100", &["device.attributes['gpu.example.com'].model == 'h100'"], Count::Exactly(1)),
    ];
    let picked = allocate(&wants, &[], &first, &mut InUse::default(), &mut Selectors::default()).unwrap();
    assert_eq!(chosen(&picked), ["any=d1", "h100=d0"]);
    // Counters spent by a device given up are given back: a whole GPU and its slice, asked as
    // "one of either" then "the whole GPU", end with the slice given up and the GPU taken.
    let devices = [
        device("gpu-0-mig", "a100-slice", Some(("set", "10Gi"))),
        device("gpu-0", "a100", Some(("set", "40Gi"))),
        device("gpu-1", "a100-other", Some(("other", "40Gi"))),
    ];
    let offers = offers(&devices);
    let key = |set: &str| ("gpu.example.com".to_string(), "node-a".to_string(), set.to_string(), "memory".to_string());
    let forty = cel::milli(&Quantity("40Gi".into())).unwrap();
    let mut used = in_use(&[], Counters::from([(key("set"), forty), (key("other"), forty)]));
    let wants = [
        request("either", &[], Count::Exactly(1)),
        request("whole", &["device.attributes['gpu.example.com'].model == 'a100'"], Count::Exactly(1)),
    ];
    let picked = allocate(&wants, &[], &offers, &mut used, &mut Selectors::default()).unwrap();
    assert_eq!(chosen(&picked), ["either=gpu-1", "whole=gpu-0"]);
    assert_eq!((used.counters[&key("set")], used.counters[&key("other")]), (0, 0), "the slice's 10Gi given back");
}

#[test]
fn a_whole_gpu_and_its_slices_share_one_counter_set() {
    let devices = [
        device("gpu-0", "a100", Some(("gpu-0-counters", "40Gi"))),
        device("gpu-0-mig-1g", "a100", Some(("gpu-0-counters", "5Gi"))),
    ];
    let offers = offers(&devices);
    let key = ("gpu.example.com".to_string(), "node-a".to_string(), "gpu-0-counters".to_string(), "memory".to_string());
    let mut used = in_use(&[], Counters::from([(key.clone(), cel::milli(&Quantity("40Gi".into())).unwrap())]));
    let whole = [request("whole", &["device.attributes['gpu.example.com'].model == 'a100'"], Count::Exactly(1))];
    let picked = allocate(&whole, &[], &offers, &mut used, &mut Selectors::default()).unwrap();
    assert_eq!(chosen(&picked), ["whole=gpu-0"]);
    assert_eq!(used.counters[&key], 0, "the whole GPU spends its set");
    // With the whole GPU given, its slice does not fit: the counters are spent.
    used.taken.insert(offers[0].id.clone());
    let slice = [request("slice", &[], Count::Exactly(1))];
    assert!(allocate(&slice, &[], &offers, &mut used, &mut Selectors::default()).is_err());
}

#[test]
fn all_takes_every_match_and_a_failing_selector_says_why() {
    let devices = [device("d0", "a100", None), device("d1", "a100", None)];
    let offers = offers(&devices);
    let all = [request("all", &[], Count::All)];
    let picked = allocate(&all, &[], &offers, &mut InUse::default(), &mut Selectors::default()).unwrap();
    assert_eq!(picked.len(), 2);
    let broken = [request("x", &["device.attributes['nope'].model == 'a'"], Count::Exactly(1))];
    let why = allocate(&broken, &[], &offers, &mut InUse::default(), &mut Selectors::default()).unwrap_err();
    assert!(why.contains("fails on this device"), "{why}");
}

#[test]
fn a_shared_device_serves_claims_while_its_capacity_lasts() {
    use k8s_openapi::api::resource::v1::{CapacityRequestPolicy, DeviceCapacity};
    let mut gpu = device("gpu-0", "h100", None);
    gpu.allow_multiple_allocations = Some(true);
    let policy = CapacityRequestPolicy { default: Some(Quantity("20Gi".into())), ..Default::default() };
    gpu.capacity = Some(BTreeMap::from([(
        "memory".to_string(),
        DeviceCapacity { value: Quantity("80Gi".into()), request_policy: Some(policy) },
    )]));
    let devices = [gpu];
    let offers = offers(&devices);
    let gi = |n: i128| n * (1 << 30) * 1000;
    let mut used = InUse::default();
    let mut half = request("half", &[], Count::Exactly(1));
    half.ways[0].capacity = BTreeMap::from([("gpu.example.com/memory".to_string(), gi(40))]);
    let picked = allocate(std::slice::from_ref(&half), &[], &offers, &mut used, &mut Selectors::default()).unwrap();
    assert_eq!(picked[0].consumed, Some(BTreeMap::from([("memory".to_string(), gi(40))])), "what it asked");
    let plain = request("plain", &[], Count::Exactly(1));
    for _ in 0..2 {
        let picked =
            allocate(std::slice::from_ref(&plain), &[], &offers, &mut used, &mut Selectors::default()).unwrap();
        assert_eq!(picked[0].consumed.as_ref().unwrap()["memory"], gi(20), "the capacity's default");
    }
    assert_eq!(used.shared[&offers[0].id]["memory"], gi(80));
    assert!(!used.taken.contains(&offers[0].id), "never held whole");
    let why = allocate(&[plain], &[], &offers, &mut used, &mut Selectors::default()).unwrap_err();
    assert!(why.contains("0 free one(s)"), "{why}");
    assert_eq!(used.shared[&offers[0].id]["memory"], gi(80), "a failed request gives back what it took");
}

#[test]
fn a_search_with_too_many_ways_to_try_gives_up_within_its_bound() {
    // Forty alike devices on one PCIe root and one other on another; the claim wants ten of
    // the forty and the other, all on one root: no set exists, and the ways to try ten of
    // forty are too many to try them all.
    let mut devices: Vec<Device> = (0..40).map(|i| rooted(&format!("d{i}"), "a100", "root-0")).collect();
    devices.push(rooted("nic", "nic", "root-1"));
    let offers = offers(&devices);
    let wants = [
        request("gpus", &["device.attributes['gpu.example.com'].model == 'a100'"], Count::Exactly(10)),
        request("nic", &["device.attributes['gpu.example.com'].model == 'nic'"], Count::Exactly(1)),
    ];
    let same_root = [Constraint { requests: vec![], attribute: "gpu.example.com/root".into() }];
    let started = std::time::Instant::now();
    let why = allocate(&wants, &same_root, &offers, &mut InUse::default(), &mut Selectors::default()).unwrap_err();
    assert!(why.contains("within 20000 tries"), "{why}");
    eprintln!("gave up after {:.1?}", started.elapsed());
}

/// A device of `model` on PCIe root `root`.
fn rooted(name: &str, model: &str, root: &str) -> Device {
    let mut d = device(name, model, None);
    let root = DeviceAttribute { string: Some(root.into()), ..Default::default() };
    d.attributes.as_mut().unwrap().insert("root".into(), root);
    d
}
