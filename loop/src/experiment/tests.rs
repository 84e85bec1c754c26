use super::*;

fn config() -> ExperimentConfig {
    ExperimentConfig::switchback(
        vec!["fifo".into(), "tiresias".into()],
        Duration::from_secs(600),
        Duration::from_secs(60),
        7,
    )
}

#[test]
fn every_group_runs_each_arm_once_in_its_own_random_order() {
    let c = config();
    let mut orders = std::collections::BTreeSet::new();
    for group in 0..20u64 {
        let arms: Vec<usize> = (0..2).map(|k| c.block_at((group * 2 + k) * 600_000 + 5).arm).collect();
        assert_eq!(arms.iter().copied().collect::<std::collections::BTreeSet<_>>().len(), 2, "{arms:?}");
        orders.insert(arms);
    }
    assert_eq!(orders.len(), 2, "both orders occur over 20 groups");
    assert!(!c.block_at(30_000).warm && c.block_at(60_000).warm, "the first minute is burn-in");
    assert_eq!(c.block_at(1_199_999).index, 1);
}

#[test]
fn a_config_that_cannot_run_says_what_to_change() {
    let mut c = config();
    c.arms = vec!["fifo".into(), "fifo".into()];
    assert!(c.check().unwrap_err().to_string().contains("two or more different policies"));
    let mut c = config();
    c.burn_in = c.block;
    assert!(c.check().unwrap_err().to_string().contains("longer than burn-in"));
    let parsed: ExperimentConfig =
        toml::from_str("arms = [\"fifo\", \"tiresias\"]\nblock = \"20m\"\nburn-in = \"2m\"").unwrap();
    assert_eq!(parsed.block, Duration::from_secs(1200));
    assert!(parsed.check().is_ok());
    assert!(toml::from_str::<ExperimentConfig>("arms = [\"a\", \"b\"]\ndesign = \"interleaved\"").is_err());
    let split: ExperimentConfig =
        toml::from_str("arms = [\"a\", \"b\"]\ndesign = \"split\"\nassign = \"tenant\"").unwrap();
    assert_eq!((split.design, split.assign), (Design::Split, Assign::Tenant));
    let pooled = |pools: &str, design: &str| {
        let text = format!("arms = [\"a\", \"b\"]\ndesign = \"{design}\"\npools = {pools}");
        toml::from_str::<ExperimentConfig>(&text).unwrap().check()
    };
    assert!(pooled("[[\"n0\"], [\"n1\"]]", "split").is_ok());
    for (pools, design) in
        [("[[\"n0\"], [\"n1\"]]", "switchback"), ("[[\"n0\"]]", "split"), ("[[\"n0\"], [\"n0\"]]", "split")]
    {
        let err = pooled(pools, design).unwrap_err().to_string();
        assert!(err.contains("one list of node names per arm"), "{pools} {design}: {err}");
    }
}

/// Jobs of 600 s of work, one a minute for `hours`, each served every 30 s tick at the speed
/// `speed` gives it (1: full), `ledger` observing after each tick; the jobs that arrived.
fn serve(ledger: &mut Ledger, hours: u64, speed: impl Fn(&Ledger, &wit::JobSpec) -> f64) -> Vec<wit::JobSpec> {
    let mut world = wasmsched_core::world::sample::world(1, 0, 0);
    let mut live: Vec<(JobId, f64)> = Vec::new();
    let mut arrived = Vec::new();
    let tick = 30_000;
    for step in 0..(hours * 3_600_000 / tick) {
        let now = step * tick;
        world.set_time_ms(now);
        live.retain_mut(|(job, left)| {
            *left -= speed(ledger, world.spec(*job).unwrap()) * tick as f64 / 1000.0;
            let stay = *left > 1e-9;
            if !stay {
                world.remove_job(*job);
            }
            stay
        });
        if now % 60_000 == 0 {
            let mut spec = wasmsched_core::world::sample::job_spec(arrived.len());
            (spec.name, spec.arrival_ms) = (format!("job-{}", arrived.len()), now);
            arrived.push(spec.clone());
            live.push((world.add_job(spec, NodeId(0)), 600.0));
        }
        ledger.observe(&world);
        let block = ledger.decide_at(now);
        assert!(!ledger.config.is_split() || block.warm == (now >= 1_200_000), "a split's first burn-in only");
    }
    arrived
}

/// Jobs served at full speed while arm 1 is active and at half speed under arm 0: in
/// steady state a job spends 1,200 s in the system under arm 0 and 600 s under arm 1.
/// Blocks of two hours with a burn-in of 20 minutes (longer than a stay) let Little's law
/// see each arm's own steady state.
#[test]
fn littles_law_recovers_each_arms_time_in_the_system() {
    let c = ExperimentConfig::switchback(
        vec!["slow".into(), "fast".into()],
        Duration::from_secs(7200),
        Duration::from_secs(1200),
        7,
    );
    let mut ledger = Ledger::new(c);
    serve(&mut ledger, 80, |l, _| if l.current.map_or(0, |b| b.arm) == 1 { 1.0 } else { 0.5 });
    let versus = ledger.versus();
    let little = versus.iter().find(|v| v.estimate == Estimate::LittleJct).unwrap();
    // 600 / 1200 - 1 = -50 %, up to the discreteness of 30 s ticks.
    assert!((little.change + 0.5).abs() < 0.05, "{little:?}");
    let [lo, hi] = little.interval.unwrap();
    assert!(lo < little.change && little.change < hi && hi < 0.0, "{little:?}");
    assert_eq!(ledger.groups(), 20);
    assert!(little.sentence().starts_with("fast: mean JCT (Little's law) -"), "{}", little.sentence());
}

/// The same jobs side by side: each job on an arm by its name, arm 0's jobs served at half
/// speed and arm 1's at full speed, all the time. Every block counts for both arms, and
/// Little's law per arm sees 1,200 s against 600 s.
#[test]
fn a_split_counts_each_job_for_its_own_arm_in_every_block() {
    let c = ExperimentConfig::split(
        vec!["slow".into(), "fast".into()],
        Assign::Name,
        Duration::from_secs(3600),
        Duration::from_secs(1200),
        7,
    );
    let mut ledger = Ledger::new(c.clone());
    let arrived = serve(&mut ledger, 20, |l, spec| if l.config.arm_of(spec) == 1 { 1.0 } else { 0.5 });
    // A hash of the name splits 1,200 jobs about evenly, and the same name always alike.
    let on_fast = arrived.iter().filter(|s| c.arm_of(s) == 1).count();
    assert!((500..700).contains(&on_fast), "{on_fast} of {} on arm 1", arrived.len());
    assert!(arrived.iter().all(|s| c.arm_of(s) == c.arm_of(&s.clone())));
    let versus = ledger.versus();
    let little = versus.iter().find(|v| v.estimate == Estimate::LittleJct).unwrap();
    assert!((little.change + 0.5).abs() < 0.05, "{little:?}");
    let [lo, hi] = little.interval.unwrap();
    assert!(lo < little.change && little.change < hi && hi < 0.0, "{little:?}");
    let naive = versus.iter().find(|v| v.estimate == Estimate::NaiveJct).unwrap();
    assert!((naive.change + 0.5).abs() < 0.05, "{naive:?}");
    assert_eq!(ledger.groups(), 20, "every block, the first from the end of the burn-in");
}

/// An arm's view: the other arm's queue hidden, every running job kept, and with pools
/// the nodes outside its pool down (so a placement there is refused like any on a down node).
#[test]
fn an_arms_view_holds_its_own_queue_and_pool() {
    let world = wasmsched_core::world::sample::gpu_cluster(3, 4, 6, 6);
    let mut c = ExperimentConfig::split(
        vec!["a".into(), "b".into()],
        Assign::Name,
        Duration::from_secs(600),
        Duration::from_secs(60),
        0,
    );
    let mine = |view: &World, arm| view.queue().all(|(s, _)| c.arm_of(s) == arm);
    for arm in 0..2 {
        let view = c.view(&world, arm);
        assert!(mine(&view, arm) && view.job_count() == world.job_count() && view.nodes_down().is_empty());
    }
    let hidden = world.queue().filter(|(s, _)| c.arm_of(s) == 1).count();
    assert!(hidden > 0 && hidden < 6, "the six queued jobs fall on both arms: {hidden} on b");
    c.pools = vec![vec!["node-0".into(), "node-2".into()], vec!["node-1".into()]];
    let down = |arm| c.view(&world, arm).nodes_down().iter().map(|n| n.0).collect::<Vec<_>>();
    assert_eq!((down(0), down(1)), (vec![1], vec![0, 2]));
}

/// Every job arrives and ends in the first of several blocks: the figures are there, but an
/// interval over the blocks would have only one that holds them, so none is given.
#[test]
fn no_interval_rests_on_a_single_block() {
    let c = ExperimentConfig::split(
        vec!["a".into(), "b".into()],
        Assign::Name,
        Duration::from_secs(600),
        Duration::ZERO,
        0,
    );
    let mut ledger = Ledger::new(c.clone());
    let mut world = wasmsched_core::world::sample::world(1, 0, 0);
    let names: Vec<String> = (0..40).map(|i| format!("job-{i}")).collect();
    let both =
        names.iter().map(|n| c.arm_of(&wit::JobSpec { name: n.clone(), ..wasmsched_core::world::sample::job_spec(0) }));
    assert_eq!(both.collect::<std::collections::BTreeSet<_>>().len(), 2, "both arms have jobs");
    let mut jobs = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let spec = wit::JobSpec { name: name.clone(), arrival_ms: 0, ..wasmsched_core::world::sample::job_spec(i) };
        jobs.push(world.add_job(spec, NodeId(0)));
    }
    for step in 0..=120u64 {
        world.set_time_ms(step * 30_000);
        if step == 10 {
            jobs.iter().for_each(|&j| _ = world.remove_job(j));
        }
        ledger.observe(&world);
        ledger.decide_at(world.time_ms());
    }
    assert!(ledger.groups() >= 5);
    let naive = ledger.versus().into_iter().find(|v| v.estimate == Estimate::NaiveJct).unwrap();
    assert!(naive.change.is_finite() && naive.interval.is_none(), "{naive:?}");
}
