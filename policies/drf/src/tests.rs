use wasmsched_sdk::testing::{Dice, Harness, JobBuilder, TestWorld, churn, job, placed, tenant};

use super::*;

/// Rounds on every call, the default estimates.
const EVERY: &str = "{}";

fn drf(config: &str, world: TestWorld) -> Harness<Drf> {
    Harness::from_config(config, world).unwrap()
}

/// A tick whose decision must pass the host's checks.
fn tick(h: &mut Harness<Drf>, by: f64) -> Decision {
    let d = h.tick(Seconds(by)).unwrap();
    assert_eq!(sched::check(&h.runner().view(), &d), Ok(()), "{d:?}");
    d
}

fn gpu_job(name: &str, tenant: &str, gpus: u32) -> JobBuilder {
    job(name, "cifar10").gpus(gpus).tenant(tenant)
}

/// A job of `tenant` already running on node 0 with these GPUs.
fn running(w: &mut TestWorld, name: &str, tenant: &str, gpus: &[u32]) -> JobId {
    let j = w.queue_job(gpu_job(name, tenant, gpus.len() as u32));
    w.start(j, NodeId(0), gpus);
    j
}

fn share(h: &Harness<Drf>, tenant: &str) -> Share {
    h.policy().shares().iter().find(|s| s.tenant == tenant).cloned().unwrap_or_else(|| panic!("no share for {tenant}"))
}

fn reason(d: &Decision, job: JobId) -> &str {
    d.pending_reasons().iter().find(|(j, _)| *j == job).map_or("", |(_, r)| r.as_str())
}

fn jobs_placed(d: &Decision) -> Vec<JobId> {
    placed(d).into_iter().map(|(j, _)| j).collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn a_gpu_heavy_and_a_cpu_heavy_tenant_end_with_equal_dominant_shares() {
    // 8 GPUs, 16 cores, 128 GiB: a GPU's share is 2 cores and 16 GiB.
    let mut w = TestWorld::gpu_cluster(&[4, 4]);
    let s0 = running(&mut w, "s0", "speech", &[0]);
    let v0 = running(&mut w, "v0", "vision", &[1]);
    w.set_cpu_use(s0, Millicores(6000)); // speech: CPU 6/16, its dominant resource
    w.set_cpu_use(v0, Millicores(500)); // vision: counted at its GPU's share, 2 cores
    let s: Vec<JobId> = (1..=6).map(|i| w.queue_job(gpu_job(&format!("s{i}"), "speech", 1))).collect();
    let v: Vec<JobId> = (1..=6).map(|i| w.queue_job(gpu_job(&format!("v{i}"), "vision", 1))).collect();
    let mut h = drf(EVERY, w);
    let d = tick(&mut h, 30.0);
    // Although speech's jobs came first: vision from 1/8 to 3/8, then in turn (speech first on
    // a tie, by name) until the six free GPUs are gone.
    assert_eq!(jobs_placed(&d), [v[0], v[1], s[0], v[2], s[1], v[3]]);
    let (speech, vision) = (share(&h, "speech"), share(&h, "vision"));
    assert_eq!((speech.resource, vision.resource), (Resource::Cpu, Resource::Gpus));
    assert!(close(speech.dominant, 0.625) && close(vision.dominant, 0.625), "{speech:?} {vision:?}");
    let why = reason(&d, s[2]);
    assert!(why.starts_with("tenant speech: dominant share 0.6") && why.contains("(CPU), behind vision"), "{why}");
    assert!(d.actions()[0].reason().starts_with("drf: tenant vision had the lowest dominant share, 0.12"));
    // Speech's first job ends, but its new ones turn out to use 6 cores each: at 12 of 16 cores
    // it is further over than vision, which gets the GPU speech freed.
    for &j in &s[..2] {
        h.world.set_cpu_use(j, Millicores(6000));
    }
    h.world.remove_job(s0);
    let d = tick(&mut h, 30.0);
    assert_eq!(jobs_placed(&d), [v[4]]);
}

#[test]
fn a_tenant_of_weight_two_gets_about_twice_the_dominant_share() {
    let mut w = TestWorld::gpu_cluster(&[4, 4, 4]);
    w.declare(tenant("a").weight(2.0));
    w.declare(tenant("b"));
    for i in 0..12 {
        w.queue_job(gpu_job(&format!("b{i}"), "b", 1));
        w.queue_job(gpu_job(&format!("a{i}"), "a", 1));
    }
    let mut h = drf(EVERY, w);
    let d = tick(&mut h, 30.0);
    assert_eq!(placed(&d).len(), 12);
    let view = h.runner().view();
    let held = |t: &str| jobs_placed(&d).into_iter().filter(|&j| view.job(j).unwrap().tenant() == t).count();
    assert_eq!((held("a"), held("b")), (8, 4));
    let (a, b) = (share(&h, "a"), share(&h, "b"));
    assert!(close(a.dominant, 2.0 * b.dominant) && close(a.weighted(), b.weighted()), "{a:?} {b:?}");
    let waits = view.queue().find(|j| j.tenant() == "a" && !jobs_placed(&d).contains(&j.id())).unwrap();
    let why = reason(&d, waits.id());
    assert!(why.starts_with("tenant a: weighted dominant share 0.33 (GPUs)"), "{why}");
}

#[test]
fn the_tenant_with_the_lower_dominant_share_goes_first_and_its_jobs_in_arrival_order() {
    let mut w = TestWorld::gpu_cluster(&[4]);
    running(&mut w, "x0", "x", &[0, 1]);
    let x1 = w.queue_job(gpu_job("x1", "x", 1));
    w.advance(Seconds(1.0));
    let y1 = w.queue_job(gpu_job("y1", "y", 1));
    w.advance(Seconds(1.0));
    let y2 = w.queue_job(gpu_job("y2", "y", 1));
    let mut h = drf(EVERY, w);
    let d = tick(&mut h, 30.0);
    assert_eq!(placed(&d), [(y1, vec![(0, vec![2])]), (y2, vec![(0, vec![3])])]);
    assert_eq!(reason(&d, x1), "tenant x: dominant share 0.50 (GPUs), behind y (0.25)");
    assert_eq!(d.actions()[1].reason(), "drf: tenant y had the lowest dominant share, 0.25 (GPUs)");
}

#[test]
fn within_a_tenant_a_later_job_that_fits_passes_an_earlier_one_that_does_not() {
    let mut w = TestWorld::gpu_cluster(&[4]);
    running(&mut w, "x0", "x", &[0, 1]);
    let big = w.queue_job(gpu_job("big", "y", 3));
    w.advance(Seconds(1.0));
    let small = w.queue_job(gpu_job("small", "y", 1));
    let mut h = drf(EVERY, w);
    let d = tick(&mut h, 30.0);
    assert_eq!(jobs_placed(&d), [small]);
    assert_eq!(reason(&d, big), "3 GPUs asked, 1 free");
}

#[test]
fn a_tenant_without_room_under_its_quota_is_skipped_and_the_others_go_ahead() {
    let mut w = TestWorld::gpu_cluster(&[4, 4]);
    w.declare(tenant("a").quota(2));
    running(&mut w, "a0", "a", &[0, 1]);
    running(&mut w, "b0", "b", &[2, 3]);
    let b1 = w.queue_job(gpu_job("b1", "b", 4));
    let a1 = w.queue_job(gpu_job("a1", "a", 1));
    let a2 = w.queue_job(job("a2", "ncf").tenant("a"));
    let b2 = w.queue_job(gpu_job("b2", "b", 1));
    let mut h = drf(EVERY, w);
    let d = tick(&mut h, 30.0);
    // a ties b at 2/8 and goes first by name: its GPU job is over its quota, its CPU job is not.
    assert_eq!(jobs_placed(&d), [a2, b1]);
    assert_eq!(reason(&d, a1), "tenant a holds 2 GPUs of its limit of 2 (its quota); 1 more would pass it");
    assert_eq!(reason(&d, b2), "1 GPUs asked, 0 free");
    assert!(d.pending_reasons().len() == 2, "{:?}", d.pending_reasons());
}

#[test]
fn a_tenants_limit_is_held_as_the_round_places() {
    let mut w = TestWorld::gpu_cluster(&[8]);
    w.declare(tenant("a").quota(3).cohort("lab"));
    w.declare(tenant("b").quota(1).cohort("lab"));
    let a: Vec<JobId> = (0..4).map(|i| w.queue_job(gpu_job(&format!("a{i}"), "a", 1))).collect();
    let b: Vec<JobId> = (0..2).map(|i| w.queue_job(gpu_job(&format!("b{i}"), "b", 1))).collect();
    let mut h = drf(EVERY, w);
    let d = tick(&mut h, 30.0);
    // The cohort holds 4 at most: a, b, a, b by turns fill it, held as placed; a's last two wait.
    assert_eq!(jobs_placed(&d), [a[0], b[0], a[1], b[1]]);
    for j in &a[2..] {
        assert!(reason(&d, *j).contains("cohort lab holds 4"), "{}", reason(&d, *j));
    }
}

#[test]
fn nodes_that_take_no_work_count_for_nothing_and_get_nothing() {
    let mut w = TestWorld::gpu_cluster(&[4, 4]);
    w.set_takes_work(NodeId(1), false);
    running(&mut w, "a0", "a", &[0]);
    let b: Vec<JobId> = (0..4).map(|i| w.queue_job(gpu_job(&format!("b{i}"), "b", 1))).collect();
    let cpu = w.queue_job(job("cpu", "ncf").tenant("b"));
    let mut h = drf(EVERY, w);
    let d = tick(&mut h, 30.0);
    assert!(placed(&d).iter().all(|(_, entries)| entries.iter().all(|(n, _)| *n == 0)), "{d:?}");
    assert_eq!(jobs_placed(&d), [b[0], b[1], b[2], cpu]);
    assert_eq!(reason(&d, b[3]), "1 GPUs asked, 0 free");
    // Four GPUs and 8 cores count, not eight and 16: a's one GPU is a quarter.
    let a = share(&h, "a");
    assert!(close(a.dominant, 0.25), "{a:?}");
    h.world.set_takes_work(NodeId(0), false);
    let late = h.world.queue_job(job("late", "ncf").tenant("a"));
    let d = tick(&mut h, 30.0);
    assert!(placed(&d).is_empty());
    assert_eq!(reason(&d, late), "a CPU job; no node takes work now");
}

#[test]
fn a_cpu_job_counts_as_configured_and_an_idle_job_as_its_gpus_share_of_the_node() {
    let mut w = TestWorld::gpu_cluster(&[4]);
    let c = w.queue_job(job("c", "ncf").tenant("c"));
    w.start(c, NodeId(0), &[]);
    w.set_cpu_use(c, Millicores(100));
    running(&mut w, "g0", "g", &[0]);
    w.queue_job(gpu_job("g1", "g", 1));
    let mut h = drf(r#"{"cpu-job-millicores": 4000, "cpu-job-memory-bytes": 1073741824}"#, w);
    tick(&mut h, 30.0);
    let (c, g) = (share(&h, "c"), share(&h, "g"));
    assert_eq!((c.resource, g.resource), (Resource::Cpu, Resource::Gpus));
    assert!(close(c.dominant, 0.5) && close(g.dominant, 0.5), "{c:?} {g:?}");
}

#[test]
fn rounds_come_every_interval_and_jobs_that_arrive_between_wait_for_the_next() {
    let mut h = drf(r#"{"interval-s": 60}"#, TestWorld::gpu_cluster(&[4]));
    assert_eq!(tick(&mut h, 0.0).next_call(), Some(Seconds(60.0)));
    let a = h.world.queue_job(gpu_job("a", "t", 1));
    let d = tick(&mut h, 30.0);
    assert!(d.is_empty() && d.next_call() == Some(Seconds(30.0)), "{d:?}");
    assert_eq!(jobs_placed(&tick(&mut h, 30.0)), [a]);
}

#[test]
fn a_bad_config_is_refused() {
    let refused = |c: &str| match Harness::<Drf>::from_config(c, TestWorld::new()) {
        Err(PolicyError::InvalidConfig(m)) => m,
        other => panic!("{c} accepted: {}", other.is_ok()),
    };
    assert!(refused(r#"{"interval-s": -1}"#).contains("interval-s must be zero"));
    assert!(refused(r#"{"cpu-job-millicores": 0}"#).contains("above 0"));
    assert!(refused(r#"{"cpu-job-memory-bytes": 0}"#).contains("above 0"));
    assert!(refused(r#"{"cpu-job-millicores": -5}"#).contains("invalid value"));
    assert!(refused(r#"{"interval-s": "30s"}"#).contains("invalid type"));
    assert!(refused(r#"{"preempt": true}"#).contains("preempt"));
    let ok = r#"{"cpu-job-millicores": 2000, "cpu-job-memory-bytes": 8589934592, "interval-s": 30}"#;
    assert!(Harness::<Drf>::from_config(ok, TestWorld::new()).is_ok());
    assert!(Harness::<Drf>::from_config("", TestWorld::new()).is_ok());
}

#[test]
fn every_decision_on_a_busy_world_passes_the_hosts_rules_and_nothing_is_preempted() {
    for quota in [None, Some(10)] {
        let mut w = TestWorld::gpu_cluster(&[4, 4, 2, 8]);
        w.node("cpu", Millicores(16000), Bytes::gib(64));
        if let Some(q) = quota {
            w.declare(tenant("default").quota(q));
        }
        let mut h = drf(EVERY, w);
        let mut placements = 0;
        churn(&mut h, 300, 0x9e37_79b9_7f4a_7c15, 8, |d| {
            assert!(d.actions().iter().all(|a| matches!(a.kind(), ActionKind::Place(_))), "drf only places");
            placements += d.actions().len();
        });
        assert!(placements > 50, "quota {quota:?}: {placements} placements");
    }
}

#[test]
fn many_tenants_with_limits_weights_and_cordons_stay_within_the_hosts_rules() {
    let mut w = TestWorld::gpu_cluster(&[4, 4, 2, 8]);
    w.node("cpu", Millicores(16000), Bytes::gib(64));
    w.declare(tenant("a").quota(6).cohort("lab"));
    w.declare(tenant("b").quota(4).borrowing_limit(2).cohort("lab"));
    w.declare(tenant("c").quota(3));
    w.declare(tenant("d").weight(3.0));
    let tenants = ["a", "b", "c", "d", "e"];
    let mut h = drf(EVERY, w);
    let mut dice = Dice(0x2545_f491_4f6c_dd1d);
    let mut below = |n: u64| dice.below(n);
    let mut placements = 0;
    for t in 0..300 {
        for _ in 0..below(4) {
            let (gpus, replicas) = [(0, 1), (1, 1), (2, 1), (4, 2), (3, 3), (8, 1)][below(6) as usize];
            let tenant = tenants[below(5) as usize];
            h.world.queue_job(job(&format!("j{t}"), "cifar10").gpus(gpus).replicas(replicas).tenant(tenant));
        }
        let view_jobs: Vec<JobId> = h.runner().view().jobs().map(|j| j.id()).collect();
        for id in view_jobs {
            match below(10) {
                0 => h.world.remove_job(id),
                1 => h.world.set_cpu_use(id, Millicores(below(12000))),
                _ => {}
            }
        }
        if t % 50 == 25 {
            h.world.set_takes_work(NodeId(below(4) as u32), t % 100 != 25);
        }
        let d = tick(&mut h, 30.0);
        assert!(d.pending_reasons().len() <= REASONS);
        placements += placed(&d).len();
        let view = h.runner().view();
        let ledger = view.ledger();
        for (i, t) in view.tenants().enumerate() {
            if let Some(limit) = t.limit() {
                assert!(ledger.held(i) <= limit, "{} holds {} of {limit}", t.name(), ledger.held(i));
            }
        }
    }
    assert!(placements > 100, "{placements} placements");
}
