//! Choosing devices for a claim on one node, as kube-scheduler's allocator does in its
//! simplest form: each request in order (a `firstAvailable` request's alternatives in order,
//! the first that can be met), each device the first free one that its class's and its own
//! CEL selectors accept, that the claim's `matchAttribute` constraints allow beside the devices
//! already chosen, and whose counters (partitionable devices: a whole GPU and its MIG slices
//! draw on one counter set) are not spent. A device that allows several allocations
//! (consumable capacity) may serve several claims while its capacity lasts: each takes what
//! its request asks of it, else the capacity's default, else all of it. First fit, no
//! backtracking over constraints.

use std::collections::{BTreeMap, HashMap, HashSet};

use cel_interpreter::Value;
use k8s_openapi::api::resource::v1::{Device, DeviceAttribute};

use super::cel::{self, Selectors};

/// A device, named as an allocation names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId {
    pub driver: String,
    pub pool: String,
    pub device: String,
}

/// A device this node can reach, as CEL sees it.
#[derive(Debug)]
pub struct Offer<'a> {
    pub id: DeviceId,
    pub device: &'a Device,
    pub value: Value,
}

impl Offer<'_> {
    /// Whether several claims may hold it at once, each with its share of its capacity.
    pub fn shared(&self) -> bool {
        self.device.allow_multiple_allocations == Some(true)
    }
}

/// How many devices a request wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    Exactly(u32),
    /// Every device that matches (at least one).
    All,
}

/// One way to meet a request: its name in the allocation, the CEL selectors (its class's,
/// then its own) a device must pass, and how many.
#[derive(Clone, Debug, PartialEq)]
pub struct Way {
    /// `request`, or `request/subrequest` for an alternative of `firstAvailable`.
    pub name: String,
    pub selectors: Vec<String>,
    pub count: Count,
    /// What it asks of a shared device's capacity (qualified name, milli-units).
    pub capacity: BTreeMap<String, i128>,
}

/// A request: its name and its ways, tried in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub name: String,
    pub ways: Vec<Way>,
}

/// `matchAttribute`: every device chosen for `requests` (all of the claim's when empty) has
/// the same value of `attribute` (a qualified name).
#[derive(Clone, Debug, PartialEq)]
pub struct Constraint {
    pub requests: Vec<String>,
    pub attribute: String,
}

/// Counters left, by driver, pool, counter set and counter (milli-units).
pub type Counters = HashMap<(String, String, String, String), i128>;

/// What each shared device has given of its capacity so far (capacity name as the device
/// names it, milli-units).
pub type Shared = HashMap<DeviceId, BTreeMap<String, i128>>;

/// The devices in use: held whole (`taken`), the counters they leave, and what shared devices
/// have given.
#[derive(Clone, Debug, Default)]
pub struct InUse {
    pub taken: HashSet<DeviceId>,
    pub counters: Counters,
    pub shared: Shared,
}

/// A device chosen for a request (its name in the allocation); for a shared device, what it
/// gives of its capacity.
#[derive(Debug)]
pub struct Pick<'o, 'a> {
    pub request: String,
    pub offer: &'o Offer<'a>,
    pub consumed: Option<BTreeMap<String, i128>>,
}

/// What is chosen so far, and what it spends.
struct Choice<'o, 'a> {
    picked: Vec<Pick<'o, 'a>>,
    fixed: Vec<Option<String>>,
}

/// The devices of `offers` (in order of preference) that meet `requests` under `constraints`,
/// none of them held whole in `in_use`, whose counters and shared capacity it spends. Why not,
/// when they cannot be met.
pub fn allocate<'o, 'a>(
    requests: &[Request],
    constraints: &[Constraint],
    offers: &'o [Offer<'a>],
    in_use: &mut InUse,
    selectors: &mut Selectors,
) -> Result<Vec<Pick<'o, 'a>>, String> {
    let mut choice = Choice { picked: Vec::new(), fixed: vec![None; constraints.len()] };
    for request in requests {
        let mut why = Vec::new();
        let met = request.ways.iter().any(|way| {
            let (picked, fixed) = (choice.picked.len(), choice.fixed.clone());
            let (counters, shared) = (in_use.counters.clone(), in_use.shared.clone());
            match meet(request, way, constraints, offers, in_use, selectors, &mut choice) {
                Ok(()) => true,
                Err(e) => {
                    choice.picked.truncate(picked);
                    choice.fixed = fixed;
                    (in_use.counters, in_use.shared) = (counters, shared);
                    why.push(e);
                    false
                }
            }
        });
        if !met {
            return Err(why.join("; "));
        }
    }
    Ok(choice.picked)
}

/// Meet `request` the way `way` says, adding to `choice`.
fn meet<'o, 'a>(
    request: &Request,
    way: &Way,
    constraints: &[Constraint],
    offers: &'o [Offer<'a>],
    in_use: &mut InUse,
    selectors: &mut Selectors,
    choice: &mut Choice<'o, 'a>,
) -> Result<(), String> {
    let mut got = 0u32;
    let mut refused = None;
    for offer in offers {
        if matches!(way.count, Count::Exactly(n) if got >= n) {
            break;
        }
        if in_use.taken.contains(&offer.id) || choice.picked.iter().any(|p| p.offer.id == offer.id) {
            continue;
        }
        match accepts(way, offer, selectors) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                refused.get_or_insert(e);
                continue;
            }
        }
        let consumed = if offer.shared() {
            match share(offer, way, &in_use.shared) {
                Some(c) => Some(c),
                None => continue,
            }
        } else {
            None
        };
        // A shared device's counters are not spent per claim (it is never held whole).
        let spent = offer.shared() || spend(offer, &mut in_use.counters);
        if !constrained(&request.name, offer, constraints, &mut choice.fixed) || !spent {
            continue;
        }
        if let Some(c) = &consumed {
            let given = in_use.shared.entry(offer.id.clone()).or_default();
            for (name, n) in c {
                *given.entry(name.clone()).or_default() += n;
            }
        }
        choice.picked.push(Pick { request: way.name.clone(), offer, consumed });
        got += 1;
    }
    let wanted = match way.count {
        Count::Exactly(n) => n,
        Count::All => got.max(1),
    };
    if got >= wanted {
        return Ok(());
    }
    let mut why = format!("request {} wants {wanted} device(s) and {got} free one(s) here match it", way.name);
    if let Some(e) = refused {
        why.push_str(&format!(" ({e})"));
    }
    Err(why)
}

/// Whether every selector of `way` accepts `offer`.
fn accepts(way: &Way, offer: &Offer, selectors: &mut Selectors) -> Result<bool, String> {
    for s in &way.selectors {
        if !selectors.matches(s, &offer.value)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether `offer` may serve request `request` beside the devices whose attribute values
/// `fixed` holds (fixing them where this is the first).
fn constrained(request: &str, offer: &Offer, constraints: &[Constraint], fixed: &mut [Option<String>]) -> bool {
    let mut now = fixed.to_vec();
    for (c, value) in constraints.iter().zip(now.iter_mut()) {
        if !c.requests.is_empty() && !c.requests.iter().any(|r| r == request) {
            continue;
        }
        let Some(mine) = attribute(offer, &c.attribute) else { return false };
        match value {
            Some(v) if *v != mine => return false,
            Some(_) => {}
            None => *value = Some(mine),
        }
    }
    fixed.clone_from_slice(&now);
    true
}

/// Device `offer`'s attribute `name` (qualified), as text to compare.
fn attribute(offer: &Offer, name: &str) -> Option<String> {
    let (domain, id) = cel::qualified(name, &offer.id.driver);
    let attributes: &BTreeMap<String, DeviceAttribute> = offer.device.attributes.as_ref()?;
    attributes.iter().find(|(n, _)| cel::qualified(n, &offer.id.driver) == (domain, id)).map(|(_, a)| format!("{a:?}"))
}

/// What shared device `offer` gives `way` of each of its capacities (what the way asks,
/// else the capacity's default, else all of it), when all of it is left beside what it has
/// given (`shared`); None when some capacity would be overdrawn.
fn share(offer: &Offer, way: &Way, shared: &Shared) -> Option<BTreeMap<String, i128>> {
    let given = shared.get(&offer.id);
    let mut takes = BTreeMap::new();
    for (name, c) in offer.device.capacity.iter().flatten() {
        let total = cel::milli(&c.value)?;
        let asked = way
            .capacity
            .iter()
            .find(|(n, _)| cel::qualified(n, &offer.id.driver) == cel::qualified(name, &offer.id.driver));
        let default = c.request_policy.as_ref().and_then(|p| p.default.as_ref()).and_then(cel::milli);
        let want = asked.map(|(_, n)| *n).or(default).unwrap_or(total);
        let used = given.and_then(|g| g.get(name)).copied().unwrap_or(0);
        if want < 0 || used + want > total {
            return None;
        }
        takes.insert(name.clone(), want);
    }
    Some(takes)
}

/// Take what `offer` consumes from `counters`; false (and nothing taken) when some counter
/// has too little left.
fn spend(offer: &Offer, counters: &mut Counters) -> bool {
    let mut wants = Vec::new();
    for c in offer.device.consumes_counters.iter().flatten() {
        for (name, counter) in &c.counters {
            let key = (offer.id.driver.clone(), offer.id.pool.clone(), c.counter_set.clone(), name.clone());
            wants.push((key, cel::milli(&counter.value).unwrap_or(i128::MAX)));
        }
    }
    if wants.iter().any(|(key, n)| counters.get(key).is_none_or(|left| left < n)) {
        return false;
    }
    for (key, n) in wants {
        *counters.get_mut(&key).expect("checked") -= n;
    }
    true
}

#[cfg(test)]
mod tests;
