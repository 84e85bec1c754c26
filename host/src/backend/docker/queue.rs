//! The default placement, for a policy that does not place: queued containers start in
//! arrival order on the engine they were created on, each on the first free GPUs there, while
//! the oldest one fits (strict first come, first served). A container that asks for more
//! GPUs than its engine has can never start there: it is reported once and skipped, and does
//! not hold up the ones behind it. Neither does one the engine refused to start (its image
//! is gone, its command does not exist): that is reported once, and only a policy's `place`
//! tries it again.

use wasmsched_rules::fit::{self as rules, Ask, could_ever_fit};
use wasmsched_rules::{GpuBook, Ledger};

use super::Docker;
use crate::backend::Backend;
use crate::bindings::wit;
use crate::world::World;

impl Docker {
    /// The default placement's turns now: the queued containers on engines that are up (of
    /// `only`, when given), strict first come, first served, over the free GPUs.
    fn turns(&self, world: &World, only: Option<&[u32]>) -> Vec<Turn> {
        let waiting: Vec<Waiting> = self
            .jobs
            .values()
            .filter(|m| self.up.get(m.engine).copied().unwrap_or(false) && m.refused.is_none())
            .filter(|m| only.is_none_or(|only| only.contains(&m.handle)))
            .filter(|m| world.state(m.handle).is_some_and(|s| !s.is_running()))
            .map(|m| Waiting {
                handle: m.handle,
                engine: m.engine,
                gpus: m.gpus_asked,
                arrived_unix_ms: m.arrived_unix_ms,
                tenant: world.state(m.handle).map_or(0, |s| s.tenant as usize),
            })
            .collect();
        if waiting.is_empty() {
            return Vec::new();
        }
        first_fit(waiting, world.gpu_book(), world.ledger())
    }

    /// The queued containers the default placement would start now, in its order.
    pub(super) fn startable(&self, world: &World) -> Vec<u32> {
        let turns = self.turns(world, None);
        turns.into_iter().filter_map(|t| if let Turn::Start { handle, .. } = t { Some(handle) } else { None }).collect()
    }

    /// Start what the default placement starts now (of `only`, when given) on the engines that
    /// answered at the last observation. Returns the jobs started.
    pub(super) fn place_queued(&mut self, world: &mut World, only: Option<&[u32]>) -> Vec<u32> {
        let mut actions = Vec::new();
        for turn in self.turns(world, only) {
            match turn {
                Turn::Start { handle, engine, gpus } => actions.push(wit::Action {
                    job: handle,
                    kind: wit::ActionKind::Place(wit::Placement {
                        nodes: vec![wit::NodePlacement { node: engine as u32, gpus }],
                        share: false,
                    }),
                    reason: "default placement: first come, first served".into(),
                }),
                Turn::Never { handle, engine } => {
                    let name = world.spec(handle).map_or_else(|| handle.to_string(), |s| s.name.clone());
                    let asked = world.spec(handle).map_or(0, |s| s.gpus);
                    let endpoint = self.engines[engine].endpoint.clone();
                    let has = world.nodes().get(engine).map_or(0, |n| n.gpu_memory_bytes.len());
                    self.log_once(format!("never:{handle}"), || {
                        format!(
                            "job {name} asks for {asked} GPUs and its engine {endpoint} has {has}: the default \
                             placement cannot start it there (a placing policy may put it on another node); \
                             the jobs behind it go ahead"
                        )
                    });
                }
            }
        }
        let errors = self.apply(&actions, world);
        for e in &errors {
            let name = world.spec(e.job).map_or_else(|| e.job.to_string(), |s| s.name.clone());
            self.log_once(format!("start:{}:{}", e.job, e.reason), || {
                format!("job {name}: the default placement could not start it ({}); it is left queued", e.reason)
            });
        }
        actions.iter().map(|a| a.job).filter(|job| errors.iter().all(|e| e.job != *job)).collect()
    }
}

/// A queued container, as the default placement sees it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Waiting {
    /// The job's handle.
    pub handle: u32,
    /// The engine it was created on.
    pub engine: usize,
    /// The GPUs it asks for.
    pub gpus: u32,
    /// When the job arrived, Unix milliseconds (ties go to the older handle).
    pub arrived_unix_ms: u64,
    /// Its tenant's index in the ledger.
    pub tenant: usize,
}

/// What the default placement does with one queued container.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Turn {
    /// Start it on its engine with these GPUs (indices there).
    Start {
        /// The job.
        handle: u32,
        /// Its engine.
        engine: usize,
        /// The GPUs it gets.
        gpus: Vec<u32>,
    },
    /// Its engine has fewer GPUs than it asks for: it cannot start there.
    Never {
        /// The job.
        handle: u32,
        /// Its engine.
        engine: usize,
    },
}

/// Strict FCFS first fit, each container on its own engine, over the GPUs `book` says are
/// free; a container whose tenant is at its limit (`ledger`) is passed over.
pub(super) fn first_fit(mut waiting: Vec<Waiting>, mut book: GpuBook, mut ledger: Ledger) -> Vec<Turn> {
    waiting.sort_by_key(|w| (w.arrived_unix_ms, w.handle));
    let mut turns = Vec::new();
    for w in waiting {
        if ledger.check(w.tenant, u64::from(w.gpus)).is_err() {
            continue;
        }
        let (ask, engine) = (Ask { gpus: w.gpus, replicas: 1 }, [w.engine as u32]);
        if !could_ever_fit(&book, ask, &engine) {
            turns.push(Turn::Never { handle: w.handle, engine: w.engine });
            continue;
        }
        let Some(mut placed) = rules::first_fit(&book, ask, &engine) else { break };
        book.take(&placed, w.handle);
        ledger.hold(w.tenant, u64::from(w.gpus));
        let (_, gpus) = placed.swap_remove(0);
        turns.push(Turn::Start { handle: w.handle, engine: w.engine, gpus });
    }
    turns
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(handle: u32, engine: usize, gpus: u32, arrived_unix_ms: u64) -> Waiting {
        Waiting { handle, engine, gpus, arrived_unix_ms, tenant: 0 }
    }

    /// Engines of `count` GPUs each, those not in `free` held.
    fn book(count: &[u32], free: &[&[u32]]) -> GpuBook {
        let mut book = GpuBook::new(count.iter().copied());
        for (engine, free) in free.iter().enumerate() {
            for index in (0..count[engine]).filter(|i| !free.contains(i)) {
                book.hold(engine as u32, index, u32::MAX);
            }
        }
        book
    }

    fn started(turns: &[Turn]) -> Vec<(u32, Vec<u32>)> {
        turns
            .iter()
            .filter_map(|t| match t {
                Turn::Start { handle, gpus, .. } => Some((*handle, gpus.clone())),
                Turn::Never { .. } => None,
            })
            .collect()
    }

    #[test]
    fn jobs_start_in_arrival_order_on_the_first_free_gpus() {
        let waiting = vec![job(7, 0, 1, 300), job(3, 0, 2, 100), job(5, 0, 0, 200)];
        let turns = first_fit(waiting, book(&[6], &[&[1, 2, 3, 5]]), Ledger::default());
        assert_eq!(started(&turns), [(3, vec![1, 2]), (5, vec![]), (7, vec![3])]);
    }

    #[test]
    fn the_oldest_job_that_does_not_fit_holds_up_the_younger_ones() {
        let waiting = vec![job(0, 0, 3, 100), job(1, 0, 1, 200), job(2, 1, 0, 300)];
        let turns = first_fit(waiting, book(&[4, 0], &[&[0, 1], &[]]), Ledger::default());
        assert!(turns.is_empty(), "strict FCFS: {turns:?}");
    }

    #[test]
    fn a_job_its_engine_can_never_hold_is_reported_and_does_not_block() {
        let waiting = vec![job(0, 1, 2, 100), job(1, 1, 0, 200), job(2, 0, 2, 300)];
        let turns = first_fit(waiting, book(&[2, 0], &[&[0, 1], &[]]), Ledger::default());
        assert_eq!(turns[0], Turn::Never { handle: 0, engine: 1 });
        assert_eq!(started(&turns), [(1, vec![]), (2, vec![0, 1])]);
    }

    #[test]
    fn arrival_ties_go_to_the_older_handle() {
        let turns = first_fit(vec![job(4, 0, 1, 100), job(2, 0, 1, 100)], book(&[1], &[&[0]]), Ledger::default());
        assert_eq!(started(&turns), [(2, vec![0])]);
    }

    #[test]
    fn a_container_whose_tenant_is_at_its_limit_is_passed_over_not_waited_for() {
        use wasmsched_rules::Entitlement;
        let tenant = |name: &str, quota| Entitlement { name: name.into(), quota, ..Entitlement::default() };
        let mut ledger = Ledger::new(vec![tenant("a", Some(2)), tenant("b", None)]);
        ledger.hold(0, 1);
        let a = |handle, gpus, at| Waiting { tenant: 0, ..job(handle, 0, gpus, at) };
        let b = |handle, gpus, at| Waiting { tenant: 1, ..job(handle, 0, gpus, at) };
        let waiting = vec![a(1, 2, 10), a(2, 1, 20), a(3, 1, 30), b(4, 2, 40)];
        let turns = first_fit(waiting, book(&[6], &[&[1, 2, 3, 4, 5]]), ledger);
        let started: Vec<u32> = turns
            .iter()
            .filter_map(|t| if let Turn::Start { handle, .. } = t { Some(*handle) } else { None })
            .collect();
        assert_eq!(started, [2, 4], "job 1 would pass a's quota of 2, job 3 too once job 2 took the last one");
    }
}
