//! GACER-style GPU sharing: which jobs share a GPU, each one's share of it, and inference
//! services kept within their latency targets, at container granularity.
//!
//! GACER itself works inside a deep-learning runtime: it regulates, at a granularity finer
//! than whole models (their operators), how heterogeneous co-located models share one GPU, in
//! space (how much of the GPU each gets) and in time (what runs when). A container host cannot
//! reach operators, so this policy is GACER-*style*: it acts on whole jobs. It chooses which
//! jobs share a GPU (temporal: who runs together), sets each one's share of it (spatial: an
//! MPS-style percentage of the compute), and keeps inference services within their p99
//! latency targets. The paper's abstract gives no speed-up figure; its authors' predecessor
//! reports 1.3–1.7× over native multi-stream execution.
//!
//! In detail, on every call:
//! 1. Profiles: a model's demand (the percent of a GPU it uses alone, an exponentially
//!    weighted mean of the job's `gpu-used-percent` while it is the only, uncapped job on its
//!    one GPU) and its memory (the most `memory-used-bytes` its GPU showed meanwhile). A model
//!    is trusted after `profile-samples` intervals. Profiles survive a hot swap.
//! 2. Protection (with `regulate`): a service with a QoE target that shares its GPU with a
//!    trainer, both already regulated, is checked against its newest p99 record: a miss raises
//!    its share by `step-percent` up to `max-service-percent` and lowers the trainer's by as
//!    much; `protect-after` misses in a row at the maximum preempt the trainer (at most once per
//!    `min-move-interval-s` per trainer), which never joins that service again; a p99 below
//!    `relax-below` × target for `relax-after` checks gives `relax-step-percent` back, never
//!    below the service's start. A service is never capped below its start or moved.
//! 3. Sets (with `regulate`): regulated trainers sharing a GPU each run at their GPU use over
//!    their demand; the speeds added up are what that set of models gets from the GPU (an
//!    exponentially weighted mean per set). A set seen `protect-after` times to get less than
//!    `min-pair-gain` is parted (the one that arrived last goes back to the queue, at most once
//!    per `min-move-interval-s`) and those models are never put together again.
//! 4. Placement, queued jobs in arrival order, each independently (no reservation: a job that
//!    waits does not hold back those behind it): a CPU job goes where the SDK's first fit puts
//!    it; a multi-GPU job takes free GPUs by first fit and never shares; a single-GPU job takes
//!    a free GPU alone if there is one (an unprofiled model always runs alone, to be learnt);
//!    otherwise a profiled job joins profiled single-GPU jobs on a GPU: a trainer joins up to
//!    `max-per-gpu` − 1 trainers or one service, a service joins one trainer, when demands add
//!    up to at most `pack-limit-percent` and memory to at most `memory-fraction` of the GPU,
//!    and the models were not seen to get less than `min-pair-gain` together; the GPU with the
//!    fewest holders first, then the set seen to gain most, then the lowest demand; else it
//!    waits. A GPU still free after that, with no job waiting for GPUs, takes one trainer off
//!    the most crowded GPU (the one that arrived last; it runs alone from the next call).
//! 5. Shares (with `regulate`), on GPUs whose holders all run (a job placed this round gets
//!    its share on the next call, once it runs): trainers whose demands fit one GPU get their
//!    demand plus `margin-percent` each, otherwise 100 split by demand (each at least
//!    `min-share-percent`); a service beside a trainer starts at its demand plus
//!    `service-margin-percent` (at most `max-service-percent`) and the trainer gets the rest;
//!    a job left alone with a share below 100 gets 100. A share is set only when it changes.
//!
//! With `regulate = false` it places the same way, sets no share, parts no set and protects
//! nothing: jobs on one GPU time-slice it, the unregulated baseline.
//!
//! Reads: each job's kind, model, GPUs asked, replicas, arrival, QoE target and newest latency
//! records; each running job's GPUs, share and GPU use; each GPU's memory and memory in use.
//!
//! Config (kebab-case keys, all optional; our reading, as the paper works below containers):
//! - `regulate` (true): set shares and protect services; false is the time-sliced baseline;
//! - `pack-limit-percent` (130): jobs share a GPU when their demands add up to at most this;
//! - `memory-fraction` (0.9): and their memory to at most this fraction of the GPU's;
//! - `margin-percent` (10): two light trainers each get their demand plus this;
//! - `service-margin-percent` (20): a service starts at its demand plus this;
//! - `min-share-percent` (10): the floor of any shared job;
//! - `max-service-percent` (90): a service is raised to at most this;
//! - `step-percent` (10): raised by this per missed check;
//! - `protect-after` (3): misses in a row at the maximum before its trainer is preempted;
//! - `relax-below` (0.5), `relax-after` (3), `relax-step-percent` (5): a p99 below this
//!   fraction of the target for that many checks gives that much share back (0 turns it off);
//! - `min-move-interval-s` (600): a trainer is preempted at most once in this long;
//! - `profile-samples` (3), `ewma-weight` (0.3): intervals alone before a model's profile is
//!   trusted, and the weight of the newest one in its demand (and in a pair's gain);
//! - `min-pair-gain` (1.0): models that get less of a GPU together are parted (0 turns it
//!   off);
//! - `max-per-gpu` (3): trainers on one GPU at most (2 to 4).
//!
//! Paper: Y. Yu, F. Yu, M. Zhang, D. Wang, T. Soyata, C. Liu, X. Chen, "GACER: Granularity-Aware
//! ConcurrEncy Regulation for Multi-Tenant Deep Learning", arXiv 2304.11745, 2023.

mod book;
mod config;
mod pairs;
mod profile;
#[cfg(test)]
mod rig;
mod share;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use wasmsched_sdk::prelude::*;

use book::Book;
pub use config::Config;
pub use pairs::{Pair, Pairs};
use profile::gib;
pub use profile::{Profile, Profiles};
use share::{Verdict, Watch};

/// What survives a hot swap.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct State {
    /// Per model.
    profiles: Profiles,
    /// Per service (job handle) beside a trainer.
    watches: BTreeMap<u32, Watch>,
    /// (trainer, service) handles: the trainer was preempted to protect the service and never
    /// joins it again.
    bans: BTreeSet<(u32, u32)>,
    /// Per trainer (job handle): when it was last preempted, in seconds.
    moved_s: BTreeMap<u32, f64>,
    /// Per pair of models: what they get from a GPU together.
    #[serde(default)]
    pairs: Pairs,
}

/// The GACER-style policy.
pub struct Gacer {
    config: Config,
    state: State,
}

/// A service's share beside a trainer decided by protection this round, and why.
type Planned = BTreeMap<JobId, (u8, String)>;

/// A GPU by its node's name and its index, for reasons.
fn gpu_name(s: &Snapshot, slot: GpuSlot) -> String {
    let node = s.node(slot.node).map_or_else(|| slot.node.to_string(), |n| n.name().to_owned());
    format!("{node}/gpu{}", slot.index)
}

/// A job by its handle and name, for reasons.
fn named(job: &Job) -> String {
    format!("{} ({})", job.id(), job.name())
}

impl Gacer {
    /// What the policy has learnt about a model, for tests and logs.
    pub fn profile(&self, model: &str) -> Option<&Profile> {
        self.state.profiles.get(model)
    }

    /// What the policy has learnt about `models` sharing a GPU.
    pub fn set(&self, models: &[&str]) -> Option<&Pair> {
        self.state.pairs.get(models)
    }

    /// Whether `trainer` is kept away from `service`.
    pub fn keeps_apart(&self, trainer: JobId, service: JobId) -> bool {
        self.state.bans.contains(&(trainer.0, service.0))
    }

    fn samples(&self) -> u32 {
        Config::count(self.config.profile_samples)
    }

    /// Forget the jobs that are gone.
    fn forget_gone(&mut self, s: &Snapshot) {
        let live: BTreeSet<u32> = s.jobs().chain(s.queue()).map(|j| j.id().0).collect();
        self.state.watches.retain(|h, _| live.contains(h));
        self.state.bans.retain(|(t, v)| live.contains(t) && live.contains(v));
        self.state.moved_s.retain(|h, _| live.contains(h));
    }

    /// Check each regulated service beside a trainer against its target: plan its new share,
    /// or preempt the trainer (released from `book` and `free`).
    fn protect<'a>(
        &mut self,
        s: &Snapshot<'a>,
        book: &mut Book<'a>,
        free: &mut sched::FreeGpus,
        planned: &mut Planned,
        d: &mut Decision,
    ) {
        let c = &self.config;
        let now = s.time().0;
        let mut checked = BTreeSet::new();
        let mut preempted = Vec::new();
        for entry in book.entries() {
            let Some((service, trainer)) = service_pair(&entry.holders) else { continue };
            let Some(target) = service.qoe_target().filter(|t| t.is_finite() && *t > 0.0) else { continue };
            // The first call of a pair sets its starting shares; latency measured before them
            // says nothing about them.
            let (Some(current), Some(_)) = (service.gpu_share(), trainer.gpu_share()) else { continue };
            let Some(profile) = self.state.profiles.get(service.model()) else { continue };
            checked.insert(service.id().0);
            let Some(p99) = service.new_records().next_back().map(|r| r.value()).filter(|v| v.is_finite()) else {
                continue;
            };
            let start = share::service_start(c, profile.demand_percent);
            let now_share = share::service_now(c, Some(current), start);
            let watch = self.state.watches.entry(service.id().0).or_default();
            let why = |to: u8| {
                format!(
                    "gacer: service {} p99 {p99:.0} ms {} {target:.0} ms: share {now_share} → {to} %",
                    named(&service),
                    if p99 > target { ">" } else { "<" }
                )
            };
            match watch.check(c, now_share, start, p99, target) {
                Verdict::Keep => {}
                Verdict::Raise(to) | Verdict::Relax(to) => {
                    planned.insert(service.id(), (to, why(to)));
                }
                Verdict::Protect => {
                    let last = self.state.moved_s.get(&trainer.id().0);
                    if last.is_some_and(|t| now - t < c.min_move_interval_s) {
                        debug!("gacer: {} still misses its target; {} moved too recently", service.id(), trainer.id());
                        continue;
                    }
                    *watch = Watch::default();
                    let why = format!(
                        "gacer: service {} p99 {p99:.0} ms > {target:.0} ms, {} in a row at its maximum share \
                         {now_share} %: its co-located trainer goes back to the queue and never rejoins it",
                        named(&service),
                        Config::count(c.protect_after)
                    );
                    info!("{why}; preempting {}", named(&trainer));
                    d.push(Action::preempt(trainer.id()).because(why));
                    preempted.push((trainer, service));
                }
            }
        }
        self.state.watches.retain(|h, _| checked.contains(h));
        for (trainer, service) in preempted {
            self.state.bans.insert((trainer.id().0, service.id().0));
            self.state.moved_s.insert(trainer.id().0, now);
            book.release(&trainer);
            free.release(&trainer);
        }
    }

    /// Learn what each regulated pair of trainers gets from its GPU, and part a pair that gets
    /// less than `min-pair-gain`: the one that arrived later goes back to the queue (at most
    /// once per `min-move-interval-s`), and the two models are not paired again.
    fn part_poor_pairs<'a>(
        &mut self,
        s: &Snapshot<'a>,
        book: &mut Book<'a>,
        free: &mut sched::FreeGpus,
        d: &mut Decision,
    ) {
        let c = &self.config;
        let now = s.time().0;
        let readings = self.state.pairs.learn(book.entries(), &self.state.profiles, c.ewma_weight);
        for r in readings {
            let models: Vec<&str> = r.jobs.iter().map(Job::model).collect();
            if !self.state.pairs.poor(&models, c.min_pair_gain, Config::count(c.protect_after)) {
                continue;
            }
            let Some(&later) =
                r.jobs.iter().max_by(|x, y| x.arrival().0.total_cmp(&y.arrival().0).then(x.id().cmp(&y.id())))
            else {
                continue;
            };
            if self.state.moved_s.get(&later.id().0).is_some_and(|t| now - t < c.min_move_interval_s) {
                continue;
            }
            let jobs: Vec<String> = r.jobs.iter().map(|j| format!("{} ({})", named(j), j.model())).collect();
            let why = format!(
                "gacer: {} get {:.2} of {} together, less than {:.2}: {} goes back to the queue and these models no \
                 longer share a GPU",
                jobs.join(" and "),
                r.gain,
                gpu_name(s, r.slot),
                c.min_pair_gain,
                named(&later)
            );
            info!("{why}");
            d.push(Action::preempt(later.id()).because(why));
            self.state.moved_s.insert(later.id().0, now);
            book.release(&later);
            free.release(&later);
        }
    }

    /// With a GPU still free after placement and no job waiting for GPUs, move one trainer off the
    /// GPU shared by the most: the one that arrived last, at most once per
    /// `min-move-interval-s`. It goes back to the queue and takes the free GPU on the next call.
    fn spread<'a>(&mut self, s: &Snapshot<'a>, book: &mut Book<'a>, free: &mut sched::FreeGpus, d: &mut Decision) {
        let now = s.time().0;
        let Some(idle) = book.entries().iter().find(|e| e.holders.is_empty() && !e.vacated).map(|e| e.slot) else {
            return;
        };
        let placed: BTreeSet<JobId> =
            book.entries().iter().flat_map(|e| &e.holders).filter(|j| j.is_queued()).map(|j| j.id()).collect();
        if s.queue().any(|j| j.gpus_asked() > 0 && !placed.contains(&j.id())) {
            return; // a job that waits for GPUs (several, say) may need it
        }
        let movable = |j: &Job| {
            j.kind() == JobKind::Training
                && !j.is_queued()
                && j.gpus_asked() == 1
                && self.state.moved_s.get(&j.id().0).is_none_or(|t| now - t >= self.config.min_move_interval_s)
        };
        let crowded = book
            .entries()
            .iter()
            .filter(|e| {
                e.holders.len() > 1 && e.holders.iter().all(|j| j.kind() == JobKind::Training && !j.is_queued())
            })
            .max_by_key(|e| e.holders.len());
        let Some(entry) = crowded else { return };
        let latest = entry
            .holders
            .iter()
            .filter(|j| movable(j))
            .max_by(|x, y| x.arrival().0.total_cmp(&y.arrival().0).then(x.id().cmp(&y.id())));
        let Some(&job) = latest else { return };
        let why = format!(
            "gacer: {} is free and nothing waits for it: {} leaves the {} on {} to run alone",
            gpu_name(s, idle),
            named(&job),
            entry.holders.len(),
            gpu_name(s, entry.slot)
        );
        info!("{why}");
        d.push(Action::preempt(job.id()).because(why));
        self.state.moved_s.insert(job.id().0, now);
        book.release(&job);
        free.release(&job);
    }

    /// Place the queued jobs, in arrival order; see the crate's docs, step 4.
    fn place<'a>(&self, s: &Snapshot<'a>, book: &mut Book<'a>, free: &mut sched::FreeGpus, d: &mut Decision) {
        let mut queue: Vec<Job<'a>> = s.queue().collect();
        queue.sort_by(|a, b| a.arrival().0.total_cmp(&b.arrival().0).then(a.id().cmp(&b.id())));
        for job in queue {
            let asked = job.gpus_asked();
            if asked == 0 {
                if let Some(p) = free.fit_job(&job) {
                    d.push(p.action(job.id()).because("gacer: CPU job: the node with the fewest jobs per core"));
                }
                continue;
            }
            if asked > 1 {
                if let Some(p) = free.fit_job(&job) {
                    let gpus: Vec<GpuSlot> = p.gpus().collect();
                    book.hold(&gpus, job);
                    let why = format!("gacer: {asked} free GPUs by first fit; a multi-GPU job never shares");
                    d.push(p.action(job.id()).because(why));
                }
                continue;
            }
            let profile = self.state.profiles.trusted(job.model(), self.samples());
            if let Some(p) = free.fit(1, 1) {
                let gpus: Vec<GpuSlot> = p.gpus().collect();
                book.hold(&gpus, job);
                let why = match profile {
                    Some(_) => format!("gacer: a free GPU, {}, alone", gpu_name(s, gpus[0])),
                    None => format!(
                        "gacer: model {} not profiled yet: alone on free GPU {} to learn it",
                        job.model(),
                        gpu_name(s, gpus[0])
                    ),
                };
                d.push(p.action(job.id()).because(why));
                continue;
            }
            let Some(profile) = profile else { continue };
            let known = (&self.state.profiles, &self.state.pairs);
            let Some(partner) = book.partner_for(&job, profile, known, &self.config, &self.state.bans) else {
                continue;
            };
            let others: Vec<String> = partner.holders.iter().map(named).collect();
            let why = format!(
                "gacer: co-located with {} on {}: demands {:.0} % + {:.0} % ≤ {:.0} %, memory {:.1} + {:.1} GiB ≤ {:.1} GiB",
                others.join(" and "),
                gpu_name(s, partner.slot),
                profile.demand_percent,
                partner.demand,
                self.config.pack_limit_percent,
                gib(profile.memory()),
                gib(partner.memory),
                self.config.memory_fraction * gib(partner.memory_total),
            );
            book.hold(&[partner.slot], job);
            d.push(Action::place_on(job.id(), &[(partner.slot.node, vec![partner.slot.index])], true).because(why));
        }
    }

    /// Set the shares the plan asks for; see the crate's docs, step 5.
    fn share(&self, s: &Snapshot, book: &Book, planned: &Planned, d: &mut Decision) {
        let c = &self.config;
        let mut done = BTreeSet::new();
        let mut set = |d: &mut Decision, job: &Job, gpu: u32, percent: u8, why: String| {
            if job.gpu_share() != Some(percent) && done.insert(job.id()) {
                d.push(Action::set_gpu_share(job.id(), gpu, percent).because(why));
            }
        };
        for entry in book.entries() {
            if entry.holders.iter().any(Job::is_queued) {
                continue;
            }
            let gpu = entry.slot.index;
            let place = gpu_name(s, entry.slot);
            if let [job] = entry.holders.as_slice() {
                if job.gpu_share().is_some() {
                    set(d, job, gpu, 100, format!("gacer: alone on {place}: the whole GPU"));
                }
                continue;
            }
            let profile = |j: &Job| self.state.profiles.get(j.model()).map(|p| p.demand_percent);
            if let Some((service, trainer)) = service_pair(&entry.holders) {
                let (Some(ds), Some(dt)) = (profile(&service), profile(&trainer)) else { continue };
                let start = share::service_start(c, ds);
                let (to, why) = planned.get(&service.id()).cloned().unwrap_or_else(|| {
                    let to = share::service_now(c, service.gpu_share(), start);
                    let why = format!(
                        "gacer: service beside {} on {place}: demand {ds:.0} % + {:.0} % margin → {to} %",
                        named(&trainer),
                        c.service_margin_percent
                    );
                    (to, why)
                });
                let rest = share::trainer_beside(c, to);
                let trainer_why = format!(
                    "gacer: trainer ({dt:.0} % demand) beside service {} on {place}, which holds {to} %: the rest, {rest} %",
                    named(&service)
                );
                set(d, &service, gpu, to, why);
                set(d, &trainer, gpu, rest, trainer_why);
                continue;
            }
            let holders = &entry.holders;
            if holders.iter().any(|j| j.gpus_asked() != 1 || j.kind() != JobKind::Training) {
                continue;
            }
            let Some(demands) = holders.iter().map(profile).collect::<Option<Vec<f64>>>() else { continue };
            let shares = share::trainers(c, &demands);
            let listed = demands.iter().map(|d| format!("{d:.0} %")).collect::<Vec<_>>().join(" + ");
            let rule = if demands.iter().sum::<f64>() <= 100.0 {
                format!("demands {listed} ≤ 100 %: each its demand + {:.0} %", c.margin_percent)
            } else {
                format!("demands {listed} > 100 %: the GPU split by demand")
            };
            for (k, job) in holders.iter().enumerate() {
                let beside: Vec<String> = holders.iter().filter(|o| o.id() != job.id()).map(named).collect();
                let why = format!("gacer: beside {} on {place}, {rule}: {} %", beside.join(" and "), shares[k]);
                set(d, job, gpu, shares[k], why);
            }
        }
    }
}

/// The (service, trainer) of a GPU held by exactly one single-GPU service and one single-GPU
/// trainer.
fn service_pair<'a>(holders: &[Job<'a>]) -> Option<(Job<'a>, Job<'a>)> {
    let &[a, b] = holders else { return None };
    if a.gpus_asked() != 1 || b.gpus_asked() != 1 {
        return None;
    }
    match (a.kind(), b.kind()) {
        (JobKind::Inference, JobKind::Training) => Some((a, b)),
        (JobKind::Training, JobKind::Inference) => Some((b, a)),
        _ => None,
    }
}

impl Policy for Gacer {
    type Config = Config;

    const PLACES: bool = true;

    fn new(config: Config) -> Result<Self, PolicyError> {
        config.check()?;
        Ok(Gacer { config, state: State::default() })
    }

    fn decide(&mut self, s: &Snapshot) -> Result<Decision, PolicyError> {
        let mut d = Decision::new();
        self.forget_gone(s);
        self.state.profiles.learn(s, self.config.ewma_weight, self.samples());
        let mut book = Book::of(s);
        let mut free = sched::FreeGpus::of(s);
        let mut planned = Planned::new();
        if self.config.regulate {
            self.protect(s, &mut book, &mut free, &mut planned, &mut d);
            self.part_poor_pairs(s, &mut book, &mut free, &mut d);
        }
        self.place(s, &mut book, &mut free, &mut d);
        self.spread(s, &mut book, &mut free, &mut d);
        if self.config.regulate {
            self.share(s, &book, &planned, &mut d);
        }
        Ok(d)
    }

    keep_state!(state);
}

export_policy!(Gacer);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rig::{Rig, preempted, reason_of, shared, shares};
    use wasmsched_sdk::testing::{Harness, TestWorld, churn, job, placed};

    /// A single-GPU trainer of `model` running on GPU `gpu` of node 0.
    fn trainer_on(w: &mut TestWorld, name: &str, model: &str, gpu: u32) -> JobId {
        let id = w.queue_job(job(name, model).gpus(1));
        w.start(id, NodeId(0), &[gpu]);
        id
    }

    /// A single-GPU service of `model` with a p99 target of `target_ms`.
    fn service(name: &str, model: &str, target_ms: f64) -> wasmsched_sdk::testing::JobBuilder {
        job(name, model).inference().metric("latency-ms", Direction::LowerIsBetter).qoe_target(target_ms).gpus(1)
    }

    /// A service (bert, 40 %) and a trainer (cifar10, 45 %) sharing node 0's only GPU, their
    /// starting shares (60 and 40) in force.
    fn service_beside_trainer(config: &str) -> (Rig, JobId, JobId) {
        let mut w = TestWorld::gpu_cluster(&[1]);
        let s = w.queue_job(service("s", "bert", 100.0));
        w.start(s, NodeId(0), &[0]);
        let t = trainer_on(&mut w, "t", "cifar10", 0);
        let mut r = Rig::new(config, &[("bert", 40.0, 4), ("cifar10", 45.0, 4)], w);
        let d = r.tick(0.0);
        if r.policy().config.regulate {
            assert_eq!(shares(&d), [(s, 60), (t, 40)]);
        }
        (r, s, t)
    }

    /// The service reports `p99` and the policy is called 30 s later.
    fn window(r: &mut Rig, s: JobId, epoch: u32, p99: f64) -> Decision {
        r.world.report(s, epoch, &[p99]);
        r.tick(30.0)
    }

    #[test]
    fn a_model_alone_on_its_gpu_is_profiled_from_its_use_and_memory() {
        let mut w = TestWorld::gpu_cluster(&[2]);
        let a = w.queue_job(job("a", "bert").gpus(1));
        let mut r = Rig::new("{}", &[], w);
        let d = r.tick(0.0);
        assert_eq!(placed(&d), [(a, vec![(0, vec![0])])]);
        for (used, memory) in [(40.0, 3), (60.0, 5), (50.0, 4)] {
            assert!(r.policy().profile("bert").is_none_or(|p| p.samples < 3));
            r.used(a, used);
            r.world.set_gpu_use(NodeId(0), 0, used, Bytes::gib(memory));
            r.tick(30.0);
        }
        let p = r.policy().profile("bert").unwrap();
        // 40, then 0.3 × 60 + 0.7 × 40 = 46, then 0.3 × 50 + 0.7 × 46 = 47.2.
        assert!((p.demand_percent - 47.2).abs() < 1e-6, "{p:?}");
        assert_eq!((p.memory(), p.samples), (Bytes::gib(5), 3));
    }

    #[test]
    fn a_job_sharing_its_gpu_or_capped_by_its_share_teaches_nothing() {
        let mut w = TestWorld::gpu_cluster(&[2]);
        let a = trainer_on(&mut w, "a", "cifar10", 0);
        let b = trainer_on(&mut w, "b", "ncf", 0);
        let c = trainer_on(&mut w, "c", "imagenet", 1);
        let mut r = Rig::new("{}", &[], w);
        for id in [a, b, c] {
            r.used(id, 30.0);
        }
        r.gpu.get_mut(&c).unwrap().0 = 50;
        r.tick(30.0);
        for model in ["cifar10", "ncf", "imagenet"] {
            assert_eq!(r.policy().profile(model), None, "{model}");
        }
    }

    #[test]
    fn an_unprofiled_job_waits_for_a_free_gpu_rather_than_share_one() {
        let mut w = TestWorld::gpu_cluster(&[2]);
        trainer_on(&mut w, "a", "cifar10", 0);
        let b = trainer_on(&mut w, "b", "ncf", 1);
        let u = w.queue_job(job("u", "yolov3").gpus(1));
        let mut r = Rig::new("{}", &[("cifar10", 20.0, 2), ("ncf", 20.0, 2)], w);
        assert!(r.tick(30.0).is_empty(), "no GPU is free, and yolov3 is unknown");
        r.world.remove_job(b);
        let d = r.tick(30.0);
        assert_eq!(placed(&d), [(u, vec![(0, vec![1])])]);
        assert!(!shared(&d, u));
        assert!(reason_of(&d, u).contains("model yolov3 not profiled yet: alone on free GPU n0/gpu1"), "{d:?}");
    }

    #[test]
    fn a_free_gpu_goes_to_a_profiled_job_alone_before_any_sharing() {
        let mut w = TestWorld::gpu_cluster(&[2]);
        trainer_on(&mut w, "a", "cifar10", 0);
        let b = w.queue_job(job("b", "ncf").gpus(1));
        let mut r = Rig::new("{}", &[("cifar10", 20.0, 2), ("ncf", 20.0, 2)], w);
        let d = r.tick(30.0);
        assert_eq!(placed(&d), [(b, vec![(0, vec![1])])]);
        assert!(!shared(&d, b));
    }

    #[test]
    fn two_complementary_jobs_share_a_gpu_when_none_is_free() {
        let mut w = TestWorld::gpu_cluster(&[1]);
        let a = trainer_on(&mut w, "a", "cifar10", 0);
        let b = w.queue_job(job("b", "ncf").gpus(1));
        let mut r = Rig::new("{}", &[("cifar10", 45.0, 4), ("ncf", 60.0, 6)], w);
        let d = r.tick(30.0);
        assert_eq!(placed(&d), [(b, vec![(0, vec![0])])]);
        assert!(shared(&d, b));
        let why = reason_of(&d, b);
        assert!(why.contains(&format!("co-located with {a} (a) on n0/gpu0: demands 60 % + 45 % ≤ 130 %")), "{why}");
        assert!(why.contains("memory 6.0 + 4.0 GiB ≤ 14.4 GiB"), "{why}");
        assert!(shares(&d).is_empty(), "b gets its share once it runs");
        assert_eq!(shares(&r.tick(30.0)), [(a, 43), (b, 57)], "45 + 60 > 100: split by demand");
    }

    /// Two regulated trainers (cifar10 then ncf) on the one GPU, using `used` percent each.
    fn regulated_pair(used: [f32; 2]) -> (Rig, JobId, JobId) {
        let mut w = TestWorld::gpu_cluster(&[1]);
        let a = trainer_on(&mut w, "a", "cifar10", 0);
        let b = trainer_on(&mut w, "b", "ncf", 0);
        let mut r = Rig::new("{}", &[("cifar10", 45.0, 2), ("ncf", 40.0, 2)], w);
        assert_eq!(shares(&r.tick(30.0)), [(a, 55), (b, 50)]);
        r.used(a, used[0]);
        r.used(b, used[1]);
        (r, a, b)
    }

    #[test]
    fn a_pair_that_gets_less_than_one_gpu_together_is_parted_and_never_paired_again() {
        // Each runs at a fifth of its speed alone: 0.2 + 0.2 of a GPU together.
        let (mut r, a, b) = regulated_pair([9.0, 8.0]);
        assert!(r.tick(30.0).is_empty() && r.tick(30.0).is_empty(), "seen twice: not yet");
        let d = r.tick(30.0);
        assert_eq!(preempted(&d), [b], "the one that arrived later");
        assert_eq!(shares(&d), [(a, 100)], "a gets the whole GPU back at once");
        let why = reason_of(&d, b);
        assert!(why.contains("get 0.40 of n0/gpu0 together, less than 1.00"), "{why}");
        let pair = r.policy().set(&["ncf", "cifar10"]).copied().unwrap();
        assert!(pair.samples == 3 && (pair.gain - 0.4).abs() < 1e-9, "{pair:?}");
        // b waits rather than rejoin a.
        let d = r.tick(30.0);
        assert!(r.queued(b) && d.is_empty(), "{d:?}");
    }

    #[test]
    fn a_pair_that_gains_stays_and_is_preferred() {
        // 0.89 + 0.9 of a GPU together.
        let (mut r, _, _) = regulated_pair([40.0, 36.0]);
        for _ in 0..5 {
            assert!(preempted(&r.tick(30.0)).is_empty());
        }
        let gain = r.policy().set(&["cifar10", "ncf"]).unwrap().gain;
        assert!((gain - (40.0 / 45.0 + 36.0 / 40.0)).abs() < 1e-6, "{gain}");
        // Unregulated, nothing is learnt or parted.
        let mut w = TestWorld::gpu_cluster(&[1]);
        trainer_on(&mut w, "a", "cifar10", 0);
        trainer_on(&mut w, "b", "ncf", 0);
        let mut r = Rig::new(r#"{"regulate": false}"#, &[("cifar10", 45.0, 2), ("ncf", 40.0, 2)], w);
        for _ in 0..5 {
            assert!(r.tick(30.0).is_empty());
        }
        assert!(r.policy().set(&["cifar10", "ncf"]).is_none());
    }

    #[test]
    fn a_heavy_pair_does_not_share() {
        let mut w = TestWorld::gpu_cluster(&[1]);
        trainer_on(&mut w, "a", "imagenet", 0);
        let b = w.queue_job(job("b", "bert").gpus(1));
        let mut r = Rig::new("{}", &[("imagenet", 80.0, 4), ("bert", 70.0, 4)], w);
        assert!(r.tick(30.0).is_empty(), "80 % + 70 % > 130 %");
        assert!(r.queued(b));
    }

    #[test]
    fn a_pair_whose_memory_does_not_fit_is_not_packed() {
        for (config, packs) in [("{}", false), (r#"{"memory-fraction": 1.0}"#, true)] {
            let mut w = TestWorld::gpu_cluster(&[1]);
            trainer_on(&mut w, "a", "cifar10", 0);
            let b = w.queue_job(job("b", "ncf").gpus(1));
            // 8 + 7 GiB of a 16 GiB GPU: over 90 % of it, within all of it.
            let mut r = Rig::new(config, &[("cifar10", 30.0, 8), ("ncf", 30.0, 7)], w);
            assert_eq!(shared(&r.tick(30.0), b), packs, "{config}");
        }
    }

    #[test]
    fn a_job_joins_the_gpu_with_the_fewest_holders_then_the_lowest_demand_and_never_service_with_service() {
        let mut w = TestWorld::gpu_cluster(&[3]);
        trainer_on(&mut w, "a", "imagenet", 0);
        trainer_on(&mut w, "b", "cifar10", 1);
        let s = w.queue_job(service("s", "bert", 100.0));
        w.start(s, NodeId(0), &[2]);
        let c = w.queue_job(job("c", "ncf").gpus(1));
        let d = w.queue_job(job("d", "ncf").gpus(1));
        let e = w.queue_job(service("e", "bert", 100.0));
        let f = w.queue_job(service("f", "bert", 100.0));
        let profiles = [("imagenet", 60.0, 2), ("cifar10", 30.0, 2), ("bert", 40.0, 2), ("ncf", 50.0, 2)];
        let mut r = Rig::new("{}", &profiles, w);
        let got = placed(&r.tick(30.0));
        // c: 80 % beside b; d: 90 % beside the service s (b's GPU holds two now); e, a service:
        // beside the trainer a; f: every GPU holds two.
        assert_eq!(got, [(c, vec![(0, vec![1])]), (d, vec![(0, vec![2])]), (e, vec![(0, vec![0])])]);
        assert!(r.queued(f));

        let mut w = TestWorld::gpu_cluster(&[1]);
        let s = w.queue_job(service("s", "bert", 100.0));
        w.start(s, NodeId(0), &[0]);
        let g = w.queue_job(service("g", "bert", 100.0));
        let mut r = Rig::new("{}", &[("bert", 20.0, 2)], w);
        assert!(placed(&r.tick(30.0)).is_empty(), "two services never share");
        assert!(r.queued(g));
    }

    #[test]
    fn a_third_light_trainer_joins_two_up_to_max_per_gpu_and_the_three_get_shares() {
        let world = || {
            let mut w = TestWorld::gpu_cluster(&[1]);
            let a = trainer_on(&mut w, "a", "cifar10", 0);
            let b = trainer_on(&mut w, "b", "deepspeech2", 0);
            let c = w.queue_job(job("c", "ncf").gpus(1));
            (w, [a, b, c])
        };
        let profiles = [("cifar10", 20.0, 3), ("deepspeech2", 15.0, 2), ("ncf", 25.0, 1)];
        let (w, [a, b, c]) = world();
        let mut r = Rig::new("{}", &profiles, w);
        let d = r.tick(30.0);
        assert_eq!(placed(&d), [(c, vec![(0, vec![0])])]);
        let why = reason_of(&d, c);
        assert!(
            why.contains(&format!("co-located with {a} (a) and {b} (b)")) && why.contains("25 % + 35 % ≤ 130 %"),
            "{why}"
        );
        assert_eq!(shares(&r.tick(30.0)), [(a, 30), (b, 25), (c, 35)], "20 + 15 + 25 ≤ 100: each its demand + 10");
        let (w, [.., c]) = world();
        let mut r = Rig::new(r#"{"max-per-gpu": 2}"#, &profiles, w);
        assert!(placed(&r.tick(30.0)).is_empty() && r.queued(c), "two at most");
    }

    #[test]
    fn a_gpu_left_free_with_nothing_waiting_takes_the_last_arrival_off_the_most_crowded() {
        let mut w = TestWorld::gpu_cluster(&[2]);
        let a = trainer_on(&mut w, "a", "cifar10", 0);
        let b = trainer_on(&mut w, "b", "deepspeech2", 0);
        let profiles = [("cifar10", 20.0, 3), ("deepspeech2", 15.0, 2)];
        let mut r = Rig::new("{}", &profiles, w);
        let d = r.tick(30.0);
        assert_eq!(preempted(&d), [b]);
        assert!(reason_of(&d, b).contains("n0/gpu1 is free and nothing waits for it"), "{d:?}");
        assert_eq!(placed(&r.tick(30.0)), [(b, vec![(0, vec![1])])], "alone on the free GPU");
        assert!(preempted(&r.tick(30.0)).is_empty() && !r.queued(a));
    }

    #[test]
    fn multi_gpu_jobs_take_free_gpus_by_first_fit_and_cpu_jobs_a_node() {
        let mut w = TestWorld::gpu_cluster(&[2, 2]);
        trainer_on(&mut w, "a", "cifar10", 0);
        let m = w.queue_job(job("m", "imagenet").gpus(2));
        let big = w.queue_job(job("big", "imagenet").gpus(2));
        let cpu = w.queue_job(job("cpu", "ncf"));
        let mut r = Rig::new("{}", &[("cifar10", 10.0, 1), ("imagenet", 10.0, 1)], w);
        let d = r.tick(30.0);
        assert_eq!(placed(&d), [(m, vec![(1, vec![0, 1])]), (cpu, vec![(0, vec![])])]);
        assert!(!shared(&d, m));
        assert!(r.queued(big), "a multi-GPU job never shares, however light");
    }

    #[test]
    fn two_light_trainers_get_their_demand_plus_the_margin_and_nothing_more_while_nothing_changes() {
        let mut w = TestWorld::gpu_cluster(&[1]);
        let a = trainer_on(&mut w, "a", "cifar10", 0);
        let b = trainer_on(&mut w, "b", "ncf", 0);
        let mut r = Rig::new("{}", &[("cifar10", 45.0, 2), ("ncf", 40.0, 2)], w);
        let d = r.tick(30.0);
        assert_eq!(shares(&d), [(a, 55), (b, 50)]);
        assert!(reason_of(&d, a).contains("demands 45 % + 40 % ≤ 100 %: each its demand + 10 %: 55 %"), "{d:?}");
        for _ in 0..3 {
            assert!(r.tick(30.0).is_empty(), "no churn");
        }
    }

    #[test]
    fn two_heavy_trainers_split_the_gpu_in_proportion_to_their_demands() {
        let mut w = TestWorld::gpu_cluster(&[1]);
        let a = trainer_on(&mut w, "a", "imagenet", 0);
        let b = trainer_on(&mut w, "b", "ncf", 0);
        let mut r = Rig::new("{}", &[("imagenet", 70.0, 2), ("ncf", 55.0, 2)], w);
        let d = r.tick(30.0);
        assert_eq!(shares(&d), [(a, 56), (b, 44)]);
        assert!(reason_of(&d, b).contains("70 % + 55 % > 100 %: the GPU split by demand"), "{d:?}");
        assert!(r.tick(30.0).is_empty());
    }

    #[test]
    fn a_service_beside_a_trainer_starts_at_its_demand_plus_margin_and_the_trainer_gets_the_rest() {
        let (mut r, s, t) = service_beside_trainer("{}");
        assert_eq!((r.share(s), r.share(t)), (Some(60), Some(40)));
        assert!(r.tick(30.0).is_empty(), "no churn");
        assert!(window(&mut r, s, 1, 90.0).is_empty(), "within its target, not far within it");
    }

    #[test]
    fn a_job_left_alone_gets_the_whole_gpu_once() {
        let (mut r, s, t) = service_beside_trainer("{}");
        r.world.remove_job(t);
        let d = r.tick(30.0);
        assert_eq!(shares(&d), [(s, 100)]);
        assert!(reason_of(&d, s).contains("alone on n0/gpu0"));
        assert!(r.tick(30.0).is_empty());
    }

    #[test]
    fn a_service_missing_its_target_gains_share_and_the_trainer_loses_as_much() {
        let (mut r, s, t) = service_beside_trainer("{}");
        let d = window(&mut r, s, 1, 130.0);
        assert_eq!(shares(&d), [(s, 70), (t, 30)]);
        let why = reason_of(&d, s);
        assert!(why.contains("p99 130 ms > 100 ms: share 60 → 70 %"), "{why}");
        assert_eq!(shares(&window(&mut r, s, 2, 120.0)), [(s, 80), (t, 20)]);
        assert!(r.tick(30.0).is_empty(), "no new record, no check");
    }

    #[test]
    fn a_service_far_within_its_target_gives_share_back_slowly_but_never_below_its_start() {
        let (mut r, s, t) = service_beside_trainer("{}");
        window(&mut r, s, 1, 130.0);
        assert_eq!((r.share(s), r.share(t)), (Some(70), Some(30)));
        let mut epoch = 2;
        let mut next = |r: &mut Rig| {
            epoch += 1;
            shares(&window(r, s, epoch, 30.0))
        };
        assert!(next(&mut r).is_empty() && next(&mut r).is_empty());
        assert_eq!(next(&mut r), [(s, 65), (t, 35)]);
        for _ in 0..2 {
            assert!(next(&mut r).is_empty());
        }
        assert_eq!(next(&mut r), [(s, 60), (t, 40)]);
        for _ in 0..6 {
            assert!(next(&mut r).is_empty(), "60 % is its start");
        }
    }

    #[test]
    fn at_the_maximum_the_trainer_is_preempted_and_never_placed_beside_that_service_again() {
        let (mut r, s, t) = service_beside_trainer("{}");
        for (epoch, to) in [(1, 70), (2, 80), (3, 90)] {
            assert_eq!(shares(&window(&mut r, s, epoch, 150.0)), [(s, to), (t, 100 - to)]);
        }
        for epoch in 4..6 {
            assert!(window(&mut r, s, epoch, 150.0).is_empty(), "miss {} at the maximum", epoch - 3);
        }
        let d = window(&mut r, s, 6, 150.0);
        assert_eq!(preempted(&d), [t]);
        assert_eq!(shares(&d), [(s, 100)], "the service has its GPU to itself");
        assert!(reason_of(&d, t).contains("p99 150 ms > 100 ms, 3 in a row at its maximum share 90 %"), "{d:?}");
        assert!(r.policy().keeps_apart(t, s));
        let u = r.world.queue_job(job("u", "cifar10").gpus(1));
        let d = r.tick(30.0);
        assert!(r.queued(t), "t may not go back beside s");
        assert_eq!(placed(&d), [(u, vec![(0, vec![0])])], "another trainer may");
    }

    #[test]
    fn a_trainer_is_preempted_at_most_once_per_move_interval() {
        let mut w = TestWorld::gpu_cluster(&[2]);
        let s1 = w.queue_job(service("s1", "bert", 100.0));
        w.start(s1, NodeId(0), &[0]);
        let t = trainer_on(&mut w, "t", "cifar10", 0);
        let s2 = w.queue_job(service("s2", "bert", 100.0));
        w.start(s2, NodeId(0), &[1]);
        let mut r = Rig::new("{}", &[("bert", 40.0, 4), ("cifar10", 45.0, 4)], w);
        r.tick(0.0);
        // Three raises and three misses at the maximum: t leaves s1 and joins s2.
        let mut epoch = 0;
        let mut miss = |r: &mut Rig, s: JobId| {
            epoch += 1;
            window(r, s, epoch, 150.0)
        };
        for _ in 0..5 {
            miss(&mut r, s1);
        }
        assert_eq!(preempted(&miss(&mut r, s1)), [t]);
        let d = r.tick(30.0);
        assert_eq!(placed(&d), [(t, vec![(0, vec![1])])]);
        r.tick(30.0);
        for _ in 0..8 {
            assert!(preempted(&miss(&mut r, s2)).is_empty(), "t moved less than 600 s ago");
        }
        r.world.advance(Seconds(300.0));
        assert_eq!(preempted(&miss(&mut r, s2)), [t]);
    }

    #[test]
    fn without_regulation_it_places_the_same_but_sets_no_shares_and_protects_nothing() {
        for regulate in [true, false] {
            let config = format!(r#"{{"regulate": {regulate}}}"#);
            let mut w = TestWorld::gpu_cluster(&[1]);
            trainer_on(&mut w, "a", "cifar10", 0);
            let b = w.queue_job(job("b", "ncf").gpus(1));
            let mut r = Rig::new(&config, &[("cifar10", 45.0, 4), ("ncf", 60.0, 6)], w);
            let d = r.tick(30.0);
            assert_eq!(placed(&d), [(b, vec![(0, vec![0])])], "{config}");
            assert_eq!(shares(&r.tick(30.0)).is_empty(), !regulate, "{config}");
        }
        let (mut r, s, t) = service_beside_trainer(r#"{"regulate": false}"#);
        for epoch in 1..12 {
            assert!(window(&mut r, s, epoch, 500.0).is_empty());
        }
        assert!(!r.queued(t) && r.share(s).is_none());
    }

    #[test]
    fn a_bad_config_is_refused_with_its_key_named() {
        let refusal = |c: &str| match Harness::<Gacer>::from_config(c, TestWorld::new()) {
            Err(PolicyError::InvalidConfig(message)) => message,
            Err(other) => panic!("{c}: {other:?}"),
            Ok(_) => panic!("{c} was accepted"),
        };
        assert!(refusal(r#"{"alpha": 1}"#).contains("unknown field `alpha`"));
        assert!(refusal(r#"{"pack-limit-percent": 300}"#).contains("pack-limit-percent must be a whole number"));
        assert!(refusal(r#"{"relax-below": 2}"#).contains("relax-below"));
        assert!(refusal(r#"{"protect-after": 2.5}"#).contains("protect-after"));
        assert!(refusal(r#"{"regulate": "yes"}"#).contains("expected a boolean"));
        let full = r#"{"regulate": false, "pack-limit-percent": 120, "memory-fraction": 0.8, "margin-percent": 5,
            "service-margin-percent": 15, "min-share-percent": 5, "max-service-percent": 95, "step-percent": 5,
            "protect-after": 4, "relax-below": 0, "relax-after": 2, "relax-step-percent": 2,
            "min-move-interval-s": 0, "profile-samples": 5, "ewma-weight": 1}"#;
        assert!(Harness::<Gacer>::from_config(full, TestWorld::new()).is_ok());
    }

    #[test]
    fn profiles_and_bans_survive_a_swap() {
        let (mut r, s, t) = service_beside_trainer(r#"{"protect-after": 1}"#);
        let last = (1..=4).map(|epoch| window(&mut r, s, epoch, 150.0)).last().unwrap();
        assert_eq!(preempted(&last), [t]);
        let saved = r.runner.save_state();
        let mut next = Gacer::new(Config::default()).unwrap();
        next.restore_state(&saved).unwrap();
        assert!(next.keeps_apart(t, s));
        assert_eq!(next.profile("cifar10").map(|p| p.demand_percent), Some(45.0));
    }

    #[test]
    fn every_decision_on_a_busy_world_passes_the_hosts_rules() {
        let mut w = TestWorld::gpu_cluster(&[4, 4, 2, 8]);
        w.node("cpu", Millicores(16000), Bytes::gib(64));
        let mut h = Harness::<Gacer>::from_config("{}", w).unwrap();
        let mut placements = 0;
        churn(&mut h, 300, 0x2545_f491_4f6c_dd1d, 12, |d: &Decision| placements += placed(d).len());
        assert!(placements > 100, "{placements} placed");
    }
}
