//! The live backends' default placement, for a policy that does not place: queued jobs start
//! in arrival order (ties to the older handle), strict first come, first served, while the
//! oldest one fits, each by `wasmsched_rules::first_fit` on the nodes its backend says it may
//! take now ([`Eligible`]). A job that no node could ever hold is reported ([`Turn::Never`])
//! and skipped, and does not hold up the ones behind it; one whose tenant is at its limit is
//! passed over.

use wasmsched_rules::fit::{Ask, first_fit};
use wasmsched_rules::{GpuBook, JobId, Ledger, NodeId, NodePlacement};

use crate::bindings::wit;

/// A queued job as the default placement sees it; `ask` is what the backend checks nodes for
/// beyond GPUs (Docker: the engine it was created on; Kubernetes: requests and node selector).
#[derive(Clone, Debug, PartialEq)]
pub struct Waiting<A> {
    /// The job's handle.
    pub handle: JobId,
    /// The GPUs it asks for.
    pub gpus: u32,
    /// When it arrived, Unix ms: the queue's order.
    pub arrived_unix_ms: u64,
    /// Its tenant's index in the ledger.
    pub tenant: usize,
    /// What else it asks of a node.
    pub ask: A,
}

/// What the default placement does with one queued job.
#[derive(Clone, Debug, PartialEq)]
pub enum Turn {
    /// Start it on these nodes, with these GPUs (indices there) on each; one node unless it
    /// spans several.
    Start {
        /// The job.
        handle: JobId,
        /// Its nodes and their GPUs, its first node first.
        nodes: Vec<NodePlacement>,
    },
    /// No node could ever hold it.
    Never {
        /// The job.
        handle: JobId,
    },
}

/// A backend's eligibility rule: which nodes a queued job may take, now and ever.
pub trait Eligible<A> {
    /// The queue, in the order it is served, before the first turn (for what the backend
    /// works out once per queue).
    fn queue(&mut self, _sorted: &[Waiting<A>]) {}

    /// Whether some node could ever hold the job (with every GPU free and nothing else there).
    fn ever(&mut self, job: &Waiting<A>, book: &GpuBook) -> bool;

    /// The nodes the `k`th job of the queue may start on now, in the order to try them; the
    /// GPUs are first fit's to pick.
    fn now(&mut self, k: usize, job: &Waiting<A>, book: &GpuBook) -> Vec<NodeId>;

    /// Where the `k`th job of the queue starts now, if it fits: by default first fit on one of
    /// the nodes [`Eligible::now`] allows. A backend whose jobs span nodes fits them itself.
    fn fit(&mut self, k: usize, job: &Waiting<A>, book: &GpuBook) -> Option<Vec<NodePlacement>> {
        let order = self.now(k, job, book);
        first_fit(book, Ask { gpus: job.gpus, replicas: 1 }, &order)
    }

    /// The job has taken `placed`, the fit [`Eligible::fit`] gave it.
    fn took(&mut self, _job: &Waiting<A>, _placed: &[NodePlacement]) {}
}

/// Strict first come, first served over the GPUs `book` says are free, each job by first fit on
/// the nodes `eligible` allows it; a job whose tenant is at its limit (`ledger`) is passed over.
pub fn first_come_first_served<A>(
    mut waiting: Vec<Waiting<A>>,
    mut book: GpuBook,
    mut ledger: Ledger,
    eligible: &mut impl Eligible<A>,
) -> Vec<Turn> {
    waiting.sort_by_key(|w| (w.arrived_unix_ms, w.handle));
    eligible.queue(&waiting);
    let mut turns = Vec::new();
    for (k, w) in waiting.iter().enumerate() {
        if ledger.check(w.tenant, u64::from(w.gpus)).is_err() {
            continue;
        }
        if !eligible.ever(w, &book) {
            turns.push(Turn::Never { handle: w.handle });
            continue;
        }
        let Some(placed) = eligible.fit(k, w, &book) else { break };
        book.take(&placed, w.handle);
        ledger.hold(w.tenant, u64::from(w.gpus));
        eligible.took(w, &placed);
        turns.push(Turn::Start { handle: w.handle, nodes: placed });
    }
    turns
}

/// The jobs the turns start, in order.
pub fn started(turns: &[Turn]) -> Vec<JobId> {
    turns.iter().filter_map(|t| if let Turn::Start { handle, .. } = t { Some(*handle) } else { None }).collect()
}

/// The turns as `place` actions, and the jobs that can never start.
pub fn placements(turns: Vec<Turn>) -> (Vec<wit::Action>, Vec<JobId>) {
    let (mut actions, mut never) = (Vec::new(), Vec::new());
    for turn in turns {
        match turn {
            Turn::Start { handle, nodes } => actions.push(wit::Action {
                job: handle,
                kind: wit::ActionKind::Place(wit::Placement { nodes, share: false }),
                reason: "default placement: first come, first served".into(),
            }),
            Turn::Never { handle } => never.push(handle),
        }
    }
    (actions, never)
}

/// Of `actions`, the jobs whose action did not fail.
pub fn succeeded(actions: &[wit::Action], errors: &[crate::backend::ApplyError]) -> Vec<JobId> {
    actions.iter().map(|a| a.job).filter(|job| errors.iter().all(|e| e.job != *job)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each job may go to one node only (as a container on its engine).
    struct OwnNode;

    impl Eligible<NodeId> for OwnNode {
        fn ever(&mut self, job: &Waiting<NodeId>, book: &GpuBook) -> bool {
            book.gpus_on(job.ask).is_some_and(|n| n >= job.gpus)
        }
        fn now(&mut self, _: usize, job: &Waiting<NodeId>, _: &GpuBook) -> Vec<NodeId> {
            vec![job.ask]
        }
    }

    fn job(handle: u32, node: u32, gpus: u32, arrived_unix_ms: u64) -> Waiting<NodeId> {
        Waiting { handle: JobId(handle), gpus, arrived_unix_ms, tenant: 0, ask: NodeId(node) }
    }

    #[test]
    fn the_oldest_starts_first_and_a_job_that_never_fits_is_passed_over() {
        let book = GpuBook::new([2, 4]);
        let waiting = vec![job(3, 0, 1, 20), job(1, 0, 8, 10), job(2, 1, 4, 15), job(4, 0, 1, 20)];
        let turns = first_come_first_served(waiting, book, Ledger::default(), &mut OwnNode);
        assert_eq!(
            turns,
            [
                Turn::Never { handle: JobId(1) },
                Turn::Start { handle: JobId(2), nodes: vec![NodePlacement::new(1, [0, 1, 2, 3])] },
                Turn::Start { handle: JobId(3), nodes: vec![NodePlacement::new(0, [0])] },
                Turn::Start { handle: JobId(4), nodes: vec![NodePlacement::new(0, [1])] },
            ]
        );
        assert_eq!(started(&turns), [2, 3, 4]);
    }

    #[test]
    fn strict_order_stops_at_the_first_job_that_does_not_fit_now() {
        let mut book = GpuBook::new([2]);
        book.take(&[NodePlacement::new(0, [0])], JobId(99));
        let waiting = vec![job(1, 0, 2, 10), job(2, 0, 1, 20)];
        let turns = first_come_first_served(waiting, book, Ledger::default(), &mut OwnNode);
        assert!(turns.is_empty(), "the 1-GPU job does not jump the 2-GPU one: {turns:?}");
    }

    #[test]
    fn turns_become_place_actions_and_failed_ones_are_not_started() {
        let turns = vec![
            Turn::Start { handle: JobId(5), nodes: vec![NodePlacement::new(1, [2])] },
            Turn::Never { handle: JobId(6) },
        ];
        let (actions, never) = placements(turns);
        assert_eq!(never, [6]);
        assert_eq!(actions.len(), 1);
        let errors = [crate::backend::ApplyError { job: JobId(5), reason: "refused".into() }];
        assert!(succeeded(&actions, &errors).is_empty());
        assert_eq!(succeeded(&actions, &[]), [5]);
    }
}
