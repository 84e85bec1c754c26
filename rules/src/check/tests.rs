use super::*;
use crate::{JobId, NodeId, NodePlacement};

/// Nodes (name, CPU, memory, GPUs) and jobs (GPUs asked, replicas, where it runs with its
/// GPUs, memory used).
struct Plain {
    nodes: Vec<(String, u64, u64, u32)>,
    jobs: Vec<PlainJob>,
    /// The nodes that cannot take work.
    down: Vec<u32>,
    /// Every job's GPU counts (a job not listed here is rigid) and batch sizes.
    scaling: Vec<(u32, Vec<u32>, (u32, u32))>,
    /// Each job's tenant (a job not listed has none).
    tenants: Vec<(u32, usize)>,
}

/// GPUs asked, replicas, where it runs with the (node, index) of its GPUs, memory used.
type PlainJob = (u32, u32, Option<(u32, Vec<(u32, u32)>)>, u64);

impl World for Plain {
    fn node(&self, node: NodeId) -> Option<NodeCap<'_>> {
        let node = node.0;
        self.nodes.get(node as usize).map(|(name, cpu, memory, gpus)| NodeCap {
            name,
            cpu_millicores: *cpu,
            memory_bytes: *memory,
            gpus: *gpus,
            down: self.down.contains(&node),
        })
    }
    fn node_count(&self) -> usize {
        self.nodes.len()
    }
    fn job(&self, job: JobId) -> Option<JobNow<'_>> {
        let job = job.0;
        let (counts, batch_sizes) = match self.scaling.iter().find(|s| s.0 == job) {
            Some((_, counts, batch)) => (counts.as_slice(), *batch),
            None => (std::slice::from_ref(&self.jobs.get(job as usize)?.0), (0, 0)),
        };
        self.jobs.get(job as usize).map(|(gpus, replicas, at, memory)| JobNow {
            gpus: *gpus,
            replicas: *replicas,
            node: at.as_ref().map(|(n, _)| NodeId(*n)),
            memory_used_bytes: *memory,
            gpu_counts: counts,
            batch_sizes,
            tenant: self.tenants.iter().find(|t| t.0 == job).map(|t| t.1),
        })
    }
    fn gpus_of(&self, job: JobId) -> Vec<(NodeId, u32)> {
        let at = self.jobs.get(job.index()).and_then(|j| j.2.as_ref());
        at.map(|(_, g)| g.iter().map(|&(n, i)| (NodeId(n), i)).collect()).unwrap_or_default()
    }
    fn memory_used_on(&self, node: NodeId) -> u64 {
        self.jobs.iter().filter(|j| j.2.as_ref().is_some_and(|(n, _)| *n == node.0)).map(|j| j.3).sum()
    }
}

impl Plain {
    fn book(&self) -> GpuBook {
        let mut book = GpuBook::new(self.nodes.iter().map(|n| n.3));
        for (job, (_, _, at, _)) in self.jobs.iter().enumerate() {
            for &(node, index) in at.as_ref().map(|(_, g)| g.as_slice()).unwrap_or_default() {
                book.hold(NodeId(node), index, JobId(job as u32));
            }
        }
        book
    }
}

/// Two nodes of 4 GPUs, 8 cores and 64 GiB; job 0 runs on node 0 holding GPU 0; jobs 1 (2
/// GPUs, 2 replicas) and 2 (1 GPU) wait.
fn gpu_world() -> Plain {
    let node = |n: u32| (format!("node-{n}"), 8000, 64 << 30, 4);
    Plain {
        nodes: vec![node(0), node(1)],
        jobs: vec![(1, 1, Some((0, vec![(0, 0)])), 1 << 30), (2, 2, None, 0), (1, 1, None, 0)],
        down: Vec::new(),
        scaling: Vec::new(),
        tenants: Vec::new(),
    }
}

type Entries = Vec<NodePlacement>;

/// A resize's entries and batch size.
type Resize = (Entries, Option<u32>);

fn place(nodes: &[(u32, &[u32])]) -> Entries {
    nodes.iter().map(|(n, g)| NodePlacement::new(*n, *g)).collect()
}

fn one(world: &Plain, job: u32, act: Act<'_, NodePlacement>) -> Result<(), String> {
    Checker::new(world.book()).check(world, JobId(job), &act).map_err(|p| p.to_string())
}

#[test]
fn every_placement_error_is_refused_with_its_reason() {
    let w = gpu_world();
    let cases: Vec<(u32, Entries, &str)> = vec![
        (9, place(&[(0, &[1])]), "job 9 does not exist"),
        (1, place(&[]), "names no node"),
        (1, place(&[(5, &[0, 1])]), "node 5 does not exist (2 nodes)"),
        (1, place(&[(0, &[1, 7])]), "node node-0 has no GPU 7 (4 GPUs)"),
        (1, place(&[(0, &[0, 1])]), "GPU 0 of node node-0 is held by job 0"),
        (1, place(&[(0, &[1, 1])]), "names GPU 1 of node node-0 twice"),
        (1, place(&[(0, &[1, 2, 3, 0, 1])]), "node node-0 has 4 GPUs; the placement asks for 5"),
        (1, place(&[(0, &[1])]), "job 1 asks for 2 GPUs; the placement gives 1"),
        (2, place(&[(0, &[1]), (1, &[])]), "job 2 runs on at most 1 node(s) (1 replicas); the placement names 2"),
        (1, place(&[(0, &[1, 2]), (1, &[])]), "whole replicas of 1 GPU(s); node node-1 gets 0"),
        (1, place(&[(1, &[0]), (1, &[1])]), "names node node-1 twice"),
        (0, place(&[(1, &[0])]), "job 0 already runs on node node-0; migrate it, or preempt it first"),
    ];
    for (job, nodes, why) in cases {
        let got = one(&w, job, Act::Place { nodes: &nodes, share: false }).unwrap_err();
        assert!(got.contains(why), "{nodes:?}: expected {why:?}, got {got:?}");
    }
    for act in [Act::Preempt, Act::SetCpu(Some(1000)), Act::Migrate(NodeId(1))] {
        assert_eq!(one(&w, 2, act).unwrap_err(), "job 2 is queued, not running: place it first");
    }
    assert_eq!(one(&w, 2, Act::Stop), Ok(()), "a queued job may be stopped");
}

#[test]
fn limits_shares_and_migrations_are_held_to_the_node() {
    let mut w = gpu_world();
    let refused = |w: &Plain, act| one(w, 0, act).unwrap_err();
    assert!(refused(&w, Act::SetCpu(Some(0))).contains("below the minimum of 10"));
    assert!(refused(&w, Act::SetCpu(Some(u64::MAX))).contains("more than node node-0 has (8000)"));
    assert!(refused(&w, Act::SetMemory(Some(1))).contains("below the minimum of 6291456"));
    assert!(refused(&w, Act::Migrate(NodeId(7))).contains("node 7 does not exist"));
    assert!(refused(&w, Act::Migrate(NodeId(0))).contains("already runs on node node-0"));
    assert!(refused(&w, Act::SetGpuShare { gpu: 4, percent: 50 }).contains("has no GPU 4"));
    assert!(refused(&w, Act::SetGpuShare { gpu: 0, percent: 101 }).contains("outside 1–100"));
    assert_eq!(one(&w, 0, Act::SetCpu(None)), Ok(()));
    assert_eq!(one(&w, 0, Act::Migrate(NodeId(1))), Ok(()));
    w.jobs[0].3 = 70 << 30;
    assert!(refused(&w, Act::Migrate(NodeId(1))).contains("node node-1 is full"));
}

#[test]
fn a_preemption_frees_gpus_for_a_later_placement_and_the_job_is_not_acted_on_again() {
    let w = gpu_world();
    let mut c = Checker::new(w.book());
    let none: &[NodePlacement] = &[];
    assert_eq!(c.check(&w, JobId(0), &Act::<NodePlacement>::Preempt), Ok(()));
    let onto_freed = place(&[(0, &[0])]);
    assert_eq!(c.check(&w, JobId(2), &Act::Place { nodes: &onto_freed, share: false }), Ok(()));
    let again = c.check(&w, JobId(0), &Act::Place { nodes: &place(&[(0, &[1])]), share: false }).unwrap_err();
    assert_eq!(again, Problem::AlreadyMoved { job: JobId(0) });
    let after = c.check(&w, JobId(0), &Act::Place { nodes: none, share: false });
    assert_eq!(after, Err(Problem::AlreadyMoved { job: JobId(0) }));
    assert_eq!(
        c.check(&w, JobId(0), &Act::<NodePlacement>::SetCpu(Some(1000))),
        Err(Problem::AlreadyMoved { job: JobId(0) })
    );
    let held = c.check(&w, JobId(1), &Act::Place { nodes: &place(&[(0, &[0, 1])]), share: false });
    assert_eq!(held, Err(Problem::GpuHeld { gpu: 0, node: "node-0".into(), holder: JobId(2) }));
}

#[test]
fn a_shared_gpu_stays_held_while_any_holder_is_left() {
    let mut w = gpu_world();
    w.jobs.push((1, 1, Some((0, vec![(0, 0)])), 0));
    let mut c = Checker::new(w.book());
    assert_eq!(c.check(&w, JobId(0), &Act::<NodePlacement>::Preempt), Ok(()));
    let onto = place(&[(0, &[0])]);
    let held = c.check(&w, JobId(2), &Act::Place { nodes: &onto, share: false });
    assert_eq!(held, Err(Problem::GpuHeld { gpu: 0, node: "node-0".into(), holder: JobId(3) }));
    assert_eq!(c.check(&w, JobId(2), &Act::Place { nodes: &onto, share: true }), Ok(()));
}

/// Two nodes of at most four GPUs, three live jobs of which two wait.
const ROOM: Room = Room { jobs: 3, queued: 2, nodes: 2, gpus_per_node: 4 };

/// A decision's acts as [`size`] takes them.
fn sized(acts: &[Act<'_, NodePlacement>]) -> Result<(), Oversized> {
    size(acts.iter().copied(), ROOM)
}

#[test]
fn a_decision_larger_than_the_world_needs_is_refused_whole() {
    let stops = vec![Act::<NodePlacement>::Stop; max_actions(3)];
    assert_eq!(sized(&stops), Ok(()));
    let e = size(vec![Act::<NodePlacement>::Stop; 1000].into_iter(), Room { jobs: 2, ..ROOM }).unwrap_err();
    assert_eq!(e.to_string(), "decision has 1000 actions; at most 80 are accepted for 2 jobs");

    let two = place(&[(0, &[0, 1]), (1, &[0, 1])]);
    let place2 = Act::Place { nodes: &two, share: false };
    assert_eq!(sized(&[place2, place2]), Ok(()), "as many placements as queued jobs, each within the room");
    assert_eq!(
        sized(&[place2, Act::Preempt, place2, place2]).unwrap_err().to_string(),
        "decision places 3 jobs; 2 are queued"
    );
    let three = place(&[(0, &[0]), (1, &[0]), (0, &[1])]);
    assert_eq!(
        sized(&[Act::Stop, Act::Place { nodes: &three, share: false }]).unwrap_err(),
        Oversized::Entries { action: 1, entries: 3, nodes: 2 }
    );
    let wide = place(&[(0, &[0, 1, 2, 3, 0])]);
    assert_eq!(
        sized(&[Act::Place { nodes: &wide, share: true }]).unwrap_err().to_string(),
        "action 0 names 5 GPUs of one node; no node has more than 4"
    );
}

#[test]
fn nothing_is_placed_moved_or_resized_onto_a_node_that_cannot_take_work() {
    let mut w = gpu_world();
    w.down = vec![1];
    let refused = "node node-1 cannot take work now";
    let place_there = Act::Place { nodes: &place(&[(1, &[0])])[..], share: false };
    assert!(one(&w, 2, place_there).unwrap_err().contains(refused));
    assert!(one(&w, 0, Act::<NodePlacement>::Migrate(NodeId(1))).unwrap_err().contains(refused));
    let resize_there = Act::Resize { nodes: &place(&[(1, &[0])])[..], share: false, batch_size: None };
    assert!(one(&w, 0, resize_there).unwrap_err().contains(refused));
    assert_eq!(one(&w, 2, Act::Place { nodes: &place(&[(0, &[1])])[..], share: false }), Ok(()));
}

#[test]
fn a_resize_takes_an_allowed_count_and_batch_size_and_may_reuse_the_jobs_own_gpus() {
    let mut w = gpu_world();
    w.scaling = vec![(0, vec![1, 2, 4, 8], (64, 1024))];
    let resize = |nodes: &[(u32, &[u32])], batch_size| (place(nodes), batch_size);
    let cases: Vec<(Resize, Result<(), &str>)> = vec![
        (resize(&[(0, &[0, 1])], Some(128)), Ok(())),
        (resize(&[(0, &[0, 1, 2, 3]), (1, &[0, 1, 2, 3])], None), Ok(())),
        (resize(&[(0, &[1, 2, 3])], None), Err("job 0 runs on [1, 2, 4, 8] GPUs (its scaling); the placement gives 3")),
        (resize(&[(0, &[0])], Some(32)), Err("job 0 accepts batch sizes 64–1024; the resize asks for 32")),
        (resize(&[(0, &[0, 1]), (1, &[])], None), Err("the resize names node node-1 with no GPU")),
        (resize(&[(0, &[0]), (0, &[1])], None), Err("names node node-0 twice")),
    ];
    for ((entries, batch_size), want) in cases {
        let got = one(&w, 0, Act::Resize { nodes: &entries[..], share: false, batch_size });
        match want {
            Ok(()) => assert_eq!(got, Ok(()), "{entries:?}"),
            Err(text) => assert!(got.as_ref().is_err_and(|e| e.contains(text)), "{entries:?}: {got:?}"),
        }
    }
    // A rigid job resizes to its own count only, and sets no batch size.
    assert!(
        one(&w, 2, Act::Resize { nodes: &place(&[(0, &[1])])[..], share: false, batch_size: None })
            .unwrap_err()
            .contains("is queued")
    );
    w.jobs[2].2 = Some((1, vec![(1, 0)]));
    assert_eq!(one(&w, 2, Act::Resize { nodes: &place(&[(0, &[1])])[..], share: false, batch_size: None }), Ok(()));
    let two = Act::Resize { nodes: &place(&[(0, &[1, 2])])[..], share: false, batch_size: None };
    assert!(one(&w, 2, two).unwrap_err().contains("runs on [1] GPUs"));
    let batch = Act::Resize { nodes: &place(&[(0, &[1])])[..], share: false, batch_size: Some(64) };
    assert!(one(&w, 2, batch).unwrap_err().contains("has no batch size the host sets"));
    // A resize frees the GPUs it leaves for the actions after it, and holds the ones it takes.
    let mut checker = Checker::new(w.book());
    let to_two = place(&[(0, &[1, 2])]);
    assert_eq!(
        checker.check(&w, JobId(0), &Act::Resize { nodes: &to_two[..], share: false, batch_size: None }),
        Ok(())
    );
    assert_eq!(checker.book().holders(NodeId(0), 0), &[] as &[JobId]);
    assert_eq!(checker.book().holders(NodeId(0), 2), &[JobId(0)]);
}

#[test]
fn an_elastic_job_is_placed_on_any_of_its_counts_spread_as_a_resize_spreads() {
    let mut w = gpu_world();
    w.scaling = vec![(2, vec![1, 2, 4, 8], (8, 512))];
    let place_on = |nodes: &[(u32, &[u32])]| one(&w, 2, Act::Place { nodes: &place(nodes)[..], share: false });
    assert_eq!(
        place_on(&[(0, &[1, 2]), (1, &[0, 1, 2, 3])]),
        Err("job 2 runs on [1, 2, 4, 8] GPUs (its scaling); the placement gives 6".into())
    );
    assert_eq!(place_on(&[(0, &[1, 2, 3]), (1, &[0])]), Ok(()), "four GPUs over two nodes, though it asked for one");
    assert!(place_on(&[(0, &[0, 1])]).unwrap_err().contains("held by job 0"));
}

#[test]
fn a_tenant_is_held_to_its_limit_and_a_preemption_of_its_own_makes_room() {
    use crate::tenants::{Entitlement, Ledger};
    // Jobs 0 (running, 1 GPU) and 1 (2 GPUs) are tenant a's, quota 2 and no cohort; job 2
    // (1 GPU) is tenant b's, with no quota.
    let mut w = gpu_world();
    w.tenants = vec![(0, 0), (1, 0), (2, 1)];
    let entitled = |name: &str, quota| Entitlement { name: name.into(), quota, ..Entitlement::default() };
    let mut ledger = Ledger::new(vec![entitled("a", Some(2)), entitled("b", None)]);
    ledger.hold(0, 1);
    let mut c = Checker::new(w.book()).with_tenants(ledger);
    let two = place(&[(1, &[0]), (1, &[1])]);
    let over = c.check(&w, JobId(1), &Act::Place { nodes: &two[..1], share: false });
    assert!(over.is_err(), "job 1 asks for 2 GPUs; one entry gives 1");
    let spread = place(&[(1, &[0, 1])]);
    let over = c.check(&w, JobId(1), &Act::Place { nodes: &spread, share: false }).unwrap_err();
    assert_eq!(over.to_string(), "tenant a holds 1 GPUs of its limit of 2 (its quota); 2 more would pass it");
    assert_eq!(
        c.check(&w, JobId(2), &Act::Place { nodes: &place(&[(0, &[3])]), share: false }),
        Ok(()),
        "b has no quota"
    );
    assert_eq!(c.check(&w, JobId(0), &Act::<NodePlacement>::Preempt), Ok(()));
    assert_eq!(
        c.check(&w, JobId(1), &Act::Place { nodes: &spread, share: false }),
        Ok(()),
        "job 0's GPU went back to a"
    );
    assert_eq!((c.ledger().held(0), c.ledger().held(1)), (2, 1));
}
