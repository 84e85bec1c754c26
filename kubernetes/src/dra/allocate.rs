//! Choosing devices for a claim on one node, as kube-scheduler's allocator does: each request
//! in order (a `firstAvailable` request's alternatives in order,
//! the first that can be met), each device the first free one that its class's and its own
//! CEL selectors accept, that the claim's `matchAttribute` constraints allow beside the devices
//! already chosen, and whose counters (partitionable devices: a whole GPU and its MIG slices
//! draw on one counter set) are not spent. A device that allows several allocations
//! (consumable capacity) may serve several claims while its capacity lasts: each takes what
//! its request asks of it, else the capacity's default, else all of it. The devices are tried
//! in order of preference, and a choice that leaves the rest of the claim unmet is given up
//! for the next (backtracking, within a bound).

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

/// A counter: driver, pool, counter set and counter.
pub type CounterKey = (String, String, String, String);

/// Counters left, by counter (milli-units).
pub type Counters = HashMap<CounterKey, i128>;

/// What a device spends of each counter (milli-units).
type Spent = Vec<(CounterKey, i128)>;

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

/// How many devices the search may try for one claim before it gives up: a claim's requests
/// and constraints can make the search exponential, and the host must not hang on one.
const SEARCH_STEPS: usize = 20_000;

/// The devices of `offers` (in order of preference) that meet `requests` under `constraints`,
/// none of them held whole in `in_use`, whose counters and shared capacity it spends. As
/// kube-scheduler's allocator does, the search backtracks: a device chosen for one request
/// (or one alternative of a `firstAvailable` request) is given up for the next when the rest of
/// the claim cannot be met beside it, so a claim is refused only when no set of free devices
/// meets it (or the search passes [`SEARCH_STEPS`]). Why not, when they cannot be met.
pub fn allocate<'o, 'a>(
    requests: &[Request],
    constraints: &[Constraint],
    offers: &'o [Offer<'a>],
    in_use: &mut InUse,
    selectors: &mut Selectors,
) -> Result<Vec<Pick<'o, 'a>>, String> {
    let mut search = Search {
        requests,
        constraints,
        offers,
        selectors,
        accepted: requests.iter().map(|r| vec![vec![None; offers.len()]; r.ways.len()]).collect(),
        refused: requests.iter().map(|r| vec![None; r.ways.len()]).collect(),
        steps: 0,
    };
    if let Some(why) = search.unmet_alone(in_use) {
        return Err(why);
    }
    let mut choice = Choice { picked: Vec::new(), fixed: vec![None; constraints.len()] };
    if search.request(0, in_use, &mut choice) {
        return Ok(choice.picked);
    }
    Err(search.why_not())
}

/// A backtracking search for one claim's devices.
struct Search<'s, 'o, 'a> {
    requests: &'s [Request],
    constraints: &'s [Constraint],
    offers: &'o [Offer<'a>],
    selectors: &'s mut Selectors,
    /// By request, way and offer: whether the way's selectors accept it, once asked (the
    /// search asks again as it backtracks).
    accepted: Vec<Vec<Vec<Option<bool>>>>,
    /// By request and way: the first selector that failed on a device, and why.
    refused: Vec<Vec<Option<String>>>,
    steps: usize,
}

/// What taking one device spent, to give back when the search backs out of it.
struct Taken {
    counters: Spent,
    fixed: Vec<Option<String>>,
}

impl<'o, 'a> Search<'_, 'o, 'a> {
    /// Whether way `w` of request `r` may have offer `i`: no claim holds it whole, and the
    /// way's selectors accept it.
    fn candidate(&mut self, r: usize, w: usize, i: usize, in_use: &InUse) -> bool {
        if in_use.taken.contains(&self.offers[i].id) {
            return false;
        }
        if let Some(known) = self.accepted[r][w][i] {
            return known;
        }
        let known = match accepts(&self.requests[r].ways[w], &self.offers[i], self.selectors) {
            Ok(yes) => yes,
            Err(e) => {
                self.refused[r][w].get_or_insert(e);
                false
            }
        };
        self.accepted[r][w][i] = Some(known);
        known
    }

    /// Meet request `r` and every one after it; false (and `choice` and `in_use` as they
    /// were) when they cannot be met together.
    fn request(&mut self, r: usize, in_use: &mut InUse, choice: &mut Choice<'o, 'a>) -> bool {
        let Some(request) = self.requests.get(r) else { return true };
        for (w, way) in request.ways.iter().enumerate() {
            let met = match way.count {
                Count::Exactly(n) => self.devices(r, w, n, 0, in_use, choice),
                Count::All => self.all(r, w, in_use, choice),
            };
            if met {
                return true;
            }
        }
        false
    }

    /// Choose `left` more devices for way `w` of request `r` among the offers from the
    /// `from`-th on, then meet the requests after it.
    fn devices(
        &mut self,
        r: usize,
        w: usize,
        left: u32,
        from: usize,
        in_use: &mut InUse,
        choice: &mut Choice<'o, 'a>,
    ) -> bool {
        if left == 0 {
            return self.request(r + 1, in_use, choice);
        }
        for i in from..self.offers.len() {
            // Too few offers left to make up the count.
            if self.offers.len() - i < left as usize || self.steps >= SEARCH_STEPS {
                return false;
            }
            if !self.candidate(r, w, i, in_use) {
                continue;
            }
            self.steps += 1;
            let Some(taken) = self.take(r, w, i, in_use, choice) else { continue };
            if self.devices(r, w, left - 1, i + 1, in_use, choice) {
                return true;
            }
            self.give_back(taken, in_use, choice);
        }
        false
    }

    /// Way `w` of request `r` with `All`: every offer that can be taken beside what is
    /// chosen (at least one), then the requests after it.
    fn all(&mut self, r: usize, w: usize, in_use: &mut InUse, choice: &mut Choice<'o, 'a>) -> bool {
        let mut taken = Vec::new();
        for i in 0..self.offers.len() {
            if !self.candidate(r, w, i, in_use) {
                continue;
            }
            self.steps += 1;
            if let Some(t) = self.take(r, w, i, in_use, choice) {
                taken.push(t);
            }
        }
        if !taken.is_empty() && self.request(r + 1, in_use, choice) {
            return true;
        }
        while let Some(t) = taken.pop() {
            self.give_back(t, in_use, choice);
        }
        false
    }

    /// Take offer `i` for way `w` of request `r`, when it is free beside what is chosen, its
    /// counters and shared capacity allow it and the constraints keep it alike; what it spent.
    fn take(&self, r: usize, w: usize, i: usize, in_use: &mut InUse, choice: &mut Choice<'o, 'a>) -> Option<Taken> {
        let (request, way, offer) = (&self.requests[r], &self.requests[r].ways[w], &self.offers[i]);
        if choice.picked.iter().any(|p| p.offer.id == offer.id) {
            return None;
        }
        let consumed = if offer.shared() { Some(share(offer, way, &in_use.shared)?) } else { None };
        let before = choice.fixed.clone();
        if !constrained(&request.name, offer, self.constraints, &mut choice.fixed) {
            return None;
        }
        // A shared device's counters are not spent per claim (it is never held whole).
        let counters = if offer.shared() { Some(Vec::new()) } else { spend(offer, &mut in_use.counters) };
        let Some(counters) = counters else {
            choice.fixed = before;
            return None;
        };
        if let Some(c) = &consumed {
            let given = in_use.shared.entry(offer.id.clone()).or_default();
            for (name, n) in c {
                *given.entry(name.clone()).or_default() += n;
            }
        }
        choice.picked.push(Pick { request: way.name.clone(), offer, consumed });
        Some(Taken { counters, fixed: before })
    }

    /// Undo the last [`Search::take`].
    fn give_back(&self, taken: Taken, in_use: &mut InUse, choice: &mut Choice<'o, 'a>) {
        let pick = choice.picked.pop().expect("a device was taken");
        for (key, n) in taken.counters {
            *in_use.counters.get_mut(&key).expect("spent from it") += n;
        }
        if let Some(c) = &pick.consumed {
            let given = in_use.shared.get_mut(&pick.offer.id).expect("given from it");
            for (name, n) in c {
                *given.get_mut(name).expect("given") -= n;
            }
        }
        choice.fixed = taken.fixed;
    }

    /// Why the claim cannot be met when some request cannot be met even alone: the first such,
    /// with how many free devices match each of its ways (counted up to what it wants).
    fn unmet_alone(&mut self, in_use: &InUse) -> Option<String> {
        for r in 0..self.requests.len() {
            let mut why = Vec::new();
            for w in 0..self.requests[r].ways.len() {
                let way = &self.requests[r].ways[w];
                let wanted = match way.count {
                    Count::Exactly(n) => n,
                    Count::All => 1,
                };
                let mut free = 0u32;
                for i in 0..self.offers.len() {
                    if free >= wanted {
                        break;
                    }
                    if !self.candidate(r, w, i, in_use) {
                        continue;
                    }
                    let (o, way) = (&self.offers[i], &self.requests[r].ways[w]);
                    let room = if o.shared() {
                        share(o, way, &in_use.shared).is_some()
                    } else {
                        can_spend(o, &in_use.counters)
                    };
                    free += u32::from(room);
                }
                if free >= wanted {
                    why.clear();
                    break;
                }
                let mut text = format!(
                    "request {} wants {wanted} device(s) and {free} free one(s) here match it",
                    self.requests[r].ways[w].name
                );
                if let Some(e) = &self.refused[r][w] {
                    text.push_str(&format!(" ({e})"));
                }
                why.push(text);
            }
            if !why.is_empty() {
                return Some(why.join("; "));
            }
        }
        None
    }

    /// Why the requests, each of which could be met alone, cannot be met together.
    fn why_not(&self) -> String {
        if self.steps >= SEARCH_STEPS {
            return format!(
                "no devices found within {SEARCH_STEPS} tries: the claim's requests and constraints leave too many \
                 ways to try on this node; ask for fewer devices or drop a constraint"
            );
        }
        let alike: Vec<&str> = self.constraints.iter().map(|c| c.attribute.as_str()).collect();
        match alike.is_empty() {
            true => "the free devices here that match each request are too few for all of them together".into(),
            false => format!(
                "no free devices here meet every request together with the same {} (the claim's matchAttribute)",
                alike.join(", ")
            ),
        }
    }
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

/// What `offer` consumes of `counters`, by counter.
fn wants(offer: &Offer) -> Spent {
    let mut wants = Vec::new();
    for c in offer.device.consumes_counters.iter().flatten() {
        for (name, counter) in &c.counters {
            let key = (offer.id.driver.clone(), offer.id.pool.clone(), c.counter_set.clone(), name.clone());
            wants.push((key, cel::milli(&counter.value).unwrap_or(i128::MAX)));
        }
    }
    wants
}

/// Whether `counters` have what `offer` consumes left.
fn can_spend(offer: &Offer, counters: &Counters) -> bool {
    wants(offer).iter().all(|(key, n)| counters.get(key).is_some_and(|left| left >= n))
}

/// Take what `offer` consumes from `counters`: what was taken, or None (and nothing taken)
/// when some counter has too little left.
fn spend(offer: &Offer, counters: &mut Counters) -> Option<Spent> {
    if !can_spend(offer, counters) {
        return None;
    }
    let wants = wants(offer);
    for (key, n) in &wants {
        *counters.get_mut(key).expect("checked") -= n;
    }
    Some(wants)
}

#[cfg(test)]
mod tests;
