//! From a round's plan (per job a pool and a GPU count, [`Pick`]) to actions, the steps Sia and
//! Pollux share: the jobs whose pick is what they hold keep their GPUs and elastic jobs that
//! stay in their pool claim what they can of theirs ([`keep`]); the policy carves GPUs for the
//! others; [`order_moves`] orders the moves so that each lands once the GPUs it takes are free
//! ([`Holders`] says who holds each GPU as the actions so far leave it); and [`fill_idle`]
//! starts queued elastic jobs left out on GPUs the plan left idle.
//!
//! Jobs are named by their index in the round's jobs (`jobs: &[Job]`), as the policies' plans
//! name them.

use std::collections::BTreeMap;

use super::{Entries, FreeGpus, Pieces, Pool, Spill, merge, pool_of};
use crate::units::NodeId;
use crate::view::Job;

/// What a round's plan gives a job: a count of GPUs of one pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pick {
    /// The index of the pool (of the round's [`Pool`]s).
    pub pool: usize,
    /// How many of its GPUs.
    pub gpus: u32,
}

/// What [`keep`] leaves to place.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Kept {
    /// Per job, whether it keeps its GPUs as they are.
    pub kept: Vec<bool>,
    /// The jobs with a pick that do not keep theirs, most GPUs first (index order on a tie):
    /// the order in which to carve their GPUs.
    pub movers: Vec<usize>,
    /// Per mover that is elastic and runs in its pick's pool only, the GPUs of its own it keeps
    /// (taken in the book): its first ones, up to its pick's count, that no job before it
    /// took. A mover without an entry keeps none.
    pub own: BTreeMap<usize, Entries>,
}

/// The first steps of a round's placement, on `free` (the book the plan starts from, as
/// [`FreeGpus::up`] gives it). Each running job that `may_keep` (by index) whose pick is its
/// GPUs' count, all in the pick's pool, keeps them: they are taken in `free`. The others with
/// a pick are the movers, most GPUs first; then each elastic mover that `may_keep` and that
/// runs in its pick's pool only claims what it can of its own GPUs, in that order, so that
/// jobs seldom need each other's GPUs.
pub fn keep<K>(
    free: &mut FreeGpus,
    pools: &[Pool<K>],
    jobs: &[Job<'_>],
    picks: &[Option<Pick>],
    may_keep: impl Fn(usize) -> bool,
) -> Kept {
    let in_pool = |job: &Job<'_>, pool: usize| job.gpus().iter().all(|g| pool_of(pools, g.node) == Some(pool));
    let mut kept = vec![false; jobs.len()];
    for (j, job) in jobs.iter().enumerate() {
        let Some(pick) = picks[j] else { continue };
        if !job.is_queued() && may_keep(j) && job.gpus().len() as u32 == pick.gpus && in_pool(job, pick.pool) {
            for g in job.gpus() {
                free.take_gpu(*g);
            }
            kept[j] = true;
        }
    }
    let mut movers: Vec<usize> = (0..jobs.len()).filter(|&j| picks[j].is_some() && !kept[j]).collect();
    movers.sort_by_key(|&j| (std::cmp::Reverse(picks[j].map_or(0, |p| p.gpus)), j));
    let mut own: BTreeMap<usize, Entries> = BTreeMap::new();
    for &j in &movers {
        let (job, pick) = (&jobs[j], picks[j].expect("a mover has a pick"));
        if !may_keep(j) || !job.is_elastic() || job.gpus().is_empty() || !in_pool(job, pick.pool) {
            continue;
        }
        let mine = own.entry(j).or_default();
        for g in job.gpus().iter().take(pick.gpus as usize) {
            if free.take_gpu(*g) {
                merge(mine, vec![(g.node, vec![g.index])]);
            }
        }
    }
    Kept { kept, movers, own }
}

/// Per GPU, the jobs that hold it as the actions so far leave it, in the order they came to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holders {
    gpus: BTreeMap<(NodeId, u32), Vec<usize>>,
}

impl Holders {
    /// Every job's GPUs as the snapshot has them: a GPU two jobs share has both, in job order.
    pub fn of(jobs: &[Job<'_>]) -> Self {
        let mut h = Holders::default();
        for (j, job) in jobs.iter().enumerate() {
            for g in job.gpus() {
                h.gpus.entry((g.node, g.index)).or_default().push(j);
            }
        }
        h
    }

    /// Like [`Self::of`], but a GPU that jobs share has only the last of them (a plan that
    /// takes no GPU to be shared, as Pollux's).
    pub fn last_of(jobs: &[Job<'_>]) -> Self {
        let mut h = Holders::default();
        for (j, job) in jobs.iter().enumerate() {
            for g in job.gpus() {
                h.gpus.insert((g.node, g.index), vec![j]);
            }
        }
        h
    }

    /// Job `job` takes GPUs `entries` too.
    pub fn hold(&mut self, job: usize, entries: &[(NodeId, Vec<u32>)]) {
        for (n, gpus) in entries {
            for &i in gpus {
                self.gpus.entry((*n, i)).or_default().push(job);
            }
        }
    }

    /// Job `job` leaves every GPU it holds (preempted, or about to move).
    pub fn release(&mut self, job: usize) {
        for hs in self.gpus.values_mut() {
            hs.retain(|&h| h != job);
        }
        self.gpus.retain(|_, hs| !hs.is_empty());
    }

    /// The jobs that hold GPU `index` of `node` (none when it is free).
    pub fn on(&self, node: NodeId, index: u32) -> &[usize] {
        self.gpus.get(&(node, index)).map_or(&[], Vec::as_slice)
    }

    /// Whether a job holds GPU `index` of `node`.
    pub fn is_held(&self, node: NodeId, index: u32) -> bool {
        self.gpus.contains_key(&(node, index))
    }

    /// Whether a job other than `job` holds one of `entries`' GPUs.
    pub fn blocks(&self, job: usize, entries: &[(NodeId, Vec<u32>)]) -> bool {
        entries.iter().any(|(n, gpus)| gpus.iter().any(|&i| self.on(*n, i).iter().any(|&h| h != job)))
    }

    /// Each held GPU (node, index), in order, with its holders.
    pub fn iter(&self) -> impl Iterator<Item = ((NodeId, u32), &[usize])> + '_ {
        self.gpus.iter().map(|(&gpu, hs)| (gpu, hs.as_slice()))
    }
}

/// What becomes of a move in [`order_moves`], in the order the host accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Job `job` takes `entries`: a queued job is placed on them, a running one resized to them.
    Land {
        /// The job.
        job: usize,
        /// Its GPUs, node by node.
        entries: Entries,
    },
    /// Running job `job` would take GPUs held by a job that waits for its own: no order of
    /// resizes lets the host accept them, so it is preempted (and starts again next round).
    Preempt {
        /// The job.
        job: usize,
    },
    /// Queued job `job` still finds its GPUs held once those are preempted: it waits.
    Wait {
        /// The job.
        job: usize,
    },
}

/// The moves (per job its new GPUs), in an order the host accepts: pass after pass over the
/// moves that wait, in their order, a move lands once no other job holds a GPU it takes (in
/// `holders`, which each landing updates: the job leaves its old GPUs and holds its new ones).
/// When a pass lands none, the running jobs among those left are preempted once (they hold
/// what another needs, and need what another holds: a swap) and the passes go on for the
/// queued ones; those still blocked then wait. A preempted job leaves `holders`.
pub fn order_moves(jobs: &[Job<'_>], holders: &mut Holders, moves: Vec<(usize, Entries)>) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut waiting = moves;
    let mut broke = false;
    loop {
        let before = waiting.len();
        let mut rest = Vec::new();
        for (j, entries) in waiting {
            if holders.blocks(j, &entries) {
                rest.push((j, entries));
                continue;
            }
            holders.release(j);
            holders.hold(j, &entries);
            steps.push(Step::Land { job: j, entries });
        }
        if rest.is_empty() {
            break;
        }
        if rest.len() < before {
            waiting = rest;
            continue;
        }
        if broke {
            steps.extend(rest.iter().map(|(j, _)| Step::Wait { job: *j }));
            break;
        }
        broke = true;
        for (j, _) in rest.iter().filter(|(j, _)| !jobs[*j].is_queued()) {
            steps.push(Step::Preempt { job: *j });
            holders.release(*j);
        }
        waiting = rest.into_iter().filter(|(j, _)| jobs[*j].is_queued()).collect();
    }
    steps
}

/// A queued job [`fill_idle`] starts on a GPU the plan left idle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filled {
    /// The job.
    pub job: usize,
    /// The index of the pool of its GPU.
    pub pool: usize,
    /// Its one GPU.
    pub entries: Entries,
}

/// Each queued elastic job of `left_out`, in that order, takes one GPU the plan left idle
/// (every such GPU is one the host's stall rule would hand out anyway): carved from `free` in
/// the first pool that has one, as `spill` orders the nodes; a job whose GPU is still held (in
/// `holders`) gets none, the GPU staying taken. It stops when no pool has a GPU left. The jobs
/// placed, in order; `holders` holds their GPUs.
pub fn fill_idle<K>(
    free: &mut FreeGpus,
    pools: &[Pool<K>],
    jobs: &[Job<'_>],
    holders: &mut Holders,
    left_out: impl IntoIterator<Item = usize>,
    spill: Spill<'_>,
) -> Vec<Filled> {
    let mut filled = Vec::new();
    for j in left_out {
        if !jobs[j].is_queued() || !jobs[j].is_elastic() {
            continue;
        }
        let one = Pieces { size: 1, nodes: 1 };
        let idle = pools.iter().enumerate().find_map(|(t, p)| free.carve(&p.nodes, 1, one, spill).map(|e| (t, e)));
        let Some((pool, entries)) = idle else { break };
        if entries.iter().any(|(n, g)| g.iter().any(|&i| holders.is_held(*n, i))) {
            continue;
        }
        holders.hold(j, &entries);
        filled.push(Filled { job: j, pool, entries });
    }
    filled
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::Runner;
    use crate::testing::{Inspect, TestWorld, job};
    use crate::units::JobId;
    use crate::view::Snapshot;

    fn seen(world: &mut TestWorld) -> Runner<Inspect> {
        let mut r = Runner::from_policy(Inspect);
        r.decide(world.snapshot()).unwrap();
        r
    }

    /// The running jobs, then the queued ones.
    fn jobs_of<'s>(s: &'s Snapshot<'_>) -> Vec<Job<'s>> {
        s.jobs().chain(s.queue()).collect()
    }

    fn on(node: u32, gpus: &[u32]) -> (NodeId, Vec<u32>) {
        (NodeId(node), gpus.to_vec())
    }

    fn elastic(name: &str) -> crate::testing::JobBuilder {
        job(name, "cifar10").gpus(1).elastic(&[1, 2, 3, 4], 128..=1024)
    }

    fn pick(pool: usize, gpus: u32) -> Option<Pick> {
        Some(Pick { pool, gpus })
    }

    #[test]
    fn jobs_whose_pick_is_what_they_hold_keep_it_and_elastic_movers_claim_their_own_first() {
        let mut w = TestWorld::typed_gpu_cluster(&[(4, "t4"), (4, "a100")]);
        let same = w.queue_job(job("same", "cifar10").gpus(2));
        let grow = w.queue_job(elastic("grow"));
        let other = w.queue_job(elastic("other"));
        let shy = w.queue_job(elastic("shy"));
        w.queue_job(job("new", "cifar10").gpus(2));
        w.start(same, NodeId(0), &[0, 1]);
        w.start(grow, NodeId(0), &[2]);
        w.start(other, NodeId(1), &[0]);
        w.start(shy, NodeId(1), &[1]);
        let r = seen(&mut w);
        let s = r.view();
        let pools = Pool::by_kind(&s, |n| n.gpu_type().to_string());
        let jobs = jobs_of(&s);
        assert_eq!(jobs.iter().map(|j| j.id()).collect::<Vec<_>>(), [same, grow, other, shy, JobId(4)]);
        let mut free = FreeGpus::up(&s);
        // same: unchanged; grow: 3 on t4; other: to t4; shy: as it was, but it may not keep.
        let picks = [pick(0, 2), pick(0, 3), pick(0, 1), pick(1, 1), pick(1, 2)];
        let k = keep(&mut free, &pools, &jobs, &picks, |j| j != 3);
        assert_eq!(k.kept, [true, false, false, false, false]);
        assert_eq!(k.movers, [1, 4, 2, 3], "most GPUs first, index order on a tie");
        assert_eq!(k.own, BTreeMap::from([(1, vec![on(0, &[2])])]), "other leaves its pool, shy may not keep");
        assert_eq!(free.free_count(), 5, "same's two GPUs and grow's one are taken");
        assert!(!free.is_free(crate::GpuSlot { node: NodeId(0), index: 2 }));
    }

    #[test]
    fn a_shrinking_job_keeps_its_first_gpus_that_are_still_free() {
        let mut w = TestWorld::typed_gpu_cluster(&[(4, "t4")]);
        let a = w.queue_job(elastic("a"));
        w.start(a, NodeId(0), &[1, 2, 3]);
        let r = seen(&mut w);
        let s = r.view();
        let pools = Pool::by_kind(&s, |_| ());
        let mut free = FreeGpus::up(&s);
        assert!(free.take_gpu(crate::GpuSlot { node: NodeId(0), index: 1 }), "another job's now");
        let k = keep(&mut free, &pools, &jobs_of(&s), &[pick(0, 2)], |_| true);
        assert_eq!(k.own, BTreeMap::from([(0, vec![on(0, &[2])])]), "of its first two, GPU 2 alone is free");
    }

    #[test]
    fn holders_are_every_job_on_a_gpu_or_the_last_and_leave_when_released() {
        let mut w = TestWorld::gpu_cluster(&[2]);
        let a = w.queue_job(job("a", "cifar10").gpus(1));
        let b = w.queue_job(job("b", "cifar10").gpus(2));
        w.start(a, NodeId(0), &[0]);
        w.start(b, NodeId(0), &[0, 1]);
        let r = seen(&mut w);
        let s = r.view();
        let jobs = jobs_of(&s);
        let mut all = Holders::of(&jobs);
        assert_eq!(all.on(NodeId(0), 0), [0, 1]);
        let last = Holders::last_of(&jobs);
        assert_eq!(last.on(NodeId(0), 0), [1]);
        assert!(all.blocks(1, &[on(0, &[0])]) && !last.blocks(1, &[on(0, &[0])]), "a holds it beside b");
        all.release(1);
        assert_eq!(all.iter().collect::<Vec<_>>(), [((NodeId(0), 0), &[0][..])]);
        assert!(!all.is_held(NodeId(0), 1) && all.on(NodeId(0), 1).is_empty());
        all.hold(1, &[on(0, &[1])]);
        assert!(all.is_held(NodeId(0), 1) && !all.blocks(1, &[on(0, &[1])]));
    }

    #[test]
    fn a_move_lands_once_the_gpus_it_takes_are_free() {
        // a (GPU 0) moves to GPU 1, which b holds; b moves to GPU 2, free; c starts on GPU 0.
        let mut w = TestWorld::gpu_cluster(&[4]);
        let a = w.queue_job(elastic("a"));
        let b = w.queue_job(elastic("b"));
        w.queue_job(elastic("c"));
        w.start(a, NodeId(0), &[0]);
        w.start(b, NodeId(0), &[1]);
        let r = seen(&mut w);
        let s = r.view();
        let jobs = jobs_of(&s);
        let mut holders = Holders::of(&jobs);
        let moves = vec![(2, vec![on(0, &[0])]), (0, vec![on(0, &[1])]), (1, vec![on(0, &[2])])];
        let steps = order_moves(&jobs, &mut holders, moves);
        let land = |job: usize, gpu: u32| Step::Land { job, entries: vec![on(0, &[gpu])] };
        assert_eq!(steps, [land(1, 2), land(0, 1), land(2, 0)], "b, then a, then c: one pass each");
        assert_eq!(
            holders.iter().map(|(g, hs)| (g.1, hs.to_vec())).collect::<Vec<_>>(),
            [(0, vec![2]), (1, vec![0]), (2, vec![1])]
        );
    }

    #[test]
    fn jobs_that_would_swap_gpus_are_preempted_and_a_queued_job_still_blocked_waits() {
        // a and b swap GPUs 0 and 1; c starts on GPU 0 once they are preempted; d wants GPU 2,
        // which e keeps.
        let mut w = TestWorld::gpu_cluster(&[4]);
        let a = w.queue_job(elastic("a"));
        let b = w.queue_job(elastic("b"));
        let e = w.queue_job(elastic("e"));
        w.queue_job(elastic("c"));
        w.queue_job(elastic("d"));
        w.start(a, NodeId(0), &[0]);
        w.start(b, NodeId(0), &[1]);
        w.start(e, NodeId(0), &[2]);
        let r = seen(&mut w);
        let s = r.view();
        let jobs = jobs_of(&s);
        let names: Vec<JobId> = jobs.iter().map(|j| j.id()).collect();
        assert_eq!(names, [a, b, e, JobId(3), JobId(4)]);
        let mut holders = Holders::of(&jobs);
        let moves =
            vec![(0, vec![on(0, &[1])]), (3, vec![on(0, &[0])]), (4, vec![on(0, &[2])]), (1, vec![on(0, &[0])])];
        let steps = order_moves(&jobs, &mut holders, moves);
        assert_eq!(
            steps,
            [
                Step::Preempt { job: 0 },
                Step::Preempt { job: 1 },
                Step::Land { job: 3, entries: vec![on(0, &[0])] },
                Step::Wait { job: 4 },
            ]
        );
        assert_eq!(holders.iter().map(|(g, hs)| (g.1, hs.to_vec())).collect::<Vec<_>>(), [(0, vec![3]), (2, vec![2])]);
    }

    #[test]
    fn queued_elastic_jobs_left_out_take_an_idle_gpu_each_until_none_is_left() {
        let mut w = TestWorld::typed_gpu_cluster(&[(2, "t4"), (1, "a100")]);
        let held = w.queue_job(elastic("held"));
        w.start(held, NodeId(0), &[0]);
        w.queue_job(job("rigid", "cifar10").gpus(1));
        for name in ["x", "y", "z", "late"] {
            w.queue_job(elastic(name));
        }
        let r = seen(&mut w);
        let s = r.view();
        let pools = Pool::by_kind(&s, |n| n.gpu_type().to_string());
        let jobs = jobs_of(&s);
        let mut free = FreeGpus::up(&s);
        let mut holders = Holders::of(&jobs);
        // The plan leaves all three GPUs idle, but `held` still holds t4 GPU 0 (it is preempted
        // later, say).
        let filled = fill_idle(&mut free, &pools, &jobs, &mut holders, [0, 1, 2, 3, 4, 5], Spill::MostFree);
        let got: Vec<(usize, usize, Entries)> = filled.into_iter().map(|f| (f.job, f.pool, f.entries)).collect();
        assert_eq!(
            got,
            [(3, 0, vec![on(0, &[1])]), (4, 1, vec![on(1, &[0])])],
            "running and rigid jobs take none; x's GPU is held; y and z take the rest; late finds none"
        );
        assert_eq!(free.free_count(), 0, "x's GPU stays taken");
        assert_eq!(holders.on(NodeId(1), 0), [4]);
        let avoid = BTreeSet::new();
        let none = fill_idle(&mut free, &pools, &jobs, &mut holders, [5], Spill::WholeFree { avoid: &avoid });
        assert!(none.is_empty());
    }
}
