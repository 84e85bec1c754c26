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

/// Who could join `job` on a GPU, and what the two add up to.
pub struct Partner<'a> {
    /// The GPU.
    pub slot: GpuSlot,
    /// The job that holds it alone.
    pub holder: Job<'a>,
    /// The holder's profile.
    pub profile: &'a Profile,
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

    /// Where the single-GPU `job`, whose model has `profile`, may join another job when no GPU
    /// is free: a GPU held by exactly one single-GPU job with a trusted profile, not both
    /// services, not kept apart, not a pair of models seen to get less than `min-pair-gain`
    /// together, whose demands add up to at most the pack limit and whose memory fits the
    /// GPU's allowed fraction. Of those, the pair of models seen to gain most (one not seen
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
        let mut best: Option<(f64, f64, Partner<'a>)> = None;
        for entry in self.entries.iter().filter(|e| !e.vacated) {
            let &[holder] = entry.holders.as_slice() else { continue };
            if holder.gpus_asked() != 1
                || holder.kind() == JobKind::Inference && job.kind() == JobKind::Inference
                || banned(bans, holder.id(), job.id())
            {
                continue;
            }
            let Some(theirs) = profiles.trusted(holder.model(), samples) else { continue };
            if pairs.poor(job.model(), holder.model(), config.min_pair_gain, Config::count(config.protect_after)) {
                continue;
            }
            let demand = profile.demand_percent + theirs.demand_percent;
            let memory = profile.memory_bytes.saturating_add(theirs.memory_bytes) as f64;
            if demand > config.pack_limit_percent || memory > config.memory_fraction * entry.memory_total.0 as f64 {
                continue;
            }
            // A pair seen to gain comes first, the best first; one not seen yet counts as
            // taking turns would (1).
            let seen = Config::count(config.protect_after);
            let gain = pairs.get(job.model(), holder.model()).filter(|p| p.samples >= seen).map_or(1.0, |p| p.gain);
            if best.as_ref().is_none_or(|(g, d, _)| gain > *g || gain == *g && demand < *d) {
                let partner = Partner { slot: entry.slot, holder, profile: theirs, memory_total: entry.memory_total };
                best = Some((gain, demand, partner));
            }
        }
        best.map(|(_, _, p)| p)
    }
}
