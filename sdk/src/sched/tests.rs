//! The tests of first fit, the book and the checks.

use super::*;
use crate::testing::{Inspect, TestWorld, job};
use crate::{Bytes, Runner};
use wasmsched_rules::first_fit;

/// The world as a policy sees it.
fn seen(world: &mut TestWorld) -> Runner<Inspect> {
    let mut r = Runner::from_policy(Inspect);
    r.decide(world.snapshot()).unwrap();
    r
}

fn entries(p: &Placement) -> Vec<(u32, Vec<u32>)> {
    p.nodes().iter().map(|(n, g)| (n.0, g.clone())).collect()
}

#[test]
fn most_free_first_spreads_jobs_over_the_emptiest_nodes() {
    let mut w = TestWorld::gpu_cluster(&[4, 4, 2]);
    let a = w.queue_job(job("a", "cifar10").gpus(1));
    w.start(a, NodeId(0), &[0]);
    let r = seen(&mut w);
    let mut free = FreeGpus::of(&r.view()).ordered(NodeOrder::MostFree);
    assert_eq!(entries(&free.fit(1, 1).unwrap()), [(1, vec![0])], "node 1 has the most free GPUs");
    assert_eq!(entries(&free.fit(1, 1).unwrap()), [(0, vec![1])], "a tie of 3 free: the lower index");
    let mut packed = FreeGpus::of(&r.view());
    assert_eq!(entries(&packed.fit(1, 1).unwrap()), [(0, vec![1])], "index order packs node 0");
}

#[test]
fn a_node_that_takes_no_work_gets_nothing_and_the_checks_say_why() {
    let mut w = TestWorld::gpu_cluster(&[4, 4]);
    w.set_gpu_type(NodeId(1), "a100");
    w.set_takes_work(NodeId(0), false);
    let a = w.queue_job(job("a", "cifar10").gpus(2));
    let cpu = w.queue_job(job("cpu", "cifar10"));
    let r = seen(&mut w);
    let s = r.view();
    assert!(!s.node(NodeId(0)).unwrap().takes_work() && s.node(NodeId(1)).unwrap().takes_work());
    assert_eq!(s.node(NodeId(1)).unwrap().gpu_type(), "a100");
    let mut free = FreeGpus::of(&s);
    assert_eq!(entries(&free.fit(2, 1).unwrap()), [(1, vec![0, 1])], "node 0 is skipped");
    assert_eq!(free.fit(0, 1).map(|p| p.node()), Some(NodeId(1)), "a CPU job too");
    let mut d = Decision::new();
    first_fit_cpu_jobs(&s, &mut d, "p", |_| true);
    assert_eq!(d.actions().len(), 1, "the CPU job only: {d:?}");
    assert_eq!((d.actions()[0].job(), d.actions()[0].reason()), (cpu, "p: a CPU job, first fit"));
    assert!(check(&s, &d).is_ok());
    let there = Decision::new().with(Action::place(a, NodeId(0), &[0, 1]));
    let why = check(&s, &there).unwrap_err();
    assert!(why.contains("node n0 cannot take work now"), "{why}");
}

#[test]
fn an_elastic_job_is_resized_within_its_counts_and_batch_sizes() {
    let mut w = TestWorld::gpu_cluster(&[4, 4]);
    let e = w.queue_job(job("e", "cifar10").gpus(1).elastic(&[1, 2, 4], 128..=1024));
    w.start(e, NodeId(0), &[0]);
    let mut r = seen(&mut w);
    let s = r.view();
    let j = s.job(e).unwrap();
    assert!(j.is_elastic() && j.scaling().gpu_counts == [1, 2, 4] && j.batch_size() == 128);
    let grow = Decision::new().with(Action::resize(e, &[(NodeId(0), vec![0, 1]), (NodeId(1), vec![0, 1])], Some(512)));
    assert_eq!(check(&s, &grow), Ok(()));
    let three = Decision::new().with(Action::resize(e, &[(NodeId(0), vec![0, 1, 2])], None));
    assert!(check(&s, &three).unwrap_err().contains("runs on [1, 2, 4] GPUs"));
    let big = Decision::new().with(Action::resize(e, &[(NodeId(0), vec![0, 1])], Some(4096)));
    assert!(check(&s, &big).unwrap_err().contains("accepts batch sizes 128–1024"));
    w.apply(&grow);
    r.decide(w.snapshot()).unwrap();
    let j = r.view().job(e).map(|j| (j.gpus().len(), j.batch_size()));
    assert_eq!(j, Some((4, 512)));
}

#[test]
fn first_fit_takes_the_lowest_free_gpus_of_the_first_node_with_enough() {
    let mut w = TestWorld::gpu_cluster(&[4, 4]);
    let a = w.queue_job(job("a", "cifar10").gpus(2));
    w.start(a, NodeId(0), &[0, 2]);
    let r = seen(&mut w);
    let mut free = FreeGpus::of(&r.view());
    assert_eq!((free.gpu_count(), free.free_count()), (8, 6));
    assert_eq!(entries(&free.fit(2, 1).unwrap()), [(0, vec![1, 3])]);
    assert_eq!(entries(&free.fit(3, 1).unwrap()), [(1, vec![0, 1, 2])], "node 0 is full now");
    assert_eq!(free.fit(2, 1), None, "one GPU is left");
}

#[test]
fn a_job_no_node_can_hold_spreads_in_whole_replicas_when_it_may() {
    let mut w = TestWorld::gpu_cluster(&[3, 3, 4]);
    let r = seen(&mut w);
    let free = FreeGpus::of(&r.view());
    assert_eq!(free.find(8, 1), None, "one replica never spreads");
    // Pieces of 2: two of node 0's three GPUs, two of node 1's, all four of node 2's.
    assert_eq!(entries(&free.find(8, 4).unwrap()), [(0, vec![0, 1]), (1, vec![0, 1]), (2, vec![0, 1, 2, 3])]);
    // Pieces of 3 fit nodes 0 and 1, not node 2 with its one left over.
    assert_eq!(entries(&free.find(6, 2).unwrap()), [(0, vec![0, 1, 2]), (1, vec![0, 1, 2])]);
    assert_eq!(free.find(8, 2), None, "pieces of 4 fit node 2 alone");
    assert_eq!(free.find(10, 2), None, "two pieces of 5 fit no node");
}

#[test]
fn an_uneven_split_uses_single_gpus_on_no_more_nodes_than_replicas() {
    let mut w = TestWorld::gpu_cluster(&[2, 2, 2]);
    let r = seen(&mut w);
    let free = FreeGpus::of(&r.view());
    assert_eq!(entries(&free.find(3, 2).unwrap()), [(0, vec![0, 1]), (1, vec![0])]);
    assert_eq!(free.find(5, 2), None, "5 GPUs over 2 nodes of 2 do not fit");
}

#[test]
fn releasing_a_running_job_frees_its_gpus_and_queued_jobs_hold_none() {
    let mut w = TestWorld::gpu_cluster(&[4]);
    let a = w.queue_job(job("a", "cifar10").gpus(4));
    let b = w.queue_job(job("b", "cifar10").gpus(4));
    w.start(a, NodeId(0), &[0, 1, 2, 3]);
    let r = seen(&mut w);
    let view = r.view();
    let mut free = FreeGpus::of(&view);
    assert_eq!(free.find(1, 1), None);
    free.release(&view.job(b).unwrap());
    assert_eq!(free.free_count(), 0, "a queued job frees nothing");
    free.release(&view.job(a).unwrap());
    assert_eq!(entries(&free.fit_job(&view.job(b).unwrap()).unwrap()), [(0, vec![0, 1, 2, 3])]);
    assert_eq!(free.free_count(), 0, "what fit returns is taken");
}

#[test]
fn cpu_jobs_go_to_the_node_with_the_fewest_jobs_per_core() {
    let mut w = TestWorld::new();
    let small = w.node("small", Millicores(2000), Bytes::gib(8));
    let big = w.node("big", Millicores(8000), Bytes::gib(8));
    w.add_job_on(job("a", "ncf"), small);
    w.add_job_on(job("b", "ncf"), big);
    w.add_job_on(job("c", "ncf"), big);
    let r = seen(&mut w);
    let mut free = FreeGpus::of(&r.view());
    // small: 1 job on 2 cores; big: 2 jobs on 8 cores, then 3, then 4 (0.5 a core, a tie).
    assert_eq!(entries(&free.fit(0, 1).unwrap()), [(big.0, vec![])]);
    assert_eq!(entries(&free.fit(0, 1).unwrap()), [(big.0, vec![])]);
    assert_eq!(entries(&free.fit(0, 1).unwrap()), [(small.0, vec![])], "a tie goes to the lower index");
}

#[test]
fn a_placement_becomes_a_place_action_with_one_entry_per_node() {
    let mut w = TestWorld::gpu_cluster(&[2, 2]);
    let r = seen(&mut w);
    let p = FreeGpus::of(&r.view()).find(4, 2).unwrap();
    assert_eq!(p.node(), NodeId(0));
    assert_eq!(p.gpus().count(), 4);
    let action = p.action(JobId(7)).because("first fit");
    assert_eq!(
        action,
        Action::place_on(JobId(7), &[(NodeId(0), vec![0, 1]), (NodeId(1), vec![0, 1])], false).because("first fit")
    );
}

/// First fit as it was before the nodes were indexed: every node, sorted, tried in turn.
fn first_fit_over_every_node(free: &FreeGpus, gpus: u32, replicas: u32) -> Option<Vec<(u32, Vec<u32>)>> {
    let mut order: Vec<NodeId> = (0..free.nodes.len() as u32).map(NodeId).collect();
    if gpus == 0 {
        let load = |n: &NodeId| load(free.nodes[n.index()]);
        order.sort_by(|a, b| load(a).total_cmp(&load(b)));
    } else if free.order == NodeOrder::MostFree {
        order.sort_by_key(|&n| std::cmp::Reverse(free.book.free_count(n)));
    }
    first_fit(&free.book, Ask { gpus, replicas }, &order).map(|v| v.into_iter().map(|e| (e.node.0, e.gpus)).collect())
}

#[test]
fn indexed_first_fit_gives_what_trying_every_node_in_order_gives() {
    // A deterministic die (xorshift).
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut die = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n) as u32
    };
    for round in 0..40 {
        let sizes: Vec<usize> = (0..1 + die(12)).map(|_| die(9) as usize).collect();
        let mut w = TestWorld::gpu_cluster(&sizes);
        for (n, &size) in sizes.iter().enumerate() {
            for g in 0..size as u32 {
                if die(3) == 0 {
                    let j = w.queue_job(job("r", "cifar10").gpus(1));
                    w.start(j, NodeId(n as u32), &[g]);
                }
            }
        }
        let r = seen(&mut w);
        let order = if round % 2 == 0 { NodeOrder::Index } else { NodeOrder::MostFree };
        let mut free = FreeGpus::of(&r.view()).ordered(order);
        for _ in 0..60 {
            let (gpus, replicas) = (die(12), 1 + die(4));
            let want = first_fit_over_every_node(&free, gpus, replicas);
            let got = free.find(gpus, replicas).map(|p| entries(&p));
            assert_eq!(got, want, "round {round}, {gpus} GPUs in {replicas}, {order:?}, nodes {sizes:?}");
            if die(2) == 0 {
                free.fit(gpus, replicas);
            }
        }
        let view = r.view();
        let jobs: Vec<Job> = view.jobs().collect();
        let mut all = free.clone();
        all.release_all(&jobs);
        for job in &jobs {
            free.release(job);
            assert_eq!(free.find(1, 1).map(|p| entries(&p)), first_fit_over_every_node(&free, 1, 1));
        }
        for (gpus, replicas) in [(0, 1), (1, 1), (3, 1), (8, 2), (12, 4)] {
            assert_eq!(all.find(gpus, replicas), free.find(gpus, replicas), "released at once or one by one");
        }
    }
}

#[test]
fn the_idle_book_holds_every_gpu_free_whatever_runs() {
    let mut w = TestWorld::gpu_cluster(&[2]);
    let a = w.queue_job(job("a", "cifar10").gpus(2));
    w.start(a, NodeId(0), &[0, 1]);
    let r = seen(&mut w);
    assert_eq!(FreeGpus::of(&r.view()).free_count(), 0);
    assert_eq!(FreeGpus::idle(&r.view()).free_count(), 2);
}

#[test]
fn check_accepts_what_the_host_accepts_and_names_what_it_refuses() {
    let mut w = TestWorld::gpu_cluster(&[2, 2]);
    let a = w.queue_job(job("a", "cifar10").gpus(2));
    let b = w.queue_job(job("b", "cifar10").gpus(2).replicas(2));
    w.start(a, NodeId(0), &[0, 1]);
    let r = seen(&mut w);
    let view = r.view();
    let ok = Decision::new().with(Action::preempt(a)).with(Action::place(b, NodeId(0), &[0, 1]));
    assert_eq!(check(&view, &ok), Ok(()), "a preemption frees GPUs for a later placement");
    let refused = [
        (Decision::new().with(Action::place(b, NodeId(0), &[0, 1])), "held"),
        (Decision::new().with(Action::place(b, NodeId(1), &[0])), "asks for 2"),
        (Decision::new().with(Action::place(b, NodeId(1), &[0, 0])), "twice"),
        (Decision::new().with(Action::place(b, NodeId(1), &[0, 2])), "has no GPU 2"),
        (Decision::new().with(Action::place(a, NodeId(1), &[0, 1])), "already runs on node"),
        (Decision::new().with(Action::preempt(b)), "is queued, not running"),
        (Decision::new().with(Action::preempt(a)).with(Action::set_cpu(a, Millicores(500))), "already"),
        (Decision::new().with(Action::preempt(a)).with(Action::preempt(a)), "already"),
        (Decision::new().with(Action::place(JobId(9), NodeId(1), &[])), "does not exist"),
    ];
    for (d, why) in refused {
        let err = check(&view, &d).unwrap_err();
        assert!(err.contains(why), "{err} should say {why}");
    }
    let mut w = TestWorld::gpu_cluster(&[2, 2]);
    let c = w.queue_job(job("c", "cifar10").gpus(2).replicas(1));
    let d = w.queue_job(job("d", "cifar10").gpus(4).replicas(2));
    let r = seen(&mut w);
    let view = r.view();
    let spread = Action::place_on(c, &[(NodeId(0), vec![0]), (NodeId(1), vec![0])], false);
    assert!(check(&view, &Decision::new().with(spread)).unwrap_err().contains("runs on at most 1 node(s)"));
    let split = Action::place_on(d, &[(NodeId(0), vec![0]), (NodeId(1), vec![0, 1])], false);
    assert!(check(&view, &Decision::new().with(split)).unwrap_err().contains("takes whole replicas of 2 GPU(s)"));
}
