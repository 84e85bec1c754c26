//! Tiresias: discretised two-dimensional least attained service (2D-LAS), with preemption.
//!
//! Jobs sit in priority queues by attained service (GPU time) against thresholds, ranked by
//! queue and then first come first served; each round the ranked jobs are admitted while their
//! GPUs fit, and a running job that is not is preempted when an admitted job needs its GPUs.
//!
//! In detail, every `interval-s`:
//! 1. A job's attained service is the GPU-seconds it has received (its run time for a CPU
//!    job). With thresholds t₀ < t₁ < …, a job is in Q0 below t₀, in Q1 from t₀ to t₁, and so
//!    on; a new job enters Q0.
//! 2. Jobs, running and queued, are ranked by queue, then by when they entered it (arrival
//!    for Q0, demotion for the others, as the reference does; `within-queue = "arrival"`
//!    ranks by arrival instead), then by arrival.
//! 3. Down the ranking, a job is admitted while its GPUs fit what is left of the cluster's GPU
//!    count and then an actual placement: a running job keeps its GPUs; a queued one is placed
//!    by first fit ([`sched::FreeGpus`]), the nodes with the most free GPUs first, on the free
//!    GPUs, else on those of running jobs not
//!    admitted, released lowest ranked first until it fits; only those whose GPUs it takes are
//!    preempted. A job that does not fit is passed over and the walk goes on.
//! 4. The decision holds the preemptions first, then the placements. A job preempted in a
//!    round is not placed again in it; with `min-run-s`, a job is not preempted before its
//!    current run has lasted that long.
//! 5. Starvation relief (off by default): a job below Q0 that has waited, since it first ran
//!    after its last promotion, `starvation-factor` times its run time since that promotion
//!    goes back to Q0, its service counted from zero.
//!
//! Between rounds it asks to be called when the next one is due; jobs that arrive meanwhile
//! wait for it, as in the reference simulator.
//!
//! Reads: each job's attained service, run time, arrival, GPUs asked, replicas and whether it
//! waits; each node's GPUs and which running jobs hold them.
//!
//! Config (kebab-case keys, all optional; defaults from Pollux's simulator of Tiresias,
//! `simulator/tiresias.py` and `simulator.py` in github.com/petuum/adaptdl):
//! - `interval-s` (60): seconds between rounds (the simulator's scheduling interval); 0 is
//!   every call;
//! - `thresholds-gpu-h` (`[16]`): attained service, in GPU-hours, at which a job drops to the
//!   next queue, ascending (one threshold: two queues, Q0 and Q1);
//! - `within-queue` ("entry"): rank within a queue by entering it, or "arrival";
//! - `starvation-factor` (0, off, as the simulator's): see 5;
//! - `min-run-s` (0, as the simulator's): a job's current run lasts at least this long before
//!   it may be preempted.
//!
//! Paper: J. Gu, M. Chowdhury, K. G. Shin, Y. Zhu, M. Jeon, J. Qian, H. Liu, C. Guo,
//! "Tiresias: A GPU Cluster Manager for Distributed Deep Learning", NSDI 2019; as simulated
//! in A. Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized Deep
//! Learning", OSDI 2021.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use wasmsched_sdk::prelude::*;

/// Tiresias's constants.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Seconds between rounds; 0 runs a round on every call.
    pub interval_s: f64,
    /// Attained service, in GPU-hours, at which a job drops to the next queue; strictly
    /// ascending. k thresholds make k + 1 queues.
    pub thresholds_gpu_h: Vec<f64>,
    /// How jobs of one queue are ranked.
    pub within_queue: WithinQueue,
    /// A job below Q0 that has waited this many times its run time (both counted since its
    /// last promotion) goes back to Q0 with its service counted from zero; 0 turns it off.
    pub starvation_factor: f64,
    /// Seconds a job's current run lasts at least before it may be preempted.
    pub min_run_s: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            interval_s: 60.0,
            thresholds_gpu_h: vec![16.0],
            within_queue: WithinQueue::Entry,
            starvation_factor: 0.0,
            min_run_s: 0.0,
        }
    }
}

/// How jobs of one queue are ranked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WithinQueue {
    /// In order of entering the queue: arrival for Q0, demotion (or promotion) for the
    /// others; arrival breaks a tie.
    #[default]
    Entry,
    /// In order of arrival.
    Arrival,
}

/// What the policy keeps about one job.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
struct Ledger {
    /// Its queue.
    queue: usize,
    /// When it entered that queue.
    entered_s: f64,
    /// Its attained service and run time at its last promotion (0 before any).
    service_base_s: f64,
    run_base_s: f64,
    /// Time it has waited since it first ran after its last promotion.
    waited_s: f64,
    /// Its run time when its current run began.
    run_start_s: f64,
}

/// What survives a hot swap.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct State {
    rounds: Rounds,
    /// When the last round ran.
    last_round_s: Option<f64>,
    /// Per job handle.
    jobs: BTreeMap<u32, Ledger>,
}

/// A live job and what the round reads of its ledger.
struct Ranked<'s> {
    /// Queue, then entry (or arrival), then arrival, then id: the ranking, as integers.
    key: (u64, u64, u64, u32),
    /// Its run time when its current run began.
    run_start_s: f64,
    job: Job<'s>,
}

/// `x`'s bits, ordered as [`f64::total_cmp`] orders `x`.
fn ordered(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 { !bits } else { bits | 1 << 63 }
}

/// The Tiresias policy.
pub struct Tiresias {
    config: Config,
    state: State,
}

/// The queue of a job with `service_s` GPU-seconds against thresholds in GPU-hours.
fn queue_for(thresholds_gpu_h: &[f64], service_s: f64) -> usize {
    thresholds_gpu_h.iter().take_while(|&&t| service_s >= t * 3600.0).count()
}

impl Tiresias {
    /// A job's queue as of the last round (0 is the highest), for tests and logs.
    pub fn queue_of(&self, job: JobId) -> Option<usize> {
        self.state.jobs.get(&job.0).map(|l| l.queue)
    }

    /// Bring every live job's ledger up to `now`, `elapsed` after the previous round: waits,
    /// demotions, promotions. Every live job with its rank key, as the round ranks them.
    fn update<'s>(&mut self, s: &Snapshot<'s>, now: f64, elapsed: f64) -> Vec<Ranked<'s>> {
        let thresholds = &self.config.thresholds_gpu_h;
        let factor = self.config.starvation_factor;
        let mut live: Vec<Job<'s>> = s.jobs().chain(s.queue()).collect();
        live.sort_unstable_by_key(|j| j.id());
        // One pass over the ledgers and the live jobs, both by id: the ended jobs' ledgers
        // dropped, new ones opened, and the map rebuilt from the sorted list.
        let mut old = std::mem::take(&mut self.state.jobs).into_iter().peekable();
        let mut ledgers: Vec<(u32, Ledger)> = Vec::with_capacity(live.len());
        let mut ranked = Vec::with_capacity(live.len());
        for job in live {
            let id = job.id().0;
            while old.next_if(|(h, _)| *h < id).is_some() {}
            let (service, run) = (job.attained_service().0, job.run_time().0);
            let fresh = Ledger {
                queue: usize::MAX,
                entered_s: now,
                service_base_s: 0.0,
                run_base_s: 0.0,
                waited_s: 0.0,
                run_start_s: 0.0,
            };
            ledgers.push((id, old.next_if(|(h, _)| *h == id).map_or(fresh, |(_, l)| l)));
            let l = &mut ledgers.last_mut().expect("just pushed").1;
            let ran = run - l.run_base_s;
            if job.is_queued() && ran > 0.0 {
                l.waited_s += elapsed;
            }
            let queue = queue_for(thresholds, service - l.service_base_s);
            if queue != l.queue {
                (l.queue, l.entered_s) = (queue, now);
            }
            if factor > 0.0 && job.is_queued() && queue > 0 && ran > 0.0 && l.waited_s >= factor * ran {
                info!(
                    "tiresias: job#{} waited {:.0} s after running {:.0} s: back to queue 0",
                    job.id(),
                    l.waited_s,
                    ran
                );
                *l = Ledger { service_base_s: service, run_base_s: run, queue: 0, ..fresh };
            }
            let at = match self.config.within_queue {
                WithinQueue::Entry => l.entered_s,
                WithinQueue::Arrival => job.arrival().0,
            };
            let key = (l.queue as u64, ordered(at), ordered(job.arrival().0), job.id().0);
            ranked.push(Ranked { key, run_start_s: l.run_start_s, job });
        }
        self.state.jobs = ledgers.into_iter().collect();
        ranked
    }

    /// Whether a running job's current run is long enough to preempt it.
    fn preemptible(&self, r: &Ranked) -> bool {
        r.job.run_time().0 - r.run_start_s >= self.config.min_run_s && !r.job.gpus().is_empty()
    }

    /// One round: rank, admit, and push the preemptions and then the placements.
    fn round(&mut self, s: &Snapshot, mut ranked: Vec<Ranked>, d: &mut Decision) {
        // Each key is unique (it ends in the job's id): the unstable sort is the stable one.
        ranked.sort_unstable_by_key(|r| r.key);
        // The running jobs that could be preempted at all, lowest ranked first, once per round.
        let candidates: Vec<usize> =
            (0..ranked.len()).rev().filter(|&v| !ranked[v].job.is_queued() && self.preemptible(&ranked[v])).collect();
        let order: Vec<Job> = ranked.into_iter().map(|r| r.job).collect();
        let mut walk = Walk::new(s, &order, candidates);
        for (i, job) in order.iter().enumerate() {
            let ask = job.gpus_asked();
            if walk.preempted[i] || ask > walk.left {
                continue;
            }
            if !job.is_queued() {
                (walk.admitted[i], walk.left) = (true, walk.left - ask);
                if walk.is_candidate[i] {
                    walk.room.hold(job);
                }
                continue;
            }
            walk.admit_queued(self, &order, i, job);
        }
        for action in walk.preemptions.into_iter().chain(walk.placements) {
            d.push(action);
        }
    }
}

/// A round's walk down the ranking: what is left of the cluster as jobs are admitted, and
/// the actions that admit them.
struct Walk {
    /// The running jobs that could be preempted at all (ranks), lowest ranked first.
    candidates: Vec<usize>,
    /// Per rank, whether it is one of `candidates`.
    is_candidate: Vec<bool>,
    /// The free GPUs, nodes with the most free first.
    free: sched::FreeGpus,
    /// What each tenant may still take under its limit.
    tenants: sched::TenantRoom,
    /// `free` with every candidate not yet admitted released.
    room: sched::FreeGpus,
    /// The cluster's GPUs not yet admitted.
    left: u32,
    /// Per rank: admitted (runs on), or preempted this round.
    admitted: Vec<bool>,
    preempted: Vec<bool>,
    preemptions: Vec<Action>,
    placements: Vec<Action>,
}

impl Walk {
    /// The walk's start on `s`, for the live jobs in rank order (`order`) and the running
    /// jobs that could be preempted (`candidates`, ranks, lowest ranked first).
    fn new(s: &Snapshot, order: &[Job], candidates: Vec<usize>) -> Self {
        let free = sched::FreeGpus::of(s).ordered(sched::NodeOrder::MostFree);
        // A job whose tenant is at its limit is passed over, as the host would refuse it.
        let tenants = sched::TenantRoom::of(s);
        // The plan with every running job that could still be preempted released: what a
        // queued job could get at most. Kept in step with `free` through the round, so that a
        // job that would not fit even then is passed over without trying the victims.
        let mut room = free.clone();
        room.release_all(candidates.iter().map(|&v| &order[v]));
        let is_candidate = {
            let mut is = vec![false; order.len()];
            candidates.iter().for_each(|&v| is[v] = true);
            is
        };
        let left = free.gpu_count();
        let admitted = vec![false; order.len()];
        let preempted = vec![false; order.len()];
        let (preemptions, placements) = (Vec::new(), Vec::new());
        Walk { candidates, is_candidate, free, tenants, room, left, admitted, preempted, preemptions, placements }
    }

    /// Admits queued job `job` of rank `i` where it fits, on free GPUs or on those of
    /// candidates it preempts, unless its tenant is at its limit; its placement with why.
    fn admit_queued(&mut self, tiresias: &mut Tiresias, order: &[Job], i: usize, job: &Job) {
        let ask = job.gpus_asked();
        if self.tenants.check(job).is_err() {
            return;
        }
        let (placement, packed) = match self.free.find_packed(job) {
            Some(found) => found,
            None => {
                let Some(p) = self.preempt_for(tiresias, order, job) else { return };
                (p, sched::Packed::OneNode)
            }
        };
        self.free.take(&placement);
        self.room.take(&placement);
        self.tenants.take(job);
        (self.admitted[i], self.left) = (true, self.left - ask);
        if let Some(l) = tiresias.state.jobs.get_mut(&job.id().0) {
            l.run_start_s = job.run_time().0;
        }
        let mut why = format!(
            "tiresias: queue {}, {:.2} GPU-h attained",
            tiresias.queue_of(job.id()).unwrap_or(0),
            job.attained_service().0 / 3600.0
        );
        match packed {
            sched::Packed::OneNode => {}
            sched::Packed::Within { domain, .. } => why.push_str(&format!("; packed in domain {domain}")),
            sched::Packed::Spread(reason) => why.push_str(&format!("; spread: {reason}")),
        }
        self.placements.push(placement.action(job.id()).because(why));
    }

    /// Where `job` fits once candidates not admitted are released, lowest ranked first,
    /// until it does; those whose GPUs it takes are preempted. None when it never fits.
    fn preempt_for(&mut self, tiresias: &Tiresias, order: &[Job], job: &Job) -> Option<sched::Placement> {
        self.room.find_job(job)?;
        let victims: Vec<usize> =
            self.candidates.iter().copied().filter(|&v| !self.admitted[v] && !self.preempted[v]).collect();
        let victims = victims.iter().map(|&v| (v, order[v]));
        let (p, needed) = self.free.make_room(job, victims, |_| true, usize::MAX)?;
        for v in needed {
            self.free.release(&order[v]);
            self.tenants.release(&order[v]);
            self.preempted[v] = true;
            let why = format!(
                "tiresias: job#{} (queue {}) needs its GPUs; this job is in queue {}",
                job.id(),
                tiresias.queue_of(job.id()).unwrap_or(0),
                tiresias.queue_of(order[v].id()).unwrap_or(0)
            );
            self.preemptions.push(Action::preempt(order[v].id()).because(why));
        }
        Some(p)
    }
}

impl Policy for Tiresias {
    type Config = Config;

    const PLACES: bool = true;

    fn new(config: Config) -> Result<Self, PolicyError> {
        let c = &config;
        let non_negative = |x: f64| x.is_finite() && x >= 0.0;
        let ascending = c.thresholds_gpu_h.windows(2).all(|w| w[0] < w[1]);
        let positive = c.thresholds_gpu_h.iter().all(|&t| t.is_finite() && t > 0.0);
        if !(non_negative(c.interval_s) && non_negative(c.starvation_factor) && non_negative(c.min_run_s)) {
            return Err(PolicyError::InvalidConfig(
                "interval-s, starvation-factor and min-run-s must be zero or more".into(),
            ));
        }
        if !(ascending && positive) {
            return Err(PolicyError::InvalidConfig(format!(
                "thresholds-gpu-h must be positive and strictly ascending, like [16] or [1, 16]; got {:?}",
                c.thresholds_gpu_h
            )));
        }
        Ok(Tiresias { config, state: State::default() })
    }

    fn decide(&mut self, s: &Snapshot) -> Result<Decision, PolicyError> {
        let now = s.time().0;
        let mut d = Decision::new();
        let interval = Seconds(self.config.interval_s);
        if !self.state.rounds.due(s.time(), interval, &mut d) {
            return Ok(d);
        }
        let elapsed = now - self.state.last_round_s.unwrap_or(now);
        self.state.last_round_s = Some(now);
        let ranked = self.update(s, now, elapsed);
        self.round(s, ranked, &mut d);
        if interval.0 > 0.0 {
            d.call_again_in(interval);
        }
        Ok(d)
    }

    keep_state!(state);
}

export_policy!(Tiresias);

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_sdk::testing::{Harness, TestWorld, churn, job, placed};

    /// Rounds on every call; Q1 from 1 GPU-hour.
    const FAST: &str = r#"{"interval-s": 0, "thresholds-gpu-h": [1]}"#;

    fn tiresias(config: &str, world: TestWorld) -> Harness<Tiresias> {
        Harness::from_config(config, world).unwrap()
    }

    /// A tick whose decision must pass the host's checks.
    fn tick(h: &mut Harness<Tiresias>, by: f64) -> Decision {
        let d = h.tick(Seconds(by)).unwrap();
        assert_eq!(sched::check(&h.runner().view(), &d), Ok(()));
        d
    }

    fn preempted(d: &Decision) -> Vec<JobId> {
        d.actions().iter().filter(|a| matches!(a.kind(), ActionKind::Preempt)).map(Action::job).collect()
    }

    /// One job of 4 GPUs on `gpus`' first node, run for 1000 s: 4000 GPU-s puts it in Q1.
    fn demoted(config: &str, gpus: &[usize]) -> (Harness<Tiresias>, JobId) {
        let mut w = TestWorld::gpu_cluster(gpus);
        let a = w.queue_job(job("a", "imagenet").gpus(4));
        let mut h = tiresias(config, w);
        assert_eq!(placed(&tick(&mut h, 0.0)), [(a, vec![(0, vec![0, 1, 2, 3])])]);
        tick(&mut h, 1000.0);
        assert_eq!(h.policy().queue_of(a), Some(1));
        (h, a)
    }

    #[test]
    fn the_rank_keys_order_times_as_total_cmp_does() {
        let xs = [3.5, -0.0, 0.0, -2.0, 1e300, f64::MIN_POSITIVE, -1e-300, 60.0, 59.999, f64::INFINITY];
        for a in xs {
            for b in xs {
                assert_eq!(ordered(a).cmp(&ordered(b)), a.total_cmp(&b), "{a} against {b}");
            }
        }
    }

    #[test]
    fn a_job_no_node_holds_is_packed_into_one_rack_and_says_so() {
        let mut w = TestWorld::gpu_cluster(&[4, 4, 4, 4]);
        // Racks: nodes 0 and 2 in r1, nodes 1 and 3 in r2; first fit alone would take 0 and 1.
        for (n, rack) in [(0, "r1"), (1, "r2"), (2, "r1"), (3, "r2")] {
            w.set_domains(NodeId(n), &["b", rack]);
        }
        let a = w.queue_job(job("a", "cifar10").gpus(8).replicas(2));
        let mut h = tiresias(FAST, w);
        let d = tick(&mut h, 0.0);
        assert_eq!(placed(&d), [(a, vec![(0, vec![0, 1, 2, 3]), (2, vec![0, 1, 2, 3])])]);
        assert!(d.actions()[0].reason().ends_with("packed in domain r1"), "{:?}", d.actions()[0].reason());
    }

    #[test]
    fn a_job_that_has_used_more_gpu_time_yields_to_a_newcomer() {
        let (mut h, a) = demoted(FAST, &[4]);
        let b = h.world.queue_job(job("b", "cifar10").gpus(4));
        let d = tick(&mut h, 60.0);
        assert_eq!(preempted(&d), [a]);
        assert_eq!(placed(&d), [(b, vec![(0, vec![0, 1, 2, 3])])]);
        assert!(matches!(d.actions()[0].kind(), ActionKind::Preempt), "the preemption comes first");
        assert_eq!(h.policy().queue_of(b), Some(0));
    }

    #[test]
    fn a_preempted_job_waits_and_resumes_when_the_gpus_free_up() {
        let (mut h, a) = demoted(FAST, &[4]);
        let b = h.world.queue_job(job("b", "cifar10").gpus(4));
        tick(&mut h, 60.0);
        assert!(tick(&mut h, 60.0).is_empty(), "b, in Q0, keeps its GPUs");
        h.world.remove_job(b);
        assert_eq!(placed(&tick(&mut h, 60.0)), [(a, vec![(0, vec![0, 1, 2, 3])])]);
    }

    #[test]
    fn within_a_queue_the_job_that_came_first_keeps_running_whatever_its_service() {
        let mut w = TestWorld::gpu_cluster(&[4]);
        let a = w.queue_job(job("a", "imagenet").gpus(4));
        let mut h = tiresias(FAST, w);
        tick(&mut h, 0.0);
        tick(&mut h, 600.0); // 2400 GPU-s: still Q0
        let b = h.world.queue_job(job("b", "cifar10").gpus(4));
        assert!(tick(&mut h, 60.0).is_empty(), "a came first in Q0; least attained service alone would run b");
        assert_eq!((h.policy().queue_of(a), h.policy().queue_of(b)), (Some(0), Some(0)));
    }

    #[test]
    fn a_running_job_is_preempted_only_when_a_placed_job_needs_its_gpus() {
        let (mut h, _) = demoted(FAST, &[4, 4]);
        let b = h.world.queue_job(job("b", "cifar10").gpus(4));
        let d = tick(&mut h, 60.0);
        assert_eq!(d.actions().len(), 1, "{d:?}");
        assert_eq!(placed(&d), [(b, vec![(1, vec![0, 1, 2, 3])])]);
    }

    #[test]
    fn the_lowest_ranked_running_job_is_the_one_preempted() {
        let mut w = TestWorld::gpu_cluster(&[4, 4]);
        let x = w.queue_job(job("x", "imagenet").gpus(4));
        let y = w.queue_job(job("y", "imagenet").gpus(4));
        let mut h = tiresias(FAST, w);
        assert_eq!(placed(&tick(&mut h, 0.0)).len(), 2);
        tick(&mut h, 1000.0); // both in Q1, entered together; x arrived first
        let z = h.world.queue_job(job("z", "cifar10").gpus(4));
        let d = tick(&mut h, 60.0);
        assert_eq!(preempted(&d), [y]);
        assert_eq!(placed(&d), [(z, vec![(1, vec![0, 1, 2, 3])])]);
        assert!(!preempted(&d).contains(&x));
    }

    #[test]
    fn only_the_jobs_whose_gpus_a_placement_takes_are_preempted() {
        let mut w = TestWorld::gpu_cluster(&[2, 2]);
        let a = w.queue_job(job("a", "cifar10").gpus(1));
        let c = w.queue_job(job("c", "cifar10").gpus(1));
        w.start(a, NodeId(0), &[0]);
        w.start(c, NodeId(1), &[0]);
        let mut h = tiresias(r#"{"interval-s": 0, "thresholds-gpu-h": [0.1]}"#, w);
        tick(&mut h, 400.0); // both past 360 GPU-s: Q1
        // A job that may be split takes the free GPU of each node and preempts nobody.
        let s = h.world.queue_job(job("s", "cifar10").gpus(2).replicas(2));
        let d = tick(&mut h, 60.0);
        assert_eq!((preempted(&d), placed(&d)), (vec![], vec![(s, vec![(0, vec![1]), (1, vec![1])])]));
        h.world.remove_job(s);
        tick(&mut h, 60.0);
        // One that may not needs a whole node: c, ranked below a, makes room; a keeps running.
        let b = h.world.queue_job(job("b", "cifar10").gpus(2));
        let d = tick(&mut h, 60.0);
        assert_eq!(preempted(&d), [c]);
        assert_eq!(placed(&d), [(b, vec![(1, vec![0, 1])])]);
    }

    #[test]
    fn a_job_is_not_preempted_before_its_minimum_run_time() {
        let mut w = TestWorld::gpu_cluster(&[4]);
        let a = w.queue_job(job("a", "imagenet").gpus(4));
        let mut h = tiresias(r#"{"interval-s": 0, "thresholds-gpu-h": [0.5], "min-run-s": 1200}"#, w);
        tick(&mut h, 0.0);
        tick(&mut h, 600.0); // 2400 GPU-s: Q1
        let b = h.world.queue_job(job("b", "cifar10").gpus(4));
        assert!(tick(&mut h, 60.0).is_empty(), "a has run 660 s of its 1200");
        let d = tick(&mut h, 600.0);
        assert_eq!((preempted(&d), placed(&d).len()), (vec![a], 1));
        assert_eq!(placed(&d)[0].0, b);
    }

    #[test]
    fn jobs_move_down_one_queue_at_each_threshold_and_cpu_jobs_count_their_run_time() {
        let mut w = TestWorld::gpu_cluster(&[2]);
        let a = w.queue_job(job("a", "cifar10").gpus(2));
        let c = w.queue_job(job("c", "ncf"));
        let mut h = tiresias(r#"{"interval-s": 0, "thresholds-gpu-h": [1, 2]}"#, w);
        assert_eq!(placed(&tick(&mut h, 0.0)), [(a, vec![(0, vec![0, 1])]), (c, vec![(0, vec![])])]);
        let queues = |h: &Harness<Tiresias>| (h.policy().queue_of(a), h.policy().queue_of(c));
        tick(&mut h, 1799.0);
        assert_eq!(queues(&h), (Some(0), Some(0)));
        tick(&mut h, 2.0); // a: 3602 GPU-s
        assert_eq!(queues(&h), (Some(1), Some(0)));
        tick(&mut h, 1800.0); // a: 7202 GPU-s; c: 3601 s
        assert_eq!(queues(&h), (Some(2), Some(1)));
    }

    #[test]
    fn a_job_that_does_not_fit_is_passed_over_and_smaller_ones_behind_it_start() {
        let mut w = TestWorld::gpu_cluster(&[4]);
        w.queue_job(job("huge", "imagenet").gpus(8));
        let a = w.queue_job(job("a", "imagenet").gpus(3));
        w.queue_job(job("b", "cifar10").gpus(2));
        let c = w.queue_job(job("c", "cifar10").gpus(1));
        let mut h = tiresias(FAST, w);
        let d = tick(&mut h, 0.0);
        assert_eq!(placed(&d), [(a, vec![(0, vec![0, 1, 2])]), (c, vec![(0, vec![3])])]);
        assert!(tick(&mut h, 60.0).is_empty(), "b waits behind a in Q0 without preempting it");
    }

    #[test]
    fn a_job_that_waits_long_enough_goes_back_to_the_first_queue() {
        let config = r#"{"interval-s": 0, "thresholds-gpu-h": [1], "starvation-factor": 0.5}"#;
        let (mut h, a) = demoted(config, &[4]);
        let b = h.world.queue_job(job("b", "cifar10").gpus(4));
        assert_eq!(preempted(&tick(&mut h, 60.0)), [a]); // t = 1060: a ran 1060 s
        for _ in 0..8 {
            tick(&mut h, 60.0);
        }
        assert_eq!(h.policy().queue_of(a), Some(1), "480 s waited, less than half of 1060");
        let d = tick(&mut h, 60.0);
        assert_eq!(h.policy().queue_of(a), Some(0), "540 s waited");
        assert!(d.is_empty(), "b entered Q0 first and keeps its GPUs");
        for _ in 0..5 {
            tick(&mut h, 60.0);
        }
        let d = tick(&mut h, 60.0); // t = 1960: b has 3600 GPU-s and drops to Q1
        assert_eq!((preempted(&d), placed(&d)), (vec![b], vec![(a, vec![(0, vec![0, 1, 2, 3])])]));
        assert_eq!(h.policy().queue_of(a), Some(0), "its 4240 GPU-s count from zero since its promotion");
    }

    #[test]
    fn rounds_come_every_interval_and_jobs_that_arrive_between_wait_for_the_next() {
        let mut h = tiresias("{}", TestWorld::gpu_cluster(&[4]));
        assert_eq!(tick(&mut h, 0.0).next_call(), Some(Seconds(60.0)));
        let a = h.world.queue_job(job("a", "cifar10").gpus(1));
        let d = tick(&mut h, 30.0);
        assert!(d.is_empty() && d.next_call() == Some(Seconds(30.0)), "{d:?}");
        assert_eq!(placed(&tick(&mut h, 30.0)), [(a, vec![(0, vec![0])])]);
    }

    #[test]
    fn ranking_by_arrival_puts_an_older_job_demoted_later_first() {
        for (within, victim) in [("entry", "a"), ("arrival", "b")] {
            let mut w = TestWorld::gpu_cluster(&[4]);
            let a = w.queue_job(job("a", "cifar10").gpus(1));
            let config = format!(r#"{{"interval-s": 0, "thresholds-gpu-h": [1], "within-queue": "{within}"}}"#);
            let mut h = tiresias(&config, w);
            tick(&mut h, 0.0);
            let b = h.world.queue_job(job("b", "imagenet").gpus(3));
            tick(&mut h, 10.0);
            tick(&mut h, 1200.0); // t = 1210: b has 3600 GPU-s, Q1
            tick(&mut h, 2390.0); // t = 3600: a has 3600 GPU-s, Q1
            h.world.queue_job(job("c", "cifar10").gpus(1));
            let d = tick(&mut h, 60.0);
            let expected = if victim == "a" { a } else { b };
            assert_eq!(preempted(&d), [expected], "{within}");
        }
    }

    #[test]
    fn a_bad_config_is_refused() {
        let refuse = |c: &str| Harness::<Tiresias>::from_config(c, TestWorld::new()).is_err();
        assert!(refuse(r#"{"thresholds-gpu-h": [16, 1]}"#));
        assert!(refuse(r#"{"thresholds-gpu-h": [0]}"#));
        assert!(refuse(r#"{"interval-s": -1}"#));
        assert!(refuse(r#"{"min-run-s": "30s"}"#));
        assert!(refuse(r#"{"within-queue": "size"}"#));
        assert!(refuse(r#"{"alpha": 1}"#));
        assert!(!refuse(r#"{"thresholds-gpu-h": [1, 16], "within-queue": "arrival", "starvation-factor": 2}"#));
    }

    #[test]
    fn state_survives_a_swap() {
        let (h, a) = demoted(FAST, &[4]);
        let saved = h.runner().save_state();
        let mut next = Tiresias::new(Config::default()).unwrap();
        next.restore_state(&saved).unwrap();
        assert_eq!(next.queue_of(a), Some(1));
    }

    /// A deterministic die (xorshift), so the busy world is the same on every run.
    /// Jobs of every shape arrive and end on four GPU nodes and a CPU node for 400 ticks of
    /// 30 s; every decision is checked as the host would. Returns the placements and
    /// preemptions made.
    fn run_busy_world(config: &str) -> (usize, usize) {
        let mut w = TestWorld::gpu_cluster(&[4, 4, 2, 8]);
        w.node("cpu", Millicores(16000), Bytes::gib(64));
        let mut h = tiresias(config, w);
        let (mut placements, mut preemptions) = (0, 0);
        churn(&mut h, 400, 0x2545_f491_4f6c_dd1d, 12, |d| {
            placements += placed(d).len();
            preemptions += preempted(d).len();
        });
        (placements, preemptions)
    }

    #[test]
    fn every_decision_on_a_busy_world_passes_the_hosts_rules() {
        for config in [
            r#"{"thresholds-gpu-h": [0.5, 2]}"#,
            r#"{"interval-s": 0, "thresholds-gpu-h": [0.2], "starvation-factor": 1, "min-run-s": 120}"#,
            r#"{"thresholds-gpu-h": [0.5], "within-queue": "arrival"}"#,
        ] {
            let (placements, preemptions) = run_busy_world(config);
            assert!(placements > 100 && preemptions > 5, "{config}: {placements} placed, {preemptions} preempted");
        }
    }
}
