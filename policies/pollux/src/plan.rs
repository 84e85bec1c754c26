//! The allocation search: GPU counts per job, each job within one pool (GPU type), that minimise
//! the sum of the jobs' costs (Pollux's power mean, see the crate docs).
//!
//! Pollux's artifact searches with a genetic algorithm (population 100, 100 generations, random
//! seeds). We search deterministically: from two starts (every job without GPUs, and every job
//! where it runs now), greedy upgrades of the best cost saved per GPU added, then moves of GPUs
//! from one job to another while they lower the sum, until neither finds anything.

/// A job as the search sees it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Candidate {
    /// (GPUs, cost when it changes to them), GPUs ascending; an option no cheaper than a smaller
    /// one is left out.
    pub options: Vec<(u32, f64)>,
    /// Its cost without GPUs.
    pub idle: f64,
    /// Where it runs now: pool, GPUs, and the cost of staying so (no restart).
    pub current: Option<(usize, u32, f64)>,
    /// It keeps its current allocation (it is still restoring from its last change).
    pub locked: bool,
}

/// A job's allocation: a pool and its GPUs there, or none.
pub(crate) type Pick = Option<(usize, u32)>;

/// Cost differences below this are ties.
const EPS: f64 = 1e-9;

/// The rounds of greedy upgrades and moves one start runs at most.
const ROUNDS: usize = 6;

impl Candidate {
    /// Its cost at `pick`; infinite where it has no such option.
    pub(crate) fn cost(&self, pick: Pick) -> f64 {
        let Some((pool, gpus)) = pick else { return self.idle };
        match self.current {
            Some((p, n, stay)) if (p, n) == (pool, gpus) => stay,
            _ => self.options.iter().find(|o| o.0 == gpus).map_or(f64::INFINITY, |o| o.1),
        }
    }

    /// The GPU counts it may have, ascending: its options (ascending already) and its current
    /// count in its place. The search asks for them for every pair of jobs: nothing allocated.
    fn counts(&self) -> impl Iterator<Item = u32> + '_ {
        let stay = self.current.map(|c| c.1).filter(|n| !self.options.iter().any(|o| o.0 == *n));
        let at = stay.map_or(self.options.len(), |n| self.options.partition_point(|o| o.0 < n));
        let (below, above) = self.options.split_at(at);
        below.iter().map(|o| o.0).chain(stay).chain(above.iter().map(|o| o.0))
    }

    /// Its counts ([`Candidate::counts`]), each with its cost off its current place (infinite
    /// for its current count, which is not an option elsewhere): the search's inner loops
    /// read these rather than look each cost up.
    fn menu(&self) -> Vec<(u32, f64)> {
        self.counts().map(|n| (n, self.options.iter().find(|o| o.0 == n).map_or(f64::INFINITY, |o| o.1))).collect()
    }

    /// Its cost on `gpus` GPUs of `pool`, `elsewhere` being that count's cost off its current
    /// place (from its menu): [`Candidate::cost`] without the lookup.
    fn priced(&self, pool: usize, gpus: u32, elsewhere: f64) -> f64 {
        match self.current {
            Some((p, n, stay)) if (p, n) == (pool, gpus) => stay,
            _ => elsewhere,
        }
    }
}

/// Drop the options no cheaper than a smaller one (more GPUs for no gain).
pub(crate) fn prune(mut options: Vec<(u32, f64)>) -> Vec<(u32, f64)> {
    options.sort_by_key(|o| o.0);
    let mut best = f64::INFINITY;
    options.retain(|o| {
        let keep = o.1 < best - EPS;
        best = best.min(o.1);
        keep
    });
    options
}

/// A search state: the picks, each job's cost at its pick, and each pool's free GPUs.
#[derive(Clone, Debug)]
struct State<'a> {
    jobs: &'a [Candidate],
    /// Each job's [`Candidate::menu`].
    menus: &'a [Vec<(u32, f64)>],
    picks: Vec<Pick>,
    costs: Vec<f64>,
    free: Vec<i64>,
}

impl State<'_> {
    fn total(&self) -> f64 {
        self.jobs.iter().zip(&self.picks).map(|(c, p)| c.cost(*p)).sum()
    }

    /// GPUs job `j` holds in `pool` in this state.
    fn held_in(&self, j: usize, pool: usize) -> i64 {
        match self.picks[j] {
            Some((p, n)) if p == pool => i64::from(n),
            _ => 0,
        }
    }

    /// The pool where job `j` would run on `gpus` GPUs (with `extra` more free in `pool_extra`):
    /// where it runs now, else where it is picked, else the pool it fits best; None where none
    /// has room.
    fn pool_for(&self, j: usize, gpus: u32, extra: Option<(usize, i64)>) -> Option<usize> {
        let room = |q: usize| {
            self.free[q] + self.held_in(j, q) + extra.filter(|e| e.0 == q).map_or(0, |e| e.1) - i64::from(gpus)
        };
        let now = self.jobs[j].current.map(|c| c.0);
        let picked = self.picks[j].map(|p| p.0);
        for q in [now, picked].into_iter().flatten() {
            if room(q) >= 0 {
                return Some(q);
            }
        }
        (0..self.free.len()).filter(|&q| room(q) >= 0).min_by_key(|&q| (room(q), q))
    }

    fn set(&mut self, j: usize, pick: Pick) {
        if let Some((p, n)) = self.picks[j] {
            self.free[p] += i64::from(n);
        }
        if let Some((p, n)) = pick {
            self.free[p] -= i64::from(n);
        }
        self.picks[j] = pick;
        self.costs[j] = self.jobs[j].cost(pick);
    }

    /// Greedy: the upgrade of most cost saved per GPU added, while one saves anything.
    fn upgrade(&mut self) -> bool {
        let mut changed = false;
        loop {
            let mut best: Option<(f64, usize, Pick)> = None;
            for (j, c) in self.jobs.iter().enumerate().filter(|(_, c)| !c.locked) {
                let have = self.picks[j].map_or(0, |p| p.1);
                let now = self.costs[j];
                for &(gpus, elsewhere) in self.menus[j].iter().filter(|e| e.0 > have) {
                    let Some(pool) = self.pool_for(j, gpus, None) else { continue };
                    let saved = now - c.priced(pool, gpus, elsewhere);
                    if saved <= EPS {
                        continue;
                    }
                    let ratio = saved / f64::from(gpus - have);
                    if best.as_ref().is_none_or(|b| ratio > b.0 + EPS) {
                        best = Some((ratio, j, Some((pool, gpus))));
                    }
                }
            }
            let Some((_, j, pick)) = best else { return changed };
            self.set(j, pick);
            changed = true;
        }
    }

    /// Moves: a job gives up GPUs (down to its next smaller count, or none) to another that
    /// grows in the same pool, where that lowers the sum; the best such move per giver.
    fn exchange(&mut self) -> bool {
        let mut changed = false;
        for a in 0..self.jobs.len() {
            let ca = &self.jobs[a];
            let Some((pool, have)) = self.picks[a] else { continue };
            if ca.locked {
                continue;
            }
            let smaller = self.menus[a].iter().rev().map(|e| e.0).find(|&n| n < have);
            let mut best: Option<(f64, Pick, usize, Pick)> = None;
            for keep in [smaller, Some(0)].into_iter().flatten() {
                let give = if keep == 0 { None } else { Some((pool, keep)) };
                let loss = ca.cost(give) - self.costs[a];
                let freed = i64::from(have - keep);
                for (b, cb) in self.jobs.iter().enumerate() {
                    if b == a || cb.locked {
                        continue;
                    }
                    let from = self.picks[b].filter(|p| p.0 == pool).map_or(0, |p| p.1);
                    let room = self.free[pool] + freed + i64::from(from);
                    let now = self.costs[b];
                    for &(gpus, elsewhere) in self.menus[b].iter().filter(|e| e.0 > from) {
                        if i64::from(gpus) > room {
                            break;
                        }
                        let delta = loss + cb.priced(pool, gpus, elsewhere) - now;
                        if delta < -EPS && best.as_ref().is_none_or(|x| delta < x.0 - EPS) {
                            best = Some((delta, give, b, Some((pool, gpus))));
                        }
                    }
                }
            }
            if let Some((_, give, b, take)) = best {
                self.set(a, give);
                self.set(b, take);
                changed = true;
            }
        }
        changed
    }

    fn improve(&mut self) {
        for _ in 0..ROUNDS {
            let grew = self.upgrade();
            let moved = self.exchange();
            if !grew && !moved {
                break;
            }
        }
    }
}

/// The picks of least total cost for `jobs` on pools of `capacity` GPUs: a locked job keeps
/// its current allocation, no pool gives more GPUs than it has.
pub(crate) fn search(jobs: &[Candidate], capacity: &[u32]) -> Vec<Pick> {
    let menus: Vec<Vec<(u32, f64)>> = jobs.iter().map(Candidate::menu).collect();
    let mut empty = State {
        jobs,
        menus: &menus,
        picks: vec![None; jobs.len()],
        costs: jobs.iter().map(|c| c.idle).collect(),
        free: capacity.iter().map(|&c| i64::from(c)).collect(),
    };
    let mut warm = empty.clone();
    for (j, c) in jobs.iter().enumerate() {
        if let Some((pool, gpus, _)) = c.current.filter(|cur| cur.0 < capacity.len())
            && warm.free[pool] >= i64::from(gpus)
        {
            warm.set(j, Some((pool, gpus)));
            if c.locked {
                empty.set(j, Some((pool, gpus)));
            }
        }
    }
    empty.improve();
    warm.improve();
    // Ties go to the warm start: it restarts fewer jobs.
    if empty.total() < warm.total() - EPS { empty.picks } else { warm.picks }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jobs_counts_are_its_options_with_its_current_count_in_its_place() {
        let c = |current| Candidate { options: vec![(1, 4.0), (4, 2.0), (8, 1.0)], idle: 9.0, current, locked: false };
        let counts = |c: Candidate| c.counts().collect::<Vec<_>>();
        assert_eq!(counts(c(None)), [1, 4, 8]);
        assert_eq!(counts(c(Some((0, 2, 3.0)))), [1, 2, 4, 8]);
        assert_eq!(counts(c(Some((0, 4, 3.0)))), [1, 4, 8], "a count among the options comes once");
        assert_eq!(counts(c(Some((0, 16, 3.0)))), [1, 4, 8, 16]);
        assert_eq!(counts(Candidate { options: Vec::new(), ..c(Some((1, 2, 3.0))) }), [2]);
    }
}
