//! From the plan's GPU counts to GPUs: which node's GPUs each job takes, and the actions in an
//! order the host accepts.
//!
//! A job whose pool and count are unchanged keeps its GPUs. A job that changes keeps what it can
//! of its own GPUs when that does not spread it over more nodes than it needs, and otherwise
//! takes a node that holds it whole (the fullest that can), or whole free nodes and then the
//! nodes with the most free GPUs. A job spread over nodes avoids a node that already holds part
//! of another spread job (Pollux's interference rule; here a preference, not a constraint).

use std::collections::{BTreeMap, BTreeSet};

use wasmsched_sdk::prelude::*;
use wasmsched_sdk::sched::{Entries, FreeGpus, Pieces, Spill, merge};

/// One GPU type's nodes that take work, by the type's name as the nodes give it.
pub(crate) type Pool = sched::Pool<String>;

/// The pools of the nodes that take work and have GPUs, by GPU type name, in order of first
/// appearance.
pub(crate) fn pools(s: &Snapshot) -> Vec<Pool> {
    Pool::by_kind(s, |n| n.gpu_type().to_string())
}

/// What became of each job.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// Queued jobs started, with their GPU count.
    pub started: Vec<(usize, u32)>,
    /// Running jobs moved or resized, with their new GPU count.
    pub resized: Vec<(usize, u32)>,
    /// Running jobs that keep their GPUs.
    pub kept: Vec<usize>,
    /// Running jobs preempted.
    pub preempted: Vec<usize>,
    /// Jobs with a pick that could not be given GPUs this round.
    pub unplaced: Vec<usize>,
    /// Queued jobs started on a GPU the plan left idle.
    pub filled: Vec<usize>,
}

/// Put `picks` (per job of `jobs`: pool and GPUs, or none) into `d` as actions.
pub(crate) fn place(
    s: &Snapshot,
    pools: &[Pool],
    jobs: &[Job],
    picks: &[Option<(usize, u32)>],
    d: &mut Decision,
) -> Outcome {
    let mut out = Outcome::default();
    let mut taken = FreeGpus::up(s);
    let pool_of = |node: NodeId| sched::pool_of(pools, node);
    let mut spread: BTreeSet<NodeId> = BTreeSet::new();
    // Jobs whose pool and count stay keep their GPUs.
    let mut kept = vec![false; jobs.len()];
    for (j, job) in jobs.iter().enumerate() {
        let Some((pool, gpus)) = picks[j] else { continue };
        if !job.is_queued()
            && job.gpus().len() as u32 == gpus
            && job.gpus().iter().all(|g| pool_of(g.node) == Some(pool))
        {
            for g in job.gpus() {
                taken.take_gpu(*g);
            }
            let nodes: BTreeSet<NodeId> = job.gpus().iter().map(|g| g.node).collect();
            if nodes.len() > 1 {
                spread.extend(nodes);
            }
            kept[j] = true;
            out.kept.push(j);
        }
    }
    // The others, most GPUs first.
    let mut order: Vec<usize> = (0..jobs.len()).filter(|&j| picks[j].is_some() && !kept[j]).collect();
    order.sort_by_key(|&j| (std::cmp::Reverse(picks[j].map_or(0, |p| p.1)), j));
    // Each elastic job staying in its pool first claims what it may keep of its own GPUs, so that
    // jobs seldom need each other's.
    let mut own: BTreeMap<usize, Entries> = BTreeMap::new();
    for &j in &order {
        let (job, (pool, gpus)) = (&jobs[j], picks[j].expect("picked"));
        if !job.is_elastic() || job.gpus().is_empty() || !job.gpus().iter().all(|g| pool_of(g.node) == Some(pool)) {
            continue;
        }
        let mine = own.entry(j).or_default();
        for g in job.gpus().iter().take(gpus as usize) {
            if taken.take_gpu(*g) {
                merge(mine, vec![(g.node, vec![g.index])]);
            }
        }
    }
    let mut moves: Vec<(usize, Entries)> = Vec::new();
    for j in order {
        let (pool, gpus) = picks[j].expect("picked");
        let job = &jobs[j];
        let p = &pools[pool];
        let pieces = Pieces::of(job, gpus);
        let mine = own.remove(&j).unwrap_or_default();
        let held: u32 = mine.iter().map(|(_, g)| g.len() as u32).sum();
        let fewest = gpus.div_ceil(p.per_node.max(1)) as usize;
        let mut grown = taken.carve(&p.nodes, gpus - held, pieces, Spill::WholeFree { avoid: &spread }).map(|more| {
            let mut e = mine.clone();
            merge(&mut e, more);
            e
        });
        // Grown in place but over more nodes than it needs: packed afresh, if that fits.
        if grown.as_ref().is_some_and(|e| e.len() > fewest) || grown.is_none() {
            let before = taken.clone();
            if let Some(e) = &grown {
                taken.give_back(e);
            } else {
                taken.give_back(&mine);
            }
            match taken.carve(&p.nodes, gpus, pieces, Spill::WholeFree { avoid: &spread }) {
                Some(fresh) if grown.as_ref().is_none_or(|g| fresh.len() < g.len()) => grown = Some(fresh),
                _ => taken = before,
            }
        }
        let Some(entries) = grown else {
            taken.give_back(&mine);
            out.unplaced.push(j);
            continue;
        };
        if entries.len() > 1 {
            spread.extend(entries.iter().map(|e| e.0));
        }
        moves.push((j, entries));
    }
    // Preempt running jobs left without GPUs, then resize and place in an order the host
    // accepts: each move once the GPUs it takes are free.
    let mut holder: BTreeMap<(NodeId, u32), usize> = BTreeMap::new();
    for (j, job) in jobs.iter().enumerate() {
        for g in job.gpus() {
            holder.insert((g.node, g.index), j);
        }
    }
    for (j, job) in jobs.iter().enumerate() {
        if !job.is_queued() && (picks[j].is_none() || out.unplaced.contains(&j)) {
            d.push(Action::preempt(job.id()).because("pollux: no GPUs for it this round"));
            holder.retain(|_, h| *h != j);
            out.preempted.push(j);
        }
    }
    let mut waiting = moves;
    let mut broke = false;
    loop {
        let before = waiting.len();
        let mut rest = Vec::new();
        for (j, entries) in waiting {
            let blocked =
                entries.iter().any(|(n, gpus)| gpus.iter().any(|&i| holder.get(&(*n, i)).is_some_and(|&h| h != j)));
            if blocked {
                rest.push((j, entries));
                continue;
            }
            holder.retain(|_, h| *h != j);
            for (n, gpus) in &entries {
                for &i in gpus {
                    holder.insert((*n, i), j);
                }
            }
            let (job, gpus) = (&jobs[j], picks[j].expect("picked").1);
            if job.is_queued() {
                d.push(
                    Action::place_on(job.id(), &entries, false).because("pollux: its share of the best speedup mean"),
                );
                out.started.push((j, gpus));
            } else {
                d.push(Action::resize(job.id(), &entries, None).because("pollux: its share of the best speedup mean"));
                out.resized.push((j, gpus));
            }
        }
        if rest.is_empty() {
            break;
        }
        if rest.len() < before {
            waiting = rest;
            continue;
        }
        if broke {
            out.unplaced.extend(rest.iter().map(|(j, _)| *j));
            break;
        }
        // Running jobs that would swap GPUs with each other: no order of resizes lets the host
        // accept them. Preempt them (they start again next round) and place the rest.
        broke = true;
        for (j, _) in rest.iter().filter(|(j, _)| !jobs[*j].is_queued()) {
            d.push(
                Action::preempt(jobs[*j].id()).because("pollux: its new GPUs are another's, which moves to its own"),
            );
            holder.retain(|_, h| h != j);
            out.preempted.push(*j);
        }
        waiting = rest.into_iter().filter(|(j, _)| jobs[*j].is_queued()).collect();
    }
    // A queued elastic job left out takes one GPU the plan left idle: the host's stall rule
    // would start it there anyway.
    let left_out: Vec<usize> = (0..jobs.len())
        .filter(|&j| jobs[j].is_queued() && jobs[j].is_elastic() && !out.started.iter().any(|s| s.0 == j))
        .collect();
    for j in left_out {
        let one = Pieces { size: 1, nodes: 1 };
        let free = pools.iter().find_map(|p| taken.carve(&p.nodes, 1, one, Spill::WholeFree { avoid: &spread }));
        let Some(entries) = free else { break };
        if entries.iter().any(|(n, g)| g.iter().any(|&i| holder.contains_key(&(*n, i)))) {
            continue;
        }
        for (n, g) in &entries {
            holder.insert((*n, g[0]), j);
        }
        d.push(Action::place_on(jobs[j].id(), &entries, false).because("pollux: a GPU the plan left idle"));
        out.filled.push(j);
        out.unplaced.retain(|&k| k != j);
    }
    out
}
