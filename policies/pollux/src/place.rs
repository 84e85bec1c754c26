//! From the plan's GPU counts to GPUs: which node's GPUs each job takes, and the actions in an
//! order the host accepts.
//!
//! A job whose pool and count are unchanged keeps its GPUs. A job that changes keeps what it can
//! of its own GPUs when that does not spread it over more nodes than it needs, and otherwise
//! takes a node that holds it whole (the fullest that can), or whole free nodes and then the
//! nodes with the most free GPUs. A job spread over nodes avoids a node that already holds part
//! of another spread job (Pollux's interference rule; here a preference, not a constraint).

use std::collections::BTreeSet;

use wasmsched_sdk::prelude::*;
use wasmsched_sdk::sched::{Entries, FreeGpus, Holders, Kept, Pick, Pieces, Spill, Step, merge};

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
    // Jobs whose pool and count stay keep their GPUs. The others go most GPUs first; but first,
    // each elastic job staying in its pool claims what it may keep of its own GPUs, so that jobs
    // seldom need each other's.
    let picks: Vec<Option<Pick>> = picks.iter().map(|p| p.map(|(pool, gpus)| Pick { pool, gpus })).collect();
    let Kept { kept, movers, mut own } = sched::keep(&mut taken, pools, jobs, &picks, |_| true);
    let mut spread: BTreeSet<NodeId> = BTreeSet::new();
    for (j, job) in jobs.iter().enumerate().filter(|(j, _)| kept[*j]) {
        let nodes: BTreeSet<NodeId> = job.gpus().iter().map(|g| g.node).collect();
        if nodes.len() > 1 {
            spread.extend(nodes);
        }
        out.kept.push(j);
    }
    let mut moves: Vec<(usize, Entries)> = Vec::new();
    for j in movers {
        let Pick { pool, gpus } = picks[j].expect("picked");
        let mine = own.remove(&j).unwrap_or_default();
        let Some(entries) = carve(&mut taken, &pools[pool], &jobs[j], gpus, mine, &spread) else {
            out.unplaced.push(j);
            continue;
        };
        if entries.len() > 1 {
            spread.extend(entries.iter().map(|e| e.0));
        }
        moves.push((j, entries));
    }
    // Preempt running jobs left without GPUs, then resize and place in an order the host
    // accepts: each move once the GPUs it takes are free. A GPU has one holder here, the last
    // job that holds it.
    let mut holder = Holders::last_of(jobs);
    act(jobs, &picks, moves, &mut holder, &mut out, d);
    // A queued elastic job left out takes one GPU the plan left idle: the host's stall rule
    // would start it there anyway.
    let left_out: Vec<usize> = (0..jobs.len()).filter(|&j| !out.started.iter().any(|s| s.0 == j)).collect();
    let spill = Spill::WholeFree { avoid: &spread };
    for f in sched::fill_idle(&mut taken, pools, jobs, &mut holder, left_out, spill) {
        d.push(Action::place_on(jobs[f.job].id(), &f.entries, false).because("pollux: a GPU the plan left idle"));
        out.filled.push(f.job);
        out.unplaced.retain(|&k| k != f.job);
    }
    out
}

/// `job`'s `gpus` GPUs of pool `p`: `mine` grown in place, or packed afresh on fewer nodes; None: no room.
fn carve(
    taken: &mut FreeGpus,
    p: &Pool,
    job: &Job,
    gpus: u32,
    mine: Entries,
    spread: &BTreeSet<NodeId>,
) -> Option<Entries> {
    let pieces = Pieces::of(job, gpus);
    let held: u32 = mine.iter().map(|(_, g)| g.len() as u32).sum();
    let fewest = gpus.div_ceil(p.per_node.max(1)) as usize;
    let mut grown = taken.carve(&p.nodes, gpus - held, pieces, Spill::WholeFree { avoid: spread }).map(|more| {
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
        match taken.carve(&p.nodes, gpus, pieces, Spill::WholeFree { avoid: spread }) {
            Some(fresh) if grown.as_ref().is_none_or(|g| fresh.len() < g.len()) => grown = Some(fresh),
            _ => *taken = before,
        }
    }
    let Some(entries) = grown else {
        taken.give_back(&mine);
        return None;
    };
    Some(entries)
}

/// Preempt the running jobs left without GPUs, then resize and place the moves in an order the host accepts.
fn act(
    jobs: &[Job],
    picks: &[Option<Pick>],
    moves: Vec<(usize, Entries)>,
    holder: &mut Holders,
    out: &mut Outcome,
    d: &mut Decision,
) {
    for (j, job) in jobs.iter().enumerate() {
        if !job.is_queued() && (picks[j].is_none() || out.unplaced.contains(&j)) {
            d.push(Action::preempt(job.id()).because("pollux: no GPUs for it this round"));
            holder.release(j);
            out.preempted.push(j);
        }
    }
    for step in sched::order_moves(jobs, holder, moves) {
        match step {
            Step::Land { job: j, entries } => {
                let (job, gpus) = (&jobs[j], picks[j].expect("picked").gpus);
                let why = "pollux: its share of the best speedup mean";
                if job.is_queued() {
                    d.push(Action::place_on(job.id(), &entries, false).because(why));
                    out.started.push((j, gpus));
                } else {
                    d.push(Action::resize(job.id(), &entries, None).because(why));
                    out.resized.push((j, gpus));
                }
            }
            Step::Preempt { job: j } => {
                d.push(
                    Action::preempt(jobs[j].id()).because("pollux: its new GPUs are another's, which moves to its own"),
                );
                out.preempted.push(j);
            }
            Step::Wait { job: j } => out.unplaced.push(j),
        }
    }
}
