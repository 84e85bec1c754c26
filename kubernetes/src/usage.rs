//! The managed pods' CPU and memory use, from their nodes' kubelet summaries: each node asked
//! through the apiserver's proxy (or the kubelet itself, once the proxy is known not to work),
//! at most [`STATS_IN_FLIGHT`] at once, every [`STATS_EVERY`](super::STATS_EVERY) and sooner while a pod there is not
//! measured yet; a tick never waits for a slow kubelet longer than [`STATS_WAIT`].

use std::collections::HashMap;
use std::sync::Arc;

use wasmsched_core::world::{NodeId, World};

use super::{Kubernetes, STATS_IN_FLIGHT, STATS_WAIT, pod, poll, stats, stats_backoff};

/// A pod's CPU use (millicores) from its summary's cumulative sample (core-ns at Unix ns) and
/// the runtime's own rate (`nano_cores`), against the last sample taken (`last`, which it
/// moves on); None when this summary measures nothing new. A container's first sample has a
/// rate of zero (the runtime has nothing to take it against): not a measurement; the next
/// sample's difference is.
fn cpu_use(sample: Option<(u64, u64)>, nano_cores: Option<u64>, last: &mut Option<(u64, u64)>) -> Option<u64> {
    match (sample, *last) {
        (Some(now), Some(then)) if now.1 > then.1 => {
            *last = Some(now);
            stats::millicores_between(then, now)
        }
        (Some(now), None) => {
            *last = Some(now);
            nano_cores.filter(|&n| n > 0).map(|nano| nano / 1_000_000)
        }
        _ => None,
    }
}

impl Kubernetes {
    /// The kubelet summaries of the nodes that run managed pods, each read every
    /// [`STATS_EVERY`](super::STATS_EVERY) (sooner while a pod there is not measured yet), at most
    /// [`STATS_IN_FLIGHT`] asked at once, oldest due first; a node whose summary fails is asked
    /// again later and later ([`stats_backoff`]). The same for the GPU exporters of the nodes
    /// that run managed pods, with `[backend.gpu-telemetry]` ([`super::gpus`]). The asks run on
    /// the runtime and the tick waits for both kinds briefly, once ([`STATS_WAIT`]): an answer
    /// that takes longer (a hung kubelet) is read at a later tick and never holds the loop up.
    pub(super) fn measure(&mut self, world: &mut World) {
        let unmeasured = self.ask_summaries(world);
        self.ask_exporters(world);
        let reads =
            self.nodes.iter_mut().enumerate().flat_map(|(i, n)| [((i, false), &mut n.stats), ((i, true), &mut n.gpu)]);
        let answers = self.rt.block_on(poll::answers(reads.collect(), STATS_WAIT));
        let (mut summaries, mut exporters) = (Vec::new(), Vec::new());
        for ((i, gpus), answer) in answers {
            if gpus {
                if let Err(why) = self.read_exporter(i, answer, world) {
                    exporters.push((i, why));
                }
            } else if let Err(why) = self.read_summary(i, answer, unmeasured[i], world) {
                summaries.push((i, why));
            }
        }
        let failed: Vec<(&str, String)> =
            summaries.into_iter().map(|(i, why)| (self.nodes[i].name.as_str(), why)).collect();
        poll::log_causes(&mut self.logged, "stats-why", &failed, |nodes, more, why| {
            tracing::warn!(
                nodes,
                more,
                why,
                "cannot read these nodes' kubelet summaries; their pods' use stays as last read, each is asked again later and later (up to 5 min), and other nodes failing for the same reason are not logged again"
            );
        });
        self.log_exporter_failures(exporters);
    }

    /// Ask for the summaries due (see [`Kubernetes::measure`]); per node, its running pods not
    /// measured yet.
    fn ask_summaries(&mut self, world: &World) -> Vec<u32> {
        // Per node: whether it runs managed pods, and how many of them have no CPU figure yet.
        let mut wanted = vec![false; self.nodes.len()];
        let mut unmeasured = vec![0u32; self.nodes.len()];
        for m in self.jobs.values() {
            let Some(s) = world.state(m.job.handle).filter(|s| s.is_running()) else { continue };
            // A group's pods are on nodes of their own.
            let nodes: Vec<(NodeId, bool)> = match &m.gang {
                Some(g) => g.members.iter().filter_map(|p| Some((p.node?, p.last_cpu.is_some()))).collect(),
                None => vec![(s.node, m.cpu_measured)],
            };
            for (node, measured) in nodes {
                if let Some(w) = wanted.get_mut(node.index()) {
                    *w = true;
                    unmeasured[node.index()] += u32::from(!measured);
                }
            }
        }
        for i in poll::due(self.nodes.iter().map(|n| &n.stats), &wanted, STATS_IN_FLIGHT) {
            let ask = self.ask_summary(i);
            self.nodes[i].stats.asking = Some(self.rt.spawn(ask));
        }
        unmeasured
    }

    /// The request for node `i`'s kubelet summary: through the apiserver's node proxy, else
    /// (or once that is known not to work) from the kubelet itself.
    fn ask_summary(&mut self, i: usize) -> impl Future<Output = poll::Answer> + use<> {
        let name = self.nodes[i].name.clone();
        let proxy = (self.client.clone(), format!("/api/v1/nodes/{name}/proxy/stats/summary"));
        let direct = self.kubelet_client(&name).map(|c| (c, "/stats/summary".to_string()));
        poll::get(self.nodes[i].stats.route, proxy, direct, self.config.timeout)
    }

    /// Node `i`'s kubelet summary into its pods' use; why there is none, when it newly fails
    /// (a node that keeps failing is reported once, when it starts to).
    /// `unmeasured`: node `i`'s running pods with no CPU figure before this summary.
    fn read_summary(
        &mut self,
        i: usize,
        answer: poll::Answer,
        mut unmeasured: u32,
        world: &mut World,
    ) -> Result<(), String> {
        let parsed = answer.and_then(|(text, route)| Ok((stats::parse(&text).map_err(|e| format!("{e}"))?, route)));
        let (used, route) = match parsed {
            Ok(answer) => answer,
            Err(why) => return if self.nodes[i].stats.failed(stats_backoff) { Err(why) } else { Ok(()) },
        };
        let node_here = NodeId(i as u32);
        // A group's pods, by uid: its entry and the pod's piece.
        let members: HashMap<Arc<str>, (Arc<str>, usize)> = self
            .jobs
            .iter()
            .filter_map(|(entry, m)| Some((entry, m.gang.as_ref()?)))
            .flat_map(|(entry, g)| g.members.iter().enumerate().map(move |(i, p)| (p.uid.clone(), (entry.clone(), i))))
            .collect();
        for (uid, u) in &used {
            if let Some((entry, i)) = members.get(uid.as_str()) {
                if self.read_group_pod(entry, *i, node_here, u, world) {
                    unmeasured = unmeasured.saturating_sub(1);
                }
                continue;
            }
            let Some(m) = self.jobs.get_mut(uid.as_str()) else { continue };
            let Some(state) = world.state_mut(m.job.handle) else { continue };
            if state.node.index() != i || !state.is_running() {
                continue;
            }
            if let Some(mc) = cpu_use(u.cpu, u.nano_cores, &mut m.last_cpu) {
                state.cpu_used_millicores = mc;
                if !m.cpu_measured {
                    m.cpu_measured = true;
                    unmeasured = unmeasured.saturating_sub(1);
                }
            }
            if let Some(b) = u.memory_bytes {
                state.memory_used_bytes = b;
            }
        }
        // A pod that has started but that the summary does not measure yet (its containers
        // are a few seconds old) is asked about again at the next tick, not a period later: a
        // policy meanwhile sees a job that uses no CPU. Counted, not looked for among every
        // job: this runs for every summary read.
        let node = &mut self.nodes[i];
        node.stats.answered(&node.name, "kubelet summary", route, unmeasured);
        Ok(())
    }

    /// Group `entry`'s pod `i` on node `node` used `u`: its figures, and the group's use as its
    /// pods' together. True when its CPU was measured for the first time.
    fn read_group_pod(
        &mut self,
        entry: &Arc<str>,
        i: usize,
        node: NodeId,
        u: &stats::PodUse,
        world: &mut World,
    ) -> bool {
        let Some(m) = self.jobs.get_mut(entry) else { return false };
        let Some(state) = world.state_mut(m.job.handle).filter(|s| s.is_running()) else { return false };
        let Some(g) = m.gang.as_mut() else { return false };
        let p = &mut g.members[i];
        if p.node != Some(node) {
            return false;
        }
        let first = p.last_cpu.is_none();
        let measured = cpu_use(u.cpu, u.nano_cores, &mut p.last_cpu).map(|mc| p.used.0 = mc).is_some();
        p.used.1 = u.memory_bytes.unwrap_or(p.used.1);
        (state.cpu_used_millicores, state.memory_used_bytes) =
            g.members.iter().fold((0, 0), |(c, b), p| (c + p.used.0, b + p.used.1));
        measured && first
    }

    /// A client to node `name`'s kubelet itself (its InternalIP and kubelet port, the
    /// kubeconfig's credentials), made once.
    fn kubelet_client(&mut self, name: &str) -> Option<kube::Client> {
        if let Some(c) = self.kubelets.get(name) {
            return Some(c.clone());
        }
        let node = self.node_store.state().into_iter().find(|n| n.metadata.name.as_deref() == Some(name))?;
        let (ip, port) = pod::kubelet_address(&node)?;
        let host = if ip.contains(':') { format!("[{ip}]") } else { ip };
        let mut config = self.kube_config.clone();
        config.cluster_url = format!("https://{host}:{port}").parse().ok()?;
        let _entered = self.rt.enter();
        let client = kube::Client::try_from(config).ok()?;
        self.kubelets.insert(name.to_string(), client.clone());
        Some(client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_sample_is_a_measurement_only_when_its_rate_is_not_zero() {
        let mut last = None;
        assert_eq!(cpu_use(Some((5_000_000_000, 1_000)), Some(0), &mut last), None);
        assert_eq!(last, Some((5_000_000_000, 1_000)), "the next sample is taken against it");
        let mut fresh = None;
        assert_eq!(cpu_use(Some((5_000_000_000, 1_000)), Some(250_000_000), &mut fresh), Some(250));
    }

    #[test]
    fn later_samples_give_the_use_between_them_and_a_stale_one_gives_nothing() {
        let mut last = Some((1_000_000_000, 1_000_000_000));
        // Half a core for two seconds.
        assert_eq!(cpu_use(Some((2_000_000_000, 3_000_000_000)), None, &mut last), Some(500));
        assert_eq!(cpu_use(Some((2_000_000_000, 3_000_000_000)), None, &mut last), None, "the same sample");
        assert_eq!(cpu_use(None, Some(9), &mut last), None);
    }
}
