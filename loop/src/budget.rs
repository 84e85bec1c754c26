//! The disruption budget: how much harm a valid policy may do to the jobs it manages.
//!
//! Validation refuses what cannot be done; the budget refuses what may be done but too often.
//! A disruptive action ([`disruptive`]: `stop`, `migrate`, `preempt`, and `set-gpu-share` on
//! a backend that makes the container anew for it, as Docker does) costs a running job its
//! work since its last checkpoint, or ends it. The loop ([`crate::control::drive`]) hands the
//! active policy's validated actions to a [`Budget`] before the backend sees them, for every
//! backend. In the policy's order, a disruptive action is refused when:
//!
//! - its job opted out: it carries the label `wasmsched.disruptible=false` (this one holds
//!   with the budget off too: it is the job's own word);
//! - its job was disrupted less than `job-min-interval` ago;
//! - `max-per-window` disruptions were admitted cluster-wide in the last `window`;
//! - `max-per-node` disruptions were admitted in the last `window` on a node the job runs on.
//!
//! A refusal carries its reason (the audit log keeps it, the metrics count it); everything
//! else in the decision applies. Because a refused preemption frees no GPUs, what is left is
//! validated again ([`wasmsched_runtime::validate::check`]), so a placement that counted on those GPUs is
//! refused too. Counts are on the backend's clock: wall time on a live backend, virtual time in
//! the simulator.
//!
//! ```toml
//! [budget]                     # in the host's config, and in a scenario
//! enabled = true
//! window = "10m"
//! max-per-window = 5           # cluster-wide
//! max-per-node = 2
//! job-min-interval = "30m"
//! ```

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use wasmsched_core::bindings::wit::{self, ActionKind};
use wasmsched_core::declare::{OPT_OUT_LABEL, opted_out};
use wasmsched_core::world::{JobId, NodeId, World};
use wasmsched_runtime::validate::{self, Rejection};

/// Whether an action disrupts its job: ends it, or restarts it from its checkpoint.
pub fn disruptive(kind: &ActionKind) -> bool {
    matches!(kind, ActionKind::Stop | ActionKind::Migrate(_) | ActionKind::Preempt | ActionKind::Resize(_))
}

/// How many disruptions a policy may cause, and how often.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct BudgetConfig {
    /// Whether the budget applies (default true).
    pub enabled: bool,
    /// The sliding window the counts below run over (default `"10m"`).
    #[serde(with = "humantime_text")]
    pub window: Duration,
    /// Disruptions admitted cluster-wide per window (default 5).
    pub max_per_window: u32,
    /// Disruptions admitted per node per window (default 2).
    pub max_per_node: u32,
    /// The least time between two disruptions of one job (default `"30m"`).
    #[serde(with = "humantime_text")]
    pub job_min_interval: Duration,
}

impl Default for BudgetConfig {
    /// What a cautious operator would choose: a handful of restarts per ten minutes, at most
    /// two on one node, and a job left alone for half an hour after it was disrupted.
    fn default() -> Self {
        BudgetConfig {
            enabled: true,
            window: Duration::from_secs(600),
            max_per_window: 5,
            max_per_node: 2,
            job_min_interval: Duration::from_secs(1800),
        }
    }
}

impl BudgetConfig {
    /// No budget: every valid action applies, but a disruption of a job that opted out.
    pub fn off() -> Self {
        BudgetConfig { enabled: false, ..BudgetConfig::default() }
    }
}

/// Durations as humantime text (`"10m"`), both ways: a recording's header keeps the budget.
mod humantime_text {
    use std::time::Duration;

    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        wasmsched_core::units::duration(d)
    }
}

/// What the budget has admitted and refused so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetCounters {
    /// Disruptive actions admitted.
    pub disruptions: u64,
    /// Disruptive actions refused.
    pub refused: u64,
}

/// The budget's memory of recent disruptions.
#[derive(Debug)]
pub struct Budget {
    config: BudgetConfig,
    /// Admitted disruptions in the window: when, and the nodes the job ran on.
    recent: VecDeque<(u64, Vec<NodeId>)>,
    /// Each job's last admitted disruption.
    last: HashMap<JobId, u64>,
    counters: BudgetCounters,
    /// Whether a `set-gpu-share` restarts its job on this backend.
    share_restarts: bool,
}

impl Budget {
    /// A budget with nothing spent.
    pub fn new(config: BudgetConfig) -> Self {
        Budget {
            config,
            recent: VecDeque::new(),
            last: HashMap::new(),
            counters: BudgetCounters::default(),
            share_restarts: false,
        }
    }

    /// On a backend where a `set-gpu-share` restarts its job (`yes`), count it as a
    /// disruption.
    pub fn share_restarts(mut self, yes: bool) -> Self {
        self.share_restarts = yes;
        self
    }

    /// Whether `kind` disrupts its job on this budget's backend.
    pub fn disrupts(&self, kind: &ActionKind) -> bool {
        disruptive(kind) || (self.share_restarts && matches!(kind, ActionKind::SetGpuShare(_)))
    }

    /// How many of `actions` disrupt their jobs on this budget's backend.
    pub fn disruptions(&self, actions: &[wit::Action]) -> u64 {
        actions.iter().filter(|a| self.disrupts(&a.kind)).count() as u64
    }

    /// What it has admitted and refused.
    pub fn counters(&self) -> BudgetCounters {
        self.counters
    }

    /// Disruptions admitted within the window that ends at `now_ms`, as the next admission
    /// counts them against `max-per-window`.
    pub fn spent(&self, now_ms: u64) -> u64 {
        self.recent.iter().filter(|(at, _)| self.within(*at, now_ms)).count() as u64
    }

    /// Whether a disruption admitted at `at` still counts at `now_ms`.
    fn within(&self, at: u64, now_ms: u64) -> bool {
        now_ms.saturating_sub(at) < self.config.window.as_millis() as u64
    }

    /// Split validated `actions` for `world` into those that apply and those over budget;
    /// what applies is validated again when anything was refused (module docs).
    pub fn admit(&mut self, actions: Vec<wit::Action>, world: &World) -> (Vec<wit::Action>, Vec<Rejection>) {
        if !actions.iter().any(|a| self.disrupts(&a.kind)) {
            return (actions, Vec::new());
        }
        let now = world.time_ms();
        while self.recent.front().is_some_and(|(at, _)| !self.within(*at, now)) {
            self.recent.pop_front();
        }
        let mut kept = Vec::with_capacity(actions.len());
        let mut refused = Vec::new();
        for action in actions {
            if !self.disrupts(&action.kind) {
                kept.push(action);
                continue;
            }
            let nodes = nodes_of(world, action.job);
            match self.problem(&action, &nodes, world, now) {
                Some(reason) => {
                    self.counters.refused += 1;
                    refused.push(Rejection { action, reason });
                }
                None => {
                    self.counters.disruptions += 1;
                    self.last.insert(action.job, now);
                    self.recent.push_back((now, nodes));
                    kept.push(action);
                }
            }
        }
        if refused.is_empty() {
            return (kept, refused);
        }
        // A refused preemption or stop frees nothing: a placement after it may now collide.
        let checked = validate::check(wit::Decision { actions: kept, next_call_ms: None, pending: Vec::new() }, world)
            .expect("a subset of an accepted decision is not oversized");
        refused.extend(checked.rejected.into_iter().map(|r| Rejection {
            reason: format!("{} (an action before it was over the disruption budget)", r.reason),
            ..r
        }));
        (checked.accepted, refused)
    }

    /// Why `action`, on a job running on `nodes`, is over budget at `now`, if it is.
    fn problem(&self, action: &wit::Action, nodes: &[NodeId], world: &World, now: u64) -> Option<String> {
        let c = &self.config;
        if world.spec(action.job).is_some_and(opted_out) {
            return Some(format!("job {} opted out of disruption ({OPT_OUT_LABEL}=false)", action.job));
        }
        if !c.enabled {
            return None;
        }
        if let Some(&at) = self.last.get(&action.job) {
            let since = now.saturating_sub(at);
            if since < c.job_min_interval.as_millis() as u64 {
                return Some(format!(
                    "disruption budget: job {} was disrupted {} s ago; budget.job-min-interval allows one per {}",
                    action.job,
                    since / 1000,
                    humantime::format_duration(c.job_min_interval)
                ));
            }
        }
        let window = humantime::format_duration(c.window);
        if self.recent.len() >= c.max_per_window as usize {
            return Some(format!(
                "disruption budget: {} disruptions in the last {window}, budget.max-per-window is {}",
                self.recent.len(),
                c.max_per_window
            ));
        }
        for &node in nodes {
            let on_node = self.recent.iter().filter(|(_, nodes)| nodes.contains(&node)).count();
            if on_node >= c.max_per_node as usize {
                return Some(format!(
                    "disruption budget: {on_node} disruptions on node {node} in the last {window}, budget.max-per-node is {}",
                    c.max_per_node
                ));
            }
        }
        None
    }
}

/// The nodes a job runs on (none while it waits), each once.
fn nodes_of(world: &World, job: JobId) -> Vec<NodeId> {
    let Some(state) = world.state(job).filter(|s| s.is_running()) else { return Vec::new() };
    let mut nodes: Vec<NodeId> = std::iter::once(state.node).chain(state.gpus.iter().map(|g| g.node)).collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_core::world::sample;

    fn act(job: JobId, kind: ActionKind) -> wit::Action {
        wit::Action { job, kind, reason: "test".into() }
    }

    fn at(mut world: World, s: u64) -> World {
        world.set_time_ms(s * 1000);
        world
    }

    fn tight() -> BudgetConfig {
        BudgetConfig {
            enabled: true,
            window: Duration::from_secs(60),
            max_per_window: 3,
            max_per_node: 2,
            job_min_interval: Duration::from_secs(30),
        }
    }

    #[test]
    fn a_gpu_share_is_a_disruption_where_the_backend_restarts_the_job_for_it() {
        let world = at(sample::world(2, 4, 0), 100);
        let share = |job| act(job, ActionKind::SetGpuShare(wit::GpuShare { gpu: 0, percent: 50 }));
        let shares: Vec<_> = (0..4).map(JobId).map(share).collect();
        let (kept, refused) = Budget::new(tight()).admit(shares.clone(), &world);
        assert_eq!((kept.len(), refused.len()), (4, 0), "where a share applies in place, it costs nothing");
        let mut b = Budget::new(BudgetConfig { max_per_node: 10, ..tight() }).share_restarts(true);
        assert_eq!(b.disruptions(&shares), 4);
        let (kept, refused) = b.admit(shares, &world);
        assert_eq!((kept.len(), refused.len()), (3, 1));
        assert!(refused[0].reason.contains("budget.max-per-window"), "{}", refused[0].reason);
    }

    #[test]
    fn the_cluster_wide_budget_refuses_disruptions_past_its_count_and_lets_the_rest_apply() {
        let world = at(sample::world(4, 8, 2), 100);
        let mut b = Budget::new(BudgetConfig { max_per_node: 10, ..tight() });
        let actions: Vec<_> = (0..6)
            .map(|j| act(JobId(j), ActionKind::Stop))
            .chain([act(JobId(7), ActionKind::SetCpu(Some(500)))])
            .collect();
        let (kept, refused) = b.admit(actions, &world);
        assert_eq!(kept.iter().map(|a| a.job).collect::<Vec<_>>(), [0, 1, 2, 7]);
        assert_eq!(refused.len(), 3);
        assert!(refused[0].reason.contains("budget.max-per-window is 3"), "{}", refused[0].reason);
        assert_eq!(b.counters(), BudgetCounters { disruptions: 3, refused: 3 });
        // What it has spent of its window, as the status shows it: all three, until the
        // window has passed.
        assert_eq!((b.spent(100_000), b.spent(159_999), b.spent(160_000)), (3, 3, 0));
        // A window later the budget is whole again.
        let (kept, refused) = b.admit(vec![act(JobId(3), ActionKind::Stop)], &at(sample::world(4, 8, 2), 160));
        assert_eq!((kept.len(), refused.len()), (1, 0));
    }

    #[test]
    fn the_per_node_budget_counts_the_nodes_the_job_ran_on() {
        let world = at(sample::world(2, 8, 2), 10);
        let on = |node: u32| (0..8).filter(|&j| world.state(JobId(j)).unwrap().node == node).collect::<Vec<u32>>();
        let (first, second) = (on(0), on(1));
        assert!(first.len() >= 3 && !second.is_empty(), "the sample spreads jobs over both nodes");
        let mut b = Budget::new(BudgetConfig { max_per_window: 10, ..tight() });
        let actions = first.iter().take(3).chain(&second[..1]).map(|&j| act(JobId(j), ActionKind::Preempt)).collect();
        let (kept, refused) = b.admit(actions, &world);
        assert_eq!(kept.len(), 3, "two on node 0, one on node 1");
        assert_eq!(refused[0].action.job, first[2]);
        assert!(
            refused[0].reason.contains("on node 0") && refused[0].reason.contains("max-per-node"),
            "{}",
            refused[0].reason
        );
    }

    #[test]
    fn a_job_is_left_alone_for_its_minimum_interval_after_a_disruption() {
        let mut b = Budget::new(tight());
        let migrate = || vec![act(JobId(1), ActionKind::Migrate(NodeId(0)))];
        assert_eq!(b.admit(migrate(), &at(sample::world(2, 3, 2), 0)).0.len(), 1);
        let (kept, refused) = b.admit(migrate(), &at(sample::world(2, 3, 2), 20));
        assert!(kept.is_empty());
        assert!(
            refused[0].reason.contains("disrupted 20 s ago") && refused[0].reason.contains("30s"),
            "{}",
            refused[0].reason
        );
        assert_eq!(b.admit(migrate(), &at(sample::world(2, 3, 2), 30)).0.len(), 1);
    }

    #[test]
    fn a_job_that_opted_out_is_never_disrupted_but_still_tuned() {
        let mut world = sample::world(1, 1, 2);
        let mut spec = sample::job_spec(1);
        spec.labels.push((OPT_OUT_LABEL.into(), "False".into()));
        let protected = world.add_job(spec, NodeId(0));
        let mut b = Budget::new(BudgetConfig::default());
        let actions = vec![
            act(protected, ActionKind::Stop),
            act(protected, ActionKind::SetCpu(Some(700))),
            act(JobId(0), ActionKind::Stop),
        ];
        let (kept, refused) = b.admit(actions, &world);
        assert_eq!(
            kept.iter().map(|a| (a.job, disruptive(&a.kind))).collect::<Vec<_>>(),
            [(protected, false), (JobId(0), true)]
        );
        assert!(refused[0].reason.contains("opted out"), "{}", refused[0].reason);
    }

    #[test]
    fn an_off_budget_admits_everything_but_what_opted_out() {
        let mut b = Budget::new(BudgetConfig::off());
        let world = sample::world(1, 20, 2);
        let (kept, refused) = b.admit((0..20).map(|j| act(JobId(j), ActionKind::Stop)).collect(), &world);
        assert_eq!((kept.len(), refused.len()), (20, 0));
        let mut world = sample::world(1, 2, 0);
        let mut spec = sample::job_spec(2);
        spec.labels.push((OPT_OUT_LABEL.into(), "false".into()));
        let protected = world.add_job(spec, NodeId(0));
        let (kept, refused) =
            b.admit(vec![act(protected, ActionKind::Preempt), act(JobId(0), ActionKind::Stop)], &world);
        assert_eq!((kept.len(), refused.len()), (1, 1));
        assert!(refused[0].reason.contains("opted out"), "{}", refused[0].reason);
    }

    #[test]
    fn a_placement_that_counted_on_a_refused_preemption_is_refused_too() {
        // One node with one GPU: a job holds it, another waits for it.
        let mut world = sample::with_queue(1, 0, 0, 2);
        let holder = world.enqueue_job(sample::job_spec(0));
        assert!(world.start_job(holder, NodeId(0), vec![wasmsched_core::world::GpuSlot { node: NodeId(0), index: 0 }]));
        let mut spec = sample::job_spec(1);
        spec.gpus = 1;
        let waiting = world.enqueue_job(spec);
        let place = wit::Placement { nodes: vec![wit::NodePlacement { node: NodeId(0), gpus: vec![0] }], share: false };
        let actions = vec![act(holder, ActionKind::Preempt), act(waiting, ActionKind::Place(place))];
        let checked =
            validate::check(wit::Decision { actions, next_call_ms: None, pending: Vec::new() }, &world).unwrap();
        assert_eq!(checked.accepted.len(), 2, "{:?}", checked.rejected);
        let mut b = Budget::new(BudgetConfig { max_per_window: 0, ..tight() });
        let (kept, refused) = b.admit(checked.accepted, &world);
        assert!(kept.is_empty(), "{kept:?}");
        assert_eq!(refused.len(), 2);
        assert!(refused[1].reason.contains("over the disruption budget"), "{}", refused[1].reason);
    }

    #[test]
    fn the_config_reads_durations_and_refuses_unknown_keys() {
        let c: BudgetConfig = toml::from_str("window = \"5m\"\nmax-per-node = 1").unwrap();
        assert_eq!((c.window, c.max_per_node, c.max_per_window), (Duration::from_secs(300), 1, 5));
        assert_eq!(toml::from_str::<BudgetConfig>(&toml::to_string(&c).unwrap()).unwrap(), c);
        let err = toml::from_str::<BudgetConfig>("max-per-hour = 3").unwrap_err().to_string();
        assert!(err.contains("max-per-hour"), "{err}");
        let err = toml::from_str::<BudgetConfig>("window = \"soon\"").unwrap_err().to_string();
        assert!(err.contains("\"soon\" is not a duration") && err.contains("30s"), "{err}");
    }
}
