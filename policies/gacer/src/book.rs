//! The round's plan of who holds each GPU: built from the snapshot, changed as trainers are
//! preempted and queued jobs placed, and asked where a queued job may join one other job
//! ([`Book::partner_for`]). Free GPUs and first fit are the SDK's ([`sched::FreeGpus`]); this
//! book adds what they do not keep: which jobs hold a GPU, not only how many.
//!
//! The GPUs a job may join are kept in groups of those with the same holders' models and
//! kinds, in order, and the same memory: each GPU of a group gives the same answer (bans
//! aside), so [`Book::partner_for`] weighs each group once rather than each GPU.

use std::collections::{BTreeMap, BTreeSet};

use wasmsched_sdk::prelude::*;

use crate::config::Config;
use crate::pairs::Pairs;
use crate::profile::{Profile, Profiles};

/// One GPU and the jobs that hold it as the plan stands; a queued job among them is one placed
/// this round.
pub struct Entry<'a> {
    /// Where it is.
    pub slot: GpuSlot,
    /// Its memory.
    pub memory_total: Bytes,
    /// The jobs that hold it, running ones first in handle order, then those placed this round.
    pub holders: Vec<Job<'a>>,
    /// A trainer was preempted from it this round: nobody joins it before the next.
    pub vacated: bool,
}

/// Where `job` could join others on a GPU, and what they all add up to.
pub struct Partner<'a> {
    /// The GPU.
    pub slot: GpuSlot,
    /// The jobs that hold it.
    pub holders: Vec<Job<'a>>,
    /// The holders' demands, added up, percent of a GPU.
    pub demand: f64,
    /// The holders' memory, added up.
    pub memory: Bytes,
    /// The GPU's memory.
    pub memory_total: Bytes,
}

/// Every GPU of the cluster, node order and then GPU order, with its holders.
pub struct Book<'a> {
    entries: Vec<Entry<'a>>,
    /// Per node, the index of its first GPU in `entries`, and one past the last node's.
    first: Vec<usize>,
    /// The GPUs a job may join, grouped; made on the first [`Book::partner_for`].
    groups: Option<Groups<'a>>,
}

/// What every GPU of a group shares: its holders' models, each with whether it is a service,
/// in the order they hold it, and its memory.
type GroupKey<'a> = (Vec<(&'a str, bool)>, u64);

/// What a job of some model and kind makes of a group's GPUs: their rank (fewest holders,
/// then most gain, then least demand), and the holders' demand and memory added up.
#[derive(Clone, Copy)]
struct Fit {
    rank: (usize, f64, f64),
    demand: f64,
    memory: u64,
}

/// The GPUs another job may join (not vacated, held by one to `max-per-gpu` − 1 single-GPU
/// jobs), by group, and what each model and kind of job made of each group so far.
struct Groups<'a> {
    /// `max-per-gpu`, which decides which GPUs are in a group at all.
    most: usize,
    /// Per group, its key and its GPUs (indices into the entries), in book order.
    groups: Vec<(GroupKey<'a>, BTreeSet<usize>)>,
    by_key: BTreeMap<GroupKey<'a>, usize>,
    /// Per entry, its group.
    of_entry: Vec<Option<usize>>,
    /// Per model and whether a service: per group, once weighed, its fit if any.
    fits: BTreeMap<(&'a str, bool), Vec<Option<Option<Fit>>>>,
}

impl<'a> Groups<'a> {
    fn new(entries: &[Entry<'a>], most: usize) -> Self {
        let mut groups = Groups {
            most,
            groups: Vec::new(),
            by_key: BTreeMap::new(),
            of_entry: vec![None; entries.len()],
            fits: BTreeMap::new(),
        };
        for (i, entry) in entries.iter().enumerate() {
            groups.place(i, entry);
        }
        groups
    }

    /// Put entry `i` in the group it belongs to now, if any.
    fn place(&mut self, i: usize, entry: &Entry<'a>) {
        if let Some(g) = self.of_entry[i].take() {
            self.groups[g].1.remove(&i);
        }
        let holders = &entry.holders;
        let joinable = !entry.vacated
            && !holders.is_empty()
            && holders.len() < self.most
            && holders.iter().all(|h| h.gpus_asked() == 1);
        if !joinable {
            return;
        }
        let key: GroupKey<'a> =
            (holders.iter().map(|h| (h.model(), h.kind() == JobKind::Inference)).collect(), entry.memory_total.0);
        let g = *self.by_key.entry(key).or_insert_with_key(|key| {
            self.groups.push((key.clone(), BTreeSet::new()));
            self.groups.len() - 1
        });
        self.groups[g].1.insert(i);
        self.of_entry[i] = Some(g);
    }
}

/// Whether `a` and `b` were kept apart: a trainer preempted to protect a service never joins
/// it again.
pub fn banned(bans: &BTreeSet<(u32, u32)>, a: JobId, b: JobId) -> bool {
    bans.contains(&(a.0, b.0)) || bans.contains(&(b.0, a.0))
}

impl<'a> Book<'a> {
    /// The GPUs as the snapshot has them.
    pub fn of(s: &Snapshot<'a>) -> Self {
        let mut entries = Vec::new();
        let mut first = Vec::new();
        for node in s.nodes() {
            first.push(entries.len());
            entries.extend(node.gpus().enumerate().map(|(k, g)| Entry {
                slot: GpuSlot { node: node.id(), index: k as u32 },
                memory_total: g.memory_total,
                holders: Vec::new(),
                vacated: false,
            }));
        }
        first.push(entries.len());
        let mut book = Book { entries, first, groups: None };
        for job in s.jobs() {
            book.hold(job.gpus(), job);
        }
        book
    }

    fn index(&self, slot: GpuSlot) -> Option<usize> {
        let node = slot.node.0 as usize;
        let (start, end) = (*self.first.get(node)?, *self.first.get(node + 1)?);
        let i = start + slot.index as usize;
        (i < end).then_some(i)
    }

    /// Every GPU.
    pub fn entries(&self) -> &[Entry<'a>] {
        &self.entries
    }

    /// `job` holds `slots` (a placement this round, or a running job's GPUs).
    pub fn hold(&mut self, slots: &[GpuSlot], job: Job<'a>) {
        for &slot in slots {
            if let Some(i) = self.index(slot) {
                self.entries[i].holders.push(job);
                self.regroup(i);
            }
        }
    }

    /// Entry `i` changed: move it to the group it belongs to now.
    fn regroup(&mut self, i: usize) {
        if let Some(groups) = &mut self.groups {
            groups.place(i, &self.entries[i]);
        }
    }

    /// `job` is preempted: it leaves its GPUs, and nobody joins them this round.
    pub fn release(&mut self, job: &Job<'a>) {
        for &slot in job.gpus() {
            if let Some(i) = self.index(slot) {
                let entry = &mut self.entries[i];
                entry.holders.retain(|h| h.id() != job.id());
                entry.vacated = true;
                self.regroup(i);
            }
        }
    }

    /// Where the single-GPU `job`, whose model has `profile`, may join others when no GPU is
    /// free: a GPU held by one single-GPU job with a trusted profile, or by fewer than
    /// `max-per-gpu` such trainers when `job` is a trainer (a service shares with one trainer
    /// only), none kept apart from it, whose models with its own were not seen to get less
    /// than `min-pair-gain` together (nor any one of them with its own), whose demands add up
    /// to at most the pack limit and whose memory fits the GPU's allowed fraction. Of those,
    /// the GPU with the fewest holders, then the set of models seen to gain most (one not seen
    /// counts as 1), then the lowest combined demand, then the first in node and GPU order.
    ///
    /// Asks each group of GPUs once, not each GPU, but for a job kept apart from another
    /// (rare), which walks every GPU. The book must be asked with the same profiles, sets,
    /// config and bans every time (one round's).
    pub fn partner_for(
        &mut self,
        job: &Job<'a>,
        profile: &Profile,
        known: (&Profiles, &Pairs),
        config: &Config,
        bans: &BTreeSet<(u32, u32)>,
    ) -> Option<Partner<'a>> {
        if bans.iter().any(|&(t, v)| t == job.id().0 || v == job.id().0) {
            return self.scan_for(job, profile, known, config, bans);
        }
        let most = Config::count(config.max_per_gpu) as usize;
        let groups = self.groups.get_or_insert_with(|| Groups::new(&self.entries, most));
        let service = job.kind() == JobKind::Inference;
        let fits = groups.fits.entry((job.model(), service)).or_default();
        fits.resize(groups.groups.len(), None);
        let mut best: Option<(Fit, usize)> = None;
        for (g, (key, gpus)) in groups.groups.iter().enumerate() {
            let Some(&first) = gpus.first() else { continue };
            let fit = *fits[g].get_or_insert_with(|| weigh(key, job, profile, known, config));
            let Some(fit) = fit else { continue };
            let wins = best
                .as_ref()
                .is_none_or(|(b, at)| better(fit.rank, b.rank) || !better(b.rank, fit.rank) && first < *at);
            if wins {
                best = Some((fit, first));
            }
        }
        let partner = best.map(|(fit, i)| {
            let entry = &self.entries[i];
            Partner {
                slot: entry.slot,
                holders: entry.holders.clone(),
                demand: fit.demand,
                memory: Bytes(fit.memory),
                memory_total: entry.memory_total,
            }
        });
        debug_assert_eq!(
            partner.as_ref().map(|p| (p.slot, p.demand, p.memory)),
            self.scan_for(job, profile, known, config, bans).map(|p| (p.slot, p.demand, p.memory)),
            "the groups answer as every GPU does"
        );
        partner
    }

    /// [`Self::partner_for`] by walking every GPU.
    pub fn scan_for(
        &self,
        job: &Job<'a>,
        profile: &Profile,
        (profiles, pairs): (&Profiles, &Pairs),
        config: &Config,
        bans: &BTreeSet<(u32, u32)>,
    ) -> Option<Partner<'a>> {
        let samples = Config::count(config.profile_samples);
        let seen = Config::count(config.protect_after);
        let most = Config::count(config.max_per_gpu) as usize;
        let mut best: Option<((usize, f64, f64), Partner<'a>)> = None;
        for entry in self.entries.iter().filter(|e| !e.vacated) {
            let holders = &entry.holders;
            let services = std::iter::once(job).chain(holders).filter(|h| h.kind() == JobKind::Inference).count();
            if holders.is_empty() || holders.len() >= most || services > 1 || services == 1 && holders.len() > 1 {
                continue;
            }
            if holders.iter().any(|h| h.gpus_asked() != 1 || banned(bans, h.id(), job.id())) {
                continue;
            }
            let Some(theirs) = holders.iter().map(|h| profiles.trusted(h.model(), samples)).collect::<Option<Vec<_>>>()
            else {
                continue;
            };
            let mut models: Vec<&str> = holders.iter().map(Job::model).collect();
            models.push(job.model());
            let poor = |set: &[&str]| pairs.poor(set, config.min_pair_gain, seen);
            if poor(&models) || holders.iter().any(|h| poor(&[h.model(), job.model()])) {
                continue;
            }
            let demand: f64 = theirs.iter().map(|p| p.demand_percent).sum();
            let memory = theirs.iter().fold(0u64, |m, p| m.saturating_add(p.memory_bytes));
            let fits_memory = memory.saturating_add(profile.memory_bytes) as f64
                <= config.memory_fraction * entry.memory_total.0 as f64;
            if demand + profile.demand_percent > config.pack_limit_percent || !fits_memory {
                continue;
            }
            let gain = pairs.get(&models).filter(|p| p.samples >= seen).map_or(1.0, |p| p.gain);
            let rank = (holders.len(), -gain, demand);
            if best.as_ref().is_none_or(|(r, _)| better(rank, *r)) {
                let partner = Partner {
                    slot: entry.slot,
                    holders: holders.clone(),
                    demand,
                    memory: Bytes(memory),
                    memory_total: entry.memory_total,
                };
                best = Some((rank, partner));
            }
        }
        best.map(|(_, p)| p)
    }
}

/// Whether rank `a` comes before rank `b`: fewer holders, then more gain, then less demand.
fn better(a: (usize, f64, f64), b: (usize, f64, f64)) -> bool {
    a.0 < b.0 || a.0 == b.0 && (a.1 < b.1 || a.1 == b.1 && a.2 < b.2)
}

/// What `job`, whose model has `profile`, makes of a group's GPUs, held by jobs of `key`'s
/// models and kinds on a GPU of `key`'s memory: as [`Book::scan_for`] weighs one GPU.
fn weigh(
    (holders, memory_total): &GroupKey<'_>,
    job: &Job<'_>,
    profile: &Profile,
    (profiles, pairs): (&Profiles, &Pairs),
    config: &Config,
) -> Option<Fit> {
    let samples = Config::count(config.profile_samples);
    let seen = Config::count(config.protect_after);
    let services = usize::from(job.kind() == JobKind::Inference) + holders.iter().filter(|(_, s)| *s).count();
    if services > 1 || services == 1 && holders.len() > 1 {
        return None;
    }
    let theirs = holders.iter().map(|(m, _)| profiles.trusted(m, samples)).collect::<Option<Vec<_>>>()?;
    let mut models: Vec<&str> = holders.iter().map(|(m, _)| *m).collect();
    models.push(job.model());
    let poor = |set: &[&str]| pairs.poor(set, config.min_pair_gain, seen);
    if poor(&models) || holders.iter().any(|(m, _)| poor(&[*m, job.model()])) {
        return None;
    }
    let demand: f64 = theirs.iter().map(|p| p.demand_percent).sum();
    let memory = theirs.iter().fold(0u64, |m, p| m.saturating_add(p.memory_bytes));
    let fits_memory =
        memory.saturating_add(profile.memory_bytes) as f64 <= config.memory_fraction * *memory_total as f64;
    if demand + profile.demand_percent > config.pack_limit_percent || !fits_memory {
        return None;
    }
    let gain = pairs.get(&models).filter(|p| p.samples >= seen).map_or(1.0, |p| p.gain);
    Some(Fit { rank: (holders.len(), -gain, demand), demand, memory })
}
