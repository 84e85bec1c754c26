//! Co-location (`colocate = true`): which two jobs run well on one GPU (Gavel's measured pair
//! speeds), and putting a job the round leaves waiting beside one it runs well with.
//!
//! Gavel's authors ran every pair of 26 single-GPU job types (7 model families at several batch
//! sizes) together on one V100 under MPS and recorded each one's speed beside the other as a
//! fraction of its speed alone (`data/gavel/v100-pairs.csv`, derived from
//! `simulation_throughputs.json` by `data/gavel/pairs.py`; Gavel, MIT). A pair's speeds add up
//! to 1.31 on average, from 0.35 to 2.0; 21 pairs ran out of memory. Like the goodput tables
//! Sia plans with, these are read as if profiling were exact.
//!
//! A job's type is its model's family (our reading, as the simulator's: cifar10 is ResNet-18,
//! imagenet ResNet-50, bert the Transformer, deepspeech2 the LM, ncf Recommendation, yolov3
//! CycleGAN) at some batch. A policy does not see the per-GPU batch a job's type was measured
//! at, so two models' speeds together are the means over their families' measured pairs.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use wasmsched_goodput::Model;
use wasmsched_sdk::prelude::*;

use super::{Plan, Sia};

/// The measured job types and pairs.
struct Table {
    /// How many job types (a family at a batch) were measured.
    #[cfg(test)]
    types: usize,
    /// Family → family → the means over their pairs that fit in memory (see [`speeds`]),
    /// worked out once.
    means: BTreeMap<String, BTreeMap<String, (f64, f64)>>,
}

static TABLE: LazyLock<Table> = LazyLock::new(|| {
    Table::parse(include_str!("../../../data/gavel/v100-pairs.csv"))
        .unwrap_or_else(|e| panic!("the embedded data/gavel/v100-pairs.csv is malformed: {e}"))
});

impl Table {
    fn parse(csv: &str) -> Result<Table, String> {
        // Each type's family and batch (0: the family's one measured batch).
        let mut types: Vec<(String, u32)> = Vec::new();
        // `(a, b)` → a's speed beside b and b's beside a, both orders; `(0, 0)`: out of memory.
        let mut pairs: BTreeMap<(usize, usize), (f64, f64)> = BTreeMap::new();
        let index = |types: &mut Vec<(String, u32)>, family: &str, batch: &str| -> Result<usize, String> {
            let batch: u32 = batch.parse().map_err(|_| format!("a batch size {batch:?}"))?;
            Ok(types.iter().position(|(f, b)| f == family && *b == batch).unwrap_or_else(|| {
                types.push((family.to_owned(), batch));
                types.len() - 1
            }))
        };
        for line in csv.lines().filter(|l| !l.starts_with('#')).skip(1) {
            let cells: Vec<&str> = line.split(',').collect();
            let [fa, ba, fb, bb, sa, sb] = cells[..] else { return Err(format!("a row {line:?}")) };
            let a = index(&mut types, fa, ba)?;
            let b = index(&mut types, fb, bb)?;
            let speed = |s: &str| s.parse::<f64>().map_err(|_| format!("a speed {s:?}"));
            let (sa, sb) = (speed(sa)?, speed(sb)?);
            pairs.insert((a, b), (sa, sb));
            pairs.insert((b, a), (sb, sa));
        }
        // Sums and counts per pair of families, the pairs taken in the map's order.
        let mut sums: BTreeMap<(&str, &str), (f64, f64, f64)> = BTreeMap::new();
        for (&(x, y), &(sx, sy)) in pairs.iter().filter(|(_, s)| s.0 > 0.0 && s.1 > 0.0) {
            let sum = sums.entry((&types[x].0, &types[y].0)).or_default();
            *sum = (sum.0 + sx, sum.1 + sy, sum.2 + 1.0);
        }
        let mut means: BTreeMap<String, BTreeMap<String, (f64, f64)>> = BTreeMap::new();
        for ((fa, fb), (sx, sy, n)) in sums {
            means.entry(fa.to_owned()).or_default().insert(fb.to_owned(), (sx / n, sy / n));
        }
        Ok(Table {
            #[cfg(test)]
            types: types.len(),
            means,
        })
    }
}

/// The Gavel family a model runs as.
fn family(model: Model) -> &'static str {
    match model {
        Model::Cifar10 => "ResNet-18",
        Model::Imagenet => "ResNet-50",
        Model::Bert => "Transformer",
        Model::Deepspeech2 => "LM",
        Model::Ncf => "Recommendation",
        Model::Yolov3 => "CycleGAN",
    }
}

/// A job of `a`'s speed beside a job of `b` and `b`'s beside `a`, each a fraction of alone,
/// whatever their per-GPU batches (which a policy does not see): the means over every measured
/// pair of their families that fit in memory; None where none did.
pub fn speeds(a: Model, b: Model) -> Option<(f64, f64)> {
    TABLE.means.get(family(a))?.get(family(b)).copied()
}

/// How many measured job types there are.
#[cfg(test)]
pub fn types() -> usize {
    TABLE.types
}

impl Sia {
    /// A job's model and its GPU memory as far as it is known: its own when it has held a GPU
    /// alone, else the most a job of its model took.
    fn footprint(&self, job: &Job) -> Option<(Model, u64)> {
        let model = Model::parse(job.model())?;
        let own = self.state.jobs.get(&job.id().0).map_or(0, |l| l.memory_bytes);
        let bytes = if own > 0 { own } else { *self.state.footprints.get(job.model())? };
        Some((model, bytes))
    }

    /// Learn each job's GPU memory from the GPUs it holds alone, and give every job on a GPU
    /// another job holds a share, so that they share it in space (`colocate`).
    pub(crate) fn tend_shared_gpus(&mut self, s: &Snapshot, d: &mut Decision) {
        let holders: BTreeMap<NodeId, Vec<u32>> = s.nodes().map(|n| (n.id(), s.gpu_holders(n.id()))).collect();
        for job in s.jobs() {
            let Some(&first) = job.gpus().first() else { continue };
            let count = |g: &GpuSlot| holders.get(&g.node).and_then(|h| h.get(g.index as usize)).copied().unwrap_or(0);
            for g in job.gpus() {
                if count(g) != 1 {
                    continue;
                }
                let used = s.node(g.node).and_then(|n| n.gpus().nth(g.index as usize)).map_or(0, |u| u.memory_used.0);
                let ledger = self.state.jobs.entry(job.id().0).or_default();
                ledger.memory_bytes = ledger.memory_bytes.max(used);
                let seen = self.state.footprints.entry(job.model().to_owned()).or_default();
                *seen = (*seen).max(used);
            }
            if job.gpu_share().is_none() && job.gpus().iter().any(|g| count(g) > 1) {
                d.push(
                    Action::set_gpu_share(job.id(), first.index, 100)
                        .because("sia: shares its GPU; a share lets the two run side by side"),
                );
            }
        }
    }

    /// Put queued jobs the plan leaves waiting, that can run on one GPU, beside a one-GPU
    /// training job on its GPU: the pair of the highest measured speeds added up, at least
    /// `colocate-min-gain`, whose memory fits. Returns the jobs placed.
    pub(crate) fn colocate(
        &mut self,
        plan: &Plan,
        holder: &mut sched::Holders,
        now: f64,
        d: &mut Decision,
    ) -> Vec<usize> {
        let (pools, jobs) = (plan.pools, plan.jobs);
        let mut placed: Vec<usize> = Vec::new();
        let mut hosts = self.hosts(plan, holder);
        for g in waiting(jobs, holder) {
            let Some(footprint) = self.footprint(&jobs[g]) else { continue };
            let Some((gain, (node, index), h, slowed)) = self.best_gpu(plan, holder, &hosts, &placed, footprint) else {
                continue;
            };
            let Some(pool) = sched::pool_of(pools, node) else { continue };
            d.push(Action::place_on(jobs[g].id(), &[(node, vec![index])], true).because(format!(
                "sia: would wait; shares a GPU with job#{} (gains {gain:.2} of a GPU with it)",
                jobs[h].id()
            )));
            // The host gets its share now if nothing else moves it this round; else on the
            // next call.
            let host = &jobs[h];
            if !host.is_queued()
                && host.gpu_share().is_none()
                && host.gpus().iter().any(|x| x.node == node && x.index == index)
                && !d.actions().iter().any(|a| a.job() == host.id())
            {
                d.push(Action::set_gpu_share(host.id(), index, 100).because("sia: takes a guest on its GPU"));
            }
            hosts.pace.insert(h, slowed);
            holder.hold(g, &[(node, vec![index])]);
            let ledger = self.state.jobs.entry(jobs[g].id().0).or_default();
            ledger.runs(pool, 1, now);
            ledger.guest = true;
            placed.push(g);
        }
        placed
    }

    /// Each host's pace beside its guests, and each job's GPUs, as the plan stands.
    fn hosts(&self, plan: &Plan, holder: &sched::Holders) -> Hosts {
        let (jobs, guest) = (plan.jobs, plan.guest);
        // Each host's speed beside the guests on its GPUs: the slowest of its GPUs sets the pace
        // of a job spread over several.
        let mut pace: BTreeMap<usize, f64> = BTreeMap::new();
        for (_, hs) in holder.iter() {
            let (hosts, guests): (Vec<usize>, Vec<usize>) = hs.iter().partition(|&&j| !guest[j]);
            if let ([h], [g]) = (hosts.as_slice(), guests.as_slice()) {
                let speed = self
                    .footprint(&jobs[*h])
                    .zip(self.footprint(&jobs[*g]))
                    .and_then(|((mh, _), (mg, _))| speeds(mh, mg))
                    .map_or(0.5, |(sh, _)| sh);
                let p = pace.entry(*h).or_insert(1.0);
                *p = p.min(speed);
            }
        }
        // How many GPUs each job holds in the plan (a guest joining a GPU changes no host's).
        let mut held: BTreeMap<usize, u32> = BTreeMap::new();
        for &j in holder.iter().flat_map(|(_, hs)| hs) {
            *held.entry(j).or_default() += 1;
        }
        Hosts { pace, held }
    }

    /// The best GPU for a guest of `footprint`: the gain, the GPU, its host and the host's pace then.
    fn best_gpu(
        &self,
        plan: &Plan,
        holder: &sched::Holders,
        hosts: &Hosts,
        placed: &[usize],
        footprint: (Model, u64),
    ) -> Option<(f64, (NodeId, u32), usize, f64)> {
        let (s, pools, jobs, guest) = (plan.s, plan.pools, plan.jobs, plan.guest);
        let (model_g, bytes_g) = footprint;
        // The best GPU: the most the guest gains less what its host loses, each a fraction
        // of its own speed alone.
        let mut best: Option<(f64, (NodeId, u32), usize, f64)> = None;
        for ((node, index), hs) in holder.iter() {
            let &[h] = hs else { continue };
            let host = &jobs[h];
            if guest[h]
                || placed.contains(&h)
                || host.kind() != JobKind::Training
                || sched::pool_of(pools, node).is_none()
            {
                continue;
            }
            let Some((model_h, bytes_h)) = self.footprint(host) else { continue };
            let Some((sg, sh)) = speeds(model_g, model_h) else { continue };
            let memory = s.node(node).and_then(|n| n.gpus().nth(index as usize)).map_or(0, |u| u.memory_total.0);
            if (bytes_g + bytes_h) as f64 > self.config.colocate_memory_fraction * memory as f64 {
                continue;
            }
            // The host loses on every GPU it holds: its slowest sets its pace.
            let gpus = f64::from(hosts.held.get(&h).copied().unwrap_or(1));
            let now_pace = hosts.pace.get(&h).copied().unwrap_or(1.0);
            let gain = 1.0 + sg - gpus * (now_pace - now_pace.min(sh));
            if gain >= self.config.colocate_min_gain && best.is_none_or(|(b, ..)| gain > b) {
                best = Some((gain, (node, index), h, now_pace.min(sh)));
            }
        }
        best
    }
}

/// The hosts of the plan's GPUs, as co-location weighs them.
struct Hosts {
    /// Per host, its speed beside its guests (the slowest of its GPUs), a fraction of alone.
    pace: BTreeMap<usize, f64>,
    /// Per job, how many GPUs it holds in the plan.
    held: BTreeMap<usize, u32>,
}

/// The queued jobs that can run on one GPU and hold none in the plan, by arrival.
fn waiting(jobs: &[Job], holder: &sched::Holders) -> Vec<usize> {
    let one_gpu = |job: &Job| {
        job.kind() == JobKind::Training
            && if job.is_elastic() { job.scaling().gpu_counts.contains(&1) } else { job.gpus_asked() == 1 }
    };
    let mut waiting: Vec<usize> = (0..jobs.len())
        .filter(|&j| jobs[j].is_queued() && one_gpu(&jobs[j]) && !holder.iter().any(|(_, hs)| hs.contains(&j)))
        .collect();
    waiting.sort_by(|&a, &b| jobs[a].arrival().0.total_cmp(&jobs[b].arrival().0));
    waiting
}
