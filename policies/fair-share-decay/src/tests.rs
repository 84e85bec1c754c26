use std::collections::BTreeMap;

use super::*;
use wasmsched_sdk::testing::{Harness, TestWorld, churn, job, placed, tenant};

/// Rounds every call, as the defaults are (min-run 600 s, 4 preemptions a round).
const DEFAULT: &str = "{}";

fn policy(config: &str, world: TestWorld) -> Harness<FairShareDecay> {
    Harness::from_config(config, world).unwrap()
}

/// A tick whose decision must pass the host's checks.
fn tick(h: &mut Harness<FairShareDecay>, by: f64) -> Decision {
    let d = h.tick(Seconds(by)).unwrap();
    assert_eq!(sched::check(&h.runner().view(), &d), Ok(()), "{d:?}");
    d
}

fn preempted(d: &Decision) -> Vec<JobId> {
    d.actions().iter().filter(|a| matches!(a.kind(), ActionKind::Preempt)).map(Action::job).collect()
}

fn placed_jobs(d: &Decision) -> Vec<JobId> {
    placed(d).into_iter().map(|(j, _)| j).collect()
}

/// The GPUs tenant `name`'s running jobs hold, as the policy saw the world last.
fn holds(h: &Harness<FairShareDecay>, name: &str) -> usize {
    h.runner().view().jobs().filter(|j| j.tenant() == name).map(|j| j.gpus().len()).sum()
}

fn why(d: &Decision, job: JobId) -> Option<&str> {
    d.pending_reasons().iter().find(|(j, _)| *j == job).map(|(_, r)| r.as_str())
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9 * b.abs().max(1.0)
}

#[test]
fn the_factor_is_two_to_the_minus_usage_share_over_share() {
    assert_eq!(factor(0.0, 0.0, 0.5), 1.0, "nobody used anything");
    assert!(close(factor(50.0, 100.0, 0.5), 0.5), "used exactly its share");
    assert!(close(factor(75.0, 100.0, 0.75), 0.5), "weight 3 of 4, used 3/4");
    assert!(close(factor(0.0, 100.0, 0.25), 1.0), "used nothing while others did");
    assert!(close(factor(100.0, 100.0, 0.5), 0.25), "used everything on a half share");
    assert!(close(factor(25.0, 100.0, 0.25), factor(50.0, 100.0, 0.5)));
    assert!(close(decay(200.0, 3600.0, 3600.0), 100.0) && close(decay(200.0, 7200.0, 3600.0), 50.0));
}

#[test]
fn usage_grows_by_gpu_seconds_and_halves_after_one_half_life_with_nothing_running() {
    let mut w = TestWorld::gpu_cluster(&[4]);
    let a = w.queue_job(job("a", "cifar10").tenant("vision").gpus(2));
    let mut h = policy(r#"{"half-life-s": 1000}"#, w);
    assert_eq!(placed_jobs(&tick(&mut h, 0.0)), [a]);
    assert_eq!(h.policy().usage("vision"), Some(0.0));
    tick(&mut h, 100.0);
    assert!(close(h.policy().usage("vision").unwrap(), decay(0.0, 100.0, 1000.0) + 200.0));
    h.world.remove_job(a);
    tick(&mut h, 1000.0);
    assert!(close(h.policy().usage("vision").unwrap(), 100.0), "{:?}", h.policy().usage("vision"));
    tick(&mut h, 500.0);
    tick(&mut h, 500.0);
    assert!(close(h.policy().usage("vision").unwrap(), 50.0), "two rounds make one half-life too");
}

#[test]
fn the_tenant_that_used_less_goes_first_and_the_other_is_told_why_it_waits() {
    let mut w = TestWorld::gpu_cluster(&[1]);
    let v = w.queue_job(job("v0", "cifar10").tenant("vision").gpus(1));
    let mut h = policy(r#"{"preempt": false}"#, w);
    tick(&mut h, 0.0);
    tick(&mut h, 3600.0); // vision: 3600 GPU-s
    h.world.remove_job(v);
    let v1 = h.world.queue_job(job("v1", "cifar10").tenant("vision").gpus(1));
    let s1 = h.world.queue_job(job("s1", "cifar10").tenant("speech").gpus(1));
    let d = tick(&mut h, 0.0);
    assert_eq!(placed_jobs(&d), [s1], "speech has used nothing: factor 1");
    let f = h.policy().standing("vision").unwrap().factor;
    assert!(close(f, 0.25), "all the usage on a half share: {f}");
    assert_eq!(
        why(&d, v1),
        Some("tenant vision: fair-share factor 0.25, behind tenant speech (1.00); 1 GPUs asked, 0 free")
    );
}

#[test]
fn weights_three_to_one_split_the_first_round_six_to_two() {
    let mut w = TestWorld::gpu_cluster(&[4, 4]);
    w.declare(tenant("a").weight(3.0));
    w.declare(tenant("b").weight(1.0));
    for k in 0..8 {
        w.queue_job(job(&format!("b{k}"), "cifar10").tenant("b").gpus(1));
        w.queue_job(job(&format!("a{k}"), "cifar10").tenant("a").gpus(1));
    }
    let mut h = policy(DEFAULT, w);
    let d = tick(&mut h, 0.0);
    assert_eq!(placed(&d).len(), 8);
    assert_eq!((holds(&h, "a"), holds(&h, "b")), (0, 0), "the view is the one the policy decided on");
    tick(&mut h, 30.0);
    assert_eq!((holds(&h, "a"), holds(&h, "b")), (6, 2));
    let (a, b) = (h.policy().standing("a").unwrap(), h.policy().standing("b").unwrap());
    assert!(close(a.entitled, 6.0) && close(b.entitled, 2.0), "{a:?} {b:?}");
    // Neither is above its entitlement: nobody is preempted, however long they run.
    for _ in 0..30 {
        assert!(preempted(&tick(&mut h, 60.0)).is_empty());
    }
}

#[test]
fn the_first_round_alternates_tenants_of_equal_weight_rather_than_serving_one() {
    let mut w = TestWorld::gpu_cluster(&[4]);
    let a: Vec<JobId> = (0..4).map(|k| w.queue_job(job(&format!("a{k}"), "cifar10").tenant("a").gpus(1))).collect();
    let b: Vec<JobId> = (0..4).map(|k| w.queue_job(job(&format!("b{k}"), "cifar10").tenant("b").gpus(1))).collect();
    let mut h = policy(DEFAULT, w);
    let d = tick(&mut h, 0.0);
    assert_eq!(placed_jobs(&d), [a[0], b[0], a[1], b[1]]);
}

/// Tenant a fills a cluster of 8 GPUs (a0–a5 at 0 s, a6 and a7 at 300 s); at 600 s tenant b,
/// of the same weight, queues six jobs of 1 GPU.
fn a_fills_the_cluster_then_b_arrives(config: &str) -> (Harness<FairShareDecay>, Vec<JobId>, Vec<JobId>) {
    let mut w = TestWorld::gpu_cluster(&[4, 4]);
    let mut a: Vec<JobId> = (0..6).map(|k| w.queue_job(job(&format!("a{k}"), "cifar10").tenant("a").gpus(1))).collect();
    let mut h = policy(config, w);
    assert_eq!(placed(&tick(&mut h, 0.0)).len(), 6);
    h.world.advance(Seconds(300.0));
    a.extend((6..8).map(|k| h.world.queue_job(job(&format!("a{k}"), "cifar10").tenant("a").gpus(1))));
    assert_eq!(placed_jobs(&tick(&mut h, 0.0)), a[6..]);
    h.world.advance(Seconds(300.0));
    let b = (0..6).map(|k| h.world.queue_job(job(&format!("b{k}"), "cifar10").tenant("b").gpus(1))).collect();
    (h, a, b)
}

#[test]
fn an_over_served_tenant_gives_back_its_newest_jobs_past_min_run_down_to_its_entitlement() {
    let (mut h, a, b) = a_fills_the_cluster_then_b_arrives(r#"{"max-preemptions": 3}"#);
    // t = 600: a0–a5 have run 600 s, a6 and a7 300 s (too little to preempt). Entitled: 4 each.
    let d = tick(&mut h, 0.0);
    assert_eq!(preempted(&d), [a[5], a[4], a[3]], "newest first among those past min-run; three a round");
    assert_eq!(placed_jobs(&d), b[..3]);
    // Each placement comes right after the preemption that makes its room.
    let kinds: Vec<bool> = d.actions().iter().map(|x| matches!(x.kind(), ActionKind::Preempt)).collect();
    assert_eq!(kinds, [true, false, true, false, true, false]);
    let (sa, sb) = (h.policy().standing("a").unwrap(), h.policy().standing("b").unwrap());
    assert!(close(sa.entitled, 4.0) && close(sb.entitled, 4.0), "{sa:?} {sb:?}");
    assert!(why(&d, b[3]).is_some_and(|r| r.starts_with("tenant b: fair-share factor 1.00; 1 GPUs asked, 0 free")));
    let d = tick(&mut h, 30.0);
    assert_eq!((preempted(&d), placed_jobs(&d)), (vec![a[2]], vec![b[3]]), "one more to reach 4 each");
    for _ in 0..20 {
        let d = tick(&mut h, 60.0);
        assert!(d.is_empty(), "nothing moves once both hold their entitlements: {d:?}");
        assert_eq!((holds(&h, "a"), holds(&h, "b")), (4, 4));
    }
}

#[test]
fn gpus_go_to_the_tenant_below_its_entitlement_before_any_beyond_and_the_taken_ones_to_it_at_once() {
    let mut w = TestWorld::gpu_cluster(&[2, 2]);
    let a: Vec<JobId> = (0..3).map(|k| w.queue_job(job(&format!("a{k}"), "cifar10").tenant("a").gpus(1))).collect();
    for (k, (node, gpu)) in [(0, 0), (0, 1), (1, 0)].into_iter().enumerate() {
        w.start(a[k], NodeId(node), &[gpu]);
    }
    let mut h = policy(DEFAULT, w);
    tick(&mut h, 0.0);
    let a3 = h.world.queue_job(job("a3", "cifar10").tenant("a").gpus(1));
    let b = h.world.queue_job(job("b", "imagenet").tenant("b").gpus(2));
    h.world.advance(Seconds(600.0));
    // Entitled to 2 GPUs each. b's job needs a whole node: a2 makes room on n1, and a3 does
    // not take n1's free GPU first (a would then have to give back two older jobs).
    let d = tick(&mut h, 0.0);
    assert_eq!(preempted(&d), [a[2]]);
    assert_eq!(placed(&d), [(b, vec![(1, vec![0, 1])])]);
    assert!(why(&d, a3).is_some_and(|r| r.ends_with("1 GPUs asked, 0 free")), "{d:?}");
}

/// Tenant "big" runs eight one-GPU jobs on two nodes of four, taking turns between the nodes;
/// 600 s later b asks for 4 GPUs and c for 1, all of the same weight.
fn big_fills_two_nodes_then_b_and_c_arrive() -> (Harness<FairShareDecay>, Vec<JobId>, JobId, JobId) {
    let mut w = TestWorld::gpu_cluster(&[4, 4]);
    let big: Vec<JobId> =
        (0..8).map(|k| w.queue_job(job(&format!("big{k}"), "cifar10").tenant("big").gpus(1))).collect();
    for (k, &id) in big.iter().enumerate() {
        w.start(id, NodeId(k as u32 % 2), &[k as u32 / 2]);
    }
    let mut h = policy(DEFAULT, w);
    tick(&mut h, 0.0);
    let b = h.world.queue_job(job("b0", "imagenet").tenant("b").gpus(4));
    let c = h.world.queue_job(job("c0", "cifar10").tenant("c").gpus(1));
    h.world.advance(Seconds(600.0));
    (h, big, b, c)
}

#[test]
fn a_tenant_whose_job_asks_more_than_its_entitlement_gets_a_node_emptied_for_it() {
    // Entitled by what each asks for (8, 4 and 1 GPUs): big 3.5, b 3.5, c 1. b holds none and
    // its one job asks for 4. Big, 4.5 GPUs past its entitlement, gives back the four jobs of
    // one node (four preemptions are the round's budget: freeing the newest first over both
    // nodes would have freed two on each).
    let (mut h, big, b, c) = big_fills_two_nodes_then_b_and_c_arrive();
    let d = tick(&mut h, 0.0);
    assert_eq!(preempted(&d), [big[6], big[4], big[2], big[0]], "{d:?}");
    assert_eq!(placed(&d), [(b, vec![(0, vec![0, 1, 2, 3])])]);
    assert!(why(&d, c).is_some(), "c waits for the next round's budget: {d:?}");
    // Next round c, 1 GPU below its entitlement, takes one of big's, which leaves big only
    // 0.5 below its own; then nobody is further below than another is above by a whole job.
    let d = tick(&mut h, 30.0);
    assert_eq!(preempted(&d).len(), 1, "{d:?}");
    assert_eq!(placed_jobs(&d), [c]);
    for _ in 0..10 {
        assert!(tick(&mut h, 60.0).is_empty(), "nothing moves back and forth");
    }
    assert_eq!((holds(&h, "big"), holds(&h, "b"), holds(&h, "c")), (3, 4, 1));
}

#[test]
fn a_tenant_is_taken_below_its_entitlement_only_for_one_left_further_below() {
    // Weights 4 and 1 on 8 GPUs: big is entitled to 6.4, c to 1.6. Big's jobs take two GPUs
    // each, so giving one back leaves it 0.4 below its entitlement, while c, placed on it,
    // stands 0.6 below its own: closer to even than before (c 1.6 below), so it is taken.
    let mut w = TestWorld::gpu_cluster(&[4, 4]);
    w.declare(tenant("big").weight(4.0));
    w.declare(tenant("c").weight(1.0));
    let big: Vec<JobId> =
        (0..4).map(|k| w.queue_job(job(&format!("big{k}"), "cifar10").tenant("big").gpus(2))).collect();
    for (k, &id) in big.iter().enumerate() {
        w.start(id, NodeId(k as u32 % 2), &[2 * (k as u32 / 2), 2 * (k as u32 / 2) + 1]);
    }
    let mut h = policy(DEFAULT, w);
    tick(&mut h, 0.0);
    let c: Vec<JobId> =
        (0..2).map(|k| h.world.queue_job(job(&format!("c{k}"), "cifar10").tenant("c").gpus(1))).collect();
    h.world.advance(Seconds(600.0));
    let d = tick(&mut h, 0.0);
    assert_eq!(preempted(&d), [big[3]], "{d:?}");
    assert_eq!(placed_jobs(&d), c[..1]);
    assert_eq!(placed_jobs(&tick(&mut h, 30.0)), c[1..], "c1 on the GPU left over, beyond c's entitlement");
    for _ in 0..10 {
        assert!(tick(&mut h, 60.0).is_empty(), "nothing moves back");
    }
    assert_eq!((holds(&h, "big"), holds(&h, "c")), (6, 2));
}

#[test]
fn a_heavier_tenant_that_arrives_late_gets_its_weighted_share_within_a_few_rounds() {
    let mut w = TestWorld::gpu_cluster(&[4, 4]);
    w.declare(tenant("heavy").weight(3.0));
    w.declare(tenant("light").weight(1.0));
    (0..8).for_each(|k| _ = w.queue_job(job(&format!("l{k}"), "imagenet").tenant("light").gpus(1)));
    let mut h = policy(DEFAULT, w);
    assert_eq!(placed(&tick(&mut h, 0.0)).len(), 8, "light alone: all of it");
    (0..8).for_each(|k| _ = h.world.queue_job(job(&format!("h{k}"), "imagenet").tenant("heavy").gpus(1)));
    let mut taken = Vec::new();
    for _ in 0..6 {
        taken.push(preempted(&tick(&mut h, 300.0)).len());
    }
    assert_eq!(taken, [0, 4, 2, 0, 0, 0], "min-run first, then four a round, down to light's 2");
    assert_eq!((holds(&h, "heavy"), holds(&h, "light")), (6, 2));
}

#[test]
fn nothing_is_preempted_before_min_run_or_with_preemption_off() {
    let (mut h, _, b) = a_fills_the_cluster_then_b_arrives(r#"{"min-run-s": 900}"#);
    assert!(tick(&mut h, 0.0).is_empty(), "a's jobs have run 600 s of 900");
    let d = tick(&mut h, 300.0);
    assert_eq!((preempted(&d).len(), placed_jobs(&d)), (4, b[..4].to_vec()), "a0–a5 have run 900 s");
    let (mut h, _, _) = a_fills_the_cluster_then_b_arrives(r#"{"preempt": false}"#);
    for _ in 0..10 {
        assert!(tick(&mut h, 600.0).is_empty());
    }
}

#[test]
fn las_puts_the_job_with_the_least_attained_service_of_a_tenant_first() {
    for (order, first) in [("fifo", "x"), ("las", "y")] {
        let mut w = TestWorld::gpu_cluster(&[1]);
        let x = w.queue_job(job("x", "cifar10").tenant("a").gpus(1));
        let mut h = policy(&format!(r#"{{"order": "{order}"}}"#), w);
        assert_eq!(placed_jobs(&tick(&mut h, 0.0)), [x]);
        tick(&mut h, 100.0);
        h.world.preempt(x); // x keeps its 100 GPU-seconds and its place in the queue
        let y = h.world.queue_job(job("y", "cifar10").tenant("a").gpus(1));
        let d = tick(&mut h, 0.0);
        assert_eq!(placed_jobs(&d), [if first == "x" { x } else { y }], "{order}");
    }
}

#[test]
fn a_tenant_at_its_quota_is_not_placed_beyond_it_and_the_others_go_ahead() {
    let mut w = TestWorld::gpu_cluster(&[4]);
    w.declare(tenant("capped").quota(2));
    let c: Vec<JobId> =
        (0..4).map(|k| w.queue_job(job(&format!("c{k}"), "cifar10").tenant("capped").gpus(1))).collect();
    let o = w.queue_job(job("o", "cifar10").tenant("other").gpus(1));
    let mut h = policy(DEFAULT, w);
    let d = tick(&mut h, 0.0);
    assert_eq!(placed_jobs(&d), [c[0], o, c[1]]);
    assert_eq!(why(&d, c[2]), Some("tenant capped holds 2 GPUs of its limit of 2 (its quota); 1 more would pass it"));
    assert!(close(h.policy().standing("capped").unwrap().entitled, 2.0), "its demand is capped by its quota");
    for _ in 0..20 {
        let d = tick(&mut h, 600.0);
        assert!(d.is_empty(), "one GPU stays idle, and other is never preempted for capped: {d:?}");
    }
}

#[test]
fn without_backfill_a_job_that_does_not_fit_holds_back_the_rest() {
    for backfill in [false, true] {
        let mut w = TestWorld::gpu_cluster(&[4]);
        let big = w.queue_job(job("big", "imagenet").tenant("a").gpus(3));
        w.start(big, NodeId(0), &[0, 1, 2]);
        let two = w.queue_job(job("two", "cifar10").tenant("a").gpus(2));
        let one = w.queue_job(job("one", "cifar10").tenant("a").gpus(1));
        w.queue_job(job("huge", "imagenet").tenant("a").gpus(16));
        let mut h = policy(&format!(r#"{{"backfill": {backfill}}}"#), w);
        let d = tick(&mut h, 0.0);
        if backfill {
            assert_eq!(placed_jobs(&d), [one]);
        } else {
            assert!(d.is_empty());
            assert_eq!(why(&d, one), Some("behind two (fair-share order, no backfill)"));
            assert!(why(&d, two).is_some_and(|r| r.ends_with("2 GPUs asked, 1 free")));
        }
    }
}

#[test]
fn a_job_larger_than_the_cluster_waits_without_holding_anyone_back() {
    let mut w = TestWorld::gpu_cluster(&[2, 2]);
    let huge = w.queue_job(job("huge", "imagenet").tenant("a").gpus(8));
    let small = w.queue_job(job("small", "cifar10").tenant("a").gpus(2));
    let cpu = w.queue_job(job("cpu", "ncf").tenant("b"));
    let mut h = policy(r#"{"backfill": false}"#, w);
    let d = tick(&mut h, 0.0);
    assert_eq!(placed_jobs(&d), [cpu, small], "a's next job, huge, is beyond its entitlement: b goes first");
    assert_eq!(why(&d, huge), Some("asks for 8 GPUs, more than any placement on this cluster gives"));
}

#[test]
fn rounds_come_every_interval_and_jobs_that_arrive_between_wait_for_the_next() {
    let mut h = policy(r#"{"interval-s": 60}"#, TestWorld::gpu_cluster(&[4]));
    assert_eq!(tick(&mut h, 0.0).next_call(), Some(Seconds(60.0)));
    let a = h.world.queue_job(job("a", "cifar10").gpus(1));
    let d = tick(&mut h, 30.0);
    assert!(d.is_empty() && d.next_call() == Some(Seconds(30.0)), "{d:?}");
    assert_eq!(placed_jobs(&tick(&mut h, 30.0)), [a]);
    assert_eq!(h.policy().usage("default"), Some(0.0));
    tick(&mut h, 60.0);
    assert!(close(h.policy().usage("default").unwrap(), 60.0));
}

#[test]
fn a_bad_config_is_refused_with_what_to_write() {
    let refused = |c: &str| match Harness::<FairShareDecay>::from_config(c, TestWorld::new()) {
        Err(PolicyError::InvalidConfig(m)) => m,
        Err(e) => panic!("{c}: {e:?}"),
        Ok(_) => panic!("{c} was accepted"),
    };
    assert!(refused(r#"{"half-life-s": 0}"#).contains("half-life-s must be a finite number of seconds above 0"));
    assert!(refused(r#"{"half-life-s": -3600}"#).contains("half-life-s"));
    assert!(refused(r#"{"min-run-s": -1}"#).contains("min-run-s and interval-s must be zero or more"));
    assert!(refused(r#"{"interval-s": -60}"#).contains("interval-s"));
    assert!(refused(r#"{"order": "sjf"}"#).contains("fifo"));
    assert!(refused(r#"{"max-preemptions": -1}"#).contains("-1"));
    assert!(refused(r#"{"backfill": "yes"}"#).contains("boolean"));
    assert!(refused(r#"{"half-life": 60}"#).contains("half-life"));
    let all = r#"{"half-life-s": 86400, "order": "las", "backfill": false, "preempt": false, "min-run-s": 0,
        "max-preemptions": 0, "interval-s": 30}"#;
    assert!(Harness::<FairShareDecay>::from_config(all, TestWorld::new()).is_ok());
    let policy = FairShareDecay::new(Config { half_life_s: f64::INFINITY, ..Config::default() });
    assert!(matches!(policy, Err(PolicyError::InvalidConfig(_))));
}

/// The world of [`a_fills_the_cluster_then_b_arrives`] at 600 s, built without a policy.
fn the_same_world_at_600_s() -> TestWorld {
    let mut w = TestWorld::gpu_cluster(&[4, 4]);
    let gpus = [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (1, 3)];
    for (k, &(node, gpu)) in gpus.iter().enumerate() {
        if k == 6 {
            w.advance(Seconds(300.0));
        }
        let a = w.queue_job(job(&format!("a{k}"), "cifar10").tenant("a").gpus(1));
        w.start(a, NodeId(node), &[gpu]);
    }
    w.advance(Seconds(300.0));
    (0..6).for_each(|k| _ = w.queue_job(job(&format!("b{k}"), "cifar10").tenant("b").gpus(1)));
    w
}

#[test]
fn usage_and_when_each_run_began_survive_a_swap() {
    let (h, a, b) = a_fills_the_cluster_then_b_arrives(DEFAULT);
    let usage = h.policy().usage("a").unwrap();
    assert!(close(usage, 6.0 * 300.0), "a0-a5 for 300 s, as of the round at 300 s: {usage}");
    let fresh = || FairShareDecay::new(Config::default()).unwrap();
    let next = h.swap_into(fresh()).unwrap();
    assert_eq!((next.usage("a"), &next.state), (Some(usage), &h.policy().state));
    // Swapped in, it knows a6 and a7 began 300 s ago and a0-a5 600 s ago.
    let mut swapped = Harness::new(next, the_same_world_at_600_s());
    let d = tick(&mut swapped, 0.0);
    assert_eq!((preempted(&d), placed_jobs(&d)), (vec![a[5], a[4], a[3], a[2]], b[..4].to_vec()));
    assert!(swapped.policy().usage("a").unwrap() > usage);
    // A policy without the state counts every run from now: nothing is old enough to preempt.
    let mut forgetful = Harness::new(fresh(), the_same_world_at_600_s());
    assert!(tick(&mut forgetful, 0.0).is_empty());
    let mut broken = fresh();
    assert!(matches!(broken.restore_state(b"not json"), Err(PolicyError::InvalidState(_))));
}

/// A deterministic die (xorshift).
struct Die(u64);

impl Die {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Jobs of four tenants (weights 1–3, one with a quota of 6, two in a cohort) arrive and end
/// on four GPU nodes and a CPU node for `ticks` ticks of 60 s; every decision is checked as
/// the host would. Returns the placements and preemptions made.
fn run_busy_world(config: &str, ticks: u32, seed: u64) -> (usize, usize) {
    const SHAPES: [(u32, u32); 7] = [(0, 1), (1, 1), (1, 1), (2, 1), (4, 1), (4, 2), (8, 2)];
    const TENANTS: [&str; 4] = ["vision", "speech", "nlp", "lab"];
    let mut w = TestWorld::gpu_cluster(&[4, 4, 2, 8]);
    w.node("cpu", Millicores(16000), Bytes::gib(64));
    w.declare(tenant("vision").weight(3.0));
    w.declare(tenant("speech").weight(1.0).quota(6));
    w.declare(tenant("nlp").weight(2.0).quota(4).cohort("c"));
    w.declare(tenant("lab").weight(1.0).quota(4).borrowing_limit(2).cohort("c"));
    let mut h = policy(config, w);
    let mut die = Die(seed);
    let (mut placements, mut preemptions) = (0, 0);
    for t in 0..ticks {
        for _ in 0..die.below(3) {
            let (gpus, replicas) = SHAPES[die.below(SHAPES.len() as u64) as usize];
            let who = TENANTS[die.below(4) as usize];
            h.world.queue_job(job(&format!("{who}{t}"), "cifar10").tenant(who).gpus(gpus).replicas(replicas));
        }
        let running: Vec<JobId> = h.runner().view().jobs().map(|j| j.id()).collect();
        for id in running {
            if die.below(25) == 0 {
                h.world.remove_job(id);
            }
        }
        let d = tick(&mut h, 60.0);
        placements += placed(&d).len();
        preemptions += preempted(&d).len();
        // What each tenant holds once the decision is in force: within its limit, and a
        // tenant preempted keeps at least its entitlement, or is left no further below it than
        // a tenant the decision placed a job for stood before.
        let view = h.runner().view();
        let mut after: BTreeMap<&str, i64> = BTreeMap::new();
        for j in view.jobs() {
            *after.entry(j.tenant()).or_default() += j.gpus().len() as i64;
        }
        for victim in preempted(&d).into_iter().map(|id| view.job(id).unwrap()) {
            *after.entry(victim.tenant()).or_default() -= victim.gpus().len() as i64;
        }
        for (id, entries) in placed(&d) {
            *after.entry(view.job(id).unwrap().tenant()).or_default() +=
                entries.iter().map(|e| e.1.len() as i64).sum::<i64>();
        }
        let entitled = |name: &str| h.policy().standing(name).unwrap().entitled;
        let past = |name: &str| after.get(name).copied().unwrap_or(0) as f64 - entitled(name);
        let before = |name: &str| {
            view.jobs().filter(|j| j.tenant() == name).map(|j| j.gpus().len()).sum::<usize>() as f64 - entitled(name)
        };
        let floor = placed(&d).iter().map(|(id, _)| before(view.job(*id).unwrap().tenant())).fold(0.0, f64::min);
        for x in view.tenants() {
            let holds = after.get(x.name()).copied().unwrap_or(0);
            assert!(x.limit().is_none_or(|l| holds as u64 <= l), "tick {t}: {} past its limit", x.name());
            if preempted(&d).iter().any(|&id| view.job(id).unwrap().tenant() == x.name()) {
                assert!(
                    past(x.name()) >= floor - 1e-6,
                    "tick {t}: {} left {} from its entitlement: {d:?}",
                    x.name(),
                    past(x.name())
                );
            }
        }
    }
    (placements, preemptions)
}

#[test]
fn every_decision_on_a_busy_world_of_tenants_passes_the_hosts_rules() {
    for (config, seed) in [
        (DEFAULT, 0x9e37_79b9_7f4a_7c15),
        (r#"{"order": "fifo", "backfill": false, "min-run-s": 120}"#, 0x2545_f491_4f6c_dd1d),
        (r#"{"order": "fifo", "interval-s": 300, "max-preemptions": 8, "half-life-s": 600}"#, 0x1234_5678_9abc_def1),
    ] {
        let (placements, preemptions) = run_busy_world(config, 400, seed);
        assert!(placements > 100 && preemptions > 5, "{config}: {placements} placed, {preemptions} preempted");
    }
    let mut h = policy(DEFAULT, TestWorld::gpu_cluster(&[4, 4, 2, 8]));
    churn(&mut h, 300, 0x9e37_79b9_7f4a_7c15, 8, |d| assert!(preempted(d).is_empty(), "one tenant: {d:?}"));
}
