//! The round's plan of who holds each GPU: built from the snapshot, changed as trainers are
//! preempted and queued jobs placed, and asked where a queued job may join one other job
//! ([`Book::partner_for`]). Free GPUs and first fit are the SDK's ([`sched::FreeGpus`]); this
//! book adds what they do not keep: which jobs hold a GPU, not only how many.

use std::collections::BTreeSet;

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
        let mut book = Book { entries, first };
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
            }
        }
    }

    /// `job` is preempted: it leaves its GPUs, and nobody joins them this round.
    pub fn release(&mut self, job: &Job<'a>) {
        for &slot in job.gpus() {
            if let Some(i) = self.index(slot) {
                let entry = &mut self.entries[i];
                entry.holders.retain(|h| h.id() != job.id());
                entry.vacated = true;
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
    pub fn partner_for(
        &self,
        job: &Job<'a>,
        profile: &Profile,
        (profiles, pairs): (&'a Profiles, &Pairs),
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
            let better = |(n, g, d): &(usize, f64, f64)| {
                rank.0 < *n || rank.0 == *n && (rank.1 < *g || rank.1 == *g && rank.2 < *d)
            };
            if best.as_ref().is_none_or(|(r, _)| better(r)) {
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
