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
//!   trusted, and the weight of the newest one in its demand (and in a set's gain);
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
    /// Per set of models (two or more): what they get from a GPU together.
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
    let node = s.node(slot.node).map_or_else(|| format!("node#{}", slot.node), |n| n.name().to_owned());
    format!("{node}/gpu{}", slot.index)
}

/// A job by its handle and name, for reasons.
fn named(job: &Job) -> String {
    format!("job#{} ({})", job.id(), job.name())
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
        let mut live: Vec<u32> = s.jobs().chain(s.queue()).map(|j| j.id().0).collect();
        live.sort_unstable();
        let is_live = |h: &u32| live.binary_search(h).is_ok();
        self.state.watches.retain(|h, _| is_live(h));
        self.state.bans.retain(|(t, v)| is_live(t) && is_live(v));
        self.state.moved_s.retain(|h, _| is_live(h));
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
                    if moved_lately(&self.state.moved_s, c, &trainer, now) {
                        debug!(
                            "gacer: job#{} still misses its target; job#{} moved too recently",
                            service.id(),
                            trainer.id()
                        );
                        continue;
                    }
                    *watch = Watch::default();
                    let why = format!(
                        "gacer: service {} p99 {p99:.0} ms > {target:.0} ms, {} in a row at its maximum share \
                         {now_share} %: its co-located trainer goes back to the queue and never rejoins it",
                        named(&service),
                        Config::count(c.protect_after)
                    );
                    preempted.push((trainer, service, why));
                }
            }
        }
        self.state.watches.retain(|h, _| checked.contains(h));
        for (trainer, service, why) in preempted {
            self.state.bans.insert((trainer.id().0, service.id().0));
            self.move_away(trainer, why, now, (book, free), d);
        }
    }

    /// Learn what each regulated set of trainers gets from its GPU, and part a set that gets
    /// less than `min-pair-gain`: the one that arrived last goes back to the queue (at most
    /// once per `min-move-interval-s`), and those models are not put together again.
    fn part_poor_sets<'a>(
        &mut self,
        s: &Snapshot<'a>,
        book: &mut Book<'a>,
        free: &mut sched::FreeGpus,
        d: &mut Decision,
    ) {
        let c = self.config.clone();
        let now = s.time().0;
        let readings = self.state.pairs.learn(book.entries(), &self.state.profiles, c.ewma_weight);
        for r in readings {
            let models: Vec<&str> = r.jobs.iter().map(Job::model).collect();
            if !self.state.pairs.poor(&models, c.min_pair_gain, Config::count(c.protect_after)) {
                continue;
            }
            let Some(later) = last_arrival(r.jobs.iter().copied()) else { continue };
            if moved_lately(&self.state.moved_s, &c, &later, now) {
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
            self.move_away(later, why, now, (book, free), d);
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
                && !moved_lately(&self.state.moved_s, &self.config, j, now)
        };
        let crowded = book
            .entries()
            .iter()
            .filter(|e| {
                e.holders.len() > 1 && e.holders.iter().all(|j| j.kind() == JobKind::Training && !j.is_queued())
            })
            .max_by_key(|e| e.holders.len());
        let Some(entry) = crowded else { return };
        let Some(job) = last_arrival(entry.holders.iter().copied().filter(|j| movable(j))) else { return };
        let why = format!(
            "gacer: {} is free and nothing waits for it: {} leaves the {} on {} to run alone",
            gpu_name(s, idle),
            named(&job),
            entry.holders.len(),
            gpu_name(s, entry.slot)
        );
        self.move_away(job, why, now, (book, free), d);
    }

    /// Send `job` back to the queue for `why`: it leaves its GPUs in the round's `book` and
    /// `free`, and is not moved again for `min-move-interval-s`.
    fn move_away<'a>(
        &mut self,
        job: Job<'a>,
        why: String,
        now: f64,
        (book, free): (&mut Book<'a>, &mut sched::FreeGpus),
        d: &mut Decision,
    ) {
        info!("{why}; preempting {}", named(&job));
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
            if entry.holders.is_empty() || entry.holders.iter().any(Job::is_queued) {
                continue;
            }
            let gpu = entry.slot.index;
            // Most GPUs hold one job that has the whole of it: no reason to write.
            if let [job] = entry.holders.as_slice() {
                if job.gpu_share().is_some_and(|p| p != 100) {
                    set(d, job, gpu, 100, format!("gacer: alone on {}: the whole GPU", gpu_name(s, entry.slot)));
                }
                continue;
            }
            let place = gpu_name(s, entry.slot);
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

/// Whether `job` was moved less than `min-move-interval-s` before `now`.
fn moved_lately(moved_s: &BTreeMap<u32, f64>, config: &Config, job: &Job, now: f64) -> bool {
    moved_s.get(&job.id().0).is_some_and(|t| now - t < config.min_move_interval_s)
}

/// The one of `jobs` that arrived last (the highest handle on a tie).
fn last_arrival<'a>(jobs: impl Iterator<Item = Job<'a>>) -> Option<Job<'a>> {
    jobs.max_by(|x, y| x.arrival().0.total_cmp(&y.arrival().0).then(x.id().cmp(&y.id())))
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
            self.part_poor_sets(s, &mut book, &mut free, &mut d);
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
mod tests;
