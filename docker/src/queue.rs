//! The default placement, for a policy that does not place: queued containers start in
//! arrival order on the engine they were created on, each on the first free GPUs there, while
//! the oldest one fits (strict first come, first served: `wasmsched_core::live::queue`). A
//! container that asks for more GPUs than its engine has can never start there: it is reported
//! once and skipped, and does not hold up the ones behind it. Neither does one the engine
//! refused to start (its image is gone, its command does not exist): that is reported once,
//! and only a policy's `place` tries it again.

use wasmsched_core::live::queue::{self, Eligible, Turn, Waiting};
use wasmsched_core::world::World;
use wasmsched_rules::fit::{Ask, could_ever_fit};
use wasmsched_rules::{GpuBook, JobId, NodeId};

use super::Docker;
use wasmsched_core::backend::Backend;

/// A container goes to the engine it was created on (its `ask`), or nowhere.
struct OwnEngine;

impl Eligible<NodeId> for OwnEngine {
    fn ever(&mut self, job: &Waiting<NodeId>, book: &GpuBook) -> bool {
        could_ever_fit(book, Ask { gpus: job.gpus, replicas: 1 }, &[job.ask])
    }

    fn now(&mut self, _: usize, job: &Waiting<NodeId>, _: &GpuBook) -> Vec<NodeId> {
        vec![job.ask]
    }
}

impl Docker {
    /// The default placement's turns now: the queued containers on engines that are up (of
    /// `only`, when given), strict first come, first served, over the free GPUs.
    fn turns(&self, world: &World, only: Option<&[JobId]>) -> Vec<Turn> {
        let waiting: Vec<Waiting<NodeId>> = self
            .jobs
            .values()
            .filter(|m| self.up.get(m.engine).copied().unwrap_or(false) && m.job.refused.is_none())
            .filter(|m| only.is_none_or(|only| only.contains(&m.job.handle)))
            .filter(|m| world.state(m.job.handle).is_some_and(|s| !s.is_running()))
            .map(|m| Waiting {
                handle: m.job.handle,
                gpus: m.job.gpus_asked,
                arrived_unix_ms: m.job.arrived_unix_ms,
                tenant: world.state(m.job.handle).map_or(0, |s| s.tenant as usize),
                ask: NodeId(m.engine as u32),
            })
            .collect();
        if waiting.is_empty() {
            return Vec::new();
        }
        queue::first_come_first_served(waiting, world.gpu_book(), world.ledger(), &mut OwnEngine)
    }

    /// The queued containers the default placement would start now, in its order.
    pub(super) fn startable(&self, world: &World) -> Vec<JobId> {
        queue::started(&self.turns(world, None))
    }

    /// Start what the default placement starts now (of `only`, when given) on the engines that
    /// answered at the last observation. Returns the jobs started.
    pub(super) fn place_queued(&mut self, world: &mut World, only: Option<&[JobId]>) -> Vec<JobId> {
        let (actions, never) = queue::placements(self.turns(world, only));
        for handle in never {
            let name = world.spec(handle).map_or_else(|| handle.to_string(), |s| s.name.clone());
            let asked = world.spec(handle).map_or(0, |s| s.gpus);
            let engine = self.jobs.values().find(|m| m.job.handle == handle).map_or(0, |m| m.engine);
            let endpoint = self.engines[engine].endpoint.clone();
            let has = world.nodes().get(engine).map_or(0, |n| n.gpu_memory_bytes.len());
            self.logged.once(format!("never:{handle}"), || {
                format!(
                    "job {name} asks for {asked} GPUs and its engine {endpoint} has {has}: the default \
                     placement cannot start it there (a placing policy may put it on another node); \
                     the jobs behind it go ahead"
                )
            });
        }
        let errors = self.apply(&actions, world);
        for e in &errors {
            let name = world.spec(e.job).map_or_else(|| e.job.to_string(), |s| s.name.clone());
            self.logged.once(format!("start:{}:{}", e.job, e.reason), || {
                format!("job {name}: the default placement could not start it ({}); it is left queued", e.reason)
            });
        }
        queue::succeeded(&actions, &errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use wasmsched_rules::Ledger;

    fn job(handle: u32, engine: u32, gpus: u32, arrived_unix_ms: u64) -> Waiting<NodeId> {
        Waiting { handle: JobId(handle), gpus, arrived_unix_ms, tenant: 0, ask: NodeId(engine) }
    }

    fn first_fit(waiting: Vec<Waiting<NodeId>>, book: GpuBook, ledger: Ledger) -> Vec<Turn> {
        queue::first_come_first_served(waiting, book, ledger, &mut OwnEngine)
    }

    /// Engines of `count` GPUs each, those not in `free` held.
    fn book(count: &[u32], free: &[&[u32]]) -> GpuBook {
        let mut book = GpuBook::new(count.iter().copied());
        for (engine, free) in free.iter().enumerate() {
            for index in (0..count[engine]).filter(|i| !free.contains(i)) {
                book.hold(NodeId(engine as u32), index, JobId(u32::MAX));
            }
        }
        book
    }

    fn started(turns: &[Turn]) -> Vec<(u32, Vec<u32>)> {
        turns
            .iter()
            .filter_map(|t| match t {
                Turn::Start { handle, nodes } => Some((handle.0, nodes[0].gpus.clone())),
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
        assert_eq!(turns[0], Turn::Never { handle: JobId(0) });
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
        let started: Vec<JobId> = turns
            .iter()
            .filter_map(|t| if let Turn::Start { handle, .. } = t { Some(*handle) } else { None })
            .collect();
        assert_eq!(started, [2, 4], "job 1 would pass a's quota of 2, job 3 too once job 2 took the last one");
    }
}
