//! The pod groups as one watch on the run's namespace sees them: per group, how many of its
//! pods are bound at each event, when it was first bound whole and on how many nodes, and how
//! long it was ever partly bound. A group's size is its pod count as declared until the host
//! re-creates it at another (an elastic group placed or resized at another GPU total): then the
//! `wasmsched.group-size` its pods carry, as the host reads it (`kubernetes/src/group.rs`).
//! Pure (events in, a summary out), tested here.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::super::manifests::NODE_PREFIX;
use crate::stats::{self, Latency};

/// The pod annotation with the group's pod count the host gave it (`kubernetes/src/pod.rs`).
pub const GROUP_SIZE_ANNOTATION: &str = "wasmsched.group-size";

/// A pod as the watch last saw it.
#[derive(Clone, Debug)]
struct PodSeen {
    group: String,
    node: Option<String>,
    /// Its [`GROUP_SIZE_ANNOTATION`].
    size: Option<u32>,
}

/// A group as the watch saw it.
#[derive(Clone, Debug, Default)]
struct GroupSeen {
    /// Its pods as declared (a gang's `minCount`).
    declared: u32,
    /// Its pods now: the largest [`GROUP_SIZE_ANNOTATION`] of its pods, else `declared`.
    size: u32,
    /// Whether it was ever seen at a size other than `declared`.
    resized: bool,
    /// Its pods bound now.
    bound: u32,
    /// When its last pod's create was answered.
    created: Option<Instant>,
    /// Since when it has been partly bound, while it is.
    partly_since: Option<Instant>,
    /// Whether it ever was partly bound at an event.
    ever_partly: bool,
    /// Its longest spell partly bound that ended.
    longest_partly: Duration,
    /// When it was first seen bound whole, and on how many nodes.
    whole: Option<(Instant, usize)>,
}

/// The run's groups, fed the watch's events.
#[derive(Debug, Default)]
pub struct Groups {
    groups: HashMap<String, GroupSeen>,
    pods: HashMap<String, PodSeen>,
    /// Pods seen during a fresh list (after the watch broke); the rest are gone at its end.
    relisting: Option<HashSet<String>>,
    /// Pods seen bound to a node that is not one of the harness's.
    off_scale: HashSet<String>,
}

/// What the watch saw of the groups, at the end of the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GroupSummary {
    /// Groups whose every pod was created.
    pub created: u64,
    /// Groups seen with every pod bound, at some event.
    pub bound_whole: u64,
    /// Of those, groups whose pods were on more than one node when first whole.
    pub whole_over_several_nodes: u64,
    /// Groups bound whole at the end.
    pub whole_at_end: u64,
    /// Groups seen partly bound (some pods bound, not all) at some event: the watch sees a
    /// group's binds one event at a time, so a group bound whole passes through this briefly.
    pub partly_seen: u64,
    /// Groups partly bound at the end (0 when every group was bound whole or not at all).
    pub partly_at_end: u64,
    /// Groups the host re-created at another pod count (their pods' `wasmsched.group-size`).
    pub resized: u64,
    /// The longest any group stayed partly bound, milliseconds (spells still open at the end
    /// count up to it).
    pub longest_partly_ms: Option<f64>,
    /// Per group bound whole: its last pod created (the create answered) to bound whole.
    pub latency: Option<Latency>,
    /// Pods bound at the end.
    pub pods_bound: u64,
    /// Pods bound to a node that is not one of the harness's, despite their node selector.
    pub pods_off_scale_nodes: u64,
}

impl Groups {
    /// The groups of the run with their sizes.
    pub fn new<'a>(sizes: impl IntoIterator<Item = (&'a str, u32)>) -> Groups {
        let groups = sizes
            .into_iter()
            .map(|(name, size)| (name.to_owned(), GroupSeen { declared: size, size, ..Default::default() }));
        Groups { groups: groups.collect(), ..Default::default() }
    }

    /// Every pod of `group` was created; the last create was answered `at`.
    pub fn created(&mut self, group: &str, at: Instant) {
        if let Some(g) = self.groups.get_mut(group) {
            g.created = Some(at);
        }
    }

    /// The watch saw pod `name` of `group` (None: of no group of the run), bound to `node` or
    /// not, carrying the group's `size` or not, `at`.
    pub fn seen(&mut self, name: &str, group: Option<&str>, node: Option<&str>, size: Option<u32>, at: Instant) {
        if let Some(seen) = &mut self.relisting {
            seen.insert(name.to_owned());
        }
        if let Some(node) = node
            && !node.starts_with(NODE_PREFIX)
        {
            self.off_scale.insert(name.to_owned());
        }
        let Some(group) = group.filter(|g| self.groups.contains_key(*g)) else { return };
        let pod = PodSeen { group: group.to_owned(), node: node.map(str::to_owned), size };
        let was = self.pods.insert(name.to_owned(), pod);
        let was_bound = was.as_ref().is_some_and(|p| p.node.is_some());
        if was_bound != node.is_some() {
            let g = self.groups.get_mut(group).expect("checked above");
            if node.is_some() { g.bound += 1 } else { g.bound = g.bound.saturating_sub(1) }
        }
        if was_bound != node.is_some() || was.map_or(size.is_some(), |p| p.size != size) {
            self.settle(group, at);
        }
    }

    /// Pod `name` is gone (deleted), `at`.
    pub fn gone(&mut self, name: &str, at: Instant) {
        self.off_scale.remove(name);
        let Some(p) = self.pods.remove(name) else { return };
        if p.node.is_some()
            && let Some(g) = self.groups.get_mut(&p.group)
        {
            g.bound = g.bound.saturating_sub(1);
        }
        if p.node.is_some() || p.size.is_some() {
            self.settle(&p.group, at);
        }
    }

    /// The watch lists again (it broke): pods not seen by [`Groups::relisted`] are gone.
    pub fn relist(&mut self) {
        self.relisting = Some(HashSet::new());
    }

    /// The fresh list is done, `at`.
    pub fn relisted(&mut self, at: Instant) {
        let Some(seen) = self.relisting.take() else { return };
        let known = self.pods.keys().chain(&self.off_scale);
        let gone: BTreeSet<String> = known.filter(|p| !seen.contains(*p)).cloned().collect();
        for name in gone {
            self.gone(&name, at);
        }
    }

    /// A group's state after its bound count or size changed `at`.
    fn settle(&mut self, group: &str, at: Instant) {
        let pods = || self.pods.values().filter(|p| p.group == group);
        let Some(g) = self.groups.get(group) else { return };
        let size = pods().filter_map(|p| p.size).max().unwrap_or(g.declared);
        let spread = (g.bound >= size && g.whole.is_none())
            .then(|| pods().filter_map(|p| p.node.as_deref()).collect::<BTreeSet<_>>().len());
        let g = self.groups.get_mut(group).expect("found above");
        g.size = size;
        g.resized |= size != g.declared;
        let partly = g.bound > 0 && g.bound < g.size;
        match (partly, g.partly_since) {
            (true, None) => {
                g.partly_since = Some(at);
                g.ever_partly = true;
            }
            (false, Some(since)) => {
                g.longest_partly = g.longest_partly.max(at.saturating_duration_since(since));
                g.partly_since = None;
            }
            _ => {}
        }
        if let Some(spread) = spread {
            g.whole = Some((at, spread));
        }
    }

    /// What was seen, as of `end`.
    pub fn summary(&self, end: Instant) -> GroupSummary {
        let groups = || self.groups.values();
        let longest = groups()
            .filter(|g| g.ever_partly)
            .map(|g| g.longest_partly.max(g.partly_since.map_or(Duration::ZERO, |s| end.saturating_duration_since(s))))
            .max();
        let latencies =
            groups().filter_map(|g| Some(g.whole?.0.saturating_duration_since(g.created?))).collect::<Vec<_>>();
        let count = |f: &dyn Fn(&GroupSeen) -> bool| groups().filter(|g| f(g)).count() as u64;
        GroupSummary {
            created: count(&|g| g.created.is_some()),
            bound_whole: count(&|g| g.whole.is_some()),
            whole_over_several_nodes: count(&|g| g.whole.is_some_and(|(_, nodes)| nodes > 1)),
            whole_at_end: count(&|g| g.size > 0 && g.bound >= g.size),
            partly_seen: count(&|g| g.ever_partly),
            partly_at_end: count(&|g| g.bound > 0 && g.bound < g.size),
            resized: count(&|g| g.resized),
            longest_partly_ms: longest.map(|d| d.as_secs_f64() * 1000.0),
            latency: stats::latency(latencies),
            pods_bound: self.pods.values().filter(|p| p.node.is_some()).count() as u64,
            pods_off_scale_nodes: self.off_scale.len() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    #[test]
    fn a_group_bound_pod_by_pod_is_whole_and_its_partly_spell_is_timed() {
        let t0 = Instant::now();
        let mut g = Groups::new([("a", 2), ("b", 1)]);
        for p in ["a-0", "a-1"] {
            g.seen(p, Some("a"), None, None, t0);
        }
        g.created("a", ms(t0, 10));
        g.seen("a-0", Some("a"), Some("scale-node-t4-0"), None, ms(t0, 100));
        g.seen("a-1", Some("a"), Some("scale-node-t4-1"), None, ms(t0, 130));
        let s = g.summary(ms(t0, 1000));
        assert_eq!((s.created, s.bound_whole, s.whole_over_several_nodes, s.whole_at_end), (1, 1, 1, 1));
        assert_eq!((s.partly_seen, s.partly_at_end, s.longest_partly_ms), (1, 0, Some(30.0)));
        assert_eq!(s.latency.unwrap().max_ms, 120.0);
        assert_eq!((s.pods_bound, s.pods_off_scale_nodes), (2, 0));
    }

    #[test]
    fn a_group_left_partly_bound_counts_at_the_end_with_its_open_spell() {
        let t0 = Instant::now();
        let mut g = Groups::new([("a", 3)]);
        g.seen("a-0", Some("a"), Some("scale-node-rtx-0"), None, t0);
        g.seen("a-1", Some("a"), Some("scale-node-rtx-0"), None, t0);
        g.seen("a-2", Some("a"), None, None, t0);
        let s = g.summary(ms(t0, 5000));
        assert_eq!((s.bound_whole, s.partly_seen, s.partly_at_end), (0, 1, 1));
        assert_eq!(s.longest_partly_ms, Some(5000.0));
    }

    #[test]
    fn a_group_on_one_node_and_a_group_taken_back_are_told_apart() {
        let t0 = Instant::now();
        let mut g = Groups::new([("one", 2), ("back", 2)]);
        g.seen("one-0", Some("one"), Some("scale-node-a100-0"), None, t0);
        g.seen("one-1", Some("one"), Some("scale-node-a100-0"), None, t0);
        g.seen("back-0", Some("back"), Some("scale-node-t4-0"), None, t0);
        // Its other bind failed: the host deletes the bound pod and makes it anew, unbound.
        g.gone("back-0", ms(t0, 40));
        g.seen("back-0-copy", Some("back"), None, None, ms(t0, 41));
        let s = g.summary(ms(t0, 100));
        assert_eq!((s.bound_whole, s.whole_over_several_nodes), (1, 0));
        assert_eq!((s.partly_seen, s.partly_at_end, s.longest_partly_ms), (2, 0, Some(40.0)));
    }

    #[test]
    fn a_group_re_created_at_another_pod_count_is_whole_at_its_new_size() {
        let t0 = Instant::now();
        let mut g = Groups::new([("a", 4), ("b", 2)]);
        for p in ["a-0", "a-1", "a-2", "a-3"] {
            g.seen(p, Some("a"), Some("scale-node-t4-0"), None, t0);
        }
        // Resized to two pods: the copies made unbound, the originals deleted, the copies bound.
        g.seen("a-x", Some("a"), None, Some(2), ms(t0, 10));
        g.seen("a-y", Some("a"), None, Some(2), ms(t0, 10));
        for (i, p) in ["a-0", "a-1", "a-2", "a-3"].into_iter().enumerate() {
            g.gone(p, ms(t0, 20 + i as u64));
        }
        g.seen("a-x", Some("a"), Some("scale-node-a100-0"), Some(2), ms(t0, 30));
        g.seen("a-y", Some("a"), Some("scale-node-a100-0"), Some(2), ms(t0, 31));
        // Preempted and bound again as it was: its copies carry its own size.
        g.seen("b-x", Some("b"), Some("scale-node-rtx-0"), Some(2), ms(t0, 40));
        g.seen("b-y", Some("b"), Some("scale-node-rtx-0"), Some(2), ms(t0, 40));
        let s = g.summary(ms(t0, 100));
        assert_eq!((s.whole_at_end, s.partly_at_end, s.resized, s.pods_bound), (2, 0, 1, 4));
        assert_eq!(s.longest_partly_ms, Some(1.0), "only between binds");
    }

    #[test]
    fn a_fresh_list_forgets_pods_deleted_while_the_watch_was_broken() {
        let t0 = Instant::now();
        let mut g = Groups::new([("a", 2)]);
        g.seen("a-0", Some("a"), Some("scale-node-t4-0"), None, t0);
        g.seen("x", None, Some("vm"), None, t0);
        g.relist();
        g.seen("a-1", Some("a"), None, None, ms(t0, 50));
        g.relisted(ms(t0, 60));
        let s = g.summary(ms(t0, 100));
        assert_eq!((s.pods_bound, s.partly_at_end, s.longest_partly_ms), (0, 0, Some(60.0)));
        assert_eq!(s.pods_off_scale_nodes, 0, "x is gone");
    }

    #[test]
    fn pods_of_other_groups_and_off_the_scale_nodes_are_told() {
        let t0 = Instant::now();
        let mut g = Groups::new([("a", 1)]);
        g.seen("stray", Some("not-ours"), Some("vm"), None, t0);
        g.seen("a-0", Some("a"), Some("vm2"), None, t0);
        let s = g.summary(t0);
        assert_eq!((s.bound_whole, s.pods_bound, s.pods_off_scale_nodes), (1, 1, 2));
    }
}
