//! The cluster's nodes as the host knows them: a handle each, given as they appear (in name
//! order within one observation), with their capacity, what they take and whether they are
//! Ready. Only the nodes whose resource version moved are read again.

use std::collections::HashMap;
use std::sync::Arc;

use wasmsched_core::bindings::wit;
use wasmsched_core::world::{NodeId, World};

use super::dra::NodeGpus;
use super::pod::{self, NodeFacts};
use super::{Kubernetes, NodeEntry};

/// Node `facts` as the world shows it: its topology domains are the values of its labels
/// `topology` names, coarsest first, up to the first it lacks.
fn wit_node(facts: &NodeFacts, topology: &[String]) -> wit::Node {
    wit::Node {
        name: facts.name.clone(),
        cpu_millicores: facts.cpu,
        memory_bytes: facts.memory,
        gpu_memory_bytes: vec![facts.gpu_memory_bytes; facts.gpus as usize],
        gpu_type: facts.gpu_type.clone(),
        labels: facts.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        domains: topology.iter().map_while(|key| facts.labels.get(key).cloned()).collect(),
    }
}

/// Node `facts` with the GPUs DRA gives it: counted beside its `nvidia.com/gpu`, their type
/// and memory where its labels name none.
fn with_dra(mut facts: NodeFacts, gpus: Option<&NodeGpus>) -> NodeFacts {
    let Some(g) = gpus else { return facts };
    facts.gpus = facts.gpus.saturating_add(g.count);
    if facts.gpu_type.is_empty() {
        facts.gpu_type = g.gpu_type.clone();
    }
    if facts.gpu_memory_bytes == 0 {
        facts.gpu_memory_bytes = g.memory_bytes;
    }
    facts
}

impl NodeEntry {
    /// A node first seen with `facts`; it counts as Ready until its facts are taken.
    fn new(facts: &NodeFacts) -> NodeEntry {
        NodeEntry {
            name: facts.name.clone(),
            cpu_millicores: facts.cpu,
            memory_bytes: facts.memory,
            gpus: facts.gpus,
            pods: facts.pods,
            labels: Arc::new(facts.labels.clone()),
            ready: true,
            stats: Default::default(),
            gpu: Default::default(),
            gpu_seen: None,
            version: None,
            dra: None,
            held_by_others: 0,
        }
    }

    /// The places among the node's DRA GPUs ([`super::dra::Dra::gpus_by_node`]) of its GPUs
    /// `gpus` as a policy numbers them: its device-plugin GPUs come first, so those are left
    /// out and the rest counted from the first DRA one.
    pub(super) fn dra_places(&self, gpus: &[u32]) -> Vec<u32> {
        let plugin = self.gpus.saturating_sub(self.dra.as_ref().map_or(0, |d| d.count));
        gpus.iter().filter(|&&g| g >= plugin).map(|&g| g - plugin).collect()
    }

    /// Take the node's `facts` as read at resource `version`; whether it is Ready now, when
    /// that changed.
    fn take(&mut self, facts: NodeFacts, version: Option<String>) -> Option<bool> {
        (self.cpu_millicores, self.memory_bytes, self.gpus, self.pods) =
            (facts.cpu, facts.memory, facts.gpus, facts.pods);
        self.version = version;
        if *self.labels != facts.labels {
            self.labels = Arc::new(facts.labels);
        }
        let changed = self.ready != facts.ready;
        self.ready = facts.ready;
        changed.then_some(facts.ready)
    }
}

impl Kubernetes {
    /// Nodes in name order get handles as they appear; capacity and readiness follow them.
    pub(super) fn observe_nodes(&mut self, world: &mut World) {
        // Only the nodes new or changed since the last observation, their own objects or
        // their DRA devices.
        let store = self.node_store.state();
        // A device that a claim holds for another scheduler's running pod is not the host's to give.
        let bound = &self.bound;
        let theirs = |namespace: &str, name: &str, uid: &str| {
            let at = kube::runtime::reflector::ObjectRef::new(name).within(namespace);
            bound.iter().any(|b| b.get(&at).is_some_and(|p| p.metadata.uid.as_deref() == Some(uid)))
        };
        let dra = self.dra.gpus_by_node(&theirs);
        // Nor is a device-plugin GPU that another scheduler's pod holds.
        let mut others: HashMap<String, u32> = HashMap::new();
        for p in self.others_bound() {
            if let (Some(node), gpus @ 1..) = (pod::node_of(&p), pod::gpus_asked(&p)) {
                let held = others.entry(node.to_string()).or_default();
                *held = held.saturating_add(gpus);
            }
        }
        let mut nodes: Vec<_> = store
            .iter()
            .filter(|n| {
                let name = n.metadata.name.as_deref().unwrap_or_default();
                let seen = self.node_index(name).map(|i| &self.nodes[i]);
                seen.is_none_or(|e| {
                    e.version.as_deref() != n.metadata.resource_version.as_deref()
                        || dra.get(name) != e.dra.as_ref()
                        || others.get(name).copied().unwrap_or(0) != e.held_by_others
                })
            })
            .map(|n| {
                let name = n.metadata.name.as_deref().unwrap_or_default();
                let held = others.get(name).copied().unwrap_or(0);
                let mut facts = pod::node_facts(n);
                facts.gpus = facts.gpus.saturating_sub(held);
                (with_dra(facts, dra.get(name)), (dra.get(name).cloned(), held), n.metadata.resource_version.clone())
            })
            .collect();
        nodes.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        for (facts, (gpus, held), version) in nodes {
            let mut node = wit_node(&facts, &self.config.topology);
            let i = match self.node_index(&facts.name) {
                Some(i) => i,
                None => {
                    world.add_node(node.clone());
                    self.node_names.insert(facts.name.clone(), self.nodes.len());
                    self.nodes.push(NodeEntry::new(&facts));
                    self.nodes.len() - 1
                }
            };
            // Only nodes whose resource version moved are here: their description is sent
            // again when any of it changed (the world ignores an equal one). What their labels
            // do not say of their GPUs, their exporter may have.
            super::gpus::fill(&mut node, self.nodes[i].gpu_seen.as_ref());
            world.set_node(NodeId(i as u32), node);
            world.set_node_down(NodeId(i as u32), !facts.ready);
            let name = facts.name.clone();
            (self.nodes[i].dra, self.nodes[i].held_by_others) = (gpus, held);
            let count = facts.gpus;
            match self.nodes[i].take(facts, version) {
                Some(true) => {
                    self.logged.clear(&format!("notready:{name}"));
                    tracing::info!(node = %name, "node is Ready again");
                }
                Some(false) => self.logged.once(format!("notready:{name}"), || {
                    format!("node {name} is NotReady or cordoned; its pods keep their last state and nothing is placed there")
                }),
                None => {}
            }
            self.seat_within(NodeId(i as u32), count, world);
        }
    }

    /// Jobs booked on GPUs of `node` past its `count` (fewer now: another scheduler's pod took
    /// some) are booked on free ones below it, where there are any; the device plugin, not
    /// the host, chose the real ones.
    fn seat_within(&self, node: NodeId, count: u32, world: &mut World) {
        let held = super::gpus::held_on(node, world);
        if held.iter().any(|(_, gpus)| gpus.iter().any(|&g| g >= count)) {
            super::gpus::rebook(node, super::gpus::reseat(count, &held, &HashMap::new()), world);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn facts(name: &str, ready: bool) -> NodeFacts {
        NodeFacts {
            name: name.into(),
            cpu: 4000,
            memory: 8 << 30,
            gpus: 2,
            pods: 110,
            ready,
            gpu_type: "t4".into(),
            gpu_memory_bytes: 16 << 30,
            labels: BTreeMap::from([("pool".to_string(), "a".to_string())]),
        }
    }

    #[test]
    fn a_node_shows_its_gpus_with_their_type_and_memory() {
        let node = wit_node(&facts("vm", true), &[]);
        assert_eq!((node.cpu_millicores, node.gpu_type.as_str()), (4000, "t4"));
        assert_eq!(node.gpu_memory_bytes, [16 << 30, 16 << 30]);
    }

    #[test]
    fn a_node_read_again_says_when_its_readiness_changed_and_keeps_equal_labels() {
        let mut entry = NodeEntry::new(&facts("vm", true));
        let labels = entry.labels.clone();
        assert_eq!(entry.take(facts("vm", true), Some("1".into())), None, "a new node counts as Ready");
        assert!(Arc::ptr_eq(&labels, &entry.labels), "equal labels are not copied again");
        assert_eq!(entry.take(facts("vm", false), Some("2".into())), Some(false));
        assert_eq!(entry.take(NodeFacts { cpu: 2000, ..facts("vm", false) }, Some("3".into())), None);
        assert_eq!((entry.cpu_millicores, entry.version.as_deref()), (2000, Some("3")));
        assert_eq!(entry.take(facts("vm", true), None), Some(true));
    }

    #[test]
    fn a_policys_gpu_index_is_a_dra_place_after_the_device_plugins_gpus() {
        // Two device-plugin GPUs (0, 1) and three through DRA (2, 3, 4 as the policy numbers them).
        let mut entry = NodeEntry::new(&NodeFacts { gpus: 5, ..facts("vm", true) });
        entry.dra = Some(NodeGpus { count: 3, ..NodeGpus::default() });
        assert_eq!(entry.dra_places(&[1, 2, 4]), [0, 2], "the device plugin's GPU 1 is no DRA place");
        entry.dra = None;
        assert_eq!(entry.dra_places(&[0, 1]), Vec::<u32>::new(), "no DRA GPUs: none");
        let dra_only = NodeEntry { gpus: 3, dra: Some(NodeGpus { count: 3, ..NodeGpus::default() }), ..entry };
        assert_eq!(dra_only.dra_places(&[0, 2]), [0, 2]);
    }
}
