use wasmsched_sdk::testing::{Harness, TestWorld, churn, job, placed, tenant};

use super::*;

fn quota(config: Config, world: TestWorld) -> Harness<Quota> {
    Harness::new(Quota::new(config).unwrap(), world)
}

/// Eight GPUs on two nodes; tenants a and b with a quota of 4 each in cohort "lab", and c with
/// no quota.
fn lab() -> TestWorld {
    let mut w = TestWorld::gpu_cluster(&[4, 4]);
    w.declare(tenant("a").quota(4).cohort("lab"));
    w.declare(tenant("b").quota(4).cohort("lab"));
    w.declare(tenant("c"));
    w
}

fn one_gpu(name: &str, tenant: &str) -> wasmsched_sdk::testing::JobBuilder {
    job(name, "cifar10").gpus(1).tenant(tenant)
}

fn preempted(d: &Decision) -> Vec<JobId> {
    d.actions().iter().filter(|a| matches!(a.kind(), ActionKind::Preempt)).map(|a| a.job()).collect()
}

fn checked(h: &mut Harness<Quota>, by: f64) -> Decision {
    let d = h.tick(Seconds(by)).unwrap();
    assert_eq!(sched::check(&h.runner().view(), &d), Ok(()), "{d:?}");
    d
}

#[test]
fn a_tenant_borrows_its_cohorts_idle_quota_and_gives_it_back_when_the_owner_waits() {
    let mut w = lab();
    let a: Vec<JobId> = (0..6).map(|i| w.queue_job(one_gpu(&format!("a{i}"), "a"))).collect();
    let mut h = quota(Config::default(), w);
    let d = checked(&mut h, 30.0);
    assert_eq!(placed(&d).len(), 6, "four within a's quota, two borrowed from b's idle four");
    assert!(d.actions()[4].reason().contains("borrows"), "{:?}", d.actions()[4]);
    // b's four jobs arrive: two on the idle GPUs, and the two a borrowed come back, the most
    // recently started of a's jobs first, for the other two.
    let b: Vec<JobId> = (0..4).map(|i| h.world.queue_job(one_gpu(&format!("b{i}"), "b"))).collect();
    let d = checked(&mut h, 30.0);
    assert_eq!(preempted(&d), [a[5], a[4]]);
    let started: Vec<JobId> = placed(&d).into_iter().map(|(j, _)| j).collect();
    assert_eq!(started, b, "placed in the same decision, on the GPUs taken back");
    // a is at its quota and b too: a's preempted jobs wait, and nothing more is taken.
    let b4 = h.world.queue_job(one_gpu("b4", "b"));
    let d = checked(&mut h, 30.0);
    assert!(preempted(&d).is_empty() && placed(&d).is_empty(), "{d:?}");
    let reasons = d.pending_reasons();
    assert!(reasons.iter().any(|(j, why)| *j == b4 && why.contains("cohort lab holds 8")), "{reasons:?}");
    assert!(reasons.iter().any(|(j, why)| *j == a[4] && why.contains("cohort lab holds 8")), "{reasons:?}");
}

#[test]
fn without_a_cohort_a_tenant_never_passes_its_quota_even_on_an_idle_cluster() {
    let mut w = TestWorld::gpu_cluster(&[4, 4]);
    w.declare(tenant("solo").quota(3));
    let jobs: Vec<JobId> = (0..5).map(|i| w.queue_job(one_gpu(&format!("s{i}"), "solo"))).collect();
    let mut h = quota(Config::default(), w);
    let d = checked(&mut h, 30.0);
    let started: Vec<JobId> = placed(&d).into_iter().map(|(j, _)| j).collect();
    assert_eq!(started, jobs[..3]);
    let why = &d.pending_reasons()[0].1;
    assert_eq!(why, "tenant solo holds 3 GPUs of its limit of 3 (its quota); 1 more would pass it");
}

#[test]
fn tenants_without_a_quota_run_on_what_is_idle_and_are_taken_back_first() {
    let mut w = lab();
    let c: Vec<JobId> = (0..7).map(|i| w.queue_job(one_gpu(&format!("c{i}"), "c"))).collect();
    let a0 = w.queue_job(one_gpu("a0", "a"));
    let mut h = quota(Config::default(), w);
    let d = checked(&mut h, 30.0);
    assert_eq!(placed(&d).len(), 8, "c fills seven idle GPUs, a0 takes the last within its quota");
    // a borrows: b's quota is idle. Then a's quota job arrives with nothing free: c's newest
    // job goes, not a's.
    let a1 = h.world.queue_job(job("a1", "cifar10").gpus(2).tenant("a"));
    let d = checked(&mut h, 30.0);
    assert_eq!(preempted(&d), [c[6], c[5]], "the most recently started of the tenant without a quota");
    assert_eq!(placed(&d).into_iter().map(|(j, _)| j).collect::<Vec<_>>(), [a1]);
    let _ = a0;
}

#[test]
fn reclaim_waits_for_min_run_and_stops_at_max_preemptions() {
    let mut w = lab();
    for i in 0..8 {
        w.queue_job(one_gpu(&format!("a{i}"), "a"));
    }
    let config = Config { min_run_s: 600.0, max_preemptions: 1, ..Config::default() };
    let mut h = quota(config, w);
    assert_eq!(placed(&checked(&mut h, 30.0)).len(), 8, "a borrows all of b's quota");
    for i in 0..2 {
        h.world.queue_job(one_gpu(&format!("b{i}"), "b"));
    }
    let d = checked(&mut h, 30.0);
    assert!(preempted(&d).is_empty(), "a's jobs have run 30 s of the 600 s they must");
    let reasons = d.pending_reasons();
    assert!(reasons.iter().all(|(_, why)| why.contains("waiting for lent GPUs to come back")), "{reasons:?}");
    let d = checked(&mut h, 600.0);
    assert_eq!(preempted(&d).len(), 1, "one preemption a round at most");
    assert_eq!(placed(&d).len(), 1);
    let d = checked(&mut h, 30.0);
    assert_eq!((preempted(&d).len(), placed(&d).len()), (1, 1));
}

#[test]
fn strict_fifo_holds_a_tenants_later_jobs_behind_its_first_waiting_one() {
    let mut w = TestWorld::gpu_cluster(&[4]);
    w.declare(tenant("a").quota(4));
    w.declare(tenant("b").quota(0));
    let big = w.queue_job(job("big", "cifar10").gpus(4).tenant("a"));
    let blocker = w.queue_job(one_gpu("other", "c"));
    let small = w.queue_job(one_gpu("small", "a"));
    let strict = Config { queueing: Queueing::StrictFifo, reclaim: false, ..Config::default() };
    let mut h = quota(strict, w);
    h.world.start(blocker, NodeId(0), &[0]);
    let d = checked(&mut h, 30.0);
    assert!(placed(&d).is_empty(), "big does not fit; small waits behind it");
    assert!(d.pending_reasons().iter().any(|(j, why)| *j == small && why.contains("strict FIFO")));
    assert!(d.pending_reasons().iter().any(|(j, _)| *j == big));
    let mut w = TestWorld::gpu_cluster(&[4]);
    w.declare(tenant("a").quota(4));
    w.queue_job(job("big", "cifar10").gpus(4).tenant("a"));
    let blocker = w.queue_job(one_gpu("other", "c"));
    let small = w.queue_job(one_gpu("small", "a"));
    let mut h = quota(Config { reclaim: false, ..Config::default() }, w);
    h.world.start(blocker, NodeId(0), &[0]);
    let started: Vec<JobId> = placed(&checked(&mut h, 30.0)).into_iter().map(|(j, _)| j).collect();
    assert_eq!(started, [small], "best-effort FIFO lets it go ahead");
}

#[test]
fn bad_config_is_refused_and_state_survives_a_swap() {
    assert!(Quota::new(Config { min_run_s: -1.0, ..Config::default() }).is_err());
    assert!(Harness::<Quota>::from_config(r#"{"queueing": "lifo"}"#, TestWorld::new()).is_err());
    let mut w = lab();
    w.queue_job(one_gpu("a0", "a"));
    let mut h = quota(Config::default(), w);
    checked(&mut h, 30.0);
    checked(&mut h, 30.0);
    let fresh = h.swap_into(Quota::new(Config::default()).unwrap()).unwrap();
    assert_eq!(fresh.state.started.len(), 1, "when a0 started");
}

#[test]
fn churn_never_breaks_the_contract() {
    let mut w = lab();
    w.declare(tenant("d").quota(2));
    let mut h = quota(Config::default(), w);
    churn(&mut h, 200, 7, 5, |_| {});
}
