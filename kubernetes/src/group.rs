//! Pod groups: the pods of one distributed job, placed whole or not at all.
//!
//! A pod belongs to a group when it declares one, in this order:
//! 1. the upstream Workload API: `spec.schedulingGroup.podGroupName`, whose `PodGroup`
//!    (`scheduling.k8s.io/v1alpha2`) says how many pods place together
//!    (`spec.schedulingPolicy.gang.minCount`; a `basic` policy is no gang: its pods are jobs
//!    of their own);
//! 2. Kueue's plain-pod groups: label `kueue.x-k8s.io/pod-group-name`, and the annotation
//!    `kueue.x-k8s.io/pod-group-total-count` on the pods;
//! 3. scheduler-plugins' coscheduling: label `scheduling.x-k8s.io/pod-group`, and its
//!    `PodGroup`'s `spec.minMember` (`scheduling.x-k8s.io/v1alpha1`);
//! 4. Volcano: annotation `scheduling.k8s.io/group-name`, and its `PodGroup`'s
//!    `spec.minMember` (`scheduling.volcano.sh/v1beta1`).
//!
//! A group is one job in the world once as many of its pods exist as its size: its GPUs the
//! sum of theirs, its `replicas` their count, each pod one piece, in rank order (the
//! `wasmsched.rank` the host writes on the pods it re-creates), else in the order of their job
//! names (piece 0, the first, is the group's leader: its log is the job's progress). Until
//! then it waits outside the world, and the host says why once. A group the host resized to
//! another pod count is sized by its pods' `wasmsched.group-size` from then on.
//!
//! The `PodGroup` objects are read through a watch per API; an API the cluster does not serve
//! (its CRD is not installed, its feature gate is off) leaves its groups waiting, with that
//! reason.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};

use wasmsched_core::bindings::wit;
use wasmsched_core::world::NodeId;
use wasmsched_rules::NodePlacement;

use crate::pod::KUEUE_TOTAL;

/// Label: a Kueue plain-pod group's name.
pub const KUEUE_GROUP: &str = "kueue.x-k8s.io/pod-group-name";
/// Label: a coscheduling (scheduler-plugins) group's name.
pub const COSCHEDULING_GROUP: &str = "scheduling.x-k8s.io/pod-group";
/// Annotation: a Volcano group's name.
pub const VOLCANO_GROUP: &str = "scheduling.k8s.io/group-name";

/// How a pod declares its group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Way {
    /// `spec.schedulingGroup.podGroupName` and a `scheduling.k8s.io/v1alpha2` `PodGroup`.
    Upstream,
    /// Kueue's pod-group label and total-count annotation.
    Kueue,
    /// The coscheduling label and a `scheduling.x-k8s.io/v1alpha1` `PodGroup`.
    Coscheduling,
    /// Volcano's group-name annotation and a `scheduling.volcano.sh/v1beta1` `PodGroup`.
    Volcano,
}

impl Way {
    /// The API of the `PodGroup` objects that size its groups (Kueue's need none).
    pub fn api(self) -> Option<ApiResource> {
        let (group, version) = match self {
            Way::Upstream => ("scheduling.k8s.io", "v1alpha2"),
            Way::Coscheduling => ("scheduling.x-k8s.io", "v1alpha1"),
            Way::Volcano => ("scheduling.volcano.sh", "v1beta1"),
            Way::Kueue => return None,
        };
        Some(ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: format!("{group}/{version}"),
            kind: "PodGroup".into(),
            plural: "podgroups".into(),
        })
    }

    /// The way's name in messages.
    pub fn says(self) -> &'static str {
        match self {
            Way::Upstream => "PodGroup (scheduling.k8s.io)",
            Way::Kueue => "Kueue pod group",
            Way::Coscheduling => "coscheduling PodGroup (scheduling.x-k8s.io)",
            Way::Volcano => "Volcano PodGroup (scheduling.volcano.sh)",
        }
    }
}

/// A group: how it is declared and its name (unique within the namespace for its way).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKey {
    /// How it is declared.
    pub way: Way,
    /// Its name.
    pub name: String,
}

impl GroupKey {
    /// The key its job's entry is kept under among the managed pods' uids (which it cannot be).
    pub fn entry(&self) -> Arc<str> {
        Arc::from(format!("group/{:?}/{}", self.way, self.name))
    }
}

/// The group pod `p` declares, if any, by the first way it uses.
pub fn declared(p: &Pod) -> Option<GroupKey> {
    let upstream = p.spec.as_ref().and_then(|s| s.scheduling_group.as_ref()?.pod_group_name.clone());
    let labels = p.metadata.labels.as_ref();
    let annotations = p.metadata.annotations.as_ref();
    let named = |way, name: Option<&String>| {
        name.map(|n| n.trim()).filter(|n| !n.is_empty()).map(|n| GroupKey { way, name: n.to_string() })
    };
    named(Way::Upstream, upstream.as_ref())
        .or_else(|| named(Way::Kueue, labels.and_then(|l| l.get(KUEUE_GROUP))))
        .or_else(|| named(Way::Coscheduling, labels.and_then(|l| l.get(COSCHEDULING_GROUP))))
        .or_else(|| named(Way::Volcano, annotations.and_then(|a| a.get(VOLCANO_GROUP))))
}

/// How many pods of a group place together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Size {
    /// This many, whole or not at all.
    Gang(u32),
    /// None together: each pod is a job of its own (an upstream `basic` policy).
    Basic,
    /// Not known, and why.
    Unknown(String),
    /// Not read yet: its API's objects have not been listed.
    Unread,
}

/// Each piece's node and its GPUs there, piece by piece.
pub type Pieces = Vec<NodePlacement>;

/// Why a watch fails now; None while it succeeds.
type Failing = Arc<Mutex<Option<String>>>;

/// The watches of the `PodGroup` APIs, and whether each is served.
pub struct PodGroups {
    watched: Vec<(Way, Store<DynamicObject>, Failing)>,
    namespace: String,
}

impl PodGroups {
    /// Watch the `PodGroup` objects of every way's API in `namespace`. An API the cluster does
    /// not serve is retried with backoff, quietly: its groups wait, saying so.
    pub fn watch(rt: &tokio::runtime::Runtime, client: &Client, namespace: &str) -> PodGroups {
        let _entered = rt.enter();
        let watched = [Way::Upstream, Way::Coscheduling, Way::Volcano]
            .into_iter()
            .filter_map(|way| {
                let ar = way.api()?;
                let api = Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &ar);
                let writer = reflector::store::Writer::new(ar);
                let store = writer.as_reader();
                let failing = Arc::new(Mutex::new(None));
                let stream = reflector::reflector(
                    writer,
                    watcher::watcher(api, watcher::Config::default()).default_backoff().modify(|g| {
                        g.managed_fields_mut().clear();
                    }),
                );
                let why = failing.clone();
                rt.spawn(async move {
                    let mut stream = std::pin::pin!(stream);
                    while let Some(event) = stream.next().await {
                        *why.lock().expect("podgroup health") = event.err().map(|e| e.to_string());
                    }
                });
                Some((way, store, failing))
            })
            .collect();
        PodGroups { watched, namespace: namespace.to_string() }
    }

    /// The size of group `key`, whose pods present are `pods`.
    pub fn size(&self, key: &GroupKey, pods: &[&Pod]) -> Size {
        if let Some(n) = resized(pods).filter(|&n| n > 0) {
            return Size::Gang(n);
        }
        if key.way == Way::Kueue {
            return kueue_size(pods);
        }
        let Some((_, store, failing)) = self.watched.iter().find(|(w, _, _)| *w == key.way) else {
            return Size::Unknown(format!("{} objects are not watched", key.way.says()));
        };
        // By name, not a walk over the store: a thousand groups ask each tick.
        let at = reflector::ObjectRef::new_with(&key.name, key.way.api().expect("a watched way has an API"));
        let found = store.get(&at.within(&self.namespace));
        let failing = failing.lock().expect("podgroup health").clone();
        if found.is_none() && failing.is_none() && !listed(store) {
            return Size::Unread;
        }
        match found {
            Some(g) => podgroup_size(key.way, &g.data),
            None => match failing {
                Some(why) => Size::Unknown(format!(
                    "the cluster does not serve {} objects ({why}): install that API, or declare the group another \
                     way",
                    key.way.says()
                )),
                None => Size::Unknown(format!("its {} {} does not exist", key.way.says(), key.name)),
            },
        }
    }
}

/// Whether `store` has listed its objects once.
fn listed(store: &Store<DynamicObject>) -> bool {
    use futures_util::FutureExt;
    store.wait_until_ready().now_or_never().is_some_and(|r| r.is_ok())
}

/// A Kueue group's size: its pods' total-count annotation (the first that parses).
fn kueue_size(pods: &[&Pod]) -> Size {
    let said = pods.iter().find_map(|p| p.metadata.annotations.as_ref()?.get(KUEUE_TOTAL));
    match said.map(|s| s.trim().parse::<u32>()) {
        Some(Ok(n)) if n > 0 => Size::Gang(n),
        Some(_) => Size::Unknown(format!("its {KUEUE_TOTAL} annotation is not a count of pods above 0")),
        None => Size::Unknown(format!("its pods have no {KUEUE_TOTAL} annotation saying how many pods it has")),
    }
}

/// A `PodGroup`'s size from its `spec` (`data` of the object).
fn podgroup_size(way: Way, data: &serde_json::Value) -> Size {
    let spec = &data["spec"];
    let count = match way {
        Way::Upstream => {
            let policy = &spec["schedulingPolicy"];
            if policy.get("basic").is_some_and(|b| !b.is_null()) && policy.get("gang").is_none_or(|g| g.is_null()) {
                return Size::Basic;
            }
            &policy["gang"]["minCount"]
        }
        Way::Coscheduling | Way::Volcano => &spec["minMember"],
        Way::Kueue => return Size::Unknown("a Kueue group has no PodGroup".into()),
    };
    match count.as_u64().and_then(|n| u32::try_from(n).ok()) {
        Some(n) if n > 0 => Size::Gang(n),
        _ => Size::Unknown(format!("its {} has no pod count above 0", way.says())),
    }
}

/// One pod of a group, as the host keeps it.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    /// Its pod's uid.
    pub uid: Arc<str>,
    /// The pod's name now.
    pub name: String,
    /// Its job name (kept by every copy of it): the members' order.
    pub job_name: String,
    /// Its CPU and memory requests.
    pub requests: (u64, u64),
    /// The labels a node must carry to take it.
    pub selector: Arc<BTreeMap<String, String>>,
    /// The GPUs it asks for.
    pub gpus: u32,
    /// The node it is bound to, by handle.
    pub node: Option<NodeId>,
    /// Its last cumulative CPU sample (core-ns, Unix ns), once measured.
    pub last_cpu: Option<(u64, u64)>,
    /// Its CPU (millicores) and memory (bytes) use, as last measured.
    pub used: (u64, u64),
}

/// A group's pods, piece by piece: `members[i]` is piece i.
#[derive(Clone, Debug, PartialEq)]
pub struct Gang {
    /// How its pods declare it.
    pub key: GroupKey,
    /// How many pods it has when whole.
    pub size: u32,
    /// Its pods, piece by piece.
    pub members: Vec<Member>,
    /// Its pods' uids and versions when last read, as one number: unchanged pods are not
    /// read again.
    pub seen: u64,
}

impl Gang {
    /// The GPUs each piece asks for.
    pub fn per_piece(&self) -> u32 {
        self.members.first().map_or(0, |m| m.gpus)
    }

    /// Whether every member is bound.
    pub fn bound(&self) -> bool {
        self.members.iter().all(|m| m.node.is_some())
    }
}

/// Where each piece of a group of `members` goes for `placement`, piece by piece: its node and
/// its GPUs there. Pieces with GPUs go `gpus / per piece` to each node named, the GPUs named
/// taken in order; a group without GPUs goes to the nodes named in order, as many pieces on
/// each as `room` says it takes (piece by piece: `room(node, piece)` is true when that node takes
/// that piece now, and takes it). An `elastic` group may be dealt into another number of pieces
/// ([`piece_gpus`]): a piece beyond its members is a new pod. Why not, when the placement does
/// not carry every piece.
pub fn deal(
    placement: &wit::Placement,
    members: &[Member],
    elastic: bool,
    mut room: impl FnMut(NodeId, usize) -> Result<(), String>,
) -> Result<Pieces, String> {
    let per = members.first().map_or(0, |m| m.gpus);
    let n = members.len();
    let mut pieces = Vec::with_capacity(n);
    if per == 0 {
        let mut nodes = placement.nodes.iter().map(|e| e.node).peekable();
        let mut last = None;
        while pieces.len() < n {
            let Some(&node) = nodes.peek() else {
                let why = last.map_or_else(String::new, |w: String| format!(" (the last: {w})"));
                return Err(format!(
                    "the nodes named take {} of the group's {n} pods{why}: name more nodes, or nodes with room",
                    pieces.len()
                ));
            };
            match room(node, pieces.len()) {
                Ok(()) => pieces.push(NodePlacement { node, gpus: Vec::new() }),
                Err(why) => {
                    last = Some(why);
                    nodes.next();
                }
            }
        }
        return Ok(pieces);
    }
    let size = if elastic { piece_gpus(placement, per)? } else { per };
    for entry in &placement.nodes {
        if entry.gpus.len() % size as usize != 0 {
            return Err(format!(
                "each pod of the group takes {per} GPU(s); node {} gets {}, not a whole number of pods",
                entry.node,
                entry.gpus.len()
            ));
        }
        for chunk in entry.gpus.chunks(size as usize) {
            if pieces.len() == n && !elastic {
                return Err(format!("the placement names more GPUs than the group's {n} pods of {per} take"));
            }
            room(entry.node, pieces.len())?;
            pieces.push(NodePlacement::new(entry.node, chunk));
        }
    }
    if pieces.len() < n && !elastic {
        return Err(format!("the placement carries {} of the group's {n} pods of {per} GPU(s)", pieces.len()));
    }
    Ok(pieces)
}

/// The GPUs each pod of an elastic group of pods of `per` GPUs takes under `placement`: still
/// `per` where every node named gets a whole number of such pods, else the largest count that
/// divides every node's GPUs (pods stay equal pieces, as few as can be). Why not, when a node
/// named gets no GPU.
pub fn piece_gpus(placement: &wit::Placement, per: u32) -> Result<u32, String> {
    let mut common = 0usize;
    for entry in &placement.nodes {
        if entry.gpus.is_empty() {
            return Err(format!("node {} gets no GPU; the group's pods take {per} GPU(s) each", entry.node));
        }
        common = gcd(common, entry.gpus.len());
    }
    if common == 0 {
        return Err("the placement names no node".into());
    }
    let per = per as usize;
    Ok(u32::try_from(if common.is_multiple_of(per) { per } else { common }).unwrap_or(1))
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The size the host gave a group it re-created ([`pod::GROUP_SIZE`] on its pods): after a
/// resize to another pod count, its size from then on.
fn resized(pods: &[&Pod]) -> Option<u32> {
    pods.iter().filter_map(|p| p.metadata.annotations.as_ref()?.get(crate::pod::GROUP_SIZE)?.parse().ok()).max()
}

/// The placement that puts pieces where `pieces` says (one entry per node, in order of first
/// appearance).
pub fn placement_of(pieces: &[NodePlacement]) -> wit::Placement {
    let mut nodes: Vec<NodePlacement> = Vec::new();
    for piece in pieces {
        match nodes.iter_mut().find(|e| e.node == piece.node) {
            Some(e) => e.gpus.extend(&piece.gpus),
            None => nodes.push(piece.clone()),
        }
    }
    wit::Placement { nodes, share: false }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).unwrap()
    }

    fn member(i: u32, gpus: u32) -> Member {
        Member {
            uid: Arc::from(format!("u{i}")),
            name: format!("w-{i}"),
            job_name: format!("w-{i}"),
            requests: (100, 0),
            selector: Arc::default(),
            gpus,
            node: None,
            last_cpu: None,
            used: (0, 0),
        }
    }

    fn at(entries: &[(u32, &[u32])]) -> wit::Placement {
        let nodes = entries.iter().map(|(node, gpus)| wit::NodePlacement::new(*node, *gpus)).collect();
        wit::Placement { nodes, share: false }
    }

    #[test]
    fn a_group_is_read_from_each_of_the_four_ways_in_order() {
        let upstream = pod(serde_json::json!({
            "metadata": {"name": "a", "labels": {KUEUE_GROUP: "k"}},
            "spec": {"containers": [], "schedulingGroup": {"podGroupName": "up"}},
        }));
        assert_eq!(declared(&upstream), Some(GroupKey { way: Way::Upstream, name: "up".into() }), "upstream first");
        let kueue =
            pod(serde_json::json!({"metadata": {"name": "a", "labels": {KUEUE_GROUP: "k", COSCHEDULING_GROUP: "c"}}}));
        assert_eq!(declared(&kueue), Some(GroupKey { way: Way::Kueue, name: "k".into() }));
        let cosched = pod(serde_json::json!({"metadata": {"name": "a", "labels": {COSCHEDULING_GROUP: "c"}}}));
        assert_eq!(declared(&cosched), Some(GroupKey { way: Way::Coscheduling, name: "c".into() }));
        let volcano = pod(serde_json::json!({"metadata": {"name": "a", "annotations": {VOLCANO_GROUP: "v"}}}));
        assert_eq!(declared(&volcano), Some(GroupKey { way: Way::Volcano, name: "v".into() }));
        let none = pod(serde_json::json!({"metadata": {"name": "a", "annotations": {VOLCANO_GROUP: " "}}}));
        assert_eq!(declared(&none), None, "a blank name is no group");
    }

    #[test]
    fn sizes_come_from_the_podgroup_or_kueues_annotation() {
        let gang = serde_json::json!({"spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}});
        assert_eq!(podgroup_size(Way::Upstream, &gang), Size::Gang(3));
        let basic = serde_json::json!({"spec": {"schedulingPolicy": {"basic": {}}}});
        assert_eq!(podgroup_size(Way::Upstream, &basic), Size::Basic);
        assert_eq!(podgroup_size(Way::Volcano, &serde_json::json!({"spec": {"minMember": 2}})), Size::Gang(2));
        assert!(matches!(
            podgroup_size(Way::Coscheduling, &serde_json::json!({"spec": {"minMember": 0}})),
            Size::Unknown(_)
        ));
        let k = |total: &str| pod(serde_json::json!({"metadata": {"name": "a", "annotations": {KUEUE_TOTAL: total}}}));
        assert_eq!(kueue_size(&[&k("4")]), Size::Gang(4));
        let Size::Unknown(why) = kueue_size(&[&k("x")]) else { panic!() };
        assert!(why.contains(KUEUE_TOTAL), "{why}");
    }

    #[test]
    fn gpu_pieces_are_dealt_whole_to_the_nodes_named() {
        let members: Vec<Member> = (0..3).map(|i| member(i, 2)).collect();
        let pieces = deal(&at(&[(0, &[0, 1, 2, 3]), (2, &[4, 5])]), &members, false, |_, _| Ok(())).unwrap();
        assert_eq!(
            pieces,
            [NodePlacement::new(0, [0, 1]), NodePlacement::new(0, [2, 3]), NodePlacement::new(2, [4, 5])]
        );
        assert_eq!(placement_of(&pieces), at(&[(0, &[0, 1, 2, 3]), (2, &[4, 5])]));
        let why = deal(&at(&[(0, &[0, 1, 2])]), &members, false, |_, _| Ok(())).unwrap_err();
        assert!(why.contains("not a whole number"), "{why}");
        let why = deal(&at(&[(0, &[0, 1])]), &members, false, |_, _| Ok(())).unwrap_err();
        assert!(why.contains("carries 1 of the group's 3"), "{why}");
        let why = deal(&at(&[(0, &[0, 1, 2, 3]), (1, &[0, 1])]), &members, false, |n, _| {
            if n == 1 { Err("node 1 is NotReady".into()) } else { Ok(()) }
        })
        .unwrap_err();
        assert!(why.contains("NotReady"), "{why}");
    }

    #[test]
    fn an_elastic_group_is_dealt_into_as_many_equal_pods_as_the_placement_holds() {
        let members: Vec<Member> = (0..2).map(|i| member(i, 2)).collect();
        let deal_all = |placement| deal(&placement, &members, true, |_, _| Ok(())).unwrap();
        // Whole pods of 2 GPUs where every node gets a multiple of 2: three pods.
        let pieces = deal_all(at(&[(0, &[0, 1, 2, 3]), (1, &[6, 7])]));
        assert_eq!(
            pieces,
            [NodePlacement::new(0, [0, 1]), NodePlacement::new(0, [2, 3]), NodePlacement::new(1, [6, 7])]
        );
        // A node with 1 GPU: pods of 1 GPU each, as many as GPUs.
        let pieces = deal_all(at(&[(0, &[0, 1]), (1, &[5])]));
        assert_eq!(pieces, [NodePlacement::new(0, [0]), NodePlacement::new(0, [1]), NodePlacement::new(1, [5])]);
        // Fewer pods: one of 2 GPUs.
        assert_eq!(deal_all(at(&[(1, &[2, 3])])), [NodePlacement::new(1, [2, 3])]);
        // 6 and 9 GPUs: pods of 3, the largest equal piece.
        let nine: Vec<u32> = (0..9).collect();
        assert_eq!(deal_all(at(&[(0, &[0, 1, 2, 3, 4, 5]), (1, &nine)])).len(), 5);
        let why = deal(&at(&[(0, &[0, 1]), (1, &[])]), &members, true, |_, _| Ok(())).unwrap_err();
        assert!(why.contains("node 1 gets no GPU"), "{why}");
        let rigid = deal(&at(&[(0, &[0, 1, 2, 3]), (1, &[6, 7])]), &members, false, |_, _| Ok(())).unwrap_err();
        assert!(rigid.contains("more GPUs than the group's 2 pods"), "{rigid}");
        // Each new piece's room is asked for too.
        let mut asked = Vec::new();
        deal(&at(&[(0, &[0, 1, 2, 3, 4, 5])]), &members, true, |n, i| {
            asked.push((n.0, i));
            Ok(())
        })
        .unwrap();
        assert_eq!(asked, [(0, 0), (0, 1), (0, 2)]);
    }

    #[test]
    fn a_group_resized_by_the_host_is_sized_by_its_pods() {
        let p = |size: &str| {
            pod(
                serde_json::json!({"metadata": {"name": "a", "annotations": {crate::pod::GROUP_SIZE: size, KUEUE_TOTAL: "2"}}}),
            )
        };
        assert_eq!(resized(&[&p("3"), &p("3")]), Some(3));
        assert_eq!(resized(&[&p("x")]), None, "garbage is no size");
        let groups = PodGroups { watched: Vec::new(), namespace: "default".into() };
        let key = GroupKey { way: Way::Kueue, name: "k".into() };
        assert_eq!(groups.size(&key, &[&p("3")]), Size::Gang(3), "the host's size wins over the declared one");
        assert_eq!(groups.size(&key, &[&p("0")]), Size::Gang(2), "a size of 0 is none");
    }

    #[test]
    fn cpu_pieces_fill_the_nodes_named_in_order_as_their_room_allows() {
        let members: Vec<Member> = (0..3).map(|i| member(i, 0)).collect();
        let mut left = BTreeMap::from([(4, 2), (7, 5)]);
        let room = |node: NodeId, _| {
            let l = left.get_mut(&node.0).unwrap();
            if *l == 0 {
                return Err(format!("node {node} is full"));
            }
            *l -= 1;
            Ok(())
        };
        let pieces = deal(&at(&[(4, &[]), (7, &[])]), &members, false, room).unwrap();
        assert_eq!(pieces.iter().map(|p| p.node).collect::<Vec<_>>(), [4, 4, 7]);
        let why = deal(&at(&[(4, &[])]), &members, false, |_, i| if i < 2 { Ok(()) } else { Err("full".into()) })
            .unwrap_err();
        assert!(why.contains("take 2 of the group's 3") && why.contains("full"), "{why}");
    }
}
