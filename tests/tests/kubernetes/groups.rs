//! Pod groups on the real cluster: a distributed job's pods bound whole or not at all, for each
//! of the four ways a cluster declares a group (the upstream Workload API's `PodGroup`, Kueue's
//! plain-pod groups, coscheduling's and Volcano's `PodGroup`s). The nodes are API objects with
//! eight GPUs each (no kubelet behind them: a bound pod never runs, and binding is what these
//! tests check); the pods ask for whole nodes' GPUs, so that binding them one at a time
//! deadlocks two groups created interleaved.
//!
//! The upstream API needs the cluster started with its feature gates (`.ci/run` does, as
//! `shared/k8s/README.md` says); without them that way is skipped, loudly.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use wasmsched::backend::{DefaultPlacement as _, Status as _};
use wasmsched::control::{self, LoopConfig};
use wasmsched::runtime::supervise::{Fallback, Quarantine, Supervised};
use wasmsched::world::{NodeId, World};
use wasmsched_tests::common::{loaded, runtime};

use crate::cluster::{self, Cluster};
use crate::{Until, backend, step, test_label};

/// How a test declares its groups.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Way {
    Upstream,
    Kueue,
    Coscheduling,
    Volcano,
}

const WAYS: [Way; 4] = [Way::Upstream, Way::Kueue, Way::Coscheduling, Way::Volcano];

impl Way {
    /// The API of its `PodGroup` objects (Kueue's groups have none), as the host reads it.
    fn api(self) -> Option<ApiResource> {
        use wasmsched::backend::kubernetes::group::Way as Host;
        let host = match self {
            Way::Upstream => Host::Upstream,
            Way::Kueue => Host::Kueue,
            Way::Coscheduling => Host::Coscheduling,
            Way::Volcano => Host::Volcano,
        };
        host.api()
    }

    /// Whether the cluster serves its API; for a CRD-based one, installs a minimal CRD first
    /// (as the project that owns it would; its schema kept open).
    fn ready(self, c: &Cluster) -> bool {
        let Some(ar) = self.api() else { return true };
        if self != Way::Upstream {
            let crds: Api<CustomResourceDefinition> = Api::all(c.client.clone());
            let crd: CustomResourceDefinition = serde_json::from_value(json!({
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("podgroups.{}", ar.group)},
                "spec": {
                    "group": ar.group,
                    "scope": "Namespaced",
                    "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup"},
                    "versions": [{
                        "name": ar.version, "served": true, "storage": true,
                        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                    }],
                },
            }))
            .unwrap();
            match c.rt.block_on(crds.create(&PostParams::default(), &crd)) {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => panic!("cannot install the {} PodGroup CRD: {e}", ar.group),
            }
        }
        let api: Api<DynamicObject> = Api::namespaced_with(c.client.clone(), "default", &ar);
        cluster::poll(Duration::from_secs(20), Duration::from_millis(250), || {
            c.rt.block_on(api.list(&ListParams::default())).ok().map(|_| ())
        })
        .is_some()
    }

    /// Declare group `name` of `size` pods: its `PodGroup`, where the way has one.
    fn declare(self, c: &Cluster, name: &str, size: u32) {
        let Some(ar) = self.api() else { return };
        let spec = match self {
            Way::Upstream => json!({"schedulingPolicy": {"gang": {"minCount": size}}}),
            _ => json!({"minMember": size}),
        };
        let group: DynamicObject = serde_json::from_value(json!({
            "apiVersion": ar.api_version, "kind": "PodGroup", "metadata": {"name": name}, "spec": spec,
        }))
        .unwrap();
        let api: Api<DynamicObject> = Api::namespaced_with(c.client.clone(), "default", &ar);
        c.rt.block_on(api.create(&PostParams::default(), &group))
            .unwrap_or_else(|e| panic!("cannot create {:?} PodGroup {name}: {e}", self));
    }

    /// Delete group `name`'s `PodGroup` (its finalizer cleared first).
    fn undeclare(self, c: &Cluster, name: &str) {
        let Some(ar) = self.api() else { return };
        let api: Api<DynamicObject> = Api::namespaced_with(c.client.clone(), "default", &ar);
        let clear = Patch::Merge(json!({"metadata": {"finalizers": null}}));
        let _ = c.rt.block_on(api.patch(name, &PatchParams::default(), &clear));
        let _ = c.rt.block_on(api.delete(name, &DeleteParams::default()));
    }

    /// Pod `index` of group `group` (of `size`), asking for `gpus`, queued for our scheduler.
    fn pod(self, c: &Cluster, label: &str, group: &str, index: u32, size: u32, gpus: u32) -> String {
        let name = format!("wsg-{label}-{group}-{index}");
        let mut labels = BTreeMap::from([("wasmsched.test".to_string(), label.to_string())]);
        let mut annotations = BTreeMap::new();
        let mut spec = json!({
            "schedulerName": "wasmsched",
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "main",
                "image": "local/busybox:1",
                "imagePullPolicy": "Never",
                "command": ["sleep", "3600"],
                "resources": {"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"nvidia.com/gpu": gpus.to_string()}},
            }],
        });
        match self {
            Way::Upstream => spec["schedulingGroup"] = json!({"podGroupName": group}),
            Way::Kueue => {
                labels.insert("kueue.x-k8s.io/pod-group-name".into(), group.into());
                annotations.insert("kueue.x-k8s.io/pod-group-total-count".to_string(), size.to_string());
            }
            Way::Coscheduling => {
                labels.insert("scheduling.x-k8s.io/pod-group".into(), group.into());
            }
            Way::Volcano => {
                annotations.insert("scheduling.k8s.io/group-name".to_string(), group.to_string());
            }
        }
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "spec": spec,
        }))
        .unwrap();
        c.rt.block_on(c.pods().create(&PostParams::default(), &pod)).expect("the apiserver creates the pod");
        name
    }
}

/// Whether the cluster serves the upstream `PodGroup` API (`scheduling.k8s.io/v1alpha2`).
pub fn serves_podgroups(c: &Cluster) -> bool {
    let ar = Way::Upstream.api().expect("the upstream way has an API");
    let api: Api<DynamicObject> = Api::namespaced_with(c.client.clone(), "default", &ar);
    c.rt.block_on(api.list(&ListParams::default())).is_ok()
}

/// Nodes as API objects (no kubelet), Ready, with `gpus` GPUs each; deleted on drop. Fresh
/// for each use: without heartbeats the controller manager marks them NotReady after about a
/// minute.
pub(crate) struct ObjectNodes {
    c: &'static Cluster,
    pub(crate) names: Vec<String>,
}

impl ObjectNodes {
    pub(crate) fn new(c: &'static Cluster, label: &str, count: u32, gpus: u32) -> ObjectNodes {
        let nodes: Api<Node> = Api::all(c.client.clone());
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let resources = json!({"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": gpus.to_string()});
        let mut names = Vec::new();
        for i in 0..count {
            let name = format!("wsg-{label}-n{i}");
            let node: Node = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"wasmsched.test": label}},
            }))
            .unwrap();
            c.rt.block_on(nodes.create(&PostParams::default(), &node)).expect("the apiserver creates the node");
            let status = json!({"status": {
                "capacity": resources, "allocatable": resources,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                    "message": "an API object, no kubelet", "lastHeartbeatTime": now, "lastTransitionTime": now}],
            }});
            c.rt.block_on(nodes.patch_status(&name, &PatchParams::default(), &Patch::Merge(status)))
                .expect("the apiserver takes the node's status");
            names.push(name);
        }
        ObjectNodes { c, names }
    }
}

impl Drop for ObjectNodes {
    fn drop(&mut self) {
        let nodes: Api<Node> = Api::all(self.c.client.clone());
        for name in &self.names {
            let _ = self.c.rt.block_on(nodes.delete(name, &DeleteParams::default()));
        }
    }
}

/// Where the pods named stand: each one's node, None while unbound or gone.
fn nodes_of(c: &Cluster, label: &str) -> HashMap<String, Option<String>> {
    c.labelled(label)
        .into_iter()
        .map(|p| (p.metadata.name.unwrap_or_default(), p.spec.and_then(|s| s.node_name)))
        .collect()
}

/// How many of `pods` (names, by their job name's prefix: a copy's name starts with its
/// original's) are bound now.
fn bound(now: &HashMap<String, Option<String>>, group_prefix: &str) -> (usize, usize) {
    let of: Vec<_> = now.iter().filter(|(name, _)| name.starts_with(group_prefix)).collect();
    (of.iter().filter(|(_, node)| node.is_some()).count(), of.len())
}

/// Of two groups of two pods (their names' `prefixes`), group `a` is bound whole, a pod on
/// each of the object `nodes`, and the other waits with nothing bound; `who` says whose run.
fn assert_one_whole(
    now: &HashMap<String, Option<String>>,
    prefixes: &[String],
    a: usize,
    nodes: &ObjectNodes,
    who: &str,
) {
    assert_eq!(bound(now, &prefixes[1 - a]), (0, 2), "{who}: the other group waits whole: {now:?}");
    let on: Vec<_> = now.iter().filter(|(n, _)| n.starts_with(&prefixes[a])).filter_map(|(_, n)| n.clone()).collect();
    assert!(on.iter().all(|n| nodes.names.contains(n)) && on[0] != on[1], "{who}: a pod a node: {now:?}");
}

/// Watches every group for being partly bound, and fails if one stays so for longer than
/// `most` (a bind in flight, or one taken back, is partly bound for a moment).
struct Whole {
    groups: Vec<String>,
    since: HashMap<String, Instant>,
    most: Duration,
    worst: Duration,
}

impl Whole {
    fn new(groups: &[String]) -> Whole {
        Whole { groups: groups.to_vec(), since: HashMap::new(), most: Duration::from_secs(5), worst: Duration::ZERO }
    }

    /// Look at the pods now.
    fn check(&mut self, now: &HashMap<String, Option<String>>, size: usize) {
        for g in &self.groups {
            let (b, _) = bound(now, g);
            if b > 0 && b < size {
                let since = *self.since.entry(g.clone()).or_insert_with(Instant::now);
                self.worst = self.worst.max(since.elapsed());
                assert!(
                    since.elapsed() <= self.most,
                    "group {g} partly bound ({b} of {size}) for {:?}: {now:?}",
                    since.elapsed()
                );
            } else {
                self.since.remove(g);
            }
        }
    }
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn two_groups_created_interleaved_run_one_whole_then_the_other_for_each_way_of_declaring_them() {
    let Some(c) = cluster::cluster() else {
        eprintln!("SKIPPED {}: no Kubernetes cluster", module_path!());
        return;
    };
    let _serial = cluster::serial();
    let mut skipped = Vec::new();
    for way in WAYS {
        if !way.ready(c) {
            eprintln!(
                "SKIPPED {way:?} groups: the cluster does not serve {:?}; start it with the Workload API's feature \
                 gates (shared/k8s/README.md, \"Alpha APIs\")",
                way.api().map(|a| a.api_version)
            );
            skipped.push(way);
            continue;
        }
        let label = test_label(&format!("g{way:?}").to_lowercase());
        let _sweep = c.sweep(&label);
        let nodes = ObjectNodes::new(c, &label, 2, 8);
        let groups = ["a".to_string(), "b".to_string()];
        for g in &groups {
            way.declare(c, &format!("{label}-{g}"), 2);
        }
        // Interleaved: a0, b0, a1, b1; each pod takes a whole node's GPUs.
        for i in 0..2 {
            for g in &groups {
                way.pod(c, &label, &format!("{label}-{g}"), i, 2, 8);
            }
        }
        let prefixes: Vec<String> = groups.iter().map(|g| format!("wsg-{label}-{label}-{g}-")).collect();
        let mut whole = Whole::new(&prefixes);
        let mut policy = Supervised::new(
            loaded("fifo"),
            "{}".into(),
            Default::default(),
            Fallback::KeepLimits,
            Quarantine::default(),
        );
        let mut k = backend(c, &label);
        // One run of the host: once a group is bound whole, its pods end (deleted), and the
        // other group must be bound whole in its turn.
        let started = Instant::now();
        let (mut first, mut first_took, mut second) = (None::<usize>, Duration::ZERO, None::<Instant>);
        let done = |_: &World| {
            let now = nodes_of(c, &label);
            whole.check(&now, 2);
            match first {
                None => {
                    first = prefixes.iter().position(|p| bound(&now, p) == (2, 2));
                    if let Some(a) = first {
                        first_took = started.elapsed();
                        assert_one_whole(&now, &prefixes, a, &nodes, &format!("{way:?}"));
                        let now_gone = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
                        for name in now.keys().filter(|n| n.starts_with(&prefixes[a])) {
                            let _ = c.rt.block_on(c.pods().delete(name, &now_gone));
                        }
                        second = Some(Instant::now());
                    }
                    false
                }
                Some(a) => bound(&now, &prefixes[1 - a]) == (2, 2),
            }
        };
        let mut driver = Until { policy: &mut policy, done, limit_ms: 45_000 };
        control::drive(&mut k, &mut driver, runtime(), &LoopConfig::unbudgeted(Duration::from_millis(500)));
        let now = nodes_of(c, &label);
        let Some(a) = first else { panic!("{way:?}: no group was bound whole: {now:?}\n{}", c.describe(&label)) };
        assert_eq!(
            bound(&now, &prefixes[1 - a]),
            (2, 2),
            "{way:?}: the second group bound whole: {now:?}\n{}",
            c.describe(&label)
        );
        eprintln!(
            "{way:?}: first group bound whole {first_took:.1?} after the host started, the second {:.1?} after the first \
             ended; longest partly bound: {:.1?}",
            second.map_or(Duration::ZERO, |s| s.elapsed()),
            whole.worst
        );
        for g in &groups {
            way.undeclare(c, &format!("{label}-{g}"));
        }
    }
    assert!(skipped.len() < WAYS.len(), "no way of declaring a group could be tried");
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn a_group_too_large_is_refused_not_held_and_one_that_loses_a_pod_is_taken_back_whole() {
    let Some(c) = cluster::cluster() else {
        eprintln!("SKIPPED {}: no Kubernetes cluster", module_path!());
        return;
    };
    let _serial = cluster::serial();
    let way = Way::Kueue;
    let label = test_label("gbig");
    let _sweep = c.sweep(&label);
    let nodes = ObjectNodes::new(c, &label, 2, 8);
    // Three pods of eight GPUs on two nodes of eight: never.
    for i in 0..3 {
        way.pod(c, &label, "big", i, 3, 8);
    }
    // Behind it, a group that fits.
    for i in 0..2 {
        way.pod(c, &label, "fits", i, 2, 4);
    }
    let mut k = backend(c, &label);
    let mut world = World::new();
    let big_prefix = format!("wsg-{label}-big-");
    let fits_prefix = format!("wsg-{label}-fits-");
    let mut whole = Whole::new(&[big_prefix.clone(), fits_prefix.clone()]);
    c.wait(&label, "the group that fits bound whole", Duration::from_secs(30), || {
        step(&mut k, &mut world, 500);
        let now = nodes_of(c, &label);
        whole.check(&now, 2);
        (bound(&now, &fits_prefix) == (2, 2)).then_some(())
    });
    let now = nodes_of(c, &label);
    assert_eq!(bound(&now, &big_prefix), (0, 3), "the group larger than the cluster holds nothing: {now:?}");
    let big = world.all_jobs().find(|(s, _)| s.name == "big").map(|(s, _)| s.handle).expect("the large group is a job");
    assert_eq!(
        world.spec(big).map(|s| (s.gpus, s.replicas)),
        Some((24, 3)),
        "one job: its GPUs the sum, a replica a pod"
    );
    assert!(k.startable(&world).is_empty(), "the default placement would bind none of it");
    let fits_job = world.all_jobs().find(|(s, _)| s.name == "fits").map(|(s, _)| s.handle).unwrap();
    let state = world.state(fits_job).unwrap();
    assert!(state.is_running() && state.gpus.len() == 8, "{state:?}");

    // A pod of the running group is deleted: the other is taken back at once, and the group
    // waits (one of its two pods exists) outside the world.
    let victim = now.keys().find(|n| n.starts_with(&fits_prefix)).unwrap().clone();
    c.rt.block_on(c.pods().delete(&victim, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }))
        .unwrap();
    let took = Instant::now();
    c.wait(&label, "the rest of the group taken back", Duration::from_secs(20), || {
        step(&mut k, &mut world, 500);
        let now = nodes_of(c, &label);
        (bound(&now, &fits_prefix) == (0, 1)).then_some(())
    });
    eprintln!("a running group lost a pod: the rest taken back in {:.1?}", took.elapsed());
    assert!(world.all_jobs().all(|(s, _)| s.name != "fits"), "the group waits outside the world until it is whole");
    let held = k.held();
    assert!(
        held.iter().any(|h| h.name == "fits" && h.reason == "1 of 2 pods exist"),
        "the status says why it waits: {held:?}"
    );
    drop(nodes);
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn a_group_whose_node_goes_not_ready_is_kept_whole() {
    let Some(c) = cluster::cluster() else {
        eprintln!("SKIPPED {}: no Kubernetes cluster", module_path!());
        return;
    };
    let _serial = cluster::serial();
    let label = test_label("gdown");
    let _sweep = c.sweep(&label);
    let nodes = ObjectNodes::new(c, &label, 2, 8);
    for i in 0..2 {
        Way::Kueue.pod(c, &label, "spread", i, 2, 8);
    }
    let mut k = backend(c, &label);
    let mut world = World::new();
    let prefix = format!("wsg-{label}-spread-");
    c.wait(&label, "the group bound whole over both nodes", Duration::from_secs(30), || {
        step(&mut k, &mut world, 500);
        (bound(&nodes_of(c, &label), &prefix) == (2, 2)).then_some(())
    });
    let job = world.all_jobs().find(|(s, _)| s.name == "spread").map(|(s, _)| s.handle).unwrap();
    // One of its nodes goes NotReady (its kubelet, had it one, stopped posting).
    let api: Api<Node> = Api::all(c.client.clone());
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let down = json!({"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
        "message": "the test took it down", "lastHeartbeatTime": now, "lastTransitionTime": now}]}});
    c.rt.block_on(api.patch_status(&nodes.names[1], &PatchParams::default(), &Patch::Merge(down))).unwrap();
    let node = world.nodes().iter().position(|n| n.name == nodes.names[1]).unwrap() as u32;
    c.wait(&label, "the node seen NotReady", Duration::from_secs(20), || {
        step(&mut k, &mut world, 500);
        world.is_node_down(NodeId(node)).then_some(())
    });
    // Kept as it stands, whole, for a while: the host neither takes part of it back nor
    // places anything on the node that is down.
    for _ in 0..6 {
        step(&mut k, &mut world, 500);
        assert_eq!(bound(&nodes_of(c, &label), &prefix), (2, 2), "kept whole");
        assert!(world.state(job).is_some_and(|s| s.is_running() && s.gpus.len() == 16), "{:?}", world.state(job));
    }
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn every_shipped_placing_policy_places_a_group_whole() {
    let Some(c) = cluster::cluster() else {
        eprintln!("SKIPPED {}: no Kubernetes cluster", module_path!());
        return;
    };
    let _serial = cluster::serial();
    let mut took = Vec::new();
    for policy in PLACING {
        let label = test_label(&format!("gp{}", policy.replace('-', "")));
        let _sweep = c.sweep(&label);
        let nodes = ObjectNodes::new(c, &label, 2, 8);
        // Two groups of two 8-GPU pods, interleaved: one at a time fits.
        for i in 0..2 {
            for g in ["a", "b"] {
                Way::Kueue.pod(c, &label, g, i, 2, 8);
            }
        }
        let prefixes: Vec<String> = ["a", "b"].iter().map(|g| format!("wsg-{label}-{g}-")).collect();
        let mut whole = Whole::new(&prefixes);
        let mut supervised = Supervised::new(
            loaded(policy),
            "{}".into(),
            Default::default(),
            Fallback::KeepLimits,
            Quarantine::default(),
        );
        let mut k = backend(c, &label);
        let started = Instant::now();
        let mut first = None;
        let done = |_: &World| {
            let now = nodes_of(c, &label);
            whole.check(&now, 2);
            first = prefixes.iter().position(|p| bound(&now, p) == (2, 2));
            first.is_some()
        };
        let mut driver = Until { policy: &mut supervised, done, limit_ms: 20_000 };
        control::drive(&mut k, &mut driver, runtime(), &LoopConfig::unbudgeted(Duration::from_millis(500)));
        let now = nodes_of(c, &label);
        let Some(a) = first else {
            panic!("{policy}: no group was bound whole in 20 s: {now:?}\n{}", c.describe(&label))
        };
        assert_one_whole(&now, &prefixes, a, &nodes, policy);
        took.push(format!("{policy} {:.1?}", started.elapsed()));
    }
    eprintln!("a group of two bound whole over two nodes by: {}", took.join(", "));
}

/// Every shipped policy that places (`abilities.places`).
const PLACING: [&str; 10] =
    ["fifo", "tiresias", "gacer", "sia", "pollux", "gavel", "themis", "quota", "fair-share-decay", "drf"];
