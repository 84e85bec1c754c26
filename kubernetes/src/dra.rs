//! Devices through Dynamic Resource Allocation: pods whose GPUs come through ResourceClaims
//! (their own, from a template, or one shared by several pods). The host is these pods'
//! scheduler, so it allocates their claims itself before it binds them, as kube-scheduler's
//! DynamicResources plugin does (the kubelet starts no pod whose claims are not allocated and
//! reserved for it):
//!
//! - **What a node has.** ResourceSlices (the newest generation of each pool) give each node
//!   its devices; the devices of the drivers `gpu-drivers` names (NVIDIA's `gpu.nvidia.com` by
//!   default) that are whole GPUs (no `type` attribute, or `gpu`; MIG slices share their GPU's
//!   counters) count as the node's GPUs, with the type and memory their attributes give
//!   (`productName`, capacity `memory`).
//! - **What a pod asks.** Each of its claims' requests: the exact count (one by default; `All`
//!   counts one), or the first alternative's of a `firstAvailable` request.
//! - **Placing.** Before the bind: each claim not yet allocated gets devices on the target node
//!   ([`allocate`]: its class's and its own CEL selectors ([`cel`]), `matchAttribute`
//!   constraints, counters of partitionable devices; the devices the policy named first, then
//!   the rest), never one that another claim holds (a device that allows several allocations
//!   serves several claims while its capacity lasts) or that this host gave out and the watch does
//!   not show yet; the claim gets the delete-protection finalizer, then `status.allocation`
//!   (the devices, the class's and the claim's opaque config, a node selector for the node) and
//!   the pod in `reservedFor`, both conditional on the version read; then the pod is bound. A
//!   claim already allocated on that node is only reserved; on another node, the pod cannot go
//!   there. A group's claims are all planned before any is written.
//! - **Releasing.** A pod re-created (preempted, migrated, resized) is taken out of its claims'
//!   `reservedFor` once it is gone, and a claim that no pod holds any more loses its allocation
//!   and its finalizer, so its devices are free at once (the controller manager would do the
//!   same, later); a claim from a template goes with its pod, and the copy gets a new one,
//!   allocated on the copy's node before it is bound ([`Dra::allocate_copy`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cel_interpreter::Value;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, Pod};
use k8s_openapi::api::resource::v1::{
    DeviceClaim, DeviceClass, DeviceRequestAllocationResult, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

pub(crate) mod allocate;
pub(crate) mod cel;
pub mod sharing;
mod write;

pub use write::{Claims, CopyTarget, release};

use allocate::{Constraint, Count, Counters, DeviceId, InUse, Offer, Request, Way};

/// The DRA driver whose devices count as GPUs unless `gpu-drivers` says otherwise.
pub const NVIDIA_DRIVER: &str = "gpu.nvidia.com";

/// The finalizer a scheduler puts on a claim it allocates, taken off when it is deallocated.
pub const PROTECTION: &str = "resource.kubernetes.io/delete-protection";

/// How long a re-created pod's claims may take to be made (by the controller manager) and seen
/// before its copy is bound.
const COPY_CLAIMS_WAIT: Duration = Duration::from_secs(30);

/// How long a device this host allocated is kept from others while the watch does not show
/// its claim allocated yet (a write that failed gives it back at once).
const ASSUMED_FOR: Duration = Duration::from_secs(60);

/// The GPUs DRA gives a node: how many, their type and memory.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeGpus {
    pub count: u32,
    pub gpu_type: String,
    pub memory_bytes: u64,
}

/// A pod to bind, where: the node's name and labels, and the GPU indices the policy named (places
/// among the node's GPUs as the policy was shown them, [`Dra::gpus_by_node`]), tried first.
pub struct Target<'a> {
    pub pod: &'a Pod,
    pub node: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    pub prefer: &'a [u32],
    /// The share of each GPU its allocation gives it (MPS active-thread percentage), if capped.
    pub share: Option<u8>,
}

/// A claim to write before a pod is bound: its allocation (None when it is allocated already
/// on the pod's node) and the pod to reserve it for.
pub struct Write {
    claim: Arc<ResourceClaim>,
    allocation: Option<serde_json::Value>,
}

/// What one claim's allocation takes: devices held whole, and what shared devices give it of
/// their capacity.
#[derive(Clone, Debug, Default)]
struct Took {
    devices: Vec<DeviceId>,
    shared: Vec<(DeviceId, BTreeMap<String, i128>)>,
}

impl Took {
    fn is_empty(&self) -> bool {
        self.devices.is_empty() && self.shared.is_empty()
    }

    /// What allocation result `r` takes (nothing, for admin access).
    fn of_result(r: &DeviceRequestAllocationResult) -> Took {
        let id = DeviceId { driver: r.driver.clone(), pool: r.pool.clone(), device: r.device.clone() };
        match (&r.share_id, r.admin_access) {
            (_, Some(true)) => Took::default(),
            (Some(_), _) => {
                let consumed = r.consumed_capacity.iter().flatten();
                let consumed = consumed.map(|(n, q)| (n.clone(), cel::milli(q).unwrap_or(0))).collect();
                Took { shared: vec![(id, consumed)], ..Took::default() }
            }
            (None, _) => Took { devices: vec![id], ..Took::default() },
        }
    }

    /// Count it in `in_use`.
    fn count(&self, in_use: &mut InUse) {
        in_use.taken.extend(self.devices.iter().cloned());
        for (id, consumed) in &self.shared {
            let given = in_use.shared.entry(id.clone()).or_default();
            for (name, n) in consumed {
                *given.entry(name.clone()).or_default() += n;
            }
        }
    }
}

/// What one round of placements reads: the slices and the devices in use, read once for all
/// its pods.
struct Round {
    slices: Vec<Arc<ResourceSlice>>,
    book: InUse,
    reach: Reach,
}

/// Devices this host allocated to a claim, for a pod, at a time: kept from others until the
/// watch shows the claim allocated.
struct Assumed {
    took: Took,
    pod: String,
    at: Instant,
}

/// The cluster's DRA objects as the host reads them, and what it allocated.
pub struct Dra {
    slices: Store<ResourceSlice>,
    classes: Store<DeviceClass>,
    claims: Store<ResourceClaim>,
    templates: Store<ResourceClaimTemplate>,
    /// Why the DRA objects cannot be read (an older cluster does not serve `resource.k8s.io/v1`).
    failing: Arc<Mutex<Option<String>>>,
    gpu_drivers: Vec<String>,
    /// How a GPU share reaches their driver.
    sharing: sharing::GpuSharingConfig,
    /// By claim uid.
    assumed: Mutex<HashMap<String, Assumed>>,
    selectors: Mutex<cel::Selectors>,
    /// The round of placements under way ([`Dra::begin`]).
    round: Mutex<Option<Round>>,
    /// The claims this host released (by uid) that the watch may still show allocated.
    released: Released,
    /// Each node's GPUs as the policy was last shown them, by node name: a policy's GPU index
    /// there is a device of this list.
    shown: Mutex<HashMap<String, Vec<DeviceId>>>,
}

/// Claims released, by uid, and when: their allocations as the watch shows them are ignored
/// until it shows them released or gone (a minute at most).
pub type Released = Arc<Mutex<HashMap<String, Instant>>>;

/// A store of `K` kept by a watch whose failures are said in `failing`, not the apiserver's
/// health: a cluster without DRA still schedules.
fn watch<K>(rt: &tokio::runtime::Runtime, api: Api<K>, failing: &Arc<Mutex<Option<String>>>) -> Store<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let stream = reflector::reflector(
        writer,
        watcher::watcher(api, watcher::Config::default()).default_backoff().modify(|o: &mut K| {
            o.managed_fields_mut().clear();
        }),
    );
    let why = failing.clone();
    rt.spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            if let Err(e) = event {
                *why.lock().expect("dra health") = Some(e.to_string());
            }
        }
    });
    store
}

impl Dra {
    /// Watch the slices, classes and claims of the cluster, and the templates of `namespace`.
    pub fn watch(rt: &tokio::runtime::Runtime, client: &Client, config: &crate::KubernetesConfig) -> Dra {
        let _entered = rt.enter();
        let failing = Arc::new(Mutex::new(None));
        Dra {
            slices: watch(rt, Api::all(client.clone()), &failing),
            classes: watch(rt, Api::all(client.clone()), &failing),
            claims: watch(rt, Api::all(client.clone()), &failing),
            templates: watch(rt, Api::namespaced(client.clone(), &config.namespace), &failing),
            failing,
            gpu_drivers: config.gpu_drivers.clone(),
            sharing: config.gpu_sharing.clone(),
            assumed: Mutex::default(),
            selectors: Mutex::default(),
            round: Mutex::default(),
            released: Released::default(),
            shown: Mutex::default(),
        }
    }

    /// A `Dra` of these objects, as a watch would have them (for tests).
    #[cfg(test)]
    fn of(slices: Vec<ResourceSlice>, claims: Vec<ResourceClaim>, gpu_drivers: &[&str]) -> Dra {
        fn store<K>(objects: Vec<K>) -> Store<K>
        where
            K: kube::Resource<DynamicType = ()> + Clone + 'static,
        {
            let mut writer = reflector::store::Writer::default();
            for o in objects {
                writer.apply_watcher_event(&watcher::Event::Apply(o));
            }
            writer.as_reader()
        }
        Dra {
            slices: store(slices),
            classes: store(Vec::new()),
            claims: store(claims),
            templates: store(Vec::new()),
            failing: Arc::default(),
            gpu_drivers: gpu_drivers.iter().map(|d| d.to_string()).collect(),
            sharing: sharing::GpuSharingConfig::default(),
            assumed: Mutex::default(),
            selectors: Mutex::default(),
            round: Mutex::default(),
            released: Released::default(),
            shown: Mutex::default(),
        }
    }

    /// The slices whose pool is at its newest generation (an older one is being replaced), by
    /// name: the same order every time.
    fn current_slices(&self) -> Vec<Arc<ResourceSlice>> {
        let mut slices = self.slices.state();
        slices.sort_unstable_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut newest: HashMap<(&str, &str), i64> = HashMap::new();
        for s in &slices {
            let g = newest.entry((&s.spec.driver, &s.spec.pool.name)).or_insert(s.spec.pool.generation);
            *g = (*g).max(s.spec.pool.generation);
        }
        let keep: Vec<bool> = slices
            .iter()
            .map(|s| newest[&(s.spec.driver.as_str(), s.spec.pool.name.as_str())] == s.spec.pool.generation)
            .collect();
        slices.into_iter().zip(keep).filter_map(|(s, k)| k.then_some(s)).collect()
    }

    /// Each node's GPUs through DRA, by node name (nodes with none are absent): the devices of
    /// the GPU drivers local to it (in a slice for that node, or naming it themselves), less
    /// those that claims hold whole for pods of other schedulers (`theirs` takes a pod's
    /// namespace, name and uid). A policy's GPU index on a node is the device at that place
    /// among these, in slice order ([`Target::prefer`]).
    pub fn gpus_by_node(&self, theirs: &dyn Fn(&str, &str, &str) -> bool) -> HashMap<String, NodeGpus> {
        let foreign = self.held_for_others(theirs);
        let mut by_node: HashMap<String, NodeGpus> = HashMap::new();
        let mut shown: HashMap<String, Vec<DeviceId>> = HashMap::new();
        for s in self.current_slices() {
            if !self.gpu_drivers.contains(&s.spec.driver) {
                continue;
            }
            let per_device = s.spec.per_device_node_selection == Some(true);
            for d in s.spec.devices.iter().flatten() {
                let node = match (&s.spec.node_name, &d.node_name) {
                    (Some(node), _) => node,
                    (None, Some(node)) if per_device => node,
                    _ => continue,
                };
                let attr = |name: &str| {
                    d.attributes
                        .as_ref()?
                        .iter()
                        .find(|(n, _)| cel::qualified(n, &s.spec.driver).1 == name)
                        .map(|(_, a)| a)
                };
                if attr("type").and_then(|a| a.string.as_deref()).is_some_and(|t| t != "gpu") {
                    continue;
                }
                let id =
                    DeviceId { driver: s.spec.driver.clone(), pool: s.spec.pool.name.clone(), device: d.name.clone() };
                if foreign.contains(&id) {
                    continue;
                }
                shown.entry(node.clone()).or_default().push(id);
                let g = by_node.entry(node.clone()).or_default();
                g.count += 1;
                if g.gpu_type.is_empty() {
                    g.gpu_type = attr("productName").and_then(|a| a.string.clone()).unwrap_or_default();
                }
                g.memory_bytes = g.memory_bytes.max(sharing::memory_bytes(&s.spec.driver, d).unwrap_or(0));
            }
        }
        *self.shown.lock().expect("dra shown") = shown;
        by_node
    }

    /// The devices that claims hold whole for other schedulers' pods: allocated, and reserved
    /// for a pod that `theirs` knows.
    fn held_for_others(&self, theirs: &dyn Fn(&str, &str, &str) -> bool) -> HashSet<DeviceId> {
        let mut held = HashSet::new();
        for c in self.claims.state() {
            let Some(status) = &c.status else { continue };
            let reserved = status.reserved_for.iter().flatten();
            let namespace = c.namespace().unwrap_or_default();
            if !reserved.filter(|r| r.resource == "pods").any(|r| theirs(&namespace, &r.name, &r.uid)) {
                continue;
            }
            let results = status.allocation.as_ref().and_then(|a| a.devices.as_ref());
            held.extend(
                results.iter().flat_map(|d| d.results.iter().flatten()).flat_map(|r| Took::of_result(r).devices),
            );
        }
        held
    }

    /// The devices pod `p` asks for through its claims (a claim not made yet counts by its
    /// template); why they are not known yet, when a claim or template is not read yet.
    pub fn gpus_asked(&self, p: &Pod) -> Result<u32, String> {
        let namespace = p.namespace().unwrap_or_default();
        let mut sum = 0u32;
        for c in p.spec.iter().flat_map(|s| s.resource_claims.iter().flatten()) {
            let spec = match (&c.resource_claim_name, &c.resource_claim_template_name) {
                (Some(name), _) => self
                    .claims
                    .get(&ObjectRef::new(name).within(&namespace))
                    .map(|c| c.spec.devices.clone())
                    .ok_or_else(|| format!("its ResourceClaim {name} is not read yet")),
                (None, Some(t)) => self
                    .templates
                    .get(&ObjectRef::new(t).within(&namespace))
                    .map(|t| t.spec.spec.devices.clone())
                    .ok_or_else(|| format!("its ResourceClaimTemplate {t} is not read yet")),
                (None, None) => Ok(None),
            };
            let spec = spec.map_err(|why| match self.failing.lock().expect("dra health").clone() {
                Some(failing) => format!("{why} ({failing})"),
                None => why,
            })?;
            sum = sum.saturating_add(spec.map_or(0, |d| devices_asked(&d)));
        }
        Ok(sum)
    }

    /// Whether pod `p` gets devices through claims.
    pub fn uses_claims(p: &Pod) -> bool {
        p.spec.as_ref().and_then(|s| s.resource_claims.as_ref()).is_some_and(|c| !c.is_empty())
    }

    /// Why pod `p`'s GPUs are not known yet: it has claims, and one (or its template) is not
    /// read yet. None when they are known, or it has no claims.
    pub fn unread(&self, p: &Pod) -> Option<String> {
        if Dra::uses_claims(p) { self.gpus_asked(p).err() } else { None }
    }

    /// Pod `p`'s claims, as the watch shows them; why not, when one is not made yet.
    fn claims_of(&self, p: &Pod) -> Result<Vec<Arc<ResourceClaim>>, String> {
        let namespace = p.namespace().unwrap_or_default();
        let made = p.status.as_ref().and_then(|s| s.resource_claim_statuses.as_ref());
        let mut claims = Vec::new();
        for c in p.spec.iter().flat_map(|s| s.resource_claims.iter().flatten()) {
            let name = c
                .resource_claim_name
                .clone()
                .or_else(|| made?.iter().find(|s| s.name == c.name).and_then(|s| s.resource_claim_name.clone()));
            let Some(name) = name else {
                return Err(format!(
                    "its claim {} from template {} is not made yet (the controller manager makes it)",
                    c.name,
                    c.resource_claim_template_name.as_deref().unwrap_or("?")
                ));
            };
            let claim = self.claims.get(&ObjectRef::new(&name).within(&namespace)).ok_or_else(|| {
                match self.failing.lock().expect("dra health").clone() {
                    Some(why) => format!("its ResourceClaim {name} cannot be read ({why})"),
                    None => format!("its ResourceClaim {name} does not exist yet"),
                }
            })?;
            claims.push(claim);
        }
        Ok(claims)
    }

    /// The devices in use now: allocated by a claim the watch shows, or by this host since.
    fn book(&self, slices: &[Arc<ResourceSlice>]) -> InUse {
        let claims = self.claims.state();
        let allocated: HashSet<String> = claims
            .iter()
            .filter(|c| c.status.as_ref().is_some_and(|s| s.allocation.is_some()))
            .filter_map(|c| c.uid())
            .collect();
        let mut in_use = InUse::default();
        // What this host allocated counts until the watch shows it, or until it was released.
        let mut assumed = self.assumed.lock().expect("dra assumed");
        let mut released = self.released.lock().expect("dra released");
        assumed.retain(|claim, a| {
            !allocated.contains(claim) && !released.contains_key(claim) && a.at.elapsed() < ASSUMED_FOR
        });
        released.retain(|uid, at| allocated.contains(uid) && at.elapsed() < ASSUMED_FOR);
        for c in &claims {
            if c.uid().is_some_and(|uid| released.contains_key(&uid)) {
                continue;
            }
            let results = c.status.as_ref().and_then(|s| s.allocation.as_ref()?.devices.as_ref());
            for r in results.iter().flat_map(|d| d.results.iter().flatten()) {
                Took::of_result(r).count(&mut in_use);
            }
        }
        for a in assumed.values() {
            a.took.count(&mut in_use);
        }
        in_use.counters = counters_left(slices, &in_use.taken);
        in_use
    }

    /// What to write so that each pod of `targets` may be bound to its node: every claim of
    /// every pod allocated there and reserved for its pod. All or nothing: why not, naming the
    /// pod. The devices it takes are kept from others until the watch shows them allocated
    /// or [`Dra::forget_pod`] gives them back.
    pub fn plan(&self, targets: &[Target]) -> Result<Vec<(usize, Write)>, String> {
        let mut round = self.round.lock().expect("dra round");
        let round = round.get_or_insert_with(|| self.read_round());
        self.plan_in(targets, round)
    }

    /// The slices and the devices in use, read now.
    fn read_round(&self) -> Round {
        let slices = self.current_slices();
        Round { book: self.book(&slices), reach: Reach::of(&slices), slices }
    }

    /// [`Dra::plan`] within `round`, which it updates with what it takes.
    fn plan_in(&self, targets: &[Target], round: &mut Round) -> Result<Vec<(usize, Write)>, String> {
        let Round { slices, book, reach } = round;
        let mut offered: HashMap<&str, Vec<Offer>> = HashMap::new();
        let mut selectors = self.selectors.lock().expect("dra selectors");
        let mut writes = Vec::new();
        let mut planned: Vec<(String, Took)> = Vec::new();
        for (i, t) in targets.iter().enumerate() {
            let pod_name = t.pod.name_any();
            let offers = offered.entry(t.node).or_insert_with(|| offers(slices, reach, t.node, t.labels));
            for claim in self.claims_of(t.pod).map_err(|e| format!("pod {pod_name}: {e}"))? {
                let uid = claim.uid().unwrap_or_default();
                if planned.iter().any(|(u, _)| *u == uid) {
                    continue; // a claim two pods of the group share: allocated once
                }
                let (write, took) = self
                    .plan_claim(&claim, t, offers, book, &mut selectors)
                    .map_err(|e| format!("pod {pod_name}, claim {}: {e}", claim.name_any()))?;
                planned.push((uid, took));
                writes.push((i, write));
            }
        }
        let mut assumed = self.assumed.lock().expect("dra assumed");
        for ((i, _), (uid, took)) in writes.iter().zip(planned) {
            if !took.is_empty() {
                let pod = targets[*i].pod.uid().unwrap_or_default();
                assumed.insert(uid, Assumed { took, pod, at: Instant::now() });
            }
        }
        Ok(writes)
    }

    /// One claim's write for node `node`, and the devices it takes there.
    fn plan_claim(
        &self,
        claim: &Arc<ResourceClaim>,
        target: &Target,
        offers: &[Offer],
        book: &mut InUse,
        selectors: &mut cel::Selectors,
    ) -> Result<(Write, Took), String> {
        let (node, prefer) = (target.node, target.prefer);
        if let Some(a) = claim.status.as_ref().and_then(|s| s.allocation.as_ref()) {
            let here = a.node_selector.as_ref().is_none_or(|s| selects(s, node, &BTreeMap::new()));
            if !here {
                return Err("it is allocated on another node; it is free again once no pod holds it".into());
            }
            return Ok((Write { claim: claim.clone(), allocation: None }, Took::default()));
        }
        let spec = claim.spec.devices.clone().unwrap_or_default();
        let (requests, constraints) = self.requests(&spec)?;
        let shown = self.shown.lock().expect("dra shown");
        let named: Vec<&DeviceId> = prefer.iter().filter_map(|&i| shown.get(node)?.get(i as usize)).collect();
        let ordered = preferred(offers, &named);
        drop(shown);
        let picked = allocate::allocate(&requests, &constraints, &ordered, book, selectors)?;
        let claim_uid = claim.uid().unwrap_or_default();
        let mut took = Took::default();
        let mut results = Vec::new();
        for p in &picked {
            let id = &p.offer.id;
            let mut result = json!({"request": p.request, "driver": id.driver, "pool": id.pool, "device": id.device});
            match &p.consumed {
                Some(consumed) => {
                    result["shareID"] = json!(share_id(&claim_uid, id));
                    let text: BTreeMap<&String, String> =
                        consumed.iter().map(|(n, m)| (n, quantity_text(*m))).collect();
                    result["consumedCapacity"] = json!(text);
                    took.shared.push((id.clone(), consumed.clone()));
                }
                None => took.devices.push(id.clone()),
            }
            results.push(result);
        }
        book.taken.extend(took.devices.iter().cloned());
        let allocation = json!({
            "devices": {"results": results, "config": self.config(&spec, &picked, target.share)},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]},
        });
        Ok((Write { claim: claim.clone(), allocation: Some(allocation) }, took))
    }

    /// A claim's requests, each way with its class's selectors first, and its constraints.
    fn requests(&self, spec: &DeviceClaim) -> Result<(Vec<Request>, Vec<Constraint>), String> {
        let class_selectors = |class: &str| -> Result<Vec<String>, String> {
            let c = self
                .classes
                .get(&ObjectRef::new(class))
                .ok_or_else(|| format!("device class {class} does not exist"))?;
            Ok(c.spec.selectors.iter().flatten().filter_map(|s| Some(s.cel.as_ref()?.expression.clone())).collect())
        };
        let own = |s: &Option<Vec<k8s_openapi::api::resource::v1::DeviceSelector>>| -> Vec<String> {
            s.iter().flatten().filter_map(|s| Some(s.cel.as_ref()?.expression.clone())).collect()
        };
        let count = |mode: Option<&str>, n: Option<i64>| match mode {
            Some("All") => Count::All,
            _ => Count::Exactly(n.unwrap_or(1).clamp(0, 1024) as u32),
        };
        let capacity = |c: &Option<k8s_openapi::api::resource::v1::CapacityRequirements>| -> BTreeMap<String, i128> {
            let asked = c.iter().flat_map(|c| c.requests.iter().flatten());
            asked.filter_map(|(n, q)| Some((n.clone(), cel::milli(q)?))).collect()
        };
        let mut requests = Vec::new();
        for r in spec.requests.iter().flatten() {
            let ways = match (&r.exactly, &r.first_available) {
                (Some(e), _) => vec![Way {
                    name: r.name.clone(),
                    selectors: [class_selectors(&e.device_class_name)?, own(&e.selectors)].concat(),
                    count: count(e.allocation_mode.as_deref(), e.count),
                    capacity: capacity(&e.capacity),
                }],
                (None, Some(subs)) => subs
                    .iter()
                    .map(|s| {
                        Ok(Way {
                            name: format!("{}/{}", r.name, s.name),
                            selectors: [class_selectors(&s.device_class_name)?, own(&s.selectors)].concat(),
                            count: count(s.allocation_mode.as_deref(), s.count),
                            capacity: capacity(&s.capacity),
                        })
                    })
                    .collect::<Result<_, String>>()?,
                (None, None) => return Err(format!("request {} says neither exactly nor firstAvailable", r.name)),
            };
            requests.push(Request { name: r.name.clone(), ways });
        }
        let constraints = spec
            .constraints
            .iter()
            .flatten()
            .filter_map(|c| {
                Some(Constraint {
                    requests: c.requests.clone().unwrap_or_default(),
                    attribute: c.match_attribute.clone()?,
                })
            })
            .collect();
        Ok((requests, constraints))
    }

    /// The opaque config an allocation carries: each request's class's (`FromClass`), then the
    /// claim's own (`FromClaim`), which the driver reads when it prepares the devices; and, last
    /// so that it wins, the sharing config ([`sharing`]) for the GPU drivers of the devices
    /// `picked`, capped at `share`.
    fn config(&self, spec: &DeviceClaim, picked: &[allocate::Pick], share: Option<u8>) -> Vec<serde_json::Value> {
        let mut config = Vec::new();
        for r in spec.requests.iter().flatten() {
            let classes: Vec<&str> = match (&r.exactly, &r.first_available) {
                (Some(e), _) => vec![e.device_class_name.as_str()],
                (None, Some(subs)) => subs.iter().map(|s| s.device_class_name.as_str()).collect(),
                (None, None) => Vec::new(),
            };
            for class in classes {
                let Some(c) = self.classes.get(&ObjectRef::new(class)) else { continue };
                for opaque in c.spec.config.iter().flatten().filter_map(|c| c.opaque.as_ref()) {
                    config.push(json!({"source": "FromClass", "requests": [r.name], "opaque": opaque}));
                }
            }
        }
        for c in spec.config.iter().flatten() {
            if let Some(opaque) = &c.opaque {
                config.push(json!({"source": "FromClaim", "requests": c.requests.clone().unwrap_or_default(), "opaque": opaque}));
            }
        }
        let mut drivers: Vec<&str> = picked.iter().map(|p| p.offer.id.driver.as_str()).collect();
        drivers.sort_unstable();
        drivers.dedup();
        for driver in drivers.into_iter().filter(|d| self.gpu_drivers.iter().any(|g| g == d)) {
            let theirs: Vec<&allocate::Pick> = picked.iter().filter(|p| p.offer.id.driver == driver).collect();
            if let Some(parameters) = self.sharing.parameters(driver, &theirs, share) {
                let requests: Vec<&str> = theirs.iter().map(|p| p.request.as_str()).collect();
                config.push(json!({"source": "FromClaim", "requests": requests, "opaque": {"driver": driver, "parameters": parameters}}));
            }
        }
        config
    }

    /// A new round of placements: the slices and the devices in use are read afresh at its
    /// first DRA pod.
    pub fn begin(&self) {
        *self.round.lock().expect("dra round") = None;
    }

    /// Give back what this host allocated for pod `uid`'s claims and has not seen written: its
    /// placement failed.
    pub fn forget_pod(&self, uid: &str) {
        self.assumed.lock().expect("dra assumed").retain(|_, a| a.pod != uid);
    }

    /// The names and uids of pod `p`'s claims that exist, for releasing them once it is gone, and
    /// where to say which were released.
    pub fn claim_names(&self, p: &Pod) -> (Vec<(String, String)>, Released) {
        let claims = self.claims_of(p).unwrap_or_default();
        (claims.iter().map(|c| (c.name_any(), c.uid().unwrap_or_default())).collect(), self.released.clone())
    }
}

/// The counters `slices` share, less what the devices of `taken` consume of them.
fn counters_left(slices: &[Arc<ResourceSlice>], taken: &HashSet<DeviceId>) -> Counters {
    let mut counters = Counters::new();
    for s in slices {
        for set in s.spec.shared_counters.iter().flatten() {
            for (name, c) in &set.counters {
                let key = (s.spec.driver.clone(), s.spec.pool.name.clone(), set.name.clone(), name.clone());
                counters.insert(key, cel::milli(&c.value).unwrap_or(0));
            }
        }
    }
    for s in slices {
        for d in s.spec.devices.iter().flatten() {
            let id = DeviceId { driver: s.spec.driver.clone(), pool: s.spec.pool.name.clone(), device: d.name.clone() };
            if !taken.contains(&id) {
                continue;
            }
            for c in d.consumes_counters.iter().flatten() {
                for (name, n) in &c.counters {
                    let key = (id.driver.clone(), id.pool.clone(), c.counter_set.clone(), name.clone());
                    if let Some(left) = counters.get_mut(&key) {
                        *left -= cel::milli(&n.value).unwrap_or(0);
                    }
                }
            }
        }
    }
    counters
}

/// A quantity in milli-units written as Kubernetes reads it.
fn quantity_text(milli: i128) -> String {
    if milli % 1000 == 0 { (milli / 1000).to_string() } else { format!("{milli}m") }
}

/// The share id of `device` in claim `claim`: the same for the same pair, a UUID's shape.
fn share_id(claim: &str, device: &DeviceId) -> String {
    use sha2::Digest;
    let h = hex::encode(sha2::Sha256::digest(format!("{claim}/{}/{}/{}", device.driver, device.pool, device.device)));
    format!("{}-{}-4{}-8{}-{}", &h[0..8], &h[8..12], &h[13..16], &h[17..20], &h[20..32])
}

/// How many devices a claim's requests ask for.
fn devices_asked(spec: &DeviceClaim) -> u32 {
    let mut sum = 0u32;
    for r in spec.requests.iter().flatten() {
        let (mode, count) = match (&r.exactly, r.first_available.as_ref().and_then(|s| s.first())) {
            (Some(e), _) => (e.allocation_mode.as_deref(), e.count),
            (None, Some(s)) => (s.allocation_mode.as_deref(), s.count),
            (None, None) => continue,
        };
        let n = if mode == Some("All") { 1 } else { count.unwrap_or(1).clamp(0, 1024) as u32 };
        sum = sum.saturating_add(n);
    }
    sum
}

/// Which slices may reach which node, read once a round: the node-local slices by their node's
/// name, and the rest (all nodes, a node selector, a node per device) for every node; and each
/// device as CEL sees it, made once a round when first asked for.
#[derive(Default)]
struct Reach {
    local: HashMap<String, Vec<usize>>,
    other: Vec<usize>,
    values: HashMap<(usize, usize), Value>,
}

impl Reach {
    fn of(slices: &[Arc<ResourceSlice>]) -> Reach {
        let mut reach = Reach::default();
        for (i, s) in slices.iter().enumerate() {
            match &s.spec.node_name {
                Some(node) => reach.local.entry(node.clone()).or_default().push(i),
                None => reach.other.push(i),
            }
        }
        reach
    }
}

/// The devices node `node` (with `labels`) can reach, in their slices' order.
fn offers<'a>(
    slices: &'a [Arc<ResourceSlice>],
    reach: &mut Reach,
    node: &str,
    labels: &BTreeMap<String, String>,
) -> Vec<Offer<'a>> {
    let mut candidates: Vec<usize> = reach.local.get(node).into_iter().flatten().chain(&reach.other).copied().collect();
    candidates.sort_unstable();
    let mut offers = Vec::new();
    for si in candidates {
        let spec = &slices[si].spec;
        let whole = spec.node_name.as_deref() == Some(node)
            || spec.all_nodes == Some(true)
            || spec.node_selector.as_ref().is_some_and(|n| selects(n, node, labels));
        let per_device = spec.per_device_node_selection == Some(true);
        for (di, d) in spec.devices.iter().flatten().enumerate() {
            let reaches = whole
                || per_device
                    && (d.node_name.as_deref() == Some(node)
                        || d.all_nodes == Some(true)
                        || d.node_selector.as_ref().is_some_and(|n| selects(n, node, labels)));
            if reaches {
                let id = DeviceId { driver: spec.driver.clone(), pool: spec.pool.name.clone(), device: d.name.clone() };
                let value = reach.values.entry((si, di)).or_insert_with(|| cel::device_value(&spec.driver, d)).clone();
                offers.push(Offer { id, device: d, value });
            }
        }
    }
    offers
}

/// `offers` with the devices `named` first (in that order), then the rest.
fn preferred<'a>(offers: &[Offer<'a>], named: &[&DeviceId]) -> Vec<Offer<'a>> {
    let first = named.iter().filter_map(|&id| offers.iter().find(|o| o.id == *id));
    let rest = offers.iter().filter(|o| !named.contains(&&o.id));
    first.chain(rest).map(|o| Offer { id: o.id.clone(), device: o.device, value: o.value.clone() }).collect()
}

/// Whether node selector `s` takes node `node` with `labels`: any term whose every
/// requirement holds.
pub fn selects(s: &NodeSelector, node: &str, labels: &BTreeMap<String, String>) -> bool {
    let holds = |r: &NodeSelectorRequirement, value: Option<&str>| {
        let values = r.values.as_deref().unwrap_or_default();
        match r.operator.as_str() {
            "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
            "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    };
    s.node_selector_terms.iter().any(|t| {
        let fields = t.match_fields.iter().flatten().all(|r| holds(r, (r.key == "metadata.name").then_some(node)));
        let labels = t.match_expressions.iter().flatten().all(|r| holds(r, labels.get(&r.key).map(String::as_str)));
        fields && labels
    })
}

#[cfg(test)]
mod tests;
