//! The managed pods' CPU and memory use, from their nodes' kubelet summaries: each node asked
//! through the apiserver's proxy (or the kubelet itself, once the proxy is known not to work),
//! at most [`STATS_IN_FLIGHT`] at once, every [`STATS_EVERY`] and sooner while a pod there is not
//! measured yet; a tick never waits for a slow kubelet longer than [`STATS_WAIT`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmsched_core::world::{NodeId, World};

use super::{
    Kubernetes, STATS_EARLY, STATS_EVERY, STATS_IN_FLIGHT, STATS_WAIT, StatsRoute, pod, stats, stats_backoff, within,
};

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

/// How long until a node's summary is asked for again, with `unmeasured` running pods there
/// that it does not measure yet and `early` asks in a row made at once for them before: at once
/// (at most [`STATS_EARLY`] times in a row), else [`STATS_EVERY`]; and the asks in a row now.
fn next_summary(unmeasured: u32, early: u32) -> (Duration, u32) {
    let wait = if unmeasured > 0 && early < STATS_EARLY { Duration::ZERO } else { STATS_EVERY };
    (wait, if unmeasured > 0 { early.saturating_add(1) } else { 0 })
}

impl Kubernetes {
    /// The kubelet summaries of the nodes that run managed pods, each read every
    /// [`STATS_EVERY`] (sooner while a pod there is not measured yet), at most
    /// [`STATS_IN_FLIGHT`] asked at once, oldest due first; a node whose summary fails is asked
    /// again later and later ([`stats_backoff`]). The asks run on the runtime and the tick
    /// waits for them briefly ([`STATS_WAIT`]): an answer that takes longer (a hung kubelet) is
    /// read at a later tick and never holds the loop up.
    pub(super) fn measure(&mut self, world: &mut World) {
        let now = Instant::now();
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
        let asking = self.nodes.iter().filter(|n| n.asking.is_some()).count();
        let mut due: Vec<(Option<Instant>, usize)> = (0..self.nodes.len())
            .filter(|&i| wanted[i] && self.nodes[i].asking.is_none())
            .filter(|&i| self.nodes[i].stats_due.is_none_or(|at| at <= now))
            .map(|i| (self.nodes[i].stats_due, i))
            .collect();
        due.sort_unstable();
        for (_, i) in due.into_iter().take(STATS_IN_FLIGHT.saturating_sub(asking)) {
            let ask = self.ask_summary(i);
            self.nodes[i].asking = Some(self.rt.spawn(ask));
        }
        let mut asking: Vec<_> =
            self.nodes.iter_mut().enumerate().filter_map(|(i, n)| Some((i, n.asking.take()?))).collect();
        let deadline = tokio::time::Instant::now() + STATS_WAIT;
        let answers = self.rt.block_on(async {
            let mut answers = Vec::new();
            for (i, ask) in &mut asking {
                if let Ok(answer) = tokio::time::timeout_at(deadline, &mut *ask).await {
                    answers.push((*i, answer.unwrap_or_else(|e| Err(format!("the request failed: {e}")))));
                }
            }
            answers
        });
        for (i, ask) in asking {
            if !answers.iter().any(|(answered, _)| *answered == i) {
                self.nodes[i].asking = Some(ask);
            }
        }
        let mut failed = Vec::new();
        for (i, answer) in answers {
            if let Err(why) = self.read_summary(i, answer, unmeasured[i], world) {
                failed.push((i, why));
            }
        }
        // One line per cause: a thousand nodes failing alike (no kubelet behind them) are one
        // line, not one a tick.
        let mut causes: HashMap<&str, Vec<&str>> = HashMap::new();
        for (i, why) in &failed {
            causes.entry(why.as_str()).or_default().push(self.nodes[*i].name.as_str());
        }
        for (why, names) in causes {
            if self.logged.first(format!("stats-why:{why}")) {
                let shown = names[..names.len().min(5)].join(", ");
                let more = names.len().saturating_sub(5);
                tracing::warn!(
                    nodes = %shown,
                    more,
                    why,
                    "cannot read these nodes' kubelet summaries; their pods' use stays as last read, each is asked again later and later (up to 5 min), and other nodes failing for the same reason are not logged again"
                );
            }
        }
    }

    /// The request for node `i`'s kubelet summary: through the apiserver's node proxy, else
    /// (or once that is known not to work) from the kubelet itself.
    fn ask_summary(&mut self, i: usize) -> impl Future<Output = Result<(String, StatsRoute), String>> + use<> {
        let (name, route, limit) = (self.nodes[i].name.clone(), self.nodes[i].stats, self.config.timeout);
        let proxy = self.client.clone();
        let direct = self.kubelet_client(&name);
        async move {
            let get = |client: kube::Client, path: String| async move {
                let request = http::Request::get(path).body(Vec::new()).map_err(kube::Error::HttpError)?;
                within(limit, client.request_text(request)).await
            };
            let proxied = format!("/api/v1/nodes/{name}/proxy/stats/summary");
            let answer = match route {
                Some(StatsRoute::Direct) => Err(None),
                _ => get(proxy, proxied).await.map_err(Some),
            };
            match (answer, direct) {
                (Ok(text), _) => Ok((text, StatsRoute::Proxy)),
                (Err(proxy_error), Some(direct)) => match get(direct, "/stats/summary".into()).await {
                    Ok(text) => Ok((text, StatsRoute::Direct)),
                    Err(e) => Err(format!(
                        "{}the kubelet itself: {}",
                        proxy_error.map_or(String::new(), |p| format!("through the apiserver: {}; ", said(&p))),
                        said(&e)
                    )),
                },
                (Err(e), None) => Err(e.map_or_else(String::new, |e| said(&e))),
            }
        }
    }

    /// Node `i`'s kubelet summary into its pods' use; why there is none, when it newly fails
    /// (a node that keeps failing is reported once, when it starts to).
    /// `unmeasured`: node `i`'s running pods with no CPU figure before this summary.
    fn read_summary(
        &mut self,
        i: usize,
        answer: Result<(String, StatsRoute), String>,
        mut unmeasured: u32,
        world: &mut World,
    ) -> Result<(), String> {
        let node = &mut self.nodes[i];
        let parsed = answer.and_then(|(text, route)| Ok((stats::parse(&text).map_err(|e| format!("{e}"))?, route)));
        let (used, route) = match parsed {
            Ok(answer) => answer,
            Err(why) => {
                node.stats_failures += 1;
                node.stats_due = Some(Instant::now() + stats_backoff(node.stats_failures));
                return if node.stats_failures == 1 { Err(why) } else { Ok(()) };
            }
        };
        if node.stats_failures > 0 {
            tracing::info!(node = %node.name, "node's kubelet summary read again");
        }
        node.stats_failures = 0;
        if node.stats != Some(route) {
            if route == StatsRoute::Direct {
                tracing::info!(node = %node.name, "reading the kubelet's summary from the kubelet itself (the apiserver's node proxy does not answer, or is not granted)");
            }
            node.stats = Some(route);
        }
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
        let wait;
        (wait, node.stats_early) = next_summary(unmeasured, node.stats_early);
        node.stats_due = Some(Instant::now() + wait);
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

/// What the apiserver said, in short: its status code and message, not the whole status.
fn said(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => format!("{} {}", status.code, status.message),
        other => other.to_string(),
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

    #[test]
    fn a_node_with_pods_not_measured_is_asked_again_at_once_a_few_times_only() {
        assert_eq!(next_summary(0, 3), (STATS_EVERY, 0));
        assert_eq!(next_summary(2, 0), (Duration::ZERO, 1));
        assert_eq!(next_summary(1, STATS_EARLY - 1), (Duration::ZERO, STATS_EARLY));
        assert_eq!(next_summary(1, STATS_EARLY), (STATS_EVERY, STATS_EARLY + 1));
    }
}
